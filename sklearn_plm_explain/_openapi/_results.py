"""The per-row result fields of the OpenAPI search, in one table.

The search of a group fills a :class:`ResultTable`, the explainer stacks the
groups' tables (or pads a failing group's to the whole range, its other rows
not run) and builds the :class:`Explanation` from it: every one of these
starts from :data:`RESULT_FIELDS`, so a field is declared once.
"""

# SPDX-License-Identifier: BSD-3-Clause

from typing import Any, NamedTuple

import numpy as np


def _no_points(sizes):
    """No query points: a row that sent none, or was not run."""
    return np.empty((0, sizes["d"]))


class ResultField(NamedTuple):
    """One per-row field: its name, dtype, value before (or without) a run,
    and per-row shape in terms of ``"d"`` (features) and ``"C"`` (outputs).

    A callable ``fill`` makes a ragged field: an object array holding one
    array per row, each starting as ``fill(sizes)``. An ``optional`` field is
    only kept when asked for (``return_queries``).
    """

    name: str
    dtype: Any
    fill: Any
    shape: tuple = ()
    optional: bool = False

    def allocate(self, n, sizes):
        if callable(self.fill):
            arr = np.empty(n, dtype=object)
            for i in range(n):
                arr[i] = self.fill(sizes)
            return arr
        shape = (n, *(sizes[s] for s in self.shape))
        return np.full(shape, self.fill, dtype=self.dtype)


# In the order of the Explanation's fields (which puts values, target, coef,
# status and converged first). A row never searched keeps every fill: no
# estimate (NaN), no bound (inf), no radius, no queries, its target unresolved
# (-1, reported as class 0) and its precision unread (""); an unfinished row
# of a failing group keeps what it got to (its queries spent, its radius).
RESULT_FIELDS = (
    ResultField("coef", np.float64, np.nan, ("d", "C")),
    ResultField("intercept", np.float64, np.nan, ("C",)),
    ResultField("target", np.intp, -1),
    ResultField("status", object, "not_run"),
    ResultField("error_bound", np.float64, np.inf),
    ResultField("radius", np.float64, np.nan),
    ResultField("n_iter", np.intp, 0),
    ResultField("n_queries", np.intp, 0),
    ResultField("reused_from", np.intp, -1),
    ResultField("response_precision", object, ""),
    ResultField("queries", object, _no_points, optional=True),
)


class ResultTable:
    """The result fields of rows ``offset`` to ``offset + n`` of a batch.

    Each field is an attribute holding an array with one entry per row
    (``table.status[i]``); ``arrays`` holds them all, in field order.

    Parameters
    ----------
    arrays : dict of str to ndarray
        The fields, each with one entry per row.
    n_features, n_outputs : int
        Sizes of the per-row shapes (``"d"`` and ``"C"``).
    offset : int, default=0
        Position of the first row in the batch.
    """

    def __init__(self, arrays, *, n_features, n_outputs, offset=0):
        self.arrays = arrays
        self.sizes = {"d": n_features, "C": n_outputs}
        self.offset = offset

    @classmethod
    def blank(cls, n, *, n_features, n_outputs, offset=0, queries=False):
        """``n`` rows not run; with ``queries``, the optional fields too."""
        sizes = {"d": n_features, "C": n_outputs}
        arrays = {
            f.name: f.allocate(n, sizes)
            for f in RESULT_FIELDS
            if queries or not f.optional
        }
        return cls(arrays, n_features=n_features, n_outputs=n_outputs, offset=offset)

    def __getattr__(self, name):
        # Only called when normal lookup fails: the fields.
        arrays = self.__dict__.get("arrays")
        if arrays is not None and name in arrays:
            return arrays[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __len__(self):
        return self.arrays["status"].shape[0]

    @classmethod
    def stacked(cls, parts):
        """The rows of consecutive tables, in one table."""
        first = parts[0]
        arrays = {
            name: np.concatenate([p.arrays[name] for p in parts])
            for name in first.arrays
        }
        return cls(arrays, **_sizes(first), offset=first.offset)

    def put(self, part):
        """Write the rows of ``part`` (a table of some of these rows) in place."""
        rows = slice(part.offset - self.offset, part.offset - self.offset + len(part))
        for name, arr in part.arrays.items():
            self.arrays[name][rows] = arr

    def padded(self, n, offset):
        """Rows ``offset:offset + n`` of the batch: this table's rows in their
        place, the others not run."""
        queries = "queries" in self.arrays
        table = self.blank(n, **_sizes(self), offset=offset, queries=queries)
        rows = slice(self.offset - offset, None)
        for name, arr in self.arrays.items():
            table.arrays[name][rows][: arr.shape[0]] = arr
        return table


def _sizes(table):
    return {"n_features": table.sizes["d"], "n_outputs": table.sizes["C"]}
