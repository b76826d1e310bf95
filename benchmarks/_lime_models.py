"""Shared pieces of the LIME / S-LIME benchmarks: models, timers, reports."""

import argparse
import os
import platform
import sys
import time

import numpy as np

from sklearn_plm_explain.utils._anchors import make_anchor_model


def _anchor(name):
    a = make_anchor_model(name)
    return a.model, a.X_train, a.X_test, a.y_train, a.y_test


def bc_rf():
    """ANCHORS ``bc_rf``: breast cancer, 500-tree random forest on raw features."""
    return _anchor("bc_rf")


def digits_mlp():
    """ANCHORS ``digits_mlp``: digits / 16, MLP (64, 32) relu."""
    return _anchor("digits_mlp")


def mars(X):
    """The S-LIME paper's MARS test function (the model itself)."""
    X = np.asarray(X, dtype=float)
    return (
        10 * np.sin(np.pi * X[:, 0] * X[:, 1])
        + 20 * (X[:, 2] - 0.05) ** 2
        + 5.2 * X[:, 3]
        + 5 * X[:, 4]
    )


class TimedModel:
    """Wraps a response function: counts the points and times the model."""

    def __init__(self, fn):
        self.fn = fn
        self.seconds = 0.0
        self.points = 0

    def __call__(self, X):
        t = time.perf_counter()
        out = self.fn(X)
        self.seconds += time.perf_counter() - t
        self.points += len(X)
        return out

    def reset(self):
        self.seconds, self.points = 0.0, 0


def blas_args(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads for the whole run (both libraries); 0 keeps the default",
    )
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    return parser


def limit_blas(n):
    if n > 0:
        from threadpoolctl import threadpool_limits

        return threadpool_limits(limits=n, user_api="blas")
    return None


def header(title):
    """Markdown header with command, machine, versions and thread pools."""
    import joblib
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    versions = [
        f"python {platform.python_version()}",
        f"numpy {np.__version__}",
        f"scipy {scipy.__version__}",
        f"scikit-learn {sklearn.__version__}",
        f"joblib {joblib.__version__}",
    ]
    for name in ("lime", "slime"):
        try:
            mod = __import__(name)
            from importlib.metadata import version

            dist = "lime" if name == "lime" else "stabilized-lime"
            versions.append(f"{dist} {version(dist)}")
            del mod
        except Exception:  # noqa: BLE001 - report whatever is missing
            versions.append(f"{name}: not installed")
    pools = "; ".join(
        f"{p['internal_api']} {p.get('version', '')} {p['num_threads']} threads"
        f" ({p.get('architecture', '')})"
        for p in threadpool_info()
    )
    cmd = " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    lines = [
        f"## {title}",
        "",
        f"- command: `python {cmd}`",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{platform.platform()}",
        f"- versions: {', '.join(versions)}",
        f"- thread pools during the run: {pools}",
        "",
    ]
    return "\n".join(lines)


def table(columns, rows):
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(out)
