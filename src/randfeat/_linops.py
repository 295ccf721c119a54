"""The two products a CG iteration needs, Z @ P and Z.T @ U, for sparse and dense Z.

CG only ever touches the feature matrix Z through these products, so the
solver is the same for both storage formats:

* CSR Z: either one fused pass ``Zᵀ W Z P`` with fixed row-block partial
  sums (``_sparse_fast.csr_normal_matmat``), or ``Z @ P`` row-parallel over
  Z and ``Z.T @ U`` over a CSC copy of Z (``csr_matmat``); see
  ``SparseProducts``.  Bit-identical for any thread count either way.
* one-hot block CSR Z (random binning features, one-hot encodings: every
  row has one nonzero per block of columns, all of one value): the
  block-major products of ``_onehot_fast`` (``OneHotBlockProducts``),
  which read no value array and keep each block's slice of the vector in
  cache.  Detected from the CSR itself (``onehot_block_structure``).
* dense Z: single-threaded BLAS gemm on fixed row blocks, run by a pool of
  ``n_threads`` threads, partial products summed in block order.

Centring and sample weights are applied by the solver around these
products (``_cg.py``), never by modifying Z.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from ._onehot_fast import n_row_blocks, onehot_matmat, onehot_tmatmat
from ._sparse_fast import (
    compact_columns,
    csr_gram_block,
    csr_matmat,
    csr_normal_matmat,
    csr_row_weighted_sq_sums,
    sum_blocks,
)
from ._threads import limit_blas_threads


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
    """Products with a canonical CSR matrix Z (float32 or float64).

    Two ways to apply Zᵀ W Z per CG iteration, chosen from the problem size
    only (never from the thread count, so results do not depend on it):

    * fused (``normal``): one pass over the CSR computing Z P row by row and
      scattering z_i v_i into ``n_blocks`` fixed row-block buffers (D × K
      doubles each) that are then summed in block order.  Z is read once
      per iteration and no CSC copy exists.  Used for one target (K = 1)
      when 2..4 block buffers fit in ``FUSED_BUFFER_BYTES``.
    * two passes (``dot`` then ``tdot``): Z P row-parallel over the CSR, Zᵀ U
      row-parallel over a CSC copy of Z (made on first use).  Used for K > 1
      and when D is too large for the block buffers.

    Measured on the 522000-row, 26M-nonzero binning matrix (bench/ridge.py
    data, a loaded machine, medians of 3): one target, fused 0.96-1.04 s
    vs two-pass 0.92-1.03 s per product: a tie, but fused needs no CSC copy
    (5.9 s to make there, and a second copy of Z in memory).  Seven targets:
    fused 4.1-5.1 s vs two-pass 3.1-3.2 s (scattering into K-wide block
    buffers costs more than the CSC gather).  Hence fused for K = 1 only.

    Parameters
    ----------
    Z : scipy.sparse CSR matrix, canonical format
    n_threads : int
        OpenMP threads for the kernels (does not change results).
    """

    _MIN_NNZ_PER_THREAD = 100_000
    FUSED_BUFFER_BYTES = 256 * 2**20
    MAX_BLOCKS = 4

    def __init__(self, Z, n_threads):
        self.shape = Z.shape
        self.dtype = Z.dtype
        self.Z = Z
        # Small products are not worth waking threads for (on a loaded
        # machine a parallel region can cost milliseconds); the result does
        # not depend on the thread count either way.
        self.n_threads = n_threads if Z.nnz >= self._MIN_NNZ_PER_THREAD * 2 else 1
        self._csr = (*_common_index_dtype(Z), Z.data)
        self._csc = None
        self._blocks = {}

    def n_blocks(self, K):
        """Number of row blocks of the fused product for K targets (0: not fused)."""
        D = self.shape[1]
        if K > 1:
            return 0
        nb = min(self.MAX_BLOCKS, self.FUSED_BUFFER_BYTES // max(1, D * K * 8), self.shape[0])
        return int(nb) if nb >= 2 else 0

    def normal(self, P, mup, w):
        """Return (Zᵀ W (Z P − 1 mupᵀ), Σ_i w_i (z_iᵀP − mup)) by the fused pass."""
        D, K = P.shape
        nb = self.n_blocks(K)
        if K not in self._blocks:
            self._blocks[K] = (np.empty((nb, D, K)), np.empty((nb, K)))
        partial, usum = self._blocks[K]
        indptr, indices, data = self._csr
        w_arg = np.zeros(0) if w is None else w
        csr_normal_matmat(indptr, indices, data, np.ascontiguousarray(P, dtype=self.dtype),
                          np.ascontiguousarray(mup, dtype=np.float64), w_arg, partial, usum, self.n_threads)
        Q = np.empty((D, K), dtype=self.dtype)
        sum_blocks(partial, Q, self.n_threads if D * K >= 2_000_000 else 1)
        return Q, usum.sum(axis=0)

    def _csc_arrays(self):
        if self._csc is None:
            # Zᵀ as CSR = Z as CSC: a column-parallel gather needs no partial
            # sums.  Made once per fit; costs one copy of Z.
            Zt = self.Z.tocsc()
            self._csc = (*_common_index_dtype(Zt), Zt.data)
        return self._csc

    def dot(self, P):
        """Return Z @ P for P of shape (D, K), C-contiguous, Z's dtype."""
        out = np.empty((self.shape[0], P.shape[1]), dtype=self.dtype)
        indptr, indices, data = self._csr
        csr_matmat(indptr, indices, data, np.ascontiguousarray(P, dtype=self.dtype), out, self.n_threads)
        return out

    def tdot(self, U):
        """Return Z.T @ U for U of shape (N, K)."""
        out = np.empty((self.shape[1], U.shape[1]), dtype=self.dtype)
        indptr, indices, data = self._csc_arrays()
        csr_matmat(indptr, indices, data, np.ascontiguousarray(U, dtype=self.dtype), out, self.n_threads)
        return out

    def tdot_once(self, U):
        """Z.T @ U for a one-off product (no CSC copy in fused mode): SciPy, serial."""
        if self._csc is not None:
            return self.tdot(U)
        # In float64 also for float32 Z: SciPy would accumulate in float32.
        indptr, indices, data = self._csr
        Z64 = sp.csr_matrix((data.astype(np.float64, copy=False), indices, indptr), shape=self.shape)
        return np.ascontiguousarray((Z64.T @ np.asarray(U, dtype=np.float64)).astype(self.dtype))

    def weighted_col_sq_sums(self, w):
        """Return sum_i w_i Z_ij**2 for each column j, as float64."""
        if self._csc is not None:
            out = np.empty(self.shape[1], dtype=np.float64)
            indptr, indices, data = self._csc
            csr_row_weighted_sq_sums(indptr, indices, data, np.ascontiguousarray(w, dtype=np.float64), out, self.n_threads)
            return out
        indptr, indices, data = self._csr
        Z2 = sp.csr_matrix((data.astype(np.float64) ** 2, indices, indptr), shape=self.shape)
        return Z2.T @ np.asarray(w, dtype=np.float64)

    def weighted_col_sums(self, w):
        """Return sum_i w_i Z_ij for each column j, as float64."""
        indptr, indices, data = self._csr
        Z64 = sp.csr_matrix((data.astype(np.float64, copy=False), indices, indptr), shape=self.shape)
        return Z64.T @ np.asarray(w, dtype=np.float64)

    def gram_block(self, columns, w):
        """Return the dense Gram block Σ_i w_i z_i[columns] z_i[columns]ᵀ (float64).

        Parameters
        ----------
        columns : ndarray of int, increasing
            The chosen columns (h of them).
        w : ndarray (N,) float64 or None
            Sample weights (None: unit weights).

        Returns
        -------
        ndarray (h, h) float64, symmetric
        """
        D = self.shape[1]
        h = len(columns)
        indptr, indices, data = self._csr
        position = np.full(D, -1, dtype=np.int32)
        position[columns] = np.arange(h, dtype=np.int32)
        hptr, hidx, hval = compact_columns(indptr, indices, data, position)
        out = np.zeros((h, h), dtype=np.float64)
        csr_gram_block(hptr, hidx, hval, np.zeros(0) if w is None else w, out, self.n_threads)
        # Upper triangle filled: mirror it.
        return np.triu(out) + np.triu(out, 1).T

    def close(self):
        """Release the work buffers."""
        self._blocks = {}
        self._csc = None


