"""LogitBoost with simple linear regressions, and its cross-validation.

The logistic models of a logistic model tree are fitted by LogitBoost
(Friedman, Hastie & Tibshirani 2000) with one simple (single-attribute)
weighted linear regression per class and iteration, as in Weka's
``LogisticBase``; the number of iterations is chosen by cross-validation,
with Weka's early stop.
"""

# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

__all__ = ["cv_iterations", "log_softmax", "logitboost", "softmax"]

# Working responses of LogitBoost are clipped to +-3 (Friedman, Hastie &
# Tibshirani 2000; Weka's Z_MAX) so that confidently wrong rows cannot blow up.
_Z_MAX = 3.0
# Smallest positive double: probabilities are floored here so that no class
# ever gets an exact 0 (whose log is -inf), however far a row lies outside
# the training data.
_TINY = np.finfo(np.float64).smallest_subnormal


def log_softmax(F):
    """Row-wise log-softmax, computed stably by subtracting the row maximum."""
    shifted = F - F.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def softmax(F):
    """Row-wise softmax floored at the smallest positive double."""
    return np.maximum(np.exp(log_softmax(F)), _TINY)


def logitboost(
    X,
    Y,
    sw,
    coef,
    intercept,
    n_iter,
    *,
    test=None,
    n_iter_no_change=None,
    scoring="error",
    prior_errors=None,
):
    """Run up to ``n_iter`` LogitBoost iterations starting from a linear model.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Training rows.
    Y : ndarray of shape (n, C), bool
        One-hot class indicators.
    sw : ndarray of shape (n,)
        Sample weights (all positive).
    coef, intercept : ndarray of shape (d, C) and (C,)
        Model to start from (the parent's model, or zeros at the root).
    n_iter : int
        Maximum number of iterations.
    test : tuple (X_test, y_test, sw_test) or None
        When given, the error on these rows is recorded after every
        iteration (and before the first one).
    n_iter_no_change : int or None
        Early stop (only with ``test``), as Weka's LogitBoost does it: once
        more than ``n_iter_no_change`` iterations in a row have not lowered
        the running minimum of the error (the error of iteration 0 does not
        count towards the minimum), the next iteration is the last.
    scoring : {"error", "mae"}
        Test criterion: weighted misclassification rate, or weighted mean
        absolute error of the class probabilities.
    prior_errors : ndarray of shape (n_iter + 1,) or None
        Test errors of the folds already done, summed per iteration. The
        early stop watches this fold's error *plus* these, as Weka does
        during its cross-validation of the number of iterations.

    Returns
    -------
    coef, intercept : ndarray
        The boosted linear model, in the coordinates of ``X``.
    n_done : int
        Number of iterations performed (fewer than ``n_iter`` when no
        attribute can be fitted any more, or when the early stop triggered).
    errors : ndarray of shape (n_done + 1,) or None
        Test error after 0, 1, ..., n_done iterations.
    """
    n, d = X.shape
    n_classes = Y.shape[1]
    coef = coef.copy()
    intercept = intercept.copy()
    # Simple regression is invariant to affine rescaling of its attribute, so
    # fitting on standardised columns gives the same model with far less
    # cancellation in the weighted sums of squares; the result is mapped
    # back to raw coordinates before it is added to the model.
    varying = np.ptp(X, axis=0) > 0
    w_sum = sw.sum()
    mu = (sw @ X) / w_sum
    sd = np.sqrt((sw @ (X - mu) ** 2) / w_sum)
    sd[~varying | (sd == 0)] = 1.0
    Xs = (X - mu) / sd
    # Class-major layout (C, n): reductions over the classes of a row run
    # along the first axis, which numpy does much faster than along a short
    # last axis. The design matrix holds [x, 1, x^2] so that one product
    # gives every weighted sum the regressions need.
    XsT = np.ascontiguousarray(Xs.T)
    design = np.hstack([Xs, np.ones((n, 1))])
    Xs2 = Xs * Xs
    both = np.empty((2 * n_classes, n))  # [weights; weighted residuals]
    YT = np.ascontiguousarray(Y.T, dtype=np.float64)
    FT = (X @ coef + intercept).T.copy()
    shrink = (n_classes - 1) / n_classes
    cls = np.arange(n_classes)
    slope_sum = np.zeros((d, n_classes))  # raw-scale slopes, summed
    icpt_sum = np.zeros(n_classes)

    errors = None
    if test is not None:
        X_test, y_test, sw_test = test
        XsT_test = np.ascontiguousarray(((X_test - mu) / sd).T)
        FT_test = (X_test @ coef + intercept).T.copy()
        YT_test = y_test[None, :] == cls[:, None]
        sw_test_sum = sw_test.sum()

        def test_error():
            if scoring == "error":
                wrong = FT_test.argmax(axis=0) != y_test
                return sw_test[wrong].sum() / sw_test_sum
            P_test = np.exp(FT_test - FT_test.max(axis=0))
            P_test /= P_test.sum(axis=0)
            mae = np.abs(P_test - YT_test).sum(axis=0) / n_classes
            return (mae @ sw_test) / sw_test_sum

        errors = [test_error()]
        prior = np.zeros(n_iter + 1) if prior_errors is None else prior_errors
        running_min, not_lowered = np.inf, 0

    n_done = 0
    for _ in range(n_iter):
        P = np.exp(FT - FT.max(axis=0))
        P /= P.sum(axis=0)
        # Residual r = y - p. With the response z = 1/p (y = 1) or
        # -1/(1 - p) (y = 0), clipped to +-3, Weka's weight (y - p)/z equals
        # |r| max(1 - |r|, 1/3), and w z = r: no division is needed.
        R = YT - P
        A = np.abs(R)
        WT = both[:n_classes]
        np.maximum(1.0 - A, 1.0 / _Z_MAX, out=WT)
        WT *= A
        WT *= sw
        np.multiply(R, sw, out=both[n_classes:])
        S = both @ design  # (2C, d + 1): sums of w x, w, w z x, w z
        sxx_raw = WT @ Xs2  # (C, d): sums of w x^2
        sx, w_c = S[:n_classes, :d], S[:n_classes, d]
        sxz, wz_c = S[n_classes:, :d], S[n_classes:, d]
        fitted = w_c > 0  # a class without weight gets the zero function
        w_safe = np.where(fitted, w_c, 1.0)
        mx = sx / w_safe[:, None]
        my = wz_c / w_safe
        sxx = sxx_raw - sx * mx
        sxy = sxz - sx * my[:, None]
        # An attribute is useful when it varies among the weighted rows.
        useful = varying & (sxx > 1e-11 * sxx_raw)
        # Reduction of the weighted squared error by the best line on x.
        gain = np.where(useful, sxy * sxy / np.where(useful, sxx, 1.0), -np.inf)
        attr = gain.argmax(axis=1)
        ok = useful[cls, attr]
        if np.any(fitted & ~ok):
            break  # no simple regression can be fitted: stop boosting
        fitted &= ok
        slope = np.where(
            fitted, sxy[cls, attr] / np.where(fitted, sxx[cls, attr], 1.0), 0.0
        )
        icpt = np.where(fitted, my - slope * mx[cls, attr], 0.0)

        # Softmax and argmax ignore a constant added to all classes of a
        # row, so the running scores need not be centred (the coefficients
        # are, once, at the end).
        step_slope = (slope * shrink)[:, None]
        step_icpt = (icpt * shrink)[:, None]
        FT += XsT[attr] * step_slope
        FT += step_icpt
        raw_slope = slope / sd[attr]
        slope_sum[attr, cls] += raw_slope  # one cell per class: no collisions
        icpt_sum += icpt - raw_slope * mu[attr]
        n_done += 1

        if test is not None:
            FT_test += XsT_test[attr] * step_slope
            FT_test += step_icpt
            err = test_error()
            errors.append(err)
            if n_iter_no_change is not None and not_lowered > n_iter_no_change:
                break
            total = err + prior[n_done]
            if total < running_min:
                running_min, not_lowered = total, 0
            else:
                not_lowered += 1
    # Every iteration added (g_j - mean_k g_k) (C - 1)/C to class j; the sum
    # over iterations can be centred once since centring is linear.
    coef += (slope_sum - slope_sum.mean(axis=1, keepdims=True)) * shrink
    intercept += (icpt_sum - icpt_sum.mean()) * shrink
    if errors is not None:
        errors = np.asarray(errors)
    return coef, intercept, n_done, errors


