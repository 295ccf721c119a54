"""Choosing C (and gamma) for logistic regression on features: ``LogisticRegressionCV``'s engine.

As scikit-learn's ``LogisticRegressionCV``: for every fold of ``cv`` the
model is fitted on the training rows at each C of the grid, in the given
order, each fit starting from the previous C's solution (a warm start),
and each fold's held-out rows are scored at each C; the chosen C maximises
the sum of the folds' scores (``refit``, a ``logistic.fit`` on all the rows
from the folds' mean model there), or each fold's own best is averaged
(``refit=False``).

A fold's fits share its rows (``logistic.DesignRows``, made once) and
its ``logistic.LogisticLoss`` (``with_l2`` per C: the Hessian's row
sample held once); Newton (``logistic.newton_cholesky`` with a
``HessianCarry``) starts each C from the data part of the previous C's
last Hessian, so a new C costs a Cholesky factorisation and a few passes
for the gradient rather than a new Hessian; L-BFGS starts from the
previous C's solution; a solver this engine does not know runs through
``logistic.fit`` with ``LogisticSettings.init``.

The features of X are made once per gamma and held (N × D in X's float
dtype; binning's CSR stays CSR), so that every fold and every C reads them
without making them again: a fold's rows are a copy of its rows of that
matrix.  With ``gammas`` the map is drawn once and rescaled per gamma
(the map's gamma path, as ``RidgeCV``'s), one gamma's features held at a
time; the gamma whose best mean score over the Cs is highest wins.

Folds run in parallel threads when there are threads to spare: with T
threads and F folds, min(T, F) folds at once, each fit on T // min(T, F)
threads.  A fit's result does not depend on its thread count, so neither
does the selection.
"""

import dataclasses
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import check_cv

from .._core.memory_budget import check_memory
from .._core.threads import effective_n_threads
from . import logistic
from .logistic import DesignRows, LogisticLoss, LogisticSettings, choose_logistic_solver
from .pipeline import FeatureSource
from .selection import AUTO_GAMMA_FACTORS, as_positive

@dataclasses.dataclass(frozen=True)
class PathSettings:
    """The parameters of a C (and gamma) selection, as the engine reads them (a ``LogisticRegressionCV``'s).

    Attributes
    ----------
    fit : LogisticSettings
        The settings of every fit (its ``C`` and ``init`` are set per fit).
    Cs : ndarray of float
        The grid, in the order the path runs (scikit-learn's order).
    gammas : sequence of float, "auto" or None
    cv : int, splitter or None
        As ``sklearn.model_selection.check_cv`` reads it (stratified for classes).
    score : callable
        ``score(F, test)``: the held-out score (higher is better) of decision
        values F (n_test × K) of the rows ``test``.
    refit : bool
    """

    fit: LogisticSettings
    Cs: np.ndarray
    gammas: object = None
    cv: object = None
    score: Callable | None = None
    refit: bool = True


@dataclasses.dataclass
class PathSelection:
    """What a selection found, before it becomes an estimator's fitted attributes."""

    C: float  # the chosen C (refit=False: the mean of the folds' best Cs)
    coef: np.ndarray  # (K, D) float64
    intercept: np.ndarray  # (K,)
    scores: np.ndarray  # (n_folds, n_Cs), at the chosen gamma
    coefs_paths: np.ndarray  # (n_folds, n_Cs, K, D + fit_intercept)
    n_iter: np.ndarray  # (n_folds, n_Cs) int32
    features: object  # the fitted map (at the chosen gamma), or None
    solver: str | None  # the refit's solver (None without refit)
    gamma: float | None = None
    gammas: np.ndarray | None = None
    gamma_scores: np.ndarray | None = None


def folds(cv, X, y):
    """The (train, test) index pairs of ``cv`` (None: 5 stratified folds, as scikit-learn's check_cv)."""
    return list(check_cv(cv, y, classifier=True).split(X, y))


def held_features(source, settings):
    """The features of ``source`` as one matrix held in memory (X's dtype; CSR stays CSR)."""
    if source.Z is not None:
        return source.Z
    N, D = source.n_rows, source.n_features
    itemsize = np.dtype(source.dtype).itemsize
    check_memory(N * D * itemsize, f"the features of X held for {settings.fit.owner} ({N} x {D}, {source.dtype})",
                 "every fold and C reads them; use fewer rows or a narrower map, or choose C with "
                 "LogisticRegressionCV on a sample and fit LogisticRegression(C=...) on all the rows")
    Z = np.empty((N, D), dtype=source.dtype)
    for s, e, Zb, _ in source.dense_blocks(settings.fit.chunk_size):
        Z[s:e] = Zb
    return Z


