"""Validation helpers shared by the estimators."""

# SPDX-License-Identifier: BSD-3-Clause

from contextlib import contextmanager

import numpy as np

__all__ = ["class_indices", "is_numeric_dtype", "unfitted_on_error"]


def is_numeric_dtype(dtype):
    """Whether a column of this dtype holds numbers the explainers perturb.

    Booleans, integers and reals (numpy kinds ``b``, ``i``, ``u``, ``f``,
    pandas' nullable ``Int64``/``Float64``/``boolean`` included) are numeric;
    strings, objects, categories, dates and complex numbers are not. This is
    the one definition every explainer and :func:`local_linear_model` use to
    tell the numeric columns of a DataFrame from the others.
    """
    kind = getattr(dtype, "kind", None)
    if kind is None:
        try:
            kind = np.dtype(dtype).kind
        except TypeError:
            return False
    return kind in "biuf"


def _fitted_attributes(estimator):
    return [
        name
        for name in vars(estimator)
        if name.endswith("_") and not name.startswith("__")
    ]


@contextmanager
def unfitted_on_error(estimator):
    """Leave ``estimator`` unfitted if the ``fit`` code inside fails.

    ``check_is_fitted`` accepts any object with an attribute ending in ``_``;
    a ``fit`` that raises after ``validate_data`` has set ``n_features_in_``
    would otherwise leave an object that looks fitted and fails later, far
    from the cause. Every fitted attribute is removed, including those of an
    earlier successful fit, which the failed call has already overwritten in
    part.
    """
    try:
        yield
    except BaseException:
        for name in _fitted_attributes(estimator):
            delattr(estimator, name)
        raise


def class_indices(classes, labels, n=None, what="target"):
    """Indices into ``classes`` of class labels, checked before any query.

    Parameters
    ----------
    classes : array-like of shape (n_classes,)
        The model's classes.
    labels : label or array-like of labels
        With ``n``: one label (used for every row) or ``n`` labels, one per
        row. Without: any number of labels.
    n : int or None, default=None
        Number of explained rows.
    what : str, default="target"
        The argument's name, for error messages.

    Returns
    -------
    indices : ndarray of int
    """
    labels = np.asarray(labels)
    if n is None:
        labels = np.atleast_1d(labels)
    else:
        if labels.ndim == 0:
            labels = np.full(n, labels[()], dtype=labels.dtype)
        if labels.shape != (n,):
            raise ValueError(
                f"{what} must be one label or {n} labels; got shape {labels.shape}."
            )
    known = np.asarray(classes).tolist()
    lookup = {label: i for i, label in enumerate(known)}
    idx = np.array([lookup.get(v, -1) for v in labels.tolist()], dtype=np.intp)
    if np.any(idx < 0):
        unknown = list(dict.fromkeys(labels[idx < 0].tolist()))[:5]
        raise ValueError(
            f"Unknown {what} {unknown}: not classes of the model, "
            f"whose classes are {known}."
        )
    return idx
