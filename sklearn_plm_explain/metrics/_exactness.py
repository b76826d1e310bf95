"""The OpenAPI paper's exactness measures: L1 distance of decision
features, region and weight differences of local models, and the
consistency of interpretations within a region."""

# SPDX-License-Identifier: BSD-3-Clause

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import (
    Interval,
    StrOptions,
    validate_params,
)

from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain.metrics._common import (
    _LOCAL_MODEL,
    _UNCERTIFIED,
    _VALUES,
    _attributions,
    _core,
    _has_points,
    _local_models,
    _queries_of,
    _reduce,
    _row_models,
    _warn_left_out,
)


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
