"""LogisticRegression on Dask arrays: the loss summed over row blocks on the workers, the solver loop on the client.

The in-memory solvers (``randfeat._solvers.logistic.newton_cholesky`` and
``lbfgs``) drive any object with ``LogisticLoss``'s interface; here that
object is ``DaskLogisticLoss``:

* Each row block of X becomes, once, on its worker, a ``LogisticLoss`` of
  that block alone (``_BlockLoss``: the block's labels as class indices,
  its weights (class weights included), its rows as the in-memory fit's
  ``DesignRows``).  The in-memory rule for holding features applies per
  block: a block's float64 features are made once and held on its worker
  when they fit ``logistic.MATERIALISE_BYTES`` (256 MB per block; make
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
import inspect
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, DataConversionWarning
from sklearn.utils.class_weight import compute_class_weight

from .._core.memory_budget import check_memory
from .._core.protocols import MapCapability
from .._core.threads import effective_n_threads
from .._core.validation import check_weight_total
from .._solvers import logistic
from .._solvers.logistic import DesignRows, LogisticLoss, LogisticResult
from .._solvers.pipeline import FeatureSource
from .dask_input import fresh
from .tree import tree_reduce

#: compute_class_weight counts a class by its rows' sample weights (scikit-learn >= 1.8), as ``ClassTargets``.
_WEIGHTED_BALANCE = "sample_weight" in inspect.signature(compute_class_weight).parameters


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
    """The classes of a Dask y (one pass on the workers), its target encoding and the rows' weights.

    Parameters
    ----------
    make : callable
        The estimator's encoding, called ``make(labels, owner, class_weight)``
        with the sorted classes (e.g. ``ClassTargets``: it checks them and
        ``class_weight``).
    y, sample_weight : Dask arrays with X's row chunks (sample_weight may be None)
    owner : str
    class_weight : dict, "balanced" or None

    Returns
    -------
    targets : what ``make`` returned
    sample_weight : Dask array or None
        The sample weights times the class weights, lazily (as
        ``ClassTargets.weighted``: "balanced" counts each class by its
        rows' sample weights).
    """
    import dask

    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please change the shape of y "
                      "to (n_samples, ), for example using ravel().", DataConversionWarning, stacklevel=4)
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
    if sample_weight is not None:
        check_weight_total(float(np.sum(sums)))  # the in-memory message for weights all zero
    if not class_weight:
        return targets, sample_weight
    if _WEIGHTED_BALANCE:
        table = compute_class_weight(class_weight, classes=classes, y=classes,
                                     sample_weight=counts.astype(np.float64) if sample_weight is None else sums)
    elif isinstance(class_weight, str):  # an older scikit-learn: unweighted class counts
        table = counts.sum() / (classes.size * counts.astype(np.float64))
    else:
        table = compute_class_weight(class_weight, classes=classes, y=classes)
    table = np.asarray(table, dtype=np.float64)
    weights = y.map_blocks(_class_weights_block, classes, table, dtype=np.float64)
    return targets, weights if sample_weight is None else sample_weight * weights


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


def _evaluate_block(block, theta, hessian, hessian_dtype):
    block.hessian_dtype = hessian_dtype  # newton_cholesky may have switched to float64
    return block.evaluate(theta, hessian=hessian)


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    return None if a is None else a + b


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

    def __init__(self, blocks, n_rows, n_classes, n_features, fit_intercept, C, log=None):
        import dask

        self.blocks, self.log = blocks, log
        self.K = 1 if n_classes == 2 else n_classes
        self.D = n_features
        self.P = n_features + int(fit_intercept)
        self.hessian_dtype = np.float32 if self.K == 1 else np.float64  # as LogisticLoss
        self.stride = hessian_stride(n_rows, self.K, self.P)
        self.passes = 0
        task = dask.delayed(_weight_sum, pure=False)
        (self.total,) = dask.compute(tree_reduce([task(b) for b in blocks], _add))
        check_weight_total(self.total)
        self.l2 = 1.0 / (C * self.total)

    def evaluate(self, theta, hessian=False):
        """Return (f, gradient, Hessian or None) of the scaled objective at θ (K·P,), one pass over the blocks."""
        import dask

        theta = np.asarray(theta, dtype=np.float64)
        shared = dask.delayed(theta, pure=False)  # one key: θ travels once per worker, not once per block
        task = dask.delayed(_evaluate_block, pure=False)
        parts = [task(b, shared, hessian, self.hessian_dtype) for b in self.blocks]
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
        return f, G, H


# ------------------------------------------------------------------ the fit
def _initial(settings, K, D, fit_intercept):
    """θ at the start: zeros, or a warm start of this fit's shape (as the in-memory fit)."""
    theta = np.zeros((K, D + int(fit_intercept)))
    if settings.init is not None and np.shape(settings.init[0]) == (K, D):
        coef, intercept = settings.init
        theta[:, :D] = coef
        if fit_intercept:
            theta[:, D] = intercept
    return theta.ravel()


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
    import dask

    t0 = time.perf_counter()
    log = settings.log
    features = None
    if template is not None:
        features = clone(template)
        features._check_params()  # as its fit would: the map's own parameters
        features._state, _ = backend.fit_map(features, X, return_features=False)
        if not features.has(MapCapability.ROW_INDEPENDENT):
            raise TypeError(f"{type(features).__name__} is not row-independent: its features of a Dask block "
                            f"would depend on the blocking. Fit {settings.owner} in memory.")
    D = X.shape[1] if features is None else int(features.n_features_out_)
    K = 1 if targets.n_classes == 2 else targets.n_classes
    P = D + int(settings.fit_intercept)
    N = X.shape[0]
    stride = hessian_stride(N, K, P)
    make = dask.delayed(_make_block, pure=False)
    Xd = fresh(X).to_delayed().ravel()
    yd = fresh(y).to_delayed().ravel()
    wd = [None] * len(Xd) if w is None else fresh(w).to_delayed().ravel()
    offsets = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).tolist()
    parts = [make(features, xb, yb, wb, targets.classes, targets.n_classes, settings.fit_intercept,
                  settings.chunk_size, settings.n_jobs, int(s), stride)
             for xb, yb, wb, s in zip(Xd, yd, wd, offsets)]
    blocks = list(dask.persist(*parts))
    try:
        loss = DaskLogisticLoss(blocks, N, targets.n_classes, D, settings.fit_intercept, settings.C, log)
        result = _solve(settings, loss, t0)
    finally:
        del blocks, parts  # release the persisted blocks on the workers
        loss = None
    coef, intercept, n_iter, converged, objective, solver = result
    return LogisticResult(solver, coef, intercept, n_iter, converged, objective, features)


