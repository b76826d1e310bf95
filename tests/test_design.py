"""The closed-form orthogonal design and the product-based fits over it.

The fast fits must bound every error at least as high as the weighted QR fit
they replace, and be exact to within that bound.
"""

import numpy as np
import pytest

from sklearn_plm_explain._certify import fit_local_models
from sklearn_plm_explain._design import design, orthogonal_design


def _cube(rng, d, n, radius, K=3, x_scale=1.0, intercept=20.0):
    """An affine model's responses on a cube drawn by the orthogonal design."""
    x0 = x_scale * rng.standard_normal((1, d))
    step = np.full((1, d), radius)
    u = orthogonal_design(rng, n, d)
    points = u * step + x0
    A = np.ones((1, n + 1, d + 1))
    A[0, 0, 1:] = 0.0
    A[0, 1:, 1:] = (points - x0) / step
    G = rng.standard_normal((d, K))
    b = intercept * rng.standard_normal(K)
    Y = (np.vstack([x0, points]) @ G + b)[None]
    return A, Y, x0, step, G


@pytest.mark.parametrize("n, d", [(6, 5), (69, 64), (300, 64), (262, 256)])
def test_orthogonal_design_has_the_closed_form_gram_matrix(n, d):
    U = orthogonal_design(np.random.default_rng(0), n, d)
    A = np.column_stack([np.ones(n), U])
    assert U.shape == (n, d)
    np.testing.assert_allclose(A.T @ A, n * np.eye(d + 1), atol=1e-10 * n)
    assert np.abs(U).max() <= np.sqrt(2.0) * (1 + 1e-15)


def test_design_is_the_rows_own_draw():
    a = design(np.random.default_rng(1), 40, 30, fresh=True)
    b = design(np.random.default_rng(1), 40, 30, fresh=True)
    c = design(np.random.default_rng(2), 40, 30, fresh=True)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    # Points added to a cube are standard normal, not orthogonal.
    extra = design(np.random.default_rng(1), 8, 30, fresh=False)
    assert extra.shape == (8, 30)


@pytest.mark.parametrize("radius", [1e-3, 1e-6, 1e-9])
@pytest.mark.parametrize("seed", range(3))
def test_fast_fit_is_within_its_bound_and_at_least_as_cautious(radius, seed):
    rng = np.random.default_rng(seed)
    d, n = 40, 45
    A, Y, x0, step, G = _cube(rng, d, n, radius)
    tau = 1e-14 * (1.0 + 0.2 * rng.random((1, n + 1)))
    Y = Y + tau[..., None] * rng.standard_normal(Y.shape)
    fast = fit_local_models(A, Y, x0, step, False, tau, n_orthogonal=np.array([n + 1]))
    slow = fit_local_models(A, Y, x0, step, False, tau)
    slope, _, sigma_hat, se_x, dof = fast
    # Residual RMS and standard errors never below the weighted fit's.
    assert np.all(sigma_hat >= slow[2] * (1 - 1e-9))
    assert np.all(se_x >= slow[3] * (1 - 1e-9))
    assert dof[0] == n + 1 - (d + 1)
    # Error of each column within the bound the certificate builds from them
    # (noise level at least 1, times the sum of the standard errors, with the
    # confidence factor of the residuals).
    err = np.abs(slope[0] - G).sum(axis=0)
    level = max(1.0, sigma_hat.max() * 3.0)
    assert np.all(err <= level * se_x[0].sum())


def test_fast_fit_standard_errors_cover_the_actual_scatter():
    # Monte Carlo: the scatter of the fast slopes over many noise draws stays
    # below the standard errors it reports, coefficient by coefficient.
    rng = np.random.default_rng(5)
    d, n, draws = 12, 16, 4000
    A, Y, x0, step, G = _cube(rng, d, n, 1e-4, K=1)
    tau = 1e-10 * np.where(rng.random((1, n + 1)) < 0.3, 1.2, 1.0)
    noise = tau[..., None] * rng.standard_normal((draws, n + 1, 1))
    Ys = np.repeat(Y, draws, axis=0) + noise
    fit = fit_local_models(
        np.repeat(A, draws, axis=0),
        Ys,
        np.repeat(x0, draws, axis=0),
        np.repeat(step, draws, axis=0),
        False,
        np.repeat(tau, draws, axis=0),
        n_orthogonal=np.full(draws, n + 1),
    )
    spread = fit[0][:, :, 0].std(axis=0)
    assert np.all(spread <= fit[3][0] * 1.05)


