"""The Dask backend: the pipeline run on the row blocks of a Dask array, on the workers that hold them.

* Feature maps: the parameters are drawn on the client from an
  ``InputSummary`` computed by Dask's reductions (workers never draw random
  numbers, so any ``random_state`` works); a map that reads every row
  (``MapCapability.MERGEABLE_VOCABULARY``, binning) gets its vocabulary from
  per-block vocabularies merged by the reduction tree, exactly the
  in-memory one.  ``transform`` is lazy: ``map_blocks`` of the in-memory
  transform over row blocks (columns in one chunk), with the output's chunks
  and ``meta`` declared; a row-independent map gives the in-memory features
  bit for bit.
* Ridge by Cholesky: each row block (X, y, weights) becomes its
  ``RidgeStatistics`` on a worker (features made there, chunk by chunk,
  never leaving it — ``pipeline.block_statistics``, the in-memory pipeline's
  own), merged by the reduction tree in block order (exact in any grouping,
  Chan–Golub–LeVeque); the D × D solve runs on the client.  Only
  O(D² + D·K) per block crosses the network.
* Ridge by CG (sparse features, sparse blocks, ``solver="cg"``, or D past
  the Cholesky limit — the in-memory rule): ``dask_cg``.
* Predictions are lazy Dask arrays (as ``dask_ml.wrappers.ParallelPostFit``).
* ``RidgeCV`` selection is refused with a clear error: its passes over the
  rows run in memory.
* Logistic regression: ``dask_logistic`` (the loss summed over the blocks
  on the workers, the solver loop on the client).
"""

import dataclasses

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from .._core.protocols import MapCapability, OutputKind
from .._core.threads import effective_n_threads
from .._core.validation import check_sample_weight, validate_X
from .._solvers import pipeline
from .._solvers.stats import RidgeStatistics
from .dask_cg import fit_ridge_cg
from .dask_input import DaskSummary, aligned, float_dtype, fresh, header, is_sparse, row_blocks
from .tree import to_workers, tree_reduce

#: Bytes of one dense slice of a CSR block handed to a map's ``_block_vocabulary`` (which reads dense rows).
DENSE_SLICE_BYTES = 16 * 2**20


def _transform_block(Xb, fmap, state, kind):
    """One validated block's features (runs on a worker), of the kind its Dask array declares (its ``meta``)."""
    Z = fmap._transform_rows(state, Xb, fmap._threads())  # the map's row kernel: no second validation
    if sp.issparse(Z) != (kind is OutputKind.CSR):
        raise TypeError(f"{type(fmap).__name__} returned a {type(Z).__name__} block where its Dask transform "
                        f"declared {kind.value} blocks; please report this")
    return Z


def _merge(a, b):
    return a.merge(b)


