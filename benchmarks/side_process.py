"""One side of bench_scale's side-by-side, as a whole process, for outside timers.

Fits bench_scale's model of width ``d`` (as ``bench_scale.fit_case`` does), then
explains the first ``n`` test rows with ``OpenAPIExplainer`` (``ours``) or with
central differences of the log-probabilities (``fd``, ``bench_openapi.zoo``),
or stops after the fit (``base``: the fixed cost both share). One BLAS thread.
Usage::

    /usr/bin/time -v python benchmarks/side_process.py {ours,fd,base} D N

The per-row cost of a method is its process's CPU time less ``base``'s, over N.
"""

import sys

import numpy as np
from bench_openapi import zoo
from bench_scale import fit_case, quiet_explain
from threadpoolctl import threadpool_limits

from sklearn_plm_explain import OpenAPIExplainer


def main(which, d, n):
    limits = threadpool_limits(1)  # noqa: F841 - kept for the whole run
    case = fit_case(d, 10)
    X = case["X_test"][:n]
    if which == "ours":
        explainer = OpenAPIExplainer(case["model"].predict_proba, random_state=0)
        quiet_explain(explainer.fit(case["X_train"]), X)
    elif which == "fd":
        targets = case["model"].predict_proba(X).argmax(axis=1)
        with np.errstate(all="ignore"):
            for x, c in zip(X, targets):
                zoo(case["model"], x, c)
    elif which != "base":
        raise SystemExit(f"unknown method {which!r}: ours, fd or base")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
