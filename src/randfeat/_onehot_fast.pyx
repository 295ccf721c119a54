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

import numpy as np

from ._openmp cimport ChunkLoop

cdef extern from "randfeat_onehot.h" nogil:
    int rf_onehot_init()
    const char *rf_isa_name(int isa)
    void rf_gather_add_f64(const int32_t *col, int64_t n, const double *src, int64_t K, double *acc)
    void rf_gather_add_f32(const int32_t *col, int64_t n, const float *src, int64_t K, double *acc)
    void rf_scatter_add_f64(const int32_t *col, int64_t n, const double *u, int64_t K, double *acc)
    void rf_scatter_add_f32(const int32_t *col, int64_t n, const float *u, int64_t K, double *acc)
    void rf_rows_add_f64(const int32_t *idx, int64_t stride, int64_t m, int64_t n, const double *src,
                         int64_t K, double *acc)
    void rf_rows_add_f32(const int32_t *idx, int64_t stride, int64_t m, int64_t n, const float *src,
                         int64_t K, double *acc)

cdef int _ISA = rf_onehot_init()


def vector_isa():
    """The vector code path chosen at import: 'baseline', 'avx2' or 'avx512'."""
    return rf_isa_name(_ISA).decode()


# Rows per block of ``onehot_matmat``: the block's K-column accumulator
# (ROW_BLOCK × K doubles) stays in L1/L2 while every column block adds to it.
cdef Py_ssize_t ROW_BLOCK = 2048

# Column blocks are visited in *groups*.  Each row's gathers (Z @ B) or
# scatters (Zᵀ @ U) land at random within a block's slice of the dense
# operand: while the slices being worked on fit in cache every access hits,
# once they do not (500000 columns × 7 targets = 28 MB) every access is a
# DRAM miss and 7 targets cost ~10× one.  Grouping trades that for streaming
# the N × K accumulator (Z @ B) or U (Zᵀ @ U) once per group.  Budgets
# measured on a 522000 × 500000 matrix of 50 blocks (DESIGN.md, "One-hot
# block products"); the grouping never changes a result, only its speed.
#   Z @ B, row path (2 <= K <= 8): the group's slices, read from L3.
cdef Py_ssize_t ROWS_GROUP_BYTES = 8 << 20
#   Z @ B, block path (K = 1 or K > 8): the group's slices.
cdef Py_ssize_t GATHER_GROUP_BYTES = 8 << 20
#   Zᵀ @ U: one thread's accumulators (L2 and its share of L3).
cdef Py_ssize_t SCATTER_GROUP_BYTES = 4 << 20
# ... but at least this many groups per thread, for balance (a group is one
# chunk of the parallel loop) ...
cdef Py_ssize_t SCATTER_GROUPS_PER_THREAD = 4
# ... and one block per group when U is at most this large (it stays cached).
cdef Py_ssize_t SCATTER_STREAM_BYTES = 8 << 20


cdef inline void _gather_add(const int32_t *col, int64_t n, const floating *src, int64_t K,
                             double *acc) noexcept nogil:
    if floating is float:
        rf_gather_add_f32(col, n, src, K, acc)
    else:
        rf_gather_add_f64(col, n, src, K, acc)


cdef inline void _rows_add(const int32_t *idx, int64_t stride, int64_t m, int64_t n, const floating *src,
                           int64_t K, double *acc) noexcept nogil:
    if floating is float:
        rf_rows_add_f32(idx, stride, m, n, src, K, acc)
    else:
        rf_rows_add_f64(idx, stride, m, n, src, K, acc)


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
    cdef const Py_ssize_t *group  # (n_groups + 1,) first block of each group


cdef Py_ssize_t _block_groups(const int64_t[::1] start, Py_ssize_t row_bytes, Py_ssize_t budget,
                              Py_ssize_t max_blocks, Py_ssize_t[::1] group):
    """Cut the G blocks into consecutive groups of at most ``budget`` bytes of slices and ``max_blocks`` blocks.

    Every group has at least one block.  Writes the first block of each
    group, then G, into ``group`` (length >= G + 2); returns the count.
    """
    cdef Py_ssize_t G = start.shape[0] - 1, g, n = 0, used = 0, width_bytes
    group[0] = 0
    for g in range(G):
        width_bytes = (start[g + 1] - start[g]) * row_bytes
        if g > group[n] and (used + width_bytes > budget or g - group[n] >= max_blocks):
            n += 1
            group[n] = g
            used = 0
        used += width_bytes
    group[n + 1] = G
    return n + 1


