"""The explain scaffold every explainer shares.

An explainer validates its rows into an :class:`ExplainBatch` (how many rows,
how to explain a range of them, how to mark a range not run, and what
identifies the call for a checkpoint); :class:`ExplainScaffoldMixin` then
explains the batch in one call or a chunk at a time, through a checkpoint
when one is given, on one pool of workers, counted on one progress bar, and
warns once at the end about the rows whose results are not sound.
"""

# SPDX-License-Identifier: BSD-3-Clause

import contextlib
from collections.abc import Callable
from typing import NamedTuple

from sklearn_plm_explain._checkpoint import (
    check_chunking,
    counted_chunks,
    explain_in_chunks,
    iter_chunks,
)
from sklearn_plm_explain._utils import _progress
from sklearn_plm_explain._utils._parallel import worker_pool


class ExplainBatch(NamedTuple):
    """The validated rows of one ``explain`` call, as the scaffold sees them.

    Attributes
    ----------
    n : int
        Number of rows.
    run : callable
        ``run(start, stop, seed, bar, pool)`` explains rows ``start:stop``
        and returns their Explanation, counting them on ``bar``; on a
        :class:`ModelResponseError` it leaves the rows it finished in the
        error's ``partial``.
    not_run : callable
        ``not_run(start, stop)``: rows ``start:stop`` marked not run.
    identity : dict
        ``rows`` and ``target``, what identifies the call's data in a
        checkpoint.
    """

    n: int
    run: Callable
    not_run: Callable
    identity: dict


class ExplainScaffoldMixin:
    """``explain`` and ``explain_chunked`` over an explainer's hooks.

    Hooks: ``_warn_batch(fields, stacklevel)`` warns about the per-row
    ``fields`` named in ``_warn_fields`` of all rows (``stacklevel`` as in
    :func:`warnings.warn`, from the hook); ``_ordered_pool`` says
    whether the workers must return their results in order;
    ``_batch_scope()`` is a context around the whole batch (for per-call
    caches). The explainer has ``n_jobs``, ``verbose`` and ``random_state``.
    """

    _warn_fields = ("status",)
    _ordered_pool = False

    def _batch_scope(self):
        return contextlib.nullcontext()

    def _pool_and_bar(self, n, desc):
        stack = contextlib.ExitStack()
        bar = stack.enter_context(_progress.progress_bar(n, self.verbose, desc))
        pool = stack.enter_context(worker_pool(self.n_jobs, ordered=self._ordered_pool))
        stack.enter_context(self._batch_scope())
        return stack, bar, pool

    def _explain_batch(self, batch, checkpoint=None, desc=None, depth=1):
        """The Explanation of all rows of ``batch``. ``depth``: the calls
        between this method and the user's (1 from ``explain``), so that the
        warning points at the user's line."""
        stack, bar, pool = self._pool_and_bar(batch.n, desc or type(self).__name__)
        with stack:
            explanation = explain_in_chunks(
                self,
                checkpoint,
                _with(batch.run, bar, pool),
                batch.n,
                not_run=batch.not_run,
                **batch.identity,
            )
            if bar.n < batch.n:
                # Rows a checkpoint already held were not explained again.
                bar.update(batch.n - bar.n)
        fields = {f: getattr(explanation, f) for f in self._warn_fields}
        # _warn_batch -> here -> depth calls -> the user's line.
        self._warn_batch(fields, depth + 3)
        return explanation

    def _explain_chunks(self, batch, chunk_size, checkpoint, row_bytes):
        """The generator of ``explain_chunked``; the chunk size is checked
        here, before the first chunk is asked for."""
        size = check_chunking(chunk_size, checkpoint, row_bytes)
        return self._chunk_generator(batch, checkpoint, size)

    def _chunk_generator(self, batch, checkpoint, size):
        stack, bar, pool = self._pool_and_bar(batch.n, type(self).__name__)
        with stack:
            chunks = iter_chunks(
                self,
                checkpoint,
                _with(batch.run, bar, pool),
                batch.n,
                chunk_size=size,
                not_run=batch.not_run,
                **batch.identity,
            )
            kept = yield from counted_chunks(chunks, bar, list(self._warn_fields))
        if kept:
            # _warn_batch -> this generator -> the caller's loop.
            self._warn_batch(kept, 3)


def _with(run, bar, pool):
    """``run(start, stop, seed)`` with the batch's bar and pool."""

    def bound(start, stop, seed):
        return run(start, stop, seed, bar, pool)

    return bound
