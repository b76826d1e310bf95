"""Rows near a region boundary: locating it, and one-sided certification."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

from sklearn_plm_explain import OpenAPIExplainer, decision_features, local_linear_model
from sklearn_plm_explain._boundary import (
    SPARE,
    crossed_points,
    fit_hinge,
    kink_residuals,
    thin,
)
from sklearn_plm_explain._openapi import _MAX_PROBES

RTOL = 1e-8


# -- the hinge fit ----------------------------------------------------------------
def _hinge_data(rng, d, K, n, offset, radius=1e-3):
    normal = rng.standard_normal(d)
    normal /= np.linalg.norm(normal)
    c = rng.standard_normal(K)
    U = radius * rng.standard_normal((n, d))
    E = np.outer(np.maximum(U @ normal - offset, 0.0), c)
    return U, E, normal


@pytest.mark.parametrize("d, K", [(3, 1), (20, 4), (64, 10)])
def test_hinge_recovers_the_boundary(d, K):
    rng = np.random.default_rng(d)
    offset = 2e-4
    U, E, normal = _hinge_data(rng, d, K, max(6 * (d + 1), 80), offset)
    beyond = U @ normal > offset
    # Rounding noise, and the row's own slope known only to 1e-8.
    E += 1e-15 * rng.standard_normal(E.shape)
    E += 1e-8 * U @ rng.standard_normal((d, K))
    crossed = crossed_points(E)
    # Points barely beyond may be missed, none on the row's side is taken.
    assert not np.any(crossed & ~beyond)
    assert crossed.sum() >= 0.9 * beyond.sum()
    hinge = fit_hinge(U, E, crossed)
    assert hinge.normal @ normal == pytest.approx(1.0, abs=1e-6)
    assert hinge.offset == pytest.approx(offset, rel=1e-3)


def test_too_few_crossed_points_are_refused():
    rng = np.random.default_rng(0)
    U, E, _ = _hinge_data(rng, 30, 3, 40, 1e-3)
    crossed = crossed_points(E)
    assert 0 < crossed.sum() < 30 + 1 + SPARE
    with pytest.raises(ValueError, match="Too few"):
        fit_hinge(U, E, crossed)


def test_two_boundaries_are_not_taken_for_one():
    rng = np.random.default_rng(1)
    U, E1, _ = _hinge_data(rng, 10, 4, 200, 1e-4)
    normal2 = rng.standard_normal(10)
    normal2 /= np.linalg.norm(normal2)
    # Same points, a second boundary with its own normal and jump.
    E2 = np.outer(np.maximum(U @ normal2 - 1e-4, 0.0), rng.standard_normal(4))
    assert crossed_points(E1) is not None
    assert crossed_points(E1 + E2) is None


def test_a_boundary_that_is_not_flat_is_refused():
    # One jump direction, but residuals quadratic beyond the boundary.
    rng = np.random.default_rng(2)
    U, E, normal = _hinge_data(rng, 5, 3, 200, 0.0)
    E = E * (U @ normal)[:, None] / 1e-3
    assert fit_hinge(U, E, crossed_points(E)) is None


def test_a_row_beyond_the_fitted_boundary_is_refused():
    # Residuals affine on every side: the row itself would be beyond.
    rng = np.random.default_rng(2)
    U = 1e-3 * rng.standard_normal((100, 5))
    E = np.outer(U @ np.ones(5) + 1e-2, [1.0, -1.0])
    crossed = crossed_points(E)
    assert crossed.all()
    assert fit_hinge(U, E, crossed) is None


def test_thin_design_is_symmetric_and_stays_inside_the_slab():
    rng = np.random.default_rng(3)
    normal = rng.standard_normal(8)
    normal /= np.linalg.norm(normal)
    u = rng.standard_normal((500, 8))
    v = thin(u, normal, 0.01)
    np.testing.assert_allclose(np.abs(v @ normal), 0.01)
    # Components along the boundary are kept; each side gets its own points.
    along = u - np.outer(u @ normal, normal)
    np.testing.assert_allclose(v - np.outer(v @ normal, normal), along, atol=1e-12)
    np.testing.assert_array_equal(np.sign(v @ normal), np.sign(u @ normal))


def test_kink_residuals_vanish_on_the_base_model():
    rng = np.random.default_rng(4)
    slope, icpt = rng.standard_normal((6, 3)), rng.standard_normal(3)
    base_U = 1e-4 * rng.standard_normal((20, 6))
    U = 1e-2 * rng.standard_normal((30, 6))
    E = kink_residuals(U, U @ slope + icpt, base_U, base_U @ slope + icpt, True)
    np.testing.assert_allclose(E, 0.0, atol=1e-12)


# -- rows placed at a known distance from a ReLU boundary --------------------------
@pytest.fixture(scope="module")
def relu_net():
    X, y = make_blobs(n_samples=400, centers=4, n_features=12, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((24, 12), max_iter=300, random_state=0).fit(X, y)
    return mlp, X


def _hyperplane_distances(mlp, x, scale):
    """Scaled distance of x to every hidden unit's hyperplane, first order."""
    h, J, out = x, np.diag(scale), []
    for W, b in zip(mlp.coefs_[:-1], mlp.intercepts_[:-1]):
        z = h @ W + b
        G = J @ W
        out.append(np.abs(z) / np.linalg.norm(G, axis=0))
        h, J = np.maximum(z, 0.0), G * (z > 0)
    return np.concatenate(out)


