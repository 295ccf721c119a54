"""Exact partial_fit of Ridge and RidgeClassifier: any sequence of blocks equals fit on their concatenation."""

import numpy as np
import pytest
from sklearn.base import clone

from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier

SPLITS = [0, 7, 8, 150, 151, 400]  # uneven blocks, one of a single row


def _blocks(n, splits=SPLITS):
    edges = [s for s in splits if s < n] + [n]
    return [(s, e) for s, e in zip(edges[:-1], edges[1:]) if e > s]


def _close(a, b, rtol=1e-10):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(np.abs(b).max(), 1e-300)
    assert np.abs(a - b).max() <= rtol * scale, np.abs(a - b).max() / scale


def _data(n=400, d=5, k=None, seed=0, offset=0.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + offset
    y = np.sin(X).sum(axis=1) if k is None else np.sin(X) @ rng.standard_normal((d, k))
    return X, y, rng.uniform(0.1, 2.0, n)


@pytest.mark.parametrize("features", [None, RandomFourierFeatures(60, gamma=0.3, random_state=1)])
@pytest.mark.parametrize("k", [None, 1, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_partial_fit_equals_fit(features, k, weighted, fit_intercept):
    X, y, w = _data(k=k, offset=3.0)
    if k == 1:
        y = y.reshape(-1, 1)
    est = Ridge(alpha=0.5, features=features, fit_intercept=fit_intercept, chunk_size=64)
    ref = clone(est).fit(X, y, sample_weight=w if weighted else None)
    inc = clone(est)
    for s, e in _blocks(len(X)):
        inc.partial_fit(X[s:e], y[s:e], sample_weight=w[s:e] if weighted else None)
        inc.predict(X[:3])  # predicts after every call
    assert np.shape(inc.coef_) == np.shape(ref.coef_)
    assert np.shape(inc.intercept_) == np.shape(ref.intercept_)
    _close(inc.coef_, ref.coef_)
    _close(inc.intercept_, ref.intercept_)
    _close(inc.predict(X), ref.predict(X))
    _close(inc.noise_variance_, ref.noise_variance_)
    _close(inc.predict(X[:20], return_std=True)[1], ref.predict(X[:20], return_std=True)[1])
    if features is not None:
        np.testing.assert_array_equal(inc.features_.random_weights_, ref.features_.random_weights_)


def test_each_prefix_equals_fit_on_prefix():
    X, y, _ = _data()
    inc = Ridge(alpha=0.1, features=RandomFourierFeatures(40, gamma=1.0, random_state=0))
    for s, e in _blocks(len(X)):
        inc.partial_fit(X[s:e], y[s:e])
        ref = clone(inc).fit(X[:e], y[:e])
        _close(inc.coef_, ref.coef_)
        _close(inc.predict(X[:50]), ref.predict(X[:50]))


def test_float32_partial_fit_matches_fit():
    X, y, _ = _data()
    X = X.astype(np.float32)
    ref = Ridge(alpha=1.0, features=RandomFourierFeatures(40, gamma=1.0, random_state=0)).fit(X, y)
    inc = clone(ref)
    for s, e in _blocks(len(X), [0, 200]):
        inc.partial_fit(X[s:e], y[s:e])
    assert inc.coef_.dtype == ref.coef_.dtype == np.float32
    _close(inc.coef_, ref.coef_, rtol=2e-4)


@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("features", [None, RandomFourierFeatures(50, gamma=1.0, random_state=3)])
def test_classifier_partial_fit_equals_fit(n_classes, features):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 4))
    labels = np.array(["a", "b", "c", "d"][:n_classes])
    y = labels[np.argmax(X[:, :n_classes] if n_classes > 2 else X[:, :2], axis=1)]
    w = rng.uniform(0.5, 1.5, 300)
    ref = RidgeClassifier(alpha=0.3, features=features).fit(X, y, sample_weight=w)
    inc = clone(ref)
    for i, (s, e) in enumerate(_blocks(len(X), [0, 5, 120, 299])):
        # Later blocks may lack classes; classes= is given first, optional later.
        inc.partial_fit(X[s:e], y[s:e], classes=labels[::-1] if i == 0 else None, sample_weight=w[s:e])
    np.testing.assert_array_equal(inc.classes_, ref.classes_)
    _close(inc.coef_, ref.coef_)
    _close(inc.decision_function(X), ref.decision_function(X))
    np.testing.assert_array_equal(inc.predict(X), ref.predict(X))


def test_classifier_partial_fit_needs_classes_and_known_labels():
    X, _, _ = _data(n=20)
    y = np.array([0, 1] * 10)
    clf = RidgeClassifier()
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        clf.partial_fit(X, y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        clf.partial_fit(X, y * 0, classes=[0])
    clf.partial_fit(X, y, classes=[0, 1])
    coef = clf.coef_.copy()
    with pytest.raises(ValueError, match=r"labels \[2\] not in classes"):
        clf.partial_fit(X[:2], [2, 0])
    with pytest.raises(ValueError, match="differs from the first call"):
        clf.partial_fit(X, y, classes=[0, 1, 2])
    np.testing.assert_array_equal(clf.coef_, coef)  # failed calls leave the model as it was


def test_bad_later_block_leaves_model_unchanged():
    X, y, _ = _data()
    est = Ridge(features=RandomFourierFeatures(20, gamma=1.0, random_state=0)).partial_fit(X[:100], y[:100])
    coef, stats = est.coef_.copy(), est._statistics_
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(X[:10, :3], y[:10])
    with pytest.raises(ValueError, match="same shape in every block"):
        est.partial_fit(X[:10], np.c_[y[:10], y[:10]])
    with pytest.raises(ValueError):
        est.partial_fit(X[:10], y[:9])
    Xnan = X[:10].copy()
    Xnan[0, 0] = np.nan
    with pytest.raises(ValueError):
        est.partial_fit(Xnan, y[:10])
    np.testing.assert_array_equal(est.coef_, coef)
    assert est._statistics_ is stats
    # and it goes on exactly
    est.partial_fit(X[100:], y[100:])
    _close(est.coef_, clone(est).fit(X, y).coef_)


def test_later_block_with_other_target_count():
    X, y, _ = _data(k=2)
    est = Ridge().partial_fit(X[:100], y[:100])
    with pytest.raises(ValueError, match="3 target"):
        est.partial_fit(X[100:110], np.c_[y[100:110], y[100:110, :1]])


def test_fit_discards_accumulation_and_alpha_may_change():
    X, y, _ = _data()
    est = Ridge(alpha=1.0).partial_fit(X[:100], y[:100])
    est.fit(X[100:200], y[100:200])
    assert not hasattr(est, "_statistics_")
    est.partial_fit(X[200:], y[200:])  # starts anew
    _close(est.coef_, Ridge(alpha=1.0).fit(X[200:], y[200:]).coef_)
    est.set_params(alpha=5.0).partial_fit(X[:200], y[:200])
    _close(est.coef_, Ridge(alpha=5.0).fit(np.r_[X[200:], X[:200]], np.r_[y[200:], y[:200]]).coef_)


def test_partial_fit_refuses_binning_and_cg():
    # Issue 25: offered only where it works (scikit-learn's available_if), the reason as the cause.
    X, y, _ = _data()
    for est, why in ((Ridge(features=RandomBinningFeatures(random_state=0)), "vocabulary of occupied bins is learned from all the rows"),
                     (Ridge(solver="cg"), "solver='cg' cannot be updated")):
        assert not hasattr(est, "partial_fit")
        with pytest.raises(AttributeError, match="has no attribute 'partial_fit'") as info:
            est.partial_fit(X, y)
        assert isinstance(info.value.__cause__, ValueError) and why in str(info.value.__cause__)


def test_sparse_X_partial_fit():
    import scipy.sparse as sp

    X, y, _ = _data()
    Xs = sp.csr_matrix(np.where(np.abs(X) > 1, X, 0.0))
    ref = Ridge(alpha=0.2, solver="cholesky").fit(Xs, y)
    inc = Ridge(alpha=0.2)
    for s, e in _blocks(len(y)):
        inc.partial_fit(Xs[s:e], y[s:e])
    _close(inc.coef_, ref.coef_)


def test_incremental_protocol_by_hand():
    """What dask_ml.wrappers.Incremental does: clone, then partial_fit block after block with fit_kwargs."""
    X, y, _ = _data()
    yc = (y > 0).astype(int)
    est = clone(RidgeClassifier(features=RandomFourierFeatures(30, gamma=1.0, random_state=0)))
    for s, e in _blocks(len(X)):
        est = est.partial_fit(X[s:e], yc[s:e], classes=[0, 1])  # Incremental passes fit_kwargs every call
    ref = RidgeClassifier(features=RandomFourierFeatures(30, gamma=1.0, random_state=0)).fit(X, yc)
    _close(est.decision_function(X), ref.decision_function(X))


def test_classifier_partial_fit_after_fit_uses_fitted_classes_and_starts_anew():
    X, y, _ = _data()
    yc = np.where(y > 0, "pos", "neg")
    clf = RidgeClassifier().fit(X[:100], yc[:100]).partial_fit(X[100:], yc[100:])
    np.testing.assert_array_equal(clf.classes_, ["neg", "pos"])
    _close(clf.coef_, RidgeClassifier().fit(X[100:], yc[100:]).coef_)


@pytest.mark.parametrize("estimator", [Ridge(alpha=0.3, features=RandomFourierFeatures(30, gamma=1.0, random_state=0)),
                                       RidgeClassifier(alpha=0.3, features=RandomFourierFeatures(30, gamma=1.0, random_state=0))])
def test_dask_ml_incremental(estimator):
    """dask_ml.wrappers.Incremental feeds Dask blocks to partial_fit in order: same model as fit."""
    da = pytest.importorskip("dask.array")
    wrappers = pytest.importorskip("dask_ml.wrappers")
    import dask

    X, y, _ = _data()
    if isinstance(estimator, RidgeClassifier):
        y = (y > 0).astype(int)
        kwargs = {"classes": [0, 1]}
    else:
        kwargs = {}
    Xd, yd = da.from_array(X, chunks=(90, 5)), da.from_array(y, chunks=90)
    with dask.config.set(scheduler="synchronous"):
        inc = wrappers.Incremental(clone(estimator), shuffle_blocks=False).fit(Xd, yd, **kwargs)
    ref = clone(estimator).fit(X, y)
    _close(inc.estimator_.coef_, ref.coef_)
    _close(inc.estimator_.intercept_, ref.intercept_)
