"""LIME stability on bc_rf (ANCHORS §1), all methods side by side in one run.

bc_rf, instances ``X_test[0:5]``, each explained with ``random_state``
0..19, label 1, ``num_features=5``. J@k = mean pairwise Jaccard index of the
top-k feature sets over the 190 pairs, averaged over the 5 instances; time =
median wall time per explanation; rows = median points sent to the model per
explanation. Run twice: discretised (lime's default) and continuous sampled
around the instance.

Part ``rule``: S-LIME's stopping rule before and after the indifference
margin, on ``X_test[0:10]`` x 20 seeds (ANCHORS §7): the previous rule
(variance as for independent draws, no margin) side by side with batch-means
variance and margins 0 ... 0.2, with the share of converged explanations.

Part ``variance``: how far each standard error of a LARS step's gap is from
the gap's actual seed-to-seed spread under Sobol' sampling (rows 0, 1 and 5,
20 seeds, 8193 samples): the i.i.d. formula against batch means.

Usage: ``python benchmarks/bench_stability.py [--quick] [--blas-threads N]
[--part all|methods|rule|variance]``
"""

import math
import sys
import time
import warnings
from contextlib import contextmanager, nullcontext

import numpy as np
from _lime_models import TimedModel, bc_rf, blas_args, header, limit_blas, table
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer
from sklearn_plm_explain._lime import _stable as _stable_lime
from sklearn_plm_explain.metrics import jaccard_stability

K = 5
LABEL = 1


def lime_runner(selection, n, disc, around):
    from lime.lime_tabular import LimeTabularExplainer as Lime

    def run(Xtr, x, fn, seed):
        exp = Lime(
            Xtr,
            feature_selection=selection,
            discretize_continuous=disc,
            sample_around_instance=around,
            random_state=seed,
        )
        t = time.perf_counter()
        e = exp.explain_instance(x, fn, labels=(LABEL,), num_features=K, num_samples=n)
        dt = time.perf_counter() - t
        return [f for f, _ in e.as_map()[LABEL]], dt, None

    return run


def reference_slime_runner(disc, around):
    from slime.lime_tabular import LimeTabularExplainer as SLime

    def run(Xtr, x, fn, seed):
        exp = SLime(
            Xtr,
            feature_selection="lasso_path",
            discretize_continuous=disc,
            sample_around_instance=around,
            random_state=seed,
        )
        t = time.perf_counter()
        e = exp.slime(
            x,
            fn,
            labels=(LABEL,),
            num_features=K,
            num_samples=1000,
            n_max=10000,
            alpha=0.05,
        )
        dt = time.perf_counter() - t
        return [f for f, _ in e.as_map()[LABEL]], dt, fn.last_n == 10000

    return run


def ours_runner(kind, disc, around, order="selection", sampling="qmc"):
    def run(Xtr, x, fn, seed):
        if kind == "slime":
            est = StableLIMEExplainer(
                fn,
                num_features=K,
                num_samples=1000,
                n_max=10000,
                alpha=0.05,
                discretize_continuous=disc,
                sample_around_instance=around,
                sampling=sampling,
                random_state=seed,
            )
        else:
            est = LimeTabularExplainer(
                fn,
                num_features=K,
                num_samples=1000,
                discretize_continuous=disc,
                sample_around_instance=around,
                random_state=seed,
            )
        est.fit(Xtr)
        fn.reset()
        t = time.perf_counter()
        with warnings.catch_warnings():
            # The statuses are counted in the table ("hit n_max").
            warnings.simplefilter("ignore", ConvergenceWarning)
            e = est.explain(x[None, :], target=LABEL)
        dt = time.perf_counter() - t
        sel = e.selected[0]
        if order == "weight":
            sel = np.argsort(-np.abs(e.values[0]), kind="stable")[:K]
        hit = None if kind != "slime" else bool(e.status[0] == "n_max_reached")
        return list(sel), dt, hit

    return run


class LastN(TimedModel):
    """Also remembers the size of the last call (the reference's final n)."""

    def __call__(self, X):
        self.last_n = len(X)
        return super().__call__(X)


