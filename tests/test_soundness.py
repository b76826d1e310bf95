"""OpenAPIExplainer against models built to fool its certificate.

Each construction is a service a user may meet in production (float32
exports, clipped or smoothed probabilities, sigmoids computed another way)
or a model made to sit just past what the residual test sees. The property
asserted is the certificate's: no row is reported ``exact`` with an error
above ``rtol`` against the model's white-box truth, and no certified row's
error exceeds its ``error_bound``.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from sklearn_plm_explain import (
    LogisticModelTreeClassifier,
    OpenAPIExplainer,
    decision_features,
    local_linear_model,
)
from sklearn_plm_explain.utils._served import onnx_float32, weak_kink_mlp

RTOL = 1e-8


def _worst_error(e, W):
    """Worst relative L1 error of any class's decision features, per row."""
    C = W.shape[2]
    out = []
    for c in range(C):
        truth = decision_features(W, np.full(W.shape[0], c))
        est = C / (C - 1) * e.coef[:, :, c]
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.abs(est - truth).sum(1) / np.abs(truth).sum(1))
    return np.max(out, axis=0)


def _assert_sound(e, W):
    err = _worst_error(e, W)
    exact = e.status == "exact"
    certified = exact | (e.status == "approximate")
    assert not np.any(exact & (err > RTOL)), err[exact].max()
    assert np.all(err[certified] <= e.error_bound[certified]), np.max(
        err[certified] / e.error_bound[certified]
    )


class _Counting:
    """A callable model that counts its query points and refuses NaN."""

    def __init__(self, fn):
        self.fn, self.points = fn, 0

    def __call__(self, X):
        X = np.asarray(X)
        assert np.isfinite(X).all(), "a non-finite point reached the model"
        self.points += X.shape[0]
        return self.fn(X)


@pytest.fixture(scope="module")
def digits_constant_column():
    """Digits with a feature held at 0.1, whose spread in fit is 1.4e-17."""
    X, y = load_digits(return_X_y=True)
    X = X / 16
    X[:, 0] = 0.1
    assert 0 < X[:, 0].std() < 1e-15
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((16,), max_iter=200, random_state=0).fit(X, y)
    return X, y, mlp


def test_feature_constant_up_to_rounding_is_constant(digits_constant_column):
    X, _, mlp = digits_constant_column
    explainer = OpenAPIExplainer(mlp, random_state=0).fit(X)
    # The constant feature gets the fallback step, not one at its rounding.
    assert explainer.scale_[0] == pytest.approx(np.median(explainer.scale_[1:]))
    e = explainer.explain(X[:300])
    W, _ = local_linear_model(mlp, X[:300])
    assert (e.status == "exact").mean() > 0.9
    _assert_sound(e, W)


def test_rows_beyond_the_steps_are_refused_before_any_query(
    digits_constant_column,
):
    X, _, mlp = digits_constant_column
    model = _Counting(mlp.predict_proba)
    explainer = OpenAPIExplainer(model, random_state=0).fit(X)
    spent = model.points
    rows = X[:4].copy()
    rows[2, 5] = 1e300
    with pytest.raises(ValueError, match=r"Rows \[2\] have values too large"):
        explainer.explain(rows)
    assert model.points == spent


def test_auto_radius_with_region_reuse_is_finite():
    X, y = load_digits(return_X_y=True)
    X = X[:500] / 16
    lmt = LogisticModelTreeClassifier(random_state=0).fit(X, y[:500])
    model = _Counting(lmt.predict_proba)
    explainer = OpenAPIExplainer(
        model, init_radius="auto", reuse_regions=True, random_state=0
    ).fit(X)
    assert np.isfinite(explainer.init_radius_)
    assert explainer.min_radius <= explainer.init_radius_ <= explainer.max_radius
    e = explainer.explain(X[:300])
    W, _ = local_linear_model(lmt, X[:300])
    assert (e.status == "exact").mean() > 0.9
    _assert_sound(e, W)


@pytest.fixture(scope="module")
def digits_mlp():
    """The digits MLP and 300 held-out rows with its white-box truth."""
    X, y = load_digits(return_X_y=True)
    X = X / 16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((64, 32), max_iter=500, random_state=0)
        mlp.fit(X[:1200], y[:1200])
    rows = X[1200:1500]
    W, _ = local_linear_model(mlp, rows)
    return mlp, X[:1200], rows, W


def _explain(fn, X_fit, rows):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return OpenAPIExplainer(fn, random_state=0).fit(X_fit).explain(rows)


