"""The result object every explainer returns."""

# SPDX-License-Identifier: BSD-3-Clause

import json

import numpy as np

__all__ = ["Explanation"]

# Fields that describe the batch as a whole; every other field is per row.
_BATCH_FIELDS = ("classes", "feature_names", "method", "params")


class Explanation:
    """Explanations of a batch of rows, with per-row diagnostics.

    Every explainer of this package returns one ``Explanation`` for the whole
    batch passed to ``explain``. All per-row fields are numpy arrays whose first
    axis indexes the explained rows, so ``E[2:5]`` or ``E[mask]`` selects rows of
    every field at once.

    Parameters
    ----------
    values : ndarray of shape (n_samples, n_features)
        Attribution of each feature for the explained target of each row. For
        :class:`OpenAPIExplainer` these are the decision features ``D_c`` of the
        target class; for the LIME explainers the surrogate weights.
    target : ndarray of shape (n_samples,)
        Index into ``classes`` of the explained class of each row (all zeros for
        regression).
    classes : ndarray of shape (n_classes,) or None
        Class labels of the explained model, ``None`` for regression.
    feature_names : ndarray of shape (n_features,)
        Names of the input features.
    method : str
        Name of the method that produced the explanation.
    params : dict, default=None
        Parameters of the explainer that produced it (for provenance).
    **per_row : ndarray
        Further per-row fields, e.g. ``coef``, ``intercept``, ``status``,
        ``converged``, ``n_queries``. Each is reachable as an attribute.

    Attributes
    ----------
    fields : tuple of str
        Names of all per-row fields, ``values`` and ``target`` included.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_plm_explain import Explanation
    >>> e = Explanation(values=np.eye(2), target=np.array([0, 1]),
    ...                 classes=np.array(["a", "b"]),
    ...                 feature_names=np.array(["x0", "x1"]), method="demo",
    ...                 status=np.array(["exact", "exact"]))
    >>> e[1].values
    array([[0., 1.]])
    >>> Explanation.from_dict(json.loads(json.dumps(e.to_dict()))).status
    array(['exact', 'exact'], dtype='<U5')
    """

    def __init__(
        self,
        *,
        values,
        target,
        classes,
        feature_names,
        method,
        params=None,
        **per_row,
    ):
        values = np.asarray(values)
        n = values.shape[0]
        rows = {"values": values, "target": np.asarray(target), **per_row}
        for name, arr in rows.items():
            arr = np.asarray(arr)
            if arr.ndim == 0 or arr.shape[0] != n:
                raise ValueError(
                    f"Per-row field {name!r} has shape {arr.shape}; "
                    f"expected a first axis of length {n}."
                )
            rows[name] = arr
        self._rows = rows
        self.classes = None if classes is None else np.asarray(classes)
        self.feature_names = np.asarray(feature_names, dtype=object)
        self.method = str(method)
        self.params = {} if params is None else dict(params)

    # -- access -----------------------------------------------------------------
    @property
    def fields(self):
        return tuple(self._rows)

    def __getattr__(self, name):
        # Only called when normal lookup fails: expose the per-row fields.
        rows = self.__dict__.get("_rows")
        if rows is not None and name in rows:
            return rows[name]
        raise AttributeError(
            f"{type(self).__name__!s} has no attribute or field {name!r}"
        )

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __len__(self):
        return self._rows["values"].shape[0]

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            key = [key]  # keep the row axis
        rows = {name: arr[key] for name, arr in self._rows.items()}
        return Explanation(
            classes=self.classes,
            feature_names=self.feature_names,
            method=self.method,
            params=self.params,
            **rows,
        )

    def __repr__(self):
        n, d = len(self), len(self.feature_names)
        extra = ""
        if "status" in self._rows:
            names, counts = np.unique(self._rows["status"], return_counts=True)
            extra = (
                ", status={"
                + ", ".join(f"{k!s}: {v}" for k, v in zip(names, counts))
                + "}"
            )
        return (
            f"Explanation(method={self.method!r}, n_samples={n}, n_features={d}{extra})"
        )

    @property
    def target_label(self):
        """Class label of the explained target of each row (None for regression)."""
        if self.classes is None:
            return np.full(len(self), None, dtype=object)
        return self.classes[self._rows["target"]]

    # -- exports ----------------------------------------------------------------
    def to_frame(self):
        """One row per explained row: the attributions and the scalar diagnostics.

        Returns
        -------
        frame : pandas.DataFrame
            Columns are the feature names (attributions of the explained target)
            followed by every one-dimensional per-row field.
        """
        import pandas as pd

        frame = pd.DataFrame(
            self._rows["values"], columns=[str(f) for f in self.feature_names]
        )
        for name, arr in self._rows.items():
            if name != "values" and arr.ndim == 1:
                frame[name] = arr
        if self.classes is not None:
            frame["target_label"] = self.target_label
        return frame

    def to_dict(self):
        """A JSON-serialisable dictionary; :meth:`from_dict` inverts it.

        Non-finite floats are written as strings (``"nan"``, ``"inf"``) so the
        result is strict JSON.
        """
        return {
            "method": self.method,
            "params": {k: _jsonable(v) for k, v in self.params.items()},
            "classes": None if self.classes is None else _encode(self.classes),
            "feature_names": _encode(self.feature_names.astype(str)),
            "rows": {name: _encode(arr) for name, arr in self._rows.items()},
        }

    @classmethod
    def from_dict(cls, data):
        """Rebuild an ``Explanation`` written by :meth:`to_dict`."""
        rows = {name: _decode(enc) for name, enc in data["rows"].items()}
        classes = data["classes"]
        return cls(
            classes=None if classes is None else _decode(classes),
            feature_names=_decode(data["feature_names"]),
            method=data["method"],
            params=data.get("params"),
            **rows,
        )


def _encode(arr):
    arr = np.asarray(arr)
    kind = arr.dtype.kind
    if kind == "f":
        flat = [float(v) if np.isfinite(v) else str(v) for v in arr.ravel().tolist()]
        data = flat
    elif kind in "iub":
        data = arr.ravel().tolist()
    else:
        data = [str(v) for v in arr.ravel().tolist()]
        kind = "U"
    return {"dtype": kind, "shape": list(arr.shape), "data": data}


def _decode(enc):
    kind, shape, data = enc["dtype"], tuple(enc["shape"]), enc["data"]
    if kind == "f":
        arr = np.array([float(v) for v in data], dtype=np.float64)
    elif kind == "b":
        arr = np.array(data, dtype=bool)
    elif kind in "iu":
        arr = np.array(data, dtype=np.int64)
    else:
        arr = np.array(data, dtype=str)
    return arr.reshape(shape)


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)
