#!/usr/bin/env python
"""Cost as the work grows: time and peak memory of randfeat against
scikit-learn, sweeping N, D, d and the thread count.

Operations (float64, Gaussian kernel):

* ``transform``: ``RandomFourierFeatures(D).fit_transform(X)`` against
  ``sklearn.kernel_approximation.RBFSampler(n_components=D).fit_transform(X)``;
  randfeat's ``RandomBinningFeatures(P=D/10).fit_transform`` is shown beside them
  (scikit-learn has no binning).
* ``fit``: ``randfeat.Ridge(features=RandomFourierFeatures(D))`` (features
  streamed, never stored) against ``make_pipeline(RBFSampler(D), Ridge())``.

Sweeps: N (10³ … 10⁶ at d=16, D=256), D (64 … 4096 at N=20,000), d (4 … 256
at N=20,000, D=512), threads (1, 2 at N=100,000, D=512: randfeat ``n_jobs``,
scikit-learn's BLAS through threadpoolctl).  Candidate and baseline are timed
alternately in the same run, ``--repeats`` times (median reported); memory is
the peak RSS increase during the call.  The largest N for a baseline is
capped by ``--mem-budget-gb`` (the row says so).

Outputs: ``scaling[_<profile>].csv`` and ``scaling[_<profile>].png`` under
bench/results/.  Usage: ``python bench/scaling.py [--quick | --tiny]``.
"""

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import HarnessError, fmt_bytes, fmt_seconds, progress, results_dir, timed  # noqa: E402

PROFILES = {
    "full": dict(N=[1000, 10000, 100000, 1000000], d_N=16, D_N=256, D=[64, 256, 1024, 4096], N_D=20000,
                 d=[4, 16, 64, 256], N_d=20000, D_d=512, N_thr=100000, D_thr=512, repeats=3),
    "quick": dict(N=[1000, 10000, 100000], d_N=16, D_N=256, D=[64, 256, 1024], N_D=10000,
                  d=[4, 16, 64], N_d=10000, D_d=256, N_thr=50000, D_thr=256, repeats=3),
    "tiny": dict(N=[200, 1000], d_N=8, D_N=32, D=[16, 64], N_D=500, d=[4, 16], N_d=500, D_d=32,
                 N_thr=1000, D_thr=32, repeats=1),
}


def _data(N, d, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, d)), rng.standard_normal(N)


