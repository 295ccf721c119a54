"""scikit-learn's own Ridge test cases (sklearn/linear_model/tests/estimators/test_ridge.py), rewritten for randfeat.

The cases (issue 14's conformance list) are re-expressed here, not copied:
a constructed problem with a known answer, alpha = 0 on rank-deficient X
(the minimum-norm least-squares solution, for long and wide X made singular
by repeating columns or rows), sample weights as repeated rows, attribute
shapes, and the CG warnings.  scikit-learn itself is the oracle wherever it
computes the same thing.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge as SkRidge
from sklearn.linear_model import RidgeClassifier as SkRidgeClassifier

from randfeat import Ridge, RidgeClassifier


def _problem(n, d, seed=0):
    """X (n, d), y = X c + 3 + small noise: long (n > d) or wide (n < d)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    c = rng.uniform(-1, 1, size=d)
    return X, X @ c + 3.0 + 0.01 * rng.normal(size=n)


SHAPES = [(60, 10), (10, 60)]  # long and wide


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("n, d", SHAPES)
def test_ridge_matches_sklearn_at_alpha_one(solver, fit_intercept, n, d):
    X, y = _problem(n, d)
    ours = Ridge(alpha=1.0, solver=solver, fit_intercept=fit_intercept, tol=1e-12).fit(X, y)
    ref = SkRidge(alpha=1.0, fit_intercept=fit_intercept, solver="svd").fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-8, atol=1e-10)
    assert ours.score(X, y) == pytest.approx(ref.score(X, y), rel=1e-10)


class _MinNorm:
    """The minimum-norm least-squares fit (intercept unpenalised), by LAPACK's gelsd as scikit-learn's test does."""

    def __init__(self, X, y, fit_intercept):
        xm, ym = (X.mean(axis=0), y.mean()) if fit_intercept else (np.zeros(X.shape[1]), 0.0)
        self.coef_ = np.linalg.lstsq(X - xm, y - ym, rcond=None)[0]
        self.intercept_ = ym - xm @ self.coef_


def _min_norm_reference(X, y, fit_intercept):
    return _MinNorm(X, y, fit_intercept)


@pytest.mark.parametrize("alpha", [0.0, 1e-16])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("n, d", SHAPES)
def test_unpenalised_ridge_on_repeated_columns_is_the_minimum_norm_solution(alpha, fit_intercept, n, d):
    X, y = _problem(n, d, seed=1)
    X2 = 0.5 * np.hstack([X, X])  # singular Gram: infinitely many least-squares solutions
    ours = Ridge(alpha=alpha, solver="cholesky", fit_intercept=fit_intercept).fit(X2, y)
    ref = _min_norm_reference(X2, y, fit_intercept)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-7, atol=1e-9)
    # The two copies of a column get equal weights (the minimum norm's signature).
    np.testing.assert_allclose(ours.coef_[:d], ours.coef_[d:], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("n, d", SHAPES)
def test_unpenalised_ridge_on_repeated_rows_is_the_minimum_norm_solution(fit_intercept, n, d):
    X, y = _problem(n, d, seed=2)
    X2, y2 = np.vstack([X, X]), np.r_[y, y]
    ours = Ridge(alpha=0.0, solver="cholesky", fit_intercept=fit_intercept).fit(X2, y2)
    ref = _min_norm_reference(X2, y2, fit_intercept)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    if n < d:  # wide: interpolates
        np.testing.assert_allclose(ours.predict(X), y, atol=1e-8)


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
@pytest.mark.parametrize("sparse", [False, True])
def test_integer_sample_weights_equal_repeated_rows(solver, sparse):
    X, y = _problem(40, 6, seed=3)
    w = np.random.default_rng(3).integers(0, 4, size=40)
    Xw = sp.csr_matrix(X) if sparse else X
    weighted = Ridge(alpha=0.5, solver=solver, tol=1e-12).fit(Xw, y, sample_weight=w.astype(float))
    rows = np.repeat(np.arange(40), w)
    Xr = sp.csr_matrix(X[rows]) if sparse else X[rows]
    repeated = Ridge(alpha=0.5, solver=solver, tol=1e-12).fit(Xr, y[rows])
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(weighted.intercept_, repeated.intercept_, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("y_shape", [(30,), (30, 1), (30, 3)])
def test_attribute_shapes_match_sklearn(fit_intercept, y_shape):
    rng = np.random.default_rng(4)
    X, y = rng.normal(size=(30, 5)), rng.normal(size=y_shape)
    ours = Ridge(fit_intercept=fit_intercept).fit(X, y)
    ref = SkRidge(fit_intercept=fit_intercept).fit(X, y)
    assert ours.coef_.shape == ref.coef_.shape
    assert np.shape(ours.intercept_) == np.shape(ref.intercept_)
    assert ours.predict(X).shape == ref.predict(X).shape


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_shapes_and_scores_match_sklearn(n_classes, fit_intercept):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(90, 4))
    y = rng.integers(0, n_classes, size=90)
    ours = RidgeClassifier(alpha=1.0, fit_intercept=fit_intercept).fit(X, y)
    ref = SkRidgeClassifier(alpha=1.0, fit_intercept=fit_intercept).fit(X, y)
    assert ours.coef_.shape == ref.coef_.shape  # (4,) for two classes (scikit-learn >= 1.9)
    assert np.shape(ours.intercept_) == np.shape(ref.intercept_)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_dtype_is_kept_and_float32_is_close_to_float64(dtype, solver):
    X, y = _problem(80, 8, seed=6)
    ours = Ridge(alpha=1.0, solver=solver).fit(X.astype(dtype), y)
    ref = SkRidge(alpha=1.0).fit(X, y)
    assert ours.coef_.dtype == dtype
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4 if dtype == np.float32 else 1e-7)


def test_cg_warns_when_alpha_is_too_small_for_the_tolerance():
    X, y = _problem(10, 60, seed=7)
    X2 = np.hstack([X, X])
    with pytest.warns(UserWarning, match="alpha=0 is below tol"):
        Ridge(alpha=0.0, solver="cg").fit(X2, y)


def test_cg_at_tol_zero_gives_no_spurious_breakdown_warning():
    # tol=0 is not reached (a ConvergenceWarning, as scikit-learn's sparse_cg), but CG did not break down.
    X, y = _problem(50, 20, seed=8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = Ridge(alpha=1.0, solver="cg", tol=0.0).fit(X, y)
    assert not [w for w in caught if "broke down" in str(w.message)]
    assert all(issubclass(w.category, ConvergenceWarning) for w in caught)
    ref = SkRidge(alpha=1.0).fit(X, y)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-12, atol=1e-13)


def test_cg_convergence_failure_is_a_convergence_warning():
    X, y = _problem(200, 50, seed=9)
    with pytest.warns(ConvergenceWarning, match="did not converge within max_iter=1"):
        Ridge(alpha=1.0, solver="cg", max_iter=1).fit(X, y)
