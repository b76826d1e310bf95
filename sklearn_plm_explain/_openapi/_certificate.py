"""The certificate's verdict on a round of cubes: fit, bound, decide.

Each row's cube is fitted by least squares; the residuals over its spare
points estimate the response noise, which bounds the slopes' error. A row is
certified ``"exact"`` when that bound meets ``rtol`` on a cube its radius
search finds consistent (linear); otherwise its search picks the next radius,
or, when none is left, the row gets the best estimate its candidates allow
and a status naming why it was not certified.
"""

# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sklearn_plm_explain._openapi._fit import BOUND_Z, HEAVY_NOISE, fit_local_models
from sklearn_plm_explain._openapi._noise import (
    NoiseModel,
    binary_grid_error,
    hinge_bias_abs,
    noise_inflation,
    relative,
    statistical_abs,
    worst_case_abs,
)
from sklearn_plm_explain._openapi._radius import Attempt, first_attempt_consistent
from sklearn_plm_explain._openapi._solve import column_units
from sklearn_plm_explain._openapi._state import Candidate

# A row whose noise scale exceeds its relative rounding floor this many times
# owes its imprecision to saturated probabilities.
_ABSOLUTE_DOMINANCE = 100.0
# Probabilities below this may be one minus a larger one (those above 1/2 lie
# on that grid whatever they are).
_GRID_P = 0.5
# A float64 cube whose bound a hidden kink's bias leads gets more points
# within this factor of rtol (see CubeJudge._fit).
BIAS_AUGMENT = 2.0
# A class below _FLOOR_P whose log spans at most _FLOOR_SPAN of the widest
# class's span over a cube is held at a floor by the service (see _clipped).
_FLOOR_P = 1e-3
_FLOOR_SPAN = 1e-6
# Float64 probabilities of a softmax sum to 1 within a few ulps per class;
# a sum off by more than this many ulps per class is not a softmax's.
_SUM_ULPS = 64.0


@dataclass(frozen=True, kw_only=True)
class Cubes:
    """Cubes of equal size, one for each of ``rows``, ready to be fitted.

    ``A`` (n, m, d + 1) is the design ``[1, U]``, ``U`` in units of
    ``step`` (n, d), and ``Y`` (n, m, K) the responses as log values, both
    with the row itself first; ``P`` the probabilities (n, m, C) when the
    model returns them, else None; ``bad`` (n,) marks cubes with an unusable
    response (a probability of 0), ``model`` is the rows' noise model and
    ``n_orthogonal`` (n,) how many leading points of each cube (the row
    itself included) form an orthogonal design, 0 for a factorised fit;
    ``layouts`` and ``fill`` as in
    :func:`~sklearn_plm_explain._openapi._fit.fit_local_models` (rows of ``A`` of
    cubes that are their drawn design are written only on demand), and
    ``exact_basis`` (n,) which rows drew from the exact basis.
    """

    rows: np.ndarray
    A: np.ndarray
    Y: np.ndarray
    P: np.ndarray | None
    step: np.ndarray
    bad: np.ndarray
    model: NoiseModel
    n_orthogonal: np.ndarray
    layouts: list | None = None
    fill: object = None
    exact_basis: np.ndarray | None = None


class _Kinds(NamedTuple):
    """Per-cube kinds of a batch's noise model (boolean vectors)."""

    coarse: np.ndarray
    rounded: np.ndarray
    correlated: np.ndarray
    float64: np.ndarray
    unnormalised: np.ndarray


@dataclass(frozen=True, kw_only=True)
class _Fits:
    """The local models of a round's cubes and their bounds (see
    :meth:`CubeJudge._fit`)."""

    slope: np.ndarray
    intercept: np.ndarray
    sigma_hat: np.ndarray
    se_x: np.ndarray
    dof: np.ndarray
    sigma: np.ndarray
    by_estimate: np.ndarray
    stat: np.ndarray
    wc: np.ndarray
    rel: np.ndarray
    steady: np.ndarray


