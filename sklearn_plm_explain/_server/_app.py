"""The explainer service: its routes, the bounded work and the jobs.

Routes (``NAME`` is the served explainer's name):

* ``POST /v1/models/NAME:explain`` with ``{"instances": [[...], ...]}``
  (KServe's V1 protocol; ``"target"`` optional): ``{"explanations": E}``, the
  Explanation as :meth:`~sklearn_plm_explain.Explanation.to_dict` writes it,
  statuses and bounds included;
* ``POST /v2/models/NAME/infer`` with one FP64/FP32 input tensor of shape
  ``[n, d]``: one BYTES output ``"explanation"`` of shape ``[1]`` holding
  that JSON as a string;
* ``POST /v1/models/NAME/jobs`` (body as ``:explain``) answers ``202`` with
  a job id at once; ``GET /v1/jobs/ID`` tells its state and
  ``GET /v1/jobs/ID/result`` gives the explanation once it is done;
* ``GET /v1/models/NAME``, ``GET /v2/models/NAME``, ``GET /v2/health/ready``.

A bad body is a ``400`` that says what is wrong, before any query; more
rows than ``max_rows`` a ``413``; a request beyond ``max_concurrency``
explanations at once a ``503`` with ``Retry-After``; a query budget spent a
``429`` with the rows finished; a failing model a ``502`` that names it.
"""

# SPDX-License-Identifier: BSD-3-Clause

import copy
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from sklearn_plm_explain._utils._errors import ModelResponseError, QueryBudgetExceeded

_DTYPES = {"FP64": np.float64, "FP32": np.float32}


class _BadRequest(ValueError):
    """A request the service refuses before any query (HTTP ``status``)."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


class ExplainService:
    """A fitted explainer behind a bounded number of concurrent explanations.

    Parameters
    ----------
    explainer : fitted explainer
        Any of the package's explainers, fitted.
    name : str
        The model name in the routes.
    max_concurrency : int
        Explanations running at once (requests and jobs together).
    max_queries : int or None
        Budget of rows one request may send to a served model
        (:class:`~sklearn_plm_explain.RemoteModel`); ``None``: no budget.
    max_rows : int
        Most rows one request may ask to explain.
    """

    def __init__(
        self, explainer, name, max_concurrency=2, max_queries=None, max_rows=10_000
    ):
        check_is_fitted(explainer)
        if max_queries is not None and not hasattr(explainer.estimator_, "max_queries"):
            raise ValueError(
                "max_queries applies to a served model (RemoteModel): a local "
                "model's queries cost nothing to count on."
            )
        self.explainer, self.name = explainer, str(name)
        self.max_queries, self.max_rows = max_queries, int(max_rows)
        self.n_features = int(explainer.n_features_in_)
        self._slots = threading.BoundedSemaphore(int(max_concurrency))
        self._jobs, self._jobs_lock = {}, threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=int(max_concurrency))

    # -- the work ---------------------------------------------------------------------
    def rows(self, instances):
        """The rows of a request body, checked before any query."""
        try:
            X = np.asarray(instances, dtype=np.float64)
        except (TypeError, ValueError):
            raise _BadRequest("instances must be a list of rows of numbers") from None
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] != self.n_features:
            raise _BadRequest(
                f"instances must be a non-empty list of rows of {self.n_features} "
                f"numbers; got shape {list(X.shape)}"
            )
        if not np.isfinite(X).all():
            raise _BadRequest("instances hold values that are not finite numbers")
        if X.shape[0] > self.max_rows:
            raise _BadRequest(
                f"{X.shape[0]} rows is more than the {self.max_rows} one request "
                "may explain; send them as a job in several parts",
                status=413,
            )
        return X

    def explain(self, X, target=None):
        """The Explanation of ``X``, within a request's query budget."""
        explainer = self._budgeted()
        try:
            return explainer.explain(X, target=target)
        except ValueError as exc:
            if isinstance(exc, ModelResponseError):
                raise
            raise _BadRequest(str(exc)) from exc

    def _budgeted(self):
        if self.max_queries is None:
            return self.explainer
        # A shallow copy with its own served model: the budget is this
        # request's, the fitted state (scale, classes) is shared.
        explainer = copy.copy(self.explainer)
        served = clone(self.explainer.estimator_).set_params(
            max_queries=self.max_queries
        )
        explainer.estimator_ = served
        caller = getattr(explainer, "_caller", None)
        if caller is not None:
            # The LIME explainers query through the caller fitted with them.
            explainer._caller = copy.copy(caller)
            explainer._caller.estimator = served
        return explainer

    def slot(self):
        """A slot for one explanation, or None when all are taken."""
        return self._slots if self._slots.acquire(blocking=False) else None

    # -- jobs -------------------------------------------------------------------------
    def submit(self, X, target=None):
        job_id = uuid.uuid4().hex
        job = {
            "state": "queued",
            "rows": int(X.shape[0]),
            "result": None,
            "error": None,
        }
        with self._jobs_lock:
            self._jobs[job_id] = job
        self._pool.submit(self._run_job, job, X, target)
        return job_id

    def _run_job(self, job, X, target):
        with self._slots:
            job["state"] = "running"
            try:
                job["result"] = self.explain(X, target).to_dict()
                job["state"] = "done"
            except Exception as exc:  # noqa: BLE001 - reported to the poller
                job["error"], job["state"] = error_body(exc), "failed"

    def job(self, job_id):
        with self._jobs_lock:
            return self._jobs.get(job_id)

    def close(self):
        self._pool.shutdown(wait=False, cancel_futures=True)


