"""Querying the explained model: response kinds, validation, batching, seeds."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.base import clone, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

from sklearn_plm_explain._utils._errors import (
    ModelResponseError,
    _name_explained_rows,
    _raise_rows,
)
from sklearn_plm_explain._utils._floats import (
    decimal_quantum,
    digits_rounding,
    half_precision,
)

__all__ = ["BlackBox", "resolve_estimator", "resolve_response_method"]

# Rows of a probability response may miss 1 by this much before we refuse them
# (more for responses rounded to a decimal quantum or computed in float32), and
# a probability may be this much below 0: a float32 runtime returns -1e-7 for a
# probability near 0, which is clipped to 0.
_PROBA_SUM_ATOL = 1e-6
_EPS32 = float(np.finfo(np.float32).eps)


# The methods a model object may answer with; an object with none of them that
# is callable is a plain function of the rows.
RESPONSE_METHODS = ("predict_proba", "decision_function", "predict")
# What an explainer's ``estimator`` may be (its ``_parameter_constraints``):
# an estimator, any object with a response method, a callable, or None.
MODEL_CONSTRAINTS = (
    HasMethods(["fit"]),
    *(HasMethods([method]) for method in RESPONSE_METHODS),
    callable,
    None,
)


def is_model_object(estimator):
    """Whether ``estimator`` answers through a method (a fitted estimator or
    any object with ``predict_proba``, ``decision_function`` or ``predict``)
    rather than by being called."""
    return hasattr(estimator, "fit") or any(
        hasattr(estimator, m) for m in RESPONSE_METHODS
    )


def _is_regressor(estimator):
    """scikit-learn's ``is_regressor``; an object outside scikit-learn's
    estimators (no tags) is a regressor when ``predict`` is all it has."""
    try:
        return is_regressor(estimator)
    except (AttributeError, TypeError):
        return hasattr(estimator, "predict") and not any(
            hasattr(estimator, m) for m in RESPONSE_METHODS[:2]
        )


def resolve_estimator(estimator, X, y, owner):
    """The model an explainer explains, as ``fit(X, y)`` of ``owner`` sees it.

    A fitted estimator or a plain callable is used as it is, never refitted.
    An unfitted estimator is cloned and fitted on ``(X, y)``. ``None`` fits a
    default linear model on ``(X, y)``: ``LogisticRegression`` for class
    labels, ``LinearRegression`` otherwise (mostly useful for testing).
    """
    if estimator is None:
        if y is None:
            raise ValueError(
                f"{owner} needs an estimator (a fitted model or a callable), or "
                "y to fit its default linear model."
            )
        from sklearn.linear_model import LinearRegression, LogisticRegression

        kind = type_of_target(y, raise_unknown=True)
        estimator = (
            LogisticRegression(max_iter=1000)
            if kind in ("binary", "multiclass")
            else LinearRegression()
        )
    if not hasattr(estimator, "fit"):
        return estimator
    try:
        check_is_fitted(estimator)
        return estimator
    except NotFittedError:  # before AttributeError, of which it is a subclass
        if y is None:
            raise ValueError(
                f"The estimator {type(estimator).__name__} is not fitted and no y "
                f"was given to fit it. Pass a fitted model (wrapped in "
                "sklearn.frozen.FrozenEstimator to survive clone) or call "
                "fit(X, y)."
            ) from None
    except (AttributeError, TypeError):
        return estimator  # a duck-typed model outside scikit-learn, as given
    return clone(estimator).fit(X, y)


def resolve_response_method(estimator, response_method):
    """Return ``(method_name, kind)`` for the model and the requested method.

    ``kind`` is ``"logit"`` (decision function, log-odds scale), ``"proba"``
    (class probabilities) or ``"regression"`` (a real-valued prediction).
    """
    kinds = {
        "decision_function": "logit",
        "predict_proba": "proba",
        "predict": "regression",
    }
    if not is_model_object(estimator) and callable(estimator):
        method = "predict_proba" if response_method == "auto" else response_method
        return method, kinds[method]
    if response_method == "auto":
        if _is_regressor(estimator):
            method = "predict"
        elif hasattr(estimator, "decision_function"):
            method = "decision_function"
        elif hasattr(estimator, "predict_proba"):
            method = "predict_proba"
        else:
            raise TypeError(
                f"{type(estimator).__name__} has neither predict_proba nor "
                "decision_function, and is not a regressor: it cannot be explained."
            )
    else:
        method = response_method
        if not hasattr(estimator, method):
            raise TypeError(
                f"{type(estimator).__name__} has no method {method!r} "
                "(response_method)."
            )
    return method, kinds[method]


class BlackBox:
    """Sends query points to the model and checks what comes back.

    Parameters
    ----------
    estimator : object or callable
        The fitted model, or ``f(X) -> responses``.
    method : str
        Name of the method to call on ``estimator`` (ignored for callables).
    kind : {"logit", "proba", "regression"}
        What the responses are.
    n_outputs : int or None
        Expected number of columns (classes), checked on every response.
    feature_names : ndarray of str or None
        When the model was fitted on a DataFrame, queries are sent as a
        DataFrame with these columns.
    batch_size : int or None
        Largest number of points sent in one call; ``None`` means no limit.
    template : tuple (DataFrame, list of str) or None
        For data with non-numeric columns: the explained rows and the names of
        the numeric columns that query points fill in.
    """

    def __init__(
        self,
        estimator,
        method,
        kind,
        n_outputs,
        feature_names=None,
        batch_size=None,
        template=None,
    ):
        self.estimator = estimator
        self.method = method
        self.kind = kind
        self.n_outputs = n_outputs
        self.feature_names = feature_names
        self.batch_size = batch_size
        self.template = template
        # A decimal quantum the user stated the responses are rounded to.
        self.quantum = 0.0
        self.n_calls = 0

    def _call(self, X, owners):
        if self.template is not None:
            # Mixed columns: the query points replace the numeric columns of
            # their rows; every other column keeps the row's own value.
            frame, numeric = self.template
            X_full = frame.iloc[owners].reset_index(drop=True)
            X_full[list(numeric)] = X
            X = X_full
        elif self.feature_names is not None:
            X = query_frame(X, self.feature_names)
        fn = self.estimator
        if is_model_object(fn) or not callable(fn):
            fn = getattr(self.estimator, self.method)
        self.n_calls += 1
        try:
            return fn(X)
        except ModelResponseError as err:
            _name_explained_rows(err, owners)
            raise

    def query(self, X, owners):
        """Return the validated responses, shape (n_points, n_outputs).

        ``owners[i]`` is the explained row that point ``i`` belongs to; it is
        used to name the rows in error messages.
        """
        m = X.shape[0]
        bad = np.zeros(m, dtype=bool)
        if X.dtype.kind == "f":
            bad = ~np.isfinite(X).all(axis=1)
        if bad.any():
            # A query point is built from a row, a scale and a radius: a
            # non-finite one is this package's bug, never the model's input.
            rows = np.unique(owners[bad])
            raise RuntimeError(
                f"Non-finite query points were built for rows {rows.tolist()}; "
                "no query was sent for them. Please report this."
            )
        step = m if not self.batch_size else int(self.batch_size)
        parts = [
            self._call(X[i : i + step], owners[i : i + step]) for i in range(0, m, step)
        ]
        parts = [np.asarray(p) for p in parts]
        narrow = any(
            np.issubdtype(p.dtype, np.floating) and p.dtype.itemsize < 8 for p in parts
        )
        try:
            out = np.concatenate(
                [p.reshape(p.shape[0], -1) if p.ndim == 1 else p for p in parts]
            )
        except ValueError as exc:
            raise ModelResponseError(
                f"The model returned responses of inconsistent shapes: {exc}",
                rows=np.unique(owners),
            ) from None
        return self._validate(out, owners, narrow)

    def _validate(self, out, owners, narrow=False):
        m = owners.shape[0]
        if out.ndim != 2 or out.shape[0] != m:
            raise ModelResponseError(
                f"The model returned an array of shape {out.shape} for {m} "
                "query points; expected one row per point.",
                rows=np.unique(owners),
            )
        if not np.issubdtype(out.dtype, np.number):
            raise ModelResponseError(
                f"The model returned non-numeric responses (dtype {out.dtype}).",
                rows=np.unique(owners),
            )
        out = out.astype(np.float64, copy=False)
        if self.kind == "logit" and out.shape[1] == 1:
            # Binary decision function: the logit of the second class.
            out = np.hstack([np.zeros_like(out), out])
        if self.n_outputs is not None and out.shape[1] != self.n_outputs:
            raise ModelResponseError(
                f"The model returned {out.shape[1]} columns; expected "
                f"{self.n_outputs}.",
                rows=np.unique(owners),
            )
        return self._check_values(out, owners, narrow)

    def _check_values(self, out, owners, narrow=False):
        bad = ~np.isfinite(out).all(axis=1)
        if bad.any():
            _raise_rows("non-finite values (NaN or inf)", bad, owners)
        if self.kind != "proba":
            return out
        atol, rounding = self._sum_tolerance(out, narrow)
        # Rounding to decimals never leaves [0, 1]: only float noise does.
        ftol = atol - rounding
        bad = (out < -ftol[:, None]).any(axis=1) | (out > 1 + ftol[:, None]).any(axis=1)
        if bad.any():
            _raise_rows("probabilities outside [0, 1]", bad, owners)
        bad = np.abs(out.sum(axis=1) - 1.0) > atol
        if bad.any():
            hint = ""
            if half_precision(out[bad]):
                hint = (
                    " Their values carry at most 11 significant bits, as "
                    "float16 or bfloat16 answers do: half precision is not "
                    "read; have the model answer in float32 or float64."
                )
            _raise_rows("probabilities that do not sum to 1", bad, owners, hint)
        if (out < 0).any() or (out > 1).any():
            # Rounding noise around 0 or 1: clipped, the log of a clipped 0 is
            # then flagged as saturated like any other 0.
            out = np.clip(out, 0.0, 1.0)
        return out

    def _sum_tolerance(self, out, narrow):
        """How far each point's probabilities may miss [0, 1] and their sum 1.

        Rounding each of K probabilities to a quantum q moves their sum by up to
        K q / 2; a float32 computation by a few float32 ulps each. Neither
        changes the centred log-ratios, which do not depend on normalisation.
        """
        K = out.shape[1]
        atol = np.full(out.shape[0], _PROBA_SUM_ATOL)
        if narrow:
            atol[:] = max(_PROBA_SUM_ATOL, 4 * K * _EPS32)
        rounding = np.zeros(out.shape[0])
        if self.quantum:
            rounding[:] = K * self.quantum / 2 * (1 + 1e-6)
        off = np.abs(out.sum(axis=1) - 1.0) > atol + rounding
        off |= (out < -atol[:, None]).any(axis=1)
        if off.any():
            # Only points that miss: are they rounded (to a quantum, or to
            # float32 and stored as float64)?
            sub = out[off]
            q = decimal_quantum(sub)
            rounding[off] = np.maximum(rounding[off], K * q / 2 * (1 + 1e-6))
            # Or written with a few significant digits (printf's "%g").
            rounding[off] = np.maximum(rounding[off], digits_rounding(sub))
            f32 = np.all(sub.astype(np.float32).astype(np.float64) == sub, axis=1)
            atol[off] = np.where(f32, np.maximum(atol[off], 4 * K * _EPS32), atol[off])
        return atol + rounding, rounding


def query_frame(X, columns, dtypes=None):
    """Query points as the DataFrame a model fitted on one expects.

    ``dtypes`` maps column names to the dtype they get back (categorical
    columns: their categories or strings); the other columns are numbers.
    Without it the points go in as one numeric block.
    """
    import pandas as pd

    columns = list(columns)
    if not dtypes:
        return pd.DataFrame(X, columns=columns)
    data = {}
    for j, name in enumerate(columns):
        col = X[:, j]
        if name in dtypes:
            data[name] = pd.Series(col, dtype=object).astype(dtypes[name])
        else:
            data[name] = col.astype(np.float64)
    return pd.DataFrame(data, columns=columns)
