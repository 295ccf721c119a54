"""Issue 33 part 2, rows 6, 9 and 14: silent wrong answers and unclear errors of the new maps.

Each test failed on 955cd76.  The fitted-state rows (1-3, and 14's pickle)
are in test_fitted_state_checks.py.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError

from randfeat import AdditiveChi2Sampler, Nystroem, RandomFourierFeatures, RidgeCV, SkewedChi2Sampler


# ------------------------------------------------------------------- row 6
@pytest.mark.parametrize("skewedness", [0.0, -0.5])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row6_skewed_chi2_csr_with_non_positive_skewedness_equals_dense(skewedness, dtype):
    """A CSR storing every entry (no implicit zero, so accepted with c <= 0) gave NaN features: log c."""
    X = np.random.default_rng(0).uniform(1.0, 2.0, (30, 4)).astype(dtype)
    est = SkewedChi2Sampler(skewedness=skewedness, n_components=20, random_state=0).fit(X)
    Z = est.transform(sp.csr_matrix(X))
    assert np.isfinite(Z).all()
    np.testing.assert_array_equal(Z, est.transform(X))


def test_row6_implicit_zeros_still_refused_with_non_positive_skewedness():
    X = np.random.default_rng(0).uniform(1.0, 2.0, (30, 4))
    X[0, 0] = 0.0
    est = SkewedChi2Sampler(skewedness=0.0, n_components=8, random_state=0).fit(np.abs(X) + 1)
    with pytest.raises(ValueError):
        est.transform(sp.csr_matrix(X))


# ------------------------------------------------------------------- row 9
def test_row9_additive_chi2_on_dask_csr_blocks_declares_sparse_blocks():
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    X = np.abs(np.random.default_rng(0).standard_normal((90, 5)))
    X[X < 0.6] = 0.0
    Xd = da.from_array(X, chunks=(30, 5)).map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 0)))
    ref = AdditiveChi2Sampler().fit_transform(sp.csr_matrix(X))
    with dask.config.set(scheduler="synchronous"):
        est = AdditiveChi2Sampler().fit(Xd)
        Z = est.transform(Xd)
        assert sp.issparse(Z._meta)
        out = Z.compute()
        assert sp.issparse(out)
        np.testing.assert_array_equal(out.toarray(), ref.toarray())
        # Blocks are what the meta says: a block-wise densification downstream sees CSR blocks.
        dense = Z.map_blocks(lambda b: b.toarray(), meta=np.empty((0, 0), dtype=Z.dtype))
        np.testing.assert_allclose(dense.sum(axis=0).compute(), np.asarray(ref.sum(axis=0)).ravel())
        # Dense blocks: dense features, declared dense.
        Zd = est.transform(da.from_array(X, chunks=(30, 5)))
        assert isinstance(Zd._meta, np.ndarray)
        np.testing.assert_array_equal(Zd.compute(), ref.toarray())


# ------------------------------------------------------------------ row 14
@pytest.mark.parametrize("kernel", ["linear", "cosine", "additive_chi2", "skewed_chi2"])
def test_row14_gammas_refused_for_a_nystroem_kernel_without_width(kernel):
    """Every gamma scored the same and one was reported as chosen."""
    X = np.abs(np.random.default_rng(0).standard_normal((40, 3)))
    y = X.sum(axis=1)
    model = RidgeCV(features=Nystroem(kernel, n_components=10, random_state=0), gammas=[0.1, 1.0, 10.0])
    with pytest.raises(InvalidParameterError, match="no kernel width"):
        model.fit(X, y)


def test_row14_gammas_still_work_for_kernels_with_a_width():
    X = np.random.default_rng(0).standard_normal((40, 3))
    y = np.sin(X[:, 0])
    for features in (Nystroem("rbf", n_components=10, random_state=0),
                     RandomFourierFeatures(20, random_state=0)):
        model = RidgeCV(features=features, gammas=[0.1, 1.0]).fit(X, y)
        assert model.gamma_ in (0.1, 1.0)
        assert len(set(np.round(model.gamma_scores_, 12))) == 2


@pytest.mark.parametrize("shape", [(20, 12), (12, 20)])
def test_row14_non_square_precomputed_kernel_refused(shape):
    """A wide kernel was accepted (landmarks' columns meaningless); a tall one failed with IndexError."""
    K = np.random.default_rng(0).uniform(size=shape)
    with pytest.raises(ValueError, match="square kernel matrix"):
        Nystroem(kernel="precomputed", n_components=5, random_state=0).fit(K)


def test_row14_square_precomputed_kernel_still_fits():
    X = np.random.default_rng(0).standard_normal((20, 3))
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    Z = Nystroem(kernel="precomputed", n_components=20, random_state=0).fit_transform(K)
    np.testing.assert_allclose(Z @ Z.T, K, atol=1e-6)
