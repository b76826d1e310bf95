"""What the digits of float64 values show: significant bits and digits,
float32 values and their shortest decimals, decimal quanta.

Everything here reads values only; it is shared by the black box (the checks
of a call's answers) and by OpenAPI's precision evidence.
"""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

EPS = np.finfo(np.float64).eps


# Decimal quanta looked for: 10**-1 to 10**-12 (a float64 value that is not
# rounded lies within a few ulps of a multiple of 1e-12 with probability
# about 1e-3; of 1e-6, about 1e-9).
MAX_DECIMALS = 12


# Values stored as float32 are looked for quanta down to 1e-7 (the float32
# nearest to a multiple of 1e-7, say, of a value in [0.5, 1) is that value
# with probability 0.6, but of a value near 0.01 with probability 0.01: the
# evidence of a few values of different magnitudes decides).
MAX_DECIMALS_F32 = 7


# The quanta 10**-(k + 1), read by one row and by many (numpy's power, as
# these were always computed: its 1e-5 is not Python's).
QUANTA = np.array([10.0 ** -(np.intp(k) + 1) for k in range(MAX_DECIMALS)])


# Values written with 11 to 15 significant digits (printf's "%.13g") are
# rounded far above float64's floor: a row whose values needing float64 are
# all such decimals gets a binary precision that covers the rounding (see
# digit_bits). Nearly every float64 value needs 16 or 17 digits, so one
# row's values decide at once.
MAX_SHORT_DIGITS = 15


MIN_SHORT_DIGITS = 11


# Correctly rounded powers of ten (Python's decimal parsing) for the
# exponents _few_digits takes: 9 - floor(log10 |v|) over every nonzero
# float64 v; those past 1e308 are inf.
_POW10_LOW = -300
_POW10 = np.array([float(f"1e{k}") for k in range(_POW10_LOW, 335)])
_INT_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)


def significant_bits(values):
    """Bits of the binary significand each value needs (0 for zeros)."""
    v = np.abs(np.asarray(values, dtype=np.float64)).ravel()
    bits = np.zeros(v.shape, dtype=np.intp)
    nz = v > 0
    m, _ = np.frexp(v[nz])
    M = (m * 2.0**53).astype(np.int64)
    low = M & -M
    bits[nz] = 53 - np.log2(low).astype(np.intp)
    return bits