def evaluate(runner, model, Xtr, Xte, seeds, instances):
    fn = LastN(model.predict_proba)
    sets = {i: [] for i in instances}
    times, rows, hits = [], [], []
    for i in instances:
        for seed in seeds:
            fn.reset()
            sel, dt, hit = runner(Xtr, Xte[i], fn, seed)
            sets[i].append(sel[:K] + [-1] * (K - len(sel)))
            times.append(dt)
            rows.append(fn.points)
            hits.append(hit)
    jk = [
        np.mean([jaccard_stability(sets[i], k) for i in instances]) for k in range(1, 6)
    ]
    hit_rate = None if hits[0] is None else np.mean(hits)
    return (
        jk,
        1e3 * np.median(times),
        int(np.median(rows)),
        hit_rate,
        bootstrap_se(sets),
    )


def bootstrap_se(sets, n_boot=300):
    """Standard error of each J@k from resampling the seeds of every instance."""
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(n_boot):
        per = []
        for rows in sets.values():
            idx = rng.integers(0, len(rows), len(rows))
            per.append(
                [jaccard_stability([rows[j] for j in idx], k) for k in range(1, 6)]
            )
        draws.append(np.mean(per, axis=0))
    return np.std(draws, axis=0, ddof=1)


def _has_reference():
    try:
        import slime  # noqa: F401
    except ImportError:
        print("(S-LIME reference stabilized-lime not installed: its rows are left out)")
        return False
    return True


def _iid_se(p):
    """The previous rule's standard error of mean(p): independent draws."""
    return math.sqrt(p.var(ddof=1) / p.size), math.inf


@contextmanager
def previous_rule():
    """S-LIME as it was: the i.i.d. variance formula and the normal quantile."""
    batch_se = _stable_lime._batch_se
    _stable_lime._batch_se = _iid_se
    try:
        yield
    finally:
        _stable_lime._batch_se = batch_se


def rule_run(model, Xtr, Xte, rows, seeds, margin, sampling, previous, disc):
    """J@k, convergence share and cost of one stopping rule."""
    fn = TimedModel(model.predict_proba)
    sets = {i: [] for i in rows}
    status, n_samples, times = [], [], []
    for seed in seeds:
        est = StableLIMEExplainer(
            fn,
            num_features=K,
            num_samples=1000,
            n_max=10000,
            tie_margin=margin,
            sampling=sampling,
            discretize_continuous=disc,
            sample_around_instance=not disc,
            random_state=seed,
        ).fit(Xtr)
        t = time.perf_counter()
        with previous_rule() if previous else nullcontext(), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            e = est.explain(Xte[list(rows)], target=LABEL)
        times.append((time.perf_counter() - t) / len(rows))
        for pos, i in enumerate(rows):
            sets[i].append(list(e.selected[pos]))
        status += list(e.status)
        n_samples += list(e.n_samples)
    jk = [np.mean([jaccard_stability(sets[i], k) for i in rows]) for k in range(1, 6)]
    status = np.asarray(status)
    return {
        "jk": jk,
        "se": bootstrap_se(sets),
        "converged": np.mean(status == "converged"),
        "n_max": np.mean(status == "n_max_reached"),
        "median_n": int(np.median(n_samples)),
        "mean_n": float(np.mean(n_samples)),
        "ms": 1e3 * np.median(times),
    }


def _step_spreads(Z, y, w, k):
    """Per LARS step: (pair, gap, i.i.d. se, batch-means se) at one sample."""
    from sklearn.linear_model import lars_path_gram

    from sklearn_plm_explain._lime import _LocalStats

    stats = _LocalStats(Z, w, y[:, None])
    b = stats.b[:, 0]
    _, active, coefs = lars_path_gram(
        b, stats.G.copy(), n_samples=len(Z), method="lar", max_iter=k
    )
    sw = np.sqrt(w)
    yw = (y - stats.ybar[0]) * sw
    out = []
    for t, j1 in enumerate(active[:k]):
        prev = np.asarray(active[:t], dtype=np.intp)
        step = _stable_lime._step_products(stats, Z, sw, yw, coefs[:, t], prev, j1, b)
        if step is not None:
            j2, _, p = step
            se_iid, se_batch = _iid_se(p)[0], _stable_lime._batch_se(p)[0]
            out.append(((int(j1), j2), p.mean(), se_iid, se_batch))
    return out


