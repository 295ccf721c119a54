"""Benchmark randfeat's five scikit-learn-compatible kernel approximations against scikit-learn's.

For RBFSampler (2000 components), Nystroem (rbf, 1000 landmarks),
PolynomialCountSketch (degree 2, 2000), SkewedChi2Sampler (2000) and
AdditiveChi2Sampler (2 steps), on the same data and parameters (N = 20000
non-negative rows of 54 features), float64 and float32, it measures in one
process:

* transform time, randfeat's class against scikit-learn's class of the same
  name, alternating, the median of the repeats, at 1 thread (randfeat
  ``n_jobs=1``; scikit-learn under ``threadpool_limits(1)``) and at all
  threads (randfeat ``n_jobs=-1``; scikit-learn with its BLAS threads and, for
  Nystroem, ``n_jobs=-1``); for Nystroem also the bare GEMM of its last
  product (N × m by m × m, NumPy, same threads), the floor of both;
* approximation error, mean |ZZᵀ − K| over the first 2000 rows, K from
  ``randfeat.kernel_matrix``, over 3 seeds, for randfeat and scikit-learn
  (they draw the same parameters for one ``random_state``, so the ratio
  should be 1 up to rounding); for AdditiveChi2Sampler the largest
  |Z_randfeat − Z_scikit-learn| instead, and its error against
  Σⱼ 2xⱼyⱼ/(xⱼ + yⱼ) = ½Σⱼ(xⱼ + yⱼ) + ½·kernel_matrix(kernel='additive_chi2').

Data (``--data``): ``dense`` (|N(0, 1)| entries, every entry nonzero: the
bars' data) or ``covtype`` (Forest-Cover-shaped: 10 continuous columns
min-max scaled to [0, 1] and two one-hot blocks, 12 nonzeros per row).

Results are printed and written as Markdown, CSV and a PNG plot under
bench/results/ (``kernel_approximation.{md,csv,png}``; ``--tiny`` writes
``kernel_approximation_tiny.*``).  Timings on a shared machine are noisy:
read the ratios, which are candidate against baseline in the same run.

Usage::

    python bench/kernel_approximation.py            # both data sets (several minutes)
    python bench/kernel_approximation.py --data dense
    python bench/kernel_approximation.py --tiny     # seconds; a smoke test of this script
"""

import argparse
import csv
import os
import platform
import time

import numpy as np
import sklearn
from sklearn import kernel_approximation as ska
from threadpoolctl import threadpool_limits

import randfeat
from _covtype_like import covtype_like
from randfeat import kernel_matrix

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results")

FULL = dict(n=20000, d=54, n_err=2000, seeds=3, repeats=5, D=2000, m=1000)
TINY = dict(n=600, d=12, n_err=200, seeds=2, repeats=2, D=64, m=40)
#: The issue's bars: speed-up at least this (every dtype and thread setting reported; the bar is float64).
BARS = {"RBFSampler": 4.0, "Nystroem": 1.2, "PolynomialCountSketch": 3.0, "SkewedChi2Sampler": 3.0,
        "AdditiveChi2Sampler": 2.0}
ERROR_BAR = 1.25


def make_data(kind, n, d, seed=0):
    """Non-negative rows: |N(0, 1)| (dense) or Forest-Cover-shaped, min-max scaled (covtype)."""
    if kind == "dense":
        return np.abs(np.random.default_rng(seed).standard_normal((n, d)))
    X = covtype_like(n, seed=seed)[:, :d]
    lo, hi = X[:, :10].min(axis=0), X[:, :10].max(axis=0)
    X[:, :10] = (X[:, :10] - lo) / (hi - lo)
    return X


def cases(cfg, X):
    """(name, make(library, seed, n_jobs), exact kernel of rows or None) for the five maps."""
    d = X.shape[1]
    gamma = 1.0 / (d * X.var())  # the 'scale' rule, one number for both libraries
    D, m = cfg["D"], cfg["m"]

    def vedaldi(A):
        s = A.sum(axis=1)
        return 0.5 * (s[:, None] + s[None, :]) + 0.5 * kernel_matrix(A, kernel="additive_chi2")

    def mk(cls_name, **kw):
        def make(lib, seed, n_jobs):
            cls = getattr(randfeat if lib == "randfeat" else ska, cls_name)
            extra = {}
            if "random_state" in cls().get_params():
                extra["random_state"] = seed
            if lib == "randfeat":
                extra["n_jobs"] = n_jobs
            elif cls_name == "Nystroem":
                extra["n_jobs"] = 1 if n_jobs == 1 else -1
            return cls(**kw, **extra)
        return make

    return [
        ("RBFSampler", mk("RBFSampler", gamma=gamma, n_components=D), lambda A: kernel_matrix(A, gamma=gamma)),
        ("Nystroem", mk("Nystroem", gamma=gamma, n_components=m), lambda A: kernel_matrix(A, gamma=gamma)),
        ("PolynomialCountSketch", mk("PolynomialCountSketch", gamma=1.0 / d, degree=2, n_components=D),
         lambda A: kernel_matrix(A, kernel="polynomial", gamma=1.0 / d, degree=2, coef0=0.0)),
        ("SkewedChi2Sampler", mk("SkewedChi2Sampler", skewedness=1.0, n_components=D),
         lambda A: kernel_matrix(A, kernel="skewed_chi2", skewedness=1.0)),
        ("AdditiveChi2Sampler", mk("AdditiveChi2Sampler", sample_steps=2), vedaldi),
    ]


