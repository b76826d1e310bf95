"""The rows OpenAPI perturbs: the numeric part of a frame, each feature's
step scale, and rows too large for any step to move them."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils.validation import check_array, validate_data

from sklearn_plm_explain._openapi._fit import MAX_DESIGN_ERROR
from sklearn_plm_explain._utils._validation import is_numeric_dtype

# A feature whose spread in fit is at most this fraction of its magnitude is
# constant (the spread is rounding): 2^10 float64 epsilons.
_CONSTANT_SPREAD = 2.0**10 * np.finfo(np.float64).eps


def numeric_part(explainer, X, reset):
    """The numeric columns of ``X`` as floats, and the frame if it is mixed.

    Data with non-numeric (string, categorical) columns must come as a
    DataFrame; only its numeric columns are perturbed and explained, the
    others are held at each row's own values.
    """
    if not _has_text_columns(X):
        if not reset and getattr(explainer, "numeric_features_", None) is not None:
            raise ValueError(
                "This explainer was fitted on a DataFrame with non-numeric "
                "columns; pass rows as a DataFrame with the same columns."
            )
        if reset:
            explainer.numeric_features_ = None
        X = validate_data(
            explainer, X, dtype=np.float64, reset=reset, ensure_min_samples=1
        )
        return X, None
    validate_data(explainer, X, skip_check_array=True, reset=reset)
    if reset:
        explainer.numeric_features_ = np.array(
            [c for c in X.columns if is_numeric_dtype(X[c].dtype)], dtype=object
        )
    numeric = list(explainer.numeric_features_)
    others = [c for c in X.columns if c not in numeric]
    missing = [c for c in others if X[c].isna().any()]
    if missing:
        raise ValueError(f"Input X has missing values in column(s) {missing}.")
    values = check_array(X[numeric].to_numpy(), dtype=np.float64)
    return values, X.reset_index(drop=True)


def check_steps(X, step):
    """Refuse, before any query, rows whose values are so large that even
    the largest cube's step is lost to their rounding: every design drawn
    around them would be singular."""
    lost = np.abs(X) * np.finfo(np.float64).eps > MAX_DESIGN_ERROR * step
    if lost.any():
        rows = np.flatnonzero(lost.any(axis=1))
        j = int(np.flatnonzero(lost[rows[0]])[0])
        raise ValueError(
            f"Rows {rows[:10].tolist()}{' ...' if rows.size > 10 else ''} "
            f"have values too large for their cube's steps (row {rows[0]}, "
            f"feature {j}: {X[rows[0], j]:.3g} against a largest step of "
            f"{step[j]:.3g}); rescale or centre the data, or pass a larger "
            "scale."
        )


def feature_scale(X, scale, n_features):
    if isinstance(scale, str):
        scale = column_std(X)
        # A column held at one value has a spread of its rounding errors
        # (about eps times its magnitude), not 0: it is constant too.
        constant = scale <= _CONSTANT_SPREAD * np.abs(X).max(axis=0)
        scale = np.where(constant, 0.0, scale)
        positive = scale[scale > 0]
        fallback = np.median(positive) if positive.size else 1.0
        # A constant feature still needs a step: its slope is part of
        # the local model even if the training data never moved it.
        return np.where(scale > 0, scale, fallback)
    scale = np.asarray(scale, dtype=np.float64)
    if scale.shape != (n_features,) or not np.all(scale > 0):
        raise ValueError(
            f"scale must be 'std' or {n_features} positive numbers; "
            f"got shape {scale.shape}."
        )
    return scale


def _has_text_columns(X):
    """A DataFrame with at least one column that is not numeric."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "columns"):
        return False
    return not all(is_numeric_dtype(X[c].dtype) for c in X.columns)


def _check_queries_and_checkpoint(return_queries, checkpoint):
    # A checkpoint keeps fixed-width arrays; a row's queries are its own.
    if return_queries and checkpoint is not None:
        raise ValueError(
            "return_queries=True cannot be kept in a checkpoint: explain with "
            "one or the other."
        )


def column_std(X):
    """``X.std(axis=0)`` without overflow: features above about 1e154 have
    squares beyond the float range (a spread of inf, then non-finite cubes
    and ``standardized`` values). Each column is scaled by a power of two
    near its largest magnitude, which is exact: the same bits otherwise."""
    _, e = np.frexp(np.abs(X).max(axis=0, initial=0.0))
    return np.ldexp(np.ldexp(X, -e).std(axis=0), e)
