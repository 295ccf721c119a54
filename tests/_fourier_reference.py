"""The NumPy references of the Fourier features and the trigonometric kernels' accuracy check.

Shared by tests/maps/test_fourier_features.py, tests/trust/test_fuzz.py and the
child processes of the vector-path tests.
"""

import numpy as np
import scipy.sparse as sp

from randfeat._ext import _fourier_fast

DTYPES = (np.float64, np.float32)


# --------------------------------------------------------------- reference
def slow_features(est, X):
    """The feature map written out in float64 NumPy, obviously correct."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    XW = X.astype(np.float64) @ est.random_weights_.astype(np.float64)
    if est.feature_map == "cossin":
        n_freq = XW.shape[1]
        if est.n_features_out_ % 2 == 0:
            return np.hstack([np.cos(XW), np.sin(XW)]) * np.sqrt(1.0 / n_freq)
        # Odd D: D' - 1 cos/sin pairs and one random-phase cos column.
        b = est.random_offset_.astype(np.float64)
        single = np.sqrt(2.0) * np.cos(XW[:, -1:] + b)
        return np.hstack([np.cos(XW[:, :-1]), single, np.sin(XW[:, :-1])]) * np.sqrt(1.0 / n_freq)
    return np.cos(XW + est.random_offset_.astype(np.float64)) * np.sqrt(2.0 / XW.shape[1])


def feature_tolerance(est, X, dtype):
    """Forward-error bound of the features: gemm's (d+2)·eps·Σ|x||w| in the
    argument, times the output scale (|d/dt scale·cos t| <= scale)."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    W = est.random_weights_.astype(np.float64)
    D = est.n_features_out_
    scale = np.sqrt(1.0 / W.shape[1]) if est.feature_map == "cossin" else np.sqrt(2.0 / D)
    if est.feature_map == "cossin" and D % 2:
        scale *= 2  # the single column is sqrt(2)·(cos b·C - sin b·S): errors of two columns
    magnitude = (np.abs(X.astype(np.float64)) @ np.abs(W)).max() + 2 * np.pi
    eps = np.finfo(dtype).eps
    return scale * (X.shape[1] + 4) * eps * magnitude


def assert_matches_reference(est, X, Z):
    dtype = Z.dtype
    ref = slow_features(est, X)
    assert Z.shape == ref.shape and Z.flags.c_contiguous
    np.testing.assert_allclose(Z, ref, rtol=0, atol=feature_tolerance(est, X, dtype))


# ------------------------------------------------------------ trig accuracy
def ulp_error(got, ref, dtype):
    ref = np.asarray(ref, dtype=np.float64)
    ulp = np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / ulp


def correctly_rounded(fn, x, dtype):
    # For float32, the float64 libm result rounded once is the reference.
    return fn(x.astype(np.float64)).astype(dtype)


def trig_ranges(dtype):
    lim64, lim32 = _fourier_fast.trig_limits()
    lim = lim64 if dtype == np.float64 else lim32
    ranges = [(1e-8, 1.0), (1.0, 100.0), (100.0, 1e4), (1e4, 1e6), (1e6, 1e12), (1e12, 1e300)]
    if dtype == np.float32:
        ranges[-1] = (1e12, 1e38)
    # Up to the limit the polynomial path runs; beyond it, libm.
    ranges.append((lim / 10, lim))
    return ranges


def check_trig_accuracy(max_ulp=3.0):
    """Max ulp error of the dispatched sin/cos over small to huge arguments."""
    rng = np.random.default_rng(0)
    worst = 0.0
    for dtype in DTYPES:
        for lo, hi in trig_ranges(dtype):
            mag = np.exp(rng.uniform(np.log(lo), np.log(hi), 20000))
            x = (mag * rng.choice([-1.0, 1.0], mag.size)).astype(dtype)
            c, s = x.copy(), np.empty_like(x)
            _fourier_fast.sincos(c, s)
            b = rng.uniform(0, 2 * np.pi, x.size).astype(dtype)
            cb = x.copy()
            _fourier_fast.cos_shifted(cb, b)
            errs = {
                "cos": ulp_error(c, correctly_rounded(np.cos, x, dtype), dtype).max(),
                "sin": ulp_error(s, correctly_rounded(np.sin, x, dtype), dtype).max(),
                "cos(x+b)": ulp_error(cb, correctly_rounded(np.cos, x + b, dtype), dtype).max(),
            }
            for name, e in errs.items():
                assert e <= max_ulp, f"{name} {np.dtype(dtype).name} on [{lo:g}, {hi:g}]: {e} ulp"
                worst = max(worst, e)
    return worst
