"""Bad input and parameter rows of issue 14: each answered with a clear exception or the right result.

Rows (numbering of issue 14's table): 3 malformed sparse structure, 5 gamma
scale, 7 kernel_matrix on non-canonical CSR and int64 indices, 8 transform
and predict use only fitted state, 12 direction of the binning gamma
messages; and the scikit-learn conformance items: tol=0, the shapes of a
single-column y, odd cossin widths, and "a failed call leaves a fitted
estimator as it was".
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.linear_model import Ridge as SkRidge
from sklearn.utils._param_validation import InvalidParameterError

from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier, kernel_matrix

RNG = np.random.default_rng(0)
XD = RNG.normal(size=(40, 6))
XD[XD < 0.2] = 0.0  # a real CSR case
Y = XD @ np.arange(1.0, 7.0) + 0.1 * RNG.normal(size=40)
YC = (Y > np.median(Y)).astype(int)


def _fourier():
    return RandomFourierFeatures(5, gamma=1.0, random_state=0)


def _binning():
    return RandomBinningFeatures(4, gamma=1.0, random_state=0)  # a fixed gamma: 1e300 must overflow a bin


# ================================================= row 3: sparse structure
def _malformed(kind):
    """A csr_matrix of XD's shape whose index arrays were broken after construction."""
    X = sp.csr_matrix(XD)
    if kind == "column >= n_features":
        X.indices[3] = XD.shape[1]
    elif kind == "huge column (int64)":
        X.indices = X.indices.astype(np.int64)
        X.indices[3] = 10**12
    elif kind == "negative column":
        X.indices[3] = -1
    elif kind == "decreasing indptr":
        X.indptr[5] = X.indptr[7] + 1
    elif kind == "short indptr":
        X.indptr = X.indptr[:-3]
    elif kind == "indptr past indices":
        X.indptr[-1] = X.indices.shape[0] + 10
    elif kind == "indptr[0] != 0":
        X.indptr = X.indptr + 1
    elif kind == "data shorter than indices":
        X.data = X.data[:-4]
    elif kind == "float indices":
        X.indices = X.indices.astype(np.float64)
    return X


MALFORMED = [
    ("column >= n_features", r"indices\[3\] = 6 is >= n_features = 6"),
    ("huge column (int64)", r"indices\[3\] = 1000000000000 is >= n_features"),
    ("negative column", r"indices\[3\] = -1 is negative"),
    ("decreasing indptr", r"indptr decreases at position"),
    ("short indptr", r"indptr has length 38, expected 41"),
    ("indptr past indices", r"indptr\[-1\] = \d+ stored entries, but indices has"),
    ("indptr[0] != 0", r"indptr\[0\] = 1, expected 0"),
    ("data shorter than indices", r"indptr\[-1\] = \d+ stored entries, but indices has \d+ and data has \d+"),
    ("float indices", r"indices must be a 1-D integer array"),
]


def _entry_points():
    """(name, call(X)) for every public entry point that takes X."""
    fitted = {
        "RandomFourierFeatures": _fourier().fit(XD),
        "RandomBinningFeatures": _binning().fit(XD),
        "Ridge": Ridge().fit(XD, Y),
        "Ridge(features=rff)": Ridge(features=_fourier()).fit(XD, Y),
        "Ridge(features=binning)": Ridge(features=_binning()).fit(XD, Y),
        "RidgeClassifier": RidgeClassifier().fit(XD, YC),
    }
    yield "RandomFourierFeatures.fit", lambda X: _fourier().fit(X)
    yield "RandomFourierFeatures.fit_transform", lambda X: _fourier().fit_transform(X)
    yield "RandomFourierFeatures.transform", lambda X: fitted["RandomFourierFeatures"].transform(X)
    yield "RandomBinningFeatures.fit", lambda X: _binning().fit(X)
    yield "RandomBinningFeatures.fit_transform", lambda X: _binning().fit_transform(X)
    yield "RandomBinningFeatures.transform", lambda X: fitted["RandomBinningFeatures"].transform(X)
    for name in ("Ridge", "Ridge(features=rff)", "Ridge(features=binning)"):
        yield f"{name}.fit", lambda X, name=name: clone(fitted[name]).fit(X, Y)
        yield f"{name}.predict", lambda X, name=name: fitted[name].predict(X)
        yield f"{name}.score", lambda X, name=name: fitted[name].score(X, Y)
    yield "Ridge.predict(return_std=True)", lambda X: fitted["Ridge"].predict(X, return_std=True)
    yield "RidgeClassifier.fit", lambda X: RidgeClassifier().fit(X, YC)
    yield "RidgeClassifier.predict", lambda X: fitted["RidgeClassifier"].predict(X)
    yield "RidgeClassifier.decision_function", lambda X: fitted["RidgeClassifier"].decision_function(X)
    yield "RidgeClassifier.score", lambda X: fitted["RidgeClassifier"].score(X, YC)
    for kernel in ("rbf", "laplacian", "cauchy", "matern"):
        yield f"kernel_matrix(X, kernel={kernel})", lambda X, k=kernel: kernel_matrix(X, kernel=k)
    yield "kernel_matrix(dense, Y)", lambda X: kernel_matrix(XD, X)


