"""RemoteModel against real servers on 127.0.0.1: MLflow's scoring server, a
v2 (Open Inference Protocol) server, and a fault-injecting proxy between."""

import contextlib
import json
import logging
import math
import os
import pickle
import signal
import subprocess
import sys
import time
import warnings
from unittest import mock

import numpy as np
import pytest
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    clone,
    is_classifier,
    is_regressor,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from sklearn.utils.validation import check_is_fitted

from sklearn_plm_explain import (
    Checkpoint,
    CheckpointError,
    LimeTabularExplainer,
    ModelResponseError,
    OpenAPIExplainer,
    QueryBudgetExceeded,
    RemoteModel,
    StableLIMEExplainer,
)

pytest.importorskip("httpx")
servers = sys.modules["plm_test_servers"]  # loaded by conftest.py
served_mlp = servers.served_mlp

SECRET = "Bearer s3cr3t-t0ken-do-not-leak"
B = 16  # max_batch_rows: every round is split into several requests


class _Fitted(ClassifierMixin, BaseEstimator):
    """A fitted stand-in for the served model."""

    def fit(self, X, y=None):
        return self

    def __sklearn_is_fitted__(self):
        return True


class Batched(_Fitted):
    """The in-process reference: the served model queried in the same batches
    of at most ``B`` rows as the server sees them (BLAS kernels may round a
    row's result differently in batches of other sizes)."""

    def __init__(self, model, size=B):
        self.model, self.size = model, size
        self.classes_ = model.classes_
        self.n_features_in_ = model.n_features_in_

    def predict_proba(self, X):
        X = np.asarray(X)
        return np.concatenate(
            [
                self.model.predict_proba(X[i : i + self.size])
                for i in range(0, len(X), self.size)
            ]
        )


class Recording(RemoteModel):
    """A RemoteModel that records the number of rows of every call."""

    def predict_proba(self, X):
        self.__dict__.setdefault("call_rows", []).append(len(X))
        return super().predict_proba(X)


def _explainers(estimator):
    return {
        # Without region reuse, whose rows share models within their batch.
        "openapi": OpenAPIExplainer(estimator, random_state=0, reuse_regions=False),
        "lime": LimeTabularExplainer(estimator, num_samples=120, random_state=0),
        "slime": StableLIMEExplainer(
            estimator, num_samples=60, n_max=240, random_state=0
        ),
    }


def _explain(explainer, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return explainer.explain(X, **kw)


def assert_same(a, b):
    """Bitwise equal explanations: every field, classes and features."""
    assert a.fields == b.fields
    for name in a.fields:
        x, y = getattr(a, name), getattr(b, name)
        if x.dtype.kind in "fc":
            np.testing.assert_array_equal(x, y, err_msg=name)  # NaN == NaN here
            assert np.array_equal(x, y, equal_nan=True), name
        else:
            np.testing.assert_array_equal(x.astype(str), y.astype(str), err_msg=name)
    np.testing.assert_array_equal(a.classes, b.classes)
    np.testing.assert_array_equal(a.feature_names, b.feature_names)


@pytest.fixture(scope="module")
def data():
    d = served_mlp()
    return d["model"], d["X"], d["X"][::15]


@pytest.fixture
def proxy(mlflow_server):
    """A counting proxy (no faults) in front of MLflow's server."""
    p = servers.FaultProxy(mlflow_server.url, keep_rows=True).start()
    yield p
    p.stop()


def _remote(url, **kw):
    kw.setdefault("classes", np.arange(3))
    kw.setdefault("max_batch_rows", B)
    kw.setdefault("headers", {"Authorization": SECRET})
    return RemoteModel(url, **kw)


# -- the estimator's face -----------------------------------------------------------
def test_remote_model_stands_for_a_fitted_model():
    model = RemoteModel(
        "http://user:pw@127.0.0.1:9/invocations?key=abc", headers={"X-Key": SECRET}
    )
    check_is_fitted(model)
    assert is_classifier(model) and not is_regressor(model)
    assert hasattr(model, "predict_proba") and not hasattr(model, "decision_function")
    logits = RemoteModel("http://127.0.0.1:9", output="decision_function")
    assert hasattr(logits, "decision_function") and not hasattr(logits, "predict_proba")
    assert is_regressor(RemoteModel("http://127.0.0.1:9", output="predict"))
    # Cloned (GridSearchCV does) with every parameter, still usable.
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    text = repr(model)
    for secret in (SECRET, "pw", "key=abc"):
        assert secret not in text
    assert "<redacted>" in text
    # Pickled for process workers: parameters only, no connections.
    again = pickle.loads(pickle.dumps(model))
    assert again.get_params() == model.get_params()
    with pytest.raises(AttributeError, match="classes"):
        model.classes_
    assert RemoteModel("u", classes=["a", "b"]).classes_.tolist() == ["a", "b"]


def test_an_explainer_of_a_remote_model_clones_and_fits_without_refitting(data):
    model, X, _ = data
    remote = RemoteModel("http://127.0.0.1:9", classes=[0, 1, 2], n_features=4)
    explainer = clone(OpenAPIExplainer(remote)).fit(X)  # no request is sent
    assert explainer.estimator_ is not remote  # clone cloned it ...
    assert explainer.estimator_.get_params() == remote.get_params()  # ... as it was
    assert explainer.estimator_.stats.requests == 0


def test_missing_httpx_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(ImportError, match=r"sklearn-plm-explain\[remote\]"):
        RemoteModel("http://127.0.0.1:9", classes=[0, 1]).predict_proba([[1.0]])


# -- MLflow's scoring server -------------------------------------------------------------
# Booting `mlflow models serve` costs seconds of CPU: the tests that need it
# are slow (CI runs them; the v2 server below serves the default run).
@pytest.mark.slow
def test_mlflow_answers_bitwise_in_order(data, proxy):
    model, X, _ = data
    remote = _remote(proxy.url, max_concurrency=4, max_batch_rows=7)
    P = remote.predict_proba(X)
    np.testing.assert_array_equal(P, Batched(model, 7).predict_proba(X))
    stats = remote.stats
    assert stats.requests == proxy.forwarded.requests == math.ceil(len(X) / 7)
    assert stats.rows_sent == proxy.forwarded.rows == len(X)
    assert stats.retries == 0 and stats.bytes_sent > 0 and stats.calls == 1
    np.testing.assert_array_equal(remote.predict(X), model.predict(X))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["openapi", "lime", "slime"])
