"""The row blocks of a distributed CG solve and the operator over them, where the blocks are held.

Each row block's features (made on its worker from X), encoded targets and
weights form a ``CGBlock``.  The blocks of each worker but one are held by
a ``BlockStore`` (a Dask actor on that worker); the remaining worker — the
root — holds its own blocks and runs the whole solve
(``solve_blocks``: ``randfeat._solvers.cg_path.solve_normal_path`` on a
``BlockedNormalOperator``), its D × K iterates never leaving it.  Every
product (``BlockedProducts.reduce``) sends the direction to the stores,
which apply the block function to their blocks and return the sums of the
subtrees of the block-order ``ReductionTree`` they hold whole, while the
root does its own; the root combines the rest of the tree.  So each
iteration moves one D × K array out to each other worker and its partial
sums back, and the result is the same bits as the tree's evaluation in
one process, whatever the placement.  On a local scheduler every block is
in this process and there are no stores.
"""

import numpy as np
import scipy.sparse as sp

from .._core.threads import effective_n_threads
from .._core.validation import check_sample_weight
from .._linalg.operator import Capability, FeatureOperator, MatrixKind
from .._linalg.products import make_products
from .._solvers.cg_path import solve_normal_path
from .._solvers.normal import NormalOperator
from .tree import ReductionTree


class LostBlocks(RuntimeError):
    """A worker holding blocks of a distributed CG solve could not be reached (lost, restarted, closed)."""


#: Called with the block function before every reduction (tests inject a worker's loss here); None in use.
FAULT_HOOK = None


class WorkerWeights:
    """Stands for the sample weights held with the row blocks (unit weights if none).

    ``BlockedProducts`` takes this object wherever a ``FeatureOperator``
    takes a weight vector ``w``: the weights stay with the blocks.
    """

    def __repr__(self):
        return "<sample weights held with the row blocks>"


class CGBlock:
    """One row block for a distributed CG solve: its features, targets and weights.

    The feature operator is made on first use and not pickled (it may own
    a thread pool): if Dask moves or spills the block, it is remade.
    """

    def __init__(self, Z, Y, w, n_jobs):
        self.Z, self.Y, self.w, self.n_jobs = Z, Y, w, n_jobs
        self._ops = self._out = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_ops"] = state["_out"] = None
        return state

    def out(self, shape):
        """The block's buffer for a D × K product, kept between CG iterations (a fresh one pays its page faults)."""
        if self._out is None or self._out.shape != shape:
            self._out = np.empty(shape, dtype=self.ops.dtype)
        return self._out

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


def make_block(features, Xb, yb, wb, targets, n_jobs):
    """One block's features (if a map is given), encoded targets and checked weights (runs on a worker).

    Xb is a block of ``dask_input.row_blocks``'s X: validated there.
    """
    Yb = targets.encode_block(yb)
    if wb is not None:
        wb = np.asarray(wb, dtype=np.float64)
        if not np.isfinite(wb).all() or np.any(wb < 0):
            raise ValueError("sample_weight must be finite and non-negative")
        wb = check_sample_weight(wb, Xb)
    Z = Xb if features is None else features._transform_validated(Xb)
    if sp.issparse(Z):
        Z = sp.csr_matrix(Z)
        Z.sum_duplicates()  # canonical CSR, as the in-memory fit's operators expect
    else:
        Z = np.ascontiguousarray(Z)
    return CGBlock(Z, Yb, wb, n_jobs)


# Per-block pieces of the CG solve (each runs where the block is).
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
    return block.ops.normal(P, mup, block.w, block.out(P.shape))


def _b_sq_sums(block):
    return block.ops.column_sq_sums(block.w_or_ones)


def _b_gram_block(block, columns):
    return block.ops.gram_block(columns, block.w)


def _b_matmat(block, P):
    return block.ops.matmat(P)


def _b_shape(block):
    Z = block.Z
    return Z.shape[0], (Z.nnz if sp.issparse(Z) else Z.size), Z.dtype, block.ops.kind


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    return a + b


def _add_into(a, b):
    """``_add`` of two products (Q, s), Q summed into a's buffer when it is writable: the same bits, no allocation."""
    Q, s = a
    if not Q.flags.writeable:  # a sum received from a store
        return Q + b[0], s + b[1]
    Q += b[0]
    return Q, s + b[1]


def _add_array_into(a, b):
    """``a + b`` of two arrays, summed into a when it is writable (a fresh leaf or partial sum): the same bits."""
    if not a.flags.writeable:  # a sum received from a store
        return a + b
    a += b
    return a


