"""Common checks over every public estimator.

scikit-learn's own estimator checks, then the checks scikit-learn runs on its
own estimators (and imbalanced-learn on its): parameter validation, pandas
column names and output, fitted attributes documented. All run over the one
instance list of :mod:`sklearn_plm_explain.utils._test_common`; the costly
configurations (``_heavy``) run their checks with ``-m slow``.
"""

import re
import warnings

import numpy as np
import pytest
from numpydoc.docscrape import ClassDoc
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from sklearn.utils.estimator_checks import (
    check_dataframe_column_names_consistency,
    check_global_output_transform_pandas,
    check_param_validation,
    check_set_output_transform_pandas,
    check_transformer_get_feature_names_out,
    check_transformer_get_feature_names_out_pandas,
    parametrize_with_checks,
)

from sklearn_plm_explain import (
    LimeTabularExplainer,
    LogisticModelTreeClassifier,
    OpenAPIExplainer,
    StableLIMEExplainer,
)
from sklearn_plm_explain.utils import _test_common  # (tested_* would be collected)
from sklearn_plm_explain.utils._test_common import expected_failed_checks

ESTIMATORS = _test_common.tested_estimators()


def _heavy(est):
    """Whether each check of ``est`` costs up to seconds: the default settings
    of the sampling explainers (5000 samples a row, which S-LIME's stability
    test grows) and of the tree (LogitBoost cross-validated at every node),
    LIME's continuous sampling (a lasso path a row), a tree grown unpruned,
    and the OpenAPI search over an MLP. Their checks run with ``-m slow`` (as
    CI does); every class keeps a cheaper configuration in the default run.
    """
    if isinstance(est, OpenAPIExplainer):
        return isinstance(est.estimator, MLPClassifier)
    if type(est) not in (
        LimeTabularExplainer,
        StableLIMEExplainer,
        LogisticModelTreeClassifier,
    ):
        return False
    if repr(est) == repr(type(est)()):
        return True
    if isinstance(est, LogisticModelTreeClassifier):
        return not est.prune
    return not est.discretize_continuous


LIGHT = [e for e in ESTIMATORS if not _heavy(e)]
HEAVY = [e for e in ESTIMATORS if _heavy(e)]


def _params(estimators):
    slow = [pytest.mark.slow]
    return [
        pytest.param(e, id=_ids(e), marks=slow if _heavy(e) else ()) for e in estimators
    ]


def _quiet(check, *args):
    with warnings.catch_warnings():
        # Explanations of rows a tiny model cannot certify warn; so does an
        # MLP stopped early. Neither is what these checks are about.
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(*args)


def _ids(est):
    # Without the addresses of functions, so that ids are the same every run.
    return re.sub(r"\s+", "", re.sub(r"\s+at 0x[0-9a-f]+", "", repr(est)))


