"""Issue 25: the failure classes a hostile user and a scikit-learn user found (the estimator and map side).

Each test failed on main at d21223b.  The Dask ones are in test_dask_trust.py,
the data loader's in test_datasets.py.
"""

import pickle
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.linear_model as sklm
from sklearn.datasets import load_iris, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold
from sklearn.preprocessing import OneHotEncoder

from randfeat import (RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier, RidgeClassifierCV,
                      RidgeCV)


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


# ------------------------------------------------------------ 2: altered fitted binning maps
def _binning():
    X = np.random.default_rng(0).standard_normal((300, 4))
    return RandomBinningFeatures(8, gamma=0.8, random_state=0).fit(X), X


@pytest.mark.kernel  # the sanitizer stage reruns these: what compiled code reads is checked
def test_fitted_binning_arrays_are_read_only():
    est, X = _binning()
    for a in (est.grid_offsets_, est.bin_hashes_, est.pitches_, est.offsets_):
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 10**9
    with pytest.raises(AttributeError):
        est.grid_offsets_ = np.zeros(9, dtype=np.int64)
    Z = est.transform(X)
    assert Z.indices.max() < est.n_features_out_


@pytest.mark.kernel
@pytest.mark.parametrize("damage", ["dir_offsets", "dir_bits", "directory", "grid_offsets", "hashes_order", "U"])
def test_a_damaged_binning_pickle_is_refused_at_load(damage):
    est, X = _binning()
    state = est._state
    keys, koff, dirs, doff, bits = (a.copy() for a in state.vocabulary)
    U = state.U.copy()
    if damage == "dir_offsets":
        doff[1] += 1000
    elif damage == "dir_bits":
        bits[0] = 40
    elif damage == "directory":
        dirs[3] = 10**6
    elif damage == "grid_offsets":
        koff[2] = koff[-1] + 5
    elif damage == "hashes_order":
        keys[[0, 1]] = keys[[1, 0]]
    else:
        U = U[:, :1].copy()
    blob = pickle.dumps(est)
    loaded = pickle.loads(blob)
    # What a tampered pickle would hold: the same map with altered arrays.
    forged = vars(loaded)["_state"]
    object.__setattr__(forged, "vocabulary", (keys, koff, dirs, doff, bits))
    object.__setattr__(forged, "U", U)
    with pytest.raises(ValueError, match="inconsistent fitted state"):
        pickle.loads(pickle.dumps(loaded))


# ------------------------------------------------------------- 3: GCV with fewer rows than features
def test_gcv_with_fewer_rows_than_features_is_computed_without_cancellation():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20, 5))
    y = np.sin(X @ rng.standard_normal(5))
    alphas = np.logspace(-10, 2, 13)
    fm = RandomFourierFeatures(200, gamma=0.2, random_state=0)
    m = RidgeCV(alphas=alphas, cv="gcv", store_cv_results=True, features=fm).fit(X, y)
    # Exact GCV from the SVD of the centred features, each direction's residual on its own
    # (the centred targets lie in the span of the 19 directions: no subtraction anywhere).
    Z = fm.fit_transform(X)
    U, s, _ = np.linalg.svd(Z - Z.mean(axis=0), full_matrices=False)
    uy = U.T @ (y - y.mean())
    exact = []
    for a in alphas:
        shrink = np.where(s > 1e-8 * s[0], a / (s**2 + a), 1.0)
        dof = np.sum(np.where(s > 1e-8 * s[0], s**2 / (s**2 + a), 0.0)) + 1
        exact.append((np.sum((shrink * uy) ** 2) / 20) / (1 - dof / 20) ** 2)
    np.testing.assert_allclose(m.cv_results_, exact, rtol=1e-6)
    assert m.alpha_ == alphas[np.argmin(exact)]


# ------------------------------------------------------------- 4: overflow in every CV mode
@pytest.mark.parametrize("cv", [None, "gcv", 3])
@pytest.mark.parametrize("where", ["y", "X"])
def test_cv_estimators_raise_ridges_overflow_error(cv, where):
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((40, 5)), rng.standard_normal(40)
    if where == "y":
        y = y * 1e160
    else:
        X[:, 0] *= 1e200
    with pytest.raises(ValueError, match="overflowed float64.*Rescale X and y"):
        RidgeCV(cv=cv).fit(X, y)
    with pytest.raises(ValueError, match="overflowed float64"):
        RidgeCV(cv=cv, gammas=[0.1, 1.0], features=RandomFourierFeatures(20, random_state=0)).fit(
            X, y) if where == "y" else RidgeClassifierCV(cv=cv).fit(X, (y > 0).astype(int))


def test_classifier_cv_overflow_on_features():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 5))
    X[:, 0] *= 1e200
    with pytest.raises(ValueError, match="RidgeClassifierCV: the Gram matrix ZᵀZ overflowed"):
        RidgeClassifierCV().fit(X, (X[:, 1] > 0).astype(int))


