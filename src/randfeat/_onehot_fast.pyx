# cython: language_level=3
"""Products with one-hot block matrices, and the Gram block of chosen columns.

A *one-hot block* matrix Z (N × D) has its columns cut into G consecutive
blocks [start[g], start[g + 1]), and every row holds exactly one nonzero in
every block, all of the same value c.  Random binning features (one block
per grid: the bin a point falls in) and one-hot encoded categories have this
form.  Z is then described by c and, per block, the local column of every
row, ``bins[g, i]``, stored block-major (G × N int32), so that

* ``Z @ B`` reads, for each block, one small slice of B (the block's rows,
  a few hundred KB at most for binning) while walking the rows in order;
* ``Zᵀ @ U`` is computed block by block, each block by one thread into a
  private buffer of its own length: there is no reduction across threads.

Neither product reads a value array (c is a scalar), which halves the
memory traffic of a CSR product.  Both are bit-identical for any thread
count: every output entry is summed by one thread in a fixed order
(blocks in order for ``Z @ B``, rows in order for ``Zᵀ @ U``), in double
precision also for float32 input.
"""

cimport cython
import numpy as np
from cython.parallel cimport parallel, prange
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

cdef extern from "randfeat_onehot.h" nogil:
    int rf_onehot_init()
    const char *rf_isa_name(int isa)
    void rf_gather_add_f64(const int32_t *col, int64_t n, const double *src, int64_t K, double *acc)
    void rf_gather_add_f32(const int32_t *col, int64_t n, const float *src, int64_t K, double *acc)
    void rf_scatter_add_f64(const int32_t *col, int64_t n, const double *u, int64_t K, double *acc)
    void rf_scatter_add_f32(const int32_t *col, int64_t n, const float *u, int64_t K, double *acc)

cdef int _ISA = rf_onehot_init()


def vector_isa():
    """The vector code path chosen at import: 'baseline', 'avx2' or 'avx512'."""
    return rf_isa_name(_ISA).decode()


# Rows per block of ``onehot_matmat``: the block's K-column accumulator
# (ROW_BLOCK × K doubles) stays in L1/L2 while every column block adds to it.
cdef Py_ssize_t ROW_BLOCK = 2048

def onehot_matmat(
    const int32_t[:, ::1] bins,
    const int64_t[::1] start,
    double value,
    const cython.floating[:, ::1] B,
    cython.floating[:, ::1] out,
    const double[::1] shift,
    const double[::1] w,
    double[:, ::1] row_block_sums,
    int n_threads,
):
    """Write ``W (Z @ B − 1 shiftᵀ)`` into ``out`` for the one-hot block matrix Z.

    With ``shift`` and ``w`` of length 0 this is plain ``Z @ B``.  The CG
    solver passes shift = μᵀB and its sample weights, which gives it the
    centred, weighted product Z_c B in the same pass, plus the column sums
    of the result per fixed block of ``ROW_BLOCK`` rows (summed by the
    caller in block order, so independent of the thread count).

    Parameters
    ----------
    bins : (G, N) int32, C-contiguous
        Local column of each row within each block (0 <= bins[g, i] <
        start[g + 1] - start[g]; the caller guarantees it).
    start : (G + 1,) int64
        Column offsets of the blocks; start[G] = D.
    value : float
        The common value c of the nonzeros.
    B : (D, K) C-contiguous
    out : (N, K) C-contiguous, same dtype as B, overwritten
    shift : (K,) double, or length 0 for none
    w : (N,) double, or length 0 for unit weights
    row_block_sums : (n_row_blocks(N), K) double, overwritten (or shape (0, 0))
    n_threads : int
        OpenMP threads; the result does not depend on it.
    """
    cdef Py_ssize_t G = bins.shape[0], N = bins.shape[1], K = B.shape[1]
    cdef Py_ssize_t n_rb = (N + ROW_BLOCK - 1) // ROW_BLOCK
    cdef Py_ssize_t rb, i0, n, g, ii, k
    cdef double *acc
    cdef double v
    cdef const cython.floating *src
    cdef const int32_t *col
    cdef bint shifted = shift.shape[0] > 0, weighted = w.shape[0] > 0
    cdef bint sums = row_block_sums.shape[0] > 0
    # Set by a thread whose buffer allocation failed (an array element, so
    # the write is shared: a plain variable assigned in a parallel block is
    # thread-private in Cython).
    cdef int failed[1]
    failed[0] = 0
    if out.shape[0] != N or out.shape[1] != K:
        raise ValueError("out has the wrong shape")
    if start.shape[0] != G + 1 or start[G] != B.shape[0]:
        raise ValueError("start does not match B")
    if (shifted and shift.shape[0] != K) or (weighted and w.shape[0] != N):
        raise ValueError("shift / w have the wrong length")
    if sums and (row_block_sums.shape[0] != n_rb or row_block_sums.shape[1] != K):
        raise ValueError("row_block_sums has the wrong shape")
    if N == 0 or K == 0:
        return
    if n_threads < 1:
        n_threads = 1
    with nogil, parallel(num_threads=n_threads):
        acc = <double *> malloc(ROW_BLOCK * K * sizeof(double))
        if acc == NULL:
            failed[0] = 1
        else:
            for rb in prange(n_rb, schedule="dynamic"):
                i0 = rb * ROW_BLOCK
                n = min(ROW_BLOCK, N - i0)
                memset(acc, 0, n * K * sizeof(double))
                for g in range(G):
                    col = &bins[g, i0]
                    src = &B[start[g], 0]
                    if cython.floating is float:
                        rf_gather_add_f32(col, n, src, K, acc)
                    else:
                        rf_gather_add_f64(col, n, src, K, acc)
                if sums:
                    for k in range(K):
                        row_block_sums[rb, k] = 0.0
                for ii in range(n):
                    for k in range(K):
                        v = value * acc[ii * K + k]
                        if shifted:
                            v = v - shift[k]
                        if weighted:
                            v = v * w[i0 + ii]
                        out[i0 + ii, k] = <cython.floating>v
                        if sums:
                            row_block_sums[rb, k] += v
            free(acc)
    if failed[0]:
        raise MemoryError("onehot_matmat: cannot allocate a row-block buffer")


