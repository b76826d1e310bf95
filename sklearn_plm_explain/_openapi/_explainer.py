"""OpenAPIExplainer: exact local linear models of piecewise-linear models."""

# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    OneToOneFeatureMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from sklearn_plm_explain._base import ExplainBatch, ExplainScaffoldMixin
from sklearn_plm_explain._openapi._batch import _DEFAULT_RADIUS, RowRangeMixin
from sklearn_plm_explain._openapi._design import (
    EXACT_MIN_ENTRIES,
    basis_bounds,
    exact_first_solve,
    single_block,
)
from sklearn_plm_explain._openapi._groups import max_cube_points
from sklearn_plm_explain._openapi._input import (
    _check_queries_and_checkpoint,
    check_steps,
    column_std,
    feature_scale,
    numeric_part,
)
from sklearn_plm_explain._openapi._statuses import STATUSES, _warn_failures
from sklearn_plm_explain._utils._blackbox import (
    MODEL_CONSTRAINTS,
    resolve_estimator,
    resolve_response_method,
)
from sklearn_plm_explain._utils._validation import unfitted_on_error

__all__ = ["OpenAPIExplainer", "STATUSES"]


class OpenAPIExplainer(
    ExplainScaffoldMixin,
    RowRangeMixin,
    OneToOneFeatureMixin,
    TransformerMixin,
    BaseEstimator,
):
    """Exact decision features of a piecewise-linear model, from queries alone.

    A piecewise-linear model (PLM: ReLU networks, logistic model trees, linear
    models and affine pipelines into them) is on each linear region a softmax
    of affine logits. The centred log-ratios of its probabilities are then
    affine in the input, so a least-squares fit on a few points around a row
    recovers the local logits' slopes *exactly* - if all points share the
    row's region, and if the responses are precise enough. This explainer
    samples a small cube around each row, fits all classes at once, and
    certifies the fit from the data itself: the residuals over spare
    "witness" points estimate the response noise, and the slope's error bound
    derived from that noise must meet ``rtol``. Rows that cannot be certified
    are reported with a named status, never as exact.

    Models behind real APIs rarely answer in float64: float32 runtimes, values
    rounded to a few decimals, noisy services. The precision of each row's
    responses is read from the responses themselves (see
    ``response_precision``) and sets the noise model; where it puts ``rtol``
    out of reach, the row is certified ``"approximate"`` with the bound its
    responses allow (``error_bound``), never ``"exact"``.

    Read more in the :ref:`User Guide <openapi>`: the statuses, response
    precision and the limits of the certificate.

    Parameters
    ----------
    estimator : estimator, callable or None, default=None
        A fitted classifier (with ``predict_proba`` or ``decision_function``)
        or regressor, or a callable ``f(X) -> probabilities (n, C)``. A fitted
        estimator is never refitted; an unfitted one is cloned and fitted on
        ``(X, y)`` in :meth:`fit`; ``None`` fits a ``LogisticRegression``
        (class labels) or ``LinearRegression`` there. To tune the explainer
        with ``GridSearchCV`` around a fitted model, wrap the model in
        :class:`sklearn.frozen.FrozenEstimator`. The query array a model is
        called with is valid for that call only (the explainer reuses its
        memory): a model that keeps its inputs must copy them.
    response_method : {"auto", "predict_proba", "decision_function", "predict"}, \
            default="auto"
        What to query. ``"auto"`` uses ``predict`` for regressors, then
        ``decision_function`` (logits: exact even where probabilities
        saturate), then ``predict_proba``. Callables are treated as
        ``predict_proba`` unless told otherwise.
    init_radius : float or "auto", default=8e-5
        First half-width of the sampling cube, in units of each feature's
        scale (see ``scale``). A row whose first cube crosses a region
        boundary, or is too small to resolve its slope, needs a second one.
        ``"auto"`` learns it in :meth:`fit` from a few rows of ``X`` (so
        ``fit`` queries the model): the smallest radius that certified nine
        rows in ten of them, with a margin (see ``init_radius_``). Every row
        starts from that one radius, so results depend on neither the batch
        nor ``n_jobs``.
    min_radius : float, default=1e-9
        Smallest half-width tried before a row is declared a boundary row.
    max_radius : float, default=1.0
        Largest half-width tried when the responses are noisy.
    n_witnesses : int, default=5
        Points sampled beyond the ``d + 1`` needed to solve; their residuals
        estimate the response noise (the certificate's spare degrees of
        freedom). Fewer spend fewer points on each cube but bound the noise
        more loosely, so a bound may miss ``rtol`` and the cube grow; see
        the user guide.
    rtol : float, default=1e-8
        Target relative L1 error of every class's slope. A row is ``"exact"``
        only when its error bound is at most ``rtol``.
    max_iter : int, default=20
        Largest number of attempts (radii) per row.
    scale : "std" or array-like of shape (n_features,), default="std"
        Per-feature unit of the sampling cube. ``"std"`` uses the standard
        deviation of ``X`` in :meth:`fit`; constant features get the median of
        the other scales.
    reuse_regions : bool, default=True
        Let a row reuse a local model certified exact for another row of its
        group (a block of at most 128 consecutive rows of the batch, the same
        whatever ``n_jobs``) when its own response agrees with that model and
        so do its responses at fresh antithetic pairs of points around it,
        judged by the certificate's residual test: a few queries instead of a
        new fit. A row on a region boundary has one point of a pair beyond
        it, so it is never waved through. Only rows with deterministic
        float64 responses reuse; ``reused_from`` names the row whose model
        was reused (-1 for rows fitted themselves). A reused model is bitwise
        another row's, so a row's values then depend (within ``2 * rtol``)
        on the rows before it in its group, never on ``n_jobs``. Models with
        few, large regions (trees) save most of their queries; on networks,
        whose rows rarely share a region, the rows of a group start at once
        after eight certified models matched none of them. The rows of a
        group also share the check that the service is deterministic: after
        its first wave, whose rows each send their own, one in 16 of the
        rows starting in a call sends itself again for all of them, until an
        answer does not repeat (see the user guide's response precision).
        ``False`` makes
        every row's queries and fit its own.
    batch_size : int, "auto" or None, default="auto"
        How rows are grouped. ``"auto"`` explains them a group at a time, so
        that memory does not grow with the number of rows: a group's
        queries, designs and cubes stay within scikit-learn's
        ``working_memory`` (:func:`sklearn.set_config`), and a group's
        attempts for all its rows go to the model in one call. An int sends
        at most that many points in one call, with every row of a job
        searched at once; ``None`` sends each attempt's points for all rows
        of a job in one call (the memory then grows with the rows).
    n_jobs : int, default=None
        Number of jobs explaining slices of rows in parallel. ``None`` means 1
        unless in a :obj:`joblib.parallel_config` context. ``-1`` means all
        processors.
    verbose : int, default=0
        Show a progress bar of the rows explained on stderr when positive.
    random_state : int, RandomState instance or None, default=None
        Seeds the sampling. Each row draws from its own generator derived from
        this seed and the row's values, so results do not depend on
        ``n_jobs``, nor, with ``reuse_regions=False``, on the other rows of
        the batch.
    response_precision : {"auto", "float64", "float32"} or float, default="auto"
        Precision of the model's responses, which sets the noise model of the
        certificate. ``"auto"`` reads it, row by row, from the responses:
        their significant bits (float32 values, or their shortest decimals
        as JSON writes them), a decimal quantum ``10**-k`` they are all
        multiples of, and whether the row's response repeats when the row is
        sent again (a non-deterministic service is ``"noisy"`` and its
        measured scatter joins the noise model). ``"float64"`` or
        ``"float32"`` state the binary precision; a float states the quantum
        the responses are rounded to (e.g. ``1e-6``). Determinism is checked
        in every case. ``Explanation.response_precision`` records what each
        row was read as.
    uncertified : {"keep", "nan", "raise"}, default="keep"
        What :meth:`transform` does with rows it could not certify (status
        other than ``"exact"``): ``"keep"`` returns their best estimates,
        ``"nan"`` replaces their rows by NaN, ``"raise"`` raises a
        ``ValueError`` naming them. ``explain`` always returns every row
        with its status. ``"keep"`` is the default because in a pipeline a
        transformer must return finite, row-aligned output; the
        ``ConvergenceWarning`` still names the flagged rows.

    Attributes
    ----------
    estimator_ : estimator or callable
        The explained model.
    response_method_ : str
        The method queried.
    classes_ : ndarray of shape (n_classes,) or None
        Class labels (``None`` for regressors).
    scale_ : ndarray of shape (n_features,)
        Per-feature unit of the sampling cube.
    init_radius_ : float
        First half-width of every row's cube: ``init_radius``, or the one
        learned in :meth:`fit` with ``init_radius="auto"``.
    mean_ : ndarray of shape (n_features,)
        Mean of the (numeric) features in ``fit``: the background of the
        ``contribution`` and ``baseline`` fields.
    std_ : ndarray of shape (n_features,)
        Standard deviation of the features in ``fit`` (of ``standardized``).
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during :meth:`fit`, when they are all strings.
    numeric_features_ : ndarray of str or None
        For a DataFrame with non-numeric columns, the names of the numeric
        columns: the ones perturbed and explained (the others are held at
        each row's own values). ``None`` when every column is numeric.

    See Also
    --------
    local_linear_model : White-box ground truth for known PLMs.

    References
    ----------
    .. [1] Z. Cong, L. Chu, L. Wang, X. Hu, J. Pei, "Exact and Consistent
       Interpretation of Piecewise Linear Models Hidden behind APIs: A Closed
       Form Solution", arXiv:1906.06857 (OpenAPI, the query-only method
       implemented here).
    .. [2] L. Chu, X. Hu, J. Hu, L. Wang, J. Pei, "Exact and Consistent
       Interpretation for Piecewise Linear Neural Networks: A Closed Form
       Solution", KDD 2018 (OpenBox, its white-box counterpart).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.neural_network import MLPClassifier
    >>> from sklearn_plm_explain import OpenAPIExplainer
    >>> X, y = load_iris(return_X_y=True)
    >>> mlp = MLPClassifier((16,), max_iter=2000, random_state=0).fit(X, y)
    >>> explainer = OpenAPIExplainer(mlp, random_state=0).fit(X)
    >>> e = explainer.explain(X[:3])
    >>> e.status
    array(['exact', 'exact', 'exact'], dtype=object)
    >>> e.values.shape
    (3, 4)
    """

    _parameter_constraints: dict = {
        "estimator": list(MODEL_CONSTRAINTS),
        "response_method": [
            StrOptions({"auto", "predict_proba", "decision_function", "predict"})
        ],
        "init_radius": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions({"auto"}),
        ],
        "min_radius": [Interval(Real, 0, None, closed="neither")],
        "max_radius": [Interval(Real, 0, None, closed="neither")],
        "n_witnesses": [Interval(Integral, 2, None, closed="left")],
        "rtol": [Interval(Real, 0, 1, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "scale": [StrOptions({"std"}), "array-like"],
        "reuse_regions": ["boolean"],
        "batch_size": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            None,
        ],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "response_precision": [
            StrOptions({"auto", "float64", "float32"}),
            Interval(Real, 0, None, closed="neither"),
        ],
        "uncertified": [StrOptions({"keep", "nan", "raise"})],
    }

    def __init__(
        self,
        estimator=None,
        *,
        response_method="auto",
        init_radius=8e-5,
        min_radius=1e-9,
        max_radius=1.0,
        n_witnesses=5,
        rtol=1e-8,
        max_iter=20,
        scale="std",
        reuse_regions=True,
        batch_size="auto",
        n_jobs=None,
        verbose=0,
        random_state=None,
        response_precision="auto",
        uncertified="keep",
    ):
        self.estimator = estimator
        self.response_method = response_method
        self.init_radius = init_radius
        self.min_radius = min_radius
        self.max_radius = max_radius
        self.n_witnesses = n_witnesses
        self.rtol = rtol
        self.max_iter = max_iter
        self.scale = scale
        self.reuse_regions = reuse_regions
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state
        self.response_precision = response_precision
        self.uncertified = uncertified

    # -- fit ----------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Learn the feature scales and resolve how to query the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training (background) data; only its per-feature spread is used.
        y : array-like of shape (n_samples,), default=None
            Only used to fit an unfitted ``estimator``.

        Returns
        -------
        self : object
            Fitted explainer.
        """
        first = _DEFAULT_RADIUS if self.init_radius == "auto" else self.init_radius
        if self.min_radius > first or first > self.max_radius:
            raise ValueError(
                "Radii must satisfy min_radius <= init_radius <= max_radius; got "
                f"{self.min_radius}, {self.init_radius}, {self.max_radius}."
            )

        with unfitted_on_error(self):
            X_raw = X
            X, frame = self._numeric_part(X, reset=True)
            self.estimator_ = resolve_estimator(
                self.estimator, X_raw, y, type(self).__name__
            )
            self.response_method_, self._kind = resolve_response_method(
                self.estimator_, self.response_method
            )
            self.classes_ = self._resolve_classes(X, frame)
            self.scale_ = feature_scale(X, self.scale, self.n_features_in_)
            # Each explanation records the model it queried; a large model's
            # repr costs about a millisecond, once per fit rather than per call.
            self._estimator_repr = repr(self.estimator)
            # The background of contributions and standardized slopes.
            self.mean_, self.std_ = X.mean(axis=0), column_std(X)
            # Build the random orthogonal basis of a first cube now, once per
            # process (O(d^3)), rather than inside the first explain; and its
            # exact variant, where cubes can be drawn from it, with the
            # matrix of its fits' first solve.
            d = self.scale_.size
            n = d + self.n_witnesses
            basis_bounds(n, d)
            if n * d > EXACT_MIN_ENTRIES and single_block(n, d):
                basis_bounds(n, d, exact=True)
                exact_first_solve(n)
            self.init_radius_ = first
            if self.init_radius == "auto":
                self.init_radius_ = self._learn_radius(X, frame)
        return self

    def _numeric_part(self, X, reset):
        X, frame = numeric_part(self, X, reset)
        if not reset:
            check_steps(X, self.max_radius * self.scale_)
        return X, frame

    # -- explain ------------------------------------------------------------------
    def explain(self, X, target=None, return_queries=False, *, checkpoint=None):
        """Recover and certify the local linear model of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to explain.
        target : label or array-like of shape (n_samples,), default=None
            Class whose decision features go into ``values``; default the class
            the model predicts for each row. Ignored for regressors.
        return_queries : bool, default=False
            Also return, per row, the points the reported local model was
            fitted on, in the field ``queries``: for a certified row the
            points of its certified cube (the row itself excluded; it is
            always part of the fit), for a flagged row those of the cube that
            gave its best estimate, for a row that reused another row's model
            the pairs of points that confirmed it, and no points for a row
            saturated at its own response. Off by default because it holds
            ``(d + 1 + n_witnesses) * d`` numbers per row; the region metrics
            of :mod:`sklearn_plm_explain.metrics` need it.
        checkpoint : str, path-like or Checkpoint, default=None
            Explain the rows a chunk at a time and keep each finished chunk
            there; a later call with the same arguments reuses the finished
            rows without querying the model again (see :class:`Checkpoint`).
            Not with ``return_queries=True``.

        Returns
        -------
        explanation : Explanation
            ``values`` (n, d) decision features of the target class, ``coef``
            (n, d, C) local logit slopes centred across classes, ``intercept``
            (n, C), and per-row diagnostics ``status``, ``converged``,
            ``error_bound``, ``radius``, ``n_iter``, ``n_queries``,
            ``reused_from`` and ``response_precision``; with
            ``return_queries=True`` also ``queries``, an object array holding
            one array of shape (n_points, n_features) per row.

        Raises
        ------
        ValueError
            For invalid rows or targets, or ``return_queries`` with a
            checkpoint, before any query is sent.
        ModelResponseError
            If the model returns invalid responses; names the rows and keeps
            the finished rows in its ``partial`` attribute.
        CheckpointError
            For a checkpoint that is corrupted or was written by another run.
        """
        check_is_fitted(self)
        _check_queries_and_checkpoint(return_queries, checkpoint)
        batch, _ = self._batch(X, target, return_queries)
        return self._explain_batch(batch, checkpoint)

    def explain_chunked(
        self, X, target=None, return_queries=False, *, chunk_size=None, checkpoint=None
    ):
        """Explain the rows a chunk at a time, yielding each chunk's Explanation.

        For more rows than their results fit in memory: each chunk's
        :class:`Explanation` can be written out or reduced before the next
        is explained, so memory does not grow with the number of rows. The
        rows get the random draws they get in :meth:`explain` (a row's seed
        comes from its values): their statuses and queries are those of one
        call, their values and bounds the same up to the rounding of the
        model's responses in batches of another size. (With
        ``reuse_regions``, rows reuse the models of their own chunk only.)

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to explain.
        target : label or array-like of shape (n_samples,), default=None
            As in :meth:`explain`.
        return_queries : bool, default=False
            As in :meth:`explain`.
        chunk_size : int, default=None
            Rows per chunk. ``None`` takes as many rows as keep a chunk's
            results within scikit-learn's ``working_memory``
            (:func:`sklearn.set_config`; 1024 MiB by default). With a
            ``checkpoint``, set the chunk size in :class:`Checkpoint` instead.
        checkpoint : str, path-like or Checkpoint, default=None
            Keep each finished chunk there, as in :meth:`explain`; chunks
            already there are read back instead of queried. Not with
            ``return_queries=True``.

        Yields
        ------
        explanation : Explanation
            The rows of the next chunk, in order; ``reused_from`` refers to
            rows of the whole ``X``.

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

        Examples
        --------
        >>> from sklearn.datasets import load_iris
        >>> from sklearn.linear_model import LogisticRegression
        >>> from sklearn_plm_explain import OpenAPIExplainer
        >>> X, y = load_iris(return_X_y=True)
        >>> model = LogisticRegression(max_iter=1000).fit(X, y)
        >>> explainer = OpenAPIExplainer(model, random_state=0).fit(X)
        >>> [len(e) for e in explainer.explain_chunked(X, chunk_size=60)]
        [60, 60, 30]
        """
        check_is_fitted(self)
        _check_queries_and_checkpoint(return_queries, checkpoint)
        batch, X = self._batch(X, target, return_queries)
        # A row's results are arrays of fixed width; with its queries, at
        # most the points of its largest cube besides.
        row = self._assemble(self._blank(0, 1), X[:1])
        row_bytes = sum(getattr(row, f).nbytes for f in row.fields)
        if return_queries:
            d = X.shape[1]
            row_bytes += 8 * d * max_cube_points(d, self.n_witnesses)
        return self._explain_chunks(batch, chunk_size, checkpoint, row_bytes)

    def _batch(self, X, target, return_queries):
        """The validated rows as the explain scaffold takes them (see
        :class:`~sklearn_plm_explain._base.ExplainBatch`), and their numeric
        part."""
        X, frame = self._numeric_part(X, reset=False)
        target_idx = self._target_indices(target, X.shape[0])

        def run(start, stop, seed, bar, pool):
            return self._explain_range(
                X, frame, target_idx, seed, start, stop, return_queries, bar, pool
            )

        def not_run(start, stop):
            return self._assemble(self._blank(start, stop), X[start:stop])

        identity = {
            "rows": (X, frame),
            "target": (target_idx, np.array([bool(return_queries)])),
        }
        return ExplainBatch(X.shape[0], run, not_run, identity), X

    def _warn_batch(self, fields, stacklevel):
        _warn_failures(fields["status"], stacklevel + 1)

    def transform(self, X):
        """Decision features of the predicted class, shape (n_samples, n_features).

        Rows that are not certified follow the ``uncertified`` policy.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to explain.

        Returns
        -------
        values : ndarray of shape (n_samples, n_features)

        Raises
        ------
        ValueError
            With ``uncertified="raise"``, if a row is not certified.
        """
        check_is_fitted(self)
        explanation = self.explain(X)
        values, flagged = explanation.values, explanation.flagged
        if not flagged.any() or self.uncertified == "keep":
            return values
        rows = np.flatnonzero(flagged)
        if self.uncertified == "raise":
            shown = ", ".join(map(str, rows[:10])) + (" ..." if rows.size > 10 else "")
            raise ValueError(
                f"{rows.size} of {len(values)} rows could not be certified "
                f"(rows {shown}); uncertified='raise' lets no estimate through."
            )
        values = values.copy()
        values[rows] = np.nan
        return values

    def score(self, X, y=None):
        """Share of rows certified exact, less a small charge per query.

        The charge, 1e-6 times the mean number of queries per row divided by
        ``n_features + 2``, only breaks ties between settings that certify
        the same share of rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to explain.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        score : float
        """
        check_is_fitted(self)
        e = self.explain(X)
        per_row = e.n_queries.mean() / (self.scale_.size + 2)
        return float(e.converged.mean() - 1e-6 * per_row)

    def get_feature_names_out(self, input_features=None):
        """Names of the explained features: the input features, or only the
        numeric ones for data with non-numeric columns.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Input feature names, checked against those seen in :meth:`fit`.

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        check_is_fitted(self)
        if self.numeric_features_ is not None:
            return self.numeric_features_.astype(str).astype(object)
        if input_features is None and not hasattr(self, "feature_names_in_"):
            return np.array([f"x{j}" for j in range(self.n_features_in_)], dtype=object)
        return super().get_feature_names_out(input_features)
