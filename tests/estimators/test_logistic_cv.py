"""Tests of randfeat.LogisticRegressionCV: scikit-learn's LogisticRegressionCV on the materialised features is the oracle.

scikit-learn runs with solver="newton-cholesky" and tol=1e-10 (its tightest
convergence), randfeat with tol=1e-10: both then find each fold's optimum
to ~1e-9, so scores_ agree to 1e-6 and the choices are the same.
"""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegressionCV as SkLogisticRegressionCV
from sklearn.metrics import make_scorer, roc_auc_score
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import check_param_validation, parametrize_with_checks

from randfeat import LogisticRegression, LogisticRegressionCV, RandomBinningFeatures, RandomFourierFeatures

CS = np.logspace(-2, 2, 5)
TIGHT = dict(tol=1e-10, max_iter=1000)


def data(n_classes, n=300, seed=0):
    X, y = make_classification(n, 4, n_informative=3, n_redundant=0, n_classes=n_classes, n_clusters_per_class=1,
                               flip_y=0.05, random_state=seed)
    return X, y


def rff(D=40, gamma=0.5, seed=0):
    return RandomFourierFeatures(D, gamma=gamma, random_state=seed)


def sk_cv(Z, y, sample_weight=None, **kwargs):
    """scikit-learn's LogisticRegressionCV (legacy attributes, L2) fitted tightly on Z."""
    kwargs = {"Cs": CS, "solver": "newton-cholesky", "scoring": None, **TIGHT, **kwargs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # l1_ratios / use_legacy_attributes transition notes
        return SkLogisticRegressionCV(use_legacy_attributes=True, **kwargs).fit(Z, y, sample_weight=sample_weight)


def rf_cv(X, y, sample_weight=None, **kwargs):
    kwargs = {"Cs": CS, **TIGHT, **kwargs}
    return LogisticRegressionCV(**kwargs).fit(X, y, sample_weight=sample_weight)


def assert_same_as_sklearn(est, ref, *, coef_atol=1e-5):
    """Every attribute scikit-learn's LogisticRegressionCV shares, compared."""
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    np.testing.assert_array_equal(est.Cs_, ref.Cs_)
    assert est.C_.shape == ref.C_.shape
    np.testing.assert_allclose(est.C_, ref.C_, rtol=1e-12)
    assert est.scores_.keys() == ref.scores_.keys() and est.coefs_paths_.keys() == ref.coefs_paths_.keys()
    for c in ref.scores_:
        assert est.scores_[c].shape == ref.scores_[c].shape
        np.testing.assert_allclose(est.scores_[c], ref.scores_[c], rtol=0, atol=1e-6)
        assert est.coefs_paths_[c].shape == ref.coefs_paths_[c].shape
        np.testing.assert_allclose(est.coefs_paths_[c], ref.coefs_paths_[c], rtol=0, atol=coef_atol)
    assert est.n_iter_.shape == ref.n_iter_.shape
    assert est.coef_.shape == ref.coef_.shape and est.intercept_.shape == ref.intercept_.shape
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=coef_atol)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=0, atol=coef_atol)


# ------------------------------------------------------------ the oracle
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("refit", [True, False])
@pytest.mark.parametrize("scoring", [None, "neg_log_loss"])
def test_equals_sklearn_on_the_feature_matrix(n_classes, refit, scoring):
    X, y = data(n_classes)
    Z = rff().fit_transform(X)
    est = rf_cv(Z, y, refit=refit, scoring=scoring)
    ref = sk_cv(Z, y, refit=refit, scoring=scoring)
    assert_same_as_sklearn(est, ref)
    np.testing.assert_allclose(est.predict_proba(Z), ref.predict_proba(Z), atol=1e-6)
    np.testing.assert_array_equal(est.predict(Z), ref.predict(Z))
    assert est.score(Z, y) == pytest.approx(ref.score(Z, y), abs=1e-6)  # ``scoring``'s score, as scikit-learn's


@pytest.mark.parametrize("n_classes", [2, 3])
def test_a_map_equals_its_materialised_features(n_classes):
    X, y = data(n_classes)
    est = rf_cv(X, y, features=rff())
    on_z = rf_cv(est.features_.transform(X), y)
    ref = sk_cv(est.features_.transform(X), y)
    assert_same_as_sklearn(est, ref)
    for c in est.scores_:
        np.testing.assert_array_equal(est.scores_[c], on_z.scores_[c])
        np.testing.assert_allclose(est.coefs_paths_[c], on_z.coefs_paths_[c], rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.coef_, on_z.coef_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(est.features_.transform(X)), atol=1e-6)
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(est.features_.transform(X)),
                               atol=1e-5)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("route", ["lbfgs", "logistic.fit"])
