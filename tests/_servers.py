"""Real servers on 127.0.0.1 for the tests and benchmarks of RemoteModel.

* ``MLflowServer``: MLflow's own scoring server, ``mlflow models serve``, in a
  subprocess (its own process group, stopped with it).
* ``V2Server``: a small server of the Open Inference Protocol's REST API
  (KServe v2: health, model metadata, infer; FP64/FP32 tensors) on
  uvicorn/starlette, in a thread. It answers like Seldon MLServer's
  scikit-learn runtime (outputs ``predict`` and ``predict_proba``, the
  former by default).
* ``FaultProxy``: an HTTP/1.1 proxy between client and server that injects
  HTTP 500/503, 429 bursts with ``Retry-After``, delays beyond the client's
  timeout and dropped connections at set rates, and counts what it forwards.

Every wait is bounded; everything listens on 127.0.0.1 only.
"""

import asyncio
import contextlib
import hashlib
import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

import numpy as np

HOST = "127.0.0.1"


_SERVED = {}


def served_mlp():
    """The MLP the test servers serve, and its data (iris)."""
    if not _SERVED:
        from sklearn.datasets import load_iris
        from sklearn.neural_network import MLPClassifier

        X, y = load_iris(return_X_y=True)
        model = MLPClassifier((16,), max_iter=2000, random_state=0).fit(X, y)
        _SERVED.update(model=model, X=X, y=y)
    return _SERVED


def payload_kind(obj):
    if isinstance(obj, list):
        return "list"
    if isinstance(obj, dict):
        if "dataframe_split" in obj:
            return "dataframe_split"
        inputs = obj.get("inputs")
        if isinstance(inputs, list) and inputs and isinstance(inputs[0], dict):
            return "v2"
        if inputs is not None:
            return "inputs"
    return "other"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def rows_of(body):
    """The query rows in a request body of any of the three protocols."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if isinstance(obj, list):
        return np.asarray(obj, dtype=np.float64)
    if not isinstance(obj, dict):
        return None
    if "dataframe_split" in obj:
        return np.asarray(obj["dataframe_split"]["data"], dtype=np.float64)
    inputs = obj.get("inputs")
    if isinstance(inputs, list) and inputs and isinstance(inputs[0], dict):
        tensor = inputs[0]
        return np.asarray(tensor["data"], dtype=np.float64).reshape(tensor["shape"])
    if inputs is not None:
        return np.asarray(inputs, dtype=np.float64)
    return None


class Tally:
    """Thread-safe counts of requests and rows, and the rows themselves."""

    def __init__(self, keep_rows=False):
        self.lock = threading.Lock()
        self.keep_rows = keep_rows
        self.reset()

    def reset(self):
        with self.lock:
            self.requests = 0
            self.rows = 0
            self.row_counts = Counter()
            self.kinds = Counter()
            self.headers = []

    def add(self, body, headers=None):
        X = rows_of(body)
        try:
            kind = payload_kind(json.loads(body))
        except ValueError:
            kind = "not json"
        with self.lock:
            self.requests += 1
            self.kinds[kind] += 1
            if X is not None:
                self.rows += X.shape[0]
                if self.keep_rows:
                    self.row_counts.update(r.tobytes() for r in X)
            if headers is not None:
                self.headers.append(dict(headers))

    def times_seen(self, row):
        """How often ``row`` (exactly these float64 values) was received."""
        with self.lock:
            return self.row_counts[np.asarray(row, dtype=np.float64).tobytes()]


# -----------------------------------------------------------------------------
# MLflow's scoring server
# -----------------------------------------------------------------------------
_LAUNCH = r"""
import os, pickle, sys
import mlflow.sklearn
model_pkl, path, port, shim = sys.argv[1:5]
with open(model_pkl, "rb") as fh:
    model = pickle.load(fh)
import sklearn
# Requirements given, not inferred (inference loads the model in yet another
# interpreter: some ten seconds); --env-manager local ignores them anyway.
mlflow.sklearn.save_model(
    model,
    path,
    pyfunc_predict_fn=sys.argv[5],
    serialization_format="cloudpickle",
    pip_requirements=["scikit-learn==" + sklearn.__version__],
)
env = dict(os.environ, PATH=shim + os.pathsep + os.environ.get("PATH", ""))
cmd = [sys.executable, "-m", "mlflow", "models", "serve", "-m", path,
       "--env-manager", "local", "-h", "127.0.0.1", "-p", port]
