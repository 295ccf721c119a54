#!/usr/bin/env python
"""Do leverage-score samplers reach uniform sampling's test error with fewer landmarks or features?

On real data (the UCI Adult set shipped with randfeat, and scikit-learn's
bundled digits, breast_cancer and diabetes; California housing too when it
is already in scikit-learn's cache), for several seeds, this fits

* ``Nystroem`` (rbf) with ``landmarks='uniform'`` and ``'leverage'``
  (``leverage_regularization='auto'``, and ``'alpha'``: λ set to the ridge
  alpha leave-one-out chose for uniform landmarks at the same m and seed,
  the λ of the statistical theory), against m;
* ``RandomFourierFeatures`` (rbf, cossin) with ``sampling='iid'``,
  ``'orthogonal'``, ``'qmc'`` and ``'leverage'`` (auto, and alpha = iid's),
  against D;

each followed by ``RidgeCV`` / ``RidgeClassifierCV`` (regression / classification)
on the features, whose alpha is chosen by closed-form leave-one-out on the training rows from
``alphas = n_train · 10^{-7..0}`` (per-sample λ from 1e-7 to 1), and reports the
test error (classification: error rate; regression: 1 − R²) and the time of
the map's fit and of the whole fit.  gamma is fixed per data set by the median
heuristic (1/median ‖x − y‖² over 1000 training rows, after standardising
dense data; Adult's 0/1 columns as they are).  The sklearn sets are split
70/30 (stratified for classes) per seed; Adult keeps its standard split and
the seed draws the map.  Methods of one (data, size, seed) run in turn.

Outputs: ``bench/results/leverage.{md,csv,png}`` (``--quick``: ``leverage_quick.*``).

Usage::

    python bench/leverage.py            # all sets, 5 seeds (3 on Adult); tens of minutes on a shared machine
    python bench/leverage.py --quick    # small grids, 2 seeds
    python bench/leverage.py --only digits,diabetes
"""

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import machine_info, progress, results_dir  # noqa: E402

import randfeat  # noqa: E402
from randfeat import Nystroem, RandomFourierFeatures, RidgeClassifierCV, RidgeCV  # noqa: E402

NYSTROEM = ("uniform", "leverage", "leverage_alpha")
FOURIER = ("iid", "orthogonal", "qmc", "leverage", "leverage_alpha")
FULL = {
    "adult": dict(m=[25, 50, 100, 200, 400, 800], D=[50, 100, 200, 400, 800, 1600], seeds=3),
    "digits": dict(m=[25, 50, 100, 200, 400, 800], D=[50, 100, 200, 400, 800, 1600], seeds=5),
    "breast_cancer": dict(m=[5, 10, 20, 40, 80, 160], D=[10, 20, 40, 80, 160, 320], seeds=5),
    "diabetes": dict(m=[5, 10, 20, 40, 80, 160], D=[10, 20, 40, 80, 160, 320], seeds=5),
    "california": dict(m=[25, 50, 100, 200, 400, 800], D=[50, 100, 200, 400, 800, 1600], seeds=3),
}
QUICK = {
    "adult": dict(m=[50, 200], D=[100, 400], seeds=2),
    "digits": dict(m=[25, 100], D=[50, 200], seeds=2),
    "breast_cancer": dict(m=[10, 40], D=[20, 80], seeds=2),
    "diabetes": dict(m=[10, 40], D=[20, 80], seeds=2),
    "california": dict(m=[50, 200], D=[100, 400], seeds=2),
}


def load(name, seed):
    """(kind, X_train, y_train, X_test, y_test) or None when the set is not available offline."""
    from sklearn import datasets as skd
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    if name == "adult":
        Xtr, ytr, Xte, yte = randfeat.datasets.load_adult(encoding="a9a", return_X_y=True)
        return "classification", Xtr, ytr, Xte, yte
    if name == "california":
        try:
            X, y = skd.fetch_california_housing(return_X_y=True, download_if_missing=False)
        except OSError:
            return None
        kind = "regression"
    else:
        X, y = getattr(skd, f"load_{name}")(return_X_y=True)
        kind = "regression" if name == "diabetes" else "classification"
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed,
                                          stratify=y if kind == "classification" else None)
    scaler = StandardScaler().fit(Xtr)
    return kind, scaler.transform(Xtr), ytr, scaler.transform(Xte), yte


def median_gamma(X, n=1000):
    """1/median squared distance between distinct pairs of (up to) n training rows (seed 0)."""
    rng = np.random.default_rng(0)
    S = X[rng.choice(X.shape[0], min(n, X.shape[0]), replace=False)]
    S = S.toarray() if sp.issparse(S) else S
    sq = np.einsum("ij,ij->i", S, S)
    d2 = sq[:, None] + sq[None, :] - 2 * S @ S.T
    return float(1.0 / np.median(d2[np.triu_indices(S.shape[0], 1)]))


