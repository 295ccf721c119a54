# cython: language_level=3
"""Fused random Fourier feature kernel: Z = scale * trig(X @ W (+ b)) in one pass.

The output is cut into tiles of a fixed number of rows by a fixed number of
columns (sizes depend on the output width and dtype only, never on the thread
count).  A chunk of work is one row tile over a run of whole column blocks
(all of them unless the output is very wide).  For each column block a thread
writes X_tile @ W_block straight into the output (dense X: the row-independent
kernel of randfeat_rowgemm.h; CSR: a sparse-rows loop), then turns those
values into scale*cos / scale*sin in place while they are still in L2.  No
N × D temporary is ever made.  Each output element is computed by the same
operations whichever thread computes it and whichever rows are transformed
with it, so a row's features are bit-identical for any thread count and any
split of the rows into calls (chunks, Dask blocks).  The chunks run on
``_openmp.ChunkLoop``, which checks for Ctrl-C between slabs.

Callers (randfeat._fourier_transform) must run these functions under
``randfeat._threads.single_threaded_blas()`` and pass validated input.
"""

cimport cython
from cython cimport floating
from libc.stdint cimport int32_t, int64_t

from ._cycommon cimport gemm, index_t
from ._openmp cimport ChunkLoop

import numpy as np

cdef extern from "randfeat_trig.h" nogil:
    void rf_sincos_f64(double *x, double *s, Py_ssize_t n, double scale)
    void rf_cos_f64(double *x, const double *b, Py_ssize_t n, double scale)
    void rf_sincos_f32(float *x, float *s, Py_ssize_t n, float scale)
    void rf_cos_f32(float *x, const float *b, Py_ssize_t n, float scale)
    int rf_trig_init()
    const char *rf_isa_name(int isa)
    double RF_TRIG_LIMIT_F64
    float RF_TRIG_LIMIT_F32

# Bytes of output one tile may touch: this CPU family's 1 MiB L2, so the
# gemm result is still cached when the trig pass reads it back.  Tiles are
# tall (256 rows) so BLAS packs each block of W once per 256 rows: measured
# 10-20% faster than 64-row tiles for d = 784, no slower for small d.
# A chunk spans at most BLOCKS_PER_CHUNK column blocks (16 MiB of output,
# a few ms), so that very wide outputs still give short chunks.
cdef enum:
    TILE_BYTES = 1024 * 1024
    TILE_ROWS = 256
    MAX_TILE_ROWS = 512
    BLOCKS_PER_CHUNK = 16

cdef extern from "randfeat_rowgemm.h" nogil:
    void rf_rows_xw_f64(const double *X, int64_t sxi, int64_t sxk, int64_t d, const double *W, int64_t ldw,
                        int64_t m, double *out, int64_t ld_out, int64_t n, double *pad)
    void rf_rows_xw_f32(const float *X, int64_t sxi, int64_t sxk, int64_t d, const float *W, int64_t ldw,
                        int64_t m, float *out, int64_t ld_out, int64_t n, float *pad)
    void rf_rows_dot_f64(const double *X, int64_t sxi, int64_t sxk, int64_t d, const double *w,
                         double *out, int64_t ld_out, int64_t n, double *pad)
    void rf_rows_dot_f32(const float *X, int64_t sxi, int64_t sxk, int64_t d, const float *w,
                         float *out, int64_t ld_out, int64_t n, float *pad)
    void rf_rows_packed_f64(const double *X, int64_t sxi, int64_t sxk, int64_t d, const double *Wp,
                            int64_t m, double *out, int64_t ld_out, int64_t n, int64_t rt)
    void rf_rows_packed_f32(const float *X, int64_t sxi, int64_t sxk, int64_t d, const float *Wp,
                            int64_t m, float *out, int64_t ld_out, int64_t n, int64_t rt)
    int rf_rowgemm_init()
    int RF_XW_JB_F32
    int RF_XW_JB_F64

