"""Rows in groups, groups in slices: how many rows one search takes at once
(their arrays within a memory budget), the slices of whole groups sent to the
workers, and the memory a worker thread reuses from group to group."""

# SPDX-License-Identifier: BSD-3-Clause

import threading
from contextlib import contextmanager

import numpy as np
from joblib import effective_n_jobs
from sklearn import get_config

from sklearn_plm_explain._openapi._results import ResultTable
from sklearn_plm_explain._utils._errors import ModelResponseError
from sklearn_plm_explain._utils._parallel import map_row_slices

# Row groups keep their largest arrays (their cubes' designs) below this size:
# the allocator then reuses their memory from group to group, where larger
# ones are mapped afresh and paid for again page by page.
_ARRAY_BYTES = 16 * 2**20


# ... but a group holds at least this many rows while its arrays stay below
# the second size: each of a round's products with a basis-sized matrix
# (image width: 786 x 786, 5 MB) reads the whole matrix whatever the number
# of rows, and so does every model call its fixed costs; at image width the
# first size alone would make groups of a few rows.
_MIN_GROUP_ROWS = 8


_MAX_ARRAY_BYTES = 64 * 2**20


# ... and at most this many rows: a group is also the set of rows that share
# certified regions (see ``reuse_regions``), which must not depend on how the
# rows are split across jobs. Groups of this size keep both jobs of a
# 2-core machine busy on a batch of a few hundred rows, and hold enough rows
# for a tree's leaves to be reused.
GROUP_ROWS = 128


# With several jobs, rows go to the workers in about this many slices per job,
# of at least this many rows (see task_slices).
_TASKS_PER_JOB = 8


_MIN_TASK_ROWS = 16


# The workspace of this thread's searches inside a workspace_scope.
THREAD_MEMORY = threading.local()


# A row boxed in between too-small and non-linear cubes may use up to this
# many times (d + 1) witnesses at its largest consistent radius.
_MORE_WITNESSES = 4


def more_points(d, n_witnesses):
    """Points a row's cube may grow by, at most."""
    return max(n_witnesses, _MORE_WITNESSES * (d + 1))


def max_cube_points(d, n_witnesses):
    """The most points a row's cube can hold: a fresh cube's and all it may
    grow by (what ``return_queries`` keeps of a row, at most)."""
    return d + 1 + n_witnesses + more_points(d, n_witnesses)


def rows_per_group(d, n_witnesses, n_outputs):
    """Rows searched together so that a group fits the working memory.

    The search holds about four arrays of one cube's design size per row
    (the round's points, the design, the cube kept, the fit's workspace) and
    the row's results, within scikit-learn's ``working_memory``; and no such
    array over ``_ARRAY_BYTES``, or over ``_MAX_ARRAY_BYTES`` for groups of
    up to ``_MIN_GROUP_ROWS`` rows.
    """
    cube = 8 * (d + n_witnesses + 2) * (d + 1)
    per_row = 4 * cube + 8 * d * (n_outputs + 2)
    budget = get_config()["working_memory"] * 2**20
    rows = max(_ARRAY_BYTES // cube, min(_MIN_GROUP_ROWS, _MAX_ARRAY_BYTES // cube))
    return int(max(1, min(budget // per_row, rows, GROUP_ROWS)))


@contextmanager
def workspace_scope():
    """Searches run by this thread inside the block share one
    :class:`Workspace`, whose memory is let go at the block's end."""
    outer = getattr(THREAD_MEMORY, "workspace", None)
    if outer is None:
        THREAD_MEMORY.workspace = Workspace()
    try:
        yield
    finally:
        if outer is None:
            THREAD_MEMORY.workspace = None


def task_slices(start, stop, group, jobs):
    """The slices of rows ``start:stop`` handed to the workers one at a time.

    With one job, a group at a time. With more, about ``_TASKS_PER_JOB``
    slices per job, so that a slice of costly rows holds up one worker for a
    while rather than the call, and none under ``_MIN_TASK_ROWS`` rows, whose
    sending would cost more than their search. Every slice holds whole
    groups, so that rows are searched with the same neighbours as with one
    job (the results do not depend on ``jobs``).
    """
    n = stop - start
    size = group
    if jobs > 1:
        size = max(-(-n // (jobs * _TASKS_PER_JOB)), min(_MIN_TASK_ROWS, -(-n // jobs)))
        size = group * -(-size // group)
    return [slice(a, min(a + size, stop)) for a in range(start, stop, size)]


def fill_in_groups(table, worker, args, n_jobs, group, bar, pool=None, first=0):
    """Fill ``table`` in place from ``worker`` over slices of its rows.

    ``worker(rows, *args)`` gives the result table of a slice of rows (see
    :func:`task_slices`). Each slice is counted on ``bar`` and written into
    ``table`` as it returns, so that results are never held twice. On a
    model failure the error's ``partial`` is ``table`` with every slice
    finished by then and what the failing slice finished; with several jobs
    the slices that other workers were still running are lost with the call
    that raised, and the rest are not run. ``pool``: the workers of
    :func:`~sklearn_plm_explain._utils._parallel.worker_pool`, or None.
    The ``first`` rows are filled in already.
    """
    start, stop = table.offset + first, table.offset + len(table)
    slices = task_slices(start, stop, group, effective_n_jobs(n_jobs))
    try:
        for part in map_row_slices(worker, slices, n_jobs, *args, pool=pool):
            table.put(part)
            bar.update(len(part))
            del part
    except ModelResponseError as err:
        if isinstance(err.partial, ResultTable):
            table.put(err.partial)
        err.partial = table
        raise


class Workspace:
    """Memory reused for a search's largest arrays, round after round.

    A round's points and its cubes' designs are written into buffers that
    outlive the round: memory the process has touched before, where fresh
    arrays of several megabytes cost the operating system's page faults again
    (at image width, a large part of our own time per row). What a later
    round still needs of a buffer is copied out of it first (see
    :meth:`LocalModelSearch._release_points`).
    """

    def __init__(self):
        self._buffers = {}
        # Set while a search writes into it: a nested search gets its own.
        self.busy = False

    def array(self, name, shape):
        """An uninitialised float64 array of ``shape`` in buffer ``name``,
        which grows when it is too small (the array's earlier contents are
        then gone with the old buffer)."""
        size = int(np.prod(shape))
        buffer = self._buffers.get(name)
        if buffer is None or buffer.size < size:
            buffer = self._buffers[name] = np.empty(size)
        return buffer[:size].reshape(shape)
