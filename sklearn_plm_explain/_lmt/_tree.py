"""The structure of a logistic model tree, and how it is grown.

:class:`TreeGrower` grows the unpruned tree into a :class:`GrownTree` (nodes
in preorder, as lists while growing); pruning (:mod:`._prune`) chooses which
nodes to keep, and :class:`LogisticModelTree` is the fitted, pruned structure
the estimator predicts with.
"""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from sklearn_plm_explain._lmt._logitboost import logitboost
from sklearn_plm_explain._lmt._split import best_split

__all__ = ["GrownTree", "LogisticModelTree", "TreeGrower", "descend"]


class GrownTree:
    """An unpruned logistic model tree under construction (nodes in preorder).

    One list per node field; :meth:`to_arrays` turns them into arrays.
    """

    # Field -> dtype of its array (None: as the values come).
    _FIELDS = {
        "left": np.intp,
        "right": np.intp,
        "feature": np.intp,
        "threshold": np.float64,
        "coef": None,
        "intercept": None,
        "incorrect": np.float64,
        "weight": np.float64,
        "count": np.intp,
        "depth": np.intp,
        "n_boosted": np.intp,
    }
    # A new node is a leaf; its split, if any, is set afterwards.
    _LEAF = {"left": -1, "right": -1, "feature": -2, "threshold": -2.0}

    def __init__(self):
        for name in self._FIELDS:
            setattr(self, name, [])

    def add_node(self, **values):
        """Append a leaf with the given ``coef``, ``intercept``, ``incorrect``,
        ``weight``, ``count``, ``depth`` and ``n_boosted``."""
        node = {**self._LEAF, **values}
        if node.keys() != self._FIELDS.keys():
            raise TypeError(f"A node has the fields {list(self._FIELDS)}.")
        for name, value in node.items():
            getattr(self, name).append(value)

    def to_arrays(self):
        for name, dtype in self._FIELDS.items():
            setattr(self, name, np.asarray(getattr(self, name), dtype=dtype))
        return self

    @property
    def n_nodes(self):
        return len(self.left)

    def route(self, X):
        """Per row: the nodes of its path (padded with -1) by depth."""
        path = np.full((X.shape[0], int(self.depth.max()) + 1), -1, dtype=np.intp)
        walk = descend(X, self.left, self.right, self.feature, self.threshold)
        for level, (rows, node) in enumerate(walk):
            path[rows, level] = node
        return path


def descend(X, left, right, feature, threshold):
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
        walk = descend(
            X, self.children_left, self.children_right, self.feature, self.threshold
        )
        for rows, node in walk:
            leaf[rows] = node
            path_rows.append(rows)
            path_nodes.append(node)
        if return_path:
            return leaf, np.concatenate(path_rows), np.concatenate(path_nodes)
        return leaf


class TreeGrower:
    """Grows the unpruned logistic model tree, depth first.

    Every node boosts ``n_iter`` LogitBoost iterations from a copy of its
    parent's model (the root from zero), unless its weight is below
    ``min_samples_boost``; a node heavier than ``min_samples_split`` (and
    shallower than ``max_depth``) is split with C4.5's binary split.
    """

    def __init__(
        self,
        *,
        min_samples_split,
        min_samples_leaf,
        min_samples_boost,
        max_depth,
        split_point,
    ):
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_samples_boost = min_samples_boost
        self.max_depth = max_depth
        self.split_point = split_point

    def grow(self, X, yk, sw, n_classes, n_iter):
        """The unpruned tree, as a :class:`GrownTree` with ids in preorder."""
        n, d = X.shape
        Y = yk[:, None] == np.arange(n_classes)[None, :]
        Yw = Y * sw[:, None]
        col_values = np.sort(X, axis=0) if self.split_point == "actual" else None
        tree = GrownTree()
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
                coef, intercept, n_boosted, _ = logitboost(
                    Xn, Y[rows], swn, coef, intercept, n_iter
                )
            wrong = (Xn @ coef + intercept).argmax(axis=1) != yk[rows]
            tree.add_node(
                coef=coef,
                intercept=intercept,
                incorrect=swn[wrong].sum(),
                weight=weight,
                count=rows.size,
                depth=depth,
                n_boosted=n_boosted,
            )
            if weight <= self.min_samples_split or (
                self.max_depth is not None and depth >= self.max_depth
            ):
                continue
            split = best_split(
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
