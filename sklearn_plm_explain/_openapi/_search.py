"""The OpenAPI search: certified local linear models of one group of rows.

:class:`LocalModelSearch` runs in rounds of one model call each. The rows'
own responses come first; then every row still searching sends a cube of
points around itself at its current radius (and, in its first rounds, itself
again, to tell a deterministic service from a noisy one), a
:class:`~sklearn_plm_explain._openapi._certificate.CubeJudge` fits and judges the cubes, and
each row's :class:`~sklearn_plm_explain._openapi._radius.RadiusSearch` picks its next
radius until the row has a status. With region reuse, rows wait for a
certified model of another row that their own response agrees with, and a
few fresh probes confirm it instead of a search.
"""

# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass

import numpy as np

from sklearn_plm_explain._openapi._certificate import CubeJudge, Cubes
from sklearn_plm_explain._openapi._groups import THREAD_MEMORY, Workspace, more_points
from sklearn_plm_explain._openapi._noise import grid_rounded
from sklearn_plm_explain._openapi._points import CubePointsMixin
from sklearn_plm_explain._openapi._precision import NOISE_CAP
from sklearn_plm_explain._openapi._radius import RadiusSearch
from sklearn_plm_explain._openapi._regions import N_PAIRS, RegionLibrary, probe_scale
from sklearn_plm_explain._openapi._results import ResultTable
from sklearn_plm_explain._openapi._state import GroupState
from sklearn_plm_explain._utils._errors import ModelResponseError
from sklearn_plm_explain._utils._parallel import row_generators

_SMALLEST_NORMAL = np.finfo(np.float64).tiny
# Rows with coarse responses (float32, rounded, noisy) step every feature by
# at least this fraction of the median scale: a nearly constant feature (a
# digit's corner pixel) would otherwise get a tiny step, and its slope's error
# in input units, which grows as the step shrinks, would rule the L1 bound.
_MIN_RELATIVE_SCALE = 0.1
# With region reuse, the first wave of rows searched has this many rows, and
# waves then double, so the number of rounds grows by a constant; until at
# least _IDLE_MODELS certified models have matched fewer than one waiting row
# per _MODELS_PER_MATCH of them: the rows then rarely share regions (a
# network's rarely do), and the rest start at once, two rounds after the
# first, rather than wave after wave (a model call each).
_FIRST_WAVE = 4
# One row in this many of a round's first searches sends itself again for
# all of them (see LocalModelSearch._sentinels).
_SENTINEL_EVERY = 16
_IDLE_MODELS = 8
_MODELS_PER_MATCH = 4


def search_in_groups(
    config,
    make_black_box,
    X,
    target,
    seed,
    rows,
    per_group,
    library=None,
    keep_library=False,
):
    """The result table of ``rows`` (a slice of the batch ``X``), searched a
    group of ``per_group`` rows at a time; on a model failure the error's
    ``partial`` holds the rows of this slice finished so far.

    With region reuse each group starts from a copy of ``library`` (the
    models of the batch's first group, see
    :meth:`~sklearn_plm_explain._openapi._batch.RowRangeMixin._first_group`),
    or from an empty one. Returns the table, and with ``keep_library`` the
    last group's library too.
    """
    tables = []
    # One workspace for all groups (and, inside a workspace_scope, for the
    # later calls of this thread too): their rounds' points and designs are
    # written into the same memory.
    workspace = getattr(THREAD_MEMORY, "workspace", None)
    if workspace is None or workspace.busy:
        workspace = Workspace()
    workspace.busy = True
    try:
        for a in range(rows.start, rows.stop, per_group):
            b = min(a + per_group, rows.stop)
            search = LocalModelSearch(config, make_black_box(), workspace)
            start = None if library is None else library.copy()
            try:
                tables.append(search.run(X[a:b], target[a:b], seed, a, start))
            except ModelResponseError as err:
                if tables:
                    done = [] if err.partial is None else [err.partial]
                    err.partial = ResultTable.stacked([*tables, *done])
                raise
    finally:
        workspace.busy = False
    table = ResultTable.stacked(tables)
    return (table, search.state.library) if keep_library else table


