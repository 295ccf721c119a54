"""The N < D shape: binning features wider than the rows, many classes, tiny alpha (issue 36, part 1).

    PYTHONPATH=src python bench/dual.py [--rounds 3] [--primal] [--alphas 1e-4,1e-2,1] [--out bench/results]

A synthetic analogue of UCI Letter (``make_letter_like``: 16,000 training
rows × 16 integer columns, 26 classes, 4,000 held out), Laplacian binning
with 50 grids at gamma 0.33 (~185,000 columns: more columns than rows; the
16,000 rows are 13,651 distinct feature rows, merged before the solve),
``RidgeClassifier(alpha=1e-4)``, against ``RidgeClassifier`` on
``RandomFourierFeatures(2000)`` of the same data (the "Fourier+LS" fit).
The two fits alternate, ``--rounds`` times, in this process; the table
gives the median of each and of the per-round ratio.  ``--primal`` also
times the binning fit with ``solver="cg"`` once (CG; on this data its
"auto" preconditioner is a scaled identity, so it iterates in the dual),
and ``--alphas`` adds, per alpha, the dual Cholesky (``solver="cholesky"``,
forced) against CG (``solver="cg"``) and "auto" on the binning features,
which is what the "auto" rule's row cap (``randfeat._solvers.dual.DUAL_MIN_ROWS``)
rests on.
"""

import argparse
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

from _harness import DEFAULT_RESULTS, machine_info, progress

import randfeat
from randfeat.datasets import make_letter_like

GAMMA_BINNING = 0.33
GAMMA_FOURIER = 0.05
ALPHA = 1e-4


def _data():
    X, y = make_letter_like(20000)
    return X[:16000], y[:16000], X[16000:], y[16000:]


def _fit(make, Xtr, ytr, Xte, yte):
    est = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(Xtr, ytr)
        seconds = time.perf_counter() - t0
    it = None if est.n_iter_ is None else int(np.max(est.n_iter_))
    return dict(seconds=seconds, accuracy=float(est.score(Xte, yte)), solver=est.solver_, n_iter=it,
                D=int(est.features_.n_features_out_))


def binning(alpha=ALPHA, solver="auto"):
    return lambda: randfeat.RidgeClassifier(
        alpha=alpha, solver=solver, features=randfeat.RandomBinningFeatures(50, gamma=GAMMA_BINNING, random_state=0))


def fourier(alpha=ALPHA):
    return lambda: randfeat.RidgeClassifier(
        alpha=alpha, features=randfeat.RandomFourierFeatures(2000, gamma=GAMMA_FOURIER, random_state=0))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--primal", action="store_true", help="also time the primal CG fit once")
    parser.add_argument("--alphas", default="", help="comma-separated alphas: forced dual vs primal CG")
    parser.add_argument("--out", type=Path, default=DEFAULT_RESULTS)
    args = parser.parse_args()
    Xtr, ytr, Xte, yte = _data()
    rows = []
    runs = {"binning": [], "fourier": []}
    for r in range(args.rounds):
        order = ["binning", "fourier"] if r % 2 == 0 else ["fourier", "binning"]
        for name in order:
            res = _fit(binning() if name == "binning" else fourier(), Xtr, ytr, Xte, yte)
            runs[name].append(res)
            progress(f"round {r}: {name} {res}")
    ratios = [b["seconds"] / f["seconds"] for b, f in zip(runs["binning"], runs["fourier"])]
    b, f = runs["binning"][0], runs["fourier"][0]
    lines = [
        f"# The N < D shape (bench/dual.py): binning 50 grids, 26 classes, alpha = {ALPHA:g}",
        "",
        f"{machine_info()}",
        "",
        "| fit | solver_ | columns | seconds (median of {0}) | test accuracy | iterations |".format(args.rounds),
        "|---|---|---:|---:|---:|---:|",
        f"| binning (gamma {GAMMA_BINNING}), auto | {b['solver']} | {b['D']} | "
        f"{statistics.median(x['seconds'] for x in runs['binning']):.2f} | {b['accuracy']:.4f} | {b['n_iter']} |",
        f"| Fourier D = 2000 (gamma {GAMMA_FOURIER}), auto | {f['solver']} | {f['D']} | "
        f"{statistics.median(x['seconds'] for x in runs['fourier']):.2f} | {f['accuracy']:.4f} | {f['n_iter']} |",
    ]
    if args.primal:
        p = _fit(binning(solver="cg"), Xtr, ytr, Xte, yte)
        progress(f"primal CG: {p}")
        lines.append(f"| binning (gamma {GAMMA_BINNING}), solver='cg' (once) | {p['solver']} | {p['D']} | "
                     f"{p['seconds']:.2f} | {p['accuracy']:.4f} | {p['n_iter']} |")
    lines += ["", f"binning / Fourier time, per round: {', '.join(f'{x:.2f}' for x in ratios)}; "
                  f"median **{statistics.median(ratios):.2f}×** (bar: <= 10×)"]
    for alpha in [float(a) for a in args.alphas.split(",") if a]:
        d = _fit(binning(alpha, "cholesky"), Xtr, ytr, Xte, yte)
        c = _fit(binning(alpha, "cg"), Xtr, ytr, Xte, yte)
        a = _fit(binning(alpha, "auto"), Xtr, ytr, Xte, yte)
        progress(f"alpha {alpha:g}: dual {d}, cg {c}, auto {a}")
        rows.append(f"| {alpha:g} | {d['seconds']:.2f} | {d['accuracy']:.4f} | {c['seconds']:.2f} | {c['n_iter']} | "
                    f"{c['accuracy']:.4f} | {a['solver']} |")
    if rows:
        lines += ["", "Forced dual Cholesky against CG on the same binning features, one fit each:", "",
                  "| alpha | dual Cholesky (s) | accuracy | CG (s) | CG iterations | accuracy | auto picks |",
                  "|---:|---:|---:|---:|---:|---:|---|", *rows]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dual.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
