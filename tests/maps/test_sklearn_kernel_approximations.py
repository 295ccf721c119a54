"""The scikit-learn-compatible kernel approximations (issue 28): RBFSampler, Nystroem,
PolynomialCountSketch, SkewedChi2Sampler, AdditiveChi2Sampler, and the exact kernels.

scikit-learn is the oracle wherever it computes the same thing: for one
``random_state`` the five maps draw what scikit-learn draws, so their
features must equal scikit-learn's to rounding; the compiled kernel block
is checked against ``sklearn.metrics.pairwise`` and the NumPy kernels of
``randfeat._maps.exact``; those against scikit-learn or closed forms.
Pipelines (Ridge, RidgeCV, partial_fit, Dask) are in
test_kernel_approximation_pipeline.py.
"""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import kernel_approximation as ska
from sklearn.metrics import pairwise as pw
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

import randfeat
from randfeat import (AdditiveChi2Sampler, Nystroem, PolynomialCountSketch, RBFSampler, SkewedChi2Sampler,
                      kernel_matrix)
from randfeat._ext import _kernel_approx_fast as _fast
from randfeat._maps import exact
from randfeat._maps.count_sketch import count_sketch_features, draw_count_sketch
from randfeat._maps.nystroem import nystroem_normalization
from randfeat._maps.nystroem_kernels import kernel_block, prepare_landmarks, resolve_kernel

RNG = np.random.default_rng(0)
X_POS = np.abs(RNG.normal(size=(120, 7)))
X_POS[X_POS < 0.3] = 0.0  # zeros: the χ² maps' special case, sparse structure
X_POS[0] = 0.0  # an all-zero row
X_NEG = RNG.normal(size=(120, 7))
DTYPES = [np.float64, np.float32]
TOL = {np.float64: 1e-12, np.float32: 2e-5}


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def _dense(Z):
    return Z.toarray() if sp.issparse(Z) else np.asarray(Z)


# ------------------------------------------------------------ exact kernels
def test_exact_kernels_equal_sklearn():
    X, Y = X_POS[:40], X_POS[60:90]
    assert _rel(exact.polynomial(X, Y, 0.3, 3, 1.5), pw.polynomial_kernel(X, Y, degree=3, gamma=0.3, coef0=1.5)) < 1e-14
    assert _rel(exact.chi2(X, Y, 0.7), pw.chi2_kernel(X, Y, gamma=0.7)) < 1e-14
    assert _rel(exact.additive_chi2(X, Y), pw.additive_chi2_kernel(X, Y)) < 1e-14
    with pytest.raises(ValueError, match="negative"):
        exact.chi2(X_NEG, Y)


def test_exact_skewed_chi2_and_vedaldi_closed_forms():
    X, Y, c = X_POS[:30], X_POS[50:70], 0.4
    u, v = np.log(X + c), np.log(Y + c)
    sech = np.prod(1.0 / np.cosh((u[:, None, :] - v[None, :, :]) / 2.0), axis=2)
    assert _rel(exact.skewed_chi2(X, Y, c), sech) < 1e-13
    num, den = 2 * X[:, None, :] * Y[None, :, :], X[:, None, :] + Y[None, :, :]
    direct = np.where(den > 0, num / np.where(den > 0, den, 1), 0).sum(axis=2)
    assert _rel(exact.vedaldi_chi2(X, Y), direct) < 1e-13
    with pytest.raises(ValueError, match="smaller than -skewedness"):
        exact.skewed_chi2(X_NEG, Y, 0.5)


@pytest.mark.parametrize("kernel,kw,func", [
    ("polynomial", dict(gamma=0.3, degree=3, coef0=1.5), lambda X, Y: exact.polynomial(X, Y, 0.3, 3, 1.5)),
    ("chi2", dict(gamma=0.7), lambda X, Y: exact.chi2(X, Y, 0.7)),
    ("additive_chi2", {}, exact.additive_chi2),
    ("skewed_chi2", dict(skewedness=0.4), lambda X, Y: exact.skewed_chi2(X, Y, 0.4)),
])
def test_kernel_matrix_has_the_exact_kernels(kernel, kw, func):
    X, Y = X_POS[:20], X_POS[30:45]
    K = kernel_matrix(X, Y, kernel=kernel, **kw)
    assert K.dtype == np.float64 and np.array_equal(K, func(X, Y))
    assert _rel(kernel_matrix(sp.csr_matrix(X), kernel=kernel, **kw), func(X, X)) < 1e-14


