"""The precision of a model's responses, read from the responses themselves.

A served model answers with the precision of its runtime, not float64's: a
float32 forward pass (ONNX Runtime, most PyTorch and Keras services), values
rounded to a few decimals (JSON APIs), or a different answer for the same point
on each call. :class:`PrecisionEvidence` gathers, row by row, what the answers
reveal and turns it into a noise model:

* the *binary precision*: how many significant bits the values carry (53 for
  float64, 24 for float32, whether stored as float32 or as the shortest
  decimal of a float32, as a JSON encoder writes it);
* the *decimal quantum*: the largest ``10**-k`` every value is a multiple of;
* *repeat queries*: the row itself sent again in a later call, bitwise equal
  for a deterministic service, scattered for a noisy one.

Each part gives a part of the noise model: a relative rounding floor of a few
ulps of the binary precision (plus the absolute ulp of a small probability
computed as ``1 - p`` in that precision), a bounded error of at most ``q / 2``
on every value rounded to ``q`` (propagated as a worst case by
:func:`worst_case_abs`), and the measured scatter of a noisy service.
Everything here is free of model queries.
"""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from sklearn_plm_explain._openapi._noise import _SMALL_P, NoiseModel
from sklearn_plm_explain._utils._floats import (
    MAX_DECIMALS,
    MAX_DECIMALS_F32,
    MAX_SHORT_DIGITS,
    MIN_SHORT_DIGITS,
    QUANTA,
    any_long_decimal,
    at_most_16_digits,
    digit_bits,
    float32_shortest,
    multiples,
    near_integer,
    significant_bits,
    significant_digits,
)

# The narrowest binary precision assumed when the values carry fewer bits
# (e.g. only 0, 1/2 and 1 seen so far): half precision.
_MIN_BITS = 11

# Repeats of the row itself once a service is seen to be non-deterministic.
N_REPEATS = 6
# The most the search may attribute to noise beyond what the noise model
# says, in its units: a residual that stays put as the cube shrinks is noise
# only below this; above it, it is a kink.
NOISE_CAP = 64.0


