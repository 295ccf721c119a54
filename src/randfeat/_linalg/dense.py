"""Products with a dense feature matrix (``DenseProducts``) over fixed row blocks (``RowBlockOperator``)."""

from abc import abstractmethod
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._core.threads import single_threaded_blas
from .operator import Capability, FeatureOperator


def gemm_ready(X):
    """Return X itself if gemm can read it (one unit stride), else a C copy."""
    item = X.itemsize
    s0, s1 = X.strides
    n, d = X.shape
    if n == 1 or d == 1:
        # One of the strides is meaningless; a copy is at most one row/column.
        return np.ascontiguousarray(X)
    if s1 == item and s0 >= d * item and s0 % item == 0:
        return X  # C order, possibly every k-th row of a larger array
    if s0 == item and s1 >= n * item and s1 % item == 0:
        return X  # Fortran order, possibly every k-th column
    return np.ascontiguousarray(X)


class RowBlockOperator(FeatureOperator):
    """An operator over fixed blocks of rows: owns the map over blocks and the block-order reduction.

    ``Z @ P`` is a map (each block writes its rows of the result); ``Zᵀ @ U``
    is a map followed by one reduction, the partial products Z_bᵀU_b summed
    in block order.  Subclasses say how to multiply one block
    (``_block_matmat``, ``_block_rmatmat``); ``_map`` says how the blocks
    are run — here a pool of ``n_threads`` Python threads, each calling
    single-threaded BLAS (NumPy releases the GIL).  The block size is fixed
    (never derived from the thread count), so results do not depend on it.

    Parameters
    ----------
    shape : (int, int)
    dtype : numpy dtype
    n_threads : int
    """

    BLOCK_ROWS = 8192  # fixed: the result must not depend on n_threads

    def __init__(self, shape, dtype, n_threads):
        super().__init__(shape, dtype, n_threads)
        n = self.shape[0]
        self._blocks = [(s, min(s + self.BLOCK_ROWS, n)) for s in range(0, n, self.BLOCK_ROWS)]
        self._pool = ThreadPoolExecutor(n_threads) if n_threads > 1 and len(self._blocks) > 1 else None

    @abstractmethod
    def _block_matmat(self, start, stop, P, out):
        """Write Z[start:stop] @ P into ``out``."""

    @abstractmethod
    def _block_rmatmat(self, start, stop, U):
        """Return Z[start:stop]ᵀ @ U."""

    def _map(self, fn):
        """Return [fn(start, stop) for each block], in block order."""
        with single_threaded_blas():
            if self._pool is None:
                return [fn(*b) for b in self._blocks]
            return list(self._pool.map(lambda b: fn(*b), self._blocks))

    def matmat(self, P):
        """Return Z @ P, block by block."""
        P = np.ascontiguousarray(P, dtype=self.dtype)
        out = np.empty((self.shape[0], P.shape[1]), dtype=self.dtype)
        self._map(lambda s, e: self._block_matmat(s, e, P, out[s:e]))
        return out

    def rmatmat(self, U):
        """Return Zᵀ @ U: the blocks' partial products summed in block order."""
        U = np.ascontiguousarray(U, dtype=self.dtype)
        parts = self._map(lambda s, e: self._block_rmatmat(s, e, U[s:e]))
        out = parts[0].copy()
        for p in parts[1:]:
            out += p
        return out

    def close(self):
        """Shut the thread pool down."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class DenseProducts(RowBlockOperator):
    """Products with a dense array Z, by single-threaded BLAS on fixed row blocks.

    Multithreaded OpenBLAS splits a thin product such as Zᵀ(N × K) along
    the summed dimension for some shapes, so its result depends on the
    thread count; hence the blocks (``RowBlockOperator``).  No Gram block:
    for dense Z it costs N·h² flops, as much as the Cholesky solver's Gram.

    Parameters
    ----------
    Z : ndarray of shape (N, D), float32 or float64
    n_threads : int
    """

    capabilities = frozenset({Capability.COLUMN_STATISTICS})
    _CHUNK_ELEMENTS = 1 << 22  # row chunks for the column statistics

    def __init__(self, Z, n_threads):
        super().__init__(Z.shape, Z.dtype, n_threads)
        self.Z = Z

    def _block_matmat(self, start, stop, P, out):
        np.matmul(self.Z[start:stop], P, out=out)

    def _block_rmatmat(self, start, stop, U):
        return self.Z[start:stop].T @ U

    def _row_chunks(self):
        step = max(1, self._CHUNK_ELEMENTS // max(1, self.shape[1]))
        for start in range(0, self.shape[0], step):
            yield start, min(start + step, self.shape[0])

    def column_sq_sums(self, w):
        """Return Σ_i w_i Z_ij² for each column j, float64 (einsum over row chunks)."""
        out = np.zeros(self.shape[1], dtype=np.float64)
        for s, e in self._row_chunks():
            block = self.Z[s:e].astype(np.float64)
            out += np.einsum("ij,ij,i->j", block, block, w[s:e])
        return out

    def column_sums(self, w):
        """Return Σ_i w_i Z_ij for each column j, float64 (row chunks in order)."""
        out = np.zeros(self.shape[1], dtype=np.float64)
        with single_threaded_blas():
            for s, e in self._row_chunks():
                out += w[s:e] @ self.Z[s:e].astype(np.float64)
        return out
