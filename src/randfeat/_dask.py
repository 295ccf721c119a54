"""Dask arrays in randfeat's estimators: features made on the workers, ridge statistics reduced to the client.

Every Dask code path of randfeat lives here; the estimators call in through
one-line hooks guarded by ``is_dask_array``.  Importing randfeat never
imports dask: ``is_dask_array`` only looks at ``sys.modules`` (an object
cannot be a Dask array unless dask is already imported), and dask itself is
imported inside the functions that need it.

Design (issue 13):

* ``RandomFourierFeatures.fit`` reads only X's width and dtype (and, for
  ``gamma="scale"``, X's variance, computed by Dask): the frequencies are
  drawn once, on the client, and shipped with the fitted map, so workers
  never draw random numbers and any ``random_state`` works.
  ``transform`` is lazy: ``map_blocks`` of the in-memory ``transform`` over
  row blocks (columns in one chunk), with the output's chunks and ``meta``
  declared.  A row's features do not depend on the blocking (the dense
  kernel's product is row-independent): bit-identical to in-memory in
  float32 and float64.
* ``Ridge`` / ``RidgeClassifier.fit``: each row block (X, y, weights)
  becomes its ``RidgeStatistics`` on a worker (with ``features=``, the
  features are made there chunk by chunk and never leave it); the
  statistics are merged by a binary tree in block order (fixed, so the
  result is reproducible; exact in any grouping, Chan–Golub–LeVeque) and
  the D × D solve runs on the client.  Only O(D² + D·K) per block crosses
  the network.
* ``Ridge`` / ``RidgeClassifier`` by CG (sparse features such as binning,
  sparse blocks, ``solver="cg"``, or D past the Cholesky limit — the
  in-memory fit's rule): each block's features, targets and weights are
  made once and persisted on its worker (``_CGBlock``); the block CG of
  ``_cg.py`` runs on the client on D × K vectors, and its operator
  (``_BlockedProducts``) applies Zᵀ W Z P as one map over the blocks and
  one block-order tree reduction per iteration, all targets at once.  The
  column sums, the target sums and the right-hand sides are reduced the
  same way, so no N-length array reaches the client.  The partial sums
  are grouped by blocks, so the solution equals the in-memory CG's to the
  tolerance, not bitwise.
* ``RandomBinningFeatures.fit``: the grids are drawn on the client; each
  block's sorted per-grid sets of occupied bins come from the workers and
  are merged by sorted union in block order, which is exactly the
  in-memory vocabulary; ``transform`` gives lazy blocks of scipy CSR
  (scipy.sparse inside Dask: Dask concatenates them with
  ``scipy.sparse.vstack``; the ``sparse`` package was not needed).
* ``predict`` / ``decision_function`` return lazy Dask arrays (as
  ``dask_ml.wrappers.ParallelPostFit`` does); ``score`` returns a float,
  computing the predictions (n_samples × n_targets values, never X) to the
  client.
"""

import sys

import numpy as np
from sklearn.base import clone
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.validation import check_array, check_is_fitted

from ._linops import Capability, FeatureOperator
from ._normal import NormalOperator
from ._stats import RidgeStatistics


def is_dask_array(X):
    """Return True if X is a ``dask.array.Array`` (never imports dask).

    Parameters
    ----------
    X : object

    Returns
    -------
    bool
    """
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(X, module.Array)


# ------------------------------------------------------------------ checks
def _check_known_chunks(X, name):
    if any(np.isnan(c) for dim in X.chunks for c in dim):
        raise ValueError(
            f"{name} is a Dask array with unknown chunk sizes ({X.chunks!r}), e.g. from boolean "
            f"indexing or a Dask DataFrame's .values; randfeat needs the rows of every block. Call "
            f"{name}.compute_chunk_sizes() (or DataFrame.to_dask_array(lengths=True)) first."
        )


def _float_dtype(X):
    # As validate_X: float32 stays float32, every other dtype becomes float64.
    return np.dtype(np.float32) if X.dtype == np.float32 else np.dtype(np.float64)


