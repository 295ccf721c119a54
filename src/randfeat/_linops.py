"""The two products a CG iteration needs, Z @ P and Z.T @ U, for sparse and dense Z.

CG only ever touches the feature matrix Z through these products, so the
solver is the same for both storage formats:

* CSR Z: ``_sparse_fast.csr_matmat`` row-parallel over Z for ``Z @ P`` and
  over a CSC copy of Z (made once, i.e. the CSR arrays of Zᵀ) for
  ``Z.T @ U``.  One output row per thread: bit-identical for any thread count.
* dense Z: single-threaded BLAS gemm on fixed row blocks, run by a pool of
  ``n_threads`` threads, partial products summed in block order.

Centring and sample weights are applied by the solver around these
products (``_cg.py``), never by modifying Z.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
from threadpoolctl import ThreadpoolController

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

    _MIN_NNZ_PER_THREAD = 100_000

    def __init__(self, Z, n_threads):
        self.shape = Z.shape
        self.dtype = Z.dtype
        # Small products are not worth waking threads for (on a loaded
        # machine a parallel region can cost milliseconds); the result does
        # not depend on the thread count either way.
        self.n_threads = n_threads if Z.nnz >= self._MIN_NNZ_PER_THREAD * 2 else 1
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

    def close(self):
        pass

    def weighted_col_sums(self, w):
        """Return sum_i w_i Z_ij for each column j, as float64."""
        out = np.empty((self.shape[1], 1), dtype=np.float64)
        indptr, indices, data = self._csc
        csr_matmat(indptr, indices, data.astype(np.float64, copy=False), np.asarray(w, dtype=np.float64)[:, None], out, self.n_threads)
        return out[:, 0]


class DenseProducts:
    """Z @ P and Z.T @ U for a dense array Z, by single-threaded BLAS on fixed row blocks.

    Multithreaded OpenBLAS splits a thin product such as Zᵀ(N × K) along
    the summed dimension for some shapes, so its result depends on the
    thread count.  Here the rows of Z are cut into blocks of a fixed size
    (independent of the thread count); a pool of ``n_threads`` Python
    threads runs one single-threaded BLAS call per block (NumPy releases
    the GIL), and the partial products Z_bᵀU_b are summed in block order.
    """

    _BLOCK_ROWS = 8192  # fixed: the result must not depend on n_threads
    _CHUNK_ELEMENTS = 1 << 22  # row chunks for the column statistics

    def __init__(self, Z, n_threads):
        self.Z = Z
        self.shape = Z.shape
        self.dtype = Z.dtype
        self.n_threads = n_threads
        n = Z.shape[0]
        self._blocks = [(s, min(s + self._BLOCK_ROWS, n)) for s in range(0, n, self._BLOCK_ROWS)]
        self._pool = ThreadPoolExecutor(n_threads) if n_threads > 1 and len(self._blocks) > 1 else None

    def _map(self, fn):
        with blas_threads(1):
            if self._pool is None:
                return [fn(b) for b in self._blocks]
            return list(self._pool.map(fn, self._blocks))

    def dot(self, P):
        P = np.ascontiguousarray(P, dtype=self.dtype)
        out = np.empty((self.shape[0], P.shape[1]), dtype=self.dtype)

        def block(se):
            s, e = se
            np.matmul(self.Z[s:e], P, out=out[s:e])

        self._map(block)
        return out

    def tdot(self, U):
        U = np.ascontiguousarray(U, dtype=self.dtype)
        parts = self._map(lambda se: self.Z[se[0] : se[1]].T @ U[se[0] : se[1]])
        out = parts[0].copy()
        for p in parts[1:]:
            out += p
        return out

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

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
        with blas_threads(1):
            for s, e in self._row_chunks():
                out += w[s:e] @ self.Z[s:e].astype(np.float64)
        return out


_controller = None


def blas_threads(n_threads):
    """Context manager limiting BLAS to ``n_threads`` (one controller, made once:
    threadpoolctl's library scan costs milliseconds, too much per product)."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=n_threads, user_api="blas")


def make_products(Z, n_threads):
    """Return the product object for ``Z`` (CSR → SparseProducts, else dense)."""
    if sp.issparse(Z):
        return SparseProducts(Z, n_threads)
    return DenseProducts(Z, n_threads)
