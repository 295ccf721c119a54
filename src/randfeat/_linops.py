"""Products with a feature matrix Z: the declared interface and its dense, CSR and one-hot implementations.

The iterative solver touches Z (N × D) only through a ``FeatureOperator``:
``Z @ P`` and ``Zᵀ @ U`` are required, and a few optional capabilities
(``Capability``) are either implemented by a class — which declares them in
``capabilities`` — or absent.  Consumers ask ``ops.has(capability)``, never
probe attributes; ``FeatureOperator.__init_subclass__`` checks that a class
declares exactly the optional methods it overrides.

=================  =====================================  ==========================================
capability         method                                 when absent
=================  =====================================  ==========================================
FUSED_NORMAL       ``normal(P, mup, w)``                  composed: ``matmat`` then ``rmatmat``
COLUMN_STATISTICS  ``column_sums(w)``,                    sums composed from ``rmatmat_once`` (in
                   ``column_sq_sums(w)``                  Z's precision); sums of squares raise
GRAM_BLOCK         ``gram_block(columns, w)``             raises ``NotImplementedError``
=================  =====================================  ==========================================

Implementations (``make_products`` picks one):

* ``DenseProducts`` — single-threaded BLAS on fixed row blocks, run by a
  pool; ``RowBlockOperator``, the base that owns the map over row blocks
  and the block-order reduction, is where a blocked (e.g. Dask) operator
  plugs in.
* ``SparseProducts`` — canonical CSR Z: a fused single pass ``Zᵀ W Z P``
  with fixed row-block partial sums (one target), or ``Z @ P`` row-parallel
  over the CSR and ``Zᵀ @ U`` over a CSC copy.
* ``OneHotBlockProducts`` — CSR Z whose rows have one nonzero per block of
  columns, all of one value (random binning features, one-hot encodings;
  detected by ``onehot_block_structure``): block-major kernels that read no
  value array.

Every product is bit-identical for any thread count.  Centring and sample
weights are applied around these products (``_normal.py``), never by
modifying Z.
"""

import enum
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from ._ext import _fourier_fast
from ._fourier_transform import _gemm_ready
from ._ext._onehot_fast import block_ranges, local_bins, n_row_blocks, onehot_matmat, onehot_tmatmat, pad_rows, padded_width
from ._ext._sparse_fast import (
    compact_columns,
    csr_gram_block,
    csr_matmat,
    csr_normal_matmat,
    csr_row_weighted_sq_sums,
    sum_blocks,
)
from ._threads import single_threaded_blas, threads_for


class Capability(enum.Enum):
    """Optional capabilities of a ``FeatureOperator``, each naming the methods that provide it."""

    #: ``normal``: Zᵀ W (Z P − 1 mupᵀ) in one fused pass.
    FUSED_NORMAL = ("normal",)
    #: ``column_sums`` / ``column_sq_sums``: Σ_i w_i Z_ij and Σ_i w_i Z_ij², float64.
    COLUMN_STATISTICS = ("column_sums", "column_sq_sums")
    #: ``gram_block``: the dense Gram block Σ_i w_i z_i[H] z_i[H]ᵀ of chosen columns H.
    GRAM_BLOCK = ("gram_block",)


