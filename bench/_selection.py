"""Model selection for Table 1: the grid, the score, and choosing it.

Every method gets the same budget: ``gamma = g0 × {multipliers}`` (g0 the
median heuristic of the task for the method's kernel) and ``alpha = λ ×
n_rows`` for λ in the profile's grid (C in SVC_CS for the SVM), on the
first ``sel_rows`` training rows.  randfeat's rows choose with
``randfeat.RidgeCV`` / ``RidgeClassifierCV`` on those rows (``gammas=`` and
``alphas=`` the grid; leave-one-out in closed form for Fourier features,
5-fold CG for binning; accuracy as the classification score); the other
methods fit each point on the selection rows and score it on the first
``val_rows`` validation rows.  The lowest error wins; its selection time
is reported beside the final fit's.
"""

import time

import numpy as np

from _harness import progress

SVC_CS = (1.0, 10.0, 100.0)
PREDICT_CHUNK = 20000  # rows per predict call: bounds the memory of dense-feature pipelines


def param_grid(method, task, profile):
    """The grid points (dicts of gamma and lam or C) a method is selected over."""
    gammas = [None] if method.kernel is None else [task.g0[method.kernel] * m for m in profile["gamma_mults"]]
    out = []
    for g in gammas:
        if method.grid_c and task.kind == "classification":
            out += [{"gamma": g, "C": c} for c in SVC_CS]
        else:
            out += [{"gamma": g, "lam": lam} for lam in profile["lambdas"]]
    return out


def score(task, y_true, y_pred):
    """% misclassified, or normalised RMSE in % (RMSE / std of the targets)."""
    if task.kind == "classification":
        return 100.0 * float(np.mean(np.asarray(y_pred) != np.asarray(y_true)))
    y_true = np.asarray(y_true, dtype=float)
    rmse = np.sqrt(np.mean((np.asarray(y_pred, dtype=float) - y_true) ** 2))
    return 100.0 * float(rmse / max(np.std(y_true), 1e-300))


def predict_chunked(est, X):
    """``est.predict(X)`` in blocks of PREDICT_CHUNK rows."""
    parts = [est.predict(X[i:i + PREDICT_CHUNK]) for i in range(0, X.shape[0], PREDICT_CHUNK)]
    return np.concatenate(parts)


def fmt_params(p):
    """A grid point as text: "gamma=0.025 lam=0.001"."""
    return " ".join(f"{k}={v:.3g}" for k, v in p.items() if v is not None)


def select_by_ridge_cv(method, task, profile, seed, Xs, ys):
    """Choose (gamma, lam) with RidgeCV / RidgeClassifierCV on the selection rows; return (point, [(point, cv error)])."""
    import randfeat

    n_sel = Xs.shape[0]
    classify = task.kind == "classification"
    est_cls = randfeat.RidgeClassifierCV if classify else randfeat.RidgeCV
    lambdas = np.asarray(profile["lambdas"], dtype=float)
    gammas = [task.g0[method.kernel] * m for m in profile["gamma_mults"]]
    template = method.features(task, seed)
    est = est_cls(alphas=lambdas * n_sel, features=template, gammas=gammas,
                  cv=None if method.cv_select == "loo" else method.cv_select,
                  scoring="accuracy" if classify else None, n_jobs=template.n_jobs)
    est.fit(Xs, ys)
    best = {"gamma": float(est.gamma_), "lam": float(est.alpha_) / n_sel}
    # The cross-validated score of each gamma's best alpha, as an error in %
    # (accuracy -> % misclassified; squared error -> normalised RMSE).
    if classify:
        errs = [100.0 * (1.0 - s) for s in est.gamma_scores_]
    else:
        errs = [100.0 * float(np.sqrt(max(-s, 0.0)) / max(np.std(ys), 1e-300)) for s in est.gamma_scores_]
    tried = [({"gamma": float(g), "lam": None}, e) for g, e in zip(est.gammas_, errs)]
    progress(f"{task.name}: {method.label}: {type(est).__name__} chose {fmt_params(best)}")
    return best, tried


def select(method, task, profile, seed):
    """Choose the method's hyper-parameters; return (best point, [(point, error)], n_sel, selection seconds).

    randfeat's rows (``method.cv_select``): ``select_by_ridge_cv``; the
    others: every grid point fitted on the selection rows and scored on
    the validation rows.
    """
    t0 = time.perf_counter()
    n_sel = min(profile["sel_rows"], task.n_train)
    Xs, ys = task.X_train[:n_sel], task.y_train[:n_sel]
    if method.cv_select is not None:
        best, tried = select_by_ridge_cv(method, task, profile, seed, Xs, ys)
        return best, tried, n_sel, time.perf_counter() - t0
    Xv, yv = task.X_val[:profile["val_rows"]], task.y_val[:profile["val_rows"]]
    grid = param_grid(method, task, profile)
    tried = []
    for k, p in enumerate(grid):
        est = method.make(task, p, n_sel, seed)
        est.fit(Xs, ys)
        err = score(task, yv, predict_chunked(est, Xv))
        tried.append((p, err))
        progress(f"{task.name}: {method.label}: select {k + 1}/{len(grid)} {fmt_params(p)} -> val {err:.2f}%")
    best = min(tried, key=lambda t: t[1])[0]
    return best, tried, n_sel, time.perf_counter() - t0
