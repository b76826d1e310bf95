"""Least-squares fits of local linear models and their exactness certificate.

The numerical kernel of :class:`OpenAPIExplainer`. Everything here is batched
over rows that share one design size, and free of model queries.
"""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from scipy import stats

EPS = np.finfo(np.float64).eps

# Multiplier on float64 eps for the rounding error of a response of magnitude
# |L|: a model's forward pass, a softmax and a log each add a few ulps.
FLOOR_ULPS = 4.0

# The error bound multiplies the (inflated) noise level by this factor and sums
# the per-coefficient standard errors, which covers the L1 norm of the error of
# all coefficients jointly with a wide margin.
BOUND_Z = 1.0

# Below this, a probability's absolute rounding error matters in log space.
_SMALL_P = 2.0**-10


def noise_inflation(n_witnesses, level=1e-3):
    """Upper confidence factor for a noise level estimated from residuals.

    With ``k`` spare degrees of freedom, ``s^2 k / sigma^2`` is chi-square with
    ``k`` degrees of freedom; ``sigma <= s * sqrt(k / q)`` with ``q`` its lower
    ``level`` quantile, at confidence ``1 - level``.
    """
    q = stats.chi2.ppf(level, n_witnesses)
    return float(np.sqrt(n_witnesses / q))


def noise_scale(L, P=None):
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

    Returns
    -------
    tau : ndarray of shape (n, m)
    """
    # A centred log-ratio carries its own column's relative rounding error and
    # a 1/K share of every other column's: at most twice the largest.
    tau = 2.0 * FLOOR_ULPS * EPS * (1.0 + np.abs(L).max(axis=2))
    if P is not None:
        on_grid = grid_rounded(P)
        # Rounding to the grid of 1 - p errs by at most eps/4, and the larger
        # probability itself by about as much again.
        safe = np.where(on_grid, P, 1.0)
        absolute = np.where(on_grid, 0.5 * EPS / safe, 0.0)
        tau = tau + absolute.max(axis=2)
    return tau


def grid_rounded(P):
    """Which small probabilities were computed as one minus the others."""
    return (P > 0) & (P < _SMALL_P) & (np.mod(P * 2.0**53, 1.0) == 0.0)


def fit_local_models(U, Y, x0, step, centre, tau):
    """Weighted least-squares fit of ``Y ~ 1 + U`` per row.

    Parameters
    ----------
    U : ndarray of shape (n, m, d)
        Query points in scaled coordinates, ``(x - x0) / step``; one row of
        each block is the origin (the explained point itself).
    Y : ndarray of shape (n, m, K)
        Responses in log space.
    x0 : ndarray of shape (n, d)
        The explained rows.
    step : ndarray of shape (n, d)
        Per-row, per-feature unit of ``U`` (radius times feature scale).
    centre : bool
        Centre the responses across columns first (centred log-ratios).
    tau : ndarray of shape (n, m)
        Noise scale of each point (see :func:`noise_scale`); points are
        weighted by ``1 / tau`` and residuals are measured in these units.

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
        normalised noise.
    """
    n, m, d = U.shape
    if centre:
        Y = Y - Y.mean(axis=2, keepdims=True)
    w = 1.0 / tau[:, :, None]
    A = np.concatenate([np.ones((n, m, 1)), U], axis=2) * w
    Q, R = np.linalg.qr(A)
    beta = np.linalg.solve(R, np.swapaxes(Q, 1, 2) @ (Y * w))
    resid = Y * w - A @ beta
    sigma_hat = np.sqrt((resid**2).sum(axis=1) / (m - (d + 1)))
    # Standard errors of the coefficients are sigma * sqrt(diag((A'A)^-1)),
    # and (A'A)^-1 = R^-1 R^-T.
    Rinv = np.linalg.inv(R)
    se_unit = np.sqrt((Rinv**2).sum(axis=2))[:, 1:]  # (n, d), slopes only
    slope = beta[:, 1:, :] / step[:, :, None]
    intercept = beta[:, 0, :] - np.einsum("nd,ndk->nk", x0, slope)
    return slope, intercept, sigma_hat, se_unit / step


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
