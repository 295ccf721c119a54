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
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t
from libc.string cimport memcpy, memset

import numpy as np

from ._openmp cimport ChunkLoop

cdef extern from "randfeat_onehot.h" nogil:
    int rf_onehot_init()
    const char *rf_isa_name(int isa)
    void rf_gather_add_f64_i32(const int32_t *col, int64_t n, const double *src, int64_t ld, int64_t K, double *acc)
    void rf_gather_add_f32_i32(const int32_t *col, int64_t n, const float *src, int64_t ld, int64_t K, double *acc)
    void rf_gather_add_f64_u16(const uint16_t *col, int64_t n, const double *src, int64_t ld, int64_t K, double *acc)
    void rf_gather_add_f32_u16(const uint16_t *col, int64_t n, const float *src, int64_t ld, int64_t K, double *acc)
    void rf_scatter_add_f64_i32(const int32_t *col, int64_t col_stride, int64_t m, const int64_t *offset, int64_t n,
                                const double *u, int64_t K, double *acc, int64_t ld)
    void rf_scatter_add_f32_i32(const int32_t *col, int64_t col_stride, int64_t m, const int64_t *offset, int64_t n,
                                const float *u, int64_t K, double *acc, int64_t ld)
    void rf_scatter_add_f64_u16(const uint16_t *col, int64_t col_stride, int64_t m, const int64_t *offset, int64_t n,
                                const double *u, int64_t K, double *acc, int64_t ld)
    void rf_scatter_add_f32_u16(const uint16_t *col, int64_t col_stride, int64_t m, const int64_t *offset, int64_t n,
                                const float *u, int64_t K, double *acc, int64_t ld)
    void rf_rows_add_f64_i32(const int32_t *idx, int64_t stride, int64_t m, const int64_t *offset, int64_t n,
                             const double *src, int64_t ld, int64_t K, double *acc)
    void rf_rows_add_f32_i32(const int32_t *idx, int64_t stride, int64_t m, const int64_t *offset, int64_t n,
                             const float *src, int64_t ld, int64_t K, double *acc)
    void rf_rows_add_f64_u16(const uint16_t *idx, int64_t stride, int64_t m, const int64_t *offset, int64_t n,
                             const double *src, int64_t ld, int64_t K, double *acc)
    void rf_rows_add_f32_u16(const uint16_t *idx, int64_t stride, int64_t m, const int64_t *offset, int64_t n,
                             const float *src, int64_t ld, int64_t K, double *acc)

cdef int _ISA = rf_onehot_init()

# The block-major bins: uint16 when every block is at most 65536 columns
# wide (``bins_dtype``), else int32.  The products read them once per
# product, so the narrower type halves the bytes streamed; the sums are
# the same.
ctypedef fused bin_index:
    int32_t
    uint16_t

#: Widest block whose local columns fit uint16 bins.
NARROW_BLOCK_WIDTH = 1 << 16


def bins_dtype(Py_ssize_t max_block_width):
    """The dtype of the block-major bins for blocks of at most ``max_block_width`` columns: uint16 or int32.

    Parameters
    ----------
    max_block_width : int

    Returns
    -------
    numpy.dtype
    """
    return np.dtype(np.uint16 if max_block_width <= NARROW_BLOCK_WIDTH else np.int32)


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
#   Z @ B, row path (2 <= K <= 8): the group's slices, read from L3.  8 MB
#   is best on a quiet machine; when other processes share the L3 (a busy
#   machine) the 8 MB of slices no longer stay there, and groups of 3 MB
#   (within reach of L2) took ~1.6x less CPU at 2, 4 and 7 targets (522000
#   rows, load average ~20, same run).  ``row_group_budgets`` gives both;
#   the operator (``_linalg/onehot.py``) keeps the faster (bench/contention.py).
cdef Py_ssize_t ROWS_GROUP_BYTES = 8 << 20
cdef Py_ssize_t ROWS_SHARED_GROUP_BYTES = 3 << 20
#   Z @ B, block path (K = 1 or K > 8): the group's slices, within L2 (half
#   of 1 MB): each row block reads a slice it will need again from L2, not L3
#   (one target, 522000 rows × 50 grids: 18.0 → 15.7 ms on uniform bins,
#   13.6 → 11.1 ms Forest-like; 26 targets on Letter-like data: a tie).
cdef Py_ssize_t GATHER_GROUP_BYTES = 512 << 10
#   Zᵀ @ U: one thread's accumulators, within L2 (2 MB: the quiet sweep was
#   flat from 2 MB up; beside other processes 4 MB of accumulators spilled
#   to DRAM: 7 targets, 300000 rows, a whole seven-class CG fit took 4.8 s
#   of CPU instead of 5.2 s, with rows at 3 MB, same run).
cdef Py_ssize_t SCATTER_GROUP_BYTES = 2 << 20
# ... but at least this many groups per thread, for balance (a group is one
# chunk of the parallel loop) ...
cdef Py_ssize_t SCATTER_GROUPS_PER_THREAD = 4
# ... and one block per group when U is at most this large (it stays cached).
cdef Py_ssize_t SCATTER_STREAM_BYTES = 8 << 20


