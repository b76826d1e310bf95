"""Digests of every explainer's results on a fixed set of configurations.

A refactoring must not change behaviour: run this script before and after,
and the digests (SHA-256 of every field of every Explanation, bit for bit,
plus the query counts) must agree line by line; ``--skip n_queries`` leaves
a field out, for a change meant to save queries and nothing else.
Configurations cover the
float64, float32 (ONNX Runtime), rounded and noisy OpenAPI paths, region
sharing, checkpointed chunks, two workers, LIME, S-LIME and the LMT.

Usage::

    python benchmarks/bench_identity.py [--out FILE] [--skip FIELD ...]
"""

import argparse
import hashlib
import json
import sys
import tempfile
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_plm_explain import (
    Checkpoint,
    Explanation,
    LimeTabularExplainer,
    LogisticModelTreeClassifier,
    OpenAPIExplainer,
    StableLIMEExplainer,
)
from sklearn_plm_explain.utils._served import jittered, onnx_float32, rounded


def digest(explanation, skip=()):
    """SHA-256 of the Explanation's JSON form (floats written exactly),
    without the per-row fields named in ``skip``."""
    data = explanation.to_dict()
    for name in skip:
        data["rows"].pop(name, None)
    # A callable's repr carries its address, which changes from run to run.
    data["params"].pop("estimator", None)
    text = json.dumps(data, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _mlp(X, y, hidden, seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return MLPClassifier(hidden, max_iter=300, random_state=seed).fit(X, y)


def configurations():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.2, random_state=0)
    digits = _mlp(Xtr, ytr, (64, 32))
    rows = Xte[:40]

    Xb, yb = load_breast_cancer(return_X_y=True)
    btr, bte, ybtr, _ = train_test_split(Xb, yb, test_size=0.2, random_state=0)
    bc = make_pipeline(
        StandardScaler(), MLPClassifier((32,), max_iter=400, random_state=0)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        bc.fit(btr, ybtr)
    lmt = LogisticModelTreeClassifier(random_state=0).fit(Xtr, ytr)
    onnx = onnx_float32(digits, X.shape[1])

    def openapi(model, data, rows, **kw):
        def run():
            ex = OpenAPIExplainer(model, random_state=0, **kw).fit(data)
            return ex.explain(rows)

        return run

    def chunked(model, data, rows, **kw):
        def run():
            ex = OpenAPIExplainer(model, random_state=0, **kw).fit(data)
            with tempfile.TemporaryDirectory() as tmp:
                chunks = ex.explain_chunked(
                    rows, checkpoint=Checkpoint(f"{tmp}/ck", chunk_size=7)
                )
                return Explanation.concat(list(chunks))

        return run

    def lime(cls, model, data, rows, **kw):
        def run():
            return cls(model, random_state=0, **kw).fit(data).explain(rows)

        return run

    return {
        "openapi digits float64": openapi(digits, Xtr, rows),
        "openapi digits auto radius": openapi(digits, Xtr, rows, init_radius="auto"),
        "openapi digits n_jobs=2": openapi(digits, Xtr, rows, n_jobs=2),
        "openapi digits chunked": chunked(digits, Xtr, rows),
        "openapi breast cancer pipeline": openapi(bc, btr, bte[:40]),
        "openapi LMT reuse_regions": openapi(lmt, Xtr, rows, reuse_regions=True),
        "openapi LMT": openapi(lmt, Xtr, rows[:20]),
        "openapi ONNX float32": openapi(onnx, Xtr, rows[:20]),
        "openapi rounded 1e-10": openapi(
            rounded(digits.predict_proba, 10), Xtr, rows[:15]
        ),
        "openapi jittered": openapi(jittered(digits, 1e-9, seed=0), Xtr, rows[:15]),
        "lime digits": lime(LimeTabularExplainer, digits, Xtr, rows[:10]),
        "s-lime breast cancer": lime(StableLIMEExplainer, bc, btr, bte[:5]),
        "lmt tree": lambda: lmt,
    }


def lmt_digest(lmt):
    parts = [
        repr(lmt.get_params()),
        repr(lmt.n_leaves_ if hasattr(lmt, "n_leaves_") else ""),
    ]
    X, _ = load_digits(return_X_y=True)
    parts.append(np.asarray(lmt.predict_proba(X / 16.0)).tobytes().hex())
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--skip", nargs="*", default=[], help="per-row fields left out of the digests"
    )
    args = parser.parse_args(argv)
    lines = []
    warnings.simplefilter("ignore")
    for name, run in configurations().items():
        result = run()
        if name == "lmt tree":
            line = f"{name}: {lmt_digest(result)}"
        else:
            queries = (
                int(np.sum(result.n_queries)) if "n_queries" in result.fields else -1
            )
            line = f"{name}: {digest(result, args.skip)} (rows {len(result)}, "
            line += f"queries {queries})"
        print(line, flush=True)
        lines.append(line)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
