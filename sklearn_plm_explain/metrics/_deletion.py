"""The deletion curves of the OpenAPI paper: the change of prediction
probability (CPP) and the number of label-changed instances (NLCI) as the
most important features are deleted."""

# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    validate_params,
)

from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain.metrics._common import (
    _UNCERTIFIED,
    _VALUES,
    _attributions,
    _predict_proba,
    _warn_left_out,
)


@validate_params(
    {
        "model": [HasMethods(["predict_proba"]), callable],
        "X": ["array-like"],
        "values": _VALUES,
        "k": [Interval(Integral, 1, None, closed="left"), "array-like", None],
        "target": ["array-like", None],
        "bounds": [tuple, "array-like", None],
        "uncertified": _UNCERTIFIED,
    },
    prefer_skip_nested_validation=True,
)
def deletion_curve(
    model, X, values, *, k=None, target=None, bounds=None, uncertified="drop"
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
    bounds : tuple (low, high) or array-like of shape (n_background, n_features)
        Values the altered features take, fixed for every row: a tuple of
        floats or of arrays of shape (n_features,), e.g. ``(0.0, 1.0)`` for
        pixels as in the paper; or background data (such as the training
        rows the explainer was fitted on), whose per-feature minimum and
        maximum are used. Required: the range of the explained rows
        themselves would make a row's score depend on the other rows of its
        batch.
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
    if bounds is None:
        raise ValueError(
            "deletion_curve needs bounds: (low, high), such as (0.0, 1.0) for "
            "pixels as in the paper, or background data such as the training "
            "rows (bounds=X_train). The range of the explained rows would make "
            "a row's score depend on its batch."
        )
    if isinstance(bounds, tuple):
        if len(bounds) != 2:
            raise ValueError(f"bounds must be (low, high); got {len(bounds)} values.")
        low, high = (
            np.broadcast_to(np.asarray(b, dtype=np.float64), X.shape[1:])
            for b in bounds
        )
        return low, high
    background = np.asarray(bounds, dtype=np.float64)
    if background.ndim != 2 or background.shape[1] != X.shape[1]:
        raise ValueError(
            f"bounds as background data must have {X.shape[1]} columns; got "
            f"shape {background.shape}."
        )
    return background.min(axis=0), background.max(axis=0)
