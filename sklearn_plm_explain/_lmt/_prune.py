"""CART cost-complexity pruning of a logistic model tree, chosen by
cross-validation, as Weka's LMT does it."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

__all__ = ["cross_validated_pruning"]


def _weakest_link_alphas(grown, leaf, cut, total_weight):
    """Weakest-link alphas of the inner nodes of the current tree.

    Nodes whose subtree does not lower the training error are turned into
    leaves on the spot (``cut``), as in Weka. Returns the alpha of every node
    (``inf`` for leaves and unreachable nodes).
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


def _pruning_sequence(grown, total_weight, leaf, cut, test=None):
    """Prune weakest links until only the root is left.

    Returns the alphas ``[0, a_1, ..., a_k, 1]`` and, with ``test``, the
    weighted test error of the tree before every pruning step.
    """
    alpha = _weakest_link_alphas(grown, leaf, cut, total_weight)
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
        alpha = _weakest_link_alphas(grown, leaf, cut, total_weight)
    alphas.append(1.0)
    return np.asarray(alphas), np.asarray(errors)


def _fold_sequence(tree, X_test, y_test, sw_test, train_weight):
    """Alphas and test errors of pruning a tree grown on one fold."""
    path = tree.route(X_test)
    # Class each node's model predicts for each test row on its path.
    path_pred = np.zeros_like(path)
    for t in range(tree.n_nodes):
        rows, level = np.nonzero(path == t)
        if rows.size:
            F = X_test[rows] @ tree.coef[t] + tree.intercept[t]
            path_pred[rows, level] = F.argmax(axis=1)
    return _pruning_sequence(
        tree,
        train_weight,
        tree.left < 0,
        np.zeros(tree.n_nodes, dtype=bool),
        test=(path, path_pred, y_test, sw_test),
    )


def _best_alpha(tree_alphas, fold_alphas, fold_errors):
    """The alpha whose subtree has the least cross-validated error."""
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
    return float(np.sqrt(tree_alphas[best] * tree_alphas[best + 1]))


def _prune_at(grown, cut, total_weight, best_alpha):
    """Nodes kept when the weakest links up to ``best_alpha`` are pruned."""
    leaf = (grown.left < 0) | cut
    while True:
        alpha = _weakest_link_alphas(grown, leaf, cut, total_weight)
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
    return keep


def cross_validated_pruning(grower, X, yk, sw, n_classes, splits, grown, n_iter):
    """Choose the cost-complexity level by cross-validation and prune.

    A tree is grown by ``grower`` on each training fold and pruned step by
    step while its error on the held-out fold is recorded; the level (alpha)
    of least summed error is then applied to ``grown``, the tree of all the
    rows.

    Returns
    -------
    alpha : float
    keep : ndarray of bool of shape (grown.n_nodes,)
        The nodes of ``grown`` that the pruned tree keeps.
    """
    fold_alphas, fold_errors = [], []
    for train, test in splits:
        tree = grower.grow(X[train], yk[train], sw[train], n_classes, n_iter)
        a, e = _fold_sequence(tree, X[test], yk[test], sw[test], sw[train].sum())
        fold_alphas.append(a)
        fold_errors.append(e)
    total = sw.sum()
    cut = np.zeros(grown.n_nodes, dtype=bool)
    tree_alphas, _ = _pruning_sequence(grown, total, grown.left < 0, cut)
    best_alpha = _best_alpha(tree_alphas, fold_alphas, fold_errors)
    # Undo the weakest-link pruning (not the cuts), then prune at best_alpha.
    return best_alpha, _prune_at(grown, cut, total, best_alpha)
