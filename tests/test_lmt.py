"""Tests of LogisticModelTreeClassifier."""

# SPDX-License-Identifier: BSD-3-Clause

import pickle

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import log_softmax, softmax
from sklearn.datasets import load_breast_cancer, load_iris, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from sklearn_plm_explain import LogisticModelTreeClassifier
from sklearn_plm_explain._lmt._logitboost import logitboost as _logitboost
from sklearn_plm_explain._lmt._split import best_split as _best_split


def _xor(n, seed, noise=0.0):
    """XOR of the signs of two features, with unequal quadrants.

    On a symmetric XOR every single-feature cut leaves both sides balanced,
    so C4.5's information gain (and Weka's LMT) never splits; shifting the
    range of the second feature makes the first split informative.
    """
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(-1, 1, n), rng.uniform(-0.4, 1, n)])
    y = ((X[:, 0] > 0) ^ (X[:, 1] > 0)).astype(int)
    flip = rng.random(n) < noise
    y[flip] = 1 - y[flip]
    return X, y


def _checkerboard(n, seed, n_classes, n_cells):
    """A grid of cells in the first two of three features, random cell classes."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, n_cells, size=(n, 3))
    cell_class = np.arange(n_cells * n_cells) % n_classes
    rng.shuffle(cell_class)
    cell = np.floor(X[:, 0]).astype(int) * n_cells + np.floor(X[:, 1]).astype(int)
    return X, cell_class[cell]


# --------------------------------------------------------------------------
# The exact local linear model.


@given(
    seed=st.integers(0, 2**32 - 1),
    layout=st.sampled_from(["xor", "checkerboard", "clusters"]),
    n_classes=st.integers(2, 4),
)
def test_local_linear_model_reproduces_predict_proba(seed, layout, n_classes):
    if layout == "xor":
        X, y = _xor(300, seed)
    elif layout == "checkerboard":
        X, y = _checkerboard(400, seed, n_classes, 3)
    else:
        X, y = make_classification(
            n_samples=300,
            n_features=5,
            n_informative=4,
            n_redundant=0,
            n_classes=n_classes,
            n_clusters_per_class=2,
            class_sep=2.0,
            random_state=seed % 2**31,
        )
    clf = LogisticModelTreeClassifier(prune=False, random_state=0).fit(X, y)
    # The property is about trees with several leaves; a draw whose classes
    # one logistic model separates well enough grows none.
    assume(clf.get_n_leaves() >= 2)

    rng = np.random.default_rng(seed)
    lo, hi = X.min(axis=0), X.max(axis=0)
    span = hi - lo
    # Rows inside the data range and well outside it.
    rows = rng.uniform(lo - span, hi + span, size=(50, X.shape[1]))
    W, b = clf.local_linear_model(rows)
    assert W.shape == (50, X.shape[1], clf.n_classes_)
    assert b.shape == (50, clf.n_classes_)
    proba = clf.predict_proba(rows)
    for i in range(rows.shape[0]):
        assert_allclose(softmax(rows[i] @ W[i] + b[i]), proba[i], rtol=0, atol=1e-12)
    # The rows land in several leaves, so several local models are tested.
    assert np.unique(clf.apply(rows)).size >= 2


def test_local_linear_model_binary_has_two_columns():
    X, y = _xor(300, 0)
    clf = LogisticModelTreeClassifier(random_state=0).fit(X, y)
    W, b = clf.local_linear_model(X[:5])
    assert W.shape == (5, 2, 2) and b.shape == (5, 2)
    F = np.einsum("nd,ndc->nc", X[:5], W) + b
    assert_allclose(F[:, 1] - F[:, 0], clf.decision_function(X[:5]), atol=1e-12)


def test_leaf_coef_matches_local_linear_model():
    X, y = _checkerboard(400, 1, 3, 3)
    clf = LogisticModelTreeClassifier(prune=False, random_state=0).fit(X, y)
    leaves = clf.apply(X)
    W, b = clf.local_linear_model(X)
    assert set(clf.leaf_coef_) == set(clf.leaf_intercept_) == set(np.unique(leaves))
    for leaf in np.unique(leaves):
        rows = leaves == leaf
        assert_array_equal(
            W[rows], np.broadcast_to(clf.leaf_coef_[leaf], W[rows].shape)
        )
        assert_array_equal(
            b[rows], np.broadcast_to(clf.leaf_intercept_[leaf], b[rows].shape)
        )


# --------------------------------------------------------------------------
# Strictly positive probabilities, log-probabilities from the logits.


@pytest.mark.parametrize("loader", ["breast_cancer", "iris", "clusters"])
def test_probabilities_strictly_positive_and_log_proba_from_logits(loader):
    if loader == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif loader == "iris":
        X, y = load_iris(return_X_y=True)
    else:
        X, y = make_classification(
            n_samples=400,
            n_features=6,
            n_informative=4,
            n_classes=4,
            n_clusters_per_class=2,
            random_state=0,
        )
    clf = LogisticModelTreeClassifier(random_state=0).fit(X, y)
    saw_underflow = False
    for Z in (X, X * 100):
        proba = clf.predict_proba(Z)
        log_proba = clf.predict_log_proba(Z)
        assert np.all(proba > 0)
        assert np.all(np.isfinite(proba)) and np.all(np.isfinite(log_proba))
        assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
        dec = clf.decision_function(Z)
        F = np.column_stack([np.zeros_like(dec), dec]) if dec.ndim == 1 else dec
        scale = np.abs(F).max(axis=1, keepdims=True) + 1.0
        # Equal up to the rounding of logits of this size.
        assert np.all(np.abs(log_proba - log_softmax(F, axis=1)) <= 1e-13 * scale)
        # Where exp does not underflow, the probabilities are exp(log_proba).
        normal = log_proba > np.log(np.finfo(np.float64).tiny)
        assert_allclose(proba[normal], np.exp(log_proba[normal]), rtol=1e-12)
        saw_underflow |= bool(np.any(~normal))
    # Far from the data the leaf models are extremely confident: the floor at
    # the smallest positive double is really exercised.
    assert saw_underflow


def test_probability_floor_far_outside():
    X, y = _xor(300, 3)
    clf = LogisticModelTreeClassifier(random_state=0).fit(X, y)
    far = np.array([[1e6, 1e6], [-1e6, 1e6], [1e300, -1e300]])
    proba = clf.predict_proba(far)
    assert np.all(proba > 0) and np.all(np.isfinite(proba))
    log_proba = clf.predict_log_proba(far)
    assert np.all(np.isfinite(log_proba))
    assert np.all(log_proba <= 0)


# --------------------------------------------------------------------------
# Tree inspection.


def test_apply_decision_path_depth_leaves_consistent():
    X, y = _checkerboard(500, 2, 3, 4)
    clf = LogisticModelTreeClassifier(prune=False, random_state=0).fit(X, y)
    tree = clf.tree_
    leaves = clf.apply(X)
    path = clf.decision_path(X)
    assert path.shape == (X.shape[0], tree.node_count)
    assert clf.get_n_leaves() >= 3 and clf.get_depth() >= 2
    # Every training row ends in a leaf, and every leaf holds training rows.
    assert np.all(tree.children_left[leaves] == -1)
    assert_array_equal(np.unique(leaves), np.flatnonzero(tree.children_left == -1))
    assert np.unique(leaves).size == clf.get_n_leaves()
    lengths = np.asarray(path.sum(axis=1)).ravel()
    assert lengths.max() - 1 == clf.get_depth()
    assert_array_equal(tree.depths[leaves] + 1, lengths)
    dense = path.toarray().astype(bool)
    assert np.all(dense[:, 0])
    assert np.all(dense[np.arange(X.shape[0]), leaves])
    # Consecutive nodes on each path follow the split tests.
    for node in np.flatnonzero(tree.children_left >= 0):
        at = dense[:, node]
        go_left = X[:, tree.feature[node]] <= tree.threshold[node]
        assert_array_equal(dense[:, tree.children_left[node]], at & go_left)
        assert_array_equal(dense[:, tree.children_right[node]], at & ~go_left)


def test_string_labels():
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"], dtype=object)[y]
    clf = LogisticModelTreeClassifier(random_state=0).fit(X, names)
    num = LogisticModelTreeClassifier(random_state=0).fit(X, y)
    assert_array_equal(clf.classes_, ["setosa", "versicolor", "virginica"])
    assert_array_equal(clf.predict(X), clf.classes_[num.predict(X)])
    assert_allclose(clf.predict_proba(X), num.predict_proba(X))
    assert clf.score(X, names) > 0.9


def test_single_class():
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = np.array(["only"] * 20)
    clf = LogisticModelTreeClassifier().fit(X, y)
    assert_array_equal(clf.predict(X), y)
    assert_array_equal(clf.predict_proba(X), np.ones((20, 1)))
    assert_array_equal(clf.predict_log_proba(X), np.zeros((20, 1)))
    W, b = clf.local_linear_model(X)
    assert W.shape == (20, 3, 1) and b.shape == (20, 1)


def test_pickle_roundtrip():
    X, y = _checkerboard(300, 4, 3, 3)
    clf = LogisticModelTreeClassifier(random_state=0).fit(X, y)
    again = pickle.loads(pickle.dumps(clf))
    assert_array_equal(again.predict_proba(X), clf.predict_proba(X))
    assert_array_equal(again.apply(X), clf.apply(X))
    assert again.get_n_leaves() == clf.get_n_leaves()


def test_pruning_reduces_or_keeps_leaves():
    datasets = [
        _xor(400, 5, noise=0.2),
        _checkerboard(500, 6, 2, 4),
        load_iris(return_X_y=True),
    ]
    reduced = False
    for X, y in datasets:
        full = LogisticModelTreeClassifier(prune=False, random_state=0).fit(X, y)
        pruned = LogisticModelTreeClassifier(prune=True, random_state=0).fit(X, y)
        assert pruned.get_n_leaves() <= full.get_n_leaves()
        assert pruned.get_depth() <= full.get_depth()
        # The pruned tree is the top of the unpruned one.
        kept = pruned.tree_
        for node in range(kept.node_count):
            if kept.children_left[node] >= 0:
                assert kept.feature[node] >= 0
        reduced |= pruned.get_n_leaves() < full.get_n_leaves()
    assert reduced


def test_beats_logistic_regression_on_xor():
    X, y = _xor(1000, 7, noise=0.05)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, random_state=0, stratify=y)
    lmt = LogisticModelTreeClassifier(random_state=0).fit(X_tr, y_tr)
    lr = LogisticRegression().fit(X_tr, y_tr)
    assert lmt.get_n_leaves() >= 2
    assert lmt.score(X_te, y_te) > 0.85
    assert lmt.score(X_te, y_te) > lr.score(X_te, y_te) + 0.1


# --------------------------------------------------------------------------
# Sample weights and folds.


def test_integer_weights_equal_repetition_with_default_folds():
    X, y = _checkerboard(120, 8, 3, 3)
    sw = np.random.default_rng(8).integers(0, 4, size=X.shape[0])
    rep = LogisticModelTreeClassifier(random_state=3, min_samples_split=15)
    wtd = LogisticModelTreeClassifier(random_state=3, min_samples_split=15)
    rep.fit(np.repeat(X, sw, axis=0), np.repeat(y, sw))
    perm = np.random.default_rng(1).permutation(X.shape[0])
    wtd.fit(X[perm], y[perm], sample_weight=sw[perm])
    assert rep.n_iter_ == wtd.n_iter_
    assert rep.get_n_leaves() == wtd.get_n_leaves()
    assert_allclose(rep.predict_proba(X), wtd.predict_proba(X), rtol=1e-7, atol=1e-9)


def test_row_order_does_not_matter():
    X, y = _checkerboard(300, 9, 3, 3)
    perm = np.random.default_rng(2).permutation(X.shape[0])
    a = LogisticModelTreeClassifier(random_state=0).fit(X, y)
    b = LogisticModelTreeClassifier(random_state=0).fit(X[perm], y[perm])
    assert a.n_iter_ == b.n_iter_
    assert_allclose(a.predict_proba(X), b.predict_proba(X), rtol=1e-7, atol=1e-9)


def test_fixed_and_cross_validated_iterations():
    X, y = load_iris(return_X_y=True)
    clf = LogisticModelTreeClassifier(random_state=0).fit(X, y)
    assert clf.n_iter_ == int(np.argmin(clf.cv_errors_))
    assert 1 <= clf.n_iter_ <= clf.max_iter
    fixed = LogisticModelTreeClassifier(n_iter=7, random_state=0).fit(X, y)
    assert fixed.n_iter_ == 7 and fixed.cv_errors_ is None
    assert fixed.tree_.n_boosting_iterations[0] == 7


# --------------------------------------------------------------------------
# The building blocks against straightforward re-derivations.


def test_one_logitboost_iteration_matches_explicit_simple_regressions():
    rng = np.random.default_rng(0)
    n, d, C = 60, 4, 3
    X = rng.normal(size=(n, d)) * [1.0, 10.0, 0.1, 3.0] + [0.0, 5.0, -2.0, 100.0]
    y = rng.integers(0, C, size=n)
    Y = y[:, None] == np.arange(C)
    sw = rng.uniform(0.5, 2.0, size=n)
    coef0 = rng.normal(size=(d, C)) * 0.1
    icpt0 = rng.normal(size=C)
    coef, icpt, n_done, _ = _logitboost(X, Y, sw, coef0, icpt0, 1)
    assert n_done == 1

    F = X @ coef0 + icpt0
    P = softmax(F, axis=1)
    f = np.zeros((n, C))
    for j in range(C):
        z = np.where(
            Y[:, j], np.minimum(1 / P[:, j], 3), np.maximum(-1 / (1 - P[:, j]), -3)
        )
        w = (Y[:, j] - P[:, j]) / z * sw
        best = np.inf
        for a in range(d):
            # Weighted least squares of z on one attribute, with intercept.
            A = np.column_stack([np.ones(n), X[:, a]])
            sol = np.linalg.lstsq(A * np.sqrt(w)[:, None], z * np.sqrt(w), rcond=None)[
                0
            ]
            sse = np.sum(w * (z - A @ sol) ** 2)
            if sse < best:
                best, f[:, j] = sse, A @ sol
    expected = F + (f - f.mean(axis=1, keepdims=True)) * (C - 1) / C
    assert_allclose(X @ coef + icpt, expected, rtol=1e-9, atol=1e-9)


def _gain_ratio_brute_force(x, y, w, n_classes, min_leaf):
    """Best (threshold index, gain ratio) of one feature, straight from C4.5."""

    def ent(weights):
        p = weights[weights > 0] / weights.sum()
        return -(p * np.log2(p)).sum()

    order = np.argsort(x, kind="stable")
    x, y, w = x[order], y[order], w[order]
    total = w.sum()
    class_w = np.bincount(y, weights=w, minlength=n_classes)
    min_split = max(min_leaf, min(0.1 * total / n_classes, 25))
    best = (-np.inf, None)
    n_cuts = 0
    for i in range(len(x) - 1):
        if x[i] == x[i + 1]:
            continue
        left = np.bincount(y[: i + 1], weights=w[: i + 1], minlength=n_classes)
        right = class_w - left
        if left.sum() < min_split or right.sum() < min_split:
            continue
        n_cuts += 1
        gain = (
            ent(class_w) - (left.sum() * ent(left) + right.sum() * ent(right)) / total
        )
        if gain > best[0] + 1e-12:
            best = (gain, i, left.sum())
    if best[1] is None:
        return None
    gain = best[0] - np.log2(n_cuts) / total
    split_info = ent(np.array([best[2], total - best[2]]))
    return gain, gain / split_info, (x[best[1]] + x[best[1] + 1]) / 2


def test_best_split_matches_brute_force_c45():
    rng = np.random.default_rng(1)
    n, d, C = 80, 5, 3
    X = np.round(rng.normal(size=(n, d)), 1)
    y = (X[:, 2] > 0.3).astype(int) + (X[:, 4] > 1.0)
    Yw = (y[:, None] == np.arange(C)) * 1.0
    feature, threshold = _best_split(X, Yw, C, 2, None)
    results = [_gain_ratio_brute_force(X[:, a], y, np.ones(n), C, 2) for a in range(d)]
    gains = np.array([r[0] if r else -np.inf for r in results])
    ratios = np.array([r[1] if r else -np.inf for r in results])
    eligible = np.isfinite(gains) & (gains >= gains[np.isfinite(gains)].mean() - 1e-3)
    expected = int(np.argmax(np.where(eligible, ratios, -np.inf)))
    assert feature == expected
    assert threshold == pytest.approx(results[expected][2])
    # Weka's default moves the cut down to an actual training value.
    feature_a, threshold_a = _best_split(X, Yw, C, 2, np.sort(X, axis=0))
    assert feature_a == feature
    assert threshold_a in X[:, feature]
    assert np.array_equal(X[:, feature] <= threshold_a, X[:, feature] <= threshold)


def test_feature_names_and_max_depth():
    pd = pytest.importorskip("pandas")
    X, y = _checkerboard(400, 10, 3, 3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    clf = LogisticModelTreeClassifier(max_depth=1, prune=False, random_state=0)
    clf.fit(frame, y)
    assert_array_equal(clf.feature_names_in_, ["a", "b", "c"])
    assert clf.get_depth() == 1 and clf.get_n_leaves() == 2
    deeper = LogisticModelTreeClassifier(prune=False, random_state=0).fit(frame, y)
    assert deeper.get_depth() > 1


def test_split_point_actual_value_or_midpoint():
    X, y = _checkerboard(400, 11, 2, 3)
    actual = LogisticModelTreeClassifier(prune=False, random_state=0).fit(X, y)
    mid = LogisticModelTreeClassifier(
        prune=False, split_point="midpoint", random_state=0
    ).fit(X, y)
    inner = actual.tree_.children_left >= 0
    assert inner.any()
    for node in np.flatnonzero(inner):
        assert actual.tree_.threshold[node] in X[:, actual.tree_.feature[node]]
    # Same partition of the training data, hence the same tree on it.
    assert_array_equal(actual.tree_.feature, mid.tree_.feature)
    assert_array_equal(actual.apply(X), mid.apply(X))
    assert not np.any(np.isin(mid.tree_.threshold[inner], X))


# --------------------------------------------------------------------------
# The early stop of the iteration cross-validation, as Weka counts it.


def _separable():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-5, 1, (40, 1)), rng.normal(5, 1, (40, 1))])
    y = np.repeat([0, 1], 40)
    return X, y


@pytest.mark.parametrize("k", [1, 2, 5])
def test_early_stop_counts_as_weka(k):
    from sklearn_plm_explain._lmt._logitboost import logitboost as _logitboost

    X, y = _separable()
    Y = y[:, None] == np.arange(2)
    start = np.zeros((1, 2)), np.zeros(2)
    # Iteration 0 errs on half the rows (all scores tie), every later one on
    # none: the minimum is reached at iteration 1 and never lowered again.
    # Weka continues while at most k iterations in a row failed to lower it,
    # and stops after the next: k + 2 iterations past the minimum.
    *_, n_done, errors = _logitboost(
        X, Y, np.ones(80), *start, 100, test=(X, y, np.ones(80)), n_iter_no_change=k
    )
    assert errors[0] == 0.5 and np.all(errors[1:] == 0)
    assert n_done == 1 + k + 2


def test_early_stop_watches_the_error_summed_over_folds():
    from sklearn_plm_explain._lmt._logitboost import logitboost as _logitboost

    X, y = _separable()
    Y = y[:, None] == np.arange(2)
    start = np.zeros((1, 2)), np.zeros(2)
    # Earlier folds whose summed error keeps falling: this fold's own error
    # stalls, but the sum does not, so it runs to the end.
    falling = np.linspace(1.0, 0.0, 31)
    *_, n_done, _ = _logitboost(
        X,
        Y,
        np.ones(80),
        *start,
        30,
        test=(X, y, np.ones(80)),
        n_iter_no_change=2,
        prior_errors=falling,
    )
    assert n_done == 30


def test_later_folds_boost_no_further_than_earlier_ones():
    X, y = _separable()
    lmt = LogisticModelTreeClassifier(n_iter_no_change=1, prune=False)
    lmt.fit(X, y)
    # Every fold stops 3 iterations past its minimum (iteration 1); the
    # errors compared are those every fold reached.
    assert lmt.cv_errors_.shape == (1 + 1 + 1 + 2,)
    assert lmt.n_iter_ == 1


def test_two_default_fits_grow_the_same_tree():
    # A default fit is reproducible: its folds come from a fixed seed, as
    # Weka's do. random_state=None draws new folds every fit.
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X, y = X[:600] / 16.0, y[:600]
    first = LogisticModelTreeClassifier().fit(X, y)
    second = LogisticModelTreeClassifier().fit(X, y)
    assert first.get_params()["random_state"] == 0
    assert first.get_n_leaves() == second.get_n_leaves()
    np.testing.assert_array_equal(first.predict_proba(X), second.predict_proba(X))