def _combine(fn):
    # The normal product's leaves are the blocks' own buffers (``CGBlock.out``),
    # which the tree may sum into; the Gram block's leaves are fresh h x h
    # arrays (``csr_gram_block_of``), summed in place too: an allocation per sum costs more than the add.
    if fn is _b_normal:
        return _add_into
    return _add_array_into if fn is _b_gram_block else _add


def subtree_sums(subtrees, blocks, fn, args):
    """{(lo, hi): the tree's sum of ``fn(block, *args)`` over the subtree} for subtrees of held ``blocks``."""
    leaf = lambda i: fn(blocks[i], *args)  # noqa: E731
    return {(t.lo, t.hi): ReductionTree.evaluate(t, leaf, _combine(fn)) for t in subtrees}


class BlockStore:
    """A Dask actor holding one worker's blocks: block functions applied there, only subtree sums returned.

    Parameters
    ----------
    n_blocks : int
        Blocks of the whole solve (the tree's size).
    indices : list of int
        The indices of the blocks given.
    *blocks : CGBlock
    """

    def __init__(self, n_blocks, indices, *blocks):
        self.blocks = dict(zip(indices, blocks))
        self.subtrees = ReductionTree(n_blocks).covering(set(indices))

    def reduce(self, fn, *args):
        """Return ``subtree_sums`` of ``fn`` over the blocks held here."""
        return subtree_sums(self.subtrees, self.blocks, fn, args)

    def each(self, fn, *args):
        """Return {index: fn(block, *args)} for the blocks held here."""
        return {i: fn(b, *args) for i, b in self.blocks.items()}


def loss(exc):
    """``exc`` as ``LostBlocks`` if it says a store's worker is unreachable (closed, lost, restarted), else None."""
    if isinstance(exc, LostBlocks):
        return exc
    # distributed's actors: CommClosedError and "Unable to contact Actor's worker" (OSErrors), or
    # "Worker holding Actor was lost" (a RuntimeError) once the scheduler knows.
    if isinstance(exc, OSError) or (type(exc) is RuntimeError and "Actor was lost" in str(exc)):
        return LostBlocks(f"a worker holding row blocks was lost ({type(exc).__name__}: {exc})")
    return None


def _start(stores, reduce, fn, args):
    """Start ``fn`` on every store's blocks (their subtree sums if ``reduce``, else each block's value)."""
    try:
        return [store.reduce(fn, *args) if reduce else store.each(fn, *args) for store in stores]
    except Exception as exc:
        lost = loss(exc)
        if lost is None:
            raise
        raise lost from exc


#: Seconds between checks, while waiting for a store, that its worker is still there.
POLL_SECONDS = 1.0


def _collect(futures, watch):
    """The merged results of the stores' calls (``_start``); ``LostBlocks`` if a store's worker was lost.

    A call to an actor whose worker died may never answer (distributed
    waits for the actor's own future, which then fails): the wait checks
    ``watch`` every ``POLL_SECONDS``.
    """
    out = {}
    for f in futures:
        while True:
            try:
                out.update(f.result(timeout=POLL_SECONDS))
                break
            except TimeoutError:  # (an OSError: caught first)
                gone = [w.key for w in watch if w.status in ("error", "cancelled", "lost")]
                if gone:
                    raise LostBlocks(f"a worker holding row blocks was lost (its store {gone[0]!r} failed)") from None
            except Exception as exc:
                lost = loss(exc)
                if lost is None:
                    raise
                raise lost from exc
    return out


