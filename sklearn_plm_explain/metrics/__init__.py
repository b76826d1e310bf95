"""Measures of explanations: exactness, consistency, faithfulness, stability.

The measures of the OpenAPI paper (Z. Cong, L. Chu, L. Wang, X. Hu, J. Pei,
"Exact and Consistent Interpretation of Piecewise Linear Models Hidden behind
APIs: A Closed Form Solution", arXiv:1906.06857, section V) and of S-LIME
(Z. Zhou, G. Hooker, F. Wang, KDD 2021), as plain functions in the style of
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

from sklearn_plm_explain.metrics._common import UncertifiedRowsWarning
from sklearn_plm_explain.metrics._deletion import deletion_curve
from sklearn_plm_explain.metrics._exactness import (
    consistency_score,
    l1_distance,
    region_difference,
    weight_difference,
)
from sklearn_plm_explain.metrics._stability import jaccard_stability

__all__ = [
    "UncertifiedRowsWarning",
    "consistency_score",
    "deletion_curve",
    "jaccard_stability",
    "l1_distance",
    "region_difference",
    "weight_difference",
]
