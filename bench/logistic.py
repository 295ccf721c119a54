"""randfeat.LogisticRegression(features=RandomFourierFeatures(D)) against make_pipeline(RBFSampler(D), LogisticRegression()).

    python bench/logistic.py [--quick] [--rounds 3] [--out DIR]
    python bench/logistic.py --binning [--out DIR]

The whole ``fit`` of each (features drawn, made and the model fitted), on
the same data, binary and 10 classes, each run in a fresh child process
(time, peak RSS increase sampled by ``_harness.PeakMemory``), the two
alternating (which goes first alternates between rounds).  Both at their
defaults (C=1, tol=1e-4, max_iter=100), the same gamma; the training
log-loss of each is reported beside its time, since the comparison is only
fair at equal or lower log-loss.  Issue 35's bar: 100000 × 20, D = 2000.
``--quick``: 20000 × 20, D = 1000, one round (under two minutes here).
Writes ``logistic[_quick].json`` and ``.md`` to bench/results (or --out).
Each run records the 1-minute load average when it starts (the machine is shared).

``--binning``: issue 35's sparse bar, randfeat alone: 500000 × 20, binary,
``RandomBinningFeatures(50)``; the fit must not densify: peak RSS increase
<= the CSR's bytes + 3·D·K float64 + 64 MiB (``logistic_binning.json/.md``).
"""

import argparse
import json
import statistics

from _harness import BENCH_DIR, fmt_bytes, fmt_seconds, machine_info, progress, results_dir, run_child_json

CHILD = """
import json, os, sys, time
sys.path.insert(0, {bench!r})
load = os.getloadavg()[0]
import numpy as np
from _harness import timed
from sklearn.datasets import make_classification
from sklearn.metrics import log_loss
method, n, d, D, K = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
X, y = make_classification(n, d, n_informative=10, n_redundant=0, n_classes=K, n_clusters_per_class=2,
                           class_sep=1.0, flip_y=0.02, random_state=0)
X = (X - X.mean(0)) / X.std(0)
gamma = 0.5 / d
if method == "randfeat":
    import randfeat
    model = randfeat.LogisticRegression(features=randfeat.RandomFourierFeatures(D, gamma=gamma, random_state=0))
else:
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    model = make_pipeline(RBFSampler(gamma=gamma, n_components=D, random_state=0), LogisticRegression())
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cpu = time.process_time()
    _, seconds, peak = timed(model.fit, X, y)
    cpu = time.process_time() - cpu
est = model if method == "randfeat" else model[-1]
print(json.dumps(dict(seconds=seconds, cpu_seconds=cpu, peak_bytes=peak, load=load, log_loss=float(log_loss(y, model.predict_proba(X))),
                      n_iter=int(est.n_iter_[0]), solver=getattr(est, "solver_", "lbfgs"),
                      warnings=[str(w.message)[:120] for w in caught])))
"""

BINNING_CHILD = """
import json, os, sys
sys.path.insert(0, {bench!r})
load = os.getloadavg()[0]
import numpy as np
from _harness import timed
from sklearn.datasets import make_classification
from sklearn.metrics import log_loss
import randfeat
n, d, grids = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
X, y = make_classification(n, d, n_informative=10, n_redundant=0, n_clusters_per_class=2, flip_y=0.02,
                           random_state=0)
X = (X - X.mean(0)) / X.std(0)
model = randfeat.LogisticRegression(features=randfeat.RandomBinningFeatures(grids, random_state=0))
_, seconds, peak = timed(model.fit, X, y)
Z = model.features_.transform(X)
csr = Z.data.nbytes + Z.indices.nbytes + Z.indptr.nbytes
K = model.coef_.shape[0]
print(json.dumps(dict(seconds=seconds, peak_bytes=peak, load=load, csr_bytes=csr, n_components=Z.shape[1],
                      bar_bytes=csr + 3 * Z.shape[1] * K * 8 + 64 * 2**20, log_loss=float(log_loss(y, model.predict_proba(X))),
                      n_iter=int(model.n_iter_[0]), solver=model.solver_)))
"""