cdef inline void _gather_add(const void *col, bint narrow, int64_t n, const floating *src, int64_t ld, int64_t K,
                             double *acc) noexcept nogil:
    if floating is float:
        if narrow:
            rf_gather_add_f32_u16(<const uint16_t *>col, n, src, ld, K, acc)
        else:
            rf_gather_add_f32_i32(<const int32_t *>col, n, src, ld, K, acc)
    else:
        if narrow:
            rf_gather_add_f64_u16(<const uint16_t *>col, n, src, ld, K, acc)
        else:
            rf_gather_add_f64_i32(<const int32_t *>col, n, src, ld, K, acc)


cdef inline void _rows_add(const void *idx, bint narrow, int64_t stride, int64_t m, const int64_t *offset, int64_t n,
                           const floating *src, int64_t ld, int64_t K, double *acc) noexcept nogil:
    if floating is float:
        if narrow:
            rf_rows_add_f32_u16(<const uint16_t *>idx, stride, m, offset, n, src, ld, K, acc)
        else:
            rf_rows_add_f32_i32(<const int32_t *>idx, stride, m, offset, n, src, ld, K, acc)
    else:
        if narrow:
            rf_rows_add_f64_u16(<const uint16_t *>idx, stride, m, offset, n, src, ld, K, acc)
        else:
            rf_rows_add_f64_i32(<const int32_t *>idx, stride, m, offset, n, src, ld, K, acc)


cdef inline void _scatter_add(const void *col, bint narrow, int64_t col_stride, int64_t m, const int64_t *offset,
                              int64_t n, const floating *u, int64_t K, double *acc, int64_t ld) noexcept nogil:
    if floating is float:
        if narrow:
            rf_scatter_add_f32_u16(<const uint16_t *>col, col_stride, m, offset, n, u, K, acc, ld)
        else:
            rf_scatter_add_f32_i32(<const int32_t *>col, col_stride, m, offset, n, u, K, acc, ld)
    else:
        if narrow:
            rf_scatter_add_f64_u16(<const uint16_t *>col, col_stride, m, offset, n, u, K, acc, ld)
        else:
            rf_scatter_add_f64_i32(<const int32_t *>col, col_stride, m, offset, n, u, K, acc, ld)


cdef inline const void *_bins_at(_OneHot L, Py_ssize_t g, Py_ssize_t i) noexcept nogil:
    """Address of bins[g, i] (uint16 or int32 bins)."""
    if L.narrow:
        return <const uint16_t *>L.bins + g * L.N + i
    return <const int32_t *>L.bins + g * L.N + i


def padded_width(Py_ssize_t K, Py_ssize_t itemsize):
    """Row stride (in values) of a randomly addressed K-wide operand: K, or K padded to one cache line.

    A row of 33–64 bytes is padded to 64 (float32 rows of 17–32 bytes to
    32), so that, on a 64-byte boundary, it never straddles two cache lines:
    a 7-wide double row (56 bytes) straddles two in 6 rows of 8.  Measured on
    a 522000 × 500000 uniform-bin matrix, Z @ P with 7 targets: 60.6 ms
    unpadded, 42.3 ms padded (+1.7 ms for the copy).  Narrower rows stay as
    they are (3 doubles padded to 4 made P a third larger and the product
    slower: 37.0 → 39.8 ms), and so do wider ones, which span several lines
    either way (26 targets on Letter-like binning: 4.26 ms unpadded, 4.63 ms
    padded to 32).

    Parameters
    ----------
    K : int
        Values per row.
    itemsize : int
        Bytes per value (4 or 8).

    Returns
    -------
    int
    """
    cdef Py_ssize_t row_bytes = K * itemsize
    if 32 < row_bytes <= 64:
        return 64 // itemsize
    if 16 < row_bytes <= 32 and itemsize == 4:
        return 32 // itemsize
    return K


# Bytes of per-thread scratch kept aside so that a scatter accumulator can
# start on a 64-byte boundary (malloc gives 16).
cdef Py_ssize_t ALIGN_SLACK = 64


cdef inline double *_aligned64(void *p) noexcept nogil:
    return <double *>((<size_t>p + 63) & ~(<size_t>63))


