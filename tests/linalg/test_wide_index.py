"""Index arithmetic past 2³¹ stored entries, tested on small data by forcing the wide path.

Binning features of 43 M rows × 50 grids hold more than 2³¹ − 1 entries:
their CSR then has int64 row pointers and indices (scipy's rule), and every
kernel that reads them (the binning transform, the CSR and one-hot
products, the preconditioner's Gram block) must give what it gives with
int32.  A matrix that large does not fit a test machine (nor this one's
24 GB: 2.15·10⁹ entries × 12 bytes), so the tests lower
``binning.INDEX32_MAX`` (the bound past which the map writes int64 indices)
or build int64 copies of an int32 CSR, and check the kernels accept them and
give the same bits as the int32 path.
"""

import numpy as np
import pytest
import scipy.sparse as sp

import randfeat._linalg.onehot as onehot_mod
import randfeat._maps.binning as binning_mod
from randfeat import RandomBinningFeatures, Ridge, RidgeClassifier
from randfeat._ext._sparse_fast import compact_columns, csr_matmat, csr_normal_matmat, csr_row_weighted_sq_sums
from randfeat._linalg.csr import SparseProducts, csr_gram_block_of
from randfeat._linalg.onehot import OneHotBlockProducts, onehot_block_structure, onehot_layout
from randfeat._linalg.products import make_products


def _data(n=3000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(6, d))
    X = centres[rng.integers(0, 6, n)] + 0.5 * rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 / 4 + 0.1 * rng.normal(size=n)
    return X, y


def _wide(Z):
    """The same CSR with int64 row pointers and indices (scipy would narrow them in its constructor)."""
    W = Z.copy()
    W.indices, W.indptr = Z.indices.astype(np.int64), Z.indptr.astype(np.int64)
    return W


def _same_csr(A, B):
    assert A.shape == B.shape
    assert np.array_equal(A.indptr, B.indptr) and np.array_equal(A.indices, B.indices)
    assert A.data.dtype == B.data.dtype and np.array_equal(A.data, B.data)


@pytest.fixture
def force_wide(monkeypatch):
    """Every binning CSR at least 2 entries long takes int64 indices."""
    monkeypatch.setattr(binning_mod, "INDEX32_MAX", 1)


# ------------------------------------------------------------- the map
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_forced_wide_binning_features_equal_the_int32_ones(dtype, force_wide, monkeypatch):
    X, _ = _data()
    X = X.astype(dtype)
    Xnew = X + 0.3  # some bins unseen at fit: the transform compacts its rows
    wide_map = RandomBinningFeatures(20, gamma=0.7, random_state=0)
    Zw = wide_map.fit_transform(X)
    Tw = wide_map.transform(Xnew)
    monkeypatch.setattr(binning_mod, "INDEX32_MAX", np.iinfo(np.int32).max)
    narrow_map = RandomBinningFeatures(20, gamma=0.7, random_state=0)
    Zn = narrow_map.fit_transform(X)
    Tn = narrow_map.transform(Xnew)
    for wide, narrow in ((Zw, Zn), (Tw, Tn)):
        assert wide.indices.dtype == np.int64 and wide.indptr.dtype == np.int64
        assert narrow.indices.dtype == np.int32 and narrow.indptr.dtype == np.int32
        _same_csr(wide, narrow)
        assert wide.has_sorted_indices
    assert Tn.nnz < Tn.shape[0] * 20  # the compacting branch ran
    assert np.array_equal(wide_map.bin_hashes_, narrow_map.bin_hashes_)
    # The transform of the training rows is the fit's CSR, in either width.
    _same_csr(wide_map.transform(X), Zw)
    # scipy reads the int64 CSR as the same matrix.
    v = np.random.default_rng(1).normal(size=Zw.shape[1]).astype(dtype)
    assert np.array_equal(Zw @ v, Zn @ v)