# Not compared (eq=False): it holds an array, whose == is elementwise.
@dataclass(frozen=True, kw_only=True, eq=False)
class SearchConfig:
    """What the search needs to know, fixed for one call of ``explain``.

    The explainer builds it from its parameters and fitted attributes (see
    :class:`~sklearn_plm_explain.OpenAPIExplainer` for their meaning).

    Parameters
    ----------
    kind : {"proba", "logit", "regression"}
        What the model's responses are.
    n_outputs : int
        Number of response columns fitted (at least 2 for classifiers).
    scale : ndarray of shape (n_features,)
        Per-feature unit of the cubes.
    init_radius, min_radius, max_radius : float
        First, smallest and largest half-width of a cube, in units of
        ``scale``.
    n_witnesses : int
        Points sampled beyond the ``d + 1`` needed to solve.
    rtol : float
        Target relative L1 error of every class's slope.
    max_iter : int
        Largest number of attempts per row.
    reuse_regions : bool, default=False
        Let rows reuse other rows' certified models.
    response_precision : str or float, default="auto"
        The precision of the responses, or ``"auto"`` to read it.
    return_queries : bool, default=False
        Keep, per row, the points its reported model was fitted on.
    """

    kind: str
    n_outputs: int
    scale: np.ndarray
    init_radius: float
    min_radius: float
    max_radius: float
    n_witnesses: int
    rtol: float
    max_iter: int
    reuse_regions: bool = False
    response_precision: str | float = "auto"
    return_queries: bool = False


