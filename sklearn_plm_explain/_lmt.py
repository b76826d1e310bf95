"""Logistic model trees (Landwehr, Hall & Frank, 2005), as Weka's ``trees.LMT``.

A logistic model tree is a decision tree whose every node carries a
multinomial logistic model. The models are grown by LogitBoost with one
simple (single-attribute) linear regression per class and iteration, and a
child node continues boosting from a copy of its parent's model. Every leaf
is therefore one softmax-linear model over all classes, which makes the
whole tree a piecewise-linear model (PLM) whose local linear model can be
read off the leaf (:meth:`LogisticModelTreeClassifier.local_linear_model`).
"""

# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.model_selection import check_cv
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)
from threadpoolctl import threadpool_limits

__all__ = ["LogisticModelTreeClassifier"]

# Working responses of LogitBoost are clipped to +-3 (Friedman, Hastie &
# Tibshirani 2000; Weka's Z_MAX) so that confidently wrong rows cannot blow up.
_Z_MAX = 3.0
# Tolerance Weka uses when it compares weights, entropies and gains; kept so
# that splits whose gain is only rounding noise are not taken.
_TOL = 1e-6
# Gain ratios within this of the best one count as ties; the first feature
# (lowest index) wins, as in Weka's scan over the attributes.
_TIE = 1e-12
# Smallest positive double: probabilities are floored here so that no class
# ever gets an exact 0 (whose log is -inf), however far a row lies outside
# the training data.
_TINY = np.finfo(np.float64).smallest_subnormal
_TINY_NORMAL = np.finfo(np.float64).tiny
# Maximum number of (row, feature, class) cells handled at once by the split
# search; bounds its memory without a Python loop over rows.
_SPLIT_BLOCK = 4_000_000


def _log_softmax(F):
    """Row-wise log-softmax, computed stably by subtracting the row maximum."""
    shifted = F - F.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _softmax(F):
    """Row-wise softmax floored at the smallest positive double."""
    return np.maximum(np.exp(_log_softmax(F)), _TINY)


def _xlog2x(a):
    """``a * log2(a)`` for ``a >= 0``, with ``0 * log2(0) = 0``."""
    a = np.maximum(a, 0.0)
    return a * np.log2(np.maximum(a, _TINY_NORMAL))


