"""Progress bars of long explanations, and the memory-bounded row groups."""

import numpy as np
import pytest
from sklearn import config_context
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

from sklearn_plm_explain import OpenAPIExplainer


@pytest.fixture(scope="module")
def iris_model():
    X, y = load_iris(return_X_y=True)
    return X, LogisticRegression(max_iter=500).fit(X, y)


def test_progress_reports_every_row_once(iris_model, record_bars):
    X, model = iris_model
    bars = record_bars()
    # A working memory this small explains the rows a few at a time.
    with config_context(working_memory=1e-3):
        explainer = OpenAPIExplainer(model, random_state=0, verbose=1).fit(X)
        e = explainer.explain(X[:23])
    (bar,) = bars
    assert bar.total == 23 and bar.verbose == 1 and bar.closed
    assert sum(bar.updates) == bar.n == 23
    # Grouping does not change any row's explanation (up to the last bits a
    # model's own batched arithmetic moves with the batch's size).
    alone = OpenAPIExplainer(model, random_state=0, batch_size=None).fit(X)
    reference = alone.explain(X[:23])
    np.testing.assert_array_equal(e.status, reference.status)
    np.testing.assert_allclose(e.values, reference.values, rtol=1e-12, atol=0)


def test_rows_go_in_groups_that_fit_the_working_memory(iris_model):
    X, model = iris_model
    explainer = OpenAPIExplainer(model).fit(X)
    with config_context(working_memory=1e-3):
        small = explainer._rows_per_group(4)
    with config_context(working_memory=1024):
        large = explainer._rows_per_group(4)
    assert small == 1
    assert large > 1000
    assert OpenAPIExplainer(model, batch_size=7).fit(X)._rows_per_group(4) > 10**9


def test_verbose_zero_prints_nothing(iris_model, capfd):
    X, model = iris_model
    OpenAPIExplainer(model, random_state=0).fit(X).explain(X[:5])
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_verbose_shows_a_bar_on_stderr(iris_model, capfd):
    X, model = iris_model
    OpenAPIExplainer(model, random_state=0, verbose=1).fit(X).explain(X[:5])
    out, err = capfd.readouterr()
    assert out == ""
    assert "5/5" in err and "OpenAPIExplainer" in err


def test_learned_first_radius_is_used_by_every_row(iris_model):
    X, model = iris_model
    explainer = OpenAPIExplainer(model, init_radius="auto", random_state=0).fit(X)
    assert explainer.min_radius <= explainer.init_radius_ <= explainer.max_radius
    e = explainer.explain(X[::10])
    assert e.converged.all()
    # Every row's search starts there: a row certified on its first cube was
    # certified at exactly that radius.
    first = e.n_iter == 1
    assert first.any()
    np.testing.assert_array_equal(e.radius[first], explainer.init_radius_)
    fixed = OpenAPIExplainer(model, random_state=0).fit(X)
    assert fixed.init_radius_ == fixed.init_radius == 8e-5


@pytest.mark.slow
def test_learned_first_radius_saves_queries_where_regions_are_small():
    # A ReLU network on many features: its regions are small next to the
    # default first cube, so most rows need a second one; the learned radius
    # starts inside them.
    from sklearn.datasets import make_classification
    from sklearn.neural_network import MLPClassifier

    X, y = make_classification(400, 60, n_informative=20, n_classes=4, random_state=0)
    net = MLPClassifier((64, 64), max_iter=300, random_state=0).fit(X, y)
    kwargs = {"random_state": 0}
    fixed = OpenAPIExplainer(net, init_radius=0.05, **kwargs).fit(X)
    learned = OpenAPIExplainer(net, init_radius="auto", **kwargs).fit(X)
    rows = X[-30:]
    a, b = fixed.explain(rows), learned.explain(rows)
    assert b.converged.all()
    assert np.median(b.n_queries) <= 1.1 * (X.shape[1] + 2)
    assert b.n_queries.mean() < 0.8 * a.n_queries.mean()
