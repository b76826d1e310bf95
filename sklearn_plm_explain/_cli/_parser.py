"""The ``plm-explain`` command line."""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import os
import sys

from sklearn_plm_explain import __version__
from sklearn_plm_explain._cli._data import one_line
from sklearn_plm_explain._cli._demo import run_demo
from sklearn_plm_explain._cli._explain import METHODS, run_explain
from sklearn_plm_explain._cli._serve import run_serve


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


def _add_model_options(parser, what):
    """The model (a file or a URL) and the rows' CSV file."""
    source = parser.add_mutually_exclusive_group(required=True)
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
    parser.add_argument(
        "--data",
        required=True,
        help=f"CSV file with a header line; one numeric column per feature ({what})",
    )
    parser.add_argument(
        "--no-header",
        action="store_true",
        help="the CSV file has no header line: every line is a row, the "
        "columns are x0, x1, ... (for a model fitted without feature names)",
    )
    parser.add_argument(
        "--method", choices=METHODS, default="openapi", help="explainer"
    )
    _add_run_options(parser)
    parser.add_argument(
        "--num-samples",
        type=_positive_int,
        default=None,
        help="lime/slime: (first) neighbourhood size (default: the explainer's)",
    )
    parser.add_argument(
        "--n-max",
        type=_positive_int,
        default=None,
        help="slime: largest neighbourhood size (default: 10 x --num-samples)",
    )
    parser.add_argument(
        "--num-features",
        type=_positive_int,
        default=10,
        help="lime/slime: features per explanation",
    )


def _add_remote_options(parser):
    """How a served model (``--url``) is reached."""
    remote = parser.add_argument_group("served models (with --url)")
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
    return remote


def _add_explain(sub):
    explain = sub.add_parser(
        "explain",
        help="explain every row of a CSV file with a saved classifier or regressor",
        description="Explain every row of a CSV file with a saved classifier or "
        "regressor; "
        "the file itself is the background data the explainer is fitted on.",
    )
    _add_model_options(explain, "the rows explained, and the background data")
    explain.add_argument(
        "--target",
        default=None,
        help="class label to explain (default: the predicted class of each row)",
    )
    explain.add_argument(
        "--out",
        default="-",
        help="output file: .csv (one row per explained row) or .json "
        "(Explanation.to_dict); default: CSV on stdout",
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
    remote = _add_remote_options(explain)
    remote.add_argument(
        "--max-queries",
        type=_positive_int,
        default=None,
        help="budget of rows sent: stop before a request would exceed it",
    )
    explain.set_defaults(func=run_explain)


def _add_serve(sub):
    serve = sub.add_parser(
        "serve",
        help="serve explanations over HTTP (KServe V1 :explain, V2 infer, jobs)",
        description="Serve explanations of a saved or served model over HTTP: "
        "POST /v1/models/NAME:explain, POST /v2/models/NAME/infer, and jobs "
        "for long batches (POST /v1/models/NAME/jobs, GET /v1/jobs/ID). The "
        "explainer is fitted once, on --data, at start.",
    )
    _add_model_options(serve, "the background data the explainer is fitted on")
    serve.add_argument("--name", default="model", help="the model name in the routes")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument("--port", type=_port, default=8080, help="port to listen on")
    serve.add_argument(
        "--max-explanations",
        type=_positive_int,
        default=2,
        help="explanations running at once; more requests get HTTP 503",
    )
    serve.add_argument(
        "--max-rows",
        type=_positive_int,
        default=10_000,
        help="most rows one request may explain (HTTP 413 beyond)",
    )
    remote = _add_remote_options(serve)
    remote.add_argument(
        "--max-queries",
        type=_positive_int,
        default=None,
        help="budget of rows one explanation request may send to the served "
        "model (HTTP 429 with the finished rows beyond)",
    )
    serve.set_defaults(func=run_serve)


def _port(text):
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (1 to 65535)")
    return value


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
    _add_serve(sub)
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
        print(f"plm-explain: error: {one_line(exc)}", file=sys.stderr)
        summary = getattr(exc, "remote_summary", None)
        if summary:
            print(summary, file=sys.stderr)
        return 2