cdef class _OneHot(ChunkLoop):
    """The one-hot block description and the dense operand of one product."""
    cdef const void *bins        # (G, N) block-major, uint16 (narrow) or int32
    cdef bint narrow
    cdef const int64_t *start    # (G + 1,)
    cdef Py_ssize_t G, N, K
    cdef Py_ssize_t ld           # row stride of the randomly addressed operand (B, or the scatter accumulator)
    cdef double value
    cdef bint single             # float32 operands
    cdef const void *src         # B (D × K) or U (N × K)
    cdef void *out
    cdef const Py_ssize_t *group  # (n_groups + 1,) first block of each group
    cdef const int64_t *offset    # (G,) first column of each block within its group (Zᵀ @ U)


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
    cdef const void *cols        # (N, G) row-major columns, or NULL: gather block by block
    cdef bint cols_narrow        # uint16 local columns (else int32 global ones)
    cdef const int64_t *cols_offset  # (G,) added to cols: block starts (local) or zeros (global)
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
    cdef const int64_t *start = L.start
    cdef const double *shift = L.shift
    cdef const double *w = L.w
    cdef double *sums = L.sums
    cdef double *acc = scratch if L.acc == NULL else L.acc + i0 * K
    cdef double value = L.value, v, sk, s
    if L.first:
        memset(acc, 0, n * K * sizeof(double))
    if L.cols != NULL:
        _rows_add(_cols_at(L, i0, L.g0), L.cols_narrow, L.G, L.g1 - L.g0, L.cols_offset + L.g0, n, B, L.ld, K, acc)
    else:
        for g in range(L.g0, L.g1):
            _gather_add(_bins_at(L, g, i0), L.narrow, n, B + start[g] * L.ld, L.ld, K, acc)
    if not L.last:
        return
    # Column by column, without branches in the row loops (subtracting 0.0
    # and leaving out the unit weights change no value); each column's sum
    # still adds its rows in order.  (Row by row, the running sums went
    # through memory: 1.8 of 12 ms for one target on 522000 rows.)
    for k in range(K):
        sk = shift[k] if shift != NULL else 0.0
        s = 0.0
        if w != NULL:
            for ii in range(n):
                v = (value * acc[ii * K + k] - sk) * w[i0 + ii]
                # With acc = out (float64, several groups) this overwrites the entry just read.
                out[(i0 + ii) * K + k] = <floating>v
                s = s + v
        else:
            for ii in range(n):
                v = value * acc[ii * K + k] - sk
                out[(i0 + ii) * K + k] = <floating>v
                s = s + v
        if sums != NULL:
            sums[rb * K + k] = s


cdef inline const void *_cols_at(_RowBlocks L, Py_ssize_t i, Py_ssize_t g) noexcept nogil:
    """Address of cols[i, g] (uint16 or int32 row-major columns)."""
    if L.cols_narrow:
        return <const uint16_t *>L.cols + i * L.G + g
    return <const int32_t *>L.cols + i * L.G + g


def row_group_budgets():
    """The two block-group budgets of the row path (bytes of P's slices per group): (quiet, shared).

    The first is best when the process has the L3 to itself, the second
    when other processes share it (``ROWS_GROUP_BYTES``); any budget gives
    the same result.  ``set_group_budgets`` sets the first and caps the
    second by it.

    Returns
    -------
    tuple of int
    """
    return ROWS_GROUP_BYTES, min(ROWS_SHARED_GROUP_BYTES, ROWS_GROUP_BYTES)


def uses_row_path(Py_ssize_t K):
    """Whether ``onehot_matmat`` with K targets takes the row path (reads ``cols`` when given): 2 <= K <= 8.

    Parameters
    ----------
    K : int

    Returns
    -------
    bool
    """
    return 2 <= K <= 8


