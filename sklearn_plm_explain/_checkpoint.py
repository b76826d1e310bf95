"""Resumable explanations: finished chunks of rows kept on disk."""

# SPDX-License-Identifier: BSD-3-Clause

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from numbers import Integral

import numpy as np
from sklearn import get_config

from sklearn_plm_explain._explanation import Explanation
from sklearn_plm_explain._utils._errors import ModelResponseError
from sklearn_plm_explain._utils._parallel import base_seed

__all__ = ["Checkpoint", "CheckpointError"]

_FORMAT = "sklearn-plm-explain checkpoint"
_VERSION = 1
_MANIFEST = "manifest.json"
# Parameters that change how, not what, rows are explained.
_EXECUTION_PARAMS = ("n_jobs", "verbose")

# While set, models reduce themselves to their identity when pickled for a
# hash (a RemoteModel leaves out its headers).
fingerprinting = threading.local()


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: corrupted, or from another run."""


class Checkpoint:
    """Where ``explain(X, checkpoint=...)`` keeps its finished rows.

    The rows are explained a chunk at a time. As each chunk finishes it is
    written to the checkpoint (a directory: one file per chunk and a manifest,
    each written to a temporary file first and then renamed over the old
    one, so that a run killed at any moment leaves a readable checkpoint). A
    later call with the same arguments - same explainer parameters and
    fitted state, same model, same rows and targets - explains only the rows
    not yet finished and returns what an uninterrupted run returns. Anything
    else is refused with :class:`CheckpointError`; nothing is silently mixed.

    The checkpoint holds per-row results and hashes of the arguments: no
    rows, and never a model's headers or other secrets.

    Parameters
    ----------
    path : str or path-like
        Directory of the checkpoint (created if needed).
    chunk_size : int, default=200
        Rows per chunk. A checkpoint keeps the chunk size it was started
        with.
    progress : callable, default=None
        Called as ``progress(done, n_rows, reused)`` after each chunk, with
        the number of rows finished so far, and whether the chunk came from
        the checkpoint.

    Examples
    --------
    >>> import tempfile
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_plm_explain import Checkpoint, OpenAPIExplainer
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=1000).fit(X, y)
    >>> explainer = OpenAPIExplainer(model, random_state=0).fit(X)
    >>> path = tempfile.mkdtemp()
    >>> first = explainer.explain(X[:30], checkpoint=Checkpoint(path, chunk_size=10))
    >>> again = explainer.explain(X[:30], checkpoint=path)  # nothing is queried
    >>> bool((again.values == first.values).all())
    True
    """

    def __init__(self, path, *, chunk_size=200, progress=None):
        self.path = os.fspath(path)
        self.chunk_size = _positive_chunk_size(chunk_size, allow_bool=True)
        self.progress = progress

    def __repr__(self):
        return f"Checkpoint({self.path!r}, chunk_size={self.chunk_size})"


def explain_in_chunks(explainer, checkpoint, run, n, *, rows, target, not_run):
    """Explain ``n`` rows, through a checkpoint when one is given.

    ``run(start, stop, seed)`` explains rows ``start:stop`` and returns their
    :class:`Explanation`; on a :class:`ModelResponseError` it leaves the
    rows it finished in the error's ``partial`` (an Explanation of those
    rows). ``not_run(start, stop)`` gives rows ``start:stop`` marked not run, with the batch
    fields of the explainer. ``rows`` and ``target`` are what identifies the
    call's data (arrays, or tuples of them).
    """
    if checkpoint is None:
        return run(0, n, base_seed(explainer.random_state))
    parts = []
    chunks = iter_chunks(
        explainer, checkpoint, run, n, rows=rows, target=target, not_run=not_run
    )
    try:
        for part in chunks:
            parts.append(part)
    except ModelResponseError as err:
        # The failing chunk's rows are in err.partial; add the others.
        stop = sum(map(len, parts)) + len(err.partial)
        err.partial = _join([*parts, err.partial, not_run(stop, n)], not_run)
        raise
    return _join(parts, not_run)


def iter_chunks(
    explainer, checkpoint, run, n, *, chunk_size=None, rows, target, not_run
):
    """Explain ``n`` rows a chunk at a time, yielding each chunk's Explanation.

    ``run``, ``not_run``, ``rows`` and ``target`` as in
    :func:`explain_in_chunks`. The chunks follow ``checkpoint``'s chunk size
    when one is given (finished chunks are read from it, new ones written
    to it), else ``chunk_size`` rows each, with the explainer's seed: each
    row gets the random draws it gets in one call, so a chunk's rows differ
    from those of one call over all rows at most by the rounding of the
    model's responses in batches of another size. On a
    :class:`ModelResponseError` the error's ``partial`` holds the failing
    chunk's rows (those not finished marked not run); the chunks before it
    have been yielded.
    """
    if checkpoint is None:
        seed = base_seed(explainer.random_state)
        for start in range(0, n, chunk_size):
            stop = min(start + chunk_size, n)
            yield _chunk(run, start, stop, seed, not_run)
        return
    if not isinstance(checkpoint, Checkpoint):
        checkpoint = Checkpoint(checkpoint)
    fingerprint = _fingerprint(explainer, rows, target)
    store = _Store.open(checkpoint, fingerprint, n, explainer)
    for start in range(0, n, store.chunk_size):
        stop = min(start + store.chunk_size, n)
        part = store.load(start, stop)
        reused = part is not None
        if part is None:
            part = _chunk(run, start, stop, store.seed, not_run)
            store.save(start, stop, part)
        if checkpoint.progress is not None:
            checkpoint.progress(stop, n, reused)
        # Rows read back from the checkpoint get the explainer's batch fields.
        if reused:
            part = _join([part], not_run)
        yield part
        # Hold no finished rows while the next chunk is explained.
        del part


def counted_chunks(chunks, bar, fields):
    """Yield the chunks, counting their rows on ``bar`` (rows read back from
    a checkpoint too); return the per-row ``fields`` of all of them, for the
    one warning at the end."""
    done, kept = 0, {field: [] for field in fields}
    for part in chunks:
        done += len(part)
        bar.update(done - bar.n)
        for field in fields:
            kept[field].append(getattr(part, field))
        yield part
        # Hold no finished rows while the next chunk is explained.
        del part
    return {field: np.concatenate(v) for field, v in kept.items() if v}


def _chunk(run, start, stop, seed, not_run):
    """``run(start, stop, seed)``; on a model failure the error's ``partial``
    holds all rows ``start:stop``, those not finished marked not run."""
    try:
        return run(start, stop, seed)
    except ModelResponseError as err:
        # run leaves every row of the range in it, or nothing.
        if not isinstance(err.partial, Explanation):
            err.partial = not_run(start, stop)
        raise


def check_chunking(chunk_size, checkpoint, row_bytes):
    """Rows per chunk of ``explain_chunked``: ``chunk_size``, or as many as
    keep a chunk's results (``row_bytes`` a row) within scikit-learn's
    ``working_memory`` when it is None; None with a checkpoint, whose own
    chunk size rules (``chunk_size`` must then be None)."""
    if chunk_size is None:
        if checkpoint is not None:
            return None
        budget = get_config()["working_memory"] * 2**20
        return int(max(1, budget // max(row_bytes, 1)))
    chunk_size = _positive_chunk_size(chunk_size, " or None")
    if checkpoint is not None:
        raise ValueError(
            "chunk_size and checkpoint were both given: a checkpoint keeps the "
            "chunk size it was started with; set it with Checkpoint(path, "
            "chunk_size=...)."
        )
    return chunk_size


def _positive_chunk_size(chunk_size, what="", allow_bool=False):
    """``chunk_size`` as an int, or a ValueError saying it must be a positive
    integer (``what`` names what else it may be)."""
    if (
        (isinstance(chunk_size, bool) and not allow_bool)
        or not isinstance(chunk_size, Integral)
        or chunk_size < 1
    ):
        raise ValueError(
            f"chunk_size must be a positive integer{what}; got {chunk_size!r}."
        )
    return int(chunk_size)


def _join(parts, not_run):
    """One Explanation of the parts' rows, with the explainer's batch fields."""
    template = not_run(0, 0)
    parts = [p for p in parts if len(p)]
    if not parts:
        return template
    rows = {
        name: np.concatenate([p._rows[name] for p in parts]) for name in parts[0].fields
    }
    return template._with_rows(rows)


# -----------------------------------------------------------------------------
# Fingerprints
# -----------------------------------------------------------------------------
def _fingerprint(explainer, rows, target):
    """Hashes of everything a result depends on, by component."""
    from sklearn_plm_explain import __version__

    params = explainer.get_params(deep=False)
    params.pop("estimator", None)
    for name in _EXECUTION_PARAMS:
        params.pop(name, None)
    if "random_state" in params and not isinstance(
        params["random_state"], (Integral, type(None))
    ):
        # A generator's state moves with every draw; the checkpoint keeps
        # the seed the first run drew from it.
        params["random_state"] = type(params["random_state"]).__name__
    fitted = {
        k: v
        for k, v in vars(explainer).items()
        # The model is compared by its own hash; its repr may hold addresses.
        if k not in ("estimator", "estimator_", "_caller", "_estimator_repr")
        and k not in params
        and k not in _EXECUTION_PARAMS
        and k != "random_state"
    }
    model = getattr(explainer, "estimator_", None)
    return {
        "package": str(__version__),
        "explainer": f"{type(explainer).__module__}.{type(explainer).__qualname__}",
        "params": _hash(params),
        "fitted": _hash(fitted),
        "model": _model_hash(model),
        "rows": _hash(rows),
        "target": _hash(target),
    }


def _model_hash(model):
    identity = getattr(model, "_identity", None)
    if callable(identity):
        return _hash(("remote", identity()))
    try:
        return _hash(model)
    except Exception:  # an object pickle cannot hash (a lambda, a closure)
        name = getattr(model, "__qualname__", type(model).__qualname__)
        module = getattr(model, "__module__", type(model).__module__)
        return _hash(("unhashable", f"{module}.{name}"))


def _hash(obj):
    import joblib

    fingerprinting.active = True
    try:
        return joblib.hash(obj, hash_name="sha1")
    finally:
        fingerprinting.active = False


# -----------------------------------------------------------------------------
# Storage
# -----------------------------------------------------------------------------
class _Store:
    """The checkpoint directory: a manifest and one ``.npz`` file per chunk."""

    def __init__(self, path, manifest):
        self.path = path
        self.manifest = manifest
        self.chunk_size = manifest["chunk_size"]
        self.seed = manifest["seed"]
        self.chunks = {(c["start"], c["stop"]): c for c in manifest["chunks"]}

    @classmethod
    def open(cls, checkpoint, fingerprint, n, explainer):
        path = checkpoint.path
        manifest_path = os.path.join(path, _MANIFEST)
        if os.path.exists(manifest_path):
            manifest = _read_manifest(manifest_path)
            _check_match(manifest, fingerprint, n, path)
            return cls(path, manifest)
        if os.path.isdir(path) and any(
            name.startswith("chunk-") for name in os.listdir(path)
        ):
            raise CheckpointError(
                f"The checkpoint {path} has chunk files but no manifest: it is "
                "damaged. Remove it to start again."
            )
        os.makedirs(path, exist_ok=True)
        manifest = {
            "format": _FORMAT,
            "version": _VERSION,
            "fingerprint": fingerprint,
            "n_rows": int(n),
            "chunk_size": checkpoint.chunk_size,
            "seed": base_seed(explainer.random_state),
            "chunks": [],
        }
        store = cls(path, manifest)
        store._write_manifest()
        return store

    def load(self, start, stop):
        entry = self.chunks.get((start, stop))
        if entry is None:
            return None
        file = os.path.join(self.path, entry["file"])
        try:
            with open(file, "rb") as fh:
                content = fh.read()
        except OSError as exc:
            raise CheckpointError(
                f"The checkpoint {self.path} lists rows {start}..{stop - 1} in "
                f"{entry['file']}, which cannot be read ({exc.strerror}). Remove "
                "the checkpoint to start again."
            ) from None
        if hashlib.sha256(content).hexdigest() != entry["sha256"]:
            raise CheckpointError(
                f"The checkpoint {self.path} is corrupted: {entry['file']} (rows "
                f"{start}..{stop - 1}) does not match its recorded hash. Remove the "
                "checkpoint to start again."
            )
        rows = _decode_rows(content, self.path, entry["file"])
        lengths = {arr.shape[0] if arr.ndim else -1 for arr in rows.values()}
        if lengths != {stop - start} or "values" not in rows:
            raise CheckpointError(
                f"The checkpoint {self.path} is corrupted: {entry['file']} does "
                f"not hold rows {start}..{stop - 1}."
            )
        values, target = rows.pop("values"), rows.pop("target")
        return Explanation(
            values=values,
            target=target,
            classes=None,
            feature_names=np.empty(values.shape[1] if values.ndim > 1 else 0),
            method="checkpoint",
            **rows,
        )

    def save(self, start, stop, part):
        name = f"chunk-{start:09d}-{stop:09d}.npz"
        content = _encode_rows(part._rows)
        _atomic_write(os.path.join(self.path, name), content)
        entry = {
            "start": int(start),
            "stop": int(stop),
            "file": name,
            "sha256": hashlib.sha256(content).hexdigest(),
        }
        self.chunks[(start, stop)] = entry
        self.manifest["chunks"] = sorted(self.chunks.values(), key=lambda c: c["start"])
        self._write_manifest()

    def _write_manifest(self):
        content = json.dumps(self.manifest, indent=1, sort_keys=True).encode()
        _atomic_write(os.path.join(self.path, _MANIFEST), content)


def _read_manifest(path):
    try:
        with open(path, "rb") as fh:
            manifest = json.loads(fh.read())
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"The checkpoint manifest {path} is corrupted ({type(exc).__name__}: "
            f"{exc}). Remove the checkpoint to start again."
        ) from None
    required = {
        "format",
        "version",
        "fingerprint",
        "n_rows",
        "chunk_size",
        "seed",
        "chunks",
    }
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        raise CheckpointError(f"{path} is not a checkpoint of sklearn-plm-explain.")
    if manifest.get("version") != _VERSION:
        raise CheckpointError(
            f"The checkpoint {path} has format version {manifest.get('version')}; "
            f"this version of sklearn-plm-explain reads version {_VERSION}."
        )
    if not required <= set(manifest):
        raise CheckpointError(
            f"The checkpoint manifest {path} is corrupted: it lacks "
            f"{sorted(required - set(manifest))}."
        )
    try:
        for c in manifest["chunks"]:
            c["start"], c["stop"], c["file"], c["sha256"] = (
                int(c["start"]),
                int(c["stop"]),
                str(c["file"]),
                str(c["sha256"]),
            )
            if os.path.basename(c["file"]) != c["file"]:
                raise ValueError(c["file"])
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(
            f"The checkpoint manifest {path} is corrupted: bad chunk entries."
        ) from None
    return manifest


_WHAT = {
    "package": "the version of sklearn-plm-explain",
    "explainer": "the explainer's class",
    "params": "the explainer's parameters",
    "fitted": "the explainer's fitted state (fit on other data?)",
    "model": "the explained model",
    "rows": "the rows to explain",
    "target": "the targets (or labels)",
}


def _check_match(manifest, fingerprint, n, path):
    old = manifest["fingerprint"]
    differ = [k for k in fingerprint if old.get(k) != fingerprint[k]]
    if differ:
        what = "; ".join(_WHAT.get(k, k) for k in differ)
        raise CheckpointError(
            f"The checkpoint {path} was written by a different run: {what} "
            "differ(s). Use another checkpoint path, or remove this one to start "
            "again."
        )
    if manifest["n_rows"] != n:  # pragma: no cover - the rows' hash differs too
        raise CheckpointError(
            f"The checkpoint {path} is for {manifest['n_rows']} rows; got {n}."
        )


def _atomic_write(path, content):
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # not every file system syncs folders
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _encode_rows(rows):
    import io

    arrays, objects = {}, []
    for name, arr in rows.items():
        arr = np.asarray(arr)
        if arr.dtype == object:
            objects.append(name)
            arr = arr.astype(str)
        arrays[name] = arr
    arrays["__object_fields__"] = np.array(json.dumps(objects))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _decode_rows(content, path, file):
    import io
    import zipfile

    try:
        with np.load(io.BytesIO(content), allow_pickle=False) as data:
            rows = {name: data[name] for name in data.files}
        objects = json.loads(str(rows.pop("__object_fields__")))
    except (ValueError, OSError, KeyError, zipfile.BadZipFile) as exc:
        raise CheckpointError(
            f"The checkpoint {path} is corrupted: {file} cannot be read "
            f"({type(exc).__name__})."
        ) from None
    for name in objects:
        rows[name] = rows[name].astype(object)
    return rows
