"""bench/ridge.py, "hard cases": CG on binning features where it is slow.

Three cases (issue: "Binning+LS at any regularisation"), each solver on the
same matrix in the same run, every solver without an intercept (the same
problem for all four: scipy's LSMR has none), tol 1e-6:

(a) ``make_letter_like`` (20000 × 16, 26 classes), Laplacian binning with
    P = 50 grids at 4× and 16× the median-heuristic gamma, alpha in
    {1, 1e-2, 1e-4}: randfeat's CG with the heavy block + Jacobi
    preconditioner (the default before), with the heavy block + scaled
    identity (the default now), with the randomized Nyström
    preconditioner (rank chosen automatically), scikit-learn
    ``RidgeClassifier(solver="sparse_cg")`` and ``scipy.sparse.linalg.lsmr``
    with ``damp = √alpha``, one class after another.  Reported: iterations
    (max over the 26 one-vs-rest targets), time including any
    preconditioner build, and the relative residual of the normal
    equations reached (max over targets).
(b) a uniform-bin one-hot matrix (N rows, 50 grids of W bins, values 1/√50;
    522000 × 500000 at full size), K = 1 and K = 7 targets, alpha = 1:
    randfeat against scikit-learn ``sparse_cg``, randfeat re-timed at the
    residual scikit-learn reached (same accuracy).
(c) randfeat's time per CG product pair (Z @ P and Zᵀ @ U) at K = 1 and 7 on
    the uniform matrix and on the Forest-like matrix of ``bench_cg``.

randfeat runs with ``n_jobs`` = 2 and 1 (both cores, one core); scikit-learn
and SciPy's sparse products are single-threaded.
"""

import time

import numpy as np
import scipy.sparse as sp

#: Per profile: letter alphas, (uniform rows, bins per grid), letter baselines at alpha=1e-4.
PROFILES = {
    "full": dict(alphas=(1.0, 1e-2, 1e-4), uniform=(522_000, 10_000), mults=(4, 16), letter_rows=None),
    "quick": dict(alphas=(1.0, 1e-2), uniform=(100_000, 2_000), mults=(4, 16), letter_rows=None),
    "tiny": dict(alphas=(1.0,), uniform=(3_000, 200), mults=(4,), letter_rows=2000),
}
TOL = 1e-6
MAX_ITER = 20_000


