# cython: language_level=3
"""Parallel sparse x dense products used by the conjugate-gradient solver.

One kernel, ``csr_matmat``, computes ``out = A @ B`` for a CSR matrix A and
a dense C-ordered block B of K columns.  It serves both products of a CG
iteration: ``Z @ P`` (A = Z in CSR) and ``Z.T @ U`` (A = the CSR arrays of
Zᵀ, i.e. a CSC copy of Z made once per fit).  Each output row is computed by
one thread, sequentially over that row's nonzeros, so the result is
bit-identical for any thread count and any schedule: there is no reduction
across threads.  Sums are accumulated in double precision for float32 input
(the columns of a binning feature matrix can hold hundreds of thousands of
nonzeros, where float32 accumulation would lose digits).
"""

cimport cython
from cython.parallel cimport parallel, prange
from libc.stdint cimport int32_t, int64_t

cdef extern from "randfeat_spmm.h" nogil:
    void rf_row_times_i32_f32(const int32_t*, const float*, int64_t, int64_t, const float*, int64_t, float*)
    void rf_row_times_i32_f64(const int32_t*, const double*, int64_t, int64_t, const double*, int64_t, double*)
    void rf_row_times_i64_f32(const int64_t*, const float*, int64_t, int64_t, const float*, int64_t, float*)
    void rf_row_times_i64_f64(const int64_t*, const double*, int64_t, int64_t, const double*, int64_t, double*)

ctypedef fused index_t:
    int32_t
    int64_t


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
            if index_t is int32_t:
                if cython.floating is float:
                    rf_row_times_i32_f32(&indices[0], &data[0], indptr[i], indptr[i + 1], &B[0, 0], K, &out[i, 0])
                else:
                    rf_row_times_i32_f64(&indices[0], &data[0], indptr[i], indptr[i + 1], &B[0, 0], K, &out[i, 0])
            else:
                if cython.floating is float:
                    rf_row_times_i64_f32(&indices[0], &data[0], indptr[i], indptr[i + 1], &B[0, 0], K, &out[i, 0])
                else:
                    rf_row_times_i64_f64(&indices[0], &data[0], indptr[i], indptr[i + 1], &B[0, 0], K, &out[i, 0])


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
