"""Draw the README's picture: one digit, explained exactly and by LIME.

Run from the repository root (a few seconds; only scikit-learn's bundled
digits are used)::

    python doc/make_readme_figure.py

It writes ``doc/images/readme_explanation.png`` (900 x 450 pixels).
"""

import warnings
from pathlib import Path

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

OUT = Path(__file__).resolve().parent / "images" / "readme_explanation.png"
ROW = 0


def main():
    import matplotlib

    matplotlib.use("Agg")  # a file is written, no window opened
    import matplotlib.pyplot as plt

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.2, random_state=0)
    mlp = MLPClassifier((64, 32), max_iter=500, random_state=0).fit(X_train, y_train)
    x = X_test[[ROW]]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        exact = OpenAPIExplainer(mlp, random_state=0).fit(X_train).explain(x)
        lime = (
            LimeTabularExplainer(mlp, random_state=0, discretize_continuous=False)
            .fit(X_train)
            .explain(x)
        )

    W, _ = local_linear_model(mlp, x)
    truth = decision_features(W, exact.target)
    error = np.abs(exact.values - truth).sum() / np.abs(truth).sum()

    plt.rcParams.update({"font.size": 9})
    fig, (left, middle, right) = plt.subplots(
        1,
        3,
        figsize=(9, 4.5),
        dpi=100,
        layout="constrained",
        gridspec_kw={"width_ratios": [1, 1.3, 1.3]},
    )
    left.imshow(x.reshape(8, 8), cmap="gray_r")
    left.set_title(f"a test digit\n(the network predicts {mlp.predict(x)[0]})")
    left.set_axis_off()
    exact.plot(row=0, image_shape=(8, 8), ax=middle)
    middle.set_title(
        f"OpenAPIExplainer: {exact.status[0]!r}\n"
        f"{exact.n_queries[0]} queries, certified;\n"
        f"off the weights by {error:.0e} (L1)"
    )
    lime.plot(row=0, image_shape=(8, 8), ax=right)
    right.set_title(
        f"LIME (10 features kept)\n{lime.n_queries[0]} queries,\nno certificate"
    )
    fig.suptitle(
        "Decision features of one digit, from predict_proba queries alone "
        "(red: towards the class, blue: away from it)"
    )
    OUT.parent.mkdir(exist_ok=True)
    fig.savefig(OUT, dpi=100)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
