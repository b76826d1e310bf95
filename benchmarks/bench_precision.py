"""OpenAPIExplainer on models behind real APIs: float32, rounded, noisy responses.

For each response precision, the explainer's defaults (``random_state=0``,
``response_precision="auto"``) on models whose ground truth is known:

* float64: the digits MLP through scikit-learn's own ``predict_proba``;
* float32: skl2onnx exports of scikit-learn MLPs run by ONNX Runtime (digits,
  wine, breast cancer), random ReLU networks evaluated in numpy float32, the
  float32 sigmoid of a logistic model at logits around -22 (d = 30), and
  float32 answers written as JSON (shortest decimals);
* rounded to 6 and 4 decimals: logistic regressions (binary, 3 and 10
  classes) and random ReLU networks;
* noisy: random ReLU networks whose logits are multiplied by
  ``1 + s N(0, 1)`` on every call, each logit its own draw or one per call;
* region reuse on and off, for the decision on its default.

"certified" = ``exact`` or ``approximate``; "err/bound" = the true relative L1
error of the worst class's decision features over the row's ``error_bound``
(it must stay <= 1 on every certified row); "wrong exact" = rows ``exact``
with an error above 1e-6. Usage::

    python benchmarks/bench_precision.py [--quick]
"""

import argparse
import platform
import sys
import time
import warnings

import numpy as np
import scipy
import sklearn
from sklearn.datasets import load_breast_cancer, load_digits, load_wine, make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from sklearn_plm_explain import OpenAPIExplainer, decision_features, local_linear_model
from sklearn_plm_explain.utils._served import (
    as_json_float32,
    float32_forward,
    jittered,
    onnx_float32,
    rounded,
    sigmoid_float32,
    weak_boundary_mlp,
)

CERTIFIED = ("exact", "approximate")


def errors(e, model, X):
    return class_errors(e, local_linear_model(model, X)[0])


def class_errors(e, W):
    """The worst class's relative L1 error of ``e``'s decision features
    against the true logit slopes ``W`` (n, d, C), per row."""
    C = W.shape[2]
    out = []
    for c in range(C):
        truth = decision_features(W, np.full(W.shape[0], c))
        est = C / (C - 1) * e.coef[:, :, c]
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.abs(est - truth).sum(1) / np.abs(truth).sum(1))
    return np.max(out, axis=0)


def explain(fn, X_fit, rows, **kw):
    explainer = OpenAPIExplainer(fn, random_state=0, **kw).fit(X_fit)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        e = explainer.explain(rows)
    return e, time.perf_counter() - t0


class Tally:
    """Pools the explanations of several models under one table row."""

    def __init__(self, precision, model):
        self.precision, self.model = precision, model
        self.parts = []

    def add(self, e, err, seconds):
        self.parts.append((e, err, seconds))
        return self

    def row(self):
        status = np.concatenate([e.status for e, _, _ in self.parts])
        err = np.concatenate([err for _, err, _ in self.parts])
        bound = np.concatenate([e.error_bound for e, _, _ in self.parts])
        labels = np.concatenate([e.response_precision for e, _, _ in self.parts])
        queries = np.concatenate(
            [e.n_queries / (e.values.shape[1] + 2) for e, _, _ in self.parts]
        )
        seconds = sum(s for _, _, s in self.parts)
        cert = np.isin(status, CERTIFIED)
        names, counts = np.unique(status, return_counts=True)
        read = ", ".join(sorted(set(labels[cert]))) if cert.any() else "-"
        ratio = err[cert] / bound[cert]
        return {
            "precision": self.precision,
            "model": self.model,
            "rows": f"{status.size}",
            "read as": read,
            "statuses": ", ".join(f"{n} {c}" for n, c in zip(names, counts)),
            "certified": f"{cert.sum()} ({cert.mean():.0%})",
            "median bound": f"{np.median(bound[cert]):.1e}" if cert.any() else "-",
            "max bound": f"{bound[cert].max():.1e}" if cert.any() else "-",
            "max err/bound": f"{ratio.max():.2f}" if cert.any() else "-",
            "rows err > bound": f"{(ratio > 1).sum()}",
            "wrong exact": f"{((status == 'exact') & (err > 1e-6)).sum()}",
            "queries/(d+2)": f"{queries.mean():.2f}",
            "ms/row": f"{1e3 * seconds / status.size:.1f}",
        }


