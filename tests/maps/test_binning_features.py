"""RandomBinningFeatures against the NumPy reference (tests/_binning_reference.py),
a dict-based pure-Python reference, and the mathematics of random binning."""

import math
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import laplacian_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat import RandomBinningFeatures
from randfeat._ext import _binning_fast
import _binning_reference as ref
from _subprocess_env import run_bench, run_on_vector_path

MASK64 = (1 << 64) - 1


# ------------------------------------------------------ dict-based reference
def _py_hash(bins):
    """The hash of a bin tuple, in Python integers (definition of randfeat_binning.h)."""
    h = 0x9E3779B97F4A7C15
    for b in bins:
        h = ((h + b) * 0xBF58476D1CE4E5B9) & MASK64
        h ^= h >> 29
    for m in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        h ^= h >> 33
        h = (h * m) & MASK64
    return h ^ (h >> 33)


def _py_bins(x, u, delta):
    # float64 (x - u) * (1/delta), as defined; Python floats are IEEE doubles.
    return tuple(math.floor((float(xm) - um) * (1.0 / dm)) for xm, um, dm in zip(x, u, delta))


def _dict_reference(est, Xtrain, Xtest):
    """Features of Xtest from a vocabulary of Xtrain, with dicts keyed by bin tuples."""
    P = est.n_grids
    vocab = []
    for p in range(P):
        tuples = {_py_bins(x, est.offsets_[p], est.pitches_[p]) for x in Xtrain}
        # columns are numbered by hash within a grid
        vocab.append({t: j for j, t in enumerate(sorted(tuples, key=_py_hash))})
    offsets = np.cumsum([0] + [len(v) for v in vocab])
    rows = []
    for x in Xtest:
        row = []
        for p in range(P):
            t = _py_bins(x, est.offsets_[p], est.pitches_[p])
            if t in vocab[p]:
                row.append(offsets[p] + vocab[p][t])
        rows.append(row)
    return rows, offsets


def _rows_of(Z):
    Z = sp.csr_matrix(Z)
    return [list(Z.indices[Z.indptr[i] : Z.indptr[i + 1]]) for i in range(Z.shape[0])]


def _assert_csr_equal(A, B):
    assert A.shape == B.shape
    assert A.dtype == B.dtype
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)


def _data(n, d, seed=0, scale=1.0):
    return np.random.default_rng(seed).normal(scale=scale, size=(n, d))


# ---------------------------------------------------------------- reference
@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F", "csr"])
@pytest.mark.parametrize("n, d, P", [(700, 6, 9), (1, 1, 1), (300, 1, 5), (1, 7, 3), (200, 4, 1)])
def test_matches_numpy_reference(dtype, layout, n, d, P):
    rng = np.random.default_rng(n + 10 * d + 100 * P)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6)  # zeros, for CSR
    Xt = rng.normal(scale=1.3, size=(n + 50, d)) * (rng.random((n + 50, d)) < 0.6)
    X, Xt = X.astype(dtype), Xt.astype(dtype)
    if layout == "F":
        X, Xt = np.asfortranarray(X), np.asfortranarray(Xt)
    elif layout == "csr":
        X, Xt = sp.csr_matrix(X), sp.csr_matrix(Xt)
    est = RandomBinningFeatures(P, gamma=0.7, random_state=3)
    Z = est.fit_transform(X)
    Zr, keys, koff = ref.binning_fit_transform(X, est.pitches_, est.offsets_)
    _assert_csr_equal(Z, Zr)
    np.testing.assert_array_equal(est.bin_hashes_, keys)
    np.testing.assert_array_equal(est.grid_offsets_, koff)
    assert Z.dtype == dtype and Z.indices.dtype == np.int32
    assert np.all(np.diff(Z.indptr) == P)
    np.testing.assert_array_equal(Z.data, np.full(Z.nnz, 1 / np.sqrt(P), dtype=dtype))
    _assert_csr_equal(est.transform(Xt), ref.binning_transform(Xt, est.pitches_, est.offsets_, keys, koff))
    _assert_csr_equal(est.transform(X), Z)


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_csr_layouts_agree(dtype):
    X = (_data(500, 8, seed=1) * (np.random.default_rng(2).random((500, 8)) < 0.3)).astype(dtype)
    est = RandomBinningFeatures(12, gamma=0.4, random_state=0)
    Z = est.fit_transform(X)
    for variant in (np.asfortranarray(X), sp.csr_matrix(X), X[:, ::1].copy()):
        _assert_csr_equal(clone(est).fit_transform(variant), Z)
        _assert_csr_equal(est.transform(variant), Z)
    Xro = X.copy()
    Xro.flags.writeable = False
    _assert_csr_equal(est.transform(Xro), Z)


