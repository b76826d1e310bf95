"""Query designs of the local fits: where a row's cube is sampled."""

# SPDX-License-Identifier: BSD-3-Clause

from functools import lru_cache

import numpy as np

# The bases are random but fixed: drawn once per size from this seed, so that
# a row's design depends only on its own generator.
_BASIS_SEED = 20261202
# Beyond this many runs of adjacent columns, or up to this many entries, a
# design is gathered column by column (the faster way below d of about 128).
_MAX_RUNS = 32
_SMALL_DESIGN = 128 * 132
# The bases' entries are multiples of 2^-_BASIS_BITS and the cubes' steps
# have _STEP_BITS significant bits, so that a step times an entry is exact
# and lies on a grid that the explained row's own digits share (see
# exact_offsets).
_BASIS_BITS = 26
_STEP_BITS = 8
# Designs of more entries than this are drawn exactly where they can be.
EXACT_MIN_ENTRIES = _SMALL_DESIGN
# A feature whose coordinate lies just below a power of two has its step
# halved up to this many times for its points to stay exact.
_MAX_HALVINGS = 8


def design(rng, n, d, fresh, out=None, scale=None, layout=None, exact=False):
    """Query offsets in units of the step: ``n`` points in ``d`` dimensions.

    A fresh cube gets the orthogonal design of :func:`orthogonal_design`;
    points added to an existing cube are standard normal (the fit of such a
    cube is a general least-squares fit). ``out``, an (n, d) float64 array
    with contiguous rows, receives the design instead of a new array;
    ``scale`` (d,) multiplies its columns (the same numbers as multiplying
    the returned design). ``layout`` and ``exact`` as in
    :func:`orthogonal_design`.
    """
    if out is None:
        out = np.empty((n, d))
    if fresh and n >= d + 1:
        return orthogonal_design(
            rng, n, d, out=out, scale=scale, layout=layout, exact=exact
        )
    rng.standard_normal((n, d), out=out)
    if scale is not None:
        out *= scale
    return out


def orthogonal_design(rng, n, d, out=None, scale=None, layout=None, exact=False):
    """``n`` points whose design ``[1, U]`` has orthogonal columns of norm ``n``.

    The columns are ``d`` of the ``n - 1`` non-constant columns of a random
    orthogonal basis of size ``n`` whose first column is constant (drawn once
    per size, see :func:`basis_bounds`), chosen at random and given to the
    features in increasing order, with random signs: so ``U'1 = 0`` and ``U'U
    = n I`` hold to within the basis's measured deviation, no row is
    factorised, and a fit is a few matrix products
    (:func:`sklearn_plm_explain._openapi._fit.fit_local_models`). Every slope is
    estimated with the smallest variance ``n`` points allow (a uniform random
    design with barely more points than unknowns is nearly singular and
    several times worse).

    The basis is a random one, not a structured transform (a cosine basis,
    a Hadamard matrix), on purpose: the elementwise product of two columns of
    such a transform is again in its span, so a curvature of zero mean (an
    interaction ``x_a x_b``, a saddle of dense kinks) would be fitted
    exactly, leave no residual, and turn into slope bias. Products of columns
    of a random basis are generic vectors, whose residual the test sees, as
    with a design drawn afresh for every row.

    More than ``2 (d + 1)`` points are drawn as independent blocks of at
    least ``d + 1`` each: a sum of orthogonal designs is orthogonal, and the
    bases stay of size about ``d``. Drawing costs O(n d) once the basis of a
    size is built (O(n^3), once per size and process).

    ``layout``, a list, receives each block's ``(size, cols, sign)``: its
    basis size, the basis columns drawn and their signs (the block is
    ``_basis(size, exact)[0][:, cols] * sign * scale``). ``exact`` draws from
    the basis rounded to the grid of :func:`exact_offsets`.
    """
    out = np.empty((n, d)) if out is None else out
    start = 0
    for size in _block_sizes(n, d):
        cols, sign = _columns_and_signs(_block_draws(rng, size, d)[None], d)
        cols, sign = cols[0], sign[0]
        block = out[start : start + size]
        # Signs and scale on the way: (-b) s and b (-s) are the same number.
        factor = sign if scale is None else sign * scale
        _gather_columns(_basis(size, exact)[0], cols, block, factor)
        if layout is not None:
            layout.append((size, cols, sign))
        start += size
    return out


