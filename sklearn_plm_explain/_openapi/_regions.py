"""Reuse of certified local models by other rows of the same linear region."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from scipy import stats

from sklearn_plm_explain._openapi._radius import EXCESS_FACTOR

# A response agrees with a model's prediction within this many noise scales.
AGREE_NOISE = 16.0
# A reused model is confirmed by this many antithetic pairs of probes, in
# independent random directions, this many times as far from the row as the
# model's own certified radius.
N_PAIRS = 4
PROBE_REACH = 16.0
# Confidence level of a reused model's bound (see RegionLibrary.confirm): a
# row's slope error F shows over a probe direction u as F u, normal with
# variance ||F unit||^2 over the random directions; the sum of the squares
# of N_PAIRS of them is that times a chi-square with N_PAIRS degrees of
# freedom, above its lower MISS_LEVEL quantile but with that chance.
MISS_LEVEL = 1e-3
_MISS_QUANTILE = float(stats.chi2.ppf(MISS_LEVEL, N_PAIRS))


def probe_scale(scale):
    """Per-feature unit of the probes: the cubes' (``scale``), but at least
    the median of it. A reused model's bound is led by its slopes' error
    along the features the probes move least (see :meth:`RegionLibrary.
    confirm`): a feature nearly constant in ``fit`` would otherwise make it
    too loose to certify any row."""
    return np.maximum(scale, np.median(scale))


class RegionLibrary:
    """The local models certified so far in one batch of rows.

    All rows of one linear region share one local model. A row whose own
    response agrees with a certified model, and whose fresh random probes
    agree too, lies in that model's region with probability one: two
    different affine maps agree only on a set of measure zero, and the probes
    are drawn after the match was found. The probes sit at the model's own
    certified radius and are judged by the certificate's residual test (see
    :meth:`confirm`). Such a row reuses the model for ``2 * N_PAIRS`` queries
    instead of a new fit.
    """

    def __init__(self, centre):
        self.centre = centre
        self._radius, self._se = [], []
        self._x, self._slope, self._intercept, self._rel, self.owner = (
            [],
            [],
            [],
            [],
            [],
        )

    def __len__(self):
        return len(self._x)

    def copy(self):
        """A library of the same models, to which models can be added apart."""
        other = RegionLibrary(self.centre)
        for name in ("_radius", "_se", "_x", "_slope", "_intercept", "_rel", "owner"):
            setattr(other, name, list(getattr(self, name)))
        return other

    def add(self, x, slope, intercept, rel, owner, radius, se):
        """Record a certified model, its radius and its slopes' standard errors
        (absolute, per input feature)."""
        self._radius.append(radius)
        self._se.append(se)
        self._x.append(x)
        self._slope.append(slope)
        self._intercept.append(intercept)
        self._rel.append(rel)
        self.owner.append(owner)

    def model(self, j):
        return self._slope[j], self._intercept[j], self._rel[j], self.owner[j]

    def _arrays(self, sel):
        return (
            np.stack(self._slope)[sel],
            np.stack(self._intercept)[sel],
            np.stack(self._x)[sel],
            np.asarray(self._rel)[sel],
        )

    def agrees_locally(self, x0, L0, tau0, X, L, tau, models):
        """Whether the changes of response from ``x0`` to ``X`` follow the slopes.

        Parameters
        ----------
        x0, L0, tau0 : ndarrays of shape (n, d), (n, K), (n,)
            The explained rows, their responses and noise scales.
        X, L, tau : ndarrays of shape (n, d), (n, K), (n,)
            Points near them, their responses and noise scales.
        models : ndarray of int of shape (n,)
            Library index of the model of each row.

        Returns
        -------
        agree : ndarray of bool of shape (n,)
            Changes compared with the model's slopes only, whose uncertainty
            over a small step is tiny: a kink between the two points, which
            the model's uncertainty over a long distance could hide, cannot.
        """
        S, _, _, rel = self._arrays(models)
        step = X - x0
        predicted = np.einsum("nd,ndk->nk", step, S)
        observed = self._centred(L) - self._centred(L0)
        tol = AGREE_NOISE * (tau + tau0)[:, None] + rel[:, None] * np.abs(
            np.einsum("nd,ndk->nk", np.abs(step), np.abs(S))
        )
        return np.all(np.abs(predicted - observed) <= tol, axis=1)

    def probe_radius(self, models):
        """Radius of the probes confirming each model: its own certified one.

        That is where the certificate's residual test showed the model to be
        linear at the noise level, and where the probes' test has the same
        power: a slope difference ``D`` shows over a probe ``u`` as ``D u``,
        against the same noise.
        """
        return PROBE_REACH * np.asarray(self._radius)[models]

    def confirm(self, x0, L0, tau0, X, L, tau, models, unit):
        """Whether probes confirm each row's reused model.

        Every probe's change of response from the row must follow the model's
        slopes to within the certificate's residual test (``EXCESS_FACTOR``
        times the noise of both responses and of the model's prediction, from
        its slopes' standard errors). A different region's slopes differ by
        some ``D``; each of the ``N_PAIRS`` independent random directions
        misses it only when ``|D u|`` happens to fall below that noise, so the
        chance that all miss falls as its power ``N_PAIRS``.

        Parameters
        ----------
        x0, L0, tau0 : ndarrays of shape (n, d), (n, K), (n,)
            The rows, their responses and noise scales.
        X, L, tau : ndarrays of shape (n, p, d), (n, p, K), (n, p)
            The probes of each row, their responses and noise scales.
        models : ndarray of int of shape (n,)
            Library index of the model of each row.
        unit : ndarray of shape (n, d)
            Per row, the probes' spread per feature: they are ``x0 + g *
            unit`` with ``g`` standard normal.

        Returns
        -------
        ok : ndarray of bool of shape (n,)
        rel : ndarray of shape (n,)
            Bound on the relative L1 error of every column's slope of the
            reused model at each row, from what its probes measured: the
            error ``F`` (the model's own and the regions' difference alike)
            changes the two responses of a pair ``x0 +- u`` by ``+- F u``,
            so half their difference (within the noise) is ``F u``; over the
            ``N_PAIRS`` random directions ``||F unit||_2`` is at most their
            root sum of squares over the lower ``MISS_LEVEL`` quantile of
            chi-square, and ``|F|_1 <= ||F unit||_2 ||1 / unit||_2``.
        """
        S = np.stack(self._slope)[models]
        se = np.stack(self._se)[models]  # (n, d) absolute, input units
        step = X - x0[:, None, :]
        predicted = np.einsum("npd,ndk->npk", step, S)
        observed = self._centred(L) - self._centred(L0)[:, None, :]
        # Products first: a step of 1e160 input units squared overflows.
        spread = np.linalg.norm(step * se[:, None, :], axis=2)
        noise = np.sqrt(tau**2 + tau0[:, None] ** 2 + spread**2)
        tol = EXCESS_FACTOR * noise[:, :, None]
        ok = np.all(np.abs(predicted - observed) <= tol, axis=(1, 2))
        return ok, self._reuse_bound(observed - predicted, tau, S, unit)

    @staticmethod
    def _reuse_bound(gap, tau, S, unit):
        """Bound (n,) on the relative L1 error of the reused slopes ``S``
        from the gaps (n, p, K) between the probes' responses and the
        model's predictions, pairs ``x0 + u`` and ``x0 - u`` one after the
        other (see :meth:`confirm`)."""
        n, p, K = gap.shape
        pairs = gap.reshape(n, 2, p // 2, K)
        # Half the pair's difference is F u, within half the noise of both
        # (the row's own response, common to both, cancels); a noise scale
        # bounds a response's rounding (the float64 floor is far above it).
        noise = 0.5 * tau.reshape(n, 2, p // 2).sum(axis=1)
        Fu = 0.5 * np.abs(pairs[:, 0] - pairs[:, 1]) + noise[:, :, None]
        spread = np.sqrt((Fu**2).sum(axis=1) / _MISS_QUANTILE)  # (n, K)
        norm = np.abs(S).sum(axis=1)  # the centred log-ratios' slopes
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = spread * np.linalg.norm(1 / unit, axis=1)[:, None] / norm
        return np.where(norm > 0, rel, np.inf).max(axis=1)

    def first_match(self, X, L, tau, start=0, block=64):
        """Index of the first model from ``start`` on that each row agrees with.

        Returns -1 where none does. Models are compared in blocks, all rows at
        once.
        """
        found = np.full(X.shape[0], -1, dtype=np.intp)
        L = self._centred(L)
        for lo in range(start, len(self), block):
            todo = np.flatnonzero(found < 0)
            if todo.size == 0:
                break
            S, b, x_ref, rel = self._arrays(slice(lo, min(lo + block, len(self))))
            Xt = X[todo]
            predicted = np.einsum("nd,mdk->nmk", Xt, S) + b[None]
            spread = np.abs(Xt[:, None, :] - x_ref[None]).max(axis=2)
            tol = _tolerance(
                tau[todo, None], rel[None], np.abs(S).sum(axis=1)[None], spread
            )
            ok = np.all(np.abs(predicted - L[todo, None, :]) <= tol, axis=2)
            hit = ok.any(axis=1)
            found[todo[hit]] = lo + ok[hit].argmax(axis=1)
        return found

    def _centred(self, L):
        return L - L.mean(axis=-1, keepdims=True) if self.centre else L


def _tolerance(tau, rel, slope_norm, spread):
    # Rounding noise of the responses, plus the model's own uncertainty, which
    # grows with the distance from the row it was certified at: its slopes are
    # known to a relative L1 error ``rel``.
    return AGREE_NOISE * tau[..., None] + (rel * spread)[..., None] * slope_norm
