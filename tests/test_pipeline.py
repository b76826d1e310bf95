"""Explainers inside Pipelines, and explaining Pipelines on DataFrames."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from sklearn_plm_explain import OpenAPIExplainer, decision_features, local_linear_model


@pytest.fixture(scope="module")
def bc_frame():
    data = load_breast_cancer(as_frame=True)
    X, y = data.data, data.target
    model = Pipeline(
        [
            ("scale", StandardScaler()),
            ("mlp", MLPClassifier((16,), max_iter=800, random_state=0)),
        ]
    ).fit(X, y)
    return model, X, y


def test_explainer_as_a_transformer_feeding_an_estimator(bc_frame):
    model, X, y = bc_frame
    pipe = Pipeline(
        [
            ("explain", OpenAPIExplainer(FrozenEstimator(model), random_state=0)),
            ("clf", LogisticRegression(max_iter=2000)),
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe.fit(X[:120], y[:120])
        attributions = pipe[:-1].transform(X[:10])
        assert pipe.score(X[120:160], y[120:160]) > 0.5
    assert attributions.shape == (10, X.shape[1])
    assert np.all(np.isfinite(attributions))


def test_set_output_pandas_names_the_attributions(bc_frame):
    model, X, _ = bc_frame
    explainer = OpenAPIExplainer(model, random_state=0).set_output(transform="pandas")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        out = explainer.fit(X).transform(X.iloc[:5])
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(X.columns)
    np.testing.assert_array_equal(out.index, X.index[:5])
    e = explainer.explain(X.iloc[:5])
    np.testing.assert_array_equal(e.feature_names, X.columns)


def _mixed_frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n),
            "city": rng.choice(["paris", "lyon", "nice"], n),
            "income": rng.lognormal(10, 1, n),
            "plan": rng.choice(["basic", "pro"], n),
            "score": rng.normal(0, 1, n),
        }
    )
    y = ((X.age > 40) ^ (X.city == "lyon")).astype(int) + (X.score > 1)
    return X, y


def test_column_transformer_pipeline_explained_in_raw_columns():
    X, y = _mixed_frame()
    numeric = ["age", "income", "score"]
    model = Pipeline(
        [
            (
                "columns",
                ColumnTransformer(
                    [
                        ("num", StandardScaler(), numeric),
                        ("cat", OneHotEncoder(), ["city", "plan"]),
                    ]
                ),
            ),
            ("mlp", MLPClassifier((16,), max_iter=1500, random_state=0)),
        ]
    ).fit(X, y)
    rows = X.iloc[:40]
    explainer = OpenAPIExplainer(model, random_state=0).fit(X)
    e = explainer.explain(rows)
    # Only the numeric columns are perturbed and explained.
    np.testing.assert_array_equal(e.feature_names, numeric)
    np.testing.assert_array_equal(explainer.get_feature_names_out(), numeric)
    W, _ = local_linear_model(model, rows)
    assert W.shape == (40, 3, 3)
    truth = decision_features(W, e.target)
    rel = np.abs(e.values - truth).sum(1) / np.abs(truth).sum(1)
    assert e.converged.mean() >= 0.95
    assert np.all(rel[e.converged] <= 1e-8)


def test_mixed_frame_input_checks():
    X, y = _mixed_frame(100)
    model = Pipeline(
        [
            (
                "columns",
                ColumnTransformer(
                    [("num", StandardScaler(), ["age", "income", "score"])],
                    remainder=OneHotEncoder(),
                ),
            ),
            ("clf", LogisticRegression(max_iter=1000)),
        ]
    ).fit(X, y)
    explainer = OpenAPIExplainer(model, random_state=0).fit(X)
    bad = X.iloc[:3].copy()
    bad.loc[bad.index[0], "city"] = None
    with pytest.raises(ValueError, match="missing values in column"):
        explainer.explain(bad)
    with pytest.raises(ValueError, match="same columns"):
        explainer.explain(X[["age", "income", "score"]].to_numpy()[:3])
    e = explainer.explain(X.iloc[:5])
    assert e.converged.all()


@pytest.mark.filterwarnings(
    "ignore:.*status 'tied':sklearn.exceptions.ConvergenceWarning"
)  # S-LIME ties
@pytest.mark.parametrize("kind", ["lime", "slime"])
def test_lime_explainers_treat_string_columns_as_categorical(kind):
    from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer

    X, y = _mixed_frame(300)
    model = Pipeline(
        [
            (
                "columns",
                ColumnTransformer(
                    [
                        ("num", StandardScaler(), ["age", "income", "score"]),
                        ("cat", OneHotEncoder(), ["city", "plan"]),
                    ]
                ),
            ),
            ("clf", LogisticRegression(max_iter=1000)),
        ]
    ).fit(X, y)
    cls = LimeTabularExplainer if kind == "lime" else StableLIMEExplainer
    explainer = cls(model, num_features=3, num_samples=300, random_state=0).fit(X)
    e = explainer.explain(X.iloc[:4])
    np.testing.assert_array_equal(e.feature_names, X.columns)
    # The string columns were found and sampled as categories.
    np.testing.assert_array_equal(sorted(explainer.categorical_features_), [1, 3])
    assert e.values.shape == (4, 5) and np.all(np.isfinite(e.values))


@pytest.mark.parametrize("layout", ["passthrough", "remainder"])
def test_passthrough_columns_in_ground_truth_and_explanations(layout):
    X, y = _mixed_frame(300)
    numeric = ["age", "income", "score"]
    if layout == "passthrough":
        columns = ColumnTransformer(
            [
                ("num", "passthrough", numeric),
                ("cat", OneHotEncoder(), ["city", "plan"]),
            ]
        )
    else:
        columns = ColumnTransformer(
            [("cat", OneHotEncoder(), ["city", "plan"])], remainder="passthrough"
        )
    # Unscaled passthrough columns (income ~ 2e4) make lbfgs crawl for
    # thousands of iterations; Newton's method converges in a few.
    clf = LogisticRegression(solver="newton-cholesky", max_iter=100)
    model = Pipeline([("columns", columns), ("clf", clf)])
    model.fit(X, y)
    rows = X.iloc[:10]
    W, b = local_linear_model(model, rows)
    logits = np.einsum("nd,ndc->nc", rows[numeric].to_numpy(), W) + b
    P = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(
        P / P.sum(1, keepdims=True), model.predict_proba(rows), atol=1e-12
    )
    e = OpenAPIExplainer(model, random_state=0).fit(X).explain(rows)
    truth = decision_features(W, e.target)
    rel = np.abs(e.values - truth).sum(1) / np.abs(truth).sum(1)
    assert e.converged.all() and np.all(rel <= 1e-8)


@pytest.mark.parametrize("kind", ["openapi", "lime", "slime"])
def test_pandas_output_of_every_explainer_in_a_pipeline(bc_frame, kind):
    from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer

    model, X, _ = bc_frame
    frozen = FrozenEstimator(model)
    explainer = {
        "openapi": OpenAPIExplainer(frozen, random_state=0),
        "lime": LimeTabularExplainer(frozen, num_samples=100, random_state=0),
        "slime": StableLIMEExplainer(
            frozen, num_features=2, num_samples=100, n_max=200, random_state=0
        ),
    }[kind]
    pipe = Pipeline([("explain", explainer)]).set_output(transform="pandas")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        out = pipe.fit(X).transform(X.iloc[:3])
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(X.columns)
    np.testing.assert_array_equal(out.index, X.index[:3])
