# cython: language_level=3
"""Dense kernels of the block conjugate-gradient solver (``_solvers/cg.py``).

With K targets the CG iterates are D × K blocks, and block CG's algebra is
made of thin products: D × K by K × K (``add_products``) and D × K by
D × K into K × K (``cross_products``).  Threaded BLAS would split them by
its thread count, which changes their rounding, and single-threaded BLAS
leaves a core idle for what costs as much as the sparse products.  Here
both run over fixed blocks of ``_BLOCK`` rows, each block one
single-threaded BLAS call (the caller holds BLAS at one thread), the blocks
spread over ``n_threads``: a block's result never depends on the thread
count, and reductions come back per block for the caller to sum in block
order.  ``finish_apply`` completes the normal operator's product likewise.
"""

cimport cython
from cython.parallel cimport prange

import numpy as np

from ._cycommon cimport gemm
from ._openmp cimport ChunkLoop

cdef Py_ssize_t _BLOCK = 4096
# BLAS's op arguments: no transpose, transpose.
cdef char _N = 78  # 'N'
cdef char _T = 84  # 'T'


def n_blocks(Py_ssize_t n_rows):
    """Number of row blocks (rows of the partial-sum arrays) for ``n_rows``."""
    return max(1, (n_rows + _BLOCK - 1) // _BLOCK)


# Sums over a block run in four interleaved partial sums, combined as
# (s0 + s1) + (s2 + s3): one running sum is a chain of dependent additions
# (4 cycles each), which made these passes 4-5× slower than reading the
# data (a 500000-long dot product: 0.42 ms against BLAS's 0.08 ms).  The
# order is fixed by the block, so the result is the same for any thread
# count.

cdef inline double _finish_entry(cython.floating *Q, const cython.floating *P, Py_ssize_t j, double alpha,
                                 const double *mu, Py_ssize_t row, double sk) noexcept nogil:
    """Q[j] ← Q[j] + αP[j] (− mu[row]·sk when mu is not NULL); return P[j]·Q[j]."""
    cdef double q = Q[j] + alpha * P[j]
    if mu != NULL:
        q = q - mu[row] * sk
    Q[j] = <cython.floating>q
    return <double>P[j] * <double>Q[j]


cdef inline double _finish_column(cython.floating *Q, const cython.floating *P, Py_ssize_t stride, Py_ssize_t n,
                                  double alpha, const double *mu, double sk) noexcept nogil:
    """``_finish_entry`` on rows j·stride, j < n (mu indexed by j); return Σ P·Q in four partial sums."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t j = 0
    while j + 4 <= n:
        s0 = s0 + _finish_entry(Q, P, j * stride, alpha, mu, j, sk)
        s1 = s1 + _finish_entry(Q, P, (j + 1) * stride, alpha, mu, j + 1, sk)
        s2 = s2 + _finish_entry(Q, P, (j + 2) * stride, alpha, mu, j + 2, sk)
        s3 = s3 + _finish_entry(Q, P, (j + 3) * stride, alpha, mu, j + 3, sk)
        j = j + 4
    while j < n:
        s0 = s0 + _finish_entry(Q, P, j * stride, alpha, mu, j, sk)
        j = j + 1
    return (s0 + s1) + (s2 + s3)


cdef inline double _scale_column(const double *R, const double *inv_diag, double keep, double *Zr, Py_ssize_t n) noexcept nogil:
    """Zr[j] = R[j]·inv_diag[j]·keep for j < n (one target: contiguous); return Σ R[j]² in four partial sums."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t j = 0
    while j + 4 <= n:
        Zr[j] = R[j] * inv_diag[j] * keep
        Zr[j + 1] = R[j + 1] * inv_diag[j + 1] * keep
        Zr[j + 2] = R[j + 2] * inv_diag[j + 2] * keep
        Zr[j + 3] = R[j + 3] * inv_diag[j + 3] * keep
        s0 = s0 + R[j] * R[j]
        s1 = s1 + R[j + 1] * R[j + 1]
        s2 = s2 + R[j + 2] * R[j + 2]
        s3 = s3 + R[j + 3] * R[j + 3]
        j = j + 4
    while j < n:
        Zr[j] = R[j] * inv_diag[j] * keep
        s0 = s0 + R[j] * R[j]
        j = j + 1
    return (s0 + s1) + (s2 + s3)


cdef inline double _dot(const double *a, const double *b, Py_ssize_t n) noexcept nogil:
    """Σ a[j]·b[j] for j < n, in four partial sums."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t j = 0
    while j + 4 <= n:
        s0 = s0 + a[j] * b[j]
        s1 = s1 + a[j + 1] * b[j + 1]
        s2 = s2 + a[j + 2] * b[j + 2]
        s3 = s3 + a[j + 3] * b[j + 3]
        j = j + 4
    while j < n:
        s0 = s0 + a[j] * b[j]
        j = j + 1
    return (s0 + s1) + (s2 + s3)


def finish_apply(
    cython.floating[:, ::1] Q,
    const cython.floating[:, ::1] P,
    const double[::1] mu,
    const double[::1] s,
    double alpha,
    double[:, ::1] partial_pq,
    int n_threads,
):
    """Q ← Q − μ sᵀ + αP (μ of length 0 means no centring); partial_pq[b] = Σ_block P∘Q.

    Completes A·P = Z_cᵀ W Z_c P + αP from Q = ZᵀU, and gives the
    per-block partial inner products pᵀAp.
    """
    cdef Py_ssize_t D = Q.shape[0], K = Q.shape[1]
    cdef Py_ssize_t nb = partial_pq.shape[0], b
    if D == 0 or K == 0:
        partial_pq[...] = 0.0
        return
    cdef cython.floating *q_ptr = &Q[0, 0]
    cdef const cython.floating *p_ptr = &P[0, 0]
    cdef const double *mu_ptr = &mu[0] if mu.shape[0] > 0 else NULL
    cdef const double *s_ptr = &s[0] if mu.shape[0] > 0 else NULL
    cdef double *part = &partial_pq[0, 0]
    with nogil:
        # Blocks handed out dynamically: on a busy machine a descheduled
        # thread holds up one block, not half the loop (same bits either way).
        for b in prange(nb, num_threads=n_threads, schedule="dynamic", chunksize=1):
            _finish_block(q_ptr, p_ptr, K, b * _BLOCK, min(b * _BLOCK + _BLOCK, D), alpha, mu_ptr, s_ptr,
                          part + b * K)


cdef inline void _finish_block(cython.floating *Q, const cython.floating *P, Py_ssize_t K, Py_ssize_t j0,
                               Py_ssize_t j1, double alpha, const double *mu, const double *s,
                               double *part) noexcept nogil:
    """Rows j0..j1 of ``finish_apply`` (mu and s NULL: no centring); part[k] = Σ P·Q per column."""
    cdef Py_ssize_t j, k
    if K == 1:
        # The sum in registers: in partial_pq it went through memory, a
        # store-load chain per row (~1 ms a call at 500000 rows).
        part[0] = _finish_column(Q + j0, P + j0, 1, j1 - j0, alpha, mu + j0 if mu != NULL else NULL,
                                 s[0] if mu != NULL else 0.0)
        return
    # K interleaved chains through part: as fast as the data.
    for k in range(K):
        part[k] = 0.0
    for j in range(j0, j1):
        for k in range(K):
            part[k] = part[k] + _finish_entry(Q, P, j * K + k, alpha, mu, j, s[k] if mu != NULL else 0.0)


cdef inline void _scale_block(const double *R, const double *inv_diag, const double *live, double *Zr,
                              double *part, Py_ssize_t j0, Py_ssize_t j1, Py_ssize_t K) noexcept nogil:
    """Rows j0..j1 of ``scale_rows``: Zr = R · inv_diag · live, and part[k] = Σ R² (the block's row of partial_rr)."""
    cdef Py_ssize_t j, k
    cdef double r
    if K == 1:
        # The sum of squares in registers: through memory it would be a
        # store-load chain, one per row.
        part[0] = _scale_column(R + j0, inv_diag + j0, live[0], Zr + j0, j1 - j0)
        return
    for k in range(K):
        part[k] = 0.0
    for j in range(j0, j1):
        for k in range(K):
            r = R[j * K + k]
            Zr[j * K + k] = r * inv_diag[j] * live[k]
            part[k] = part[k] + r * r


def scale_rows(
    const double[:, ::1] R,
    const double[::1] inv_diag,
    const double[::1] live,
    double[:, ::1] Zr,
    double[:, ::1] partial_rr,
    int n_threads,
):
    """Zr = R · inv_diag (rows) · live (columns); partial_rr[b] = Σ_block R² per column.

    The diagonal part of the preconditioner and the residual norms in one
    pass over R.
    """
    cdef Py_ssize_t D = R.shape[0], K = R.shape[1]
    cdef Py_ssize_t nb = partial_rr.shape[0], b
    if D == 0 or K == 0:
        partial_rr[...] = 0.0
        return
    cdef const double *r_ptr = &R[0, 0]
    cdef const double *d_ptr = &inv_diag[0]
    cdef const double *l_ptr = &live[0]
    cdef double *z_ptr = &Zr[0, 0]
    cdef double *p_ptr = &partial_rr[0, 0]
    with nogil:
        for b in prange(nb, num_threads=n_threads, schedule="dynamic", chunksize=1):
            _scale_block(r_ptr, d_ptr, l_ptr, z_ptr, p_ptr + b * K, b * _BLOCK, min(b * _BLOCK + _BLOCK, D), K)


cdef inline void _add_block(double *out, const double *A, const double *C, double sign, Py_ssize_t j0, int rows,
                            int m, int n) noexcept nogil:
    """Rows j0..j0+rows of ``add_products``: out_b += sign · A_b C."""
    cdef double scale
    cdef Py_ssize_t j
    if m == 1 and n == 1:
        # One target: an axpy; a BLAS call per block cost several times the arithmetic.
        scale = sign * C[0]
        for j in range(rows):
            out[j0 + j] = out[j0 + j] + scale * A[j0 + j]
        return
    # Row-major arrays are column-major transposes: A_b (rows × m) is the
    # column-major m × rows matrix with leading dimension m, and so on.
    # out_b (rows × n) += sign · A_b C; column-major: out_bᵀ += sign · Cᵀ A_bᵀ.
    gemm[double](_N, _N, n, rows, m, sign, C, n, A + j0 * m, m, 1.0, out + j0 * n, n)


cdef inline void _cross_block(const double *A, const double *B, double *part, Py_ssize_t j0, int rows, int m,
                              int n) noexcept nogil:
    """Rows j0..j0+rows of ``cross_products``: part (m × n, row-major) = A_bᵀ B_b."""
    if m == 1 and n == 1:
        # One target: a dot product (in four partial sums, see _dot).
        part[0] = _dot(A + j0, B + j0, rows)
        return
    # Column-major n × m: B_bᵀ A_b.
    gemm[double](_N, _T, n, m, rows, 1.0, B + j0 * n, n, A + j0 * m, m, 0.0, part, n)


cdef class _ThinProducts(ChunkLoop):
    """Per row block b: out += sign · A_b C (``add``), or part[b] = A_bᵀ B_b (``cross``; with ``pair`` also part2[b] = A_bᵀ B2_b)."""
    cdef const double *A
    cdef const double *B
    cdef const double *B2
    cdef const double *C
    cdef double *out
    cdef double *out2
    cdef double sign
    cdef Py_ssize_t D, m, n
    cdef bint cross, pair

    cdef void run_chunk(self, Py_ssize_t b, void *scratch) noexcept nogil:
        cdef Py_ssize_t j0 = b * _BLOCK
        cdef int rows = <int>min(_BLOCK, self.D - j0), m = <int>self.m, n = <int>self.n
        if not self.cross:
            _add_block(self.out, self.A, self.C, self.sign, j0, rows, m, n)
            return
        _cross_block(self.A, self.B, self.out + b * m * n, j0, rows, m, n)
        if self.pair:  # the block of A is in cache now
            _cross_block(self.A, self.B2, self.out2 + b * m * n, j0, rows, m, n)


def add_products(double[:, ::1] out, const double[:, ::1] A, const double[:, ::1] C, double sign,
                 int n_threads):
    """out += sign · A @ C, by fixed row blocks (same bits for any ``n_threads``).

    Parameters
    ----------
    out : (D, n) float64, C-contiguous, updated in place
    A : (D, m) float64, C-contiguous
    C : (m, n) float64, C-contiguous
    sign : float
    n_threads : int
    """
    cdef _ThinProducts loop = _ThinProducts()
    cdef Py_ssize_t D = A.shape[0], m = A.shape[1], n = C.shape[1]
    if out.shape[0] != D or out.shape[1] != n or C.shape[0] != m:
        raise ValueError("add_products: shapes do not match")
    if D == 0 or n == 0 or m == 0:
        return
    loop.A, loop.C, loop.out, loop.sign = &A[0, 0], &C[0, 0], &out[0, 0], sign
    loop.D, loop.m, loop.n, loop.cross = D, m, n, False
    loop.n_chunks, loop.n_threads = n_blocks(D), max(1, n_threads)
    loop.run()


cdef _cross_parts(const double[:, ::1] A, const double[:, ::1] B, const double[:, ::1] B2, int n_threads):
    """Per-block parts of Aᵀ B, and of Aᵀ B2 unless B2 is None: shape (1 or 2, n_blocks(D), m, n)."""
    cdef _ThinProducts loop = _ThinProducts()
    cdef Py_ssize_t D = A.shape[0], m = A.shape[1], n = B.shape[1]
    parts = np.zeros((1 if B2 is None else 2, n_blocks(D), m, n))
    cdef double[:, :, :, ::1] part_view = parts
    if D == 0 or m == 0 or n == 0:
        return parts
    loop.A, loop.B, loop.out = &A[0, 0], &B[0, 0], &part_view[0, 0, 0, 0]
    if B2 is not None:
        loop.B2, loop.out2, loop.pair = &B2[0, 0], &part_view[1, 0, 0, 0], True
    loop.D, loop.m, loop.n, loop.cross = D, m, n, True
    loop.n_chunks, loop.n_threads = n_blocks(D), max(1, n_threads)
    loop.run()
    return parts


def cross_products(const double[:, ::1] A, const double[:, ::1] B, int n_threads):
    """Return Aᵀ @ B (m × n, float64), summed over fixed row blocks in block order.

    Parameters
    ----------
    A : (D, m) float64, C-contiguous
    B : (D, n) float64, C-contiguous
    n_threads : int
        The result does not depend on it.

    Returns
    -------
    ndarray of shape (m, n)
    """
    if B.shape[0] != A.shape[0]:
        raise ValueError("cross_products: A and B have different row counts")
    # In block order (NumPy adds along axis 0 element by element, in order).
    return _cross_parts(A, B, None, n_threads)[0].sum(axis=0)


def cross_products_pair(const double[:, ::1] A, const double[:, ::1] B, const double[:, ::1] C, int n_threads):
    """Return (Aᵀ @ B, Aᵀ @ C) in one pass over A, each as ``cross_products`` gives it (same bits).

    Block CG's PᵀQ and PᵀR: each row block of A is read once for both.

    Parameters
    ----------
    A : (D, m) float64, C-contiguous
    B, C : (D, n) float64, C-contiguous
    n_threads : int
        The results do not depend on it.

    Returns
    -------
    (ndarray of shape (m, n), ndarray of shape (m, n))
    """
    if B.shape[0] != A.shape[0] or C.shape[0] != A.shape[0] or C.shape[1] != B.shape[1]:
        raise ValueError("cross_products_pair: shapes do not match")
    parts = _cross_parts(A, B, C, n_threads)
    return parts[0].sum(axis=0), parts[1].sum(axis=0)


cdef class _CgStep(ChunkLoop):
    """Per row block: X += P·step, R −= Q·step, then Zr = R·diag·live and the block's Σ R²."""
    cdef double *X
    cdef double *R
    cdef const double *P
    cdef const double *Q
    cdef const double *step
    cdef const double *inv_diag
    cdef const double *live
    cdef double *Zr
    cdef double *part_rr
    cdef Py_ssize_t D, K

    cdef void run_chunk(self, Py_ssize_t b, void *scratch) noexcept nogil:
        cdef Py_ssize_t j0 = b * _BLOCK, K = self.K
        cdef int rows = <int>min(_BLOCK, self.D - j0)
        # The block functions of add_products(X, P, step, 1), add_products(R,
        # Q, step, -1) and scale_rows, one after another: the same bits.
        _add_block(self.X, self.P, self.step, 1.0, j0, rows, <int>K, <int>K)
        _add_block(self.R, self.Q, self.step, -1.0, j0, rows, <int>K, <int>K)
        _scale_block(self.R, self.inv_diag, self.live, self.Zr, self.part_rr + b * K, j0, j0 + rows, K)


def cg_step(double[:, ::1] X, double[:, ::1] R, const double[:, ::1] P, const double[:, ::1] Q,
            const double[:, ::1] step, const double[::1] inv_diag, const double[::1] live,
            double[:, ::1] Zr, double[:, ::1] partial_rr, int n_threads):
    """Block CG's step and the next iteration's diagonal scaling, in one pass.

    X += P @ step; R −= Q @ step; then, as ``scale_rows`` on the new R,
    Zr = R · inv_diag (rows) · live (columns) and partial_rr[b] = Σ_block R².
    The same arithmetic, block by block, as those three calls (same bits),
    with each block's R read once and one parallel region instead of three.

    Parameters
    ----------
    X, R : (D, K) float64, C-contiguous, updated in place
    P, Q : (D, K) float64, C-contiguous
    step : (K, K) float64, C-contiguous
    inv_diag : (D,) float64
    live : (K,) float64
    Zr : (D, K) float64, C-contiguous, overwritten
    partial_rr : (n_blocks(D), K) float64, overwritten
    n_threads : int
    """
    cdef _CgStep loop = _CgStep()
    cdef Py_ssize_t D = X.shape[0], K = X.shape[1]
    if not (R.shape[0] == P.shape[0] == Q.shape[0] == Zr.shape[0] == D
            and R.shape[1] == P.shape[1] == Q.shape[1] == Zr.shape[1] == K):
        raise ValueError("cg_step: shapes do not match")
    if step.shape[0] != K or step.shape[1] != K or inv_diag.shape[0] != D or live.shape[0] != K:
        raise ValueError("cg_step: shapes do not match")
    if partial_rr.shape[0] != n_blocks(D) or partial_rr.shape[1] != K:
        raise ValueError("cg_step: partial_rr has the wrong shape")
    if D == 0 or K == 0:
        return
    loop.X, loop.R, loop.P, loop.Q, loop.step = &X[0, 0], &R[0, 0], &P[0, 0], &Q[0, 0], &step[0, 0]
    loop.inv_diag, loop.live, loop.Zr, loop.part_rr = &inv_diag[0], &live[0], &Zr[0, 0], &partial_rr[0, 0]
    loop.D, loop.K = D, K
    loop.n_chunks, loop.n_threads = n_blocks(D), max(1, n_threads)
    loop.run()
