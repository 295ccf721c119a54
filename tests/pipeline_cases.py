"""Fixed-seed outputs of the fit pipelines, saved before the pipeline was restructured (issue 23).

``compute_outputs()`` recomputes, with the randfeat under test, what the
estimators give through every route of the fit pipeline that
``baseline_cases.py`` does not cover: Dask fits (synchronous scheduler),
``partial_fit`` sequences, ``RidgeCV`` / ``RidgeClassifierCV`` in every
selection mode, and the messages of the errors a user meets on the way.
``tests/data/pipeline_outputs.npz`` holds the values computed by randfeat
0.1.0 at d21223b; ``tests/trust/test_outputs_match_saved_fixtures.py`` holds the two against each
other.

``pickle_cases()`` are fitted estimators; ``tests/data/pickles-0.1.0.pkl``
holds them as pickled by d21223b and ``pickle_outputs.npz`` what they
predicted then: pickles written by that version must load and predict the
same.

Run ``python tests/pipeline_cases.py`` to rewrite both fixtures; do that only
for a change that is *meant* to alter outputs, and say so in its commit.

Refreshed since: for issue 25, the k-fold cases' ``best_score``/``gamma_scores_``
(scikit-learn's meaning: the mean of the folds' scores, R² or accuracy by
default), the messages of ``partial_fit`` where it does not work (now absent,
scikit-learn's ``available_if``) and of a negative alpha (scikit-learn's
check) — every chosen alpha, gamma and model is the same as at d21223b.
"""

import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

DATA = Path(__file__).resolve().parent / "data"
FIXTURE = DATA / "pipeline_outputs.npz"
PICKLES = DATA / "pickles-0.1.0.pkl"
PICKLE_OUTPUTS = DATA / "pickle_outputs.npz"


def _data(n=240, d=5, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, d)) + 1.0).astype(dtype)
    y = np.sin(X.astype(np.float64)).sum(axis=1) + 0.1 * rng.standard_normal(n)
    labels = (np.abs(X[:, 0] * X[:, 1]) * 2).astype(int) % 3
    w = rng.uniform(0.2, 2.0, n)
    return X, y, labels, w


def _model(est, X, *, std=False, decision=False):
    out = {"coef": np.asarray(est.coef_), "intercept": np.asarray(est.intercept_, dtype=np.float64)}
    if decision:
        out["decision"] = np.asarray(est.decision_function(X))
    else:
        out["pred"] = np.asarray(est.predict(X))
    if std:
        out["std"] = np.asarray(est.predict(X, return_std=True)[1])
    return out


