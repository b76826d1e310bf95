"""Rows placed next to a first-layer kink of a ReLU network, at a width whose
cubes are fitted on the shared basis (d = 300).

Each explained row is moved onto the hyperplane of a randomly chosen unit of
the first layer, then ``--distances`` away from it (in the standardised
input's units; the first cube's step is ``init_radius = 8e-5``). The unit's
output weights are scaled by ``--weakness`` (1: an ordinary kink; 1e-7: a
kink whose jump in slope is about 1e-7 of the slopes, weaker than the noise
test can see from a cube across it). For each case: the statuses, and the
rows "wrong" against ``local_linear_model`` (a certified row whose error is
above its ``error_bound``, or an ``"exact"`` row above ``rtol``), with the
largest error over bound among certified rows. The user guide's "What the
certificate assumes" names this limit; this script measures it.

Usage::

    python benchmarks/bench_weak_kinks.py [--rows 40] [--seed 0]
"""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import copy
import warnings

import numpy as np
from _lime_models import header, limit_blas, table
from bench_precision import CERTIFIED, errors
from bench_scale import wrong_rows
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain import OpenAPIExplainer
from sklearn_plm_explain.utils._served import classification_mlp


def network(d, seed):
    model, X = classification_mlp(
        1000 + 200, d, 128, seed, n_fit=1000, n_informative=30, n_classes=5
    )
    return model, X[:1000], X[1000:]


def next_to_kinks(model, X, distance, weakness, rng):
    """Rows moved ``distance`` from a random first-layer unit's hyperplane,
    and the model with those units' output weights times ``weakness``."""
    W, b = model.coefs_[0], model.intercepts_[0]
    units = rng.integers(0, W.shape[1], len(X))
    moved = X.copy()
    for i, h in enumerate(units):
        w = W[:, h]
        moved[i] -= (moved[i] @ w + b[h]) / (w @ w) * w
        moved[i] += distance * rng.choice([-1, 1]) * w / np.linalg.norm(w)
    weak = copy.deepcopy(model)
    weak.coefs_[1][np.unique(units)] *= weakness
    return weak, moved


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--d", type=int, default=300)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--distances", type=float, nargs="+")
    parser.add_argument("--weakness", type=float, nargs="+")
    args = parser.parse_args()
    distances = args.distances or [1e-7, 1e-6, 1e-5, 1e-4]
    weakness = args.weakness or [1.0, 1e-4, 1e-7]
    blas = limit_blas(1)  # noqa: F841 - keeps the limit for the run
    print(header("Rows next to first-layer kinks"))
    rng = np.random.default_rng(args.seed)
    model, X_train, X_test = network(args.d, args.seed)
    rows = []
    for weak in weakness:
        for distance in distances:
            m, X = next_to_kinks(model, X_test[: args.rows], distance, weak, rng)
            explainer = OpenAPIExplainer(m, random_state=args.seed).fit(X_train)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                e = explainer.explain(X)
            err = errors(e, m, X)
            certified = np.isin(e.status, CERTIFIED)
            worst = np.max(err[certified] / e.error_bound[certified], initial=0.0)
            rows.append(
                [
                    f"{weak:g}",
                    f"{distance:g}",
                    ", ".join(f"{k} {v}" for k, v in e.status_counts().items()),
                    int(wrong_rows(e, err, explainer.rtol).sum()),
                    f"{np.max(err[certified], initial=0.0):.2g}",
                    f"{np.median(e.error_bound[certified]):.2g}"
                    if certified.any()
                    else "-",
                    f"{worst:.3g}",
                ]
            )
    columns = ["weakness", "distance", "statuses", "wrong"]
    columns += ["max err (certified)", "median bound", "max err / bound"]
    print(f"\nd = {args.d}, {args.rows} rows per case\n")
    print(table(columns, rows))


if __name__ == "__main__":
    main()
