"""Least-squares fits of local linear models and their exactness certificate.

The numerical kernel of :class:`OpenAPIExplainer`. Everything here is batched
over rows that share one design size, and free of model queries.
"""

# SPDX-License-Identifier: BSD-3-Clause

from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import linalg, stats

from sklearn_plm_explain._openapi._design import (
    _basis,
    basis_bounds,
    exact_first_solve,
    exact_gram,
    origin_gram_diagonal,
)
from sklearn_plm_explain._utils._products import prod, t_prod

EPS = np.finfo(np.float64).eps

# Multiplier on float64 eps for the rounding error of a response of magnitude
# |L|: a model's forward pass, a softmax and a log each add a few ulps.
FLOOR_ULPS = 4.0

# The error bound multiplies the (inflated) noise level by this factor and sums
# the per-coefficient standard errors, which covers the L1 norm of the error of
# all coefficients jointly with a wide margin.
BOUND_Z = 1.0

# The orthogonal design's product-based fits are used while the design as
# represented is within this relative error of its closed form (the bounds
# correct for it). Points whose noise scale exceeds the cube's smallest this
# many times get their weighted-fit weights (the others weight 1, so that the
# bounds stay within this factor of a weighted fit's); and the low-rank
# correction this takes (those points, and points added to a grown cube) is
# used up to this many rows per coefficient: its r x r solve, O(r^2 d), then
# still costs less than a factorisation of the whole design, O(m d^2).
MAX_DESIGN_ERROR = 1e-3
HEAVY_NOISE = 1.25
MAX_CORRECTION = 1.0
_MAX_CORRECTED_RATE = 0.5
# The fast fit refines its solve at most this often, and stops once the
# solve's error bound is this fraction of the smallest noise scale.
_MAX_REFINE = 6
_NEGLIGIBLE_SOLVE = 1e-3
# Steps (radius times feature scale) outside this range are fitted in units of
# the step: squares of offsets times squares of noise scales (1e-32) stay far
# from the floating-point range's ends inside it.
_TINY_STEP = 1e-60
_HUGE_STEP = 1e60
# Designs of at least this many bytes per row are fitted on views of their
# batch, run by run of adjacent rows, instead of on a copy of a subset; so
# are smaller ones in at most _VIEW_RUNS runs (a first round at d = 64 with
# one row left to the corrected fit: copying the other 99 designs cost more
# than a second call).
_VIEW_BYTES = 2**18
_VIEW_RUNS = 4
# The fast fit's closed-form bound on the standard errors is used while it
# is within this fraction of the exact value.
_LOOSE_VARIANCE = 0.01

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


def noise_inflation(n_witnesses, level=1e-3):
    """Upper confidence factor for a noise level estimated from residuals.

    With ``k`` spare degrees of freedom, ``s^2 k / sigma^2`` is chi-square with
    ``k`` degrees of freedom; ``sigma <= s * sqrt(k / q)`` with ``q`` its lower
    ``level`` quantile, at confidence ``1 - level``.
    """
    if np.ndim(n_witnesses) == 0:
        return _inflation(int(n_witnesses), float(level))
    # A batch holds a few distinct counts: one quantile each (scipy's ppf
    # costs about 0.2 ms a call, which was a tenth of a small round's own time).
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
    out, 5 of 26,888 exact binary rows were up to 1.52 times past their
    bounds).
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


