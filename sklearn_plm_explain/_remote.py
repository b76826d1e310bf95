"""RemoteModel: a model served over HTTP, queried like a fitted estimator."""

# SPDX-License-Identifier: BSD-3-Clause

import email.utils
import json
import logging
import random
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from numbers import Integral, Real
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import ClassifierTags, RegressorTags
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if

from sklearn_plm_explain._blackbox import ModelResponseError, QueryBudgetExceeded
from sklearn_plm_explain._checkpoint import fingerprinting

__all__ = ["RemoteModel", "RemoteStats"]

logger = logging.getLogger("sklearn_plm_explain.remote")

# Answers worth trying again: the request was fine, the server was not.
# 501 (not implemented) and 505 (HTTP version) will not get better.
_RETRY_STATUS = {408, 425, 429}
_NO_RETRY_5XX = {501, 505}
# Longest Retry-After honoured; a server asking for more is reported.
_MAX_RETRY_AFTER = 300.0
# Longest back-off between two attempts, in seconds.
_MAX_BACKOFF = 30.0
# Characters of a server's error message quoted in our messages.
_MESSAGE_CHARS = 500
_PROTOCOLS = ("mlflow", "v2", "json")
_OUTPUTS = ("predict_proba", "decision_function", "predict")


def _httpx():
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "RemoteModel needs httpx: install the 'remote' extra, "
            'python -m pip install "sklearn-plm-explain[remote]"'
        ) from exc
    return httpx


def _dumps(obj):
    """JSON bytes; floats as the shortest text that reads back exactly.

    orjson (in the ``remote`` extra) is some twenty times faster on large
    arrays than the standard library; both write every float64 so that it
    round-trips bitwise.
    """
    try:
        import orjson
    except ImportError:
        return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


def _loads(content):
    try:
        import orjson
    except ImportError:
        return json.loads(content)
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        # orjson refuses NaN and Infinity, which Python's json reads: let it
        # try, so that such an answer is reported as non-finite values.
        return json.loads(content)


@dataclass
class RemoteStats:
    """What a :class:`RemoteModel` has sent and waited for so far.

    Attributes
    ----------
    calls : int
        Calls of ``predict_proba`` / ``decision_function`` / ``predict``.
    requests : int
        HTTP requests sent, retries included (metadata requests too).
    rows_sent : int
        Query rows sent, retries included: what ``max_queries`` counts.
    rows_answered : int
        Query rows of successful answers.
    retries : int
        Requests sent again after a retryable failure.
    retry_reasons : dict
        Retries by cause: ``"HTTP 503"``, ``"HTTP 429"``, ``"timeout"``,
        ``"connection"``.
    wait_seconds : float
        Time spent in back-off between attempts.
    request_seconds : float
        Time spent in requests, summed over concurrent requests.
    bytes_sent, bytes_received : int
        Bodies of requests and answers.
    """

    calls: int = 0
    requests: int = 0
    rows_sent: int = 0
    rows_answered: int = 0
    retries: int = 0
    retry_reasons: dict = field(default_factory=dict)
    wait_seconds: float = 0.0
    request_seconds: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0

    def as_dict(self):
        """The counters as a plain dictionary."""
        return asdict(self)