class FeatureOperator(ABC):
    """Products with a feature matrix Z of shape (N, D), float32 or float64.

    Subclasses implement ``matmat`` and ``rmatmat`` and list in
    ``capabilities`` the optional ``Capability`` members they implement
    (see the module docstring for what happens when one is absent).

    Parameters
    ----------
    shape : (int, int)
        (N, D).
    dtype : numpy dtype
        Z's dtype; products take and return arrays of it.
    n_threads : int
        Threads the products may use (results do not depend on it).
    """

    #: The optional capabilities this class implements.
    capabilities = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for cap in Capability:
            overridden = {name for name in cap.value if getattr(cls, name) is not getattr(FeatureOperator, name)}
            if cap in cls.capabilities and len(overridden) < len(cap.value):
                missing = sorted(set(cap.value) - overridden)
                raise TypeError(f"{cls.__name__} declares {cap.name} but does not implement {missing}")
            if cap not in cls.capabilities and overridden:
                raise TypeError(f"{cls.__name__} implements {sorted(overridden)} without declaring {cap.name}")

    def __init__(self, shape, dtype, n_threads):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.n_threads = n_threads

    def has(self, capability):
        """Return True if this operator implements ``capability``.

        Parameters
        ----------
        capability : Capability

        Returns
        -------
        bool
        """
        return capability in self.capabilities

    @property
    def entries(self):
        """Stored entries of Z (N·D when dense, nnz when sparse): the work of one product per target."""
        return self.shape[0] * self.shape[1]

    # ------------------------------------------------------------ required
    @abstractmethod
    def matmat(self, P):
        """Return Z @ P.

        Parameters
        ----------
        P : ndarray of shape (D, K)

        Returns
        -------
        ndarray of shape (N, K), Z's dtype
        """

    @abstractmethod
    def rmatmat(self, U):
        """Return Zᵀ @ U.

        Parameters
        ----------
        U : ndarray of shape (N, K)

        Returns
        -------
        ndarray of shape (D, K), Z's dtype
        """

    def rmatmat_once(self, U):
        """Return Zᵀ @ U for a one-off product (may skip set-up that only repeated products repay).

        Parameters
        ----------
        U : ndarray of shape (N, K)

        Returns
        -------
        ndarray of shape (D, K), Z's dtype
        """
        return self.rmatmat(U)

    def rmatmat_into(self, U, out):
        """Write Zᵀ @ U into ``out`` (D × K, Z's dtype, C-contiguous): for a buffer kept across iterations.

        Parameters
        ----------
        U : ndarray of shape (N, K)
        out : ndarray of shape (D, K)

        Returns
        -------
        out
        """
        np.copyto(out, self.rmatmat(U))
        return out

    def close(self):
        """Release work buffers and threads (the operator stays usable)."""

    # -------------------------------------------------- optional capabilities
    def normal(self, P, mup, w, out=None):
        """Return (Zᵀ W (Z P − 1 mupᵀ), Σ_i w_i (z_iᵀP − mup)).

        Without ``Capability.FUSED_NORMAL``: ``matmat``, then centring and
        weights, then ``rmatmat``.

        Parameters
        ----------
        P : ndarray of shape (D, K), Z's dtype
        mup : ndarray of shape (K,), float64
            Subtracted from every row of Z P (μᵀP when centring, else 0).
        w : ndarray of shape (N,) float64, or None for unit weights
        out : ndarray of shape (D, K), Z's dtype, C-contiguous, or None
            Where to write Q (an iterative solver's buffer: a fresh array of
            tens of MB per call costs its page faults every time).

        Returns
        -------
        Q : ndarray of shape (D, K), Z's dtype (``out`` when given)
        s : ndarray of shape (K,), float64
        """
        U = self.matmat(P)
        if np.any(mup):
            U -= mup.astype(self.dtype)
        if w is not None:
            U *= w[:, None].astype(self.dtype)
        return _into(out, self.rmatmat(U)), U.sum(axis=0, dtype=np.float64)

    def column_sums(self, w):
        """Return Σ_i w_i Z_ij for each column j, float64.

        Without ``Capability.COLUMN_STATISTICS``: ``rmatmat_once`` of w, in
        Z's precision.

        Parameters
        ----------
        w : ndarray of shape (N,), float64

        Returns
        -------
        ndarray of shape (D,), float64
        """
        return self.rmatmat_once(np.asarray(w, dtype=self.dtype)[:, None])[:, 0].astype(np.float64)

    def column_sq_sums(self, w):
        """Return Σ_i w_i Z_ij² for each column j, float64 (``Capability.COLUMN_STATISTICS``).

        Parameters
        ----------
        w : ndarray of shape (N,), float64

        Returns
        -------
        ndarray of shape (D,), float64
        """
        raise NotImplementedError(f"{type(self).__name__} has no column sums of squares")

    def gram_block(self, columns, w):
        """Return the dense Gram block Σ_i w_i z_i[columns] z_i[columns]ᵀ (``Capability.GRAM_BLOCK``).

        Parameters
        ----------
        columns : ndarray of int, increasing
            The chosen columns (h of them).
        w : ndarray of shape (N,) float64, or None for unit weights

        Returns
        -------
        ndarray of shape (h, h), float64, symmetric
        """
        raise NotImplementedError(f"{type(self).__name__} has no Gram block")


# ---------------------------------------------------------------- CSR helpers
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
        The CSR arrays of Z (one shared index dtype).
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
    position = np.full(n_columns, -1, dtype=np.int32)
    position[columns] = np.arange(h, dtype=np.int32)
    hptr, hidx, hval = compact_columns(indptr, indices, data, position)
    out = np.zeros((h, h), dtype=np.float64)
    csr_gram_block(hptr, hidx, hval, np.zeros(0) if w is None else w, out, n_threads)
    # Upper triangle filled: mirror it.
    return np.triu(out) + np.triu(out, 1).T


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


def aligned_empty(shape, dtype, align=64):
    """Return an uninitialised C-ordered array whose data start on an ``align``-byte boundary.

    Parameters
    ----------
    shape : tuple of int
    dtype : numpy dtype
    align : int, default=64
        A power of two (64: a cache line).

    Returns
    -------
    ndarray
    """
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    raw = np.empty(n * dtype.itemsize + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset : offset + n * dtype.itemsize].view(dtype).reshape(shape)


def _into(out, Q):
    """Return Q, copied into ``out`` when one is given."""
    if out is None:
        return Q
    np.copyto(out, Q)
    return out


# ------------------------------------------------------------ one-hot blocks
def onehot_block_structure(Z, n_threads=1):
    """Describe CSR ``Z`` as a one-hot block matrix, or return None.

    Z qualifies when every row has the same number G of nonzeros, all of one
    nonzero value c, and the j-th nonzero of every row lies in the j-th of G
    disjoint, increasing column ranges.  Costs a few passes over the index
    array (O(nnz)); done once per fit.

    Parameters
    ----------
    Z : scipy.sparse CSR matrix, canonical format
    n_threads : int, default=1
        Threads for the block-major copy of the bins (same result for any).

    Returns
    -------
    None, or (bins, start, value)
        bins (G, N) int32 local columns, start (G + 1,) int64 block offsets
        (start[0] = 0, start[G] = D), value float.
    """
    N, D = Z.shape
    if N == 0 or Z.nnz == 0 or Z.nnz % N:
        return None
    G = Z.nnz // N
    if not np.array_equal(Z.indptr, np.arange(0, Z.nnz + 1, G)):
        return None
    value = Z.data[0]
    if value == 0:
        return None
    cols = Z.indices.reshape(N, G)
    if cols.dtype == np.int32 and Z.data.dtype in (np.float32, np.float64):
        lo, hi, same = block_ranges(cols, Z.data, float(value), n_threads)
    else:  # int64 indices (rare): NumPy's reductions
        lo, hi, same = cols.min(axis=0), cols.max(axis=0), bool(np.all(Z.data == value))
    if not same or np.any(lo[1:] <= hi[:-1]):
        return None
    start = np.empty(G + 1, dtype=np.int64)
    start[0], start[1:G], start[G] = 0, lo[1:], D
    if np.any(np.diff(start) > np.iinfo(np.int32).max):
        return None
    bins = np.empty((G, N), dtype=np.int32)
    if cols.dtype == np.int32:
        local_bins(cols, start, bins, n_threads)
    else:  # int64 indices (rare): NumPy's transpose
        bins[...] = (cols - start[:G]).T
    return bins, start, float(value)


class OneHotBlockProducts(FeatureOperator):
    """Products with a one-hot block CSR matrix (see ``onehot_block_structure``).

    ``Z @ P`` and ``Zᵀ @ U`` by the block-major kernels of ``_onehot_fast``
    (no value array read, each block's slice of the vector cache-resident,
    no CSC copy); ``normal`` fuses centring and weights into ``Z @ P``.
    The Gram block is read from Z's CSR (``csr_gram_block_of``).  Speed
    against SciPy: DESIGN.md, "One-hot block products".  Memory: the
    block-major copy of the bins is N·G int32,
    the size of Z's index array (Z itself is kept for the Gram block).

    Parameters
    ----------
    Z : CSR matrix with the one-hot block structure
    structure : (bins, start, value) from ``onehot_block_structure``
    n_threads : int
    """

    capabilities = frozenset(Capability)
    #: CG's "auto" preconditioner here: the heavy block and a scaled identity,
    #: not Jacobi (``_precond.jacobi_block_preconditioner``).
    prefers_scaled_identity = True
    _EMPTY = np.zeros(0)
    _NO_SUMS = np.zeros((0, 0))

    def __init__(self, Z, structure, n_threads, entries=None):
        super().__init__(Z.shape, Z.dtype, threads_for("csr_entries", Z.nnz, n_threads))
        self.Z = Z
        self._entries = Z.nnz if entries is None else int(entries)
        self._csr = (*_common_index_dtype(Z), Z.data)
        self.bins, self.start, self.value = structure
        # The same columns row by row (a view of Z's indices, no copy): the
        # kernel's row path for 2..8 targets.  int64 indices (rare) skip it.
        N, G = self.bins.shape[1], self.bins.shape[0]
        self._cols = Z.indices.reshape(N, G) if Z.indices.dtype == np.int32 and N * G > 0 else None
        self._work = None  # normal()'s N × K intermediate
        self._pad = None  # the padded copy of Z @ P's operand (``_padded``)

    @property
    def entries(self):
        """Entries of the problem's Z: its nnz, or that of the rows merged into it (``make_products``)."""
        return self._entries

    def _matmat(self, P, shift, w, sums, out=None):
        P = np.ascontiguousarray(P, dtype=self.dtype)
        if out is None:
            out = np.empty((self.shape[0], P.shape[1]), dtype=self.dtype)
        onehot_matmat(self.bins, self.start, self.value, self._padded(P), out, shift, w, sums, self.n_threads,
                      self._cols)
        return out

    def _padded(self, P):
        """P, or a copy whose rows are padded to ``padded_width`` values on a 64-byte boundary.

        The gathers of Z @ P read P's rows at random: a row that straddles
        two cache lines costs two (DESIGN.md, "One-hot block products").
        The padded copy lives in a buffer kept between calls (a fresh one
        would pay its page faults at every CG iteration).
        """
        D, K = P.shape
        ld = padded_width(K, P.itemsize)
        if ld == K:
            return P
        if self._pad is None or self._pad.dtype != P.dtype or self._pad.shape[1] != ld:
            self._pad = aligned_empty((D, ld), P.dtype)
        pad_rows(P, self._pad, self.n_threads)
        return self._pad

    def matmat(self, P):
        """Return Z @ P by the block-major kernel."""
        return self._matmat(P, self._EMPTY, self._EMPTY, self._NO_SUMS)

    def _rmatmat(self, U, dtype, out=None):
        U = np.ascontiguousarray(U, dtype=dtype)
        if out is None:
            out = np.empty((self.shape[1], U.shape[1]), dtype=dtype)
        onehot_tmatmat(self.bins, self.start, self.value, U, out, self.n_threads)
        return out

    def rmatmat(self, U):
        """Return Zᵀ @ U by the block-major kernel (each column block summed by one thread, rows in order)."""
        return self._rmatmat(U, self.dtype)

    def rmatmat_into(self, U, out):
        """Write Zᵀ @ U into ``out`` (see ``FeatureOperator.rmatmat_into``)."""
        return self._rmatmat(U, self.dtype, out)

    def rmatmat_once(self, U):
        """Return Zᵀ @ U computed in float64, in Z's dtype."""
        return self._rmatmat(U, np.float64).astype(self.dtype, copy=False)

    def normal(self, P, mup, w, out=None):
        """Return (Zᵀ W (Z P − 1 mupᵀ), Σ_i w_i (z_iᵀP − mup)): centring and weights fused into Z P."""
        K = P.shape[1]
        sums = np.empty((n_row_blocks(self.shape[0]), K))
        # The N × K intermediate lives in a buffer kept between calls: a fresh
        # one each CG iteration cost its page faults every time (up to 2× the
        # product's time at 7 targets on 522000 rows).
        if self._work is None or self._work.shape[1] != K:
            self._work = np.empty((self.shape[0], K), dtype=self.dtype)
        U = self._matmat(P, np.ascontiguousarray(mup, dtype=np.float64), self._EMPTY if w is None else w, sums,
                         self._work)
        return self._rmatmat(U, self.dtype, out), sums.sum(axis=0)  # block order: thread-count independent

    def column_sums(self, w):
        """Return Σ_i w_i Z_ij for each column j, float64."""
        return self._rmatmat(np.asarray(w, dtype=np.float64)[:, None], np.float64)[:, 0]

    def column_sq_sums(self, w):
        """Return Σ_i w_i Z_ij² for each column j, float64."""
        # z_ij² = c·z_ij for the one value c.
        return self.value * self.column_sums(w)

    def gram_block(self, columns, w):
        """Return the dense Gram block of ``columns`` (see ``csr_gram_block_of``)."""
        return csr_gram_block_of(self._csr, self.shape[1], columns, w, self.n_threads)

    def close(self):
        """Release the block-major bins and the work buffers."""
        self.bins = None
        self._work = self._pad = None


