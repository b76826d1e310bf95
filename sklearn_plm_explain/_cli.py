"""The ``plm-explain`` command line."""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import collections
import csv
import json
import os
import sys
import time
import warnings

import numpy as np
from sklearn.base import is_regressor
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.validation import check_is_fitted

from sklearn_plm_explain import __version__
from sklearn_plm_explain._checkpoint import Checkpoint, CheckpointError
from sklearn_plm_explain._explanation import Explanation, count_statuses
from sklearn_plm_explain._ground_truth import local_linear_model
from sklearn_plm_explain._lime import LimeTabularExplainer
from sklearn_plm_explain._lime._stable import StableLIMEExplainer
from sklearn_plm_explain._openapi._explainer import OpenAPIExplainer
from sklearn_plm_explain._remote import RemoteModel
from sklearn_plm_explain.utils._anchors import make_anchor_model


def _all_class_errors(explanation, W):
    """Worst relative L1 error of D_c over all classes, per row."""
    centred = W - W.mean(axis=2, keepdims=True)
    num = np.abs(explanation.coef - centred).sum(axis=1)
    den = np.abs(centred).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, np.where(num > 0, np.inf, 0.0)).max(axis=1)


def run_demo(args):
    """Explain the digits MLP's whole test split and check every row."""
    if args.plot:
        _check_plot_target(args.plot)
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
    display.figure_.suptitle(
        "digits MLP: mean decision features of each class\n(slopes of the "
        "class's log-ratio to the other classes, per unit of pixel intensity)"
    )
    display.figure_.savefig(path, dpi=100)


def _check_plot_target(path):
    """Refuse, before any work, a --plot the end of the demo could not write."""
    try:
        import matplotlib
    except ImportError:
        raise _CLIError(
            "--plot needs matplotlib, which is not installed; install the plot "
            'extra: pip install "sklearn-plm-explain[plot]"'
        ) from None
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in formats:
        raise _CLIError(
            f"--plot {path}: unknown image format {ext!r}; use one of "
            + ", ".join(sorted(formats))
        )
    _check_writable(path, "--plot")


