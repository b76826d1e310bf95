"""Former home of ``jaccard_stability``; use :mod:`sklearn_plm_explain.metrics`."""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn_plm_explain.metrics import jaccard_stability

__all__ = ["jaccard_stability"]
