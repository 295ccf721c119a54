"""Ridge in the dual (``randfeat._solvers.dual``): the collision kernel, the centred/weighted dual, the switch.

scikit-learn's Ridge / RidgeClassifier on the materialised features is the
oracle (its "cholesky" solver itself factors the kernel when there are
more features than rows); the collision kernel is checked against NumPy.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import Ridge as SkRidge
from sklearn.linear_model import RidgeClassifier as SkRidgeClassifier

from randfeat import RandomBinningFeatures, Ridge, RidgeClassifier
from randfeat._ext._collision_fast import collision_kernel
from randfeat._linalg.products import make_products, prepare_problem
from randfeat._solvers import dual


def _rel(a, b):
    return float(np.abs(np.asarray(a, dtype=np.float64) - b).max() / max(np.abs(b).max(), 1e-300))


def _reference_collisions(bins, scale):
    return scale * (bins[:, :, None] == bins[:, None, :]).sum(axis=0)


# ------------------------------------------------------------------ the kernel
@pytest.mark.parametrize("bin_dtype", [np.uint16, np.int32])
@pytest.mark.parametrize("out_dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(7, 1037), (1, 40), (3, 1), (50, 16)])
def test_collision_kernel_equals_numpy(bin_dtype, out_dtype, shape):
    G, N = shape
    rng = np.random.default_rng(G * 1000 + N)
    bins = rng.integers(0, 6, size=(G, N)).astype(bin_dtype)
    ref = _reference_collisions(bins, 1.0 / G)
    for n_threads in (1, 2):
        out = np.full((N, N), np.nan, dtype=out_dtype)
        collision_kernel(bins, out, 1.0 / G, n_threads)
        assert np.array_equal(out, ref.astype(out_dtype))  # integer counts: exact, any thread count


def test_collision_kernel_rejects_a_wrong_output_shape():
    with pytest.raises(ValueError, match="out must be 5 × 5"):
        collision_kernel(np.zeros((2, 5), dtype=np.uint16), np.empty((5, 4)), 0.5, 1)


def test_collision_kernel_empty():
    out = np.empty((0, 0))
    collision_kernel(np.zeros((3, 0), dtype=np.int32), out, 1.0, 2)


def test_kernel_matrix_is_z_zt_for_every_operator_kind():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (300, 4))
    Z = RandomBinningFeatures(12, gamma=3.0, random_state=0).fit_transform(X)
    ref = (Z @ Z.T).toarray()
    ops = make_products(Z, 2)
    assert ops.kind.name == "ONE_HOT_BLOCKS"
    assert np.abs(dual.kernel_matrix(ops, 2) - ref).max() < 1e-14
    C = sp.random(300, 500, density=0.02, random_state=1, format="csr")
    assert np.abs(dual.kernel_matrix(make_products(C, 2), 2) - (C @ C.T).toarray()).max() < 1e-13
    Dn = rng.standard_normal((50, 80))
    assert np.abs(dual.kernel_matrix(make_products(Dn, 2), 2) - Dn @ Dn.T).max() < 1e-12


def test_binning_kernel_counts_shared_bins():
    # Z Zᵀ of RandomBinningFeatures on its training rows: (1/G)·#grids where rows share a bin.
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (200, 3))
    m = RandomBinningFeatures(9, gamma=2.0, random_state=0).fit(X)
    Z = m.transform(X)
    G = 9
    cols = Z.indices.reshape(200, G).T
    ops = make_products(Z, 1)
    assert np.abs(dual.kernel_matrix(ops, 1) - _reference_collisions(cols, 1.0 / G)).max() < 1e-14


# ------------------------------------------------------ the dual against sklearn
def _binning_problem(n=150, n_targets=1, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 4)).astype(dtype)
    Y = np.column_stack([np.sin(6 * X[:, 0]) + k * X[:, 1] for k in range(n_targets)]) + 0.1 * rng.standard_normal(
        (n, n_targets))
    w = rng.uniform(0.2, 3.0, n)
    return X, (Y[:, 0] if n_targets == 1 else Y), w


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n_targets", [1, 3])
def test_dual_cholesky_equals_sklearn(fit_intercept, weighted, n_targets):
    X, y, w = _binning_problem(n_targets=n_targets)
    sw = w if weighted else None
    fmap = RandomBinningFeatures(15, gamma=4.0, random_state=0)
    est = Ridge(alpha=0.3, fit_intercept=fit_intercept, features=fmap).fit(X, y, sample_weight=sw)
    assert est.solver_ == "cholesky-dual"
    assert est.n_iter_ is None and est.relative_residual_ is None and est.preconditioner_ is None
    Z = est.features_.transform(X)
    assert Z.shape[1] >= 2 * Z.shape[0]
    sk = SkRidge(alpha=0.3, fit_intercept=fit_intercept, solver="cholesky").fit(Z.toarray(), y, sample_weight=sw)
    assert _rel(est.coef_, sk.coef_) < 1e-8
    assert np.abs(np.asarray(est.intercept_) - sk.intercept_).max() < 1e-8 * max(1.0, np.abs(y).max())
    assert _rel(est.predict(X), sk.predict(Z.toarray())) < 1e-8


def test_dual_with_repeated_rows_and_weights_equals_sklearn():
    # Identical feature rows are merged into weighted rows before the dual: same solution.
    X, y, w = _binning_problem(n=120)
    X = np.vstack([X, X[:40]])
    y = np.concatenate([y, y[:40] + 0.5])
    w = np.concatenate([w, w[:40]])
    est = Ridge(alpha=0.1, features=RandomBinningFeatures(15, gamma=4.0, random_state=0)).fit(X, y, sample_weight=w)
    assert est.solver_ == "cholesky-dual"
    Z = est.features_.transform(X).toarray()
    sk = SkRidge(alpha=0.1, solver="cholesky").fit(Z, y, sample_weight=w)
    assert _rel(est.coef_, sk.coef_) < 1e-8 and abs(est.intercept_ - sk.intercept_) < 1e-8


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_dual_merges_a_few_repeated_rows_itself(fit_intercept):
    # 10% repeated rows (with zero and unequal weights): under the CG row merge's 20% threshold,
    # merged inside the dual (fewer unknowns); the solution is sklearn's on all rows.
    X, y, w = _binning_problem(n=200)
    X = np.vstack([X, X[:20]])
    y = np.concatenate([y, y[:20] - 1.0])
    w = np.concatenate([w, w[:20] * 0.5])
    w[3] = 0.0
    est = Ridge(alpha=0.1, fit_intercept=fit_intercept, features=RandomBinningFeatures(15, gamma=4.0, random_state=0))
    est.fit(X, y, sample_weight=w)
    assert est.solver_ == "cholesky-dual"
    first, group = dual.distinct_rows(make_products(est.features_.transform(X), 1))
    assert first is not None and first.size == 200
    Z = est.features_.transform(X).toarray()
    sk = SkRidge(alpha=0.1, fit_intercept=fit_intercept, solver="cholesky").fit(Z, y, sample_weight=w)
    assert _rel(est.coef_, sk.coef_) < 1e-8 and abs(est.intercept_ - sk.intercept_) < 1e-8


def test_dual_float32_input():
    X, y, w = _binning_problem(dtype=np.float32)
    est = Ridge(alpha=0.3, features=RandomBinningFeatures(15, gamma=4.0, random_state=0)).fit(X, y, sample_weight=w)
    assert est.solver_ == "cholesky-dual" and est.coef_.dtype == np.float32
    Z = est.features_.transform(X).astype(np.float64).toarray()
    sk = SkRidge(alpha=0.3, solver="cholesky").fit(Z, y, sample_weight=w)
    assert _rel(est.coef_, sk.coef_) < 1e-5  # the kernel is exact; coef_ rounded to float32


def test_dual_on_general_csr_and_dense_features_equals_sklearn():
    rng = np.random.default_rng(3)
    C = sp.random(80, 400, density=0.05, random_state=3, format="csr")
    y = rng.standard_normal(80)
    w = rng.uniform(0.5, 2.0, 80)
    est = Ridge(alpha=0.05).fit(C, y, sample_weight=w)
    assert est.solver_ == "cholesky-dual"
    sk = SkRidge(alpha=0.05, solver="cholesky").fit(C.toarray(), y, sample_weight=w)
    assert _rel(est.coef_, sk.coef_) < 1e-8 and abs(est.intercept_ - sk.intercept_) < 1e-8
    # Dense and wider than "auto"'s Cholesky limit (10000 columns): CG before, the dual now.
    Xd = rng.standard_normal((60, 10050))
    yd = Xd[:, 0] - Xd[:, 1] + 0.1 * rng.standard_normal(60)
    est = Ridge(alpha=2.0).fit(Xd, yd, sample_weight=w[:60])
    assert est.solver_ == "cholesky-dual"
    sk = SkRidge(alpha=2.0, solver="cholesky").fit(Xd, yd, sample_weight=w[:60])
    assert _rel(est.coef_, sk.coef_) < 1e-8 and abs(est.intercept_ - sk.intercept_) < 1e-8


def test_classifier_dual_equals_sklearn():
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (160, 3))
    labels = (3 * X[:, 0] + 2 * X[:, 1]).astype(int) % 4
    est = RidgeClassifier(alpha=0.2, features=RandomBinningFeatures(15, gamma=4.0, random_state=0)).fit(X, labels)
    assert est.solver_ == "cholesky-dual"
    Z = est.features_.transform(X).toarray()
    sk = SkRidgeClassifier(alpha=0.2, solver="cholesky").fit(Z, labels)
    assert _rel(est.coef_, sk.coef_) < 1e-8 and _rel(est.intercept_, sk.intercept_) < 1e-8
    assert np.array_equal(est.predict(X), sk.predict(Z))


# ------------------------------------------------------------------ the switch
def test_both_sides_of_the_switch_agree():
    X, y, w = _binning_problem(n=150)
    fmap = RandomBinningFeatures(15, gamma=4.0, random_state=0)
    d = Ridge(alpha=1.0, features=fmap).fit(X, y, sample_weight=w)
    p = Ridge(alpha=1.0, solver="cg", tol=1e-13, max_iter=5000, features=fmap).fit(X, y, sample_weight=w)
    assert d.solver_ == "cholesky-dual" and p.solver_ in ("cg", "cg-dual")
    assert _rel(d.coef_, p.coef_) < 1e-8 and abs(d.intercept_ - p.intercept_) < 1e-8


def test_rows_beyond_half_the_columns_stay_primal():
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, (600, 2))
    y = np.sin(4 * X[:, 0])
    est = Ridge(alpha=0.5, features=RandomBinningFeatures(5, gamma=0.5, random_state=0)).fit(X, y)
    assert est.features_.n_features_out_ * 1 < 2 * 600
    assert est.solver_ == "cg"


def test_row_cap_keeps_cg_and_forced_cholesky_takes_the_dual(monkeypatch):
    X, y, w = _binning_problem(n=150)
    fmap = RandomBinningFeatures(100, gamma=50.0, random_state=0)
    monkeypatch.setattr(dual, "DUAL_MIN_ROWS", 10)
    monkeypatch.setattr(dual, "DUAL_MAX_ROWS", 10)
    assert Ridge(alpha=1.0, features=fmap).fit(X, y).solver_ in ("cg", "cg-dual")
    forced = Ridge(alpha=1.0, solver="cholesky", features=fmap).fit(X, y, sample_weight=w)
    assert forced.features_.n_features_out_ > 10000  # wider than "auto"'s primal Cholesky limit
    assert forced.solver_ == "cholesky-dual"
    Z = forced.features_.transform(X).toarray()
    sk = SkRidge(alpha=1.0, solver="cholesky").fit(Z, y, sample_weight=w)
    assert _rel(forced.coef_, sk.coef_) < 1e-8


def test_row_cap_grows_as_alpha_falls():
    X, _, _ = _binning_problem(n=150)
    ops = make_products(RandomBinningFeatures(15, gamma=4.0, random_state=0).fit_transform(X), 1)
    caps = [dual.row_cap(ops, a) for a in (10.0, 1.0, 1e-2, 1e-4, 1e-8)]
    assert caps == sorted(caps) and caps[1] == dual.DUAL_MIN_ROWS and caps[-1] == dual.DUAL_MAX_ROWS
    assert not dual.dual_cholesky_pays(ops, 0.0, 1)  # alpha = 0: the centred kernel is singular


def test_narrow_sparse_cholesky_stays_primal_for_return_std():
    # Sparse features up to 10000 wide: solver="cholesky" keeps the primal factor (predictive variance).
    X, y, _ = _binning_problem(n=150)
    est = Ridge(alpha=1.0, solver="cholesky", features=RandomBinningFeatures(15, gamma=4.0, random_state=0)).fit(X, y)
    assert est.solver_ == "cholesky"
    mean, std = est.predict(X[:5], return_std=True)
    assert std.shape == (5,) and np.all(std > 0)


def test_zero_alpha_cholesky_stays_primal():
    X, y, _ = _binning_problem(n=60)
    est = Ridge(alpha=0.0, solver="cholesky", features=RandomBinningFeatures(4, gamma=4.0, random_state=0)).fit(X, y)
    assert est.solver_ == "cholesky"


def test_factor_failure_falls_back_to_cg(monkeypatch):
    X, y, _ = _binning_problem(n=150)

    def fail(*args, **kwargs):
        raise np.linalg.LinAlgError("not positive definite")

    monkeypatch.setattr(dual, "cholesky_solve", fail)
    est = Ridge(alpha=1.0, features=RandomBinningFeatures(15, gamma=4.0, random_state=0)).fit(X, y)
    assert est.solver_ in ("cg", "cg-dual") and est.n_iter_ is not None


def test_verbose_log_names_the_dual(capsys):
    X, y, _ = _binning_problem(n=150)
    Ridge(alpha=1.0, verbose=1, features=RandomBinningFeatures(15, gamma=4.0, random_state=0)).fit(X, y)
    err = capsys.readouterr().err
    assert "dual: kernel matrix" in err and "fit done (cholesky-dual)" in err


def test_centre_kernel_matches_explicit_centring():
    rng = np.random.default_rng(6)
    Z = rng.standard_normal((40, 90))
    w = rng.uniform(0.1, 2.0, 40)
    Y = rng.standard_normal((40, 2))
    ops, Y, w = prepare_problem(Z, Y, w, 1)
    from randfeat._solvers.normal import NormalOperator

    normal = NormalOperator(ops, w, True)
    Zc = (Z - normal.mean) * np.sqrt(w)[:, None]
    assert np.abs(dual.centre_kernel(Z @ Z.T, w, True) - Zc @ Zc.T).max() < 1e-12
    Zw = Z * np.sqrt(w)[:, None]
    assert np.abs(dual.centre_kernel(Z @ Z.T, w, False) - Zw @ Zw.T).max() < 1e-12
