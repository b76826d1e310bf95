"""Progress bars of long explanations, the memory-bounded row groups, and
explanations a chunk of rows at a time."""

import gc
import weakref

import numpy as np
import pytest
from joblib import parallel_config
from sklearn import config_context
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from sklearn_plm_explain import (
    Checkpoint,
    LimeTabularExplainer,
    ModelResponseError,
    OpenAPIExplainer,
    StableLIMEExplainer,
)


@pytest.fixture(scope="module")
def iris_model():
    X, y = load_iris(return_X_y=True)
    return X, LogisticRegression(max_iter=500).fit(X, y)


def test_progress_reports_every_row_once(iris_model, record_bars):
    X, model = iris_model
    bars = record_bars()
    # A working memory this small explains the rows a few at a time.
    with config_context(working_memory=1e-3):
        explainer = OpenAPIExplainer(
            model, random_state=0, verbose=1, reuse_regions=False
        ).fit(X)
        e = explainer.explain(X[:23])
    (bar,) = bars
    assert bar.total == 23 and bar.verbose == 1 and bar.closed
    assert sum(bar.updates) == bar.n == 23
    # Grouping does not change any row's explanation (up to the last bits a
    # model's own batched arithmetic moves with the batch's size).
    alone = OpenAPIExplainer(
        model, random_state=0, batch_size=None, reuse_regions=False
    ).fit(X)
    reference = alone.explain(X[:23])
    np.testing.assert_array_equal(e.status, reference.status)
    np.testing.assert_allclose(e.values, reference.values, rtol=1e-12, atol=0)


def test_rows_go_in_groups_that_fit_the_working_memory(iris_model):
    from sklearn_plm_explain._openapi._groups import GROUP_ROWS

    X, model = iris_model
    explainer = OpenAPIExplainer(model).fit(X)
    with config_context(working_memory=1e-3):
        small = explainer._rows_per_group(4)
    with config_context(working_memory=1024):
        large = explainer._rows_per_group(4)
    # At most GROUP_ROWS rows, the rows that share regions whatever n_jobs.
    assert small == 1
    assert large == GROUP_ROWS
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


# -- explain_chunked: rows a chunk at a time, results not kept -------------------------
def _explainers(model):
    return {
        # Rows of one chunk share regions with reuse_regions: off, so that
        # chunks are the rows of one call.
        "openapi": OpenAPIExplainer(model, random_state=0, reuse_regions=False),
        "lime": LimeTabularExplainer(model, num_samples=300, random_state=0),
        "slime": StableLIMEExplainer(model, num_samples=200, n_max=400, random_state=0),
    }


def _rows(parts, field):
    return np.concatenate([getattr(p, field) for p in parts])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("method", ["openapi", "lime", "slime"])
def test_chunks_are_the_rows_of_one_checkpointed_call(iris_model, tmp_path, method):
    X, model = iris_model
    explainer = _explainers(model)[method].fit(X)
    rows = X[::6]  # 25 rows
    parts = list(explainer.explain_chunked(rows, chunk_size=7))
    assert [len(p) for p in parts] == [7, 7, 7, 4]
    # Every row gets its draws of one call: bitwise those of a call through
    # a checkpoint of the same chunks, and of one call but for the last bits
    # that the model's arithmetic moves with the size of its batches.
    whole = explainer.explain(rows, checkpoint=Checkpoint(tmp_path, chunk_size=7))
    for field in whole.fields:
        np.testing.assert_array_equal(_rows(parts, field), getattr(whole, field))
    one = explainer.explain(rows)
    np.testing.assert_array_equal(_rows(parts, "status"), one.status)
    np.testing.assert_allclose(
        _rows(parts, "values"), one.values, rtol=1e-9, atol=1e-12
    )
    # The batch-wide fields are the explainer's, as in one call.
    assert parts[0].method == one.method
    np.testing.assert_array_equal(parts[-1].feature_names, one.feature_names)


