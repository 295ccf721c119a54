"""Property-based fuzzing (hypothesis) of every public entry point (issue 14).

Each target draws a shape (0-300 rows × 0-60 columns), a dtype, a memory
layout (C, Fortran, strided, CSR, CSR with unsorted indices, duplicates and
explicit zeros), a value scale, the estimator's parameters and 1-3 threads,
and checks:

* no crash: a valid input gives a result, an invalid one (no rows, no
  columns; negative values for the χ² maps, values <= -skewedness) the
  documented ``ValueError``;
* the fast path equals a reference: a slow NumPy one (features within their
  forward-error bound, binning exactly, ridge within the solver's accuracy,
  SORF/Fastfood against the dense Hadamard products of
  ``_structured_reference``), or scikit-learn's own transformer with the same
  random_state for the drop-in kernel approximations (RBFSampler,
  SkewedChi2Sampler, PolynomialCountSketch, AdditiveChi2Sampler, Nystroem),
  and scikit-learn's Ridge on the materialised features for a
  ``TransformerMap``;
* the result is bit-identical for n_jobs=1 and the drawn thread count;
* a pickled and restored estimator gives the same output.

Every target reaches compiled code and is marked ``kernel``, so that
tools/check_sanitizers.sh runs them under AddressSanitizer and UBSan.

The profile run by the test suite is small and derandomised (the same
examples every run, about ``FUZZ_EXAMPLES`` per target);
``tools/fuzz_campaign.py`` runs the same checks for 10⁴+ examples.
"""

import functools
import os
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _binning_reference as binning_ref
from randfeat import (AdditiveChi2Sampler, Nystroem, PolynomialCountSketch, RandomBinningFeatures,
                      RandomFourierFeatures, RBFSampler, Ridge, RidgeClassifier, SkewedChi2Sampler, TransformerMap,
                      kernel_matrix)
from _fourier_reference import feature_tolerance, slow_features

