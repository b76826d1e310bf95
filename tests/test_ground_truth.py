"""local_linear_model: white-box ground truth for known piecewise-linear models."""

import warnings

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.datasets import load_diabetes, load_iris
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, StandardScaler

from sklearn_plm_explain import decision_features, local_linear_model


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def _logits(X, W, b):
    return np.einsum("nd,ndc->nc", X, W) + b


CLASSIFIERS = [
    LogisticRegression(max_iter=2000),
    MLPClassifier((10, 6), max_iter=300, random_state=0),
    MLPClassifier((8,), activation="identity", max_iter=300, random_state=0),
    make_pipeline(StandardScaler(), MLPClassifier((10,), max_iter=300, random_state=0)),
    make_pipeline(MinMaxScaler(), MaxAbsScaler(), LogisticRegression(max_iter=2000)),
    make_pipeline(
        StandardScaler(with_mean=False),
        MLPClassifier((10,), max_iter=300, random_state=0),
    ),
    make_pipeline(StandardScaler(with_std=False), LogisticRegression(max_iter=2000)),
    make_pipeline(StandardScaler(), PCA(3, whiten=True), LogisticRegression()),
    make_pipeline(PCA(3), MLPClassifier((10,), max_iter=300, random_state=0)),
]


@pytest.mark.parametrize("model", CLASSIFIERS, ids=lambda m: repr(m)[:40])
@pytest.mark.parametrize("binary", [False, True])
def test_classifier_probabilities_are_reproduced(model, binary):
    X, y = load_iris(return_X_y=True)
    if binary:
        y = (y == 1).astype(int)
    model = _fit(model, X, y)
    W, b = local_linear_model(model, X)
    C = 2 if binary else 3
    assert W.shape == (len(X), 4, C) and b.shape == (len(X), C)
    np.testing.assert_allclose(
        softmax(_logits(X, W, b), axis=1), model.predict_proba(X), atol=1e-12
    )
    if binary:
        # The first class's logit is 0.
        assert np.all(W[:, :, 0] == 0) and np.all(b[:, 0] == 0)


@pytest.mark.parametrize(
    "model",
    [
        LinearRegression(),
        Ridge(alpha=3.0),
        MLPRegressor(hidden_layer_sizes=(12,), max_iter=500, random_state=0),
        make_pipeline(
            StandardScaler(),
            MLPRegressor(hidden_layer_sizes=(12, 6), max_iter=500, random_state=0),
        ),
    ],
    ids=lambda m: repr(m)[:40],
)
def test_regressor_predictions_are_reproduced(model):
    X, y = load_diabetes(return_X_y=True)
    model = _fit(model, X, y)
    W, b = local_linear_model(model, X)
    assert W.shape == (len(X), X.shape[1], 1)
    np.testing.assert_allclose(
        _logits(X, W, b)[:, 0], model.predict(X), rtol=1e-10, atol=1e-9
    )


def test_relu_pattern_changes_the_local_model():
    X, y = load_iris(return_X_y=True)
    mlp = _fit(MLPClassifier((10, 6), max_iter=500, random_state=0), X, y)
    W, _ = local_linear_model(mlp, X)
    assert len({w.tobytes() for w in np.round(W, 10)}) > 1


@pytest.mark.parametrize(
    "model, match",
    [
        (
            RandomForestClassifier(n_estimators=3, random_state=0),
            "not a known piecewise-linear",
        ),
        (
            MLPClassifier((5,), activation="tanh", max_iter=50, random_state=0),
            "not piecewise",
        ),
        (make_pipeline(MinMaxScaler(clip=True), LogisticRegression()), "not affine"),
    ],
)
def test_unknown_models_raise_type_error(model, match):
    X, y = load_iris(return_X_y=True)
    model = _fit(model, X, y)
    with pytest.raises(TypeError, match=match):
        local_linear_model(model, X[:3])


def test_poisson_mlp_regressor_is_not_piecewise_linear():
    X, y = load_diabetes(return_X_y=True)
    reg = _fit(
        MLPRegressor(
            loss="poisson", hidden_layer_sizes=(5,), max_iter=50, random_state=0
        ),
        X,
        y,
    )
    with pytest.raises(TypeError, match="not piecewise linear"):
        local_linear_model(reg, X[:3])


def test_decision_features_average_pairwise_differences():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(4, 5, 3))
    target = np.array([0, 1, 2, 1])
    D = decision_features(W, target)
    for i, c in enumerate(target):
        pairs = [W[i, :, c] - W[i, :, k] for k in range(3) if k != c]
        np.testing.assert_allclose(D[i], np.mean(pairs, axis=0))
