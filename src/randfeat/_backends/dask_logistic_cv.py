"""LogisticRegressionCV on Dask arrays: the folds' C paths on the row blocks, the loops on the client.

The in-memory engine (``randfeat._solvers.logistic_path``) copies each
fold's training rows out of the held features.  Here nothing moves:

* Each row block becomes, once per gamma, its ``_BlockLoss`` on its worker
  (``dask_logistic.persisted_blocks``: the block's features made there and
  held, its labels and its weights, class weights included).
* A fold's training set is the same blocks with the held-out rows' weights
  set to 0 (``_fold_block``: a new weight vector per block, the rows
  shared), so no row is re-partitioned and no feature made again per fold
  or per C.  A zero weight adds exactly nothing to a block's loss, gradient
  or Hessian, so the fold's loss is the in-memory fold's (its sums grouped
  by blocks).
* The C path runs on the client as in memory: in the given order, each fit
  starting from the previous C's solution, Newton starting each C from the
  data part of the previous C's last Hessian (``logistic.newton_cholesky``
  with a ``HessianCarry``, driving ``DaskLogisticLoss``, whose ``set_C``
  changes only the penalty), or L-BFGS; each evaluation is one pass over the blocks (one tree reduction).
* After a fold's path, one task per block computes its held-out rows'
  decision values under each C's model (n_test × K floats per C come back);
  the client scores them with the estimator's scorer, as in memory.
* The refit is the Dask ``LogisticRegression`` fit (``solve_on_blocks``) on
  the blocks already made, from the folds' mean model at the chosen C.

With ``gammas`` the map is drawn once and rescaled per gamma when it
declares the gamma path (as in memory), else fitted per gamma from the
blocks (``fit_map``); one gamma's blocks are held at a time.  ``"auto"``
reads the median heuristic's rows from the workers (a few thousand rows).

Equal to the in-memory selection to the solvers' tolerance: the folds (the
same ``check_cv`` on the same labels), the scores and the choice are the
same; the sums are grouped by blocks.  Newton's Hessian, which only
steers, is summed over the in-memory fold's rows (every stride-th of its
training rows) when the blocks' features are held, so both take the same
steps (at any tol, to the float32 Hessian's rounding); blocks whose
features are made again per pass use every stride-th row of X.  ``solver="newton-cg"`` is refused, as for ``LogisticRegression``.
"""

import dataclasses
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from .._core.protocols import MapCapability
from .._solvers import logistic
from .._solvers.logistic_path import PathSelection, fit_at_C, folds
from .._solvers.selection import AUTO_GAMMA_FACTORS, as_positive
from .dask_logistic import (DaskLogisticLoss, _BlockLoss, block_offsets, check_row_independent, dask_solver,
                            fitted_map, hessian_stride, persisted_blocks, solve_on_blocks, weight_total)


# ------------------------------------------------------------------ on the workers
class _FoldBlockLoss(_BlockLoss):
    """A block's loss on a fold's training rows, Newton's Hessian over the in-memory fold's row sample.

    In memory a fold's Hessian sums every ``stride``-th of its training rows
    (counted in the fold, ``stride`` from their number); ``sample`` holds
    those of this block (local row numbers, sorted), so both steer alike.
    """

    def __init__(self, block, weights, sample, stride):
        super().__init__(block.rows, block.labels, weights, 2 if block.K == 1 else block.K, block.n_threads,
                         block.offset, stride)
        self.sample = sample
        # Where each of the rows' chunks ends (held rows only: their chunks are known without making them).
        bounds = [(0, block.rows.n_rows)] if sp.issparse(block.rows.held) else block.rows.bounds
        self._ends = {s: e for s, e in bounds}

    def _sampled(self, start):
        if self.stride == 1:  # every row (newton_cholesky's last steps, as in memory)
            return slice(None)
        lo, hi = np.searchsorted(self.sample, [start, self._ends[start]])
        return self.sample[lo:hi] - start