def variance_part(model, Xtr, Xte, quick):
    """Estimated against actual spread of each step's gap, Sobol' sampling."""
    from collections import defaultdict

    rows = [0, 1] if quick else [0, 1, 5]
    seeds = range(5 if quick else 20)
    n = 8193  # the explained row and 2^13 Sobol' points
    print(
        f"### Standard error of a step's gap under Sobol' sampling: rows {rows}, "
        f"seeds {seeds.start}..{seeds.stop - 1}, n = {n}, num_features={K}"
    )
    print()
    print(
        "For each LARS step, over the seeds whose step compares the same two "
        "features: the actual spread (standard deviation over seeds) of the gap "
        "|c1| - |c2|, and the mean of each estimate of it, the i.i.d. formula "
        "sqrt(var(p) / n) and batch means (16 batches); ratio = estimate / actual "
        "(above 1: on the safe side)."
    )
    print()
    captured = []
    fit = StableLIMEExplainer._tested_fit

    def capture(self, Z, w, Y, labels, prefix=None):
        captured.append((Z.copy(), Y[:, labels[0]].copy(), w.copy()))
        return fit(self, Z, w, Y, labels, prefix)

    out = []
    StableLIMEExplainer._tested_fit = capture
    try:
        for row in rows:
            steps = defaultdict(list)
            for seed in seeds:
                captured.clear()
                est = StableLIMEExplainer(
                    model.predict_proba,
                    num_features=K,
                    num_samples=n,
                    n_max=n,
                    random_state=seed,
                ).fit(Xtr)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    est.explain(Xte[row : row + 1], target=LABEL)
                for t, (pair, gap, iid, batch) in enumerate(
                    _step_spreads(*captured[-1], K)
                ):
                    sign = 1.0 if pair[0] < pair[1] else -1.0
                    steps[t, tuple(sorted(pair))].append((sign * gap, iid, batch))
            for (t, pair), vals in sorted(steps.items()):
                if len(vals) < max(3, len(seeds) // 2):
                    continue  # a pair seen by too few seeds
                gaps, iid, batch = np.array(vals).T
                spread = gaps.std(ddof=1)
                out.append(
                    [
                        row,
                        t + 1,
                        f"x{pair[0]} vs x{pair[1]}",
                        len(vals),
                        f"{spread:.2e}",
                        f"{iid.mean():.2e}",
                        f"{iid.mean() / spread:.1f}",
                        f"{batch.mean():.2e}",
                        f"{batch.mean() / spread:.2f}",
                    ]
                )
    finally:
        StableLIMEExplainer._tested_fit = fit
    cols = ["row", "step", "pair", "seeds", "actual spread", "i.i.d. se"]
    cols += ["ratio", "batch-means se", "ratio"]
    print(table(cols, out))
    print()


def rule_part(model, Xtr, Xte, quick):
    rows = range(3 if quick else 10)
    seeds = range(5 if quick else 20)
    print(
        f"### S-LIME stopping rule: X_test[0:{len(rows)}] x seeds "
        f"{seeds.start}..{seeds.stop - 1}, label {LABEL}, num_features={K}, "
        "num_samples=1000, n_max=10000"
    )
    print()
    print(
        "Previous rule: a step passes when its gap exceeds z_alpha * sqrt(2 "
        "var(p) / n) (variance as for independent draws, normal quantile, no "
        "margin). Now: the gap plus tie_margin * |c1| must exceed the t "
        "quantile (15 d.o.f.) times sqrt(2) times the batch-means standard "
        "error (16 batches). ms = median wall time per row (10 rows per "
        "explain call, model included); conv = share of explanations with "
        "status 'converged', n_max = share ending at n_max."
    )
    print()
    default = _stable_lime.TIE_MARGIN
    for label, disc, sampling in [
        ("discretised", True, "qmc"),
        ("discretised", True, "random"),
        ("continuous, around instance", False, "qmc"),
    ]:
        # The margin is chosen on the first setting; the others check it.
        margins = [0.0, 0.1, default, 0.2] if disc and sampling == "qmc" else [default]
        runs = [("previous rule (i.i.d. variance, no margin)", True, 0.0)]
        for m in margins:
            suffix = " (default)" if m == default else ""
            runs.append((f"batch means, tie_margin={m:g}{suffix}", False, m))
        out = []
        for name, previous, margin in runs:
            r = rule_run(model, Xtr, Xte, rows, seeds, margin, sampling, previous, disc)
            out.append(
                [
                    name,
                    label,
                    sampling,
                    *[f"{j:.3f}" for j in r["jk"]],
                    " / ".join(f"{v:.3f}" for v in r["se"]),
                    f"{100 * r['converged']:.0f} %",
                    f"{100 * r['n_max']:.0f} %",
                    r["median_n"],
                    f"{r['mean_n']:.0f}",
                    f"{r['ms']:.0f}",
                ]
            )
            print(f"  done: {name} ({label}, {sampling})", flush=True, file=sys.stderr)
        cols = ["rule", "features", "sampling", "J@1", "J@2", "J@3", "J@4", "J@5"]
        cols += ["bootstrap se J@1..5", "conv", "n_max", "median n", "mean n", "ms"]
        print(table(cols, out))
        print()


def main():
    parser = blas_args(__doc__)
    parser.add_argument(
        "--part", choices=["all", "methods", "rule", "variance"], default="all"
    )
    args = parser.parse_args()
    limit_blas(args.blas_threads)
    model, Xtr, Xte, _, _ = bc_rf()
    print(header("LIME / S-LIME stability on bc_rf (ANCHORS §1)"))
    if args.part in ("all", "variance"):
        variance_part(model, Xtr, Xte, args.quick)
    if args.part in ("all", "rule"):
        rule_part(model, Xtr, Xte, args.quick)
    if args.part in ("all", "methods"):
        methods_part(model, Xtr, Xte, args.quick)


def methods_part(model, Xtr, Xte, quick):
    seeds = range(5 if quick else 20)
    instances = range(2 if quick else 5)
    print(
        f"Seeds {seeds.start}..{seeds.stop - 1}, instances X_test[0:{len(instances)}], "
        f"label {LABEL}, num_features={K}. ms = median wall time per explanation "
        "(model included), rows = median points queried per explanation."
    )
    cols = [
        "method",
        "sampling",
        "n",
        "J@1",
        "J@2",
        "J@3",
        "J@4",
        "J@5",
        "ms",
        "rows",
        "hit n_max",
    ]
    settings = [
        (True, False, "discretised"),
        (False, True, "continuous, around instance"),
    ]
    for disc, around, label in settings:
        methods = [
            (
                "lime 0.2.0.1 default (auto)",
                "1000",
                lime_runner("auto", 1000, disc, around),
            ),
            (
                "lime 0.2.0.1 default (auto)",
                "5000",
                lime_runner("auto", 5000, disc, around),
            ),
            (
                "lime 0.2.0.1 lasso_path",
                "10000",
                lime_runner("lasso_path", 10000, disc, around),
            ),
        ]
        if _has_reference():
            methods.append(
                (
                    "S-LIME reference (stabilized-lime)",
                    "1000..10000",
                    reference_slime_runner(disc, around),
                )
            )
        methods += [
            (
                "ours LimeTabularExplainer (auto)",
                "1000",
                ours_runner("lime", disc, around),
            ),
            (
                "ours StableLIMEExplainer (default: sampling='qmc')",
                "1000..10000",
                ours_runner("slime", disc, around),
            ),
            (
                "ours StableLIMEExplainer, abs-weight order",
                "1000..10000",
                ours_runner("slime", disc, around, order="weight"),
            ),
            (
                "ours StableLIMEExplainer, sampling='random'",
                "1000..10000",
                ours_runner("slime", disc, around, sampling="random"),
            ),
        ]
        rows, se_rows = [], []
        for name, n, runner in methods:
            jk, ms, nrows, hit, se = evaluate(runner, model, Xtr, Xte, seeds, instances)
            hit_s = "" if hit is None else f"{100 * hit:.0f} %"
            rows.append(
                [name, label, n, *[f"{j:.2f}" for j in jk], f"{ms:.0f}", nrows, hit_s]
            )
            se_rows.append([name, *[f"{v:.3f}" for v in se]])
            print(f"  done: {name} ({label})", flush=True, file=sys.stderr)
        print()
        print(f"### {label}")
        print()
        print(table(cols, rows))
        print()
        print(
            "Bootstrap standard error of each J@k (seeds resampled with replacement "
            "within every instance, 300 draws; pairs of identical draws count as "
            "agreeing, so this slightly understates the spread):"
        )
        print()
        print(
            table(["method", "se J@1", "se J@2", "se J@3", "se J@4", "se J@5"], se_rows)
        )
        print()


if __name__ == "__main__":
    main()
