"""Benchmark RandomBinningFeatures against the fastest plain-NumPy implementation and the floor.

Times ``fit``, ``transform`` and ``fit_transform`` of randfeat (1 and 2
threads) and of ``bench/_binning_numpy.py`` (the same definition, chunked and
vectorised NumPy, single-threaded) in the same run, alternating candidate and
baseline, and reports medians, rows/s and ratios (baseline time / randfeat
time).  NumPy's ``fit_transform`` is timed two ways (``np.unique`` then
``np.searchsorted``, or ``np.unique(return_inverse=True)``); the ratio is
against the faster, which depends on the data.  NumPy's steps run on one
hash of the rows per round (its fit_transform *is* hash, then vocabulary and
features: the parts are timed separately and added).

Two kinds of data:

* ``covtype``: a Forest-Cover-like synthetic matrix (d = 54: 10 standardised
  continuous columns, a one-hot of 4 and a one-hot of 40 categories), so
  bins are shared between rows as on the real data set (gamma 0.25:
  O(10^3-10^4) bins per grid);
* ``distinct``: uniform [0, 1)^54 rows, gamma 1: nearly every row is its own
  bin in every grid (N*P keys, ~99.7% distinct), the worst case for the
  vocabulary.

For ``distinct`` it also times the floor, in the same rounds: hashing alone
(randfeat's vectorised kernel, into a freshly allocated grid-major array, as
fit_transform must; and again into the same, already-touched array) plus
sorting the same N*P keys grid by grid, by a compiled LSD radix sort
(``_binning_fast.lsd_sort_grids``, six 11-bit passes, the grids shared by the
threads) or by ``np.sort`` (one thread).  It reports fit_transform against
the floor, and fit_transform's own phases (hashing, vocabularies with ranks,
CSR finishing), each timed inside a fit_transform-like sequence.

Finally the peak memory of ``fit_transform`` in a fresh subprocess against
the bar: returned CSR + the estimator's fitted state (its vocabularies) +
64 MB.

Usage::

    python bench/binning.py            # full: covtype N in {50000, 522000}, P in {30, 50}, float64/32; distinct
    python bench/binning.py --quick    # the bars' shape: N=522000, d=54, P=50, float64, distinct and covtype
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

METHODS = ("searchsorted", "inverse")  # NumPy's two fit_transform vocabularies
GAMMA = {"covtype": BINNING_GAMMA, "distinct": 1.0}


def make_data(kind, n, seed, dtype):
    """(n, 54) rows of the given kind (see the module docstring)."""
    if kind == "covtype":
        return covtype_like(n, seed=seed, dtype=dtype)
    return np.random.default_rng(seed).uniform(size=(n, D)).astype(dtype, copy=False)


def _time(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _group_budget(*args):
    try:
        from randfeat._maps.binning import _group_budget as budget
    except ImportError:  # a build from before the maps layer (issue 23)
        from randfeat._binning import _group_budget as budget
    return budget(*args)


def _grid_arrays(est):
    """The fitted map's (U, INV) grid arrays, wherever this build keeps them."""
    state = getattr(est, "_state", None)
    if state is not None:
        return state.U, state.INV
    return est._U, est._INV  # a build from before the maps layer (issue 23)


def floor_round(X, est, P, nt, add):
    """One round of the floor: hashing alone, then sorting the same keys."""
    from randfeat._ext import _binning_fast as bf

    n = X.shape[0]
    grids = bf.Grids(*_grid_arrays(est), P)
    H = np.empty(n * P, dtype=np.uint64)  # fresh, as fit_transform's output is
    t, _ = _time(lambda: bf.hash_rows(X, grids, np.empty(0, np.int32), H, nt, grid_major=True))
    add((f"floor-{nt}t", "hash"), t)
    t, _ = _time(lambda: bf.hash_rows(X, grids, np.empty(0, np.int32), H, nt, grid_major=True))
    add((f"floor-{nt}t", "hash (warm)"), t)
    if nt == 1:
        Hg = H.reshape(P, n)
        t, _ = _time(lambda: [np.sort(Hg[p]) for p in range(P)])
        add(("floor-1t", "np.sort"), t)
    t, _ = _time(lambda: bf.lsd_sort_grids(H, P, nt))
    add((f"floor-{nt}t", "lsd"), t)
    if not np.all(H.reshape(P, n)[:, 1:] >= H.reshape(P, n)[:, :-1]):
        raise AssertionError("the floor's LSD radix sort did not sort")


