"""Tests of StableLIMEExplainer (S-LIME) and of its LARS-step test."""

import warnings
from collections import Counter

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer
from sklearn_plm_explain._lime._lars_test import lars_step_tests
from sklearn_plm_explain.metrics import jaccard_stability

# Rows tied within tie_margin warn; the tests that are about ties assert it.
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*status 'tied':sklearn.exceptions.ConvergenceWarning"
)

CONT = {
    "mode": "regression",
    "discretize_continuous": False,
    "sample_around_instance": True,
}


def _train(d, n=400, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


class Counting:
    def __init__(self, fn):
        self.fn, self.calls, self.points = fn, 0, 0

    def __call__(self, X):
        self.calls += 1
        self.points += len(X)
        return self.fn(X)


# -- the test statistic on data with a known answer ------------------------------------
def _neighbourhood(coef, n, seed):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, len(coef)))
    return Z, np.ones(n), Z @ np.asarray(coef, float)


def test_clear_gap_passes_at_small_n():
    Z, w, y = _neighbourhood([3.0, 1.0, 0.0], 200, 0)
    t = lars_step_tests(Z, w, y, k=2, alpha=0.05)
    assert t.passed
    assert_array_equal(t.active, [0, 1])
    assert t.z[0] > 1.645  # z_0.05


def test_equal_effects_fail_the_strict_test_and_ask_for_more():
    fails = 0
    for seed in range(20):
        Z, w, y = _neighbourhood([1.0, 1.0, 0.0], 1000, seed)
        t = lars_step_tests(Z, w, y, k=1, alpha=0.05, tie_margin=0.0)
        fails += not t.passed
        if not t.passed:
            assert t.n_needed > 1000
    # Under equal effects the statistic is about N(0, 1/2): P(pass) ~ 1 %.
    assert fails >= 18


def test_equal_effects_pass_as_a_tie_once_resolved():
    """With a margin, two equal effects are a tie the sample settles: at
    n = 200 the gap's uncertainty is still larger than the margin, at
    n = 20000 well inside it, and a failing step asks for a finite size."""
    small, large = [], []
    for seed in range(10):
        Z, w, y = _neighbourhood([1.0, 1.0, 0.0], 20000, seed)
        t = lars_step_tests(Z[:200], w[:200], y[:200], k=1, alpha=0.05)
        small.append(t.passed)
        assert t.passed or 200 < t.n_needed < np.inf
        large.append(lars_step_tests(Z, w, y, k=1, alpha=0.05).passed)
    assert sum(small) <= 2
    assert all(large)


def test_smaller_alpha_never_needs_fewer_samples():
    for seed in range(10):
        Z, w, y = _neighbourhood([1.0, 0.9, 0.5, 0.45], 500, seed)
        prev_needed, prev_passed = 0.0, True
        for alpha in [0.3, 0.2, 0.1, 0.05, 0.01, 0.001]:
            t = lars_step_tests(Z, w, y, k=3, alpha=alpha)
            assert t.n_needed >= prev_needed
            assert prev_passed or not t.passed  # passing at small alpha => at larger
            prev_needed, prev_passed = t.n_needed, t.passed


@pytest.mark.parametrize("margin", [0.0, 0.15])
def test_statistic_matches_its_definition(margin):
    """(Δ + margin |ĉ1|) / (sqrt(2) se) with se from 16 batch means and one
    variance for both signs (a negative effect)."""
    Z, w, y = _neighbourhood([-2.0, 1.5], 401, 3)
    t = lars_step_tests(Z, w, y, k=1, alpha=0.05, tie_margin=margin)
    Zc, yc = Z - Z.mean(axis=0), y - y.mean()
    c = Zc.T @ yc / len(y)
    assert np.argmax(np.abs(c)) == t.active[0] == 0
    p = yc * (np.sign(c[0]) * Zc[:, 0] - np.sign(c[1]) * Zc[:, 1])
    # 400 draws after the row itself: 16 batches of 25.
    batches = p[1:].reshape(16, 25).mean(axis=1)
    se = batches.std(ddof=1) * np.sqrt(25 / 401)
    expected = (p.mean() + margin * abs(c[0])) / (np.sqrt(2) * se)
    assert np.isclose(t.z[0], expected)