def _block_vocabulary(fmap, state, Xb):
    """A map's vocabulary of one validated block (runs on a worker); a CSR block is read in dense slices of rows.

    Binning hashes every coordinate of a row, a CSR's zeros included, so a
    dense slice costs no more than the hashing it feeds.
    """
    if not sp.issparse(Xb):
        return fmap._block_vocabulary(state, Xb)
    step = max(1, DENSE_SLICE_BYTES // (Xb.dtype.itemsize * max(1, Xb.shape[1])))
    vocabulary = fmap._block_vocabulary(state, Xb[:0].toarray())
    for s in range(0, Xb.shape[0], step):
        vocabulary = fmap._merge_vocabularies(vocabulary, fmap._block_vocabulary(state, Xb[s:s + step].toarray()))
    return vocabulary


def _block_statistics(settings, features, Xb, yb, wb, targets, D, K, dtype):
    """RidgeStatistics of one row block (runs on a worker): make features, accumulate (Xb validated by row_blocks)."""
    Yb = targets.encode_block(yb)
    if Xb.shape[0] == 0:
        return RidgeStatistics.empty(D, K, dtype, fit_intercept=settings.fit_intercept)
    if wb is not None:
        wb = np.asarray(wb, dtype=np.float64)
        if not np.isfinite(wb).all() or np.any(wb < 0):
            raise ValueError("sample_weight must be finite and non-negative")
        if not wb.sum() > 0:  # a block of zero weights adds only its row count
            stats = RidgeStatistics.empty(D, K, dtype, fit_intercept=settings.fit_intercept)
            stats.n_samples = Xb.shape[0]
            return stats
        wb = check_sample_weight(wb, Xb)
    return pipeline.block_statistics(features, Xb, Yb, wb, settings.fit_intercept,
                                 effective_n_threads(settings.n_jobs), settings.chunk_size)


def _method_block(Xb, fn, item):
    out = fn(Xb)
    return out if item is None else out[item]


class DaskBackend:
    """Runs the pipeline where a Dask array's blocks are: on the workers, results reduced to the client."""

    # ---------------------------------------------------------------- input
    def summary(self, X):
        """Return the ``InputSummary`` of a Dask X (statistics by passes over its validated blocks)."""
        return DaskSummary(row_blocks(X))

    def validate_fit(self, est, X, y, sample_weight, *, y_numeric, negative_weights=False):
        """Check (X, y, sample_weight) as far as the client can; the values are checked on the workers.

        Negative sample weights are refused there whatever ``negative_weights``
        says: the Dask logistic fit has no L-BFGS-only route for them.

        Records ``n_features_in_`` on ``est`` (scikit-learn's validation of
        a one-row stand-in with X's width and dtype).

        Returns
        -------
        X, y, sample_weight : Dask arrays with X's row chunks (sample_weight may be None)
        """
        X = row_blocks(X, owner=type(est).__name__)
        y = aligned(X, y, "y")
        if y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D, got shape {y.shape}")
        w = aligned(X, sample_weight, "sample_weight")
        if w is not None and w.ndim != 1:
            raise ValueError(f"sample_weight must be 1-D, got shape {w.shape}")
        validate_X(est, header(X), reset=True)
        return X, y, w

    def class_weighted(self, class_weight, y, sample_weight):
        """Return ``sample_weight`` times the weights of y's classes, lazily (one pass for the class counts)."""
        if not class_weight:
            return sample_weight
        import dask.array as da
        from sklearn.utils.class_weight import compute_class_weight

        classes, counts = (np.asarray(a) for a in da.compute(*da.unique(fresh(y), return_counts=True)))
        if isinstance(class_weight, str):  # "balanced": n_samples / (n_classes · count), as scikit-learn
            table = counts.sum() / (classes.size * counts.astype(np.float64))
        else:
            table = compute_class_weight(class_weight, classes=classes, y=classes)
        weights = y.map_blocks(lambda b: table[np.searchsorted(classes, b)], dtype=np.float64)
        return weights if sample_weight is None else sample_weight * weights

    def labels(self, y):
        """Return the sorted classes of a Dask y of labels (one pass on the workers)."""
        import dask.array as da

        if y.ndim != 1:
            raise ValueError("RidgeClassifier on Dask input needs y as a 1-D array of labels")
        return np.asarray(da.unique(fresh(y)).compute())

    # --------------------------------------------------------- feature maps
    def fit_map(self, fmap, X, *, return_features):
        """Fit ``fmap`` on a Dask X: (state, lazy features of X or None)."""
        X = row_blocks(X, owner=type(fmap).__name__)
        validate_X(fmap, header(X), reset=True)
        state = fmap._draw(DaskSummary(X))
        if fmap.has(MapCapability.MERGEABLE_VOCABULARY):
            import dask

            # A clone: the workers need the class's code, not this map's earlier state.
            block, worker_map = dask.delayed(_block_vocabulary, pure=True), clone(fmap)
            parts = [block(worker_map, state, xb) for xb in fresh(X).to_delayed().ravel()]
            (vocabulary,) = dask.compute(tree_reduce(parts, fmap._merge_vocabularies))
            state = fmap._state_with_vocabulary(state, vocabulary, fmap._threads())
        return state, (self.transform_map(fmap, state, X) if return_features else None)

    def transform_map(self, fmap, state, X):
        """Lazy features of a Dask X, block by block on the workers (a row-independent map)."""
        X = row_blocks(X, owner=type(fmap).__name__)
        if not fmap.has(MapCapability.ROW_INDEPENDENT):
            raise TypeError(f"{type(fmap).__name__} is not row-independent: its Dask transform would depend on "
                            f"the blocking. Transform the rows in memory.")
        if X.shape[1] != fmap.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(fmap).__name__} is expecting "
                             f"{fmap.n_features_in_} features as input.")
        D = int(state.n_features_out)
        dtype = float_dtype(X)
        kind = fmap.output_kind_for(is_sparse(X), state)
        meta = sp.csr_matrix((0, D), dtype=dtype) if kind is OutputKind.CSR else np.empty((0, D), dtype=dtype)
        return X.map_blocks(_transform_block, fmap, state, kind, dtype=dtype, chunks=(X.chunks[0], (D,)), meta=meta)

    # ------------------------------------------------------------------ ridge
    def fit_ridge(self, settings, template, X, y, w, targets):
        """Fit ridge on a Dask X: statistics per block on the workers (or distributed CG); return a ``FitResult``."""
        features = None
        if template is not None:
            features = clone(template)
            features._check_params()  # as its fit would: the map's own parameters
            features._state, _ = self.fit_map(features, X, return_features=False)
        D = X.shape[1] if features is None else int(features.n_features_out_)
        sparse = is_sparse(X) or (
            features is not None and features.output_kind_for(is_sparse(X)) is OutputKind.CSR)
        if pipeline.choose_solver(settings.solver, sparse, D) == "cg":
            return fit_ridge_cg(settings, X, y, w, features, targets, D)
        stats = self.ridge_statistics(settings, features, X, y, w, targets, D)
        if stats.weight_sum <= 0:
            raise ValueError("sample_weight is zero for every sample, so no sample counts in the fit; "
                             "give at least one sample a positive weight")
        return pipeline.cholesky_result(stats.solve(float(settings.alpha), overwrite=True, owner=settings.owner), features)

    def ridge_statistics(self, settings, features, X, y, w, targets, D):
        """The ``RidgeStatistics`` of all the rows: one per block on the workers, merged in block order."""
        import dask

        Xd = fresh(X).to_delayed().ravel()
        yd = fresh(y).to_delayed().ravel()
        wd = [None] * len(Xd) if w is None else fresh(w).to_delayed().ravel()
        block = dask.delayed(_block_statistics, pure=True)
        shared = to_workers(features)
        settings = dataclasses.replace(settings, log=None)  # the log prints here, not on the workers
        parts = [block(settings, shared, xb, yb, wb, targets, D, targets.n_targets, float_dtype(X))
                 for xb, yb, wb in zip(Xd, yd, wd)]
        (stats,) = dask.compute(tree_reduce(parts, _merge))
        return stats

    def select(self, settings, template, X, y, w, targets):
        """Refuse (``check_selection``)."""
        self.check_selection(settings.owner)

    def check_selection(self, name):
        """Refuse: ``RidgeCV``'s leave-one-out passes run in memory (a clear error, not a silent pull)."""
        raise TypeError(
            f"{name}.fit does not accept Dask arrays yet (its leave-one-out passes over the rows run in "
            f"memory, and it would pull X to the client). Choose alpha (and gamma) with {name} on a sample that fits in memory "
            f"(e.g. X[:100_000].compute()), then fit randfeat.{name.replace('CV', '')}(alpha=...) on the "
            f"Dask array; the fitted {name}'s predict and decision_function accept Dask arrays."
        )

    def check_logistic(self, owner):
        """Logistic fits run on the blocks (``dask_logistic``): nothing to refuse."""

    def class_targets(self, make, y, sample_weight, owner, class_weight):
        """A classifier's encoding of a Dask y and its rows' weights: ``dask_logistic.class_targets``."""
        from .dask_logistic import class_targets

        return class_targets(make, y, sample_weight, owner, class_weight)

    def on_client(self, v):
        """Return a Dask v (labels, weights: one value per row) computed into this process, or None."""
        return None if v is None else np.asarray(fresh(v).compute())

    def select_logistic(self, settings, template, X, y, w, targets):
        """Choose (gamma,) C for logistic regression on the blocks: ``dask_logistic_cv.select``."""
        from .dask_logistic_cv import select

        return select(self, settings, template, X, y, w, targets)

    def fit_logistic(self, settings, template, X, y, w, targets):
        """Fit logistic regression, the loss summed over the blocks on the workers: ``dask_logistic``."""
        from .dask_logistic import fit_logistic

        return fit_logistic(self, settings, template, X, y, w, targets)

    def map_rows(self, fn, X, n_features, owner, *, n_outputs=1):
        """Lazy ``fn`` over the row blocks of a Dask X (a prediction), checked on a one-row probe first.

        Parameters
        ----------
        fn : callable
            An in-memory prediction of a block of rows (an ndarray, or a tuple of ``n_outputs`` of them).
        X : dask.array.Array
        n_features : int
            The width the fitted estimator expects.
        owner : str
            The estimator's class name, for messages.
        n_outputs : int, default=1

        Returns
        -------
        dask.array.Array, or a tuple of ``n_outputs`` of them
        """
        X = row_blocks(X, owner=owner)
        if X.shape[1] != n_features:
            raise ValueError(f"X has {X.shape[1]} features, but {owner} is expecting "
                             f"{n_features} features as input.")
        probe = fn(header(X))  # fail early, on the client, and learn the output's shape and dtype
        if n_outputs == 1:
            return X.map_blocks(_method_block, fn, None, **_out_layout(X, probe))
        return tuple(X.map_blocks(_method_block, fn, i, **_out_layout(X, probe[i])) for i in range(n_outputs))


def _out_layout(X, probe):
    dtype = probe.dtype
    if probe.ndim == 1:
        return dict(drop_axis=1, dtype=dtype, chunks=(X.chunks[0],), meta=np.empty((0,), dtype=dtype))
    K = probe.shape[1]
    return dict(dtype=dtype, chunks=(X.chunks[0], (K,)), meta=np.empty((0, K), dtype=dtype))


DASK = DaskBackend()
