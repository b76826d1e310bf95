"""The OpenAPI paper's baselines, as explainers returning an ``Explanation``.

These explainers are **comparisons**, not certified explanations. Each reads
the local behaviour of a model from queries at a fixed perturbation scale
``h`` chosen by the user, as the baselines of the OpenAPI paper (Cong, Chu
et al., arXiv:1906.06857, §IV-B and §V) do, and none of them can tell
whether its points stayed in the row's linear region or whether the responses were precise enough: their rows
carry the status ``"uncertified"`` (``"saturated"`` when a probability
underflowed to 0 and the log-ratios are infinite, values NaN), and no
``converged`` field, since nothing was tested.

* :class:`FiniteDifferenceExplainer` -- ZOO: central differences of the
  log-ratios along each axis (``2 d`` queries besides the row, ``4 d`` with
  the Richardson error estimate). Also what a user of a *smooth* model (a
  tanh network, where :class:`~sklearn_plm_explain.OpenAPIExplainer`
  rightly refuses) can use.
* :class:`NaiveSquareExplainer` -- the naive method: the row and ``d``
  uniform points of the cube of half-width ``h``, the square system
  ``Omega_{d+1}`` solved exactly (``d`` queries besides the row).
* :class:`ExtendedLIMEExplainer` -- the paper's "extended LIME": linear or
  ridge regression of the log-ratios on uniform points of the cube of
  half-width ``h``.

All three estimate, like OpenAPI, the slopes of every class's centred log-ratio
``log p_c - mean_j log p_j`` (``coef``, shape (n, d, C)); the decision
features of class ``c`` are ``values = C/(C-1) * coef[:, :, c]``, the average
of the slopes of ``log(p_c / p_c')`` over ``c' != c`` (paper, Eq. 1). Compare
them with :mod:`sklearn_plm_explain.metrics`.
"""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn_plm_explain.baselines._base import STATUSES
from sklearn_plm_explain.baselines._classes import (
    ExtendedLIMEExplainer,
    FiniteDifferenceExplainer,
    NaiveSquareExplainer,
)

__all__ = [
    "ExtendedLIMEExplainer",
    "FiniteDifferenceExplainer",
    "NaiveSquareExplainer",
    "STATUSES",
]