def plain_normal_residual(Z, Y, W, alpha):
    """‖Zᵀy − (ZᵀZ + αI)w‖ / ‖Zᵀy‖ per target (no intercept), float64."""
    Z64 = Z.astype(np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(Z.shape[0], -1)
    W = np.asarray(W, dtype=np.float64).reshape(Y.shape[1], -1).T
    rhs = Z64.T @ Y
    return np.linalg.norm(rhs - (Z64.T @ (Z64 @ W) + alpha * W), axis=0) / np.linalg.norm(rhs, axis=0)


def _pm1(y):
    classes = np.unique(y)
    return np.where(y[:, None] == classes[None, :], 1.0, -1.0)


def _lsmr_all(Z, T, alpha):
    """LSMR on each column of T with damp = √alpha; (coef (K, D), max iterations)."""
    from scipy.sparse.linalg import lsmr

    coefs, iters = [], []
    for k in range(T.shape[1]):
        # atol = btol = tol: LSMR's own stopping rule; the residual of the
        # normal equations reached is measured and reported, as for all.
        out = lsmr(Z, T[:, k], damp=np.sqrt(alpha), atol=TOL, btol=TOL, maxiter=MAX_ITER)
        coefs.append(out[0])
        iters.append(out[2])
    return np.array(coefs), max(iters)


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def letter_rows(profile, log):
    """Case (a): rows of the hard-cases table."""
    from sklearn.linear_model import RidgeClassifier as SkRidgeClassifier

    from randfeat import RandomBinningFeatures, RidgeClassifier
    from randfeat._ridge_cv import median_heuristic_gamma
    from randfeat.datasets import make_letter_like

    p = PROFILES[profile]
    X, y = make_letter_like(p["letter_rows"])
    T = _pm1(y)
    rows = []
    for mult in p["mults"]:
        gamma = mult * median_heuristic_gamma(X, "laplacian")
        Z = RandomBinningFeatures(50, gamma=gamma, random_state=0).fit_transform(X)
        shape = f"{Z.shape[0]}x{Z.shape[1]} nnz={Z.nnz}"
        log(f"letter-like x{mult}: {shape}")
        for alpha in p["alphas"]:
            solvers = {}
            labels = {"jacobi": "block + Jacobi (before)", "auto": "auto = block + scaled identity (now)",
                      "nystrom": "Nyström"}
            for threads in (2, 1):
                # Nyström on both cores only: its build is the slow part either way.
                for pre in ("jacobi", "auto", "nystrom") if threads == 2 else ("jacobi", "auto"):
                    solvers[f"randfeat {labels[pre]}, {threads} thr"] = (lambda pre=pre, threads=threads: RidgeClassifier(
                        alpha, solver="cg", preconditioner=pre, tol=TOL, max_iter=MAX_ITER,
                        fit_intercept=False, n_jobs=threads).fit(Z, y))
            solvers["sklearn sparse_cg"] = lambda: SkRidgeClassifier(
                alpha, solver="sparse_cg", tol=TOL, max_iter=MAX_ITER, fit_intercept=False).fit(Z, y)
            solvers["scipy lsmr"] = lambda: _lsmr_all(Z, T, alpha)
            for name, fn in solvers.items():
                seconds, out = _timed(fn)
                if name == "scipy lsmr":
                    coef, iters, note = out[0], out[1], ""
                else:
                    coef = out.coef_
                    iters = int(np.max(out.n_iter_)) if getattr(out, "n_iter_", None) is not None else -1
                    note = getattr(out, "preconditioner_", "") or ""
                res = float(np.max(plain_normal_residual(Z, T, coef, alpha)))
                rows.append(dict(case=f"(a) letter-like, gamma x{mult}", shape=shape, alpha=alpha, solver=name,
                                 iterations=iters, seconds=seconds, residual=res, note=note))
                log(rows[-1])
    return rows


def uniform_onehot(n_rows, bins, n_grids=50, seed=0):
    """The uniform-bin one-hot CSR: each row one random bin in each of ``n_grids`` grids, values 1/√P."""
    rng = np.random.default_rng(seed)
    local = rng.integers(0, bins, size=(n_rows, n_grids), dtype=np.int64)
    indices = (local + bins * np.arange(n_grids)).astype(np.int32).ravel()
    indptr = np.arange(0, n_rows * n_grids + 1, n_grids, dtype=np.int64)
    data = np.full(indices.size, 1.0 / np.sqrt(n_grids))
    Z = sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_grids * bins))
    # Targets: a smooth-ish function of the bins (class of the row's bin in the first grids).
    score = rng.normal(size=(n_grids * bins, 7))
    y = np.argmax(Z @ score + 0.5 * rng.gumbel(size=(n_rows, 7)), axis=1)
    return Z, y


