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
from cython cimport floating
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memset

from ._openmp cimport ChunkLoop

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


cdef inline void _gather_add(const int32_t *col, int64_t n, const floating *src, int64_t K,
                             double *acc) noexcept nogil:
    if floating is float:
        rf_gather_add_f32(col, n, src, K, acc)
    else:
        rf_gather_add_f64(col, n, src, K, acc)


cdef inline void _scatter_add(const int32_t *col, int64_t n, const floating *u, int64_t K,
                              double *acc) noexcept nogil:
    if floating is float:
        rf_scatter_add_f32(col, n, u, K, acc)
    else:
        rf_scatter_add_f64(col, n, u, K, acc)


cdef class _OneHot(ChunkLoop):
    """The one-hot block description and the dense operand of one product."""
    cdef const int32_t *bins     # (G, N) block-major
    cdef const int64_t *start    # (G + 1,)
    cdef Py_ssize_t G, N, K
    cdef double value
    cdef bint single             # float32 operands
    cdef const void *src         # B (D × K) or U (N × K)
    cdef void *out


cdef class _RowBlocks(_OneHot):
    """Z @ B: chunk = ROW_BLOCK rows; scratch = their K-column accumulator."""
    cdef const double *shift     # NULL: none
    cdef const double *w         # NULL: unit weights
    cdef double *sums            # NULL: no row-block sums

    cdef void run_chunk(self, Py_ssize_t rb, void *scratch) noexcept nogil:
        if self.single:
            _row_block(self, <const float *>self.src, <float *>self.out, rb, <double *>scratch)
        else:
            _row_block(self, <const double *>self.src, <double *>self.out, rb, <double *>scratch)


cdef inline void _row_block(_RowBlocks L, const floating *B, floating *out, Py_ssize_t rb,
                            double *acc) noexcept nogil:
    # Operands in locals: the stores to out / sums cannot then change them.
    cdef Py_ssize_t K = L.K, N = L.N, G = L.G, i0 = rb * ROW_BLOCK, n = min(ROW_BLOCK, N - i0), g, ii, k
    cdef const int32_t *bins = L.bins
    cdef const int64_t *start = L.start
    cdef const double *shift = L.shift
    cdef const double *w = L.w
    cdef double *sums = L.sums
    cdef double value = L.value, v
    memset(acc, 0, n * K * sizeof(double))
    for g in range(G):
        _gather_add(bins + g * N + i0, n, B + start[g] * K, K, acc)
    if sums != NULL:
        for k in range(K):
            sums[rb * K + k] = 0.0
    for ii in range(n):
        for k in range(K):
            v = value * acc[ii * K + k]
            if shift != NULL:
                v = v - shift[k]
            if w != NULL:
                v = v * w[i0 + ii]
            out[(i0 + ii) * K + k] = <floating>v
            if sums != NULL:
                sums[rb * K + k] += v


def onehot_matmat(
    const int32_t[:, ::1] bins,
    const int64_t[::1] start,
    double value,
    const floating[:, ::1] B,
    floating[:, ::1] out,
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
    cdef bint shifted = shift.shape[0] > 0, weighted = w.shape[0] > 0
    cdef bint sums = row_block_sums.shape[0] > 0
    cdef _RowBlocks loop = _RowBlocks()
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
    loop.bins = &bins[0, 0] if G > 0 else NULL
    loop.start, loop.G, loop.N, loop.K, loop.value = &start[0], G, N, K, value
    loop.single, loop.src, loop.out = floating is float, &B[0, 0], &out[0, 0]
    loop.shift = &shift[0] if shifted else NULL
    loop.w = &w[0] if weighted else NULL
    loop.sums = &row_block_sums[0, 0] if sums else NULL
    loop.n_chunks, loop.n_threads = n_rb, max(1, n_threads)
    loop.scratch_bytes = ROW_BLOCK * K * sizeof(double)
    loop.run()


def n_row_blocks(Py_ssize_t n_rows):
    """Rows of ``row_block_sums`` for ``onehot_matmat`` on ``n_rows`` rows."""
    return (n_rows + ROW_BLOCK - 1) // ROW_BLOCK


cdef class _ColumnBlocks(_OneHot):
    """Zᵀ @ U: chunk = one column block, summed row by row in order; scratch = its accumulator."""

    cdef void run_chunk(self, Py_ssize_t g, void *scratch) noexcept nogil:
        if self.single:
            _column_block(self, <const float *>self.src, <float *>self.out, g, <double *>scratch)
        else:
            _column_block(self, <const double *>self.src, <double *>self.out, g, <double *>scratch)


cdef inline void _column_block(_ColumnBlocks L, const floating *U, floating *out, Py_ssize_t g,
                               double *acc) noexcept nogil:
    cdef Py_ssize_t K = L.K, first = L.start[g], width = L.start[g + 1] - first, b, k
    cdef double value = L.value
    memset(acc, 0, width * K * sizeof(double))
    _scatter_add(L.bins + g * L.N, L.N, U, K, acc)
    for b in range(width):
        for k in range(K):
            out[(first + b) * K + k] = <floating>(value * acc[b * K + k])


def onehot_tmatmat(
    const int32_t[:, ::1] bins,
    const int64_t[::1] start,
    double value,
    const floating[:, ::1] U,
    floating[:, ::1] out,
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
    cdef Py_ssize_t g, max_width = 0
    cdef _ColumnBlocks loop = _ColumnBlocks()
    if U.shape[0] != N or out.shape[1] != K:
        raise ValueError("U / out have the wrong shape")
    if start.shape[0] != G + 1 or start[G] != out.shape[0]:
        raise ValueError("start does not match out")
    for g in range(G):
        max_width = max(max_width, start[g + 1] - start[g])
    if K == 0 or G == 0:
        return
    loop.bins, loop.start, loop.G, loop.N, loop.K, loop.value = &bins[0, 0], &start[0], G, N, K, value
    loop.single, loop.src, loop.out = floating is float, &U[0, 0] if N > 0 else NULL, &out[0, 0]
    loop.n_chunks, loop.n_threads = G, max(1, n_threads)
    loop.scratch_bytes = max(1, max_width * K) * sizeof(double)
    loop.run()
