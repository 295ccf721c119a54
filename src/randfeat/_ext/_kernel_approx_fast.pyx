# cython: language_level=3
"""Compiled kernels of the scikit-learn-compatible kernel approximations (issue 28).

* ``nystroem_rows``: Z = kmap(X, L) · Nᵀ for a dense X (or a given block), the
  kernel block computed sub-tile by sub-tile (rt rows, ≈ 256 KB) and
  multiplied by the packed normalisation while it is in L2; with no
  normalisation it writes the kernel block itself (``Nystroem.fit``'s K_mm,
  and the tests).
* ``additive_chi2_dense`` / ``additive_chi2_csr``: the additive χ² map,
  written once into the output.
* ``tensor_sketch_dense`` / ``tensor_sketch_csr``: one chunk of rows of the
  TensorSketch: rows with few nonzeros summed directly into the output, the
  others' count sketches left in a buffer for the caller's FFT product.

Every kernel runs on ``_openmp.ChunkLoop`` over chunks of a fixed number of
rows, and each row's output is computed by code that does not depend on the
other rows (``randfeat_kernel_approx.h``): bit-identical for any thread
count and any split of the rows.  Callers (``randfeat._maps``) validate the
input and run these under ``single_threaded_blas()``.
"""

cimport cython
from cython cimport floating
from libc.math cimport cosh, M_PI
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memset

from ._cycommon cimport index_t
from ._openmp cimport ChunkLoop

import numpy as np

cdef extern from "randfeat_kernel_approx.h" nogil:
    ctypedef struct rf_ka_nys:
        int kind
        int int_degree
        int matern_nu2
        int have_dots
        double gamma, coef0, degree
        const void *X
        int64_t sxi, sxk, d
        const void *xvec
        const void *Lp
        const void *Lp2
        const void *lvec
        int64_t m
        const void *Np
        int64_t m_out
        void *out
        int64_t ld_out
        int64_t rt
        double c
        int64_t prod_rt
    int64_t rf_ka_scratch_values(const rf_ka_nys *t)
    void rf_ka_nys_rows_f64(const rf_ka_nys *t, int64_t r0, int64_t r1, double *scratch)
    void rf_ka_nys_rows_f32(const rf_ka_nys *t, int64_t r0, int64_t r1, float *scratch)
    void rf_ka_chi2_dense_f64(const double *X, int64_t ldx, int64_t d, int64_t r0, int64_t r1, int64_t steps,
                              double L, const double *cf, double *logs, double *out, int64_t ld_out)
    void rf_ka_chi2_dense_f32(const float *X, int64_t ldx, int64_t d, int64_t r0, int64_t r1, int64_t steps,
                              double L, const double *cf, double *logs, float *out, int64_t ld_out)
    void rf_ka_chi2_csr_f64(const double *data, const int64_t *indptr, int64_t r0, int64_t r1, int64_t steps,
                            double L, const double *cf, double *logs, double *out_data)
    void rf_ka_chi2_csr_f32(const float *data, const int64_t *indptr, int64_t r0, int64_t r1, int64_t steps,
                            double L, const double *cf, double *logs, float *out_data)
    void rf_ts_direct(const int64_t *h, const double *a, int64_t q, int p, int64_t D, double *z)
    void rf_ts_count_f64(const int64_t *h, const double *a, int64_t q, int p, int64_t D, double *c)
    void rf_ts_count_f32(const int64_t *h, const double *a, int64_t q, int p, int64_t D, float *c)
    int rf_kernel_approx_init()
    int rf_ka_product_jb_f64
    int rf_ka_product_jb_f32
    const char *rf_isa_name(int isa)
    int RF_XW_JB_F32
    int RF_XW_JB_F64
    int RF_TS_MAX_DIRECT_DEGREE
    int RF_KA_RBF, RF_KA_POLY, RF_KA_LINEAR, RF_KA_SIGMOID, RF_KA_COSINE, RF_KA_LAPLACIAN, RF_KA_CHI2
    int RF_KA_ADDITIVE_CHI2, RF_KA_CAUCHY, RF_KA_MATERN, RF_KA_SKEWED_CHI2, RF_KA_GIVEN

