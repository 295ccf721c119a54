"""Benchmark randfeat.Ridge / RidgeClassifier against scikit-learn, same run.

Four measurements, each a ratio of times taken in the same run, alternating
candidate and baseline, medians reported (the machine is shared with other
jobs: absolute times are noisy, ratios less so):

1. CG, one target: ``Ridge(solver="cg", tol=1e-6)`` vs scikit-learn
   ``Ridge(solver="sparse_cg", tol=1e-6)`` on the CSR of
   ``RandomBinningFeatures(50)`` (float64) of Forest-Cover-like data.  Both
   solutions' relative residuals on the same normal equations
   ‖Z_cᵀy_c − (Z_cᵀZ_c + αI)w‖ / ‖Z_cᵀy_c‖ are computed and reported, and
   randfeat is re-timed with ``tol`` set to scikit-learn's residual, so the
   ratio compares equal accuracy (the tol=1e-6 timing is in the notes).
2. CG, 7 targets: ``RidgeClassifier(solver="cg")`` vs scikit-learn
   ``RidgeClassifier(solver="sparse_cg")`` (which solves the one-vs-rest
   targets one after another) on the same matrix.
3. Dense Cholesky on Z of 100000 × 2000, float64 and float32, vs
   scikit-learn ``Ridge(solver="cholesky")``.
4. Streaming ``Ridge(features=RandomFourierFeatures(5000))`` on 522000 × 54
   float32: peak RSS of a fresh subprocess, and its time against the sum of
   its two floors measured in the same run (the feature transform of all
   rows in the same chunks, and a BLAS ssyrk of that many rows).

5. The fit call (``--only fit``, ``_ridge_fit.py``): ``Ridge(solver="cg")``
   and ``RidgeClassifier(solver="cg")`` on the uniform-bin one-hot matrix
   (522000 × 500000, 50 grids × 10000 bins) at alpha 0.1, intercept and
   threads as a user gets them: the whole ``fit`` at scikit-learn's achieved
   residual against scikit-learn's whole ``sparse_cg`` fit, beside both
   solvers' solve-only times and the stages of randfeat's set-up (at least
   5 alternating rounds).

6. Hard cases (``--only hard``, ``_ridge_hard.py``): CG on binning features
   at small alpha (Letter-like, 26 classes), many targets on a uniform-bin
   matrix, Forest-like fits, and the cost per product pair; table in
   ridge_hard.md.  ``--baseline-python PY`` times another randfeat build
   (installed for the Python ``PY``: e.g. the release before) alternately
   with this one in the same run.

Usage::

    python bench/ridge.py            # the bars' shapes
    python bench/ridge.py --quick    # smaller N everywhere (minutes)
    python bench/ridge.py --tiny     # seconds; used by the test suite

Results: bench/results/ridge.md and ridge.csv (``--out DIR``).
"""

import argparse
import csv
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _covtype_like import BINNING_GAMMA, covtype_like  # noqa: E402
from _harness import run_child_json  # noqa: E402

N_GRIDS = 50
ALPHA = 1.0


def labels7(X, seed=0):
    """Seven classes from a fixed nonlinear function of the continuous columns."""
    rng = np.random.default_rng(seed)
    C = X[:, :10].astype(np.float64)
    scores = np.sin(C @ rng.normal(size=(10, 7))) + 0.5 * (C**2) @ rng.normal(size=(10, 7)) / 10
    return np.argmax(scores + 0.3 * rng.gumbel(size=scores.shape), axis=1)


