"""Issue 25 on Dask input: every block validated where it is read, as in memory; a lost worker survived or named.

Items: (1) malformed CSR blocks raise the in-memory ValueError at every
entry point, checked on the worker before compiled code reads them; (9) a
block whose real shape differs from its declared chunk is refused, never
silently truncated; (10) a worker lost during a CG fit: the blocks are
recomputed and the fit retried once, else a clear error; (11) NaN and
infinity in a block give the in-memory messages (binning, gamma="scale",
every fit); (12) ``RandomBinningFeatures.fit`` on CSR blocks equals the
in-memory fit on the same CSR; (14) a scalar ``sample_weight`` is
accepted, as scikit-learn accepts it in memory.
"""

import re

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

ROWS, D = (40, 50, 30), 8  # three blocks


def _dense(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((sum(ROWS), D))
    X[X < 0.3] = 0.0
    return X, X @ np.arange(1.0, D + 1) + 0.1 * rng.standard_normal(sum(ROWS))


def _blocks(X):
    bounds = np.cumsum((0,) + ROWS)
    return [X[s:e] for s, e in zip(bounds[:-1], bounds[1:])]


def _broken(block, fault):
    """``block`` as a csr_matrix whose index arrays were broken after construction (as a hand-built one)."""
    Z = sp.csr_matrix(block)
    if fault == "column 100000":
        Z.indices[3] = 100_000
    elif fault == "column -1":
        Z.indices[3] = -1
    elif fault == "column 2e9":
        Z.indices[3] = 2_000_000_000
    elif fault == "decreasing indptr":
        Z.indptr[5] = Z.indptr[7] + 1
    elif fault == "indptr past indices":
        Z.indptr[-1] = Z.indices.shape[0] + 10
    return Z


def _dask_csr(X, bad_block=None, fault=None):
    """X as a Dask array of CSR blocks (made on the worker); block ``bad_block`` broken by ``fault``."""
    make = dask.delayed(lambda b, broken: _broken(b, fault) if broken else sp.csr_matrix(b), pure=True)
    parts = [da.from_delayed(make(b, i == bad_block), shape=b.shape, dtype=np.float64,
                             meta=sp.csr_matrix((0, 0), dtype=np.float64)) for i, b in enumerate(_blocks(X))]
    return da.concatenate(parts, axis=0)


def _y(y):
    return da.from_array(y, chunks=(ROWS,))


FAULTS = ["column 100000", "column -1", "column 2e9", "decreasing indptr", "indptr past indices"]

# Each entry point: (in-memory call on a CSR, Dask call on a Dask CSR array) — computed where lazy.
_, _Y = _dense()
ENTRIES = {
    "Ridge.fit (CG blocks)": lambda X, y: Ridge().fit(X, y),
    "Ridge.fit (statistics)": lambda X, y: Ridge(solver="cholesky").fit(X, y),
    "Ridge(features=Fourier).fit": lambda X, y: Ridge(features=RandomFourierFeatures(20, random_state=0)).fit(X, y),
    "Ridge(features=binning).fit": lambda X, y: Ridge(features=RandomBinningFeatures(5, random_state=0)).fit(X, y),
    "RidgeClassifier.fit (CG)": lambda X, y: RidgeClassifier(solver="cg").fit(X, _labels(y)),
    "RandomBinningFeatures.fit": lambda X, y: RandomBinningFeatures(5, random_state=0).fit(X),
    "Fourier transform": lambda X, y: _computed(RandomFourierFeatures(20, random_state=0).fit(_dense()[0]).transform(X)),
    "binning transform": lambda X, y: _computed(RandomBinningFeatures(5, random_state=0).fit(_dense()[0]).transform(X)),
    "Ridge.predict": lambda X, y: _computed(Ridge().fit(_dense()[0], _Y).predict(X)),
}


def _labels(y):
    return (y > 0).astype(int) if isinstance(y, np.ndarray) else (y > 0).astype(int)


def _computed(out):
    return out.compute() if isinstance(out, da.Array) else out


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("fault", FAULTS)
def test_item1_malformed_csr_block_raises_the_in_memory_error(sync, entry, fault):
    X, y = _dense()
    bad = _blocks(X)[1]
    with pytest.raises(ValueError, match="is not a valid sparse matrix") as in_memory:
        ENTRIES[entry](_broken(bad, fault), y[ROWS[0]:ROWS[0] + ROWS[1]])
    with pytest.raises(ValueError, match="is not a valid sparse matrix") as on_dask:
        ENTRIES[entry](_dask_csr(X, bad_block=1, fault=fault), _y(y))
    assert str(on_dask.value) == str(in_memory.value)


def test_item1_valid_csr_blocks_fit_as_in_memory(sync):
    X, y = _dense()
    ref = Ridge(tol=1e-12, preconditioner="jacobi").fit(sp.csr_matrix(X), y)
    est = Ridge(tol=1e-12, preconditioner="jacobi").fit(_dask_csr(X), _y(y))
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


def test_item1_checked_on_the_worker(cluster_client):
    X, y = _dense()
    with pytest.raises(ValueError, match=r"indices\[3\] = 100000 is >= n_features = 8"):
        Ridge().fit(_dask_csr(X, bad_block=2, fault="column 100000"), _y(y))
    with pytest.raises(ValueError, match=r"indices\[3\] = -1 is negative"):
        RandomBinningFeatures(5, random_state=0).fit(_dask_csr(X, bad_block=0, fault="column -1"))


# ------------------------------------------------- item 9: blocks that lie
def _lying(A, rows):
    """A with block 1's real rows changed by ``rows`` (a map_blocks that keeps the declared chunks)."""
    def change(b, block_id=None):
        if block_id[0] != 1:
            return b
        return b[:rows] if rows < 0 else np.concatenate([b, b[:rows]])
    return A.map_blocks(change, dtype=A.dtype)


@pytest.mark.parametrize("rows", [-2, 3])
@pytest.mark.parametrize("call", [
    lambda X, y: Ridge(features=RandomFourierFeatures(20, random_state=0)).fit(X, y),
    lambda X, y: Ridge(alpha=1.0).fit(X, y),
    lambda X, y: Ridge(solver="cg").fit(X, y),
    lambda X, y: Ridge(features=RandomBinningFeatures(5, random_state=0)).fit(X, y),
    lambda X, y: RandomBinningFeatures(5, random_state=0).fit(X),
    lambda X, y: RandomFourierFeatures(5, random_state=0).fit(X).transform(X).compute(),
    lambda X, y: Ridge().fit(_dense()[0], _Y).predict(X).compute(),
], ids=["Fourier features", "statistics", "CG", "binning features", "binning fit", "transform", "predict"])
def test_item9_block_with_other_rows_than_declared_is_refused(sync, rows, call):
    X, y = _dense()
    Xd = da.from_array(X, chunks=(ROWS, D))
    with pytest.raises(ValueError, match=r"block 1 of X \(rows 40:90\) has shape \(\d+, 8\), but X's Dask chunks "
                                         r"declare \(50, 8\)"):
        call(_lying(Xd, rows), _y(y))


@pytest.mark.parametrize("features", [None, RandomFourierFeatures(20, random_state=0),
                                      RandomBinningFeatures(5, random_state=0)])
def test_item9_target_and_weight_blocks_are_checked_too(sync, features):
    X, y = _dense()
    Xd = da.from_array(X, chunks=(ROWS, D))
    with pytest.raises(ValueError, match=r"block 1 of y \(rows 40:90\) has shape \(48,\), but y's Dask chunks"):
        Ridge(features=features).fit(Xd, _lying(_y(y), -2))
    with pytest.raises(ValueError, match=r"block 1 of sample_weight \(rows 40:90\) has shape \(53,\)"):
        Ridge(features=features).fit(Xd, _y(y), sample_weight=_lying(_y(np.ones_like(y)), 3))


# -------------------------------------------------- item 11: NaN and infinity
def _with(value):
    X, y = _dense()
    X[70, 2] = value
    return X, y


@pytest.mark.parametrize("value, message", [(np.nan, "Input X contains NaN"), (np.inf, "Input X contains infinity"),
                                            (-np.inf, "Input X contains infinity")])
@pytest.mark.parametrize("call", [
    lambda X, y: RandomBinningFeatures(5, random_state=0).fit(X),
    lambda X, y: RandomBinningFeatures(5, gamma="scale", random_state=0).fit(X),
    lambda X, y: RandomFourierFeatures(5, gamma="scale", random_state=0).fit(X),
    lambda X, y: Ridge(features=RandomBinningFeatures(5, random_state=0)).fit(X, y),
    lambda X, y: Ridge(features=RandomFourierFeatures(5, gamma="scale", random_state=0)).fit(X, y),
    lambda X, y: Ridge(solver="cg").fit(X, y),
    lambda X, y: Ridge().fit(X, y),
], ids=["binning", "binning scale", "Fourier scale", "Ridge binning", "Ridge Fourier scale", "CG", "Cholesky"])
def test_item11_nan_and_inf_give_the_in_memory_message(sync, value, message, call):
    X, y = _with(value)
    with pytest.raises(ValueError, match=message) as in_memory:
        call(X, y)
    for sparse in (False, True):
        Xd = _dask_csr(X) if sparse else da.from_array(X, chunks=(ROWS, D))
        with pytest.raises(ValueError, match=message) as on_dask:
            call(Xd, _y(y))
        assert str(on_dask.value) == str(in_memory.value)


# -------------------------------------------- item 12: binning on CSR blocks
@pytest.mark.parametrize("gamma", [0.5, "scale"])
def test_item12_binning_fit_on_csr_blocks_equals_in_memory(sync, gamma):
    X, y = _dense()
    Xs = sp.csr_matrix(X)
    ref = RandomBinningFeatures(6, gamma=gamma, random_state=0).fit(Xs)
    est = RandomBinningFeatures(6, gamma=gamma, random_state=0).fit(_dask_csr(X))
    assert est.gamma_ == pytest.approx(ref.gamma_, rel=1e-12)
    if gamma == "scale":  # the same grids at the same gamma
        ref = RandomBinningFeatures(6, gamma=est.gamma_, random_state=0).fit(Xs)
    np.testing.assert_array_equal(est.bin_hashes_, ref.bin_hashes_)
    np.testing.assert_array_equal(est.grid_offsets_, ref.grid_offsets_)
    assert (est.transform(_dask_csr(X)).compute() != ref.transform(Xs)).nnz == 0
    kw = dict(features=RandomBinningFeatures(6, gamma=0.5, random_state=0), tol=1e-12, preconditioner="block")
    np.testing.assert_allclose(Ridge(**kw).fit(_dask_csr(X), _y(y)).coef_, Ridge(**kw).fit(Xs, y).coef_,
                               rtol=1e-9, atol=1e-12)


def test_item12_fourier_gamma_scale_on_csr_blocks(sync):
    X, _ = _dense()
    ref = RandomFourierFeatures(6, gamma="scale", random_state=0).fit(sp.csr_matrix(X))
    assert RandomFourierFeatures(6, gamma="scale", random_state=0).fit(_dask_csr(X)).gamma_ == pytest.approx(
        ref.gamma_, rel=1e-12)


# ------------------------------------------- item 14: a scalar sample_weight
@pytest.mark.parametrize("weight", [2.5, 3, np.float32(0.5)])
@pytest.mark.parametrize("kw", [dict(), dict(solver="cg", tol=1e-12, preconditioner="jacobi"),
                                dict(features=RandomFourierFeatures(20, random_state=0))])
def test_item14_scalar_sample_weight_as_in_memory(sync, weight, kw):
    X, y = _dense()
    ref = Ridge(**kw).fit(X, y, sample_weight=weight)
    est = Ridge(**kw).fit(da.from_array(X, chunks=(ROWS, D)), _y(y), sample_weight=weight)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-9)