def test_other_solver_routes_equal_sklearn(n_classes, route, monkeypatch):
    # L-BFGS warm-started along the path; and a solver the path engine does not know, run by logistic.fit.
    from randfeat._solvers import logistic_path

    X, y = data(n_classes)
    Z = rff().fit_transform(X)
    if route == "logistic.fit":
        monkeypatch.setattr(logistic_path, "choose_logistic_solver", lambda solver, n_params: "another")
    est = rf_cv(Z, y, scoring="neg_log_loss", solver="lbfgs" if route == "lbfgs" else "auto")
    assert_same_as_sklearn(est, sk_cv(Z, y, scoring="neg_log_loss"), coef_atol=1e-4)


def test_cs_as_an_int_is_sklearns_grid():
    X, y = data(2)
    Z = rff().fit_transform(X)
    est = LogisticRegressionCV(Cs=4).fit(Z, y)
    np.testing.assert_array_equal(est.Cs_, np.logspace(-4, 4, 4))
    ref = sk_cv(Z, y, Cs=4, tol=1e-4, max_iter=100)
    np.testing.assert_array_equal(est.Cs_, ref.Cs_)
    assert est.scores_[1].shape == (5, 4) and est.n_iter_.shape == (1, 5, 4)


@pytest.mark.parametrize("scoring", ["neg_log_loss", "neg_brier_score", "balanced_accuracy", "f1_macro", "roc_auc_ovr",
                                     "callable"])
def test_scoring_names_and_callables_as_sklearn(scoring):
    X, y = data(3)
    Z = rff().fit_transform(X)
    if scoring == "callable":
        scoring = make_scorer(roc_auc_score, response_method="predict_proba", multi_class="ovo")
    est = rf_cv(Z, y, scoring=scoring)
    ref = sk_cv(Z, y, scoring=scoring)
    assert_same_as_sklearn(est, ref)


def test_a_fold_without_a_class_is_scored_against_every_class():
    # Held-out rows of classes 0 and 1 only (training rows of all three): without labels=classes
    # log_loss and brier would refuse or misalign the columns; scikit-learn passes every class.
    X, y = data(3)
    Z = rff().fit_transform(X)
    rows = np.arange(len(y))
    cv = []
    for half in (0, 1):
        test = rows[(y < 2) & (rows % 2 == half)]
        cv.append((np.setdiff1d(rows, test), test))
    for scoring in ("neg_log_loss", "neg_brier_score"):
        est = rf_cv(Z, y, cv=cv, scoring=scoring)
        ref = sk_cv(Z, y, cv=cv, scoring=scoring)
        assert_same_as_sklearn(est, ref)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("class_weight", [None, "balanced", "dict"])
@pytest.mark.parametrize("weighted", [False, True])
def test_class_and_sample_weights_as_sklearn(n_classes, class_weight, weighted):
    X, y = data(n_classes, seed=3)
    Z = rff().fit_transform(X)
    if class_weight == "dict":
        class_weight = {0: 2.0, 1: 0.5}
    w = np.random.default_rng(1).uniform(0.2, 3.0, len(y)) if weighted else None
    est = rf_cv(Z, y, sample_weight=w, class_weight=class_weight, scoring="neg_log_loss")
    ref = sk_cv(Z, y, sample_weight=w, class_weight=class_weight, scoring="neg_log_loss")
    assert_same_as_sklearn(est, ref)


def test_negative_weights_fit_by_lbfgs_as_sklearn():
    # scikit-learn's LogisticRegressionCV accepts negative sample weights; so does randfeat's (one
    # validation with LogisticRegression): "auto" runs L-BFGS then, Newton refuses them.
    X, y = data(2, seed=3)
    Z = rff().fit_transform(X)
    w = np.where(np.random.default_rng(0).random(len(y)) < 0.05, -0.5, 1.0)
    assert np.any(w < 0)
    Cs = [0.05, 0.5, 0.2]
    est = rf_cv(Z, y, sample_weight=w, Cs=Cs, scoring="neg_log_loss", max_iter=5000)
    ref = sk_cv(Z, y, sample_weight=w, Cs=Cs, scoring="neg_log_loss", solver="lbfgs", max_iter=5000)
    assert_same_as_sklearn(est, ref)
    with pytest.raises(ValueError, match="'newton-cholesky' needs non-negative sample weights"):
        rf_cv(Z, y, sample_weight=w, Cs=Cs, solver="newton-cholesky")


@pytest.mark.parametrize("cv", ["kfold", "pairs", 3])
def test_cv_splitters_as_sklearn(cv):
    X, y = data(2)
    Z = rff().fit_transform(X)
    if cv == "kfold":
        cv = KFold(4, shuffle=True, random_state=0)
    elif cv == "pairs":
        cv = list(StratifiedKFold(3).split(Z, y))[:2]  # not every row held out: fine, as in scikit-learn
    est = rf_cv(Z, y, cv=cv)
    ref = sk_cv(Z, y, cv=cv)
    assert_same_as_sklearn(est, ref)