def relu_nets(n_nets, n_rows):
    rng = np.random.default_rng(2026)
    for k in range(n_nets):
        seed = 1000 + k
        d, C, layers = rng.integers(2, 41), rng.integers(2, 9), rng.integers(1, 4)
        X, y = make_blobs(
            n_samples=300,
            centers=int(C),
            n_features=int(d),
            cluster_std=3.0,
            random_state=seed,
        )
        sizes = tuple(
            int(v) for v in np.random.default_rng(seed).integers(4, 24, int(layers))
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            mlp = MLPClassifier(sizes, max_iter=60, random_state=seed).fit(X, y)
        pick = np.random.default_rng(seed + 1).choice(len(X), n_rows, replace=False)
        yield mlp, X, X[pick]


def split(loader, scaled):
    X, y = loader(return_X_y=True)
    if loader is load_digits:
        X = X / 16.0
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.2, random_state=0)
    if scaled:
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    return X_train, X_test, y_train


def onnx_models(quick):
    for name, loader, hidden, scaled, n in [
        ("digits MLP(64, 32)", load_digits, (64, 32), False, 40 if quick else 150),
        ("wine MLP(32, 16)", load_wine, (32, 16), True, 36),
        ("breast cancer MLP(32, 16)", load_breast_cancer, (32, 16), True, 114),
    ]:
        X_train, X_test, y_train = split(loader, scaled)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            mlp = MLPClassifier(hidden, max_iter=500, random_state=0)
            mlp.fit(X_train, y_train)
        yield name, mlp, X_train, X_test[:n]


def logistic_models():
    for name, loader in [
        ("breast cancer LR (2 classes)", load_breast_cancer),
        ("wine LR (3 classes)", load_wine),
        ("digits LR (10 classes)", load_digits),
    ]:
        X, y = loader(return_X_y=True)
        X = StandardScaler().fit_transform(X)
        yield name, LogisticRegression(max_iter=5000).fit(X, y), X


