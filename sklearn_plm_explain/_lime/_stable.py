"""S-LIME: LIME whose feature selection is stabilised by a CLT test on LARS."""

# SPDX-License-Identifier: BSD-3-Clause

import math
import numbers
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval

from sklearn_plm_explain._lime._base import _BaseLime
from sklearn_plm_explain._lime._lars_test import TIE_MARGIN, _tests_from_stats
from sklearn_plm_explain._lime._output import (
    effective_samples,
    projected_effective_samples,
)
from sklearn_plm_explain._lime._query import query_group
from sklearn_plm_explain._lime._sampling import draw_neighbourhoods
from sklearn_plm_explain._lime._surrogate import _distances, _fit_surrogate, _LocalStats
from sklearn_plm_explain._utils._errors import ModelResponseError

__all__ = ["StableLIMEExplainer"]


# Values per model call while samples grow (16 MiB of points).
_APPEND_VALUES = 2**21


def _pieces(rows, sizes, limit, block):
    """The growing rows' new points in model calls of at most ``limit``
    points: ``[[(row, m), ...], ...]``, a row's share split into chunks of
    whole ``block`` s (the last one excepted), in order."""
    chunk = max(block, limit // block * block)
    pieces, cur, room = [], [], limit
    for i, m in zip(rows, sizes):
        while m > 0:
            take = min(m, chunk)
            if cur and take > room:
                pieces.append(cur)
                cur, room = [], limit
            cur.append((i, take))
            m -= take
            room -= take
    if cur:
        pieces.append(cur)
    return pieces


class StableLIMEExplainer(_BaseLime):
    """S-LIME: LIME with a sample size chosen by a hypothesis test.

    LIME's selection of the top features is unstable: another random
    neighbourhood can change which features enter, and in which order.
    S-LIME follows the LARS path of the kernel-weighted surrogate and, before
    each of the first ``num_features`` variables enters, tests with the
    central limit theorem whether another sample of the same size would
    rank the entering feature at least level with the runner-up (level
    ``alpha``), "level" meaning within ``tie_margin`` of its residual
    correlation: candidates closer than that are treated as tied, whose
    order no sample size can settle. While a step fails, the neighbourhood
    grows to the size the observed gap asks for, by *appending* fresh
    perturbations to those already queried, up to ``n_max``.

    Parameters
    ----------
    estimator : fitted estimator or callable, default=None
        The model explained (see :class:`LimeTabularExplainer`).
    num_features : int, default=10
        Number of LARS steps tested, and of features in each explanation.
    num_samples : int, default=1000
        Initial neighbourhood size, the explained row included.
    n_max : int, default=10000
        Largest neighbourhood size.
    alpha : float, default=0.05
        Level of each one-sided test. A smaller ``alpha`` never asks for
        fewer samples.
    tie_margin : float, default=0.15
        Indifference margin of the test, relative to the entering feature's
        residual correlation ``|ĉ1|``: a step passes when, at level
        ``alpha``, the runner-up would not outrank the entering feature by
        more than ``tie_margin * |ĉ1|`` in another sample. ``0`` is the
        S-LIME paper's test, which two equally strong candidates never pass
        (their rows end at ``n_max``). A step that passes only through the
        margin stops the sample, but its row is ``"tied"``, not
        ``"converged"``, with the pair in ``ties``: ``0`` is the strict mode,
        in which only a resolved order stops. ``benchmarks/bench_stability.py``
        compares margins.
    max_growth : float or None, default=None
        Largest factor by which one round may grow the sample. The size a
        failing step asks for is extrapolated from a noisy gap (a near-tie
        asks for an unbounded size), so capping the growth lets rows that
        settle at an intermediate size stop there; ``None`` grows straight
        to the size asked for.
    mode : {"classification", "regression"}, default="classification"
        What the model's responses are.
    feature_names : array-like of str, default=None
        Names of the features; see :class:`LimeTabularExplainer`.
    categorical_features : array-like of int, str or bool, default=None
        Categorical columns; see :class:`LimeTabularExplainer`.
    discretize_continuous : bool, default=True
        Replace every numeric feature by its bin.
    discretizer : {"quartile", "decile", "entropy"}, default="quartile"
        Bins learned in ``fit``.
    sample_around_instance : bool, default=False
        Centre continuous perturbations at the row instead of the mean.
    kernel_width : float, default=None
        Kernel width; ``None`` means ``0.75 * sqrt(n_features)``.
    kernel : callable, default=None
        ``kernel(distances, kernel_width) -> weights``.
    model_regressor : regressor, default=None
        Surrogate refitted on the selected features; ``None`` is
        ``Ridge(alpha=1)`` with sample weights.
    sampling : {"qmc", "random"}, default="qmc"
        ``"qmc"`` draws each row's perturbations from a scrambled Sobol'
        sequence (points added in later rounds continue it; one sequence per
        call, read by each row through its own shift and reflection of the
        columns), with the same marginal distributions as independent draws
        but a more even cover of the neighbourhood, so the selected features
        vary less from seed to seed. The test's variance is computed as for independent
        draws, which overstates it for such a sample: the test stays
        conservative. ``"random"`` draws independently, as lime does.
    batch_size : int, default=None
        Largest number of points per model call (see
        :class:`LimeTabularExplainer`).
    n_jobs : int, default=None
        Chunks of rows explained in parallel.
    random_state : int, RandomState instance or None, default=None
        Seed; each row gets its own stream (results do not depend on the
        batch or on ``n_jobs``).
    verbose : int, default=0
        Above 0, a progress bar of the rows done (rate, time left) on
        stderr; see :class:`LimeTabularExplainer`. ``0`` prints nothing.

    Attributes
    ----------
    estimator_, classes_, categorical_features_, kernel_width_, space_, \
n_outputs_, n_features_in_, feature_names_in_
        As in :class:`LimeTabularExplainer`.

    See Also
    --------
    LimeTabularExplainer : the same engine without the test.

    Notes
    -----
    Per-row fields of the :class:`Explanation`, beyond LIME's:

    * ``selected`` -- features in LARS entry order (``-1`` pads a path shorter
      than ``num_features``); ``values`` are the ``Ridge(alpha=1)`` weights
      refitted on them.
    * ``n_samples`` -- final neighbourhood size, which is also ``n_queries``:
      points are never re-queried.
    * ``n_rounds`` -- number of fits (1 when the first sample passed).
    * ``converged`` / ``status`` -- ``"converged"`` when every tested step
      of every explained label passed, strictly: the selected features and
      their order; ``"tied"`` when some steps passed only through
      ``tie_margin`` (the set is stable, but the order of those pairs is not
      resolved: ``converged`` is False, and ``ties`` names them);
      ``"n_max_reached"`` when a step still
      failed at ``n_max`` (the stability guarantee does not hold then;
      ``explain`` warns with the count), ``"few_effective_samples"`` when the
      kernel weights' effective sample size stays below ten per surrogate
      parameter even at ``n_max`` (a kernel too narrow for the
      neighbourhood; see :class:`LimeTabularExplainer`).
    * ``ties`` -- ``(n, num_features, 2)`` pairs ``(j1, j2)`` of features
      whose order only ``tie_margin`` let pass (``-1`` pads), for the target
      label.
    * ``step_z`` -- ``(n, num_features)`` observed statistic ``(Δ +
      tie_margin |ĉ1|) / (sqrt(2) se(Δ))`` of each step of the target label
      at the final size, to compare with the ``1 − alpha`` quantile of
      Student's ``t`` with 15 degrees of freedom (1.75 for ``alpha=0.05``);
      ``inf`` for a step without rival, ``nan`` for steps a short path never
      reached (such steps are not tested: nothing is selected there).

    The standard error ``se(Δ)`` of a step's gap comes from the means of 16
    consecutive batches of the draws (see ``lars_step_tests``). With
    quasi-random sampling this matters: the formula for independent draws
    overstates the seed-to-seed spread of a Sobol' sample's gap 5 to 14
    times on breast cancer, so the paper's test fails where the selection is
    already perfectly stable; batch means overstate it 1.2 to 4 times, still
    on the safe side.

    The sample grows to ``min(max(ceil(n'), n + 1), n_max)`` (with ``n'``
    first capped at ``max_growth * n``) where ``n'`` is
    the largest size asked for by a failing step (over steps and labels;
    the reference used the first failing step only, which takes more
    rounds and is not monotone in ``alpha``).
    With ``labels`` passed to :meth:`explain`, every explained label is
    tested.

    References
    ----------
    Zhou, Z., Hooker, G., & Wang, F. (2021). S-LIME: Stabilized-LIME for
    model explanation. KDD 2021.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_plm_explain import StableLIMEExplainer
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=500).fit(X, y)
    >>> slime = StableLIMEExplainer(model, num_features=2, random_state=0).fit(X)
    >>> import warnings
    >>> with warnings.catch_warnings(record=True):  # it warns of the tie
    ...     e = slime.explain(X[:2])
    >>> e.status.tolist()
    ['tied', 'converged']
    >>> e.ties[0, 0].tolist()  # features 0 and 1: their order is not resolved
    [0, 1]
    >>> bool((e.n_queries == e.n_samples).all())
    True
    """

    _parameter_constraints: dict = {
        **_BaseLime._parameter_constraints,
        "n_max": [Interval(numbers.Integral, 2, None, closed="left")],
        "alpha": [Interval(numbers.Real, 0, 0.5, closed="neither")],
        "max_growth": [Interval(numbers.Real, 1, None, closed="neither"), None],
        "tie_margin": [Interval(numbers.Real, 0, 1, closed="left")],
    }

    _method_name = "stable_lime"

    def __init__(
        self,
        estimator=None,
        *,
        num_features=10,
        num_samples=1000,
        n_max=10000,
        alpha=0.05,
        max_growth=None,
        tie_margin=TIE_MARGIN,
        mode="classification",
        feature_names=None,
        categorical_features=None,
        discretize_continuous=True,
        discretizer="quartile",
        sample_around_instance=False,
        kernel_width=None,
        kernel=None,
        model_regressor=None,
        sampling="qmc",
        batch_size=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.num_features = num_features
        self.num_samples = num_samples
        self.n_max = n_max
        self.alpha = alpha
        self.max_growth = max_growth
        self.tie_margin = tie_margin
        self.mode = mode
        self.feature_names = feature_names
        self.categorical_features = categorical_features
        self.discretize_continuous = discretize_continuous
        self.discretizer = discretizer
        self.sample_around_instance = sample_around_instance
        self.kernel_width = kernel_width
        self.kernel = kernel
        self.model_regressor = model_regressor
        self.sampling = sampling
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _check_params(self):
        if self.n_max < self.num_samples:
            raise ValueError(
                f"n_max={self.n_max} is smaller than num_samples={self.num_samples}."
            )

    def _selected_width(self):
        return min(self.num_features, self.space_.d)

    def _warn_statuses(self, status, effective_samples, stacklevel):
        # The base's warnings are one frame further from the caller.
        super()._warn_statuses(status, effective_samples, stacklevel + 1)
        tied = status == "tied"
        if tied.any():
            warnings.warn(
                f"{int(tied.sum())} of {tied.size} rows have selected features "
                f"tied within tie_margin={self.tie_margin} (status 'tied'; the "
                "pairs are in Explanation.ties): the set is stable, but the "
                "order of each tied pair may differ in another sample. "
                "tie_margin=0 tests the order strictly.",
                ConvergenceWarning,
                stacklevel=stacklevel,
            )
        hit = status == "n_max_reached"
        if hit.any():
            warnings.warn(
                f"{int(hit.sum())} of {hit.size} rows reached n_max={self.n_max} "
                "with a LARS step still failing its test (status "
                "'n_max_reached'): their selected features may change with "
                "another random_state. Raise n_max, or tie_margin to treat "
                "closer candidates as tied.",
                ConvergenceWarning,
                stacklevel=stacklevel,
            )

    def _tested_fit(self, Z, w, Y, labels, prefix=None):
        """LARS tests and the surrogate of every explained label, and the
        statistics they came from (``prefix``: those of the sample before it
        grew, with the same weights)."""
        Yl = Y[:, labels]
        stats = _LocalStats(Z, w, Yl, prefix)
        k = self._selected_width()
        fits, tests = [], []
        for j in range(labels.size):
            t = _tests_from_stats(
                stats, Z, w, Yl[:, j], j, k, self.alpha, self.tie_margin
            )
            fit = _fit_surrogate(stats, Z, w, Yl, j, t.active, self.model_regressor)
            fits.append((t.active, fit))
            tests.append(t)
        return fits, tests, stats

    def _explain_group(self, ctx, bb, targets, extra):
        n0 = self.num_samples
        bufs = ctx.sample_buffers((self.n_max, self.space_.d))
        Zs, Q, sizes = draw_neighbourhoods(
            self.space_, ctx, n0, first=True, out=[b[:n0] for b in bufs]
        )
        Ys = query_group(bb, self.space_, ctx, Q, sizes, first=True)
        Ws = [self._weights(z) for z in Zs]
        labels = [
            self._explained_labels(Ys[i][0], r, targets, extra)
            for i, r in enumerate(ctx.rows)
        ]
        rounds = np.ones(len(ctx.rows), dtype=int)
        results = [None] * len(ctx.rows)
        try:
            self._grow_until_stable(
                ctx, bb, extra, (Zs, Ws, Ys), labels, rounds, results
            )
        except ModelResponseError as err:
            # Rows that passed before the failure are finished.
            err._group_results = results
            raise
        return results

    def _not_run_result(self, extra):
        out = super()._not_run_result(extra)
        out["step_z"] = np.full(self._selected_width(), np.nan)
        out["ties"] = _tie_pairs((), self._selected_width())
        return out

    def _grow_until_stable(self, ctx, bb, extra, samples, labels, rounds, results):
        Zs, Ws, Ys = samples
        pending = list(range(len(ctx.rows)))
        # A grown sample keeps its points, and with lime's kernel their
        # weights: its statistics continue those of the round before.
        kept = [None] * len(ctx.rows)
        while pending:
            grow, extra_sizes = [], []
            for i in pending:
                n = Zs[i].shape[0]
                w = Ws[i]
                fits, tests, stats = self._tested_fit(
                    Zs[i], w, Ys[i], labels[i], kept[i]
                )
                kept[i] = stats if self.kernel is None else None
                ess, need_ess = effective_samples(w), self._min_effective_samples()
                # A narrow kernel: the test is meaningless on so few effective
                # samples. Grow if n_max can cure it, else stop and say so.
                enough = ess >= need_ess
                hopeless = projected_effective_samples(w, self.n_max) < need_ess
                passed = enough and all(t.passed for t in tests)
                if passed or n >= self.n_max or (not enough and hopeless):
                    tied = passed and any(t.ties for t in tests)
                    status = _final_status(passed, tied, enough)
                    res = self._row_result(
                        fits,
                        labels[i],
                        n,
                        converged=passed and not tied,
                        status=status,
                        n_rounds=rounds[i],
                        order=True,
                        effective_samples=ess,
                    )
                    res["step_z"] = tests[0].z
                    res["ties"] = _tie_pairs(tests[0].ties, self._selected_width())
                    results[i] = res
                    continue
                need = max(t.n_needed for t in tests)
                if not enough:
                    need = max(need, n * need_ess / ess)
                target_n = self.n_max if not np.isfinite(need) else math.ceil(need)
                if self.max_growth is not None:
                    target_n = min(target_n, math.ceil(self.max_growth * n))
                new_n = min(max(target_n, n + 1), self.n_max)
                grow.append(i)
                extra_sizes.append(new_n - n)
            if grow:
                self._append(ctx, bb, grow, extra_sizes, samples)
                rounds[grow] += 1
            pending = grow

    def _points_per_row(self):
        return self.n_max

    def _append(self, ctx, bb, grow, extra_sizes, samples):
        """Draw the extra points of the growing rows and query them.

        Each row continues its own random stream, so the final neighbourhood
        of a row is the same whatever the other rows of the batch do. The
        points go to the model in calls of at most ``_APPEND_VALUES`` values
        (a row's share split at whole sampling blocks, which keeps its
        stream): the allocator reuses arrays of that size, while larger ones
        are mapped afresh, and first writes to fresh memory cost, on some
        virtual machines, as much as the model's own forward pass.
        """
        Zs, Ws, Ys = samples
        space = self.space_
        starts = [Zs[i].shape[0] for i in grow]
        pos = dict(zip(grow, starts))
        new = {i: [] for i in grow}
        limit = max(1, _APPEND_VALUES // space.d)
        for piece in _pieces(grow, extra_sizes, limit, space.block_rows()):
            rows = [i for i, _ in piece]
            out = []
            for i, m in piece:
                out.append(Zs[i].base[pos[i] : pos[i] + m])
                pos[i] += m
            _, Q, sizes = draw_neighbourhoods(
                space, ctx, [m for _, m in piece], first=False, rows=rows, out=out
            )
            Y = query_group(
                bb, space, ctx, Q, sizes, first=False, row_ids=ctx.rows[rows]
            )
            for i, y in zip(rows, Y):
                new[i].append(y)
        for i, start in zip(grow, starts):
            # The new points were drawn after the row's own in its buffer.
            z = Zs[i].base[start : pos[i]]
            Zs[i] = Zs[i].base[: pos[i]]
            Ys[i] = np.vstack([Ys[i], *new[i]])
            if self.kernel is None:
                # lime's kernel weighs each point on its own: only the new
                # points need their distances.
                w = self._kernel(_distances(z, Zs[i][0]))
                Ws[i] = np.concatenate([Ws[i], w])
            else:
                Ws[i] = self._weights(Zs[i])


def _final_status(passed, tied, enough):
    if passed:
        return "tied" if tied else "converged"
    return "n_max_reached" if enough else "few_effective_samples"


def _tie_pairs(ties, width):
    """The tied pairs of a row as a fixed-width field: ``(width, 2)`` feature
    indices, ``-1`` padding."""
    out = np.full((width, 2), -1, dtype=np.intp)
    if ties:
        out[: len(ties)] = np.asarray(ties, dtype=np.intp)[:width]
    return out
