"""The stability of selected features across repeated explanations
(Jaccard@k, as in the S-LIME paper)."""

# SPDX-License-Identifier: BSD-3-Clause

import itertools
from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import (
    Interval,
    validate_params,
)

from sklearn_plm_explain._explanation import Explanation


@validate_params(
    {
        "selected": ["array-like", list],
        "k": [Interval(Integral, 1, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def jaccard_stability(selected, k):
    """Mean pairwise Jaccard index of the top-``k`` feature sets (Jaccard@k).

    The stability measure of the S-LIME paper: explain the same row ``R``
    times with different random seeds, keep the first ``k`` selected features
    of each explanation, ``A_1, ..., A_R``, and average

    .. math:: J@k = \\binom{R}{2}^{-1} \\sum_{r < s}
              \\frac{|A_r \\cap A_s|}{|A_r \\cup A_s|}

    over the pairs. 1 means every repetition selected the same top-``k`` set.

    Parameters
    ----------
    selected : list of Explanation, or array-like of shape (n_repeats, n_selected)
        The repetitions. Explanations of one row each (such as ``[run[i] for
        run in runs]``) are ranked as lime, the S-LIME reference and the
        paper rank them: their selected features (all features with a nonzero
        weight when they record no selection) by decreasing ``|weight|``
        (``values``). Or feature indices of each repetition, most important
        first; negative entries are padding and are ignored. (An
        explanation's ``selected`` field is the order in which LARS added the
        features, not their importance.)
    k : int
        Number of leading features compared.

    Returns
    -------
    jaccard : float
        Mean pairwise Jaccard index in ``[0, 1]`` (1 for two empty sets).

    References
    ----------
    .. [1] Z. Zhou, G. Hooker, F. Wang, "S-LIME: Stabilized-LIME for Model
       Explanation", KDD 2021.

    Examples
    --------
    >>> from sklearn_plm_explain.metrics import jaccard_stability
    >>> jaccard_stability([[0, 1, 2], [1, 0, 3]], k=2)
    1.0
    >>> jaccard_stability([[0, 1, 2], [1, 0, 3]], k=3)
    0.5
    """
    if len(selected) and isinstance(selected[0], Explanation):
        tops = [frozenset(_top_by_weight(e, k)) for e in selected]
        if len(tops) < 2:
            raise ValueError("selected needs at least two repetitions.")
    else:
        sets = np.asarray(selected)
        if sets.ndim != 2 or sets.shape[0] < 2:
            raise ValueError("selected needs at least two repetitions (2-D).")
        tops = [frozenset(int(j) for j in row[:k] if j >= 0) for row in sets]
    scores = [
        len(a & b) / len(a | b) if (a or b) else 1.0
        for a, b in itertools.combinations(tops, 2)
    ]
    return float(np.mean(scores))


def _top_by_weight(explanation, k):
    """The ``k`` features of a one-row explanation with the largest
    ``|weight|`` among those it selected (ties kept in feature order)."""
    if len(explanation) != 1:
        raise ValueError(
            "Pass one row of each repetition (run[i]); got an explanation of "
            f"{len(explanation)} rows."
        )
    values = np.asarray(explanation.values[0], dtype=np.float64)
    order = explanation._ranked_features(0, values)
    if "selected" not in explanation.fields:
        # Without a selection, the features that carry a weight compete.
        order = order[values[order] != 0]
    return (int(j) for j in order[:k])
