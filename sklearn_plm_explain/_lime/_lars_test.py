"""S-LIME's hypothesis test on the LARS path: at each of the first steps,
is the entering feature not outranked by the runner-up, on a sample of this
size?"""

# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np
from scipy.special import stdtrit

from sklearn_plm_explain._lime._surrogate import _LocalStats

# Batches of the draws whose means estimate the spread of a step's gap.
_N_BATCHES = 16


# Default indifference margin of the step test, relative to the leading
# candidate's residual correlation (see StableLIMEExplainer's tie_margin).
TIE_MARGIN = 0.15


class _StepTests:
    """Outcome of the tests along one LARS path.

    Attributes
    ----------
    active : ndarray of int
        Features in the order LARS lets them enter (at most ``k``).
    z : ndarray of shape (k,)
        Observed statistic ``Δ / sqrt(2 σ² / n)`` of each step (``inf`` when
        the step has no rival or a zero-variance positive gap, ``nan`` for
        steps the path never reached).
    passed : bool
        Every step reached passed.
    n_needed : float
        Largest sample size asked for by a failing step (``n`` when all
        passed, ``inf`` for a gap of zero).
    ties : list of (int, int)
        ``(j1, j2)`` of every step that passed only through ``tie_margin``:
        the order of these two features is not resolved by the sample (the
        strict test, ``tie_margin=0``, would fail).
    """

    def __init__(self, active, z, passed, n_needed, ties=()):
        self.active = active
        self.z = z
        self.passed = passed
        self.n_needed = n_needed
        self.ties = list(ties)


def lars_step_tests(Z, w, y, k, alpha, tie_margin=TIE_MARGIN):
    """Test, at each of the first ``k`` LARS steps, that the entering feature
    is not outranked by the runner-up.

    The data are weighted-centred and scaled by ``sqrt(w)``. Before the
    ``t``-th variable enters, with residual ``r`` of the current path point,
    the two inactive features with the largest ``|ĉ_j| = |mean(x_j r)|`` are
    ``j1`` (the one LARS adds) and ``j2``. With signs ``s_a = sign(ĉ_a)`` the
    per-row products ``p = r (s1 x_j1 − s2 x_j2)`` have mean
    ``Δ = |ĉ1| − |ĉ2| ≥ 0``. The step passes when

        Δ + tie_margin · |ĉ1| > t_{B−1, 1−α} · sqrt(2) · se(Δ),

    a one-sided non-inferiority test: another sample of the same size would,
    with probability at least ``1 − alpha``, not rank ``j2`` above ``j1`` by
    more than ``tie_margin`` of ``|ĉ1|``. With ``tie_margin=0`` it is the
    S-LIME paper's test (``j1`` must beat ``j2``), which candidates of equal
    strength never pass at any sample size; a positive margin treats them as
    tied once the sample resolves the gap to within the margin. ``se(Δ)`` is
    estimated from ``B`` consecutive batches of the draws (batch means, 16
    batches, Student's ``t`` with ``B − 1`` degrees of freedom), which is
    valid for independent draws and, conservatively, for a quasi-random
    sequence, whose consecutive stretches are themselves evenly spread: the
    i.i.d. formula ``sqrt(σ² / n)`` overstates the spread of a Sobol'
    sample's mean several times. A failing step asks for the size
    ``n' = n (t / Z_obs)²`` at which its observed statistic would pass.

    Parameters
    ----------
    Z : ndarray of shape (n, d)
        Interpretable representation of the neighbourhood; row 0 is the
        explained row, the others are draws in the order they were made.
    w : ndarray of shape (n,)
        Kernel weights.
    y : ndarray of shape (n,)
        Responses of the explained label.
    k : int
        Number of steps tested.
    alpha : float
        One-sided level of each test.
    tie_margin : float, default=0.15
        Indifference margin, relative to ``|ĉ1|``.

    Returns
    -------
    tests : _StepTests
    """
    stats = _LocalStats(Z, w, y[:, None])
    return _tests_from_stats(stats, Z, w, y, 0, k, alpha, tie_margin)


def _tests_from_stats(stats, Z, w, y, label, k, alpha, tie_margin):
    n = Z.shape[0]
    b = stats.b[:, label]
    z = np.full(k, np.nan)
    if not np.any(b) or stats.syy[label] <= stats.flat[label]:
        # A flat response (up to rounding): nothing to select or test.
        return _StepTests(np.empty(0, np.intp), z, True, n)
    sw = np.sqrt(w)
    yw = (y - stats.ybar[label]) * sw
    active, betas, corrs = _lar_steps(stats, Z, sw, yw, b, k)
    # The entering features' centred columns, gathered once for all steps.
    centred = Z[:, active] - stats.mu[active]
    needed, ties = [], []
    for t in range(active.size):
        step = _step_products(stats, Z, sw, yw, betas[t], active, centred, t, corrs[t])
        z[t], n_t = _one_step(step, Z.shape[0], alpha, tie_margin)
        if n_t is not None:
            needed.append(n_t)
        elif tie_margin > 0 and _one_step(step, Z.shape[0], alpha, 0.0)[1] is not None:
            ties.append((int(active[t]), int(step[0])))
    # The largest size any failing step asks for: one round can then settle
    # every step the current sample already sees, and the request grows
    # monotonically as alpha shrinks.
    passed = not needed
    return _StepTests(active, z, passed, n if passed else max(needed), ties)