def test_batch_means_see_the_even_cover_of_a_sobol_sample():
    """The gap of a quasi-random sample varies far less from seed to seed than
    the independent-draws formula says; batch means follow it, from above."""
    from scipy.special import ndtri
    from scipy.stats import qmc

    gaps, iid, batched = [], [], []
    for seed in range(20):
        U = qmc.Sobol(3, scramble=True, seed=seed).random_base2(12)
        Z = ndtri(np.clip(U, 1e-16, 1 - 1e-16))
        Z = np.vstack([np.zeros(3), Z])  # row 0, the explained row
        y = np.tanh(Z @ [1.0, 0.8, 0.3])
        t = lars_step_tests(Z, np.ones(len(y)), y, k=1, alpha=0.05, tie_margin=0.0)
        Zc, yc = Z - Z.mean(axis=0), y - y.mean()
        c = Zc.T @ yc / len(y)
        p = yc * (np.sign(c[0]) * Zc[:, 0] - np.sign(c[1]) * Zc[:, 1])
        gaps.append(p.mean())
        iid.append(np.sqrt(p.var(ddof=1) / len(p)))
        batched.append(p.mean() / (np.sqrt(2) * t.z[0]))
    spread = np.std(gaps, ddof=1)
    assert np.mean(iid) > 3 * spread
    assert spread < np.mean(batched) < np.mean(iid) / 4


def test_exact_tie_and_short_path_do_not_crash():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 3))
    Z[:, 1] = Z[:, 0]  # duplicated column: an exact tie at the first step
    y = Z[:, 0] + 0.1 * Z[:, 2]
    t = lars_step_tests(Z, np.ones(300), y, k=5, alpha=0.05, tie_margin=0.0)
    assert not t.passed and t.n_needed == np.inf
    # Within any margin an exact tie is settled at once.
    assert lars_step_tests(Z, np.ones(300), y, k=1, alpha=0.05).passed
    # A path shorter than k: y depends on one feature only, then stops.
    Z = rng.normal(size=(300, 4))
    t = lars_step_tests(Z, np.ones(300), 2 * Z[:, 3], k=4, alpha=0.05)
    assert t.passed
    assert t.active[0] == 3
    assert np.isnan(t.z[t.active.size :]).all()
    # Constant response: nothing to select, nothing to test.
    t = lars_step_tests(Z, np.ones(300), np.full(300, 0.7), k=3, alpha=0.05)
    assert t.passed and t.active.size == 0


# -- the explainer ----------------------------------------------------------------------
def test_clear_gap_converges_without_growing():
    coef = np.array([3.0, 1.0, 0.0])
    X = _train(3)
    s = StableLIMEExplainer(
        lambda A: A @ coef, num_features=2, num_samples=300, random_state=0, **CONT
    ).fit(X)
    e = s.explain(X[:3])
    assert_array_equal(e.n_samples, 300)
    assert_array_equal(e.n_rounds, 1)
    assert e.converged.all() and (e.status == "converged").all()
    assert_array_equal(e.selected, [[0, 1]] * 3)


def test_equal_effects_reach_n_max_under_the_strict_test_and_report_it():
    X = _train(2)
    model = Counting(lambda A: A[:, 0] + A[:, 1])
    s = StableLIMEExplainer(
        model,
        num_features=1,
        num_samples=500,
        n_max=4000,
        tie_margin=0.0,
        random_state=0,
        **CONT,
    ).fit(X)
    with pytest.warns(ConvergenceWarning, match=r"(\d) of 6 rows reached n_max=4000"):
        e = s.explain(X[:6])
    hit = e.status == "n_max_reached"
    assert hit.sum() >= 5
    assert_array_equal(e.n_samples[hit], 4000)
    assert not e.converged[hit].any()
    assert (e.converged == (e.status == "converged")).all()
    # Appended draws: every point queried once, n_queries is the final size.
    assert_array_equal(e.n_queries, e.n_samples)
    assert model.points == e.n_samples.sum()
    assert (e.n_rounds[hit] >= 2).all()