# ------------------------------------------------------------- 5: a fold without weight
@pytest.mark.parametrize("features", [None, RandomBinningFeatures(5, random_state=0)])
def test_kfold_refuses_a_fold_whose_training_rows_weigh_nothing(features):
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((50, 3)), rng.standard_normal(50)
    w = np.zeros(50)
    w[:10] = 1.0  # only fold 0's rows: the other folds train on... fold 0 alone, fold 0 trains on nothing
    with pytest.raises(ValueError, match="sample_weight is zero for every training row of fold 1"):
        RidgeCV(cv=KFold(5), features=features).fit(X, y, sample_weight=w)


# ------------------------------------------------------------- 6, 7: threads
def test_concurrent_partial_fit_merges_every_block():
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((3000, 6)), rng.standard_normal(3000)
    est = Ridge(alpha=0.1, features=RandomFourierFeatures(40, gamma=0.2, random_state=0))
    est.partial_fit(X[:10], y[:10])
    blocks = [(X[s:s + 10], y[s:s + 10]) for s in range(10, 3000, 10)]
    barrier = threading.Barrier(4)

    def feed(part):
        barrier.wait()
        for Xb, yb in part:
            est.partial_fit(Xb, yb)

    threads = [threading.Thread(target=feed, args=(blocks[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert est._statistics_.n_samples == 3000
    ref = Ridge(alpha=0.1, features=RandomFourierFeatures(40, gamma=0.2, random_state=0)).fit(X, y)
    assert _rel(est.coef_, ref.coef_) < 1e-8


def test_refit_while_other_threads_predict_sees_old_or_new_model():
    rng = np.random.default_rng(5)
    X, y = rng.standard_normal((4000, 5)), rng.standard_normal(4000)
    est = Ridge(alpha=1.0, features=RandomFourierFeatures(200, gamma=0.3, random_state=0)).fit(X, y)
    old = est.predict(X[:50])
    new = Ridge(alpha=0.01, features=RandomFourierFeatures(200, gamma=0.3, random_state=0)).fit(X, y).predict(X[:50])
    errors, seen, stop = [], [], threading.Event()

    def predict():
        while not stop.is_set():
            try:
                p = est.predict(X[:50])
                seen.append(np.array_equal(p, old) or np.array_equal(p, new))
            except Exception as exc:  # noqa: BLE001 - any error here is the defect
                errors.append(repr(exc))

    threads = [threading.Thread(target=predict) for _ in range(2)]
    for t in threads:
        t.start()
    for _ in range(3):
        est.set_params(alpha=0.01).fit(X, y)
    stop.set()
    for t in threads:
        t.join()
    assert not errors and all(seen) and seen


# ------------------------------------------------------------- 13: partial_fit after set_params
def test_partial_fit_names_a_changed_fit_intercept():
    rng = np.random.default_rng(6)
    X, y = rng.standard_normal((40, 3)), rng.standard_normal(40)
    est = Ridge().partial_fit(X[:20], y[:20]).set_params(fit_intercept=False)
    with pytest.raises(ValueError, match="fit_intercept was True for the earlier partial_fit blocks"):
        est.partial_fit(X[20:], y[20:])


# ------------------------------------------------------------- 14: probabilities
def test_scorer_of_probabilities_gets_a_clear_error():
    X, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match="needs class probabilities") as info:
        RidgeClassifierCV(scoring="neg_log_loss").fit(X, y)
    assert "_Identity" not in str(info.value)


# ------------------------------------------------------------- 15: k-fold means scikit-learn's
@pytest.mark.parametrize("weighted", [False, True])
def test_kfold_regression_equals_scikit_learn(weighted):
    X, y = make_regression(60, 8, n_informative=4, noise=10, random_state=0)
    w = np.random.default_rng(0).uniform(0.1, 2, 60) if weighted else None
    for scoring in (None, "neg_mean_squared_error"):
        ours = RidgeCV(alphas=(0.01, 1, 100), cv=5, scoring=scoring).fit(X, y, sample_weight=w)
        ref = sklm.RidgeCV(alphas=(0.01, 1, 100), cv=5, scoring=scoring).fit(X, y, sample_weight=w)
        assert ours.alpha_ == ref.alpha_
        assert ours.best_score_ == pytest.approx(ref.best_score_, rel=1e-8)


@pytest.mark.parametrize("weighted", [False, True])
def test_kfold_classifier_equals_scikit_learn(weighted):
    X, y = load_iris(return_X_y=True)
    w = np.random.default_rng(1).uniform(0.1, 2, 150) if weighted else None
    ours = RidgeClassifierCV(alphas=(0.1, 1, 10, 100), cv=5).fit(X, y, sample_weight=w)
    ref = sklm.RidgeClassifierCV(alphas=(0.1, 1, 10, 100), cv=5).fit(X, y, sample_weight=w)
    assert ours.alpha_ == ref.alpha_
    assert ours.best_score_ == pytest.approx(ref.best_score_, rel=1e-8)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))


# ------------------------------------------------------------- 16: alphas as scikit-learn takes them
def test_zero_alpha_with_kfold_and_scikit_learn_messages():
    X, y = make_regression(60, 4, noise=1, random_state=0)
    m = RidgeCV(alphas=[0.0, 1.0], cv=3).fit(X, y)
    assert m.alpha_ == sklm.RidgeCV(alphas=[0.0, 1.0], cv=3).fit(X, y).alpha_
    with pytest.raises(ValueError, match=r"alphas\[0\] == 0.0, must be > 0.0"):
        RidgeCV(alphas=[0.0, 1.0]).fit(X, y)
    with pytest.raises(TypeError, match=r"alphas\[0\] must be an instance of float, not str"):
        RidgeCV(alphas=["1", "2"]).fit(X, y)
    assert isinstance(RidgeCV().fit(X, y).intercept_, np.floating)


# ------------------------------------------------------------- 17: multilabel scored on labels
def test_classifier_cv_scores_multilabel_targets_on_labels():
    X = np.random.default_rng(7).standard_normal((60, 4))
    Y = np.where(X[:, :2] > 0, 1, -1)
    m = RidgeClassifierCV(store_cv_results=True, scoring="accuracy").fit(X, Y)
    assert 0.5 < m.best_score_ <= 1.0


# ------------------------------------------------------------- 18: partial_fit where it works, n_iter_
def test_partial_fit_offered_where_it_works_and_n_iter():
    assert hasattr(Ridge(), "partial_fit") and hasattr(RidgeClassifier(), "partial_fit")
    for est in (Ridge(solver="cg"), RidgeClassifier(features=RandomBinningFeatures()), RidgeClassifierCV()):
        assert not hasattr(est, "partial_fit")
    X, y = make_regression(40, 3, random_state=0)
    assert Ridge().fit(X, y).n_iter_ is None
    with pytest.warns(ConvergenceWarning):
        Ridge(solver="cg", max_iter=1, tol=1e-12).fit(X, y)


# ------------------------------------------------------------- 19: the median heuristic on CSR
@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_auto_gammas_take_sparse_input(kernel):
    codes = np.random.default_rng(8).integers(0, 5, (300, 6))
    Xs = OneHotEncoder().fit_transform(codes).tocsr()
    y = (codes[:, 0] > 2).astype(int)
    m = RidgeClassifierCV(gammas="auto", features=RandomFourierFeatures(50, kernel=kernel, random_state=0)).fit(Xs, y)
    dense = RidgeClassifierCV(gammas="auto", features=RandomFourierFeatures(50, kernel=kernel, random_state=0)).fit(
        Xs.toarray(), y)
    np.testing.assert_allclose(m.gammas_, dense.gammas_, rtol=1e-12)


# ------------------------------------------------------------- 20: the alpha -> 0 limit
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("cv", [None, "gcv"])
def test_tiny_alpha_gives_the_minimum_norm_least_squares_model(dtype, sparse, cv):
    rng = np.random.default_rng(9)
    X = rng.standard_normal((30, 3))
    X = np.hstack([X, X[:, :2] @ [[1.0], [2.0]], 3 * X[:, :1]])  # rank 3 in 5 columns
    y = rng.standard_normal(30)
    ref = sklm.LinearRegression().fit(X, y)
    Xin = X.astype(dtype)
    Xin = sp.csr_matrix(Xin) if sparse else Xin
    m = RidgeCV(alphas=[1e-15], cv=cv).fit(Xin, y)
    assert _rel(m.coef_, ref.coef_) < (1e-5 if dtype == np.float32 else 1e-9)
    assert _rel(m.predict(Xin), ref.predict(X)) < (1e-5 if dtype == np.float32 else 1e-9)


# ------------------------------------------------------------- 24: string labels to a regressor
def test_string_labels_to_a_regressor():
    X = np.arange(8.0).reshape(4, 2)
    with pytest.raises(ValueError, match="Ridge is a regressor and y holds labels such as 'cat'.*RidgeClassifier"):
        Ridge().fit(X, ["cat", "dog", "cat", "dog"])
    with pytest.raises(ValueError, match="RidgeCV is a regressor"):
        RidgeCV().fit(X, np.array(["cat", "dog", "cat", "dog"], dtype=object))
    np.testing.assert_allclose(Ridge().fit(X, ["1", "2", "3", "4"]).predict(X), Ridge().fit(X, [1, 2, 3, 4]).predict(X))