ENTRY_POINTS = list(_entry_points())


@pytest.mark.parametrize("kind, message", MALFORMED, ids=[m[0] for m in MALFORMED])
@pytest.mark.parametrize("call", [c for _, c in ENTRY_POINTS], ids=[n for n, _ in ENTRY_POINTS])
def test_row3_malformed_csr_is_a_clear_error_everywhere(call, kind, message):
    X = _malformed(kind)
    with pytest.raises(ValueError, match="is not a valid sparse matrix: " + message) as info:
        call(X)
    assert "rebuild it" in str(info.value)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda X: _set(sp.coo_matrix(X), "row", 2, X.shape[0]), r"row\[2\] = 40 is >= n_samples = 40"),
        (lambda X: _set(sp.coo_array(X), "col", 0, -3), r"col\[0\] = -3 is negative"),
        (lambda X: _set(sp.csc_matrix(X), "indices", 1, X.shape[0] + 5), r"indices\[1\] = 45 is >= n_samples"),
        (lambda X: _set(sp.csr_array(X), "indices", 1, 99), r"indices\[1\] = 99 is >= n_features"),
        (lambda X: _set(sp.bsr_matrix(X, blocksize=(2, 2)), "indices", 0, 7), r"indices\[0\] = 7 is >= the number of block columns"),
    ],
    ids=["coo row", "coo_array col", "csc row", "csr_array column", "bsr block column"],
)
def test_row3_malformed_other_formats(make, message):
    X = make(XD)
    for call in (_fourier().fit, _fourier().fit(XD).transform, _binning().fit, kernel_matrix):
        with pytest.raises(ValueError, match=message):
            call(X)


def _set(X, attr, pos, value):
    arr = getattr(X, attr)
    if value < 0 and arr.dtype.kind == "u":  # pragma: no cover - scipy uses signed indices
        raise AssertionError
    arr[pos] = value
    return X


SPARSE_FORMATS = {
    "csc_matrix": sp.csc_matrix,
    "coo_matrix": sp.coo_matrix,
    "csr_array": sp.csr_array,
    "csc_array": sp.csc_array,
    "coo_array": sp.coo_array,
    "bsr_matrix": lambda X: sp.bsr_matrix(X, blocksize=(2, 3)),
    "lil_matrix": sp.lil_matrix,
    "dok_matrix": sp.dok_matrix,
    "dia_matrix": sp.dia_matrix,
}


@pytest.mark.parametrize("fmt", SPARSE_FORMATS)
def test_row3_every_sparse_format_gives_the_csr_result(fmt):
    # Every scipy format is converted to the same canonical CSR: results are
    # bit-identical to those of a csr_matrix input.
    X, Xc = SPARSE_FORMATS[fmt](XD), sp.csr_matrix(XD)
    rff, binning = _fourier().fit(XD), _binning().fit(XD)
    np.testing.assert_array_equal(rff.transform(X), rff.transform(Xc))
    assert (binning.transform(X) != binning.transform(Xc)).nnz == 0
    np.testing.assert_array_equal(kernel_matrix(X, kernel="laplacian"), kernel_matrix(Xc, kernel="laplacian"))
    ridge = Ridge(solver="cg").fit(Xc, Y)
    np.testing.assert_array_equal(ridge.predict(X), ridge.predict(Xc))
    np.testing.assert_array_equal(Ridge(solver="cg").fit(X, Y).coef_, ridge.coef_)
    clf = RidgeClassifier(solver="cg").fit(Xc, YC)
    np.testing.assert_array_equal(RidgeClassifier(solver="cg").fit(X, YC).coef_, clf.coef_)


