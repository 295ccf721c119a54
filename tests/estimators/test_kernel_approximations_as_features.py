"""The scikit-learn-compatible kernel approximations everywhere a feature map goes (issue 28, item 5):
Ridge / RidgeClassifier(features=...) streaming, RidgeCV (with a gamma path where the kernel has a
gamma), partial_fit, and Dask transforms and fits (synchronous scheduler)."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from randfeat import (AdditiveChi2Sampler, Nystroem, PolynomialCountSketch, RBFSampler, Ridge, RidgeClassifier,
                      RidgeCV, SkewedChi2Sampler)
from randfeat._core.protocols import MapCapability

RNG = np.random.default_rng(1)
X = np.abs(RNG.normal(size=(400, 5)))  # non-negative: every map takes it
Y = np.sin(X).sum(axis=1) + 0.05 * RNG.normal(size=400)
W = RNG.uniform(0.2, 2.0, 400)
LABELS = np.array(["a", "b", "c"])[np.argmax(X[:, :3], axis=1)]
ALPHAS = [1e-3, 1e-1, 10.0]

MAPS = {
    "rbf": RBFSampler(gamma=0.3, n_components=60, random_state=0),
    "skewed": SkewedChi2Sampler(skewedness=0.5, n_components=60, random_state=0),
    "sketch": PolynomialCountSketch(gamma=0.5, degree=2, coef0=1.0, n_components=60, random_state=0),
    "chi2": AdditiveChi2Sampler(sample_steps=2),
    "nystroem": Nystroem(gamma=0.3, n_components=60, random_state=0),
    "nystroem_chi2": Nystroem("chi2", n_components=60, random_state=0),
}
GAMMA_MAPS = ["rbf", "sketch", "nystroem", "nystroem_chi2"]


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def _dense(Z):
    return Z.toarray() if sp.issparse(Z) else np.asarray(Z)


@pytest.mark.parametrize("name", MAPS)
def test_gamma_path_capability_is_declared_where_the_kernel_has_a_gamma(name):
    assert MAPS[name].has(MapCapability.GAMMA_PATH) == (name in GAMMA_MAPS)
    assert MAPS[name].has(MapCapability.ROW_INDEPENDENT)


@pytest.mark.parametrize("name", MAPS)
def test_ridge_streams_the_features(name):
    fm = MAPS[name]
    streamed = Ridge(alpha=0.1, features=fm, chunk_size=64).fit(X, Y, sample_weight=W)
    Z = clone(fm).fit_transform(X)
    held = Ridge(alpha=0.1).fit(Z, Y, sample_weight=W)
    assert _rel(streamed.coef_, held.coef_) < 1e-9
    assert _rel(streamed.predict(X[:50]), held.predict(_dense(Z)[:50])) < 1e-9


@pytest.mark.parametrize("name", MAPS)
def test_classifier_streams_the_features(name):
    clf = RidgeClassifier(alpha=0.1, features=MAPS[name], chunk_size=100).fit(X, LABELS)
    held = RidgeClassifier(alpha=0.1).fit(clone(MAPS[name]).fit_transform(X), LABELS)
    assert _rel(clf.coef_, held.coef_) < 1e-9
    assert clf.score(X, LABELS) > 0.8


def test_additive_chi2_sparse_features_in_ridge():
    Xs = sp.csr_matrix(np.where(X > 0.5, X, 0.0))
    fm = AdditiveChi2Sampler()
    held = Ridge(alpha=0.1).fit(fm.fit_transform(Xs).toarray(), Y)
    # CSR in, CSR out (OutputKind.SAME_AS_INPUT): held as CSR, solved by CG
    # under solver="auto" (to its tol), by the Gram under "cholesky".
    m = Ridge(alpha=0.1, features=fm, tol=1e-13).fit(Xs, Y)
    assert m.solver_ == "cg" and _rel(m.coef_, held.coef_) < 1e-9
    m = Ridge(alpha=0.1, features=fm, solver="cholesky").fit(Xs, Y)
    assert _rel(m.coef_, held.coef_) < 1e-9


@pytest.mark.parametrize("name", GAMMA_MAPS)
def test_ridge_cv_gamma_path_equals_separate_fits(name):
    fm = MAPS[name]
    gammas = [0.05, 0.3, 2.0]
    m = RidgeCV(ALPHAS, features=fm, gammas=gammas).fit(X, Y, sample_weight=W)
    assert m.gamma_ in gammas and m.features_.gamma == m.gamma_
    separate = [RidgeCV(ALPHAS, features=clone(fm).set_params(gamma=g)).fit(X, Y, sample_weight=W) for g in gammas]
    np.testing.assert_allclose(m.gamma_scores_, [s.best_score_ for s in separate], rtol=1e-9)
    alone = clone(fm).set_params(gamma=m.gamma_).fit(X)
    np.testing.assert_array_equal(m.features_.transform(X), alone.transform(X))  # one draw, bit-identical


@pytest.mark.parametrize("name", ["skewed", "chi2"])
def test_ridge_cv_alphas_without_a_gamma(name):
    m = RidgeCV(ALPHAS, features=MAPS[name]).fit(X, Y)
    assert m.alpha_ in ALPHAS and m.score(X, Y) > 0.5


@pytest.mark.parametrize("name", MAPS)
def test_partial_fit_equals_fit(name):
    # The map is fitted on the first block (Nystroem: its landmarks come from it), then
    # every block's statistics are merged: the same model as a fit on all the features.
    est = Ridge(alpha=0.3, features=MAPS[name], chunk_size=64)
    blocks = ((0, 1), (1, 150), (150, 151), (151, 400)) if "nystroem" not in name else ((0, 150), (150, 151),
                                                                                         (151, 400))
    inc = clone(est)
    for s, e in blocks:
        inc.partial_fit(X[s:e], Y[s:e], sample_weight=W[s:e])
    held = Ridge(alpha=0.3).fit(_dense(inc.features_.transform(X)), Y, sample_weight=W)
    assert _rel(inc.coef_, held.coef_) < 1e-9
    if "nystroem" not in name:  # a map drawn without reading rows: also the same as fit
        assert _rel(inc.coef_, clone(est).fit(X, Y, sample_weight=W).coef_) < 1e-9


# ------------------------------------------------------------------ Dask
da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
CHUNKS = ((150, 1, 200, 49), (5,))


@pytest.fixture
def sync():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", MAPS)
def test_dask_fit_and_lazy_transform_equal_in_memory(sync, name, dtype):
    Xt = X.astype(dtype)
    fm = MAPS[name]
    ref = clone(fm).fit(Xt)
    lazy = clone(fm).fit(da.from_array(Xt, chunks=CHUNKS))  # drawn on the client, landmarks fetched there
    Z = lazy.transform(da.from_array(Xt, chunks=CHUNKS))
    assert isinstance(Z, da.Array) and Z.dtype == dtype and Z.chunks[0] == CHUNKS[0]
    np.testing.assert_array_equal(Z.compute(), ref.transform(Xt))  # row-independent: the same bits


def test_dask_gamma_scale_and_nystroem_landmarks(sync):
    m = RBFSampler(gamma="scale", n_components=20, random_state=0)
    ref = clone(m).fit(X)
    lazy = clone(m).fit(da.from_array(X, chunks=CHUNKS))
    assert _rel(lazy.random_weights_, ref.random_weights_) < 1e-12
    ny = Nystroem(n_components=30, random_state=4)
    ref, lazy = clone(ny).fit(X), clone(ny).fit(da.from_array(X, chunks=CHUNKS))
    np.testing.assert_array_equal(lazy.component_indices_, ref.component_indices_)
    np.testing.assert_array_equal(lazy.normalization_, ref.normalization_)


def test_dask_negative_values_are_refused(sync):
    with pytest.raises(ValueError, match="Negative values"):
        AdditiveChi2Sampler().fit(da.from_array(X - 1.0, chunks=CHUNKS))


@pytest.mark.parametrize("name", MAPS)
def test_dask_ridge_fit_equals_in_memory(sync, name):
    est = Ridge(alpha=0.2, features=MAPS[name], chunk_size=64)
    ref = clone(est).fit(X, Y, sample_weight=W)
    Xd = da.from_array(X, chunks=CHUNKS)
    est.fit(Xd, da.from_array(Y, chunks=(CHUNKS[0],)), sample_weight=da.from_array(W, chunks=(CHUNKS[0],)))
    assert _rel(est.coef_, ref.coef_) < 1e-9
    pred = est.predict(Xd)
    assert isinstance(pred, da.Array)
    assert _rel(pred.compute(), ref.predict(X)) < 1e-9
