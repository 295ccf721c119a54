"""Benchmark RandomBinningFeatures against the fastest plain-NumPy implementation.

Times ``fit``, ``transform`` and ``fit_transform`` of randfeat (1 and 2
threads) and of ``bench/_binning_numpy.py`` (the same definition, chunked and
vectorised NumPy, single-threaded) in the same run, alternating candidate and
baseline, and reports medians, rows/s and ratios (baseline time / randfeat
time).  It also measures the peak memory of ``fit_transform`` in a fresh
subprocess against the bar: returned CSR + the estimator's fitted state (its
vocabularies) + 64 MB.

Data: a Forest-Cover-like synthetic matrix (d = 54: 10 standardised
continuous columns, a one-hot of 4 and a one-hot of 40 categories), so bins
are shared between rows as on the real data set.

Usage::

    python bench/binning.py            # full: N in {50000, 522000}, P in {30, 50}, float64/32
    python bench/binning.py --quick    # the bar's shape only: N=522000, d=54, P=50, float64
    python bench/binning.py --tiny     # seconds; used by the test suite

Results go to bench/results/binning.md and binning.csv (``--out DIR``).
"""

import argparse
import csv
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _binning_numpy as ref  # noqa: E402
from _covtype_like import BINNING_GAMMA, D, covtype_like  # noqa: E402
from _harness import run_child_json  # noqa: E402


