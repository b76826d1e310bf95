"""Tests of the LIME engine and LimeTabularExplainer."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import train_test_split

from sklearn_plm_explain import LimeTabularExplainer, ModelResponseError
from sklearn_plm_explain._lime._surrogate import _fit_surrogate, _LocalStats, _select


class Counting:
    """A callable model that counts its calls."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0

    def __call__(self, X):
        self.calls += 1
        return self.fn(X)


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X, y)
    return X, y, model


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.2, random_state=0)
    model = LogisticRegression(solver="newton-cholesky").fit(Xtr, ytr)
    return Xtr, Xte, ytr, model


def _logistic_proba(X):
    """A width-agnostic probability model for scikit-learn's common checks."""
    X = np.asarray(X, dtype=float)
    p = 1 / (1 + np.exp(-X.sum(axis=1) / 10))
    return np.column_stack([1 - p, p])


# -- result object -------------------------------------------------------------------
def test_explanation_fields(iris):
    X, _, model = iris
    lime = LimeTabularExplainer(
        model, num_features=2, num_samples=500, random_state=0
    ).fit(X)
    e = lime.explain(X[:4])
    assert e.values.shape == (4, 4)
    assert e.selected.shape == (4, 2)
    assert_array_equal(e.target, model.predict(X[:4]))
    assert_array_equal(e.classes, model.classes_)
    assert list(e.feature_names) == ["x0", "x1", "x2", "x3"]
    assert_array_equal(e.n_queries, 500)
    assert_array_equal(e.n_samples, 500)
    assert e.converged.all() and (e.status == "converged").all()
    # Unselected features have weight 0; selected are in |weight| order.
    for row in range(4):
        sel = e.selected[row]
        mask = np.zeros(4, bool)
        mask[sel] = True
        assert np.all(e.values[row, ~mask] == 0)
        assert np.all(np.diff(np.abs(e.values[row, sel])) <= 0)
    assert_allclose(lime.transform(X[:4]), e.values)


def test_labels_every_class(iris):
    X, _, model = iris
    lime = LimeTabularExplainer(
        model, num_features=2, num_samples=300, random_state=0
    ).fit(X)
    e = lime.explain(X[:3], target=0, labels=[0, 1, 2])
    assert e.labels.shape == (3, 4)
    assert_array_equal(e.labels[:, 0], 0)
    assert e.label_values.shape == (3, 4, 4)
    assert_allclose(e.label_values[:, 0], e.values)
    assert_allclose(e.label_score[:, 0], e.score)
    # Local predictions of a surrogate per class: they roughly sum to 1.
    assert_allclose(e.label_local_pred[:, 1:].sum(axis=1), 1, atol=0.2)
    with pytest.raises(ValueError, match="not classes"):
        lime.explain(X[:3], target=7)


def test_linear_regression_recovered():
    """A linear model's weights per training std are recovered (continuous)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4)) * [1.0, 2.0, 0.5, 3.0]
    coef = np.array([1.0, -2.0, 0.0, 0.5])
    lime = LimeTabularExplainer(
        lambda A: A @ coef + 3.0,
        mode="regression",
        discretize_continuous=False,
        sample_around_instance=True,
        feature_selection="none",
        random_state=0,
    ).fit(X)
    e = lime.explain(X[:3])
    assert_allclose(
        e.values, np.tile(coef * X.std(axis=0), (3, 1)), rtol=2e-3, atol=1e-3
    )
    assert_allclose(e.score, 1.0, atol=1e-6)
    assert_allclose(e.local_pred, X[:3] @ coef + 3.0, rtol=1e-3)
    assert e.classes is None


# -- exact agreement with lime on the same neighbourhood ------------------------------
@pytest.mark.parametrize(
    "method",
    ["none", "forward_selection", "highest_weights", "lasso_path", "auto"],
)
@pytest.mark.parametrize("binary", [True, False])
def test_selection_and_surrogate_match_lime_base(method, binary):
    """Given one neighbourhood, selection and surrogate equal lime's."""
    lime_base = pytest.importorskip("lime.lime_base")
    rng = np.random.default_rng(1)
    n, d, k = 400, 8, 4
    Z = (
        rng.integers(0, 2, size=(n, d)).astype(float)
        if binary
        else rng.normal(size=(n, d))
    )
    Z[0] = 1.0 if binary else Z[0]
    y = Z @ rng.normal(size=d) + 0.3 * np.sin(3 * Z[:, 0]) + 0.1 * rng.normal(size=n)
    w = np.sqrt(np.exp(-((Z - Z[0]) ** 2).sum(axis=1) / (0.75**2 * d)))
    base = lime_base.LimeBase(lambda x: x, random_state=0)
    theirs = base.feature_selection(Z, y, w, k, method)
    stats = _LocalStats(Z, w, y[:, None])
    ours = _select(stats, 0, k, method)
    if method in ("forward_selection", "auto"):
        assert_array_equal(ours, theirs)  # greedy order is part of the result
    else:
        assert_array_equal(np.sort(ours), np.sort(theirs))
    b0, exp, score, local_pred = base.explain_instance_with_data(
        Z, y[:, None], w, 0, k, feature_selection=method
    )
    coef, intercept, sc, lp = _fit_surrogate(stats, Z, w, y[:, None], 0, ours, None)
    theirs_coef = dict(exp)
    assert_allclose(coef, [theirs_coef[j] for j in ours], rtol=1e-8, atol=1e-10)
    assert_allclose(intercept, b0, rtol=1e-8)
    assert_allclose(sc, score, rtol=1e-8)
    assert_allclose(lp, np.ravel(local_pred)[0], rtol=1e-8)


