"""Tuning explainers with GridSearchCV around a fitted model that stays fitted."""

import functools
import pickle
import warnings

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from sklearn_plm_explain import OpenAPIExplainer


@functools.cache  # fitted once; the tests check that they leave it unchanged
def _bc_mlp():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X.setflags(write=False)
    return MLPClassifier((16,), max_iter=500, random_state=0).fit(X, y), X


def test_grid_search_over_openapi_radius_keeps_the_model():
    mlp, X = _bc_mlp()
    before = pickle.dumps(mlp)
    search = GridSearchCV(
        OpenAPIExplainer(FrozenEstimator(mlp), random_state=0),
        {"init_radius": [1e-9, 2e-4], "n_witnesses": [2, 5]},
        cv=3,
        error_score="raise",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X[:90])
    # Starting 2e5 times too small costs extra attempts for the same share of
    # certified rows: the query charge in score() breaks the tie.
    assert search.best_params_["init_radius"] == 2e-4
    scores = search.cv_results_["mean_test_score"]
    assert np.all((scores > 0.5) & (scores <= 1.0))
    # The explained model was neither refitted nor cloned away.
    assert pickle.dumps(mlp) == before
    assert search.best_estimator_.estimator_.estimator is mlp


def test_score_is_share_of_exact_rows_less_a_query_charge():
    mlp, X = _bc_mlp()
    explainer = OpenAPIExplainer(mlp, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(X[:30])
        score = explainer.score(X[:30])
    charge = 1e-6 * e.n_queries.mean() / (X.shape[1] + 2)
    assert score == e.converged.mean() - charge


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_grid_search_over_slime_kernel_and_sample_size():
    from sklearn_plm_explain import StableLIMEExplainer

    mlp, X = _bc_mlp()
    before = pickle.dumps(mlp)
    search = GridSearchCV(
        StableLIMEExplainer(
            FrozenEstimator(mlp), num_features=5, n_max=2000, random_state=0
        ),
        {"kernel_width": [0.3, 3.0, 300.0], "num_samples": [200, 1000]},
        cv=3,
        error_score="raise",
    ).fit(X[:60])
    scores = search.cv_results_["mean_test_score"]
    widths = np.array([p["kernel_width"] for p in search.cv_results_["params"]])
    # A kernel far narrower than the neighbourhood leaves fresh perturbations
    # almost weightless: the held-out fidelity collapses and the search
    # rejects it.
    assert search.best_params_["kernel_width"] != 0.3
    assert scores[widths == 0.3].max() < scores[widths != 0.3].min()
    assert pickle.dumps(mlp) == before
    assert search.best_estimator_.estimator_.estimator is mlp


@pytest.mark.slow
def test_grid_search_over_lime_kernel_width_runs_at_any_width():
    """Narrow kernels used to raise 'Singular matrix' in forward selection
    (kernel_width 0.1, or 1 with continuous features). Every width and both
    representations now run; the narrow ones are flagged and score worst."""
    from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer

    mlp, X = _bc_mlp()
    grid = {
        "kernel_width": [0.1, 0.3, 1.0, 3.0],
        "discretize_continuous": [True, False],
    }
    for explainer in [
        LimeTabularExplainer(
            FrozenEstimator(mlp), num_features=5, num_samples=300, random_state=0
        ),
        StableLIMEExplainer(
            FrozenEstimator(mlp),
            num_features=5,
            num_samples=300,
            n_max=1200,
            random_state=0,
        ),  # fmt: skip
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            search = GridSearchCV(explainer, grid, cv=2, error_score="raise").fit(
                X[:40]
            )
        scores = search.cv_results_["mean_test_score"]
        assert np.isfinite(scores).all()
        params = search.cv_results_["params"]
        narrow = np.array([p["kernel_width"] <= 0.3 for p in params])
        assert scores[narrow].max() < scores[~narrow].max()
        # The narrowest setting is flagged row by row.
        best = search.best_estimator_
        with pytest.warns(ConvergenceWarning, match="fewer effective samples"):
            e = clone(best).set_params(kernel_width=0.1).fit(X).explain(X[:3])
        assert (e.status == "few_effective_samples").all()


def _grown_cubes(monkeypatch):
    """Count the rows whose next cube adds points to the last one."""
    from sklearn_plm_explain._openapi._radius import RadiusSearch

    grown = []
    add_points = RadiusSearch._add_points

    def counted(self, rel_error):
        grown.append(rel_error)
        return add_points(self, rel_error)

    monkeypatch.setattr(RadiusSearch, "_add_points", counted)
    return grown


def test_reused_memory_changes_no_result(monkeypatch):
    # The rounds' points and designs are written into memory reused from
    # round to round and group to group; a cube grown in a later round keeps
    # its earlier points. Against a run where every array is fresh: bitwise
    # the same results, and every point reported was one the model saw.
    from sklearn_plm_explain._openapi._groups import Workspace

    mlp, X = _bc_mlp()
    seen = []

    def proba(Z):
        seen.append(np.array(Z))
        return mlp.predict_proba(Z)

    grown = _grown_cubes(monkeypatch)
    explainer = OpenAPIExplainer(
        proba, response_method="predict_proba", rtol=1e-10, random_state=0
    ).fit(X)
    rows = X[:160]
    # Groups of a few rows: the workspace also passes from group to group.
    with sklearn.config_context(working_memory=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reused = explainer.explain(rows, return_queries=True)
    assert len(grown) >= 10
    queried = np.concatenate(seen)
    for q in reused.queries:
        assert all(np.any(np.all(queried == p, axis=1)) for p in q)
    monkeypatch.setattr(Workspace, "array", lambda self, name, shape: np.empty(shape))
    with sklearn.config_context(working_memory=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fresh = explainer.explain(rows, return_queries=True)
    for name in set(reused.fields) - {"queries"}:
        np.testing.assert_array_equal(getattr(reused, name), getattr(fresh, name))
    for a, b in zip(reused.queries, fresh.queries):
        np.testing.assert_array_equal(a, b)


def test_rows_certified_together_are_recorded_as_one_by_one():
    # Most float64 rows are certified by their first cube, all together; a
    # call that keeps each row's queries takes them one by one. Bitwise the
    # same results, on rows certified at once and rows searched longer.
    mlp, X = _bc_mlp()
    explainer = OpenAPIExplainer(
        mlp, response_method="predict_proba", random_state=0
    ).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        together = explainer.explain(X[:120])
        one_by_one = explainer.explain(X[:120], return_queries=True)
    assert (together.n_iter == 1).sum() > 60 and (together.n_iter > 1).sum() > 0
    for name in set(together.fields) - {"queries"}:
        np.testing.assert_array_equal(
            getattr(together, name), getattr(one_by_one, name), err_msg=name
        )


def test_workspace_grows_on_demand():
    from sklearn_plm_explain._openapi._groups import Workspace

    ws = Workspace()
    a = ws.array("points", (3, 4))
    a[:] = 1.0
    # Same size or smaller: the same memory.
    assert np.shares_memory(ws.array("points", (2, 5)), a)
    # Larger: new memory; the earlier array keeps its own values.
    b = ws.array("points", (5, 4))
    assert not np.shares_memory(a, b) and np.all(a == 1.0)
    assert not np.shares_memory(ws.array("design", (3, 4)), b)


@pytest.mark.parametrize("d", [64, 256, 512, 784, 1024, 2048, 4096])
def test_row_groups_are_bounded_and_wide_rows_share_products(d):
    # A group's design-sized arrays stay under 16 MiB, or under 64 MiB for a
    # group of at most 8 rows (wide rows: each product with a basis-sized
    # matrix reads it whatever the number of rows), unless one row alone is
    # larger, and always within the working memory; a group holds at least 8
    # rows whenever 64 MiB allows.
    from sklearn_plm_explain._openapi._groups import rows_per_group

    n_witnesses, n_outputs = 5, 10
    cube = 8 * (d + n_witnesses + 2) * (d + 1)
    rows = rows_per_group(d, n_witnesses, n_outputs)
    assert rows >= 1
    assert (
        rows == 1
        or rows * cube <= 16 * 2**20
        or (rows <= 8 and rows * cube <= 64 * 2**20)
    )
    assert rows >= min(8, (64 * 2**20) // cube)
    with sklearn.config_context(working_memory=64):
        small = rows_per_group(d, n_witnesses, n_outputs)
    assert small <= max(1, 64 * 2**20 // (4 * cube))
