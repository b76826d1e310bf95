"""Validation of LIME's input: categorical columns, numeric values, rows."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils.validation import validate_data

from sklearn_plm_explain._utils._validation import class_indices, is_numeric_dtype


def categorical_columns(cf, X):
    """Column indices treated as categorical: ``cf`` (indices, names or a
    mask), or the non-numeric columns of ``X`` when ``cf`` is None."""
    columns = getattr(X, "columns", None)
    shape = X.shape if columns is not None else np.shape(np.asarray(X))
    n_cols = shape[1] if len(shape) == 2 else None
    if cf is None:
        return _detect_categorical(X)
    cf = np.asarray(cf)
    if cf.dtype == bool:
        if n_cols is not None and cf.size != n_cols:
            raise ValueError(
                f"categorical_features is a mask of length {cf.size}; "
                f"X has {n_cols} columns."
            )
        return np.flatnonzero(cf)
    if cf.dtype.kind in "OUS":
        if columns is None:
            raise ValueError(
                "categorical_features given by name needs X as a DataFrame."
            )
        names = [str(c) for c in columns]
        missing = [c for c in cf.tolist() if c not in names]
        if missing:
            raise ValueError(f"categorical_features not in X's columns: {missing}")
        return np.array(sorted(names.index(c) for c in cf.tolist()), dtype=np.intp)
    cols = np.unique(cf.astype(np.intp))
    if n_cols is not None and cols.size and (cols.min() < 0 or cols.max() >= n_cols):
        raise ValueError(
            f"categorical_features {cols.tolist()} out of range for {n_cols} columns."
        )
    return cols


def validate_rows(explainer, X, cat_cols, reset=False):
    """Validated ``(X_orig, X_num, X_cat)``; raises ``ValueError`` on bad rows.

    Numeric columns must be finite numbers; categorical columns must not
    be missing. Nothing here calls the model.
    """
    if len(cat_cols) == 0:
        Xv = validate_data(explainer, X, reset=reset, dtype=np.float64)
        return Xv, Xv, np.empty((Xv.shape[0], 0), dtype=object)
    Xv = validate_data(explainer, X, reset=reset, dtype=object, ensure_all_finite=False)
    num = np.setdiff1d(np.arange(Xv.shape[1]), cat_cols)
    X_num = _numeric_columns(Xv, num, _column_names(explainer, Xv.shape[1]))
    X_cat = Xv[:, cat_cols]
    missing = np.array(
        [[v is None or (isinstance(v, float) and v != v) for v in row] for row in X_cat]
    ).reshape(X_cat.shape)
    if missing.any():
        r, c = np.argwhere(missing)[0]
        raise ValueError(
            f"Input X has a missing value in categorical column "
            f"{int(cat_cols[c])} (row {int(r)})."
        )
    return Xv, X_num, X_cat


def _column_names(explainer, d):
    names = getattr(explainer, "feature_names_in_", None)
    return [str(n) for n in names] if names is not None else [f"x{j}" for j in range(d)]


def check_fit_input(explainer, Xv, y):
    """The training labels as an array, after the checks ``fit`` makes on
    the validated training rows ``Xv`` (nothing here calls the model)."""
    if Xv.shape[0] < 2:
        raise ValueError(
            f"fit needs at least 2 training rows; got n_samples = {Xv.shape[0]}."
        )
    if y is not None:
        y = np.asarray(y)
        if y.shape[0] != Xv.shape[0]:
            raise ValueError(f"y has {y.shape[0]} rows but X has {Xv.shape[0]} rows.")
    disc = explainer.discretize_continuous
    if disc and explainer.discretizer == "entropy" and y is None:
        raise ValueError("discretizer='entropy' needs the training labels y.")
    names = explainer.feature_names
    if names is not None and len(names) != Xv.shape[1]:
        raise ValueError(
            f"feature_names has {len(names)} names but X has {Xv.shape[1]} columns."
        )
    return y


def resolve_targets(classes, target, n):
    """Per-row class indices, or None for "the predicted class"."""
    if target is None:
        return None
    if classes is None:
        raise ValueError("target must be None in regression mode.")
    return class_indices(classes, target, n)


def resolve_labels(classes, labels):
    """Indices of the further classes explained for every row."""
    if labels is None:
        return np.empty(0, dtype=np.intp)
    if classes is None:
        raise ValueError("labels must be None in regression mode.")
    return class_indices(classes, labels, what="labels")


def original_rows(space, X_num, X_cat):
    """The explained rows in the original column order and representation."""
    if not space.cat_cols.size:
        return X_num
    out = np.empty((X_num.shape[0], space.d), dtype=object)
    out[:, space.num_cols] = X_num
    out[:, space.cat_cols] = X_cat
    return out.astype(np.float64) if space.numeric_categories else out


def _detect_categorical(X):
    """Columns holding non-numeric values (DataFrame dtypes or object arrays)."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is not None:
        return np.array(
            [j for j, dt in enumerate(dtypes) if not is_numeric_dtype(dt)],
            dtype=np.intp,
        )
    arr = np.asarray(X)
    if arr.dtype != object or arr.ndim != 2:
        return np.empty(0, dtype=np.intp)
    return np.array(
        [
            j
            for j in range(arr.shape[1])
            if any(isinstance(v, (str, bytes)) for v in arr[:, j].tolist())
        ],
        dtype=np.intp,
    )


def _numeric_columns(Xv, num, names):
    """Numeric columns as float64, with errors naming the offending column."""
    out = np.empty((Xv.shape[0], num.size))
    for i, j in enumerate(num):
        try:
            out[:, i] = Xv[:, j].astype(np.float64)
        except (TypeError, ValueError):
            bad = next(v for v in Xv[:, j].tolist() if not _is_number(v))
            raise ValueError(
                f"Column {names[j]!r} is numeric but X holds the non-numeric "
                f"value {bad!r} in it."
            ) from None
    finite = np.isfinite(out)
    if not finite.all():
        r, c = np.argwhere(~finite)[0]
        what = "NaN" if np.isnan(out[r, c]) else "infinity"
        raise ValueError(
            f"Input X contains {what} in numeric column {names[num[c]]!r} (row {int(r)})."
        )
    return out


def _is_number(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False
