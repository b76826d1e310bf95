"""Benchmark of LogisticModelTreeClassifier against scikit-learn baselines.

Scores every model on the same ``StratifiedKFold(5, shuffle=True,
random_state=0)`` folds (raw features, as Weka is run) and prints a markdown
report: accuracy, log loss, fit seconds and leaves per data set, then the
fit time of the LMT and of HistGradientBoostingClassifier on the full digits
data, and the targets with their measured values.

Usage::

    python benchmarks/bench_lmt.py [--datasets breast_cancer digits xor]
"""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import os
import platform
import shlex
import sys
import time

import numpy as np
import scipy
import sklearn
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_info, threadpool_limits

from sklearn_plm_explain import LogisticModelTreeClassifier

# Weka 3.9.7 trees.LMT (defaults) on the same folds (ANCHORS.md, section 5).
WEKA_ACCURACY = {"breast_cancer": 0.9754, "digits": 0.9655}
MAX_FIT_RATIO_TO_HGB = 3.0


def shifted_xor(n=2000, n_noise=4, seed=0):
    """XOR of two feature signs (unequal quadrants) plus noise features.

    A linear model cannot represent it; the quadrants are unequal so that a
    single C4.5 cut is informative (on a symmetric XOR no single cut gains
    information and no class-based tree splits).
    """
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.uniform(-1, 1, n),
            rng.uniform(-0.4, 1, n),
            rng.normal(size=(n, n_noise)),
        ]
    )
    y = ((X[:, 0] > 0) ^ (X[:, 1] > 0)).astype(int)
    flip = rng.random(n) < 0.05
    y[flip] = 1 - y[flip]
    return X, y


DATASETS = {
    "breast_cancer": lambda: load_breast_cancer(return_X_y=True),
    "digits": lambda: load_digits(return_X_y=True),
    "xor": shifted_xor,
}


def models():
    return {
        "LMT": lambda: LogisticModelTreeClassifier(random_state=0),
        "LogisticRegression": lambda: make_pipeline(
            StandardScaler(), LogisticRegression(max_iter=5000)
        ),
        "DecisionTree": lambda: DecisionTreeClassifier(random_state=0),
        "HistGB": lambda: HistGradientBoostingClassifier(random_state=0),
    }


def n_leaves(model):
    if hasattr(model, "get_n_leaves"):
        return model.get_n_leaves()
    return None


def evaluate(name, X, y, n_splits):
    folds = StratifiedKFold(n_splits, shuffle=True, random_state=0)
    rows = []
    extra = {}
    for model_name, make in models().items():
        pred = np.empty_like(y)
        proba = np.empty((y.size, np.unique(y).size))
        fit_s, leaves, iters = [], [], []
        for train, test in folds.split(X, y):
            model = make()
            start = time.perf_counter()
            model.fit(X[train], y[train])
            fit_s.append(time.perf_counter() - start)
            pred[test] = model.predict(X[test])
            proba[test] = model.predict_proba(X[test])
            leaves.append(n_leaves(model))
            if model_name == "LMT":
                iters.append(model.n_iter_)
                assert np.all(proba[test] > 0), "LMT returned a zero probability"
        acc = accuracy_score(y, pred)
        loss = log_loss(y, proba, labels=np.unique(y))
        leaf_txt = "-" if leaves[0] is None else "/".join(str(v) for v in leaves)
        rows.append((model_name, acc, loss, np.sum(fit_s), leaf_txt))
        if model_name == "LMT":
            extra = {"iterations": iters, "min_proba": proba.min()}
    return rows, extra


