"""The closed-form orthogonal design and the product-based fits over it.

The fast fits must bound every error at least as high as the weighted QR fit
they replace, and be exact to within that bound.
"""

import warnings

import numpy as np
import pytest

from sklearn_plm_explain._openapi._design import (
    basis_bounds,
    design,
    orthogonal_design,
    orthogonal_designs,
)
from sklearn_plm_explain._openapi._fit import _row_sets, fit_local_models


def _cube(rng, d, n, radius, K=3, x_scale=1.0, intercept=20.0, scales=None):
    """An affine model's responses on a cube drawn by the orthogonal design
    (``scales``: per-feature units of the step, default 1)."""
    x0 = x_scale * rng.standard_normal((1, d))
    step = np.full((1, d), radius) * (1.0 if scales is None else scales)
    u = orthogonal_design(rng, n, d)
    points = u * step + x0
    A = np.ones((1, n + 1, d + 1))
    A[0, 0, 1:] = 0.0
    A[0, 1:, 1:] = points - x0  # the fits take offsets in input units
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
    deviation, largest = basis_bounds(n, d)
    assert np.abs(U).max() <= largest
    # The measured deviation covers the design's, with its rounding.
    G = A.T @ A / n - np.eye(d + 1)
    assert np.linalg.norm(G, 2) <= deviation


@pytest.mark.parametrize("n, d", [(6, 5), (69, 64), (133, 128)])
def test_designs_drawn_together_are_each_rows_own(n, d):
    # A round draws its rows' cubes together: each must be bit for bit the
    # design its row's generator gives alone, with the same columns and
    # signs, so that a row's explanation does not depend on its batch.
    rng = np.random.default_rng(7)
    scale = rng.uniform(0.5, 2.0, (4, d))
    together = np.empty((4, n, d))
    layouts = orthogonal_designs(
        [np.random.default_rng(s) for s in range(4)], n, d, together, scale
    )
    for r in range(4):
        alone = []
        U = orthogonal_design(
            np.random.default_rng(r), n, d, scale=scale[r], layout=alone
        )
        np.testing.assert_array_equal(together[r], U)
        assert layouts[r][0] == alone[0][0]
        np.testing.assert_array_equal(layouts[r][1], alone[0][1])
        np.testing.assert_array_equal(layouts[r][2], alone[0][2])
    # Different generators draw different designs.
    assert not np.array_equal(together[0], together[1])


@pytest.mark.parametrize("n, d", [(6, 5), (69, 64), (70, 64)])
def test_drawn_columns_and_signs_are_uniform(n, d):
    # Each design takes d of the basis's n - 1 non-constant columns, every
    # choice equally likely, in increasing order, with independent fair signs.
    from sklearn_plm_explain._openapi._design import _block_draws, _columns_and_signs

    rng = np.random.default_rng(5)
    draws = np.stack([_block_draws(rng, n, d) for _ in range(4000)])
    cols, sign = _columns_and_signs(draws, d)
    assert cols.shape == sign.shape == (4000, d)
    assert np.all(np.diff(cols, axis=1) > 0)
    assert cols.min() >= 1 and cols.max() <= n - 1
    assert set(np.unique(sign)) == {-1.0, 1.0}
    # Each column is left out with probability (n - 1 - d) / (n - 1).
    counts = np.bincount(cols.ravel(), minlength=n)[1:]
    expected = 4000 * d / (n - 1)
    spread = np.sqrt(expected * (1 - d / (n - 1))) + 1e-9
    assert np.all(np.abs(counts - expected) <= 5 * spread)
    if n - 1 > d:
        # Not always the same columns left out: every one of them is, at times.
        assert np.all(counts < 4000)
    assert abs((sign < 0).mean() - 0.5) < 5 * 0.5 / np.sqrt(sign.size)


def test_designs_drawn_together_are_one_block():
    with pytest.raises(ValueError, match="not one block"):
        orthogonal_designs(
            [np.random.default_rng(0)], 12, 5, np.empty((1, 12, 5)), np.ones((1, 5))
        )


def test_rows_are_fitted_on_views_unless_many_runs_of_small_designs():
    # A first round with one row left out fits the others on two views of
    # the batch (no copy of 99 designs); many runs of small designs take one
    # copy instead of a call per run; large designs always take views.
    one_out = np.ones(100, dtype=bool)
    one_out[55] = False
    assert _row_sets(one_out, 36_400) == [slice(0, 55), slice(56, 100)]
    scattered = np.arange(100) % 3 != 0
    (only,) = _row_sets(scattered, 36_400)
    np.testing.assert_array_equal(only, scattered)
    assert len(_row_sets(scattered, 2**20)) == 33
    assert _row_sets(np.zeros(5, dtype=bool), 10) == []


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