def test_clipped_and_renormalised_probabilities_are_never_certified_wrong(
    digits_mlp,
):
    # A service that clips to [1e-7, 1 - 1e-7] and renormalises: the floored
    # classes move, by the renormalisation alone, so they are not bitwise
    # constant; 44 rows of 478 were certified exact on them, up to 9.9e8
    # times past their bounds.
    mlp, X_fit, rows, W = digits_mlp

    def clipped(Z):
        P = np.clip(mlp.predict_proba(Z), 1e-7, 1 - 1e-7)
        return P / P.sum(axis=1, keepdims=True)

    e = _explain(clipped, X_fit, rows)
    _assert_sound(e, W)
    floored = (mlp.predict_proba(rows) < 1e-7).any(axis=1)
    assert floored.sum() > 200
    assert set(e.status[floored]) <= {"saturated", "flat"}


@pytest.mark.parametrize("eps", [1e-9, 1e-7, 1e-5])
def test_smoothed_probabilities_are_not_piecewise_linear(digits_mlp, eps):
    # (P + eps) / (1 + K eps): smooth, its slopes off the network's by up to
    # eps / p; shrinking the cube hides its curvature below the noise.
    mlp, X_fit, rows, W = digits_mlp
    e = _explain(lambda Z: (mlp.predict_proba(Z) + eps) / (1 + 10 * eps), X_fit, rows)
    _assert_sound(e, W)
    assert (e.status == "not_piecewise_linear").mean() > 0.5


@pytest.mark.parametrize("eps", [1e-9, 1e-7])
def test_an_offset_within_the_sum_tolerance_is_not_certified(digits_mlp, eps):
    # eps added to one class: the sum misses 1 by eps, inside the responses'
    # validation, but far beyond a float64 softmax's rounding.
    mlp, X_fit, rows, W = digits_mlp

    def offset(Z):
        P = mlp.predict_proba(Z)
        P[:, 0] += eps
        return P

    e = _explain(offset, X_fit, rows)
    _assert_sound(e, W)
    assert not np.isin(e.status, ["exact", "approximate"]).any()


def test_the_plain_network_is_still_certified(digits_mlp):
    # What the rules above cost an ordinary float64 network: nothing.
    mlp, X_fit, rows, W = digits_mlp
    e = _explain(mlp, X_fit, rows)
    _assert_sound(e, W)
    assert (e.status == "exact").mean() >= 0.99
    assert e.n_queries.mean() <= 1.10 * (rows.shape[1] + 2)


def _rows_at_logits(rng, X, w, b, lo, hi):
    """Data rows moved along ``w`` to logits ``|z| ~ U(lo, hi)`` of alternating
    sign: the small probability is p1 in even rows, p0 = 1 - p1 in odd ones."""
    n = X.shape[0]
    z = np.where(np.arange(n) % 2 == 0, -1.0, 1.0) * rng.uniform(lo, hi, n)
    return X + ((z - X @ w - b) / (w @ w))[:, None] * w


def test_a_sigmoid_computed_through_tanh_keeps_its_bounds():
    # p = 0.5 tanh(z / 2) + 0.5 in float64: a small p carries an absolute
    # error and lands on the grid of 2^-54, so only about half of a cube's
    # points sit on the grid of 1 - p; weighted apart, the rest were fitted
    # as precise and "exact" rows came out up to 7 times past their bounds.
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    lr = LogisticRegression(max_iter=5000).fit(X, y)
    w, b = lr.coef_[0], lr.intercept_[0]
    rows = _rows_at_logits(np.random.default_rng(0), X[:300], w, b, 1.0, 17.0)

    def tanh_sigmoid(Z):
        p = 0.5 * np.tanh(0.5 * (np.asarray(Z) @ w + b)) + 0.5
        return np.column_stack([1.0 - p, p])

    e = _explain(tanh_sigmoid, X, rows)
    W, _ = local_linear_model(lr, rows)
    _assert_sound(e, W)
    assert (e.status == "exact").mean() > 0.9


