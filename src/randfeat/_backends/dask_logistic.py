"""LogisticRegression on Dask arrays: the loss summed over row blocks on the workers, the solver loop on the client.

The in-memory solvers (``randfeat._solvers.logistic.newton_cholesky`` and
``lbfgs``) drive any object with ``LogisticLoss``'s interface; here that
object is ``DaskLogisticLoss``:

* Each row block of X becomes, once, on its worker, a ``LogisticLoss`` of
  that block alone (``_BlockLoss``: the block's labels as class indices,
  its weights (class weights included), its rows as the in-memory fit's
  ``DesignRows``).  The in-memory rule for holding features applies per
  block: a block's float64 features are made once and held on its worker
  when they fit ``logistic_rows.MATERIALISE_BYTES`` (256 MB per block; make
  blocks smaller to hold them), else made again from the block's X at
  every pass; binning's CSR features are held.  The blocks are
  ``persist``-ed: they stay where Dask made them, the client never holds
  them.
* Each evaluation of the loss (one pass) sends θ to the workers; each
  block returns its partial (Σ w·loss, its gradient, and for Newton its
  Hessian, all without the penalty and before the division by Σw); the
  partials are summed along the backend's one block-order reduction tree
  (``tree.tree_reduce``, on the workers), so the result depends on the
  blocking only, never on scheduling; the client adds the penalty.  One
  pass moves K·P numbers out and K·P (plus (K·P)² for the Hessian) back per
  block.
* Newton's Hessian is summed over the same systematic sample of rows as in
  memory (every ``stride``-th row of X, counted from X's first row whatever
  the blocking): the same steering, and it only steers (the gradient and the
  stopping test read every row).
* The classes are found in one pass over y (``class_targets``), which also
  checks the sample weights and counts each class's weight for
  ``class_weight="balanced"``.

The fitted model equals the in-memory fit to the solvers' tolerance (the
sums are grouped by blocks, so not bitwise).
"""

import functools
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning

from .._core.protocols import MapCapability
from .._core.threads import effective_n_threads
from .._core.validation import check_weight_total
from .._solvers import logistic
from .._solvers.logistic import LogisticLoss
from .._solvers.logistic_rows import DesignRows
from .._solvers.pipeline import FeatureSource
from .dask_input import fresh
from .in_memory import WeightTotals
from .tree import tree_reduce


# ------------------------------------------------------------------ labels
def _mixed(owner):
    return ValueError(f"{owner}: y mixes labels of different types (strings and numbers); "
                      f"give every label the same type, e.g. y.astype(str)")