@pytest.mark.parametrize("seed", range(3))
def test_fast_fit_with_feature_scales_of_many_orders(seed):
    # The designs hold offsets in input units and the fits scale by the step
    # in their products: steps from 1e-10 to 1e-2 (feature scales over eight
    # orders) and rows far from 0 must fit as the QR fit of [1, U] does.
    rng = np.random.default_rng(10 + seed)
    d, n = 30, 35
    scales = 10.0 ** rng.uniform(-6, 2, d)
    A, Y, x0, step, G = _cube(rng, d, n, 1e-4, x_scale=50.0, scales=scales)
    G = G / scales[:, None]  # slopes of every size in input units
    Y = (np.vstack([x0, x0 + A[0, 1:, 1:]]) @ G + 3.0)[None]
    tau = 1e-14 * (1.0 + 0.2 * rng.random((1, n + 1)))
    Y = Y + tau[..., None] * rng.standard_normal(Y.shape)
    fast = fit_local_models(A, Y, x0, step, False, tau, n_orthogonal=np.array([n + 1]))
    slow = fit_local_models(A, Y, x0, step, False, tau)
    assert np.all(fast[2] >= slow[2] * (1 - 1e-9))
    assert np.all(fast[3] >= slow[3] * (1 - 1e-9))
    # Each slope within its standard errors of the truth, feature by feature
    # (the errors differ by orders of magnitude across features).
    err = np.abs(fast[0][0] - G)
    level = max(1.0, fast[2].max() * 3.0)
    assert np.all(err <= 5.0 * level * fast[3][0][:, None])


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


@pytest.mark.parametrize("extra", [8, 31])
def test_grown_cube_is_fitted_by_a_low_rank_update(extra):
    # An orthogonal cube with standard normal points added (a grown cube):
    # the Woodbury solve matches the weighted QR fit, up to as many added
    # points as coefficients.
    rng = np.random.default_rng(4)
    d, n = 30, 35
    A, Y, x0, step, G = _cube(rng, d, n, 1e-3)
    more = rng.standard_normal((extra, d))
    pts = more * step + x0
    A2 = np.concatenate([A, np.ones((1, extra, d + 1))], axis=1)
    A2[0, n + 1 :, 1:] = pts - x0
    Y2 = np.concatenate([Y, (pts @ G + (Y[0, 0] - x0 @ G))[None]], axis=1)
    tau = np.full((1, n + 1 + extra), 1e-14)
    fast = fit_local_models(
        A2, Y2, x0, step, False, tau, n_orthogonal=np.array([n + 1])
    )
    slow = fit_local_models(A2, Y2, x0, step, False, tau)
    np.testing.assert_allclose(fast[0], slow[0], rtol=0, atol=1e-9)
    assert fast[4][0] == slow[4][0] == n + 1 + extra - (d + 1)
    assert np.all(fast[3] >= slow[3] * (1 - 1e-9))


def test_corrected_rows_fitted_together_are_each_fitted_as_alone():
    # The low-rank corrections of a batch are padded to its largest: rows of
    # one heavy point, four heavy points, added points (a grown cube of a
    # smaller block) and none at all, fitted together, give what each gives
    # alone, and what the weighted least-squares fit with the same weights
    # gives, with standard errors at least the weighted fit's.
    rng = np.random.default_rng(11)
    d, m, K = 20, 30, 3
    rows = []
    for block, n_heavy in ((m - 1, 1), (m - 1, 4), (m - 7, 2), (m - 1, 0)):
        A, Y, x0, step, G = _cube(rng, d, block - 1, 1e-3, K=K)
        extra = m - block
        pts = rng.standard_normal((extra, d)) * step + x0
        A = np.concatenate([A, np.ones((1, extra, d + 1))], axis=1)
        A[0, block:, 1:] = pts - x0
        Y = np.concatenate([Y, (pts @ G + (Y[0, 0] - x0 @ G))[None]], axis=1)
        tau = 1e-14 * (1.0 + 1e-4 * rng.random((1, m)))
        tau[0, rng.choice(np.arange(1, block), size=n_heavy, replace=False)] = 1e-9
        Y = Y + tau[..., None] * rng.standard_normal(Y.shape)
        rows.append((A, Y, x0, step, tau, np.array([block])))
    together = fit_local_models(
        *(np.concatenate([r[k] for r in rows]) for k in range(4)),
        False,
        np.concatenate([r[4] for r in rows]),
        n_orthogonal=np.concatenate([r[5] for r in rows]),
    )
    for i, (A, Y, x0, step, tau, block) in enumerate(rows):
        alone = fit_local_models(A, Y, x0, step, False, tau, n_orthogonal=block)
        for k in (0, 1, 3, 4):  # slopes, intercepts, standard errors, dof
            np.testing.assert_allclose(together[k][i], alone[k][0], rtol=1e-12)
        # The residual RMS is bounded from the residuals before the last
        # update (_squares_rows): equal up to that bound's rounding slack.
        np.testing.assert_allclose(together[2][i], alone[2][0], rtol=1e-3)
        # The weights the corrected fit gives: 1, or the heavy points' own.
        w = np.where(tau[0] > 1.25 * tau[0].min(), (tau[0].min() / tau[0]) ** 2, 1.0)
        B = A[0] / np.concatenate([[1.0], step[0]])
        ref = np.linalg.solve(B.T @ (w[:, None] * B), B.T @ (w[:, None] * Y[0]))
        np.testing.assert_allclose(
            together[0][i], ref[1:] / step[0][:, None], rtol=0, atol=1e-7
        )
        slow = fit_local_models(A, Y, x0, step, False, tau)
        assert np.all(together[3][i] >= slow[3][0] * (1 - 1e-9))