def test_statistics_of_a_grown_sample_equal_those_of_the_whole():
    """A grown sample's statistics continue its prefix's (only the columns
    the prefix was asked for are carried, those summed ahead are not), and
    equal the statistics of the whole sample computed afresh."""
    rng = np.random.default_rng(3)
    n0, n, d = 300, 700, 12
    Z = rng.normal(size=(n, d))
    Y = Z @ rng.normal(size=(d, 2)) + rng.normal(size=(n, 2))
    w = rng.uniform(0.1, 1.0, n)
    first = _LocalStats(Z[:n0], w[:n0], Y[:n0])
    first.gram_columns([4, 1], ahead=[7, 4, 9])  # 7 and 9 summed ahead
    first.gram_columns([4, 1, 7])  # 7 now asked for too
    grown = _LocalStats(Z, w, Y, prefix=first)
    assert sorted(grown._cols) == [1, 4, 7]
    whole = _LocalStats(Z, w, Y)
    for name in ("wsum", "mu", "ybar", "b", "syy"):
        assert_allclose(getattr(grown, name), getattr(whole, name), rtol=1e-12)
    cols = [4, 9, 1, 7, 0]
    assert_allclose(grown.gram_columns(cols), whole.G[:, cols], rtol=1e-10, atol=1e-10)
    assert_allclose(
        first.gram_columns([9, 7]),
        _LocalStats(Z[:n0], w[:n0], Y[:n0]).G[:, [9, 7]],
        rtol=1e-10,
        atol=1e-10,
    )


def test_model_regressor_is_used(cancer):
    Xtr, Xte, _, model = cancer
    from sklearn.linear_model import Ridge

    a = LimeTabularExplainer(model, num_samples=400, random_state=0).fit(Xtr)
    b = LimeTabularExplainer(
        model, num_samples=400, random_state=0, model_regressor=Ridge(alpha=1.0)
    ).fit(Xtr)
    ea, eb = a.explain(Xte[:2]), b.explain(Xte[:2])
    assert_allclose(ea.values, eb.values, rtol=1e-6, atol=1e-10)
    assert_allclose(ea.score, eb.score, rtol=1e-6)
    c = a.set_params(model_regressor=LinearRegression()).fit(Xtr)
    assert not np.allclose(c.explain(Xte[:2]).values, ea.values)


