"""RandomBinningFeatures: random binning features (Rahimi & Recht, 2007, algorithm 2), one map of the contract.

Python validates, draws the grids and chooses the thread count; the compiled
module ``_ext._binning_fast`` hashes, builds the vocabularies and writes the
CSR.  The fit reads every row (the vocabulary of occupied bins), and the
vocabulary of a set of rows is the sorted union of its blocks' vocabularies:
``MapCapability.MERGEABLE_VOCABULARY``, so a Dask fit builds it from per-block
bin sets on the workers.
"""

from __future__ import annotations

import dataclasses
from numbers import Integral
from typing import Optional, Union

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError, StrOptions
from sklearn.utils.validation import check_array

from .._core.memory_budget import check_memory
from .._core.protocols import MapCapability, OutputKind
from .._core.types import Features, Float, MatrixLike, RandomState, Self
from .._core.validation import N_JOBS, Interval, as_generator
from .._ext import _binning_fast
from .contract import FeatureMap, MapState
from .gamma import median_heuristic_gamma, resolve_l1_gamma
from .kernels import GAMMA, KERNELS, scale_pitches

#: The binning kernel's vector width in grids: the grids' arrays are padded to whole lanes.
LANES = _binning_fast.LANES


@dataclasses.dataclass(frozen=True, eq=False)
class BinningState(MapState):
    """The fitted grids and vocabulary of a ``RandomBinningFeatures``.

    Attributes
    ----------
    n_features_out : int
        Occupied bins, the output width.
    pitches, offsets : ndarray of shape (n_grids, n_features_in), float64
    U, INV : ndarray of shape (n_features_in, P padded to whole vector lanes), float64
        The kernel's layout of the offsets and inverse pitches (padding 0).
    n_grids : int
    gamma : float
    value : float
        The entries' value, 1/√n_grids.
    vocabulary : tuple of 5 ndarrays, or None
        (bin_hashes, grid_offsets, dir, dir_offsets, dir_bits): each grid's
        sorted bin hashes and the lookup directory on their top bits
        (``_binning_fast.Vocabulary``); None while the grids are drawn but
        no row has been read.
    """

    pitches: np.ndarray
    offsets: np.ndarray
    U: np.ndarray
    INV: np.ndarray
    n_grids: int
    gamma: float
    value: float
    vocabulary: tuple | None = None

    def check(self):
        """Raise ValueError unless the grids and the vocabulary are what the kernels can read safely.

        Shapes and dtypes of every array; the vocabulary's offsets increasing
        from 0 to ``n_features_out``; each grid's lookup directory as long as
        its ``dir_bits`` say, increasing from 0 to the grid's number of bins
        (so a lookup reads only that grid's keys); each grid's keys sorted.
        O(number of bins), no pass over data.
        """
        super().check()
        P = self.n_grids
        d = self.pitches.shape[1] if self.pitches.ndim == 2 else -1
        if self.pitches.shape != (P, d) or self.offsets.shape != (P, d):
            raise ValueError("pitches_ and offsets_ must both have shape (n_grids_, n_features_in_)")
        for name, a in (("U", self.U), ("INV", self.INV)):
            if not (a.dtype == np.float64 and a.ndim == 2 and a.shape[0] == d and a.shape[1] >= P
                    and a.shape[1] % LANES == 0 and a.flags.c_contiguous):
                raise ValueError(f"the grids' {name} array does not match n_grids_ and n_features_in_")
        if not (np.isfinite(self.value) and self.value > 0):
            raise ValueError("the entries' value must be positive and finite")
        if self.vocabulary is not None:
            _check_vocabulary(self.vocabulary, P, self.n_features_out)

    def index_bounds(self):
        """The vocabulary's integer arrays and their ranges (the bin hashes are keys: any value)."""
        if self.vocabulary is None:
            return ()
        keys, koff, dirs, doff, bits = self.vocabulary
        D = self.n_features_out
        return (("bin_hashes_", keys, None, None), ("grid_offsets_", koff, 0, D + 1),
                ("the lookup directory", dirs, 0, D + 1), ("its offsets", doff, 0, dirs.shape[0] + 1),
                ("its bit counts", bits, 0, 63))

    @property
    def n_features_in(self):
        """int: the grids' number of input features."""
        return int(self.pitches.shape[1])


