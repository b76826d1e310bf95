"""Tests of ExplanationDisplay: the artists drawn, not just that it runs."""

import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.colors import to_rgba  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from sklearn_plm_explain import Explanation, ExplanationDisplay, OpenAPIExplainer  # noqa: E402
from sklearn_plm_explain._display import _NEGATIVE_COLOR, _POSITIVE_COLOR  # noqa: E402


@pytest.fixture
def pyplot():
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def _explanation(values, target=None, classes=("a", "b", "c"), names=None):
    values = np.asarray(values, dtype=float)
    n, d = values.shape
    if target is None:
        target = np.zeros(n, dtype=int)
    if names is None:
        names = [f"feature number {j}" for j in range(d)]
    return Explanation(
        values=values,
        target=np.asarray(target),
        classes=None if classes is None else np.asarray(classes),
        feature_names=names,
        method="demo",
    )


def test_bar_count_colours_and_labels(pyplot):
    e = _explanation([[0.5, -2.0, 1.0, 0.0, -0.1]])
    disp = ExplanationDisplay.from_explanation(e, top_k=4)
    bars = disp.bars_.patches
    assert len(bars) == 4
    # Top bar first: largest magnitude at the top, by position.
    tops = sorted(bars, key=lambda b: -b.get_y())
    widths = [b.get_width() for b in tops]
    assert widths == [-2.0, 1.0, 0.5, -0.1]
    for bar in tops:
        expected = _POSITIVE_COLOR if bar.get_width() > 0 else _NEGATIVE_COLOR
        assert bar.get_facecolor() == pytest.approx(to_rgba(expected))
    labels = [t.get_text() for t in disp.ax_.get_yticklabels()]
    assert labels == [
        "feature number 1",
        "feature number 2",
        "feature number 0",
        "feature number 4",
    ]
    # Each bar carries its value as text.
    texts = {t.get_text() for t in disp.ax_.texts}
    assert {"-2", "1", "0.5", "-0.1"} <= texts
    assert disp.figure_ is disp.ax_.figure
    assert "class a" in disp.ax_.get_title()


def test_long_names_widen_the_figure(pyplot):
    short = ExplanationDisplay.from_explanation(_explanation([[1.0, -1.0]]))
    long_names = ["a very long feature name " * 3, "b"]
    long = ExplanationDisplay.from_explanation(
        _explanation([[1.0, -1.0]], names=long_names)
    )
    assert long.figure_.get_figwidth() > short.figure_.get_figwidth()


def test_ax_is_honoured(pyplot):
    fig, (left, right) = pyplot.subplots(1, 2)
    disp = _explanation([[1.0, -3.0, 2.0]]).plot(ax=right)
    assert disp.ax_ is right
    assert disp.figure_ is fig
    assert len(right.patches) == 3 and len(left.patches) == 0


def test_heatmap_limits_are_symmetric(pyplot):
    values = np.linspace(-1.0, 3.0, 16).reshape(1, 16)
    disp = _explanation(values).plot(image_shape=(4, 4))
    (image,) = disp.images_
    vmin, vmax = image.get_clim()
    assert vmin == -vmax == -3.0
    assert image.get_array().shape == (4, 4)
    np.testing.assert_array_equal(image.get_array().ravel(), values.ravel())
    assert image.get_cmap().name == "RdBu_r"
    assert disp.colorbar_ is not None


def test_missing_or_wrong_image_shape_is_a_clear_error(pyplot):
    e = _explanation(np.ones((2, 6)))
    with pytest.raises(ValueError, match=r"needs image_shape=\(height, width\)"):
        ExplanationDisplay.from_explanation(e, kind="image")
    with pytest.raises(ValueError, match=r"needs image_shape"):
        e.plot(kind="class_average")
    with pytest.raises(ValueError, match=r"does not hold 6 features"):
        e.plot(image_shape=(2, 2))
    with pytest.raises(ValueError, match="kind must be one of"):
        e.plot(kind="pie")