def test_a_chunk_is_released_once_the_caller_drops_it(iris_model):
    X, model = iris_model
    held = []

    def watched(Z):
        # Whether the first chunk's results are still alive at this query.
        held.append(first_coef is not None and first_coef() is not None)
        return model.predict_proba(Z)

    first_coef = None
    explainer = OpenAPIExplainer(watched, random_state=0).fit(X)
    chunks = explainer.explain_chunked(X[:30], chunk_size=10)
    first = next(chunks)
    first_coef = weakref.ref(first.coef)
    del first
    gc.collect()
    held.clear()
    assert sum(len(p) for p in chunks) == 20
    # No query of the later chunks ran while the dropped chunk was alive:
    # memory does not grow with the rows explained.
    assert held and not any(held)


def _nbytes(part):
    """Bytes of a chunk's results, the points of its queries included."""
    total = sum(getattr(part, f).nbytes for f in part.fields if f != "queries")
    if "queries" in part.fields:
        total += sum(q.nbytes for q in part.queries)
    return total


@pytest.mark.parametrize(
    "method, kwargs, budget",
    [
        ("openapi", {}, 0.01),
        ("openapi", {"return_queries": True}, 0.03),
        ("lime", {}, 0.01),
    ],
)
def test_default_chunks_keep_their_results_within_the_working_memory(
    iris_model, method, kwargs, budget
):
    X, model = iris_model
    explainer = _explainers(model)[method].fit(X)
    with config_context(working_memory=budget):  # MiB
        parts = list(explainer.explain_chunked(X[:60], **kwargs))
    # The estimate of a row's results is an upper bound: no chunk is over
    # the budget, and chunks are not needlessly small.
    assert max(map(_nbytes, parts)) <= budget * 2**20
    assert len(parts) > 1 and len(parts[0]) > 1
    assert sum(len(p) for p in parts) == 60


def test_explain_chunked_checks_its_input_before_any_query(iris_model, tmp_path):
    X, model = iris_model
    calls = []

    def counted(Z):
        calls.append(len(Z))
        return model.predict_proba(Z)

    explainer = OpenAPIExplainer(counted, random_state=0).fit(X)
    calls.clear()
    with pytest.raises(ValueError, match="expecting 4 features"):
        explainer.explain_chunked(X[:5, :3])
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="chunk_size must be a positive int"):
            explainer.explain_chunked(X[:5], chunk_size=bad)
    with pytest.raises(ValueError, match="set it with Checkpoint"):
        explainer.explain_chunked(X[:5], chunk_size=2, checkpoint=tmp_path)
    # A row's queries are not kept in a checkpoint: refused, not failed on.
    with pytest.raises(ValueError, match="cannot be kept in a checkpoint"):
        explainer.explain_chunked(X[:5], return_queries=True, checkpoint=tmp_path)
    with pytest.raises(ValueError, match="cannot be kept in a checkpoint"):
        explainer.explain(X[:5], return_queries=True, checkpoint=tmp_path)
    assert calls == []


def test_a_failing_chunk_keeps_its_rows_and_the_chunks_before_it(iris_model, tmp_path):
    X, model = iris_model
    rows = X[:12].copy()
    rows[9, 0] = 7.5  # the model fails on this row
    calls = []

    def failing(Z):
        calls.append(len(Z))
        P = model.predict_proba(Z)
        P[Z[:, 0] > 7.4, 0] = np.nan
        return P

    explainer = OpenAPIExplainer(failing, random_state=0).fit(X[X[:, 0] <= 7.0])

    def run():
        got = []
        store = Checkpoint(tmp_path, chunk_size=4)
        with pytest.raises(ModelResponseError) as info:
            for part in explainer.explain_chunked(rows, checkpoint=store):
                got.append(part)
        return got, info.value

    got, err = run()
    assert [len(p) for p in got] == [4, 4] and set(_rows(got, "status")) == {"exact"}
    assert "row(s) 9 " in str(err)
    # The failing chunk's rows: row 9 (the chunk's second) not run.
    assert len(err.partial) == 4 and err.partial.status[1] == "not_run"
    # The chunks before it were kept: a second run reads them back and
    # queries the model for the failing chunk's rows only.
    calls.clear()
    again, _ = run()
    for field in got[0].fields:
        np.testing.assert_array_equal(_rows(again, field), _rows(got, field))
    assert 0 < sum(calls) <= 4 * 20 * (4 + 2)


