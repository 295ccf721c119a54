"""The synthetic Table-1 data sets: shapes, determinism, class structure, sparsity."""

import numpy as np
import pytest
import scipy.sparse as sp

from randfeat import datasets
from randfeat.datasets import make_adult_like, make_census_like, make_forest_like

GENERATORS = [make_census_like, make_adult_like, make_forest_like]


def _same(a, b):
    if sp.issparse(a):
        return sp.issparse(b) and a.shape == b.shape and (a != b).nnz == 0
    return np.array_equal(a, b)


@pytest.mark.parametrize("make", GENERATORS)
def test_deterministic_for_a_seed_and_different_across_seeds(make):
    X1, y1 = make(3000, random_state=7)
    X2, y2 = make(3000, random_state=7)
    X3, _ = make(3000, random_state=8)
    assert _same(X1, X2) and np.array_equal(y1, y2)
    assert not _same(X1, X3)


@pytest.mark.parametrize("make", GENERATORS)
def test_n_samples_gives_a_prefix_of_the_larger_set(make):
    # Rows are drawn in fixed blocks, so a subsample is the first rows of a
    # larger set, across a block boundary too (block = 32768 rows).
    big, small = {make_census_like: (18000, 500), make_adult_like: (32000, 1000),
                  make_forest_like: (40000, 33000)}[make]
    Xa, ya = make(big, random_state=1)
    Xb, yb = make(small, random_state=1)
    n = Xb.shape[0]
    assert _same(Xa[:n], Xb) and np.array_equal(ya[:n], yb)


def test_census_like_shape_and_values():
    X, y = make_census_like()
    assert X.shape == (18000, 119) and y.shape == (18000,)
    assert X.dtype == np.float64 and np.isfinite(X).all() and np.isfinite(y).all()
    assert X.min() >= 0.0 and X.max() <= 1.0
    assert y.std() > 0.5  # a real regression target, not a constant


def test_census_like_is_nonlinear():
    # A linear model must leave clearly more error than a kernel model, or the
    # data set would not test kernel approximation at all.
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge

    X, y = make_census_like(3000, random_state=0)
    Xtr, ytr, Xte, yte = X[:2000], y[:2000], X[2000:], y[2000:]
    lin = np.mean((Ridge(alpha=1.0).fit(Xtr, ytr).predict(Xte) - yte) ** 2)
    krr = np.mean((KernelRidge(alpha=0.1, kernel="rbf", gamma=0.05).fit(Xtr, ytr).predict(Xte) - yte) ** 2)
    assert krr < 0.8 * lin


def test_adult_like_is_a9a_shaped_csr_one_hot():
    X, y = make_adult_like()
    assert sp.issparse(X) and X.format == "csr"
    assert X.shape == (32000, 123) and y.shape == (32000,)
    assert X.has_sorted_indices
    assert set(np.unique(X.data)) == {1.0}
    nnz = np.diff(X.indptr)
    assert nnz.max() == 14 and nnz.min() >= 11  # 14 attributes, a few missing
    # Exactly one column per present attribute: column blocks of the 14 attributes.
    bounds = np.concatenate([[0], np.cumsum(datasets.ADULT_CARDINALITIES)])
    assert bounds[-1] == 123
    Xd = X[:2000].toarray()
    for j in range(14):
        assert Xd[:, bounds[j]:bounds[j + 1]].sum(axis=1).max() == 1
    assert set(np.unique(y)) == {-1, 1}
    assert 0.20 < np.mean(y == 1) < 0.28  # about a quarter positive, as adult


def test_forest_like_is_covtype_shaped():
    X, y = make_forest_like(60000, random_state=0)
    assert X.shape == (60000, 54) and y.shape == (60000,)
    assert X.min() >= 0.0 and X.max() <= 1.0
    assert set(np.unique(y)) == set(range(1, 8))
    binary = X[:, 10:]
    assert set(np.unique(binary)) == {0.0, 1.0}
    assert np.all(binary[:, :4].sum(axis=1) == 1)  # one wilderness area
    assert np.all(binary[:, 4:].sum(axis=1) == 1)  # one soil type
    counts = np.bincount(y, minlength=8)[1:]
    assert counts.max() < 0.75 * y.size  # no single class swamps the set


def test_forest_like_full_size():
    X, y = make_forest_like()
    assert X.shape == (522000, 54) and y.shape == (522000,)


def test_forest_like_boundary_is_axis_aligned_and_label_noise_is_as_asked():
    # Without label noise the label is a function of 4 continuous columns
    # through axis-aligned boxes: a deep decision tree fits it almost exactly,
    # far better than a smooth model of the same inputs.
    from sklearn.tree import DecisionTreeClassifier

    X, y = make_forest_like(20000, random_state=0, label_noise=0.0)
    Xtr, ytr, Xte, yte = X[:15000], y[:15000], X[15000:], y[15000:]
    tree_err = np.mean(DecisionTreeClassifier(random_state=0).fit(Xtr[:, [0, 3, 5, 9]], ytr).predict(Xte[:, [0, 3, 5, 9]]) != yte)
    assert tree_err < 0.03
    _, y_noisy = make_forest_like(20000, random_state=0, label_noise=0.3)
    changed = np.mean(y_noisy != y)
    assert 0.3 * 6 / 7 - 0.03 < changed < 0.3 * 6 / 7 + 0.03


@pytest.mark.parametrize("make", GENERATORS)
@pytest.mark.parametrize("bad", [0, -1, 10**7])
def test_bad_n_samples(make, bad):
    with pytest.raises(ValueError, match="n_samples"):
        make(bad)


@pytest.mark.parametrize("make", GENERATORS)
def test_bad_random_state(make):
    with pytest.raises(TypeError, match="random_state"):
        make(10, random_state="seed")
    with pytest.raises(ValueError, match="random_state"):
        make(10, random_state=-3)


def test_forest_bad_parameters():
    with pytest.raises(ValueError, match="label_noise"):
        make_forest_like(10, label_noise=1.0)
    with pytest.raises(ValueError, match="tree_depth"):
        make_forest_like(10, tree_depth=0)


def test_generators_accept_generator_and_randomstate():
    X1, _ = make_census_like(50, random_state=np.random.default_rng(0))
    X2, _ = make_census_like(50, random_state=np.random.RandomState(0))
    assert X1.shape == X2.shape == (50, 119)