def test_class_average_panels(pyplot):
    values = np.array([[1.0, 1, 1, 1], [3, 3, 3, 3], [-2, 0, 0, 2], [9, 9, 9, 9]])
    e = _explanation(values, target=[0, 0, 2, 2])
    disp = e.plot(kind="class_average", image_shape=(2, 2))
    assert len(disp.images_) == 2  # only the classes present
    np.testing.assert_allclose(disp.images_[0].get_array().ravel(), [2, 2, 2, 2])
    np.testing.assert_allclose(
        disp.images_[1].get_array().ravel(), [3.5, 4.5, 4.5, 5.5]
    )
    # One colour scale for all panels, symmetric around zero.
    for image in disp.images_:
        assert image.get_clim() == (-5.5, 5.5)
    titles = [a.get_title() for a in disp.axes_[:2]]
    assert titles == ["class a (n=2)", "class c (n=2)"]


def test_class_average_splits_a_single_ax(pyplot):
    fig, ax = pyplot.subplots()
    e = _explanation(np.arange(12.0).reshape(3, 4) - 5, target=[0, 1, 2])
    disp = e.plot(kind="class_average", image_shape=(2, 2), ax=ax)
    assert len(disp.images_) == 3
    assert all(a.figure is fig for a in disp.axes_)
    assert ax not in fig.axes  # replaced by the panels


def test_from_explainer_draws_the_requested_row(pyplot):
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X, y)
    explainer = OpenAPIExplainer(model, random_state=0).fit(X)
    e = explainer.explain(X[[100]])
    # Contributions by default; raw slopes on request.
    for attribution, expected in [(None, e.contribution[0]), ("slope", e.values[0])]:
        disp = ExplanationDisplay.from_explainer(
            explainer, X, row=100, top_k=2, attribution=attribution
        )
        top = np.argsort(-np.abs(expected))[:2]
        labels = [t.get_text() for t in disp.ax_.get_yticklabels()]
        assert labels == [f"x{j}" for j in top]
        np.testing.assert_allclose(
            [b.get_width() for b in sorted(disp.bars_, key=lambda b: -b.get_y())],
            expected[top],
        )
        assert "row 100" in disp.ax_.get_title()


def test_missing_matplotlib_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"sklearn-plm-explain\[plot\]"):
        _explanation([[1.0, 2.0]]).plot()


# -- what the bars and colours measure -----------------------------------------------------
@pytest.fixture(scope="module")
def cancer_explanation():
    from sklearn.datasets import load_breast_cancer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    data = load_breast_cancer()
    X, y = data.data, data.target
    # Linear in the raw features, whatever the scaler does inside.
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    return OpenAPIExplainer(model, random_state=0).fit(X).explain(X[:3]), X


@pytest.mark.parametrize(
    "attribution, field, words",
    [
        (None, "contribution", "contribution to the log-odds of class"),
        ("contribution", "contribution", "(value − background mean)"),
        ("standardized", "standardized", "per standard deviation of the feature"),
        ("slope", "values", "per unit of the feature (slope)"),
    ],
)
def test_bars_draw_the_chosen_attribution_and_say_which(
    pyplot, cancer_explanation, attribution, field, words
):
    e, X = cancer_explanation
    disp = e.plot(row=1, attribution=attribution, top_k=5)
    drawn = getattr(e, field)[1]
    top = np.argsort(-np.abs(drawn), kind="stable")[:5]
    widths = [b.get_width() for b in sorted(disp.bars_, key=lambda b: -b.get_y())]
    np.testing.assert_allclose(widths, drawn[top])
    assert words in disp.ax_.get_xlabel()


def test_raw_slopes_rank_by_unit_contributions_by_effect(pyplot, cancer_explanation):
    """The issue's picture: a feature with a tiny range has a huge slope per
    unit but moves the prediction little; contributions put it in its place."""
    e, X = cancer_explanation
    slope_top = np.argmax(np.abs(e.values[0]))
    effect_top = np.argmax(np.abs(e.contribution[0]))
    # Fractal dimension error (std 0.003) has the steepest slope, radius
    # error (std 0.28) the largest effect: per unit of each, their slopes are
    # not comparable.
    assert X[:, slope_top].std() < 0.02 * X[:, effect_top].std()
    contribution_rank = np.argsort(-np.abs(e.contribution[0])).tolist()
    assert contribution_rank.index(slope_top) >= 5


def test_heatmap_colour_bar_says_what_red_and_blue_mean(pyplot):
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X, y)
    e = OpenAPIExplainer(model, random_state=0).fit(X).explain(X[::10])
    disp = e.plot(kind="class_average", image_shape=(2, 2))
    label = disp.colorbar_.ax.get_ylabel()
    assert "log-ratio" in label and "red: raises it, blue: lowers it" in label
    disp = e.plot(row=0, image_shape=(2, 2), attribution="contribution")
    assert disp.colorbar_.ax.get_ylabel().startswith("contribution to")


