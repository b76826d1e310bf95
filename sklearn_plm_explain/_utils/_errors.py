"""The errors of a failing black box: which rows they concern, and what was
finished before them (partial)."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np


class ModelResponseError(ValueError):
    """The explained model returned something that cannot be a valid response.

    Attributes
    ----------
    rows : ndarray of int
        Indices, in the batch passed to ``explain``, of the rows whose queries
        received the invalid responses.
    partial : Explanation or None
        What had been computed before the failure (rows not finished carry the
        status ``"not_run"``), so that no finished work is lost.
    """

    def __init__(self, message, rows, partial=None, *, query_rows=None):
        super().__init__(message)
        self.rows = np.asarray(rows)
        self.partial = partial
        # Positions, in the one model call that failed, of the query points
        # concerned; a caller that knows which explained row each point
        # belongs to turns them into ``rows`` (see ``BlackBox._call``).
        self.query_rows = None if query_rows is None else np.asarray(query_rows)

    def __reduce__(self):
        # Picklable (process workers send their errors back) although the
        # constructor takes more than the message.
        return (_rebuild_error, (type(self), self.args), self.__dict__)


def _rebuild_error(cls, args):
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    return err


class QueryBudgetExceeded(ModelResponseError):
    """The next request to the model would exceed its query budget.

    Raised by :class:`RemoteModel` *before* sending a request that would take
    the number of rows sent past ``max_queries``; nothing beyond the budget is
    sent. Like every :class:`ModelResponseError` raised while explaining, its
    ``partial`` holds every row finished so far.

    Attributes
    ----------
    budget : int
        The budget, ``max_queries``.
    used : int
        Rows already sent (or committed to requests in flight).
    needed : int
        Rows the refused request or model call would have sent.
    """

    def __init__(
        self,
        message,
        rows,
        partial=None,
        *,
        query_rows=None,
        budget=None,
        used=None,
        needed=None,
    ):
        super().__init__(message, rows, partial, query_rows=query_rows)
        self.budget = budget
        self.used = used
        self.needed = needed


def _name_explained_rows(err, owners):
    """Say which explained rows the query points of a failed call belong to.

    A model that raises :class:`ModelResponseError` itself (such as
    :class:`RemoteModel`) knows only positions in the call; the explainer
    knows whose points they are.
    """
    if err.rows.size and err.query_rows is None:
        return
    points = np.arange(len(owners)) if err.query_rows is None else err.query_rows
    points = points[(points >= 0) & (points < len(owners))]
    rows = np.unique(np.asarray(owners)[points])
    err.rows = rows
    err.query_rows = None
    if rows.size:
        shown = ", ".join(str(r) for r in rows[:10]) + (
            " ..." if rows.size > 10 else ""
        )
        err.args = (
            f"{err.args[0]} The query points concerned belong to row(s) {shown} "
            "of the explained batch.",
        ) + err.args[1:]


def _raise_rows(problem, bad, owners, hint=""):
    rows = np.unique(owners[bad])
    shown = ", ".join(str(r) for r in rows[:10]) + (" ..." if rows.size > 10 else "")
    raise ModelResponseError(
        f"The model returned {problem} for {int(bad.sum())} query point(s) "
        f"belonging to row(s) {shown} of the explained batch.{hint}",
        rows=rows,
    )