# -- sampling laws -----------------------------------------------------------------
def test_discretised_sampling_law(cancer):
    """Bins follow training frequencies; values follow the truncated normal."""
    Xtr, Xte, _, _ = cancer
    seen = []

    def model(A):
        seen.append(A.copy())
        return np.tile([0.3, 0.7], (len(A), 1))

    lime = LimeTabularExplainer(model, num_samples=20000, random_state=0).fit(Xtr)
    lime.explain(Xte[:1])
    A = seen[-1][1:]
    j = 0
    col = Xtr[:, j]
    qts = np.unique(np.percentile(col, [25, 50, 75]))
    bins = np.searchsorted(qts, A[:, j])
    freq = np.bincount(bins, minlength=4) / len(A)
    train = np.bincount(np.searchsorted(qts, col), minlength=4) / len(col)
    assert_allclose(freq, train, atol=0.015)
    lo = np.concatenate([[col.min()], qts])
    hi = np.concatenate([qts, [col.max()]])
    for b in range(4):
        inside = col[np.searchsorted(qts, col) == b]
        mu, sd = inside.mean(), inside.std() + 1e-11
        vals = A[bins == b, j]
        assert vals.min() >= lo[b] - 1e-9 and vals.max() <= hi[b] + 1e-9
        law = stats.truncnorm((lo[b] - mu) / sd, (hi[b] - mu) / sd, loc=mu, scale=sd)
        # Kolmogorov-Smirnov against lime's law for each bin.
        assert stats.kstest(vals, law.cdf).pvalue > 1e-3


@pytest.mark.parametrize("around", [False, True])
def test_continuous_sampling_law(cancer, around):
    Xtr, Xte, _, _ = cancer
    seen = []

    def model(A):
        seen.append(A.copy())
        return np.tile([0.3, 0.7], (len(A), 1))

    lime = LimeTabularExplainer(
        model,
        num_samples=20000,
        discretize_continuous=False,
        sample_around_instance=around,
        random_state=0,
    ).fit(Xtr)
    lime.explain(Xte[:1])
    A = seen[-1][1:]
    centre = Xte[0] if around else Xtr.mean(axis=0)
    z = (A - centre) / Xtr.std(axis=0)
    assert_allclose(z.mean(axis=0), 0, atol=0.05)
    assert_allclose(z.std(axis=0), 1, atol=0.03)
    assert_array_equal(seen[-1][0], Xte[0])


def test_entropy_discretizer_needs_y(cancer):
    Xtr, _, ytr, model = cancer
    lime = LimeTabularExplainer(model, discretizer="entropy", num_samples=300)
    with pytest.raises(ValueError, match="needs the training labels"):
        lime.fit(Xtr)
    e = lime.set_params(random_state=0).fit(Xtr, ytr).explain(Xtr[:2])
    assert np.isfinite(e.values).all()


# -- categorical features ---------------------------------------------------------------
def _string_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], size=n, p=[0.5, 0.3, 0.2])
    X = np.empty((n, 3), dtype=object)
    X[:, 0] = rng.normal(size=n)
    X[:, 1] = colour
    X[:, 2] = rng.normal(size=n)
    return X


def _colour_model(A):
    A = np.asarray(A, dtype=object)
    assert all(isinstance(v, str) for v in A[:, 1]), "model must receive strings"
    red = (A[:, 1] == "red").astype(float)
    p = 1 / (1 + np.exp(-(3 * red + 0.2 * A[:, 0].astype(float))))
    return np.column_stack([1 - p, p])


@pytest.mark.parametrize("discretize", [True, False])
def test_categorical_strings_object_array(discretize):
    X = _string_data()
    lime = LimeTabularExplainer(
        _colour_model,
        num_features=1,
        num_samples=2000,
        discretize_continuous=discretize,
        random_state=0,
    ).fit(X)
    assert_array_equal(lime.categorical_features_, [1])
    e = lime.explain(X[:6], target=1)
    assert_array_equal(e.selected[:, 0], 1)
    red = X[:6, 1] == "red"
    # Being red raises p(class 1); "same colour as the row" cuts both ways.
    assert np.all(e.values[red, 1] > 0) and np.all(e.values[~red, 1] < 0)


def test_categorical_strings_dataframe_and_unseen_value():
    pd = pytest.importorskip("pandas")
    X = _string_data()
    df = pd.DataFrame(
        {"a": X[:, 0].astype(float), "colour": X[:, 1], "b": X[:, 2].astype(float)}
    )
    frames = []

    def model(frame):
        frames.append(frame)
        assert isinstance(frame, pd.DataFrame)
        return _colour_model(frame.to_numpy(dtype=object))

    lime = LimeTabularExplainer(model, num_features=2, num_samples=500, random_state=0)
    lime.fit(df)
    assert list(lime.feature_names_in_) == ["a", "colour", "b"]
    new = df.iloc[:2].copy()
    new.loc[new.index[0], "colour"] = "purple"
    e = lime.explain(new)
    assert list(e.feature_names) == ["a", "colour", "b"]
    assert frames[-1]["colour"].iloc[0] == "purple"
    assert frames[-1]["a"].dtype == np.float64
    assert np.isfinite(e.values).all()