def test_mlflow_explanations_equal_local(data, proxy, method):
    model, X, rows = data
    remote = Recording(proxy.url, classes=np.arange(3), max_batch_rows=B)
    local = _explain(_explainers(Batched(model)).get(method).fit(X), rows)
    got = _explain(_explainers(remote)[method].fit(X), rows)
    assert_same(got, local)
    np.testing.assert_array_equal(got.n_queries, local.n_queries)
    # Requests: one per max_batch_rows rows of each round (each model call).
    calls = remote.call_rows
    assert proxy.forwarded.requests == sum(math.ceil(n / B) for n in calls)
    assert proxy.forwarded.requests <= len(calls) * math.ceil(max(calls) / B)
    assert proxy.forwarded.rows == sum(calls) == remote.stats.rows_sent


@pytest.mark.slow
def test_mlflow_dataframe_split_with_columns(data, proxy):
    model, X, rows = data
    names = ["sl", "sw", "pl", "pw"]
    remote = _remote(proxy.url, columns=names)
    np.testing.assert_array_equal(
        remote.predict_proba(rows), Batched(model).predict_proba(rows)
    )
    assert remote.feature_names_in_.tolist() == names
    assert proxy.forwarded.kinds == {"dataframe_split": 1}
    assert proxy.forwarded.rows == len(rows)


@pytest.mark.slow
def test_without_classes_the_explainer_finds_them_with_one_query(data, proxy):
    model, X, rows = data
    remote = RemoteModel(proxy.url, max_batch_rows=B)
    got = _explain(OpenAPIExplainer(remote, random_state=0).fit(X), rows)
    local = _explain(OpenAPIExplainer(Batched(model), random_state=0).fit(X), rows)
    assert_same(got, local)


@pytest.mark.slow
def test_mlflow_bad_input_is_not_retried_and_is_named(data, proxy):
    _, X, _ = data
    remote = _remote(proxy.url)
    with pytest.raises(ModelResponseError) as info:
        remote.predict_proba(X[:3, :2])  # two features for a four-feature model
    message = str(info.value)
    assert "HTTP 400" in message and "request 1/1" in message
    assert "expecting 4 features" in message  # the server's own words
    assert SECRET not in message
    assert remote.stats.retries == 0 and proxy.forwarded.requests == 1