def test_kernel_matrix_polynomial_defaults_are_the_sketch_s():
    X = X_NEG[:10]
    assert np.array_equal(kernel_matrix(X, kernel="polynomial"), (X @ X.T) ** 2)
    with pytest.raises(InvalidParameterError):
        kernel_matrix(X, kernel="polynomial", degree=0.5)
    with pytest.raises(InvalidParameterError):
        kernel_matrix(X, kernel="poly")


# ---------------------------------------------------- compiled kernel block
KERNEL_CASES = [
    ("rbf", dict(gamma=0.2), lambda X, Y: pw.rbf_kernel(X, Y, gamma=0.2)),
    ("rbf", dict(gamma=50.0), lambda X, Y: pw.rbf_kernel(X, Y, gamma=50.0)),  # exp underflow region
    ("laplacian", dict(gamma=0.3), lambda X, Y: pw.laplacian_kernel(X, Y, gamma=0.3)),
    ("poly", dict(gamma=0.5, degree=3, coef0=1), lambda X, Y: pw.polynomial_kernel(X, Y, 3, 0.5, 1)),
    ("poly", dict(gamma=0.5, degree=2.5, coef0=2), lambda X, Y: pw.polynomial_kernel(X, Y, 2.5, 0.5, 2)),
    ("linear", {}, pw.linear_kernel),
    ("sigmoid", dict(gamma=0.1, coef0=0.5), lambda X, Y: pw.sigmoid_kernel(X, Y, 0.1, 0.5)),
    ("cosine", {}, pw.cosine_similarity),
    ("chi2", dict(gamma=0.6), lambda X, Y: pw.chi2_kernel(X, Y, gamma=0.6)),
    ("additive_chi2", {}, pw.additive_chi2_kernel),
    ("cauchy", dict(gamma=0.4), lambda X, Y: kernel_matrix(X, Y, kernel="cauchy", gamma=0.4)),
    ("skewed_chi2", dict(kernel_params={"skewedness": 0.7}),
     lambda X, Y: kernel_matrix(X, Y, kernel="skewed_chi2", skewedness=0.7)),
] + [("matern", dict(gamma=0.3, kernel_params={"nu": nu}),
      lambda X, Y, nu=nu: kernel_matrix(X, Y, kernel="matern", gamma=0.3, nu=nu)) for nu in (0.5, 1.5, 2.5)]


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel,kw,reference", KERNEL_CASES)
def test_kernel_block_matches_reference(kernel, kw, reference, dtype):
    # 45 landmarks: five full 8-column panels plus a partial one; 61 rows: partial row blocks.
    X, L = X_POS[:61].astype(dtype), X_POS[70:115].astype(dtype)
    k = resolve_kernel(kernel, kw.get("gamma"), kw.get("coef0"), kw.get("degree"), kw.get("kernel_params"), 7)
    ref = reference(X.astype(np.float64), L.astype(np.float64))
    for rows in (X, np.asfortranarray(X), sp.csr_matrix(X)):
        K = kernel_block(k, rows, prepare_landmarks(k, L, dtype), 2)
        assert K.dtype == dtype
        tol = 1e-13 if dtype == np.float64 else 2e-6 * (1 + 30 * (kernel in ("poly", "sigmoid", "linear")))
        assert np.abs(K - ref).max() <= tol * max(1.0, np.abs(ref).max()), kernel


def test_kernel_block_has_no_temporaries_across_subtiles_and_is_row_independent():
    # m = 3000 float64 landmarks: sub-tiles of 6 rows, chunks of 96; every split gives the same bits.
    X, L = RNG.normal(size=(200, 5)), RNG.normal(size=(3000, 5))
    k = resolve_kernel("rbf", 0.5, None, None, None, 5)
    lm = prepare_landmarks(k, L, np.float64)
    K = kernel_block(k, X, lm, 2)
    assert np.abs(K - pw.rbf_kernel(X, L, gamma=0.5)).max() < 1e-13
    parts = np.vstack([kernel_block(k, X[s:e], lm, 1) for s, e in ((0, 1), (1, 97), (97, 200))])
    assert np.array_equal(K, parts)