def _check_vocabulary(vocabulary, P, D):
    """ValueError unless (keys, key_offsets, directory, dir_offsets, dir_bits) can be looked up safely."""
    if len(vocabulary) != 5:
        raise ValueError("the vocabulary must have 5 arrays")
    keys, koff, dirs, doff, bits = vocabulary
    expected = ((keys, np.uint64, D, "bin_hashes_"), (koff, np.int64, P + 1, "grid_offsets_"),
                (dirs, np.uint32, None, "the lookup directory"), (doff, np.int64, P + 1, "its offsets"),
                (bits, np.intc, P, "its bit counts"))
    for a, dtype, size, name in expected:
        if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == 1 and a.flags.c_contiguous
                and (size is None or a.shape[0] == size)):
            raise ValueError(f"{name} must be a 1-D contiguous {np.dtype(dtype).name} array"
                             + ("" if size is None else f" of {size} entries"))
    counts = np.diff(koff)
    if koff[0] != 0 or koff[-1] != D or np.any(counts < 0) or D == 0:
        raise ValueError(f"grid_offsets_ must increase from 0 to n_features_out_={D}")
    if np.any(bits < 0) or np.any(bits > 62):
        raise ValueError("the lookup directory's bit counts must be in [0, 62]")
    if doff[0] != 0 or doff[-1] != dirs.shape[0] or np.any(np.diff(doff) != (np.int64(1) << bits) + 1):
        raise ValueError("the lookup directory's offsets do not match its bit counts")
    starts, ends = doff[:-1], doff[1:] - 1
    if np.any(dirs[starts] != 0) or np.any(dirs[ends].astype(np.int64) != counts):
        raise ValueError("each grid's lookup directory must run from 0 to its number of bins")
    # Grid by grid: temporaries of one grid's size, not of the whole vocabulary's.
    for p in range(P):
        d = dirs[doff[p]:doff[p + 1]]
        if np.any(d[1:] < d[:-1]):
            raise ValueError("each grid's lookup directory must be non-decreasing")
        k = keys[koff[p]:koff[p + 1]]
        if np.any(k[1:] <= k[:-1]):
            raise ValueError("each grid's bin_hashes_ must be sorted and distinct")


# Bins are int64 in the kernel; |bin| <= 2**62 leaves a factor-2 margin and is
# what the no-collision argument for one-coordinate changes needs (see the header).
MAX_ABS_BIN = 2.0**62


#: Kernels random binning can represent: separable, with a pitch density.
BINNING_KERNELS = sorted(name for name, spec in KERNELS.items() if spec.sample_pitch is not None)


#: The largest row pointer (stored entries) and column index the features' CSR keeps in int32; past it
#: both index arrays are int64, as scipy decides.  Past 2³¹ − 1 stored entries (50 grids × 43 M rows)
#: that is the only choice; tests lower this bound to run the wide path on small data (``_csr`` keeps
#: the int64 arrays then, where scipy would narrow them again).
INDEX32_MAX = int(np.iinfo(np.int32).max)


def _index_dtype(*bounds):
    """int32 when every index and indptr value fits, else int64 (scipy's rule, at ``INDEX32_MAX``)."""
    return np.int32 if max(bounds) <= INDEX32_MAX else np.int64