def _logitboost(
    X,
    Y,
    sw,
    coef,
    intercept,
    n_iter,
    *,
    test=None,
    n_iter_no_change=None,
    scoring="error",
    prior_errors=None,
):
    """Run up to ``n_iter`` LogitBoost iterations starting from a linear model.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Training rows.
    Y : ndarray of shape (n, C), bool
        One-hot class indicators.
    sw : ndarray of shape (n,)
        Sample weights (all positive).
    coef, intercept : ndarray of shape (d, C) and (C,)
        Model to start from (the parent's model, or zeros at the root).
    n_iter : int
        Maximum number of iterations.
    test : tuple (X_test, y_test, sw_test) or None
        When given, the error on these rows is recorded after every
        iteration (and before the first one).
    n_iter_no_change : int or None
        Early stop (only with ``test``), as Weka's LogitBoost does it: once
        more than ``n_iter_no_change`` iterations in a row have not lowered
        the running minimum of the error (the error of iteration 0 does not
        count towards the minimum), the next iteration is the last.
    scoring : {"error", "mae"}
        Test criterion: weighted misclassification rate, or weighted mean
        absolute error of the class probabilities.
    prior_errors : ndarray of shape (n_iter + 1,) or None
        Test errors of the folds already done, summed per iteration. The
        early stop watches this fold's error *plus* these, as Weka does
        during its cross-validation of the number of iterations.

    Returns
    -------
    coef, intercept : ndarray
        The boosted linear model, in the coordinates of ``X``.
    n_done : int
        Number of iterations performed (fewer than ``n_iter`` when no
        attribute can be fitted any more, or when the early stop triggered).
    errors : ndarray of shape (n_done + 1,) or None
        Test error after 0, 1, ..., n_done iterations.
    """
    n, d = X.shape
    n_classes = Y.shape[1]
    coef = coef.copy()
    intercept = intercept.copy()
    # Simple regression is invariant to affine rescaling of its attribute, so
    # fitting on standardised columns gives the same model with far less
    # cancellation in the weighted sums of squares; the result is mapped
    # back to raw coordinates before it is added to the model.
    varying = np.ptp(X, axis=0) > 0
    w_sum = sw.sum()
    mu = (sw @ X) / w_sum
    sd = np.sqrt((sw @ (X - mu) ** 2) / w_sum)
    sd[~varying | (sd == 0)] = 1.0
    Xs = (X - mu) / sd
    # Class-major layout (C, n): reductions over the classes of a row run
    # along the first axis, which numpy does much faster than along a short
    # last axis. The design matrix holds [x, 1, x^2] so that one product
    # gives every weighted sum the regressions need.
    XsT = np.ascontiguousarray(Xs.T)
    design = np.hstack([Xs, np.ones((n, 1))])
    Xs2 = Xs * Xs
    both = np.empty((2 * n_classes, n))  # [weights; weighted residuals]
    YT = np.ascontiguousarray(Y.T, dtype=np.float64)
    FT = (X @ coef + intercept).T.copy()
    shrink = (n_classes - 1) / n_classes
    cls = np.arange(n_classes)
    slope_sum = np.zeros((d, n_classes))  # raw-scale slopes, summed
    icpt_sum = np.zeros(n_classes)

    errors = None
    if test is not None:
        X_test, y_test, sw_test = test
        XsT_test = np.ascontiguousarray(((X_test - mu) / sd).T)
        FT_test = (X_test @ coef + intercept).T.copy()
        YT_test = y_test[None, :] == cls[:, None]
        sw_test_sum = sw_test.sum()

        def test_error():
            if scoring == "error":
                wrong = FT_test.argmax(axis=0) != y_test
                return sw_test[wrong].sum() / sw_test_sum
            P_test = np.exp(FT_test - FT_test.max(axis=0))
            P_test /= P_test.sum(axis=0)
            mae = np.abs(P_test - YT_test).sum(axis=0) / n_classes
            return (mae @ sw_test) / sw_test_sum

        errors = [test_error()]
        prior = np.zeros(n_iter + 1) if prior_errors is None else prior_errors
        running_min, not_lowered = np.inf, 0

    n_done = 0
    for _ in range(n_iter):
        P = np.exp(FT - FT.max(axis=0))
        P /= P.sum(axis=0)
        # Residual r = y - p. With the response z = 1/p (y = 1) or
        # -1/(1 - p) (y = 0), clipped to +-3, Weka's weight (y - p)/z equals
        # |r| max(1 - |r|, 1/3), and w z = r: no division is needed.
        R = YT - P
        A = np.abs(R)
        WT = both[:n_classes]
        np.maximum(1.0 - A, 1.0 / _Z_MAX, out=WT)
        WT *= A
        WT *= sw
        np.multiply(R, sw, out=both[n_classes:])
        S = both @ design  # (2C, d + 1): sums of w x, w, w z x, w z
        sxx_raw = WT @ Xs2  # (C, d): sums of w x^2
        sx, w_c = S[:n_classes, :d], S[:n_classes, d]
        sxz, wz_c = S[n_classes:, :d], S[n_classes:, d]
        fitted = w_c > 0  # a class without weight gets the zero function
        w_safe = np.where(fitted, w_c, 1.0)
        mx = sx / w_safe[:, None]
        my = wz_c / w_safe
        sxx = sxx_raw - sx * mx
        sxy = sxz - sx * my[:, None]
        # An attribute is useful when it varies among the weighted rows.
        useful = varying & (sxx > 1e-11 * sxx_raw)
        # Reduction of the weighted squared error by the best line on x.
        gain = np.where(useful, sxy * sxy / np.where(useful, sxx, 1.0), -np.inf)
        attr = gain.argmax(axis=1)
        ok = useful[cls, attr]
        if np.any(fitted & ~ok):
            break  # no simple regression can be fitted: stop boosting
        fitted &= ok
        slope = np.where(
            fitted, sxy[cls, attr] / np.where(fitted, sxx[cls, attr], 1.0), 0.0
        )
        icpt = np.where(fitted, my - slope * mx[cls, attr], 0.0)

        # Softmax and argmax ignore a constant added to all classes of a
        # row, so the running scores need not be centred (the coefficients
        # are, once, at the end).
        step_slope = (slope * shrink)[:, None]
        step_icpt = (icpt * shrink)[:, None]
        FT += XsT[attr] * step_slope
        FT += step_icpt
        raw_slope = slope / sd[attr]
        slope_sum[attr, cls] += raw_slope  # one cell per class: no collisions
        icpt_sum += icpt - raw_slope * mu[attr]
        n_done += 1

        if test is not None:
            FT_test += XsT_test[attr] * step_slope
            FT_test += step_icpt
            err = test_error()
            errors.append(err)
            if n_iter_no_change is not None and not_lowered > n_iter_no_change:
                break
            total = err + prior[n_done]
            if total < running_min:
                running_min, not_lowered = total, 0
            else:
                not_lowered += 1
    # Every iteration added (g_j - mean_k g_k) (C - 1)/C to class j; the sum
    # over iterations can be centred once since centring is linear.
    coef += (slope_sum - slope_sum.mean(axis=1, keepdims=True)) * shrink
    intercept += (icpt_sum - icpt_sum.mean()) * shrink
    if errors is not None:
        errors = np.asarray(errors)
    return coef, intercept, n_done, errors


def _best_split(X, Yw, n_classes, min_leaf, col_values):
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