# ------------------------------------------------------------------ dense
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


def row_products(Z, W, n_threads):
    """Return Z @ W with each row's result independent of the other rows and of ``n_threads``.

    For predictions: BLAS gemm's result for a row depends, in the last bits,
    on the rows multiplied with it (and on its thread count), so the same
    row predicted in two chunks, or on a Dask worker and on the client,
    could differ.  Dense Z goes through the Fourier kernel's row-independent
    product; sparse Z through SciPy's CSR product (one row at a time).

    Parameters
    ----------
    Z : ndarray or sparse matrix of shape (N, D), float32 or float64
    W : ndarray of shape (D, K)
        Cast to Z's dtype.
    n_threads : int

    Returns
    -------
    ndarray of shape (N, K), Z's dtype
    """
    W = np.ascontiguousarray(W, dtype=Z.dtype)
    if sp.issparse(Z):
        return np.asarray(Z @ W)
    Z = _gemm_ready(Z)  # one positive unit stride, else a C copy
    out = np.empty((Z.shape[0], W.shape[1]), dtype=Z.dtype)
    _fourier_fast.row_products(Z, W, out, n_threads)
    return out


def make_products(Z, n_threads, entries=None):
    """Return the ``FeatureOperator`` for ``Z``.

    Parameters
    ----------
    Z : ndarray or canonical CSR matrix of shape (N, D)
    n_threads : int
    entries : int or None
        For a sparse Z whose identical rows were merged (``_rowmerge``): the
        nnz of the rows it stands for, which the operator reports as its
        ``entries`` so that the preconditioner (whose block size is ruled by
        them) is the one the unmerged problem gets.  None: Z's own nnz.

    Returns
    -------
    FeatureOperator
        One-hot block CSR → OneHotBlockProducts, other CSR → SparseProducts,
        dense → DenseProducts.
    """
    if sp.issparse(Z):
        structure = onehot_block_structure(Z, n_threads)
        if structure is not None:
            return OneHotBlockProducts(Z, structure, n_threads, entries)
        return SparseProducts(Z, n_threads, entries)
    return DenseProducts(Z, n_threads)