def _row_blocks(X, name="X"):
    """X checked (2-D, known chunks) and rechunked to one chunk of columns."""
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D Dask array for {name}, got {X.ndim} dimension(s) (shape {X.shape})")
    _check_known_chunks(X, name)
    if X.shape[0] == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return X


def _aligned(X, v, name):
    """v (a Dask or NumPy array of X's length) as a Dask array with X's row chunks, or None."""
    import dask.array as da

    if v is None:
        return None
    if not is_dask_array(v):
        v = np.asarray(v)
        if v.ndim == 0 or v.shape[0] != X.shape[0]:
            raise ValueError(f"{name} has {v.shape[0] if v.ndim else 0} rows but X has {X.shape[0]}")
        return da.from_array(v, chunks=(X.chunks[0],) + tuple((s,) for s in v.shape[1:]))
    _check_known_chunks(v, name)
    if v.shape[0] != X.shape[0]:
        raise ValueError(f"{name} has {v.shape[0]} rows but X has {X.shape[0]}")
    if v.chunks[0] != X.chunks[0]:
        raise ValueError(
            f"{name}'s row chunks {v.chunks[0]} differ from X's {X.chunks[0]}: each block of rows of X "
            f"needs its own {name} on the same worker. Rechunk, e.g. {name}.rechunk({{0: X.chunks[0]}})."
        )
    if v.ndim == 2 and len(v.chunks[1]) > 1:
        v = v.rechunk({1: -1})
    return v


# ----------------------------------------------------------- Fourier map
def fourier_fit_input(X, *, with_variance):
    """Return a 2-row NumPy stand-in for a Dask X: its width and dtype (and, if asked, its variance).

    ``RandomFourierFeatures.fit`` reads only these.  With
    ``with_variance`` (``gamma="scale"``) the stand-in's rows are all-0 and
    all-2σ, whose entry variance is σ² = X.var() (computed by Dask, one pass
    over X on the workers); otherwise zeros.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
    with_variance : bool

    Returns
    -------
    ndarray of shape (2, n_features)
    """
    X = _row_blocks(X)
    stand_in = np.zeros((2, X.shape[1]), dtype=_float_dtype(X))
    if with_variance:
        stand_in[1] = 2.0 * float(np.sqrt(X.astype(np.float64).var().compute()))
    return stand_in


def transform_blocks(est, X):
    """Lazy ``est.transform`` of a Dask X, block by block on the workers (any fitted randfeat map).

    Rows are transformed independently, so each block is the in-memory
    transform of its rows.  Fourier blocks are dense ndarrays; binning
    blocks are ``scipy.sparse.csr_matrix`` (Dask concatenates them with
    ``scipy.sparse.vstack`` on ``compute``).

    Parameters
    ----------
    est : fitted RandomFourierFeatures or RandomBinningFeatures
    X : dask.array.Array of shape (n_samples, n_features_in_)

    Returns
    -------
    dask.array.Array of shape (n_samples, n_features_out_), row chunks of X
    """
    import scipy.sparse as sp

    X = _row_blocks(X)
    if X.shape[1] != est.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(est).__name__} is expecting "
                         f"{est.n_features_in_} features as input.")
    D = int(est.n_features_out_)
    dtype = _float_dtype(X)
    meta = sp.csr_matrix((0, D), dtype=dtype) if est._sparse_output else np.empty((0, D), dtype=dtype)
    return X.map_blocks(_transform_block, est, dtype=dtype, chunks=(X.chunks[0], (D,)), meta=meta)


