"""Dask arrays end to end: features, Ridge and pipelines on the synchronous scheduler and a LocalCluster.

Each result is compared with the same estimator on the NumPy array
(features bit-identical in float64, coefficients within 1e-10 relative).
The cluster tests are few (the CI budget is tight); the synchronous
scheduler runs the same code paths without processes.
"""

import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier

from _subprocess_env import subprocess_env

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")


def test_importing_randfeat_does_not_import_dask():
    code = "import sys, randfeat; randfeat.Ridge(); assert 'dask' not in sys.modules, 'dask imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=subprocess_env())


def _close(a, b, rtol=1e-10):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    assert np.abs(a - b).max() <= rtol * max(np.abs(b).max(), 1e-300)


def _data(n=700, d=6, seed=0, k=None):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + 2.0
    y = np.sin(X).sum(axis=1) if k is None else np.sin(X) @ rng.standard_normal((d, k))
    return X, y, rng.uniform(0.2, 2.0, n)


CHUNKS = ((250, 1, 300, 149), (4, 2))  # uneven rows (one single-row block), columns split


# ------------------------------------------------------------------ features
@pytest.mark.parametrize("n_components", [40, 41])
def test_fourier_transform_lazy_and_bit_identical(sync, n_components):
    X, _, _ = _data()
    Xd = da.from_array(X, chunks=CHUNKS)
    rff = RandomFourierFeatures(n_components, gamma=1.0, random_state=np.random.default_rng(5))  # any random_state:
    ref = clone(rff).fit(X)  # the map is drawn on the client, workers only apply it
    rff.fit(Xd)
    np.testing.assert_array_equal(rff.random_weights_, ref.random_weights_)
    Z = rff.transform(Xd)
    assert isinstance(Z, da.Array)
    assert Z.shape == (700, n_components) and Z.chunks == (CHUNKS[0], (n_components,))
    assert Z.dtype == np.float64 and type(Z._meta) is np.ndarray
    np.testing.assert_array_equal(Z.compute(), ref.transform(X))
    np.testing.assert_array_equal(Z[:, -3:].compute(), ref.transform(X)[:, -3:])  # declared width is right
    # (a Generator random_state is consumed by fit: compare fit_transform with an int seed)
    rff3 = RandomFourierFeatures(n_components, gamma=1.0, random_state=3)
    np.testing.assert_array_equal(clone(rff3).fit_transform(Xd).compute(), rff3.fit_transform(X))


def test_fourier_gamma_scale_and_float32(sync):
    X, _, _ = _data()
    X32 = (X * 3).astype(np.float32)
    rff = RandomFourierFeatures(30, gamma="scale", random_state=0)
    ref = clone(rff).fit(X32)
    rff.fit(da.from_array(X32, chunks=(512, 6)))
    assert rff.gamma_ == pytest.approx(ref.gamma_, rel=1e-6)
    # float32 features are bit-identical to the in-memory ones for any blocks
    ref.set_params(gamma=rff.gamma_).fit(X32)
    for chunks in ((512, 6), CHUNKS):
        Z = rff.transform(da.from_array(X32, chunks=chunks))
        assert Z.dtype == np.float32
        np.testing.assert_array_equal(Z.compute(), ref.transform(X32))


