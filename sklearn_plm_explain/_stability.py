"""Stability of repeated explanations: mean pairwise Jaccard of top-k sets."""

# SPDX-License-Identifier: BSD-3-Clause

import itertools

import numpy as np

__all__ = ["jaccard_stability"]


def jaccard_stability(selected_sets, k):
    """Mean pairwise Jaccard index of the top-``k`` feature sets.

    The measure of the S-LIME paper: explain the same row ``R`` times with
    different random seeds, keep the first ``k`` selected features of each
    explanation, and average ``|A ∩ B| / |A ∪ B|`` over the ``R (R − 1) / 2``
    pairs. 1 means every repetition selected the same top-``k`` set.

    Parameters
    ----------
    selected_sets : array-like of shape (n_repeats, n_selected)
        Selected feature indices of each repetition, most important first
        (e.g. ``Explanation.selected``); negative entries are padding and are
        ignored.
    k : int
        Number of leading features compared.

    Returns
    -------
    jaccard : float
        Mean pairwise Jaccard index in ``[0, 1]`` (1 for two empty sets).

    Examples
    --------
    >>> from sklearn_plm_explain._stability import jaccard_stability
    >>> jaccard_stability([[0, 1, 2], [1, 0, 3]], k=2)
    1.0
    >>> jaccard_stability([[0, 1, 2], [1, 0, 3]], k=3)
    0.5
    """
    sets = np.asarray(selected_sets)
    if sets.ndim != 2 or sets.shape[0] < 2:
        raise ValueError("selected_sets needs at least two repetitions (2-D).")
    if k < 1:
        raise ValueError(f"k must be at least 1; got {k}.")
    tops = [frozenset(int(j) for j in row[:k] if j >= 0) for row in sets]
    scores = [
        len(a & b) / len(a | b) if (a or b) else 1.0
        for a, b in itertools.combinations(tops, 2)
    ]
    return float(np.mean(scores))
