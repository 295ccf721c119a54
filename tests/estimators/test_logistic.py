"""Tests of randfeat.LogisticRegression: scikit-learn's LogisticRegression on the materialised features is the oracle."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat import LogisticRegression, RandomBinningFeatures, RandomFourierFeatures

SOLVERS = ["newton-cholesky", "lbfgs", "newton-cg"]


def data(kind):
    """Three small data sets: binary, 10 classes, binary with unbalanced classes."""
    if kind == "binary":
        return make_classification(600, 5, n_informative=4, n_redundant=0, random_state=0)
    if kind == "ten":
        return make_classification(600, 5, n_informative=4, n_redundant=0, n_classes=10, n_clusters_per_class=1,
                                   random_state=1)
    X, y = make_classification(600, 5, n_informative=3, n_redundant=1, weights=[0.8], flip_y=0.05, random_state=2)
    return X * 3.0, np.where(y == 1, "yes", "no")


def rff(D=100, seed=0):
    return RandomFourierFeatures(D, random_state=seed)


def objective(coef, intercept, C, Z, y, classes, w=None):
    """C·Σ w·loss + ½‖coef‖², computed from the fitted attributes."""
    Z = Z.toarray() if sp.issparse(Z) else np.asarray(Z, dtype=np.float64)
    coef, intercept = np.asarray(coef, dtype=np.float64), np.asarray(intercept, dtype=np.float64)
    F = Z @ coef.T + intercept
    w = np.ones(len(y)) if w is None else w
    if F.shape[1] == 1:
        t = (np.asarray(y) == classes[1]).astype(float)
        loss = np.logaddexp(0, F[:, 0]) - t * F[:, 0]
    else:
        idx = np.searchsorted(classes, y)
        loss = logsumexp(F, axis=1) - F[np.arange(len(y)), idx]
    return C * float(w @ loss) + 0.5 * float(np.sum(coef**2))


def sk_fit(Z, y, C, **kwargs):
    return SkLogisticRegression(C=C, tol=1e-10, max_iter=10000, **kwargs).fit(Z, y)


def rf_fit(X, y, C, solver, features=None, **kwargs):
    return LogisticRegression(C=C, features=features, solver=solver, tol=1e-10, max_iter=10000, **kwargs).fit(X, y)


# ------------------------------------------------------------ the oracle
@pytest.mark.parametrize("kind", ["binary", "ten", "unbalanced"])
@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
@pytest.mark.parametrize("solver", SOLVERS)
def test_equals_sklearn_on_materialised_features(kind, C, solver):
    X, y = data(kind)
    est = rf_fit(X, y, C, solver, rff())
    Z = est.features_.transform(X)
    ref = sk_fit(Z, y, C)
    assert est.solver_ == solver
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    assert est.coef_.shape == ref.coef_.shape and est.intercept_.shape == ref.intercept_.shape
    ours = objective(est.coef_, est.intercept_, C, Z, y, est.classes_)
    theirs = objective(ref.coef_, ref.intercept_, C, Z, y, ref.classes_)
    assert abs(ours - theirs) <= 1e-6 * theirs
    assert ours <= theirs * (1 + 1e-9)  # never worse than scikit-learn's
    assert est.objective_ == pytest.approx(ours, rel=1e-10)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(Z), atol=1e-4)
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(Z), atol=1e-3)
    np.testing.assert_array_equal(est.predict(X), ref.predict(Z))
    assert est.n_iter_.shape == (1,)
    assert est.score(X, y) == ref.score(Z, y)


@pytest.mark.parametrize("kind", ["binary", "ten"])
def test_no_features_dense_and_csr_equal(kind):
    X, y = data(kind)
    X = np.where(np.abs(X) < 0.5, 0.0, X)
    ref = sk_fit(X, y, 1.0)
    for Xin in (X, sp.csr_matrix(X)):
        for solver in SOLVERS:
            est = rf_fit(Xin, y, 1.0, solver)
            assert "features_" not in vars(est)
            np.testing.assert_allclose(est.predict_proba(Xin), ref.predict_proba(X), atol=1e-6)


def test_fit_intercept_false():
    X, y = data("ten")
    ref = sk_fit(X, y, 1.0, fit_intercept=False)
    est = rf_fit(X, y, 1.0, "newton-cholesky", fit_intercept=False)
    np.testing.assert_array_equal(est.intercept_, 0.0)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_float32(solver):
    X, y = data("ten")
    est = rf_fit(X.astype(np.float32), y, 1.0, solver, rff())
    assert est.coef_.dtype == np.float32 and est.predict_proba(X.astype(np.float32)).dtype == np.float32
    Z = est.features_.transform(X.astype(np.float32))
    ref = sk_fit(Z.astype(np.float64), y, 1.0)
    ours = objective(est.coef_, est.intercept_, 1.0, Z, y, est.classes_)
    theirs = objective(ref.coef_, ref.intercept_, 1.0, Z, y, ref.classes_)
    assert abs(ours - theirs) <= 1e-5 * theirs
    np.testing.assert_allclose(est.predict_proba(X.astype(np.float32)), ref.predict_proba(Z), atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_probabilities_stable_for_huge_logits(dtype):
    X, y = data("binary")
    est = rf_fit(X, y, 1.0, "newton-cholesky")
    est.coef_ = (est.coef_ * 1e6).astype(dtype)
    est.intercept_ = est.intercept_.astype(dtype)
    P, L = est.predict_proba(X.astype(dtype)), est.predict_log_proba(X.astype(dtype))
    assert np.all(np.isfinite(L)) and np.all(np.isfinite(P))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-6)


def test_log_proba_is_log_of_proba():
    X, y = data("ten")
    est = rf_fit(X, y, 1.0, "newton-cholesky", rff())
    np.testing.assert_allclose(est.predict_log_proba(X), np.log(est.predict_proba(X)), atol=1e-10)


# ------------------------------------------------------------ weights
@pytest.mark.parametrize("kind", ["binary", "ten"])
@pytest.mark.parametrize("solver", SOLVERS)
def test_sample_and_class_weight_equal_sklearn(kind, solver):
    X, y = data(kind)
    rng = np.random.default_rng(0)
    w = rng.uniform(0.1, 3.0, len(y))
    classes = np.unique(y)
    cw = {c: 1.0 + i for i, c in enumerate(classes)}
    for class_weight in (None, "balanced", cw):
        est = rf_fit(X, y, 1.0, solver, rff(), class_weight=class_weight).fit(X, y, sample_weight=w)
        Z = est.features_.transform(X)
        ref = sk_fit(Z, y, 1.0, class_weight=class_weight).fit(Z, y, sample_weight=w)
        np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(Z), atol=1e-4)


def test_integer_weights_equal_repeated_rows():
    X, y = data("ten")
    w = np.random.default_rng(1).integers(0, 3, len(y))
    a = rf_fit(X, y, 1.0, "newton-cholesky").fit(X, y, sample_weight=w)
    b = rf_fit(np.repeat(X, w, axis=0), np.repeat(y, w), 1.0, "newton-cholesky")
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-7)


# ------------------------------------------------------------ binning, CSR
@pytest.mark.parametrize("kind", ["binary", "ten"])
@pytest.mark.parametrize("solver", SOLVERS)
def test_binning_features_stay_sparse(kind, solver):
    X, y = data(kind)
    est = rf_fit(X, y, 1.0, solver, RandomBinningFeatures(10, gamma=0.1, random_state=0))  # 114 bins
    Z = est.features_.transform(X)
    assert sp.issparse(Z)
    ref = sk_fit(Z, y, 1.0)
    ours = objective(est.coef_, est.intercept_, 1.0, Z, y, est.classes_)
    theirs = objective(ref.coef_, ref.intercept_, 1.0, Z, y, ref.classes_)
    assert abs(ours - theirs) <= 1e-6 * theirs
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(Z), atol=1e-4)


def test_streamed_features_equal_held(monkeypatch):
    import randfeat._solvers.logistic_rows as rows_mod

    X, y = data("ten")
    held = rf_fit(X, y, 1.0, "newton-cholesky", rff(), chunk_size=128)
    monkeypatch.setattr(rows_mod, "MATERIALISE_BYTES", 0)
    monkeypatch.setattr(rows_mod, "HELD_FLOAT32_BYTES", 0)  # made again at every pass
    streamed = rf_fit(X, y, 1.0, "newton-cholesky", rff(), chunk_size=128)
    np.testing.assert_array_equal(held.coef_, streamed.coef_)


@pytest.mark.parametrize("kind", ["binary", "ten"])
@pytest.mark.parametrize("solver", SOLVERS)
def test_features_partly_held_in_float32(kind, solver, monkeypatch):
    """Beyond MATERIALISE_BYTES the first rows are held rounded to float32, the rest made again per pass."""
    import randfeat._solvers.logistic_rows as rows_mod

    X, y = data(kind)
    monkeypatch.setattr(rows_mod, "MATERIALISE_BYTES", 0)
    monkeypatch.setattr(rows_mod, "HELD_FLOAT32_BYTES", 250 * 101 * 4)  # 250 of the 600 rows
    est = rf_fit(X, y, 1.0, solver, rff(), chunk_size=128)
    Z = est.features_.transform(X)
    Z32 = Z.copy()
    Z32[:250] = Z32[:250].astype(np.float32)  # what the solver read
    ref = sk_fit(Z32, y, 1.0)
    ours = objective(est.coef_, est.intercept_, 1.0, Z32, y, est.classes_)
    theirs = objective(ref.coef_, ref.intercept_, 1.0, Z32, y, ref.classes_)
    assert abs(ours - theirs) <= 1e-6 * theirs
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(Z), atol=1e-4)


@pytest.mark.parametrize("kind", ["binary", "ten"])
@pytest.mark.parametrize("solver", ["newton-cholesky", "newton-cg"])
def test_sampled_hessian_reaches_the_same_optimum(kind, solver, monkeypatch):
    import randfeat._solvers.logistic as logistic_mod

    X, y = data(kind)
    monkeypatch.setattr(logistic_mod, "HESSIAN_ROWS", 100)
    monkeypatch.setattr(logistic_mod, "CG_HESSIAN_ROWS", 100)
    monkeypatch.setattr(logistic_mod, "HESSIAN_ROWS_PER_PARAMETER", 1)  # the Hessian over every 6th or 2nd row
    monkeypatch.setattr(logistic_mod, "SAMPLE_FLOAT64_BYTES", 0)  # the sample held in float32
    est = rf_fit(X, y, 1.0, solver, rff(20))
    Z = est.features_.transform(X)
    ref = sk_fit(Z, y, 1.0)
    ours = objective(est.coef_, est.intercept_, 1.0, Z, y, est.classes_)
    theirs = objective(ref.coef_, ref.intercept_, 1.0, Z, y, ref.classes_)
    assert abs(ours - theirs) <= 1e-6 * theirs
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(Z), atol=1e-4)


@pytest.mark.parametrize("C", [1.0, 100.0])
def test_sampled_hessian_escalates_to_every_row(C, monkeypatch, capsys):
    """When the sample's Hessian converges slowly near the optimum, the rest sums every row: the same optimum."""
    import randfeat._solvers.logistic as logistic_mod

    X, y = data("binary")
    monkeypatch.setattr(logistic_mod, "HESSIAN_ROWS", 60)
    monkeypatch.setattr(logistic_mod, "HESSIAN_ROWS_PER_PARAMETER", 1)  # the Hessian over every 10th row
    monkeypatch.setattr(logistic_mod, "QUADRATIC_DECREMENT", np.inf)
    monkeypatch.setattr(logistic_mod, "_every_row_pays", lambda *args: True)
    est = rf_fit(X, y, C, "newton-cholesky", rff(20), verbose=1)
    assert "summed over every row" in capsys.readouterr().err
    Z = est.features_.transform(X)
    ref = sk_fit(Z, y, C)
    ours = objective(est.coef_, est.intercept_, C, Z, y, est.classes_)
    theirs = objective(ref.coef_, ref.intercept_, C, Z, y, ref.classes_)
    assert abs(ours - theirs) <= 1e-6 * theirs
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(Z), atol=1e-4)


