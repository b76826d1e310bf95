"""From many local explanations to a view of the model as a whole."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils import Bunch

__all__ = ["region_census", "submodular_pick"]

# Relative differences below this are rounding, whatever the bounds say.
_FLOOR = 1e-12


def submodular_pick(explanation, budget, *, attribution="standardized", top_k=10):
    """Pick a few rows whose explanations together cover the important features.

    SP-LIME (Ribeiro et al., 2016): a reader who can look at only ``budget``
    explanations should see the features that matter most across the data,
    each once, rather than the same few features again and again. Every
    feature gets a global importance, the square root of the sum of its
    absolute attributions over all rows; a set of rows *covers* the features
    that appear in at least one of their explanations, and is worth the total
    importance of what it covers. That worth has diminishing returns (a
    feature covered twice counts once), so greedily adding the row that
    covers the most importance not yet covered is within a factor
    ``1 - 1/e`` of the best set of the same size.

    Parameters
    ----------
    explanation : Explanation
        Explanations of many rows, from any explainer of this package.
    budget : int
        Number of rows to pick (at most the number of rows).
    attribution : {"standardized", "contribution", "slope"}, \
            default="standardized"
        Which attribution measures importance (see
        :meth:`Explanation.attributions`). Standardized slopes compare
        features measured in different units; ``"slope"`` on a LIME
        explanation uses the surrogate weights, as lime does. An explanation
        without the field (built by hand) uses its ``values``.
    top_k : int, default=10
        The features in a row's explanation: those its surrogate selected
        when the explanation records them (``selected``, LIME and S-LIME),
        else its ``top_k`` largest absolute attributions (an OpenAPI
        explanation involves every feature, and covering everything at once
        would make every pick equal).

    Returns
    -------
    pick : Bunch
        ``rows``: indices of the picked rows, in the order picked;
        ``coverage``: share of the total importance covered after each pick;
        ``importance``: global importance of every feature, shape
        ``(n_features,)``; ``covered``: mask of the features covered by the
        picked rows.

    References
    ----------
    M. T. Ribeiro, S. Singh, C. Guestrin, "Why Should I Trust You?":
    Explaining the Predictions of Any Classifier, KDD 2016, section 4.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_plm_explain import Explanation, submodular_pick
    >>> e = Explanation(values=[[1.0, 1, 0], [1, 0, 0], [0, 0, 1]], target=[0, 0, 0],
    ...                 classes=None, feature_names=["a", "b", "c"], method="demo")
    >>> submodular_pick(e, 2).rows.tolist()
    [0, 2]
    """
    n = len(explanation)
    if not 1 <= int(budget) <= n:
        raise ValueError(f"budget must be between 1 and {n} (the rows); got {budget}.")
    W = np.abs(_attributions(explanation, attribution))
    W[~_explained_features(explanation, W, top_k)] = 0.0
    W = np.nan_to_num(W, nan=0.0, posinf=0.0)
    importance = np.sqrt(W.sum(axis=0))
    total = importance.sum()
    present = W > 0
    covered = np.zeros(W.shape[1], dtype=bool)
    rows, coverage = [], []
    available = np.ones(n, dtype=bool)
    for _ in range(int(budget)):
        gain = (present & ~covered) @ importance
        gain[~available] = -np.inf
        best = int(np.argmax(gain))  # the first row among equals
        rows.append(best)
        available[best] = False
        covered |= present[best]
        coverage.append(importance[covered].sum() / total if total > 0 else 0.0)
    return Bunch(
        rows=np.asarray(rows, dtype=np.intp),
        coverage=np.asarray(coverage),
        importance=importance,
        covered=covered,
    )


def _attributions(explanation, attribution):
    try:
        return explanation.attributions(attribution).copy()
    except ValueError:
        if attribution not in ("standardized", "contribution", "slope"):
            raise
        return np.asarray(explanation.values, dtype=np.float64).copy()


def _explained_features(explanation, W, top_k):
    """Mask (n, d) of the features in each row's explanation."""
    n, d = W.shape
    mask = np.zeros((n, d), dtype=bool)
    if "selected" in explanation.fields:
        sel = np.asarray(explanation.selected, dtype=np.intp)
        rows, cols = np.nonzero(sel >= 0)
        mask[rows, sel[rows, cols]] = True
        return mask
    k = min(int(top_k), d)
    top = np.argsort(-W, axis=1, kind="stable")[:, :k]
    mask[np.arange(n)[:, None], top] = True
    return mask


