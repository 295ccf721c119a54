"""The one fit pipeline of ridge on features: where Z comes from, which solver, the accumulate loop, the result.

Every fit — ``Ridge.fit``, each block of ``partial_fit``, each row block of a
Dask fit, ``RidgeCV``'s decompositions — goes through these pieces:

* ``FeatureSource`` — stream or materialise, decided once: Z is X itself,
  or a fitted map's features, materialised when the map declares a CSR
  output (cheap to hold; CG needs every row at every iteration) and
  otherwise streamed chunk by chunk, never held whole;
* ``row_chunks`` — the chunk-row rule (``chunk_size``, or 64 MiB of Z);
* ``choose_solver`` — the "auto" rule: Cholesky for dense Z of at most
  ``CHOLESKY_MAX_FEATURES`` columns, CG otherwise;
* ``accumulate`` — the one loop that adds chunks of Z (of one or several
  maps over the same X, to the statistics of one or several groups of rows)
  into ``StatisticsAccumulator``\\ s;
* ``fit`` / ``solve_cholesky`` / ``solve_cg`` — the solve, returning a
  ``FitResult`` (nothing is set on any estimator).

Why 10000 columns for "auto": the Gram matrix takes 8·D² bytes (800 MB at
D = 10000) and its factorisation D³/3 flops (~5 s here); beyond that width
memory, not speed, decides, and CG needs only O(N·K + D·K) on top of Z.
"""

import dataclasses
import time
from typing import Callable, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from .._core.protocols import MapCapability, OutputKind
from .._core.threads import effective_n_threads
from .._linalg.products import prepare_problem
from .cg_path import DUAL_DESCRIPTION, cg_ridge
from .cholesky import RidgeSolution
from .dual import (DUAL_RATIO, FACTOR_MAX_ROWS, SOLVER_NAME as DUAL_SOLVER, dual_cholesky, dual_cholesky_pays,
                   dual_rows)
from .nystrom_preconditioner import DEFAULT_MEMORY_BUDGET
from .stats import StatisticsAccumulator

#: Widest dense Z for which ``solver="auto"`` picks Cholesky (see module doc).
CHOLESKY_MAX_FEATURES = 10_000

#: Default memory budget of one chunk of features (``chunk_size=None``):
#: 64 MiB of Z rows, enough rows for syrk to run at full speed for any
#: D <= 10000 (>= 800 rows in float64) while keeping the peak memory of a
#: streaming fit to a few hundred MB above the Gram matrix.
DEFAULT_CHUNK_BYTES = 64 * 2**20

SOLVERS = ("auto", "cg", "cholesky")

CG_OVERFLOW = (
    "{owner}: the CG solution overflowed float64: the features or the targets are too large in magnitude "
    "(values of about 1e154 or more square to infinity). Rescale X and y, e.g. with "
    "sklearn.preprocessing.StandardScaler, before fitting."
)


@dataclasses.dataclass(frozen=True)
class RidgeSettings:
    """The parameters of a ridge fit, as the pipeline reads them (an estimator's, validated).

    Attributes
    ----------
    owner : str
        The estimator's class name, for messages.
    alpha : float
    solver : {"auto", "cholesky", "cg"}
    fit_intercept : bool
    tol : float
    max_iter : int or None
    preconditioner : str
    preconditioner_rank : int or None
    preconditioner_memory : int
    chunk_size : int or None
    n_jobs : int or None
    log : callable or None
        Called with progress messages (verbose mode), else None.
    """

    owner: str
    alpha: float = 1.0
    solver: str = "auto"
    fit_intercept: bool = True
    tol: float = 1e-6
    max_iter: int | None = None
    preconditioner: str = "auto"
    preconditioner_rank: int | None = None
    preconditioner_memory: int = DEFAULT_MEMORY_BUDGET
    chunk_size: int | None = None
    n_jobs: int | None = None
    log: Callable | None = None

    def check_preconditioner_rank(self, D):
        """InvalidParameterError unless ``preconditioner_rank`` fits the D columns of the features."""
        if self.preconditioner_rank is not None and self.preconditioner_rank > D:
            raise InvalidParameterError(
                f"The 'preconditioner_rank' parameter of {self.owner} must be at most the number of "
                f"feature columns ({D}); got {self.preconditioner_rank}."
            )