class PrecisionEvidence:
    """What the responses of each row have shown about their precision.

    Evidence only accumulates: a value that needs more than 24 bits (and is not
    a float32's shortest decimal) rules out float32 for good, a value that is
    not a multiple of ``10**-k`` rules out that quantum for good. The noise
    model read from it therefore only ever becomes finer as responses arrive;
    :meth:`version` tells when it changed.

    Parameters
    ----------
    n : int
        Number of rows.
    stated : {"auto", "float64", "float32"} or float
        The user's ``response_precision``.
    """

    def __init__(self, n, stated="auto"):
        self.n = n
        self.stated = stated
        self.max_bits = np.zeros(n, dtype=np.intp)
        self.informative = np.zeros(n, dtype=bool)
        self.wide = np.zeros(n, dtype=bool)  # some value needs float64
        # Most significant digits of a value seen once the row is wide (0
        # before; more than MAX_SHORT_DIGITS: float64 without rounding).
        self.digits = np.zeros(n, dtype=np.intp)
        # Binary rows whose every value has at most 16 significant digits: a
        # small probability computed as 1 - p, written so, has lost the grid
        # of 2^-53 that marks its absolute error, and one close to the grid
        # is taken to carry it (noise_scale). Float64 values often need 17
        # digits, and a cube rules it out; values that never do (a leading
        # digit of 5 or more, 1 - p just below 1) keep the row so, at no
        # cost while they are on the grid itself. Still read as "float64".
        self.unmarked = np.zeros(n, dtype=bool)
        self.decimal = np.ones((n, MAX_DECIMALS), dtype=bool)
        self.decimal32 = np.ones((n, MAX_DECIMALS_F32), dtype=bool)
        self.R0 = None
        self.repeats = [[] for _ in range(n)]
        self.deterministic = np.ones(n, dtype=bool)
        self.scatter = np.zeros(n)
        self.scatter_dof = np.zeros(n, dtype=np.intp)
        # How many of each row's repeats came in each call, and whether it is
        # read call by call (see _read_scatter).
        self.calls = [[] for _ in range(n)]
        self.correlated = np.zeros(n, dtype=bool)
        self.call_scatter = np.zeros(n)
        self.call_dof = np.zeros(n, dtype=np.intp)

    # -- evidence ------------------------------------------------------------------
    def update(self, i, R):
        """Take in the responses ``R`` (m, K) that row ``i`` received."""
        if self.unmarked[i]:
            self._check_unmarked(i, R)
        if self.informative[i] and self._plain_float64(i):
            return  # float64, no quantum, already seen: nothing left to learn
        v = np.asarray(R, dtype=np.float64).ravel()
        # 0 and 1 (a saturated probability) say nothing about the precision.
        v = v[np.isfinite(v) & (v != 0) & (v != 1)]
        if v.size == 0:
            return
        self.informative[i] = True
        if self._plain_float64(i):
            return  # float64, no quantum: nothing left to rule out
        bits = significant_bits(v)
        if not self.wide[i]:
            long = bits > 24
            if long.any():
                shortest = float32_shortest(v[long])
                self.wide[i] = not shortest.all()
                bits = np.where(long, 24, bits)
            self.max_bits[i] = max(self.max_bits[i], int(bits.max()))
        if self.wide[i] and self.digits[i] <= MAX_SHORT_DIGITS:
            self.digits[i] = max(self.digits[i], int(significant_digits(v).max()))
        for k in np.flatnonzero(self.decimal[i]):
            self.decimal[i, k] = multiples(v, k + 1)
        if not self.wide[i]:
            v32 = v.astype(np.float32)
            if not np.all(v32.astype(np.float64) == v):
                self.decimal32[i] = False
            for k in np.flatnonzero(self.decimal32[i]):
                rounded = np.round(v, k + 1).astype(np.float32)
                self.decimal32[i, k] = bool(np.all(rounded == v32))

    def set_origins(self, R0):
        """Take in the responses at the rows themselves (one per row)."""
        self.R0 = np.asarray(R0, dtype=np.float64)
        # Most rows of a float64 model are decided by their own K values at
        # once: all of them together, before the rest row by row.
        v = self.R0
        keep = np.isfinite(v) & (v != 0) & (v != 1)
        bits = significant_bits(v).reshape(v.shape)
        long = keep & (bits > 24)
        shortest = np.ones(v.shape, dtype=bool)
        shortest[long] = float32_shortest(v[long])
        decided = long & ~shortest
        exact12 = near_integer(v * 1e12)
        # Values that are not a multiple of 1e-12 are no multiple of any
        # coarser quantum either, and one such value needing float64 is
        # enough, with one that is not a decimal of a few digits (see
        # significant_digits).
        fast = (decided & ~exact12).any(axis=1)
        fast[fast] = any_long_decimal(v[fast])
        self.informative[fast] = True
        self.wide[fast] = True
        self.digits[fast] = MAX_SHORT_DIGITS + 1
        self.decimal[fast] = False
        self.decimal32[fast] = False
        if v.shape[1] == 2:
            # Only a small probability's absolute error is at stake, and
            # only one that can be 1 - p (at least 2^-53).
            small = ((v >= 2.0**-53) & (v < _SMALL_P)).any(axis=1)
            self.unmarked[small] = True
            for i in np.flatnonzero(small):
                self._check_unmarked(i, v[i])
        for i in np.flatnonzero(~fast):
            self.update(i, self.R0[i : i + 1])

    def update_rows(self, rows, parts):
        """:meth:`update` for each of ``rows`` with its responses in ``parts``;
        rows of plain float64 already seen, whose model no evidence changes,
        are passed over together (most rows of a float64 model)."""
        rows = np.asarray(rows, dtype=np.intp)
        settled = self._settled(rows)
        for i, R, done in zip(rows, parts, settled):
            if not done:
                self.update(i, R)

    def _settled(self, rows):
        """Rows for which :meth:`update` learns nothing: informative rows of
        plain float64 (see :meth:`_plain_float64_rows`)."""
        return self.informative[rows] & self._plain_float64_rows(rows)

    def _check_unmarked(self, i, R):
        """Rule out row ``i``'s 16 digits if one of its values ``R`` needs 17."""
        v = np.asarray(R, dtype=np.float64).ravel()
        self.unmarked[i] = at_most_16_digits(v[np.isfinite(v) & (v != 0)])

    def _plain_float64(self, i):
        """Row ``i`` needs float64, with no quantum and not a decimal of a
        few significant digits: no evidence can change its model."""
        return bool(self._plain_float64_rows(np.array([i]))[0])

    def _plain_float64_rows(self, rows):
        """:meth:`_plain_float64` of each of ``rows`` (n,)."""
        return (
            self.wide[rows]
            & (self.digits[rows] > MAX_SHORT_DIGITS)
            & ~self.decimal[rows].any(axis=1)
            & ~self.unmarked[rows]
        )

    def add_repeats_of(self, rows, parts, L_of, floors):
        """:meth:`add_repeats` for several rows: the usual case, a first
        repeat of a deterministic row matching its first answer to within
        rounding, is decided for all such rows in one pass."""
        first = [
            k
            for k, (i, R) in enumerate(zip(rows, parts))
            if self.deterministic[i] and not self.repeats[i] and len(R) == 1
        ]
        done = np.zeros(len(rows), dtype=bool)
        if first:
            idx = np.asarray(rows, dtype=np.intp)[first]
            R = np.concatenate([np.asarray(parts[k], dtype=np.float64) for k in first])
            with np.errstate(invalid="ignore", divide="ignore"):
                L0, L1 = L_of(self.R0[idx]), L_of(R)
                floor = np.asarray(floors, dtype=np.float64)[first]
                close = np.abs(L1 - L0) <= floor.reshape(len(first), -1)
            ok = np.isfinite(L0).all(axis=1) & np.isfinite(L1).all(axis=1)
            done[first] = ok & close.all(axis=1)
        self.update_rows(
            np.asarray(rows, dtype=np.intp)[done], [R for R, k in zip(parts, done) if k]
        )
        for k, (i, R) in enumerate(zip(rows, parts)):
            if done[k]:
                self.repeats[i].extend(np.asarray(R, dtype=np.float64))
                self.calls[i].append(len(R))
            else:
                self.add_repeats(i, R, L_of, floors[k])

    def add_repeats(self, i, R, L_of, floor):
        """Responses at row ``i`` itself, all sent again in one later call.

        ``L_of`` maps responses to centred log values, ``floor`` is the
        rounding noise scale of the row's response. A service whose answers
        repeat to within that rounding noise is deterministic (a float64 model
        computed through BLAS may change its last bits with the size of the
        batch; that is rounding, already in the noise model). It is then
        assumed to be so everywhere: a service deterministic at the repeated
        points but noisy elsewhere is not detected (and with region reuse,
        one row's repeat vouches for the other rows of its call, see
        ``LocalModelSearch._sentinels``). Otherwise the scatter is
        measured from all the row's answers at that point (see
        :meth:`_read_scatter`).
        """
        self.update(i, R)
        self.repeats[i].extend(np.asarray(R, dtype=np.float64))
        self.calls[i].append(len(R))
        if self.deterministic[i] and np.all(np.asarray(R) == self.R0[i]):
            return
        samples = np.vstack([self.R0[i : i + 1], np.asarray(self.repeats[i])])
        with np.errstate(invalid="ignore", divide="ignore"):
            L = L_of(samples)
        ok = np.all(np.isfinite(L), axis=1)
        if self.deterministic[i]:
            if ok.all() and np.all(np.abs(L - L[0]) <= floor):
                return
            self.deterministic[i] = False
        self._read_scatter(i, L, ok)

    def _read_scatter(self, i, L, ok):
        """The scatter of row ``i``'s answers ``L`` at the row itself (the
        first from the first call, the others grouped by call as they came).

        Noise drawn afresh for every point shows as much within a call as
        between calls. Noise drawn once per call (one factor for a whole
        batch) does not show within a call at all: a cube's residuals, all of
        one call, then hold none of it, and judged against the scatter
        between calls they would hide a kink of that size. So once repeats
        came in one call, a noisy row is read call by call (``correlated``,
        whatever the mix of the two kinds): its per-point scatter is the one
        within calls (what a cube's residuals may hold), and the scatter of
        the calls' means, the error a whole cube shares, is kept apart
        (``call_scatter``) for the bound.
        """
        call = np.repeat(np.arange(len(self.calls[i]) + 1), [1, *self.calls[i]])
        L, call = L[ok], call[ok]
        if L.shape[0] < 2:
            self.scatter[i] = np.inf
            self.scatter_dof[i] = 0
            return
        K = max(L.shape[1] - 1, 1)
        dev = L - L.mean(axis=0)
        self.scatter[i] = float(np.sqrt((dev**2).sum() / ((L.shape[0] - 1) * K)))
        self.scatter_dof[i] = (L.shape[0] - 1) * K
        ids, inverse, sizes = np.unique(call, return_inverse=True, return_counts=True)
        means = np.zeros((ids.size, L.shape[1]))
        np.add.at(means, inverse, L)
        means /= sizes[:, None]
        within = L - means[inverse]
        dof_in = int((sizes - 1).sum()) * K
        if dof_in == 0 or ids.size < 2:
            return
        s_in = float(np.sqrt((within**2).sum() / dof_in))
        between = means - means.mean(axis=0)
        s_call = float(np.sqrt((between**2).sum() / ((ids.size - 1) * K)))
        self.correlated[i] = True
        self.scatter[i], self.scatter_dof[i] = s_in, dof_in
        self.call_scatter[i], self.call_dof[i] = s_call, (ids.size - 1) * K

    def needs_repeats(self, i):
        """How many more repeats of row ``i`` the next round should send."""
        if self.deterministic[i]:
            return 0
        # A row read call by call also sends itself with every cube: the
        # cube's own origin (see NoiseModel.correlated).
        return max(int(self.correlated[i]), N_REPEATS - len(self.repeats[i]))

    # -- the model -----------------------------------------------------------------
    def bits(self, rows):
        """Binary precision of each row's responses, in significant bits."""
        rows = np.asarray(rows, dtype=np.intp)
        if self.stated == "float64":
            return np.full(rows.size, 53, dtype=np.intp)
        if self.stated == "float32":
            return np.full(rows.size, 24, dtype=np.intp)
        narrow = np.clip(self.max_bits[rows], _MIN_BITS, 24)
        wide = np.where(self._read_digits(rows), digit_bits(self.digits[rows]), 53)
        return np.where(self.wide[rows], wide, narrow)

    def _read_digits(self, rows):
        """Rows whose wide values are read for their significant digits:
        precision not stated, and no decimal quantum (which would be what
        made them short)."""
        if not (isinstance(self.stated, str) and self.stated == "auto"):
            return np.zeros(np.size(rows), dtype=bool)
        return ~self.decimal[rows].reshape(np.size(rows), -1).any(axis=1)

    def quantum(self, rows):
        """Decimal quantum of each row's responses, 0 where there is none.

        Returns ``(q, through_float32)``: the second flag says the values are
        the float32 nearest to multiples of ``q`` (so they err by a float32
        half-ulp more).
        """
        rows = np.asarray(rows, dtype=np.intp)
        q = np.zeros(rows.size)
        f32 = np.zeros(rows.size, dtype=bool)
        if isinstance(self.stated, str) and self.stated != "auto":
            return q, f32
        if not isinstance(self.stated, str):
            return np.full(rows.size, float(self.stated)), ~self.wide[rows]
        # Vectorised _decimal_quantum: the first quantum each row still has.
        dec = self.decimal[rows]
        dec32 = self.decimal32[rows] & ~self.wide[rows][:, None]
        has, has32 = dec.any(axis=1), dec32.any(axis=1)
        q[has] = QUANTA[dec[has].argmax(axis=1)]
        f32 = ~has & has32
        q[f32] = QUANTA[dec32[f32].argmax(axis=1)]
        return q, f32

    def _decimal_quantum(self, i):
        """Row ``i``'s decimal quantum (0 if none) and whether its values are
        the float32 nearest to its multiples (``stated="auto"``)."""
        k = np.flatnonzero(self.decimal[i])
        if k.size:
            return QUANTA[k[0]], False
        if not self.wide[i]:
            k = np.flatnonzero(self.decimal32[i])
            if k.size:
                return QUANTA[k[0]], True
        return 0.0, False

    def model(self, rows):
        """The noise model of ``rows``, as a :class:`NoiseModel`."""
        rows = np.asarray(rows, dtype=np.intp)
        bits = self.bits(rows)
        q, f32 = self.quantum(rows)
        return NoiseModel(
            bits=bits,
            quantum=q,
            quantum_f32=f32,
            scatter=self.scatter[rows].copy(),
            scatter_dof=self.scatter_dof[rows].copy(),
            deterministic=self.deterministic[rows].copy(),
            call_scatter=self.call_scatter[rows].copy(),
            call_dof=self.call_dof[rows].copy(),
            unmarked=self.unmarked[rows].copy(),
        )

    def signatures(self, rows):
        """Per row of ``rows``, a value that changes whenever the row's noise
        model does: its bits, quantum, determinism, reading call by call and
        unmarked grid, as :meth:`model` reads them (without building one; the
        search asks at every attempt, for all of a round's rows at once)."""
        rows = np.asarray(rows, dtype=np.intp)
        if rows.size == 0:
            return []
        q, _ = self.quantum(rows)
        return list(
            zip(
                self.bits(rows).tolist(),
                q.tolist(),
                self.deterministic[rows].tolist(),
                self.correlated[rows].tolist(),
                self.unmarked[rows].tolist(),
            )
        )

    def label(self, rows):
        """Per-row description: "float64", "float32", "1e-06", "noisy"...

        "unknown" for a row whose responses were all 0 or 1 (saturated).
        """
        m = self.model(rows)
        out = []
        rows = np.asarray(rows, dtype=np.intp)
        seen = self.informative[rows]
        digits = np.where(
            self.wide[rows] & self._read_digits(rows), self.digits[rows], 0
        )
        for b, q, det, info, k in zip(m.bits, m.quantum, m.deterministic, seen, digits):
            if not info and isinstance(self.stated, str) and self.stated == "auto":
                out.append("unknown")
            elif not det:
                out.append("noisy")
            elif q >= 2.0 ** (4 - int(b)):
                # A quantum below the values' own binary resolution is not
                # what limits them.
                out.append(f"{q:.0e}")
            elif MIN_SHORT_DIGITS <= k <= MAX_SHORT_DIGITS:
                out.append(f"{k} digits")
            elif b >= 53:
                out.append("float64")
            elif b == 24:
                out.append("float32")
            else:
                out.append(f"{b} bits")
        return np.array(out, dtype=object)
