"""The weighted least squares of one cube: orthogonal designs solved in
closed form, other designs by QR, and the corrections for heavy points
(Woodbury updates), each with its residual sums of squares and the design's
rounding error."""

# SPDX-License-Identifier: BSD-3-Clause

from typing import NamedTuple

import numpy as np
from scipy import linalg

from sklearn_plm_explain._openapi._design import basis_bounds
from sklearn_plm_explain._utils._floats import EPS
from sklearn_plm_explain._utils._products import prod, t_prod

_MAX_CORRECTED_RATE = 0.5


# The fast fit refines its solve at most this often, and stops once the
# solve's error bound is this fraction of the smallest noise scale.
_MAX_REFINE = 6


_NEGLIGIBLE_SOLVE = 1e-3


# The fast fit's closed-form bound on the standard errors is used while it
# is within this fraction of the exact value.
_LOOSE_VARIANCE = 0.01


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
