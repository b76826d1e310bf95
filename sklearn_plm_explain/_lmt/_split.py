"""C4.5's binary split of a node on a numeric feature."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

__all__ = ["best_split"]

# Tolerance Weka uses when it compares weights, entropies and gains; kept so
# that splits whose gain is only rounding noise are not taken.
_TOL = 1e-6
# Gain ratios within this of the best one count as ties; the first feature
# (lowest index) wins, as in Weka's scan over the attributes.
_TIE = 1e-12
# Maximum number of (row, feature, class) cells handled at once by the split
# search; bounds its memory without a Python loop over rows.
_SPLIT_BLOCK = 4_000_000

_TINY_NORMAL = np.finfo(np.float64).tiny


def _xlog2x(a):
    """``a * log2(a)`` for ``a >= 0``, with ``0 * log2(0) = 0``."""
    a = np.maximum(a, 0.0)
    return a * np.log2(np.maximum(a, _TINY_NORMAL))


def best_split(X, Yw, n_classes, min_leaf, col_values):
    """C4.5 binary split of a node on a numeric feature (gain ratio, MDL).

    Returns ``(feature, threshold)`` or ``None``. Rows with
    ``X[:, feature] <= threshold`` go left. The candidate cuts lie between
    distinct consecutive values; for each feature the cut of maximal
    information gain is kept, its gain is reduced by ``log2(#cuts) / N``
    (Quinlan's MDL correction), and among the features whose corrected gain
    is at least the average one the best gain ratio wins.
    """
    m, d = X.shape
    class_w = Yw.sum(axis=0)
    total = class_w.sum()
    if total < 2 * min_leaf - _TOL or class_w.max() >= total - _TOL:
        return None  # too small, or pure
    # C4.5's minimum branch weight grows with the node (capped at 25).
    min_split = max(min_leaf, min(0.1 * total / n_classes, 25.0))
    old_ent = (_xlog2x(np.array(total)) - _xlog2x(class_w).sum()) / total

    best_gain = np.full(d, -np.inf)
    best_pos = np.zeros(d, dtype=np.intp)
    n_cuts = np.zeros(d, dtype=np.intp)
    left_w_at_best = np.zeros(d)
    order = np.argsort(X, axis=0, kind="stable")
    xs = np.take_along_axis(X, order, axis=0)
    row_w = Yw.sum(axis=1)
    YwT = np.ascontiguousarray(Yw.T)
    step = max(1, _SPLIT_BLOCK // max(1, m * n_classes))
    for start in range(0, d, step):
        cols = slice(start, min(d, start + step))
        order_b = order[:, cols]
        # Weight left of every cut (between sorted rows i and i + 1).
        n_left = np.cumsum(row_w[order_b], axis=0)[:-1]  # (m-1, b)
        cand = (
            (xs[1:, cols] > xs[:-1, cols])
            & (n_left >= min_split - _TOL)
            & (n_left <= total - min_split + _TOL)
        )
        n_cuts[cols] = cand.sum(axis=0)
        pos, feat = np.nonzero(cand)
        if pos.size == 0:
            continue
        # Class weights left of the candidate cuts only (k, C); the running
        # sums are taken only over features that have a candidate, along the
        # contiguous last axis (twice as fast as along the first).
        has = np.flatnonzero(n_cuts[cols])
        slot = np.empty(n_left.shape[1], dtype=np.intp)
        slot[has] = np.arange(has.size)
        run = np.cumsum(YwT[:, order_b[:, has].T], axis=2)  # (C, f, m)
        left = run[:, slot[feat], pos].T
        right = np.maximum(class_w - left, 0.0)
        nl = n_left[pos, feat]
        nr = np.maximum(total - nl, 0.0)
        new_ent = (
            _xlog2x(nl)
            + _xlog2x(nr)
            - _xlog2x(left).sum(axis=1)
            - _xlog2x(right).sum(axis=1)
        )
        gain_k = old_ent - new_ent / total
        gain_k[np.abs(gain_k * total) < _TOL] = 0.0
        gain = np.full(n_left.shape, -np.inf)
        gain[pos, feat] = gain_k
        top = gain.max(axis=0)
        first = np.argmax(gain >= top - _TIE, axis=0)
        best_gain[cols] = top
        best_pos[cols] = first
        left_w_at_best[cols] = n_left[first, np.arange(n_left.shape[1])]

    with np.errstate(divide="ignore", invalid="ignore"):
        info_gain = best_gain - np.log2(np.maximum(n_cuts, 1)) / total
    valid = (n_cuts > 0) & (best_gain > _TOL / total) & (info_gain > _TOL)
    if not valid.any():
        return None
    frac = np.column_stack([left_w_at_best, total - left_w_at_best])
    split_info = (_xlog2x(np.array(total)) - _xlog2x(frac).sum(axis=1)) / total
    ratio = np.where(
        valid & (split_info * total > _TOL),
        info_gain / np.where(split_info > 0, split_info, 1.0),
        0.0,
    )
    average = info_gain[valid].mean()
    eligible = valid & (info_gain >= average - 1e-3) & (ratio > _TOL)
    if not eligible.any():
        return None
    ratio = np.where(eligible, ratio, -np.inf)
    feature = int(np.argmax(ratio >= ratio.max() - _TIE))
    lo = xs[best_pos[feature], feature]
    hi = xs[best_pos[feature] + 1, feature]
    threshold = (lo + hi) / 2.0
    if threshold >= hi:  # no double strictly between lo and hi
        threshold = lo
    if col_values is not None:
        # Weka's default: move the cut to the largest training value below
        # the midpoint; the training partition is unchanged.
        values = col_values[:, feature]
        threshold = values[np.searchsorted(values, threshold, side="right") - 1]
    return feature, float(threshold)