os.execve(sys.executable, cmd, env)
"""


class MLflowServer:
    """``mlflow models serve`` of a fitted model, in a subprocess.

    ``start()`` returns at once (the server boots while other work goes on);
    ``wait()`` blocks until ``GET /ping`` answers. The model is saved with
    ``mlflow.sklearn.save_model(..., pyfunc_predict_fn=predict_fn,
    serialization_format="cloudpickle")`` in the subprocess, so the calling
    process never imports mlflow.
    """

    def __init__(self, model, predict_fn="predict_proba", port=None):
        self.model = model
        self.predict_fn = predict_fn
        self.port = port or free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.proc = None
        self.ready = False

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="plm-mlflow-")
        model_pkl = os.path.join(self.dir, "model.pkl")
        with open(model_pkl, "wb") as fh:
            pickle.dump(self.model, fh)
        # mlflow runs `exec uvicorn ...`: make sure it is this interpreter's
        # uvicorn (a venv with system site packages has none in its bin/).
        shim = os.path.join(self.dir, "bin")
        os.makedirs(shim)
        script = os.path.join(shim, "uvicorn")
        with open(script, "w") as fh:
            fh.write(f'#!/bin/sh\nexec "{sys.executable}" -m uvicorn "$@"\n')
        os.chmod(script, 0o755)
        self.log_path = os.path.join(self.dir, "server.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _LAUNCH,
                model_pkl,
                os.path.join(self.dir, "model"),
                str(self.port),
                shim,
                self.predict_fn,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, ended with it
        )
        return self

    def wait(self, timeout=120.0):
        import httpx

        if self.ready:
            return self
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow models serve exited:\n{self.tail()}")
            try:
                if httpx.get(self.url + "/ping", timeout=1.0).status_code == 200:
                    self.ready = True
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"mlflow models serve not up in {timeout} s:\n{self.tail()}")

    def tail(self):
        with open(self.log_path, "rb") as fh:
            return fh.read()[-3000:].decode(errors="replace")

    def stop(self):
        if self.proc is None:
            return
        try:
            self._end()
        finally:
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            self.proc = None

    def _end(self):
        if self.proc.poll() is not None:
            return
        # The server and the uvicorn it started share the group we gave it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


# -----------------------------------------------------------------------------
# Uvicorn in a thread
# -----------------------------------------------------------------------------
class ThreadedServer:
    """An ASGI app served by uvicorn in a daemon thread."""

    def __init__(self, app, port=None):
        import uvicorn

        self.port = port or free_port()
        self.url = f"http://{HOST}:{self.port}"
        config = uvicorn.Config(
            app, host=HOST, port=self.port, log_level="warning", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout=20.0):
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


# -----------------------------------------------------------------------------
# A v2 (Open Inference Protocol) server
# -----------------------------------------------------------------------------
_DTYPES = {"FP64": np.float64, "FP32": np.float32}


def v2_app(models, *, output_dtypes=None, tally=None, bare=()):
    """A Starlette app serving ``models`` (name -> fitted estimator) over v2.

    Endpoints: ``GET /v2/health/live``, ``/v2/health/ready``,
    ``/v2/models/{name}[/versions/{v}]`` (metadata), ``/v2/models/{name}/ready``
    and ``POST /v2/models/{name}[/versions/{v}]/infer``. Errors answer
    ``{"error": message}`` with HTTP 400 (bad request) or 404 (no such model).
    """
    output_dtypes = output_dtypes or {}
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    def error(status, message):
        return JSONResponse({"error": message}, status_code=status)

    def lookup(request):
        name = request.path_params["name"]
        model = models.get(name)
        version = request.path_params.get("version")
        if model is None or version not in (None, "1"):
            return name, None
        return name, model

    def live(request):
        return JSONResponse({"live": True})

    def ready(request):
        return JSONResponse({"ready": True})

    def model_ready(request):
        name, model = lookup(request)
        if model is None:
            return error(404, f"Model {name} not found")
        return JSONResponse({"name": name, "ready": True})

    def meta(request):
        name, model = lookup(request)
        if model is None:
            return error(404, f"Model {name} not found")
        body = {"name": name, "versions": ["1"], "platform": "sklearn"}
        output_dtype = output_dtypes.get(name, "FP64")
        if name not in bare:
            C = len(model.classes_)
            body["inputs"] = [
                {
                    "name": "input-0",
                    "datatype": "FP64",
                    "shape": [-1, model.n_features_in_],
                }
            ]
            body["outputs"] = [
                {"name": "predict", "datatype": "INT64", "shape": [-1, 1]},
                {"name": "predict_proba", "datatype": output_dtype, "shape": [-1, C]},
            ]
        return JSONResponse(body)

    async def infer(request):
        name, model = lookup(request)
        if model is None:
            return error(404, f"Model {name} not found")
        raw = await request.body()
        if tally is not None:
            tally.add(raw, request.headers)
        try:
            req = json.loads(raw)
        except ValueError:
            return error(400, "Request body is not JSON")
        inputs = req.get("inputs") if isinstance(req, dict) else None
        if not isinstance(inputs, list) or len(inputs) != 1:
            return error(400, "Expected exactly one input tensor")
        tensor = inputs[0]
        missing = {"name", "shape", "datatype", "data"} - set(tensor)
        if missing:
            return error(400, f"Input tensor lacks {sorted(missing)}")
        if tensor["datatype"] not in _DTYPES:
            return error(400, f"Unsupported datatype {tensor['datatype']}")
        try:
            X = np.asarray(tensor["data"], dtype=_DTYPES[tensor["datatype"]])
            X = X.reshape(tensor["shape"]).astype(np.float64)
        except (TypeError, ValueError) as exc:
            return error(400, f"Input data do not match the shape: {exc}")
        if X.ndim != 2 or X.shape[1] != model.n_features_in_:
            return error(400, f"Expected shape [-1, {model.n_features_in_}]")
        wanted = [o.get("name") for o in req.get("outputs") or [{"name": "predict"}]]
        outputs = []
        for out_name in wanted:
            if out_name == "predict":
                data = model.predict(X).astype(np.int64)
                outputs.append(
                    {
                        "name": out_name,
                        "shape": [len(X), 1],
                        "datatype": "INT64",
                        "data": data.tolist(),
                    }
                )
            elif out_name == "predict_proba":
                output_dtype = output_dtypes.get(name, "FP64")
                P = model.predict_proba(X)
                if output_dtype == "FP32":
                    # As a float32 runtime writes them: the shortest text of
                    # each float32.
                    data = [float(str(v)) for v in P.astype(np.float32).ravel()]
                else:
                    data = P.ravel().tolist()
                outputs.append(
                    {
                        "name": out_name,
                        "shape": list(P.shape),
                        "datatype": output_dtype,
                        "data": data,
                    }
                )
            else:
                return error(400, f"Model {name} has no output {out_name}")
        body = {"model_name": name, "model_version": "1", "outputs": outputs}
        if "id" in req:
            body["id"] = req["id"]
        return Response(json.dumps(body), media_type="application/json")

    routes = [
        Route("/v2/health/live", live),
        Route("/v2/health/ready", ready),
        Route("/v2/models/{name}", meta),
        Route("/v2/models/{name}/versions/{version}", meta),
        Route("/v2/models/{name}/ready", model_ready),
        Route("/v2/models/{name}/infer", infer, methods=["POST"]),
        Route("/v2/models/{name}/versions/{version}/infer", infer, methods=["POST"]),
    ]
    return Starlette(routes=routes)


# -----------------------------------------------------------------------------
# The fault proxy
# -----------------------------------------------------------------------------
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class FaultProxy:
    """An HTTP/1.1 proxy on 127.0.0.1 that injects faults at set rates.

    Parameters
    ----------
    upstream : str
        ``http://127.0.0.1:PORT`` of the real server.
    seed : int
        Faults are decided from a hash of (seed, the request's body, how many
        times this body was seen), so a given request meets the same faults in
        every run, whatever the order in which concurrent requests arrive.
    error_rate : float
        Share of requests answered HTTP 500 or 503 (alternately).
    timeout_rate, delay : float
        Share of requests held ``delay`` seconds (beyond the client's
        timeout) before they are forwarded.
    drop_rate : float
        Share of connections closed without an answer.
    burst_rate, burst_length, retry_after : float, int, str
        Share of requests that start a burst of 429 answers (with
        ``Retry-After: retry_after``) to it and the next ``burst_length - 1``
        requests.
    """

    def __init__(
        self,
        upstream,
        *,
        seed=0,
        error_rate=0.0,
        timeout_rate=0.0,
        delay=1.0,
        drop_rate=0.0,
        burst_rate=0.0,
        burst_length=3,
        retry_after="0.05",
        keep_rows=False,
        script=(),
    ):
        self.script = list(script)
        self.upstream = upstream.rstrip("/")
        self.seed = seed
        self.rates = (error_rate, timeout_rate, drop_rate, burst_rate)
        self.delay = delay
        self.burst_length = burst_length
        self.retry_after = retry_after
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.received = Tally()
        self.forwarded = Tally(keep_rows=keep_rows)
        self.faults = Counter()
        self._seen = Counter()
        self._burst = 0
        self._lock = threading.Lock()
        self._tasks = set()
        self._writers = set()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    # -- life cycle ------------------------------------------------------------------
    def start(self):
        self.thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self.loop)
        fut.result(timeout=10)
        return self

    async def _start(self):
        import httpx

        self.client = httpx.AsyncClient(timeout=60.0)
        self.tcp = await asyncio.start_server(self._serve, HOST, self.port)

    def stop(self):
        async def _stop():
            self.tcp.close()
            # Close the connections: their handlers then end by themselves.
            tasks = list(self._tasks)
            for writer in list(self._writers):
                writer.transport.abort()
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            await self.client.aclose()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    def reset(self):
        with self._lock:
            self.received.reset()
            self.forwarded.reset()
            self.faults.clear()
            self._seen.clear()
            self._burst = 0

    # -- decisions -------------------------------------------------------------------
    def _decide(self, body):
        key = hashlib.sha1(body).hexdigest()
        with self._lock:
            seen = self._seen[key]
            self._seen[key] += 1
            if self.script:
                # Scripted faults first, in order of arrival.
                return self.script.pop(0)
            if self._burst > 0:
                self._burst -= 1
                return "429"
            digest = hashlib.sha1(f"{self.seed}:{key}:{seen}".encode()).digest()
            u = int.from_bytes(digest[:8], "big") / 2**64
            error, timeout, drop, burst = self.rates
            if u < error:
                return "500" if int.from_bytes(digest[8:9], "big") % 2 else "503"
            u -= error
            if u < timeout:
                return "delay"
            u -= timeout
            if u < drop:
                return "drop"
            u -= drop
            if u < burst:
                self._burst = self.burst_length - 1
                return "429"
            return None

    # -- HTTP ----------------------------------------------------------------------
    async def _serve(self, reader, writer):
        task = asyncio.current_task()
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                self.received.add(body) if method == "POST" else None
                fault = self._decide(body) if method == "POST" else None
                retry_after = self.retry_after
                if isinstance(fault, tuple):
                    fault, retry_after = fault
                if fault is not None:
                    with self._lock:
                        self.faults[fault] += 1
                if fault == "drop":
                    writer.transport.abort()
                    return
                if fault in ("500", "503", "429"):
                    extra = {"Retry-After": retry_after} if fault == "429" else {}
                    extra["Content-Type"] = "application/json"
                    msg = json.dumps({"error": f"injected {fault}"}).encode()
                    await self._respond(writer, int(fault), msg, extra)
                    continue
                if fault == "delay":
                    await asyncio.sleep(self.delay)
                fwd = {
                    k: v
                    for k, v in headers.items()
                    if k not in ("host", "content-length", "connection")
                }
                if method == "POST":
                    self.forwarded.add(body, headers)
                resp = await self.client.request(
                    method, self.upstream + path, content=body, headers=fwd
                )
                extra = {}
                if "content-type" in resp.headers:
                    extra["Content-Type"] = resp.headers["content-type"]
                await self._respond(writer, resp.status_code, resp.content, extra)
        except (
            asyncio.IncompleteReadError,
            ConnectionError,
            asyncio.LimitOverrunError,
        ):
            pass
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _respond(self, writer, status, body, extra):
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in extra.items()]
        lines += [f"Content-Length: {len(body)}", "", ""]
        writer.write("\r\n".join(lines).encode("latin-1") + body)
        await writer.drain()
