"""OpenAPIExplainer: exactness against white-box ground truth, and honesty."""

import json
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_iris, make_blobs
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.svm import SVC

from sklearn_plm_explain import (
    STATUSES,
    Explanation,
    ModelResponseError,
    OpenAPIExplainer,
    decision_features,
    local_linear_model,
)
from sklearn_plm_explain._openapi._results import ResultTable

RTOL = 1e-8


def _rel_l1_all_classes(explanation, model, X):
    """Worst relative L1 error of D_c over all classes, per row."""
    W, _ = local_linear_model(model, X)
    C = W.shape[2]
    errors = []
    for c in range(C):
        target = np.full(len(X), c)
        truth = decision_features(W, target)
        est = C / (C - 1) * explanation.coef[:, :, c]
        num = np.abs(est - truth).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            errors.append(num / np.abs(truth).sum(axis=1))
    return np.max(errors, axis=0)


def _quiet_explain(explainer, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return explainer.explain(X, **kw)


def _random_relu_mlp(seed, d, C, layers):
    X, y = make_blobs(
        n_samples=300, centers=C, n_features=d, cluster_std=3.0, random_state=seed
    )
    rng = np.random.default_rng(seed)
    sizes = tuple(int(v) for v in rng.integers(4, 24, size=layers))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier(sizes, max_iter=60, random_state=seed).fit(X, y)
    return mlp, X


# -- exactness: property tests ----------------------------------------------------
@given(
    seed=st.integers(0, 2**16),
    d=st.integers(2, 40),
    C=st.integers(2, 8),
    layers=st.integers(1, 3),
)
def test_relu_mlp_exact_rows_are_exact(seed, d, C, layers):
    # Every row reported exact matches the white-box local model for every
    # class; most rows that still respond to their input are certified (the
    # 95 % share is checked on a larger fixed sample below).
    exact, responsive = _check_random_mlp(seed, d, C, layers)
    assert exact >= 0.8 * responsive


def _check_random_mlp(seed, d, C, layers):
    mlp, X = _random_relu_mlp(seed, d, C, layers)
    rows = X[np.random.default_rng(seed + 1).choice(len(X), 20, replace=False)]
    e = _quiet_explain(OpenAPIExplainer(mlp, random_state=seed).fit(X), rows)
    err = _rel_l1_all_classes(e, mlp, rows)
    assert np.all(err[e.converged] <= RTOL)
    assert set(e.status) <= set(STATUSES)
    np.testing.assert_array_equal(e.converged, e.status == "exact")
    assert np.all(e.values[e.status == "flat"] == 0)
    responsive = ~np.isin(e.status, ["saturated", "flat"])
    return e.converged.sum(), responsive.sum()


@pytest.mark.slow
def test_relu_mlp_share_of_exact_rows():
    # 24 random networks spanning the property test's ranges, 480 rows.
    rng = np.random.default_rng(2026)
    totals = np.zeros(2)
    for k in range(24):
        d, C, layers = rng.integers(2, 41), rng.integers(2, 9), rng.integers(1, 4)
        totals += _check_random_mlp(1000 + k, int(d), int(C), int(layers))
    assert totals[0] >= 0.95 * totals[1]


@given(seed=st.integers(0, 2**16), d=st.integers(2, 30), C=st.integers(2, 6))
def test_logistic_regression_and_affine_pipelines_are_exact(seed, d, C):
    _check_affine_models(seed, d, C)


@pytest.mark.slow
def test_affine_models_share_of_exact_rows():
    rng = np.random.default_rng(7)
    totals = np.zeros(2)
    for k in range(8):
        d, C = int(rng.integers(2, 31)), int(rng.integers(2, 7))
        totals += _check_affine_models(500 + k, d, C)
    assert totals[0] >= 0.95 * totals[1]


def _check_affine_models(seed, d, C):
    totals = np.zeros(2)
    X, y = make_blobs(
        n_samples=200, centers=C, n_features=d, cluster_std=3.0, random_state=seed
    )
    X = X * np.random.default_rng(seed).uniform(0.1, 50, size=d)  # mixed scales
    # Newton's method: lbfgs crawls for thousands of iterations on these
    # unscaled, nearly separable blobs, and the fitted model is what is
    # explained either way.
    newton = {"solver": "newton-cholesky", "max_iter": 100}
    models = [
        LogisticRegression(**newton),
        make_pipeline(
            StandardScaler(), PCA(max(1, d // 2)), LogisticRegression(**newton)
        ),
        make_pipeline(
            MinMaxScaler(), MLPClassifier((12,), max_iter=100, random_state=seed)
        ),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for model in models:
            model.fit(X, y)
    rows = X[:15]
    for model in models:
        for method in ("auto", "predict_proba"):
            explainer = OpenAPIExplainer(model, response_method=method, random_state=0)
            e = _quiet_explain(explainer.fit(X), rows)
            err = _rel_l1_all_classes(e, model, rows)
            assert np.all(err[e.converged] <= RTOL)
            responsive = ~np.isin(e.status, ["saturated", "flat"])
            assert e.converged.sum() >= 0.8 * responsive.sum()
            totals += (e.converged.sum(), responsive.sum())
    return totals


@pytest.mark.slow
def test_digits_mlp_every_row_matches_ground_truth():
    from sklearn_plm_explain.utils._anchors import make_anchor_model

    anchor = make_anchor_model("digits_mlp")
    rows = anchor.X_test[:60]
    explainer = OpenAPIExplainer(anchor.model, random_state=0).fit(anchor.X_train)
    e = _quiet_explain(explainer, rows)
    err = _rel_l1_all_classes(e, anchor.model, rows)
    assert np.all(err[e.converged] <= RTOL)
    assert e.converged.mean() >= 0.95
    # values are the decision features of the predicted class.
    W, _ = local_linear_model(anchor.model, rows)
    predicted = anchor.model.predict_proba(rows).argmax(axis=1)
    np.testing.assert_array_equal(e.target, predicted)
    truth = decision_features(W, predicted)
    rel = np.abs(e.values - truth).sum(1) / np.abs(truth).sum(1)
    assert np.all(rel[e.converged] <= RTOL)


def test_regressor_values_are_the_local_gradient():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg = MLPRegressor(hidden_layer_sizes=(16,), max_iter=200, random_state=0)
        reg.fit(X, y)
    e = _quiet_explain(OpenAPIExplainer(reg, random_state=0).fit(X), X[:20])
    assert e.classes is None and e.coef.shape == (20, X.shape[1], 1)
    W, _ = local_linear_model(reg, X[:20])
    rel = np.abs(e.values - W[:, :, 0]).sum(1) / np.abs(W[:, :, 0]).sum(1)
    assert e.converged.mean() >= 0.9
    assert np.all(rel[e.converged] <= RTOL)


# -- never a silent wrong answer --------------------------------------------------
def _binary_lr():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return LogisticRegression(max_iter=5000).fit(X, y), X


def _rows_at_logits(lr, X, logits):
    # Move a row along the weight vector until the logit takes each value.
    w, b = lr.coef_[0], lr.intercept_[0]
    x = X[0]
    z0 = x @ w + b
    return np.array([x + (z - z0) * w / (w @ w) for z in logits])


def test_saturated_binary_probabilities_are_never_exact_and_wrong():
    lr, X = _binary_lr()
    logits = np.array([-60, -45, -40, -30, -25, -20, 20, 25, 30, 35, 40, 45, 60.0])
    rows = _rows_at_logits(lr, X, logits)
    np.testing.assert_allclose(lr.decision_function(rows), logits, rtol=1e-9)
    explainer = OpenAPIExplainer(lr, response_method="predict_proba", random_state=0)
    with pytest.warns(ConvergenceWarning, match="not certified exact"):
        e = explainer.fit(X).explain(rows)
    err = _rel_l1_all_classes(e, lr, rows)
    assert np.all(err[e.converged] <= RTOL)
    # p0 = 1 - p1 is exactly 0 from logit ~37 on: nothing to take a log of.
    assert np.all(e.status[logits >= 40] == "saturated")
    # In the band where 1 - p1 cancels, rows are flagged, not exact.
    assert not e.converged[(logits >= 30) & (logits < 40)].any()


def test_binary_mlp_without_decision_function_flags_saturated_rows():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    mlp = MLPClassifier((16,), max_iter=1000, random_state=0).fit(X, y)
    rows = np.vstack([X[:20], 4 * X[:20], 12 * X[:20]])  # push the logits out
    e = _quiet_explain(OpenAPIExplainer(mlp, random_state=0).fit(X), rows)
    assert e.converged.any() and not e.converged.all()
    err = _rel_l1_all_classes(e, mlp, rows)
    assert np.all(err[e.converged] <= RTOL)


def test_pinned_probabilities_are_saturated_not_flat():
    # In the band where p0 = 1 - p1 rounds to a few values, a cube can see
    # bitwise identical responses: that is saturation, not a dead region.
    lr, X = _binary_lr()
    logits = np.array([32.0, 34.0, 36.0, 37.0])
    rows = _rows_at_logits(lr, X, logits)
    explainer = OpenAPIExplainer(lr, response_method="predict_proba", random_state=0)
    e = _quiet_explain(explainer.fit(X), rows)
    np.testing.assert_array_equal(e.status, ["saturated"] * 4)


def test_floored_or_clipped_probabilities_are_never_exact_and_wrong():
    from sklearn.datasets import make_classification

    from sklearn_plm_explain import LogisticModelTreeClassifier

    X, y = make_classification(
        500,
        5,
        n_informative=4,
        n_redundant=0,
        n_clusters_per_class=3,
        n_classes=3,
        random_state=1,
    )
    # The tree floors its probabilities at the smallest positive double, so
    # that none is ever 0: through predict_proba those rows are saturated.
    lmt = LogisticModelTreeClassifier(random_state=0, prune=False).fit(X, y)
    rows = np.vstack([X[:100], 20 * X[:100]])
    e = _quiet_explain(
        OpenAPIExplainer(lmt, response_method="predict_proba", random_state=0).fit(X),
        rows,
    )
    floored = (lmt.predict_proba(rows) < np.finfo(float).tiny).any(axis=1)
    assert floored.any() and not e.converged[floored].any()
    assert np.all(_rel_l1_all_classes(e, lmt, rows)[e.converged] <= RTOL)
    assert e.converged.sum() > 100
    # A black box that clips its probabilities at 1e-15.
    mlp, Xb = _bc_mlp_small()
    clipped = lambda Z: np.clip(mlp.predict_proba(Z), 1e-15, 1.0)  # noqa: E731
    rows = np.vstack([Xb[:40], 5 * Xb[:40]])
    e = _quiet_explain(OpenAPIExplainer(clipped, random_state=0).fit(Xb), rows)
    assert np.all(_rel_l1_all_classes(e, mlp, rows)[e.converged] <= RTOL)
    assert (e.status == "saturated").any()


def test_multi_output_regressor_is_refused_in_fit():
    X, y = load_breast_cancer(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg = MLPRegressor(hidden_layer_sizes=(4,), max_iter=20).fit(
            X, np.column_stack([y, y])
        )
    with pytest.raises(ValueError, match="Multi-output"):
        OpenAPIExplainer(reg).fit(X)


@pytest.mark.parametrize("kind", ["tanh_mlp", "svc"])
def test_non_piecewise_linear_models_are_not_certified(kind):
    X, y = load_iris(return_X_y=True)
    if kind == "tanh_mlp":
        model = MLPClassifier((16,), activation="tanh", max_iter=3000, random_state=0)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            model = SVC(probability=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model.fit(X, y)
    explainer = OpenAPIExplainer(model, random_state=0).fit(X)
    with pytest.warns(ConvergenceWarning, match="not certified exact"):
        e = explainer.explain(X[::15])
    assert not e.converged.any()
    assert np.all(e.status == "not_piecewise_linear")


def test_decision_function_explains_far_beyond_probability_saturation():
    lr, X = _binary_lr()
    rows = _rows_at_logits(lr, X, [-50.0, 50.0])
    explainer = OpenAPIExplainer(lr, random_state=0).fit(X)
    assert explainer.response_method_ == "decision_function"
    e = explainer.explain(rows)
    assert np.all(e.status == "exact")
    assert np.all(_rel_l1_all_classes(e, lr, rows) <= RTOL)


# -- bad input and misbehaving models ---------------------------------------------
@pytest.fixture(scope="module")
def iris_model():
    X, y = load_iris(return_X_y=True)
    return LogisticRegression(max_iter=1000).fit(X, y), X


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.array([[1.0, np.nan, 1.0, 1.0]]), "NaN"),
        (np.array([[1.0, np.inf, 1.0, 1.0]]), "infinity"),
        (np.ones((2, 3)), "3 features"),
        (np.empty((0, 4)), "0 sample"),
        (np.array([["a", "b", "c", "d"]], dtype=object), "could not convert"),
    ],
)
def test_bad_input_raises_before_any_query(iris_model, counting, bad, match):
    model, X = iris_model
    fn = counting(model.predict_proba)
    explainer = OpenAPIExplainer(fn, random_state=0).fit(X)
    calls = fn.calls
    with pytest.raises(ValueError, match=match):
        explainer.explain(bad)
    assert fn.calls == calls


def test_unknown_target_raises_before_any_query(iris_model, counting):
    model, X = iris_model
    fn = counting(model.predict_proba)
    explainer = OpenAPIExplainer(fn).fit(X)
    calls = fn.calls
    with pytest.raises(ValueError, match="Unknown target"):
        explainer.explain(X[:2], target=7)
    assert fn.calls == calls


def _misbehaving(model, how):
    def fn(Z):
        P = model.predict_proba(Z)
        hit = Z[:, 0] > 7.0  # only the queries around the long-sepal rows
        if how == "nan":
            P[hit, 0] = np.nan
        elif how == "negative":
            P[hit, 0] = -0.1
        elif how == "sum":
            P[hit] *= 1.5
        elif how == "shape" and hit.any():
            return P[:-1]
        return P

    return fn


@pytest.mark.parametrize("how", ["nan", "negative", "sum", "shape"])
def test_invalid_responses_name_the_rows(iris_model, how):
    model, X = iris_model
    rows = X[[0, 1, 2]].copy()
    rows[1, 0] = 7.5  # row 1 triggers the misbehaviour
    explainer = OpenAPIExplainer(_misbehaving(model, how), random_state=0)
    explainer.fit(X[X[:, 0] <= 7.0])
    with pytest.raises(ModelResponseError) as info:
        explainer.explain(rows)
    if how != "shape":
        assert "row(s) 1 " in str(info.value)
        np.testing.assert_array_equal(info.value.rows, [1])


def test_failure_mid_way_keeps_finished_rows(iris_model):
    _, X = iris_model
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    calls = {"n": 0}

    def kinked(Z):
        # Piecewise linear with one kink at x0 = 5; fails from the third call.
        calls["n"] += 1
        logits = np.where(Z[:, :1] < 5.0, Z @ A, Z @ B)
        P = np.exp(logits - logits.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        if calls["n"] >= 3:
            P[:] = np.nan
        return P

    rows = X[:6].copy()
    rows[:3, 0] = 5.0  # on the kink: these need more than one attempt
    explainer = OpenAPIExplainer(kinked, random_state=0, reuse_regions=False).fit(X)
    calls["n"] = 0
    with pytest.raises(ModelResponseError) as info:
        explainer.explain(rows)
    partial = info.value.partial
    assert isinstance(partial, Explanation) and len(partial) == len(rows)
    np.testing.assert_array_equal(partial.status[:3], ["not_run"] * 3)
    done = partial.status == "exact"
    assert done[3:].any() and set(partial.status[3:]) <= {"exact", "not_run"}
    # What was finished is what a run without failure gives.
    calls["n"] = -100
    clean = _quiet_explain(explainer, rows)
    np.testing.assert_array_equal(partial.coef[done], clean.coef[done])


def test_failing_parallel_chunk_leaves_a_full_partial(iris_model, monkeypatch):
    # The partial result of a slice that fails while another slice runs is an
    # Explanation with every field of a clean result (queries included): the
    # rows of every slice finished before the failure and those the failing
    # slice finished, as a clean run gives them, and no estimate for the rest.
    import threading

    from joblib import parallel_config

    from sklearn_plm_explain._openapi import _groups

    _, X = iris_model
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    rows = X[:8].copy()
    rows[[4, 7], 0] = 5.5, 4.5  # clear of the kink: exact in one round
    rows[[5, 6], 0] = 5.0  # on the kink at x0 = 5: a second round
    seen = {"n": 0, "fail": True}
    other_done = threading.Event()

    def kinked(Z):
        # Fails on the third call that concerns rows 5 and 6 (their origins,
        # first cubes, second cubes), whichever thread sends it, once the
        # other slice's rows (0 to 3) have reached the caller's table.
        logits = np.where(Z[:, :1] < 5.0, Z @ A, Z @ B)
        P = np.exp(logits - logits.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        if np.abs(Z[:, 1:] - rows[5, 1:]).max(axis=1).min() < 0.01:
            seen["n"] += 1
            if seen["fail"] and seen["n"] >= 3:
                assert other_done.wait(timeout=60)
                P[:] = np.nan
        return P

    explainer = OpenAPIExplainer(kinked, n_jobs=2, random_state=0).fit(X)
    put = ResultTable.put
    # Groups of 4 rows: two slices, one per job.
    monkeypatch.setattr(_groups, "GROUP_ROWS", 4)

    def signalling(table, part):
        put(table, part)
        if part.offset == 0 and len(part) == 4:
            other_done.set()

    monkeypatch.setattr(ResultTable, "put", signalling)
    with parallel_config(backend="threading"):
        with pytest.raises(ModelResponseError) as info:
            explainer.explain(rows, return_queries=True)
        seen["fail"] = False
        clean = _quiet_explain(explainer, rows, return_queries=True)
    partial = info.value.partial
    assert isinstance(partial, Explanation) and partial.fields == clean.fields
    expected = ["exact"] * 5 + ["not_run", "not_run", "exact"]
    np.testing.assert_array_equal(partial.status, expected)
    done = partial.status == "exact"
    np.testing.assert_array_equal(partial.coef[done], clean.coef[done])
    for i in np.flatnonzero(done):
        np.testing.assert_array_equal(partial.queries[i], clean.queries[i])
    assert np.isnan(partial.values[~done]).all()
    assert np.isinf(partial.error_bound[~done]).all()
    assert all(partial.queries[i].shape == (0, 4) for i in np.flatnonzero(~done))


def test_parallel_slices_hold_whole_groups():
    from sklearn_plm_explain._openapi._groups import task_slices

    # One job: a group at a time.
    assert task_slices(10, 17, 3, 1) == [slice(10, 13), slice(13, 16), slice(16, 17)]
    # Several: about eight slices per job, each of whole groups (so that rows
    # have the neighbours they have with one job), the last one shorter.
    slices = task_slices(0, 300, 3, 2)
    assert all(s.start % 3 == 0 and (s.stop - s.start) % 3 == 0 for s in slices[:-1])
    assert slices[0].start == 0 and slices[-1].stop == 300
    assert all(a.stop == b.start for a, b in zip(slices, slices[1:]))
    assert 12 <= len(slices) <= 17
    # Groups larger than a job's share are not split: a group is the set of
    # rows that share regions, the same for any number of jobs.
    assert task_slices(0, 1000, 400, 2) == [
        slice(0, 400),
        slice(400, 800),
        slice(800, 1000),
    ]
    assert task_slices(0, 20, 400, 2) == [slice(0, 20)]


# -- determinism and batching -----------------------------------------------------
class RowwiseMLP:
    """A ReLU network evaluated row by row (no BLAS), so that a point's response
    does not depend on the other points of its batch, as BLAS kernels may."""

    def __init__(self, mlp):
        self.mlp = mlp

    def __call__(self, Z):
        h = Z
        last = len(self.mlp.coefs_) - 1
        for k, (W, b) in enumerate(zip(self.mlp.coefs_, self.mlp.intercepts_)):
            h = np.einsum("nd,dh->nh", h, W) + b
            if k < last:
                h = np.maximum(h, 0.0)
        p1 = 1.0 / (1.0 + np.exp(-h[:, 0]))
        return np.column_stack([1.0 - p1, p1])


def _bc_mlp_small():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return MLPClassifier((16, 8), max_iter=500, random_state=0).fit(X, y), X


@pytest.mark.slow  # starts process workers
def test_results_do_not_depend_on_runs_jobs_or_batches():
    mlp, X = _bc_mlp_small()
    rows = X[:24]
    model = RowwiseMLP(mlp)
    np.testing.assert_allclose(model(rows), mlp.predict_proba(rows), rtol=1e-12)

    def run(rows, reuse=False, **kw):
        explainer = OpenAPIExplainer(
            model, random_state=0, reuse_regions=reuse, **kw
        ).fit(X)
        return _quiet_explain(explainer, rows)

    # Every row on its own: bitwise identical whatever the batching.
    ref = run(rows)
    others = [
        run(rows),
        run(rows, n_jobs=2),
        Explanation.concat([run(rows[i : i + 1]) for i in range(len(rows))]),
        run(rows[::-1])[::-1],
    ]
    assert ref.converged.mean() > 0.5
    for other in others:
        np.testing.assert_array_equal(ref.coef, other.coef)
        np.testing.assert_array_equal(ref.status, other.status)
        np.testing.assert_array_equal(ref.n_queries, other.n_queries)
    # Rows sharing certified models (the default): two runs, and runs with
    # more jobs, are identical; other batchings give the same statuses and
    # values within 2 rtol (a row may reuse another row's certified model
    # instead of fitting its own).
    shared = run(rows, reuse=True)
    np.testing.assert_array_equal(shared.coef, run(rows, reuse=True).coef)
    np.testing.assert_array_equal(shared.coef, run(rows, reuse=True, n_jobs=2).coef)
    for other in (
        Explanation.concat([run(rows[:7], reuse=True), run(rows[7:], reuse=True)]),
        run(rows[::-1], reuse=True)[::-1],
    ):
        np.testing.assert_array_equal(other.status, shared.status)
        diff = np.abs(other.values - shared.values).sum(1)[shared.converged]
        assert np.all(diff <= 2 * RTOL * np.abs(shared.values).sum(1)[shared.converged])


def test_blas_batch_effects_stay_far_below_the_tolerance():
    # sklearn's MLP goes through BLAS, whose results for one point may change in
    # the last bits with the batch it is computed in; explanations then agree
    # to well within the certified tolerance.
    mlp, X = _bc_mlp_small()
    rows = X[:24]
    explainer = OpenAPIExplainer(mlp, random_state=0).fit(X)
    ref = _quiet_explain(explainer, rows)
    by_row = Explanation.concat([_quiet_explain(explainer, r[None]) for r in rows])
    both = ref.converged & by_row.converged
    assert both.mean() > 0.8
    np.testing.assert_allclose(ref.coef[both], by_row.coef[both], rtol=1e-7, atol=0)


def test_model_calls_bounded_by_attempts_not_rows(counting):
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    mlp = MLPClassifier((16,), max_iter=500, random_state=0).fit(X, y)
    fn = counting(mlp.predict_proba)
    explainer = OpenAPIExplainer(fn, random_state=0, reuse_regions=False).fit(X)
    fn.calls = fn.rows = 0
    e = _quiet_explain(explainer, X[:100])
    # One call for the rows themselves, one per round of attempts.
    assert fn.calls <= 1 + e.n_iter.max()
    assert fn.rows == e.n_queries.sum()
    # With region reuse (the default) rows start in waves that double, from
    # four rows: at most log2(GROUP_ROWS / 4) + 1 more rounds.
    fn.calls = fn.rows = 0
    explainer.set_params(reuse_regions=True)
    e = _quiet_explain(explainer, X[:100])
    assert fn.calls <= 1 + e.n_iter.max() + 6
    assert fn.rows == e.n_queries.sum()


def test_batch_size_splits_calls(iris_model, counting):
    model, X = iris_model
    fn = counting(model.predict_proba)
    explainer = OpenAPIExplainer(fn, random_state=0, batch_size=50).fit(X)
    fn.calls = fn.rows = 0
    e = explainer.explain(X[:20])
    assert fn.rows == e.n_queries.sum()
    assert fn.calls >= fn.rows / 50


# -- the result object ------------------------------------------------------------
def test_explanation_fields_and_round_trip(iris_model):
    model, X = iris_model
    e = OpenAPIExplainer(model, random_state=0).fit(X).explain(X[:6], target=2)
    n, d, C = 6, 4, 3
    assert e.values.shape == (n, d) and e.coef.shape == (n, d, C)
    assert e.intercept.shape == (n, C)
    np.testing.assert_array_equal(e.target, np.full(n, 2))
    np.testing.assert_allclose(e.values, C / (C - 1) * e.coef[:, :, 2])
    np.testing.assert_array_equal(e.converged, e.status == "exact")
    sub = e[2:5]
    assert len(sub) == 3
    np.testing.assert_array_equal(sub.coef, e.coef[2:5])
    frame = e.to_frame()
    assert list(frame.columns[:d]) == ["x0", "x1", "x2", "x3"]
    assert list(frame["status"]) == list(e.status)
    back = Explanation.from_dict(json.loads(json.dumps(e.to_dict())))
    np.testing.assert_array_equal(back.coef, e.coef)
    np.testing.assert_array_equal(back.status, e.status)
    np.testing.assert_array_equal(back.classes, e.classes)
    # the local model reproduces the centred logits at the row
    logits = np.einsum("nd,ndc->nc", X[:6], e.coef) + e.intercept
    log_p = np.log(model.predict_proba(X[:6]))
    np.testing.assert_allclose(
        logits, log_p - log_p.mean(axis=1, keepdims=True), atol=1e-8
    )


def test_transform_and_score(iris_model):
    model, X = iris_model
    explainer = OpenAPIExplainer(model, random_state=0).fit(X)
    np.testing.assert_array_equal(
        explainer.transform(X[:5]), explainer.explain(X[:5]).values
    )
    assert 0.99 < explainer.score(X[:10]) <= 1.0


def test_unfitted_estimator_needs_y_or_is_fitted_on_it():
    X, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match="not fitted"):
        OpenAPIExplainer(LogisticRegression()).fit(X)
    explainer = OpenAPIExplainer(LogisticRegression(max_iter=1000)).fit(X, y)
    assert hasattr(explainer.estimator_, "coef_")
    assert not hasattr(explainer.estimator, "coef_")


def test_callable_gets_class_indices(iris_model):
    model, X = iris_model
    explainer = OpenAPIExplainer(model.predict_proba, random_state=0).fit(X)
    np.testing.assert_array_equal(explainer.classes_, [0, 1, 2])
    assert explainer.explain(X[:3]).converged.all()


# -- the queried points and the policy for uncertified rows ------------------------
def _lmt_with_a_flagged_row():
    """An LMT and 30 rows, row 5 moved onto the root split: not certifiable."""
    from sklearn.datasets import make_classification

    from sklearn_plm_explain import LogisticModelTreeClassifier

    X, y = make_classification(400, 6, n_informative=4, n_classes=3, random_state=0)
    lmt = LogisticModelTreeClassifier(
        prune=False, max_depth=2, min_samples_split=40, random_state=0
    ).fit(X, y)
    rows = X[:30].copy()
    rows[5, lmt.tree_.feature[0]] = lmt.tree_.threshold[0]
    return lmt, X, rows


def test_return_queries_gives_the_certified_cube(iris_model):
    model, X = iris_model
    explainer = OpenAPIExplainer(model, random_state=0, reuse_regions=False).fit(X)
    plain = explainer.explain(X[:8])
    e = explainer.explain(X[:8], return_queries=True)
    # Recording changes nothing else.
    for name in plain.fields:
        np.testing.assert_array_equal(getattr(e, name), getattr(plain, name))
    d = X.shape[1]
    for x, q, r in zip(X[:8], e.queries, e.radius):
        assert q.shape[1] == d and q.shape[0] >= d + explainer.n_witnesses
        # The cube's points lie around the row; the row itself is not one.
        assert not np.any(np.all(q == x, axis=1))
        assert np.abs(q - x).max() <= 10 * r * explainer.scale_.max()
    with pytest.raises(AttributeError):
        plain.queries


def test_return_queries_are_points_the_model_saw(iris_model, counting):
    model, X = iris_model
    seen = []

    def proba(Z):
        seen.append(np.array(Z))
        return model.predict_proba(Z)

    explainer = OpenAPIExplainer(
        proba, response_method="predict_proba", random_state=0
    ).fit(X)
    seen.clear()
    e = explainer.explain(X[:4], return_queries=True)
    queried = np.concatenate(seen)
    for q in e.queries:
        assert all(np.any(np.all(queried == p, axis=1)) for p in q)


@pytest.mark.slow  # starts process workers
def test_return_queries_with_reuse_and_jobs():
    lmt, X, rows = _lmt_with_a_flagged_row()
    explainer = OpenAPIExplainer(lmt, reuse_regions=True, random_state=0).fit(X)
    e = _quiet_explain(explainer, rows, return_queries=True)
    reused = e.reused_from >= 0
    assert reused.any()
    from sklearn_plm_explain._openapi._regions import N_PAIRS

    # A reused model is confirmed by N_PAIRS antithetic pairs of points.
    assert all(q.shape == (2 * N_PAIRS, X.shape[1]) for q in e.queries[reused])
    two = _quiet_explain(
        OpenAPIExplainer(lmt, random_state=0, n_jobs=2).fit(X),
        rows,
        return_queries=True,
    )
    one = _quiet_explain(
        OpenAPIExplainer(lmt, random_state=0).fit(X), rows, return_queries=True
    )
    for a, b in zip(one.queries, two.queries):
        np.testing.assert_array_equal(a, b)


def test_uncertified_policy_of_transform():
    lmt, X, rows = _lmt_with_a_flagged_row()
    e = _quiet_explain(OpenAPIExplainer(lmt, random_state=0).fit(X), rows)
    flagged = e.flagged
    assert flagged.tolist() == [i == 5 for i in range(len(rows))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        kept = OpenAPIExplainer(lmt, random_state=0).fit(X).transform(rows)
        nan = OpenAPIExplainer(lmt, random_state=0, uncertified="nan").fit(X)
        nan = nan.transform(rows)
        np.testing.assert_array_equal(kept, e.values)
        assert np.isnan(nan[5]).all()
        np.testing.assert_array_equal(nan[~flagged], kept[~flagged])
        raising = OpenAPIExplainer(lmt, random_state=0, uncertified="raise").fit(X)
        with pytest.raises(ValueError, match=r"1 of 30 rows .*rows 5\)"):
            raising.transform(rows)
        # Nothing to do when every row is certified.
        np.testing.assert_array_equal(raising.transform(rows[:5]), kept[:5])


def _set_logistic(W, b):
    lr = LogisticRegression()
    lr.coef_, lr.intercept_ = np.atleast_2d(W), np.atleast_1d(b)
    lr.classes_, lr.n_features_in_ = np.arange(2), lr.coef_.shape[1]
    return lr


@pytest.mark.parametrize(
    "feature_scale, logit, kind",
    [
        (1e-150, 0.0, "decision_function"),
        (1e-158, 25.0, "proba"),
        (1e160, 0.0, "decision_function"),
    ],
)
# Nothing here may overflow: a spread of 1e160 computed naively is inf.
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_features_of_extreme_scale_keep_their_bound(feature_scale, logit, kind):
    # Offsets of 1e-150 or 1e160 in input units: squared and weighted by the
    # noise scales they under- or overflow, so such rows are fitted in units
    # of the step (an adversarial review found bounds of 1e-25 on errors of
    # 1e-14, rows certified exact with errors of 1e-3, and NaN queries).
    rng = np.random.default_rng(0)
    d = 6
    X = rng.standard_normal((60, d)) * feature_scale
    lr = _set_logistic(rng.standard_normal(d) / feature_scale / np.sqrt(d), logit)
    fn = lr if kind == "decision_function" else (lambda A: lr.predict_proba(A))
    explainer = OpenAPIExplainer(
        fn, init_radius=0.01, scale=np.full(d, feature_scale), random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.fit(X).explain(X[:10])
    err = _rel_l1_all_classes(e, lr, X[:10])
    certified = np.isin(e.status, ["exact", "approximate"])
    assert np.all(err[certified] <= e.error_bound[certified])
    assert np.all(err[e.status == "exact"] <= RTOL)
    # Their background spread is finite too, and so are the standardized
    # slopes (with the squares of 1e160, both were inf).
    np.testing.assert_allclose(
        explainer.std_, (X / feature_scale).std(axis=0) * feature_scale, rtol=1e-12
    )
    assert np.all(np.isfinite(e.standardized[certified]))


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_default_scale_of_features_whose_squares_overflow():
    # scale="std" of features of 1e160 was inf: every cube was non-finite and
    # explain raised "Non-finite query points were built".
    rng = np.random.default_rng(0)
    d = 6
    X = rng.standard_normal((60, d)) * 1e160
    lr = _set_logistic(rng.standard_normal(d) / 1e160 / np.sqrt(d), 0.0)
    explainer = OpenAPIExplainer(lr, init_radius=0.01, random_state=0).fit(X)
    np.testing.assert_allclose(
        explainer.scale_, (X / 1e160).std(axis=0) * 1e160, rtol=1e-12
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(X[:10])
    err = _rel_l1_all_classes(e, lr, X[:10])
    certified = np.isin(e.status, ["exact", "approximate"])
    assert certified.any()
    assert np.all(err[certified] <= e.error_bound[certified])
