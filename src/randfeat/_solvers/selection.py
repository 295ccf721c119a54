"""Choosing alpha (and gamma) for ridge on features without refitting: ``RidgeCV``'s engine.

Every alpha is scored from one eigendecomposition (``eigen.py``) by its
exact leave-one-out residuals (``loo.py``) or by GCV, or from one fit per
fold for all alphas (``kfold.py``); the model is then the ridge solution at
the chosen alpha.  With gammas, the map's random variables are drawn once
and rescaled per gamma (the feature-map contract's gamma path), and with
dense features all the gammas' Gram matrices are accumulated in one pass
over X when they fit in memory.

Scores follow scikit-learn's ``RidgeCV``: with ``scoring=None`` the mean of
w_i·e_i² (negated), otherwise the scorer applied to the held-out
predictions.
"""

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from .._core.memory_budget import available_memory
from .._core.threads import effective_n_threads
from .eigen import eigen_of, gram_decomposition, kernel_decomposition
from .kfold import kfold_predictions, kfold_refit
from .loo import LooScores, loo_block, loo_residuals
from .pipeline import CHOLESKY_MAX_FEATURES, DEFAULT_CHUNK_BYTES, FeatureSource, accumulate, held_whole

#: ``gammas="auto"``: the median heuristic's gamma times these factors.
AUTO_GAMMA_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
#: ``gammas`` with dense features: the per-gamma Gram matrices are accumulated
#: in one pass over X when together they need at most this fraction of the
#: available memory (else one pass per gamma).
JOINT_PASS_MEMORY_FRACTION = 0.5


@dataclasses.dataclass(frozen=True)
class SelectionSettings:
    """The parameters of a selection, as the engine reads them (a ``RidgeCV``'s, validated).

    ``score(pred, y_true, per_target, params)`` scores held-out predictions
    (N, K, A) with the estimator's scorer (used when ``scoring`` is not None).
    """

    owner: str
    alphas: np.ndarray
    gammas: object = None
    cv: object = None
    scoring: object = None
    score: Callable | None = None
    classifier: bool = False
    fit_intercept: bool = True
    alpha_per_target: bool = False
    store_cv_results: bool = False
    chunk_size: int | None = None
    n_jobs: int | None = None
    log: Callable | None = None


@dataclasses.dataclass
class Selection:
    """What a selection found, before it becomes an estimator's fitted attributes."""

    alpha: object  # float, or (K,) with alpha_per_target
    best_score: object
    coef: np.ndarray  # (K, D) float64
    intercept: np.ndarray  # (K,)
    results: object  # what cv_results_ stores
    features: object  # the fitted map (at the chosen gamma), or None
    dtype: object
    gamma: float | None = None
    gamma_scores: np.ndarray | None = None
    gammas: np.ndarray | None = None


def as_positive(name, values):
    """Return ``values`` as a 1-d float64 array, or raise InvalidParameterError naming the problem."""
    try:
        a = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be positive numbers, got {values!r}") from None
    if a.size == 0:
        raise InvalidParameterError(f"{name} must contain at least one value, got an empty sequence")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise InvalidParameterError(f"{name} must be finite and > 0, got {a.tolist()}")
    return a


def _fmt(alpha):
    """An alpha (a float, or one per target) for a progress message."""
    return np.array2string(alpha, precision=6) if np.ndim(alpha) else f"{alpha:.6g}"


def select(settings, template, X, Y, w, y_true):
    """Choose (gamma,) alpha for targets Y (N × K) on validated X; return a ``Selection``.

    ``y_true`` is what a scorer compares predictions with (y as given;
    class labels for the classifier).  With ``gammas``, each gamma's map is
    the template with that gamma and the same ``random_state``; the gamma
    whose best score (mean over targets) is highest wins.
    """
    t0 = time.perf_counter()
    log = settings.log
    sample_weighted = w is not None  # weighted fits score with the weights, as scikit-learn's RidgeCV does
    w = _weights(settings, Y.shape[0], w)
    if settings.gammas is None:
        sel = select_alpha(settings, FeatureSource.fit(template, X), Y, w, y_true, sample_weighted)
        if log is not None:
            log(f"alpha={_fmt(sel.alpha)} (score {np.mean(sel.best_score):.6g}), "
                f"selected in {time.perf_counter() - t0:.2f} s")
        return sel
    if isinstance(settings.gammas, str):
        base = template._auto_gamma(X)  # the map knows its kernel's distance
        gammas = base * np.asarray(AUTO_GAMMA_FACTORS)
    else:
        gammas = as_positive("gammas", settings.gammas)
    maps = clone(template)._fit_gamma_path(X, gammas)
    if _joint_pass_fits(settings, maps, X):
        sels = _select_alpha_joint(settings, X, Y, w, y_true, sample_weighted, maps)
    else:
        sels = [select_alpha(settings, FeatureSource.of_fitted(m, X), Y, w, y_true, sample_weighted) for m in maps]
    gamma_scores = np.array([float(np.mean(sel.best_score)) for sel in sels])
    best = int(np.argmax(gamma_scores))  # first best
    sel = sels[best]
    if log is not None:
        for g, one, score in zip(gammas, sels, gamma_scores):
            log(f"gamma={g:.6g}: best alpha={_fmt(one.alpha)}, score {score:.6g}")
        log(f"gamma={gammas[best]:.6g}, alpha={_fmt(sel.alpha)} selected in {time.perf_counter() - t0:.2f} s")
    return dataclasses.replace(sel, gamma=float(gammas[best]), gamma_scores=gamma_scores, gammas=gammas)


