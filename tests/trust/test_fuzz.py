"""Property-based fuzzing (hypothesis) of every public entry point (issue 14).

Each target draws a shape (0-300 rows × 0-60 columns), a dtype, a memory
layout (C, Fortran, strided, CSR, CSR with unsorted indices, duplicates and
explicit zeros), a value scale, the estimator's parameters and 1-3 threads,
and checks:

* no crash: a valid input gives a result, an invalid one (no rows, no
  columns) a ``ValueError``;
* the fast path equals a slow NumPy reference (features within their
  forward-error bound, binning exactly, ridge within the solver's accuracy);
* the result is bit-identical for n_jobs=1 and the drawn thread count;
* a pickled and restored estimator gives the same output.

The profile run by the test suite is small and derandomised (the same
examples every run, about ``FUZZ_EXAMPLES`` per target);
``tools/fuzz_campaign.py`` runs the same checks for 10⁴+ examples.
"""

import os
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _binning_reference as binning_ref
from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier, kernel_matrix
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
def inputs(draw, max_rows=300, max_cols=60, min_rows=0, min_cols=0):
    """(X, description): an input matrix as a user might pass it."""
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
    X = X.astype(dtype)
    return _layout(X, layout, rng), (n, d, np.dtype(dtype).name, layout, scale, density)


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


def run_target(name, **kwargs):
    """Run target ``name``'s check on one drawn example (``kwargs`` as its strategy draws them)."""
    drawn = dict(kwargs)
    drawn["X"] = drawn["X"][0]
    if "params" in drawn:
        drawn["params"] = dict(drawn["params"])
    TARGETS[name][1](**drawn)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz(name):
    @SUITE
    @given(TARGETS[name][0])
    def prop(kwargs):
        run_target(name, **kwargs)

    prop()