def test_equal_effects_stop_as_a_tie_that_is_not_called_converged():
    # Two features of equal effect: the margin stops the sample early, but
    # the sample does not resolve which one comes first, so the rows are
    # "tied" (not converged) and name the pair, instead of claiming an order
    # another sample may swap.
    X = _train(2)
    s = StableLIMEExplainer(
        lambda A: A[:, 0] + A[:, 1],
        num_features=1,
        num_samples=500,
        n_max=20000,
        random_state=0,
        **CONT,
    ).fit(X)
    with pytest.warns(ConvergenceWarning, match=r"6 of 6 rows .*status 'tied'"):
        e = s.explain(X[:6])
    assert (e.status == "tied").all() and not e.converged.any()
    assert (e.n_samples < 20000).all()
    for pairs in e.ties:
        assert {int(pairs[0, 0]), int(pairs[0, 1])} == {0, 1}
    # The strict test resolves no order either: at n_max, not converged.
    strict = s.set_params(tie_margin=0.0, n_max=2000)
    with pytest.warns(ConvergenceWarning, match="n_max"):
        assert not strict.explain(X[:2]).converged.any()


def test_a_clear_order_is_converged_without_ties():
    X = _train(2)
    s = StableLIMEExplainer(
        lambda A: 2.0 * A[:, 0] + A[:, 1],
        num_features=2,
        num_samples=500,
        n_max=20000,
        random_state=0,
        **CONT,
    ).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        e = s.explain(X[:6])
    assert e.converged.all() and (e.status == "converged").all()
    assert (e.ties == -1).all()


def test_exact_tie_reaches_n_max_without_crash():
    X = _train(3)
    X[:, 1] = X[:, 0]
    s = StableLIMEExplainer(
        lambda A: A[:, 0] + A[:, 1] + 0.2 * A[:, 2],
        num_features=3,
        num_samples=200,
        n_max=800,
        tie_margin=0.0,
        random_state=0,
        **CONT,
    ).fit(X)
    with pytest.warns(ConvergenceWarning):
        e = s.explain(X[:2])
    assert_array_equal(e.status, "n_max_reached")
    assert_array_equal(e.n_samples, 800)


def test_short_path_is_padded():
    X = _train(4)
    s = StableLIMEExplainer(
        lambda A: 2.0 * A[:, 2], num_features=3, num_samples=200, random_state=0, **CONT
    ).fit(X)
    e = s.explain(X[:2])
    assert_array_equal(e.selected[:, 0], 2)
    assert (e.selected[:, 1:] == -1).all()
    assert e.converged.all()
    # More features requested than exist.
    s = StableLIMEExplainer(
        lambda A: A @ [3.0, 2.0, 1.0, 0.5],
        num_features=9,
        num_samples=300,
        random_state=0,
        **CONT,
    ).fit(X)
    assert s.explain(X[:1]).selected.shape == (1, 4)


def test_alpha_is_honoured():
    X = _train(3)
    fn = lambda A: A @ [1.0, 0.93, 0.0]  # noqa: E731
    kw = {"num_features": 1, "num_samples": 500, "n_max": 50000, "random_state": 0}
    kw["tie_margin"] = 0.0  # the gap itself must be resolved
    loose = StableLIMEExplainer(fn, alpha=0.3, **kw, **CONT).fit(X).explain(X[:8])
    strict = StableLIMEExplainer(fn, alpha=0.001, **kw, **CONT).fit(X).explain(X[:8])
    assert np.median(strict.n_samples) > np.median(loose.n_samples)


def test_every_requested_label_is_tested():
    """Class 0 is clear-cut, class 1 has two equal effects: asking for class 1
    too must drive the sample to n_max under the strict test."""

    def model(A):
        p0 = 0.3 + 0.2 * np.tanh(A[:, 0])
        p1 = 0.3 + 0.03 * np.clip(A[:, 1] + A[:, 2], -3, 3)
        return np.column_stack([p0, p1, 1 - p0 - p1])

    X = _train(3)
    kw = {
        "num_features": 1,
        "num_samples": 300,
        "n_max": 3000,
        "tie_margin": 0.0,
        "random_state": 0,
        "discretize_continuous": False,
        "sample_around_instance": True,
    }
    s = StableLIMEExplainer(model, **kw).fit(X)
    alone = s.explain(X[:4], target=0)
    with pytest.warns(ConvergenceWarning):
        both = s.explain(X[:4], target=0, labels=[1])
    assert np.median(alone.n_samples) < 3000
    assert (both.n_samples >= alone.n_samples).all()
    assert (both.status == "n_max_reached").sum() >= 3
    assert both.label_values.shape == (4, 2, 3)


