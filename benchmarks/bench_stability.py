"""LIME stability on bc_rf (ANCHORS §1), all methods side by side in one run.

bc_rf, instances ``X_test[0:5]``, each explained with ``random_state``
0..19, label 1, ``num_features=5``. J@k = mean pairwise Jaccard index of the
top-k feature sets over the 190 pairs, averaged over the 5 instances; time =
median wall time per explanation; rows = median points sent to the model per
explanation. Run twice: discretised (lime's default) and continuous sampled
around the instance.

Usage: ``python benchmarks/bench_stability.py [--quick] [--blas-threads N]``
"""

import time

import numpy as np
from _lime_models import TimedModel, bc_rf, blas_args, header, limit_blas, table

from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer
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


def main():
    args = blas_args(__doc__).parse_args()
    limit_blas(args.blas_threads)
    seeds = range(5 if args.quick else 20)
    instances = range(2 if args.quick else 5)
    model, Xtr, Xte, _, _ = bc_rf()
    print(header("LIME / S-LIME stability on bc_rf (ANCHORS §1)"))
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
            (
                "S-LIME reference (stabilized-lime)",
                "1000..10000",
                reference_slime_runner(disc, around),
            ),
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
            print(
                f"  done: {name} ({label})", flush=True, file=__import__("sys").stderr
            )
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
