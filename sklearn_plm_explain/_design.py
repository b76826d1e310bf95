"""Query design: where around a row the points of its cube go."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np


def _design(rng, n, d, fresh):
    """Query offsets in units of the step: ``n`` points in ``d`` dimensions.

    A fresh cube gets a random *orthogonal* design: the columns of ``[1, U]``
    are orthogonal with squared norm ``n``, so every slope is estimated with
    the smallest variance ``n`` points allow (a uniform random design with
    barely more points than unknowns is nearly singular and several times
    worse). Each point still projects on any direction like a standard normal
    variable, and the design is continuous and random, so a region boundary
    crossing the cube cannot hide in the fit. Points added to an existing cube
    are standard normal.
    """
    G = rng.standard_normal((n, d + 1))
    if not fresh or n < d + 1:
        return G[:, 1:]
    G[:, 0] = 1.0
    Q, R = np.linalg.qr(G)
    # Fix the signs so the first column is +1/sqrt(n), as QR leaves them free.
    Q *= np.sign(np.diag(R))
    return np.sqrt(n) * Q[:, 1:]