cdef int _ISA = rf_trig_init()
cdef int _ROWGEMM_ISA = rf_rowgemm_init()


def vector_isa():
    """Return the SIMD code path the trig kernels use: 'baseline', 'avx2' or 'avx512'."""
    return rf_isa_name(_ISA).decode()


def trig_limits():
    """Return the largest |argument| the polynomial sin/cos accepts (float64, float32).

    Segments holding a larger argument are computed with libm instead.
    """
    return float(RF_TRIG_LIMIT_F64), float(RF_TRIG_LIMIT_F32)


def tile_shape(Py_ssize_t n_freq, Py_ssize_t itemsize, bint cossin):
    """Return (rows, cols) of a tile: depends on D, dtype and map only.

    ``cols`` frequencies per column block; a cossin tile also writes the
    matching sin columns, so it touches ``2 * rows * cols`` elements.
    """
    cdef Py_ssize_t per_col = itemsize * (2 if cossin else 1)
    cdef Py_ssize_t cols = TILE_BYTES // (TILE_ROWS * per_col)
    cdef Py_ssize_t rows = TILE_ROWS
    if n_freq < cols:
        # Narrow output: spend the budget on more rows (fewer, larger gemms).
        cols = n_freq
        rows = TILE_BYTES // (cols * per_col)
        rows = max(8, min(MAX_TILE_ROWS, rows - rows % 8))
    return rows, cols


cdef inline void _sincos(floating *x, floating *s, Py_ssize_t n, floating scale) noexcept nogil:
    if floating is double:
        rf_sincos_f64(x, s, n, scale)
    else:
        rf_sincos_f32(x, s, n, scale)


cdef inline void _cos(floating *x, const floating *b, Py_ssize_t n, floating scale) noexcept nogil:
    if floating is double:
        rf_cos_f64(x, b, n, scale)
    else:
        rf_cos_f32(x, b, n, scale)


cdef inline void _trig_rows(floating *out, Py_ssize_t ld_out, Py_ssize_t r0, Py_ssize_t r1,
                            Py_ssize_t c0, Py_ssize_t m, Py_ssize_t n_freq,
                            const floating *b, bint cossin, floating scale) noexcept nogil:
    """In place: out[r, c0:c0+m] -> trig, for rows r0..r1 of one column block."""
    cdef Py_ssize_t i
    cdef floating *row
    for i in range(r0, r1):
        row = out + i * ld_out
        if cossin:
            _sincos(row + c0, row + n_freq + c0, m, scale)
        else:
            _cos(row + c0, b + c0, m, scale)


cdef inline void _rows_xw(const floating *X, int64_t sxi, int64_t sxk, int64_t d, const floating *W,
                          int64_t ldw, int64_t m, floating *out, int64_t ld_out, int64_t n,
                          floating *pad) noexcept nogil:
    # pad: _pad_bytes(d, itemsize) of scratch (used when m is not a multiple of the panel width)
    if floating is float:
        rf_rows_xw_f32(X, sxi, sxk, d, W, ldw, m, out, ld_out, n, pad)
    else:
        rf_rows_xw_f64(X, sxi, sxk, d, W, ldw, m, out, ld_out, n, pad)


cdef inline Py_ssize_t _pad_bytes(Py_ssize_t d, Py_ssize_t itemsize) noexcept nogil:
    """Scratch the row-independent kernel needs for a zero-padded W panel."""
    return d * (RF_XW_JB_F32 if itemsize == 4 else RF_XW_JB_F64) * itemsize