def test_row3_strided_arrays_and_spare_entries_are_accepted():
    # scipy keeps strided index/data arrays and entries past indptr[-1]
    # (valid: they are not part of the matrix); the kernels take neither.
    Xc = sp.csr_matrix(XD)
    nnz = Xc.nnz
    data = np.repeat(np.append(Xc.data, [7.0, 7.0]), 2)[::2]
    indices = np.repeat(np.append(Xc.indices, [0, 1]), 2)[::2]
    X = sp.csr_matrix(XD)
    X.data, X.indices = data, indices  # as a user may; the constructor would copy
    assert not X.data.flags.c_contiguous and X.data.shape[0] == nnz + 2
    rff, binning = _fourier().fit(XD), _binning().fit(XD)
    np.testing.assert_array_equal(rff.transform(X), rff.transform(Xc))
    assert (binning.transform(X) != binning.transform(Xc)).nnz == 0
    np.testing.assert_array_equal(kernel_matrix(X, kernel="laplacian"), kernel_matrix(Xc, kernel="laplacian"))
    np.testing.assert_array_equal(Ridge(solver="cg").fit(X, Y).coef_, Ridge(solver="cg").fit(Xc, Y).coef_)


def test_row3_non_canonical_csr_is_used_canonically_and_left_unchanged():
    # Unsorted indices with a duplicate: summed on a copy, never in the caller's arrays.
    X = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3, 3])), shape=(2, 6))
    data, indices = X.data.copy(), X.indices.copy()
    rff = _fourier().fit(XD)
    np.testing.assert_allclose(rff.transform(X), rff.transform(X.toarray()), rtol=0, atol=1e-12)
    assert (_binning().fit(XD).transform(X) != _binning().fit(XD).transform(X.toarray())).nnz == 0
    np.testing.assert_array_equal(X.data, data)
    np.testing.assert_array_equal(X.indices, indices)


# ======================================================== row 5: gamma scale
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "matern"])
def test_row5_gamma_whose_frequencies_overflow_is_rejected(kernel):
    with pytest.raises(InvalidParameterError, match="too large .*frequencies overflow .*smaller gamma"):
        RandomFourierFeatures(8, kernel=kernel, gamma=1e308, random_state=0).fit(XD)


def test_row5_frequency_overflow_depends_on_the_dtype():
    # sqrt(2·1e80) = 1.4e40: beyond float32's 3.4e38, far inside float64
    RandomFourierFeatures(8, gamma=1e80, random_state=0).fit(XD)
    with pytest.raises(InvalidParameterError, match="in float32: some random frequencies overflow"):
        RandomFourierFeatures(8, gamma=1e80, random_state=0).fit(XD.astype(np.float32))


@pytest.mark.parametrize("feature_map", ["cossin", "cos"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row5_overflowing_product_is_a_clear_error_never_nan(feature_map, dtype):
    est = RandomFourierFeatures(9, gamma=1.0, feature_map=feature_map, random_state=0).fit(XD.astype(dtype))
    Xbig = XD.astype(dtype)
    Xbig[0] = np.finfo(dtype).max / 2  # x·w overflows for most frequencies
    with pytest.raises(ValueError, match=f"X @ random_weights_ overflows {np.dtype(dtype).name}"):
        est.transform(Xbig)
    with pytest.raises(ValueError, match="overflows"):
        est.transform(sp.csr_matrix(Xbig))
    # large but representable arguments are fine (libm reduces them exactly)
    assert np.isfinite(est.transform(XD.astype(dtype) * np.finfo(dtype).max ** 0.6)).all()


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e8, 1e12])
@pytest.mark.parametrize("sparse", [False, True])
def test_row5_gamma_scale_is_stable_under_offsets(offset, sparse):
    rng = np.random.default_rng(1)
    Xd = rng.normal(size=(200, 4)) + offset
    X = sp.csr_matrix(Xd) if sparse else Xd
    want = 1.0 / (4 * np.var(Xd - offset))  # the offset does not change the variance
    got = RandomFourierFeatures(4, gamma="scale", random_state=0).fit(X).gamma_
    # Centred two-pass sum: each deviation x - mean is off by about
    # eps·offset (the mean's rounding), so the variance (σ = 1) by ~2·eps·offset.
    # The one-pass E[x²] - E[x]² loses everything beyond offset ~ 1e8.
    assert got == pytest.approx(want, rel=1e-13 + 16 * np.finfo(np.float64).eps * offset)
    if offset == 1e8:
        assert got == pytest.approx(want, rel=1e-6) and got != 1.0  # was 1.0 for CSR


