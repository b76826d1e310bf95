"""The documentation builds with warnings as errors, running every example,
and says what the code is."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "doc"


@pytest.mark.slow
def test_docs_build_with_the_gallery(tmp_path):
    for module in ("sphinx", "numpydoc", "sphinx_gallery", "pydata_sphinx_theme"):
        pytest.importorskip(module)
    image = pytest.importorskip("matplotlib.image")
    # Build from a copy: the gallery writes its output next to the sources.
    src = tmp_path / "doc"
    shutil.copytree(
        DOC, src, ignore=shutil.ignore_patterns("_build", "auto_examples", "generated")
    )
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-b", "html", str(src), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    examples = sorted(p.stem for p in (DOC / "examples").glob("plot_*.py"))
    assert len(examples) >= 5
    for name in examples:
        assert (out / "auto_examples" / f"{name}.html").is_file()
        pngs = sorted((src / "auto_examples" / "images").glob(f"sphx_glr_{name}_*.png"))
        assert pngs, f"{name} drew no figure"
        for png in pngs:
            pixels = image.imread(png)
            # A blank figure is one flat colour.
            assert pixels[..., :3].std() > 0.05, f"{png.name} looks blank"
    assert (out / "api.html").is_file() and (out / "user_guide.html").is_file()


ROOT = DOC.parent


def test_statuses_are_documented_from_the_code_only():
    # The user guide's status table is generated from STATUSES at build time
    # (doc/conf.py); a table written by hand elsewhere would drift from it.
    guide = (DOC / "user_guide.rst").read_text()
    assert ".. include:: generated/statuses.inc" in guide
    readme = (ROOT / "README.md").read_text()
    from sklearn_plm_explain import STATUSES

    hand_rows = [s for s in STATUSES if f"| `{s}` |" in readme]
    assert hand_rows == [], "README lists statuses by hand; link the user guide"


def _layout_tree(text):
    """Paths of the files in the user guide's layout tree (4 spaces a level)."""
    block = text.split("For developers: the package's layout", 1)[1]
    block = block.split(".. code-block:: text", 1)[1].split("\n\n", 2)[1]
    paths, folders = set(), []
    for line in block.splitlines():
        depth = (len(line) - len(line.lstrip())) // 4 - 1
        name = line.split()[0]
        folders = folders[:depth]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        else:
            paths.add("/".join([*folders, name]))
    return paths


def test_the_user_guide_layout_tree_is_the_package():
    root = Path(__file__).parents[1]
    text = (root / "doc" / "user_guide.rst").read_text()
    package = root / "sklearn_plm_explain"
    modules = {str(p.relative_to(root)) for p in package.rglob("*.py")}
    assert _layout_tree(text) == modules
