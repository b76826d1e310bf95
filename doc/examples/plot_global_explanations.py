"""
===============================================================
From local to global: submodular pick and the census of regions
===============================================================

A local explanation speaks for one row. To explain a model as a whole, a
reader needs a few rows that stand for the rest.

* :func:`~sklearn_plm_explain.submodular_pick` (SP-LIME, Ribeiro et al.
  2016) picks a budget of rows whose explanations together cover the
  features that matter most across the data, each feature once. It works on
  the explanation of any explainer.
* :func:`~sklearn_plm_explain.region_census` goes further for a
  piecewise-linear model explained by
  :class:`~sklearn_plm_explain.OpenAPIExplainer`: it groups the rows whose
  certified local models are the same, so it says exactly how many linear
  models the data touch and which rows share each one.
"""

# %%
# Submodular pick over LIME explanations
# --------------------------------------
# A gradient-boosted classifier of breast cancer, explained by LIME on every
# test row (five features each, in lime's wording: a weight belongs to the
# row's bin of a feature).
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from sklearn_plm_explain import (
    LimeTabularExplainer,
    LogisticModelTreeClassifier,
    OpenAPIExplainer,
    region_census,
    submodular_pick,
)

data = load_breast_cancer()
# Class names, not indices, so that every title says "benign".
labels = data.target_names[data.target]
X_train, X_test, y_train, y_test = train_test_split(
    data.data, labels, test_size=0.2, random_state=0
)
model = GradientBoostingClassifier(random_state=0).fit(X_train, y_train)
lime = LimeTabularExplainer(
    model,
    feature_names=data.feature_names,
    num_features=5,
    num_samples=1000,
    random_state=0,
).fit(X_train)
explanation = lime.explain(X_test, target="benign")
print(explanation)
print(explanation.as_list(0))

# %%
# Four rows, picked greedily: each adds the most global importance (the
# square root of a feature's summed absolute weights over all rows) not yet
# covered by the rows before it.
pick = submodular_pick(explanation, budget=4, attribution="slope")
print("picked rows:", pick.rows.tolist())
print("importance covered after each pick:", np.round(pick.coverage, 3).tolist())

fig, axes = plt.subplots(2, 2, figsize=(13, 6), layout="constrained")
for ax, row in zip(axes.ravel(), pick.rows):
    explanation.plot(row=int(row), ax=ax, attribution="slope")
_ = fig.suptitle("Submodular pick: four LIME explanations covering the model")

# %%
# The same budget spent on random rows covers less: the greedy pick avoids
# showing the same dominant features again and again.
rng = np.random.default_rng(0)
present = np.zeros(explanation.values.shape, dtype=bool)
for i, sel in enumerate(explanation.selected):
    present[i, sel[sel >= 0]] = True
budgets = np.arange(1, 9)
greedy = [
    submodular_pick(explanation, b, attribution="slope").coverage[-1] for b in budgets
]
random_rows = [
    np.mean(
        [
            pick.importance[
                present[rng.choice(len(present), b, replace=False)].any(0)
            ].sum()
            / pick.importance.sum()
            for _ in range(200)
        ]
    )
    for b in budgets
]
fig, ax = plt.subplots(figsize=(5, 3.2), layout="constrained")
ax.plot(budgets, greedy, "o-", label="submodular pick")
ax.plot(budgets, random_rows, "s--", label="random rows (mean of 200)")
ax.set_xlabel("rows shown (budget)")
ax.set_ylabel("share of global importance covered")
ax.set_ylim(0, 1.02)
_ = ax.legend()

# %%
# A census of linear regions
# --------------------------
# A logistic model tree is one multinomial logistic model per leaf, so it is
# a piecewise-linear model. OpenAPI recovers each row's local model from
# queries alone, and the census groups the rows that share one. Pixels are
# multiples of 1/16 and so are some split points: the few rows that sit
# exactly on a split are flagged (``boundary``), and are left out of the
# census.
X, y = load_digits(return_X_y=True)
X = X / 16.0
lmt = LogisticModelTreeClassifier(
    prune=False, max_depth=3, split_point="midpoint", random_state=0
).fit(X[:1200], y[:1200])
rows = X[1200:]
explainer = OpenAPIExplainer(lmt, reuse_regions=True, random_state=0).fit(X[:1200])
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    regions = explainer.explain(rows)
census = region_census(regions)
print(
    f"{regions.converged.sum()} of {len(rows)} rows certified exact; they touch "
    f"{census.n_regions} linear models; rows per model: {census.counts.tolist()}"
)

# %%
# The census needs no access to the tree, yet it matches the tree's own
# partition: every region found is one leaf, and every certified row of a
# leaf is in its region.
leaves = lmt.apply(rows)
exact = census.labels >= 0
pairs = sorted({(int(a), int(b)) for a, b in zip(census.labels[exact], leaves[exact])})
print("(region, leaf) pairs:", pairs)
print("the tree has", lmt.get_n_leaves(), "leaves")

# %%
# Each region's model, seen through one class: the decision features of
# digit 3 at the first row of every region (``D_3 = C / (C - 1)`` times the
# centred slope of class 3), on one colour scale. They are *standardized*:
# multiplied by each pixel's standard deviation, because a pixel that is
# almost always blank can carry a huge slope per unit that moves no
# prediction (the reason bar charts show contributions by default). Within a
# region they are the same for every row, by construction of the census.
std = X[:1200].std(axis=0)
d3 = np.stack([regions.coef[r][:, 3] * 10 / 9 * std for r in census.representative])
# A few pixels carry most of each model (LogitBoost adds one pixel at a
# time): the colour scale stops at the 98th percentile, beyond it colours
# saturate.
limit = np.percentile(np.abs(d3), 98)
n_cols = 4
fig, axes = plt.subplots(
    -(-census.n_regions // n_cols), n_cols, figsize=(8, 4.6), layout="constrained"
)
for k, ax in enumerate(axes.ravel()):
    ax.set_axis_off()
    if k >= census.n_regions:
        continue
    shown = ax.imshow(d3[k].reshape(8, 8), cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_title(f"region {k}: {census.counts[k]} rows", fontsize="small")
bar = fig.colorbar(shown, ax=list(axes.ravel()), shrink=0.9, extend="both")
bar.set_label(
    "change of digit 3's log-ratio per std of the pixel\nred: raises it, blue: lowers it"
)
_ = fig.suptitle("Standardized decision features of digit 3 in each linear region")
