"""Glue between RandomFourierFeatures and the fused kernel in ``_fourier_fast``.

Chooses a memory layout the kernel takes, casts W and b to X's dtype,
checks that the output fits in memory, allocates it and calls the kernel
with BLAS limited to one thread.
"""

import numpy as np
import scipy.sparse as sp

from .._ext import _fourier_fast
from .._core.memory_budget import check_memory
from .._core.threads import single_threaded_blas, threads_for
from .._linalg.dense import gemm_ready

_INT32_MAX = np.iinfo(np.int32).max


def fourier_features(X, W, b, cossin, n_threads):
    """Return ``sqrt(1/D') [cos XW, sin XW]`` (cossin) or ``sqrt(2/D) cos(XW + b)``.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, d), float32 or float64
        Validated input (finite, canonical CSR).
    W : ndarray of shape (d, n_freq)
    b : ndarray of shape (n_freq,) or None
        Phases of the ``cos`` map; None for ``cossin``.
    cossin : bool
    n_threads : int

    Returns
    -------
    Z : ndarray of shape (n_samples, 2 * n_freq or n_freq), X's dtype, C order
    """
    dtype = X.dtype
    W = np.ascontiguousarray(W, dtype=dtype)
    n_freq = W.shape[1]
    D = 2 * n_freq if cossin else n_freq
    scale = np.sqrt(1.0 / n_freq) if cossin else np.sqrt(2.0 / D)
    b = np.zeros(0, dtype=dtype) if cossin else np.ascontiguousarray(b, dtype=dtype)
    if max(X.shape[1], n_freq, D) > _INT32_MAX:
        raise ValueError("n_features and n_components must each be below 2**31 (BLAS int sizes)")
    check_memory(
        X.shape[0] * D * dtype.itemsize,
        f"the features of {X.shape[0]} rows ({X.shape[0]} x {D} {dtype.name})",
        "fit a model on them without holding them with Ridge(features=RandomFourierFeatures(...)), "
        "or transform X in chunks of rows",
    )
    # np.empty: pages are first touched by the threads that write them.
    out = np.empty((X.shape[0], D), dtype=dtype)
    n_threads = threads_for("fourier_output", out.size, n_threads)
    with single_threaded_blas():
        if sp.issparse(X):
            index_dtype = np.result_type(X.indices.dtype, X.indptr.dtype)
            if index_dtype not in (np.int32, np.int64):
                index_dtype = np.int64
            _fourier_fast.fourier_csr(
                X.data,
                X.indices.astype(index_dtype, copy=False),
                X.indptr.astype(index_dtype, copy=False),
                W,
                b,
                out,
                cossin,
                scale,
                n_threads,
            )
        else:
            X = gemm_ready(X)
            if max(X.strides) // X.itemsize > _INT32_MAX:
                X = np.ascontiguousarray(X)
            _fourier_fast.fourier_dense(X, W, b, out, cossin, scale, n_threads)
    return out
