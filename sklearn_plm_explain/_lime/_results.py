"""Per-row results of LIME and the Explanation assembled from them."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain._lime._output import Presentation

# Fields with one entry per explained label.
_LABEL_FIELDS = (
    "labels",
    "label_values",
    "label_intercept",
    "label_score",
    "label_local_pred",
)


# Every status a row of the LIME explainers can get.
STATUSES = ("converged", "few_effective_samples", "n_max_reached", "not_run", "tied")


def row_result(space, k, fits, labels, n, *, regression, status, n_rounds, **kw):
    """Per-row arrays of one row's surrogates (one per explained label).

    ``k`` is the width of ``selected``; ``kw`` holds ``converged``,
    ``effective_samples`` and ``order`` (keep the selection order, else sort
    by |weight|).
    """
    d = space.d
    L = len(fits)
    values = np.zeros((L, d))
    selected = np.full((L, k), -1, dtype=np.intp)
    inter, score, pred = np.zeros(L), np.zeros(L), np.zeros(L)
    perm = space.perm
    order = kw.get("order")
    for j, (S, (coef, b0, sc, lp)) in enumerate(fits):
        # Internal column positions back to the original columns.
        values[j, perm[S]] = coef
        seq = S if order is not None else S[np.argsort(-np.abs(coef), kind="stable")]
        selected[j, : min(k, seq.size)] = perm[seq[:k]]
        inter[j], score[j], pred[j] = b0, sc, lp
    return {
        "values": values[0],
        "target": labels[0] if not regression else 0,
        "selected": selected[0],
        "intercept": inter[0],
        "score": score[0],
        "local_pred": pred[0],
        "n_samples": n,
        "n_queries": n,
        "n_rounds": n_rounds,
        "effective_samples": kw.get("effective_samples", np.nan),
        "converged": kw["converged"],
        "status": status,
        "labels": labels,
        "label_values": values,
        "label_intercept": inter,
        "label_score": score,
        "label_local_pred": pred,
    }


def not_run_result(d, k, extra, regression):
    """The per-row result of a row not explained (the model failed first)."""
    labels = np.concatenate([[0], extra]).astype(np.intp)
    if regression:
        labels = np.array([0], dtype=np.intp)
    L = labels.size
    return {
        "values": np.full(d, np.nan),
        "target": 0,
        "selected": np.full(k, -1, dtype=np.intp),
        "intercept": np.nan,
        "score": np.nan,
        "local_pred": np.nan,
        "n_samples": 0,
        "n_queries": 0,
        "n_rounds": 0,
        "effective_samples": np.nan,
        "converged": False,
        "status": "not_run",
        "labels": labels,
        "label_values": np.full((L, d), np.nan),
        "label_intercept": np.full(L, np.nan),
        "label_score": np.full(L, np.nan),
        "label_local_pred": np.full(L, np.nan),
    }


def partial_rows(parts, done, template, bounds):
    """Per-row results of rows ``start:stop`` when the model failed midway.

    ``parts`` are the stacked results of the steps that finished, ``done``
    the start and per-row results (``None``: not finished) of the failing
    slice; every other row is ``template`` (not run).
    """
    start, stop = bounds
    rows = [template] * (stop - start)
    offset = 0
    for part in parts:
        for i in range(len(part["status"])):
            rows[offset + i] = {k: part[k][i] for k in template}
        offset += len(part["status"])
    # Rows of the failing slice that finished before the failure.
    first, results = done
    for i, res in enumerate(results):
        if res is not None:
            rows[first - start + i] = res
    return rows


def stack_rows(results):
    """Per-row result dicts stacked into arrays, one per field."""
    keys = results[0].keys()
    out = {}
    for k in keys:
        vals = [r[k] for r in results]
        if k in _LABEL_FIELDS:
            out[k] = np.stack(vals)
        else:
            out[k] = np.asarray(vals)
    out["status"] = out["status"].astype(str)
    out["converged"] = out["converged"].astype(bool)
    return out


def presented(space, feature_names, out, rows, x_code, z0, X_orig):
    """What readers see: labels with their condition, contributions.

    ``contribution`` is each weight times the row's interpretable value
    minus its training mean, ``baseline`` the surrogate at that mean, so
    ``baseline + contribution.sum(1) == local_pred``; ``standardized`` is
    each weight times the training std of its interpretable feature.
    """
    pres = Presentation(space, feature_names)
    z, mean, std = pres.reference(x_code[rows], z0[rows])
    values = out["values"]
    contribution = values * (z - mean)
    return {
        "selected_names": pres.selected_names(
            out["selected"], x_code[rows], X_orig[rows]
        ),
        "data": X_orig[rows],
        "contribution": contribution,
        "standardized": values * std,
        "baseline": out["local_pred"] - contribution.sum(axis=1),
    }


def as_explanation(rows, keep_labels, **meta):
    """An Explanation of per-row results (a list of them, or stacked);
    ``meta``: ``classes``, ``feature_names``, ``method``, ``params``."""
    if isinstance(rows, list):
        rows = stack_rows(rows)
    if not keep_labels:
        rows = {
            k: v
            for k, v in rows.items()
            if not (k.startswith("label_") or k == "labels")
        }
    return Explanation(**meta, **rows)