#: Examples per target in the test run (tools/fuzz_campaign.py runs more).
FUZZ_EXAMPLES = int(os.environ.get("RANDFEAT_FUZZ_EXAMPLES", "40"))
settings.register_profile(
    "suite", max_examples=FUZZ_EXAMPLES, derandomize=True, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SUITE = settings.get_profile("suite")

LAYOUTS = ("C", "F", "strided", "csr", "csr_odd")


@st.composite
def inputs(draw, max_rows=300, max_cols=60, min_rows=0, min_cols=0, signs=None):
    """(X, description): an input matrix as a user might pass it.

    ``signs``, if given, is drawn from: ``"any"`` (normal values), ``"abs"``
    (their absolute values: the χ² maps' domain) or ``"abs+1"`` (absolute
    values plus one: no zero left, implicit or stored).
    """
    n = draw(st.integers(min_rows, max_rows))
    d = draw(st.integers(min_cols, max_cols))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    layout = draw(st.sampled_from(LAYOUTS))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    density = draw(st.sampled_from([0.0, 0.2, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale
    X[rng.random(size=(n, d)) >= density] = 0.0
    if n > 1 and draw(st.booleans()):
        X[0] = X[-1]  # a repeated row
    sign = "any" if signs is None else draw(st.sampled_from(signs))
    if sign != "any":
        X = np.abs(X) + (1.0 if sign == "abs+1" else 0.0)
    X = X.astype(dtype)
    return _layout(X, layout, rng), (n, d, np.dtype(dtype).name, layout, scale, density, sign)


def _layout(X, layout, rng):
    if layout == "F":
        return np.asfortranarray(X)
    if layout == "strided":
        big = np.zeros((X.shape[0], 2 * X.shape[1]), dtype=X.dtype)
        big[:, ::2] = X
        return big[:, ::2]
    if layout == "csr":
        return sp.csr_matrix(X)
    if layout == "csr_odd":
        # Non-canonical CSR: every stored entry split in two (duplicates),
        # indices reversed within rows (unsorted), plus explicit zeros.
        coo = sp.coo_matrix(X)
        rows = np.r_[coo.row, coo.row, np.arange(X.shape[0]) if X.shape[1] else []].astype(np.intp)
        cols = np.r_[coo.col, coo.col, np.zeros(X.shape[0] if X.shape[1] else 0)].astype(np.intp)
        vals = np.r_[coo.data / 2, coo.data - coo.data / 2, np.zeros(X.shape[0] if X.shape[1] else 0)]
        order = np.lexsort((-cols, rows))
        rows, cols, vals = rows[order], cols[order], vals[order].astype(X.dtype)
        indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=X.shape[0]))].astype(np.int32)
        return sp.csr_matrix((vals, cols.astype(np.int32), indptr), shape=X.shape)
    return np.ascontiguousarray(X)


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def _empty(X):
    return X.shape[0] == 0 or X.shape[1] == 0


def _same_after_pickle(est, X, method="transform"):
    a = getattr(est, method)(X)
    b = getattr(pickle.loads(pickle.dumps(est)), method)(X)
    if sp.issparse(a):
        assert (a != b).nnz == 0
    else:
        np.testing.assert_array_equal(a, b)


def _same(a, b):
    if sp.issparse(a):
        assert a.shape == b.shape and (a != b).nnz == 0
        np.testing.assert_array_equal(a.indices, b.indices)
    else:
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ targets
def _fit_transform_or_reject(est, X):
    """``est.fit_transform(X)``, or None after checking that an empty X is a ValueError."""
    if _empty(X):
        with pytest.raises(ValueError):
            est.fit_transform(X)
        return None
    return est.fit_transform(X)


def check_fourier(X, params, n_jobs):
    est = RandomFourierFeatures(**params, random_state=0, n_jobs=1)
    Z = _fit_transform_or_reject(est, X)
    if Z is None:
        return
    ref = slow_features(est, X)
    assert Z.shape == ref.shape and Z.dtype == X.dtype
    np.testing.assert_allclose(Z, ref, rtol=0, atol=feature_tolerance(est, X, Z.dtype))
    _same(RandomFourierFeatures(**params, random_state=0, n_jobs=n_jobs).fit_transform(X), Z)
    _same_after_pickle(est, X)


def check_binning(X, params, n_jobs):
    est = RandomBinningFeatures(**params, random_state=0, n_jobs=1)
    Z = _fit_transform_or_reject(est, X)
    if Z is None:
        return
    Zr, keys, koff = binning_ref.binning_fit_transform(X, est.pitches_, est.offsets_)
    np.testing.assert_array_equal(Z.toarray(), Zr.toarray())
    other = RandomBinningFeatures(**params, random_state=0, n_jobs=n_jobs)
    _same(other.fit_transform(X), Z)
    _same(other.transform(X), est.transform(X))
    np.testing.assert_array_equal(est.transform(X).toarray(), binning_ref.binning_transform(
        X, est.pitches_, est.offsets_, keys, koff).toarray())
    _same_after_pickle(est, X)


def _ridge_reference(X, y, w, alpha, fit_intercept):
    Z = _dense(X).astype(np.float64)
    if fit_intercept:
        mu, ybar = w @ Z / w.sum(), w @ y / w.sum()
    else:
        mu, ybar = np.zeros(Z.shape[1]), 0.0
    Zc = Z - mu
    G = Zc.T @ (w[:, None] * Zc) + alpha * np.eye(Z.shape[1])
    coef = np.linalg.solve(G, Zc.T @ (w * (y - ybar)))
    return coef, ybar - mu @ coef


def check_ridge(X, params, n_jobs, seed):
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    y = rng.normal(size=n)
    w = rng.uniform(0.5, 2.0, size=n) if params.pop("weighted") else None
    relative_alpha = params.pop("relative_alpha")
    Xd = _dense(X).astype(np.float64)
    # alpha on the scale of the data: the condition number stays below ~1e5.
    alpha = relative_alpha * max(float(np.sum(Xd * Xd)) / max(X.shape[1], 1), 1e-12) if X.shape[1] else 1.0
    est = Ridge(alpha=alpha, tol=1e-12, **params, n_jobs=1)
    if _empty(X):
        with pytest.raises(ValueError):
            est.fit(X, y)
        return
    est.fit(X, y, sample_weight=w)
    coef, intercept = _ridge_reference(X, y, np.ones(n) if w is None else w, alpha, params["fit_intercept"])
    # Error bound: rounding of the solve, eps·cond·‖coef‖ (cond <= 1 + trace(G)/alpha
    # <= 1 + d/relative_alpha), plus the error of the right-hand side (rounding,
    # and CG's stopping residual tol·‖b‖) divided by the smallest eigenvalue >= alpha.
    eps = float(np.finfo(X.dtype).eps)
    cond = 1.0 + X.shape[1] / relative_alpha
    rhs = 2 * float((np.abs(Xd).T @ np.abs(y * (np.ones(n) if w is None else w))).max())
    stop = 1e-12 if params["solver"] == "cg" else 0.0
    atol = 50 * (eps * cond * np.abs(coef).max() + (eps + stop) * rhs / alpha)
    np.testing.assert_allclose(est.coef_, coef, rtol=0, atol=atol)
    other = Ridge(alpha=alpha, tol=1e-12, **params, n_jobs=n_jobs).fit(X, y, sample_weight=w)
    _same(other.coef_, est.coef_)
    _same(np.asarray(other.intercept_), np.asarray(est.intercept_))
    _same_after_pickle(est, X, "predict")


def check_classifier_with_features(X, params, n_jobs, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, params.pop("n_classes"), size=X.shape[0])
    feats = params.pop("features")
    make = (lambda: RandomFourierFeatures(32, random_state=0)) if feats == "rff" else (
        lambda: RandomBinningFeatures(4, random_state=0))
    est = RidgeClassifier(features=make(), **params, n_jobs=1)
    if _empty(X) or len(np.unique(y)) < 2:
        with pytest.raises(ValueError):
            est.fit(X, y)
        return
    est.fit(X, y)
    other = RidgeClassifier(features=make(), **params, n_jobs=n_jobs).fit(X, y)
    _same(other.decision_function(X), est.decision_function(X))
    _same_after_pickle(est, X, "decision_function")


def check_kernel_matrix(X, kernel, gamma):
    if _empty(X):
        with pytest.raises(ValueError):
            kernel_matrix(X, kernel=kernel, gamma=gamma)
        return
    K = kernel_matrix(X, kernel=kernel, gamma=gamma)
    Xd = _dense(X).astype(np.float64)
    diff = Xd[:, None, :] - Xd[None, :, :]
    if kernel == "rbf":
        ref = np.exp(-gamma * np.sum(diff**2, axis=-1))
    else:
        ref = np.exp(-gamma * np.sum(np.abs(diff), axis=-1))
    # Rounding of squared distances computed by expansion is relative to ‖x‖².
    norms = np.sum(Xd**2, axis=1)
    bound = 64 * np.finfo(X.dtype).eps * gamma * (norms[:, None] + norms[None, :] + 1) * (Xd.shape[1] + 2)
    np.testing.assert_array_less(np.abs(K - ref), bound + 1e-12)


def check_partial_fit(X, params, n_jobs, seed):
    """Any split into blocks, with a pickle round trip in the middle, equals fit on all the rows."""
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    y = rng.normal(size=n)
    make = lambda: RandomFourierFeatures(16, gamma=0.3, random_state=0) if params["features"] else None  # noqa: E731
    est = Ridge(alpha=params["alpha"], features=make(), n_jobs=n_jobs)
    if _empty(X):
        with pytest.raises(ValueError):
            est.partial_fit(X, y)
        return
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(params["blocks"] - 1, max(n - 1, 0)), replace=False)) \
        if n > 1 else np.array([], dtype=int)
    bounds = [0, *cuts.tolist(), n]
    for i, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        est.partial_fit(X[s:e], y[s:e])
        if i == 0:
            est = pickle.loads(pickle.dumps(est))
    ref = Ridge(alpha=params["alpha"], features=make(), n_jobs=1).fit(X, y)
    # Predictions (the coefficients of constant features are 0 up to rounding either way); the
    # merged statistics round like the one-pass ones, amplified by at most 1/alpha.
    tol = (1e-3 if X.dtype == np.float32 else 1e-7) * max(1.0, 1.0 / params["alpha"])
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=0, atol=tol * (1 + np.abs(y).max()))


