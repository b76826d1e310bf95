"""The sampling space of LIME: training statistics and neighbourhoods.

A fitted :class:`_TabularSpace` holds what lime learns from the training data
(means and scales, category and bin frequencies, per-bin truncated-normal
tables) and draws the perturbations of a row in a handful of array
operations: no Python loop over samples, only over histogram bins. Every row
draws from its own streams (:func:`_row_streams`), derived from its content
and the call's seed, so that a row's neighbourhood does not depend on the
batch it came in or on ``n_jobs``. Quasi-random rows read one scrambled
Sobol' sequence per call (:class:`_SobolTable`), each through its own random
permutation and reflection of the columns.
"""

# SPDX-License-Identifier: BSD-3-Clause

import threading
import warnings
import zlib

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import qmc
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from sklearn_plm_explain._utils._parallel import row_seed

# Values drawn per block (512 rows of 64 columns): the temporaries of a block
# stay in the CPU cache. Wide data draw fewer rows per block (at image width,
# blocks of 512 rows would spend most of the sampling time in cache misses).
_SAMPLE_BLOCK_VALUES = 2**15
_SAMPLE_BLOCK = 512
# lime adds this to every bin's standard deviation; kept for identical sampling.
_BIN_STD_EPS = 1e-11
_DISCRETIZER_PERCENTILES = {
    "quartile": [25, 50, 75],
    "decile": [10, 20, 30, 40, 50, 60, 70, 80, 90],
}