def test_categorical_strings():
    rng = np.random.default_rng(0)
    n = 500
    X = np.empty((n, 3), dtype=object)
    X[:, 0] = rng.normal(size=n)
    X[:, 1] = rng.choice(["a", "b", "c"], size=n)
    X[:, 2] = rng.normal(size=n)

    def model(A):
        assert all(isinstance(v, str) for v in A[:, 1])
        return 4.0 * (A[:, 1] == "b") + 1.0 * A[:, 0].astype(float)

    s = StableLIMEExplainer(
        model, mode="regression", num_features=2, num_samples=500, random_state=0
    ).fit(X)
    e = s.explain(X[:5])
    assert_array_equal(e.selected[:, 0], 1)
    assert_array_equal(e.n_queries, e.n_samples)


@pytest.mark.slow  # starts process workers
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_determinism_batch_and_jobs():
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.2, random_state=0)
    model = LogisticRegression(solver="newton-cholesky").fit(Xtr, ytr)
    kw = {"num_features": 3, "num_samples": 300, "n_max": 2000, "random_state": 0}
    a = StableLIMEExplainer(model, **kw).fit(Xtr).explain(Xte[:4], target=1)
    b = StableLIMEExplainer(model, **kw).fit(Xtr).explain(Xte[:4], target=1)
    c = StableLIMEExplainer(model, n_jobs=2, **kw).fit(Xtr).explain(Xte[:4], target=1)
    d = StableLIMEExplainer(model, batch_size=700, **kw).fit(Xtr)
    rows = [d.explain(Xte[i : i + 1], target=1) for i in range(4)]
    for other in [b, c]:
        assert_array_equal(a.values, other.values)
        assert_array_equal(a.n_samples, other.n_samples)
        assert_array_equal(a.selected, other.selected)
    assert_array_equal(a.values, np.vstack([r.values for r in rows]))
    assert_array_equal(a.n_samples, np.concatenate([r.n_samples for r in rows]))


def test_n_max_below_num_samples_rejected():
    with pytest.raises(ValueError, match="n_max"):
        StableLIMEExplainer(
            lambda A: A[:, 0], mode="regression", num_samples=500, n_max=100
        ).fit(_train(2))


def test_jaccard_stability():
    assert jaccard_stability([[0, 1], [0, 1], [0, 1]], 2) == 1.0
    assert jaccard_stability([[0, 1], [1, 0]], 1) == 0.0
    assert jaccard_stability([[0, 1, -1], [0, 2, -1]], 3) == pytest.approx(1 / 3)


# -- the S-LIME paper's MARS case -----------------------------------------------------------
def mars(X):
    X = np.asarray(X, dtype=float)
    return (
        10 * np.sin(np.pi * X[:, 0] * X[:, 1])
        + 20 * (X[:, 2] - 0.05) ** 2
        + 5.2 * X[:, 3]
        + 5 * X[:, 4]
    )


def mars_runs(repeats=20):
    """Selected orders of LIME (lasso path, n=1000) and S-LIME over repeats."""
    X = np.random.default_rng(0).random((1000, 5))
    x = np.array([[0.51, 0.49, 0.5, 0.5, 0.5]])
    common = {**CONT, "num_features": 5}
    lime, slime = [], []
    for seed in range(repeats):
        lime.append(
            LimeTabularExplainer(
                mars,
                feature_selection="lasso_path",
                num_samples=1000,
                random_state=seed,
                **common,
            )
            .fit(X)
            .explain(x)
        )
        slime.append(
            StableLIMEExplainer(
                mars, num_samples=1000, n_max=10000, random_state=seed, **common
            )
            .fit(X)
            .explain(x)
        )
    return lime, slime


def test_mars_slime_more_stable_than_lime():
    lime, slime = mars_runs()
    sel_l = np.vstack([e.selected for e in lime])
    sel_s = np.vstack([e.selected for e in slime])
    for k in range(1, 6):
        assert jaccard_stability(sel_s, k) >= jaccard_stability(sel_l, k)
    top3 = Counter(frozenset(row[:3]) for row in sel_s)
    assert top3.most_common(1)[0][1] >= 19