def orthogonal_designs(rngs, n, d, out, scale):
    """:func:`orthogonal_design` of one block for many rows at once.

    ``out`` (R, n, d) receives row ``r``'s design drawn by ``rngs[r]``, its
    columns multiplied by ``scale[r]``: the same numbers as ``R`` calls of
    :func:`orthogonal_design`, for the same draws from each generator and a
    few array operations over all rows (a call per row costs more than its
    design at small widths, where a round explains hundreds of rows). For
    designs of one block, from the basis that is not rounded to the grid of
    :func:`exact_offsets`.
    """
    if not single_block(n, d):
        raise ValueError(f"{n} points in {d} dimensions are not one block")
    draws = np.stack([_block_draws(rng, n, d) for rng in rngs])
    cols, sign = _columns_and_signs(draws, d)
    # basis[:, cols] is (n, R, d): row r's columns, its points along axis 0.
    gathered = _basis(n)[0][:, cols]
    np.multiply(gathered.transpose(1, 0, 2), (sign * scale)[:, None, :], out=out)
    return [(n, c, s) for c, s in zip(cols, sign)]


def _block_draws(rng, size, d):
    """The draws of one block from the row's generator, in one call (a call
    costs more than the numbers at small widths): ``size - 1`` uniform keys,
    one per non-constant basis column, and ``d`` more for the signs."""
    return rng.random(size - 1 + d)


def _columns_and_signs(draws, d):
    """Basis columns (increasing) and signs ``+-1`` of the blocks whose
    draws (see :func:`_block_draws`) are the rows of ``draws``.

    The columns are those of the ``d`` smallest keys: a uniformly random
    choice of ``d`` of the ``size - 1``, as a uniformly random permutation's
    first ``d`` would be.
    """
    keys = draws[:, :-d]
    chosen = np.argpartition(keys, d - 1, axis=1)[:, :d]
    cols = 1 + np.sort(chosen, axis=1)
    sign = np.where(draws[:, -d:] < 0.5, -1.0, 1.0)
    return cols, sign


def _gather_columns(basis, cols, out, factor):
    """``out[:] = basis[:, cols] * factor`` for increasing ``cols``.

    A design of ``d + 1`` to ``d + 5`` points leaves out a few of its basis's
    columns: the rest is a few runs of adjacent columns, multiplied as blocks
    (faster than a gather of single columns at image width),
    in one pass over the design.
    """
    if out.size > _SMALL_DESIGN:
        starts = np.flatnonzero(np.diff(cols) != 1) + 1
        if starts.size < _MAX_RUNS:
            for lo, hi in zip([0, *starts], [*starts, cols.size]):
                first = cols[lo]
                np.multiply(
                    basis[:, first : first + hi - lo], factor[lo:hi], out=out[:, lo:hi]
                )
            return
    # Small designs, or many runs: one gather costs less than the runs' calls.
    np.multiply(basis[:, cols], factor, out=out)


def exact_step(step):
    """``step`` rounded down to ``_STEP_BITS`` significant bits (by at most
    0.4 %): its products with a basis entry are exact."""
    mantissa, exponent = np.frexp(step)
    return np.ldexp(np.floor(np.ldexp(mantissa, _STEP_BITS)), exponent - _STEP_BITS)


def fit_step_below(x0, step, largest, max_halvings=_MAX_HALVINGS):
    """``step`` with each feature's step halved as often as it takes (at most
    ``max_halvings`` times) for ``|x0| + step * largest`` to stay below the
    binade of ``x0`` that the offsets' exactness needs (see
    :func:`exact_offsets`); a coordinate just below a power of two otherwise
    has its points' sums on a coarser grid."""
    _, E = np.frexp(x0)
    gap = np.ldexp(1.0, E) - np.abs(x0)
    need = np.where(
        x0 == 0, 0.0, step * largest / np.maximum(gap, np.finfo(float).tiny)
    )
    halvings = np.clip(np.ceil(np.log2(np.maximum(need, 1.0)) + 1e-9), 0, max_halvings)
    halvings = np.where(need >= 1.0, np.maximum(halvings, 1), 0)
    return np.ldexp(step, -halvings.astype(int))


def exact_offsets(x0, step, largest):
    """Whether the points ``x0 + step * u`` of a design with entries ``|u| <=
    largest`` are represented exactly, and read back as ``x - x0`` exactly:
    the drawn design is then the fitted one, bit for bit.

    ``step`` must come from :func:`exact_step`. Every offset ``step * u`` is
    then exact (at most 8 + 29 significant bits) and a multiple of ``2^(e -
    _STEP_BITS - _BASIS_BITS)``, ``2^e`` the step's binade above it. Its sum
    with a coordinate ``x0`` of binade ``[2^(E-1), 2^E)`` is exact when that
    grid is no finer than ``x0``'s (``2^(E-53)``) and the sum stays below
    ``2^E`` in magnitude; a zero coordinate gives the offset itself. The
    difference ``x - x0`` of two exact numbers that equals an exact number is
    computed exactly.
    """
    return bool(np.all(_exact_columns(x0, step, largest)))


def _exact_columns(x0, step, largest):
    _, e = np.frexp(step)
    _, E = np.frexp(x0)
    on_grid = e - _STEP_BITS - _BASIS_BITS >= E - 53
    below = np.abs(x0) + step * largest < np.ldexp(1.0, E)
    return (x0 == 0) | (on_grid & below)


