"""Benchmark randfeat's RandomFourierFeatures.transform.

For N=20000 rows, d in {16, 54, 123, 784}, D in {500, 2000, 5000}, float32
and float64, both feature maps, with 1 and 2 threads, it times in the same
run, alternating, and reports the median of the repeats of:

* ``randfeat``: ``RandomFourierFeatures(D, feature_map=...).transform(X)``;
* ``RBFSampler``: scikit-learn's ``RBFSampler(n_components=D).transform(X)``,
  what a scikit-learn user has today (the ``cos`` map, rbf kernel);
* ``X @ W``: a bare BLAS gemm producing the same N x D output from X
  (W of shape d x D), the hardware floor of any feature map.

and the ratios ``RBFSampler / randfeat`` (speed-up) and
``randfeat / (X @ W)`` (distance from the floor).  The thread count limits
BLAS (threadpoolctl) for the baselines and sets ``n_jobs`` for randfeat.

It then checks peak memory: ``transform`` of N=200000, d=54, D=2000 in a
fresh process, peak RSS growth (VmHWM; ``ru_maxrss`` where /proc is
missing) against output size + 64 MB.

Results are printed and written as Markdown and CSV under bench/results/.
Timings on a shared machine are noisy: compare the ratios, which are measured
candidate-against-baseline in the same run.

Usage::

    python bench/transform.py            # full table (several minutes)
    python bench/transform.py --quick    # d=54, D=5000 only
    python bench/transform.py --tiny     # seconds; a smoke test of this script
"""

import argparse
import csv
import os
import platform
import textwrap
import time

import numpy as np
from sklearn.kernel_approximation import RBFSampler
from threadpoolctl import threadpool_limits

import randfeat
from _harness import run_child_json
from randfeat import RandomFourierFeatures

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results")

FULL = dict(n=20000, ds=(16, 54, 123, 784), Ds=(500, 2000, 5000), repeats=5)
QUICK = dict(n=20000, ds=(54,), Ds=(5000,), repeats=7)
TINY = dict(n=500, ds=(8,), Ds=(64,), repeats=2)
MEMORY = dict(n=200000, d=54, D=2000)
TINY_MEMORY = dict(n=2000, d=8, D=64)
MEMORY_SLACK_MB = 64


def make_data(n, d, dtype, seed=0):
    """Standardised Gaussian data, like a scaled real data set."""
    return np.random.default_rng(seed).standard_normal((n, d)).astype(dtype)


def time_alternating(candidates, repeats):
    """Median wall time of each callable, run in turns so noise hits all alike."""
    times = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            t0 = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t0)
            del out
    return {name: float(np.median(ts)) for name, ts in times.items()}


def bench_case(n, d, D, dtype, n_threads, repeats):
    X = make_data(n, d, dtype)
    gamma = 1.0 / d  # keeps X @ W of order 1, as for scaled real data
    rff = {
        fm: RandomFourierFeatures(D, gamma=gamma, feature_map=fm, random_state=0, n_jobs=n_threads).fit(X)
        for fm in ("cossin", "cos")
    }
    rbf = RBFSampler(n_components=D, gamma=gamma, random_state=0).fit(X)
    W = np.random.default_rng(1).standard_normal((d, D)).astype(dtype)

    def bare_gemm():
        return X @ W

    candidates = {
        "randfeat_cossin": lambda: rff["cossin"].transform(X),
        "randfeat_cos": lambda: rff["cos"].transform(X),
        "rbfsampler": lambda: rbf.transform(X),
        "gemm": bare_gemm,
    }
    for name, fn in candidates.items():  # warm-up, and check dtypes agree
        assert fn().dtype == dtype, name
    with threadpool_limits(limits=n_threads, user_api="blas"):
        med = time_alternating(candidates, repeats)
    rows = []
    for fm in ("cossin", "cos"):
        t = med[f"randfeat_{fm}"]
        rows.append(
            dict(
                dtype=np.dtype(dtype).name,
                d=d,
                D=D,
                feature_map=fm,
                threads=n_threads,
                randfeat_s=t,
                rbfsampler_s=med["rbfsampler"],
                gemm_s=med["gemm"],
                speedup_vs_rbfsampler=med["rbfsampler"] / t,
                ratio_to_gemm=t / med["gemm"],
            )
        )
    return rows


MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[5])
    from _harness import peak_rss
    from randfeat import RandomFourierFeatures

    n, d, D, fm = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    X = np.random.default_rng(0).standard_normal((n, d))
    rff = RandomFourierFeatures(D, gamma=1.0 / d, feature_map=fm, random_state=0).fit(X)
    rff.transform(X[:100])  # load BLAS, OpenMP runtime, threadpoolctl first
    before = peak_rss()
    Z = rff.transform(X)
    after = peak_rss()
    print(json.dumps(dict(peak_before=before, peak_after=after, output=Z.nbytes)))
    """
)


def memory_check(n, d, D, feature_map):
    """Peak RSS growth of one transform in a fresh process, vs the output size."""
    r = run_child_json(MEMORY_SCRIPT, n, d, D, feature_map, HERE)
    growth = r["peak_after"] - r["peak_before"]
    extra_mb = (growth - r["output"]) / 2**20
    return dict(
        n=n,
        d=d,
        D=D,
        feature_map=feature_map,
        output_mb=r["output"] / 2**20,
        peak_growth_mb=growth / 2**20,
        extra_mb=extra_mb,
        within_bar=extra_mb <= MEMORY_SLACK_MB,
    )


def markdown(rows, mem_rows, header):
    lines = [header, ""]
    lines.append(
        "| dtype | d | D | map | threads | randfeat (s) | RBFSampler (s) | X @ W (s) "
        "| RBFSampler / randfeat | randfeat / (X @ W) |"
    )
    lines.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        lines.append(
            f"| {r['dtype']} | {r['d']} | {r['D']} | {r['feature_map']} | {r['threads']} "
            f"| {r['randfeat_s']:.4f} | {r['rbfsampler_s']:.4f} | {r['gemm_s']:.4f} "
            f"| {r['speedup_vs_rbfsampler']:.1f}x | {r['ratio_to_gemm']:.2f} |"
        )
    if mem_rows:
        lines += ["", "Peak memory of one transform (fresh process, float64):", ""]
        lines.append("| N | d | D | map | output (MB) | peak RSS growth (MB) | extra (MB) | extra <= 64 MB |")
        lines.append("|---:|---:|---:|---|---:|---:|---:|---|")
        for m in mem_rows:
            lines.append(
                f"| {m['n']} | {m['d']} | {m['D']} | {m['feature_map']} | {m['output_mb']:.0f} "
                f"| {m['peak_growth_mb']:.0f} | {m['extra_mb']:.1f} | {'yes' if m['within_bar'] else 'NO'} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="d=54, D=5000 only")
    g.add_argument("--tiny", action="store_true", help="tiny sizes: a smoke test of the script")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per candidate")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory check")
    p.add_argument("--out", default=DEFAULT_OUT, help="directory for the .md and .csv results")
    args = p.parse_args(argv)

    cfg, tag = (TINY, "tiny") if args.tiny else (QUICK, "quick") if args.quick else (FULL, "full")
    repeats = args.repeats or cfg["repeats"]
    threads = [int(t) for t in args.threads.split(",")]
    rows = []
    for dtype in (np.float64, np.float32):
        for d in cfg["ds"]:
            for D in cfg["Ds"]:
                for t in threads:
                    for r in bench_case(cfg["n"], d, D, dtype, t, repeats):
                        rows.append(r)
                        print(
                            f"{r['dtype']:7s} d={d:4d} D={D:5d} {r['feature_map']:6s} threads={t} "
                            f"randfeat {r['randfeat_s']:.4f}s  RBFSampler {r['rbfsampler_s']:.4f}s  "
                            f"X@W {r['gemm_s']:.4f}s  speed-up {r['speedup_vs_rbfsampler']:.1f}x  "
                            f"/gemm {r['ratio_to_gemm']:.2f}",
                            flush=True,
                        )
    mem_rows = []
    if not args.no_memory:
        m = TINY_MEMORY if args.tiny else MEMORY
        for fm in ("cossin", "cos"):
            mem_rows.append(memory_check(m["n"], m["d"], m["D"], fm))
            print(f"memory {fm}: {mem_rows[-1]}", flush=True)

    cfg_info = randfeat.get_config()
    header = (
        f"## randfeat transform benchmark ({tag}, N={cfg['n']}, median of {repeats})\n\n"
        f"randfeat {randfeat.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, vector path {cfg_info['vector_paths'].get('_fourier_fast', '?')}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}. Times are wall-clock medians on a shared machine; "
        f"the ratios (same run, alternating) are the meaningful numbers."
    )
    md = markdown(rows, mem_rows, header)
    print()
    print(md)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"transform-{tag}.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, f"transform-{tag}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    if mem_rows:
        with open(os.path.join(args.out, f"transform-{tag}-memory.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(mem_rows[0]))
            w.writeheader()
            w.writerows(mem_rows)
    return rows, mem_rows


if __name__ == "__main__":
    main()
