"""
===========================================
Decision features of digits, class by class
===========================================

A ReLU network and a logistic model tree are piecewise-linear models: at
every input they are a softmax of affine logits. :class:`OpenAPIExplainer`
recovers, from queries alone, the *decision features* of the predicted class
at each test image, certifies them, and here we average them over the images
of each class. Red pixels push towards the class, blue pixels away from it,
white pixels do not matter; the colour scale is symmetric around zero.
"""

# %%
# A ReLU network on the digits
# ----------------------------
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from sklearn_plm_explain import (
    ExplanationDisplay,
    LogisticModelTreeClassifier,
    OpenAPIExplainer,
    decision_features,
    local_linear_model,
)

X, y = load_digits(return_X_y=True)
X = X / 16.0
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
mlp = MLPClassifier((64, 32), max_iter=500, random_state=0).fit(X_train, y_train)
print(f"MLP test accuracy: {mlp.score(X_test, y_test):.3f}")

explainer = OpenAPIExplainer(mlp, random_state=0).fit(X_train)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # statuses are below
    mlp_expl = explainer.explain(X_test)
print(mlp_expl)

# %%
# The certificate is honest: compare with the network's own weights.
W, _ = local_linear_model(mlp, X_test)
truth = decision_features(W, mlp_expl.target)
exact = mlp_expl.converged
error = np.abs(mlp_expl.values - truth).sum(1) / np.abs(truth).sum(1)
print(
    f"largest relative L1 error over the {exact.sum()} exact rows: "
    f"{error[exact].max():.1e}"
)

# %%
# One row: the image next to its decision features.
fig, (left, right) = plt.subplots(1, 2, figsize=(7, 3.2), layout="constrained")
left.imshow(X_test[0].reshape(8, 8), cmap="gray_r")
left.set_title(f"test image 0 (predicted {mlp.predict(X_test[:1])[0]})")
left.set_axis_off()
mlp_expl.plot(row=0, image_shape=(8, 8), ax=right)

# %%
# The average decision features of each predicted class.
display = ExplanationDisplay.from_explanation(
    mlp_expl, kind="class_average", image_shape=(8, 8)
)
_ = display.figure_.suptitle("MLP: mean decision features per predicted class")

# %%
# A logistic model tree
# ---------------------
# The tree's leaves are multinomial logistic models, so the same explainer
# applies. On this split cross-validated pruning keeps a single leaf: the
# tree is one multinomial logistic model, each class's decision features are
# the same at every row, and the averages below are exactly those weights.
lmt = LogisticModelTreeClassifier(random_state=0).fit(X_train, y_train)
print(
    f"LMT test accuracy: {lmt.score(X_test, y_test):.3f}, {lmt.get_n_leaves()} leaves"
)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    lmt_expl = OpenAPIExplainer(lmt, random_state=0).fit(X_train).explain(X_test)
print(lmt_expl)

display = ExplanationDisplay.from_explanation(
    lmt_expl, kind="class_average", image_shape=(8, 8)
)
_ = display.figure_.suptitle("LMT: mean decision features per predicted class")
