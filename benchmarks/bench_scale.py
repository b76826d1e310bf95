"""OpenAPIExplainer at scale: width, memory, parallel throughput, alternatives.

Measures what the scale work promises (O(d²) own work per row, bounded
memory, parallel chunks) on ReLU networks ``MLPClassifier((256, 128))`` with
C = 10 classes, one BLAS thread for the whole run:

1. data and models: digits (8 x 8, d = 64) and digits upsampled to 28 x 28
   with ``scipy.ndimage.zoom`` (d = 784, an MNIST stand-in made by code, as
   in ``bench_paper.py``); ``make_classification`` with 10 classes,
   standardised, for d = 256 and 2048. Fits are kept cheap (``--fit-iter``
   epochs); the explained rows are test rows;
2. per width: *our own* CPU time per row (CPU time of ``explain`` minus the
   CPU time spent inside the model's ``predict_proba``, measured by a wrapper
   that also counts the points), the model's time, their ratio, queries /
   (d + 2), statuses and wrong rows against ``local_linear_model``
   ("wrong" = a certified row whose error, the worst class's relative L1
   error of the decision features, exceeds its ``error_bound``, or an
   ``exact`` row above ``rtol``); and the growth exponent of our own time
   per row between the smallest and the largest width above 64;
3. memory: peak RSS (``VmHWM``; ``ru_maxrss`` where there is no ``/proc``)
   of a fresh subprocess that fits its own d = 256 model and explains 1,000
   and 20,000 rows in one ``explain`` call (which holds every row's results),
   through ``explain_chunked`` (chunks of 200 rows, each saved to a file
   as it comes and not kept), and through ``plm-explain explain`` (which writes each
   finished chunk to its CSV output; the model and the CSV file are written
   by another process first, so that the command's process does nothing
   else), under an address-space cap
   (``--memory-cap-gb``) so that a run that does not bound its memory fails
   with ``MemoryError`` instead of exhausting the machine; ``ru_maxrss``
   would count the parent's pages copied at the fork. Each process also
   restarts its peak (``/proc/self/clear_refs``) once the data are made and
   the model fitted, and reads the peak of the explaining alone;
4. ``n_jobs=2`` against ``n_jobs=1`` at d = 784: wall-time throughput
   (``bench_parallel.py``'s timer) and whether the results are identical,
   on 300 rows (at 100 a call lasts about a second, and its fixed costs and
   this VM's moments move the ratio from 1.45 to 1.92);
5. side by side at d = 64 and 784: ours and central finite differences of
   the log-probabilities (2d queries, ``bench_openapi.py``'s ``zoo``) on
   ``--side-rows`` rows, each after one untimed run on other rows, then
   timed in turn ``--side-repeats`` times (medians, and the ratio pair by
   pair); every timed call starts from a collected heap (``gc.collect()``),
   so that it pays the full collections its own allocations trigger, not
   those that the objects of earlier methods left pending;
   ``shap.KernelExplainer`` (background: 10 k-means centres, its default
   ``nsamples``) and lime's default ``explain_instance`` (the target class's
   label, all else default) on the first ``--side-slow-rows`` of them. CPU time per row includes the model's;
   queries per row are the points each method sent the model (ours: its
   ``n_queries``; central differences: 2d; shap and lime: counted);
   errors are relative L1 errors of each method's weights, as given, against
   the true decision features of the predicted class (lime and shap give
   attributions, not slopes, so theirs measure how far they are from the
   local model, not a rounding error), and the overlap of their top 10
   features by magnitude with the truth's;
5b. the floor of our own time at d = 784: writing a group's points and the
   three products with the basis that fit them, timed alone per row, the
   model's time for the same points, and (after section 5) the own time
   that lime's time over 100 leaves; and lime's time over the model's for
   d + 2 points per row, the most that any certified method could reach;
6. ``StableLIMEExplainer`` at d = 784 (continuous sampling): own time against
   the model's;
7. the first radius: mean queries per row for ``init_radius`` from 5e-5 to
   2e-4 at every width (the sweep behind the default).

A table of the targets of the scale work closes the report. ``--explainer-kwargs``
(JSON) is passed to every ``OpenAPIExplainer`` (e.g. ``'{"batch_size":
"auto"}'``), ``--slime-kwargs`` to ``StableLIMEExplainer``.

Benchmark-only dependencies: ``lime`` and ``shap`` (section 5).

Usage::

    python benchmarks/bench_scale.py [--quick]
        [--sections data widths memory jobs side floor slime radii]
        [--widths 64 256 784 2048] [--rows 200 200 50 5]
        [--memory-rows 1000 20000] [--jobs-rows 300] [--side-rows 100]
        [--side-slow-rows 10] [--side-repeats 7]
        [--slime-rows 20] [--explainer-kwargs JSON]
"""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from importlib.metadata import version

import numpy as np
from _lime_models import TimedModel, header, limit_blas, table
from bench_openapi import zoo
from bench_paper import digits
from bench_parallel import timed
from bench_precision import CERTIFIED, errors
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from sklearn_plm_explain import (
    OpenAPIExplainer,
    StableLIMEExplainer,
    decision_features,
    local_linear_model,
)

