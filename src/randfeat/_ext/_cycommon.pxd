# cython: language_level=3
"""The Cython vocabulary every kernel module shares (cimport only).

* ``index_t``: the index dtypes of a CSR matrix (scipy uses int32 or int64).
* ``gemm``: BLAS gemm over ``cython.floating`` from ``scipy.linalg.cython_blas``,
  written once so kernels call one name for float32 and float64 (the idea of
  scikit-learn's ``sklearn/utils/_cython_blas``).  Column-major, as BLAS.

Inline functions and types only: this file has no compiled module of its
own.  The chunk loop every parallel kernel runs on is ``ChunkLoop`` in
``_openmp.pxd``.
"""

from cython cimport floating
from libc.stdint cimport int32_t, int64_t
from scipy.linalg.cython_blas cimport dgemm, sgemm

ctypedef fused index_t:
    int32_t
    int64_t


cdef inline void gemm(char transa, char transb, int m, int n, int k, floating alpha,
                      const floating *A, int lda, const floating *B, int ldb, floating beta,
                      floating *C, int ldc) noexcept nogil:
    """C <- alpha op(A) op(B) + beta C (column-major; op is 'N' or 'T')."""
    if floating is double:
        dgemm(&transa, &transb, &m, &n, &k, &alpha, <double *>A, &lda, <double *>B, &ldb,
              &beta, C, &ldc)
    else:
        sgemm(&transa, &transb, &m, &n, &k, &alpha, <float *>A, &lda, <float *>B, &ldb,
              &beta, C, &ldc)