def n_row_blocks(Py_ssize_t n_rows):
    """Rows of ``row_block_sums`` for ``onehot_matmat`` on ``n_rows`` rows."""
    return (n_rows + ROW_BLOCK - 1) // ROW_BLOCK


def onehot_tmatmat(
    const int32_t[:, ::1] bins,
    const int64_t[::1] start,
    double value,
    const cython.floating[:, ::1] U,
    cython.floating[:, ::1] out,
    int n_threads,
):
    """Write ``Zᵀ @ U`` into ``out`` for the one-hot block matrix Z.

    Each column block is summed by one thread, row by row in order, into a
    double buffer of the block's width.

    Parameters
    ----------
    bins, start, value : the one-hot block description (see ``onehot_matmat``)
    U : (N, K) C-contiguous
    out : (D, K) C-contiguous, same dtype as U, overwritten
    n_threads : int
        OpenMP threads; the result does not depend on it.
    """
    cdef Py_ssize_t G = bins.shape[0], N = bins.shape[1], K = U.shape[1]
    cdef Py_ssize_t g, i, k, b, width, max_width = 0, base
    cdef double *acc
    cdef const int32_t *col
    cdef int failed[1]
    failed[0] = 0
    if U.shape[0] != N or out.shape[1] != K:
        raise ValueError("U / out have the wrong shape")
    if start.shape[0] != G + 1 or start[G] != out.shape[0]:
        raise ValueError("start does not match out")
    for g in range(G):
        max_width = max(max_width, start[g + 1] - start[g])
    if K == 0:
        return
    if n_threads < 1:
        n_threads = 1
    with nogil, parallel(num_threads=n_threads):
        acc = <double *> malloc(max(1, max_width * K) * sizeof(double))
        if acc == NULL:
            failed[0] = 1
        else:
            for g in prange(G, schedule="dynamic", chunksize=1):
                width = start[g + 1] - start[g]
                memset(acc, 0, width * K * sizeof(double))
                col = &bins[g, 0]
                if cython.floating is float:
                    rf_scatter_add_f32(col, N, &U[0, 0], K, acc)
                else:
                    rf_scatter_add_f64(col, N, &U[0, 0], K, acc)
                for b in range(width):
                    for k in range(K):
                        out[start[g] + b, k] = <cython.floating>(value * acc[b * K + k])
            free(acc)
    if failed[0]:
        raise MemoryError("onehot_tmatmat: cannot allocate a column-block buffer")
