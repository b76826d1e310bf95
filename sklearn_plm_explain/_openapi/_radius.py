"""Radius search of one row: shrink on inconsistency, grow on noise."""

# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass

import numpy as np
from scipy import stats

# A residual this many times the noise level is not noise.
EXCESS_FACTOR = 8.0
# Shrink step after an inconsistent attempt.
SHRINK = 4.0
# Residuals are compared across radii at least this far apart, so that a
# kink's residual (proportional to the radius) and noise (independent of it)
# are told apart despite the spread of estimates with few degrees of freedom.
NOISE_TEST_RATIO = 15.0
# Largest growth in one step, and the narrowest bracket worth bisecting.
MAX_GROWTH = 1e4
MIN_BRACKET = 4.0
# A consistent cube whose bound misses the target by at most this factor gets
# more points in the same cube rather than a new, larger one.
AUGMENT_RANGE = 8.0
# Points added to a boxed-in cube aim this far below rtol.
TOP_UP_MARGIN = 1.25
# A consistent float64 cube whose bound misses rtol by at most this factor
# gets more points rather than a larger cube (at most 0.7 times its points).
NEAR_MISS = 1.3
# From this many features on, a consistent cube a little short of rtol whose
# top-up would double it is replaced by a fresh cube twice as large (see
# RadiusSearch._near_miss).
WIDE = 128
# The most a larger sample in the same cube can tighten the bound.
OVERSAMPLE_GAIN = 8.0
# A row stops before its last cube when that cube's forecast bound needs this
# many times the most points a cube may have (see RadiusSearch._out_of_reach).
REACH_MARGIN = 1.25
# Coarse responses (float32, rounded, noisy) hide weak kinks in their noise.
# Their noise model is close to the actual noise (not a floor orders of
# magnitude above it, as for float64), so the residual test is a chi-square
# test: a cube fails when its residual variance exceeds COARSE_MISFIT times
# the model's at level COARSE_LEVEL (the model may be off by that factor).
# And the certifying cube stays COARSE_MARGIN inside the smallest cube that
# failed, whose boundary may already bias a cube that reaches close to it
# without its residuals showing.
COARSE_MISFIT = 2.0
COARSE_LEVEL = 1e-4
COARSE_MARGIN = 4.0
# The most noise the search of a row with rounded responses may learn beyond
# its noise model, in its units (the model may be off by COARSE_MISFIT in
# variance).
ROUNDED_NOISE_CAP = np.sqrt(COARSE_MISFIT)
# A larger inconsistent cube whose residual is at most this many times a
# curvature's extrapolation (radius squared) from a consistent cube's makes
# that consistency unproven (see RadiusSearch.hides_curvature); it allows
# for the spread of residual estimates with few degrees of freedom.
CURVATURE_MARGIN = 4.0


# A learned first radius is this many times what nine in ten rows needed.
_RADIUS_MARGIN = 2.0


@dataclass
class Attempt:
    radius: float
    sigma_hat: np.ndarray  # (K,) residual RMS per column, in noise-model units
    rel_error: float  # bound on the relative L1 error, worst column
    bad: bool  # some response in the cube was unusable (e.g. p == 0)
    estimate_limited: bool = False  # the noise estimate, not the floor, set it
    dof: int = 0  # spare degrees of freedom of the residuals
    # The noise scale is float64's relative floor alike at every point (see
    # CubeJudge._steady): a bound the floor set then falls like 1 / radius.
    steady: bool = False

    def __post_init__(self):
        # The residual test reads this once per attempt of the row's history
        # and per question asked of it; against the floor a float compare
        # does (fmax skips NaN, which compares False in np.any).
        self.sigma_max = float(np.fmax.reduce(np.atleast_1d(self.sigma_hat)))


