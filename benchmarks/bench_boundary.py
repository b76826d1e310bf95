"""Rows close to a region boundary: thin cubes against the plain search.

30 random ReLU networks (``make_blobs`` data, d 2-40, 2-8 classes, 1-3 hidden
layers of 4-23 units, as in the property tests); in each, 30 training rows are
moved along the normal of their nearest first-layer unit to a distance of
``10**U(-11, -3)`` feature standard deviations from its boundary, on a random
side. Every row is explained through ``predict_proba`` twice in the same run:
as the explainer ships, and with the boundary location switched off (the
search stops at ``"boundary"`` where it would go on with cubes thin across the
boundary), and checked against ``local_linear_model``.

Usage: ``python benchmarks/bench_boundary.py [--networks 30] [--rows 30]``
"""

import argparse
import time
import warnings

import numpy as np
from _lime_models import header, table
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

from sklearn_plm_explain import OpenAPIExplainer, decision_features, local_linear_model

RTOL = 1e-8
BANDS = [(-11, -9), (-9, -7), (-7, -5), (-5, -3)]


class PlainSearch(OpenAPIExplainer):
    """The explainer with boundary location switched off (the ablation)."""

    def _near_boundary(self, state, i, search):
        return None


def network(seed):
    rng = np.random.default_rng(seed)
    d, C, layers = rng.integers(2, 41), rng.integers(2, 9), rng.integers(1, 4)
    X, y = make_blobs(
        n_samples=300,
        centers=int(C),
        n_features=int(d),
        cluster_std=3.0,
        random_state=seed,
    )
    sizes = tuple(int(v) for v in rng.integers(4, 24, size=layers))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier(sizes, max_iter=60, random_state=seed).fit(X, y)
    return mlp, X


def place(mlp, x, scale, distance, side):
    """Move x along its nearest first-layer unit's normal to ``distance``."""
    W, b = mlp.coefs_[0], mlp.intercepts_[0]
    g = scale[:, None] * W
    z = x @ W + b
    j = np.argmin(np.abs(z) / np.linalg.norm(g, axis=0))
    gj = g[:, j]
    return x + scale * (side * distance * np.linalg.norm(gj) - z[j]) * gj / (gj @ gj)


def run(cls, mlp, X, rows, seed):
    explainer = cls(mlp, response_method="predict_proba", random_state=seed).fit(X)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(rows)
    seconds = time.perf_counter() - start
    W, _ = local_linear_model(mlp, rows)
    truth = decision_features(W, e.target)
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(e.values - truth).sum(1) / np.abs(truth).sum(1)
    wrong = e.converged & ~(err <= RTOL)
    return e.converged, wrong, e.n_queries / (X.shape[1] + 2), seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--networks", type=int, default=30)
    parser.add_argument("--rows", type=int, default=30)
    args = parser.parse_args()
    print(header("Rows near a region boundary (bench_boundary)"))
    log_dist, res = [], {"thin": [], "plain": []}
    for seed in range(args.networks):
        mlp, X = network(seed)
        scale = X.std(axis=0)
        rng = np.random.default_rng(seed)
        logs = rng.uniform(-11, -3, size=args.rows)
        picks = rng.integers(len(X), size=args.rows)
        sides = rng.choice([-1, 1], size=args.rows)
        rows = np.array(
            [place(mlp, X[i], scale, 10.0**t, s) for i, t, s in zip(picks, logs, sides)]
        )
        log_dist.append(logs)
        res["thin"].append(run(OpenAPIExplainer, mlp, X, rows, seed))
        res["plain"].append(run(PlainSearch, mlp, X, rows, seed))
    log_dist = np.concatenate(log_dist)
    merged = {
        k: [np.concatenate([r[j] for r in v]) for j in range(3)]
        + [sum(r[3] for r in v)]
        for k, v in res.items()
    }
    out = []
    for lo, hi in BANDS + [(-11, -3)]:
        band = (log_dist >= lo) & (log_dist < hi)
        row = [f"1e{lo} to 1e{hi}" if hi - lo == 2 else "all", band.sum()]
        for key in ("thin", "plain"):
            exact, wrong, q, _ = merged[key]
            row += [exact[band].sum(), wrong[band].sum(), f"{q[band].mean():.2f}"]
        out.append(row)
    columns = ["distance (std)", "rows"]
    for key in ("thin", "plain"):
        columns += [f"exact ({key})", f"wrong ({key})", f"queries/(d+2) ({key})"]
    print(table(columns, out))
    print()
    for key, (_, _, _, seconds) in merged.items():
        print(f"- {key}: {1e3 * seconds / len(log_dist):.2f} ms per row")


if __name__ == "__main__":
    main()
