"""
=============================================
Exact, approximate and surrogate explanations
=============================================

On the same test rows of a ReLU network we compare three ways of reading the
local behaviour of a model from queries, against the truth computed from the
network's weights (:func:`local_linear_model`):

* :class:`OpenAPIExplainer`, which fits the local linear model on a small cube
  and certifies it;
* ZOO-style finite differences: central differences of the centred
  log-probabilities, one pair of queries per feature, at a fixed step ``h``;
* LIME, whose surrogate is fitted to the probability of the explained class
  over a wide neighbourhood.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from sklearn_plm_explain import (
    LimeTabularExplainer,
    OpenAPIExplainer,
    decision_features,
    local_linear_model,
)

X, y = load_digits(return_X_y=True)
X = X / 16.0
X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.2, random_state=0)
mlp = MLPClassifier((64, 32), max_iter=500, random_state=0).fit(X_train, y_train)
rows = X_test[:40]
target = mlp.predict(rows)  # explain the predicted class (labels are 0..9)
W, _ = local_linear_model(mlp, rows)
truth = decision_features(W, target)

# %%
# OpenAPI
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    openapi = OpenAPIExplainer(mlp, random_state=0).fit(X_train).explain(rows)
print(openapi)
print(f"OpenAPI: {openapi.n_queries.mean():.0f} queries per row")


# %%
# Finite differences (the zeroth-order estimate of ZOO) of the centred
# log-probabilities give ``C/(C-1)`` times the decision features.
def finite_differences(model, rows, target, h):
    n, d = rows.shape
    steps = h * np.eye(d)
    points = np.concatenate([rows[:, None] + steps, rows[:, None] - steps], axis=1)
    logp = np.log(model.predict_proba(points.reshape(-1, d))).reshape(n, 2 * d, -1)
    clr = logp - logp.mean(axis=2, keepdims=True)
    slope = (clr[:, :d] - clr[:, d:]) / (2 * h)  # (n, d, C)
    C = slope.shape[2]
    return C / (C - 1) * slope[np.arange(n), :, target]


zoo = {h: finite_differences(mlp, rows, target, h) for h in (1e-1, 1e-3, 1e-6)}
print(f"finite differences: {2 * rows.shape[1]} queries per row")

# %%
# LIME on the raw pixels (no discretisation), weights per unit of each pixel.
lime = LimeTabularExplainer(
    mlp,
    discretize_continuous=False,
    num_features=64,
    num_samples=2000,
    random_state=0,
).fit(X_train)
lime_expl = lime.explain(rows, target=target)
# LIME works on standardised features (constant pixels keep unit scale).
std = X_train.std(axis=0)
lime_values = lime_expl.values / np.where(std > 0, std, 1.0)
print(f"LIME: {lime_expl.n_queries.mean():.0f} queries per row")


# %%
# Relative L1 error against the truth, and cosine similarity (LIME explains a
# probability, not a log-ratio, so only its direction is comparable).
def relative_error(est):
    return np.abs(est - truth).sum(1) / np.abs(truth).sum(1)


def cosine(est):
    return (est * truth).sum(1) / (
        np.linalg.norm(est, axis=1) * np.linalg.norm(truth, axis=1)
    )


methods = {"OpenAPI": openapi.values}
methods.update({f"FD h={h:g}": v for h, v in zoo.items()})
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
left.boxplot([relative_error(v) for v in methods.values()])
left.set_xticks(range(1, len(methods) + 1), labels=list(methods))
left.set_yscale("log")
left.set_ylabel("relative L1 error of the decision features")
left.set_title("Error against the network's weights")
left.axhline(1e-8, color="0.5", linestyle="--", linewidth=1)
left.annotate("rtol 1e-8", (0.55, 1.4e-8), color="0.4")
methods["LIME"] = lime_values
right.boxplot([cosine(v) for v in methods.values()])
right.set_xticks(range(1, len(methods) + 1), labels=list(methods))
right.set_ylabel("cosine similarity with the truth")
right.set_title("Direction")
for a in (left, right):
    a.tick_params(axis="x", labelrotation=30)
for name, v in methods.items():
    print(
        f"{name:10s} median rel. error {np.median(relative_error(v)):.1e}, "
        f"median cosine {np.median(cosine(v)):.3f}"
    )

# %%
# Finite differences with a well-chosen step are accurate on most rows too,
# but nothing tells their user which step that is, or which rows had a step
# that crossed into another linear region (most rows at ``h=0.1``, one row at
# ``h=1e-3`` with an error of a few percent) or drowned in rounding
# (``h=1e-6``). OpenAPI's ``status`` and ``error_bound`` say it per row: its
# ``"exact"`` rows are within ``rtol`` of the truth, and the one row it could
# not certify (a region boundary) is flagged, not passed off as exact. LIME's
# surrogate describes a wide neighbourhood of the probability instead, and its
# direction differs from the local decision features.