@pytest.mark.kernel
def test_kernel_hashes_match_reference():
    X = _data(400, 11, seed=5, scale=3.0)
    est = RandomBinningFeatures(13, gamma=2.0, random_state=1).fit(X)
    H = _binning_fast.hash_rows_for_test(X, est._state.U, est._state.INV, 13)
    np.testing.assert_array_equal(H, ref.hash_bins(X, est.pitches_, est.offsets_))
    for i in (0, 17, 399):
        for p in (0, 12):
            assert int(H[i, p]) == _py_hash(_py_bins(X[i], est.offsets_[p], est.pitches_[p]))


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dict_reference(dtype):
    X = _data(60, 3, seed=7).astype(dtype)
    Xt = np.vstack([X[:10], _data(40, 3, seed=8, scale=2.0).astype(dtype)])
    est = RandomBinningFeatures(5, gamma=1.5, random_state=4)
    Z = est.fit_transform(X)
    rows, offsets = _dict_reference(est, X.astype(np.float64), X.astype(np.float64))
    assert _rows_of(Z) == rows
    np.testing.assert_array_equal(est.grid_offsets_, offsets)
    rows_t, _ = _dict_reference(est, X.astype(np.float64), Xt.astype(np.float64))
    assert _rows_of(est.transform(Xt)) == rows_t


# ------------------------------------------------------------------ hashing
def _hash_int_tuples(B):
    """Hashes of integer bin tuples (rows of B) by the compiled kernel (u = 0, δ = 1)."""
    d = B.shape[1]
    U = np.zeros((d, _binning_fast.LANES))
    INV = np.zeros((d, _binning_fast.LANES))
    INV[:, 0] = 1.0
    return _binning_fast.hash_rows_for_test(np.ascontiguousarray(B, dtype=np.float64), U, INV, 1)[:, 0]


