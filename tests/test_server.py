"""The explainer service (``plm-explain serve``) on 127.0.0.1, in front of a
real model server, through a real HTTP client."""

import csv
import json
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain import (
    Explanation,
    LimeTabularExplainer,
    OpenAPIExplainer,
    StableLIMEExplainer,
)
from sklearn_plm_explain._cli._parser import build_parser
from sklearn_plm_explain._cli._serve import build_service_app

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
servers = sys.modules["plm_test_servers"]  # loaded by conftest.py

B = 16  # rows per request to the model server, here and in the reference
N_ROWS = 50


class Batched:
    """The served MLP in process, queried in the server's batches of B rows
    (BLAS may round a row differently in batches of other sizes)."""

    def __init__(self, model):
        self.model = model
        self.classes_ = model.classes_

    def predict_proba(self, X):
        X = np.asarray(X)
        parts = [self.model.predict_proba(X[i : i + B]) for i in range(0, len(X), B)]
        return np.concatenate(parts)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = servers.served_mlp()
    root = tmp_path_factory.mktemp("serve")
    with open(root / "background.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["a", "b", "c", "d"])
        writer.writerows(d["X"].tolist())
    rows = d["X"][1::3][:N_ROWS]
    return d["model"], d["X"], rows, root / "background.csv"


def _args(data_csv, *extra):
    argv = ["serve", "--data", str(data_csv), "--max-batch-rows", str(B), *extra]
    return build_parser().parse_args(argv)


def _served(args):
    app = build_service_app(args)
    return servers.ThreadedServer(app).start(), app


def _in_process(method, model, X, rows):
    explainer = {
        "openapi": OpenAPIExplainer(Batched(model), random_state=0),
        "lime": LimeTabularExplainer(
            Batched(model), num_samples=200, random_state=0, feature_names=list("abcd")
        ),
        "slime": StableLIMEExplainer(
            Batched(model), num_samples=100, n_max=400, random_state=0,
            feature_names=list("abcd"),
        ),
    }[method]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return explainer.fit(X).explain(rows)


_METHOD_ARGS = {
    "openapi": [],
    "lime": ["--method", "lime", "--num-samples", "200"],
    "slime": ["--method", "slime", "--num-samples", "100", "--n-max", "400"],
}


def _same(got, want):
    np.testing.assert_array_equal(got.values, want.values)
    np.testing.assert_array_equal(got.status, want.status)
    if "error_bound" in want.fields:
        np.testing.assert_array_equal(got.error_bound, want.error_bound)


def _v1(client, url, rows, **extra):
    return client.post(url, json={"instances": rows.tolist(), **extra}, timeout=120)


def _v2(client, url, rows):
    body = {
        "inputs": [
            {"name": "input-0", "shape": list(rows.shape), "datatype": "FP64",
             "data": rows.ravel().tolist()}
        ]
    }  # fmt: skip
    return client.post(url, json=body, timeout=120)


def _from_v2(resp):
    out = resp.json()["outputs"][0]
    assert out["datatype"] == "BYTES" and out["shape"] == [1]
    return Explanation.from_dict(json.loads(out["data"][0]))


@pytest.mark.filterwarnings(
    "ignore:.*status 'tied':sklearn.exceptions.ConvergenceWarning"
)  # S-LIME ties
# S-LIME rows at n_max warn in the service's thread; their status says it.
@pytest.mark.filterwarnings(
    "ignore:.*reached n_max:sklearn.exceptions.ConvergenceWarning"
)
@pytest.mark.parametrize("method", ["openapi", "lime", "slime"])
def test_v1_and_v2_give_the_in_process_explanation(data, v2_server, method):
    model, X, rows, background = data
    upstream = ["--url", v2_server.url, "--protocol", "v2", "--model-name", "mlp"]
    server, _ = _served(_args(background, *upstream, *_METHOD_ARGS[method]))
    want = _in_process(method, model, X, rows)
    try:
        with httpx.Client(base_url=server.url) as client:
            v1 = _v1(client, "/v1/models/model:explain", rows)
            assert v1.status_code == 200, v1.text
            _same(Explanation.from_dict(v1.json()["explanations"]), want)
            v2 = _v2(client, "/v2/models/model/infer", rows)
            assert v2.status_code == 200, v2.text
            _same(_from_v2(v2), want)
    finally:
        server.stop()


@pytest.mark.slow  # boots MLflow's scoring server
def test_in_front_of_mlflows_scoring_server(data, mlflow_server):
    model, X, rows, background = data
    args = _args(background, "--url", mlflow_server.url, "--protocol", "mlflow")
    server, _ = _served(args)
    want = _in_process("openapi", model, X, rows)
    try:
        with httpx.Client(base_url=server.url) as client:
            _same(
                Explanation.from_dict(
                    _v1(client, "/v1/models/model:explain", rows).json()["explanations"]
                ),
                want,
            )
            _same(_from_v2(_v2(client, "/v2/models/model/infer", rows)), want)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def local_service(data, tmp_path_factory):
    """The service of a saved MLP, one explanation at a time."""
    import joblib

    model, _, _, background = data
    path = tmp_path_factory.mktemp("model") / "mlp.joblib"
    joblib.dump(model, path)
    server, app = _served(
        _args(background, "--model", str(path), "--max-explanations", "1",
              "--max-rows", "60")
    )  # fmt: skip
    yield server, app
    server.stop()


@pytest.mark.parametrize(
    "route, body, status, message",
    [
        ("/v1/models/model:explain", b"not json", 400, "not JSON"),
        ("/v1/models/model:explain", {"rows": [[1, 2, 3, 4]]}, 400, '"instances"'),
        ("/v1/models/model:explain", {"instances": [[1, 2, 3]]}, 400, "rows of 4"),
        ("/v1/models/model:explain", {"instances": [["a", 2, 3, 4]]}, 400, "numbers"),
        ("/v1/models/model:explain", {"instances": []}, 400, "non-empty"),
        ("/v1/models/other:explain", {"instances": [[1, 2, 3, 4]]}, 404, "no model"),
        ("/v1/models/model:explain", {"instances": [[1, 2, 3, 4]] * 61}, 413, "60"),
        ("/v1/models/model:explain", {"instances": [[1, 2, 3, 4]], "target": 9}, 400,
         "9"),
        ("/v2/models/model/infer", {"inputs": []}, 400, "one tensor"),
        ("/v2/models/model/infer",
         {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "INT8", "data": [1] * 4}]},
         400, "FP64 or FP32"),
        ("/v2/models/model/infer",
         {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP64", "data": [1] * 4}]},
         400, "do not fill its shape"),
    ],
)  # fmt: skip
def test_bad_bodies_get_a_clear_4xx(local_service, route, body, status, message):
    server, _ = local_service
    with httpx.Client(base_url=server.url) as client:
        if isinstance(body, bytes):
            resp = client.post(route, content=body)
        else:
            resp = client.post(route, json=body)
    assert resp.status_code == status, resp.text
    assert message in resp.json()["error"]