cdef class _RowBlocks(_OneHot):
    """Z @ B for the blocks of one group: chunk = ROW_BLOCK rows.

    One group (the common case): the accumulator is the thread's scratch.
    Several: ``acc`` (N × K doubles, the output itself for float64) carries
    every row's sums from group to group, so each row still adds its blocks
    in block order and the result is the same as with one group.
    """
    cdef const double *shift     # NULL: none
    cdef const double *w         # NULL: unit weights
    cdef double *sums            # NULL: no row-block sums
    cdef double *acc             # NULL: one group, accumulate in scratch
    cdef const int32_t *cols     # (N, G) row-major global columns, or NULL: gather block by block
    cdef Py_ssize_t g0, g1       # blocks of the current group
    cdef bint first, last        # the current group is the first / last

    cdef void run_chunk(self, Py_ssize_t rb, void *scratch) noexcept nogil:
        if self.single:
            _row_block(self, <const float *>self.src, <float *>self.out, rb, <double *>scratch)
        else:
            _row_block(self, <const double *>self.src, <double *>self.out, rb, <double *>scratch)


cdef inline void _row_block(_RowBlocks L, const floating *B, floating *out, Py_ssize_t rb,
                            double *scratch) noexcept nogil:
    # Operands in locals: the stores to out / sums cannot then change them.
    cdef Py_ssize_t K = L.K, N = L.N, i0 = rb * ROW_BLOCK, n = min(ROW_BLOCK, N - i0), g, ii, k
    cdef const int32_t *bins = L.bins
    cdef const int64_t *start = L.start
    cdef const double *shift = L.shift
    cdef const double *w = L.w
    cdef double *sums = L.sums
    cdef double *acc = scratch if L.acc == NULL else L.acc + i0 * K
    cdef double value = L.value, v
    if L.first:
        memset(acc, 0, n * K * sizeof(double))
    if L.cols != NULL:
        _rows_add(L.cols + i0 * L.G + L.g0, L.G, L.g1 - L.g0, n, B, K, acc)
    else:
        for g in range(L.g0, L.g1):
            _gather_add(bins + g * N + i0, n, B + start[g] * K, K, acc)
    if not L.last:
        return
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
            # With acc = out (float64, several groups) this overwrites the entry just read.
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
    const int32_t[:, ::1] cols=None,
):
    """Write ``W (Z @ B − 1 shiftᵀ)`` into ``out`` for the one-hot block matrix Z.

    With ``shift`` and ``w`` of length 0 this is plain ``Z @ B``.  The CG
    solver passes shift = μᵀB and its sample weights, which gives it the
    centred, weighted product Z_c B in the same pass, plus the column sums
    of the result per fixed block of ``ROW_BLOCK`` rows (summed by the
    caller in block order, so independent of the thread count).

    When B does not fit the cache budget the blocks are visited in groups
    that do, with a float64 N × K accumulator kept across groups (the
    output itself for float64; allocated here for float32).  The result is
    the same either way: each row adds its blocks in block order.

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
    cols : (N, G) int32, C-contiguous, optional
        The same matrix as global column numbers, row by row (Z's CSR
        indices): cols[i, g] = start[g] + bins[g, i] (the caller guarantees
        it).  Used for 2 <= K <= 8, where a row's K sums then stay in
        registers across the blocks of a group; same result.
    """
    cdef Py_ssize_t G = bins.shape[0], N = bins.shape[1], K = B.shape[1]
    cdef Py_ssize_t n_rb = (N + ROW_BLOCK - 1) // ROW_BLOCK, n_groups, q
    cdef bint shifted = shift.shape[0] > 0, weighted = w.shape[0] > 0
    cdef bint sums = row_block_sums.shape[0] > 0
    cdef _RowBlocks loop = _RowBlocks()
    cdef Py_ssize_t[::1] group = np.empty(G + 2, dtype=np.intp)
    cdef double[:, ::1] acc
    if out.shape[0] != N or out.shape[1] != K:
        raise ValueError("out has the wrong shape")
    if start.shape[0] != G + 1 or start[G] != B.shape[0]:
        raise ValueError("start does not match B")
    if (shifted and shift.shape[0] != K) or (weighted and w.shape[0] != N):
        raise ValueError("shift / w have the wrong length")
    if sums and (row_block_sums.shape[0] != n_rb or row_block_sums.shape[1] != K):
        raise ValueError("row_block_sums has the wrong shape")
    if cols is not None and (cols.shape[0] != N or cols.shape[1] != G):
        raise ValueError("cols has the wrong shape")
    if N == 0 or K == 0:
        return
    loop.cols = &cols[0, 0] if cols is not None and 2 <= K <= 8 and G > 0 else NULL
    n_groups = _block_groups(start, K * sizeof(floating),
                             ROWS_GROUP_BYTES if loop.cols != NULL else GATHER_GROUP_BYTES, G, group)
    loop.bins = &bins[0, 0] if G > 0 else NULL
    loop.start, loop.G, loop.N, loop.K, loop.value = &start[0], G, N, K, value
    loop.single, loop.src, loop.out = floating is float, &B[0, 0], &out[0, 0]
    loop.shift = &shift[0] if shifted else NULL
    loop.w = &w[0] if weighted else NULL
    loop.sums = &row_block_sums[0, 0] if sums else NULL
    loop.n_chunks, loop.n_threads = n_rb, max(1, n_threads)
    loop.acc = NULL
    if n_groups > 1:
        if floating is double:
            loop.acc = &out[0, 0]
        else:
            acc = np.empty((N, K), dtype=np.float64)
            loop.acc = &acc[0, 0]
    else:
        loop.scratch_bytes = ROW_BLOCK * K * sizeof(double)
    for q in range(n_groups):
        loop.g0, loop.g1 = group[q], group[q + 1]
        loop.first, loop.last = q == 0, q == n_groups - 1
        loop.run()