def _check_weights(wb):
    """One block's sample weights as float64, ValueError unless finite and non-negative (runs on a worker)."""
    wb = np.asarray(wb, dtype=np.float64)
    if not np.isfinite(wb).all() or np.any(wb < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    return wb


def _block_classes(yb, wb, owner):
    """(classes, counts, weight sums) of one block of labels (runs on a worker)."""
    yb = np.asarray(yb)
    try:
        classes, inverse, counts = np.unique(yb, return_inverse=True, return_counts=True)
    except TypeError:  # labels that do not sort together: strings and numbers
        raise _mixed(owner) from None
    weights = None if wb is None else _check_weights(wb)
    sums = np.bincount(inverse.ravel(), weights=weights, minlength=classes.size).astype(np.float64)
    return classes, counts, sums


def _merge_classes(a, b, owner):
    try:
        classes = np.union1d(a[0], b[0])
    except TypeError:
        raise _mixed(owner) from None
    counts, sums = np.zeros(classes.size, dtype=np.int64), np.zeros(classes.size)
    for part in (a, b):
        at = np.searchsorted(classes, part[0])
        counts[at] += part[1]
        sums[at] += part[2]
    return classes, counts, sums


def _class_weights_block(yb, classes, table):
    return table[np.searchsorted(classes, np.asarray(yb))]


def class_targets(make, y, sample_weight, owner, class_weight):
    """The classes of a Dask y (one pass on the workers), its target encoding, the rows' weights and their totals.

    Parameters
    ----------
    make : callable
        The estimator's encoding, called ``make(labels, owner, class_weight)``
        with the sorted classes (``ClassTargets``: it checks them and
        ``class_weight``; its ``class_table`` gives the class weights from
        each class's total sample weight, as in memory).
    y, sample_weight : Dask arrays with X's row chunks (sample_weight may be None)
    owner : str
    class_weight : dict, "balanced" or None

    Returns
    -------
    targets : what ``make`` returned
    sample_weight : Dask array or None
        The sample weights times the class weights, lazily.
    totals : WeightTotals
        Σ w from the class totals (negative weights are refused on the workers).
    """
    import dask

    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please change the shape of y "
                      "to (n_samples, ), for example using ravel().", DataConversionWarning, stacklevel=5)
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{owner} needs y as a 1-D array of class labels (binary or multiclass); "
                         f"got a {y.ndim}-D y of shape {y.shape}")
    yd = fresh(y).to_delayed().ravel()
    wd = [None] * len(yd) if sample_weight is None else fresh(sample_weight).to_delayed().ravel()
    block = dask.delayed(_block_classes, pure=True)
    merge = functools.partial(_merge_classes, owner=owner)
    parts = [block(yb, wb, owner) for yb, wb in zip(yd, wd)]
    (found,) = dask.compute(tree_reduce(parts, merge))
    classes, counts, sums = found
    targets = make(classes, owner, class_weight)
    weighted = sample_weight is not None
    table = targets.class_table(class_weight, sums if weighted else counts, counts, weighted, owner)
    per_class = sums if weighted else counts.astype(np.float64)
    if table is not None:
        per_class = per_class * table
    totals = WeightTotals(float(np.sum(per_class)), bool(np.any(per_class > 0)), 0)
    if table is None:
        return targets, sample_weight, totals
    weights = y.map_blocks(_class_weights_block, classes, table, dtype=np.float64)
    return targets, (weights if sample_weight is None else sample_weight * weights), totals


# ------------------------------------------------------------------ the blocks
class _BlockLoss(LogisticLoss):
    """One row block's share of the loss: its weights as given (not divided by Σw), no penalty (l2 = 0).

    ``offset`` is the block's first row in X: Newton's Hessian sums the
    rows whose index in X is a multiple of the stride, as in memory.
    """

    def __init__(self, rows, labels, weights, n_classes, n_threads, offset, stride):
        super().__init__(rows, labels, weights, n_classes, 0.0, n_threads)
        self.offset, self.stride = offset, stride

    def _sampled(self, start):
        return super()._sampled(self.offset + start)


def _make_block(features, Xb, yb, wb, classes, n_classes, fit_intercept, chunk_size, n_jobs, offset, stride):
    """One row block's ``_BlockLoss`` (runs on a worker; Xb validated by ``row_blocks``)."""
    labels = np.searchsorted(classes, np.asarray(yb).reshape(-1)).astype(np.intp)  # a (n, 1) column: its labels
    weights = np.ones(Xb.shape[0]) if wb is None else _check_weights(wb)
    if features is None:
        source = FeatureSource(Xb, None, Xb)
    else:
        source = FeatureSource.of_fitted(features, Xb)
    rows = DesignRows(source, fit_intercept, chunk_size)
    return _BlockLoss(rows, labels, weights, n_classes, effective_n_threads(n_jobs), offset, stride)


def _weight_sum(block):
    return float(block.weights.sum())


def _evaluate_block(block, theta, hessian, hessian_dtype, every_row):
    block.hessian_dtype = hessian_dtype  # newton_cholesky may have switched to float64
    stride = block.stride
    if every_row:  # newton_cholesky has stopped sampling its Hessian's rows (loss.stride = 1)
        block.stride = 1
    try:
        return block.evaluate(theta, hessian=hessian)
    finally:
        block.stride = stride


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    return None if a is None else a + b


