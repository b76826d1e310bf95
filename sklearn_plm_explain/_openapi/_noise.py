"""How noisy each answer is: the rounding floor of a probability's log,
the absolute errors of small probabilities and of the binary grid, the
inflation of witnesses' noise, and the noise model of a row's responses."""

# SPDX-License-Identifier: BSD-3-Clause

from functools import lru_cache

import numpy as np
from scipy import stats

from sklearn_plm_explain._utils._floats import EPS

_F32_TINY = float(np.finfo(np.float32).tiny)
_F64_TINY = float(np.finfo(np.float64).tiny)

# Multiplier on float64 eps for the rounding error of a response of magnitude
# |L|: a model's forward pass, a softmax and a log each add a few ulps.
FLOOR_ULPS = 4.0


# Below this, a probability's absolute rounding error matters in log space
# point by point; and a probability on the grid of one minus a larger one is
# taken to be one (a probability computed directly lies on it by chance with
# probability 2^-9 or less).
_SMALL_P = 2.0**-10


# A binary row's smaller probability is on that grid whenever it is computed
# as one minus the other; up to 1/2 its absolute error still counts.
_BINARY_GRID_P = 0.5


# A class on the grid of one minus a larger probability at this share of a
# cube's points (and at two) carries that absolute error at all of them
# (see whole_class): a probability computed directly lands on the grid below
# 2^-10 at a point with a chance of 2^-9 at most.
_GRID_SHARE = 0.125


# Ulps of the rounding floor of a float32 (or coarser) forward pass, in units
# of (1 + max |log p|): the largest error of the centred log-ratios of
# float32 ONNX exports of scikit-learn MLPs; the
# residuals, in its units, can only raise it.
FLOOR_ULPS_NARROW = 0.25
# Level of the bound on a call's common error (see NoiseModel.call_error).
_CALL_LEVEL = 1e-3
# Largest ratio of a hinge's slope bias (Euclidean, in the design's units)
# to the residual RMS it leaves in an affine fit (see hinge_bias_abs): 1.66
# for a kink through the row and normal projections of the points, 2 for
# uniform ones; over the search's own designs (d = 4 to 64, fresh and grown
# cubes, kinks along random, sparse and single axes within 1.5 standard
# deviations of the row) the ratio to the residuals' upper confidence bound
# has a 99.9 % quantile of at most 1.81.
HINGE_KAPPA = 2.0


def noise_inflation(n_witnesses, level=1e-3):
    """Upper confidence factor for a noise level estimated from residuals.

    With ``k`` spare degrees of freedom, ``s^2 k / sigma^2`` is chi-square with
    ``k`` degrees of freedom; ``sigma <= s * sqrt(k / q)`` with ``q`` its lower
    ``level`` quantile, at confidence ``1 - level``.
    """
    if np.ndim(n_witnesses) == 0:
        return _inflation(int(n_witnesses), float(level))
    # A batch holds a few distinct counts: one quantile each (scipy's ppf
    # is slow next to a small round's own arithmetic).
    k = np.asarray(n_witnesses)
    values, inverse = np.unique(k, return_inverse=True)
    factors = np.array([_inflation(int(v), float(level)) for v in values])
    return factors[inverse].reshape(k.shape)


@lru_cache(maxsize=256)
def _inflation(k, level):
    return float(np.sqrt(k / stats.chi2.ppf(level, k)))