def test_plain_rows_fitted_with_corrected_ones_are_each_fitted_as_alone():
    # A first round whose few rows have heavy points (a small probability on
    # the grid of 1 - p) fits all rows by the plain products and replaces
    # the corrected rows' fits: every row gets what it gets alone.
    rng = np.random.default_rng(12)
    d, n, K = 20, 25, 3
    rows, truth = [], []
    for heavy in (0, 2, 0, 0, 1, 0):
        A, Y, x0, step, G = _cube(rng, d, n, 1e-3, K=K)
        tau = 1e-14 * (1.0 + 1e-4 * rng.random((1, n + 1)))
        tau[0, rng.choice(np.arange(1, n + 1), size=heavy, replace=False)] = 1e-9
        Y = Y + tau[..., None] * rng.standard_normal(Y.shape)
        rows.append((A, Y, x0, step, tau))
        truth.append(G)
    block = np.full(len(rows), n + 1)
    together = fit_local_models(
        *(np.concatenate([r[k] for r in rows]) for k in range(4)),
        False,
        np.concatenate([r[4] for r in rows]),
        n_orthogonal=block,
    )
    for i, (A, Y, x0, step, tau) in enumerate(rows):
        alone = fit_local_models(A, Y, x0, step, False, tau, n_orthogonal=block[:1])
        for k in (0, 1, 3, 4):
            np.testing.assert_allclose(together[k][i], alone[k][0], rtol=1e-12)
        np.testing.assert_allclose(together[2][i], alone[2][0], rtol=1e-3)
    # The heavy rows keep their weights: far closer to the truth than the
    # plain (unweighted) fit, which their noisy points pull away.
    for i in (1, 4):
        A, Y, x0, step, tau = rows[i]
        B = A[0] / np.concatenate([[1.0], step[0]])
        plain = np.linalg.lstsq(B, Y[0], rcond=None)[0][1:] / step[0][:, None]
        err = np.abs(together[0][i] - truth[i]).max()
        assert err <= 1e-2 * np.abs(plain - truth[i]).max()


def test_a_design_that_is_not_orthogonal_is_caught_by_its_residuals():
    # The fast fit trusts the design's closed form; a design perturbed far
    # beyond its representation error must not come out exact-looking: its
    # solve does not converge to the truth, and the residuals show it.
    rng = np.random.default_rng(6)
    d, n = 20, 25
    A, Y, x0, step, G = _cube(rng, d, n, 1e-3, intercept=0.0)
    A[0, 1:, 1:] *= 1.0 + 0.05 * rng.standard_normal((n, d))
    Y = (np.concatenate([np.zeros((1, d)), A[0, 1:, 1:]]) @ G)[None]
    tau = np.full((1, n + 1), 1e-14)
    slope, _, sigma_hat, se_x, _ = fit_local_models(
        A, Y, x0, step, False, tau, n_orthogonal=np.array([n + 1])
    )
    err = np.abs(slope[0] - G).sum(axis=0)
    claimed = max(1.0, 3 * sigma_hat.max()) * se_x[0].sum()
    assert np.all(err <= claimed) or sigma_hat.max() > 8.0