def test_index_dtype_follows_scipy_at_the_bound(monkeypatch):
    monkeypatch.setattr(binning_mod, "INDEX32_MAX", 100)
    assert binning_mod._index_dtype(100) == np.int32  # scipy keeps int32 up to and including the bound
    assert binning_mod._index_dtype(101) == np.int64
    assert binning_mod._index_dtype(50, 101) == np.int64  # a column index past it too
    monkeypatch.undo()
    big = np.iinfo(np.int32).max
    assert binning_mod._index_dtype(big) == np.int32 and binning_mod._index_dtype(big + 1) == np.int64
    # 50 grids × 43 M rows: past 2**31 - 1 entries.
    assert binning_mod._index_dtype(50 * 43_000_000) == np.int64


def test_int64_input_csr_is_binned_like_int32():
    X, _ = _data(n=500)
    X[np.abs(X) < 0.8] = 0.0
    Xs = sp.csr_matrix(X)
    m = RandomBinningFeatures(10, gamma=0.5, random_state=0).fit(Xs)
    _same_csr(m.transform(_wide(Xs)), m.transform(Xs))


# ---------------------------------------------------------- the kernels
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_csr_kernels_give_the_same_bits_with_int64_indices(dtype):
    rng = np.random.default_rng(0)
    Z = sp.random(700, 90, density=0.08, format="csr", random_state=1, dtype=np.float64).astype(dtype)
    W = _wide(Z)
    B = rng.normal(size=(90, 3)).astype(dtype)
    out32, out64 = np.empty((700, 3), dtype), np.empty((700, 3), dtype)
    csr_matmat(Z.indptr, Z.indices, Z.data, B, out32, 2)
    csr_matmat(W.indptr, W.indices, W.data, B, out64, 2)
    assert np.array_equal(out32, out64)
    # the kernel sums in float64: against a float64 reference
    np.testing.assert_allclose(out32, Z.astype(np.float64) @ B.astype(np.float64),
                               rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-6 if dtype == np.float32 else 0)

    w = rng.uniform(0.5, 2.0, 90)
    s32, s64 = np.empty(700), np.empty(700)
    csr_row_weighted_sq_sums(Z.indptr, Z.indices, Z.data, w, s32, 2)
    csr_row_weighted_sq_sums(W.indptr, W.indices, W.data, w, s64, 2)
    assert np.array_equal(s32, s64)
    np.testing.assert_allclose(s32, (Z.astype(np.float64).power(2) @ w), rtol=1e-12)

    mup, sw = rng.normal(size=3), rng.uniform(0.5, 2.0, 700)
    parts = []
    for A in (Z, W):
        partial, usum = np.empty((4, 90, 3)), np.empty((4, 3))
        csr_normal_matmat(A.indptr, A.indices, A.data, B, mup, sw, partial, usum, 2)
        parts.append((partial, usum))
    assert np.array_equal(parts[0][0], parts[1][0]) and np.array_equal(parts[0][1], parts[1][1])
    Z64 = Z.astype(np.float64)
    np.testing.assert_allclose(parts[0][0].sum(axis=0), Z64.T @ (sw[:, None] * (Z64 @ B - mup)), rtol=1e-5, atol=1e-8)

    position = np.full(90, -1, dtype=np.int32)
    position[[3, 17, 40, 88]] = np.arange(4, dtype=np.int32)
    c32 = compact_columns(Z.indptr, Z.indices, Z.data, position)
    c64 = compact_columns(W.indptr, W.indices, W.data, position)
    for a, b in zip(c32, c64):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_hot_structure_and_products_with_int64_indices(dtype, monkeypatch):
    monkeypatch.setattr(onehot_mod, "WIDE_SLAB_ROWS", 700)  # int64 columns narrowed in several slabs
    X, _ = _data()
    Z = RandomBinningFeatures(15, gamma=0.7, random_state=0).fit_transform(X.astype(dtype))
    W = _wide(Z)
    assert W.indices.dtype == np.int64
    s32, s64 = onehot_block_structure(Z), onehot_block_structure(W)
    assert s64 is not None
    assert s32[0].dtype == s64[0].dtype and np.array_equal(s32[0], s64[0])
    assert np.array_equal(s32[1], s64[1]) and s32[2] == s64[2]
    l32, l64 = onehot_layout(Z), onehot_layout(W)
    assert l32.n_blocks == l64.n_blocks and np.array_equal(l32.start, l64.start)
    # A row in breach of the one-hot structure is seen on the int64 path too.
    Wb = W.copy()
    Wb.data = Wb.data.copy()
    Wb.data[5] *= 2
    assert onehot_layout(Wb) is None

    ops32, ops64 = make_products(Z, 2), make_products(W, 2)
    assert isinstance(ops64, OneHotBlockProducts) and isinstance(ops32, OneHotBlockProducts)
    rng = np.random.default_rng(2)
    for K in (1, 3):
        P = rng.normal(size=(Z.shape[1], K)).astype(dtype)
        U = rng.normal(size=(Z.shape[0], K)).astype(dtype)
        assert np.array_equal(ops32.matmat(P), ops64.matmat(P))
        assert np.array_equal(ops32.rmatmat(U), ops64.rmatmat(U))
        mup, w = rng.normal(size=K), rng.uniform(0.5, 2, Z.shape[0])
        n32, n64 = ops32.normal(P, mup, w), ops64.normal(P, mup, w)
        assert np.array_equal(n32[0], n64[0]) and np.array_equal(n32[1], n64[1])
    cols = np.array([0, 4, 9, Z.shape[1] - 1])
    w = rng.uniform(0.5, 2, Z.shape[0])
    assert np.array_equal(ops32.gram_block(cols, w), ops64.gram_block(cols, w))


