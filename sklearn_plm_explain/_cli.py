"""The ``plm-explain`` command line."""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import csv
import json
import os
import sys
import time
import warnings
from collections import Counter

import numpy as np
from sklearn.base import is_regressor
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain import __version__
from sklearn_plm_explain._anchors import make_anchor_model
from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain._ground_truth import local_linear_model
from sklearn_plm_explain._lime import LimeTabularExplainer
from sklearn_plm_explain._openapi import OpenAPIExplainer
from sklearn_plm_explain._stable_lime import StableLIMEExplainer


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
    if args.plot:
        _save_class_averages(explanation, anchor.image_shape, args.plot)
        left_out = int(explanation.flagged.sum())
        print(
            f"\n  class-average decision features written to {args.plot} "
            f"(certified rows only: {left_out} flagged rows left out)"
        )
    return 1 if wrong else 0


def _save_class_averages(explanation, image_shape, path):
    """Write one heatmap per class (mean decision features) to an image file.

    Only certified rows are averaged; each panel says how many were left out.
    """
    import matplotlib

    # A file is written, never a window opened: no display is needed.
    matplotlib.use("Agg")
    from sklearn_plm_explain._display import ExplanationDisplay

    display = ExplanationDisplay.from_explanation(
        explanation, kind="class_average", image_shape=image_shape
    )
    display.figure_.suptitle("digits MLP: mean decision features of each class")
    display.figure_.savefig(path, dpi=100)


def _flagged(status):
    failed = status[status != "exact"]
    if failed.size == 0:
        return "0"
    names, counts = np.unique(failed, return_counts=True)
    return (
        f"{failed.size} (" + ", ".join(f"{c} {n}" for n, c in zip(names, counts)) + ")"
    )


class _CLIError(Exception):
    """Bad input: reported as one line on stderr, without a traceback."""


_METHODS = ("openapi", "slime", "lime")


def _load_model(path):
    if not os.path.isfile(path):
        raise _CLIError(f"model file not found: {path}")
    import joblib

    try:
        model = joblib.load(path)
    except Exception as exc:  # any unpickling failure is bad input here
        raise _CLIError(
            f"cannot load a model from {path}: {type(exc).__name__}: {exc}"
        ) from None
    if not (is_regressor(model) or hasattr(model, "predict_proba")):
        raise _CLIError(
            f"the model in {path} ({type(model).__name__}) has no predict_proba "
            "and is not a regressor; explain needs a classifier that gives "
            "probabilities or a regressor"
        )
    return model


def _read_csv(path):
    """Numeric rows of a CSV file with a header line: ``(names, X)``."""
    if not os.path.isfile(path):
        raise _CLIError(f"data file not found: {path}")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            lines = [row for row in csv.reader(fh) if row]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise _CLIError(f"bad CSV {path}: {exc}") from None
    if len(lines) < 2:
        raise _CLIError(f"bad CSV {path}: needs a header line and at least one row")
    header, body = [name.strip() for name in lines[0]], lines[1:]
    X = np.empty((len(body), len(header)))
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise _CLIError(
                f"bad CSV {path}: data row {i + 1} has {len(row)} fields, "
                f"the header has {len(header)}"
            )
        try:
            X[i] = [float(v) for v in row]
        except ValueError:
            raise _CLIError(
                f"bad CSV {path}: data row {i + 1} has a value that is not a number"
            ) from None
    if not np.isfinite(X).all():
        raise _CLIError(f"bad CSV {path}: missing or infinite values")
    return header, X


def _as_model_input(model, names, X):
    """A DataFrame in the model's column order when it was fitted on one."""
    expected = getattr(model, "feature_names_in_", None)
    if expected is None:
        return X, names
    missing = [str(c) for c in expected if c not in names]
    if missing:
        raise _CLIError(f"the data lack the model's column(s) {missing[:5]}")
    import pandas as pd

    frame = pd.DataFrame(X, columns=names)[list(expected)]
    return frame, [str(c) for c in expected]


def _check_columns(model, names, X):
    expected = getattr(model, "n_features_in_", None)
    if expected is not None and X.shape[1] != expected:
        raise _CLIError(
            f"the data have {X.shape[1]} columns but the model expects "
            f"{expected} features"
        )


def _resolve_target(model, target):
    """The class label whose string form is ``target`` (None stays None)."""
    if target is None:
        return None
    classes = getattr(model, "classes_", None)
    if classes is None:
        raise _CLIError("--target needs a model with classes_")
    for label in classes:
        if str(label) == target:
            return label
    known = ", ".join(str(c) for c in classes)
    raise _CLIError(f"unknown target {target!r}; the model's classes are: {known}")


def _make_explainer(model, args):
    common = {"n_jobs": args.n_jobs, "random_state": args.random_state}
    if args.method == "openapi":
        return OpenAPIExplainer(model, **common)
    lime_kw = dict(common, num_features=args.num_features)
    if is_regressor(model):
        lime_kw["mode"] = "regression"
    if args.num_samples is not None:
        lime_kw["num_samples"] = args.num_samples
    if args.method == "lime":
        return LimeTabularExplainer(model, **lime_kw)
    if args.n_max is not None:
        lime_kw["n_max"] = args.n_max
    elif args.num_samples is not None:
        # Keep S-LIME's default ratio of largest to first sample size.
        lime_kw["n_max"] = 10 * args.num_samples
    return StableLIMEExplainer(model, **lime_kw)