@pytest.mark.kernel
def test_one_coordinate_changes_never_collide():
    rng = np.random.default_rng(0)
    n, d = 200_000, 54
    B = rng.integers(-20, 20, size=(n, d)).astype(np.float64)
    B[: n // 4] = rng.integers(-(2**52), 2**52, size=(n // 4, d))  # wide bins too
    B2 = B.copy()
    m = rng.integers(0, d, size=n)
    delta = rng.integers(1, 5, size=n) * rng.choice([-1, 1], size=n)
    delta[: n // 8] = rng.integers(1, 2**52, size=n // 8)
    B2[np.arange(n), m] += delta
    assert np.all(B2[np.arange(n), m] != B[np.arange(n), m])
    h1, h2 = _hash_int_tuples(B), _hash_int_tuples(B2)
    assert not np.any(h1 == h2)
    # distinct random tuples: no collision among all of them either
    assert np.unique(h1).size == np.unique(B, axis=0).shape[0]
    assert int(h1[3]) == _py_hash([int(b) for b in B[3]])


# -------------------------------------------------------------- mathematics
def test_inner_product_counts_shared_grids():
    X = _data(120, 4, seed=3)
    P = 40
    est = RandomBinningFeatures(P, gamma=0.8, random_state=2)
    Z = est.fit_transform(X)
    H = ref.hash_bins(X, est.pitches_, est.offsets_)
    shared = (H[:, None, :] == H[None, :, :]).sum(axis=2)
    G = (Z @ Z.T).toarray() * P
    np.testing.assert_allclose(G, shared, rtol=0, atol=1e-12 * P)
    np.testing.assert_array_equal(np.rint(G).astype(int), shared)
    np.testing.assert_array_equal(np.diag(shared), P)


def test_mean_over_grids_approaches_laplacian_kernel():
    rng = np.random.default_rng(11)
    X = rng.uniform(size=(40, 3))
    gamma = 1.3
    K = laplacian_kernel(X, gamma=gamma)
    iu = np.triu_indices(40, 1)
    errors = {}
    for P in (25, 100, 400, 1600):
        sq = []
        for seed in range(6):  # independent grid draws: average out their correlation across pairs
            Z = RandomBinningFeatures(P, gamma=gamma, random_state=1000 * seed + P).fit_transform(X)
            sq.append(np.mean(((Z @ Z.T).toarray() - K)[iu] ** 2))
        errors[P] = np.sqrt(np.mean(sq))
        # each grid's indicator is Bernoulli(k): the RMS error is
        # sqrt(mean k(1-k)/P) <= 0.5/sqrt(P) if unbiased; allow a factor 1.4
        bound = 1.4 * np.sqrt(np.mean(K[iu] * (1 - K[iu])) / P)
        assert errors[P] < bound, (P, errors[P], bound)
    # 64x more grids: error down about 8x (allow 4x)
    assert errors[1600] < errors[25] / 4


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vocabulary_grouping_does_not_matter(dtype):
    # Grids are built in groups sharing one pass over the rows, or one at a
    # time when a group's sets outgrow their budget: same vocabulary.
    X = _data(3000, 5, seed=13, scale=3.0).astype(dtype)
    P = 21  # two full groups of 8 and a partial one
    est = RandomBinningFeatures(P, gamma=2.0, random_state=0).fit(X)
    n, d = X.shape
    indices, data = np.empty(n * P, dtype=np.int32), np.empty(n * P, dtype=dtype)
    _binning_fast.hash_rows(X, _binning_fast.Grids(est._state.U, est._state.INV, P), indices, data, 2)
    grouped = _binning_fast.build_vocabularies(indices, data, P, 2)
    single = _binning_fast.build_vocabularies(indices, data, P, 2, group_budget=0)
    for a, b in zip(grouped, single):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(grouped[0], est.bin_hashes_)
    assert np.diff(grouped[1]).max() > 512  # a set outgrew its first table: the fallback ran



@pytest.mark.kernel
def test_vocabulary_same_with_fallback_and_reused_blocks():
    # Large vocabularies (about one bin per row): with a 1 MiB budget the
    # groups outgrow it and fall back, later tasks start one grid at a time
    # with the fallen-back set size, and tables of 256 KiB+ are reused from
    # the spare blocks.  None of that may change a vocabulary or a rank.
    X = _data(40_000, 6, seed=5, scale=3.0)
    P = 21
    est = RandomBinningFeatures(P, gamma=50.0, random_state=0).fit(X[:10])
    n = X.shape[0]
    grids = _binning_fast.Grids(est._state.U, est._state.INV, P)
    runs = {}
    for budget in (0, 1 << 20, 1 << 30):
        for n_threads in (1, 2):
            for ranks in (False, True):
                indices, data = np.empty(n * P, dtype=np.int64), np.empty(n * P, dtype=np.float64)
                _binning_fast.hash_rows(X, grids, indices, data, n_threads, grid_major=True)
                vocab = _binning_fast.build_vocabularies(indices, data, P, n_threads, write_ranks=ranks,
                                                         group_budget=budget, grid_major=True)
                # ranks: grid p's at data (as uint32)[2*n*p : 2*n*p + n]
                rank_store = data.view(np.uint32).reshape(P, 2 * n)[:, :n]
                runs[budget, n_threads, ranks] = (vocab, rank_store.copy() if ranks else None)
    assert np.diff(runs[0, 1, False][0][1]).min() > 16_384  # tables of 256 KiB and more
    ref_vocab, ref_ranks = runs[0, 1, True]
    for (vocab, ranks) in runs.values():
        for a, b in zip(vocab, ref_vocab):
            np.testing.assert_array_equal(a, b)
        if ranks is not None:
            np.testing.assert_array_equal(ranks, ref_ranks)


def _crafted_hashes(n, seed=0):
    """(P, n) uint64 hashes, one hard case per grid, for the vocabulary kernels."""
    rng = np.random.default_rng(seed)
    u64 = lambda size: rng.integers(0, 2**64, size=size, dtype=np.uint64)  # noqa: E731
    top = np.uint64(0xFFFFFF0000000000)
    grids = [
        u64(n),  # about one bin per row (sorting)
        rng.choice(np.append(u64(49), np.uint64(0)), size=n),  # 50 bins, hash 0 among them
        # three clusters sharing their top 24 bits: long runs, recursion on lower digits
        (rng.choice(u64(3), size=n) & top) | (u64(n) >> np.uint64(40)),
        # keys differing only in their 4 lowest bits, repeated: digits of one value, skipped
        np.uint64(0xABCDEF0123456780) | rng.integers(0, 16, size=n).astype(np.uint64),
        np.where(rng.random(n) < 0.5, np.uint64(12345), u64(n)),  # one heavy bin, the rest distinct
        np.full(n, np.uint64(0)),  # every row in the bin of hash 0
    ]
    return np.vstack(grids)


def _reference_vocabulary(H):
    """keys, key_offsets, directory, dir_offsets, dir_bits and ranks, as defined (NumPy)."""
    keys, dirs, bits, ranks = [], [], [], []
    for h in H:
        k = np.unique(h)
        b = max(len(k), 1).bit_length()  # the largest b with 2**b <= V, plus one
        starts = np.arange(2**b, dtype=np.uint64) << np.uint64(64 - b)  # of the top-b-bit buckets
        dirs.append(np.append(np.searchsorted(k, starts), len(k)).astype(np.uint32))
        keys.append(k)
        bits.append(b)
        ranks.append(np.searchsorted(k, h).astype(np.uint32))
    offsets = lambda parts: np.concatenate([[0], np.cumsum([len(x) for x in parts])]).astype(np.int64)  # noqa: E731
    return (np.concatenate(keys), offsets(keys), np.concatenate(dirs), offsets(dirs),
            np.array(bits, dtype=np.intc)), np.vstack(ranks)


def _hash_buffers(H, layout):
    """The fit's hash store holding grid-major hashes H (P, n): (indices, data, ranks view)."""
    P, n = H.shape
    flat = np.ascontiguousarray(H).ravel()
    if layout == "f64":  # float64 data holds the hashes and then the ranks
        data = flat.view(np.float64).copy()
        return np.empty(n * P, np.int32), data, lambda: data.view(np.uint32).reshape(P, 2 * n)[:, :n]
    if layout == "f32":  # split: low halves in int32 indices, high halves in float32 data (then ranks)
        indices = (flat & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
        data = (flat >> np.uint64(32)).astype(np.uint32).view(np.float32)
        return indices, data, lambda: data.view(np.uint32).reshape(P, n)
    # int64 indices hold the hashes, float32 data the ranks
    data = np.empty(n * P, np.float32)
    return flat.view(np.int64).copy(), data, lambda: data.view(np.uint32).reshape(P, n)


@pytest.mark.kernel
@pytest.mark.parametrize("layout", ["f64", "f32", "i64"])
def test_vocabulary_paths_on_crafted_hashes(layout):
    # Every way of building a vocabulary (grouped sets, one-grid sets, sorting
    # with its recursion and skipped digits) on hard hash distributions, for
    # every place the fit keeps its hashes and ranks: the definition's result.
    H = _crafted_hashes(20_000)
    P, n = H.shape
    want, want_ranks = _reference_vocabulary(H)
    for strategy, budget in (("auto", 1 << 24), ("auto", 0), ("auto", 1 << 20), ("sets", 1 << 24), ("sort", 1 << 24)):
        for n_threads in (1, 2, 3):
            indices, data, ranks = _hash_buffers(H, layout)
            got = _binning_fast.build_vocabularies(indices, data, P, n_threads, write_ranks=True,
                                                   group_budget=budget, grid_major=True, strategy=strategy)
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b, err_msg=f"{strategy} {budget} {n_threads}")
            np.testing.assert_array_equal(ranks(), want_ranks, err_msg=f"{strategy} {budget} {n_threads}")
    # row-major hashes without ranks (what the Dask backend passes)
    for strategy in ("auto", "sets", "sort"):
        got = _binning_fast.build_vocabularies(np.empty(0, np.int32), np.ascontiguousarray(H.T).ravel(), P, 2,
                                               strategy=strategy)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "csr"])