class RandomBinningFeatures(FeatureMap):
    """Random binning features: sparse one-hot bins of P randomly shifted grids.

    Each of ``n_grids`` grids has, in every input dimension m, a random pitch
    δ ~ p(δ) = δ·k''(δ) and a shift u ~ U[0, δ); a point x falls in the bin
    (⌊(x_m − u_m)/δ_m⌋)_m of each grid.  The features are the P one-hot bin
    indicators scaled by 1/√P, so z(x)ᵀz(y) = (number of grids in which x and
    y share a bin)/P, whose expectation is the kernel k(x, y) (Rahimi & Recht,
    2007).  Bins are identified by a 64-bit hash of the bin tuple and numbered
    at fit: the columns of grid p are its bins occupied by training rows.  A
    bin first met at transform contributes no entry for that grid.

    Binning suits tasks where the predictor must memorise (the paper's Forest
    Cover result), and its features are sparse: exactly ``n_grids`` entries
    per training row.

    Parameters
    ----------
    n_grids : int, default=30
        Number of random grids P (non-zeros per training row).  The kernel
        estimate's standard deviation falls like 1/√P.
    kernel : str, default='laplacian'
        A separable kernel whose pitch density δ·k''(δ) is a probability
        density; ``'laplacian'``, k(x, y) = exp(-γ‖x − y‖₁), δ ~ Gamma(2, 1/γ).
        Kernels binning cannot represent (``'rbf'``, ``'cauchy'``,
        ``'matern'``) raise an ``InvalidParameterError`` (a ValueError)
        that says why; use ``RandomFourierFeatures`` for them.
    gamma : float or 'scale', default='scale'
        Kernel parameter, as in ``sklearn.metrics.pairwise.laplacian_kernel``.
        ``'scale'`` (the default after 0.1.0): ``1 / (n_features * mean|X - X.mean()|)``, the L1
        counterpart of RBFSampler's ``1 / (n_features * X.var())`` (it makes
        γ‖x − y‖₁ of order one for typical pairs; see ``gamma_``).
    random_state : int, RandomState instance, Generator or None, default=None
        Seeds the draw of pitches and shifts (a ``numpy.random.Generator``).
        Same seed and data give the same columns, whatever ``n_jobs``.
    n_jobs : int or None, default=None
        OpenMP threads: None or -1 for all available cores.  The output is
        bit-identical for any value.

    Attributes
    ----------
    n_features_in_ : int
        Number of input dimensions d.
    feature_names_in_ : ndarray of str
        Input column names, when X has string column names.
    pitches_ : ndarray of shape (n_grids, n_features_in_), float64
        Bin widths δ of each grid and dimension.
    offsets_ : ndarray of shape (n_grids, n_features_in_), float64
        Grid shifts u, 0 ≤ u < δ.
    bin_hashes_ : ndarray of shape (n_features_out_,), uint64
        The vocabulary: for each grid, the sorted 64-bit hashes of its bins
        occupied at fit; column j of the output is the bin with hash
        ``bin_hashes_[j]``.
    grid_offsets_ : ndarray of shape (n_grids + 1,), int64
        Columns of grid p are ``grid_offsets_[p]:grid_offsets_[p + 1]``.
    n_features_out_ : int
        Total number of occupied bins, the output width.
    n_grids_ : int
        Number of grids actually drawn (``n_grids``).
    gamma_ : float
        The gamma used (``gamma``, or its value for ``'scale'``; on a Dask
        array computed by Dask's reductions, equal to the in-memory value to
        rounding).

    Notes
    -----
    ``transform`` returns a ``scipy.sparse.csr_matrix`` (not ``csr_array``),
    like scikit-learn's own sparse transformers (OneHotEncoder,
    CountVectorizer), so it composes with ``FeatureUnion``/``ColumnTransformer``
    and code written for them exactly as they do.  Its dtype is X's float
    dtype (float32 stays float32), its indices are int32 whenever they fit and
    sorted within each row (grid by grid).

    Bin coordinate: ⌊(x − u)·(1/δ)⌋ computed in float64 (x converted exactly
    from float32), one subtraction then one multiplication by the stored
    reciprocal.  Inputs whose bin coordinate would exceed 2⁶² in magnitude are
    rejected with a ValueError, as are NaN and infinity.

    Bins are identified by hash: two different bin tuples of one grid share a
    column only if their 64-bit hashes collide, probability about 2⁻⁶⁴ per
    pair (tuples differing in one coordinate never collide).

    References
    ----------
    A. Rahimi and B. Recht, "Random Features for Large-Scale Kernel
    Machines", NIPS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RandomBinningFeatures
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> rbf = RandomBinningFeatures(n_grids=20, gamma=0.5, random_state=0)
    >>> Z = rbf.fit_transform(X)
    >>> Z.shape[0], Z.nnz
    (100, 2000)
    >>> K_approx = (Z @ Z.T).toarray()   # shared grids / 20
    """

    output_kind = OutputKind.CSR
    capabilities = frozenset({MapCapability.ROW_INDEPENDENT, MapCapability.MERGEABLE_VOCABULARY,
                              MapCapability.KERNEL_WIDTH})

    _parameter_constraints: dict = {
        "n_grids": [Interval(Integral, 1, None, closed="left")],
        "kernel": [StrOptions(set(BINNING_KERNELS))],
        "gamma": [*GAMMA, StrOptions({"scale"})],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": N_JOBS,
    }

    def __init__(self, n_grids: int = 30, *, kernel: str = "laplacian", gamma: Union[Float, str] = "scale",
                 random_state: RandomState = None, n_jobs: Optional[int] = None) -> None:
        self.n_grids = n_grids
        self.kernel = kernel
        self.gamma = gamma
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ----------------------------------------------------------------- the API
    def fit(self, X: MatrixLike, y: object = None) -> Self:
        """Draw the grids and build the vocabulary of bins occupied by X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; CSR input is binned row by row, never densified.
        y : None
            Ignored.

        Returns
        -------
        self : RandomBinningFeatures
        """
        return super().fit(X, y)

    def fit_transform(self, X: MatrixLike, y: object = None) -> Features:
        """Fit to X and return its features, binning X only once.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        Z : scipy.sparse.csr_matrix of shape (n_samples, n_features_out_)
            Exactly ``n_grids`` entries per row, each 1/√n_grids.
        """
        return super().fit_transform(X, y)

    def transform(self, X: MatrixLike) -> Features:
        """Map X to its binning features.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features_in_)

        Returns
        -------
        Z : scipy.sparse.csr_matrix of shape (n_samples, n_features_out_)
            X's float dtype; one entry 1/√n_grids per grid whose bin was seen
            at fit, columns sorted within each row.  For a Dask array X, a
            lazy Dask array of CSR blocks with X's row chunks.
        """
        return super().transform(X)

    # ------------------------------------------------------- fitted attributes
    @property
    def pitches_(self) -> np.ndarray:
        """ndarray of shape (n_grids, n_features): the bin widths δ."""
        return self._fitted_state().pitches

    @property
    def offsets_(self) -> np.ndarray:
        """ndarray of shape (n_grids, n_features): the grid shifts u."""
        return self._fitted_state().offsets

    @property
    def bin_hashes_(self) -> np.ndarray:
        """ndarray of uint64, one per output column: the vocabulary, sorted per grid."""
        return self._fitted_state().vocabulary[0]

    @property
    def grid_offsets_(self) -> np.ndarray:
        """ndarray of shape (n_grids + 1,), int64: the columns of each grid."""
        return self._fitted_state().vocabulary[1]

    @property
    def n_grids_(self) -> int:
        """int: the number of grids drawn."""
        return self._fitted_state().n_grids

    @property
    def gamma_(self) -> float:
        """float: the gamma used (resolves ``gamma='scale'``)."""
        return self._fitted_state().gamma

    # ------------------------------------------------------------ the contract
    def _explain_invalid(self, name, value):
        if name == "kernel" and isinstance(value, str) and value in KERNELS:
            return (
                f"Random binning features cannot represent kernel={value!r}: "
                f"{KERNELS[value].no_binning_reason}."
            )
        return super()._explain_invalid(name, value)

    def _auto_gamma(self, X):
        """The median heuristic's gamma for validated X (L1 distance for the Laplacian kernel)."""
        return median_heuristic_gamma(X, "manhattan" if self.kernel == "laplacian" else "sqeuclidean")

    def _draw(self, summary):
        """Draw the grids (the vocabulary comes from the rows: ``_fit_rows`` or the block protocol)."""
        P, d = self.n_grids, summary.n_features
        if summary.n_samples >= 2**32 - 1:
            raise ValueError(f"RandomBinningFeatures supports fewer than 2**32 - 1 training rows, got {summary.n_samples}")
        gamma = resolve_l1_gamma(self.gamma, summary)
        pitches, offsets, U, INV = self._draw_grids(KERNELS[self.kernel], P, d, gamma)
        self._check_bin_range(*summary.column_range(), U[:, :P], INV[:, :P])
        return BinningState(n_features_out=0, pitches=pitches, offsets=offsets, U=U, INV=INV, n_grids=P,
                            gamma=gamma, value=float(np.float64(1.0) / np.sqrt(np.float64(P))))

    def _draw_grids(self, spec, P, d, gamma):
        rng = as_generator(self.random_state)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            pitches = scale_pitches(np.asarray(spec.sample_pitch(rng, (P, d)), dtype=np.float64), gamma)
            offsets = rng.uniform(0.0, 1.0, size=(P, d)) * pitches
            inv = 1.0 / pitches
        # Pitches scale like 1/gamma: a huge gamma makes them too small to
        # invert, a tiny one too large to represent.
        if not np.all(np.isfinite(pitches) & np.isfinite(offsets)):
            raise InvalidParameterError(
                f"gamma={gamma!r} is too small: the random bin widths (of order 1/gamma) overflow "
                f"float64. Use a larger gamma, or rescale X so that one applies."
            )
        if not (np.all(pitches > 0) and np.all(np.isfinite(inv))):
            raise InvalidParameterError(
                f"gamma={gamma!r} is too large: the random bin widths (of order 1/gamma) are too "
                f"small to invert in float64. Use a smaller gamma, or rescale X so that one applies."
            )
        # Kernel layout (d, Ppad): the innermost loop runs over grids, padded to
        # whole vector lanes with u = 1/δ = 0 (padding bins are ignored).
        Ppad = -(-P // LANES) * LANES
        U = np.zeros((d, Ppad))
        INV = np.zeros((d, Ppad))
        U[:, :P] = offsets.T
        INV[:, :P] = inv.T
        return pitches, offsets, U, INV

    @staticmethod
    def _check_bin_range(lo, hi, U, INV):
        """ValueError unless every bin coordinate of values in [lo, hi] fits |bin| <= 2**62.

        lo, hi: each column's extremes (``InputSummary.column_range``, or of
        the rows to transform); U, INV: (d, P) offsets and inverse pitches.
        """
        lo = np.minimum(np.asarray(lo, dtype=np.float64), 0.0)  # 0: implicit CSR zeros
        hi = np.maximum(np.asarray(hi, dtype=np.float64), 0.0)
        with np.errstate(over="ignore", invalid="ignore"):
            # (x - u) * inv is monotone in x, so the column extremes bound every bin.
            worst = np.maximum(np.abs((lo[:, None] - U) * INV), np.abs((hi[:, None] - U) * INV))
        bad = ~(worst <= MAX_ABS_BIN)
        if bad.any():
            m = int(np.nonzero(bad.any(axis=1))[0][0])
            raise ValueError(
                f"X[:, {m}] has values (range [{lo[m]:.6g}, {hi[m]:.6g}]) whose bin index "
                f"|(x - u)/δ| exceeds 2**62 for the fitted pitches; rescale X or use a smaller gamma"
            )

    def _fit_rows(self, state, X, n_threads, return_features):
        """Hash X into the drawn grids, build the vocabulary (and the training CSR): (state, Z or None)."""
        n = X.shape[0]
        P = state.n_grids
        # The N x P hashes are stored inside the output CSR's own buffers (see
        # _binning_fast), so fit_transform needs no N x P temporary: afterwards
        # each slot's hash is replaced in place by its column and value.  A fit
        # without features needs only the hashes (8 bytes a slot).
        if return_features:
            idx = _index_dtype(n * P)
            check_memory(
                n * P * (np.dtype(idx).itemsize + X.dtype.itemsize) + np.dtype(idx).itemsize * (n + 1),
                f"the binning features of {n} rows ({n} x {P} grids, CSR)",
                "use fewer grids (n_grids), or fit on fewer rows and transform the rest in chunks",
            )
            indices = np.empty(n * P, dtype=idx)
            data = np.empty(n * P, dtype=X.dtype)
        else:
            check_memory(
                8 * n * P,
                f"binning {n} rows into {P} grids (a 64-bit hash per row and grid)",
                "use fewer grids (n_grids), or fit on fewer rows",
            )
            indices = np.empty(0, dtype=np.int32)
            data = np.empty(n * P, dtype=np.uint64)
        grids = _binning_fast.Grids(state.U, state.INV, P)
        _binning_fast.hash_rows(X, grids, indices, data, n_threads, grid_major=True)
        # With features wanted, each grid's build also leaves every row's rank
        # in its vocabulary (in `data`, beside its hashes) while it is in cache.
        vocabulary = _binning_fast.build_vocabularies(
            indices, data, P, n_threads, write_ranks=return_features, grid_major=True,
            group_budget=_group_budget(indices.nbytes + data.nbytes, n_threads, return_features),
        )
        if return_features:
            _binning_fast.finish_training_csr(P, vocabulary[1], indices, data, state.value, n_threads)
        state = _with_vocabulary(state, vocabulary)
        if not return_features:
            return state, None
        indptr = np.arange(0, n * P + 1, P, dtype=idx)
        return state, _csr(data, indices, indptr, (n, state.n_features_out))

    def _block_vocabulary(self, state, Xb):
        """Each grid's sorted set of bins occupied by a block's rows (runs where the block is)."""
        P = state.n_grids
        Xb = np.ascontiguousarray(check_array(Xb, dtype=[np.float64, np.float32], ensure_min_samples=0))
        if Xb.shape[0] == 0:
            return [np.empty(0, dtype=np.uint64)] * P
        hashes = np.empty(Xb.shape[0] * P, dtype=np.uint64)
        _binning_fast.hash_rows(Xb, _binning_fast.Grids(state.U, state.INV, P), np.empty(0, dtype=np.int32),
                                hashes, 1)
        # The kernel's own per-grid sort and dedup (the fit's): ~4x np.unique per grid.
        bins, offsets = _binning_fast.build_vocabularies(np.empty(0, dtype=np.int32), hashes, P, 1)[:2]
        return [bins[offsets[p]:offsets[p + 1]] for p in range(P)]

    @staticmethod
    def _merge_vocabularies(a, b):
        """The vocabulary of two sets of rows: each grid's sorted union."""
        return [_sorted_union(x, y) for x, y in zip(a, b)]

    def _state_with_vocabulary(self, state, bins, n_threads):
        """The state with the lookup structure of merged per-grid bin sets (the in-memory fit's vocabulary)."""
        P = state.n_grids
        # One pseudo-row per rank: row r holds each grid's r-th bin (the last one
        # repeated for shorter grids), so build_vocabularies sees exactly these sets.
        length = max(len(b) for b in bins)
        rows = np.empty((length, P), dtype=np.uint64)
        for p, b in enumerate(bins):
            rows[: len(b), p] = b
            rows[len(b):, p] = b[-1]
        vocabulary = _binning_fast.build_vocabularies(np.empty(0, dtype=np.int32), rows.ravel(), P, n_threads)
        if not np.array_equal(vocabulary[0], np.concatenate(bins)):  # the kernel keeps bins sorted per grid
            raise RuntimeError("merged binning vocabulary differs from the kernel's; please report this")
        return _with_vocabulary(state, vocabulary)

    def _transform_rows(self, state, X, n_threads):
        """The CSR features of validated X (bins unseen at fit give no entry)."""
        P = state.n_grids
        lo, hi = (X.min(axis=0).toarray().ravel(), X.max(axis=0).toarray().ravel()) if sp.issparse(X) \
            else (X.min(axis=0), X.max(axis=0))
        self._check_bin_range(lo, hi, state.U[:, :P], state.INV[:, :P])
        n = X.shape[0]
        idx = _index_dtype(n * P, state.n_features_out)
        check_memory(
            n * P * (np.dtype(idx).itemsize + X.dtype.itemsize) + 16 * (n + 1),
            f"the binning features of {n} rows ({n} x {P} grids, CSR)",
            "transform X in chunks of rows, or use fewer grids",
        )
        indices = np.empty(n * P, dtype=idx)
        counts = np.empty(n, dtype=np.int64)
        vocabulary = _binning_fast.Vocabulary(*state.vocabulary)
        grids = _binning_fast.Grids(state.U, state.INV, P)
        nnz = _binning_fast.transform_rows(X, grids, vocabulary, indices, counts, n_threads)
        indptr = np.zeros(n + 1, dtype=idx)
        np.cumsum(counts, out=indptr[1:])
        if nnz < n * P:  # some bins unseen at fit: pack rows, then release the tail
            _binning_fast.compact_rows(indices, counts, P)
            indices = _shrink(indices, nnz)
        data = np.empty(nnz, dtype=X.dtype)
        _binning_fast.fill_value(data, state.value, n_threads)
        return _csr(data, indices, indptr, (n, state.n_features_out))

    def _legacy_state(self, attributes):
        """The state of a map pickled by randfeat 0.1.0 (its fitted attributes, popped)."""
        vocabulary = tuple(attributes.pop(k) for k in ("bin_hashes_", "grid_offsets_", "_dir", "_dir_offsets",
                                                        "_dir_bits"))
        return BinningState(n_features_out=int(attributes.pop("n_features_out_")), pitches=attributes.pop("pitches_"),
                            offsets=attributes.pop("offsets_"), U=attributes.pop("_U"), INV=attributes.pop("_INV"),
                            n_grids=int(attributes.pop("n_grids_")), gamma=attributes.pop("gamma_"),
                            value=attributes.pop("_value"), vocabulary=vocabulary)


def _with_vocabulary(state, vocabulary):
    """``state`` with a built vocabulary and the output width it gives."""
    return dataclasses.replace(state, vocabulary=tuple(vocabulary), n_features_out=int(vocabulary[1][-1]))


def _group_budget(output_bytes, n_threads, return_features):
    """Bytes the hash sets of one group of grids may take before it builds them one at a time.

    With features wanted, the sets in flight (one group per thread) are kept
    to half the output CSR together, so fit_transform stays within 1.5x its
    output plus the vocabulary; a plain fit keeps the kernel's default.  The
    vocabulary is the same either way.
    """
    default = _binning_fast.GROUP_BUDGET_BYTES
    if not return_features:
        return default
    return int(max(1 << 20, min(default, output_bytes // (4 * n_threads))))


def _sorted_union(x, y):
    """np.union1d of two sorted, duplicate-free arrays, in linear time (a stable sort merges the two runs)."""
    both = np.concatenate([x, y])
    both.sort(kind="stable")
    keep = np.empty(both.size, dtype=bool)
    keep[:1] = True
    np.not_equal(both[1:], both[:-1], out=keep[1:])
    return both[keep]


def _shrink(a, n):
    """a[:n] without keeping a's whole buffer alive (realloc in place when possible)."""
    try:
        a.resize(n, refcheck=False)
        return a
    except (ValueError, SystemError):  # pragma: no cover - not the owner of its data
        return a[:n].copy()


def _csr(data, indices, indptr, shape):
    Z = sp.csr_matrix((data, indices, indptr), shape=shape, copy=False)
    if Z.indices.dtype != indices.dtype:
        # scipy narrowed int64 arrays whose values fit int32: only when a test
        # lowered INDEX32_MAX to force the wide path, which it then gets.
        Z.indices, Z.indptr = indices, indptr
    Z.has_sorted_indices = True  # guaranteed by construction (grid by grid)
    return Z
