"""The OpenAPI paper's uncertified baselines: finite differences (ZOO),
naive least squares on a cube, and linear LIME on a Gaussian neighbourhood."""

# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from sklearn_plm_explain.baselines._base import _EPS, _Baseline


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
        Number of jobs explaining slices of rows in parallel.

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
        Number of jobs explaining slices of rows in parallel.
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
        Number of jobs explaining slices of rows in parallel.
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
