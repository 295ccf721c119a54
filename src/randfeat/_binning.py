"""RandomBinningFeatures: random binning features (Rahimi & Recht, 2007, algorithm 2).

Python validates, draws the grids and chooses the thread count; the compiled
module ``_binning_fast`` hashes, builds the vocabularies and writes the CSR.
"""


from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassNamePrefixFeaturesOutMixin
from sklearn.utils._param_validation import InvalidParameterError, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._ext import _binning_fast
from . import _dask
from ._base import RandomFeatureMap, fit_context
from ._dask import is_dask_array
from ._kernels import GAMMA, KERNELS, resolve_l1_gamma, scale_pitches
from ._memory import check_memory
from ._validation import N_JOBS, Interval, as_generator, validate_X

# Bins are int64 in the kernel; |bin| <= 2**62 leaves a factor-2 margin and is
# what the no-collision argument for one-coordinate changes needs (see the header).
MAX_ABS_BIN = 2.0**62
_LANES = _binning_fast.LANES


#: Kernels random binning can represent: separable, with a pitch density.
BINNING_KERNELS = sorted(name for name, spec in KERNELS.items() if spec.sample_pitch is not None)


def _index_dtype(*bounds):
    """int32 when every index and indptr value fits, else int64 (scipy's rule)."""
    return np.int32 if max(bounds) < np.iinfo(np.int32).max else np.int64