def fit_binning(est, X):
    """Fit a RandomBinningFeatures on a Dask X: per-block bin sets on the workers, merged in block order.

    The grids are drawn on the client (any ``random_state``: workers draw
    nothing) and shipped to the workers, which hash their rows and return
    each grid's sorted set of occupied bins.  A binary tree in block order
    merges them by sorted union, which is exactly the in-memory fit's
    vocabulary (sorted per grid); the client then builds the lookup
    structure with the same kernel as the in-memory fit.  Sets the fitted
    attributes (the caller's ``fit_context`` restores the estimator if this
    raises).

    Parameters
    ----------
    est : RandomBinningFeatures (parameters validated)
    X : dask.array.Array of shape (n_samples, n_features)
    """
    import dask

    from ._ext import _binning_fast
    from ._kernels import KERNELS
    from ._validation import validate_X

    X = _row_blocks(X)
    n, d = X.shape
    if n >= 2**32 - 1:
        raise ValueError(f"RandomBinningFeatures supports fewer than 2**32 - 1 training rows, got {n}")
    validate_X(est, np.zeros((1, d), dtype=_float_dtype(X)), reset=True)  # n_features_in_
    P = est.n_grids
    gamma = est.gamma
    if isinstance(gamma, str):  # "scale": 1 / (d · mean|X − mean|), by Dask's reductions (two passes)
        from ._kernels import resolve_l1_gamma

        X64 = X.astype(np.float64)
        mean = float(X64.mean().compute())
        mad = float(abs(X64 - mean).mean().compute())
        # a stand-in whose entries have that deviation: the in-memory rule then gives 1 / (d · mad)
        gamma = resolve_l1_gamma("scale", np.array([[mean - mad] * d, [mean + mad] * d]))
    pitches, offsets, U, INV = est._draw_grids(KERNELS[est.kernel], P, d, gamma)
    # The bin-range check reads only each column's extremes: check them on a 2-row stand-in.
    lo, hi = dask.compute(X.min(axis=0), X.max(axis=0))
    est._check_bin_range(np.vstack([lo, hi]).astype(np.float64), U[:, :P], INV[:, :P])
    block = dask.delayed(_block_bins, pure=True)
    sets = [block(xb, U, INV, P) for xb in X.to_delayed().ravel()]
    merge = dask.delayed(_union_bins, pure=True)
    while len(sets) > 1:  # a binary tree in block order
        sets = [merge(sets[i], sets[i + 1]) if i + 1 < len(sets) else sets[i] for i in range(0, len(sets), 2)]
    (bins,) = dask.compute(sets[0])
    # One pseudo-row per rank: row r holds each grid's r-th bin (the last one
    # repeated for shorter grids), so build_vocabularies sees exactly these sets.
    length = max(len(b) for b in bins)
    rows = np.empty((length, P), dtype=np.uint64)
    for p, b in enumerate(bins):
        rows[: len(b), p] = b
        rows[len(b):, p] = b[-1]
    vocabulary = _binning_fast.build_vocabularies(np.empty(0, dtype=np.int32), rows.ravel(), P, est._n_threads())
    if not np.array_equal(vocabulary[0], np.concatenate(bins)):  # the kernel keeps bins sorted per grid
        raise RuntimeError("merged binning vocabulary differs from the kernel's; please report this")
    est.pitches_, est.offsets_, est._U, est._INV = pitches, offsets, U, INV
    est.n_grids_, est.gamma_ = P, float(gamma)
    est._value = float(np.float64(1.0) / np.sqrt(np.float64(P)))
    (est.bin_hashes_, est.grid_offsets_, est._dir, est._dir_offsets, est._dir_bits) = vocabulary
    est.n_features_out_ = int(est.grid_offsets_[-1])


def _block_bins(Xb, U, INV, P):
    """Each grid's sorted set of bins occupied by a block's rows (runs on a worker)."""
    from ._ext import _binning_fast

    Xb = np.ascontiguousarray(check_array(Xb, dtype=[np.float64, np.float32], ensure_min_samples=0))
    if Xb.shape[0] == 0:
        return [np.empty(0, dtype=np.uint64)] * P
    hashes = np.empty(Xb.shape[0] * P, dtype=np.uint64)
    _binning_fast.hash_rows(Xb, _binning_fast.Grids(U, INV, P), np.empty(0, dtype=np.int32), hashes, 1)
    return [np.unique(col) for col in hashes.reshape(-1, P).T]


def _union_bins(a, b):
    return [np.union1d(x, y) for x, y in zip(a, b)]