def normal_equation_residual(Z, Y, coef, alpha):
    """Relative residual of the centred normal equations for each target (float64).

    Implicit centring, never densifying Z: Z_c w = Zw − 1(μᵀw).
    """
    Y = np.asarray(Y, dtype=np.float64).reshape(Z.shape[0], -1)
    W = np.asarray(coef, dtype=np.float64).reshape(Y.shape[1], -1).T  # (D, K)
    Z64 = Z.astype(np.float64)
    mu = np.asarray(Z64.mean(axis=0)).ravel()
    Yc = Y - Y.mean(axis=0)
    rhs = Z64.T @ Yc - np.outer(mu, Yc.sum(axis=0))
    U = Z64 @ W - mu @ W
    AW = Z64.T @ U - np.outer(mu, U.sum(axis=0)) + alpha * W
    return np.linalg.norm(rhs - AW, axis=0) / np.linalg.norm(rhs, axis=0)


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def alternate(candidates, repeats):
    """Run each named callable ``repeats`` times, interleaved; return medians and last outputs."""
    times = {k: [] for k in candidates}
    outs = {}
    for _ in range(repeats):
        for name, fn in candidates.items():
            t, outs[name] = _timed(fn)
            times[name].append(t)
    return {k: float(np.median(v)) for k, v in times.items()}, outs


# ------------------------------------------------------------------ CG
def bench_cg(n, repeats, log):
    from sklearn.linear_model import Ridge as SkRidge
    from sklearn.linear_model import RidgeClassifier as SkRidgeClassifier
    from sklearn.preprocessing import LabelBinarizer

    from randfeat import RandomBinningFeatures, Ridge, RidgeClassifier

    X = covtype_like(n, seed=0, dtype=np.float64)
    y7 = labels7(X)
    Z = RandomBinningFeatures(N_GRIDS, gamma=BINNING_GAMMA, random_state=0).fit_transform(X)
    assert sp.issparse(Z) and Z.dtype == np.float64
    log(f"binning Z: {Z.shape}, nnz={Z.nnz}")
    rows = []

    # One target: class 0 against the rest, ±1.
    t = np.where(y7 == 0, 1.0, -1.0)
    med, outs = alternate(
        {
            "randfeat": lambda: Ridge(ALPHA, solver="cg", tol=1e-6).fit(Z, t),
            "sklearn": lambda: SkRidge(ALPHA, solver="sparse_cg", tol=1e-6).fit(Z, t),
        },
        repeats,
    )
    r_ours = normal_equation_residual(Z, t, outs["randfeat"].coef_, ALPHA)[0]
    r_sk = normal_equation_residual(Z, t, outs["sklearn"].coef_, ALPHA)[0]
    t_1e6, r_1e6, it_1e6 = med["randfeat"], r_ours, int(outs["randfeat"].n_iter_[0])
    # Same accuracy: re-time randfeat with tol = scikit-learn's residual
    # (looser or tighter than 1e-6, whichever scikit-learn reached).
    ours_tol = float(r_sk)
    med2, outs2 = alternate({"randfeat": lambda: Ridge(ALPHA, solver="cg", tol=ours_tol).fit(Z, t)}, repeats)
    ours_t = med2["randfeat"]
    r_ours = normal_equation_residual(Z, t, outs2["randfeat"].coef_, ALPHA)[0]
    ours_iter = int(outs2["randfeat"].n_iter_[0])
    rows.append(
        dict(
            case="CG binning, 1 target", shape=f"{Z.shape[0]}x{Z.shape[1]} nnz={Z.nnz}", dtype="float64",
            randfeat_s=ours_t, baseline="sklearn Ridge sparse_cg", baseline_s=med["sklearn"],
            ratio=med["sklearn"] / ours_t, bar=4.0,
            note=f"randfeat tol={ours_tol:.2e} (= sklearn's residual): residual {r_ours:.2e} ({ours_iter} it) vs "
            f"sklearn {r_sk:.2e}; at tol=1e-6 randfeat took {t_1e6:.1f} s ({it_1e6} it, residual {r_1e6:.2e}, "
            f"ratio {med['sklearn'] / t_1e6:.2f}x)",
        )
    )
    log(rows[-1])

    # Seven targets, one-vs-rest.
    med, outs = alternate(
        {
            "randfeat": lambda: RidgeClassifier(ALPHA, solver="cg", tol=1e-6).fit(Z, y7),
            "sklearn": lambda: SkRidgeClassifier(ALPHA, solver="sparse_cg", tol=1e-6).fit(Z, y7),
        },
        repeats,
    )
    T = LabelBinarizer(pos_label=1, neg_label=-1).fit_transform(y7)
    r_ours = normal_equation_residual(Z, T, outs["randfeat"].coef_, ALPHA)
    r_sk = normal_equation_residual(Z, T, outs["sklearn"].coef_, ALPHA)
    t_1e6, r_1e6 = med["randfeat"], r_ours
    # Same accuracy: every target at least as accurate as scikit-learn's best.
    ours_tol = float(np.min(r_sk))
    med2, outs2 = alternate({"randfeat": lambda: RidgeClassifier(ALPHA, solver="cg", tol=ours_tol).fit(Z, y7)}, repeats)
    ours_t = med2["randfeat"]
    r_ours = normal_equation_residual(Z, T, outs2["randfeat"].coef_, ALPHA)
    outs["randfeat"] = outs2["randfeat"]
    agree = float(np.mean(outs["randfeat"].predict(Z) == outs["sklearn"].predict(Z)))
    rows.append(
        dict(
            case="CG binning, 7 targets (classifier)", shape=f"{Z.shape[0]}x{Z.shape[1]} nnz={Z.nnz}",
            dtype="float64", randfeat_s=ours_t, baseline="sklearn RidgeClassifier sparse_cg",
            baseline_s=med["sklearn"], ratio=med["sklearn"] / ours_t, bar=10.0,
            note=f"randfeat tol={ours_tol:.2e} (= min of sklearn's residuals): max residual {r_ours.max():.2e} "
            f"(iters {outs['randfeat'].n_iter_.tolist()}) vs sklearn max {r_sk.max():.2e}; at tol=1e-6 randfeat "
            f"took {t_1e6:.1f} s (max residual {r_1e6.max():.2e}, ratio {med['sklearn'] / t_1e6:.2f}x); "
            f"predictions agree {agree:.4f}",
        )
    )
    log(rows[-1])
    return rows