@pytest.mark.parametrize("weight", [0.0, -1.0, np.nan, 1e308])
def test_item14_bad_scalar_sample_weight_gives_the_in_memory_message(sync, weight):
    X, y = _dense()
    with pytest.raises(ValueError) as in_memory:
        Ridge().fit(X, y, sample_weight=weight)
    with pytest.raises(ValueError) as on_dask:
        Ridge().fit(da.from_array(X, chunks=(ROWS, D)), _y(y), sample_weight=weight)
    assert str(on_dask.value) == str(in_memory.value)


# ------------------------------------------ item 10: a worker lost mid-fit
@pytest.fixture
def threads_cluster():
    # In-process workers: the test can close one from inside the fit (dask_blocks.FAULT_HOOK).
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield cluster, client


def _spread(client, X, y, rows=150):
    """X and y in blocks persisted alternately on the two workers (loosely: a lost one can be recomputed)."""
    workers = sorted(client.scheduler_info()["workers"])
    xs, ys = [], []
    for i, s in enumerate(range(0, X.shape[0], rows)):
        where = dict(workers=[workers[i % 2]], allow_other_workers=True)
        xs.append(client.persist(da.from_array(X[s:s + rows], chunks=(rows, X.shape[1])), **where))
        ys.append(client.persist(da.from_array(y[s:s + rows], chunks=rows), **where))
    return da.concatenate(xs), da.concatenate(ys)


