"""What the OpenAPI search knows about one group of rows, and its results."""

# SPDX-License-Identifier: BSD-3-Clause

from typing import NamedTuple

import numpy as np

from sklearn_plm_explain._openapi._precision import PrecisionEvidence
from sklearn_plm_explain._openapi._results import ResultTable


class Candidate(NamedTuple):
    """A row's estimate from one consistent-looking cube, kept in case no
    cube certifies it: the slopes, their absolute L1 bounds (statistical and
    worst case) at noise level ``sigma``, the cube's radius, the index of its
    attempt in the row's radius search and whether the responses were plain
    float64."""

    slope: np.ndarray
    intercept: np.ndarray
    stat: np.ndarray
    wc: np.ndarray
    sigma: float
    radius: float
    attempt: int
    float64: bool


class GroupState:
    """Per-row state of one group, filled in as attempts come back.

    ``result`` holds the rows' result fields; the rest is what the search
    needs on the way: the responses at the rows themselves (``R0``, their
    log values ``L0``, noise scales ``tau0`` and whether that noise is at
    float precision, ``sharp``), the precision evidence, the last cube of each
    row still searching (``cubes``), the candidates of each row and, with
    region reuse, the certified models (``library``).

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The group's rows.
    offset : int
        Position of the group's first row in the batch.
    config : SearchConfig
        The search's configuration.
    """

    def __init__(self, X, offset, config):
        n, d = X.shape
        self.X, self.offset, self.n, self.d = X, offset, n, d
        self.result = ResultTable.blank(
            n,
            n_features=d,
            n_outputs=config.n_outputs,
            offset=offset,
            queries=config.return_queries,
        )
        # A row's radius is its first cube's until an attempt records another.
        self.result.radius[:] = config.init_radius
        # With return_queries: per row, the points its reported model was
        # fitted on; and the points of each candidate's cube.
        self.queries = self.result.arrays.get("queries")
        self.candidate_points = [[] for _ in range(n)]
        self.prec = PrecisionEvidence(n, config.response_precision)
        self.R0 = self.L0 = self.tau0 = self.sharp = self.library = None
        self.cubes = {}
        self.candidates = [[] for _ in range(n)]
        self.repeated = np.zeros(n, dtype=bool)
        # Rows whose repeat was a sentinel's (see LocalModelSearch._vouch).
        self.vouched = np.zeros(n, dtype=bool)
        # This round's answer at the row itself, for the noisy rows read call
        # by call: the origin of their cube (one call, one draw).
        self.call_centre = {}

    def owners(self, local_rows):
        return local_rows + self.offset

    def pending(self):
        """Rows without a status yet."""
        return np.flatnonzero(self.result.status == "not_run")

    def finished(self):
        """The result table, with what each row's responses were read as."""
        labels = self.prec.label(np.arange(self.n))
        self.result.response_precision[:] = labels
        return self.result

    def repeats_due(self, i):
        """Queries of row ``i`` itself to send again in this round."""
        if not self.repeated[i]:
            return 1
        return self.prec.needs_repeats(i)

    def keep_queries(self, i, points):
        if self.queries is not None:
            self.queries[i] = np.array(points, dtype=np.float64)

    def add_candidate(self, i, candidate):
        self.result.n_iter[i] += 1
        self.candidates[i].append(candidate)
        if self.queries is not None:
            # A copy: the cube's points are in memory the next round reuses.
            self.candidate_points[i].append(np.array(self.cubes[i][0]))

    def forget_candidates(self, i):
        """Drop row ``i``'s candidates (their noise model no longer holds)."""
        self.candidates[i] = []
        self.candidate_points[i] = []

    def keep_candidate_queries(self, i, idx):
        """Keep the points of the cube candidate ``idx`` of row ``i`` came from."""
        if self.queries is not None:
            self.keep_queries(i, self.candidate_points[i][idx])

    def record_estimate(self, i, slope, intercept, rel, radius):
        r = self.result
        r.coef[i], r.intercept[i] = slope, intercept
        r.error_bound[i], r.radius[i] = rel, radius

    def record_exact(self, i, slope, intercept, rel, radius, attempts=0):
        """Rows ``i`` certified exact on their cubes (``attempts`` more
        attempts counted)."""
        r = self.result
        r.n_iter[i] += attempts
        self.record_estimate(i, slope, intercept, rel, radius)
        r.status[i] = "exact"

    def record_status(self, i, status):
        """Row ``i``'s final status, its estimate already recorded."""
        self.result.status[i] = status
        if status == "saturated":
            # Its noise model does not hold (the responses' precision is lost
            # to an absolute error): no bound.
            self.result.error_bound[i] = np.inf

    def record_saturated_origins(self, rows):
        """Rows whose own response has underflowed: saturated before any cube."""
        self.result.status[rows] = "saturated"
        self.result.radius[rows] = np.nan

    def record_fallback(self, i):
        """No consistent attempt: the last estimate, without a bound."""
        r = self.result
        if self.candidates[i]:
            last = self.candidates[i][-1]
            r.coef[i], r.intercept[i] = last.slope, last.intercept
            r.radius[i] = last.radius
            if i in self.cubes:
                self.keep_queries(i, self.cubes[i][0])
        r.error_bound[i] = np.inf

    def record_reuse(self, i, slope, intercept, rel, owner):
        r = self.result
        r.coef[i], r.intercept[i] = slope, intercept
        r.error_bound[i], r.radius[i] = rel, np.nan
        r.reused_from[i] = owner
        r.status[i] = "exact"

    def record_flat(self, i, L0, radius):
        r = self.result
        r.n_iter[i] += 1
        r.coef[i] = 0.0
        r.intercept[i] = L0 - L0.mean() if L0.size > 1 else L0
        r.error_bound[i], r.radius[i] = np.inf, radius
        r.status[i] = "flat"
        self.keep_queries(i, self.cubes[i][0])

    def record_saturated(self, i):
        """A cube whose pinned responses carry no slope: no estimate from it."""
        self.result.n_iter[i] += 1
        self.result.status[i] = "saturated"
