"""The S-LIME paper's MARS case: LIME vs S-LIME stability of the selected order.

``y = 10 sin(pi x1 x2) + 20 (x3 - 0.05)^2 + 5.2 x4 + 5 x5``, ``X ~ U[0,1]^5``
(1000 training rows, seed 0), explained point ``(0.51, 0.49, 0.5, 0.5, 0.5)``,
regression mode with the function itself as the model. The paper's setup:
``discretize_continuous=False``, ``sample_around_instance=True``,
``num_features=5``; LIME with ``feature_selection='lasso_path'`` and
``n = 1000``; S-LIME with ``n0 = 1000``, ``n_max = 10000``. 20 repeats
(``random_state`` 0..19). Features are printed 1-based (x1..x5).

Usage: ``python benchmarks/bench_mars.py [--quick] [--blas-threads N]``
"""

import time
from collections import Counter

import numpy as np
from _lime_models import TimedModel, blas_args, header, limit_blas, mars, table

from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer
from sklearn_plm_explain.metrics import jaccard_stability

X_POINT = np.array([0.51, 0.49, 0.5, 0.5, 0.5])
COMMON = {"discretize_continuous": False, "sample_around_instance": True}


def ours_lime(Xtr, fn, seed):
    e = LimeTabularExplainer(
        fn,
        mode="regression",
        feature_selection="lasso_path",
        num_features=5,
        num_samples=1000,
        random_state=seed,
        **COMMON,
    ).fit(Xtr)
    out = e.explain(X_POINT[None, :])
    return out.selected[0], None


def ours_slime(Xtr, fn, seed):
    e = StableLIMEExplainer(
        fn,
        mode="regression",
        num_features=5,
        num_samples=1000,
        n_max=10000,
        random_state=seed,
        **COMMON,
    ).fit(Xtr)
    out = e.explain(X_POINT[None, :])
    return out.selected[0], out.status[0] == "n_max_reached"


def ref_lime(Xtr, fn, seed):
    from lime.lime_tabular import LimeTabularExplainer as Lime

    e = Lime(
        Xtr,
        mode="regression",
        feature_selection="lasso_path",
        random_state=seed,
        **COMMON,
    ).explain_instance(X_POINT, fn, num_features=5, num_samples=1000)
    return [f for f, _ in e.as_map()[1]], None


def ref_slime(Xtr, fn, seed):
    from slime.lime_tabular import LimeTabularExplainer as SLime

    e = SLime(
        Xtr,
        mode="regression",
        feature_selection="lasso_path",
        random_state=seed,
        **COMMON,
    ).slime(X_POINT, fn, num_features=5, num_samples=1000, n_max=10000, alpha=0.05)
    return [f for f, _ in e.as_map()[1]], fn.last_n == 10000


class LastN(TimedModel):
    def __call__(self, X):
        self.last_n = len(X)
        return super().__call__(X)


def run(method, Xtr, seeds):
    fn = LastN(mars)
    orders, hits, rows, times = [], [], [], []
    for seed in seeds:
        fn.reset()
        t = time.perf_counter()
        sel, hit = method(Xtr, fn, seed)
        times.append(time.perf_counter() - t)
        orders.append(tuple(int(j) + 1 for j in sel))
        hits.append(hit)
        rows.append(fn.points)
    return orders, hits, rows, times


def main():
    args = blas_args(__doc__).parse_args()
    limit_blas(args.blas_threads)
    seeds = range(5 if args.quick else 20)
    Xtr = np.random.default_rng(0).random((1000, 5))
    methods = [
        ("ours LimeTabularExplainer (lasso_path, n=1000)", ours_lime),
        ("ours StableLIMEExplainer (n0=1000, n_max=10000)", ours_slime),
    ]
    try:
        import lime  # noqa: F401

        methods.append(("lime 0.2.0.1 (lasso_path, n=1000)", ref_lime))
    except ImportError:
        pass
    try:
        import slime  # noqa: F401

        methods.append(
            ("S-LIME reference, stabilized-lime (n0=1000, n_max=10000)", ref_slime)
        )
    except ImportError:
        pass
    print(header("S-LIME paper's MARS case"))
    print(
        "Orders are 1-based feature lists (first selected first; LIME: |weight| "
        "order, ours S-LIME: LARS entry order, reference S-LIME: |weight| order)."
    )
    print()
    summary, orders_rows = [], []
    for name, method in methods:
        orders, hits, rows, times = run(method, Xtr, seeds)
        sets = [list(o) for o in orders]
        jk = [jaccard_stability(sets, k) for k in range(1, 6)]
        top3 = Counter(frozenset(o[:3]) for o in orders).most_common(1)[0][1]
        hit = "" if hits[0] is None else f"{sum(hits)}/{len(hits)}"
        summary.append(
            [
                name,
                *[f"{j:.2f}" for j in jk],
                f"{top3}/{len(orders)}",
                hit,
                int(np.median(rows)),
                f"{1e3 * np.median(times):.1f}",
            ]
        )
        for order, count in Counter(orders).most_common():
            orders_rows.append(
                [name, "(" + ", ".join(f"x{j}" for j in order) + ")", count]
            )
    print(
        table(
            [
                "method",
                "J@1",
                "J@2",
                "J@3",
                "J@4",
                "J@5",
                "same top-3 set",
                "hit n_max",
                "median rows",
                "median ms",
            ],
            summary,
        )
    )
    print()
    print(table(["method", "selected order", f"count of {len(seeds)}"], orders_rows))
    print()


if __name__ == "__main__":
    main()
