"""Thin cubes for rows that lie close to a boundary between linear regions.

A row a small distance ``delta`` from a region boundary can only be sampled
by cubes much smaller than ``delta``, whose slope estimates the responses'
rounding noise may leave unresolved. Only the direction across the boundary
is that confined, though: along the boundary the region usually extends much
further. For a continuous piecewise-linear model (a ReLU network) the
responses just beyond a single boundary differ from the row's own linear
model by a hinge, ``c * max(0, w @ u - delta)``: rank one across the
response columns and affine in the offset ``u`` beyond it. The points of the
cubes that crossed the boundary therefore reveal its normal ``w`` by a
least-squares fit, and a cube *centred on the row*, thinner than ``delta``
along ``w`` and as wide as the region allows along the boundary, resolves
every slope but the one across the boundary to the precision of a wide cube.

The thin cube is symmetric about the row like any other cube, so curvature
does not bias its slopes and a further boundary that crosses it leaves
residuals in proportion to the cube's width; nothing here certifies anything
by itself.
"""

# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass

import numpy as np

# Spare equations beyond the d + 1 unknowns of the hinge, so that its fit can
# be checked.
SPARE = 8
# A crossed point is used when its hinge residual is at least this fraction
# of the largest; smaller ones are dominated by the row's own slope error.
MIN_SHARE = 1e-3
# The thin cube's half-width across the boundary, as a share of its distance.
HALF_WIDTH_SHARE = 0.8
# The hinge must explain the crossed points' residuals to this relative
# precision, and their second singular value must be this much smaller than
# the first (a single boundary, not several).
HINGE_RTOL = 1e-4


@dataclass
class Hinge:
    """A region boundary near the row, in the row's scaled coordinates.

    ``normal`` is a unit vector pointing across the boundary, which lies at
    ``offset`` > 0 from the row along it.
    """

    normal: np.ndarray
    offset: float


def kink_residuals(U, Y, base_U, base_Y, centre):
    """Residuals of points from the linear fit of a consistent cube.

    Parameters
    ----------
    U, Y : ndarray of shape (m, d) and (m, K)
        Offsets from the row (scaled coordinates) and log-space responses of
        points of cubes that were not linear.
    base_U, base_Y : ndarray of shape (b, d) and (b, K)
        The same for the largest consistent cube, origin included.
    centre : bool
        Centre the responses across columns (centred log-ratios).

    Returns
    -------
    E : ndarray of shape (m, K)
    """
    if centre:
        Y = Y - Y.mean(axis=1, keepdims=True)
        base_Y = base_Y - base_Y.mean(axis=1, keepdims=True)
    A = np.column_stack([np.ones(len(base_U)), base_U])
    beta = np.linalg.lstsq(A, base_Y, rcond=None)[0]
    return Y - np.column_stack([np.ones(len(U)), U]) @ beta


def crossed_points(E):
    """The points whose residuals show they lie beyond one boundary.

    Parameters
    ----------
    E : ndarray of shape (m, K)
        Residuals from the row's own linear model (see :func:`kink_residuals`).

    Returns
    -------
    crossed : ndarray of shape (m,) of bool, or None
        None when no point crossed, or the residuals of those that did are
        not rank one across the response columns (more than one boundary).
    """
    norms = np.linalg.norm(E, axis=1)
    if not np.all(np.isfinite(norms)) or norms.max(initial=0.0) <= 0.0:
        return None
    crossed = norms >= MIN_SHARE * norms.max()
    sv = np.linalg.svd(E[crossed], compute_uv=False)
    if sv.size > 1 and sv[1] > HINGE_RTOL * sv[0]:
        return None
    return crossed


def fit_hinge(U, E, crossed):
    """Locate the boundary from at least ``d + 1 + SPARE`` crossed points.

    Parameters
    ----------
    U : ndarray of shape (m, d)
        Offsets of the points from the row, in scaled coordinates.
    E : ndarray of shape (m, K)
        Their residuals from the row's own linear model.
    crossed : ndarray of shape (m,) of bool
        The points beyond the boundary (see :func:`crossed_points`).

    Returns
    -------
    hinge : Hinge or None
        None when the crossed points' residuals are not affine in their
        offsets (not one flat boundary) or put the row itself beyond it.
    """
    if crossed.sum() < U.shape[1] + 1 + SPARE:
        raise ValueError("Too few crossed points to fit a hinge.")
    _, _, Vt = np.linalg.svd(E[crossed], full_matrices=False)
    s = E[crossed] @ Vt[0]
    # The hinge is non-negative beyond the boundary: orient its jump so.
    s = s * np.sign(s.sum())
    A = np.column_stack([np.ones(len(s)), U[crossed]])
    beta = np.linalg.lstsq(A, s, rcond=None)[0]
    gradient = np.linalg.norm(beta[1:])
    if gradient <= 0.0 or np.abs(s - A @ beta).max() > HINGE_RTOL * np.abs(s).max():
        return None
    offset = -beta[0] / gradient
    if not offset > 0.0:
        return None
    return Hinge(beta[1:] / gradient, float(offset))


def thin(u, normal, half_width):
    """Squeeze points into a slab of ``half_width`` about the row along ``normal``.

    Every point keeps its components along the boundary and is moved to
    ``+half_width`` or ``-half_width`` along ``normal``, by the sign of its
    own component: a design symmetric about the row, whose spread across the
    boundary is the largest one that never reaches it.
    """
    t = u @ normal
    side = np.where(t >= 0.0, 1.0, -1.0)
    return u + np.outer(half_width * side - t, normal)


class BoundaryProbe:
    """More points across a boundary too few have crossed, in one model call.

    Stands in a row's place among the searches for one round: a plain cube
    of ``n_new`` points at ``radius``, whose points join the kept cubes of
    ``parent``, the search that is locating the boundary.
    """

    keep = False

    def __init__(self, parent, radius, n_new):
        self.parent = parent
        self.radius = radius
        self.n_new = n_new

    def orient(self, u):
        return u