def weight_total(blocks):
    """Σ w over persisted blocks (``_BlockLoss``), summed in block order on the workers."""
    import dask

    task = dask.delayed(_weight_sum, pure=False)
    (total,) = dask.compute(tree_reduce([task(b) for b in blocks], _add))
    return total


def hessian_stride(n_rows, K, P):
    """Newton's Hessian reads every stride-th row: ``LogisticLoss``'s rule on all of X's rows."""
    return max(1, n_rows // max(logistic.HESSIAN_ROWS, logistic.HESSIAN_ROWS_PER_PARAMETER * K * P))


class DaskLogisticLoss:
    """``LogisticLoss``'s interface over row blocks persisted on the workers: one tree reduction per evaluation.

    Parameters
    ----------
    blocks : list of dask.delayed.Delayed
        The persisted ``_BlockLoss`` of every row block, in row order.
    n_rows : int
    n_classes : int
    n_features : int
        D (features, without the intercept).
    fit_intercept : bool
    C : float
    log : callable or None
    """

    n_params = LogisticLoss.n_params
    penalty_mask = LogisticLoss.penalty_mask
    null_direction = LogisticLoss.null_direction
    #: No row sample held on the client: Newton sums each Hessian in a pass over the blocks.
    sampled_hessian = None

    def __init__(self, blocks, n_rows, n_classes, n_features, fit_intercept, C, log=None, total=None):
        self.blocks, self.log = blocks, log
        self.K = 1 if n_classes == 2 else n_classes
        self.D = n_features
        self.P = n_features + int(fit_intercept)
        self.hessian_dtype = np.float32 if self.K == 1 else np.float64  # as LogisticLoss
        self.stride = hessian_stride(n_rows, self.K, self.P)
        self.passes = 0
        self._last = None  # (θ's bytes, f) of the last evaluation, as LogisticLoss's
        if total is None:
            total = weight_total(blocks)
            check_weight_total(total)
        self.total = total
        self.set_C(C)

    def set_C(self, C):
        """Set the penalty of ``C`` (l2 = 1 / (C·Σw)): a C path changes only this between its fits."""
        self.l2 = 1.0 / (float(C) * self.total)

    def objective(self, theta):
        """The scaled objective at θ: the last evaluation's when it was at this θ, else a pass."""
        if self._last is not None and self._last[0] == np.asarray(theta, dtype=np.float64).tobytes():
            return self._last[1]
        return self.evaluate(theta)[0]

    def evaluate(self, theta, hessian=False):
        """Return (f, gradient, Hessian or None) of the scaled objective at θ (K·P,), one pass over the blocks."""
        import dask

        theta = np.asarray(theta, dtype=np.float64)
        shared = dask.delayed(theta, pure=False)  # one key: θ travels once per worker, not once per block
        task = dask.delayed(_evaluate_block, pure=False)
        parts = [task(b, shared, hessian, self.hessian_dtype, self.stride == 1) for b in self.blocks]
        ((f, G, H),) = dask.compute(tree_reduce(parts, _add))
        self.passes += 1
        f, G = f / self.total, G / self.total
        Theta = theta.reshape(self.K, self.P)
        mask = self.penalty_mask()
        f += 0.5 * self.l2 * float(np.sum((Theta * mask) ** 2))
        G += self.l2 * (Theta * mask).ravel()
        if hessian:
            H /= self.total
            H[np.diag_indices_from(H)] += self.l2 * mask.ravel()
        self._last = (theta.tobytes(), f)
        return f, G, H


# ------------------------------------------------------------------ the fit
def dask_solver(settings, n_params):
    """The solver a Dask fit runs: ``"auto"`` is Newton with the full Hessian while it fits the budget.

    Also for several classes (one pass of the blocks per step), else L-BFGS;
    ``"newton-cg"`` is refused: its Hessian products read a row sample held
    in one process, which the blocks' loss does not have.
    """
    if settings.solver == "newton-cg":
        raise ValueError(f"{settings.owner}: solver='newton-cg' is not available on Dask arrays; use "
                         f"solver='auto', 'newton-cholesky' or 'lbfgs'")
    return logistic.choose_logistic_solver(settings.solver, n_params)


def fitted_map(backend, template, X, owner):
    """A fitted clone of ``template`` (None: X is the feature matrix), refused unless row-independent."""
    if template is None:
        return None
    features = clone(template)
    features._check_params()  # as its fit would: the map's own parameters
    features._state, _ = backend.fit_map(features, X, return_features=False)
    check_row_independent(features, owner)
    return features


def check_row_independent(features, owner):
    """TypeError unless a block's features do not depend on the blocking."""
    if not features.has(MapCapability.ROW_INDEPENDENT):
        raise TypeError(f"{type(features).__name__} is not row-independent: its features of a Dask block "
                        f"would depend on the blocking. Fit {owner} in memory.")


def persisted_blocks(settings, features, X, y, w, targets, stride):
    """The ``_BlockLoss`` of every row block, made and persisted on the workers (features made once there)."""
    import dask

    make = dask.delayed(_make_block, pure=False)
    Xd = fresh(X).to_delayed().ravel()
    yd = fresh(y).to_delayed().ravel()
    wd = [None] * len(Xd) if w is None else fresh(w).to_delayed().ravel()
    parts = [make(features, xb, yb, wb, targets.classes, targets.n_classes, settings.fit_intercept,
                  settings.chunk_size, settings.n_jobs, int(s), stride)
             for xb, yb, wb, s in zip(Xd, yd, wd, block_offsets(X))]
    return list(dask.persist(*parts))


def block_offsets(X):
    """The first row of each row block of X."""
    return np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(int).tolist()


def fit_logistic(backend, settings, template, X, y, w, targets):
    """Fit logistic regression on a Dask X: blocks on the workers, ``newton_cholesky`` / ``lbfgs`` here.

    Parameters
    ----------
    backend : DaskBackend
        Fits the feature map (``fit_map``).
    settings : LogisticSettings
    template : feature map or None
    X, y, w : Dask arrays with X's row chunks (w may be None; class weights included)
    targets : ClassTargets
        ``classes`` and ``n_classes`` (found by ``class_targets``).

    Returns
    -------
    LogisticResult
    """
    t0 = time.perf_counter()
    dask_solver(settings, 1)  # refuse newton-cg before any work
    features = fitted_map(backend, template, X, settings.owner)
    D = X.shape[1] if features is None else int(features.n_features_out_)
    K = 1 if targets.n_classes == 2 else targets.n_classes
    blocks = persisted_blocks(settings, features, X, y, w, targets,
                              hessian_stride(X.shape[0], K, D + int(settings.fit_intercept)))
    try:
        loss = DaskLogisticLoss(blocks, X.shape[0], targets.n_classes, D, settings.fit_intercept, settings.C,
                                settings.log)
        return solve_on_blocks(settings, loss, features, t0)
    finally:
        del blocks  # release the persisted blocks on the workers
        loss = None


def solve_on_blocks(settings, loss, features, t0):
    """``logistic.solve`` on a ``DaskLogisticLoss``, with the Dask solver rule: a ``LogisticResult``."""
    solver = dask_solver(settings, loss.n_params)
    if settings.log is not None:
        settings.log(f"{solver} on {len(loss.blocks)} Dask row blocks ({loss.K} coefficient row(s), {loss.P} "
                     f"columns), Hessian (Newton) over every {loss.stride}-th row, "
                     f"elapsed {time.perf_counter() - t0:.1f} s")
    return logistic.solve(settings, loss, solver, loss.total, features, t0, "Dask row blocks")
