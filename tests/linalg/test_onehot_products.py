"""One-hot block products and the heavy-column block preconditioner of the CG solver."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from sklearn.preprocessing import OneHotEncoder

import randfeat._solvers.precond as precond_mod
import randfeat._core.threads as threads_mod
from randfeat import RandomBinningFeatures, Ridge, RidgeClassifier
from randfeat._linalg.csr import SparseProducts
from randfeat._linalg.onehot import FasterSetting, OneHotBlockProducts, aligned_empty, onehot_block_structure
from randfeat._linalg.products import make_products
from randfeat._ext._onehot_fast import (GRAM_TILE_BYTES, bins_dtype, block_ranges, local_bins, local_rows, n_row_blocks,
                                        onehot_gram_block, onehot_matmat, onehot_tmatmat, pad_rows, padded_width,
                                        row_group_budgets, set_group_budgets, vector_isa)
from randfeat._linalg.csr import csr_gram_block_of
import randfeat._ext._onehot_fast as onehot_fast
from randfeat._ext._sparse_fast import compact_columns, csr_gram_block
from randfeat._solvers.precond import heavy_block_preconditioner, max_block_size
from _subprocess_env import run_on_vector_path

EMPTY = np.zeros(0)
NO_SUMS = np.zeros((0, 0))


def binning_Z(n=3000, d=4, P=12, gamma=0.8, dtype=np.float64, seed=0):
    """Binning features of clustered data: crowded bins, as on real data."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(6, d))
    X = centres[rng.integers(0, 6, n)] + 0.4 * rng.normal(size=(n, d))
    Z = RandomBinningFeatures(P, gamma=gamma, random_state=seed).fit_transform(X.astype(dtype))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 / 4 + 0.1 * rng.normal(size=n)
    return Z, y


# ------------------------------------------------------------ structure
@pytest.mark.kernel
def test_structure_of_binning_and_one_hot_encoding():
    Z, _ = binning_Z(P=7)
    bins, start, value = onehot_block_structure(Z)
    N, D = Z.shape
    assert bins.shape == (7, N) and bins.dtype == np.uint16  # every block is narrower than 65536 columns
    assert start[0] == 0 and start[-1] == D and np.all(np.diff(start) > 0)
    assert value == pytest.approx(1 / np.sqrt(7))
    # Rebuilding Z from the description gives Z back.
    rows = np.repeat(np.arange(N), 7)
    cols = (bins + start[:-1, None]).T.ravel()
    assert np.array_equal(sp.csr_matrix((np.full(N * 7, value), (rows, cols)), shape=Z.shape).toarray(), Z.toarray())

    cats = np.random.default_rng(1).integers(0, 5, size=(200, 3))
    E = OneHotEncoder().fit_transform(cats).tocsr()
    assert onehot_block_structure(E) is not None
    assert isinstance(make_products(E, 1), OneHotBlockProducts)


def _drop_one_entry(Z):
    Z = Z.copy()
    Z.data[3] = 0.0
    Z.eliminate_zeros()
    return Z


@pytest.mark.parametrize(
    "make",
    [
        lambda Z: Z.multiply(np.arange(1, Z.shape[0] + 1)[:, None]).tocsr(),  # values differ
        _drop_one_entry,  # one row has one nonzero fewer
    ],
)
def test_structure_rejects_other_csr(make):
    Z, _ = binning_Z(P=5, n=400)
    Z2 = make(Z)
    assert onehot_block_structure(Z2) is None
    assert type(make_products(Z2, 1)) is SparseProducts


def test_structure_rejects_overlapping_ranges():
    # Row 0 has columns (0, 2), row 1 has (3, 4): second entries span 2..4,
    # first entries 0..3, so no column split makes them separate blocks.
    Z = sp.csr_matrix((np.ones(4), [0, 2, 3, 4], [0, 2, 4]), shape=(2, 6))
    assert onehot_block_structure(Z) is None


# ------------------------------------------------------------ kernels vs NumPy
@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K", [1, 3, 7, 8, 9])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("bins_type", [np.uint16, np.int32])
def test_onehot_products_match_scipy(dtype, K, n_threads, bins_type):
    Z, _ = binning_Z(n=5000, P=9, dtype=dtype)
    bins, start, value = onehot_block_structure(Z)
    bins = bins.astype(bins_type)
    N, D = Z.shape
    rng = np.random.default_rng(K)
    B = rng.normal(size=(D, K)).astype(dtype)
    U = rng.normal(size=(N, K)).astype(dtype)
    Z64 = Z.astype(np.float64)
    out = np.empty((N, K), dtype=dtype)
    onehot_matmat(bins, start, value, B, out, EMPTY, EMPTY, NO_SUMS, n_threads)
    rtol = 1e-12 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(out, Z64 @ B.astype(np.float64), rtol=rtol, atol=rtol)
    q = np.empty((D, K), dtype=dtype)
    onehot_tmatmat(bins, start, value, U, q, n_threads)
    ref = Z64.T @ U.astype(np.float64)
    np.testing.assert_allclose(q, ref, rtol=rtol, atol=rtol * np.abs(ref).max())

    # Centred, weighted variant with per-row-block sums.
    shift = rng.normal(size=K)
    w = rng.uniform(0.5, 2.0, N)
    sums = np.empty((n_row_blocks(N), K))
    onehot_matmat(bins, start, value, B, out, shift, w, sums, n_threads)
    ref_u = w[:, None] * (Z64 @ B.astype(np.float64) - shift)
    np.testing.assert_allclose(out, ref_u, rtol=rtol, atol=rtol * np.abs(ref_u).max())
    np.testing.assert_allclose(sums.sum(axis=0), ref_u.sum(axis=0), rtol=1e-10, atol=1e-9 * np.abs(ref_u).sum())