def fit_local_models(
    A,
    Y,
    x0,
    step,
    centre,
    tau,
    n_orthogonal=None,
    layouts=None,
    fill=None,
    exact_basis=None,
):
    """Least-squares fit of ``Y ~ A beta`` per row, with standard errors.

    Rows whose design starts with the closed-form orthogonal one (see
    :func:`sklearn_plm_explain._openapi._design.orthogonal_design`) are fitted by
    matrix products alone (:func:`_fit_orthogonal`); rows that also hold
    points added later, or a few points much noisier than the rest (small
    probabilities known only as ``1 - p``), by the same products and a
    low-rank correction of their weights (:func:`_fit_corrected`); the others
    by a weighted QR factorisation (:func:`_fit_weighted`). The first two
    bound every error at least as high as the third would, and are exact to
    within that bound.

    Parameters
    ----------
    A : ndarray of shape (n, m, d + 1)
        Designs ``[1, x - x0]``: the query points' offsets from the explained
        row, in input units (row 0 of each block is the origin, the explained
        point itself). The fits work in the scaled coordinates ``[1, U]``,
        ``U = (x - x0) / step``, exactly: the step scales their small
        products, not the designs.
    Y : ndarray of shape (n, m, K)
        Responses in log space.
    x0 : ndarray of shape (n, d)
        The explained rows.
    step : ndarray of shape (n, d)
        Per-row, per-feature unit of ``U`` (radius times feature scale).
    centre : bool
        Centre the responses across columns first (centred log-ratios).
    tau : ndarray of shape (n, m)
        Noise scale of each point (see :func:`noise_scale`); residuals are
        measured in these units.
    n_orthogonal : ndarray of shape (n,) of int, default=None
        Per row, how many leading rows of ``A`` (the origin included) form an
        orthogonal design drawn by ``orthogonal_design``; 0 (or ``None`` for
        all rows) for none.
    layouts : list of (int, ndarray, ndarray) or None, default=None
        Per row, None or the ``(size, cols, sign)`` of its cube's one
        orthogonal block (see ``orthogonal_design``) when its points are that
        block exactly as drawn (see ``exact_offsets``): such rows are fitted
        by products with their shared basis, and their rows of ``A`` are
        not read unless ``fill(i)`` wrote them (it is called for every row
        fitted otherwise). None for every row read from ``A``.
    fill : callable or None, default=None
        ``fill(i)`` writes row ``i`` of ``A``; with ``layouts``.
    exact_basis : ndarray of shape (n,) of bool, default=None
        Which rows' orthogonal designs were drawn from the exact basis
        (``orthogonal_design(..., exact=True)``); None for none.

    Returns
    -------
    slope : ndarray of shape (n, d, K)
        Slopes in input space.
    intercept : ndarray of shape (n, K)
        Intercepts in input space.
    sigma_hat : ndarray of shape (n, K)
        Residual RMS of each column over the spare degrees of freedom, in
        units of ``tau`` (about 1 or less when the noise model holds).
    se_x : ndarray of shape (n, d)
        Standard error of each slope coefficient in input space, per unit of
        normalised noise (for the product-based fits an upper bound, which
        includes the error left by the solve).
    dof : ndarray of shape (n,) of int
        Spare degrees of freedom of the residuals (points fitted minus
        coefficients).
    """
    n, m, p = A.shape
    if centre:
        Y = Y - Y.mean(axis=2, keepdims=True)
    s = column_units(step)
    extreme = ~moderate_steps(step)
    n_orth = np.zeros(n, dtype=np.intp) if n_orthogonal is None else n_orthogonal
    beta = np.empty((n, p, Y.shape[2]))
    sigma_hat = np.empty((n, Y.shape[2]))
    se_unit = np.empty((n, p - 1))
    dof = np.full(n, m - p, dtype=np.intp)
    eps, peak = np.full(n, np.inf), np.full(n, np.inf)
    ok = n_orth >= p + 1
    exact = np.zeros(n, dtype=bool) if exact_basis is None else exact_basis
    if ok.any():
        eps[ok], peak[ok] = _design_error(x0[ok], step[ok], n_orth[ok], exact[ok])
    # Points much noisier than the least noisy one get their weighted-fit
    # weights through a low-rank correction.
    heavy = tau > HEAVY_NOISE * tau.min(axis=1)[:, None]
    rank = heavy.sum(axis=1) + (m - n_orth)
    ok &= eps <= MAX_DESIGN_ERROR
    done = np.zeros(n, dtype=bool)
    if layouts is not None:
        drawn = np.array([lay is not None for lay in layouts]) & (n_orth == m)
        drawn &= ~extreme
        if drawn.any():
            rows = np.flatnonzero(drawn)
            fit = _fit_basis(
                Y[rows], tau[rows], heavy[rows], [layouts[i] for i in rows], step[rows]
            )
            got = rows[fit[3]]
            beta[got], sigma_hat[got], se_unit[got] = (f[fit[3]] for f in fit[:3])
            done[got] = True
        for i in np.flatnonzero(~done):
            fill(i)
    # Offsets of an extreme size (features of scale 1e-150 or 1e160) would
    # under- or overflow in the products with the noise scales: those rows
    # are fitted on their design in units of the step, [1, U], instead.
    if extreme.any():
        A = A.copy()
        A[extreme] /= s[extreme][:, None, :]
        s[extreme] = 1.0
    ok &= ~done
    plain = ok & (rank == 0)
    corrected = ok & (rank > 0) & (rank <= MAX_CORRECTION * p)
    if plain.all():
        # The usual case: no copy of the designs (the largest arrays here).
        beta, sigma_hat, se_unit = _fit_orthogonal(A, Y, tau, eps, peak, s)
    elif (plain | corrected).all():
        # As usual, but with a few rows of heavy points among them (a first
        # round whose small probabilities lie on the grid of 1 - p): their
        # plain fits, replaced below, cost less than a copy of the others'
        # designs.
        beta, sigma_hat, se_unit = _fit_orthogonal(
            A, Y, tau, eps, peak, s, skip=corrected
        )
    else:
        for rows in _row_sets(plain, A[0].nbytes):
            beta[rows], sigma_hat[rows], se_unit[rows] = _fit_orthogonal(
                A[rows], Y[rows], tau[rows], eps[rows], peak[rows], s[rows]
            )
    if corrected.any():
        rows = np.flatnonzero(corrected)
        fit = _fit_corrected(
            A[rows], Y[rows], tau[rows], eps[rows], n_orth[rows], heavy[rows], s[rows]
        )
        got = rows[fit[4]]
        corrected[rows[~fit[4]]] = False
        beta[got], sigma_hat[got], se_unit[got], dof[got] = (f[fit[4]] for f in fit[:4])
    slow = ~(plain | corrected | done)
    if slow.any():
        beta[slow], sigma_hat[slow], se_unit[slow] = _fit_weighted(
            A[slow] / s[slow, None, :], Y[slow], tau[slow]
        )
    slope = beta[:, 1:, :] / step[:, :, None]
    intercept = beta[:, 0, :] - np.einsum("nd,ndk->nk", x0, slope)
    return slope, intercept, sigma_hat, se_unit / step, dof


