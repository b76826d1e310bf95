"""LIME speed (ANCHORS §2) and statistical parity with lime 0.2.0.1, one run.

Speed: each configuration explains ``X_test[0:20]`` one row at a time with
lime and with our engine; the model's ``predict_proba`` is wrapped by a timer
so that each library's *own* time (total minus the model's) can be compared.

Parity: for bc_rf and digits_mlp, discretised and continuous sampling, and
feature selection ``none`` and ``auto``, both libraries explain 3 test rows
with 20 seeds (``num_samples=5000``). Per feature, the mean surrogate weight
over the seeds must satisfy
``|mean_ours - mean_lime| <= 4 * sqrt(se_ours**2 + se_lime**2)``
(``se`` = standard deviation / sqrt(20)); the table reports the fraction of
(row, feature) pairs within it and the largest standardised difference.

Width (issue 12): LIME and S-LIME at d = 784 (digits upsampled to 28 x 28
with ``scipy.ndimage.zoom``, ``MLPClassifier((256, 128))``, C = 10), 20 rows in
one ``explain`` call, continuous and discretised: our own CPU time per row
against the model's own ``predict_proba`` CPU time for that row's queries
(``time.process_time`` inside the model wrapper), one BLAS thread.

Usage: ``python benchmarks/bench_lime_speed.py [--quick] [--blas-threads N]
[--wide-only]``
"""

import sys
import time

import numpy as np
from _lime_models import (
    TimedModel,
    bc_rf,
    blas_args,
    digits_mlp,
    header,
    limit_blas,
    table,
)

from sklearn_plm_explain import LimeTabularExplainer, StableLIMEExplainer

N_ROWS = 20


def lime_weights(Xtr, x, fn, label, selection, disc, n, k, seed):
    from lime.lime_tabular import LimeTabularExplainer as Lime

    exp = Lime(
        Xtr, feature_selection=selection, discretize_continuous=disc, random_state=seed
    )
    e = exp.explain_instance(x, fn, labels=(label,), num_features=k, num_samples=n)
    w = np.zeros(Xtr.shape[1])
    for j, v in e.as_map()[label]:
        w[j] = v
    return w


def ours_explainer(Xtr, fn, selection, disc, n, k, seed):
    return LimeTabularExplainer(
        fn,
        feature_selection=selection,
        discretize_continuous=disc,
        num_samples=n,
        num_features=k,
        random_state=seed,
    ).fit(Xtr)


def speed_row(name, model, Xtr, Xte, n, disc, selection, k=10, label=1):
    from lime.lime_tabular import LimeTabularExplainer as Lime

    fn = TimedModel(model.predict_proba)
    rows = Xte[:N_ROWS]
    lime = Lime(
        Xtr, feature_selection=selection, discretize_continuous=disc, random_state=0
    )
    lime.explain_instance(rows[0], fn, labels=(label,), num_features=k, num_samples=n)
    fn.reset()
    t = time.perf_counter()
    for x in rows:
        lime.explain_instance(x, fn, labels=(label,), num_features=k, num_samples=n)
    lime_total, lime_model = (time.perf_counter() - t) / N_ROWS, fn.seconds / N_ROWS

    ours = ours_explainer(Xtr, fn, selection, disc, n, k, 0)
    ours.explain(rows[:1], target=label)
    fn.reset()
    t = time.perf_counter()
    for i in range(N_ROWS):
        ours.explain(rows[i : i + 1], target=label)
    ours_total, ours_model = (time.perf_counter() - t) / N_ROWS, fn.seconds / N_ROWS

    fn.reset()
    t = time.perf_counter()
    ours.explain(rows, target=label)
    batch_total, batch_model = (time.perf_counter() - t) / N_ROWS, fn.seconds / N_ROWS

    ms = 1e3
    lime_own, ours_own = lime_total - lime_model, ours_total - ours_model
    return [
        name,
        n,
        "yes" if disc else "no",
        selection,
        f"{ms * lime_total:.1f}",
        f"{ms * lime_model:.1f}",
        f"{ms * lime_own:.1f}",
        f"{ms * ours_total:.1f}",
        f"{ms * ours_model:.1f}",
        f"{ms * ours_own:.1f}",
        f"{ours_own / lime_own:.3f}",
        f"{ms * (batch_total - batch_model):.1f}",
    ]


