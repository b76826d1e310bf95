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

from sklearn_plm_explain._blackbox import (
    BlackBox,
    ModelResponseError,
    map_row_chunks,
    resolve_estimator,
    resolve_response_method,
    row_generators,
)
from sklearn_plm_explain._certify import (
    BOUND_Z,
    fit_local_models,
    grid_rounded,
    noise_inflation,
)
from sklearn_plm_explain._checkpoint import explain_in_chunks
from sklearn_plm_explain._design import _design
from sklearn_plm_explain._explanation import Explanation, count_statuses
from sklearn_plm_explain._precision import (
    NOISE_CAP,
    PrecisionEvidence,
    relative,
    statistical_abs,
    worst_case_abs,
)
from sklearn_plm_explain._radius import Attempt, RadiusSearch
from sklearn_plm_explain._regions import N_PAIRS, RegionLibrary
from sklearn_plm_explain._validation import (
    class_indices,
    is_numeric_dtype,
    unfitted_on_error,
)

__all__ = ["OpenAPIExplainer", "STATUSES"]

# A row boxed in between too-small and non-linear cubes may use up to this
# many times (d + 1) witnesses at its largest consistent radius.
_MORE_WITNESSES = 4
_SMALLEST_NORMAL = np.finfo(np.float64).tiny
# A row whose noise scale exceeds its relative rounding floor this many times
# owes its imprecision to saturated probabilities.
_ABSOLUTE_DOMINANCE = 100.0
# Rows with coarse responses (float32, rounded, noisy) step every feature by
# at least this fraction of the median scale: a nearly constant feature (a
# digit's corner pixel) would otherwise get a tiny step, and its slope's error
# in input units, which grows as the step shrinks, would rule the L1 bound.
_MIN_RELATIVE_SCALE = 0.1
# With region reuse, the first wave of rows searched is this fraction of the
# batch; waves then double, so the number of rounds grows by a constant.
_FIRST_WAVE = 32

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
    "not_piecewise_linear": "residuals scale like the square of the radius "
    "over several radii: the model is smooth and curved, not piecewise linear",
    "flat": "the responses are bitwise identical all around the row (a dead "
    "region, e.g. every unit of a ReLU layer off; for responses coarser than "
    "float64, on the largest cube): the slopes are zero to within the response "
    "precision, which has no relative error to certify",
    "not_run": "not explained because the model failed on another row first",
}