def binning(args):
    """The binning bar: one fit (or --rounds), randfeat only."""
    n, d, grids = 500000, 20, 50
    code = BINNING_CHILD.format(bench=str(BENCH_DIR))
    runs = []
    for r in range(args.rounds or 1):
        progress(f"binning, round {r + 1}: {n} x {d}, RandomBinningFeatures({grids})")
        res = run_child_json(code, n, d, grids)
        progress(f"  {fmt_seconds(res['seconds'])}, +{fmt_bytes(res['peak_bytes'])} (bar {fmt_bytes(res['bar_bytes'])}, "
                 f"CSR {fmt_bytes(res['csr_bytes'])}, D = {res['n_components']}), {res['solver']}")
        runs.append(res)
    info = _machine()
    out = results_dir(args.out)
    (out / "logistic_binning.json").write_text(json.dumps(dict(meta=dict(n_samples=n, n_features=d, n_grids=grids,
                                                                         machine=info), runs=runs), indent=1))
    lines = [f"# LogisticRegression(features=RandomBinningFeatures({grids})), binary: the sparse memory bar", "",
             f"{n} x {d}; {info['cpu']}, {info['cpu_count']} CPUs.", "",
             "| time | peak RSS increase | bar: CSR + 3·D·K·8 B + 64 MiB | CSR | D | solver | iterations | log-loss "
             "| load at start |", "|---|---|---|---|---|---|---|---|---|"]
    for res in runs:
        lines.append(f"| {fmt_seconds(res['seconds'])} | +{fmt_bytes(res['peak_bytes'])} | {fmt_bytes(res['bar_bytes'])} "
                     f"| {fmt_bytes(res['csr_bytes'])} | {res['n_components']} | {res['solver']} | {res['n_iter']} | "
                     f"{res['log_loss']:.5f} | {res['load']:.2f} |")
    (out / "logistic_binning.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _machine():
    info = machine_info()
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
        with open("/proc/cpuinfo") as f:
            info["avx512"] = any("avx512f" in line for line in f if line.startswith("flags"))
    except (OSError, StopIteration):
        info["cpu"] = None
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20000 x 20, D = 1000, one round")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--classes", type=int, nargs="+", default=[2, 10], help="numbers of classes to run")
    parser.add_argument("--binning", action="store_true", help="the binning memory bar (500000 x 20, 50 grids)")
    args = parser.parse_args()
    if args.binning:
        return binning(args)
    n, d, D = (20000, 20, 1000) if args.quick else (100000, 20, 2000)
    rounds = args.rounds or (1 if args.quick else 3)
    code = CHILD.format(bench=str(BENCH_DIR))
    rows = []
    for K in args.classes:
        runs = {"randfeat": [], "sklearn": []}
        for r in range(rounds):
            order = ["randfeat", "sklearn"] if r % 2 == 0 else ["sklearn", "randfeat"]
            for method in order:
                progress(f"{K} classes, round {r + 1}/{rounds}: {method}")
                res = run_child_json(code, method, n, d, D, K)
                progress(f"  {fmt_seconds(res['seconds'])} (CPU {fmt_seconds(res['cpu_seconds'])}, load "
                         f"{res['load']:.1f}), +{fmt_bytes(res['peak_bytes'])}, "
                         f"log-loss {res['log_loss']:.5f}, {res['n_iter']} iterations ({res['solver']})")
                runs[method].append(res)
        med = {m: {k: statistics.median(r[k] for r in v) for k in ("seconds", "cpu_seconds", "peak_bytes", "log_loss")}
               for m, v in runs.items()}
        rows.append(dict(n_classes=K, runs=runs, median=med,
                         speedup=med["sklearn"]["seconds"] / med["randfeat"]["seconds"],
                         cpu_speedup=med["sklearn"]["cpu_seconds"] / med["randfeat"]["cpu_seconds"],
                         memory_ratio=med["randfeat"]["peak_bytes"] / max(1, med["sklearn"]["peak_bytes"])))
    info = _machine()
    out = results_dir(args.out)
    stem = ("logistic_quick" if args.quick else "logistic") + ("" if args.classes == [2, 10] else
                                                              "_" + "_".join(map(str, args.classes)))
    meta = dict(n_samples=n, n_features=d, n_components=D, rounds=rounds, machine=info)
    (out / f"{stem}.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    lines = [f"# LogisticRegression(features=RandomFourierFeatures({D})) vs make_pipeline(RBFSampler({D}), "
             f"LogisticRegression())", "",
             f"{n} x {d}, the whole fit, median of {rounds} round(s) alternating; {info['cpu']}, "
             f"{info['cpu_count']} CPUs, AVX-512 {info.get('avx512')}, load {info['load_average_1min']} at the end, "
             f"{min(r['load'] for row in rows for v in row['runs'].values() for r in v):.1f}–"
             f"{max(r['load'] for row in rows for v in row['runs'].values() for r in v):.1f} at the starts of the runs.",
             "",
             "| classes | randfeat time | sklearn time | speed-up | CPU-time speed-up | randfeat peak | sklearn peak "
             "| memory ratio | randfeat log-loss | sklearn log-loss | randfeat solver |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        a, b = row["median"]["randfeat"], row["median"]["sklearn"]
        lines.append(f"| {row['n_classes']} | {fmt_seconds(a['seconds'])} | {fmt_seconds(b['seconds'])} | "
                     f"{row['speedup']:.2f}x | {row['cpu_speedup']:.2f}x | +{fmt_bytes(a['peak_bytes'])} | +{fmt_bytes(b['peak_bytes'])} | "
                     f"{row['memory_ratio']:.2f} | {a['log_loss']:.5f} | {b['log_loss']:.5f} | "
                     f"{row['runs']['randfeat'][0]['solver']} |")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
