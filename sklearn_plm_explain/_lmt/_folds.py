"""The cross-validation folds of a logistic model tree."""

# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral

import numpy as np
from sklearn.model_selection import check_cv
from sklearn.utils import check_random_state

__all__ = ["cv_masks"]


def cv_masks(cv, X, y, sw, random_state):
    """Cross-validation splits as boolean (train, test) masks over rows.

    An integer ``cv`` (or ``None``: 5) deals stratified, shuffled folds over
    groups of identical rows (:func:`_group_folds`); anything else goes
    through :func:`sklearn.model_selection.check_cv`.
    """
    n = X.shape[0]
    cv = 5 if cv is None else cv
    if isinstance(cv, Integral):
        keep = sw > 0
        fold = np.full(n, -1, dtype=np.intp)
        if keep.any():
            _, yk = np.unique(y[keep], return_inverse=True)
            fold[keep] = _group_folds(X[keep], yk, int(cv), random_state)
        return [(keep & (fold != k), fold == k) for k in range(int(cv))]
    splits = []
    for train, test in check_cv(cv, y, classifier=True).split(X, y):
        tr = np.zeros(n, dtype=bool)
        te = np.zeros(n, dtype=bool)
        tr[train] = True
        te[test] = True
        splits.append((tr, te))
    return splits


def _group_folds(X, yk, n_folds, random_state):
    """Stratified, shuffled folds dealt over groups of identical rows.

    Identical ``(y, x)`` rows form one group and are never separated, and the
    groups are dealt in a canonical (sorted, then shuffled) order, so that
    repeating a row or giving it an integer weight yields the same folds, and
    so does any permutation of the rows.
    """
    key = np.column_stack([yk.astype(np.float64), X])
    uniq, group = np.unique(key, axis=0, return_inverse=True)
    group = group.ravel()
    n_groups = uniq.shape[0]
    rng = check_random_state(random_state)
    perm = rng.permutation(n_groups)
    # Deal the shuffled groups class by class, round robin over folds.
    dealt = perm[np.argsort(uniq[perm, 0], kind="stable")]
    group_fold = np.empty(n_groups, dtype=np.intp)
    group_fold[dealt] = np.arange(n_groups) % n_folds
    return group_fold[group]
