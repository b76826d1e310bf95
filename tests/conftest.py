"""Shared test configuration: hypothesis profiles and small fixtures."""

import os

# Every test is small, and the machines that run the suite are shared: BLAS
# and OpenMP threads that wait on one another cost CPU time and win nothing.
# One thread each, here and in the subprocesses the tests start (a variable
# set by the caller is kept). Tests about thread limits set their own.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy  # noqa: E402, F401  (its BLAS, for the limit below)
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

# Libraries loaded before the variables were set (by another plugin) have
# sized their pools already: limit those directly too.
threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")
threadpool_limits(limits=int(os.environ["OMP_NUM_THREADS"]), user_api="openmp")

# Fitting models inside property tests is slow by hypothesis' standards: no
# deadline, few examples. The default run is derandomised, so that it passes
# or fails the same way every time; "dev" draws new examples on every run and
# "thorough" many more, to explore.
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    max_examples=12,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=12)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.load_profile(os.environ.get("SKLEARN_PLM_HYPOTHESIS_PROFILE", "ci"))


class CountingModel:
    """Wraps a callable model and counts its calls and query rows."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0
        self.rows = 0

    def __call__(self, X):
        self.calls += 1
        self.rows += len(X)
        return self.fn(X)


@pytest.fixture
def counting():
    return CountingModel


# -- real servers for RemoteModel (tests/_servers.py) --------------------------------
def _load_servers():
    import importlib.util
    import sys

    name = "plm_test_servers"
    if name not in sys.modules:
        path = os.path.join(os.path.dirname(__file__), "_servers.py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


servers = _load_servers()
served_mlp = servers.served_mlp


def _wants_mlflow(items):
    return any("mlflow_server" in getattr(item, "fixturenames", ()) for item in items)


def pytest_collection_finish(session):
    # MLflow's server takes seconds to boot: start it as soon as the tests
    # that need it are known, so that it boots while other tests run.
    import importlib.util

    if _wants_mlflow(session.items) and importlib.util.find_spec("mlflow"):
        session.config._plm_mlflow = servers.MLflowServer(served_mlp()["model"]).start()


def pytest_unconfigure(config):
    server = getattr(config, "_plm_mlflow", None)
    if server is not None:
        server.stop()


@pytest.fixture(scope="session")
def mlflow_server(request):
    """MLflow's scoring server (``mlflow models serve``) of ``served_mlp``."""
    pytest.importorskip("mlflow")
    server = getattr(request.config, "_plm_mlflow", None)
    if server is None:
        server = request.config._plm_mlflow = servers.MLflowServer(
            served_mlp()["model"]
        ).start()
    return server.wait()


@pytest.fixture(scope="session")
def v2_server():
    """The v2 test server of ``served_mlp`` (as "mlp"; FP32 outputs as
    "mlp32"; without metadata as "bare")."""
    pytest.importorskip("uvicorn")
    pytest.importorskip("starlette")
    model = served_mlp()["model"]
    tally = servers.Tally(keep_rows=True)
    app = servers.v2_app(
        {"mlp": model, "mlp32": model, "bare": model},
        output_dtypes={"mlp32": "FP32"},
        tally=tally,
        bare=("bare",),
    )
    server = servers.ThreadedServer(app).start()
    server.tally = tally
    yield server
    server.stop()


@pytest.fixture(scope="session")
def digits_lmt():
    """A logistic model tree on digits with several leaves, its training rows
    and 300 held-out rows."""
    from sklearn.datasets import load_digits

    from sklearn_plm_explain import LogisticModelTreeClassifier

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    lmt = LogisticModelTreeClassifier(
        prune=False, max_depth=3, split_point="midpoint", random_state=0
    ).fit(X[:1200], y[:1200])
    assert lmt.get_n_leaves() >= 4
    return lmt, X[:1200], X[1200:1500]


# -- progress bars -------------------------------------------------------------------
class _RecordingBar:
    """Stands in for the progress bar: keeps every update."""

    def __init__(self, total, verbose, desc="rows"):
        self.total, self.verbose, self.updates, self.closed = total, verbose, [], False
        self.n = 0

    def update(self, n=1):
        self.updates.append(n)
        self.n += n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True
        return False


@pytest.fixture
def record_bars(monkeypatch):
    """``record_bars()`` replaces the explainers' progress bars by recording
    ones from then on and returns the list they are kept in (calls before it
    go through the real bar)."""

    def start():
        from sklearn_plm_explain._utils import _progress

        bars = []

        def fake(total, verbose, desc="rows"):
            bars.append(_RecordingBar(total, verbose, desc))
            return bars[-1]

        monkeypatch.setattr(_progress, "progress_bar", fake)
        return bars

    return start
