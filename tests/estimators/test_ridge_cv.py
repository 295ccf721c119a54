"""RidgeCV / RidgeClassifierCV: scikit-learn's RidgeCV as the oracle, streaming equals materialised, bad input."""

import pickle

import numpy as np
import pytest
import sklearn.linear_model as sklm
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat import RandomBinningFeatures, RandomFourierFeatures, RidgeClassifierCV, RidgeCV

ALPHAS = np.array([1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0])


def rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


def make_data(n, d, k, *, seed=0, offset=3.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + offset
    W = rng.standard_normal((d, k))
    Y = X @ W + 0.5 * rng.standard_normal((n, k)) + 2.0
    w = rng.uniform(0.2, 3.0, n)
    return X, Y, w


@pytest.mark.parametrize("n,d", [(60, 8), (15, 40)])  # N > D (Gram path), N < D (kernel path)
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("gcv_mode", ["svd", "eigen"])
def test_matches_sklearn_ridgecv(n, d, k, weighted, fit_intercept, gcv_mode):
    X, Y, w = make_data(n, d, k)
    y = Y[:, 0] if k == 1 else Y
    sw = w if weighted else None
    ours = RidgeCV(ALPHAS, fit_intercept=fit_intercept, store_cv_results=True).fit(X, y, sample_weight=sw)
    ref = sklm.RidgeCV(ALPHAS, fit_intercept=fit_intercept, store_cv_results=True, gcv_mode=gcv_mode)
    ref.fit(X, y, sample_weight=sw)
    assert ours.alpha_ == ref.alpha_
    assert ours.cv_results_.shape == ref.cv_results_.shape
    assert rel(ours.cv_results_, ref.cv_results_) < 1e-8
    assert rel(ours.best_score_, ref.best_score_) < 1e-8
    assert np.shape(ours.coef_) == np.shape(ref.coef_)
    assert rel(ours.coef_, ref.coef_) < 1e-8
    assert rel(ours.intercept_, ref.intercept_) < 1e-8 or np.all(np.asarray(ref.intercept_) == 0)
    assert np.shape(ours.intercept_) == np.shape(ref.intercept_)


@pytest.mark.parametrize("n,d", [(60, 8), (15, 40)])
def test_alpha_per_target_and_scorer_match_sklearn(n, d):
    X, Y, w = make_data(n, d, 3, seed=1)
    Y[:, 1] *= 0.01  # a target whose best alpha differs
    for kwargs in ({"alpha_per_target": True}, {"scoring": "r2", "alpha_per_target": True},
                   {"scoring": "neg_mean_absolute_error"}):
        ours = RidgeCV(ALPHAS, store_cv_results=True, **kwargs).fit(X, Y, sample_weight=w)
        ref = sklm.RidgeCV(ALPHAS, store_cv_results=True, **kwargs).fit(X, Y, sample_weight=w)
        np.testing.assert_array_equal(ours.alpha_, ref.alpha_)
        assert rel(ours.best_score_, ref.best_score_) < 1e-8
        assert ours.cv_results_.shape == ref.cv_results_.shape
        assert rel(ours.cv_results_, ref.cv_results_) < 1e-8
        assert rel(ours.coef_, ref.coef_) < 1e-8


@pytest.mark.parametrize("n,d", [(80, 6), (20, 30)])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_classifier_matches_sklearn(n, d, n_classes, weighted):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((n, d))
    y = np.argmax(X[:, :n_classes] + 0.7 * rng.standard_normal((n, n_classes)), axis=1)
    sw = rng.uniform(0.5, 2.0, n) if weighted else None
    ours = RidgeClassifierCV(ALPHAS, store_cv_results=True).fit(X, y, sample_weight=sw)
    ref = sklm.RidgeClassifierCV(ALPHAS, store_cv_results=True).fit(X, y, sample_weight=sw)
    assert ours.alpha_ == ref.alpha_
    assert rel(ours.best_score_, ref.best_score_) < 1e-8
    assert ours.cv_results_.shape == ref.cv_results_.shape
    assert rel(ours.cv_results_, ref.cv_results_) < 1e-8
    assert np.shape(ours.intercept_) == np.shape(ref.intercept_)
    assert np.shape(ours.coef_) == np.shape(ref.coef_)
    assert rel(ours.coef_, ref.coef_) < 1e-8
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    acc = RidgeClassifierCV(ALPHAS, scoring="accuracy").fit(X, y, sample_weight=sw)
    ref_acc = sklm.RidgeClassifierCV(ALPHAS, scoring="accuracy").fit(X, y, sample_weight=sw)
    if n_classes > 2:  # binary: scikit-learn argmaxes a single column (always class 0), we threshold at 0
        assert acc.alpha_ == ref_acc.alpha_
        assert rel(acc.best_score_, ref_acc.best_score_) < 1e-12


def loo_by_refitting(X, y, w, alpha):
    """Squared leave-one-out errors w_i e_i² by N refits with scikit-learn's Ridge (the definition)."""
    out = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        m = sklm.Ridge(alpha=alpha).fit(X[keep], y[keep], sample_weight=w[keep])
        out[i] = w[i] * (y[i] - m.predict(X[i : i + 1])[0]) ** 2
    return out


@pytest.mark.parametrize("n,d", [(30, 5), (12, 25)])
def test_leave_one_out_is_refitting(n, d):
    X, Y, w = make_data(n, d, 1, seed=3)
    m = RidgeCV([0.5, 5.0], store_cv_results=True).fit(X, Y[:, 0], sample_weight=w)
    for j, a in enumerate([0.5, 5.0]):
        assert rel(m.cv_results_[:, j], loo_by_refitting(X, Y[:, 0], w, a)) < 1e-8


@pytest.mark.parametrize("chunk_size", [7, 50, 1000])
@pytest.mark.parametrize("cv", [None, "gcv"])
def test_streamed_features_equal_materialised(chunk_size, cv):
    X, Y, w = make_data(150, 4, 2, seed=4, offset=0.0)
    fm = RandomFourierFeatures(40, gamma=0.3, random_state=0)
    Z = fm.fit_transform(X)
    streamed = RidgeCV(ALPHAS, features=fm, cv=cv, store_cv_results=True, chunk_size=chunk_size)
    streamed.fit(X, Y, sample_weight=w)
    dense = RidgeCV(ALPHAS, cv=cv, store_cv_results=True).fit(Z, Y, sample_weight=w)
    assert streamed.alpha_ == dense.alpha_
    assert rel(streamed.cv_results_, dense.cv_results_) < 1e-10
    assert rel(streamed.coef_, dense.coef_) < 1e-10
    assert rel(streamed.intercept_, dense.intercept_) < 1e-10
    assert rel(streamed.predict(X), dense.predict(Z)) < 1e-10


def test_gcv_is_the_textbook_formula():
    X, Y, w = make_data(40, 6, 1, seed=5)
    m = RidgeCV(ALPHAS, cv="gcv", store_cv_results=True).fit(X, Y[:, 0], sample_weight=w)
    for j, a in enumerate(ALPHAS):
        Xc = X - np.average(X, axis=0, weights=w)
        yc = Y[:, 0] - np.average(Y[:, 0], weights=w)
        sq = np.sqrt(w)
        Xt = sq[:, None] * Xc
        H = Xt @ np.linalg.solve(Xt.T @ Xt + a * np.eye(6), Xt.T)
        rss = np.sum((sq * yc - H @ (sq * yc)) ** 2)
        dof = np.trace(H) + 1
        assert rel(m.cv_results_[j], (rss / 40) / (1 - dof / 40) ** 2) < 1e-10
    assert m.alpha_ == ALPHAS[np.argmin(m.cv_results_)]


def test_clone_pickle_pipeline():
    X, Y, _ = make_data(50, 5, 1, seed=6)
    est = RidgeCV(ALPHAS, features=RandomFourierFeatures(30, random_state=1))
    pipe = make_pipeline(StandardScaler(), est).fit(X, Y[:, 0])
    again = pickle.loads(pickle.dumps(pipe))
    np.testing.assert_array_equal(again.predict(X), pipe.predict(X))
    c = clone(est)
    np.testing.assert_array_equal(c.get_params()["alphas"], est.alphas)
    assert not hasattr(c, "coef_") and not hasattr(c, "alpha_")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"alphas": []}, "at least one"),
        ({"alphas": [1.0, 0.0]}, "> 0"),
        ({"alphas": [1.0, -2.0]}, "> 0"),
        ({"alphas": [np.nan]}, "> 0"),
        ({"alphas": 0.0}, "alphas"),
        ({"cv": 1}, "cv"),
        ({"cv": "loo"}, "cv"),
        ({"scoring": "no_such_scorer"}, "scoring"),
        ({"cv": "gcv", "scoring": "r2"}, "gcv"),
    ],
)
def test_bad_parameters(kwargs, match):
    X, Y, _ = make_data(20, 3, 1)
    with pytest.raises(InvalidParameterError, match=match):
        RidgeCV(**kwargs).fit(X, Y[:, 0])