# -- faults -------------------------------------------------------------------------------
@pytest.fixture
def faulty(mlflow_server):
    p = servers.FaultProxy(
        mlflow_server.url,
        seed=3,
        error_rate=0.10,
        timeout_rate=0.05,
        delay=1.2,
        drop_rate=0.04,
        burst_rate=0.04,
        burst_length=3,
        retry_after="0.05",
        # Faults are drawn from the requests' bodies: a run with few requests
        # may meet none by chance. These come first, whatever the bodies.
        script=["500", "drop", "503"],
    ).start()
    yield p
    p.stop()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["openapi", "lime", "slime"])
def test_faults_do_not_change_the_result(data, proxy, faulty, method, caplog):
    model, X, rows = data
    clean = _explain(_explainers(_remote(proxy.url))[method].fit(X), rows)
    remote = _remote(
        faulty.url, timeout=0.6, max_retries=12, backoff=0.01, random_state=0
    )
    with caplog.at_level(logging.DEBUG, logger="sklearn_plm_explain.remote"):
        got = _explain(_explainers(remote)[method].fit(X), rows)
    assert_same(got, clean)
    stats, faults = remote.stats, faulty.faults
    assert faults["500"] + faults["503"] + faults["429"] + faults["drop"] > 0
    # Each injected fault costs one retry; on a loaded machine an answer may
    # also come later than the timeout, which costs one more.
    reasons = stats.retry_reasons
    assert reasons.get("HTTP 500", 0) == faults["500"]
    assert reasons.get("HTTP 503", 0) == faults["503"]
    assert reasons.get("HTTP 429", 0) == faults["429"]
    assert reasons.get("connection", 0) == faults["drop"]
    assert reasons.get("timeout", 0) >= faults["delay"]
    assert sum(reasons.values()) == stats.retries
    print(f"{method}: faults {dict(faulty.faults)}; retries {stats.retry_reasons}")
    # Every retry is logged, never with the secret.
    assert sum("retrying" in r.getMessage() for r in caplog.records) == stats.retries
    assert SECRET not in caplog.text


@pytest.mark.slow
def test_all_fault_kinds_are_retried(data, mlflow_server):
    model, X, _ = data
    script = ["500", "503", "delay", "drop", ("429", "0.05"), "503"]
    p = servers.FaultProxy(mlflow_server.url, delay=2.0, script=script).start()
    try:
        remote = _remote(p.url, timeout=1.0, backoff=0.01, max_retries=8)
        P = remote.predict_proba(X[:5])
    finally:
        p.stop()
    np.testing.assert_array_equal(P, model.predict_proba(X[:5]))
    reasons = remote.stats.retry_reasons
    assert reasons.pop("timeout") >= 1  # more if the machine is slow
    assert reasons == {"HTTP 500": 1, "HTTP 503": 2, "connection": 1, "HTTP 429": 1}


@pytest.mark.slow
@pytest.mark.parametrize("value", ["1", "http-date"])
def test_retry_after_is_honoured(data, mlflow_server, value):
    _, X, _ = data
    if value == "http-date":
        from email.utils import formatdate

        value = formatdate(time.time() + 3, usegmt=True)  # whole seconds: 2 to 3 s
    p = servers.FaultProxy(mlflow_server.url, script=[("429", value)]).start()
    try:
        remote = _remote(p.url, backoff=0.0)
        t0 = time.perf_counter()
        remote.predict_proba(X[:2])
        waited = time.perf_counter() - t0
    finally:
        p.stop()
    assert remote.stats.retries == 1 and waited >= 0.9
    assert remote.stats.wait_seconds >= 0.9


@pytest.mark.slow
def test_giving_up_names_the_last_failure(data, mlflow_server):
    _, X, _ = data
    p = servers.FaultProxy(mlflow_server.url, script=["503"] * 3).start()
    try:
        remote = _remote(p.url, backoff=0.0, max_retries=2)
        with pytest.raises(
            ModelResponseError, match=r"failed 3 time\(s\); last: HTTP 503"
        ):
            remote.predict_proba(X[:2])
    finally:
        p.stop()


