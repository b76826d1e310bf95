"""Models as serving stacks return them, and models built to fool a certificate.

Shared by the tests, ``benchmarks/bench_precision.py`` and
``benchmarks/bench_small_p.py`` (like
:mod:`sklearn_plm_explain.utils._anchors`): a model's answers in float32 (numpy or
an ONNX Runtime session of a skl2onnx export), rounded to decimals, written as
JSON, or jittered on each call; and piecewise-linear networks with a region
boundary placed where it is hardest to see. Every wrapper is a plain callable
``f(X) -> probabilities``; the networks are scikit-learn ``MLPClassifier``
objects, so that :func:`sklearn_plm_explain.local_linear_model` gives their
ground truth.
"""

# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

__all__ = [
    "float32_forward",
    "onnx_float32",
    "rounded",
    "as_json_float32",
    "jittered",
    "sigmoid_float32",
    "binary_float32_near",
    "classification_mlp",
    "random_binary_mlp",
    "thin_region_mlp",
    "weak_boundary_mlp",
    "weak_kink_mlp",
    "mlp_logits",
]


# -- serving stacks ---------------------------------------------------------------
def mlp_logits(mlp, X):
    """Output-layer values of a scikit-learn MLP, in float64."""
    h = np.asarray(X, dtype=np.float64)
    last = len(mlp.coefs_) - 1
    for k, (W, b) in enumerate(zip(mlp.coefs_, mlp.intercepts_)):
        h = h @ W + b
        if k < last:
            h = np.maximum(h, 0.0)
    return h


def float32_forward(mlp):
    """A ReLU MLP evaluated in float32, as a PyTorch or Keras service does.

    Binary models return ``[1 - p, p]`` with ``p`` the float32 sigmoid.
    """
    Ws = [W.astype(np.float32) for W in mlp.coefs_]
    bs = [b.astype(np.float32) for b in mlp.intercepts_]
    one = np.float32(1.0)

    def predict_proba(X):
        h = np.asarray(X, dtype=np.float32)
        for k, (W, b) in enumerate(zip(Ws, bs)):
            h = h @ W + b
            if k < len(Ws) - 1:
                h = np.maximum(h, np.float32(0.0))
        if h.shape[1] == 1:
            p = one / (one + np.exp(-h[:, 0]))
            return np.column_stack([one - p, p])
        h = h - h.max(axis=1, keepdims=True)
        e = np.exp(h)
        return e / e.sum(axis=1, keepdims=True)

    return predict_proba