def _breast_cancer_mlp_for_onnx():
    """A binary network on standardised breast cancer, and its data; skips
    without ONNX Runtime and skl2onnx."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("skl2onnx")
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((32, 16), max_iter=500, random_state=0).fit(X, y)
    return mlp, X


@pytest.mark.slow
def test_onnx_float32_binary_network_keeps_its_bounds():
    # A real ONNX Runtime float32 export of a binary network; rows at logits
    # 5 to 17 of both signs, so that both p0 and p1 are small.
    mlp, X = _breast_cancer_mlp_for_onnx()
    rows = _binary_rows_at_logits(mlp, X, np.random.default_rng(0), 5.0, 17.0)
    assert rows.shape[0] >= 300
    W, _ = local_linear_model(mlp, rows)
    e = _explain(onnx_float32(mlp, X.shape[1]), X, rows)
    _assert_sound(e, W)
    z = np.log(mlp.predict_proba(rows)[:, 1]) - np.log(mlp.predict_proba(rows)[:, 0])
    assert (z < -5).sum() > 100 and (z > 5).sum() > 100


@pytest.mark.slow
def test_onnx_float32_kinks_behind_the_noise_keep_their_bounds():
    # The same export at logits 4 to 10: the small probability's absolute
    # error counts at every point of its class, so the residual test keeps
    # its power, and more rows are certified on cubes that hold a kink too
    # weak to show in their residuals (within 0.04 to 0.25 cube radii of
    # the row), whose bias of the slope the bound must cover: without that
    # part 8 of these rows were past their bounds (up to 1.6 times), and
    # with the absolute error counted only where it shows, 2 (up to 1.25
    # times).
    mlp, X = _breast_cancer_mlp_for_onnx()
    rows = _binary_rows_at_logits(mlp, X, np.random.default_rng(2), 4.0, 10.0)
    assert rows.shape[0] >= 300
    W, _ = local_linear_model(mlp, rows)
    e = _explain(onnx_float32(mlp, X.shape[1]), X, rows)
    _assert_sound(e, W)
    assert (e.status == "approximate").sum() > 100


def _binary_rows_at_logits(mlp, X, rng, lo, hi, n=340):
    """Rows of a binary network placed by Newton steps on its exact local
    slopes at logits ``|z| ~ U(lo, hi)`` of alternating sign."""
    Z = np.resize(X, (n, X.shape[1])) + 0.05 * rng.standard_normal((n, X.shape[1]))
    target = np.where(np.arange(n) % 2 == 0, -1.0, 1.0) * rng.uniform(lo, hi, n)
    for _ in range(80):
        W, b = local_linear_model(mlp, Z)
        g = W[:, :, 1] - W[:, :, 0]
        s = np.einsum("ij,ij->i", g, Z) + b[:, 1] - b[:, 0]
        step = ((target - s) / np.einsum("ij,ij->i", g, g))[:, None] * g
        norm = np.linalg.norm(step, axis=1, keepdims=True)
        Z = Z + step * np.minimum(1.0, 0.5 / np.maximum(norm, 1e-300))
    W, b = local_linear_model(mlp, Z)
    g = W[:, :, 1] - W[:, :, 0]
    s = np.einsum("ij,ij->i", g, Z) + b[:, 1] - b[:, 0]
    return Z[np.abs(s - target) < 1e-6][:300]


def _affine_base(seed, n_rows, d, C):
    """Fit data on anisotropic scales, random affine logits ``X @ A + c`` and
    rows around the origin."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((400, d)) * rng.uniform(0.5, 3.0, d)
    scale = X.std(axis=0)
    A = rng.standard_normal((d, C)) / scale[:, None]
    c = 0.3 * rng.standard_normal(C)
    rows = 0.5 * rng.standard_normal((n_rows, d)) * scale
    return rng, X, scale, A, c, rows


def _with_hinges(A, c, U, u0, V, X, rows):
    """The softmax of ``X @ A + c + relu(X @ U + u0) @ V`` (hinges given as
    lists of units), the rows' true slopes (n, d, C), the fit data and rows."""
    U, u0, V = np.array(U).T, np.array(u0), np.array(V)

    def proba(Z):
        Z = np.asarray(Z)
        z = Z @ A + c + np.maximum(Z @ U + u0, 0.0) @ V
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    on = (rows @ U + u0 > 0).astype(np.float64)
    W = A[None] + np.einsum("dh,nh,hc->ndc", U, on, V)
    return proba, W, X, rows


