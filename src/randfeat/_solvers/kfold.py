"""k-fold selection of alpha: the pooled held-out predictions of one fit per fold for all alphas.

Per fold, every alpha from one fit: on sparse features the warm-started
CG alpha path (``cg_path.cg_ridge_path``, one preconditioner build per
fold), on dense features one eigendecomposition per fold.  With dense
features whose per-fold statistics fit in memory, one pass adds each row to
its test fold's ``RidgeStatistics``; fold k's training statistics are the
merge of the others' (exact, fixed order), and a second pass predicts each
row with its fold's models — the features are computed twice, not once per
fold (equal to a fit per fold to 1e-10).
"""

import time

import numpy as np
from sklearn.model_selection import check_cv

from .._core.memory_budget import available_memory
from .._linalg.products import make_products
from .._linalg.rowmerge import merged_problem
from .cg_path import cg_ridge_path
from .eigen import eigen_of, gram_decomposition
from .pipeline import accumulate, check_finite

#: Relative residual at which the k-fold path's CG fits stop (``Ridge``'s default tol).
CV_TOL = 1e-6
#: Per-fold statistics are accumulated in one pass when together they need at
#: most this fraction of the available memory.
FOLD_MEMORY_FRACTION = 0.5


def folds(settings, N, y_true):
    """Return the (train, test) index pairs of ``settings.cv`` (default 5 folds); every row tested once."""
    cv = check_cv(5 if settings.cv is None else settings.cv, y_true, classifier=settings.classifier)
    pairs = list(cv.split(np.zeros((N, 1)), y_true))
    tested = np.zeros(N, dtype=np.intp)
    for _, test in pairs:
        tested[test] += 1
    if np.any(tested != 1):
        raise ValueError(
            f"{settings.owner}: cv={settings.cv!r} must hold out every row exactly once (a K-fold "
            f"splitter such as KFold, StratifiedKFold or GroupKFold): the scores are computed on the "
            f"pooled held-out predictions."
        )
    return pairs


def _check_weight(settings, w, fold):
    """ValueError (as Ridge's) if a fold's training rows carry no weight: it would predict 0 for any alpha."""
    if not w.sum() > 0:
        where = "every training row" if fold is None else f"every training row of fold {fold + 1}"
        raise ValueError(
            f"{settings.owner}: sample_weight is zero for {where}, so no sample counts in that fit; "
            f"give rows of every fold's training set a positive weight (or choose other folds)"
        )


def fold_fit(settings, source, Y, w, alphas, n_threads, fold=None):
    """Fit on the rows of ``source`` for every alpha; return (coef (A, K, D), intercept (A, K))."""
    K = Y.shape[1]
    _check_weight(settings, w, fold)
    if source.sparse:
        Z, Y, w_cg, entries = merged_problem(source.Z, Y, None if np.all(w == 1) else w)
        ops = make_products(Z, n_threads, entries)
        try:
            results = cg_ridge_path(ops, Y, w_cg, alphas, fit_intercept=settings.fit_intercept, tol=CV_TOL,
                                    max_iter=None)
        finally:
            ops.close()
        for r in results:
            check_finite(r.coef, r.intercept, settings.owner)
        return (np.stack([r.coef.astype(np.float64) for r in results]),
                np.stack([np.asarray(r.intercept, dtype=np.float64).reshape(K) for r in results]))
    dec = gram_decomposition(source.dense_blocks(settings.chunk_size), Y, w, source.n_features,
                             settings.fit_intercept, n_threads, settings.owner)
    coef = np.stack([dec.coef(np.full(K, a)) for a in alphas])
    intercept = (dec.y_mean - coef @ dec.mean) if dec.centred else np.zeros((len(alphas), K))
    return coef, intercept


