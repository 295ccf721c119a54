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

Structured samplings (issue 26): ``sorf`` and ``fastfood`` join the sweep
above (rbf and matern; the other kernels are not radial), and a second
sweep measures the error against D at d = 16, 64, 256, 1024 for the rbf
kernel and the ``cossin`` map, beside ``iid``, ``orthogonal`` and ``qmc``, on
real data: patches of the two photographs bundled with scikit-learn
(``load_sample_images``; p × p grey patches, d = p², standardised) and
scikit-learn's digits (64-d), 300 points each, γ by the median heuristic.
Its summary states the issue's bars at D = 1024 and 4096 (3 seeds): sorf
within 1.15× of orthogonal's mean error, fastfood within 1.3× of iid's.

Outputs: ``approx_error[_<profile>].csv`` (one row per configuration, D and
seed), ``approx_error[_<profile>].png`` (log-log, mean and max error per
kernel), ``approx_error_dims[_<profile>].csv/.png/.md`` (the d sweep and
the bars) under bench/results/.

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
SAMPLINGS = ["iid", "orthogonal", "qmc", "sorf", "fastfood"]

PROFILES = {
    "full": dict(n_points=200, d=8, sizes=[10, 30, 100, 300, 1000, 3000, 10000], seeds=5,
                 dims=[16, 64, 256, 1024], dim_sizes=[64, 256, 1024, 4096, 16384], dim_points=300, dim_seeds=5),
    "quick": dict(n_points=120, d=8, sizes=[10, 100, 1000, 10000], seeds=3,
                  dims=[16, 64, 256, 1024], dim_sizes=[256, 1024, 4096], dim_points=300, dim_seeds=3),
    "tiny": dict(n_points=40, d=4, sizes=[10, 100], seeds=2,
                 dims=[16, 64], dim_sizes=[64, 256], dim_points=40, dim_seeds=2),
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


def fourier_features(X, D, sampling, seed, n_jobs, **kw):
    """Features of X from a freshly fitted RandomFourierFeatures."""
    import randfeat

    return randfeat.RandomFourierFeatures(D, sampling=sampling, random_state=seed, n_jobs=n_jobs, **kw).fit_transform(X)


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
                        kw = dict(kernel=kernel, gamma=gamma, feature_map=fmap)
                        if nu:
                            kw["nu"] = nu
                        try:
                            Z = fourier_features(X, D, sampling, seed, n_jobs, **kw)
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


# ---------------------------------------------------------- the d sweep (issue 26)
DIM_SAMPLINGS = ["iid", "orthogonal", "qmc", "sorf", "fastfood"]
BAR_SIZES = (1024, 4096)


def _standardise(X):
    X = X - X.mean(axis=0)
    return X / max(float(X.std()), 1e-12)


def image_patches(side, n, seed=0):
    """n grey side × side patches of scikit-learn's two bundled photographs (d = side²).

    Each patch is contrast-normalised as in Coates, Lee & Ng (2011): its mean
    removed, divided by sqrt(variance + 10) (pixels in 0..255), so the
    large flat regions (sky) do not collapse into one cluster; then the set
    is standardised.
    """
    from sklearn.datasets import load_sample_images
    from sklearn.feature_extraction.image import extract_patches_2d

    images = [img.astype(np.float64) @ np.array([0.299, 0.587, 0.114]) for img in load_sample_images().images]
    rng = np.random.default_rng(seed)
    parts = [extract_patches_2d(img, (side, side), max_patches=n, random_state=int(rng.integers(2**31)))
             for img in images]
    X = np.concatenate(parts).reshape(-1, side * side)
    X = X[rng.permutation(len(X))[:n]]
    X = (X - X.mean(axis=1, keepdims=True)) / np.sqrt(X.var(axis=1, keepdims=True) + 10.0)
    return _standardise(X)


def real_sets(dims, n):
    """{name: X}: photograph patches at each d = side² in ``dims``, and the digits (64-d)."""
    from sklearn.datasets import load_digits

    sets = {}
    for d in dims:
        side = int(round(np.sqrt(d)))
        if side * side != d:
            raise HarnessError(f"patch sets need square dimensions, got d={d}")
        sets[f"patches {side}x{side}"] = image_patches(side, n)
    digits = load_digits().data
    sets["digits"] = _standardise(digits[np.random.default_rng(1).permutation(len(digits))[:n]])
    return sets


def measure_dims(profile, n_jobs):
    """Mean |ZZᵀ − K| (rbf, cossin) against D for every sampling on each real set."""
    import randfeat

    rows = []
    for name, X in real_sets(profile["dims"], profile["dim_points"]).items():
        gamma = median_gamma(X, "rbf")
        K = randfeat.kernel_matrix(X, gamma=gamma)
        t = time.perf_counter()
        for sampling in DIM_SAMPLINGS:
            for D in profile["dim_sizes"]:
                for seed in range(profile["dim_seeds"]):
                    Z = fourier_features(X, D, sampling, seed, n_jobs, gamma=gamma, feature_map="cossin")
                    mean, mx = pair_errors(Z, K)
                    rows.append(dict(data=name, d=X.shape[1], sampling=sampling, n_features=D, seed=seed,
                                     gamma=gamma, mean_abs_error=mean, max_abs_error=mx))
        progress(f"d sweep, {name} (d={X.shape[1]}): {time.perf_counter() - t:.1f}s")
    return rows


def _mean_error(rows, data, sampling, D):
    vals = [r["mean_abs_error"] for r in rows if (r["data"], r["sampling"], r["n_features"]) == (data, sampling, D)]
    return float(np.mean(vals)) if vals else float("nan")


def dims_markdown(rows, profile):
    names = list(dict.fromkeys(r["data"] for r in rows))
    lines = ["# Kernel approximation error of structured features (issue 26)", "",
             f"Mean |z(x)ᵀz(y) − k(x, y)| over the pairs of {profile['dim_points']} points, rbf kernel, "
             f"`cossin` map, γ by the median heuristic, mean over {profile['dim_seeds']} seeds.", "",
             "## Bars: sorf / orthogonal ≤ 1.15, fastfood / iid ≤ 1.3", "",
             "| data | d | D | sorf / orthogonal | fastfood / iid | sorf | orthogonal | fastfood | iid |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        d = next(r["d"] for r in rows if r["data"] == name)
        for D in BAR_SIZES:
            e = {s: _mean_error(rows, name, s, D) for s in DIM_SAMPLINGS}
            if not np.isfinite(e["sorf"]):
                continue
            so, fi = e["sorf"] / e["orthogonal"], e["fastfood"] / e["iid"]
            lines.append(f"| {name} | {d} | {D} | {so:.2f}{'' if so <= 1.15 else ' (over)'} | "
                         f"{fi:.2f}{'' if fi <= 1.3 else ' (over)'} | {e['sorf']:.2e} | {e['orthogonal']:.2e} | "
                         f"{e['fastfood']:.2e} | {e['iid']:.2e} |")
    lines += ["", "## Every size", "", "| data | D | " + " | ".join(DIM_SAMPLINGS) + " |",
              "|---|---:|" + "---:|" * len(DIM_SAMPLINGS)]
    for name in names:
        for D in profile["dim_sizes"]:
            lines.append(f"| {name} | {D} | " + " | ".join(f"{_mean_error(rows, name, s, D):.2e}"
                                                          for s in DIM_SAMPLINGS) + " |")
    return "\n".join(lines) + "\n"


def plot_dims(path, rows, profile):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["data"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.6), sharey=True, squeeze=False)
    colors = {"iid": "C0", "orthogonal": "C1", "qmc": "C2", "sorf": "C4", "fastfood": "C5"}
    sizes = profile["dim_sizes"]
    for ax, name in zip(axes[0], names):
        for s in DIM_SAMPLINGS:
            ax.loglog(sizes, [_mean_error(rows, name, s, D) for D in sizes], color=colors[s], marker="o", ms=3,
                      label=s)
        d = next(r["d"] for r in rows if r["data"] == name)
        ax.set_title(f"{name} (d = {d})", fontsize=9)
        ax.set_xlabel("D")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("mean |z(x)ᵀz(y) − k(x,y)|")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("rbf, cossin; real data (photograph patches, digits); mean over seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
    colors = {"iid": "C0", "orthogonal": "C1", "qmc": "C2", "sorf": "C4", "fastfood": "C5"}
    styles = {(fmap, s): (c, "-" if fmap == "cos" else "--") for s, c in colors.items() for fmap in FEATURE_MAPS}
    styles[("binning", "iid")] = ("C3", "-")
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
    dim_rows = measure_dims(profile, args.n_jobs)
    out = results_dir(args.out)
    stem = "approx_error" if name == "full" else f"approx_error_{name}"
    write_csv(out / f"{stem}.csv", rows)
    plot(out / f"{stem}.png", X, rows, profile)
    dstem = "approx_error_dims" if name == "full" else f"approx_error_dims_{name}"
    with open(out / f"{dstem}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dim_rows[0]))
        w.writeheader()
        w.writerows(dim_rows)
    plot_dims(out / f"{dstem}.png", dim_rows, profile)
    dmd = dims_markdown(dim_rows, profile)
    (out / f"{dstem}.md").write_text(dmd)
    print(dmd)
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