def test_fit_transform_distinct_bins_matches_reference(dtype, layout):
    # Nearly every row its own bin in every grid: the vocabularies are built
    # by sorting.  Same CSR and vocabulary as the definition, for any n_jobs.
    rng = np.random.default_rng(21)
    X = (rng.uniform(size=(30_000, 20)) * (rng.random((30_000, 20)) < 0.7)).astype(dtype)
    Xt = np.vstack([X[:500], rng.uniform(size=(500, 20)).astype(dtype)])
    if layout == "csr":
        X, Xt = sp.csr_matrix(X), sp.csr_matrix(Xt)
    first = None
    for n_jobs in (1, 2, 3):
        est = RandomBinningFeatures(12, gamma=6.0, random_state=4, n_jobs=n_jobs)
        Z = est.fit_transform(X)
        if first is None:
            Zr, keys, koff = ref.binning_fit_transform(X, est.pitches_, est.offsets_)
            _assert_csr_equal(Z, Zr)
            np.testing.assert_array_equal(est.bin_hashes_, keys)
            np.testing.assert_array_equal(est.grid_offsets_, koff)
            assert est.n_features_out_ > 0.95 * Z.nnz  # the case meant: bins nearly all distinct
            first = (Z, est)
            _assert_csr_equal(est.transform(Xt), ref.binning_transform(Xt, est.pitches_, est.offsets_, keys, koff))
        else:
            _assert_csr_equal(Z, first[0])
            for a, b in zip(est._state.vocabulary, first[1]._state.vocabulary):
                np.testing.assert_array_equal(a, b)
        _assert_csr_equal(clone(est).fit(X).transform(X), Z)


