"""Tests of the ``plm-explain`` command line on a saved model and CSV file."""

import csv
import json
import shutil
import subprocess
import sys

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.linear_model import LinearRegression
from sklearn.neural_network import MLPClassifier

from sklearn_plm_explain import Explanation
from sklearn_plm_explain._cli import main

HEADER = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
N_ROWS = 12


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A saved iris MLP, a saved regressor and a CSV of 12 rows."""
    root = tmp_path_factory.mktemp("cli")
    X, y = load_iris(return_X_y=True)
    model = MLPClassifier((8,), max_iter=2000, random_state=0).fit(X, y)
    joblib.dump(model, root / "mlp.joblib")
    joblib.dump(LinearRegression().fit(X, y), root / "regressor.joblib")
    rows = X[:: len(X) // N_ROWS][:N_ROWS]
    with open(root / "rows.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(HEADER)
        writer.writerows(rows.tolist())
    with open(root / "three_columns.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(HEADER[:3])
        writer.writerows(rows[:, :3].tolist())
    with open(root / "headerless.csv", "w", newline="") as fh:
        csv.writer(fh).writerows(rows.tolist())
    (root / "semicolons.csv").write_text("a;b;c;d\n1;2;3;4\n")
    (root / "a_folder").mkdir()
    (root / "ragged.csv").write_text("a,b,c,d\n1,2,3,4\n1,2,3\n")
    (root / "words.csv").write_text("a,b,c,d\n1,2,3,4\n1,2,three,4\n")
    (root / "empty_cell.csv").write_text("a,b,c,d\n1,2,3,4\n1,2,3,\n")
    (root / "nan.csv").write_text("a,b,c,d\n1,2,3,4\n1,inf,3,4\n")
    joblib.dump({"model": model}, root / "dict.joblib")
    joblib.dump([1, 2, 3], root / "list.joblib")
    joblib.dump(MLPClassifier((8,)), root / "unfitted.joblib")
    (root / "garbage.joblib").write_bytes(b"this is not a pickle")
    joblib.dump(_Exploding(), root / "exploding.joblib")
    joblib.dump(_FailsNearRow(model, rows[7]), root / "fails_at_row_7.joblib")
    return root


class _Exploding(MLPClassifier):
    """A fitted-looking classifier whose predict_proba fails with its own error."""

    def __init__(self):
        super().__init__()
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = 4

    def predict_proba(self, X):
        raise RuntimeError("the scoring service is down")


class _FailsNearRow(MLPClassifier):
    """The iris MLP, failing on any query close to (not at) one row: the
    explanation of that row's chunk fails, the chunks before it do not."""

    def __init__(self, model=None, row=None):
        super().__init__()
        self.model, self.row = model, row
        if model is not None:
            self.classes_, self.n_features_in_ = model.classes_, 4

    def predict_proba(self, X):
        dist = np.abs(np.asarray(X) - self.row).max(axis=1)
        if np.any((dist > 0) & (dist < 1e-2)):
            raise RuntimeError("the scoring service is down")
        return self.model.predict_proba(X)


def _console_script():
    exe = shutil.which("plm-explain")
    if exe is None:
        pytest.skip("the plm-explain console script is not installed")
    return [exe]


def _run(cmd, *args):
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, timeout=120
    )


