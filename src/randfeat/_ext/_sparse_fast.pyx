# cython: language_level=3
# distutils: language = c++
"""Parallel sparse × dense products and CSR helpers used by the CG solver.

One kernel, ``csr_matmat``, computes ``out = A @ B`` for a CSR matrix A and
a dense C-ordered block B of K columns.  It serves both products of a CG
iteration: ``Z @ P`` (A = Z in CSR) and ``Z.T @ U`` (A = the CSR arrays of
Zᵀ, i.e. a CSC copy of Z made once per fit).  Each output row is computed by
one thread, sequentially over that row's nonzeros, so the result is
bit-identical for any thread count and any schedule: there is no reduction
across threads.  Sums are accumulated in double precision for float32 input
(the columns of a binning feature matrix can hold hundreds of thousands of
nonzeros, where float32 accumulation would lose digits).

The row loops are C++ templates (``_ext/include/randfeat_spmm.hpp``) instantiated
here once per index × value type through Cython's fused types; this module
is therefore compiled as C++.  ``compact_columns`` and ``csr_gram_block``
serve the preconditioner (``_solvers/precond.py``) on any CSR matrix.
"""

cimport cython
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t

import numpy as np

from ._cycommon cimport index_t

cdef extern from "randfeat_spmm.hpp" nogil:
    void rf_row_times[I, V](const I *ind, const V *dat, int64_t start, int64_t end, const V *B,
                            int64_t K, V *out_row)
    void rf_row_normal[I, V](const I *ind, const V *dat, int64_t start, int64_t end, const V *P,
                             int64_t K, const double *mup, double wi, double *part, double *usum)


def csr_matmat(
    const index_t[::1] indptr,
    const index_t[::1] indices,
    const cython.floating[::1] data,
    const cython.floating[:, ::1] B,
    cython.floating[:, ::1] out,
    int n_threads,
):
    """Write ``A @ B`` into ``out`` for CSR ``A = (data, indices, indptr)``.

    Parameters
    ----------
    indptr, indices : int32 or int64 arrays (the same dtype)
        CSR structure of A (n_rows + 1 and nnz entries); column indices must
        be < B.shape[0] (not checked here: the caller guarantees it).
    data : float32 or float64 array, nnz entries
    B : (n_cols, K) C-contiguous array, same dtype as ``data``
    out : (n_rows, K) C-contiguous array, same dtype, overwritten
    n_threads : int
        OpenMP threads; the result does not depend on it.
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1
    cdef Py_ssize_t K = B.shape[1]
    cdef Py_ssize_t i
    if out.shape[0] != n_rows or out.shape[1] != K:
        raise ValueError("out has the wrong shape")
    if n_threads < 1:
        n_threads = 1
    with nogil:
        # Dynamic schedule: rows of a CSC copy (bins) have very uneven
        # lengths.  It cannot change the result, only the balance.
        for i in prange(n_rows, num_threads=n_threads, schedule="dynamic", chunksize=256):
            rf_row_times(&indices[0], &data[0], indptr[i], indptr[i + 1], &B[0, 0], K, &out[i, 0])


def csr_row_weighted_sq_sums(
    const index_t[::1] indptr,
    const index_t[::1] indices,
    const cython.floating[::1] data,
    const double[::1] w,
    double[::1] out,
    int n_threads,
):
    """Write ``out[i] = sum_jj data[jj]**2 * w[indices[jj]]`` for each row i.

    Applied to the CSR arrays of Zᵀ (a CSC copy of Z) with sample weights w,
    it gives the weighted column sums of squares of Z: the diagonal of ZᵀWZ
    that the Jacobi preconditioner needs, without a temporary copy of Z.
    Accumulated in double, one row per thread (thread-count independent).
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1
    cdef Py_ssize_t i
    cdef index_t jj
    cdef double acc, v
    if out.shape[0] != n_rows:
        raise ValueError("out has the wrong shape")
    if n_threads < 1:
        n_threads = 1
    with nogil:
        for i in prange(n_rows, num_threads=n_threads, schedule="dynamic", chunksize=256):
            acc = 0.0
            for jj in range(indptr[i], indptr[i + 1]):
                v = data[jj]
                acc = acc + v * v * w[indices[jj]]
            out[i] = acc