def _slab_network(n_rows, seed, d=16, C=4, width=1e-7, rel=1e-5):
    """Affine logits plus, for each row, a slab ``width`` standard deviations
    wide (two ReLU units) whose inside slope differs by ``rel`` of the base:
    two thirds of the rows inside their slab, the others just outside.
    Returns the probabilities' function, the rows' true slopes (n, d, C),
    the fit data and the rows."""
    rng, X, scale, A, c, rows = _affine_base(seed, n_rows, d, C)
    U, u0, V = [], [], []
    centred = np.abs(A - A.mean(axis=1, keepdims=True)).sum()
    for x in rows:
        n = rng.standard_normal(d)
        n = n / np.linalg.norm(n) / scale
        if rng.uniform() < 2 / 3:
            t = x @ n - rng.uniform(0.02, 0.98) * width
        else:
            t = x @ n + rng.choice([1.0, -1.0 - width]) * 10 ** rng.uniform(-9, -6.5)
        v = rng.standard_normal(C)
        v = v / np.linalg.norm(v)
        size = rel * centred / np.abs(np.outer(n, v - v.mean())).sum()
        U += [n, n]
        u0 += [-t, -t - width]
        V += [size * v, -size * v]
    return _with_hinges(A, c, U, u0, V, X, rows)


def test_a_slab_thinner_than_the_cubes_is_not_certified_on_seed_0():
    # Seed 0 only: see the expected failures below for other seeds. A step
    # across a slab 1e-7 standard deviations wide leaves a residual
    # that stays put as the cube shrinks: at float64's floor at every point
    # it is not noise to learn, and no cube around the slab sees its slope
    # (32 of 211 rows were "exact" up to 1.3e4 times past their bounds).
    proba, W, X, rows = _slab_network(300, 0)
    e = _explain(proba, X, rows)
    _assert_sound(e, W)


@pytest.mark.xfail(
    strict=True,
    reason="a known limit: on some slabs the row's own first cube is certified "
    "(the step across the slab below what its test resolves), and region reuse "
    "hands that model to rows whose own search refuses it, since its probes "
    "resolve slopes to rtol only at their reach",
)
@pytest.mark.parametrize("seed", [6, 37])
def test_a_slab_thinner_than_the_cubes_on_other_seeds(seed):
    # Of seeds 0 to 39, nine certify wrong rows: seed 6 one (its own cube,
    # relative error 1.9e-5), seed 37 121, of which 120 reused the one wrong
    # model (one with reuse_regions=False). Strict: a fix makes this fail
    # until the test is made an ordinary one.
    proba, W, X, rows = _slab_network(300, seed)
    e = _explain(proba, X, rows)
    _assert_sound(e, W)


def _dense_kink_network(n_rows, seed, rel, d=16, C=4, per_row=16):
    """Affine logits plus ``per_row`` weak ReLU hinges near each row, random
    directions, their hyperplanes 1e-9 to 1e-4 standard deviations from the
    row on a random side, each changing the slopes by about ``rel``."""
    rng, X, scale, A, c, rows = _affine_base(seed, n_rows, d, C)
    centred = np.abs(A - A.mean(axis=1, keepdims=True)).sum()
    U, u0, V = [], [], []
    for x in rows:
        for _ in range(per_row):
            n = rng.standard_normal(d)
            n = n / np.linalg.norm(n) / scale
            v = rng.standard_normal(C)
            v = v / np.linalg.norm(v)
            size = rel * centred / np.abs(np.outer(n, v - v.mean())).sum()
            U.append(n)
            u0.append(-(x @ n + rng.choice([-1.0, 1.0]) * 10 ** rng.uniform(-9, -4)))
            V.append(size * 10 ** rng.uniform(-0.5, 0.5) * v)
    return _with_hinges(A, c, U, u0, V, X, rows)


@pytest.mark.slow
@pytest.mark.parametrize("rel", [1e-7, 1e-9, 1e-11])
def test_dense_weak_kinks_keep_their_bounds(rel):
    # Sixteen weak hinges around every row, some inside every cube.
    proba, W, X, rows = _dense_kink_network(300, 1, rel)
    e = _explain(proba, X, rows)
    _assert_sound(e, W)


def test_a_weak_kink_inside_the_certifying_cube_keeps_its_bound():
    # A kink too weak for the certifying cube's residuals, which a larger
    # cube of the same row did show: the fit's slope is a blend of both
    # sides. The float64 floor covers the rounding, not that bias (without
    # the bias bound a row here was "exact" at 1.1e-8 against rtol 1e-8).
    # Every row next to a unit whose output weights are 1e-7 times their own.
    mlp, X, rows = weak_kink_mlp(weakness=(1e-7,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = (
            OpenAPIExplainer(mlp, random_state=0, reuse_regions=False)
            .fit(X)
            .explain(rows)
        )
    W = local_linear_model(mlp, rows)[0]
    certified = np.isin(e.status, ["exact", "approximate"])
    # Rows certified after a larger cube failed: the case the bound is for.
    assert np.sum(certified & (e.n_iter > 1) & (e.radius > 1e-7)) >= 5
    _assert_sound(e, W)