# -- the query budget ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("method", ["openapi", "lime", "slime"])
def test_budget_stops_before_it_is_exceeded(data, proxy, method):
    model, X, rows = data
    # Settings under which rows finish at different model calls: LIME in
    # groups of two rows, OpenAPI from cubes too large for some rows.
    kw = {
        "lime": {"batch_size": 2 * 120},
        "openapi": {"init_radius": 0.3},
        "slime": {"n_max": 1000},
    }[method]
    full_remote = _remote(proxy.url, max_batch_rows=500)
    full = _explain(_explainers(full_remote)[method].set_params(**kw).fit(X), rows)
    total = full_remote.stats.rows_sent
    proxy.reset()
    budget = total - 1  # the last model call does not fit
    remote = _remote(proxy.url, max_queries=budget, max_batch_rows=500)
    explainer = _explainers(remote)[method].set_params(**kw).fit(X)
    with pytest.raises(QueryBudgetExceeded) as info:
        _explain(explainer, rows)
    err = info.value
    assert isinstance(err, ModelResponseError)
    assert proxy.forwarded.rows <= budget and remote.stats.rows_sent <= budget
    assert err.budget == budget and err.used + err.needed > budget
    assert "max_queries" in str(err) and err.rows.size
    partial = err.partial
    assert len(partial) == len(rows)
    done = partial.status != "not_run"
    assert done.any() and not done.all()
    assert_same(partial[done], full[done])


# -- the v2 server ------------------------------------------------------------------------------
def test_v2_metadata_gives_classes_and_features(v2_server):
    remote = RemoteModel(v2_server.url + "/v2/models/mlp", protocol="v2")
    assert remote.classes_.tolist() == [0, 1, 2]
    assert remote.n_features_in_ == 4
    bare = RemoteModel(
        v2_server.url, protocol="v2", model_name="bare", output_name="predict_proba"
    )
    with pytest.raises(AttributeError):
        bare.classes_
    with pytest.raises(AttributeError):
        bare.n_features_in_


@pytest.mark.parametrize("method", ["openapi", "lime", "slime"])
def test_v2_explanations_equal_local(data, v2_server, method):
    model, X, rows = data
    v2_server.tally.reset()
    remote = Recording(v2_server.url, protocol="v2", model_name="mlp", max_batch_rows=B)
    local = _explain(_explainers(Batched(model))[method].fit(X), rows)
    got = _explain(_explainers(remote)[method].fit(X), rows)
    assert_same(got, local)
    calls = remote.call_rows
    assert v2_server.tally.requests == sum(math.ceil(n / B) for n in calls)
    assert v2_server.tally.requests <= len(calls) * math.ceil(max(calls) / B)


def test_v2_float32_answers_keep_float32_precision(data, v2_server):
    model, X, rows = data
    remote = RemoteModel(v2_server.url, protocol="v2", model_name="mlp32")
    P = remote.predict_proba(rows)
    assert np.array_equal(P.astype(np.float32), P)
    np.testing.assert_array_equal(P, model.predict_proba(rows).astype(np.float32))


def test_v2_errors_are_named(v2_server):
    missing = RemoteModel(v2_server.url, protocol="v2", model_name="nope")
    with pytest.raises(ModelResponseError, match="HTTP 404.*Model nope not found"):
        missing.predict_proba([[1.0, 2.0, 3.0, 4.0]])
    remote = RemoteModel(v2_server.url, protocol="v2", model_name="mlp")
    with pytest.raises(ModelResponseError, match=r"HTTP 400.*Expected shape \[-1, 4\]"):
        remote.predict_proba([[1.0, 2.0]])
    with pytest.raises(ValueError, match="model's name"):
        RemoteModel(v2_server.url, protocol="v2").predict_proba([[1.0]])


# -- bad answers from a home-made service --------------------------------------------------------
@pytest.fixture(scope="module")
def bad_service():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def answer(request):
        rows = servers.rows_of(await request.body())
        kind = request.path_params["kind"]
        P = np.full((len(rows), 3), 1 / 3)
        if kind == "ok":
            return JSONResponse(P.tolist())
        if kind == "mirror":  # the rows as received, parsed by Python's json
            return Response(json.dumps(rows.tolist()), media_type="application/json")
        if kind == "html":
            return Response("<html>gateway</html>", media_type="text/html")
        if kind == "shape":
            return JSONResponse(P[:-1].tolist())
        if kind == "missing":
            return JSONResponse({"result": P.tolist()})
        if kind == "nan":
            body = json.dumps(P.tolist()).replace("0.3333333333333333", "NaN", 1)
            return Response(body, media_type="application/json")
        if kind == "crash":  # a model server failing with its own message
            return Response("internal error: model crashed", status_code=500)
        if kind == "echo":  # a careless server quoting the request's headers
            auth = request.headers.get("authorization")
            return JSONResponse({"message": f"bad token {auth}"}, status_code=401)
        return JSONResponse({"error": "no such kind"}, status_code=404)

    server = servers.ThreadedServer(
        Starlette(routes=[Route("/{kind}", answer, methods=["POST"])])
    ).start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    "kind, problem",
    [
        ("html", "not JSON"),
        ("shape", r"shape \(1, 3\) for 2 rows"),
        ("missing", "without 'predictions'"),
        ("nan", r"non-finite values \(NaN or inf\) for 1 query point"),
        ("echo", "HTTP 401 Unauthorized: bad token <redacted>"),
    ],
)
def test_bad_answers_are_named(data, bad_service, kind, problem, tmp_path):
    _, X, rows = data
    remote = RemoteModel(
        f"{bad_service.url}/{kind}",
        protocol="json",
        classes=[0, 1, 2],
        max_batch_rows=2,
        headers={"Authorization": SECRET},
    )
    explainer = OpenAPIExplainer(remote, random_state=0).fit(X)
    with pytest.raises(ModelResponseError, match=problem) as info:
        _explain(explainer, rows[:4], checkpoint=Checkpoint(tmp_path, chunk_size=4))
    message = str(info.value)
    assert "request 1/2 (query points 0..1 of this call)" in message
    rows_named = "row(s) 0 of" if kind == "nan" else "row(s) 0, 1 of"
    assert f"{rows_named} the explained batch" in message
    assert SECRET not in message and "s3cr3t" not in message
    assert (info.value.partial.status == "not_run").all()
    for root, _, files in os.walk(tmp_path):
        for name in files:
            with open(os.path.join(root, name), "rb") as fh:
                assert b"s3cr3t" not in fh.read()