def bench(quick):
    n_nets, n_rows = (4, 10) if quick else (12, 20)
    rows = []
    X_train, X_test, y_train = split(load_digits, False)
    digits = MLPClassifier((64, 32), max_iter=500, random_state=0).fit(X_train, y_train)
    test = X_test[: 60 if quick else 200]
    e, s = explain(digits, X_train, test, response_method="predict_proba")
    rows.append(
        Tally("float64", "digits MLP(64, 32)").add(e, errors(e, digits, test), s)
    )
    onnx = list(onnx_models(quick))
    for name, mlp, Xf, Xr in onnx:
        e, s = explain(onnx_float32(mlp, Xf.shape[1]), Xf, Xr)
        rows.append(Tally("float32 (ONNX Runtime)", name).add(e, errors(e, mlp, Xr), s))
    tally = Tally("float32 (numpy)", f"{n_nets} random ReLU nets")
    for mlp, X, Xr in relu_nets(n_nets, n_rows):
        e, s = explain(float32_forward(mlp), X, Xr)
        tally.add(e, errors(e, mlp, Xr), s)
    rows.append(tally)
    f, lr, X, Xr = sigmoid_float32(seed=0, n_rows=60 if quick else 200)
    e, s = explain(f, X, Xr)
    rows.append(
        Tally("float32 (numpy)", "sigmoid, logits ~ -22, d = 30").add(
            e, errors(e, lr, Xr), s
        )
    )
    tally = Tally("float32 as JSON", f"{n_nets} random ReLU nets")
    for mlp, X, Xr in relu_nets(n_nets, n_rows):
        e, s = explain(as_json_float32(float32_forward(mlp)), X, Xr)
        tally.add(e, errors(e, mlp, Xr), s)
    rows.append(tally)
    for decimals in (6, 4):
        for name, lr, X in logistic_models():
            Xr = X[: 20 if quick else 60]
            e, s = explain(rounded(lr.predict_proba, decimals), X, Xr)
            rows.append(
                Tally(f"{decimals} decimals", name).add(e, errors(e, lr, Xr), s)
            )
        tally = Tally(f"{decimals} decimals", f"{n_nets} random ReLU nets")
        for mlp, X, Xr in relu_nets(n_nets, n_rows):
            e, s = explain(rounded(mlp.predict_proba, decimals), X, Xr)
            tally.add(e, errors(e, mlp, Xr), s)
        rows.append(tally)
    for size in (1e-6, 1e-3):
        for per_call in (False, True):
            how = "one draw per call" if per_call else "per logit"
            tally = Tally(f"noisy, jitter {size:g}", f"{n_nets} ReLU nets, {how}")
            for k, (mlp, X, Xr) in enumerate(relu_nets(n_nets, n_rows // 2)):
                e, s = explain(jittered(mlp, size, k, per_call), X, Xr)
                tally.add(e, errors(e, mlp, Xr), s)
            rows.append(tally)
    return [t.row() for t in rows]


def bench_reuse(quick):
    """Queries and content with region reuse on and off."""
    from sklearn_plm_explain import LogisticModelTreeClassifier

    X, y = load_digits(return_X_y=True)
    X = (X + np.random.default_rng(0).uniform(0, 1, X.shape)) / 17.0
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.2, random_state=0)
    lmt = LogisticModelTreeClassifier(
        prune=False, max_depth=3, split_point="midpoint", random_state=0
    ).fit(X_train, y_train)
    X_d, Xt_d, y_d = split(load_digits, False)
    mlp = MLPClassifier((64, 32), max_iter=500, random_state=0).fit(X_d, y_d)
    n_past = 600 if quick else 6000
    weak, X_w, rows_w = weak_boundary_mlp(0, n_inside=300, n_past=n_past)
    cases = [
        ("LMT on digits (8 leaves), decision_function", lmt, X_train, X_test, {}),
        (
            "digits MLP(64, 32), predict_proba",
            mlp,
            X_d,
            Xt_d[: 60 if quick else 200],
            {"response_method": "predict_proba"},
        ),
        (
            f"300 rows in a region + {n_past} past a weak boundary (1e-5)",
            weak,
            X_w,
            rows_w,
            {"response_method": "predict_proba"},
        ),
    ]
    out = []
    for name, model, Xf, Xr, kw in cases:
        for reuse in (True, False):
            e, s = explain(model, Xf, Xr, reuse_regions=reuse, **kw)
            err = errors(e, model, Xr)
            d = Xr.shape[1]
            exact = e.status == "exact"
            out.append(
                {
                    "model": name,
                    "reuse_regions": f"{reuse}",
                    "exact": f"{exact.sum()}/{len(Xr)}",
                    "reused": f"{(e.reused_from >= 0).sum()}",
                    "exact with err > 1e-8": f"{(exact & (err > 1e-8)).sum()}",
                    "max err (exact)": f"{err[exact].max():.1e}"
                    if exact.any()
                    else "-",
                    "queries/(d+2)": f"{e.n_queries.mean() / (d + 2):.3f}",
                    "ms/row": f"{1e3 * s / len(Xr):.2f}",
                }
            )
    return out


def print_table(rows):
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")


def header():
    import onnxruntime
    import skl2onnx
    from threadpoolctl import threadpool_info

    blas = ", ".join(
        f"{i['internal_api']} {i.get('version')} ({i['num_threads']} threads)"
        for i in threadpool_info()
    )
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {platform.platform()}, {platform.processor() or 'cpu'}")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, scipy "
        f"{scipy.__version__}, scikit-learn {sklearn.__version__}, onnxruntime "
        f"{onnxruntime.__version__}, skl2onnx {skl2onnx.__version__}; BLAS: {blas}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows and nets")
    args = parser.parse_args()
    header()
    print("\n### Certificates per response precision\n")
    print_table(bench(args.quick))
    print("\n### Region reuse\n")
    print_table(bench_reuse(args.quick))


if __name__ == "__main__":
    main()
