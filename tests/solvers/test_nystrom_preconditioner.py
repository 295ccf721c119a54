"""Randomized Nyström preconditioner (``_solvers/nystrom_preconditioner.py``), its use by CG, and ``cg_ridge_path``."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError

from randfeat import RandomBinningFeatures, Ridge, RidgeClassifier
from randfeat._solvers import nystrom_preconditioner as _nystrom
from randfeat._solvers import precond as _precond
from randfeat._solvers.cg import block_cg
from randfeat._solvers.cg_path import cg_ridge, cg_ridge_path
from randfeat._linalg.products import make_products
from randfeat._solvers.normal import NormalOperator
from randfeat._solvers.precond import jacobi_block_preconditioner, make_preconditioner


def binning_features(n=600, P=8, gamma=1.0, d=3, seed=0):
    """Binning features of clustered data: crowded bins, a wide spectrum at small alpha."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(6, d))
    X = centres[rng.integers(0, 6, n)] + 0.3 * rng.normal(size=(n, d))
    Z = RandomBinningFeatures(P, gamma=gamma, random_state=seed).fit_transform(X).tocsr()
    y = X[:, 0] - np.sin(2 * X[:, 1]) + 0.1 * rng.normal(size=n)
    return Z, y


def dense_normal(Z, w, fit_intercept):
    """A = Z_cᵀ W Z_c in float64 by NumPy."""
    Z = Z.toarray() if sp.issparse(Z) else np.asarray(Z)
    Z = Z.astype(np.float64)
    w1 = np.ones(Z.shape[0]) if w is None else w
    if fit_intercept:
        Z = Z - (w1 @ Z) / w1.sum()
    return Z.T @ (w1[:, None] * Z)


def direct_ridge(Z, Y, w, alpha, fit_intercept):
    """Coefficients and intercepts by a dense solve of the normal equations."""
    Zd = (Z.toarray() if sp.issparse(Z) else np.asarray(Z)).astype(np.float64)
    w1 = np.ones(Zd.shape[0]) if w is None else w
    if fit_intercept:
        mu, ybar = (w1 @ Zd) / w1.sum(), (w1 @ Y) / w1.sum()
    else:
        mu, ybar = np.zeros(Zd.shape[1]), np.zeros(Y.shape[1])
    Zc, Yc = Zd - mu, Y - ybar
    A = Zc.T @ (w1[:, None] * Zc) + alpha * np.eye(Zd.shape[1])
    coef = np.linalg.solve(A, Zc.T @ (w1[:, None] * Yc))
    return coef.T, ybar - mu @ coef


def dense_inverse(correction, D):
    """M⁻¹ as a dense matrix, column by column from ``apply``."""
    eye = np.eye(D)
    out = np.zeros((D, D))
    correction.apply(eye, out)
    return out


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_factors_match_numpy_nystrom(fit_intercept):
    # Â = Y (ΩᵀY)⁺ Yᵀ with the same Gaussian Ω, by NumPy.
    Z, _ = binning_features(n=300, P=5)
    D = Z.shape[1]
    rank = 20
    normal = NormalOperator(make_products(Z, 1), None, fit_intercept)
    factors = _nystrom.build_nystrom(normal, 1e-3, rank=rank)
    A = dense_normal(Z, None, fit_intercept)
    omega = np.random.default_rng(_nystrom.SKETCH_SEED).standard_normal((rank, D)).T
    Y = A @ omega
    approx_ref = Y @ np.linalg.pinv(omega.T @ Y) @ Y.T
    approx = (factors.U * factors.eigenvalues) @ factors.U.T
    scale = np.linalg.norm(A, 2)
    assert np.linalg.norm(approx - approx_ref, 2) <= 1e-8 * scale
    np.testing.assert_allclose(factors.U.T @ factors.U, np.eye(factors.rank), atol=1e-8)
    assert np.all(np.diff(factors.eigenvalues) <= 0)
    # A Nyström approximation never exceeds A: A − Â is positive semidefinite.
    assert np.linalg.eigvalsh(A - approx).min() >= -1e-8 * scale


def test_full_rank_sketch_makes_cg_exact():
    # ℓ = D: Â = A, so the preconditioned matrix is (λ_D + α)·I.
    Z, _ = binning_features(n=200, P=3)
    D = Z.shape[1]
    alpha = 1e-2
    normal = NormalOperator(make_products(Z, 1), None, True)
    factors = _nystrom.build_nystrom(normal, alpha, rank=D)
    Minv = dense_inverse(factors.correction(alpha), D)
    A = dense_normal(Z, None, True) + alpha * np.eye(D)
    ev = np.linalg.eigvals(Minv @ A).real
    assert ev.max() / ev.min() < 1 + 1e-6


