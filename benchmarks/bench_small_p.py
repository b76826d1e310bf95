"""Rows of a binary float32 network whose small probability is ``1 - p``.

A float32 service that answers ``[p0, 1 - p0]`` gives its small class only to
float32's absolute precision, a log error of about 2^-24 / p. For each
``--log2-p``, rows are placed with that class's probability within a factor
exp(+-1e-5 to +-0.1) of ``2**log2_p`` (``binary_float32_near``: twenty rows on
each side per starting row, six starting rows, a d = 128 network with one
hidden layer of 64). For each case: the statuses, the certified rows whose
error against ``local_linear_model`` is above their ``error_bound``, the
largest error over bound and, for those rows, how far the nearest first-layer
kink lies from the row, in cube radii (over the L1 norm of the unit's
weights in the cube's units, the furthest a cube's corner reaches).

Usage::

    python benchmarks/bench_small_p.py [--log2-p -10 -9 -8 -6 -4] [--seeds 2 3]
"""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import warnings

import numpy as np
from _lime_models import header, limit_blas, table
from bench_precision import CERTIFIED, errors
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain import OpenAPIExplainer
from sklearn_plm_explain.utils._served import binary_float32_near


def kink_distance(mlp, X_train, x, radius):
    """Distance (in cube radii) from ``x`` to the nearest first-layer kink."""
    scale = X_train.std(axis=0)
    W, b = mlp.coefs_[0], mlp.intercepts_[0]
    reach = (np.abs(W) * scale[:, None]).sum(axis=0)
    return float(np.min(np.abs(x @ W + b) / reach) / radius)


def case(log2_p, seed, n_rows):
    f, mlp, X, rows = binary_float32_near(log2_p, n_rows=n_rows, seed=seed)
    explainer = OpenAPIExplainer(f, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(rows)
    err = errors(e, mlp, rows)
    certified = np.isin(e.status, CERTIFIED)
    over = np.flatnonzero(certified & ~(err <= e.error_bound))
    worst = np.max(err[certified] / e.error_bound[certified], initial=0.0)
    kinks = [kink_distance(mlp, X, rows[i], e.radius[i]) for i in over]
    return [
        f"{log2_p:g}",
        seed,
        len(rows),
        ", ".join(f"{k} {v}" for k, v in e.status_counts().items()),
        f"{len(over)} of {int(certified.sum())}",
        f"{worst:.3g}",
        ", ".join(f"{e.error_bound[i]:.2g}" for i in over) or "-",
        ", ".join(f"{k:.2g}" for k in kinks) or "-",
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2-p", type=float, nargs="+", default=[-10, -9, -8, -6])
    parser.add_argument("--seeds", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--rows", type=int, default=240)
    args = parser.parse_args()
    blas = limit_blas(1)  # noqa: F841 - keeps the limit for the run
    print(header("Rows of a binary float32 network near a small probability"))
    out = [case(p, s, args.rows) for p in args.log2_p for s in args.seeds]
    columns = ["log2 p", "seed", "rows", "statuses", "over bound"]
    columns += ["max err / bound", "their bounds", "their nearest kink (radii)"]
    print()
    print(table(columns, out))


if __name__ == "__main__":
    main()
