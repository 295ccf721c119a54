#!/usr/bin/env python
"""Structured random features (SORF, Fastfood) against dense ones: transform time against d.

For N = 8000 rows, d in {64, 256, 1024, 4096}, D in {4096, 16384} (the
``cossin`` map: D/2 frequencies), float32 and float64, 1 thread and all
threads, it times in one run, alternating, the median of the repeats of:

* ``sorf``, ``fastfood``: ``RandomFourierFeatures(sampling=...)`` with the
  structured samplings (the compiled Walsh–Hadamard transform fused with
  the sin/cos), O(D log d) per row, parameters O(D);
* ``orthogonal``, ``iid``: ``RandomFourierFeatures(sampling=...)``, the
  dense map X @ W (d × D/2) fused with the sin/cos;
* ``RBFSampler``: scikit-learn's ``RBFSampler(n_components=D)`` (the ``cos``
  map: D frequencies, X @ W then np.cos), what a scikit-learn user has;
* ``floor``: writing the N × D output and computing its sin/cos from one
  argument row held in cache (``_structured_fast.trig_floor``: the same trig
  and chunking, no product at all), what any map costs at least.

Every transform allocates its output (first-touch page faults included, as
a user's call has them).  Ratios are of medians taken in the same run.  The
thread count sets ``n_jobs`` for randfeat and limits BLAS (threadpoolctl)
for every method.

Outputs under bench/results/: ``structured[_<profile>].csv`` (one row per
case and method), ``.md`` (tables and the issue's bars), ``.png`` (time
against d per D and dtype; solid all threads, dashed 1 thread).

Usage: ``python bench/structured.py [--quick | --tiny] [--threads 1,all] [--out DIR]``;
``--render CSV`` writes the tables and plot of a CSV again (the CSV is
rewritten after every case, so an interrupted run keeps its cases).
"""

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import HarnessError, machine_info, progress, results_dir  # noqa: E402

PROFILES = {
    "full": dict(n=8000, ds=(64, 256, 1024, 4096), Ds=(4096, 16384), repeats=3),
    "quick": dict(n=8000, ds=(64, 1024), Ds=(16384,), repeats=3),
    "tiny": dict(n=300, ds=(16, 100), Ds=(256,), repeats=2),
}
METHODS = ("floor", "sorf", "fastfood", "orthogonal", "iid", "RBFSampler")
STYLE = {"floor": ("k", "o"), "sorf": ("C0", "s"), "fastfood": ("C1", "D"), "orthogonal": ("C2", "^"),
         "iid": ("C3", "v"), "RBFSampler": ("C4", "x")}


def make_methods(X, D, n_jobs):
    """The callables timed for one case, fitted (fit time is not timed)."""
    from sklearn.kernel_approximation import RBFSampler

    import randfeat
    from randfeat._ext import _structured_fast

    n, d = X.shape
    gamma = 1.0 / d  # X @ W of order 1, as for standardised data
    threads = n_jobs if n_jobs is not None else randfeat.get_config()["default_n_threads"]
    a = np.random.default_rng(1).uniform(-3, 3, D // 2).astype(X.dtype)

    def floor():
        out = np.empty((n, D), dtype=X.dtype)
        _structured_fast.trig_floor(a, out, np.sqrt(2.0 / D), threads)
        return out

    methods = {"floor": floor}
    for s in ("sorf", "fastfood", "orthogonal", "iid"):
        est = randfeat.RandomFourierFeatures(D, gamma=gamma, sampling=s, random_state=0, n_jobs=n_jobs).fit(X)
        methods[s] = lambda est=est: est.transform(X)
    rbf = RBFSampler(gamma=gamma, n_components=D, random_state=0).fit(X)
    methods["RBFSampler"] = lambda: rbf.transform(X)
    return methods


def time_alternating(methods, repeats):
    """Median seconds of each callable, run in turns so that noise hits all alike."""
    times = {k: [] for k in methods}
    for _ in range(repeats):
        for k, fn in methods.items():
            t = time.perf_counter()
            out = fn()
            times[k].append(time.perf_counter() - t)
            del out
    return {k: float(np.median(v)) for k, v in times.items()}


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["dtype", "d", "D", "n", "threads", "method", "seconds", "repeats"])
        w.writeheader()
        w.writerows(rows)