def test_lime_bars_show_the_selected_features_with_their_conditions(pyplot):
    from sklearn_plm_explain import LimeTabularExplainer

    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X, y)
    e = (
        LimeTabularExplainer(model, num_features=2, num_samples=500, random_state=0)
        .fit(X)
        .explain(X[:1])
    )
    disp = e.plot(top_k=10)
    assert len(disp.bars_) == 2  # only what the surrogate selected
    labels = [t.get_text() for t in disp.ax_.get_yticklabels()]
    assert sorted(labels) == sorted(name for name, _ in e.as_list(0))
    assert all(("<" in lab) or (">" in lab) for lab in labels)
    assert "P(class 0) (LIME surrogate)" in disp.ax_.get_xlabel()
    disp = e.plot(attribution="slope")
    assert disp.ax_.get_xlabel().startswith("surrogate weight")


def test_class_average_leaves_out_a_flagged_lmt_row(pyplot):
    # The measurement: one LMT row flagged "boundary" with values up
    # to 2.8e7 shifted its class average by 9e5. Flagged rows are left out,
    # so the heatmap is the one of the batch without that row.
    import warnings

    from sklearn.datasets import make_classification
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_plm_explain import LogisticModelTreeClassifier

    X, y = make_classification(400, 6, n_informative=4, n_classes=3, random_state=0)
    lmt = LogisticModelTreeClassifier(
        prune=False, max_depth=2, min_samples_split=40, random_state=0
    ).fit(X, y)
    rows = X[:30].copy()
    rows[5, lmt.tree_.feature[0]] = lmt.tree_.threshold[0]  # on the root split
    explainer = OpenAPIExplainer(lmt, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(rows)
    assert e.flagged.tolist() == [i == 5 for i in range(30)]
    # Make the flagged row's estimate as wild as the one measured.
    e.values[5] = 2.8e7
    without = explainer.explain(np.delete(rows, 5, axis=0))
    full = e.plot(kind="class_average", image_shape=(2, 3))
    clean = without.plot(kind="class_average", image_shape=(2, 3))
    assert len(full.images_) == len(clean.images_)
    for a, b in zip(full.images_, clean.images_):
        np.testing.assert_array_equal(a.get_array(), b.get_array())
    assert full.images_[0].get_clim() == clean.images_[0].get_clim()
    c = e.target[5]
    titles = [a.get_title() for a in full.axes_[: len(full.images_)]]
    left_out = [t for t in titles if "left out" in t]
    assert left_out == [
        f"class {e.classes[c]} (n={np.sum(e.target == c) - 1}, 1 left out)"
    ]


def test_class_average_of_a_class_with_only_flagged_rows(pyplot):
    e = Explanation(
        values=[[1.0, 0.0, 0.0, 1.0], [9.0, 9.0, 9.0, 9.0]],
        target=[0, 1],
        classes=np.array(["a", "b"]),
        feature_names=["p", "q", "r", "s"],
        method="demo",
        converged=[True, False],
    )
    disp = e.plot(kind="class_average", image_shape=(2, 2))
    assert [a.get_title() for a in disp.axes_] == [
        "class a (n=1)",
        "class b (n=0, 1 left out)",
    ]
    assert np.ma.getmaskarray(disp.images_[1].get_array()).all()  # NaN: masked
    assert disp.images_[0].get_clim() == (-1.0, 1.0)


@pytest.mark.filterwarnings(
    "ignore:.*reached n_max:sklearn.exceptions.ConvergenceWarning"
)
def test_titles_name_every_explainer_in_one_style(pyplot):
    from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer

    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])
    model = LogisticRegression(max_iter=1000).fit(X, names[y])
    titles = []
    for explainer, shown in (
        (OpenAPIExplainer(model, random_state=0), "OpenAPI"),
        (LimeTabularExplainer(model, num_samples=200, random_state=0), "LIME"),
        (
            StableLIMEExplainer(model, num_samples=200, n_max=400, random_state=0),
            "S-LIME",
        ),
    ):
        e = explainer.fit(X).explain(X[:1])
        disp = ExplanationDisplay.from_explanation(e, attribution="slope")
        titles.append(disp.ax_.get_title())
        assert titles[-1] == f"{shown}, row 0, class setosa"
