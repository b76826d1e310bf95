"""Global views: submodular pick (SP-LIME) and the region census of OpenAPI."""

import itertools
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from sklearn_plm_explain import (
    Explanation,
    LimeTabularExplainer,
    OpenAPIExplainer,
    region_census,
    submodular_pick,
)


def _explanation(values, **fields):
    values = np.asarray(values, dtype=float)
    return Explanation(
        values=values,
        target=np.zeros(len(values), dtype=int),
        classes=None,
        feature_names=[f"f{j}" for j in range(values.shape[1])],
        method="demo",
        **fields,
    )


def _coverage(W, rows):
    importance = np.sqrt(np.abs(W).sum(axis=0))
    return importance[(np.abs(W[list(rows)]) > 0).any(axis=0)].sum()


# -- submodular pick -------------------------------------------------------------------
def test_submodular_pick_finds_the_known_best_pair():
    """Row 0 covers the two most important features, row 3 the rest; row 1
    repeats row 0 and row 2 covers less: the best pair is {0, 3}."""
    W = np.array(
        [
            [3.0, 3.0, 0.0, 0.0, 0.0],
            [2.0, 2.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, 1.0, 1.0],
        ]
    )
    pick = submodular_pick(_explanation(W), budget=2)
    assert_array_equal(pick.rows, [0, 3])
    assert pick.covered.all()
    assert_allclose(pick.coverage[-1], 1.0)
    assert_allclose(pick.importance, np.sqrt(np.abs(W).sum(axis=0)))
    best = max(itertools.combinations(range(4), 2), key=lambda r: _coverage(W, r))
    assert set(best) == {0, 3}
    # Coverage after each pick: the first row alone covers features 0 and 1.
    assert_allclose(pick.coverage[0], pick.importance[:2].sum() / pick.importance.sum())


def test_greedy_pick_is_within_the_submodular_bound_of_the_best():
    rng = np.random.default_rng(0)
    for _ in range(30):
        W = rng.exponential(size=(7, 6)) * (rng.random((7, 6)) < 0.35)
        for budget in (1, 2, 3):
            pick = submodular_pick(_explanation(W), budget)
            assert len(set(pick.rows)) == budget
            best = max(
                _coverage(W, rows)
                for rows in itertools.combinations(range(len(W)), budget)
            )
            got = _coverage(W, pick.rows)
            assert got >= (1 - 1 / np.e) * best - 1e-12
            if budget == 1:
                assert np.isclose(got, best)  # one greedy step is optimal


def test_submodular_pick_uses_what_each_explanation_selected():
    """A LIME explanation lists its selected features: those define what it
    covers, not the zeros elsewhere."""
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X, y)
    lime = LimeTabularExplainer(
        model, num_features=2, num_samples=500, random_state=0
    ).fit(X)
    e = lime.explain(X[::15])
    pick = submodular_pick(e, budget=3, attribution="slope")
    assert len(set(pick.rows.tolist())) == 3
    selected = [set(e.selected[r]) for r in pick.rows]
    covered = set().union(*selected)
    assert set(np.flatnonzero(pick.covered)) == covered
    # The first pick covers the most importance among single rows.
    gains = [pick.importance[list(set(s))].sum() for s in e.selected]
    assert np.isclose(gains[pick.rows[0]], max(gains))


def test_dense_explanations_are_cut_to_their_top_features():
    W = np.array([[5.0, 4.0, 0.1, 0.1], [0.1, 0.1, 3.0, 2.0]])
    pick = submodular_pick(_explanation(W), budget=1, top_k=2)
    assert_array_equal(pick.covered, [True, True, False, False])
    with pytest.raises(ValueError, match="budget"):
        submodular_pick(_explanation(W), budget=3)


# -- region census ---------------------------------------------------------------------
@pytest.mark.parametrize("reuse", [False, True])
def test_region_census_matches_the_leaves_of_a_tree(digits_lmt, reuse):
    """Rows share a certified model exactly when the tree sends them to leaves
    with the same logistic model."""
    lmt, X_fit, X = digits_lmt
    explainer = OpenAPIExplainer(lmt, random_state=0, reuse_regions=reuse)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.fit(X_fit).explain(X)
    census = region_census(e)
    exact = e.converged
    assert exact.mean() > 0.9
    assert_array_equal(census.labels[~exact], -1)
    leaves = lmt.apply(X)
    # Leaves whose models are identical (a child that did not boost keeps its
    # parent's model) are one linear model.
    key = {
        leaf: (lmt.leaf_coef_[leaf].tobytes(), lmt.leaf_intercept_[leaf].tobytes())
        for leaf in np.unique(leaves)
    }
    model_id = {k: i for i, k in enumerate(dict.fromkeys(key.values()))}
    truth = np.array([model_id[key[leaf]] for leaf in leaves])[exact]
    got = census.labels[exact]
    assert_array_equal(got[:, None] == got[None], truth[:, None] == truth[None])
    assert census.n_regions == len(np.unique(truth))
    assert census.counts.sum() == exact.sum()
    assert_array_equal(
        census.labels[census.representative], np.arange(census.n_regions)
    )


def test_region_census_needs_an_openapi_explanation():
    with pytest.raises(ValueError, match="OpenAPIExplainer"):
        region_census(_explanation(np.eye(2)))
