"""Parameter validation of every estimator and of kernel_matrix (issue 10).

Every bad parameter raises scikit-learn's ``InvalidParameterError`` (a
ValueError, so ``except ValueError`` catches it as for any scikit-learn
estimator), with scikit-learn's message, plus randfeat's explanation where it
knows more.  scikit-learn's own ``check_param_validation`` is the oracle for
the declared constraints.
"""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import check_param_validation

from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier, kernel_matrix

RNG = np.random.default_rng(0)
X = RNG.normal(size=(20, 3))
Y_REG = X @ [1.0, -2.0, 0.5] + 0.1 * RNG.normal(size=20)
Y_CLF = (Y_REG > np.median(Y_REG)).astype(int)

ESTIMATORS = [
    RandomFourierFeatures(4, random_state=0),
    RandomBinningFeatures(5, random_state=0),
    Ridge(),
    RidgeClassifier(),
]


def _fit(est):
    if isinstance(est, RidgeClassifier):
        return est.fit(X, Y_CLF)
    if isinstance(est, Ridge):
        return est.fit(X, Y_REG)
    return est.fit(X)


class _NotAParameter:
    pass


# Bad values common to every estimator: n_jobs and random_state.
COMMON_BAD = [
    ("n_jobs", 0, "n_jobs == 0 has no meaning"),
    ("n_jobs", 1.5, None),
    ("n_jobs", "2", None),
    ("n_jobs", True, None),
]
RANDOM_STATE_BAD = [("random_state", "seed", None), ("random_state", 1.5, None), ("random_state", -1, None)]

BAD = {
    RandomFourierFeatures: COMMON_BAD
    + RANDOM_STATE_BAD
    + [
        ("n_components", 0, None),
        ("n_components", -4, None),
        ("n_components", 2.0, None),
        ("n_components", True, None),
        ("n_components", "10", None),
        ("gamma", 0.0, None),
        ("gamma", -1.0, None),
        ("gamma", np.inf, None),
        ("gamma", np.nan, None),
        ("gamma", "auto", None),
        ("gamma", True, None),
        ("kernel", "poly", None),
        ("kernel", None, None),
        ("feature_map", "sin", None),
        ("sampling", "sobol", None),
        ("nu", 1.0, None),
        ("nu", "1.5", None),
    ],
    RandomBinningFeatures: COMMON_BAD
    + RANDOM_STATE_BAD
    + [
        ("n_grids", 0, None),
        ("n_grids", 2.5, None),
        ("n_grids", True, None),
        ("gamma", 0.0, None),
        ("gamma", -1.0, None),
        ("gamma", "auto", None),
        ("gamma", np.inf, None),
        ("gamma", False, None),
        ("kernel", "poly", None),
        ("kernel", "rbf", "negative near 0"),
        ("kernel", "cauchy", "negative near 0"),
        ("kernel", "matern", "separable"),
    ],
}
BAD[Ridge] = BAD[RidgeClassifier] = COMMON_BAD + [
    ("alpha", -1.0, None),
    ("alpha", "1", None),
    ("alpha", np.inf, None),
    ("alpha", np.nan, None),
    ("alpha", True, None),
    ("alpha", [1.0, 2.0], None),
    ("tol", -1e-3, None),
    ("tol", np.inf, None),
    ("tol", "small", None),
    ("max_iter", 0, None),
    ("max_iter", 2.5, None),
    ("max_iter", True, None),
    ("chunk_size", 0, None),
    ("chunk_size", 10.0, None),
    ("solver", "lsqr", None),
    ("solver", None, None),
    ("fit_intercept", "yes", None),
    ("fit_intercept", 1, None),
    ("verbose", -1, None),
    ("verbose", 1.5, None),
    ("features", "rff", "randfeat feature map"),
]

CASES = [
    pytest.param(type(est), name, value, extra, id=f"{type(est).__name__}-{name}={value!r}")
    for est in ESTIMATORS
    for name, value, extra in BAD[type(est)]
]


@pytest.mark.parametrize("Est, name, value, extra", CASES)
def test_bad_parameter_raises_invalid_parameter_error(Est, name, value, extra):
    est = clone(next(e for e in ESTIMATORS if type(e) is Est)).set_params(**{name: value})
    with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of {Est.__name__} must be .* Got .* instead\.") as info:
        _fit(est)
    assert isinstance(info.value, ValueError)  # `except ValueError` catches it, as in scikit-learn
    if extra:
        assert extra in str(info.value)


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_sklearn_check_param_validation(est):
    # scikit-learn's own check: a constraint for every parameter, and an
    # InvalidParameterError with its message for a value of no valid type and
    # for an invalid value of each constraint.
    check_param_validation(type(est).__name__, est)