@pytest.mark.kernel
@pytest.mark.parametrize("isa", ["baseline", "avx2", "avx512"])
def test_vector_paths_hash_huge_bins(isa, tmp_path):
    # Bin coordinates up to ~2**62 in magnitude, most beyond 2**51 (where the
    # AVX2 path converts the floor in two exact halves), of both signs.
    rng = np.random.default_rng(8)
    d, P = 9, 11
    X = rng.uniform(-1, 1, size=(600, d)) * np.where(rng.random((600, d)) < 0.7, 4.0e18, 3.0e15)
    U = np.zeros((d, 16))
    INV = np.zeros((d, 16))
    U[:, :P] = rng.uniform(0, 1, size=(d, P))
    INV[:, :P] = rng.uniform(0.5, 1.1, size=(d, P))
    assert np.all(np.abs((X[:, :, None] - U[None, :, :P]) * INV[None, :, :P]) <= 2.0**62)
    np.savez(tmp_path / "in.npz", X=X, U=U, INV=INV)
    code = (
        "import numpy as np\nfrom randfeat._ext import _binning_fast\n"
        f"a = np.load(r'{tmp_path / 'in.npz'}')\n"
        f"H = _binning_fast.hash_rows_for_test(a['X'], a['U'], a['INV'], {P})\n"
        f"np.save(r'{tmp_path / 'H.npy'}', H)\n"
        "print(_binning_fast.vector_isa())\n"
    )
    if run_on_vector_path(code, isa) != isa:
        pytest.skip(f"this CPU has no {isa} path")
    H = np.load(tmp_path / "H.npy")
    np.testing.assert_array_equal(H, _binning_fast.hash_rows_for_test(X, U, INV, P))
    for i in (0, 299, 599):
        for p in (0, 5, 10):
            bins = [math.floor((float(X[i, m]) - U[m, p]) * INV[m, p]) for m in range(d)]
            assert int(H[i, p]) == _py_hash(bins)


