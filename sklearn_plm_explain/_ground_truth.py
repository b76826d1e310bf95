"""White-box ground truth: the exact local linear model of known PLMs."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.base import is_classifier
from sklearn.decomposition import PCA
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    StandardScaler,
)
from sklearn.utils._param_validation import HasMethods, validate_params
from sklearn.utils.validation import check_array, check_is_fitted

from sklearn_plm_explain._utils._validation import is_numeric_dtype

__all__ = ["local_linear_model", "decision_features"]

_PLM_ACTIVATIONS = ("relu", "identity")


@validate_params(
    {
        "estimator": [HasMethods(["fit"]), HasMethods(["local_linear_model"])],
        "X": ["array-like"],
    },
    prefer_skip_nested_validation=True,
)
def local_linear_model(estimator, X):
    """Exact local linear model of a fitted piecewise-linear model at each row.

    Parameters
    ----------
    estimator : estimator
        A fitted model of a known piecewise-linear family: ``MLPClassifier`` /
        ``MLPRegressor`` with ``relu`` or ``identity`` activation,
        ``LogisticRegression``, ``LinearRegression``, ``Ridge``, a ``Pipeline``
        of affine steps (``StandardScaler``, ``MinMaxScaler``, ``MaxAbsScaler``,
        ``PCA``) ending in one of those, or any estimator that offers a
        ``local_linear_model(X)`` method (such as
        :class:`LogisticModelTreeClassifier`). A pipeline may start with a
        ``ColumnTransformer`` that scales numeric columns (with the affine
        steps above or ``"passthrough"``) and encodes the others (e.g.
        ``OneHotEncoder`` on strings); ``X`` is then a DataFrame, the slopes
        are with respect to its numeric columns in their order in ``X``, and
        every other column is held at the row's own value (as
        :class:`OpenAPIExplainer` does).
    X : array-like of shape (n_samples, n_features)
        Rows at which to read the local model.

    Returns
    -------
    W : ndarray of shape (n_samples, n_features, n_outputs)
        Local slopes of the logits (classifiers; for binary scikit-learn
        models the first class's logit is 0, an estimator's own
        ``local_linear_model`` may spread them differently) or of the
        prediction (regressors, one output).
    b : ndarray of shape (n_samples, n_outputs)
        Local intercepts, so that ``softmax(X[i] @ W[i] + b[i])`` equals
        ``predict_proba(X[i])`` (classifiers) and ``X[i] @ W[i] + b[i]`` equals
        ``predict(X[i])`` (regressors).

    Raises
    ------
    TypeError
        If ``estimator`` is not a known piecewise-linear model.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_plm_explain import local_linear_model
    >>> X, y = load_iris(return_X_y=True)
    >>> W, b = local_linear_model(LogisticRegression(max_iter=500).fit(X, y), X[:2])
    >>> W.shape, b.shape
    ((2, 4, 3), (2, 3))
    """
    check_is_fitted(estimator)
    if _column_transformer_first(estimator):
        return _column_pipeline(estimator, X)
    X = check_array(X, dtype=np.float64)
    return _dispatch(estimator, X)


@validate_params(
    {"W": ["array-like"], "target": ["array-like"]},
    prefer_skip_nested_validation=True,
)
def decision_features(W, target):
    """Decision features ``D_c`` of class ``c = target[i]`` from logit slopes.

    ``D_c = 1/(C-1) * sum_{c' != c} (W_c - W_c')``, which equals
    ``C/(C-1) * (W_c - mean_j W_j)``. For one output (regression) the slopes
    themselves are returned.

    Parameters
    ----------
    W : ndarray of shape (n_samples, n_features, n_outputs)
        Logit slopes, e.g. from :func:`local_linear_model`.
    target : array-like of int of shape (n_samples,)
        Index of the class of each row.

    Returns
    -------
    D : ndarray of shape (n_samples, n_features)
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 3:
        raise ValueError(
            "W must have shape (n_samples, n_features, n_outputs); "
            f"got shape {W.shape}."
        )
    n, _, C = W.shape
    if C == 1:
        return W[:, :, 0].copy()
    target = np.asarray(target)
    if target.shape != (n,) or target.dtype.kind not in "iu":
        raise ValueError(
            f"target must be {n} integer class indices; got an array of "
            f"shape {target.shape} and dtype {target.dtype}."
        )
    if n and (target.min() < 0 or target.max() >= C):
        raise ValueError(
            f"target holds class indices outside [0, {C - 1}]: "
            f"{np.unique(target[(target < 0) | (target >= C)]).tolist()}."
        )
    centred = W - W.mean(axis=2, keepdims=True)
    return C / (C - 1) * centred[np.arange(n), :, target]