# ------------------------------------------------------------ Cholesky
def bench_cholesky(n, d, repeats, log):
    from sklearn.linear_model import Ridge as SkRidge

    from randfeat import Ridge

    rows = []
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        Z = rng.standard_normal((n, d)).astype(dtype)
        y = (Z[:, :50].astype(np.float64) @ rng.standard_normal(50) + rng.standard_normal(n)).astype(dtype)
        med, outs = alternate(
            {
                "randfeat": lambda: Ridge(ALPHA, solver="cholesky").fit(Z, y),
                "sklearn": lambda: SkRidge(ALPHA, solver="cholesky").fit(Z, y),
                # The hardware floor both share: NumPy's Z.T @ Z is one BLAS
                # syrk (what scikit-learn calls), the N·D² work of any Gram.
                "syrk": lambda: Z.T @ Z,
            },
            repeats,
        )
        diff = np.abs(outs["randfeat"].coef_ - outs["sklearn"].coef_).max() / np.abs(outs["sklearn"].coef_).max()
        floor_s = med["syrk"]
        rows.append(
            dict(
                case="dense Cholesky", shape=f"{n}x{d}", dtype=np.dtype(dtype).name,
                randfeat_s=med["randfeat"], baseline="sklearn Ridge cholesky", baseline_s=med["sklearn"],
                ratio=med["sklearn"] / med["randfeat"], bar=1.5,
                note=f"max rel. coef difference {diff:.1e}; bare syrk (Z.T @ Z) {floor_s:.2f} s: "
                f"sklearn takes {med['sklearn'] / floor_s:.2f}x it, randfeat {med['randfeat'] / floor_s:.2f}x, "
                f"so no Cholesky solver can be more than {med['sklearn'] / floor_s:.2f}x faster than sklearn here",
            )
        )
        log(rows[-1])
        del Z
    return rows


