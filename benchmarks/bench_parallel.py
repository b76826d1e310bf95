"""Throughput of batch explanation with n_jobs=1 and n_jobs=2 (joblib, loky).

500 rows of digits (pixels / 16) explained through ``digits_mlp`` by
``OpenAPIExplainer`` and ``StableLIMEExplainer``, each with ``n_jobs=1`` and
``n_jobs=2`` in the same run, after a warm-up that starts the worker pool.
Reports rows per second, the speed-up, and whether the results are identical.
Usage::

    python benchmarks/bench_parallel.py [--rows 500] [--slime-rows 100]
"""

import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np
import scipy
import sklearn
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_info

from sklearn_plm_explain import OpenAPIExplainer, StableLIMEExplainer
from sklearn_plm_explain.utils._anchors import make_anchor_model


def timed(explainer, X, n_jobs, repeats=7):
    explainer.set_params(n_jobs=n_jobs)
    # Warm-up: pool start, imports, each worker's caches. Twice: in the first
    # call a worker that is up early may take every task while the other
    # still starts, and then pays its first use in the timed call.
    for _ in range(2):
        explainer.explain(X[:20])
    best, result = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = explainer.explain(X)
        best = min(best, time.perf_counter() - t0)
    return best, result


def same(a, b):
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in a.fields)


def close(a, b, rtol=1e-8):
    """Same statuses, attributions within 2 rtol in relative L1 (rows whose
    attributions are all 0 must match exactly)."""
    if "status" in a.fields and not np.array_equal(a.status, b.status):
        return False
    norm = np.abs(a.values).sum(1)
    diff = np.abs(a.values - b.values).sum(1)
    return bool(np.all(diff <= 2 * rtol * norm))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--slime-rows", type=int, default=100)
    args = parser.parse_args()
    blas = ", ".join(
        f"{i['internal_api']} ({i['num_threads']} threads)" for i in threadpool_info()
    )
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, scipy "
        f"{scipy.__version__}, scikit-learn {sklearn.__version__}; BLAS: {blas}"
    )
    print(f"load average at start: {os.getloadavg()}")
    anchor = make_anchor_model("digits_mlp")
    X = load_digits().data / 16.0
    cases = [
        (
            "OpenAPIExplainer",
            OpenAPIExplainer(anchor.model, random_state=0).fit(anchor.X_train),
            X[: args.rows],
        ),
        (
            "StableLIMEExplainer (num_features=5)",
            StableLIMEExplainer(anchor.model, num_features=5, random_state=0).fit(
                anchor.X_train
            ),
            X[: args.slime_rows],
        ),
    ]
    print(
        "\n| explainer | rows | n_jobs=1 rows/s | n_jobs=2 rows/s | speed-up "
        "| bitwise identical | same statuses, values within 2e-8 |"
    )
    print("|---|---|---|---|---|---|---|")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name, explainer, rows in cases:
            t1, e1 = timed(explainer, rows, 1)
            t2, e2 = timed(explainer, rows, 2)
            print(
                f"| {name} | {len(rows)} | {len(rows) / t1:.1f} | {len(rows) / t2:.1f} "
                f"| {t1 / t2:.2f}x | {same(e1, e2)} | {close(e1, e2)} |"
            )
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