@pytest.mark.parametrize("method", ["fit", "fit_transform"])
@pytest.mark.parametrize("Est", [RandomFourierFeatures, RandomBinningFeatures])
def test_fit_transform_validates_too(Est, method):
    with pytest.raises(InvalidParameterError, match="n_jobs == 0"):
        getattr(Est(n_jobs=0), method)(X)


# ------------------------------------------------- randfeat's own explanations
def test_orthogonal_sampling_needs_a_radial_kernel():
    for kernel in ("laplacian", "cauchy"):
        with pytest.raises(InvalidParameterError, match="sampling='orthogonal' does not apply .*spherically symmetric"):
            RandomFourierFeatures(4, kernel=kernel, sampling="orthogonal").fit(X)
    for kernel in ("rbf", "matern"):
        RandomFourierFeatures(4, kernel=kernel, sampling="orthogonal").fit(X)


def test_binning_rbf_message_explains_why():
    with pytest.raises(InvalidParameterError) as info:
        RandomBinningFeatures(kernel="rbf").fit(X)
    msg = str(info.value)
    assert "rbf" in msg and "binning" in msg and "RandomFourierFeatures" in msg and "negative near 0" in msg


def test_ridge_features_takes_any_scikit_learn_transformer():
    # Issue 34: a transformer is wrapped (TransformerMap), not refused; what is
    # neither a map nor a transformer names both.
    assert RidgeClassifier(features=StandardScaler()).fit(X, Y_CLF).features_.n_features_out_ == X.shape[1]
    with pytest.raises(InvalidParameterError, match=r"randfeat feature map .*, a scikit-learn transformer"):
        RidgeClassifier(features=object()).fit(X, Y_CLF)


def test_nested_feature_map_parameters_are_validated():
    # Ridge fits a clone of features=; its parameters are validated by its own
    # fit (Ridge's fit does not skip nested validation).
    with pytest.raises(InvalidParameterError, match="'n_components' parameter of RandomFourierFeatures"):
        Ridge(features=RandomFourierFeatures(0)).fit(X, Y_REG)
    with pytest.raises(InvalidParameterError, match="Random binning features cannot represent kernel='rbf'"):
        Ridge(features=RandomBinningFeatures(kernel="rbf")).fit(X, Y_REG)


def test_valid_edge_values_are_accepted():
    # bounds that scikit-learn accepts are accepted here too
    _fit(Ridge(alpha=0.0, tol=0.0, solver="cholesky"))
    _fit(Ridge(alpha=np.float32(0.5), max_iter=np.int64(3), solver="cg", verbose=False, n_jobs=-2))
    RandomFourierFeatures(np.int64(3), gamma=np.float32(0.5), nu=np.float64(2.5), random_state=np.random.default_rng(0)).fit(X)
    RandomFourierFeatures(1, random_state=np.random.RandomState(0), n_jobs=-1).fit(X)
    RandomBinningFeatures(np.int32(2), gamma=3, n_jobs=1).fit(X)


# -------------------------------------- parameters read after fit (n_jobs, ...)
@pytest.mark.parametrize("est", ESTIMATORS[:2], ids=lambda e: type(e).__name__)
def test_n_jobs_set_after_fit_is_validated_in_transform(est):
    est = _fit(clone(est))
    est.set_params(n_jobs=0)
    with pytest.raises(InvalidParameterError, match="n_jobs == 0 has no meaning"):
        est.transform(X)
    est.set_params(n_jobs=1)
    est.transform(X)


def test_chunk_size_set_after_fit_is_validated_in_predict():
    est = Ridge(features=RandomFourierFeatures(6, random_state=0)).fit(X, Y_REG)
    before = est.predict(X)
    est.set_params(chunk_size=0)
    with pytest.raises(InvalidParameterError, match="'chunk_size' parameter of Ridge"):
        est.predict(X)
    est.set_params(chunk_size=3)  # any chunking gives the same predictions
    np.testing.assert_array_equal(est.predict(X), before)


# --------------------------------------------------------------- kernel_matrix
@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(kernel="poly"), "kernel"),
        (dict(gamma=0.0), "gamma"),
        (dict(gamma=-2.0), "gamma"),
        (dict(gamma="scale"), "gamma"),
        (dict(gamma=np.inf), "gamma"),
        (dict(gamma=True), "gamma"),
        (dict(nu=1.0, kernel="matern"), "nu"),
        (dict(Y="not an array"), "Y"),
    ],
)
def test_kernel_matrix_bad_parameters(kwargs, name):
    with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of kernel_matrix must be"):
        kernel_matrix(X, **kwargs)


def test_kernel_matrix_matern_gamma_too_large():
    with pytest.raises(InvalidParameterError, match="length scale"):
        kernel_matrix(X, kernel="matern", gamma=1e308)