def time_alternating(candidates, repeats):
    """Median wall and CPU time of each callable, run in turns so that noise hits all alike.

    The CPU time (this process, all its threads) is reported for the
    one-thread runs: on a shared machine it leaves out the time the process
    waited for a core, which the wall time does not.
    """
    times = {name: [] for name in candidates}
    cpu = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            c0, t0 = time.process_time(), time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            del out
    return ({name: float(np.median(ts)) for name, ts in times.items()},
            {name: float(np.median(ts)) for name, ts in cpu.items()})


def bench_speed(name, make, X, dtype, threads, repeats):
    Xt = X.astype(dtype)
    n_jobs = 1 if threads == "1" else -1
    ours, theirs = make("randfeat", 0, n_jobs).fit(Xt), make("sklearn", 0, n_jobs).fit(Xt)
    candidates = {"randfeat": lambda: ours.transform(Xt), "sklearn": lambda: theirs.transform(Xt)}
    if name == "Nystroem":
        K = np.random.default_rng(1).random((Xt.shape[0], theirs.normalization_.shape[0])).astype(dtype)
        N = np.ascontiguousarray(theirs.normalization_.T)
        candidates["gemm"] = lambda: K @ N
    limits = 1 if threads == "1" else None
    with threadpool_limits(limits=limits, user_api="blas"):
        for fn in candidates.values():  # warm-up
            fn()
        med, cpu = time_alternating(candidates, repeats)
    return dict(map=name, dtype=np.dtype(dtype).name, threads=threads, randfeat_s=med["randfeat"],
                sklearn_s=med["sklearn"], speedup=med["sklearn"] / med["randfeat"], gemm_s=med.get("gemm"),
                cpu_speedup=cpu["sklearn"] / cpu["randfeat"] if threads == "1" else None,
                load=os.getloadavg()[0] if hasattr(os, "getloadavg") else None)


def bench_error(name, make, exact, X, dtype, cfg):
    A = X[: cfg["n_err"]]
    At = A.astype(dtype)
    K = exact(A)
    errs = {"randfeat": [], "sklearn": []}
    max_diff = 0.0
    for seed in range(cfg["seeds"]):
        Zs = {}
        for lib in errs:
            Z = make(lib, seed, -1).fit_transform(At)
            Z = (Z.toarray() if hasattr(Z, "toarray") else np.asarray(Z)).astype(np.float64)
            errs[lib].append(float(np.abs(Z @ Z.T - K).mean()))
            Zs[lib] = Z
        max_diff = max(max_diff, float(np.abs(Zs["randfeat"] - Zs["sklearn"]).max()))
    e_rf, e_sk = float(np.mean(errs["randfeat"])), float(np.mean(errs["sklearn"]))
    return dict(map=name, dtype=np.dtype(dtype).name, error_randfeat=e_rf, error_sklearn=e_sk,
                error_ratio=e_rf / e_sk if e_sk > 0 else float("nan"), max_feature_diff=max_diff)