def test_classifier_rejects_alpha_per_target_and_failed_fit_keeps_model():
    X, Y, _ = make_data(30, 3, 1)
    y = (Y[:, 0] > np.median(Y[:, 0])).astype(int)
    m = RidgeClassifierCV().fit(X, y)
    coef = m.coef_.copy()
    m.set_params(alpha_per_target=True)
    with pytest.raises(InvalidParameterError, match="alpha_per_target"):
        m.fit(X, 1 - y)
    np.testing.assert_array_equal(m.coef_, coef)
    with pytest.raises(ValueError, match="only one class"):
        RidgeClassifierCV().fit(X, np.zeros(30))


# The check's k-fold refit on CSR X (features=None) is solved by CG to its default tolerance: the
# weighted and the repeated fits agree to ~4e-7, the check asks 1e-7 (dense X: Cholesky, exact).
_EXPECTED_FAILED = {"check_sample_weight_equivalence_on_sparse_data": "CSR refit by CG to tol: 4e-7 apart"}


@parametrize_with_checks([RidgeCV(), RidgeClassifierCV()], expected_failed_checks=lambda est: _EXPECTED_FAILED)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_gamma_path_equals_separate_fits():
    X, Y, w = make_data(120, 3, 1, seed=7, offset=0.0)
    y = np.sin(X[:, 0]) + 0.1 * Y[:, 0]
    gammas = [0.01, 0.1, 1.0, 10.0]
    fm = RandomFourierFeatures(50, random_state=3)
    m = RidgeCV(ALPHAS, features=fm, gammas=gammas).fit(X, y, sample_weight=w)
    assert m.gamma_ in gammas and m.features_.gamma == m.gamma_
    separate = [RidgeCV(ALPHAS, features=clone(fm).set_params(gamma=g)).fit(X, y, sample_weight=w) for g in gammas]
    np.testing.assert_allclose(m.gamma_scores_, [s.best_score_ for s in separate], rtol=1e-12)
    assert m.gamma_ == gammas[int(np.argmax(m.gamma_scores_))]
    alone = clone(fm).set_params(gamma=m.gamma_).fit(X)
    np.testing.assert_array_equal(m.features_.transform(X), alone.transform(X))  # bit-identical
    from randfeat import Ridge

    ridge = Ridge(alpha=m.alpha_, features=clone(fm).set_params(gamma=m.gamma_)).fit(X, y, sample_weight=w)
    assert rel(m.coef_, ridge.coef_) < 1e-10
    assert rel(m.intercept_, ridge.intercept_) < 1e-10


