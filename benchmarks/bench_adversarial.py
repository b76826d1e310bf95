"""Constructions built to fool OpenAPIExplainer's certificate, row by row.

Every construction is a function ``build_<NAME>(n_rows=300, seed=0)`` returning
``(model, truth, X_fit, rows)``:

* ``model``: what the explainer is given (an estimator or a callable
  ``f(X) -> probabilities``);
* ``truth``: an estimator that :func:`sklearn_plm_explain.local_linear_model`
  understands, or a callable ``truth(X) -> W`` of shape (n, d, C) giving the
  logit slopes of the underlying float64 model at each row (``W[:, :, 0] = 0``
  for binary models is fine: only centred slopes matter);
* ``X_fit``: data for ``OpenAPIExplainer.fit``;
* ``rows``: rows for ``explain``.

``EXPLAINER_KWARGS[NAME]`` holds extra explainer parameters a construction
needs (F2). A smoothed service carries ``service_slopes(X)``, its own
gradient, and a service of replicas its ``replicas``: the notes measure
certified rows against those too. The error measure is ``errors()`` of benchmarks/bench_precision.py:
the worst class's relative L1 error of ``C/(C-1) * e.coef[:, :, c]`` against
``decision_features(W, c)``.

Usage::

    python benchmarks/bench_adversarial.py [--only NAME [NAME ...]] [--rows N] [--seed S]
                      [--details] [--out FILE] [--kw key=value ...]
"""

import argparse
import sys
import time
import traceback
import warnings

import numpy as np
from bench_precision import class_errors
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_plm_explain import OpenAPIExplainer, local_linear_model
from sklearn_plm_explain.utils._served import (
    mlp_logits,
    onnx_float32,
    weak_kink_mlp,
)

CERTIFIED = ("exact", "approximate")


# -- error measure (bench_precision.errors, with callable truths) ------------------
def truth_slopes(truth, X):
    """Logit slopes (n, d, C) of the ground truth at the rows ``X``."""
    if hasattr(truth, "fit") or hasattr(truth, "local_linear_model"):
        return local_linear_model(truth, X)[0]
    return np.asarray(truth(X), dtype=np.float64)


def errors(e, truth, X):
    """As benchmarks/bench_precision.py: worst class's relative L1 error."""
    return class_errors(e, truth_slopes(truth, X))


# -- shared pieces -----------------------------------------------------------------
def _fit_mlp(hidden, X, y, seed=0, max_iter=500):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return MLPClassifier(hidden, max_iter=max_iter, random_state=seed).fit(X, y)


def _digits_split():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    return train_test_split(X, y, test_size=0.2, random_state=0)


_DIGITS_MLP = {}


def digits_mlp():
    """The digits MLP(64, 32) of bench_precision (X / 16, 80/20 split, seed 0).

    Returns ``(mlp, X_train, X_pool)``; ``X_pool`` = test rows then train rows.
    """
    if "m" not in _DIGITS_MLP:
        X_train, X_test, y_train, _ = _digits_split()
        mlp = _fit_mlp((64, 32), X_train, y_train)
        _DIGITS_MLP["m"] = (mlp, X_train, np.vstack([X_test, X_train]))
    return _DIGITS_MLP["m"]


def soft_digits_mlp(temperature):
    """The digits MLP with its output layer divided by ``temperature`` (a
    different, less confident network; it is its own ground truth)."""
    import copy

    mlp, X_train, pool = digits_mlp()
    if temperature == 1:
        return mlp, X_train, pool
    soft = copy.deepcopy(mlp)
    soft.coefs_[-1] = soft.coefs_[-1] / temperature
    soft.intercepts_[-1] = soft.intercepts_[-1] / temperature
    return soft, X_train, pool


def _take(pool, n_rows):
    reps = int(np.ceil(n_rows / len(pool)))
    return np.vstack([pool] * reps)[:n_rows].copy()


def place_binary_logits(mlp, starts, targets, n_iter=80, tol=1e-9, max_step=0.5):
    """Damped Newton steps (exact PL gradients) taking each start to a row whose
    float64 logit ``mlp_logits(mlp, x)[0]`` equals ``targets`` (binary MLP).

    Returns ``(rows, logits)``; rows that did not converge are dropped.
    """
    Z = np.array(starts, dtype=np.float64)
    for _ in range(n_iter):
        s = mlp_logits(mlp, Z)[:, 0]
        g = local_linear_model(mlp, Z)[0][:, :, 1]  # class-1 logit slope
        gap = targets - s
        if np.all(np.abs(gap) < tol):
            break
        step = (gap / np.einsum("ij,ij->i", g, g))[:, None] * g
        norm = np.linalg.norm(step, axis=1)
        step *= np.minimum(1.0, max_step / np.maximum(norm, 1e-300))[:, None]
        Z = Z + step
    s = mlp_logits(mlp, Z)[:, 0]
    ok = np.abs(targets - s) < 1e-6
    return Z[ok], s[ok]


