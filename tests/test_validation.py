"""The shared validation helpers."""

import numpy as np
import pytest

from sklearn_plm_explain._utils._validation import is_numeric_dtype

pd = pytest.importorskip("pandas")


@pytest.mark.parametrize(
    "dtype, numeric",
    [
        (np.float64, True),
        (np.float32, True),
        (np.int8, True),
        (np.uint16, True),
        (bool, True),
        (pd.Int64Dtype(), True),
        (pd.Float64Dtype(), True),
        (pd.BooleanDtype(), True),
        (object, False),
        ("U3", False),
        (pd.CategoricalDtype(["a", "b"]), False),
        (pd.StringDtype(), False),
        (np.complex128, False),
        ("datetime64[ns]", False),
    ],
)
def test_one_definition_of_numeric_columns(dtype, numeric):
    assert is_numeric_dtype(dtype) is numeric


def test_explainers_and_ground_truth_agree_on_numeric_columns():
    from sklearn_plm_explain import LimeTabularExplainer, OpenAPIExplainer

    X = pd.DataFrame(
        {
            "a": [1.0, 2.0, 3.0, 4.0],
            "n": pd.array([1, 2, 3, 4], dtype="Int64"),
            "s": ["x", "y", "x", "y"],
            "c": pd.Categorical(["u", "v", "v", "u"]),
        }
    )

    def proba(Z):
        p = np.full(len(Z), 0.5)
        return np.column_stack([p, 1 - p])

    openapi = OpenAPIExplainer(proba).fit(X)
    lime = LimeTabularExplainer(proba, num_samples=20).fit(X)
    assert list(openapi.numeric_features_) == ["a", "n"]
    assert list(lime.categorical_features_) == [2, 3]


def test_class_indices_broadcast_and_name_unknown_labels():
    from sklearn_plm_explain._utils._validation import class_indices

    classes = np.array(["cat", "dog", "eel"])
    np.testing.assert_array_equal(class_indices(classes, "dog", 3), [1, 1, 1])
    np.testing.assert_array_equal(class_indices(classes, ["eel", "cat"], 2), [2, 0])
    np.testing.assert_array_equal(class_indices(classes, ["eel"], what="labels"), [2])
    with pytest.raises(ValueError, match=r"Unknown labels \['ant'\]"):
        class_indices(classes, ["ant", "cat"], what="labels")
    with pytest.raises(ValueError, match="one label or 3 labels"):
        class_indices(classes, ["cat", "dog"], 3)
