"""LIME for tabular data, and the engines it shares with S-LIME.

Modules, in the order the estimator uses them: ``_input`` (categorical
columns and the validation of rows), ``_sampling`` (the fitted sampling
space and the neighbourhoods of rows), ``_query`` (model calls in the
original representation), ``_surrogate`` (weighted statistics, feature
selection, the surrogate and its kernel), ``_results`` (per-row results and
the Explanation), ``_output`` (lime's own presentation of a result:
``as_list``, ``as_map``), ``_base`` (the estimator shared with S-LIME, which
only calls the engines), ``_classes`` (:class:`LimeTabularExplainer`) and
``_stable`` (:class:`StableLIMEExplainer` and its LARS step test).
"""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn_plm_explain._lime._classes import LimeTabularExplainer
from sklearn_plm_explain._lime._stable import StableLIMEExplainer

# The benchmarks read a neighbourhood's statistics from here.
from sklearn_plm_explain._lime._surrogate import _LocalStats  # noqa: F401

__all__ = ["LimeTabularExplainer", "StableLIMEExplainer"]