# ----------------------------------------------- drop-in equality: the maps
def _pair(cls, sk_cls, kw):
    return cls(**kw), sk_cls(**kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gamma", [1.0, 0.05, 0.0])
def test_rbf_sampler_equals_sklearn(gamma, dtype):
    X = X_NEG.astype(dtype)
    ours, theirs = _pair(RBFSampler, ska.RBFSampler, dict(gamma=gamma, n_components=37, random_state=3))
    ours.fit(X), theirs.fit(X)
    assert np.array_equal(ours.random_weights_, theirs.random_weights_)
    assert np.array_equal(ours.random_offset_, theirs.random_offset_)
    Z = ours.transform(X)
    assert Z.dtype == dtype and _rel(Z, theirs.transform(X)) < TOL[dtype]
    assert _rel(ours.transform(sp.csr_matrix(X)), Z) < TOL[dtype]


def test_rbf_sampler_gamma_scale_and_generator():
    ours = RBFSampler(gamma="scale", n_components=20, random_state=1).fit(X_NEG)
    theirs = ska.RBFSampler(gamma="scale", n_components=20, random_state=1).fit(X_NEG)
    assert _rel(ours.random_weights_, theirs.random_weights_) < 1e-13
    g1 = RBFSampler(random_state=np.random.default_rng(5)).fit(X_NEG).random_weights_
    g2 = RBFSampler(random_state=np.random.default_rng(5)).fit(X_NEG).random_weights_
    assert np.array_equal(g1, g2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_skewed_chi2_sampler_equals_sklearn(dtype):
    X = X_POS.astype(dtype)
    ours, theirs = _pair(SkewedChi2Sampler, ska.SkewedChi2Sampler, dict(skewedness=0.3, n_components=41,
                                                                          random_state=4))
    ours.fit(X), theirs.fit(X)
    assert np.array_equal(ours.random_weights_, theirs.random_weights_)
    Z = ours.transform(X)
    assert Z.dtype == dtype and _rel(Z, theirs.transform(X)) < TOL[dtype] * 10
    # Sparse X (c > 0) is not densified: log c folded into the phases, the same features to rounding.
    assert _rel(ours.transform(sp.csr_matrix(X)), Z) < TOL[dtype] * 100


def test_skewed_chi2_refuses_values_at_or_below_minus_c():
    m = SkewedChi2Sampler(skewedness=0.5, random_state=0).fit(X_POS)
    with pytest.raises(ValueError, match="smaller than -skewedness"):
        m.transform(X_POS - 0.6)
    neg = SkewedChi2Sampler(skewedness=-0.1, random_state=0).fit(X_POS + 1.0)
    with pytest.raises(ValueError, match="smaller than -skewedness"):  # a sparse X's implicit zeros are <= 0.1
        neg.transform(sp.csr_matrix(X_POS + 1.0 - (X_POS + 1.0)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("degree,coef0,D", [(1, 0, 50), (2, 0, 64), (2, 1.5, 64), (3, 0.5, 100), (4, 0, 30)])
def test_polynomial_count_sketch_equals_sklearn(degree, coef0, D, dtype):
    X = X_NEG.astype(dtype)
    kw = dict(gamma=0.7, degree=degree, coef0=coef0, n_components=D, random_state=2)
    ours, theirs = _pair(PolynomialCountSketch, ska.PolynomialCountSketch, kw)
    ours.fit(X), theirs.fit(X)
    assert np.array_equal(ours.indexHash_, theirs.indexHash_) and np.array_equal(ours.bitHash_, theirs.bitHash_)
    Z = ours.transform(X)
    assert Z.dtype == dtype  # scikit-learn returns float64
    assert _rel(Z, theirs.transform(X)) < TOL[dtype] * 10
    assert _rel(ours.transform(sp.csr_matrix(X)), Z) < TOL[dtype] * 10


@pytest.mark.parametrize("dtype", DTYPES)
def test_count_sketch_direct_and_fft_rows_agree(dtype):
    # 60 features, degree 3: full rows take the FFT path, rows with 4 nonzeros the direct sum.
    X = RNG.normal(size=(50, 60)).astype(dtype)
    X[:20, 4:] = 0
    h, s = draw_count_sketch(0, 60, 40, 3, 0.5)
    Z = count_sketch_features(X, h, s, 40, 0.8, 0.5, 2)
    ref = ska.PolynomialCountSketch(gamma=0.8, degree=3, coef0=0.5, n_components=40, random_state=0).fit(X)
    assert _rel(Z, ref.transform(X)) < TOL[dtype] * 10
    # Each row alone gives the same bits (row independence, both paths).
    for i in (0, 19, 20, 49):
        assert np.array_equal(count_sketch_features(X[i:i + 1], h, s, 40, 0.8, 0.5, 1), Z[i:i + 1])


def test_count_sketch_refuses_negative_coef0_and_overflow():
    with pytest.raises(InvalidParameterError, match="sqrt"):
        PolynomialCountSketch(coef0=-1.0).fit(X_NEG)
    m = PolynomialCountSketch(degree=4, n_components=10, random_state=0).fit(X_NEG)
    with pytest.raises(ValueError, match="overflow"):
        m.transform(X_NEG * 1e100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("steps,interval", [(1, None), (2, None), (3, None), (5, 0.3), (2, 0.0), (2, 1e7)])
def test_additive_chi2_equals_sklearn_to_1e_10(steps, interval, dtype):
    X = X_POS.astype(dtype)
    X[1, 1], X[2, 2] = 1e-30, 3e4  # tiny and large values
    ours = AdditiveChi2Sampler(sample_steps=steps, sample_interval=interval)
    theirs = ska.AdditiveChi2Sampler(sample_steps=steps, sample_interval=interval)
    with np.errstate(over="ignore"):  # scikit-learn's cosh(pi j L) overflows for L = 1e7
        R, Rs = theirs.fit_transform(X), theirs.fit_transform(sp.csr_matrix(X))
    Z, Zs = ours.fit_transform(X), ours.fit_transform(sp.csr_matrix(X))
    assert Z.dtype == dtype and Zs.dtype == dtype and sp.issparse(Zs)
    # float64: scikit-learn's formula in the same order (1e-10 is the bar); float32: it rounds in float32.
    tol = 1e-10 if dtype == np.float64 else 1e-6
    L = {1: 0.8, 2: 0.5, 3: 0.4}[steps] if interval is None else max(interval, 1.0)
    scale = np.sqrt(np.tile(X.astype(np.float64), 2 * steps - 1) * L) + 1e-300  # |outputs| <= ~sqrt(x L) * 1.3
    assert (np.abs(Z - R) <= tol * scale).all()
    assert np.array_equal(Zs.indices, Rs.indices) and np.array_equal(Zs.indptr, Rs.indptr)
    assert (np.abs(Zs.toarray() - Rs.toarray()) <= tol * scale).all()


def test_additive_chi2_names_statelessness_and_errors():
    ours, theirs = AdditiveChi2Sampler(sample_steps=3), ska.AdditiveChi2Sampler(sample_steps=3)
    assert _rel(ours.transform(X_POS), theirs.transform(X_POS)) < 1e-14  # unfitted, as scikit-learn
    assert not ours.__sklearn_is_fitted__()
    ours.fit(X_POS), theirs.fit(X_POS)
    assert list(ours.get_feature_names_out()) == list(theirs.get_feature_names_out())
    with pytest.raises(ValueError, match="Negative values in data passed to X in AdditiveChi2Sampler"):
        ours.transform(X_NEG)
    with pytest.raises(ValueError, match="Negative values in data passed to X in AdditiveChi2Sampler"):
        AdditiveChi2Sampler().fit(X_NEG)
    with pytest.raises(ValueError, match="you need to provide sample_interval"):
        AdditiveChi2Sampler(sample_steps=4).fit(X_POS)
    # An explicitly stored zero maps to zeros (scikit-learn's sparse path gives NaN there).
    Xs = sp.csr_matrix((np.array([0.0, 2.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    assert np.isfinite(AdditiveChi2Sampler().transform(Xs).data).all()


# -------------------------------------------------------------- Nystroem
WELL_CONDITIONED = [("rbf", {}), ("rbf", dict(gamma=0.3)), ("laplacian", {}), ("chi2", {}),
                    ("poly", dict(kernel_params={"degree": 2.5, "coef0": 1})), ("additive_chi2", {})]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel,kw", WELL_CONDITIONED)
def test_nystroem_equals_sklearn(kernel, kw, dtype):
    X = X_POS.astype(dtype)
    ours, theirs = Nystroem(kernel, n_components=40, random_state=5, **kw), \
        ska.Nystroem(kernel, n_components=40, random_state=5, **kw)
    ours.fit(X), theirs.fit(X)
    assert np.array_equal(ours.component_indices_, theirs.component_indices_)
    assert np.array_equal(ours.components_, theirs.components_)
    assert ours.normalization_.dtype == dtype
    Z = ours.transform(X)
    assert Z.dtype == dtype
    assert _rel(Z, theirs.transform(X)) < (1e-10 if dtype == np.float64 else 1e-3)


@pytest.mark.parametrize("kernel,kw", [("linear", {}), ("cosine", {}), ("sigmoid", dict(gamma=0.01)),
                                       ("poly", dict(degree=2))])
def test_nystroem_rank_deficient_kernels_approximate_like_sklearn(kernel, kw):
    # K(L, L) is singular here (rank <= 36 < 40): features are not unique, Z Zᵀ is.
    ours = Nystroem(kernel, n_components=40, random_state=5, **kw).fit(X_POS)
    theirs = ska.Nystroem(kernel, n_components=40, random_state=5, **kw).fit(X_POS)
    Z, R = ours.transform(X_POS), theirs.transform(X_POS)
    assert _rel(Z @ Z.T, R @ R.T) < 1e-6


@pytest.mark.parametrize("kernel,kw,exact_kw", [
    ("cauchy", dict(gamma=0.5), dict(kernel="cauchy", gamma=0.5)),
    ("matern", dict(gamma=0.5, kernel_params={"nu": 2.5}), dict(kernel="matern", gamma=0.5, nu=2.5)),
    ("skewed_chi2", dict(kernel_params={"skewedness": 0.8}), dict(kernel="skewed_chi2", skewedness=0.8)),
    ("rbf", {}, dict(kernel="rbf", gamma=1 / 7)),
    ("chi2", {}, dict(kernel="chi2", gamma=1.0)),
])
def test_nystroem_with_every_landmark_reproduces_the_kernel(kernel, kw, exact_kw):
    X = X_POS[:60]
    Z = Nystroem(kernel, n_components=60, random_state=0, **kw).fit_transform(X)
    assert np.abs(Z @ Z.T - kernel_matrix(X, **exact_kw)).max() < 1e-8


def test_nystroem_callable_precomputed_and_array_landmarks():
    X = X_POS[:80]

    def k(a, b, scale=1.0):
        return float(np.exp(-scale * np.abs(a - b).sum()))

    ours = Nystroem(k, kernel_params={"scale": 0.2}, n_components=30, random_state=1).fit(X)
    theirs = ska.Nystroem(k, kernel_params={"scale": 0.2}, n_components=30, random_state=1).fit(X)
    assert _rel(ours.transform(X), theirs.transform(X)) < 1e-10
    K = pw.rbf_kernel(X, gamma=0.3)
    ours = Nystroem("precomputed", n_components=80, random_state=1).fit(K)
    theirs = ska.Nystroem("precomputed", n_components=80, random_state=1).fit(K)
    assert _rel(ours.transform(K), theirs.transform(K)) < 1e-8
    L = X[:10] + 0.01
    m = Nystroem(gamma=0.3, landmarks=L).fit(X)
    assert m.component_indices_ is None and m.n_features_out_ == 10 and np.array_equal(m.components_, L)
    with pytest.raises(ValueError, match="Don't pass gamma"):
        Nystroem(k, gamma=1.0).fit(X)


def test_nystroem_landmark_options_and_errors():
    with pytest.raises(InvalidParameterError, match="Give 'uniform', 'leverage' or an array"):
        Nystroem(landmarks="kmeans").fit(X_POS)
    with pytest.raises(ValueError, match="features"):
        Nystroem(landmarks=np.ones((3, 2))).fit(X_POS)
    with pytest.warns(UserWarning, match="n_components > n_samples"):
        assert Nystroem(n_components=500).fit(X_POS).n_features_out_ == X_POS.shape[0]
    with pytest.raises(ValueError, match="Negative values in data passed to Nystroem"):
        Nystroem("chi2", n_components=10).fit(X_POS).transform(X_NEG)
    with pytest.raises(InvalidParameterError, match="nu"):
        Nystroem("matern", kernel_params={"nu": 1.0}).fit(X_POS)


def test_nystroem_normalization_is_sklearn_s_inverse_square_root():
    K = pw.rbf_kernel(X_NEG[:30], gamma=0.2)
    U, S, V = np.linalg.svd(K)
    assert _rel(nystroem_normalization(K), U / np.sqrt(np.clip(S, 1e-12, None)) @ V) < 1e-10
    A = pw.additive_chi2_kernel(X_POS[1:20])  # negative definite: the signs are kept, as the SVD's
    U, S, V = np.linalg.svd(A)
    assert _rel(nystroem_normalization(A), U / np.sqrt(np.clip(S, 1e-12, None)) @ V) < 1e-8


# ----------------------------------- threads, splits, dtypes, pickles, errors
def _maps():
    return [RBFSampler(gamma=0.3, n_components=300, random_state=0),
            SkewedChi2Sampler(n_components=300, random_state=0),
            PolynomialCountSketch(degree=3, coef0=1.0, n_components=300, random_state=0),
            AdditiveChi2Sampler(sample_steps=3),
            Nystroem(n_components=100, random_state=0),
            Nystroem("chi2", n_components=100, random_state=0)]


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", range(6))
def test_bit_identical_for_any_thread_count_and_split(index, dtype, sparse):
    X = np.abs(RNG.normal(size=(700, 9))).astype(dtype)
    X[X < 0.4] = 0
    X = sp.csr_matrix(X) if sparse else X
    fitted = [m.set_params(n_jobs=1).fit(X) for m in [_maps()[index]]][0]
    Z1 = _dense(fitted.transform(X))
    assert Z1.dtype == dtype
    for n_jobs in (2, 3, -1):
        assert np.array_equal(_dense(fitted.set_params(n_jobs=n_jobs).transform(X)), Z1)
    parts = [_dense(fitted.transform(X[s:e])) for s, e in ((0, 1), (1, 333), (333, 700))]
    assert np.array_equal(np.vstack(parts), Z1)


@pytest.mark.parametrize("index", range(6))
def test_pickle_round_trip_and_a_tampered_state_is_refused(index):
    m = _maps()[index].fit(X_POS)
    back = pickle.loads(pickle.dumps(m))
    assert np.array_equal(_dense(back.transform(X_POS)), _dense(m.transform(X_POS)))


def test_a_tampered_hash_is_refused_at_unpickling():
    m = PolynomialCountSketch(n_components=10, random_state=0).fit(X_POS)
    assert not m.indexHash_.flags.writeable  # the fitted state is frozen
    bad = m.indexHash_.copy()
    bad[0, 0] = 10  # out of range: the kernel would write past the row
    object.__setattr__(m._fitted_state(), "index_hash", bad)  # a damaged pickle
    with pytest.raises(ValueError, match="indexHash_"):
        pickle.loads(pickle.dumps(m))


@pytest.mark.parametrize("index", range(6))
def test_bad_input_gets_clear_errors(index):
    m = _maps()[index].fit(X_POS)
    bad = X_POS.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.transform(bad)
    if not isinstance(m, AdditiveChi2Sampler) or m.__sklearn_is_fitted__():
        with pytest.raises(ValueError, match="features"):
            m.transform(X_POS[:, :5])


# ------------------------------------------------------ accuracy against D
@pytest.mark.parametrize("make,kernel", [
    (lambda D, s: RBFSampler(gamma=0.2, n_components=D, random_state=s), lambda X: kernel_matrix(X, gamma=0.2)),
    (lambda D, s: SkewedChi2Sampler(skewedness=0.5, n_components=D, random_state=s),
     lambda X: kernel_matrix(X, kernel="skewed_chi2", skewedness=0.5)),
    (lambda D, s: PolynomialCountSketch(gamma=0.2, degree=2, coef0=1.0, n_components=D, random_state=s),
     lambda X: kernel_matrix(X, kernel="polynomial", gamma=0.2, degree=2, coef0=1.0)),
])
def test_error_falls_like_one_over_sqrt_D(make, kernel):
    X = X_POS[:60]
    K = kernel(X)

    def err(D):
        return np.mean([np.abs((Z := make(D, s).fit_transform(X)) @ Z.T - K).mean() for s in range(4)])

    small, large = err(200), err(3200)  # 16x the width: error 4x smaller in expectation
    assert 2.5 < small / large < 6.5


def test_additive_chi2_approximates_vedaldi_s_kernel():
    # A deterministic approximation whose error falls with the number of steps
    # (measured: mean relative error 0.147, 0.071, 0.031 for 1, 2, 3 steps).
    X = X_POS[:50] / X_POS.max()
    K = exact.vedaldi_chi2(X, X)
    errors = [np.abs((Z := AdditiveChi2Sampler(sample_steps=s).fit_transform(X)) @ Z.T - K).mean() / np.abs(K).mean()
              for s in (1, 2, 3)]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.05


# ------------------------------------------------------ vector paths
@pytest.mark.kernel
@pytest.mark.parametrize("isa", ["baseline", "avx2", "avx512"])
def test_every_vector_path(isa):
    from _subprocess_env import run_on_vector_path

    code = (
        "import numpy as np\n"
        "from sklearn.metrics import pairwise as pw\n"
        "from sklearn import kernel_approximation as ska\n"
        "from randfeat import Nystroem, AdditiveChi2Sampler\n"
        "from randfeat._ext import _kernel_approx_fast as f\n"
        "X = np.abs(np.random.default_rng(0).normal(size=(97, 11)))\n"
        "for k in ('rbf', 'laplacian', 'chi2', 'polynomial'):\n"
        "    for dt in (np.float64, np.float32):\n"
        "        Z = Nystroem(k, n_components=97, random_state=0).fit_transform(X.astype(dt))\n"
        "        K = pw.pairwise_kernels(X, metric=k, filter_params=True, gamma=1.0 if k == 'chi2' else 1 / 11)\n"
        "        err = np.abs(Z.astype(float) @ Z.T.astype(float) - K).max() / np.abs(K).max()\n"
        "        assert err < (1e-9 if dt == np.float64 else 3e-3), (k, dt, err)\n"
        "R = ska.AdditiveChi2Sampler().fit_transform(X)\n"
        "assert np.abs(AdditiveChi2Sampler().fit_transform(X) - R).max() < 1e-10\n"
        "print(f.vector_isa())\n"
    )
    run_on_vector_path(code, isa)


# ------------------------------------------------------ scikit-learn checks
@parametrize_with_checks([RBFSampler(), SkewedChi2Sampler(), PolynomialCountSketch(), AdditiveChi2Sampler(),
                          Nystroem(n_components=10), Nystroem("chi2", n_components=10)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_exported_with_sklearn_s_signatures():
    import inspect

    for name in ("RBFSampler", "Nystroem", "PolynomialCountSketch", "SkewedChi2Sampler", "AdditiveChi2Sampler"):
        assert name in randfeat.__all__
        ours = inspect.signature(getattr(randfeat, name)).parameters
        theirs = inspect.signature(getattr(ska, name)).parameters
        for p, spec in theirs.items():  # every scikit-learn parameter, same kind and default
            assert p in ours and ours[p].kind == spec.kind, (name, p)
            assert ours[p].default == spec.default or (name, p) == ("PolynomialCountSketch", "coef0"), (name, p)


def test_bench_kernel_approximation_tiny_runs(tmp_path):
    from _subprocess_env import run_bench

    proc = run_bench("kernel_approximation.py", "--tiny", "--data", "dense", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "kernel_approximation_tiny.md").read_text()
    for name in ("RBFSampler", "Nystroem", "PolynomialCountSketch", "SkewedChi2Sampler", "AdditiveChi2Sampler"):
        assert name in text
    assert (tmp_path / "kernel_approximation_tiny.csv").exists() and (tmp_path / "kernel_approximation_tiny.png").exists()