def test_noisy_points_are_weighted_by_a_low_rank_correction():
    # A few points known only as 1 - p carry far more noise: the fast fit
    # gives them their weighted-fit weights, as the weighted QR fit does.
    rng = np.random.default_rng(3)
    d, n = 30, 40
    A, Y, x0, step, G = _cube(rng, d, n, 1e-3)
    tau = np.full((1, n + 1), 1e-14)
    heavy = rng.choice(np.arange(1, n + 1), size=4, replace=False)
    tau[0, heavy] = 1e-6
    Y = Y + tau[..., None] * rng.standard_normal(Y.shape)
    fast = fit_local_models(A, Y, x0, step, False, tau, n_orthogonal=np.array([n + 1]))
    slow = fit_local_models(A, Y, x0, step, False, tau)
    assert fast[4][0] == slow[4][0] == n + 1 - (d + 1)
    np.testing.assert_allclose(fast[0], slow[0], rtol=0, atol=1e-9)
    # Equal weights here, so both are the weighted least-squares fit (up to
    # the rounding of residuals a millionth of the heavy points' noise).
    np.testing.assert_allclose(fast[2], slow[2], rtol=1e-3)
    assert np.all(fast[3] >= slow[3] * (1 - 1e-9))
    err = np.abs(fast[0][0] - G).sum(axis=0)
    assert np.all(err <= max(1.0, 3 * fast[2].max()) * fast[3][0].sum())


def test_grown_cube_is_fitted_by_a_low_rank_update():
    # An orthogonal cube with standard normal points added (a grown cube):
    # the Woodbury solve matches the weighted QR fit.
    rng = np.random.default_rng(4)
    d, n, extra = 30, 35, 8
    A, Y, x0, step, G = _cube(rng, d, n, 1e-3)
    more = rng.standard_normal((extra, d))
    pts = more * step + x0
    A2 = np.concatenate([A, np.ones((1, extra, d + 1))], axis=1)
    A2[0, n + 1 :, 1:] = (pts - x0) / step
    Y2 = np.concatenate([Y, (pts @ G + (Y[0, 0] - x0 @ G))[None]], axis=1)
    tau = np.full((1, n + 1 + extra), 1e-14)
    fast = fit_local_models(
        A2, Y2, x0, step, False, tau, n_orthogonal=np.array([n + 1])
    )
    slow = fit_local_models(A2, Y2, x0, step, False, tau)
    np.testing.assert_allclose(fast[0], slow[0], rtol=0, atol=1e-9)
    assert fast[4][0] == slow[4][0] == n + 1 + extra - (d + 1)
    assert np.all(fast[3] >= slow[3] * (1 - 1e-9))


def test_a_design_that_is_not_orthogonal_is_caught_by_its_residuals():
    # The fast fit trusts the design's closed form; a design perturbed far
    # beyond its representation error must not come out exact-looking: its
    # solve does not converge to the truth, and the residuals show it.
    rng = np.random.default_rng(6)
    d, n = 20, 25
    A, Y, x0, step, G = _cube(rng, d, n, 1e-3, intercept=0.0)
    A[0, 1:, 1:] *= 1.0 + 0.05 * rng.standard_normal((n, d))
    Y = (np.concatenate([np.zeros((1, d)), A[0, 1:, 1:] * step]) @ G)[None]
    tau = np.full((1, n + 1), 1e-14)
    slope, _, sigma_hat, se_x, _ = fit_local_models(
        A, Y, x0, step, False, tau, n_orthogonal=np.array([n + 1])
    )
    err = np.abs(slope[0] - G).sum(axis=0)
    claimed = max(1.0, 3 * sigma_hat.max()) * se_x[0].sum()
    assert np.all(err <= claimed) or sigma_hat.max() > 8.0
