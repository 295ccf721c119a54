"""Glue between RandomFourierFeatures and the fused kernel.

Chooses the memory layout the kernel can take, casts W and b to X's dtype,
allocates the output and calls the kernel with BLAS limited to one thread.
"""

import numpy as np
import scipy.sparse as sp


def fourier_features(X, W, b, cossin, n_threads):
    """Return ``sqrt(1/D') [cos XW, sin XW]`` (cossin) or ``sqrt(2/D) cos(XW + b)``.

    X is validated (2-D, finite, float32/float64, dense or canonical CSR).
    Temporary NumPy implementation, chunked over rows.
    """
    dtype = X.dtype
    W = W.astype(dtype, copy=False)
    n, n_freq = X.shape[0], W.shape[1]
    D = 2 * n_freq if cossin else n_freq
    out = np.empty((n, D), dtype=dtype)
    scale = np.sqrt(1.0 / n_freq) if cossin else np.sqrt(2.0 / D)
    step = max(1, (1 << 20) // max(D, 1))
    for r0 in range(0, n, step):
        XW = X[r0 : r0 + step] @ W
        if sp.issparse(XW):
            XW = XW.toarray()
        XW = np.asarray(XW)
        if cossin:
            out[r0 : r0 + step, :n_freq] = np.cos(XW) * scale
            out[r0 : r0 + step, n_freq:] = np.sin(XW) * scale
        else:
            out[r0 : r0 + step] = np.cos(XW + b.astype(dtype, copy=False)) * scale
    return out