def _read_rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_openapi_to_csv_with_the_console_script(files, tmp_path):
    out = tmp_path / "out.csv"
    proc = _run(
        _console_script(),
        "explain", "--model", files / "mlp.joblib", "--data", files / "rows.csv",
        "--method", "openapi", "--out", out, "--chunk-size", 5,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = _read_rows(out)
    assert len(rows) == N_ROWS
    assert list(rows[0])[:4] == HEADER
    assert {"status", "converged", "target_label", "n_queries"} <= set(rows[0])
    assert {r["status"] for r in rows} == {"exact"}
    values = np.array([[float(r[h]) for h in HEADER] for r in rows])
    assert np.isfinite(values).all() and np.abs(values).sum() > 0
    # Progress on stderr, one line per chunk of 5 rows.
    progress = [ln for ln in proc.stderr.splitlines() if ln.startswith("explained")]
    assert progress == ["explained 5/12 rows", "explained 10/12 rows", "explained 12/12 rows"]  # fmt: skip
    assert proc.stdout == ""


def test_the_rows_do_not_depend_on_the_chunk_size(files, tmp_path):
    # The command writes the rows of one explain_chunked call: a row's draws
    # come from its own values, whatever the chunk it is in; rows share
    # certified regions within their chunk only, so the values agree within
    # 2 rtol (a row may reuse another row's model instead of fitting its own).
    X = np.loadtxt(files / "rows.csv", delimiter=",", skiprows=1)
    outs = []
    for size in (5, 100):
        out = tmp_path / f"out{size}.csv"
        args = ["explain", "--model", files / "mlp.joblib", "--data",
                files / "rows.csv", "--chunk-size", size, "--out", out]  # fmt: skip
        assert main(list(map(str, args))) == 0
        outs.append(_read_rows(out))
    assert [r["status"] for r in outs[0]] == [r["status"] for r in outs[1]]
    small, whole = (
        np.array([[float(r[h]) for h in HEADER] for r in out]) for out in outs
    )
    diff = np.abs(small - whole).sum(axis=1)
    assert np.all(diff <= 2 * 1e-8 * np.abs(whole).sum(axis=1))
    # And they are the library's rows of one call (the slopes up to the last
    # bits the model's arithmetic moves with the size of its batches).
    from sklearn_plm_explain import OpenAPIExplainer

    model = joblib.load(files / "mlp.joblib")
    e = OpenAPIExplainer(model, random_state=0).fit(X).explain(X)
    np.testing.assert_allclose(whole, e.values, rtol=1e-9, atol=1e-12)
    assert [r["n_queries"] for r in outs[1]] == [str(q) for q in e.n_queries]
    bounds = [float(r["error_bound"]) for r in outs[1]]
    np.testing.assert_allclose(bounds, e.error_bound, rtol=1e-6)


def test_csv_rows_are_written_as_their_chunk_finishes(files, tmp_path, capsys):
    # Rows 5-9 form the chunk that fails (row 7): rows 0-4 are already in the
    # file, and the error says so; a JSON output is written at the end only,
    # so it leaves no file behind.
    args = ["explain", "--model", str(files / "fails_at_row_7.joblib"),
            "--data", str(files / "rows.csv"), "--chunk-size", "5"]  # fmt: skip
    out = tmp_path / "out.csv"
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the scoring service is down" in err
    assert f"The 5 rows finished before this chunk are in {out}" in err
    rows = _read_rows(out)
    assert len(rows) == 5 and {r["status"] for r in rows} == {"exact"}
    whole = tmp_path / "whole.csv"
    main(["explain", "--model", str(files / "mlp.joblib"), "--data",
          str(files / "rows.csv"), "--out", str(whole)])  # fmt: skip
    assert rows == _read_rows(whole)[:5]
    assert main([*args, "--out", str(tmp_path / "out.json")]) == 2
    assert not (tmp_path / "out.json").exists()
    # With a checkpoint the chunks are written as they finish too, and the
    # error says where the finished rows are: the file and the checkpoint.
    ck, out = tmp_path / "ck", tmp_path / "ck.csv"
    assert main([*args, "--out", str(out), "--checkpoint", str(ck)]) == 2
    err = capsys.readouterr().err
    assert f"The 5 rows finished before this chunk are in {out}" in err
    assert f"kept in {ck}: run the same command again to resume" in err
    assert _read_rows(out) == rows
    # A damaged checkpoint is named, with no advice to resume from it.
    (ck / "manifest.json").unlink()
    assert main([*args, "--out", str(out), "--checkpoint", str(ck)]) == 2
    err = capsys.readouterr().err
    assert "has chunk files but no manifest: it is damaged" in err
    assert "resume" not in err


@pytest.mark.slow
def test_slime_to_json_with_a_target(files, tmp_path):
    out = tmp_path / "out.json"
    proc = _run(
        [sys.executable, "-m", "sklearn_plm_explain._cli"],
        "explain", "--model", files / "mlp.joblib", "--data", files / "rows.csv",
        "--method", "slime", "--num-samples", 100, "--n-max", 400,
        "--num-features", 2, "--target", 2, "--out", out,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    e = Explanation.from_dict(json.loads(out.read_text()))
    assert e.method == "stable_lime"
    assert e.values.shape == (N_ROWS, 4)
    assert np.isfinite(e.values).all()
    assert list(e.feature_names) == HEADER
    assert set(e.target_label.tolist()) == {2}
    assert set(e.status) <= {"converged", "tied", "n_max_reached"}
    assert (e.n_samples >= 100).all() and (e.n_samples <= 400).all()
    # Two features per explanation: the others are exactly zero.
    assert ((e.values != 0).sum(axis=1) <= 2).all()


def test_lime_to_stdout(files, capsys):
    code = main(
        ["explain", "--model", str(files / "mlp.joblib"),
         "--data", str(files / "rows.csv"), "--method", "lime",
         "--num-samples", "200", "--target", "0"]
    )  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(captured.out.splitlines()))
    assert len(rows) == N_ROWS
    assert {r["target_label"] for r in rows} == {"0"}
    assert {r["n_samples"] for r in rows} == {"200"}
    assert all(np.isfinite(float(r[h])) for r in rows for h in HEADER)
    assert "explained 12/12 rows" in captured.err


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--model": "missing.joblib"}, "model file not found"),
        ({"--data": "missing.csv"}, "data file not found"),
        ({"--data": "a_folder"}, "is a folder; give the CSV file in it"),
        ({"--data": "headerless.csv"}, "first line is numbers, not column names"),
        ({"--data": "semicolons.csv"}, "separated by semicolons"),
        ({"--model": "rows.csv"}, "cannot load a model"),
        ({"--data": "three_columns.csv"}, "3 columns but the model expects 4"),
        ({"--data": "ragged.csv"}, "data row 2 has 3 fields"),
        ({"--data": "words.csv"}, "data row 2, column 'c': 'three' is not a number"),
        ({"--data": "empty_cell.csv"}, "data row 2, column 'd' is empty"),
        ({"--data": "nan.csv"}, "data row 2, column 'b': 'inf' is not a finite"),
        ({"--target": "7"}, "unknown target '7'"),
        ({"--out": "out.txt"}, "must end in .csv or .json"),
        ({"--model": "dict.joblib"}, "holds a dict, not a fitted scikit-learn model"),
        ({"--model": "list.joblib"}, "holds a list, not a fitted scikit-learn model"),
        ({"--model": "garbage.joblib"}, "not a file written by joblib.dump"),
        ({"--model": "unfitted.joblib"}, "is not fitted; call its fit method before"),
        ({"--model": "exploding.joblib"}, "RuntimeError: the scoring service is down"),
    ],
)
def test_bad_input_is_one_line(files, capsys, change, message):
    opts = {"--model": "mlp.joblib", "--data": "rows.csv", **change}
    argv = ["explain"]
    for key, value in opts.items():
        argv += [key, value if key == "--target" else str(files / value)]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("plm-explain: error:")
    assert message in err
    assert "FrozenEstimator" not in err  # advice for the command line