def test_auto_gammas_are_the_documented_grid():
    X, Y, _ = make_data(60, 4, 1, seed=8, offset=0.0)
    m = RidgeCV(ALPHAS, features=RandomFourierFeatures(20, random_state=0), gammas="auto").fit(X, Y[:, 0])
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)[np.triu_indices(60, 1)]
    np.testing.assert_allclose(m.gammas_, np.array([0.1, 0.3, 1.0, 3.0, 10.0]) / np.median(d2), rtol=1e-12)
    assert m.gamma_ in m.gammas_


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"gammas": []}, "at least one"),
        ({"gammas": [1.0, -1.0]}, "> 0"),
        ({"gammas": [1.0], "features": None}, "gamma"),
    ],
)
def test_bad_gammas(kwargs, match):
    X, Y, _ = make_data(20, 3, 1)
    kwargs = {"features": RandomFourierFeatures(10, random_state=0), **kwargs}
    with pytest.raises(InvalidParameterError, match=match):
        RidgeCV(**kwargs).fit(X, Y[:, 0])


# ------------------------------------------------------------------ k-fold
def _brute_kfold_scores(Z, Y, w, folds, alphas, fit):
    """Negated pooled weighted squared error of per-fold fits (the oracle of cv=k)."""
    N, K = Y.shape
    scores = []
    for a in alphas:
        sq = 0.0
        for tr, te in folds:
            pred = np.asarray(fit(a, Z[tr], Y[tr], w[tr]).predict(Z[te])).reshape(len(te), K)
            sq += (w[te, None] * (Y[te] - pred) ** 2).sum()
        scores.append(-sq / (N * K))
    return np.array(scores)


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_kfold_dense_equals_per_fold_sklearn_fits(k, weighted):
    # k-fold means what scikit-learn's RidgeCV(cv=...) means (issue 25): each fold scored by the
    # estimator's score (R², weighted by the test rows' weights when the fit is), the mean over folds.
    from sklearn.model_selection import KFold

    X, Y, w = make_data(80, 5, k)
    y = Y if k > 1 else Y[:, 0]
    sw = w if weighted else None
    m = RidgeCV(ALPHAS, cv=KFold(4)).fit(X, y, sample_weight=sw)
    ref = sklm.RidgeCV(ALPHAS, cv=KFold(4)).fit(X, y, sample_weight=sw)
    assert m.alpha_ == ref.alpha_
    assert m.best_score_ == pytest.approx(ref.best_score_, rel=1e-8)
    assert rel(m.coef_, ref.coef_) < 1e-8 and rel(m.intercept_, ref.intercept_) < 1e-8