def csr_normal_matmat(
    const index_t[::1] indptr,
    const index_t[::1] indices,
    const cython.floating[::1] data,
    const cython.floating[:, ::1] P,
    const double[::1] mup,
    const double[::1] w,
    double[:, :, ::1] partial,
    double[:, ::1] usum,
    int n_threads,
):
    """Fused ``Zᵀ W (Z P − 1 mupᵀ)`` in one pass over a CSR matrix Z.

    The rows are cut into ``partial.shape[0]`` fixed blocks (chosen by the
    caller from the problem size, never from the thread count).  For block
    b, ``partial[b]`` (D × K, double) receives Σ_{i in b} z_i v_iᵀ and
    ``usum[b]`` receives Σ_{i in b} v_i, where v_i = w_i (z_iᵀP − mup).
    The caller sums the blocks in order, so results do not depend on the
    number of threads.  One read of Z per CG iteration instead of two (Z
    and a CSC copy), and no CSC copy at all.

    Parameters
    ----------
    indptr, indices, data : CSR arrays of Z (N × D)
    P : (D, K) C-contiguous, Z's dtype
    mup : (K,) double, μᵀP (zeros without centring)
    w : (N,) double sample weights, or length 0 for unit weights
    partial : (n_blocks, D, K) double, overwritten
    usum : (n_blocks, K) double, overwritten
    n_threads : int
    """
    cdef Py_ssize_t N = indptr.shape[0] - 1
    cdef Py_ssize_t K = P.shape[1], D = P.shape[0]
    cdef Py_ssize_t nb = partial.shape[0], b, i, i0, i1, step, j, k
    cdef bint weighted = w.shape[0] > 0
    cdef double wi
    if partial.shape[1] != D or partial.shape[2] != K or usum.shape[0] != nb or usum.shape[1] != K:
        raise ValueError("partial/usum have the wrong shape")
    if weighted and w.shape[0] != N:
        raise ValueError("w has the wrong length")
    if mup.shape[0] != K:
        raise ValueError("mup has the wrong length")
    if n_threads < 1:
        n_threads = 1
    step = (N + nb - 1) // nb
    with nogil:
        for b in prange(nb, num_threads=n_threads, schedule="dynamic", chunksize=1):
            # Zero this block's buffer in the thread that fills it.
            for j in range(D):
                for k in range(K):
                    partial[b, j, k] = 0.0
            for k in range(K):
                usum[b, k] = 0.0
            i0 = b * step
            i1 = min(i0 + step, N)
            for i in range(i0, i1):
                wi = w[i] if weighted else 1.0
                rf_row_normal(&indices[0], &data[0], indptr[i], indptr[i + 1], &P[0, 0], K,
                              &mup[0], wi, &partial[b, 0, 0], &usum[b, 0])


def sum_blocks(const double[:, :, ::1] partial, cython.floating[:, ::1] out, int n_threads):
    """out[j, k] = Σ_b partial[b, j, k], summed in block order (deterministic)."""
    cdef Py_ssize_t nb = partial.shape[0], D = partial.shape[1], K = partial.shape[2]
    cdef Py_ssize_t b, j, k
    cdef double acc
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=512):
            for k in range(K):
                acc = 0.0
                for b in range(nb):
                    acc = acc + partial[b, j, k]
                out[j, k] = <cython.floating>acc


def compact_columns(
    const index_t[::1] indptr,
    const index_t[::1] indices,
    const cython.floating[::1] data,
    const int32_t[::1] position,
):
    """Keep only the entries of chosen columns of a CSR matrix, renumbered.

    ``position[j]`` is the new number of column j, or −1 to drop it.
    Returns ``(hptr int64, hidx int32, hval)``: the compact CSR (same rows).
    Two serial passes (count, fill); O(nnz).
    """
    cdef Py_ssize_t N = indptr.shape[0] - 1, i
    cdef index_t p
    cdef int64_t m = 0
    cdef int32_t a
    hptr_arr = np.empty(N + 1, dtype=np.int64)
    cdef int64_t[::1] hptr = hptr_arr
    with nogil:
        hptr[0] = 0
        for i in range(N):
            for p in range(indptr[i], indptr[i + 1]):
                if position[indices[p]] >= 0:
                    m += 1
            hptr[i + 1] = m
    hidx_arr = np.empty(m, dtype=np.int32)
    hval_arr = np.empty(m, dtype=np.float32 if cython.floating is float else np.float64)
    cdef int32_t[::1] hidx = hidx_arr
    cdef cython.floating[::1] hval = hval_arr
    m = 0
    with nogil:
        for i in range(N):
            for p in range(indptr[i], indptr[i + 1]):
                a = position[indices[p]]
                if a >= 0:
                    hidx[m] = a
                    hval[m] = data[p]
                    m += 1
    return hptr_arr, hidx_arr, hval_arr


def csr_gram_block(
    const int64_t[::1] indptr,
    const int32_t[::1] hidx,
    const cython.floating[::1] hval,
    const double[::1] w,
    double[:, ::1] out,
    int n_threads,
):
    """Upper triangle of the Gram block Σ_i w_i h_i h_iᵀ of a compact CSR.

    The compact CSR (``indptr``, ``hidx``, ``hval``) holds, for every row of
    Z, only its entries in the chosen columns, renumbered 0..h−1 in
    increasing column order (so ``hidx`` is increasing within a row).
    ``out[a, b]`` for a <= b receives Σ_i w_i Z_ia Z_ib; the lower triangle
    is left at zero.  Output row a is owned by thread a mod T, which walks
    all rows in order: each entry is summed by one thread in row order,
    so the result does not depend on the thread count.

    Parameters
    ----------
    indptr : (N + 1,) int64
    hidx : (nnz_h,) int32, column positions 0..h−1, increasing within a row
    hval : (nnz_h,) float32 or float64
    w : (N,) double sample weights, or length 0 for unit weights
    out : (h, h) double, zeroed by the caller
    n_threads : int
    """
    cdef Py_ssize_t N = indptr.shape[0] - 1, h = out.shape[0]
    cdef Py_ssize_t t, i, p, q, a, T
    cdef int64_t p0, p1
    cdef double wv
    cdef bint weighted = w.shape[0] > 0
    if out.shape[1] != h:
        raise ValueError("out must be square")
    if weighted and w.shape[0] != N:
        raise ValueError("w has the wrong length")
    T = max(1, n_threads)
    with nogil:
        for t in prange(T, num_threads=T, schedule="static", chunksize=1):
            for i in range(N):
                p0 = indptr[i]
                p1 = indptr[i + 1]
                for p in range(p0, p1):
                    a = hidx[p]
                    if a % T != t:
                        continue
                    wv = <double>hval[p] * (w[i] if weighted else 1.0)
                    for q in range(p, p1):
                        out[a, hidx[q]] += wv * <double>hval[q]
