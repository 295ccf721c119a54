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
    cdef double q, acc, sk
    with nogil:
        # Blocks handed out dynamically: on a busy machine a descheduled
        # thread holds up one block, not half the loop (same bits either way).
        for b in prange(nb, num_threads=n_threads, schedule="dynamic", chunksize=1):
            j0 = b * _BLOCK
            j1 = min(j0 + _BLOCK, D)
            # Column by column (the block stays in cache), each column's sum
            # in a register: kept in partial_pq it went through memory, a
            # store-load chain per row (~1 ms a call at one target, 500000 rows).
            for k in range(K):
                acc = 0.0
                if centred:
                    sk = s[k]
                    for j in range(j0, j1):
                        q = Q[j, k] + alpha * P[j, k]
                        q = q - mu[j] * sk
                        Q[j, k] = <cython.floating>q
                        acc = acc + <double>P[j, k] * <double>Q[j, k]
                else:
                    for j in range(j0, j1):
                        q = Q[j, k] + alpha * P[j, k]
                        Q[j, k] = <cython.floating>q
                        acc = acc + <double>P[j, k] * <double>Q[j, k]
                partial_pq[b, k] = acc


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
    cdef double r, acc, keep
    with nogil:
        for b in prange(nb, num_threads=n_threads, schedule="dynamic", chunksize=1):
            j0 = b * _BLOCK
            j1 = min(j0 + _BLOCK, D)
            if K == 1:
                # The sum of squares in a register: through memory it would be
                # a store-load chain, one per row.
                acc = 0.0
                keep = live[0]
                for j in range(j0, j1):
                    r = R[j, 0]
                    Zr[j, 0] = r * inv_diag[j] * keep
                    acc = acc + r * r
                partial_rr[b, 0] = acc
            else:
                for k in range(K):
                    partial_rr[b, k] = 0.0
                for j in range(j0, j1):
                    for k in range(K):
                        r = R[j, k]
                        Zr[j, k] = r * inv_diag[j] * live[k]
                        partial_rr[b, k] = partial_rr[b, k] + r * r


cdef class _ThinProducts(ChunkLoop):
    """Per row block b: out += sign · A_b C (``add``), or part[b] = A_bᵀ B_b (``cross``)."""
    cdef const double *A
    cdef const double *B
    cdef const double *C
    cdef double *out
    cdef double sign
    cdef Py_ssize_t D, m, n
    cdef bint cross

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
        else:
            # out_b (rows × n) += sign · A_b C; column-major: out_bᵀ += sign · Cᵀ A_bᵀ.
            gemm[double](_N, _N, n, rows, m, self.sign, self.C, n, self.A + j0 * m, m, 1.0,
                 self.out + j0 * n, n)

    cdef inline void _single(self, Py_ssize_t j0, int rows, Py_ssize_t b) noexcept nogil:
        cdef const double *a = self.A + j0
        cdef double acc = 0.0, scale
        cdef Py_ssize_t j
        if self.cross:
            for j in range(rows):
                acc = acc + a[j] * self.B[j0 + j]
            self.out[b] = acc
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
