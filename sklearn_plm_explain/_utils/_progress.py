"""Progress bars for long explanations (rows done, rate and time left)."""

# SPDX-License-Identifier: BSD-3-Clause

import sys


class _Silent:
    """The bar of a quiet run: counts, prints nothing."""

    def __init__(self, total):
        self.total, self.n = total, 0

    def update(self, n=1):
        self.n += n

    def close(self):
        pass


def progress_bar(total, verbose, desc="rows"):
    """A bar over ``total`` rows on stderr, or a silent counter.

    Parameters
    ----------
    total : int
        Rows the bar runs over.
    verbose : int or bool
        Falsy for no output (the default of every explainer in library use).
    desc : str, default="rows"
        Label shown in front of the bar.

    Returns
    -------
    bar : object
        With ``update(n)`` (``n`` rows finished) and ``close()``; usable as a
        context manager.
    """
    if not verbose:
        return _closing(_Silent(total))
    from tqdm.auto import tqdm

    bar = tqdm(
        total=total,
        desc=desc,
        unit="row",
        file=sys.stderr,
        dynamic_ncols=True,
    )
    return _closing(bar)


class _closing:
    """Context manager that closes a bar however the block ends."""

    def __init__(self, bar):
        self.bar = bar

    def __enter__(self):
        return self.bar

    def __exit__(self, *exc):
        self.bar.close()
        return False