class _Best(NamedTuple):
    """A row's best candidate: its estimate, radius and index."""

    slope: np.ndarray
    intercept: np.ndarray
    radius: float
    index: int


class CubeJudge:
    """Judges the cubes of one group's rows, round after round.

    Parameters
    ----------
    config : SearchConfig
        The search's configuration.
    state : GroupState
        The group's rows, whose results the verdicts are recorded in.
    """

    def __init__(self, config, state):
        self.config = config
        self.state = state
        self.centre = config.kind != "regression"

    def judge(self, cubes, searches):
        """Fit and judge ``cubes``; rows whose search ends leave ``searches``."""
        state, model = self.state, cubes.model
        fits = self._fit(cubes, searches)
        # Bitwise identical responses everywhere in the cube: a dead region;
        # unless the row is saturated, where rounding pins the responses, or
        # the responses are coarse (float32, rounded), where they are pinned
        # on any cube too small for the change to show: such a cube's slope
        # is unresolved (its bound infinite) and the search grows it. A
        # float32 row still pinned on the largest cube is flat.
        Y, bad, rows = cubes.Y, cubes.bad, cubes.rows
        pinned = np.all(Y == Y[:, :1, :], axis=(1, 2))
        flat = pinned & ~bad & state.sharp[rows]
        wide_flat = (
            pinned
            & ~bad
            & model.coarse
            & (model.quantum == 0)
            & model.deterministic
            & np.array([searches[i].radius >= self.config.max_radius for i in rows])
        )
        float64 = model.float64
        clipped = _clipped(cubes.P, len(rows)) & float64
        # The noise model's per-row kinds, read once (each is a vector).
        unnormalised = _unnormalised(cubes.P, len(rows)) & float64
        kinds = _Kinds(
            ~float64, model.quantum > 0, model.correlated, float64, unnormalised
        )
        plain = ~(
            flat
            | wide_flat
            | clipped
            | unnormalised
            | (pinned & float64 & ~state.sharp[rows])
        )
        # The models certified exact here, offered to the other rows in row
        # order whichever path certified them.
        offers = {}
        done = self._certified_at_first(cubes, fits, searches, plain & float64, offers)
        for j, i in enumerate(rows):
            if done[j]:
                continue
            search = searches[i]
            if flat[j] or wide_flat[j]:
                state.record_flat(i, Y[j, 0], search.radius)
                del searches[i]
            elif clipped[j] or (pinned[j] and float64[j] and not state.sharp[i]):
                # Pinned responses carry no slope: no estimate from this cube.
                state.record_saturated(i)
                del searches[i]
            elif self._attempt_ends_search(cubes, fits, j, search, kinds, offers):
                del searches[i]
        self._offer(offers)

    def _fit(self, cubes, searches):
        """Local models of the cubes, and their error bounds."""
        model, Y = cubes.model, cubes.Y
        tau = model.tau(Y, cubes.P, self.centre)
        slope, intercept, sigma_hat, se_x, dof = fit_local_models(
            cubes.A,
            Y,
            self.state.X[cubes.rows],
            cubes.step,
            self.centre,
            tau,
            n_orthogonal=cubes.n_orthogonal,
            layouts=cubes.layouts,
            fill=cubes.fill,
            exact_basis=cubes.exact_basis,
        )
        # One noise level for all columns: the centred log-ratios share their
        # rounding errors, and a column whose own residuals are small by
        # chance must not get a bound that is small by chance. In units of
        # the noise model, whose scale 1 is the floor.
        pooled = sigma_hat.max(axis=1) * noise_inflation(dof)
        learned = np.array(
            [
                0.0 if searches[i].noise is None else searches[i].noise.max()
                for i in cubes.rows
            ]
        )
        sigma = np.maximum(np.maximum(pooled, 1.0), learned)
        by_estimate = pooled >= np.maximum(1.0, learned)
        stat, wc = self._bound_parts(cubes, tau, se_x, sigma)
        # Noise hides a weak kink inside the cube: its bias of the slope,
        # bounded by the residuals it must hide in, is no noise that more
        # points average away. Kink and noise share those residuals (their
        # squares add up to at most the level's), so the two errors add up
        # to at most their root sum of squares. Coarse rows always carry it.
        # Float64 rows carry it where a kink may hide: their row showed one
        # at a larger cube (which may reach into this one), or their
        # residuals stand above the rounding floor (a row certified after a
        # kink was 1.03 times past a bound without it). Elsewhere only the
        # floor, far above float64's actual rounding, stands for it: the
        # bias bound there would double most float64 bounds (the user
        # guide's limits).
        n_points = dof + se_x.shape[1] + 1
        bias = hinge_bias_abs(pooled, se_x, n_points)[:, None]
        seen = np.array([np.isfinite(searches[i].kink_radius()) for i in cubes.rows])
        kinked = model.coarse | seen | (sigma_hat.max(axis=1) > 1.0)
        led = model.float64 & kinked & np.any(bias > stat, axis=1)
        stat = np.where(kinked[:, None], np.hypot(stat, bias), stat)
        if model.correlated.any():
            # Rows read call by call: the error a whole cube shares, which
            # no residual shows.
            L0 = Y[:, 0, :]
            if self.centre:
                L0 = L0 - L0.mean(axis=1, keepdims=True)
            call = model.call_error(L0)
            wc = wc + call[:, None] * np.abs(slope).sum(axis=1)
        rel = relative_bound(stat, wc, slope, model.float64)
        # Where that bias leads a float64 bound close to rtol, more points in
        # the cube bring it below (the residuals' upper level tightens, at
        # most about threefold), as they do an estimated noise.
        by_estimate |= led & (rel <= BIAS_AUGMENT * self.config.rtol)
        return _Fits(
            slope=slope,
            intercept=intercept,
            sigma_hat=sigma_hat,
            se_x=se_x,
            dof=dof,
            sigma=sigma,
            by_estimate=by_estimate,
            stat=stat,
            wc=wc,
            rel=np.where(cubes.bad, np.inf, rel),
            steady=self._steady(cubes, tau),
        )

    def _steady(self, cubes, tau):
        """Cubes whose noise scale is float64's relative floor alike at
        every point: the row's noise at float precision (no probability on
        the grid of ``1 - p``) and no point much noisier than another. Only
        there does a bound set by the floor fall like 1 / radius; where
        small probabilities carry an absolute error it falls faster as the
        cube reaches larger ones."""
        rows = cubes.rows
        even = tau.max(axis=1) <= HEAVY_NOISE * tau.min(axis=1)
        if cubes.P is not None:
            # A binary row's grid error is the largest over the cube's
            # points: it changes with the cube, not like 1 / radius.
            even &= binary_grid_error(cubes.P) == 0
        return cubes.model.float64 & self.state.sharp[rows] & even

    def _bound_parts(self, cubes, tau, se_x, sigma):
        """Absolute L1 bounds (n, K) on the slopes: statistical, worst case.

        The statistical part is the noise level propagated through the fit.
        For rounded responses the worst-case part adds the bounded rounding
        error, propagated through the pseudo-inverse (rigorous if the model is
        affine on the cube); for a noisy service the level is at least the
        upper confidence bound of the scatter its repeats showed.
        """
        model, A, Y, P, step = cubes.model, cubes.A, cubes.Y, cubes.P, cubes.step
        K = Y.shape[2]
        # Deterministic float64 rows: the certificate's original form, the
        # noise level times the sum of the standard errors (the floor there
        # is orders of magnitude above the actual rounding noise).
        stat = (BOUND_Z * sigma * se_x.sum(axis=1))[:, None] * np.ones(K)
        coarse = model.coarse
        if coarse.any():
            point, ucb = model.scatter_floor()
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(point > 0, ucb / point, np.where(ucb > 0, np.inf, 1.0))
            level = np.maximum(sigma, ratio) * _between_calls(model, tau)
            upper = statistical_abs(level[:, None], se_x, n_columns=K) * np.ones(K)
            stat = np.where(coarse[:, None], upper, stat)
        wc = np.zeros_like(stat)
        rounded = model.quantum > 0
        if rounded.any():
            g = np.flatnonzero(rounded)
            delta = model.take(g).delta(Y[g], None if P is None else P[g], self.centre)
            finite = np.all(np.isfinite(delta), axis=(1, 2))
            delta = np.where(np.isfinite(delta), delta, 0.0)
            # The pseudo-inverse is taken of the scaled design [1, U].
            B = A[g] / column_units(step[g])[:, None, :]
            part = worst_case_abs(B, tau[g], delta, step[g])
            wc[g] = np.where(finite[:, None], part, np.inf)
        return stat, wc

    def _attempt_ends_search(self, cubes, fits, j, search, kinds, offers):
        """Record the ``j``-th cube as an attempt of its row; whether the
        row's search is over (certified, or out of radii). ``kinds``: the
        cubes' noise-model kinds (:class:`_Kinds`); ``offers``: the models
        certified so far in this round (see :meth:`_offer`)."""
        state, i = self.state, cubes.rows[j]
        float64 = bool(kinds.float64[j])
        search.coarse = bool(kinds.coarse[j])
        search.rounded = bool(kinds.rounded[j])
        search.single_call = bool(kinds.correlated[j])
        candidate = Candidate(
            slope=fits.slope[j],
            intercept=fits.intercept[j],
            stat=fits.stat[j],
            wc=fits.wc[j],
            sigma=fits.sigma[j],
            radius=search.radius,
            attempt=len(search.history),
            float64=float64,
        )
        state.add_candidate(i, candidate)
        search.record(
            Attempt(
                radius=search.radius,
                sigma_hat=fits.sigma_hat[j],
                rel_error=fits.rel[j],
                bad=bool(cubes.bad[j]),
                estimate_limited=bool(fits.by_estimate[j]),
                steady=bool(fits.steady[j]),
                dof=int(fits.dof[j]),
            )
        )
        # A cube whose residuals stand above the noise is not linear: its
        # bound, read from those residuals as if they were noise, does not
        # cover the bias a boundary inside it causes.
        # Coarse rows claim it only inside the margin of any kink seen.
        inside = search.certifiable(search.radius)
        if search.coarse:
            inside = inside and search.radius <= search.safe_radius()
        consistent = search.last_consistent()
        if kinds.unnormalised[j] or (consistent and search.hides_curvature()):
            # Shrinking further would only hide the curvature deeper.
            search.curved = True
            self.finish(i, search)
            return True
        if fits.rel[j] <= self.config.rtol and consistent and inside:
            self._certified(fits, j, i, search.radius, float64, offers)
            return True
        nxt = None
        if state.result.n_iter[i] < self.config.max_iter:
            nxt = search.next_radius()
        if nxt is None:
            self.finish(i, search)
            return True
        search.radius = nxt
        return False

    def _certified_at_first(self, cubes, fits, searches, candidates, offers):
        """Certify together the rows whose first attempt is this cube and
        certifies them; which ones (n,). ``candidates`` (n,) marks the float64
        cubes that reach the residual test.

        What :meth:`_attempt_ends_search` records of such a row one by one,
        for most rows of a float64 model, in a few array operations: its
        estimate, bound, radius and status, and the attempt counted (its
        search and candidates end with it), and its model offered to the other
        rows. Rows whose queries are kept take the one-by-one path.
        """
        state, rows = self.state, cubes.rows
        if state.queries is not None:
            return np.zeros(rows.size, dtype=bool)
        first = np.array([not searches[i].history for i in rows], dtype=bool)
        ok = candidates & first & (fits.rel <= self.config.rtol)
        ok &= first_attempt_consistent(fits.sigma_hat, cubes.bad)
        g, i = np.flatnonzero(ok), rows[ok]
        if i.size:
            radius = [searches[k].radius for k in i]
            state.record_exact(
                i, fits.slope[g], fits.intercept[g], fits.rel[g], radius, attempts=1
            )
            for k in i:
                del searches[k]
            for k, j, r in zip(i, g, radius):
                offers[k] = (fits, j, r)
        return ok

    def _certified(self, fits, j, i, radius, float64, offers):
        """Row ``i`` is exact on its cube (the ``j``-th): record it, and offer
        its model to the other rows (float64 rows only)."""
        state = self.state
        slope, intercept, rel = fits.slope[j], fits.intercept[j], fits.rel[j]
        state.record_exact(i, slope, intercept, rel, radius)
        state.keep_queries(i, state.cubes[i][0])
        if float64:
            offers[i] = (fits, j, radius)

    def _offer(self, offers):
        """Add the models certified in a round to the library, in row order:
        the rows that wait for one then match the same model whether their
        owners were certified together or one by one."""
        state = self.state
        if state.library is None:
            return
        for i in sorted(offers):
            fits, j, radius = offers[i]
            state.library.add(
                state.X[i],
                fits.slope[j],
                fits.intercept[j],
                fits.rel[j],
                state.offset + i,
                radius,
                fits.sigma[j] * fits.se_x[j],
            )

    def finish(self, i, search):
        """Status and estimate of a row whose search ended without an exact cube.

        Its estimate is the consistent attempt with the smallest bound (a cube
        that failed the residual test never lends its bound to a row): for
        coarse responses, where ``rtol`` is mostly out of reach, that attempt
        certifies the row as ``"approximate"`` when its bound is below 1.
        """
        state = self.state
        limit = search.safe_radius() if search.coarse else np.inf
        best, rel = self._best_candidate(i, search, limit)
        if best is not None:
            state.record_estimate(i, best.slope, best.intercept, rel, best.radius)
            state.keep_candidate_queries(i, best.index)
        else:
            state.record_fallback(i)
        if (
            search.coarse
            and not search.curved
            and best is not None
            and rel < 1.0
            and not self._absolute(i)
        ):
            exact = rel <= self.config.rtol
            state.record_status(i, "exact" if exact else "approximate")
            return
        state.record_status(i, self._failure_status(i, search))

    def _best_candidate(self, i, search, limit=np.inf):
        """The consistent attempt with the smallest bound, under the noise
        level known now (a level learned later raises earlier bounds), among
        those at most ``limit`` in radius."""
        learned = 0.0 if search.noise is None else float(np.max(search.noise))
        best, best_rel = None, np.inf
        for idx, c in enumerate(self.state.candidates[i]):
            if c.attempt >= len(search.history) or not search.consistent(c.attempt):
                continue
            if c.radius > limit or not search.certifiable(c.radius):
                continue
            scaled = c.stat * max(1.0, learned / c.sigma)
            rel = relative_bound(
                scaled[None], c.wc[None], c.slope[None], np.array([c.float64])
            )[0]
            if best is None or rel < best_rel:
                best, best_rel = _Best(c.slope, c.intercept, c.radius, idx), rel
        return best, best_rel

    def _failure_status(self, i, search):
        status = search.failure_status()
        if status in ("imprecise", "boundary") and self._absolute(i):
            # The responses' precision is lost because a probability sits so
            # close to 0 that it is only known as 1 - p: no cube both small
            # enough and resolved exists because of saturation, whatever the
            # region's size.
            return "saturated"
        return status

    def _absolute(self, i):
        """Row ``i``'s own noise is ruled by the absolute error of a 1 - p."""
        if self.config.kind != "proba":
            return False
        state = self.state
        model = state.prec.model([i])
        L0 = state.L0[i][None, None, :]
        # Every probability on the grid of one minus a larger one counts here,
        # not only those below the fits' cutoff: a float32 row whose smallest
        # probability lies just above 2^-10 is as imprecise as one just below
        # (12 of 97 such rows of a binary network built to find them were
        # certified past their bounds, by up to 1.33 times, when the cutoff
        # applied here too).
        R0 = state.R0[i][None, None, :]
        with_grid = model.rounding_tau(L0, R0, small_p=_GRID_P)[0, 0]
        relative = model.rounding_tau(L0, None)[0, 0]
        return with_grid > _ABSOLUTE_DOMINANCE * relative