class OpenAPIExplainer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
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
    response_method : {"auto", "predict_proba", "decision_function", "predict"}, \
            default="auto"
        What to query. ``"auto"`` uses ``predict`` for regressors, then
        ``decision_function`` (logits: exact even where probabilities
        saturate), then ``predict_proba``. Callables are treated as
        ``predict_proba`` unless told otherwise.
    init_radius : float, default=2e-4
        First half-width of the sampling cube, in units of each feature's
        scale (see ``scale``).
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
    batch_size : int, default=None
        Largest number of points sent to the model in one call. ``None``
        sends each attempt's points for all rows of a chunk in one call.
    n_jobs : int, default=None
        Number of jobs explaining chunks of rows in parallel. ``None`` means 1
        unless in a :obj:`joblib.parallel_config` context. ``-1`` means all
        processors.
    random_state : int, RandomState instance or None, default=None
        Seeds the sampling. Each row draws from its own generator derived from
        this seed and the row's values, so results do not depend on ``n_jobs``
        or on the other rows of the batch.
    response_precision : {"auto", "float64", "float32"} or float, default="auto"
        Precision of the model's responses, which sets the noise model of the
        certificate. ``"auto"`` reads it, row by row, from the responses: how
        many significant bits the values carry (float32 values, or the
        shortest decimals of float32 values as a JSON encoder writes them,
        are float32), whether every value is a multiple of a decimal quantum
        ``10**-k`` (rounded responses), and whether the row's response
        repeats when the row is sent again in a later call (one more query;
        a non-deterministic service is ``"noisy"`` and its measured scatter
        joins the noise model). ``"float64"`` or ``"float32"`` state the
        binary precision; a float states the quantum the responses are
        rounded to (e.g. ``1e-6``). Determinism is checked in every case.
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
        "init_radius": [Interval(Real, 0, None, closed="neither")],
        "min_radius": [Interval(Real, 0, None, closed="neither")],
        "max_radius": [Interval(Real, 0, None, closed="neither")],
        "n_witnesses": [Interval(Integral, 2, None, closed="left")],
        "rtol": [Interval(Real, 0, 1, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "scale": [StrOptions({"std"}), "array-like"],
        "reuse_regions": ["boolean"],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "n_jobs": [Integral, None],
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
        init_radius=2e-4,
        min_radius=1e-9,
        max_radius=1.0,
        n_witnesses=5,
        rtol=1e-8,
        max_iter=20,
        scale="std",
        reuse_regions=False,
        batch_size=None,
        n_jobs=None,
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
        if self.min_radius > self.init_radius or self.init_radius > self.max_radius:
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
            # The background of contributions and standardized slopes.
            self.mean_, self.std_ = X.mean(axis=0), X.std(axis=0)
        return self

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
        return values, X.reset_index(drop=True)

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
            For invalid rows or targets, before any query is sent.
        ModelResponseError
            If the model returns invalid responses; names the rows and keeps
            the finished rows in its ``partial`` attribute.
        CheckpointError
            For a checkpoint that is corrupted or was written by another run.
        """
        check_is_fitted(self)
        X, frame = self._numeric_part(X, reset=False)
        target_idx = self._target_indices(target, X.shape[0])

        def run(start, stop, seed):
            return self._explain_range(
                X, frame, target_idx, seed, start, stop, return_queries
            )

        explanation = explain_in_chunks(
            self,
            checkpoint,
            run,
            X.shape[0],
            rows=(X, frame),
            target=(target_idx, np.array([bool(return_queries)])),
            not_run=lambda a, b: self._assemble([{"offset": a}], X[a:b], a),
        )
        _warn_failures(explanation.status)
        return explanation

    def _explain_range(
        self, X, frame, target_idx, seed, start, stop, return_queries=False
    ):
        """The Explanation of rows ``start:stop`` of the validated batch."""
        try:
            parts = map_row_chunks(
                self._explain_rows,
                stop - start,
                self.n_jobs,
                X,
                target_idx,
                seed,
                frame,
                bool(return_queries),
                start=start,
            )
        except ModelResponseError as err:
            if err.partial is not None and not isinstance(err.partial, Explanation):
                err.partial = self._assemble([err.partial], X[start:stop], start)
            raise
        return self._assemble(parts, X[start:stop], start)

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
            batch_size=self.batch_size,
            template=template,
        )
        if not isinstance(self.response_precision, str):
            bb.quantum = float(self.response_precision)
        return bb

    # -- the per-chunk algorithm --------------------------------------------------
    def _explain_rows(self, rows, X, target, seed, frame, return_queries=False):
        X, target = X[rows], target[rows]
        state = _ChunkState(X, rows.start, self._n_outputs, self.init_radius)
        state.prec = PrecisionEvidence(len(X), self.response_precision)
        if return_queries:
            state.record_queries()
        bb = self._black_box(frame)
        try:
            self._query_origins(bb, state, target)
            rngs = row_generators(X, seed)
            if self.reuse_regions:
                state.library = RegionLibrary(centre=self._kind != "regression")
            self._solve(bb, state, rngs)
        except ModelResponseError as err:
            state.status[state.status == ""] = "not_run"
            err.partial = state.as_dict() | {"offset": rows.start}
            raise
        return state.as_dict()

    def _new_search(self, state, i):
        d = state.d
        search = RadiusSearch(
            self.init_radius,
            self.min_radius,
            self.max_radius,
            self.rtol,
            d,
            self.n_witnesses,
            max(self.n_witnesses, _MORE_WITNESSES * (d + 1)),
            noise_cap=NOISE_CAP,
        )
        search.signature = state.prec.signature(i)
        return search

    def _solve(self, bb, state, rngs):
        """Rounds of one model call each, until every row has a status.

        Without region reuse every row starts its radius search at once. With
        it, rows are released for a search in growing waves; the others wait
        for a certified model their response agrees with, which a fresh
        antithetic pair of neighbours then confirms (its queries join the
        round's call).
        """
        waiting = np.flatnonzero(state.status == "")
        searches = {}
        release = waiting.size
        if state.library is not None:
            release = max(1, waiting.size // _FIRST_WAVE)
        checked = 0
        while waiting.size or searches:
            match = np.full(waiting.size, -1, dtype=np.intp)
            if state.library is not None and len(state.library) > checked:
                match = state.library.first_match(
                    state.X[waiting], state.L0[waiting], state.tau0[waiting], checked
                )
                checked = len(state.library)
                # Agreement within a noise that is not at float precision
                # (probabilities known only as 1 - p, float32 or rounded
                # responses) cannot tell regions apart.
                match[~state.sharp[waiting]] = -1
            free = waiting[match < 0][:release]
            release *= 2
            for i in free:
                searches[i] = self._new_search(state, i)
            confirm = self._probe_plan(state, waiting, match)
            far = [i for i, (_, rho) in confirm.items() if not np.isfinite(rho)]
            for i in far:
                del confirm[i]
                searches[i] = self._new_search(state, i)
            waiting = np.setdiff1d(
                waiting, np.concatenate([free, list(confirm), far]).astype(np.intp)
            )
            released = self._round(bb, state, searches, rngs, confirm)
            for i in released:
                searches[i] = self._new_search(state, i)

    def _probe_plan(self, state, waiting, match):
        """Reuse candidates: ``{row: (model, probe radius)}``."""
        rows = waiting[match >= 0]
        if rows.size == 0:
            return {}
        models = match[match >= 0]
        rho = state.library.probe_radius(models)
        return {i: (j, r) for i, j, r in zip(rows, models, rho)}

    def _query_origins(self, bb, state, target):
        R0 = bb.query(state.X, state.owners(np.arange(state.n)))
        state.n_queries += 1
        state.R0 = R0
        state.prec.set_origins(R0)
        model = state.prec.model(np.arange(state.n))
        state.L0, sat = self._to_log(R0, model.tiny)
        state.tau0 = self._tau(state.L0, R0, model)
        state.sharp = model.sharp.copy()
        if self._kind == "proba":
            state.sharp &= ~grid_rounded(R0).any(axis=1)
        state.status[sat] = "saturated"
        state.radius[sat] = np.nan
        predicted = np.argmax(R0, axis=1)
        state.target = np.where(target >= 0, target, predicted)

    def _to_log(self, R, tiny=_SMALLEST_NORMAL):
        if self._kind != "proba":
            return R, np.zeros(R.shape[0], dtype=bool)
        # Below the smallest normal number of the response precision a
        # probability has underflowed, or sits on a floor a model put there
        # (e.g. against exact zeros): its log says nothing about the logits.
        zero = R < np.reshape(tiny, (-1, 1))
        with np.errstate(divide="ignore"):
            L = np.log(np.where(zero, 1.0, R))
        return L, zero.any(axis=1)

    def _centred_log(self, R):
        """Centred log values of responses (for the scatter of repeats)."""
        if self._kind != "proba":
            L = np.asarray(R, dtype=np.float64)
        else:
            with np.errstate(divide="ignore"):
                L = np.log(np.asarray(R, dtype=np.float64))
        if self._kind == "regression":
            return L
        return L - L.mean(axis=1, keepdims=True)

    def _round(self, bb, state, searches, rngs, confirm):
        """One model call: the rows' attempts and the reuse confirmations.

        Each row also sends itself again in its first round (and, once its
        answers turn out not to repeat, a few more times in the next): a
        deterministic service answers bitwise as before, a noisy one shows
        its scatter. Returns the rows whose confirmation failed, to be searched
        from now on.
        """
        rows = np.fromiter(searches, dtype=np.intp)
        steps, draws = [], []
        for i in rows:
            search = searches[i]
            step = search.radius * self._row_scale(search)
            u = _design(rngs[i], search.n_new, state.d, fresh=not search.keep)
            draws.append(state.X[i] + step * u)
            steps.append(step)
        c_rows = np.fromiter(confirm, dtype=np.intp)
        for i in c_rows:
            # Antithetic pairs in independent directions: if the row sits on a
            # region boundary, one of each pair lies beyond it, so a boundary
            # row is never waved through; and a slope difference above the
            # certified tolerance shows in one of the directions (see
            # ``RegionLibrary.probe_radius``).
            g = rngs[i].standard_normal((N_PAIRS, state.d))
            u = g * confirm[i][1] * self.scale_
            draws.append(state.X[i] + np.concatenate([u, -u]))
        r_rows, r_counts = [], []
        for i in rows:
            k = state.repeats_due(i)
            if k:
                r_rows.append(i)
                r_counts.append(k)
                draws.append(np.repeat(state.X[i][None], k, axis=0))
        r_rows = np.array(r_rows, dtype=np.intp)
        counts = np.array([len(p) for p in draws], dtype=np.intp)
        owners = np.repeat(np.concatenate([rows, c_rows, r_rows]), counts)
        R = bb.query(np.concatenate(draws), state.owners(owners))
        state.n_queries[rows] += counts[: rows.size]
        state.n_queries[c_rows] += 2 * N_PAIRS
        np.add.at(state.n_queries, r_rows, np.asarray(r_counts, dtype=np.intp))
        parts = np.split(R, np.cumsum(counts)[:-1])
        n_fit = rows.size + c_rows.size
        if r_rows.size:
            model = state.prec.model(r_rows)
            P0 = state.R0[r_rows, None, :] if self._kind == "proba" else None
            floor = model.rounding_tau(state.L0[r_rows, None, :], P0)[:, 0]
            for i, resp, f in zip(r_rows, parts[n_fit:], floor):
                state.repeated[i] = True
                state.prec.add_repeats(i, resp, self._centred_log, f)
        self._attempt(state, searches, rows, draws, parts, steps)
        # A finished row's last cube is no longer needed.
        for i in set(state.cubes).difference(searches):
            del state.cubes[i]
        c_points = np.concatenate(draws[rows.size : n_fit]) if c_rows.size else None
        return self._confirm(state, confirm, c_rows, c_points, parts[rows.size : n_fit])

    def _confirm(self, state, confirm, rows, points, parts):
        if rows.size == 0:
            return []
        p = 2 * N_PAIRS
        R = np.concatenate(parts)
        origin = np.repeat(rows, p)
        for i, resp in zip(rows, parts):
            state.prec.update(i, resp)
        model = state.prec.model(origin)
        L, bad = self._to_log(R, model.tiny)
        tau = self._tau(L, R, model)
        models = np.array([confirm[i][0] for i in rows], dtype=np.intp)
        agree = state.library.confirm(
            state.X[rows],
            state.L0[rows],
            state.tau0[rows],
            points.reshape(rows.size, p, -1),
            L.reshape(rows.size, p, -1),
            tau.reshape(rows.size, p),
            models,
        )
        usable = (~bad & model.sharp).reshape(rows.size, p).all(axis=1)
        ok = agree & usable
        for k, (i, j, good) in enumerate(zip(rows, models, ok)):
            if good:
                state.record_reuse(i, *state.library.model(j))
                state.keep_queries(i, points[p * k : p * (k + 1)])
        return rows[~ok]

    def _row_scale(self, search):
        """Per-feature unit of a row's cube (wider floor for coarse rows)."""
        if not search.coarse:
            return self.scale_
        return np.maximum(self.scale_, _MIN_RELATIVE_SCALE * np.median(self.scale_))

    def _tau(self, L, R, model):
        """Noise scale of single responses (see ``NoiseModel.tau``)."""
        P = R[:, None, :] if self._kind == "proba" else None
        return model.tau(L[:, None, :], P, self._kind != "regression")[:, 0]

    def _attempt(self, state, searches, rows, draws, parts, steps):
        cubes = []
        for i, pts, resp in zip(rows, draws, parts):
            search = searches[i]
            state.prec.update(i, resp)
            signature = state.prec.signature(i)
            if signature != search.signature:
                # What the responses showed changed the noise model (e.g. a
                # first answer of exactly 0.5 looked like one decimal): the
                # earlier attempts were judged by another one.
                search.reset()
                search.signature = signature
                state.candidates[i] = []
                state.candidate_points[i] = []
            if search.keep:
                old_pts, old_resp = state.cubes[i]
                pts, resp = np.vstack([old_pts, pts]), np.vstack([old_resp, resp])
            state.cubes[i] = (pts, resp)
            cubes.append((pts, resp))
        sizes = np.array([len(c[0]) for c in cubes])
        for size in np.unique(sizes):
            g = np.flatnonzero(sizes == size)
            self._certify(
                state,
                searches,
                rows[g],
                np.stack([cubes[j][0] for j in g]),
                np.stack([cubes[j][1] for j in g]),
                np.stack([steps[j] for j in g]),
            )

    def _certify(self, state, searches, rows, points, R, step):
        n, d = len(rows), state.d
        model = state.prec.model(rows)
        tiny = np.repeat(model.tiny, R.shape[1])
        L, bad = self._to_log(R.reshape(-1, R.shape[2]), tiny)
        L = L.reshape(R.shape)
        bad = bad.reshape(n, -1).any(axis=1)
        # The design uses the points as actually represented, not as drawn.
        U = (points - state.X[rows, None, :]) / step[:, None, :]
        U = np.concatenate([np.zeros((n, 1, d)), U], axis=1)
        Y = np.concatenate([state.L0[rows, None, :], L], axis=1)
        self._judge(state, searches, rows, U, Y, step, bad, R, model)

    def _judge(self, state, searches, rows, U, Y, step, bad, R, model):
        P = None
        if self._kind == "proba":
            P = np.concatenate([state.R0[rows, None, :], R], axis=1)
        centre = self._kind != "regression"
        tau = model.tau(Y, P, centre)
        slope, intercept, sigma_hat, se_x = fit_local_models(
            U, Y, state.X[rows], step, centre, tau
        )
        # One noise level for all columns: the centred log-ratios share their
        # rounding errors, and a column whose own residuals are small by
        # chance must not get a bound that is small by chance. In units of
        # the noise model, whose scale 1 is the floor.
        pooled = sigma_hat.max(axis=1) * noise_inflation(U.shape[1] - U.shape[2] - 1)
        learned = np.array(
            [
                0.0 if searches[i].noise is None else searches[i].noise.max()
                for i in rows
            ]
        )
        sigma = np.maximum(np.maximum(pooled, 1.0), learned)
        by_estimate = pooled >= np.maximum(1.0, learned)
        stat, wc = self._bound_parts(model, U, Y, P, tau, step, se_x, sigma, centre)
        rel = _relative_bound(stat, wc, slope, model.float64)
        rel = np.where(bad, np.inf, rel)
        # Bitwise identical responses everywhere in the cube: a dead region;
        # unless the row is saturated, where rounding pins the responses, or
        # the responses are coarse (float32, rounded), where they are pinned
        # on any cube too small for the change to show: such a cube's slope
        # is unresolved (its bound infinite) and the search grows it. A
        # float32 row still pinned on the largest cube is flat.
        pinned = np.all(Y == Y[:, :1, :], axis=(1, 2))
        flat = pinned & ~bad & state.sharp[rows]
        wide_flat = (
            pinned
            & ~bad
            & model.coarse
            & (model.quantum == 0)
            & model.deterministic
            & np.array([searches[i].radius >= self.max_radius for i in rows])
        )
        clipped = self._clipped(P, len(rows)) & model.float64
        for j, i in enumerate(rows):
            search = searches[i]
            if flat[j] or wide_flat[j]:
                state.record_flat(i, Y[j, 0], search.radius)
                del searches[i]
                continue
            if clipped[j] or (pinned[j] and model.float64[j] and not state.sharp[i]):
                # Pinned responses carry no slope: no estimate from this cube.
                state.n_iter[i] += 1
                state.status[i] = "saturated"
                del searches[i]
                continue
            search.coarse = bool(model.coarse[j])
            state.add_candidate(
                i,
                slope[j],
                intercept[j],
                stat[j],
                wc[j],
                sigma[j],
                search.radius,
                len(search.history),
                bool(model.float64[j]),
            )
            search.record(
                Attempt(
                    search.radius,
                    sigma_hat[j],
                    rel[j],
                    bool(bad[j]),
                    bool(by_estimate[j]),
                    U.shape[1] - U.shape[2] - 1,
                )
            )
            # A cube whose residuals stand above the noise is not linear: its
            # bound, read from those residuals as if they were noise, does not
            # cover the bias a boundary inside it causes.
            # Coarse rows claim it only inside the margin of any kink seen.
            inside = not search.coarse or search.radius <= search.safe_radius()
            if rel[j] <= self.rtol and search.last_consistent() and inside:
                state.record_estimate(i, slope[j], intercept[j], rel[j], search.radius)
                state.keep_queries(i, state.cubes[i][0])
                state.status[i] = "exact"
                if state.library is not None and model.float64[j]:
                    state.library.add(
                        state.X[i],
                        slope[j],
                        intercept[j],
                        rel[j],
                        state.offset + i,
                        search.radius,
                        sigma[j] * se_x[j],
                    )
                del searches[i]
                continue
            nxt = None
            if state.n_iter[i] < self.max_iter:
                nxt = search.next_radius()
            if nxt is None:
                self._finish(state, i, search)
                del searches[i]
            else:
                search.radius = nxt

    def _bound_parts(self, model, U, Y, P, tau, step, se_x, sigma, centre):
        """Absolute L1 bounds (n, K) on the slopes: statistical, worst case.

        The statistical part is the noise level propagated through the fit.
        For rounded responses the worst-case part adds the bounded rounding
        error, propagated through the pseudo-inverse (rigorous if the model is
        affine on the cube); for a noisy service the level is at least the
        upper confidence bound of the scatter its repeats showed.
        """
        K = Y.shape[2]
        # Deterministic float64 rows: the certificate's original form, the
        # noise level times the sum of the standard errors (the floor there
        # is orders of magnitude above the actual rounding noise).
        stat = (BOUND_Z * sigma * se_x.sum(axis=1))[:, None] * np.ones(K)
        coarse = model.coarse
        if coarse.any():
            point, ucb = model.scatter_floor()
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(point > 0, ucb / point, np.where(ucb > 0, np.inf, 1.0))
            level = np.maximum(sigma, ratio)
            upper = statistical_abs(level[:, None], se_x, n_columns=K) * np.ones(K)
            stat = np.where(coarse[:, None], upper, stat)
        wc = np.zeros_like(stat)
        rounded = model.quantum > 0
        if rounded.any():
            g = np.flatnonzero(rounded)
            delta = model.take(g).delta(Y[g], None if P is None else P[g], centre)
            finite = np.all(np.isfinite(delta), axis=(1, 2))
            delta = np.where(np.isfinite(delta), delta, 0.0)
            part = worst_case_abs(U[g], tau[g], delta, step[g])
            wc[g] = np.where(finite[:, None], part, np.inf)
        return stat, wc

    def _finish(self, state, i, search):
        """Status and estimate of a row whose search ended without an exact cube.

        Its estimate is the consistent attempt with the smallest bound (a cube
        that failed the residual test never lends its bound to a row): for
        coarse responses, where ``rtol`` is mostly out of reach, that attempt
        certifies the row as ``"approximate"`` when its bound is below 1.
        """
        limit = search.safe_radius() if search.coarse else np.inf
        best, rel = state.best_candidate(i, search, limit)
        if best is not None:
            slope, intercept, radius, idx = best
            state.record_estimate(i, slope, intercept, rel, radius)
            state.keep_candidate_queries(i, idx)
        else:
            state.record_fallback(i)
        if (
            search.coarse
            and best is not None
            and rel < 1.0
            and not self._absolute_noise(state, i)
        ):
            state.status[i] = "exact" if rel <= self.rtol else "approximate"
            return
        state.status[i] = self._failure_status(state, i, search)
        if state.status[i] == "saturated":
            # Its noise model does not hold (the responses' precision is lost
            # to an absolute error): no bound.
            state.error_bound[i] = np.inf

    @staticmethod
    def _clipped(P, n):
        """Rows whose cube shows a class probability held at one value.

        Under a softmax of affine logits a probability below 1/2 changes in
        its last bits wherever the others change: one that stays bitwise
        constant across the cube while they move has been clipped or floored
        by the model, and its log-ratios are not the logits'.
        """
        if P is None:
            return np.zeros(n, dtype=bool)
        constant = np.all(P == P[:, :1, :], axis=1) & (P[:, 0, :] < 0.5)
        moving = ~np.all(P == P[:, :1, :], axis=1)
        return constant.any(axis=1) & moving.any(axis=1)

    def _failure_status(self, state, i, search):
        status = search.failure_status()
        if status in ("imprecise", "boundary") and self._absolute_noise(state, i):
            # The responses' precision is lost because a probability sits so
            # close to 0 that it is only known as 1 - p: no cube both small
            # enough and resolved exists because of saturation, whatever the
            # region's size.
            return "saturated"
        return status

    def _absolute_noise(self, state, i):
        """The row's own noise is ruled by the absolute error of a 1 - p."""
        if self._kind != "proba":
            return False
        model = state.prec.model([i])
        L0 = state.L0[i][None, None, :]
        with_grid = model.rounding_tau(L0, state.R0[i][None, None, :])[0, 0]
        relative = model.rounding_tau(L0, None)[0, 0]
        return with_grid > _ABSOLUTE_DOMINANCE * relative

    def _assemble(self, parts, X, first=0):
        """One Explanation of the rows ``X`` (rows ``first`` on of the batch)."""
        n = X.shape[0]
        if "offset" in parts[0]:
            # A partial result from a failing chunk: the other rows never ran.
            merged = _pad_partial(parts[0], n, self._n_outputs, self.scale_.size, first)
        else:
            keys = parts[0].keys()
            merged = {key: np.concatenate([p[key] for p in parts]) for key in keys}
        coef = merged.pop("coef")
        target = merged.pop("target")
        if self.classes_ is None:
            values = coef[:, :, 0]
        else:
            C = coef.shape[2]
            values = C / (C - 1) * coef[np.arange(n), :, np.maximum(target, 0)]
        names = self.get_feature_names_out()
        status = merged["status"].astype(object)
        merged.pop("status")
        merged["response_precision"] = merged["response_precision"].astype(object)
        merged.update(self._presented(values, merged["intercept"], target, X))
        return Explanation(
            values=values,
            target=np.maximum(target, 0),
            classes=self.classes_,
            feature_names=names,
            method="openapi",
            params=self.get_params(deep=False) | {"estimator": repr(self.estimator)},
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


def _relative_bound(stat, wc, slope, float64):
    """Bound on the relative L1 error of every column's slope, worst column.

    Deterministic float64 rows keep the certificate's original form (the
    absolute bound over the estimate's norm, exact to far below ``rtol``);
    coarse rows add the worst-case part and divide by the smallest norm the
    true slope can have.
    """
    norm = np.abs(slope).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        plain = np.where(norm > 0, stat / norm, np.inf)
    coarse = relative(stat + wc, slope)
    return np.where(float64[:, None], plain, coarse).max(axis=1)


class _ChunkState:
    """Per-row results of one chunk, filled in as attempts come back."""

    def __init__(self, X, offset, n_outputs, init_radius):
        n, d = X.shape
        self.X, self.offset, self.n, self.d = X, offset, n, d
        self.R0 = self.L0 = self.tau0 = self.library = self.prec = None
        self.cubes = {}
        self.candidates = [[] for _ in range(n)]
        # With return_queries: the points of each candidate's cube.
        self.candidate_points = [[] for _ in range(n)]
        self.repeated = np.zeros(n, dtype=bool)
        self.reused_from = np.full(n, -1, dtype=np.intp)
        self.target = np.full(n, -1, dtype=np.intp)
        self.coef = np.full((n, d, n_outputs), np.nan)
        self.intercept = np.full((n, n_outputs), np.nan)
        self.error_bound = np.full(n, np.inf)
        self.radius = np.full(n, float(init_radius))
        self.n_iter = np.zeros(n, dtype=np.intp)
        self.n_queries = np.zeros(n, dtype=np.intp)
        self.status = np.full(n, "", dtype=object)
        self.queries = None

    def record_queries(self):
        """Keep, per row, the points its reported local model was fitted on."""
        self.queries = np.empty(self.n, dtype=object)
        for i in range(self.n):
            self.queries[i] = np.empty((0, self.d))

    def keep_queries(self, i, points):
        if self.queries is not None:
            self.queries[i] = np.array(points, dtype=np.float64)

    def owners(self, local_rows):
        return local_rows + self.offset

    def repeats_due(self, i):
        """Queries of row ``i`` itself to send again in this round."""
        if not self.repeated[i]:
            return 1
        return self.prec.needs_repeats(i)

    def add_candidate(self, i, slope, intercept, stat, wc, sigma, radius, k, f64):
        self.n_iter[i] += 1
        self.candidates[i].append((slope, intercept, stat, wc, sigma, radius, k, f64))
        if self.queries is not None:
            self.candidate_points[i].append(self.cubes[i][0])

    def best_candidate(self, i, search, limit=np.inf):
        """The consistent attempt with the smallest bound, under the noise
        level known now (a level learned later raises earlier bounds), among
        those at most ``limit`` in radius."""
        learned = 0.0 if search.noise is None else float(np.max(search.noise))
        best, best_rel = None, np.inf
        for idx, candidate in enumerate(self.candidates[i]):
            slope, intercept, stat, wc, sigma, radius, k, f64 = candidate
            if k >= len(search.history) or not search.consistent(k):
                continue
            if radius > limit:
                continue
            scaled = stat * max(1.0, learned / sigma)
            rel = _relative_bound(scaled[None], wc[None], slope[None], np.array([f64]))[
                0
            ]
            if best is None or rel < best_rel:
                best, best_rel = (slope, intercept, radius, idx), rel
        return best, best_rel

    def keep_candidate_queries(self, i, idx):
        """Keep the points of the cube candidate ``idx`` of row ``i`` came from."""
        if self.queries is not None:
            self.keep_queries(i, self.candidate_points[i][idx])

    def record_estimate(self, i, slope, intercept, rel, radius):
        self.coef[i], self.intercept[i] = slope, intercept
        self.error_bound[i], self.radius[i] = rel, radius

    def record_fallback(self, i):
        """No consistent attempt: the last estimate, without a bound."""
        if self.candidates[i]:
            slope, intercept, *_, radius, _k, _f = self.candidates[i][-1]
            self.coef[i], self.intercept[i] = slope, intercept
            self.radius[i] = radius
            if i in self.cubes:
                self.keep_queries(i, self.cubes[i][0])
        self.error_bound[i] = np.inf

    def record_reuse(self, i, slope, intercept, rel, owner):
        self.coef[i], self.intercept[i] = slope, intercept
        self.error_bound[i], self.radius[i] = rel, np.nan
        self.reused_from[i] = owner
        self.status[i] = "exact"

    def record_flat(self, i, L0, radius):
        self.n_iter[i] += 1
        self.coef[i] = 0.0
        self.intercept[i] = L0 - L0.mean() if L0.size > 1 else L0
        self.error_bound[i], self.radius[i] = np.inf, radius
        self.status[i] = "flat"
        self.keep_queries(i, self.cubes[i][0])

    def as_dict(self):
        extra = {} if self.queries is None else {"queries": self.queries}
        return {
            "coef": self.coef,
            "intercept": self.intercept,
            "target": self.target,
            "status": self.status.astype(str),
            "error_bound": self.error_bound,
            "radius": self.radius,
            "n_iter": self.n_iter,
            "n_queries": self.n_queries,
            "reused_from": self.reused_from,
            "response_precision": self.prec.label(np.arange(self.n)).astype(str),
        } | extra


def _has_text_columns(X):
    """A DataFrame with at least one column that is not numeric."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "columns"):
        return False
    return not all(is_numeric_dtype(X[c].dtype) for c in X.columns)


def _pad_partial(part, n, n_outputs, d, first=0):
    part = dict(part)
    rows = slice(part.pop("offset") - first, None)
    full = {
        "coef": np.full((n, d, n_outputs), np.nan),
        "intercept": np.full((n, n_outputs), np.nan),
        "target": np.zeros(n, dtype=np.intp),
        "status": np.full(n, "not_run", dtype=object),
        "error_bound": np.full(n, np.inf),
        "radius": np.full(n, np.nan),
        "n_iter": np.zeros(n, dtype=np.intp),
        "n_queries": np.zeros(n, dtype=np.intp),
        "reused_from": np.full(n, -1, dtype=np.intp),
        "response_precision": np.full(n, "", dtype=object),
    }
    if "queries" in part:
        full["queries"] = np.empty(n, dtype=object)
        for i in range(n):
            full["queries"][i] = np.empty((0, d))
    for key, arr in part.items():
        full[key][rows][: arr.shape[0]] = arr
    return full


def _warn_failures(status):
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
        stacklevel=3,
    )
