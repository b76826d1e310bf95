"""Tests of the Explanation exports: frames, as_list, JSON, shap."""

import json

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_plm_explain import Explanation

pd = pytest.importorskip("pandas")


@pytest.fixture
def explanation():
    return Explanation(
        values=np.array([[0.5, -2.0, 1.0], [0.0, 3.0, -4.0]]),
        target=np.array([1, 0]),
        classes=np.array(["no", "yes"]),
        feature_names=np.array(["age", "income", "debt"]),
        method="demo",
        params={"random_state": 0},
        status=np.array(["exact", "boundary"]),
        intercept=np.array([[0.0, 0.25], [-1.0, 1.0]]),
        error_bound=np.array([1e-12, np.inf]),
    )


def test_wide_frame(explanation):
    frame = explanation.to_frame()
    assert frame.shape == (2, 3 + 4)  # features, target, status, bound, label
    assert list(frame.columns[:3]) == ["age", "income", "debt"]
    np.testing.assert_array_equal(frame[["age", "income", "debt"]], explanation.values)
    assert list(frame["target_label"]) == ["yes", "no"]
    assert list(frame["status"]) == ["exact", "boundary"]
    assert "intercept" not in frame  # two-dimensional fields stay out
    pd.testing.assert_frame_equal(frame, explanation.to_frame(kind="wide"))


def test_long_frame(explanation):
    frame = explanation.to_frame(kind="long")
    assert list(frame.columns) == ["row", "feature", "value", "target", "target_label"]
    assert len(frame) == 2 * 3
    row1 = frame[frame["row"] == 1]
    assert list(row1["feature"]) == ["age", "income", "debt"]
    assert list(row1["value"]) == [0.0, 3.0, -4.0]
    assert set(row1["target_label"]) == {"no"}
    # Pivoting the long table back gives the wide values.
    wide = frame.pivot(index="row", columns="feature", values="value")
    np.testing.assert_array_equal(
        wide[["age", "income", "debt"]].to_numpy(), explanation.values
    )


def test_long_frame_for_regression_has_no_label():
    e = Explanation(
        values=np.ones((2, 2)), target=[0, 0], classes=None,
        feature_names=["a", "b"], method="demo",
    )  # fmt: skip
    assert "target_label" not in e.to_frame(kind="long")


def test_unknown_frame_kind(explanation):
    with pytest.raises(ValueError, match="'wide' or 'long'"):
        explanation.to_frame(kind="tall")


def test_as_list_orders_by_magnitude(explanation):
    assert explanation.as_list(0, attribution="slope") == [
        ("income", -2.0),
        ("debt", 1.0),
        ("age", 0.5),
    ]
    assert explanation.as_list(1, top_k=2, attribution="slope") == [
        ("debt", -4.0),
        ("income", 3.0),
    ]
    assert explanation.as_list(-1, top_k=1, attribution="slope") == [("debt", -4.0)]
    assert all(
        isinstance(v, float) for _, v in explanation.as_list(0, attribution="slope")
    )
    with pytest.raises(IndexError):
        explanation.as_list(2, attribution="slope")
    with pytest.raises(ValueError, match="top_k"):
        explanation.as_list(0, top_k=0, attribution="slope")


def test_as_list_keeps_only_selected_features():
    e = Explanation(
        values=np.array([[0.0, 0.2, -0.7, 0.0]]),
        target=[0],
        classes=[0, 1],
        feature_names=["a", "b", "c", "d"],
        method="lime",
        selected=np.array([[2, 1, -1]]),  # -1 pads a short path
    )
    assert e.as_list(0, attribution="slope") == [("c", -0.7), ("b", 0.2)]


def test_json_round_trip(explanation):
    text = json.dumps(explanation.to_dict(), allow_nan=False)
    back = Explanation.from_dict(json.loads(text))
    assert back.fields == explanation.fields
    for name in explanation.fields:
        np.testing.assert_array_equal(getattr(back, name), getattr(explanation, name))
    np.testing.assert_array_equal(back.classes, explanation.classes)
    assert back.params == {"random_state": 0}
    assert back.as_list(1, attribution="slope") == explanation.as_list(
        1, attribution="slope"
    )


def test_concat_joins_rows(explanation):
    joined = Explanation.concat([explanation[:1], explanation[1:]])
    for name in explanation.fields:
        np.testing.assert_array_equal(getattr(joined, name), getattr(explanation, name))
    other = Explanation(
        values=np.ones((1, 3)), target=[0], classes=["no", "yes"],
        feature_names=["age", "income", "debt"], method="other",
    )  # fmt: skip
    with pytest.raises(ValueError, match="same method"):
        Explanation.concat([explanation, other])


def test_to_shap(explanation):
    shap = pytest.importorskip("shap")
    s = explanation.to_shap()
    assert isinstance(s, shap.Explanation)
    np.testing.assert_array_equal(s.values, explanation.values)
    # Per-class intercepts: the entry of each row's target.
    np.testing.assert_array_equal(s.base_values, [0.25, -1.0])
    assert list(s.feature_names) == ["age", "income", "debt"]


def test_to_shap_without_shap(explanation, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "shap", None)
    with pytest.raises(ImportError, match="pip install shap"):
        explanation.to_shap()


def test_wide_frame_keeps_features_named_like_diagnostics():
    pytest.importorskip("pandas")
    e = Explanation(
        values=np.array([[0.5, -1.0]]),
        target=np.array([0]),
        classes=np.array([0, 1]),
        feature_names=np.array(["status", "age"]),
        method="demo",
        status=np.array(["exact"]),
    )
    frame = e.to_frame()
    assert frame["status"].tolist() == [0.5]
    assert frame["explanation_status"].tolist() == ["exact"]


