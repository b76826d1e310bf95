"""Sphinx configuration of the sklearn-plm-explain documentation.

Build with ``sphinx-build -W -b html doc doc/_build/html``: warnings are
errors, and every example of the gallery is run.
"""

import os
import re
import warnings

import sklearn_plm_explain

project = "sklearn-plm-explain"
author = "The sklearn-plm-explain developers"
copyright = "The sklearn-plm-explain developers"
version = release = sklearn_plm_explain.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "**/sg_execution_times.rst", "examples/README.txt"]
# Single backticks in docstrings are code, not cross-references.
default_role = "literal"

autosummary_generate = True
autodoc_default_options = {"members": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

html_theme = "pydata_sphinx_theme"
html_title = f"{project} {version}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_prev_next": False,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []

# The gallery's figures are written to files, never shown.
os.environ.setdefault("MPLBACKEND", "Agg")

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "doc_module": ("sklearn_plm_explain",),
    "reference_url": {"sklearn_plm_explain": None},
    "backreferences_dir": "generated/backreferences",
    "within_subsection_order": "FileNameSortKey",
    "remove_config_comments": True,
    "download_all_examples": False,
    # A failing example fails the build.
    "only_warn_on_example_error": False,
}

# Examples print their diagnostics; the matplotlib backend warning under a
# headless build is noise.
warnings.filterwarnings("ignore", message="Matplotlib is currently using agg")


def _write_status_table():
    """Write the table of OpenAPI statuses from ``STATUSES``.

    The user guide includes the generated file, so the documented statuses
    are always the ones the code can return.
    """
    from sklearn_plm_explain import STATUSES

    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 20 80",
        "",
        "   * - status",
        "     - meaning",
    ]
    for name, meaning in STATUSES.items():
        lines += [f"   * - ``{name}``", f"     - {meaning}"]
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(os.path.join(here, "generated"), exist_ok=True)
    with open(os.path.join(here, "generated", "statuses.inc"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


_write_status_table()


# Fitted-attribute names such as ``n_features_in_`` written bare in a shape
# ("of shape (n_features_in_,)") would read as reStructuredText link targets.
_TRAILING_UNDERSCORE = re.compile(r"(?<![`\w])([A-Za-z]\w*_)(?=[,)])")


def _quote_fitted_names(app, what, name, obj, options, lines):
    lines[:] = [_TRAILING_UNDERSCORE.sub(r"``\1``", line) for line in lines]


def _skip_metadata_requests(app, what, name, obj, skip, options):
    # scikit-learn generates these routing setters on every estimator; their
    # docstrings point into scikit-learn's own documentation.
    if re.fullmatch(r"set_\w+_request|get_metadata_routing", name):
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _quote_fitted_names)
    app.connect("autodoc-skip-member", _skip_metadata_requests)