cdef int _ISA = rf_kernel_approx_init()

#: Kernel codes of ``nystroem_rows`` (randfeat_kernel_approx.h).
KINDS = {
    "rbf": RF_KA_RBF,
    "polynomial": RF_KA_POLY,
    "linear": RF_KA_LINEAR,
    "sigmoid": RF_KA_SIGMOID,
    "cosine": RF_KA_COSINE,
    "laplacian": RF_KA_LAPLACIAN,
    "chi2": RF_KA_CHI2,
    "additive_chi2": RF_KA_ADDITIVE_CHI2,
    "cauchy": RF_KA_CAUCHY,
    "matern": RF_KA_MATERN,
    "skewed_chi2": RF_KA_SKEWED_CHI2,
    "given": RF_KA_GIVEN,
}
#: Kernels computed from the dot products X·Lᵀ (the others are coordinatewise).
FROM_DOTS = frozenset({"rbf", "polynomial", "linear", "sigmoid", "cosine"})
MAX_DIRECT_DEGREE = RF_TS_MAX_DIRECT_DEGREE

# Bytes of one sub-tile's kernel block: a quarter of this CPU family's 1 MiB
# L2, so the block is still cached when the product with Nᵀ reads it back.
cdef Py_ssize_t SUBTILE_BYTES = 256 * 1024
# Rows per chunk of work (a multiple of the sub-tile), at least this many.
cdef Py_ssize_t CHUNK_MIN_ROWS = 96
# The product with Nᵀ: rows per chunk, each panel of Nᵀ passing over all of
# them.  On 12000 × 1000 by 1000 × 1000 (a loaded machine, alternating),
# chunks of 96 / 144 / 192 / 288 / 384 rows took 1.20 / 1.14 / 1.09 / 1.17 /
# 1.22 times OpenBLAS's dgemm (one thread), and passes of 60 rows over a
# chunk of 192, 1.46 (the panels re-read from L3); float32 was flat (1.08-1.14).
cdef Py_ssize_t PRODUCT_ROWS = 192

# Rows per chunk of the elementwise and sketch kernels.
cdef Py_ssize_t ROWS_PER_CHUNK = 64


def vector_isa():
    """Return the SIMD code path of these kernels: 'baseline', 'avx2' or 'avx512'."""
    return rf_isa_name(_ISA).decode()


def panel_width(dtype):
    """Columns per packed panel (``pack_panels``) for float32 or float64."""
    return RF_XW_JB_F32 if np.dtype(dtype) == np.float32 else RF_XW_JB_F64


def product_panel_width(dtype):
    """Columns per packed panel of Nᵀ (``pack_panels(N.T, product_panel_width(dtype))``) on this vector path."""
    return rf_ka_product_jb_f32 if np.dtype(dtype) == np.float32 else rf_ka_product_jb_f64