def _cg_data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((600, 5))
    return X, np.sin(X).sum(axis=1)


CG_KW = dict(features=RandomBinningFeatures(8, random_state=0), tol=1e-10, preconditioner="block")


def test_item10_worker_closed_mid_fit_blocks_recomputed_and_fit_retried(threads_cluster, monkeypatch, capsys):
    from randfeat._backends import dask_blocks

    cluster, client = threads_cluster
    X, y = _cg_data()
    Xd, yd = _spread(client, X, y)
    with dask.config.set(scheduler="synchronous"):  # the same blocks and reduction tree, in one process
        ref = Ridge(**CG_KW).fit(da.from_array(X, chunks=(150, 5)), da.from_array(y, chunks=150))
    calls = []

    def close_the_other_worker(fn):
        calls.append(fn)
        if len(calls) == 10:  # during the iterations (after the set-up's reductions)
            me = distributed.get_worker().address
            victim = next(w for w in cluster.workers.values() if w.address != me)
            distributed.utils.sync(victim.loop, victim.close)

    monkeypatch.setattr(dask_blocks, "FAULT_HOOK", close_the_other_worker)
    est = Ridge(verbose=True, **CG_KW).fit(Xd, yd)
    assert len(client.scheduler_info()["workers"]) == 1
    # The scheduler or the root worker says first that the store's worker is gone.
    assert re.search(r"a worker was lost \((RuntimeError: Worker holding Actor was lost|LostBlocks: a worker "
                     r"holding row blocks was lost.*)\): recomputing the row blocks and retrying once",
                     capsys.readouterr().err)
    np.testing.assert_array_equal(est.coef_, ref.coef_)  # recomputed blocks, the same tree: the same bits
    np.testing.assert_array_equal(est.n_iter_, ref.n_iter_)


def test_item10_lost_again_raises_a_clear_error(threads_cluster, monkeypatch):
    from randfeat._backends import dask_blocks

    _, client = threads_cluster
    X, y = _cg_data()
    Xd, yd = _spread(client, X, y)
    est = Ridge(**CG_KW)

    def lost(fn):
        raise OSError("injected: the connection to a worker closed")

    monkeypatch.setattr(dask_blocks, "FAULT_HOOK", lost)
    with pytest.raises(RuntimeError, match=r"Ridge: the Dask cluster lost a worker holding row blocks during the CG "
                                           r"fit \(OSError: injected.*retried once, and a worker was lost again"):
        est.fit(Xd, yd)

    def broken(fn):
        raise ValueError("not a lost worker")

    monkeypatch.setattr(dask_blocks, "FAULT_HOOK", broken)  # the fit's own errors are not retried
    with pytest.raises(ValueError, match="not a lost worker"):
        est.fit(Xd, yd)