def onehot_matmat(
    const bin_index[:, ::1] bins,
    const int64_t[::1] start,
    double value,
    const floating[:, ::1] B,
    floating[:, ::1] out,
    const double[::1] shift,
    const double[::1] w,
    double[:, ::1] row_block_sums,
    int n_threads,
    cols=None,
    Py_ssize_t group_bytes=0,
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
    bins : (G, N) uint16 or int32, C-contiguous
        Local column of each row within each block (0 <= bins[g, i] <
        start[g + 1] - start[g]; the caller guarantees it).  uint16 needs
        every block at most ``NARROW_BLOCK_WIDTH`` columns wide
        (``bins_dtype``).
    start : (G + 1,) int64
        Column offsets of the blocks; start[G] = D.
    value : float
        The common value c of the nonzeros.
    B : (D, ldb) C-contiguous, ldb >= K
        The first K columns are the operand; columns past K are padding,
        never read (``padded_width``: rows that never straddle two cache
        lines when B starts on a 64-byte boundary, see ``pad_rows``).
    out : (N, K) C-contiguous, same dtype as B, overwritten (K = out.shape[1])
    shift : (K,) double, or length 0 for none
    w : (N,) double, or length 0 for unit weights
    row_block_sums : (n_row_blocks(N), K) double, overwritten (or shape (0, 0))
    n_threads : int
        OpenMP threads; the result does not depend on it.
    cols : (N, G) int32 or uint16, C-contiguous, optional
        The same matrix row by row: int32 global columns (Z's CSR indices,
        cols[i, g] = start[g] + bins[g, i]), or uint16 local ones
        (cols[i, g] = bins[g, i], ``local_rows``); the caller guarantees
        it.  Used for 2 <= K <= 8, where a row's K sums then stay in
        registers across the blocks of a group; same result.
    group_bytes : int, default=0
        Cache budget of a block group (bytes of B's slices); 0: the
        path's default (``ROWS_GROUP_BYTES`` or ``GATHER_GROUP_BYTES``).
        Any budget gives the same result.
    """
    cdef Py_ssize_t G = bins.shape[0], N = bins.shape[1], K = out.shape[1]
    cdef Py_ssize_t n_rb = (N + ROW_BLOCK - 1) // ROW_BLOCK, n_groups, q
    cdef bint shifted = shift.shape[0] > 0, weighted = w.shape[0] > 0
    cdef bint sums = row_block_sums.shape[0] > 0
    cdef _RowBlocks loop = _RowBlocks()
    cdef Py_ssize_t[::1] group = np.empty(G + 2, dtype=np.intp)
    cdef double[:, ::1] acc
    cdef const int32_t[:, ::1] cols32
    cdef const uint16_t[:, ::1] cols16
    cdef int64_t[::1] zeros
    if out.shape[0] != N:
        raise ValueError("out has the wrong shape")
    if B.shape[1] < K:
        raise ValueError("B has fewer columns than out")
    if start.shape[0] != G + 1 or start[G] != B.shape[0]:
        raise ValueError("start does not match B")
    if (shifted and shift.shape[0] != K) or (weighted and w.shape[0] != N):
        raise ValueError("shift / w have the wrong length")
    if sums and (row_block_sums.shape[0] != n_rb or row_block_sums.shape[1] != K):
        raise ValueError("row_block_sums has the wrong shape")
    if cols is not None and (cols.shape[0] != N or cols.shape[1] != G):
        raise ValueError("cols has the wrong shape")
    if cols is not None and cols.dtype not in (np.int32, np.uint16):
        raise ValueError("cols must be int32 (global) or uint16 (local) columns")
    if group_bytes < 0:
        raise ValueError("group_bytes must be >= 0")
    if N == 0 or K == 0:
        return
    loop.cols = NULL
    if cols is not None and uses_row_path(K) and G > 0:
        if cols.dtype == np.uint16:
            cols16 = cols
            loop.cols, loop.cols_narrow, loop.cols_offset = &cols16[0, 0], True, &start[0]
        else:
            cols32 = cols
            zeros = np.zeros(G, dtype=np.int64)
            loop.cols, loop.cols_narrow, loop.cols_offset = &cols32[0, 0], False, &zeros[0]
    if group_bytes == 0:
        group_bytes = ROWS_GROUP_BYTES if loop.cols != NULL else GATHER_GROUP_BYTES
    n_groups = _block_groups(start, B.shape[1] * sizeof(floating), group_bytes, G, group)
    loop.bins = &bins[0, 0] if G > 0 else NULL
    loop.narrow = bin_index is uint16_t
    loop.start, loop.G, loop.N, loop.K, loop.value = &start[0], G, N, K, value
    loop.ld = B.shape[1]
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
    # The accumulator rows are padded to L.ld doubles on a 64-byte boundary
    # (``padded_width``): a random read-modify-write touches one cache line.
    cdef Py_ssize_t K = L.K, ld = L.ld, N = L.N, g0 = L.group[q], g1 = L.group[q + 1]
    cdef Py_ssize_t first = L.start[g0], width = L.start[g1] - first, i0, n, r, k
    cdef double value = L.value
    acc = _aligned64(acc)
    memset(acc, 0, width * ld * sizeof(double))
    i0 = 0
    while i0 < N:
        n = min(SCATTER_ROWS, N - i0)
        _scatter_add(_bins_at(L, g0, i0), L.narrow, N, g1 - g0, L.offset + g0, n, U + i0 * K, K, acc, ld)
        i0 += n
    for r in range(width):
        for k in range(K):
            out[(first + r) * K + k] = <floating>(value * acc[r * ld + k])


def onehot_tmatmat(
    const bin_index[:, ::1] bins,
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
    cdef Py_ssize_t q, g, n_groups, T, per_group, max_width = 0, group_width = 0, ld
    cdef Py_ssize_t[::1] group = np.empty(G + 2, dtype=np.intp)
    cdef int64_t[::1] offset = np.empty(max(G, 1), dtype=np.int64)
    cdef _ColumnBlocks loop = _ColumnBlocks()
    if U.shape[0] != N or out.shape[1] != K:
        raise ValueError("U / out have the wrong shape")
    if start.shape[0] != G + 1 or start[G] != out.shape[0]:
        raise ValueError("start does not match out")
    if K == 0 or G == 0:
        return
    # Equal counts of blocks per group, as many groups as the budget needs,
    # at least SCATTER_GROUPS_PER_THREAD per thread, a multiple of the threads.
    ld = padded_width(K, sizeof(double))
    for g in range(G):
        max_width = max(max_width, start[g + 1] - start[g])
    T = max(1, n_threads)
    per_group = max(1, SCATTER_GROUP_BYTES // max(1, max_width * ld * <Py_ssize_t>sizeof(double)))
    if N * K * <Py_ssize_t>sizeof(floating) <= SCATTER_STREAM_BYTES:
        per_group = 1  # U stays in cache: re-reading it per block is cheap, and one block per chunk balances best
    n_groups = max((G + per_group - 1) // per_group, SCATTER_GROUPS_PER_THREAD * T)
    n_groups = min(G, (n_groups + T - 1) // T * T)
    for q in range(n_groups + 1):
        group[q] = q * G // n_groups
    for q in range(n_groups):
        group_width = max(group_width, start[group[q + 1]] - start[group[q]])
        for g in range(group[q], group[q + 1]):
            offset[g] = start[g] - start[group[q]]
    loop.bins, loop.start, loop.G, loop.N, loop.K, loop.value = &bins[0, 0], &start[0], G, N, K, value
    loop.narrow = bin_index is uint16_t
    loop.ld = ld
    loop.single, loop.src, loop.out = floating is float, &U[0, 0] if N > 0 else NULL, &out[0, 0]
    loop.group, loop.offset = &group[0], &offset[0]
    loop.n_chunks, loop.n_threads = n_groups, T
    loop.scratch_bytes = max(1, group_width * ld) * sizeof(double) + ALIGN_SLACK
    loop.run()



# Rows per chunk of ``pad_rows``.
cdef Py_ssize_t PAD_ROWS = 16384


cdef class _PadRows(ChunkLoop):
    """dst[i, :K] = src[i, :]: chunk = PAD_ROWS rows."""
    cdef const char *src
    cdef char *dst
    cdef Py_ssize_t n, row_bytes, dst_row_bytes

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(c * PAD_ROWS, min(self.n, (c + 1) * PAD_ROWS)):
            memcpy(self.dst + i * self.dst_row_bytes, self.src + i * self.row_bytes, self.row_bytes)


def pad_rows(const floating[:, ::1] src, floating[:, ::1] dst, int n_threads):
    """Copy ``src`` (n × K) into the first K columns of ``dst`` (n × ld, ld >= K), in parallel.

    The padded operand of ``onehot_matmat``: its columns past K are left as
    they are (never read).

    Parameters
    ----------
    src : (n, K) C-contiguous
    dst : (n, ld) C-contiguous, same dtype, ld >= K
    n_threads : int
    """
    cdef _PadRows loop = _PadRows()
    if dst.shape[0] != src.shape[0] or dst.shape[1] < src.shape[1]:
        raise ValueError("dst must have src's rows and at least its columns")
    if src.shape[0] == 0 or src.shape[1] == 0:
        return
    loop.src, loop.dst = <const char *>&src[0, 0], <char *>&dst[0, 0]
    loop.n, loop.row_bytes = src.shape[0], src.shape[1] * sizeof(floating)
    loop.dst_row_bytes = dst.shape[1] * sizeof(floating)
    loop.n_chunks, loop.n_threads = (loop.n + PAD_ROWS - 1) // PAD_ROWS, max(1, n_threads)
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


# Rows per chunk of ``block_ranges``.
cdef Py_ssize_t SCAN_ROWS = 8192


cdef class _BlockRanges(ChunkLoop):
    """Per chunk of SCAN_ROWS rows: each block's min and max column, and whether every value equals ``value``."""
    cdef const int32_t *cols
    cdef const void *data
    cdef bint single
    cdef double value
    cdef int32_t *lo      # (n_chunks, G)
    cdef int32_t *hi
    cdef char *same       # (n_chunks,)
    cdef Py_ssize_t N, G

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        cdef Py_ssize_t i0 = c * SCAN_ROWS, i1 = min(self.N, (c + 1) * SCAN_ROWS), i, g, G = self.G
        cdef int32_t *lo = self.lo + c * G
        cdef int32_t *hi = self.hi + c * G
        cdef int32_t v
        cdef bint same = True
        cdef const double *d64 = <const double *>self.data
        cdef const float *d32 = <const float *>self.data
        for g in range(G):
            lo[g] = self.cols[i0 * G + g]
            hi[g] = lo[g]
        for i in range(i0, i1):
            for g in range(G):
                v = self.cols[i * G + g]
                if v < lo[g]:
                    lo[g] = v
                if v > hi[g]:
                    hi[g] = v
        if self.single:
            for i in range(i0 * G, i1 * G):
                same = same & (d32[i] == <float>self.value)
        else:
            for i in range(i0 * G, i1 * G):
                same = same & (d64[i] == self.value)
        self.same[c] = same


def block_ranges(const int32_t[:, ::1] cols, const floating[::1] data, double value, int n_threads):
    """Return (lo, hi, same): each block's smallest and largest column, and whether every value is ``value``.

    The checks of ``onehot_block_structure`` in one parallel pass over Z's
    indices and values (NumPy's reductions along the strided axis were
    most of the set-up of a CG solve).

    Parameters
    ----------
    cols : (N, G) int32, C-contiguous
        Z's CSR indices, row by row (G per row).
    data : (N * G,) float32 or float64
        Z's values.
    value : float
    n_threads : int

    Returns
    -------
    lo, hi : ndarray (G,) int32
    same : bool
    """
    cdef Py_ssize_t N = cols.shape[0], G = cols.shape[1], n_chunks = (N + SCAN_ROWS - 1) // SCAN_ROWS
    cdef _BlockRanges loop = _BlockRanges()
    if data.shape[0] != N * G:
        raise ValueError("data must hold N * G values")
    if N == 0 or G == 0:
        return np.zeros(G, np.int32), np.zeros(G, np.int32), True
    cdef int32_t[:, ::1] lo = np.empty((n_chunks, G), dtype=np.int32)
    cdef int32_t[:, ::1] hi = np.empty((n_chunks, G), dtype=np.int32)
    cdef char[::1] same = np.empty(n_chunks, dtype=np.int8)
    loop.cols, loop.data, loop.single, loop.value = &cols[0, 0], &data[0], floating is float, value
    loop.lo, loop.hi, loop.same, loop.N, loop.G = &lo[0, 0], &hi[0, 0], &same[0], N, G
    loop.n_chunks, loop.n_threads = n_chunks, max(1, n_threads)
    loop.run()
    return np.asarray(lo).min(axis=0), np.asarray(hi).max(axis=0), bool(np.all(np.asarray(same)))


# Rows per chunk of ``local_bins``: the chunk's index rows (ROWS × G int32)
# stay in L2 while each block's column of them is written out.
cdef Py_ssize_t TRANSPOSE_ROWS = 4096


cdef class _LocalBins(ChunkLoop):
    """Local columns cols[i, g] − start[g], block-major (bins[g, i]) or row-major (out[i, g]): chunk = TRANSPOSE_ROWS rows."""
    cdef const int32_t *cols
    cdef const int64_t *start
    cdef void *bins
    cdef bint narrow, row_major
    cdef Py_ssize_t N, G

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        if self.narrow:
            _local_bins_chunk(self, <uint16_t *>self.bins, c)
        else:
            _local_bins_chunk(self, <int32_t *>self.bins, c)


cdef inline void _local_bins_chunk(_LocalBins L, bin_index *bins, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t i0 = c * TRANSPOSE_ROWS, n = min(TRANSPOSE_ROWS, L.N - i0), g, ii, N = L.N, G = L.G
    cdef int32_t s
    if L.row_major:
        for ii in range(i0, i0 + n):
            for g in range(G):
                bins[ii * G + g] = <bin_index>(L.cols[ii * G + g] - L.start[g])
        return
    for g in range(G):
        s = <int32_t>L.start[g]
        for ii in range(n):
            bins[g * N + i0 + ii] = <bin_index>(L.cols[(i0 + ii) * G + g] - s)


cdef _run_local_columns(const int32_t[:, ::1] cols, const int64_t[::1] start, void *out, bint narrow, bint row_major,
                        int n_threads):
    cdef _LocalBins loop = _LocalBins()
    loop.cols, loop.start, loop.bins, loop.N, loop.G = &cols[0, 0], &start[0], out, cols.shape[0], cols.shape[1]
    loop.narrow, loop.row_major = narrow, row_major
    loop.n_chunks, loop.n_threads = (loop.N + TRANSPOSE_ROWS - 1) // TRANSPOSE_ROWS, max(1, n_threads)
    loop.run()


def local_bins(const int32_t[:, ::1] cols, const int64_t[::1] start, bin_index[:, ::1] bins, int n_threads):
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
    bins : (G, N) uint16 or int32, C-contiguous, overwritten
        uint16 only when every block is at most ``NARROW_BLOCK_WIDTH``
        columns wide (the caller guarantees it; ``bins_dtype``).
    n_threads : int
    """
    cdef Py_ssize_t N = cols.shape[0], G = cols.shape[1]
    if bins.shape[0] != G or bins.shape[1] != N or start.shape[0] != G + 1:
        raise ValueError("cols / start / bins shapes do not match")
    if N == 0 or G == 0:
        return
    _run_local_columns(cols, start, &bins[0, 0], bin_index is uint16_t, False, n_threads)


def local_rows(const int32_t[:, ::1] cols, const int64_t[::1] start, uint16_t[:, ::1] out, int n_threads):
    """Write the row-major uint16 local columns ``out[i, g] = cols[i, g] − start[g]``.

    The narrow ``cols`` of ``onehot_matmat``'s row path (2..8 targets): half
    the bytes of Z's int32 indices.

    Parameters
    ----------
    cols : (N, G) int32, C-contiguous
        Z's CSR indices, row by row.
    start : (G + 1,) int64
        Block offsets; the caller guarantees 0 <= cols[i, g] − start[g] <= 65535.
    out : (N, G) uint16, C-contiguous, overwritten
    n_threads : int
    """
    cdef Py_ssize_t N = cols.shape[0], G = cols.shape[1]
    if out.shape[0] != N or out.shape[1] != G or start.shape[0] != G + 1:
        raise ValueError("cols / start / out shapes do not match")
    if N == 0 or G == 0:
        return
    _run_local_columns(cols, start, &out[0, 0], True, True, n_threads)



# Rows per step of ``onehot_gram_block``: each step's tile rows and factors
# (2 × GRAM_ROWS int64 + GRAM_ROWS doubles) stay in L1 while the chunk's
# blocks add to the tile.
cdef Py_ssize_t GRAM_ROWS = 2048
#: Bytes of one chunk's tile in ``onehot_gram_block`` (the first block's
#: chosen columns × a run of later blocks' chosen columns, doubles): within
#: L2, beside the step's rows.
GRAM_TILE_BYTES = 512 << 10


# A tile's entries: sums of weighted rows, or counts of rows (unit weights).
ctypedef fused tile_entry:
    double
    uint32_t


# Fields per chunk of ``_GramBlock``.
cdef Py_ssize_t GRAM_CHUNK_FIELDS = 9


cdef class _GramBlock(ChunkLoop):
    """Σ_i w_i z_i[H] z_i[H]ᵀ of a one-hot block matrix: chunk = one or two first blocks and a run of blocks.

    A chunk sums every row into a private, contiguous tile (its entries
    only, plus one row per first block and one column that take the
    unchosen columns' sums, so the inner loop has no branch), then copies
    the tile's upper-triangle entries into ``out``.  Two first blocks g1,
    g1 + 1 share each read of a later block's bins (the loop's loads and
    index arithmetic, not its additions, are most of its cost).
    """
    cdef const void *bins        # (G, N) block-major, uint16 (narrow) or int32
    cdef bint narrow
    cdef const int64_t *start    # (G + 1,)
    cdef const int32_t *position  # (D,) chosen column's position 0..h−1, or h (not chosen)
    cdef const double *w         # NULL: unit weights
    cdef bint counted            # unit weights summed as uint32 counts of rows
    cdef double value
    cdef double *out             # (h, h)
    cdef Py_ssize_t N, h
    # (n_chunks, GRAM_CHUNK_FIELDS): g1, first g2, one past the last g2, base2, m2, and per
    # first block (up to two) its base and count: base1, n1, base1b, n1b (n1b = −1: one first block)
    cdef const int32_t *chunk

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        if self.narrow:
            _gram_chunk(self, <const uint16_t *>self.bins, c, scratch)
        else:
            _gram_chunk(self, <const int32_t *>self.bins, c, scratch)


cdef inline void _gram_chunk(_GramBlock L, const bin_index *bins, Py_ssize_t c, void *scratch) noexcept nogil:
    if L.counted:
        _gram_sum(L, bins, c, scratch, <uint32_t *>NULL)
    else:
        _gram_sum(L, bins, c, scratch, <double *>NULL)


cdef inline void _gram_sum(_GramBlock L, const bin_index *bins, Py_ssize_t c, void *scratch,
                           tile_entry *kind) noexcept nogil:
    """One chunk: a tile of doubles (weighted rows) or of row counts (unit weights)."""
    cdef const int32_t *ch = L.chunk + GRAM_CHUNK_FIELDS * c
    cdef Py_ssize_t g1 = ch[0], lo = ch[1], hi = ch[2], base2 = ch[3], m2 = ch[4], base1 = ch[5], n1 = ch[6]
    cdef Py_ssize_t base1b = ch[7], n1b = ch[8]
    cdef bint two = n1b >= 0
    cdef Py_ssize_t g2, i0, ii, n, a, b, q, N = L.N, ld = m2 + 1, rows = n1 + 1 + (n1b + 1 if two else 0)
    cdef int64_t *row = <int64_t *>scratch
    cdef int64_t *rowb = row + GRAM_ROWS
    cdef double *f = <double *>(rowb + GRAM_ROWS)
    cdef tile_entry *tile = <tile_entry *>(f + GRAM_ROWS)
    cdef const int32_t *pos1 = L.position + L.start[g1]
    cdef const int32_t *pos1b = L.position + L.start[g1 + 1] if two else pos1
    cdef const int32_t *pos2
    cdef const bin_index *b1
    cdef const bin_index *b2
    cdef double v = L.value, unit = v * v
    memset(tile, 0, rows * ld * sizeof(tile_entry))
    i0 = 0
    while i0 < N:
        n = min(GRAM_ROWS, N - i0)
        b1 = bins + g1 * N + i0
        for ii in range(n):
            # An unchosen column (position h) lands in its block's last tile row.
            row[ii] = <int64_t>min(pos1[b1[ii]] - base1, n1) * ld
            if tile_entry is double:
                # The factors as the CSR kernel (``csr_gram_block``) forms
                # them, (value · w_i) · value, summed in row order: its bits.
                f[ii] = (v * (L.w[i0 + ii] if L.w != NULL else 1.0)) * v
        if two:
            b1 = bins + (g1 + 1) * N + i0
            for ii in range(n):
                rowb[ii] = <int64_t>(n1 + 1 + min(pos1b[b1[ii]] - base1b, n1b)) * ld
            for g2 in range(lo, hi):
                pos2 = L.position + L.start[g2]
                b2 = bins + g2 * N + i0
                for ii in range(n):
                    q = min(pos2[b2[ii]] - base2, m2)
                    if tile_entry is double:
                        tile[row[ii] + q] += f[ii]
                        tile[rowb[ii] + q] += f[ii]
                    else:
                        tile[row[ii] + q] += 1
                        tile[rowb[ii] + q] += 1
        else:
            for g2 in range(lo, hi):
                pos2 = L.position + L.start[g2]
                b2 = bins + g2 * N + i0
                for ii in range(n):
                    if tile_entry is double:
                        tile[row[ii] + min(pos2[b2[ii]] - base2, m2)] += f[ii]
                    else:
                        tile[row[ii] + min(pos2[b2[ii]] - base2, m2)] += 1
        i0 += n
    # The second block's row of tiles from its own columns on: the entries
    # left of them (the first block's columns) are below the diagonal.
    b = max(base1b - base2, 0) if two else 0
    for a in range(rows):
        if a == n1 or a == rows - 1:
            continue  # the unchosen columns' rows
        q = (base1 + a) if a < n1 else (base1b + a - n1 - 1)
        for ii in range(b if a > n1 else 0, m2):
            if tile_entry is double:
                L.out[q * L.h + base2 + ii] = tile[a * ld + ii]
            else:
                # A count times value²: exact counts, one rounding.
                L.out[q * L.h + base2 + ii] = <double>tile[a * ld + ii] * unit


def onehot_gram_block(const bin_index[:, ::1] bins, const int64_t[::1] start, const int32_t[::1] position,
                      Py_ssize_t h, double value, const double[::1] w, int n_threads):
    """Return the upper triangle of the Gram block Σ_i w_i z_i[H] z_i[H]ᵀ of a one-hot block matrix.

    Every row has one nonzero (``value``) per block, so the block's entry
    (a, b) for chosen columns a < b in blocks g1 < g2 sums the rows whose
    bins are a and b; within one block only the diagonal is nonzero.  The
    sums go block pair by block pair over all rows, into a private tile of
    at most ``GRAM_TILE_BYTES`` per chunk, instead of row by row across the
    whole h × h output (one cache miss per update once h × h outgrows the
    cache; measured in DESIGN.md, "The heavy block's Gram on one-hot
    matrices").
    Each entry is summed in row order by one thread, so the result does not
    depend on the thread count.  Weighted rows: the CSR kernel's factors
    (value · w_i) · value in its order, the same bits as ``csr_gram_block``.
    Unit weights: exact uint32 counts of rows, times value² (one rounding,
    not one per row; half the tile's bytes).

    Parameters
    ----------
    bins : (G, N) uint16 or int32, C-contiguous
        Block-major local bins (``local_bins``).
    start : (G + 1,) int64
        Block offsets.
    position : (D,) int32
        Each column's position 0..h−1 in the block (increasing with the
        column), or h for a column not chosen.
    h : int
        Number of chosen columns.
    value : float
        The one stored value, as a double.
    w : (N,) float64 sample weights, or length 0 for unit weights
    n_threads : int

    Returns
    -------
    ndarray of shape (h, h), float64
        The upper triangle (diagonal included) filled, the lower one zero.
    """
    cdef Py_ssize_t G = bins.shape[0], N = bins.shape[1]
    if start.shape[0] != G + 1 or position.shape[0] != start[G]:
        raise ValueError("bins / start / position shapes do not match")
    if w.shape[0] != 0 and w.shape[0] != N:
        raise ValueError("w has the wrong length")
    out = np.zeros((h, h), dtype=np.float64)
    pos = np.asarray(position)
    if N == 0 or G == 0 or h == 0:
        return out
    # Every position addresses the tiles: checked here, O(D).
    if np.min(pos) < 0 or np.max(pos) > h:
        raise ValueError("position must hold values in [0, h]")
    # Chosen columns per block and each block's first position (positions
    # increase with the column, so a block's chosen columns are consecutive).
    chosen = pos < h
    counts = np.add.reduceat(chosen.astype(np.int64), np.asarray(start[:G]))
    first = np.cumsum(counts) - counts
    # 0..h−1 in column order: each tile index (position − its block's first) then lies in its tile.
    if not np.array_equal(pos[chosen], np.arange(h, dtype=pos.dtype)):
        raise ValueError("position must number the chosen columns 0..h−1 in column order")
    # Counts of rows (uint32) for unit weights, while no count can overflow.
    counted = w.shape[0] == 0 and N < 2**32
    entry_bytes = 4 if counted else 8
    chunks = []
    g1 = 0
    while g1 < G:
        # Two first blocks when the next one also has chosen columns.
        pair = g1 + 1 < G and counts[g1 + 1] > 0
        if counts[g1] == 0:
            g1 += 1
            continue
        rows = counts[g1] + 1 + (counts[g1 + 1] + 1 if pair else 0)
        g2 = g1
        while g2 < G:
            hi, m2 = g2, 0
            # A run of blocks whose tile stays within the budget (at least one block).
            while hi < G and (hi == g2 or rows * (m2 + counts[hi] + 1) * entry_bytes <= GRAM_TILE_BYTES):
                m2 += counts[hi]
                hi += 1
            # A run with no chosen columns adds nothing: no chunk.
            if m2:
                chunks.append((g1, g2, hi, first[g2], m2, first[g1], counts[g1],
                               first[g1 + 1] if pair else 0, counts[g1 + 1] if pair else -1))
            g2 = hi
        g1 += 2 if pair else 1
    cdef int32_t[:, ::1] table = np.array(chunks, dtype=np.int32).reshape(-1, GRAM_CHUNK_FIELDS)
    cdef double[:, ::1] out_ = out
    cdef _GramBlock loop = _GramBlock()
    if not chunks:
        return out
    widest = max((c[6] + 1 + c[8] + 1) * (c[4] + 1) for c in chunks)
    loop.bins, loop.narrow, loop.start, loop.position = &bins[0, 0], bin_index is uint16_t, &start[0], &position[0]
    loop.w = &w[0] if w.shape[0] > 0 else NULL
    loop.counted = counted
    loop.value, loop.out, loop.N, loop.h, loop.chunk = value, &out_[0, 0], N, h, &table[0, 0]
    loop.n_chunks, loop.n_threads = len(chunks), max(1, n_threads)
    loop.scratch_bytes = GRAM_ROWS * (2 * sizeof(int64_t) + sizeof(double)) + widest * sizeof(double)
    loop.run()
    return out