# -- a response that is curved but has zero mean on the cube ------------------------
def _saddle_mlp(seed, d=8, half_width=2e-6, spacing=4e-8):
    """A binary ReLU net whose logit is ``g.z + z_a z_b`` around its row.

    ``z`` are the offsets from the row in units of the feature scales. The
    product is built as the difference of two convex staircases of ReLU kinks
    ``spacing`` apart along ``(e_a + e_b) / sqrt(2)`` and ``(e_a - e_b) /
    sqrt(2)``, over ``half_width`` either side of the row: within that width
    the net is a saddle up to ``spacing**2 / 8``, far below the responses'
    rounding noise.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((200, d)) * rng.uniform(0.5, 3, d)
    n_knots = int(round(2 * half_width / spacing))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((2 * n_knots + 1,), max_iter=1, random_state=0)
        mlp.fit(X[:20], np.arange(20) % 2)
    scale = X.std(axis=0)
    x0 = 0.3 * rng.standard_normal(d) * scale
    a, b = rng.choice(d, size=2, replace=False)
    knots = -half_width + (np.arange(n_knots) + 0.5) * spacing
    W1 = np.zeros((d, 2 * n_knots + 1))
    b1 = np.zeros(2 * n_knots + 1)
    W2 = np.zeros((2 * n_knots + 1, 1))
    for k, sign in enumerate([1.0, -1.0]):
        v = np.zeros(d)
        v[a], v[b] = 1.0 / np.sqrt(2.0), sign / np.sqrt(2.0)
        units = slice(k * n_knots, (k + 1) * n_knots)
        W1[:, units] = (v / scale)[:, None]
        b1[units] = -(v / scale) @ x0 - knots
        W2[units, 0] = sign * spacing
    g = rng.standard_normal(d) / scale
    W1[:, -1], b1[-1], W2[-1, 0] = g, 50.0 - g @ x0, 1.0
    mlp.coefs_, mlp.intercepts_ = [W1, W2], [b1, np.array([-50.0])]
    return mlp, X, x0


def test_a_curvature_of_zero_mean_leaves_residuals_on_a_fresh_cube():
    # The design's job is to make a response that is not affine on the cube
    # show in the residuals of the fit. (A cosine basis failed this: the
    # product of two of its columns is a sum of two others.) A product of two features' offsets
    # biases the fitted slopes (its projection on the columns of [1, U]); it
    # must leave residuals of comparable size.
    d, n = 8, 8 + 5
    for seed in range(20):
        rng = np.random.default_rng(seed)
        U = design(rng, n, d, fresh=True)
        A = np.column_stack([np.ones(n + 1), np.vstack([np.zeros(d), U])])
        a, b = rng.choice(d, size=2, replace=False)
        h = A[:, 1 + a] * A[:, 1 + b]
        coef, *_ = np.linalg.lstsq(A, h, rcond=None)
        resid = np.linalg.norm(h - A @ coef) / np.sqrt(n - d)
        assert resid >= 1e-3 * np.abs(coef[1:]).sum(), (seed, resid, coef)


def test_a_saddle_of_dense_kinks_is_never_certified_wrong():
    # A ReLU net with kinks every 4e-8 feature standard deviations that add up
    # to a saddle z_a z_b around the row: no cube holding many kinks is
    # affine, and rows whose cube stays within one piece need radii far below
    # min_radius, so no row can be resolved; it must be flagged, not
    # certified. (With standard normal designs none of these rows is
    # certified.)
    from sklearn_plm_explain import (
        OpenAPIExplainer,
        decision_features,
        local_linear_model,
    )

    for seed in range(8):
        mlp, X, x0 = _saddle_mlp(seed // 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = OpenAPIExplainer(mlp, random_state=seed).fit(X[:50]).explain(x0[None])
        W, _ = local_linear_model(mlp, x0[None])
        truth = decision_features(W, e.target)
        err = np.abs(e.values - truth).sum(1)[0] / np.abs(truth).sum(1)[0]
        assert not e.converged[0] or err <= 1e-8, (seed, e.status[0], err)


def test_an_interaction_term_is_never_certified_as_piecewise_linear():
    # Logistic regression on the features and one product of two of them: a
    # smooth logit g.x + x_a x_b, whose curvature has zero mean on any cube
    # centred on the row. (With standard normal designs every row is flagged
    # not piecewise linear.)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures

    from sklearn_plm_explain import OpenAPIExplainer

    rng = np.random.default_rng(0)
    d = 8
    X = rng.standard_normal((100, d))
    model = make_pipeline(
        PolynomialFeatures(2, interaction_only=True, include_bias=False),
        LogisticRegression(),
    ).fit(X, np.arange(100) % 2)
    poly, logistic = model[0], model[1]
    g = rng.standard_normal(d)
    coef = np.zeros(poly.n_output_features_)
    coef[:d] = g
    coef[d] = 1.0  # the first product, x_0 x_1
    logistic.coef_, logistic.intercept_ = coef[None], np.zeros(1)
    rows = 0.3 * rng.standard_normal((12, d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = OpenAPIExplainer(model, random_state=0).fit(X[:30]).explain(rows)
    truth = np.tile(g, (len(rows), 1))
    truth[:, 0] += rows[:, 1]
    truth[:, 1] += rows[:, 0]
    # The explained class's log-odds: the slope of the logit or its negation.
    sign = np.sign((e.values * truth).sum(axis=1))[:, None]
    err = np.abs(e.values - sign * truth).sum(1) / np.abs(truth).sum(1)
    assert np.all(err[e.converged] <= 1e-8), (e.status, err)


@pytest.mark.parametrize("extra", [0, 12])
@pytest.mark.parametrize("seed", range(3))
def test_residual_squares_after_an_update_are_bounded_tightly(extra, seed):
    # The corrected fit's last update is not followed by a pass over the
    # design: the residuals' sum of squares after it is bounded from the
    # residuals before it. The bound must be an upper bound, and tight,
    # also for an update that moves mostly the heavy points.
    from sklearn_plm_explain._openapi._solve import _Corrections, _squares_rows

    def one_row(resid, update, weighted, C, low, first, tau, eps):
        # _squares_rows of one row: C holds the rows `low` of its design,
        # `first` marks its orthogonal block's points.
        parts = _Corrections(
            C[None],
            np.ones((1, len(C))),
            first[low][None],
            tau[low][None],
            (first & ~low)[None],
        )
        D = np.full((1, update.shape[0]), first.sum() - 1.0)
        D[0, 0] = first.sum()
        return _squares_rows(
            resid[None],
            update[None],
            weighted[None],
            parts,
            tau[None],
            np.array([eps]),
            D,
        )[0]

    rng = np.random.default_rng(seed)
    d, n, K = 30, 31, 4
    B = np.ones((n + 1 + extra, d + 1))
    B[0, 1:] = 0.0
    B[1 : n + 1, 1:] = orthogonal_design(rng, n, d)
    B[n + 1 :, 1:] = rng.standard_normal((extra, d))
    first = np.arange(len(B)) < n + 1
    tau = 1.0 + 0.002 * rng.random(len(B))
    heavy = np.zeros(len(B), dtype=bool)
    heavy[[3, 17]] = True
    tau[heavy] = [40.0, 900.0]
    low = heavy | ~first
    eps = basis_bounds(n, d)[0]
    resid = rng.standard_normal((len(B), K)) * tau[:, None]
    D = np.full((d + 1, 1), float(n))
    D[0] = n + 1
    spread = rng.standard_normal((d + 1, K)) / np.sqrt(D)
    toward_heavy = B[heavy].T @ rng.standard_normal((2, K)) * 30.0 / D
    for update in (spread, toward_heavy, 1e-9 * spread):
        weighted = B.T @ (resid / tau[:, None] ** 2)
        bound = one_row(resid, update, weighted, B[low], low, first, tau, eps)
        exact = (((resid - B @ update) / tau[:, None]) ** 2).sum(axis=0)
        assert np.all(bound >= exact)
        assert np.all(bound <= 1.01 * exact)


def test_residual_squares_of_padded_rows_are_each_rows_own_bound():
    # Rows of a batch with different numbers of corrected points (padded to
    # the largest): each row's bound is an upper bound on its own exact sum,
    # and tight, whatever the padding.
    from sklearn_plm_explain._openapi._solve import _corrections, _squares_rows

    rng = np.random.default_rng(7)
    d, n, K, extra = 30, 31, 4, 6
    m = n + 1 + extra
    B = np.ones((3, m, d + 1))
    B[:, 0, 1:] = 0.0
    first = np.zeros((3, m), dtype=bool)
    heavy = np.zeros((3, m), dtype=bool)
    # Row 0: two heavy points and six added; row 1: one heavy point (its
    # block the whole cube); row 2: no heavy point, six added.
    for r, (block, hv) in enumerate([(n + 1, [3, 17]), (m, [9]), (n + 1, [])]):
        B[r, 1:block, 1:] = orthogonal_design(rng, block - 1, d)
        B[r, block:, 1:] = rng.standard_normal((m - block, d))
        first[r, :block] = True
        heavy[r, hv] = True
    tau = 1.0 + 0.002 * rng.random((3, m))
    tau[heavy] = rng.uniform(40.0, 900.0, heavy.sum())
    eps = np.array([basis_bounds(n, d)[0], basis_bounds(m - 1, d)[0], 0.0])
    eps[2] = eps[0]
    D = np.full((3, d + 1), float(n))
    D[1] = m - 1.0
    D[:, 0] = D[:, 1] + 1.0
    parts = _corrections(B, np.ones((3, m)), heavy, first, tau)
    assert parts.C.shape[1] == 8  # the largest: two heavy and six added
    resid = rng.standard_normal((3, m, K)) * tau[:, :, None]
    update = rng.standard_normal((3, d + 1, K)) / np.sqrt(D)[:, :, None]
    weighted = np.swapaxes(B, 1, 2) @ (resid / tau[:, :, None] ** 2)
    bound = _squares_rows(resid, update, weighted, parts, tau, eps, D)
    exact = (((resid - B @ update) / tau[:, :, None]) ** 2).sum(axis=1)
    assert np.all(bound >= exact)
    assert np.all(bound <= 1.01 * exact)


# -- cubes that are their drawn design, bit for bit -----------------------------------
def _exact_cubes(rng, d, n, R, x_scale=1.0, K=3, heavy=()):
    """``R`` rows' cubes drawn from the exact basis with exact steps, their
    layouts and an affine model's noisy responses (``heavy``: points of a
    thousand times the noise)."""
    from sklearn_plm_explain._openapi._design import (
        exact_offsets,
        exact_step,
        fit_step_below,
    )

    largest = basis_bounds(n, d, exact=True)[1]
    x0 = x_scale * rng.standard_normal((R, d))
    x0[:, : d // 4] = 0.0
    steps, layouts, A = [], [], np.ones((R, n + 1, d + 1))
    A[:, 0, 1:] = 0.0
    for r in range(R):
        step = fit_step_below(x0[r], exact_step(np.full(d, 1e-4)), largest)
        assert exact_offsets(x0[r], step, largest)
        layout = []
        points = x0[r] + orthogonal_design(
            rng, n, d, scale=step, layout=layout, exact=True
        )
        A[r, 1:, 1:] = points - x0[r]
        steps.append(step)
        layouts.append(layout[0])
    G = rng.standard_normal((d, K))
    Y = np.concatenate([x0[:, None], x0[:, None] + A[:, 1:, 1:]], axis=1) @ G + 7.0
    tau = 1e-14 * (1.0 + 0.001 * rng.random((R, n + 1)))
    tau[:, list(heavy)] *= 1e3
    Y = Y + tau[..., None] * rng.standard_normal(Y.shape)
    return A, Y, x0, np.array(steps), tau, layouts, G


def test_drawn_points_of_exact_cubes_are_represented_exactly():
    # exact_offsets may only claim rows whose points x0 + step u read back as
    # x - x0 equal to the drawn design, bit for bit: coordinates of every
    # size, zeros, just below powers of two (where the steps are halved),
    # subnormal ones.
    from sklearn_plm_explain._openapi._design import (
        _basis,
        _exact_columns,
        exact_offsets,
        exact_step,
        fit_step_below,
    )

    rng = np.random.default_rng(0)
    d, n = 60, 64
    basis, _, largest = _basis(n, exact=True)
    claimed = 0
    for t in range(600):
        scale = 10.0 ** rng.uniform(-8, 8, d) if t % 2 else np.ones(d)
        x0 = rng.standard_normal(d) * 10.0 ** rng.uniform(-2, 6, d) * scale
        x0[rng.random(d) < 0.3] = 0.0
        if t % 3 == 0:
            x0 = np.nextafter(2.0 ** rng.integers(-5, 5, d), 0) * rng.choice([-1, 1], d)
        if t % 7 == 0:
            x0 = x0 * 1e-310
        step = exact_step(rng.uniform(1e-6, 1e-2) * scale)
        if t % 4 == 0:
            step = fit_step_below(x0, step, largest)
        layout = []
        drawn = orthogonal_design(rng, n, d, scale=step, layout=layout, exact=True)
        np.testing.assert_array_equal(
            basis[:, layout[0][1]] * (layout[0][2] * step), drawn
        )
        # Column by column (a row is claimed when all its columns are).
        columns = _exact_columns(x0, step, largest)
        read = (x0 + drawn) - x0
        assert np.all(read[:, columns] == drawn[:, columns])
        claimed += columns.sum()
        assert exact_offsets(x0, step, largest) == columns.all()
    assert claimed >= 10000


@pytest.mark.parametrize("heavy", [(), (3, 17), (0, 5), (0, 1, 2, 4, 6, 8, 10)])
@pytest.mark.parametrize("seed", range(3))
def test_fit_on_the_basis_matches_the_fit_on_the_design(heavy, seed):
    # Rows whose cubes are their drawn design are fitted by products with
    # the shared basis; against the same rows fitted from their designs and
    # against the weighted QR fit: the same coefficients, noise estimates
    # and standard errors within the QR fit's caution, and never below it.
    rng = np.random.default_rng(20 + seed)
    d, n, R = 30, 34, 4
    A, Y, x0, step, tau, layouts, G = _exact_cubes(rng, d, n, R, heavy=heavy)
    exact = np.ones(R, dtype=bool)
    n_orth = np.full(R, n + 1)
    unread = np.full_like(A, np.nan)
    unread[:, :, 0] = 1.0

    def fill(i):
        unread[i] = A[i]

    basis = fit_local_models(
        unread, Y, x0, step, False, tau, n_orth, layouts, fill, exact
    )
    qr = fit_local_models(A, Y, x0, step, False, tau)
    np.testing.assert_allclose(basis[0], qr[0], rtol=0, atol=1e-7)
    np.testing.assert_allclose(basis[1], qr[1], rtol=0, atol=1e-7)
    # The noise estimates agree up to the rounding of the residuals (here
    # a millionth of the noise, which is 1e-10 of the responses' spread).
    assert np.all(basis[2] >= qr[2] * (1 - 1e-4))
    np.testing.assert_allclose(basis[2], qr[2], rtol=0.02)
    assert np.all(basis[3] >= qr[3] * (1 - 1e-9))
    assert np.all(np.isnan(unread[:, 1:, 1:]))  # no design was built
    for r in range(R):
        err = np.abs(basis[0][r] - G).sum(axis=0)
        assert np.all(err <= max(1.0, 3 * basis[2][r].max()) * basis[3][r].sum())


def _basis_products(rng, n, d, R):
    """The products of ``R`` rows' designs drawn from the exact basis of
    size ``n`` (``d`` of its columns each, with signs)."""
    from sklearn_plm_explain._openapi._design import _basis, exact_gram
    from sklearn_plm_explain._openapi._fit import _BasisProducts

    layouts = []
    for _ in range(R):
        layout = []
        orthogonal_design(rng, n, d, layout=layout, exact=True)
        layouts.append(layout[0])
    return _BasisProducts(
        _basis(n, True)[0],
        exact_gram(n),
        np.stack([lay[1] for lay in layouts]),
        np.stack([lay[2] for lay in layouts]),
    )


@pytest.mark.parametrize("n, d", [(34, 33), (34, 32), (34, 30), (130, 100)])
def test_first_solve_on_the_basis_folds_the_gram_step(n, d):
    # The first solve with its Gram step folded into one product with a
    # matrix precomputed per basis: equal to the two steps taken apart (a
    # solve with the Gram diagonal, then one with the Gram matrix), for rows
    # leaving out none, one or many of their basis's columns, with a
    # nonzero intercept; and within the basis's squared deviation of the
    # least-squares solution.
    rng = np.random.default_rng(n + d)
    R, K, m, p = 5, 3, n + 1, d + 1
    ops = _basis_products(rng, n, d, R)
    V = rng.standard_normal((R, m, K)) + 3.0
    V[:, 0] = 0.0  # responses relative to the origin's
    D = np.full((p, 1), m - 1.0)
    D[0] = m
    b = ops.t(V)
    apart = b / D
    apart += (b - ops.gram(apart)) / D
    folded = ops.first_solve(V)
    scale = np.abs(apart).max()
    np.testing.assert_allclose(folded, apart, rtol=0, atol=1e-13 * scale)
    A = np.stack([ops.rows(r, np.arange(m)) for r in range(R)])
    for r in range(R):
        ls = np.linalg.lstsq(A[r], V[r], rcond=None)[0]
        np.testing.assert_allclose(folded[r], ls, rtol=0, atol=1e-13 * scale)


@pytest.mark.parametrize("heavy_points", [[(5, 100)], [(0, 7)], [(0,)], [(3,), ()]])
def test_weighted_solution_on_the_basis_from_the_unit_weight_one(heavy_points):
    # Rows whose heavy points (the origin among them) get weights below 1:
    # the solution with weight 1 and the unit responses' solutions, from the
    # one folded product, give the weighted least-squares solution.
    from sklearn_plm_explain._openapi._fit import _unit_responses, _weighted_solve

    rng = np.random.default_rng(len(heavy_points[0]))
    n, d, K = 130, 120, 3
    R, m = len(heavy_points), n + 1
    ops = _basis_products(rng, n, d, R)
    Y = rng.standard_normal((R, m, K)) + 2.0
    Y -= Y[:, :1]
    heavy = np.zeros((R, m), dtype=bool)
    for r, points in enumerate(heavy_points):
        heavy[r, list(points)] = True
    w = np.where(heavy, rng.uniform(1e-4, 0.5, (R, m)), 1.0)
    rows = [r for r in range(R) if heavy[r].any()]
    heavy_rows = {r: ops.rows(r, np.flatnonzero(heavy[r])) for r in rows}
    V = np.concatenate([w[:, :, None] * Y, _unit_responses(heavy, rows)], axis=2)
    both = ops.first_solve(V)
    got = _weighted_solve(both[:, :, :K], both[:, :, K:], heavy, w, heavy_rows, rows)
    for j, r in enumerate(rows):
        A = ops.rows(r, np.arange(m)) * np.sqrt(w[r])[:, None]
        ls = np.linalg.lstsq(A, Y[r] * np.sqrt(w[r])[:, None], rcond=None)[0]
        np.testing.assert_allclose(got[j], ls, rtol=0, atol=1e-13 * np.abs(ls).max())


def test_a_cube_that_is_not_its_drawn_design_is_not_fitted_as_one():
    # The basis fit reads no design: given the layout of a cube whose points
    # were moved (by far more than any rounding), its residuals must show it.
    rng = np.random.default_rng(7)
    d, n, R = 20, 24, 1
    A, Y, x0, step, tau, layouts, G = _exact_cubes(rng, d, n, R)
    moved = A[0, 1:, 1:] * (1.0 + 1e-6 * rng.standard_normal((n, d)))
    Y = (np.concatenate([x0, x0 + moved]) @ G + 7.0)[None]
    fit = fit_local_models(
        A, Y, x0, step, False, tau, np.array([n + 1]), layouts, None, np.ones(1, bool)
    )
    assert fit[2].max() > 100.0


@pytest.mark.parametrize("p", [40, 160])
def test_weighted_fit_is_the_weighted_least_squares_solution(p):
    # Both paths of the weighted QR fit (numpy's batched factorisation below
    # _IMPLICIT_Q_COLUMNS columns, LAPACK's reflectors applied without
    # forming Q above) against the normal equations of a well-conditioned
    # design: coefficients, residual RMS and standard errors.
    from sklearn_plm_explain._openapi._solve import _IMPLICIT_Q_COLUMNS, _fit_weighted

    rng = np.random.default_rng(p)
    n, m, K = 2, p + 30, 3
    A = rng.uniform(-1, 1, size=(n, m, p))
    A[:, :, 0] = 1.0
    Y = rng.standard_normal((n, m, K)) + 5.0
    tau = rng.uniform(0.5, 20.0, size=(n, m))
    beta, sigma, se = _fit_weighted(A.copy(), Y, tau)
    assert (p >= _IMPLICIT_Q_COLUMNS) == (p == 160)
    for i in range(n):
        W = A[i] / tau[i][:, None]
        G = W.T @ W
        ref = np.linalg.solve(G, W.T @ (Y[i] / tau[i][:, None]))
        np.testing.assert_allclose(beta[i], ref, rtol=0, atol=1e-9)
        resid = (Y[i] - A[i] @ ref) / tau[i][:, None]
        np.testing.assert_allclose(
            sigma[i], np.sqrt((resid**2).sum(0) / (m - p)), rtol=1e-8
        )
        np.testing.assert_allclose(
            se[i], np.sqrt(np.diag(np.linalg.inv(G)))[1:], rtol=1e-8
        )
    # A response that is not finite (log of an underflowed probability)
    # spoils its own column only, on both paths.
    Y[0, 3, 1] = -np.inf
    beta, sigma, se = _fit_weighted(A.copy(), Y, tau)
    assert np.isnan(beta[0, :, 1]).all() and np.isfinite(beta[0, :, [0, 2]]).all()
    assert np.isfinite(beta[1]).all() and np.isfinite(se).all()
    assert np.isfinite(sigma).sum() == sigma.size - 1
