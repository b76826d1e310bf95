"""LogisticModelTreeClassifier against Weka's own trees.LMT, fold by fold.

For each data set and each training set of the outer folds
(``StratifiedKFold(5, shuffle=True, random_state=0)``, as in ANCHORS.md), Weka's
``trees.LMT`` with its default options and ours are fitted on the same rows, in
the same order, with the same internal folds: Weka's own, which stratify the
training rows in their stored order (``Instances.stratify``) without shuffling
them; ours are handed those folds through ``cv``. The script prints, per fold,
the number of LogitBoost iterations each cross-validation chose at the root and
the number of leaves of the pruned tree.

Needs Java and a Weka jar: Debian's ``weka`` package (``apt-get install weka``,
Weka 3.6.14, ``/usr/share/java/weka.jar``) or ``--weka-jar PATH``. Its LMT and
LogisticBase implement the same iteration cross-validation as Weka 3.9.7's.

Usage::

    python benchmarks/bench_lmt_weka.py [--datasets iris wine] [--weka-jar PATH]
"""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import sklearn
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_iris,
    load_wine,
    make_classification,
    make_moons,
)
from sklearn.model_selection import StratifiedKFold

import sklearn_plm_explain
from sklearn_plm_explain import LogisticModelTreeClassifier

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "weka" / "LMTFolds.java"


def _datasets():
    X_c, y_c = make_classification(
        n_samples=1000,
        n_features=20,
        n_informative=5,
        n_classes=3,
        random_state=0,
    )
    X_m, y_m = make_moons(2000, noise=0.3, random_state=0)
    return {
        "breast_cancer": load_breast_cancer(return_X_y=True),
        "digits": load_digits(return_X_y=True),
        "iris": load_iris(return_X_y=True),
        "wine": load_wine(return_X_y=True),
        "classification": (X_c, y_c),
        "moons": (X_m, y_m),
    }


def weka_stratified_order(y, n_folds):
    """The row order Weka's ``Instances.stratify(n_folds)`` leaves behind.

    Weka first groups the rows by class with a pass of swaps (each row
    collects, in place, the later rows of its class), then deals the grouped
    rows round-robin: positions 0, k, 2k, ... first, then 1, k + 1, ...
    """
    order = list(range(len(y)))
    index = 1
    while index < len(order):
        first = y[order[index - 1]]
        for j in range(index, len(order)):
            if y[order[j]] == first:
                order[index], order[j] = order[j], order[index]
                index += 1
        index += 1
    dealt = []
    for start in range(n_folds):
        dealt.extend(order[start::n_folds])
    return np.asarray(dealt)


def weka_folds(y, n_folds=5):
    """Weka's ``trainCV``/``testCV`` blocks over its stratified order."""
    order = weka_stratified_order(y, n_folds)
    n = len(y)
    folds = []
    for k in range(n_folds):
        size = n // n_folds + (1 if k < n % n_folds else 0)
        offset = k if k < n % n_folds else n % n_folds
        first = k * (n // n_folds) + offset
        test = order[first : first + size]
        train = np.concatenate([order[:first], order[first + size :]])
        folds.append((train, test))
    return folds


def write_arff(path, X, y):
    classes = ",".join(str(c) for c in np.unique(y))
    lines = ["@relation fold"]
    lines += [f"@attribute x{j} numeric" for j in range(X.shape[1])]
    lines += [f"@attribute class {{{classes}}}", "@data"]
    # repr round-trips every double exactly.
    lines += [
        ",".join(repr(float(v)) for v in row) + f",{label}" for row, label in zip(X, y)
    ]
    Path(path).write_text("\n".join(lines) + "\n")


def run_weka(paths, jar, workdir):
    subprocess.run(
        ["javac", "-d", workdir, "-cp", jar, str(HARNESS)],
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        ["java", "-cp", f"{jar}{os.pathsep}{workdir}", "LMTFolds", *paths],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result = {}
    for line in out.strip().splitlines():
        path, iters, leaves = line.split("\t")
        result[path] = (int(iters), int(leaves))
    return result


def run_ours(X, y):
    lmt = LogisticModelTreeClassifier(cv=weka_folds(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lmt.fit(X, y)
    return lmt.n_iter_, lmt.get_n_leaves()


def main(argv=None):
    data = _datasets()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", choices=list(data), default=list(data))
    parser.add_argument("--weka-jar", default="/usr/share/java/weka.jar")
    args = parser.parse_args(argv)
    if shutil.which("java") is None or not Path(args.weka_jar).exists():
        sys.exit(f"needs java and a Weka jar (looked for {args.weka_jar})")

    print(
        f"command: python {shlex.join(['benchmarks/bench_lmt_weka.py', *sys.argv[1:]])}"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; python "
        f"{platform.python_version()}, scikit-learn {sklearn.__version__}, "
        f"sklearn_plm_explain {sklearn_plm_explain.__version__}"
    )
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    print(f"java: {java.stderr.splitlines()[0]}; weka jar: {args.weka_jar}")
    outer = StratifiedKFold(5, shuffle=True, random_state=0)
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for name in args.datasets:
            X, y = data[name]
            for k, (train, _) in enumerate(outer.split(X, y)):
                path = os.path.join(tmp, f"{name}_{k}.arff")
                write_arff(path, X[train], y[train])
                jobs.append((name, k, path, X[train], y[train]))
        weka = run_weka([j[2] for j in jobs], args.weka_jar, tmp)
        print()
        print("| data | fold | iterations Weka | ours | leaves Weka | ours | same |")
        print("|---|---|---|---|---|---|---|")
        same = 0
        for name, k, path, X, y in jobs:
            w_iter, w_leaves = weka[path]
            o_iter, o_leaves = run_ours(X, y)
            match = (w_iter, w_leaves) == (o_iter, o_leaves)
            same += match
            print(
                f"| {name} | {k} | {w_iter} | {o_iter} | {w_leaves} | {o_leaves} "
                f"| {'yes' if match else '**no**'} |"
            )
    print(f"\nsame iterations and leaves on {same} of {len(jobs)} folds")


if __name__ == "__main__":
    main()
