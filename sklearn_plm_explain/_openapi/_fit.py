"""Least-squares fits of local linear models and their exactness certificate.

The numerical kernel of :class:`OpenAPIExplainer`. Everything here is batched
over rows that share one design size, and free of model queries.
"""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from sklearn_plm_explain._openapi._design import (
    _basis,
    exact_first_solve,
    exact_gram,
    origin_gram_diagonal,
)
from sklearn_plm_explain._openapi._solve import (
    _MAX_REFINE,
    _NEGLIGIBLE_SOLVE,
    _Corrections,
    _design_error,
    _fit_corrected,
    _fit_orthogonal,
    _fit_weighted,
    _orthogonal_se,
    _plain_squares_after,
    _solve_rows,
    _squares_rows,
    _woodbury_rows,
    column_units,
)
from sklearn_plm_explain._utils._products import prod, t_prod

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
# Steps (radius times feature scale) outside this range are fitted in units of
# the step: squares of offsets times squares of noise scales (1e-32) stay far
# from the floating-point range's ends inside it.
_TINY_STEP = 1e-60
_HUGE_STEP = 1e60
# Designs of at least this many bytes per row are fitted on views of their
# batch, run by run of adjacent rows, instead of on a copy of a subset; so
# are smaller ones in at most _VIEW_RUNS runs (as when one row of a first
# round is left to the corrected fit: copying the others' designs would cost
# more than a second call).
_VIEW_BYTES = 2**18
_VIEW_RUNS = 4


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