def pack_panels(W, jb=None):
    """W (k × m) as ceil(m / jb) contiguous k × jb panels, zero past column m, in W's dtype (jb: ``panel_width``)."""
    W = np.asarray(W)
    jb = panel_width(W.dtype) if jb is None else int(jb)
    k, m = W.shape
    n_panels = max(1, (m + jb - 1) // jb)
    padded = np.zeros((k, n_panels * jb), dtype=W.dtype)
    padded[:, :m] = W
    return np.ascontiguousarray(padded.reshape(k, n_panels, jb).transpose(1, 0, 2))


def product_rows(Py_ssize_t m, Py_ssize_t itemsize):
    """(rows of a chunk, rows per pass over Nᵀ's panels) of the Nystroem product (constants).

    A chunk's kernel block (rows × m) is computed, then multiplied by Nᵀ, each
    packed panel of Nᵀ passing over all the rows of the chunk.
    """
    return PRODUCT_ROWS, PRODUCT_ROWS


def subtile_rows(Py_ssize_t m, Py_ssize_t itemsize):
    """Rows of one sub-tile: depends on the block width and dtype only (a multiple of 6)."""
    cdef Py_ssize_t rt = SUBTILE_BYTES // max(1, m * itemsize)
    return max(6, rt - rt % 6)


# ------------------------------------------------------------------ Nystroem
cdef class _NysRows(ChunkLoop):
    cdef rf_ka_nys t
    cdef Py_ssize_t n_rows, chunk_rows
    cdef bint single

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        cdef int64_t r0 = chunk * self.chunk_rows
        cdef int64_t r1 = min(<int64_t>self.n_rows, r0 + self.chunk_rows)
        if self.single:
            rf_ka_nys_rows_f32(&self.t, r0, r1, <float *>scratch)
        else:
            rf_ka_nys_rows_f64(&self.t, r0, r1, <double *>scratch)


def nystroem_rows(const floating[:, :] X, const floating[:, :, ::1] Lp, const floating[:, :, ::1] Lp2,
                  const floating[::1] lvec, const floating[::1] xvec, const floating[:, :, ::1] Np,
                  floating[:, ::1] out, str kernel, Py_ssize_t m, double gamma=1.0, double coef0=0.0,
                  double degree=1.0, double nu=1.5, double c=0.0, bint have_dots=False, int n_threads=1,
                  Py_ssize_t chunk_rows=0, Py_ssize_t pass_rows=0):
    """out <- kmap(X, L) @ Nᵀ (or the block kmap(X, L) itself when ``Np`` is empty).

    Parameters (validated by the caller; shapes are checked here)
    ----------
    X : (n, d) rows with one unit stride; with ``kernel='given'`` or
        ``have_dots`` the (n, m) block itself (C order): kernel values, or dot
        products X·Lᵀ to map with ``kernel``.
    Lp, Lp2 : Lᵀ (d × m) as ``pack_panels``; Lp2 the second plane of
        skewed_chi2 (sqrt(L + c)), Lp = L + c there.  Empty when unused.
    lvec, xvec : per landmark / per row of a given block: squared norms (rbf)
        or inverse norms (cosine); empty when unused.
    Np : Nᵀ (m × m_out) as ``pack_panels(N.T, product_panel_width(dtype))``, or empty (no product).
    out : (n, m_out) or (n, m) output.
    """
    cdef Py_ssize_t n = X.shape[0], item = sizeof(floating)
    cdef Py_ssize_t jb = RF_XW_JB_F32 if floating is float else RF_XW_JB_F64
    cdef Py_ssize_t n_panels = (m + jb - 1) // jb
    cdef _NysRows loop = _NysRows()
    cdef bint given = kernel == "given" or have_dots
    cdef Py_ssize_t d = X.shape[1]
    cdef Py_ssize_t m_out = m
    if kernel not in KINDS:
        raise ValueError(f"unknown kernel {kernel!r}")
    cdef Py_ssize_t pjb = rf_ka_product_jb_f32 if floating is float else rf_ka_product_jb_f64
    if Np.shape[0] > 0:
        if Np.shape[1] != m or Np.shape[2] != pjb:
            raise ValueError("Np must be pack_panels(N.T, product_panel_width(dtype)) of an m × m_out matrix")
        m_out = out.shape[1]
        if Np.shape[0] != (m_out + pjb - 1) // pjb:
            raise ValueError("Np and out disagree on the output width")
    elif out.shape[1] != m:
        raise ValueError("out must have m columns when there is no product")
    if out.shape[0] != n:
        raise ValueError("out and X have different numbers of rows")
    if given:
        if d != m:
            raise ValueError("a given block must have m columns")
        if X.strides[1] != item:
            raise ValueError("a given block must be C-ordered")
        if have_dots and kernel in ("rbf", "cosine") and xvec.shape[0] != n:
            raise ValueError("xvec must have one value per row")
    else:
        if Lp.shape[0] != n_panels or Lp.shape[1] != d or Lp.shape[2] != jb:
            raise ValueError("Lp must be pack_panels(L.T)")
        if kernel == "skewed_chi2" and (Lp2.shape[0] != n_panels or Lp2.shape[1] != d or Lp2.shape[2] != jb):
            raise ValueError("Lp2 must be pack_panels(sqrt(L + c).T)")
    if kernel in ("rbf", "cosine") and lvec.shape[0] != m:
        raise ValueError("lvec must have one value per landmark")
    if n == 0 or m == 0:
        return
    if X.strides[1] == item:
        loop.t.sxi, loop.t.sxk = X.strides[0] // item, 1
    elif X.strides[0] == item:
        loop.t.sxi, loop.t.sxk = 1, X.strides[1] // item
    else:
        raise ValueError("X needs one unit stride")
    loop.t.kind = KINDS["given"] if kernel == "given" else KINDS[kernel]
    loop.t.have_dots = have_dots
    loop.t.gamma, loop.t.coef0, loop.t.degree, loop.t.c = gamma, coef0, degree, c
    loop.t.int_degree = int(degree) if (degree == int(degree) and 0 <= degree < 2**30) else -1
    loop.t.matern_nu2 = int(round(2 * nu))
    loop.t.X = &X[0, 0] if d > 0 else NULL
    loop.t.d = d
    loop.t.xvec = &xvec[0] if xvec.shape[0] > 0 else NULL
    loop.t.Lp = &Lp[0, 0, 0] if Lp.shape[0] > 0 and Lp.shape[1] > 0 else NULL
    loop.t.Lp2 = &Lp2[0, 0, 0] if Lp2.shape[0] > 0 and Lp2.shape[1] > 0 else NULL
    loop.t.lvec = &lvec[0] if lvec.shape[0] > 0 else NULL
    loop.t.m = m
    loop.t.Np = &Np[0, 0, 0] if Np.shape[0] > 0 else NULL
    loop.t.m_out = m_out
    loop.t.out = &out[0, 0]
    loop.t.ld_out = out.shape[1]
    if d == 0 and not given:
        # No features: every dot product and coordinatewise sum is empty.
        raise ValueError("X has no features")
    loop.single = floating is float
    loop.n_rows = n
    rows, passes = product_rows(m, item)
    if Np.shape[0] > 0:
        # One sub-tile per chunk: its block, then the product over it (tuning overrides for the bench).
        loop.t.rt = loop.chunk_rows = chunk_rows if chunk_rows > 0 else rows
        loop.t.prod_rt = pass_rows if pass_rows > 0 else passes
    else:
        loop.t.rt = subtile_rows(m, item)
        loop.chunk_rows = loop.t.rt * max(1, (CHUNK_MIN_ROWS + loop.t.rt - 1) // loop.t.rt)
        loop.t.prod_rt = loop.t.rt
    loop.n_chunks = (n + loop.chunk_rows - 1) // loop.chunk_rows
    loop.n_threads = n_threads
    loop.scratch_bytes = rf_ka_scratch_values(&loop.t) * item
    loop.run()


# ------------------------------------------------------------ additive chi2
cdef class _Chi2Rows(ChunkLoop):
    cdef const void *X
    cdef const int64_t *indptr
    cdef void *out
    cdef int64_t ldx, d, ld_out, steps, n_rows
    cdef double L
    cdef const double *cf
    cdef bint single, csr

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        cdef int64_t r0 = chunk * ROWS_PER_CHUNK
        cdef int64_t r1 = min(self.n_rows, r0 + ROWS_PER_CHUNK)
        if self.csr:
            if self.single:
                rf_ka_chi2_csr_f32(<const float *>self.X, self.indptr, r0, r1, self.steps, self.L, self.cf,
                                   <double *>scratch, <float *>self.out)
            else:
                rf_ka_chi2_csr_f64(<const double *>self.X, self.indptr, r0, r1, self.steps, self.L, self.cf,
                                   <double *>scratch, <double *>self.out)
        elif self.single:
            rf_ka_chi2_dense_f32(<const float *>self.X, self.ldx, self.d, r0, r1, self.steps, self.L, self.cf,
                                 <double *>scratch, <float *>self.out, self.ld_out)
        else:
            rf_ka_chi2_dense_f64(<const double *>self.X, self.ldx, self.d, r0, r1, self.steps, self.L, self.cf,
                                 <double *>scratch, <double *>self.out, self.ld_out)


def _cosh_factors(Py_ssize_t steps, double L):
    return np.array([cosh(M_PI * j * L) for j in range(steps)], dtype=np.float64)


def additive_chi2_dense(const floating[:, ::1] X, floating[:, ::1] out, Py_ssize_t sample_steps,
                        double sample_interval, int n_threads):
    """out <- the additive χ² map of X (n × d, non-negative), out of shape (n, (2s - 1) d)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef _Chi2Rows loop = _Chi2Rows()
    if out.shape[0] != n or out.shape[1] != (2 * sample_steps - 1) * d or sample_steps < 1:
        raise ValueError("out must have shape (n, (2 * sample_steps - 1) * d)")
    if n == 0 or d == 0:
        return
    cf = _cosh_factors(sample_steps, sample_interval)
    cdef const double[::1] cfv = cf
    loop.X, loop.ldx, loop.d, loop.out, loop.ld_out = &X[0, 0], X.shape[1], d, &out[0, 0], out.shape[1]
    loop.steps, loop.L, loop.cf, loop.n_rows = sample_steps, sample_interval, &cfv[0], n
    loop.single, loop.csr = floating is float, False
    loop.n_chunks = (n + ROWS_PER_CHUNK - 1) // ROWS_PER_CHUNK
    loop.n_threads = n_threads
    loop.scratch_bytes = max(1, d) * sizeof(double)
    loop.run()


def additive_chi2_csr(const floating[::1] data, const int64_t[::1] indptr, floating[::1] out_data,
                      Py_ssize_t sample_steps, double sample_interval, Py_ssize_t max_row_nnz, int n_threads):
    """out_data <- the additive χ² map of a CSR matrix's values, row by row, in block order.

    Row i's stored values data[indptr[i]:indptr[i+1]] (q of them) become
    (2s - 1) runs of q values at out_data[(2s - 1) indptr[i]:], the run of
    block b for the columns b·d + (the row's column indices).
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef _Chi2Rows loop = _Chi2Rows()
    if n < 0 or sample_steps < 1:
        raise ValueError("indptr must have n + 1 entries")
    if out_data.shape[0] != (2 * sample_steps - 1) * indptr[n] or data.shape[0] < indptr[n]:
        raise ValueError("out_data must hold (2 * sample_steps - 1) * nnz values")
    if n == 0 or indptr[n] == 0:
        return
    cf = _cosh_factors(sample_steps, sample_interval)
    cdef const double[::1] cfv = cf
    loop.X, loop.indptr, loop.out = &data[0], &indptr[0], &out_data[0]
    loop.steps, loop.L, loop.cf, loop.n_rows = sample_steps, sample_interval, &cfv[0], n
    loop.single, loop.csr = floating is float, True
    loop.n_chunks = (n + ROWS_PER_CHUNK - 1) // ROWS_PER_CHUNK
    loop.n_threads = n_threads
    loop.scratch_bytes = max(1, max_row_nnz) * sizeof(double)
    loop.run()


# ------------------------------------------------------------ tensor sketch
cdef class _SketchRows(ChunkLoop):
    cdef const void *X          # dense rows (ldx) or CSR data
    cdef const void *indices    # CSR only
    cdef const void *indptr     # CSR only
    cdef bint csr, idx64, single
    cdef int64_t ldx, d, n_rows, D, q_max
    cdef int p
    cdef const int64_t *hashes  # p × d'
    cdef const double *signs    # p × d'
    cdef double sqrt_gamma, sqrt_coef0
    cdef void *out
    cdef int64_t ld_out
    cdef void *buf              # n_slots × p × D, X's dtype
    cdef const int64_t *slots   # per row: -1 (summed directly into out) or its slot in buf

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        cdef int64_t r0 = chunk * ROWS_PER_CHUNK
        cdef int64_t r1 = min(self.n_rows, r0 + ROWS_PER_CHUNK)
        cdef int64_t dp = self.d + (1 if self.sqrt_coef0 != 0 else 0)
        cdef int64_t *h = <int64_t *>scratch
        cdef double *a = <double *>(h + self.p * self.q_max)
        cdef double *z = a + self.p * self.q_max
        cdef int64_t i, q, k, j, lo, hi, l, slot, pd = self.p * self.D
        cdef double v
        for i in range(r0, r1):
            # The row's nonzeros (column, sqrt(gamma) x), then the coef0 column,
            # each level's entries at stride q_max.
            q = 0
            if self.csr:
                if self.idx64:
                    lo, hi = (<const int64_t *>self.indptr)[i], (<const int64_t *>self.indptr)[i + 1]
                else:
                    lo, hi = (<const int32_t *>self.indptr)[i], (<const int32_t *>self.indptr)[i + 1]
                for k in range(lo, hi):
                    v = (<const float *>self.X)[k] if self.single else (<const double *>self.X)[k]
                    if v != 0:
                        j = (<const int64_t *>self.indices)[k] if self.idx64 else (<const int32_t *>self.indices)[k]
                        self._put(h, a, q, j, self.sqrt_gamma * v, dp)
                        q += 1
            else:
                for j in range(self.d):
                    v = ((<const float *>self.X)[i * self.ldx + j] if self.single
                         else (<const double *>self.X)[i * self.ldx + j])
                    if v != 0:
                        self._put(h, a, q, j, self.sqrt_gamma * v, dp)
                        q += 1
            if self.sqrt_coef0 != 0:
                self._put(h, a, q, self.d, self.sqrt_coef0, dp)
                q += 1
            # Close the gaps: level l's q entries at l * q.
            for l in range(1, self.p):
                for k in range(q):
                    h[l * q + k] = h[l * self.q_max + k]
                    a[l * q + k] = a[l * self.q_max + k]
            slot = self.slots[i]
            if slot < 0:
                memset(z, 0, self.D * sizeof(double))
                rf_ts_direct(h, a, q, self.p, self.D, z)
                if self.single:
                    for k in range(self.D):
                        (<float *>self.out)[i * self.ld_out + k] = <float>z[k]
                else:
                    for k in range(self.D):
                        (<double *>self.out)[i * self.ld_out + k] = z[k]
            elif self.single:
                memset(<float *>self.buf + slot * pd, 0, pd * sizeof(float))
                rf_ts_count_f32(h, a, q, self.p, self.D, <float *>self.buf + slot * pd)
            else:
                memset(<double *>self.buf + slot * pd, 0, pd * sizeof(double))
                rf_ts_count_f64(h, a, q, self.p, self.D, <double *>self.buf + slot * pd)

    cdef inline void _put(self, int64_t *h, double *a, int64_t q, int64_t j, double v, int64_t dp) noexcept nogil:
        cdef int l
        for l in range(self.p):
            h[l * self.q_max + q] = self.hashes[l * dp + j]
            a[l * self.q_max + q] = self.signs[l * dp + j] * v


cdef _SketchRows _sketch_setup(Py_ssize_t n, Py_ssize_t d, const int64_t[:, ::1] hashes, const double[:, ::1] signs,
                               double sqrt_gamma, double sqrt_coef0, Py_ssize_t D, Py_ssize_t q_max,
                               const int64_t[::1] slots, Py_ssize_t n_slots, int n_threads):
    cdef _SketchRows loop = _SketchRows()
    cdef Py_ssize_t dp = d + (1 if sqrt_coef0 != 0 else 0)
    cdef Py_ssize_t i
    if hashes.shape[1] != dp or signs.shape[1] != dp or signs.shape[0] != hashes.shape[0] or hashes.shape[0] < 1:
        raise ValueError("hashes and signs must have shape (degree, n_features (+1 with coef0))")
    if slots.shape[0] != n:
        raise ValueError("slots must have one entry per row")
    if hashes.shape[0] > RF_TS_MAX_DIRECT_DEGREE:
        for i in range(n):
            if slots[i] < 0:
                raise ValueError(f"degree > {RF_TS_MAX_DIRECT_DEGREE}: every row must take the FFT path")
    for i in range(n):
        if slots[i] >= n_slots:
            raise ValueError("a slot is out of the buffer's range")
    loop.p, loop.d, loop.D, loop.n_rows = hashes.shape[0], d, D, n
    loop.hashes, loop.signs = &hashes[0, 0], &signs[0, 0]
    loop.sqrt_gamma, loop.sqrt_coef0 = sqrt_gamma, sqrt_coef0
    loop.q_max = max(1, q_max)
    loop.slots = &slots[0] if n > 0 else NULL
    loop.n_chunks = (n + ROWS_PER_CHUNK - 1) // ROWS_PER_CHUNK
    loop.n_threads = n_threads
    loop.scratch_bytes = 2 * loop.p * loop.q_max * 8 + D * sizeof(double) + 64
    return loop


def tensor_sketch_dense(const floating[:, ::1] X, const int64_t[:, ::1] hashes, const double[:, ::1] signs,
                        double sqrt_gamma, double sqrt_coef0, floating[:, ::1] out, floating[:, :, ::1] buf,
                        const int64_t[::1] slots, int n_threads):
    """Rows of X: tensor sketches summed directly into out (slots[i] < 0), or count sketches into buf[slots[i]].

    ``hashes[l, j]`` in [0, D) and ``signs[l, j]`` in {-1, +1} for level l
    and column j (column d is the coef0 column when ``sqrt_coef0 != 0``).
    Rows of buf are zeroed and filled only for rows that have a slot.
    """
    cdef Py_ssize_t n = X.shape[0], D = out.shape[1]
    if out.shape[0] != n or buf.shape[1] != hashes.shape[0] or buf.shape[2] != D:
        raise ValueError("out must be (n, D) and buf (n_slots, degree, D)")
    cdef _SketchRows loop = _sketch_setup(n, X.shape[1], hashes, signs, sqrt_gamma, sqrt_coef0, D,
                                          X.shape[1] + 1, slots, buf.shape[0], n_threads)
    if n == 0 or D == 0:
        return
    loop.csr, loop.single = False, floating is float
    loop.X, loop.ldx = &X[0, 0] if X.shape[1] > 0 else NULL, X.shape[1]
    loop.out, loop.ld_out = &out[0, 0], out.shape[1]
    loop.buf = &buf[0, 0, 0] if buf.shape[0] > 0 else NULL
    loop.run()


def tensor_sketch_csr(const floating[::1] data, const index_t[::1] indices, const index_t[::1] indptr,
                      Py_ssize_t n_features, const int64_t[:, ::1] hashes, const double[:, ::1] signs,
                      double sqrt_gamma, double sqrt_coef0, floating[:, ::1] out, floating[:, :, ::1] buf,
                      const int64_t[::1] slots, Py_ssize_t max_row_nnz, int n_threads):
    """Same as ``tensor_sketch_dense`` for a canonical CSR matrix (data, indices, indptr)."""
    cdef Py_ssize_t n = indptr.shape[0] - 1, D = out.shape[1]
    if out.shape[0] != n or buf.shape[1] != hashes.shape[0] or buf.shape[2] != D:
        raise ValueError("out must be (n, D) and buf (n_slots, degree, D)")
    cdef _SketchRows loop = _sketch_setup(n, n_features, hashes, signs, sqrt_gamma, sqrt_coef0, D,
                                          max_row_nnz + 1, slots, buf.shape[0], n_threads)
    if n == 0 or D == 0:
        return
    loop.csr, loop.single, loop.idx64 = True, floating is float, index_t is int64_t
    loop.X = &data[0] if data.shape[0] > 0 else NULL
    loop.indices = &indices[0] if indices.shape[0] > 0 else NULL
    loop.indptr = &indptr[0]
    loop.out, loop.ld_out = &out[0, 0], out.shape[1]
    loop.buf = &buf[0, 0, 0] if buf.shape[0] > 0 else NULL
    loop.run()