def fold_predict(settings, source, coef, intercept):
    """Return the predictions (n, K, A) of the per-alpha models on the rows of ``source``."""
    A, K, _ = coef.shape
    W = coef.reshape(A * K, -1).T  # (D, A·K)
    out = [np.asarray(Zb @ W, dtype=np.float64) for _, _, Zb, _ in source.dense_blocks(settings.chunk_size)]
    pred = np.concatenate(out, axis=0).reshape(-1, A, K) + intercept[None, :, :]
    return pred.transpose(0, 2, 1)


def kfold_predictions(settings, source, Y, w, y_true, alphas, n_threads):
    """Pooled held-out predictions (N, K, A): one fit per fold for all alphas; and the (train, test) pairs."""
    N, K = Y.shape
    pairs = folds(settings, N, y_true)
    if not source.sparse and _fold_statistics_fit(source.n_features, len(pairs), source.dtype):
        return _kfold_predictions_merged(settings, source, Y, w, alphas, n_threads, pairs), pairs
    pred = np.empty((N, K, alphas.size))
    for k, (train, test) in enumerate(pairs):
        t0 = time.perf_counter()
        coef, intercept = fold_fit(settings, source.rows(train), Y[train], w[train], alphas, n_threads, k)
        pred[test] = fold_predict(settings, source.rows(test), coef, intercept)
        if settings.log is not None:
            settings.log(f"fold {k + 1}/{len(pairs)}: {alphas.size} alphas fitted in {time.perf_counter() - t0:.2f} s")
    return pred, pairs


def _fold_statistics_fit(D, n_folds, dtype):
    """True if one D × D accumulator per fold fits half the available memory."""
    per_gram = D * D * (8 + (4 if dtype == np.float32 else 0))
    available, _ = available_memory()
    return available is None or n_folds * per_gram <= FOLD_MEMORY_FRACTION * available


def _kfold_predictions_merged(settings, source, Y, w, alphas, n_threads, pairs):
    """Dense features: ``kfold_predictions`` from mergeable per-fold statistics (see the module docstring)."""
    N, K = Y.shape
    D = source.n_features
    fold_of = np.empty(N, dtype=np.intp)
    for k, (_, test) in enumerate(pairs):
        fold_of[test] = k
    stats = accumulate(source.dense_blocks(settings.chunk_size), Y, w, D, settings.fit_intercept, n_threads,
                       groups=fold_of, n_groups=len(pairs))[0]
    models = []
    for k, (train_rows, _) in enumerate(pairs):
        _check_weight(settings, w[train_rows], k)
        train = None
        for j in range(len(pairs)):
            if j != k:
                train = stats[j] if train is None else train.merge(stats[j])
        dec = eigen_of(train, settings.owner)
        coef = np.stack([dec.coef(np.full(K, a)) for a in alphas])  # (A, K, D)
        intercept = (dec.y_mean - coef @ dec.mean) if dec.centred else np.zeros((len(alphas), K))
        models.append((coef.reshape(len(alphas) * K, D).T, intercept))
    pred = np.empty((N, K, alphas.size))
    for s, e, Zb, _ in source.dense_blocks(settings.chunk_size):
        for k, (W, intercept) in enumerate(models):
            rows = np.flatnonzero(fold_of[s:e] == k)
            if rows.size:
                p = np.asarray(Zb[rows] @ W, dtype=np.float64).reshape(rows.size, alphas.size, K)
                pred[s + rows] = (p + intercept[None, :, :]).transpose(0, 2, 1)
    return pred


def kfold_refit(settings, source, Y, w, col_alpha, n_threads):
    """The model on all rows at the chosen alpha(s): (coef (K, D), intercept (K,))."""
    K = Y.shape[1]
    col_alpha = np.asarray(col_alpha, dtype=np.float64)
    coef, intercept = np.empty((K, source.n_features)), np.empty(K)
    for a in np.unique(col_alpha):
        cols = np.flatnonzero(col_alpha == a)
        c, i = fold_fit(settings, source, Y[:, cols], w, np.array([a]), n_threads)
        coef[cols], intercept[cols] = c[0], i[0]
    return coef, intercept
