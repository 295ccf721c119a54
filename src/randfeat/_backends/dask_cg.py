"""Ridge by block CG on features whose row blocks stay on the Dask workers.

Each row block's features (made on its worker from X), targets and weights
are persisted there once (``CGBlock``); the block CG of
``randfeat._solvers.cg`` runs on the client on D × K vectors, and its
operator (``BlockedProducts``) applies Zᵀ W Z P as one map over the blocks
and one block-order tree reduction (``tree.tree_reduce``) per iteration,
all targets at once.  Column sums, target sums and right-hand sides are
reduced the same way, so no N-length array reaches the client.  The
partial sums are grouped by blocks, so the solution equals the in-memory
CG's to the tolerance, not bitwise.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_array

from .._core.threads import effective_n_threads
from .._core.validation import check_sample_weight
from .._linalg.operator import Capability, FeatureOperator, MatrixKind
from .._linalg.products import make_products
from .._solvers import plan
from .._solvers.cg_path import solve_normal_path
from .._solvers.normal import NormalOperator
from .tree import to_workers, tree_reduce


class WorkerWeights:
    """Stands for the sample weights held with the row blocks on the workers (unit weights if none).

    ``BlockedProducts`` takes this object wherever a ``FeatureOperator``
    takes a weight vector ``w``: the weights never come to the client.
    """

    def __repr__(self):
        return "<sample weights held on the workers>"


class CGBlock:
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
        """The block's ``FeatureOperator``."""
        if self._ops is None:
            self._ops = make_products(self.Z, effective_n_threads(self.n_jobs))
        return self._ops

    @property
    def w_or_ones(self):
        """The block's weights (ones when none were given)."""
        return np.ones(self.Z.shape[0]) if self.w is None else self.w


def checked_block(Xb, yb, wb, targets):
    """A row block's X, encoded targets and weights, validated where the block is (a worker)."""
    if sp.issparse(Xb):
        Xb = check_array(Xb, accept_sparse="csr", dtype=[np.float64, np.float32], ensure_min_samples=0)
    else:
        Xb = check_array(Xb, dtype=[np.float64, np.float32], ensure_min_samples=0)
    Yb = targets.encode_block(yb)
    if wb is not None:
        wb = np.asarray(wb, dtype=np.float64)
        if not np.isfinite(wb).all() or np.any(wb < 0):
            raise ValueError("sample_weight must be finite and non-negative")
        wb = check_sample_weight(wb, Xb)
    return Xb, Yb, wb


def make_block(features, Xb, yb, wb, targets, n_jobs):
    """Make one block's features (if a map is given) and validated targets and weights (runs on a worker)."""
    Xb, Yb, wb = checked_block(Xb, yb, wb, targets)
    Z = Xb if features is None else features.transform(Xb)
    if sp.issparse(Z):
        Z = sp.csr_matrix(Z)
        Z.sum_duplicates()  # canonical CSR, as the in-memory fit's operators expect
    else:
        Z = np.ascontiguousarray(Z)
    return CGBlock(Z, Yb, wb, n_jobs)


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
    Z = block.Z
    return Z.shape[0], (Z.nnz if sp.issparse(Z) else Z.size), Z.dtype, block.ops.kind


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    return a + b


class BlockedProducts(FeatureOperator):
    """Products with a Z whose row blocks are held on Dask workers: one map and one reduction per call.

    Only D × K arrays cross the network.  The weight argument ``w`` of
    every method must be ``self.weights``: the weights live with the blocks.

    Parameters
    ----------
    blocks : list of dask.delayed.Delayed
        Persisted ``CGBlock`` objects, in row order.
    rows : list of int
        Rows of each block.
    n_features : int
    dtype : numpy dtype
    entries : int
        Stored entries of Z (nnz, or N·D when dense), for the preconditioner's size rules.
    kind : MatrixKind
        The blocks' structure: sparse Z gets the heavy-column Gram block,
        one-hot blocks (binning) the "block" preconditioner, as in memory.
    """

    capabilities = frozenset(Capability)

    def __init__(self, blocks, rows, n_features, dtype, entries, kind):
        super().__init__((int(sum(rows)), int(n_features)), dtype, 1)
        self._blocks, self._rows = blocks, list(rows)
        self._entries = int(entries)
        self.kind = kind
        self.weights = WorkerWeights()
        if kind is MatrixKind.DENSE:  # dense Z: no Gram block, as DenseProducts
            self.capabilities = frozenset({Capability.FUSED_NORMAL, Capability.COLUMN_STATISTICS})

    @property
    def entries(self):
        """Stored entries of Z over all blocks."""
        return self._entries

    def reduce(self, fn, *args):
        """Return the block-order tree sum of ``fn(block, *args)`` over the blocks (computed)."""
        import dask

        task = dask.delayed(fn, pure=True)
        args = [to_workers(a) if isinstance(a, np.ndarray) and a.nbytes > 2**16 else a for a in args]
        (out,) = dask.compute(tree_reduce([task(b, *args) for b in self._blocks], _add))
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
        (out,) = dask.compute(tree_reduce(parts, _add))
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


class BlockedNormalOperator(NormalOperator):
    """A = Z_cᵀ W Z_c for a ``BlockedProducts``: sums and right-hand sides reduced on the workers.

    Parameters
    ----------
    ops : BlockedProducts
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


def fit_ridge_cg(settings, X, y, w, features, targets, D):
    """CG on features held in row blocks on the workers; return a ``FitResult``.

    Parameters
    ----------
    settings : RidgeSettings
    X, y, w : Dask arrays with X's row chunks (w may be None)
    features : fitted feature map or None
    targets : the estimator's target encoding (``encode_block`` runs on the workers)
    D : int
    """
    import dask

    make = dask.delayed(make_block, pure=True)
    Xd = X.to_delayed().ravel()
    yd = y.to_delayed().ravel()
    wd = [None] * len(Xd) if w is None else w.to_delayed().ravel()
    shared_features = to_workers(features)
    blocks, rows = [], []
    for n_rows, xb, yb, wb in zip(X.chunks[0], Xd, yd, wd):
        if n_rows:
            blocks.append(make(shared_features, xb, yb, wb, targets, settings.n_jobs))
            rows.append(n_rows)
    blocks = list(dask.persist(*blocks))
    shapes = dask.compute(*[dask.delayed(_b_shape, pure=True)(b) for b in blocks])
    z_dtype = shapes[0][2]
    # The structure make_products finds in every block (binning features: one-hot
    # blocks, so the same "auto" preconditioner as in memory).
    kinds = {s[3] for s in shapes}
    kind = kinds.pop() if len(kinds) == 1 else MatrixKind.CSR
    ops = BlockedProducts(blocks, rows, D, z_dtype, sum(s[1] for s in shapes), kind)
    normal = BlockedNormalOperator(ops, settings.fit_intercept)
    if normal.weight_sum <= 0:
        raise ValueError("sample_weight is zero for every sample, so no sample counts in the fit; "
                         "give at least one sample a positive weight")
    B, ybar = normal.rhs()
    settings.check_preconditioner_rank(D)
    (result,) = solve_normal_path(normal, B, ybar, [float(settings.alpha)], tol=float(settings.tol),
                                  max_iter=settings.max_iter, log=settings.log, preconditioner=settings.preconditioner,
                                  nystrom_rank=settings.preconditioner_rank,
                                  memory_budget=int(settings.preconditioner_memory))
    return plan.cg_result(result, features, z_dtype, settings.owner)