def parity_row(name, model, Xtr, Xte, disc, selection, seeds, n_inst, n=5000, k=10):
    fn = model.predict_proba
    labels = model.predict(Xte[:n_inst])
    within, total, worst = 0, 0, 0.0
    for i in range(n_inst):
        x, label = Xte[i], int(labels[i])
        theirs = np.array(
            [lime_weights(Xtr, x, fn, label, selection, disc, n, k, s) for s in seeds]
        )
        ours = np.array(
            [
                ours_explainer(Xtr, fn, selection, disc, n, k, s)
                .explain(x[None, :], target=label)
                .values[0]
                for s in seeds
            ]
        )
        r = len(seeds)
        se = np.sqrt(ours.var(axis=0, ddof=1) / r + theirs.var(axis=0, ddof=1) / r)
        diff = np.abs(ours.mean(axis=0) - theirs.mean(axis=0))
        ok = diff <= 4 * se
        within += int(ok.sum())
        total += ok.size
        z = np.where(
            se > 0, diff / np.where(se > 0, se, 1), np.where(diff > 0, np.inf, 0)
        )
        worst = max(worst, float(z.max()))
    return [
        name,
        "yes" if disc else "no",
        selection,
        f"{n_inst} rows x {len(seeds)} seeds",
        f"{within}/{total}",
        f"{100 * within / total:.1f} %",
        f"{worst:.2f}",
    ]


class CPUTimedModel:
    """A model whose ``predict_proba`` adds the CPU time spent inside it."""

    def __init__(self, model):
        self.model, self.classes_ = model, model.classes_
        self.seconds, self.points = 0.0, 0

    def predict_proba(self, X):
        t = time.process_time()
        out = self.model.predict_proba(X)
        self.seconds += time.process_time() - t
        self.points += len(X)
        return out

    __call__ = predict_proba

    def reset(self):
        self.seconds, self.points = 0.0, 0


def digits_784():
    """Digits / 16 upsampled to 28 x 28 (d = 784), MLP (256, 128) relu."""
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    X = np.stack([zoom(im.reshape(8, 8) / 16.0, 3.5) for im in X])
    X = X.reshape(len(X), -1)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    model = MLPClassifier((256, 128), max_iter=200, random_state=0).fit(Xtr, ytr)
    return model, Xtr, Xte, yte


def wide_row(name, cls, params, model, Xtr, rows):
    fn = CPUTimedModel(model)
    explainer = cls(fn, random_state=0, **params).fit(Xtr)
    explainer.explain(rows[:1])
    timings = []
    # The first call of a fresh process also pays for the first use of its
    # memory; the second call (same rows, same results) shows the steady state.
    for _ in range(2):
        fn.reset()
        t = time.process_time()
        e = explainer.explain(rows)
        total = (time.process_time() - t) / len(rows)
        timings.append((total - fn.seconds / len(rows), fn.seconds / len(rows)))
    (own1, model1), (own2, model2) = timings
    return [
        name,
        ", ".join(f"{k}={v}" for k, v in params.items()),
        f"{fn.points / len(rows):.0f}",
        f"{np.mean(e.n_rounds):.2f}",
        f"{1e3 * own1:.1f}",
        f"{1e3 * model1:.1f}",
        f"{own1 / model1:.2f}",
        f"{1e3 * own2:.1f}",
        f"{1e3 * model2:.1f}",
        f"{own2 / model2:.2f}",
    ]