class RandomBinningFeatures(ClassNamePrefixFeaturesOutMixin, RandomFeatureMap):
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
    gamma : float or 'scale', default=1.0
        Kernel parameter, as in ``sklearn.metrics.pairwise.laplacian_kernel``.
        ``'scale'``: ``1 / (n_features * mean|X - X.mean()|)``, the L1
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

    _sparse_output = True

    _parameter_constraints: dict = {
        "n_grids": [Interval(Integral, 1, None, closed="left")],
        "kernel": [StrOptions(set(BINNING_KERNELS))],
        "gamma": [*GAMMA, StrOptions({"scale"})],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": N_JOBS,
    }

    def __init__(self, n_grids=30, *, kernel="laplacian", gamma=1.0, random_state=None, n_jobs=None):
        self.n_grids = n_grids
        self.kernel = kernel
        self.gamma = gamma
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ API
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
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
        self._fit(X, return_features=False)
        return self

    @fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None):
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
        return self._fit(X, return_features=True)

    def transform(self, X):
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
        check_is_fitted(self, "bin_hashes_")
        if is_dask_array(X):  # lazy blocks of CSR, made on the workers
            return _dask.transform_blocks(self, X)
        X = validate_X(self, X, reset=False)
        P = self.n_grids_
        self._check_bin_range(X, self._U[:, :P], self._INV[:, :P])
        n = X.shape[0]
        n_threads = self._n_threads()
        idx = _index_dtype(n * P, self.n_features_out_)
        check_memory(
            n * P * (np.dtype(idx).itemsize + X.dtype.itemsize) + 16 * (n + 1),
            f"the binning features of {n} rows ({n} x {P} grids, CSR)",
            "transform X in chunks of rows, or use fewer grids",
        )
        indices = np.empty(n * P, dtype=idx)
        counts = np.empty(n, dtype=np.int64)
        vocabulary = _binning_fast.Vocabulary(
            self.bin_hashes_, self.grid_offsets_, self._dir, self._dir_offsets, self._dir_bits
        )
        grids = _binning_fast.Grids(self._U, self._INV, P)
        nnz = _binning_fast.transform_rows(X, grids, vocabulary, indices, counts, n_threads)
        indptr = np.zeros(n + 1, dtype=idx)
        np.cumsum(counts, out=indptr[1:])
        if nnz < n * P:  # some bins unseen at fit: pack rows, then release the tail
            _binning_fast.compact_rows(indices, counts, P)
            indices = _shrink(indices, nnz)
        data = np.empty(nnz, dtype=X.dtype)
        _binning_fast.fill_value(data, self._value, n_threads)
        return _csr(data, indices, indptr, (n, self.n_features_out_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    @property
    def _n_features_out(self):
        # ClassNamePrefixFeaturesOutMixin names the outputs from this.
        return self.n_features_out_

    # ------------------------------------------------------------ internals
    def _explain_invalid(self, name, value):
        if name == "kernel" and isinstance(value, str) and value in KERNELS:
            return (
                f"Random binning features cannot represent kernel={value!r}: "
                f"{KERNELS[value].no_binning_reason}."
            )
        return super()._explain_invalid(name, value)

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
        Ppad = -(-P // _LANES) * _LANES
        U = np.zeros((d, Ppad))
        INV = np.zeros((d, Ppad))
        U[:, :P] = offsets.T
        INV[:, :P] = inv.T
        return pitches, offsets, U, INV

    def _check_bin_range(self, X, U, INV):
        """ValueError unless every bin coordinate of X fits |bin| <= 2**62 (checked on column extremes).

        U, INV: (d, P) offsets and inverse pitches of the grids.
        """
        if sp.issparse(X):
            lo = X.min(axis=0).toarray().ravel()
            hi = X.max(axis=0).toarray().ravel()
        else:
            lo, hi = X.min(axis=0), X.max(axis=0)
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

    def _fit(self, X, return_features):
        P, spec = self.n_grids, KERNELS[self.kernel]
        if is_dask_array(X):  # bin sets per block on the workers, merged here
            _dask.fit_binning(self, X)
            return _dask.transform_blocks(self, X) if return_features else None
        X = validate_X(self, X, reset=True)
        n, d = X.shape
        if n >= 2**32 - 1:
            raise ValueError(f"RandomBinningFeatures supports fewer than 2**32 - 1 training rows, got {n}")
        gamma = resolve_l1_gamma(self.gamma, X)
        pitches, offsets, U, INV = self._draw_grids(spec, P, d, gamma)
        self._check_bin_range(X, U[:, :P], INV[:, :P])
        n_threads = self._n_threads()
        value = float(np.float64(1.0) / np.sqrt(np.float64(P)))

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
        grids = _binning_fast.Grids(U, INV, P)
        _binning_fast.hash_rows(X, grids, indices, data, n_threads, grid_major=True)
        # With features wanted, each grid's build also leaves every row's rank
        # in its vocabulary (in `data`, beside its hashes) while it is in cache.
        vocabulary = _binning_fast.build_vocabularies(
            indices, data, P, n_threads, write_ranks=return_features, grid_major=True,
            group_budget=_group_budget(indices.nbytes + data.nbytes, n_threads, return_features),
        )
        if return_features:
            _binning_fast.finish_training_csr(P, vocabulary[1], indices, data, value, n_threads)
        # Only now, with every kernel done (Ctrl-C or MemoryError before this
        # point leave the estimator as it was), the fitted state changes.
        self.pitches_, self.offsets_, self._U, self._INV = pitches, offsets, U, INV
        self.n_grids_, self.gamma_ = P, gamma
        self._value = value
        (self.bin_hashes_, self.grid_offsets_, self._dir, self._dir_offsets, self._dir_bits) = vocabulary
        self.n_features_out_ = int(self.grid_offsets_[-1])
        if not return_features:
            return None
        indptr = np.arange(0, n * P + 1, P, dtype=idx)
        return _csr(data, indices, indptr, (n, self.n_features_out_))


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


def _shrink(a, n):
    """a[:n] without keeping a's whole buffer alive (realloc in place when possible)."""
    try:
        a.resize(n, refcheck=False)
        return a
    except (ValueError, SystemError):  # pragma: no cover - not the owner of its data
        return a[:n].copy()


def _csr(data, indices, indptr, shape):
    Z = sp.csr_matrix((data, indices, indptr), shape=shape, copy=False)
    Z.has_sorted_indices = True  # guaranteed by construction (grid by grid)
    return Z
