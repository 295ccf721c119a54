"""A row's features do not depend on the rows transformed with it.

Dask blocks, ``Ridge``'s chunks and a user's own batches all split the rows
differently; the features of a row must be the same bits in every case
(issue 13).  BLAS gemm does not give that (its micro-kernels treat rows in
groups), so the dense Fourier kernel multiplies X @ W with its own
row-independent kernel (``randfeat_rowgemm.h``), checked here against
NumPy and across splits, on every vector path.
"""

import os

import numpy as np
import pytest

from randfeat import RandomFourierFeatures
from randfeat._ext import _fourier_fast

from _subprocess_env import run_on_vector_path

SPLITS = [1, 5, 6, 7, 12, 511, 512, 513, 1000]


def _split_transform(est, X, step):
    return np.vstack([est.transform(X[s:s + step]) for s in range(0, X.shape[0], step)])


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 5, 54])
@pytest.mark.parametrize("feature_map", ["cossin", "cos"])
def test_fourier_features_independent_of_the_split(dtype, d, feature_map):
    rng = np.random.default_rng(d)
    X = rng.standard_normal((1100, d)).astype(dtype)
    # 150 frequencies: not a multiple of the kernel's panel width (8 / 16 columns)
    est = RandomFourierFeatures(300 if feature_map == "cossin" else 150, feature_map=feature_map,
                                random_state=0).fit(X)
    ref = est.transform(X)
    for step in SPLITS:
        np.testing.assert_array_equal(_split_transform(est, X, step), ref, err_msg=f"blocks of {step} rows")
    cuts = np.sort(rng.choice(np.arange(1, 1100), size=25, replace=False))
    parts = np.vstack([est.transform(p) for p in np.split(X, cuts)])
    np.testing.assert_array_equal(parts, ref, err_msg="random split")
    # Fortran order and a row-strided view take the same kernel path per row
    np.testing.assert_array_equal(est.transform(np.asfortranarray(X[3:900])), ref[3:900])
    np.testing.assert_array_equal(est.transform(X[::2]), ref[::2])


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 3, 5), (13, 54, 16), (6, 100, 33), (40, 9, 8), (300, 70, 1)])
def test_row_products_against_numpy(dtype, shape):
    n, d, m = shape
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d)).astype(dtype)
    W = rng.standard_normal((d, m)).astype(dtype)
    out = np.full((n, m), np.nan, dtype=dtype)
    _fourier_fast.row_products(X, W, out, 2)
    exact = X.astype(np.float64) @ W.astype(np.float64)
    bound = d * np.finfo(dtype).eps * (np.abs(X).astype(np.float64) @ np.abs(W).astype(np.float64))
    assert np.all(np.abs(out - exact) <= bound)
    # Fortran order takes the same path per row
    out_f = np.empty_like(out)
    _fourier_fast.row_products(np.asfortranarray(X), W, out_f, 2)
    np.testing.assert_array_equal(out_f, out)
    # each row alone gives the same bits
    for i in range(n):
        row = np.empty((1, m), dtype=dtype)
        _fourier_fast.row_products(X[i:i + 1], W, row, 1)
        np.testing.assert_array_equal(row[0], out[i])


_ISA_SCRIPT = """
import numpy as np
from randfeat import RandomFourierFeatures
from randfeat._ext import _fourier_fast
rng = np.random.default_rng(1)
for dtype in (np.float32, np.float64):
    X = rng.standard_normal((700, 54)).astype(dtype)
    est = RandomFourierFeatures(150, random_state=0).fit(X)
    ref = est.transform(X)
    for step in (1, 7, 100, 513):
        parts = np.vstack([est.transform(X[s:s + step]) for s in range(0, 700, step)])
        assert np.array_equal(parts, ref), (dtype, step)
print(_fourier_fast.vector_isa())
"""


@pytest.mark.kernel
@pytest.mark.parametrize("isa", ["baseline", "avx2", "avx512"])
def test_split_independence_on_every_vector_path(isa):
    if run_on_vector_path(_ISA_SCRIPT, isa) != isa:
        pytest.skip(f"this CPU (or run) has no {isa} path")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [None, 3])
def test_ridge_predictions_independent_of_split_and_threads(dtype, k):
    # Ridge.predict's product is the row-independent kernel: the same bits
    # for any n_jobs and any split of the rows (client vs Dask workers).
    from randfeat import Ridge

    rng = np.random.default_rng(2)
    X = rng.standard_normal((1300, 40)).astype(dtype)
    y = X @ rng.standard_normal(40) if k is None else X @ rng.standard_normal((40, k))
    for features in (None, RandomFourierFeatures(150, random_state=0)):
        est = Ridge(alpha=1.0, features=features).fit(X, y)
        ref = est.predict(X)
        for n_jobs in (1, 2):
            est.set_params(n_jobs=n_jobs)
            np.testing.assert_array_equal(est.predict(X), ref)
            for step in (1, 7, 513):
                parts = np.concatenate([est.predict(X[s:s + step]) for s in range(0, 1300, step)])
                np.testing.assert_array_equal(parts, ref)
        exact = (X.astype(np.float64) @ np.asarray(est.coef_, np.float64).T if features is None else None)
        if exact is not None:
            np.testing.assert_allclose(ref, exact + est.intercept_, rtol=0,
                                       atol=50 * np.finfo(dtype).eps * np.abs(exact).max())