def _between_calls(model, tau):
    """Factor (n,) by which the noise between calls exceeds the noise within
    one, for rows read call by call (1 for the others).

    Their residual test is against the scatter within a call, but the bound
    keeps the level of the scatter between calls (its upper confidence
    bound): noise drawn once per call may move each class's slope by a
    draw of its own, which the row's own answers do not show.
    """
    ucb = model.call_scatter_ucb()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.sqrt(tau**2 + ucb[:, None] ** 2) / tau
    ratio = np.where(np.isfinite(ratio), ratio, 1.0).max(axis=1)
    return np.where(model.correlated, np.maximum(ratio, 1.0), 1.0)


def relative_bound(stat, wc, slope, float64):
    """Bound on the relative L1 error of every column's slope, worst column.

    Deterministic float64 rows keep the certificate's original form (the
    absolute bound over the estimate's norm, exact to far below ``rtol``);
    coarse rows add the worst-case part and divide by the smallest norm the
    true slope can have.
    """
    norm = np.abs(slope).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        plain = np.where(norm > 0, stat / norm, np.inf)
    coarse = relative(stat + wc, slope)
    return np.where(float64[:, None], plain, coarse).max(axis=1)


def _unnormalised(P, n):
    """Rows whose cube has float64 probabilities that miss a sum of 1 by more
    than their rounding: the service added something to a softmax (an
    offset on a class, a smoothing), whose log is not affine."""
    if P is None:
        return np.zeros(n, dtype=bool)
    K = P.shape[2]
    miss = np.abs(P.sum(axis=2) - 1.0).max(axis=1)
    return miss > _SUM_ULPS * K * np.finfo(np.float64).eps