def _fold_block(block, test, sample, stride):
    """A block's loss on a fold's training rows: its rows ``test`` (local, sorted) weigh 0; the rows are shared.

    ``sample`` (local, sorted) and ``stride``: the in-memory fold's Hessian rows in this block, when its
    rows are held (their chunks known); else (None) every ``block.stride``-th row of X, as the Dask fit.
    """
    weights = block.weights.copy()
    weights[test] = 0.0
    if sample is not None and block.rows.held is not None:
        return _FoldBlockLoss(block, weights, sample, stride)
    return _BlockLoss(block.rows, block.labels, weights, 2 if block.K == 1 else block.K, block.n_threads,
                      block.offset, block.stride)


def _held_out_values(block, test, coefs):
    """Decision values (A, len(test), K), float64, of the block's rows ``test`` under each model coefs (A, K, P)."""
    rows = block.rows
    A, K, _ = coefs.shape
    D = rows.n_features
    out = np.empty((A, len(test), K))
    W = coefs[:, :, :D].reshape(A * K, D).T
    bias = coefs[:, :, D] if rows.fit_intercept else np.zeros((A, K))
    for s, e, Zt in rows.blocks():
        lo, hi = np.searchsorted(test, [s, e])
        if lo == hi:
            continue
        F = np.asarray(Zt[test[lo:hi] - s] @ W, dtype=np.float64)  # (n, A·K)
        out[:, lo:hi, :] = F.reshape(hi - lo, A, K).transpose(1, 0, 2) + bias[:, None, :]
    return out


# ------------------------------------------------------------------ on the client
class _ClientRows:
    """The rows a map's ``_auto_gamma`` indexes, brought from the workers (``DaskSummary.rows``) when indexed."""

    def __init__(self, summary):
        self.summary, self.shape = summary, (summary.n_samples, summary.n_features)

    def __getitem__(self, index):
        return self.summary.rows(index)


def _gamma_maps(backend, template, X, gammas):
    """(gammas as an array, one fitted map per gamma), as in memory: one draw rescaled where the map declares it."""
    if isinstance(gammas, str):  # "auto": the map's own heuristic, on rows brought from the workers
        gammas = template._auto_gamma(_ClientRows(backend.summary(X))) * np.asarray(AUTO_GAMMA_FACTORS)
    else:
        gammas = as_positive("gammas", gammas)
    maps = [clone(template).set_params(gamma=float(g)) for g in gammas]
    if template.has(MapCapability.GAMMA_PATH) and not template.has(MapCapability.MERGEABLE_VOCABULARY):
        states = maps[0]._draw_path(backend.summary(X), [m.gamma for m in maps])
        for m, state in zip(maps, states):
            m._state, m.n_features_in_ = state, X.shape[1]
    else:
        for m in maps:
            m._check_params()
            m._state, _ = backend.fit_map(m, X, return_features=False)
    for m in maps:
        check_row_independent(m, "LogisticRegressionCV")
    return gammas, maps


class _Folds:
    """The folds of ``cv`` and, per fold and block, its held-out rows and its Hessian sample (local, sorted)."""

    def __init__(self, settings, X, labels, K, P):
        self.pairs = folds(settings.cv, X, labels)
        offsets = block_offsets(X)
        ends = [s + n for s, n in zip(offsets, X.chunks[0])]

        def per_block(rows):
            cuts = np.searchsorted(rows, offsets + [ends[-1]])
            return [rows[cuts[b]:cuts[b + 1]] - s for b, s in enumerate(offsets)]

        self.held, self.samples = [], []  # per fold: (sorted held-out rows, per block); (per block, stride)
        for train, test in self.pairs:
            rows = np.unique(np.asarray(test, dtype=np.int64))
            self.held.append((rows, per_block(rows)))
            train = np.asarray(train, dtype=np.int64)
            stride = hessian_stride(len(train), K, P)  # LogisticLoss's rule on the fold's rows, as in memory
            self.samples.append((per_block(np.sort(train[::stride])), stride))