def test_integer_coded_categorical(iris):
    X, y, _ = iris
    X = X.copy()
    X[:, 0] = (X[:, 0] > np.median(X[:, 0])).astype(float) * 2 + 1  # codes {1, 3}
    model = LogisticRegression(max_iter=1000).fit(X, y)
    lime = LimeTabularExplainer(
        model,
        categorical_features=[0],
        discretize_continuous=False,
        num_samples=500,
        random_state=0,
    ).fit(X)
    seen = []
    orig = model.predict_proba

    class Spy:
        classes_ = model.classes_

        def fit(self):  # pragma: no cover - marks it as a model
            pass

        def predict_proba(self, A):
            seen.append(A)
            return orig(A)

    lime.set_params(estimator=Spy()).fit(X)
    lime.explain(X[:2])
    assert set(np.unique(seen[-1][:, 0])) <= {1.0, 3.0}


# -- input validation: nothing reaches the model ----------------------------------------
@pytest.mark.parametrize(
    "bad, match",
    [
        ("nan", "NaN"),
        ("inf", "infinity"),
        ("width", "features"),
        ("empty", "0 sample"),
        ("string", "convert|non-numeric"),
    ],
)
def test_bad_input_rejected_before_any_call(iris, bad, match):
    X, _, model = iris
    fn = Counting(model.predict_proba)
    lime = LimeTabularExplainer(fn, num_samples=100, random_state=0).fit(X)
    fn.calls = 0
    Xb = X[:3].astype(object) if bad == "string" else X[:3].copy()
    if bad == "nan":
        Xb[1, 2] = np.nan
    elif bad == "inf":
        Xb[2, 0] = np.inf
    elif bad == "width":
        Xb = Xb[:, :3]
    elif bad == "empty":
        Xb = Xb[:0]
    else:
        Xb[1, 1] = "abc"
    with pytest.raises(ValueError, match=match):
        lime.explain(Xb)
    assert fn.calls == 0


def test_bad_categorical_input_rejected_before_any_call():
    X = _string_data()
    fn = Counting(_colour_model)
    lime = LimeTabularExplainer(fn, num_samples=100, random_state=0).fit(X)
    fn.calls = 0
    Xb = X[:3].copy()
    Xb[1, 0] = "oops"
    with pytest.raises(ValueError, match="non-numeric value 'oops'"):
        lime.explain(Xb)
    Xb = X[:3].copy()
    Xb[2, 1] = None
    with pytest.raises(ValueError, match="missing value in categorical column 1"):
        lime.explain(Xb)
    assert fn.calls == 0


@pytest.mark.parametrize(
    "response, match",
    [
        ("nan", "non-finite"),
        ("negative", "outside"),
        ("sum", "do not sum to 1"),
        ("shape", "columns|shape"),
    ],
)
def test_bad_model_response_names_rows(iris, response, match):
    X, _, model = iris

    def broken(A):
        P = model.predict_proba(A)
        hit = np.isclose(A[:, 0], X[4, 0]) & np.isclose(A[:, 1], X[4, 1])
        if response == "nan":
            P[hit, 0] = np.nan
        elif response == "negative":
            P[hit, 0] = -0.1
        elif response == "sum":
            P[hit] *= 0.9
        elif hit.any():
            return P[1:]
        return P

    lime = LimeTabularExplainer(broken, num_samples=200, random_state=0).fit(X)
    with pytest.raises(ModelResponseError, match=match) as info:
        lime.explain(X[[0, 4, 7]])
    if response != "shape":
        assert_array_equal(info.value.rows, [1])
        assert "row(s) 1 " in str(info.value)


def test_unfitted_model_needs_y(iris):
    X, y, _ = iris
    lime = LimeTabularExplainer(LogisticRegression(max_iter=1000), num_samples=100)
    with pytest.raises(ValueError, match="not fitted"):
        lime.fit(X)
    lime.fit(X, y)
    assert hasattr(lime.estimator_, "coef_")
    assert lime.estimator.__dict__.get("coef_") is None  # the parameter is untouched