def _dispatch(estimator, X):
    if hasattr(estimator, "local_linear_model") and not isinstance(estimator, Pipeline):
        return estimator.local_linear_model(X)
    if isinstance(estimator, Pipeline):
        return _pipeline(estimator, X)
    if isinstance(estimator, (MLPClassifier, MLPRegressor)):
        return _mlp(estimator, X)
    if isinstance(estimator, LogisticRegression):
        return _linear_classifier(estimator, X)
    if isinstance(estimator, (LinearRegression, Ridge)):
        return _linear_regressor(estimator, X)
    raise TypeError(
        f"{type(estimator).__name__} is not a known piecewise-linear model; "
        "local_linear_model supports MLPClassifier/MLPRegressor (relu or "
        "identity), LogisticRegression, LinearRegression, Ridge, pipelines of "
        "affine steps into those, and estimators with a local_linear_model "
        "method."
    )


def _column_transformer_first(est):
    from sklearn.compose import ColumnTransformer

    return isinstance(est, Pipeline) and isinstance(est.steps[0][1], ColumnTransformer)


def _column_pipeline(pipe, X):
    """Local model of a pipeline that starts with a ColumnTransformer.

    On each row the transformer is affine in the numeric columns, ``z = x A +
    c_i``, where the offset ``c_i`` carries the encoded values of the other
    columns of that row.
    """
    ct = pipe.steps[0][1]
    numeric = [c for c in X.columns if is_numeric_dtype(X[c].dtype)]
    X_num = check_array(X[numeric].to_numpy(), dtype=np.float64)
    Z = ct.transform(X)
    Z = np.asarray(Z.toarray() if hasattr(Z, "toarray") else Z, dtype=np.float64)
    A = np.zeros((len(numeric), Z.shape[1]))
    for name, trans, cols in ct.transformers_:
        out = ct.output_indices_.get(name, slice(0, 0))
        if trans == "drop" or out.stop == out.start:
            continue
        labels = _column_labels(X, cols)
        if not any(c in numeric for c in labels):
            continue  # encodes non-numeric columns: constant on each row
        if not all(c in numeric for c in labels):
            raise TypeError(
                f"ColumnTransformer part {name!r} mixes numeric and non-numeric "
                "columns; its output is not affine in the numeric ones."
            )
        A_t = _affine_chain(trans, len(labels))
        A[[numeric.index(c) for c in labels], out] = A_t
    offsets = Z - X_num @ A
    rest = pipe.steps[1:]
    Wz, bz = _dispatch(rest[0][1] if len(rest) == 1 else Pipeline(rest), Z)
    W = np.einsum("ij,njk->nik", A, Wz)
    b = np.einsum("nj,njk->nk", offsets, Wz) + bz
    return W, b


def _column_labels(X, cols):
    if callable(cols):
        cols = cols(X)
    if isinstance(cols, (str, int, np.integer)):
        cols = [cols]
    if isinstance(cols, slice) or (
        len(cols) and isinstance(cols[0], (int, np.integer, bool, np.bool_))
    ):
        return list(X.columns[cols])
    return list(cols)


def _affine_chain(trans, d):
    """The linear part of a numeric column transformer: passthrough, an
    affine step, or a pipeline of them."""
    if trans == "passthrough":
        return np.eye(d)
    steps = [s for _, s in trans.steps] if isinstance(trans, Pipeline) else [trans]
    A = np.eye(d)
    for step in steps:
        if step is None or step == "passthrough":
            continue
        A = A @ _affine_step(step)[0]
    return A


def _affine_step(step):
    """Return ``(A, c)`` with ``step.transform(x) == x @ A + c``."""
    if isinstance(step, StandardScaler):
        d = step.n_features_in_
        # mean_ and scale_ may be set even when with_mean / with_std are off.
        scale = step.scale_ if step.with_std and step.scale_ is not None else np.ones(d)
        mean = step.mean_ if step.with_mean and step.mean_ is not None else np.zeros(d)
        return np.diag(1.0 / scale), -mean / scale
    if isinstance(step, FunctionTransformer) and step.func is None:
        # What a ColumnTransformer keeps for "passthrough" columns.
        return np.eye(step.n_features_in_), np.zeros(step.n_features_in_)
    if isinstance(step, MinMaxScaler):
        if step.clip:
            raise TypeError("MinMaxScaler(clip=True) is not affine.")
        return np.diag(step.scale_), step.min_.copy()
    if isinstance(step, MaxAbsScaler):
        return np.diag(1.0 / step.scale_), np.zeros(step.n_features_in_)
    if isinstance(step, PCA):
        A = step.components_.T.copy()
        if step.whiten:
            A /= np.sqrt(step.explained_variance_)
        return A, -step.mean_ @ A
    raise TypeError(
        f"Pipeline step {type(step).__name__} is not a known affine transform; "
        "supported: StandardScaler, MinMaxScaler, MaxAbsScaler, PCA."
    )


def _pipeline(pipe, X):
    A_total, c_total = np.eye(X.shape[1]), np.zeros(X.shape[1])
    for _, step in pipe.steps[:-1]:
        if step is None or step == "passthrough":
            continue
        A, c = _affine_step(step)
        A_total, c_total = A_total @ A, c_total @ A + c
    Z = X @ A_total + c_total
    Wz, bz = _dispatch(pipe.steps[-1][1], Z)
    # Chain rule: logits = (x A + c) Wz + bz.
    W = np.einsum("ij,njk->nik", A_total, Wz)
    b = np.einsum("j,njk->nk", c_total, Wz) + bz
    return W, b


