"""What each row's status means, and the one warning about rows not
certified exact."""

# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain._explanation import count_statuses

STATUSES = {
    "exact": "certified: the local linear model is exact to rtol for every class "
    "(error_bound <= rtol)",
    "approximate": "certified to error_bound, which exceeds rtol: the responses "
    "are coarser than float64 (float32, rounded to decimals, or noisy), and the "
    "cubes the residual test accepts resolve the slopes only that far; "
    "error_bound bounds the relative L1 error of every class's slope",
    "saturated": "a probability has underflowed (0, or below the smallest normal "
    "number of the response precision, e.g. rounded to 0), is held at a floor or "
    "clip, or is so close to 0 that it is only known as 1 minus the others, too "
    "imprecisely to resolve the slope; values are NaN when no cube gave an "
    "estimate",
    "imprecise": "the responses are too imprecise to resolve the slope even on "
    "the largest cube tried, and no cube showed a kink",
    "boundary": "the row is too close to a boundary between linear regions: "
    "every cube small enough to stay in its region is too small to resolve "
    "the slope at the response precision",
    "not_piecewise_linear": "the responses are not those of a piecewise-linear "
    "model at their precision: residuals that fall like the square of the radius "
    "(a smooth, curved model, or probabilities smoothed by the service), or "
    "float64 probabilities whose sum misses 1 by more than their rounding",
    "flat": "the responses are bitwise identical all around the row (a dead "
    "region, e.g. every unit of a ReLU layer off; for responses coarser than "
    "float64, on the largest cube): the slopes are zero to within the response "
    "precision, which has no relative error to certify",
    "not_run": "not explained because the model failed on another row first",
}


def _warn_failures(status, stacklevel):
    failed = status != "exact"
    if not failed.any():
        return
    summary = ", ".join(f"{c} {s}" for s, c in count_statuses(status[failed]).items())
    rows = np.flatnonzero(failed)
    shown = ", ".join(map(str, rows[:10])) + (" ..." if rows.size > 10 else "")
    note = ""
    if (status == "approximate").any():
        note = " Approximate rows are certified to their error_bound."
    warnings.warn(
        f"{failed.sum()} of {status.size} rows were not certified exact "
        f"({summary}; rows {shown}). Their values are best estimates; see "
        f"Explanation.status and error_bound.{note}",
        ConvergenceWarning,
        stacklevel=stacklevel,
    )