def test_a_busy_service_says_so_and_when_to_retry(data, local_service):
    server, app = local_service
    slot = app.state.service.slot()  # the only one
    try:
        with httpx.Client(base_url=server.url) as client:
            resp = _v1(client, "/v1/models/model:explain", data[2][:2])
        assert resp.status_code == 503 and resp.headers["Retry-After"] == "1"
    finally:
        slot.release()


def test_a_long_batch_runs_as_a_job(data, local_service):
    model, X, rows, _ = data
    server, _ = local_service
    with httpx.Client(base_url=server.url) as client:
        resp = _v1(client, "/v1/models/model/jobs", rows)
        assert resp.status_code == 202
        job = resp.json()["job"]
        deadline = time.monotonic() + 120
        while (state := client.get(f"/v1/jobs/{job}").json()["state"]) != "done":
            assert state in ("queued", "running") and time.monotonic() < deadline
            time.sleep(0.05)
        result = client.get(f"/v1/jobs/{job}/result")
        assert client.get("/v1/jobs/nope").status_code == 404
    explanation = Explanation.from_dict(result.json()["explanations"])
    want = OpenAPIExplainer(model, random_state=0).fit(X).explain(rows)
    np.testing.assert_array_equal(explanation.status, want.status)
    np.testing.assert_allclose(explanation.values, want.values, rtol=0, atol=1e-12)


def test_a_request_stops_at_its_query_budget_with_the_finished_rows(data, v2_server):
    _, _, rows, background = data
    upstream = ["--url", v2_server.url, "--protocol", "v2", "--model-name", "mlp"]
    server, _ = _served(_args(background, *upstream, "--max-queries", "40"))
    try:
        with httpx.Client(base_url=server.url) as client:
            resp = _v1(client, "/v1/models/model:explain", rows[:10])
            # Each request has its own budget: the next one is answered alike.
            again = _v1(client, "/v1/models/model:explain", rows[:10])
    finally:
        server.stop()
    assert resp.status_code == again.status_code == 429
    body = resp.json()
    assert "budget" in body["error"]
    partial = Explanation.from_dict(body["partial"])
    assert len(partial) == 10 and "not_run" in set(partial.status)
    assert body == again.json()


@pytest.mark.slow  # a process of its own
def test_the_console_script_serves_on_127_0_0_1(data, v2_server):
    exe = shutil.which("plm-explain")
    if exe is None:
        pytest.skip("the plm-explain console script is not installed")
    _, _, rows, background = data
    port = servers.free_port()
    cmd = [exe, "serve", "--url", v2_server.url, "--protocol", "v2",
           "--model-name", "mlp", "--data", str(background), "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/v2/health/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        resp = _v1(httpx, url + "/v1/models/model:explain", rows[:3])
        assert resp.status_code == 200
        assert set(Explanation.from_dict(resp.json()["explanations"]).status) == {
            "exact"
        }
    finally:
        proc.terminate()
        proc.wait(timeout=20)