def test_bad_input_rejected_before_any_call():
    X = _train(3)
    model = Counting(lambda A: A @ [1.0, 2.0, 3.0])
    s = StableLIMEExplainer(model, num_samples=100, random_state=0, **CONT).fit(X)
    bad = X[:2].copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        s.explain(bad)
    with pytest.raises(ValueError, match="features"):
        s.explain(X[:2, :2])
    assert model.calls == 0


def test_bad_response_in_a_later_round_names_the_growing_rows():
    """Rows 1 and 3 sit where two features tie and must grow; rows 0 and 2 do
    not. A model failing on the second call names exactly rows 1 and 3."""
    from sklearn_plm_explain import ModelResponseError

    calls = {"n": 0}

    def model(A):
        calls["n"] += 1
        y = np.where(A[:, 2] > 0, A[:, 0] + A[:, 1], 3 * A[:, 0] + A[:, 1])
        return y if calls["n"] < 2 else np.full(len(A), np.nan)

    X = _train(3)
    rows = np.array(
        [[0.0, 0.0, -8.0], [0.0, 0.0, 8.0], [1.0, 0.0, -8.0], [1.0, 0.0, 8.0]]
    )
    s = StableLIMEExplainer(
        model,
        num_features=1,
        num_samples=400,
        n_max=2000,
        tie_margin=0.0,
        random_state=0,
        **CONT,
    ).fit(X)
    with pytest.raises(ModelResponseError, match="non-finite") as info:
        s.explain(rows)
    assert_array_equal(info.value.rows, [1, 3])


def test_explanation_round_trips_through_json():
    import json

    from sklearn_plm_explain import Explanation

    X = _train(3)
    s = StableLIMEExplainer(
        lambda A: A @ [3.0, 1.0, 0.5],
        num_features=2,
        num_samples=200,
        random_state=0,
        **CONT,
    ).fit(X)
    e = s.explain(X[:3])
    back = Explanation.from_dict(json.loads(json.dumps(e.to_dict())))
    for field in e.fields:
        assert_array_equal(getattr(back, field), getattr(e, field))


def _smooth(X):
    X = np.asarray(X, dtype=float)
    return np.sin(X[:, 0]) + X[:, 1] ** 2 + 0.5 * X[:, 0] * X[:, 2]


def test_quasi_random_sampling_steadies_the_surrogate():
    # Same marginals, more even cover: the seed-to-seed spread of the
    # surrogate weights shrinks well below that of independent draws, and
    # both designs estimate the same weights.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    weights = {}
    for sampling in ("random", "qmc"):
        weights[sampling] = np.array(
            [
                LimeTabularExplainer(
                    _smooth,
                    mode="regression",
                    discretize_continuous=False,
                    sample_around_instance=True,
                    feature_selection="none",
                    num_samples=1024,
                    sampling=sampling,
                    random_state=seed,
                )
                .fit(X)
                .explain(X[:3])
                .values
                for seed in range(8)
            ]
        )
    spread = {k: w.std(axis=0) for k, w in weights.items()}
    assert spread["qmc"].mean() < 0.5 * spread["random"].mean()
    # Means agree within the independent design's standard error of the mean.
    gap = np.abs(weights["qmc"].mean(0) - weights["random"].mean(0))
    assert np.all(gap <= 4 * spread["random"] / np.sqrt(8) + 1e-12)


def test_quasi_random_rows_are_stratified_and_differ():
    """The rows of one call read one Sobol' table, each through its own shift
    and reflection of the columns: every row's draws still put exactly one
    point in each of 1024 equal-probability strata of every feature, two rows
    do not share their draws, and a row alone gets the draws it got in the
    batch."""
    from scipy.special import ndtr

    X = _train(6)
    seen = []

    def model(Q):
        seen.append(np.array(Q))
        return _smooth(Q)

    kw = {"num_samples": 1025, "feature_selection": "none", "sampling": "qmc"}
    explainer = LimeTabularExplainer(model, random_state=0, **kw, **CONT).fit(X)
    rows = X[:2] + 0.1
    explainer.explain(rows)
    Q = np.vstack(seen).reshape(2, 1025, 6)[:, 1:]  # point 0 is the row itself
    Z = (Q - rows[:, None]) / X.std(axis=0)
    for z in Z:
        strata = np.sort(np.floor(ndtr(z) * 1024), axis=0)
        assert_array_equal(strata, np.repeat(np.arange(1024.0)[:, None], 6, axis=1))
    assert np.mean(np.isclose(Z[0], Z[1])) < 0.01
    seen.clear()
    explainer.explain(rows[1:])
    assert_array_equal(seen[0][1:], Q[1])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("sampling", ["random", "qmc"])
