"""
=======================================
Explaining a Pipeline on a DataFrame
=======================================

The explainers accept pandas DataFrames and keep their column names. A
:class:`~sklearn.pipeline.Pipeline` of a scaler and a ReLU network is still a
piecewise-linear model of the raw columns, so :class:`OpenAPIExplainer`
explains it exactly, in the units of the raw data. Models with string
categorical columns are explained with LIME and S-LIME, which sample
categories from their training frequencies and query the model with strings.
"""

# %%
# A numeric Pipeline: OpenAPI
# ---------------------------
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from sklearn_plm_explain import (
    LimeTabularExplainer,
    OpenAPIExplainer,
    StableLIMEExplainer,
)

data = load_breast_cancer(as_frame=True)
# Class names, not indices, so that every title says "benign".
X, y = data.data, data.target_names[data.target]
pipe = make_pipeline(
    StandardScaler(), MLPClassifier((32, 16), max_iter=1000, random_state=0)
).fit(X, y)

explainer = OpenAPIExplainer(pipe, random_state=0).fit(X)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    explanation = explainer.explain(X.iloc[:20])
print(explanation)
print(explanation.to_frame()[["status", "target_label", "n_queries"]].head())

# %%
# The first row's largest decision features are slopes per unit of each raw
# column, so they are large for columns with a small range ("smoothness
# error" varies by 0.003): they rank units, not influence. What moved this
# prediction are the *contributions*, slope times the row's distance from
# the background mean, which add up to the model's log-odds; bar charts
# show them by default.
exact_row = int(np.flatnonzero(explanation.converged)[0])
print("slopes:       ", explanation.as_list(exact_row, top_k=3, attribution="slope"))
print(
    "contributions:",
    explanation.as_list(exact_row, top_k=3, attribution="contribution"),
)
_ = explanation.plot(row=exact_row, top_k=8)

# %%
# A string categorical column: LIME and S-LIME
# --------------------------------------------
# A loan-like data set generated here: three numeric columns and a region.
rng = np.random.default_rng(0)
n = 600
loans = pd.DataFrame(
    {
        "income": rng.normal(50, 15, n),
        "debt": rng.normal(20, 8, n),
        "years_employed": rng.integers(0, 30, n).astype(float),
        "region": rng.choice(["north", "south", "east", "west"], n),
    }
)
region_effect = loans["region"].map(
    {"north": 1.0, "south": -1.0, "east": 0.0, "west": 0.5}
)
logit = 0.08 * (loans["income"] - 50) - 0.15 * (loans["debt"] - 20) + region_effect
approved = (logit + rng.logistic(size=n) > 0).astype(int)

model = make_pipeline(
    ColumnTransformer(
        [("region", OneHotEncoder(), ["region"])], remainder=StandardScaler()
    ),
    LogisticRegression(),
).fit(loans, approved)

# ``region`` holds strings, so the explainers treat it as categorical.
lime = LimeTabularExplainer(model, num_features=4, random_state=0).fit(loans)
slime = StableLIMEExplainer(model, num_features=4, random_state=0).fit(loans)
rows = loans.iloc[:3]
lime_expl = lime.explain(rows, target=1)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    slime_expl = slime.explain(rows, target=1)
print(rows)
print("LIME:  ", lime_expl.as_list(0))
print("S-LIME:", slime_expl.as_list(0), "samples:", slime_expl.n_samples[0])

# %%
# Each LIME weight belongs to the row's quartile bin of a numeric column or
# to "same region as the row", and its label says so, in lime's wording: a
# debt in the lowest quartile raises the approval probability, as the data
# were generated. Side by side, on axes we provide:
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.4), layout="constrained")
lime_expl.plot(row=0, ax=left)
slime_expl.plot(row=0, ax=right)
left.set_title("LIME, row 0, class 1")
_ = right.set_title("S-LIME, row 0, class 1")
