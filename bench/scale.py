#!/usr/bin/env python
"""Ten million rows on one machine: time, peak memory and test error as N grows.

A HIGGS-like synthetic set (28 float32 columns, two classes, a nonlinear
boundary so that a kernel beats a linear model; 100,000 test rows) at
10⁶, 2·10⁶, 5·10⁶ and 10⁷ training rows.  Per size, three ways to fit it:

* ``binning``: ``RidgeClassifier(features=RandomBinningFeatures(50), solver="cg")``
  (Binning+LS; the features held as a CSR, conjugate gradients);
* ``fourier``: ``RidgeClassifier(features=RandomFourierFeatures(2000),
  solver="cholesky")`` (Fourier+LS; the features streamed in chunks into
  the normal equations, never stored, then one Cholesky solve);
* ``sgd``: what a scikit-learn user would otherwise try on data this size:
  ``RBFSampler(n_components=2000)`` and ``SGDClassifier.partial_fit`` over
  chunks of 10,000 rows, ``--sgd-epochs`` passes (default one), capped at
  ``--sgd-max-rows`` rows (the row says so when it is).

Each case runs in its own child process (``python bench/scale.py --case ...``)
that makes the data itself (the same rows for every case, from a seed, in
slabs so that making them costs no more memory than holding them), fits,
and predicts the test set.  Peak memory is the child's peak resident set
(VmHWM: Python, the input, the features, the solver's state, everything);
"input" is the training array's size and "features" the CSR's (binning) as the map makes it (the CG fit frees its
values, all one number, before it makes the solver's copy of the bins).

Each case's result is appended to ``scale.jsonl`` as it finishes (the
machine's load with it), so a long run can be split over several calls;
``scale.csv``, ``scale.md`` and ``scale.png`` (time and memory against N,
log-log) are rewritten from the latest result of each (case, N), under
bench/results/ (``--quick``: ``scale_quick.*``, small sizes for CI and the
docs build).  The fit's CPU seconds (all threads) are recorded beside its
wall time: on a shared machine the wall time follows the load.  Cost: the
10⁷-row cases take about 75 (binning), 590 (Fourier: the Gram matrix,
8·10¹³ flops) and 110 (SGD) CPU seconds, two cores' worth.  Usage::

    python bench/scale.py --quick
    python bench/scale.py                      # 1e6, 2e6, 5e6, 1e7
    python bench/scale.py --sizes 1000000 10000000 --cases binning fourier
    python bench/scale.py --report-only        # the tables and plot again, from scale.jsonl
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import fmt_bytes, fmt_seconds, machine_info, progress, results_dir  # noqa: E402

D_IN = 28
N_TEST = 100_000
SLAB = 1 << 18
CASES = ("binning", "fourier", "sgd")
LABELS = {
    "binning": "RidgeClassifier + RandomBinningFeatures(50), CG",
    "fourier": "RidgeClassifier + RandomFourierFeatures(2000), streamed Cholesky",
    "sgd": "scikit-learn RBFSampler(2000) + SGDClassifier.partial_fit",
}


# ---------------------------------------------------------------- the data
def _boundary():
    """The fixed nonlinear decision function: random cosines, a product and a radial term."""
    rng = np.random.default_rng(36)
    W = rng.normal(scale=0.35, size=(D_IN, 12))
    b = rng.uniform(0, 2 * np.pi, 12)
    a = rng.normal(size=12)
    return W, b, a


def make_rows(n, seed):
    """(X float32 (n, 28), y int8 in {0, 1}): made slab by slab into the final arrays."""
    W, b, a = _boundary()
    X = np.empty((n, D_IN), dtype=np.float32)
    y = np.empty(n, dtype=np.int8)
    rng = np.random.default_rng(seed)
    for i0 in range(0, n, SLAB):
        i1 = min(n, i0 + SLAB)
        x = rng.standard_normal((i1 - i0, D_IN))
        # HIGGS-like marginals: a few positive, skewed columns (momenta), the rest symmetric (angles)
        x[:, :6] = np.exp(0.5 * x[:, :6])
        f = np.cos(x @ W + b) @ a + 0.6 * x[:, 0] * x[:, 7] - 0.15 * np.sum(x[:, 8:14] ** 2, axis=1) + 0.9
        y[i0:i1] = (f + 0.5 * rng.standard_normal(i1 - i0)) > 0
        X[i0:i1] = x
    return X, y


# ------------------------------------------------------------ one case (child)
def _vm_hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _sgd_fit(X, y, epochs, seed):
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import SGDClassifier

    rbf = RBFSampler(gamma=1.0 / (D_IN * X[:200_000].var()), n_components=2000, random_state=seed)
    rbf.fit(X[:1000])
    clf = SGDClassifier(random_state=seed)
    classes = np.array([0, 1], dtype=np.int8)
    order = np.random.default_rng(seed).permutation((X.shape[0] + 9_999) // 10_000)
    for _ in range(epochs):
        for c in order:
            sl = slice(c * 10_000, (c + 1) * 10_000)
            clf.partial_fit(rbf.transform(X[sl]), y[sl], classes=classes)
    return lambda Xt: np.concatenate([clf.predict(rbf.transform(Xt[i:i + 10_000]))
                                      for i in range(0, Xt.shape[0], 10_000)])


def run_case(case, n, seed, sgd_epochs, sgd_max_rows):
    """Fit one case on n rows in this process; return its measurements."""
    import randfeat

    t0 = time.perf_counter()
    X, y = make_rows(n, seed)
    Xt, yt = make_rows(N_TEST, seed + 1)
    t_data = time.perf_counter() - t0
    hwm_data = _vm_hwm()
    out = dict(case=case, n=n, input_bytes=X.nbytes, data_s=t_data, rows_used=n)
    t0, c0 = time.perf_counter(), time.process_time()
    if case == "binning":
        model = randfeat.RidgeClassifier(features=randfeat.RandomBinningFeatures(50, random_state=seed),
                                         solver="cg").fit(X, y)
        fmap = model.features_
        # the training CSR's size as the fit holds it (int32 or int64 indices, X's float dtype)
        idx_bytes = 4 if n * 50 < 2**31 - 1 and fmap.n_features_out_ < 2**31 - 1 else 8
        out["feature_bytes"] = n * 50 * (idx_bytes + X.dtype.itemsize) + idx_bytes * (n + 1)
        out["n_features_out"] = int(fmap.n_features_out_)
        out["n_iter"] = int(np.max(model.n_iter_)) if getattr(model, "n_iter_", None) is not None else None
        predict = model.predict
    elif case == "fourier":
        model = randfeat.RidgeClassifier(features=randfeat.RandomFourierFeatures(2000, random_state=seed),
                                         solver="cholesky").fit(X, y)
        out["feature_bytes"] = 0
        predict = model.predict
    else:
        m = min(n, sgd_max_rows)
        out["rows_used"] = m
        predict = _sgd_fit(X[:m], y[:m], sgd_epochs, seed)
        out["feature_bytes"] = 0
        out["epochs"] = sgd_epochs
    out["fit_s"] = time.perf_counter() - t0
    # CPU seconds of all threads: less sensitive than wall time to other jobs on a shared machine
    out["fit_cpu_s"] = time.process_time() - c0
    t0 = time.perf_counter()
    out["test_error"] = float(np.mean(predict(Xt) != yt))
    out["predict_s"] = time.perf_counter() - t0
    out["peak_rss_bytes"] = _vm_hwm()
    out["data_rss_bytes"] = hwm_data
    return out


# ---------------------------------------------------------------- the parent
def _child(case, n, args):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--case", case, "--n", str(n), "--seed", str(args.seed),
           "--sgd-epochs", str(args.sgd_epochs), "--sgd-max-rows", str(args.sgd_max_rows)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if proc.returncode != 0:
        progress(f"  {case} n={n:,} failed: {proc.stderr[-2000:]}")
        return dict(case=case, n=n, error=proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _markdown(rows, info, quick):
    sizes = sorted({r["n"] for r in rows})
    lines = [
        "# Ten million rows: `bench/scale.py`" + (" (--quick)" if quick else ""),
        "",
        f"HIGGS-like synthetic set: {D_IN} float32 columns, two classes, nonlinear boundary; "
        f"{N_TEST:,} test rows.  Each case in its own process; *peak RSS* is that process's "
        "high-water mark (Python, input, features, solver, everything); *input* is the training "
        "array (N × 28 float32), *features* the binning CSR as the map makes it (indices + values + row "
        "pointers; the CG fit frees its values once the solver's copy of the bins is made).",
        "",
        f"Machine: {info.get('processor')}{' (AVX-512)' if info.get('avx512') else ''}, {info.get('cpu_count')} cores, {info.get('mem_total_gb')} GB; "
        f"load average {_loads(rows)} at the start of each case; randfeat {info.get('randfeat')}, "
        f"scikit-learn {info.get('sklearn')}.",
        "",
        "| N | method | fit | fit CPU | predict | peak RSS | input | features | peak − input − features | test error | notes |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n in sizes:
        for r in (r for r in rows if r["n"] == n):
            if "error" in r:
                lines.append(f"| {n:,} | {r['case']} | — | — | — | — | — | — | — | — | {r['error'][:160]} |")
                continue
            notes = []
            if r["case"] == "binning":
                notes.append(f"{r['n_features_out']:,} columns, {r['n_iter']} CG iterations")
            if r["case"] == "sgd":
                notes.append(f"{r['epochs']} epoch(s)")
                if r["rows_used"] < r["n"]:
                    notes.append(f"capped at the first {r['rows_used']:,} rows")
            extra = r["peak_rss_bytes"] - r["input_bytes"] - r["feature_bytes"]
            lines.append(
                f"| {n:,} | {r['case']} | {fmt_seconds(r['fit_s'])} | {fmt_seconds(r.get('fit_cpu_s'))} | "
                f"{fmt_seconds(r['predict_s'])} | "
                f"{fmt_bytes(r['peak_rss_bytes'])} | {fmt_bytes(r['input_bytes'])} | "
                f"{fmt_bytes(r['feature_bytes']) if r['feature_bytes'] else '—'} | {fmt_bytes(extra)} | "
                f"{r['test_error']:.4f} | {'; '.join(notes)} |")
    lines += ["", "Methods: " + "; ".join(f"*{k}*: {v}" for k, v in LABELS.items()) + "."]
    small, large = (sizes[0], sizes[-1]) if sizes else (0, 0)
    if large > small:
        ratios = []
        for case in CASES:
            a = next((r for r in rows if r["case"] == case and r["n"] == small and "error" not in r), None)
            b = next((r for r in rows if r["case"] == case and r["n"] == large and "error" not in r), None)
            if a and b:
                cpu = (f" (CPU seconds {b['fit_cpu_s'] / a['fit_cpu_s']:.1f}×)"
                       if a.get("fit_cpu_s") and b.get("fit_cpu_s") else "")
                ratios.append(f"{case} {b['fit_s'] / a['fit_s']:.1f}×{cpu}")
        lines += ["", f"Fit time at {large:,} rows over the time at {small:,} rows ({large / small:.0f}× the rows): "
                  + ", ".join(ratios) + "."]
    return "\n".join(lines) + "\n"


def _machine():
    info = machine_info()
    try:
        cpu = Path("/proc/cpuinfo").read_text()
        info["processor"] = next(line.split(":", 1)[1].strip() for line in cpu.splitlines()
                                 if line.startswith("model name"))
        info["avx512"] = "avx512f" in cpu
    except (OSError, StopIteration):
        pass
    return info


def _loads(rows):
    loads = [r["machine"].get("load_average_1min") for r in rows if r.get("machine")]
    loads = [x for x in loads if x is not None]
    return f"{min(loads):.1f}–{max(loads):.1f}" if loads else "?"


def _plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4))
    for case in CASES:
        rs = sorted((r for r in rows if r["case"] == case and "error" not in r), key=lambda r: r["n"])
        if not rs:
            continue
        n = [r["n"] for r in rs]
        ax_t.plot(n, [r["fit_s"] for r in rs], "o-", label=case)
        ax_m.plot(n, [r["peak_rss_bytes"] / 1e9 for r in rs], "o-", label=case)
    rs = sorted((r for r in rows if r["case"] == "binning" and "error" not in r), key=lambda r: r["n"])
    if rs:
        ax_m.plot([r["n"] for r in rs], [(r["input_bytes"] + r["feature_bytes"]) / 1e9 for r in rs], "k:",
                  label="input + binning CSR")
    for ax, title in ((ax_t, "fit time (s)"), (ax_m, "peak RSS (GB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training rows")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 2_000_000, 5_000_000, 10_000_000])
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--quick", action="store_true", help="small sizes (CI, docs): 20,000 and 50,000 rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sgd-epochs", type=int, default=1)
    ap.add_argument("--sgd-max-rows", type=int, default=10_000_000)
    ap.add_argument("--out", default=None, help="results directory (default bench/results)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the csv/md/png from the runs already logged (<stem>.jsonl) without running")
    ap.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # child mode
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.n, args.seed, args.sgd_epochs, args.sgd_max_rows)))
        return
    sizes = [20_000, 50_000] if args.quick else args.sizes
    stem = "scale_quick" if args.quick else "scale"
    out = results_dir(args.out)
    log = out / f"{stem}.jsonl"  # every case's result, appended as it finishes (runs can be split)
    for n in [] if args.report_only else sizes:
        for case in args.cases:
            progress(f"{case} n={n:,} ...")
            info = _machine()
            r = _child(case, n, args)
            r["machine"] = info
            with open(log, "a") as f:
                f.write(json.dumps(r) + "\n")
            if "error" not in r:
                progress(f"  fit {r['fit_s']:.1f} s, peak RSS {fmt_bytes(r['peak_rss_bytes'])}, "
                         f"test error {r['test_error']:.4f}")
    latest = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        r = json.loads(line)
        latest[(r["case"], r["n"])] = r
    rows = sorted(latest.values(), key=lambda r: (r["n"], CASES.index(r["case"])))
    info = rows[-1]["machine"] if rows else _machine()
    keys = ["case", "n", "rows_used", "fit_s", "fit_cpu_s", "predict_s", "data_s", "peak_rss_bytes", "data_rss_bytes",
            "input_bytes", "feature_bytes", "test_error", "n_features_out", "n_iter", "epochs", "error"]
    with open(out / f"{stem}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    (out / f"{stem}.md").write_text(_markdown(rows, info, args.quick))
    _plot(rows, out / f"{stem}.png")
    progress(f"wrote {out / stem}.{{csv,md,png}}")


if __name__ == "__main__":
    main()