def test_row5_gamma_scale_sparse_counts_implicit_zeros():
    rng = np.random.default_rng(2)
    Xd = rng.normal(size=(100, 5)) + 3.0
    Xd[rng.random(Xd.shape) < 0.6] = 0.0
    dense = RandomFourierFeatures(4, gamma="scale").fit(Xd).gamma_
    assert RandomFourierFeatures(4, gamma="scale").fit(sp.csr_matrix(Xd)).gamma_ == pytest.approx(dense, rel=1e-14)
    assert dense == pytest.approx(1.0 / (5 * Xd.var()), rel=1e-14)


def test_row5_gamma_scale_without_intermediate_overflow():
    # Σx² overflows float64 here, the variance (~1e306) does not.
    rng = np.random.default_rng(3)
    Xd = rng.choice([-1.0, 1.0], size=(2000, 3)) * 1e153 * rng.uniform(1, 2, size=(2000, 3))
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.sum(Xd * Xd))
    s = 2.0**510
    want = 1.0 / (3 * s * s * np.var(Xd / s))
    for X in (Xd, sp.csr_matrix(Xd)):
        assert RandomFourierFeatures(4, gamma="scale").fit(X).gamma_ == pytest.approx(want, rel=1e-13)


@pytest.mark.parametrize(
    "scale, message",
    [(1e200, "overflow float64"), (1e-170, "overflow float64")],
    ids=["variance overflows", "variance underflows"],
)
def test_row5_gamma_scale_out_of_range_is_a_clear_error(scale, message):
    X = np.random.default_rng(4).normal(size=(50, 3)) * scale
    # a variance beyond float64 makes 1/(d·var) underflow; a subnormal one makes it overflow
    with pytest.raises(ValueError, match=r"gamma='scale' needs 1 / \(n_features \* X.var\(\)\).*Rescale X"):
        RandomFourierFeatures(4, gamma="scale").fit(X)


def test_row5_constant_X_gives_gamma_one_like_sklearn():
    for X in (np.full((5, 2), 7.0), sp.csr_matrix((5, 2))):
        assert RandomFourierFeatures(4, gamma="scale").fit(X).gamma_ == 1.0


@pytest.mark.parametrize("Est, y", [(Ridge, Y), (RidgeClassifier, YC)])
def test_row5_all_zero_sample_weight_is_a_clear_error(Est, y):
    for est in (Est(), Est(features=RandomFourierFeatures(6, gamma="scale", random_state=0))):
        with pytest.raises(ValueError, match="sample_weight is zero for every sample"):
            est.fit(XD, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match="sample_weight sums to 3.99e-320"):
        Est().fit(XD, y, sample_weight=np.full(len(y), 1e-321))


@pytest.mark.parametrize("Est, y", [(Ridge, Y), (RidgeClassifier, YC)])
def test_sparse_y_is_a_clear_error(Est, y):
    with pytest.raises(TypeError, match=r"sparse y .* use y.toarray\(\)"):
        Est().fit(XD, sp.csr_matrix(np.asarray(y, dtype=float)[:, None]))


# =============================================== row 7: kernel_matrix on CSR
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "cauchy", "matern"])
def test_row7_kernel_matrix_sums_duplicates(kernel):
    # Two stored entries for one position stand for their sum.
    X = sp.csr_matrix((np.array([0.3, 0.4, 1.0]), np.array([0, 0, 1]), np.array([0, 2, 3])), shape=(2, 2))
    want = kernel_matrix(X.toarray(), kernel=kernel, gamma=0.7)
    np.testing.assert_allclose(kernel_matrix(X, kernel=kernel, gamma=0.7), want, rtol=1e-13, atol=0)
    np.testing.assert_allclose(kernel_matrix(X, X, kernel=kernel, gamma=0.7), want, rtol=1e-13, atol=0)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "cauchy", "matern"])
