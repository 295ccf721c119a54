"""Ridge leverage scores: Nystroem(landmarks='leverage' | array) and RandomFourierFeatures(sampling='leverage').

Oracles: exact ridge leverage scores diag(K(K + λI)⁻¹) on data small enough
to form K; scikit-learn's Nystroem fitted on the user's landmarks as its
basis; the exact kernel for the expectation of the importance-weighted
Fourier features (a fixed-seed statistical test whose tolerance is the
estimate's own standard error, and which the same features without the
weights fail).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import kernel_approximation as ska
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat import (Nystroem, RandomFourierFeatures, Ridge, RidgeClassifier, RidgeClassifierCV, RidgeCV,
                      kernel_matrix)
from randfeat._core.input_stats import MemorySummary
from randfeat._maps import leverage
from randfeat._maps.leverage import _PoolKernel, _scores, frequency_leverage, recursive_leverage_scores
from randfeat._maps.nystroem_kernels import resolve_kernel

RNG = np.random.default_rng(0)
# Clusters of very different sizes and spreads: leverage is far from uniform on them.
X = np.vstack([RNG.normal(0, 0.3, (250, 4)), RNG.normal(3, 1.0, (100, 4)), RNG.normal(-4, 2.0, (50, 4))])
Y = np.sin(X).sum(axis=1) + 0.05 * RNG.normal(size=X.shape[0])
LABELS = np.array(["a", "b", "c"])[np.argmax(X[:, :3], axis=1)]
GAMMA = 0.3


def _exact_scores(X, lam, **kw):
    K = kernel_matrix(X, **kw)
    return np.diag(np.linalg.solve(K + lam * np.eye(K.shape[0]), K))


def _pool(X, kernel="rbf", gamma=GAMMA, n_threads=1):
    k = resolve_kernel(kernel, gamma, None, None, None, X.shape[1])
    return _PoolKernel(k, X, np.arange(X.shape[0]), n_threads)


# ------------------------------------------------------------ the scores
def test_scores_from_every_row_are_exact_and_from_a_subset_are_upper_bounds():
    lam = 2.0
    tau = _exact_scores(X, lam, gamma=GAMMA)
    pk = _pool(X)
    n = X.shape[0]
    every, _ = _scores(pk, np.arange(n), np.ones(n), np.arange(n), np.ones(n), lam)
    np.testing.assert_allclose(every, tau, rtol=1e-8, atol=1e-10)
    # Unweighted landmarks S: C_S ≼ C, so φᵀ(C_S + λ)⁻¹φ ≥ φᵀ(C + λ)⁻¹φ for every row, exactly.
    S = np.sort(RNG.choice(n, 60, replace=False))
    sub, _ = _scores(pk, np.arange(n), np.ones(n), S, np.ones(S.size), lam)
    assert (sub >= tau * (1 - 1e-9)).all() and (sub > 1.5 * tau).any()
    # ... and at most 1 on the landmarks themselves.
    assert (sub[S] <= 1 + 1e-9).all()


@pytest.mark.parametrize("lam", [20.0, 40.0])
def test_recursive_estimates_are_within_the_guarantee(lam):
    # With m of order d_eff·log(d_eff)/ε² the weighted landmarks are a (λ, ε)-approximation
    # of C + λ w.h.p. (matrix Chernoff), and then τ/(1 + ε) ≤ l̃ ≤ τ/(1 − ε); ε = 1/2 and
    # m = 8·d_eff·log d_eff here (20 seeds of it passed when this test was written).
    tau = _exact_scores(X, lam, gamma=GAMMA)
    d_eff = tau.sum()
    m = int(np.ceil(8 * d_eff * np.log(d_eff)))
    assert m < X.shape[0] / 2  # a real recursion, not the exact case
    for seed in range(3):
        est, used = recursive_leverage_scores(_pool(X), m, lam, np.random.default_rng(seed))
        assert used == lam
        ratio = est / tau
        assert ratio.min() >= 2 / 3 and ratio.max() <= 2, (seed, ratio.min(), ratio.max())


def test_auto_regularization_aims_at_an_effective_dimension_of_m():
    for m in (20, 60):
        est, lam = recursive_leverage_scores(_pool(X), m, "auto", np.random.default_rng(1))
        d_eff = _exact_scores(X, lam, gamma=GAMMA).sum()
        target = leverage.auto_target(m)
        assert target / 1.5 <= d_eff <= target * 1.5, (m, lam, d_eff)


def test_frequency_leverage_is_the_column_leverage_in_both_spaces():
    W = RNG.normal(size=(4, 50)) * np.sqrt(2 * GAMMA)
    F = np.hstack([np.cos(X @ W), np.sin(X @ W)]) / np.sqrt(50)
    for rows in (X, X[:60]):  # features' space (100 ≤ 400 rows) and rows' space (100 > 60)
        Fr = F[: rows.shape[0]]
        G = Fr.T @ Fr
        col = np.diag(G @ np.linalg.inv(G + 0.7 * np.eye(100)))
        got, lam = frequency_leverage(rows, W, 0.7, 1, chunk=16)
        assert lam == 0.7
        np.testing.assert_allclose(got, col[:50] + col[50:], rtol=1e-9)


def test_weighted_choice_is_distinct_and_follows_the_weights():
    rng = np.random.default_rng(0)
    w = np.r_[np.full(10, 100.0), np.full(990, 1.0), 0.0]
    picks = np.concatenate([leverage.weighted_choice(rng, w, 5) for _ in range(400)])
    assert all(np.unique(leverage.weighted_choice(rng, w, 1000)).size == 1000 for _ in range(3))
    heavy = np.isin(picks, np.arange(10)).mean()
    assert 0.35 < heavy < 0.65  # the first draw alone is heavy with probability 1000/1990
    assert 1000 not in picks  # weight 0: last


# ------------------------------------------------------------ Nystroem
def test_nystroem_leverage_is_reproducible_and_thread_independent():
    a = Nystroem(gamma=GAMMA, n_components=40, landmarks="leverage", random_state=3, n_jobs=1).fit(X)
    b = Nystroem(gamma=GAMMA, n_components=40, landmarks="leverage", random_state=3, n_jobs=2).fit(X)
    c = Nystroem(gamma=GAMMA, n_components=40, landmarks="leverage", random_state=4).fit(X)
    np.testing.assert_array_equal(a.component_indices_, b.component_indices_)
    np.testing.assert_array_equal(a.normalization_, b.normalization_)
    assert np.unique(a.component_indices_).size == 40
    assert not np.array_equal(np.sort(a.component_indices_), np.sort(c.component_indices_))
    np.testing.assert_array_equal(a.components_, X[a.component_indices_])


def test_nystroem_leverage_prefers_the_sparse_clusters():
    # 250 rows in a tight cluster, 150 spread out: uniform landmarks land 62.5 % in the
    # tight one; the spread rows carry most of the leverage.
    share = []
    for seed in range(5):
        idx = Nystroem(gamma=GAMMA, n_components=30, landmarks="leverage", random_state=seed).fit(X).component_indices_
        share.append(np.mean(idx < 250))
    assert np.mean(share) < 0.4


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True])
def test_nystroem_leverage_dtypes_sparse_kernels(dtype, sparse):
    Xp = np.abs(X).astype(dtype)
    Xp[Xp < 0.5] = 0
    Xs = sp.csr_matrix(Xp) if sparse else Xp
    for kernel, kw in (("rbf", {"gamma": GAMMA}), ("laplacian", {"gamma": 0.1}), ("polynomial", {"degree": 2}),
                       ("chi2", {}), ("cosine", {})):
        m = Nystroem(kernel, n_components=30, landmarks="leverage", random_state=0, **kw).fit(Xs)
        Z = m.transform(Xs)
        assert Z.dtype == dtype and Z.shape == (X.shape[0], 30)
        ref = Nystroem(kernel, n_components=30, landmarks="leverage", random_state=0, **kw).fit(Xp)
        np.testing.assert_array_equal(m.component_indices_, ref.component_indices_)  # the same for CSR


def test_nystroem_leverage_precomputed_and_callable():
    K = kernel_matrix(X, gamma=GAMMA)
    pre = Nystroem("precomputed", n_components=30, landmarks="leverage", random_state=0).fit(K)
    rows = Nystroem(gamma=GAMMA, n_components=30, landmarks="leverage", random_state=0).fit(X)
    np.testing.assert_array_equal(pre.component_indices_, rows.component_indices_)

    def k(a, b):
        return float(np.exp(-GAMMA * ((a - b) ** 2).sum()))

    fn = Nystroem(k, n_components=30, landmarks="leverage", random_state=0).fit(X[:120])
    ref = Nystroem(gamma=GAMMA, n_components=30, landmarks="leverage", random_state=0).fit(X[:120])
    np.testing.assert_array_equal(fn.component_indices_, ref.component_indices_)


def test_nystroem_leverage_reads_a_pool_of_rows(monkeypatch):
    monkeypatch.setattr(leverage, "POOL_ROWS", 100)
    monkeypatch.setattr(leverage, "POOL_ROWS_PER_LANDMARK", 2)
    read = []

    class Spy(MemorySummary):
        def rows(self, index):
            read.append(np.asarray(index).size)
            return super().rows(index)

    k = resolve_kernel("rbf", GAMMA, None, None, None, 4)
    idx = leverage.leverage_landmarks(Spy(X), 20, np.random.default_rng(0), k)
    assert read == [100] and idx.size == 20 and np.unique(idx).size == 20


def test_nystroem_user_landmarks_equal_sklearn_on_those_rows():
    L = RNG.normal(size=(25, 4)) * 2
    ours = Nystroem(gamma=GAMMA, landmarks=L).fit(X)
    theirs = ska.Nystroem(gamma=GAMMA, n_components=25, random_state=0).fit(L)  # every row of L is its basis
    Zo, Zt = ours.transform(X), theirs.transform(X)
    np.testing.assert_allclose(Zo @ Zo.T, Zt @ Zt.T, rtol=0, atol=1e-8)
    assert ours.component_indices_ is None and ours.n_features_out_ == 25
    f32 = Nystroem(gamma=GAMMA, landmarks=L).fit(X.astype(np.float32))
    assert f32.components_.dtype == np.float32 and f32.transform(X.astype(np.float32)).dtype == np.float32
    csr = Nystroem(gamma=GAMMA, landmarks=sp.csr_matrix(L)).fit(X)
    np.testing.assert_allclose(csr.transform(X), Zo, rtol=0, atol=1e-12)


def test_nystroem_landmark_errors():
    with pytest.raises(ValueError, match="landmarks has 3 features, but X has 4"):
        Nystroem(landmarks=np.ones((5, 3))).fit(X)
    bad = np.ones((5, 4))
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        Nystroem(landmarks=bad).fit(X)
    with pytest.raises(ValueError, match="infinity"):
        Nystroem(landmarks=np.full((5, 4), np.inf)).fit(X)
    with pytest.raises(ValueError):
        Nystroem(landmarks=np.array([["a"] * 4] * 3)).fit(X)
    with pytest.raises(ValueError, match="2D array"):
        Nystroem(landmarks=np.ones(4)).fit(X)
    with pytest.raises(InvalidParameterError, match="'uniform', 'leverage' or an array"):
        Nystroem(landmarks="kmeans").fit(X)
    with pytest.raises(ValueError, match="positive semi-definite kernel"):
        Nystroem("sigmoid", landmarks="leverage").fit(X)
    with pytest.raises(ValueError, match="positive semi-definite kernel"):
        Nystroem("additive_chi2", landmarks="leverage").fit(np.abs(X))
    for bad_reg in (0.0, -1.0, "big", np.inf):
        with pytest.raises(InvalidParameterError, match="leverage_regularization"):
            Nystroem(landmarks="leverage", leverage_regularization=bad_reg).fit(X)


# ------------------------------------------------------------ Fourier
def _lev_rff(D=40, **kw):
    return RandomFourierFeatures(D, **{"gamma": GAMMA, "sampling": "leverage", "random_state": 0, **kw})


def test_leverage_rff_is_reproducible_thread_independent_and_data_dependent():
    a, b = _lev_rff(n_jobs=1).fit(X), _lev_rff(n_jobs=2).fit(X)
    np.testing.assert_array_equal(a.random_weights_, b.random_weights_)
    np.testing.assert_array_equal(a.importance_weights_, b.importance_weights_)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    other = _lev_rff().fit(X[::-1] * 2)
    assert not np.array_equal(other.random_weights_, a.random_weights_)
    assert not np.array_equal(_lev_rff(random_state=1).fit(X).random_weights_, a.random_weights_)
    assert RandomFourierFeatures(40, gamma=GAMMA, random_state=0).fit(X).importance_weights_ is None


@pytest.mark.parametrize("feature_map", ["cossin", "cos"])
def test_importance_weights_keep_the_kernel_unbiased(feature_map):
    # E[z(x)ᵀz(y)] = k(x, y) over the draw: the mean of 300 fits is within 4 standard
    # errors of the exact kernel on every pair; without the weights it is not (on these
    # data the leverage favours high frequencies, which alone underestimate k).
    rng = np.random.default_rng(3)
    Xb = rng.normal(size=(80, 3))
    Xb[:40] *= 0.3
    P = Xb[[0, 1, 45, 60, 5]]
    iu = np.triu_indices(5, 1)
    K = kernel_matrix(P, gamma=0.5)[iu]
    est, unweighted = [], []
    for s in range(300):
        m = RandomFourierFeatures(16, gamma=0.5, sampling="leverage", feature_map=feature_map,
                                  leverage_regularization=0.5, random_state=s).fit(Xb)
        Z = m.transform(P)
        root = np.sqrt(m.importance_weights_)
        Zu = Z / np.concatenate([root, root[: Z.shape[1] - root.size]])
        est.append((Z @ Z.T)[iu])
        unweighted.append((Zu @ Zu.T)[iu])
    est, unweighted = np.array(est), np.array(unweighted)
    z = (est.mean(0) - K) / (est.std(0) / np.sqrt(len(est)))
    zu = (unweighted.mean(0) - K) / (unweighted.std(0) / np.sqrt(len(est)))
    assert np.abs(z).max() < 4, z
    assert np.abs(zu).max() > 6, zu  # the test can fail: leverage sampling alone is biased


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("D", [41, 40])
@pytest.mark.parametrize("feature_map", ["cossin", "cos"])
def test_leverage_rff_maps_dtypes_and_sparse(feature_map, D, sparse, dtype):
    Xd = X.astype(dtype)
    Xd[np.abs(Xd) < 0.3] = 0
    Xi = sp.csr_matrix(Xd) if sparse else Xd
    m = _lev_rff(D, feature_map=feature_map).fit(Xi)
    Z = m.transform(Xi)
    assert Z.dtype == dtype and Z.shape == (X.shape[0], D)
    ref = _lev_rff(D, feature_map=feature_map).fit(Xd)
    np.testing.assert_allclose(Z, ref.transform(Xd), rtol=0, atol=1e-5 if dtype == np.float32 else 1e-12)
    # The weights scale each frequency's columns: the features without them are the plain map's.
    plain = RandomFourierFeatures(D, gamma=GAMMA, feature_map=feature_map).fit(Xd)
    state = m._fitted_state()
    plain._state = type(state)(n_features_out=D, W=state.W, b=state.b, gamma=state.gamma, cossin=state.cossin)
    root = np.sqrt(m.importance_weights_)
    np.testing.assert_allclose(Z, plain.transform(Xi) * np.concatenate([root, root[: D - root.size]]),
                               rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "cauchy", "matern"])
def test_leverage_rff_every_kernel_and_gamma_scale(kernel):
    m = RandomFourierFeatures(30, kernel=kernel, gamma="scale", sampling="leverage", random_state=0).fit(X)
    assert m.gamma_ == pytest.approx(1.0 / (X.shape[1] * X.var()))
    assert np.isfinite(m.transform(X)).all() and (m.importance_weights_ > 0).all()


def test_leverage_rff_errors():
    for bad_reg in (0, -2.0, "none"):
        with pytest.raises(InvalidParameterError, match="leverage_regularization"):
            _lev_rff(leverage_regularization=bad_reg).fit(X)
    with pytest.raises(InvalidParameterError, match="sampling"):
        RandomFourierFeatures(sampling="leverages").fit(X)
    with pytest.raises(ValueError, match="too large"):  # frequencies overflow float32
        RandomFourierFeatures(10, gamma=1e300, sampling="leverage").fit(X.astype(np.float32))
    m = _lev_rff().fit(X)
    with pytest.raises(ValueError, match="features"):
        m.transform(X[:, :3])
    state = m._fitted_state()
    with pytest.raises(ValueError, match="importance_weights_"):
        type(state)(n_features_out=40, W=state.W, b=state.b, gamma=state.gamma, cossin=True,
                    weights=-state.weights)


# ------------------------------------------------------------ everywhere a map goes
MAPS = {
    "nystroem": Nystroem(gamma=GAMMA, n_components=40, landmarks="leverage", random_state=0),
    "nystroem_lambda": Nystroem(gamma=GAMMA, n_components=40, landmarks="leverage", leverage_regularization=1.0,
                                random_state=0),
    "rff": _lev_rff(),
    "rff_cos": _lev_rff(41, feature_map="cos", leverage_regularization=3.0),
}


@pytest.mark.parametrize("name", MAPS)
def test_ridge_and_classifier_stream_the_features(name):
    fm = MAPS[name]
    streamed = Ridge(alpha=0.1, features=fm, chunk_size=64).fit(X, Y)
    held = Ridge(alpha=0.1).fit(clone(fm).fit_transform(X), Y)
    np.testing.assert_allclose(streamed.coef_, held.coef_, rtol=1e-9, atol=1e-12)
    clf = RidgeClassifier(alpha=0.1, features=fm, chunk_size=100).fit(X, LABELS)
    held = RidgeClassifier(alpha=0.1).fit(clone(fm).fit_transform(X), LABELS)
    np.testing.assert_allclose(clf.coef_, held.coef_, rtol=1e-9, atol=1e-12)
    # Above chance (0.4), not more: leverage landmarks are few in the tight cluster, whose
    # labels (argmax of its small coordinates) vary where the kernel is nearly flat.
    assert clf.score(X, LABELS) > 0.6


@pytest.mark.parametrize("name", MAPS)
def test_ridge_cv_gamma_path_is_a_fit_at_each_gamma(name):
    fm = MAPS[name]
    gammas = [0.05, 0.3, 2.0]
    maps = fm._fit_gamma_path(X, gammas)
    for g, m in zip(gammas, maps):
        alone = clone(fm).set_params(gamma=g).fit(X)
        np.testing.assert_array_equal(m.transform(X), alone.transform(X))
    cv = RidgeCV([1e-3, 1e-1, 10.0], features=fm, gammas=gammas).fit(X, Y)
    assert cv.gamma_ in gammas and cv.score(X, Y) > 0.5
    cvc = RidgeClassifierCV([1e-2, 1.0], features=fm, gammas=gammas[:2]).fit(X, LABELS)
    assert cvc.score(X, LABELS) > 0.6


@pytest.mark.parametrize("name", MAPS)
def test_partial_fit_equals_fit_on_the_features(name):
    # The map is fitted on the first block (its leverage is that block's), then merged statistics.
    inc = Ridge(alpha=0.3, features=MAPS[name], chunk_size=64)
    for s, e in ((0, 200), (200, 201), (201, 400)):
        inc.partial_fit(X[s:e], Y[s:e])
    held = Ridge(alpha=0.3).fit(inc.features_.transform(X), Y)
    np.testing.assert_allclose(inc.coef_, held.coef_, rtol=1e-9, atol=1e-12)


da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
CHUNKS = ((150, 1, 200, 49), (4,))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", MAPS)
def test_dask_fit_equals_in_memory(name, dtype):
    with dask.config.set(scheduler="synchronous"):
        Xt = X.astype(dtype)
        fm = MAPS[name]
        ref = clone(fm).fit(Xt)
        lazy = clone(fm).fit(da.from_array(Xt, chunks=CHUNKS))  # the same rows read through the summary
        Z = lazy.transform(da.from_array(Xt, chunks=CHUNKS))
        assert isinstance(Z, da.Array) and Z.dtype == dtype
        np.testing.assert_array_equal(Z.compute(), ref.transform(Xt))
        est = Ridge(alpha=0.2, features=fm, chunk_size=64)
        r = clone(est).fit(Xt, Y)
        est.fit(da.from_array(Xt, chunks=CHUNKS), da.from_array(Y, chunks=(CHUNKS[0],)))
        np.testing.assert_allclose(est.coef_, r.coef_, rtol=1e-4 if dtype == np.float32 else 1e-9, atol=1e-9)


@parametrize_with_checks([Nystroem(n_components=10, landmarks="leverage"),
                          RandomFourierFeatures(10, sampling="leverage")])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("sampling", ["iid", "orthogonal", "qmc", "sorf", "fastfood"])
def test_importance_weights_are_none_without_leverage_sampling(sampling):
    X = np.random.default_rng(0).standard_normal((50, 6))
    est = RandomFourierFeatures(16, sampling=sampling, random_state=0).fit(X)
    assert est.importance_weights_ is None
