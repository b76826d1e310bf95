"""How a fitted LIME explainer explains a range of rows: slices of rows to
the workers, a group's neighbourhoods in one model call, each row's
surrogate, and the Explanation of their results."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from sklearn_plm_explain._lime._output import effective_samples
from sklearn_plm_explain._lime._query import lime_blackbox, query_group
from sklearn_plm_explain._lime._results import (
    as_explanation,
    partial_rows,
    presented,
    row_result,
    stack_rows,
)
from sklearn_plm_explain._lime._sampling import (
    _Group,
    _row_streams,
    draw_neighbourhoods,
    sobol_table,
)
from sklearn_plm_explain._lime._surrogate import (
    _distances,
    holdout_score,
    holdout_weights,
    lime_fit,
)
from sklearn_plm_explain._utils._errors import ModelResponseError
from sklearn_plm_explain._utils._parallel import map_even_slices

# Query points sent to the model per group of rows when ``batch_size`` is None.
_DEFAULT_POINTS_PER_GROUP = 2**15
# ... and at most this many values (16 MiB): at image width, larger groups
# spend more time writing fresh memory (ours and the model's) than
# computing; arrays under the allocator's 32 MiB limit are reused, larger ones
# are mapped afresh on every call.
_DEFAULT_VALUES_PER_GROUP = 2**21


class RowGroupsMixin:
    """The part of the LIME explainers that explains a range of validated rows and assembles their Explanation."""

    def _explain_range(
        self, rows_data, target_spec, seed, holdout, bounds, bar, pool=None
    ):
        """The Explanation of rows ``start:stop`` of the validated batch.

        With a progress bar the rows go in steps of a few model calls per
        worker, each step counted on the bar as it returns; to the workers of
        ``pool`` when one is given (see
        :func:`~sklearn_plm_explain._utils._parallel.worker_pool`).
        """
        targets, extra, keep_labels = target_spec
        start, stop = bounds
        parts = []
        for a, b in _progress_steps(self, start, stop):
            try:
                parts += map_even_slices(
                    self._explain_slice,
                    b - a,
                    self.n_jobs,
                    rows_data,
                    targets,
                    extra,
                    seed,
                    holdout,
                    start=a,
                    pool=pool,
                )
            except ModelResponseError as err:
                err.partial = None
                done = getattr(err, "_finished_rows", None)
                if done is not None and not holdout:
                    template = self._not_run_result(extra)
                    rows = partial_rows(parts, done, template, bounds)
                    err.partial = self._present_rows(
                        rows, rows_data, keep_labels, start, stop
                    )
                raise
            bar.update(b - a)
        rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        return self._as_explanation(rows, keep_labels)

    def _not_run_explanation(self, rows_data, extra, keep_labels, start, stop):
        """Rows ``start:stop`` marked not run (the model failed first)."""
        # An empty range still needs one row to carry the fields' shapes (a
        # template for joining partial results); it is cut off again below.
        rows = [self._not_run_result(extra) for _ in range(max(stop - start, 1))]
        full = self._present_rows(
            rows, rows_data, keep_labels, start, max(stop, start + 1)
        )
        return full[: stop - start]

    def _present_rows(self, rows, rows_data, keep_labels, start, stop):
        """An Explanation of per-row results of rows ``start:stop``, with
        what readers see (labels with conditions, contributions) added."""
        out = stack_rows(rows)
        _, x_code, z0, _, X_orig = rows_data
        index = np.arange(start, stop) % max(x_code.shape[0], 1)
        out.update(self._presented(out, index, x_code, z0, X_orig))
        return self._as_explanation(out, keep_labels)

    def _presented(self, out, rows, x_code, z0, X_orig):
        names = self._feature_names()
        return presented(self.space_, names, out, rows, x_code, z0, X_orig)

    def _as_explanation(self, rows, keep_labels):
        return as_explanation(
            rows,
            keep_labels,
            classes=self.classes_,
            feature_names=self._feature_names(),
            method=self._method_name,
            params=self._provenance(),
        )

    def _group_size(self, points_per_row):
        budget = self.batch_size or min(
            _DEFAULT_POINTS_PER_GROUP, _DEFAULT_VALUES_PER_GROUP // self.space_.d
        )
        return max(1, int(budget) // max(points_per_row, 1))

    def _explain_slice(self, sl, rows_data, targets, extra, seed, holdout):
        x_num, x_code, z0, key, X_orig = rows_data
        rows = np.arange(sl.start, sl.stop)
        table = None
        if self.sampling == "qmc":
            space = self.space_
            table = sobol_table(
                seed, space.n_cont, space.offsets.size, self._points_per_row()
            )
        gens = [_row_streams(key[i], seed, self.sampling, table) for i in rows]
        bb = lime_blackbox(self._caller, self.mode, self.n_outputs_, self.batch_size)
        results, buffers = [], []
        size = self._group_size(self.num_samples)
        try:
            for start in range(0, rows.size, size):
                grp = rows[start : start + size]
                streams = [gens[i - sl.start] for i in grp]
                ctx = _Group(grp, x_num, x_code, z0, X_orig, streams, buffers)
                results.extend(self._explain_group(ctx, bb, targets, extra))
        except ModelResponseError as err:
            # What finished survives: whole groups, and the rows of the failing
            # group that finished before the failure (S-LIME's rounds).
            results.extend(getattr(err, "_group_results", []))
            err._finished_rows = (sl.start, results)
            raise
        out = stack_rows(results)
        out.update(self._presented(out, rows, x_code, z0, X_orig))
        if holdout:
            ctx = _Group(rows, x_num, x_code, z0, X_orig, [(g[1],) for g in gens])
            out["holdout_score"] = _holdout(self, ctx, bb, out)
        return out

    # -- one group of rows: LIME -----------------------------------------------------------
    def _explained_labels(self, Y0, r, targets, extra):
        if self.classes_ is None:
            return np.array([0], dtype=np.intp)
        t = int(np.argmax(Y0)) if targets is None else int(targets[r])
        return np.concatenate([[t], extra]).astype(np.intp)

    def _explain_group(self, ctx, bb, targets, extra):
        n = self.num_samples
        Zs, Q, sizes = draw_neighbourhoods(self.space_, ctx, n, first=True)
        Ys = query_group(bb, self.space_, ctx, Q, sizes, first=True)
        out = []
        for i, r in enumerate(ctx.rows):
            labels = self._explained_labels(Ys[i][0], r, targets, extra)
            w = self._weights(Zs[i])
            fits = lime_fit(
                Zs[i],
                Ys[i],
                labels,
                w,
                self.num_features,
                self.feature_selection,
                self.model_regressor,
            )
            ess = effective_samples(w)
            ok = ess >= self._min_effective_samples()
            status = "converged" if ok else "few_effective_samples"
            out.append(
                self._row_result(
                    fits,
                    labels,
                    n,
                    converged=ok,
                    status=status,
                    n_rounds=1,
                    effective_samples=ess,
                )
            )
        return out

    def _row_result(self, fits, labels, n, **kw):
        """Per-row arrays (see ``row_result``)."""
        k = self._selected_width()
        regression = self.classes_ is None
        return row_result(self.space_, k, fits, labels, n, regression=regression, **kw)


def _progress_steps(explainer, start, stop):
    """Row ranges explained one after the other: one without a progress bar,
    else a few model calls per worker each, so the bar moves as they return."""
    if not explainer.verbose:
        return [(start, stop)]
    from joblib import effective_n_jobs

    workers = max(effective_n_jobs(explainer.n_jobs), 1)
    step = explainer._group_size(explainer.num_samples) * workers
    steps = [(a, min(a + step, stop)) for a in range(start, stop, step)]
    return steps or [(start, stop)]


def _holdout(explainer, ctx, bb, out):
    """Kernel-weighted R² of each surrogate on fresh perturbations."""
    space, m = explainer.space_, explainer.num_samples
    Zs, Q, sizes = draw_neighbourhoods(space, ctx, m, first=False)
    Ys = query_group(bb, space, ctx, Q, sizes, first=False)
    scores = np.empty(ctx.rows.size)
    for i, r in enumerate(ctx.rows):
        Z, y = Zs[i], Ys[i][:, int(out["target"][i])]
        dist = _distances(Z, ctx.z0[r])
        w = holdout_weights(dist, explainer.kernel, explainer.kernel_width_)
        coef = out["values"][i][space.perm]
        scores[i] = holdout_score(Z, y, w, out["intercept"][i], coef)
    return scores