def onnx_float32(estimator, n_features):
    """``predict_proba`` of a skl2onnx float32 export, run by ONNX Runtime."""
    import onnxruntime as ort
    from skl2onnx import to_onnx

    onx = to_onnx(
        estimator,
        np.zeros((1, n_features), dtype=np.float32),
        options={id(estimator): {"zipmap": False}},
    )
    session = ort.InferenceSession(
        onx.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    name = session.get_inputs()[0].name
    proba = session.get_outputs()[1].name

    def predict_proba(X):
        return session.run([proba], {name: np.asarray(X, dtype=np.float32)})[0]

    return predict_proba


def rounded(fn, decimals, as_float32=False):
    """Responses rounded to ``decimals`` (then stored as float32 if asked)."""

    def predict_proba(X):
        P = np.round(np.asarray(fn(X), dtype=np.float64), decimals)
        return P.astype(np.float32) if as_float32 else P

    return predict_proba


def written_with_digits(fn, digits):
    """Responses written with ``digits`` significant digits (printf's
    ``%.{digits}g``) and read back as float64."""
    write = np.vectorize(lambda v: float(f"{v:.{digits}g}"))

    def predict_proba(X):
        return write(np.asarray(fn(X), dtype=np.float64))

    return predict_proba


def as_json_float32(fn):
    """float32 responses written as their shortest decimal and read back."""

    def predict_proba(X):
        return np.asarray(fn(X), dtype=np.float32).astype(str).astype(np.float64)

    return predict_proba


def jittered(mlp, size, seed=0, per_call=False):
    """A service whose logits are multiplied by ``1 + size N(0, 1)`` on each call.

    Each logit of each point gets its own draw, or, with ``per_call``, all of a
    call share one.
    """
    rng = np.random.default_rng(seed)

    def predict_proba(X):
        z = mlp_logits(mlp, X)
        if z.shape[1] == 1:
            z = np.hstack([np.zeros_like(z), z])
        shape = () if per_call else z.shape
        z = z * (1.0 + size * rng.standard_normal(shape))
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    return predict_proba


def sigmoid_float32(seed=0, d=30, logit=-22.0, n_rows=200):
    """A binary logistic model computed in float32, returned as ``[1 - p, p]``.

    Returns ``(f, model, X, rows)``: the float32 callable, a float64
    ``LogisticRegression`` with the same weights (the ground truth), data for
    ``fit`` and rows whose logits lie within 2 of ``logit``.
    """
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((400, d))
    w = rng.standard_normal(d)
    rows = rng.standard_normal((n_rows, d))
    z = rows @ w
    rows = rows + ((logit + rng.uniform(-2, 2, n_rows) - z) / (w @ w))[:, None] * w
    w32, one = w.astype(np.float32), np.float32(1.0)

    def predict_proba(Z):
        p = one / (one + np.exp(-(np.asarray(Z, dtype=np.float32) @ w32)))
        return np.column_stack([one - p, p])

    model = LogisticRegression().fit(X, (X @ w > 0).astype(int))
    model.coef_[:] = w
    model.intercept_[:] = 0.0
    return predict_proba, model, X, rows


def classification_mlp(n, d, hidden, seed, n_fit, **data):
    """A one-hidden-layer ReLU ``MLPClassifier`` on standardised
    ``make_classification`` data (one cluster per class, ``data`` passed on),
    fitted on the first ``n_fit`` rows; returns ``(mlp, X)``."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n, d, n_clusters_per_class=1, random_state=seed, **data)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((hidden,), max_iter=60, random_state=seed)
        mlp.fit(X[:n_fit], y[:n_fit])
    return mlp, X


def weak_kink_mlp(
    n_rows=300,
    seed=0,
    d=300,
    weakness=(1.0, 1e-4, 1e-7),
    distances=(1e-7, 1e-6, 1e-5, 1e-4),
    units_per_group=8,
):
    """Rows next to weak first-layer kinks of ``classification_mlp`` (d = 300,
    128 hidden units, 5 classes).

    ``len(weakness)`` disjoint groups of ``units_per_group`` units get their
    output weights multiplied by the group's weakness. Row ``i`` is moved
    onto the hyperplane of a unit of group ``i % len(weakness)``, then
    ``distances[(i // len(weakness)) % len(distances)]`` away from it on a
    random side. Returns ``(mlp, X_fit, rows)``.
    """
    rng = np.random.default_rng(seed)
    mlp, X = classification_mlp(
        1000 + n_rows, d, 128, seed, n_fit=1000, n_informative=30, n_classes=5
    )
    rows = X[1000:].copy()
    W, b = mlp.coefs_[0], mlp.intercepts_[0]
    groups = rng.permutation(W.shape[1])[: units_per_group * len(weakness)]
    groups = groups.reshape(len(weakness), units_per_group)
    for g, weak in zip(groups, weakness):
        mlp.coefs_[1][g] *= weak
    for i in range(n_rows):
        h = rng.choice(groups[i % len(weakness)])
        distance = distances[(i // len(weakness)) % len(distances)]
        w = W[:, h]
        rows[i] -= (rows[i] @ w + b[h]) / (w @ w) * w
        rows[i] += distance * rng.choice([-1, 1]) * w / np.linalg.norm(w)
    return mlp, X[:1000], rows


def random_binary_mlp(seed):
    """A small binary ReLU network and rows to explain, drawn from ``seed``.

    3 to 11 features, one hidden layer of 4 to 23 units fitted to a random
    linear rule, its output layer scaled by a gain of 1 to e^3 (so that many
    rows sit near saturation, where the smaller probability is a ``1 - p`` of
    every size), and 80 rows of random scale. Returns ``(mlp, X, rows)``.
    """
    rng = np.random.default_rng(seed)
    d, hidden = int(rng.integers(3, 12)), int(rng.integers(4, 24))
    X = rng.standard_normal((300, d))
    y = (X @ rng.standard_normal(d) > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((hidden,), max_iter=200, random_state=seed).fit(X, y)
    gain = float(np.exp(rng.uniform(0, 3)))
    mlp.coefs_[-1] = mlp.coefs_[-1] * gain
    mlp.intercepts_[-1] = mlp.intercepts_[-1] * gain
    rows = rng.standard_normal((80, d)) * rng.uniform(0.5, 2)
    return mlp, X, rows


def binary_float32_near(log2_p=-10.0, n_rows=160, d=128, seed=2):
    """A binary ReLU network answering ``[p0, 1 - p0]`` in float32, and rows
    whose small probability ``p1`` lies within a factor exp(+-1e-5 to +-0.1)
    of ``2**log2_p``: where a float32 ``1 - p`` holds only an absolute error.

    Returns ``(f, mlp, X, rows)``: the float32 callable, the network (the
    ground truth), its training data and the rows, twenty on each side of
    the value per starting row, starting rows taken in order from held-out
    data.
    """
    mlp, X = classification_mlp(
        900,
        d,
        64,
        seed,
        n_fit=800,
        n_informative=min(32, d // 2),
        n_redundant=0,
        class_sep=2.0,
    )
    p = 2.0**log2_p
    # The logit is piecewise affine: damped Newton steps take a row to p1 =
    # p, then steps of log p1 along the logit's gradient place the rows.
    target, offsets, rows = -np.log(1.0 / p - 1.0), np.logspace(-5, -1, 20), []
    for x in X[800:]:
        z, done = x.copy(), False
        for _ in range(60):
            s0 = mlp_logits(mlp, z[None])[0, 0]
            shifted = z + 1e-6 * np.eye(d)
            g = (mlp_logits(mlp, shifted)[:, 0] - s0) / 1e-6
            done = abs(s0 - target) < 1e-11
            if done:
                break
            step = (target - s0) * g / (g @ g)
            z = z + step * min(1.0, 0.5 / np.linalg.norm(step))
        if done:
            u = g / (g @ g) / (1.0 - p)
            rows += [z + sign * o * u for sign in (-1, 1) for o in offsets]
        if len(rows) >= n_rows:
            break
    one = np.float32(1.0)

    def predict_proba(Z):
        P = mlp.predict_proba(Z).astype(np.float32)
        P[:, 1] = one - P[:, 0]
        return P

    return predict_proba, mlp, X[:800], np.array(rows[:n_rows])


# -- networks built to fool a certificate -----------------------------------------
def _shell(rng, d, n_hidden, n_classes, n=200):
    X = rng.standard_normal((n, d)) * rng.uniform(0.5, 3, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((n_hidden,), max_iter=1, random_state=0)
        mlp.fit(X, np.arange(n) % n_classes)
    return mlp, X


def thin_region_mlp(seed, d=8, n_classes=3, half_width=1e-5, rel=1e-4):
    """A row inside a slab of half-width ``half_width`` standard deviations.

    Inside the slab the slopes differ from those on both sides by ``rel``
    (relative L1); the slab's two boundaries are parallel. Its step across the
    slab does not shrink with a cube that spans it, so a search that learns
    that residual as noise certifies a cube that never enters the region.
    Returns ``(mlp, X, row)``.
    """
    rng = np.random.default_rng(seed)
    H = 6
    mlp, X = _shell(rng, d, H, n_classes)
    scale = X.std(axis=0)
    x = 0.3 * rng.standard_normal(d) * scale
    n = rng.standard_normal(d)
    n /= np.linalg.norm(n)
    t0 = n @ (x / scale)
    W1 = rng.standard_normal((d, H)) / scale[:, None]
    b1 = 5.0 - x @ W1  # the other units active all around the row
    W1[:, 0], b1[0] = n / scale, -(t0 - half_width)
    W1[:, 1], b1[1] = n / scale, -(t0 + half_width)
    K = 1 if n_classes == 2 else n_classes
    W2 = rng.standard_normal((H, K))
    main = W1[:, 2:] @ W2[2:]
    v = rng.standard_normal(K)
    v /= np.linalg.norm(v)
    size = rel * np.abs(main).sum() / np.abs(np.outer(n / scale, v)).sum()
    W2[0], W2[1] = size * v, -size * v
    mlp.coefs_, mlp.intercepts_ = [W1, W2], [b1, 0.3 * rng.standard_normal(K)]
    return mlp, X, x


def weak_boundary_mlp(seed=0, d=10, n_classes=3, rel=1e-5, n_inside=300, n_past=6000):
    """Rows in one region, and rows just past a weak boundary of it.

    The boundary's slope change is ``rel`` (relative L1). ``n_inside`` rows lie
    0.5 to 2 standard deviations inside the region, ``n_past`` rows 1e-9 to
    1e-5 standard deviations beyond the boundary, where a reused model of the
    first region agrees with their responses to within ``rel`` of the slope
    times the distance. Returns ``(mlp, X, rows)``; the first ``n_inside``
    rows are the inside ones.
    """
    rng = np.random.default_rng(seed)
    H = 6
    X = rng.standard_normal((400, d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier((H,), max_iter=1, random_state=0)
        mlp.fit(X, np.arange(400) % n_classes)
    scale = X.std(axis=0)
    n = rng.standard_normal(d)
    n /= np.linalg.norm(n)
    W1 = rng.standard_normal((d, H)) / scale[:, None]
    b1 = np.full(H, 50.0)  # every other unit active on all rows
    W1[:, 0], b1[0] = n / scale, 0.0  # the weak unit: on where n.(x/s) > 0
    W2 = rng.standard_normal((H, n_classes))
    main = W1[:, 1:] @ W2[1:]
    v = rng.standard_normal(n_classes)
    v /= np.linalg.norm(v)
    centred = main - main.mean(axis=1, keepdims=True)
    change = np.outer(n / scale, v - v.mean())
    W2[0] = rel * np.abs(centred).sum() / np.abs(change).sum() * v
    mlp.coefs_ = [W1, W2]
    mlp.intercepts_ = [b1, 0.3 * rng.standard_normal(n_classes)]

    def at(t):
        Z = 0.5 * rng.standard_normal((t.size, d)) * scale
        return Z + ((t - (Z / scale) @ n)[:, None] * n[None, :]) * scale

    inside = at(rng.uniform(-2.0, -0.5, n_inside))
    past = at(10.0 ** rng.uniform(-9, -5, n_past))
    return mlp, X, np.vstack([inside, past])
