# cython: language_level=3
"""Dense kernels of the block conjugate-gradient solver (``_cg.py``).

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
    cdef Py_ssize_t nb = partial_pq.shape[0], b, j, k, j0, j1
    cdef bint centred = mu.shape[0] > 0
    cdef double q
    with nogil:
        # Blocks handed out dynamically: on a busy machine a descheduled
        # thread holds up one block, not half the loop (same bits either way).
        for b in prange(nb, num_threads=n_threads, schedule="dynamic", chunksize=1):
            j0 = b * _BLOCK
            j1 = min(j0 + _BLOCK, D)
            if K == 1:
                # The sum in registers: in partial_pq it went through memory,
                # a store-load chain per row (~1 ms a call at 500000 rows).
                partial_pq[b, 0] = _finish_column(&Q[j0, 0], &P[j0, 0], 1, j1 - j0, alpha,
                                                  &mu[j0] if centred else NULL, s[0] if centred else 0.0)
            else:
                # K interleaved chains through partial_pq: as fast as the data.
                for k in range(K):
                    partial_pq[b, k] = 0.0
                for j in range(j0, j1):
                    for k in range(K):
                        q = Q[j, k] + alpha * P[j, k]
                        if centred:
                            q = q - mu[j] * s[k]
                        Q[j, k] = <cython.floating>q
                        partial_pq[b, k] = partial_pq[b, k] + <double>P[j, k] * <double>Q[j, k]


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
    cdef Py_ssize_t nb = partial_rr.shape[0], b, j, k, j0, j1
    cdef double r
    with nogil:
        for b in prange(nb, num_threads=n_threads, schedule="dynamic", chunksize=1):
            j0 = b * _BLOCK
            j1 = min(j0 + _BLOCK, D)
            if K == 1:
                # The sum of squares in registers: through memory it would be
                # a store-load chain, one per row.
                partial_rr[b, 0] = _scale_column(&R[j0, 0], &inv_diag[j0], live[0], &Zr[j0, 0], j1 - j0)
            else:
                for k in range(K):
                    partial_rr[b, k] = 0.0
                for j in range(j0, j1):
                    for k in range(K):
                        r = R[j, k]
                        Zr[j, k] = r * inv_diag[j] * live[k]
                        partial_rr[b, k] = partial_rr[b, k] + r * r


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
        if m == 1 and n == 1:
            # One target: a dot product or an axpy; a BLAS call per block
            # cost several times the arithmetic.
            self._single(j0, rows, b)
            return
        # Row-major arrays are column-major transposes: A_b (rows × m) is the
        # column-major m × rows matrix with leading dimension m, and so on.
        if self.cross:
            # part[b] (m × n, row-major) = A_bᵀ B_b; column-major n × m: B_bᵀ A_b.
            gemm[double](_N, _T, n, m, rows, 1.0, self.B + j0 * n, n, self.A + j0 * m, m, 0.0,
                 self.out + b * m * n, n)
            if self.pair:  # the block of A is in cache now
                gemm[double](_N, _T, n, m, rows, 1.0, self.B2 + j0 * n, n, self.A + j0 * m, m, 0.0,
                     self.out2 + b * m * n, n)
        else:
            # out_b (rows × n) += sign · A_b C; column-major: out_bᵀ += sign · Cᵀ A_bᵀ.
            gemm[double](_N, _N, n, rows, m, self.sign, self.C, n, self.A + j0 * m, m, 1.0,
                 self.out + j0 * n, n)

    cdef inline void _single(self, Py_ssize_t j0, int rows, Py_ssize_t b) noexcept nogil:
        cdef const double *a = self.A + j0
        cdef double scale
        cdef Py_ssize_t j
        if self.cross:
            self.out[b] = _dot(a, self.B + j0, rows)
            if self.pair:
                self.out2[b] = _dot(a, self.B2 + j0, rows)
        else:
            scale = self.sign * self.C[0]
            for j in range(rows):
                self.out[j0 + j] = self.out[j0 + j] + scale * a[j]


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
    cdef _ThinProducts loop = _ThinProducts()
    cdef Py_ssize_t D = A.shape[0], m = A.shape[1], n = B.shape[1]
    if B.shape[0] != D:
        raise ValueError("cross_products: A and B have different row counts")
    parts = np.zeros((n_blocks(D), m, n))
    cdef double[:, :, ::1] part_view = parts
    if D == 0 or m == 0 or n == 0:
        return parts.sum(axis=0)
    loop.A, loop.B, loop.out = &A[0, 0], &B[0, 0], &part_view[0, 0, 0]
    loop.D, loop.m, loop.n, loop.cross = D, m, n, True
    loop.n_chunks, loop.n_threads = n_blocks(D), max(1, n_threads)
    loop.run()
    # In block order (NumPy adds along axis 0 element by element, in order).
    return parts.sum(axis=0)


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
    cdef _ThinProducts loop = _ThinProducts()
    cdef Py_ssize_t D = A.shape[0], m = A.shape[1], n = B.shape[1]
    if B.shape[0] != D or C.shape[0] != D or C.shape[1] != n:
        raise ValueError("cross_products_pair: shapes do not match")
    parts = np.zeros((2, n_blocks(D), m, n))
    cdef double[:, :, :, ::1] part_view = parts
    if D == 0 or m == 0 or n == 0:
        return parts[0].sum(axis=0), parts[1].sum(axis=0)
    loop.A, loop.B, loop.B2, loop.out = &A[0, 0], &B[0, 0], &C[0, 0], &part_view[0, 0, 0, 0]
    loop.out2 = &part_view[1, 0, 0, 0]
    loop.D, loop.m, loop.n, loop.cross, loop.pair = D, m, n, True, True
    loop.n_chunks, loop.n_threads = n_blocks(D), max(1, n_threads)
    loop.run()
    # In block order (NumPy adds along axis 0 element by element, in order).
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
        cdef Py_ssize_t j0 = b * _BLOCK, j, k, K = self.K
        cdef int rows = <int>min(_BLOCK, self.D - j0), n = <int>K
        cdef double r, scale
        # The same arithmetic as add_products(X, P, step, 1), add_products(R,
        # Q, step, -1) and scale_rows on this block, so the same bits.
        if K == 1:
            scale = self.step[0]
            for j in range(rows):
                self.X[j0 + j] = self.X[j0 + j] + scale * self.P[j0 + j]
            scale = -1.0 * self.step[0]
            for j in range(rows):
                self.R[j0 + j] = self.R[j0 + j] + scale * self.Q[j0 + j]
            self.part_rr[b] = _scale_column(self.R + j0, self.inv_diag + j0, self.live[0], self.Zr + j0, rows)
            return
        gemm[double](_N, _N, n, rows, n, 1.0, self.step, n, self.P + j0 * K, n, 1.0, self.X + j0 * K, n)
        gemm[double](_N, _N, n, rows, n, -1.0, self.step, n, self.Q + j0 * K, n, 1.0, self.R + j0 * K, n)
        for k in range(K):
            self.part_rr[b * K + k] = 0.0
        for j in range(j0, j0 + rows):
            for k in range(K):
                r = self.R[j * K + k]
                self.Zr[j * K + k] = r * self.inv_diag[j] * self.live[k]
                self.part_rr[b * K + k] = self.part_rr[b * K + k] + r * r


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