# ----------------------------------------------------------- streaming
STREAM_SCRIPT = r"""
import json, sys, time, numpy as np
sys.path.insert(0, {here!r})
from _covtype_like import covtype_like
from randfeat import RandomFourierFeatures, Ridge
from _harness import peak_rss

n, D, what, step = {n}, {D}, {what!r}, {chunk_rows}
X = covtype_like(n, seed=0, dtype=np.float32)
y = np.sin(X[:, :10].astype(np.float64) @ np.linspace(-1, 1, 10))
fm = RandomFourierFeatures(D, gamma=0.02, random_state=0)
if what == "fit":
    t = time.perf_counter()
    est = Ridge(1.0, features=fm, chunk_size=step).fit(X, y)
    elapsed = time.perf_counter() - t
    extra = dict(solver=est.solver_, score=float(est.score(X[:20000], y[:20000])))
elif what == "transform":
    fm.fit(X)
    t = time.perf_counter()
    for s in range(0, n, step):
        fm.transform(X[s:s + step])
    elapsed = time.perf_counter() - t
    extra = {{}}
else:  # syrk of n rows, in the same chunks
    from scipy.linalg.blas import ssyrk
    A = np.random.default_rng(0).standard_normal((step, D)).astype(np.float32)
    C = np.zeros((D, D), dtype=np.float32, order="F")
    t = time.perf_counter()
    for s in range(0, n, step):
        a = A[: min(step, n - s)]
        ssyrk(1.0, a.T, beta=1.0, c=C, trans=0, lower=1, overwrite_c=1)
    elapsed = time.perf_counter() - t
    extra = {{}}
print(json.dumps(dict(seconds=elapsed, peak_rss=peak_rss(), chunk_rows=step, **extra)))
"""