class _BasisProducts:
    """Products with the designs ``[1, U]`` of rows whose cubes are their
    drawn orthogonal designs, bit for bit (see
    :func:`~sklearn_plm_explain._openapi._design.exact_offsets`): ``U = basis[:, cols]
    * sign``, the origin first. All rows share one basis, so each product of
    all their designs is one matrix product with that basis (instead of a
    pass over every row's design, the largest arrays of a round).
    """

    def __init__(self, basis, gram, cols, sign):
        self.basis, self.gram_matrix, self.cols, self.sign = basis, gram, cols, sign

    def _scatter(self, beta):
        """(n, R k): each row's ``beta`` on its basis columns, with signs
        (the intercept on the constant column 0)."""
        R, _, k = beta.shape
        Z = np.zeros((R, self.basis.shape[0], k))
        Z[:, 0] = beta[:, 0]
        signed = beta[:, 1:] * self.sign[:, :, None]
        np.put_along_axis(Z, self.cols[:, :, None], signed, axis=1)
        return np.ascontiguousarray(Z.transpose(1, 0, 2)).reshape(-1, R * k)

    def _gather(self, G, R, k):
        """The inverse of :meth:`_scatter` for a product ``G`` (n, R k)."""
        G = G.reshape(-1, R, k).transpose(1, 0, 2)
        out = np.empty((R, self.cols.shape[1] + 1, k))
        out[:, 0] = G[:, 0]
        out[:, 1:] = np.take_along_axis(G, self.cols[:, :, None], axis=1)
        out[:, 1:] *= self.sign[:, :, None]
        return out

    def gram(self, beta):
        """``[1, U]'[1, U] beta`` per row, from the basis's Gram matrix: the
        origin ``[1, 0]`` adds ``beta_0`` to the intercept's row."""
        R, _, k = beta.shape
        out = self._gather(prod(self.gram_matrix, self._scatter(beta)), R, k)
        out[:, 0] += beta[:, 0]
        return out

    def t(self, V):
        """``[1, U]' V`` per row, for ``V`` (R, m, k); shape (R, d + 1, k).
        The basis's constant column gives the points' sums; the origin adds
        its own row to the intercept's."""
        R, m, k = V.shape
        W = np.ascontiguousarray(V[:, 1:, :].transpose(1, 0, 2)).reshape(m - 1, R * k)
        out = self._gather(t_prod(self.basis, W), R, k)
        out[:, 0] += V[:, 0]
        return out

    def first_solve(self, V):
        """``beta + D^-1 (b - [1, U]'[1, U] beta)`` with ``beta = D^-1 b``, ``b
        = [1, U]' V``, per row, for ``V`` (R, m, k) whose origin row is zero
        (responses relative to the origin's): the first solve and its one
        step with the Gram matrix, as one product with the basis's
        :func:`~sklearn_plm_explain._openapi._design.exact_first_solve` matrix ``F``.

        With ``c = B'y`` the products of all basis columns with the row's
        points, ``S`` the row's signs and ``T`` its columns (the constant one
        first), ``b = S c_T`` and the Gram matrix is ``S G_TT S + e0 e0'``
        (the origin adds 1 to the intercept's entry), so the result is ``S
        D_T^-1 (2 c_T - G_TT D_T^-1 c_T) - e0 c_0 / D_0^2``. ``G_TT D_T^-1
        c_T`` is ``(G E^-1 c)_T`` less the basis columns ``L`` the row left
        out, ``G_TL c_L / n``: the product with ``F`` gives ``(M c)_T``, and
        the left-out columns add ``D_T^-1 G_TL c_L / n`` (one column per
        row at image width, O(n k) each)."""
        R, m, k = V.shape
        n = self.basis.shape[0]
        W = np.ascontiguousarray(V[:, 1:, :].transpose(1, 0, 2)).reshape(m - 1, R * k)
        full = t_prod(exact_first_solve(n), W).reshape(n, R, k)
        Wr = W.reshape(n, R, k)
        left = self._left_out()
        if left.shape[1]:
            c_left = np.einsum("nrl,nrk->rlk", self.basis[:, left], Wr)
            corr = np.einsum("nrl,rlk->nrk", self.gram_matrix[:, left], c_left)
            full += corr / (n * origin_gram_diagonal(n))[:, None, None]
        out = self._gather(full.reshape(n, R * k), R, k)
        out[:, 0] -= Wr.sum(axis=0) / (n + 1.0) ** 2
        return out

    def _left_out(self):
        """(R, n - 1 - d): each row's basis columns not in its design."""
        R, d = self.cols.shape
        n = self.basis.shape[0]
        used = np.zeros((R, n), dtype=bool)
        np.put_along_axis(used, self.cols, True, axis=1)
        used[:, 0] = True
        return np.nonzero(~used)[1].reshape(R, n - 1 - d)

    def p(self, beta):
        """``[1, U] beta`` per row, for ``beta`` (R, d + 1, k); (R, m, k).
        The intercept enters through the basis's constant column; the origin
        is ``beta_0`` itself."""
        R, _, k = beta.shape
        n = self.basis.shape[0]
        out = np.empty((R, n + 1, k))
        out[:, 0] = beta[:, 0]
        points = prod(self.basis, self._scatter(beta))
        out[:, 1:] = points.reshape(n, R, k).transpose(1, 0, 2)
        return out

    def rows(self, r, points):
        """Rows ``points`` (indices, the origin 0) of row ``r``'s design."""
        out = np.zeros((points.size, self.cols.shape[1] + 1))
        out[:, 0] = 1.0
        drawn = points >= 1
        block = self.basis[points[drawn] - 1][:, self.cols[r]]
        out[drawn, 1:] = block * self.sign[r]
        return out

    def subset(self, rows):
        return _BasisProducts(
            self.basis, self.gram_matrix, self.cols[rows], self.sign[rows]
        )

    def squares(self, weights):
        """``sum_m weights_m U_mj^2`` per row, for ``weights`` (R, m)."""
        G = t_prod(self.basis**2, weights[:, 1:].T)
        return np.take_along_axis(G.T, self.cols, axis=1)