# ------------------------------------------------------------------ Dask
def dask_cases():
    """Yield (name, callable returning a dict of arrays): fits and transforms of Dask arrays."""
    import dask
    import dask.array as da

    from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier

    X, y, labels, w = _data()
    chunks = ((100, 1, 90, 49), (5,))
    Xd = da.from_array(X, chunks=chunks)
    yd, ld, wd = (da.from_array(a, chunks=(chunks[0],)) for a in (y, labels, w))
    Y2 = np.stack([y, np.cos(y)], axis=1)
    Y2d = da.from_array(Y2, chunks=(chunks[0], (2,)))
    X32d = Xd.astype(np.float32)

    def sync(fn):
        def run():
            with dask.config.set(scheduler="synchronous"):
                return fn()
        return run

    def rff_scale():
        m = RandomFourierFeatures(40, gamma="scale", random_state=1).fit(Xd)
        return {"gamma": np.array(m.gamma_), "Z": m.transform(Xd).compute()}

    def rff_float32():
        m = RandomFourierFeatures(41, gamma=0.3, random_state=2).fit(X32d)
        return {"Z": m.transform(X32d).compute()}

    def binning_scale():
        m = RandomBinningFeatures(7, gamma="scale", random_state=3).fit(Xd)
        Z = m.transform(Xd).compute()
        return {"gamma": np.array(m.gamma_), "hashes": m.bin_hashes_.astype(np.float64),
                "indices": Z.indices.astype(np.int64), "indptr": Z.indptr.astype(np.int64)}

    def ridge_rff(weighted, Yd):
        def run():
            est = Ridge(alpha=0.3, features=RandomFourierFeatures(30, gamma=0.4, random_state=4), chunk_size=37)
            est.fit(Xd, Yd, sample_weight=wd if weighted else None)
            mean, std = est.predict(X, return_std=True)
            return {"coef": est.coef_, "intercept": np.asarray(est.intercept_), "pred": mean, "std": std,
                    "noise": np.asarray(est.noise_variance_), "lazy": est.predict(Xd).compute()}
        return run

    def ridge_plain():
        est = Ridge(alpha=0.1).fit(Xd, yd)
        return _model(est, X, std=True)

    def ridge_binning_cg(weighted, fit_intercept):
        def run():
            est = Ridge(alpha=0.2, tol=1e-12, max_iter=3000, fit_intercept=fit_intercept,
                        features=RandomBinningFeatures(6, gamma=0.8, random_state=5))
            est.fit(Xd, yd, sample_weight=wd if weighted else None)
            out = _model(est, X)
            out["n_iter"] = np.asarray(est.n_iter_)
            return out
        return run

    def ridge_sparse_blocks():
        Xs = da.from_array(X, chunks=chunks).map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 5)))
        est = Ridge(alpha=0.5, tol=1e-12).fit(Xs, yd)
        return _model(est, X)

    def classifier_rff():
        est = RidgeClassifier(alpha=0.5, features=RandomFourierFeatures(30, gamma=0.4, random_state=6)).fit(Xd, ld)
        return _model(est, X, decision=True)

    def classifier_binning():
        est = RidgeClassifier(alpha=0.5, tol=1e-12, features=RandomBinningFeatures(5, gamma=0.6, random_state=7))
        est.fit(Xd, (ld > 0).astype(int))
        return _model(est, X, decision=True)

    yield "dask/rff-scale", sync(rff_scale)
    yield "dask/rff-float32", sync(rff_float32)
    yield "dask/binning-scale", sync(binning_scale)
    yield "dask/ridge-rff", sync(ridge_rff(False, yd))
    yield "dask/ridge-rff-weighted-2", sync(ridge_rff(True, Y2d))
    yield "dask/ridge-plain", sync(ridge_plain)
    yield "dask/ridge-binning-cg", sync(ridge_binning_cg(False, True))
    yield "dask/ridge-binning-cg-weighted-noicpt", sync(ridge_binning_cg(True, False))
    yield "dask/ridge-sparse-blocks", sync(ridge_sparse_blocks)
    yield "dask/classifier-rff", sync(classifier_rff)
    yield "dask/classifier-binning", sync(classifier_binning)


# ----------------------------------------------------------- partial_fit
def partial_fit_cases():
    """Yield (name, callable): models after sequences of ``partial_fit`` blocks."""
    from randfeat import RandomFourierFeatures, Ridge, RidgeClassifier

    X, y, labels, w = _data()

    def ridge(features, weighted, float32=False):
        def run():
            Xa = X.astype(np.float32) if float32 else X
            est = Ridge(alpha=0.3, features=features)
            for s in range(0, len(Xa), 70):
                est.partial_fit(Xa[s:s + 70], y[s:s + 70], sample_weight=w[s:s + 70] if weighted else None)
                if s == 140:
                    est.set_params(alpha=0.05)  # alpha may change between blocks
            return _model(est, X, std=True)
        return run

    def classifier():
        est = RidgeClassifier(alpha=0.5, features=RandomFourierFeatures(25, gamma=0.5, random_state=8))
        for s in range(0, len(X), 80):
            est.partial_fit(X[s:s + 80], labels[s:s + 80], classes=[0, 1, 2])
        return _model(est, X, decision=True)

    def after_fit():
        est = Ridge(alpha=0.3).fit(X[:100], y[:100])
        est.partial_fit(X[100:], y[100:])
        return _model(est, X)

    yield "partial/ridge-plain", ridge(None, False)
    yield "partial/ridge-rff-weighted", ridge(RandomFourierFeatures(30, gamma=0.4, random_state=9), True)
    yield "partial/ridge-rff-float32", ridge(RandomFourierFeatures(31, gamma=0.4, random_state=9), False, True)
    yield "partial/classifier", classifier
    yield "partial/after-fit", after_fit