def _fold_path(settings, base, folds_, k, n_rows, n_classes, D, solver):
    """One fold's C path on the blocks: (coefs (A, K, P), n_iter (A,), held-out decision values per C)."""
    import dask

    t0 = time.perf_counter()
    fs = settings.fit
    rows, local = folds_.held[k]
    samples, stride = folds_.samples[k]
    task = dask.delayed(_fold_block, pure=False)
    blocks = list(dask.persist(*[task(b, t, h, stride) for b, t, h in zip(base, local, samples)]))
    try:
        total = weight_total(blocks)
        if not total > 0:
            raise ValueError(f"{fs.owner}: the sample weights of the training rows of fold {k + 1} sum to 0, so "
                             f"no row counts in its fits; give rows of every fold's training set a positive "
                             f"weight (or choose other folds)")
        loss = DaskLogisticLoss(blocks, n_rows, n_classes, D, fs.fit_intercept, settings.Cs[0], total=total)
        loss.stride = stride  # the fold's, as its in-memory loss's (newton_cholesky reads it)
        carry = logistic.HessianCarry() if solver == "newton-cholesky" else None
        theta = np.zeros(loss.n_params)
        coefs, n_iter = [], []
        for C in settings.Cs:
            loss.set_C(C)
            # No held row sample here: each new Hessian is a pass over the blocks.
            theta, it = fit_at_C(fs, loss, theta, solver, carry, None, k, C)
            if not np.all(np.isfinite(theta)):
                raise ValueError(f"{fs.owner}: the solution on fold {k + 1} at C={float(C):.6g} is not finite; "
                                 f"rescale X (e.g. with StandardScaler).")
            coefs.append(theta.reshape(loss.K, loss.P).copy())  # [coef, intercept] as in memory
            n_iter.append(int(it))
        passes = loss.passes
    finally:
        del blocks  # release the fold's weights on the workers
        loss = None
    coefs = np.stack(coefs)
    values = dask.delayed(_held_out_values, pure=False)
    shared = dask.delayed(coefs, pure=False)
    parts = dask.compute(*[values(b, t, shared) for b, t in zip(base, local)])
    F = np.concatenate(parts, axis=1)[:, np.searchsorted(rows, folds_.pairs[k][1]), :]
    if fs.log is not None:
        fs.log(f"fold {k + 1}: {len(settings.Cs)} Cs fitted ({solver}, {passes} passes over the Dask row "
               f"blocks) in {time.perf_counter() - t0:.2f} s, {sum(n_iter)} iterations")
    return coefs, np.array(n_iter, dtype=np.int32), list(F)


def _score_folds(settings, base, folds_, n_rows, n_classes, D):
    """Every fold's C path on the blocks ``base``: (scores (F, A), coefs_paths (F, A, K, P), n_iter (F, A))."""
    K = 1 if n_classes == 2 else n_classes
    solver = dask_solver(settings.fit, K * (D + int(settings.fit.fit_intercept)))  # as fold_path's rule
    runs = [_fold_path(settings, base, folds_, k, n_rows, n_classes, D, solver) for k in range(len(folds_.pairs))]
    # Scored once every fold is fitted, as in memory (a fold's error comes before a score's).
    scores = np.array([[settings.score(Fc, test) for Fc in run[2]] for run, (_, test) in zip(runs, folds_.pairs)],
                      dtype=np.float64)
    return scores, np.stack([run[0] for run in runs]), np.stack([run[1] for run in runs])