class FitResult(NamedTuple):
    """What a solver produced, before it becomes an estimator's fitted attributes."""

    solver: str
    coef: np.ndarray  # (K, D), the features' dtype
    intercept: np.ndarray  # (K,)
    n_iter: np.ndarray
    residual: np.ndarray | None
    solution: RidgeSolution | None  # the Cholesky solution (factor, noise), None for CG
    features: object  # the fitted feature map, or None
    preconditioner: str | None = None  # CG's preconditioner, None for Cholesky


# ------------------------------------------------------------------ the rows
def chunk_rows(n_features, itemsize, chunk_size=None):
    """Rows per chunk: ``chunk_size``, or as many rows of ``n_features`` values as fit in 64 MiB."""
    return chunk_size or max(64, DEFAULT_CHUNK_BYTES // max(1, n_features * itemsize))


def row_chunks(n_rows, n_features, itemsize, chunk_size=None):
    """Yield (start, stop) over ``n_rows`` rows in chunks of ``chunk_rows``."""
    step = chunk_rows(n_features, itemsize, chunk_size)
    for start in range(0, n_rows, step):
        yield start, min(start + step, n_rows)


def choose_solver(solver, sparse, n_features):
    """Resolve ``solver="auto"``: Cholesky for dense Z of at most ``CHOLESKY_MAX_FEATURES`` columns, else CG."""
    if solver != "auto":
        return solver
    return "cholesky" if not sparse and n_features <= CHOLESKY_MAX_FEATURES else "cg"


def held_whole(features, X):
    """True if a fitted map's features of X are made once and held, not streamed chunk by chunk.

    Sparse features (binning) are cheap to hold and solved by CG; a map
    that is not row-independent must see all the rows in one call.
    """
    return (features.output_kind_for(sp.issparse(X)) is OutputKind.CSR
            or not features.has(MapCapability.ROW_INDEPENDENT))


class FeatureSource:
    """The rows a solver reads: X itself, a map's features materialised, or a map's features streamed from X.

    Parameters
    ----------
    X : validated ndarray or CSR matrix (N × d), or None when Z is given
    features : fitted feature map or None
    Z : ndarray, CSR matrix or None
        The materialised feature matrix (X itself when ``features`` is None);
        None when the features are streamed from X chunk by chunk.
    """

    def __init__(self, X, features, Z):
        self.X, self.features, self.Z = X, features, Z
        rows = X if Z is None else Z
        self.n_features = rows.shape[1] if features is None else int(features.n_features_out_)

    @classmethod
    def fit(cls, template, X, log=None, t0=None):
        """Fit a clone of the map ``template`` on X (None: X is Z) and decide: stream or materialise."""
        if template is None:
            return cls(X, None, X)
        features = clone(template)
        # A map declared CSR before its fit (binning) makes its features in
        # the fit's own pass over the rows; any other is decided once fitted.
        in_fit = features.output_kind_for(sp.issparse(X)) is OutputKind.CSR
        Z = features._fit_validated(X, return_features=in_fit)
        source = cls.of_fitted(features, X) if Z is None else cls(X, features, Z.tocsr() if sp.issparse(Z) else Z)
        if log is not None and source.sparse:
            log(f"materialised {source.Z.shape[0]}x{source.Z.shape[1]} sparse features, nnz={source.Z.nnz}, "
                f"elapsed {time.perf_counter() - (t0 or 0.0):.1f} s")
        return source

    @classmethod
    def of_fitted(cls, features, X):
        """The source of an already fitted map on X (materialised when ``held_whole``)."""
        if held_whole(features, X):
            Z = features._transform_validated(X)
            return cls(X, features, Z.tocsr() if sp.issparse(Z) else Z)
        return cls(X, features, None)

    @property
    def streamed(self):
        """True when Z is made from X chunk by chunk (a dense map's features)."""
        return self.Z is None

    @property
    def sparse(self):
        """True when Z is a materialised sparse matrix."""
        return self.Z is not None and sp.issparse(self.Z)

    @property
    def dtype(self):
        """The features' dtype (X's float dtype)."""
        return self.X.dtype if self.Z is None else self.Z.dtype

    @property
    def n_rows(self):
        """N."""
        return (self.X if self.Z is None else self.Z).shape[0]

    def rows(self, index):
        """The source restricted to some rows (of X when the features are streamed from it, else of Z)."""
        if self.Z is None:
            return FeatureSource(self.X[index], self.features, None)
        return FeatureSource(None, self.features, self.Z[index])

    def materialised(self):
        """Z as one matrix (a streamed map's features made now: N × D memory)."""
        return self.features._transform_validated(self.X) if self.Z is None else self.Z

    def chunks(self, chunk_size=None):
        """Yield (start, stop) of the chunks this source is read in (``row_chunks``)."""
        itemsize = 4 if self.dtype == np.float32 else 8
        return row_chunks(self.n_rows, self.n_features, itemsize, chunk_size)

    def dense_blocks(self, chunk_size=None):
        """Yield (start, stop, dense Z block, owned): ``owned`` when the block is a fresh array the caller may overwrite."""
        for s, e in self.chunks(chunk_size):
            if self.Z is None:
                Zb, owned = self.features._transform_validated(self.X[s:e]), True
            else:
                Zb, owned = self.Z[s:e], False
            if sp.issparse(Zb):
                Zb, owned = Zb.toarray(), True
            yield s, e, Zb, owned


# ---------------------------------------------------------- the accumulate loop
def accumulate(blocks, Y, w, n_features, fit_intercept, n_threads, *, groups=None, n_groups=1, dtype=None,
               progress=None):
    """Add blocks of rows into ``RidgeStatistics``: the one accumulate loop of every pipeline.

    Parameters
    ----------
    blocks : iterable of (start, stop, Zbs, owned)
        Zbs is one dense block (n × D) or a list of them, one per map over
        the same rows (a gamma path's maps share the pass over X).
    Y : ndarray (N, K), float64
    w : ndarray (N,) float64, or None
    n_features : int
    fit_intercept : bool
    n_threads : int
    groups : ndarray (N,) of int, or None
        Each row's group (k-fold: its test fold): the statistics are kept
        per group.  None: one group.
    n_groups : int
    dtype : numpy dtype or None
        Accumulate in this dtype (float64 for a float32 Gram that failed);
        None: the blocks' own.
    progress : callable or None
        ``progress(i, stop)`` after the i-th block (1-based).

    Returns
    -------
    list of list of RidgeStatistics or None
        ``[map][group]`` (None for a group that received no row).
    """
    K = Y.shape[1]
    accs = None
    for i, (s, e, Zbs, owned) in enumerate(blocks, 1):
        Zbs = Zbs if isinstance(Zbs, list) else [Zbs]
        if accs is None:
            accs = [[None] * n_groups for _ in Zbs]
        for g, Zb in enumerate(Zbs):
            if dtype is not None and Zb.dtype != dtype:
                Zb, owned = Zb.astype(dtype), True
            for k in range(n_groups):
                if groups is None:
                    rows, Zk, Yk, wk, own = None, Zb, Y[s:e], None if w is None else w[s:e], owned
                else:
                    rows = np.flatnonzero(groups[s:e] == k)
                    if rows.size == 0:
                        continue
                    Zk, Yk, wk, own = Zb[rows], Y[s + rows], w[s + rows], True
                if accs[g][k] is None:
                    accs[g][k] = StatisticsAccumulator(n_features, K, Zk.dtype, fit_intercept, n_threads)
                accs[g][k].add(Zk, Yk, wk, owned=own)
        if progress is not None:
            progress(i, e)
    return [[None if acc is None else acc.statistics() for acc in row] for row in (accs or [[None] * n_groups])]


def block_statistics(features, X, Y, w, fit_intercept, n_threads, chunk_size=None):
    """The ``RidgeStatistics`` of one block of rows, its features made a chunk at a time (as ``fit`` streams them).

    ``partial_fit`` merges these block by block; a Dask fit makes one per
    row block on the workers.

    Parameters
    ----------
    features : fitted feature map or None
    X : validated ndarray or CSR matrix
    Y : ndarray (n, K), float64
    w : ndarray (n,) float64, or None
    fit_intercept : bool
    n_threads : int
    chunk_size : int or None

    Returns
    -------
    RidgeStatistics
    """
    source = FeatureSource(X, None, X) if features is None else FeatureSource.of_fitted(features, X)
    return accumulate(source.dense_blocks(chunk_size), Y, w, source.n_features, fit_intercept, n_threads)[0][0]


def feature_chunks(features, X, chunk_size=None):
    """Yield (start, stop, Z block) of a fitted map's features of validated X (X itself for no map), a chunk at a time.

    A map that is not row-independent gives all the rows in one block.

    Parameters
    ----------
    features : fitted feature map or None
    X : validated ndarray or CSR matrix
    chunk_size : int or None
    """
    if features is None:
        yield 0, X.shape[0], X
        return
    if not features.has(MapCapability.ROW_INDEPENDENT):
        yield 0, X.shape[0], features._transform_validated(X)  # must see every row in one call
        return
    itemsize = 4 if X.dtype == np.float32 else 8
    for s, e in row_chunks(X.shape[0], int(features.n_features_out_), itemsize, chunk_size):
        yield s, e, features._transform_validated(X[s:e])


# ------------------------------------------------------------------ the solve
def fit(settings, template, X, Y, w):
    """Fit ridge on validated X and float64 targets Y (N × K): the in-memory pipeline, start to end.

    Parameters
    ----------
    settings : RidgeSettings
    template : feature map or None
        Cloned and fitted on X.
    X : validated ndarray or CSR matrix
    Y : ndarray (N, K), float64
    w : ndarray (N,) float64, or None

    Returns
    -------
    FitResult
    """
    t0 = time.perf_counter()
    n_threads = effective_n_threads(settings.n_jobs)
    source = FeatureSource.fit(template, X, settings.log, t0)
    solver = choose_solver(settings.solver, source.sparse, source.n_features)
    if (solver == "cholesky" and source.sparse and settings.alpha > 0 and source.n_features > CHOLESKY_MAX_FEATURES
            and source.n_rows * DUAL_RATIO <= source.n_features):
        # Sparse features wider than "auto"'s Cholesky limit and twice the rows:
        # the primal Gram (D × D, densified) is the wrong system; factor the
        # dual (``dual.py``).  Narrower ones keep the primal factor, which
        # ``predict(return_std=True)`` needs.
        result = solve_cg(settings, source.Z, source.features, Y, w, n_threads, dual="force",
                          owned=made_from(source.Z, X, source.features))
    elif solver == "cholesky":
        result = solve_cholesky(settings, source, Y, w, n_threads, t0)
    else:
        # CG needs Z at every iteration: materialise it (N × D memory).
        Z = source.materialised()
        result = solve_cg(settings, Z, source.features, Y, w, n_threads, owned=made_from(Z, X, source.features))
    if settings.log is not None:
        settings.log(f"fit done ({result.solver}), elapsed {time.perf_counter() - t0:.1f} s")
    return result


def made_from(Z, X, features):
    """True when Z is a sparse matrix a map made from X (not X, nor a view of its values): the fit's own, to free.

    Parameters
    ----------
    Z : ndarray or sparse matrix
        The features a CG fit reads.
    X : ndarray or sparse matrix
        The fit's input.
    features : feature map or None
        None: Z is X.

    Returns
    -------
    bool
    """
    if features is None or Z is X or not sp.issparse(Z):
        return False
    return not np.may_share_memory(Z.data, X.data if sp.issparse(X) else X)


def check_finite(coef, intercept, owner):
    """ValueError (the CG overflow message) unless the solution is finite."""
    if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
        raise ValueError(CG_OVERFLOW.format(owner=owner))


def cg_result(result, features, dtype, owner):
    """The ``FitResult`` of a ``CGResult`` whose features had ``dtype`` (overflow checked); "cg-dual" if CG ran in the dual."""
    check_finite(result.coef, result.intercept, owner)
    solver = "cg-dual" if result.preconditioner == DUAL_DESCRIPTION else "cg"
    return FitResult(solver, result.coef.astype(dtype, copy=False), result.intercept.astype(dtype), result.n_iter,
                     result.residual, None, features, result.preconditioner)


def solve_cg(settings, Z, features, Y, w, n_threads, dual="auto", owned=False):
    """Preconditioned block CG on a materialised Z (identical rows merged first), or its dual by Cholesky.

    ``dual``: "auto" — with ``solver="auto"`` and ``preconditioner="auto"``
    (an explicit preconditioner asks for CG), Cholesky on the dual when
    ``dual.dual_cholesky_pays`` says so; "force" — whenever the dual has at
    most ``dual.FACTOR_MAX_ROWS`` unknowns (``solver="cholesky"`` on sparse
    features wider than twice the rows).  Otherwise, and when the dual factor
    is not positive definite, CG.  ``owned``: Z is the fit's own features,
    whose one-hot values may be freed (``products.prepare_problem``).
    Returns a ``FitResult``.
    """
    settings.check_preconditioner_rank(Z.shape[1])
    n_rows, dtype = Z.shape[0], Z.dtype
    # Z's structure found once; identical feature rows (binning of integer
    # or categorical data) as one weighted row each: the same solution,
    # cheaper products.
    ops, Y, w = prepare_problem(Z, Y, w, n_threads, owned=owned)
    if ops.shape[0] < n_rows and settings.log is not None:
        settings.log(f"CG on {ops.shape[0]} distinct feature rows of {n_rows} (identical rows merged)")
    try:
        alpha = float(settings.alpha)
        if ((dual == "force" and dual_rows(ops) <= FACTOR_MAX_ROWS)
                or (settings.solver == "auto" and settings.preconditioner == "auto"
                    and dual_cholesky_pays(ops, alpha, Y.shape[1]))):
            try:
                coef, intercept = dual_cholesky(ops, Y, w, alpha, fit_intercept=settings.fit_intercept,
                                                n_threads=n_threads, log=settings.log)
                check_finite(coef, intercept, settings.owner)
                return FitResult(DUAL_SOLVER, coef.astype(dtype, copy=False), intercept.astype(dtype), None, None,
                                 None, features)
            except np.linalg.LinAlgError:
                if settings.log is not None:
                    settings.log("dual kernel matrix + alpha*I not positive definite: CG instead")
        result = cg_ridge(ops, Y, w, float(settings.alpha), fit_intercept=settings.fit_intercept,
                          tol=float(settings.tol), max_iter=settings.max_iter, log=settings.log,
                          preconditioner=settings.preconditioner, nystrom_rank=settings.preconditioner_rank,
                          memory_budget=int(settings.preconditioner_memory))
    finally:
        ops.close()
    return cg_result(result, features, dtype, settings.owner)


def solve_cholesky(settings, source, Y, w, n_threads, t0):
    """Accumulate the sufficient statistics chunk by chunk, factor, solve; return a ``FitResult``.

    float32 features are multiplied in float32; if their Gram plus alpha·I
    is then not positive definite (float32 rounding above alpha), the
    statistics are accumulated again in float64 before falling back to the
    minimum-norm solution.
    """
    try:
        sol = _cholesky_solution(settings, source, Y, w, n_threads, t0, None)
    except np.linalg.LinAlgError:
        if settings.log is not None:
            settings.log("float32 Gram not positive definite: accumulating it again in float64")
        sol = _cholesky_solution(settings, source, Y, w, n_threads, t0, np.float64)
    return cholesky_result(sol, source.features)


def cholesky_result(sol, features):
    """The ``FitResult`` of a Cholesky ``RidgeSolution`` (no iterations: ``n_iter`` None, as scikit-learn's Ridge)."""
    return FitResult("cholesky", sol.coef.astype(sol.dtype), sol.intercept.astype(sol.dtype), None, None, sol,
                     features)


def _cholesky_solution(settings, source, Y, w, n_threads, t0, accumulate_dtype):
    """One pass of ``solve_cholesky``; ``accumulate_dtype`` None: the features' own dtype."""
    n_chunks = sum(1 for _ in source.chunks(settings.chunk_size))
    log = settings.log

    def progress(i, stop):
        if i == n_chunks or i % max(1, n_chunks // 20) == 0:
            log(f"Gram: {i}/{n_chunks} chunks ({stop} rows), elapsed {time.perf_counter() - t0:.1f} s")

    stats = accumulate(source.dense_blocks(settings.chunk_size), Y, w, source.n_features, settings.fit_intercept,
                       n_threads, dtype=accumulate_dtype, progress=None if log is None else progress)[0][0]
    # The statistics are not kept: factor in their Gram's memory.  A
    # float32 Gram that fails raises, to be accumulated again in float64.
    singular = "raise" if stats.dtype == np.float32 else "min_norm"
    sol = stats.solve(float(settings.alpha), overwrite=True, singular=singular, owner=settings.owner)
    if accumulate_dtype is not None:
        sol = dataclasses.replace(sol, dtype=np.dtype(source.dtype))
    return sol