def onehot_block_structure(Z):
    """Describe CSR ``Z`` as a one-hot block matrix, or return None.

    Z qualifies when every row has the same number G of nonzeros, all of one
    nonzero value c, and the j-th nonzero of every row lies in the j-th of G
    disjoint, increasing column ranges.  Costs a few passes over the index
    array (O(nnz)); done once per fit.

    Returns
    -------
    None, or (bins, start, value): bins (G, N) int32 local columns, start
    (G + 1,) int64 block offsets (start[0] = 0, start[G] = D), value float.
    """
    N, D = Z.shape
    if N == 0 or Z.nnz == 0 or Z.nnz % N:
        return None
    G = Z.nnz // N
    if not np.array_equal(Z.indptr, np.arange(0, Z.nnz + 1, G)):
        return None
    value = Z.data[0]
    if value == 0 or not np.all(Z.data == value):
        return None
    cols = Z.indices.reshape(N, G)
    lo, hi = cols.min(axis=0), cols.max(axis=0)
    if np.any(lo[1:] <= hi[:-1]):
        return None
    start = np.empty(G + 1, dtype=np.int64)
    start[0], start[1:G], start[G] = 0, lo[1:], D
    if np.any(np.diff(start) > np.iinfo(np.int32).max):
        return None
    bins = np.ascontiguousarray((cols - start[:G].astype(cols.dtype)).T, dtype=np.int32)
    return bins, start, float(value)