def _fit_basis(Y, tau, heavy, layouts, step):
    """Least squares on rows whose cubes are their drawn orthogonal designs:
    every product over all rows at once (:class:`_BasisProducts`).

    The same fits and bounds as :func:`_fit_orthogonal` (rows without heavy
    points) and :func:`_fit_corrected` (rows with some), whose notation this
    follows, with the design's deviation ``eps`` that of its basis alone (the
    points are the drawn ones). The residuals' sum of squares after the last
    update is bounded by :func:`_squares_rows`. Rows whose correction is
    not small are declined: returns ``(beta, sigma_hat, se, fitted)``.
    """
    R, m, K = Y.shape
    size, d = m - 1, step.shape[1]
    p = d + 1
    basis, eps, peak = _basis(size, True)
    ops = _BasisProducts(
        basis,
        exact_gram(size),
        np.stack([lay[1] for lay in layouts]),
        np.stack([lay[2] for lay in layouts]),
    )
    D = np.full((p, 1), m - 1.0)
    D[0] = m
    level = Y[:, :1, :]
    Yr = Y - level
    w = np.where(heavy, (tau.min(axis=1)[:, None] / tau) ** 2, 1.0)
    fitted = heavy.sum(axis=1) <= MAX_CORRECTION * p
    e = np.full(R, eps / (1.0 - eps))
    corrections, heavy_rows = {}, {}
    weighted = np.flatnonzero(heavy.any(axis=1) & fitted)
    if weighted.size:
        # The heavy points' design rows of all such rows, padded to the most
        # (zero rows, weight change 1: decoupled from each solve), and their
        # corrections in one batched solve.
        parts = _basis_corrections(ops, weighted, heavy, w, tau)
        ok, CD, M, diag, q = _woodbury_rows(
            parts.C,
            parts.change,
            parts.lowered,
            np.repeat(D.T, weighted.size, axis=0),
            np.full(weighted.size, eps),
        )
        fitted[weighted[~ok]] = False
        for j in np.flatnonzero(ok):
            r = weighted[j]
            corrections[r] = (CD[j], M[j], diag[j], q[j])
            heavy_rows[r] = parts.C[j, : parts.lowered[j].sum()]
            e[r] = q[j] / (1.0 - q[j])

    def solve(P, rows=None):
        # rows: the batch's rows that P's rows are (all of them by default).
        at = None if rows is None else {r: j for j, r in enumerate(rows)}
        out = P / D
        for r, (CD, M, _, _) in corrections.items():
            j = r if at is None else at.get(r)
            if j is not None:
                out[j] -= CD.T @ _solve_rows(M, CD @ P[j])
        return out

    wcol = w[:, :, None]
    # The exact basis is orthogonal to about 1e-8 only: one step with its
    # Gram matrix brings the first solve to the rounding level, and the
    # refinement below to the noise's. Both steps are one product (each
    # product streams the whole basis-sized matrix, whatever its width), in
    # which rows with at most K heavy points have those points' unit
    # responses ride along; rows with more take the two steps apart, with
    # their weighted Gram matrix (two products of K columns instead of more
    # than K columns for every row of the batch).
    V = wcol * Yr
    counts = heavy.sum(axis=1)
    few = [r for r in corrections if counts[r] <= K]
    many = [r for r in corrections if counts[r] > K]
    if not few:
        beta = ops.first_solve(V)
    else:
        E = _unit_responses(heavy, few)
        both = ops.first_solve(np.concatenate([V, E], axis=2))
        beta = both[:, :, :K]
        beta[few] = _weighted_solve(beta, both[:, :, K:], heavy, w, heavy_rows, few)
    if many:
        sub = ops.subset(np.array(many))
        b = sub.t(V[many])
        first = solve(b, many)
        gram = sub.gram(first)
        for j, r in enumerate(many):
            C = heavy_rows[r]
            gram[j] += C.T @ ((w[r][heavy[r]] - 1.0)[:, None] * (C @ first[j]))
        beta[many] = first + solve(b - gram, many)
    resid = Yr - ops.p(beta)
    floor = _NEGLIGIBLE_SOLVE * tau.min(axis=1)
    inv_tau2 = 1.0 / tau[:, :, None] ** 2
    squares = np.empty((R, K))
    err = np.zeros(R)
    active = fitted.copy()
    for _ in range(_MAX_REFINE):
        both = ops.t(np.concatenate([wcol * resid, resid * inv_tau2], axis=2))
        update = solve(both[:, :, :K])
        beta[active] += update[active]
        sizes = e * np.sqrt((D * update**2).sum(axis=1)).max(axis=1)
        err[active] = sizes[active]
        done = active & (sizes <= floor)
        plain = done & ~heavy.any(axis=1)
        squares[plain] = _plain_squares_after(
            resid[plain],
            update[plain],
            both[plain, :, K:],
            tau[plain],
            np.full(plain.sum(), eps),
            D,
        )
        rows = np.flatnonzero(done & ~plain)
        if rows.size:
            # Rows with heavy points: their corrections' parts, with weight
            # change 1 (the squares are measured unweighted, in units of tau).
            at = np.searchsorted(weighted, rows)
            squares[rows] = _squares_rows(
                resid[rows],
                update[rows],
                both[rows, :, K:],
                parts.take(at)._replace(change=np.ones_like(parts.change[at])),
                tau[rows],
                np.full(rows.size, eps),
                np.repeat(D.T, rows.size, axis=0),
            )
        active &= ~done
        if not active.any():
            break
        resid[active] = (Yr - ops.p(beta))[active]
    for r in np.flatnonzero(active):
        squares[r] = ((resid[r] / tau[r, :, None]) ** 2).sum(axis=0)
    beta[:, 0, :] += level[:, 0, :]
    sigma_hat = np.sqrt(squares / (m - p))

    # Standard errors: the closed form of _fit_orthogonal for rows without
    # heavy points, the corrected inverse's of _fit_corrected for the others.
    def exact(i, tau2):
        return ops.subset(np.array([i])).squares(tau2[None])[0]

    # (Rows with heavy points take the corrected inverse's below.)
    se = _orthogonal_se(tau, eps, peak, e, err, exact, d, skip=heavy.any(axis=1))
    tau2 = tau**2
    for r, (_, _, diag, q) in corrections.items():
        c = (w[r] * tau2[r]).max()
        se[r] = np.sqrt(c * diag[1:]) + err[r] / np.sqrt(D[1:, 0])
    return beta, sigma_hat, se, fitted


def _basis_corrections(ops, rows, heavy, w, tau):
    """The :class:`_Corrections` of ``rows`` (increasing) of a basis fit
    whose designs are their whole orthogonal blocks: their heavy points'
    design rows, padded to the most (zero rows, weight change 1, noise
    scale 1), the weight changes ``w - 1`` and the block's other points as
    its light ones."""
    counts = heavy[rows].sum(axis=1)
    r_max = int(counts.max())
    n, p = len(rows), ops.cols.shape[1] + 1
    C = np.zeros((n, r_max, p))
    change = np.ones((n, r_max))
    tau_low = np.ones((n, r_max))
    for j, r in enumerate(rows):
        points = np.flatnonzero(heavy[r])
        C[j, : points.size] = ops.rows(r, points)
        change[j, : points.size] = w[r, points] - 1.0
        tau_low[j, : points.size] = tau[r, points]
    lowered = np.arange(r_max) < counts[:, None]
    return _Corrections(C, change, lowered, tau_low, ~heavy[rows])


def _unit_responses(heavy, rows):
    """(n, m, r): for each of ``rows``, a unit response at each of its
    heavy points in turn (zero elsewhere, and for the other rows), as
    :meth:`_BasisProducts.first_solve` takes them: relative to the origin's.
    A unit response at the origin is the constant 1 (fitted exactly by the
    intercept, so its solution is ``e0`` plus the one returned) less 1 at
    every other point."""
    r_max = max(int(heavy[r].sum()) for r in rows)
    n, m = heavy.shape
    E = np.zeros((n, m, r_max))
    for r in rows:
        points = np.flatnonzero(heavy[r])
        E[r, points, np.arange(points.size)] = 1.0
    origin = E[:, 0, :] == 1.0
    E[:, 1:, :] -= origin[:, None, :]
    E[:, 0, :] = 0.0
    return E