def phase_round(X, est, P, nt, add):
    """fit_transform's kernels one by one, as the estimator calls them (fresh output buffers)."""
    from randfeat._ext import _binning_fast as bf

    n = X.shape[0]
    idx = np.int32 if n * P < 2**31 - 1 else np.int64
    t0 = time.perf_counter()
    indices, data = np.empty(n * P, dtype=idx), np.empty(n * P, dtype=X.dtype)
    grids = bf.Grids(*_grid_arrays(est), P)
    t1 = time.perf_counter()
    bf.hash_rows(X, grids, indices, data, nt, grid_major=True)
    t2 = time.perf_counter()
    budget = _group_budget(indices.nbytes + data.nbytes, nt, True)
    vocab = bf.build_vocabularies(indices, data, P, nt, write_ranks=True, grid_major=True, group_budget=budget)
    t3 = time.perf_counter()
    bf.finish_training_csr(P, vocab[1], indices, data, 1.0 / np.sqrt(P), nt)
    t4 = time.perf_counter()
    add((f"randfeat-{nt}t", "phase: hash"), t2 - t1)
    add((f"randfeat-{nt}t", "phase: vocabularies + ranks"), t3 - t2)
    add((f"randfeat-{nt}t", "phase: CSR finishing"), t4 - t3)
    add((f"randfeat-{nt}t", "phase: sum"), t4 - t0)


def bench_config(kind, n, P, dtype, repeats, threads):
    """Median seconds of each (implementation, operation) for one shape."""
    from randfeat import RandomBinningFeatures

    X = make_data(kind, n, 0, dtype)
    Xt = make_data(kind, n, 1, dtype)  # transform: new rows of the same law
    gamma = GAMMA[kind]
    times = {}

    def add(key, t):
        times.setdefault(key, []).append(t)

    proto = RandomBinningFeatures(P, gamma=gamma, random_state=0).fit(X[:10])
    pitches, offsets = proto.pitches_, proto.offsets_
    info = {}
    for _ in range(repeats):
        # NumPy baseline (single-threaded by nature): one hash per round, then each way on.
        t_hash, H = _time(lambda: ref.hash_bins(X, pitches, offsets))
        for method in METHODS:
            t, (Zr, keys, koff) = _time(lambda: ref.training_features(H, X.dtype, method))
            add((f"numpy-{method}", "fit_transform"), t_hash + t)
            del Zr
        t, _ = _time(lambda: ref.fit_vocabulary(H))
        add(("numpy", "fit"), t_hash + t)
        del H
        t, Ztr = _time(lambda: ref.binning_transform(Xt, pitches, offsets, keys, koff))
        add(("numpy", "transform"), t)
        for nt in threads:
            est = RandomBinningFeatures(P, gamma=gamma, random_state=0, n_jobs=nt)
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
                raise AssertionError(f"randfeat and NumPy baseline disagree at {kind} n={n}, P={P}, {dtype}")
            info["transform_nnz"] = Zt.nnz
            del Zt
            if kind == "distinct":
                floor_round(X, est, P, nt, add)
                phase_round(X, est, P, nt, add)
        del Ztr
    med = {k: float(np.median(v)) for k, v in times.items()}
    best = min(METHODS, key=lambda m: med[(f"numpy-{m}", "fit_transform")])
    med[("numpy", "fit_transform")] = med[(f"numpy-{best}", "fit_transform")]
    info["numpy_method"] = best
    return med, info


