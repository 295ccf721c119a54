"""Time the same public calls in two builds of randfeat, alternating child processes: a ratio per call.

    python bench/builds.py --baseline-python /path/to/other/venv/bin/python [--rounds 5] [--quick]

Each round runs every case in a child process of this interpreter's build
and of the baseline's, one after the other (which goes first alternates
between rounds), each child timing its call ``--repeats`` times after a
warm-up and reporting the fastest.  The ratio is this build / the baseline
per round; the table gives the median and the range over rounds.  Used for
issue 23 (a restructuring must not move the calls' times by more than 5%).
Public names only, so any two versions with the same API can be compared.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _harness import DEFAULT_RESULTS, machine_info, progress

CASES = {
    "Fourier transform (50000 × 54 → 2000, float64)": """
X = rng.standard_normal((50000, 54))
m = randfeat.RandomFourierFeatures(2000, gamma=0.05, random_state=0).fit(X)
call = lambda: m.transform(X)
""",
    "binning fit_transform (200000 × 54, 50 grids)": """
X = rng.uniform(0, 1, (200000, 54))
call = lambda: randfeat.RandomBinningFeatures(50, gamma=2.0, random_state=0).fit_transform(X)
""",
    "Ridge Cholesky, streamed Fourier features (40000 × 20 → 2000)": """
X = rng.standard_normal((40000, 20)); y = np.sin(X[:, 0]) + X[:, 1]
call = lambda: randfeat.Ridge(alpha=0.1, features=randfeat.RandomFourierFeatures(2000, gamma=0.1, random_state=0)).fit(X, y)
""",
    "Ridge CG on binning features (100000 × 20, 30 grids)": """
X = rng.uniform(0, 1, (100000, 20)); y = np.sin(6 * X[:, 0]) + X[:, 1]
call = lambda: randfeat.Ridge(alpha=0.1, features=randfeat.RandomBinningFeatures(30, gamma=4.0, random_state=0)).fit(X, y)
""",
    "RidgeCV leave-one-out, 3 gammas (8000 × 20 → 1000)": """
X = rng.standard_normal((8000, 20)); y = np.sin(X[:, 0]) + X[:, 1]
call = lambda: randfeat.RidgeCV(alphas=np.logspace(-3, 2, 6), gammas=[0.02, 0.05, 0.1],
                                features=randfeat.RandomFourierFeatures(1000, random_state=0)).fit(X, y)
""",
    "Dask fit, Ridge on Fourier features (100000 × 20 → 500, 8 blocks, threads)": """
import dask, dask.array as da
dask.config.set(scheduler="threads")
X = rng.standard_normal((100000, 20)); y = np.sin(X[:, 0]) + X[:, 1]
Xd = da.from_array(X, chunks=(12500, 20)); yd = da.from_array(y, chunks=12500)
call = lambda: randfeat.Ridge(alpha=0.1, features=randfeat.RandomFourierFeatures(500, gamma=0.1, random_state=0)).fit(Xd, yd)
""",
    # Issue 36: a case per regime of the ridge solvers (names stable: compared across runs).
    "RidgeClassifier CG, uniform bins, 7 classes (60000 × 10, 30 grids)": """
X = rng.uniform(0, 1, (60000, 10)); labels = (7 * X[:, 0] + 3 * X[:, 1]).astype(int) % 7
call = lambda: randfeat.RidgeClassifier(alpha=1.0, features=randfeat.RandomBinningFeatures(30, gamma=1.0, random_state=0)).fit(X, labels)
""",
    "Ridge CG, skewed bins (60000 × 10 lognormal, 30 grids)": """
X = rng.lognormal(0.0, 1.0, (60000, 10)); y = np.log1p(X[:, 0]) - np.sqrt(X[:, 1])
call = lambda: randfeat.Ridge(alpha=0.1, features=randfeat.RandomBinningFeatures(30, gamma=0.5, random_state=0)).fit(X, y)
""",
    "Ridge binning, tiny alpha, many rows (50000 × 4, 30 grids, alpha 1e-4)": """
X = rng.uniform(0, 1, (50000, 4)); y = np.sin(6 * X[:, 0]) + X[:, 1]
call = lambda: randfeat.Ridge(alpha=1e-4, features=randfeat.RandomBinningFeatures(30, gamma=10.0, random_state=0)).fit(X, y)
""",
    "RidgeClassifier N < D binning, 26 classes, alpha 1e-4 (letter-like 4000 × 16, 50 grids)": """
from randfeat.datasets import make_letter_like
X, labels = make_letter_like(4000)
call = lambda: randfeat.RidgeClassifier(alpha=1e-4, features=randfeat.RandomBinningFeatures(50, gamma=0.33, random_state=0)).fit(X, labels)
""",
    "Ridge N < D binning, alpha 1 (letter-like 4000 × 16, 50 grids)": """
