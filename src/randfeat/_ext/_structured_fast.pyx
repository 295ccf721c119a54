# cython: language_level=3
"""Structured random Fourier features (SORF, Fastfood) on a compiled Walsh-Hadamard transform.

For each row: the row densified into per-thread scratch (dense X read
through its strides, a CSR row scattered), zero-padded to n = 2^log_n;
then, for all blocks of n frequencies at once, ``H D1 H D2 H D3 x`` (SORF)
or ``H G P H B x`` (Fastfood) in that scratch; then ``a = mult * y`` and
the sin/cos of ``randfeat_trig.h`` written straight into the output row
(``randfeat_fwht.h`` has the method).  Rows are independent: a chunk is a
fixed number of rows, each computed by the same code whatever thread takes
it, so the output is bit-identical for any ``n_threads`` and any split of
the rows into calls; a CSR row gives the bits of the same dense row.

Callers (``randfeat._maps.structured``) pass validated input and the
parameters laid out by ``structured_layout``: every diagonal of length
``len`` (zero past the drawn blocks), ``perm`` with indices below ``len``.
"""

cimport cython
from cython cimport floating
from libc.stdint cimport int32_t, int64_t, uintptr_t
from libc.string cimport memcpy, memset

from ._cycommon cimport index_t
from ._openmp cimport ChunkLoop

import numpy as np

cdef extern from "randfeat_fwht.h" nogil:
    ctypedef struct rf_struct_f32:
        int64_t n, log_n, len, d, n_freq
        int kind, epilogue, odd
        const float *diag0
        const float *diag1
        const float *diag2
        const int32_t *perm
        const float *mult
        const float *b
        float phase, scale
    ctypedef struct rf_struct_f64:
        int64_t n, log_n, len, d, n_freq
        int kind, epilogue, odd
        const double *diag0
        const double *diag1
        const double *diag2
        const int32_t *perm
        const double *mult
        const double *b
        double phase, scale
    void rf_struct_row_f32(const rf_struct_f32 *p, float *xrow, float *R, float *P, float *out)
    void rf_struct_row_f64(const rf_struct_f64 *p, double *xrow, double *R, double *P, double *out)
    void rf_fwht_blocks_f32(float *buf, int64_t len, int log_n)
    void rf_fwht_blocks_f64(double *buf, int64_t len, int log_n)
    int64_t rf_struct_chunk(int64_t n, int64_t len, int64_t itemsize)
    int64_t rf_struct_scratch_values(int64_t n, int64_t len, int64_t itemsize)
    void rf_sincos_f32(float *x, float *s, Py_ssize_t n, float scale)
    void rf_sincos_f64(double *x, double *s, Py_ssize_t n, double scale)
    int rf_struct_init()
    const char *rf_isa_name(int isa)
    int RF_FWHT_LANES
    int RF_FWHT_ALIGN
    int RF_STRUCT_SORF
    int RF_STRUCT_FASTFOOD
    int RF_EPI_ARGS
    int RF_EPI_COSSIN
    int RF_EPI_COS

cdef int _ISA = rf_struct_init()

#: Buffer lengths are multiples of max(block size, LANES) (``structured_layout``).
LANES = RF_FWHT_LANES
#: Byte alignment the diagonals need (``aligned_zeros``).
ALIGN = RF_FWHT_ALIGN
_KINDS = {"sorf": RF_STRUCT_SORF, "fastfood": RF_STRUCT_FASTFOOD}
_EPILOGUES = {"args": RF_EPI_ARGS, "cossin": RF_EPI_COSSIN, "cos": RF_EPI_COS}

# Output bytes per chunk of rows: a fixed size (it depends on the output
# width and dtype only, never on the thread count), small enough for short
# chunks and load balance, large enough that scheduling costs nothing.
cdef Py_ssize_t CHUNK_BYTES = 512 * 1024


def aligned_zeros(Py_ssize_t n, dtype):
    """Return a zero-filled 1-D array of n values of ``dtype`` whose data is ``ALIGN``-byte aligned.

    The diagonals passed to the kernels must be aligned so (the transform
    reads them as whole vectors).
    """
    dtype = np.dtype(dtype)
    raw = np.zeros(n * dtype.itemsize + RF_FWHT_ALIGN, dtype=np.uint8)
    offset = (-raw.ctypes.data) % RF_FWHT_ALIGN
    return raw[offset : offset + n * dtype.itemsize].view(dtype)


cdef inline bint _is_aligned(const void *p) noexcept nogil:
    return (<uintptr_t>p) % RF_FWHT_ALIGN == 0


def vector_isa():
    """Return the SIMD code path of the transform and its trig: 'baseline', 'avx2' or 'avx512'."""
    return rf_isa_name(_ISA).decode()