def _choose(settings, base, n_rows, n_classes, scores, paths, n_iter, features, t0):
    """scikit-learn's choice from the folds' scores (as ``logistic_path``'s): refit on the blocks, or the mean."""
    Cs, fs = settings.Cs, settings.fit
    D = paths.shape[-1] - int(fs.fit_intercept)
    if settings.refit:
        best = int(np.argmax(scores.sum(axis=0)))
        start = paths[:, best].mean(axis=0)  # (K, P): the refit starts from the folds' mean
        init = (start[:, :D], start[:, D] if fs.fit_intercept else np.zeros(start.shape[0]))
        loss = DaskLogisticLoss(base, n_rows, n_classes, D, fs.fit_intercept, float(Cs[best]), fs.log)
        r = solve_on_blocks(dataclasses.replace(fs, C=float(Cs[best]), init=init), loss, features, t0)
        return PathSelection(float(Cs[best]), r.coef, r.intercept, scores, paths, n_iter, features, r.solver)
    bests = np.argmax(scores, axis=1)
    theta = np.mean([paths[k, b] for k, b in enumerate(bests)], axis=0)
    intercept = theta[:, D] if fs.fit_intercept else np.zeros(theta.shape[0])
    return PathSelection(float(np.mean(Cs[bests])), theta[:, :D].copy(), intercept.copy(), scores, paths, n_iter,
                         features, None)


def select(backend, settings, template, X, y, w, targets):
    """Choose (gamma,) C on a Dask X: ``logistic_path.select``'s selection, the fits on the blocks.

    Parameters
    ----------
    backend : DaskBackend
    settings : PathSettings
    template : feature map or None
    X, y, w : Dask arrays with X's row chunks (w: the fits' weights, class weights included, or None)
    targets : ClassTargets

    Returns
    -------
    PathSelection
    """
    t0 = time.perf_counter()
    fs, log = settings.fit, settings.fit.log
    dask_solver(fs, 1)  # newton-cg refused before any work
    labels = backend.on_client(y)  # the folds are made from the labels, here
    N, n_classes = X.shape[0], targets.n_classes
    K = 1 if n_classes == 2 else n_classes
    labels = labels.reshape(labels.shape[0], -1)[:, 0]
    folds_by_width = {}  # the Hessian samples depend on the features' width P (per gamma)

    def folds_for(D):
        P = D + int(fs.fit_intercept)
        if P not in folds_by_width:
            folds_by_width[P] = _Folds(settings, X, labels, K, P)
        return folds_by_width[P]

    def blocks_of(features):
        D = X.shape[1] if features is None else int(features.n_features_out_)
        return D, persisted_blocks(fs, features, X, y, w, targets, hessian_stride(N, K, D + int(fs.fit_intercept)))

    if settings.gammas is None:
        features = fitted_map(backend, template, X, fs.owner)
        D, base = blocks_of(features)
        result = _score_folds(settings, base, folds_for(D), N, n_classes, D)
        sel = _choose(settings, base, N, n_classes, *result, features, t0)
        if log is not None:
            log(f"C={sel.C:.6g} selected in {time.perf_counter() - t0:.2f} s")
        return sel
    gammas, maps = _gamma_maps(backend, template, X, settings.gammas)
    results, base = [], None
    for i, fmap in enumerate(maps):
        base = None  # one gamma's blocks held at a time
        D, base = blocks_of(fmap)
        results.append(_score_folds(settings, base, folds_for(D), N, n_classes, D))
        if log is not None:
            log(f"gamma={gammas[i]:.6g}: best mean score {np.max(results[-1][0].mean(axis=0)):.6g}")
    gamma_scores = np.array([float(np.max(r[0].mean(axis=0))) for r in results])
    i = int(np.argmax(gamma_scores))  # the first best
    if settings.refit and i != len(maps) - 1:  # the refit reads the chosen gamma's blocks: made again
        base = None
        D, base = blocks_of(maps[i])
    sel = _choose(settings, base, N, n_classes, *results[i], maps[i], t0)
    if log is not None:
        log(f"gamma={gammas[i]:.6g}, C={sel.C:.6g} selected in {time.perf_counter() - t0:.2f} s")
    return dataclasses.replace(sel, gamma=float(gammas[i]), gammas=gammas, gamma_scores=gamma_scores)