def make_map(family, method, size, gamma, seed, alpha):
    lam = alpha if method == "leverage_alpha" else "auto"
    if family == "nystroem":
        landmarks = "uniform" if method == "uniform" else "leverage"
        return Nystroem(gamma=gamma, n_components=size, landmarks=landmarks, leverage_regularization=lam,
                        random_state=seed)
    sampling = "leverage" if method.startswith("leverage") else method
    return RandomFourierFeatures(size, gamma=gamma, sampling=sampling, leverage_regularization=lam,
                                 random_state=seed)


def run_one(kind, data, fmap, alphas):
    """(test error, chosen alpha, map fit seconds, whole fit seconds: map fit + transform + ridge).

    The ridge is fitted on the held features (the same model as
    ``RidgeCV(features=fmap)``, tests/test_leverage.py), so that the map is
    fitted once.
    """
    Xtr, ytr, Xte, yte = data
    t0 = time.perf_counter()
    fmap.fit(Xtr)
    t_map = time.perf_counter() - t0
    cls = RidgeClassifierCV if kind == "classification" else RidgeCV
    est = cls(alphas=alphas).fit(fmap.transform(Xtr), ytr)
    t_fit = time.perf_counter() - t0
    pred = est.predict(fmap.transform(Xte))
    if kind == "classification":
        err = float(np.mean(pred != yte))
    else:
        err = float(np.mean((pred - yte) ** 2) / np.var(yte))
    return err, float(est.alpha_), t_map, t_fit


def run(name, grid, out_rows):
    first = load(name, 0)
    if first is None:
        progress(f"{name}: not in scikit-learn's cache (no download), skipped")
        return False
    gamma = median_gamma(first[1])
    for seed in range(grid["seeds"]):
        kind, Xtr, ytr, Xte, yte = load(name, seed)
        alphas = Xtr.shape[0] * 10.0 ** np.arange(-7, 1)
        for family, sizes, methods in (("nystroem", grid["m"], NYSTROEM), ("fourier", grid["D"], FOURIER)):
            for size in sizes:
                if family == "nystroem" and size > Xtr.shape[0]:
                    continue
                base_alpha = None
                for method in methods:
                    fmap = make_map(family, method, size, gamma, seed, base_alpha)
                    err, alpha, t_map, t_fit = run_one(kind, (Xtr, ytr, Xte, yte), fmap, alphas)
                    if method in ("uniform", "iid"):
                        base_alpha = alpha
                    out_rows.append(dict(data=name, kind=kind, n_train=Xtr.shape[0], d=Xtr.shape[1], gamma=gamma,
                                         family=family, method=method, size=size, seed=seed, test_error=err,
                                         alpha=alpha, map_fit_s=t_map, fit_s=t_fit))
                    progress(f"{name} seed {seed} {family} {method:>14} size {size:5d}: error {err:.4f} "
                             f"alpha {alpha:.3g} map fit {t_map:.3f}s fit {t_fit:.3f}s")
    return True


def summarize(rows):
    """{(data, family, method, size): (mean error, std, n, median map fit s, median fit s)}."""
    groups = {}
    for r in rows:
        groups.setdefault((r["data"], r["family"], r["method"], r["size"]), []).append(r)
    return {k: (float(np.mean([r["test_error"] for r in v])), float(np.std([r["test_error"] for r in v])), len(v),
                float(np.median([r["map_fit_s"] for r in v])), float(np.median([r["fit_s"] for r in v])))
            for k, v in groups.items()}


def reach(summary, data, family, method, base):
    """For each size s of base: the smallest size where method's mean error ≤ base's at s (None if never)."""
    sizes = sorted({k[3] for k in summary if k[:3] == (data, family, base)})
    out = {}
    for s in sizes:
        target = summary[(data, family, base, s)][0]
        hits = [t for t in sizes if (data, family, method, t) in summary and summary[(data, family, method, t)][0]
                <= target]
        out[s] = min(hits) if hits else None
    return out


def paired(rows, data, family, method, base, size):
    """The per-seed differences error(method) − error(base) at one size."""
    by = {(r["method"], r["seed"]): r["test_error"] for r in rows
          if r["data"] == data and r["family"] == family and r["size"] == size}
    return np.array([by[(method, s)] - by[(base, s)] for (m, s) in by if m == method and (base, s) in by])