def significant_digits(values):
    """Significant digits of the shortest decimal each value is the nearest
    float64 to, when it has at most ``MAX_SHORT_DIGITS`` of them;
    ``MAX_SHORT_DIGITS + 1`` for the other values, 0 for zeros and values
    that are not finite.

    ``t = v 10^j``, with ``j`` chosen so that ``t`` has 15 digits before the
    point, is rounded to the integer ``N``; ``v`` is the nearest float64 to
    the decimal ``N 10^-j`` exactly when ``N / 10^j`` (a division of two
    exact numbers, correctly rounded) gives ``v`` back. The rounding of
    ``t`` (a few tenths of a unit at most) cannot miss ``N``. Values whose
    ``10^j`` is not exact (below about 1e-7 or above 1e14) are written out
    as their shortest decimal (Python's ``repr``).
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    out = np.full(v.shape, MAX_SHORT_DIGITS + 1, dtype=np.intp)
    ok = np.isfinite(v) & (v != 0)
    out[~ok] = 0
    with np.errstate(all="ignore"):
        j = MAX_SHORT_DIGITS - 1 - np.floor(np.log10(np.abs(v)))
    fast = ok & (j >= 1) & (j <= 21)
    idx = np.flatnonzero(fast)
    jj = j[idx].astype(np.intp)
    N = np.round(v[idx] * _POW10[jj - _POW10_LOW])
    # log10's floor may be one off next to a power of ten.
    jj += (np.abs(N) < 10.0 ** (MAX_SHORT_DIGITS - 1)).astype(np.intp)
    jj -= (np.abs(N) >= 10.0**MAX_SHORT_DIGITS).astype(np.intp)
    power = _POW10[jj - _POW10_LOW]
    N = np.round(v[idx] * power)
    short = (N / power == v[idx]) & (np.abs(N) < 10.0**MAX_SHORT_DIGITS)
    out[idx[short]] = _digits_of(np.abs(N[short]).astype(np.int64))
    for k in np.flatnonzero(ok & ~fast):
        # Python's repr is the shortest decimal that reads back as the value.
        mantissa = repr(float(v[k])).split("e")[0].replace("-", "").replace(".", "")
        out[k] = min(len(mantissa.strip("0")), MAX_SHORT_DIGITS + 1)
    return out


def any_long_decimal(V):
    """Per row of ``V``, whether some value needs more than
    ``MAX_SHORT_DIGITS`` significant digits. Values of 1e-6 to 1e13 are
    read first (without writing any out): a float64 row nearly always has
    such a value among them, the largest probability."""
    with np.errstate(all="ignore"):
        mid = (np.abs(V) >= 1e-6) & (np.abs(V) < 1e13)
    digits = np.zeros(V.shape, dtype=np.intp)
    digits[mid] = significant_digits(V[mid])
    long = (digits > MAX_SHORT_DIGITS).any(axis=1)
    rest = np.flatnonzero(~long)
    if rest.size:
        more = significant_digits(V[rest]).reshape(rest.size, -1)
        long[rest] = (more > MAX_SHORT_DIGITS).any(axis=1)
    return long


def at_most_16_digits(v):
    """Whether every value of ``v`` is the nearest float64 to a decimal of
    at most 16 significant digits (printf's ``%.16g``)."""
    return bool(np.all(np.char.mod("%.16g", v).astype(np.float64) == v))


def _digits_of(N):
    """Decimal digits of each positive integer, its trailing zeros left out."""
    N = N.copy()
    for _ in range(MAX_SHORT_DIGITS):
        zero = (N % 10 == 0) & (N > 0)
        if not zero.any():
            break
        N[zero] //= 10
    return np.searchsorted(_INT_POW10, N, side="right") + 1


def digit_bits(digits):
    """The binary precision whose noise model covers values rounded to
    ``digits`` significant digits, for ``MIN_SHORT_DIGITS`` to
    ``MAX_SHORT_DIGITS`` of them: half a unit in the last digit is at most
    ``5 10^-digits`` of the value, and ``2^-b`` at least ``10^(1 - digits)``,
    twice that, for ``b = floor((digits - 1) log2 10)``. Other counts: 53
    (float64). Ten digits or fewer are left to float64's model, whose
    residual test flags their rows: a model of their digits (or float32's
    for nine) does not bound such coarse values' errors, as it does not
    behind float32 noise."""
    d = np.asarray(digits, dtype=np.intp)
    b = np.floor((d - 1) * np.log2(10.0)).astype(np.intp)
    short = (d >= MIN_SHORT_DIGITS) & (d <= MAX_SHORT_DIGITS)
    return np.where(short, b, 53)


def float32_shortest(values):
    """Whether each value is a float32 or the shortest decimal of one.

    The shortest decimal of a float32 ``f``, read as the float64 ``v``, is
    rounded twice on the way back to float32: a decimal within half a
    float64 ulp of the midpoint between ``f`` and its neighbour reads as
    that midpoint, whose rounding to float32 ties to even and may give the
    neighbour. Such a ``v`` is tried against the float32 on its other side
    too (rare: 7.038531e-26, the float32 with bits 0x15ae43fd, is one).
    """
    v = np.asarray(values, dtype=np.float64)
    v32 = v.astype(np.float32)
    ok = v32.astype(np.float64) == v
    todo = ~ok & np.isfinite(v32)
    todo[todo] = _few_digits(v[todo])
    idx = np.flatnonzero(todo)
    if idx.size:
        ok[idx] = _writes_as(v32[idx], v[idx])
        idx = idx[~ok[idx]]
    if idx.size:
        toward = np.where(v[idx] > v32[idx], np.inf, -np.inf).astype(np.float32)
        other = np.nextafter(v32[idx], toward)
        # Only a midpoint (exact: both halves have 24 bits) rounds either way.
        mid = (v32[idx].astype(np.float64) + other.astype(np.float64)) / 2.0 == v[idx]
        idx, other = idx[mid], other[mid]
        ok[idx] = _writes_as(other, v[idx])
    return ok


def _writes_as(f32, v):
    """Whether each float32's shortest decimal reads as the float64 ``v``."""
    return f32.astype(str).astype(np.float64) == v


def _few_digits(v):
    """Whether each value may be the nearest float64 to a decimal of at most
    9 significant digits (a float32's shortest decimal has at most 9); False
    only for values that cannot be, so that the shortest decimals need not
    be written out for them (most float64 responses, one at a time).

    A decimal ``N 10^q`` with ``|N| < 10^9``, times ``10^k`` with ``k = 9 -
    floor(log10 |v|)`` (one digit more than needed, which covers a floor
    off by one either way), is an integer below ``10^11``; its float64
    image, after the rounding to ``v``, that of ``10^k`` (past ``10^22``;
    read from a table of correctly rounded powers, not numpy's ``power``,
    whose results may err by more) and the product's, is within ``4 eps``
    of it in relative terms. A product that is not finite (``10^k``
    overflows for the tiniest values) decides nothing.
    """
    with np.errstate(all="ignore"):
        k = 9 - np.floor(np.log10(np.abs(v)))
        k = np.clip(np.nan_to_num(k), _POW10_LOW, _POW10_LOW + _POW10.size - 1)
        t = v * _POW10[k.astype(np.intp) - _POW10_LOW]
        off = ~near_integer(t)
    return ~(off & np.isfinite(t))


def near_integer(t):
    """Whether each value is an integer to within 4 eps of it: a value ``v``
    scaled by a power of ten ``t = v 10^k``, the nearest float64 to a
    multiple of ``10^-k``, passes (the rounding of ``v``, of ``10^k`` and of
    the product each err by at most half an ulp)."""
    return np.abs(t - np.round(t)) <= 4.0 * EPS * np.abs(t)


def multiples(v, k):
    """Whether every value is the nearest float64 to a multiple of 10**-k."""
    return bool(np.all(near_integer(v * 10.0**k)))


def digits_rounding(out, max_digits=12):
    """How far the sum of each row of ``out`` may be from its values' true
    sum if they were written with as many significant digits as the row's
    longest value shows (half a unit in the last digit of each value), 0 for
    rows with a value of more than ``max_digits`` digits.

    A value shows ``k`` digits when it is the nearest float64 to a decimal of
    ``k`` significant digits: scaled by ``10^(k - 1 - e)``, ``e`` its
    decimal exponent, it is an integer to within the float64 rounding of the
    scaling (an exponent off by one near a power of ten shifts ``k`` and
    ``e`` together, and the unit ``10^(e - k + 1)`` with them).
    """
    v = np.abs(out)
    digits = np.full(v.shape, max_digits + 1)
    digits[v == 0] = 1
    # The tiniest values overflow the scaling: not finite, they show no digit
    # count and the row none either.
    with np.errstate(all="ignore"):
        e = np.floor(np.log10(np.where(v > 0, v, 1.0)))
        for k in range(max_digits, 0, -1):
            on = near_integer(v * 10.0 ** (k - 1 - e))
            digits = np.where(on & (v > 0), k, digits)
        k = digits.max(axis=1, keepdims=True)
        half = 0.5 * 10.0 ** (e - k + 1) * (v > 0)
    return np.where(k[:, 0] <= max_digits, half.sum(axis=1) * (1 + 1e-6), 0.0)


def decimal_quantum(out, max_decimals=12):
    """The largest ``10**-k`` each row of ``out`` is a multiple of, or 0.

    A value counts as a multiple if it is the nearest float64 to one, or, for
    values that are float32, the nearest float32 to one (probabilities rounded
    and then stored as float32).
    """
    q = np.zeros(out.shape[0])
    found = np.zeros(out.shape[0], dtype=bool)
    out32 = out.astype(np.float32)
    is32 = np.all(out32.astype(np.float64) == out, axis=1)
    for k in range(1, max_decimals + 1):
        ok = np.all(near_integer(out * 10.0**k), axis=1)
        if k <= 7:
            ok |= is32 & np.all(np.round(out, k).astype(np.float32) == out32, axis=1)
        new = ok & ~found
        q[new] = 10.0**-k
        found |= ok
        if found.all():
            break
    return q


def half_precision(values):
    """Whether every value carries at most 11 significant bits (float16's
    precision; bfloat16 has 8), zeros included."""
    return bool(np.all(significant_bits(values) <= 11))
