"""The digits MLP explained over loopback HTTP (MLflow's scoring server) vs
in-process.

``digits_mlp`` is saved with ``mlflow.sklearn.save_model(...,
pyfunc_predict_fn="predict_proba", serialization_format="cloudpickle")`` and
served by ``mlflow models serve --env-manager local`` on 127.0.0.1. Its test
rows are explained by ``OpenAPIExplainer`` (and, on fewer rows,
``StableLIMEExplainer``) through a :class:`RemoteModel` with
``max_concurrency`` 1, 4 and 8, and in-process on the same model queried in
the same batches (``max_batch_rows`` rows per call). Reports explained rows
per second, requests, query rows and bytes sent, the overhead ratio (remote
time / in-process time) and whether the results are bitwise identical; then
the same OpenAPI run through ``plm-explain serve``'s application (V1
``:explain``) against a direct RemoteModel run: the service's overhead per row.
Usage::

    python benchmarks/bench_remote.py [--rows 200] [--slime-rows 20]
        [--max-batch-rows 1000]
"""

import argparse
import importlib.util
import os
import platform
import sys
import time
import warnings

import numpy as np
import sklearn
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain import OpenAPIExplainer, RemoteModel, StableLIMEExplainer
from sklearn_plm_explain.utils._anchors import make_anchor_model

HERE = os.path.dirname(os.path.abspath(__file__))


def _servers():
    path = os.path.join(HERE, "..", "tests", "_servers.py")
    spec = importlib.util.spec_from_file_location("plm_test_servers", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["plm_test_servers"] = module
    spec.loader.exec_module(module)
    return module


class Batched(sklearn.base.ClassifierMixin, sklearn.base.BaseEstimator):
    """The model in-process, queried in the batches the server sees."""

    def __init__(self, model, size):
        self.model = model
        self.size = size
        self.classes_ = model.classes_

    def fit(self, X, y=None):
        return self

    def __sklearn_is_fitted__(self):
        return True

    def predict_proba(self, X):
        X = np.asarray(X)
        return np.concatenate(
            [
                self.model.predict_proba(X[i : i + self.size])
                for i in range(0, len(X), self.size)
            ]
        )


def same(a, b):
    return all(
        np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True)
        if getattr(a, f).dtype.kind == "f"
        else np.array_equal(getattr(a, f), getattr(b, f))
        for f in a.fields
    )


def timed(make, X, repeats):
    best, result, model = np.inf, None, None
    for _ in range(repeats):
        explainer, model = make()
        t0 = time.perf_counter()
        result = explainer.explain(X)
        best = min(best, time.perf_counter() - t0)
    return best, result, model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--slime-rows", type=int, default=20)
    parser.add_argument("--max-batch-rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    servers = _servers()
    import mlflow

    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, scikit-learn "
        f"{sklearn.__version__}, mlflow {mlflow.__version__}"
    )
    print(f"load average at start: {tuple(round(v, 2) for v in os.getloadavg())}")
    anchor = make_anchor_model("digits_mlp")
    t0 = time.perf_counter()
    server = servers.MLflowServer(anchor.model).start().wait()
    print(f"mlflow models serve up in {time.perf_counter() - t0:.1f} s")
    B = args.max_batch_rows
    local_model = Batched(anchor.model, B)
    cases = [
        (
            "OpenAPIExplainer",
            lambda m: OpenAPIExplainer(m, random_state=0),
            anchor.X_test[: args.rows],
        ),
        (
            "StableLIMEExplainer (num_features=5)",
            lambda m: StableLIMEExplainer(m, num_features=5, random_state=0),
            anchor.X_test[: args.slime_rows],
        ),
    ]
    print(
        f"\nmax_batch_rows={B}; best of {args.repeats}; the in-process model is "
        "queried in the same batches.\n"
    )
    print(
        "| explainer | rows | where | max_concurrency | rows/s | requests "
        "| query rows sent | MB sent | overhead | bitwise identical |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for name, build, X in cases:

                def local():
                    return build(local_model).fit(anchor.X_train), None

                t_local, e_local, _ = timed(local, X, args.repeats)
                print(
                    f"| {name} | {len(X)} | in-process | - | {len(X) / t_local:.1f} "
                    f"| - | {int(e_local.n_queries.sum())} | - | 1.00 | - |"
                )
                for conc in (1, 4, 8):

                    def remote(conc=conc):
                        model = RemoteModel(
                            server.url,
                            classes=anchor.model.classes_,
                            max_batch_rows=B,
                            max_concurrency=conc,
                        )
                        return build(model).fit(anchor.X_train), model

                    t, e, model = timed(remote, X, args.repeats)
                    s = model.stats
                    print(
                        f"| {name} | {len(X)} | HTTP | {conc} | {len(X) / t:.1f} "
                        f"| {s.requests} | {s.rows_sent} | {s.bytes_sent / 1e6:.1f} "
                        f"| {t / t_local:.2f} | {same(e, e_local)} |"
                    )
                    model.close()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            _through_the_service(servers, server, anchor, args, B)
    finally:
        server.stop()
    print(f"\nload average at end: {tuple(round(v, 2) for v in os.getloadavg())}")


def _through_the_service(servers, server, anchor, args, B):
    """OpenAPIExplainer behind ``plm-explain serve``'s application (V1
    ``:explain``, one request of all rows) against the same explainer on a
    direct RemoteModel: the service's overhead per row."""
    import httpx

    from sklearn_plm_explain import Explanation
    from sklearn_plm_explain._server import make_app

    X = anchor.X_test[: args.rows]

    def direct():
        model = RemoteModel(server.url, classes=anchor.model.classes_, max_batch_rows=B)
        return OpenAPIExplainer(model, random_state=0).fit(anchor.X_train), model

    t_direct, e_direct, _ = timed(direct, X, args.repeats)
    explainer, _ = direct()
    service = servers.ThreadedServer(make_app(explainer, "digits")).start()
    best, got = np.inf, None
    try:
        with httpx.Client(base_url=service.url, timeout=600) as client:
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                resp = client.post(
                    "/v1/models/digits:explain", json={"instances": X.tolist()}
                )
                best = min(best, time.perf_counter() - t0)
                got = Explanation.from_dict(resp.json()["explanations"])
    finally:
        service.stop()
    print(
        "\n| OpenAPIExplainer, rows | direct RemoteModel ms/row | through "
        "plm-explain serve (V1 :explain) ms/row | overhead ms/row | ratio "
        "| values and statuses identical |"
    )
    print("|---|---|---|---|---|---|")
    identical = np.array_equal(got.values, e_direct.values) and np.array_equal(
        got.status, e_direct.status
    )
    print(
        f"| {len(X)} | {1e3 * t_direct / len(X):.2f} | {1e3 * best / len(X):.2f} "
        f"| {1e3 * (best - t_direct) / len(X):.2f} | {best / t_direct:.2f} "
        f"| {identical} |"
    )


if __name__ == "__main__":
    main()
