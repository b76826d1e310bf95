"""What the baselines share: validation, the black box, per-row results in
groups of rows and their Explanation, all rows marked uncertified."""

# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    OneToOneFeatureMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain._utils._blackbox import (
    MODEL_CONSTRAINTS,
    BlackBox,
    resolve_estimator,
    resolve_response_method,
)
from sklearn_plm_explain._utils._parallel import (
    base_seed,
    map_even_slices,
    row_generators,
)
from sklearn_plm_explain._utils._validation import class_indices

STATUSES = {
    "uncertified": "a comparison estimate at a fixed perturbation scale h: "
    "nothing checks that the points stayed in the row's linear region or that "
    "the responses resolve the slope",
    "saturated": "a probability underflowed to 0 at the row or a queried "
    "point, so a log-ratio is infinite; values are NaN",
}


# Largest number of query coordinates (points times features) held at once.
_BLOCK = 1 << 22


_EPS = np.finfo(np.float64).eps


class _Baseline(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Shared plumbing: fit, queries, log-ratios, the Explanation."""

    _parameter_constraints: dict = {
        "estimator": list(MODEL_CONSTRAINTS),
        "response_method": [
            StrOptions({"auto", "predict_proba", "decision_function", "predict"})
        ],
        "h": [Interval(Real, 0, None, closed="neither")],
        "scale": [StrOptions({"std", "unit"}), "array-like"],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "n_jobs": [Integral, None],
    }
    _method = None

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Learn the feature scales and resolve how to query the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training (background) data; only its per-feature spread is used
            (with ``scale="std"``).
        y : array-like of shape (n_samples,), default=None
            Only used to fit an unfitted ``estimator``.

        Returns
        -------
        self : object
            Fitted explainer.
        """
        X_raw = X
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=1)
        self.estimator_ = resolve_estimator(
            self.estimator, X_raw, y, type(self).__name__
        )
        self.response_method_, self._kind = resolve_response_method(
            self.estimator_, self.response_method
        )
        if self._kind == "regression":
            self.classes_, self._n_outputs = None, 1
        else:
            classes = getattr(self.estimator_, "classes_", None)
            if classes is None:
                self._n_outputs = None
                out = self._black_box().query(X[:1], np.zeros(1, dtype=np.intp))
                classes = np.arange(out.shape[1])
            self.classes_ = np.asarray(classes)
            self._n_outputs = max(len(classes), 2)
        self.scale_ = _resolve_scale(self.scale, X)
        return self

    def explain(self, X, target=None, return_queries=False):
        """Estimate the local linear model of each row at the scale ``h``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to explain.
        target : label or array-like of shape (n_samples,), default=None
            Class whose decision features go into ``values``; default the
            class the model predicts for each row. Ignored for regressors.
        return_queries : bool, default=False
            Also return the queried points of each row (the row itself
            excluded) in the field ``queries``, for
            :func:`~sklearn_plm_explain.metrics.region_difference`.

        Returns
        -------
        explanation : Explanation
            ``values`` (n, d) decision features of the target class, ``coef``
            (n, d, C) slopes of the centred log-ratios, ``intercept`` (n, C),
            ``status`` (``"uncertified"`` or ``"saturated"``), ``n_queries``;
            further fields as the class documents.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        if self.classes_ is None or target is None:
            target_idx = np.full(X.shape[0], -1, dtype=np.intp)
        else:
            target_idx = class_indices(self.classes_, target, X.shape[0])
        seed = base_seed(getattr(self, "random_state", None))
        parts = map_even_slices(
            self._explain_rows,
            X.shape[0],
            self.n_jobs,
            X,
            target_idx,
            seed,
            bool(return_queries),
        )
        merged = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
        coef, target_idx = merged.pop("coef"), merged.pop("target")
        n = X.shape[0]
        if self.classes_ is None:
            values = coef[:, :, 0]
        else:
            C = coef.shape[2]
            values = C / (C - 1) * coef[np.arange(n), :, target_idx]
        return Explanation(
            values=values,
            target=target_idx,
            classes=self.classes_,
            feature_names=self.get_feature_names_out(),
            method=self._method,
            params=self.get_params(deep=False) | {"estimator": repr(self.estimator)},
            coef=coef,
            **merged,
        )

    def transform(self, X):
        """Decision features of the predicted class, shape (n_samples, n_features).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to explain.

        Returns
        -------
        values : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        return self.explain(X).values

    # -- the per-slice computation ------------------------------------------------
    def _black_box(self):
        return BlackBox(
            self.estimator_,
            self.response_method_,
            self._kind,
            self._n_outputs,
            feature_names=getattr(self.estimator_, "feature_names_in_", None),
            batch_size=self.batch_size,
        )

    def _explain_rows(self, rows, X, target, seed, return_queries):
        X, target = X[rows], target[rows]
        n, d = X.shape
        bb = self._black_box()
        owners = np.arange(n) + rows.start
        L0, bad0 = self._log(bb.query(X, owners))
        if self.classes_ is not None:
            target = np.where(target >= 0, target, np.argmax(L0, axis=1))
        else:
            target = np.zeros(n, dtype=np.intp)
        rngs = row_generators(X, seed)
        step = self.h * self.scale_
        out = _Results(n, d, L0.shape[1], return_queries)
        U_first = self._offsets(rngs[0], d) if n else np.zeros((0, d))
        block = max(1, _BLOCK // max(U_first.size, 1))
        for start in range(0, n, block):
            idx = np.arange(start, min(start + block, n))
            U = np.stack(
                [U_first if i == 0 else self._offsets(rngs[i], d) for i in idx]
            )
            points = X[idx, None, :] + step * U
            R = bb.query(points.reshape(-1, d), np.repeat(owners[idx], U.shape[1]))
            L, bad = self._log(R)
            L = L.reshape(len(idx), U.shape[1], -1)
            bad = bad.reshape(len(idx), -1).any(axis=1) | bad0[idx]
            # Fit on the offsets as represented, in units of the step.
            U = (points - X[idx, None, :]) / step
            slope, extra = self._fit(U, L0[idx], L, step, target[idx])
            slope[bad] = np.nan
            extra = {key: np.where(bad, np.nan, arr) for key, arr in extra.items()}
            intercept = L0[idx] - np.einsum("nj,njk->nk", X[idx], slope)
            out.store(idx, slope, intercept, bad, U.shape[1] + 1, points, extra)
        return out.as_dict(target)

    def _log(self, R):
        """Centred log-ratios (classifiers) or the prediction (regressors)."""
        if self._kind == "proba":
            with np.errstate(divide="ignore"):
                L = np.log(R)
        else:
            L = R
        bad = ~np.isfinite(L).all(axis=1)
        L = np.where(np.isfinite(L), L, 0.0)
        if L.shape[1] > 1:
            L = L - L.mean(axis=1, keepdims=True)
        return L, bad


class _Results:
    """Per-row results of one slice of rows."""

    def __init__(self, n, d, C, return_queries):
        self.coef = np.full((n, d, C), np.nan)
        self.intercept = np.full((n, C), np.nan)
        self.status = np.full(n, "uncertified", dtype=object)
        self.n_queries = np.zeros(n, dtype=np.intp)
        self.extra = {}
        self.queries = None
        if return_queries:
            self.queries = np.empty(n, dtype=object)

    def store(self, idx, slope, intercept, bad, n_queries, points, extra):
        self.coef[idx], self.intercept[idx] = slope, intercept
        self.status[idx[bad]] = "saturated"
        self.n_queries[idx] = n_queries
        for key, arr in extra.items():
            if key not in self.extra:
                self.extra[key] = np.full(self.coef.shape[0], np.nan)
            self.extra[key][idx] = arr
        if self.queries is not None:
            for k, i in enumerate(idx):
                self.queries[i] = points[k]

    def as_dict(self, target):
        out = {
            "target": target,
            "coef": self.coef,
            "intercept": self.intercept,
            "status": self.status.astype(str),
            "n_queries": self.n_queries,
        } | self.extra
        if self.queries is not None:
            out["queries"] = self.queries
        return out


def _resolve_scale(scale, X):
    if isinstance(scale, str):
        if scale == "unit":
            return np.ones(X.shape[1])
        std = X.std(axis=0)
        positive = std[std > 0]
        fallback = np.median(positive) if positive.size else 1.0
        return np.where(std > 0, std, fallback)
    scale = np.asarray(scale, dtype=np.float64)
    if scale.shape != (X.shape[1],) or not np.all(scale > 0):
        raise ValueError(
            f"scale must be 'std', 'unit' or {X.shape[1]} positive numbers; got "
            f"shape {scale.shape}."
        )
    return scale
