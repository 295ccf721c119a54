"""Products with a canonical CSR feature matrix (``SparseProducts``) and the CSR helpers the one-hot kernels share."""

import numpy as np
import scipy.sparse as sp

from .._core.threads import threads_for
from .._ext._sparse_fast import (
    compact_columns,
    csr_gram_block,
    csr_matmat,
    csr_normal_matmat,
    csr_row_weighted_sq_sums,
    sum_blocks,
)
from .operator import Capability, FeatureOperator, MatrixKind


def _common_index_dtype(A):
    """Return (indptr, indices) of CSR/CSC ``A`` with one shared integer dtype."""
    indptr, indices = A.indptr, A.indices
    if indptr.dtype != indices.dtype:
        dtype = np.promote_types(indptr.dtype, indices.dtype)
        indptr, indices = indptr.astype(dtype), indices.astype(dtype)
    if indptr.dtype not in (np.int32, np.int64):
        indptr, indices = indptr.astype(np.int64), indices.astype(np.int64)
    return indptr, indices


def _float64_csr(csr, shape):
    """Return the CSR arrays ``csr`` as a float64 SciPy matrix (no copy for float64 data)."""
    indptr, indices, data = csr
    return sp.csr_matrix((data.astype(np.float64, copy=False), indices, indptr), shape=shape)