def _weighted_solve(beta, H, heavy, w, heavy_rows, rows):
    """The weighted least-squares solutions of ``rows``, from ``beta``, their
    solutions with weight 1 (``G^-1 b``, ``b = [1, U]' W y``), and ``H``,
    those of the unit responses of :func:`_unit_responses`.

    The weighted Gram matrix is ``G + C'SC``, with ``C`` the heavy points'
    design rows and ``S`` their weight changes: by Woodbury its solution is
    ``beta - H (S^-1 + C H)^-1 C beta`` with ``H = G^-1 C'``, whose columns
    are the solutions with weight 1 for a unit response at each heavy point,
    as accurate as ``beta``.
    """
    out = np.empty((len(rows), *beta.shape[1:]))
    for j, r in enumerate(rows):
        C = heavy_rows[r]
        k = C.shape[0]
        Hr = H[r, :, :k].copy()
        if heavy[r, 0]:
            Hr[0, 0] += 1.0  # the origin's unit response (see _unit_responses)
        cap = np.diag(1.0 / (w[r][heavy[r]] - 1.0)) + C @ Hr
        out[j] = beta[r] - Hr @ np.linalg.solve(cap, C @ beta[r])
    return out


def moderate_steps(step):
    """Per row of ``step`` (n, d), whether every step lies inside the range
    where offsets times noise scales stay far from the floating-point range's
    ends (``_TINY_STEP`` to ``_HUGE_STEP``)."""
    return np.all((step > _TINY_STEP) & (step < _HUGE_STEP), axis=-1)


def _row_sets(mask, row_bytes):
    """The rows of ``mask`` as index sets to fit together: slices of adjacent
    rows (views, no copy) when one row's design is large or the rows form a
    few runs, else all at once (a copy, cheaper than a call per run of many
    runs of small designs)."""
    if not mask.any():
        return []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.view(np.int8), [0]])))
    if row_bytes < _VIEW_BYTES and edges.size > 2 * _VIEW_RUNS:
        return [mask]
    return [slice(lo, hi) for lo, hi in zip(edges[::2], edges[1::2])]


# Weighted fits of designs with at least this many columns are factorised row
# by row without forming Q (LAPACK's geqrf and ormqr), and R is inverted as a
# triangle: at image width the explicit Q and the general inverse of the
# batched path cost more than the factorisation itself.
_IMPLICIT_Q_COLUMNS = 129


def column_units(step):
    """Units ``s`` (n, d + 1) of the designs' columns: a design of offsets
    ``A = [1, x - x0]`` is ``[1, U] diag(s)``, so ``A / s[:, None, :]`` is
    ``[1, U]``."""
    return np.concatenate([np.ones((len(step), 1)), step], axis=1)


def _fit_weighted(A, Y, tau):
    """Weighted least squares by QR on designs ``A = [1, U]``: coefficients
    (in units of ``U``), residual RMS and standard errors; O(m d^2) per row.

    The responses are fitted relative to the origin's: their absolute level
    (a log-probability of -30, say) would otherwise enter the solve's
    rounding and the residuals, at up to its ulps times the design's
    condition number.
    """
    n, m, p = A.shape
    w = 1.0 / tau[:, :, None]
    A = A * w
    level = Y[:, :1, :]
    Y = (Y - level) * w
    if p >= _IMPLICIT_Q_COLUMNS:
        beta, Rinv = _qr_solve_rows(A, Y)
    else:
        Q, R = np.linalg.qr(A)
        beta = np.linalg.solve(R, np.swapaxes(Q, 1, 2) @ Y)
        Rinv = np.linalg.inv(R)
    resid = Y - A @ beta
    beta[:, 0, :] += level[:, 0, :]
    sigma_hat = np.sqrt((resid**2).sum(axis=1) / (m - p))
    # Standard errors of the coefficients are sigma * sqrt(diag((A'A)^-1)),
    # and (A'A)^-1 = R^-1 R^-T.
    se_unit = np.sqrt((Rinv**2).sum(axis=2))[:, 1:]
    return beta, sigma_hat, se_unit


def _qr_solve_rows(A, Y):
    """Per row, the least-squares solution of ``A beta = Y`` and ``R^-1`` of
    ``A = QR``, with ``Q`` applied as its reflectors (never formed) and
    ``R`` inverted as a triangle. ``A`` may be overwritten. Non-finite values
    propagate as in numpy's batched factorisation (a saturated response's
    column comes out NaN), where scipy's wrappers would raise."""
    n, m, p = A.shape
    K = Y.shape[2]
    beta = np.empty((n, p, K))
    Rinv = np.empty((n, p, p))
    geqrf, ormqr, trtri = linalg.get_lapack_funcs(("geqrf", "ormqr", "trtri"), (A,))
    # LAPACK's optimal workspaces (with the minimal ones it runs unblocked,
    # about half as fast), asked for once.
    work = int(geqrf(A[0], lwork=-1)[2][0].real)
    side_work = None
    for i in range(n):
        qr, reflectors, _, info = geqrf(A[i], lwork=work, overwrite_a=True)
        if side_work is None:
            side_work = int(ormqr("L", "T", qr, reflectors, Y[i], -1)[1][0].real)
        QtY, _, info = ormqr("L", "T", qr, reflectors, Y[i], side_work)
        R = np.triu(qr[:p])
        beta[i] = linalg.solve_triangular(R, QtY[:p], check_finite=False)
        Rinv[i], info = trtri(R)
        if info > 0:  # as numpy's inv, for a zero on R's diagonal
            raise np.linalg.LinAlgError("Singular matrix")
    return beta, Rinv