#: The smallest alpha, relative to the centred Gram's largest eigenvalue, a float32 fit resolves (1e4 eps32).
_FLOAT32_RESOLVED_ALPHA = 1e4 * float(np.finfo(np.float32).eps)


def _largest_centred_eigenvalue(X):
    """λ_max of X_cᵀX_c in float64 (X centred on its column means)."""
    Xc = _dense(X).astype(np.float64)
    Xc = Xc - Xc.mean(axis=0)
    return float(np.linalg.norm(Xc, 2) ** 2) if Xc.size else 0.0


def check_ridge_cv(X, params, n_jobs, seed):
    """RidgeCV against scikit-learn's (leave-one-out and k-fold mean the same); n_jobs changes no bit."""
    from sklearn.linear_model import RidgeCV as SkRidgeCV
    from sklearn.model_selection import KFold

    from randfeat import RidgeCV

    rng = np.random.default_rng(seed)
    n = X.shape[0]
    y = rng.normal(size=n) + _dense(X).astype(np.float64) @ rng.normal(size=X.shape[1]) if X.shape[1] else \
        rng.normal(size=n)
    alphas = np.array([1e-2, 1.0, 100.0])
    cv = KFold(3) if params["cv"] == "kfold" else None
    est = RidgeCV(alphas=alphas, cv=cv, n_jobs=1)
    if _empty(X) or (cv is not None and n < 3):
        with pytest.raises(ValueError):
            est.fit(X, y)
        return
    est.fit(X, y)
    ref = SkRidgeCV(alphas=alphas, cv=cv).fit(_dense(X).astype(np.float64), y)
    both = np.sort([est.best_score_, ref.best_score_])
    if not np.isfinite(both).all():
        return  # a constant fold (R² undefined): nothing to compare
    if X.dtype == np.float32 and alphas.min() < _FLOAT32_RESOLVED_ALPHA * _largest_centred_eigenvalue(X):
        # A float32 Gram is exact to ~eps32·λ_max, so an alpha at that scale is not resolved (the
        # leverages 1 − h_ii ≈ α/λ are rounding noise; docs/user_guide/float32.rst): compare only the
        # alphas it resolves.
        alphas = alphas[alphas >= _FLOAT32_RESOLVED_ALPHA * _largest_centred_eigenvalue(X)]
        if alphas.size == 0:
            return
        est = RidgeCV(alphas=alphas, cv=cv, n_jobs=1).fit(X, y)
        ref = SkRidgeCV(alphas=alphas, cv=cv).fit(_dense(X).astype(np.float64), y)
    assert abs(est.best_score_ - ref.best_score_) <= 1e-5 * (1 + abs(ref.best_score_)) or (
        X.dtype == np.float32 and abs(est.best_score_ - ref.best_score_) <= 1e-2 * (1 + abs(ref.best_score_)))
    other = RidgeCV(alphas=alphas, cv=cv, n_jobs=n_jobs).fit(X, y)
    _same(np.asarray(other.coef_), np.asarray(est.coef_))
    _same_after_pickle(est, X, "predict")