MEMORY_SCRIPT = r"""
import json, sys, numpy as np
sys.path.insert(0, {here!r})
from binning import make_data, GAMMA
from _harness import proc_status_bytes
from randfeat import RandomBinningFeatures

X = make_data({kind!r}, {n}, 0, np.{dtype})
est = RandomBinningFeatures({P}, gamma=GAMMA[{kind!r}], random_state=0, n_jobs={nt})
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
# The fitted state: every array the fitted map keeps (vocabularies, their
# lookup tables, the grids), in its state object (randfeat._maps.contract.MapState).
held = [v for v in vars(est._state).values() if isinstance(v, np.ndarray)] + list(est._state.vocabulary)
vocab = sum(v.nbytes for v in held)
print(json.dumps(dict(extra=peak - before, csr=csr, vocab=vocab, reset=reset)))
"""


def measure_memory(kind, n, P, dtype, nt):
    code = MEMORY_SCRIPT.format(here=str(HERE), kind=kind, n=n, P=P, dtype=np.dtype(dtype).name, nt=nt)
    return run_child_json(code)


def floor_lines(kind, n, P, dtype, med, info, threads):
    """The distinct-bins summary: fit_transform against the fastest NumPy and the floor."""
    lines = [
        "",
        f"All-distinct bins ({kind}: N={n}, d={D}, P={P}, {np.dtype(dtype).name}; "
        f"{info['n_features_out']} columns for {info['nnz']} entries, "
        f"{100 * info['n_features_out'] / info['nnz']:.1f}% distinct): fit_transform against the fastest NumPy "
        f"(`{info['numpy_method']}`: {med[('numpy', 'fit_transform')]:.2f} s; the other way "
        f"{med[('numpy-' + [m for m in METHODS if m != info['numpy_method']][0], 'fit_transform')]:.2f} s) "
        "and against the floor (hashing alone, into fresh memory, + sorting the same keys grid by grid).",
        "",
        "| threads | fit_transform s | vs NumPy | hash s (warm) | LSD sort s | floor = hash + LSD s | "
        "fit_transform / floor | np.sort s (1 thread) | hash + np.sort s | fit_transform / that |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for nt in threads:
        ft = med[(f"randfeat-{nt}t", "fit_transform")]
        h, hw, lsd = (med[(f"floor-{nt}t", k)] for k in ("hash", "hash (warm)", "lsd"))
        nps = med[("floor-1t", "np.sort")]
        lines.append(
            f"| {nt} | {ft:.3f} | {med[('numpy', 'fit_transform')] / ft:.1f}x | {h:.3f} ({hw:.3f}) | {lsd:.3f} | "
            f"{h + lsd:.3f} | {ft / (h + lsd):.2f} | {nps:.3f} | {h + nps:.3f} | {ft / (h + nps):.2f} |"
        )
    lines += [
        "",
        "fit_transform's phases (each kernel timed, fresh output buffers; 'sum' includes allocating them):",
        "",
        "| threads | hash s | vocabularies + ranks s | CSR finishing s | sum s |",
        "|---|---|---|---|---|",
    ]
    for nt in threads:
        ph = [med[(f"randfeat-{nt}t", f"phase: {k}")] for k in ("hash", "vocabularies + ranks", "CSR finishing", "sum")]
        lines.append(f"| {nt} | " + " | ".join(f"{x:.3f}" for x in ph) + " |")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the bars' shape only (N=522000, P=50, float64)")
    mode.add_argument("--tiny", action="store_true", help="a few seconds; smoke test")
    parser.add_argument("--out", default=str(HERE / "results"), help="output directory")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)

    import randfeat

    config = randfeat.get_config()

    if args.tiny:
        configs = [("covtype", 2000, 5, np.float64, 1), ("covtype", 2000, 5, np.float32, 1),
                   ("distinct", 2000, 5, np.float64, 1)]
    elif args.quick:
        configs = [("distinct", 522000, 50, np.float64, 5), ("covtype", 522000, 50, np.float64, 3)]
    else:
        configs = [("distinct", 522000, 50, np.float64, 5)] + [
            ("covtype", n, P, dt, 3) for n in (50000, 522000) for P in (30, 50) for dt in (np.float64, np.float32)]
    threads = sorted({1, min(2, config["default_n_threads"])})

    rows = []
    mem_rows = []
    extra_lines = []
    for kind, n, P, dtype, repeats in configs:
        repeats = args.repeats or repeats
        t0 = time.time()
        med, info = bench_config(kind, n, P, dtype, repeats, threads)
        for op in ("fit", "transform", "fit_transform"):
            base = med[("numpy", op)]
            for nt in threads:
                t = med[(f"randfeat-{nt}t", op)]
                rows.append(
                    dict(
                        data=kind, n=n, d=D, P=P, dtype=np.dtype(dtype).name, op=op, threads=nt, repeats=repeats,
                        randfeat_s=t, numpy_s=base, ratio=base / t,
                        numpy_method=info["numpy_method"] if op == "fit_transform" else "",
                        randfeat_rows_per_s=n / t, numpy_rows_per_s=n / base,
                        n_features_out=info["n_features_out"],
                    )
                )
        if kind == "distinct":
            extra_lines += floor_lines(kind, n, P, dtype, med, info, threads)
            for nt in threads:
                h, lsd = med[(f"floor-{nt}t", "hash")], med[(f"floor-{nt}t", "lsd")]
                rows.append(dict(data=kind, n=n, d=D, P=P, dtype=np.dtype(dtype).name, op="floor (hash + LSD sort)",
                                 threads=nt, repeats=repeats, randfeat_s=h + lsd, numpy_s=float("nan"),
                                 ratio=med[(f"randfeat-{nt}t", "fit_transform")] / (h + lsd), numpy_method="",
                                 randfeat_rows_per_s=n / (h + lsd), numpy_rows_per_s=float("nan"),
                                 n_features_out=info["n_features_out"]))
        mem = measure_memory(kind, n, P, dtype, threads[-1])
        budget = mem["csr"] + mem["vocab"] + 64 * 2**20
        mem_rows.append(dict(data=kind, n=n, P=P, dtype=np.dtype(dtype).name, **mem, budget=budget,
                             ok=mem["extra"] <= budget))
        print(f"done {kind} n={n} P={P} {np.dtype(dtype).name} in {time.time() - t0:.0f}s", file=sys.stderr)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "binning.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    load = os.getloadavg()
    lines = [
        "# RandomBinningFeatures vs plain NumPy and the floor (bench/binning.py)",
        "",
        f"randfeat {randfeat.__version__}, vector path `{config['vector_paths'].get('_binning_fast', '?')}`, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average at the end {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} "
        "(the machine is shared: absolute times are noisy, ratios are timed in the same run).",
        f"Median of alternating runs (repeats column); d={D}; data `covtype` (Forest-Cover-like, gamma "
        f"{GAMMA['covtype']}) or `distinct` (uniform, gamma {GAMMA['distinct']}); NumPy baseline single-threaded, "
        "its fit_transform the faster of its two ways (method column); ratio = NumPy time / randfeat time.",
        "",
        "| data | N | P | dtype | op | threads | randfeat s | NumPy s | ratio | NumPy method | randfeat rows/s | "
        "NumPy rows/s | n_features_out |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["op"].startswith("floor"):
            continue
        lines.append(
            f"| {r['data']} | {r['n']} | {r['P']} | {r['dtype']} | {r['op']} | {r['threads']} | {r['randfeat_s']:.3f} | "
            f"{r['numpy_s']:.3f} | {r['ratio']:.1f}x | {r['numpy_method']} | {r['randfeat_rows_per_s']:,.0f} | "
            f"{r['numpy_rows_per_s']:,.0f} | {r['n_features_out']} |"
        )
    lines += extra_lines
    lines += [
        "",
        "Peak memory of `fit_transform` (fresh subprocess, peak RSS above the RSS before the call):",
        "",
        "| data | N | P | dtype | peak extra MB | CSR MB | fitted state (vocabularies) MB | bar: CSR + state + 64 MB | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in mem_rows:
        lines.append(
            f"| {m['data']} | {m['n']} | {m['P']} | {m['dtype']} | {m['extra'] / 2**20:.1f} | {m['csr'] / 2**20:.1f} | "
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
