"""LIME for tabular data: one vectorised engine, shared with S-LIME.

The engine follows the semantics of the ``lime`` package (0.2) so that users
can switch: the same sampling laws, interpretable representation, kernel,
surrogate and feature-selection modes. What differs is how it is computed:

* the neighbourhood of a row is drawn in a handful of array operations (no
  Python loop over samples; the only loops run over histogram bins);
* one weighted Gram matrix per row serves every selection mode, the Ridge
  surrogate and every explained label (multi-right-hand-side solves);
* rows are explained in batches: the perturbations of many rows go to the
  model in one call, and chunks of rows run in parallel with per-row seeds.
"""

# SPDX-License-Identifier: BSD-3-Clause

import numbers
import warnings
import zlib

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import qmc
from sklearn.base import (
    BaseEstimator,
    OneToOneFeatureMixin,
    TransformerMixin,
    _fit_context,
    clone,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import lars_path_gram
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from sklearn_plm_explain import _progress
from sklearn_plm_explain._blackbox import (
    BlackBox,
    ModelResponseError,
    map_row_chunks,
    resolve_estimator,
    row_seed,
)
from sklearn_plm_explain._checkpoint import explain_in_chunks
from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain._lime_output import (
    Presentation,
    effective_samples,
    min_effective_samples,
)
from sklearn_plm_explain._validation import (
    class_indices,
    is_numeric_dtype,
    unfitted_on_error,
)

__all__ = ["LimeTabularExplainer"]

# Query points sent to the model per group of rows when ``batch_size`` is None.
_DEFAULT_POINTS_PER_GROUP = 2**15
# Values drawn per block (512 rows of 64 columns): the temporaries of a block
# stay in the CPU cache. Wide data draw fewer rows per block (at d = 784,
# blocks of 512 rows spend two thirds of the sampling time in cache misses).
_SAMPLE_BLOCK_VALUES = 2**15
_SAMPLE_BLOCK = 512
# lime adds this to every bin's standard deviation; kept for identical sampling.
_BIN_STD_EPS = 1e-11
_DISCRETIZER_PERCENTILES = {
    "quartile": [25, 50, 75],
    "decile": [10, 20, 30, 40, 50, 60, 70, 80, 90],
}


# -----------------------------------------------------------------------------
# The fitted sampling space
# -----------------------------------------------------------------------------
class _TabularSpace:
    """Training statistics and the sampler of LIME neighbourhoods.

    Columns fall in two groups. *Continuous* columns are perturbed with
    ``N(0, 1) * std + centre`` and represented by their standardised value.
    *Coded* columns (categorical columns, and every numeric column when
    discretising) draw a code (category or bin) from the training frequencies
    and are represented by the indicator "same code as the explained row".
    A discretised column's query value is drawn from a normal truncated to the
    bin, with the bin's training mean and standard deviation (lime's law).

    Internally the columns are kept in the order continuous, categorical,
    discretised, so that every group is a contiguous block (all-numeric data
    keep their order); ``perm`` maps internal positions to the original
    columns.
    """

    def __init__(self, X_num, X_cat, num_cols, cat_cols, y, params):
        self.d = len(num_cols) + len(cat_cols)
        self.num_cols = num_cols = np.asarray(num_cols, dtype=np.intp)
        self.cat_cols = np.asarray(cat_cols, dtype=np.intp)
        self.around = params["sample_around_instance"]
        n_num = num_cols.size
        counts_list, tables = self._fit_categories(X_cat), []
        if params["discretize_continuous"]:
            self.cont_src = np.empty(0, np.intp)
            bins = [_fit_bins(X_num[:, j], y, params) for j in range(n_num)]
            self.disc_src = np.arange(n_num)
            # Whether any bin needs a normal quantile (else values are fixed).
            self.n_rand = int(any(np.any(b["live"]) for b in bins)) * n_num
            self.edges = [b["edges"] for b in bins]
            counts_list += [b["counts"] for b in bins]
            tables = bins
        else:
            self.cont_src = np.arange(n_num)
            self.disc_src = np.empty(0, np.intp)
            self.n_rand, self.edges = 0, []
        self.n_cont, self.n_cat = self.cont_src.size, self.cat_cols.size
        self.perm = np.concatenate(
            [num_cols[self.cont_src], self.cat_cols, num_cols[self.disc_src]]
        ).astype(np.intp)
        self._fit_continuous(X_num[:, self.cont_src])
        self._fit_code_tables(counts_list, tables)

    # -- fit ----------------------------------------------------------------------
    def _fit_continuous(self, X_cont):
        mean = X_cont.mean(axis=0)
        std = X_cont.std(axis=0)
        # A constant column keeps scale 1, as lime's StandardScaler does.
        std[std <= 1e-12 * np.maximum(np.abs(mean), 1.0)] = 1.0
        self.cont_mean, self.cont_scale = mean, std

    def _fit_categories(self, X_cat):
        self.categories, self.cat_lookup, counts_list = [], [], []
        for j in range(X_cat.shape[1]):
            try:
                values, counts = np.unique(X_cat[:, j], return_counts=True)
            except TypeError:
                raise ValueError(
                    f"Categorical column {int(self.cat_cols[j])} mixes values of "
                    "types that cannot be compared (e.g. strings and numbers)."
                ) from None
            counts_list.append(counts)
            self.categories.append(values)
            self.cat_lookup.append({v: i for i, v in enumerate(values.tolist())})
        # Codes held in an object array (numbers next to strings) count as
        # numbers when every value is one.
        self.numeric_categories = all(
            np.issubdtype(np.asarray(c.tolist()).dtype, np.number)
            for c in self.categories
        )
        return counts_list

    def _fit_code_tables(self, counts_list, bin_tables):
        """Breakpoints and sampling tables of all coded columns, flattened.

        A coded column ``c`` owns the flat indices ``c * width + code``. The
        flat index of a uniform draw ``u`` is ``c * width`` plus the number of
        the column's cumulative frequencies ``<= u``: zero-frequency codes
        have zero-width intervals and are never drawn.

        For a discretised column the query value is
        ``mu + s * ndtri(A + u * B)`` with the very uniform ``u`` that chose
        the bin: rescaled to the bin's probability interval it is again
        uniform and independent of the bin, so one draw gives both. Bins lying
        above the mean are sampled in the mirrored tail, where the normal CDF
        keeps its precision; a bin holding a single value returns it.
        """
        n_code = len(counts_list)
        width = max([len(c) for c in counts_list], default=1)
        self.offsets = np.arange(n_code, dtype=np.intp) * width
        self.cum = np.full((max(width - 1, 0), n_code), 2.0)
        A = np.full((n_code, width), 0.5)
        B = np.zeros((n_code, width))
        mu = np.zeros((n_code, width))
        S = np.zeros((n_code, width))
        for i, counts in enumerate(counts_list):
            k = counts.size
            # Exact integer cumulative counts: the last breakpoint is exactly 1.
            cum = np.cumsum(counts) / counts.sum()
            self.cum[: k - 1, i] = cum[:-1]
            if i < self.n_cat:
                continue
            t = bin_tables[i - self.n_cat]
            prob = counts / counts.sum()
            cum_lo = np.concatenate([[0.0], cum[:-1]])
            Bi = np.where(t["live"], (t["fb"] - t["fa"]) / np.maximum(prob, 1e-300), 0)
            A[i, :k] = np.where(t["live"], t["fa"] - cum_lo * Bi, 0.5)
            B[i, :k] = Bi
            mu[i, :k] = np.where(t["live"], t["mean"], t["lo"])
            S[i, :k] = np.where(t["live"], t["sign"] * t["std"], 0.0)
        self.tn_A, self.tn_B = A.ravel(), B.ravel()
        self.tn_mu, self.tn_S = mu.ravel(), S.ravel()
        self.tn_live = self.tn_S != 0
        # Training frequency of every code, for labels and contributions.
        self.code_freq = np.zeros(n_code * width)
        for i, counts in enumerate(counts_list):
            self.code_freq[i * width : i * width + counts.size] = counts / counts.sum()
        # Expected share of discretised draws that need a normal quantile.
        n_cat = self.n_cat
        probs = [c / c.sum() for c in counts_list[n_cat:]]
        live = [np.abs(S[n_cat + i, : p.size]) > 0 for i, p in enumerate(probs)]
        self.live_mass = float(
            np.mean([p[lv].sum() for p, lv in zip(probs, live)]) if probs else 0.0
        )

    # -- explained rows -------------------------------------------------------------
    def encode_rows(self, X_num, X_cat):
        """Internal representation of the explained rows.

        Returns ``(x_cont, x_flat, z0, seed_key)``: continuous values, flat code
        index of each coded column (``-1`` for a category unseen in
        training), the interpretable representation of the row itself, and a
        float matrix identifying the row (for the per-row seeds).
        """
        n = X_num.shape[0]
        x_code = np.empty((n, self.offsets.size), dtype=np.intp)
        seed_key = np.concatenate([X_num, np.zeros((n, self.n_cat))], axis=1)
        for j, lookup in enumerate(self.cat_lookup):
            vals = X_cat[:, j].tolist()
            x_code[:, j] = [lookup.get(v, -1) for v in vals]
            # Unseen categories still get a seed that depends on the value.
            seed_key[:, X_num.shape[1] + j] = [
                lookup.get(v, -1.0 - (zlib.crc32(repr(v).encode()) % 2**20))
                for v in vals
            ]
        for i, qts in enumerate(self.edges):
            x_code[:, self.n_cat + i] = np.searchsorted(qts, X_num[:, self.disc_src[i]])
        x_flat = np.where(x_code >= 0, x_code + self.offsets, -1)
        x_cont = X_num[:, self.cont_src]
        z0 = np.ones((n, self.d))
        z0[:, : self.n_cont] = (x_cont - self.cont_mean) / self.cont_scale
        return x_cont, x_flat, z0, seed_key

    def sample(self, rng, x_cont, x_flat, Z, Q):
        """Fill ``Z`` and ``Q`` (m, d) with perturbations of one row.

        ``Z`` receives the interpretable, standardised representation (what
        the surrogate is fitted on), ``Q`` the query values (numeric values;
        category indices for categorical columns), both in the internal
        column order. Rows are drawn in blocks whose temporaries stay in
        cache; the stream of draws does not depend on ``m``'s split.
        """
        block = min(_SAMPLE_BLOCK, max(16, _SAMPLE_BLOCK_VALUES // max(self.d, 1)))
        for start in range(0, Z.shape[0], block):
            stop = start + block
            self._sample_block(rng, x_cont, x_flat, Z[start:stop], Q[start:stop])

    def _sample_block(self, rng, x_cont, x_flat, Z, Q):
        m = Z.shape[0]
        c0 = self.n_cont
        U = None
        if isinstance(rng, _SobolStream):
            U = rng.uniforms(m, c0 + self.offsets.size)
        if c0:
            vals = rng.standard_normal((m, c0)) if U is None else ndtri(U[:, :c0])
            Z[:, :c0] = vals
            if self.around:
                Z[:, :c0] += (x_cont - self.cont_mean) / self.cont_scale
            q = Q[:, :c0]
            np.multiply(vals, self.cont_scale, out=q)
            q += x_cont if self.around else self.cont_mean
        if self.offsets.size:
            u = rng.random((m, self.offsets.size)) if U is None else U[:, c0:]
            flat = self.offsets + (u >= self.cum[0]) if len(self.cum) else None
            if flat is None:
                flat = np.broadcast_to(self.offsets, u.shape).copy()
            for cut in self.cum[1:]:
                flat += u >= cut
            np.equal(flat, x_flat, out=Z[:, c0:])
            c1 = c0 + self.n_cat
            if self.n_cat:
                Q[:, c0:c1] = flat[:, : self.n_cat] - self.offsets[: self.n_cat]
            self._bin_values(flat[:, self.n_cat :], u[:, self.n_cat :], Q[:, c1:])

    def _bin_values(self, flat, u, out):
        # Contiguous indices keep the table look-ups (np.take) cheap; the
        # buffers are reused in place because allocation dominates here.
        flat = np.ascontiguousarray(flat)
        vals = out if out.flags.c_contiguous else np.empty(out.shape)
        np.take(self.tn_mu, flat, out=vals)
        if not self.n_rand:
            pass
        elif self.live_mass > 0.85:
            p = np.take(self.tn_A, flat)
            tmp = np.take(self.tn_B, flat)
            tmp *= u
            p += tmp
            np.maximum(p, 1e-300, out=p)
            ndtri(p, out=p)
            np.take(self.tn_S, flat, out=tmp)
            p *= tmp
            vals += p
        else:
            # Many draws fall in single-valued bins: skip their quantiles.
            idx = np.flatnonzero(np.take(self.tn_live, flat))
            fi = flat.ravel().take(idx)
            p = self.tn_A.take(fi)
            p += np.ascontiguousarray(u).ravel().take(idx) * self.tn_B.take(fi)
            np.maximum(p, 1e-300, out=p)
            ndtri(p, out=p)
            p *= self.tn_S.take(fi)
            vals.ravel()[idx] += p
        if vals is not out:
            out[...] = vals

    def decode(self, Q):
        """Query values in the original column order and representation."""
        if not self.n_cat:
            if np.array_equal(self.perm, np.arange(self.d)):
                return Q
            out = np.empty_like(Q)
            out[:, self.perm] = Q
            return out
        out = np.empty(Q.shape, dtype=np.float64 if self.numeric_categories else object)
        c0, c1 = self.n_cont, self.n_cont + self.n_cat
        out[:, self.perm[:c0]] = Q[:, :c0]
        out[:, self.perm[c1:]] = Q[:, c1:]
        for j, cats in enumerate(self.categories):
            codes = np.clip(Q[:, c0 + j].astype(np.intp), 0, None)
            out[:, self.cat_cols[j]] = cats[codes]
        return out


def _fit_bins(col, y, params):
    """Edges, frequencies and truncated-normal parameters of one column's bins."""
    qts = _bin_edges(col, y, params)
    ids = np.searchsorted(qts, col)
    nb = qts.size + 1
    counts = np.bincount(ids, minlength=nb)
    safe = np.maximum(counts, 1)
    mean = np.bincount(ids, weights=col, minlength=nb) / safe
    sq = np.bincount(ids, weights=col * col, minlength=nb) / safe
    std = np.sqrt(np.maximum(sq - mean**2, 0.0)) + _BIN_STD_EPS
    lo = np.concatenate([[col.min()], qts])
    hi = np.concatenate([qts, [col.max()]])
    a, b = (lo - mean) / std, (hi - mean) / std
    flip = a > 0
    fa = ndtr(np.where(flip, -b, a))
    fb = ndtr(np.where(flip, -a, b))
    live = (hi > lo) & (counts > 0) & (fb > fa)
    return {
        "edges": qts,
        "counts": counts,
        "mean": mean,
        "std": std,
        "lo": lo,
        "fa": fa,
        "fb": fb,
        "sign": np.where(flip, -1.0, 1.0),
        "live": live,
    }


def _bin_edges(col, y, params):
    kind = params["discretizer"]
    if kind in _DISCRETIZER_PERCENTILES:
        return np.unique(np.percentile(col, _DISCRETIZER_PERCENTILES[kind]))
    # Entropy: the thresholds of a depth-3 tree on this single feature.
    if params["mode"] == "classification":
        tree = DecisionTreeClassifier(criterion="entropy", max_depth=3, random_state=0)
    else:
        tree = DecisionTreeRegressor(max_depth=3, random_state=0)
    tree.fit(col.reshape(-1, 1), y)
    qts = tree.tree_.threshold[tree.tree_.children_left > -1]
    if qts.size == 0:
        qts = np.array([np.median(col)])
    return np.unique(qts)


# -----------------------------------------------------------------------------
# The local fit: weighted sufficient statistics, selection, surrogate
# -----------------------------------------------------------------------------
class _LocalStats:
    """Weighted, weighted-centred sufficient statistics of one neighbourhood.

    ``G = Zc' W Zc`` and ``b = Zc' W yc`` (``c``: centred at the weighted
    means). Every selection mode and the Ridge surrogate are solved from
    these, which is what sklearn's ``Ridge(sample_weight=w)`` and lime's
    lasso path compute from the data.
    """

    def __init__(self, Z, w, Y):
        self.n, self.d = Z.shape
        self.wsum = w.sum()
        self.mu = w @ Z / self.wsum
        self.ybar = w @ Y / self.wsum
        self._Z, self._w, self._G = Z, w, None
        self.b = Z.T @ (Y * w[:, None]) - self.wsum * np.outer(self.mu, self.ybar)
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
        return self._Z.T @ (sw * v) - self.mu * (sw @ v)

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


# -----------------------------------------------------------------------------
# Calling the model in the original representation
# -----------------------------------------------------------------------------
class _ModelCaller:
    """Calls the model on query points, as a DataFrame when it expects one."""

    def __init__(self, estimator, method, columns=None, dtypes=None):
        self.estimator = estimator
        self.method = method
        self.columns = columns
        self.dtypes = dtypes or {}

    def __call__(self, A):
        if self.columns is not None:
            A = self._frame(A)
        if self.method is None:
            return self.estimator(A)
        return getattr(self.estimator, self.method)(A)

    def _frame(self, A):
        import pandas as pd

        if A.dtype != object and not self.dtypes:
            return pd.DataFrame(A, columns=self.columns)
        data = {}
        for j, name in enumerate(self.columns):
            col = A[:, j]
            if name in self.dtypes:
                data[name] = pd.Series(col, dtype=object).astype(self.dtypes[name])
            else:
                data[name] = col.astype(np.float64)
        return pd.DataFrame(data, columns=self.columns)


# -----------------------------------------------------------------------------
# The estimator
# -----------------------------------------------------------------------------
class _BaseLime(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Shared fit / validation / batching of the LIME explainers."""

    _parameter_constraints: dict = {
        "estimator": [
            HasMethods(["predict_proba"]),
            HasMethods(["predict"]),
            callable,
            None,
        ],
        "mode": [StrOptions({"classification", "regression"})],
        "feature_names": ["array-like", None],
        "categorical_features": ["array-like", None],
        "discretize_continuous": ["boolean"],
        "discretizer": [StrOptions({"quartile", "decile", "entropy"})],
        "sample_around_instance": ["boolean"],
        "kernel_width": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "kernel": [callable, None],
        "num_features": [Interval(numbers.Integral, 1, None, closed="left")],
        "num_samples": [Interval(numbers.Integral, 2, None, closed="left")],
        "model_regressor": [HasMethods(["fit", "predict"]), None],
        "sampling": [StrOptions({"random", "qmc"})],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "n_jobs": [numbers.Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    _method_name = "lime"

    # -- fit ------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Learn the training statistics used to sample neighbourhoods.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features)
            Training data. Numeric columns may be mixed with categorical
            columns holding integer codes or strings.
        y : array-like of shape (n_samples,), default=None
            Needed only for ``discretizer="entropy"``, or to fit a clone of an
            unfitted ``estimator``.

        Returns
        -------
        self : object
            The fitted explainer.
        """
        self._check_params()
        cat_cols = self._categorical_columns(X)
        with unfitted_on_error(self):
            self._fit(X, y, cat_cols)
        return self

    def _fit(self, X, y, cat_cols):
        Xv, X_num, X_cat = self._validate_X(X, cat_cols, reset=True)
        if X_num.shape[0] < 2:
            raise ValueError(
                f"fit needs at least 2 training rows; got n_samples = {X_num.shape[0]}."
            )
        if y is not None:
            y = np.asarray(y)
            if y.shape[0] != Xv.shape[0]:
                raise ValueError(
                    f"y has {y.shape[0]} rows but X has {Xv.shape[0]} rows."
                )
        if self.discretize_continuous and self.discretizer == "entropy" and y is None:
            raise ValueError("discretizer='entropy' needs the training labels y.")
        if self.feature_names is not None and len(self.feature_names) != Xv.shape[1]:
            raise ValueError(
                f"feature_names has {len(self.feature_names)} names but X has "
                f"{Xv.shape[1]} columns."
            )
        self.categorical_features_ = np.asarray(cat_cols, dtype=np.intp)
        num_cols = np.setdiff1d(np.arange(Xv.shape[1]), cat_cols)
        self.space_ = _TabularSpace(
            X_num, X_cat, num_cols, cat_cols, y, self.get_params(deep=False)
        )
        d = Xv.shape[1]
        self.kernel_width_ = (
            0.75 * np.sqrt(d) if self.kernel_width is None else float(self.kernel_width)
        )
        self.estimator_ = resolve_estimator(self.estimator, X, y, type(self).__name__)
        self._setup_caller(X, cat_cols)
        self._setup_outputs(Xv)

    def _check_params(self):
        pass

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Columns of strings or integer codes are sampled as categories.
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags

    def _categorical_columns(self, X):
        """Column indices treated as categorical (explicit or detected)."""
        cf = self.categorical_features
        columns = getattr(X, "columns", None)
        shape = X.shape if columns is not None else np.shape(np.asarray(X))
        n_cols = shape[1] if len(shape) == 2 else None
        if cf is None:
            return _detect_categorical(X)
        cf = np.asarray(cf)
        if cf.dtype == bool:
            if n_cols is not None and cf.size != n_cols:
                raise ValueError(
                    f"categorical_features is a mask of length {cf.size}; "
                    f"X has {n_cols} columns."
                )
            return np.flatnonzero(cf)
        if cf.dtype.kind in "OUS":
            if columns is None:
                raise ValueError(
                    "categorical_features given by name needs X as a DataFrame."
                )
            names = [str(c) for c in columns]
            missing = [c for c in cf.tolist() if c not in names]
            if missing:
                raise ValueError(f"categorical_features not in X's columns: {missing}")
            return np.array(sorted(names.index(c) for c in cf.tolist()), dtype=np.intp)
        cols = np.unique(cf.astype(np.intp))
        if (
            n_cols is not None
            and cols.size
            and (cols.min() < 0 or cols.max() >= n_cols)
        ):
            raise ValueError(
                f"categorical_features {cols.tolist()} out of range for {n_cols} columns."
            )
        return cols

    def _validate_X(self, X, cat_cols=None, reset=False):
        """Validated ``(X_orig, X_num, X_cat)``; raises ``ValueError`` on bad rows.

        Numeric columns must be finite numbers; categorical columns must not
        be missing. Nothing here calls the model.
        """
        if cat_cols is None:
            cat_cols = self.categorical_features_
        if len(cat_cols) == 0:
            Xv = validate_data(self, X, reset=reset, dtype=np.float64)
            return Xv, Xv, np.empty((Xv.shape[0], 0), dtype=object)
        Xv = validate_data(self, X, reset=reset, dtype=object, ensure_all_finite=False)
        num = np.setdiff1d(np.arange(Xv.shape[1]), cat_cols)
        X_num = _numeric_columns(Xv, num, self._column_names(Xv.shape[1]))
        X_cat = Xv[:, cat_cols]
        missing = np.array(
            [
                [v is None or (isinstance(v, float) and v != v) for v in row]
                for row in X_cat
            ]
        ).reshape(X_cat.shape)
        if missing.any():
            r, c = np.argwhere(missing)[0]
            raise ValueError(
                f"Input X has a missing value in categorical column "
                f"{int(cat_cols[c])} (row {int(r)})."
            )
        return Xv, X_num, X_cat

    def _column_names(self, d):
        names = getattr(self, "feature_names_in_", None)
        return (
            [str(n) for n in names]
            if names is not None
            else [f"x{j}" for j in range(d)]
        )

    def _setup_caller(self, X, cat_cols):
        est = self.estimator_
        is_model = hasattr(est, "fit")
        method = None
        if is_model:
            method = "predict_proba" if self.mode == "classification" else "predict"
            if not hasattr(est, method):
                raise TypeError(f"{type(est).__name__} has no method {method!r}.")
        columns = None
        names = getattr(est, "feature_names_in_", None)
        if names is not None:
            columns = list(names)
        elif not is_model and hasattr(X, "columns"):
            columns = list(X.columns)
        dtypes = {}
        if columns is not None and hasattr(X, "dtypes"):
            for j in cat_cols:
                dtypes[columns[j]] = X.dtypes.iloc[j]
        elif columns is not None:
            dtypes = {columns[j]: object for j in cat_cols}
        self._caller = _ModelCaller(est, method, columns, dtypes)

    def _setup_outputs(self, Xv):
        if self.mode == "regression":
            self.classes_ = None
            self.n_outputs_ = 1
            return
        classes = getattr(self.estimator_, "classes_", None)
        if classes is None:
            # A bare callable: one probe of a training row reveals the width,
            # sent as the explained rows will be (numbers when all are).
            row = Xv[:1]
            if row.dtype == object and self.space_.numeric_categories:
                row = row.astype(np.float64)
            probe = np.asarray(self._caller(row))
            if probe.ndim != 2:
                raise ValueError(
                    "In classification mode the callable must return an array of "
                    f"shape (n, n_classes); got shape {probe.shape}."
                )
            classes = np.arange(probe.shape[1])
        self.classes_ = np.asarray(classes)
        self.n_outputs_ = self.classes_.size

    # -- public API -------------------------------------------------------------------
    def explain(self, X, target=None, labels=None, *, checkpoint=None):
        """Explain the model's response at each row of X.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features)
            Rows to explain, in the representation used in ``fit``.
        target : class label, array-like of shape (n_samples,), or None
            Class explained in each row; ``None`` explains the class the model
            predicts at the row (regression: the prediction).
        labels : array-like of class labels, default=None
            Further classes explained for every row (classification only).
            When given, the result carries ``labels`` (indices into
            ``classes``) and per-label fields ``label_values``,
            ``label_intercept``, ``label_score``, ``label_local_pred``.
        checkpoint : str, path-like or Checkpoint, default=None
            Explain the rows a chunk at a time and keep each finished chunk
            there; a later call with the same arguments reuses the finished
            rows without querying the model again (see :class:`Checkpoint`).

        Returns
        -------
        explanation : Explanation
            Per-row fields: ``values``, ``target``, ``selected``,
            ``intercept``, ``score``, ``local_pred``, ``n_samples``,
            ``n_queries``, ``n_rounds``, ``converged``, ``status``.

        Raises
        ------
        ModelResponseError
            If the model returns invalid responses; names the rows and keeps
            the finished rows in its ``partial`` attribute (rows not finished
            have the status ``"not_run"``).
        CheckpointError
            For a checkpoint that is corrupted or was written by another run.
        """
        check_is_fitted(self)
        return self._explain(X, target, labels, holdout=False, checkpoint=checkpoint)

    def transform(self, X):
        """Surrogate weights of the predicted class of each row.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features)
            Rows to explain.

        Returns
        -------
        values : ndarray of shape (n_samples, n_features)
            ``explain(X).values``: the surrogate weights, 0 for features not
            selected.
        """
        check_is_fitted(self)
        return self._explain(X, None, None, holdout=False).values

    def score(self, X, y=None):
        """Mean held-out local fidelity of the explanations of X.

        For each row, the surrogate is evaluated on ``num_samples`` *fresh*
        perturbations that were not used to fit it: the score is the
        kernel-weighted R² between the surrogate's and the model's responses
        for the explained class, averaged over rows (higher is better, at most
        1; it can be negative for a surrogate worse than a constant). A
        kernel too narrow for the neighbourhood gives a very negative score:
        its surrogate is fitted on the row alone and fails on fresh points.
        (A custom ``kernel`` that gives no fresh perturbation any weight
        leaves the score undefined: NaN.)

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features)
            Rows to explain.
        y : None
            Ignored.

        Returns
        -------
        score : float
        """
        check_is_fitted(self)
        return float(np.mean(self._explain(X, None, None, holdout=True).holdout_score))

    # -- orchestration ----------------------------------------------------------------
    def _explain(self, X, target, labels, holdout, checkpoint=None):
        _, X_num, X_cat = self._validate_X(X)
        n = X_num.shape[0]
        targets = self._resolve_targets(target, n)
        extra = self._resolve_labels(labels)
        x_num, x_code, z0, key = self.space_.encode_rows(X_num, X_cat)
        X_orig = self._original_rows(X, X_num, X_cat)
        rows_data = (x_num, x_code, z0, key, X_orig)
        desc = "held-out scoring" if holdout else type(self).__name__
        with _progress.progress_bar(n, self.verbose, desc=desc) as bar:

            def run(start, stop, seed):
                return self._explain_range(
                    rows_data,
                    (targets, extra, labels is not None),
                    seed,
                    holdout,
                    (start, stop),
                    bar,
                )

            explanation = explain_in_chunks(
                self,
                checkpoint,
                run,
                n,
                rows=(X_num, X_cat),
                target=(targets, extra),
                not_run=lambda a, b: self._not_run_explanation(
                    rows_data, extra, labels is not None, a, b
                ),
            )
            if bar.n < n:
                # Rows a checkpoint already held were not explained again.
                bar.update(n - bar.n)
        self._warn_statuses(explanation)
        return explanation

    def _explain_range(self, rows_data, target_spec, seed, holdout, bounds, bar):
        """The Explanation of rows ``start:stop`` of the validated batch.

        With a progress bar the rows go in steps of a few model calls per
        worker, each step counted on the bar as it returns.
        """
        targets, extra, keep_labels = target_spec
        start, stop = bounds
        parts = []
        for a, b in self._progress_steps(start, stop):
            try:
                parts += map_row_chunks(
                    self._explain_slice,
                    b - a,
                    self.n_jobs,
                    rows_data,
                    targets,
                    extra,
                    seed,
                    holdout,
                    start=a,
                )
            except ModelResponseError as err:
                err.partial = None
                done = getattr(err, "_finished_rows", None)
                if done is not None and not holdout:
                    err.partial = self._partial(
                        parts, done, extra, rows_data, keep_labels, bounds
                    )
                raise
            bar.update(b - a)
        rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        return self._as_explanation(rows, keep_labels)

    def _progress_steps(self, start, stop):
        """Row ranges explained one after the other (one without a bar)."""
        if not self.verbose:
            return [(start, stop)]
        from joblib import effective_n_jobs

        step = self._group_size(self.num_samples) * max(
            effective_n_jobs(self.n_jobs), 1
        )
        return [(a, min(a + step, stop)) for a in range(start, stop, step)] or [
            (start, stop)
        ]

    def _partial(self, parts, done, extra, rows_data, keep_labels, bounds):
        """Rows finished before a model failure, the others not run."""
        start, stop = bounds
        template = self._not_run_result(extra)
        rows = [template] * (stop - start)
        offset = 0
        for part in parts:
            for i in range(len(part["status"])):
                rows[offset + i] = {k: part[k][i] for k in template}
            offset += len(part["status"])
        # Rows of the failing slice that finished before the failure.
        first, results = done
        for i, res in enumerate(results):
            if res is not None:
                rows[first - start + i] = res
        return self._present_rows(rows, rows_data, keep_labels, start, stop)

    def _not_run_explanation(self, rows_data, extra, keep_labels, start, stop):
        """Rows ``start:stop`` marked not run (the model failed first)."""
        # An empty range still needs one row to carry the fields' shapes (a
        # template for joining partial results); it is cut off again below.
        rows = [self._not_run_result(extra) for _ in range(max(stop - start, 1))]
        full = self._present_rows(
            rows, rows_data, keep_labels, start, max(stop, start + 1)
        )
        return full[: stop - start]

    def _present_rows(self, rows, rows_data, keep_labels, start, stop):
        """An Explanation of per-row results of rows ``start:stop``, with
        what readers see (labels with conditions, contributions) added."""
        out = _stack_rows(rows)
        _, x_code, z0, _, X_orig = rows_data
        index = np.arange(start, stop) % max(x_code.shape[0], 1)
        out.update(self._presented(out, index, x_code, z0, X_orig))
        return self._as_explanation(out, keep_labels)

    def _as_explanation(self, rows, keep_labels):
        """An Explanation of per-row results (a list of them, or stacked)."""
        if isinstance(rows, list):
            rows = _stack_rows(rows)
        if not keep_labels:
            rows = {
                k: v
                for k, v in rows.items()
                if not (k.startswith("label_") or k == "labels")
            }
        return Explanation(
            classes=self.classes_,
            feature_names=self._feature_names(),
            method=self._method_name,
            params=self._provenance(),
            **rows,
        )

    def _warn_statuses(self, explanation):
        """One ConvergenceWarning per kind of row whose result is not sound."""
        few = explanation.status == "few_effective_samples"
        if few.any():
            ess = explanation.effective_samples[few]
            warnings.warn(
                f"{int(few.sum())} of {few.size} rows have fewer effective samples "
                f"(Kish size of the kernel weights: median {np.median(ess):.3g}) "
                f"than the {self._min_effective_samples()} their surrogate needs "
                f"(status 'few_effective_samples'): their weights and score are not "
                f"determined by the data. kernel_width={self.kernel_width_:.3g} "
                "is usually too narrow for the neighbourhood; widen it.",
                ConvergenceWarning,
                stacklevel=4,
            )

    def _not_run_result(self, extra):
        """The per-row result of a row not explained (the model failed first)."""
        d, k = self.space_.d, self._selected_width()
        labels = np.concatenate([[0], extra]).astype(np.intp)
        if self.classes_ is None:
            labels = np.array([0], dtype=np.intp)
        L = labels.size
        return {
            "values": np.full(d, np.nan),
            "target": 0,
            "selected": np.full(k, -1, dtype=np.intp),
            "intercept": np.nan,
            "score": np.nan,
            "local_pred": np.nan,
            "n_samples": 0,
            "n_queries": 0,
            "n_rounds": 0,
            "effective_samples": np.nan,
            "converged": False,
            "status": "not_run",
            "labels": labels,
            "label_values": np.full((L, d), np.nan),
            "label_intercept": np.full(L, np.nan),
            "label_score": np.full(L, np.nan),
            "label_local_pred": np.full(L, np.nan),
        }

    def _original_rows(self, X, X_num, X_cat):
        d = self.space_.d
        if not self.space_.cat_cols.size:
            return X_num
        out = np.empty((X_num.shape[0], d), dtype=object)
        out[:, self.space_.num_cols] = X_num
        out[:, self.space_.cat_cols] = X_cat
        return out.astype(np.float64) if self.space_.numeric_categories else out

    def _resolve_targets(self, target, n):
        """Per-row class indices, or None for "the predicted class"."""
        if target is None:
            return None
        if self.classes_ is None:
            raise ValueError("target must be None in regression mode.")
        return class_indices(self.classes_, target, n)

    def _resolve_labels(self, labels):
        if labels is None:
            return np.empty(0, dtype=np.intp)
        if self.classes_ is None:
            raise ValueError("labels must be None in regression mode.")
        return class_indices(self.classes_, labels, what="labels")

    def _feature_names(self):
        if self.feature_names is not None:
            return np.asarray(self.feature_names, dtype=object)
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            names = getattr(self.estimator_, "feature_names_in_", None)
        if names is None:
            names = [f"x{j}" for j in range(self.space_.d)]
        return np.asarray(names, dtype=object)

    def _provenance(self):
        params = self.get_params(deep=False)
        params.pop("estimator", None)
        return params

    def _holdout_weights(self, dist):
        """Kernel weights of fresh perturbations, relative to the largest.

        A weighted R² does not change when all weights are scaled, so lime's
        kernel is evaluated relative to the nearest point: with a narrow
        kernel the weights no longer all underflow to 0 and the score stays
        defined (and low), instead of undefined.
        """
        if self.kernel is not None:
            return self._kernel(dist)
        d2 = dist**2 - np.min(dist) ** 2
        return np.exp(-d2 / (2.0 * self.kernel_width_**2))

    def _kernel(self, dist):
        if self.kernel is not None:
            return np.asarray(self.kernel(dist, self.kernel_width_), dtype=np.float64)
        return np.sqrt(np.exp(-(dist**2) / self.kernel_width_**2))

    def _blackbox(self):
        kind = "proba" if self.mode == "classification" else "regression"
        return BlackBox(
            self._caller,
            None,
            kind,
            self.n_outputs_,
            feature_names=None,
            batch_size=self.batch_size,
        )

    def _group_size(self, points_per_row):
        budget = self.batch_size or _DEFAULT_POINTS_PER_GROUP
        return max(1, int(budget) // max(points_per_row, 1))

    def _explain_slice(self, sl, rows_data, targets, extra, seed, holdout):
        x_num, x_code, z0, key, X_orig = rows_data
        rows = np.arange(sl.start, sl.stop)
        gens = [_row_streams(key[i], seed, self.sampling) for i in rows]
        bb = self._blackbox()
        results = []
        size = self._group_size(self.num_samples)
        try:
            for start in range(0, rows.size, size):
                grp = rows[start : start + size]
                ctx = _Group(
                    grp, x_num, x_code, z0, X_orig, [gens[i - sl.start] for i in grp]
                )
                results.extend(self._explain_group(ctx, bb, targets, extra))
        except ModelResponseError as err:
            # What finished survives: whole groups, and the rows of the failing
            # group that finished before the failure (S-LIME's rounds).
            results.extend(getattr(err, "_group_results", []))
            err._finished_rows = (sl.start, results)
            raise
        out = _stack_rows(results)
        out.update(self._presented(out, rows, x_code, z0, X_orig))
        if holdout:
            ctx = _Group(rows, x_num, x_code, z0, X_orig, [(g[1],) for g in gens])
            out["holdout_score"] = self._holdout(ctx, bb, out)
        return out

    def _presented(self, out, rows, x_code, z0, X_orig):
        """What readers see: labels with their condition, contributions.

        ``contribution`` is each weight times the row's interpretable value
        minus its training mean, ``baseline`` the surrogate at that mean, so
        ``baseline + contribution.sum(1) == local_pred``; ``standardized`` is
        each weight times the training std of its interpretable feature.
        """
        pres = Presentation(self.space_, self._feature_names())
        z, mean, std = pres.reference(x_code[rows], z0[rows])
        values = out["values"]
        contribution = values * (z - mean)
        return {
            "selected_names": pres.selected_names(
                out["selected"], x_code[rows], X_orig[rows]
            ),
            "data": X_orig[rows],
            "contribution": contribution,
            "standardized": values * std,
            "baseline": out["local_pred"] - contribution.sum(axis=1),
        }

    # -- one group of rows: LIME -----------------------------------------------------------
    def _neighbourhoods(self, ctx, m, first, rows=None):
        """Draw ``m`` points per row; with ``first`` the row itself is point 0.

        ``rows`` selects positions in the group (default: all) and ``m`` may
        be one size per selected row. Returns per-row views of ``Z`` and one
        stacked query array ``Q`` (internal column order).
        """
        rows = range(len(ctx.rows)) if rows is None else rows
        sizes = np.broadcast_to(np.asarray(m), (len(rows),))
        ends = np.cumsum(sizes)
        Z = np.empty((int(ends[-1]), self.space_.d))
        Q = np.empty_like(Z)
        Zs = []
        for i, end, size in zip(rows, ends, sizes):
            r, start = ctx.rows[i], end - size
            lo = start + 1 if first else start
            if first:
                Z[start], Q[start] = ctx.z0[r], 0.0
            self.space_.sample(
                ctx.gens[i][0], ctx.x_num[r], ctx.x_code[r], Z[lo:end], Q[lo:end]
            )
            Zs.append(Z[start:end])
        return Zs, Q, sizes

    def _query(self, bb, ctx, Q, sizes, first, row_ids=None):
        """One model call (per batch) for the points of all rows in the group."""
        row_ids = ctx.rows if row_ids is None else row_ids
        A = self.space_.decode(Q)
        if first:
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            if A.dtype == object and ctx.X_orig.dtype != object:
                A[starts] = ctx.X_orig[row_ids]
            else:
                A[starts] = ctx.X_orig[row_ids].astype(A.dtype)
        owners = np.repeat(row_ids, sizes)
        Y = bb.query(A, owners)
        return np.split(Y, np.cumsum(sizes)[:-1])

    def _explained_labels(self, Y0, r, targets, extra):
        if self.classes_ is None:
            return np.array([0], dtype=np.intp)
        t = int(np.argmax(Y0)) if targets is None else int(targets[r])
        return np.concatenate([[t], extra]).astype(np.intp)

    def _explain_group(self, ctx, bb, targets, extra):
        n = self.num_samples
        Zs, Q, sizes = self._neighbourhoods(ctx, n, first=True)
        Ys = self._query(bb, ctx, Q, sizes, first=True)
        out = []
        for i, r in enumerate(ctx.rows):
            labels = self._explained_labels(Ys[i][0], r, targets, extra)
            fits, w = self._lime_fit(Zs[i], Ys[i], labels)
            ess = effective_samples(w)
            ok = ess >= self._min_effective_samples()
            status = "converged" if ok else "few_effective_samples"
            out.append(self._row_result(fits, labels, n, ok, status, 1, ess=ess))
        return out

    def _min_effective_samples(self):
        """Fewest effective samples for the surrogate (see ``effective_samples``)."""
        return min_effective_samples(self._selected_width())

    def _weights(self, Z):
        dist = _distances(Z, Z[0])
        dist[0] = 0.0  # exact for the row itself despite the expansion's rounding
        return self._kernel(dist)

    def _lime_fit(self, Z, Y, labels):
        w = self._weights(Z)
        stats = _LocalStats(Z, w, Y[:, labels])
        fits = []
        for j in range(labels.size):
            S = _select(stats, j, self.num_features, self.feature_selection)
            fits.append(
                (
                    S,
                    _fit_surrogate(
                        stats, Z, w, Y[:, labels], j, S, self.model_regressor
                    ),
                )
            )
        return fits, w

    def _row_result(
        self, fits, labels, n, converged, status, n_rounds, order=None, ess=np.nan
    ):
        """Per-row arrays; ``order`` keeps the selection order (else |weight|)."""
        d = self.space_.d
        k = self._selected_width()
        L = len(fits)
        values = np.zeros((L, d))
        selected = np.full((L, k), -1, dtype=np.intp)
        inter, score, pred = np.zeros(L), np.zeros(L), np.zeros(L)
        perm = self.space_.perm
        for j, (S, (coef, b0, sc, lp)) in enumerate(fits):
            # Internal column positions back to the original columns.
            values[j, perm[S]] = coef
            seq = (
                S if order is not None else S[np.argsort(-np.abs(coef), kind="stable")]
            )
            selected[j, : min(k, seq.size)] = perm[seq[:k]]
            inter[j], score[j], pred[j] = b0, sc, lp
        return {
            "values": values[0],
            "target": labels[0] if self.classes_ is not None else 0,
            "selected": selected[0],
            "intercept": inter[0],
            "score": score[0],
            "local_pred": pred[0],
            "n_samples": n,
            "n_queries": n,
            "n_rounds": n_rounds,
            "effective_samples": ess,
            "converged": converged,
            "status": status,
            "labels": labels,
            "label_values": values,
            "label_intercept": inter,
            "label_score": score,
            "label_local_pred": pred,
        }

    def _selected_width(self):
        d = self.space_.d
        if getattr(self, "feature_selection", "lasso_path") == "none":
            return d
        return min(self.num_features, d)

    def _holdout(self, ctx, bb, out):
        """Kernel-weighted R² of each surrogate on fresh perturbations."""
        Zs, Q, sizes = self._neighbourhoods(ctx, self.num_samples, first=False)
        Ys = self._query(bb, ctx, Q, sizes, first=False)
        perm = self.space_.perm
        scores = np.empty(ctx.rows.size)
        for i, r in enumerate(ctx.rows):
            Z, y = Zs[i], Ys[i][:, int(out["target"][i])]
            w = self._holdout_weights(_distances(Z, ctx.z0[r]))
            if not w.sum() > 0:
                # No fresh perturbation carries weight: fidelity is undefined.
                scores[i] = np.nan
                continue
            pred = out["intercept"][i] + Z @ out["values"][i][perm]
            ybar = w @ y / w.sum()
            floor = (1e-13 * abs(ybar)) ** 2 * w.sum()
            scores[i] = _r2(w @ (y - pred) ** 2, w @ (y - ybar) ** 2, floor)
        return scores


class _Group:
    """The rows of one batch of model queries, with their per-row streams."""

    def __init__(self, rows, x_num, x_code, z0, X_orig, gens):
        self.rows = rows
        self.x_num = x_num
        self.x_code = x_code
        self.z0 = z0
        self.X_orig = X_orig
        self.gens = gens


def _distances(Z, z0):
    """Euclidean distances of the rows of Z to z0 (one matrix-vector product)."""
    d2 = np.einsum("ij,ij->i", Z, Z)
    d2 -= 2.0 * (Z @ z0)
    d2 += z0 @ z0
    np.maximum(d2, 0.0, out=d2)
    return np.sqrt(d2)


def _row_streams(key_row, seed, sampling="random"):
    """Two independent streams per row: explanation and held-out scoring.

    Derived from the row's content and the call's seed only, so a row's
    result does not depend on the batch it came in or on ``n_jobs``. With
    ``sampling="qmc"`` the explanation stream is quasi-random; held-out
    scoring always uses independent draws.
    """
    children = row_seed(key_row, seed).spawn(2)
    main, holdout = (np.random.default_rng(c) for c in children)
    if sampling == "qmc":
        main = _SobolStream(main)
    return main, holdout


class _SobolStream:
    """A row's quasi-random stream: successive points of one scrambled Sobol'
    sequence, so points appended later (S-LIME's growing samples) continue
    the same sequence."""

    def __init__(self, rng):
        self.rng = rng
        self.engine = None

    def uniforms(self, m, dim):
        if self.engine is None:
            self.engine = qmc.Sobol(dim, scramble=True, seed=self.rng)
        with warnings.catch_warnings():
            # Sizes that are not powers of two lose a little of the balance.
            warnings.simplefilter("ignore", UserWarning)
            U = self.engine.random(m)
        # Keep inverse distributions finite at the (measure-zero) edges.
        return np.clip(U, 1e-16, 1.0 - 1e-16, out=U)


def _stack_rows(results):
    keys = results[0].keys()
    out = {}
    for k in keys:
        vals = [r[k] for r in results]
        if k in (
            "labels",
            "label_values",
            "label_intercept",
            "label_score",
            "label_local_pred",
        ):
            out[k] = np.stack(vals)
        else:
            out[k] = np.asarray(vals)
    out["status"] = out["status"].astype(str)
    out["converged"] = out["converged"].astype(bool)
    return out


def _detect_categorical(X):
    """Columns holding non-numeric values (DataFrame dtypes or object arrays)."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is not None:
        return np.array(
            [j for j, dt in enumerate(dtypes) if not is_numeric_dtype(dt)],
            dtype=np.intp,
        )
    arr = np.asarray(X)
    if arr.dtype != object or arr.ndim != 2:
        return np.empty(0, dtype=np.intp)
    return np.array(
        [
            j
            for j in range(arr.shape[1])
            if any(isinstance(v, (str, bytes)) for v in arr[:, j].tolist())
        ],
        dtype=np.intp,
    )


def _numeric_columns(Xv, num, names):
    """Numeric columns as float64, with errors naming the offending column."""
    out = np.empty((Xv.shape[0], num.size))
    for i, j in enumerate(num):
        try:
            out[:, i] = Xv[:, j].astype(np.float64)
        except (TypeError, ValueError):
            bad = next(v for v in Xv[:, j].tolist() if not _is_number(v))
            raise ValueError(
                f"Column {names[j]!r} is numeric but X holds the non-numeric "
                f"value {bad!r} in it."
            ) from None
    finite = np.isfinite(out)
    if not finite.all():
        r, c = np.argwhere(~finite)[0]
        what = "NaN" if np.isnan(out[r, c]) else "infinity"
        raise ValueError(
            f"Input X contains {what} in numeric column {names[num[c]]!r} (row {int(r)})."
        )
    return out


def _is_number(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


class LimeTabularExplainer(_BaseLime):
    """LIME for tabular data, with the semantics of the ``lime`` package.

    Each row is explained by a weighted linear surrogate fitted on
    perturbations of the row: continuous features are drawn from
    ``N(0, 1) * std`` around the row (or the training mean), categorical and
    discretised features from their training frequencies; the surrogate is
    fitted in the interpretable space (standardised values and "same
    category/bin as the row" indicators) with the kernel
    ``sqrt(exp(-d² / w²))`` of the Euclidean distance to the row.

    Parameters
    ----------
    estimator : fitted estimator or callable, default=None
        The model explained. Classification: a classifier with
        ``predict_proba`` or a callable returning probabilities of shape
        ``(n, n_classes)``; regression: a regressor with ``predict`` or a
        callable returning predictions. A fitted model is never refitted.
    mode : {"classification", "regression"}, default="classification"
        What the model's responses are.
    feature_names : array-like of str, default=None
        Names of the features, for the explanation and its labels (as in
        lime); ``None`` takes the column names of a DataFrame ``X`` in
        ``fit``, or the model's ``feature_names_in_``, or ``x0, x1, ...``.
    categorical_features : array-like of int, str or bool, default=None
        Categorical columns (indices, names of DataFrame columns, or a mask).
        ``None`` detects non-numeric columns (DataFrame dtypes or strings in
        an object array). Values may be integer codes or strings; the model
        is always queried with values in the original representation.
    discretize_continuous : bool, default=True
        Replace every numeric feature by its bin (as lime does).
    discretizer : {"quartile", "decile", "entropy"}, default="quartile"
        Bins learned in ``fit``; ``"entropy"`` uses the thresholds of a
        depth-3 tree on each feature and needs ``y``.
    sample_around_instance : bool, default=False
        Centre continuous perturbations at the row instead of the training
        mean (only matters with ``discretize_continuous=False``).
    kernel_width : float, default=None
        Width ``w`` of the kernel; ``None`` means ``0.75 * sqrt(n_features)``.
    kernel : callable, default=None
        ``kernel(distances, kernel_width) -> weights``; ``None`` is lime's
        exponential kernel.
    feature_selection : {"auto", "none", "forward_selection", "highest_weights", \
            "lasso_path"}, default="auto"
        How the ``num_features`` features of the surrogate are chosen
        (``"auto"``: forward selection up to 6 features, else highest
        weights).
    num_features : int, default=10
        Number of features in each explanation.
    num_samples : int, default=5000
        Size of each neighbourhood, the explained row included.
    model_regressor : regressor, default=None
        Surrogate fitted with ``sample_weight``; ``None`` is
        ``Ridge(alpha=1)``. It must expose ``coef_`` and ``intercept_``.
    sampling : {"random", "qmc"}, default="random"
        ``"random"`` draws independent perturbations, as lime does;
        ``"qmc"`` draws them from a scrambled Sobol' sequence (each row its
        own), mapped through the same inverse distributions: every marginal
        is the same, but the sample covers the neighbourhood more evenly, so
        surrogates and their selected features vary less from seed to seed.
    batch_size : int, default=None
        Largest number of points sent to the model in one call; rows are
        grouped so that one call carries about this many points. ``None``
        groups up to 32768 points per call.
    n_jobs : int, default=None
        Chunks of rows explained in parallel. ``None`` means 1 unless in a
        :obj:`joblib.parallel_config` context; ``-1`` uses all processors.
    random_state : int, RandomState instance or None, default=None
        Seed of the perturbations. Each row gets its own stream derived from
        this seed and the row's content, so results do not depend on the
        batch or on ``n_jobs`` (identical rows get identical explanations).
    verbose : int, default=0
        Above 0, ``explain``, ``transform`` and ``score`` show a progress bar
        of the rows done, with their rate and the time left, on stderr
        (counted as each group of rows returns, also with ``n_jobs > 1``).
        ``0`` prints nothing.

    Attributes
    ----------
    estimator_ : object
        The model queried (the ``estimator`` itself when already fitted).
    classes_ : ndarray or None
        Classes of the model (``None`` in regression mode).
    categorical_features_ : ndarray of int
        Columns treated as categorical.
    kernel_width_ : float
        Kernel width used.
    space_ : object
        Training statistics: means, standard deviations, category and bin
        frequencies, bin edges and per-bin sampling tables.
    n_outputs_ : int
        Number of model outputs explained: the number of classes, or 1 in
        regression mode.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of str
        Names of the features, when ``X`` in ``fit`` was a DataFrame.

    See Also
    --------
    StableLIMEExplainer : LIME whose feature selection is stabilised by a
        hypothesis test on the LARS path, with an adaptive sample size.

    Notes
    -----
    ``values`` of the returned :class:`Explanation` are the surrogate's
    weights on the interpretable features (0 for features not selected);
    ``selected`` lists the selected features by decreasing ``|weight|`` and
    ``selected_names`` their labels in lime's wording (``debt <= 10.70``,
    ``1.00 < x <= 2.00``, ``size_cat=big``; a continuous feature by name);
    ``score`` is the weighted R² of the surrogate on its own neighbourhood
    (lime's ``score``); ``local_pred`` its prediction at the row;
    ``contribution``, ``standardized`` and ``baseline`` the readings of
    :meth:`Explanation.attributions` (``baseline + contribution.sum(1) ==
    local_pred``); ``data`` the explained rows.

    ``effective_samples`` is the Kish size ``(Σw)² / Σw²`` of the row's
    kernel weights. Below ten per surrogate parameter (``10 (k + 1)`` for
    ``k`` selected features) the weights sit on too few perturbations for the
    surrogate to be determined by the data, usually because ``kernel_width``
    is too narrow for the neighbourhood: such a row has ``status
    "few_effective_samples"`` and ``converged=False``, and :meth:`explain`
    warns. Every other row is ``"converged"``.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_plm_explain import LimeTabularExplainer
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=500).fit(X, y)
    >>> lime = LimeTabularExplainer(model, num_features=2, num_samples=500,
    ...                             random_state=0).fit(X)
    >>> lime.explain(X[:3]).selected.shape
    (3, 2)
    """

    _parameter_constraints: dict = {
        **_BaseLime._parameter_constraints,
        "feature_selection": [
            StrOptions(
                {"auto", "none", "forward_selection", "highest_weights", "lasso_path"}
            )
        ],
    }

    def __init__(
        self,
        estimator=None,
        *,
        mode="classification",
        feature_names=None,
        categorical_features=None,
        discretize_continuous=True,
        discretizer="quartile",
        sample_around_instance=False,
        kernel_width=None,
        kernel=None,
        feature_selection="auto",
        num_features=10,
        num_samples=5000,
        model_regressor=None,
        sampling="random",
        batch_size=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.mode = mode
        self.feature_names = feature_names
        self.categorical_features = categorical_features
        self.discretize_continuous = discretize_continuous
        self.discretizer = discretizer
        self.sample_around_instance = sample_around_instance
        self.kernel_width = kernel_width
        self.kernel = kernel
        self.feature_selection = feature_selection
        self.num_features = num_features
        self.num_samples = num_samples
        self.model_regressor = model_regressor
        self.sampling = sampling
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