def test_fitted_model_not_refitted(iris):
    X, y, model = iris
    before = model.coef_.copy()
    lime = LimeTabularExplainer(model, num_samples=100).fit(X[:50], y[:50])
    assert lime.estimator_ is model
    assert_array_equal(model.coef_, before)


# -- determinism ----------------------------------------------------------------------
@pytest.mark.slow  # starts process workers
def test_determinism_batch_and_jobs(cancer):
    Xtr, Xte, _, model = cancer
    kw = {"num_samples": 400, "num_features": 4, "random_state": 0}
    lime = LimeTabularExplainer(model, **kw).fit(Xtr)
    a = lime.explain(Xte[:6])
    b = lime.explain(Xte[:6])
    c = LimeTabularExplainer(model, n_jobs=2, **kw).fit(Xtr).explain(Xte[:6])
    rows = [lime.explain(Xte[i : i + 1]) for i in range(6)]
    d = LimeTabularExplainer(model, batch_size=500, **kw).fit(Xtr).explain(Xte[:6])
    for other in [b, c, d]:
        assert_array_equal(a.values, other.values)
        assert_array_equal(a.selected, other.selected)
        assert_array_equal(a.score, other.score)
    assert_array_equal(a.values, np.vstack([r.values for r in rows]))
    e = (
        LimeTabularExplainer(model, **{**kw, "random_state": 1})
        .fit(Xtr)
        .explain(Xte[:6])
    )
    assert not np.array_equal(a.values, e.values)


def test_score_is_held_out_fidelity(cancer):
    Xtr, Xte, _, model = cancer
    lime = LimeTabularExplainer(
        model,
        num_samples=500,
        discretize_continuous=False,
        sample_around_instance=True,
        random_state=0,
    ).fit(Xtr)
    s = lime.score(Xte[:4])
    e = lime.explain(Xte[:4])
    assert s <= 1.0
    # Fresh perturbations: close to, but not the same number as, the in-sample R².
    assert abs(s - e.score.mean()) < 0.2
    assert s != e.score.mean()
    assert s == lime.score(Xte[:4])


def test_clone_and_params(iris):
    X, _, model = iris
    lime = LimeTabularExplainer(model, num_samples=100, random_state=0)
    c = clone(lime)
    assert c.get_params()["num_samples"] == 100
    with pytest.raises(ValueError):
        LimeTabularExplainer(model, feature_selection="bogus").fit(X)
    with pytest.raises(ValueError):
        LimeTabularExplainer(model, num_samples=1).fit(X)


def test_dataframe_model_gets_frames(cancer):
    pd = pytest.importorskip("pandas")
    Xtr, Xte, ytr, _ = cancer
    cols = [f"f{j}" for j in range(Xtr.shape[1])]
    model = LogisticRegression(solver="newton-cholesky").fit(
        pd.DataFrame(Xtr, columns=cols), ytr
    )
    lime = LimeTabularExplainer(model, num_samples=200, random_state=0).fit(Xtr)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = lime.explain(Xte[:2])
    assert list(e.feature_names) == cols


