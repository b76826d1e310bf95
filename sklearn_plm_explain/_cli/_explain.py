"""``plm-explain explain``: the explainer built from the options, rows
explained a chunk at a time, each chunk written out as it finishes."""

# SPDX-License-Identifier: BSD-3-Clause

import collections
import csv
import json
import os
import sys
import warnings

import numpy as np
from sklearn.base import is_regressor
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain._checkpoint import Checkpoint, CheckpointError
from sklearn_plm_explain._cli._data import (
    CLIError,
    _as_model_input,
    _check_columns,
    _load_model,
    _read_csv,
    _resolve_target,
    one_line,
)
from sklearn_plm_explain._explanation import Explanation, count_statuses
from sklearn_plm_explain._lime import LimeTabularExplainer
from sklearn_plm_explain._lime._stable import StableLIMEExplainer
from sklearn_plm_explain._openapi._explainer import OpenAPIExplainer
from sklearn_plm_explain._remote import RemoteModel


def check_writable(path, option):
    """The file can be created (its folder exists and is writable)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CLIError(f"{option} {path} is a folder; give a file name")
    if not os.path.isdir(folder):
        raise CLIError(f"{option} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (
        os.path.exists(path) and not os.access(path, os.W_OK)
    ):
        raise CLIError(f"{option} {path}: no permission to write there")


def flagged_note(status):
    failed = status[status != "exact"]
    if failed.size == 0:
        return "0"
    counts = count_statuses(failed)
    return f"{failed.size} (" + ", ".join(f"{c} {n}" for n, c in counts.items()) + ")"


METHODS = ("openapi", "slime", "lime")


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
            raise CLIError(" ".join([one_line(err), *notes])) from None
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
            raise CLIError(
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
            raise CLIError(f"--out must end in .csv or .json; got {args.out}")
        check_writable(args.out, "--out")
    model = _load_model(args.model) if args.url is None else None
    names, X = _read_csv(args.data, header=not args.no_header)
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
    except Exception as exc:
        if isinstance(model, RemoteModel):
            # After the error line, and only if a request was sent.
            exc.remote_summary = _remote_summary(explainer, model, failed=True)
        raise
    finally:
        if isinstance(model, RemoteModel):
            model.close()
    if isinstance(model, RemoteModel):
        print(_remote_summary(explainer, model), file=sys.stderr)
    if args.out != "-":
        print(f"wrote {sink.rows} rows to {args.out}", file=sys.stderr)
    return 0


def _remote_model(args, names, budget=True):
    """The served model of ``--url``, as the options describe it (with the
    run's ``--max-queries`` unless ``budget`` is False)."""
    headers = {}
    for text in args.header or []:
        name, sep, value = text.partition(":")
        if not sep or not name.strip():
            # Never echo the text: it may hold a secret.
            raise CLIError("--header must look like 'Name: value'")
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
        max_queries=args.max_queries if budget else None,
        model_name=args.model_name,
        output_name=args.output_name,
        classes=classes,
        columns=names if args.columns else None,
    )


def _remote_summary(explainer, model, failed=False):
    """The line on the requests a run sent; None for a failed run that sent
    none (its error says all)."""
    # The explainer's own (fitted) copy did the work.
    served = getattr(explainer, "estimator_", model)
    stats = served.stats if isinstance(served, RemoteModel) else model.stats
    if failed and stats.requests == 0:
        return None
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(stats.retry_reasons.items()))
    return (
        f"remote: {stats.requests} requests, {stats.rows_sent} rows sent, "
        f"{stats.retries} retries" + (f" ({reasons})" if reasons else "") + ", "
        f"{stats.wait_seconds:.1f} s waiting, {stats.bytes_sent} bytes sent"
    )
