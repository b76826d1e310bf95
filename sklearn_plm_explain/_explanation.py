"""The result object every explainer returns."""

# SPDX-License-Identifier: BSD-3-Clause

import json

import numpy as np

__all__ = ["Explanation"]

# Fields that describe the batch as a whole; every other field is per row.
_BATCH_FIELDS = ("classes", "feature_names", "method", "params")

# What an attribution can be, and the per-row field holding it.
ATTRIBUTIONS = {
    "contribution": "contribution",
    "standardized": "standardized",
    "slope": "values",
}


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

    def __dir__(self):
        # Per-row fields are attributes too: list them for tab completion.
        return sorted(set(super().__dir__()) | set(self._rows))

    def status_counts(self):
        """Number of rows of each status.

        Returns
        -------
        counts : dict of str to int
            By status name, in sorted order; only statuses that occur.
        """
        return count_statuses(self._rows["status"])

    def __len__(self):
        return self._rows["values"].shape[0]

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            key = [key]  # keep the row axis
        return self._with_rows({name: arr[key] for name, arr in self._rows.items()})

    def _with_rows(self, rows):
        """An explanation of other rows, with this one's classes, features,
        method and parameters."""
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
            counts = count_statuses(self._rows["status"])
            extra = (
                ", status={" + ", ".join(f"{k}: {v}" for k, v in counts.items()) + "}"
            )
        return (
            f"Explanation(method={self.method!r}, n_samples={n}, n_features={d}{extra})"
        )

    @property
    def flagged(self):
        """Rows whose explainer could not certify (or converge on) them.

        ``True`` where the per-row field ``converged`` is ``False``: for
        :class:`OpenAPIExplainer` every row whose status is not ``"exact"``
        (its values are best estimates, possibly far off), for
        :class:`StableLIMEExplainer` rows whose stability test did not pass by
        ``n_max``. Explanations without a ``converged`` field (such as the
        comparison methods of :mod:`sklearn_plm_explain.baselines`, which make
        no claim to certify) flag no row.

        Aggregates of this package (class-average heatmaps, the metrics of
        :mod:`sklearn_plm_explain.metrics`) leave flagged rows out by default
        and say how many they left out.
        """
        converged = self._rows.get("converged")
        if converged is None:
            return np.zeros(len(self), dtype=bool)
        return ~np.asarray(converged, dtype=bool)

    @property
    def target_label(self):
        """Class label of the explained target of each row (None for regression)."""
        if self.classes is None:
            return np.full(len(self), None, dtype=object)
        return self.classes[self._rows["target"]]

    # -- exports ----------------------------------------------------------------
    def to_frame(self, kind="wide"):
        """The explanation as a pandas DataFrame.

        Parameters
        ----------
        kind : {"wide", "long"}, default="wide"
            ``"wide"``: one row per explained row, with one column per feature
            (the attributions of the explained target) followed by every
            one-dimensional per-row field and ``target_label``.
            When the explanation labels its selected features (LIME, S-LIME),
            a column ``as_list`` holds them in words with their weights, as
            :meth:`as_list` gives them.
            ``"long"``: one row per (explained row, feature) pair, with
            columns ``row``, ``feature``, ``value``, ``target`` and
            ``target_label`` (tidy form, for grouping and plotting), plus
            ``label`` (the feature with its bin or category at that row, e.g.
            ``debt <= 10.70``) for labelled explanations.

        Returns
        -------
        frame : pandas.DataFrame
            The table described above.
        """
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "Explanation.to_frame requires pandas. Install it with "
                '`pip install "sklearn-plm-explain[pandas]"` or `pip install pandas`.'
            ) from exc

        if kind == "wide":
            return pd.DataFrame(dict(self._wide_columns()))
        if kind == "long":
            return pd.DataFrame(self._long_columns())
        raise ValueError(f"kind must be 'wide' or 'long'; got {kind!r}.")

    def _wide_columns(self):
        """``(name, 1-D array)`` pairs of the wide table, in column order.

        Shared by :meth:`to_frame` and the command line, which writes CSV
        without pandas.
        """
        values = self._rows["values"]
        columns = [
            (str(name), values[:, j]) for j, name in enumerate(self.feature_names)
        ]
        extra = [
            (n, a)
            for n, a in self._rows.items()
            if n != "values" and a.ndim == 1 and not _ragged(a)
        ]
        if self.classes is not None:
            extra.append(("target_label", self.target_label))
        if "selected_names" in self._rows:
            # The weights, as the feature columns hold them (slopes).
            listed = (self.as_list(i, attribution="slope") for i in range(len(self)))
            text = ["; ".join(f"{n} ({v:+.4g})" for n, v in pairs) for pairs in listed]
            extra.append(("as_list", np.asarray(text, dtype=object)))
        # A diagnostic whose name is also a feature's (a column "status" or
        # "score" in the data) gets a prefix rather than hiding the feature.
        taken = {name for name, _ in columns}
        for name, arr in extra:
            columns.append((f"explanation_{name}" if name in taken else name, arr))
        return columns

    def _long_columns(self):
        n, d = len(self), len(self.feature_names)
        columns = {
            "row": np.repeat(np.arange(n), d),
            "feature": np.tile(self.feature_names.astype(str), n),
            "value": self._rows["values"][:, :d].reshape(-1),
            "target": np.repeat(self._rows["target"], d),
        }
        if self.classes is not None:
            columns["target_label"] = np.repeat(self.target_label, d)
        if "selected_names" in self._rows:
            columns["label"] = np.concatenate([self._row_labels(i) for i in range(n)])
        return columns

    def _row_labels(self, row):
        """Label of every feature at ``row``: the selected ones with their
        condition (``debt <= 10.70``), the others by name."""
        labels = self.feature_names.astype(str).astype(object)
        selected = np.asarray(self._rows["selected"][row]).astype(np.intp)
        names = self._rows["selected_names"][row]
        keep = selected >= 0
        labels[selected[keep]] = names[keep]
        return labels

    def as_list(self, row=None, top_k=None, attribution="contribution"):
        """Feature names and attributions of one row, largest magnitude first.

        Like ``lime``'s ``Explanation.as_list``: when the explanation records
        which features its surrogate selected (field ``selected``, as the LIME
        explainers do), only those are listed, under the label that says what
        the weight belongs to (field ``selected_names``: ``debt <= 10.70`` for
        a bin, ``size_cat=big`` for a category, the name for a continuous
        feature, in lime's wording); otherwise every feature is, by name.

        Parameters
        ----------
        row : int, default=None
            Index of the explained row; may be left out when the explanation
            holds a single row (such as ``E[i]``).
        top_k : int, default=None
            Keep only the ``top_k`` largest attributions; ``None`` keeps all.
        attribution : {"contribution", "standardized", "slope"}, \
                default="contribution"
            Which attributions are listed and ranked (see
            :meth:`attributions`): contributions by default, as
            :meth:`attributions` and :meth:`plot` give them, so that the list
            and the chart agree; ``"slope"`` lists ``values``, as lime's
            ``as_list`` does.

        Returns
        -------
        pairs : list of (str, float)
            ``(label, value)`` sorted by decreasing ``abs(value)``; ties keep
            the feature order.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_plm_explain import Explanation
        >>> e = Explanation(values=[[0.5, -2.0, 1.0]], target=[0], classes=None,
        ...                 feature_names=["a", "b", "c"], method="demo",
        ...                 contribution=[[1.5, -0.5, 0.25]])
        >>> e.as_list(0, top_k=2)
        [('a', 1.5), ('b', -0.5)]
        >>> e.as_list(0, top_k=2, attribution="slope")
        [('b', -2.0), ('c', 1.0)]
        """
        n = len(self)
        if row is None:
            if n != 1:
                raise ValueError(
                    f"This explanation holds {n} rows; say which with as_list(row)."
                )
            row = 0
        if not -n <= row < n:
            raise IndexError(f"row {row} is out of range for {n} explained rows.")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be at least 1 or None; got {top_k}.")
        values = self.attributions(attribution)[row]
        labels = self.feature_names
        if "selected_names" in self._rows:
            labels = self._row_labels(row)
        order = self._ranked_features(row, values)
        return [(str(labels[j]), float(values[j])) for j in order[:top_k]]

    def _ranked_features(self, row, values):
        """Indices of the features listed for ``row`` (those the surrogate
        selected when the explanation records it, else all), by decreasing
        ``|values|``; a stable sort keeps the feature order among equals."""
        features = np.arange(len(self.feature_names))
        if "selected" in self._rows:
            picked = np.asarray(self._rows["selected"][row]).astype(np.intp)
            features = np.unique(picked[picked >= 0])
        return features[np.argsort(-np.abs(values[features]), kind="stable")]

    def attributions(self, kind="contribution"):
        """Per-feature attributions of every row, in one of three readings.

        Parameters
        ----------
        kind : {"contribution", "standardized", "slope"}, default="contribution"
            * ``"slope"``: ``values`` as the explainer gives them, the change
              of the explained output per unit of the feature (for
              :class:`OpenAPIExplainer` the decision features, in the
              feature's own unit; for the LIME explainers the surrogate
              weights, per unit of the interpretable feature: one standard
              deviation of a continuous feature, or being in the row's bin or
              category).
            * ``"standardized"``: slope times the feature's standard
              deviation in the background data, so features measured in
              different units compare.
            * ``"contribution"``: slope times the row's value minus the
              background mean: how much each feature moves the explained
              output away from its value at the background mean; they add up,
              ``baseline + contribution.sum(axis=1)`` is the explained
              output at the row.

        Returns
        -------
        attributions : ndarray of shape (n_samples, n_features)
        """
        if kind not in ATTRIBUTIONS:
            raise ValueError(
                f"kind must be one of {sorted(ATTRIBUTIONS)}; got {kind!r}."
            )
        field = ATTRIBUTIONS[kind]
        if field not in self._rows:
            raise ValueError(
                f"This explanation has no {field!r} field, so it cannot give "
                f"{kind!r} attributions; the package's explainers record it."
            )
        return np.asarray(self._rows[field], dtype=np.float64)

    def to_shap(self):
        """The explanation as a ``shap.Explanation``, to use shap's plots.

        shap's values are additive contributions: ``base_values +
        values.sum()`` is the model's output at the row. The explainers of
        this package record exactly that: ``values`` are the
        ``contribution`` field (slope times the row's value minus the
        background mean, see :meth:`attributions`) and ``base_values`` the
        ``baseline``, the explained output at the background mean. The
        explained output is, for :class:`OpenAPIExplainer`, the target's
        mean log-ratio ``mean_{c' != c} log(p_c / p_c')`` (the log-odds for two
        classes; the prediction for a regressor), reproduced exactly at
        certified rows; for the LIME explainers the surrogate's prediction
        at the row (``local_pred``), LIME's estimate of the model's
        probability. ``data`` are the explained rows, which colour shap's
        beeswarm. (shap labels the base value ``E[f(X)]``; here it is each
        row's local model evaluated at the background mean, not the mean of
        the model's outputs.) An explanation without these fields (built by
        hand) passes ``values`` and its intercepts instead.

        Returns
        -------
        explanation : shap.Explanation
            With ``values``, ``base_values``, ``data`` and ``feature_names``.

        Raises
        ------
        ImportError
            If shap is not installed.
        """
        try:
            import shap
        except ImportError as exc:
            raise ImportError(
                "Explanation.to_shap needs the shap package: pip install shap"
            ) from exc
        data = self._rows.get("data")
        if "contribution" in self._rows and "baseline" in self._rows:
            values = self._rows["contribution"]
            base_values = np.asarray(self._rows["baseline"], dtype=np.float64)
        else:
            values, base_values = self._rows["values"], self._target_intercept()
        return shap.Explanation(
            values=values,
            base_values=base_values,
            data=data,
            feature_names=[str(f) for f in self.feature_names],
        )

    def _target_intercept(self):
        intercept = self._rows.get("intercept")
        if intercept is None:
            return np.zeros(len(self))
        intercept = np.asarray(intercept, dtype=np.float64)
        if intercept.ndim == 2:
            return intercept[np.arange(len(self)), self._rows["target"]]
        return intercept

    def plot(self, row=0, **kw):
        """Draw the explanation; see :meth:`ExplanationDisplay.from_explanation`.

        Parameters
        ----------
        row : int, default=0
            Row drawn by ``kind="bar"`` and ``kind="image"``.
        **kw : dict
            The keyword arguments of
            :meth:`ExplanationDisplay.from_explanation`:

            - ``kind`` : {"bar", "image", "class_average"}, default=None.
              ``None`` means ``"image"`` when ``image_shape`` is given, else
              ``"bar"``.
            - ``attribution`` : {"contribution", "standardized", "slope"},
              default=None. What is drawn (see :meth:`attributions`);
              ``None`` means contributions for bar charts and slopes for
              images.
            - ``image_shape`` : tuple of int, default=None. ``(height,
              width)`` of an image row.
            - ``top_k`` : int, default=10. Number of bars.
            - ``ax`` : matplotlib Axes, default=None. Axes to draw on; a new
              figure when ``None``.

            Any other keyword is passed to :meth:`ExplanationDisplay.plot`.

        Returns
        -------
        display : ExplanationDisplay
            The display, with ``ax_`` and ``figure_``.
        """
        from sklearn_plm_explain._display import ExplanationDisplay

        return ExplanationDisplay.from_explanation(self, row=row, **kw)

    @classmethod
    def concat(cls, explanations):
        """Join explanations of consecutive batches into one.

        Parameters
        ----------
        explanations : sequence of Explanation
            Explanations from the same explainer (same method, classes,
            features and per-row fields).

        Returns
        -------
        explanation : Explanation
            Rows in the order given. Fields that index rows of their own batch
            (such as ``reused_from``) are kept as they are.
        """
        explanations = list(explanations)
        if not explanations:
            raise ValueError("concat needs at least one Explanation.")
        first = explanations[0]
        for other in explanations[1:]:
            same = (
                other.fields == first.fields
                and other.method == first.method
                and np.array_equal(other.feature_names, first.feature_names)
            )
            if not same:
                raise ValueError(
                    "concat needs explanations with the same method, features "
                    "and fields."
                )
        return first._with_rows(
            {
                name: np.concatenate([e._rows[name] for e in explanations])
                for name in first.fields
            }
        )

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


def _ragged(arr):
    """A per-row field holding one array per row (such as ``queries``)."""
    return arr.dtype == object and arr.size > 0 and isinstance(arr.flat[0], np.ndarray)


def _encode(arr):
    arr = np.asarray(arr)
    if arr.ndim == 1 and _ragged(arr):
        return {
            "dtype": "ragged",
            "shape": [arr.size],
            "data": [_encode(a) for a in arr],
        }
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
    if kind == "ragged":
        arr = np.empty(shape, dtype=object)
        for i, part in enumerate(data):
            arr[i] = _decode(part)
        return arr
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


def count_statuses(status):
    """Number of rows of each status, by status name in sorted order."""
    names, counts = np.unique(np.asarray(status).astype(str), return_counts=True)
    return dict(zip(names.tolist(), counts.tolist()))