def check_dask(X, params, n_jobs, seed):
    """A Dask array of any row blocks gives the in-memory features bit for bit and the in-memory fit."""
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    if _empty(X) or sp.issparse(X):
        return
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(params["blocks"] - 1, max(n - 1, 0)), replace=False)) \
        if n > 1 else np.array([], dtype=int)
    chunks = tuple(np.diff([0, *cuts.tolist(), n]).tolist())
    Xd = da.from_array(np.ascontiguousarray(X), chunks=(chunks, X.shape[1]))
    y = rng.normal(size=n)
    fm = RandomFourierFeatures(12, gamma="scale", random_state=0) if params["features"] == "rff" else \
        RandomBinningFeatures(3, gamma=0.5, random_state=0)
    with dask.config.set(scheduler="synchronous"):
        Zd = fm.fit(Xd).transform(Xd).compute()
        Z = fm.fit(X).transform(X) if params["features"] == "binning" else None
        if Z is not None:
            _same(sp.csr_matrix(Zd), Z)
        est = Ridge(alpha=1.0, features=fm, tol=1e-12, n_jobs=n_jobs).fit(Xd, da.from_array(y, chunks=chunks))
    ref = Ridge(alpha=1.0, features=fm, tol=1e-12, n_jobs=1).fit(X, y)
    # Predictions: the coefficients of constant features are 0 up to rounding either way.
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=0,
                               atol=(1e-3 if X.dtype == np.float32 else 1e-7) * (1 + np.abs(y).max()))