def markdown(rows, header):
    S = summarize(rows)
    lines = [header, ""]
    for data in dict.fromkeys(r["data"] for r in rows):
        r0 = next(r for r in rows if r["data"] == data)
        metric = "error rate" if r0["kind"] == "classification" else "1 − R²"
        n_seeds = len({r["seed"] for r in rows if r["data"] == data})
        lines += [f"### {data} (n_train = {r0['n_train']}, d = {r0['d']}, gamma = {r0['gamma']:.4g}, "
                  f"{n_seeds} seeds; test {metric}, mean ± std over seeds)", ""]
        for family, methods, base, what in (("nystroem", NYSTROEM, "uniform", "m"), ("fourier", FOURIER, "iid", "D")):
            sizes = sorted({k[3] for k in S if k[0] == data and k[1] == family})
            present = [m for m in methods if any((data, family, m, s) in S for s in sizes)]
            lines += [f"| {what} | " + " | ".join(present) + " | fit time, median s, map (map + transform + ridge): "
                      + " / ".join(present) + " |",
                      "|---:|" + "---:|" * len(present) + "---|"]
            for s in sizes:
                cells = [f"{S[(data, family, m, s)][0]:.4f} ± {S[(data, family, m, s)][1]:.4f}"
                         if (data, family, m, s) in S else "—" for m in present]
                times = [f"{S[(data, family, m, s)][3]:.3g} ({S[(data, family, m, s)][4]:.3g})"
                         if (data, family, m, s) in S else "—" for m in present]
                lines.append(f"| {s} | " + " | ".join(cells) + " | " + " / ".join(times) + " |")
            lines.append("")
            others = [m for m in present if m != base]
            lines += [f"Paired with {base} (same seed and split): mean ± std of the error difference, and the seeds "
                      f"where the method's error is lower / higher:", "",
                      f"| {what} | " + " | ".join(f"{m} − {base}" for m in others) + " |",
                      "|---:|" + "---:|" * len(others)]
            for s in sizes:
                cells = []
                for m in others:
                    d = paired(rows, data, family, m, base, s)
                    cells.append(f"{d.mean():+.4f} ± {d.std():.4f} ({(d < 0).sum()}/{(d > 0).sum()})" if d.size
                                 else "—")
                lines.append(f"| {s} | " + " | ".join(cells) + " |")
            lines.append("")
            for m in present:
                if m == base:
                    continue
                hit = reach(S, data, family, m, base)
                text = ", ".join(f"{base} at {s} → {m} at {t if t is not None else 'never (within the grid)'}"
                                 for s, t in hit.items())
                lines.append(f"* {what} where {m} reaches {base}'s mean error: {text}")
            lines.append("")
    return "\n".join(lines) + "\n"


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    S = summarize(rows)
    datas = list(dict.fromkeys(r["data"] for r in rows))
    fig, axes = plt.subplots(len(datas), 2, figsize=(11, 3.3 * len(datas)), squeeze=False)
    for i, data in enumerate(datas):
        for j, (family, methods, what) in enumerate((("nystroem", NYSTROEM, "m (landmarks)"),
                                                    ("fourier", FOURIER, "D (features)"))):
            ax = axes[i][j]
            for m in methods:
                pts = sorted((k[3], v) for k, v in S.items() if k[:3] == (data, family, m))
                if pts:
                    x = [p[0] for p in pts]
                    ax.errorbar(x, [p[1][0] for p in pts], yerr=[p[1][1] for p in pts], marker="o", ms=3,
                                capsize=2, label=m)
            ax.set_xscale("log")
            ticks = sorted({k[3] for k in S if k[:2] == (data, family)})
            ax.minorticks_off()
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_xlabel(what)
            ax.set_ylabel("test error")
            ax.set_title(f"{data}: {'Nyström' if family == 'nystroem' else 'random Fourier'}")
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="two sizes and two seeds per set")
    p.add_argument("--only", default=None, help="comma-separated data sets (adult, digits, breast_cancer, "
                   "diabetes, california)")
    p.add_argument("--out", default=None, help="directory for the results (default bench/results)")
    p.add_argument("--from-csv", default=None, help="rewrite the .md and .png from this run's .csv (no fits)")
    args = p.parse_args(argv)
    grids = QUICK if args.quick else FULL
    names = args.only.split(",") if args.only else list(grids)
    out = results_dir(args.out)
    stem = out / ("leverage" + ("_quick" if args.quick else ""))
    info = machine_info()
    if args.from_csv:
        with open(args.from_csv, newline="") as f:
            rows = [{k: (v if k in ("data", "kind", "family", "method") else float(v)) for k, v in r.items()}
                    for r in csv.DictReader(f)]
        for r in rows:
            r["size"], r["seed"], r["n_train"], r["d"] = int(r["size"]), int(r["seed"]), int(r["n_train"]), int(r["d"])
        used, runtime = list(dict.fromkeys(r["data"] for r in rows)), f"rewritten from {Path(args.from_csv).name}"
    else:
        rows, used = [], []
        t0 = time.perf_counter()
        for name in names:
            if run(name, grids[name], rows):
                used.append(name)
        runtime = f"{time.perf_counter() - t0:.0f} s, 1-min load {info['load_average_1min']} at the end"
        with open(f"{stem}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    header = (f"## Leverage-score sampling against uniform/i.i.d. sampling: test error against m and D\n\n"
              f"randfeat {info['randfeat']}, scikit-learn {info['sklearn']}, {info['cpu_count']} cores shared "
              f"with other sessions (timings are indicative; {runtime}). Data sets used: {', '.join(used)} "
              f"(California housing is used only when already in scikit-learn's cache). Alpha by leave-one-out "
              f"from n_train·10^(-7..0) per fit; gamma by the median heuristic. leverage = "
              f"leverage_regularization='auto' (d_eff(λ) = m or D'); leverage_alpha = λ set to the alpha "
              f"leave-one-out chose for uniform/iid at the same size and seed.")
    Path(f"{stem}.md").write_text(markdown(rows, header))
    plot(rows, f"{stem}.png")
    print(f"wrote {stem}.md, .png" + ("" if args.from_csv else ", .csv"))


if __name__ == "__main__":
    main()