def test_fit_intercept_false():
    X, y = data(3)
    Z = rff().fit_transform(X)
    assert_same_as_sklearn(rf_cv(Z, y, fit_intercept=False), sk_cv(Z, y, fit_intercept=False))


def test_refit_is_logistic_regression_at_the_chosen_c():
    X, y = data(3)
    est = rf_cv(X, y, features=rff())
    one = LogisticRegression(C=est.C_[0], features=rff(), **TIGHT).fit(X, y)
    np.testing.assert_allclose(est.coef_, one.coef_, atol=1e-6)
    np.testing.assert_allclose(est.predict_proba(X), one.predict_proba(X), atol=1e-7)


def test_refit_false_averages_the_folds_best_models():
    X, y = data(2)
    est = rf_cv(X, y, features=rff(), refit=False)
    best = np.argmax(est.scores_[1], axis=1)
    paths = est.coefs_paths_[1]
    mean = np.mean([paths[k, b] for k, b in enumerate(best)], axis=0)
    np.testing.assert_array_equal(est.coef_[0], mean[:-1])
    assert est.intercept_[0] == mean[-1]
    assert est.C_[0] == np.mean(CS[best])


# ------------------------------------------------------------ inputs
@pytest.mark.parametrize("kind", ["csr", "binning", "float32"])
def test_sparse_binning_and_float32(kind):
    X, y = data(2)
    if kind == "csr":
        Z = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0))
        assert_same_as_sklearn(rf_cv(Z, y), sk_cv(Z, y))
    elif kind == "binning":
        est = rf_cv(X, y, features=RandomBinningFeatures(8, gamma=0.5, random_state=0))
        Z = est.features_.transform(X)
        assert sp.issparse(Z)
        assert_same_as_sklearn(est, sk_cv(Z, y))
    else:
        est = rf_cv(X.astype(np.float32), y, features=rff())
        assert est.coef_.dtype == np.float32
        Z = est.features_.transform(X.astype(np.float32)).astype(np.float64)
        assert_same_as_sklearn(est, sk_cv(Z, y), coef_atol=1e-4)


def test_sklearn_transformer_as_features():
    from sklearn.kernel_approximation import RBFSampler

    X, y = data(2)
    est = rf_cv(X, y, features=RBFSampler(n_components=30, random_state=0))
    assert_same_as_sklearn(est, sk_cv(RBFSampler(n_components=30, random_state=0).fit_transform(X), y))


def test_thread_count_does_not_change_the_result():
    X, y = data(3)
    one = rf_cv(X, y, features=rff(), n_jobs=1)
    two = rf_cv(X, y, features=rff(), n_jobs=2)
    for c in one.scores_:
        np.testing.assert_array_equal(one.scores_[c], two.scores_[c])
        np.testing.assert_array_equal(one.coefs_paths_[c], two.coefs_paths_[c])
    np.testing.assert_array_equal(one.coef_, two.coef_)


# ------------------------------------------------------------ gammas
def test_gammas_choose_the_gamma_of_the_best_score():
    X, y = data(2, n=240)
    gammas = [0.05, 0.5, 5.0]
    est = rf_cv(X, y, features=rff(), gammas=gammas, scoring="neg_log_loss")
    best = []
    for g in gammas:  # the oracle: scikit-learn's LogisticRegressionCV on each gamma's features
        ref = sk_cv(rff(gamma=g).fit_transform(X), y, scoring="neg_log_loss")
        best.append(ref.scores_[1].mean(axis=0).max())
        if g == est.gamma_:
            assert_same_as_sklearn(est, ref)
    np.testing.assert_allclose(est.gamma_scores_, best, rtol=0, atol=1e-6)
    assert est.gamma_ == gammas[int(np.argmax(best))]
    np.testing.assert_array_equal(est.gammas_, gammas)
    assert est.features_.gamma == est.gamma_
    np.testing.assert_array_equal(est.features_.transform(X), rff(gamma=est.gamma_).fit_transform(X))


@pytest.mark.parametrize("refit", [True, False])
def test_gammas_auto(refit):
    X, y = data(2, n=200)
    est = rf_cv(X, y, features=rff(), gammas="auto", Cs=[0.1, 10.0], refit=refit)
    assert est.gammas_.shape == (5,) and est.gamma_ in est.gammas_
    assert est.gamma_ == est.gammas_[int(np.argmax(est.gamma_scores_))]
    assert est.features_.gamma == est.gamma_
    ref = sk_cv(rff(gamma=est.gamma_).fit_transform(X), y, Cs=[0.1, 10.0], refit=refit)
    assert_same_as_sklearn(est, ref)