class RadiusSearch:
    """Chooses the next radius of one row from what its attempts showed.

    An attempt whose residuals stand far above the noise level was not linear
    on its cube (it straddles regions, or the model is curved): the radius
    must shrink. An attempt whose residuals are at the noise level but whose
    slope is not resolved to the target needs a *larger* cube. Residuals that
    stay put when the cube shrinks are noise, not non-linearity; the search
    then learns that noise level and re-reads its history with it.
    """

    def __init__(
        self,
        *,
        radius,
        min_radius,
        max_radius,
        rtol,
        n_features,
        n_witnesses,
        n_more,
        noise_cap=np.inf,
        coarse=False,
    ):
        self.radius = radius
        self.min_radius = min_radius
        self.max_radius = max_radius
        self.rtol = rtol
        self.n_features = n_features
        self.n_witnesses = n_witnesses
        self.n_more = n_more
        self.history = []
        self.noise = None
        # The most noise (in noise-model units) the search may learn: what the
        # precision model or the repeat queries can account for. A residual
        # above it that stays put as the cube shrinks is a kink, not noise.
        self.noise_cap = noise_cap
        # Coarse responses (float32, rounded, noisy) rarely reach rtol: the
        # search then makes the bound as small as the region allows (the
        # largest consistent cube, more witnesses) instead of stopping as
        # soon as rtol is out of reach.
        self.coarse = coarse
        # Responses rounded to a decimal quantum (see _learn_noise).
        self.rounded = False
        # A noisy row read call by call: a cube must come from one call (its
        # residuals are judged against the scatter within a call), so it is
        # never topped up by a later one.
        self.single_call = False
        # Plan of the next attempt: how many new points, and whether they
        # join the previous cube (same radius) or start a new one.
        self.n_new = n_features + n_witnesses
        self.keep = False
        # Leading points of the current cube (the origin included) that form
        # an orthogonal design, set when a cube is drawn; and the layout of
        # that design when the cube's points are it exactly (else None).
        self.n_orthogonal = 0
        self.layout = None
        # The step of the row's cubes when they are drawn from the exact
        # basis (decided by each fresh cube), else None.
        self.drawn_step = None
        # Set when a consistent cube's residuals fell from a larger cube's no
        # faster than a curvature's (see hides_curvature): the row is not
        # certified, whatever its bound.
        self.curved = False

    def plan_fresh_cube(self):
        """Plan a new cube at the current radius: ``n_features +
        n_witnesses`` points of its own, not added to the previous one."""
        self.n_new = self.n_features + self.n_witnesses
        self.keep = False

    def _excess(self, att):
        if att.bad:
            return True
        # In units of the noise model the a-priori floor is 1.
        factor = _coarse_factor(att.dof) if self.coarse else EXCESS_FACTOR
        if self.noise is None:
            return bool(att.sigma_max > factor)
        return bool(np.any(att.sigma_hat > factor * np.maximum(1.0, self.noise)))

    def _learn_noise(self):
        # Two inconsistent attempts whose residual did not fall when the cube
        # shrank: the residual is the response's own noise.
        exc = [a for a in self.history if not a.bad and self._excess(a)]
        for j, b in enumerate(exc):
            for a in exc[:j]:
                if a.radius < NOISE_TEST_RATIO * b.radius or _exponent(a, b) >= 0.5:
                    continue
                level = np.maximum(a.sigma_hat, b.sigma_hat)
                # Responses rounded to a quantum have a worst-case noise model
                # (each errs by at most half the quantum): a residual well
                # above it is a kink, however it scales.
                cap = self.noise_cap
                if self.rounded:
                    cap = min(cap, ROUNDED_NOISE_CAP)
                if not self.coarse and a.steady and b.steady:
                    # Deterministic float64 responses whose noise scale is
                    # the relative floor at every point have no noise above
                    # it to learn: a residual that stays put as the cube
                    # shrinks is a step across a region thinner than the
                    # cubes (a slab), whose slope no cube around it sees.
                    cap = min(cap, 1.0)
                if np.max(level) > cap:
                    continue
                if self.noise is not None:
                    level = np.maximum(self.noise, level)
                self.noise = level

    def record(self, attempt):
        self.history.append(attempt)
        self._learn_noise()

    def last_consistent(self):
        """The last attempt's residuals are at the noise level."""
        return not self._excess(self.history[-1])

    def next_radius(self):
        """The next radius to try, or None when no radius can succeed.

        May also raise ``n_witnesses``: when the radius is boxed in between a
        cube too small to resolve the slope and one that is not linear, more
        points at the largest consistent radius shrink the error bound.
        """
        last = self.history[-1]
        if self._augment(last) or self._near_miss(last):
            return self.radius
        self.keep = False
        r_lo, r_hi = self._bracket()
        if self._excess(last):
            # After two inconsistent cubes in a row the row is likely near a
            # boundary: shrink faster.
            repeat = len(self.history) > 1 and self._excess(self.history[-2])
            want = last.radius / (SHRINK**2 if repeat else SHRINK)
        else:
            # A float64 bound falls like 1 / radius: aim a margin below rtol
            # (a small miss costs a top-up of the cube, not a new one).
            margin = 2.0 if self.coarse else TOP_UP_MARGIN
            growth = margin * last.rel_error / self.rtol
            want = last.radius * float(np.clip(growth, 2.0, MAX_GROWTH))
        kink = self.kink_radius()
        if want >= kink:
            # No cube this large can certify (it holds a kink already seen).
            want = np.sqrt(r_lo * kink) if r_lo is not None else kink / SHRINK
        blocked = want < self.min_radius
        if r_lo is not None and r_hi is not None:
            if not self.coarse and self._hopeless(r_lo, r_hi):
                return None
            if r_hi / r_lo < MIN_BRACKET:
                blocked = True
            elif not r_lo < want < r_hi:
                want = float(np.sqrt(r_lo * r_hi))
        if want > self.max_radius:
            if any(a.radius >= self.max_radius for a in self.history):
                blocked = True
            want = self.max_radius
        if not blocked:
            if self._out_of_reach(want, r_lo, r_hi):
                return None
            self.n_new = self.n_features + self.n_witnesses
            return want
        lo = self._floor_limited_at(r_lo)
        if lo is not None:
            m = self._points_for_rtol(self.n_features + lo.dof, lo.rel_error)
            if m > self.n_features + self.n_more:
                # The bound at r_lo falls like 1 / sqrt(points) (the noise
                # floor sets it): even n_more witnesses cannot reach rtol.
                return None
        if self._top_up(last, r_lo):
            return last.radius
        if lo is not None:
            # A fresh cube at r_lo with the points its bound asks for.
            self.n_witnesses = int(
                np.clip(m - self.n_features, self.n_witnesses + 8, self.n_more)
            )
            self.n_new = self.n_features + self.n_witnesses
            return r_lo
        if (
            r_lo is not None
            and self.n_witnesses < self.n_more
            and (self.coarse or not self._hopeless(r_lo, 2.0 * r_lo))
        ):
            self.n_witnesses = self.n_more
            self.n_new = self.n_features + self.n_witnesses
            return min(r_lo, self.safe_radius()) if self.coarse else r_lo
        return None

    def _out_of_reach(self, want, r_lo, r_hi):
        """No cube the search may still draw can certify the row.

        Below a kink at ``r_hi`` the search draws ``want`` and then splits
        the bracket while it spans ``MIN_BRACKET``: the largest radius it can
        reach is ``want`` when the bracket above it is too narrow to split,
        else at most ``r_hi / 2``. The bound of the consistent float64 cube
        at ``r_lo``, set by the noise floor alike at every point (``steady``),
        falls like 1 / radius: when its
        forecast at that radius is above what even ``n_more`` witnesses bring
        below rtol, with a margin, no cube can certify the row, and it ends
        now as it would after them. Only below a kink that no noise the
        search may still learn can explain (whose residuals stay above the
        test at the largest level it may learn): a kink read later as noise
        would open larger radii.
        """
        if self.coarse or r_hi is None:
            return False
        lo = self._floor_limited_at(r_lo)
        if lo is None or not lo.steady or not self._lasting_kink(r_hi):
            return False
        reach = want if r_hi / want < MIN_BRACKET else max(want, r_hi / 2.0)
        rel = lo.rel_error * r_lo / reach
        m = self._points_for_rtol(self.n_features + lo.dof, rel)
        return m > REACH_MARGIN * (self.n_features + self.n_more)

    def _lasting_kink(self, radius):
        """The attempts at ``radius`` failed the residual test beyond any
        noise level the search may learn (or had an unusable response)."""
        level = EXCESS_FACTOR * max(1.0, self.noise_cap)
        at = [a for a in self.history if a.radius == radius]
        return bool(at) and all(a.bad or a.sigma_max > level for a in at)

    def safe_radius(self):
        """Largest radius a coarse row may be certified at (see COARSE_MARGIN)."""
        r_lo, _ = self._bracket()
        hi = [
            a.radius
            for a in self.history
            if self._excess(a) and (r_lo is None or a.radius > r_lo)
        ]
        return min(hi) / COARSE_MARGIN if hi else np.inf

    def _hopeless(self, r_lo, r_hi):
        """No radius below ``r_hi`` can be resolved, even with more points.

        The error bound of a consistent cube falls like 1 / radius, no cube
        reaches ``r_hi``, and more points gain at most ``OVERSAMPLE_GAIN`` (the
        noise estimate's uncertainty and the standard errors both shrink): an
        optimistic forecast, so that only rows certain to fail stop early.
        """
        att = max(
            (a for a in self.history if not self._excess(a) and a.radius == r_lo),
            key=lambda a: a.radius,
        )
        best = att.rel_error * att.radius / r_hi
        return best > OVERSAMPLE_GAIN * self.rtol

    def _augment(self, last):
        # The cube was linear and nearly resolved: more points in it cost less
        # than a new cube and shrink both the noise estimate's uncertainty and
        # the slopes' standard errors.
        near = last.rel_error <= AUGMENT_RANGE * self.rtol
        useful = last.estimate_limited and self.n_witnesses < self.n_more
        if self._excess(last) or not near or not useful or self.single_call:
            return False
        extra = max(8, self.n_witnesses)
        self.n_witnesses += extra
        self.n_new, self.keep = extra, True
        return True

    def _points_for_rtol(self, m, rel_error):
        """Points a float64 cube of ``m`` points with bound ``rel_error``
        needs for its bound to fall a margin below ``rtol``, if the bound
        falls like 1 / sqrt(points)."""
        return m * (TOP_UP_MARGIN * rel_error / self.rtol) ** 2

    def _floor_limited_at(self, r_lo):
        """The best consistent float64 attempt at ``r_lo`` whose bound the
        noise floor set (not the noise estimate), or None."""
        if self.coarse or r_lo is None:
            return None
        atts = [
            a
            for a in self.history
            if a.radius == r_lo and not self._excess(a) and not a.estimate_limited
        ]
        return min(atts, key=lambda a: a.rel_error) if atts else None

    def _near_miss(self, last):
        """A consistent float64 cube a little short of rtol: more points in
        it cost less than a larger cube, and cannot reach a boundary."""
        if self.coarse or self._excess(last) or last.estimate_limited:
            return False
        ratio = last.rel_error / self.rtol
        if not 1.0 < ratio <= NEAR_MISS or self.n_witnesses >= self.n_more:
            return False
        m = self.n_features + self.n_witnesses
        if self.n_features >= WIDE and self._points_for_rtol(m, last.rel_error) > 2 * m:
            # Wide rows: the points it asks for outnumber a fresh cube's
            # (twice as large, whose bound halves), and would leave the cube's
            # design orthogonal no more, whose fit then costs a QR
            # factorisation of O(m d^2), more than the model's own time.
            return False
        self._add_points(last.rel_error)
        return True

    def _add_points(self, rel_error):
        """Plan more points in the current cube: those that bring a bound of
        ``rel_error`` a margin below ``rtol`` if it falls like 1 / sqrt(m)
        (at least 8, at most up to ``n_more``)."""
        m = self.n_features + self.n_witnesses
        want = self._points_for_rtol(m, rel_error)
        extra = int(np.clip(np.ceil(want) - m, 8, self.n_more - self.n_witnesses))
        self.n_witnesses += extra
        self.n_new, self.keep = extra, True

    def _top_up(self, last, r_lo):
        """Boxed in at the largest consistent cube, which was the last one:
        add to it the points its bound asks for, not a new cube.

        A float64 bound set by the noise floor falls like ``1 / sqrt(m)``
        with the cube's ``m`` points; the points to add are those that bring
        it a margin below ``rtol`` (at least 8, at most up to ``n_more``).
        Coarse responses keep their own rule (a new cube inside the margin).
        """
        if self.coarse or r_lo is None or last.radius != r_lo:
            return False
        if self._excess(last) or self.n_witnesses >= self.n_more:
            return False
        if self._hopeless(r_lo, 2.0 * r_lo):
            return False
        self._add_points(last.rel_error)
        return True

    def kink_radius(self):
        """The smallest radius at which a cube showed a kink (inf if none).

        The cubes of one row are nested (all centred at the row), so every
        cube at least this large contains that kink: one that passes the
        residual test there missed it with its random points, and must not
        certify the row or lend it its bound.
        """
        kinks = [a.radius for a in self.history if not a.bad and self._excess(a)]
        return min(kinks) if kinks else np.inf

    def certifiable(self, radius):
        """Whether a consistent cube of this radius may certify the row."""
        return radius < self.kink_radius()

    def _bracket(self):
        kink = self.kink_radius()
        lo = [a.radius for a in self.history if not self._excess(a) and a.radius < kink]
        r_lo = max(lo) if lo else None
        hi = [
            a.radius
            for a in self.history
            if self._excess(a) and (r_lo is None or a.radius > r_lo)
        ]
        return r_lo, (min(hi) if hi else None)

    def reset(self):
        """Forget the attempts (the noise model they were judged by changed)."""
        self.history = []
        self.noise = None

    def consistent(self, k):
        """Whether attempt ``k`` is consistent under what is known now."""
        return not self._excess(self.history[k])

    def hides_curvature(self):
        """Whether the last (consistent) attempt may owe its consistency to a
        curvature shrunk below the noise.

        A smooth response's residuals fall like the radius squared as the
        cube shrinks, below any noise level at last, while its slope stays
        that of the smooth function (a smoothed or renormalised probability,
        a sigmoid computed another way), not that of any linear region. A
        kink's residual drops abruptly instead once the cube no longer
        reaches it. So a consistent cube counts only if every inconsistent
        larger cube's residual stands more than ``CURVATURE_MARGIN`` times
        above the curvature's extrapolation to it.
        """
        if self.coarse:
            # Coarse responses have their own guard, the margin inside the
            # smallest failed cube; their noise, not a floor far above the
            # actual rounding, sets their residuals, which move with it.
            return False
        last = self.history[-1]
        if not last.steady:
            # The noise scale of a cube that reaches a probability known as
            # 1 - p changes with the cube: its residuals in those units do
            # not scale like the response's curvature.
            return False
        level = max(last.sigma_max, 1.0)
        for a in self.history[:-1]:
            if a.bad or not a.steady or a.radius <= last.radius:
                continue
            if not self._excess(a):
                continue
            if a.sigma_max <= CURVATURE_MARGIN * level * (a.radius / last.radius) ** 2:
                return True
        return False

    def _kink_scaling(self):
        """Two inconsistent cubes whose residuals scale like the radius, as a
        kink's do, not like its square."""
        exc = [a for a in self.history if not a.bad and self._excess(a)]
        for j, b in enumerate(exc):
            for a in exc[:j]:
                big, small = (a, b) if a.radius > b.radius else (b, a)
                if big.radius >= 2.0 * small.radius:
                    if 0.5 <= _exponent(big, small) <= 1.5:
                        return True
        return False

    def failure_status(self):
        """Name the reason no attempt was certified."""
        if self.curved and not self._kink_scaling():
            return "not_piecewise_linear"
        exc = [a for a in self.history if not a.bad and self._excess(a)]
        if not exc:
            return "saturated" if any(a.bad for a in self.history) else "imprecise"
        quiet = [a for a in self.history if not a.bad and not self._excess(a)]
        if _curved(exc, quiet):
            return "not_piecewise_linear"
        return "boundary"


