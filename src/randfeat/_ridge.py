"""Ridge regression and classification on (random) features.

``Ridge`` and ``RidgeClassifier`` solve min ‖Zw + b − y‖²_W + α‖w‖² on a
feature matrix Z that is either X itself (dense or CSR) or the output of a
randfeat feature map given as ``features=`` (then Z is produced chunk by
chunk and never held whole when it is dense).  Solvers:

* ``"cholesky"`` — the sufficient statistics (centred Gram matrix and
  cross-products) accumulated chunk by chunk with BLAS syrk (``_stats.py``),
  then a Cholesky solve (``_cholesky.py``).  The solution keeps the factor,
  which gives ``Ridge.predict(X, return_std=True)``.
* ``"cg"`` — preconditioned block conjugate gradient that only multiplies
  by Z and Zᵀ (``_cg.py``; the normal operator in ``_normal.py``, products
  in ``_linops.py``); sparse Z stays sparse, centring is implicit.
  Preconditioner: Jacobi, with the block of the heaviest columns of a
  sparse Z inverted exactly (``_precond.py``).
* ``"auto"`` — Cholesky for dense Z of width D <= ``CHOLESKY_MAX_FEATURES``
  (10000), CG otherwise and for every sparse Z.  Why 10000: the Gram matrix
  takes 8·D² bytes (800 MB at D = 10000) and its factorisation D³/3 flops
  (~5 s here); beyond that width memory, not speed, decides, and CG needs
  only O(N·K + D·K) on top of Z.
"""

import dataclasses
import sys
import time
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils._param_validation import InvalidParameterError, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_consistent_length, check_is_fitted, column_or_1d

from . import _dask
from ._base import RandomFeatureMap, ValidatedParamsMixin, fit_context
from ._dask import is_dask_array
from ._cg import cg_ridge
from ._cholesky import RidgeSolution
from ._linops import make_products, row_products
from ._nystrom import DEFAULT_MEMORY_BUDGET
from ._precond import PRECONDITIONERS
from ._rowmerge import merged_problem
from ._stats import StatisticsAccumulator
from ._threads import effective_n_threads
from ._validation import N_JOBS, Interval, check_sample_weight, validate_X, validate_X_y

#: Widest dense Z for which ``solver="auto"`` picks Cholesky (see module doc).
CHOLESKY_MAX_FEATURES = 10_000

#: Default memory budget of one chunk of features (``chunk_size=None``):
#: 64 MiB of Z rows, enough rows for syrk to run at full speed for any
#: D <= 10000 (>= 800 rows in float64) while keeping the peak memory of a
#: streaming fit to a few hundred MB above the Gram matrix.
DEFAULT_CHUNK_BYTES = 64 * 2**20

_SOLVERS = ("auto", "cg", "cholesky")


