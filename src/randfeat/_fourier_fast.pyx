# cython: language_level=3
"""Fused random Fourier feature kernel: Z = scale * trig(X @ W (+ b)) in one pass.

The output is cut into tiles of a fixed number of rows by a fixed number of
columns (sizes depend on the output width and dtype only, never on the thread
count).  OpenMP threads take row tiles; for each column block of its tile a
thread writes X_tile @ W_block straight into the output with a
single-threaded BLAS gemm (or a sparse-rows loop for CSR input), then turns
those values into scale*cos / scale*sin in place while they are still in L2.
No N × D temporary is ever made; the only extra memory is BLAS's packing
buffers.  Each output element is computed by the same operations whichever
thread computes it, so the output is bit-identical for any thread count.

Callers (randfeat._fourier_transform) must run these functions under
``randfeat._threads.single_threaded_blas()`` and pass validated input.
"""

cimport cython
from cython cimport floating
from cython.parallel cimport parallel, prange
from scipy.linalg.cython_blas cimport dgemm, sgemm

cdef extern from "randfeat_trig.h" nogil:
    void rf_sincos_f64(double *x, double *s, Py_ssize_t n, double scale)
    void rf_cos_f64(double *x, const double *b, Py_ssize_t n, double scale)
    void rf_sincos_f32(float *x, float *s, Py_ssize_t n, float scale)
    void rf_cos_f32(float *x, const float *b, Py_ssize_t n, float scale)
    int rf_trig_init()
    const char *rf_isa_name(int isa)
    double RF_TRIG_LIMIT_F64
    float RF_TRIG_LIMIT_F32

ctypedef fused index_t:
    int
    long long

# Bytes of output one tile may touch: this CPU family's 1 MiB L2, so the
# gemm result is still cached when the trig pass reads it back.  Tiles are
# tall (256 rows) so BLAS packs each block of W once per 256 rows: measured
# 10-20% faster than 64-row tiles for d = 784, no slower for small d.
cdef enum:
    TILE_BYTES = 1024 * 1024
    TILE_ROWS = 256
    MAX_TILE_ROWS = 512

cdef int _ISA = rf_trig_init()


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


cdef inline void _trig_rows(floating *out, Py_ssize_t ld_out, Py_ssize_t r0, Py_ssize_t r1,
                            Py_ssize_t c0, Py_ssize_t m, Py_ssize_t n_freq,
                            const floating *b, bint cossin, floating scale) noexcept nogil:
    """In place: out[r, c0:c0+m] -> trig, for rows r0..r1 of one column block."""
    cdef Py_ssize_t i
    cdef floating *row
    for i in range(r0, r1):
        row = out + i * ld_out
        if floating is double:
            if cossin:
                rf_sincos_f64(row + c0, row + n_freq + c0, m, scale)
            else:
                rf_cos_f64(row + c0, b + c0, m, scale)
        else:
            if cossin:
                rf_sincos_f32(row + c0, row + n_freq + c0, m, scale)
            else:
                rf_cos_f32(row + c0, b + c0, m, scale)


cdef void _dense_tile(const floating *X, Py_ssize_t ldx, bint x_colmajor, Py_ssize_t d,
                      const floating *W, Py_ssize_t n_freq, const floating *b,
                      floating *out, Py_ssize_t ld_out, Py_ssize_t r0, Py_ssize_t r1,
                      Py_ssize_t col_block, bint cossin, floating scale) noexcept nogil:
    # Row-major out = X @ W is column-major outᵀ = Wᵀ @ Xᵀ, and a row-major
    # W (d × n_freq) is the column-major Wᵀ: so gemm('N', ·) with A = W and
    # B = X (transposed by gemm when X is Fortran-ordered).
    cdef char transa = b'N'
    cdef char transb = b'T' if x_colmajor else b'N'
    cdef int m, n = <int>(r1 - r0), k = <int>d
    cdef int lda = <int>n_freq, ldb = <int>ldx, ldc = <int>ld_out
    cdef floating alpha = 1, beta = 0
    cdef const floating *Xt = (X + r0) if x_colmajor else (X + r0 * ldx)
    cdef Py_ssize_t c0 = 0
    while c0 < n_freq:  # column blocks
        m = <int>min(col_block, n_freq - c0)
        if floating is double:
            dgemm(&transa, &transb, &m, &n, &k, &alpha, <double *>(W + c0), &lda,
                  <double *>Xt, &ldb, &beta, out + r0 * ld_out + c0, &ldc)
        else:
            sgemm(&transa, &transb, &m, &n, &k, &alpha, <float *>(W + c0), &lda,
                  <float *>Xt, &ldb, &beta, out + r0 * ld_out + c0, &ldc)
        _trig_rows(out, ld_out, r0, r1, c0, m, n_freq, b, cossin, scale)
        c0 += col_block


cdef void _csr_tile(const floating *data, const index_t *indices, const index_t *indptr,
                    const floating *W, Py_ssize_t n_freq, const floating *b,
                    floating *out, Py_ssize_t ld_out, Py_ssize_t r0, Py_ssize_t r1,
                    Py_ssize_t col_block, bint cossin, floating scale) noexcept nogil:
    cdef Py_ssize_t c0 = 0, m, i, j, c
    cdef floating v
    cdef floating *row
    cdef const floating *wrow
    while c0 < n_freq:  # column blocks
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