def region_census(explanation):
    """Which explained rows share one linear model, and how many models there are.

    A piecewise-linear model is one linear model per region of its input
    space, and :class:`OpenAPIExplainer` recovers the region's model at every
    certified row. Rows whose certified models agree are in the same region
    (or in regions that share one model, such as leaves of a tree that
    inherit their parent's model): the census groups them, and the number of
    groups is the number of linear models the data touch. Two rows share a
    model when, for every class, their slopes differ by less than twice the
    sum of their error bounds (relative L1, what ``error_bound`` certifies)
    and their intercepts by less than the error that these slope errors
    leave at the rows. Different regions of a model differ by far more, so
    the grouping is exact wherever the certificates are.

    Parameters
    ----------
    explanation : Explanation
        An explanation from :class:`OpenAPIExplainer` (fields ``coef``,
        ``intercept``, ``error_bound``, ``converged``).

    Returns
    -------
    census : Bunch
        ``labels``: region of each row, numbered in order of first appearance
        (``-1`` for rows that are not certified exact, whose model is not
        known to the precision needed); ``n_regions``: number of distinct
        models among the certified rows; ``counts``: rows per region;
        ``representative``: the first row of each region.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_plm_explain import (LogisticModelTreeClassifier,
    ...                                  OpenAPIExplainer, region_census)
    >>> X, y = load_iris(return_X_y=True)
    >>> lmt = LogisticModelTreeClassifier(random_state=0).fit(X, y)
    >>> e = OpenAPIExplainer(lmt, random_state=0).fit(X).explain(X[::10])
    >>> census = region_census(e)
    >>> int(census.n_regions) == len(set(lmt.apply(X[::10])))
    True
    """
    missing = [
        f for f in ("coef", "intercept", "error_bound") if f not in explanation.fields
    ]
    if missing:
        raise ValueError(
            f"region_census needs an OpenAPIExplainer explanation; this one has no "
            f"{', '.join(missing)} field."
        )
    coef = np.asarray(explanation.coef, dtype=np.float64)  # (n, d, C)
    intercept = np.asarray(explanation.intercept, dtype=np.float64)  # (n, C)
    bound = np.asarray(explanation.error_bound, dtype=np.float64)
    exact = np.asarray(explanation.converged, dtype=bool) & np.isfinite(bound)
    n = coef.shape[0]
    norm = np.abs(coef).sum(axis=1)  # (n, C)
    # Intercept error left by a slope error at the row itself.
    data = explanation.data if "data" in explanation.fields else None
    reach = np.abs(data).max(axis=1) if data is not None else np.zeros(n)
    labels = np.full(n, -1, dtype=np.intp)
    reps = []
    for i in np.flatnonzero(exact):
        if reps:
            r = np.asarray(reps)
            slope_tol = 2 * (bound[i] + bound[r])[:, None] * np.maximum(
                norm[i], norm[r]
            ) + _FLOOR * np.maximum(norm[i], norm[r])
            d_slope = np.abs(coef[r] - coef[i]).sum(axis=1)
            b_err = (
                bound[i] * norm[i] * reach[i]
                + bound[r, None] * norm[r] * reach[r, None]
            )
            b_scale = np.maximum(np.abs(intercept[i]), np.abs(intercept[r]))
            b_tol = 2 * b_err + _FLOOR * (b_scale + norm[r] * reach[r, None])
            d_b = np.abs(intercept[r] - intercept[i])
            same = np.all((d_slope <= slope_tol) & (d_b <= b_tol), axis=1)
            if same.any():
                labels[i] = labels[r[int(np.argmax(same))]]
                continue
        labels[i] = len(reps)
        reps.append(i)
    counts = np.bincount(labels[labels >= 0], minlength=len(reps))
    return Bunch(
        labels=labels,
        n_regions=len(reps),
        counts=counts,
        representative=np.asarray(reps, dtype=np.intp),
    )