def error_body(exc):
    """The JSON body and HTTP status of a failure."""
    if isinstance(exc, _BadRequest):
        return {"error": str(exc), "status": exc.status}
    if isinstance(exc, QueryBudgetExceeded):
        body = {"error": str(exc), "status": 429}
        partial = getattr(exc, "partial", None)
        if partial is not None and hasattr(partial, "to_dict"):
            body["partial"] = partial.to_dict()
        return body
    if isinstance(exc, ModelResponseError):
        return {"error": f"the explained model failed: {exc}", "status": 502}
    return {"error": f"{type(exc).__name__}: {exc}", "status": 500}


def make_app(explainer, name="model", **kwargs):
    """The ASGI application (starlette) serving a fitted explainer.

    Parameters
    ----------
    explainer : fitted explainer
    name : str, default="model"
        The model name in the routes.
    **kwargs
        ``max_concurrency``, ``max_queries``, ``max_rows`` of the service.

    Returns
    -------
    app : starlette.applications.Starlette
        With the service as ``app.state.service``.
    """
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    service = ExplainService(explainer, name, **kwargs)

    def failure(exc):
        body = error_body(exc)
        return JSONResponse(body, status_code=body.pop("status"))

    async def body_of(request):
        try:
            return json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            raise _BadRequest("the body is not JSON") from None

    def check_name(request):
        if request.path_params["name"] != service.name:
            raise _BadRequest(f"no model {request.path_params['name']!r}", 404)

    async def v1_rows(request):
        check_name(request)
        body = await body_of(request)
        if not isinstance(body, dict) or "instances" not in body:
            raise _BadRequest('the body must be a JSON object with "instances"')
        return service.rows(body["instances"]), body.get("target")

    async def run(X, target):
        slot = service.slot()
        if slot is None:
            return JSONResponse(
                {"error": "every explanation slot is busy; retry, or submit a job"},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        try:
            return await run_in_threadpool(service.explain, X, target)
        finally:
            slot.release()

    async def explain_v1(request):
        try:
            X, target = await v1_rows(request)
            out = await run(X, target)
        except Exception as exc:  # noqa: BLE001 - every failure is a JSON answer
            return failure(exc)
        if isinstance(out, JSONResponse):
            return out
        return JSONResponse({"explanations": out.to_dict()})

    async def infer_v2(request):
        try:
            check_name(request)
            X = service.rows(_v2_input(await body_of(request)))
            out = await run(X, None)
        except Exception as exc:  # noqa: BLE001
            return failure(exc)
        if isinstance(out, JSONResponse):
            return out
        text = json.dumps(out.to_dict(), allow_nan=False)
        return JSONResponse(
            {
                "model_name": service.name,
                "outputs": [
                    {
                        "name": "explanation",
                        "shape": [1],
                        "datatype": "BYTES",
                        "data": [text],
                    }
                ],
            }
        )

    async def submit(request):
        try:
            X, target = await v1_rows(request)
        except Exception as exc:  # noqa: BLE001
            return failure(exc)
        job_id = service.submit(X, target)
        return JSONResponse({"job": job_id, "state": "queued"}, status_code=202)

    def job_or_404(request):
        job = service.job(request.path_params["job"])
        if job is None:
            raise _BadRequest(f"no job {request.path_params['job']!r}", 404)
        return job

    async def job_state(request):
        try:
            job = job_or_404(request)
        except _BadRequest as exc:
            return failure(exc)
        body = {"state": job["state"], "rows": job["rows"]}
        if job["error"] is not None:
            body["error"] = job["error"]["error"]
        return JSONResponse(body)

    async def job_result(request):
        try:
            job = job_or_404(request)
        except _BadRequest as exc:
            return failure(exc)
        if job["state"] == "failed":
            error = dict(job["error"])
            return JSONResponse(error, status_code=error.pop("status"))
        if job["state"] != "done":
            return JSONResponse(
                {"error": f"the job is {job['state']}"}, status_code=409
            )
        return JSONResponse({"explanations": job["result"]})

    async def metadata(request):
        try:
            check_name(request)
        except _BadRequest as exc:
            return failure(exc)
        return JSONResponse(
            {
                "name": service.name,
                "ready": True,
                "explainer": type(explainer).__name__,
                "inputs": [
                    {
                        "name": "input-0",
                        "datatype": "FP64",
                        "shape": [-1, service.n_features],
                    }
                ],
                "outputs": [{"name": "explanation", "datatype": "BYTES", "shape": [1]}],
            }
        )

    async def ready(request):
        return JSONResponse({"ready": True})

    routes = [
        Route("/v1/models/{name}:explain", explain_v1, methods=["POST"]),
        Route("/v1/models/{name}/jobs", submit, methods=["POST"]),
        Route("/v1/jobs/{job}", job_state, methods=["GET"]),
        Route("/v1/jobs/{job}/result", job_result, methods=["GET"]),
        Route("/v1/models/{name}", metadata, methods=["GET"]),
        Route("/v2/models/{name}/infer", infer_v2, methods=["POST"]),
        Route("/v2/models/{name}", metadata, methods=["GET"]),
        Route("/v2/health/ready", ready, methods=["GET"]),
    ]
    app = Starlette(routes=routes)
    app.state.service = service
    return app


def _v2_input(body):
    """The rows of a V2 inference request: its one FP64 or FP32 input."""
    inputs = body.get("inputs") if isinstance(body, dict) else None
    if (
        not isinstance(inputs, list)
        or len(inputs) != 1
        or not isinstance(inputs[0], dict)
    ):
        raise _BadRequest('a V2 request needs "inputs": one tensor of rows')
    tensor = inputs[0]
    dtype = _DTYPES.get(tensor.get("datatype"))
    shape = tensor.get("shape")
    if dtype is None:
        raise _BadRequest(
            f"the input's datatype must be FP64 or FP32; got {tensor.get('datatype')!r}"
        )
    if not isinstance(shape, list) or len(shape) != 2:
        raise _BadRequest(
            f"the input's shape must be [n_rows, n_features]; got {shape!r}"
        )
    try:
        data = np.asarray(tensor.get("data"), dtype=dtype).astype(np.float64)
        return data.reshape(shape)
    except (TypeError, ValueError):
        raise _BadRequest(
            f"the input's data do not fill its shape {shape} with numbers"
        ) from None
