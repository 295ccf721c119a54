"""The two products a CG iteration needs, Z @ P and Z.T @ U, for sparse and dense Z.

CG only ever touches the feature matrix Z through these products, so the
solver is the same for both storage formats:

* CSR Z: ``_sparse_fast.csr_matmat`` row-parallel over Z for ``Z @ P`` and
  over a CSC copy of Z (made once, i.e. the CSR arrays of Zᵀ) for
  ``Z.T @ U``.  One output row per thread: bit-identical for any thread count.
* dense Z: BLAS gemm through NumPy, with BLAS limited to ``n_threads``.

Centring and sample weights are applied by the solver around these
products (``_cg.py``), never by modifying Z.
"""

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ._sparse_fast import csr_matmat, csr_row_weighted_sq_sums


def _common_index_dtype(A):
    """Return (indptr, indices) of CSR/CSC ``A`` with one shared integer dtype."""
    indptr, indices = A.indptr, A.indices
    if indptr.dtype != indices.dtype:
        dtype = np.promote_types(indptr.dtype, indices.dtype)
        indptr, indices = indptr.astype(dtype), indices.astype(dtype)
    if indptr.dtype not in (np.int32, np.int64):
        indptr, indices = indptr.astype(np.int64), indices.astype(np.int64)
    return indptr, indices


class SparseProducts:
    """Z @ P and Z.T @ U for a canonical CSR matrix Z (float32 or float64).

    Parameters
    ----------
    Z : scipy.sparse CSR matrix, canonical format
    n_threads : int
        OpenMP threads for the kernels (does not change results).
    """

    def __init__(self, Z, n_threads):
        self.shape = Z.shape
        self.dtype = Z.dtype
        self.n_threads = n_threads
        self._csr = (*_common_index_dtype(Z), Z.data)
        # Zᵀ as CSR = Z as CSC.  Made once per fit: a column-parallel
        # gather needs no partial sums, so it is deterministic without extra
        # memory per thread.  Costs one copy of Z (indices + data).
        Zt = Z.tocsc()
        self._csc = (*_common_index_dtype(Zt), Zt.data)

    def dot(self, P):
        """Return Z @ P for P of shape (D, K), C-contiguous, Z's dtype."""
        out = np.empty((self.shape[0], P.shape[1]), dtype=self.dtype)
        indptr, indices, data = self._csr
        csr_matmat(indptr, indices, data, np.ascontiguousarray(P, dtype=self.dtype), out, self.n_threads)
        return out

    def tdot(self, U):
        """Return Z.T @ U for U of shape (N, K)."""
        out = np.empty((self.shape[1], U.shape[1]), dtype=self.dtype)
        indptr, indices, data = self._csc
        csr_matmat(indptr, indices, data, np.ascontiguousarray(U, dtype=self.dtype), out, self.n_threads)
        return out

    def weighted_col_sq_sums(self, w):
        """Return sum_i w_i Z_ij**2 for each column j, as float64."""
        out = np.empty(self.shape[1], dtype=np.float64)
        indptr, indices, data = self._csc
        csr_row_weighted_sq_sums(indptr, indices, data, np.ascontiguousarray(w, dtype=np.float64), out, self.n_threads)
        return out

    def weighted_col_sums(self, w):
        """Return sum_i w_i Z_ij for each column j, as float64."""
        out = np.empty((self.shape[1], 1), dtype=np.float64)
        indptr, indices, data = self._csc
        csr_matmat(indptr, indices, data.astype(np.float64, copy=False), np.asarray(w, dtype=np.float64)[:, None], out, self.n_threads)
        return out[:, 0]


class DenseProducts:
    """Z @ P and Z.T @ U for a dense array Z, by BLAS with ``n_threads`` threads.

    OpenBLAS splits a gemm over output blocks, not over the summed
    dimension, so its results do not depend on the thread count.
    """

    _CHUNK_ELEMENTS = 1 << 22  # row chunks for the column statistics

    def __init__(self, Z, n_threads):
        self.Z = Z
        self.shape = Z.shape
        self.dtype = Z.dtype
        self.n_threads = n_threads

    def dot(self, P):
        with threadpool_limits(limits=self.n_threads, user_api="blas"):
            return self.Z @ P.astype(self.dtype, copy=False)

    def tdot(self, U):
        with threadpool_limits(limits=self.n_threads, user_api="blas"):
            return self.Z.T @ U.astype(self.dtype, copy=False)

    def _row_chunks(self):
        step = max(1, self._CHUNK_ELEMENTS // max(1, self.shape[1]))
        for start in range(0, self.shape[0], step):
            yield start, min(start + step, self.shape[0])

    def weighted_col_sq_sums(self, w):
        out = np.zeros(self.shape[1], dtype=np.float64)
        for s, e in self._row_chunks():
            block = self.Z[s:e].astype(np.float64)
            out += np.einsum("ij,ij,i->j", block, block, w[s:e])
        return out

    def weighted_col_sums(self, w):
        out = np.zeros(self.shape[1], dtype=np.float64)
        for s, e in self._row_chunks():
            out += w[s:e] @ self.Z[s:e].astype(np.float64)
        return out


def make_products(Z, n_threads):
    """Return the product object for ``Z`` (CSR → SparseProducts, else dense)."""
    if sp.issparse(Z):
        return SparseProducts(Z, n_threads)
    return DenseProducts(Z, n_threads)