def _side_tags(z):
    """'small p1' (z < 0) or 'small p0' (z > 0), with the logit."""
    return [f"small p{0 if v > 0 else 1} (z={v:.2f})" for v in z]


def _signed_targets(rng, n, lo, hi):
    """Logits with |z| ~ U(lo, hi), alternately negative (small p1) and positive
    (small p0)."""
    sign = np.where(np.arange(n) % 2 == 0, -1.0, 1.0)
    return sign * rng.uniform(lo, hi, n)


class HingeNet:
    """A one-hidden-layer ReLU network with an always-affine part:
    ``logits = X @ A + c + relu(X @ U + u0) @ V``, answered as softmax
    probabilities in float64 (``__call__`` = ``predict_proba``).

    ``slopes(X)`` is its analytic local linear model (n, d, C).
    """

    def __init__(self, A, c, U, u0, V, chunk=1024):
        self.A, self.c, self.U, self.u0, self.V = A, c, U, u0, V
        self.chunk = chunk

    def logits(self, X):
        X = np.asarray(X, dtype=np.float64)
        out = np.empty((X.shape[0], self.A.shape[1]))
        for a in range(0, X.shape[0], self.chunk):
            x = X[a : a + self.chunk]
            h = np.maximum(x @ self.U + self.u0, 0.0)
            out[a : a + self.chunk] = x @ self.A + self.c + h @ self.V
        return out

    def predict_proba(self, X):
        z = self.logits(X)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    __call__ = predict_proba

    def active(self, X):
        X = np.asarray(X, dtype=np.float64)
        return (X @ self.U + self.u0) > 0.0

    def slopes(self, X):
        on = self.active(X).astype(np.float64)
        return self.A[None] + np.einsum("dh,nh,hc->ndc", self.U, on, self.V)


class TaggedRows(np.ndarray):
    """Rows with a per-row description ``tags`` (shown by ``--details``); a
    plain ndarray for every other purpose (``np.asarray`` drops the tags)."""


def _tagged(rows, tags):
    out = np.asarray(rows).view(TaggedRows)
    out.tags = np.asarray(tags, dtype=object)
    return out


def _base_affine(rng, d, C, n_fit=400):
    """Fit data (anisotropic scales), its std, and a random affine base A, c."""
    X = rng.standard_normal((n_fit, d)) * rng.uniform(0.5, 3.0, d)
    scale = X.std(axis=0)
    A = rng.standard_normal((d, C)) / scale[:, None]
    c = 0.3 * rng.standard_normal(C)
    return X, scale, A, c


def _hinge_size(A, n_scaled, v, rel):
    """Output-weight size of a unit with input weights ``n_scaled`` and output
    direction ``v`` whose slope change is ``rel`` (relative L1 of the centred
    slopes) of the base ``A``."""
    centred = A - A.mean(axis=1, keepdims=True)
    change = np.outer(n_scaled, v - v.mean())
    return rel * np.abs(centred).sum() / np.abs(change).sum()


# -- F1: ONNX Runtime float32, binary MLP ------------------------------------------
def build_F1(n_rows=300, seed=0, lo=4.0, hi=10.0):
    """skl2onnx/ORT float32 export of a binary MLP(32, 16) on StandardScaler'd
    breast cancer; rows placed (Newton on the float64 logit) at logits with
    |z| ~ U(lo, hi), alternating sign: even rows z < 0 (small p1), odd rows
    z > 0 (small p0 = 1 - p1 as ORT returns it). Truth: the sklearn MLP."""
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.2, random_state=0)
    mlp = _fit_mlp((32, 16), X_train, y_train)
    rng = np.random.default_rng(seed)
    starts = _take(X, n_rows + 40)
    starts = starts + 0.05 * rng.standard_normal(starts.shape)
    rows, z = place_binary_logits(
        mlp, starts, _signed_targets(rng, len(starts), lo, hi)
    )
    rows = _tagged(rows[:n_rows], _side_tags(z[:n_rows]))
    return onnx_float32(mlp, X.shape[1]), mlp, X_train, rows


