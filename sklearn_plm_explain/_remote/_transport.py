"""How requests travel: one pool of connections, retries, the query budget.

A :class:`Transport` belongs to one :class:`RemoteModel` and holds what must
not be copied with it: the httpx client, the request threads, the counters
(:class:`RemoteStats`) and the rows committed against the budget. Each call
brings a :class:`Policy`, the model's parameters of the moment; the bodies
themselves are written and read by the protocol codecs (``_protocols.py``).
"""

# SPDX-License-Identifier: BSD-3-Clause

import email.utils
import logging
import random
import socket
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field

import numpy as np

from sklearn_plm_explain._remote._protocols import (
    BadAnswer,
    public_url,
    read_answer,
    server_message,
)
from sklearn_plm_explain._utils._errors import ModelResponseError, QueryBudgetExceeded

logger = logging.getLogger("sklearn_plm_explain.remote")

# Answers worth trying again: the request was fine, the server was not.
# 501 (not implemented) and 505 (HTTP version) will not get better.
_RETRY_STATUS = {408, 425, 429}
_NO_RETRY_5XX = {501, 505}
# Longest Retry-After honoured; a server asking for more is reported.
_MAX_RETRY_AFTER = 300.0
# Longest back-off between two attempts, in seconds.
_MAX_BACKOFF = 30.0

_NO_ROWS = np.empty(0, dtype=np.intp)


def httpx_module():
    """httpx, or an ImportError that names the extra to install."""
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "RemoteModel needs httpx: install the 'remote' extra, "
            'python -m pip install "sklearn-plm-explain[remote]"'
        ) from exc
    return httpx


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


@dataclass(frozen=True, kw_only=True)
class Policy:
    """How one call's requests are sent: a RemoteModel's parameters."""

    url: str
    headers: tuple = ()  # (name, value) pairs; the values are secrets
    timeout: float
    max_batch_rows: int
    max_concurrency: int
    max_retries: int
    max_queries: int | None
    backoff: float

    @property
    def where(self):
        return f"the model at {public_url(self.url)}"

    def http_headers(self):
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update(self.headers)
        return headers

    def redact(self, text):
        """``text`` with every header value replaced."""
        text = str(text)
        for _, value in self.headers:
            if len(value) >= 4:
                text = text.replace(value, "<redacted>")
                for part in value.split():
                    if len(part) >= 8:
                        text = text.replace(part, "<redacted>")
        return text


