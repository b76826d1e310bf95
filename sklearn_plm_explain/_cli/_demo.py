"""``plm-explain demo``: the digits MLP explained from queries and checked
against its own weights, with an optional picture of the class averages."""

# SPDX-License-Identifier: BSD-3-Clause

import os
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain._cli._data import CLIError
from sklearn_plm_explain._cli._explain import check_writable, flagged_note
from sklearn_plm_explain._ground_truth import local_linear_model
from sklearn_plm_explain._openapi._explainer import OpenAPIExplainer
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
        ("flagged (not exact)", flagged_note(explanation.status)),
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
        raise CLIError(
            "--plot needs matplotlib, which is not installed; install the plot "
            'extra: pip install "sklearn-plm-explain[plot]"'
        ) from None
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in formats:
        raise CLIError(
            f"--plot {path}: unknown image format {ext!r}; use one of "
            + ", ".join(sorted(formats))
        )
    check_writable(path, "--plot")
