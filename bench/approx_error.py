#!/usr/bin/env python
"""How well random features approximate their kernel, as the feature count grows.

For every kernel × Fourier feature map × sampling scheme (and for random
binning of the Laplacian kernel) this measures, over all pairs of a fixed
sample of points, the mean and the max of |z(x)ᵀz(y) − k(x, y)| for
D (or P) from 10 to 10⁴ and several seeds, against the exact kernel from
``randfeat.kernel_matrix``.  Reference curves, at confidence 1 − δ (δ = 0.05):

* Hoeffding, one pair: the cos map's summands 2cos(ωᵀx+b)cos(ωᵀy+b) lie in
  [−2, 2], so P(|error| ≥ ε) ≤ 2exp(−Dε²/8) and ε = √(8 ln(2/δ)/D); for the
  max over the M pairs, a union bound gives ε = √(8 ln(2M/δ)/D).  (cossin
  summands lie in [−1, 1] per frequency; the cos curve is the looser one.)
  Binning: the estimate is a mean of P indicators in [0, 1], ε = √(ln(2/δ)/(2P)),
  or √(ln(2M/δ)/(2P)) for the max.
* Claim 1 of Rahimi & Recht (2007), uniform over a ball of diameter ``diam``
  holding the data (Gaussian kernel, σ_p² = E‖ω‖² = 2γd):
  P(sup |error| ≥ ε) ≤ 2⁸(σ_p·diam/ε)² exp(−Dε²/(4(d+2))), solved for ε.

Outputs: ``approx_error[_<profile>].csv`` (one row per configuration, D and
seed) and ``approx_error[_<profile>].png`` (log-log, mean and max error per
kernel) under bench/results/.

Usage: ``python bench/approx_error.py [--quick | --tiny] [--out DIR]``.
"""

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import HarnessError, progress, results_dir  # noqa: E402

DELTA = 0.05
KERNELS = [("rbf", None), ("laplacian", None), ("cauchy", None), ("matern", 1.5)]
FEATURE_MAPS = ["cos", "cossin"]
SAMPLINGS = ["iid", "orthogonal", "qmc"]

PROFILES = {
    "full": dict(n_points=200, d=8, sizes=[10, 30, 100, 300, 1000, 3000, 10000], seeds=5),
    "quick": dict(n_points=120, d=8, sizes=[10, 100, 1000, 10000], seeds=3),
    "tiny": dict(n_points=40, d=4, sizes=[10, 100], seeds=2),
}


def sample_points(n, d, seed=12345):
    """A fixed sample: standard normal points (the same for every method)."""
    return np.random.default_rng(seed).standard_normal((n, d))


def median_gamma(X, kernel):
    diff = X[:, None, :] - X[None, :, :]
    iu = np.triu_indices(X.shape[0], 1)
    if kernel == "laplacian":
        dist = np.abs(diff).sum(-1)[iu]
    else:
        dist = (diff**2).sum(-1)[iu]
    return float(1.0 / np.median(dist))


def pair_errors(Z, K):
    """Mean and max |ZZᵀ − K| over distinct pairs (upper triangle)."""
    Z = Z.toarray() if hasattr(Z, "toarray") else Z
    E = np.abs(Z @ Z.T - K)
    iu = np.triu_indices(K.shape[0], 1)
    return float(E[iu].mean()), float(E[iu].max())


def hoeffding(sizes, n_pairs, span):
    """ε at confidence 1 − δ for one pair and for the max over n_pairs (union bound).

    ``span`` is the width of the summands' range: 4 for the cos map, 1 for binning.
    """
    s = np.asarray(sizes, dtype=float)
    one = np.sqrt(span**2 * np.log(2 / DELTA) / (2 * s))
    union = np.sqrt(span**2 * np.log(2 * n_pairs / DELTA) / (2 * s))
    return one, union


def claim1_epsilon(D, d, sigma, diam):
    """Smallest ε with 2⁸(σ·diam/ε)² exp(−Dε²/(4(d+2))) ≤ δ (bisection on log scale)."""

    def bound(eps):
        return 2**8 * (sigma * diam / eps) ** 2 * math.exp(-D * eps**2 / (4 * (d + 2)))

    lo, hi = 1e-6, 1e6
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if bound(mid) <= DELTA else (mid, hi)
    return hi


def measure(profile, n_jobs):
    import randfeat

    X = sample_points(profile["n_points"], profile["d"])
    rows, skipped = [], []
    for kernel, nu in KERNELS:
        gamma = median_gamma(X, kernel)
        K = randfeat.kernel_matrix(X, X, kernel=kernel, gamma=gamma, nu=nu if nu else 1.5)
        for fmap in FEATURE_MAPS:
            for sampling in SAMPLINGS:
                t = time.perf_counter()
                for D in profile["sizes"]:
                    for seed in range(profile["seeds"]):
                        kw = dict(kernel=kernel, gamma=gamma, feature_map=fmap, sampling=sampling,
                                  random_state=seed, n_jobs=n_jobs)
                        if nu:
                            kw["nu"] = nu
                        try:
                            Z = randfeat.RandomFourierFeatures(D, **kw).fit_transform(X)
                        except ValueError as exc:  # e.g. orthogonal for a non-radial kernel
                            skipped.append((kernel, fmap, sampling, str(exc).split(";")[0]))
                            break
                        mean, mx = pair_errors(Z, K)
                        rows.append(dict(method="fourier", kernel=kernel, feature_map=fmap, sampling=sampling,
                                         n_features=D, seed=seed, gamma=gamma, mean_abs_error=mean, max_abs_error=mx))
                    else:
                        continue
                    break
                progress(f"{kernel} {fmap} {sampling}: {time.perf_counter() - t:.1f}s")
    gamma = median_gamma(X, "laplacian")
    K = randfeat.kernel_matrix(X, X, kernel="laplacian", gamma=gamma)
    t = time.perf_counter()
    for P in profile["sizes"]:
        for seed in range(profile["seeds"]):
            Z = randfeat.RandomBinningFeatures(P, kernel="laplacian", gamma=gamma, random_state=seed,
                                               n_jobs=n_jobs).fit_transform(X)
            mean, mx = pair_errors(Z, K)
            rows.append(dict(method="binning", kernel="laplacian", feature_map="binning", sampling="iid",
                             n_features=P, seed=seed, gamma=gamma, mean_abs_error=mean, max_abs_error=mx))
    progress(f"laplacian binning: {time.perf_counter() - t:.1f}s")
    return X, rows, sorted(set(skipped))