# ------------------------------------------------------------------ RidgeCV
def ridge_cv_cases():
    """Yield (name, callable): RidgeCV / RidgeClassifierCV in every selection mode."""
    from sklearn.model_selection import KFold

    from randfeat import RandomBinningFeatures, RandomFourierFeatures, RidgeClassifierCV, RidgeCV

    X, y, labels, w = _data()
    Y2 = np.stack([y, np.cos(y)], axis=1)
    alphas = np.logspace(-3, 2, 6)

    def cv_out(est, Xp, classifier=False):
        out = _model(est, Xp, decision=classifier)
        out["alpha"] = np.asarray(est.alpha_, dtype=np.float64)
        out["best_score"] = np.asarray(est.best_score_, dtype=np.float64)
        for name in ("gamma_", "gammas_", "gamma_scores_", "cv_results_"):
            if hasattr(est, name):
                out[name] = np.asarray(getattr(est, name), dtype=np.float64)
        return out

    def reg(Yt=y, weighted=False, Xa=X, **params):
        def run():
            est = RidgeCV(alphas=alphas, **params).fit(Xa, Yt[:len(Xa)], sample_weight=w[:len(Xa)] if weighted else None)
            return cv_out(est, Xa)
        return run

    def clf(**params):
        def run():
            return cv_out(RidgeClassifierCV(alphas=alphas, **params).fit(X, labels), X, classifier=True)
        return run

    rff = RandomFourierFeatures(60, gamma=0.3, random_state=10)
    wide = RandomFourierFeatures(300, gamma=0.3, random_state=11)
    binning = RandomBinningFeatures(5, gamma=0.7, random_state=12)
    yield "cv/loo-plain", reg()
    yield "cv/loo-plain-weighted-store", reg(weighted=True, store_cv_results=True)
    yield "cv/loo-rff", reg(features=rff, chunk_size=50)
    yield "cv/loo-rff-2-per-target", reg(Yt=Y2, features=rff, alpha_per_target=True)
    yield "cv/loo-kernel-path", reg(Xa=X[:80], features=wide)
    yield "cv/gcv-rff", reg(features=rff, cv="gcv", store_cv_results=True)
    yield "cv/loo-r2", reg(features=rff, scoring="r2")
    yield "cv/kfold3-rff", reg(features=rff, cv=3)
    yield "cv/kfold-splitter-weighted", reg(features=rff, cv=KFold(4, shuffle=True, random_state=0), weighted=True)
    yield "cv/kfold-binning", reg(features=binning, cv=3)
    yield "cv/loo-binning-narrow", reg(features=binning)
    yield "cv/gammas-list", reg(features=rff, gammas=[0.05, 0.3, 1.0], store_cv_results=True)
    yield "cv/gammas-auto-gcv", reg(features=rff, gammas="auto", cv="gcv")
    yield "cv/gammas-kfold", reg(features=rff, gammas=[0.1, 1.0], cv=3)
    yield "cv/gammas-binning", reg(features=binning, gammas=[0.3, 1.0])
    yield "cv/clf-loo", clf(features=rff)
    yield "cv/clf-accuracy", clf(features=rff, scoring="accuracy", store_cv_results=True)
    yield "cv/clf-kfold", clf(features=rff, cv=3)
    yield "cv/clf-gammas", clf(features=rff, gammas=[0.1, 0.5])


# ----------------------------------------------------------------- messages
def message_cases():
    """Yield (name, callable that must raise): the error messages a user reads."""
    import dask.array as da

    from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier, RidgeCV

    X, y, labels, w = _data(n=60)
    Xd = da.from_array(X, chunks=(20, 5))
    bad = X.copy()
    bad[3, 2] = np.nan

    yield "msg/nan", lambda: Ridge().fit(bad, y)
    yield "msg/features-type", lambda: Ridge(features="rff").fit(X, y)
    yield "msg/one-class", lambda: RidgeClassifier().fit(X, np.zeros(60))
    yield "msg/partial-binning", lambda: Ridge(features=RandomBinningFeatures(3)).partial_fit(X, y)
    yield "msg/partial-cg", lambda: Ridge(solver="cg").partial_fit(X, y)
    yield "msg/partial-targets", lambda: Ridge().partial_fit(X, y).partial_fit(X, np.stack([y, y], 1))
    yield "msg/partial-width", lambda: Ridge().partial_fit(X, y).partial_fit(X[:, :3], y)
    yield "msg/partial-classes", lambda: RidgeClassifier().partial_fit(X, labels)
    yield "msg/cv-dask", lambda: RidgeCV().fit(Xd, y)
    yield "msg/cv-gammas-no-map", lambda: RidgeCV(gammas=[1.0]).fit(X, y)
    yield "msg/cv-gcv-scoring", lambda: RidgeCV(cv="gcv", scoring="r2").fit(X, y)
    yield "msg/cv-alphas", lambda: RidgeCV(alphas=[1.0, -1.0]).fit(X, y)
    yield "msg/rank", lambda: Ridge(solver="cg", preconditioner="nystrom", preconditioner_rank=9).fit(X, y)
    yield "msg/return-std-cg", lambda: Ridge(solver="cg").fit(X, y).predict(X, return_std=True)
    yield "msg/dask-y-rows", lambda: Ridge().fit(Xd, y[:50])
    yield "msg/dask-y-chunks", lambda: Ridge().fit(Xd, da.from_array(y, chunks=30))
    yield "msg/dask-unknown-chunks", lambda: Ridge().fit(Xd[Xd[:, 0] > 0], y)
    yield "msg/dask-classifier-2d", lambda: RidgeClassifier().fit(Xd, np.stack([labels, labels], 1))
    yield "msg/dask-width", lambda: Ridge().fit(X, y).predict(da.from_array(X[:, :3], chunks=(20, 3)))
    yield "msg/overflow-cg", lambda: Ridge(solver="cg").fit(X * 1e160, y * 1e160)
    yield "msg/rff-gamma", lambda: RandomFourierFeatures(10, gamma=1e308).fit(X)
    yield "msg/binning-range", lambda: RandomBinningFeatures(3, gamma=1.0).fit(X * 1e300)