# ------------------------------------------------------------ transform side
@pytest.mark.kernel
def test_unseen_bins_give_no_entry():
    X = np.random.default_rng(0).uniform(size=(200, 3))
    est = RandomBinningFeatures(20, gamma=1.0, random_state=0).fit(X)
    far = est.transform(X[:7] + 1e4)
    assert far.shape == (7, est.n_features_out_) and far.nnz == 0
    np.testing.assert_array_equal(far.indptr, 0)
    mixed = est.transform(np.vstack([X[:3], X[:3] + 1e4, X[3:5]]))
    np.testing.assert_array_equal(np.diff(mixed.indptr), [20, 20, 20, 0, 0, 0, 20, 20])
    # partly unseen: nnz between 0 and P per row, columns sorted
    part = est.transform(X[:50] + 0.7)
    counts = np.diff(part.indptr)
    assert counts.min() < 20 and counts.max() > 0
    for i in range(50):
        cols = part.indices[part.indptr[i] : part.indptr[i + 1]]
        assert np.all(np.diff(cols) > 0)


@pytest.mark.kernel
def test_training_row_reproduces_its_features():
    X = _data(300, 5, seed=9)
    est = RandomBinningFeatures(15, random_state=1)
    Z = est.fit_transform(X)
    for i in (0, 123, 299):
        _assert_csr_equal(est.transform(X[i : i + 1]), Z[i])


@pytest.mark.kernel
def test_sorted_int32_indices_and_values():
    X = _data(1000, 7, seed=2)
    Z = RandomBinningFeatures(17, random_state=0).fit_transform(X)
    assert isinstance(Z, sp.csr_matrix) and Z.indices.dtype == np.int32 and Z.indptr.dtype == np.int32
    assert Z.has_canonical_format
    Zc = Z.copy()
    Zc.has_sorted_indices = False
    Zc.sort_indices()
    np.testing.assert_array_equal(Zc.indices, Z.indices)


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_int64_index_path(dtype, monkeypatch):
    # Outputs with >= 2**31 entries use int64 indices (and, for float32, keep
    # the hashes in the indices buffer during fit); force that path on small data.
    import randfeat._maps.binning as binning

    X = _data(800, 6, seed=14).astype(dtype)
    Xt = _data(300, 6, seed=15, scale=1.5).astype(dtype)
    est = RandomBinningFeatures(11, gamma=0.6, random_state=1)
    Z32, Zt32 = est.fit_transform(X), est.transform(Xt)
    monkeypatch.setattr(binning, "_index_dtype", lambda *bounds: np.int64)
    built = []  # index dtypes the kernels wrote (scipy itself downcasts what fits int32)
    real_csr = binning._csr
    monkeypatch.setattr(binning, "_csr", lambda d, i, p, shape: built.append(i.dtype) or real_csr(d, i, p, shape))
    Z64, Zt64 = est.fit_transform(X), est.transform(Xt)
    assert built == [np.int64, np.int64]
    for a, b in ((Z32, Z64), (Zt32, Zt64)):
        np.testing.assert_array_equal(a.indptr, b.indptr)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.data, b.data)


