"""How a fitted OpenAPIExplainer explains a range of rows: its black box,
the search's configuration, the rows' result table and the Explanation
assembled from it."""

# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain._openapi._groups import (
    fill_in_groups,
    rows_per_group,
    workspace_scope,
)
from sklearn_plm_explain._openapi._radius import learned_radius
from sklearn_plm_explain._openapi._results import ResultTable
from sklearn_plm_explain._openapi._search import SearchConfig, search_in_groups
from sklearn_plm_explain._utils import _progress
from sklearn_plm_explain._utils._blackbox import BlackBox
from sklearn_plm_explain._utils._errors import ModelResponseError
from sklearn_plm_explain._utils._parallel import base_seed
from sklearn_plm_explain._utils._validation import class_indices

# init_radius="auto": rows of the background explained in fit, and the
# radius used without it.
_CALIBRATION_ROWS = 16
_DEFAULT_RADIUS = 8e-5


class RowRangeMixin:
    """The part of :class:`~sklearn_plm_explain.OpenAPIExplainer` that explains a range of validated rows with the search and assembles their Explanation."""

    def _explain_range(
        self,
        X,
        frame,
        target_idx,
        seed,
        start,
        stop,
        return_queries=False,
        bar=None,
        pool=None,
    ):
        """The Explanation of rows ``start:stop`` of the validated batch.

        The rows go to the jobs in slices of whole groups (see ``batch_size``
        and :func:`~sklearn_plm_explain._openapi._groups.task_slices`), to the workers
        of ``pool`` when one is given (see
        :func:`~sklearn_plm_explain._utils._parallel.worker_pool`), each slice
        counted on the progress bar as it returns (``bar``, or a bar of
        these rows).
        """
        if bar is None:
            desc = "OpenAPIExplainer"
            with _progress.progress_bar(stop - start, self.verbose, desc) as bar:
                return self._explain_range(
                    X, frame, target_idx, seed, start, stop, return_queries, bar, pool
                )
        config = self._search_config(return_queries)
        group = self._rows_per_group(X.shape[1])
        table = self._blank(start, stop, config.return_queries)
        args = (X, target_idx, seed, frame, config)
        with workspace_scope():
            try:
                done, library = self._first_group(table, args, group, bar)
                fill_in_groups(
                    table,
                    self._explain_rows,
                    (*args, library),
                    self.n_jobs,
                    group,
                    bar,
                    pool,
                    first=done,
                )
            except ModelResponseError as err:
                if isinstance(err.partial, ResultTable):
                    err.partial = self._assemble(err.partial, X[start:stop])
                raise
        return self._assemble(table, X[start:stop])

    def _first_group(self, table, args, group, bar):
        """With region reuse, explain the first group of ``table``'s rows on
        its own: its certified models seed every other group's, so that
        rows of the whole batch share regions while groups, the same whatever
        ``n_jobs``, run in parallel. Returns the rows done and the models."""
        config, start = args[-1], table.offset
        if not config.reuse_regions or len(table) <= group:
            return 0, None
        first = slice(start, start + group)
        try:
            part, library = self._explain_rows(first, *args, keep_library=True)
        except ModelResponseError as err:
            if isinstance(err.partial, ResultTable):
                table.put(err.partial)
            err.partial = table
            raise
        table.put(part)
        bar.update(len(part))
        return group, library

    def _rows_per_group(self, d):
        """Rows a job explains at once: all of them unless ``batch_size="auto"``."""
        if self.batch_size != "auto":
            return np.iinfo(np.intp).max
        return rows_per_group(d, self.n_witnesses, self._n_outputs)

    def _black_box(self, frame=None):
        names = getattr(self.estimator_, "feature_names_in_", None)
        template = None if frame is None else (frame, self.numeric_features_)
        bb = BlackBox(
            self.estimator_,
            self.response_method_,
            self._kind,
            self._n_outputs,
            feature_names=names,
            batch_size=None if self.batch_size == "auto" else self.batch_size,
            template=template,
        )
        if not isinstance(self.response_precision, str):
            bb.quantum = float(self.response_precision)
        return bb

    # -- the search -------------------------------------------------------------
    def _search_config(self, return_queries):
        """The search's configuration, from the parameters and fitted state."""
        return SearchConfig(
            kind=self._kind,
            n_outputs=self._n_outputs,
            scale=self.scale_,
            # A stated radius takes effect at once, as every parameter read
            # by explain does; a learned one is the fit's.
            init_radius=(
                self.init_radius_ if self.init_radius == "auto" else self.init_radius
            ),
            min_radius=self.min_radius,
            max_radius=self.max_radius,
            n_witnesses=self.n_witnesses,
            rtol=self.rtol,
            max_iter=self.max_iter,
            reuse_regions=self.reuse_regions,
            response_precision=self.response_precision,
            return_queries=bool(return_queries),
        )

    def _explain_rows(
        self, rows, X, target, seed, frame, config, library=None, keep_library=False
    ):
        """The result table of the rows ``rows`` (a slice) of the batch, a
        group of rows at a time (see ``batch_size``); ``library`` and
        ``keep_library`` as in
        :func:`~sklearn_plm_explain._openapi._search.search_in_groups`."""
        per_group = self._rows_per_group(X.shape[1])
        return search_in_groups(
            config,
            lambda: self._black_box(frame),
            X,
            target,
            seed,
            rows,
            per_group,
            library,
            keep_library,
        )

    def _blank(self, start, stop, queries=False):
        """The result table of rows ``start:stop``, not run."""
        return ResultTable.blank(
            stop - start,
            n_features=self.scale_.size,
            n_outputs=self._n_outputs,
            offset=start,
            queries=queries,
        )

    def _assemble(self, table, X):
        """One Explanation of the rows ``X`` from their result table."""
        n = X.shape[0]
        merged = dict(table.arrays)
        coef = merged.pop("coef")
        target = merged.pop("target")
        if self.classes_ is None:
            values = coef[:, :, 0]
        else:
            C = coef.shape[2]
            values = C / (C - 1) * coef[np.arange(n), :, np.maximum(target, 0)]
        names = self.get_feature_names_out()
        status = merged.pop("status")
        merged.update(self._presented(values, merged["intercept"], target, X))
        return Explanation(
            values=values,
            target=np.maximum(target, 0),
            classes=self.classes_,
            feature_names=names,
            method="openapi",
            params=self.get_params(deep=False) | {"estimator": self._estimator_repr},
            coef=coef,
            status=status,
            converged=status == "exact",
            **merged,
        )

    def _presented(self, values, intercept, target, X):
        """Contributions relative to the background mean, in the explained
        output's units (the target's mean log-ratio, or the prediction).

        On the row's region the output is ``values @ x + b`` with ``b`` the
        target's intercept (scaled like ``values``), so ``baseline = values
        @ mean_ + b`` and ``baseline + contribution.sum(1)`` is the output.
        """
        if self.classes_ is None:
            b = intercept[:, 0]
        else:
            C = intercept.shape[1]
            b = C / (C - 1) * intercept[np.arange(X.shape[0]), np.maximum(target, 0)]
        return {
            "data": X,
            "contribution": values * (X - self.mean_),
            "standardized": values * self.std_,
            "baseline": values @ self.mean_ + b,
        }

    def _learn_radius(self, X, frame):
        """The first radius learned from rows of the background (see
        :func:`~sklearn_plm_explain._openapi._radius.learned_radius`)."""
        rows = np.unique(np.linspace(0, X.shape[0] - 1, _CALIBRATION_ROWS).astype(int))
        sample = frame.iloc[rows] if frame is not None else None
        target = np.full(rows.size, -1, dtype=np.intp)
        seed = base_seed(self.random_state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            e = self._explain_range(X[rows], sample, target, seed, 0, rows.size)
        radius = learned_radius(e, self.rtol, self.min_radius, self.max_radius)
        return _DEFAULT_RADIUS if radius is None else radius

    def _resolve_classes(self, X, frame):
        if self._kind == "regression":
            if getattr(self.estimator_, "n_outputs_", 1) > 1:
                raise ValueError(
                    "Multi-output regressors are not supported; explain one "
                    "output at a time."
                )
            self._n_outputs = 1
            return None
        classes = getattr(self.estimator_, "classes_", None)
        if classes is None:
            # A bare callable: one query tells how many classes it returns.
            self._n_outputs = None
            out = self._black_box(frame).query(X[:1], np.zeros(1, dtype=np.intp))
            classes = np.arange(out.shape[1])
        self._n_outputs = max(len(classes), 2)
        return np.asarray(classes)

    def _target_indices(self, target, n):
        if self.classes_ is None or target is None:
            return np.full(n, -1, dtype=np.intp)
        return class_indices(self.classes_, target, n)
