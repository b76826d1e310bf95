"""What a LIME explanation shows: labels with their condition, contributions.

LIME's surrogate is fitted on *interpretable* features: a continuous feature's
standardised value, or the indicator "same bin / same category as the
explained row". A weight is only readable with that condition, so every
selected feature gets the label ``lime`` 0.2 prints (``debt <= 10.70``,
``1.00 < x <= 2.00``, ``size_cat=big``; a continuous feature keeps its name).
The same representation gives the contribution of each feature relative to
the training data: its weight times the row's interpretable value minus that
value's training mean.
"""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

# A surrogate is determined by its data only with at least this many effective
# samples (Kish) per fitted parameter: the usual rule of thumb for a
# regression; below it the R² expected from pure noise, k / (n_eff - 1),
# exceeds about 0.1.
SAMPLES_PER_PARAMETER = 10


def effective_samples(w):
    """Kish's effective sample size ``(Σw)² / Σw²`` of kernel weights."""
    w = np.asarray(w, dtype=np.float64)
    top = float(w.max(initial=0.0))
    if top <= 0:
        return 0.0
    w = w / top  # no overflow of the squares, whatever the kernel's scale
    return float(w.sum() ** 2 / (w @ w))


def projected_effective_samples(w, n):
    """Effective sample size expected with ``n`` points of the same kernel.

    Row 0 (the explained row) keeps its weight; the draws' mean weight and
    mean squared weight are those observed.
    """
    w = np.asarray(w, dtype=np.float64)
    top = float(w.max(initial=0.0))
    if top <= 0 or w.size < 2:
        return 0.0
    w = w / top
    a, b = w[1:].mean(), (w[1:] ** 2).mean()
    return float((w[0] + (n - 1) * a) ** 2 / (w[0] ** 2 + (n - 1) * b))


def min_effective_samples(n_features):
    """Fewest effective samples for a surrogate on ``n_features`` features."""
    return SAMPLES_PER_PARAMETER * (n_features + 1)


def bin_labels(name, edges):
    """Labels of the bins cut at ``edges``, in lime's wording."""
    labels = [f"{name} <= {edges[0]:.2f}"]
    labels += [f"{a:.2f} < {name} <= {b:.2f}" for a, b in zip(edges[:-1], edges[1:])]
    labels.append(f"{name} > {edges[-1]:.2f}")
    return labels


def category_label(name, value):
    """``name=value``; an integral float code prints as an integer, as in lime."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        value = int(value)
    return f"{name}={value}"


class Presentation:
    """Labels and background statistics of a fitted LIME space.

    Parameters
    ----------
    space : _TabularSpace
        The fitted sampling space.
    names : sequence of str
        Feature names, in the original column order.
    """

    def __init__(self, space, names):
        self.names = [str(n) for n in names]
        d = space.d
        # Coded column (internal index) of each original column, -1 if
        # continuous.
        self.coded = np.full(d, -1, dtype=np.intp)
        self.coded[space.cat_cols] = np.arange(space.n_cat)
        disc = space.num_cols[space.disc_src]
        self.coded[disc] = space.n_cat + np.arange(disc.size)
        self.is_cat = np.zeros(d, dtype=bool)
        self.is_cat[space.cat_cols] = True
        self.bins = [None] * d
        for i, edges in enumerate(space.edges):
            j = int(disc[i])
            self.bins[j] = bin_labels(self.names[j], edges)
        self.offsets = space.offsets
        self.code_freq = space.code_freq
        self.perm = space.perm
        self.n_cont = space.n_cont

    def longest_label(self, X_orig):
        """Characters of the longest label a row of ``X_orig`` can get."""
        lengths = [len(n) for n in self.names]
        lengths += [len(label) for labels in self.bins if labels for label in labels]
        for j in np.flatnonzero(self.is_cat):
            values = set(X_orig[:, j].tolist())
            lengths += [len(category_label(self.names[j], v)) for v in values]
        return max(lengths, default=0)

    def selected_names(self, selected, x_flat, X_orig):
        """Labels of the selected features of each row (``""`` pads)."""
        out = np.full(selected.shape, "", dtype=object)
        for r in range(selected.shape[0]):
            for t, j in enumerate(selected[r]):
                if j >= 0:
                    out[r, t] = self._label(int(j), x_flat[r], X_orig[r])
        return out.astype(str)

    def _label(self, j, x_flat, x_orig):
        c = self.coded[j]
        if c < 0:
            return self.names[j]
        if self.is_cat[j]:
            return category_label(self.names[j], x_orig[j])
        return self.bins[j][int(x_flat[c] - self.offsets[c])]

    def reference(self, x_flat, z0):
        """Row value, training mean and training std of every interpretable
        feature, in the original column order: ``(z0, mean, std)``.

        Continuous features are standardised on the training data (mean 0,
        std 1); an indicator's mean is the training frequency ``p`` of the
        row's bin or category (0 for a category unseen in training) and its
        std ``sqrt(p (1 - p))``.
        """
        n = z0.shape[0]
        mean = np.zeros_like(z0)
        std = np.ones_like(z0)
        p = np.where(x_flat >= 0, self.code_freq[np.maximum(x_flat, 0)], 0.0)
        mean[:, self.n_cont :] = p
        std[:, self.n_cont :] = np.sqrt(p * (1.0 - p))
        out = []
        for arr in (z0, mean, std):
            orig = np.empty((n, arr.shape[1]))
            orig[:, self.perm] = arr
            out.append(orig)
        return tuple(out)
