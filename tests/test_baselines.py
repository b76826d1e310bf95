"""The paper's baselines: right where they should be, and plainly uncertified."""

import json
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neural_network import MLPClassifier

from sklearn_plm_explain import Explanation, decision_features, local_linear_model
from sklearn_plm_explain.baselines import (
    STATUSES,
    ExtendedLIMEExplainer,
    FiniteDifferenceExplainer,
    NaiveSquareExplainer,
)
from sklearn_plm_explain.metrics import region_difference

BASELINES = [
    FiniteDifferenceExplainer,
    NaiveSquareExplainer,
    ExtendedLIMEExplainer,
]


@pytest.fixture(scope="module")
def iris_lr():
    X, y = load_iris(return_X_y=True)
    return LogisticRegression(max_iter=1000).fit(X, y), X


@pytest.fixture(scope="module")
def relu_mlp():
    X, y = make_blobs(300, n_features=6, centers=4, cluster_std=2.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((16, 8), max_iter=300, random_state=0).fit(X, y)
    return mlp, X


def _truth(model, X, target):
    W, _ = local_linear_model(model, X)
    return decision_features(W, target)


def _rel(est, truth):
    return np.abs(est - truth).sum(1) / np.abs(truth).sum(1)


@pytest.mark.parametrize("cls", BASELINES)
def test_one_region_is_recovered(cls, iris_lr):
    # A logistic regression is one region: every least-squares baseline is
    # right up to rounding at a moderate step.
    model, X = iris_lr
    kw = {} if cls is FiniteDifferenceExplainer else {"random_state": 0}
    e = cls(model, h=1e-3, **kw).fit(X).explain(X[:10])
    assert np.all(_rel(e.values, _truth(model, X[:10], e.target)) < 1e-6)
    np.testing.assert_array_equal(e.target, model.predict_proba(X[:10]).argmax(1))
    assert set(e.status) == {"uncertified"} and set(e.status) <= set(STATUSES)
    # Nothing was tested, so nothing is flagged and no "converged" is claimed.
    assert "converged" not in e.fields and not e.flagged.any()
    C = len(model.classes_)
    np.testing.assert_allclose(
        e.values, C / (C - 1) * e.coef[np.arange(10), :, e.target]
    )


def test_query_counts(iris_lr):
    model, X = iris_lr
    d = X.shape[1]
    zoo = FiniteDifferenceExplainer(model).fit(X).explain(X[:2])
    plain = FiniteDifferenceExplainer(model, richardson=False).fit(X).explain(X[:2])
    naive = NaiveSquareExplainer(model).fit(X).explain(X[:2])
    lime = ExtendedLIMEExplainer(model, n_samples=30).fit(X).explain(X[:2])
    assert zoo.n_queries.tolist() == [4 * d + 1] * 2
    assert plain.n_queries.tolist() == [2 * d + 1] * 2
    assert "error_estimate" not in plain.fields
    assert naive.n_queries.tolist() == [d + 1] * 2
    assert lime.n_queries.tolist() == [31] * 2


def test_finite_differences_cross_a_kink_at_large_steps(relu_mlp):
    # Nothing tells the baselines that a step left the region: at a large h
    # some rows are far off, at a small one they are right.
    mlp, X = relu_mlp
    rows = X[:40]
    big = FiniteDifferenceExplainer(mlp, h=0.5, richardson=False).fit(X).explain(rows)
    small = FiniteDifferenceExplainer(mlp, h=1e-6).fit(X).explain(rows)
    truth = _truth(mlp, rows, small.target)
    assert np.max(_rel(big.values, truth)) > 1e-2
    assert np.median(_rel(small.values, truth)) < 1e-6
    assert set(big.status) == {"uncertified"}


def test_richardson_estimate_tracks_the_error_of_a_smooth_model():
    # A tanh network: OpenAPI refuses it (not piecewise linear); central
    # differences estimate its gradient, and Richardson's rule estimates how
    # far off they are. Reference: central differences at a 100 times
    # smaller step (error 1e4 times smaller).
    X, y = make_blobs(300, n_features=4, centers=3, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        tanh = MLPClassifier(
            (10,), activation="tanh", max_iter=500, random_state=0
        ).fit(X, y)
    rows = X[:30]
    e = FiniteDifferenceExplainer(tanh, h=0.05).fit(X).explain(rows)
    ref = FiniteDifferenceExplainer(tanh, h=5e-4).fit(X).explain(rows, target=e.target)
    actual = _rel(e.values, ref.values)
    ratio = e.error_estimate / actual
    assert np.median(ratio) == pytest.approx(1.0, rel=0.2)
    assert np.mean((ratio > 0.5) & (ratio < 2.0)) >= 0.9


def test_ridge_shrinks_the_slopes_at_small_scales(iris_lr):
    # The paper's Ridge Regression LIME: the penalty swamps a tiny cube.
    model, X = iris_lr
    lin = ExtendedLIMEExplainer(model, h=1e-3, random_state=0).fit(X).explain(X[:5])
    for h in (1e-3, 1e-1):
        ridge = ExtendedLIMEExplainer(
            model, h=h, regression="ridge", n_samples=50, random_state=0
        ).fit(X)
        r = ridge.explain(X[:5])
        shrink = np.abs(r.values).sum(1) / np.abs(lin.values).sum(1)
        # About 1 / (1 + alpha / (n h^2 / 3)) with n = 51 points: 1.7e-5
        # at h = 1e-3, 0.15 at h = 0.1.
        expected = 1 / (1 + 1.0 / (51 * h**2 / 3))
        assert np.all((shrink > expected / 3) & (shrink < 3 * expected))


def test_naive_square_solve_is_exact_in_one_region_and_wrong_across(relu_mlp):
    mlp, X = relu_mlp
    rows = X[:30]
    small = NaiveSquareExplainer(mlp, h=1e-6, random_state=0).fit(X)
    big = NaiveSquareExplainer(mlp, h=1.0, random_state=0).fit(X)
    es, eb = (
        small.explain(rows, return_queries=True),
        big.explain(rows, return_queries=True),
    )
    truth = _truth(mlp, rows, es.target)
    rd_small = region_difference(mlp, rows, es, per_row=True)
    rd_big = region_difference(mlp, rows, eb, per_row=True)
    # Rows whose points stayed in the region are right; a square system
    # cannot tell the others.
    assert np.all(_rel(es.values, truth)[rd_small == 0] < 1e-5)
    assert rd_big.mean() > rd_small.mean()
    assert np.median(_rel(eb.values, truth)[rd_big == 1]) > 1e-3


@pytest.mark.parametrize("cls", BASELINES)
def test_queries_are_the_points_sent(cls, iris_lr, counting):
    model, X = iris_lr
    sent = []

    def proba(Z):
        sent.append(np.array(Z))
        return model.predict_proba(Z)

    kw = {} if cls is FiniteDifferenceExplainer else {"random_state": 0}
    explainer = cls(proba, h=1e-2, scale="unit", **kw).fit(X)
    sent.clear()
    e = explainer.explain(X[:3], return_queries=True)
    queried = np.concatenate(sent[1:])  # the first call asks for the rows
    np.testing.assert_array_equal(np.concatenate(list(e.queries)), queried)
    for x, q in zip(X[:3], e.queries):
        assert np.abs(q - x).max() <= 1e-2 * (1 + 1e-12)


@pytest.mark.slow  # starts process workers
@pytest.mark.parametrize("cls", BASELINES)
def test_results_do_not_depend_on_jobs_or_batches(cls, relu_mlp):
    mlp, X = relu_mlp
    kw = {} if cls is FiniteDifferenceExplainer else {"random_state": 3}
    one = cls(mlp, **kw).fit(X).explain(X[:12])
    two = cls(mlp, n_jobs=2, batch_size=7, **kw).fit(X).explain(X[:12])
    part = cls(mlp, **kw).fit(X).explain(X[6:12])
    np.testing.assert_allclose(one.values, two.values, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(one.values[6:], part.values, rtol=1e-6, atol=1e-9)


def test_explanation_round_trip_and_target(iris_lr):
    model, X = iris_lr
    e = (
        NaiveSquareExplainer(model, random_state=0)
        .fit(X)
        .explain(X[:3], target=2, return_queries=True)
    )
    assert e.method == "naive_square" and e.target.tolist() == [2, 2, 2]
    back = Explanation.from_dict(json.loads(json.dumps(e.to_dict())))
    np.testing.assert_array_equal(back.values, e.values)
    np.testing.assert_array_equal(back.status, e.status)
    np.testing.assert_array_equal(back.queries[1], e.queries[1])
    with pytest.raises(ValueError, match="Unknown target"):
        NaiveSquareExplainer(model).fit(X).explain(X[:1], target=7)


def test_regressor_and_dataframe():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(50, 3)), columns=["a", "b", "c"])
    y = X @ np.array([1.0, -2.0, 0.5]) + 3.0
    model = LinearRegression().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no feature-name warnings
        e = FiniteDifferenceExplainer(model).fit(X).explain(X.iloc[:4])
    np.testing.assert_allclose(e.values, np.tile([1.0, -2.0, 0.5], (4, 1)), rtol=1e-7)
    assert list(e.feature_names) == ["a", "b", "c"] and e.classes is None


def test_saturated_rows_are_nan():
    def proba(Z):
        p = np.where(np.asarray(Z)[:, 0] > 0, 0.0, 0.5)
        return np.column_stack([1 - p, p])

    X = np.array([[1.0, 0.0], [-1.0, 0.0]])
    e = FiniteDifferenceExplainer(proba, scale="unit").fit(X).explain(X)
    assert e.status.tolist() == ["saturated", "uncertified"]
    assert np.isnan(e.values[0]).all() and np.isfinite(e.values[1]).all()