@pytest.mark.kernel
@pytest.mark.parametrize("K", [1, 7])
def test_onehot_products_bitwise_equal_for_any_thread_count(K):
    Z, _ = binning_Z(n=20000, P=10)
    bins, start, value = onehot_block_structure(Z)
    N, D = Z.shape
    rng = np.random.default_rng(3)
    B, U = rng.normal(size=(D, K)), rng.normal(size=(N, K))
    outs, qs = [], []
    # Any thread count, and uint16 or int32 bins: the same bits.
    for t, bins_type in ((1, np.uint16), (2, np.uint16), (4, np.uint16), (3, np.int32)):
        out, q = np.empty((N, K)), np.empty((D, K))
        onehot_matmat(bins.astype(bins_type), start, value, B, out, EMPTY, EMPTY, NO_SUMS, t)
        onehot_tmatmat(bins.astype(bins_type), start, value, U, q, t)
        outs.append(out)
        qs.append(q)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    assert all(np.array_equal(qs[0], q) for q in qs[1:])


def _products(Z, B, U, shift, w, n_threads, cols):
    bins, start, value = onehot_block_structure(Z)
    N, D = Z.shape
    K = U.shape[1]  # B may have padded rows
    out = np.empty((N, K), dtype=B.dtype)
    sums = np.empty((n_row_blocks(N), K)) if len(shift) else NO_SUMS
    onehot_matmat(bins, start, value, B, out, shift, w, sums, n_threads,
                  Z.indices.reshape(N, -1) if cols else None)
    q = np.empty((D, K), dtype=U.dtype)
    onehot_tmatmat(bins, start, value, U, q, n_threads)
    return out, sums, q


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K", [1, 2, 3, 4, 5, 6, 7, 8, 9])
@pytest.mark.parametrize("fused", [False, True])
def test_row_path_and_block_groups_give_the_same_bits(dtype, K, fused):
    # The row path (Z's row-major indices, 2 <= K <= 8) and any grouping of
    # the blocks add each output entry's terms in the same order: same bits
    # as the block-by-block path with one group, for any thread count.
    Z, _ = binning_Z(n=4100, P=9, dtype=dtype)
    N, D = Z.shape
    rng = np.random.default_rng(K)
    B = rng.normal(size=(D, K)).astype(dtype)
    U = rng.normal(size=(N, K)).astype(dtype)
    shift, w = (rng.normal(size=K), rng.uniform(0.5, 2.0, N)) if fused else (EMPTY, EMPTY)
    reference = _products(Z, B, U, shift, w, 1, cols=False)
    np.testing.assert_allclose(reference[0].astype(np.float64),
                               (w[:, None] if fused else 1.0) * (Z.astype(np.float64) @ B.astype(np.float64) - (shift if fused else 0.0)),
                               rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
    variants = [(t, cols) for t in (1, 2, 3) for cols in (False, True)]
    got = [_products(Z, B, U, shift, w, t, cols) for t, cols in variants]
    previous = set_group_budgets(1, 1, 1)
    try:
        got += [_products(Z, B, U, shift, w, t, cols) for t, cols in variants]
    finally:
        set_group_budgets(*previous)
    # B with padded rows (the operator's layout past 32 bytes a row): the
    # padding holds NaN, which must never be read.
    ld = max(padded_width(K, B.itemsize), K + 1)
    B_padded = aligned_empty((D, ld), dtype)
    B_padded[...] = np.nan
    pad_rows(B, B_padded, 2)
    np.testing.assert_array_equal(B_padded[:, :K], B)
    got += [_products(Z, B_padded, U, shift, w, t, cols) for t, cols in variants]
    for g in got:
        for a, b in zip(reference, g):
            np.testing.assert_array_equal(a, b)


def test_padded_width_keeps_rows_within_cache_lines():
    for itemsize in (4, 8):
        for K in range(1, 40):
            ld = padded_width(K, itemsize)
            assert ld >= K
            if 32 < K * itemsize <= 64:
                assert ld * itemsize == 64
            elif itemsize == 4 and 16 < K * itemsize <= 32:
                assert ld * itemsize == 32
            else:
                assert ld == K
    assert aligned_empty((3, 5), np.float32).ctypes.data % 64 == 0
    with pytest.raises(ValueError, match="columns"):
        pad_rows(np.ones((3, 4)), np.ones((3, 3)), 1)


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_block_ranges_match_numpy(dtype, n_threads):
    Z, _ = binning_Z(n=20000, P=7, dtype=dtype)  # several chunks of rows
    N = Z.shape[0]
    cols = Z.indices.reshape(N, -1)
    lo, hi, same = block_ranges(cols, Z.data, float(Z.data[0]), n_threads)
    np.testing.assert_array_equal(lo, cols.min(axis=0))
    np.testing.assert_array_equal(hi, cols.max(axis=0))
    assert same
    data = Z.data.copy()
    data[-1] *= 2  # one value differs, in the last chunk
    assert not block_ranges(cols, data, float(Z.data[0]), n_threads)[2]
    Z.data[-1] *= 2
    assert onehot_block_structure(Z) is None


@pytest.mark.kernel
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_local_bins_is_numpys_transpose(n_threads):
    Z, _ = binning_Z(n=9000, P=7)  # more than one chunk of rows
    N, G = Z.shape[0], Z.nnz // Z.shape[0]
    bins, start, _ = onehot_block_structure(Z, n_threads)
    cols = Z.indices.reshape(N, G)
    np.testing.assert_array_equal(bins, (cols - start[:G]).T)
    for bins_type in (np.int32, np.uint16):
        out = np.full((G, N), 7, dtype=bins_type)
        local_bins(np.ascontiguousarray(cols, dtype=np.int32), start, out, n_threads)
        np.testing.assert_array_equal(out, bins)
    with pytest.raises(ValueError, match="shapes"):
        local_bins(np.ascontiguousarray(cols, dtype=np.int32), start, np.empty((G, N + 1), np.int32), 1)


@pytest.mark.kernel
@pytest.mark.parametrize("n_threads", [1, 2])
def test_blocks_wider_than_uint16_keep_int32_bins(n_threads):
    # One block of 70000 columns: its local columns do not fit uint16, so the
    # block-major copy is int32 (a uint16 copy would wrap and be wrong).
    rng = np.random.default_rng(5)
    N, widths = 4000, np.array([70_000, 3, 65_536])
    local = np.column_stack([rng.integers(0, w, N) for w in widths])
    local[:5, 0] = widths[0] - 1 - np.arange(5)  # the highest columns occur
    local[5] = 0  # and every block's first (the layout's block starts are the first columns seen)
    start = np.concatenate([[0], np.cumsum(widths)])
    cols = (local + start[:-1]).astype(np.int32)
    Z = sp.csr_matrix((np.full(cols.size, 0.5), cols.ravel(), np.arange(0, cols.size + 1, 3)), shape=(N, start[-1]))
    bins, start_found, value = onehot_block_structure(Z, n_threads)
    assert bins.dtype == np.int32 and np.array_equal(bins, local.T) and np.array_equal(start_found, start)
    B, U = rng.normal(size=(Z.shape[1], 2)), rng.normal(size=(N, 2))
    out, q = np.empty((N, 2)), np.empty((Z.shape[1], 2))
    onehot_matmat(bins, start, value, B, out, EMPTY, EMPTY, NO_SUMS, n_threads)
    onehot_tmatmat(bins, start, value, U, q, n_threads)
    np.testing.assert_allclose(out, Z @ B, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(q, Z.T @ U, rtol=1e-13, atol=1e-13)
    # Exactly 65536 columns still fits uint16.
    assert bins_dtype(65_536) == np.uint16 and bins_dtype(65_537) == np.int32


def test_group_budgets_reject_zero():
    with pytest.raises(ValueError, match="group budgets"):
        set_group_budgets(0, 1, 1)


@pytest.mark.kernel
@pytest.mark.parametrize("K", [1, 3, 7])
def test_any_group_bytes_gives_the_same_bits(K):
    # The operator's budget choice (quiet or shared cache) must never change
    # a product: every budget, down to one block a group, gives the same bits.
    Z, _ = binning_Z(n=4100, P=9)
    bins, start, value = onehot_block_structure(Z)
    cols = Z.indices.reshape(Z.shape[0], -1)
    B = np.random.default_rng(K).normal(size=(Z.shape[1], K))
    outs = []
    for group_bytes in (0, 1, 4096, 1 << 30):
        out = np.empty((Z.shape[0], K))
        onehot_matmat(bins, start, value, B, out, EMPTY, EMPTY, NO_SUMS, 2, cols, group_bytes)
        outs.append(out)
    np.testing.assert_allclose(outs[0], Z @ B, rtol=1e-13, atol=1e-13)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    with pytest.raises(ValueError, match="group_bytes"):
        onehot_matmat(bins, start, value, B, np.empty((Z.shape[0], K)), EMPTY, EMPTY, NO_SUMS, 1, cols, -1)


def test_row_group_budgets_are_quiet_then_shared_and_capped():
    quiet, shared = row_group_budgets()
    assert quiet >= shared >= 1
    previous = set_group_budgets(5, 1, 1)
    try:
        assert row_group_budgets() == (5, 5)
    finally:
        set_group_budgets(*previous)


def test_faster_setting_keeps_the_cheaper_and_keeps_exploring():
    chooser = FasterSetting(2, explore=4)
    cost = {0: 2.0, 1: 1.0}
    picks = []
    for _ in range(40):
        i = chooser.pick()
        picks.append(i)
        chooser.record(i, cost[i])
    assert picks[:3] == [0, 0, 1]  # a warm-up call (not recorded), then each tried once
    assert picks[2:].count(1) >= 2 * picks[2:].count(0) > 0  # mostly the cheaper, the other re-tried
    # The costs swap (another process took the cache): the choice follows.
    cost = {0: 0.5, 1: 3.0}
    for _ in range(20):
        i = chooser.pick()
        chooser.record(i, cost[i])
    assert chooser.pick() == 0


def test_faster_setting_does_not_charge_the_first_call_to_its_setting():
    # The first call pays one-time costs (fresh buffers' page faults): were
    # it recorded, the faster setting 0 would look slower and lose.
    chooser = FasterSetting(2, explore=100)
    picks = []
    for call in range(10):
        i = chooser.pick()
        picks.append(i)
        chooser.record(i, 50.0 if call == 0 else {0: 1.0, 1: 2.0}[i])
    assert picks == [0, 0, 1] + [0] * 7


def test_operator_products_do_not_depend_on_the_budget_choice():
    # The row path with a P wider than the shared budget: the operator
    # alternates budgets while it learns; every product has the same bits.
    Z, _ = binning_Z(n=3000, P=12)
    op = OneHotBlockProducts(Z, onehot_block_structure(Z), 2)
    P = np.random.default_rng(0).normal(size=(Z.shape[1], 7))
    previous = set_group_budgets(4096, 1 << 19, 1 << 21)
    try:
        assert op.shape[1] * 8 * 8 > row_group_budgets()[1]
        first = op.matmat(P)
        for _ in range(12):
            np.testing.assert_array_equal(op.matmat(P), first)
        assert op._row_budgets[7].calls == 13
    finally:
        set_group_budgets(*previous)
    np.testing.assert_allclose(first, Z @ P, rtol=1e-13, atol=1e-13)


@pytest.mark.kernel
def test_row_path_rejects_misshapen_cols():
    Z, _ = binning_Z(n=500, P=4)
    bins, start, value = onehot_block_structure(Z)
    B = np.ones((Z.shape[1], 3))
    out = np.empty((Z.shape[0], 3))
    with pytest.raises(ValueError, match="cols"):
        onehot_matmat(bins, start, value, B, out, EMPTY, EMPTY, NO_SUMS, 1, np.zeros((Z.shape[0], 3), np.int32))


def test_vector_isa_reports_a_path():
    assert vector_isa() in ("baseline", "avx2", "avx512")


@pytest.mark.kernel
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_gram_block_matches_numpy(index_dtype, dtype, weighted):
    rng = np.random.default_rng(4)
    Z = sp.random(400, 60, density=0.2, format="csr", random_state=5, dtype=np.float64).astype(dtype)
    Z.indptr, Z.indices = Z.indptr.astype(index_dtype), Z.indices.astype(index_dtype)
    columns = np.sort(rng.choice(60, size=17, replace=False))
    w = rng.uniform(0.2, 3.0, 400) if weighted else None
    position = np.full(60, -1, dtype=np.int32)
    position[columns] = np.arange(17, dtype=np.int32)
    hptr, hidx, hval = compact_columns(Z.indptr, Z.indices, Z.data, position)
    sub = Z[:, columns]
    assert np.array_equal(hptr, sub.indptr) and np.array_equal(hidx, sub.indices)
    dense = sub.toarray().astype(np.float64)
    ref = dense.T @ ((np.ones(400) if w is None else w)[:, None] * dense)
    blocks = []
    for t in (1, 2, 3):
        out = np.zeros((17, 17))
        csr_gram_block(hptr, hidx, hval, np.zeros(0) if w is None else w, out, t)
        assert np.all(np.tril(out, -1) == 0)
        blocks.append(out)
    assert all(np.array_equal(blocks[0], b) for b in blocks[1:])
    np.testing.assert_allclose(np.triu(blocks[0]), np.triu(ref), rtol=1e-12, atol=1e-12)
    ops = SparseProducts(Z, 2)
    np.testing.assert_allclose(ops.gram_block(columns, w), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("wide_bins", [False, True])
def test_onehot_gram_block_is_exact_counts_or_the_csr_kernel_to_the_bit(dtype, weighted, wide_bins, monkeypatch):
    # Tiles of a few blocks (a small tile budget), more rows than one step
    # of the kernel, chosen columns in some blocks only (block 2 has none).
    monkeypatch.setattr(onehot_fast, "GRAM_TILE_BYTES", 4096)
    Z, _ = binning_Z(n=9000, P=12, dtype=dtype)
    bins, start, value = onehot_block_structure(Z)
    if wide_bins:
        bins = bins.astype(np.int32)  # the kernel's path for blocks wider than 65536 columns
    rng = np.random.default_rng(7)
    heavy = np.argsort(-np.asarray(Z.sum(axis=0)).ravel(), kind="stable")[:40]
    columns = np.sort(np.setdiff1d(np.r_[heavy, rng.choice(Z.shape[1], 15, replace=False)],
                                   np.arange(start[2], start[3])))
    h = len(columns)
    w = rng.uniform(0.2, 3.0, Z.shape[0]) if weighted else None
    position = np.full(Z.shape[1], h, dtype=np.int32)
    position[columns] = np.arange(h, dtype=np.int32)
    v = float(np.array(value, dtype=dtype))
    blocks = [onehot_gram_block(bins, start, position, h, v, np.zeros(0) if w is None else w, t) for t in (1, 2, 3)]
    assert all(np.array_equal(blocks[0], b) for b in blocks[1:])
    assert blocks[0].shape == (h, h) and np.all(np.tril(blocks[0], -1) == 0)
    csr = csr_gram_block_of((Z.indptr, Z.indices, Z.data), Z.shape[1], columns, w, 2)
    dense = Z[:, columns].toarray().astype(np.float64)
    ref = dense.T @ ((np.ones(Z.shape[0]) if w is None else w)[:, None] * dense)
    np.testing.assert_allclose(blocks[0], np.triu(ref), rtol=1e-12, atol=1e-12)
    if weighted:
        expected = csr  # the CSR kernel's factors in its order: its bits
    else:
        # Exact counts of rows (an integer product), times value² once.
        ones = (Z[:, columns] != 0).astype(np.int64).toarray()
        expected = (ones.T @ ones).astype(np.float64) * (v * v)
    assert np.array_equal(np.triu(expected), blocks[0])
    # The operator's block: the same, symmetric.
    assert np.array_equal(OneHotBlockProducts(Z, onehot_block_structure(Z), 2).gram_block(columns, w), expected)


def test_onehot_gram_block_refuses_mismatched_shapes():
    Z, _ = binning_Z(n=200, P=3)
    bins, start, value = onehot_block_structure(Z)
    position = np.zeros(Z.shape[1] + 1, dtype=np.int32)
    with pytest.raises(ValueError, match="shapes"):
        onehot_gram_block(bins, start, position, 1, value, EMPTY, 1)
    with pytest.raises(ValueError, match="w has the wrong length"):
        onehot_gram_block(bins, start, position[:-1], 1, value, np.ones(3), 1)
    with pytest.raises(ValueError, match="position"):
        onehot_gram_block(bins, start, position[:-1] + 2, 1, value, EMPTY, 1)
    unordered = np.full(Z.shape[1], 2, dtype=np.int32)
    unordered[[0, 5]] = [1, 0]
    with pytest.raises(ValueError, match="column order"):
        onehot_gram_block(bins, start, unordered, 2, value, EMPTY, 1)


# ------------------------------------------------------------ preconditioner
def test_block_is_the_exact_inverse_of_the_heavy_submatrix():
    Z, y = binning_Z()
    ops = make_products(Z, 2)
    alpha = 0.05
    N, D = Z.shape
    Zd = Z.toarray()
    mu = Zd.mean(axis=0)
    A = (Zd - mu).T @ (Zd - mu) + alpha * np.eye(D)
    diag = np.diag(A).copy()
    block = heavy_block_preconditioner(ops, diag, alpha, mu, None, float(N))
    assert block is not None
    H = block.columns
    assert len(H) <= max_block_size(Z.nnz)
    # The heaviest columns were chosen, and the inverse is exact.
    light = np.setdiff1d(np.arange(D), H)
    assert diag[H].min() >= diag[light][diag[light] > (1 + precond_mod.HEAVY_RATIO) * alpha].max(initial=0)
    np.testing.assert_allclose(block.inverse @ A[np.ix_(H, H)], np.eye(len(H)), atol=1e-8)
    R = np.random.default_rng(0).normal(size=(D, 2))
    Zr = np.zeros_like(R)
    rz = block.apply(R, Zr)
    np.testing.assert_allclose(Zr[H], np.linalg.solve(A[np.ix_(H, H)], R[H]), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(rz, np.einsum("ij,ij->j", R[H], Zr[H]))


def test_no_block_for_dense_or_zero_alpha():
    Z, _ = binning_Z(n=500)
    dense_ops = make_products(Z.toarray(), 1)
    diag = np.full(Z.shape[1], 10.0)
    assert heavy_block_preconditioner(dense_ops, diag, 1.0, None, None, 500.0) is None
    assert heavy_block_preconditioner(make_products(Z, 1), diag, 0.0, None, None, 500.0) is None


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cg_on_binning_features_matches_normal_equations(fit_intercept, weighted, dtype):
    Z, y = binning_Z(dtype=dtype)
    Z = Z.astype(dtype)
    w = np.random.default_rng(2).uniform(0.3, 3.0, Z.shape[0]) if weighted else None
    alpha = 0.05
    tol = 1e-10 if dtype == np.float64 else 1e-6
    est = Ridge(alpha, solver="cg", tol=tol, fit_intercept=fit_intercept).fit(Z, y, sample_weight=w)
    Zd = Z.toarray().astype(np.float64)
    ww = np.ones(len(y)) if w is None else w
    mu = ww @ Zd / ww.sum() if fit_intercept else np.zeros(Zd.shape[1])
    ybar = ww @ y / ww.sum() if fit_intercept else 0.0
    A = (Zd - mu).T @ (ww[:, None] * (Zd - mu)) + alpha * np.eye(Zd.shape[1])
    coef = scipy.linalg.solve(A, (Zd - mu).T @ (ww * (y - ybar)), assume_a="pos")
    assert est.relative_residual_[0] <= tol
    # Error ≤ κ·tol; κ(A) here is ~1e4.
    atol = (1e-5 if dtype == np.float64 else 2e-3) * np.abs(coef).max()
    np.testing.assert_allclose(est.coef_, coef, rtol=0, atol=atol)
    np.testing.assert_allclose(est.intercept_, ybar - mu @ coef, rtol=0, atol=atol * 10 + 1e-12)


def test_block_cuts_iterations_against_jacobi(monkeypatch):
    # Wide bins (small gamma): crowded columns, where Jacobi is weakest
    # (measured: 50 iterations with the block, 109 without).
    Z, y = binning_Z(n=6000, P=20, gamma=0.3)
    with_block = Ridge(1.0, solver="cg", tol=1e-8).fit(Z, y)
    monkeypatch.setattr(precond_mod, "MIN_BLOCK", 10**9)  # Jacobi only
    jacobi = Ridge(1.0, solver="cg", tol=1e-8).fit(Z, y)
    assert with_block.n_iter_[0] < 0.7 * jacobi.n_iter_[0]
    # Same problem, same answer (to the accuracy tol allows).
    np.testing.assert_allclose(with_block.predict(Z), jacobi.predict(Z), rtol=0, atol=1e-4 * np.abs(y).max())


@pytest.mark.parametrize("weighted", [False, True])
def test_cg_on_binning_bitwise_equal_for_any_n_jobs(weighted, monkeypatch):
    # Enough work that the products and block CG's thin products really use
    # several threads, over several of their 4096-row blocks.
    monkeypatch.setitem(threads_mod.MIN_WORK_PER_THREAD, "csr_entries", 1000)
    monkeypatch.setitem(threads_mod.MIN_WORK_PER_THREAD, "thin_product_flops", 1000)
    Z, y = binning_Z(n=8000, P=15, gamma=2.0)
    assert Z.shape[1] > 3 * 4096
    labels = np.digitize(y, np.quantile(y, [0.3, 0.6]))
    w = np.random.default_rng(9).uniform(0.5, 2.0, len(y)) if weighted else None
    for Est, target in ((Ridge, y), (RidgeClassifier, labels)):
        fits = [Est(0.05, solver="cg", tol=1e-9, n_jobs=j).fit(Z, target, sample_weight=w) for j in (1, 2, 3)]
        for f in fits[1:]:
            assert np.array_equal(fits[0].n_iter_, f.n_iter_)
            assert np.array_equal(fits[0].coef_, f.coef_)
            assert np.array_equal(fits[0].intercept_, f.intercept_)


@pytest.mark.kernel
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_vector_paths_give_identical_products(isa, tmp_path):
    # The process under test runs the lower path; this one runs the best.
    Z, _ = binning_Z(n=3000, P=9)
    bins, start, value = onehot_block_structure(Z)
    rng = np.random.default_rng(11)
    results = {}
    cols = Z.indices.reshape(Z.shape[0], -1)
    for K in (1, 5, 7, 8, 11):
        B, U = rng.normal(size=(Z.shape[1], K)), rng.normal(size=(Z.shape[0], K))
        out, q = np.empty((Z.shape[0], K)), np.empty((Z.shape[1], K))
        onehot_matmat(bins, start, value, B, out, EMPTY, EMPTY, NO_SUMS, 2, cols)
        onehot_tmatmat(bins, start, value, U, q, 2)
        results[K] = (B, U, out, q)
    np.savez(tmp_path / "in.npz", bins=bins, start=start, cols=cols, **{f"B{K}": r[0] for K, r in results.items()},
             **{f"U{K}": r[1] for K, r in results.items()})
    code = (
        "import numpy as np\n"
        "from randfeat._ext._onehot_fast import local_rows, onehot_matmat, onehot_tmatmat, vector_isa\n"
        f"f = np.load(r'{tmp_path / 'in.npz'}')\n"
        "res = {}\n"
        "for K in (1, 5, 7, 8, 11):\n"
        "    B, U = f[f'B{K}'], f[f'U{K}']\n"
        "    out, q = np.empty((U.shape[0], K)), np.empty((B.shape[0], K))\n"
        f"    onehot_matmat(f['bins'], f['start'], {value!r}, B, out, np.zeros(0), np.zeros(0), np.zeros((0, 0)), 2, f['cols'])\n"
        f"    onehot_tmatmat(f['bins'], f['start'], {value!r}, U, q, 2)\n"
        "    res[f'out{K}'], res[f'q{K}'] = out, q\n"
        "    wide = f['bins'].astype(np.int32)  # the int32-bin kernels of this path\n"
        "    out, q = np.empty((U.shape[0], K)), np.empty((B.shape[0], K))\n"
        f"    onehot_matmat(wide, f['start'], {value!r}, B, out, np.zeros(0), np.zeros(0), np.zeros((0, 0)), 2)\n"
        f"    onehot_tmatmat(wide, f['start'], {value!r}, U, q, 2)\n"
        "    res[f'wout{K}'], res[f'wq{K}'] = out, q\n"
        "    narrow = np.empty(f['cols'].shape, np.uint16)  # the uint16 row path of this path\n"
        "    local_rows(f['cols'], f['start'], narrow, 2)\n"
        "    out = np.empty((U.shape[0], K))\n"
        f"    onehot_matmat(f['bins'], f['start'], {value!r}, B, out, np.zeros(0), np.zeros(0), np.zeros((0, 0)), 2, narrow)\n"
        "    res[f'nout{K}'] = out\n"
        f"np.savez(r'{tmp_path / 'out.npz'}', **res)\n"
        "print(vector_isa())\n"
    )
    run_on_vector_path(code, isa)
    got = np.load(tmp_path / "out.npz")
    for K, (_, _, out, q) in results.items():
        np.testing.assert_array_equal(got[f"out{K}"], out)
        np.testing.assert_array_equal(got[f"q{K}"], q)
        np.testing.assert_array_equal(got[f"wq{K}"], q)
        # Without cols, 2..8 targets take the block path: same sums in the same order.
        np.testing.assert_array_equal(got[f"wout{K}"], out)
        np.testing.assert_array_equal(got[f"nout{K}"], out)


# ------------------------------------------- block + scaled identity ("block")
def _dense_preconditioner(M, D):
    """M⁻¹ as a dense matrix: applied to the columns of the identity as block_cg applies it."""
    R = np.eye(D)
    Zr = R * M.inv_diag[:, None]
    if M.correction is not None:
        M.correction.apply(R, Zr)
    return Zr


@pytest.mark.parametrize("kind", ["jacobi", "block"])
def test_preconditioners_are_symmetric_positive_definite(kind):
    from randfeat._solvers.normal import NormalOperator
    from randfeat._solvers.precond import make_preconditioner

    Z, _ = binning_Z()  # the heavy block exists here (test_block_is_the_exact_inverse_of_the_heavy_submatrix)
    normal = NormalOperator(make_products(Z, 1), None, True)
    M, _ = make_preconditioner(normal, 1e-2, kind)
    assert M.correction is not None  # the heavy block is part of both
    Minv = _dense_preconditioner(M, Z.shape[1])
    np.testing.assert_allclose(Minv, Minv.T, rtol=1e-12, atol=1e-14)
    assert np.linalg.eigvalsh((Minv + Minv.T) / 2).min() > 0
    rest = M.inv_diag[M.inv_diag != 0]
    assert (kind == "block") == np.all(rest == rest[0])  # one scale outside the block


def test_auto_is_block_on_one_hot_and_cuts_iterations_against_jacobi():
    # Letter-like rows repeat (crowded bins): Jacobi shrinks the
    # regularisation of crowded columns and slows CG down (DESIGN.md, "Hard cases").
    from randfeat._maps.gamma import median_heuristic_gamma
    from randfeat.datasets import make_letter_like

    X, y = make_letter_like(3000)
    Z = RandomBinningFeatures(20, gamma=4 * median_heuristic_gamma(X, "manhattan"), random_state=0).fit_transform(X)
    fits = {kind: RidgeClassifier(1e-2, solver="cg", preconditioner=kind, tol=1e-8, max_iter=20000).fit(Z, y)
            for kind in ("auto", "block", "jacobi")}
    assert "scaled identity" in fits["auto"].preconditioner_
    np.testing.assert_array_equal(fits["auto"].coef_, fits["block"].coef_)
    assert np.max(fits["block"].n_iter_) < 0.8 * np.max(fits["jacobi"].n_iter_)
    np.testing.assert_allclose(fits["block"].coef_, fits["jacobi"].coef_, rtol=1e-5,
                               atol=1e-5 * np.abs(fits["jacobi"].coef_).max())


def test_auto_stays_jacobi_on_other_sparse_and_dense_features():
    rng = np.random.default_rng(0)
    X = sp.random(300, 40, density=0.2, random_state=1, format="csr")
    y = rng.normal(size=300)
    assert "scaled identity" not in Ridge(1e-2, solver="cg").fit(X, y).preconditioner_
    assert "scaled identity" not in Ridge(1e-2, solver="cg").fit(X.toarray(), y).preconditioner_


def test_block_left_out_when_its_columns_carry_little_mass(monkeypatch):
    from randfeat._solvers.normal import NormalOperator
    from randfeat._solvers.precond import make_preconditioner

    Z, _ = binning_Z()
    normal = NormalOperator(make_products(Z, 1), None, True)
    with_block, _ = make_preconditioner(normal, 1e-2, "block")
    assert with_block.correction is not None
    monkeypatch.setattr(precond_mod, "HEAVY_BLOCK_MIN_SHARE", 1.01)  # no block can carry more than all the mass
    without, _ = make_preconditioner(normal, 1e-2, "block")
    assert without.correction is None and np.all(without.inv_diag == without.inv_diag[0])
    assert without.description == "a scaled identity"
    jacobi, _ = make_preconditioner(normal, 1e-2, "jacobi")  # Jacobi keeps its block whatever the share
    assert jacobi.correction is not None


# -------------------------------------------------- the dual (N much below D)
def _direct_ridge(Z, Y, alpha, w, fit_intercept):
    """Ridge by a dense direct solve of the weighted, centred normal equations: (coef (K, D), intercept (K,))."""
    Z = Z.toarray().astype(np.float64)
    w = np.ones(Z.shape[0]) if w is None else w
    mu = (w @ Z) / w.sum() if fit_intercept else np.zeros(Z.shape[1])
    ybar = (w @ Y) / w.sum() if fit_intercept else np.zeros(Y.shape[1])
    Zc, Yc = Z - mu, Y - ybar
    coef = np.linalg.solve(Zc.T @ (w[:, None] * Zc) + alpha * np.eye(Z.shape[1]), Zc.T @ (w[:, None] * Yc))
    return coef.T, ybar - mu @ coef


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K", [1, 3])
def test_cg_in_the_dual_matches_a_direct_solve(fit_intercept, weighted, dtype, K):
    # Few rows, many bins (N <= D/2): CG iterates on N × K blocks.
    Z, y = binning_Z(n=300, P=10, gamma=6.0, dtype=dtype)
    assert 2 * Z.shape[0] <= Z.shape[1]
    rng = np.random.default_rng(K)
    Y = np.column_stack([y] + [rng.normal(size=len(y)) for _ in range(K - 1)])
    w = rng.uniform(0.5, 2.0, len(y)) if weighted else None
    est = Ridge(1e-2, solver="cg", tol=1e-9 if dtype == np.float64 else 1e-5, fit_intercept=fit_intercept)
    est.fit(Z, Y[:, 0] if K == 1 else Y, sample_weight=w)
    assert est.preconditioner_.startswith("none: CG on the dual")
    coef, intercept = _direct_ridge(Z, Y, 1e-2, w, fit_intercept)
    tol = 1e-6 if dtype == np.float64 else 2e-3
    scale = np.abs(coef).max()
    np.testing.assert_allclose(np.atleast_2d(est.coef_), coef, rtol=0, atol=tol * scale)
    np.testing.assert_allclose(np.atleast_1d(est.intercept_), intercept if fit_intercept else 0.0,
                               rtol=0, atol=tol * max(scale, np.abs(intercept).max()))
    # The residual reported is the primal one, within tol.
    assert np.all(est.relative_residual_ <= est.tol)


def test_cg_in_the_dual_bitwise_equal_for_any_n_jobs_and_path_equals_fresh(monkeypatch):
    from randfeat._solvers.cg_path import cg_ridge_path

    monkeypatch.setitem(threads_mod.MIN_WORK_PER_THREAD, "csr_entries", 1000)
    monkeypatch.setitem(threads_mod.MIN_WORK_PER_THREAD, "thin_product_flops", 10)
    Z, y = binning_Z(n=5000, P=10, gamma=6.0)
    assert 2 * Z.shape[0] <= Z.shape[1]
    labels = np.digitize(y, np.quantile(y, [0.3, 0.6]))
    fits = [RidgeClassifier(1e-2, solver="cg", tol=1e-8, n_jobs=j).fit(Z, labels) for j in (1, 2, 3)]
    assert fits[0].preconditioner_.startswith("none: CG on the dual")
    for f in fits[1:]:
        assert np.array_equal(fits[0].n_iter_, f.n_iter_)
        assert np.array_equal(fits[0].coef_, f.coef_)
        assert np.array_equal(fits[0].intercept_, f.intercept_)
    # A path of alphas (warm-started in the dual) reaches what direct solves give.
    Z, y = binning_Z(n=300, P=10, gamma=6.0)
    Y = np.column_stack([y, -y])
    path = cg_ridge_path(make_products(Z, 1), Y, None, [1.0, 1e-2], fit_intercept=True, tol=1e-9, max_iter=None)
    for res, alpha in zip(path, [1.0, 1e-2]):
        coef, intercept = _direct_ridge(Z, Y, alpha, None, True)
        np.testing.assert_allclose(res.coef, coef, rtol=0, atol=1e-6 * np.abs(coef).max())
        assert res.preconditioner.startswith("none: CG on the dual")


def test_dual_not_used_where_it_does_not_pay(monkeypatch):
    # More rows than half the columns, or a heavy block: the primal.
    Z, y = binning_Z(n=3000, P=12, gamma=0.8)
    assert 2 * Z.shape[0] > Z.shape[1]
    assert not Ridge(1e-2, solver="cg").fit(Z, y).preconditioner_.startswith("none: CG on the dual")


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K", [2, 5, 7, 8])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_row_path_with_narrow_local_columns_gives_the_same_bits(dtype, K, n_threads):
    # The row path (2..8 targets) reads uint16 local columns when the bins
    # are narrow: the same sums, in the same order, as Z's int32 indices.
    Z, _ = binning_Z(n=6000, P=9, dtype=dtype)
    bins, start, value = onehot_block_structure(Z)
    N, G = Z.shape[0], bins.shape[0]
    cols = Z.indices.reshape(N, G)
    narrow = np.full((N, G), 7, dtype=np.uint16)
    local_rows(cols, start, narrow, n_threads)
    np.testing.assert_array_equal(narrow, (cols - start[:G]).astype(np.uint16))
    rng = np.random.default_rng(K)
    B = rng.normal(size=(Z.shape[1], K)).astype(dtype)
    shift, w = rng.normal(size=K), rng.uniform(0.5, 2, N)
    outs = []
    for c in (cols, narrow, None):
        out = np.empty((N, K), dtype=dtype)
        sums = np.empty((n_row_blocks(N), K))
        onehot_matmat(bins, start, value, B, out, shift, w, sums, n_threads, c)
        outs.append((out, sums))
    for out, sums in outs[1:]:
        np.testing.assert_array_equal(out, outs[0][0])
        np.testing.assert_array_equal(sums, outs[0][1])
    ref = w[:, None] * (Z.astype(np.float64) @ B.astype(np.float64) - shift)
    rtol = 1e-12 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(outs[1][0], ref, rtol=rtol, atol=rtol * np.abs(ref).max())
    with pytest.raises(ValueError, match="int32 .* or uint16"):
        onehot_matmat(bins, start, value, B, out, shift, w, sums, n_threads, cols.astype(np.int64))
    # The operator builds the narrow copy for 2..8 targets, and only then.
    ops = OneHotBlockProducts(Z, (bins, start, value), n_threads)
    ops.matmat(B[:, :1])
    assert ops._narrow_cols is None
    plain = np.empty((N, K), dtype=dtype)
    onehot_matmat(bins, start, value, B, plain, EMPTY, EMPTY, NO_SUMS, n_threads, cols)
    np.testing.assert_array_equal(ops.matmat(B), plain)
    assert ops._narrow_cols is not None and ops._narrow_cols.dtype == np.uint16
