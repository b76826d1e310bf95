"""Querying the explained model: response kinds, validation, batching, seeds."""

# SPDX-License-Identifier: BSD-3-Clause

import contextlib
import numbers
import zlib
from functools import lru_cache

import numpy as np
from sklearn.base import clone, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state, gen_even_slices
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from sklearn_plm_explain._utils._floats import (
    decimal_quantum,
    digits_rounding,
    half_precision,
)

__all__ = ["ModelResponseError", "QueryBudgetExceeded"]

# Rows of a probability response may miss 1 by this much before we refuse them
# (more for responses rounded to a decimal quantum or computed in float32), and
# a probability may be this much below 0: a float32 runtime returns -1e-7 for a
# probability near 0, which is clipped to 0.
_PROBA_SUM_ATOL = 1e-6
_EPS32 = float(np.finfo(np.float32).eps)


class ModelResponseError(ValueError):
    """The explained model returned something that cannot be a valid response.

    Attributes
    ----------
    rows : ndarray of int
        Indices, in the batch passed to ``explain``, of the rows whose queries
        received the invalid responses.
    partial : Explanation or None
        What had been computed before the failure (rows not finished carry the
        status ``"not_run"``), so that no finished work is lost.
    """

    def __init__(self, message, rows, partial=None, *, query_rows=None):
        super().__init__(message)
        self.rows = np.asarray(rows)
        self.partial = partial
        # Positions, in the one model call that failed, of the query points
        # concerned; a caller that knows which explained row each point
        # belongs to turns them into ``rows`` (see ``BlackBox._call``).
        self.query_rows = None if query_rows is None else np.asarray(query_rows)

    def __reduce__(self):
        # Picklable (process workers send their errors back) although the
        # constructor takes more than the message.
        return (_rebuild_error, (type(self), self.args), self.__dict__)


def _rebuild_error(cls, args):
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    return err


class QueryBudgetExceeded(ModelResponseError):
    """The next request to the model would exceed its query budget.

    Raised by :class:`RemoteModel` *before* sending a request that would take
    the number of rows sent past ``max_queries``; nothing beyond the budget is
    sent. Like every :class:`ModelResponseError` raised while explaining, its
    ``partial`` holds every row finished so far.

    Attributes
    ----------
    budget : int
        The budget, ``max_queries``.
    used : int
        Rows already sent (or committed to requests in flight).
    needed : int
        Rows the refused request or model call would have sent.
    """

    def __init__(
        self,
        message,
        rows,
        partial=None,
        *,
        query_rows=None,
        budget=None,
        used=None,
        needed=None,
    ):
        super().__init__(message, rows, partial, query_rows=query_rows)
        self.budget = budget
        self.used = used
        self.needed = needed


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
    if not hasattr(estimator, "fit") and callable(estimator):
        method = "predict_proba" if response_method == "auto" else response_method
        return method, kinds[method]
    if response_method == "auto":
        if is_regressor(estimator):
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
        if hasattr(fn, "fit") or not callable(fn):
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


def _name_explained_rows(err, owners):
    """Say which explained rows the query points of a failed call belong to.

    A model that raises :class:`ModelResponseError` itself (such as
    :class:`RemoteModel`) knows only positions in the call; the explainer
    knows whose points they are.
    """
    if err.rows.size and err.query_rows is None:
        return
    points = np.arange(len(owners)) if err.query_rows is None else err.query_rows
    points = points[(points >= 0) & (points < len(owners))]
    rows = np.unique(np.asarray(owners)[points])
    err.rows = rows
    err.query_rows = None
    if rows.size:
        shown = ", ".join(str(r) for r in rows[:10]) + (
            " ..." if rows.size > 10 else ""
        )
        err.args = (
            f"{err.args[0]} The query points concerned belong to row(s) {shown} "
            "of the explained batch.",
        ) + err.args[1:]


def _raise_rows(problem, bad, owners, hint=""):
    rows = np.unique(owners[bad])
    shown = ", ".join(str(r) for r in rows[:10]) + (" ..." if rows.size > 10 else "")
    raise ModelResponseError(
        f"The model returned {problem} for {int(bad.sum())} query point(s) "
        f"belonging to row(s) {shown} of the explained batch.{hint}",
        rows=rows,
    )


def base_seed(random_state):
    """One integer drawn before any dispatch, shared by all rows of a call."""
    if isinstance(random_state, numbers.Integral):
        return _base_seed_of(int(random_state))
    rng = check_random_state(random_state)
    return int(rng.randint(np.iinfo(np.int32).max))


