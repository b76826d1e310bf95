"""The query points of a search round: each searching row's next cube (an
orthogonal design scaled to the row's step, drawn exactly on the row's grid
when it can be) and the probes that confirm a reused region."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from sklearn_plm_explain._openapi._design import (
    EXACT_MIN_ENTRIES,
    basis_bounds,
    design,
    exact_offsets,
    exact_step,
    fit_step_below,
    orthogonal_designs,
    single_block,
)
from sklearn_plm_explain._openapi._fit import moderate_steps
from sklearn_plm_explain._openapi._regions import N_PAIRS, probe_scale


class CubePointsMixin:
    """Writes a round's points; part of :class:`~sklearn_plm_explain._openapi._search.LocalModelSearch` (its ``state`` and ``config``)."""

    def _cube_points(self, searches, rows, rngs, draws, block):
        """Write each searching row's next cube into ``draws`` (consecutive
        pieces of ``block``); their steps."""
        steps = []
        d = self.state.d
        for i in rows:
            search = searches[i]
            step = search.radius * self._row_scale(search)
            if not search.keep:
                search.drawn_step = self._exact_step(
                    self.state.X[i], step, search.n_new
                )
            if search.drawn_step is not None:
                # A step of a few significant bits, a little smaller for a
                # coordinate just below a power of two: the drawn offsets are
                # then exact (see exact_offsets). Points added to the cube
                # later keep it.
                step = search.drawn_step
            steps.append(step)
        if self._drawn_together(searches, rows):
            # Fresh small cubes of one size, as in a first round: one pass
            # over all of them (the same numbers as drawn one by one).
            R, n = rows.size, searches[rows[0]].n_new
            cubes = block.reshape(R, n, d)
            orthogonal_designs([rngs[i] for i in rows], n, d, cubes, np.stack(steps))
            cubes += self.state.X[rows][:, None, :]
            for i in rows:
                searches[i].layout = None
                searches[i].n_orthogonal = n + 1
            return steps
        for i, pts, step in zip(rows, draws, steps):
            self._row_points(searches[i], rngs[i], self.state.X[i], pts, step)
        return steps

    def _drawn_together(self, searches, rows):
        """Whether the cubes of ``rows`` are fresh designs of one block, all
        of the same small size (see :func:`orthogonal_designs`)."""
        if rows.size < 2:
            return False
        d, n = self.state.d, searches[rows[0]].n_new
        if n < d + 1 or n * d > EXACT_MIN_ENTRIES or not single_block(n, d):
            return False
        return all(
            not s.keep and s.n_new == n and s.drawn_step is None
            for s in (searches[i] for i in rows)
        )

    def _row_points(self, search, rng, x0, pts, step):
        """Write one row's next cube into ``pts``."""
        fresh = not search.keep
        # The design is written where the points go, scaled on the way:
        # no other array of the cube's size is allocated.
        layout = []
        design(
            rng,
            search.n_new,
            self.state.d,
            fresh,
            out=pts,
            scale=step,
            layout=layout,
            exact=search.drawn_step is not None,
        )
        search.layout = None
        if fresh:
            # The new cube's design, the origin included, is orthogonal;
            # drawn from the exact basis, its points are it bit for bit.
            search.n_orthogonal = search.n_new + 1
            if search.drawn_step is not None:
                search.layout = layout[0]
        pts += x0

    def _exact_step(self, x0, step, n):
        """The step of a row's cubes of ``n`` points around ``x0`` drawn
        exactly from the exact basis, or None when they cannot be (more than
        one block, steps near the range's ends, offsets off the row's grid):
        ``step`` rounded to a few significant bits and, for a coordinate just
        below a power of two, halved a few times."""
        d = x0.size
        # Small designs cost little to read: their rows are fitted from them
        # (batched as they are, with fewer calls than the basis products).
        if n < d + 1 or n * d <= EXACT_MIN_ENTRIES or not single_block(n, d):
            return None
        largest = basis_bounds(n, d, exact=True)[1]
        step = fit_step_below(x0, exact_step(step), largest)
        if not moderate_steps(step) or not exact_offsets(x0, step, largest):
            return None
        return step

    def _probe_points(self, confirm, c_rows, rngs, draws):
        """Write the probes confirming each waiting row's reused model."""
        scale = probe_scale(self.config.scale)
        for i, pts in zip(c_rows, draws):
            # Antithetic pairs in independent directions: if the row sits on a
            # region boundary, one of each pair lies beyond it, so a boundary
            # row is never waved through; and a slope difference above the
            # certified tolerance shows in one of the directions (see
            # ``RegionLibrary.probe_radius``).
            g = rngs[i].standard_normal((N_PAIRS, self.state.d))
            u = g * confirm[i][1] * scale
            pts[:] = self.state.X[i] + np.concatenate([u, -u])