def _transform_block(Xb, est):
    return est.transform(Xb)


# ------------------------------------------------------------------ Ridge
def fit_ridge(est, X, y, sample_weight):
    """Fit a Ridge or RidgeClassifier on Dask X: statistics per block on the workers, solve on the client.

    Sets the estimator's fitted attributes (the caller's ``fit_context``
    restores it if this raises).

    Parameters
    ----------
    est : Ridge or RidgeClassifier (parameters validated)
    X : dask.array.Array of shape (n_samples, n_features)
    y : dask or NumPy array of shape (n_samples,) or (n_samples, n_targets)
    sample_weight : dask or NumPy array of shape (n_samples,), or None

    Returns
    -------
    est
    """
    import dask
    import dask.array as da
    from sklearn.base import ClassifierMixin

    from ._ridge import CHOLESKY_MAX_FEATURES, _Fit
    from ._validation import validate_X

    name = type(est).__name__
    X = _row_blocks(X)
    y = _aligned(X, y, "y")
    if y.ndim not in (1, 2):
        raise ValueError(f"y must be 1-D or 2-D, got shape {y.shape}")
    w = _aligned(X, sample_weight, "sample_weight")
    if w is not None and w.ndim != 1:
        raise ValueError(f"sample_weight must be 1-D, got shape {w.shape}")
    validate_X(est, np.zeros((1, X.shape[1]), dtype=_float_dtype(X)), reset=True)  # n_features_in_

    features = None if est.features is None else clone(est.features).fit(X)
    D = X.shape[1] if features is None else int(features.n_features_out_)
    sparse = (not isinstance(X._meta, np.ndarray)) or bool(getattr(features, "_sparse_output", False))
    # The same choice as the in-memory fit: CG for sparse or wide Z.
    use_cg = est.solver == "cg" or (est.solver == "auto" and (sparse or D > CHOLESKY_MAX_FEATURES))

    classifier = isinstance(est, ClassifierMixin)
    if classifier:
        if y.ndim != 1:
            raise ValueError("RidgeClassifier on Dask input needs y as a 1-D array of labels")
        classes = np.asarray(da.unique(y).compute())
        binarizer = LabelBinarizer(pos_label=1, neg_label=-1).fit(classes)
        if len(binarizer.classes_) < 2:
            raise ValueError(
                f"RidgeClassifier needs samples of at least 2 classes in the data, "
                f"but the data contains only one class: {binarizer.classes_[0]!r}"
            )
        K = 1 if len(binarizer.classes_) == 2 else len(binarizer.classes_)
        y_shape = "binary" if K == 1 else "2d"
    else:
        binarizer = None
        K = 1 if y.ndim == 1 else y.shape[1]
        y_shape = "1d" if y.ndim == 1 else ("column" if K == 1 else "2d")

    if use_cg:
        result, z_dtype = _fit_ridge_cg(est, X, y, w, features, binarizer, K, _float_dtype(X))
        coef, intercept = result.coef, result.intercept
        if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
            raise ValueError(f"{name}: the CG solution overflowed float64: rescale X and y before fitting.")
        fit = _Fit("cg", coef.astype(z_dtype, copy=False), intercept.astype(z_dtype), result.n_iter,
                   result.residual, None, features, result.preconditioner)
        if classifier:
            est._label_binarizer = binarizer
            est.classes_ = binarizer.classes_
        est._store_fit(fit, y_shape)
        return est

    # Workers receive a copy of the estimator's parameters (for chunking
    # and centring) without any fitted state.
    worker_est = clone(est)
    Xd = X.to_delayed().ravel()
    yd = y.to_delayed().ravel()
    wd = [None] * len(Xd) if w is None else w.to_delayed().ravel()
    block = dask.delayed(_block_statistics, pure=True)
    stats = [block(worker_est, features, binarizer, xb, yb, wb, D, K, _float_dtype(X))
             for xb, yb, wb in zip(Xd, yd, wd)]
    merge = dask.delayed(_merge, pure=True)
    while len(stats) > 1:  # a binary tree in block order: fixed, reproducible
        stats = [merge(stats[i], stats[i + 1]) if i + 1 < len(stats) else stats[i]
                 for i in range(0, len(stats), 2)]
    (total,) = dask.compute(stats[0])
    if total.weight_sum <= 0:
        raise ValueError("sample_weight is zero for every sample, so no sample counts in the fit; "
                         "give at least one sample a positive weight")
    sol = total.solve(float(est.alpha), overwrite=True)
    fit = _Fit("cholesky", sol.coef.astype(sol.dtype), sol.intercept.astype(sol.dtype),
               np.ones(K, dtype=np.intp), None, sol, features)
    if classifier:
        est._label_binarizer = binarizer
        est.classes_ = binarizer.classes_
    est._store_fit(fit, y_shape)
    return est