def exact_gram(n):
    """``B'B`` of the exact basis of size ``n`` (read-only; see
    :func:`_exact`)."""
    return _exact(n)[1]


def origin_gram_diagonal(n):
    """``diag(n + 1, n, ..., n)`` as a vector: the Gram diagonal of the
    design ``[1, U]`` of the origin and the ``n`` points of a basis of size
    ``n`` (the origin adds 1 to the constant column's)."""
    E = np.full(n, float(n))
    E[0] = n + 1.0
    return E


@lru_cache(maxsize=6)
def exact_first_solve(n):
    """``F`` (n, n) such that ``F' y`` is the first solve of the fits on the
    exact basis of size ``n``, with its one step on the Gram matrix folded in
    (read-only): ``F' y = M B'y``, ``M = E^-1 (2 I - G E^-1)``, ``G = B'B``
    and ``E = diag(n + 1, n, ..., n)``, the Gram diagonal of a design of the
    origin and the basis's ``n`` points (see
    :meth:`sklearn_plm_explain._openapi._fit._BasisProducts.first_solve`)."""
    basis, gram = _exact(n)[:2]
    E = origin_gram_diagonal(n)
    M = (2.0 * np.eye(n) - gram / E[None, :]) / E[:, None]
    F = basis @ M.T
    F.setflags(write=False)
    return F


def basis_bounds(n, d, exact=False):
    """What the fits may assume of an orthogonal design of ``n`` points.

    Returns ``(deviation, largest)``: a bound on ``||D^-1/2 B'B D^-1/2 -
    I||_2`` over the blocks' bases ``B = [1, U]`` (any subset of columns with
    any signs: a principal submatrix of a signed Gram matrix has no larger
    norm), measured once when the basis was built, with the rounding of that
    measurement added; and the largest entry of ``U`` in absolute value.
    """
    bounds = [_basis(size, exact)[1:] for size in _block_sizes(n, d)]
    # A sum of blocks deviates by at most their largest relative deviation.
    return max(b[0] for b in bounds), max(b[1] for b in bounds)


def single_block(n, d):
    """Whether a design of ``n`` points in ``d`` dimensions is one block."""
    return len(_block_sizes(n, d)) == 1


def _block_sizes(n, d):
    k = max(1, n // (d + 1))
    return [n // k + (b < n % k) for b in range(k)]


@lru_cache(maxsize=12)
def _basis(n, exact=False):
    """The basis of size ``n`` (columns 1 to n - 1 used), with its measured
    deviation and largest entry (signs are the design's, see
    :func:`orthogonal_design`). ``exact``: the same basis with its entries
    rounded to the grid :func:`exact_offsets` needs (see :func:`_exact`).

    ``sqrt(n)`` times the Q factor of a Gaussian matrix whose first column is
    all ones: a random orthogonal matrix with a constant first column. Its
    Gram matrix is computed once, so that the deviation from ``n I`` the fits
    correct for is measured, not assumed.
    """
    if exact:
        basis, _, deviation, largest = _exact(n)
        return basis, deviation, largest
    rng = np.random.default_rng([_BASIS_SEED, n])
    G = rng.standard_normal((n, n))
    G[:, 0] = 1.0
    Q, R = np.linalg.qr(G)
    Q *= np.sign(np.diag(R))
    basis = np.sqrt(n) * Q
    basis[:, 0] = 1.0
    deviation, largest = _measured(basis, basis.T @ basis)
    basis.setflags(write=False)
    return basis, deviation, largest


@lru_cache(maxsize=6)
def _exact(n):
    """The exact basis of size ``n``, its Gram matrix ``B'B``, deviation and
    largest entry: :func:`_basis`'s entries rounded to multiples of
    ``2^-_BASIS_BITS`` (the constant column stays 1). The rounding leaves it
    orthogonal to about 1e-8 in norm (1e-7 in the Frobenius norm that is
    measured), which the fits' first solve corrects with the Gram matrix."""
    scale = 2.0**_BASIS_BITS
    basis = np.round(_basis(n, False)[0] * scale) / scale
    gram = basis.T @ basis
    deviation, largest = _measured(basis, gram)
    basis.setflags(write=False)
    gram.setflags(write=False)
    return basis, gram, deviation, largest


def _measured(basis, gram):
    """Deviation bound and largest entry of ``basis`` from its ``gram``."""
    n = basis.shape[0]
    gram = gram / n
    np.fill_diagonal(gram, gram.diagonal() - 1.0)
    largest = float(np.abs(basis[:, 1:]).max())
    # The Frobenius norm bounds the spectral one; the Gram's own rounding
    # errs by at most n eps largest^2 / n per entry (with room to spare).
    rounding = 2.0 * n * np.finfo(np.float64).eps * max(largest, 1.0) ** 2
    return float(np.sqrt((gram**2).sum())) + n * rounding, largest
