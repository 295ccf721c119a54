"""bench/ridge.py, "hard cases": CG on binning features where it is slow.

Three cases (issue: "Binning+LS at any regularisation"), every solver on
the same matrix in the same run, without an intercept (the same problem for
all: SciPy's LSMR has none), tol 1e-6 unless said:

(a) ``make_letter_like`` (20000 × 16, 26 classes), Laplacian binning with
    P = 50 grids at 4× and 16× the median-heuristic gamma, alpha in
    {1, 1e-2, 1e-4}: randfeat's CG ("auto" preconditioner; and the
    randomized Nyström one), *today's* randfeat (another build, given by
    ``--baseline-python``: one CG per target with the heavy block + Jacobi,
    as before the issue), scikit-learn ``RidgeClassifier(solver="sparse_cg")``
    and ``scipy.sparse.linalg.lsmr`` with ``damp = √alpha``, one class after
    another.  Reported: iterations (max over the 26 one-vs-rest targets),
    time including any preconditioner build, and the relative residual of
    the normal equations reached (max over targets).
(b) a uniform-bin one-hot matrix (N rows, 50 grids of W bins, values 1/√50;
    522000 × 500000 at full size), K = 1 and K = 7 targets, alpha = 1:
    scikit-learn ``sparse_cg`` at tol 1e-6, then randfeat (and today's) at
    the residual scikit-learn reached (same accuracy).  This is not the fit
    a user makes on that matrix (``bench/ridge.py --only fit`` is): with no
    intercept and alpha = 1 no column passes the heavy-column ratio
    (diag ≈ 52/50 + 1 < 5α), so the preconditioner's set-up, which at alpha
    = 0.1 with an intercept built a 2048-column block and then dropped it
    (0.58 s), is never reached; there are no column means to compute; and
    CG needs 15 iterations instead of 42, so every fixed set-up cost weighs
    three times less against the products.  The child also warms up on 500
    rows before the clock starts (imports, threadpoolctl's library scan).
(c) Forest-like binning features (the matrix of ``bench_cg``), 1 and 7
    targets, alpha = 1: randfeat against today's; and randfeat's time per
    product pair (Z @ P and Zᵀ @ U) at K = 1 and 7 on the uniform and the
    Forest-like matrices.

Each solve runs in a child process (``python _ridge_hard.py --fit ...``)
that loads the matrix from a file and times the fit alone, so that two
builds of randfeat can be timed alternately in the same run; randfeat with
``n_jobs`` = 2 and 1 (both cores, one core), scikit-learn and SciPy's sparse
products single-threaded.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

#: Per profile: letter alphas and gamma multiples, (uniform rows, bins per grid), letter rows, Forest-like rows.
PROFILES = {
    "full": dict(alphas=(1.0, 1e-2, 1e-4), mults=(4, 16), uniform=(522_000, 10_000), letter_rows=None,
                 forest_rows=522_000),
    "quick": dict(alphas=(1.0, 1e-2), mults=(4, 16), uniform=(100_000, 2_000), letter_rows=None,
                  forest_rows=100_000),
    "tiny": dict(alphas=(1.0,), mults=(4,), uniform=(3_000, 200), letter_rows=2000, forest_rows=3000),
}
TOL = 1e-6
MAX_ITER = 20_000
HERE = Path(__file__).resolve().parent


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


# ------------------------------------------------------------ in the child
def _fit(spec, Z, y):
    """Run one solver of ``spec`` on (Z, y); return (coef (K, D), iterations, note)."""
    T = _pm1(y)
    if spec["targets"] == 1:
        T = T[:, :1]
    alpha, tol = spec["alpha"], spec["tol"]
    if spec["solver"] == "lsmr":
        from scipy.sparse.linalg import lsmr

        coefs, iters = [], []
        for k in range(T.shape[1]):
            # atol = btol = tol: LSMR's own stopping rule; the residual of the
            # normal equations reached is measured and reported, as for all.
            out = lsmr(Z, T[:, k], damp=np.sqrt(alpha), atol=tol, btol=tol, maxiter=MAX_ITER)
            coefs.append(out[0])
            iters.append(out[2])
        return np.array(coefs), max(iters), ""
    if spec["solver"] == "sklearn":
        from sklearn.linear_model import Ridge, RidgeClassifier
    else:
        from randfeat import Ridge, RidgeClassifier
    kw = dict(alpha=alpha, tol=tol, max_iter=MAX_ITER, fit_intercept=False)
    if spec["solver"] == "sklearn":
        kw["solver"] = "sparse_cg"
    else:
        kw.update(solver="cg", n_jobs=spec["threads"])
        if spec.get("preconditioner"):
            kw["preconditioner"] = spec["preconditioner"]
    model = (Ridge(**kw).fit(Z, T[:, 0]) if spec["targets"] == 1 else RidgeClassifier(**kw).fit(Z, y))
    n_iter = getattr(model, "n_iter_", None)
    iters = int(np.max(n_iter)) if n_iter is not None else -1
    return np.atleast_2d(model.coef_), iters, str(getattr(model, "preconditioner_", "") or "")


def _child(spec_json, data_path, coef_path):
    spec = json.loads(spec_json)
    Z = sp.load_npz(data_path + ".Z.npz").tocsr()
    y = np.load(data_path + ".y.npy")
    # Warm-up on a few rows (first-call costs: imports, threadpoolctl's
    # library scan), so that the timing is the fit's alone.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            _fit(dict(spec, tol=1e-2), Z[:500], y[:500])
        except ValueError:
            pass
    t0 = time.perf_counter()
    coef, iters, note = _fit(spec, Z, y)
    seconds = time.perf_counter() - t0
    np.save(coef_path, coef)
    print(json.dumps(dict(seconds=seconds, iterations=iters, note=note)))


# ----------------------------------------------------------- in the parent
class Runner:
    """Runs solver specs in child processes on saved matrices; computes the residuals here."""

    def __init__(self, baseline_python, log):
        self.baseline_python = baseline_python
        self.log = log
        self.dir = tempfile.TemporaryDirectory(prefix="randfeat-hard-")
        self.data = {}

    def save(self, key, Z, y):
        path = os.path.join(self.dir.name, key)
        sp.save_npz(path + ".Z.npz", sp.csr_matrix(Z), compressed=False)
        np.save(path + ".y.npy", y)
        self.data[key] = (path, Z, y)

    def run(self, key, spec, python=None):
        """Fit ``spec`` on matrix ``key`` in a child; return a result dict (None if that build failed)."""
        path, Z, y = self.data[key]
        coef_path = os.path.join(self.dir.name, "coef.npy")
        env = dict(os.environ, PYTHONPATH=str(HERE))
        out = subprocess.run([python or sys.executable, str(HERE / "_ridge_hard.py"), "--fit", json.dumps(spec), path,
                              coef_path], capture_output=True, text=True, env=env)
        if out.returncode != 0:
            self.log(f"{spec} failed with {python or sys.executable}: {out.stderr[-2000:]}")
            return None
        res = json.loads(out.stdout.strip().splitlines()[-1])
        T = _pm1(y)[:, : spec["targets"] or None]
        res["residual"] = float(np.max(plain_normal_residual(Z, T, np.load(coef_path), spec["alpha"])))
        return res

    def close(self):
        self.dir.cleanup()


def _row(case, shape, alpha, solver, res, note=""):
    return dict(case=case, shape=shape, alpha=alpha, solver=solver, iterations=res["iterations"],
                seconds=res["seconds"], residual=res["residual"], note=note or res.get("note", ""))


def _shape(Z):
    return f"{Z.shape[0]}x{Z.shape[1]} nnz={Z.nnz}"


def letter_rows(profile, runner, log):
    """Case (a): rows of the hard-cases table."""
    from randfeat import RandomBinningFeatures
    from randfeat._maps.gamma import median_heuristic_gamma
    from randfeat.datasets import make_letter_like

    p = PROFILES[profile]
    X, y = make_letter_like(p["letter_rows"])
    rows = []
    for mult in p["mults"]:
        gamma = mult * median_heuristic_gamma(X, "manhattan")
        Z = RandomBinningFeatures(50, gamma=gamma, random_state=0).fit_transform(X)
        key, shape = f"letter{mult}", _shape(Z)
        runner.save(key, Z, y)
        log(f"letter-like x{mult}: {shape}")
        for alpha in p["alphas"]:
            base = dict(alpha=alpha, tol=TOL, targets=0)
            runs = []
            for threads in (2, 1):
                if runner.baseline_python:
                    runs.append((f"today's randfeat, {threads} thr", dict(base, solver="randfeat", threads=threads),
                                 runner.baseline_python))
                runs.append((f"randfeat auto, {threads} thr", dict(base, solver="randfeat", threads=threads), None))
            runs.append(("randfeat Nyström, 2 thr", dict(base, solver="randfeat", threads=2,
                                                         preconditioner="nystrom"), None))
            runs.append(("sklearn sparse_cg", dict(base, solver="sklearn"), None))
            runs.append(("scipy lsmr", dict(base, solver="lsmr"), None))
            results = {}
            for name, spec, python in runs:
                res = runner.run(key, spec, python)
                if res is None:
                    continue
                results[name] = res
                rows.append(_row(f"(a) letter-like, gamma x{mult}", shape, alpha, name, res))
                log(rows[-1])
            for threads in (2, 1):
                today, now = results.get(f"today's randfeat, {threads} thr"), results.get(f"randfeat auto, {threads} thr")
                if today and now:
                    rows.append(dict(case=f"(a) letter-like, gamma x{mult}", shape=shape, alpha=alpha,
                                     solver=f"today / now, {threads} thr", iterations=-1, seconds=float("nan"),
                                     residual=float("nan"),
                                     note=f"iterations {today['iterations'] / now['iterations']:.1f}x fewer, time "
                                          f"{today['seconds'] / now['seconds']:.1f}x less (bars at alpha <= 1e-2: "
                                          f"4x and 3x)"))
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


def uniform_rows(profile, runner, log):
    """Case (b): randfeat (and today's) vs scikit-learn sparse_cg on the uniform-bin matrix, K = 1 and 7."""
    n_rows, bins = PROFILES[profile]["uniform"]
    Z, y = uniform_onehot(n_rows, bins)
    key, shape = "uniform", _shape(Z)
    runner.save(key, Z, y)
    log(f"uniform one-hot: {shape}")
    rows = []
    for K in (1, 7):
        case = f"(b) uniform bins, K={K}"
        sk = runner.run(key, dict(solver="sklearn", alpha=1.0, tol=TOL, targets=K))
        rows.append(_row(case, shape, 1.0, "sklearn sparse_cg", sk))
        log(rows[-1])
        # Same accuracy: every target at least as accurate as scikit-learn's worst.
        tol = sk["residual"]
        for threads in (2, 1):
            builds = [("today's randfeat", runner.baseline_python)] if runner.baseline_python else []
            for label, python in builds + [("randfeat", None)]:
                res = runner.run(key, dict(solver="randfeat", alpha=1.0, tol=tol, targets=K, threads=threads), python)
                if res is not None:
                    rows.append(_row(case, shape, 1.0, f"{label}, {threads} thr (tol = sklearn's residual)", res,
                                     f"{sk['seconds'] / res['seconds']:.1f}x faster than sklearn (bar: "
                                     f"{4 if K == 1 else 6}x)"))
                    log(rows[-1])
    return rows


def forest_rows(profile, runner, log):
    """Case (c): Forest-like CG fits, today's build against this one, 1 and 7 targets."""
    from _covtype_like import BINNING_GAMMA, covtype_like
    from ridge import labels7

    from randfeat import RandomBinningFeatures

    X = covtype_like(PROFILES[profile]["forest_rows"], seed=0, dtype=np.float64)
    Z = RandomBinningFeatures(50, gamma=BINNING_GAMMA, random_state=0).fit_transform(X)
    key, shape = "forest", _shape(Z)
    runner.save(key, Z, labels7(X))
    rows = []
    if not runner.baseline_python:
        return rows
    for K in (1, 7):
        for threads in (2, 1):
            spec = dict(solver="randfeat", alpha=1.0, tol=TOL, targets=K, threads=threads)
            today = runner.run(key, spec, runner.baseline_python)
            now = runner.run(key, spec)
            if today is None or now is None:
                continue
            case = f"(c) Forest-like, K={K}"
            rows.append(_row(case, shape, 1.0, f"today's randfeat, {threads} thr", today))
            rows.append(_row(case, shape, 1.0, f"randfeat, {threads} thr", now,
                             f"{today['seconds'] / now['seconds']:.2f}x today's speed"))
            log(rows[-2:])
    return rows


def product_rows(profile, log):
    """Case (c): time per product pair (Z @ P + Zᵀ @ U) at K = 1 and 7, uniform and Forest-like matrices."""
    from _covtype_like import BINNING_GAMMA, covtype_like

    from randfeat import RandomBinningFeatures
    from randfeat._linalg.products import make_products

    n_rows, bins = PROFILES[profile]["uniform"]
    mats = {"uniform bins": uniform_onehot(n_rows, bins)[0]}
    Xf = covtype_like(PROFILES[profile]["forest_rows"], seed=0, dtype=np.float64)
    mats["Forest-like"] = RandomBinningFeatures(50, gamma=BINNING_GAMMA, random_state=0).fit_transform(Xf)
    rows = []
    for name, Z in mats.items():
        for thr in (2, 1):
            ops = make_products(Z, thr)
            operands = {K: (np.random.default_rng(K).standard_normal((Z.shape[1], K)),
                            np.random.default_rng(K + 1).standard_normal((Z.shape[0], K))) for K in (1, 7)}
            times = {1: [], 7: []}
            # K = 1 and K = 7 alternate, so both see the same machine (the
            # ratio moved from 3.0 to 5.3 between runs timed one after the other).
            for rep in range(12):
                for K, (P, U) in operands.items():
                    t = time.perf_counter()
                    ops.matmat(P)
                    ops.rmatmat(U)
                    if rep > 0:  # the first pass allocates the kept buffers
                        times[K].append(time.perf_counter() - t)
            per = {K: float(np.median(v)) for K, v in times.items()}
            ops.close()
            rows.append(dict(case=f"(c) product pair, {name}", shape=_shape(Z), alpha=float("nan"),
                             solver=f"randfeat, {thr} thr", iterations=-1, seconds=per[7], residual=float("nan"),
                             note=f"K=1 {per[1] * 1e3:.1f} ms, K=7 {per[7] * 1e3:.1f} ms: K=7 / K=1 = "
                                  f"{per[7] / per[1]:.2f} (bar <= 2.5 on the uniform matrix)"))
            log(rows[-1])
    return rows


def run(profile, log, baseline_python=None):
    """All three cases; returns the rows."""
    runner = Runner(baseline_python, log)
    try:
        return (product_rows(profile, log) + forest_rows(profile, runner, log) + uniform_rows(profile, runner, log)
                + letter_rows(profile, runner, log))
    finally:
        runner.close()


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
        sec = "" if np.isnan(r["seconds"]) else f"{r['seconds']:.2f}"
        lines.append(f"| {r['case']} | {r['shape']} | {alpha} | {r['solver']} | {it} | {sec} | "
                     f"{res} | {r['note']} |")
    return lines


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--fit":
        _child(*sys.argv[2:])
    else:
        sys.exit("usage: python bench/ridge.py --only hard [--baseline-python PYTHON]")