def _block_statistics(est, features, binarizer, Xb, yb, wb, D, K, dtype):
    """RidgeStatistics of one row block (runs on a worker): validate, make features, accumulate."""
    from ._validation import check_sample_weight

    Xb = check_array(Xb, accept_sparse="csr", dtype=[np.float64, np.float32], ensure_min_samples=0)
    Yb = _block_targets(binarizer, yb)
    if Xb.shape[0] == 0:
        return RidgeStatistics.empty(D, K, dtype, fit_intercept=est.fit_intercept)
    if wb is not None:
        wb = np.asarray(wb, dtype=np.float64)
        if not np.isfinite(wb).all() or np.any(wb < 0):
            raise ValueError("sample_weight must be finite and non-negative")
        if not wb.sum() > 0:  # a block of zero weights adds only its row count
            stats = RidgeStatistics.empty(D, K, dtype, fit_intercept=est.fit_intercept)
            stats.n_samples = Xb.shape[0]
            return stats
        wb = check_sample_weight(wb, Xb)
    return est._block_statistics(features, Xb, Yb, wb, D)


def _merge(a, b):
    return a.merge(b)


# ------------------------------------------------------- Ridge by CG
class _WorkerWeights:
    """Stands for the sample weights held with the row blocks on the workers (unit weights if none).

    ``_BlockedProducts`` takes this object wherever a ``FeatureOperator``
    takes a weight vector ``w``: the weights never come to the client.
    """

    def __repr__(self):
        return "<sample weights held on the workers>"


class _CGBlock:
    """One row block for a distributed CG solve: its features, targets and weights (lives on a worker).

    The feature operator is made on first use and not pickled (it may own
    a thread pool): if Dask moves or spills the block, it is remade.
    """

    def __init__(self, Z, Y, w, n_jobs):
        self.Z, self.Y, self.w, self.n_jobs = Z, Y, w, n_jobs
        self._ops = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_ops"] = None
        return state

    @property
    def ops(self):
        if self._ops is None:
            from ._linops import make_products
            from ._threads import effective_n_threads

            self._ops = make_products(self.Z, effective_n_threads(self.n_jobs))
        return self._ops

    @property
    def w_or_ones(self):
        return np.ones(self.Z.shape[0]) if self.w is None else self.w


def _cg_block(features, binarizer, Xb, yb, wb, dtype, n_jobs):
    """Make one block's features (if a map is given) and validated targets and weights (runs on a worker)."""
    import scipy.sparse as sp

    from ._validation import check_sample_weight

    if sp.issparse(Xb):
        Xb = check_array(Xb, accept_sparse="csr", dtype=[np.float64, np.float32], ensure_min_samples=0)
    else:
        Xb = check_array(Xb, dtype=[np.float64, np.float32], ensure_min_samples=0)
    Yb = _block_targets(binarizer, yb)
    if wb is not None:
        wb = np.asarray(wb, dtype=np.float64)
        if not np.isfinite(wb).all() or np.any(wb < 0):
            raise ValueError("sample_weight must be finite and non-negative")
        wb = check_sample_weight(wb, Xb)
    Z = Xb if features is None else features.transform(Xb)
    if sp.issparse(Z):
        Z = sp.csr_matrix(Z)
        Z.sum_duplicates()  # canonical CSR, as the in-memory fit's operators expect
    else:
        Z = np.ascontiguousarray(Z)
    return _CGBlock(Z, Yb, wb, n_jobs)