def test_every_row_pays_by_cost():
    """Escalation pays when many sampled steps remain, not when one or two do."""
    from types import SimpleNamespace

    from randfeat._solvers.logistic import _every_row_pays

    loss = SimpleNamespace(K=1, P=1001, stride=4)
    assert _every_row_pays(loss, 0.5, 1e-4, 1e-8)  # ~14 sampled steps left
    assert not _every_row_pays(loss, 0.5, 2e-8, 1e-8)  # one step left
    assert not _every_row_pays(loss, 0.01, 1e-4, 1e-8)  # fast already


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("D", [30, 700])
def test_weighted_hessian_chunks_in_parallel_same_bits(D, dtype):
    """A narrow Hessian's row chunks run in parallel: the same bits for any thread count, equal to NumPy's."""
    from randfeat._solvers.gram import weighted_gram_add

    rng = np.random.default_rng(3)
    Z, v = rng.standard_normal((1000, D)), rng.random(1000)
    out = []
    for n_threads in (1, 2, 3, 4):  # D = 700 at 4 threads: its 3 tiles by chunks in parallel
        H = np.zeros((D, D))
        weighted_gram_add(Z, v, H, n_threads, dtype, chunk_bytes=8 * D * 97)  # 97-row chunks
        out.append(H)
    for H in out[1:]:
        np.testing.assert_array_equal(H, out[0])
    Zv = Z * v[:, None]
    np.testing.assert_allclose(out[0], np.tril(Zv.T @ Zv), rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-4 if dtype == np.float32 else 1e-10)
    assert not np.any(np.triu(out[0], 1))