@lru_cache(maxsize=64)
def _base_seed_of(seed):
    # An integer seed always gives the same draw; seeding a Mersenne Twister
    # costs about 0.2 ms, a tenth of our own time in a one-row call at d = 64.
    return int(check_random_state(seed).randint(np.iinfo(np.int32).max))


def row_generators(X, seed):
    """One independent generator per row, derived from the row's content.

    Seeding from the content rather than the position makes every row's
    explanation independent of the batch it came in and of ``n_jobs``.
    Identical rows get identical explanations.
    """
    return [np.random.default_rng(row_seed(row, seed)) for row in X]


def row_seed(row, seed):
    """The seed of one explained row: the call's seed and the row's content.

    Every explainer derives its per-row randomness from this, so that a row's
    explanation depends on neither the batch it came in nor ``n_jobs``.
    """
    content = np.ascontiguousarray(row, dtype=np.float64).tobytes()
    return np.random.SeedSequence([seed, zlib.crc32(content)])


def _limited(func, *args):
    # Several workers each running multi-threaded BLAS would oversubscribe.
    with threadpool_limits(limits=1, user_api="blas"):
        return func(*args)


@contextlib.contextmanager
def worker_pool(n_jobs, ordered=False):
    """Workers shared by the calls of :func:`map_row_slices` in the block that
    are given it as ``pool`` (None with one job).

    A joblib ``Parallel`` context, entered at the first call that sends
    slices to workers: its start and stop, with the arrays it memory-maps for
    the workers, cost about 0.1 s, which a run of many chunks would pay once a
    chunk. ``ordered`` as in :func:`map_row_slices`.
    """
    from joblib import effective_n_jobs

    if effective_n_jobs(n_jobs) <= 1:
        yield None
        return
    with contextlib.ExitStack() as stack:
        yield _Pool(n_jobs, ordered, stack)


class _Pool:
    """A ``Parallel`` context entered (on ``stack``) when first needed: a
    call whose rows make one slice runs in this process and needs none."""

    def __init__(self, n_jobs, ordered, stack):
        self.n_jobs, self.ordered, self._stack = n_jobs, ordered, stack
        self._parallel = None

    def get(self):
        if self._parallel is None:
            parallel = Parallel(
                n_jobs=self.n_jobs, return_as=_return_as(self.ordered), batch_size=1
            )
            self._parallel = self._stack.enter_context(parallel)
        return self._parallel


def _return_as(ordered):
    return "generator" if ordered else "generator_unordered"


def map_row_chunks(func, n_rows, n_jobs, *args, start=0, pool=None):
    """Run ``func(rows_slice, *args)`` over even chunks of rows, in order.

    The slices cover rows ``start`` to ``start + n_rows`` of the batch (a
    checkpointed run explains its rows a chunk at a time). ``pool`` as in
    :func:`map_row_slices`.
    """
    from joblib import effective_n_jobs

    n_chunks = min(effective_n_jobs(n_jobs), max(n_rows, 1))
    slices = [
        slice(start + sl.start, start + sl.stop)
        for sl in gen_even_slices(n_rows, n_chunks)
    ]
    return list(map_row_slices(func, slices, n_jobs, *args, ordered=True, pool=pool))


def map_row_slices(func, slices, n_jobs, *args, ordered=False, pool=None):
    """Yield ``func(rows_slice, *args)`` for each of ``slices``.

    With one job the slices run in order in this process; with more, they go
    to the workers one at a time as each becomes free (an uneven slice then
    holds up one worker, not the call), and come back in the order they end
    (in the order given with ``ordered``): the workers of ``pool`` (from
    :func:`worker_pool` with the same ``ordered``), or of a ``Parallel`` of
    this call.
    """
    from joblib import effective_n_jobs

    if effective_n_jobs(n_jobs) <= 1 or len(slices) <= 1:
        for sl in slices:
            yield func(sl, *args)
        return
    # The outer limit covers thread workers, which share this process's BLAS
    # (their own limits would race to restore it); the inner one process
    # workers.
    if pool is None:
        parallel = Parallel(n_jobs=n_jobs, return_as=_return_as(ordered), batch_size=1)
    elif pool.ordered != ordered:
        raise ValueError(f"a pool with ordered={pool.ordered} cannot keep this order")
    else:
        parallel = pool.get()
    with threadpool_limits(limits=1, user_api="blas"):
        yield from parallel(delayed(_limited)(func, sl, *args) for sl in slices)