def _block_targets(binarizer, yb):
    """A block's targets as float64 (N_b × K): ±1 columns for a classifier."""
    if binarizer is not None:
        unknown = np.setdiff1d(yb, binarizer.classes_)
        if unknown.size:  # cannot happen: classes came from y itself
            raise ValueError(f"labels {unknown.tolist()!r} not among the classes")
        return np.asarray(binarizer.transform(yb), dtype=np.float64)
    Yb = check_array(yb, ensure_2d=False, dtype=np.float64, ensure_min_samples=0, input_name="y")
    return Yb.reshape(Yb.shape[0], -1)


# Per-block pieces of the CG solve (each runs on the worker holding the block).
def _b_sums(block):
    w = block.w_or_ones
    return block.ops.column_sums(w), np.einsum("i,ik->k", w, block.Y), float(w.sum())


def _b_rhs(block, ybar, centre):
    U = block.Y - ybar if centre else block.Y
    if block.w is not None:
        U = U * block.w[:, None]
    U = np.ascontiguousarray(U, dtype=block.ops.dtype)
    return block.ops.rmatmat_once(U), U.sum(axis=0, dtype=np.float64)


def _b_normal(block, P, mup):
    return block.ops.normal(P, mup, block.w)


def _b_sq_sums(block):
    return block.ops.column_sq_sums(block.w_or_ones)


def _b_gram_block(block, columns):
    return block.ops.gram_block(columns, block.w)


def _b_matmat(block, P):
    return block.ops.matmat(P)


def _b_rmatmat(block, U):
    return block.ops.rmatmat(U)


def _b_shape(block):
    return block.Z.shape[0], (block.Z.nnz if hasattr(block.Z, "nnz") else block.Z.size), block.Z.dtype


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    return a + b


def _to_workers(obj):
    """``obj`` as one piece of data for many tasks: scattered once when computing on a distributed Client.

    Without this, a large argument (a D × K direction, a fitted feature
    map) is embedded in the task graph, which Dask warns about and ships
    with every graph.  On a local scheduler the object is used as is.
    """
    if obj is None or "distributed" not in sys.modules:
        return obj
    import distributed
    from dask.base import get_scheduler

    client = getattr(get_scheduler(), "__self__", None)  # the Client whose .get dask.compute will call
    if isinstance(client, distributed.Client):
        return client.scatter(obj, hash=False)
    return obj