@pytest.mark.parametrize("kind", ["binary", "ten"])
def test_newton_cg_diagonal_preconditioner(kind, monkeypatch):
    """When the P × P Gram does not fit, newton-cg preconditions by its diagonal: the same optimum."""
    import randfeat._solvers.logistic_cg as cg_mod

    X, y = data(kind)
    monkeypatch.setattr(cg_mod, "PRECONDITIONER_BYTES", 0)
    est = rf_fit(X, y, 1.0, "newton-cg", rff())
    Z = est.features_.transform(X)
    ref = sk_fit(Z, y, 1.0)
    ours = objective(est.coef_, est.intercept_, 1.0, Z, y, est.classes_)
    theirs = objective(ref.coef_, ref.intercept_, 1.0, Z, y, ref.classes_)
    assert abs(ours - theirs) <= 1e-6 * theirs


def test_given_float64_rows_are_read_where_they_are(monkeypatch):
    """Features given as C-ordered float64 (X itself, a fold's rows) are held without a copy at any size."""
    import randfeat._solvers.logistic_rows as rows_mod
    from randfeat._solvers.pipeline import FeatureSource

    monkeypatch.setattr(rows_mod, "MATERIALISE_BYTES", 0)
    Z = np.random.default_rng(0).standard_normal((50, 7))
    assert rows_mod.DesignRows(FeatureSource(None, None, Z), True, None).held is Z
    rows32 = rows_mod.DesignRows(FeatureSource(None, None, Z.astype(np.float32)), True, None)
    assert rows32.held is None  # float32 rows: the float32 rule (held in float32, or made again)
    rowsF = rows_mod.DesignRows(FeatureSource(None, None, np.asfortranarray(Z)), True, None)
    assert rowsF.held is None