class LocalModelSearch(CubePointsMixin):
    """Certified local linear models of one group of rows.

    Parameters
    ----------
    config : SearchConfig
        What the search needs to know.
    black_box : BlackBox
        The model, as queried.
    workspace : Workspace, default=None
        Where the rounds' largest arrays are written; a new one if None.

    Attributes
    ----------
    state : GroupState
        After :meth:`run`, what the search learned about the rows.
    judge : CubeJudge
        After :meth:`run`, the judge of their cubes.
    """

    def __init__(self, config, black_box, workspace=None):
        self.config = config
        self.black_box = black_box
        self.workspace = Workspace() if workspace is None else workspace

    def run(self, X, target, seed, offset=0, library=None):
        """Search the rows ``X`` (rows ``offset`` on of the batch).

        Parameters
        ----------
        X : ndarray of shape (n, d)
            The rows.
        target : ndarray of shape (n,)
            Class index per row, -1 for the predicted class.
        seed : int
            Base seed of the rows' generators.
        offset : int, default=0
            Position of the first row in the batch.
        library : RegionLibrary, default=None
            With region reuse, the models the rows may reuse from the start
            (the library grows with the rows' own); a new one if None.

        Returns
        -------
        result : ResultTable
            The rows' result fields.

        Raises
        ------
        ModelResponseError
            From the model; its ``partial`` holds the result table, the rows
            not finished marked ``"not_run"``.
        """
        self.state = state = GroupState(X, offset, self.config)
        self.judge = CubeJudge(self.config, state)
        try:
            self._query_origins(target)
            rngs = row_generators(X, seed)
            if self.config.reuse_regions:
                if library is None:
                    library = RegionLibrary(centre=self.config.kind != "regression")
                state.library = library
            self._solve(rngs)
        except ModelResponseError as err:
            err.partial = state.finished()
            raise
        return state.finished()

    def _query_origins(self, target):
        state, kind = self.state, self.config.kind
        R0 = self.black_box.query(state.X, state.owners(np.arange(state.n)))
        state.result.n_queries += 1
        state.R0 = R0
        state.prec.set_origins(R0)
        model = state.prec.model(np.arange(state.n))
        state.L0, sat = self._to_log(R0, model.tiny)
        state.tau0 = self._tau(state.L0, R0, model)
        state.sharp = model.sharp.copy()
        if kind == "proba":
            state.sharp &= ~grid_rounded(R0).any(axis=1)
        state.record_saturated_origins(sat)
        predicted = np.argmax(R0, axis=1)
        state.result.target[:] = np.where(target >= 0, target, predicted)

    def _solve(self, rngs):
        """Rounds of one model call each, until every row has a status.

        Without region reuse every row starts its radius search at once. With
        it, rows are released for a search in growing waves; the others wait
        for a certified model their response agrees with, which a fresh
        antithetic pair of neighbours then confirms (its queries join the
        round's call).
        """
        state = self.state
        waiting = state.pending()
        searches = {}
        release = waiting.size
        if state.library is not None:
            release = _FIRST_WAVE
        checked, matched = 0, 0
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
                matched += int((match >= 0).sum())
                if checked >= _IDLE_MODELS and matched * _MODELS_PER_MATCH < checked:
                    release = waiting.size
            free = waiting[match < 0][:release]
            release *= 2
            self._new_searches(searches, free)
            confirm = self._probe_plan(waiting, match)
            far = [i for i, (_, rho) in confirm.items() if not np.isfinite(rho)]
            for i in far:
                del confirm[i]
            self._new_searches(searches, far)
            waiting = np.setdiff1d(
                waiting, np.concatenate([free, list(confirm), far]).astype(np.intp)
            )
            released = self._round(searches, rngs, confirm)
            self._new_searches(searches, released)

    def _new_searches(self, searches, rows):
        """Start the radius searches of ``rows`` in ``searches``."""
        signatures = self.state.prec.signatures(rows)
        for i, signature in zip(rows, signatures):
            searches[i] = self._new_search(signature)

    def _new_search(self, signature):
        config, d = self.config, self.state.d
        search = RadiusSearch(
            radius=config.init_radius,
            min_radius=config.min_radius,
            max_radius=config.max_radius,
            rtol=config.rtol,
            n_features=d,
            n_witnesses=config.n_witnesses,
            n_more=more_points(d, config.n_witnesses),
            noise_cap=NOISE_CAP,
        )
        search.signature = signature
        return search

    def _probe_plan(self, waiting, match):
        """Reuse candidates: ``{row: (model, probe radius)}``."""
        rows = waiting[match >= 0]
        if rows.size == 0:
            return {}
        models = match[match >= 0]
        rho = self.state.library.probe_radius(models)
        return {i: (j, r) for i, j, r in zip(rows, models, rho)}

    def _round(self, searches, rngs, confirm):
        """One model call: the rows' attempts and the reuse confirmations.

        Rows in their first round are vouched for by sentinels among them
        that send themselves again (see :meth:`_sentinels`); once answers
        turn out not to repeat, every row sends itself in its first round,
        and a noisy row a few more times in the next. A deterministic
        service answers bitwise as before, a noisy one shows its scatter.
        Returns the rows whose confirmation failed, to be searched from now
        on.
        """
        state = self.state
        rows = np.fromiter(searches, dtype=np.intp)
        c_rows = np.fromiter(confirm, dtype=np.intp)
        first = rows[~state.repeated[rows]]
        sentinels = self._sentinels(first)
        vouched = np.setdiff1d(first, sentinels)
        sending = set(sentinels.tolist())
        r_rows, r_counts = [], []
        for i in rows:
            k = state.repeats_due(i)
            if k and (state.repeated[i] or i in sending):
                r_rows.append(i)
                r_counts.append(k)
        r_rows = np.array(r_rows, dtype=np.intp)
        sizes = [searches[i].n_new for i in rows] + [2 * N_PAIRS] * c_rows.size
        counts = np.array(sizes + r_counts, dtype=np.intp)
        if counts.size == 0:
            return []
        # All of the round's points go into one block, written in place (at
        # image width they are the largest arrays of the search).
        ends = np.cumsum(counts)
        Q = self.workspace.array("points", (int(ends[-1]), state.d))
        draws = [Q[b - k : b] for b, k in zip(ends, counts)]
        n_fit = rows.size + c_rows.size
        block = Q[: ends[rows.size - 1]] if rows.size else Q[:0]
        steps = self._cube_points(searches, rows, rngs, draws[: rows.size], block)
        self._probe_points(confirm, c_rows, rngs, draws[rows.size : n_fit])
        for i, pts in zip(r_rows, draws[n_fit:]):
            pts[:] = state.X[i]
        owners = np.repeat(np.concatenate([rows, c_rows, r_rows]), counts)
        R = self.black_box.query(Q, state.owners(owners))
        n_queries = state.result.n_queries
        n_queries[rows] += counts[: rows.size]
        n_queries[c_rows] += 2 * N_PAIRS
        np.add.at(n_queries, r_rows, np.asarray(r_counts, dtype=np.intp))
        parts = np.split(R, ends[:-1])
        state.call_centre = {}
        if r_rows.size:
            self._add_repeats(r_rows, parts[n_fit:])
        judged = self._vouch(searches, rows, vouched)
        if judged.all():
            self._attempt(searches, rows, draws, parts, steps, block)
        else:
            k = np.flatnonzero(judged)
            self._attempt(
                searches,
                rows[k],
                [draws[j] for j in k],
                [parts[j] for j in k],
                [steps[j] for j in k],
                block[:0],
            )
        c_points = None
        if c_rows.size:
            c_points = Q[
                ends[n_fit - 1] - counts[rows.size : n_fit].sum() : ends[n_fit - 1]
            ]
        released = self._confirm(confirm, c_rows, c_points, parts[rows.size : n_fit])
        self._release_points(searches, Q)
        return released

    def _sentinels(self, first):
        """The rows of ``first`` (rows in their first round) that send
        themselves again for all of them: one in ``_SENTINEL_EVERY``, spread
        over the call, while every answer so far repeated; and in the
        group's first round, its first ``_FIRST_WAVE`` rows too. Without
        ``reuse_regions``, or once an answer did not repeat, every row sends
        its own (without it, its queries are its own).

        Non-determinism is a property of the service, not of a row: noise
        drawn per point or per call, a replica or a seed that changes between
        calls moves the answers at every row of a call, and shows at any
        sentinel as it would at the row itself. With region reuse a group's
        first round is its first wave (a noisy service certifies no model
        for later rows to match), all of whose rows send their own: a noisy
        service shows there, before any row is vouched for. A service noisy
        at some rows only may go unseen by the sentinels where a row's own
        repeat would have seen it. Its noise still shows in its cubes:
        noise per point in their residuals, which set its bound, and noise
        per call as a residual at its origin, whose answer came from another
        call; where it stands above the floor the row ends flagged
        ("boundary") rather than "noisy" (the user guide measures it).
        """
        state = self.state
        if not self.config.reuse_regions or not state.prec.deterministic.all():
            return first
        chosen = np.zeros(first.size, dtype=bool)
        chosen[::_SENTINEL_EVERY] = True
        if not state.repeated.any():
            chosen[:_FIRST_WAVE] = True
        return first[chosen]

    def _vouch(self, searches, rows, vouched):
        """Rows (mask over ``rows``) whose cube of this round may be judged.

        While every answer repeated, the ``vouched`` rows count as repeated.
        Once one did not (a sentinel's, or any row's own), no row's check
        rests on another's any more: the rows vouched for, in this round or
        before, that are still searching set this round's cube aside unjudged
        (their noise model is unknown) and send themselves again with a
        fresh cube, as every row does from then on.
        """
        state = self.state
        if state.prec.deterministic.all():
            state.repeated[vouched] = True
            state.vouched[vouched] = True
            return np.ones(rows.size, dtype=bool)
        held = state.vouched[rows] | np.isin(rows, vouched)
        for i in rows[held]:
            state.repeated[i] = state.vouched[i] = False
            state.cubes.pop(i, None)
            searches[i].plan_fresh_cube()
        return ~held

    def _release_points(self, searches, Q):
        """Free the round's points ``Q`` for the next round: a finished row's
        last cube is no longer needed, and the cube a row grows next round is
        copied out of the reused memory."""
        state = self.state
        for i in set(state.cubes).difference(searches):
            del state.cubes[i]
        for i, (pts, resp) in state.cubes.items():
            if searches[i].keep and np.may_share_memory(pts, Q):
                state.cubes[i] = (pts.copy(), resp)

    def _add_repeats(self, rows, parts):
        """The answers of rows sent again: evidence of the service's scatter."""
        state = self.state
        model = state.prec.model(rows)
        P0 = state.R0[rows, None, :] if self.config.kind == "proba" else None
        floor = model.rounding_tau(state.L0[rows, None, :], P0)[:, 0]
        state.repeated[rows] = True
        state.prec.add_repeats_of(rows, parts, self._centred_log, floor)
        for i, R in zip(rows, parts):
            if state.prec.correlated[i]:
                state.call_centre[i] = np.asarray(R[0], dtype=np.float64)

    def _confirm(self, confirm, rows, points, parts):
        if rows.size == 0:
            return []
        state = self.state
        p = 2 * N_PAIRS
        R = np.concatenate(parts)
        origin = np.repeat(rows, p)
        for i, resp in zip(rows, parts):
            state.prec.update(i, resp)
        model = state.prec.model(origin)
        L, bad = self._to_log(R, model.tiny)
        tau = self._tau(L, R, model)
        models = np.array([confirm[i][0] for i in rows], dtype=np.intp)
        unit = np.array([confirm[i][1] for i in rows])[:, None]
        unit = unit * probe_scale(self.config.scale)
        agree, rel = state.library.confirm(
            state.X[rows],
            state.L0[rows],
            state.tau0[rows],
            points.reshape(rows.size, p, -1),
            L.reshape(rows.size, p, -1),
            tau.reshape(rows.size, p),
            models,
            unit,
        )
        usable = (~bad & model.sharp).reshape(rows.size, p).all(axis=1)
        # A row whose bound, the slope difference its probes may have missed
        # included, is above rtol is fitted itself.
        ok = agree & usable & (rel <= self.config.rtol)
        for k, (i, j, good) in enumerate(zip(rows, models, ok)):
            if good:
                slope, intercept, _, owner = state.library.model(j)
                state.record_reuse(i, slope, intercept, rel[k], owner)
                state.keep_queries(i, points[p * k : p * (k + 1)])
        return rows[~ok]

    def _attempt(self, searches, rows, draws, parts, steps, block):
        """Add each row's new points to its cube; judge cubes of equal size
        together. ``block`` holds the rows' new points, one after another."""
        state = self.state
        cubes = []
        state.prec.update_rows(rows, parts[: rows.size])
        signatures = state.prec.signatures(rows)
        for i, pts, resp, signature in zip(rows, draws, parts, signatures):
            search = searches[i]
            if signature != search.signature:
                # What the responses showed changed the noise model (e.g. a
                # first answer of exactly 0.5 looked like one decimal): the
                # earlier attempts were judged by another one.
                search.reset()
                search.signature = signature
                state.forget_candidates(i)
            if search.keep:
                old_pts, old_resp = state.cubes[i]
                pts, resp = np.vstack([old_pts, pts]), np.vstack([old_resp, resp])
            state.cubes[i] = (pts, resp)
            cubes.append((pts, resp))
        sizes = np.array([len(c[0]) for c in cubes])
        # Fresh cubes of one size (a first round) are the block itself, row
        # after row: one array of all of them.
        stacked = None
        if sizes.size and np.all(sizes == len(draws[0])) and sizes.sum() == len(block):
            stacked = block.reshape(sizes.size, sizes[0], -1)
        for size in np.unique(sizes):
            g = np.flatnonzero(sizes == size)
            batch = self._cubes(
                searches,
                rows[g],
                [cubes[j][0] for j in g],
                np.stack([cubes[j][1] for j in g]),
                np.stack([steps[j] for j in g]),
                stacked,
            )
            self.judge.judge(batch, searches)

    def _cubes(self, searches, rows, points, R, step, stacked=None):
        """The cubes of ``rows`` as the judge fits them (the row itself first);
        ``points`` a list of (m, d) arrays, the same as ``stacked`` (n, m, d)
        when that is not None."""
        state = self.state
        n, d = len(rows), state.d
        model = state.prec.model(rows)
        tiny = np.repeat(model.tiny, R.shape[1])
        L, bad = self._to_log(R.reshape(-1, R.shape[2]), tiny)
        L = L.reshape(R.shape)
        bad = bad.reshape(n, -1).any(axis=1)
        # The design [1, x - x0] of the fit, the origin first: the points as
        # actually represented, not as drawn, built in reused memory (these
        # arrays are the largest of a round; the judge is done with them
        # before the next cubes are built). The fit scales by the step itself, in its
        # small products (fit_local_models): one pass over the design less.
        A = self.workspace.array("design", (n, len(points[0]) + 1, d + 1))

        def fill(j):
            # Only the rows fitted from their design touch this memory.
            A[j, :, 0] = 1.0
            A[j, 0, 1:] = 0.0
            np.subtract(points[j], state.X[rows[j]], out=A[j, 1:, 1:])

        # Float64 rows are fitted by products over their cube's orthogonal
        # design (with the basis itself, for cubes that are it exactly);
        # coarse rows, whose worst-case bound needs the weighted
        # pseudo-inverse, are factorised.
        n_orth = np.array([searches[i].n_orthogonal for i in rows], dtype=np.intp)
        n_orth[~model.float64] = 0
        layouts = [searches[i].layout for i in rows]
        for j in np.flatnonzero(~model.float64 | (model.quantum > 0)):
            layouts[j] = None
        if all(lay is None for lay in layouts):
            A[:, :, 0] = 1.0
            A[:, 0, 1:] = 0.0
            if stacked is not None:
                np.subtract(stacked, state.X[rows][:, None, :], out=A[:, 1:, 1:])
            else:
                for j in range(n):
                    np.subtract(points[j], state.X[rows[j]], out=A[j, 1:, 1:])
            layouts = fill = None
        R0 = state.R0[rows]
        L0 = state.L0[rows]
        # A row read call by call takes its origin from the cube's own call:
        # the first answer at the row, from another call, would differ from
        # the cube by that call's draw.
        own = np.flatnonzero(model.correlated)
        if own.size:
            R0, L0 = R0.copy(), L0.copy()
            R0[own] = [state.call_centre[rows[j]] for j in own]
            L0[own] = self._to_log(R0[own], model.tiny[own])[0]
        Y = np.concatenate([L0[:, None, :], L], axis=1)
        P = None
        if self.config.kind == "proba":
            P = np.concatenate([R0[:, None, :], R], axis=1)
        exact = np.array([searches[i].drawn_step is not None for i in rows])
        return Cubes(
            rows=rows,
            exact_basis=exact,
            A=A,
            Y=Y,
            P=P,
            step=step,
            bad=bad,
            model=model,
            n_orthogonal=n_orth,
            layouts=layouts,
            fill=fill,
        )

    def _row_scale(self, search):
        """Per-feature unit of a row's cube (wider floor for coarse rows)."""
        scale = self.config.scale
        if not search.coarse:
            return scale
        return np.maximum(scale, _MIN_RELATIVE_SCALE * np.median(scale))

    # -- reading responses --------------------------------------------------------
    def _to_log(self, R, tiny=_SMALLEST_NORMAL):
        if self.config.kind != "proba":
            return R, np.zeros(R.shape[0], dtype=bool)
        # Below the smallest normal number of the response precision a
        # probability has underflowed, or sits on a floor a model put there
        # (e.g. against exact zeros): its log says nothing about the logits.
        zero = R < np.reshape(tiny, (-1, 1))
        with np.errstate(divide="ignore"):
            L = np.log(np.where(zero, 1.0, R))
        return L, zero.any(axis=1)

    def _tau(self, L, R, model):
        """Noise scale of single responses (see ``NoiseModel.tau``)."""
        kind = self.config.kind
        P = R[:, None, :] if kind == "proba" else None
        return model.tau(L[:, None, :], P, kind != "regression")[:, 0]

    def _centred_log(self, R):
        """Centred log values of responses (for the scatter of repeats)."""
        kind = self.config.kind
        if kind != "proba":
            L = np.asarray(R, dtype=np.float64)
        else:
            with np.errstate(divide="ignore"):
                L = np.log(np.asarray(R, dtype=np.float64))
        if kind == "regression":
            return L
        return L - L.mean(axis=1, keepdims=True)