def _mlp(mlp, X):
    W, b, group = _mlp_grouped(mlp, X)
    return np.ascontiguousarray(W[group]), b


def _mlp_grouped(mlp, X):
    """``(W_g, b, group)``: one slope matrix per distinct activation pattern.

    Rows of one linear region share their pattern, so ``W_g[group[i]]`` is
    row ``i``'s slopes, computed once per pattern from the output down
    (memory patterns * width * outputs, never n * d * d).
    """
    if mlp.activation not in _PLM_ACTIVATIONS:
        raise TypeError(
            f"{type(mlp).__name__}(activation={mlp.activation!r}) is not piecewise "
            "linear; only 'relu' and 'identity' are."
        )
    if not is_classifier(mlp) and mlp.out_activation_ != "identity":
        raise TypeError(
            f"MLPRegressor with output activation {mlp.out_activation_!r} is not "
            "piecewise linear."
        )
    # Forward: the activation pattern at each row fixes the local affine map;
    # its offset ``b`` is carried along (n * width numbers per layer).
    n = X.shape[0]
    h, b = X, np.zeros(X.shape[1])
    masks = []
    last = len(mlp.coefs_) - 1
    for layer, (coef, icpt) in enumerate(zip(mlp.coefs_, mlp.intercepts_)):
        h = h @ coef + icpt
        b = b @ coef + icpt
        if layer < last and mlp.activation == "relu":
            mask = (h > 0).astype(np.float64)
            h, b = h * mask, b * mask
            masks.append(mask)
    b = np.ascontiguousarray(np.broadcast_to(b, (n, b.shape[-1])))
    group = np.zeros(n, dtype=np.intp)
    if masks:
        bits = np.packbits(np.hstack(masks).astype(bool), axis=1)
        _, first, group = np.unique(
            bits, axis=0, return_index=True, return_inverse=True
        )
        group = group.reshape(-1)
        masks = [mask[first] for mask in masks]
    out = mlp.coefs_[last]
    m, k = (masks[0].shape[0] if masks else 1), out.shape[1]
    # Backward, held as (width, patterns, outputs): one product per layer.
    W = np.broadcast_to(out[:, None, :], (out.shape[0], m, k))
    for layer in range(last - 1, -1, -1):
        if masks:
            W = W * masks[layer].T[:, :, None]
        W = (mlp.coefs_[layer] @ W.reshape(W.shape[0], -1)).reshape(-1, m, k)
    W = W.transpose(1, 0, 2)
    if is_classifier(mlp) and k == 1:
        W_g, _ = _binary_logits(W[:, :, 0], np.zeros(m))
        _, b = _binary_logits(np.zeros((n, 0)), b[:, 0])
        return W_g, b, group
    return W, b, group


def _grouped_local_linear_model(estimator, X):
    """``(W_g, b, group)`` with ``W_g[group]`` the slopes of the rows of ``X``.

    Distinct local models are computed once for ReLU networks (per
    activation pattern) and logistic model trees (per leaf); for other
    models every row is its own group.
    """
    from sklearn_plm_explain._lmt import LogisticModelTreeClassifier

    check_is_fitted(estimator)
    if isinstance(estimator, (MLPClassifier, MLPRegressor)):
        return _mlp_grouped(estimator, check_array(X, dtype=np.float64))
    if isinstance(estimator, LogisticModelTreeClassifier):
        leaves = estimator.apply(X)
        unique, group = np.unique(leaves, return_inverse=True)
        tree = estimator.tree_
        return tree.coef[unique], tree.intercept[leaves], group.reshape(-1)
    W, b = local_linear_model(estimator, X)
    return W, b, np.arange(W.shape[0])


def _binary_logits(w, b):
    n, d = w.shape
    W = np.zeros((n, d, 2))
    W[:, :, 1] = w
    B = np.zeros((n, 2))
    B[:, 1] = b
    return W, B


def _linear_classifier(model, X):
    n = X.shape[0]
    coef, icpt = model.coef_, model.intercept_
    if coef.shape[0] == 1:
        w = np.broadcast_to(coef[0], (n, coef.shape[1]))
        return _binary_logits(w, np.full(n, icpt[0]))
    W = np.broadcast_to(coef.T, (n, *coef.T.shape)).copy()
    return W, np.broadcast_to(icpt, (n, icpt.shape[0])).copy()


def _linear_regressor(model, X):
    n = X.shape[0]
    coef = np.ravel(model.coef_)
    if np.ndim(model.coef_) == 2 and model.coef_.shape[0] != 1:
        raise TypeError("Multi-output linear regressors are not supported.")
    W = np.broadcast_to(coef[:, None], (n, coef.shape[0], 1)).copy()
    b = np.full((n, 1), float(np.ravel(model.intercept_)[0]))
    return W, b
