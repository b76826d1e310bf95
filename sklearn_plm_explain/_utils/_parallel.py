"""Seeds and workers: a seed per row derived from its values, one pool of
workers per call, rows mapped over slices in order or as they finish."""

# SPDX-License-Identifier: BSD-3-Clause

import contextlib
import numbers
import zlib
from functools import lru_cache

import numpy as np
from sklearn.utils import check_random_state, gen_even_slices
from sklearn.utils.parallel import Parallel, delayed
from threadpoolctl import threadpool_limits


def base_seed(random_state):
    """One integer drawn before any dispatch, shared by all rows of a call."""
    if isinstance(random_state, numbers.Integral):
        return _base_seed_of(int(random_state))
    rng = check_random_state(random_state)
    return int(rng.randint(np.iinfo(np.int32).max))


@lru_cache(maxsize=64)
def _base_seed_of(seed):
    # An integer seed always gives the same draw; seeding a Mersenne Twister
    # is not free, and a one-row call pays it every time.
    return int(check_random_state(seed).randint(np.iinfo(np.int32).max))


def row_generators(X, seed):
    """One independent generator per row, derived from the row's content.

    Seeding from the content rather than the position makes every row's
    explanation independent of the batch it came in and of ``n_jobs``.
    Identical rows get identical explanations.
    """
    return [np.random.default_rng(row_seed(row, seed)) for row in X]


def row_seed(row, seed):
    """The seed of one explained row: the call's seed and the row's content.

    Every explainer derives its per-row randomness from this, so that a row's
    explanation depends on neither the batch it came in nor ``n_jobs``.
    """
    content = np.ascontiguousarray(row, dtype=np.float64).tobytes()
    return np.random.SeedSequence([seed, zlib.crc32(content)])


def _limited(func, *args):
    # Several workers each running multi-threaded BLAS would oversubscribe.
    with threadpool_limits(limits=1, user_api="blas"):
        return func(*args)


@contextlib.contextmanager
def worker_pool(n_jobs, ordered=False):
    """Workers shared by the calls of :func:`map_row_slices` in the block that
    are given it as ``pool`` (None with one job).

    A joblib ``Parallel`` context, entered at the first call that sends
    slices to workers: its start and stop, with the arrays it memory-maps for
    the workers, are costly, and a run of many chunks would pay them once a
    chunk. ``ordered`` as in :func:`map_row_slices`.
    """
    from joblib import effective_n_jobs

    if effective_n_jobs(n_jobs) <= 1:
        yield None
        return
    with contextlib.ExitStack() as stack:
        yield _Pool(n_jobs, ordered, stack)


class _Pool:
    """A ``Parallel`` context entered (on ``stack``) when first needed: a
    call whose rows make one slice runs in this process and needs none."""

    def __init__(self, n_jobs, ordered, stack):
        self.n_jobs, self.ordered, self._stack = n_jobs, ordered, stack
        self._parallel = None

    def get(self):
        if self._parallel is None:
            parallel = Parallel(
                n_jobs=self.n_jobs, return_as=_return_as(self.ordered), batch_size=1
            )
            self._parallel = self._stack.enter_context(parallel)
        return self._parallel


def _return_as(ordered):
    return "generator" if ordered else "generator_unordered"


def map_even_slices(func, n_rows, n_jobs, *args, start=0, pool=None):
    """Run ``func(rows_slice, *args)`` over one even slice of rows per job,
    in order.

    The slices cover rows ``start`` to ``start + n_rows`` of the batch (a
    checkpointed run explains its rows a chunk at a time). ``pool`` as in
    :func:`map_row_slices`.
    """
    from joblib import effective_n_jobs

    n_slices = min(effective_n_jobs(n_jobs), max(n_rows, 1))
    slices = [
        slice(start + sl.start, start + sl.stop)
        for sl in gen_even_slices(n_rows, n_slices)
    ]
    return list(map_row_slices(func, slices, n_jobs, *args, ordered=True, pool=pool))


def map_row_slices(func, slices, n_jobs, *args, ordered=False, pool=None):
    """Yield ``func(rows_slice, *args)`` for each of ``slices``.

    With one job the slices run in order in this process; with more, they go
    to the workers one at a time as each becomes free (an uneven slice then
    holds up one worker, not the call), and come back in the order they end
    (in the order given with ``ordered``): the workers of ``pool`` (from
    :func:`worker_pool` with the same ``ordered``), or of a ``Parallel`` of
    this call.
    """
    from joblib import effective_n_jobs

    if effective_n_jobs(n_jobs) <= 1 or len(slices) <= 1:
        for sl in slices:
            yield func(sl, *args)
        return
    # The outer limit covers thread workers, which share this process's BLAS
    # (their own limits would race to restore it); the inner one process
    # workers.
    if pool is None:
        parallel = Parallel(n_jobs=n_jobs, return_as=_return_as(ordered), batch_size=1)
    elif pool.ordered != ordered:
        raise ValueError(f"a pool with ordered={pool.ordered} cannot keep this order")
    else:
        parallel = pool.get()
    with threadpool_limits(limits=1, user_api="blas"):
        yield from parallel(delayed(_limited)(func, sl, *args) for sl in slices)
