"""Model selection over a 5 gammas × 8 alphas grid: randfeat RidgeClassifierCV against GridSearchCV, same run.

Three ways to choose (gamma, alpha) for random Fourier features + a ridge
classifier, on the same data in the same run:

1. ``randfeat.RidgeClassifierCV(alphas, features=RandomFourierFeatures(D),
   gammas=...)``: every alpha scored by efficient leave-one-out from one
   eigendecomposition per gamma.
2. The same with ``cv=5, scoring="accuracy"``: 5-fold (the folds
   GridSearchCV uses), one eigendecomposition per fold and gamma, scored
   as GridSearchCV scores.
3. ``GridSearchCV(Pipeline(RBFSampler(D), sklearn RidgeClassifier), cv=5)``.
4. ``GridSearchCV(randfeat.RidgeClassifier(features=RandomFourierFeatures(D)), cv=5)``.

Each is timed once (selection including the final refit) and the selected
model's test error is reported with its binomial standard error
√(p(1−p)/n_test).  Data: Adult-like (one-hot, ``randfeat.datasets``) and
Forest-like sets (classification) and the Census-like set (regression:
``RidgeCV`` / ``Ridge``, R² for the k-fold rows as GridSearchCV scores);
standardised.

Usage::

    python bench/model_selection.py --quick   # seconds to a minute
    python bench/model_selection.py           # larger sizes

Results: bench/results/model_selection.md and a heat map of the
leave-one-out error over the grid, model_selection_grid.png (``_quick``
suffixes with ``--quick``; ``--out DIR``).
"""

import argparse
import time
from pathlib import Path

import numpy as np
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import Ridge as SkRidge
from sklearn.linear_model import RidgeClassifier as SkRidgeClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from randfeat import RandomFourierFeatures, Ridge, RidgeClassifier, RidgeClassifierCV, RidgeCV, datasets

ALPHAS = np.logspace(-4, 3, 8)
GAMMA_FACTORS = np.array([0.1, 0.3, 1.0, 3.0, 10.0])


def load(name, n):
    maker = {"adult": datasets.make_adult_like, "forest": datasets.make_forest_like,
             "census": datasets.make_census_like}[name]
    X, y = maker(n, random_state=0)
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
    n_train = int(0.8 * len(y))
    sc = StandardScaler().fit(X[:n_train])
    return sc.transform(X[:n_train]), y[:n_train], sc.transform(X[n_train:]), y[n_train:]


def run(name, n, D):
    """Time the four selections on one set; rows of (set, N, D, method, seconds, gamma, alpha, error, SE).

    Classification: % misclassified, SE √(p(1−p)/n).  Regression (Census-like):
    ``RidgeCV`` and ``Ridge``, GridSearchCV's default R² as the k-fold score,
    test error the normalised RMSE (RMSE / std of the test targets), SE about
    error/√(2n).
    """
    Xtr, ytr, Xte, yte = load(name, n)
    regression = name == "census"
    gammas = GAMMA_FACTORS / Xtr.shape[1]  # around gamma='scale' for standardised X
    rows = []
    CV, Est, Sk = (RidgeCV, Ridge, SkRidge) if regression else (RidgeClassifierCV, RidgeClassifier, SkRidgeClassifier)
    kfold_scoring = "r2" if regression else "accuracy"

    def record(method, fit):
        t0 = time.perf_counter()
        model, gamma, alpha = fit()
        t = time.perf_counter() - t0
        if regression:
            err = float(np.sqrt(np.mean((model.predict(Xte) - yte) ** 2)) / np.std(yte))
            se = err / np.sqrt(2 * len(yte))
        else:
            err = float(np.mean(model.predict(Xte) != yte))
            se = np.sqrt(err * (1 - err) / len(yte))
        rows.append((name, len(ytr), D, method, t, gamma, alpha, err, se))

    def ours():
        m = CV(ALPHAS, features=RandomFourierFeatures(D, random_state=0), gammas=gammas)
        m.fit(Xtr, ytr)
        return m, m.gamma_, m.alpha_

    def ours_kfold():
        m = CV(ALPHAS, features=RandomFourierFeatures(D, random_state=0), gammas=gammas, cv=5, scoring=kfold_scoring)
        m.fit(Xtr, ytr)
        return m, m.gamma_, m.alpha_

    def sk_grid():
        pipe = Pipeline([("rff", RBFSampler(n_components=D, random_state=0)), ("clf", Sk())])
        g = GridSearchCV(pipe, {"rff__gamma": list(gammas), "clf__alpha": list(ALPHAS)}, cv=5).fit(Xtr, ytr)
        return g, g.best_params_["rff__gamma"], g.best_params_["clf__alpha"]

    def rf_grid():
        est = Est(features=RandomFourierFeatures(D, random_state=0))
        g = GridSearchCV(est, {"features__gamma": list(gammas), "alpha": list(ALPHAS)}, cv=5).fit(Xtr, ytr)
        return g, g.best_params_["features__gamma"], g.best_params_["alpha"]

    kind = "RidgeCV" if regression else "RidgeClassifierCV"
    for method, fit in ((f"randfeat {kind} (LOO)", ours),
                        (f"randfeat {kind} (cv=5, {kfold_scoring})", ours_kfold),
                        ("GridSearchCV sklearn RBFSampler", sk_grid),
                        (f"GridSearchCV randfeat {Est.__name__}", rf_grid)):
        record(method, fit)
    return rows