def _clipped(P, n):
    """Rows whose cube shows a class probability held at one value.

    Under a softmax of affine logits a probability below 1/2 changes in
    its last bits wherever the others change: one that stays bitwise
    constant across the cube while they move has been clipped or floored
    by the model, and its log-ratios are not the logits'.
    """
    if P is None:
        return np.zeros(n, dtype=bool)
    same = np.all(P == P[:, :1, :], axis=1)
    constant = same & (P[:, 0, :] < 0.5)
    # A floor that the service renormalises (clip, then divide by the sum)
    # or smooths away ((P + eps) / (1 + K eps)) leaves a small probability
    # that moves, but only by the renormalisation: its log spans a minute
    # fraction of what the others' logs span. Under a softmax of affine
    # logits a small class's log moves like the top class's minus its own,
    # which only a class parallel to the top one escapes.
    with np.errstate(divide="ignore", invalid="ignore"):
        L = np.log(P)
        span = np.nanmax(L, axis=1) - np.nanmin(L, axis=1)
        widest = np.nanmax(span, axis=1, keepdims=True)
        held = (P[:, 0, :] < _FLOOR_P) & (span <= _FLOOR_SPAN * widest)
    # A probability of 0 in the cube (an infinite span) is not a floor: such
    # cubes are unusable and flagged as such.
    constant |= held & (widest > 0) & np.isfinite(widest)
    return constant.any(axis=1) & ~same.all(axis=1)