cdef void _dense_tile(const floating *X, Py_ssize_t ldx, bint x_colmajor, Py_ssize_t d,
                      const floating *W, Py_ssize_t n_freq, const floating *b,
                      floating *out, Py_ssize_t ld_out, Py_ssize_t r0, Py_ssize_t r1,
                      Py_ssize_t c_lo, Py_ssize_t c_hi, Py_ssize_t col_block, bint cossin,
                      floating scale, floating *pad) noexcept nogil:
    # X @ W by the row-independent kernel (randfeat_rowgemm.h), not BLAS
    # gemm, whose result for a row depends on the rows computed with it:
    # a row's features must not depend on how rows are split into calls.
    cdef int m
    cdef const floating *Xt = (X + r0) if x_colmajor else (X + r0 * ldx)
    cdef int64_t sxi = 1 if x_colmajor else ldx
    cdef int64_t sxk = ldx if x_colmajor else 1
    cdef Py_ssize_t c0 = c_lo
    while c0 < c_hi:  # column blocks
        m = <int>min(col_block, n_freq - c0)
        _rows_xw(Xt, sxi, sxk, d, W + c0, n_freq, m, out + r0 * ld_out + c0, ld_out, r1 - r0, pad)
        _trig_rows(out, ld_out, r0, r1, c0, m, n_freq, b, cossin, scale)
        c0 += col_block


cdef void _csr_tile(const floating *data, const index_t *indices, const index_t *indptr,
                    const floating *W, Py_ssize_t n_freq, const floating *b,
                    floating *out, Py_ssize_t ld_out, Py_ssize_t r0, Py_ssize_t r1,
                    Py_ssize_t c_lo, Py_ssize_t c_hi, Py_ssize_t col_block, bint cossin,
                    floating scale) noexcept nogil:
    cdef Py_ssize_t c0 = c_lo, m, i, j, c
    cdef floating v
    cdef floating *row
    cdef const floating *wrow
    while c0 < c_hi:  # column blocks
        m = min(col_block, n_freq - c0)
        for i in range(r0, r1):
            row = out + i * ld_out + c0
            for c in range(m):
                row[c] = 0
            # Sum of the row's nonzeros times rows of W, in index order.
            for j in range(indptr[i], indptr[i + 1]):
                v = data[j]
                wrow = W + indices[j] * n_freq + c0
                for c in range(m):
                    row[c] += v * wrow[c]
        _trig_rows(out, ld_out, r0, r1, c0, m, n_freq, b, cossin, scale)
        c0 += col_block


