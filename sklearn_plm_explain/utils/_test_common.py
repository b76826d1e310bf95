"""The estimator instances every common test runs over.

One list, shared by ``tests/test_common.py`` (scikit-learn's and our own
common checks), ``tests/test_persistence.py`` and ``tests/test_parallel.py``,
so that a new public estimator or a new parameter setting is covered by all of
them at once. Each call builds fresh, unfitted instances.
"""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

from sklearn_plm_explain import (
    LimeTabularExplainer,
    LogisticModelTreeClassifier,
    OpenAPIExplainer,
    StableLIMEExplainer,
)
from sklearn_plm_explain.baselines import (
    ExtendedLIMEExplainer,
    FiniteDifferenceExplainer,
    NaiveSquareExplainer,
)

__all__ = ["EXPECTED_FAILED_CHECKS", "tested_estimators", "expected_failed_checks"]

# Why a scikit-learn check cannot apply, per estimator class.
EXPECTED_FAILED_CHECKS = {
    OpenAPIExplainer: {
        "check_transformer_n_iter": (
            "max_iter bounds the radius attempts per explained row in "
            "explain/transform; fit runs no iterations, so there is no n_iter_"
        ),
    },
}


def expected_failed_checks(estimator):
    """Checks that cannot apply to ``estimator``, with the reason for each."""
    return EXPECTED_FAILED_CHECKS.get(type(estimator), {})


def logistic_proba(X):
    """A width-agnostic probability model (a plain callable)."""
    X = np.asarray(X, dtype=float)
    p = 1 / (1 + np.exp(-X.sum(axis=1) / 10))
    return np.column_stack([1 - p, p])


def tested_estimators():
    """Fresh instances of every public estimator: defaults and typical settings.

    Every public estimator appears at least once with its default parameters
    (``tests/test_common.py`` checks that). The settings keep each check
    cheap: small samples and models.
    """
    return [
        OpenAPIExplainer(),
        OpenAPIExplainer(LogisticRegression(max_iter=1000), random_state=0),
        OpenAPIExplainer(
            MLPClassifier((8,), max_iter=300, random_state=0),
            reuse_regions=True,
            response_method="predict_proba",
            random_state=0,
        ),
        LimeTabularExplainer(),
        LimeTabularExplainer(logistic_proba, num_samples=50, random_state=0),
        LimeTabularExplainer(
            LogisticRegression(max_iter=1000),
            discretize_continuous=False,
            feature_selection="lasso_path",
            num_features=2,
            num_samples=200,
            random_state=0,
        ),
        StableLIMEExplainer(),
        StableLIMEExplainer(logistic_proba, num_samples=50, n_max=200, random_state=0),
        LogisticModelTreeClassifier(),
        LogisticModelTreeClassifier(prune=False, min_samples_split=5, random_state=0),
        LogisticModelTreeClassifier(
            max_iter=3, n_iter_no_change=2, split_point="midpoint"
        ),
        FiniteDifferenceExplainer(),
        FiniteDifferenceExplainer(logistic_proba, h=1e-3, richardson=False),
        NaiveSquareExplainer(),
        NaiveSquareExplainer(
            LogisticRegression(max_iter=1000), scale="unit", random_state=0
        ),
        ExtendedLIMEExplainer(),
        ExtendedLIMEExplainer(
            logistic_proba, regression="ridge", n_samples=20, random_state=0
        ),
        OpenAPIExplainer(LogisticRegression(max_iter=1000), uncertified="nan"),
    ]