def _decision(Z, coef, intercept):
    """Decision values (n × K) of rows Z, float64."""
    F = Z @ coef.T if sp.issparse(Z) else np.asarray(Z, dtype=np.float64) @ coef.T
    return np.asarray(F) + intercept


def fold_path(settings, Z, labels, n_classes, w, train, test, n_threads, fold):
    """The C path on one fold: (coefs (A, K, P), n_iter (A,), held-out decision values (A, n_test, K)).

    The fold's rows are made once (``DesignRows`` of its copy of Z's rows);
    Newton carries its Hessian from C to C (``HessianCarry``), L-BFGS starts
    from the previous C's solution; a solver this engine does not know runs
    through ``logistic.fit`` with ``init``.
    """
    t0 = time.perf_counter()
    fs = settings.fit
    Ztrain, Ztest = Z[train], Z[test]
    wtrain = np.ones(len(train)) if w is None else w[train]
    total = float(wtrain.sum())
    if not total > 0:
        raise ValueError(f"{fs.owner}: the sample weights of the training rows of fold {fold + 1} sum to 0, so "
                         f"no row counts in its fits; give rows of every fold's training set a positive weight "
                         f"(or choose other folds)")
    rows = DesignRows(FeatureSource(None, None, Ztrain), fs.fit_intercept, fs.chunk_size)
    K, P, D = (1 if n_classes == 2 else n_classes), rows.width, rows.n_features
    solver = choose_logistic_solver(fs.solver, K * P)
    carry = logistic.HessianCarry() if solver == "newton-cholesky" else None
    theta = np.zeros(K * P)
    coefs, n_iter, F = [], [], []
    loss = None
    for C in settings.Cs:
        if solver in ("newton-cholesky", "lbfgs"):
            l2 = 1.0 / (float(C) * total)
            loss = (LogisticLoss(rows, labels[train], wtrain / total, n_classes, l2, n_threads) if loss is None
                    else loss.with_l2(l2))
            sampled = loss.sampled_hessian if loss.stride > 1 else None
            theta, it = fit_at_C(fs, loss, theta, solver, carry, sampled, fold, C)
            Theta = theta.reshape(K, P)
            coef = Theta[:, :D].copy()
            intercept = Theta[:, D].copy() if fs.fit_intercept else np.zeros(K)
        else:
            init = None if not coefs else (coef, intercept)
            r = logistic.fit(dataclasses.replace(fs, C=float(C), init=init, n_jobs=n_threads, log=None), None,
                             Ztrain, labels[train], n_classes, wtrain)
            coef, intercept, it = r.coef, r.intercept, int(r.n_iter[0])
        if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
            raise ValueError(f"{fs.owner}: the solution on fold {fold + 1} at C={float(C):.6g} is not finite; "
                             f"rescale X (e.g. with StandardScaler).")
        coefs.append(np.hstack([coef, intercept[:, None]]) if fs.fit_intercept else coef)
        n_iter.append(int(it))
        F.append(_decision(Ztest, coef, intercept))
    if fs.log is not None:
        fs.log(f"fold {fold + 1}: {len(settings.Cs)} Cs fitted ({solver}) in {time.perf_counter() - t0:.2f} s, "
               f"{sum(n_iter)} iterations")
    return np.stack(coefs), np.array(n_iter, dtype=np.int32), F


def fit_at_C(fs, loss, theta, solver, carry, sampled, fold, C):
    """One C of a fold's path from θ (the previous C's solution): (θ, iterations), warning when it stops short.

    ``solver`` "newton-cholesky" (``carry``: the path's ``HessianCarry``;
    ``sampled``: the loss's held-sample Hessian or None) or "lbfgs".  The
    in-memory path and the Dask one (``dask_logistic_cv``) both run it.
    """
    if carry is not None:
        theta, it, converged, _ = logistic.newton_cholesky(loss, theta, fs.max_iter, fs.tol, None, sampled, carry)
    else:
        theta, it, converged = logistic.lbfgs(loss, theta, fs.max_iter, fs.tol)
    if not converged:
        warnings.warn(f"{solver} did not converge within max_iter={fs.max_iter} iterations (tol={fs.tol:g}) "
                      f"on fold {fold + 1} at C={float(C):.6g}. Increase the number of iterations "
                      f"(max_iter).", ConvergenceWarning, stacklevel=3)
    return theta, it


