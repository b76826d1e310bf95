"""The OpenAPI paper's baselines, as explainers returning an ``Explanation``.

These explainers are **comparisons**, not certified explanations. Each reads
the local behaviour of a model from queries at a fixed perturbation scale
``h`` chosen by the user, as the baselines of the OpenAPI paper (Cong, Chu et
al., arXiv:1906.06857, §IV-B and §V) do, and none of them can tell whether its points stayed in the
row's linear region or whether the responses were precise enough: their rows
carry the status ``"uncertified"`` (``"saturated"`` when a probability
underflowed to 0 and the log-ratios are infinite, values NaN), and no
``converged`` field, since nothing was tested.

* :class:`FiniteDifferenceExplainer` -- ZOO: central differences of the
  log-ratios along each axis (``2 d`` queries besides the row, ``4 d`` with
  the Richardson error estimate). Also what a user of a *smooth* model (a tanh network, where
  :class:`~sklearn_plm_explain.OpenAPIExplainer` rightly refuses) can use.
* :class:`NaiveSquareExplainer` -- the naive method: the row and ``d``
  uniform points of the cube of half-width ``h``, the square system
  ``Omega_{d+1}`` solved exactly (``d`` queries besides the row).
* :class:`ExtendedLIMEExplainer` -- the paper's "extended LIME": linear or
  ridge regression of the log-ratios on uniform points of the cube of
  half-width ``h``.

All three estimate, like OpenAPI, the slopes of every class's centred log-ratio
``log p_c - mean_j log p_j`` (``coef``, shape (n, d, C)); the decision
features of class ``c`` are ``values = C/(C-1) * coef[:, :, c]``, the average
of the slopes of ``log(p_c / p_c')`` over ``c' != c`` (paper, Eq. 1). Compare
them with :mod:`sklearn_plm_explain.metrics`.
"""

# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    OneToOneFeatureMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain._utils._blackbox import (
    BlackBox,
    base_seed,
    map_row_chunks,
    resolve_estimator,
    resolve_response_method,
    row_generators,
)
from sklearn_plm_explain._utils._validation import class_indices