def _fit_orthogonal(A, Y, tau, eps, peak, s, skip=None):
    """Least squares on a design with a known Gram matrix; O(m d K) per row.

    The design ``B = [1, U]`` (origin first; given as ``A = B diag(s)``, its
    offsets in input units, and used as ``B`` through ``s`` in the products)
    was drawn with ``B'B = D = diag(m, m - 1, ..., m - 1)`` and entries of
    ``U`` at most ``peak``; as represented in floating point it is off by a
    relative ``eps`` (``||D^-1/2 B'B D^-1/2 - I|| <= eps``, see
    :func:`_design_error`). A few products give everything, all bounds
    rigorous whatever the weights:

    - coefficients: ``b = D^-1 A'Y``, refined by ``b += D^-1 A'(Y - A b)``
      until the solve's own error, at most ``eps / (1 - eps)`` times the last
      refinement's size in the metric of ``D``, is negligible next to the
      noise; that bound is added to the standard errors (which are multiplied
      by a noise level of at least 1);
    - residuals: the unweighted least-squares residuals measured in units of
      ``tau``. Weighted least squares minimises exactly that sum, so it is
      never below the weighted fit's: the noise estimate and the residual
      test are at least as strict;
    - standard errors: an upper bound on those of the unweighted estimate
      under noise ``tau``, ``sqrt(sum_m tau_m^2 A_mj^2) / D_j``, corrected for
      ``eps``; by Gauss-Markov never below the weighted fit's.

    The responses are fitted relative to the origin's, so that the intercept
    does not carry their absolute level into the solve's error. Each row's
    results are its own, whatever the other rows of the batch (to within
    the rounding of products laid out differently); the standard errors of
    rows ``skip`` (n,), whose results the caller replaces, are not taken
    exactly.
    """
    n, m, p = A.shape
    D = np.full((p, 1), m - 1.0)
    D[0] = m
    level = Y[:, :1, :]
    Y = Y - level
    s = s[:, :, None]
    beta = t_prod(A, Y) / s / D
    resid = Y - prod(A, beta / s)
    e = eps / (1.0 - eps)
    floor = _NEGLIGIBLE_SOLVE * tau.min(axis=1)
    # Each row refines until its own solve is negligible, whatever the other
    # rows of the batch need: a row's result does not depend on its batch.
    solve = np.zeros(n)
    active = np.ones(n, dtype=bool)
    for _ in range(_MAX_REFINE):
        update = t_prod(A, resid) / s / D
        beta[active] += update[active]
        # Solve error of the worst column in the metric of D.
        size = e * np.sqrt((D * update**2).sum(axis=1)).max(axis=1)
        solve[active] = size[active]
        # For a row whose last refinement was negligible, the residuals of
        # the coefficients before it serve as well (any coefficients'
        # residuals are at least the least-squares ones), and save a product.
        active &= solve > floor
        if not active.any():
            break
        resid[active] = (Y - prod(A, beta / s))[active]
    beta[:, 0, :] += level[:, 0, :]
    sigma_hat = np.sqrt(((resid / tau[:, :, None]) ** 2).sum(axis=1) / (m - p))

    def exact(i, tau2):
        # In units of the step first: tau^2 (x - x0)^2 may underflow.
        return tau2 @ (A[i, :, 1:] / s[i, 1:, 0]) ** 2

    se = _orthogonal_se(tau, eps, peak, e, solve, exact, p - 1, skip)
    return beta, sigma_hat, se


def _orthogonal_se(tau, eps, peak, e, solve, exact, d, skip=None):
    """Standard errors (n, d) of the unweighted fit on orthogonal designs, in
    units of ``U``: an upper bound whatever the weights (see
    :func:`_fit_orthogonal`).

    ``sum_m tau_m^2 U_mj^2`` without touching the designs: the drawn column
    has squared norm ``m - 1`` and entries of at most ``peak``, and the
    represented one differs from it by a relative ``eps`` at most (within the
    norm bound), so the sum is at most ``(1 + eps)^2 (t0^2 (m - 1) + peak^2
    sum_m (tau_m^2 - t0^2))`` with ``t0`` the smallest ``tau``. Where the
    noise scale varies enough for that bound to be loose (by over 1 %), the
    sum is taken exactly, ``exact(i, tau2_i)`` for row ``i`` (except rows
    ``skip``, whose standard errors the caller replaces). Added: the design's
    own error, ``||S^1/2 (M^-1 - I)|| <= tau_max sqrt(1 + eps) e``, and each
    row's ``solve`` error over ``sqrt(D_j)``.
    """
    m = tau.shape[1]
    tau2 = tau**2
    t0 = tau2.min(axis=1)
    spread = peak**2 * (tau2 - t0[:, None]).sum(axis=1)
    var = np.repeat(((1.0 + eps) ** 2 * (t0 * (m - 1.0) + spread))[:, None], d, 1)
    loose = spread > _LOOSE_VARIANCE * t0 * (m - 1.0)
    if skip is not None:
        loose &= ~skip
    for i in np.flatnonzero(loose):
        var[i] = exact(i, tau2[i])
    se = np.sqrt(var) / (m - 1.0)
    se += (np.sqrt(tau2.max(axis=1) * (1.0 + eps)) * e / np.sqrt(m - 1.0))[:, None]
    se += (solve / np.sqrt(m - 1.0))[:, None]
    return se


