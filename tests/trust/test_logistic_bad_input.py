"""Issue 35, part 6: bad input to LogisticRegression, each a clear error naming the problem, the fit kept.

``tests/estimators/test_logistic.py::test_bad_input_is_refused_and_leaves_the_fit``
covers one class, mixed labels, C <= 0, NaN/inf weights, an absent class in
class_weight and a continuous y (comparing the fitted arrays).  This file
adds the rest of the list, compares scikit-learn's behaviour where it has
one (``sklearn.linear_model.LogisticRegression`` is the oracle of what is an
error and what is not), and checks the fitted estimator after every failed
refit the strict way: the very same attribute objects, the same
probabilities.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.utils._param_validation import InvalidParameterError

from randfeat import LogisticRegression, LogisticRegressionCV, RandomFourierFeatures

X, Y = make_classification(120, 4, n_informative=3, n_redundant=0, random_state=0)
X3, Y3 = make_classification(120, 4, n_informative=3, n_redundant=0, n_classes=3, n_clusters_per_class=1,
                             random_state=1)


def _fitted(kind="binary", **params):
    Xf, yf = (X, Y) if kind == "binary" else (X3, Y3)
    est = LogisticRegression(features=RandomFourierFeatures(30, random_state=0), **params).fit(Xf, yf)
    return est, Xf, yf


def _with(a, row, value):
    a = np.array(a, dtype=np.float64)
    a[row] = value
    return a


# (description, parameters to set, X, y, sample_weight, expected exception, message); None: the fitted one's.
REFITS = [
    ("one class", {}, None, np.zeros(120, dtype=int), None, ValueError, "at least 2 classes.*only one class"),
    ("labels of mixed types", {}, None, np.array([0, "a"] * 60, dtype=object), None, ValueError,
     "mixes labels of different types"),
    ("labels with None", {}, None, np.array([0, None] * 60, dtype=object), None, ValueError, "Unknown label type"),
    ("continuous y", {}, None, np.linspace(0, 1, 120), None, ValueError, "continuous|Unknown label"),
    ("2-D y", {}, None, np.c_[Y, Y], None, ValueError, "1-D array of class labels"),
    ("y of the wrong length", {}, None, Y[:-1], None, ValueError, r"inconsistent numbers of samples: \[120, 119\]"),
    ("y with NaN", {}, None, _with(Y, 3, np.nan), None, ValueError, "y contains NaN"),
    ("C = 0", dict(C=0.0), None, None, None, InvalidParameterError, r"'C' parameter .* range \(0.0, inf\)"),
    ("C < 0", dict(C=-1.0), None, None, None, InvalidParameterError, "'C' parameter"),
    ("C a string", dict(C="1"), None, None, None, InvalidParameterError, "'C' parameter .* Got '1'"),
    ("C None", dict(C=None), None, None, None, InvalidParameterError, "'C' parameter .* Got None"),
    ("C NaN", dict(C=np.nan), None, None, None, InvalidParameterError, "'C' parameter .* Got nan"),
    ("C inf", dict(C=np.inf), None, None, None, InvalidParameterError, "'C' parameter .* Got inf"),
    ("NaN weight", {}, None, None, _with(np.ones(120), 3, np.nan), ValueError, "sample_weight contains NaN"),
    ("inf weight", {}, None, None, _with(np.ones(120), 3, np.inf), ValueError, "sample_weight contains infinity"),
    ("negative scalar weight", {}, None, None, -1.0, ValueError, r"sums to -120; .* must be positive"),
    ("weights summing to 0", {}, None, None, np.r_[np.ones(60), -np.ones(60)], ValueError, "sums to 0"),
    ("a negative weight with solver='newton-cholesky'", dict(solver="newton-cholesky"), None, None,
     _with(np.ones(120), 3, -1.0), ValueError, "'newton-cholesky' needs non-negative sample weights"),
    ("all-zero weights", {}, None, None, np.zeros(120), ValueError, "zero for every sample"),
    ("weights of the wrong length", {}, None, None, np.ones(7), ValueError, r"sample_weight.shape == \(7,\)"),
    ("class_weight naming an absent class", dict(class_weight={0: 1.0, 5: 2.0}), None, None, None, ValueError,
     r"class_weight names \[5\], which are not classes of y"),
    ("class_weight keyed by strings for integer labels", dict(class_weight={"0": 2.0}), None, None, None,
     ValueError, r"class_weight names \['0'\]"),
    ("class_weight NaN", dict(class_weight={0: np.nan}), None, None, None, ValueError, "finite non-negative"),
    ("class_weight inf", dict(class_weight={0: np.inf}), None, None, None, ValueError, "finite non-negative"),
    ("class_weight negative", dict(class_weight={0: -1.0}), None, None, None, ValueError, "finite non-negative"),
    ("class_weight all zero", dict(class_weight={0: 0.0, 1: 0.0}), None, None, None, ValueError,
     "zero for every sample"),
    ("balanced with a class of zero weights", dict(class_weight="balanced"), None, None, (Y == 1).astype(float),
     ValueError, r"class_weight='balanced' .* class\(es\) \[0\] have a total sample_weight <= 0"),
    ("C times the weights overflows", dict(C=1e300), None, None, np.full(120, 1e10), ValueError,
     "C times the total sample weight is inf"),
    ("C times the weights underflows", dict(C=1e-300), None, None, np.full(120, 1e-20), ValueError,
     "C times the total sample weight"),
    ("X with NaN", {}, _with(X, (2, 1), np.nan), None, None, ValueError, "Input X contains NaN"),
    ("X with inf", {}, _with(X, (2, 1), np.inf), None, None, ValueError, "Input X contains infinity"),
    ("X with NaN, CSR", {}, sp.csr_matrix(_with(X, (2, 1), np.nan)), None, None, ValueError,
     "Input X contains NaN"),
    ("X with no rows", {}, X[:0], Y[:0], None, ValueError, "0 sample"),
    ("1-D X", {}, X[:, 0], None, None, ValueError, "Expected 2D array"),
]


@pytest.mark.parametrize("desc, params, Xb, yb, w, exc, match", REFITS, ids=[r[0] for r in REFITS])
@pytest.mark.parametrize("kind", ["binary", "three classes"])
def test_failed_refit_is_a_clear_error_and_leaves_the_fit(kind, desc, params, Xb, yb, w, exc, match):
    est, Xf, yf = _fitted("binary" if kind == "binary" else "three")
    _refit_fails(est, Xf, yf, kind, desc, params, Xb, yb, w, exc, match)


# LogisticRegressionCV validates through the same path (``targets.logistic_fit_input``): the same table,
# its C as a one-value grid (the grid's own errors: tests/estimators/test_logistic_cv.py).
CV_REFITS = [r for r in REFITS if not r[0].startswith("C ") or r[0].startswith("C times")]


@pytest.mark.parametrize("desc, params, Xb, yb, w, exc, match", CV_REFITS, ids=[r[0] for r in CV_REFITS])
@pytest.mark.parametrize("kind", ["binary", "three classes"])
def test_cv_failed_refit_is_a_clear_error_and_leaves_the_fit(kind, desc, params, Xb, yb, w, exc, match):
    Xf, yf = (X, Y) if kind == "binary" else (X3, Y3)
    est = LogisticRegressionCV(Cs=2, features=RandomFourierFeatures(30, random_state=0)).fit(Xf, yf)
    params = {("Cs" if k == "C" else k): ([v] if k == "C" else v) for k, v in params.items()}
    _refit_fails(est, Xf, yf, kind, desc, params, Xb, yb, w, exc, match.replace("LogisticRegression", "LogisticRegressionCV"))


def _refit_fails(est, Xf, yf, kind, desc, params, Xb, yb, w, exc, match):
    """Fit ``est`` again on one kind of bad input: the error expected, every fitted attribute the very same object."""
    if kind != "binary" and (yb is not None and len(np.shape(yb)) == 1 and np.asarray(yb).dtype != object
                             and np.issubdtype(np.asarray(yb).dtype, np.integer)):
        yb = np.asarray(yb) % 3  # the same fault on three classes' labels (one class stays one class)
    if kind != "binary" and w is not None and desc.startswith("balanced"):
        w = (Y3 != 0).astype(float)
    if kind != "binary" and desc == "class_weight all zero":
        params = dict(class_weight={0: 0.0, 1: 0.0, 2: 0.0})
    before_state = dict(vars(est))
    before_proba = est.predict_proba(Xf)
    kept = est.get_params(deep=False)
    est.set_params(**params)
    with pytest.raises(exc, match=match):
        est.fit(Xf if Xb is None else Xb, yf if yb is None else yb, sample_weight=w)
    est.set_params(**kept)
    assert vars(est).keys() == before_state.keys()
    for key, value in before_state.items():
        assert vars(est)[key] is value, key  # the very same fitted objects, not copies
    np.testing.assert_array_equal(est.predict_proba(Xf), before_proba)


# Where scikit-learn raises too, so does randfeat (and where it does not, the table above says why randfeat does).
SKLEARN_ALSO_RAISES = ["one class", "labels of mixed types", "labels with None", "continuous y",
                       "y of the wrong length", "y with NaN", "C = 0", "C < 0", "C a string", "C None", "C NaN",
                       "NaN weight", "inf weight", "all-zero weights", "weights of the wrong length",
                       "class_weight naming an absent class", "class_weight keyed by strings for integer labels",
                       "X with NaN", "X with inf", "X with NaN, CSR", "X with no rows", "1-D X"]


@pytest.mark.parametrize("desc", SKLEARN_ALSO_RAISES)
def test_scikit_learn_refuses_the_same_input(desc):
    _, params, Xb, yb, w, _, _ = next(r for r in REFITS if r[0] == desc)
    with pytest.raises(ValueError):
        SkLogisticRegression(**params).fit(X if Xb is None else Xb, Y if yb is None else yb, sample_weight=w)


@pytest.mark.parametrize("kind", ["binary", "three classes"])
@pytest.mark.parametrize("C", [1.0, 100.0])
def test_negative_weights_fit_as_scikit_learn(kind, C):
    """scikit-learn's LogisticRegression fits negative weights; so does randfeat's, by L-BFGS (what "auto" picks)."""
    Xf, yf = (X, Y) if kind == "binary" else (X3, Y3)
    w = np.where(np.random.default_rng(0).random(len(yf)) < 0.05, -1.0, 1.0)
    assert np.any(w < 0)
    sk = SkLogisticRegression(C=C, tol=1e-10, max_iter=10000).fit(Xf, yf, sample_weight=w)
    est = LogisticRegression(C=C, tol=1e-10, max_iter=10000).fit(Xf, yf, sample_weight=w)
    assert est.solver_ == "lbfgs"
    np.testing.assert_allclose(est.predict_proba(Xf), sk.predict_proba(Xf), atol=1e-6)
    np.testing.assert_allclose(est.coef_, sk.coef_, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["predict", "predict_proba", "predict_log_proba", "decision_function", "score"])
@pytest.mark.parametrize("features", [None, "fourier"])
def test_prediction_before_fit_is_not_fitted_error(method, features):
    est = LogisticRegression(features=RandomFourierFeatures(10, random_state=0) if features else None)
    args = (X, Y) if method == "score" else (X,)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        getattr(est, method)(*args)


@pytest.mark.parametrize("method", ["predict", "predict_proba", "predict_log_proba", "decision_function"])
@pytest.mark.parametrize("bad", ["narrower", "wider", "narrower CSR", "NaN", "inf", "1-D"])
@pytest.mark.parametrize("kind", ["binary", "three classes"])
def test_bad_X_at_prediction_is_a_clear_error_and_leaves_the_fit(method, bad, kind):
    est, Xf, _ = _fitted("binary" if kind == "binary" else "three")
    before_state = dict(vars(est))
    before = getattr(est, method)(Xf)
    Xb, match = {
        "narrower": (Xf[:, :3], "X has 3 features, but LogisticRegression is expecting 4 features"),
        "wider": (np.c_[Xf, Xf], "X has 8 features, but LogisticRegression is expecting 4 features"),
        "narrower CSR": (sp.csr_matrix(Xf[:, :2]), "X has 2 features, but LogisticRegression is expecting 4"),
        "NaN": (_with(Xf, (0, 0), np.nan), "Input X contains NaN"),
        "inf": (_with(Xf, (0, 0), -np.inf), "Input X contains infinity"),
        "1-D": (Xf[0], "Expected 2D array"),
    }[bad]
    with pytest.raises(ValueError, match=match):
        getattr(est, method)(Xb)
    for key, value in before_state.items():
        assert vars(est)[key] is value, key
    np.testing.assert_array_equal(getattr(est, method)(Xf), before)


def test_failed_warm_start_refit_keeps_the_warm_start_state():
    est, Xf, yf = _fitted(warm_start=True)
    warm = vars(est)["_warm"]
    with pytest.raises(ValueError, match="sample_weight contains NaN"):
        est.fit(Xf, yf, sample_weight=_with(np.ones(len(yf)), 0, np.nan))
    assert vars(est)["_warm"] is warm
    # The next good fit starts from the kept state: the same model as a fresh fit, to the solver's tolerance.
    again = est.set_params(tol=1e-10, max_iter=1000).fit(Xf, yf)
    fresh = LogisticRegression(features=RandomFourierFeatures(30, random_state=0), tol=1e-10, max_iter=1000).fit(Xf, yf)
    np.testing.assert_allclose(again.predict_proba(Xf), fresh.predict_proba(Xf), atol=1e-8)


def test_weights_that_are_valid_but_extreme_fit_the_scaled_model():
    """Weights ×1e-12 with C ×1e12 (C·Σw in range) give the same model as the unscaled ones: no refusal, no overflow."""
    ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=1000).fit(X, Y)
    scaled = LogisticRegression(C=1e12, tol=1e-10, max_iter=1000).fit(X, Y, sample_weight=np.full(120, 1e-12))
    np.testing.assert_allclose(scaled.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    sk = SkLogisticRegression(C=1.0, tol=1e-10, max_iter=10000).fit(X, Y)
    np.testing.assert_allclose(ref.predict_proba(X), sk.predict_proba(X), atol=1e-6)