# -- statistical parity with lime 0.2.0.1 --------------------------------------------------
@pytest.mark.parity
@pytest.mark.parametrize("discretize", [True, False])
def test_parity_with_lime_digits_mlp(discretize):
    """Mean surrogate weights over 20 seeds agree with lime's within sampling error.

    Criterion per feature: |mean_ours - mean_lime| <= 4 sqrt(se_ours² + se_lime²).
    The fuller table (bc_rf too, selection auto) is in benchmarks/RESULTS.md.
    """
    lime_tabular = pytest.importorskip("lime.lime_tabular")
    from sklearn_plm_explain.utils._anchors import make_anchor_model

    anchor = make_anchor_model("digits_mlp")
    model, Xtr, Xte = anchor.model, anchor.X_train, anchor.X_test
    x = Xte[0]
    label = int(model.predict(x[None, :])[0])
    theirs, ours = [], []
    for seed in range(20):
        e = lime_tabular.LimeTabularExplainer(
            Xtr,
            feature_selection="none",
            discretize_continuous=discretize,
            random_state=seed,
        ).explain_instance(
            x, model.predict_proba, labels=(label,), num_features=64, num_samples=3000
        )
        w = np.zeros(64)
        for j, v in e.as_map()[label]:
            w[j] = v
        theirs.append(w)
        ours.append(
            LimeTabularExplainer(
                model,
                feature_selection="none",
                discretize_continuous=discretize,
                num_samples=3000,
                random_state=seed,
            )
            .fit(Xtr)
            .explain(x[None, :], target=label)
            .values[0]
        )
    theirs, ours = np.array(theirs), np.array(ours)
    se = np.sqrt((theirs.var(axis=0, ddof=1) + ours.var(axis=0, ddof=1)) / 20)
    diff = np.abs(theirs.mean(axis=0) - ours.mean(axis=0))
    within = diff <= 4 * se
    assert within.mean() >= 0.97, np.flatnonzero(~within)
    # The weights are not trivially equal: real signal on several features.
    assert (np.abs(ours.mean(axis=0)) > 4 * se).sum() >= 5


# -- labels: what each weight belongs to -------------------------------------------------
def _stepped(X):
    """P(class 1) falls with x0, rises with x1; x2 does nothing."""
    X = np.asarray(X, dtype=float)
    p = 1 / (1 + np.exp(2.0 * (X[:, 0] - 4.5) - (X[:, 1] - 4.5)))
    return np.column_stack([1 - p, p])


def test_labels_carry_the_bin_condition():
    # Quartiles of 1..8 are 2.75, 4.5 and 6.25.
    X = np.tile(np.arange(1.0, 9.0), (3, 1)).T
    lime = LimeTabularExplainer(
        _stepped, num_features=2, num_samples=2000, random_state=0
    ).fit(X)
    e = lime.explain(np.array([[1.0, 3.0, 5.0], [8.0, 5.0, 7.0]]), target=1)
    # The row's own bins, in lime's wording; x2 is never selected.
    assert e.as_list(0)[0][0] == "x0 <= 2.75"
    assert {name for name, _ in e.as_list(0)} == {"x0 <= 2.75", "2.75 < x1 <= 4.50"}
    assert {name for name, _ in e.as_list(1)} == {"x0 > 6.25", "4.50 < x1 <= 6.25"}
    # They read the right way round: a low x0 raises P(class 1), a high one
    # lowers it.
    assert dict(e.as_list(0))["x0 <= 2.75"] > 0
    assert dict(e.as_list(1))["x0 > 6.25"] < 0
    assert e.selected_names.shape == e.selected.shape


def test_labels_in_frames_plots_and_json():
    X = np.tile(np.arange(1.0, 9.0), (3, 1)).T
    lime = LimeTabularExplainer(
        _stepped, num_features=2, num_samples=500, random_state=0,
        feature_names=["debt", "income", "age"],
    ).fit(X)  # fmt: skip
    e = lime.explain(np.array([[1.0, 3.0, 5.0]]), target=1)
    assert {name for name, _ in e.as_list(0)} == {"debt <= 2.75", "2.75 < income <= 4.50"}  # fmt: skip
    long = e.to_frame(kind="long")
    assert long["label"].tolist() == ["debt <= 2.75", "2.75 < income <= 4.50", "age"]
    assert long["feature"].tolist() == ["debt", "income", "age"]
    wide = e.to_frame()
    assert wide["as_list"][0].startswith("debt <= 2.75 (+")
    import json

    from sklearn_plm_explain import Explanation

    back = Explanation.from_dict(json.loads(json.dumps(e.to_dict())))
    assert back.as_list(0) == e.as_list(0)