def test_systematic_sample_of_held_rows_is_a_view():
    """The Hessian's every-stride-th-row sample of held float64 rows is a view (no fresh memory), same rows."""
    from randfeat._solvers.logistic_rows import DesignRows
    from randfeat._solvers.pipeline import FeatureSource

    Z = np.random.default_rng(1).standard_normal((103, 6))
    rows = DesignRows(FeatureSource(None, None, Z), True, None)
    for index in (np.arange(0, 103, 4), np.arange(3, 103, 10), np.array([5])):
        sample = rows.sample(index, np.float64)
        assert np.shares_memory(sample, Z)
        np.testing.assert_array_equal(sample, Z[index])
    irregular = np.array([0, 1, 5, 9])
    sample = rows.sample(irregular, np.float64)
    assert not np.shares_memory(sample, Z)
    np.testing.assert_array_equal(sample, Z[irregular])
    np.testing.assert_array_equal(rows.sample(np.arange(0, 103, 4), np.float32), Z[::4].astype(np.float32))


def test_binning_csr_is_not_copied():
    """The intercept is added by the loss (bare rows): the solver reads the map's CSR itself."""
    from randfeat._solvers.logistic import DesignRows
    from randfeat._solvers.pipeline import FeatureSource

    X, _ = data("binary")
    source = FeatureSource.fit(RandomBinningFeatures(10, gamma=0.1, random_state=0), X)
    rows = DesignRows(source, True, None)
    assert rows.held is source.Z and rows.bare and rows.width == source.n_features + 1


# ------------------------------------------------------------ solver choice, convergence
def test_auto_picks_by_classes_and_memory(monkeypatch):
    import randfeat._solvers.logistic as logistic_mod

    X, y = data("ten")
    Xb, yb = data("binary")
    assert LogisticRegression(features=rff()).fit(X, y).solver_ == "newton-cg"
    assert LogisticRegression(features=rff()).fit(Xb, yb).solver_ == "newton-cholesky"
    monkeypatch.setattr(logistic_mod, "NEWTON_MEMORY_BYTES", 8 * 100**2)  # 101 × 101 does not fit
    assert LogisticRegression(features=rff()).fit(X, y).solver_ == "lbfgs"
    assert LogisticRegression(features=rff()).fit(Xb, yb).solver_ == "lbfgs"


