"""Region reuse: rows of one linear region share one certified model."""

import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

from sklearn_plm_explain import (
    LogisticModelTreeClassifier,
    OpenAPIExplainer,
    decision_features,
    local_linear_model,
)
from sklearn_plm_explain._openapi._regions import N_PAIRS


def _explain(model, X_fit, X, **kw):
    kw.setdefault("reuse_regions", True)
    explainer = OpenAPIExplainer(model, random_state=0, **kw).fit(X_fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return explainer.explain(X)


def _rel_err(e, model, X):
    W, _ = local_linear_model(model, X)
    truth = decision_features(W, e.target)
    return np.abs(e.values - truth).sum(1) / np.abs(truth).sum(1)


def test_reuse_matches_per_row_solving_on_a_tree(digits_lmt):
    lmt, X_fit, X = digits_lmt
    alone = _explain(lmt, X_fit, X, reuse_regions=False)
    shared = _explain(lmt, X_fit, X)
    np.testing.assert_array_equal(shared.status, alone.status)
    # Pixels are multiples of 1/16 and so are some split points: the rows
    # that sit exactly on a split of their path are flagged, all others exact.
    on_split = _on_a_split(lmt, X)
    assert on_split.any()
    np.testing.assert_array_equal(shared.converged, ~on_split)
    # Same content: both exact against the leaf of each row.
    assert np.all(_rel_err(shared, lmt, X)[shared.converged] <= 1e-8)
    assert np.all(_rel_err(alone, lmt, X)[alone.converged] <= 1e-8)
    reused = shared.reused_from >= 0
    assert reused.mean() > 0.8
    # A reused model comes from a row in the same leaf.
    leaves = lmt.apply(X)
    np.testing.assert_array_equal(leaves[reused], leaves[shared.reused_from[reused]])
    # A fit costs d + 7 queries, a reused model 1 + 2 N_PAIRS (its probes
    # bound its error, see RegionLibrary.confirm): about a third of a fit
    # here, where pixels are multiples of 1/16 and many sit on a split.
    d = X.shape[1]
    assert shared.n_queries.mean() <= 0.35 * (d + 2)
    # The row itself and N_PAIRS antithetic pairs of probes (see
    # RegionLibrary.probe_radius): a reused model is confirmed to rtol.
    assert np.all(shared.n_queries[reused] == 1 + 2 * N_PAIRS)


def _on_a_split(lmt, X):
    tree = lmt.tree_
    path = lmt.decision_path(X).toarray().astype(bool)
    inner = tree.feature >= 0
    hit = np.zeros(len(X), dtype=bool)
    for node in np.flatnonzero(inner):
        hit |= path[:, node] & (X[:, tree.feature[node]] == tree.threshold[node])
    return hit


def test_reuse_is_the_same_whatever_the_jobs(digits_lmt):
    # Rows share regions within groups of GROUP_ROWS consecutive rows, which
    # are the same for any number of jobs: bitwise the same results.
    from joblib import parallel_config

    from sklearn_plm_explain._openapi._groups import GROUP_ROWS

    lmt, X_fit, X = digits_lmt
    assert len(X) > 2 * GROUP_ROWS
    ref = _explain(lmt, X_fit, X)
    with parallel_config(backend="threading"):
        two = _explain(lmt, X_fit, X, n_jobs=2)
    assert (ref.reused_from >= 0).mean() > 0.8
    for name in ref.fields:
        np.testing.assert_array_equal(getattr(two, name), getattr(ref, name), name)
    # A model is reused from the row's own group or from the first group,
    # whose models seed every group's; so later groups fit few rows.
    reused = np.flatnonzero(ref.reused_from >= 0)
    group, owner = reused // GROUP_ROWS, ref.reused_from[reused] // GROUP_ROWS
    assert np.all((owner == group) | (owner == 0))
    later = np.arange(len(X)) >= GROUP_ROWS
    assert (ref.reused_from[later] >= 0).mean() > (ref.reused_from[~later] >= 0).mean()


@pytest.mark.slow  # starts process workers
def test_reuse_content_independent_of_order_and_jobs(digits_lmt):
    lmt, X_fit, X = digits_lmt
    X = X[:120]
    ref = _explain(lmt, X_fit, X)
    np.testing.assert_array_equal(_explain(lmt, X_fit, X, n_jobs=2).coef, ref.coef)
    other = _explain(lmt, X_fit, X[::-1])[::-1]
    np.testing.assert_array_equal(other.status, ref.status)
    # Both within rtol of the truth, so within 2 rtol of each other.
    diff = np.abs(other.values - ref.values).sum(1)[ref.converged]
    assert np.all(diff <= 2e-8 * np.abs(ref.values).sum(1)[ref.converged])


def test_rows_on_a_split_threshold_are_exact_or_flagged():
    # Split points at actual values put training values exactly on thresholds.
    X, y = make_blobs(400, centers=4, n_features=3, cluster_std=2.0, random_state=1)
    X = np.round(X, 1)
    lmt = LogisticModelTreeClassifier(prune=False, random_state=0).fit(X, y)
    assert lmt.get_n_leaves() >= 2
    on = X[_on_a_split(lmt, X)]
    assert len(on) > 0
    for reuse in (True, False):
        e = _explain(lmt, X, on, reuse_regions=reuse)
        err = _rel_err(e, lmt, on)
        assert np.all(err[e.converged] <= 1e-8)


def test_reuse_changes_nothing_for_a_network():
    X, y = make_blobs(300, centers=3, n_features=6, cluster_std=3.0, random_state=0)
    mlp = MLPClassifier((16, 8), max_iter=800, random_state=0).fit(X, y)
    rows = X[:60]
    alone = _explain(mlp, X, rows, reuse_regions=False)
    shared = _explain(mlp, X, rows)
    np.testing.assert_array_equal(shared.status, alone.status)
    both = shared.converged
    diff = np.abs(shared.values - alone.values).sum(1)[both]
    assert np.all(diff <= 2e-8 * np.abs(alone.values).sum(1)[both])
    assert np.all(_rel_err(shared, mlp, rows)[both] <= 1e-8)


@given(
    seed=st.integers(0, 2**31 - 1),
    n_classes=st.integers(2, 4),
    reuse=st.booleans(),
    method=st.sampled_from(["auto", "predict_proba"]),
)
def test_openapi_on_random_trees_is_exact_or_flagged(seed, n_classes, reuse, method):
    # Clustered classes so that the unpruned tree keeps several leaves; rows
    # drawn at random and rows placed exactly on split points of the tree.
    X, y = make_blobs(
        300, centers=3 * n_classes, n_features=3, cluster_std=1.5, random_state=seed
    )
    y = y % n_classes
    lmt = LogisticModelTreeClassifier(prune=False, random_state=0).fit(X, y)
    assume(lmt.get_n_leaves() >= 2)
    rng = np.random.default_rng(seed)
    rows = rng.uniform(X.min(0), X.max(0), size=(20, 3))
    tree = lmt.tree_
    inner = np.flatnonzero(tree.feature >= 0)
    on_split = rows[: len(inner)].copy()
    on_split[np.arange(len(inner)), tree.feature[inner]] = tree.threshold[inner]
    rows = np.vstack([rows, on_split])
    e = _explain(lmt, X, rows, reuse_regions=reuse, response_method=method)
    W, _ = local_linear_model(lmt, rows)
    C = W.shape[2]
    for c in range(C):
        truth = decision_features(W, np.full(len(rows), c))
        est = C / (C - 1) * e.coef[:, :, c]
        rel = np.abs(est - truth).sum(1) / np.abs(truth).sum(1)
        assert np.all(rel[e.converged] <= 1e-8)
    # Rows away from every split are certified, unless (through probabilities)
    # a class probability is floored.
    floored = (lmt.predict_proba(rows) < np.finfo(float).tiny).any(axis=1)
    assert e.converged[~_on_a_split(lmt, rows) & ~floored].mean() >= 0.9


def test_a_reused_models_bound_covers_a_region_it_cannot_tell_apart():
    # Two regions whose slopes differ by 3e-10 (relative): too little for a
    # row's response or its probes to tell them apart, so rows of one reuse
    # models of the other. Their bound, from what their probes measured,
    # must cover that difference (the model's own bound, 1e-10, did not).
    rng = np.random.default_rng(0)
    d, C = 6, 3
    A, c = rng.standard_normal((d, C)), rng.standard_normal(C)
    n = rng.standard_normal(d)
    v = rng.standard_normal(C)
    v *= 3e-10 * np.abs(A).sum() / np.abs(np.outer(n, v)).sum()

    def proba(Z):
        logits = Z @ A + c + np.maximum(Z @ n, 0.0)[:, None] * v
        P = np.exp(logits - logits.max(axis=1, keepdims=True))
        return P / P.sum(axis=1, keepdims=True)

    X = rng.standard_normal((400, d))
    # Rows of the first region first: the library fills with its models.
    rows = np.vstack([X[X @ n < -0.5][:40], X[X @ n > 0.5][:80]])
    e = _explain(proba, X, rows)
    side = rows @ n > 0
    slopes = A[None] + side[:, None, None] * np.outer(n, v)[None]
    centred = slopes - slopes.mean(axis=2, keepdims=True)
    est = e.coef - e.coef.mean(axis=2, keepdims=True)
    err = (np.abs(est - centred).sum(axis=1) / np.abs(centred).sum(axis=1)).max(1)
    reused = e.reused_from >= 0
    across = reused & (side != side[np.maximum(e.reused_from, 0)])
    assert across.any() and reused.mean() >= 0.4
    # The owner's bound does not cover such a row: its own does.
    owner = e.reused_from[across]
    assert np.all(err[across] > e.error_bound[owner])
    assert np.all(e.status == "exact")
    assert np.all(err <= e.error_bound)