def test_categorical_labels_name_the_category():
    rng = np.random.default_rng(0)
    n = 400
    X = np.empty((n, 2), dtype=object)
    X[:, 0] = rng.normal(size=n)
    X[:, 1] = rng.choice(["small", "big"], size=n)

    def model(A):
        p = np.where(A[:, 1] == "big", 0.8, 0.3)
        return np.column_stack([1 - p, p])

    lime = LimeTabularExplainer(
        model, num_features=1, num_samples=500, random_state=0,
        feature_names=["weight", "size_cat"], discretize_continuous=False,
    ).fit(X)  # fmt: skip
    rows = np.array([[0.1, "big"], [0.1, "small"], [0.1, "huge"]], dtype=object)
    e = lime.explain(rows, target=1)
    assert [e.as_list(i)[0][0] for i in range(3)] == [
        "size_cat=big",
        "size_cat=small",
        "size_cat=huge",  # unseen in training: still named by its value
    ]
    # Integer codes print as integers, as in lime.
    Xc = np.column_stack([rng.normal(size=n), rng.integers(0, 3, n)])
    lime = LimeTabularExplainer(
        lambda A: np.column_stack([1 - A[:, 1] / 3, A[:, 1] / 3]),
        categorical_features=[1], num_features=1, num_samples=300, random_state=0,
    ).fit(Xc)  # fmt: skip
    assert lime.explain(np.array([[0.0, 2.0]]), target=1).as_list(0)[0][0] == "x1=2"


@pytest.mark.parity
@pytest.mark.parametrize("discretizer", ["quartile", "decile", "entropy"])
def test_labels_match_lime_as_list(discretizer):
    """Every feature's label, as lime 0.2.0.1's as_list writes it, on the same
    data: breast cancer bins plus an integer-coded categorical column with
    names."""
    lime_tabular = pytest.importorskip("lime.lime_tabular")
    data = load_breast_cancer()
    X, y = data.data[:, :8], data.target
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 3, X.shape[0])
    sizes = np.array(["small", "medium", "big"])
    names = [*data.feature_names[:8], "size_cat"]
    X_codes = np.column_stack([X, codes])
    X_words = np.column_stack([X.astype(object), sizes[codes]])
    Xtr, ytr = X_codes[:450], y[:450]

    def proba(A):
        p = 1 / (1 + np.exp(-(A[:, 0].astype(float) - 14.0)))
        return np.column_stack([1 - p, p])

    theirs = lime_tabular.LimeTabularExplainer(
        Xtr, feature_names=names, categorical_features=[8],
        categorical_names={8: list(sizes)}, discretizer=discretizer,
        training_labels=ytr, feature_selection="none", random_state=0,
    )  # fmt: skip
    ours = LimeTabularExplainer(
        proba, feature_names=names, discretizer=discretizer,
        feature_selection="none", num_samples=300, random_state=0,
    ).fit(X_words[:450], ytr)  # fmt: skip
    rows = np.arange(450, 480)
    e = ours.explain(X_words[rows], target=1)
    for pos, r in enumerate(rows):
        exp = theirs.explain_instance(
            X_codes[r], proba, labels=(1,), num_features=9, num_samples=300
        )
        expected = {
            j: name for (j, _), (name, _) in zip(exp.as_map()[1], exp.as_list(1))
        }
        got = dict(zip(e.selected[pos].tolist(), e.selected_names[pos].tolist()))
        assert got == expected


# -- narrow kernels: effective sample size ------------------------------------------------
@pytest.mark.parametrize("discretize", [True, False])
@pytest.mark.parametrize("selection", ["forward_selection", "auto", "lasso_path"])
def test_narrow_kernel_is_flagged_not_a_crash(cancer, discretize, selection):
    """At kernel_width 0.1 the weights sit on the row itself: every selection
    mode runs (forward selection used to raise 'Singular matrix'), and the rows
    are flagged instead of reporting a perfect fit."""
    Xtr, Xte, _, model = cancer
    lime = LimeTabularExplainer(
        model, kernel_width=0.1, num_features=5, num_samples=500,
        discretize_continuous=discretize, feature_selection=selection,
        random_state=0,
    ).fit(Xtr)  # fmt: skip
    with pytest.warns(ConvergenceWarning, match="fewer effective samples"):
        e = lime.explain(Xte[:3])
    assert_array_equal(e.status, "few_effective_samples")
    assert not e.converged.any()
    assert (e.effective_samples < 2).all()
    assert np.isfinite(e.values).all()


def test_default_kernel_has_many_effective_samples(cancer):
    Xtr, Xte, _, model = cancer
    lime = LimeTabularExplainer(model, num_samples=1000, random_state=0).fit(Xtr)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        e = lime.explain(Xte[:3])
    assert e.converged.all()
    assert (e.effective_samples > 900).all()
    # Kish's size of the weights themselves.
    from sklearn_plm_explain._lime._output import effective_samples

    assert effective_samples([1.0, 1.0, 0.0, 0.0]) == 2.0
    assert effective_samples([1e-300, 1e-300]) == 2.0
    assert effective_samples(np.zeros(3)) == 0.0