# -- errors no retry can mend fail at once, with their cause -----------------------
@pytest.mark.parametrize("url", ["127.0.0.1:5000", "ftp://127.0.0.1/x", "http://"])
def test_a_url_no_request_can_use_is_refused_before_any(url):
    remote = RemoteModel(url, classes=[0, 1, 2], max_retries=5, backoff=1.0)
    with pytest.raises(ValueError, match="http:// or https:// address with a host"):
        remote.predict_proba(np.zeros((2, 4)))
    assert remote.stats.requests == 0


def test_a_host_that_does_not_resolve_fails_at_once_with_its_cause():
    # .invalid never resolves (RFC 6761); retrying cannot change that.
    remote = RemoteModel(
        "http://no-such-host.invalid/invocations",
        classes=[0, 1, 2],
        max_retries=5,
        backoff=1.0,
    )
    with pytest.raises(ModelResponseError, match="host name does not resolve") as info:
        remote.predict_proba(np.zeros((2, 4)))
    assert info.value.__cause__ is not None
    assert remote.stats.requests == 1 and remote.stats.retries == 0


def test_a_5xx_shows_the_servers_message_and_chains_nothing_false(bad_service):
    remote = RemoteModel(
        f"{bad_service.url}/crash",
        protocol="json",
        classes=[0, 1, 2],
        max_retries=1,
        backoff=0.0,
    )
    with pytest.raises(ModelResponseError) as info:
        remote.predict_proba(np.zeros((2, 4)))
    message = str(info.value)
    assert "failed 2 time(s); last: HTTP 500 Internal Server Error" in message
    assert "internal error: model crashed" in message
    assert remote.stats.retry_reasons == {"HTTP 500": 1}


def test_a_refused_connection_is_retried_and_chains_its_cause():
    port = servers.free_port()  # nothing listens there
    remote = RemoteModel(
        f"http://127.0.0.1:{port}", classes=[0, 1, 2], max_retries=2, backoff=0.0
    )
    with pytest.raises(ModelResponseError, match="last: connection") as info:
        remote.predict_proba(np.zeros((2, 4)))
    assert remote.stats.retries == 2
    assert info.value.__cause__ is not None


def test_cli_error_without_requests_is_one_line(cli_files, capsys):
    code, _, err = _cli(
        capsys, "explain", "--url", "127.0.0.1:5000", "--data", cli_files / "rows.csv"
    )
    assert code == 2
    assert err.count("\n") == 1 and "http:// or https://" in err


