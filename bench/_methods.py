"""The rows of Table 1: how each method builds its estimator, and what it may cost.

randfeat's Fourier+LS and Binning+LS, scikit-learn's RBFSampler and Nystroem
pipelines, an exact kernel machine and a linear model.  Add a row by adding
an entry to ``build_methods``.
"""

from dataclasses import dataclass
from functools import partial
from typing import Callable, Optional


@dataclass
class Method:
    """One row of the table: how to build its estimator and what it may cost.

    ``make(task, params, n_rows, seed)`` returns an unfitted estimator with
    fit / predict; ``params`` is one point of the grid (``gamma``, ``lam`` or
    ``C``); ``alpha = lam × n_rows``.
    """

    key: str
    label: str
    make: Callable
    kernel: Optional[str] = None  # kernel whose median heuristic sets gamma's scale
    size: Callable = lambda task: ""  # "D=500", "P=30", ...
    dense_width: Optional[Callable] = None  # materialises N × width float64 features
    exact: bool = False  # exact kernel machine: skipped above its time / memory budget
    pair_with: Optional[str] = None  # train on the same rows as this (capped) method
    params_of: Optional[str] = None  # reuse the hyper-parameters chosen for this method (same model)
    grid_c: bool = False  # grid over C (SVM) instead of lambda
    # Selected in closed form by randfeat.RidgeCV / RidgeClassifierCV (gammas= and alphas=) instead of a
    # validation split: "loo" (leave-one-out, dense features) or an int (k-fold, sparse features).
    cv_select: Optional[object] = None
    features: Optional[Callable] = None  # features(task, seed) -> the unfitted feature-map template


def _ls(task, lam, n, features=None, library="randfeat", n_jobs=None):
    """Least squares on features: Ridge for regression, ±1 one-vs-rest RidgeClassifier."""
    alpha = lam * n
    if library == "randfeat":
        import randfeat

        cls = randfeat.RidgeClassifier if task.kind == "classification" else randfeat.Ridge
        return cls(alpha=alpha, features=features, n_jobs=n_jobs)
    from sklearn.linear_model import Ridge, RidgeClassifier

    return (RidgeClassifier if task.kind == "classification" else Ridge)(alpha=alpha)


def _rf_fourier(task, p, n, seed, *, n_jobs):
    import randfeat

    feats = randfeat.RandomFourierFeatures(task.D, kernel="rbf", gamma=p["gamma"], random_state=seed, n_jobs=n_jobs)
    return _ls(task, p["lam"], n, feats, n_jobs=n_jobs)


def _rf_binning(task, p, n, seed, *, grids, n_jobs):
    import randfeat

    feats = randfeat.RandomBinningFeatures(grids, kernel="laplacian", gamma=p["gamma"], random_state=seed,
                                           n_jobs=n_jobs)
    return _ls(task, p["lam"], n, feats, n_jobs=n_jobs)


def _fourier_template(task, seed, n_jobs):
    import randfeat

    return randfeat.RandomFourierFeatures(task.D, kernel="rbf", random_state=seed, n_jobs=n_jobs)


def _binning_template(task, seed, n_jobs, *, grids):
    import randfeat

    return randfeat.RandomBinningFeatures(grids, kernel="laplacian", random_state=seed, n_jobs=n_jobs)


def _sk_rbf_sampler(task, p, n, seed):
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.pipeline import make_pipeline

    return make_pipeline(RBFSampler(gamma=p["gamma"], n_components=task.D, random_state=seed),
                         _ls(task, p["lam"], n, library="sklearn"))


def _sk_nystroem(task, p, n, seed):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline

    comps = min(task.D, n)
    return make_pipeline(Nystroem(kernel="rbf", gamma=p["gamma"], n_components=comps, random_state=seed),
                         _ls(task, p["lam"], n, library="sklearn"))


def _exact(task, p, n, seed):
    if task.kind == "classification":
        from sklearn.svm import SVC

        return SVC(kernel="rbf", gamma=p["gamma"], C=p["C"], cache_size=1000)
    from sklearn.kernel_ridge import KernelRidge

    return KernelRidge(kernel="rbf", gamma=p["gamma"], alpha=p["lam"] * n)


def _linear(task, p, n, seed):
    return _ls(task, p["lam"], n, library="sklearn")


def build_methods(profile, n_jobs=None):
    """Every row of the table, in order; ``n_jobs`` goes to each randfeat estimator."""
    g1, g2 = profile["grids"]
    fourier = partial(_rf_fourier, n_jobs=n_jobs)
    return [
        Method("rf_fourier", "randfeat Fourier+LS", fourier, "rbf", lambda t: f"D={t.D}",
               cv_select="loo", features=partial(_fourier_template, n_jobs=n_jobs)),
        Method(f"rf_binning_{g1}", f"randfeat Binning+LS (P={g1})", partial(_rf_binning, grids=g1, n_jobs=n_jobs),
               "laplacian", lambda t, g=g1: f"P={g}", cv_select=5,
               features=partial(_binning_template, grids=g1, n_jobs=n_jobs)),
        Method(f"rf_binning_{g2}", f"randfeat Binning+LS (P={g2})", partial(_rf_binning, grids=g2, n_jobs=n_jobs),
               "laplacian", lambda t, g=g2: f"P={g}", cv_select=5,
               features=partial(_binning_template, grids=g2, n_jobs=n_jobs)),
        Method("sk_rbf_sampler", "sklearn RBFSampler+Ridge", _sk_rbf_sampler, "rbf", lambda t: f"D={t.D}",
               dense_width=lambda t: t.D),
        Method("rf_fourier_paired", "randfeat Fourier+LS, same rows as RBFSampler", fourier, "rbf",
               lambda t: f"D={t.D}", pair_with="sk_rbf_sampler", params_of="rf_fourier"),
        # Nystroem's fit (a D×D eigendecomposition per grid point) made its own
        # selection the longest step of the full run: it takes the gamma and
        # alpha chosen for RBFSampler+Ridge, the same Gaussian kernel ridge model.
        Method("sk_nystroem", "sklearn Nystroem+Ridge", _sk_nystroem, "rbf", lambda t: f"D={t.D}",
               dense_width=lambda t: t.D, params_of="sk_rbf_sampler"),
        Method("exact", "exact kernel (SVC / KernelRidge)", _exact, "rbf",
               lambda t: "SVC" if t.kind == "classification" else "KernelRidge", exact=True, grid_c=True),
        Method("linear", "linear (Ridge on raw X)", _linear, None, lambda t: "—"),
    ]