def _time(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def bench_config(n, P, dtype, repeats, threads):
    """Median seconds of each (implementation, operation) for one shape."""
    from randfeat import RandomBinningFeatures

    X = covtype_like(n, seed=0, dtype=dtype)
    Xt = covtype_like(n, seed=1, dtype=dtype)  # transform: new rows of the same law
    times = {}

    def add(key, t):
        times.setdefault(key, []).append(t)

    proto = RandomBinningFeatures(P, gamma=BINNING_GAMMA, random_state=0).fit(X[:10])
    pitches, offsets = proto.pitches_, proto.offsets_
    info = {}
    for _ in range(repeats):
        # NumPy baseline (single-threaded by nature)
        t, (Zr, keys, koff) = _time(lambda: ref.binning_fit_transform(X, pitches, offsets))
        add(("numpy", "fit_transform"), t)
        del Zr
        t, _ = _time(lambda: ref.fit_vocabulary(ref.hash_bins(X, pitches, offsets)))
        add(("numpy", "fit"), t)
        t, Ztr = _time(lambda: ref.binning_transform(Xt, pitches, offsets, keys, koff))
        add(("numpy", "transform"), t)
        for nt in threads:
            est = RandomBinningFeatures(P, gamma=BINNING_GAMMA, random_state=0, n_jobs=nt)
            t, Z = _time(lambda: est.fit_transform(X))
            add((f"randfeat-{nt}t", "fit_transform"), t)
            info.update(nnz=Z.nnz, n_features_out=est.n_features_out_)
            del Z
            t, _ = _time(lambda: est.fit(X))
            add((f"randfeat-{nt}t", "fit"), t)
            t, Zt = _time(lambda: est.transform(Xt))
            add((f"randfeat-{nt}t", "transform"), t)
            # same definition: the fast path must reproduce the baseline exactly
            if not (np.array_equal(Zt.indices, Ztr.indices) and np.array_equal(Zt.indptr, Ztr.indptr)):
                raise AssertionError(f"randfeat and NumPy baseline disagree at n={n}, P={P}, {dtype}")
            info["transform_nnz"] = Zt.nnz
            del Zt
        del Ztr
    return {k: float(np.median(v)) for k, v in times.items()}, info


MEMORY_SCRIPT = r"""
import json, sys, numpy as np
sys.path.insert(0, {here!r})
from _covtype_like import BINNING_GAMMA, covtype_like
from _harness import proc_status_bytes
from randfeat import RandomBinningFeatures

X = covtype_like({n}, seed=0, dtype=np.{dtype})
est = RandomBinningFeatures({P}, gamma=BINNING_GAMMA, random_state=0, n_jobs={nt})
est.fit(X[:10])  # import and warm everything up outside the measured call
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak-RSS counter (VmHWM)
    reset = True
except OSError:
    reset = False
before = proc_status_bytes("VmRSS")
Z = est.fit_transform(X)
peak = proc_status_bytes("VmHWM")
csr = Z.data.nbytes + Z.indices.nbytes + Z.indptr.nbytes
# The fitted state: every array the estimator keeps (vocabularies, their
# lookup tables, the grids), counted from outside as a user would.
vocab = sum(v.nbytes for v in vars(est).values() if isinstance(v, np.ndarray))
print(json.dumps(dict(extra=peak - before, csr=csr, vocab=vocab, reset=reset)))
"""


def measure_memory(n, P, dtype, nt):
    return run_child_json(MEMORY_SCRIPT.format(here=str(HERE), n=n, P=P, dtype=np.dtype(dtype).name, nt=nt))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the bar's shape only (N=522000, P=50, float64)")
    mode.add_argument("--tiny", action="store_true", help="a few seconds; smoke test")
    parser.add_argument("--out", default=str(HERE / "results"), help="output directory")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)

    import randfeat

    config = randfeat.get_config()

    if args.tiny:
        configs, repeats = [(2000, 5, np.float64), (2000, 5, np.float32)], 1
    elif args.quick:
        configs, repeats = [(522000, 50, np.float64)], 3
    else:
        configs = [(n, P, dt) for n in (50000, 522000) for P in (30, 50) for dt in (np.float64, np.float32)]
        repeats = 3
    repeats = args.repeats or repeats
    threads = sorted({1, min(2, config["default_n_threads"])})

    rows = []
    mem_rows = []
    for n, P, dtype in configs:
        t0 = time.time()
        med, info = bench_config(n, P, dtype, repeats, threads)
        for op in ("fit", "transform", "fit_transform"):
            base = med[("numpy", op)]
            for nt in threads:
                t = med[(f"randfeat-{nt}t", op)]
                rows.append(
                    dict(
                        n=n, d=D, P=P, dtype=np.dtype(dtype).name, op=op, threads=nt,
                        randfeat_s=t, numpy_s=base, ratio=base / t,
                        randfeat_rows_per_s=n / t, numpy_rows_per_s=n / base,
                        n_features_out=info["n_features_out"],
                    )
                )
        mem = measure_memory(n, P, dtype, threads[-1])
        budget = mem["csr"] + mem["vocab"] + 64 * 2**20
        mem_rows.append(dict(n=n, P=P, dtype=np.dtype(dtype).name, **mem, budget=budget, ok=mem["extra"] <= budget))
        print(f"done n={n} P={P} {np.dtype(dtype).name} in {time.time() - t0:.0f}s", file=sys.stderr)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "binning.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    load = os.getloadavg()
    lines = [
        "# RandomBinningFeatures vs plain NumPy (bench/binning.py)",
        "",
        f"randfeat {randfeat.__version__}, vector path `{config['vector_paths'].get('_binning_fast', '?')}`, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average at the end {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} "
        "(the machine is shared: absolute times are noisy, ratios are timed in the same run).",
        f"Median of {repeats} alternating runs; d={D}, gamma={BINNING_GAMMA}, Forest-Cover-like data; "
        "NumPy baseline single-threaded; ratio = NumPy time / randfeat time.",
        "",
        "| N | P | dtype | op | threads | randfeat s | NumPy s | ratio | randfeat rows/s | NumPy rows/s | n_features_out |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['P']} | {r['dtype']} | {r['op']} | {r['threads']} | {r['randfeat_s']:.3f} | "
            f"{r['numpy_s']:.3f} | {r['ratio']:.1f}x | {r['randfeat_rows_per_s']:,.0f} | "
            f"{r['numpy_rows_per_s']:,.0f} | {r['n_features_out']} |"
        )
    lines += [
        "",
        "Peak memory of `fit_transform` (fresh subprocess, peak RSS above the RSS before the call):",
        "",
        "| N | P | dtype | peak extra MB | CSR MB | fitted state (vocabularies) MB | bar: CSR + state + 64 MB | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in mem_rows:
        lines.append(
            f"| {m['n']} | {m['P']} | {m['dtype']} | {m['extra'] / 2**20:.1f} | {m['csr'] / 2**20:.1f} | "
            f"{m['vocab'] / 2**20:.1f} | {m['budget'] / 2**20:.1f} | {'yes' if m['ok'] else 'NO'}"
            f"{'' if m['reset'] else ' (peak counter not resettable: upper bound)'} |"
        )
    (out / "binning.md").write_text("\n".join(lines) + "\n")
    with open(out / "binning_memory.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(mem_rows[0]))
        w.writeheader()
        w.writerows(mem_rows)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