def markdown(data, speed, errors, header):
    lines = [header, "", f"### Data: {data}", "", "Transform time (median; ratio = scikit-learn / randfeat; "
             "GEMM = NumPy's bare last product of Nystroem, the floor of both; CPU time for the one-thread runs, "
             "robust to other processes; load: the 1-minute load average after the case):", "",
             "| map | dtype | threads | scikit-learn | randfeat | speed-up | bar | GEMM floor "
             "| speed-up in CPU time | load |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in speed:
        bar = BARS[r["map"]]
        ok = "met" if r["speedup"] >= bar else "NOT met"
        gemm = f"{r['gemm_s'] * 1000:.0f} ms" if r["gemm_s"] else ""
        cpu = f"{r['cpu_speedup']:.2f}x" if r["cpu_speedup"] else ""
        load = f"{r['load']:.1f}" if r["load"] is not None else ""
        lines.append(f"| {r['map']} | {r['dtype']} | {r['threads']} | {r['sklearn_s'] * 1000:.1f} ms "
                     f"| {r['randfeat_s'] * 1000:.1f} ms | {r['speedup']:.2f}x | {bar}x ({ok}) | {gemm} "
                     f"| {cpu} | {load} |")
    lines += ["", "Approximation error mean |ZZᵀ − K| (K from randfeat.kernel_matrix; mean over seeds), and the "
              "largest difference between the two libraries' features (same random_state):", "",
              "| map | dtype | scikit-learn | randfeat | ratio | max |Z_rf − Z_sk| |",
              "|---|---|---:|---:|---:|---:|"]
    for r in errors:
        lines.append(f"| {r['map']} | {r['dtype']} | {r['error_sklearn']:.3e} | {r['error_randfeat']:.3e} "
                     f"| {r['error_ratio']:.4f} | {r['max_feature_diff']:.1e} |")
    return "\n".join(lines) + "\n"


def plot(speed_by_data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(BARS)
    fig, axes = plt.subplots(1, len(speed_by_data), figsize=(6.5 * len(speed_by_data), 4.2), squeeze=False)
    for ax, (data, speed) in zip(axes[0], speed_by_data.items()):
        settings = sorted({(r["dtype"], r["threads"]) for r in speed})
        width = 0.8 / max(1, len(settings))
        for k, (dt, th) in enumerate(settings):
            vals = [next((r["speedup"] for r in speed if r["map"] == n and r["dtype"] == dt and r["threads"] == th),
                         np.nan) for n in names]
            ax.bar(np.arange(len(names)) + (k - (len(settings) - 1) / 2) * width, vals, width,
                   label=f"{dt}, {th} thread{'s' if th != '1' else ''}")
        for i, n in enumerate(names):
            ax.hlines(BARS[n], i - 0.45, i + 0.45, colors="k", linestyles="dashed")
        ax.set_xticks(range(len(names)), [n.replace("Sampler", "").replace("Polynomial", "Poly") for n in names],
                      rotation=15)
        ax.set_ylabel("speed-up over scikit-learn (transform)")
        ax.set_title(f"{data} data (dashed: the bars)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny sizes: a smoke test of the script")
    p.add_argument("--data", choices=("dense", "covtype", "both"), default="both")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--only", default=None, help="comma-separated map names to run")
    p.add_argument("--out", default=DEFAULT_OUT, help="directory for the results")
    args = p.parse_args(argv)
    cfg = dict(TINY if args.tiny else FULL)
    if args.repeats:
        cfg["repeats"] = args.repeats
    datas = ("dense", "covtype") if args.data == "both" else (args.data,)
    header = (f"## randfeat {randfeat.__version__} vs scikit-learn {sklearn.__version__}: kernel approximations\n\n"
              f"N = {cfg['n']}, d = {cfg['d']}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}"
              f", vector path {randfeat.get_config()['vector_paths'].get('_kernel_approx_fast', '?')}; "
              f"{cfg['repeats']} repeats, alternating. Shared machine: read the ratios.")
    md, rows, speed_by_data = [header], [], {}
    for data in datas:
        X = make_data(data, cfg["n"], cfg["d"])
        speed, errors = [], []
        for name, make, exact in cases(cfg, X):
            if args.only and name not in args.only.split(","):
                continue
            for dtype in (np.float64, np.float32):
                for threads in ("1", "all"):
                    r = bench_speed(name, make, X, dtype, threads, cfg["repeats"])
                    print(f"[{data}] {name} {r['dtype']} threads={threads}: sklearn {r['sklearn_s']:.4f}s "
                          f"randfeat {r['randfeat_s']:.4f}s -> {r['speedup']:.2f}x", flush=True)
                    speed.append(r)
                    rows.append(dict(kind="speed", data=data, **r))
                e = bench_error(name, make, exact, X, dtype, cfg)
                print(f"[{data}] {name} {e['dtype']}: error sklearn {e['error_sklearn']:.3e} randfeat "
                      f"{e['error_randfeat']:.3e} (ratio {e['error_ratio']:.4f}), max |dZ| {e['max_feature_diff']:.1e}",
                      flush=True)
                errors.append(e)
                rows.append(dict(kind="error", data=data, **e))
        md.append(markdown(data, speed, errors, "").lstrip())
        speed_by_data[data] = speed
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "kernel_approximation" + ("_tiny" if args.tiny else ""))
    with open(stem + ".md", "w") as f:
        f.write("\n".join(md))
    fields = sorted({k for r in rows for k in r})
    with open(stem + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    plot(speed_by_data, stem + ".png")
    print(f"wrote {stem}.md, .csv, .png")


if __name__ == "__main__":
    main()
