"""Matrix products of tall data with a few columns, in the order BLAS
streams fastest."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np


def t_prod(A, B):
    """``A' B`` for tall ``A`` (stacked on the leading axes) and thin ``B``.

    Computed as ``(B' A)'``: the same sums, but BLAS then reads ``A`` row by
    row, about twice as fast as the transposed product when ``B`` has a few
    columns (one per class, a few selected features).
    """
    return np.swapaxes(np.swapaxes(B, -1, -2) @ A, -1, -2)


def prod(A, B):
    """``A B`` for tall ``A`` and thin ``B``, as ``(B' A')'`` (about a
    quarter faster, for the reason of :func:`t_prod`)."""
    return np.swapaxes(np.swapaxes(B, -1, -2) @ np.swapaxes(A, -1, -2), -1, -2)
