"""randfeat on a busy machine: each call idle, and beside 1 and 2 CPU-bound processes.

    python bench/contention.py [--quick] [--runs 5] [--cases SUBSTRING ...] [--out DIR]

Users run beside a browser, other notebooks, a shared CI runner.  Each case
is run ``--runs`` times in a fresh child process (so no run warms the next)
with 0, 1 and 2 busy-loop processes beside it (one per core of this 2-core
machine), at the default ``n_jobs`` and at ``n_jobs=1``.  The table gives
the median and the worst wall time, and each against the idle median of
the case's reference condition (one thread for the first cases, the default
threads for the one-hot ones): the bar of issue 27 is median <= 2x and worst
<= 3x beside two busy processes at the default ``n_jobs``; the bar of issue
36 is the seven-class fit beside two busy processes <= 2x its idle
(default-thread) median, and >= 5x scikit-learn's ``sparse_cg`` beside one.
The busy processes are plain Python loops (no memory traffic), started
before the child and killed after it.

The one-hot cases (issue 36) are the uniform-bin matrix of ``bench/ridge.py``
(50 grids × 10000 bins, values 1/√50) at 300000 and 522000 rows:
``RidgeClassifier(alpha=0.1, solver="cg", tol=1e-6)`` with seven classes
(block CG: the 2..8-target row path of ``Z P``, the wide scatter of ``Zᵀ U``,
the block-CG passes), ``Ridge`` with one target, and scikit-learn's
``RidgeClassifier(solver="sparse_cg")`` on the same CSR, idle and beside one
busy process.

The machine may be shared with other work: every run records the 1-minute
load average when it starts and the CPU seconds the call used (all its
threads).  Conditions are interleaved run by run, so a busy minute of the
machine hits all of them; compare ratios within one table, and read the
CPU column: CPU seconds that grow with the busy processes are waste
(spinning, repeated work), wall time that grows at constant CPU is the
share the other processes take.  ``--quick``: three runs of the
300000-row seven-class cases only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _harness import BENCH_DIR, DEFAULT_RESULTS, machine_info, progress

DEFAULT = (0, None), (0, 1), (1, None), (1, 1), (2, None), (2, 1)
ONEHOT = (0, None), (1, None), (2, None), (0, 1)
SKLEARN = (0, None), (1, None)

_UNIFORM = """
from _ridge_hard import uniform_onehot
import scipy.sparse as sp
Z, y = uniform_onehot({rows}, 10000)
Z = sp.csr_matrix((Z.data, Z.indices, Z.indptr), shape=Z.shape)  # format flags unknown, as a user's matrix
"""
_SEVEN = _UNIFORM + """
call = lambda: randfeat.RidgeClassifier(alpha=0.1, solver="cg", tol=1e-6, n_jobs=N_JOBS).fit(Z, y)
"""
_ONE = _UNIFORM + """
y = np.where(y == 0, 1.0, -1.0)
call = lambda: randfeat.Ridge(alpha=0.1, solver="cg", tol=1e-6, n_jobs=N_JOBS).fit(Z, y)
"""
_SK_SEVEN = _UNIFORM + """
from sklearn.linear_model import RidgeClassifier
call = lambda: RidgeClassifier(alpha=0.1, solver="sparse_cg", tol=1e-6).fit(Z, y)
"""
_SK_ONE = _UNIFORM + """
from sklearn.linear_model import Ridge
y = np.where(y == 0, 1.0, -1.0)
call = lambda: Ridge(alpha=0.1, solver="sparse_cg", tol=1e-6).fit(Z, y)
"""

#: name -> (setup, conditions (busy processes, n_jobs), reference condition for the ratios, in --quick)
CASES = {
    "RidgeClassifierCV, gammas='auto', RFF(1000), 3000 x 20": ("""
X = rng.standard_normal((3000, 20)); y = (np.sin(X[:, 0]) + X[:, 1] > 0).astype(int)
call = lambda: randfeat.RidgeClassifierCV(gammas="auto", n_jobs=N_JOBS,
    features=randfeat.RandomFourierFeatures(1000, random_state=0, n_jobs=N_JOBS)).fit(X, y)
""", DEFAULT, (0, 1), False),
    "Fourier transform, 20000 x 54 -> 4000": ("""
X = rng.standard_normal((20000, 54))
m = randfeat.RandomFourierFeatures(4000, random_state=0, n_jobs=N_JOBS).fit(X)
call = lambda: m.transform(X)
""", DEFAULT, (0, 1), False),
    "Ridge CG on binning features, 100000 x 20, 30 grids": ("""
X = rng.uniform(0, 1, (100000, 20)); y = np.sin(6 * X[:, 0]) + X[:, 1]
call = lambda: randfeat.Ridge(alpha=0.1, n_jobs=N_JOBS,
    features=randfeat.RandomBinningFeatures(30, gamma=4.0, random_state=0, n_jobs=N_JOBS)).fit(X, y)