def cv_iterations(X, yk, sw, n_classes, splits, *, max_iter, n_iter_no_change, scoring):
    """Choose the number of LogitBoost iterations by cross-validation.

    As in Weka, a fold boosts at most as far as every earlier fold went and
    stops early on the error summed over the folds so far; the iteration of
    least mean error over the iterations every fold reached wins (the first
    one on ties).

    Returns
    -------
    n_iter : int
    errors : ndarray of shape (n_compared + 1,) or None
        Mean test error after 0, 1, ... iterations (``None`` without folds).
    """
    if not splits:
        return 0, None
    d = X.shape[1]
    Y = yk[:, None] == np.arange(n_classes)[None, :]
    errors = np.zeros(max_iter + 1)
    completed = max_iter
    for train, test in splits:
        _, _, n_done, errs = logitboost(
            X[train],
            Y[train],
            sw[train],
            np.zeros((d, n_classes)),
            np.zeros(n_classes),
            completed,
            test=(X[test], yk[test], sw[test]),
            n_iter_no_change=n_iter_no_change,
            scoring=scoring,
            prior_errors=errors,
        )
        errors[: n_done + 1] += errs
        # Only iterations that every fold reached can be compared.
        completed = min(completed, n_done)
    errors = errors[: completed + 1] / len(splits)
    return int(np.argmin(errors)), errors
