"""Ridge by block CG on features whose row blocks stay on the Dask workers, the iteration on a worker too.

Each row block's features are made on a worker from X (``dask_blocks.make_block``)
and stay there.  On a distributed Client, the blocks are cut into one
contiguous run per worker, balanced by rows (``placement``: Dask moves the
few blocks that are elsewhere, once); one worker (the root) runs the whole
solve in one long task (``_root_task``), holding its own run and the D × K
iterates, and every other one holds its run in a ``BlockStore`` actor.
An iteration moves only what block CG must: the direction to each other
worker and, back, the sums of the subtrees of the block-order reduction
tree that worker holds whole (``dask_blocks``); no task graph is built and
the client is not involved until the solution comes back.  The result is
the same bits as the same tree evaluated in one process, which is what a
local scheduler does (every block brought to this process).  Column sums,
target sums and right-hand sides are reduced the same way, so no N-length
array moves.  The solution equals the in-memory CG's to the tolerance, not
bitwise (the sums are grouped by blocks).

A worker lost during the fit (its blocks gone, an actor unreachable, a
task killed) makes the fit recompute the blocks from X and try once more;
a second loss raises a ``RuntimeError`` saying what happened.
"""

import dataclasses
import threading
import traceback
import uuid
import warnings

import numpy as np

from .._solvers import pipeline
from .._solvers.cg_path import CGResult
from .dask_blocks import BlockStore, LostBlocks, loss, make_block, solve_blocks
from .dask_input import fresh
from .tree import current_client, to_workers

LOST_TWICE = (
    "{owner}: the Dask cluster lost a worker holding row blocks during the CG fit ({first}); the blocks were "
    "recomputed from X and the fit retried once, and a worker was lost again ({second}). Check the workers' logs "
    "(a worker over its memory limit is restarted: each holds its blocks' features), then fit again."
)


def _lost_worker(exc):
    """True if ``exc`` says a worker (or what it held) was lost, not that the fit itself failed."""
    import distributed
    from distributed.client import FutureCancelledError, FuturesCancelledError

    return loss(exc) is not None or isinstance(
        exc, (distributed.KilledWorker, FutureCancelledError, FuturesCancelledError))


def _describe(exc):
    return f"{type(exc).__name__}: {exc}"


def fit_ridge_cg(settings, X, y, w, features, targets, D):
    """CG on features held in row blocks on the workers; return a ``FitResult``.

    Parameters
    ----------
    settings : RidgeSettings
    X, y, w : Dask arrays with X's row chunks (w may be None); X from ``dask_input.row_blocks``
    features : fitted feature map or None
    targets : the estimator's target encoding (``encode_block`` runs on the workers)
    D : int
    """
    client = current_client()
    if client is None:
        result, dtype = _solve_here(settings, X, y, w, features, targets, D)
        return pipeline.cg_result(result, features, dtype, settings.owner)
    try:
        result, dtype = _solve_on_cluster(client, settings, X, y, w, features, targets, D)
    except Exception as first:
        if not _lost_worker(first):
            raise
        if settings.log is not None:
            settings.log(f"a worker was lost ({_describe(first)}): recomputing the row blocks and retrying once")
        try:
            result, dtype = _solve_on_cluster(client, settings, X, y, w, features, targets, D)
        except Exception as second:
            if not _lost_worker(second):
                raise
            raise RuntimeError(LOST_TWICE.format(owner=settings.owner, first=_describe(first),
                                                 second=_describe(second))) from second
    return pipeline.cg_result(result, features, dtype, settings.owner)


def _block_tasks(settings, X, y, w, features, targets):
    """The delayed ``CGBlock`` of every non-empty row block, in row order (fresh keys: a retry recomputes)."""
    import dask

    make = dask.delayed(make_block, pure=False)
    Xd = fresh(X).to_delayed().ravel()
    yd = fresh(y).to_delayed().ravel()
    wd = [None] * len(Xd) if w is None else fresh(w).to_delayed().ravel()
    shared = to_workers(features)
    return [make(shared, xb, yb, wb, targets, settings.n_jobs)
            for n_rows, xb, yb, wb in zip(X.chunks[0], Xd, yd, wd) if n_rows]


def _solve_here(settings, X, y, w, features, targets, D):
    """A local scheduler: every block made into this process, the solve run here."""
    import dask

    blocks = dask.compute(*_block_tasks(settings, X, y, w, features, targets))
    return solve_blocks(settings, dict(enumerate(blocks)), [], len(blocks), D)