def test_chunks_share_one_bar_and_one_warning(iris_model, record_bars, tmp_path):
    X, _ = iris_model
    A = np.random.default_rng(0).normal(size=(4, 3))

    def curved(Z):
        # Smooth, not piecewise linear: no row can be certified exact.
        logits = (Z**2) @ A
        P = np.exp(logits - logits.max(axis=1, keepdims=True))
        return P / P.sum(axis=1, keepdims=True)

    explainer = OpenAPIExplainer(curved, random_state=0, verbose=1).fit(X)
    bars = record_bars()
    store = Checkpoint(tmp_path, chunk_size=4)
    with pytest.warns(ConvergenceWarning) as caught:
        parts = list(explainer.explain_chunked(X[:10], checkpoint=store))
    assert len(caught) == 1
    flagged = np.flatnonzero(_rows(parts, "status") != "exact")
    assert flagged.size > 4
    message = str(caught[0].message)
    assert f"{flagged.size} of 10 rows" in message
    assert f"rows {', '.join(map(str, flagged))})" in message
    (bar,) = bars
    assert bar.total == 10 and bar.n == 10 and bar.closed
    # Read back from the checkpoint, the rows are counted once too.
    with pytest.warns(ConvergenceWarning):
        list(explainer.explain_chunked(X[:10], checkpoint=tmp_path))
    assert bars[1].n == 10 and sum(bars[1].updates) == 10


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize(
    "method, params",
    [
        # A kernel this narrow leaves rows with too few effective samples
        # (the shared warning, through S-LIME's own too).
        ("lime", {"kernel_width": 1e-3}),
        ("slime", {"kernel_width": 1e-3}),
        # S-LIME's own warning: rows that reach n_max.
        ("slime", {"n_max": 200}),
    ],
)
def test_warnings_point_at_the_callers_line(iris_model, method, params, chunked):
    X, model = iris_model
    explainer = _explainers(model)[method].set_params(**params).fit(X)
    with pytest.warns(ConvergenceWarning) as caught:
        if chunked:
            for _ in explainer.explain_chunked(X[:6], chunk_size=4):
                pass
        else:
            explainer.explain(X[:6])
    assert len(caught) == 1
    assert caught[0].filename == __file__


@pytest.mark.parametrize("method", ["openapi", "lime"])
def test_chunks_share_one_set_of_workers(iris_model, method, monkeypatch):
    X, model = iris_model
    from sklearn_plm_explain._openapi import _groups
    from sklearn_plm_explain._utils import _parallel

    started = []

    class Counted(_parallel.Parallel):
        def __init__(self, *args, **kwargs):
            started.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_parallel, "Parallel", Counted)
    # Groups of 4 rows: two slices of a chunk of 8 for the two jobs.
    monkeypatch.setattr(_groups, "GROUP_ROWS", 4)
    explainer = _explainers(model)[method].set_params(n_jobs=2).fit(X)
    alone = _explainers(model)[method].fit(X).explain(X[::5])
    with parallel_config(backend="threading"):
        parts = list(explainer.explain_chunked(X[::5], chunk_size=8))
    # One start of the workers for the four chunks (each would cost about
    # 0.1 s with process workers), and the rows of one job, in order.
    assert len(parts) == 4 and len(started) == 1
    for field in ("status", "values"):
        np.testing.assert_array_equal(_rows(parts, field), getattr(alone, field))
