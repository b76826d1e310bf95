"""Query designs of the local fits: where a row's cube is sampled."""

# SPDX-License-Identifier: BSD-3-Clause

from functools import lru_cache

import numpy as np


def design(rng, n, d, fresh):
    """Query offsets in units of the step: ``n`` points in ``d`` dimensions.

    A fresh cube gets the orthogonal design of :func:`orthogonal_design`;
    points added to an existing cube are standard normal (the fit of such a
    cube is a general least-squares fit).
    """
    if not fresh or n < d + 1:
        return rng.standard_normal((n, d))
    return orthogonal_design(rng, n, d)


def orthogonal_design(rng, n, d):
    """``n`` points whose design ``[1, U]`` has orthogonal columns of norm ``n``.

    The columns are ``d`` of the ``n - 1`` non-constant columns of the
    orthogonal cosine (DCT-II) basis of size ``n``, chosen at random (and
    given to the features in increasing order of frequency), with random
    signs: so ``U'1 = 0`` and ``U'U = n I`` hold in closed form, no row
    is factorised, and a fit is a few matrix products
    (:func:`sklearn_plm_explain._certify.fit_local_models`). Every slope is
    estimated with the smallest variance ``n`` points allow (a uniform random
    design with barely more points than unknowns is nearly singular and
    several times worse); each point projects on a direction as a sum of
    cosines with random signs, and the draw is the row's own, so that no
    fixed direction is left unsampled and a region boundary crossing the cube
    puts points on both of its sides. (The order of the points is irrelevant
    to the fit, so it is not drawn.)

    More than ``2 (d + 1)`` points are drawn as independent blocks of at
    least ``d + 1`` each: a sum of orthogonal designs is orthogonal, and the
    bases stay of size about ``d``. Drawing costs O(n d) once the basis of
    each size is built (O(n^2) memory, kept for a few sizes).
    """
    k = max(1, n // (d + 1))
    sizes = [n // k + (b < n % k) for b in range(k)]
    blocks = []
    for size in sizes:
        # The features get the chosen frequencies in increasing order, so
        # that the gather reads the basis forwards; the signed basis holds
        # each vector with both signs, so that one gather draws the block.
        cols = 1 + np.sort(rng.choice(size - 1, size=d, replace=False))
        negative = rng.choice(np.array([False, True]), size=d)
        blocks.append(
            np.take(_signed_cosine_basis(size), cols + size * negative, axis=1)
        )
    return np.concatenate(blocks) if k > 1 else blocks[0]


@lru_cache(maxsize=6)
def _signed_cosine_basis(n):
    """The columns of :func:`_cosine_basis`, then the same columns negated."""
    basis = _cosine_basis(n)
    signed = np.concatenate([basis, -basis], axis=1)
    signed.setflags(write=False)
    return signed


def _cosine_basis(n):
    """``sqrt(2) cos(pi (2j + 1) k / (2n))``: the DCT-II basis scaled to norm n.

    The integer ``(2j + 1) k`` is reduced modulo ``4n`` before it is scaled,
    so each phase lies in ``[0, 2 pi)`` and each entry is within a few ulps
    of its exact value whatever ``n`` is (the design's error bound in
    ``_certify`` counts on it). Column 0 is constant and not used.
    """
    j = np.arange(n, dtype=np.int64)[:, None]
    k = np.arange(n, dtype=np.int64)[None, :]
    t = ((2 * j + 1) * k) % (4 * n)
    return np.sqrt(2.0) * np.cos((np.pi / (2 * n)) * t.astype(np.float64))