@pytest.mark.parametrize("index_dtype", [np.int64, np.uint32, np.int16])
def test_row7_kernel_matrix_takes_any_index_dtype(kernel, index_dtype):
    X = sp.csr_matrix(XD)
    X64 = sp.csr_matrix(XD)
    X64.indices, X64.indptr = X.indices.astype(index_dtype), X.indptr.astype(np.int64)
    want = kernel_matrix(XD, XD[:7], kernel=kernel)
    np.testing.assert_allclose(kernel_matrix(X64, X64[:7], kernel=kernel), want, rtol=1e-12, atol=1e-15)


# ============================================ row 8: only fitted state is used
FOURIER_CHANGES = [
    dict(feature_map="cos"),
    dict(n_components=30),
    dict(n_components=4),
    dict(kernel="laplacian"),
    dict(gamma=5.0),
    dict(gamma="scale"),
    dict(sampling="qmc"),
    dict(nu=0.5, kernel="matern"),
    dict(random_state=99),
    dict(n_jobs=1),
]


@pytest.mark.parametrize("feature_map", ["cossin", "cos"])
@pytest.mark.parametrize("n_components", [15, 16])
@pytest.mark.parametrize("change", FOURIER_CHANGES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_row8_fourier_transform_uses_fitted_state(feature_map, n_components, change):
    est = RandomFourierFeatures(n_components, feature_map=feature_map, random_state=0).fit(XD)
    before = est.transform(XD)
    est.set_params(**change)
    after = est.transform(XD)
    assert after.shape == (XD.shape[0], est.n_features_out_) == before.shape
    np.testing.assert_array_equal(after, before)
    assert list(est.get_feature_names_out()) == [f"randomfourierfeatures{i}" for i in range(n_components)]


@pytest.mark.parametrize("change", [dict(n_grids=9), dict(gamma=4.0), dict(random_state=5), dict(n_jobs=1)])
def test_row8_binning_transform_uses_fitted_state(change):
    est = _binning().fit(XD)
    before = est.transform(XD)
    est.set_params(**change)
    after = est.transform(XD)
    assert after.shape == before.shape and (after != before).nnz == 0


RIDGE_CHANGES = [
    dict(features=None),
    dict(features=RandomFourierFeatures(3, random_state=1)),
    dict(features=RandomBinningFeatures(2, random_state=1)),
    dict(fit_intercept=False),
    dict(solver="cg"),
    dict(alpha=100.0),
    dict(chunk_size=7),
    dict(n_jobs=1),
]


@pytest.mark.parametrize("fitted_with", [None, "rff", "binning"])
@pytest.mark.parametrize("change", RIDGE_CHANGES, ids=lambda c: ",".join(f"{k}={type(v).__name__ if hasattr(v, 'fit') else v}" for k, v in c.items()))
def test_row8_ridge_predict_uses_fitted_state(fitted_with, change):
    features = {None: None, "rff": _fourier(), "binning": _binning()}[fitted_with]
    reg = Ridge(features=features).fit(XD, Y)
    clf = RidgeClassifier(features=features).fit(XD, YC)
    before = reg.predict(XD), clf.decision_function(XD), clf.predict(XD)
    reg.set_params(**change)
    clf.set_params(**change)
    after = reg.predict(XD), clf.decision_function(XD), clf.predict(XD)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)


def test_row8_refit_without_features_drops_features_():
    est = Ridge(features=_fourier()).fit(XD, Y)
    assert hasattr(est, "features_")
    est.set_params(features=None).fit(XD, Y)
    assert not hasattr(est, "features_")
    np.testing.assert_allclose(est.predict(XD), Ridge().fit(XD, Y).predict(XD), rtol=1e-12)