class Transport:
    """Connections, request threads, counters and budget of one model."""

    def __init__(self, random_state=None):
        self.lock = threading.RLock()
        self.counts = RemoteStats()
        self.committed = 0  # rows counted against max_queries
        self._jitter = random.Random(random_state)
        self._http = self._http_key = self._threads = None

    # -- counters and resources ---------------------------------------------------
    def stats(self):
        """A copy of the counters."""
        with self.lock:
            current = asdict(self.counts)
            return RemoteStats(**current)

    def reset_stats(self):
        with self.lock:
            self.counts = RemoteStats()
            self.committed = 0

    def count(self, **increments):
        with self.lock:
            for name, value in increments.items():
                setattr(self.counts, name, getattr(self.counts, name) + value)

    def close(self):
        """Close the connections and the threads; the counters stay."""
        with self.lock:
            pool, client = self._threads, self._http
            self._threads = self._http = self._http_key = None
        if pool is not None:
            pool.shutdown(wait=True)
        if client is not None:
            client.close()

    def _client(self, policy):
        with self.lock:
            key = (policy.max_concurrency, float(policy.timeout))
            if self._http is None or self._http_key != key:
                if self._http is not None:
                    self._http.close()
                httpx = httpx_module()
                self._http = httpx.Client(
                    limits=httpx.Limits(
                        max_connections=policy.max_concurrency,
                        max_keepalive_connections=policy.max_concurrency,
                    ),
                    timeout=float(policy.timeout),
                )
                self._http_key = key
            return self._http

    def _pool(self, policy):
        with self.lock:
            pool = self._threads
            if pool is None or pool._max_workers != policy.max_concurrency:
                if pool is not None:
                    pool.shutdown(wait=False)
                self._threads = ThreadPoolExecutor(
                    max_workers=policy.max_concurrency, thread_name_prefix="plm-remote"
                )
            return self._threads

    # -- one model call ---------------------------------------------------------------
    def call(self, codec, X, policy):
        """The answers to the rows ``X`` (at least one), in order.

        The rows go in requests of at most ``max_batch_rows``, concurrently
        when there are several; the whole call is counted against the budget
        before anything is sent.
        """
        n = X.shape[0]
        step = int(policy.max_batch_rows)
        spans = [(i, min(i + step, n)) for i in range(0, n, step)]
        requests = [_Request(k, len(spans), a, b) for k, (a, b) in enumerate(spans)]
        self._reserve(n, policy, (0, n), len(requests))
        # Rows reserved for requests not sent yet, freed again if they never are.
        reserved = {r.index: r.rows for r in requests}
        try:
            if len(requests) == 1 or policy.max_concurrency == 1:
                parts = [self._send(codec, X, r, reserved, policy) for r in requests]
            else:
                parts = self._concurrent(codec, X, requests, reserved, policy)
        finally:
            with self.lock:
                self.committed -= sum(reserved.values())
        widths = {p.shape[1] for p in parts}
        if len(widths) > 1:
            raise ModelResponseError(
                f"The answers of {policy.where} have different numbers of columns "
                f"({sorted(widths)}) across the requests of one call.",
                rows=_NO_ROWS,
                query_rows=np.arange(n),
            )
        return np.concatenate(parts)

    def _concurrent(self, codec, X, requests, reserved, policy):
        pool = self._pool(policy)
        futures = [
            pool.submit(self._send, codec, X, r, reserved, policy) for r in requests
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

    def _reserve(self, rows, policy, span, n_requests, attempt=None):
        """Commit ``rows`` against the budget, or refuse before sending.

        ``attempt``: ``(request, attempt)`` indices for a retry; ``None`` for
        a whole call.
        """
        with self.lock:
            used = self.committed
            if policy.max_queries is not None and used + rows > policy.max_queries:
                what = (
                    f"this call's {n_requests} request(s) ({rows} rows)"
                    if attempt is None
                    else f"attempt {attempt[1] + 1} of request {attempt[0] + 1}/"
                    f"{n_requests} ({rows} rows)"
                )
                raise QueryBudgetExceeded(
                    f"Query budget of {policy.where} exhausted: {used} of "
                    f"max_queries={policy.max_queries} rows are used, and {what} "
                    "would exceed it. Nothing more was sent.",
                    rows=_NO_ROWS,
                    query_rows=np.arange(*span),
                    budget=policy.max_queries,
                    used=used,
                    needed=rows,
                )
            self.committed = used + rows

    # -- one request, with its retries ---------------------------------------------
    def _send(self, codec, X, request, reserved, policy):
        """The answer to one request, tried again after retryable failures."""
        httpx = httpx_module()
        body = codec.encode(X[request.first : request.stop])
        client = self._client(policy)
        attempt = 0
        while True:
            if attempt:
                self._reserve(
                    request.rows,
                    policy,
                    request.span,
                    request.of,
                    (request.index, attempt),
                )
            with self.lock:
                reserved.pop(request.index, None)
            self.count(requests=1, rows_sent=request.rows, bytes_sent=len(body))
            try:
                return self._post(httpx, client, codec, body, request, policy)
            except _Retryable as failure:
                self._wait_to_retry(codec, request, attempt, failure, policy)
            attempt += 1

    def _post(self, httpx, client, codec, body, request, policy):
        """One attempt: the answer, or :class:`_Retryable`, or the error."""
        t0 = time.perf_counter()
        try:
            resp = client.post(
                codec.infer_url, content=body, headers=policy.http_headers()
            )
            content = resp.content
        except httpx.TimeoutException as exc:
            raise _Retryable("timeout", cause=exc) from None
        except httpx.TransportError as exc:
            logger.debug("%s: %s", request.name, policy.redact(type(exc).__name__))
            where = f"{request.name} to {codec.public_infer_url}"
            _raise_if_unreachable(exc, where, policy, request.span)
            raise _Retryable("connection", cause=exc) from None
        finally:
            self.count(request_seconds=time.perf_counter() - t0)
        self.count(bytes_received=len(content))
        where = f"{request.name} to {codec.public_infer_url}"
        status = resp.status_code
        if status == 200:
            content_type = resp.headers.get("content-type", "no content type")
            try:
                out = read_answer(
                    codec, content, content_type, where, request.first, request.stop
                )
            except BadAnswer as exc:
                raise _error(policy, exc, request.span, exc.query_rows) from None
            self.count(rows_answered=request.rows)
            return out
        if status in _RETRY_STATUS or (status >= 500 and status not in _NO_RETRY_5XX):
            raise _Retryable(
                f"HTTP {status}",
                _retry_after(resp.headers.get("Retry-After")),
                detail=f"{_reason_phrase(resp)}: {server_message(content)}",
            )
        raise _error(
            policy,
            f"{where} was refused: HTTP {status}{_reason_phrase(resp)}: "
            f"{server_message(content)}",
            request.span,
        )

    def _wait_to_retry(self, codec, request, attempt, failure, policy):
        """Sleep before the next attempt, or raise when there is none."""
        where = f"{request.name} to {codec.public_infer_url}"
        reason, retry_after = failure.reason, failure.retry_after
        if attempt >= policy.max_retries:
            raise _error(
                policy,
                f"{where} failed {attempt + 1} time(s); last: {reason}"
                f"{failure.detail} (max_retries={policy.max_retries}).",
                request.span,
            ) from failure.cause
        if retry_after is not None and retry_after > _MAX_RETRY_AFTER:
            raise _error(
                policy,
                f"{where}: the server asks to retry after {retry_after:.0f} s "
                f"({reason}), more than {_MAX_RETRY_AFTER:.0f} s; giving up.",
                request.span,
            )
        delay = self.backoff(attempt, policy)
        if retry_after is not None:
            delay = max(delay, retry_after)
        logger.debug(
            "%s: %s; retrying in %.3f s (attempt %d of %d)",
            request.name,
            reason,
            delay,
            attempt + 2,
            policy.max_retries + 1,
        )
        with self.lock:
            stats = self.counts
            stats.retries += 1
            stats.retry_reasons[reason] = stats.retry_reasons.get(reason, 0) + 1
            stats.wait_seconds += delay
        time.sleep(delay)

    def backoff(self, attempt, policy):
        """Seconds to wait after failed attempt ``attempt`` (from 0), jittered."""
        base = min(_MAX_BACKOFF, policy.backoff * 2.0**attempt)
        with self.lock:
            return base * (0.5 + 0.5 * self._jitter.random())

    # -- metadata -------------------------------------------------------------------------
    def get_metadata(self, url, policy):
        """``GET url`` with retries: the JSON the server answers with."""
        httpx = httpx_module()
        where = f"GET {public_url(url)}"
        last = None
        for attempt in range(policy.max_retries + 1):
            self.count(requests=1)
            try:
                resp = self._client(policy).get(url, headers=policy.http_headers())
            except httpx.TimeoutException as exc:
                last, cause = "timeout", exc
            except httpx.TransportError as exc:
                _raise_if_unreachable(exc, where, policy)
                last, cause = "connection", exc
            else:
                if resp.status_code == 200:
                    break
                if resp.status_code < 500 and resp.status_code not in _RETRY_STATUS:
                    raise _metadata_error(
                        policy,
                        f"The model metadata {where} was refused: HTTP "
                        f"{resp.status_code}{_reason_phrase(resp)}: "
                        f"{server_message(resp.content)}",
                    )
                last = f"HTTP {resp.status_code}{_reason_phrase(resp)}: "
                last += server_message(resp.content)
                cause = None
            if attempt < policy.max_retries:
                time.sleep(self.backoff(attempt, policy))
        else:
            raise _metadata_error(
                policy,
                f"The model metadata {where} failed {policy.max_retries + 1} "
                f"time(s); last: {last}.",
            ) from cause
        try:
            return resp.json()
        except ValueError:
            raise _metadata_error(
                policy,
                f"The model metadata {where} is not JSON: "
                f"{server_message(resp.content)}",
            ) from None


@dataclass(frozen=True)
class _Request:
    """Query points ``first:stop`` of a call, request ``index`` of ``of``."""

    index: int
    of: int
    first: int
    stop: int

    @property
    def rows(self):
        return self.stop - self.first

    @property
    def span(self):
        return (self.first, self.stop)

    @property
    def name(self):
        return (
            f"request {self.index + 1}/{self.of} "
            f"(query points {self.first}..{self.stop - 1} of this call)"
        )


class _Retryable(Exception):
    """A failed attempt worth repeating: timeout, connection, 429, 5xx.

    ``reason`` names the kind (it keys ``RemoteStats.retry_reasons``),
    ``detail`` is what the server said, ``cause`` the transport's exception.
    """

    def __init__(self, reason, retry_after=None, detail="", cause=None):
        super().__init__(reason)
        self.reason, self.retry_after = reason, retry_after
        self.detail, self.cause = detail, cause


def _raise_if_unreachable(exc, where, policy, span=None):
    """Fail at once, the cause chained, when no retry can reach the server:
    its host name does not resolve, or httpx cannot send to the URL at all.
    A refused or reset connection is retried (a server may be starting)."""
    httpx = httpx_module()
    causes, e = [], exc
    while e is not None and len(causes) < 8:
        causes.append(e)
        e = e.__cause__ or e.__context__
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        problem = "cannot be sent to this URL"
    elif any(isinstance(c, socket.gaierror) for c in causes):
        problem = "cannot reach the server: its host name does not resolve"
    else:
        return
    message = f"{where} {problem} ({type(exc).__name__}: {exc})."
    if span is None:
        raise _metadata_error(policy, message) from exc
    raise _error(policy, message, span) from exc


def _error(policy, message, span, query_rows=None):
    """The ModelResponseError of a request, its secrets redacted."""
    return ModelResponseError(
        policy.redact(message),
        rows=_NO_ROWS,
        query_rows=np.arange(*span) if query_rows is None else query_rows,
    )


def _metadata_error(policy, message):
    return ModelResponseError(policy.redact(message), rows=_NO_ROWS)


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
