"""Calling the model on LIME's query points, in the original representation."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from sklearn_plm_explain._utils._blackbox import BlackBox, is_model_object, query_frame


class _ModelCaller:
    """Calls the model on query points, as a DataFrame when it expects one."""

    def __init__(self, estimator, method, columns=None, dtypes=None):
        self.estimator = estimator
        self.method = method
        self.columns = columns
        self.dtypes = dtypes or {}

    def __call__(self, A):
        if self.columns is not None:
            A = query_frame(A, self.columns, self.dtypes)
        if self.method is None:
            return self.estimator(A)
        return getattr(self.estimator, self.method)(A)


def model_caller(est, mode, X, cat_cols):
    """The caller of the model ``est`` on points shaped like the training ``X``.

    A fitted model gets a DataFrame with its ``feature_names_in_`` (and a
    callable one with the columns of a training DataFrame); categorical
    columns keep the training frame's dtypes.
    """
    is_model = is_model_object(est)
    method = None
    if is_model:
        method = "predict_proba" if mode == "classification" else "predict"
        if not hasattr(est, method):
            hint = (
                " LIME explains probabilities in classification mode: pass an "
                "object with predict_proba, or a callable that returns them."
                if mode == "classification"
                else ""
            )
            raise TypeError(f"{type(est).__name__} has no method {method!r}.{hint}")
    columns = None
    names = getattr(est, "feature_names_in_", None)
    if names is not None:
        columns = list(names)
    elif not is_model and hasattr(X, "columns"):
        columns = list(X.columns)
    dtypes = {}
    if columns is not None and hasattr(X, "dtypes"):
        for j in cat_cols:
            dtypes[columns[j]] = X.dtypes.iloc[j]
    elif columns is not None:
        dtypes = {columns[j]: object for j in cat_cols}
    return _ModelCaller(est, method, columns, dtypes)


def output_classes(est, caller, Xv, numeric_categories):
    """The classes of a classifier; a bare callable is probed once.

    One training row reveals the width of the responses, sent as the
    explained rows will be (numbers when all are).
    """
    classes = getattr(est, "classes_", None)
    if classes is None:
        row = Xv[:1]
        if row.dtype == object and numeric_categories:
            row = row.astype(np.float64)
        probe = np.asarray(caller(row))
        if probe.ndim != 2:
            raise ValueError(
                "In classification mode the callable must return an array of "
                f"shape (n, n_classes); got shape {probe.shape}."
            )
        classes = np.arange(probe.shape[1])
    return np.asarray(classes)


def lime_blackbox(caller, mode, n_outputs, batch_size):
    """The checked model calls of one chunk of rows."""
    kind = "proba" if mode == "classification" else "regression"
    return BlackBox(
        caller, None, kind, n_outputs, feature_names=None, batch_size=batch_size
    )


def query_group(bb, space, ctx, Q, sizes, first, row_ids=None):
    """One model call (per batch) for the points of all rows in the group.

    With ``first`` each row's point 0 is the row itself, sent exactly as
    given. Returns the responses split by row.
    """
    row_ids = ctx.rows if row_ids is None else row_ids
    A = space.decode(Q)
    if first:
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        if A.dtype == object and ctx.X_orig.dtype != object:
            A[starts] = ctx.X_orig[row_ids]
        else:
            A[starts] = ctx.X_orig[row_ids].astype(A.dtype)
    owners = np.repeat(row_ids, sizes)
    Y = bb.query(A, owners)
    return np.split(Y, np.cumsum(sizes)[:-1])