def write_csv(path, rows):
    fields = ["method", "kernel", "feature_map", "sampling", "n_features", "seed", "gamma",
              "mean_abs_error", "max_abs_error"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def plot(path, X, rows, profile):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_pairs = X.shape[0] * (X.shape[0] - 1) // 2
    sizes = np.array(profile["sizes"], dtype=float)
    panels = [k for k, _ in KERNELS] + ["binning"]
    fig, axes = plt.subplots(2, len(panels), figsize=(4 * len(panels), 7), sharex=True, sharey="row")
    styles = {("cos", "iid"): ("C0", "-"), ("cos", "orthogonal"): ("C1", "-"), ("cos", "qmc"): ("C2", "-"),
              ("cossin", "iid"): ("C0", "--"), ("cossin", "orthogonal"): ("C1", "--"), ("cossin", "qmc"): ("C2", "--"),
              ("binning", "iid"): ("C3", "-")}
    d = X.shape[1]
    diam = float(np.max(np.linalg.norm(X[:, None] - X[None], axis=-1)))
    for col, panel in enumerate(panels):
        for row, stat in enumerate(["mean_abs_error", "max_abs_error"]):
            ax = axes[row, col]
            sel = [r for r in rows if (r["method"] == "binning") == (panel == "binning")
                   and (panel == "binning" or r["kernel"] == panel)]
            for (fmap, sampling), (color, ls) in styles.items():
                pts = [r for r in sel if r["feature_map"] == fmap and r["sampling"] == sampling]
                if not pts:
                    continue
                xs = sorted({r["n_features"] for r in pts})
                ys = [np.mean([r[stat] for r in pts if r["n_features"] == x]) for x in xs]
                ax.loglog(xs, ys, color=color, ls=ls, marker="o", ms=3, label=f"{fmap}, {sampling}")
            one, union = hoeffding(sizes, n_pairs, span=1.0 if panel == "binning" else 4.0)
            ref = one if row == 0 else union
            ax.loglog(sizes, ref, color="gray", ls=":", label="Hoeffding" + (" (one pair)" if row == 0 else " + union"))
            if panel == "rbf" and row == 1:
                gamma = next(r["gamma"] for r in sel)
                sigma = math.sqrt(2 * gamma * d)
                ax.loglog(sizes, [claim1_epsilon(D, d, sigma, diam) for D in sizes], color="k", ls="-.",
                          label="Claim 1 (uniform)")
            if row == 0:
                ax.set_title(panel if panel != "matern" else "matern (ν=1.5)")
            if col == 0:
                ax.set_ylabel(("mean" if row == 0 else "max") + " |z(x)ᵀz(y) − k(x,y)|")
            if row == 1:
                ax.set_xlabel("D (Fourier) / P (binning)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6)
    fig.suptitle(f"Kernel approximation error over {n_pairs} pairs of {X.shape[0]} N(0, I_{d}) points, "
                 f"γ by median heuristic; mean over seeds; bounds at δ={DELTA}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true")
    g.add_argument("--tiny", action="store_true")
    p.add_argument("--out", help="results directory (default bench/results)")
    p.add_argument("--n-jobs", type=int, default=None)
    args = p.parse_args(argv)
    name = "tiny" if args.tiny else "quick" if args.quick else "full"
    profile = PROFILES[name]
    try:
        import randfeat  # noqa: F401
    except ImportError as exc:
        raise HarnessError(f"cannot import randfeat: {exc}") from None
    X, rows, skipped = measure(profile, args.n_jobs)
    out = results_dir(args.out)
    stem = "approx_error" if name == "full" else f"approx_error_{name}"
    write_csv(out / f"{stem}.csv", rows)
    plot(out / f"{stem}.png", X, rows, profile)
    for s in skipped:
        print(f"skipped {s[0]} / {s[1]} / {s[2]}: {s[3]}")
    # Summary: error at the largest size, mean over seeds.
    top = max(profile["sizes"])
    print(f"{'kernel':10s} {'map':8s} {'sampling':11s} {'size':>6s} {'mean err':>10s} {'max err':>10s}")
    seen = []
    for r in rows:
        key = (r["kernel"], r["feature_map"], r["sampling"])
        if r["n_features"] != top or key in seen:
            continue
        seen.append(key)
        same = [q for q in rows if (q["kernel"], q["feature_map"], q["sampling"]) == key and q["n_features"] == top]
        print(f"{key[0]:10s} {key[1]:8s} {key[2]:11s} {top:6d} {np.mean([q['mean_abs_error'] for q in same]):10.2e} "
              f"{np.mean([q['max_abs_error'] for q in same]):10.2e}")
    print(f"wrote {out / (stem + '.csv')} and {out / (stem + '.png')}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as exc:
        print(f"approx_error.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