def build_F1_digits(n_rows=300, seed=0, lo=4.0, hi=10.0):
    """As F1 on a binary digits task (digit < 5 vs >= 5), MLP(64, 32), d = 64."""
    X_train, X_test, y_train, _ = _digits_split()
    mlp = _fit_mlp((64, 32), X_train, (y_train >= 5).astype(int))
    rng = np.random.default_rng(seed)
    starts = _take(np.vstack([X_test, X_train]), n_rows + 40)
    rows, z = place_binary_logits(
        mlp, starts, _signed_targets(rng, len(starts), lo, hi)
    )
    rows = _tagged(rows[:n_rows], _side_tags(z[:n_rows]))
    return onnx_float32(mlp, X_train.shape[1]), mlp, X_train, rows


# -- F1': float64 tanh sigmoid of a linear model -----------------------------------
def build_F1p(n_rows=300, seed=0, lo=1.0, hi=17.0):
    """LogisticRegression on StandardScaler'd breast cancer, answered in float64
    as ``p = 0.5 * tanh(z / 2) + 0.5``, ``[1 - p, p]``. Rows: data rows moved
    along ``w`` to logits |z| ~ U(lo, hi), alternating sign. Truth: the LR."""
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    lr = LogisticRegression(max_iter=5000).fit(X, y)
    w, b = lr.coef_[0], lr.intercept_[0]
    rng = np.random.default_rng(seed)
    starts = _take(X, n_rows)
    z = _signed_targets(rng, n_rows, lo, hi)
    rows = starts + ((z - starts @ w - b) / (w @ w))[:, None] * w

    def predict_proba(Z):
        s = np.asarray(Z, dtype=np.float64) @ w + b
        p = 0.5 * np.tanh(0.5 * s) + 0.5
        return np.column_stack([1.0 - p, p])

    return predict_proba, lr, X, _tagged(rows, _side_tags(rows @ w + b))


# -- F6: clipped and renormalised probabilities ------------------------------------
def build_F6(n_rows=300, seed=0, lo=1e-7, temperature=1.0):
    """Digits MLP(64, 32) whose probabilities are clipped to [lo, 1 - lo] and
    renormalised to sum 1. Rows: digits test rows (then train rows).
    ``temperature`` > 1 divides the network's output layer (softer model)."""
    mlp, X_train, pool = soft_digits_mlp(temperature)

    def predict_proba(Z):
        P = np.clip(mlp.predict_proba(Z), lo, 1.0 - lo)
        return P / P.sum(axis=1, keepdims=True)

    return predict_proba, mlp, X_train, _take(pool, n_rows)


# -- F4: smoothed probabilities ----------------------------------------------------
def smoothed(mlp, eps):
    def predict_proba(Z):
        P = mlp.predict_proba(Z)
        return (P + eps) / (1.0 + P.shape[1] * eps)

    def service_slopes(Z):
        # The service's own gradient: log(P_k + eps) moves like
        # P_k / (P_k + eps) times log P_k; a common shift does not matter.
        W = local_linear_model(mlp, Z)[0]
        P = mlp.predict_proba(Z)
        log_p = W - np.einsum("nc,ndc->nd", P, W)[:, :, None]
        return (P / (P + eps))[:, None, :] * log_p

    predict_proba.service_slopes = service_slopes
    return predict_proba


def one_class_smoothed(mlp, eps, cls=0):
    def predict_proba(Z):
        P = mlp.predict_proba(Z)
        P[:, cls] += eps
        return P

    return predict_proba


def build_F4(n_rows=300, seed=0, eps=1e-7, one_class=False, temperature=1.0):
    """Digits MLP(64, 32) answering ``(P + eps) / (1 + K eps)``, or, with
    ``one_class``, ``P`` with ``eps`` added to class 0 only (sum 1 + eps).
    ``temperature`` > 1 divides the network's output layer (softer model)."""
    mlp, X_train, pool = soft_digits_mlp(temperature)
    f = one_class_smoothed(mlp, eps) if one_class else smoothed(mlp, eps)
    return f, mlp, X_train, _take(pool, n_rows)


# -- replicas that differ ------------------------------------------------------------
def build_replicas(n_rows=300, seed=0, chunk=16):
    """Digits MLP(64, 32) served by two replicas, the network and a copy with
    its weights rounded to float32, behind a gateway that sends each chunk
    of ``chunk`` points of a call (``None``: the whole call) to one drawn at
    random. The truth is the network; ``replicas`` are both."""
    import copy

    mlp, X_train, pool = digits_mlp()
    other = copy.deepcopy(mlp)
    for layers in (other.coefs_, other.intercepts_):
        layers[:] = [w.astype(np.float32).astype(np.float64) for w in layers]
    rng = np.random.default_rng(seed)
    models = (mlp, other)

    def predict_proba(Z):
        step = len(Z) if chunk is None else chunk
        parts = [
            models[rng.integers(2)].predict_proba(Z[a : a + step])
            for a in range(0, len(Z), step)
        ]
        return np.vstack(parts)

    predict_proba.replicas = models
    return predict_proba, mlp, X_train, _take(pool, n_rows)


