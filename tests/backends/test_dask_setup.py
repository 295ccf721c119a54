"""The Dask fit's set-up steps: block vocabularies, their merge, the column range pass, the Gram block's sums.

Each faster step is checked against the slow NumPy reference it replaced
(``np.unique`` per grid, ``np.union1d``, Dask's own ``min``/``max``, a
fresh-array tree sum), and its result against the in-memory fit.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from randfeat import RandomBinningFeatures

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


def _hashes(rbf, X):
    """Each grid's bins of X's rows, from the kernel's test hook (the slow reference's input)."""
    from randfeat._ext import _binning_fast

    st = rbf._state
    P = st.n_grids
    return _binning_fast.hash_rows_for_test(np.ascontiguousarray(X, dtype=np.float64), st.U, st.INV, P)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_block_vocabulary_is_each_grids_sorted_unique_bins(dtype):
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((3000, 5)) * 3).astype(dtype)
    rbf = RandomBinningFeatures(n_grids=7, gamma=0.5, random_state=0).fit(X)
    for rows in (X[:1], X[:37], X[1000:2500]):
        vocabulary = rbf._block_vocabulary(rbf._state, rows)
        hashes = _hashes(rbf, rows).reshape(rows.shape[0], -1)[:, :7]
        assert len(vocabulary) == 7
        for p in range(7):
            assert vocabulary[p].dtype == np.uint64
            np.testing.assert_array_equal(vocabulary[p], np.unique(hashes[:, p]))
    empty = rbf._block_vocabulary(rbf._state, X[:0])
    assert len(empty) == 7 and all(v.size == 0 for v in empty)


def test_merged_vocabularies_are_the_sorted_unions():
    rng = np.random.default_rng(1)
    big = np.iinfo(np.uint64).max
    cases = [
        (np.empty(0, np.uint64), np.empty(0, np.uint64)),
        (np.array([3, 9], np.uint64), np.empty(0, np.uint64)),
        (np.empty(0, np.uint64), np.array([5], np.uint64)),
        (np.array([1, 2, 3], np.uint64), np.array([1, 2, 3], np.uint64)),  # identical
        (np.array([1, 5, 9], np.uint64), np.array([2, 6, 10], np.uint64)),  # interleaved, disjoint
        (np.array([0, big - 1, big], np.uint64), np.array([0, big], np.uint64)),  # the extremes of uint64
    ]
    for _ in range(20):
        cases.append(tuple(np.unique(rng.integers(0, 2**63, size=rng.integers(0, 300), dtype=np.uint64) % 500)
                           for _ in range(2)))
    merged = RandomBinningFeatures._merge_vocabularies([a for a, _ in cases], [b for _, b in cases])
    for (a, b), m in zip(cases, merged):
        assert m.dtype == np.uint64
        np.testing.assert_array_equal(m, np.union1d(a, b))


@pytest.mark.parametrize("sparse", [False, True])
def test_column_range_pass_equals_the_in_memory_extremes(sync, sparse):
    from randfeat._backends.dask_input import DaskSummary, row_blocks

    rng = np.random.default_rng(2)
    X = rng.standard_normal((500, 4)) * [1.0, 10.0, 0.1, 3.0] + [0.0, -5.0, 7.0, 0.0]
    X[rng.random(X.shape) < 0.3] = 0.0
    Xd = da.from_array(X, chunks=((200, 1, 150, 149), (3, 1)))  # uneven rows, one single-row block, split columns
    if sparse:
        Xd = Xd.map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 0)))
    lo, hi = DaskSummary(row_blocks(Xd)).column_range()
    np.testing.assert_array_equal(lo, X.min(axis=0))
    np.testing.assert_array_equal(hi, X.max(axis=0))
    assert lo.dtype == hi.dtype == np.float64


def test_column_range_pass_checks_every_block(sync):
    from randfeat._backends.dask_input import DaskSummary, row_blocks

    X = np.random.default_rng(3).standard_normal((300, 3))
    X[250, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DaskSummary(row_blocks(da.from_array(X, chunks=100))).column_range()


def test_gram_block_tree_sums_in_place_are_the_fresh_sums():
    # The Gram block's tree adds into its leaves' fresh arrays: the same bits
    # as fresh sums, and a read-only partial sum (received from a store) is
    # never written.
    from randfeat._backends import dask_blocks
    from randfeat._backends.tree import ReductionTree

    rng = np.random.default_rng(4)
    leaves = [rng.standard_normal((6, 6)) * 10.0 ** rng.integers(-8, 8) for _ in range(7)]
    tree = ReductionTree(len(leaves))
    combine = dask_blocks._combine(dask_blocks._b_gram_block)
    fresh = ReductionTree.evaluate(tree.root, lambda i: leaves[i].copy(), lambda a, b: a + b)
    in_place = ReductionTree.evaluate(tree.root, lambda i: leaves[i].copy(), combine)
    np.testing.assert_array_equal(in_place, fresh)
    received = leaves[0].copy()
    received.flags.writeable = False
    out = combine(received, leaves[1].copy())
    np.testing.assert_array_equal(received, leaves[0])
    np.testing.assert_array_equal(out, leaves[0] + leaves[1])