class _TabularSpace:
    """Training statistics and the sampler of LIME neighbourhoods.

    Columns fall in two groups. *Continuous* columns are perturbed with
    ``N(0, 1) * std + centre`` and represented by their standardised value.
    *Coded* columns (categorical columns, and every numeric column when
    discretising) draw a code (category or bin) from the training frequencies
    and are represented by the indicator "same code as the explained row".
    A discretised column's query value is drawn from a normal truncated to the
    bin, with the bin's training mean and standard deviation (lime's law).

    Internally the columns are kept in the order continuous, categorical,
    discretised, so that every group is a contiguous block (all-numeric data
    keep their order); ``perm`` maps internal positions to the original
    columns.
    """

    def __init__(self, X_num, X_cat, num_cols, cat_cols, y, params):
        self.d = len(num_cols) + len(cat_cols)
        self.num_cols = num_cols = np.asarray(num_cols, dtype=np.intp)
        self.cat_cols = np.asarray(cat_cols, dtype=np.intp)
        self.around = params["sample_around_instance"]
        n_num = num_cols.size
        counts_list, tables = self._fit_categories(X_cat), []
        if params["discretize_continuous"]:
            self.cont_src = np.empty(0, np.intp)
            bins = [_fit_bins(X_num[:, j], y, params) for j in range(n_num)]
            self.disc_src = np.arange(n_num)
            # Whether any bin needs a normal quantile (else values are fixed).
            self.n_rand = int(any(np.any(b["live"]) for b in bins)) * n_num
            self.edges = [b["edges"] for b in bins]
            counts_list += [b["counts"] for b in bins]
            tables = bins
        else:
            self.cont_src = np.arange(n_num)
            self.disc_src = np.empty(0, np.intp)
            self.n_rand, self.edges = 0, []
        self.n_cont, self.n_cat = self.cont_src.size, self.cat_cols.size
        self.perm = np.concatenate(
            [num_cols[self.cont_src], self.cat_cols, num_cols[self.disc_src]]
        ).astype(np.intp)
        self._fit_continuous(X_num[:, self.cont_src])
        self._fit_code_tables(counts_list, tables)

    # -- fit ----------------------------------------------------------------------
    def _fit_continuous(self, X_cont):
        mean = X_cont.mean(axis=0)
        std = X_cont.std(axis=0)
        # A constant column keeps scale 1, as lime's StandardScaler does.
        std[std <= 1e-12 * np.maximum(np.abs(mean), 1.0)] = 1.0
        self.cont_mean, self.cont_scale = mean, std

    def _fit_categories(self, X_cat):
        self.categories, self.cat_lookup, counts_list = [], [], []
        for j in range(X_cat.shape[1]):
            try:
                values, counts = np.unique(X_cat[:, j], return_counts=True)
            except TypeError:
                raise ValueError(
                    f"Categorical column {int(self.cat_cols[j])} mixes values of "
                    "types that cannot be compared (e.g. strings and numbers)."
                ) from None
            counts_list.append(counts)
            self.categories.append(values)
            self.cat_lookup.append({v: i for i, v in enumerate(values.tolist())})
        # Codes held in an object array (numbers next to strings) count as
        # numbers when every value is one.
        self.numeric_categories = all(
            np.issubdtype(np.asarray(c.tolist()).dtype, np.number)
            for c in self.categories
        )
        return counts_list

    def _fit_code_tables(self, counts_list, bin_tables):
        """Breakpoints and sampling tables of all coded columns, flattened.

        A coded column ``c`` owns the flat indices ``c * width + code``. The
        flat index of a uniform draw ``u`` is ``c * width`` plus the number of
        the column's cumulative frequencies ``<= u``: zero-frequency codes
        have zero-width intervals and are never drawn.

        For a discretised column the query value is
        ``mu + s * ndtri(A + u * B)`` with the very uniform ``u`` that chose
        the bin: rescaled to the bin's probability interval it is again
        uniform and independent of the bin, so one draw gives both. Bins lying
        above the mean are sampled in the mirrored tail, where the normal CDF
        keeps its precision; a bin holding a single value returns it.
        """
        n_code = len(counts_list)
        width = max([len(c) for c in counts_list], default=1)
        self.offsets = np.arange(n_code, dtype=np.intp) * width
        self.cum = np.full((max(width - 1, 0), n_code), 2.0)
        A = np.full((n_code, width), 0.5)
        B = np.zeros((n_code, width))
        mu = np.zeros((n_code, width))
        S = np.zeros((n_code, width))
        for i, counts in enumerate(counts_list):
            k = counts.size
            # Exact integer cumulative counts: the last breakpoint is exactly 1.
            cum = np.cumsum(counts) / counts.sum()
            self.cum[: k - 1, i] = cum[:-1]
            if i < self.n_cat:
                continue
            t = bin_tables[i - self.n_cat]
            prob = counts / counts.sum()
            cum_lo = np.concatenate([[0.0], cum[:-1]])
            Bi = np.where(t["live"], (t["fb"] - t["fa"]) / np.maximum(prob, 1e-300), 0)
            A[i, :k] = np.where(t["live"], t["fa"] - cum_lo * Bi, 0.5)
            B[i, :k] = Bi
            mu[i, :k] = np.where(t["live"], t["mean"], t["lo"])
            S[i, :k] = np.where(t["live"], t["sign"] * t["std"], 0.0)
        self.tn_A, self.tn_B = A.ravel(), B.ravel()
        self.tn_mu, self.tn_S = mu.ravel(), S.ravel()
        self.tn_live = self.tn_S != 0
        # Training frequency of every code, for labels and contributions.
        self.code_freq = np.zeros(n_code * width)
        for i, counts in enumerate(counts_list):
            self.code_freq[i * width : i * width + counts.size] = counts / counts.sum()
        # Expected share of discretised draws that need a normal quantile.
        n_cat = self.n_cat
        probs = [c / c.sum() for c in counts_list[n_cat:]]
        live = [np.abs(S[n_cat + i, : p.size]) > 0 for i, p in enumerate(probs)]
        self.live_mass = float(
            np.mean([p[lv].sum() for p, lv in zip(probs, live)]) if probs else 0.0
        )

    # -- explained rows -------------------------------------------------------------
    def encode_rows(self, X_num, X_cat):
        """Internal representation of the explained rows.

        Returns ``(x_cont, x_flat, z0, seed_key)``: continuous values, flat code
        index of each coded column (``-1`` for a category unseen in
        training), the interpretable representation of the row itself, and a
        float matrix identifying the row (for the per-row seeds).
        """
        n = X_num.shape[0]
        x_code = np.empty((n, self.offsets.size), dtype=np.intp)
        seed_key = np.concatenate([X_num, np.zeros((n, self.n_cat))], axis=1)
        for j, lookup in enumerate(self.cat_lookup):
            vals = X_cat[:, j].tolist()
            x_code[:, j] = [lookup.get(v, -1) for v in vals]
            # Unseen categories still get a seed that depends on the value.
            seed_key[:, X_num.shape[1] + j] = [
                lookup.get(v, -1.0 - (zlib.crc32(repr(v).encode()) % 2**20))
                for v in vals
            ]
        for i, qts in enumerate(self.edges):
            x_code[:, self.n_cat + i] = np.searchsorted(qts, X_num[:, self.disc_src[i]])
        x_flat = np.where(x_code >= 0, x_code + self.offsets, -1)
        x_cont = X_num[:, self.cont_src]
        z0 = np.ones((n, self.d))
        z0[:, : self.n_cont] = (x_cont - self.cont_mean) / self.cont_scale
        return x_cont, x_flat, z0, seed_key

    def sample(self, rng, x_cont, x_flat, Z, Q):
        """Fill ``Z`` and ``Q`` (m, d) with perturbations of one row.

        ``Z`` receives the interpretable, standardised representation (what
        the surrogate is fitted on), ``Q`` the query values (numeric values;
        category indices for categorical columns), both in the internal
        column order. Rows are drawn in blocks whose temporaries stay in
        cache; the stream of draws does not depend on ``m``'s split.
        """
        block = self.block_rows()
        for start in range(0, Z.shape[0], block):
            stop = start + block
            self._sample_block(rng, x_cont, x_flat, Z[start:stop], Q[start:stop])

    def block_rows(self):
        """Rows drawn per block: a row's draws split at multiples of this are
        the same stream as drawn at once."""
        return min(_SAMPLE_BLOCK, max(16, _SAMPLE_BLOCK_VALUES // max(self.d, 1)))

    def _sample_block(self, rng, x_cont, x_flat, Z, Q):
        m = Z.shape[0]
        c0 = self.n_cont
        U = None
        if isinstance(rng, _SobolStream):
            U = rng.draw(m, Z[:, :c0])  # the normals go straight into Z
            vals = Z[:, :c0]
        elif c0:
            vals = Z[:, :c0]
            vals[...] = rng.standard_normal((m, c0))
        if c0:
            q = Q[:, :c0]
            np.multiply(vals, self.cont_scale, out=q)
            q += x_cont if self.around else self.cont_mean
            if self.around:
                vals += (x_cont - self.cont_mean) / self.cont_scale
        if self.offsets.size:
            u = rng.random((m, self.offsets.size)) if U is None else U
            flat = self.offsets + (u >= self.cum[0]) if len(self.cum) else None
            if flat is None:
                flat = np.broadcast_to(self.offsets, u.shape).copy()
            for cut in self.cum[1:]:
                flat += u >= cut
            np.equal(flat, x_flat, out=Z[:, c0:])
            c1 = c0 + self.n_cat
            if self.n_cat:
                Q[:, c0:c1] = flat[:, : self.n_cat] - self.offsets[: self.n_cat]
            self._bin_values(flat[:, self.n_cat :], u[:, self.n_cat :], Q[:, c1:])

    def _bin_values(self, flat, u, out):
        # Contiguous indices keep the table look-ups (np.take) cheap; the
        # buffers are reused in place because allocation dominates here.
        flat = np.ascontiguousarray(flat)
        vals = out if out.flags.c_contiguous else np.empty(out.shape)
        np.take(self.tn_mu, flat, out=vals)
        if not self.n_rand:
            pass
        elif self.live_mass > 0.85:
            p = np.take(self.tn_A, flat)
            tmp = np.take(self.tn_B, flat)
            tmp *= u
            p += tmp
            np.maximum(p, 1e-300, out=p)
            ndtri(p, out=p)
            np.take(self.tn_S, flat, out=tmp)
            p *= tmp
            vals += p
        else:
            # Many draws fall in single-valued bins: skip their quantiles.
            idx = np.flatnonzero(np.take(self.tn_live, flat))
            fi = flat.ravel().take(idx)
            p = self.tn_A.take(fi)
            p += np.ascontiguousarray(u).ravel().take(idx) * self.tn_B.take(fi)
            np.maximum(p, 1e-300, out=p)
            ndtri(p, out=p)
            p *= self.tn_S.take(fi)
            vals.ravel()[idx] += p
        if vals is not out:
            out[...] = vals

    def decode(self, Q):
        """Query values in the original column order and representation."""
        if not self.n_cat:
            if np.array_equal(self.perm, np.arange(self.d)):
                return Q
            out = np.empty_like(Q)
            out[:, self.perm] = Q
            return out
        out = np.empty(Q.shape, dtype=np.float64 if self.numeric_categories else object)
        c0, c1 = self.n_cont, self.n_cont + self.n_cat
        out[:, self.perm[:c0]] = Q[:, :c0]
        out[:, self.perm[c1:]] = Q[:, c1:]
        for j, cats in enumerate(self.categories):
            codes = np.clip(Q[:, c0 + j].astype(np.intp), 0, None)
            out[:, self.cat_cols[j]] = cats[codes]
        return out


def _fit_bins(col, y, params):
    """Edges, frequencies and truncated-normal parameters of one column's bins."""
    qts = _bin_edges(col, y, params)
    ids = np.searchsorted(qts, col)
    nb = qts.size + 1
    counts = np.bincount(ids, minlength=nb)
    safe = np.maximum(counts, 1)
    mean = np.bincount(ids, weights=col, minlength=nb) / safe
    sq = np.bincount(ids, weights=col * col, minlength=nb) / safe
    std = np.sqrt(np.maximum(sq - mean**2, 0.0)) + _BIN_STD_EPS
    lo = np.concatenate([[col.min()], qts])
    hi = np.concatenate([qts, [col.max()]])
    a, b = (lo - mean) / std, (hi - mean) / std
    flip = a > 0
    fa = ndtr(np.where(flip, -b, a))
    fb = ndtr(np.where(flip, -a, b))
    live = (hi > lo) & (counts > 0) & (fb > fa)
    return {
        "edges": qts,
        "counts": counts,
        "mean": mean,
        "std": std,
        "lo": lo,
        "fa": fa,
        "fb": fb,
        "sign": np.where(flip, -1.0, 1.0),
        "live": live,
    }


def _bin_edges(col, y, params):
    kind = params["discretizer"]
    if kind in _DISCRETIZER_PERCENTILES:
        return np.unique(np.percentile(col, _DISCRETIZER_PERCENTILES[kind]))
    # Entropy: the thresholds of a depth-3 tree on this single feature.
    if params["mode"] == "classification":
        tree = DecisionTreeClassifier(criterion="entropy", max_depth=3, random_state=0)
    else:
        tree = DecisionTreeRegressor(max_depth=3, random_state=0)
    tree.fit(col.reshape(-1, 1), y)
    qts = tree.tree_.threshold[tree.tree_.children_left > -1]
    if qts.size == 0:
        qts = np.array([np.median(col)])
    return np.unique(qts)


class _Group:
    """The rows of one batch of model queries, with their per-row streams.

    ``buffers`` is a list shared by the groups of one slice: sample buffers
    a group leaves there are reused by the next (see :meth:`sample_buffers`).
    """

    def __init__(self, rows, x_num, x_code, z0, X_orig, gens, buffers=None):
        self.rows = rows
        self.x_num = x_num
        self.x_code = x_code
        self.z0 = z0
        self.X_orig = X_orig
        self.gens = gens
        self.buffers = [] if buffers is None else buffers

    def sample_buffers(self, shape):
        """One buffer of ``shape`` per row, reused from the slice's earlier groups.

        Writing to freshly mapped memory costs a page fault per 4 KiB on
        first touch, at image width as much as the model's forward pass; a
        buffer written by an earlier
        group costs nothing more. A group's samples are not kept once its
        rows are finished, so the next group may overwrite them. Points are
        drawn straight into a buffer, round after round: memory not yet
        drawn into is only reserved (``np.empty`` does not touch it), and a
        grown sample never copies the points it has.
        """
        pool = self.buffers
        pool[:] = [b for b in pool if b.shape == shape]
        while len(pool) < len(self.rows):
            pool.append(np.empty(shape))
        return pool[: len(self.rows)]


def _row_streams(key_row, seed, sampling="random", table=None):
    """Two independent streams per row: explanation and held-out scoring.

    Derived from the row's content and the call's seed only, so a row's
    result does not depend on the batch it came in or on ``n_jobs``. With
    ``sampling="qmc"`` the explanation stream reads the call's quasi-random
    ``table`` (a :class:`_SobolTable`); held-out scoring always uses
    independent draws.
    """
    children = row_seed(key_row, seed).spawn(2)
    main, holdout = (np.random.default_rng(c) for c in children)
    if sampling == "qmc":
        main = _SobolStream(main, table)
    return main, holdout


# Mixed into the call's seed for its Sobol' table, apart from every row's seed.
_TABLE_KEY = 0x51AB1E


class _SobolTable:
    """One scrambled Sobol' sequence per call, shared by the rows' streams.

    Drawing and scrambling a Sobol' sequence and mapping it through the
    inverse normal CDF cost, at image width, more than the model's own
    forward pass per point; done once per call and read by every row through its
    own column permutation and reflection (:class:`_SobolStream`), they cost
    a gather per point. Points are generated as far as the longest row has
    read, into arrays reserved for ``capacity`` points (memory not yet
    written is not touched). The table depends only on the seed and the
    column counts, so every worker builds the same one.
    """

    def __init__(self, seed, n_cont, n_code, capacity):
        self.n_cont, self.n_code = n_cont, n_code
        ss = np.random.SeedSequence([int(seed), _TABLE_KEY])
        self.engine = qmc.Sobol(
            max(n_cont + n_code, 1), scramble=True, seed=np.random.default_rng(ss)
        )
        capacity = max(int(capacity), 1)
        self.normals = np.empty((capacity, n_cont))
        self.uniforms = np.empty((capacity, n_code))
        self.size = 0
        self._lock = threading.Lock()

    def rows(self, start, stop):
        """Normals and uniforms of points ``start:stop`` of the sequence."""
        if stop > self.size:
            with self._lock:
                self._extend(stop)
        return self.normals[start:stop], self.uniforms[start:stop]

    def _extend(self, stop):
        if stop <= self.size:
            return
        if stop > self.normals.shape[0]:
            cap = max(stop, 2 * self.normals.shape[0])
            self.normals = _grown(self.normals, cap, self.size)
            self.uniforms = _grown(self.uniforms, cap, self.size)
        c0 = self.n_cont
        block = max(16, _SAMPLE_BLOCK_VALUES // max(c0 + self.n_code, 1))
        with warnings.catch_warnings():
            # Sizes that are not powers of two lose a little of the balance.
            warnings.simplefilter("ignore", UserWarning)
            for a in range(self.size, stop, block):
                b = min(a + block, stop)
                U = self.engine.random(b - a)
                # Keep inverse distributions finite at the (measure-zero) edges.
                np.clip(U, 1e-16, 1.0 - 1e-16, out=U)
                ndtri(U[:, :c0], out=self.normals[a:b])
                self.uniforms[a:b] = U[:, c0 : c0 + self.n_code]
        self.size = stop


def _grown(a, rows, keep):
    out = np.empty((rows,) + a.shape[1:])
    out[:keep] = a[:keep]
    return out


_TABLES = {}
_TABLES_LOCK = threading.Lock()


def sobol_table(seed, n_cont, n_code, capacity):
    """The call's table for ``seed``, built once per process.

    Calls explained a few rows at a time (progress bars, parallel workers)
    read the same table instead of drawing it again; one table is kept, the
    last one asked for (:func:`release_sobol_tables` drops it).
    """
    key = (int(seed), int(n_cont), int(n_code))
    with _TABLES_LOCK:
        table = _TABLES.get(key)
        if table is None:
            _TABLES.clear()
            table = _TABLES[key] = _SobolTable(seed, n_cont, n_code, capacity)
    return table


def release_sobol_tables():
    """Forget the kept table (called when an ``explain`` call ends)."""
    with _TABLES_LOCK:
        _TABLES.clear()


class _SobolStream:
    """A row's quasi-random stream: the call's Sobol' table, read from its
    first point on with the row's own random cyclic shift of the columns
    (continuous and coded apart) and reflection of each continuous one
    (``-z`` is the normal of ``1 - u``).

    Over the table's scrambling, each row's points are a scrambled Sobol'
    sample, as if the row had its own sequence; points appended later
    (S-LIME's growing samples) continue it. The shift and reflections keep
    the rows of one call from reading the same column for the same feature,
    at the cost of a copy (a permutation's gather costs more).
    """

    def __init__(self, rng, table):
        self.rng, self.table, self.pos = rng, table, 0
        self.shift = None

    def draw(self, m, out):
        """Write the next ``m`` points' normals into ``out``; return their
        uniforms (the coded columns')."""
        t = self.table
        if self.shift is None:
            self.shift = int(self.rng.integers(max(t.n_cont, 1)))
            self.sign = self.rng.integers(0, 2, t.n_cont) * 2.0 - 1.0
            self.code_shift = int(self.rng.integers(max(t.n_code, 1)))
        G, U = t.rows(self.pos, self.pos + m)
        self.pos += m
        k = t.n_cont - self.shift
        np.multiply(G[:, self.shift :], self.sign[:k], out=out[:, :k])
        np.multiply(G[:, : self.shift], self.sign[k:], out=out[:, k:])
        if not t.n_code or not self.code_shift:
            return U
        return np.concatenate(
            [U[:, self.code_shift :], U[:, : self.code_shift]], axis=1
        )


def draw_neighbourhoods(space, ctx, m, first, rows=None, out=None):
    """Draw ``m`` points per row; with ``first`` the row itself is point 0.

    ``rows`` selects positions in the group ``ctx`` (default: all) and ``m``
    may be one size per selected row. Returns per-row arrays ``Z`` (views of
    one array, or the arrays of ``out``, one per row, when given) and one
    stacked query array ``Q`` (internal column order).
    """
    rows = range(len(ctx.rows)) if rows is None else rows
    sizes = np.broadcast_to(np.asarray(m), (len(rows),))
    ends = np.cumsum(sizes)
    Q = np.empty((int(ends[-1]), space.d))
    Z = np.empty_like(Q) if out is None else None
    Zs = []
    for k, (i, end, size) in enumerate(zip(rows, ends, sizes)):
        r, start = ctx.rows[i], end - size
        z = Z[start:end] if out is None else out[k]
        lo = 1 if first else 0
        if first:
            z[0], Q[start] = ctx.z0[r], 0.0
        space.sample(
            ctx.gens[i][0], ctx.x_num[r], ctx.x_code[r], z[lo:], Q[start + lo : end]
        )
        Zs.append(z)
    return Zs, Q, sizes
