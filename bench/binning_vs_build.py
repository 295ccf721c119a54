"""RandomBinningFeatures fit / transform / fit_transform timed against another build, same run.

Usage::

    python bench/binning_vs_build.py --baseline /path/to/other/src [--rounds 3] [--rows 200000]

Runs this checkout and the build under ``--baseline`` (put first on
PYTHONPATH) in alternating child processes, ``--rounds`` times each, and
prints, per operation and thread count, the best time of each build and the
ratio baseline / this (above 1: this checkout is faster).  Data: uniform
float64 rows, 54 features, 30 grids, gamma=1 (almost every row its own bin).
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time, numpy as np
from randfeat import RandomBinningFeatures
rng = np.random.default_rng(0)
X = rng.uniform(size=({rows}, 54))
out = {{}}
for nj in (1, 2):
    est = RandomBinningFeatures(30, gamma=1.0, random_state=0, n_jobs=nj)
    for name, f in (("fit", lambda: est.fit(X)), ("transform", lambda: est.transform(X)),
                    ("fit_transform", lambda: est.fit_transform(X))):
        best = np.inf
        for _ in range({reps}):
            t0 = time.perf_counter(); f(); best = min(best, time.perf_counter() - t0)
        out[f"{{name}}_nj{{nj}}"] = best
print(json.dumps(out))
"""


def run(src, rows, reps):
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    else:
        env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", CHILD.format(rows=rows, reps=reps)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="src directory of the other build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args()
    best = {"baseline": {}, "this": {}}
    for _ in range(args.rounds):
        for who, src in (("baseline", args.baseline), ("this", None)):
            for k, v in run(src, args.rows, args.reps).items():
                best[who][k] = min(best[who].get(k, float("inf")), v)
    for k in best["this"]:
        b, t = best["baseline"][k], best["this"][k]
        print(f"{k:18s} baseline {b:6.3f} s  this {t:6.3f} s  baseline/this {b / t:5.2f}")


if __name__ == "__main__":
    main()