def noise_scale(L, P=None, unmarked=None):
    """A-priori rounding noise of the centred log-ratios at each query point.

    This is the noise model the fit is weighted by and the floor of the noise
    level it certifies with: the residuals, measured in these units, can only
    raise it.

    Parameters
    ----------
    L : ndarray of shape (n, m, K)
        Responses in log space (logits, log-probabilities or predictions).
    P : ndarray of shape (n, m, K) or None
        The probabilities, when the responses are probabilities. A small
        probability that a model computed as ``1 - (sum of the others)`` (as
        binary models do with ``p0 = 1 - p1``) carries an *absolute* rounding
        error of about eps, i.e. a log error of about eps / p. It shows itself
        by lying on the grid of multiples of 2**-53, which a small probability
        computed directly essentially never does.
    unmarked : ndarray of shape (n,) of bool or None
        Rows whose values may have been written with 16 significant digits
        (see :class:`~sklearn_plm_explain._openapi._explainer._precision.PrecisionEvidence`),
        which moves a value of the grid off it by up to 5e-16 of itself: their
        small probabilities that close to the grid (:func:`near_grid`) carry
        the absolute error too.

    Returns
    -------
    tau : ndarray of shape (n, m)
    """
    # A centred log-ratio carries its own column's relative rounding error and
    # a 1/K share of every other column's: at most twice the largest.
    tau = 2.0 * FLOOR_ULPS * EPS * (1.0 + np.abs(L).max(axis=2))
    if P is not None:
        on_grid = grid_rounded(P)
        if unmarked is not None and unmarked.any():
            on_grid |= near_grid(P) & np.asarray(unmarked)[:, None, None]
        on_grid = whole_class(on_grid, P)
        # Rounding to the grid of 1 - p errs by at most eps/4, and the larger
        # probability itself by about as much again.
        safe = np.where(on_grid, P, 1.0)
        absolute = np.where(on_grid, 0.5 * EPS / safe, 0.0)
        tau = tau + absolute.max(axis=2)
        tau = tau + binary_grid_error(P, unmarked)[:, None]
    return tau


def whole_class(on_grid, P, small_p=_SMALL_P):
    """Marks (n, m, K) of the small probabilities with an absolute error,
    extended from the points that show it to every point of their class.

    A class computed as one minus the others (or by any formula with an
    absolute error, such as ``0.5 tanh(z / 2) + 0.5``) carries that error at
    every point, but only lands on the grid of ``2**-53`` at some: on a finer
    grid (``2**-54``) about half of them. Marked alone, those points weigh
    little in the fit and the unmarked rest, taken as precise, are fitted as
    if they were, leaving the residual test no power. A class whose marks
    are too many for chance (at least ``_GRID_SHARE`` of the cube's points,
    and two) carries the error at all its small points.
    """
    if on_grid.ndim != 3 or on_grid.shape[1] < 2:
        return on_grid
    count = on_grid.sum(axis=1, keepdims=True)
    m = on_grid.shape[1]
    shown = count >= max(2.0, _GRID_SHARE * m)
    return on_grid | (shown & (P > 0) & (P < small_p))


def binary_grid_error(P, unmarked=None):
    """Per row (n,), the absolute rounding error in log space of a binary
    row's probabilities on the grid of ``1 - p`` between ``_SMALL_P`` and 1/2,
    the largest over its points, or 0.

    Above 2^-10 a point's noise is not weighted apart (a probability
    computed directly lands on the grid too often there for the grid to mark
    it), but in a binary row the smaller probability is on it whenever it is
    one minus the other, and its absolute error, 0.5 eps / p, exceeds the
    relative floor up to about 2^-6: it is added to every point of the row
    alike, which bounds each point's and keeps the fit's weights even (left
    out, a few exact binary rows are certified past their bounds).
    """
    if P.shape[-1] != 2:
        return np.zeros(P.shape[0])
    mid = grid_rounded(P, _BINARY_GRID_P) & ~grid_rounded(P)
    if unmarked is not None and np.any(unmarked):
        near = near_grid(P, _BINARY_GRID_P) & ~near_grid(P)
        mid |= near & np.asarray(unmarked)[:, None, None]
    safe = np.where(mid, P, 1.0)
    return np.where(mid, 0.5 * EPS / safe, 0.0).max(axis=(1, 2))


def near_grid(P, small_p=_SMALL_P):
    """Which small probabilities lie within 1e-15 of themselves of a nonzero
    multiple of 2**-53: those of the grid written with 16 significant digits
    (half a unit in the last digit is at most 5e-16 of the value, and the
    scaling adds an ulp). A probability computed directly lands that close
    by chance with probability about ``P 2^53 1e-15`` (2e-4 at 3e-5, 2 % at
    2^-10), and is then only taken to be noisier than it is."""
    t = P * 2.0**53  # exact
    k = np.round(t)
    return (P > 0) & (P < small_p) & (k >= 1) & (np.abs(t - k) <= 1e-15 * t)