cdef inline floating *_aligned(void *p, Py_ssize_t offset_values, floating *dummy) noexcept nogil:
    cdef uintptr_t a = <uintptr_t>p
    a = (a + RF_FWHT_ALIGN - 1) & ~(<uintptr_t>(RF_FWHT_ALIGN - 1))
    return (<floating *>a) + offset_values


cdef inline void _dense_row(const floating *X, int64_t sxi, int64_t sxk, Py_ssize_t i, Py_ssize_t d,
                            Py_ssize_t n, floating *xrow) noexcept nogil:
    cdef Py_ssize_t k
    cdef const floating *x = X + i * sxi
    for k in range(d):
        xrow[k] = x[k * sxk]
    for k in range(d, n):
        xrow[k] = 0


cdef inline void _csr_row(const floating *data, const index_t *indices, const index_t *indptr, Py_ssize_t i,
                          Py_ssize_t n, floating *xrow) noexcept nogil:
    cdef index_t j
    memset(xrow, 0, n * sizeof(floating))
    for j in range(indptr[i], indptr[i + 1]):
        xrow[indices[j]] += data[j]


cdef class _StructuredRows(ChunkLoop):
    """chunk c = rows [c * tile_rows, (c + 1) * tile_rows), one row at a time."""
    cdef rf_struct_f32 p32
    cdef rf_struct_f64 p64
    cdef bint single, csr, idx64
    cdef const void *X
    cdef int64_t sxi, sxk
    cdef const void *data
    cdef const void *indices
    cdef const void *indptr
    cdef void *out
    cdef Py_ssize_t ld_out, n_rows, tile_rows, per, length, n, d

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        cdef Py_ssize_t r0 = chunk * self.tile_rows
        cdef Py_ssize_t r1 = min(self.n_rows, r0 + self.tile_rows)
        if self.single:
            _rows(self, r0, r1, _aligned(scratch, 0, <float *>NULL))
        else:
            _rows(self, r0, r1, _aligned(scratch, 0, <double *>NULL))


cdef void _rows(_StructuredRows self, Py_ssize_t r0, Py_ssize_t r1, floating *xrow) noexcept nogil:
    cdef floating *R = xrow + self.per
    cdef floating *P = R + rf_struct_chunk(self.n, self.length, sizeof(floating))
    cdef floating *out = <floating *>self.out
    cdef Py_ssize_t i
    for i in range(r0, r1):
        if not self.csr:
            _dense_row(<const floating *>self.X, self.sxi, self.sxk, i, self.d, self.n, xrow)
        elif self.idx64:
            _csr_row(<const floating *>self.data, <const int64_t *>self.indices,
                     <const int64_t *>self.indptr, i, self.n, xrow)
        else:
            _csr_row(<const floating *>self.data, <const int32_t *>self.indices,
                     <const int32_t *>self.indptr, i, self.n, xrow)
        if floating is float:
            rf_struct_row_f32(&self.p32, xrow, R, P, out + i * self.ld_out)
        else:
            rf_struct_row_f64(&self.p64, xrow, R, P, out + i * self.ld_out)


def _output_width(Py_ssize_t n_freq, str epilogue, bint odd):
    if epilogue == "cossin":
        return 2 * n_freq - (1 if odd else 0)
    return n_freq