""", DEFAULT, (0, 1), False),
}
#: scikit-learn's case -> randfeat's case on the same matrix (the speed ratios).
SKLEARN_OF = {}
for _rows, _targets, _ours, _theirs in ((300_000, "7 classes", _SEVEN, _SK_SEVEN), (522_000, "7 classes", _SEVEN, _SK_SEVEN),
                                        (522_000, "1 target", _ONE, _SK_ONE)):
    _what = f"{_targets}, uniform bins {_rows} x 500000"
    _est = "RidgeClassifier" if _targets == "7 classes" else "Ridge"
    _quick = _rows == 300_000
    CASES[f"{_est} CG, {_what}"] = (_ours.format(rows=_rows), ONEHOT, (0, None), _quick)
    CASES[f"sklearn {_est} sparse_cg, {_what}"] = (_theirs.format(rows=_rows), SKLEARN, (0, None), _quick)
    SKLEARN_OF[f"sklearn {_est} sparse_cg, {_what}"] = f"{_est} CG, {_what}"

CHILD = """
import json, os, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
import randfeat
N_JOBS = {n_jobs}
rng = np.random.default_rng(0)
{setup}
load = os.getloadavg()[0]
t0, c0 = time.perf_counter(), time.process_time(); call()
print(json.dumps([time.perf_counter() - t0, time.process_time() - c0, load]))
"""

BUSY = "while True: pass"


def _run(setup, n_jobs, n_busy):
    """(wall s, CPU s, load average) of one call in a fresh child beside ``n_busy`` busy loops."""
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(n_busy)]
    try:
        time.sleep(0.2 if n_busy else 0.0)  # let the busy loops take their cores
        code = CHILD.format(bench=str(BENCH_DIR), n_jobs=n_jobs, setup=setup)
        out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=1800)
    finally:
        for p in busy:
            p.kill()
        for p in busy:
            p.wait()
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cpu_line():
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return "cpu: unknown"
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "?")
    return f"cpu: {model}, {'AVX-512' if ' avx512f' in text else 'no AVX-512'}, {os.cpu_count()} logical CPUs"


def _ratio_lines(results):
    """scikit-learn over randfeat, same rows and busy processes (default threads): the speed bars."""
    lines = []
    for name, times in results.items():
        ours = results.get(SKLEARN_OF.get(name))
        if ours is None:
            continue
        what = SKLEARN_OF[name]
        for n_busy in (0, 1):
            if (n_busy, None) in times and (n_busy, None) in ours:
                sk = statistics.median(r[0] for r in times[(n_busy, None)])
                rf = statistics.median(r[0] for r in ours[(n_busy, None)])
                lines.append(f"| {what} | {n_busy} | {rf:.2f} | {sk:.2f} | {sk / rf:.1f}x |")
    if not lines:
        return []
    return ["", "scikit-learn sparse_cg over randfeat CG (medians, default threads, same busy processes):", "",
            "| case | busy processes | randfeat (s) | sklearn (s) | sklearn / randfeat |",
            "|---|---:|---:|---:|---:|", *lines]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=None, help="runs per condition (default 5; 3 with --quick)")
    parser.add_argument("--quick", action="store_true", help="the 300000-row seven-class cases only, 3 runs")
    parser.add_argument("--out", default=str(DEFAULT_RESULTS))
    parser.add_argument("--cases", nargs="*", default=None, help="substrings of the cases to run")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 5)
    chosen = {n: c for n, c in CASES.items()
              if (not args.cases or any(s in n for s in args.cases)) and (c[3] or not args.quick)}
    # A scikit-learn case runs interleaved with randfeat's on the same matrix.
    partner = {v: k for k, v in SKLEARN_OF.items()}
    groups = [[n] + ([partner[n]] if partner.get(n) in chosen else []) for n in chosen if n not in SKLEARN_OF]
    groups += [[n] for n in chosen if n in SKLEARN_OF and SKLEARN_OF[n] not in chosen]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results, text = {}, ""
    for group in groups:
        # Interleave the conditions run by run, so a slow minute of the VM hits all of them.
        for r in range(runs):
            for name in group:
                for cond in CASES[name][1]:
                    results.setdefault(name, {}).setdefault(cond, []).append(_run(CASES[name][0], cond[1], cond[0]))
            progress(f"{' / '.join(group)}: run {r + 1}/{runs}")
            # The table so far, after every run: a long bench cut short still leaves its results.
            text = _table(results, runs)
            (out / "contention.md").write_text(text + "\n")
    print(text)


def _table(results, runs):
    """The markdown table of ``results`` (case -> condition -> [(wall, CPU, load)]) and its header."""
    rows = []
    for name, times in results.items():
        reference = CASES[name][2]
        if reference not in times:
            continue
        ref = statistics.median(t[0] for t in times[reference])
        for (n_busy, n_jobs), ts in sorted(times.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            walls = [t[0] for t in ts]
            med, worst = statistics.median(walls), max(walls)
            cpu = statistics.median(t[1] for t in ts)
            load = statistics.median(t[2] for t in ts)
            rows.append((name, n_busy, "default" if n_jobs is None else n_jobs, med, worst, cpu, load,
                         med / ref, worst / ref, "idle 1-thread" if reference[1] == 1 else "idle default"))
    lines = [("| call | busy processes | n_jobs | median (s) | worst (s) | CPU (s) | load | median / ref | "
              "worst / ref | ref |"),
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {n} | {b} | {j} | {m:.3f} | {w:.3f} | {c:.2f} | {ld:.1f} | {mr:.2f} | {wr:.2f} | {ref} |"
              for n, b, j, m, w, c, ld, mr, wr, ref in rows]
    lines += _ratio_lines(results)
    done = min((len(ts) for times in results.values() for ts in times.values()), default=0)
    header = (f"{done} of {runs} runs a condition, conditions interleaved; CPU = median CPU seconds of the call "
              f"(all threads), load = median 1-minute load average at the start of the runs; {_cpu_line()}; "
              f"{machine_info()}")
    return "\n".join([header, "", *lines])


if __name__ == "__main__":
    main()