@pytest.mark.parametrize("alpha", [1.0, 1e-2, 1e-4])
def test_preconditioner_is_spd_and_bounds_the_spectrum(alpha):
    Z, _ = binning_features(n=400, P=6)
    D = Z.shape[1]
    normal = NormalOperator(make_products(Z, 1), None, True)
    factors = _nystrom.build_nystrom(normal, alpha, rank=40)
    Minv = dense_inverse(factors.correction(alpha), D)
    assert np.abs(Minv - Minv.T).max() <= 1e-12
    ev_m = np.linalg.eigvalsh(0.5 * (Minv + Minv.T))
    assert ev_m.min() > 0 and ev_m.max() <= 1 + 1e-12
    # FTU (2023), Prop. 5.3: κ(P^{-1/2}(A+αI)P^{-1/2}) <= (λ_ℓ + α + ‖A − Â‖) / α.
    A = dense_normal(Z, None, True) + alpha * np.eye(D)
    ev = np.sort(np.linalg.eigvals(Minv @ A).real)
    assert ev.min() > 0
    lam_l = factors.eigenvalues[-1]
    E = A - alpha * np.eye(D) - (factors.U * factors.eigenvalues) @ factors.U.T
    upper = (lam_l + alpha + np.linalg.norm(E, 2)) / alpha
    assert ev.max() / ev.min() <= upper * (1 + 1e-8)


def test_rank_grows_until_below_alpha_multiple():
    Z, _ = binning_features(n=500, P=8)
    normal = NormalOperator(make_products(Z, 1), None, True)
    big = _nystrom.build_nystrom(normal, 1.0)
    small = _nystrom.build_nystrom(normal, 1e-4)
    assert big.sketch_size <= small.sketch_size
    for factors, alpha in ((big, 1.0), (small, 1e-4)):
        at_cap = factors.sketch_size >= Z.shape[1]
        assert at_cap or factors.eigenvalues[-1] <= _nystrom.RANK_ALPHA_RATIO * alpha


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("kind", ["csr", "dense", "onehot"])
def test_nystrom_cg_matches_direct_solve(dtype, fit_intercept, weighted, K, kind):
    Z, y = binning_features(n=300, P=4)
    rng = np.random.default_rng(1)
    if kind == "csr":
        Z = Z.multiply(rng.uniform(0.5, 1.5, size=Z.shape[1])).tocsr()  # not one-hot any more
    elif kind == "dense":
        Z = Z.toarray()
    Z = Z.astype(dtype)
    Y = np.column_stack([y + k * rng.normal(size=len(y)) for k in range(K)])
    w = rng.uniform(0.5, 2.0, size=len(y)) if weighted else None
    alpha = 1e-3
    tol = 1e-5 if dtype == np.float32 else 1e-10
    res = cg_ridge(make_products(Z, 1), Y, w, alpha, fit_intercept=fit_intercept, tol=tol, max_iter=2000,
                   preconditioner="nystrom")
    assert res.nystrom_rank is not None and "Nyström" in res.preconditioner
    coef_ref, icpt_ref = direct_ridge(Z, Y, w, alpha, fit_intercept)
    if dtype == np.float64:
        assert np.all(res.residual <= tol)
        rtol = 1e-6
    else:
        rtol = 5e-2
    scale = np.abs(coef_ref).max()
    assert np.abs(res.coef - coef_ref).max() <= rtol * scale
    assert np.abs(res.intercept - icpt_ref).max() <= rtol * max(1.0, scale)


def test_iterations_fall_against_jacobi_at_small_alpha():
    Z, y = binning_features(n=800, P=10, gamma=2.0)
    ops = make_products(Z, 1)
    Y = y[:, None]
    for alpha in (1e-2, 1e-4):
        jac = cg_ridge(ops, Y, None, alpha, fit_intercept=True, tol=1e-8, max_iter=20000, preconditioner="jacobi")
        nys = cg_ridge(ops, Y, None, alpha, fit_intercept=True, tol=1e-8, max_iter=20000, preconditioner="nystrom")
        assert nys.n_iter[0] * 2 <= jac.n_iter[0], (alpha, nys.n_iter, jac.n_iter)


def test_auto_means_jacobi_by_default(monkeypatch):
    # "auto" never builds Nyström while AUTO_PICKS_NYSTROM is off (its build
    # costs more than the iterations it saves; see _precond).
    Z, y = binning_features(n=500, P=8)
    ops = make_products(Z, 1)
    monkeypatch.setattr(_precond, "NYSTROM_MIN_FEATURES", 100)
    assert not _precond.AUTO_PICKS_NYSTROM
    assert cg_ridge(ops, y[:, None], None, 1e-4, fit_intercept=True, tol=1e-6, max_iter=None).nystrom_rank is None