def _ops(D, d, threads):
    """(library, op) -> callable(X, y) for one configuration."""
    import randfeat
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    gamma = 1.0 / (2 * d)  # median heuristic for N(0, I_d) data: E‖x−x'‖² = 2d
    rff = dict(kernel="rbf", gamma=gamma, random_state=0, n_jobs=threads)
    return {
        ("randfeat", "transform"): lambda X, y: randfeat.RandomFourierFeatures(D, **rff).fit_transform(X),
        ("sklearn", "transform"): lambda X, y: RBFSampler(gamma=gamma, n_components=D, random_state=0).fit_transform(X),
        ("randfeat-binning", "transform"): lambda X, y: randfeat.RandomBinningFeatures(
            max(1, D // 10), gamma=1.0 / d, random_state=0, n_jobs=threads).fit_transform(X),
        ("randfeat", "fit"): lambda X, y: randfeat.Ridge(alpha=1.0, features=randfeat.RandomFourierFeatures(D, **rff),
                                                         n_jobs=threads).fit(X, y),
        ("sklearn", "fit"): lambda X, y: make_pipeline(RBFSampler(gamma=gamma, n_components=D, random_state=0),
                                                       Ridge(alpha=1.0)).fit(X, y),
    }


def _bytes_needed(lib, op, N, D):
    if lib == "sklearn":
        return 3 * 8 * N * D  # feature matrix + centred copy + headroom
    if lib == "randfeat" and op == "transform":
        return 8 * N * D  # the returned matrix
    return 0


def run(profile, budget_bytes):
    from threadpoolctl import threadpool_limits

    configs = []
    for N in profile["N"]:
        configs.append(("N", N, profile["d_N"], profile["D_N"], None))
    for D in profile["D"]:
        configs.append(("D", profile["N_D"], profile["d_N"], D, None))
    for d in profile["d"]:
        configs.append(("d", profile["N_d"], d, profile["D_d"], None))
    for thr in (1, 2):
        configs.append(("threads", profile["N_thr"], profile["d_N"], profile["D_thr"], thr))
    rows = []
    for sweep, N, d, D, threads in configs:
        X, y = _data(N, d)
        ops = _ops(D, d, threads if threads else -1)
        for op in ("transform", "fit"):
            libs = [k for k in ops if k[1] == op]
            times = {k: [] for k in libs}
            mems = {k: 0 for k in libs}
            skip = {k: _bytes_needed(k[0], op, N, D) > budget_bytes for k in libs}
            for _ in range(profile["repeats"]):  # alternate candidate and baseline
                for k in libs:
                    if skip[k]:
                        continue
                    with threadpool_limits(limits=threads):  # None: no limit
                        out, secs, mem = timed(ops[k], X, y)
                    del out
                    times[k].append(secs)
                    mems[k] = max(mems[k], mem)
            for k in libs:
                row = dict(sweep=sweep, library=k[0], op=op, N=N, d=d, D=D, threads=threads or "all",
                           seconds=float(np.median(times[k])) if times[k] else "",
                           peak_bytes=mems[k] if times[k] else "",
                           note="" if times[k] else f"skipped: needs > {fmt_bytes(budget_bytes)}")
                rows.append(row)
            msg = ", ".join(f"{k[0]} {fmt_seconds(np.median(times[k])) if times[k] else 'skipped'}" for k in libs)
            progress(f"{sweep}: N={N} d={d} D={D} threads={threads or 'all'} {op}: {msg}")
        del X, y
    return rows


def write_csv(path, rows):
    fields = ["sweep", "library", "op", "N", "d", "D", "threads", "seconds", "peak_bytes", "note"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def plot(path, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    sweeps = [("N", "N (rows)"), ("D", "D (features)"), ("d", "d (input dims)"), ("threads", "threads")]
    fig, axes = plt.subplots(2, 4, figsize=(17, 7.5))
    styles = {("randfeat", "transform"): ("C0", "-", "randfeat RFF transform"),
              ("sklearn", "transform"): ("C1", "-", "sklearn RBFSampler transform"),
              ("randfeat-binning", "transform"): ("C2", "-", "randfeat binning (P=D/10) transform"),
              ("randfeat", "fit"): ("C0", "--", "randfeat Ridge(features=RFF) fit"),
              ("sklearn", "fit"): ("C1", "--", "sklearn RBFSampler+Ridge fit")}
    for col, (sweep, label) in enumerate(sweeps):
        for row, (field, ylabel) in enumerate((("seconds", "time (s)"), ("peak_bytes", "peak memory added (MB)"))):
            ax = axes[row, col]
            for (lib, op), (color, ls, name) in styles.items():
                pts = [r for r in rows if r["sweep"] == sweep and r["library"] == lib and r["op"] == op
                       and r[field] != ""]
                if not pts:
                    continue
                key = "threads" if sweep == "threads" else sweep
                xs = [r[key] for r in pts]
                ys = [r[field] / (1e6 if field == "peak_bytes" else 1) for r in pts]
                ax.plot(xs, ys, color=color, ls=ls, marker="o", ms=3, label=name)
            if sweep != "threads":
                ax.set_xscale("log")
                ax.set_yscale("log")
            xs_all = sorted({r["threads" if sweep == "threads" else sweep] for r in rows if r["sweep"] == sweep})
            ax.set_xticks(xs_all)
            ax.set_xticklabels([str(v) for v in xs_all])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_xlabel(label)
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            if row == 0:
                fixed = next((r for r in rows if r["sweep"] == sweep), None)
                if fixed:
                    ax.set_title({"N": f"d={fixed['d']}, D={fixed['D']}", "D": f"N={fixed['N']}, d={fixed['d']}",
                                  "d": f"N={fixed['N']}, D={fixed['D']}",
                                  "threads": f"N={fixed['N']}, d={fixed['d']}, D={fixed['D']}"}[sweep], fontsize=9)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("randfeat vs scikit-learn: time and peak memory (float64, Gaussian kernel; median of repeats)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true")
    g.add_argument("--tiny", action="store_true")
    p.add_argument("--out", help="results directory (default bench/results)")
    p.add_argument("--repeats", type=int)
    p.add_argument("--mem-budget-gb", type=float, default=6.0)
    args = p.parse_args(argv)
    name = "tiny" if args.tiny else "quick" if args.quick else "full"
    profile = dict(PROFILES[name])
    if args.repeats:
        profile["repeats"] = args.repeats
    rows = run(profile, args.mem_budget_gb * 1e9)
    out = results_dir(args.out)
    stem = "scaling" if name == "full" else f"scaling_{name}"
    write_csv(out / f"{stem}.csv", rows)
    plot(out / f"{stem}.png", rows)
    print(f"{'sweep':8s} {'op':9s} {'N':>8s} {'d':>4s} {'D':>5s} {'thr':>4s} {'randfeat':>10s} {'sklearn':>10s} {'ratio':>6s}")
    for r in rows:
        if r["library"] != "randfeat":
            continue
        base = next(q for q in rows if q["library"] == "sklearn" and all(q[k] == r[k] for k in ("sweep", "op", "N", "d", "D", "threads")))
        ratio = f"{base['seconds'] / r['seconds']:.1f}x" if base["seconds"] != "" and r["seconds"] else "—"
        print(f"{r['sweep']:8s} {r['op']:9s} {r['N']:8d} {r['d']:4d} {r['D']:5d} {str(r['threads']):>4s} "
              f"{fmt_seconds(r['seconds'] if r['seconds'] != '' else None):>10s} "
              f"{fmt_seconds(base['seconds'] if base['seconds'] != '' else None):>10s} {ratio:>6s}")
    print(f"wrote {out / (stem + '.csv')} and {out / (stem + '.png')}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as exc:
        print(f"scaling.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