def first_attempt_consistent(sigma_hat, bad):
    """Whether each first attempt of a float64 row is consistent: the residual
    test of :class:`RadiusSearch` for rows (n,) with residuals ``sigma_hat``
    (n, K) before any noise is learned, vectorised."""
    return ~bad & ~(np.fmax.reduce(sigma_hat, axis=1) > EXCESS_FACTOR)


def _coarse_factor(dof):
    """Residual RMS, in noise-model units, above which a coarse cube fails."""
    if dof <= 0:
        return EXCESS_FACTOR
    q = stats.chi2.isf(COARSE_LEVEL, dof)
    return float(min(EXCESS_FACTOR, np.sqrt(COARSE_MISFIT * q / dof)))


def _curved(attempts, quiet):
    """Residuals that scale like the radius squared over several radii.

    A smooth model's residuals follow its curvature, ``r**2``, consistently
    over decades of radius; a kink's residual depends on how much of the cube
    lies beyond the boundary and does not. Asks for at least three
    inconsistent cubes spanning a factor 30 whose log-residuals lie on a line
    of slope about 2, and for the consistent (``quiet``) cubes to lie on that
    line's continuation down to the noise, where a kink's residual drops
    abruptly instead.
    """
    r = np.log([a.radius for a in attempts])
    rho = np.log([np.max(a.sigma_hat) for a in attempts])
    if len(attempts) < 3 or np.ptp(r) < np.log(30.0):
        return False
    slope, icpt = np.polyfit(r, rho, 1)
    scatter = np.max(np.abs(rho - (slope * r + icpt)))
    if not (1.6 <= slope <= 2.4 and scatter <= np.log(5.0)):
        return False
    # In units of the noise model, a quiet cube's residual is about 1 or less.
    for a in quiet:
        if slope * np.log(a.radius) + icpt > np.log(EXCESS_FACTOR * 30.0):
            return False
    return True


def _exponent(a, b):
    """Scaling exponent of the residual between two attempts."""
    rho_a, rho_b = np.max(a.sigma_hat), np.max(b.sigma_hat)
    if rho_b <= 0:
        return np.inf
    return float(np.log(rho_a / rho_b) / np.log(a.radius / b.radius))


def learned_radius(explanation, rtol, min_radius, max_radius):
    """The smallest first radius that certifies most of ``explanation``'s rows.

    A certified cube's bound falls like 1 / radius, so ``error_bound *
    radius`` is what a row needs; the learned radius is ``_RADIUS_MARGIN``
    times the 90th percentile of that over ``rtol`` (a smaller cube is less
    likely to reach a region boundary), or None when no row was certified.
    """
    e = explanation
    # Rows certified through a shared region have no cube of their own
    # (radius NaN): they say nothing about the radius a row needs.
    need = e.error_bound * e.radius
    need = need[(e.status == "exact") & np.isfinite(need)]
    if need.size == 0:
        return None
    radius = _RADIUS_MARGIN * np.quantile(need, 0.9) / rtol
    return float(np.clip(radius, min_radius, max_radius))