def stream_chunk_rows(D, itemsize=4):
    """Rows per chunk of the streaming fit, passed as ``Ridge(chunk_size=...)``.

    The same rows as Ridge's documented default (``chunk_size=None``: 64 MiB
    of feature rows, at least 64), stated here so that the fit and its two
    floors are timed on the same chunks whatever the default becomes.
    """
    return max(64, 64 * 2**20 // (D * itemsize))


def run_stream(n, D, what):
    return run_child_json(STREAM_SCRIPT.format(here=str(HERE), n=n, D=D, what=what, chunk_rows=stream_chunk_rows(D)))


def bench_streaming(n, D, repeats, log):
    runs = {"fit": [], "transform": [], "syrk": []}
    info = {}
    for _ in range(repeats):
        for what in runs:
            r = run_stream(n, D, what)
            runs[what].append(r["seconds"])
            info.setdefault(what, []).append(r)
    med = {k: float(np.median(v)) for k, v in runs.items()}
    floor = med["transform"] + med["syrk"]
    peak = max(r["peak_rss"] for r in info["fit"])
    row = dict(
        case="streaming Ridge(features=RFF)", shape=f"{n}x54 -> D={D}", dtype="float32",
        randfeat_s=med["fit"], baseline="floors: transform + ssyrk", baseline_s=floor,
        ratio=med["fit"] / floor, bar=1.3,
        note=f"time/floor (lower is better, bar <= 1.3); transform {med['transform']:.1f} s + syrk {med['syrk']:.1f} s; "
        f"peak RSS {peak / 2**30:.2f} GiB (bar < 1.5 GB); chunk {info['fit'][0]['chunk_rows']} rows; "
        f"solver {info['fit'][0]['solver']}; train R² {info['fit'][0]['score']:.3f}",
        peak_rss=peak,
    )
    log(row)
    return [row]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="smaller shapes, minutes")
    mode.add_argument("--tiny", action="store_true", help="seconds; smoke test")
    parser.add_argument("--out", default=str(HERE / "results"), help="output directory")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--baseline-label", default=None,
                        help="hard cases: how the results name the --baseline-python build (e.g. its commit)")
    parser.add_argument("--only", choices=["cg", "fit", "cholesky", "streaming", "hard"], action="append")
    parser.add_argument("--baseline-python", default=None,
                        help="hard cases: a Python with another randfeat build installed (today's solver), timed "
                             "alternately with this one")
    args = parser.parse_args(argv)

    import randfeat

    if args.tiny:
        cg_n, chol, stream, repeats = 3000, (2000, 100), (3000, 200), 1
    elif args.quick:
        cg_n, chol, stream, repeats = 100_000, (30_000, 1000), (100_000, 2000), 3
    else:
        cg_n, chol, stream, repeats = 522_000, (100_000, 2000), (522_000, 5000), 3
    repeats = args.repeats or repeats
    only = set(args.only or ["cg", "fit", "cholesky", "streaming", "hard"])
    profile = "tiny" if args.tiny else "quick" if args.quick else "full"

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    rows = []
    if "cg" in only:
        rows += bench_cg(cg_n, repeats, log)
    if "fit" in only:
        import _ridge_fit

        rows += _ridge_fit.bench_fit_call(profile, args.repeats or (1 if args.tiny else 5), log, alternate,
                                          normal_equation_residual)
    if "cholesky" in only:
        rows += bench_cholesky(*chol, repeats, log)
    if "streaming" in only:
        rows += bench_streaming(*stream, 1, log)  # one run: each child takes minutes at full size

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if "hard" in only:
        import _ridge_hard

        hard = _ridge_hard.run(profile, log, args.baseline_python)
        load = os.getloadavg()
        header = [
            "# Hard cases: CG on binning features (bench/ridge.py --only hard)",
            "",
            f"randfeat {randfeat.__version__}, {os.cpu_count()} CPUs, profile {profile}; load average at the end "
            f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}. One run each, every fit timed in a child process (builds "
            "alternating), tol 1e-6, no intercept. Iterations: max over targets; residual: max over targets of "
            "‖Zᵀy − (ZᵀZ + αI)w‖ / ‖Zᵀy‖. \"today's randfeat\": "
            + ((args.baseline_label or "the build given by --baseline-python") if args.baseline_python
               else "not run (no --baseline-python)")
            + ".",
            "",
        ]
        (out / "ridge_hard.md").write_text("\n".join(_ridge_hard.markdown(hard, header)) + "\n")
        print("\n".join(_ridge_hard.markdown(hard, header)))
        if only == {"hard"}:
            return
    fields = ["case", "shape", "dtype", "randfeat_s", "baseline", "baseline_s", "ratio", "bar", "note"]
    with open(out / "ridge.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    load = os.getloadavg()
    lines = [
        "# randfeat.Ridge vs scikit-learn (bench/ridge.py)",
        "",
        f"randfeat {randfeat.__version__}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{randfeat.get_config()['default_n_threads']} threads; load average at the end {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}. "
        "The machine is shared with other jobs: absolute times are noisy; candidate and baseline are timed "
        f"in the same run, alternating, median of {repeats}.",
        "",
        "Ratio = baseline time / randfeat time (higher is better), except for streaming, where it is "
        "randfeat time / (sum of the two floors) (lower is better).",
        "",
        "| case | shape | dtype | randfeat s | baseline | baseline s | ratio | bar | met | notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["case"].startswith("streaming"):
            met = r["ratio"] <= r["bar"] and r["peak_rss"] < 1.5e9
            ratio = f"{r['ratio']:.2f}"
            bar = f"<= {r['bar']}"
        else:
            met = r["ratio"] >= r["bar"]
            ratio = f"{r['ratio']:.1f}x"
            bar = f">= {r['bar']}x"
        lines.append(
            f"| {r['case']} | {r['shape']} | {r['dtype']} | {r['randfeat_s']:.2f} | {r['baseline']} | "
            f"{r['baseline_s']:.2f} | {ratio} | {bar} | {'yes' if met else 'NO'} | {r['note']} |"
        )
    (out / "ridge.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
