"""Measures of explanations: exactness, consistency, faithfulness, stability.

The measures of the OpenAPI paper (Z. Cong, L. Chu, L. Wang, X. Hu, J. Pei,
"Exact and Consistent Interpretation of Piecewise Linear Models Hidden behind
APIs: A Closed Form Solution", arXiv:1906.06857, section V) and of S-LIME (Z. Zhou,
G. Hooker, F. Wang, KDD 2021), as plain functions in the style of
:mod:`sklearn.metrics`:

* exactness -- :func:`l1_distance` (L1Dist, paper §V-D, Fig. 7);
* quality of the queried points -- :func:`region_difference` (RD, §V-C,
  Fig. 5) and :func:`weight_difference` (WD, §V-C, Fig. 6);
* consistency -- :func:`consistency_score` (CS, §V-B, Fig. 4);
* faithfulness -- :func:`deletion_curve` (CPP and NLCI, §V-A, Fig. 3);
* stability -- :func:`jaccard_stability` (S-LIME's Jaccard@k).

Every function that takes explanations accepts either an array of
attributions or an :class:`~sklearn_plm_explain.Explanation`. With an
``Explanation``, rows it flags (:attr:`Explanation.flagged`: not certified,
e.g. an :class:`~sklearn_plm_explain.OpenAPIExplainer` row with status
``"boundary"``, whose values are only a best estimate) are left out by
default (``uncertified="drop"``), and an :class:`UncertifiedRowsWarning` says
how many. Per-row results keep one entry per input row, NaN for the rows left
out.
"""

# SPDX-License-Identifier: BSD-3-Clause

import itertools
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
    validate_params,
)

from sklearn_plm_explain._explanation import Explanation

__all__ = [
    "UncertifiedRowsWarning",
    "consistency_score",
    "deletion_curve",
    "jaccard_stability",
    "l1_distance",
    "region_difference",
    "weight_difference",
]


class UncertifiedRowsWarning(UserWarning):
    """Rows an explainer could not certify were left out of a measure."""


# -- shared helpers ---------------------------------------------------------------


def _attributions(values, uncertified, name):
    """``(V, keep)``: the attributions as floats and the rows to use."""
    if isinstance(values, Explanation):
        V = np.asarray(values.values, dtype=np.float64)
        keep = ~values.flagged if uncertified == "drop" else np.ones(len(V), bool)
        return V, keep
    V = np.asarray(values, dtype=np.float64)
    if V.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got {V.shape}.")
    return V, np.ones(len(V), dtype=bool)


def _warn_left_out(keep, *explanations):
    left_out = int((~keep).sum())
    if not left_out:
        return
    counts = {}
    for e in explanations:
        if isinstance(e, Explanation) and "status" in e.fields:
            for s in np.asarray(e.status)[e.flagged & ~keep]:
                counts[str(s)] = counts.get(str(s), 0) + 1
    detail = ", ".join(f"{c} {s}" for s, c in sorted(counts.items()))
    warnings.warn(
        f"{left_out} of {keep.size} rows were left out: not certified"
        + (f" ({detail})" if detail else "")
        + ". Pass uncertified='keep' to include their best estimates.",
        UncertifiedRowsWarning,
        # This helper, the metric, its parameter validation, the caller.
        stacklevel=4,
    )


def _reduce(per_row_values, keep, per_row):
    """Per-row values (NaN where not kept), or their mean over the kept rows."""
    out = np.where(keep, per_row_values, np.nan)
    if per_row:
        return out
    return float(out[keep].mean()) if keep.any() else float("nan")


def _has_points(points):
    return np.array([len(P) > 0 for P in points], dtype=bool)


