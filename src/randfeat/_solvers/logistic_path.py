"""Choosing C (and gamma) for logistic regression on features: ``LogisticRegressionCV``'s engine.

As scikit-learn's ``LogisticRegressionCV``: for every fold of ``cv`` the
model is fitted on the training rows at each C of the grid, in the given
order, each fit starting from the previous C's solution (a warm start),
and each fold's held-out rows are scored at each C; the chosen C maximises
the sum of the folds' scores (``refit``, a ``logistic.fit`` on all the rows
from the folds' mean model there), or each fold's own best is averaged
(``refit=False``).

A fold's fits share its rows (``logistic.DesignRows``, made once) and
``logistic.LogisticLoss``: Newton (``NewtonPath``) keeps the data part of
its Hessian from one C to the next, so a new C costs a Cholesky
factorisation and a few passes for the gradient rather than a pass summing
the N·P² Hessian products; L-BFGS starts from the previous C's solution; a
solver this engine does not know runs through ``logistic.fit`` with
``LogisticSettings.init``.

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
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import check_cv

from .._core.memory_budget import check_memory
from .._core.threads import effective_n_threads, single_threaded_blas
from . import logistic
from .logistic import DesignRows, LogisticLoss, LogisticSettings, choose_logistic_solver
from .pipeline import FeatureSource
from .selection import AUTO_GAMMA_FACTORS, as_positive

#: Newton's line search (as ``logistic.newton_cholesky``'s): Armijo's constant, the most step halvings;
#: the Hessian is kept while a full step shrinks max |gradient| at least ``KEEP_HESSIAN`` times.
ARMIJO = 2.0**-11
MAX_HALVINGS = 20
KEEP_HESSIAN = 0.8


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
    Newton carries its Hessian from C to C (``NewtonPath``), L-BFGS starts
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
    newton = NewtonPath() if solver == "newton-cholesky" else None
    theta = np.zeros(K * P)
    coefs, n_iter, F = [], [], []
    for C in settings.Cs:
        if solver in ("newton-cholesky", "lbfgs"):
            loss = LogisticLoss(rows, labels[train], wtrain / total, n_classes, 1.0 / (float(C) * total), n_threads)
            if newton is not None:
                theta, it, converged = newton.solve(loss, theta, fs.max_iter, fs.tol)
            else:
                theta, it, converged = logistic.lbfgs(loss, theta, fs.max_iter, fs.tol)
            if not converged:
                warnings.warn(f"{solver} did not converge within max_iter={fs.max_iter} iterations (tol={fs.tol:g}) "
                              f"on fold {fold + 1} at C={float(C):.6g}. Increase the number of iterations "
                              f"(max_iter).", ConvergenceWarning, stacklevel=2)
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


class NewtonPath:
    """Newton's method along a C path, the data part of its Hessian carried from one C to the next.

    The Hessian of the scaled objective is Zᵀ diag(s) Z (data, summed by
    ``LogisticLoss``) plus l2 on the penalised diagonal; only the l2 part
    changes with C.  So the data part of the last Hessian is kept: a new C
    costs a Cholesky factorisation (P³/3) instead of a pass summing
    N·P² products, and the data part is summed again (at the current θ)
    only when a step shrinks max |gradient| by less than ``KEEP_HESSIAN`` or
    its line search fails.  The gradient, the objective and the stopping
    test are exact, as ``logistic.newton_cholesky``'s (scikit-learn's
    criterion: max |gradient| <= tol and half the Newton decrement <= tol).
    """

    def __init__(self):
        self.data, self.dtype = None, None

    def _refresh(self, loss, theta):
        """Sum the Hessian at θ (one pass that also gives f and g); keep its data part."""
        if self.dtype is not None:
            loss.hessian_dtype = self.dtype
        f, g, H = loss.evaluate(theta, hessian=True)
        H[np.diag_indices_from(H)] -= loss.l2 * loss.penalty_mask().ravel()
        self.data = H
        return f, g

    def _factor(self, loss, theta):
        """(A, solve): A = data + l2 on the diagonal, and d ↦ the step solving A d = −g."""
        null = loss.null_direction()
        while True:
            A = self.data.copy()
            A[np.diag_indices_from(A)] += loss.l2 * loss.penalty_mask().ravel()
            # The multinomial intercepts' common shift is a null direction: made definite there, projected out.
            B = A if null is None else A + np.outer(null, null) * max(1.0, float(np.mean(np.diag(A))))
            try:
                with single_threaded_blas():
                    factor = scipy.linalg.cho_factor(B, lower=True, check_finite=False)
                break
            except np.linalg.LinAlgError:
                if loss.hessian_dtype != np.float64:  # float32 products lost definiteness: sum in float64
                    self.dtype = np.float64
                    self._refresh(loss, theta)
                    continue
                factor = None
                break

        def solve(g):
            with single_threaded_blas():
                if factor is not None:
                    d = scipy.linalg.cho_solve(factor, -g, check_finite=False)
                else:
                    d = scipy.linalg.lstsq(B, -g, check_finite=False, cond=1e-12)[0]
            return d if null is None else d - null * float(null @ d)

        return A, solve

    def solve(self, loss, theta, max_iter, tol):
        """Minimise ``loss`` from θ; return (θ, iterations, converged)."""
        fresh = self.data is None
        if fresh:
            f, g = self._refresh(loss, theta)
        else:
            f, g, _ = loss.evaluate(theta)
        A, step = self._factor(loss, theta)
        eps = np.finfo(np.float64).eps
        it = 0
        while it < max_iter:
            it += 1
            d = step(g)
            slope = float(g @ d)
            t, accepted = 1.0, False
            if slope < 0:
                for _ in range(MAX_HALVINGS + 1):
                    ft, gt, _ = loss.evaluate(theta + t * d)
                    if ft <= f + ARMIJO * t * slope or (
                            ft - f <= 64 * eps * abs(f) and np.abs(gt).sum() < np.abs(g).sum()):
                        accepted = True
                        break
                    t /= 2
            if not accepted:
                if not fresh:  # a kept Hessian: sum it here and retry this step
                    f, g = self._refresh(loss, theta)
                    A, step = self._factor(loss, theta)
                    fresh, it = True, it - 1
                    continue
                theta, n, converged = logistic.lbfgs(loss, theta, max(1, max_iter - it), tol)
                return theta, it + n, converged
            shrink = float(np.max(np.abs(gt))) / max(float(np.max(np.abs(g))), np.finfo(float).tiny)
            theta, f, g = theta + t * d, ft, gt
            with single_threaded_blas():
                decrement = 0.5 * float(d @ (A @ d))
            if float(np.max(np.abs(g))) <= tol and decrement <= tol:
                return theta, it, True
            if t == 1.0 and shrink <= KEEP_HESSIAN:
                fresh = False
                continue
            f, g = self._refresh(loss, theta)
            A, step = self._factor(loss, theta)
            fresh = True
        return theta, max_iter, False


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
