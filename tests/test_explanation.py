"""Tests of the Explanation exports: frames, as_list, JSON, shap."""

import json

import numpy as np
import pytest

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
    assert explanation.as_list(0) == [("income", -2.0), ("debt", 1.0), ("age", 0.5)]
    assert explanation.as_list(1, top_k=2) == [("debt", -4.0), ("income", 3.0)]
    assert explanation.as_list(-1, top_k=1) == [("debt", -4.0)]
    assert all(isinstance(v, float) for _, v in explanation.as_list(0))
    with pytest.raises(IndexError):
        explanation.as_list(2)
    with pytest.raises(ValueError, match="top_k"):
        explanation.as_list(0, top_k=0)


def test_as_list_keeps_only_selected_features():
    e = Explanation(
        values=np.array([[0.0, 0.2, -0.7, 0.0]]),
        target=[0],
        classes=[0, 1],
        feature_names=["a", "b", "c", "d"],
        method="lime",
        selected=np.array([[2, 1, -1]]),  # -1 pads a short path
    )
    assert e.as_list(0) == [("c", -0.7), ("b", 0.2)]


def test_json_round_trip(explanation):
    text = json.dumps(explanation.to_dict(), allow_nan=False)
    back = Explanation.from_dict(json.loads(text))
    assert back.fields == explanation.fields
    for name in explanation.fields:
        np.testing.assert_array_equal(getattr(back, name), getattr(explanation, name))
    np.testing.assert_array_equal(back.classes, explanation.classes)
    assert back.params == {"random_state": 0}
    assert back.as_list(1) == explanation.as_list(1)


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