@pytest.mark.parametrize("intercept", [True, False])
def test_kfold_binning_features_equal_per_fold_cg_fits(intercept, monkeypatch):
    # Sparse features wider than the Gram limit: cv=None means 5-fold CG fits
    # (the alpha path with warm starts); the oracle is randfeat's own Ridge(solver="cg")
    # refitted per fold and alpha, to the same CG tolerance.
    from sklearn.model_selection import KFold

    from randfeat import RandomBinningFeatures, Ridge
    from randfeat._solvers import selection

    monkeypatch.setattr(selection, "CHOLESKY_MAX_FEATURES", 50)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 3))
    y = np.sin(2 * X).sum(axis=1) + 0.1 * rng.standard_normal(300)
    alphas = np.array([0.01, 0.1, 1.0, 10.0])
    fm = RandomBinningFeatures(15, gamma=1.0, random_state=0)
    m = RidgeCV(alphas, features=fm, fit_intercept=intercept).fit(X, y)
    Z = clone(fm).fit_transform(X)
    assert Z.shape[1] > 50
    want = _brute_kfold_scores(Z, y[:, None], np.ones(300), list(KFold(5).split(X)), alphas,
                               lambda a, Zt, yt, wt: Ridge(alpha=a, solver="cg", tol=1e-10,
                                                           fit_intercept=intercept).fit(Zt, yt[:, 0]))
    assert m.alpha_ == alphas[np.argmax(want)]
    assert m.best_score_ == pytest.approx(want.max(), rel=1e-4)
    ref = Ridge(alpha=m.alpha_, solver="cg", tol=1e-10, fit_intercept=intercept).fit(Z, y)
    assert rel(m.coef_, ref.coef_) < 1e-3
    np.testing.assert_array_equal(m.features_.transform(X).toarray(), Z.toarray())
    with pytest.raises(ValueError, match="gcv.*D × D eigendecomposition"):
        RidgeCV(alphas, features=fm, cv="gcv").fit(X, y)