@pytest.mark.parametrize("solver", SOLVERS)
def test_convergence_warning_names_solver_and_max_iter(solver):
    X, y = data("ten")
    with pytest.warns(ConvergenceWarning, match=rf"{solver}.*max_iter=1\b"):
        est = LogisticRegression(C=100, features=rff(), solver=solver, max_iter=1, tol=1e-12).fit(X, y)
    assert est.n_iter_[0] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        LogisticRegression(features=rff(), solver=solver, max_iter=1000).fit(X, y)


def test_sklearn_transformer_as_features():
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = data("ten")
    features = make_pipeline(StandardScaler(), RBFSampler(gamma=0.2, n_components=80, random_state=0))
    est = rf_fit(X, y, 1.0, "newton-cholesky", features)
    Z = features.fit(X).transform(X)
    ref = sk_fit(Z, y, 1.0)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(Z), atol=1e-4)


def test_verbose_reports_the_solver(capsys):
    X, y = data("binary")
    LogisticRegression(features=rff(), verbose=1).fit(X, y)
    assert "newton-cholesky on 600 rows" in capsys.readouterr().err


def test_warm_start_starts_from_the_previous_fit():
    X, y = data("ten")
    est = LogisticRegression(C=10, features=rff(), warm_start=True, tol=1e-8).fit(X, y)
    first = est.n_iter_[0]
    est.fit(X, y)
    assert est.n_iter_[0] < first


# ------------------------------------------------------------ determinism, pickling
@pytest.mark.parametrize("kind", ["binary", "ten"])
@pytest.mark.parametrize("solver", SOLVERS)
def test_thread_count_independent(kind, solver):
    X, y = data(kind)
    D = 1100 if kind == "binary" else 100  # binary: several Gram tiles
    fits = [rf_fit(X, y, 1.0, solver, rff(D), n_jobs=j, chunk_size=100) for j in (1, 2)]
    assert fits[0].coef_.tobytes() == fits[1].coef_.tobytes()
    assert fits[0].intercept_.tobytes() == fits[1].intercept_.tobytes()
    assert fits[0].predict_proba(X).tobytes() == fits[1].predict_proba(X).tobytes()


def test_pickle_round_trip():
    X, y = data("unbalanced")
    est = rf_fit(X, y, 1.0, "newton-cholesky", rff())
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))
    np.testing.assert_array_equal(back.predict(X), est.predict(X))


# ------------------------------------------------------------ bad input
def _fitted():
    X, y = data("binary")
    return rf_fit(X, y, 1.0, "newton-cholesky", rff()), X


@pytest.mark.parametrize("bad", [
    dict(y="one class"), dict(y="mixed"), dict(C=0.0), dict(C=-1.0), dict(w="nan"), dict(w="inf"),
    dict(class_weight={0: 1.0, 5: 2.0}), dict(class_weight={0: np.nan}), dict(y="continuous"),
])
def test_bad_input_is_refused_and_leaves_the_fit(bad):
    est, X = _fitted()
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()}
    y = data("binary")[1]
    w = None
    if bad.get("y") == "one class":
        y, match = np.zeros(len(y), dtype=int), "at least 2 classes"
    elif bad.get("y") == "mixed":
        y, match = np.array([0, "a"] * (len(y) // 2), dtype=object), "[Mm]ix"
    elif bad.get("y") == "continuous":
        y, match = np.linspace(0, 1, len(y)), "continuous|Unknown label"
    elif "C" in bad:
        est.set_params(C=bad["C"])
        match = "'C' parameter"
    elif "w" in bad:
        w = np.ones(len(y))
        w[3] = np.nan if bad["w"] == "nan" else np.inf
        match = "NaN|infinity|finite"
    else:
        est.set_params(class_weight=bad["class_weight"])
        match = "class_weight"
    with pytest.raises((ValueError, InvalidParameterError), match=match):
        est.fit(X, y, sample_weight=w)
    for k, v in before.items():
        now = vars(est)[k]
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(now, v)
    assert set(vars(est)) == set(before)


def test_dask_predictions_equal_in_memory():
    da = pytest.importorskip("dask.array")
    X, y = data("ten")
    est = rf_fit(X, y, 1.0, "newton-cholesky", rff(50))
    Xd = da.from_array(X, chunks=(200, X.shape[1]))
    for method in ("predict", "predict_proba", "predict_log_proba", "decision_function"):
        lazy = getattr(est, method)(Xd)
        assert isinstance(lazy, da.Array)
        np.testing.assert_array_equal(lazy.compute(scheduler="synchronous"), getattr(est, method)(X))


@parametrize_with_checks([LogisticRegression(), LogisticRegression(features=RandomFourierFeatures(20, gamma=1.0, random_state=0))])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