def _weights(settings, N, sample_weight):
    w = np.ones(N) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if not w.sum() > 0:
        raise ValueError(f"{settings.owner} needs a positive total sample weight")
    return w


def _kernel_path_pays(settings, N, D, dtype):
    """True if streamed leave-one-out or GCV should materialise Z for the kernel path: N < D, Z within one chunk."""
    itemsize = 4 if dtype == np.float32 else 8
    return settings.cv in (None, "gcv") and N < D and N * D * itemsize <= DEFAULT_CHUNK_BYTES


def _kernel_fits(N):
    """True if the N × N kernel path's arrays (the kernel, its eigenvectors, a product) fit half the memory."""
    available, _ = available_memory()
    return available is None or 3 * N * N * 8 <= JOINT_PASS_MEMORY_FRACTION * available


def _joint_pass_fits(settings, maps, X):
    """True if the gammas' Gram matrices are accumulated in one pass over X.

    Needs streamed features (no map ``held_whole``), leave-one-out or GCV (not k-fold), not
    the kernel path (``_kernel_path_pays``: then each gamma's small N × N
    kernel is cheaper), and the n_gammas Gram accumulators within half the
    available memory.
    """
    if settings.cv not in (None, "gcv") or any(held_whole(m, X) for m in maps):
        return False
    D = int(maps[0].n_features_out_)
    if _kernel_path_pays(settings, X.shape[0], D, X.dtype):
        return False
    per_gram = D * D * (8 + (4 if X.dtype == np.float32 else 0))
    available, _ = available_memory()
    return available is None or len(maps) * per_gram <= JOINT_PASS_MEMORY_FRACTION * available


def _select_alpha_joint(settings, X, Y, w, y_true, sample_weighted, maps):
    """``select_alpha`` for every map at once: one pass over X for all Grams, one for all residuals."""
    alphas = settings.alphas
    n_threads = effective_n_threads(settings.n_jobs)
    sources = [FeatureSource(X, m, None) for m in maps]

    def joint_blocks():
        for s, e in sources[0].chunks(settings.chunk_size):
            Xb = X[s:e]
            yield s, e, [m._transform_validated(Xb) for m in maps], True

    stats = [row[0] for row in accumulate(joint_blocks(), Y, w, sources[0].n_features, settings.fit_intercept,
                                           n_threads)]
    # One eigendecomposition per gamma, each on one BLAS thread (its bits
    # must not depend on the thread count), up to n_threads at once.
    with ThreadPoolExecutor(max(1, min(n_threads, len(stats)))) as pool:
        decs = list(pool.map(lambda st: eigen_of(st, settings.owner), stats))
    del stats
    scorers = [_loo_scorer(settings, dec, alphas, Y, w, y_true, sample_weighted) for dec in decs]
    if settings.cv != "gcv":
        for s, e in sources[0].chunks(settings.chunk_size):
            Xb = X[s:e]
            for m, dec, scorer in zip(maps, decs, scorers):
                scorer.add(s, e, loo_block(dec, alphas, m._transform_validated(Xb), Y[s:e], w[s:e], n_threads))
    return [_alpha_choice(settings, dec, alphas, *scorer.finish(), m, X.dtype)
            for m, dec, scorer in zip(maps, decs, scorers)]


