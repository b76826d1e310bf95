"""The paper's measures: hand-computed values on tiny cases, and properties."""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.datasets import make_blobs, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_plm_explain import (
    Explanation,
    LogisticModelTreeClassifier,
    OpenAPIExplainer,
    decision_features,
    local_linear_model,
)
from sklearn_plm_explain.metrics import (
    UncertifiedRowsWarning,
    consistency_score,
    deletion_curve,
    jaccard_stability,
    l1_distance,
    region_difference,
    weight_difference,
)


def _quiet_explain(explainer, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return explainer.explain(X, **kw)


def _explanation(values, converged=None, status=None, target=None):
    values = np.asarray(values, dtype=float)
    rows = {}
    if converged is not None:
        rows["converged"] = np.asarray(converged)
    if status is not None:
        rows["status"] = np.asarray(status)
    return Explanation(
        values=values,
        target=np.zeros(len(values), int) if target is None else np.asarray(target),
        classes=np.array([0, 1]),
        feature_names=[f"x{j}" for j in range(values.shape[1])],
        method="demo",
        **rows,
    )


def _two_region_model(slope=1.0):
    """Logits ``(0, slope * max(x0, 0) + x1)``: regions x0 > 0 and x0 <= 0."""

    def local(X):
        X = np.asarray(X, dtype=float)
        W = np.zeros((len(X), 2, 2))
        W[:, 0, 1] = slope * (X[:, 0] > 0)
        W[:, 1, 1] = 1.0
        return W, np.zeros((len(X), 2))

    return local


@pytest.fixture(scope="module")
def small_mlp():
    X, y = make_blobs(400, n_features=5, centers=3, cluster_std=2.5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((12, 8), max_iter=400, random_state=0).fit(X, y)
    return mlp, X


# -- L1Dist ---------------------------------------------------------------------
def test_l1_distance_by_hand():
    D_true = [[1.0, -2.0, 0.0], [0.0, 1.0, 1.0]]
    D_pred = [[1.0, -1.5, 0.5], [0.0, 1.0, 1.0]]
    assert l1_distance(D_true, D_pred) == pytest.approx(0.5)
    np.testing.assert_allclose(l1_distance(D_true, D_pred, per_row=True), [1.0, 0.0])
    np.testing.assert_allclose(
        l1_distance(D_true, D_pred, per_row=True, relative=True), [1 / 3, 0.0]
    )


def test_l1_distance_leaves_out_flagged_rows_and_says_so():
    truth = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    e = _explanation(
        [[1.0, 1.0], [2.8e7, 0.0], [1.0, 2.0]],
        converged=[True, False, True],
        status=["exact", "boundary", "exact"],
    )
    with pytest.warns(UncertifiedRowsWarning, match=r"1 of 3 rows .*1 boundary"):
        assert l1_distance(truth, e) == pytest.approx(0.5)
    with pytest.warns(UncertifiedRowsWarning):
        per_row = l1_distance(truth, e, per_row=True)
    np.testing.assert_array_equal(np.isnan(per_row), [False, True, False])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert l1_distance(truth, e, uncertified="keep") == pytest.approx(
            (0 + 2.8e7 - 1 + 1 + 1) / 3
        )


def test_l1_distance_checks_shapes_and_options():
    with pytest.raises(ValueError, match="same shape"):
        l1_distance([[1.0, 2.0]], [[1.0]])
    with pytest.raises(InvalidParameterError):
        l1_distance([[1.0]], [[1.0]], uncertified="nan")


@given(
    arrays(np.float64, (4, 3), elements=st.floats(-1e3, 1e3)),
    arrays(np.float64, (4, 3), elements=st.floats(-1e3, 1e3)),
    arrays(np.float64, (4, 3), elements=st.floats(-1e3, 1e3)),
)
def test_l1_distance_is_a_metric(A, B, C):
    assert l1_distance(A, A) == 0
    assert l1_distance(A, B) == pytest.approx(l1_distance(B, A))
    ab, bc, ac = (l1_distance(P, Q, per_row=True) for P, Q in ((A, B), (B, C), (A, C)))
    assert np.all(ac <= ab + bc + 1e-9)


@given(seed=st.integers(0, 2**16), d=st.integers(2, 8), C=st.integers(2, 5))
def test_l1_distance_of_certified_rows_is_zero(seed, d, C):
    # OpenAPI's certified rows carry the ground truth to rtol: L1Dist is 0 up
    # to rtol times the size of the decision features.
    C = min(C, 2**d)  # make_classification needs C <= 2 ** n_informative
    X, y = make_classification(
        120,
        d,
        n_informative=d,
        n_redundant=0,
        n_classes=C,
        n_clusters_per_class=1,
        random_state=seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((8,), max_iter=80, random_state=seed).fit(X, y)
    e = _quiet_explain(OpenAPIExplainer(mlp, random_state=seed).fit(X), X[:15])
    W, _ = local_linear_model(mlp, X[:15])
    truth = decision_features(W, e.target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedRowsWarning)
        rel = l1_distance(truth, e, relative=True, per_row=True)
    certified = ~e.flagged
    assert np.all(rel[certified] <= 1e-7)
    assert np.all(np.isnan(rel[~certified]))


# -- RD and WD ------------------------------------------------------------------
def test_region_difference_by_hand():
    local = _two_region_model()
    X = np.array([[1.0, 0.0], [0.01, 0.0]])
    queries = [
        [[1.1, 0.3], [0.9, -0.2], [1.05, 0.0]],  # all in x0 > 0
        [[0.02, 0.0], [-0.02, 0.0], [0.0, 1.0], [0.5, 0.5]],  # 2 of 4 leave
    ]
    np.testing.assert_array_equal(
        region_difference(local, X, queries, per_row=True), [0.0, 1.0]
    )
    np.testing.assert_allclose(
        region_difference(local, X, queries, kind="share", per_row=True), [0.0, 0.5]
    )
    assert region_difference(local, X, queries) == 0.5


def test_weight_difference_by_hand():
    # Two classes, class 1 explained: D_{1,0} is (slope * [x0 > 0], 1); a point
    # in the other region differs by |slope| in one feature; WD averages over
    # points and divides by C - 1 = 1.
    local = _two_region_model(slope=3.0)
    X = np.array([[0.01, 0.0]])
    queries = [[[0.02, 0.0], [-0.02, 0.0], [-0.5, 0.0], [0.5, 1.0]]]
    assert weight_difference(local, X, queries, target=[1]) == pytest.approx(
        (0 + 3 + 3 + 0) / 4
    )
    # For class 0, D_{0,1} = -D_{1,0}: the same distance.
    assert weight_difference(local, X, queries, target=[0]) == pytest.approx(1.5)


def test_weight_difference_three_classes_by_hand():
    # W^0 has columns (0, a, b), a point's W^i has (0, a, b'): for c = 1 the
    # pairs c' = 0, 1, 2 give |0|, 0, |b - b'|; WD = |b - b'| / (C - 1).
    def local(X):
        X = np.asarray(X, dtype=float)
        W = np.zeros((len(X), 1, 3))
        W[:, 0, 1] = 2.0
        W[:, 0, 2] = np.where(X[:, 0] > 0, 5.0, 1.0)
        return W, np.zeros((len(X), 3))

    wd = weight_difference(local, [[1.0]], [[[-1.0]]], target=[1])
    assert wd == pytest.approx(abs(5.0 - 1.0) / 2)
    # c = 2: pairs (2, 0): |5 - 1|, (2, 1): |5 - 1|, (2, 2): 0.
    assert weight_difference(local, [[1.0]], [[[-1.0]]], target=[2]) == pytest.approx(
        (4 + 4) / 2
    )


def _reference_wd(W0, Wi, c):
    """The paper's formula, written out with explicit loops."""
    C = W0.shape[1]
    total = 0.0
    for Wp in Wi:
        for cp in range(C):
            total += np.abs((W0[:, c] - W0[:, cp]) - (Wp[:, c] - Wp[:, cp])).sum()
    return total / ((C - 1) * len(Wi))


@given(seed=st.integers(0, 2**16), C=st.integers(2, 5), m=st.integers(1, 6))
def test_weight_difference_matches_the_formula(seed, C, m):
    rng = np.random.default_rng(seed)
    d = 3
    table = rng.normal(size=(m + 1, d, C))

    def local(X):
        idx = np.asarray(X)[:, 0].astype(int)
        return table[idx], np.zeros((len(idx), C))

    X = np.zeros((1, d))
    points = np.column_stack([np.arange(1, m + 1), np.zeros((m, d - 1))])
    c = int(rng.integers(C))
    wd = weight_difference(local, X, [points], target=[c])
    assert wd == pytest.approx(_reference_wd(table[0], table[1:], c))


@given(seed=st.integers(0, 2**16), C=st.integers(2, 4))
def test_one_region_models_have_zero_rd_and_wd(seed, C):
    X, y = make_classification(
        80,
        4,
        n_informative=4,
        n_redundant=0,
        n_classes=C,
        n_clusters_per_class=1,
        random_state=seed,
    )
    model = LogisticRegression(max_iter=500).fit(X, y)
    rng = np.random.default_rng(seed)
    queries = [x + rng.normal(scale=3.0, size=(5, 4)) for x in X[:6]]
    assert region_difference(model, X[:6], queries) == 0
    assert weight_difference(model, X[:6], queries) == pytest.approx(0, abs=1e-12)


def test_openapi_certified_cubes_stay_in_their_region(small_mlp):
    # RD = 0 and WD = 0 for every certified row, from the queries OpenAPI
    # reports: its certified cube lies inside the row's linear region.
    mlp, X = small_mlp
    e = _quiet_explain(
        OpenAPIExplainer(mlp, random_state=0).fit(X), X[:40], return_queries=True
    )
    assert (~e.flagged).sum() >= 35
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedRowsWarning)
        assert region_difference(mlp, X[:40], e) == 0
        assert weight_difference(mlp, X[:40], e) == 0


def test_region_difference_on_a_tree_reads_the_leaves():
    X, y = make_classification(300, 4, n_informative=3, n_redundant=0, random_state=0)
    lmt = LogisticModelTreeClassifier(
        prune=False, max_depth=1, min_samples_split=20, random_state=0
    ).fit(X, y)
    f, t = lmt.tree_.feature[0], lmt.tree_.threshold[0]
    x = np.zeros((1, 4))
    x[0, f] = t - 0.5
    inside, across = x + 0.1 * np.eye(4)[[f]], x + 1.0 * np.eye(4)[[f]]
    assert region_difference(lmt, x, [inside]) == 0
    assert region_difference(lmt, x, [across]) == 1
    assert weight_difference(lmt, x, [across]) > 0


def test_region_metrics_need_queries():
    e = _explanation([[1.0, 2.0]])
    with pytest.raises(ValueError, match="return_queries=True"):
        region_difference(_two_region_model(), [[1.0, 0.0]], e)


def test_rows_without_points_are_not_averaged():
    local = _two_region_model()
    rd = region_difference(
        local, [[1.0, 0.0], [-1.0, 0.0]], [np.empty((0, 2)), [[1.0, 1.0]]], per_row=True
    )
    assert np.isnan(rd[0]) and rd[1] == 1.0


# -- CS -------------------------------------------------------------------------
def test_consistency_score_by_hand():
    X = [[0.0, 0.0], [0.0, 0.1], [3.0, 3.0], [3.0, 3.2]]
    V = [[1.0, 0.0], [1.0, 1.0], [0.0, -2.0], [0.0, 0.0]]
    cs = consistency_score(X, V, per_row=True)
    # Neighbours: 0<->1, 2<->3; the zero explanation is orthogonal to all.
    np.testing.assert_allclose(cs, [np.sqrt(0.5), np.sqrt(0.5), 0.0, 0.0])
    assert consistency_score(X, V) == pytest.approx(np.sqrt(0.5) / 2)
    assert consistency_score([[0.0], [1.0]], [[0.0, 0.0], [0.0, 0.0]]) == 1.0


def test_consistency_score_identical_rows_are_neighbours():
    cs = consistency_score(
        [[1.0], [1.0], [9.0]], [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], per_row=True
    )
    np.testing.assert_allclose(cs[:2], [0.0, 0.0])


def test_consistency_score_drops_flagged_rows_as_neighbours_too():
    X = [[0.0], [0.1], [0.3]]
    e = _explanation(
        [[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]], converged=[True, False, True]
    )
    with pytest.warns(UncertifiedRowsWarning, match="1 of 3"):
        cs = consistency_score(X, e, per_row=True)
    np.testing.assert_allclose(cs, [1.0, np.nan, 1.0])


@given(seed=st.integers(0, 2**16), d=st.integers(2, 6))
def test_rows_of_one_region_have_consistency_one(seed, d):
    # A logistic regression is one linear region: the true decision features
    # of one class are the same at every row.
    X, y = make_classification(
        60,
        d,
        n_informative=d,
        n_redundant=0,
        n_classes=3,
        n_clusters_per_class=1,
        random_state=seed,
    )
    model = LogisticRegression(max_iter=500).fit(X, y)
    W, _ = local_linear_model(model, X)
    D = decision_features(W, np.full(len(X), 1))
    assert consistency_score(X, D) == pytest.approx(1.0)


# -- CPP and NLCI ---------------------------------------------------------------
def _sigmoid_model(w, b=0.0):
    w = np.asarray(w, dtype=float)

    def proba(X):
        p = 1 / (1 + np.exp(-(np.asarray(X) @ w + b)))
        return np.column_stack([1 - p, p])

    return proba


def test_deletion_curve_by_hand():
    model = _sigmoid_model([4.0, -1.0, 0.0])
    X = np.array([[1.0, 0.5, 0.5]])
    D = np.array([[4.0, -1.0, 0.0]])
    curve = deletion_curve(model, X, D, k=3, bounds=(0.0, 1.0))
    p0 = 1 / (1 + np.exp(-3.5))
    expected = [p0 - 1 / (1 + np.exp(0.5)), p0 - 1 / (1 + np.exp(1.0))]
    # k = 1: x0 (weight 4) -> 0; k = 2: also x1 (weight -1) -> 1; k = 3: the
    # zero-weight feature is left as it is.
    np.testing.assert_allclose(curve.cpp, expected + expected[-1:])
    np.testing.assert_array_equal(curve.k, [1, 2, 3])
    np.testing.assert_array_equal(curve.nlci, [1, 1, 1])
    assert curve.n_rows == 1


def test_deletion_curve_bounds_from_background_data():
    model = _sigmoid_model([1.0, 1.0])
    X = np.array([[0.2, 0.5], [0.6, 0.9]])
    background = np.array([[0.2, 0.0], [1.0, 1.0]])
    curve = deletion_curve(model, X, [[1.0, 0.0], [1.0, 0.0]], k=[1], bounds=background)
    # x0 goes to min over the background = 0.2; the first row does not move.
    p = model(np.array([[0.2, 0.9]]))[0, 1]
    np.testing.assert_allclose(curve.cpp_per_row[:, 0], [0.0, model(X[1:])[0, 1] - p])


def test_a_rows_deletion_score_does_not_depend_on_its_batch():
    rng = np.random.default_rng(0)
    model = _sigmoid_model([1.0, -2.0, 0.5])
    X = rng.uniform(0, 1, (20, 3))
    D = rng.standard_normal((20, 3))
    background = rng.uniform(-1, 2, (50, 3))
    whole = deletion_curve(model, X, D, k=3, bounds=background)
    for batch in (slice(0, 1), slice(3, 9), slice(10, 20)):
        part = deletion_curve(model, X[batch], D[batch], k=3, bounds=background)
        np.testing.assert_array_equal(part.cpp_per_row, whole.cpp_per_row[batch])


def test_deletion_curve_refuses_to_guess_its_bounds():
    model = _sigmoid_model([1.0, 1.0])
    with pytest.raises(ValueError, match="needs bounds"):
        deletion_curve(model, [[0.2, 0.5]], [[1.0, 0.0]], k=1)
    with pytest.raises(ValueError, match="2 columns"):
        deletion_curve(model, [[0.2, 0.5]], [[1.0, 0.0]], k=1, bounds=np.zeros((3, 3)))


def test_deletion_curve_uses_the_explanation_target_and_flags():
    model = _sigmoid_model([1.0, -1.0])
    X = np.array([[0.5, 0.5], [0.9, 0.1]])
    e = _explanation([[1.0, -1.0], [1.0, -1.0]], converged=[True, False], target=[0, 1])
    with pytest.warns(UncertifiedRowsWarning):
        curve = deletion_curve(model, X, e, k=2, bounds=(0.0, 1.0))
    assert curve.n_rows == 1 and np.isnan(curve.cpp_per_row[1]).all()
    # Row 0 watches class 0's probability: at (0, 1) p_0 = sigmoid(1).
    np.testing.assert_allclose(curve.cpp_per_row[0, 1], 1 / (1 + np.exp(-1)) - 0.5)


@given(seed=st.integers(0, 2**16), d=st.integers(2, 8))
def test_true_decision_features_lower_the_probability_monotonically(seed, d):
    # For a linear model, altering one more top feature against the class
    # can only lower its logit: CPP never decreases with k, and zero
    # attributions change nothing.
    X, y = make_classification(50, d, n_informative=d, n_redundant=0, random_state=seed)
    model = LogisticRegression().fit(X, y)
    W, _ = local_linear_model(model, X)
    target = model.predict(X)
    D = decision_features(W, target)
    curve = deletion_curve(model, X, D, bounds=X)
    assert np.all(np.diff(curve.cpp_per_row, axis=1) >= -1e-12)
    assert np.all(np.diff(curve.nlci) >= 0)
    zero = deletion_curve(model, X, np.zeros_like(D), bounds=X)
    # Unchanged rows: only the model's batch rounding moves p_c.
    assert np.all(zero.cpp <= 1e-12) and np.all(zero.nlci == 0)


# -- Jaccard@k ------------------------------------------------------------------
def test_jaccard_stability_by_hand():
    assert jaccard_stability([[0, 1, 2], [1, 0, 3]], k=2) == 1.0
    assert jaccard_stability([[0, 1, 2], [1, 0, 3]], k=3) == 0.5
    # Three runs: pairs (A, B) = 1/3, (A, C) = 1, (B, C) = 1/3.
    assert jaccard_stability([[0, 1], [0, 2], [1, 0]], k=2) == pytest.approx(5 / 9)
    with pytest.raises(InvalidParameterError):
        jaccard_stability([[0], [1]], k=0)


def test_jaccard_stability_of_explanations_ranks_by_weight():
    # LARS entered feature 2 first in both runs, but by |weight| the top
    # feature is 0 in one run and 1 in the other: J@1 is 0, not 1.
    def run(values, selected):
        return Explanation(
            values=np.array([values], dtype=float),
            target=[0],
            classes=[0, 1],
            feature_names=["a", "b", "c", "d"],
            method="lime",
            selected=np.array([selected]),
        )

    a = run([0.9, 0.5, 0.1, 0.0], [2, 0, 1])
    b = run([0.5, -0.9, 0.1, 0.0], [2, 1, 0])
    assert jaccard_stability([a, b], k=1) == 0.0
    assert jaccard_stability([a, b], k=2) == 1.0
    # The entry order, as indices, would have said the top feature agrees.
    assert jaccard_stability([a.selected[0], b.selected[0]], k=1) == 1.0
    # Without a selection, every feature with a nonzero weight competes.
    plain = [_explanation([[0.0, 2.0, -3.0]]), _explanation([[1.0, -5.0, 0.0]])]
    assert jaccard_stability(plain, k=1) == 0.0
    assert jaccard_stability(plain, k=2) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="one row"):
        jaccard_stability([_explanation(np.ones((2, 3)))] * 2, k=1)


@given(
    st.lists(
        st.lists(st.integers(0, 9), min_size=4, max_size=4, unique=True),
        min_size=2,
        max_size=6,
    ),
    st.integers(1, 4),
)
def test_jaccard_stability_properties(sets, k):
    j = jaccard_stability(sets, k)
    assert 0.0 <= j <= 1.0
    assert jaccard_stability([sets[0]] * 3, k) == 1.0
    # Independent of the order of the repetitions and within the top k.
    for perm in itertools.islice(itertools.permutations(sets), 3):
        shuffled = [list(s[:k][::-1]) + list(s[k:]) for s in perm]
        assert jaccard_stability(shuffled, k) == pytest.approx(j)
