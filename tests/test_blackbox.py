"""Models as the explainers take them: estimators, plain objects, callables."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression

from sklearn_plm_explain import (
    LimeTabularExplainer,
    OpenAPIExplainer,
    StableLIMEExplainer,
    decision_features,
    local_linear_model,
)
from sklearn_plm_explain.baselines import FiniteDifferenceExplainer

X, y = load_iris(return_X_y=True)
LR = LogisticRegression(max_iter=1000).fit(X, y)
REG = LinearRegression().fit(X, X @ np.arange(1.0, 5.0))


class OnlyProba:
    """An object outside scikit-learn with nothing but ``predict_proba``."""

    def predict_proba(self, X):
        return LR.predict_proba(X)


class FitAndProba(OnlyProba):
    """A fit method but no BaseEstimator (no tags, no fitted attributes)."""

    def fit(self, X, y=None):
        return self


class OnlyDecision:
    def decision_function(self, X):
        return LR.decision_function(X)


class OnlyPredict:
    def predict(self, X):
        return REG.predict(X)


def _truth(model, rows):
    W, _ = local_linear_model(model, rows)
    if W.shape[2] == 1:
        return W[:, :, 0]
    target = LR.predict(rows)
    return decision_features(W, target)


@pytest.mark.parametrize(
    "plain, model",
    [
        (OnlyProba(), LR),
        (FitAndProba(), LR),
        (OnlyDecision(), LR),
        (OnlyPredict(), REG),
    ],
    ids=["predict_proba", "fit_without_BaseEstimator", "decision_function", "predict"],
)
def test_openapi_explains_plain_model_objects_exactly(plain, model):
    rows = X[::30]
    e = OpenAPIExplainer(plain, random_state=0).fit(X).explain(rows)
    assert (e.status == "exact").all()
    truth = _truth(model, rows)
    err = np.abs(e.values - truth).sum(axis=1) / np.abs(truth).sum(axis=1)
    assert err.max() <= 1e-8


@pytest.mark.parametrize("Explainer", [LimeTabularExplainer, StableLIMEExplainer])
@pytest.mark.parametrize(
    "plain, model, mode",
    [
        (OnlyProba(), LR, "classification"),
        (FitAndProba(), LR, "classification"),
        (OnlyPredict(), REG, "regression"),
    ],
    ids=["predict_proba", "fit_without_BaseEstimator", "predict"],
)
def test_lime_gives_a_plain_object_the_estimators_explanation(
    Explainer, plain, model, mode
):
    kw = {"mode": mode, "num_samples": 500, "random_state": 0}
    if Explainer is StableLIMEExplainer:
        kw["n_max"] = 1000
    with warnings.catch_warnings():
        # Rows at n_max warn; both runs must agree on them too.
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = Explainer(plain, **kw).fit(X).explain(X[:3])
        theirs = Explainer(model, **kw).fit(X).explain(X[:3])
    np.testing.assert_array_equal(ours.values, theirs.values)
    np.testing.assert_array_equal(ours.status, theirs.status)


@pytest.mark.parametrize(
    "plain, method",
    [(OnlyProba(), "predict_proba"), (OnlyDecision(), "decision_function")],
)
def test_baselines_give_a_plain_object_the_estimators_explanation(plain, method):
    kw = {"h": 1e-4, "response_method": method}
    ours = FiniteDifferenceExplainer(plain, **kw).fit(X).explain(X[:3])
    theirs = FiniteDifferenceExplainer(LR, **kw).fit(X).explain(X[:3])
    np.testing.assert_array_equal(ours.values, theirs.values)


def test_lime_on_a_decision_function_only_object_says_what_it_needs():
    with pytest.raises(ValueError, match="predict_proba"):
        LimeTabularExplainer(OnlyDecision()).fit(X)