def _default_chunk_rows(n_features, itemsize):
    return max(64, DEFAULT_CHUNK_BYTES // max(1, n_features * itemsize))


class _Fit(NamedTuple):
    """What a solver produced, before it becomes the estimator's fitted attributes."""

    solver: str
    coef: np.ndarray  # (K, D), the features' dtype
    intercept: np.ndarray  # (K,)
    n_iter: np.ndarray
    residual: np.ndarray | None
    solution: RidgeSolution | None  # the Cholesky solution (factor, noise), None for CG
    features: RandomFeatureMap | None  # the fitted clone of ``features``
    preconditioner: str | None = None  # CG's preconditioner, None for Cholesky


class _BaseRidge(ValidatedParamsMixin, BaseEstimator):
    """Shared fitting machinery of Ridge and RidgeClassifier."""

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left")],  # finite: inf is excluded
        "features": [RandomFeatureMap, None],
        "solver": [StrOptions(set(_SOLVERS))],
        "fit_intercept": ["boolean"],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "preconditioner": [StrOptions(set(PRECONDITIONERS))],
        "preconditioner_rank": [Interval(Integral, 1, None, closed="left"), None],
        "preconditioner_memory": [Interval(Integral, 1, None, closed="left")],
        "chunk_size": [Interval(Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
        "n_jobs": N_JOBS,
    }

    def __init__(
        self,
        alpha=1.0,
        *,
        features=None,
        solver="auto",
        fit_intercept=True,
        tol=1e-6,
        max_iter=None,
        preconditioner="auto",
        preconditioner_rank=None,
        preconditioner_memory=DEFAULT_MEMORY_BUDGET,
        chunk_size=None,
        verbose=0,
        n_jobs=None,
    ):
        self.alpha = alpha
        self.features = features
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.preconditioner = preconditioner
        self.preconditioner_rank = preconditioner_rank
        self.preconditioner_memory = preconditioner_memory
        self.chunk_size = chunk_size
        self.verbose = verbose
        self.n_jobs = n_jobs

    # ------------------------------------------------------------ validation
    def _explain_invalid(self, name, value):
        if name == "features":
            name = type(self).__name__
            return (
                f"{name}(features=...) must be a randfeat feature map such as "
                f"RandomFourierFeatures(...) or RandomBinningFeatures(...), got "
                f"{type(value).__name__}. To use another transformer, put it "
                f"in a sklearn Pipeline before {name}."
            )
        return super()._explain_invalid(name, value)

    def _log(self, msg):
        if self.verbose:
            print(f"[{type(self).__name__}] {msg}", file=sys.stderr, flush=True)

    # --------------------------------------------------------------- fitting
    def _fit_targets(self, X, Y, sample_weight):
        """Fit on validated X (N × d) and float64 targets Y (N × K); return a ``_Fit`` (sets nothing on self)."""
        t0 = time.perf_counter()
        n_threads = effective_n_threads(self.n_jobs)
        features = None if self.features is None else clone(self.features)
        Z, D = self._feature_matrix(features, X, t0)

        solver = self.solver
        if solver == "auto":
            dense = Z is None or not sp.issparse(Z)
            solver = "cholesky" if dense and D <= CHOLESKY_MAX_FEATURES else "cg"
        if solver == "cholesky":
            fit = self._fit_cholesky(features, X, Z, Y, sample_weight, D, n_threads, t0)
        else:
            if Z is None:
                # CG needs Z at every iteration: materialise it (N × D memory).
                Z = features.transform(X)
            fit = self._fit_cg(features, Z, Y, sample_weight, n_threads)
        self._log(f"fit done ({solver}), elapsed {time.perf_counter() - t0:.1f} s")
        return fit

    def _store_fit(self, fit, y_shape):
        """Set the fitted attributes from a ``_Fit``.

        ``y_shape`` is how the targets were given: ``"1d"`` (one target as
        y of shape (n,)), ``"column"`` (one target as (n, 1)), ``"binary"``
        (a two-class RidgeClassifier: one ±1 column) or ``"2d"``.  The
        attributes' shapes follow scikit-learn's Ridge (>= 1.6) and
        RidgeClassifier (>= 1.9: binary coef_ of shape (n_features,),
        intercept_ of shape (1,)) for each.
        """
        self.solver_ = fit.solver
        self.n_iter_ = fit.n_iter
        self.relative_residual_ = fit.residual
        self.preconditioner_ = fit.preconditioner
        self._solution = fit.solution
        if fit.features is not None:
            self.features_ = fit.features
        elif hasattr(self, "features_"):
            del self.features_  # a refit without features= must not keep the old map
        one = y_shape != "2d"  # "1d", "column" and "binary": one row of coefficients
        self.coef_ = fit.coef[0] if one else fit.coef
        if not self.fit_intercept:
            self.intercept_ = 0.0  # as scikit-learn's Ridge and RidgeClassifier, whatever y's shape
        elif y_shape == "1d":
            self.intercept_ = fit.intercept[0]
        else:
            self.intercept_ = fit.intercept
        if fit.solution is None:
            self.noise_variance_ = None
        elif y_shape == "1d":
            self.noise_variance_ = float(fit.solution.noise_variance[0])
        else:
            self.noise_variance_ = fit.solution.noise_variance.copy()

    def _feature_matrix(self, features, X, t0):
        """Fit the clone ``features`` (if any); return (Z, or None when Z is to be streamed, and D)."""
        if features is None:
            return X, X.shape[1]
        if getattr(features, "_sparse_output", False):
            # Sparse features (binning) are cheap to hold: materialise the
            # CSR once and solve on it.
            Z = features.fit_transform(X)
            Z = sp.csr_matrix(Z) if not sp.issparse(Z) else Z.tocsr()
            self._log(f"materialised {Z.shape[0]}x{Z.shape[1]} sparse features, nnz={Z.nnz}, "
                      f"elapsed {time.perf_counter() - t0:.1f} s")
        else:
            features.fit(X)
            Z = None
        return Z, int(features.n_features_out_)

    def _check_preconditioner_rank(self, D):
        """InvalidParameterError unless ``preconditioner_rank`` fits the D columns of the features."""
        if self.preconditioner_rank is not None and self.preconditioner_rank > D:
            raise InvalidParameterError(
                f"The 'preconditioner_rank' parameter of {type(self).__name__} must be at most the number of "
                f"feature columns ({D}); got {self.preconditioner_rank}."
            )

    def _fit_cg(self, features, Z, Y, sample_weight, n_threads):
        self._check_preconditioner_rank(Z.shape[1])
        n_rows = Z.shape[0]
        # Identical feature rows (binning of integer or categorical data) as
        # one weighted row each: the same solution, cheaper products.
        Z, Y, sample_weight, entries = merged_problem(Z, Y, sample_weight)
        if Z.shape[0] < n_rows:
            self._log(f"CG on {Z.shape[0]} distinct feature rows of {n_rows} (identical rows merged)")
        ops = make_products(Z, n_threads, entries)
        try:
            result = cg_ridge(
                ops,
                Y,
                sample_weight,
                float(self.alpha),
                fit_intercept=self.fit_intercept,
                tol=float(self.tol),
                max_iter=self.max_iter,
                log=self._log if self.verbose else None,
                preconditioner=self.preconditioner,
                nystrom_rank=self.preconditioner_rank,
                memory_budget=int(self.preconditioner_memory),
            )
        finally:
            ops.close()
        coef, intercept = result.coef, result.intercept
        if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
            raise ValueError(
                f"{type(self).__name__}: the CG solution overflowed float64: the features or the targets "
                "are too large in magnitude (values of about 1e154 or more square to infinity). Rescale X "
                "and y, e.g. with sklearn.preprocessing.StandardScaler, before fitting."
            )
        return _Fit("cg", coef.astype(Z.dtype, copy=False), intercept.astype(Z.dtype), result.n_iter,
                    result.residual, None, features, result.preconditioner)

    def _chunks(self, n_rows, n_features, itemsize):
        step = self.chunk_size or _default_chunk_rows(n_features, itemsize)
        for start in range(0, n_rows, step):
            yield start, min(start + step, n_rows)

    def _fit_cholesky(self, features, X, Z, Y, sample_weight, D, n_threads, t0):
        """Accumulate the sufficient statistics chunk by chunk (Z None: transform X), factor, solve.

        float32 features are multiplied in float32; if their Gram plus alpha·I
        is then not positive definite (float32 rounding above alpha), the
        statistics are accumulated again in float64 before falling back to
        the minimum-norm solution.
        """
        try:
            sol = self._cholesky_solution(features, X, Z, Y, sample_weight, D, n_threads, t0, None)
        except np.linalg.LinAlgError:
            self._log("float32 Gram not positive definite: accumulating it again in float64")
            sol = self._cholesky_solution(features, X, Z, Y, sample_weight, D, n_threads, t0, np.float64)
        # A direct solve counts as one iteration (sklearn's convention that
        # an estimator with max_iter reports n_iter_ >= 1).
        return _Fit("cholesky", sol.coef.astype(sol.dtype), sol.intercept.astype(sol.dtype),
                    np.ones(Y.shape[1], dtype=np.intp), None, sol, features)

    def _cholesky_solution(self, features, X, Z, Y, sample_weight, D, n_threads, t0, accumulate_dtype):
        """One pass of ``_fit_cholesky``; ``accumulate_dtype`` None: the features' own dtype."""
        N, K = Y.shape
        acc = None
        itemsize = 4 if X.dtype == np.float32 else 8
        chunks = list(self._chunks(N, D, itemsize))
        for i, (s, e) in enumerate(chunks):
            if Z is None:
                Zb = features.transform(X[s:e])
                owned = True
            else:
                Zb = Z[s:e]
                owned = False
            if sp.issparse(Zb):
                Zb = Zb.toarray()
                owned = True
            if accumulate_dtype is not None and Zb.dtype != accumulate_dtype:
                Zb, owned = Zb.astype(accumulate_dtype), True
            if acc is None:
                acc = StatisticsAccumulator(D, K, Zb.dtype, self.fit_intercept, n_threads)
            acc.add(Zb, Y[s:e], None if sample_weight is None else sample_weight[s:e], owned=owned)
            del Zb
            if self.verbose and (i + 1 == len(chunks) or (i + 1) % max(1, len(chunks) // 20) == 0):
                self._log(f"Gram: {i + 1}/{len(chunks)} chunks ({e} rows), elapsed {time.perf_counter() - t0:.1f} s")
        # The statistics are not kept: factor in their Gram's memory.  A
        # float32 Gram that fails raises, to be accumulated again in float64.
        singular = "raise" if acc.dtype == np.float32 else "min_norm"
        sol = acc.statistics().solve(float(self.alpha), overwrite=True, singular=singular)
        if accumulate_dtype is not None:
            sol = dataclasses.replace(sol, dtype=np.dtype(X.dtype if Z is None else Z.dtype))
        return sol

    # ------------------------------------------------------------ prediction
    def _features_chunks(self, X):
        """Yield (start, stop, Z block) for the rows of validated X."""
        if getattr(self, "features_", None) is None:  # fitted state, not the parameter
            yield 0, X.shape[0], X
            return
        D = int(self.features_.n_features_out_)
        itemsize = 4 if X.dtype == np.float32 else 8
        for s, e in self._chunks(X.shape[0], D, itemsize):
            yield s, e, self.features_.transform(X[s:e])

    def _decision(self, X):
        check_is_fitted(self, "coef_")
        X = validate_X(self, X, reset=False)
        self._runtime_params("chunk_size")
        coef = self.coef_.reshape(-1, self.coef_.shape[-1])
        K = coef.shape[0]
        out = np.empty((X.shape[0], K), dtype=coef.dtype)
        n_threads = effective_n_threads(self.n_jobs)
        for s, e, Zb in self._features_chunks(X):
            # Row-independent: a row's prediction has the same bits in any chunk, on any worker.
            out[s:e] = row_products(Zb, coef.T, n_threads)
        out += np.asarray(self.intercept_, dtype=out.dtype)  # scalar, (1,) or (K,): broadcasts
        return X, out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _pm1_targets(y, name):
    """Return (binarizer, Y): the ±1 target columns of labels y (one column for two classes).

    Raises a ValueError naming ``name`` when y holds fewer than two classes.
    """
    check_classification_targets(y)
    binarizer = LabelBinarizer(pos_label=1, neg_label=-1)
    if np.ndim(y) != 1:  # multilabel indicator: the binarizer's own transform
        Y = np.asarray(binarizer.fit_transform(y), dtype=np.float64)
    else:
        # Fitted on the classes alone; the N × K matrix is built from
        # np.unique's inverse, in the binarizer's columns and signs (a third
        # of its transform's time on 522000 labels).
        classes, inverse = np.unique(y, return_inverse=True)
        binarizer.fit(classes)
        inverse = inverse.reshape(-1)
        if len(classes) == 2:  # one column: +1 for the second class
            Y = np.where(inverse == 1, 1.0, -1.0)[:, None]
        else:
            Y = np.full((len(inverse), len(classes)), -1.0)
            Y[np.arange(len(inverse)), inverse] = 1.0
    if len(binarizer.classes_) < 2:
        raise ValueError(
            f"{name} needs samples of at least 2 classes in the data, "
            f"but the data contains only one class: {binarizer.classes_[0]!r}"
        )
    return binarizer, Y


def _validate_Xy(est, X, y, sample_weight):
    X, y = validate_X_y(est, X, y, y_numeric=isinstance(est, RegressorMixin))
    if isinstance(est, ClassifierMixin) and y.ndim == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)  # a column vector is not a multilabel target
    return X, y, check_sample_weight(sample_weight, X)


# ---------------------------------------------------------------- partial_fit
# Exact incremental fitting (issue 13): each call merges the block's
# RidgeStatistics into the estimator's and re-solves, so after any sequence
# of blocks the model is the one ``fit`` gives on their concatenation.
# This block is owned by the Dask/partial_fit work; the solver paths above
# are not touched by it.

_BINNING_PARTIAL_FIT = (
    "{name}.partial_fit does not support sparse feature maps such as {features}: their "
    "vocabulary of occupied bins grows with every block (a bin first seen in a later block is a "
    "new column, changing every earlier row's features), and their CG solve needs all the rows "
    "at every iteration, so no fixed-size statistics can be merged. Fit on all rows with "
    "{name}.fit, or use RandomFourierFeatures, whose width is fixed by the first block."
)


class _PartialFitMixin:
    """``partial_fit`` machinery shared by Ridge and RidgeClassifier (exact, by merged statistics).

    The running statistics live in ``_statistics_`` (a ``RidgeStatistics``);
    its trailing underscore makes ``fit`` (``fit_context``) drop it, so a
    ``fit`` ends any accumulation and the next ``partial_fit`` starts anew.
    """

    def _partial_fit_transaction(self, update):
        """Validate the parameters, run ``update()``; on any exception restore the estimator's state."""
        self._validate_params()
        if self.solver == "cg":
            raise ValueError(
                f"{type(self).__name__}.partial_fit solves from merged Gram statistics (Cholesky); "
                f"solver='cg' cannot be updated incrementally. Use solver='auto' or 'cholesky'."
            )
        saved = dict(vars(self))
        try:
            update()
        except BaseException:
            vars(self).clear()
            vars(self).update(saved)
            raise
        return self

    def _partial_validate(self, X, y, sample_weight):
        """Validate a block; on the first call fix n_features_in_ and the feature map."""
        first = getattr(self, "_statistics_", None) is None
        if first:
            X, y = validate_X_y(self, X, y, y_numeric=isinstance(self, RegressorMixin))
        else:
            # Later blocks: X must match the first block's width (and names).
            X = validate_X(self, X, reset=False)
            if sp.issparse(y):
                raise TypeError("A sparse y was passed, but the targets must be dense; use y.toarray().")
            y = check_array(y, ensure_2d=False, dtype=np.float64 if isinstance(self, RegressorMixin) else None,
                            input_name="y")
            check_consistent_length(X, y)
        if isinstance(self, ClassifierMixin) and y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)
        return first, X, y, check_sample_weight(sample_weight, X)

    def _partial_update(self, first, X, Y, sample_weight):
        """Merge the statistics of block (X, Y) into the running ones and re-solve; return the ``_Fit``."""
        if first:
            if self.features is not None and getattr(self.features, "_sparse_output", False):
                raise ValueError(_BINNING_PARTIAL_FIT.format(name=type(self).__name__,
                                                             features=type(self.features).__name__))
            features = None if self.features is None else clone(self.features).fit(X)
        else:
            features = getattr(self, "features_", None)
        D = X.shape[1] if features is None else int(features.n_features_out_)
        stats = self._block_statistics(features, X, Y, sample_weight, D)
        if not first:
            if stats.n_targets != self._statistics_.n_targets:
                raise ValueError(
                    f"y has {stats.n_targets} target(s) in this partial_fit block but "
                    f"{self._statistics_.n_targets} in the earlier ones"
                )
            stats = self._statistics_.merge(stats)
        sol = stats.solve(float(self.alpha))
        self._statistics_ = stats
        return _Fit("cholesky", sol.coef.astype(sol.dtype), sol.intercept.astype(sol.dtype),
                    np.ones(stats.n_targets, dtype=np.intp), None, sol, features)

    def _block_statistics(self, features, X, Y, sample_weight, D):
        """RidgeStatistics of one block, its features made a chunk at a time (as ``fit`` streams them)."""
        n_threads = effective_n_threads(self.n_jobs)
        acc = None
        itemsize = 4 if X.dtype == np.float32 else 8
        for s, e in self._chunks(X.shape[0], D, itemsize):
            Zb = X[s:e] if features is None else features.transform(X[s:e])
            owned = features is not None
            if sp.issparse(Zb):
                Zb, owned = Zb.toarray(), True
            if acc is None:
                acc = StatisticsAccumulator(D, Y.shape[1], Zb.dtype, self.fit_intercept, n_threads)
            acc.add(Zb, Y[s:e], None if sample_weight is None else sample_weight[s:e], owned=owned)
        return acc.statistics()


class Ridge(RegressorMixin, _PartialFitMixin, _BaseRidge):
    """Ridge regression on features, solved by Cholesky or conjugate gradient.

    Minimises ``Σ_i w_i (z_iᵀβ + b − y_i)² + alpha·‖β‖²`` where z_i is the
    i-th row of X, or of ``features.transform(X)`` when ``features`` is
    given.  The intercept b is not penalised.

    Parameters
    ----------
    alpha : float, default=1.0
        Regularisation strength, >= 0.
    features : randfeat feature map or None, default=None
        E.g. ``RandomFourierFeatures(5000)``.  It is cloned and fitted on X
        in ``fit`` (attribute ``features_``); X is then transformed a chunk
        of rows at a time, so the full feature matrix is never held when the
        features are dense (their Gram matrix is accumulated chunk by
        chunk).  Sparse features (binning) are materialised as CSR and
        solved by CG.  None: X itself is the feature matrix.
    solver : {"auto", "cholesky", "cg"}, default="auto"
        ``"cholesky"``: Gram matrix by syrk + Cholesky (dense Z; sparse Z is
        densified a chunk at a time).  ``"cg"``: preconditioned conjugate
        gradient, never forming ZᵀZ, the targets sharing one Krylov space
        (block CG: with many classes, several times fewer iterations than
        one CG per class); see ``preconditioner``.  On sparse Z whose rows
        repeat (at least a fifth of them: binning of integer or categorical
        data) CG solves the same problem on the distinct rows, each weighted
        by its total sample weight.  ``"auto"``: Cholesky for dense Z with at
        most 10000 columns, CG otherwise and for all sparse Z.  The choice
        made is in ``solver_``.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept (Z is centred implicitly: a sparse Z
        stays sparse).
    tol : float, default=1e-6
        CG stops when every target has ‖r‖ <= tol·‖Zᵀy‖ on the normal
        equations (0 means rounding level).  For float32 data, a tol below
        ~1e-6 may not be reachable.
    max_iter : int or None, default=None
        CG iteration limit; None means 10·D, clipped to [100, 10000].
        A ``ConvergenceWarning`` names the residual reached if it is hit.
    preconditioner : {"auto", "jacobi", "block", "nystrom"}, default="auto"
        CG's preconditioner.  "jacobi": the exact inverse of the block of
        the heaviest columns of ZᵀZ + alpha·I, its diagonal elsewhere;
        "block": the same block, one scale (1 / the largest remaining
        diagonal entry) elsewhere — on binning features up to 1.9× fewer
        iterations than "jacobi"; "nystrom": a randomized Nyström
        approximation of ZᵀZ (Frangella, Tropp & Udell, 2023), built once
        per fit for all targets, whose iteration count stays low as alpha
        falls (needs alpha > 0), but whose build and rank-r products cost
        more than they save on the problems measured (DESIGN.md, "Hard
        cases"); "auto": "block" on one-hot block features (binning),
        "jacobi" otherwise — and where that is a scaled identity (no block)
        and there are at most half as many rows as feature columns, CG on
        the dual (ZZᵀ + alpha·I, N × K iterates instead of D × K; reported
        in ``preconditioner_``).
    preconditioner_rank : int or None, default=None
        Rank of the Nyström preconditioner, at most the number of feature
        columns.  None: grown by doubling from 64 until its smallest kept
        eigenvalue is at most 10·alpha, within ``preconditioner_memory``.
    preconditioner_memory : int, default=2**30
        Bytes the Nyström build may hold (about 32·D·rank at its peak); an
        explicit rank that does not fit raises ``MemoryError`` before
        anything is allocated.
    chunk_size : int or None, default=None
        Rows per chunk for the Gram accumulation and for transforming with
        ``features``.  None: as many rows as fit in 64 MiB of features.
    verbose : int, default=0
        If > 0, print progress (chunks, CG iterations and residuals,
        elapsed time) on stderr.
    n_jobs : int or None, default=None
        Threads for the sparse kernels and BLAS (None or -1: all cores).
        Results do not depend on it.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_out,) or (n_targets, n_features_out)
        Weights on the features (on X's columns when ``features`` is None).
    intercept_ : float or ndarray of shape (n_targets,)
    n_iter_ : ndarray of shape (n_targets,)
        CG iterations (the targets iterate together, so the same number for
        each); 1 for Cholesky (one direct solve).
    relative_residual_ : ndarray of shape (n_targets,) or None
        CG relative residual reached per target; None for Cholesky.
    solver_ : str
        Solver used ("cholesky" or "cg").
    preconditioner_ : str or None
        CG's preconditioner, e.g. "Jacobi" or "randomized Nyström, rank r
        (sketch ℓ)"; None for Cholesky.
    noise_variance_ : float, ndarray of shape (n_targets,), or None
        Estimated noise variance σ² = Σ w r² / (N − dof) with effective
        degrees of freedom dof = tr(Z_c (Z_cᵀWZ_c + αI)⁻¹ Z_cᵀ W) (+1 for
        the intercept).  Cholesky only (None for CG).
    features_ : feature map
        The fitted clone of ``features`` (only when ``features`` is given).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has string column names.

    Notes
    -----
    Bayesian reading: the coefficients are the posterior mean of Bayesian
    linear regression in feature space with prior β ~ N(0, σ²/α·I) and noise
    variance σ²; ``predict(X, return_std=True)`` returns its posterior
    predictive standard deviation.  With random Fourier features this is the
    Gaussian process with kernel (σ²/α)·k.

    Precision: float32 data gives float32 features, coefficients and
    predictions.  CG iterates are float32 with products and inner products
    accumulated in float64; the Cholesky path multiplies float32 chunks in
    float32 but sums them, factorises and solves in float64.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import Ridge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 3)); y = X @ [1.0, 2.0, 3.0]
    >>> Ridge(alpha=1e-3).fit(X, y).coef_.round(2)
    array([1., 2., 3.])
    """

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights (w_i in the objective).

        Returns
        -------
        self : Ridge
        """
        if is_dask_array(X):  # statistics per block on the workers, solve here
            return _dask.fit_ridge(self, X, y, sample_weight)
        X, y, sample_weight = _validate_Xy(self, X, y, sample_weight)
        Y = np.asarray(y, dtype=np.float64)
        y_shape = "1d" if Y.ndim == 1 else ("column" if Y.shape[1] == 1 else "2d")
        Y = Y.reshape(Y.shape[0], -1)
        self._store_fit(self._fit_targets(X, Y, sample_weight), y_shape)
        return self

    def partial_fit(self, X, y, sample_weight=None):
        """Update the model with a block of rows: exactly ``fit`` on all the blocks seen so far.

        Each call adds the block's sufficient statistics (centred Gram
        matrix, cross-products, means; merged exactly, see ``_stats.py``) to
        those of the earlier blocks and solves again by Cholesky, so the
        model predicts after every call and, after any sequence of blocks,
        equals ``fit`` on their concatenation (to rounding, ~1e-12
        relative).  Memory: the D × D Gram matrix of the features, whatever
        the number of rows.

        The first call fixes ``n_features_in_``, the number of targets, and,
        when ``features`` is given, the feature map: ``features`` is cloned
        and fitted on the first block (a Fourier map reads only its width
        and dtype; with ``gamma="scale"`` also its variance, so that gamma is
        the first block's).  Sparse feature maps (binning) are refused: their
        vocabulary of occupied bins grows with the blocks and their CG
        solve needs every row, so use ``fit``.  ``alpha`` may change between
        calls (the statistics do not depend on it).  ``fit`` discards the
        accumulated statistics: a ``partial_fit`` after a ``fit`` starts
        anew.  ``solver="cg"`` is refused.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            The same number of targets in every block.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights; each block must have some positive weight.

        Returns
        -------
        self : Ridge
        """

        def update():
            first, Xv, yv, w = self._partial_validate(X, y, sample_weight)
            Y = np.asarray(yv, dtype=np.float64)
            y_shape = "1d" if Y.ndim == 1 else ("column" if Y.shape[1] == 1 else "2d")
            if not first and y_shape != self._partial_y_shape:
                raise ValueError(f"y is {y_shape} in this partial_fit block but {self._partial_y_shape} "
                                 f"in the first one; give y the same shape in every block")
            fit = self._partial_update(first, Xv, Y.reshape(Y.shape[0], -1), w)
            self._partial_y_shape = y_shape
            self._store_fit(fit, y_shape)

        return self._partial_fit_transaction(update)

    def predict(self, X, return_std=False):
        """Predict with the fitted model.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the posterior predictive standard deviation of the
            latent function f(x) = z(x)ᵀβ + b (Bayesian reading in the class
            notes), **without** the noise term: like
            ``GaussianProcessRegressor`` with the noise given as its
            ``alpha``.  Add ``noise_variance_`` to its square for the
            predictive std of a new observation.  With an intercept, b has
            a flat prior, which adds σ²/Σw to the variance.  Needs the
            Cholesky factor (``solver_ == "cholesky"``); with several
            targets the factor is shared and the std has one column per
            target (σ² is estimated per target).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        y_std : ndarray, same shape as y_pred
            Only when ``return_std`` is True.
        """
        if is_dask_array(X):  # lazy, block by block on the workers
            return _dask.predict_blocks(self, X, "predict", return_std=return_std)
        if return_std:
            check_is_fitted(self, "coef_")
            if self._solution is None:
                raise ValueError(
                    f"return_std=True needs the Cholesky factor, but this model was fitted with "
                    f"solver_={self.solver_!r}. Fit with solver='cholesky' (dense features) to get "
                    f"predictive standard deviations."
                )
        X, out = self._decision(X)
        if self.coef_.ndim == 1:
            out = out[:, 0]
        if not return_std:
            return out
        return out, self._predictive_std(X, out.shape)

    def _predictive_std(self, X, shape):
        var = np.empty((X.shape[0], shape[1] if len(shape) == 2 else 1))
        for s, e, Zb in self._features_chunks(X):
            var[s:e] = self._solution.predictive_variance(Zb)
        std = np.sqrt(np.maximum(var, 0.0)).astype(self.coef_.dtype)
        return std[:, 0] if len(shape) == 1 else std.reshape(shape)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class RidgeClassifier(ClassifierMixin, _PartialFitMixin, _BaseRidge):
    """Classifier by ridge regression on ±1 targets (one-vs-rest), on features.

    Each class gets a target column of +1 (its samples) and −1 (the
    others); all columns are solved together (one CG pass over Z per
    iteration serves every class, or one shared Cholesky factor).  Binary
    problems use a single column.  This is the least-squares classifier of
    Rahimi & Recht's "Fourier+LS" / "Binning+LS".

    Parameters
    ----------
    alpha, features, solver, fit_intercept, tol, max_iter : see Ridge
        As in :class:`randfeat.Ridge`.
    preconditioner, preconditioner_rank, preconditioner_memory, chunk_size, verbose, n_jobs : see Ridge
        As in :class:`randfeat.Ridge`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (n_features_out,) or (n_classes, n_features_out)
        One row of weights, 1-D, for two classes (as scikit-learn >= 1.9).
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : ndarray
        CG iterations per target column (the same for each: they iterate
        together); 1 for Cholesky.
    relative_residual_ : ndarray or None
    solver_ : str
    preconditioner_ : str or None
    features_ : feature map (only when ``features`` is given)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RidgeClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = [0, 0, 1, 1]
    >>> RidgeClassifier(alpha=1e-3).fit(X, y).predict([[0.2], [2.8]])
    array([0, 1])
    """

    #: Subclasses that choose hyper-parameters by refitting (RidgeClassifierCV)
    #: cannot update from a block: ``partial_fit`` is then absent.
    _supports_partial_fit = True

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X, y, sample_weight=None):
        """Fit one-vs-rest ridge regressions on ±1 targets.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) (or a label indicator matrix)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self : RidgeClassifier
        """
        if is_dask_array(X):  # statistics per block on the workers, solve here
            return _dask.fit_ridge(self, X, y, sample_weight)
        X, y, sample_weight = _validate_Xy(self, X, y, sample_weight)
        binarizer, Y = _pm1_targets(y, type(self).__name__)
        fit = self._fit_targets(X, Y, sample_weight)
        self._label_binarizer = binarizer
        self.classes_ = binarizer.classes_
        binary = Y.shape[1] == 1 and not binarizer.y_type_.startswith("multilabel")
        self._store_fit(fit, "binary" if binary else "2d")
        return self

    @available_if(lambda est: est._supports_partial_fit)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Update the classifier with a block of rows: exactly ``fit`` on all the blocks seen so far.

        As :meth:`randfeat.Ridge.partial_fit` (merged statistics, Cholesky
        re-solve after every block, first block fixes the feature map,
        binning refused), with the ±1 target columns of ``classes``.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Labels, each one of ``classes``.
        classes : array-like of shape (n_classes,), default=None
            Every class of the whole data, required on the first call (as in
            scikit-learn) since a block need not hold them all; later calls
            may omit it or repeat it unchanged.  At least 2 classes.  After
            ``fit`` it defaults to the fitted ``classes_``, but the
            accumulation starts anew: ``fit`` keeps no statistics.
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self : RidgeClassifier
        """

        def update():
            first = getattr(self, "_statistics_", None) is None
            if first:
                if classes is None and getattr(self, "_label_binarizer", None) is not None \
                        and self._label_binarizer.y_type_ in ("binary", "multiclass"):
                    classes_given = self.classes_  # after fit: the fitted classes, as scikit-learn
                else:
                    classes_given = classes
                if classes_given is None:
                    raise ValueError("classes must be passed on the first call to partial_fit "
                                     "(every class of the whole data; a block need not hold them all)")
                binarizer = LabelBinarizer(pos_label=1, neg_label=-1).fit(np.asarray(classes_given))
                if len(binarizer.classes_) < 2:
                    raise ValueError(f"classes must hold at least 2 classes, got {binarizer.classes_.tolist()!r}")
                if binarizer.y_type_ not in ("binary", "multiclass"):
                    raise ValueError(f"partial_fit needs classes as a 1-D array of labels, got {binarizer.y_type_}")
            else:
                binarizer = self._label_binarizer
                if classes is not None and not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
                    raise ValueError(f"classes={np.unique(classes).tolist()!r} differs from the first call's "
                                     f"{self.classes_.tolist()!r}")
            _, Xv, yv, w = self._partial_validate(X, y, sample_weight)
            check_classification_targets(yv)
            if yv.ndim != 1:
                raise ValueError("partial_fit needs y as a 1-D array of labels (multilabel targets: use fit)")
            unknown = np.setdiff1d(yv, binarizer.classes_)
            if unknown.size:
                raise ValueError(f"y has labels {unknown[:5].tolist()!r} not in classes={binarizer.classes_.tolist()!r}")
            Y = np.asarray(binarizer.transform(yv), dtype=np.float64)
            fit = self._partial_update(first, Xv, Y, w)
            self._label_binarizer = binarizer
            self.classes_ = binarizer.classes_
            self._store_fit(fit, "binary" if len(binarizer.classes_) == 2 else "2d")

        return self._partial_fit_transaction(update)

    def decision_function(self, X):
        """Return the ±1-regression scores.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
            Positive for the class (binary: for ``classes_[1]``).
        """
        if is_dask_array(X):  # lazy, block by block on the workers
            return _dask.predict_blocks(self, X, "decision_function")
        _, out = self._decision(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        """Return the class with the highest score (binary: score > 0).

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        if is_dask_array(X):  # lazy, block by block on the workers
            return _dask.predict_blocks(self, X, "predict")
        scores = self.decision_function(X)
        if self._label_binarizer.y_type_.startswith("multilabel"):
            return self._label_binarizer.inverse_transform(np.where(scores > 0, 1, -1))
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags
