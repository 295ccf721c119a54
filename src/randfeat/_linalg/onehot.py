"""Products with a one-hot block CSR matrix (random binning features, one-hot encodings): ``OneHotBlockProducts``."""

import time
from typing import NamedTuple

import numpy as np

from .._core.threads import threads_for
from .._ext._onehot_fast import (bins_dtype, block_ranges, local_bins, local_rows, n_row_blocks, onehot_gram_block,
                                 onehot_matmat, onehot_tmatmat, pad_rows, padded_width, row_group_budgets,
                                 uses_row_path)
from .csr import mirror_triangle
from .operator import Capability, FeatureOperator, MatrixKind


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


class OneHotLayout(NamedTuple):
    """Where the blocks of a one-hot block CSR matrix lie (``onehot_layout``).

    Attributes
    ----------
    n_blocks : int
        G, the entries of every row (one per block).
    start : ndarray of shape (G + 1,), int64
        Block offsets: block g holds the columns ``start[g] <= j < start[g + 1]``
        (``start[0] = 0``, ``start[G] = D``).
    value : float
        The one nonzero value.
    """

    n_blocks: int
    start: np.ndarray
    value: float


def onehot_layout(Z, n_threads=1):
    """Return the ``OneHotLayout`` of CSR ``Z``, or None when Z is not a one-hot block matrix.

    Z qualifies when every row has the same number G of nonzeros, all of one
    nonzero value c, and the j-th nonzero of every row lies in the j-th of G
    disjoint, increasing column ranges.  One compiled pass over the index
    and value arrays (``block_ranges``) and no copy: a fit finds the layout
    once and hands it to every consumer (``products.prepare_problem``: the
    row merge, then the operator).  The layout stays valid for any subset
    of Z's rows (merged identical rows), whose columns lie in the same
    ranges.

    Parameters
    ----------
    Z : scipy.sparse CSR matrix, canonical format
    n_threads : int, default=1
        Threads for the pass (same result for any).

    Returns
    -------
    OneHotLayout or None
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
    if Z.data.dtype in (np.float32, np.float64) and (cols.dtype == np.int32 or D <= _INT32_MAX):
        lo, hi, same = _block_ranges(cols, Z.data, float(value), n_threads)
    else:  # columns past int32 (never met in practice): NumPy's reductions
        lo, hi, same = cols.min(axis=0), cols.max(axis=0), bool(np.all(Z.data == value))
    if not same or np.any(lo[1:] <= hi[:-1]):
        return None
    start = np.empty(G + 1, dtype=np.int64)
    start[0], start[1:G], start[G] = 0, lo[1:], D
    if np.any(np.diff(start) > np.iinfo(np.int32).max):
        return None
    return OneHotLayout(int(G), start, float(value))


def block_major_bins(Z, layout, n_threads=1):
    """Return the (G, N) local column of every row in every block: the kernels' block-major copy.

    uint16 when every block is at most 65536 columns wide (half the bytes
    each product streams), else int32 (``_ext._onehot_fast.bins_dtype``).

    Parameters
    ----------
    Z : scipy.sparse CSR matrix with the one-hot ``layout`` (its rows, or a subset of the rows it was found on)
    layout : OneHotLayout
    n_threads : int, default=1
        Threads for the copy (same result for any).

    Returns
    -------
    ndarray of shape (G, N), uint16 or int32
    """
    N, G, start = Z.shape[0], layout.n_blocks, layout.start
    cols = Z.indices.reshape(N, G)
    bins = np.empty((G, N), dtype=bins_dtype(int(np.diff(start).max(initial=0))))
    if cols.dtype == np.int32:
        local_bins(cols, start, bins, n_threads)
        return bins
    if Z.shape[1] > _INT32_MAX:  # columns past int32 (never met in practice): NumPy's transpose
        bins[...] = (cols - start[:G]).T
        return bins
    # int64 indices (past 2³¹ − 1 stored entries): the int32 kernel on slabs of
    # rows narrowed on the fly (each block's columns fit int32: onehot_layout).
    for i0, i1, c32 in _int32_slabs(cols):
        part = np.empty((G, i1 - i0), dtype=bins.dtype)
        local_bins(c32, start, part, n_threads)
        bins[:, i0:i1] = part
    return bins


def release_values(Z, layout):
    """Replace the value array of one-hot CSR ``Z`` by a zero-stride view of its one value, freeing it.

    For a Z the fit made itself (the features of X, or its merged rows):
    the products read only the bins (``block_major_bins``) and the Gram
    block only the column indices and the one value, so Z's nnz values
    (half its bytes with float32 values and int32 indices: 2 GB for 10⁷
    rows × 50 grids) need not be held beside the bins.  Z stays the same
    matrix for every reader (its ``data`` a read-only view of length nnz).
    Call it before the bins are made, so that they take the values' place.

    Parameters
    ----------
    Z : scipy.sparse CSR matrix with the one-hot ``layout``, owned by the caller
    layout : OneHotLayout
    """
    Z.data = np.broadcast_to(np.array(layout.value, dtype=Z.data.dtype), Z.data.shape)


_INT32_MAX = int(np.iinfo(np.int32).max)
#: Rows per slab when int64 column indices are narrowed for the int32 kernels (a few MB a slab).
WIDE_SLAB_ROWS = 1 << 16


def _int32_slabs(cols):
    """(i0, i1, int32 copy of cols[i0:i1]) over slabs of rows of (N, G) int64 ``cols``.

    The caller has checked that every column fits int32 (Z's width, or each
    block's), so the narrowing is exact.
    """
    for i0 in range(0, cols.shape[0], WIDE_SLAB_ROWS):
        i1 = min(cols.shape[0], i0 + WIDE_SLAB_ROWS)
        yield i0, i1, cols[i0:i1].astype(np.int32)


def _block_ranges(cols, data, value, n_threads):
    """``block_ranges`` for int32 or int64 (N, G) columns (int64, of a Z at most 2³¹ columns wide: slab by slab)."""
    if cols.dtype == np.int32:
        return block_ranges(cols, data, value, n_threads)
    G = cols.shape[1]
    lo = hi = None
    same = True
    for i0, i1, c32 in _int32_slabs(cols):
        l, h, s = block_ranges(c32, data[i0 * G : i1 * G], value, n_threads)
        lo, hi = (l, h) if lo is None else (np.minimum(lo, l), np.maximum(hi, h))
        same = same and s
    return lo, hi, same


def onehot_block_structure(Z, n_threads=1):
    """Describe CSR ``Z`` as a one-hot block matrix, or return None (``onehot_layout`` and ``block_major_bins``).

    Parameters
    ----------
    Z : scipy.sparse CSR matrix, canonical format
    n_threads : int, default=1
        Threads for the passes (same result for any).

    Returns
    -------
    None, or (bins, start, value)
        bins (G, N) uint16 or int32 local columns (``block_major_bins``), start (G + 1,) int64 block offsets
        (start[0] = 0, start[G] = D), value float.
    """
    layout = onehot_layout(Z, n_threads)
    if layout is None:
        return None
    return block_major_bins(Z, layout, n_threads), layout.start, layout.value


class FasterSetting:
    """Keep the cheaper of a few interchangeable settings of a repeated call, by the CPU time of its calls.

    For choices that never change a result, only its speed (the block-group
    budgets of ``onehot_matmat``): each setting is tried once, then the one
    with the smaller running mean of CPU seconds is used, and every
    ``explore``-th call tries another, so a change of the machine's load
    (another process taking the shared cache) is followed.  CPU seconds,
    not wall time: a call preempted by another process does not count
    against its setting, a call whose reads miss the cache does.  The very
    first call is a warm-up whose time is not recorded (its setting is
    tried again): it pays the one-time costs of the call site, the page
    faults of fresh output buffers above all, which would otherwise be
    charged to the first setting (DESIGN.md, "One-hot block products").

    Parameters
    ----------
    n_settings : int
    explore : int, default=8
    """

    def __init__(self, n_settings, explore=8):
        self.cost = [None] * n_settings
        self.explore = explore
        self.calls = 0

    def pick(self):
        """Return the index of the setting for the next call."""
        self.calls += 1
        untried = [i for i, c in enumerate(self.cost) if c is None]
        if untried:
            return untried[0]
        best = min(range(len(self.cost)), key=self.cost.__getitem__)
        if self.calls % self.explore == 0 and len(self.cost) > 1:
            return (best + 1 + (self.calls // self.explore) % (len(self.cost) - 1)) % len(self.cost)
        return best

    def record(self, i, seconds):
        """Add the CPU ``seconds`` of a call made with setting ``i`` (not the first call's: a warm-up)."""
        if self.calls == 1:
            return
        c = self.cost[i]
        self.cost[i] = seconds if c is None else 0.5 * (c + seconds)


class OneHotBlockProducts(FeatureOperator):
    """Products with a one-hot block CSR matrix (see ``onehot_block_structure``).

    ``Z @ P`` and ``Zᵀ @ U`` by the block-major kernels of ``_ext._onehot_fast``
    (no value array read, each block's slice of the vector cache-resident,
    no CSC copy); ``normal`` fuses centring and weights into ``Z @ P``.
    The Gram block is summed from the bins too (``onehot_gram_block``).  Speed
    against SciPy: DESIGN.md, "One-hot block products".  Memory: the
    block-major copy of the bins is N·G uint16 (blocks of at most 65536
    columns) or int32, at most the size of Z's index array (Z's values are
    not read: a fit that made Z frees them first, ``release_values``).

    Parameters
    ----------
    Z : CSR matrix with the one-hot block structure
    structure : (bins, start, value) from ``onehot_block_structure``
    n_threads : int
    """

    capabilities = frozenset(Capability)
    kind = MatrixKind.ONE_HOT_BLOCKS
    _EMPTY = np.zeros(0)
    _NO_SUMS = np.zeros((0, 0))

    def __init__(self, Z, structure, n_threads, entries=None):
        super().__init__(Z.shape, Z.dtype, threads_for("csr_entries", Z.nnz, n_threads))
        self.Z = Z
        self._entries = Z.nnz if entries is None else int(entries)
        # Every stored value is ``value`` (``onehot_layout``): no product nor
        # the Gram block reads Z.data (which the fit may have released:
        # ``release_values``).
        self.bins, self.start, self.value = structure
        # The same columns row by row, for the kernel's row path (2..8
        # targets): a view of Z's int32 indices, or, with uint16 bins, their
        # uint16 local copy made on the first such product (half the bytes
        # per product: Z @ P with 7 targets on 522000 rows × 50 blocks ~10%
        # faster; N·G·2 bytes more memory).  int64 indices (rare) skip it.
        N, G = self.bins.shape[1], self.bins.shape[0]
        self._cols = Z.indices.reshape(N, G) if Z.indices.dtype == np.int32 and N * G > 0 else None
        self._narrow_cols = None
        self._work = None  # normal()'s N × K intermediate
        self._pad = None  # the padded copy of Z @ P's operand (``_padded``)
        self._unit_sums = None  # Σ_i Z_ij, kept: the column means and the diagonal both need it
        # Z @ P's row path (2..8 targets) groups the blocks by a cache budget:
        # 8 MB is best on a quiet machine, 3 MB when other processes share
        # the L3 (``row_group_budgets``); the same bits either way, so each
        # width K keeps the cheaper of the two (``FasterSetting``).
        self._row_budgets = {}

    @property
    def entries(self):
        """Entries of the problem's Z: its nnz, or that of the rows merged into it (``make_products``)."""
        return self._entries

    def _matmat(self, P, shift, w, sums, out=None):
        P = np.ascontiguousarray(P, dtype=self.dtype)
        if out is None:
            out = np.empty((self.shape[0], P.shape[1]), dtype=self.dtype)
        B, cols = self._padded(P), self._row_columns(P.shape[1])
        budgets = row_group_budgets()
        if cols is None or B.shape[0] * B.shape[1] * B.itemsize <= min(budgets):
            onehot_matmat(self.bins, self.start, self.value, B, out, shift, w, sums, self.n_threads, cols)
            return out
        chooser = self._row_budgets.setdefault(P.shape[1], FasterSetting(len(budgets)))
        i = chooser.pick()
        t0 = time.process_time()
        onehot_matmat(self.bins, self.start, self.value, B, out, shift, w, sums, self.n_threads, cols, budgets[i])
        chooser.record(i, time.process_time() - t0)
        return out

    def _row_columns(self, K):
        """The row-major columns for the row path, or None when K takes the block path."""
        if not uses_row_path(K) or self._cols is None:
            return None
        if self.bins.dtype != np.uint16:
            return self._cols
        if self._narrow_cols is None:
            self._narrow_cols = np.empty(self._cols.shape, dtype=np.uint16)
            local_rows(self._cols, self.start, self._narrow_cols, self.n_threads)
        return self._narrow_cols

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
        """Return Σ_i w_i Z_ij for each column j, float64.

        The sums for unit weights are computed once and kept: a CG fit
        without weights asks for them twice (the column means, then the
        diagonal of Z_cᵀZ_c, which for one value c is c·Σ_i Z_ij), and each
        is a pass over all of Z.  Unit weights are recognised by value (one
        pass over w), so any array of ones gets the same bits.
        """
        w = np.asarray(w, dtype=np.float64)
        if not np.all(w == 1.0):
            return self._rmatmat(w[:, None], np.float64)[:, 0]
        if self._unit_sums is None:
            self._unit_sums = self._rmatmat(w[:, None], np.float64)[:, 0]
            self._unit_sums.setflags(write=False)
        return self._unit_sums.copy()

    def column_sq_sums(self, w):
        """Return Σ_i w_i Z_ij² for each column j, float64."""
        # z_ij² = c·z_ij for the one value c.
        return self.value * self.column_sums(w)

    def gram_block(self, columns, w):
        """Return the dense Gram block Σ_i w_i z_i[columns] z_i[columns]ᵀ (h × h float64, symmetric).

        Summed block pair by block pair from the block-major bins
        (``onehot_gram_block``), at a fraction of the CSR kernel's
        (``csr_gram_block_of``) cache misses once the h × h block outgrows
        the cache.  Weighted rows: the CSR kernel's bits; unit weights:
        exact row counts times value² (one rounding per entry).
        """
        h, D = len(columns), self.shape[1]
        position = np.full(D, h, dtype=np.int32)
        position[columns] = np.arange(h, dtype=np.int32)
        # The one value as Z's dtype holds it, then widened (as the CSR kernel reads it).
        value = float(np.array(self.value, dtype=self.dtype))
        w = self._EMPTY if w is None else np.ascontiguousarray(w, dtype=np.float64)
        out = onehot_gram_block(self.bins, np.ascontiguousarray(self.start, dtype=np.int64), position, h, value, w,
                                self.n_threads)
        return mirror_triangle(out, lower=False)

    def close(self):
        """Release the block-major bins and the work buffers."""
        self.bins = None
        self._work = self._pad = self._unit_sums = self._narrow_cols = None
