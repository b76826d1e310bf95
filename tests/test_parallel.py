"""Parallel explanation: joblib backends and dask give the sequential results."""

import warnings

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from sklearn_plm_explain import OpenAPIExplainer
from sklearn_plm_explain.utils import _test_common  # (tested_* would be collected)


@pytest.fixture(scope="module")
def bc():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return MLPClassifier((16,), max_iter=500, random_state=0).fit(X, y), X


_RNG = np.random.default_rng(0)
_W1, _W2 = _RNG.normal(size=(30, 12)), _RNG.normal(size=(12, 3))


def relu_net(Z):
    """A small ReLU network evaluated row by row (no BLAS): a point's response
    does not depend on the batch it is sent in, as BLAS results may."""
    h = np.maximum(np.einsum("nd,dh->nh", Z, _W1), 0.0)
    logits = np.einsum("nh,hk->nk", h, _W2)
    P = np.exp(logits - logits.max(axis=1, keepdims=True))
    return P / P.sum(axis=1, keepdims=True)


def _explain(model, X, rows, **kw):
    explainer = OpenAPIExplainer(model, random_state=0, **kw).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return explainer.explain(rows)


def _assert_same(a, b):
    np.testing.assert_array_equal(a.coef, b.coef)
    np.testing.assert_array_equal(a.intercept, b.intercept)
    np.testing.assert_array_equal(a.status, b.status)
    np.testing.assert_array_equal(a.n_queries, b.n_queries)


def _assert_close(a, b):
    # For BLAS-backed models: same statuses, values within the certificate.
    np.testing.assert_array_equal(a.status, b.status)
    ok = a.converged
    diff = np.abs(a.values - b.values).sum(1)[ok]
    assert np.all(diff <= 2e-8 * np.abs(a.values).sum(1)[ok])


@pytest.mark.slow  # starts process workers
@pytest.mark.parametrize("n_jobs", [2, -1])
def test_process_workers_give_identical_results(bc, n_jobs):
    _, X = bc
    ref = _explain(relu_net, X, X[:40])
    assert ref.converged.mean() > 0.8
    _assert_same(ref, _explain(relu_net, X, X[:40], n_jobs=n_jobs))
    model, _ = bc
    _assert_close(_explain(model, X, X[:40]), _explain(model, X, X[:40], n_jobs=n_jobs))


def test_threading_backend_gives_identical_results(bc):
    _, X = bc
    ref = _explain(relu_net, X, X[:40])
    with parallel_config(backend="threading"):
        _assert_same(ref, _explain(relu_net, X, X[:40], n_jobs=2))


def test_blas_is_limited_inside_workers():
    from threadpoolctl import threadpool_info, threadpool_limits

    from sklearn_plm_explain._utils._parallel import map_even_slices

    def probe(rows=None):
        blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        return [max(blas, default=1)]

    # conftest.py runs the tests with one BLAS thread: give the caller two, so
    # that one thread inside the workers is the limit's doing.
    with threadpool_limits(limits=2, user_api="blas"):
        if probe() != [2]:
            pytest.skip("BLAS cannot run two threads here")
        with parallel_config(backend="threading"):
            counts = map_even_slices(probe, 10, 2)
    assert all(c == [1] for c in counts)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.dask
def test_dask_cluster_gives_identical_results(bc):
    distributed = pytest.importorskip("distributed")
    model, X = bc
    rows = X[:30]
    from sklearn_plm_explain import StableLIMEExplainer

    slime = StableLIMEExplainer(
        relu_net, num_features=4, num_samples=300, random_state=0
    ).fit(X)
    ref = _explain(relu_net, X, rows)
    ref_slime = slime.explain(rows[:8])
    local_mlp = _explain(model, X, rows, n_jobs=2)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        with parallel_config(backend="dask"):
            out = _explain(relu_net, X, rows, n_jobs=2)
            out_mlp = _explain(model, X, rows, n_jobs=2)
            out_slime = slime.set_params(n_jobs=2).explain(rows[:8])
    _assert_same(ref, out)
    for field in ref_slime.fields:
        np.testing.assert_array_equal(
            getattr(ref_slime, field), getattr(out_slime, field)
        )
    # The same chunks with single-threaded BLAS on both sides: identical too.
    _assert_same(local_mlp, out_mlp)


@pytest.mark.slow  # starts process workers
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind", ["lime", "slime"])
def test_lime_explainers_identical_across_jobs_and_backends(bc, kind):
    from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer

    model, X = bc
    cls = LimeTabularExplainer if kind == "lime" else StableLIMEExplainer

    def run(**kw):
        explainer = cls(
            relu_net, num_features=4, num_samples=300, random_state=0, **kw
        ).fit(X)
        return explainer.explain(X[:12])

    ref = run()
    for other in (run(n_jobs=2), run(n_jobs=-1)):
        for field in ref.fields:
            np.testing.assert_array_equal(getattr(ref, field), getattr(other, field))
    with parallel_config(backend="threading"):
        other = run(n_jobs=2)
    for field in ref.fields:
        np.testing.assert_array_equal(getattr(ref, field), getattr(other, field))


EXPLAINERS = [e for e in _test_common.tested_estimators() if hasattr(e, "explain")]


@pytest.mark.parametrize("index", range(len(EXPLAINERS)))
def test_every_tested_explainer_gives_the_sequential_result(index):
    from sklearn.base import clone
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    rows = X[::15]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = clone(EXPLAINERS[index])
        if "random_state" in est.get_params():
            est.set_params(random_state=0)
        est.fit(X, y)
        ref = est.explain(rows)
        with parallel_config(backend="threading"):
            par = est.set_params(n_jobs=2).explain(rows)
    np.testing.assert_array_equal(ref.status, par.status)
    # BLAS may round a response differently in a smaller batch: values agree
    # far below any certificate's tolerance, not always bitwise. A row that
    # reuses a region's model uses another row's fit (within 2 rtol), and
    # which row that is depends on the chunks (README, "Rows that share a
    # linear region").
    reuse = getattr(est, "reuse_regions", False)
    tol = 2 * est.rtol if reuse else 1e-9
    if not reuse:
        np.testing.assert_array_equal(ref.n_queries, par.n_queries)
    scale = np.abs(ref.values).sum(axis=1) + 1e-300
    assert np.all(np.abs(ref.values - par.values).sum(axis=1) <= tol * scale)
