"""Issue 33, part 2: the maps' numerical and cost rows (4, 5, 7, 8, 10, 11, 12, 13).

Each test failed on 955cd76.  scikit-learn is the oracle where it has the
same map.
"""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.metrics.pairwise import rbf_kernel

import randfeat._core.memory_budget as _memory
from randfeat import Nystroem, Ridge


def _cap_memory(monkeypatch, nbytes=64 << 20):
    """Make randfeat's pre-check see only ``nbytes`` available."""
    monkeypatch.setattr(_memory, "available_memory", lambda: (nbytes, "a test cap"))


# ------------------------------------------------------------ 4: float32 rbf Nystroem on offset data
@pytest.mark.parametrize("sparse", [False, True])
def test_row4_float32_rbf_nystroem_is_accurate_on_offset_data(sparse):
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(300, 5)) + 1e4).astype(np.float32)
    K = rbf_kernel(X.astype(np.float64), gamma=0.2)
    Xin = sp.csr_matrix(X) if sparse else X
    Z = Nystroem(gamma=0.2, n_components=300, random_state=0).fit(Xin).transform(Xin)
    assert Z.dtype == np.float32
    Zs = SkNystroem(gamma=0.2, n_components=300, random_state=0).fit(X).transform(X).astype(np.float64)
    oracle = np.abs(Zs @ Zs.T - K).max()
    err = np.abs(Z.astype(np.float64) @ Z.T.astype(np.float64) - K).max()
    assert err <= 10 * oracle + 1e-4, (err, oracle)


def test_row4_float32_and_float64_ridge_agree_on_offset_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=400)
    X = X + 1e4
    preds = [Ridge(alpha=1e-2, features=Nystroem(gamma=0.5, n_components=100, random_state=0))
             .fit(X.astype(dt), y).predict(X.astype(dt)) for dt in (np.float32, np.float64)]
    assert np.abs(preds[0] - preds[1]).max() < 0.05 * y.std()


# ------------------------------------------------------------ 11: memory
def test_row11_nystroem_keeps_sparse_landmarks_sparse():
    rng = np.random.default_rng(0)
    cols = rng.integers(0, 2**22, size=(300, 40))
    X = sp.csr_matrix((rng.random(300 * 40), cols.ravel(), np.arange(0, 300 * 40 + 1, 40)), shape=(300, 2**22))
    tracemalloc.start()
    try:
        Z = Nystroem(gamma=0.1, n_components=100, random_state=0).fit_transform(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert Z.shape == (300, 100)
    # Dense landmarks would be 100 x 2**22 x 8 = 3.2 GiB; the landmarks' mean is 32 MiB.
    assert peak < 200 << 20, peak


# ------------------------------------------------------------ 5: SORF at small d
def _sorf_error(X, gamma, D, seeds=(0, 1)):
    from randfeat import RandomFourierFeatures

    K = rbf_kernel(X, gamma=gamma)
    errs = []
    for seed in seeds:
        Z = RandomFourierFeatures(n_components=D, gamma=gamma, sampling="sorf", random_state=seed).fit_transform(X)
        errs.append(np.abs(Z @ Z.T - K).max())
    return float(np.mean(errs))


@pytest.mark.parametrize("d", [2, 5])
def test_row5_sorf_error_shrinks_with_n_components_at_small_d(d):
    X = np.random.default_rng(d).normal(size=(120, d))
    small, large = (_sorf_error(X, 2.0 / d, D) for D in (1000, 16000))
    # Unbiased: four times the features, a quarter of the error's variance (about half the error).
    assert large < 0.6 * small, (small, large)
    assert large < 0.06, large  # the biased blocks of 2-8 left 0.3-0.5


# ------------------------------------------------------------ 8: Dask arrays with empty row blocks
def _filtered_dask(X, y, mask, chunk):
    da = pytest.importorskip("dask.array")
    dX = da.from_array(X, chunks=(chunk, X.shape[1]))
    dm = da.from_array(mask, chunks=chunk)
    dX, dy = dX[dm], da.from_array(y, chunks=chunk)[dm]
    dX.compute_chunk_sizes()
    dy.compute_chunk_sizes()
    assert 0 in dX.chunks[0] and 0 in dy.chunks[0]
    return dX, dy


def _all_maps():
    from randfeat import (AdditiveChi2Sampler, PolynomialCountSketch, RandomBinningFeatures,
                          RandomFourierFeatures, RBFSampler, SkewedChi2Sampler)

    return [RandomFourierFeatures(20, random_state=0), RandomFourierFeatures(20, sampling="sorf", random_state=0),
            Nystroem(n_components=20, random_state=0), RandomBinningFeatures(5, random_state=0),
            AdditiveChi2Sampler(), SkewedChi2Sampler(n_components=10, random_state=0),
            PolynomialCountSketch(n_components=10, random_state=0), RBFSampler(n_components=10, random_state=0)]


@pytest.mark.parametrize("sparse", [False, True])
def test_row8_dask_empty_row_blocks_every_map(sparse):
    dask = pytest.importorskip("dask")
    rng = np.random.default_rng(0)
    X, y = np.abs(rng.normal(size=(200, 4))), rng.normal(size=200)
    mask = np.ones(200, bool)
    mask[50:100] = False  # the second block of 50 rows becomes empty
    if sparse:
        X[X < 0.8] = 0.0
    dX, dy = _filtered_dask(X, y, mask, 50)
    if sparse:
        dX = dX.map_blocks(sp.csr_matrix, dtype=dX.dtype, meta=sp.csr_matrix((0, 4)))
    Xm = sp.csr_matrix(X[mask]) if sparse else X[mask]
    with dask.config.set(scheduler="synchronous"):
        for fmap in _all_maps():
            ref = fmap.fit(Xm).transform(Xm)
            lazy = fmap.transform(dX).compute()
            got = lazy.toarray() if sp.issparse(lazy) else np.asarray(lazy)
            want = ref.toarray() if sp.issparse(ref) else ref
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=type(fmap).__name__)
            fmap.fit(dX)  # fitting on the Dask array works too
        for solver in ("cholesky", "cg"):
            est = Ridge(alpha=1.0, solver=solver, features=Nystroem(n_components=20, random_state=0))
            pred = est.fit(dX, dy).predict(dX).compute()
            ref = Ridge(alpha=1.0, solver=solver, features=Nystroem(n_components=20, random_state=0)).fit(
                Xm, y[mask]).predict(Xm)
            np.testing.assert_allclose(pred, ref, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------ 7: partial_fit and maps drawn from the rows
def test_row7_nystroem_first_block_smaller_than_n_components_raises():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), rng.normal(size=200)
    est = Ridge(features=Nystroem(n_components=100, random_state=0))
    with pytest.raises(ValueError, match=r"first block of 37 rows would leave 37 landmarks.*at least 100 rows"):
        est.partial_fit(X[:37], y[:37])
    assert not hasattr(est, "coef_")  # nothing half-done
    est.partial_fit(X[:100], y[:100]).partial_fit(X[100:], y[100:])
    assert est.features_.n_features_out_ == 100