def full_fit_times(X, y, repeats):
    """Best-of-``repeats`` fit time on the full data, LMT and HistGB.

    HistGB is timed with its default threads and with one thread: on a
    machine shared with other work, OpenMP threads can make it much slower
    than its single-threaded run, which would flatter the ratio.
    """
    times = {}
    for label, make, limit in (
        ("LMT", lambda: LogisticModelTreeClassifier(random_state=0), None),
        ("HistGB", lambda: HistGradientBoostingClassifier(random_state=0), None),
        ("HistGB 1 thread", lambda: HistGradientBoostingClassifier(random_state=0), 1),
    ):
        best = np.inf
        for _ in range(repeats):
            model = make()
            with threadpool_limits(limits=limit):
                start = time.perf_counter()
                model.fit(X, y)
                best = min(best, time.perf_counter() - start)
        times[label] = best
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS)
    )
    parser.add_argument("--n-splits", type=int, default=5)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="full-digits fits per model; the best time is reported",
    )
    args = parser.parse_args(argv)

    print("## bench_lmt\n")
    print("Command: `python " + " ".join(map(shlex.quote, sys.argv)) + "`\n")
    print(
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"Versions: Python {platform.python_version()}, numpy {np.__version__}, "
        f"scipy {scipy.__version__}, scikit-learn {sklearn.__version__}"
    )
    pools = ", ".join(
        f"{p['internal_api']} {p.get('version', '?')} ({p['num_threads']} threads)"
        for p in threadpool_info()
    )
    print(f"Thread pools: {pools}")
    print(
        "Load average at the start: "
        + ", ".join(f"{v:.2f}" for v in os.getloadavg())
        + " (the machine is shared; timings are wall clock)\n"
    )
    print(
        f"StratifiedKFold({args.n_splits}, shuffle=True, random_state=0), raw "
        "features; fit seconds summed over the folds; leaves per fold.\n"
    )
    print("| data | model | accuracy | log loss | fit s | leaves |")
    print("|---|---|---|---|---|---|")
    checks = []
    for name in args.datasets:
        X, y = DATASETS[name]()
        rows, extra = evaluate(name, X, y, args.n_splits)
        for model_name, acc, loss, fit_s, leaves in rows:
            print(
                f"| {name} | {model_name} | {100 * acc:.2f} % | {loss:.3f} | "
                f"{fit_s:.2f} | {leaves} |"
            )
        acc = {r[0]: r[1] for r in rows}
        print(
            f"| {name} | (LMT iterations per fold: "
            f"{'/'.join(map(str, extra['iterations']))}; smallest probability "
            f"{extra['min_proba']:.2e}) | | | | |"
        )
        if name in WEKA_ACCURACY:
            checks.append(
                (
                    f"{name}: LMT accuracy >= Weka LMT {100 * WEKA_ACCURACY[name]:.2f} %",
                    f"{100 * acc['LMT']:.2f} %",
                    acc["LMT"] >= WEKA_ACCURACY[name],
                )
            )
        if name == "xor":
            checks.append(
                (
                    "xor: LMT accuracy > LogisticRegression",
                    f"{100 * acc['LMT']:.2f} % vs {100 * acc['LogisticRegression']:.2f} %",
                    acc["LMT"] > acc["LogisticRegression"],
                )
            )

    X, y = load_digits(return_X_y=True)
    times = full_fit_times(X, y, args.repeats)
    # The stricter of the two HistGB timings is the reference.
    reference = min(times["HistGB"], times["HistGB 1 thread"])
    ratio = times["LMT"] / reference
    print(
        f"\nFull digits fit (best of {args.repeats}): LMT {times['LMT']:.2f} s, "
        f"HistGB {times['HistGB']:.2f} s (default threads), "
        f"{times['HistGB 1 thread']:.2f} s (1 thread); ratio to the faster "
        f"HistGB {ratio:.2f}. Load average at the end: "
        + ", ".join(f"{v:.2f}" for v in os.getloadavg())
        + "\n"
    )
    checks.append(
        (
            f"digits: LMT full fit <= {MAX_FIT_RATIO_TO_HGB:g} x HistGB",
            f"{ratio:.2f} x",
            ratio <= MAX_FIT_RATIO_TO_HGB,
        )
    )
    print("| target | measured | met |")
    print("|---|---|---|")
    for label, measured, ok in checks:
        print(f"| {label} | {measured} | {'yes' if ok else '**no**'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