# -- contributions ---------------------------------------------------------------------
def test_contributions_add_up_to_the_local_prediction(cancer):
    Xtr, Xte, _, model = cancer
    for disc in (True, False):
        lime = LimeTabularExplainer(
            model, num_samples=500, discretize_continuous=disc, random_state=0
        ).fit(Xtr)
        e = lime.explain(Xte[:4])
        assert_allclose(e.baseline + e.contribution.sum(axis=1), e.local_pred)
        assert_allclose(e.data, Xte[:4])
        if not disc:
            # Continuous: weight per training std, value standardised.
            z = (Xte[:4] - Xtr.mean(axis=0)) / Xtr.std(axis=0)
            assert_allclose(e.contribution, e.values * z)
            assert_allclose(e.standardized, e.values)


# -- progress ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_progress_counts_every_row_once(cancer, record_bars, n_jobs, tmp_path):
    """One model call per row (batch_size = num_samples): the bar moves row by
    row (n_jobs rows at a time in parallel), its updates add up to the rows
    explained, and the explanations do not change."""
    Xtr, Xte, _, model = cancer
    kw = {"num_samples": 300, "num_features": 3, "random_state": 0}
    quiet = LimeTabularExplainer(model, **kw).fit(Xtr).explain(Xte[:7])
    recorded_bars = record_bars()
    lime = LimeTabularExplainer(
        model, batch_size=300, n_jobs=n_jobs, verbose=1, **kw
    ).fit(Xtr)
    e = lime.explain(Xte[:7])
    (bar,) = recorded_bars
    assert bar.total == 7 and bar.verbose == 1 and bar.closed
    assert sum(bar.updates) == 7
    assert bar.updates == [n_jobs] * (7 // n_jobs) + [7 % n_jobs] * (7 % n_jobs > 0)
    assert_array_equal(e.values, quiet.values)
    # Rows reused from a checkpoint are counted once, at the end.
    lime.explain(Xte[:7], checkpoint=tmp_path / "ck")
    lime.explain(Xte[:7], checkpoint=tmp_path / "ck")
    assert [sum(b.updates) for b in recorded_bars[1:]] == [7, 7]
    assert recorded_bars[2].updates == [7]


def test_verbose_zero_prints_nothing_and_verbose_shows_a_bar(cancer, capfd):
    Xtr, Xte, _, model = cancer
    kw = {"num_samples": 300, "num_features": 3, "random_state": 0}
    LimeTabularExplainer(model, **kw).fit(Xtr).explain(Xte[:3])
    LimeTabularExplainer(model, n_jobs=2, **kw).fit(Xtr).explain(Xte[:3])
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    LimeTabularExplainer(model, verbose=1, **kw).fit(Xtr).explain(Xte[:3])
    out, err = capfd.readouterr()
    assert out == ""
    assert "3/3" in err


def test_progress_steps_keep_the_rows_finished_before_a_failure(cancer, record_bars):
    """With a progress bar, rows explained in earlier steps survive a model
    failure in ``partial``, exactly as without one; later rows are not run."""
    Xtr, Xte, _, model = cancer
    calls = []

    def failing(A):
        calls.append(len(A))
        P = model.predict_proba(A)
        if len(calls) == 4:
            P[:, 0] = np.nan
        return P

    kw = {"num_samples": 300, "num_features": 3, "random_state": 0}
    quiet = LimeTabularExplainer(model, **kw).fit(Xtr).explain(Xte[:7])
    recorded_bars = record_bars()
    lime = LimeTabularExplainer(failing, batch_size=300, verbose=1, **kw).fit(Xtr)
    calls.clear()
    with pytest.raises(ModelResponseError) as info:
        lime.explain(Xte[:7])
    partial = info.value.partial
    assert_array_equal(partial.status, ["converged"] * 3 + ["not_run"] * 4)
    assert_array_equal(partial.values[:3], quiet.values[:3])
    assert_array_equal(info.value.rows, [3])
    assert sum(recorded_bars[-1].updates) == 3