def test_kfold_classifier_and_bad_splitters():
    from sklearn.model_selection import ShuffleSplit

    from randfeat import RandomBinningFeatures

    X, Y, _ = make_data(120, 3, 1)
    y = np.digitize(Y[:, 0], np.quantile(Y[:, 0], [0.33, 0.66]))
    m = RidgeClassifierCV(ALPHAS, features=RandomBinningFeatures(10, random_state=0), cv=3,
                          scoring="accuracy").fit(X, y)
    assert m.alpha_ in ALPHAS and 0.0 <= m.best_score_ <= 1.0
    np.testing.assert_array_equal(m.classes_, [0, 1, 2])
    with pytest.raises(ValueError, match="exactly once"):
        RidgeCV(ALPHAS, cv=ShuffleSplit(3, random_state=0)).fit(X, Y[:, 0])
    with pytest.raises(ValueError, match="n_splits=200"):
        RidgeCV(ALPHAS, cv=200).fit(X, Y[:, 0])


@pytest.mark.parametrize("kernel, sampling", [("rbf", "iid"), ("rbf", "orthogonal"), ("rbf", "qmc"),
                                              ("laplacian", "iid"), ("laplacian", "qmc"), ("cauchy", "iid"),
                                              ("cauchy", "qmc"), ("matern", "iid"), ("matern", "orthogonal"),
                                              ("matern", "qmc")])
