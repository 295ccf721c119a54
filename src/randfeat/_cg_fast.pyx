# cython: language_level=3
"""Fused vector updates of the block conjugate-gradient solver (``_cg.py``).

With K targets the CG iterates are D × K blocks; in NumPy each update is a
separate pass (plus temporaries), which profiling showed costing as much as
the sparse products for K = 7.  These kernels do each group of updates in one
pass over the block.  Column reductions (inner products, norms) are summed
in double over fixed blocks of ``_BLOCK`` rows (independent of the thread
count) into a (n_blocks, K) array that the caller sums in block order, so
results are bit-identical for any number of threads.
"""

cimport cython
from cython.parallel cimport prange

cdef Py_ssize_t _BLOCK = 4096


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
    cdef double q
    with nogil:
        for b in prange(nb, num_threads=n_threads, schedule="static"):
            j0 = b * _BLOCK
            j1 = min(j0 + _BLOCK, D)
            for k in range(K):
                partial_pq[b, k] = 0.0
            for j in range(j0, j1):
                for k in range(K):
                    q = Q[j, k] + alpha * P[j, k]
                    if centred:
                        q = q - mu[j] * s[k]
                    Q[j, k] = <cython.floating>q
                    partial_pq[b, k] = partial_pq[b, k] + <double>P[j, k] * <double>Q[j, k]


def update_xr(
    cython.floating[:, ::1] X,
    cython.floating[:, ::1] R,
    cython.floating[:, ::1] Zr,
    const cython.floating[:, ::1] P,
    const cython.floating[:, ::1] Q,
    const double[::1] step,
    const double[::1] inv_diag,
    double[:, ::1] partial_rr,
    double[:, ::1] partial_rz,
    int n_threads,
):
    """X += step·P, R −= step·Q, Zr = R / diag; partial Σ R² and Σ R∘Zr per block."""
    cdef Py_ssize_t D = X.shape[0], K = X.shape[1]
    cdef Py_ssize_t nb = partial_rr.shape[0], b, j, k, j0, j1
    cdef double r, z
    with nogil:
        for b in prange(nb, num_threads=n_threads, schedule="static"):
            j0 = b * _BLOCK
            j1 = min(j0 + _BLOCK, D)
            for k in range(K):
                partial_rr[b, k] = 0.0
                partial_rz[b, k] = 0.0
            for j in range(j0, j1):
                for k in range(K):
                    X[j, k] = <cython.floating>(X[j, k] + step[k] * P[j, k])
                    R[j, k] = <cython.floating>(R[j, k] - step[k] * Q[j, k])
                    r = R[j, k]
                    Zr[j, k] = <cython.floating>(r * inv_diag[j])
                    z = Zr[j, k]
                    partial_rr[b, k] = partial_rr[b, k] + r * r
                    partial_rz[b, k] = partial_rz[b, k] + r * z


def update_p(
    cython.floating[:, ::1] P,
    const cython.floating[:, ::1] Zr,
    const double[::1] beta,
    const double[::1] keep,
    int n_threads,
):
    """P ← keep·(Zr + β·P): keep = 0 zeroes the direction of a finished target."""
    cdef Py_ssize_t D = P.shape[0], K = P.shape[1], j, k
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="static"):
            for k in range(K):
                P[j, k] = <cython.floating>(keep[k] * (Zr[j, k] + beta[k] * P[j, k]))
