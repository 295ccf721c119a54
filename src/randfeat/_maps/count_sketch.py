"""PolynomialCountSketch: TensorSketch features of the polynomial kernel (Pham & Pagh 2013).

For k(x, y) = (γ⟨x, y⟩ + c₀)^p, x' = [√γ x, √c₀] (the last entry only when
c₀ ≠ 0) and p independent count sketches C_l(x')[h_l(j)] += s_l(j) x'_j
(hashes h_l(j) in [0, D), signs s_l(j) = ±1), the tensor sketch is their
circular convolution z = C_0 ⊛ ... ⊛ C_{p-1}, with E[⟨z(x), z(y)⟩] = k(x, y).
Hashes and signs are drawn exactly as scikit-learn draws them
(``sklearn_compat``), so the features equal scikit-learn's to rounding.

scikit-learn computes the convolution by FFT for every row (p complex
transforms of length D and one inverse).  A row with q nonzeros has only
q^p terms in the convolution, so rows with q^p ≤ ``direct_limit(p, D)``
are summed directly (compiled, float64 accumulators), the others through
rfft / irfft of their count sketches (scipy.fft, one batch per chunk of
rows).  The choice depends on the row alone, and pocketfft's result for a
row does not depend on the batch it is in, so a row's features do not
depend on the other rows or on the thread count.
"""

import math

import numpy as np
import scipy.fft
import scipy.sparse as sp

from .._ext import _kernel_approx_fast as _fast
from .._core.memory import check_memory
from .sklearn_compat import draw_integers, draw_rng

# A row is summed directly when its q^p terms cost less than its p + 1
# transforms: q^p <= _TERM_VS_FFT (p + 1) D log2 D.  Measured on 20000 × 54
# rows, D = 2000, one thread: a direct term ~1.6 ns (zeroing and writing the
# row included), a transform (count sketch, rfft/irfft, product) ~0.44 ns
# per D log2 D; so 0.44 / 1.6.
_TERM_VS_FFT = 0.27
# Bytes of the count sketches held for one FFT batch.
_FFT_BATCH_BYTES = 16 << 20


def draw_count_sketch(random_state, n_features, n_components, degree, coef0):
    """Draw scikit-learn's hashes and signs (one column more when coef0 ≠ 0).

    Parameters
    ----------
    random_state : None, int, RandomState or Generator
    n_features, n_components, degree : int
    coef0 : float

    Returns
    -------
    index_hash : ndarray of shape (degree, n_features (+1)), int64 in [0, n_components)
    bit_hash : ndarray of shape (degree, n_features (+1)), int64 in {-1, +1}
    """
    rng = draw_rng(random_state)
    width = n_features + (1 if coef0 != 0 else 0)
    index_hash = draw_integers(rng, n_components, (degree, width))
    bit_hash = np.asarray(rng.choice(a=[-1, 1], size=(degree, width)), dtype=np.int64)
    return index_hash, bit_hash


def direct_limit(degree, n_components):
    """Most terms q^p of a row that are summed directly rather than by FFT.

    Parameters
    ----------
    degree, n_components : int

    Returns
    -------
    int
    """
    D = max(2, int(n_components))
    return int(_TERM_VS_FFT * (degree + 1) * D * math.log2(D))


def _row_nonzeros(X, has_coef0):
    """Nonzeros per row, as the kernel counts them (explicit zeros of a CSR skipped), + the coef0 entry."""
    if sp.issparse(X):
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        q = np.bincount(rows[X.data != 0], minlength=X.shape[0]).astype(np.int64)
    else:
        q = np.count_nonzero(X, axis=1).astype(np.int64)
    return q + (1 if has_coef0 else 0)


def _direct_rows(q, degree, limit):
    """Rows summed directly: q^degree <= limit (exact integer test per distinct q)."""
    if degree > _fast.MAX_DIRECT_DEGREE:
        return np.zeros(q.shape[0], dtype=bool)
    values = np.unique(q)
    direct = {int(v): int(v) ** degree <= limit for v in values}
    return np.array([direct[int(v)] for v in values], dtype=bool)[np.searchsorted(values, q)]


def count_sketch_features(X, index_hash, bit_hash, n_components, gamma, coef0, n_threads):
    """Tensor sketch of every row of X, in X's dtype.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), float32/float64, validated
    index_hash, bit_hash : ndarray of shape (degree, n_features (+1))
        From ``draw_count_sketch``; the last column is the coef0 column when coef0 ≠ 0.
    n_components : int
    gamma, coef0 : float
        Both ≥ 0.
    n_threads : int

    Returns
    -------
    Z : ndarray of shape (n_samples, n_components), X's dtype, C order
    """
    dtype = X.dtype
    n, d = X.shape
    degree, D = index_hash.shape[0], int(n_components)
    has_coef0 = coef0 != 0
    hashes = np.ascontiguousarray(index_hash, dtype=np.int64)
    signs = np.ascontiguousarray(bit_hash, dtype=np.float64)
    check_memory(
        n * D * dtype.itemsize,
        f"the features of {n} rows ({n} x {D} {dtype.name})",
        "transform X in chunks of rows, or fit a model on them with Ridge(features=PolynomialCountSketch(...))",
    )
    out = np.empty((n, D), dtype=dtype)
    q = _row_nonzeros(X, has_coef0)
    direct = _direct_rows(q, degree, direct_limit(degree, D))
    args = (hashes, signs, float(np.sqrt(gamma)), float(np.sqrt(coef0)))
    if direct.all():  # the common case: one call, no FFT buffer
        _sketch(X, args, out, np.empty((0, degree, D), dtype=dtype), np.full(n, -1, np.int64), n_threads)
        return out
    # Chunks of rows whose count sketches fit the FFT batch, whatever their mix.
    chunk = max(64, _FFT_BATCH_BYTES // (degree * D * dtype.itemsize))
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        fft_rows = np.flatnonzero(~direct[s:e])
        slots = np.full(e - s, -1, np.int64)
        slots[fft_rows] = np.arange(fft_rows.shape[0])
        buf = np.empty((fft_rows.shape[0], degree, D), dtype=dtype)
        _sketch(X[s:e], args, out[s:e], buf, slots, n_threads)
        if fft_rows.shape[0]:
            out[s + fft_rows] = _fft_product(buf, D, n_threads)
    return out


def _sketch(X, args, out, buf, slots, n_threads):
    hashes, signs, sqrt_gamma, sqrt_coef0 = args
    if sp.issparse(X):
        max_nnz = int(np.diff(X.indptr).max()) if X.shape[0] else 0
        _fast.tensor_sketch_csr(
            X.data, X.indices, X.indptr, X.shape[1], hashes, signs, sqrt_gamma, sqrt_coef0, out, buf, slots,
            max_nnz, n_threads,
        )
    else:
        _fast.tensor_sketch_dense(
            np.ascontiguousarray(X), hashes, signs, sqrt_gamma, sqrt_coef0, out, buf, slots, n_threads
        )


def _fft_product(buf, D, n_threads):
    """irfft(Π_l rfft(C_l)) of each row's count sketches buf[i] (degree × D)."""
    spectra = scipy.fft.rfft(buf, axis=2, workers=n_threads)
    prod = spectra[:, 0]
    for level in range(1, buf.shape[1]):
        prod *= spectra[:, level]
    return scipy.fft.irfft(prod, n=D, axis=1, workers=n_threads)
