"""The local fit of LIME: weighted statistics, feature selection, surrogate.

One weighted, weighted-centred set of sufficient statistics per row
(:class:`_LocalStats`) serves every selection mode of lime, the Ridge
surrogate and every explained label (multi-right-hand-side solves); the
kernel turns distances in the interpretable space into weights.
"""

# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import lars_path_gram

from sklearn_plm_explain._utils._products import t_prod


class _LocalStats:
    """Weighted, weighted-centred sufficient statistics of one neighbourhood.

    ``G = Zc' W Zc`` and ``b = Zc' W yc`` (``c``: centred at the weighted
    means). Every selection mode and the Ridge surrogate are solved from
    these, which is what sklearn's ``Ridge(sample_weight=w)`` and lime's
    lasso path compute from the data.
    """

    def __init__(self, Z, w, Y, prefix=None):
        self.n, self.d = Z.shape
        self._Z, self._w, self._G = Z, w, None
        self._cols, self._asked = {}, set()
        if prefix is None:
            self.wsum = w.sum()
            self._wz, self._zy, _ = _weighted_sums(Z, w, Y, [])
        else:
            # The statistics of this sample's first points with the same
            # weights: the d-wide sums read only the points added since.
            lo = prefix.n
            keys = [j for j in prefix._cols if j in prefix._asked]
            wz, zy, cols = _weighted_sums(Z[lo:], w[lo:], Y[lo:], keys)
            self.wsum = prefix.wsum + w[lo:].sum()
            self._wz = prefix._wz + wz
            self._zy = prefix._zy + zy
            for j, col in zip(keys, cols.T):
                self._cols[j] = prefix._cols[j] + col
        self.mu = self._wz / self.wsum
        self.ybar = w @ Y / self.wsum
        self.b = self._zy - self.wsum * np.outer(self.mu, self.ybar)
        resid = Y - self.ybar
        self.syy = w @ (resid * resid)
        # Below this the target is flat up to rounding of its weighted mean.
        self.flat = (1e-13 * np.abs(self.ybar)) ** 2 * self.wsum
        self.z0 = Z[0]

    @property
    def G(self):
        """The full weighted-centred Gram matrix, computed when first asked.

        At n samples and d columns it costs n d² operations: a selection
        that reads only a few of its columns (S-LIME's LARS steps) never
        forms it.
        """
        if self._G is None:
            # A.T @ A with the same operand runs as a symmetric rank-k update.
            A = self._Z * np.sqrt(self._w)[:, None]
            G = A.T @ A
            G -= self.wsum * np.outer(self.mu, self.mu)
            self._G = G
        return self._G

    def gram_columns(self, S, ahead=()):
        """``G[:, S]``, each column summed once over the data (one pass for
        all missing columns) and kept: a grown sample (``prefix``) sums only
        its new points for the columns its prefix had.

        When a column is missing, those of ``ahead`` (features likely asked
        for next) are summed in the same pass: a pass over the data costs
        about as much for a few columns as for one. They are kept for this
        sample only, unless asked for.
        """
        S = [int(j) for j in S]
        missing = [j for j in S if j not in self._cols]
        if missing:
            extra = [int(j) for j in ahead if j not in self._cols]
            extra = [j for j in extra if j not in missing]
            Z, w = self._Z, self._w
            cols = missing + extra
            sums = t_prod(Z, Z[:, cols] * w[:, None])
            self._cols.update(zip(cols, sums.T))
        self._asked.update(S)
        if not S:
            return np.empty((self.d, 0))
        cols = np.column_stack([self._cols[j] for j in S])
        return cols - self.wsum * np.outer(self.mu, self.mu[S])

    def gram_block(self, S):
        """``G[S, S]``, from the data when the full matrix was never formed."""
        if self._G is not None or S.size == self.d:
            return self.G[np.ix_(S, S)]
        A = (self._Z[:, S] - self.mu[S]) * np.sqrt(self._w)[:, None]
        return A.T @ A

    def correlations(self, v):
        """``Zc' diag(sqrt(w)) v`` for the weighted-centred data ``Zc``: one
        pass over the data, without forming it."""
        sw = np.sqrt(self._w)
        return (sw * v) @ self._Z - self.mu * (sw @ v)

    def ridge(self, S, label, alpha):
        """Coefficients, intercept, weighted R² and prediction at the row."""
        S = np.asarray(S, dtype=np.intp)
        b = self.b[S, label]
        GS = self.gram_block(S)
        if S.size:
            coef = np.linalg.solve(GS + alpha * np.eye(S.size), b)
        else:
            coef = np.empty(0)
        intercept = self.ybar[label] - self.mu[S] @ coef
        ssr = self.syy[label] - 2 * coef @ b + coef @ GS @ coef
        score = _r2(ssr, self.syy[label], self.flat[label])
        local_pred = intercept + self.z0[S] @ coef
        return coef, intercept, score, local_pred