def n_row_blocks(Py_ssize_t n_rows):
    """Rows of ``row_block_sums`` for ``onehot_matmat`` on ``n_rows`` rows."""
    return (n_rows + ROW_BLOCK - 1) // ROW_BLOCK


# Rows per step of ``onehot_tmatmat``'s walk: the step's rows of U (4096 × K values) stay in
# L2 while each block of the group scatters them.
cdef Py_ssize_t SCATTER_ROWS = 4096


cdef class _ColumnBlocks(_OneHot):
    """Zᵀ @ U: chunk = one group of column blocks, summed row by row in order; scratch = their accumulators."""

    cdef void run_chunk(self, Py_ssize_t q, void *scratch) noexcept nogil:
        if self.single:
            _column_group(self, <const float *>self.src, <float *>self.out, q, <double *>scratch)
        else:
            _column_group(self, <const double *>self.src, <double *>self.out, q, <double *>scratch)


cdef inline void _column_group(_ColumnBlocks L, const floating *U, floating *out, Py_ssize_t q,
                               double *acc) noexcept nogil:
    # The group's blocks are adjacent columns, so their accumulators are one
    # buffer of the group's width: U is read once per group, not per block.
    cdef Py_ssize_t K = L.K, N = L.N, g0 = L.group[q], g1 = L.group[q + 1]
    cdef Py_ssize_t first = L.start[g0], width = L.start[g1] - first, i0, n, g, b
    cdef double value = L.value
    memset(acc, 0, width * K * sizeof(double))
    i0 = 0
    while i0 < N:
        n = min(SCATTER_ROWS, N - i0)
        for g in range(g0, g1):
            _scatter_add(L.bins + g * N + i0, n, U + i0 * K, K, acc + (L.start[g] - first) * K)
        i0 += n
    for b in range(width * K):
        out[first * K + b] = <floating>(value * acc[b])


