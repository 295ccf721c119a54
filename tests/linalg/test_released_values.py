"""A CG fit frees the value array of the one-hot features it made itself (``onehot.release_values``).

The products read the block-major bins and the Gram block reads only the
column indices and the one value, so freeing Z's values must change no
result: every product and Gram block is compared bit for bit with the
operator of an untouched copy, and the Gram block with NumPy.
"""

import gc
import weakref

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import OneHotEncoder

import randfeat._linalg.csr as csr_mod
import randfeat._solvers.pipeline as pipeline
from randfeat import RandomBinningFeatures, Ridge, RidgeClassifier
from randfeat._linalg.csr import csr_gram_block_of
from randfeat._linalg.onehot import onehot_layout, release_values
from randfeat._linalg.products import prepare_problem


def binning_Z(n=2000, d=4, P=9, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Z = RandomBinningFeatures(P, gamma=0.8, random_state=seed).fit_transform(X.astype(dtype))
    return Z, rng.normal(size=(n, 3))


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_released_values_change_no_product_nor_gram_block(dtype, weighted):
    Z, Y = binning_Z(dtype=dtype)
    w = np.random.default_rng(1).uniform(0.5, 2.0, Z.shape[0]) if weighted else None
    dense = Z.toarray()
    kept, _, _ = prepare_problem(Z.copy(), Y, w, 2, owned=False)
    Zr = Z.copy()
    values = weakref.ref(Zr.data)
    freed, _, _ = prepare_problem(Zr, Y, w, 2, owned=True)
    gc.collect()
    assert values() is None  # the nnz values are gone ...
    assert Zr.data.strides == (0,) and not Zr.data.flags.writeable
    assert np.array_equal(Zr.toarray(), dense)  # ... and Z is the same matrix
    rng = np.random.default_rng(2)
    for K in (1, 3, 7):
        P = rng.normal(size=(Z.shape[1], K))
        U = rng.normal(size=(Z.shape[0], K))
        assert np.array_equal(kept.matmat(P), freed.matmat(P))
        assert np.array_equal(kept.rmatmat(U), freed.rmatmat(U))
        mup = rng.normal(size=K)
        a, b = kept.normal(P, mup, w), freed.normal(P, mup, w)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    columns = np.sort(rng.choice(Z.shape[1], size=25, replace=False))
    g_kept, g_freed = kept.gram_block(columns, w), freed.gram_block(columns, w)
    assert np.array_equal(g_kept, g_freed)
    sub = dense[:, columns].astype(np.float64)
    ref = sub.T @ ((np.ones(Z.shape[0]) if w is None else w)[:, None] * sub)
    np.testing.assert_allclose(g_freed, ref, rtol=1e-12, atol=1e-12)
    kept.close()
    freed.close()


@pytest.mark.kernel
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gram_block_of_a_value_view_matches_the_array_in_every_slab(index_dtype, monkeypatch):
    Z, _ = binning_Z(n=1500, dtype=np.float32)
    Z.indptr, Z.indices = Z.indptr.astype(index_dtype), Z.indices.astype(index_dtype)
    layout = onehot_layout(Z)
    columns = np.sort(np.random.default_rng(3).choice(Z.shape[1], size=30, replace=False))
    w = np.random.default_rng(4).uniform(0.5, 2.0, Z.shape[0])
    monkeypatch.setattr(csr_mod, "GRAM_SLAB_ENTRIES", 1000)  # many slabs, uneven last one
    full = csr_gram_block_of((Z.indptr, Z.indices, Z.data), Z.shape[1], columns, w, 2)
    view = np.broadcast_to(np.array(layout.value, dtype=Z.dtype), Z.data.shape)
    assert np.array_equal(csr_gram_block_of((Z.indptr, Z.indices, view), Z.shape[1], columns, w, 2), full)
    monkeypatch.setattr(csr_mod, "GRAM_SLAB_ENTRIES", 1 << 20)  # one slab: the same bits
    assert np.array_equal(csr_gram_block_of((Z.indptr, Z.indices, Z.data), Z.shape[1], columns, w, 1), full)


def test_release_values_keeps_a_merged_copy_correct():
    X = np.random.default_rng(0).integers(0, 3, size=(3000, 3)).astype(np.float64)
    Z = RandomBinningFeatures(8, gamma=0.5, random_state=0).fit_transform(X)
    Y = X[:, :1] - X[:, 1:2]
    ops, Ym, wm = prepare_problem(Z, Y, None, 1, owned=False)
    assert ops.shape[0] < Z.shape[0]  # rows were merged ...
    assert Z.data.flags.writeable and Z.data.strides != (0,)  # ... the caller's Z untouched
    ops.close()


@pytest.mark.parametrize("estimator", [RidgeClassifier, Ridge])
def test_a_fit_that_frees_its_features_values_gives_the_same_model(estimator, monkeypatch):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 5)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] > 0).astype(int) if estimator is RidgeClassifier else X[:, 0] ** 2
    make = lambda: estimator(features=RandomBinningFeatures(20, random_state=0), solver="cg", alpha=1e-2)
    seen = []
    real = pipeline.made_from
    monkeypatch.setattr(pipeline, "made_from", lambda *a: seen.append(real(*a)) or seen[-1])
    freed = make().fit(X, y)
    monkeypatch.setattr(pipeline, "made_from", lambda *a: False)
    kept = make().fit(X, y)
    assert seen == [True]
    assert np.array_equal(freed.coef_, kept.coef_) and np.array_equal(freed.intercept_, kept.intercept_)


def test_a_fit_on_the_users_one_hot_matrix_leaves_it_untouched():
    cats = np.random.default_rng(6).integers(0, 6, size=(800, 4))
    E = OneHotEncoder().fit_transform(cats).tocsr()
    y = cats[:, 0] - cats[:, 2] + np.random.default_rng(7).normal(size=800)
    data = E.data
    Ridge(solver="cg", alpha=1.0).fit(E, y)
    assert E.data is data and data.flags.writeable and np.all(data == 1.0)
    assert not pipeline.made_from(E, E, None)
    assert not pipeline.made_from(sp.csr_matrix((data, E.indices, E.indptr), shape=E.shape), E, object())


def test_release_values_is_exact_for_float32_values():
    Z, _ = binning_Z(P=7, dtype=np.float32)
    dense = Z.toarray()
    release_values(Z, onehot_layout(Z))
    assert Z.data.dtype == np.float32 and np.array_equal(Z.toarray(), dense)