# ================================================ row 12: message direction
def test_row12_binning_gamma_messages_point_the_right_way():
    with pytest.raises(InvalidParameterError, match="gamma=1e-308 is too small.*overflow.*Use a larger gamma"):
        RandomBinningFeatures(3, gamma=1e-308, random_state=0).fit(XD)
    with pytest.raises(InvalidParameterError, match="gamma=1e\\+308 is too large.*too small to invert.*Use a smaller gamma"):
        RandomBinningFeatures(3, gamma=1e308, random_state=0).fit(XD)
    # bins too many to number: the pitches are too small, so gamma is too large
    est = RandomBinningFeatures(3, gamma=1.0, random_state=0).fit(XD)
    with pytest.raises(ValueError, match=r"exceeds 2\*\*62.*use a smaller gamma"):
        est.transform(XD * 1e30)
    # and the small-but-valid extremes work
    Z = RandomBinningFeatures(3, gamma=1e-300, random_state=0).fit_transform(XD)
    assert Z.shape[1] == 3  # every point in one bin per grid: the kernel ~ 1


# ===================================== conformance: odd cossin widths, unbiased
def _rbf(x, y, gamma):
    return float(np.exp(-gamma * np.sum((x - y) ** 2)))


@pytest.mark.parametrize("D", [1, 3])
def test_odd_cossin_is_unbiased(D):
    # x + y = 0: dropping the last sin column without a phase would estimate
    # (k(x - y) + k(x + y))/2 = (0.487 + 1)/2 on that column, far from k.
    x, y, gamma = np.array([[0.6, 0.0]]), np.array([[-0.6, 0.0]]), 0.5
    k = _rbf(x, y, gamma)
    n_seeds = 3000
    dots = np.empty(n_seeds)
    for seed in range(n_seeds):
        est = RandomFourierFeatures(D, gamma=gamma, random_state=seed).fit(x)
        dots[seed] = (est.transform(x) @ est.transform(y).T)[0, 0]
    se = dots.std(ddof=1) / np.sqrt(n_seeds)
    assert abs(dots.mean() - k) < 4 * se, (dots.mean(), k, se)
    n_freq = (D + 1) // 2
    biased = k + 0.5 * (1.0 - k) / n_freq  # what the phase-less column would give
    assert abs(biased - k) > 10 * se


def test_odd_cossin_kernel_matrix_converges():
    X = np.random.default_rng(5).normal(size=(10, 3)) * 0.5
    K = kernel_matrix(X, gamma=0.8)
    errors = {}
    for D in (101, 1601):
        errs = [np.abs((Z := RandomFourierFeatures(D, gamma=0.8, random_state=s).fit_transform(X)) @ Z.T - K).mean()
                for s in range(6)]
        errors[D] = np.mean(errs)
    ratio = errors[1601] / errors[101]  # 1/sqrt(16) = 0.25
    assert 0.25 * 0.6 <= ratio <= 0.25 * 1.6, errors


def test_odd_cossin_layout():
    est = RandomFourierFeatures(7, gamma=0.3, random_state=0).fit(XD)
    assert est.random_weights_.shape == (6, 4) and est.random_offset_.shape == (1,)
    Z = est.transform(XD)
    assert Z.shape == (40, 7) and Z.flags.c_contiguous and Z.flags.owndata
    # the first three cos/sin columns are the pairs of the first three frequencies
    XW = XD @ est.random_weights_
    np.testing.assert_allclose(Z[:, :3], np.cos(XW[:, :3]) / 2, atol=1e-14)
    np.testing.assert_allclose(Z[:, 4:], np.sin(XW[:, :3]) / 2, atol=1e-14)
    np.testing.assert_allclose(Z[:, 3], np.sqrt(2) * np.cos(XW[:, 3] + est.random_offset_[0]) / 2, atol=1e-14)
    # an even width draws exactly what it always drew: no phase
    assert RandomFourierFeatures(8, random_state=0).fit(XD).random_offset_ is None


def test_odd_cossin_identical_for_any_thread_count():
    X = np.random.default_rng(0).normal(size=(1100, 20))
    outs = [RandomFourierFeatures(301, random_state=0, n_jobs=n).fit_transform(X) for n in (1, 2, 3)]
    for Z in outs[1:]:
        np.testing.assert_array_equal(Z, outs[0])