def select_alpha(settings, source, Y, w, y_true, sample_weighted):
    """Choose alpha for the features of ``source``; return a ``Selection``."""
    alphas = settings.alphas
    N, K = Y.shape
    n_threads = effective_n_threads(settings.n_jobs)
    D = source.n_features
    wide_sparse = source.sparse and D > CHOLESKY_MAX_FEATURES
    if settings.cv not in (None, "gcv") or (wide_sparse and settings.cv is None):
        pred, pairs = kfold_predictions(settings, source, Y, w, y_true, alphas, n_threads)
        return _choose_from_predictions(
            settings, pred, pairs, Y, w, sample_weighted, y_true, alphas,
            lambda col_alpha: kfold_refit(settings, source, Y, w, col_alpha, n_threads), source.features,
            source.dtype)
    if wide_sparse:
        raise ValueError(
            f"{settings.owner}(cv='gcv') needs the D × D eigendecomposition; the sparse features "
            f"give D={D} > {CHOLESKY_MAX_FEATURES}. Use cv=None or a number of folds (conjugate-gradient "
            f"fits per fold), or fewer bins/grids."
        )
    if source.streamed and _kernel_path_pays(settings, N, D, source.dtype) and np.all(w > 0):
        # Streamed features, but fewer rows than features and small: the
        # N × N kernel's eigendecomposition (N³) beats the D × D Gram's (D³).
        source = FeatureSource(source.X, source.features, source.materialised())
    if not source.streamed and N < D and settings.cv in (None, "gcv") and np.all(w > 0) and (
            not source.sparse or _kernel_fits(N)):
        # Fewer rows than features: the N × N kernel's eigendecomposition (N³) beats the D × D Gram's (D³).
        dec = kernel_decomposition(source.Z, Y, w, settings.fit_intercept, settings.owner)
    else:
        dec = gram_decomposition(source.dense_blocks(settings.chunk_size), Y, w, D, settings.fit_intercept,
                                 n_threads, settings.owner)
    scorer = _loo_scorer(settings, dec, alphas, Y, w, y_true, sample_weighted)
    if settings.cv != "gcv":
        for s, e, loo in loo_residuals(dec, alphas, source.dense_blocks(settings.chunk_size), Y, w, n_threads):
            scorer.add(s, e, loo)
    return _alpha_choice(settings, dec, alphas, *scorer.finish(), source.features, source.dtype)


def _loo_scorer(settings, dec, alphas, Y, w, y_true, sample_weighted):
    """A ``LooScores`` for the estimator's criterion (``cv='gcv'``: scores from ``dec`` alone)."""
    per_target = bool(settings.alpha_per_target) and Y.shape[1] > 1
    sample_weight = w if sample_weighted else None
    if settings.cv == "gcv":
        return LooScores(settings, alphas, Y, w, sample_weight, y_true, per_target, gcv=dec.gcv_errors(alphas))
    return LooScores(settings, alphas, Y, w, sample_weight, y_true, per_target)


def _best(scores, alphas, K):
    """The best alpha (per target for 2-D scores: first best, like scikit-learn) and its score."""
    if scores.ndim == 2:
        best = np.argmax(scores, axis=1)
        return alphas[best], scores[np.arange(K), best]
    best = int(np.argmax(scores))
    return float(alphas[best]), float(scores[best])


def _alpha_choice(settings, dec, alphas, scores, results, features, dtype):
    """The best alpha (per target with ``alpha_per_target``) and the model there, as a ``Selection``."""
    K = dec.u.shape[1]
    alpha, best_score = _best(scores, alphas, K)
    col_alpha = alpha if scores.ndim == 2 else np.full(K, alpha)
    coef = dec.coef(col_alpha)
    intercept = dec.y_mean - coef @ dec.mean if dec.centred else np.zeros(K)
    return Selection(alpha, best_score, coef, intercept, results, features, dtype)


def _choose_from_predictions(settings, pred, pairs, Y, w, sample_weighted, y_true, alphas, refit, features, dtype):
    """Score held-out predictions (N, K, A); refit at the best alpha.

    With ``cv`` an int or a splitter, as scikit-learn's ``RidgeCV`` (its
    ``GridSearchCV``): each fold's predictions are scored by the scorer (by
    default the estimator's ``score``, R² or accuracy; with the test rows'
    sample weights when the fit is weighted), and an alpha's score is the
    mean over the folds.  With
    ``cv=None`` on features too wide for leave-one-out (5-fold in its
    place), as leave-one-out is scored: the weighted mean squared error of
    the pooled predictions (or the scorer on them).
    """
    N, K, A = pred.shape
    per_target = bool(settings.alpha_per_target) and K > 1
    if settings.cv is not None:
        fold_scores = [settings.score(pred[test], y_true[test], per_target,
                                      {"sample_weight": w[test]} if sample_weighted else {}) for _, test in pairs]
        scores = np.mean(fold_scores, axis=0)
        results = pred
    elif settings.scoring is None:
        se = w[:, None, None] * (Y[:, :, None] - pred) ** 2
        total = se.sum(axis=0)
        scores = -total / N if per_target else -total.sum(axis=0) / (N * K)
        results = se
    else:
        params = {"sample_weight": w} if sample_weighted else {}
        scores = settings.score(pred, y_true, per_target, params)
        results = pred
    alpha, best_score = _best(scores, alphas, K)
    coef, intercept = refit(alpha if per_target else np.full(K, alpha))
    return Selection(alpha, best_score, coef, intercept if settings.fit_intercept else np.zeros(K), results,
                     features, dtype)