class BlockedProducts(FeatureOperator):
    """Products with a Z whose row blocks are held here and by ``BlockStore`` actors: one tree reduction per call.

    Parameters
    ----------
    local : dict of int to CGBlock
        The blocks held in this process.
    stores : list of distributed.Actor
        ``BlockStore`` actors holding the other blocks.
    n_blocks : int
    n_features : int
    n_jobs : int or None
        Threads of the D × K algebra run here.
    watch : list of distributed.Future
        The stores' own futures: their status says when the scheduler has lost one.

    Attributes
    ----------
    weights : WorkerWeights
        The ``w`` every weighted method must be given.
    kind : MatrixKind
        The blocks' structure: sparse Z gets the heavy-column Gram block,
        one-hot blocks (binning) the "block" preconditioner, as in memory.
    """

    capabilities = frozenset(Capability)

    def __init__(self, local, stores, n_blocks, n_features, n_jobs, watch=()):
        self._local, self._stores, self._watch = local, list(stores), list(watch)
        self._tree = ReductionTree(n_blocks)
        self._subtrees = self._tree.covering(set(local))
        shapes = self.each(_b_shape)
        shapes = [shapes[i] for i in range(n_blocks)]
        self._rows = [s[0] for s in shapes]
        self._entries = int(sum(s[1] for s in shapes))
        super().__init__((int(sum(self._rows)), int(n_features)), shapes[0][2], effective_n_threads(n_jobs))
        kinds = {s[3] for s in shapes}
        self.kind = kinds.pop() if len(kinds) == 1 else MatrixKind.CSR
        self.weights = WorkerWeights()
        if self.kind is MatrixKind.DENSE:  # dense Z: no Gram block, as DenseProducts
            self.capabilities = frozenset({Capability.FUSED_NORMAL, Capability.COLUMN_STATISTICS})

    @property
    def entries(self):
        """Stored entries of Z over all blocks."""
        return self._entries

    def each(self, fn, *args):
        """Return {index: fn(block, *args)} over every block."""
        futures = _start(self._stores, False, fn, args)
        out = {i: fn(b, *args) for i, b in self._local.items()}
        out.update(_collect(futures, self._watch))
        return out

    def reduce(self, fn, *args):
        """Return the block-order tree sum of ``fn(block, *args)`` over the blocks.

        The stores' calls go out first, so every worker computes at once.
        """
        if FAULT_HOOK is not None:
            FAULT_HOOK(fn)
        futures = _start(self._stores, True, fn, args)
        known = subtree_sums(self._subtrees, self._local, fn, args)
        known.update(_collect(futures, self._watch))
        return self._tree.evaluate(self._tree.root, None, _combine(fn), known)

    def _check(self, w):
        if w is not self.weights:
            raise ValueError("the weights of a blocked Z live with its blocks: pass ops.weights")

    def matmat(self, P):
        """Return Z @ P (N × K, brought here: for tests and small N only)."""
        parts = self.each(_b_matmat, np.ascontiguousarray(P, dtype=self.dtype))
        return np.concatenate([parts[i] for i in range(len(parts))], axis=0)

    def rmatmat(self, U):
        """Not offered: an N-long U would have to be split among the workers (the solve never needs it)."""
        raise NotImplementedError("Zᵀ U of a blocked Z: use the blocks' own targets (BlockedNormalOperator.rhs)")

    def normal(self, P, mup, w, out=None):
        """Return (Zᵀ W (Z P − 1 mupᵀ), Σ_i w_i (z_iᵀP − mup)), one tree reduction (Q into ``out`` if given)."""
        self._check(w)
        Q, s = self.reduce(_b_normal, np.ascontiguousarray(P, dtype=self.dtype), np.asarray(mup, dtype=np.float64))
        # Q may be a block's buffer, which the next product overwrites: the caller gets its own copy.
        if out is None:
            return np.array(Q), s
        np.copyto(out, Q)
        return out, s

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
    """A = Z_cᵀ W Z_c for a ``BlockedProducts``: sums and right-hand sides reduced from the blocks.

    Parameters
    ----------
    ops : BlockedProducts
    fit_intercept : bool
    """

    supports_dual = False  # the N-long dual vectors would have to live in one place

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
        """Return the weighted target means ȳ (the targets are with the blocks; Y is ignored)."""
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


def solve_blocks(settings, local, stores, n_blocks, n_features, watch=()):
    """Ridge by CG on blocks held here (``local``) and by ``stores``; return (CGResult, Z's dtype).

    Parameters
    ----------
    settings : RidgeSettings
    local : dict of int to CGBlock
    stores : list of distributed.Actor
    n_blocks, n_features : int
    watch : list of distributed.Future
        The stores' futures (``BlockedProducts``).
    """
    ops = BlockedProducts(local, stores, n_blocks, n_features, settings.n_jobs, watch)
    normal = BlockedNormalOperator(ops, settings.fit_intercept)
    if normal.weight_sum <= 0:
        raise ValueError("sample_weight is zero for every sample, so no sample counts in the fit; "
                         "give at least one sample a positive weight")
    B, ybar = normal.rhs()
    settings.check_preconditioner_rank(n_features)
    (result,) = solve_normal_path(normal, B, ybar, [float(settings.alpha)], tol=float(settings.tol),
                                  max_iter=settings.max_iter, log=settings.log, preconditioner=settings.preconditioner,
                                  nystrom_rank=settings.preconditioner_rank,
                                  memory_budget=int(settings.preconditioner_memory))
    return result, ops.dtype