def _r2(ssr, sst, floor=0.0):
    """Weighted R²; r2_score's convention (1 if exact, else 0) for a flat target."""
    ssr = max(float(ssr), 0.0)
    if sst <= floor:
        return 1.0 if ssr <= max(floor, 1e-300) * 1e6 else 0.0
    return float(1.0 - ssr / sst)


def _forward_selection(stats, label, k):
    """Greedy weighted least squares, best R² gain first (lime's order).

    The gain of adding column j to the set S is ``c_j² / d_j`` with the
    partial covariance ``c_j = b_j - G_jS G_SS⁻¹ b_S`` and partial variance
    ``d_j = G_jj - G_jS G_SS⁻¹ G_Sj``: all candidates are scored at once.
    """
    G, b = stats.G, stats.b[:, label]
    d = G.shape[0]
    diag = np.diag(G)
    tol = 1e-10 * max(diag.max(initial=0.0), 1e-300)
    chosen = []
    for _ in range(min(k, d)):
        if chosen:
            # Least squares, not solve: with a narrow kernel the weights sit
            # on a few samples and the chosen block of G can be singular.
            H = np.linalg.lstsq(G[np.ix_(chosen, chosen)], G[chosen], rcond=None)[0]
            c = b - H.T @ b[chosen]
            dv = diag - np.einsum("ij,ij->j", G[chosen], H)
        else:
            c, dv = b.copy(), diag.copy()
        gain = np.where(dv > tol, c * c / np.where(dv > tol, dv, 1.0), 0.0)
        gain[chosen] = -np.inf
        chosen.append(int(np.argmax(gain)))
    return np.asarray(chosen, dtype=np.intp)


def _highest_weights(stats, label, k):
    """Top |coef_j · z0_j| of a Ridge(alpha=0.01) on all columns."""
    d = stats.G.shape[0]
    coef = np.linalg.solve(stats.G + 0.01 * np.eye(d), stats.b[:, label])
    return np.argsort(-np.abs(coef * stats.z0), kind="stable")[:k]