def uniform_rows(profile, log):
    """Case (b): randfeat vs scikit-learn sparse_cg on the uniform-bin matrix, K = 1 and 7."""
    from sklearn.linear_model import Ridge as SkRidge
    from sklearn.linear_model import RidgeClassifier as SkRidgeClassifier

    from randfeat import Ridge, RidgeClassifier

    n_rows, bins = PROFILES[profile]["uniform"]
    Z, y = uniform_onehot(n_rows, bins)
    shape = f"{Z.shape[0]}x{Z.shape[1]} nnz={Z.nnz}"
    log(f"uniform one-hot: {shape}")
    alpha = 1.0
    rows = []
    cases = {
        1: (lambda tol, thr: Ridge(alpha, solver="cg", tol=tol, fit_intercept=False, n_jobs=thr).fit(Z, _pm1(y)[:, 0]),
            lambda: SkRidge(alpha, solver="sparse_cg", tol=TOL, fit_intercept=False).fit(Z, _pm1(y)[:, 0]),
            _pm1(y)[:, :1]),
        7: (lambda tol, thr: RidgeClassifier(alpha, solver="cg", tol=tol, fit_intercept=False, n_jobs=thr).fit(Z, y),
            lambda: SkRidgeClassifier(alpha, solver="sparse_cg", tol=TOL, fit_intercept=False).fit(Z, y),
            _pm1(y)),
    }
    for K, (ours, theirs, T) in cases.items():
        sk_s, sk = _timed(theirs)
        sk_res = plain_normal_residual(Z, T, sk.coef_, alpha)
        sk_iters = int(np.max(np.atleast_1d(sk.n_iter_))) if sk.n_iter_ is not None else -1
        rows.append(dict(case=f"(b) uniform bins, K={K}", shape=shape, alpha=alpha, solver="sklearn sparse_cg",
                         iterations=sk_iters, seconds=sk_s, residual=float(np.max(sk_res)), note=""))
        log(rows[-1])
        for thr in (2, 1):
            # Same accuracy: every target at least as accurate as scikit-learn's best.
            tol = float(np.min(sk_res))
            s, m = _timed(lambda: ours(tol, thr))
            res = float(np.max(plain_normal_residual(Z, T, m.coef_, alpha)))
            rows.append(dict(case=f"(b) uniform bins, K={K}", shape=shape, alpha=alpha,
                             solver=f"randfeat, {thr} thr (tol = sklearn's residual)",
                             iterations=int(np.max(m.n_iter_)), seconds=s, residual=res,
                             note=f"{sk_s / s:.1f}x faster than sklearn"))
            log(rows[-1])
    return rows


def product_rows(profile, log):
    """Case (c): time per product pair (Z @ P + Zᵀ @ U) at K = 1 and 7, uniform and Forest-like matrices."""
    from _covtype_like import BINNING_GAMMA, covtype_like

    from randfeat import RandomBinningFeatures
    from randfeat._linops import make_products

    n_rows, bins = PROFILES[profile]["uniform"]
    mats = {"uniform bins": uniform_onehot(n_rows, bins)[0]}
    Xf = covtype_like(n_rows, seed=0, dtype=np.float64)
    mats["Forest-like"] = RandomBinningFeatures(50, gamma=BINNING_GAMMA, random_state=0).fit_transform(Xf)
    rows = []
    for name, Z in mats.items():
        shape = f"{Z.shape[0]}x{Z.shape[1]} nnz={Z.nnz}"
        for thr in (2, 1):
            ops = make_products(Z, thr)
            per = {}
            for K in (1, 7):
                rng = np.random.default_rng(K)
                P, U = rng.standard_normal((Z.shape[1], K)), rng.standard_normal((Z.shape[0], K))
                times = []
                for _ in range(7):
                    t = time.perf_counter()
                    ops.matmat(P)
                    ops.rmatmat(U)
                    times.append(time.perf_counter() - t)
                per[K] = float(np.median(times))
            ops.close()
            rows.append(dict(case=f"(c) product pair, {name}", shape=shape, alpha=float("nan"),
                             solver=f"randfeat, {thr} thr", iterations=-1, seconds=per[7], residual=float("nan"),
                             note=f"K=1 {per[1] * 1e3:.1f} ms, K=7 {per[7] * 1e3:.1f} ms: K=7 / K=1 = "
                                  f"{per[7] / per[1]:.2f} (bar <= 2.5 on the uniform matrix)"))
            log(rows[-1])
    return rows


def run(profile, log):
    """All three cases; returns the rows."""
    return product_rows(profile, log) + uniform_rows(profile, log) + letter_rows(profile, log)


def markdown(rows, header):
    """The hard-cases table as Markdown lines."""
    lines = header + [
        "| case | shape | alpha | solver | iterations | seconds | residual reached | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        alpha = "" if np.isnan(r["alpha"]) else f"{r['alpha']:g}"
        res = "" if np.isnan(r["residual"]) else f"{r['residual']:.1e}"
        it = "" if r["iterations"] < 0 else str(r["iterations"])
        lines.append(f"| {r['case']} | {r['shape']} | {alpha} | {r['solver']} | {it} | {r['seconds']:.2f} | "
                     f"{res} | {r['note']} |")
    return lines