def csr_gram_block_of(csr, n_columns, columns, w, n_threads):
    """Return the dense Gram block Σ_i w_i z_i[columns] z_i[columns]ᵀ of a CSR matrix.

    Parameters
    ----------
    csr : (indptr, indices, data)
        The CSR arrays of Z (one shared index dtype).  ``data`` may be any
        1-d view of length nnz (a one-hot matrix's zero-stride broadcast of
        its one value, ``onehot.release_values``): it is read a slab at a time.
    n_columns : int
        D.
    columns : ndarray of int, increasing
        The chosen columns (h of them).
    w : ndarray of shape (N,) float64, or None for unit weights
    n_threads : int

    Returns
    -------
    ndarray of shape (h, h), float64, symmetric
    """
    h = len(columns)
    indptr, indices, data = csr
    N = len(indptr) - 1
    position = np.full(n_columns, -1, dtype=np.int32)
    position[columns] = np.arange(h, dtype=np.int32)
    out = np.zeros((h, h), dtype=np.float64)
    # The rows a slab at a time: the compact copy of the chosen columns'
    # entries is at most GRAM_SLAB_ENTRIES long, not up to nnz (on
    # Forest-like binning the 2048 heaviest columns hold ~45% of the
    # entries: 140 MB at once).  The kernel adds each slab into ``out`` in
    # row order, so the sums are the same bits as in one pass.
    step = max(1, int(GRAM_SLAB_ENTRIES * N // max(1, int(indptr[-1]))))
    same = None
    for r0 in range(0, N, step):
        r1 = min(N, r0 + step)
        p0, p1 = indptr[r0], indptr[r1]
        if data.strides[0] == 0 and p1 > p0:  # one value: a contiguous run of it, made once and reused
            if same is None or same.size < p1 - p0:
                same = np.full(p1 - p0, data[0], dtype=data.dtype)
            values = same[: p1 - p0]
        else:
            values = np.ascontiguousarray(data[p0:p1])
        # The slab's arrays rebased to its first entry: the same compact copy, bit for bit.
        hptr, hidx, hval = compact_columns(indptr[r0 : r1 + 1] - p0, indices[p0:p1], values, position)
        csr_gram_block(hptr, hidx, hval, np.zeros(0) if w is None else w[r0:r1], out, n_threads)
    # Upper triangle filled: mirror it.
    return mirror_triangle(out, lower=False)


#: Entries of Z per slab of rows in ``csr_gram_block_of`` (the compact copy
#: of a slab is at most this many indices and values: 12 MB in float64).
GRAM_SLAB_ENTRIES = 1 << 20


#: Columns of a square matrix mirrored per step of ``mirror_triangle``.
MIRROR_STEP = 256


def mirror_triangle(A, lower):
    """Copy one triangle of square A onto the other, in place; return A (then exactly symmetric).

    A band of ``MIRROR_STEP`` rows at a time, so no temporary of A's size
    (``np.tril(A) + np.tril(A, -1).T`` made three: 0.15 s each for the
    2048 × 2048 heavy block).

    Parameters
    ----------
    A : ndarray of shape (h, h), C-contiguous
    lower : bool
        True: the lower triangle (diagonal included) is kept and copied
        onto the upper one; False: the other way round.

    Returns
    -------
    A
    """
    h = A.shape[0]
    for r0 in range(0, h, MIRROR_STEP):
        r1 = min(h, r0 + MIRROR_STEP)
        tile = A[r0:r1, r0:r1]
        if lower:
            above = np.triu_indices(r1 - r0, 1)
            tile[above] = tile.T[above]
            A[r0:r1, r1:] = A[r1:, r0:r1].T
        else:
            below = np.tril_indices(r1 - r0, -1)
            tile[below] = tile.T[below]
            A[r1:, r0:r1] = A[r0:r1, r1:].T
    return A


# -------------------------------------------------------------------- CSR
class SparseProducts(FeatureOperator):
    """Products with a canonical CSR matrix Z (float32 or float64).

    Two ways to apply Zᵀ W Z per CG iteration (``normal``), chosen from the
    problem size only (never from the thread count, so results do not
    depend on it):

    * fused: one pass over the CSR computing Z P row by row and scattering
      z_i v_i into ``n_blocks`` fixed row-block buffers (D × K doubles
      each) that are then summed in block order.  Z is read once per
      iteration and no CSC copy exists.  Used for one target (K = 1) when
      2..4 block buffers fit in ``FUSED_BUFFER_BYTES``.
    * two passes (``matmat`` then ``rmatmat``): Z P row-parallel over the
      CSR, Zᵀ U row-parallel over a CSC copy of Z (made on first use).
      Used for K > 1 and when D is too large for the block buffers.

    Fused is used for K = 1 only: for one target it ties with two passes
    and needs no CSC copy; for K > 1 scattering into K-wide block buffers
    costs more than the CSC gather (measurements in DESIGN.md, "Sparse
    normal products").

    Parameters
    ----------
    Z : scipy.sparse CSR matrix, canonical format
    n_threads : int
        OpenMP threads for the kernels (does not change results).
    """

    capabilities = frozenset(Capability)
    kind = MatrixKind.CSR
    FUSED_BUFFER_BYTES = 256 * 2**20
    MAX_BLOCKS = 4

    def __init__(self, Z, n_threads, entries=None):
        # Small products are not worth waking threads for.
        super().__init__(Z.shape, Z.dtype, threads_for("csr_entries", Z.nnz, n_threads))
        self.Z = Z
        self._csr = (*_common_index_dtype(Z), Z.data)
        self._csc = None
        self._blocks = {}
        self._entries = Z.nnz if entries is None else int(entries)

    @property
    def entries(self):
        """Entries of the problem's Z: its nnz, or that of the rows merged into it (``make_products``)."""
        return self._entries

    def n_blocks(self, K):
        """Number of row blocks of the fused product for K targets (0: two passes)."""
        D = self.shape[1]
        if K > 1:
            return 0
        nb = min(self.MAX_BLOCKS, self.FUSED_BUFFER_BYTES // max(1, D * K * 8), self.shape[0])
        return int(nb) if nb >= 2 else 0

    def normal(self, P, mup, w, out=None):
        """Return (Zᵀ W (Z P − 1 mupᵀ), Σ_i w_i (z_iᵀP − mup)): fused pass, or two passes (see class doc)."""
        D, K = P.shape
        nb = self.n_blocks(K)
        if nb == 0:
            return super().normal(P, mup, w, out)
        if K not in self._blocks:
            self._blocks[K] = (np.empty((nb, D, K)), np.empty((nb, K)))
        partial, usum = self._blocks[K]
        indptr, indices, data = self._csr
        w_arg = np.zeros(0) if w is None else w
        csr_normal_matmat(indptr, indices, data, np.ascontiguousarray(P, dtype=self.dtype),
                          np.ascontiguousarray(mup, dtype=np.float64), w_arg, partial, usum, self.n_threads)
        Q = np.empty((D, K), dtype=self.dtype) if out is None else out
        sum_blocks(partial, Q, threads_for("vector_elements", D * K, self.n_threads))
        return Q, usum.sum(axis=0)

    def _csc_arrays(self):
        if self._csc is None:
            # Zᵀ as CSR = Z as CSC: a column-parallel gather needs no partial
            # sums.  Made once per fit; costs one copy of Z.
            Zt = self.Z.tocsc()
            self._csc = (*_common_index_dtype(Zt), Zt.data)
        return self._csc

    def matmat(self, P):
        """Return Z @ P for P of shape (D, K), row-parallel over the CSR."""
        out = np.empty((self.shape[0], P.shape[1]), dtype=self.dtype)
        indptr, indices, data = self._csr
        csr_matmat(indptr, indices, data, np.ascontiguousarray(P, dtype=self.dtype), out, self.n_threads)
        return out

    def rmatmat(self, U):
        """Return Zᵀ @ U for U of shape (N, K), row-parallel over a CSC copy of Z."""
        return self.rmatmat_into(U, np.empty((self.shape[1], U.shape[1]), dtype=self.dtype))

    def rmatmat_into(self, U, out):
        """Write Zᵀ @ U into ``out`` (see ``FeatureOperator.rmatmat_into``)."""
        indptr, indices, data = self._csc_arrays()
        csr_matmat(indptr, indices, data, np.ascontiguousarray(U, dtype=self.dtype), out, self.n_threads)
        return out

    def rmatmat_once(self, U):
        """Return Zᵀ @ U without making the CSC copy (SciPy, serial, float64 sums) unless it exists."""
        if self._csc is not None:
            return self.rmatmat(U)
        # In float64 also for float32 Z: SciPy would accumulate in float32.
        product = _float64_csr(self._csr, self.shape).T @ np.asarray(U, dtype=np.float64)
        return np.ascontiguousarray(product.astype(self.dtype))

    def column_sq_sums(self, w):
        """Return Σ_i w_i Z_ij² for each column j, float64."""
        if self._csc is not None:
            out = np.empty(self.shape[1], dtype=np.float64)
            indptr, indices, data = self._csc
            w = np.ascontiguousarray(w, dtype=np.float64)
            csr_row_weighted_sq_sums(indptr, indices, data, w, out, self.n_threads)
            return out
        indptr, indices, data = self._csr
        Z2 = sp.csr_matrix((data.astype(np.float64) ** 2, indices, indptr), shape=self.shape)
        return Z2.T @ np.asarray(w, dtype=np.float64)

    def column_sums(self, w):
        """Return Σ_i w_i Z_ij for each column j, float64."""
        return _float64_csr(self._csr, self.shape).T @ np.asarray(w, dtype=np.float64)

    def gram_block(self, columns, w):
        """Return the dense Gram block of ``columns`` (see ``csr_gram_block_of``)."""
        return csr_gram_block_of(self._csr, self.shape[1], columns, w, self.n_threads)

    def close(self):
        """Release the work buffers and the CSC copy."""
        self._blocks = {}
        self._csc = None