def test_growth_in_small_model_calls_keeps_every_rows_sample(monkeypatch, sampling):
    """Grown samples go to the model in calls of bounded size, a row's share
    split at whole sampling blocks: each row's neighbourhood, and so its
    result, is the one drawn in a single call (continuous and categorical
    columns, whose draws interleave block by block)."""
    import sklearn_plm_explain._lime._stable as sl

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[:, 3] = rng.integers(0, 3, size=300)
    calls = []

    def model(Q):
        calls.append(len(Q))
        Q = np.asarray(Q, dtype=float)
        return _smooth(Q) + 0.3 * Q[:, 3]

    kw = {"num_features": 3, "num_samples": 200, "n_max": 4000, "random_state": 0}
    slime = StableLIMEExplainer(
        model,
        mode="regression",
        discretize_continuous=False,
        categorical_features=[3],
        sampling=sampling,
        **kw,
    ).fit(X)
    whole = slime.explain(X[:4])
    assert max(calls) > 700 and whole.n_rounds.max() > 1
    calls.clear()
    # 700 values, 175 points of 4 columns, are less than a sampling block
    # (512 rows here): every call carries one block of one row (or less).
    assert slime.space_.block_rows() == 512
    monkeypatch.setattr(sl, "_APPEND_VALUES", 700)
    split = slime.explain(X[:4])
    assert max(calls[1:]) <= 512 < max(calls)  # the first round is one call
    assert_array_equal(split.n_samples, whole.n_samples)
    np.testing.assert_allclose(split.values, whole.values, rtol=1e-12, atol=1e-12)


def test_pieces_cover_each_rows_share_in_order():
    from sklearn_plm_explain._lime._stable import _pieces

    rows, sizes = [3, 5, 8], [1000, 10, 130]
    pieces = _pieces(rows, sizes, limit=300, block=64)
    for piece in pieces:
        assert sum(m for _, m in piece) <= 300
        assert len({i for i, _ in piece}) == len(piece)
    for i, m in zip(rows, sizes):
        chunks = [c for piece in pieces for r, c in piece if r == i]
        assert sum(chunks) == m
        assert all(c % 64 == 0 for c in chunks[:-1])


def test_quasi_random_sample_grows_by_continuing_its_sequence():
    X = _train(4)
    model = Counting(_smooth)
    slime = StableLIMEExplainer(
        model, num_features=3, num_samples=200, n_max=3000, random_state=0, **CONT
    ).fit(X)
    assert slime.sampling == "qmc"
    model.points = 0
    e = slime.explain(X[:3])
    # Every point queried is used: rounds append to the same sequence.
    assert model.points == e.n_samples.sum()
    np.testing.assert_array_equal(e.n_queries, e.n_samples)
    assert np.all(e.n_rounds >= 1)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_progress_counts_every_row_once(record_bars, capfd, n_jobs):
    """S-LIME's rows count once each, whatever their number of rounds; with
    verbose=0 nothing is printed."""
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.2, random_state=0)
    model = LogisticRegression(solver="newton-cholesky").fit(Xtr, ytr)
    kw = {"num_features": 3, "num_samples": 300, "n_max": 2000, "random_state": 0}
    quiet = StableLIMEExplainer(model, n_jobs=n_jobs, **kw).fit(Xtr).explain(Xte[:5])
    out, err = capfd.readouterr()
    assert out == "" and err == ""

    bars = record_bars()
    e = (
        StableLIMEExplainer(model, batch_size=300, n_jobs=n_jobs, verbose=1, **kw)
        .fit(Xtr)
        .explain(Xte[:5])
    )
    (bar,) = bars
    assert bar.total == 5 and sum(bar.updates) == 5
    assert len(bar.updates) == -(-5 // n_jobs)
    assert_array_equal(e.values, quiet.values)
    assert_array_equal(e.n_samples, quiet.n_samples)