class OneHotBlockProducts(SparseProducts):
    """Products with a one-hot block CSR matrix (see ``onehot_block_structure``).

    ``Z @ P`` and ``Zᵀ @ U`` by the block-major kernels of ``_onehot_fast``
    (no value array read, each block's slice of the vector cache-resident,
    no CSC copy); ``normal`` fuses centring and weights into ``Z @ P``.
    Everything else as ``SparseProducts``.  Measured on the 522000-row,
    50-grid binning matrix (26M nonzeros, D = 531879), idle machine,
    2 threads: one target, Z @ p 14 ms and Zᵀ @ u 12 ms, against 120 ms for
    the pair in SciPy; seven targets 88-105 + 54-63 ms against 408 ms.
    Memory: the block-major copy of the bins is N·G int32, the size of Z's
    index array (Z itself is kept: the preconditioner reads its CSR).

    Parameters
    ----------
    Z : CSR matrix with the one-hot block structure
    structure : (bins, start, value) from ``onehot_block_structure``
    n_threads : int
    """

    _EMPTY = np.zeros(0)
    _NO_SUMS = np.zeros((0, 0))

    def __init__(self, Z, structure, n_threads):
        super().__init__(Z, n_threads)
        self.bins, self.start, self.value = structure

    def n_blocks(self, K):
        return 1  # ``normal`` is available (centring and weights fused)

    def _matmat(self, P, shift, w, sums):
        P = np.ascontiguousarray(P, dtype=self.dtype)
        out = np.empty((self.shape[0], P.shape[1]), dtype=self.dtype)
        onehot_matmat(self.bins, self.start, self.value, P, out, shift, w, sums, self.n_threads)
        return out

    def dot(self, P):
        return self._matmat(P, self._EMPTY, self._EMPTY, self._NO_SUMS)

    def _tdot(self, U, dtype):
        U = np.ascontiguousarray(U, dtype=dtype)
        out = np.empty((self.shape[1], U.shape[1]), dtype=dtype)
        onehot_tmatmat(self.bins, self.start, self.value, U, out, self.n_threads)
        return out

    def tdot(self, U):
        return self._tdot(U, self.dtype)

    def normal(self, P, mup, w):
        """Return (Zᵀ W (Z P − 1 mupᵀ), Σ_i w_i (z_iᵀP − mup)): centring and weights fused into Z P."""
        K = P.shape[1]
        sums = np.empty((n_row_blocks(self.shape[0]), K))
        U = self._matmat(P, np.ascontiguousarray(mup, dtype=np.float64), self._EMPTY if w is None else w, sums)
        return self.tdot(U), sums.sum(axis=0)  # block order: thread-count independent

    def tdot_once(self, U):
        return self._tdot(U, np.float64).astype(self.dtype, copy=False)

    def weighted_col_sums(self, w):
        return self._tdot(np.asarray(w, dtype=np.float64)[:, None], np.float64)[:, 0]

    def weighted_col_sq_sums(self, w):
        # z_ij² = c·z_ij for the one value c.
        return self.value * self.weighted_col_sums(w)

    def close(self):
        super().close()
        self.bins = None


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
        with limit_blas_threads(1):
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

    def n_blocks(self, K):
        return 0  # no fused path for dense Z

    def tdot_once(self, U):
        return self.tdot(U)

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
        with limit_blas_threads(1):
            for s, e in self._row_chunks():
                out += w[s:e] @ self.Z[s:e].astype(np.float64)
        return out


def make_products(Z, n_threads):
    """Return the product object for ``Z``.

    One-hot block CSR → OneHotBlockProducts, other CSR → SparseProducts,
    dense → DenseProducts.
    """
    if sp.issparse(Z):
        structure = onehot_block_structure(Z)
        if structure is not None:
            return OneHotBlockProducts(Z, structure, n_threads)
        return SparseProducts(Z, n_threads)
    return DenseProducts(Z, n_threads)
