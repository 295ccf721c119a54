"""RandomFourierFeatures(sampling='sorf' / 'fastfood') through the feature-map contract.

The transform itself is checked against NumPy in tests/maps/test_structured_transforms.py;
here: the estimator (parameters, O(D) state, pickling, gamma='scale', the
gamma path, errors) and every pipeline that takes a feature map (Ridge and
RidgeClassifier streaming, RidgeCV's gamma path, partial_fit, Dask), and a
classifier on SORF features against one on dense features on held-out rows.
"""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat import RandomFourierFeatures, Ridge, RidgeClassifier, RidgeClassifierCV, RidgeCV, kernel_matrix
from randfeat._maps.kernels import KERNELS
from randfeat._maps.structured import StructuredState, draw_structured, multipliers, structured_features

SAMPLINGS = ["sorf", "fastfood"]


def _data(n=300, d=20, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y, (X[:, 0] > 0).astype(int) + (X[:, 1] > 1)


def _close(a, b, rtol):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    assert np.abs(a - b).max() <= rtol * max(np.abs(b).max(), 1e-300)


# ------------------------------------------------------------------ the map
@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("feature_map", ["cossin", "cos"])
@pytest.mark.parametrize("D", [256, 301])
def test_the_map_is_the_structured_kernel(sampling, feature_map, D):
    X, _, _ = _data()
    est = RandomFourierFeatures(D, gamma=0.05, sampling=sampling, feature_map=feature_map, random_state=3)
    Z = est.fit_transform(X)
    assert Z.shape == (300, D) and Z.dtype == np.float64 and est.n_features_out_ == D
    # The same draw, in the same order from the same generator, through the feature function.
    rng = np.random.default_rng(3)
    n_freq = (D + 1) // 2 if feature_map == "cossin" else D
    draw = draw_structured(KERNELS["rbf"], sampling, 20, n_freq, 1.5, rng)
    b = rng.uniform(0, 2 * np.pi, n_freq if feature_map == "cos" else 1) if feature_map == "cos" or D % 2 else None
    ref = structured_features(X, draw, multipliers(KERNELS["rbf"], draw, 0.05), feature_map, D, b, 1)
    np.testing.assert_array_equal(Z, ref)
    assert list(est.get_feature_names_out()[:2]) == ["randomfourierfeatures0", "randomfourierfeatures1"]
    # float32 stays float32, CSR gives the dense bits.
    X32 = X.astype(np.float32)
    Z32 = clone(est).fit(X32).transform(X32)
    assert Z32.dtype == np.float32 and np.abs(Z32 - Z).max() < 1e-4
    np.testing.assert_array_equal(est.transform(sp.csr_matrix(X)), Z)
    with pytest.raises(AttributeError, match="not stored"):
        est.random_weights_
    assert (est.random_offset_ is None) == (feature_map == "cossin" and D % 2 == 0)


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_state_is_o_of_D_and_pickles_small(sampling):
    X = np.random.default_rng(0).standard_normal((50, 1024)).astype(np.float32)
    est = RandomFourierFeatures(16384, gamma="scale", sampling=sampling, random_state=0).fit(X)
    Z = est.transform(X)
    state = est._fitted_state()
    assert isinstance(state, StructuredState)
    blob = pickle.dumps(est)
    # A dense W would be 1024 × 8192 float32 = 32 MiB; the structured state is at most 29 bytes per
    # frequency (signs, Fastfood's permutation and G, the unit multipliers and those at gamma).
    assert len(blob) < 30 * 8192 + 4096, len(blob)
    again = pickle.loads(blob)
    np.testing.assert_array_equal(again.transform(X), Z)
    assert len(pickle.dumps(est)) == len(blob)  # the transform's cached layout is not pickled


def test_a_tampered_state_is_refused_at_unpickle():
    est = RandomFourierFeatures(64, sampling="fastfood", random_state=0).fit(np.ones((3, 10)))
    perm = est._fitted_state().draw.perm
    with pytest.raises(ValueError, match="read-only"):
        perm[0, 0] = 99  # the fitted state is frozen
    perm.setflags(write=True)
    perm[0, 0] = 99  # outside its block of 16
    with pytest.raises(ValueError, match=r"permutations holds 99, outside \[0, 16\)"):
        pickle.loads(pickle.dumps(est))


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_gamma_scale_and_matern(sampling):
    X, _, _ = _data()
    est = RandomFourierFeatures(512, gamma="scale", sampling=sampling, random_state=1).fit(X)
    numeric = RandomFourierFeatures(512, gamma=est.gamma_, sampling=sampling, random_state=1).fit(X)
    np.testing.assert_array_equal(est.transform(X), numeric.transform(X))
    assert est.gamma_ == pytest.approx(1.0 / (X.shape[1] * X.var()))
    m = RandomFourierFeatures(8192, kernel="matern", nu=0.5, gamma=0.02, sampling=sampling, random_state=2)
    Z = m.fit_transform(X[:60])
    K = kernel_matrix(X[:60], kernel="matern", nu=0.5, gamma=0.02)
    assert np.abs(Z @ Z.T - K).mean() < 0.02


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("kernel", ["laplacian", "cauchy"])
def test_kernels_it_cannot_represent_are_a_clear_error(sampling, kernel):
    est = RandomFourierFeatures(16, kernel=kernel, sampling=sampling)
    with pytest.raises(InvalidParameterError, match="spherically symmetric"):
        est.fit(np.ones((3, 4)))


def test_huge_gamma_is_a_clear_error():
    with pytest.raises(InvalidParameterError, match="gamma"):
        RandomFourierFeatures(16, gamma=1e300, sampling="sorf").fit(np.ones((3, 4), dtype=np.float32))


@parametrize_with_checks([
    RandomFourierFeatures(sampling="sorf"),
    RandomFourierFeatures(10, feature_map="cos", sampling="fastfood", random_state=0),
    RandomFourierFeatures(10, kernel="matern", sampling="sorf", random_state=0),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)


# -------------------------------------------------------------- the pipelines
@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("float32", [False, True])
def test_ridge_streams_it(sampling, float32):
    X, y, _ = _data()
    X = X.astype(np.float32) if float32 else X
    fm = RandomFourierFeatures(64, gamma=0.05, sampling=sampling, random_state=3)
    est = Ridge(alpha=0.1, features=fm, chunk_size=37).fit(X, y)
    Z = clone(fm).fit_transform(X)
    ref = Ridge(alpha=0.1).fit(Z, y)
    _close(est.coef_, ref.coef_, 2e-3 if float32 else 1e-10)
    _close(est.predict(X), ref.predict(Z), 1e-4 if float32 else 1e-10)


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_classifier_and_cg(sampling):
    X, _, labels = _data()
    fm = RandomFourierFeatures(101, gamma=0.05, sampling=sampling, random_state=4)
    Z = clone(fm).fit_transform(X)
    for solver in ("cholesky", "cg"):
        est = RidgeClassifier(alpha=0.3, solver=solver, tol=1e-12, features=fm).fit(X, labels)
        ref = RidgeClassifier(alpha=0.3, solver=solver, tol=1e-12).fit(Z, labels)
        _close(est.decision_function(X), ref.decision_function(Z), 1e-8)


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_ridge_cv_gamma_path_is_one_draw_rescaled(sampling):
    X, y, labels = _data()
    fm = RandomFourierFeatures(96, sampling=sampling, random_state=5)
    gammas = [0.01, 0.05, 0.2]
    maps = fm._fit_gamma_path(X, gammas)
    for g, m in zip(gammas, maps):
        alone = clone(fm).set_params(gamma=g).fit(X)
        np.testing.assert_array_equal(m.transform(X), alone.transform(X))  # bit-identical to a fit at g
    assert maps[0]._fitted_state().draw is maps[2]._fitted_state().draw  # one draw
    cv = RidgeCV(alphas=[0.01, 1.0, 100.0], features=fm, gammas=gammas).fit(X, y)
    assert cv.gamma_ in gammas
    scores = [RidgeCV(alphas=[0.01, 1.0, 100.0], features=clone(fm).set_params(gamma=g)).fit(X, y).best_score_
              for g in gammas]
    np.testing.assert_allclose(cv.gamma_scores_, scores, rtol=1e-10)
    clf = RidgeClassifierCV(alphas=[0.1, 10.0], features=fm, gammas=gammas, cv=3).fit(X, labels)
    assert clf.gamma_ in gammas


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_partial_fit_equals_fit(sampling):
    X, y, _ = _data()
    fm = RandomFourierFeatures(64, gamma=0.05, sampling=sampling, random_state=6)
    est = Ridge(alpha=0.2, features=fm)
    for s in range(0, 300, 70):
        est.partial_fit(X[s:s + 70], y[s:s + 70])
    ref = Ridge(alpha=0.2, features=fm).fit(X, y)
    _close(est.coef_, ref.coef_, 1e-10)


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_dask_fit_and_transform(sampling):
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    X, y, labels = _data()
    Xd = da.from_array(X, chunks=(70, 20))
    fm = RandomFourierFeatures(64, gamma="scale", sampling=sampling, random_state=7)
    with dask.config.set(scheduler="synchronous"):
        fitted = clone(fm).fit(Xd)
        assert fitted.gamma_ == pytest.approx(clone(fm).fit(X).gamma_, rel=1e-12)
        np.testing.assert_array_equal(fitted.transform(Xd).compute(), fitted.transform(X))  # row-independent
        est = Ridge(alpha=0.1, features=fm).fit(Xd, da.from_array(y, chunks=70))
        ref = Ridge(alpha=0.1, features=fm).fit(X, y)
        _close(est.coef_, ref.coef_, 1e-9)
        np.testing.assert_array_equal(est.predict(Xd).compute(), est.predict(X))
        clf = RidgeClassifier(features=fm).fit(Xd, da.from_array(labels, chunks=70))
        _close(clf.decision_function(X), RidgeClassifier(features=fm).fit(X, labels).decision_function(X), 1e-9)


def test_classifier_on_sorf_matches_dense_features_on_held_out_rows():
    # Digits (64-d, 10 classes): RidgeClassifier on 2048 SORF (Fastfood)
    # features against the same on dense orthogonal (i.i.d.) features, 4 seeds
    # each, on 899 held-out rows.  Measured (5 seeds): 0.974 sorf, 0.974
    # fastfood, 0.973 orthogonal, 0.976 iid, seed-to-seed spread 0.001-0.003;
    # the means must agree within 0.01, about two binomial standard errors of
    # one run (0.0053) and 4x the seed spread.
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, labels = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, labels, test_size=0.5, random_state=0, stratify=labels)
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)

    def accuracy(sampling, seed):
        fm = RandomFourierFeatures(2048, gamma=0.005, sampling=sampling, random_state=seed)
        return RidgeClassifier(alpha=0.1, features=fm).fit(Xtr, ytr).score(Xte, yte)

    acc = {s: np.array([accuracy(s, seed) for seed in range(4)]) for s in ("sorf", "fastfood", "orthogonal", "iid")}
    assert acc["orthogonal"].mean() > 0.95  # the task is learnt
    assert abs(acc["sorf"].mean() - acc["orthogonal"].mean()) < 0.01, acc
    assert abs(acc["fastfood"].mean() - acc["iid"].mean()) < 0.01, acc