class _BlockedProducts(FeatureOperator):
    """Products with a Z whose row blocks are held on Dask workers: one map and one reduction per call.

    Each call maps a per-block product over the persisted blocks and sums
    the partial results by a binary tree in block order (fixed, so results
    are reproducible for a given blocking); only D × K arrays cross the
    network.  The weight argument ``w`` of every method must be
    ``self.weights``: the weights live with the blocks.

    Parameters
    ----------
    blocks : list of dask.delayed.Delayed
        Persisted ``_CGBlock`` objects, in row order.
    rows : list of int
        Rows of each block.
    n_features : int
    dtype : numpy dtype
    entries : int
        Stored entries of Z (nnz, or N·D when dense), for the preconditioner's size rules.
    sparse : bool
        Whether Z is sparse (sparse Z gets the heavy-column Gram block).
    """

    capabilities = frozenset(Capability)

    def __init__(self, blocks, rows, n_features, dtype, entries, sparse):
        super().__init__((int(sum(rows)), int(n_features)), dtype, 1)
        self._blocks, self._rows = blocks, list(rows)
        self._entries, self._sparse = int(entries), bool(sparse)
        self.weights = _WorkerWeights()
        if not sparse:  # dense Z: no Gram block, as DenseProducts
            self.capabilities = frozenset({Capability.FUSED_NORMAL, Capability.COLUMN_STATISTICS})

    @property
    def entries(self):
        """Stored entries of Z over all blocks."""
        return self._entries

    def reduce(self, fn, *args):
        """Return the block-order tree sum of ``fn(block, *args)`` over the blocks (computed)."""
        import dask

        task = dask.delayed(fn, pure=True)
        args = [_to_workers(a) if isinstance(a, np.ndarray) and a.nbytes > 2**16 else a for a in args]
        parts = [task(b, *args) for b in self._blocks]
        add = dask.delayed(_add, pure=True)
        while len(parts) > 1:
            parts = [add(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
        (out,) = dask.compute(parts[0])
        return out

    def _check(self, w):
        if w is not self.weights:
            raise ValueError("the weights of a Dask-held Z live on the workers: pass ops.weights")

    def matmat(self, P):
        """Return Z @ P (N × K, brought to the client: for tests and small N only)."""
        import dask

        task = dask.delayed(_b_matmat, pure=True)
        P = np.ascontiguousarray(P, dtype=self.dtype)
        return np.concatenate(dask.compute(*[task(b, P) for b in self._blocks]), axis=0)

    def rmatmat(self, U):
        """Return Zᵀ @ U (U is split by blocks and sent to the workers)."""
        import dask

        U = np.ascontiguousarray(U, dtype=self.dtype)
        bounds = np.concatenate([[0], np.cumsum(self._rows)])
        task = dask.delayed(_b_rmatmat, pure=True)
        parts = [task(b, U[s:e]) for b, s, e in zip(self._blocks, bounds[:-1], bounds[1:])]
        add = dask.delayed(_add, pure=True)
        while len(parts) > 1:
            parts = [add(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
        (out,) = dask.compute(parts[0])
        return out

    def normal(self, P, mup, w, out=None):
        """Return (Zᵀ W (Z P − 1 mupᵀ), Σ_i w_i (z_iᵀP − mup)), one map and one reduction (Q into ``out`` if given)."""
        self._check(w)
        Q, s = self.reduce(_b_normal, np.ascontiguousarray(P, dtype=self.dtype), np.asarray(mup, dtype=np.float64))
        if out is not None:
            np.copyto(out, Q)
            Q = out
        return Q, s

    def column_sums(self, w):
        """Return Σ_i w_i Z_ij, float64."""
        self._check(w)
        return self.reduce(_b_sums)[0]

    def column_sq_sums(self, w):
        """Return Σ_i w_i Z_ij², float64."""
        self._check(w)
        return self.reduce(_b_sq_sums)

    def gram_block(self, columns, w):
        """Return Σ_i w_i z_i[columns] z_i[columns]ᵀ, float64."""
        self._check(w)
        return self.reduce(_b_gram_block, np.asarray(columns))


class _BlockedNormalOperator(NormalOperator):
    """A = Z_cᵀ W Z_c for a ``_BlockedProducts``: sums and right-hand sides reduced on the workers.

    Parameters
    ----------
    ops : _BlockedProducts
    fit_intercept : bool
    """

    supports_dual = False  # the N-long dual vectors would have to live on the client

    def __init__(self, ops, fit_intercept):
        self.ops = ops
        self.shape = ops.shape
        self.dtype = ops.dtype
        self.weights = ops.weights
        self._w_or_ones = ops.weights
        column_sums, self._target_sums, self.weight_sum = ops.reduce(_b_sums)
        self.mean = column_sums / self.weight_sum if fit_intercept else None
        self._partial_pq = {}
        self._diagonal = None

    def target_means(self, Y=None):
        """Return the weighted target means ȳ (the targets are on the workers; Y is ignored)."""
        if self.mean is None:
            return np.zeros(self._target_sums.shape[0])
        return self._target_sums / self.weight_sum

    def rhs(self, Y=None):
        """Return (B, ȳ) reduced from the blocks' own targets (Y is ignored)."""
        ybar = self.target_means()
        B, u_sum = self.ops.reduce(_b_rhs, ybar, self.mean is not None)
        if self.mean is not None:
            B -= np.outer(self.mean, u_sum).astype(self.dtype)
        return B, ybar


def _fit_ridge_cg(est, X, y, w, features, binarizer, K, dtype):
    """CG on features held in row blocks on the workers; returns (coef (K × D), intercept, CGResult)."""
    import dask

    from ._cg import solve_normal_path

    blocks = []
    rows = []
    make = dask.delayed(_cg_block, pure=True)
    Xd = X.to_delayed().ravel()
    yd = y.to_delayed().ravel()
    wd = [None] * len(Xd) if w is None else w.to_delayed().ravel()
    shared_features = _to_workers(features)
    for n_rows, xb, yb, wb in zip(X.chunks[0], Xd, yd, wd):
        if n_rows:
            blocks.append(make(shared_features, binarizer, xb, yb, wb, dtype, est.n_jobs))
            rows.append(n_rows)
    blocks = list(dask.persist(*blocks))
    shapes = dask.compute(*[dask.delayed(_b_shape, pure=True)(b) for b in blocks])
    D = int(est.n_features_in_ if features is None else features.n_features_out_)
    entries = sum(s[1] for s in shapes)
    z_dtype = shapes[0][2]
    sparse = features is not None and getattr(features, "_sparse_output", False) or not isinstance(X._meta, np.ndarray)
    ops = _BlockedProducts(blocks, rows, D, z_dtype, entries, sparse)
    # Binning features are one-hot blocks: the same "auto" preconditioner as
    # in memory (``OneHotBlockProducts.prefers_scaled_identity``).
    ops.prefers_scaled_identity = features is not None and getattr(features, "_sparse_output", False)
    normal = _BlockedNormalOperator(ops, est.fit_intercept)
    if normal.weight_sum <= 0:
        raise ValueError("sample_weight is zero for every sample, so no sample counts in the fit; "
                         "give at least one sample a positive weight")
    B, ybar = normal.rhs()
    log = est._log if est.verbose else None
    est._check_preconditioner_rank(D)
    (result,) = solve_normal_path(normal, B, ybar, [float(est.alpha)], tol=float(est.tol), max_iter=est.max_iter,
                                  log=log, preconditioner=est.preconditioner, nystrom_rank=est.preconditioner_rank,
                                  memory_budget=int(est.preconditioner_memory))
    return result, z_dtype


# -------------------------------------------------------------- prediction
def predict_blocks(est, X, method, **kwargs):
    """Lazy ``est.<method>(X, **kwargs)`` over the row blocks of a Dask X.

    Parameters
    ----------
    est : fitted Ridge or RidgeClassifier
    X : dask.array.Array of shape (n_samples, n_features_in_)
    method : {"predict", "decision_function"}
    **kwargs : passed to the method (``return_std`` for Ridge.predict)

    Returns
    -------
    dask.array.Array, or a tuple of them (``return_std=True``)
    """
    check_is_fitted(est, "coef_")
    X = _row_blocks(X)
    if X.shape[1] != est.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(est).__name__} is expecting "
                         f"{est.n_features_in_} features as input.")
    if kwargs.get("return_std"):
        est.predict(np.zeros((1, X.shape[1]), dtype=_float_dtype(X)), return_std=True)  # fail early
        mean = predict_blocks(est, X, method)
        std = X.map_blocks(_method_block, est, method, 1, {"return_std": True},
                           **_out_layout(est, X, mean.ndim, mean.dtype))
        return mean, std
    probe = getattr(est, method)(np.zeros((1, X.shape[1]), dtype=_float_dtype(X)))
    return X.map_blocks(_method_block, est, method, None, {}, **_out_layout(est, X, probe.ndim, probe.dtype))


def _out_layout(est, X, ndim, dtype):
    if ndim == 1:
        return dict(drop_axis=1, dtype=dtype, chunks=(X.chunks[0],), meta=np.empty((0,), dtype=dtype))
    K = est.coef_.shape[0]
    return dict(dtype=dtype, chunks=(X.chunks[0], (K,)), meta=np.empty((0, K), dtype=dtype))


def _method_block(Xb, est, method, item, kwargs):
    out = getattr(est, method)(Xb, **kwargs)
    return out if item is None else out[item]
