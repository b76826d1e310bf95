"""Pictures of explanations: bar charts, image heatmaps, class averages."""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

__all__ = ["ExplanationDisplay"]

_KINDS = ("bar", "image", "class_average")
_ATTRIBUTIONS = ("contribution", "standardized", "slope")

# Red for evidence for the explained class, blue against it: the same
# convention as the diverging heatmaps (``RdBu_r``), so bars and images of
# one explanation read alike.
_POSITIVE_COLOR = "#b2182b"
_NEGATIVE_COLOR = "#2166ac"


# How the explainers are named in titles, as in the papers and the docs.
_METHOD_NAMES = {
    "openapi": "OpenAPI",
    "lime": "LIME",
    "stable_lime": "S-LIME",
    "finite_differences": "ZOO (finite differences)",
    "naive_square": "Naive",
    "extended_lime": "Extended LIME",
}


def _import_pyplot(caller):
    """Import ``matplotlib.pyplot`` late, with an install hint when missing.

    matplotlib is an optional dependency (the ``plot`` extra): the package
    must import and explain without it.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            f"{caller} requires matplotlib. Install it with "
            '`pip install "sklearn-plm-explain[plot]"` or `pip install matplotlib`.'
        ) from exc
    return plt


def _check_image_shape(image_shape, n_features, kind):
    if image_shape is None:
        raise ValueError(
            f"kind={kind!r} draws each row as an image and needs "
            f"image_shape=(height, width) with height * width == {n_features} "
            "(the number of features)."
        )
    shape = tuple(int(s) for s in image_shape)
    if len(shape) != 2 or shape[0] * shape[1] != n_features:
        raise ValueError(
            f"image_shape={tuple(image_shape)} does not hold {n_features} "
            "features; expected (height, width) with height * width == "
            f"{n_features}."
        )
    return shape


def _symmetric_limit(values):
    """Half-range of a colour scale centred at zero (1 for all-zero values)."""
    finite = np.abs(values[np.isfinite(values)])
    limit = float(finite.max()) if finite.size else 0.0
    return limit if limit > 0 else 1.0


class ExplanationDisplay:
    """Visualisation of an :class:`Explanation`.

    Three pictures, chosen by ``kind``:

    * ``"bar"``: a horizontal bar chart of the ``top_k`` largest attributions
      of one row, largest at the top, positive bars red and negative bars
      blue, each bar labelled with its value and each feature with its
      condition when the explanation has one (LIME: ``debt <= 10.70``);
    * ``"image"``: the attributions of one row as an image (rows whose
      features are pixels), with a diverging colormap centred at zero and
      symmetric colour limits, so white means "no influence";
    * ``"class_average"``: one image panel per class, the average of
      ``values`` over the rows whose explained target is that class, all
      panels on one symmetric colour scale. With :class:`OpenAPIExplainer`
      and the predicted class as target this is the average decision
      feature of each class. Rows the explainer could not certify
      (:attr:`Explanation.flagged`) are left out of the averages -- their
      values are only best estimates, and one of them can outweigh a whole
      class -- and each panel's title says how many were.

    What the lengths and colours measure is chosen by ``attribution`` in
    :meth:`from_explanation` (see :meth:`Explanation.attributions`):
    contributions (slope times the row's value minus the background mean,
    the default of bar charts: what moved this prediction), standardized
    slopes (slope times the feature's standard deviation) or raw slopes (the
    default of images, whose pixels share one unit). The axis or colour bar
    says which, and in what output.

    Create it with :meth:`from_explanation`, :meth:`from_explainer` or
    :meth:`Explanation.plot`; all of them call :meth:`plot`. Pyplot is never
    asked to show the figure.

    Parameters
    ----------
    values : ndarray of shape (n_features,) or (n_panels, n_features)
        Attributions to draw: one row for ``"bar"`` and ``"image"``, one row
        per panel for ``"class_average"``.
    feature_names : array-like of str of shape (n_features,)
        Names of the features.
    kind : {"bar", "image", "class_average"}, default="bar"
        Picture to draw.
    image_shape : tuple of int, default=None
        ``(height, width)`` of an image; required for ``"image"`` and
        ``"class_average"``.
    top_k : int, default=10
        Number of bars of ``"bar"``.
    title : str or list of str, default=None
        Axes title, or one title per panel for ``"class_average"``.
    labels : array-like of str of shape (n_features,), default=None
        Tick label of each feature's bar; ``None`` uses ``feature_names``.
    features : array-like of int, default=None
        Features eligible for bars (e.g. those a LIME surrogate selected);
        ``None`` means all.
    value_label : str, default=None
        What the values measure: the label of the bar chart's value axis and
        of the images' colour bar. ``None`` writes "attribution".

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes of the picture (the first panel for ``"class_average"``).
    axes_ : ndarray of matplotlib Axes
        All panels (one element except for ``"class_average"``).
    figure_ : matplotlib Figure
        Figure holding the axes.
    bars_ : matplotlib BarContainer or None
        The bars (``"bar"``).
    images_ : list of matplotlib AxesImage
        The images (``"image"`` and ``"class_average"``).
    colorbar_ : matplotlib Colorbar or None
        Colour scale of the images.
    features_ : ndarray of int
        Indices of the features drawn as bars, top bar first (``"bar"``).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from sklearn_plm_explain import Explanation, ExplanationDisplay
    >>> e = Explanation(values=[[0.5, -2.0, 1.0, 0.0]], target=[0], classes=None,
    ...                 feature_names=["a", "b", "c", "d"], method="demo")
    >>> disp = ExplanationDisplay.from_explanation(e, top_k=3)
    >>> [t.get_text() for t in disp.ax_.get_yticklabels()]
    ['b', 'c', 'a']
    >>> disp = e.plot(image_shape=(2, 2))
    >>> disp.images_[0].get_clim()
    (-2.0, 2.0)
    """

    def __init__(
        self,
        *,
        values,
        feature_names,
        kind="bar",
        image_shape=None,
        top_k=10,
        title=None,
        labels=None,
        value_label=None,
        features=None,
    ):
        self.values = values
        self.feature_names = feature_names
        self.kind = kind
        self.image_shape = image_shape
        self.top_k = top_k
        self.title = title
        self.labels = labels
        self.value_label = value_label
        self.features = features

    # -- constructors ------------------------------------------------------------
    @classmethod
    def from_explanation(
        cls,
        explanation,
        *,
        row=0,
        kind=None,
        attribution=None,
        image_shape=None,
        top_k=10,
        ax=None,
        **plot_kw,
    ):
        """Draw one row or the class averages of an explanation.

        Parameters
        ----------
        explanation : Explanation
            The explanation to draw.
        row : int, default=0
            Row drawn by ``"bar"`` and ``"image"``.
        kind : {"bar", "image", "class_average"}, default=None
            ``None`` means ``"image"`` when ``image_shape`` is given, else
            ``"bar"``.
        attribution : {"contribution", "standardized", "slope"}, default=None
            What is drawn (see :meth:`Explanation.attributions`). ``None``
            means ``"contribution"`` for bar charts (``"slope"`` for an
            explanation without contributions, such as one built by hand)
            and ``"slope"`` for images.
        image_shape : tuple of int, default=None
            ``(height, width)`` with ``height * width == n_features``.
        top_k : int, default=10
            Number of bars of ``"bar"``.
        ax : matplotlib Axes or array-like of Axes, default=None
            Where to draw. For ``"class_average"`` either one Axes per panel
            or a single Axes whose area is split into the panels.
        **plot_kw : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : ExplanationDisplay
            The display, already drawn.
        """
        _import_pyplot(f"{cls.__name__}.from_explanation")
        display = cls._build(
            explanation, row, row, kind, image_shape, top_k, attribution
        )
        return display.plot(ax=ax, **plot_kw)

    @classmethod
    def _build(cls, explanation, row, row_label, kind, image_shape, top_k, attribution):
        """The display of ``explanation``, checked but not drawn yet."""
        kind = _resolve_kind(kind, image_shape)
        if kind != "bar":
            _check_image_shape(image_shape, len(explanation.feature_names), kind)
        attribution = _resolve_attribution(attribution, kind, explanation)
        drawn = explanation
        if attribution != "slope":
            # The same explanation with the chosen attribution as values.
            drawn = explanation._with_rows(
                {**explanation._rows, "values": explanation.attributions(attribution)}
            )
        labels = features = None
        if kind == "class_average":
            values, title = _class_averages(drawn)
        else:
            values, title = _one_row(drawn, row, row_label)
            if "selected_names" in explanation.fields:
                labels = explanation._row_labels(row % len(explanation))
            if "selected" in explanation.fields:
                # As in as_list: only what the surrogate selected.
                picked = np.asarray(explanation.selected[row % len(explanation)])
                features = np.unique(picked[picked >= 0])
        return cls(
            values=values,
            feature_names=explanation.feature_names,
            kind=kind,
            image_shape=image_shape,
            top_k=top_k,
            title=title,
            labels=labels,
            value_label=_value_label(explanation, attribution, kind, row),
            features=features,
        )

    @classmethod
    def from_explainer(
        cls,
        explainer,
        X,
        *,
        row=0,
        target=None,
        kind=None,
        attribution=None,
        image_shape=None,
        top_k=10,
        ax=None,
        **plot_kw,
    ):
        """Explain rows of ``X`` with a fitted explainer and draw the result.

        For ``"bar"`` and ``"image"`` only row ``row`` of ``X`` is explained;
        ``"class_average"`` explains every row.

        Parameters
        ----------
        explainer : fitted explainer
            Any explainer of this package (it has ``explain(X, target=...)``).
        X : array-like of shape (n_samples, n_features)
            Rows to explain.
        row : int, default=0
            Row of ``X`` drawn by ``"bar"`` and ``"image"``.
        target : class label or array-like, default=None
            Class explained; ``None`` is the predicted class.
        kind : {"bar", "image", "class_average"}, default=None
            See :meth:`from_explanation`.
        attribution : {"contribution", "standardized", "slope"}, default=None
            See :meth:`from_explanation`.
        image_shape : tuple of int, default=None
            ``(height, width)`` of an image row.
        top_k : int, default=10
            Number of bars of ``"bar"``.
        ax : matplotlib Axes or array-like of Axes, default=None
            Where to draw.
        **plot_kw : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : ExplanationDisplay
            The display, already drawn.
        """
        _import_pyplot(f"{cls.__name__}.from_explainer")
        if _resolve_kind(kind, image_shape) == "class_average":
            explanation = explainer.explain(X, target=target)
        else:
            # Explain only the row drawn: explanations cost model queries.
            if target is not None and np.ndim(target) > 0:
                target = np.asarray(target)[[row]]
            explanation = explainer.explain(_take_row(X, row), target=target)
        display = cls._build(explanation, 0, row, kind, image_shape, top_k, attribution)
        return display.plot(ax=ax, **plot_kw)

    # -- drawing -------------------------------------------------------------------
    def plot(self, ax=None, *, cmap="RdBu_r", colorbar=True, bar_labels=True):
        """Draw the picture.

        Parameters
        ----------
        ax : matplotlib Axes or array-like of Axes, default=None
            Where to draw; a new figure when ``None``. For
            ``"class_average"``: one Axes per panel, or a single Axes whose
            area is split into the panels.
        cmap : str or Colormap, default="RdBu_r"
            Diverging colormap of the images (centred at zero).
        colorbar : bool, default=True
            Add a colour scale next to the images.
        bar_labels : bool, default=True
            Write each bar's value next to it.

        Returns
        -------
        self : ExplanationDisplay
            With ``ax_``, ``axes_`` and ``figure_`` set.
        """
        plt = _import_pyplot(f"{type(self).__name__}.plot")
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}; got {self.kind!r}.")
        values = np.asarray(self.values, dtype=np.float64)
        names = np.asarray(self.feature_names, dtype=object).astype(str)
        self.bars_, self.images_, self.colorbar_ = None, [], None
        if self.kind == "bar":
            if self.labels is not None:
                names = np.asarray(self.labels, dtype=object).astype(str)
            self._plot_bars(plt, ax, values.reshape(-1), names, bar_labels)
        else:
            shape = _check_image_shape(self.image_shape, names.size, self.kind)
            panels = values.reshape(-1, names.size)
            self._plot_images(plt, ax, panels, shape, cmap, colorbar)
        return self

    def _plot_bars(self, plt, ax, values, names, bar_labels):
        eligible = np.arange(values.size)
        if self.features is not None:
            eligible = np.asarray(self.features, dtype=np.intp)
        rank = np.argsort(-np.abs(values[eligible]), kind="stable")
        order = eligible[rank][: self.top_k]
        if ax is None:
            longest = max((len(names[j]) for j in order), default=1)
            # Room for the longest tick label: about 0.08 inch per character.
            width = min(6.0 + 0.08 * longest, 14.0)
            height = 1.2 + 0.35 * max(len(order), 1)
            _, ax = plt.subplots(figsize=(width, height), layout="constrained")
        shown = values[order]
        colors = [_POSITIVE_COLOR if v > 0 else _NEGATIVE_COLOR for v in shown]
        positions = np.arange(len(order))[::-1]  # largest bar on top
        self.bars_ = ax.barh(positions, shown, color=colors)
        ax.set_yticks(positions, labels=list(names[order]))
        ax.axvline(0.0, color="0.3", linewidth=0.8)
        ax.set_xlabel(self.value_label or "attribution")
        if bar_labels:
            ax.bar_label(self.bars_, labels=[f"{v:.3g}" for v in shown], padding=3)
            # Room for the value texts beyond the longest bars, both sides.
            ax.margins(x=0.25)
        if self.title is not None:
            ax.set_title(self.title)
        self.features_ = order
        self._set_axes(np.array([ax], dtype=object))

    def _plot_images(self, plt, ax, panels, shape, cmap, colorbar):
        axes = self._image_axes(plt, ax, len(panels))
        limit = _symmetric_limit(panels)
        titles = self.title
        if titles is None or isinstance(titles, str):
            titles = [titles] * len(panels)
        for a, panel, title in zip(axes.ravel(), panels, titles):
            image = a.imshow(
                panel.reshape(shape),
                cmap=cmap,
                vmin=-limit,
                vmax=limit,
                interpolation="nearest",
            )
            a.set_xticks([])
            a.set_yticks([])
            if title is not None:
                a.set_title(title, fontsize="medium")
            self.images_.append(image)
        for a in axes.ravel()[len(panels) :]:
            a.set_axis_off()  # spare cells of the grid
        self._set_axes(axes.ravel())
        if colorbar:
            self.colorbar_ = self.figure_.colorbar(
                self.images_[0], ax=list(axes.ravel()), shrink=0.8
            )
            self.colorbar_.set_label(
                self.value_label or "attribution", fontsize="small"
            )

    def _image_axes(self, plt, ax, n_panels):
        n_cols = min(n_panels, 5)
        n_rows = -(-n_panels // n_cols)
        if ax is None:
            _, axes = plt.subplots(
                n_rows,
                n_cols,
                figsize=(1.9 * n_cols + 1.2, 2.0 * n_rows + 0.3),
                layout="constrained",
                squeeze=False,
            )
            return axes
        if not hasattr(ax, "imshow"):  # a collection of Axes, one per panel
            axes = np.asarray(ax, dtype=object).ravel()
            if axes.size < n_panels:
                raise ValueError(
                    f"ax holds {axes.size} Axes but there are {n_panels} panels."
                )
            return axes
        if n_panels == 1:
            return np.array([ax], dtype=object)
        return _split_axes(ax, n_rows, n_cols)

    def _set_axes(self, axes):
        self.axes_ = axes
        self.ax_ = axes[0]
        self.figure_ = axes[0].figure


def _resolve_kind(kind, image_shape):
    if kind is None:
        return "bar" if image_shape is None else "image"
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}; got {kind!r}.")
    return kind


def _resolve_attribution(attribution, kind, explanation):
    if attribution is None:
        wanted = "contribution" if kind == "bar" else "slope"
        if wanted == "contribution" and "contribution" not in explanation.fields:
            wanted = "slope"
        return wanted
    if attribution not in _ATTRIBUTIONS:
        raise ValueError(
            f"attribution must be one of {_ATTRIBUTIONS}; got {attribution!r}."
        )
    return attribution


def _output_name(explanation, kind, row, short=False):
    """What the explained output is, in words (``None`` if not known)."""
    method = explanation.method
    if explanation.classes is None:
        return "the prediction"
    if kind == "class_average" or short:
        cls = "the class"
    else:
        cls = f"class {explanation.target_label[row % len(explanation)]}"
    if method == "openapi":
        what = "log-odds" if len(explanation.classes) == 2 else "log-ratio"
        if short:
            return f"the class's {what}"
        return f"the {what} of {cls}" + ("" if what == "log-odds" else " to the others")
    if method in ("lime", "stable_lime"):
        return "P(class)" if short else f"P({cls.removeprefix('the ')})"
    return None


def _value_label(explanation, attribution, kind, row):
    """Axis or colour-bar label: what the values measure, and in what.

    ``None`` (the display writes "attribution") for raw values of an
    explanation whose output is not known, such as one built by hand. The
    colour bar of images gets a shorter text, and what red and blue mean.
    """
    image = kind != "bar"
    output = _output_name(explanation, kind, row, short=image)
    if output is None:
        if attribution == "slope":
            return None
        output = "the output"
    if explanation.method in ("lime", "stable_lime"):
        if attribution == "slope":
            return "surrogate weight on " + output + ("" if image else " (LIME)")
        output += " (LIME surrogate)"
    if image:
        # Short lines: a colour bar is often no taller than a small image.
        text = {
            "contribution": f"contribution to {output}",
            "standardized": f"change of {output}\nper std of the feature",
            "slope": f"change of {output}\nper unit of the feature",
        }[attribution]
        return text + "\nred: raises it, blue: lowers it"
    if attribution == "contribution":
        return f"contribution to {output}\n(slope × (value − background mean))"
    if attribution == "standardized":
        return f"change of {output}\nper standard deviation of the feature"
    return f"change of {output}\nper unit of the feature (slope)"


def _one_row(explanation, row, row_label):
    n = len(explanation)
    if not -n <= row < n:
        raise IndexError(f"row {row} is out of range for {n} explained rows.")
    row = row % n
    values = np.asarray(explanation.values[row], dtype=np.float64)
    method = _METHOD_NAMES.get(explanation.method, explanation.method)
    title = f"{method}, row {row_label}"
    if explanation.classes is not None:
        title += f", class {explanation.target_label[row]}"
    return values, title


def _class_averages(explanation):
    """Mean attribution over the certified rows of each explained class.

    Flagged rows (not certified) are left out; a class all of whose rows
    are flagged gets an empty (NaN) panel. Titles give the rows averaged and
    those left out.
    """
    target = np.asarray(explanation.target)
    values = np.asarray(explanation.values, dtype=np.float64)
    flagged = explanation.flagged
    present = np.unique(target)
    labels = present if explanation.classes is None else explanation.classes[present]
    averages, titles = [], []
    for t, label in zip(present, labels):
        used = (target == t) & ~flagged
        left_out = int(np.sum((target == t) & flagged))
        averages.append(
            values[used].mean(axis=0)
            if used.any()
            else np.full(values.shape[1], np.nan)
        )
        note = f", {left_out} left out" if left_out else ""
        titles.append(f"class {label} (n={int(used.sum())}{note})")
    return np.stack(averages), titles


def _take_row(X, row):
    if hasattr(X, "iloc"):
        return X.iloc[[row]]
    return np.asarray(X)[[row]]


def _split_axes(ax, n_rows, n_cols):
    """Replace one Axes by a grid of Axes in the same area."""
    from matplotlib.gridspec import GridSpecFromSubplotSpec

    fig = ax.figure
    spec = ax.get_subplotspec()
    if spec is None:
        raise ValueError("ax must be a subplot to be split into panels.")
    ax.remove()
    grid = GridSpecFromSubplotSpec(n_rows, n_cols, subplot_spec=spec)
    return np.array(
        [[fig.add_subplot(grid[i, j]) for j in range(n_cols)] for i in range(n_rows)],
        dtype=object,
    )