# ============================================ conformance: tol=0, y of shape (n, 1)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("Est, y", [(Ridge, Y), (RidgeClassifier, YC)])
def test_tol_zero_is_accepted(Est, y, sparse):
    X = sp.csr_matrix(XD) if sparse else XD
    ref = Est(solver="cholesky").fit(X, y)
    with warnings.catch_warnings():
        # CG run to tol=0 stops on max_iter or an exhausted residual and may say so.
        warnings.simplefilter("ignore")
        est = Est(tol=0.0, solver="cg").fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    assert np.isfinite(est.coef_).all()


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("solver", ["cholesky", "cg"])
@pytest.mark.parametrize("features", [None, "rff"])
def test_single_column_y_shapes_match_sklearn(fit_intercept, solver, features):
    y2 = Y[:, None]
    sk = SkRidge(fit_intercept=fit_intercept).fit(XD, y2)
    ours = Ridge(fit_intercept=fit_intercept, solver=solver).fit(XD, y2)
    assert ours.coef_.shape == sk.coef_.shape == (XD.shape[1],)
    assert np.shape(ours.intercept_) == np.shape(sk.intercept_)
    assert ours.predict(XD).shape == sk.predict(XD).shape == (XD.shape[0],)
    np.testing.assert_allclose(ours.coef_, sk.coef_, rtol=1e-8)
    np.testing.assert_allclose(ours.intercept_, sk.intercept_, rtol=1e-8, atol=1e-12)
    one_d = Ridge(fit_intercept=fit_intercept, solver=solver).fit(XD, Y)
    np.testing.assert_allclose(ours.predict(XD), one_d.predict(XD), rtol=1e-12)
    if features:
        est = Ridge(features=_fourier(), fit_intercept=fit_intercept, solver=solver).fit(XD, y2)
        assert est.coef_.shape == (5,) and est.predict(XD).shape == (XD.shape[0],)
    if solver == "cholesky":
        mean, std = ours.predict(XD, return_std=True)
        assert mean.shape == std.shape == (XD.shape[0],)


# ============================== a failed call leaves a fitted estimator as it was
class _InterruptedFourier(RandomFourierFeatures):
    """A feature map whose row kernel is interrupted (Ctrl-C) during the fit that uses it."""

    def _transform_rows(self, state, X, n_threads):
        raise KeyboardInterrupt


FITTED = {
    "RandomFourierFeatures": (lambda: _fourier().fit(XD), lambda e: e.transform(XD)),
    "RandomBinningFeatures": (lambda: _binning().fit(XD), lambda e: e.transform(XD).toarray()),
    "Ridge": (lambda: Ridge(features=_fourier()).fit(XD, Y), lambda e: e.predict(XD, return_std=True)),
    "RidgeClassifier": (lambda: RidgeClassifier(features=_binning()).fit(XD, YC), lambda e: e.decision_function(XD)),
}


def _refits(name):
    """(description, callable(est)) of refits that must fail."""
    nan = XD.copy()
    nan[1, 1] = np.nan
    huge = XD.copy()
    huge[0, 0] = 1e300
    y = YC if name == "RidgeClassifier" else Y
    common = [
        ("bad parameter", lambda e: e.set_params(n_jobs=0), InvalidParameterError),
        ("NaN in X", nan, ValueError),
        ("malformed CSR", _malformed("column >= n_features"), ValueError),
        ("wrong width then bad", np.zeros((3, 0)), ValueError),
    ]
    if name == "RandomBinningFeatures":
        common.append(("coordinate beyond 2**62 bins (after grids were drawn)", huge, ValueError))
    if name in ("Ridge", "RidgeClassifier"):
        common.append(("y of the wrong length", (XD, y[:-1]), ValueError))
        common.append(("negative sample_weight", (XD, y, -np.ones(len(y))), ValueError))
        common.append(("Ctrl-C inside the fit, after features_ was set",
                       lambda e: e.set_params(features=_InterruptedFourier(4, random_state=0)), KeyboardInterrupt))
    return common


def _cases():
    for name in FITTED:
        for desc, bad, exc in _refits(name):
            yield pytest.param(name, bad, exc, id=f"{name}-{desc}")