from randfeat.datasets import make_letter_like
X, labels = make_letter_like(4000); y = (labels % 5).astype(float)
call = lambda: randfeat.Ridge(alpha=1.0, features=randfeat.RandomBinningFeatures(50, gamma=0.33, random_state=0)).fit(X, y)
""",
    "RidgeClassifier dense Fourier, 26 classes (16000 × 16 → 2000)": """
from randfeat.datasets import make_letter_like
X, labels = make_letter_like(16000)
call = lambda: randfeat.RidgeClassifier(alpha=1e-4, features=randfeat.RandomFourierFeatures(2000, gamma=0.05, random_state=0)).fit(X, labels)
""",    # Logistic regression (issue 35; a baseline without it, such as 0.1.0, needs --only to leave these out).
    "LogisticRegression binary, Adult (32561 × 123 → 500)": """
X, y = randfeat.datasets.load_adult(return_X_y=True)
call = lambda: randfeat.LogisticRegression(C=10, features=randfeat.RandomFourierFeatures(500, gamma=1 / 64, random_state=0)).fit(X, y)
""",
    "LogisticRegression 10 classes (20000 × 20 → 500)": """
from sklearn.datasets import make_classification
X, y = make_classification(20000, 20, n_informative=10, n_classes=10, random_state=0)
call = lambda: randfeat.LogisticRegression(features=randfeat.RandomFourierFeatures(500, gamma=0.025, random_state=0)).fit(X, y)
""",
    "LogisticRegressionCV binary, 10 Cs (10000 × 20 → 500)": """
from sklearn.datasets import make_classification
X, y = make_classification(10000, 20, n_informative=10, random_state=0)
call = lambda: randfeat.LogisticRegressionCV(Cs=10, features=randfeat.RandomFourierFeatures(500, gamma=0.025, random_state=0)).fit(X, y)
""",
}

CHILD = """
import json, sys, time
import numpy as np
import randfeat
rng = np.random.default_rng(0)
{setup}
call()  # warm-up
times = []
for _ in range({repeats}):
    t0 = time.perf_counter(); est = call(); times.append(time.perf_counter() - t0)
it = getattr(est, "n_iter_", None)
print(json.dumps({{"best": min(times), "file": randfeat.__file__, "solver": getattr(est, "solver_", None),
                  "n_iter": None if it is None else int(np.max(it))}}))
"""


def _time(python, setup, repeats, env=None):
    code = CHILD.format(setup=setup, repeats=repeats)
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd="/", timeout=1800, env=env)
    if out.returncode:
        raise RuntimeError(f"{python}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-python", required=True, help="an interpreter with the other build installed")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_RESULTS)
    parser.add_argument("--file", default="builds.md", help="the results file's name in --out")
    parser.add_argument("--only", default="", help="run only the cases whose name contains one of these "
                                                   "comma-separated texts")
    args = parser.parse_args()
    builds = {"this build": sys.executable, "baseline": args.baseline_python}
    # PYTHONPATH (how this build is usually given) must not reach the
    # baseline's interpreter, or both children import this build.
    baseline_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    envs = {"this build": None, "baseline": baseline_env}
    files = set()
    rows = []
    for name, setup in CASES.items():
        if args.only and not any(part in name for part in args.only.split(",")):
            continue
        times = {b: [] for b in builds}
        info = {}
        for r in range(args.rounds):
            order = list(builds) if r % 2 == 0 else list(reversed(builds))
            for b in order:
                res = _time(builds[b], setup, args.repeats, envs[b])
                files.add((b, res["file"]))
                times[b].append(res["best"])
                info[b] = (res.get("solver"), res.get("n_iter"))
        ratios = [a / b for a, b in zip(times["this build"], times["baseline"])]
        rows.append({"case": name, "this": statistics.median(times["this build"]),
                     "baseline": statistics.median(times["baseline"]), "ratio": statistics.median(ratios),
                     "lo": min(ratios), "hi": max(ratios), "info": info})
        progress(f"{name}: this {rows[-1]['this']:.3f} s, baseline {rows[-1]['baseline']:.3f} s, "
                 f"ratio {rows[-1]['ratio']:.3f} [{rows[-1]['lo']:.3f}, {rows[-1]['hi']:.3f}]")
    def solver(r, b):
        s, it = r["info"].get(b, (None, None))
        return "" if s is None else (s if it is None else f"{s}, {it} it.")

    lines = ["| call | this build (s) | baseline (s) | this / baseline, median [range] | this build's solver | "
             "baseline's solver |", "|---|---:|---:|---|---|---|"]
    lines += [f"| {r['case']} | {r['this']:.3f} | {r['baseline']:.3f} | {r['ratio']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}] | "
              f"{solver(r, 'this build')} | {solver(r, 'baseline')} |" for r in rows]
    imported = "; ".join(f"{b}: {f}" for b, f in sorted(files))
    text = "\n".join([f"Two builds, {args.rounds} alternating rounds, best of {args.repeats} per child; "
                      f"{machine_info()}", "", f"Imported: {imported}", "", *lines])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / args.file).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
