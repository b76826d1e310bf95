"""OpenAPI: exact local linear models of piecewise-linear classifiers from queries.

The modules follow the algorithm in the order it runs for one row:

* ``_explainer``: the estimator (validation, scale, the explain scaffold's hook);
* ``_search``: rows in groups, each row's cube after cube until certified;
* ``_design``: the query points of a cube;
* ``_fit``: the local linear models fitted to a cube's answers;
* ``_noise``: how noisy each answer is (floors, grids, learned noise);
* ``_precision``: what the answers say about the model's precision;
* ``_certificate``: whether a cube's fit is certified, and its bound;
* ``_radius``: the next cube's radius after a failed one;
* ``_regions``: certified regions shared between rows;
* ``_state``: the per-row state of a search group and its result table.
"""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn_plm_explain._openapi._explainer import STATUSES, OpenAPIExplainer

__all__ = ["OpenAPIExplainer", "STATUSES"]