@pytest.mark.parametrize("name, bad, exc", list(_cases()))
def test_failed_refit_leaves_the_fitted_estimator_as_it_was(name, bad, exc):
    make, use = FITTED[name]
    est = make()
    params = est.get_params(deep=False)
    before_out = use(est)
    before_state = dict(vars(est))
    y = YC if name == "RidgeClassifier" else Y
    with pytest.raises(exc):
        if callable(bad):
            bad(est)
            est.fit(XD, y) if name in ("Ridge", "RidgeClassifier") else est.fit(XD)
        elif isinstance(bad, tuple):
            est.fit(bad[0], bad[1], sample_weight=bad[2] if len(bad) > 2 else None)
        elif name in ("Ridge", "RidgeClassifier"):
            est.fit(bad, y)
        else:
            est.fit(bad)
    est.set_params(**params)
    after_state = dict(vars(est))
    assert after_state.keys() == before_state.keys()
    for key, value in before_state.items():
        assert after_state[key] is value, key  # the very same fitted objects
    after_out = use(est)
    for a, b in zip(np.atleast_1d(after_out) if not isinstance(after_out, tuple) else after_out,
                    np.atleast_1d(before_out) if not isinstance(before_out, tuple) else before_out):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("Est", [RandomFourierFeatures, RandomBinningFeatures])
def test_failed_fit_transform_leaves_the_estimator_as_it_was(Est):
    est = Est(4, random_state=0).fit(XD)
    before = dict(vars(est))
    with pytest.raises(ValueError):
        est.fit_transform(np.full((3, 6), np.inf))
    assert dict(vars(est)).keys() == before.keys()
    assert all(vars(est)[k] is v for k, v in before.items())


# ------------------------------------------------------------ rows 4 and 6
@pytest.mark.parametrize("solver", ["cholesky", "cg"])
@pytest.mark.parametrize("what", ["X", "y"])
def test_row4_overflow_is_a_clear_error_never_nan(solver, what):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 5)), rng.normal(size=200)
    if what == "X":
        X = X * 1e160
    else:
        y = y * 1e160
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's overflow notes on the way
        with pytest.raises(ValueError, match="overflowed float64.*too large in magnitude.*Rescale"):
            Ridge(solver=solver).fit(X, y)


@pytest.mark.parametrize("features", [RandomFourierFeatures(40, random_state=0), RandomBinningFeatures(5, random_state=0)])
def test_row4_one_huge_value_with_features_is_a_clear_error(features):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 4))
    X[7, 2] = 1e308
    with pytest.raises(ValueError, match="Rescale X|rescale X"):
        Ridge(features=features).fit(X, rng.normal(size=100))


def test_row4_large_but_finite_targets_give_finite_noise_variance():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 5)), rng.normal(size=300) * 1e150
    model = Ridge(solver="cholesky").fit(X, y)
    assert np.all(np.isfinite(model.coef_)) and np.isfinite(model.noise_variance_)
    ref = SkRidge().fit(X, y)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-8)
    _, std = model.predict(X, return_std=True)
    assert np.all(np.isfinite(std))


def test_row6_float32_cholesky_with_tiny_alpha_is_accumulated_again_in_float64():
    # The case: a float32 Gram whose rounding exceeds alpha is not
    # positive definite; the fit retries in float64 instead of raising.
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 10)).astype(np.float32), rng.normal(size=300)
    features = RandomFourierFeatures(1000, random_state=0)
    m32 = Ridge(alpha=1e-7, features=features, solver="cholesky").fit(X, y)
    m64 = Ridge(alpha=1e-7, features=features, solver="cholesky").fit(X.astype(np.float64), y)
    assert m32.coef_.dtype == np.float32 and np.all(np.isfinite(m32.coef_))
    # Same statistics in float64 (features differ only by float32 rounding).
    np.testing.assert_allclose(m32.predict(X), m64.predict(X), atol=1e-4)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_row6_float32_cholesky_is_identical_for_any_thread_count(fit_intercept):
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(5000, 10)).astype(np.float32), rng.normal(size=5000)
    fits = [Ridge(alpha=1e-3, features=RandomFourierFeatures(700, random_state=0), solver="cholesky",
                  fit_intercept=fit_intercept, chunk_size=1500, n_jobs=n).fit(X, y) for n in (1, 2, 3)]
    for m in fits[1:]:
        np.testing.assert_array_equal(m.coef_, fits[0].coef_)
        np.testing.assert_array_equal(m.intercept_, fits[0].intercept_)
