"""Small random binary networks near saturation, float64 ``predict_proba``.

A binary model computes its smaller probability as one minus the other, so
that probability carries an absolute rounding error (0.5 eps / p in log
space) as well as the relative one; near saturation it rules the noise. For
each of ``--networks`` networks of ``_served.random_binary_mlp`` (3 to 11
features, 4 to 23 hidden units, an output gain of 1 to e^3, 80 rows), the
rows are explained with the defaults and compared with
``local_linear_model``: the statuses, the certified rows whose error is above
their ``error_bound``, the largest error over bound, and the exact rows above
``rtol``, in groups of networks by the smaller probability of the row.

Usage::

    python benchmarks/bench_binary.py [--networks 400]
"""

# SPDX-License-Identifier: BSD-3-Clause

import argparse
import warnings

import numpy as np
from _lime_models import header, limit_blas, table
from bench_precision import CERTIFIED, errors
from sklearn.exceptions import ConvergenceWarning

from sklearn_plm_explain import OpenAPIExplainer
from sklearn_plm_explain.utils._served import random_binary_mlp

# The rows' smaller probability, by bands: below the grid's point-by-point
# cutoff, the band where the absolute error of 1 - p still rules, above it.
_BANDS = [(0.0, 2.0**-10), (2.0**-10, 2.0**-6), (2.0**-6, 0.5 + 1e-12)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--networks", type=int, default=400)
    args = parser.parse_args()
    blas = limit_blas(1)  # noqa: F841 - keeps the limit for the run
    print(header("Random binary networks near saturation"))
    small, status, err, bound, rtols = [], [], [], [], []
    for seed in range(args.networks):
        mlp, X, rows = random_binary_mlp(seed)
        explainer = OpenAPIExplainer(mlp, random_state=seed).fit(X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            e = explainer.explain(rows)
        small.append(mlp.predict_proba(rows).min(axis=1))
        status.append(e.status)
        err.append(errors(e, mlp, rows))
        bound.append(e.error_bound)
        rtols.append(np.full(len(rows), explainer.rtol))
    small, status, err, bound, rtols = map(
        np.concatenate, (small, status, err, bound, rtols)
    )
    out = []
    for lo, hi in _BANDS:
        band = (small >= lo) & (small < hi)
        certified = band & np.isin(status, CERTIFIED)
        past = certified & ~(err <= bound)
        worst = np.max(err[certified] / bound[certified], initial=0.0)
        counts = {k: int(np.sum(band & (status == k))) for k in np.unique(status)}
        out.append(
            [
                f"[{lo:.3g}, {min(hi, 0.5):.3g})",
                int(band.sum()),
                ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v),
                f"{int(past.sum())} of {int(certified.sum())}",
                f"{worst:.3g}",
                int(np.sum(band & (status == "exact") & (err > rtols))),
            ]
        )
    columns = ["smaller probability", "rows", "statuses", "past their bounds"]
    columns += ["max err / bound", "exact above rtol"]
    print(f"\n{args.networks} networks, 80 rows each\n")
    print(table(columns, out))


if __name__ == "__main__":
    main()
