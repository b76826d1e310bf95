"""Logistic model trees (Landwehr, Hall & Frank, 2005), as Weka's ``trees.LMT``.

A logistic model tree is a decision tree whose every node carries a
multinomial logistic model. The models are grown by LogitBoost with one
simple (single-attribute) linear regression per class and iteration, and a
child node continues boosting from a copy of its parent's model. Every leaf
is therefore one softmax-linear model over all classes, which makes the
whole tree a piecewise-linear model (PLM) whose local linear model can be
read off the leaf (:meth:`LogisticModelTreeClassifier.local_linear_model`).

Modules, in the order the estimator uses them: ``_folds`` (cross-validation
folds), ``_logitboost`` (LogitBoost and the cross-validation of its number
of iterations), ``_split`` (C4.5 splits), ``_tree`` (growing, and the fitted
tree structure), ``_prune`` (cost-complexity pruning), ``_classes`` (the
estimator).
"""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn_plm_explain._lmt._classes import LogisticModelTreeClassifier

__all__ = ["LogisticModelTreeClassifier"]