SECTIONS = ("data", "widths", "memory", "jobs", "side", "floor", "slime", "radii")
# The digits test split whole; at d = 784 a 40-row call (the own-time target).
DEFAULT_ROWS = {64: 360, 256: 200, 784: 40, 2048: 10}
QUICK = {
    "rows": {64: 20, 256: 10, 784: 3, 2048: 1},
    "memory_rows": [100, 300],
    "jobs_rows": 4,
    "side_rows": 2,
    "side_slow_rows": 2,
    "side_repeats": 2,
    "slime_rows": 2,
}
N_TRAIN_GENERATED = 1000
# Rows per chunk of explain_chunked in the memory section, as plm-explain's
# default --chunk-size (results of about 5.5 MB at d = 256; a loop holds the
# last chunk while the next is explained, so two chunks' results at most).
CHUNK_ROWS = 200
# Rows per chunk of explain_chunked with n_jobs=2 in the jobs section (six
# chunks of the default 300 rows).
JOBS_CHUNK_ROWS = 50
TITLES = {
    "widths": "2. Time, queries and exactness per width",
    "memory": "3. Peak RSS of a fresh process at d = 256 (its own data and model)",
    "jobs": "4. n_jobs=2 against n_jobs=1 at d = 784 (wall time)",
    "side": "5. Side by side (CPU time per row, the model's included)",
    "floor": "5b. The least own time per row at d = 784: its fixed parts alone",
    "slime": "6. StableLIMEExplainer at d = 784, continuous",
    "radii": "7. First radius: mean queries per row / (d + 2) by init_radius",
}


class CPUTimedModel(TimedModel):
    """``TimedModel`` on the CPU clock, which other load does not inflate."""

    def __call__(self, X):
        start, before = time.process_time(), self.seconds
        out = super().__call__(X)  # counts the points
        self.seconds = before + time.process_time() - start
        return out


# -- data and models -------------------------------------------------------------
def generated(d, n_test, seed=0):
    """10 Gaussian classes in d dimensions, standardised on the training part."""
    X, y = make_classification(
        n_samples=N_TRAIN_GENERATED + n_test,
        n_features=d,
        n_informative=min(d // 2, 32),
        n_redundant=0,
        n_classes=10,
        n_clusters_per_class=1,
        class_sep=3.0,
        random_state=seed,
    )
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=N_TRAIN_GENERATED, random_state=seed
    )
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def fit_case(d, fit_iter, n_test=500):
    """Data and fitted network of width ``d``, with the fit's cost."""
    if d in (64, 784):
        X_train, X_test, y_train, y_test = digits(8 if d == 64 else 28)
        source = "digits" if d == 64 else "digits zoomed to 28 x 28"
    else:
        X_train, X_test, y_train, y_test = generated(d, n_test)
        source = "make_classification, standardised"
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MLPClassifier((256, 128), max_iter=fit_iter, random_state=0)
        model.fit(X_train, y_train)
    info = {
        "data": source,
        "d": d,
        "train rows": len(X_train),
        "test rows": len(X_test),
        "train acc": f"{model.score(X_train, y_train):.3f}",
        "test acc": f"{model.score(X_test, y_test):.3f}",
        "fit CPU s": f"{time.process_time() - t0:.1f}",
    }
    return {"model": model, "X_train": X_train, "X_test": X_test, "info": info}


class Cases:
    """Fits each width's case once, when a section first needs it."""

    def __init__(self, fit_iter):
        self.fit_iter, self.cases = fit_iter, {}

    def __getitem__(self, d):
        if d not in self.cases:
            self.cases[d] = fit_case(d, self.fit_iter)
        return self.cases[d]