def compute_outputs():
    """Return {key: array}: 'case:field' for values, 'case:message' (a 0-d str array) for errors."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, run in (*dask_cases(), *partial_fit_cases(), *ridge_cv_cases()):
            for field, value in run().items():
                out[f"{name}:{field}"] = np.asarray(value)
        for name, run in message_cases():
            try:
                run()
            except Exception as exc:  # noqa: BLE001 - the message is what is recorded
                out[f"{name}:message"] = np.array(f"{type(exc).__name__}: {exc}")
            else:
                out[f"{name}:message"] = np.array("no error")
    return out


# ------------------------------------------------------------------ pickles
def pickle_cases():
    """Return {name: fitted estimator} and the inputs their outputs are taken on."""
    from randfeat import (RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier,
                          RidgeClassifierCV, RidgeCV)

    X, y, labels, w = _data()
    partial = Ridge(alpha=0.2, features=RandomFourierFeatures(20, gamma=0.3, random_state=1))
    partial.partial_fit(X[:120], y[:120]).partial_fit(X[120:], y[120:])
    fitted = {
        "rff-cossin-odd": RandomFourierFeatures(21, gamma=0.3, random_state=1).fit(X),
        "rff-cos-laplacian": RandomFourierFeatures(20, kernel="laplacian", feature_map="cos", gamma=0.3,
                                                   random_state=2).fit(X),
        "binning": RandomBinningFeatures(6, gamma=0.7, random_state=3).fit(X),
        "ridge-rff": Ridge(alpha=0.2, features=RandomFourierFeatures(30, gamma=0.3, random_state=4)).fit(X, y),
        "ridge-binning-cg": Ridge(alpha=0.2, tol=1e-10,
                                  features=RandomBinningFeatures(5, gamma=0.7, random_state=5)).fit(X, y),
        "ridge-partial": partial,
        "classifier": RidgeClassifier(features=RandomFourierFeatures(30, gamma=0.3, random_state=6)).fit(X, labels),
        "ridge-cv": RidgeCV(features=RandomFourierFeatures(30, random_state=7), gammas=[0.1, 0.5]).fit(X, y),
        "classifier-cv": RidgeClassifierCV(features=RandomFourierFeatures(30, gamma=0.3, random_state=8)).fit(X, labels),
    }
    return fitted, X


def pickle_outputs(fitted, X):
    """Return {name:method: array} for the fitted estimators of ``pickle_cases``."""
    out = {}
    for name, est in fitted.items():
        if hasattr(est, "transform"):
            Z = est.transform(X)
            out[f"{name}:transform"] = Z.toarray() if sp.issparse(Z) else Z
        if hasattr(est, "decision_function"):
            out[f"{name}:decision_function"] = est.decision_function(X)
            out[f"{name}:predict"] = est.predict(X)
        elif hasattr(est, "predict"):
            out[f"{name}:predict"] = est.predict(X)
            if getattr(est, "_solution", None) is not None:
                out[f"{name}:std"] = est.predict(X, return_std=True)[1]
    # A model that goes on learning after being unpickled.
    if "ridge-partial" in fitted:
        more = pickle.loads(pickle.dumps(fitted["ridge-partial"]))
        out["ridge-partial:after-more"] = more.partial_fit(X[:50], np.arange(50.0)).predict(X)
    return out


if __name__ == "__main__":
    outputs = compute_outputs()
    DATA.mkdir(exist_ok=True)
    np.savez_compressed(FIXTURE, **outputs)
    fitted, X = pickle_cases()
    with open(PICKLES, "wb") as f:
        pickle.dump(fitted, f, protocol=4)
    np.savez_compressed(PICKLE_OUTPUTS, **pickle_outputs(fitted, X))
    print(f"wrote {len(outputs)} arrays to {FIXTURE}, {len(fitted)} estimators to {PICKLES}", file=sys.stderr)
