"""What every measure shares: uncertified rows left out (with a warning)
or kept, per-row values reduced, and the local models a measure compares."""

# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
from sklearn.utils._param_validation import (
    HasMethods,
    StrOptions,
)

from sklearn_plm_explain._explanation import Explanation


class UncertifiedRowsWarning(UserWarning):
    """Rows an explainer could not certify were left out of a measure."""


def _attributions(values, uncertified, name):
    """``(V, keep)``: the attributions as floats and the rows to use."""
    if isinstance(values, Explanation):
        V = np.asarray(values.values, dtype=np.float64)
        keep = ~values.flagged if uncertified == "drop" else np.ones(len(V), bool)
        return V, keep
    V = np.asarray(values, dtype=np.float64)
    if V.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got {V.shape}.")
    return V, np.ones(len(V), dtype=bool)


def _warn_left_out(keep, *explanations):
    left_out = int((~keep).sum())
    if not left_out:
        return
    counts = {}
    for e in explanations:
        if isinstance(e, Explanation) and "status" in e.fields:
            for s in np.asarray(e.status)[e.flagged & ~keep]:
                counts[str(s)] = counts.get(str(s), 0) + 1
    detail = ", ".join(f"{c} {s}" for s, c in sorted(counts.items()))
    warnings.warn(
        f"{left_out} of {keep.size} rows were left out: not certified"
        + (f" ({detail})" if detail else "")
        + ". Pass uncertified='keep' to include their best estimates.",
        UncertifiedRowsWarning,
        # This helper, the metric, its parameter validation, the caller.
        stacklevel=4,
    )


def _reduce(per_row_values, keep, per_row):
    """Per-row values (NaN where not kept), or their mean over the kept rows."""
    out = np.where(keep, per_row_values, np.nan)
    if per_row:
        return out
    return float(out[keep].mean()) if keep.any() else float("nan")


def _has_points(points):
    return np.array([len(P) > 0 for P in points], dtype=bool)


def _local_models(estimator, X):
    """Local models at the rows of ``X``: ``(W_g, b, group)``.

    ``W_g[group[i]]`` are row ``i``'s slopes: distinct local models are held
    once (a ReLU network's activation patterns, a tree's leaves), which keeps
    thousands of points at image width cheap.
    """
    from sklearn_plm_explain._ground_truth import _grouped_local_linear_model

    if hasattr(estimator, "fit") or not callable(estimator):
        W, b, group = _grouped_local_linear_model(estimator, X)
    else:
        W, b = estimator(X)
        group = np.arange(np.shape(W)[0])
    W, b = np.asarray(W, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if W.ndim != 3 or b.shape != (len(X), W.shape[2]):
        raise ValueError(
            "The local model must be W of shape (n, n_features, n_outputs) and b "
            f"of shape (n, n_outputs); got {W.shape} and {b.shape}."
        )
    return W, b, group


# Largest number of point coordinates whose local models are read in one call.
_COORDINATES_PER_CALL = 1 << 21


def _row_models(estimator, X, points, rows):
    """For each row in ``rows``: ``(i, W, b, g)`` with the local models of
    the row (``g[0]``) and of its points (``g[1:]``) as groups of ``W``.

    Rows are read together, a few thousand points per call, so that the
    validation and the per-call work of the model are paid rarely; the row
    and its points share one call, so a point with the row's local model
    gets it bitwise (the same group).
    """
    block, size = [], 0
    budget = max(1, _COORDINATES_PER_CALL // max(X.shape[1], 1))
    for i in rows:
        block.append(i)
        size += len(points[i]) + 1
        if size >= budget or i == rows[-1]:
            stacked = np.vstack([np.vstack([X[j], points[j]]) for j in block])
            W, b, group = _local_models(estimator, stacked)
            start = 0
            for j in block:
                stop = start + len(points[j]) + 1
                yield j, W, b[start:stop], group[start:stop]
                start = stop
            block, size = [], 0


def _core(W, b):
    """Core parameters: slopes and intercepts centred across the outputs.

    They fix every pairwise ``D_{c,c'} = W_c - W_c'`` and ``B_{c,c'}`` (and
    nothing else), so two local classifiers agree on them exactly when they
    give the same probabilities everywhere. One output (regression): as is.
    """
    if W.shape[-1] == 1:
        return W, b
    return W - W.mean(axis=-1, keepdims=True), b - b.mean(axis=-1, keepdims=True)


def _queries_of(X, queries, uncertified):
    """``(X, list of point arrays, keep, explanation or None)``."""
    X = np.asarray(X, dtype=np.float64)
    explanation = None
    if isinstance(queries, Explanation):
        explanation = queries
        if "queries" not in queries.fields:
            raise ValueError(
                "The Explanation has no queries; explain with return_queries=True."
            )
        keep = ~queries.flagged if uncertified == "drop" else np.ones(len(X), bool)
        queries = queries.queries
    else:
        keep = np.ones(len(X), dtype=bool)
    points = [np.asarray(q, dtype=np.float64).reshape(-1, X.shape[1]) for q in queries]
    if X.ndim != 2 or len(points) != len(X):
        raise ValueError(
            f"X must be 2-D with one row per entry of queries; got X of shape "
            f"{X.shape} and {len(points)} query sets."
        )
    return X, points, keep, explanation


_UNCERTIFIED = [StrOptions({"drop", "keep"})]


_VALUES = [Explanation, "array-like"]


_LOCAL_MODEL = [HasMethods(["fit"]), callable]


def _predict_proba(model, X):
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        import pandas as pd

        X = pd.DataFrame(X, columns=list(names))
    fn = model.predict_proba if hasattr(model, "predict_proba") else model
    return np.asarray(fn(X), dtype=np.float64)
