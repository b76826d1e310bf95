"""The shared reference models of the benchmarks and the demo.

Each is built from data that ships with scikit-learn, with a fixed split and
seed, so figures are comparable across runs and with published anchors.
"""

# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

__all__ = ["AnchorModel", "make_anchor_model", "ANCHOR_MODELS"]

ANCHOR_MODELS = ("digits_mlp", "bc_mlp", "bc_rf")


@dataclass
class AnchorModel:
    """A fitted model with its train/test split."""

    name: str
    model: object
    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    image_shape: tuple = None


def make_anchor_model(name):
    """Build one of the reference models.

    Parameters
    ----------
    name : {"digits_mlp", "bc_mlp", "bc_rf"}
        ``digits_mlp``: digits pixels / 16, ``MLPClassifier((64, 32))``;
        ``bc_mlp``: standardised breast cancer, ``MLPClassifier((32, 16))``;
        ``bc_rf``: raw breast cancer, ``RandomForestClassifier(500)``. All use
        ``train_test_split(test_size=0.2, random_state=0)``.

    Returns
    -------
    anchor : AnchorModel
    """
    if name == "digits_mlp":
        X, y = load_digits(return_X_y=True)
        X = X / 16.0
        model = MLPClassifier((64, 32), max_iter=500, random_state=0)
        shape = (8, 8)
    elif name in ("bc_mlp", "bc_rf"):
        X, y = load_breast_cancer(return_X_y=True)
        shape = None
        if name == "bc_mlp":
            model = MLPClassifier((32, 16), max_iter=500, random_state=0)
        else:
            model = RandomForestClassifier(n_estimators=500, random_state=0)
    else:
        raise ValueError(f"Unknown anchor model {name!r}; choose from {ANCHOR_MODELS}.")
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, random_state=0
    )
    if name == "bc_mlp":
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    model.fit(X_train, y_train)
    return AnchorModel(name, model, X_train, X_test, y_train, y_test, shape)