def run(profile, thread_counts, csv_path):
    """Time every case; the CSV is rewritten after each case (a long run interrupted keeps what it measured)."""
    from threadpoolctl import threadpool_limits

    rows = []
    for dtype in profile.get("dtypes", (np.float32, np.float64)):
        for D in profile["Ds"]:
            for d in profile["ds"]:
                X = np.random.default_rng(0).standard_normal((profile["n"], d)).astype(dtype)
                for n_jobs in thread_counts:
                    methods = make_methods(X, D, n_jobs)
                    for k, fn in methods.items():  # warm-up, and the dtype is kept
                        assert fn().dtype == dtype, k
                    with threadpool_limits(limits=n_jobs, user_api="blas"):
                        med = time_alternating(methods, profile["repeats"])
                    for k in METHODS:
                        rows.append(dict(dtype=np.dtype(dtype).name, d=d, D=D, n=profile["n"],
                                         threads="all" if n_jobs is None else n_jobs, method=k, seconds=med[k],
                                         repeats=profile["repeats"]))
                    write_csv(csv_path, rows)
                    progress(f"{np.dtype(dtype).name} D={D} d={d} threads={n_jobs or 'all'}: "
                             + " ".join(f"{k}={med[k] * 1e3:.0f}ms" for k in METHODS))
    return rows


def _table(rows):
    """{(dtype, D, threads, d): {method: seconds}}."""
    out = {}
    for r in rows:
        out.setdefault((r["dtype"], r["D"], str(r["threads"]), r["d"]), {})[r["method"]] = r["seconds"]
    return out


def bars(rows):
    """The issue's bars, where this run has their case (float32, D = 16384, all threads)."""
    tab, lines = _table(rows), []
    big = tab.get(("float32", 16384, "all", 1024))
    if big:
        for s, need in (("sorf", 5.0), ("fastfood", 4.0)):
            r = big["orthogonal"] / big[s]
            lines.append(f"- d = 1024, D = 16384, float32, all threads: `{s}` is {r:.1f}× faster than "
                         f"`orthogonal` (bar ≥ {need:.0f}×: {'met' if r >= need else 'NOT met'}); "
                         f"{s} {big[s] * 1e3:.0f} ms, orthogonal {big['orthogonal'] * 1e3:.0f} ms, "
                         f"floor {big['floor'] * 1e3:.0f} ms.")
    small = tab.get(("float32", 16384, "all", 64))
    if small:
        for s in ("sorf", "fastfood"):
            r = small[s] / small["orthogonal"]
            lines.append(f"- d = 64, D = 16384, float32, all threads: `{s}` takes {r:.2f}× the time of "
                         f"`orthogonal` (bar ≤ 1.5×: {'met' if r <= 1.5 else 'NOT met'}); "
                         f"{s} {small[s] * 1e3:.0f} ms, orthogonal {small['orthogonal'] * 1e3:.0f} ms, "
                         f"floor {small['floor'] * 1e3:.0f} ms.")
    return lines