@cython.boundscheck(False)
@cython.wraparound(False)
def fourier_dense(const floating[:, :] X, const floating[:, ::1] W, const floating[::1] b,
                  floating[:, ::1] out, bint cossin, double scale, int n_threads,
                  Py_ssize_t tile_rows=0, Py_ssize_t col_block=0):
    """out <- scale * [cos(XW), sin(XW)] (cossin) or scale * cos(XW + b), in place.

    ``tile_rows``, ``col_block``: override ``tile_shape`` (for tuning only).

    X must have one unit stride (C-ordered rows or Fortran-ordered columns,
    possibly with a larger leading dimension); ``b`` is ignored for cossin.
    """
    cdef Py_ssize_t N = X.shape[0], d = X.shape[1], n_freq = W.shape[1]
    cdef Py_ssize_t item = sizeof(floating)
    cdef bint colmajor
    cdef Py_ssize_t ldx
    if X.strides[1] == item:
        colmajor = False
        ldx = max(d, X.strides[0] // item)
    elif X.strides[0] == item:
        colmajor = True
        ldx = max(N, X.strides[1] // item)
    else:
        raise ValueError("X needs one unit stride; make it contiguous first")
    if W.shape[0] != d or out.shape[0] != N or out.shape[1] != (2 * n_freq if cossin else n_freq):
        raise ValueError("inconsistent shapes of X, W and out")
    if not cossin and b.shape[0] != n_freq:
        raise ValueError("b must have one phase per frequency")
    rows, cols = tile_shape(n_freq, item, cossin)
    if tile_rows <= 0:
        tile_rows = rows
    if col_block <= 0:
        col_block = cols
    cdef Py_ssize_t n_tiles = (N + tile_rows - 1) // tile_rows
    cdef Py_ssize_t t, r0
    cdef floating fscale = <floating>scale
    cdef const floating *bp = &b[0] if b.shape[0] > 0 else NULL
    with nogil, parallel(num_threads=n_threads):
        for t in prange(n_tiles, schedule='dynamic'):
            r0 = t * tile_rows
            _dense_tile(&X[0, 0], ldx, colmajor, d, &W[0, 0], n_freq, bp,
                        &out[0, 0], out.shape[1], r0, min(N, r0 + tile_rows),
                        col_block, cossin, fscale)


@cython.boundscheck(False)
@cython.wraparound(False)
def fourier_csr(const floating[::1] data, const index_t[::1] indices, const index_t[::1] indptr,
                const floating[:, ::1] W, const floating[::1] b, floating[:, ::1] out,
                bint cossin, double scale, int n_threads):
    """Same as fourier_dense for a canonical CSR matrix (data, indices, indptr)."""
    cdef Py_ssize_t N = indptr.shape[0] - 1, n_freq = W.shape[1]
    cdef Py_ssize_t item = sizeof(floating)
    if out.shape[0] != N or out.shape[1] != (2 * n_freq if cossin else n_freq):
        raise ValueError("inconsistent shapes of X, W and out")
    if not cossin and b.shape[0] != n_freq:
        raise ValueError("b must have one phase per frequency")
    rows, cols = tile_shape(n_freq, item, cossin)
    cdef Py_ssize_t tile_rows = rows, col_block = cols
    cdef Py_ssize_t n_tiles = (N + tile_rows - 1) // tile_rows
    cdef Py_ssize_t t, r0
    cdef floating fscale = <floating>scale
    cdef const floating *bp = &b[0] if b.shape[0] > 0 else NULL
    # An all-zero matrix may have empty data/indices: pass a valid pointer anyway.
    cdef const floating *dp = &data[0] if data.shape[0] > 0 else &W[0, 0]
    cdef const index_t *ip = &indices[0] if indices.shape[0] > 0 else &indptr[0]
    with nogil, parallel(num_threads=n_threads):
        for t in prange(n_tiles, schedule='dynamic'):
            r0 = t * tile_rows
            _csr_tile(dp, ip, &indptr[0], &W[0, 0], n_freq, bp, &out[0, 0], out.shape[1],
                      r0, min(N, r0 + tile_rows), col_block, cossin, fscale)


def sincos(floating[::1] x, floating[::1] s, double scale=1.0):
    """Test hook: x <- scale*cos(x), s <- scale*sin(x) with the dispatched kernel."""
    if s.shape[0] != x.shape[0]:
        raise ValueError("x and s must have the same length")
    if x.shape[0] == 0:
        return
    if floating is double:
        rf_sincos_f64(&x[0], &s[0], x.shape[0], scale)
    else:
        rf_sincos_f32(&x[0], &s[0], x.shape[0], <float>scale)


def cos_shifted(floating[::1] x, const floating[::1] b, double scale=1.0):
    """Test hook: x <- scale*cos(x + b) with the dispatched kernel."""
    if b.shape[0] != x.shape[0]:
        raise ValueError("x and b must have the same length")
    if x.shape[0] == 0:
        return
    if floating is double:
        rf_cos_f64(&x[0], &b[0], x.shape[0], scale)
    else:
        rf_cos_f32(&x[0], &b[0], x.shape[0], <float>scale)
