"""Estimators and explanations survive pickle, joblib and clone."""

import io
import pickle
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from sklearn_plm_explain import (
    LimeTabularExplainer,
    LogisticModelTreeClassifier,
    OpenAPIExplainer,
    StableLIMEExplainer,
)
from sklearn_plm_explain.utils import _test_common  # (tested_* would be collected)

KINDS = ["openapi", "lime", "slime", "lmt"]
ESTIMATORS = _test_common.tested_estimators()


def _joblib_round_trip(obj):
    buffer = io.BytesIO()
    joblib.dump(obj, buffer)
    buffer.seek(0)
    return joblib.load(buffer)


def _pickle_round_trip(obj):
    return pickle.loads(pickle.dumps(obj))


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


def _fitted(kind, X, y):
    model = LogisticRegression(max_iter=1000).fit(X, y)
    if kind == "openapi":
        return OpenAPIExplainer(model, random_state=0).fit(X)
    if kind == "lime":
        return LimeTabularExplainer(model, num_samples=200, random_state=0).fit(X)
    if kind == "slime":
        return StableLIMEExplainer(
            model, num_features=2, num_samples=200, n_max=400, random_state=0
        ).fit(X)
    return LogisticModelTreeClassifier(random_state=0).fit(X, y)


def _output(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if hasattr(est, "transform"):
            return est.transform(X)
        return est.predict_proba(X)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("trip", [_pickle_round_trip, _joblib_round_trip])
def test_fitted_estimators_round_trip(iris, kind, trip):
    X, y = iris
    est = _fitted(kind, X, y)
    back = trip(est)
    np.testing.assert_array_equal(_output(back, X[:5]), _output(est, X[:5]))
    assert back.get_params().keys() == est.get_params().keys()


@pytest.mark.parametrize("kind", KINDS)
def test_clone_keeps_parameters(iris, kind):
    X, y = iris
    est = _fitted(kind, X, y)
    twin = clone(est)
    for key, value in est.get_params(deep=False).items():
        if key != "estimator":
            assert twin.get_params(deep=False)[key] == value
    assert not hasattr(twin, "n_features_in_")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind", ["openapi", "lime", "slime"])
@pytest.mark.parametrize("trip", [_pickle_round_trip, _joblib_round_trip])
def test_explanations_round_trip(iris, kind, trip):
    X, y = iris
    e = _fitted(kind, X, y).explain(X[:6])
    back = trip(e)
    assert back.fields == e.fields
    for name in e.fields:
        np.testing.assert_array_equal(getattr(back, name), getattr(e, name))
    np.testing.assert_array_equal(back.classes, e.classes)
    assert len(back[1:3]) == 2


@pytest.fixture(scope="module")
def fitted_instances(iris):
    X, y = iris
    fitted = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for est in ESTIMATORS:
            # Outputs are compared: fix the seed of those that sample.
            fixed = clone(est)
            if "random_state" in fixed.get_params():
                fixed.set_params(random_state=0)
            fitted.append(fixed.fit(X, y))
    return fitted


@pytest.mark.parametrize("index", range(len(ESTIMATORS)))
def test_every_tested_instance_round_trips(iris, fitted_instances, index):
    X, _ = iris
    est = fitted_instances[index]
    for trip in (_pickle_round_trip, _joblib_round_trip):
        back = trip(est)
        np.testing.assert_array_equal(_output(back, X[:3]), _output(est, X[:3]))
        assert repr(back) == repr(est)