def markdown(rows, profile, info):
    tab = _table(rows)
    lines = [
        "# Structured random features: transform time against d",
        "",
        f"N = {profile['n']} rows, the `cossin` map (D/2 frequencies; RBFSampler: the `cos` map with D),",
        f"medians of {profile['repeats']} repeats, all methods alternating in one run; the output is "
        "allocated by every call.",
        f"Machine: {info.get('processor')}, {info.get('cpu_count')} CPUs, load average "
        f"{info.get('load_average_1min')} at the start (a shared machine: compare the ratios).",
        "",
        "## Bars (issue 26)",
        "",
        *(bars(rows) or ["(this profile does not have the bars' cases)"]),
        "",
        "## Times (ms) and ratios",
        "",
        "orthogonal / sorf and orthogonal / fastfood: speed-ups (> 1: structured faster); "
        "sorf / floor: distance from the floor.",
    ]
    for key in sorted({k[:3] for k in tab}):
        dtype, D, threads = key
        lines += ["", f"### {dtype}, D = {D}, threads = {threads}", "",
                  "| d | " + " | ".join(METHODS) + " | orth / sorf | orth / fastfood | sorf / floor | fastfood / floor |",
                  "|---:|" + "---:|" * (len(METHODS) + 4)]
        for d in sorted(k[3] for k in tab if k[:3] == key):
            m = tab[key + (d,)]
            lines.append(f"| {d} | " + " | ".join(f"{m[k] * 1e3:.1f}" for k in METHODS)
                         + f" | {m['orthogonal'] / m['sorf']:.2f} | {m['orthogonal'] / m['fastfood']:.2f}"
                         + f" | {m['sorf'] / m['floor']:.2f} | {m['fastfood'] / m['floor']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(path, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tab = _table(rows)
    panels = sorted({(k[0], k[1]) for k in tab})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for ax, (dtype, D) in zip(axes[0], panels):
        for threads, ls in (("all", "-"), ("1", "--")):
            ds = sorted(k[3] for k in tab if k[:3] == (dtype, D, threads))
            if not ds:
                continue
            for meth in METHODS:
                color, marker = STYLE[meth]
                ax.loglog(ds, [tab[(dtype, D, threads, d)][meth] for d in ds], color=color, ls=ls, marker=marker,
                          ms=4, label=f"{meth}" if threads == "all" else None)
        ax.set_title(f"{dtype}, D = {D}")
        ax.set_xlabel("input dimension d")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("transform time (s)")
    axes[0][0].legend(fontsize=7, title="solid: all threads, dashed: 1", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true")
    g.add_argument("--tiny", action="store_true")
    p.add_argument("--threads", default="1,all", help="comma-separated thread counts; 'all' = n_jobs=None")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--dtypes", default="float32,float64", help="comma-separated dtypes (default both)")
    p.add_argument("--out", help="results directory (default bench/results)")
    p.add_argument("--render", help="write the .md and .png of an existing CSV (e.g. an interrupted run's)")
    p.add_argument("--note", default="", help="with --render: a paragraph put under the title")
    args = p.parse_args(argv)
    if args.render:
        path = Path(args.render)
        with open(path, newline="") as f:
            rows = [dict(r, d=int(r["d"]), D=int(r["D"]), n=int(r["n"]), seconds=float(r["seconds"]))
                    for r in csv.DictReader(f)]
        if not rows:
            raise HarnessError(f"{path} has no measurements")
        profile = dict(n=rows[0]["n"], repeats=rows[0]["repeats"])
        info = dict(machine_info(), load_average_1min="(not recorded: re-rendered from the CSV)")
        md = markdown(rows, profile, info)
        if args.note:
            title, rest = md.split("\n", 1)
            md = f"{title}\n\n{args.note}\n{rest}"
        path.with_suffix(".md").write_text(md)
        plot(path.with_suffix(".png"), rows)
        print(f"wrote {path.with_suffix('.md')} and .png")
        return 0
    name = "tiny" if args.tiny else "quick" if args.quick else "full"
    profile = dict(PROFILES[name])
    if args.repeats:
        profile["repeats"] = args.repeats
    try:
        profile["dtypes"] = [np.dtype(t).type for t in args.dtypes.split(",")]
    except TypeError:
        raise HarnessError(f"--dtypes takes float32 and/or float64, got {args.dtypes!r}") from None
    try:
        threads = [None if t == "all" else int(t) for t in args.threads.split(",")]
    except ValueError:
        raise HarnessError(f"--threads takes integers or 'all', got {args.threads!r}") from None
    info = machine_info()
    out = results_dir(args.out)
    stem = "structured" if name == "full" else f"structured_{name}"
    rows = run(profile, threads, out / f"{stem}.csv")
    md = markdown(rows, profile, info)
    (out / f"{stem}.md").write_text(md)
    plot(out / f"{stem}.png", rows)
    print(md)
    print(f"wrote {out / (stem + '.csv')}, .md and .png")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as exc:
        print(f"structured.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