cdef _StructuredRows _setup(Py_ssize_t N, Py_ssize_t d, int log_n, const floating[::1] diag0,
                            const floating[::1] diag1, const floating[::1] diag2, const int32_t[::1] perm,
                            const floating[::1] mult, const floating[::1] b, floating[:, ::1] out,
                            str kind, str epilogue, bint odd, double phase, double scale, int n_threads):
    """Check the parameters against each other and fill the loop (no row is computed)."""
    cdef _StructuredRows loop = _StructuredRows()
    cdef Py_ssize_t n, per, length = diag0.shape[0], n_freq = mult.shape[0], item = sizeof(floating)
    if kind not in _KINDS or epilogue not in _EPILOGUES:
        raise ValueError(f"unknown kind {kind!r} or epilogue {epilogue!r}")
    if not 0 <= log_n <= 30:
        raise ValueError("log_n must be in [0, 30]")
    n = 1 << log_n
    per = max(n, RF_FWHT_LANES)
    if d > n:
        raise ValueError(f"{d} input features do not fit a block of {n}")
    if length == 0 or length % per or n_freq > length or n_freq == 0:
        raise ValueError("the diagonals' length must be a positive multiple of max(n, LANES) holding n_freq values")
    if diag1.shape[0] != length or (kind == "sorf" and diag2.shape[0] != length):
        raise ValueError("every diagonal must have the same length")
    if not (_is_aligned(&diag0[0]) and _is_aligned(&diag1[0]) and (kind != "sorf" or _is_aligned(&diag2[0]))):
        raise ValueError(f"the diagonals must be {RF_FWHT_ALIGN}-byte aligned (use aligned_zeros)")
    if kind == "fastfood":
        if perm.shape[0] != length:
            raise ValueError("perm must have one index per value of the buffer")
        p = np.asarray(perm)
        if p.min() < 0 or p.max() >= length:
            raise ValueError("perm holds an index outside the buffer")
    if epilogue == "cos" and b.shape[0] != n_freq:
        raise ValueError("b must have one phase per frequency")
    if odd and (epilogue != "cossin" or n_freq < 1):
        raise ValueError("odd applies to the cossin epilogue only")
    if out.shape[0] != N or out.shape[1] != _output_width(n_freq, epilogue, odd):
        raise ValueError("out has the wrong shape")
    loop.single = floating is float
    loop.n, loop.d, loop.per, loop.length, loop.n_rows, loop.ld_out = n, d, per, length, N, out.shape[1]
    loop.out = &out[0, 0] if N > 0 else NULL
    loop.n_threads = n_threads
    loop.tile_rows = max(1, CHUNK_BYTES // max(1, out.shape[1] * item))
    loop.n_chunks = (N + loop.tile_rows - 1) // loop.tile_rows
    loop.scratch_bytes = rf_struct_scratch_values(n, length, item) * item + 2 * RF_FWHT_ALIGN
    if floating is float:
        loop.p32.n, loop.p32.log_n, loop.p32.len, loop.p32.d, loop.p32.n_freq = n, log_n, length, d, n_freq
        loop.p32.kind, loop.p32.epilogue, loop.p32.odd = _KINDS[kind], _EPILOGUES[epilogue], odd
        loop.p32.diag0, loop.p32.diag1 = &diag0[0], &diag1[0]
        loop.p32.diag2 = &diag2[0] if kind == "sorf" else NULL
        loop.p32.perm = &perm[0] if kind == "fastfood" else NULL
        loop.p32.mult = &mult[0]
        loop.p32.b = &b[0] if epilogue == "cos" else NULL
        loop.p32.phase, loop.p32.scale = <float>phase, <float>scale
    else:
        loop.p64.n, loop.p64.log_n, loop.p64.len, loop.p64.d, loop.p64.n_freq = n, log_n, length, d, n_freq
        loop.p64.kind, loop.p64.epilogue, loop.p64.odd = _KINDS[kind], _EPILOGUES[epilogue], odd
        loop.p64.diag0, loop.p64.diag1 = &diag0[0], &diag1[0]
        loop.p64.diag2 = &diag2[0] if kind == "sorf" else NULL
        loop.p64.perm = &perm[0] if kind == "fastfood" else NULL
        loop.p64.mult = &mult[0]
        loop.p64.b = &b[0] if epilogue == "cos" else NULL
        loop.p64.phase, loop.p64.scale = phase, scale
    return loop


def structured_dense(const floating[:, :] X, int log_n, const floating[::1] diag0, const floating[::1] diag1,
                     const floating[::1] diag2, const int32_t[::1] perm, const floating[::1] mult,
                     const floating[::1] b, floating[:, ::1] out, str kind, str epilogue, bint odd,
                     double phase, double scale, int n_threads):
    """out <- the structured features of the dense rows of X, in place.

    Parameters
    ----------
    X : (N, d) array of float32 or float64, any strides
    log_n : int
        Block size n = 2**log_n >= d.
    diag0, diag1, diag2 : (len,) arrays of X's dtype
        SORF: D3, D2, D1 (applied in that order); Fastfood: B, G (diag2 unused).
    perm : (len,) int32
        Fastfood's gather indices (unused, may be empty, for SORF).
    mult : (n_freq,) array
        a_j = mult_j * y_j.
    b : (n_freq,) array
        Phases of the ``cos`` epilogue (may be empty otherwise).
    out : (N, width) C-ordered array of X's dtype
        width: n_freq (``cos``, ``args``), 2 n_freq (``cossin``), 2 n_freq - 1 (``cossin``, odd).
    kind : {'sorf', 'fastfood'}
    epilogue : {'cossin', 'cos', 'args'}
    odd : bool
        cossin of an odd width: the last frequency gives sqrt(2) cos(a + phase).
    phase, scale : float
    n_threads : int

    Raises KeyboardInterrupt (``out`` then half written) on Ctrl-C.
    """
    cdef Py_ssize_t item = sizeof(floating)
    if X.strides[0] % item or X.strides[1] % item:
        raise ValueError("X's strides must be multiples of its itemsize")
    cdef _StructuredRows loop = _setup(X.shape[0], X.shape[1], log_n, diag0, diag1, diag2, perm, mult, b, out,
                                       kind, epilogue, odd, phase, scale, n_threads)
    if X.shape[0] == 0:
        return
    loop.csr = False
    loop.X = &X[0, 0] if X.shape[1] > 0 else <const void *>&diag0[0]
    loop.sxi, loop.sxk = X.strides[0] // item, X.strides[1] // item
    loop.run()


def structured_csr(const floating[::1] data, const index_t[::1] indices, const index_t[::1] indptr,
                   Py_ssize_t n_features, int log_n, const floating[::1] diag0, const floating[::1] diag1,
                   const floating[::1] diag2, const int32_t[::1] perm, const floating[::1] mult,
                   const floating[::1] b, floating[:, ::1] out, str kind, str epilogue, bint odd,
                   double phase, double scale, int n_threads):
    """Same as ``structured_dense`` for a canonical CSR matrix (data, indices, indptr) of n_features columns.

    Each row is densified into scratch and computed by the dense path's code:
    the same bits as the dense row.
    """
    cdef Py_ssize_t N = indptr.shape[0] - 1
    cdef _StructuredRows loop = _setup(N, n_features, log_n, diag0, diag1, diag2, perm, mult, b, out,
                                       kind, epilogue, odd, phase, scale, n_threads)
    if N == 0:
        return
    loop.csr = True
    loop.idx64 = index_t is int64_t
    # An all-zero matrix may have empty data/indices: pass a valid pointer anyway.
    loop.data = &data[0] if data.shape[0] > 0 else <const void *>&diag0[0]
    loop.indices = &indices[0] if indices.shape[0] > 0 else <const void *>&indptr[0]
    loop.indptr = &indptr[0]
    loop.run()


def fwht_blocks(floating[::1] buf, int log_n):
    """Test hook: every block of 2**log_n values of buf <- its Walsh-Hadamard transform (unnormalised), in place.

    ``len(buf)`` must be a multiple of max(2**log_n, LANES).
    """
    cdef Py_ssize_t per
    if not 0 <= log_n <= 30:
        raise ValueError("log_n must be in [0, 30]")
    per = max(1 << log_n, RF_FWHT_LANES)
    if buf.shape[0] == 0 or buf.shape[0] % per:
        raise ValueError("len(buf) must be a positive multiple of max(2**log_n, LANES)")
    work = aligned_zeros(buf.shape[0], np.float32 if floating is float else np.float64)
    cdef floating[::1] w = work
    w[:] = buf
    if floating is float:
        rf_fwht_blocks_f32(&w[0], w.shape[0], log_n)
    else:
        rf_fwht_blocks_f64(&w[0], w.shape[0], log_n)
    buf[:] = w


cdef class _TrigFloor(ChunkLoop):
    """Every row of out <- scale [cos a, sin a] for one cached argument row a (the benchmarks' floor)."""
    cdef const void *a
    cdef void *out
    cdef Py_ssize_t n_freq, tile_rows, n_rows
    cdef bint single
    cdef double scale

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        cdef Py_ssize_t i, r0 = chunk * self.tile_rows
        cdef Py_ssize_t r1 = min(self.n_rows, r0 + self.tile_rows)
        cdef float *o32
        cdef double *o64
        for i in range(r0, r1):
            if self.single:
                o32 = <float *>self.out + i * 2 * self.n_freq
                memcpy(o32, self.a, self.n_freq * sizeof(float))
                rf_sincos_f32(o32, o32 + self.n_freq, self.n_freq, <float>self.scale)
            else:
                o64 = <double *>self.out + i * 2 * self.n_freq
                memcpy(o64, self.a, self.n_freq * sizeof(double))
                rf_sincos_f64(o64, o64 + self.n_freq, self.n_freq, self.scale)


def trig_floor(const floating[::1] a, floating[:, ::1] out, double scale, int n_threads):
    """Benchmark floor: every row of out (N, 2 len(a)) <- scale [cos a, sin a], a held in cache.

    What any feature map must do at least: write the output and compute its
    sin/cos (the same trig code and chunking as the structured kernel),
    with no product or transform.
    """
    cdef _TrigFloor loop = _TrigFloor()
    if out.shape[1] != 2 * a.shape[0]:
        raise ValueError("out must have 2 * len(a) columns")
    if out.shape[0] == 0 or a.shape[0] == 0:
        return
    loop.a, loop.out, loop.n_freq, loop.n_rows = &a[0], &out[0, 0], a.shape[0], out.shape[0]
    loop.single = floating is float
    loop.scale = scale
    loop.n_threads = n_threads
    loop.tile_rows = max(1, CHUNK_BYTES // max(1, out.shape[1] * sizeof(floating)))
    loop.n_chunks = (out.shape[0] + loop.tile_rows - 1) // loop.tile_rows
    loop.run()
