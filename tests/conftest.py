"""Shared test configuration: hypothesis profiles and small fixtures."""

import os

import pytest
from hypothesis import HealthCheck, settings

# Fitting models inside property tests is slow by hypothesis' standards: no
# deadline, few examples. The default run is derandomised, so that it passes
# or fails the same way every time; "dev" draws new examples on every run and
# "thorough" many more, to explore.
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    max_examples=12,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=12)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.load_profile(os.environ.get("SKLEARN_PLM_HYPOTHESIS_PROFILE", "ci"))


class CountingModel:
    """Wraps a callable model and counts its calls and query rows."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0
        self.rows = 0

    def __call__(self, X):
        self.calls += 1
        self.rows += len(X)
        return self.fn(X)


@pytest.fixture
def counting():
    return CountingModel


@pytest.fixture(scope="session")
def digits_lmt():
    """A logistic model tree on digits with several leaves, its training rows
    and 300 held-out rows."""
    from sklearn.datasets import load_digits

    from sklearn_plm_explain import LogisticModelTreeClassifier

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    lmt = LogisticModelTreeClassifier(
        prune=False, max_depth=3, split_point="midpoint", random_state=0
    ).fit(X[:1200], y[:1200])
    assert lmt.get_n_leaves() >= 4
    return lmt, X[:1200], X[1200:1500]
