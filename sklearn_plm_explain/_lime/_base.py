"""The shared estimator of the LIME explainers: fit, validation, batching.

The work itself is done by the engines of this package: the sampling space
(:mod:`._sampling`), the local fit and selection (:mod:`._surrogate`), the
model calls (:mod:`._query`), the input checks (:mod:`._input`) and the
per-row results (:mod:`._results`). The estimator holds the parameters,
learns the training statistics in ``fit`` and hands rows to the engines in
batches (one model call for the perturbations of many rows), chunks of rows
in parallel with per-row seeds.
"""

# SPDX-License-Identifier: BSD-3-Clause

import contextlib
import numbers
import warnings

import numpy as np
from sklearn.base import (
    BaseEstimator,
    OneToOneFeatureMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from sklearn_plm_explain._base import ExplainBatch, ExplainScaffoldMixin
from sklearn_plm_explain._lime._input import (
    categorical_columns,
    check_fit_input,
    original_rows,
    resolve_labels,
    resolve_targets,
    validate_rows,
)
from sklearn_plm_explain._lime._output import Presentation, min_effective_samples
from sklearn_plm_explain._lime._query import model_caller, output_classes
from sklearn_plm_explain._lime._results import STATUSES, not_run_result
from sklearn_plm_explain._lime._rows import RowGroupsMixin
from sklearn_plm_explain._lime._sampling import _TabularSpace, release_sobol_tables
from sklearn_plm_explain._lime._surrogate import lime_kernel, row_weights
from sklearn_plm_explain._utils._blackbox import resolve_estimator
from sklearn_plm_explain._utils._validation import unfitted_on_error


class _BaseLime(
    ExplainScaffoldMixin,
    RowGroupsMixin,
    OneToOneFeatureMixin,
    TransformerMixin,
    BaseEstimator,
):
    """Shared fit / validation / batching of the LIME explainers."""

    _warn_fields = ("status", "effective_samples")
    _ordered_pool = True

    _parameter_constraints: dict = {
        "estimator": [
            HasMethods(["predict_proba"]),
            HasMethods(["predict"]),
            callable,
            None,
        ],
        "mode": [StrOptions({"classification", "regression"})],
        "feature_names": ["array-like", None],
        "categorical_features": ["array-like", None],
        "discretize_continuous": ["boolean"],
        "discretizer": [StrOptions({"quartile", "decile", "entropy"})],
        "sample_around_instance": ["boolean"],
        "kernel_width": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "kernel": [callable, None],
        "num_features": [Interval(numbers.Integral, 1, None, closed="left")],
        "num_samples": [Interval(numbers.Integral, 2, None, closed="left")],
        "model_regressor": [HasMethods(["fit", "predict"]), None],
        "sampling": [StrOptions({"random", "qmc"})],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "n_jobs": [numbers.Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    _method_name = "lime"

    # -- fit ------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Learn the training statistics used to sample neighbourhoods.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features)
            Training data. Numeric columns may be mixed with categorical
            columns holding integer codes or strings.
        y : array-like of shape (n_samples,), default=None
            Needed only for ``discretizer="entropy"``, or to fit a clone of an
            unfitted ``estimator``.

        Returns
        -------
        self : object
            The fitted explainer.
        """
        self._check_params()
        cat_cols = categorical_columns(self.categorical_features, X)
        with unfitted_on_error(self):
            self._fit(X, y, cat_cols)
        return self

    def _fit(self, X, y, cat_cols):
        Xv, X_num, X_cat = self._validate_X(X, cat_cols, reset=True)
        y = check_fit_input(self, Xv, y)
        self.categorical_features_ = np.asarray(cat_cols, dtype=np.intp)
        num_cols = np.setdiff1d(np.arange(Xv.shape[1]), cat_cols)
        self.space_ = _TabularSpace(
            X_num, X_cat, num_cols, cat_cols, y, self.get_params(deep=False)
        )
        d = Xv.shape[1]
        self.kernel_width_ = (
            0.75 * np.sqrt(d) if self.kernel_width is None else float(self.kernel_width)
        )
        self.estimator_ = resolve_estimator(self.estimator, X, y, type(self).__name__)
        self._caller = model_caller(self.estimator_, self.mode, X, cat_cols)
        if self.mode == "regression":
            self.classes_ = None
            self.n_outputs_ = 1
        else:
            self.classes_ = output_classes(
                self.estimator_, self._caller, Xv, self.space_.numeric_categories
            )
            self.n_outputs_ = self.classes_.size

    def _check_params(self):
        pass

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Columns of strings or integer codes are sampled as categories.
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags

    def _validate_X(self, X, cat_cols=None, reset=False):
        if cat_cols is None:
            cat_cols = self.categorical_features_
        return validate_rows(self, X, cat_cols, reset)

    # -- public API -------------------------------------------------------------------
    def explain(self, X, target=None, labels=None, *, checkpoint=None):
        """Explain the model's response at each row of X.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features)
            Rows to explain, in the representation used in ``fit``.
        target : class label, array-like of shape (n_samples,), or None
            Class explained in each row; ``None`` explains the class the model
            predicts at the row (regression: the prediction).
        labels : array-like of class labels, default=None
            Further classes explained for every row (classification only).
            When given, the result carries ``labels`` (indices into
            ``classes``) and per-label fields ``label_values``,
            ``label_intercept``, ``label_score``, ``label_local_pred``.
        checkpoint : str, path-like or Checkpoint, default=None
            Explain the rows a chunk at a time and keep each finished chunk
            there; a later call with the same arguments reuses the finished
            rows without querying the model again (see :class:`Checkpoint`).

        Returns
        -------
        explanation : Explanation
            Per-row fields: ``values``, ``target``, ``selected``,
            ``intercept``, ``score``, ``local_pred``, ``n_samples``,
            ``n_queries``, ``n_rounds``, ``converged``, ``status``.

        Raises
        ------
        ModelResponseError
            If the model returns invalid responses; names the rows and keeps
            the finished rows in its ``partial`` attribute (rows not finished
            have the status ``"not_run"``).
        CheckpointError
            For a checkpoint that is corrupted or was written by another run.
        """
        check_is_fitted(self)
        return self._explain(X, target, labels, holdout=False, checkpoint=checkpoint)

    def transform(self, X):
        """Surrogate weights of the predicted class of each row.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features)
            Rows to explain.

        Returns
        -------
        values : ndarray of shape (n_samples, n_features)
            ``explain(X).values``: the surrogate weights, 0 for features not
            selected.
        """
        check_is_fitted(self)
        return self._explain(X, None, None, holdout=False).values

    def score(self, X, y=None):
        """Mean held-out local fidelity of the explanations of X.

        For each row, the surrogate is evaluated on ``num_samples`` *fresh*
        perturbations that were not used to fit it: the score is the
        kernel-weighted R² between the surrogate's and the model's responses
        for the explained class, averaged over rows (higher is better, at most
        1; it can be negative for a surrogate worse than a constant). A
        kernel too narrow for the neighbourhood gives a very negative score:
        its surrogate is fitted on the row alone and fails on fresh points.
        (A custom ``kernel`` that gives no fresh perturbation any weight
        leaves the score undefined: NaN.)

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features)
            Rows to explain.
        y : None
            Ignored.

        Returns
        -------
        score : float
        """
        check_is_fitted(self)
        return float(np.mean(self._explain(X, None, None, holdout=True).holdout_score))

    def explain_chunked(
        self, X, target=None, labels=None, *, chunk_size=None, checkpoint=None
    ):
        """Explain the rows a chunk at a time, yielding each chunk's Explanation.

        For more rows than their results fit in memory: each chunk's
        :class:`Explanation` can be written out or reduced before the next
        is explained, so memory does not grow with the number of rows. Every
        row gets the random draws it gets in :meth:`explain`.

        Parameters
        ----------
        X : {array-like, DataFrame} of shape (n_samples, n_features)
            Rows to explain, in the representation used in ``fit``.
        target : class label, array-like of shape (n_samples,), or None
            As in :meth:`explain`.
        labels : array-like of class labels, default=None
            As in :meth:`explain`.
        chunk_size : int, default=None
            Rows per chunk. ``None`` takes as many rows as keep a chunk's
            results within scikit-learn's ``working_memory``
            (:func:`sklearn.set_config`; 1024 MiB by default). With a
            ``checkpoint``, set the chunk size in :class:`Checkpoint` instead.
        checkpoint : str, path-like or Checkpoint, default=None
            Keep each finished chunk there, as in :meth:`explain`; chunks
            already there are read back instead of queried.

        Yields
        ------
        explanation : Explanation
            The rows of the next chunk, in order.

        Raises
        ------
        ValueError
            For invalid rows, targets or chunk size, when called (before any
            query is sent and before the first chunk is asked for).
        ModelResponseError
            If the model returns invalid responses; names the rows, and its
            ``partial`` holds the failing chunk's rows (the chunks before it
            have been yielded).
        CheckpointError
            For a checkpoint that is corrupted or was written by another run,
            when the first chunk is asked for.
        """
        check_is_fitted(self)
        prepared = self._prepare(X, target, labels)
        batch = self._batch(prepared, holdout=False)
        row_bytes = self._row_bytes(prepared)
        return self._explain_chunks(batch, chunk_size, checkpoint, row_bytes)

    def _row_bytes(self, prepared):
        """Bytes of a row's results at most: those of a row not run, with its
        text fields as wide as the longest status and label can make them."""
        row = self._not_run_explanation(*prepared["not_run"], 0, 1)
        labels = Presentation(self.space_, self._feature_names())
        widths = {
            "status": max(map(len, STATUSES)),
            "selected_names": labels.longest_label(prepared["rows_data"][4]),
        }
        total = 0
        for field in row.fields:
            a = getattr(row, field)
            # numpy's text arrays take 4 bytes a character of their longest.
            wide = a.dtype.kind == "U" and field in widths
            total += a.size * 4 * widths[field] if wide else a.nbytes
        return total

    # -- orchestration ----------------------------------------------------------------
    def _prepare(self, X, target, labels):
        """The validated rows, their encodings, targets and the chunks' helpers."""
        _, X_num, X_cat = self._validate_X(X)
        n = X_num.shape[0]
        targets = resolve_targets(self.classes_, target, n)
        extra = resolve_labels(self.classes_, labels)
        x_num, x_code, z0, key = self.space_.encode_rows(X_num, X_cat)
        X_orig = original_rows(self.space_, X_num, X_cat)
        rows_data = (x_num, x_code, z0, key, X_orig)
        return {
            "n": n,
            "rows_data": rows_data,
            "target_spec": (targets, extra, labels is not None),
            "identity": {"rows": (X_num, X_cat), "target": (targets, extra)},
            "not_run": (rows_data, extra, labels is not None),
        }

    def _batch(self, prepared, holdout):
        """The prepared rows as the explain scaffold takes them (see
        :class:`~sklearn_plm_explain._base.ExplainBatch`)."""

        def run(start, stop, seed, bar, pool):
            return self._explain_range(
                prepared["rows_data"],
                prepared["target_spec"],
                seed,
                holdout,
                (start, stop),
                bar,
                pool,
            )

        def not_run(start, stop):
            return self._not_run_explanation(*prepared["not_run"], start, stop)

        return ExplainBatch(prepared["n"], run, not_run, prepared["identity"])

    def _explain(self, X, target, labels, holdout, checkpoint=None):
        # explain, transform or score -> _explain -> the scaffold.
        batch = self._batch(self._prepare(X, target, labels), holdout)
        desc = "held-out scoring" if holdout else None
        return self._explain_batch(batch, checkpoint, desc, depth=2)

    @contextlib.contextmanager
    def _batch_scope(self):
        # The Sobol tables drawn for a batch are cached until it ends.
        try:
            yield
        finally:
            release_sobol_tables()

    def _warn_batch(self, fields, stacklevel):
        self._warn_statuses(
            fields["status"], fields["effective_samples"], stacklevel + 1
        )

    def _warn_statuses(self, status, effective_samples, stacklevel):
        """One ConvergenceWarning per kind of row whose result is not sound
        (``stacklevel`` as in :func:`warnings.warn`, from here)."""
        few = status == "few_effective_samples"
        if few.any():
            ess = effective_samples[few]
            warnings.warn(
                f"{int(few.sum())} of {few.size} rows have fewer effective samples "
                f"(Kish size of the kernel weights: median {np.median(ess):.3g}) "
                f"than the {self._min_effective_samples()} their surrogate needs "
                f"(status 'few_effective_samples'): their weights and score are not "
                f"determined by the data. kernel_width={self.kernel_width_:.3g} "
                "is usually too narrow for the neighbourhood; widen it.",
                ConvergenceWarning,
                stacklevel=stacklevel,
            )

    def _not_run_result(self, extra):
        """The per-row result of a row not explained (the model failed first)."""
        d, k = self.space_.d, self._selected_width()
        return not_run_result(d, k, extra, self.classes_ is None)

    def _feature_names(self):
        if self.feature_names is not None:
            return np.asarray(self.feature_names, dtype=object)
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            names = getattr(self.estimator_, "feature_names_in_", None)
        if names is None:
            names = [f"x{j}" for j in range(self.space_.d)]
        return np.asarray(names, dtype=object)

    def _provenance(self):
        params = self.get_params(deep=False)
        params.pop("estimator", None)
        return params

    def _points_per_row(self):
        """The most points one row's neighbourhood can hold."""
        return self.num_samples

    def _min_effective_samples(self):
        """Fewest effective samples for the surrogate (see ``effective_samples``)."""
        return min_effective_samples(self._selected_width())

    def _weights(self, Z):
        return row_weights(Z, self.kernel, self.kernel_width_)

    def _kernel(self, dist):
        return lime_kernel(dist, self.kernel, self.kernel_width_)

    def _selected_width(self):
        d = self.space_.d
        if getattr(self, "feature_selection", "lasso_path") == "none":
            return d
        return min(self.num_features, d)
