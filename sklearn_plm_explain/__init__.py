"""Explanations of models you can only query.

Exact local linear models of piecewise-linear classifiers recovered from
queries (:class:`OpenAPIExplainer`), LIME with a stability test
(:class:`StableLIMEExplainer`, :class:`LimeTabularExplainer`), and a logistic
model tree that is itself a piecewise-linear model
(:class:`LogisticModelTreeClassifier`); global views from many local
explanations (:func:`submodular_pick`, :func:`region_census`).
"""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn_plm_explain import baselines, metrics  # noqa: E402  (submodules)
from sklearn_plm_explain._checkpoint import Checkpoint, CheckpointError
from sklearn_plm_explain._display import ExplanationDisplay
from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain._global import region_census, submodular_pick
from sklearn_plm_explain._ground_truth import decision_features, local_linear_model
from sklearn_plm_explain._lime import LimeTabularExplainer, StableLIMEExplainer
from sklearn_plm_explain._lmt import LogisticModelTreeClassifier
from sklearn_plm_explain._openapi import STATUSES, OpenAPIExplainer
from sklearn_plm_explain._remote import RemoteModel, RemoteStats
from sklearn_plm_explain._utils._errors import ModelResponseError, QueryBudgetExceeded

__version__ = "0.1.0"

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "Explanation",
    "ExplanationDisplay",
    "LimeTabularExplainer",
    "LogisticModelTreeClassifier",
    "ModelResponseError",
    "OpenAPIExplainer",
    "QueryBudgetExceeded",
    "RemoteModel",
    "RemoteStats",
    "STATUSES",
    "StableLIMEExplainer",
    "decision_features",
    "local_linear_model",
    "region_census",
    "submodular_pick",
    "__version__",
    "baselines",
    "metrics",
]
