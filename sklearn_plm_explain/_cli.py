"""The ``plm-explain`` command line."""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain import __version__
from sklearn_plm_explain._anchors import make_anchor_model
from sklearn_plm_explain._ground_truth import local_linear_model
from sklearn_plm_explain._openapi import OpenAPIExplainer


def _all_class_errors(explanation, W):
    """Worst relative L1 error of D_c over all classes, per row."""
    centred = W - W.mean(axis=2, keepdims=True)
    num = np.abs(explanation.coef - centred).sum(axis=1)
    den = np.abs(centred).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, np.where(num > 0, np.inf, 0.0)).max(axis=1)


def run_demo(args):
    """Explain the digits MLP's whole test split and check every row."""
    t0 = time.perf_counter()
    anchor = make_anchor_model("digits_mlp")
    fit_seconds = time.perf_counter() - t0
    X = anchor.X_test
    explainer = OpenAPIExplainer(
        anchor.model, random_state=args.random_state, n_jobs=args.n_jobs
    ).fit(anchor.X_train)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        explanation = explainer.explain(X)
    seconds = time.perf_counter() - t0
    W, _ = local_linear_model(anchor.model, X)
    errors = _all_class_errors(explanation, W)
    exact = explanation.converged
    d = X.shape[1]
    rows = [
        ("model", "digits_mlp: MLPClassifier((64, 32), relu), pixels / 16"),
        ("test accuracy", f"{anchor.model.score(X, anchor.y_test):.3f}"),
        ("model training (s)", f"{fit_seconds:.1f}"),
        ("rows explained", f"{len(X)}"),
        ("certified exact", f"{exact.sum()}"),
        ("flagged (not exact)", _flagged(explanation.status)),
        (
            "exact but wrong (error > rtol)",
            f"{int(np.sum(errors[exact] > explainer.rtol))}",
        ),
        (
            "max relative L1 error, exact rows",
            f"{errors[exact].max():.2e}" if exact.any() else "n/a",
        ),
        (
            "mean queries per row / (d + 2)",
            f"{explanation.n_queries.mean() / (d + 2):.3f}",
        ),
        ("time per row (ms)", f"{1e3 * seconds / len(X):.2f}"),
    ]
    width = max(len(k) for k, _ in rows)
    print("OpenAPIExplainer on the digits test split, checked against the network's")
    print("own weights (every class's decision features, relative L1 error).\n")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    wrong = int(np.sum(errors[exact] > explainer.rtol))
    return 1 if wrong else 0


def _flagged(status):
    failed = status[status != "exact"]
    if failed.size == 0:
        return "0"
    names, counts = np.unique(failed, return_counts=True)
    return (
        f"{failed.size} (" + ", ".join(f"{c} {n}" for n, c in zip(names, counts)) + ")"
    )


def build_parser():
    parser = argparse.ArgumentParser(
        prog="plm-explain",
        description="Exact and stable explanations of models you can only query.",
    )
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="explain a digits MLP from queries and check every row against "
        "its weights",
    )
    demo.add_argument("--n-jobs", type=int, default=None, help="parallel jobs")
    demo.add_argument("--random-state", type=int, default=0, help="seed")
    demo.set_defaults(func=run_demo)
    return parser


def main(argv=None):
    """Entry point of ``plm-explain``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError) as exc:
        print(f"plm-explain: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
