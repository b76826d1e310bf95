"""LIME for tabular data, with the semantics of the ``lime`` package.

The engine follows lime (0.2) so that users can switch: the same sampling
laws, interpretable representation, kernel, surrogate and feature-selection
modes. What differs is how it is computed (see :mod:`._base`): vectorised
neighbourhoods, one weighted Gram matrix per row for every selection mode
and label, and rows explained in batches.
"""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn.utils._param_validation import StrOptions

from sklearn_plm_explain._lime._base import _BaseLime

__all__ = ["LimeTabularExplainer"]


class LimeTabularExplainer(_BaseLime):
    """LIME for tabular data, with the semantics of the ``lime`` package.

    Each row is explained by a weighted linear surrogate fitted on
    perturbations of the row: continuous features are drawn from
    ``N(0, 1) * std`` around the row (or the training mean), categorical and
    discretised features from their training frequencies; the surrogate is
    fitted in the interpretable space (standardised values and "same
    category/bin as the row" indicators) with the kernel
    ``sqrt(exp(-d² / w²))`` of the Euclidean distance to the row.

    Parameters
    ----------
    estimator : fitted estimator or callable, default=None
        The model explained. Classification: a classifier with
        ``predict_proba`` or a callable returning probabilities of shape
        ``(n, n_classes)``; regression: a regressor with ``predict`` or a
        callable returning predictions. A fitted model is never refitted.
    mode : {"classification", "regression"}, default="classification"
        What the model's responses are.
    feature_names : array-like of str, default=None
        Names of the features, for the explanation and its labels (as in
        lime); ``None`` takes the column names of a DataFrame ``X`` in
        ``fit``, or the model's ``feature_names_in_``, or ``x0, x1, ...``.
    categorical_features : array-like of int, str or bool, default=None
        Categorical columns (indices, names of DataFrame columns, or a mask).
        ``None`` detects non-numeric columns (DataFrame dtypes or strings in
        an object array). Values may be integer codes or strings; the model
        is always queried with values in the original representation.
    discretize_continuous : bool, default=True
        Replace every numeric feature by its bin (as lime does).
    discretizer : {"quartile", "decile", "entropy"}, default="quartile"
        Bins learned in ``fit``; ``"entropy"`` uses the thresholds of a
        depth-3 tree on each feature and needs ``y``.
    sample_around_instance : bool, default=False
        Centre continuous perturbations at the row instead of the training
        mean (only matters with ``discretize_continuous=False``).
    kernel_width : float, default=None
        Width ``w`` of the kernel; ``None`` means ``0.75 * sqrt(n_features)``.
    kernel : callable, default=None
        ``kernel(distances, kernel_width) -> weights``; ``None`` is lime's
        exponential kernel.
    feature_selection : {"auto", "none", "forward_selection", "highest_weights", \
            "lasso_path"}, default="auto"
        How the ``num_features`` features of the surrogate are chosen
        (``"auto"``: forward selection up to 6 features, else highest
        weights).
    num_features : int, default=10
        Number of features in each explanation.
    num_samples : int, default=5000
        Size of each neighbourhood, the explained row included.
    model_regressor : regressor, default=None
        Surrogate fitted with ``sample_weight``; ``None`` is
        ``Ridge(alpha=1)``. It must expose ``coef_`` and ``intercept_``.
    sampling : {"random", "qmc"}, default="random"
        ``"random"`` draws independent perturbations, as lime does;
        ``"qmc"`` draws them from a scrambled Sobol' sequence (one per call,
        each row reading it through its own shift and reflection of the
        columns), mapped through the same inverse distributions: every marginal
        is the same, but the sample covers the neighbourhood more evenly, so
        surrogates and their selected features vary less from seed to seed.
    batch_size : int, default=None
        Largest number of points sent to the model in one call; rows are
        grouped so that one call carries about this many points. ``None``
        groups up to 32768 points per call (fewer above 64 features: at most
        about 2 million values, 16 MiB, per call).
    n_jobs : int, default=None
        Chunks of rows explained in parallel. ``None`` means 1 unless in a
        :obj:`joblib.parallel_config` context; ``-1`` uses all processors.
    random_state : int, RandomState instance or None, default=None
        Seed of the perturbations. Each row gets its own stream derived from
        this seed and the row's content, so results do not depend on the
        batch or on ``n_jobs`` (identical rows get identical explanations).
    verbose : int, default=0
        Above 0, ``explain``, ``transform`` and ``score`` show a progress bar
        of the rows done, with their rate and the time left, on stderr
        (counted as each group of rows returns, also with ``n_jobs > 1``).
        ``0`` prints nothing.

    Attributes
    ----------
    estimator_ : object
        The model queried (the ``estimator`` itself when already fitted).
    classes_ : ndarray or None
        Classes of the model (``None`` in regression mode).
    categorical_features_ : ndarray of int
        Columns treated as categorical.
    kernel_width_ : float
        Kernel width used.
    space_ : object
        Training statistics: means, standard deviations, category and bin
        frequencies, bin edges and per-bin sampling tables.
    n_outputs_ : int
        Number of model outputs explained: the number of classes, or 1 in
        regression mode.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of str
        Names of the features, when ``X`` in ``fit`` was a DataFrame.

    See Also
    --------
    StableLIMEExplainer : LIME whose feature selection is stabilised by a
        hypothesis test on the LARS path, with an adaptive sample size.

    Notes
    -----
    ``values`` of the returned :class:`Explanation` are the surrogate's
    weights on the interpretable features (0 for features not selected);
    ``selected`` lists the selected features by decreasing ``|weight|`` and
    ``selected_names`` their labels in lime's wording (``debt <= 10.70``,
    ``1.00 < x <= 2.00``, ``size_cat=big``; a continuous feature by name);
    ``score`` is the weighted R² of the surrogate on its own neighbourhood
    (lime's ``score``); ``local_pred`` its prediction at the row;
    ``contribution``, ``standardized`` and ``baseline`` the readings of
    :meth:`Explanation.attributions` (``baseline + contribution.sum(1) ==
    local_pred``); ``data`` the explained rows.

    ``effective_samples`` is the Kish size ``(Σw)² / Σw²`` of the row's
    kernel weights. Below ten per surrogate parameter (``10 (k + 1)`` for
    ``k`` selected features) the weights sit on too few perturbations for the
    surrogate to be determined by the data, usually because ``kernel_width``
    is too narrow for the neighbourhood: such a row has ``status
    "few_effective_samples"`` and ``converged=False``, and :meth:`explain`
    warns. Every other row is ``"converged"``.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_plm_explain import LimeTabularExplainer
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=500).fit(X, y)
    >>> lime = LimeTabularExplainer(model, num_features=2, num_samples=500,
    ...                             random_state=0).fit(X)
    >>> lime.explain(X[:3]).selected.shape
    (3, 2)
    """

    _parameter_constraints: dict = {
        **_BaseLime._parameter_constraints,
        "feature_selection": [
            StrOptions(
                {"auto", "none", "forward_selection", "highest_weights", "lasso_path"}
            )
        ],
    }

    def __init__(
        self,
        estimator=None,
        *,
        mode="classification",
        feature_names=None,
        categorical_features=None,
        discretize_continuous=True,
        discretizer="quartile",
        sample_around_instance=False,
        kernel_width=None,
        kernel=None,
        feature_selection="auto",
        num_features=10,
        num_samples=5000,
        model_regressor=None,
        sampling="random",
        batch_size=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.mode = mode
        self.feature_names = feature_names
        self.categorical_features = categorical_features
        self.discretize_continuous = discretize_continuous
        self.discretizer = discretizer
        self.sample_around_instance = sample_around_instance
        self.kernel_width = kernel_width
        self.kernel = kernel
        self.feature_selection = feature_selection
        self.num_features = num_features
        self.num_samples = num_samples
        self.model_regressor = model_regressor
        self.sampling = sampling
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