def _check_writable(path, option):
    """The file can be created (its folder exists and is writable)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise _CLIError(f"{option} {path} is a folder; give a file name")
    if not os.path.isdir(folder):
        raise _CLIError(f"{option} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (
        os.path.exists(path) and not os.access(path, os.W_OK)
    ):
        raise _CLIError(f"{option} {path}: no permission to write there")


def _flagged(status):
    failed = status[status != "exact"]
    if failed.size == 0:
        return "0"
    counts = count_statuses(failed)
    return f"{failed.size} (" + ", ".join(f"{c} {n}" for n, c in counts.items()) + ")"


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
            f"cannot load a model from {path}: not a file written by joblib.dump "
            f"or pickle, or written with other library versions "
            f"({type(exc).__name__}: {exc})"
        ) from None
    what = type(model).__name__
    if not (hasattr(model, "fit") and hasattr(model, "predict")):
        raise _CLIError(
            f"{path} holds a {what}, not a fitted scikit-learn model; save the "
            "fitted model itself with joblib.dump(model, path)"
        )
    try:
        check_is_fitted(model)
    except NotFittedError:
        raise _CLIError(
            f"the {what} in {path} is not fitted; call its fit method before "
            "saving it with joblib.dump"
        ) from None
    except (TypeError, AttributeError):
        pass  # a model outside scikit-learn's conventions: used as it is
    if not (_is_regressor(model) or hasattr(model, "predict_proba")):
        raise _CLIError(
            f"the model in {path} ({what}) has no predict_proba "
            "and is not a regressor; explain needs a classifier that gives "
            "probabilities or a regressor"
        )
    return model


def _is_regressor(model):
    try:
        return is_regressor(model)
    except (AttributeError, TypeError):  # no scikit-learn tags
        return False


def _read_csv(path):
    """Numeric rows of a CSV file with a header line: ``(names, X)``.

    Rows are parsed as they are read (a file of many rows never holds all
    its text as Python strings at once); a bad cell is named.
    """
    if not os.path.isfile(path):
        raise _CLIError(f"data file not found: {path}")
    header, rows = None, []
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                if not row:
                    continue
                if header is None:
                    header = [name.strip() for name in row]
                else:
                    rows.append(_parse_row(row, header, path, len(rows)))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise _CLIError(f"bad CSV {path}: {exc}") from None
    if not rows:
        raise _CLIError(f"bad CSV {path}: needs a header line and at least one row")
    return header, np.vstack(rows)


def _parse_row(row, header, path, i):
    if len(row) != len(header):
        raise _CLIError(
            f"bad CSV {path}: data row {i + 1} has {len(row)} fields, "
            f"the header has {len(header)}"
        )
    try:
        values = np.array(row, dtype=np.float64)
    except ValueError:
        values = None
    if values is None or not np.isfinite(values).all():
        # Name the first bad cell.
        values = np.array(
            [_number(cell, path, i, header[j]) for j, cell in enumerate(row)]
        )
    return values


def _number(cell, path, i, column):
    """The finite number in one CSV cell, or an error naming the cell."""
    where = f"bad CSV {path}: data row {i + 1}, column {column!r}"
    if not cell.strip():
        raise _CLIError(f"{where} is empty; every cell needs a number")
    try:
        value = float(cell)
    except ValueError:
        raise _CLIError(f"{where}: {cell!r} is not a number") from None
    if not np.isfinite(value):
        raise _CLIError(f"{where}: {cell!r} is not a finite number")
    return value


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


def _make_explainer(model, args, names):
    # At a terminal a live bar shows each chunk's rows, rate and time left;
    # in a pipe or a log the per-chunk lines of _explain_in_chunks suffice.
    common = {
        "n_jobs": args.n_jobs,
        "random_state": args.random_state,
        "verbose": int(sys.stderr.isatty()),
    }
    if args.method == "openapi":
        return OpenAPIExplainer(model, **common)
    lime_kw = dict(common, num_features=args.num_features, feature_names=names)
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


def _explain_in_chunks(explainer, X, target, chunk_size, sink, checkpoint=None):
    """Explain ``X`` chunk by chunk into ``sink``, reporting progress on stderr.

    Each finished chunk goes to ``sink`` at once (a CSV output is written
    as the rows finish: memory does not grow with the number of rows, and
    the rows finished before a failure are in the file). With
    ``checkpoint`` (a directory) every finished chunk is kept there, and a
    later run of the same command resumes from it. The rows are those of
    one ``explain_chunked`` call, whatever the chunk size.
    """
    n = X.shape[0]

    def progress(done, total, reused):
        note = " (from the checkpoint)" if reused else ""
        print(f"explained {done}/{total} rows{note}", file=sys.stderr, flush=True)

    store = None
    if checkpoint is not None:
        store = Checkpoint(checkpoint, chunk_size=chunk_size, progress=progress)
        chunk_size = None
    with warnings.catch_warnings():
        # The statuses are in the output; one summary line replaces the
        # warnings.
        warnings.simplefilter("ignore", ConvergenceWarning)
        chunks = explainer.explain_chunked(
            X, target=target, chunk_size=chunk_size, checkpoint=store
        )
        try:
            for part in chunks:
                sink.write(part)
                if store is None:
                    progress(sink.rows, n, False)
        except Exception as err:
            # Say where the finished rows are: in the CSV output, and in the
            # checkpoint for the same command to resume from.
            notes = []
            if sink.rows and not sink.json:
                notes.append(
                    f"The {sink.rows} rows finished before this chunk are in "
                    f"{sink.name}."
                )
            if store is not None and not isinstance(err, CheckpointError):
                notes.append(
                    f"The rows finished so far are kept in {checkpoint}: run the "
                    "same command again to resume."
                )
            if not notes:
                raise
            raise _CLIError(" ".join([_one_line(err), *notes])) from None
    summary = ", ".join(f"{k} {v}" for k, v in sorted(sink.counts.items()))
    print(f"statuses: {summary}", file=sys.stderr)


class _Sink:
    """Where the explained rows go: CSV rows as each chunk finishes, or one
    JSON document (``Explanation.to_dict``) at the end."""

    def __init__(self, path, feature_names):
        self.path, self.names = path, np.asarray(feature_names, dtype=object)
        self.name = "standard output" if path == "-" else path
        self.json = path != "-" and os.path.splitext(path)[1].lower() == ".json"
        self.parts, self.header, self.rows = [], None, 0
        self.counts = collections.Counter()
        self.file = None

    def __enter__(self):
        if self.path == "-":
            self.file = sys.stdout
        else:
            self.file = open(self.path, "w", newline="", encoding="utf-8")
        self.csv = csv.writer(self.file, lineterminator="\n")
        return self

    def __exit__(self, *exc):
        if self.json and exc[0] is None and self.parts:
            json.dump(Explanation.concat(self.parts).to_dict(), self.file)
        if self.file is sys.stdout:
            self.file.flush()
            return
        self.file.close()
        if exc[0] is not None and (self.json or not self.rows):
            # A failure before any row was written leaves no file behind.
            os.remove(self.path)

    def write(self, explanation):
        explanation.feature_names = self.names
        self.counts.update(explanation.status_counts())
        self.rows += len(explanation)
        if self.json:
            self.parts.append(explanation)
            return
        columns = explanation._wide_columns()
        names = [name for name, _ in columns]
        if self.header is None:
            self.header = names
            self.csv.writerow(names)
        elif names != self.header:
            # Never shift a column under another one's header.
            raise _CLIError(
                f"the explanation's columns changed between chunks ({names[:3]}... "
                f"vs {self.header[:3]}...); use --out with a .json file"
            )
        for i in range(len(explanation)):
            self.csv.writerow([_cell(col[i]) for _, col in columns])
        self.file.flush()


def _cell(value):
    if isinstance(value, (float, np.floating)):
        return repr(float(value))  # shortest text that reads back exactly
    if isinstance(value, np.generic):
        return value.item()
    return value


def run_explain(args):
    """Explain every row of a CSV file with a saved model."""
    if args.out != "-":
        if os.path.splitext(args.out)[1].lower() not in (".csv", ".json"):
            raise _CLIError(f"--out must end in .csv or .json; got {args.out}")
        _check_writable(args.out, "--out")
    model = _load_model(args.model) if args.url is None else None
    names, X = _read_csv(args.data)
    if model is None:
        model = _remote_model(args, names)
    X, names = _as_model_input(model, names, X)
    _check_columns(model, names, X)
    target = _resolve_target(model, args.target)
    explainer = _make_explainer(model, args, names)
    try:
        with warnings.catch_warnings():
            # The CSV carries no feature names the model could check.
            warnings.filterwarnings("ignore", message="X does not have valid feature")
            explainer.fit(X)
            with _Sink(args.out, names) as sink:
                _explain_in_chunks(
                    explainer, X, target, args.chunk_size, sink, args.checkpoint
                )
    finally:
        if isinstance(model, RemoteModel):
            print(_remote_summary(explainer, model), file=sys.stderr)
            model.close()
    if args.out != "-":
        print(f"wrote {sink.rows} rows to {args.out}", file=sys.stderr)
    return 0


def _remote_model(args, names):
    """The served model of ``--url``, as the options describe it."""
    headers = {}
    for text in args.header or []:
        name, sep, value = text.partition(":")
        if not sep or not name.strip():
            # Never echo the text: it may hold a secret.
            raise _CLIError("--header must look like 'Name: value'")
        headers[name.strip()] = value.strip()
    classes = None
    if args.classes is not None:
        classes = [c.strip() for c in args.classes.split(",")]
        try:
            classes = [int(c) for c in classes]
        except ValueError:
            pass
    return RemoteModel(
        args.url,
        protocol=args.protocol,
        headers=headers or None,
        timeout=args.timeout,
        max_batch_rows=args.max_batch_rows,
        max_concurrency=args.max_concurrency,
        max_retries=args.max_retries,
        max_queries=args.max_queries,
        model_name=args.model_name,
        output_name=args.output_name,
        classes=classes,
        columns=names if args.columns else None,
    )


def _remote_summary(explainer, model):
    # The explainer's own (fitted) copy did the work.
    served = getattr(explainer, "estimator_", model)
    stats = served.stats if isinstance(served, RemoteModel) else model.stats
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(stats.retry_reasons.items()))
    return (
        f"remote: {stats.requests} requests, {stats.rows_sent} rows sent, "
        f"{stats.retries} retries" + (f" ({reasons})" if reasons else "") + ", "
        f"{stats.wait_seconds:.1f} s waiting, {stats.bytes_sent} bytes sent"
    )


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (no usage dump)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _n_jobs(text):
    value = int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(
            "0 jobs cannot run anything; use 1 (no parallelism), a number of "
            "processes, or -1 for one per CPU"
        )
    return value


def _seed(text):
    value = int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(
            f"must be between 0 and {2**32 - 1}, got {value}"
        )
    return value


def _add_run_options(parser):
    """The options every explaining command takes: jobs and seed."""
    parser.add_argument(
        "--n-jobs", type=_n_jobs, default=None, help="parallel jobs (-1: one per CPU)"
    )
    parser.add_argument("--random-state", type=_seed, default=0, help="seed")


def _add_explain(sub):
    explain = sub.add_parser(
        "explain",
        help="explain every row of a CSV file with a saved classifier or regressor",
        description="Explain every row of a CSV file with a saved classifier or "
        "regressor; "
        "the file itself is the background data the explainer is fitted on.",
    )
    source = explain.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        help="joblib file of a fitted classifier with predict_proba, or of a "
        "fitted regressor. Loading "
        "it runs code stored in the file: only use files you trust.",
    )
    source.add_argument(
        "--url",
        help="address of a served model instead of a file (see --protocol); "
        "it answers with class probabilities",
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
    _add_run_options(explain)
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
        help="rows explained between two progress lines on stderr (and per "
        "checkpoint chunk with --checkpoint)",
    )
    explain.add_argument(
        "--checkpoint",
        metavar="DIR",
        default=None,
        help="keep every finished chunk of rows in this directory; the same "
        "command run again resumes where it stopped, without querying the "
        "finished rows again",
    )
    remote = explain.add_argument_group("served models (with --url)")
    remote.add_argument(
        "--protocol",
        choices=("mlflow", "v2", "json"),
        default="mlflow",
        help="mlflow: MLflow's scoring server (POST /invocations); v2: the Open "
        "Inference Protocol (KServe, Seldon MLServer, Triton); json: rows in, "
        "probability rows out",
    )
    remote.add_argument(
        "--header",
        action="append",
        metavar="'NAME: VALUE'",
        help="HTTP header sent with every request, e.g. 'Authorization: Bearer "
        "...' (repeatable; never printed or written to a checkpoint)",
    )
    remote.add_argument("--model-name", default=None, help="v2: the model's name")
    remote.add_argument(
        "--output-name", default=None, help="v2: the output tensor to ask for"
    )
    remote.add_argument(
        "--classes",
        default=None,
        help="comma-separated class labels, in the order of the answer's "
        "columns (default 0, 1, ...)",
    )
    remote.add_argument(
        "--columns",
        action="store_true",
        help="send the CSV header as column names (mlflow: dataframe_split)",
    )
    remote.add_argument(
        "--max-batch-rows", type=_positive_int, default=1000, help="rows per request"
    )
    remote.add_argument(
        "--max-concurrency",
        type=_positive_int,
        default=4,
        help="requests in flight at once",
    )
    remote.add_argument(
        "--max-retries", type=int, default=5, help="retries of a failed request"
    )
    remote.add_argument(
        "--timeout", type=float, default=30.0, help="seconds per request"
    )
    remote.add_argument(
        "--max-queries",
        type=_positive_int,
        default=None,
        help="budget of rows sent: stop before a request would exceed it",
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
    _add_run_options(demo)
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
    except KeyboardInterrupt:
        print("plm-explain: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - every failure is one line
        print(f"plm-explain: error: {_one_line(exc)}", file=sys.stderr)
        return 2


def _one_line(exc):
    """The message of an error on one line; unexpected kinds carry their name
    (a model failing inside predict_proba, say), ours and the usual ones
    (bad values, missing files) speak for themselves."""
    message = " ".join(str(exc).split()) or "(no message)"
    if isinstance(exc, (_CLIError, ValueError, TypeError, OSError, ImportError)):
        return message
    return f"{type(exc).__name__}: {message}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