def test_status_counts_and_repr_count_the_same():
    from sklearn_plm_explain import Explanation

    e = Explanation(
        values=np.zeros((4, 2)),
        target=[0, 0, 1, 1],
        classes=[0, 1],
        feature_names=["a", "b"],
        method="demo",
        status=["exact", "boundary", "exact", "flat"],
    )
    assert e.status_counts() == {"boundary": 1, "exact": 2, "flat": 1}
    assert "status={boundary: 1, exact: 2, flat: 1}" in repr(e)
    assert "status" in dir(e) and "values" in dir(e)
    with pytest.raises(ValueError, match="holds 4 rows"):
        e.as_list(attribution="slope")
    assert e[2].as_list(attribution="slope") == e.as_list(2, attribution="slope")


# -- contributions and shap's additivity ----------------------------------------------
def _log_ratio(log_proba, target):
    """mean over c' != c of log(p_c / p_c'): what OpenAPI's D_c is the slope of."""
    n, C = log_proba.shape
    own = log_proba[np.arange(n), target]
    return (C * own - log_proba.sum(axis=1)) / (C - 1)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_to_shap_adds_up_to_the_models_log_ratio(n_classes):
    """base_values + values.sum() is the model's output in the explained units
    (log-odds for two classes), at every certified row; data are the rows."""
    shap = pytest.importorskip("shap")
    from sklearn.datasets import load_breast_cancer, load_iris
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    from sklearn_plm_explain import OpenAPIExplainer

    X, y = (load_breast_cancer if n_classes == 2 else load_iris)(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    mlp = MLPClassifier((16,), max_iter=2000, random_state=0).fit(X, y)
    e = OpenAPIExplainer(mlp, random_state=0).fit(X).explain(X[:15])
    s = e.to_shap()
    assert isinstance(s, shap.Explanation)
    assert e.converged.all()
    output = _log_ratio(mlp.predict_log_proba(X[:15]), e.target)
    assert_allclose(s.base_values + s.values.sum(axis=1), output, atol=1e-9)
    np.testing.assert_array_equal(s.data, X[:15])
    # Contributions are slopes times the distance from the background mean.
    assert_allclose(s.values, e.values * (X[:15] - X.mean(axis=0)))
    assert_allclose(e.standardized, e.values * X.std(axis=0))


@pytest.mark.filterwarnings(
    "ignore:.*status 'tied':sklearn.exceptions.ConvergenceWarning"
)  # S-LIME ties
def test_to_shap_of_lime_adds_up_to_the_surrogate():
    pytest.importorskip("shap")
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    from sklearn_plm_explain import StableLIMEExplainer

    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X, y)
    e = StableLIMEExplainer(model, num_features=2, random_state=0).fit(X).explain(X[:5])
    s = e.to_shap()
    assert_allclose(s.base_values + s.values.sum(axis=1), e.local_pred)
    np.testing.assert_array_equal(s.data, X[:5])


def test_attributions_name_what_is_missing(explanation):
    np.testing.assert_array_equal(explanation.attributions("slope"), explanation.values)
    with pytest.raises(ValueError, match="no 'contribution' field"):
        explanation.attributions()
    with pytest.raises(ValueError, match="kind must be one of"):
        explanation.attributions("raw")


def test_flagged_rows_follow_converged():
    base = {
        "target": [0, 0, 0],
        "classes": None,
        "feature_names": ["a"],
        "method": "demo",
    }
    e = Explanation(values=[[1.0], [2.0], [3.0]], converged=[True, False, True], **base)
    assert e.flagged.tolist() == [False, True, False]
    assert e[1:].flagged.tolist() == [True, False]
    # Without a "converged" field nothing was tested: nothing is flagged.
    assert not Explanation(values=[[1.0], [2.0], [3.0]], **base).flagged.any()


def test_per_row_point_sets_round_trip_and_stay_out_of_tables():
    queries = np.empty(2, dtype=object)
    queries[0], queries[1] = np.ones((3, 2)), np.zeros((0, 2))
    e = Explanation(
        values=np.eye(2),
        target=[0, 1],
        classes=None,
        feature_names=["a", "b"],
        method="demo",
        queries=queries,
    )
    back = Explanation.from_dict(json.loads(json.dumps(e.to_dict())))
    np.testing.assert_array_equal(back.queries[0], queries[0])
    assert back.queries[1].shape == (0, 2)
    assert "queries" not in e.to_frame().columns
    both = Explanation.concat([e, e[1:]])
    assert len(both.queries) == 3 and both.queries[2].shape == (0, 2)


def test_as_list_ranks_as_the_chart_does_by_default():
    # One default everywhere: the list, attributions() and the chart all give
    # contributions, so a label shows one number and the top feature agrees.
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    from sklearn_plm_explain import LimeTabularExplainer

    X, y = load_breast_cancer(return_X_y=True)
    model = RandomForestClassifier(20, random_state=0).fit(X, y)
    e = LimeTabularExplainer(model, num_samples=500, random_state=0).fit(X)
    e = e.explain(X[:3])
    for row in range(3):
        listed = e.as_list(row)
        contribution = e.attributions()[row]
        picked = e.selected[row][e.selected[row] >= 0]
        order = picked[np.argsort(-np.abs(contribution[picked]), kind="stable")]
        assert [v for _, v in listed] == [float(contribution[j]) for j in order]
        slopes = e.as_list(row, attribution="slope")
        assert sorted(v for _, v in slopes) == sorted(
            float(e.values[row, j]) for j in picked
        )


def test_to_frame_without_pandas_names_the_extra(explanation, monkeypatch):
    import sys

    # A None entry makes `import pandas` fail as on a base install.
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"sklearn-plm-explain\[pandas\]"):
        explanation.to_frame()