def _local_models(estimator, X):
    """Local models at the rows of ``X``: ``(W_g, b, group)``.

    ``W_g[group[i]]`` are row ``i``'s slopes: distinct local models are held
    once (a ReLU network's activation patterns, a tree's leaves), which keeps
    thousands of points at image width cheap.
    """
    from sklearn_plm_explain._ground_truth import _grouped_local_linear_model

    if hasattr(estimator, "fit") or not callable(estimator):
        W, b, group = _grouped_local_linear_model(estimator, X)
    else:
        W, b = estimator(X)
        group = np.arange(np.shape(W)[0])
    W, b = np.asarray(W, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if W.ndim != 3 or b.shape != (len(X), W.shape[2]):
        raise ValueError(
            "The local model must be W of shape (n, n_features, n_outputs) and b "
            f"of shape (n, n_outputs); got {W.shape} and {b.shape}."
        )
    return W, b, group


# Largest number of point coordinates whose local models are read in one call.
_COORDINATES_PER_CALL = 1 << 21


def _row_models(estimator, X, points, rows):
    """For each row in ``rows``: ``(i, W, b, g)`` with the local models of
    the row (``g[0]``) and of its points (``g[1:]``) as groups of ``W``.

    Rows are read together, a few thousand points per call, so that the
    validation and the per-call work of the model are paid rarely; the row
    and its points share one call, so a point with the row's local model
    gets it bitwise (the same group).
    """
    block, size = [], 0
    budget = max(1, _COORDINATES_PER_CALL // max(X.shape[1], 1))
    for i in rows:
        block.append(i)
        size += len(points[i]) + 1
        if size >= budget or i == rows[-1]:
            stacked = np.vstack([np.vstack([X[j], points[j]]) for j in block])
            W, b, group = _local_models(estimator, stacked)
            start = 0
            for j in block:
                stop = start + len(points[j]) + 1
                yield j, W, b[start:stop], group[start:stop]
                start = stop
            block, size = [], 0


def _core(W, b):
    """Core parameters: slopes and intercepts centred across the outputs.

    They fix every pairwise ``D_{c,c'} = W_c - W_c'`` and ``B_{c,c'}`` (and
    nothing else), so two local classifiers agree on them exactly when they
    give the same probabilities everywhere. One output (regression): as is.
    """
    if W.shape[-1] == 1:
        return W, b
    return W - W.mean(axis=-1, keepdims=True), b - b.mean(axis=-1, keepdims=True)


def _queries_of(X, queries, uncertified):
    """``(X, list of point arrays, keep, explanation or None)``."""
    X = np.asarray(X, dtype=np.float64)
    explanation = None
    if isinstance(queries, Explanation):
        explanation = queries
        if "queries" not in queries.fields:
            raise ValueError(
                "The Explanation has no queries; explain with return_queries=True."
            )
        keep = ~queries.flagged if uncertified == "drop" else np.ones(len(X), bool)
        queries = queries.queries
    else:
        keep = np.ones(len(X), dtype=bool)
    points = [np.asarray(q, dtype=np.float64).reshape(-1, X.shape[1]) for q in queries]
    if X.ndim != 2 or len(points) != len(X):
        raise ValueError(
            f"X must be 2-D with one row per entry of queries; got X of shape "
            f"{X.shape} and {len(points)} query sets."
        )
    return X, points, keep, explanation


_UNCERTIFIED = [StrOptions({"drop", "keep"})]
_VALUES = [Explanation, "array-like"]
_LOCAL_MODEL = [HasMethods(["fit"]), callable]


# -- exactness --------------------------------------------------------------------


@validate_params(
    {
        "D_true": _VALUES,
        "D_pred": _VALUES,
        "per_row": ["boolean"],
        "relative": ["boolean"],
        "uncertified": _UNCERTIFIED,
    },
    prefer_skip_nested_validation=True,
)
def l1_distance(D_true, D_pred, *, per_row=False, relative=False, uncertified="drop"):
    """L1 distance between true and estimated decision features (L1Dist).

    The exactness measure of the OpenAPI paper (§V-D, Fig. 7): for each row
    ``i``,

    .. math:: \\mathrm{L1Dist}_i = \\lVert D_c(x_i) - D^*_c(x_i) \\rVert_1
              = \\sum_j |D_{ij} - D^*_{ij}|,

    where ``D`` are the ground-truth decision features (e.g. from
    :func:`~sklearn_plm_explain.local_linear_model` and
    :func:`~sklearn_plm_explain.decision_features`) and ``D*`` an explainer's.
    The paper reports the mean, minimum and maximum over rows
    (``per_row=True`` gives the rows).

    Parameters
    ----------
    D_true : array-like of shape (n_samples, n_features) or Explanation
        Ground-truth decision features.
    D_pred : array-like of shape (n_samples, n_features) or Explanation
        Estimated decision features, e.g. ``Explanation.values``.
    per_row : bool, default=False
        Return one distance per row instead of their mean.
    relative : bool, default=False
        Divide each row's distance by ``||D_true[i]||_1``.
    uncertified : {"drop", "keep"}, default="drop"
        Rows an ``Explanation`` flags (not certified) are left out of the
        mean (NaN per row) with ``"drop"``, and an
        :class:`UncertifiedRowsWarning` gives their count.

    Returns
    -------
    distance : float or ndarray of shape (n_samples,)
        Mean L1 distance over the rows used, or the per-row distances.

    References
    ----------
    .. [1] Z. Cong, L. Chu, L. Wang, X. Hu, J. Pei, "Exact and Consistent
       Interpretation of Piecewise Linear Models Hidden behind APIs: A Closed
       Form Solution", arXiv:1906.06857, §V-D.

    Examples
    --------
    >>> from sklearn_plm_explain.metrics import l1_distance
    >>> l1_distance([[1.0, -2.0], [0.0, 1.0]], [[1.0, -1.5], [0.0, 1.0]])
    0.25
    >>> l1_distance([[1.0, -2.0]], [[1.0, -1.5]], relative=True, per_row=True)
    array([0.16666667])
    """
    T, keep_t = _attributions(D_true, uncertified, "D_true")
    P, keep_p = _attributions(D_pred, uncertified, "D_pred")
    if T.shape != P.shape:
        raise ValueError(
            f"D_true and D_pred must have the same shape; got {T.shape} and {P.shape}."
        )
    keep = keep_t & keep_p
    _warn_left_out(keep, D_true, D_pred)
    dist = np.abs(T - P).sum(axis=1)
    if relative:
        norm = np.abs(T).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            dist = np.where(norm > 0, dist / norm, np.where(dist > 0, np.inf, 0.0))
    return _reduce(dist, keep, per_row)


# -- the queried points -----------------------------------------------------------


@validate_params(
    {
        "estimator": _LOCAL_MODEL,
        "X": ["array-like"],
        "queries": [Explanation, list, tuple, np.ndarray],
        "kind": [StrOptions({"any", "share"})],
        "rtol": [Interval(Real, 0, None, closed="left")],
        "per_row": ["boolean"],
        "uncertified": _UNCERTIFIED,
    },
    prefer_skip_nested_validation=True,
)
def region_difference(
    estimator,
    X,
    queries,
    *,
    kind="any",
    rtol=1e-9,
    per_row=False,
    uncertified="drop",
):
    """Whether the queried points left the row's linear region (RD).

    The paper's region difference (§V-C, Fig. 5) judges the points an
    explainer sampled around a row ``x0``: ``RD = 0`` if every sampled point
    ``x^i`` lies in the same linear region as ``x0``, else ``RD = 1``.
    "Same region" is read from the *true* local models: the point's core
    parameters -- the logit slopes and intercepts centred across classes,
    which fix every ``(D_{c,c'}, B_{c,c'})`` -- equal the row's within
    ``rtol``. The row itself is not one of the sampled points.

    Parameters
    ----------
    estimator : estimator or callable
        Where the local models come from: a fitted white-box model supported
        by :func:`~sklearn_plm_explain.local_linear_model` (the ground truth,
        as in the paper), or a callable ``f(X) -> (W, b)`` returning local
        logit slopes of shape (n, n_features, n_outputs) and intercepts of
        shape (n, n_outputs) at the rows of ``X``.
    X : array-like of shape (n_samples, n_features)
        The explained rows.
    queries : Explanation or sequence of array-like of shape (n_points, n_features)
        The points sampled for each row, e.g. an explanation computed with
        ``explain(X, return_queries=True)`` (its flagged rows follow
        ``uncertified``) or a list of arrays.
    kind : {"any", "share"}, default="any"
        ``"any"``: the paper's 0/1 per row. ``"share"``: the fraction of the
        row's points outside its region.
    rtol : float, default=1e-9
        Relative tolerance on the core parameters (relative to the row's
        largest slope, and to 1 plus its largest intercept).
    per_row : bool, default=False
        Return one value per row instead of the mean.
    uncertified : {"drop", "keep"}, default="drop"
        Whether an explanation's flagged rows count (see :func:`l1_distance`).

    Returns
    -------
    rd : float or ndarray of shape (n_samples,)
        Mean over the rows used (rows without points are NaN and not
        averaged), or the per-row values.

    See Also
    --------
    weight_difference : How much the local models at the points differ.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_plm_explain.metrics import region_difference
    >>> def relu_model(X):  # logits (0, max(x0, 0)): two regions
    ...     X = np.asarray(X)
    ...     W = np.zeros((len(X), 1, 2))
    ...     W[:, 0, 1] = X[:, 0] > 0
    ...     return W, np.zeros((len(X), 2))
    >>> X = np.array([[1.0], [0.01]])
    >>> region_difference(relu_model, X, [[[1.1], [0.9]], [[0.02], [-0.02]]],
    ...                   per_row=True)
    array([0., 1.])
    """
    X, points, keep, explanation = _queries_of(X, queries, uncertified)
    _warn_left_out(keep, explanation)
    rd = np.full(len(X), np.nan)
    used = np.flatnonzero(keep & _has_points(points))
    for i, W, b, group in _row_models(estimator, X, points, used):
        groups, inverse = np.unique(group, return_inverse=True)
        Wc, bc = _core(W[groups], b)
        w0, b0 = Wc[inverse[0]], bc[0]
        w_tol = rtol * np.abs(w0).max()
        b_tol = rtol * (1.0 + np.abs(b0).max())
        slopes_differ = np.abs(Wc - w0).max(axis=(1, 2)) > w_tol
        differs = slopes_differ[inverse[1:]] | (np.abs(bc[1:] - b0).max(axis=1) > b_tol)
        rd[i] = differs.mean() if kind == "share" else float(differs.any())
    return _reduce(rd, keep & _has_points(points), per_row)


@validate_params(
    {
        "estimator": _LOCAL_MODEL,
        "X": ["array-like"],
        "queries": [Explanation, list, tuple, np.ndarray],
        "target": ["array-like", None],
        "per_row": ["boolean"],
        "uncertified": _UNCERTIFIED,
    },
    prefer_skip_nested_validation=True,
)
def weight_difference(
    estimator, X, queries, *, target=None, per_row=False, uncertified="drop"
):
    """How far the local models at the queried points are from the row's (WD).

    The paper's weight difference (§V-C, Fig. 6): for a row ``x0`` explained
    as class ``c`` with sampled points ``S = {x^1, ..., x^m}``,

    .. math:: \\mathrm{WD} = \\frac{\\sum_{c'=1}^{C} \\sum_{i=1}^{|S|}
              \\lVert D^0_{c,c'} - D^i_{c,c'} \\rVert_1}{(C-1)\\,|S|},

    where ``D^i_{c,c'} = W^i_c - W^i_{c'}`` is the difference of the logit
    slopes of the local model at ``x^i`` (``i = 0`` the row itself), read from
    ``estimator`` as in :func:`region_difference`. It is 0 when every point
    shares the row's slopes. For one output (regression) it is the mean
    ``||W^0 - W^i||_1``.

    Parameters
    ----------
    estimator : estimator or callable
        Source of the local models; see :func:`region_difference`.
    X : array-like of shape (n_samples, n_features)
        The explained rows.
    queries : Explanation or sequence of array-like of shape (n_points, n_features)
        The points sampled for each row; see :func:`region_difference`.
    target : array-like of int of shape (n_samples,), default=None
        Index of the explained class ``c`` of each row. ``None``: the
        explanation's ``target`` when ``queries`` is an ``Explanation``,
        otherwise the class the local model predicts at the row.
    per_row : bool, default=False
        Return one value per row instead of the mean.
    uncertified : {"drop", "keep"}, default="drop"
        Whether an explanation's flagged rows count (see :func:`l1_distance`).

    Returns
    -------
    wd : float or ndarray of shape (n_samples,)
        Mean over the rows used (rows without points are NaN), or per row.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_plm_explain.metrics import weight_difference
    >>> def relu_model(X):  # logits (0, 2 max(x0, 0))
    ...     X = np.asarray(X)
    ...     W = np.zeros((len(X), 1, 2))
    ...     W[:, 0, 1] = 2.0 * (X[:, 0] > 0)
    ...     return W, np.zeros((len(X), 2))
    >>> weight_difference(relu_model, [[0.01]], [[[0.02], [-0.02]]], target=[1])
    1.0
    """
    X, points, keep, explanation = _queries_of(X, queries, uncertified)
    _warn_left_out(keep, explanation)
    n = len(X)
    if target is None and explanation is not None:
        target = explanation.target
    if target is None:
        W0, b0, g0 = _local_models(estimator, X)
        target = np.argmax(np.einsum("nj,njk->nk", X, W0[g0]) + b0, axis=1)
    target = np.broadcast_to(np.asarray(target, dtype=np.intp), (n,))
    wd = np.full(n, np.nan)
    used = np.flatnonzero(keep & _has_points(points))
    for i, W, _, group in _row_models(estimator, X, points, used):
        groups, inverse = np.unique(group, return_inverse=True)
        W = W[groups]
        group = inverse
        C = W.shape[2]
        delta = W[group[0]] - W  # (groups, d, C)
        if C == 1:
            dist = np.abs(delta[:, :, 0]).sum(axis=1)
        else:
            c = target[i]
            # D^0_{c,c'} - D^i_{c,c'} = delta_c - delta_c', for every c'.
            dist = np.abs(delta[:, :, [c]] - delta).sum(axis=(1, 2)) / (C - 1)
        wd[i] = dist[group[1:]].mean()
    return _reduce(wd, keep & _has_points(points), per_row)


# -- consistency ------------------------------------------------------------------


@validate_params(
    {
        "X": ["array-like"],
        "values": _VALUES,
        "per_row": ["boolean"],
        "uncertified": _UNCERTIFIED,
    },
    prefer_skip_nested_validation=True,
)
def consistency_score(X, values, *, per_row=False, uncertified="drop"):
    """Cosine similarity of each row's explanation with its nearest neighbour's (CS).

    The consistency measure of the OpenAPI paper (§V-B, Fig. 4): for a row
    ``x0`` and the row ``x1`` of ``X`` nearest to it in Euclidean distance
    (``x0`` itself excluded),

    .. math:: \\mathrm{CS}(x_0) = \\frac{D(x_0) \\cdot D(x_1)}
              {\\lVert D(x_0) \\rVert_2 \\, \\lVert D(x_1) \\rVert_2},

    where ``D(x)`` is the explanation of ``x`` (of the class it was explained
    for). Rows of one linear region explained for the same class have CS 1
    with exact decision features. Two zero explanations count as identical
    (CS 1), one zero explanation as orthogonal (CS 0).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The explained rows; neighbours are searched among them.
    values : array-like of shape (n_samples, n_features) or Explanation
        Their explanations. Flagged rows of an ``Explanation`` are left out
        with ``uncertified="drop"`` -- as rows and as neighbours.
    per_row : bool, default=False
        Return one value per row instead of the mean.
    uncertified : {"drop", "keep"}, default="drop"
        See :func:`l1_distance`.

    Returns
    -------
    cs : float or ndarray of shape (n_samples,)
        Mean cosine similarity over the rows used, or per row.

    Examples
    --------
    >>> from sklearn_plm_explain.metrics import consistency_score
    >>> X = [[0.0], [0.1], [5.0]]
    >>> consistency_score(X, [[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]], per_row=True)
    array([0.70710678, 0.70710678, 0.70710678])
    """
    from sklearn.neighbors import NearestNeighbors

    X = np.asarray(X, dtype=np.float64)
    V, keep = _attributions(values, uncertified, "values")
    if X.ndim != 2 or len(X) != len(V):
        raise ValueError(
            f"X and values must have one row per explained row; got {len(X)} "
            f"and {len(V)}."
        )
    _warn_left_out(keep, values)
    rows = np.flatnonzero(keep)
    if rows.size < 2:
        raise ValueError("consistency_score needs at least two rows to compare.")
    # Without a query, kneighbors never returns a point as its own neighbour,
    # even when another row is identical to it.
    nn = NearestNeighbors(n_neighbors=1).fit(X[rows])
    neighbour = rows[nn.kneighbors(return_distance=False)[:, 0]]
    a, b = V[rows], V[neighbour]
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = (a * b).sum(axis=1) / (na * nb)
    cos = np.where(
        (na == 0) & (nb == 0), 1.0, np.where((na == 0) | (nb == 0), 0.0, cos)
    )
    cs = np.full(len(V), np.nan)
    cs[rows] = np.clip(cos, -1.0, 1.0)
    return _reduce(cs, keep, per_row)


# -- faithfulness -----------------------------------------------------------------


def _predict_proba(model, X):
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        import pandas as pd

        X = pd.DataFrame(X, columns=list(names))
    fn = model.predict_proba if hasattr(model, "predict_proba") else model
    return np.asarray(fn(X), dtype=np.float64)


@validate_params(
    {
        "model": [HasMethods(["predict_proba"]), callable],
        "X": ["array-like"],
        "values": _VALUES,
        "k": [Interval(Integral, 1, None, closed="left"), "array-like", None],
        "target": ["array-like", None],
        "bounds": [StrOptions({"data"}), tuple],
        "uncertified": _UNCERTIFIED,
    },
    prefer_skip_nested_validation=True,
)
def deletion_curve(
    model, X, values, *, k=None, target=None, bounds="data", uncertified="drop"
):
    """Change of prediction when the top-k features are altered (CPP, NLCI).

    The faithfulness test of the OpenAPI paper (§V-A, Fig. 3, after Ancona et
    al.): for each row ``x0`` explained for class ``c``, sort the features by
    decreasing ``|D_j|`` and alter the first ``k`` of them *against* the
    class: a feature with a positive weight (evidence for ``c``) is set to its
    lower bound, one with a negative weight to its upper bound (the paper
    sets pixels in ``[0, 1]`` to 0 and 1); a zero weight leaves the feature
    unchanged. Then

    * CPP (change of prediction probability) is ``|p_c(x0) - p_c(x0')|``,
      averaged over rows;
    * NLCI (number of label-changed instances) is the number of rows whose
      predicted label changes.

    A better explanation changes the prediction more with fewer features.

    Parameters
    ----------
    model : estimator or callable
        A fitted classifier with ``predict_proba``, or a callable returning
        probabilities of shape (n, n_classes).
    X : array-like of shape (n_samples, n_features)
        The explained rows.
    values : array-like of shape (n_samples, n_features) or Explanation
        Their attributions. An ``Explanation`` also gives the explained class
        (its ``target``) and flags rows (see ``uncertified``).
    k : int, array-like of int or None, default=None
        Numbers of altered features: an int gives ``1, ..., k``; an array
        those counts; ``None`` gives ``1, ..., min(n_features, 200)`` (the
        paper alters up to 200 features).
    target : array-like of int of shape (n_samples,), default=None
        Column of ``predict_proba`` whose probability is watched. ``None``:
        the explanation's ``target``, or else the predicted class.
    bounds : "data" or tuple (low, high), default="data"
        Values the altered features take: ``"data"`` uses each feature's
        minimum and maximum over ``X``; a tuple gives floats or arrays of
        shape (n_features,), e.g. ``(0.0, 1.0)`` for pixels as in the paper.
    uncertified : {"drop", "keep"}, default="drop"
        See :func:`l1_distance`.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        With ``k`` (the counts), ``cpp`` (mean CPP per count), ``nlci``
        (number of label-changed rows per count), ``cpp_per_row`` and
        ``label_changed`` (per row and count; NaN / False for the rows left
        out) and ``n_rows`` (rows used).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_plm_explain.metrics import deletion_curve
    >>> def model(X):  # p(class 1) = sigmoid(4 x0 - x1)
    ...     p = 1 / (1 + np.exp(-(4 * X[:, 0] - X[:, 1])))
    ...     return np.column_stack([1 - p, p])
    >>> curve = deletion_curve(model, [[1.0, 0.5]], [[4.0, -1.0]], k=2,
    ...                        bounds=(0.0, 1.0))
    >>> curve.nlci.tolist()
    [1, 1]
    >>> round(float(curve.cpp[0]), 4)  # x0 set to 0: sigmoid(3.5) - sigmoid(-0.5)
    0.5931
    """
    X = np.asarray(X, dtype=np.float64)
    V, keep = _attributions(values, uncertified, "values")
    n, d = X.shape
    if V.shape != X.shape:
        raise ValueError(f"values must have the shape of X {X.shape}; got {V.shape}.")
    _warn_left_out(keep, values)
    ks = _counts(k, d)
    low, high = _bounds(bounds, X)
    P0 = _predict_proba(model, X)
    label0 = P0.argmax(axis=1)
    if target is None and isinstance(values, Explanation):
        target = values.target
    target = label0 if target is None else np.asarray(target, dtype=np.intp)
    target = np.broadcast_to(target, (n,))
    cpp = np.full((n, ks.size), np.nan)
    changed = np.zeros((n, ks.size), dtype=bool)
    for i in np.flatnonzero(keep):
        order = np.argsort(-np.abs(V[i]), kind="stable")
        rank = np.empty(d, dtype=np.intp)
        rank[order] = np.arange(d)
        altered_value = np.where(V[i] > 0, low, np.where(V[i] < 0, high, X[i]))
        mask = (rank[None, :] < ks[:, None]) & (V[i] != 0)[None, :]
        Xa = np.where(mask, altered_value[None, :], X[i][None, :])
        P = _predict_proba(model, Xa)
        cpp[i] = np.abs(P[:, target[i]] - P0[i, target[i]])
        changed[i] = P.argmax(axis=1) != label0[i]
    used = keep.sum()
    return Bunch(
        k=ks,
        cpp=np.nanmean(cpp[keep], axis=0) if used else np.full(ks.size, np.nan),
        nlci=changed[keep].sum(axis=0),
        cpp_per_row=cpp,
        label_changed=changed,
        n_rows=int(used),
    )


def _counts(k, d):
    if k is None:
        return np.arange(1, min(d, 200) + 1)
    if np.ndim(k) == 0:
        return np.arange(1, int(k) + 1)
    ks = np.asarray(k, dtype=np.intp).ravel()
    if np.any(ks < 0):
        raise ValueError("k must hold non-negative counts.")
    return ks


def _bounds(bounds, X):
    if isinstance(bounds, str):
        return X.min(axis=0), X.max(axis=0)
    if len(bounds) != 2:
        raise ValueError(f"bounds must be 'data' or (low, high); got {bounds!r}.")
    low, high = (
        np.broadcast_to(np.asarray(b, dtype=np.float64), X.shape[1:]) for b in bounds
    )
    return low, high


# -- stability --------------------------------------------------------------------


@validate_params(
    {"selected": ["array-like"], "k": [Interval(Integral, 1, None, closed="left")]},
    prefer_skip_nested_validation=True,
)
def jaccard_stability(selected, k):
    """Mean pairwise Jaccard index of the top-``k`` feature sets (Jaccard@k).

    The stability measure of the S-LIME paper: explain the same row ``R``
    times with different random seeds, keep the first ``k`` selected features
    of each explanation, ``A_1, ..., A_R``, and average

    .. math:: J@k = \\binom{R}{2}^{-1} \\sum_{r < s}
              \\frac{|A_r \\cap A_s|}{|A_r \\cup A_s|}

    over the pairs. 1 means every repetition selected the same top-``k`` set.

    Parameters
    ----------
    selected : array-like of shape (n_repeats, n_selected)
        Selected feature indices of each repetition, most important first
        (e.g. ``Explanation.selected`` of one row over repetitions); negative
        entries are padding and are ignored.
    k : int
        Number of leading features compared.

    Returns
    -------
    jaccard : float
        Mean pairwise Jaccard index in ``[0, 1]`` (1 for two empty sets).

    References
    ----------
    .. [1] Z. Zhou, G. Hooker, F. Wang, "S-LIME: Stabilized-LIME for Model
       Explanation", KDD 2021.

    Examples
    --------
    >>> from sklearn_plm_explain.metrics import jaccard_stability
    >>> jaccard_stability([[0, 1, 2], [1, 0, 3]], k=2)
    1.0
    >>> jaccard_stability([[0, 1, 2], [1, 0, 3]], k=3)
    0.5
    """
    sets = np.asarray(selected)
    if sets.ndim != 2 or sets.shape[0] < 2:
        raise ValueError("selected needs at least two repetitions (2-D).")
    tops = [frozenset(int(j) for j in row[:k] if j >= 0) for row in sets]
    scores = [
        len(a & b) / len(a | b) if (a or b) else 1.0
        for a, b in itertools.combinations(tops, 2)
    ]
    return float(np.mean(scores))