class RemoteModel(BaseEstimator):
    """A model served over HTTP, queried as if it were a fitted estimator.

    Every explainer of this package and the ``plm-explain`` command take a
    ``RemoteModel`` where they take a fitted model: it has ``predict_proba``
    (or ``decision_function``, or ``predict`` for a regressor, whichever the
    endpoint answers with), ``classes_`` and ``n_features_in_``, and it is
    never refitted. Each call is split into requests of at most
    ``max_batch_rows`` rows, up to ``max_concurrency`` of them in flight over
    one pool of connections, and the answers are reassembled in order.
    Connection errors, timeouts, HTTP 429 and 5xx answers are retried with
    exponential back-off and jitter, honouring ``Retry-After``; answers that
    mean bad input (other 4xx) are not. Floats are sent as the shortest text
    that reads back exactly, so a float64 model answers exactly what it would
    answer in-process on the same batch.

    Read more in the README's section "Models behind an API".

    Parameters
    ----------
    url : str
        Where the model is served. ``"mlflow"``: the server's address
        (``/invocations`` is appended unless present). ``"v2"``: the server's
        address with ``model_name``, or the model's own address
        ``http://host:port/v2/models/NAME[/versions/V]``. ``"json"``: the
        address rows are posted to.
    protocol : {"mlflow", "v2", "json"}, default="mlflow"
        ``"mlflow"``: MLflow's scoring server (``mlflow models serve``),
        ``POST /invocations`` with ``{"inputs": rows}`` (or
        ``{"dataframe_split": ...}`` when ``columns`` are given), answer
        ``{"predictions": ...}``. ``"v2"``: the Open Inference Protocol
        (KServe v2, Seldon MLServer, Triton), ``POST
        /v2/models/NAME/infer`` with one FP64 (or the FP32 the model's
        metadata asks for) input tensor; the model's metadata ``GET
        /v2/models/NAME`` tells the feature count, the output's width and
        datatype. ``"json"``: a home-made service; the body is the JSON list
        of rows, the answer a list of response rows (or an object with it
        under ``"predictions"`` or ``"probabilities"``).
    output : {"predict_proba", "decision_function", "predict"}, \
            default="predict_proba"
        What the endpoint answers with: class probabilities, decision
        function values (logits), or a regressor's prediction. The method of
        that name is the one the model offers (with ``predict`` for a
        classifier computed as the most likely class).
    headers : dict of str to str, default=None
        Sent with every request, e.g. ``{"Authorization": "Bearer ..."}``.
        Their values never appear in messages, logs, ``repr`` or
        checkpoints.
    timeout : float, default=30
        Seconds allowed to connect, and between bytes of an answer.
    max_batch_rows : int, default=1000
        Largest number of rows in one request.
    max_concurrency : int, default=4
        Largest number of requests in flight at once.
    max_retries : int, default=5
        Further attempts of a request after a retryable failure.
    max_queries : int, default=None
        Budget of rows sent, retries included. A request that would go past
        it is never sent: :class:`QueryBudgetExceeded` is raised instead
        (a whole call is refused up front when it cannot fit).
    model_name : str, default=None
        ``"v2"``: the model's name, when ``url`` is the server's address.
    output_name : str, default=None
        ``"v2"``: the output tensor to ask for. By default the metadata's only
        output, or the one named like ``output`` (as Seldon MLServer's
        scikit-learn runtime names them).
    classes : array-like, default=None
        The class labels, in the order of the answer's columns. By default
        ``0 .. C-1`` when the width ``C`` is known from v2 metadata; without
        it the explainers find the width with one query.
    n_features : int, default=None
        Number of features, when the protocol's metadata does not tell.
    columns : list of str, default=None
        Feature names. ``"mlflow"`` then sends ``dataframe_split`` payloads
        with these columns, and the model has ``feature_names_in_``.
    backoff : float, default=0.25
        First back-off in seconds; it doubles with every retry (at most 30 s),
        with jitter (a uniform draw between half and all of it).
    random_state : int or None, default=None
        Seeds the jitter (the answers never depend on it).

    Attributes
    ----------
    classes_ : ndarray
        Class labels (classifiers).
    n_features_in_ : int
        Number of features (when given or read from metadata).
    feature_names_in_ : ndarray of str
        ``columns``, when given.
    stats : RemoteStats
        Counters of requests, rows, retries and waiting, so far.

    Examples
    --------
    >>> from sklearn_plm_explain import RemoteModel
    >>> model = RemoteModel("http://127.0.0.1:5000", protocol="mlflow",
    ...                     headers={"Authorization": "Bearer s3cret"})
    >>> model
    RemoteModel(headers={'Authorization': '<redacted>'}, url='http://127.0.0.1:5000')
    """

    _parameter_constraints: dict = {
        "url": [str],
        "protocol": [StrOptions(set(_PROTOCOLS))],
        "output": [StrOptions(set(_OUTPUTS))],
        "headers": [dict, None],
        "timeout": [Interval(Real, 0, None, closed="neither")],
        "max_batch_rows": [Interval(Integral, 1, None, closed="left")],
        "max_concurrency": [Interval(Integral, 1, None, closed="left")],
        "max_retries": [Interval(Integral, 0, None, closed="left")],
        "max_queries": [Interval(Integral, 0, None, closed="left"), None],
        "model_name": [str, None],
        "output_name": [str, None],
        "classes": ["array-like", None],
        "n_features": [Interval(Integral, 1, None, closed="left"), None],
        "columns": ["array-like", None],
        "backoff": [Interval(Real, 0, None, closed="left")],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        url,
        *,
        protocol="mlflow",
        output="predict_proba",
        headers=None,
        timeout=30.0,
        max_batch_rows=1000,
        max_concurrency=4,
        max_retries=5,
        max_queries=None,
        model_name=None,
        output_name=None,
        classes=None,
        n_features=None,
        columns=None,
        backoff=0.25,
        random_state=None,
    ):
        self.url = url
        self.protocol = protocol
        self.output = output
        self.headers = headers
        self.timeout = timeout
        self.max_batch_rows = max_batch_rows
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.max_queries = max_queries
        self.model_name = model_name
        self.output_name = output_name
        self.classes = classes
        self.n_features = n_features
        self.columns = columns
        self.backoff = backoff
        self.random_state = random_state

    # -- the estimator's face ------------------------------------------------------
    def __sklearn_is_fitted__(self):
        # The served model is trained: nothing to fit, ever.
        return True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        if self.output == "predict":
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        else:
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        return tags

    def fit(self, X=None, y=None):
        """Do nothing: the served model is trained already.

        Present so that the model can stand where a fitted estimator stands
        (a pipeline step, an explainer's ``estimator``).

        Parameters
        ----------
        X, y : ignored

        Returns
        -------
        self : RemoteModel
        """
        return self

    def __repr__(self, N_CHAR_MAX=700):
        # Header values are secrets, and so may be a URL's credentials or
        # query string: a stand-in with those redacted is shown. The
        # parameters themselves stay intact, so that clone and GridSearchCV
        # work.
        params = self.get_params(deep=False)
        if params["headers"]:
            params["headers"] = dict.fromkeys(params["headers"], "<redacted>")
        params["url"] = _public_url(params["url"])
        shown = object.__new__(type(self))
        shown.__dict__.update(params)
        return BaseEstimator.__repr__(shown, N_CHAR_MAX)

    def __getstate__(self):
        if getattr(fingerprinting, "active", False):
            # Hashed for a checkpoint's fingerprint: the model's identity,
            # never its headers.
            return {"identity": self._identity()}
        state = super().__getstate__()
        # Connections, threads, counters and fetched metadata do not travel
        # (joblib's process workers get a copy that opens its own).
        for key in list(state):
            if key.startswith("_") and key != "_sklearn_version":
                del state[key]
        return state

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Close the connections and the threads of the request pool."""
        state = self.__dict__
        pool, client = state.pop("_threads", None), state.pop("_http", None)
        state.pop("_http_key", None)
        if pool is not None:
            pool.shutdown(wait=True)
        if client is not None:
            client.close()

    @property
    def stats(self):
        """A copy of the counters so far (:class:`RemoteStats`)."""
        with self._state_lock():
            current = self._counters()
            return RemoteStats(
                **{**asdict(current), "retry_reasons": dict(current.retry_reasons)}
            )

    def reset_stats(self):
        """Set every counter, and the budget used, back to zero."""
        with self._state_lock():
            self.__dict__["_counts"] = RemoteStats()
            self.__dict__["_rows_committed"] = 0

    @property
    def classes_(self):
        if self.output == "predict":
            raise AttributeError("A RemoteModel with output='predict' has no classes_.")
        if self.classes is not None:
            return np.asarray(self.classes)
        width = self._metadata().get("n_outputs")
        if width is None:
            raise AttributeError(
                "The RemoteModel does not know its classes: pass classes=... "
                "(the explainers otherwise find their number with one query)."
            )
        return np.arange(max(int(width), 2))

    @property
    def n_features_in_(self):
        if self.n_features is not None:
            return int(self.n_features)
        if self.columns is not None:
            return len(self.columns)
        width = self._metadata().get("n_features")
        if width is None:
            raise AttributeError(
                "The RemoteModel does not know its number of features: pass "
                "n_features=... (v2 metadata tells it when the server gives it)."
            )
        return int(width)

    @property
    def feature_names_in_(self):
        if self.columns is None:
            raise AttributeError("The RemoteModel has no feature names (columns).")
        return np.asarray([str(c) for c in self.columns], dtype=object)

    def _has(output):
        return lambda self: self.output == output

    @available_if(_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities from the endpoint.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to send (a DataFrame is sent in ``columns`` order).

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)

        Raises
        ------
        ModelResponseError
            For an invalid answer or a request that failed for good, naming
            the request, its rows and the server's message.
        QueryBudgetExceeded
            Before a request that would go past ``max_queries``.
        """
        return self._infer(X)

    @available_if(_has("decision_function"))
    def decision_function(self, X):
        """Decision function values (logits) from the endpoint.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to send.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        out = self._infer(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        """The endpoint's prediction (``output="predict"``), or the most
        likely class of its probabilities or decision values.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to send.

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        out = self._infer(X)
        if self.output == "predict":
            return out[:, 0] if out.shape[1] == 1 else out
        if out.shape[1] == 1:
            idx = (out[:, 0] > 0).astype(np.intp)
        else:
            idx = np.argmax(out, axis=1)
        classes = (
            np.asarray(self.classes)
            if self.classes is not None
            else np.arange(max(out.shape[1], 2))
        )
        return classes[idx]

    del _has

    # -- identity, for checkpoints ----------------------------------------------------
    def _identity(self):
        """What names the served model, without secrets (for fingerprints)."""
        ident = {
            "protocol": self.protocol,
            "url": _public_url(self.url),
            "output": self.output,
            "model_name": self.model_name,
            "output_name": self.output_name,
            "classes": None if self.classes is None else np.asarray(self.classes),
            "columns": None if self.columns is None else [str(c) for c in self.columns],
        }
        if self.protocol == "v2":
            meta = self._metadata()
            ident["metadata"] = {
                k: meta.get(k) for k in ("name", "versions", "platform", "raw_outputs")
            }
        return ident

    # -- machinery ------------------------------------------------------------------------
    def _state_lock(self):
        lock = self.__dict__.get("_lock")
        if lock is None:
            lock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    def _counters(self):
        return self.__dict__.setdefault("_counts", RemoteStats())

    def _client(self):
        with self._state_lock():
            key = (self.max_concurrency, float(self.timeout))
            client = self.__dict__.get("_http")
            if client is None or self.__dict__.get("_http_key") != key:
                if client is not None:
                    self.close()
                httpx = _httpx()
                client = httpx.Client(
                    limits=httpx.Limits(
                        max_connections=self.max_concurrency,
                        max_keepalive_connections=self.max_concurrency,
                    ),
                    timeout=float(self.timeout),
                )
                self.__dict__["_http"] = client
                self.__dict__["_http_key"] = key
            return client

    def _pool(self):
        with self._state_lock():
            pool = self.__dict__.get("_threads")
            if pool is None or pool._max_workers != self.max_concurrency:
                if pool is not None:
                    pool.shutdown(wait=False)
                pool = ThreadPoolExecutor(
                    max_workers=self.max_concurrency, thread_name_prefix="plm-remote"
                )
                self.__dict__["_threads"] = pool
            return pool

    def _rng(self):
        with self._state_lock():
            return self.__dict__.setdefault("_jitter", random.Random(self.random_state))

    def _protocol(self):
        with self._state_lock():
            proto = self.__dict__.get("_proto")
            key = (
                self.protocol,
                self.url,
                self.model_name,
                self.output,
                self.output_name,
                None if self.columns is None else tuple(map(str, self.columns)),
            )
            if proto is None or proto.key != key:
                self._validate_params()
                cls = {"mlflow": _MLflow, "v2": _V2, "json": _PlainJSON}
                proto = cls[self.protocol](self)
                proto.key = key
                self.__dict__["_proto"] = proto
            return proto

    def _metadata(self):
        """Facts the protocol can tell: ``n_features``, ``n_outputs``, ...

        Fetched once (v2: ``GET /v2/models/NAME``); empty for protocols
        without metadata.
        """
        with self._state_lock():
            proto = self._protocol()
            if proto.metadata is None:
                proto.metadata = proto.fetch_metadata()
            return proto.metadata

    def _headers(self):
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update({str(k): str(v) for k, v in (self.headers or {}).items()})
        return headers

    def _redact(self, text):
        """``text`` with every header value replaced."""
        text = str(text)
        for value in (self.headers or {}).values():
            value = str(value)
            if len(value) >= 4:
                text = text.replace(value, "<redacted>")
                for part in value.split():
                    if len(part) >= 8:
                        text = text.replace(part, "<redacted>")
        return text

    def _as_rows(self, X):
        if hasattr(X, "columns") and self.columns is not None:
            missing = [str(c) for c in self.columns if c not in X.columns]
            if missing:
                raise ValueError(f"The rows lack the model's column(s) {missing[:5]}.")
            X = X[list(self.columns)]
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D array of rows; got shape {X.shape}.")
        if not np.isfinite(X).all():
            raise ValueError("Rows sent to a RemoteModel must be finite numbers.")
        return np.ascontiguousarray(X)

    def _infer(self, X):
        X = self._as_rows(X)
        proto = self._protocol()
        self._metadata()
        n = X.shape[0]
        with self._state_lock():
            self._counters().calls += 1
        if n == 0:
            width = self._metadata().get("n_outputs") or (
                len(self.classes) if self.classes is not None else 1
            )
            return np.empty((0, int(width)))
        step = int(self.max_batch_rows)
        chunks = [(i, min(i + step, n)) for i in range(0, n, step)]
        self._reserve(n, None, (0, n), len(chunks))
        reserved = {k: b - a for k, (a, b) in enumerate(chunks)}
        try:
            if len(chunks) == 1 or self.max_concurrency == 1:
                parts = []
                for k, (a, b) in enumerate(chunks):
                    parts.append(
                        self._request(proto, X, a, b, k, len(chunks), reserved)
                    )
            else:
                parts = self._concurrent(proto, X, chunks, reserved)
        finally:
            # Rows reserved for requests that were never sent are free again.
            unsent = sum(reserved.values())
            if unsent:
                with self._state_lock():
                    self.__dict__["_rows_committed"] = self._committed() - unsent
        widths = {p.shape[1] for p in parts}
        if len(widths) > 1:
            raise ModelResponseError(
                f"The answers of {self._where()} have different numbers of columns "
                f"({sorted(widths)}) across the requests of one call.",
                rows=np.empty(0, dtype=np.intp),
                query_rows=np.arange(n),
            )
        return np.concatenate(parts)

    def _concurrent(self, proto, X, chunks, reserved):
        pool = self._pool()
        futures = [
            pool.submit(self._request, proto, X, a, b, k, len(chunks), reserved)
            for k, (a, b) in enumerate(chunks)
        ]
        _, pending = wait(futures, return_when=FIRST_EXCEPTION)
        if pending:
            # A request failed: send no more, let those in flight finish.
            for f in pending:
                f.cancel()
            wait(futures)
        failed = [f for f in futures if not f.cancelled() and f.exception()]
        if failed:
            # The first failing request in order, for a reproducible message.
            raise failed[0].exception()
        return [f.result() for f in futures]

    def _committed(self):
        return self.__dict__.get("_rows_committed", 0)

    def _reserve(self, rows, request, span, n_requests):
        """Commit ``rows`` against the budget, or refuse before sending."""
        with self._state_lock():
            used = self._committed()
            if self.max_queries is not None and used + rows > self.max_queries:
                what = (
                    f"this call's {n_requests} request(s) ({rows} rows)"
                    if request is None
                    else f"attempt {request[1] + 1} of request {request[0] + 1}/"
                    f"{n_requests} ({rows} rows)"
                )
                raise QueryBudgetExceeded(
                    f"Query budget of {self._where()} exhausted: {used} of "
                    f"max_queries={self.max_queries} rows are used, and {what} "
                    "would exceed it. Nothing more was sent.",
                    rows=np.empty(0, dtype=np.intp),
                    query_rows=np.arange(*span),
                    budget=self.max_queries,
                    used=used,
                    needed=rows,
                )
            self.__dict__["_rows_committed"] = used + rows

    def _where(self):
        return f"the model at {_public_url(self.url)}"

    def _request(self, proto, X, a, b, k, n_requests, reserved):
        """One request (rows ``a:b`` of the call), with its retries."""
        httpx = _httpx()
        body = proto.encode(X[a:b])
        client = self._client()
        name = f"request {k + 1}/{n_requests} (query points {a}..{b - 1} of this call)"
        attempt = 0
        while True:
            if attempt:
                self._reserve(b - a, (k, attempt), (a, b), n_requests)
            with self._state_lock():
                reserved.pop(k, None)
                stats = self._counters()
                stats.requests += 1
                stats.rows_sent += b - a
                stats.bytes_sent += len(body)
            t0 = time.perf_counter()
            retry_after = None
            try:
                resp = client.post(
                    proto.infer_url, content=body, headers=self._headers()
                )
                content = resp.content
            except httpx.TimeoutException:
                reason = "timeout"
            except httpx.TransportError as exc:
                reason = "connection"
                logger.debug("%s: %s", name, self._redact(type(exc).__name__))
            else:
                reason = None
            finally:
                with self._state_lock():
                    self._counters().request_seconds += time.perf_counter() - t0
            if reason is None:
                with self._state_lock():
                    self._counters().bytes_received += len(content)
                status = resp.status_code
                if status == 200:
                    out = self._decode(proto, resp, content, name, a, b)
                    with self._state_lock():
                        self._counters().rows_answered += b - a
                    return out
                if status in _RETRY_STATUS or (
                    status >= 500 and status not in _NO_RETRY_5XX
                ):
                    reason = f"HTTP {status}"
                    retry_after = _retry_after(resp.headers.get("Retry-After"))
                else:
                    raise self._error(
                        f"{name} to {proto.public_infer_url} was refused: HTTP "
                        f"{status}{_reason_phrase(resp)}: "
                        f"{self._server_message(content)}",
                        a,
                        b,
                    )
            if attempt >= self.max_retries:
                raise self._error(
                    f"{name} to {proto.public_infer_url} failed {attempt + 1} "
                    f"time(s); last: {reason} (max_retries={self.max_retries}).",
                    a,
                    b,
                )
            if retry_after is not None and retry_after > _MAX_RETRY_AFTER:
                raise self._error(
                    f"{name} to {proto.public_infer_url}: the server asks to retry "
                    f"after {retry_after:.0f} s ({reason}), more than "
                    f"{_MAX_RETRY_AFTER:.0f} s; giving up.",
                    a,
                    b,
                )
            delay = self._backoff(attempt)
            if retry_after is not None:
                delay = max(delay, retry_after)
            logger.debug(
                "%s: %s; retrying in %.3f s (attempt %d of %d)",
                name,
                reason,
                delay,
                attempt + 2,
                self.max_retries + 1,
            )
            with self._state_lock():
                stats = self._counters()
                stats.retries += 1
                stats.retry_reasons[reason] = stats.retry_reasons.get(reason, 0) + 1
                stats.wait_seconds += delay
            time.sleep(delay)
            attempt += 1

    def _backoff(self, attempt):
        base = min(_MAX_BACKOFF, self.backoff * 2.0**attempt)
        return base * (0.5 + 0.5 * self._rng().random())

    def _error(self, message, a, b):
        return ModelResponseError(
            self._redact(message),
            rows=np.empty(0, dtype=np.intp),
            query_rows=np.arange(a, b),
        )

    def _server_message(self, content):
        text = content.decode("utf-8", errors="replace").strip()
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            parts = [
                str(obj[k])
                for k in ("error_code", "message", "error", "detail")
                if k in obj
            ]
            trace = obj.get("stack_trace")
            if isinstance(trace, str) and trace.strip():
                # MLflow's servers send the model's traceback: its last line
                # says what the model objected to.
                parts.append(trace.strip().splitlines()[-1])
            if parts:
                text = ": ".join(parts)
        text = " ".join(text.split()) or "(empty body)"
        if len(text) > _MESSAGE_CHARS:
            text = text[:_MESSAGE_CHARS] + " ..."
        return self._redact(text)

    def _decode(self, proto, resp, content, name, a, b):
        where = f"{name} to {proto.public_infer_url}"
        try:
            obj = _loads(content)
        except ValueError:
            kind = resp.headers.get("content-type", "no content type")
            raise self._error(
                f"{where} answered with a body that is not JSON ({kind}): "
                f"{self._server_message(content)}",
                a,
                b,
            ) from None
        try:
            out = proto.decode(obj)
        except _BadAnswer as exc:
            raise self._error(f"{where}: {exc}", a, b) from None
        if out.ndim == 1:
            out = out[:, None]
        if out.ndim != 2 or out.shape[0] != b - a:
            raise self._error(
                f"{where} answered with an array of shape {out.shape} for "
                f"{b - a} rows; expected one row per query point.",
                a,
                b,
            )
        bad = ~np.isfinite(out).all(axis=1)
        if bad.any():
            points = a + np.flatnonzero(bad)
            shown = ", ".join(map(str, points[:10])) + (
                " ..." if points.size > 10 else ""
            )
            raise ModelResponseError(
                self._redact(
                    f"{where} answered with non-finite values (NaN or inf) for "
                    f"{points.size} query point(s): {shown} of this call."
                ),
                rows=np.empty(0, dtype=np.intp),
                query_rows=points,
            )
        return out