__all__ = [
    "ExtendedLIMEExplainer",
    "FiniteDifferenceExplainer",
    "NaiveSquareExplainer",
    "STATUSES",
]

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
        "estimator": [HasMethods(["fit"]), callable, None],
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
        parts = map_row_chunks(
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

    # -- the per-chunk computation ------------------------------------------------
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
    """Per-row results of one chunk."""

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


class FiniteDifferenceExplainer(_Baseline):
    """ZOO: central finite differences of the log-ratios, step ``h``.

    A comparison method with **no certificate**. For each row ``x`` and
    feature ``j`` the model is queried at ``x +- h s_j e_j`` (``s`` the
    feature scale) and the slope of every centred log-ratio is estimated as
    ``(L(x + h s_j e_j) - L(x - h s_j e_j)) / (2 h s_j)``: ``2 d`` queries
    per row besides the row itself (``n_queries`` counts it too). This is the zeroth-order gradient estimate of ZOO as the OpenAPI
    paper's baseline uses it (§V: the derivative of ``log(p_c / p_c')`` is
    exactly ``D_{c,c'}`` on a linear region).

    On a piecewise-linear model the result is exact (up to rounding) when
    every stencil point stays in the row's region, and wrong by an unknown
    amount when one does not -- nothing here can tell which. On a *smooth*
    model (a tanh network, an RBF kernel model behind ``predict_proba``,
    where :class:`~sklearn_plm_explain.OpenAPIExplainer` reports
    ``not_piecewise_linear``) it estimates the gradient of the log-ratios,
    which is what such a model's local explanation is.

    **Error estimate** (``richardson=True``, the default): the stencil is
    also queried at ``h / 2`` (``4 d`` queries in all), and the field
    ``error_estimate`` holds, per row, the relative L1 error of the target's
    decision features estimated by Richardson's rule for a second-order
    formula, ``4/3 ||D_h - D_{h/2}||_1 / ||D_h||_1``, plus a rounding term
    ``sum_j 4 eps max(1, |L|) / (2 h s_j)``. ``values`` stay the plain
    estimate at ``h``. What it does **not** guarantee: it is an estimate, not
    a bound. It assumes the error behaves like ``c h^2`` between the two
    steps (a smooth model, ``h`` small against its curvature); a kink closer
    to ``x`` than ``h / 2`` along an axis, or one affecting both steps alike,
    can go unnoticed; only the axis directions are probed; the rounding term
    assumes responses precise to a few ulps, which is false for rounded or
    float32 APIs and for binary probabilities computed as ``1 - p``.

    Parameters
    ----------
    estimator : estimator, callable or None, default=None
        A fitted classifier (``predict_proba`` or ``decision_function``) or
        regressor, or a callable ``f(X) -> probabilities``; as for
        :class:`~sklearn_plm_explain.OpenAPIExplainer`.
    response_method : {"auto", "predict_proba", "decision_function", \
            "predict"}, default="auto"
        What to query; ``"auto"`` as for ``OpenAPIExplainer``. The paper's
        baselines query ``predict_proba``.
    h : float, default=1e-4
        Step, in units of each feature's scale.
    scale : {"std", "unit"} or array-like of shape (n_features,), default="std"
        Unit of the step per feature: the standard deviation of ``X`` in
        :meth:`fit` (constant features get the median of the others), 1 for
        every feature (``"unit"``: ``h`` in the features' own units, as in
        the paper), or given values.
    richardson : bool, default=True
        Also query the stencil at ``h / 2`` and report ``error_estimate``.
    batch_size : int, default=None
        Largest number of points sent to the model in one call.
    n_jobs : int, default=None
        Number of jobs explaining chunks of rows in parallel.

    Attributes
    ----------
    estimator_ : estimator or callable
        The explained model.
    response_method_ : str
        The method queried.
    classes_ : ndarray of shape (n_classes,) or None
        Class labels (``None`` for regressors).
    scale_ : ndarray of shape (n_features,)
        Unit of the step per feature.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during :meth:`fit`, when they are all strings.

    See Also
    --------
    sklearn_plm_explain.OpenAPIExplainer : Certified exact decision features.

    References
    ----------
    .. [1] P.-Y. Chen, H. Zhang, Y. Sharma, J. Yi, C.-J. Hsieh, "ZOO: Zeroth
       Order Optimization based Black-box Attacks to Deep Neural Networks
       without Training Substitute Models", AISec 2017.
    .. [2] Z. Cong, L. Chu, L. Wang, X. Hu, J. Pei, "Exact and Consistent
       Interpretation of Piecewise Linear Models Hidden behind APIs: A Closed
       Form Solution", arXiv:1906.06857, §V (the ZOO baseline).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_plm_explain.baselines import FiniteDifferenceExplainer
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=1000).fit(X, y)
    >>> e = FiniteDifferenceExplainer(model, h=1e-3).fit(X).explain(X[:2])
    >>> e.status
    array(['uncertified', 'uncertified'], dtype='<U11')
    >>> bool(e.error_estimate.max() < 1e-6)
    True
    """

    _parameter_constraints: dict = {
        **_Baseline._parameter_constraints,
        "richardson": ["boolean"],
    }
    _method = "finite_differences"

    def __init__(
        self,
        estimator=None,
        *,
        response_method="auto",
        h=1e-4,
        scale="std",
        richardson=True,
        batch_size=None,
        n_jobs=None,
    ):
        self.estimator = estimator
        self.response_method = response_method
        self.h = h
        self.scale = scale
        self.richardson = richardson
        self.batch_size = batch_size
        self.n_jobs = n_jobs

    def _offsets(self, rng, d):
        E = np.eye(d)
        stencil = [E, -E] + ([E / 2, -E / 2] if self.richardson else [])
        return np.concatenate(stencil)

    def _fit(self, U, L0, L, step, target):
        n, _, d = U.shape
        # Offsets as represented: u_j of the +e_j and -e_j points.
        up, down = (
            U[:, np.arange(d), np.arange(d)],
            U[:, d + np.arange(d), np.arange(d)],
        )
        span = ((up - down) * step)[:, :, None]
        slope = (L[:, :d] - L[:, d : 2 * d]) / span
        if not self.richardson:
            return slope, {}
        up2 = U[:, 2 * d + np.arange(d), np.arange(d)]
        down2 = U[:, 3 * d + np.arange(d), np.arange(d)]
        span2 = ((up2 - down2) * step)[:, :, None]
        half = (L[:, 2 * d : 3 * d] - L[:, 3 * d :]) / span2
        # Richardson: D_h - D_{h/2} is 3/4 of D_h's O(h^2) error.
        truncation = 4.0 / 3.0 * np.abs(slope - half)
        magnitude = np.maximum(1.0, np.abs(L).max(axis=1, keepdims=True))
        rounding = 4.0 * _EPS * magnitude / np.abs(span)
        rows = np.arange(n)
        C = slope.shape[2]
        factor = C / (C - 1) if C > 1 else 1.0
        c = target if C > 1 else np.zeros(n, dtype=np.intp)
        error = factor * (truncation + rounding)[rows, :, c].sum(axis=1)
        size = factor * np.abs(slope[rows, :, c]).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            relative = np.where(size > 0, error / size, np.inf)
        return slope, {"error_estimate": relative}


class NaiveSquareExplainer(_Baseline):
    """The naive method: the square system Omega_{d+1} solved exactly.

    A comparison method with **no certificate** (paper §IV-B). For each row
    ``x`` the model is queried at ``d`` points drawn uniformly from the cube
    ``x + h s * [-1, 1]^d``; with the row itself they give ``d + 1``
    equations in the ``d + 1`` unknowns of each log-ratio's affine map, which
    are solved exactly. With probability one the system is regular (the
    paper's Lemma 1) -- but a solved square system leaves no residual to
    check: when a point lies in another linear region the answer is wrong
    (Theorem 1) and looks no different. ``d`` queries per row besides the
    row itself.

    Parameters
    ----------
    estimator : estimator, callable or None, default=None
        The model, as for :class:`FiniteDifferenceExplainer`.
    response_method : {"auto", "predict_proba", "decision_function", \
            "predict"}, default="auto"
        What to query.
    h : float, default=1e-4
        Half-width of the cube, in units of each feature's scale.
    scale : {"std", "unit"} or array-like of shape (n_features,), default="std"
        Unit of ``h`` per feature; see :class:`FiniteDifferenceExplainer`.
    batch_size : int, default=None
        Largest number of points sent to the model in one call.
    n_jobs : int, default=None
        Number of jobs explaining chunks of rows in parallel.
    random_state : int, RandomState instance or None, default=None
        Seeds the points; each row draws from its own generator derived from
        this seed and the row's values.

    Attributes
    ----------
    estimator_ : estimator or callable
        The explained model.
    response_method_ : str
        The method queried.
    classes_ : ndarray of shape (n_classes,) or None
        Class labels (``None`` for regressors).
    scale_ : ndarray of shape (n_features,)
        Unit of ``h`` per feature.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during :meth:`fit`, when they are all strings.

    See Also
    --------
    sklearn_plm_explain.OpenAPIExplainer : The same idea with witnesses and an
        adaptive cube, certified.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_plm_explain.baselines import NaiveSquareExplainer
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=1000).fit(X, y)
    >>> e = NaiveSquareExplainer(model, random_state=0).fit(X).explain(X[:2])
    >>> e.n_queries
    array([5, 5])
    """

    _parameter_constraints: dict = {
        **_Baseline._parameter_constraints,
        "random_state": ["random_state"],
    }
    _method = "naive_square"

    def __init__(
        self,
        estimator=None,
        *,
        response_method="auto",
        h=1e-4,
        scale="std",
        batch_size=None,
        n_jobs=None,
        random_state=None,
    ):
        self.estimator = estimator
        self.response_method = response_method
        self.h = h
        self.scale = scale
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _offsets(self, rng, d):
        return rng.uniform(-1.0, 1.0, (d, d))

    def _fit(self, U, L0, L, step, target):
        n, m, d = U.shape
        A = np.concatenate([np.ones((n, m + 1, 1)), np.zeros((n, m + 1, d))], axis=2)
        A[:, 1:, 1:] = U
        Y = np.concatenate([L0[:, None, :], L], axis=1)
        slope = np.full((n, d, L.shape[2]), np.nan)
        for i in range(n):
            try:
                beta = np.linalg.solve(A[i], Y[i])
            except np.linalg.LinAlgError:
                continue  # a singular draw (probability zero): NaN
            slope[i] = beta[1:] / step[:, None]
        return slope, {}


class ExtendedLIMEExplainer(_Baseline):
    """The paper's "extended LIME": regression of the log-ratios on a cube.

    A comparison method with **no certificate** (paper §V). Instead of a
    surrogate of one class's probability, it fits a linear model to every
    centred log-ratio over ``n_samples`` points drawn uniformly from the cube
    ``x + h s * [-1, 1]^d`` (the row itself is added, as LIME includes the
    instance): ordinary least squares (``regression="linear"``, the paper's
    "Linear Regression LIME") or ridge regression with penalty ``alpha`` on
    the offsets in units of the scale (``"ridge"``, "Ridge Regression
    LIME"). No kernel weights: on a cube this small LIME's kernel is flat.

    Least squares is exact when every point lies in the row's region and
    silently wrong otherwise. Ridge shrinks the slopes towards zero by a
    factor of about ``1 / (1 + alpha / (n h^2 / 3))``: at the small ``h``
    a PLM needs it returns nearly a constant function, the paper's finding.

    Parameters
    ----------
    estimator : estimator, callable or None, default=None
        The model, as for :class:`FiniteDifferenceExplainer`.
    response_method : {"auto", "predict_proba", "decision_function", \
            "predict"}, default="auto"
        What to query.
    h : float, default=1e-4
        Half-width of the cube, in units of each feature's scale.
    scale : {"std", "unit"} or array-like of shape (n_features,), default="std"
        Unit of ``h`` per feature; see :class:`FiniteDifferenceExplainer`.
    regression : {"linear", "ridge"}, default="linear"
        The surrogate.
    alpha : float, default=1.0
        Ridge penalty (``regression="ridge"``), as LIME's ``Ridge(alpha=1)``.
    n_samples : int, default=None
        Points per row; ``None`` means ``2 * n_features``.
    batch_size : int, default=None
        Largest number of points sent to the model in one call.
    n_jobs : int, default=None
        Number of jobs explaining chunks of rows in parallel.
    random_state : int, RandomState instance or None, default=None
        Seeds the points; each row draws from its own generator derived from
        this seed and the row's values.

    Attributes
    ----------
    estimator_ : estimator or callable
        The explained model.
    response_method_ : str
        The method queried.
    classes_ : ndarray of shape (n_classes,) or None
        Class labels (``None`` for regressors).
    scale_ : ndarray of shape (n_features,)
        Unit of ``h`` per feature.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during :meth:`fit`, when they are all strings.

    See Also
    --------
    sklearn_plm_explain.LimeTabularExplainer : LIME itself.

    References
    ----------
    .. [1] M. T. Ribeiro, S. Singh, C. Guestrin, "Why Should I Trust You?":
       Explaining the Predictions of Any Classifier", KDD 2016.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_plm_explain.baselines import ExtendedLIMEExplainer
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=1000).fit(X, y)
    >>> ridge = ExtendedLIMEExplainer(model, regression="ridge", random_state=0)
    >>> linear = ExtendedLIMEExplainer(model, random_state=0)
    >>> r, lin = ridge.fit(X).explain(X[:1]), linear.fit(X).explain(X[:1])
    >>> bool(abs(r.values).sum() < 1e-3 * abs(lin.values).sum())  # shrunk to ~0
    True
    """

    _parameter_constraints: dict = {
        **_Baseline._parameter_constraints,
        "regression": [StrOptions({"linear", "ridge"})],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "n_samples": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
    }
    _method = "extended_lime"

    def __init__(
        self,
        estimator=None,
        *,
        response_method="auto",
        h=1e-4,
        scale="std",
        regression="linear",
        alpha=1.0,
        n_samples=None,
        batch_size=None,
        n_jobs=None,
        random_state=None,
    ):
        self.estimator = estimator
        self.response_method = response_method
        self.h = h
        self.scale = scale
        self.regression = regression
        self.alpha = alpha
        self.n_samples = n_samples
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _offsets(self, rng, d):
        m = 2 * d if self.n_samples is None else self.n_samples
        return rng.uniform(-1.0, 1.0, (m, d))

    def _fit(self, U, L0, L, step, target):
        n, m, d = U.shape
        # The row itself is a point at offset 0. Both fits go through the
        # normal equations of the centred data, one batched solve for all
        # rows: the design (uniform offsets) is well conditioned.
        Z = np.concatenate([np.zeros((n, 1, d)), U], axis=1)
        Y = np.concatenate([L0[:, None, :], L], axis=1)
        Zc = Z - Z.mean(axis=1, keepdims=True)
        Yc = Y - Y.mean(axis=1, keepdims=True)
        G = Zc.transpose(0, 2, 1) @ Zc
        if self.regression == "ridge":
            # Ridge on the offsets in units of the scale (h u), intercept
            # unpenalised: (h^2 G + alpha I) w = h Zc^T Yc.
            G = self.h**2 * G + self.alpha * np.eye(d)
            rhs = self.h * (Zc.transpose(0, 2, 1) @ Yc)
            return np.linalg.solve(G, rhs) / (step / self.h)[None, :, None], {}
        rhs = Zc.transpose(0, 2, 1) @ Yc
        if m < d:
            # Fewer points than unknowns: the minimum-norm least squares fit.
            return (np.linalg.pinv(G, hermitian=True) @ rhs) / step[None, :, None], {}
        return np.linalg.solve(G, rhs) / step[None, :, None], {}


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