def test_auto_picks_nystrom_only_at_small_alpha(monkeypatch):
    monkeypatch.setattr(_precond, "AUTO_PICKS_NYSTROM", True)
    Z, y = binning_features(n=500, P=8)
    ops = make_products(Z, 1)
    # Below NYSTROM_MIN_FEATURES columns: Jacobi.
    assert Z.shape[1] < _precond.NYSTROM_MIN_FEATURES
    assert cg_ridge(ops, y[:, None], None, 1e-4, fit_intercept=True, tol=1e-6, max_iter=None).nystrom_rank is None
    monkeypatch.setattr(_precond, "NYSTROM_MIN_FEATURES", 100)
    assert cg_ridge(ops, y[:, None], None, 1e-4, fit_intercept=True, tol=1e-6, max_iter=None).nystrom_rank
    assert cg_ridge(ops, y[:, None], None, 100.0, fit_intercept=True, tol=1e-6, max_iter=None).nystrom_rank is None
    # Dense Z: never by default.
    dense = make_products(Z.toarray(), 1)
    assert cg_ridge(dense, y[:, None], None, 1e-4, fit_intercept=True, tol=1e-6, max_iter=None).nystrom_rank is None


def test_ridge_bit_identical_for_any_n_jobs_and_reports_preconditioner(capsys, monkeypatch):
    monkeypatch.setattr(_precond, "AUTO_PICKS_NYSTROM", True)
    monkeypatch.setattr(_precond, "NYSTROM_MIN_FEATURES", 100)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1500, 3))
    y = np.sin(X[:, 0]) + X[:, 1]
    fits = [Ridge(alpha=1e-4, features=RandomBinningFeatures(5, gamma=0.5, random_state=0), n_jobs=j,
                  max_iter=5000, verbose=int(j == 2)).fit(X, y) for j in (1, 2)]
    assert "Nyström" in fits[0].preconditioner_
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    np.testing.assert_array_equal(fits[0].intercept_, fits[1].intercept_)
    np.testing.assert_array_equal(fits[0].n_iter_, fits[1].n_iter_)
    err = capsys.readouterr().err
    assert "Nyström preconditioner: rank" in err and "built in" in err


def test_path_matches_separate_solves_and_builds_once(monkeypatch):
    Z, y = binning_features(n=500, P=8)
    rng = np.random.default_rng(2)
    Y = np.column_stack([y, y + rng.normal(size=len(y))])
    ops = make_products(Z, 1)
    calls = []
    build = _nystrom.build_nystrom

    def counting_build(*args, **kwargs):
        calls.append(args[1])
        return build(*args, **kwargs)

    monkeypatch.setattr("randfeat._solvers.precond.build_nystrom", counting_build)
    alphas = [1e-2, 1.0, 1e-4]
    path = cg_ridge_path(ops, Y, None, alphas, fit_intercept=True, tol=1e-10, max_iter=20000,
                         preconditioner="nystrom")
    assert calls == [1e-4]
    for alpha, res in zip(alphas, path):
        coef_ref, icpt_ref = direct_ridge(Z, Y, None, alpha, True)
        assert np.all(res.residual <= 1e-10)
        assert np.abs(res.coef - coef_ref).max() <= 1e-6 * np.abs(coef_ref).max()
        np.testing.assert_allclose(res.intercept, icpt_ref, rtol=1e-6, atol=1e-9)


def test_reused_factors_give_the_same_result_as_a_fresh_build():
    Z, y = binning_features(n=400, P=6)
    normal = NormalOperator(make_products(Z, 1), None, True)
    B, _ = normal.rhs(y[:, None])
    _, factors = make_preconditioner(normal, 1e-4, "nystrom")
    reused, _ = make_preconditioner(normal, 1e-2, factors=factors)
    _, fresh_factors = make_preconditioner(normal, 1e-4, "nystrom")
    fresh, _ = make_preconditioner(normal, 1e-2, factors=fresh_factors)
    X1, it1, _ = block_cg(normal, B, 1e-2, reused, tol=1e-10, max_iter=5000)
    X2, it2, _ = block_cg(normal, B, 1e-2, fresh, tol=1e-10, max_iter=5000)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(it1, it2)