class _BadAnswer(Exception):
    """An answer that parsed as JSON but is not what the protocol says."""


def _as_matrix(values, what):
    try:
        out = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise _BadAnswer(
            f"{what} are not an array of numbers (ragged rows, strings or nulls)"
        ) from None
    return out


class _MLflow:
    """MLflow's scoring server: ``POST /invocations``."""

    metadata = None

    def __init__(self, model):
        self.model = model
        url = model.url.rstrip("/")
        if not url.endswith("/invocations"):
            url += "/invocations"
        self.infer_url = url
        self.public_infer_url = "POST " + _public_url(url)
        self.columns = (
            None if model.columns is None else [str(c) for c in model.columns]
        )

    def fetch_metadata(self):
        return {}

    def encode(self, X):
        if self.columns is not None:
            return _dumps({"dataframe_split": {"columns": self.columns, "data": X}})
        return _dumps({"inputs": X})

    def decode(self, obj):
        if not isinstance(obj, dict) or "predictions" not in obj:
            keys = list(obj)[:5] if isinstance(obj, dict) else type(obj).__name__
            raise _BadAnswer(
                f"the answer has no 'predictions' (got {keys}); is this an "
                "MLflow scoring server?"
            )
        preds = obj["predictions"]
        if isinstance(preds, dict):
            # A pyfunc returning a dict of columns.
            preds = [preds[k] for k in preds]
            return _as_matrix(preds, "the predictions").T
        if preds and isinstance(preds, list) and isinstance(preds[0], dict):
            # A pyfunc returning a DataFrame: one record per row.
            keys = list(preds[0])
            try:
                preds = [[r[k] for k in keys] for r in preds]
            except (KeyError, TypeError):
                raise _BadAnswer("the predictions' records differ in keys") from None
        return _as_matrix(preds, "the predictions")


