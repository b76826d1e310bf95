"""The shared validation helpers."""

import numpy as np
import pytest

from sklearn_plm_explain._validation import is_numeric_dtype

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