def grid_errors(name, n, D):
    """Leave-one-out mean squared error on the ±1 targets over the whole (gamma, alpha) grid.

    One ``RidgeClassifierCV`` per gamma with ``store_cv_results``: the
    closed form scores every alpha from one eigendecomposition.
    """
    Xtr, ytr, _, _ = load(name, n)
    gammas = GAMMA_FACTORS / Xtr.shape[1]
    err = np.empty((len(gammas), len(ALPHAS)))
    CV = RidgeCV if name == "census" else RidgeClassifierCV
    for i, g in enumerate(gammas):
        m = CV(ALPHAS, features=RandomFourierFeatures(D, gamma=g, random_state=0),
               store_cv_results=True).fit(Xtr, ytr)
        err[i] = m.cv_results_.reshape(-1, len(ALPHAS)).mean(axis=0)
    return gammas, err


def plot_grids(grids, path):
    """One heat map per data set of the leave-one-out error over the grid; the chosen point marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(grids), figsize=(5.2 * len(grids), 3.8), squeeze=False)
    for ax, (name, gammas, err) in zip(axes[0], grids):
        im = ax.imshow(err, origin="lower", aspect="auto", cmap="viridis")
        i, j = np.unravel_index(np.argmin(err), err.shape)
        ax.plot(j, i, "r*", markersize=14)
        ax.set_xticks(range(len(ALPHAS)), [f"{a:.0e}" for a in ALPHAS], rotation=45)
        ax.set_yticks(range(len(gammas)), [f"{g:.2g}" for g in gammas])
        ax.set_xlabel("alpha")
        ax.set_ylabel("gamma")
        ax.set_title(f"{name}-like: leave-one-out error" + ("" if name == "census" else " (±1 targets)"))
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    sizes = ([("census", 1500, 150), ("adult", 1500, 150), ("forest", 1500, 150)] if args.quick else
             [("census", 18000, 1000), ("adult", 20000, 1000), ("forest", 20000, 1000)])
    lines = ["| data | N train | D | method | selection s | gamma | alpha | test error ± SE | speed-up |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, n, D in sizes:
        rows = run(name, n, D)
        t_ours = rows[0][4]
        for r in rows:
            lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.3g} | {r[6]:.3g} | "
                         f"{100 * r[7]:.2f}% ± {100 * r[8]:.2f} | {r[4] / t_ours:.1f}× |")
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    grids = [(name, *grid_errors(name, n, D)) for name, n, D in sizes]
    plot_grids(grids, out / ("model_selection_grid_quick.png" if args.quick else "model_selection_grid.png"))
    (out / ("model_selection_quick.md" if args.quick else "model_selection.md")).write_text(
        "5 gammas × 8 alphas, 5-fold GridSearchCV vs leave-one-out and 5-fold RidgeCV / RidgeClassifierCV; one "
        "run. Test error: % misclassified, or for Census-like the normalised RMSE in %.\n\n"
        + text + "\n")


if __name__ == "__main__":
    main()