class _GrownTree:
    """An unpruned logistic model tree under construction (nodes in preorder)."""

    def __init__(self):
        self.left, self.right, self.feature, self.threshold = [], [], [], []
        self.coef, self.intercept, self.incorrect, self.depth = [], [], [], []
        self.weight, self.count, self.n_boosted = [], [], []

    def to_arrays(self):
        for name in ("left", "right", "feature", "depth", "count", "n_boosted"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.intp))
        for name in ("threshold", "incorrect", "weight"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        self.coef = np.asarray(self.coef)
        self.intercept = np.asarray(self.intercept)
        return self

    @property
    def n_nodes(self):
        return len(self.left)

    def route(self, X):
        """Per row: the nodes of its path (padded with -1) by depth."""
        path = np.full((X.shape[0], int(self.depth.max()) + 1), -1, dtype=np.intp)
        walk = _descend(X, self.left, self.right, self.feature, self.threshold)
        for level, (rows, node) in enumerate(walk):
            path[rows, level] = node
        return path


def _descend(X, left, right, feature, threshold):
    """Send every row of ``X`` from the root down to its leaf.

    Yields, level by level from the root, the rows still descending and the
    node each of them has reached; ``left[node] < 0`` marks a leaf, and rows
    with ``x[feature] <= threshold`` go left.
    """
    rows = np.arange(X.shape[0])
    node = np.zeros(X.shape[0], dtype=np.intp)
    while rows.size:
        yield rows, node
        inner = left[node] >= 0
        rows, node = rows[inner], node[inner]
        go_left = X[rows, feature[node]] <= threshold[node]
        node = np.where(go_left, left[node], right[node])


class LogisticModelTree:
    """The fitted structure of a :class:`LogisticModelTreeClassifier`.

    Nodes are numbered in depth-first preorder (root 0, left child first);
    every array is indexed by node id.

    Attributes
    ----------
    node_count : int
        Number of nodes.
    children_left, children_right : ndarray of shape (node_count,)
        Child ids, ``-1`` for leaves.
    feature : ndarray of shape (node_count,)
        Split feature of inner nodes, ``-2`` for leaves.
    threshold : ndarray of shape (node_count,)
        Rows with ``x[feature] <= threshold`` go left; ``-2.0`` for leaves.
    coef : ndarray of shape (node_count, n_features, n_classes)
        Coefficients of each node's logistic model (leaves predict with
        theirs; inner nodes keep the model their children started from).
    intercept : ndarray of shape (node_count, n_classes)
        Intercepts of the node models.
    n_node_samples : ndarray of shape (node_count,)
        Training rows reaching each node.
    weighted_n_node_samples : ndarray of shape (node_count,)
        Total sample weight reaching each node.
    n_boosting_iterations : ndarray of shape (node_count,)
        LogitBoost iterations performed at the node itself (0 when the node
        was too small and inherited its parent's model).
    max_depth : int
        Depth of the tree (0 for a single leaf).
    """

    def __init__(self, grown, keep):
        old_ids = np.flatnonzero(keep)
        new_id = np.full(grown.n_nodes, -1, dtype=np.intp)
        new_id[old_ids] = np.arange(old_ids.size)
        is_leaf = grown.left[old_ids] < 0
        # A kept node whose children were pruned away becomes a leaf.
        is_leaf |= ~keep[np.maximum(grown.left[old_ids], 0)]
        self.node_count = int(old_ids.size)
        self.children_left = np.where(is_leaf, -1, new_id[grown.left[old_ids]])
        self.children_right = np.where(is_leaf, -1, new_id[grown.right[old_ids]])
        self.feature = np.where(is_leaf, -2, grown.feature[old_ids])
        self.threshold = np.where(is_leaf, -2.0, grown.threshold[old_ids])
        self.coef = grown.coef[old_ids]
        self.intercept = grown.intercept[old_ids]
        self.n_node_samples = grown.count[old_ids]
        self.weighted_n_node_samples = grown.weight[old_ids]
        self.n_boosting_iterations = grown.n_boosted[old_ids]
        self.depths = grown.depth[old_ids]
        self.max_depth = int(self.depths.max())

    def apply(self, X, return_path=False):
        leaf = np.zeros(X.shape[0], dtype=np.intp)
        path_rows, path_nodes = [], []
        walk = _descend(
            X, self.children_left, self.children_right, self.feature, self.threshold
        )
        for rows, node in walk:
            leaf[rows] = node
            path_rows.append(rows)
            path_nodes.append(node)
        if return_path:
            return leaf, np.concatenate(path_rows), np.concatenate(path_nodes)
        return leaf


class LogisticModelTreeClassifier(ClassifierMixin, BaseEstimator):
    """Logistic model tree classifier (Landwehr, Hall & Frank, 2005).

    A decision tree with a multinomial logistic model in every node, grown as
    Weka 3.9.7's ``trees.LMT`` does with its default options:

    * The logistic models are fitted by LogitBoost with one simple
      (single-attribute) weighted linear regression per class and iteration.
      The working response ``z = 1/p`` (``y = 1``) or ``-1/(1-p)``
      (``y = 0``) is clipped to +-3, the weights are ``(y - p)/z`` (equal to
      ``p (1 - p)`` unless clipped), and the class scores are updated by
      ``F_j += (f_j - mean_k f_k) (C - 1)/C``.
    * The number of iterations is chosen once, by cross-validation of a
      stand-alone logistic model at the root (at most ``max_iter``; each
      fold boosts no further than the folds before it, and stops early once
      more than ``n_iter_no_change`` iterations in a row have not lowered
      the running minimum of the error summed over the folds done so far),
      and reused at every node.
    * A node with total weight above ``min_samples_split`` is split with
      C4.5's binary split on a numeric feature (gain ratio with the MDL
      correction, at least ``min_samples_leaf`` per branch). Each child
      continues boosting, for the same number of iterations, from a copy of
      its parent's model; a node whose weight is below ``min_samples_boost``
      keeps its parent's model.
    * The tree is pruned with CART's cost-complexity pruning, the level being
      chosen by the same cross-validation folds.

    Every leaf is a softmax-linear model over *all* classes, so every class
    keeps a strictly positive probability and the tree is an exact
    piecewise-linear model (see :meth:`local_linear_model`).

    Parameters
    ----------
    max_iter : int, default=200
        Largest number of LogitBoost iterations the cross-validation may
        choose (Weka uses 200 for the tree).
    n_iter : int or None, default=None
        Fixed number of LogitBoost iterations per node (Weka's ``-I``).
        ``None`` chooses it by cross-validation.
    n_iter_no_change : int or None, default=50
        Early stop of the iteration cross-validation, as in Weka: once more
        than this many iterations in a row have not lowered the running
        minimum of the error summed over the folds done so far, the fold
        stops after one more iteration. ``None`` always runs ``max_iter``
        iterations.
    iter_scoring : {"error", "mae"}, default="error"
        Criterion of the iteration cross-validation: misclassification rate
        (Weka's default) or mean absolute error of the probabilities
        (Weka's ``-P``).
    cv : int, cross-validation generator or iterable, default=5
        Folds for choosing the number of iterations and the pruning level.
        An integer ``k`` gives stratified, shuffled ``k``-fold splits in
        which identical rows with the same label always share a fold (see
        Notes); anything else is passed to
        :func:`sklearn.model_selection.check_cv`.
    min_samples_split : float, default=15
        A node is split only when its total sample weight (its number of
        rows with unit weights) is larger than this (Weka's ``-M``).
    min_samples_leaf : float, default=2
        Smallest total sample weight of each branch of a split.
    min_samples_boost : float, default=5
        Nodes with less total sample weight than this do not boost but keep
        their parent's model.
    max_depth : int or None, default=None
        Maximum depth of the tree (the root has depth 0).
    split_point : {"actual", "midpoint"}, default="actual"
        Where a numeric split is placed: at the largest training value below
        the midpoint between the two values it separates (Weka's default),
        or at the midpoint.
    prune : bool, default=True
        Whether to apply cost-complexity pruning chosen by cross-validation.
        With ``False`` the fully grown tree is kept.
    random_state : int, RandomState instance or None, default=None
        Shuffling of the rows before they are dealt into ``cv`` folds (only
        when ``cv`` is an integer). Pass an int for reproducible fits.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels (classes whose rows all have zero weight are dropped).
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when ``X`` has string column names.
    n_iter_ : int
        Number of LogitBoost iterations run at every node.
    cv_errors_ : ndarray or None
        Mean cross-validated error after 0, 1, ... iterations (``None`` when
        ``n_iter`` is fixed or there are fewer than two classes).
    ccp_alpha_ : float
        Cost-complexity parameter chosen by cross-validation (0.0 without
        pruning).
    tree_ : LogisticModelTree
        The tree structure and every node's model; see
        :class:`LogisticModelTree`.
    leaf_coef_ : dict of int -> ndarray of shape (n_features_in_, n_classes_)
        Coefficient matrix of each leaf, keyed by leaf id (as returned by
        :meth:`apply`). The logits of a row ``x`` in leaf ``k`` are
        ``x @ leaf_coef_[k] + leaf_intercept_[k]``.
    leaf_intercept_ : dict of int -> ndarray of shape (n_classes_,)
        Intercepts of each leaf.

    See Also
    --------
    sklearn.tree.DecisionTreeClassifier : Tree with constant leaves.
    sklearn.linear_model.LogisticRegression : A single logistic model.

    Notes
    -----
    Differences from Weka (all deliberate):

    * Sample weights count as rows: the thresholds ``min_samples_split``,
      ``min_samples_leaf`` and ``min_samples_boost`` and all errors compare
      total weights, rows of zero weight are discarded, and with an integer
      ``cv`` the folds are dealt over groups of identical ``(x, y)`` rows, so
      fitting with integer weights equals fitting on repeated rows. With unit
      weights and no duplicate rows this is ordinary stratified k-fold.
    * The folds are shuffled with ``random_state`` (Weka stratifies the data
      in its stored order). Given Weka's own folds through ``cv``, the
      iterations chosen and the leaves of the pruned tree are Weka's on every
      fold measured (``benchmarks/bench_lmt_weka.py``: breast cancer, digits,
      iris, wine and two generated sets, 30 of 30 folds).
    * Two values count as distinct for a cut whenever they differ (Weka
      ignores differences below 1e-5), and the ``actual`` split point is the
      largest value of the current training data (Weka uses the full data
      set also while cross-validating the pruning).
    * If cross-validation chooses 0 iterations, no node boosts (Weka would
      then cross-validate the iterations at every node).
    * Only numeric features; missing values are not accepted.

    ``predict_proba`` is the softmax of the leaf logits, computed as
    ``exp(log_softmax(F))`` and floored at the smallest positive double
    (about 4.9e-324), so no probability is ever exactly 0;
    ``predict_log_proba`` is ``log_softmax(F)`` itself (finite, never
    ``log(0)``).

    References
    ----------
    N. Landwehr, M. Hall and E. Frank, "Logistic Model Trees", Machine
    Learning 59(1-2), 161-205, 2005.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_plm_explain import LogisticModelTreeClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = LogisticModelTreeClassifier(random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    >>> W, b = clf.local_linear_model(X[:2])
    >>> W.shape, b.shape
    ((2, 4, 3), (2, 3))
    >>> clf.get_n_leaves() >= 1
    True
    """

    _parameter_constraints: dict = {
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_iter": [Interval(Integral, 0, None, closed="left"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None],
        "iter_scoring": [StrOptions({"error", "mae"})],
        "cv": ["cv_object"],
        "min_samples_split": [Interval(Real, 0, None, closed="left")],
        "min_samples_leaf": [Interval(Real, 0, None, closed="neither")],
        "min_samples_boost": [Interval(Real, 0, None, closed="left")],
        "max_depth": [Interval(Integral, 0, None, closed="left"), None],
        "split_point": [StrOptions({"actual", "midpoint"})],
        "prune": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        max_iter=200,
        n_iter=None,
        n_iter_no_change=50,
        iter_scoring="error",
        cv=5,
        min_samples_split=15,
        min_samples_leaf=2,
        min_samples_boost=5,
        max_depth=None,
        split_point="actual",
        prune=True,
        random_state=None,
    ):
        self.max_iter = max_iter
        self.n_iter = n_iter
        self.n_iter_no_change = n_iter_no_change
        self.iter_scoring = iter_scoring
        self.cv = cv
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_samples_boost = min_samples_boost
        self.max_depth = max_depth
        self.split_point = split_point
        self.prune = prune
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Grow, and by default prune, the logistic model tree.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (numeric).
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; an integer weight is equivalent to
            repeating the row, a zero weight to removing it.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        sw = _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True
        )
        splits = self._splits(X, y, sw)
        keep = sw > 0
        X, y, sw = X[keep], y[keep], sw[keep]
        splits = [(tr[keep], te[keep]) for tr, te in splits]
        self.classes_, yk = np.unique(y, return_inverse=True)
        self.n_classes_ = n_classes = self.classes_.size
        n, d = X.shape

        if n_classes < 2:
            # One class: a single leaf whose one logit is 0 (probability 1).
            self.n_iter_ = 0
            self.cv_errors_ = None
            self.ccp_alpha_ = 0.0
            grown = self._grow(X, yk, sw, 1, 0)
            self._set_tree(grown, np.ones(grown.n_nodes, dtype=bool))
            return self

        splits = [(tr, te) for tr, te in splits if tr.any() and te.any()]
        # The products in LogitBoost are small (classes x rows x features)
        # and run thousands of times: multi-threaded BLAS only adds
        # synchronisation cost there, and on a busy machine it made the fit
        # several times slower. One thread is used for the whole fit.
        with threadpool_limits(limits=1, user_api="blas"):
            self._fit_tree(X, yk, sw, n_classes, splits)
        return self

    def _fit_tree(self, X, yk, sw, n_classes, splits):
        if self.n_iter is not None:
            self.n_iter_ = int(self.n_iter)
            self.cv_errors_ = None
        else:
            self.n_iter_, self.cv_errors_ = self._cv_iterations(
                X, yk, sw, n_classes, splits
            )

        grown = self._grow(X, yk, sw, n_classes, self.n_iter_)
        keep_nodes = np.ones(grown.n_nodes, dtype=bool)
        self.ccp_alpha_ = 0.0
        if self.prune and grown.n_nodes > 1 and splits:
            self.ccp_alpha_, keep_nodes = self._prune_cv(
                X, yk, sw, n_classes, splits, grown
            )
        self._set_tree(grown, keep_nodes)

    def _splits(self, X, y, sw):
        """Cross-validation splits as boolean (train, test) masks over rows."""
        n = X.shape[0]
        cv = 5 if self.cv is None else self.cv
        if isinstance(cv, Integral):
            keep = sw > 0
            fold = np.full(n, -1, dtype=np.intp)
            if keep.any():
                _, yk = np.unique(y[keep], return_inverse=True)
                fold[keep] = self._group_folds(X[keep], yk, int(cv))
            return [(keep & (fold != k), fold == k) for k in range(int(cv))]
        splits = []
        for train, test in check_cv(cv, y, classifier=True).split(X, y):
            tr = np.zeros(n, dtype=bool)
            te = np.zeros(n, dtype=bool)
            tr[train] = True
            te[test] = True
            splits.append((tr, te))
        return splits

    def _group_folds(self, X, yk, n_folds):
        """Stratified, shuffled folds dealt over groups of identical rows.

        Identical ``(y, x)`` rows form one group and are never separated, and
        the groups are dealt in a canonical (sorted, then shuffled) order, so
        that repeating a row or giving it an integer weight yields the same
        folds, and so does any permutation of the rows.
        """
        key = np.column_stack([yk.astype(np.float64), X])
        uniq, group = np.unique(key, axis=0, return_inverse=True)
        group = group.ravel()
        n_groups = uniq.shape[0]
        rng = check_random_state(self.random_state)
        perm = rng.permutation(n_groups)
        # Deal the shuffled groups class by class, round robin over folds.
        dealt = perm[np.argsort(uniq[perm, 0], kind="stable")]
        group_fold = np.empty(n_groups, dtype=np.intp)
        group_fold[dealt] = np.arange(n_groups) % n_folds
        return group_fold[group]

    def _cv_iterations(self, X, yk, sw, n_classes, splits):
        """Choose the number of LogitBoost iterations by cross-validation."""
        d = X.shape[1]
        Y = yk[:, None] == np.arange(n_classes)[None, :]
        errors = np.zeros(self.max_iter + 1)
        completed = self.max_iter
        for train, test in splits:
            # As in Weka: a fold boosts at most as far as every earlier fold
            # went, and stops early on the error summed over the folds so far.
            _, _, n_done, errs = _logitboost(
                X[train],
                Y[train],
                sw[train],
                np.zeros((d, n_classes)),
                np.zeros(n_classes),
                completed,
                test=(X[test], yk[test], sw[test]),
                n_iter_no_change=self.n_iter_no_change,
                scoring=self.iter_scoring,
                prior_errors=errors,
            )
            errors[: n_done + 1] += errs
            # Only iterations that every fold reached can be compared.
            completed = min(completed, n_done)
        if not splits:
            return 0, None
        errors = errors[: completed + 1] / len(splits)
        return int(np.argmin(errors)), errors

    def _grow(self, X, yk, sw, n_classes, n_iter):
        """Grow the unpruned tree; node ids are assigned in preorder."""
        n, d = X.shape
        Y = yk[:, None] == np.arange(n_classes)[None, :]
        Yw = Y * sw[:, None]
        col_values = np.sort(X, axis=0) if self.split_point == "actual" else None
        tree = _GrownTree()
        # (rows, parent id, is left child, depth)
        stack = [(np.arange(n), -1, True, 0)]
        while stack:
            rows, parent, is_left, depth = stack.pop()
            node = tree.n_nodes
            if parent >= 0:
                (tree.left if is_left else tree.right)[parent] = node
                coef, intercept = tree.coef[parent], tree.intercept[parent]
            else:
                coef, intercept = np.zeros((d, n_classes)), np.zeros(n_classes)
            Xn, swn = X[rows], sw[rows]
            weight = swn.sum()
            n_boosted = 0
            if weight >= self.min_samples_boost and n_iter > 0:
                coef, intercept, n_boosted, _ = _logitboost(
                    Xn, Y[rows], swn, coef, intercept, n_iter
                )
            wrong = (Xn @ coef + intercept).argmax(axis=1) != yk[rows]
            tree.left.append(-1)
            tree.right.append(-1)
            tree.feature.append(-2)
            tree.threshold.append(-2.0)
            tree.coef.append(coef)
            tree.intercept.append(intercept)
            tree.incorrect.append(swn[wrong].sum())
            tree.weight.append(weight)
            tree.count.append(rows.size)
            tree.depth.append(depth)
            tree.n_boosted.append(n_boosted)
            if weight <= self.min_samples_split or (
                self.max_depth is not None and depth >= self.max_depth
            ):
                continue
            split = _best_split(
                Xn, Yw[rows], n_classes, self.min_samples_leaf, col_values
            )
            if split is None:
                continue
            feature, threshold = split
            go_left = Xn[:, feature] <= threshold
            tree.feature[node] = feature
            tree.threshold[node] = threshold
            stack.append((rows[~go_left], node, False, depth + 1))
            stack.append((rows[go_left], node, True, depth + 1))
        return tree.to_arrays()

    # -------------------------------------------------------------- pruning
    @staticmethod
    def _alphas(grown, leaf, cut, total_weight):
        """Weakest-link alphas of the inner nodes of the current tree.

        Nodes whose subtree does not lower the training error are turned
        into leaves on the spot (``cut``), as in Weka. Returns the alpha of
        every node (``inf`` for leaves and unreachable nodes).
        """
        n_nodes = grown.n_nodes
        tree_err = grown.incorrect.copy()
        n_leaves = np.ones(n_nodes)
        # Children have larger (preorder) ids than their parent.
        for t in range(n_nodes - 1, -1, -1):
            if not leaf[t]:
                lc, rc = grown.left[t], grown.right[t]
                tree_err[t] = tree_err[lc] + tree_err[rc]
                n_leaves[t] = n_leaves[lc] + n_leaves[rc]
        alpha = np.full(n_nodes, np.inf)
        stack = [0]
        while stack:
            t = stack.pop()
            if leaf[t]:
                continue
            diff = grown.incorrect[t] - tree_err[t]
            if diff <= 0:
                leaf[t] = cut[t] = True
                continue
            alpha[t] = diff / total_weight / (n_leaves[t] - 1)
            stack.extend((grown.right[t], grown.left[t]))
        return alpha

    def _prune_sequence(self, grown, total_weight, leaf, cut, test=None):
        """Prune weakest links until only the root is left.

        Returns the alphas ``[0, a_1, ..., a_k, 1]`` and, with ``test``, the
        weighted test error of the tree before every pruning step.
        """
        alpha = self._alphas(grown, leaf, cut, total_weight)
        alphas, errors = [0.0], []
        if test is not None:
            path, path_pred, y_test, sw_test = test

            def test_error():
                flags = np.where(path >= 0, leaf[np.maximum(path, 0)], True)
                first = flags.argmax(axis=1)
                pred = path_pred[np.arange(path.shape[0]), first]
                return sw_test[pred != y_test].sum() / sw_test.sum()

            errors.append(test_error())
        while np.isfinite(alpha).any():
            t = int(np.argmin(alpha))
            leaf[t] = True
            alphas.append(alpha[t])
            if test is not None:
                errors.append(test_error())
            alpha = self._alphas(grown, leaf, cut, total_weight)
        alphas.append(1.0)
        return np.asarray(alphas), np.asarray(errors)

    def _prune_cv(self, X, yk, sw, n_classes, splits, grown):
        """Choose the cost-complexity level by cross-validation and prune."""
        fold_alphas, fold_errors = [], []
        for train, test in splits:
            tree = self._grow(X[train], yk[train], sw[train], n_classes, self.n_iter_)
            X_test = X[test]
            path = tree.route(X_test)
            # Class each node's model predicts for each test row on its path.
            path_pred = np.zeros_like(path)
            for t in range(tree.n_nodes):
                rows, level = np.nonzero(path == t)
                if rows.size:
                    F = X_test[rows] @ tree.coef[t] + tree.intercept[t]
                    path_pred[rows, level] = F.argmax(axis=1)
            leaf = tree.left < 0
            a, e = self._prune_sequence(
                tree,
                sw[train].sum(),
                leaf,
                np.zeros(tree.n_nodes, dtype=bool),
                test=(path, path_pred, yk[test], sw[test]),
            )
            fold_alphas.append(a)
            fold_errors.append(e)

        total = sw.sum()
        cut = np.zeros(grown.n_nodes, dtype=bool)
        leaf = grown.left < 0
        tree_alphas, _ = self._prune_sequence(grown, total, leaf, cut)
        n_steps = tree_alphas.size - 2
        cv_error = np.zeros(n_steps + 1)
        for i in range(n_steps + 1):
            # Geometric midpoint of the alpha interval of the i-th subtree.
            alpha = np.sqrt(tree_alphas[i] * tree_alphas[i + 1])
            for a, e in zip(fold_alphas, fold_errors):
                above = a > alpha
                pos = int(np.argmax(above)) if above.any() else a.size
                cv_error[i] += e[min(pos - 1, e.size - 1)]
        # Ties go to the smaller tree (largest i), as in Weka.
        best = n_steps - int(np.argmin(cv_error[::-1]))
        best_alpha = float(np.sqrt(tree_alphas[best] * tree_alphas[best + 1]))

        # Undo the weakest-link pruning (not the cuts), then prune at best_alpha.
        leaf = (grown.left < 0) | cut
        while True:
            alpha = self._alphas(grown, leaf, cut, total)
            if not np.isfinite(alpha).any():
                break
            t = int(np.argmin(alpha))
            if alpha[t] > best_alpha:
                break
            leaf[t] = True
        # Keep the nodes reachable through non-leaf ancestors.
        keep = np.zeros(grown.n_nodes, dtype=bool)
        keep[0] = True
        for t in range(grown.n_nodes):
            if keep[t] and not leaf[t]:
                keep[grown.left[t]] = keep[grown.right[t]] = True
        return best_alpha, keep

    def _set_tree(self, grown, keep):
        self.tree_ = LogisticModelTree(grown, keep)
        leaves = np.flatnonzero(self.tree_.children_left < 0)
        self.leaf_coef_ = {int(k): self.tree_.coef[k].copy() for k in leaves}
        self.leaf_intercept_ = {int(k): self.tree_.intercept[k].copy() for k in leaves}

    # ------------------------------------------------------------ predict
    def _validate_X(self, X):
        return validate_data(self, X, dtype=np.float64, reset=False)

    def _logits(self, X):
        """Leaf logits ``x @ W_leaf + b_leaf`` of every row, shape (n, C)."""
        leaves = self.tree_.apply(X)
        F = np.empty((X.shape[0], self.n_classes_))
        for leaf in np.unique(leaves):
            rows = leaves == leaf
            F[rows] = X[rows] @ self.tree_.coef[leaf] + self.tree_.intercept[leaf]
        return F

    def decision_function(self, X):
        """Leaf logits of the samples.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_classes) or (n_samples,)
            The logits ``F`` of each row's leaf model. With two classes, as
            for scikit-learn's classifiers, the 1-D difference
            ``F[:, 1] - F[:, 0]`` (positive means ``classes_[1]``); with a
            single class, zeros of shape (n_samples,).
        """
        check_is_fitted(self)
        X = self._validate_X(X)
        F = self._logits(X)
        if self.n_classes_ == 2:
            return F[:, 1] - F[:, 0]
        if self.n_classes_ == 1:
            return F[:, 0]
        return F

    def predict_log_proba(self, X):
        """Log of the class probabilities, computed from the logits.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            ``log_softmax`` of the leaf logits; always finite.
        """
        check_is_fitted(self)
        X = self._validate_X(X)
        return _log_softmax(self._logits(X))

    def predict_proba(self, X):
        """Class probabilities: softmax of the leaf logits.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities, columns in the order of ``classes_``. Every entry
            is strictly positive (floored at the smallest positive double).
        """
        check_is_fitted(self)
        X = self._validate_X(X)
        return _softmax(self._logits(X))

    def predict(self, X):
        """Predict class labels (the class of largest leaf logit).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            Predicted labels, taken from ``classes_``.
        """
        check_is_fitted(self)
        X = self._validate_X(X)
        return self.classes_[self._logits(X).argmax(axis=1)]

    def local_linear_model(self, X):
        """Exact local linear model (leaf logits) of every row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        W : ndarray of shape (n_samples, n_features, n_classes)
            Coefficients of the leaf model of each row (all classes, also
            for binary problems).
        b : ndarray of shape (n_samples, n_classes)
            Intercepts, so that ``softmax(X[i] @ W[i] + b[i])`` equals
            ``predict_proba(X)[i]``.
        """
        check_is_fitted(self)
        X = self._validate_X(X)
        leaves = self.tree_.apply(X)
        return self.tree_.coef[leaves], self.tree_.intercept[leaves]

    def apply(self, X):
        """Index of the leaf each sample ends in.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        leaves : ndarray of shape (n_samples,)
            Leaf ids (node ids in ``tree_``, keys of ``leaf_coef_``).
        """
        check_is_fitted(self)
        X = self._validate_X(X)
        return self.tree_.apply(X)

    def decision_path(self, X):
        """Nodes each sample passes through.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        indicator : sparse matrix of shape (n_samples, n_nodes)
            CSR matrix whose nonzero entries ``[i, j]`` mark that sample
            ``i`` visits node ``j``.
        """
        check_is_fitted(self)
        X = self._validate_X(X)
        _, rows, nodes = self.tree_.apply(X, return_path=True)
        data = np.ones(rows.size, dtype=np.intp)
        indicator = sparse.csr_matrix(
            (data, (rows, nodes)), shape=(X.shape[0], self.tree_.node_count)
        )
        indicator.sort_indices()
        return indicator

    def get_depth(self):
        """Depth of the tree (0 for a single leaf).

        Returns
        -------
        depth : int
            Largest number of splits from the root to a leaf.
        """
        check_is_fitted(self)
        return self.tree_.max_depth

    def get_n_leaves(self):
        """Number of leaves.

        Returns
        -------
        n_leaves : int
            Number of leaves of the fitted tree.
        """
        check_is_fitted(self)
        return int(np.sum(self.tree_.children_left < 0))
