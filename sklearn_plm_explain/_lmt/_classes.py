"""The logistic model tree estimator (Landwehr, Hall & Frank, 2005).

The estimator holds the parameters, validates, and assembles the engines:
folds (:mod:`._folds`), LogitBoost and its cross-validation
(:mod:`._logitboost`), growing (:mod:`._tree`) and pruning (:mod:`._prune`).
"""

# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)
from threadpoolctl import threadpool_limits

from sklearn_plm_explain._lmt._folds import cv_masks
from sklearn_plm_explain._lmt._logitboost import cv_iterations, log_softmax, softmax
from sklearn_plm_explain._lmt._prune import cross_validated_pruning
from sklearn_plm_explain._lmt._tree import LogisticModelTree, TreeGrower

__all__ = ["LogisticModelTreeClassifier"]


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
    random_state : int, RandomState instance or None, default=0
        Shuffling of the rows before they are dealt into ``cv`` folds (only
        when ``cv`` is an integer). The default is a fixed seed, as Weka's
        LMT fixes its own: two default fits on the same data grow the same
        tree. ``None`` draws new folds at every fit (and may grow another
        tree).

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
      iterations chosen and the leaves of the pruned tree are Weka's
      (``benchmarks/bench_lmt_weka.py`` compares them fold by fold).
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
        random_state=0,
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
        splits = cv_masks(self.cv, X, y, sw, self.random_state)
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
            grown = self._grower().grow(X, yk, sw, 1, 0)
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

    def _grower(self):
        return TreeGrower(
            min_samples_split=self.min_samples_split,
            min_samples_leaf=self.min_samples_leaf,
            min_samples_boost=self.min_samples_boost,
            max_depth=self.max_depth,
            split_point=self.split_point,
        )

    def _fit_tree(self, X, yk, sw, n_classes, splits):
        if self.n_iter is not None:
            self.n_iter_ = int(self.n_iter)
            self.cv_errors_ = None
        else:
            self.n_iter_, self.cv_errors_ = cv_iterations(
                X,
                yk,
                sw,
                n_classes,
                splits,
                max_iter=self.max_iter,
                n_iter_no_change=self.n_iter_no_change,
                scoring=self.iter_scoring,
            )
        grower = self._grower()
        grown = grower.grow(X, yk, sw, n_classes, self.n_iter_)
        keep_nodes = np.ones(grown.n_nodes, dtype=bool)
        self.ccp_alpha_ = 0.0
        if self.prune and grown.n_nodes > 1 and splits:
            self.ccp_alpha_, keep_nodes = cross_validated_pruning(
                grower, X, yk, sw, n_classes, splits, grown, self.n_iter_
            )
        self._set_tree(grown, keep_nodes)

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
        return log_softmax(self._logits(X))

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
        return softmax(self._logits(X))

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