def _workers(n_threads, n_folds):
    """(folds run at once, threads per fit)."""
    at_once = max(1, min(n_threads, n_folds))
    return at_once, max(1, n_threads // at_once)


def score_folds(settings, Z, labels, n_classes, w, pairs):
    """Every fold's C path on features Z: (scores (F, A), coefs_paths (F, A, K, P), n_iter (F, A))."""
    n_threads = effective_n_threads(settings.fit.n_jobs)
    at_once, per_fit = _workers(n_threads, len(pairs))

    def run(k):
        train, test = pairs[k]
        return fold_path(settings, Z, labels, n_classes, w, train, test, per_fit, k)

    if at_once > 1:
        with ThreadPoolExecutor(at_once) as pool:
            paths = list(pool.map(run, range(len(pairs))))
    else:
        paths = [run(k) for k in range(len(pairs))]
    scores = np.array([[settings.score(F, test) for F in path[2]] for path, (_, test) in zip(paths, pairs)],
                      dtype=np.float64)
    return scores, np.stack([p[0] for p in paths]), np.stack([p[1] for p in paths])


def _gamma_maps(template, X, gammas):
    """(gammas as an array, one fitted map per gamma): ``RidgeCV``'s resolution of ``gammas`` and the gamma path."""
    if isinstance(gammas, str):  # "auto": the map knows its kernel's distance
        gammas = template._auto_gamma(X) * np.asarray(AUTO_GAMMA_FACTORS)
    else:
        gammas = as_positive("gammas", gammas)
    return gammas, clone(template)._fit_gamma_path(X, gammas)


def select(settings, template, X, labels, n_classes, w, y):
    """Choose (gamma,) C on validated X with class indices ``labels``; return a ``PathSelection``.

    Parameters
    ----------
    settings : PathSettings
    template : feature map or None
    X : validated ndarray or CSR matrix
    labels : ndarray (N,) of int
    n_classes : int
    w : ndarray (N,) float64 or None
        The fits' weights (sample weights times class weights).
    y : ndarray (N,)
        The labels as given (what ``cv`` splits on).
    """
    t0 = time.perf_counter()
    log = settings.fit.log
    pairs = folds(settings.cv, X, y)
    if settings.gammas is None:
        source = FeatureSource.fit(template, X)
        Z = held_features(source, settings)
        scores, paths, n_iter = score_folds(settings, Z, labels, n_classes, w, pairs)
        sel = _choose(settings, Z, labels, n_classes, w, scores, paths, n_iter, source.features)
        if log is not None:
            log(f"C={sel.C:.6g} selected in {time.perf_counter() - t0:.2f} s")
        return sel
    gammas, maps = _gamma_maps(template, X, settings.gammas)
    results, Z = [], None
    for i, fmap in enumerate(maps):
        Z = None  # one gamma's features held at a time
        Z = held_features(FeatureSource.of_fitted(fmap, X), settings)
        results.append(score_folds(settings, Z, labels, n_classes, w, pairs))
        if log is not None:
            log(f"gamma={gammas[i]:.6g}: best mean score {np.max(results[-1][0].mean(axis=0)):.6g}")
    gamma_scores = np.array([float(np.max(r[0].mean(axis=0))) for r in results])
    i = int(np.argmax(gamma_scores))  # the first best
    if settings.refit and i != len(maps) - 1:  # the refit reads the chosen gamma's features: made again
        Z = None
        Z = held_features(FeatureSource.of_fitted(maps[i], X), settings)
    sel = _choose(settings, Z, labels, n_classes, w, *results[i], maps[i])
    if log is not None:
        log(f"gamma={gammas[i]:.6g}, C={sel.C:.6g} selected in {time.perf_counter() - t0:.2f} s")
    return dataclasses.replace(sel, gamma=float(gammas[i]), gammas=gammas, gamma_scores=gamma_scores)


def _choose(settings, Z, labels, n_classes, w, scores, paths, n_iter, features):
    """scikit-learn's choice from the folds' scores: refit at the best C, or the mean of the folds' bests."""
    Cs = settings.Cs
    fit_intercept = settings.fit.fit_intercept
    D = paths.shape[-1] - int(fit_intercept)
    if settings.refit:
        best = int(np.argmax(scores.sum(axis=0)))
        start = paths[:, best].mean(axis=0)  # (K, P): the refit starts from the folds' mean
        init = (start[:, :D], start[:, D] if fit_intercept else np.zeros(start.shape[0]))
        r = logistic.fit(dataclasses.replace(settings.fit, C=float(Cs[best]), init=init), None, Z, labels,
                         n_classes, w)
        return PathSelection(float(Cs[best]), r.coef, r.intercept, scores, paths, n_iter, features, r.solver)
    bests = np.argmax(scores, axis=1)
    theta = np.mean([paths[k, b] for k, b in enumerate(bests)], axis=0)
    intercept = theta[:, D] if fit_intercept else np.zeros(theta.shape[0])
    return PathSelection(float(np.mean(Cs[bests])), theta[:, :D].copy(), intercept.copy(), scores, paths, n_iter,
                         features, None)