@pytest.mark.parametrize(
    "args, message",
    [
        (["explain", "--n-jobs", "0"], "argument --n-jobs: 0 jobs cannot run anything"),
        (["explain", "--random-state", "-1"], "argument --random-state: must be"),
        (["demo", "--n-jobs", "0"], "argument --n-jobs: 0 jobs cannot run anything"),
    ],
)
def test_bad_option_values_in_our_words(files, capsys, args, message):
    argv = [
        *args,
        "--model",
        str(files / "mlp.joblib"),
        "--data",
        str(files / "rows.csv"),
    ]
    argv = argv if args[0] == "explain" else args
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.count("\n") == 1 and message in err
    assert "Parallel" not in err  # not joblib's wording


@pytest.mark.parametrize(
    "out, message",
    [
        ("out.txt", "--out must end in .csv or .json"),
        ("no/such/folder/out.csv", "does not exist"),
    ],
)
def test_bad_out_is_refused_before_any_work(files, capsys, tmp_path, out, message):
    # The model file does not even exist: --out is checked first.
    code = main(
        ["explain", "--model", str(tmp_path / "missing.joblib"),
         "--data", str(files / "rows.csv"), "--out", str(tmp_path / out)]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "explained" not in err


def test_demo_plot_without_matplotlib_is_refused_up_front(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code = main(["demo", "--plot", "digits.png"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""  # the demo never started
    assert captured.err.count("\n") == 1
    assert 'pip install "sklearn-plm-explain[plot]"' in captured.err


def test_demo_plot_with_an_unknown_format_is_refused_up_front(capsys):
    pytest.importorskip("matplotlib")
    assert main(["demo", "--plot", "digits.heatmap"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "unknown image format 'heatmap'" in captured.err


def test_lime_output_carries_the_conditions(files, tmp_path):
    out = tmp_path / "lime.csv"
    code = main(
        ["explain", "--model", str(files / "mlp.joblib"),
         "--data", str(files / "rows.csv"), "--method", "lime",
         "--num-samples", "300", "--num-features", "2", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    rows = _read_rows(out)
    # lime's wording with the CSV's own column names, e.g.
    # "petal_length <= 1.60 (+0.1234); sepal_width > 3.30 (-0.0123)".
    for row in rows:
        parts = row["as_list"].split("; ")
        assert len(parts) == 2
        assert all(
            p.split(" ")[0] in HEADER or p.split(" ")[2] in HEADER for p in parts
        )
        assert all(("<" in p) or (">" in p) for p in parts)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "shap"], "invalid choice: 'shap'"),
        (["--model", "missing.joblib"], "model file not found"),
    ],
)
def test_bad_input_in_a_subprocess_has_no_traceback(files, args, message):
    base = {"--model": "mlp.joblib", "--data": "rows.csv"}
    for key, value in zip(args[::2], args[1::2]):
        base[key] = value
    argv = ["explain"]
    for key, value in base.items():
        argv += [key, str(files / value) if key in ("--model", "--data") else value]
    proc = _run(_console_script(), *argv)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert message in proc.stderr


def test_model_help_warns_about_untrusted_files(capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "runs code stored in the file: only use files you trust" in text


@pytest.mark.slow
def test_demo_writes_class_average_heatmaps(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "digits.png"
    proc = _run(
        [sys.executable, "-m", "sklearn_plm_explain._cli"], "demo", "--plot", png
    )
    assert proc.returncode == 0, proc.stderr
    assert "certified exact" in proc.stdout
    import matplotlib.image

    image = matplotlib.image.imread(png)
    # Ten class panels of a diverging map: both reds and blues are present.
    red = (image[..., 0] > 0.6) & (image[..., 2] < 0.4)
    blue = (image[..., 2] > 0.6) & (image[..., 0] < 0.4)
    assert red.sum() > 100 and blue.sum() > 100


def test_model_fitted_on_a_dataframe_gets_its_columns_by_name(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    X, y = load_iris(return_X_y=True)
    frame = pd.DataFrame(X, columns=HEADER)
    model = MLPClassifier((8,), max_iter=2000, random_state=0).fit(frame, y)
    joblib.dump(model, tmp_path / "frame_model.joblib")
    # The CSV lists the columns in another order than the model saw them.
    frame.iloc[:6, ::-1].to_csv(tmp_path / "reordered.csv", index=False)
    out = tmp_path / "out.csv"
    code = main(
        [
            "explain",
            "--model",
            str(tmp_path / "frame_model.joblib"),
            "--data",
            str(tmp_path / "reordered.csv"),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    rows = _read_rows(out)
    assert len(rows) == 6 and list(rows[0])[:4] == HEADER
    assert {r["status"] for r in rows} == {"exact"}
    frame[HEADER[:3]].iloc[:3].to_csv(tmp_path / "short.csv", index=False)
    code = main(
        [
            "explain",
            "--model",
            str(tmp_path / "frame_model.joblib"),
            "--data",
            str(tmp_path / "short.csv"),
        ]
    )
    assert code == 2
    assert "lack the model's column" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["openapi", "lime", "slime"])
def test_regressor_is_explained(files, tmp_path, method):
    out = tmp_path / "reg.csv"
    argv = ["explain", "--model", str(files / "regressor.joblib")]
    argv += ["--data", str(files / "rows.csv"), "--method", method, "--out", str(out)]
    argv += ["--num-samples", "200"] if method != "openapi" else []
    assert main(argv) == 0
    rows = _read_rows(out)
    assert len(rows) == N_ROWS
    assert all(np.isfinite(float(r[h])) for r in rows for h in HEADER)
    if method == "openapi":
        # A linear regression: its local gradient is its coefficient vector.
        model = joblib.load(files / "regressor.joblib")
        got = np.array([[float(r[h]) for h in HEADER] for r in rows])
        np.testing.assert_allclose(got, np.tile(model.coef_, (N_ROWS, 1)), rtol=1e-8)


def test_model_without_probabilities_is_refused(files, tmp_path, capsys):
    from sklearn.svm import LinearSVC

    X, y = load_iris(return_X_y=True)
    joblib.dump(LinearSVC().fit(X, y), tmp_path / "svc.joblib")
    code = main(
        [
            "explain",
            "--model",
            str(tmp_path / "svc.joblib"),
            "--data",
            str(files / "rows.csv"),
        ]
    )
    assert code == 2
    assert "has no predict_proba" in capsys.readouterr().err


def test_a_csv_without_header_is_read_whole_with_no_header(files, tmp_path):
    # Every line is a row: none is taken for column names and dropped.
    outs = []
    for data, extra in (("rows.csv", []), ("headerless.csv", ["--no-header"])):
        out = tmp_path / f"{data}.json"
        argv = ["explain", "--model", str(files / "mlp.joblib"), "--data"]
        argv += [str(files / data), "--out", str(out), "--random-state", "0"]
        assert main(argv + extra) == 0
        outs.append(Explanation.from_dict(json.loads(out.read_text())))
    with_header, without = outs
    assert len(without) == N_ROWS
    np.testing.assert_array_equal(without.values, with_header.values)
    assert list(without.feature_names) == ["x0", "x1", "x2", "x3"]
