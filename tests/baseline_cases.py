"""Fixed-seed outputs of every feature map and solver, saved before the solver-layer rework.

``compute_outputs()`` recomputes them with the randfeat under test;
``tests/data/baseline_outputs.npz`` holds the values computed with randfeat as
it was before the rework (commit "tests: baseline outputs ...").
``tests/trust/test_outputs_match_saved_fixtures.py`` holds the two against each other: features
bit-identical, coefficients and predictions equal to rounding amplified by
the conditioning (every problem here has cond(ZᵀZ + αI) well below 1e6).

Run ``python tests/baseline_cases.py`` to rewrite the fixture; do that only
for a change that is *meant* to alter outputs, and say so in its commit.
"""

import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

FIXTURE = Path(__file__).resolve().parent / "data" / "baseline_outputs.npz"


def _data(dtype, sparse, n=60, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[X < 0.2] = 0.0  # about 42% nonzeros: a real CSR case, nonzero column means
    X = X.astype(dtype)
    return sp.csr_matrix(X) if sparse else X


def _targets(n, k, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, k)) + np.arange(1, k + 1)


def feature_cases():
    """Yield (name, callable returning the features as a dense array)."""
    from randfeat import RandomBinningFeatures, RandomFourierFeatures

    fourier = [
        ("rbf", "iid", 1.5), ("rbf", "orthogonal", 1.5), ("rbf", "qmc", 1.5),
        ("laplacian", "iid", 1.5), ("laplacian", "qmc", 1.5),
        ("cauchy", "iid", 1.5), ("matern", "iid", 0.5), ("matern", "orthogonal", 2.5),
        ("matern", "qmc", 1.5),
    ]
    for dtype in (np.float64, np.float32):
        dn = np.dtype(dtype).name
        for sparse in (False, True):
            fmt = "csr" if sparse else "dense"
            X = _data(dtype, sparse)
            for kernel, sampling, nu in fourier:
                for fmap in ("cossin", "cos"):
                    name = f"rff/{kernel}/{sampling}/nu{nu}/{fmap}/{dn}/{fmt}"

                    def make(X=X, kernel=kernel, sampling=sampling, nu=nu, fmap=fmap):
                        est = RandomFourierFeatures(
                            16, kernel=kernel, gamma=0.3, nu=nu, feature_map=fmap,
                            sampling=sampling, random_state=7,
                        )
                        return est.fit_transform(X)

                    yield name, make
            for P in (3, 8):
                name = f"binning/P{P}/{dn}/{fmt}"

                def make_bin(X=X, P=P, dtype=dtype, sparse=sparse):
                    est = RandomBinningFeatures(P, gamma=0.7, random_state=3).fit(X[:40])
                    # Rows 40: are partly unseen at fit (bins with no column).
                    seen = est.transform(X).toarray()
                    refit = RandomBinningFeatures(P, gamma=0.7, random_state=3).fit_transform(X).toarray()
                    return np.hstack([seen.ravel(), refit.ravel()])

                yield name, make_bin


def kernel_cases():
    """Yield (name, callable) for the exact kernel matrices."""
    from randfeat import kernel_matrix

    X = _data(np.float64, False, n=12)
    for kernel, nu in (("rbf", 1.5), ("laplacian", 1.5), ("cauchy", 1.5), ("matern", 0.5), ("matern", 2.5)):
        yield f"kernel/{kernel}/nu{nu}", (lambda kernel=kernel, nu=nu: kernel_matrix(X, X[:5], kernel=kernel, gamma=0.4, nu=nu))


def solver_cases():
    """Yield (name, callable returning a dict of arrays) for Ridge / RidgeClassifier fits."""
    from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier

    for dtype in (np.float64, np.float32):
        dn = np.dtype(dtype).name
        for sparse in (False, True):
            fmt = "csr" if sparse else "dense"
            X = _data(dtype, sparse)
            n = X.shape[0]
            w = np.random.default_rng(5).uniform(0.2, 2.0, n)
            for solver in ("cholesky", "cg"):
                for fit_intercept in (True, False):
                    for weighted in (False, True):
                        for k in (1, 3):
                            name = f"ridge/{solver}/{dn}/{fmt}/icpt{int(fit_intercept)}/w{int(weighted)}/K{k}"

                            def fit(X=X, solver=solver, fit_intercept=fit_intercept, weighted=weighted, k=k):
                                y = _targets(X.shape[0], k)
                                y = y[:, 0] if k == 1 else y
                                est = Ridge(alpha=0.5, solver=solver, fit_intercept=fit_intercept,
                                            tol=1e-13, max_iter=5000, chunk_size=17)
                                est.fit(X, y, sample_weight=w if weighted else None)
                                # Without an intercept, intercept_ is now the scalar 0.0 for
                                # any y (as scikit-learn); compare it per target as saved.
                                intercept = np.broadcast_to(est.intercept_, np.shape(est.coef_)[:-1])
                                out = {"coef": est.coef_, "intercept": intercept, "pred": est.predict(X)}
                                if solver == "cholesky":
                                    out["std"] = est.predict(X, return_std=True)[1]
                                    out["noise"] = np.asarray(est.noise_variance_)
                                return out

                            yield name, fit
            # features=: streaming Fourier (Cholesky, several chunks) and binning (CG).
            for solver in ("cholesky", "cg"):
                name = f"ridge-rff/{solver}/{dn}/{fmt}"

                def fit_rff(X=X, solver=solver):
                    y = _targets(X.shape[0], 2)
                    est = Ridge(alpha=0.2, solver=solver, tol=1e-13, max_iter=5000, chunk_size=13,
                                features=RandomFourierFeatures(24, gamma=0.3, random_state=2))
                    est.fit(X, y)
                    out = {"coef": est.coef_, "intercept": est.intercept_, "pred": est.predict(X)}
                    if solver == "cholesky":
                        out["std"] = est.predict(X, return_std=True)[1]
                    return out

                yield name, fit_rff
            name = f"classifier-binning/{dn}/{fmt}"

            def fit_clf(X=X):
                labels = np.random.default_rng(9).integers(0, 3, X.shape[0])
                est = RidgeClassifier(alpha=0.3, tol=1e-13, max_iter=5000,
                                      features=RandomBinningFeatures(6, gamma=0.5, random_state=4))
                est.fit(X, labels)
                return {"coef": est.coef_, "intercept": est.intercept_, "decision": est.decision_function(X)}

            yield name, fit_clf


def compute_outputs():
    """Return {key: array} for every case (solver dict entries become 'name:field')."""
    out = {}
    for name, make in (*feature_cases(), *kernel_cases()):
        Z = make()
        out[name] = Z.toarray() if sp.issparse(Z) else np.asarray(Z)
    for name, fit in solver_cases():
        for field, value in fit().items():
            out[f"{name}:{field}"] = np.asarray(value)
    return out


if __name__ == "__main__":
    outputs = compute_outputs()
    FIXTURE.parent.mkdir(exist_ok=True)
    np.savez_compressed(FIXTURE, **outputs)
    print(f"wrote {len(outputs)} arrays to {FIXTURE}", file=sys.stderr)