@pytest.mark.kernel
@pytest.mark.parametrize("sparse_input", [False, True])
def test_thread_count_does_not_change_results(sparse_input):
    X = _data(3000, 9, seed=4) * (np.random.default_rng(1).random((3000, 9)) < 0.5)
    Xt = _data(2000, 9, seed=5, scale=1.2)
    if sparse_input:
        X = sp.csr_matrix(X)
    a = RandomBinningFeatures(23, gamma=0.5, random_state=7, n_jobs=1)
    b = RandomBinningFeatures(23, gamma=0.5, random_state=7, n_jobs=2)
    _assert_csr_equal(a.fit_transform(X), b.fit_transform(X))
    np.testing.assert_array_equal(a.bin_hashes_, b.bin_hashes_)
    _assert_csr_equal(a.transform(Xt), b.transform(Xt))


@pytest.mark.kernel
def test_same_seed_same_columns_fit_vs_fit_transform():
    X = _data(500, 6, seed=6)
    est = RandomBinningFeatures(10, random_state=5)
    Z = est.fit_transform(X)
    _assert_csr_equal(clone(est).fit(X).transform(X), Z)
    Z2 = RandomBinningFeatures(10, random_state=np.random.RandomState(5)).fit_transform(X)
    assert Z2.shape[0] == 500 and Z2.nnz == 5000


def test_pickle_round_trip():
    X = _data(400, 5, seed=8)
    est = RandomBinningFeatures(12, gamma=0.3, random_state=2).fit(X)
    est2 = pickle.loads(pickle.dumps(est))
    _assert_csr_equal(est2.transform(X), est.transform(X))


def test_feature_names_out():
    X = _data(50, 3)
    est = RandomBinningFeatures(4, random_state=0).fit(X)
    names = est.get_feature_names_out()
    assert names.shape == (est.n_features_out_,)
    assert names[0] == "randombinningfeatures0"


@pytest.mark.kernel
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_vector_paths_give_identical_results(isa, tmp_path):
    X = _data(700, 13, seed=12, scale=2.0).astype(np.float32)
    est = RandomBinningFeatures(19, gamma=0.9, random_state=3)
    Z = est.fit_transform(X)
    np.save(tmp_path / "X.npy", X)
    code = (
        "import numpy as np, sys\n"
        "from randfeat import RandomBinningFeatures\nfrom randfeat._ext import _binning_fast\n"
        f"X = np.load(r'{tmp_path / 'X.npy'}')\n"
        "Z = RandomBinningFeatures(19, gamma=0.9, random_state=3).fit_transform(X)\n"
        f"np.savez(r'{tmp_path / 'Z.npz'}', indices=Z.indices, indptr=Z.indptr, data=Z.data)\n"
        "print(_binning_fast.vector_isa())\n"
    )
    run_on_vector_path(code, isa)  # never above what the CPU has
    got = np.load(tmp_path / "Z.npz")
    np.testing.assert_array_equal(got["indices"], Z.indices)
    np.testing.assert_array_equal(got["indptr"], Z.indptr)
    np.testing.assert_array_equal(got["data"], Z.data)