@pytest.mark.parametrize("feature_map, n", [("cos", 20), ("cossin", 21)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gamma_path_maps_are_bit_identical_to_separate_fits(kernel, sampling, feature_map, n, dtype):
    # One draw, rescaled per gamma in _kernels.scale_frequencies, against a
    # fresh fit at each gamma with the same random_state.
    X = np.random.default_rng(0).normal(size=(30, 5)).astype(dtype)
    fm = RandomFourierFeatures(n, kernel=kernel, sampling=sampling, feature_map=feature_map, nu=2.5, random_state=4)
    gammas = [0.003, 0.2, 7.0]
    for g, m in zip(gammas, fm._fit_gamma_path(X, gammas)):
        alone = clone(fm).set_params(gamma=g).fit(X)
        assert m.gamma == g and m.gamma_ == g
        np.testing.assert_array_equal(m.random_weights_, alone.random_weights_)
        np.testing.assert_array_equal(m.transform(X), alone.transform(X))


def test_binning_gamma_path_features_are_bit_identical_to_separate_fits():
    X, Y, _ = make_data(150, 3, 1, seed=2, offset=0.0)
    fm = RandomBinningFeatures(8, random_state=1)
    m = RidgeCV(ALPHAS, features=fm, gammas=[0.1, 1.0, 3.0], cv=3).fit(X, Y[:, 0])
    alone = clone(fm).set_params(gamma=m.gamma_).fit(X)
    assert (m.features_.transform(X) != alone.transform(X)).nnz == 0


@pytest.mark.parametrize("cv, scoring, store", [(None, None, True), ("gcv", None, True), (None, "r2", False)])
@pytest.mark.parametrize("chunk_size", [None, 17])
def test_joint_gamma_pass_equals_one_pass_per_gamma(cv, scoring, store, chunk_size, monkeypatch):
    # The single pass over X for all gammas computes exactly what one pass
    # per gamma does (the same blocks into the same accumulators).
    X, Y, w = make_data(90, 4, 2, seed=5, offset=0.0)
    kw = dict(features=RandomFourierFeatures(31, random_state=2), gammas=[0.05, 0.5, 5.0], cv=cv,
              scoring=scoring, store_cv_results=store, chunk_size=chunk_size, alpha_per_target=True)
    from randfeat._solvers import pipeline, selection

    passes = []
    original = pipeline.FeatureSource.chunks
    monkeypatch.setattr(pipeline.FeatureSource, "chunks", lambda self, size=None: passes.append(1) or original(self, size))
    joint = RidgeCV(ALPHAS, **kw).fit(X, Y, sample_weight=w)
    assert len(passes) == (1 if cv == "gcv" else 2)  # not per gamma
    monkeypatch.setattr(selection, "_joint_pass_fits", lambda settings, maps, X: False)
    apart = RidgeCV(ALPHAS, **kw).fit(X, Y, sample_weight=w)
    np.testing.assert_array_equal(joint.gamma_scores_, apart.gamma_scores_)
    np.testing.assert_array_equal(joint.alpha_, apart.alpha_)
    np.testing.assert_array_equal(joint.coef_, apart.coef_)
    np.testing.assert_array_equal(joint.intercept_, apart.intercept_)
    if store:
        np.testing.assert_array_equal(joint.cv_results_, apart.cv_results_)


def test_joint_gamma_pass_falls_back_when_the_grams_do_not_fit(monkeypatch):
    import randfeat._solvers.selection as selection

    X, Y, _ = make_data(60, 3, 1, seed=6, offset=0.0)
    est = RidgeCV(ALPHAS, features=RandomFourierFeatures(40, random_state=0), gammas=[0.1, 1.0])
    maps = clone(est.features)._fit_gamma_path(X, [0.1, 1.0])
    joint = lambda est: selection._joint_pass_fits(est._selection_settings(None), maps, X)  # noqa: E731
    monkeypatch.setattr(selection, "available_memory", lambda: (2 * 40 * 40 * 8 - 1, "test"))
    assert not joint(est)  # 2 Grams > half of what is left
    monkeypatch.setattr(selection, "available_memory", lambda: (4 * 40 * 40 * 8, "test"))
    assert joint(est)
    assert not joint(clone(est).set_params(cv=3))  # k-fold: per fold, not joint


@pytest.mark.parametrize("features", [None, RandomFourierFeatures(25, random_state=1)])
@pytest.mark.parametrize("weighted", [False, True])
def test_kfold_from_merged_fold_statistics_equals_a_fit_per_fold(features, weighted, monkeypatch):
    # One pass into per-fold statistics, merged per training set, against
    # fitting every fold's training rows (the path taken without the memory).
    X, Y, w = make_data(97, 4, 2, seed=11, offset=0.0)
    w = w if weighted else None
    # (store_cv_results and alpha_per_target are refused with k-fold, as scikit-learn: scores and model compared.)
    kw = dict(features=features, cv=4, chunk_size=13)
    merged = RidgeCV(ALPHAS, **kw).fit(X, Y, sample_weight=w)
    from randfeat._solvers import kfold

    monkeypatch.setattr(kfold, "_fold_statistics_fit", lambda D, n_folds, dtype: False)
    apart = RidgeCV(ALPHAS, **kw).fit(X, Y, sample_weight=w)
    np.testing.assert_allclose(merged.best_score_, apart.best_score_, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(merged.alpha_, apart.alpha_)
    assert rel(merged.coef_, apart.coef_) < 1e-10


@pytest.mark.parametrize("gammas", [None, [0.1, 1.0]])
def test_streamed_features_with_fewer_rows_than_features_take_the_kernel_path(gammas, monkeypatch):
    # N < D and Z small: the streamed map is materialised for the N × N
    # eigendecomposition; results equal the D × D Gram path's.
    X, Y, _ = make_data(40, 3, 2, seed=12, offset=0.0)
    fm = RandomFourierFeatures(90, random_state=5)
    kw = dict(features=fm, gammas=gammas, store_cv_results=True)
    from randfeat._solvers import selection

    est = RidgeCV(ALPHAS, **kw)
    settings = est._selection_settings(None)
    assert selection._kernel_path_pays(settings, 40, 90, X.dtype)
    assert not selection._joint_pass_fits(settings, [clone(fm).fit(X)], X)
    kernel = est.fit(X, Y)
    monkeypatch.setattr(selection, "_kernel_path_pays", lambda settings, N, D, dtype: False)
    gram = RidgeCV(ALPHAS, **kw).fit(X, Y)
    np.testing.assert_allclose(kernel.cv_results_, gram.cv_results_, rtol=1e-7, atol=1e-12)
    np.testing.assert_array_equal(kernel.alpha_, gram.alpha_)
    assert rel(kernel.coef_, gram.coef_) < 1e-8


def test_verbose_reports_gammas_folds_and_time(capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    y = (X[:, 0] > 0).astype(int)
    RidgeClassifierCV(alphas=(0.1, 1.0), gammas=[0.1, 1.0], cv=3, verbose=1,
                      features=RandomFourierFeatures(20, random_state=0)).fit(X, y)
    err = capsys.readouterr().err
    assert "gamma=0.1: best alpha=" in err and "gamma=1: best alpha=" in err
    assert "selected in" in err
    # Sparse (binning) features: a CG alpha path per fold, each reported.
    RidgeClassifierCV(alphas=(0.1, 1.0), cv=3, verbose=1,
                      features=RandomBinningFeatures(5, random_state=0)).fit(X, y)
    err = capsys.readouterr().err
    assert "fold 1/3: 2 alphas fitted in" in err and "fold 3/3" in err and "alpha=" in err
    RidgeCV(alphas=(0.1, 1.0), verbose=0).fit(X, X[:, 1])
    assert capsys.readouterr().err == ""


def test_leave_one_out_bit_identical_for_any_n_jobs():
    # The streamed Gram path (features=, several chunks, a gamma path):
    # scores, choice and model the same bits whatever the thread count.
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 6))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=3000)
    fits = [RidgeCV(np.logspace(-3, 2, 6), features=RandomFourierFeatures(300, random_state=0), gammas=[0.1, 1.0],
                    chunk_size=700, store_cv_results=True, n_jobs=j).fit(X, y) for j in (1, 2)]
    assert fits[0].alpha_ == fits[1].alpha_ and fits[0].gamma_ == fits[1].gamma_
    np.testing.assert_array_equal(fits[0].cv_results_, fits[1].cv_results_)
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)