def test_sparse_products_with_int64_indices():
    Z = sp.random(500, 60, density=0.1, format="csr", random_state=3)
    ops32, ops64 = SparseProducts(Z, 2), SparseProducts(_wide(Z), 2)
    rng = np.random.default_rng(4)
    P, U, w = rng.normal(size=(60, 2)), rng.normal(size=(500, 2)), rng.uniform(0.5, 2, 500)
    assert np.array_equal(ops32.matmat(P), ops64.matmat(P))
    assert np.array_equal(ops32.rmatmat(U), ops64.rmatmat(U))
    n32, n64 = ops32.normal(P, np.zeros(2), w), ops64.normal(P, np.zeros(2), w)
    assert np.array_equal(n32[0], n64[0]) and np.array_equal(n32[1], n64[1])
    assert np.array_equal(ops32.column_sq_sums(w), ops64.column_sq_sums(w))
    cols = np.array([1, 7, 30])
    assert np.array_equal(csr_gram_block_of((Z.indptr, Z.indices, Z.data), 60, cols, w, 2),
                          csr_gram_block_of((ops64._csr[0], ops64._csr[1], Z.data), 60, cols, w, 2))


# ------------------------------------------------------------ whole fits
# Cholesky on a coarser grid (~700 columns; at gamma 0.7 its 6,000-column Gram took most of a minute).
@pytest.mark.parametrize("solver, gamma", [("cg", 0.7), ("cholesky", 0.2)])
def test_fits_on_forced_wide_features_equal_the_int32_fits(solver, gamma, force_wide, monkeypatch):
    X, y = _data()
    labels = (y > np.median(y)).astype(int) + (y > np.quantile(y, 0.8))
    kw = dict(features=RandomBinningFeatures(20, gamma=gamma, random_state=0), solver=solver, alpha=0.5)
    wide = [Ridge(**kw).fit(X, y), RidgeClassifier(**kw).fit(X, labels)]
    assert wide[0].features_.transform(X[:10]).indices.dtype == np.int64
    monkeypatch.setattr(binning_mod, "INDEX32_MAX", np.iinfo(np.int32).max)
    narrow = [Ridge(**kw).fit(X, y), RidgeClassifier(**kw).fit(X, labels)]
    for a, b in zip(wide, narrow):
        assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
        assert np.array_equal(a.predict(X), b.predict(X))