def test_transform_bad_input(sync):
    X, _, _ = _data()
    rff = RandomFourierFeatures(10, gamma=1.0, random_state=0).fit(X)
    with pytest.raises(ValueError, match="expecting 6 features"):
        rff.transform(da.from_array(X[:, :4]))
    Xd = da.from_array(X, chunks=100)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        rff.transform(Xd[Xd[:, 0] > 2])
    Xnan = X.copy()
    Xnan[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        rff.transform(da.from_array(Xnan, chunks=100)).compute()


# --------------------------------------------------------------------- ridge
@pytest.mark.parametrize("features", [None, RandomFourierFeatures(50, gamma=0.2, random_state=1)])
@pytest.mark.parametrize("k", [None, 1, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_ridge_fit_equals_in_memory(sync, features, k, weighted):
    X, y, w = _data(k=k)  # k=1: y of shape (n, 1)
    est = Ridge(alpha=0.3, features=features, chunk_size=128)
    ref = clone(est).fit(X, y, sample_weight=w if weighted else None)
    Xd = da.from_array(X, chunks=CHUNKS)
    yd = da.from_array(y, chunks=(CHUNKS[0],) + y.shape[1:])
    wd = w if not weighted else da.from_array(w, chunks=(CHUNKS[0],))  # NumPy y/w are aligned to X
    est.fit(Xd, yd, sample_weight=wd if weighted else None)
    assert np.shape(est.coef_) == np.shape(ref.coef_) and np.shape(est.intercept_) == np.shape(ref.intercept_)
    _close(est.coef_, ref.coef_)
    _close(est.intercept_, ref.intercept_)
    _close(est.noise_variance_, ref.noise_variance_)
    pred = est.predict(Xd)
    assert isinstance(pred, da.Array) and pred.shape == ref.predict(X).shape and pred.chunks[0] == CHUNKS[0]
    _close(pred.compute(), ref.predict(X))
    mean, std = est.predict(Xd, return_std=True)
    _close(std.compute(), ref.predict(X, return_std=True)[1])
    score = est.score(Xd, yd)
    assert isinstance(score, float)
    assert score == pytest.approx(ref.score(X, y), rel=1e-10)


def test_ridge_numpy_targets_and_zero_weight_blocks(sync):
    X, y, w = _data()
    w[:250] = 0.0  # the first block weighs nothing
    ref = Ridge(alpha=0.1, fit_intercept=False).fit(X, y, sample_weight=w)
    est = Ridge(alpha=0.1, fit_intercept=False).fit(da.from_array(X, chunks=CHUNKS), y, sample_weight=w)
    _close(est.coef_, ref.coef_)


@pytest.mark.parametrize("labels", [["no", "yes"], ["a", "b", "c"]])
def test_classifier_equals_in_memory(sync, labels):
    X, _, _ = _data()
    y = np.array(labels)[np.argmax(X[:, : len(labels)], axis=1)]
    est = RidgeClassifier(alpha=0.5, features=RandomFourierFeatures(30, gamma=1.0, random_state=2))
    ref = clone(est).fit(X, y)
    Xd, yd = da.from_array(X, chunks=CHUNKS), da.from_array(y, chunks=(CHUNKS[0],))
    est.fit(Xd, yd)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    _close(est.coef_, ref.coef_)
    scores = est.decision_function(Xd)
    assert isinstance(scores, da.Array) and scores.shape == ref.decision_function(X).shape
    _close(scores.compute(), ref.decision_function(X))
    pred = est.predict(Xd)
    assert isinstance(pred, da.Array) and pred.dtype == ref.predict(X).dtype
    np.testing.assert_array_equal(pred.compute(), ref.predict(X))
    assert est.score(Xd, yd) == ref.score(X, y)


def test_ridge_bad_input_leaves_model_unchanged(sync):
    X, y, _ = _data()
    est = Ridge().fit(X, y)
    coef = est.coef_.copy()
    Xd = da.from_array(X, chunks=100)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        est.fit(Xd[Xd[:, 0] > 2], y[:10])
    with pytest.raises(ValueError, match=r"y's row chunks .* differ from X's"):
        est.fit(Xd, da.from_array(y, chunks=70))
    with pytest.raises(ValueError, match="y has 10 rows but X has 700"):
        est.fit(Xd, y[:10])
    with pytest.raises(ValueError, match="sample_weight is zero for every sample"):
        clone(est).set_params(solver="cg").fit(Xd, y, sample_weight=np.zeros(700))
    Xnan = X.copy()
    Xnan[650, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        est.fit(da.from_array(Xnan, chunks=100), y)
    np.testing.assert_array_equal(est.coef_, coef)


# --------------------------------------------------------- on a LocalCluster
def test_cluster_pipeline_end_to_end(cluster_client):
    X, y, w = _data(n=3000)
    Xd = da.from_array(X, chunks=(700, 6))
    yd, wd = da.from_array(y, chunks=700), da.from_array(w, chunks=700)
    pipe = make_pipeline(RandomFourierFeatures(60, gamma=1.0, random_state=0), Ridge(alpha=0.2))
    ref = clone(pipe).fit(X, y, ridge__sample_weight=w)
    pipe.fit(Xd, yd, ridge__sample_weight=wd)
    _close(pipe[-1].coef_, ref[-1].coef_)
    pred = pipe.predict(Xd)
    assert isinstance(pred, da.Array)
    _close(pred.compute(), ref.predict(X))
    # Ridge(features=...) makes the features on the workers: the same model
    est = Ridge(alpha=0.2, features=RandomFourierFeatures(60, gamma=1.0, random_state=0)).fit(Xd, yd, sample_weight=wd)
    _close(est.coef_, ref[-1].coef_)
    # the same model predicts the same bits on the workers (1-thread processes) and on the client
    np.testing.assert_array_equal(est.predict(Xd).compute(), est.predict(X))
    np.testing.assert_array_equal(pipe.predict(Xd).compute(), pipe.predict(X))


def test_cluster_classifier_and_client_memory(cluster_client):
    # 1 GB of rows made and held on the workers; the fit must not bring them to the client.
    n, d = 2_500_000, 50
    Xd = da.random.default_rng(0).standard_normal((n, d), chunks=(250_000, d)).persist()
    yd = (Xd[:, 0] + Xd[:, 1] > 0).persist()
    distributed.wait([Xd, yd])
    assert Xd.nbytes == 10**9
    tracemalloc.start()
    try:
        clf = RidgeClassifier(alpha=1.0).fit(Xd, yd)
        acc = clf.score(Xd, yd)  # brings the n predictions (2.5 MB of bools), never X
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30 * 2**20, f"client allocated {peak / 2**20:.0f} MB while fitting 1 GB held on the workers"
    assert acc > 0.95
    # the first block alone, fitted on the client and on the cluster: the same model
    X0, y0 = Xd[:250_000].compute(), yd[:250_000].compute()
    ref = RidgeClassifier(alpha=1.0).fit(X0, y0)
    _close(RidgeClassifier(alpha=1.0).fit(Xd[:250_000], yd[:250_000]).coef_, ref.coef_)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_binning_fit_from_block_vocabularies_and_lazy_csr(sync, dtype):
    import scipy.sparse as sp

    X = _data()[0].astype(dtype)
    ref = RandomBinningFeatures(n_grids=6, gamma=1.0, random_state=0).fit(X)
    rbf = RandomBinningFeatures(n_grids=6, gamma=1.0, random_state=0).fit(da.from_array(X, chunks=CHUNKS))
    np.testing.assert_array_equal(rbf.bin_hashes_, ref.bin_hashes_)  # merged vocabulary = in-memory one
    np.testing.assert_array_equal(rbf.grid_offsets_, ref.grid_offsets_)
    Z = rbf.transform(da.from_array(X, chunks=CHUNKS))
    assert isinstance(Z, da.Array) and isinstance(Z._meta, sp.csr_matrix)
    assert Z.shape == (700, ref.n_features_out_) and Z.chunks[0] == CHUNKS[0] and Z.dtype == dtype
    Zc = Z.compute()
    assert sp.issparse(Zc) and (Zc != ref.transform(X)).nnz == 0
    Zft = RandomBinningFeatures(n_grids=6, gamma=1.0, random_state=0).fit_transform(da.from_array(X, chunks=200))
    assert (Zft.compute() != ref.fit_transform(X)).nnz == 0
    # grids are drawn on the client: a Generator random_state works (workers draw nothing)
    g1 = RandomBinningFeatures(n_grids=3, gamma=1.0, random_state=np.random.default_rng(4)).fit(da.from_array(X, chunks=100))
    g2 = RandomBinningFeatures(n_grids=3, gamma=1.0, random_state=np.random.default_rng(4)).fit(X)
    np.testing.assert_array_equal(g1.bin_hashes_, g2.bin_hashes_)
    # Ridge on the lazy sparse blocks: CG on the workers, the in-memory model
    y = np.sin(X.astype(np.float64)).sum(axis=1)
    est = Ridge(tol=1e-10).fit(Z, da.from_array(y, chunks=(CHUNKS[0],)))
    # In memory, "auto" factors the dual and CG iterates in it ("cg-dual",
    # reported since issue 36; the workers' CG is primal): the same solution.
    ref_est = Ridge(tol=1e-10, solver="cg").fit(Zc, y)
    assert est.solver_ == "cg" and ref_est.solver_ in ("cg", "cg-dual")
    _close(est.coef_, ref_est.coef_, rtol=1e-6 if dtype == np.float32 else 1e-8)


def test_binning_bin_range_checked_on_dask_input(sync):
    X = _data()[0]
    X[400, 2] = 1e300
    with pytest.raises(ValueError, match="exceeds 2\\*\\*62"):
        RandomBinningFeatures(gamma=1.0, random_state=0).fit(da.from_array(X, chunks=100))


def test_cluster_binning_vocabulary(cluster_client):
    X = _data(n=2000)[0]
    ref = RandomBinningFeatures(n_grids=5, gamma=1.0, random_state=1).fit(X)
    rbf = RandomBinningFeatures(n_grids=5, gamma=1.0, random_state=1).fit(da.from_array(X, chunks=450))
    np.testing.assert_array_equal(rbf.bin_hashes_, ref.bin_hashes_)
    assert (rbf.transform(da.from_array(X, chunks=450)).compute() != ref.transform(X)).nnz == 0


# ------------------------------------------------------ CG on the workers
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("k", [None, 3])
def test_ridge_cg_on_binning_features_equals_in_memory(sync, fit_intercept, weighted, k):
    # Sparse features are made and held on the workers; CG's products run
    # there (one map and one block-order reduction per iteration).  The
    # sums are grouped differently from the in-memory products, so the two
    # solutions agree to CG's tolerance, not bitwise.  (An explicit
    # preconditioner: with "auto" the in-memory fit of these few rows would
    # iterate in the dual, which the workers' operator does not offer.)
    X, y, w = _data(n=900, k=k)
    w = w if weighted else None
    kw = dict(alpha=0.5, features=RandomBinningFeatures(n_grids=12, gamma=1.0, random_state=0), fit_intercept=fit_intercept,
              tol=1e-12, preconditioner="block")
    ref = Ridge(**kw).fit(X, y, sample_weight=w)
    Xd = da.from_array(X, chunks=((300, 1, 450, 149), (6,)))
    est = Ridge(**kw).fit(Xd, da.from_array(y, chunks=(Xd.chunks[0],) + (() if k is None else ((k,),))),
                          sample_weight=None if w is None else da.from_array(w, chunks=(Xd.chunks[0],)))
    assert est.solver_ == "cg" and est.preconditioner_ == ref.preconditioner_
    assert np.all(np.abs(np.asarray(est.n_iter_) - np.asarray(ref.n_iter_)) <= 1)
    assert np.shape(est.coef_) == np.shape(ref.coef_) and np.shape(est.intercept_) == np.shape(ref.intercept_)
    _close(est.coef_, ref.coef_, rtol=1e-9)
    _close(est.intercept_, ref.intercept_, rtol=1e-9)
    _close(est.predict(Xd).compute(), ref.predict(X), rtol=1e-9)


def test_ridge_cg_dense_and_wide(sync, monkeypatch):
    # solver="cg" on dense features, and solver="auto" past the Cholesky
    # limit, take the distributed CG as the in-memory fit takes CG.
    X, y, w = _data()
    Xd = da.from_array(X, chunks=CHUNKS)
    ref = Ridge(solver="cg", tol=1e-12).fit(X, y, sample_weight=w)
    est = Ridge(solver="cg", tol=1e-12).fit(Xd, da.from_array(y, chunks=(CHUNKS[0],)), sample_weight=w)
    _close(est.coef_, ref.coef_, rtol=1e-10)
    from randfeat._solvers import pipeline

    monkeypatch.setattr(pipeline, "CHOLESKY_MAX_FEATURES", 30)
    est = Ridge(features=RandomFourierFeatures(40, gamma=1.0, random_state=0), tol=1e-12).fit(Xd, y)
    ref = Ridge(features=RandomFourierFeatures(40, gamma=1.0, random_state=0), tol=1e-12).fit(X, y)
    assert est.solver_ == ref.solver_ == "cg"
    _close(est.coef_, ref.coef_, rtol=1e-9)


def test_cluster_classifier_cg_on_binning_features(cluster_client):
    X, _, _ = _data(n=2500)
    labels = (X[:, 0] > 2).astype(int) + (X[:, 1] > 2.3)
    kw = dict(alpha=1.0, features=RandomBinningFeatures(n_grids=10, gamma=1.0, random_state=3), tol=1e-12)
    ref = RidgeClassifier(**kw).fit(X, labels)
    Xd = da.from_array(X, chunks=(600, 6))
    est = RidgeClassifier(**kw).fit(Xd, da.from_array(labels, chunks=600))
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    _close(est.coef_, ref.coef_, rtol=1e-9)
    np.testing.assert_array_equal(est.predict(Xd).compute(), ref.predict(X))


def test_ridge_cv_refuses_dask_fit_and_predicts_lazily(sync):
    from randfeat import RidgeClassifierCV, RidgeCV

    X, y, _ = _data()
    Xd = da.from_array(X, chunks=CHUNKS)
    with pytest.raises(TypeError, match="RidgeCV.fit does not accept Dask arrays yet"):
        RidgeCV().fit(Xd, da.from_array(y, chunks=(CHUNKS[0],)))
    labels = (X[:, 0] > 2).astype(int)
    with pytest.raises(TypeError, match="RidgeClassifierCV.fit does not accept Dask arrays yet"):
        RidgeClassifierCV().fit(Xd, labels)
    est = RidgeCV(alphas=(0.1, 1.0)).fit(X, y)
    pred = est.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), est.predict(X))
    clf = RidgeClassifierCV(alphas=(0.1, 1.0)).fit(X, labels)
    np.testing.assert_array_equal(clf.predict(Xd).compute(), clf.predict(X))


def test_binning_gamma_scale_on_dask_input(sync):
    X = _data()[0]
    ref = RandomBinningFeatures(n_grids=6, gamma="scale", random_state=0).fit(X)
    rbf = RandomBinningFeatures(n_grids=6, gamma="scale", random_state=0).fit(da.from_array(X, chunks=CHUNKS))
    assert rbf.gamma_ == pytest.approx(ref.gamma_, rel=1e-12)
    same = RandomBinningFeatures(n_grids=6, gamma=rbf.gamma_, random_state=0).fit(X)
    np.testing.assert_array_equal(rbf.bin_hashes_, same.bin_hashes_)


# ------------------------------------------- CG with the iteration on a worker
class _Held:
    """A stand-in for a BlockStore actor in this process (its calls answer at once)."""

    class _Answer:
        def __init__(self, value):
            self.value = value

        def result(self, timeout=None):
            return self.value

    def __init__(self, n_blocks, indices, blocks):
        from randfeat._backends.dask_blocks import BlockStore

        self.store = BlockStore(n_blocks, indices, *blocks)

    def reduce(self, fn, *args):
        return self._Answer(self.store.reduce(fn, *args))

    def each(self, fn, *args):
        return self._Answer(self.store.each(fn, *args))


@pytest.mark.parametrize("n_blocks", [1, 2, 5, 8])
def test_blocked_products_sum_as_the_block_order_graph_whatever_holds_the_blocks(sync, n_blocks):
    # The products of a CG iteration: the blocks' values combined along the
    # same tree as tree_reduce (the graph each iteration used to build), bit
    # for bit, however the blocks are spread among the stores.
    from randfeat._backends.dask_blocks import BlockedProducts, _add, _b_normal, make_block
    from randfeat._backends.tree import tree_reduce
    from randfeat._estimators.targets import RealTargets

    X, y, w = _data(n=40 * n_blocks + 3)
    rbf = RandomBinningFeatures(n_grids=7, random_state=0).fit(X)
    bounds = np.linspace(0, X.shape[0], n_blocks + 1).astype(int)
    blocks = [make_block(rbf, X[s:e], y[s:e], w[s:e], RealTargets(y), 1) for s, e in zip(bounds[:-1], bounds[1:])]
    rng = np.random.default_rng(1)
    P, mup = rng.standard_normal((rbf.n_features_out_, 2)), rng.standard_normal(2)
    task = dask.delayed(_b_normal, pure=True)
    (want,) = dask.compute(tree_reduce([task(b, P, mup) for b in blocks], _add))
    for trial in range(6):
        owner = rng.integers(0, 3, n_blocks)  # 0: held by the solve itself; 1, 2: by two stores
        local = {i: b for i, b in enumerate(blocks) if owner[i] == 0}
        stores = [_Held(n_blocks, [i for i in range(n_blocks) if owner[i] == s], [b for i, b in enumerate(blocks)
                                                                                  if owner[i] == s])
                  for s in (1, 2) if (owner == s).any()]
        got = BlockedProducts(local, stores, n_blocks, rbf.n_features_out_, 1).reduce(_b_normal, P, mup)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_cluster_cg_same_bits_as_one_process_and_no_graph_per_iteration(cluster_client):
    X, y, w = _data(n=3000)
    kw = dict(features=RandomBinningFeatures(n_grids=10, random_state=3), tol=1e-12, preconditioner="block")
    Xd = da.from_array(X, chunks=(400, 6))
    yd, wd = da.from_array(y, chunks=400), da.from_array(w, chunks=400)
    with dask.config.set(scheduler="synchronous"):
        ref = Ridge(**kw).fit(Xd, yd, sample_weight=wd)
    est = Ridge(**kw).fit(Xd, yd, sample_weight=wd)
    np.testing.assert_array_equal(est.coef_, ref.coef_)  # the same block-order sums, on two workers
    np.testing.assert_array_equal(est.n_iter_, ref.n_iter_)
    tasks = []
    for max_iter in (3, 30):  # an iteration submits no task: the same tasks for 3 or 30 iterations
        with distributed.get_task_stream() as stream, pytest.warns(Warning, match="did not converge"):
            Ridge(max_iter=max_iter, **kw).fit(Xd, yd, sample_weight=wd)
        tasks.append(len(stream.data))
    assert tasks[0] == tasks[1]


def test_cluster_cg_progress_messages_reach_the_client(cluster_client, capsys):
    X, y, _ = _data(n=2000)
    est = Ridge(features=RandomBinningFeatures(n_grids=10, random_state=3), tol=1e-12, verbose=True)
    est.fit(da.from_array(X, chunks=(500, 6)), da.from_array(y, chunks=500))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("[Ridge] CG iteration")]
    assert lines and lines[-1].startswith(f"[Ridge] CG iteration {est.n_iter_[0]}:")
    numbers = [int(line.split()[3].rstrip(":")) for line in lines]
    assert numbers == sorted(numbers)  # relayed in order


@pytest.mark.parametrize("rows, n_workers", [([100] * 8, 2), ([100] * 8, 3), ([50, 300, 10, 10, 200], 2),
                                             ([100] * 3, 5), ([7], 2)])
def test_cg_placement_contiguous_balanced_runs_root_smallest(rows, n_workers):
    # Each worker holds one contiguous run of blocks (whole subtrees of the
    # reduction tree), the runs balanced by rows, every block placed once,
    # the root the worker with the fewest rows.
    from randfeat._backends.dask_cg import placement

    workers = [f"w{j}" for j in range(n_workers)]
    holders = [{workers[(i * 7) % n_workers]} for i in range(len(rows))]
    by_worker, root = placement(rows, holders, workers)
    runs = sorted(by_worker.values())
    assert sorted(i for r in runs for i in r) == list(range(len(rows)))
    for r in runs:
        assert r == list(range(r[0], r[-1] + 1))
    assert len(by_worker) == min(n_workers, len(rows))
    load = {a: sum(rows[i] for i in r) for a, r in by_worker.items()}
    assert load[root] == min(load.values())
    if len(set(rows)) == 1:  # equal blocks: runs differ by at most one block
        assert max(map(len, runs)) - min(map(len, runs)) <= 1
    assert set(by_worker) <= set(workers)


def test_cg_placement_keeps_blocks_where_they_are_when_already_contiguous():
    from randfeat._backends.dask_cg import placement

    holders = [{"b"}] * 4 + [{"a"}] * 4
    by_worker, root = placement([10] * 8, holders, ["a", "b"])
    assert by_worker == {"b": [0, 1, 2, 3], "a": [4, 5, 6, 7]}
    assert root in ("a", "b")
