"""Served probabilities written with a fixed number of significant digits.

A service that writes its float64 probabilities with printf's ``%.Ng`` rounds
each value by up to half a unit in its N-th digit. Rows whose values all have
11 to 15 digits are read as ``"N digits"``; fewer digits are read as float32
(shortest decimals of float32) or float64, more as float64. This script
serves sklearn MLPs that way and checks every certified row against the
network's own local model (``local_linear_model``): a row is *past its
bound* when its error exceeds ``error_bound``, or ``rtol`` for an exact row.
A float32 forward pass written with 11 or 13 digits tries to fool the
reading (float32 noise behind a finer-looking format): its rows must end
flagged or within their bounds.

Usage: ``python benchmarks/bench_digits.py [--quick]``
"""

import argparse
import collections
import warnings

import numpy as np
from _lime_models import header, limit_blas, table
from bench_precision import errors, explain, split
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

from sklearn_plm_explain.utils._served import float32_forward, written_with_digits

CERTIFIED = ("exact", "approximate")
DATA = {"iris": load_iris, "wine": load_wine, "breast cancer": load_breast_cancer}
FLOAT64_DIGITS = (8, 10, 11, 12, 13, 14, 15, 16, 17)
FLOAT32_DIGITS = (11, 13)


def networks(quick):
    hiddens = [(64, 32)] if quick else [(64, 32), (128, 64)]
    seeds = [0] if quick else [0, 1]
    for name, loader in DATA.items():
        X_train, X_test, y_train = split(loader, scaled=True)
        for hidden in hiddens:
            for seed in seeds:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    mlp = MLPClassifier(hidden, max_iter=500, random_state=seed)
                    mlp.fit(X_train, y_train)
                yield mlp, X_train, X_test[: 10 if quick else 40]


def formats(mlp):
    for k in FLOAT64_DIGITS:
        yield f"float64, %.{k}g", written_with_digits(mlp.predict_proba, k)
    for k in FLOAT32_DIGITS:
        yield (
            f"float32 forward pass, %.{k}g",
            written_with_digits(float32_forward(mlp), k),
        )


def bench(quick):
    tally = collections.defaultdict(
        lambda: {
            "rows": 0,
            "status": collections.Counter(),
            "read": collections.Counter(),
            "max": 0.0,
            "past": 0,
            "over rtol": 0,
        }
    )
    for mlp, X_fit, rows in networks(quick):
        for label, fn in formats(mlp):
            e, _ = explain(fn, X_fit, rows)
            err = errors(e, mlp, rows)
            certified = np.isin(e.status, CERTIFIED)
            exact = e.status == "exact"
            t = tally[label]
            t["rows"] += len(rows)
            t["status"].update(e.status)
            t["read"].update(e.response_precision)
            if certified.any():
                t["max"] = max(t["max"], float((err / e.error_bound)[certified].max()))
            t["past"] += int((certified & ~(err <= e.error_bound)).sum())
            t["over rtol"] += int((exact & ~(err <= 1e-8)).sum())
    out = []
    for label, t in tally.items():
        out.append(
            [
                label,
                t["rows"],
                ", ".join(f"{k} {v}" for k, v in t["read"].most_common(3)),
                ", ".join(f"{k} {v}" for k, v in t["status"].most_common()),
                f"{t['max']:.2f}",
                t["past"],
                t["over rtol"],
            ]
        )
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one net per data set")
    args = parser.parse_args()
    blas = limit_blas(1)  # noqa: F841 - keeps the limit for the run
    print(header("bench_digits: probabilities written with N significant digits"))
    columns = [
        "answers",
        "rows",
        "read as (most)",
        "statuses",
        "max error / bound",
        "past their bounds",
        "exact above rtol",
    ]
    print(table(columns, bench(args.quick)))


if __name__ == "__main__":
    main()