def _solve(settings, loss, t0):
    """``logistic.fit``'s solver step on ``loss``: (coef, intercept, n_iter, converged, objective, solver)."""
    log = settings.log
    if settings.solver == "newton-cg":
        # Its Hessian products read a row sample held in one process; the blocks' loss has none yet.
        raise ValueError(f"{settings.owner}: solver='newton-cg' is not available on Dask arrays; use "
                         f"solver='auto', 'newton-cholesky' or 'lbfgs'")
    # "auto" on Dask: Newton with the full Hessian while it fits the budget (also for several classes:
    # one pass of the blocks per step), else L-BFGS.
    solver = logistic.choose_logistic_solver(settings.solver, loss.n_params)
    if log is not None:
        log(f"{solver} on {len(loss.blocks)} Dask row blocks ({loss.K} coefficient row(s), {loss.P} columns), "
            f"Hessian (Newton) over every {loss.stride}-th row, elapsed {time.perf_counter() - t0:.1f} s")
    theta = _initial(settings, loss.K, loss.D, settings.fit_intercept)
    if solver == "newton-cholesky":
        check_memory(8 * 3 * loss.n_params**2, f"the {loss.n_params} x {loss.n_params} Hessian of newton-cholesky",
                     "use solver='lbfgs', which holds no Hessian")
        theta, n_iter, converged, fell_back = logistic.newton_cholesky(loss, theta, settings.max_iter, settings.tol,
                                                                       log)
        if not converged and not fell_back:
            warnings.warn(f"newton-cholesky did not converge within max_iter={settings.max_iter} iterations "
                          f"(tol={settings.tol:g}). Increase the number of iterations (max_iter) or use "
                          f"solver='lbfgs'.", ConvergenceWarning, stacklevel=4)
    else:
        theta, n_iter, converged = logistic.lbfgs(loss, theta, settings.max_iter, settings.tol, log, warn=True)
    f = loss.evaluate(theta)[0]
    Theta = theta.reshape(loss.K, loss.P)
    if not np.all(np.isfinite(Theta)):
        raise ValueError(f"{settings.owner}: the solution is not finite; rescale X (e.g. with StandardScaler).")
    coef = Theta[:, :loss.D].copy()
    intercept = Theta[:, loss.D].copy() if settings.fit_intercept else np.zeros(loss.K)
    if log is not None:
        log(f"fit done ({solver}, {n_iter} iterations, {loss.passes} passes over the blocks), "
            f"elapsed {time.perf_counter() - t0:.1f} s")
    return (coef, intercept, np.array([n_iter], dtype=np.int32), bool(converged),
            f * settings.C * loss.total, solver)