@parametrize_with_checks(LIGHT, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    _quiet(check, estimator)


@pytest.mark.slow
@parametrize_with_checks(HEAVY, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_heavy_estimator(estimator, check):
    _quiet(check, estimator)


def test_every_class_is_checked_in_the_default_run():
    assert {type(e) for e in LIGHT} == {type(e) for e in ESTIMATORS}


# Validation and the fitted attributes cost little at any setting: all here.
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_param_validation(estimator):
    _quiet(check_param_validation, type(estimator).__name__, estimator)


@pytest.mark.parametrize("estimator", _params(ESTIMATORS))
def test_pandas_column_names_consistency(estimator):
    pytest.importorskip("pandas")
    _quiet(
        check_dataframe_column_names_consistency, type(estimator).__name__, estimator
    )


TRANSFORMERS = [e for e in ESTIMATORS if hasattr(e, "transform")]
OUTPUT_CHECKS = [
    check_set_output_transform_pandas,
    check_global_output_transform_pandas,
    check_transformer_get_feature_names_out,
    check_transformer_get_feature_names_out_pandas,
]


# These fit on a DataFrame and transform an array, and the other way round, on
# purpose: the explainer must then warn, as scikit-learn's estimators do.
MIXED_INPUT_CHECKS = (
    check_set_output_transform_pandas,
    check_global_output_transform_pandas,
)


@pytest.mark.parametrize("check", OUTPUT_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("estimator", _params(TRANSFORMERS))
def test_transformer_feature_names_and_pandas_output(estimator, check):
    pytest.importorskip("pandas")
    name = type(estimator).__name__
    if check not in MIXED_INPUT_CHECKS:
        _quiet(check, name, estimator)
        return
    # Each pytest.warns passes on any other warning (pytest >= 8), so that
    # one of the explained model, or of the explainer about anything else,
    # is still reported.
    with (
        pytest.warns(
            UserWarning,
            match=f"^X does not have valid feature names, but {name} was fitted "
            "with feature names$",
        ),
        pytest.warns(
            UserWarning,
            match=f"^X has feature names, but {name} was fitted without feature names$",
        ),
    ):
        _quiet(check, name, estimator)


def _documented_attributes(cls):
    names = set()
    for param in ClassDoc(cls)["Attributes"]:
        names.update(n.strip() for n in param.name.replace("\\", "").split(","))
    return names


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_fitted_attributes_are_documented(estimator):
    X, y = load_iris(return_X_y=True)
    est = clone(estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    fitted = {
        name for name in vars(est) if name.endswith("_") and not name.startswith("_")
    }
    missing = fitted - _documented_attributes(type(est))
    assert not missing, f"{type(est).__name__} does not document {sorted(missing)}"


def test_every_public_estimator_is_checked():
    import sklearn_plm_explain as pkg

    public = {
        obj
        for module in (pkg, pkg.baselines)
        for obj in (getattr(module, name) for name in module.__all__)
        if isinstance(obj, type) and hasattr(obj, "get_params")
    }
    # A RemoteModel is a client of a model served elsewhere: the common checks
    # fit estimators on data they make up, which a served model cannot learn.
    # Its estimator face (clone, tags, fitted, repr) is tested in
    # tests/test_remote.py.
    public.discard(pkg.RemoteModel)
    assert public == {type(e) for e in ESTIMATORS}
    # Every one also with its default parameters.
    defaults = {
        type(e)
        for e in ESTIMATORS
        if repr(e.get_params(deep=False)) == repr(type(e)().get_params(deep=False))
    }
    assert defaults == public


def test_failed_fit_leaves_the_estimator_unfitted():
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    from sklearn_plm_explain import OpenAPIExplainer

    X, y = load_iris(return_X_y=True)
    bad = OpenAPIExplainer(scale=np.ones(3))  # X has 4 features
    with pytest.raises(ValueError, match="scale must be"):
        bad.fit(X, y)
    with pytest.raises(NotFittedError):
        check_is_fitted(bad)
    radii = OpenAPIExplainer(init_radius=1e-12)
    with pytest.raises(ValueError, match="Radii must satisfy"):
        radii.fit(X, y)
    assert not any(name.endswith("_") for name in vars(radii))


def test_hypothesis_profiles_control_every_property_test():
    # A local max_examples overrides the profile, so that
    # SKLEARN_PLM_HYPOTHESIS_PROFILE=thorough would not be thorough there:
    # only the profiles of conftest.py may set it.
    from pathlib import Path

    this = Path(__file__)
    local = [
        p.name
        for p in sorted(this.parent.glob("test_*.py"))
        if p != this and "max_examples" in p.read_text(encoding="utf-8")
    ]
    assert not local, f"max_examples is set locally in {local}"


def _property_tests():
    """The hypothesis tests of every test module, by module and name."""
    import importlib.util
    from pathlib import Path

    found = {}
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_scan_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, obj in vars(module).items():
            if getattr(obj, "is_hypothesis_test", False):
                found[f"{path.name}::{name}"] = obj
    return found


def test_property_tests_run_the_profiles_number_of_examples():
    # What the text scan above cannot see (a value from a variable, settings
    # built elsewhere): each property test's effective settings, which
    # hypothesis fixes when the test is decorated, after conftest.py has
    # loaded the profile.
    from hypothesis import settings

    tests = _property_tests()
    assert len(tests) >= 10  # the scan finds them
    wanted = settings.default.max_examples
    local = {
        name: test._hypothesis_internal_use_settings.max_examples
        for name, test in tests.items()
        if test._hypothesis_internal_use_settings.max_examples != wanted
    }
    assert not local, f"not the profile's max_examples={wanted}: {local}"