def _fit_corrected(A, Y, tau, eps, n_orth, heavy, s):
    """Weighted least squares of rows on orthogonal designs changed in low
    rank (``A = B diag(s)`` as in :func:`_fit_orthogonal`, in whose notation
    ``B`` is called ``A`` below), all rows of the batch at once.

    Points of the orthogonal block keep weight 1, except the ``heavy`` ones
    (much noisier than the least noisy point), which get their weighted-fit
    weight ``w = (tau_min / tau)^2``; points added after the block are taken
    in with weight 1 (or ``w``). The Gram matrix is then ``D + C' S C``, with
    ``C`` those rows and ``S`` their weight changes, and Woodbury's identity
    solves with it in ``O(r^2 d)`` for ``r`` such rows. As in
    :func:`_fit_orthogonal` the solve is refined until its error is
    negligible and then bounded; the residuals are measured in each point's
    own ``tau`` (never below the weighted least-squares minimum); and as
    every weighted noise variance ``w tau^2`` is at most ``c``, the largest
    ``tau^2`` among the points of weight 1, the standard errors are at most
    ``sqrt(c diag(G^-1))``, with ``G^-1`` at most ``1 / (1 - q)`` times the
    corrected inverse, ``q = eps / lambda`` and ``lambda >= 1 - ||(1 -
    w)^1/2 H D^-1/2||^2`` the smallest eigenvalue of the scaled corrected
    Gram matrix (``H`` the heavy rows of the block).

    Rows of fewer correction points than the batch's most are padded with
    zero rows of ``C`` (their weight change 1): the padding is decoupled
    from the rest of each solve. A row's refinement stops on its own, so its
    result does not depend on its batch.

    Returns ``(beta, sigma_hat, se, dof, fitted)``; rows whose correction is
    not small have ``fitted`` False and nothing else of theirs is meaningful.
    """
    n, m, p = A.shape
    K = Y.shape[2]
    D = np.repeat(n_orth[:, None] - 1.0, p, axis=1)
    D[:, 0] = n_orth
    first = np.arange(m) < n_orth[:, None]
    w = np.where(heavy, (tau.min(axis=1)[:, None] / tau) ** 2, 1.0)
    parts = _corrections(A / s[:, None, :], w, heavy, first, tau)
    fitted, CD, M, diag, q = _woodbury_rows(
        parts.C, parts.change, parts.lowered, D, eps
    )
    s = s[:, :, None]
    Dk = D[:, :, None]

    def solve(b):
        return b / Dk - _t_mul(CD, _solve_rows(M, CD @ b))

    Yr = Y - Y[:, :1]
    wcol = w[:, :, None]
    beta = solve(t_prod(A, wcol * Yr) / s)
    resid = Yr - prod(A, beta / s)
    e = q / (1.0 - q)
    floor = _NEGLIGIBLE_SOLVE * tau.min(axis=1)
    inv_tau2 = 1.0 / tau[:, :, None] ** 2
    squares = np.zeros((n, K))  # rows not fitted keep 0 (replaced by the caller)
    err = np.zeros(n)
    active = fitted.copy()
    for _ in range(_MAX_REFINE):
        # One pass gives the update and what the residuals' sum of squares
        # after it needs (see _squares_rows).
        both = t_prod(A, np.concatenate([wcol * resid, resid * inv_tau2], axis=2)) / s
        update = solve(both[:, :, :K])
        beta[active] += update[active]
        size = e * np.sqrt((Dk * update**2).sum(axis=1)).max(axis=1)
        err[active] = size[active]
        done = active & (size <= floor)
        if done.any():
            squares[done] = _squares_rows(
                resid[done],
                update[done],
                both[done, :, K:],
                parts.take(done),
                tau[done],
                eps[done],
                D[done],
            )
        active &= ~done
        if not active.any():
            break
        resid[active] = (Yr - prod(A, beta / s))[active]
    squares[active] = ((resid[active] / tau[active, :, None]) ** 2).sum(axis=1)
    beta[:, 0] += Y[:, 0]
    dof = np.full(n, m - p, dtype=np.intp)
    sigma_hat = np.sqrt(squares / (m - p))
    c = (w * tau**2).max(axis=1)
    se = np.sqrt(c[:, None] * diag[:, 1:]) + (err[:, None] / np.sqrt(D[:, 1:]))
    return beta, sigma_hat, se, dof, fitted


class _Corrections(NamedTuple):
    """Per row, the design rows a low-rank correction changes, padded to the
    batch's most: ``C`` (n, r, p) those rows of ``[1, U]`` (zero rows where
    padded), ``change`` (n, r) their weight changes (1 where padded),
    ``lowered`` (n, r) the rows of the orthogonal block whose weight goes
    down, ``tau_low`` (n, r) their noise scales (1 where padded) and
    ``light`` (n, m) the block's points of weight 1."""

    C: np.ndarray
    change: np.ndarray
    lowered: np.ndarray
    tau_low: np.ndarray
    light: np.ndarray

    def take(self, rows):
        return _Corrections(*(field[rows] for field in self))


def _corrections(B, w, heavy, first, tau):
    """The :class:`_Corrections` of designs ``B = [1, U]`` (n, m, p) with
    weights ``w``: the ``heavy`` points of the orthogonal block (the points
    ``first``) and the points added after it."""
    low = (first & heavy) | ~first
    r = low.sum(axis=1)
    # The low points of each row first, in their order, then the others.
    idx = np.argsort(~low, axis=1, kind="stable")[:, : r.max()]
    valid = np.arange(idx.shape[1]) < r[:, None]
    C = np.take_along_axis(B, idx[:, :, None], axis=1)
    C[~valid] = 0.0
    w_low = np.take_along_axis(w, idx, axis=1)
    in_block = np.take_along_axis(first, idx, axis=1)
    change = np.where(valid, np.where(in_block, w_low - 1.0, w_low), 1.0)
    tau_low = np.where(valid, np.take_along_axis(tau, idx, axis=1), 1.0)
    return _Corrections(C, change, in_block & valid, tau_low, first & ~low)


def _woodbury_rows(C, change, lowered, D, eps):
    """The low-rank corrections of the Gram matrices ``diag(D)`` (n, p) by
    the design rows ``C`` (n, r, p) whose weights change by ``change`` (n,
    r), negative for the ``lowered`` rows of the orthogonal block (see
    :class:`_Corrections`): ``(fitted, CD, M, diag, q)``, with ``M`` the
    capacitance matrices ``S^-1 + C D^-1 C'`` (the identity for rows not
    ``fitted``, whose correction is not small), ``diag`` the corrected
    inverse's diagonal over ``1 - q`` and ``q = eps / lambda``."""
    H = (
        np.where(
            lowered[:, :, None],
            C * np.sqrt(np.where(lowered, -change, 0.0))[:, :, None],
            0.0,
        )
        / np.sqrt(D)[:, None, :]
    )
    lam = 1.0 - (np.linalg.norm(H, 2, axis=(1, 2)) ** 2 if H.size else 0.0)
    with np.errstate(divide="ignore"):
        q = np.where(lam > 0, eps / lam, np.inf)
    fitted = q < _MAX_CORRECTED_RATE
    CD = C / D[:, None, :]
    r = C.shape[1]
    # Symmetric but indefinite when weights go down: an LU solve.
    M = np.zeros((len(C), r, r))
    M[:, np.arange(r), np.arange(r)] = 1.0 / change
    M += CD @ np.swapaxes(C, 1, 2)
    M[~fitted] = np.eye(r)
    try:
        MinvCD = _solve_rows(M, CD)
    except np.linalg.LinAlgError:
        # A capacitance matrix singular to working precision: that row is
        # left to the weighted factorisation, the others keep theirs.
        for i in np.flatnonzero(fitted):
            try:
                _solve_rows(M[i : i + 1], CD[i : i + 1])
            except np.linalg.LinAlgError:
                fitted[i] = False
                M[i] = np.eye(r)
        MinvCD = _solve_rows(M, CD)
    # diag(G^-1) of the corrected inverse, by Woodbury again.
    diag = 1.0 / D - np.einsum("nij,nij->nj", CD, MinvCD)
    q = np.where(fitted, q, 0.0)
    return fitted, CD, M, np.maximum(diag, 0.0) / (1.0 - q)[:, None], q