def onehot_tmatmat(
    const int32_t[:, ::1] bins,
    const int64_t[::1] start,
    double value,
    const floating[:, ::1] U,
    floating[:, ::1] out,
    int n_threads,
):
    """Write ``Zᵀ @ U`` into ``out`` for the one-hot block matrix Z.

    The column blocks are cut into groups of equal block counts whose
    accumulators fit ``SCATTER_GROUP_BYTES`` (at least
    ``SCATTER_GROUPS_PER_THREAD`` groups per thread when there are enough
    blocks); each group is summed by one thread, row by row in order,
    into double buffers, so the result does not depend on the grouping or
    the thread count.

    Parameters
    ----------
    bins, start, value : the one-hot block description (see ``onehot_matmat``)
    U : (N, K) C-contiguous
    out : (D, K) C-contiguous, same dtype as U, overwritten
    n_threads : int
        OpenMP threads; the result does not depend on it.
    """
    cdef Py_ssize_t G = bins.shape[0], N = bins.shape[1], K = U.shape[1]
    cdef Py_ssize_t q, g, n_groups, T, per_group, max_width = 0, group_width = 0
    cdef Py_ssize_t[::1] group = np.empty(G + 2, dtype=np.intp)
    cdef _ColumnBlocks loop = _ColumnBlocks()
    if U.shape[0] != N or out.shape[1] != K:
        raise ValueError("U / out have the wrong shape")
    if start.shape[0] != G + 1 or start[G] != out.shape[0]:
        raise ValueError("start does not match out")
    if K == 0 or G == 0:
        return
    # Equal counts of blocks per group, as many groups as the budget needs,
    # at least SCATTER_GROUPS_PER_THREAD per thread, a multiple of the threads.
    for g in range(G):
        max_width = max(max_width, start[g + 1] - start[g])
    T = max(1, n_threads)
    per_group = max(1, SCATTER_GROUP_BYTES // max(1, max_width * K * <Py_ssize_t>sizeof(double)))
    if N * K * <Py_ssize_t>sizeof(floating) <= SCATTER_STREAM_BYTES:
        per_group = 1  # U stays in cache: re-reading it per block is cheap, and one block per chunk balances best
    n_groups = max((G + per_group - 1) // per_group, SCATTER_GROUPS_PER_THREAD * T)
    n_groups = min(G, (n_groups + T - 1) // T * T)
    for q in range(n_groups + 1):
        group[q] = q * G // n_groups
    for q in range(n_groups):
        group_width = max(group_width, start[group[q + 1]] - start[group[q]])
    loop.bins, loop.start, loop.G, loop.N, loop.K, loop.value = &bins[0, 0], &start[0], G, N, K, value
    loop.single, loop.src, loop.out = floating is float, &U[0, 0] if N > 0 else NULL, &out[0, 0]
    loop.group = &group[0]
    loop.n_chunks, loop.n_threads = n_groups, T
    loop.scratch_bytes = max(1, group_width * K) * sizeof(double)
    loop.run()



def set_group_budgets(Py_ssize_t rows_bytes, Py_ssize_t gather_bytes, Py_ssize_t scatter_bytes):
    """Set the block-group byte budgets; return the previous (rows, gather, scatter).

    For tests (a budget of 1 byte puts every block in its own group, so
    small matrices take the multi-group paths) and for tuning; results never
    depend on them.

    Parameters
    ----------
    rows_bytes, gather_bytes, scatter_bytes : int
        New ``ROWS_GROUP_BYTES``, ``GATHER_GROUP_BYTES``, ``SCATTER_GROUP_BYTES`` (>= 1).

    Returns
    -------
    previous : tuple of int
    """
    global ROWS_GROUP_BYTES, GATHER_GROUP_BYTES, SCATTER_GROUP_BYTES
    if min(rows_bytes, gather_bytes, scatter_bytes) < 1:
        raise ValueError("group budgets must be >= 1 byte")
    previous = (ROWS_GROUP_BYTES, GATHER_GROUP_BYTES, SCATTER_GROUP_BYTES)
    ROWS_GROUP_BYTES, GATHER_GROUP_BYTES, SCATTER_GROUP_BYTES = rows_bytes, gather_bytes, scatter_bytes
    return previous


# Rows per chunk of ``local_bins``: the chunk's index rows (ROWS × G int32)
# stay in L2 while each block's column of them is written out.
cdef Py_ssize_t TRANSPOSE_ROWS = 4096


cdef class _LocalBins(ChunkLoop):
    """bins[g, i] = cols[i, g] − start[g]: chunk = TRANSPOSE_ROWS rows."""
    cdef const int32_t *cols
    cdef const int64_t *start
    cdef int32_t *bins
    cdef Py_ssize_t N, G

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        cdef Py_ssize_t i0 = c * TRANSPOSE_ROWS, n = min(TRANSPOSE_ROWS, self.N - i0), g, ii
        cdef int32_t s
        for g in range(self.G):
            s = <int32_t>self.start[g]
            for ii in range(n):
                self.bins[g * self.N + i0 + ii] = self.cols[(i0 + ii) * self.G + g] - s


def local_bins(const int32_t[:, ::1] cols, const int64_t[::1] start, int32_t[:, ::1] bins, int n_threads):
    """Write the block-major local bins of a one-hot block matrix from its row-major columns.

    ``bins[g, i] = cols[i, g] − start[g]``: the transpose NumPy would make
    of ``(cols − start[:G]).T``, in one parallel pass (it was the largest
    cost of setting up a CG solve on a large binning matrix).

    Parameters
    ----------
    cols : (N, G) int32, C-contiguous
        Global column of each row's nonzero in each block (Z's CSR indices).
    start : (G + 1,) int64
        Block offsets; the caller guarantees start[g] <= cols[i, g] < start[g + 1].
    bins : (G, N) int32, C-contiguous, overwritten
    n_threads : int
    """
    cdef Py_ssize_t N = cols.shape[0], G = cols.shape[1]
    cdef _LocalBins loop = _LocalBins()
    if bins.shape[0] != G or bins.shape[1] != N or start.shape[0] != G + 1:
        raise ValueError("cols / start / bins shapes do not match")
    if N == 0 or G == 0:
        return
    loop.cols, loop.start, loop.bins, loop.N, loop.G = &cols[0, 0], &start[0], &bins[0, 0], N, G
    loop.n_chunks, loop.n_threads = (N + TRANSPOSE_ROWS - 1) // TRANSPOSE_ROWS, max(1, n_threads)
    loop.run()