@pytest.mark.parametrize("features", [
    lambda: Nystroem(n_components=20, landmarks="leverage", random_state=0),
    lambda: __import__("randfeat").RandomFourierFeatures(40, sampling="leverage", gamma=0.5, random_state=0),
    lambda: __import__("randfeat").RandomFourierFeatures(40, gamma="scale", random_state=0),
], ids=["nystroem-leverage", "fourier-leverage", "gamma-scale"])
def test_row7_maps_drawn_from_a_small_first_block_warn(features):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(400, 3)), rng.normal(size=400)
    est = Ridge(features=features())
    with pytest.warns(UserWarning, match="fits .* on the first block only"):
        est.partial_fit(X[:200], y[:200])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # later blocks: no new warning
        est.partial_fit(X[200:], y[200:])


def test_row7_partial_fit_exact_given_the_map():
    """The exactness that is promised: given the first block's map, the solve equals fit with that map."""
    from sklearn.base import clone

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.normal(size=300)
    nys = Nystroem(n_components=50, random_state=0)
    est = Ridge(alpha=0.1, features=nys).partial_fit(X[:100], y[:100]).partial_fit(X[100:], y[100:])
    fixed = clone(nys).fit(X[:100])
    Z = fixed.transform(X)
    ref = Ridge(alpha=0.1).fit(Z, y)
    np.testing.assert_allclose(est.predict(X), ref.predict(Z), rtol=1e-8, atol=1e-10)
    # A map drawn from no rows: partial_fit equals fit on the concatenation.
    from randfeat import RandomFourierFeatures

    rff = RandomFourierFeatures(60, gamma=0.5, random_state=0)
    a = Ridge(alpha=0.1, features=rff).partial_fit(X[:100], y[:100]).partial_fit(X[100:], y[100:])
    b = Ridge(alpha=0.1, features=rff).fit(X, y)
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-9, atol=1e-11)


# ------------------------------------------------------------ 10: AdditiveChi2Sampler wider than 2**31
def test_row10_additive_chi2_output_wider_than_int32_indices():
    from sklearn.kernel_approximation import AdditiveChi2Sampler as SkAdditive

    from randfeat import AdditiveChi2Sampler

    d = 800_000_000  # 3 d > 2**31 output columns; X's indices are int32
    X = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([5, d - 1, 7], dtype=np.int32),
                       np.array([0, 2, 3], dtype=np.int32)), shape=(2, d))
    Z = AdditiveChi2Sampler().fit(X).transform(X)
    assert Z.shape == (2, 3 * d) and Z.indices.dtype == np.int64
    ref = SkAdditive().fit_transform(X)
    assert abs(Z - ref).max() < 1e-12