class _PlainJSON:
    """A home-made service: a list of rows in, a list of response rows out."""

    metadata = None

    def __init__(self, model):
        self.infer_url = model.url
        self.public_infer_url = "POST " + _public_url(model.url)

    def fetch_metadata(self):
        return {}

    def encode(self, X):
        return _dumps(X)

    def decode(self, obj):
        if isinstance(obj, dict):
            for key in ("predictions", "probabilities", "outputs"):
                if key in obj:
                    obj = obj[key]
                    break
            else:
                raise _BadAnswer(
                    f"the answer is an object without 'predictions' or "
                    f"'probabilities' (keys {list(obj)[:5]})"
                )
        return _as_matrix(obj, "the answer's rows")


_V2_FLOATS = {"FP64": np.float64, "FP32": np.float32, "FP16": np.float16}
_V2_NUMBERS = {
    **_V2_FLOATS,
    **{f"INT{b}": np.int64 for b in (8, 16, 32, 64)},
    **{f"UINT{b}": np.int64 for b in (8, 16, 32, 64)},
}


class _V2:
    """The Open Inference Protocol (KServe v2) over REST."""

    metadata = None

    def __init__(self, model):
        self.model = model
        parts = urlsplit(model.url)
        path = parts.path.rstrip("/")
        name, version = model.model_name, None
        if "/v2/models/" in path:
            base, rest = path.split("/v2/models/", 1)
            bits = rest.split("/")
            if name is None:
                name = bits[0]
            if len(bits) >= 3 and bits[1] == "versions":
                version = bits[2]
            path = base
        if not name:
            raise ValueError(
                "protocol='v2' needs the model's name: pass model_name=... or a "
                "url ending in /v2/models/NAME."
            )
        model_path = f"{path}/v2/models/{name}"
        if version is not None:
            model_path += f"/versions/{version}"
        self.name = name
        self.meta_url = urlunsplit(parts._replace(path=model_path))
        self.infer_url = self.meta_url + "/infer"
        self.public_infer_url = "POST " + _public_url(self.infer_url)
        self.input_name, self.input_dtype = "input-0", "FP64"
        self.output_name = model.output_name

    def fetch_metadata(self):
        model = self.model
        httpx = _httpx()
        where = f"GET {_public_url(self.meta_url)}"
        last = None
        for attempt in range(model.max_retries + 1):
            with model._state_lock():
                model._counters().requests += 1
            try:
                resp = model._client().get(self.meta_url, headers=model._headers())
            except httpx.TimeoutException:
                last = "timeout"
            except httpx.TransportError:
                last = "connection"
            else:
                if resp.status_code == 200:
                    break
                if resp.status_code < 500 and resp.status_code not in _RETRY_STATUS:
                    raise ModelResponseError(
                        model._redact(
                            f"The model metadata {where} was refused: HTTP "
                            f"{resp.status_code}{_reason_phrase(resp)}: "
                            f"{model._server_message(resp.content)}"
                        ),
                        rows=np.empty(0, dtype=np.intp),
                    )
                last = f"HTTP {resp.status_code}"
            if attempt < model.max_retries:
                time.sleep(model._backoff(attempt))
        else:
            raise ModelResponseError(
                f"The model metadata {where} failed {model.max_retries + 1} "
                f"time(s); last: {last}.",
                rows=np.empty(0, dtype=np.intp),
            )
        try:
            meta = resp.json()
        except ValueError:
            raise ModelResponseError(
                f"The model metadata {where} is not JSON: "
                f"{model._server_message(resp.content)}",
                rows=np.empty(0, dtype=np.intp),
            ) from None
        if not isinstance(meta, dict):
            meta = {}
        return self._read_metadata(meta)

    def _read_metadata(self, meta):
        out = {
            "name": meta.get("name"),
            "versions": meta.get("versions"),
            "platform": meta.get("platform"),
        }
        inputs = meta.get("inputs") or []
        if len(inputs) > 1:
            raise ModelResponseError(
                f"The model {self.name!r} has {len(inputs)} inputs "
                f"({[i.get('name') for i in inputs]}); RemoteModel sends one "
                "tensor of rows.",
                rows=np.empty(0, dtype=np.intp),
            )
        if inputs:
            tensor = inputs[0]
            self.input_name = tensor.get("name") or self.input_name
            dtype = tensor.get("datatype", "FP64")
            if dtype in ("FP32", "FP64"):
                self.input_dtype = dtype
            shape = tensor.get("shape") or []
            if len(shape) == 2 and isinstance(shape[1], int) and shape[1] > 0:
                out["n_features"] = shape[1]
        outputs = meta.get("outputs") or []
        out["raw_outputs"] = [
            (o.get("name"), o.get("datatype"), o.get("shape")) for o in outputs
        ]
        chosen = self._choose_output(outputs)
        if chosen is not None:
            shape = chosen.get("shape") or []
            if len(shape) == 2 and isinstance(shape[1], int) and shape[1] > 0:
                out["n_outputs"] = shape[1]
            elif len(shape) == 1 and self.model.output == "decision_function":
                out["n_outputs"] = 2
        return out

    def _choose_output(self, outputs):
        names = [o.get("name") for o in outputs]
        if self.output_name is not None:
            if outputs and self.output_name not in names:
                raise ModelResponseError(
                    f"The model {self.name!r} has no output {self.output_name!r}; "
                    f"its outputs are {names}.",
                    rows=np.empty(0, dtype=np.intp),
                )
            return next((o for o in outputs if o.get("name") == self.output_name), None)
        if len(outputs) == 1:
            self.output_name = names[0]
            return outputs[0]
        if self.model.output in names:
            self.output_name = self.model.output
            return outputs[names.index(self.model.output)]
        if outputs:
            raise ModelResponseError(
                f"The model {self.name!r} has outputs {names}: say which one "
                "answers with output_name=...",
                rows=np.empty(0, dtype=np.intp),
            )
        return None

    def encode(self, X):
        if self.input_dtype == "FP32":
            X = X.astype(np.float32).astype(np.float64)
        request = {
            "inputs": [
                {
                    "name": self.input_name,
                    "shape": list(X.shape),
                    "datatype": self.input_dtype,
                    "data": X.ravel(),
                }
            ]
        }
        if self.output_name is not None:
            request["outputs"] = [{"name": self.output_name}]
        return _dumps(request)

    def decode(self, obj):
        if not isinstance(obj, dict):
            raise _BadAnswer(f"the answer is a {type(obj).__name__}, not an object")
        if "error" in obj and "outputs" not in obj:
            raise _BadAnswer(f"the server says: {obj['error']}")
        outputs = obj.get("outputs")
        if not isinstance(outputs, list) or not outputs:
            raise _BadAnswer("the answer has no 'outputs'")
        names = [o.get("name") if isinstance(o, dict) else None for o in outputs]
        if self.output_name is not None:
            if self.output_name not in names:
                raise _BadAnswer(
                    f"the answer has no output {self.output_name!r} (outputs: {names})"
                )
            tensor = outputs[names.index(self.output_name)]
        elif len(outputs) == 1:
            tensor = outputs[0]
        else:
            raise _BadAnswer(
                f"the answer has outputs {names}: say which one with output_name"
            )
        if not isinstance(tensor, dict) or "data" not in tensor:
            raise _BadAnswer("the output tensor has no 'data'")
        dtype = tensor.get("datatype", "FP64")
        if dtype not in _V2_NUMBERS:
            raise _BadAnswer(f"the output's datatype {dtype!r} is not numeric")
        data = _as_matrix(tensor["data"], "the output's data")
        if dtype in _V2_FLOATS:
            # Values written from float32 read back as the float32 they were.
            data = data.astype(_V2_FLOATS[dtype]).astype(np.float64)
        shape = tensor.get("shape")
        try:
            shape = [int(s) for s in shape]
            data = data.reshape(shape)
        except (TypeError, ValueError):
            raise _BadAnswer(
                f"the output's data ({data.size} values) do not fit its shape {shape}"
            ) from None
        return data


def _public_url(url):
    """The URL without credentials or query string (which may hold keys)."""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return "<invalid url>"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = "..." if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _reason_phrase(resp):
    phrase = getattr(resp, "reason_phrase", "")
    return f" {phrase}" if phrase else ""


def _retry_after(value):
    """Seconds from a ``Retry-After`` header: a number or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:
        return None
    return max(0.0, seconds)