def _solve_on_cluster(client, settings, X, y, w, features, targets, D):
    """Blocks made where Dask makes them and placed (``placement``), stores on all but the root, the solve on the root."""
    import distributed

    futures = client.compute(_block_tasks(settings, X, y, w, features, targets))
    held = []
    try:
        distributed.wait(futures)
        for f in futures:
            if f.status == "error":
                f.result()  # the fit's own error (bad input, ...): raised as is
            if f.status != "finished":
                raise LostBlocks(f"a row block was {f.status} before the solve started")
        where = client.who_has(futures)
        if not all(where[f.key] for f in futures):
            raise LostBlocks("a row block was lost before the solve started")
        rows = [n for n in X.chunks[0] if n]
        by_worker, root = placement(rows, [set(where[f.key]) for f in futures], sorted(client.nthreads()))
        others = [a for a in by_worker if a != root]
        stores = [client.submit(BlockStore, len(futures), by_worker[a], *[futures[i] for i in by_worker[a]],
                                actor=True, workers=[a], allow_other_workers=True, pure=False) for a in others]
        held = stores
        relay = _LogRelay(client, settings.log) if settings.log is not None else None
        messages = []
        try:
            task = client.submit(_root_task, dataclasses.replace(settings, log=None),
                                 None if relay is None else relay.topic, len(futures), D, by_worker[root], stores,
                                 *[futures[i] for i in by_worker[root]], workers=[root], allow_other_workers=True,
                                 pure=False)
            held = stores + [task]
            fields, dtype, caught, messages = task.result()
        finally:
            if relay is not None:
                relay.finish(messages)
    finally:
        # Forced: the root's handles to the stores (its worker's client) must not keep them, and their blocks, alive.
        client.cancel(futures + held, force=True)
    for category, message in caught:
        warnings.warn(message, category, stacklevel=5)
    return CGResult(*fields), dtype


def placement(rows, holders, workers):
    """Which worker holds which blocks in the solve, and which one is the root.

    The blocks are cut into one contiguous run per worker, balanced by rows
    (contiguous runs are whole subtrees of the reduction tree: few sums
    cross the network), each run given to the worker that already holds
    most of its rows (Dask moves the others once); the root, which also
    does the D × K algebra, is the worker of the smallest run.

    Parameters
    ----------
    rows : list of int
        Rows of each block.
    holders : list of set of str
        The workers holding each block now.
    workers : list of str
        Every worker of the cluster, sorted.

    Returns
    -------
    by_worker : dict of str to list of int
    root : str
    """
    k = min(len(workers), len(rows))
    ends = np.cumsum(rows)
    middle = ends - np.asarray(rows) / 2.0
    run = np.minimum((middle * k / ends[-1]).astype(int), k - 1)  # nondecreasing: contiguous runs
    runs = [np.flatnonzero(run == j).tolist() for j in range(k)]
    runs = sorted((r for r in runs if r), key=lambda r: (-sum(rows[i] for i in r), r[0]))
    by_worker, free = {}, list(workers)
    for r in runs:  # the largest runs choose first
        held = [sum(rows[i] for i in r if a in holders[i]) for a in free]
        a = free.pop(int(np.argmax(held)))
        by_worker[a] = r
    root = min(by_worker, key=lambda a: (sum(rows[i] for i in by_worker[a]), by_worker[a][0]))
    return by_worker, root


def _root_task(settings, topic, n_blocks, n_features, indices, stores, *blocks):
    """The solve on the root worker; returns (CGResult fields, Z's dtype, warnings, log messages)."""
    import distributed

    # A long task that mostly waits for the stores: out of the worker's thread
    # pool, as distributed asks of long-running tasks.
    distributed.secede()
    try:
        return _root_solve(distributed, settings, topic, n_blocks, n_features, indices, stores, blocks)
    except Exception as exc:
        # The worker keeps a failed task's traceback: let its frames hold no blocks or actors.
        for e in (exc, exc.__cause__, exc.__context__):
            if e is not None:
                traceback.clear_frames(e.__traceback__)
        raise


def _root_solve(distributed, settings, topic, n_blocks, n_features, indices, stores, blocks):
    """``solve_blocks`` on the root worker, its progress messages sent to the client as events on ``topic``."""
    worker = distributed.get_worker()
    messages = []

    def log(msg):
        messages.append(msg)
        worker.log_event(topic, [len(messages) - 1, msg])

    settings = dataclasses.replace(settings, log=None if topic is None else log)
    watch = [distributed.Future(store.key) for store in stores]  # the scheduler's word on each store
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, dtype = solve_blocks(settings, dict(zip(indices, blocks)), stores, n_blocks, n_features, watch)
    fields = (result.coef, result.intercept, result.n_iter, result.residual, result.preconditioner,
              result.nystrom_rank)  # CGResult's extra fields do not survive pickling as a tuple subclass
    return fields, dtype, [(w.category, str(w.message)) for w in caught], messages


class _LogRelay:
    """The root worker's progress messages printed on the client as they come (``settings.log``), in order."""

    def __init__(self, client, log):
        self.client, self.log = client, log
        self.topic = f"randfeat-cg-{uuid.uuid4().hex}"
        self._printed = 0
        self._lock = threading.Lock()
        client.subscribe_topic(self.topic, self._event)

    def _event(self, event):
        i, msg = event[1]
        with self._lock:
            if i == self._printed:  # one out of order waits for ``finish``
                self.log(msg)
                self._printed += 1

    def finish(self, messages):
        """Print what has not arrived yet of all the root's ``messages``, then stop listening."""
        with self._lock:
            for msg in messages[self._printed:]:
                self.log(msg)
            self._printed = float("inf")
        self.client.unsubscribe_topic(self.topic)