def _explain_in_chunks(explainer, X, target, chunk_size):
    """Explain ``X`` chunk by chunk, reporting progress on stderr."""
    parts, n = [], X.shape[0]
    statuses = Counter()
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        with warnings.catch_warnings():
            # The statuses are in the output; one summary line replaces
            # the per-chunk warnings.
            warnings.simplefilter("ignore", ConvergenceWarning)
            part = explainer.explain(X[start:stop], target=target)
        if "reused_from" in part.fields:
            # Row references are local to a chunk: make them global.
            reused = part.reused_from
            reused[reused >= 0] += start
        statuses.update(str(s) for s in part.status)
        parts.append(part)
        print(f"explained {stop}/{n} rows", file=sys.stderr, flush=True)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
    print(f"statuses: {summary}", file=sys.stderr)
    return Explanation.concat(parts)


def _write_csv(explanation, out):
    columns = explanation._wide_columns()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([name for name, _ in columns])
    for i in range(len(explanation)):
        writer.writerow([_cell(col[i]) for _, col in columns])


def _cell(value):
    if isinstance(value, (float, np.floating)):
        return repr(float(value))  # shortest text that reads back exactly
    if isinstance(value, np.generic):
        return value.item()
    return value


def _write_output(explanation, path):
    if path == "-":
        _write_csv(explanation, sys.stdout)
        return
    ext = os.path.splitext(path)[1].lower()
    with open(path, "w", newline="", encoding="utf-8") as out:
        if ext == ".json":
            json.dump(explanation.to_dict(), out)
        else:
            _write_csv(explanation, out)


def run_explain(args):
    """Explain every row of a CSV file with a saved model."""
    if args.out != "-" and os.path.splitext(args.out)[1].lower() not in (
        ".csv",
        ".json",
    ):
        raise _CLIError(f"--out must end in .csv or .json; got {args.out}")
    model = _load_model(args.model)
    names, X = _read_csv(args.data)
    X, names = _as_model_input(model, names, X)
    _check_columns(model, names, X)
    target = _resolve_target(model, args.target)
    explainer = _make_explainer(model, args)
    with warnings.catch_warnings():
        # The CSV carries no feature names the model could check.
        warnings.filterwarnings("ignore", message="X does not have valid feature")
        explainer.fit(X)
        explanation = _explain_in_chunks(explainer, X, target, args.chunk_size)
    explanation.feature_names = np.asarray(names, dtype=object)
    _write_output(explanation, args.out)
    if args.out != "-":
        print(f"wrote {len(explanation)} rows to {args.out}", file=sys.stderr)
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (no usage dump)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_explain(sub):
    explain = sub.add_parser(
        "explain",
        help="explain every row of a CSV file with a saved classifier or regressor",
        description="Explain every row of a CSV file with a saved classifier or "
        "regressor; "
        "the file itself is the background data the explainer is fitted on.",
    )
    explain.add_argument(
        "--model",
        required=True,
        help="joblib file of a fitted classifier with predict_proba, or of a "
        "fitted regressor. Loading "
        "it runs code stored in the file: only use files you trust.",
    )
    explain.add_argument(
        "--data",
        required=True,
        help="CSV file with a header line; one numeric column per feature",
    )
    explain.add_argument(
        "--method", choices=_METHODS, default="openapi", help="explainer"
    )
    explain.add_argument(
        "--target",
        default=None,
        help="class label to explain (default: the predicted class of each row)",
    )
    explain.add_argument("--n-jobs", type=int, default=None, help="parallel jobs")
    explain.add_argument("--random-state", type=int, default=0, help="seed")
    explain.add_argument(
        "--out",
        default="-",
        help="output file: .csv (one row per explained row) or .json "
        "(Explanation.to_dict); default: CSV on stdout",
    )
    explain.add_argument(
        "--num-samples",
        type=_positive_int,
        default=None,
        help="lime/slime: (first) neighbourhood size (default: the explainer's)",
    )
    explain.add_argument(
        "--n-max",
        type=_positive_int,
        default=None,
        help="slime: largest neighbourhood size (default: 10 x --num-samples)",
    )
    explain.add_argument(
        "--num-features",
        type=_positive_int,
        default=10,
        help="lime/slime: features per explanation",
    )
    explain.add_argument(
        "--chunk-size",
        type=_positive_int,
        default=200,
        help="rows explained between two progress lines on stderr",
    )
    explain.set_defaults(func=run_explain)


def build_parser():
    parser = _Parser(
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
    demo.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        help="also write the class-average decision-feature heatmaps (8x8) "
        "to this image file (needs matplotlib)",
    )
    demo.set_defaults(func=run_demo)
    _add_explain(sub)
    return parser


def main(argv=None):
    """Entry point of ``plm-explain``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # The reader of stdout went away (e.g. ``| head``): not an error of
        # the input. Point stdout at devnull so the interpreter's final flush
        # does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (_CLIError, ValueError, TypeError, OSError, ImportError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever the source
        print(f"plm-explain: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