def test_jacobi_path_for_zero_alpha_and_default_unchanged():
    # alpha = 0 falls back to Jacobi; jacobi kind equals today's preconditioner.
    Z, y = binning_features(n=300, P=4)
    normal = NormalOperator(make_products(Z, 1), None, True)
    M, factors = make_preconditioner(normal, 0.0, "nystrom")
    assert factors is None
    M2, _ = make_preconditioner(normal, 0.5, "jacobi")
    ref = jacobi_block_preconditioner(normal, 0.5)
    np.testing.assert_array_equal(M2.inv_diag, ref.inv_diag)


@pytest.mark.parametrize("rank", [-1, 0, 2.5, "10", True])
def test_bad_rank(rank):
    with pytest.raises(InvalidParameterError, match="rank"):
        _nystrom.check_rank(rank, 100, _nystrom.DEFAULT_MEMORY_BUDGET)


def test_rank_larger_than_width():
    Z, y = binning_features(n=100, P=2)
    with pytest.raises(InvalidParameterError, match="n_features"):
        cg_ridge(make_products(Z, 1), y[:, None], None, 1e-3, fit_intercept=True, tol=1e-6, max_iter=None,
                 preconditioner="nystrom", nystrom_rank=Z.shape[1] + 1)


def test_memory_budget_too_small_says_so_before_allocating(monkeypatch):
    Z, y = binning_features(n=100, P=2)

    def no_sketch(*args, **kwargs):
        raise AssertionError("sketched before checking the budget")

    monkeypatch.setattr(_nystrom, "_sketch", no_sketch)
    with pytest.raises(MemoryError, match="memory budget"):
        cg_ridge(make_products(Z, 1), y[:, None], None, 1e-3, fit_intercept=True, tol=1e-6, max_iter=None,
                 preconditioner="nystrom", nystrom_rank=10, memory_budget=1000)


# ------------------------------------------------------- estimator parameters
@pytest.mark.parametrize("Est", [Ridge, RidgeClassifier])
def test_estimator_nystrom_parameters_match_the_solver(Est):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(800, 3))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    fm = RandomBinningFeatures(6, gamma=0.7, random_state=0)
    fits = [Est(alpha=1e-3, features=fm, preconditioner="nystrom", preconditioner_rank=40, n_jobs=j,
                tol=1e-10, max_iter=5000).fit(X, y) for j in (1, 2)]
    assert fits[0].preconditioner_.startswith("randomized Nyström, rank 40")
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    np.testing.assert_array_equal(fits[0].n_iter_, fits[1].n_iter_)
    assert np.all(fits[0].relative_residual_ <= 1e-10)
    jacobi = Est(alpha=1e-3, features=fm, preconditioner="jacobi", tol=1e-10, max_iter=5000).fit(X, y)
    assert "Jacobi" in jacobi.preconditioner_
    np.testing.assert_allclose(fits[0].coef_, jacobi.coef_, rtol=1e-4, atol=1e-4 * np.abs(jacobi.coef_).max())
    assert np.max(fits[0].n_iter_) < np.max(jacobi.n_iter_)


@pytest.mark.parametrize("rank", [-1, 0, 2.5, "10"])
def test_estimator_bad_rank_type(rank):
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(InvalidParameterError, match="preconditioner_rank"):
        Ridge(features=RandomBinningFeatures(3, random_state=0), preconditioner_rank=rank).fit(X, X[:, 0])


def test_estimator_rank_larger_than_width_and_bad_kind():
    X = np.random.default_rng(0).normal(size=(50, 2))
    est = Ridge(alpha=1e-2, features=RandomBinningFeatures(3, random_state=0), solver="cg",
                preconditioner="nystrom", preconditioner_rank=10**6)
    with pytest.raises(InvalidParameterError, match="preconditioner_rank.*at most the number of feature columns"):
        est.fit(X, X[:, 0])
    with pytest.raises(InvalidParameterError, match="preconditioner"):
        Ridge(preconditioner="ilu").fit(X, X[:, 0])
    with pytest.raises(InvalidParameterError, match="preconditioner_memory"):
        Ridge(preconditioner_memory=0).fit(X, X[:, 0])


def test_estimator_memory_budget_too_small_says_so(monkeypatch):
    def no_sketch(*args, **kwargs):
        raise AssertionError("sketched before checking the budget")

    monkeypatch.setattr(_nystrom, "_sketch", no_sketch)
    X = np.random.default_rng(0).normal(size=(200, 2))
    est = Ridge(alpha=1e-2, features=RandomBinningFeatures(4, random_state=0), solver="cg",
                preconditioner="nystrom", preconditioner_rank=20, preconditioner_memory=1000)
    with pytest.raises(MemoryError, match="memory budget"):
        est.fit(X, X[:, 0])
