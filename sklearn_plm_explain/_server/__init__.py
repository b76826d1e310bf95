"""An explainer on the wire: explanations served over HTTP.

``plm-explain serve`` runs :func:`make_app` under uvicorn: a fitted explainer
answers KServe's V1 ``:explain`` verb and the Open Inference Protocol's V2
``infer`` (the explanation as a JSON string in a BYTES tensor, as Seldon
MLServer's explainers answer), with a job mode for long batches.
"""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn_plm_explain._server._app import make_app

__all__ = ["make_app"]