def wide_section():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    model, Xtr, Xte, yte = digits_784()
    rows = Xte[:N_ROWS]
    print(
        f"Width: d = {Xtr.shape[1]}, MLP (256, 128) relu, test accuracy "
        f"{model.score(Xte, yte):.3f}; X_test[0:{N_ROWS}] in one explain call "
        "(after one warm-up row), then the same call again. 'own' = CPU time of "
        "explain minus the CPU time inside predict_proba, per row."
    )
    print()
    configs = [
        ("StableLIMEExplainer", StableLIMEExplainer, {"discretize_continuous": False}),
        ("StableLIMEExplainer", StableLIMEExplainer, {"discretize_continuous": True}),
        (
            "StableLIMEExplainer",
            StableLIMEExplainer,
            {"discretize_continuous": False, "sampling": "random"},
        ),
        (
            "LimeTabularExplainer",
            LimeTabularExplainer,
            {"discretize_continuous": False},
        ),
        ("LimeTabularExplainer", LimeTabularExplainer, {"discretize_continuous": True}),
    ]
    out = []
    for name, cls, params in configs:
        with warnings.catch_warnings():
            # Rows at n_max are expected here; only the timing is reported.
            warnings.simplefilter("ignore", ConvergenceWarning)
            out.append(wide_row(name, cls, params, model, Xtr, rows))
        print(f"  width done: {name} {params}", file=sys.stderr, flush=True)
    cols = [
        "explainer",
        "parameters (others default)",
        "queries / row",
        "mean rounds",
        "own ms / row",
        "model ms / row",
        "own / model",
        "2nd call: own ms / row",
        "model ms / row",
        "own / model",
    ]
    print(table(cols, out))
    print()


def main():
    parser = blas_args(__doc__)
    parser.add_argument(
        "--wide-only", action="store_true", help="only the d = 784 section"
    )
    args = parser.parse_args()
    limit_blas(args.blas_threads)
    if args.wide_only:
        print(header("LIME and S-LIME at d = 784"))
        wide_section()
        return
    digits = digits_mlp()
    bc = bc_rf()
    print(header("LIME engine speed and parity with lime 0.2.0.1"))
    print(
        f"Speed: mean over X_test[0:{N_ROWS}] explained one row per call, label 1, "
        "num_features=10; 'model ms' is the time inside predict_proba (timer "
        "wrapper), 'own' = total - model. 'ours batch own' = our own time per "
        f"row when the {N_ROWS} rows go in one explain call."
    )
    print()
    configs = [
        ("digits_mlp", digits, 5000, True, "auto"),
        ("digits_mlp", digits, 1000, True, "auto"),
        ("digits_mlp", digits, 5000, False, "auto"),
        ("digits_mlp", digits, 5000, True, "lasso_path"),
        ("bc_rf", bc, 1000, True, "auto"),
        ("bc_rf", bc, 1000, True, "lasso_path"),
        ("bc_rf", bc, 5000, True, "lasso_path"),
    ]
    if args.quick:
        configs = configs[:1]
    cols = [
        "model",
        "n",
        "discretize",
        "selection",
        "lime total ms",
        "lime model ms",
        "lime own ms",
        "ours total ms",
        "ours model ms",
        "ours own ms",
        "own ratio ours/lime",
        "ours batch own ms",
    ]
    rows = []
    for name, (model, Xtr, Xte, _, _), n, disc, sel in configs:
        rows.append(speed_row(name, model, Xtr, Xte, n, disc, sel))
        print(f"  speed done: {name} {n} {disc} {sel}", file=sys.stderr, flush=True)
    print(table(cols, rows))
    print()
    seeds = range(5 if args.quick else 20)
    n_inst = 1 if args.quick else 3
    print(
        "Parity: label = the model's predicted class of each row, num_samples=5000, "
        "num_features=10 (selection 'auto' = highest_weights). Criterion per "
        "(row, feature): |mean_ours - mean_lime| <= 4 sqrt(se_ours^2 + se_lime^2); "
        "'max z' = largest |difference| / sqrt(se_ours^2 + se_lime^2)."
    )
    print()
    prow = []
    for name, data in [("bc_rf", bc), ("digits_mlp", digits)]:
        model, Xtr, Xte, _, _ = data
        for disc in (True, False):
            for sel in ("none", "auto"):
                prow.append(parity_row(name, model, Xtr, Xte, disc, sel, seeds, n_inst))
                print(
                    f"  parity done: {name} {disc} {sel}", file=sys.stderr, flush=True
                )
    print(
        table(
            [
                "model",
                "discretize",
                "selection",
                "repeats",
                "within",
                "fraction",
                "max z",
            ],
            prow,
        )
    )
    print()
    wide_section()


if __name__ == "__main__":
    main()