def _place_near_boundary(mlp, x, scale, distance, side):
    """Move x along its nearest first-layer unit's normal to ``distance``."""
    W, b = mlp.coefs_[0], mlp.intercepts_[0]
    g = scale[:, None] * W
    z = x @ W + b
    j = np.argmin(np.abs(z) / np.linalg.norm(g, axis=0))
    gj = g[:, j]
    goal = side * distance * np.linalg.norm(gj)
    return x + scale * (goal - z[j]) * gj / (gj @ gj)


def _rows_near_boundaries(mlp, X, scale, distance, n=16, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for i in rng.permutation(len(X)):
        x = _place_near_boundary(mlp, X[i], scale, distance, rng.choice([-1, 1]))
        dist = np.sort(_hyperplane_distances(mlp, x, scale))
        # One boundary close by, every other one far: the case under test.
        if dist[1] > 1e-2 and abs(dist[0] - distance) <= 1e-3 * distance + 1e-15:
            rows.append(x)
        if len(rows) == n:
            break
    return np.array(rows)


def _errors(e, mlp, rows):
    W, _ = local_linear_model(mlp, rows)
    truth = decision_features(W, e.target)
    return np.abs(e.values - truth).sum(1) / np.abs(truth).sum(1)


class _PlainSearch(OpenAPIExplainer):
    """The explainer with boundary location switched off."""

    def _near_boundary(self, state, i, search):
        return None


@pytest.mark.parametrize("distance", [1e-6, 2e-6])
def test_rows_close_to_a_boundary_are_certified_exact(relu_net, distance):
    # 1e-6 standard deviations from a boundary: every centred cube that stays
    # on the row's side is too small to resolve the slope; the thin cube is
    # not, across the boundary only.
    mlp, X = relu_net
    explainer = OpenAPIExplainer(mlp, random_state=0).fit(X)
    rows = _rows_near_boundaries(mlp, X, explainer.scale_, distance)
    assert len(rows) == 16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(rows)
        plain = _PlainSearch(mlp, random_state=0).fit(X).explain(rows)
    err = _errors(e, mlp, rows)
    assert np.all(err[e.converged] <= RTOL)
    assert e.converged.mean() >= 0.9, e.status
    assert e.converged.sum() > plain.converged.sum()


def test_rows_on_a_boundary_are_never_exact_and_wrong(relu_net):
    mlp, X = relu_net
    explainer = OpenAPIExplainer(mlp, random_state=0).fit(X)
    rows = _rows_near_boundaries(mlp, X, explainer.scale_, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(rows)
    err = _errors(e, mlp, rows)
    assert np.all(err[e.converged] <= RTOL)
    assert np.all(e.status[~e.converged] == "boundary")


@given(
    seed=st.integers(0, 2**16),
    log_distance=st.floats(-12.0, -4.0),
    side=st.sampled_from([-1, 1]),
)
def test_near_boundary_rows_exact_or_flagged(relu_net, seed, log_distance, side):
    mlp, X = relu_net
    explainer = OpenAPIExplainer(mlp, random_state=seed).fit(X)
    x = X[seed % len(X)]
    row = _place_near_boundary(mlp, x, explainer.scale_, 10.0**log_distance, side)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(row[None])
    if e.converged[0]:
        assert _errors(e, mlp, row[None])[0] <= RTOL


def test_a_thin_slab_between_parallel_boundaries_is_exact_or_flagged():
    # Two hidden units with the same normal: the row sits in a slab 3e-8
    # wide, beyond which both sides are other regions.
    rng = np.random.default_rng(5)
    X = rng.standard_normal((60, 6))
    y = np.arange(60) % 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((4,), max_iter=5, random_state=0).fit(X, y)
    W1 = rng.standard_normal((6, 4))
    W1[:, 1] = W1[:, 0]
    explainer = OpenAPIExplainer(mlp, random_state=0).fit(X)
    g = explainer.scale_ * W1[:, 0]
    b1 = np.array([0.0, -3e-8 * np.linalg.norm(g), 5.0, 5.0])
    mlp.coefs_[0], mlp.intercepts_[0] = W1, b1
    mlp.coefs_[1] = 3.0 * rng.standard_normal((4, 3))
    rows = []
    for k in range(12):
        x = 0.1 * rng.standard_normal(6)
        # Unit 0 just active, unit 1 just inactive: a slab around x.
        x = x + explainer.scale_ * (1e-8 * np.linalg.norm(g) - x @ W1[:, 0]) * g / (
            g @ g
        )
        rows.append(x)
    rows = np.array(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(rows)
    err = _errors(e, mlp, rows)
    assert np.all(err[e.converged] <= RTOL)


def test_probes_are_counted_and_calls_stay_bounded(relu_net, counting):
    # Every query a probe spends is counted for its row, and probes add at
    # most a fixed number of rounds: calls do not grow with the rows.
    mlp, X = relu_net
    fn = counting(mlp.predict_proba)
    explainer = OpenAPIExplainer(fn, random_state=0).fit(X)
    rows = _rows_near_boundaries(mlp, X, explainer.scale_, 1e-6)
    fn.calls = fn.rows = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(rows)
    assert fn.rows == e.n_queries.sum()
    assert fn.calls <= 1 + e.n_iter.max() + _MAX_PROBES
    assert e.converged.mean() >= 0.9


# -- further boundaries on the row's own side ------------------------------------
def _hand_built_mlp(rng, d, W1, b1, W2, b2):
    """An MLPClassifier whose weights are set by hand (ReLU, one layer)."""
    K = W2.shape[1]
    X = rng.standard_normal((200, d)) * rng.uniform(0.5, 3, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((W1.shape[1],), max_iter=1, random_state=0)
        mlp.fit(X, np.arange(200) % K)
    mlp.coefs_, mlp.intercepts_ = [W1, W2], [b1, b2]
    return mlp, X


def _unit(rng, d):
    v = rng.standard_normal(d)
    return v / np.linalg.norm(v)


def _explain_one(mlp, X, x, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = OpenAPIExplainer(mlp, random_state=seed).fit(X).explain(x[None])
    return e, _errors(e, mlp, x[None])[0]


@pytest.mark.parametrize("seed", range(6))
def test_a_weak_parallel_boundary_behind_the_row_is_never_certified_across(seed):
    # The row lies 5e-9 (scaled) from one boundary and 1.2e-8 from a parallel
    # one on its other side whose jump is a thousand times weaker: the region
    # beyond the weak one agrees with the row's to within the response noise
    # at the row, so a cube reaching into it must not be taken for the row's.
    rng = np.random.default_rng(seed)
    d, K, H = 2 + seed % 3, 3, 5
    mlp, X = _hand_built_mlp(
        rng, d, np.zeros((d, H)), np.zeros(H), np.zeros((H, K)), np.zeros(K)
    )
    scale = X.std(axis=0)
    x = 0.3 * rng.standard_normal(d) * scale
    n = _unit(rng, d)
    W1 = rng.standard_normal((d, H)) / scale[:, None]
    b1 = 1.0 - x @ W1  # units 2.. active, far away
    W1[:, 0], b1[0] = -n / scale, n @ (x / scale) + 5e-9
    W1[:, 1], b1[1] = n / scale, -(n @ (x / scale)) + 1.2e-8
    W2 = rng.standard_normal((H, K))
    W2[1] *= 1e-3
    mlp.coefs_, mlp.intercepts_ = [W1, W2], [b1, 0.3 * rng.standard_normal(K)]
    e, err = _explain_one(mlp, X, x, seed)
    assert not e.converged[0] or err <= RTOL, (e.status[0], err)


@pytest.mark.parametrize("seed", range(6))
def test_a_staircase_of_weak_boundaries_is_never_certified_across(seed):
    # One boundary 3e-9 from the row; on its other side 40 parallel ones
    # 6e-8 apart whose small jumps add up to a gentle curvature.
    rng = np.random.default_rng(100 + seed)
    d, K, M = 2 + seed % 4, 3, 40
    mlp, X = _hand_built_mlp(
        rng, d, np.zeros((d, M + 1)), np.zeros(M + 1), np.zeros((M + 1, K)), np.zeros(K)
    )
    scale = X.std(axis=0)
    x = 0.3 * rng.standard_normal(d) * scale
    n = _unit(rng, d)
    W1 = np.repeat((-n / scale)[:, None], M + 1, axis=1)
    b1 = n @ (x / scale) - 6e-8 * np.arange(M + 1)
    b1[0] = n @ (x / scale) + 3e-9
    W2 = np.empty((M + 1, K))
    W2[0] = 3.0 * rng.standard_normal(K)
    W2[1:] = 0.03 * 6e-8 * _unit(rng, K)
    mlp.coefs_, mlp.intercepts_ = [W1, W2], [b1, 0.3 * rng.standard_normal(K)]
    e, err = _explain_one(mlp, X, x, seed)
    assert not e.converged[0] or err <= RTOL, (e.status[0], err)


def test_boundary_search_respects_max_iter(relu_net):
    mlp, X = relu_net
    explainer = OpenAPIExplainer(mlp, max_iter=6, random_state=0).fit(X)
    rows = _rows_near_boundaries(mlp, X, explainer.scale_, 1e-7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(rows)
    assert e.n_iter.max() <= 6