def quiet_explain(explainer, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return explainer.explain(X, **kw)


def cpu_explain(case, X, kwargs):
    """Explain ``X`` through the CPU-timed model: (explanation, total, model)."""
    fn = CPUTimedModel(case["model"].predict_proba)
    explainer = OpenAPIExplainer(fn, random_state=0, **kwargs).fit(case["X_train"])
    # The fit's queries: one telling the number of classes, and with
    # init_radius="auto" those of its calibration rows.
    fit_points = fn.points
    fn.reset()
    c0, w0 = time.process_time(), time.perf_counter()
    e = quiet_explain(explainer, X)
    total, wall = time.process_time() - c0, time.perf_counter() - w0
    times = {"cpu": total, "model": fn.seconds, "wall": wall, "points": fn.points}
    return e, times | {"fit points": fit_points}


# -- 2. widths -------------------------------------------------------------------
def wrong_rows(e, err, rtol):
    certified = np.isin(e.status, CERTIFIED)
    with np.errstate(invalid="ignore"):
        over_bound = certified & ~(err <= e.error_bound)
        over_rtol = (e.status == "exact") & ~(err <= rtol)
    return over_bound | over_rtol


def width_row(case, n_rows, kwargs):
    X = case["X_test"][:n_rows]
    d = X.shape[1]
    e, t = cpu_explain(case, X, kwargs)
    err = errors(e, case["model"], X)
    rtol = OpenAPIExplainer(**kwargs).rtol
    certified = np.isin(e.status, CERTIFIED)
    q = e.n_queries / (d + 2)
    own = (t["cpu"] - t["model"]) / len(X)
    # The same rows again: the steady state, without the process's first use
    # of this width's memory (same queries and results).
    _, t2 = cpu_explain(case, X, kwargs)
    row = {
        "d": d,
        "rows": len(X),
        "own ms/row": 1e3 * own,
        "model ms/row": 1e3 * t["model"] / len(X),
        "own / model": (t["cpu"] - t["model"]) / t["model"],
        "own / model, again": (t2["cpu"] - t2["model"]) / t2["model"],
        "wall ms/row": 1e3 * t["wall"] / len(X),
        "queries/(d+2) mean": q.mean(),
        "queries/(d+2) median": np.median(q),
        "queries/(d+2) max": q.max(),
        "fit queries/(d+2)": t["fit points"] / (d + 2),
        "model points/(d+2)": t["points"] / len(X) / (d + 2),
        "exact": int((e.status == "exact").sum()),
        "approximate": int((e.status == "approximate").sum()),
        "flagged": int((~certified).sum()),
        "wrong": int(wrong_rows(e, err, rtol).sum()),
        "max err (certified)": err[certified].max() if certified.any() else np.nan,
    }
    return row, own


def section_widths(cases, widths, rows, kwargs, checks):
    out, own = [], {}
    for d, n in zip(widths, rows):
        row, own[d] = width_row(cases[d], n, kwargs)
        out.append(row)
        checks.append(
            (
                f"d = {d}: queries/(d+2) per row <= 1.10 (mean), 0 wrong",
                f"mean {row['queries/(d+2) mean']:.3f} (max "
                f"{row['queries/(d+2) max']:.3f}), {row['wrong']} wrong",
                row["queries/(d+2) mean"] <= 1.10 and row["wrong"] == 0,
            )
        )
        if d == 784:
            checks.append(
                (
                    f"d = 784: own time <= 0.7 x the model's on a {n}-row call",
                    f"{row['own / model']:.2f} x the model's (first call), "
                    f"{row['own / model, again']:.2f} x (the same rows again)",
                    row["own / model"] <= 0.7,
                )
            )
    print(table(list(out[0]), [[fmt(v) for v in r.values()] for r in out]))
    wide = sorted(d for d in own if d > 64)
    if len(wide) >= 2:
        lo, hi = wide[0], wide[-1]
        exponent = np.log(own[hi] / own[lo]) / np.log(hi / lo)
        print(
            f"\nGrowth of our own time per row from d = {lo} to {hi}: "
            f"x{own[hi] / own[lo]:.1f}, exponent {exponent:.2f}"
        )
        checks.append(
            (
                f"growth exponent of own time, d = {lo} to {hi}, <= 2.2",
                f"{exponent:.2f}",
                exponent <= 2.2,
            )
        )


# -- 3. memory -------------------------------------------------------------------
def peak_rss_mb():
    """This process's peak RSS in MB.

    On Linux ``ru_maxrss`` keeps, across ``exec``, the RSS of the process
    that forked it (its copy of the parent's pages), so a child started from
    a large benchmark would report the parent's size; the high-water mark of
    its own address space (``VmHWM``) does not.
    """
    try:
        with open("/proc/self/status") as f:
            hwm = next(line for line in f if line.startswith("VmHWM:"))
        return int(hwm.split()[1]) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def restart_peak():
    """Start this process's peak RSS again from its current RSS (Linux's
    ``clear_refs``), so that the next reading is the peak of what follows;
    False where that cannot be done."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memory_child(n_rows, kwargs, fit_iter, cap_gb, way, folder=None):
    """Runs in a fresh process: prints its peak RSS as JSON.

    ``way="call"``: one ``explain`` call holding every row's results;
    ``way="chunks"``: ``explain_chunked``, each chunk's arrays saved to an
    ``.npz`` file in ``folder`` as it comes and not kept;
    ``way="files"``: writes the model and a CSV of the rows into ``folder``
    (for ``"cli"``); ``way="cli"``: ``plm-explain explain`` on those files,
    which writes each finished chunk to its CSV output and keeps no results
    (this process does nothing else, so its peak is the command's).
    """
    cap = int(cap_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    blas = limit_blas(1)  # noqa: F841 - keeps the limit for the process
    if way == "cli":
        return memory_child_cli(folder, kwargs)
    case = fit_case(256, fit_iter, n_test=n_rows)
    if way == "files":
        return write_cli_files(case, folder)
    explainer = OpenAPIExplainer(case["model"], random_state=0, **kwargs)
    explainer.fit(case["X_train"])
    before = peak_rss_mb()
    # The data's generation peaks above the rows it keeps: the peak of the
    # explaining alone is read too.
    gc.collect()
    restarted = restart_peak()
    t0 = time.perf_counter()
    try:
        if way == "chunks":
            rows, result, statuses = chunks_to_files(explainer, case["X_test"], folder)
        else:
            e = quiet_explain(explainer, case["X_test"])
            rows, result = len(e), sum(getattr(e, f).nbytes for f in e.fields)
            statuses = e.status_counts()
    except MemoryError:
        print(json.dumps({"error": f"MemoryError under the {cap_gb:g} GB cap"}))
        return
    seconds = time.perf_counter() - t0
    during = peak_rss_mb()
    print(
        json.dumps(
            {
                "rows": rows,
                "peak MB": max(before, during),
                "peak before explain MB": before,
                "peak of explain MB": during if restarted else float("nan"),
                "result MB": result / 2**20,
                "wall s": seconds,
                "statuses": {k: int(v) for k, v in sorted(statuses.items())},
            }
        )
    )


def chunks_to_files(explainer, X, folder):
    """``explain_chunked`` as a user with more rows than memory runs it: each
    chunk's arrays saved to a file of its own as it comes, nothing kept."""
    from collections import Counter

    rows, size, statuses = 0, 0, Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        chunks = explainer.explain_chunked(X, chunk_size=CHUNK_ROWS)
        for i, part in enumerate(chunks):
            arrays = {f: getattr(part, f) for f in part.fields}
            arrays["status"] = arrays["status"].astype(str)
            np.savez(os.path.join(folder, f"chunk-{i:05d}.npz"), **arrays)
            size += sum(a.nbytes for a in arrays.values())
            rows += len(part)
            statuses.update(part.status_counts())
    return rows, size, statuses


def write_cli_files(case, folder):
    import csv

    import joblib

    joblib.dump(case["model"], os.path.join(folder, "m.joblib"))
    X = case["X_test"]
    with open(os.path.join(folder, "x.csv"), "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([f"x{j}" for j in range(X.shape[1])])
        writer.writerows(map(repr_row, X))
    print(json.dumps({"rows": len(X)}))


def memory_child_cli(folder, kwargs):
    """The command line on the files of ``write_cli_files``."""
    import csv
    from collections import Counter

    from sklearn_plm_explain._cli._parser import main

    if kwargs:
        raise SystemExit("--explainer-kwargs does not reach the command line")
    model, data, out = (os.path.join(folder, n) for n in ("m.joblib", "x.csv", "o.csv"))
    before = peak_rss_mb()
    gc.collect()
    restarted = restart_peak()
    t0 = time.perf_counter()
    code = main(["explain", "--model", model, "--data", data, "--out", out])
    seconds = time.perf_counter() - t0
    during = peak_rss_mb()
    peak = max(before, during)
    with open(out, newline="") as fh:
        statuses = Counter(row["status"] for row in csv.DictReader(fh))
    print(
        json.dumps(
            {
                "rows": sum(statuses.values()),
                "peak MB": peak,
                "peak before explain MB": before,
                "peak of explain MB": during if restarted else float("nan"),
                "result MB": os.path.getsize(out) / 2**20,
                "wall s": seconds,
                "statuses": dict(sorted(statuses.items())),
                "error": "-" if code == 0 else f"exit code {code}",
            }
        )
    )


def run_memory_child(way, n, args, folder):
    cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", str(n)]
    cmd += ["--memory-way", way, "--memory-folder", folder]
    if way in ("call", "chunks"):
        cmd += ["--explainer-kwargs", args.explainer_kwargs]
    cmd += ["--fit-iter", str(args.fit_iter)]
    cmd += ["--memory-cap-gb", str(args.memory_cap_gb)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return {"error": f"exit code {done.returncode}: {last}"}
    return json.loads(lines[-1])


def repr_row(row):
    return [repr(float(v)) for v in row]


def section_memory(memory_rows, args, checks):
    import tempfile

    out = []
    hows = {
        "call": "explain(X)",
        "chunks": f"explain_chunked(X, chunk_size={CHUNK_ROWS}), to files",
        "cli": "plm-explain, CSV out",
    }
    for way in hows:
        for n in memory_rows:
            with tempfile.TemporaryDirectory() as folder:
                steps = ["files", way] if way == "cli" else [way]
                for step in steps:
                    result = run_memory_child(step, n, args, folder)
            out.append(result | {"requested rows": n, "how": hows[way], "way": way})
    cols = ["how", "requested rows", "peak MB", "peak before explain MB"]
    cols += ["peak of explain MB", "result MB", "wall s", "statuses", "error"]
    print(table(cols, [[fmt(r.get(c, "-")) for c in cols] for r in out]))
    print(
        "\n'peak MB': the process's peak RSS; 'peak before explain MB': its peak "
        "before the rows are explained (the data made and the model fitted; "
        "for plm-explain, started); 'peak of explain MB': the peak from there "
        "on, the RSS at that moment included. 'result MB': the Explanation's "
        "arrays (explain), the arrays written to .npz files (explain_chunked), "
        "the CSV file written (plm-explain)."
    )
    peak = {(r["way"], r["requested rows"]): r.get("peak MB", np.nan) for r in out}
    small, large = memory_rows
    # Against the smallest peak of any way at the smaller size: the strictest.
    base = min(peak[w, small] for w in hows)
    ratios = {w: peak[w, large] / base for w in hows}
    own = {w: peak[w, large] / peak[w, small] for w in hows}
    print(
        f"\nPeak RSS, {large} rows against the smallest peak for {small} "
        f"({base:.0f} MB): "
        + "; ".join(
            f"{hows[w]} {ratios[w]:.2f} (against itself {own[w]:.2f})" for w in hows
        )
    )
    during = {
        (r["way"], r["requested rows"]): r.get("peak of explain MB", np.nan)
        for r in out
    }
    print(
        f"Peak of the explaining alone, {large} rows against {small}: "
        + "; ".join(
            f"{hows[w]} {during[w, large] / during[w, small]:.2f}" for w in hows
        )
    )
    bounded = [
        w for w in ("chunks", "cli") if peak[w, large] <= 1024 and ratios[w] <= 1.3
    ]
    checks.append(
        (
            f"{large} rows at d = 256: peak RSS <= 1 GB and <= 1.3 x the peak for {small}",
            "; ".join(
                f"{hows[w]}: {peak[w, large]:.0f} MB, {ratios[w]:.2f}" for w in hows
            ),
            bounded == ["chunks", "cli"],
        )
    )


# -- 4. n_jobs -------------------------------------------------------------------
def section_jobs(case, n_rows, kwargs, checks):
    X = case["X_test"][:n_rows]
    explainer = OpenAPIExplainer(case["model"], random_state=0, **kwargs)
    explainer.fit(case["X_train"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # Best of three: a single parallel run on this VM moves by 20 %.
        t1, e1 = timed(explainer, X, 1, repeats=3)
        t2, e2 = timed(explainer, X, 2, repeats=3)
        # The same rows a chunk at a time, the chunks sharing their workers.
        tc = chunked_seconds(explainer, X, JOBS_CHUNK_ROWS, repeats=3)
    identical = bool(np.array_equal(e1.status, e2.status))
    cols = ["d", "rows", "n_jobs=1 rows/s", "n_jobs=2 rows/s", "speed-up"]
    cols += [f"n_jobs=2, chunks of {JOBS_CHUNK_ROWS}: speed-up"]
    cols += ["identical statuses", "max rel L1 diff of values"]
    cols += ["fields not bitwise identical"]
    speedup = t1 / t2
    gap = np.abs(e1.values - e2.values).sum(1) / np.abs(e1.values).sum(1)
    differ = [
        f for f in e1.fields if not np.array_equal(getattr(e1, f), getattr(e2, f))
    ]
    row = [X.shape[1], len(X), len(X) / t1, len(X) / t2, speedup, t1 / tc, identical]
    row += [gap.max()]
    print(table(cols, [[fmt(v) for v in row] + [", ".join(differ) or "none"]]))
    checks.append(
        (
            f"d = {X.shape[1]}: n_jobs=2 >= 1.7 x the throughput of n_jobs=1, "
            "every field bitwise identical",
            f"{speedup:.2f} x, fields not identical: {', '.join(differ) or 'none'}",
            speedup >= 1.7 and not differ,
        )
    )


def chunked_seconds(explainer, X, chunk_size, repeats):
    """Best wall time of ``explain_chunked`` over ``X`` with the explainer's
    ``n_jobs`` (the pool warmed by ``timed`` before)."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for part in explainer.explain_chunked(X, chunk_size=chunk_size):
            del part
        best = min(best, time.perf_counter() - t0)
    return best


# -- 5. side by side -------------------------------------------------------------
def shap_weights(case, X, targets, predict):
    import shap

    explainer = shap.KernelExplainer(predict, shap.kmeans(case["X_train"], 10))
    values = explainer.shap_values(X, silent=True)  # (n, d, C)
    return values[np.arange(len(X)), :, targets]


def lime_weights_default(case, X, targets, predict):
    from lime.lime_tabular import LimeTabularExplainer as Lime

    explainer = Lime(case["X_train"], random_state=0)
    W = np.zeros_like(X)
    for i, (x, c) in enumerate(zip(X, targets)):
        e = explainer.explain_instance(x, predict, labels=(c,))
        for j, v in e.as_map()[c]:
            W[i, j] = v
    return W


def fd_weights(case, X, targets):
    return np.array([zoo(case["model"], x, c)[0] for x, c in zip(X, targets)])


def cpu_seconds(fn, *args):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, time.process_time() - c0, time.perf_counter() - w0


class GCPauses:
    """CPU seconds and count of the interpreter's full (generation 2)
    garbage collections while active: in a process holding shap's and lime's
    objects one costs tens of ms, a single timed call of either method may
    pay it, and the table says which did."""

    def __enter__(self):
        self.seconds, self.full, self._start = 0.0, 0, None
        gc.callbacks.append(self._hook)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self._hook)

    def _hook(self, phase, info):
        if phase == "start":
            self._start = time.process_time()
        elif self._start is not None:
            self.seconds += time.process_time() - self._start
            self.full += info["generation"] == 2


def top_overlap(W, truth, k=10):
    top = np.argsort(-np.abs(W), axis=1)[:, :k]
    top_truth = np.argsort(-np.abs(truth), axis=1)[:, :k]
    return np.mean([len(set(a) & set(b)) / k for a, b in zip(top, top_truth)])


def gc_note(pauses):
    """The full collections a timed call paid, if any, for its note."""
    if not pauses.full:
        return ""
    return f"; {pauses.full} full gc ({1e3 * pauses.seconds:.0f} ms)"


def timed_call(fn, *args):
    """``fn(*args)`` timed from a collected heap: the full collections a
    timed call pays are then those its own allocations trigger, not those
    the objects of the methods timed before it left pending (lime's and
    shap's, about 245,000, cost 40-90 ms per full collection); returns
    ``(out, cpu, wall, pauses)``."""
    gc.collect()
    with np.errstate(all="ignore"), GCPauses() as pauses:
        out, cpu, wall = cpu_seconds(fn, *args)
    return out, cpu, wall, pauses


def side_rows(case, n_rows, n_slow, kwargs, repeats):
    """Ours and central differences on ``n_rows`` rows, timed in turn
    ``repeats`` times (ours, theirs, ours, ...; the ratio taken pair by
    pair, so that it holds while the machine's speed drifts); shap and lime
    once on the first ``n_slow`` of them. Ours and central differences first
    run once, untimed, on other rows (the first calls of a process pay for
    its first use of memory)."""
    X = case["X_test"][:n_rows]
    warm = case["X_test"][n_rows : 2 * n_rows]
    model = case["model"]
    targets = model.predict_proba(X).argmax(axis=1)
    W, _ = local_linear_model(model, X)
    truth = decision_features(W, targets)
    fn = CPUTimedModel(model.predict_proba)
    explainer = OpenAPIExplainer(fn, random_state=0, **kwargs).fit(case["X_train"])
    quiet_explain(explainer, warm)
    warm_targets = model.predict_proba(warm).argmax(axis=1)
    with np.errstate(all="ignore"):
        fd_weights(case, warm, warm_targets)
    n = len(X)
    ours, fd, own, gcs = [], [], [], []
    for _ in range(repeats):
        fn.reset()
        e, cpu, wall, pauses = timed_call(quiet_explain, explainer, X)
        ours.append((cpu, wall))
        own.append(cpu - fn.seconds)
        fd_values, fd_cpu, fd_wall, fd_pauses = timed_call(fd_weights, case, X, targets)
        fd.append((fd_cpu, fd_wall))
        gcs.append((pauses.full, fd_pauses.full))
    pair = np.array([b[0] / a[0] for a, b in zip(ours, fd)])
    cpu, wall = np.median(ours, axis=0)
    methods = {
        "OpenAPIExplainer (ours)": {
            "values": e.values,
            "cpu": cpu,
            "wall": wall,
            "rows": n,
            "queries": e.n_queries.mean(),
            "note": f"own {1e3 * np.median(own) / n:.2f} ms/row; "
            + ", ".join(f"{k} {v}" for k, v in e.status_counts().items())
            + f"; median of {repeats}"
            + full_gc_note([g[0] for g in gcs]),
        },
        "central differences (2d queries)": {
            "values": fd_values,
            "cpu": np.median(fd, axis=0)[0],
            "wall": np.median(fd, axis=0)[1],
            "rows": n,
            "queries": 2.0 * X.shape[1],
            "ratio": np.median(pair),
            "note": f"median of {repeats}; its time / ours pair by pair "
            f"{pair.min():.2f}-{pair.max():.2f}" + full_gc_note([g[1] for g in gcs]),
        },
    }
    for name, slow_fn in [
        ("shap KernelExplainer", shap_weights),
        ("lime explain_instance (default)", lime_weights_default),
    ]:
        # The points each asks the model for, counted (a few microseconds per
        # call, within the timing).
        counted = TimedModel(model.predict_proba)
        values, cpu, wall, pauses = timed_call(
            slow_fn, case, X[:n_slow], targets[:n_slow], counted
        )
        methods[name] = {"values": values, "cpu": cpu, "wall": wall, "rows": n_slow}
        methods[name]["queries"] = counted.points / n_slow
        methods[name]["note"] = gc_note(pauses).lstrip("; ")
    ours_cpu = methods["OpenAPIExplainer (ours)"]["cpu"] / n
    out = []
    for name, m in methods.items():
        k = m["rows"]
        rel = np.abs(m["values"] - truth[:k]).sum(1) / np.abs(truth[:k]).sum(1)
        out.append(
            {
                "d": X.shape[1],
                "method": name,
                "rows": k,
                "CPU ms/row": 1e3 * m["cpu"] / k,
                "wall ms/row": 1e3 * m["wall"] / k,
                "queries/row": m["queries"],
                "rel L1 median": np.median(rel),
                "rel L1 max": rel.max(),
                "top-10 overlap": top_overlap(m["values"], truth[:k]),
                "its time / ours": m.get("ratio", (m["cpu"] / k) / ours_cpu),
                "note": m.get("note", ""),
            }
        )
    err = errors(e, model, X)
    wrong = int(wrong_rows(e, err, OpenAPIExplainer(**kwargs).rtol).sum())
    return out, wrong, pair


def full_gc_note(counts):
    """How many of the timed calls paid a full collection, if any did."""
    paid = sum(c > 0 for c in counts)
    return f"; {paid} of {len(counts)} calls paid a full gc" if paid else ""


def section_side(cases, n_rows, n_slow, kwargs, repeats, checks):
    out = []
    for d in (64, 784):
        rows, wrong, pair = side_rows(cases[d], n_rows, n_slow, kwargs, repeats)
        out += rows
        ratio = {r["method"]: r["its time / ours"] for r in rows}
        fd, shap_, lime = list(ratio.values())[1:]
        SIDE_CPU[d] = {r["method"]: r["CPU ms/row"] for r in rows}
        checks.append(
            (
                f"d = {d}: ours faster per row than central differences (in every "
                "timed pair), >= 100 x faster than lime and shap, 0 wrong",
                f"x{fd:.2f} (FD, median; {pair.min():.2f}-{pair.max():.2f} over "
                f"{len(pair)} pairs), x{shap_:.0f} (shap), x{lime:.0f} (lime), "
                f"{wrong} wrong",
                pair.min() > 1 and shap_ >= 100 and lime >= 100 and wrong == 0,
            )
        )
    print(table(list(out[0]), [[fmt(v) for v in r.values()] for r in out]))


# -- 5b. the floor of our own time ------------------------------------------------
# CPU ms per row of each method in the side-by-side section, by width.
SIDE_CPU = {}


def section_floor(case, repeats=7):
    """What no search of d + 7 points per row can avoid at d = 784, timed
    alone with the package's own functions: writing a row's points (its
    design's basis columns with signs and steps, plus the row) and the three
    products with the basis that fit a group's rows and give their residuals
    (the first solve, its refinement, the fitted responses), per row of a
    group of ``rows_per_group`` rows. Against them, the model's own time for
    the same points, and the 100-fold target against lime: lime's CPU time
    per row in section 5 over 100, less the model's time, is the own time
    it leaves. Last, the model's time for d + 2 points per row, the fewest
    that fix an affine model and test it once: lime's time over it is the
    largest ratio that any certified method could reach, with no time of
    its own."""
    from sklearn_plm_explain._openapi._design import (
        _basis,
        exact_first_solve,
        orthogonal_design,
    )
    from sklearn_plm_explain._openapi._groups import rows_per_group
    from sklearn_plm_explain._utils._products import prod, t_prod

    d, C, k = 784, 10, 5  # classes; n_witnesses of the default explainer
    n = d + k
    R = rows_per_group(d, k, C)
    X = case["X_test"][:R]
    basis, F = _basis(n, exact=True)[0], exact_first_solve(n)
    rng = np.random.default_rng(0)
    pts = np.empty((R, n, d))
    step = np.full(d, 2.0**-14)
    W = rng.standard_normal((n, R * C))
    model = case["model"]

    def points():
        for r in range(R):
            orthogonal_design(rng, n, d, out=pts[r], scale=step, exact=True)
            pts[r] += X[r]

    def products():
        t_prod(F, W)
        t_prod(basis, W)
        prod(basis, W)

    def model_time():
        model.predict_proba(pts.reshape(-1, d))

    # d + 2 points per row: the fewest that fix an affine model (d + 1) and
    # test it once; no certified method asks for fewer.
    fewest = np.empty((R, d + 2, d))

    def model_fewest():
        model.predict_proba(fewest.reshape(-1, d))

    parts = {
        "points": points,
        "three products": products,
        "model": model_time,
        "model, d + 2 points": model_fewest,
    }
    points()
    fewest[:] = pts[:, : d + 2]
    ms = {}
    for name, fn in parts.items():
        fn()
        times = []
        for _ in range(repeats):
            t0 = time.process_time()
            fn()
            times.append(time.process_time() - t0)
        ms[name] = np.median(times) / R * 1e3
    floor = ms["points"] + ms["three products"]
    rows = [["rows per group", R, ""]]
    rows += [[f"{name}, ms/row", f"{v:.3g}", ""] for name, v in ms.items()]
    rows.append(["points + products, ms/row", f"{floor:.3g}", "the floor"])
    lime = SIDE_CPU.get(784, {}).get("lime explain_instance (default)")
    if lime is not None:
        leaves = lime / 100 - ms["model"]
        rows.append(["lime's CPU ms/row (section 5) / 100", f"{lime / 100:.3g}", ""])
        rows.append(
            ["own ms/row the 100-fold target leaves", f"{leaves:.3g}", "vs the floor"]
        )
        rows.append(
            [
                "largest lime / ours possible",
                f"{lime / (ms['model'] + floor):.0f}",
                "model + floor",
            ]
        )
        rows.append(
            [
                "largest lime / any certified method",
                f"{lime / ms['model, d + 2 points']:.0f}",
                "the model alone, d + 2 points",
            ]
        )
    print(table(["part", "value", "note"], rows))


# -- 6. S-LIME -------------------------------------------------------------------
def section_slime(case, n_rows, kwargs, checks):
    X = case["X_test"][:n_rows]
    fn = CPUTimedModel(case["model"].predict_proba)
    params = {"discretize_continuous": False, "random_state": 0} | kwargs
    explainer = StableLIMEExplainer(fn, **params).fit(case["X_train"])
    cols = ["call", "d", "rows", "own ms/row", "model ms/row", "own / model"]
    cols += ["wall ms/row", "model points/row", "converged"]
    rows, ratios = [], []
    # The first call of a process also pays for its first use of memory
    # (page faults of a fresh VM cost tens of microseconds each here); the
    # second call, same rows and same results, shows the steady state.
    for call in ("first", "second"):
        fn.reset()
        e, cpu, wall = cpu_seconds(quiet_explain, explainer, X)
        own = cpu - fn.seconds
        ratios.append(own / fn.seconds)
        row = [call, X.shape[1], len(X), 1e3 * own / len(X)]
        row += [1e3 * fn.seconds / len(X), own / fn.seconds, 1e3 * wall / len(X)]
        row += [fn.points / len(X), f"{int((~e.flagged).sum())}/{len(X)}"]
        rows.append([fmt(v) for v in row])
    print(table(cols, rows))
    checks.append(
        (
            f"S-LIME at d = {X.shape[1]} (continuous): own time <= the model's",
            f"{ratios[0]:.2f} x the model's (first call), {ratios[1]:.2f} x (second)",
            ratios[1] <= 1.0,
        )
    )


# -- 7. first radius -------------------------------------------------------------
RADII = (5e-5, 6e-5, 7e-5, 8e-5, 9e-5, 1e-4, 2e-4)


def section_radii(cases, widths, rows):
    """The sweep behind the default ``init_radius``: mean queries per row on
    each width's benchmark rows, and (in brackets) on as many rows after them
    (fewer where the test split ends)."""
    cols = ["init_radius"] + [f"d = {d}" for d in widths]
    out = []
    for r in RADII:
        line = [f"{r:g}"]
        for d, n in zip(widths, rows):
            case = cases[d]
            cells = []
            for lo, hi in ((0, n), (n, min(2 * n, len(case["X_test"])))):
                X = case["X_test"][lo:hi]
                if not len(X):
                    continue
                e, _ = cpu_explain(case, X, {"init_radius": r})
                cells.append(f"{(e.n_queries / (d + 2)).mean():.3f}")
            line.append(cells[0] + (f" ({cells[1]})" if len(cells) > 1 else ""))
        out.append(line)
    print(table(cols, out))


# -- report ----------------------------------------------------------------------
def fmt(v):
    if isinstance(v, (bool, np.bool_, str, dict)):
        return str(v)
    if isinstance(v, (int, np.integer)):
        return str(v)
    if v is None or np.isnan(v):
        return "-"
    if v == 0:
        return "0"
    return f"{v:.3g}" if 1e-2 <= abs(v) < 1e5 else f"{v:.1e}"


def print_header():
    print(header("OpenAPIExplainer at scale"))
    extra = []
    for dist in ("shap", "tqdm"):
        try:
            extra.append(f"{dist} {version(dist)}")
        except Exception:  # noqa: BLE001 - report whatever is missing
            extra.append(f"{dist}: not installed")
    print(f"- also: {', '.join(extra)}")
    print(f"- load average at the start: {os.getloadavg()}")


def needed_widths(args):
    """The widths whose models the selected sections use, in order."""
    widths = set(args.widths) if {"data", "widths"} & set(args.sections) else set()
    if {"jobs", "slime", "floor"} & set(args.sections):
        widths.add(784)
    if "side" in args.sections:
        widths |= {64, 784}
    return sorted(widths)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=SECTIONS)
    parser.add_argument("--quick", action="store_true", help="smoke run, ~2 minutes")
    parser.add_argument("--widths", nargs="+", type=int, default=[64, 256, 784, 2048])
    parser.add_argument(
        "--rows", nargs="+", type=int, help="rows per width (default 360 200 40 10)"
    )
    parser.add_argument("--memory-rows", nargs=2, type=int, default=[1000, 20000])
    parser.add_argument("--memory-cap-gb", type=float, default=8.0)
    parser.add_argument("--jobs-rows", type=int, default=300)
    parser.add_argument("--side-rows", type=int, default=100)
    parser.add_argument("--side-slow-rows", type=int, default=10)
    parser.add_argument("--side-repeats", type=int, default=7)
    parser.add_argument("--slime-rows", type=int, default=20)
    parser.add_argument("--fit-iter", type=int, default=10, help="training epochs")
    parser.add_argument("--explainer-kwargs", default="{}", help="JSON")
    parser.add_argument("--slime-kwargs", default="{}", help="JSON")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--memory-way", default="call", help=argparse.SUPPRESS)
    parser.add_argument("--memory-folder", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rows is not None and len(args.rows) != len(args.widths):
        parser.error("--rows needs one count per width")
    defaults = QUICK["rows"] if args.quick else DEFAULT_ROWS
    if args.quick or args.rows is None:
        args.rows = [defaults.get(d, defaults[784]) for d in args.widths]
    if args.quick:
        keys = (
            "memory_rows",
            "jobs_rows",
            "side_rows",
            "side_slow_rows",
            "side_repeats",
        )
        for key in keys + ("slime_rows",):
            setattr(args, key, QUICK[key])
    return args


def main():
    args = parse_args()
    kwargs = json.loads(args.explainer_kwargs)
    if args.memory_child is not None:
        memory_child(
            args.memory_child,
            kwargs,
            args.fit_iter,
            args.memory_cap_gb,
            args.memory_way,
            args.memory_folder,
        )
        return
    blas = limit_blas(1)  # noqa: F841 - keeps the limit for the run
    print_header()
    cases, checks, start = Cases(args.fit_iter), [], time.perf_counter()
    if "data" in args.sections:
        print("\n### 1. Data and models\n")
        infos = [cases[d]["info"] for d in needed_widths(args)]
        print(table(list(infos[0]), [list(i.values()) for i in infos]))
    # Warm-up: imports and first calls are not the cost of any width.
    warm = OpenAPIExplainer(cases[64]["model"]).fit(cases[64]["X_train"])
    quiet_explain(warm, cases[64]["X_test"][:2])
    plan = {
        "widths": lambda: section_widths(cases, args.widths, args.rows, kwargs, checks),
        "memory": lambda: section_memory(args.memory_rows, args, checks),
        "jobs": lambda: section_jobs(cases[784], args.jobs_rows, kwargs, checks),
        "side": lambda: section_side(
            cases,
            args.side_rows,
            args.side_slow_rows,
            kwargs,
            args.side_repeats,
            checks,
        ),
        "floor": lambda: section_floor(cases[784]),
        "radii": lambda: section_radii(cases, args.widths, args.rows),
        "slime": lambda: section_slime(
            cases[784], args.slime_rows, json.loads(args.slime_kwargs), checks
        ),
    }
    for name in SECTIONS[1:]:
        if name in args.sections:
            t0 = time.perf_counter()
            print(f"\n### {TITLES[name]}\n")
            plan[name]()
            print(f"\n({time.perf_counter() - t0:.0f} s)")
    print("\n### Targets\n")
    rows = [[c, m, "yes" if ok else "NO"] for c, m, ok in checks]
    print(table(["target", "measured", "met"], rows))
    print(
        f"\nTotal {time.perf_counter() - start:.0f} s; load average at the end "
        f"{os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