# ------------------------------------- scikit-learn's kernel approximations
# Each draws what scikit-learn draws for one random_state, so the reference is
# scikit-learn's own transformer, fitted on the same rows (dense, X's dtype)
# with the same random_state; the tolerance bounds the rounding of both.
def _quiet(check):
    """Run ``check`` with warnings ignored: they are not what it checks (n_components > n_samples,
    scikit-learn's reference overflowing in a discarded branch)."""
    @functools.wraps(check)
    def run(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return check(*args, **kwargs)
    return run


def _threads_and_pickle(make, est, X, Z, n_jobs):
    """A fresh map with ``n_jobs`` threads, and the fitted one set to them, give Z's bits; so does a pickle."""
    _same(make().set_params(n_jobs=n_jobs).fit_transform(X), Z)
    _same(est.set_params(n_jobs=n_jobs).transform(X), Z)
    _same_after_pickle(est, X)


@_quiet
def check_rbf_sampler(X, params, n_jobs):
    from sklearn.kernel_approximation import RBFSampler as SkRBFSampler

    def make():
        return RBFSampler(**params, random_state=0, n_jobs=1)

    est = make()
    Z = _fit_transform_or_reject(est, X)
    if Z is None:
        return None
    Xd = _dense(X)
    ref = SkRBFSampler(**params, random_state=0).fit(Xd)
    W, W_ref = est.random_weights_.astype(np.float64), ref.random_weights_.astype(np.float64)
    np.testing.assert_array_equal(est.random_offset_, ref.random_offset_.astype(est.random_offset_.dtype))
    if params["gamma"] == "scale":  # X's variance, summed in another order
        np.testing.assert_allclose(W, W_ref, rtol=1e-4 if X.dtype == np.float32 else 1e-12, atol=0)
    else:
        np.testing.assert_array_equal(est.random_weights_, ref.random_weights_)
    R = ref.transform(Xd)
    assert Z.shape == R.shape and Z.dtype == X.dtype and Z.flags.c_contiguous
    X64 = np.abs(Xd.astype(np.float64))
    eps = float(np.finfo(X.dtype).eps)
    # Both sides' rounding of X W + b (d+4 terms, then cos), and a gamma='scale' draw's difference.
    magnitude = (X64 @ np.abs(W)).max() + 2 * np.pi
    atol = np.sqrt(2.0 / W.shape[1]) * (2 * (X.shape[1] + 4) * eps * magnitude + (X64 @ np.abs(W - W_ref)).max())
    np.testing.assert_allclose(Z, R, rtol=0, atol=atol)
    _threads_and_pickle(make, est, X, Z, n_jobs)
    return None


@_quiet
def check_skewed_chi2(X, params, n_jobs):
    from sklearn.kernel_approximation import SkewedChi2Sampler as SkSkewedChi2Sampler

    def make():
        return SkewedChi2Sampler(**params, random_state=0, n_jobs=1)

    c = params["skewedness"]
    est = make()
    if _empty(X):
        return _fit_transform_or_reject(est, X)
    Xd = _dense(X)
    if (Xd <= -c).any():  # scikit-learn's condition (a CSR's implicit zeros included)
        with pytest.raises(ValueError, match="skewedness"):
            est.fit(X).transform(X)
        fitted = make().fit(np.abs(Xd) + abs(c) + 1.0)  # fitted on valid rows, X still refused
        with pytest.raises(ValueError, match="skewedness"):
            fitted.transform(X)
        return "invalid (values <= -skewedness: ValueError required)"
    Z = est.fit_transform(X)
    ref = SkSkewedChi2Sampler(**params, random_state=0).fit(Xd)
    np.testing.assert_array_equal(est.random_weights_, ref.random_weights_)
    np.testing.assert_array_equal(est.random_offset_, ref.random_offset_.astype(est.random_offset_.dtype))
    R = ref.transform(Xd)
    assert Z.shape == R.shape and Z.dtype == X.dtype and Z.flags.c_contiguous
    X64 = Xd.astype(np.float64)
    W = np.abs(ref.random_weights_.astype(np.float64))
    eps = float(np.finfo(X.dtype).eps)
    # log(x + c) rounds to eps (plus c's own rounding, relative to x + c); a CSR's log c
    # is folded into the phases (a term |log c|·Σ|w|); then d+4 terms and cos, both sides.
    terms = np.abs(np.log(X64 + c)) + abs(np.log(abs(c))) + (np.abs(X64) + abs(c)) / (X64 + c) + 1.0
    magnitude = (terms @ W).max() + 2 * np.pi
    atol = np.sqrt(2.0 / W.shape[1]) * 2 * (X.shape[1] + 8) * eps * magnitude
    np.testing.assert_allclose(Z, R, rtol=0, atol=atol)
    _threads_and_pickle(make, est, X, Z, n_jobs)
    return None


@_quiet
def check_count_sketch(X, params, n_jobs):
    from sklearn.kernel_approximation import PolynomialCountSketch as SkPolynomialCountSketch

    def make():
        return PolynomialCountSketch(**params, random_state=0, n_jobs=1)

    est = make()
    Z = _fit_transform_or_reject(est, X)
    if Z is None:
        return None
    Xd = _dense(X)
    ref = SkPolynomialCountSketch(**params, random_state=0).fit(Xd)
    np.testing.assert_array_equal(est.indexHash_, ref.indexHash_)
    np.testing.assert_array_equal(est.bitHash_, ref.bitHash_)
    R = ref.transform(Xd)
    assert Z.shape == R.shape and Z.dtype == X.dtype and Z.flags.c_contiguous
    # Each output is a sum of products of `degree` sketch values, each a signed sum of
    # sqrt(gamma)·x_j and sqrt(coef0): |error| <= (d + D + ...)·eps·(sqrt(gamma)‖x‖₁ + sqrt(coef0))^degree.
    eps = float(np.finfo(X.dtype).eps)
    M = (np.sqrt(params["gamma"]) * np.abs(Xd.astype(np.float64)).sum(axis=1) + np.sqrt(params["coef0"])) \
        ** params["degree"]
    atol = 16 * (X.shape[1] + params["n_components"] + 8) * eps * M[:, None] + np.finfo(X.dtype).tiny
    assert (np.abs(Z - R) <= atol).all(), np.max(np.abs(Z - R) / atol)
    _threads_and_pickle(make, est, X, Z, n_jobs)
    return None


@_quiet
def check_additive_chi2(X, params, n_jobs):
    from sklearn.kernel_approximation import AdditiveChi2Sampler as SkAdditiveChi2Sampler

    def make():
        return AdditiveChi2Sampler(**params, n_jobs=1)

    est = make()
    if _empty(X):
        return _fit_transform_or_reject(est, X)
    Xd = _dense(X)
    steps, interval = params["sample_steps"], params["sample_interval"]
    if (Xd < 0).any() or (interval is None and steps > 3):
        with pytest.raises(ValueError, match="Negative values in data passed to X in AdditiveChi2Sampler|"
                                             "you need to provide sample_interval"):
            est.fit_transform(X)
        return "invalid (negative values or no sample_interval: ValueError required)"
    Z = est.fit_transform(X)
    assert sp.issparse(Z) == sp.issparse(X) and Z.dtype == X.dtype and Z.shape == (X.shape[0], X.shape[1] * (2 * steps - 1))
    R = SkAdditiveChi2Sampler(**params).fit_transform(Xd)
    # As tests/maps/test_sklearn_kernel_approximations.py: scikit-learn's formula in the same
    # order, within 1e-10 (float64) or 1e-6 (float32) of |output| <= ~sqrt(x·L).
    tol = 1e-10 if X.dtype == np.float64 else 1e-6
    L = {1: 0.8, 2: 0.5, 3: 0.4}[steps] if interval is None else max(interval, 1.0)
    scale = np.sqrt(np.tile(Xd.astype(np.float64), 2 * steps - 1) * L) + 1e-300
    assert (np.abs(_dense(Z) - R) <= tol * scale).all(), np.max(np.abs(_dense(Z) - R) / scale)
    _threads_and_pickle(make, est, X, Z, n_jobs)
    return None


def _nystroem_kernel_error(kernel, gamma, X64, L64, eps, centred=True):
    """Forward-error bound of a kernel block K(X, L): randfeat's compiled one (``centred``, either
    dtype) or scikit-learn's (float64, rbf's squared distances expanded about the origin)."""
    d = X64.shape[1]
    if kernel == "rbf":  # ‖x‖² - 2x·l + ‖l‖² of rows and landmarks centred on the landmarks' mean
        mu = L64.mean(axis=0) if centred else np.zeros(d)
        nx, nl = np.sum((X64 - mu) ** 2, axis=1), np.sum((L64 - mu) ** 2, axis=1)
        return 64 * eps * gamma * (d + 2) * (nx[:, None] + nl[None, :] + 1)
    if kernel in ("laplacian", "chi2"):
        nx, nl = np.abs(X64).sum(axis=1), np.abs(L64).sum(axis=1)
        return 64 * eps * gamma * (d + 2) * (nx[:, None] + nl[None, :] + 1)
    B = gamma * np.abs(X64) @ np.abs(L64).T + 1.0  # poly: (gamma x·l + 1)^3
    return 64 * eps * (d + 2) * 3 * B**3


@_quiet
def check_nystroem(X, params, n_jobs):
    from sklearn.kernel_approximation import Nystroem as SkNystroem
    from sklearn.metrics.pairwise import pairwise_kernels

    def make():
        return Nystroem(**params, random_state=0, n_jobs=1)

    est, kernel = make(), params["kernel"]
    if _empty(X):
        return _fit_transform_or_reject(est, X)
    Xd = _dense(X)
    if kernel == "chi2" and (Xd < 0).any():
        with pytest.raises(ValueError, match="Negative values in data passed to Nystroem"):
            est.fit_transform(X)
        return "invalid (negative values for chi2: ValueError required)"
    Z = est.fit_transform(X)
    X64 = Xd.astype(np.float64)
    ref = SkNystroem(**params, random_state=0).fit(X64)
    idx = ref.component_indices_
    np.testing.assert_array_equal(est.component_indices_, idx)
    np.testing.assert_array_equal(_dense(est.components_), Xd[idx])
    L64 = X64[idx]
    gamma = params["gamma"] if params["gamma"] is not None else (1.0 if kernel == "chi2" else 1.0 / X.shape[1])
    if kernel == "rbf":  # squared distances from the differences (scikit-learn's expand them)
        K = np.exp(-gamma * np.sum((X64[:, None, :] - L64[None, :, :]) ** 2, axis=2))
        K_LL = np.exp(-gamma * np.sum((L64[:, None, :] - L64[None, :, :]) ** 2, axis=2))
    else:
        K = pairwise_kernels(X64, L64, metric=kernel, filter_params=True, gamma=gamma)
        K_LL = pairwise_kernels(L64, metric=kernel, filter_params=True, gamma=gamma)
    N = est.normalization_.astype(np.float64)
    assert Z.shape == (X.shape[0], len(idx)) and Z.dtype == X.dtype and est.normalization_.dtype == X.dtype
    # The compiled kernel block and product: Z = K(X, L) Nᵀ with our N.
    eps = float(np.finfo(X.dtype).eps)
    E = _nystroem_kernel_error(kernel, gamma, X64, L64, eps)
    zbound = E @ np.abs(N).T + 4 * (len(idx) + 2) * eps * (np.abs(K) @ np.abs(N).T) + 1e-300
    assert (np.abs(Z - K @ N.T) <= zbound).all(), np.max(np.abs(Z - K @ N.T) / zbound)
    # N = K(L, L)^(-1/2) is scikit-learn's where that is well conditioned; then so are the features.
    lam = np.abs(np.linalg.eigvalsh(K_LL))
    if lam.min() > 1e-6 * lam.max():
        cond = lam.max() / lam.min()
        E_sk = _nystroem_kernel_error(kernel, gamma, X64, L64, float(np.finfo(np.float64).eps), centred=False)
        k_error = (E[idx].max() + E_sk[idx].max()) / lam.max()
        nbound = 100 * len(idx) * cond * (eps + k_error) * np.abs(ref.normalization_).max()
        np.testing.assert_allclose(N, ref.normalization_, rtol=0, atol=nbound)
        R = ref.transform(X64)
        np.testing.assert_array_less(np.abs(Z - R), zbound + E_sk @ np.abs(N).T
                                     + np.abs(K).sum(axis=1)[:, None] * nbound)
    _threads_and_pickle(make, est, X, Z, n_jobs)
    return None


@_quiet
def check_structured(X, params, n_jobs):
    """RandomFourierFeatures(sampling='sorf' / 'fastfood') against the dense Hadamard products (float64 NumPy)."""
    from _structured_reference import argument_tolerance, dense_frequencies, reference_features

    def make():
        return RandomFourierFeatures(**params, random_state=0, n_jobs=1)

    est = make()
    Z = _fit_transform_or_reject(est, X)
    if Z is None:
        return None
    state = est._fitted_state()
    draw, mult, b = state.draw, state.mult, state.b
    Xd, dtype = _dense(X), X.dtype
    A_ref = Xd.astype(np.float64) @ dense_frequencies(draw, mult.astype(dtype).astype(np.float64)).T
    Z_ref = reference_features(A_ref, params["feature_map"], params["n_components"],
                               None if b is None else b.astype(np.float64))
    assert Z.shape == Z_ref.shape and Z.dtype == dtype and Z.flags.c_contiguous
    tol = argument_tolerance(Xd, draw, mult, dtype)
    scale = np.sqrt((1.0 if params["feature_map"] == "cossin" else 2.0) / draw.n_freq)
    atol = 2 * scale * (np.max(tol) * 2 + 16 * np.finfo(dtype).eps)  # 2: the odd width's √2·cos column
    np.testing.assert_allclose(Z, Z_ref, rtol=0, atol=atol)
    _threads_and_pickle(make, est, X, Z, n_jobs)
    return None


@_quiet
def check_transformer_map(X, params, n_jobs, seed):
    """Ridge(features=TransformerMap(<scikit-learn transformer>)) equals scikit-learn's Ridge on its features."""
    from sklearn.base import clone
    from sklearn.kernel_approximation import Nystroem as SkNystroem
    from sklearn.kernel_approximation import RBFSampler as SkRBFSampler
    from sklearn.linear_model import Ridge as SkRidge

    rng = np.random.default_rng(seed)
    n, D = X.shape[0], params["n_components"]
    y = rng.normal(size=n)
    transformer = SkRBFSampler(n_components=D, gamma=params["gamma"], random_state=0) \
        if params["transformer"] == "rbf_sampler" else SkNystroem(n_components=D, gamma=params["gamma"], random_state=0)

    def make(alpha, n_threads):
        return Ridge(alpha=alpha, features=TransformerMap(transformer), solver=params["solver"],
                     fit_intercept=params["fit_intercept"], tol=1e-12, n_jobs=n_threads)

    if _empty(X):
        with pytest.raises(ValueError):
            make(1.0, 1).fit(X, y)
        return None
    # The transformer sees X validated: a CSR canonical (scikit-learn's sparse row norms read
    # duplicates as separate entries).
    Xc = X
    if sp.issparse(X):
        Xc = X.copy()
        Xc.sum_duplicates()
    Zd = np.asarray(clone(transformer).fit(Xc).transform(Xc)).astype(X.dtype).astype(np.float64)
    # alpha on the scale of the features: the condition number stays below 1 + D/relative_alpha.
    alpha = params["relative_alpha"] * max(float(np.sum(Zd * Zd)) / Zd.shape[1], 1e-12)
    est = make(alpha, 1).fit(X, y)
    ref = SkRidge(alpha=alpha, fit_intercept=params["fit_intercept"], solver="cholesky").fit(Zd, y)
    # check_ridge's bound: eps·cond·‖coef‖ plus the right-hand side's error (rounding, CG's tol) / alpha.
    eps = float(np.finfo(X.dtype).eps)
    cond = 1.0 + Zd.shape[1] / params["relative_alpha"]
    rhs = 2 * float((np.abs(Zd).T @ np.abs(y)).max())
    stop = 1e-12 if params["solver"] == "cg" else 0.0
    atol = 50 * (eps * cond * np.abs(ref.coef_).max() + (eps + stop) * rhs / alpha)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=atol)
    np.testing.assert_allclose(est.predict(X), ref.predict(Zd), rtol=0,
                               atol=(np.abs(Zd).sum(axis=1).max() + 1) * atol + 64 * eps * (1 + np.abs(y).max()))
    other = make(alpha, n_jobs).fit(X, y)
    _same(other.coef_, est.coef_)
    _same(np.asarray(other.intercept_), np.asarray(est.intercept_))
    _same_after_pickle(est, X, "predict")
    return None


