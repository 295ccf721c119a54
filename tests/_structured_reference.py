"""NumPy references of the structured transforms (SORF, Fastfood).

Shared by tests/maps/test_structured_transforms.py and tests/trust/test_fuzz.py:

* ``dense_frequencies``: the d × D' matrix the structured map stands for,
  built from ``scipy.linalg.hadamard``, with ``argument_tolerance`` its
  forward-error bound and ``reference_features`` the features from float64
  arguments;
* ``level_order_arguments``: the kernel's operations, in order, in NumPy.
"""

import numpy as np
import scipy.linalg


def hadamard_levels(x, log_n):
    """Every block of 2**log_n values of x <- H x, level by level (h = 1, 2, ...), in x's dtype."""
    x = x.copy()
    for level in range(log_n):
        h = 1 << level
        y = x.reshape(-1, 2, h)
        a, b = y[:, 0, :].copy(), y[:, 1, :].copy()
        y[:, 0, :] = a + b
        y[:, 1, :] = a - b
    return x


def level_order_arguments(X, draw, mult):
    """The kernel's arguments a = mult * y computed by NumPy with the kernel's operations, in X's dtype."""
    dtype = X.dtype
    n, nb = draw.block_size, draw.n_blocks
    Xp = np.zeros((X.shape[0], n), dtype=dtype)
    Xp[:, : X.shape[1]] = X
    R = np.tile(Xp, (1, nb)) * draw.signs[0].astype(dtype)
    flat = lambda A: hadamard_levels(A.reshape(-1), draw.log_n).reshape(A.shape)  # noqa: E731
    R = flat(R)
    if draw.sampling == "sorf":
        R = flat(R * draw.signs[1].astype(dtype))
        R = flat(R * draw.signs[2].astype(dtype))
    else:
        gather = (draw.perm + np.arange(0, nb * n, n)[:, None]).ravel()
        R = flat(draw.gauss.astype(dtype) * R[:, gather])
    return mult.astype(dtype) * R[:, : draw.n_freq]


def dense_frequencies(draw, mult):
    """The (n_freq, d) frequency matrix of a draw, float64, from scipy.linalg.hadamard.

    Block b is (H D1 H D2 H D3)[:, :d] or (H G P H B)[:, :d], multiplied
    right to left on the d columns only.
    """
    n, d = draw.block_size, draw.n_features
    H = scipy.linalg.hadamard(n).astype(np.float64)
    rows = []
    for b in range(draw.n_blocks):
        s = slice(b * n, (b + 1) * n)
        if draw.sampling == "sorf":
            D3, D2, D1 = (draw.signs[i, s].astype(np.float64) for i in range(3))
            M = H @ (D1[:, None] * (H @ (D2[:, None] * (H[:, :d] * D3[:d]))))
        else:
            HB = H[:, :d] * draw.signs[0, s][:d].astype(np.float64)
            M = H @ (draw.gauss[s][:, None] * HB[draw.perm[b]])
        rows.append(M)
    return np.vstack(rows)[: draw.n_freq] * mult[:, None]


def argument_tolerance(X, draw, mult, dtype):
    """n·eps times the transform's scale per entry: |mult_j|·(growth)·‖x_i‖₂ (growth n^{3/2} or n·max|g|)."""
    n = draw.block_size
    growth = n**1.5 if draw.sampling == "sorf" else n * np.abs(draw.gauss).max()
    xnorm = np.linalg.norm(X.astype(np.float64), axis=1)
    return n * np.finfo(dtype).eps * np.abs(mult)[None, :] * growth * xnorm[:, None] + np.finfo(dtype).tiny


def reference_features(A, feature_map, n_components, b):
    """Features from float64 arguments A (N, n_freq) with RandomFourierFeatures' conventions."""
    n_freq = A.shape[1]
    if feature_map == "cos":
        return np.sqrt(2.0 / n_freq) * np.cos(A + b)
    scale = np.sqrt(1.0 / n_freq)
    if n_components % 2 == 0:
        return scale * np.hstack([np.cos(A), np.sin(A)])
    m = n_freq - 1
    last = np.sqrt(2.0) * np.cos(A[:, m : m + 1] + b[0])
    return scale * np.hstack([np.cos(A[:, :m]), last, np.sin(A[:, :m])])
