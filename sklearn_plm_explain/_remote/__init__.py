"""Models served over HTTP: the estimator, its protocols and its transport.

* ``_model.py``: :class:`RemoteModel`, the estimator-like facade;
* ``_protocols.py``: the request and answer bodies of MLflow's scoring
  server, the Open Inference Protocol (v2) and plain JSON;
* ``_transport.py``: the httpx client, concurrent requests, retries, the
  query budget and :class:`RemoteStats`.
"""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn_plm_explain._remote._model import RemoteModel
from sklearn_plm_explain._remote._transport import RemoteStats

__all__ = ["RemoteModel", "RemoteStats"]
