"""OpenAPIExplainer: exact local linear models of piecewise-linear models."""

# SPDX-License-Identifier: BSD-3-Clause

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    OneToOneFeatureMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from sklearn_plm_explain._base import ExplainBatch, ExplainScaffoldMixin
from sklearn_plm_explain._explanation import Explanation, count_statuses
from sklearn_plm_explain._openapi._design import (
    EXACT_MIN_ENTRIES,
    basis_bounds,
    exact_first_solve,
    single_block,
)
from sklearn_plm_explain._openapi._fit import MAX_DESIGN_ERROR
from sklearn_plm_explain._openapi._groups import (
    fill_in_groups,
    max_cube_points,
    rows_per_group,
    workspace_scope,
)
from sklearn_plm_explain._openapi._radius import learned_radius
from sklearn_plm_explain._openapi._results import ResultTable
from sklearn_plm_explain._openapi._search import SearchConfig, search_in_groups
from sklearn_plm_explain._utils import _progress
from sklearn_plm_explain._utils._blackbox import (
    BlackBox,
    ModelResponseError,
    base_seed,
    resolve_estimator,
    resolve_response_method,
)
from sklearn_plm_explain._utils._validation import (
    class_indices,
    is_numeric_dtype,
    unfitted_on_error,
)

__all__ = ["OpenAPIExplainer", "STATUSES"]

# init_radius="auto": rows of the background explained in fit, and the
# radius used without it.
_CALIBRATION_ROWS = 16
_DEFAULT_RADIUS = 8e-5
# A feature whose spread in fit is at most this fraction of its magnitude is
# constant (the spread is rounding): 2^10 float64 epsilons.
_CONSTANT_SPREAD = 2.0**10 * np.finfo(np.float64).eps


STATUSES = {
    "exact": "certified: the local linear model is exact to rtol for every class "
    "(error_bound <= rtol)",
    "approximate": "certified to error_bound, which exceeds rtol: the responses "
    "are coarser than float64 (float32, rounded to decimals, or noisy), and the "
    "cubes the residual test accepts resolve the slopes only that far; "
    "error_bound bounds the relative L1 error of every class's slope",
    "saturated": "a probability has underflowed (0, or below the smallest normal "
    "number of the response precision, e.g. rounded to 0), is held at a floor or "
    "clip, or is so close to 0 that it is only known as 1 minus the others, too "
    "imprecisely to resolve the slope; values are NaN when no cube gave an "
    "estimate",
    "imprecise": "the responses are too imprecise to resolve the slope even on "
    "the largest cube tried, and no cube showed a kink",
    "boundary": "the row is too close to a boundary between linear regions: "
    "every cube small enough to stay in its region is too small to resolve "
    "the slope at the response precision",
    "not_piecewise_linear": "the responses are not those of a piecewise-linear "
    "model at their precision: residuals that fall like the square of the radius "
    "(a smooth, curved model, or probabilities smoothed by the service), or "
    "float64 probabilities whose sum misses 1 by more than their rounding",
    "flat": "the responses are bitwise identical all around the row (a dead "
    "region, e.g. every unit of a ReLU layer off; for responses coarser than "
    "float64, on the largest cube): the slopes are zero to within the response "
    "precision, which has no relative error to certify",
    "not_run": "not explained because the model failed on another row first",
}