def test_cli_summary_of_a_failed_run_comes_after_the_error(
    cli_files, bad_service, capsys
):
    url = f"{bad_service.url}/crash"
    args = ["explain", "--url", url, "--protocol", "json", "--data"]
    args += [cli_files / "rows.csv", "--max-retries", 0, "--classes", "0,1,2"]
    code, _, err = _cli(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2
    assert lines[-2].startswith("plm-explain: error:") and "model crashed" in lines[-2]
    assert lines[-1].startswith("remote: 1 requests")


# -- checkpoints and resumption -------------------------------------------------------------------
@contextlib.contextmanager
def mlp_calls(fail_after=None):
    """Count the MLP's predict_proba calls and rows, failing (NaN) after
    ``fail_after`` calls. Patched on the class, so that the model itself -
    and so its identity in a checkpoint's fingerprint - is unchanged."""
    original = MLPClassifier.predict_proba
    calls = {"calls": 0, "rows": 0}

    def predict_proba(self, X):
        calls["calls"] += 1
        calls["rows"] += len(X)
        P = original(self, X)
        if fail_after is not None and calls["calls"] > fail_after:
            P = P * np.nan
        return P

    with mock.patch.object(MLPClassifier, "predict_proba", predict_proba):
        yield calls


@pytest.mark.parametrize("method", ["openapi", "lime", "slime"])
def test_checkpoint_resumes_to_the_uninterrupted_result(data, tmp_path, method):
    model, X, _ = data
    rows = X[::5]  # 30 rows, 6 chunks of 5
    a = Checkpoint(tmp_path / "a", chunk_size=5)
    # The uninterrupted run, a chunk at a time as every checkpointed run goes.
    # (A run without a checkpoint differs only where BLAS rounds a response
    # differently in a bigger batch: see test_rows_do_not_depend_on_their_batch.)
    reference = _explain(_explainers(model)[method].fit(X), rows, checkpoint=a)
    # A run that fails mid-way keeps its finished chunks ...
    path = Checkpoint(tmp_path / "b", chunk_size=5)
    explainer = _explainers(model)[method].fit(X)
    with mlp_calls(fail_after=4), pytest.raises(ModelResponseError) as info:
        _explain(explainer, rows, checkpoint=path)
    partial = info.value.partial
    done = partial.status != "not_run"
    assert 0 < done.sum() < len(rows)
    assert_same(partial[done], reference[done])
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    kept = sum(c["stop"] - c["start"] for c in manifest["chunks"])
    assert 0 < kept <= done.sum()
    # ... and the next call explains only the rest.
    with mlp_calls() as calls:
        resumed = _explain(explainer, rows, checkpoint=path.path)
    assert_same(resumed, reference)
    assert calls["rows"] == reference.n_queries[kept:].sum()
    # A finished checkpoint answers without a single query.
    with mlp_calls() as calls:
        assert_same(_explain(explainer, rows, checkpoint=path), reference)
    assert calls["calls"] == 0


@pytest.mark.slow  # starts process workers
def test_a_checkpoint_of_another_run_is_refused(data, tmp_path):
    model, X, _ = data
    rows = X[::10]
    explainer = OpenAPIExplainer(model, random_state=0).fit(X)
    _explain(explainer, rows, checkpoint=tmp_path)
    with pytest.raises(CheckpointError, match="the rows to explain"):
        _explain(explainer, rows + 1e-9, checkpoint=tmp_path)
    with pytest.raises(CheckpointError, match="the targets"):
        _explain(explainer, rows, target=0, checkpoint=tmp_path)
    other = OpenAPIExplainer(model, random_state=1).fit(X)
    with pytest.raises(CheckpointError, match="parameters"):
        _explain(other, rows, checkpoint=tmp_path)
    refit = OpenAPIExplainer(model, random_state=0).fit(X[:50])
    with pytest.raises(CheckpointError, match="fitted state"):
        _explain(refit, rows, checkpoint=tmp_path)
    from sklearn.neural_network import MLPClassifier

    another = MLPClassifier((16,), max_iter=2000, random_state=1).fit(
        X, served_mlp()["y"]
    )
    with pytest.raises(CheckpointError, match="the explained model"):
        _explain(
            OpenAPIExplainer(another, random_state=0).fit(X), rows, checkpoint=tmp_path
        )
    # n_jobs changes how, not what: accepted.
    _explain(explainer.set_params(n_jobs=2), rows, checkpoint=tmp_path)


def test_a_corrupted_checkpoint_is_refused(data, tmp_path):
    model, X, _ = data
    rows = X[::10]
    explainer = OpenAPIExplainer(model, random_state=0).fit(X)
    _explain(explainer, rows, checkpoint=Checkpoint(tmp_path, chunk_size=5))
    chunk = sorted(p for p in os.listdir(tmp_path) if p.startswith("chunk-"))[0]
    blob = bytearray((tmp_path / chunk).read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (tmp_path / chunk).write_bytes(bytes(blob))
    with pytest.raises(
        CheckpointError, match="corrupted.*does not match its recorded hash"
    ):
        _explain(explainer, rows, checkpoint=tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": "sklearn-plm-ex')
    with pytest.raises(CheckpointError, match="manifest .* is corrupted"):
        _explain(explainer, rows, checkpoint=tmp_path)


def test_random_state_none_resumes_with_the_first_runs_seed(data, tmp_path):
    model, X, _ = data
    rows = X[::10]
    explainer = LimeTabularExplainer(model, num_samples=100).fit(X)
    first = _explain(explainer, rows, checkpoint=Checkpoint(tmp_path, chunk_size=5))
    # Forget the last chunk, as if the run had been killed before it.
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["chunks"] = manifest["chunks"][:-1]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with mlp_calls() as calls:
        again = _explain(explainer, rows, checkpoint=tmp_path)
    assert calls["rows"] == first.n_queries[-5:].sum()
    assert_same(first, again)


_KILLED_RUN = """
import sys, numpy as np
from sklearn.datasets import load_iris
from sklearn_plm_explain import Checkpoint, OpenAPIExplainer, RemoteModel
url, path = sys.argv[1:3]
X, _ = load_iris(return_X_y=True)
remote = RemoteModel(url, classes=np.arange(3), max_batch_rows=16,
                     headers={"Authorization": "SECRET"})
explainer = OpenAPIExplainer(remote, random_state=0).fit(X)
explainer.explain(X[::3], checkpoint=Checkpoint(path, chunk_size=5))
print("finished")
""".replace("SECRET", SECRET)


@pytest.mark.slow
def test_a_run_killed_mid_way_resumes_without_requerying_finished_rows(
    data, mlflow_server, tmp_path
):
    model, X, _ = data
    rows = X[::3]  # 50 rows: 10 chunks of 5
    # Every request is held 30 ms, so the run is still going when killed.
    slow = servers.FaultProxy(
        mlflow_server.url, timeout_rate=1.0, delay=0.03, keep_rows=True
    ).start()
    try:
        path = tmp_path / "ckpt"
        proc = subprocess.Popen(
            [sys.executable, "-c", _KILLED_RUN, slow.url, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        manifest = path / "manifest.json"
        deadline = time.monotonic() + 60
        finished_chunks = 0
        while time.monotonic() < deadline and proc.poll() is None:
            if manifest.exists():
                finished_chunks = len(json.loads(manifest.read_text())["chunks"])
                if finished_chunks >= 3:
                    break
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert b"finished" not in out, "the run ended before it was killed"
        done = json.loads(manifest.read_text())["chunks"]
        assert 3 <= len(done) < 10
        before = {i: slow.forwarded.times_seen(rows[i]) for i in range(len(rows))}
        remote = _remote(slow.url)
        explainer = OpenAPIExplainer(remote, random_state=0).fit(X)
        resumed = _explain(explainer, rows, checkpoint=path)
    finally:
        slow.stop()
    finished = np.concatenate([np.arange(c["start"], c["stop"]) for c in done])
    # Each explained row's own point is queried when the row is explained
    # (and once more, to measure the service's call-to-call scatter): the
    # finished rows were never sent again, the others were explained anew.
    for i in range(len(rows)):
        seen = slow.forwarded.times_seen(rows[i])
        if i in finished:
            assert before[i] == seen >= 1, i
        else:
            assert seen > before[i], i
    uninterrupted = _explain(
        OpenAPIExplainer(_remote(mlflow_server.url), random_state=0).fit(X),
        rows,
        checkpoint=Checkpoint(tmp_path / "whole", chunk_size=5),
    )
    assert_same(resumed, uninterrupted)
    for root, _, files in os.walk(path):
        for name in files:
            with open(os.path.join(root, name), "rb") as fh:
                assert b"s3cr3t" not in fh.read()


# -- results do not depend on the batch -----------------------------------------------------------
class Rowwise(_Fitted):
    """The MLP evaluated one row at a time, without BLAS batching."""

    def __init__(self, model):
        self.model = model
        self.classes_ = model.classes_

    def predict_proba(self, X):
        return np.concatenate(
            [self.model.predict_proba(x[None]) for x in np.asarray(X)]
        )


@pytest.mark.parametrize("method", ["openapi", "lime", "slime"])
def test_rows_do_not_depend_on_their_batch(data, method):
    model, X, rows = data
    explainer = _explainers(Rowwise(model))[method].fit(X)
    whole = _explain(explainer, rows)
    parts = [_explain(explainer, rows[:3]), _explain(explainer, rows[3:])]
    from sklearn_plm_explain import Explanation

    assert_same(Explanation.concat(parts), whole)


def test_plain_json_protocol_in_a_pipeline_of_chunks(data, bad_service):
    _, X, rows = data
    remote = RemoteModel(f"{bad_service.url}/ok", protocol="json", max_concurrency=2)
    P = remote.predict_proba(rows)
    np.testing.assert_array_equal(P, np.full((len(rows), 3), 1 / 3))
    assert remote.stats.requests == 1


# -- the command line --------------------------------------------------------------------------------
@pytest.fixture
def cli_files(data, tmp_path):
    import csv

    import joblib

    model, X, _ = data
    joblib.dump(model, tmp_path / "mlp.joblib")
    with open(tmp_path / "rows.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["sepal_length", "sepal_width", "petal_length", "petal_width"])
        writer.writerows(X[::12].tolist())
    return tmp_path


def _cli(capsys, *args):
    from sklearn_plm_explain._cli._parser import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, extra", [("openapi", []), ("lime", ["--num-samples", 100])]
)
def test_cli_explains_a_served_model_as_a_local_one(
    cli_files, proxy, capsys, method, extra
):
    common = ["explain", "--data", cli_files / "rows.csv", "--method", method, *extra]
    code, local, _ = _cli(capsys, *common, "--model", cli_files / "mlp.joblib")
    assert code == 0
    served = [
        "--url",
        proxy.url,
        "--protocol",
        "mlflow",
        "--header",
        f"Authorization: {SECRET}",
        "--max-batch-rows",
        100000,  # one request per model call, as the local model gets
    ]
    code, remote, err = _cli(capsys, *common, *served)
    assert code == 0, err
    assert remote == local
    assert "remote: " in err and "rows sent" in err
    assert SECRET not in err + remote
    assert all(h.get("authorization") == SECRET for h in proxy.forwarded.headers)


@pytest.mark.slow
def test_cli_checkpoint_resumes_a_run_stopped_by_its_budget(cli_files, proxy, capsys):
    common = [
        "explain",
        "--data",
        cli_files / "rows.csv",
        "--url",
        proxy.url,
        "--chunk-size",
        4,
        "--classes",
        "0,1,2",  # known: fitting the explainer sends no probe
        "--checkpoint",
        cli_files / "ckpt",
    ]
    code, whole, _ = _cli(
        capsys,
        "explain",
        "--data",
        cli_files / "rows.csv",
        "--url",
        proxy.url,
        "--chunk-size",
        4,
        "--classes",
        "0,1,2",
    )
    assert code == 0
    total = proxy.forwarded.rows
    proxy.reset()
    code, _, err = _cli(capsys, *common, "--max-queries", total // 2)
    assert code == 2
    assert "max_queries" in err and "run the same command again to resume" in err
    assert proxy.forwarded.rows <= total // 2
    first = proxy.forwarded.rows
    code, resumed, err = _cli(capsys, *common)
    assert code == 0, err
    assert resumed == whole
    assert "(from the checkpoint)" in err
    # The finished chunks were not sent again.
    assert proxy.forwarded.rows - first < total
    # Once finished, the same command sends nothing.
    proxy.reset()
    code, again, _ = _cli(capsys, *common)
    assert code == 0 and again == whole and proxy.forwarded.requests == 0


def test_floats_round_trip_exactly(bad_service):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 7)) * 10.0 ** rng.integers(-300, 300, (50, 7))
    X[0, :3] = [np.nextafter(1.0, 2.0), 5e-324, np.finfo(float).max]
    remote = RemoteModel(f"{bad_service.url}/mirror", protocol="json", max_batch_rows=9)
    np.testing.assert_array_equal(remote.predict_proba(X), X)


@pytest.mark.slow
def test_errors_and_partials_come_back_from_process_workers(data):
    import functools

    from sklearn_plm_explain import Explanation

    _, X, rows = data
    err = ModelResponseError("boom", rows=[1], query_rows=[0])
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == "boom" and again.rows.tolist() == [1]
    budget = QueryBudgetExceeded("over", rows=[], budget=3, used=1, needed=5)
    assert pickle.loads(pickle.dumps(budget)).needed == 5
    # A model answering NaN, explained by two loky workers.
    nan_model = functools.partial(np.multiply, np.nan)
    explainer = LimeTabularExplainer(
        nan_model, num_samples=50, n_jobs=2, random_state=0
    ).fit(X)
    with pytest.raises(ModelResponseError, match="non-finite") as info:
        explainer.explain(rows)
    assert isinstance(info.value.partial, Explanation)
    assert (info.value.partial.status == "not_run").all()