# ---------------------------------------------------------------- strategies
THREADS = st.integers(1, 3)
FOURIER = st.fixed_dictionaries({
    "n_components": st.integers(1, 64),
    "feature_map": st.sampled_from(["cossin", "cos"]),
    "kernel": st.sampled_from(["rbf", "laplacian", "cauchy", "matern"]),
    "gamma": st.sampled_from([1e-3, 0.1, 1.0, 10.0, "scale"]),
})
BINNING = st.fixed_dictionaries({
    "n_grids": st.integers(1, 12),
    "gamma": st.sampled_from([1e-2, 0.3, 1.0, 10.0]),
})
RIDGE = st.fixed_dictionaries({
    "solver": st.sampled_from(["cholesky", "cg"]),
    "fit_intercept": st.booleans(),
    "weighted": st.booleans(),
    "relative_alpha": st.sampled_from([1e-3, 1e-1, 10.0]),
})
CLASSIFIER = st.fixed_dictionaries({
    "n_classes": st.integers(2, 4),
    "features": st.sampled_from(["rff", "binning"]),
    "solver": st.sampled_from(["auto", "cholesky", "cg"]),
    "alpha": st.sampled_from([1e-2, 1.0]),
})

#: name -> (strategy of keyword arguments, check); tools/fuzz_campaign.py runs the same.
TARGETS = {
    "fourier": (st.fixed_dictionaries({"X": inputs(), "params": FOURIER, "n_jobs": THREADS}), check_fourier),
    "binning": (st.fixed_dictionaries({"X": inputs(), "params": BINNING, "n_jobs": THREADS}), check_binning),
    "ridge": (st.fixed_dictionaries({"X": inputs(max_rows=200, max_cols=30), "params": RIDGE, "n_jobs": THREADS,
                                     "seed": st.integers(0, 2**16)}), check_ridge),
    "classifier": (st.fixed_dictionaries({"X": inputs(max_rows=200, max_cols=20), "params": CLASSIFIER,
                                          "n_jobs": THREADS, "seed": st.integers(0, 2**16)}),
                   check_classifier_with_features),
    "partial_fit": (st.fixed_dictionaries({
        "X": inputs(max_rows=120, max_cols=12), "n_jobs": THREADS, "seed": st.integers(0, 2**16),
        "params": st.fixed_dictionaries({"features": st.booleans(), "alpha": st.sampled_from([1e-2, 1.0]),
                                         "blocks": st.integers(1, 6)})}), check_partial_fit),
    "ridge_cv": (st.fixed_dictionaries({
        "X": inputs(max_rows=80, max_cols=8), "n_jobs": THREADS, "seed": st.integers(0, 2**16),
        "params": st.fixed_dictionaries({"cv": st.sampled_from(["loo", "kfold"])})}), check_ridge_cv),
    "dask": (st.fixed_dictionaries({
        "X": inputs(max_rows=80, max_cols=8), "n_jobs": THREADS, "seed": st.integers(0, 2**16),
        "params": st.fixed_dictionaries({"features": st.sampled_from(["rff", "binning"]),
                                         "blocks": st.integers(1, 5)})}), check_dask),
    "kernel_matrix": (st.fixed_dictionaries({"X": inputs(max_rows=60, max_cols=20),
                                             "kernel": st.sampled_from(["rbf", "laplacian"]),
                                             "gamma": st.sampled_from([1e-3, 0.1, 1.0])}), check_kernel_matrix),
}

