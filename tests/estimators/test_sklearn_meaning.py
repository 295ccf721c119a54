"""Issue 33, part 3: where randfeat uses scikit-learn's names, they mean what scikit-learn means.

Each test compares with scikit-learn itself (installed: the oracle) or with
its documented behaviour; each failed before the fix.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.linear_model as sklm
from sklearn.datasets import make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import AdditiveChi2Sampler as SkAdditiveChi2Sampler
from sklearn.model_selection import KFold, LeaveOneOut

from randfeat import (
    AdditiveChi2Sampler,
    RandomFourierFeatures,
    Ridge,
    RidgeClassifier,
    RidgeClassifierCV,
    RidgeCV,
)


def _mean_squared_error_callable(y_test, y_pred):  # a plain callable, not a scorer (scikit-learn's test_ridge)
    return ((y_test - y_pred) ** 2).mean()


# ------------------------------------------------------------- RidgeCV with cv not None
@pytest.mark.parametrize("Est", [RidgeCV, RidgeClassifierCV])
@pytest.mark.parametrize("cv", [3, KFold(4), LeaveOneOut()])
@pytest.mark.parametrize("scoring", [None, _mean_squared_error_callable])
def test_kfold_refuses_store_cv_results_as_sklearn(Est, cv, scoring):
    rng = np.random.RandomState(42)
    X = rng.randn(12, 5)
    y = rng.randn(12) if Est is RidgeCV else np.arange(12) % 2
    SkEst = sklm.RidgeCV if Est is RidgeCV else sklm.RidgeClassifierCV
    with pytest.raises(ValueError, match="cv!=None and store_cv_results=True are incompatible"):
        SkEst(cv=cv, store_cv_results=True, scoring=scoring).fit(X, y)
    with pytest.raises(ValueError, match="cv!=None and store_cv_results=True are incompatible"):
        Est(cv=cv, store_cv_results=True, scoring=scoring).fit(X, y)


@pytest.mark.parametrize("cv", [6, LeaveOneOut()])
def test_kfold_refuses_alpha_per_target_as_sklearn(cv):
    rng = np.random.RandomState(0)
    X, Y = rng.randn(12, 4), rng.randn(12, 2)
    msg = "cv!=None and alpha_per_target=True are incompatible"
    with pytest.raises(ValueError, match=msg):
        sklm.RidgeCV(cv=cv, alpha_per_target=True).fit(X, Y)
    with pytest.raises(ValueError, match=msg):
        RidgeCV(cv=cv, alpha_per_target=True).fit(X, Y)
    # leave-one-out and GCV keep them
    for c in (None, "gcv"):
        m = RidgeCV(cv=c, alpha_per_target=True, store_cv_results=True).fit(X, Y)
        assert m.alpha_.shape == (2,)


def test_plain_callable_scoring_is_called_as_sklearn_calls_it():
    # scikit-learn calls scoring(estimator, X, y): a two-argument metric fails the same way in both.
    rng = np.random.RandomState(0)
    X, y = rng.randn(10, 3), rng.randn(10)
    with pytest.raises(TypeError) as sk_err:
        sklm.RidgeCV(scoring=_mean_squared_error_callable).fit(X, y)
    with pytest.raises(TypeError) as our_err:
        RidgeCV(scoring=_mean_squared_error_callable).fit(X, y)
    assert "positional argument" in str(sk_err.value) and "positional argument" in str(our_err.value)

    def scorer(est, X_, y_):  # a true scorer callable: the same alpha and score as scikit-learn
        return -np.mean((est.predict(X_) - y_) ** 2)

    ours, ref = RidgeCV(scoring=scorer).fit(X, y), sklm.RidgeCV(scoring=scorer).fit(X, y)
    assert ours.alpha_ == ref.alpha_
    assert ours.best_score_ == pytest.approx(ref.best_score_, rel=1e-10)


# ------------------------------------------------------------- ConvergenceWarning at tol=0
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("features", [None, "rff"])
def test_cg_at_tol_zero_warns_as_sklearn_sparse_cg(fit_intercept, features):
    rng = np.random.RandomState(0)
    y, X = rng.randn(5), rng.randn(5, 10)
    # scikit-learn's test_ridge_regression_convergence_fail (it warns when verbose; randfeat always warns)
    with pytest.warns(ConvergenceWarning, match="sparse_cg did not converge"):
        sklm.ridge_regression(X, y, alpha=1.0, solver="sparse_cg", tol=0.0, max_iter=None, verbose=1)
    fm = None if features is None else RandomFourierFeatures(40, random_state=0)
    with pytest.warns(ConvergenceWarning, match="tol=0"):
        Ridge(solver="cg", tol=0.0, fit_intercept=fit_intercept, features=fm).fit(X, y)


def test_cg_at_max_iter_warns():
    rng = np.random.RandomState(1)
    X, y = rng.randn(100, 30), rng.randn(100)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        Ridge(solver="cg", tol=1e-12, max_iter=2).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        Ridge(solver="cg", tol=1e-8).fit(X, y)  # converges: no warning


# ------------------------------------------------------------- cv_results_ on wide X
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n_targets", [1, 2])
def test_cv_results_predictions_on_wide_X_equal_leave_one_out_fits(fit_intercept, weighted, n_targets):
    # scikit-learn's test_ridge_cv_results_predictions (wide): stored predictions to rtol 1e-6.
    X, y = make_regression(n_samples=10, n_features=50, n_targets=n_targets, random_state=0)
    sw = None
    if weighted:
        sw = np.ones(10)
        sw[::2] = 0.5
    alphas = np.logspace(-5, 7, 5)
    ours = RidgeCV(alphas, scoring="neg_mean_squared_error", fit_intercept=fit_intercept,
                   store_cv_results=True).fit(X, y, sample_weight=sw)
    pred = np.empty((*y.shape, len(alphas)))
    for a, alpha in enumerate(alphas):
        for i, (train, test) in enumerate(LeaveOneOut().split(X)):
            r = sklm.Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="svd")
            r.fit(X[train], y[train], sample_weight=None if sw is None else sw[train])
            pred[i, ..., a] = r.predict(X[test])
    np.testing.assert_allclose(ours.cv_results_, pred, rtol=1e-6)
    ref = sklm.RidgeCV(alphas, scoring="neg_mean_squared_error", fit_intercept=fit_intercept,
                       store_cv_results=True).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(ours.cv_results_, ref.cv_results_, rtol=1e-6)


# ------------------------------------------------------------- AdditiveChi2Sampler's message
@pytest.mark.parametrize("sparse", [False, True])
def test_additive_chi2_negative_input_message_is_sklearns(sparse):
    X = np.array([[1.0, -1.0], [2.0, 3.0]])
    X = sp.csr_matrix(X) if sparse else X
    messages = []
    for Est in (SkAdditiveChi2Sampler, AdditiveChi2Sampler):
        with pytest.raises(ValueError) as fit_err:
            Est().fit(X)
        with pytest.raises(ValueError) as transform_err:
            Est().fit(abs(X)).transform(X)
        messages.append((str(fit_err.value), str(transform_err.value)))
    assert messages[0] == messages[1]
    assert "X in AdditiveChi2Sampler" in messages[1][0]


# ------------------------------------------------------------- class_weight
def _labels(n=60, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 4)
    y = np.r_[np.zeros(n - n // 4 - 5, int), np.ones(n // 4, int), 2 * np.ones(5, int)]
    X[y == 1] += 1.0
    X[y == 2] -= 1.0
    return X, y, rng.uniform(0.5, 2.0, n)


@pytest.mark.parametrize("class_weight", ["balanced", {0: 0.5, 2: 3.0}, {0: 1.0, 1: 2.0, 2: 4.0}, {}])
@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_ridge_classifier_class_weight_as_sklearn(class_weight, binary, weighted):
    X, y, sw = _labels()
    if binary:
        y = (y > 0).astype(int)
        if isinstance(class_weight, dict) and class_weight:
            class_weight = {0: 0.3, 1: 2.0}
    sw = sw if weighted else None
    ours = RidgeClassifier(class_weight=class_weight).fit(X, y, sample_weight=sw)
    ref = sklm.RidgeClassifier(class_weight=class_weight).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))


@pytest.mark.parametrize("class_weight", ["balanced", {0: 0.5, 2: 3.0}])
@pytest.mark.parametrize("cv", [None, 3])
def test_ridge_classifier_cv_class_weight_as_sklearn(class_weight, cv):
    X, y, _ = _labels(seed=1)
    ours = RidgeClassifierCV([0.1, 1.0, 10.0], cv=cv, class_weight=class_weight).fit(X, y)
    ref = sklm.RidgeClassifierCV([0.1, 1.0, 10.0], cv=cv, class_weight=class_weight).fit(X, y)
    assert ours.alpha_ == ref.alpha_
    assert ours.best_score_ == pytest.approx(ref.best_score_, rel=1e-8)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))


def test_ridge_classifier_cv_class_weight_sklearn_case():
    # scikit-learn's test_class_weights_cv: a tiny weight on class 1 flips the prediction.
    X = np.array([[-1.0, -1.0], [-1.0, 0], [-0.8, -1.0], [1.0, 1.0], [1.0, 0.0]])
    y = [1, 1, 1, -1, -1]
    reg = RidgeClassifierCV(class_weight=None, alphas=[0.01, 0.1, 1]).fit(X, y)
    assert reg.predict([[-0.2, 2]]).tolist() == [1]
    reg = RidgeClassifierCV(class_weight={1: 0.001}, alphas=[0.01, 0.1, 1, 10]).fit(X, y)
    assert reg.predict([[-0.2, 2]]).tolist() == [-1]


@pytest.mark.parametrize("class_weight", ["balanced", {0: 0.5, 1: 1.0, 2: 3.0}])
def test_class_weight_with_features_is_sample_weights_on_the_features(class_weight):
    X, y, _ = _labels(seed=2)
    fm = RandomFourierFeatures(50, random_state=0)
    ours = RidgeClassifier(class_weight=class_weight, features=fm).fit(X, y)
    ref = sklm.RidgeClassifier(class_weight=class_weight).fit(fm.fit_transform(X), y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8, atol=1e-8)
    cv = RidgeClassifierCV([0.1, 1.0], class_weight=class_weight, features=fm).fit(X, y)
    cv_ref = sklm.RidgeClassifierCV([0.1, 1.0], class_weight=class_weight).fit(fm.fit_transform(X), y)
    assert cv.alpha_ == cv_ref.alpha_
    np.testing.assert_allclose(cv.coef_, cv_ref.coef_, rtol=1e-8, atol=1e-8)


def test_class_weight_is_a_parameter_and_validated():
    assert RidgeClassifier(class_weight="balanced").get_params()["class_weight"] == "balanced"
    assert RidgeClassifierCV(class_weight={0: 2.0}).get_params()["class_weight"] == {0: 2.0}
    X, y, _ = _labels()
    with pytest.raises(ValueError, match="class_weight"):
        RidgeClassifier(class_weight="balance").fit(X, y)


def test_partial_fit_with_class_weight():
    X, y, _ = _labels(seed=3)
    cw = {0: 0.5, 1: 1.0, 2: 3.0}
    inc = RidgeClassifier(class_weight=cw)
    for s in range(0, 60, 20):
        inc.partial_fit(X[s:s + 20], y[s:s + 20], classes=[0, 1, 2])
    ref = sklm.RidgeClassifier(class_weight=cw).fit(X, y)
    np.testing.assert_allclose(inc.coef_, ref.coef_, rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="'balanced' is not supported for partial_fit"):
        RidgeClassifier(class_weight="balanced").partial_fit(X, y, classes=[0, 1, 2])


@pytest.mark.parametrize("class_weight", ["balanced", {0: 0.5, 2: 3.0}])
def test_class_weight_on_dask_arrays(class_weight):
    da = pytest.importorskip("dask.array")
    X, y, _ = _labels(90, seed=4)
    ours = RidgeClassifier(class_weight=class_weight).fit(da.from_array(X, chunks=30), da.from_array(y, chunks=30))
    ref = sklm.RidgeClassifier(class_weight=class_weight).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8, atol=1e-8)