def _lasso_path_selection(stats, label, k):
    """The last knot of the weighted lasso path with at most k non-zeros."""
    b = stats.b[:, label]
    if not np.any(b):
        return np.empty(0, dtype=np.intp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, _, coefs = lars_path_gram(
            b, stats.G.copy(), n_samples=stats.n, method="lasso"
        )
    nonzero = np.flatnonzero(coefs[:, 0])
    for i in range(coefs.shape[1] - 1, 0, -1):
        nonzero = np.flatnonzero(coefs[:, i])
        if nonzero.size <= k:
            break
    return nonzero


def _select(stats, label, k, method):
    d = stats.d
    if method == "none":
        return np.arange(d)
    if method == "auto":
        method = "forward_selection" if k <= 6 else "highest_weights"
    if method == "forward_selection":
        return _forward_selection(stats, label, k)
    if method == "highest_weights":
        return _highest_weights(stats, label, k)
    return _lasso_path_selection(stats, label, k)


def _fit_surrogate(stats, Z, w, Y, label, S, model_regressor):
    """Ridge(alpha=1) with sample weights, or a clone of the user's regressor."""
    if model_regressor is None:
        return stats.ridge(S, label, 1.0)
    reg = clone(model_regressor)
    y = Y[:, label]
    reg.fit(Z[:, S], y, sample_weight=w)
    coef = np.ravel(reg.coef_).astype(float)
    pred = reg.predict(Z[:, S])
    ybar = stats.ybar[label]
    ssr = float(w @ (y - pred) ** 2)
    score = _r2(ssr, float(w @ (y - ybar) ** 2), stats.flat[label])
    intercept = float(np.ravel(reg.intercept_)[0])
    return coef, intercept, score, float(reg.predict(Z[:1, S])[0])


def _weighted_sums(Z, w, Y, keys):
    """``w' Z``, ``Z' W Y`` and ``Z' W Z[:, keys]`` in one pass over ``Z``
    (a product with their stacked right-hand sides): the data is read once
    instead of once per sum."""
    rhs = np.empty((Z.shape[0], 1 + Y.shape[1] + len(keys)))
    rhs[:, 0] = w
    np.multiply(Y, w[:, None], out=rhs[:, 1 : 1 + Y.shape[1]])
    if keys:
        np.multiply(Z[:, keys], w[:, None], out=rhs[:, 1 + Y.shape[1] :])
    sums = t_prod(Z, rhs)
    return sums[:, 0], sums[:, 1 : 1 + Y.shape[1]], sums[:, 1 + Y.shape[1] :]


def _distances(Z, z0):
    """Euclidean distances of the rows of Z to z0 (one matrix-vector product)."""
    d2 = np.einsum("ij,ij->i", Z, Z)
    d2 -= 2.0 * (Z @ z0)
    d2 += z0 @ z0
    np.maximum(d2, 0.0, out=d2)
    return np.sqrt(d2)


def lime_kernel(dist, kernel, width):
    """Kernel weights of distances: lime's ``sqrt(exp(-d² / w²))``, or the
    user's ``kernel(dist, width)``."""
    if kernel is not None:
        return np.asarray(kernel(dist, width), dtype=np.float64)
    return np.sqrt(np.exp(-(dist**2) / width**2))


def row_weights(Z, kernel, width):
    """Kernel weights of a neighbourhood whose point 0 is the row itself."""
    dist = _distances(Z, Z[0])
    dist[0] = 0.0  # exact for the row itself despite the expansion's rounding
    return lime_kernel(dist, kernel, width)


def holdout_weights(dist, kernel, width):
    """Kernel weights of fresh perturbations, relative to the largest.

    A weighted R² does not change when all weights are scaled, so lime's
    kernel is evaluated relative to the nearest point: with a narrow
    kernel the weights no longer all underflow to 0 and the score stays
    defined (and low), instead of undefined.
    """
    if kernel is not None:
        return lime_kernel(dist, kernel, width)
    d2 = dist**2 - np.min(dist) ** 2
    return np.exp(-d2 / (2.0 * width**2))


def lime_fit(Z, Y, labels, w, num_features, method, model_regressor):
    """Selection and surrogate of every explained label of one row."""
    stats = _LocalStats(Z, w, Y[:, labels])
    fits = []
    for j in range(labels.size):
        S = _select(stats, j, num_features, method)
        fits.append(
            (S, _fit_surrogate(stats, Z, w, Y[:, labels], j, S, model_regressor))
        )
    return fits


def holdout_score(Z, y, w, intercept, coef):
    """Kernel-weighted R² of a surrogate on fresh perturbations (NaN when no
    perturbation carries weight: fidelity is then undefined)."""
    if not w.sum() > 0:
        return np.nan
    pred = intercept + Z @ coef
    ybar = w @ y / w.sum()
    floor = (1e-13 * abs(ybar)) ** 2 * w.sum()
    return _r2(w @ (y - pred) ** 2, w @ (y - ybar) ** 2, floor)