def test_gammas_need_a_kernel_width():
    X, y = data(2)
    with pytest.raises(InvalidParameterError, match="kernel width"):
        LogisticRegressionCV(gammas=[0.1, 1.0]).fit(X, y)


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize("Cs", [[], [0.0, 1.0], [-1.0], [1.0, np.inf], 0, "many"])
def test_bad_cs_are_clear_errors(Cs):
    X, y = data(2)
    with pytest.raises(InvalidParameterError, match="Cs"):
        LogisticRegressionCV(Cs=Cs).fit(X, y)


def test_more_folds_than_a_class_has_rows_is_sklearns_error():
    X, _ = data(2, n=8)
    y = np.array([0, 1] * 4)  # 4 rows per class, 5 stratified folds
    with pytest.raises(ValueError) as ours:
        LogisticRegressionCV(cv=5, Cs=2).fit(X, y)
    with pytest.raises(ValueError) as theirs:
        sk_cv(X, y, cv=5, Cs=2)
    assert "cannot be greater than the number of members in each class" in str(ours.value)
    assert str(ours.value) == str(theirs.value)


def test_a_small_class_warns_as_sklearn():
    X, _ = data(2, n=60)
    y = (np.arange(60) < 3).astype(int)  # 3 rows of class 1, 5 folds: scikit-learn's warning, then the fit
    with pytest.warns(UserWarning, match="least populated class"):
        est = LogisticRegressionCV(cv=5, Cs=2).fit(X, y)
    assert est.scores_[1].shape == (5, 2)


@pytest.mark.parametrize("bad", ["one class", "nan weight", "negative weight", "nan X", "mixed labels",
                                 "absent class weight", "cv"])
def test_bad_input_is_refused_and_leaves_the_fit(bad):
    X, y = data(2)
    est = LogisticRegressionCV(Cs=3, features=rff()).fit(X, y)
    before = pickle.dumps(est)
    w = None
    Xb, yb = X, y
    params = {}
    if bad == "one class":
        yb = np.zeros_like(y)
    elif bad == "nan weight":
        w = np.ones(len(y))
        w[3] = np.nan
    elif bad == "negative weight":  # accepted as scikit-learn accepts it, but not by Newton
        w = np.ones(len(y))
        w[3] = -1.0
        params = {"solver": "newton-cholesky"}
    elif bad == "nan X":
        Xb = X.copy()
        Xb[0, 0] = np.nan
    elif bad == "mixed labels":
        yb = np.array([1 if i % 2 else "a" for i in range(len(y))], dtype=object)
    elif bad == "absent class weight":
        params = {"class_weight": {7: 2.0}}
    else:
        params = {"cv": 1}
    good = {k: getattr(est, k) for k in params}
    with pytest.raises(ValueError):
        est.set_params(**params).fit(Xb, yb, sample_weight=w)
    est.set_params(**good)
    restored = pickle.loads(before)
    for c in restored.scores_:
        np.testing.assert_array_equal(est.scores_[c], restored.scores_[c])
    np.testing.assert_array_equal(est.coef_, restored.coef_)
    np.testing.assert_array_equal(est.predict_proba(X), restored.predict_proba(X))


def test_a_fold_without_weight_is_a_clear_error():
    X, y = data(2, n=90)
    w = np.ones(len(y))
    cv = [(np.arange(0, 30), np.arange(30, 90)), (np.arange(30, 90), np.arange(0, 30))]
    w[:30] = 0.0
    with pytest.raises(ValueError, match="fold 1 sum to 0"):
        LogisticRegressionCV(Cs=2, cv=cv).fit(X, y, sample_weight=w)


# ------------------------------------------------------------ the rest
def test_verbose_reports_folds_and_the_choice(capsys):
    X, y = data(2)
    LogisticRegressionCV(Cs=2, verbose=1, features=rff(), gammas=[0.1, 1.0]).fit(X, y)
    err = capsys.readouterr().err
    assert "fold 5" in err and "gamma=" in err and "selected" in err


def test_pickle_round_trip():
    X, y = data(3)
    est = LogisticRegressionCV(Cs=3, features=rff()).fit(X, y)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict_proba(X), est.predict_proba(X))


def test_sklearn_param_validation():
    X, y = data(2)
    check_param_validation("LogisticRegressionCV", LogisticRegressionCV(Cs=2))


@parametrize_with_checks([LogisticRegressionCV(Cs=3, cv=3),
                          LogisticRegressionCV(Cs=3, cv=3, features=RandomFourierFeatures(20, gamma=1.0, random_state=0))])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