# ---------------------------------------------------------------- bad input
def test_unfitted():
    with pytest.raises(NotFittedError):
        RandomBinningFeatures().transform(np.zeros((2, 2)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["fit", "transform"])
def test_nan_inf_rejected(bad, where):
    X = _data(20, 3)
    Xbad = X.copy()
    Xbad[4, 1] = bad
    est = RandomBinningFeatures(5, random_state=0)
    with pytest.raises(ValueError, match="NaN|infinity"):
        if where == "fit":
            est.fit(Xbad)
        else:
            est.fit(X).transform(Xbad)


def test_wrong_width():
    est = RandomBinningFeatures(5, random_state=0).fit(_data(20, 3))
    with pytest.raises(ValueError, match="features"):
        est.transform(_data(5, 4))


# Bad parameters (and the rbf explanation): tests/estimators/test_parameter_validation.py.


@pytest.mark.parametrize("value", [1e20, -1e20, 1e300])
def test_huge_coordinates_rejected(value):
    X = _data(20, 3)
    est = RandomBinningFeatures(5, gamma=1.0, random_state=0)
    Xbad = X.copy()
    Xbad[2, 2] = value
    with pytest.raises(ValueError, match=r"X\[:, 2\].*2\*\*62"):
        est.fit(Xbad)
    with pytest.raises(ValueError, match=r"2\*\*62"):
        est.fit(X).transform(Xbad)
    with pytest.raises(ValueError, match=r"2\*\*62"):
        est.transform(sp.csr_matrix(Xbad))
    # large but representable coordinates are fine
    Z = est.transform(X * 1e6)
    assert Z.shape == (20, est.n_features_out_)


def test_tiny_pitch_rejected():
    with pytest.raises(ValueError, match="gamma"):
        RandomBinningFeatures(3, gamma=1e308, random_state=0).fit(_data(5, 2))


# ------------------------------------------------------------- scikit-learn
@parametrize_with_checks([RandomBinningFeatures(n_grids=7, random_state=0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_show_config_lists_binning():
    import randfeat

    assert randfeat.get_config()["vector_paths"]["_binning_fast"] == _binning_fast.vector_isa()


# -------------------------------------------------------------------- bench
def test_bench_tiny_runs(tmp_path):
    out = run_bench("binning.py", "--tiny", "--out", tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "binning.md").exists() and (tmp_path / "binning.csv").exists()
    text = (tmp_path / "binning.md").read_text()
    assert "fit_transform" in text and "ratio" in text


# ------------------------------------------------------------- gamma="scale"
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gamma_scale_is_the_l1_counterpart_of_rbfsampler(dtype):
    rng = np.random.default_rng(3)
    X = (rng.standard_normal((400, 5)) * 4.0 + 7.0).astype(dtype)
    x64 = X.astype(np.float64)
    expected = 1.0 / (X.shape[1] * np.mean(np.abs(x64 - x64.mean())))
    est = RandomBinningFeatures(20, gamma="scale", random_state=0).fit(X)
    assert est.gamma_ == pytest.approx(expected, rel=1e-12)
    # the features are those of the numeric gamma
    same = RandomBinningFeatures(20, gamma=est.gamma_, random_state=0).fit(X)
    assert est.gamma_ == same.gamma_
    assert (est.transform(X) != same.transform(X)).nnz == 0
    # CSR input: the implicit zeros count
    Xs = sp.random(300, 6, density=0.3, random_state=1, format="csr", dtype=np.float64)
    dense = Xs.toarray()
    want = 1.0 / (6 * np.mean(np.abs(dense - dense.mean())))
    assert RandomBinningFeatures(5, gamma="scale", random_state=0).fit(Xs).gamma_ == pytest.approx(want, rel=1e-12)
    # a constant X gives 1.0, as scikit-learn's rule does
    assert RandomBinningFeatures(5, gamma="scale", random_state=0).fit(np.full((10, 2), 3.0)).gamma_ == 1.0
    # for i.i.d. Gaussian entries gamma·E‖x − y‖₁ = √2
    Z = rng.standard_normal((4000, 8))
    g = RandomBinningFeatures(5, gamma="scale", random_state=0).fit(Z).gamma_
    pairs = np.abs(Z[:2000] - Z[2000:]).sum(axis=1)
    assert g * pairs.mean() == pytest.approx(np.sqrt(2.0), rel=0.03)


def test_gamma_scale_bad_values():
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="gamma"):
        RandomBinningFeatures(gamma="auto").fit(np.ones((3, 2)))
    with pytest.raises(ValueError, match="gamma='scale' needs 1 / \\(n_features \\* mean"):
        RandomBinningFeatures(gamma="scale").fit(np.array([[0.0, 1e-310], [1e-310, 0.0]]))