# Gram columns summed ahead with a missing one (see _LocalStats.gram_columns).
_AHEAD = 10


def _lar_steps(stats, Z, sw, yw, b, k):
    """The first ``k`` steps of the LARS path (least angle, no lasso drop).

    Returns the entering features, and for each step ``t`` the coefficients
    and the residual correlations ``Zc' W^½ r`` at the point of the path
    where feature ``t`` enters. Each step reads the data once, for the
    Gram column of the feature that entered (``O(n d)``), so the d × d Gram
    matrix is never formed: at image width forming it would cost more than
    the rest of a fit. The columns are kept in ``stats``: the next round of a
    grown sample sums them over its new points only.
    """
    n, d = Z.shape
    beta, c = np.zeros(d), np.asarray(b, dtype=np.float64).copy()
    active, betas, corrs = [], [], []
    c_start = np.abs(c).max()
    for t in range(min(k, d)):
        cand = np.abs(c)
        cand[active] = -np.inf
        j = int(np.argmax(cand))
        big = cand[j]
        # The residual is uncorrelated with every feature: the path ends
        # (lars_path's rule, and the same relative to the first step).
        if not (big > 1e-10 * c_start and big / n > np.finfo(float).eps):
            break
        betas.append(beta.copy())
        corrs.append(c.copy())
        active.append(j)
        if t == min(k, d) - 1:
            break
        # The equiangular direction of the active features, from their
        # columns of the Gram matrix (kept across the rounds of a row).
        # The features nearest to entering next are summed in the same pass.
        cand[j] = -np.inf
        ahead = np.argpartition(cand, -_AHEAD)[-_AHEAD:] if d > _AHEAD else ()
        GA = stats.gram_columns(active, ahead)
        s = np.sign(c[active])
        # Least squares: a duplicated column makes this block singular.
        wa = np.linalg.lstsq(GA[active], s, rcond=None)[0]
        norm = s @ wa
        if not norm > 0:
            break
        wa /= np.sqrt(norm)
        a = GA @ wa
        big_a = 1.0 / np.sqrt(norm)
        gamma = big / big_a  # all the way to the active least-squares fit
        inactive = np.ones(d, dtype=bool)
        inactive[active] = False
        for num, den in ((big - c, big_a - a), (big + c, big_a + a)):
            ok = inactive & (den > 1e-12 * big_a)
            g = num[ok] / den[ok]
            g = g[g > 0]
            if g.size:
                gamma = min(gamma, float(g.min()))
        beta[active] += gamma * wa
        c -= gamma * a
    return np.asarray(active, dtype=np.intp), betas, corrs


def _batch_se(p):
    """Standard error of ``mean(p)`` from batch means of the draws, and its
    degrees of freedom.

    Row 0 (the explained row) is not a draw. The draws are cut into
    consecutive batches; the spread of the batch means, rescaled from the
    batch size to the whole sample as for independent draws, is the
    standard error. For a quasi-random sequence each batch is itself an even
    cover of the neighbourhood, so its mean varies as a quasi-random mean
    does, and the rescaling (which assumes the slower independent rate)
    errs on the safe side.
    """
    q = p[1:]
    n_batches = min(_N_BATCHES, q.size)
    m = q.size // n_batches
    means = q[: n_batches * m].reshape(n_batches, m).mean(axis=1)
    return float(means.std(ddof=1)) * math.sqrt(m / p.size), n_batches - 1


def _step_products(stats, Z, sw, yw, beta, active, centred, t, corr):
    """The runner-up ``j2`` of step ``t``, ``|ĉ1|`` and the per-row products
    ``p`` whose mean is the gap ``|ĉ1| - |ĉ2|``; ``None`` without a rival.

    ``active`` are the features in the order they enter (``j1 = active[t]``),
    ``centred`` their centred columns and ``corr`` the residual correlations
    ``b - G beta`` at this point of the path.
    """
    n, d = Z.shape
    if d - t - 1 <= 0:
        return None  # no rival left: nothing can change the order
    prev, j1 = active[:t], active[t]
    # Residual correlations of every feature at this point of the path.
    c = corr / n
    rival = np.abs(c)
    rival[prev] = -np.inf
    rival[j1] = -np.inf
    j2 = int(np.argmax(rival))
    r = yw - sw * (centred[:, :t] @ beta[prev])
    s1 = 1.0 if c[j1] >= 0 else -1.0
    s2 = 1.0 if c[j2] >= 0 else -1.0
    # One variance for both sign cases: that of the sign-adjusted difference.
    x_diff = s1 * centred[:, t] - s2 * (Z[:, j2] - stats.mu[j2])
    return j2, abs(c[j1]), r * sw * x_diff


def _one_step(step, n, alpha, tie_margin):
    """Statistic of one step (see :func:`_step_products`) and, if it fails,
    the sample size it asks for (the sample has ``n`` points)."""
    if step is None:
        return np.inf, None
    _, c1, p = step
    gap = p.mean() + tie_margin * c1
    se, dof = _batch_se(p)
    se *= math.sqrt(2.0)
    # Student's t quantile (the normal one for infinite degrees of freedom).
    crit = float(stdtrit(dof, 1.0 - alpha))
    if se > 0:
        z_obs = gap / se
    else:
        z_obs = np.inf if gap > 0 else 0.0
    if z_obs > crit:
        return z_obs, None
    needed = n * (crit / z_obs) ** 2 if z_obs > 0 else np.inf
    return z_obs, needed