class OpenAPIExplainer(
    ExplainScaffoldMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator
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

    Read more in the README's sections on response precision and statuses.

    Parameters
    ----------
    estimator : estimator, callable or None, default=None
        A fitted classifier (with ``predict_proba`` or ``decision_function``)
        or regressor, or a callable ``f(X) -> probabilities (n, C)``. A fitted
        estimator is never refitted. An unfitted estimator is cloned and
        fitted on ``(X, y)`` in :meth:`fit`; ``None`` fits a
        ``LogisticRegression`` (class labels) or ``LinearRegression`` there. To tune the explainer with
        ``GridSearchCV`` around an already fitted model, wrap the model in
        :class:`sklearn.frozen.FrozenEstimator` so that cloning keeps it.
        The query array a model is called with is valid for that call only:
        the explainer writes its next points into the same memory (as
        :func:`sklearn.inspection.permutation_importance` reuses its permuted
        copy), so a model that keeps its inputs (a log of queries) must copy
        them; ``explain(..., return_queries=True)`` reports the points each
        row's local model was fitted on.
    response_method : {"auto", "predict_proba", "decision_function", "predict"}, \
            default="auto"
        What to query. ``"auto"`` uses ``predict`` for regressors, then
        ``decision_function`` (logits: exact even where probabilities
        saturate), then ``predict_proba``. Callables are treated as
        ``predict_proba`` unless told otherwise.
    init_radius : float or "auto", default=8e-5
        First half-width of the sampling cube, in units of each feature's
        scale (see ``scale``). A row whose first cube crosses a region
        boundary, or is too small to resolve its slope, needs a second one
        (about ``d`` more queries). ``"auto"`` learns it in :meth:`fit`:
        it explains up to 16 rows of ``X`` (so ``fit`` queries the model,
        about ``16 (d + 2)`` to ``48 (d + 2)`` times), reads how far each
        certified cube's bound lay below ``rtol``, and starts every later row
        at the smallest radius that certifies nine rows in ten of those with
        a margin of 2, where region boundaries are least likely to be in the
        cube (see ``init_radius_``). Every row still starts from that one
        radius, so results depend on neither the batch nor ``n_jobs``.
    min_radius : float, default=1e-9
        Smallest half-width tried before a row is declared a boundary row.
    max_radius : float, default=1.0
        Largest half-width tried when the responses are noisy.
    n_witnesses : int, default=5
        Points sampled beyond the ``d + 1`` needed to solve; their residuals
        estimate the response noise (the certificate's spare degrees of
        freedom).
    rtol : float, default=1e-8
        Target relative L1 error of every class's slope. A row is ``"exact"``
        only when its error bound is at most ``rtol``.
    max_iter : int, default=20
        Largest number of attempts (radii) per row.
    scale : "std" or array-like of shape (n_features,), default="std"
        Per-feature unit of the sampling cube. ``"std"`` uses the standard
        deviation of ``X`` in :meth:`fit`; constant features get the median of
        the other scales.
    reuse_regions : bool, default=False
        Let a row reuse a local model certified exact for another row of the
        batch when its own response agrees with that model and so do its
        responses at two fresh random antithetic pairs of points ``x +- u``,
        in independent directions, four times as far out as the model's own
        certified radius, judged by the certificate's residual test: five
        queries instead of a new fit. Two different affine maps agree only on
        a set of measure zero, so the row lies in that model's region with
        probability one; a row on a region boundary has one point of each
        pair beyond it, so it is never waved through; and a slope difference
        shows in either direction. Only rows with deterministic float64
        responses reuse. The content of the result (statuses, decision
        features to ``rtol``) does not change; the number of queries does
        (``reused_from`` names the row whose model was reused, -1 for rows
        fitted themselves). Rows are then searched in growing waves, which
        adds a few rounds of model calls. Off by default because a reused
        model is bitwise another row's: results then depend (within ``2 *
        rtol``) on which rows share a batch or a parallel chunk, and on models
        with small regions (networks) it only costs queries; turn it on for
        models with few, large regions such as trees.
    batch_size : int, "auto" or None, default="auto"
        How rows are grouped. ``"auto"`` explains them a group at a time, so
        that memory does not grow with the number of rows: each group's
        queries, designs and cubes stay within scikit-learn's
        ``working_memory`` (:func:`sklearn.set_config`, 1024 MiB by default;
        and within about 16 MiB per array, which keeps large arrays in
        reused memory, or 64 MiB for groups of up to 8 rows) and a finished
        group keeps only its results. At d = 784 that is 8 rows per group,
        at d = 64 several hundred; a group's attempts for all its rows go to
        the model in one call, and with ``reuse_regions`` rows reuse the
        models of their own group. An
        int sends at most that many points in one call, with every row of a
        job searched at once; ``None`` sends each attempt's points for all
        rows of a job in one call (the memory then grows with the rows).
    n_jobs : int, default=None
        Number of jobs explaining slices of rows in parallel (about eight
        slices per job, each handed to the next free worker, so that a few
        costly rows do not hold up the call). ``None`` means 1 unless in a
        :obj:`joblib.parallel_config` context. ``-1`` means all processors.
    verbose : int, default=0
        Show a progress bar of the rows explained (rate and time left) on
        stderr when positive. Silent by default; the command line turns it
        on.
    random_state : int, RandomState instance or None, default=None
        Seeds the sampling. Each row draws from its own generator derived from
        this seed and the row's values, so results do not depend on ``n_jobs``
        or on the other rows of the batch.
    response_precision : {"auto", "float64", "float32"} or float, default="auto"
        Precision of the model's responses, which sets the noise model of the
        certificate. ``"auto"`` reads it, row by row, from the responses: how
        many significant bits the values carry (float32 values, or the
        shortest decimals of float32 values as a JSON encoder writes them,
        are float32; decimals of 11 to 15 significant digits, as printf's
        ``%.13g`` writes them, are ``"13 digits"``), whether every value is a
        multiple of a decimal quantum ``10**-k`` (rounded responses), and
        whether the row's response repeats when the row is sent again in a
        later call (one more query; a non-deterministic service is
        ``"noisy"``: its scatter within a call and between calls, measured
        by a few more repeats, joins the noise model, and each later cube
        brings the row itself again).
        ``"float64"`` or ``"float32"`` state the binary precision; a float
        states the quantum the responses are rounded to (e.g. ``1e-6``).
        Determinism is checked in every case.
        ``Explanation.response_precision`` records what each row was read as.
    uncertified : {"keep", "nan", "raise"}, default="keep"
        What :meth:`transform` does with rows it could not certify (status
        other than ``"exact"``): ``"keep"`` returns their best estimates,
        ``"nan"`` replaces their rows by NaN, ``"raise"`` raises a
        ``ValueError`` naming them. ``explain`` always returns every row
        with its status and is not affected. ``"keep"`` is the default
        because in a pipeline a transformer must return finite,
        row-aligned output (the next step, a scaler or a classifier, fails
        on NaN, and one hard row would then fail a whole cross-validation);
        the ``ConvergenceWarning`` still names the flagged rows. Choose
        ``"nan"`` before a step that handles missing values (an imputer,
        ``HistGradientBoostingClassifier``) and ``"raise"`` when only
        certified values may go on, as in an audit.

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
    .. [1] L. Chu, X. Hu, J. Hu, L. Wang, J. Pei, "Exact and Consistent
       Interpretation for Piecewise Linear Neural Networks: A Closed Form
       Solution", KDD 2018; its black-box variant OpenAPI.

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
        "estimator": [HasMethods(["fit"]), callable, None],
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
        reuse_regions=False,
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
            self.scale_ = self._resolve_scale(X)
            # Each explanation records the model it queried; a large model's
            # repr costs about a millisecond, once per fit rather than per call.
            self._estimator_repr = repr(self.estimator)
            # The background of contributions and standardized slopes.
            self.mean_, self.std_ = X.mean(axis=0), X.std(axis=0)
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

    def _learn_radius(self, X, frame):
        """The first radius learned from rows of the background (see
        :func:`~sklearn_plm_explain._openapi._radius.learned_radius`)."""
        rows = np.unique(np.linspace(0, X.shape[0] - 1, _CALIBRATION_ROWS).astype(int))
        sample = frame.iloc[rows] if frame is not None else None
        target = np.full(rows.size, -1, dtype=np.intp)
        seed = base_seed(self.random_state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            e = self._explain_range(X[rows], sample, target, seed, 0, rows.size)
        radius = learned_radius(e, self.rtol, self.min_radius, self.max_radius)
        return _DEFAULT_RADIUS if radius is None else radius

    def _numeric_part(self, X, reset):
        """The numeric columns of ``X`` as floats, and the frame if it is mixed.

        Data with non-numeric (string, categorical) columns must come as a
        DataFrame; only its numeric columns are perturbed and explained, the
        others are held at each row's own values.
        """
        if not _has_text_columns(X):
            if not reset and getattr(self, "numeric_features_", None) is not None:
                raise ValueError(
                    "This explainer was fitted on a DataFrame with non-numeric "
                    "columns; pass rows as a DataFrame with the same columns."
                )
            if reset:
                self.numeric_features_ = None
            X = validate_data(
                self, X, dtype=np.float64, reset=reset, ensure_min_samples=1
            )
            if not reset:
                self._check_steps(X)
            return X, None
        validate_data(self, X, skip_check_array=True, reset=reset)
        if reset:
            self.numeric_features_ = np.array(
                [c for c in X.columns if is_numeric_dtype(X[c].dtype)], dtype=object
            )
        numeric = list(self.numeric_features_)
        others = [c for c in X.columns if c not in numeric]
        missing = [c for c in others if X[c].isna().any()]
        if missing:
            raise ValueError(f"Input X has missing values in column(s) {missing}.")
        values = check_array(X[numeric].to_numpy(), dtype=np.float64)
        if not reset:
            self._check_steps(values)
        return values, X.reset_index(drop=True)

    def _check_steps(self, X):
        """Refuse, before any query, rows whose values are so large that even
        the largest cube's step is lost to their rounding: every design drawn
        around them would be singular."""
        step = self.max_radius * self.scale_
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

    def _resolve_classes(self, X, frame):
        if self._kind == "regression":
            if getattr(self.estimator_, "n_outputs_", 1) > 1:
                raise ValueError(
                    "Multi-output regressors are not supported; explain one "
                    "output at a time."
                )
            self._n_outputs = 1
            return None
        classes = getattr(self.estimator_, "classes_", None)
        if classes is None:
            # A bare callable: one query tells how many classes it returns.
            self._n_outputs = None
            out = self._black_box(frame).query(X[:1], np.zeros(1, dtype=np.intp))
            classes = np.arange(out.shape[1])
        self._n_outputs = max(len(classes), 2)
        return np.asarray(classes)

    def _resolve_scale(self, X):
        if isinstance(self.scale, str):
            scale = X.std(axis=0)
            # A column held at one value has a spread of its rounding errors
            # (about eps times its magnitude), not 0: it is constant too.
            constant = scale <= _CONSTANT_SPREAD * np.abs(X).max(axis=0)
            scale = np.where(constant, 0.0, scale)
            positive = scale[scale > 0]
            fallback = np.median(positive) if positive.size else 1.0
            # A constant feature still needs a step: its slope is part of
            # the local model even if the training data never moved it.
            return np.where(scale > 0, scale, fallback)
        scale = np.asarray(self.scale, dtype=np.float64)
        if scale.shape != (self.n_features_in_,) or not np.all(scale > 0):
            raise ValueError(
                f"scale must be 'std' or {self.n_features_in_} positive numbers; "
                f"got shape {scale.shape}."
            )
        return scale

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

    def _explain_range(
        self,
        X,
        frame,
        target_idx,
        seed,
        start,
        stop,
        return_queries=False,
        bar=None,
        pool=None,
    ):
        """The Explanation of rows ``start:stop`` of the validated batch.

        The rows go to the jobs in slices of whole groups (see ``batch_size``
        and :func:`~sklearn_plm_explain._openapi._groups.task_slices`), to the workers
        of ``pool`` when one is given (see
        :func:`~sklearn_plm_explain._utils._blackbox.worker_pool`), each slice
        counted on the progress bar as it returns (``bar``, or a bar of
        these rows).
        """
        if bar is None:
            desc = "OpenAPIExplainer"
            with _progress.progress_bar(stop - start, self.verbose, desc) as bar:
                return self._explain_range(
                    X, frame, target_idx, seed, start, stop, return_queries, bar, pool
                )
        config = self._search_config(return_queries)
        group = self._rows_per_group(X.shape[1])
        table = self._blank(start, stop, config.return_queries)
        args = (X, target_idx, seed, frame, config)
        with workspace_scope():
            try:
                fill_in_groups(
                    table, self._explain_rows, args, self.n_jobs, group, bar, pool
                )
            except ModelResponseError as err:
                if isinstance(err.partial, ResultTable):
                    err.partial = self._assemble(err.partial, X[start:stop])
                raise
        return self._assemble(table, X[start:stop])

    def _rows_per_group(self, d):
        """Rows a job explains at once: all of them unless ``batch_size="auto"``."""
        if self.batch_size != "auto":
            return np.iinfo(np.intp).max
        return rows_per_group(d, self.n_witnesses, self._n_outputs)

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

    def _target_indices(self, target, n):
        if self.classes_ is None or target is None:
            return np.full(n, -1, dtype=np.intp)
        return class_indices(self.classes_, target, n)

    def _black_box(self, frame=None):
        names = getattr(self.estimator_, "feature_names_in_", None)
        template = None if frame is None else (frame, self.numeric_features_)
        bb = BlackBox(
            self.estimator_,
            self.response_method_,
            self._kind,
            self._n_outputs,
            feature_names=names,
            batch_size=None if self.batch_size == "auto" else self.batch_size,
            template=template,
        )
        if not isinstance(self.response_precision, str):
            bb.quantum = float(self.response_precision)
        return bb

    # -- the search -------------------------------------------------------------
    def _search_config(self, return_queries):
        """The search's configuration, from the parameters and fitted state."""
        return SearchConfig(
            kind=self._kind,
            n_outputs=self._n_outputs,
            scale=self.scale_,
            # A stated radius takes effect at once, as every parameter read
            # by explain does; a learned one is the fit's.
            init_radius=(
                self.init_radius_ if self.init_radius == "auto" else self.init_radius
            ),
            min_radius=self.min_radius,
            max_radius=self.max_radius,
            n_witnesses=self.n_witnesses,
            rtol=self.rtol,
            max_iter=self.max_iter,
            reuse_regions=self.reuse_regions,
            response_precision=self.response_precision,
            return_queries=bool(return_queries),
        )

    def _explain_rows(self, rows, X, target, seed, frame, config):
        """The result table of the rows ``rows`` (a slice) of the batch, a
        group of rows at a time (see ``batch_size``)."""
        per_group = self._rows_per_group(X.shape[1])
        return search_in_groups(
            config, lambda: self._black_box(frame), X, target, seed, rows, per_group
        )

    def _blank(self, start, stop, queries=False):
        """The result table of rows ``start:stop``, not run."""
        return ResultTable.blank(
            stop - start,
            n_features=self.scale_.size,
            n_outputs=self._n_outputs,
            offset=start,
            queries=queries,
        )

    def _assemble(self, table, X):
        """One Explanation of the rows ``X`` from their result table."""
        n = X.shape[0]
        merged = dict(table.arrays)
        coef = merged.pop("coef")
        target = merged.pop("target")
        if self.classes_ is None:
            values = coef[:, :, 0]
        else:
            C = coef.shape[2]
            values = C / (C - 1) * coef[np.arange(n), :, np.maximum(target, 0)]
        names = self.get_feature_names_out()
        status = merged.pop("status")
        merged.update(self._presented(values, merged["intercept"], target, X))
        return Explanation(
            values=values,
            target=np.maximum(target, 0),
            classes=self.classes_,
            feature_names=names,
            method="openapi",
            params=self.get_params(deep=False) | {"estimator": self._estimator_repr},
            coef=coef,
            status=status,
            converged=status == "exact",
            **merged,
        )

    def _presented(self, values, intercept, target, X):
        """Contributions relative to the background mean, in the explained
        output's units (the target's mean log-ratio, or the prediction).

        On the row's region the output is ``values @ x + b`` with ``b`` the
        target's intercept (scaled like ``values``), so ``baseline = values
        @ mean_ + b`` and ``baseline + contribution.sum(1)`` is the output.
        """
        if self.classes_ is None:
            b = intercept[:, 0]
        else:
            C = intercept.shape[1]
            b = C / (C - 1) * intercept[np.arange(X.shape[0]), np.maximum(target, 0)]
        return {
            "data": X,
            "contribution": values * (X - self.mean_),
            "standardized": values * self.std_,
            "baseline": values @ self.mean_ + b,
        }


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


def _warn_failures(status, stacklevel):
    failed = status != "exact"
    if not failed.any():
        return
    summary = ", ".join(f"{c} {s}" for s, c in count_statuses(status[failed]).items())
    rows = np.flatnonzero(failed)
    shown = ", ".join(map(str, rows[:10])) + (" ..." if rows.size > 10 else "")
    note = ""
    if (status == "approximate").any():
        note = " Approximate rows are certified to their error_bound."
    warnings.warn(
        f"{failed.sum()} of {status.size} rows were not certified exact "
        f"({summary}; rows {shown}). Their values are best estimates; see "
        f"Explanation.status and error_bound.{note}",
        ConvergenceWarning,
        stacklevel=stacklevel,
    )