cdef class _FourierTiles(ChunkLoop):
    """The tiles of one call; chunk c = row tile c // n_col_chunks, column run c % n_col_chunks."""
    cdef Py_ssize_t n_rows, n_freq, ld_out, tile_rows, col_block, chunk_cols, n_col_chunks
    cdef bint cossin, single
    cdef double scale
    cdef const void *W
    cdef const void *b
    cdef void *out

    cdef void setup(self, Py_ssize_t n_rows, Py_ssize_t n_freq, bint single, bint cossin,
                    double scale, Py_ssize_t tile_rows, Py_ssize_t col_block, int n_threads,
                    const void *W, const void *b, void *out, Py_ssize_t ld_out):
        cdef Py_ssize_t n_blocks = (n_freq + col_block - 1) // col_block
        self.n_rows, self.n_freq, self.single, self.cossin, self.scale = n_rows, n_freq, single, cossin, scale
        self.tile_rows, self.col_block, self.n_threads = tile_rows, col_block, n_threads
        self.W, self.b, self.out, self.ld_out = W, b, out, ld_out
        self.chunk_cols = min(n_blocks, <Py_ssize_t>BLOCKS_PER_CHUNK) * col_block
        self.n_col_chunks = max(1, (n_freq + self.chunk_cols - 1) // self.chunk_cols)
        self.n_chunks = ((n_rows + tile_rows - 1) // tile_rows) * self.n_col_chunks

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        cdef Py_ssize_t r0 = (chunk // self.n_col_chunks) * self.tile_rows
        cdef Py_ssize_t c0 = (chunk % self.n_col_chunks) * self.chunk_cols
        self.tile(r0, min(self.n_rows, r0 + self.tile_rows), c0, min(self.n_freq, c0 + self.chunk_cols), scratch)

    cdef void tile(self, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t c0, Py_ssize_t c1, void *scratch) noexcept nogil:
        pass


cdef class _DenseTiles(_FourierTiles):
    cdef const void *X
    cdef Py_ssize_t ldx, d
    cdef bint colmajor

    cdef void tile(self, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t c0, Py_ssize_t c1, void *scratch) noexcept nogil:
        if self.single:
            _dense_tile(<const float *>self.X, self.ldx, self.colmajor, self.d, <const float *>self.W,
                        self.n_freq, <const float *>self.b, <float *>self.out, self.ld_out, r0, r1,
                        c0, c1, self.col_block, self.cossin, <float>self.scale, <float *>scratch)
        else:
            _dense_tile(<const double *>self.X, self.ldx, self.colmajor, self.d, <const double *>self.W,
                        self.n_freq, <const double *>self.b, <double *>self.out, self.ld_out, r0, r1,
                        c0, c1, self.col_block, self.cossin, self.scale, <double *>scratch)


cdef class _CsrTiles(_FourierTiles):
    cdef const void *data
    cdef const void *indices
    cdef const void *indptr
    cdef bint idx64

    cdef void tile(self, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t c0, Py_ssize_t c1, void *scratch) noexcept nogil:
        # Picks the (value, index) instantiation of _csr_tile for this call's dtypes.
        if self.single and self.idx64:
            _csr_tile(<const float *>self.data, <const int64_t *>self.indices,
                      <const int64_t *>self.indptr, <const float *>self.W, self.n_freq,
                      <const float *>self.b, <float *>self.out, self.ld_out, r0, r1, c0, c1,
                      self.col_block, self.cossin, <float>self.scale)
        elif self.single:
            _csr_tile(<const float *>self.data, <const int32_t *>self.indices,
                      <const int32_t *>self.indptr, <const float *>self.W, self.n_freq,
                      <const float *>self.b, <float *>self.out, self.ld_out, r0, r1, c0, c1,
                      self.col_block, self.cossin, <float>self.scale)
        elif self.idx64:
            _csr_tile(<const double *>self.data, <const int64_t *>self.indices,
                      <const int64_t *>self.indptr, <const double *>self.W, self.n_freq,
                      <const double *>self.b, <double *>self.out, self.ld_out, r0, r1, c0, c1,
                      self.col_block, self.cossin, self.scale)
        else:
            _csr_tile(<const double *>self.data, <const int32_t *>self.indices,
                      <const int32_t *>self.indptr, <const double *>self.W, self.n_freq,
                      <const double *>self.b, <double *>self.out, self.ld_out, r0, r1, c0, c1,
                      self.col_block, self.cossin, self.scale)


def fourier_dense(const floating[:, :] X, const floating[:, ::1] W, const floating[::1] b,
                  floating[:, ::1] out, bint cossin, double scale, int n_threads,
                  Py_ssize_t tile_rows=0, Py_ssize_t col_block=0):
    """out <- scale * [cos(XW), sin(XW)] (cossin) or scale * cos(XW + b), in place.

    ``tile_rows``, ``col_block``: override ``tile_shape`` (for tuning only).

    X must have one unit stride (C-ordered rows or Fortran-ordered columns,
    possibly with a larger leading dimension); ``b`` is ignored for cossin.
    Raises KeyboardInterrupt (``out`` then half written) on Ctrl-C.
    """
    cdef Py_ssize_t N = X.shape[0], d = X.shape[1], n_freq = W.shape[1]
    cdef Py_ssize_t item = sizeof(floating)
    cdef _DenseTiles loop = _DenseTiles()
    if X.strides[1] == item:
        loop.colmajor = False
        loop.ldx = max(d, X.strides[0] // item)
    elif X.strides[0] == item:
        loop.colmajor = True
        loop.ldx = max(N, X.strides[1] // item)
    else:
        raise ValueError("X needs one unit stride; make it contiguous first")
    if W.shape[0] != d or out.shape[0] != N or out.shape[1] != (2 * n_freq if cossin else n_freq):
        raise ValueError("inconsistent shapes of X, W and out")
    if not cossin and b.shape[0] != n_freq:
        raise ValueError("b must have one phase per frequency")
    if N == 0 or n_freq == 0:
        return
    rows, cols = tile_shape(n_freq, item, cossin)
    loop.X, loop.d = &X[0, 0], d
    loop.scratch_bytes = _pad_bytes(d, item)
    loop.setup(N, n_freq, floating is float, cossin, scale, tile_rows if tile_rows > 0 else rows,
               col_block if col_block > 0 else cols, n_threads, &W[0, 0],
               &b[0] if b.shape[0] > 0 else NULL, &out[0, 0], out.shape[1])
    loop.run()


def fourier_csr(const floating[::1] data, const index_t[::1] indices, const index_t[::1] indptr,
                const floating[:, ::1] W, const floating[::1] b, floating[:, ::1] out,
                bint cossin, double scale, int n_threads):
    """Same as fourier_dense for a canonical CSR matrix (data, indices, indptr)."""
    cdef Py_ssize_t N = indptr.shape[0] - 1, n_freq = W.shape[1]
    cdef _CsrTiles loop = _CsrTiles()
    if out.shape[0] != N or out.shape[1] != (2 * n_freq if cossin else n_freq):
        raise ValueError("inconsistent shapes of X, W and out")
    if not cossin and b.shape[0] != n_freq:
        raise ValueError("b must have one phase per frequency")
    if N == 0 or n_freq == 0:
        return
    rows, cols = tile_shape(n_freq, sizeof(floating), cossin)
    # An all-zero matrix may have empty data/indices: pass a valid pointer anyway.
    loop.data = &data[0] if data.shape[0] > 0 else <const void *>&W[0, 0]
    loop.indices = &indices[0] if indices.shape[0] > 0 else <const void *>&indptr[0]
    loop.indptr = &indptr[0]
    loop.idx64 = index_t is int64_t
    loop.setup(N, n_freq, floating is float, cossin, scale, rows, cols, n_threads, &W[0, 0],
               &b[0] if b.shape[0] > 0 else NULL, &out[0, 0], out.shape[1])
    loop.run()


def sincos(floating[::1] x, floating[::1] s, double scale=1.0):
    """Test hook: x <- scale*cos(x), s <- scale*sin(x) with the dispatched kernel."""
    if s.shape[0] != x.shape[0]:
        raise ValueError("x and s must have the same length")
    if x.shape[0] == 0:
        return
    _sincos(&x[0], &s[0], x.shape[0], <floating>scale)


def cos_shifted(floating[::1] x, const floating[::1] b, double scale=1.0):
    """Test hook: x <- scale*cos(x + b) with the dispatched kernel."""
    if b.shape[0] != x.shape[0]:
        raise ValueError("x and b must have the same length")
    if x.shape[0] == 0:
        return
    _cos(&x[0], &b[0], x.shape[0], <floating>scale)


cdef class _RowProducts(ChunkLoop):
    """out = X @ W in fixed tiles of rows, each by the row-independent kernel."""
    cdef const void *X
    cdef const void *W
    cdef const void *packed      # W as panels (``_packed_panels``), or NULL
    cdef void *out
    cdef int64_t sxi, sxk, d, m, ld_out, n_rows, sub_rows
    cdef bint single

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        cdef int64_t r0 = chunk * _PRODUCT_TILE_ROWS
        cdef int64_t n = min(self.n_rows - r0, <int64_t>_PRODUCT_TILE_ROWS)
        if self.packed != NULL:
            # Several columns, W packed once for all tiles (``_packed_panels``).
            if self.single:
                rf_rows_packed_f32(<const float *>self.X + r0 * self.sxi, self.sxi, self.sxk, self.d,
                                   <const float *>self.packed, self.m, <float *>self.out + r0 * self.ld_out,
                                   self.ld_out, n, self.sub_rows)
            else:
                rf_rows_packed_f64(<const double *>self.X + r0 * self.sxi, self.sxi, self.sxk, self.d,
                                   <const double *>self.packed, self.m, <double *>self.out + r0 * self.ld_out,
                                   self.ld_out, n, self.sub_rows)
            return
        # One column: a dot product per row.
        if self.single:
            rf_rows_dot_f32(<const float *>self.X + r0 * self.sxi, self.sxi, self.sxk, self.d,
                            <const float *>self.W, <float *>self.out + r0 * self.ld_out, self.ld_out, n,
                            <float *>scratch)
        else:
            rf_rows_dot_f64(<const double *>self.X + r0 * self.sxi, self.sxi, self.sxk, self.d,
                            <const double *>self.W, <double *>self.out + r0 * self.ld_out, self.ld_out, n,
                            <double *>scratch)


# Rows per chunk of ``row_products``: fixed, so results never depend on n_threads.
cdef enum:
    _PRODUCT_TILE_ROWS = 256
# Rows taken at a time by the packed-panel path: RT·d values within this
# many bytes (L2's quarter), so each panel passes over rows held in L2.
cdef Py_ssize_t _SUB_TILE_BYTES = 256 * 1024


def _packed_panels(W, Py_ssize_t jb):
    """W (d × m) as ceil(m / jb) contiguous d × jb panels, zero past column m."""
    d, m = W.shape
    n_panels = (m + jb - 1) // jb
    padded = np.zeros((d, n_panels * jb), dtype=W.dtype)
    padded[:, :m] = W
    return np.ascontiguousarray(padded.reshape(d, n_panels, jb).transpose(1, 0, 2))


def row_products(const floating[:, :] X, const floating[:, ::1] W, floating[:, ::1] out, int n_threads):
    """out <- X @ W, each row's result independent of the other rows and of ``n_threads``.

    The product of the dense Fourier kernel, for other callers (``Ridge``'s
    predictions): unlike BLAS gemm, a row gets the same bits whichever rows
    are multiplied with it.  X must have one unit stride (C-ordered rows or
    Fortran-ordered columns).
    """
    cdef Py_ssize_t N = X.shape[0], d = X.shape[1], m = W.shape[1]
    cdef Py_ssize_t item = sizeof(floating)
    cdef _RowProducts loop = _RowProducts()
    if W.shape[0] != d or out.shape[0] != N or out.shape[1] != m:
        raise ValueError("inconsistent shapes of X, W and out")
    if N == 0 or m == 0:
        return
    if d == 0:
        out[:, :] = 0
        return
    if X.strides[1] == item and X.strides[0] >= d * item and X.strides[0] % item == 0:
        loop.sxi, loop.sxk = X.strides[0] // item, 1
    elif X.strides[0] == item and X.strides[1] >= N * item and X.strides[1] % item == 0:
        loop.sxi, loop.sxk = 1, X.strides[1] // item
    else:
        raise ValueError("X needs one positive unit stride; make it contiguous first")
    loop.X, loop.W, loop.out = &X[0, 0], &W[0, 0], &out[0, 0]
    loop.d, loop.m, loop.ld_out, loop.n_rows = d, m, out.shape[1], N
    loop.single = floating is float
    loop.n_threads = n_threads
    loop.n_chunks = (N + _PRODUCT_TILE_ROWS - 1) // _PRODUCT_TILE_ROWS
    loop.packed = NULL
    if m > 1:
        # W packed once (a copy of d·m values) instead of per tile and panel.
        panels = _packed_panels(np.asarray(W), RF_XW_JB_F32 if floating is float else RF_XW_JB_F64)
        loop.packed = <const void *>(<size_t>panels.ctypes.data)
        loop.sub_rows = max(6, _SUB_TILE_BYTES // max(1, d * item) // 6 * 6)
    else:
        loop.scratch_bytes = _pad_bytes(d, item)
    loop.run()