@pytest.mark.parametrize("cv", [None, "gcv"])
@pytest.mark.parametrize("weighted", [False, True])
def test_sparse_features_with_fewer_rows_than_columns_take_the_sparse_kernel_path(cv, weighted):
    # Binning features, N < D <= 10000: the N × N kernel from sparse products (ZZᵀ − Zμ1ᵀ − 1μᵀZᵀ + μᵀμ),
    # not the D × D Gram; equal to the dense kernel path.
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (150, 6))
    y = np.sin(8 * X[:, 0]) + 0.1 * rng.standard_normal(150)
    Z = RandomBinningFeatures(20, gamma=10.0, random_state=0).fit_transform(X)
    assert 150 < Z.shape[1] <= 10000
    w = rng.uniform(0.5, 2, 150) if weighted else None
    sparse = RidgeCV(ALPHAS, cv=cv, store_cv_results=True).fit(Z, y, sample_weight=w)
    dense = RidgeCV(ALPHAS, cv=cv, store_cv_results=True).fit(Z.toarray(), y, sample_weight=w)
    np.testing.assert_allclose(sparse.cv_results_, dense.cv_results_, rtol=1e-8, atol=1e-12)
    assert sparse.alpha_ == dense.alpha_ and rel(sparse.coef_, dense.coef_) < 1e-10