# ------------------------------------------------------------ 11: memory, continued
def test_row11_additive_chi2_fit_holds_no_per_column_arrays():
    from randfeat import AdditiveChi2Sampler

    X = sp.csr_matrix((np.ones(2), np.array([0, 2**29 - 1]), np.array([0, 1, 2])), shape=(2, 2**29))
    tracemalloc.start()
    try:
        AdditiveChi2Sampler().fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak  # per-column min and max were 2 x 4 GiB
    with pytest.raises(ValueError, match="Negative"):
        AdditiveChi2Sampler().fit(-X)


def test_row11_orthogonal_builds_only_the_blocks_needed():
    from randfeat import RandomFourierFeatures

    X = np.random.default_rng(0).normal(size=(3, 20_000))
    tracemalloc.start()
    try:
        rff = RandomFourierFeatures(4, sampling="orthogonal", gamma=1e-4, random_state=0).fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak  # a 20000 x 20000 block is 3.2 GB
    W = rff.random_weights_ / np.linalg.norm(rff.random_weights_, axis=0)
    np.testing.assert_allclose(W.T @ W, np.eye(2), atol=1e-12)  # still orthogonal directions


def test_row11_orthogonal_directions_stay_orthogonal_and_unbiased():
    from randfeat import RandomFourierFeatures

    X = np.random.default_rng(1).normal(size=(100, 6))
    K = rbf_kernel(X, gamma=0.1)
    # 5 frequencies in 6 dimensions: one partial block (a 6 x 5 QR)
    Z = RandomFourierFeatures(10, sampling="orthogonal", gamma=0.1, random_state=0).fit(X)
    W = Z.random_weights_
    G = (W / np.linalg.norm(W, axis=0)).T @ (W / np.linalg.norm(W, axis=0))
    np.testing.assert_allclose(G, np.eye(5), atol=1e-12)
    big = RandomFourierFeatures(20000, sampling="orthogonal", gamma=0.1, random_state=0).fit_transform(X)
    assert np.abs(big @ big.T - K).max() < 0.05


@pytest.mark.parametrize("case", ["count_sketch", "rbf_sampler", "skewed_chi2", "nystroem", "cholesky",
                                  "orthogonal"])
def test_row11_allocations_proportional_to_a_parameter_are_prechecked(case, monkeypatch):
    from randfeat import PolynomialCountSketch, RandomFourierFeatures, RBFSampler, SkewedChi2Sampler

    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(64, 30)))
    _cap_memory(monkeypatch, 128 << 20)
    calls = {
        # 30 non-zeros to the 10th power: FFT rows, 10 sketches of 2**20 values each (64 rows: 5 GiB and more)
        "count_sketch": lambda: PolynomialCountSketch(n_components=2**20, degree=10).fit_transform(X[:2]),
        "rbf_sampler": lambda: RBFSampler(n_components=10**7).fit(X),
        "skewed_chi2": lambda: SkewedChi2Sampler(n_components=10**7).fit(X),
        "nystroem": lambda: Nystroem(landmarks=np.abs(rng.normal(size=(20_000, 30)))).fit(X),
        "cholesky": lambda: Ridge(solver="cholesky", features=RandomFourierFeatures(60_000, gamma=0.1)).fit(
            X, X[:, 0]),
        "orthogonal": lambda: RandomFourierFeatures(2, sampling="orthogonal").fit(np.zeros((2, 10_000))),
    }
    if case == "orthogonal":  # 2 frequencies in 10000 dimensions: a 10000 x 2 QR fits under the cap
        calls[case]()
        return
    with pytest.raises(MemoryError, match="a test cap"):
        calls[case]()


# ------------------------------------------------------------ 12: the documented cost of structured maps
def test_row12_structured_cost_is_documented_truthfully():
    import randfeat._maps.structured as structured
    from randfeat import RandomFourierFeatures

    doc = RandomFourierFeatures.__doc__
    assert "O(D log d)" not in doc and "O(D log d)" not in structured.__doc__
    assert "O(max(D, n)" in doc and "sparse row costs the same as a dense one" in " ".join(doc.split())


# ------------------------------------------------------------ 13: leverage sampling's cost
def test_row13_leverage_refuses_an_absurd_cost_up_front():
    import time

    from randfeat import RandomFourierFeatures

    X = np.random.default_rng(0).normal(size=(3000, 10))
    t = time.perf_counter()
    with pytest.raises(ValueError, match=r"leverage of 400000 pool frequencies .* on 3000 rows: about .* "
                                         r"floating-point operations.*smaller n_components"):
        RandomFourierFeatures(200_000, sampling="leverage", gamma=0.1, random_state=0).fit(X)
    assert time.perf_counter() - t < 2.0
    # A reasonable size is not refused.
    RandomFourierFeatures(200, sampling="leverage", gamma=0.1, random_state=0).fit(X[:500])