# Scikit-learn's kernel approximations and the structured samplings (issue 33).
RBF_SAMPLER = st.fixed_dictionaries({
    "n_components": st.integers(1, 64),
    "gamma": st.sampled_from([1e-3, 0.1, 1.0, 10.0, "scale"]),
})
SKEWED_CHI2 = st.fixed_dictionaries({
    "n_components": st.integers(1, 64),
    "skewedness": st.sampled_from([-0.5, 0.01, 0.5, 2.0]),
})
COUNT_SKETCH = st.fixed_dictionaries({
    "n_components": st.integers(1, 64),
    "degree": st.integers(1, 4),
    "gamma": st.sampled_from([0.1, 1.0]),
    "coef0": st.sampled_from([0.0, 0.5, 2.0]),
})
ADDITIVE_CHI2 = st.fixed_dictionaries({
    "sample_steps": st.integers(1, 5),
    "sample_interval": st.sampled_from([None, None, 0.3, 0.7]),
})
NYSTROEM = st.fixed_dictionaries({
    "n_components": st.integers(1, 40),
    "kernel": st.sampled_from(["rbf", "laplacian", "poly", "chi2"]),
    "gamma": st.sampled_from([None, 0.1, 1.0]),
})
STRUCTURED = st.fixed_dictionaries({
    "sampling": st.sampled_from(["sorf", "fastfood"]),
    "n_components": st.integers(1, 64),
    "feature_map": st.sampled_from(["cossin", "cos"]),
    "kernel": st.sampled_from(["rbf", "matern"]),
    "gamma": st.sampled_from([1e-3, 0.1, 1.0, 10.0, "scale"]),
})
TRANSFORMER = st.fixed_dictionaries({
    "transformer": st.sampled_from(["rbf_sampler", "nystroem"]),
    "n_components": st.integers(1, 32),
    "gamma": st.sampled_from([0.01, 0.5]),
    "solver": st.sampled_from(["cholesky", "cg"]),
    "fit_intercept": st.booleans(),
    "relative_alpha": st.sampled_from([1e-2, 1.0]),
})
CHI2_SIGNS = ("any", "abs", "abs", "abs+1")
TARGETS.update({
    "rbf_sampler": (st.fixed_dictionaries({"X": inputs(), "params": RBF_SAMPLER, "n_jobs": THREADS}),
                    check_rbf_sampler),
    "skewed_chi2": (st.fixed_dictionaries({"X": inputs(signs=CHI2_SIGNS), "params": SKEWED_CHI2, "n_jobs": THREADS}),
                    check_skewed_chi2),
    "count_sketch": (st.fixed_dictionaries({"X": inputs(), "params": COUNT_SKETCH, "n_jobs": THREADS}),
                     check_count_sketch),
    "additive_chi2": (st.fixed_dictionaries({"X": inputs(signs=CHI2_SIGNS), "params": ADDITIVE_CHI2,
                                             "n_jobs": THREADS}), check_additive_chi2),
    "nystroem": (st.fixed_dictionaries({"X": inputs(max_rows=150, max_cols=30, signs=("any", "abs")),
                                        "params": NYSTROEM, "n_jobs": THREADS}), check_nystroem),
    "structured": (st.fixed_dictionaries({"X": inputs(), "params": STRUCTURED, "n_jobs": THREADS}), check_structured),
    "transformer_map": (st.fixed_dictionaries({"X": inputs(max_rows=150, max_cols=20), "params": TRANSFORMER,
                                               "n_jobs": THREADS, "seed": st.integers(0, 2**16)}),
                        check_transformer_map),
})

#: The targets run by the sanitizer stage (tools/check_sanitizers.sh: pytest -m kernel): every
#: one reaches compiled code (features, binning, Gram and CG kernels, the kernel block).
COMPILED = frozenset(TARGETS)


def run_target(name, **kwargs):
    """Run target ``name``'s check on one drawn example (``kwargs`` as its strategy draws them).

    Returns the check's outcome label for an invalid input other than an empty
    one (e.g. negative values for a χ² map: the documented ValueError was
    required), else None.
    """
    drawn = dict(kwargs)
    drawn["X"] = drawn["X"][0]
    if "params" in drawn:
        drawn["params"] = dict(drawn["params"])
    return TARGETS[name][1](**drawn)


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.kernel) if name in COMPILED else name
                                  for name in sorted(TARGETS)])
def test_fuzz(name):
    @SUITE
    @given(TARGETS[name][0])
    def prop(kwargs):
        run_target(name, **kwargs)

    prop()