# -- F5: thin slab -----------------------------------------------------------------
def build_F5(n_rows=300, seed=0, d=16, C=4, width=1e-7, rel=1e-5, inside=2 / 3):
    """Affine base logits plus, for every row, a slab
    ``size * v * clip(n.(x/scale) - t, 0, width)`` (two ReLU units) of width
    ``width`` standard deviations whose inside slope differs by ``rel``
    (relative L1 of the centred base slopes). A share ``inside`` of rows lies
    inside its slab (at U(0.02, 0.98) of the width), the others within
    10^U(-9, -6.5) std outside either face. Truth: ``HingeNet.slopes``."""
    rng = np.random.default_rng(seed)
    X, scale, A, c = _base_affine(rng, d, C)
    rows = 0.5 * rng.standard_normal((n_rows, d)) * scale
    U, u0, V, tags = [], [], [], []
    for i in range(n_rows):
        n = rng.standard_normal(d)
        n /= np.linalg.norm(n)
        ns = n / scale
        s0 = rows[i] @ ns
        if rng.uniform() < inside:
            u = rng.uniform(0.02, 0.98)
            t = s0 - u * width
            tags.append(f"inside ({u:.2f} of the width)")
        elif rng.uniform() < 0.5:
            gap = 10 ** rng.uniform(-9, -6.5)
            t = s0 + gap  # row below the slab
            tags.append(f"outside ({gap:.1e} std below)")
        else:
            gap = 10 ** rng.uniform(-9, -6.5)
            t = s0 - width - gap  # row above it
            tags.append(f"outside ({gap:.1e} std above)")
        v = rng.standard_normal(C)
        v /= np.linalg.norm(v)
        size = _hinge_size(A, ns, v, rel)
        U += [ns, ns]
        u0 += [-t, -(t + width)]
        V += [size * v, -size * v]
    net = HingeNet(A, c, np.array(U).T, np.array(u0), np.array(V))
    return net, net.slopes, X, _tagged(rows, tags)


# -- dense weak kinks --------------------------------------------------------------
def build_dense_kinks(
    n_rows=300, seed=0, d=16, C=4, per_row=16, rel=1e-7, saddle=False, dist=(-9, -4)
):
    """Affine base logits plus ``per_row`` weak ReLU hinges per row, each with a
    slope change ``rel`` (relative L1, times a log-uniform factor in [0.3, 3]),
    random directions, hyperplanes 10^U(*dist) std from the row on a random
    side. ``saddle``: the hinges come in pairs ``+size v |s_j - t_j|`` and
    ``-size v |s_k - t_k|`` (two ReLU units each, same ``v``): convex along one
    direction, concave along the other. Truth: ``HingeNet.slopes``."""
    rng = np.random.default_rng(seed)
    X, scale, A, c = _base_affine(rng, d, C)
    rows = 0.5 * rng.standard_normal((n_rows, d)) * scale
    U, u0, V, tags = [], [], [], []
    for i in range(n_rows):
        v, near = None, np.inf
        for j in range(per_row):
            n = rng.standard_normal(d)
            n /= np.linalg.norm(n)
            ns = n / scale
            gap = 10 ** rng.uniform(*dist)
            near = min(near, gap)
            t = rows[i] @ ns + rng.choice([-1, 1]) * gap
            if v is None or not saddle or j % 2 == 0:
                v = rng.standard_normal(C)
                v /= np.linalg.norm(v)
            size = _hinge_size(A, ns, v, rel) * 10 ** rng.uniform(-0.5, 0.5)
            if saddle:
                sign = 1.0 if j % 2 == 0 else -1.0
                U += [ns, -ns]
                u0 += [-t, t]
                V += [sign * size * v, sign * size * v]
            else:
                U.append(ns)
                u0.append(-t)
                V.append(size * v)
        tags.append(
            f"nearest own hinge 1e{int(np.floor(np.log10(near)))}+ std ({near:.1e})"
        )
    net = HingeNet(A, c, np.array(U).T, np.array(u0), np.array(V))
    return net, net.slopes, X, _tagged(rows, tags)


def build_dense_kinks_saddle(n_rows=300, seed=0, **kw):
    """``build_dense_kinks(..., saddle=True)``."""
    return build_dense_kinks(n_rows, seed, saddle=True, **kw)