def _solve_rows(M, b):
    """``M^-1 b`` per row (LU with partial pivoting, numpy's batched gesv)."""
    return np.linalg.solve(M, b)


def _t_mul(C, x):
    """``C' x`` per row, for ``C`` (n, r, p) and ``x`` (n, r, k)."""
    return np.swapaxes(C, 1, 2) @ x


def _squares_rows(resid, update, weighted, parts, tau, eps, D):
    """An upper bound on ``sum_m ((resid - B update) / tau)^2`` per row and
    column, without the pass over the designs ``B`` that the residuals after
    ``update`` would take.

    ``weighted`` is ``B' (resid / tau^2)``, ``parts`` the rows of ``B`` that
    a correction changes (:class:`_Corrections`: the heavy points and those
    added after the orthogonal block), ``D`` (n, p) the block's Gram
    diagonal. The sum is ``sum (resid / tau)^2 - 2 update' weighted + sum (B
    update / tau)^2``; the last term is summed exactly over the rows of
    ``C``, and over the block's other points it is at most what is left of
    ``||B_block update||^2 <= (1 + eps) update' D update``
    (``||D^-1/2 B'B D^-1/2 - I|| <= eps``) over their smallest ``tau^2``.
    Any coefficients' residuals are at least the weighted least-squares
    minimum, so the noise estimate stays at least as strict; the bound
    exceeds the exact sum by the spread of ``tau`` over the block's light
    points (a few in a thousand).
    """
    moved = parts.C @ update
    metric = (D[:, :, None] * update**2).sum(axis=1)
    in_block = parts.lowered[:, :, None]
    rest = (1.0 + eps)[:, None] * metric - (np.where(in_block, moved, 0.0) ** 2).sum(
        axis=1
    )
    quad = (moved / parts.tau_low[:, :, None]) ** 2
    own = ((resid / tau[:, :, None]) ** 2).sum(axis=1)
    cross = 2.0 * (update * weighted).sum(axis=1)
    total = own - cross + quad.sum(axis=1)
    light_tau = np.where(parts.light, tau, np.inf).min(axis=1)
    has_light = parts.light.any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        extra = np.where(
            has_light[:, None], np.maximum(rest, 0.0) / light_tau[:, None] ** 2, 0.0
        )
    total = total + extra
    # The terms' own rounding, with room to spare.
    slack = 1e-12 * (own + np.abs(cross) + metric / (tau.min(axis=1) ** 2)[:, None])
    return np.maximum(total + slack, 0.0)


def _plain_squares_after(resid, update, weighted, tau, eps, D):
    """:func:`_squares_rows` for rows (n, m, K) without heavy or added
    points, at once: ``sum (resid / tau)^2 - 2 update' weighted`` plus at
    most ``(1 + eps) update' D update`` over the smallest ``tau^2``."""
    own = ((resid / tau[:, :, None]) ** 2).sum(axis=1)
    cross = 2.0 * (update * weighted).sum(axis=1)
    quad = (D * update**2).sum(axis=1) / (tau.min(axis=1) ** 2)[:, None]
    total = own - cross + (1.0 + np.asarray(eps))[:, None] * quad
    slack = 1e-12 * (own + np.abs(cross) + quad)
    return np.maximum(total + slack, 0.0)


def _design_error(x0, step, n_orth, exact):
    """Bounds on the orthogonal designs: ``eps`` (n,) and ``peak`` (n,).

    ``eps`` bounds ``||D^-1/2 A'A D^-1/2 - I||`` for the design ``A`` as
    represented, ``peak`` the largest entry of its ``U``. The drawn design
    deviates from ``D`` by at most its basis's measured deviation
    (:func:`~sklearn_plm_explain._openapi._design.basis_bounds`). Its points were drawn
    as ``x0 + step * u`` and read back as ``x - x0``, i.e. ``U = (x - x0) /
    step`` in exact arithmetic: each entry then errs from the drawn one by at
    most ``2^-52 (3 peak + |x0| / step)`` (one rounding per operation, with
    room to spare); with ``Delta`` that difference over the ``n_orth - 1``
    drawn points and ``||A||^2 <= n_orth (1 + deviation)``, the represented
    design adds at most ``(2 ||A|| ||Delta||_F + ||Delta||_F^2) / (n_orth -
    1)``. ``exact`` (n,) marks the rows drawn from the exact basis, whose own
    deviation is then the one bounded.
    """
    n_orth = np.asarray(n_orth)
    d = x0.shape[1]
    eps, peak = np.empty(n_orth.size), np.empty(n_orth.size)
    for size in np.unique(n_orth):
        for kind in (False, True):
            rows = (n_orth == size) & (exact == kind)
            if rows.any():
                eps[rows], peak[rows] = basis_bounds(int(size) - 1, d, kind)
    m = n_orth.astype(np.float64)
    entry = EPS * (3.0 * peak[:, None] + np.abs(x0 / step))
    delta = np.sqrt((m - 1.0) * (entry**2).sum(axis=1))
    norm = np.sqrt(m * (1.0 + eps))
    return eps + (2.0 * norm * delta + delta**2) / (m - 1.0), peak


def relative_bound(slope, sigma, se_x):
    """Bound on the relative L1 error of every response column's slope.

    ``sigma`` (n, K) is the noise level used, ``se_x`` (n, d) the per-unit
    standard errors of the slopes in input space.
    """
    abs_bound = BOUND_Z * sigma * se_x.sum(axis=1)[:, None]
    norm = np.abs(slope).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(norm > 0, abs_bound / norm, np.inf)
    return rel