def grid_rounded(P, small_p=_SMALL_P):
    """Which probabilities below ``small_p`` lie on the grid of one minus a
    larger one (were, or may have been, computed as one minus the others)."""
    # Scaling by a power of two is exact; an integer is its own floor (a
    # tenth of the time of np.mod, the same answer for finite values).
    t = P * 2.0**53
    return (P > 0) & (P < small_p) & (np.floor(t) == t)


class NoiseModel:
    """Noise model of a group of rows (arrays over the rows)."""

    def __init__(
        self,
        bits,
        quantum,
        quantum_f32,
        scatter,
        scatter_dof,
        deterministic,
        call_scatter=None,
        call_dof=None,
        unmarked=None,
    ):
        self.bits = np.asarray(bits)
        self.quantum = np.asarray(quantum, dtype=np.float64)
        self.quantum_f32 = np.asarray(quantum_f32, dtype=bool)
        self.scatter = np.asarray(scatter, dtype=np.float64)
        self.scatter_dof = np.asarray(scatter_dof)
        self.deterministic = np.asarray(deterministic, dtype=bool)
        # Scatter between calls of a noisy row read call by call (0 for the
        # others): the error every point of one cube shares.
        zeros = np.zeros(self.bits.shape)
        self.call_scatter = zeros if call_scatter is None else np.asarray(call_scatter)
        self.call_dof = zeros if call_dof is None else np.asarray(call_dof)
        self.unmarked = (
            np.zeros(self.bits.shape, dtype=bool)
            if unmarked is None
            else np.asarray(unmarked, dtype=bool)
        )
        self.eps = 2.0 ** (1 - self.bits.astype(np.float64))

    def __len__(self):
        return self.bits.size

    def take(self, j):
        return NoiseModel(
            self.bits[j],
            self.quantum[j],
            self.quantum_f32[j],
            self.scatter[j],
            self.scatter_dof[j],
            self.deterministic[j],
            self.call_scatter[j],
            self.call_dof[j],
            self.unmarked[j],
        )

    @property
    def float64(self):
        """Rows with deterministic float64 responses: rtol is within reach."""
        return (self.bits >= 53) & (self.quantum == 0) & self.deterministic

    @property
    def coarse(self):
        return ~self.float64

    @property
    def correlated(self):
        """Noisy rows read call by call: their cubes, each sent in one call
        with the row itself as its origin, are judged against the scatter
        within a call; the scatter between calls bounds apart the error the
        whole cube shares (see :meth:`call_error`)."""
        return self.call_dof > 0

    def call_scatter_ucb(self):
        """Upper confidence bound (n,) of the scatter between calls (0 for
        rows not read call by call)."""
        return np.array(
            [
                s * noise_inflation(int(k)) if k > 0 else 0.0
                for s, k in zip(self.call_scatter, self.call_dof)
            ]
        )

    def call_error(self, L0):
        """Upper confidence bound (n,) on the relative error a call's common
        noise gives every slope of a correlated row, 0 for the others.

        Noise drawn once per call moves the responses of a whole cube
        together: read as a factor ``1 + e`` on the centred log values ``L0``
        at the row (a service's jitter of its logits, say), it scales every
        slope by it, and its relative size is the scatter between calls over
        the values' RMS. An additive shift per call moves no slope, so the
        bound is conservative for it.
        """
        L0 = np.asarray(L0, dtype=np.float64)
        rms = np.sqrt(np.mean(L0**2, axis=-1))
        ucb = self.call_scatter_ucb()
        z = stats.norm.isf(_CALL_LEVEL / 2.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(ucb > 0, z * ucb / rms, 0.0)
        return np.where(np.isnan(rel), np.inf, rel)

    @property
    def sharp(self):
        """Bitwise identical responses mean a dead region (not rounding)."""
        return self.float64

    @property
    def tiny(self):
        """Smallest probability whose log is meaningful, per row."""
        return np.where(self.bits >= 53, _F64_TINY, _F32_TINY)

    def rounding_tau(self, L, P, small_p=_SMALL_P):
        """A-priori noise scale (n, m) of the binary rounding, per point.

        Probabilities below ``small_p`` that lie on the grid of one minus a
        larger one carry its absolute rounding error (in responses of at most
        24 bits; float64 ones always use ``_SMALL_P``, see
        :func:`~sklearn_plm_explain._openapi._noise.noise_scale`)."""
        tau64 = noise_scale(L, P, self.unmarked)
        if self.float64.all() or np.all(self.bits >= 53):
            return tau64
        eps = self.eps[:, None]
        tau = 2.0 * FLOOR_ULPS_NARROW * eps * (1.0 + np.abs(L).max(axis=2))
        if P is not None:
            grid = 2.0 ** -self.bits.astype(np.float64)
            Pb = np.where(self.bits[:, None, None] <= 24, P.astype(np.float32), P)
            Pb = Pb.astype(np.float64)
            # A power of two divides exactly; an integer is its own floor.
            t = Pb / grid[:, None, None]
            on_grid = (Pb > 0) & (Pb < small_p) & (np.floor(t) == t)
            # As in float64 (see whole_class): ONNX Runtime's small p1 errs by
            # an absolute amount at every point but lies on the grid of 1 - p
            # only at some; marked alone, the rest are fitted as precise.
            on_grid = whole_class(on_grid, Pb, small_p)
            safe = np.where(on_grid, Pb, 1.0)
            absolute = np.where(on_grid, 0.5 * eps[:, :, None] / safe, 0.0)
            tau = tau + absolute.max(axis=2)
        wide = (self.bits >= 53)[:, None]
        return np.where(wide, tau64, tau)

    def delta(self, L, P, centre):
        """Worst-case error (n, m, K) of the centred log values from rounding.

        A probability ``p`` rounded to ``q`` lies in ``[p - q/2, p + q/2]``, so
        its log errs by at most ``log(p / (p - q/2))``; a log value (logit or
        regression) rounded to ``q`` errs by ``q/2``. Centring mixes the
        columns: column ``c`` of the centred values errs by at most
        ``(1 - 2/K) delta_c + mean_k delta_k``. Zero where there is no quantum.
        """
        q = self.quantum[:, None, None]
        half = q / 2.0
        if P is not None:
            half = half + np.where(
                self.quantum_f32[:, None, None],
                np.spacing(P.astype(np.float32)).astype(np.float64),
                0.0,
            )
            with np.errstate(divide="ignore", invalid="ignore"):
                d = np.where(P > half, np.log(P / (P - half)), np.inf)
        else:
            d = np.broadcast_to(half, L.shape).copy()
        d = np.where(q > 0, d, 0.0)
        if not centre:
            return d
        K = L.shape[2]
        own = d * (1.0 - 2.0 / K) if K > 2 else 0.0
        return own + d.mean(axis=2, keepdims=True)

    def scatter_floor(self):
        """Measured scatter (n,) of a noisy service, point estimate and UCB."""
        ucb = np.array(
            [
                s * noise_inflation(int(k)) if k > 0 else (np.inf if s > 0 else 0.0)
                for s, k in zip(self.scatter, self.scatter_dof)
            ]
        )
        return self.scatter, ucb

    def tau(self, L, P, centre):
        """Noise scale (n, m) that weights the fit: every part, as a variance."""
        tau = self.rounding_tau(L, P)
        if np.all(self.float64):
            return tau
        d = self.delta(L, P, centre).max(axis=2)
        d = np.where(np.isfinite(d), d, 0.0)
        s, _ = self.scatter_floor()
        s = np.where(np.isfinite(s), s, 0.0)
        total = np.sqrt(tau**2 + d**2 / 3.0 + s[:, None] ** 2)
        return np.where(self.float64[:, None], tau, total)


def worst_case_abs(A, tau, delta, step):
    """Bound on the L1 error of each column's slope from bounded errors.

    If the model is affine on the cube and every response errs by at most
    ``delta`` (n, m, K), the weighted least-squares slopes err by at most
    ``sum_j sum_m |A+_jm| delta_m / tau_m / step_j`` in input space, with
    ``A+`` the pseudo-inverse of the weighted design ``A / tau`` (``A = [1,
    U]``, shape (n, m, d + 1)).

    Returns
    -------
    bound : ndarray of shape (n, K)
    """
    Ap = np.linalg.pinv(A / tau[:, :, None])[:, 1:, :]  # (n, d, m)
    G = np.abs(Ap) / tau[:, None, :]
    per_coef = np.einsum("ndm,nmk->ndk", G, delta)
    return (per_coef / step[:, :, None]).sum(axis=1)


def statistical_abs(sigma, se_x, n_columns=1, level=1e-3):
    """Upper confidence bound on the L1 error of each column's slope.

    With independent coefficient errors ``e_j ~ N(0, (sigma se_j)^2)`` (the
    orthogonal design makes them nearly so), ``sum_j |e_j|`` has mean
    ``sqrt(2/pi) sigma sum_j se_j`` and a right tail no heavier than that of
    a single term carrying all of ``||se||_2``: it exceeds its mean by
    ``(z - sqrt(2/pi)) sigma ||se||_2`` with probability at most ``level``
    over all ``n_columns`` columns, ``z`` the two-sided normal quantile. Unlike
    a plain sum of standard errors this holds when a few coefficients (features
    with a small scale) dominate the sum.
    """
    mean = np.sqrt(2.0 / np.pi)
    z = stats.norm.isf(level / (2.0 * n_columns))
    spread = mean * se_x.sum(axis=1) + (z - mean) * np.sqrt((se_x**2).sum(axis=1))
    return sigma * spread[:, None]


def hinge_bias_abs(rho, se_x, n_points):
    """Bound (n,) on the L1 bias of every column's slope from a kink inside
    the cube that its residual test could not tell from noise.

    A hinge ``beta (g . u - t)_+`` whose kink crosses the cube moves the
    fitted slope away from the row's own by ``beta Phi(-|t| / |g|) g`` (in
    the design's units, for points ``u`` of identity covariance whose
    projection on ``g`` is about normal), and leaves a residual of RMS
    ``rho`` in the fit: the bias's Euclidean norm is at most ``HINGE_KAPPA``
    times ``rho`` whatever the kink's place and direction. In input units
    its L1 norm is at most that times ``||1 / step||_2``, which for an
    orthogonal design is ``sqrt(m) ||se||_2`` (``se`` the standard errors
    per unit noise). The kink's residual is at most the residuals' own
    level ``rho`` (their upper confidence bound): unlike the noise's
    error, this bias does not fall as the cube gets more points, only as
    the residuals do.

    Parameters
    ----------
    rho : ndarray of shape (n,)
        Upper bound on the residual RMS, in units of the noise model.
    se_x : ndarray of shape (n, d)
        Standard errors of the slope coefficients per unit noise.
    n_points : ndarray of shape (n,)
        Points each cube's fit used.

    Returns
    -------
    bias : ndarray of shape (n,)
        Bound on the L1 norm of each column's slope bias, in input units.
    """
    # Scaled first: features of scale 1e-158 have errors whose squares
    # overflow.
    top = np.abs(se_x).max(axis=1)
    safe = np.where(top > 0, top, 1.0)
    norm = top * np.sqrt(((se_x / safe[:, None]) ** 2).sum(axis=1))
    return HINGE_KAPPA * rho * np.sqrt(n_points) * norm


def relative(abs_err, slope):
    """Relative L1 error of each column from its absolute bound.

    The true slope's norm is at least the estimate's minus the error, so
    ``abs / (norm - abs)`` bounds the error relative to the true slope.
    """
    norm = np.abs(slope).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norm > abs_err, abs_err / (norm - abs_err), np.inf)