# -- single weak kink (bench_weak_kinks.py) ----------------------------------------
def build_weak_kink(
    n_rows=300,
    seed=0,
    weakness=(1.0, 1e-4, 1e-7),
    distances=(1e-7, 1e-6, 1e-5, 1e-4),
):
    """bench_weak_kinks.py's network (classification_mlp, d = 300, 128 hidden,
    5 classes): each row is moved onto the hyperplane of one first-layer unit,
    then ``distance`` (cycled over ``distances``) away on a random side; the
    units come from groups whose output weights are multiplied by their
    ``weakness``, row i's from group ``i % len(weakness)``
    (:func:`~sklearn_plm_explain.utils._served.weak_kink_mlp`). Truth: the
    MLP."""
    model, X_fit, rows = weak_kink_mlp(
        n_rows, seed, weakness=weakness, distances=distances
    )
    k = len(weakness)
    tags = [
        f"weakness {weakness[i % k]:g}, distance {distances[(i // k) % len(distances)]:g}"
        for i in range(n_rows)
    ]
    return model, model, X_fit, _tagged(rows, tags)


# -- F3: degenerate scales and huge rows -------------------------------------------
def _f3_data(constant):
    X_train, X_test, y_train, _ = _digits_split()
    X_train, X_test = X_train.copy(), X_test.copy()
    if constant is not None:
        const = np.flatnonzero(X_train.std(axis=0) == 0)
        X_train[:, const] = constant  # np.std of the column: 1.4e-17, not 0
        X_test[:, const] = constant
    model = make_pipeline(StandardScaler(), MLPClassifier((64, 32), random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X_train, y_train)
    return model, X_train, X_test


def build_F3_tiny_std(n_rows=300, seed=0):
    """Pipeline(StandardScaler, MLP(64, 32)) on digits whose constant columns
    (0, 32, 39 of the training split) are set to 0.1: their np.std in X_fit is
    1.4e-17, not 0, so scale_ keeps it. Ordinary test rows."""
    model, X_train, X_test = _f3_data(0.1)
    return model, model, X_train, _take(X_test, n_rows)


def build_F3_huge(n_rows=300, seed=0, factor=1e300):
    """As F3_tiny_std, rows = test rows * 1e300."""
    model, X_train, X_test = _f3_data(0.1)
    return model, model, X_train, _take(X_test, n_rows) * factor


def build_F3_huge_clean(n_rows=300, seed=0, factor=1e300):
    """Same pipeline on the unmodified digits (constant columns at 0), rows =
    test rows * 1e300."""
    model, X_train, X_test = _f3_data(None)
    return model, model, X_train, _take(X_test, n_rows) * factor


def build_F3_big_lr(n_rows=300, seed=0, factor=1e10):
    """Pipeline(StandardScaler, LogisticRegression) on digits with the constant
    columns at 0.1 (queried through decision_function: logits ~1e10 do not
    saturate), rows = test rows * 1e10 (below the refusal limit
    |x| eps <= 1e-3 max_radius scale)."""
    X_train, X_test, y_train, _ = _digits_split()
    const = np.flatnonzero(X_train.std(axis=0) == 0)
    X_train, X_test = X_train.copy(), X_test.copy()
    X_train[:, const] = X_test[:, const] = 0.1
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
    model.fit(X_train, y_train)
    return model, model, X_train, _take(X_test, n_rows) * factor


# -- F2: init_radius="auto" with reuse_regions=True ------------------------------
class QueryLog:
    """Wraps a callable model; counts calls, points and points holding NaN/inf."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = self.points = self.nan_points = self.inf_points = 0

    def __call__(self, X):
        X = np.asarray(X)
        self.calls += 1
        self.points += X.shape[0]
        self.nan_points += int(np.isnan(X).any(axis=1).sum())
        self.inf_points += int(np.isinf(X).any(axis=1).sum())
        return self.fn(X)

    def summary(self):
        return (
            f"calls {self.calls}, points {self.points}, NaN points "
            f"{self.nan_points}, inf points {self.inf_points}"
        )


def build_F2(n_rows=300, seed=0):
    """Digits LogisticRegression (one linear region: calibration rows reuse each
    other's models), wrapped in a QueryLog; explainer kwargs in
    EXPLAINER_KWARGS["F2"] (init_radius="auto", reuse_regions=True)."""
    X_train, X_test, y_train, _ = _digits_split()
    lr = LogisticRegression(max_iter=5000).fit(X_train, y_train)
    return QueryLog(lr.predict_proba), lr, X_train, _take(X_test, n_rows)


def build_F2_mlp(n_rows=300, seed=0):
    """As F2 on the digits MLP(64, 32)."""
    mlp, X_train, pool = digits_mlp()
    return QueryLog(mlp.predict_proba), mlp, X_train, _take(pool, n_rows)


def variant(fn, name, seed_offset=0, **fixed):
    """``fn`` with some keyword arguments fixed (and the seed shifted by
    ``seed_offset``), as a ``build(n_rows=300, seed=0)`` function."""

    def build(n_rows=300, seed=0):
        return fn(n_rows, seed + seed_offset, **fixed)

    shown = ", ".join(f"{k}={v!r}" for k, v in fixed.items())
    if seed_offset:
        shown += f"{', ' if shown else ''}seed=seed+{seed_offset}"
    build.__name__ = f"build_{name}"
    build.__doc__ = f"{fn.__name__}({shown}). " + (fn.__doc__ or "")
    return build


BUILDERS = {
    "F1": build_F1,
    "F1_5_17": variant(build_F1, "F1_5_17", lo=5.0, hi=17.0),
    "F1_s2": variant(build_F1, "F1_s2", seed_offset=2),
    "F1_digits": build_F1_digits,
    "F1p": build_F1p,
    "F1p_17_25": variant(build_F1p, "F1p_17_25", lo=17.0, hi=25.0),
    "F6": build_F6,
    "F6_1e-9": variant(build_F6, "F6_1e-9", lo=1e-9),
}
for _T in (1, 4):
    for _eps in (1e-9, 1e-7, 1e-5):
        _n = f"F4_{_eps:.0e}_T{_T}".replace("e-0", "e-")
        BUILDERS[_n] = variant(build_F4, _n, eps=_eps, temperature=float(_T))
    for _eps in (1e-9, 1e-7, 9e-7):
        _n = f"F4_one_{_eps:.0e}_T{_T}".replace("e-0", "e-")
        BUILDERS[_n] = variant(
            build_F4, _n, eps=_eps, one_class=True, temperature=float(_T)
        )
BUILDERS.update(
    {
        "F5": build_F5,
        "F5_w1e-8": variant(build_F5, "F5_w1e-8", width=1e-8),
        "F5_rel1e-6": variant(build_F5, "F5_rel1e-6", rel=1e-6),
        "dense_kinks": variant(build_dense_kinks, "dense_kinks", dist=(-6, -3)),
        "dense_kinks_saddle": variant(
            build_dense_kinks, "dense_kinks_saddle", dist=(-6, -3), saddle=True
        ),
        "dense_kinks_1e-8": variant(
            build_dense_kinks, "dense_kinks_1e-8", rel=1e-8, per_row=4
        ),
        "dense_kinks_saddle_1e-8": variant(
            build_dense_kinks,
            "dense_kinks_saddle_1e-8",
            rel=1e-8,
            per_row=4,
            saddle=True,
        ),
        "weak_kink": build_weak_kink,
        "F3_tiny_std": build_F3_tiny_std,
        "F3_huge": build_F3_huge,
        "F3_huge_clean": build_F3_huge_clean,
        "F3_big_lr": build_F3_big_lr,
        "F2": build_F2,
        "F2_mlp": build_F2_mlp,
        "replicas_chunk16": build_replicas,
        "replicas_whole_call": variant(
            build_replicas, "replicas_whole_call", chunk=None
        ),
    }
)

EXPLAINER_KWARGS = {
    "F2": {"init_radius": "auto", "reuse_regions": True},
    "F2_mlp": {"init_radius": "auto", "reuse_regions": True},
}


# -- running -----------------------------------------------------------------------
def run(name, n_rows=300, seed=0, **kw):
    """Build ``name``, fit and explain with defaults (``random_state=0``) plus
    ``EXPLAINER_KWARGS[name]`` and ``kw``. Returns a dict of results."""
    t0 = time.perf_counter()
    model, truth, X_fit, rows = BUILDERS[name](n_rows, seed)
    build_s = time.perf_counter() - t0
    params = {**EXPLAINER_KWARGS.get(name, {}), **kw}
    out = {"name": name, "rows": rows, "params": params, "build_s": build_s}
    out["truth"] = truth
    explainer = OpenAPIExplainer(model, random_state=0, **params)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            explainer.fit(X_fit)
            out["init_radius_"] = getattr(explainer, "init_radius_", None)
            e = explainer.explain(rows)
        except Exception as exc:  # report, do not stop the table
            out["exception"] = exc
            out["traceback"] = traceback.format_exc()
            e = None
    out["seconds"] = time.perf_counter() - t0
    if isinstance(model, QueryLog):
        out["queries"] = model.summary()
    out["e"] = e
    if e is not None and hasattr(model, "service_slopes"):
        with np.errstate(all="ignore"):
            out["err_service"] = errors(e, model.service_slopes, rows)
    if e is not None and hasattr(model, "replicas"):
        with np.errstate(all="ignore"):
            each = [errors(e, m, rows) for m in model.replicas]
        out["err_replicas"] = np.fmin.reduce(each)
    if e is not None:
        with np.errstate(all="ignore"):
            try:
                out["err"] = errors(e, truth, rows)
            except Exception as exc:
                out["err"] = np.full(len(rows), np.nan)
                out["truth_exception"] = repr(exc)
    return out


def table_row(r):
    e = r["e"]
    notes = []
    if r.get("init_radius_") is not None and "init_radius" in r["params"]:
        notes.append(f"init_radius_={r['init_radius_']:.3g}")
    if "queries" in r:
        notes.append(r["queries"])
    if "exception" in r:
        exc = r["exception"]
        notes.append(f"RAISED {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
        return {
            "construction": r["name"],
            "rows": len(r["rows"]),
            "statuses": "-",
            "certified": "-",
            "wrong exact": "-",
            "err > bound": "-",
            "worst err/bound": "-",
            "median bound": "-",
            "s": f"{r['seconds']:.1f}",
            "notes": "; ".join(notes),
        }
    err, status, bound = r["err"], e.status, e.error_bound
    cert = np.isin(status, CERTIFIED)
    names, counts = np.unique(status, return_counts=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = err[cert] / bound[cert]
        past = int(np.sum(~(err[cert] <= bound[cert])))  # NaN err counts as past
        wrong = int(np.sum((status == "exact") & ~(err <= 1e-6)))
    if "err_service" in r and cert.any():
        # A smooth service has no linear region; its own gradient is what
        # queries can see.
        with np.errstate(invalid="ignore", divide="ignore"):
            own = r["err_service"][cert] / bound[cert]
        notes.append(
            f"against the service's own gradient: {int(np.sum(~(own <= 1)))} "
            f"past their bounds, worst err/bound {np.nanmax(own):.2g}"
        )
    if "err_replicas" in r and cert.any():
        # Each row's answers may all come from one replica or the other.
        rtol = r["params"].get("rtol", OpenAPIExplainer().rtol)
        with np.errstate(invalid="ignore", divide="ignore"):
            near = r["err_replicas"][cert] / bound[cert]
            over_rtol = int(np.sum((status == "exact") & ~(err <= rtol)))
        notes.append(
            f"exact with err > rtol ({rtol:g}): {over_rtol}; against the nearer "
            f"replica: {int(np.sum(~(near <= 1)))} past their bounds, worst "
            f"err/bound {np.nanmax(near):.2g}"
        )
    n_nan = int(np.isnan(err[cert]).sum())
    if n_nan:
        notes.append(f"{n_nan} certified rows with NaN err")
    if "truth_exception" in r:
        notes.append(f"truth failed: {r['truth_exception'][:80]}")
    return {
        "construction": r["name"],
        "rows": len(r["rows"]),
        "statuses": ", ".join(f"{n} {c}" for n, c in zip(names, counts)),
        "certified": f"{cert.sum()}",
        "wrong exact": f"{wrong}",
        "err > bound": f"{past}",
        "worst err/bound": f"{np.nanmax(ratio):.3g}"
        if cert.any() and np.isfinite(ratio).any()
        else "-",
        "median bound": f"{np.median(bound[cert]):.2g}" if cert.any() else "-",
        "s": f"{r['seconds']:.1f}",
        "notes": "; ".join(notes),
    }


def details(r, top=8):
    """Lines describing the failing rows (wrong exact or err > bound)."""
    lines = [f"#### {r['name']}  (params {r['params']}, build {r['build_s']:.1f}s)"]
    doc = (BUILDERS[r["name"]].__doc__ or "").strip().splitlines()
    if doc:
        lines.append("  " + doc[0])
    if "exception" in r:
        lines.append(r["traceback"].rstrip())
        return lines
    e, err = r["e"], r["err"]
    status, bound, rp = e.status, e.error_bound, np.asarray(e.response_precision)
    cert = np.isin(status, CERTIFIED)
    with np.errstate(invalid="ignore"):
        bad = cert & (~(err <= bound) | ((status == "exact") & ~(err <= 1e-6)))
    keys, counts = np.unique(
        np.char.add(status.astype(str), np.char.add(" / ", rp.astype(str))),
        return_counts=True,
    )
    lines.append(
        "  all rows (status / response_precision): "
        + ", ".join(f"{k}: {c}" for k, c in zip(keys, counts))
    )
    if not bad.any():
        lines.append("  no failing certified rows")
        return lines
    keys, counts = np.unique(
        np.char.add(status[bad].astype(str), np.char.add(" / ", rp[bad].astype(str))),
        return_counts=True,
    )
    lines.append(
        f"  failing rows {bad.sum()}: "
        + ", ".join(f"{k}: {c}" for k, c in zip(keys, counts))
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = err / bound
    lines.append(
        f"  failing: bound {np.nanmin(bound[bad]):.2g}..{np.nanmax(bound[bad]):.2g}, "
        f"err {np.nanmin(err[bad]):.2g}..{np.nanmax(err[bad]):.2g}, radius "
        f"{np.nanmin(e.radius[bad]):.2g}..{np.nanmax(e.radius[bad]):.2g}, n_iter "
        f"{e.n_iter[bad].min()}..{e.n_iter[bad].max()}"
    )
    idx = np.flatnonzero(bad)
    idx = idx[np.argsort(-np.nan_to_num(ratio[idx], nan=np.inf))][:top]
    P = _truth_proba(r, idx)
    tags = getattr(r["rows"], "tags", None)
    if tags is not None:
        coarse = np.array([str(t).split(" (")[0] for t in tags])
        for what, sel in [
            ("all rows", np.ones(len(tags), bool)),
            ("failing rows", bad),
        ]:
            keys, n_tag = np.unique(
                np.char.add(coarse[sel], np.char.add(": ", status[sel].astype(str))),
                return_counts=True,
            )
            lines.append(
                f"  {what} by tag: "
                + ", ".join(f"{t} {c}" for t, c in zip(keys, n_tag))
            )
    lines.append(
        "    row  status       precision   bound     err       err/bound  radius"
        "    n_iter  min p (class) of the float64 model"
    )
    for k, i in enumerate(idx):
        pm = "" if P is None else f"{P[k].min():.2e} ({int(P[k].argmin())})"
        if tags is not None:
            pm += f"  [{tags[i]}]"
        lines.append(
            f"    {i:<4d} {status[i]:<12s} {rp[i]:<11s} {bound[i]:<9.2e} "
            f"{err[i]:<9.2e} {ratio[i]:<10.3g} {e.radius[i]:<9.2e} "
            f"{e.n_iter[i]:<7d} {pm}"
        )
    return lines


def _truth_proba(r, idx):
    """Probabilities of the float64 ground-truth model at rows ``idx``."""
    truth = r.get("truth")
    X = r["rows"][idx]
    try:
        if hasattr(truth, "predict_proba"):
            return truth.predict_proba(X)
        owner = getattr(truth, "__self__", None)  # HingeNet.slopes
        if owner is not None and hasattr(owner, "predict_proba"):
            return owner.predict_proba(X)
    except Exception:
        return None
    return None


def print_table(rows, file):
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |", file=file)
    print("|" + "---|" * len(keys), file=file)
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |", file=file)


def _parse_kw(items):
    kw = {}
    for item in items or []:
        k, v = item.split("=", 1)
        for conv in (int, float):
            try:
                v = conv(v)
                break
            except ValueError:
                pass
        else:
            v = {"True": True, "False": False, "None": None}.get(v, v)
        kw[k] = v
    return kw


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(BUILDERS), metavar="NAME")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--details", action="store_true", help="list failing rows")
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument(
        "--kw", nargs="*", help="extra OpenAPIExplainer kwargs, key=value"
    )
    args = parser.parse_args(argv)
    kw = _parse_kw(args.kw)
    names = args.only or list(BUILDERS)
    results, rows = [], []
    for name in names:
        r = run(name, args.rows, args.seed, **kw)
        results.append(r)
        rows.append(table_row(r))
        print(f"[{name}: {r['seconds']:.1f}s]", file=sys.stderr, flush=True)

    import platform

    import scipy
    import sklearn

    header = (
        f"command: python {' '.join(sys.argv)}\n"
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
        f"machine: {platform.platform()}, {platform.machine()}\n"
        f"versions: python {platform.python_version()}, numpy {np.__version__}, "
        f"scipy {scipy.__version__}, scikit-learn {sklearn.__version__}\n"
        f"rows {args.rows}, seed {args.seed}, extra kwargs {kw}\n"
    )
    print(header)
    print_table(rows, sys.stdout)
    if args.out:
        with open(args.out, "w") as f:
            f.write(header + "\n")
            print_table(rows, f)
    if args.details:
        print()
        for r in results:
            print("\n".join(details(r)))
            print()


if __name__ == "__main__":
    main()
