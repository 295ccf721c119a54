"""The declared feature-operator interface (``_linops``), the normal operator (``_normal``), and the thread policy."""

import functools

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from randfeat import RandomBinningFeatures
from randfeat._solvers.cg_path import cg_ridge
from randfeat._linalg.csr import SparseProducts
from randfeat._linalg.dense import DenseProducts
from randfeat._linalg.onehot import OneHotBlockProducts
from randfeat._linalg.operator import Capability, FeatureOperator
from randfeat._linalg.products import make_products
from randfeat._solvers.normal import NormalOperator
from randfeat._solvers.precond import heavy_block_preconditioner, jacobi_block_preconditioner
from randfeat._core.threads import MIN_WORK_PER_THREAD, threads_for


class MinimalProducts(FeatureOperator):
    """Only the two required products, by SciPy/NumPy: every optional capability absent."""

    def __init__(self, Z):
        super().__init__(Z.shape, Z.dtype, 1)
        self.Z = Z

    def matmat(self, P):
        return np.asarray(self.Z @ P, dtype=self.dtype)

    def rmatmat(self, U):
        return np.asarray(self.Z.T @ U, dtype=self.dtype)


def binning(n=1500, P=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * np.array([1.0, 2.0, 0.5])
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 / 4 + 0.1 * rng.normal(size=n)
    return RandomBinningFeatures(P, gamma=0.5, random_state=seed).fit_transform(X), y


def reference(Z, Y, alpha, fit_intercept, w):
    Zd = (Z.toarray() if sp.issparse(Z) else np.asarray(Z)).astype(np.float64)
    w = np.ones(len(Zd)) if w is None else w
    mu = w @ Zd / w.sum() if fit_intercept else np.zeros(Zd.shape[1])
    ybar = w @ Y / w.sum() if fit_intercept else np.zeros(Y.shape[1])
    A = (Zd - mu).T @ (w[:, None] * (Zd - mu)) + alpha * np.eye(Zd.shape[1])
    coef = scipy.linalg.solve(A, (Zd - mu).T @ (w[:, None] * (Y - ybar)), assume_a="pos").T
    return coef, ybar - coef @ mu, A


# ------------------------------------------------------------- declarations
def test_each_operator_declares_its_capabilities():
    Z, _ = binning()
    assert isinstance(make_products(Z, 1), OneHotBlockProducts)
    assert make_products(Z, 1).capabilities == set(Capability)
    generic = sp.random(200, 30, density=0.2, format="csr", random_state=0)
    assert type(make_products(generic, 1)) is SparseProducts
    assert make_products(generic, 1).capabilities == set(Capability)
    dense = make_products(generic.toarray(), 1)
    assert isinstance(dense, DenseProducts)
    assert dense.has(Capability.COLUMN_STATISTICS)
    assert not dense.has(Capability.GRAM_BLOCK) and not dense.has(Capability.FUSED_NORMAL)
    assert not issubclass(OneHotBlockProducts, SparseProducts)  # shares the Gram block by a function
    minimal = MinimalProducts(generic)
    assert minimal.capabilities == frozenset() and minimal.entries == 200 * 30
    with pytest.raises(NotImplementedError):
        minimal.gram_block(np.arange(3), None)
    with pytest.raises(NotImplementedError):
        minimal.column_sq_sums(np.ones(200))


def test_declaration_must_match_implementation():
    with pytest.raises(TypeError, match="declares GRAM_BLOCK but does not implement"):

        class Claims(MinimalProducts):
            capabilities = frozenset({Capability.GRAM_BLOCK})

    with pytest.raises(TypeError, match=r"implements \['normal'\] without declaring FUSED_NORMAL"):

        class Hides(MinimalProducts):
            def normal(self, P, mup, w, out=None):
                return super().normal(P, mup, w, out)

    with pytest.raises(TypeError, match="does not implement"):

        class Half(MinimalProducts):  # COLUMN_STATISTICS needs both methods
            capabilities = frozenset({Capability.COLUMN_STATISTICS})

            def column_sums(self, w):
                return super().column_sums(w)


@pytest.mark.parametrize("kind", ["onehot", "csr", "dense"])
@pytest.mark.parametrize("K", [1, 3])
def test_optional_capabilities_agree_with_their_composed_forms(kind, K):
    Z, _ = binning(n=600, P=6)
    if kind == "csr":
        Z = sp.csr_matrix(Z.multiply(np.linspace(0.5, 2.0, Z.shape[0])[:, None]))
    ops = make_products(Z.toarray() if kind == "dense" else Z, 2)
    minimal = MinimalProducts(Z)
    rng = np.random.default_rng(K)
    P = rng.normal(size=(Z.shape[1], K))
    mup = rng.normal(size=K)
    w = rng.uniform(0.5, 2.0, Z.shape[0])
    Q, s = ops.normal(P, mup, w)
    Q_ref, s_ref = minimal.normal(P, mup, w)
    np.testing.assert_allclose(Q, Q_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s, s_ref, rtol=1e-12)
    np.testing.assert_allclose(ops.column_sums(w), minimal.column_sums(w), rtol=1e-12)
    np.testing.assert_allclose(ops.column_sq_sums(w), (Z.multiply(Z)).T @ w, rtol=1e-12)
    U = rng.normal(size=(Z.shape[0], K))
    np.testing.assert_allclose(ops.rmatmat_once(U), Z.T @ U, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ops.rmatmat(U), Z.T @ U, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ops.matmat(P), Z @ P, rtol=1e-12, atol=1e-12)
    ops.close()


# -------------------------------------------------- solving with each operator
@functools.lru_cache(maxsize=None)
def cg_problem(fit_intercept, weighted):
    """(Z, Y, w, alpha, reference coef, intercept, cond(A)) for the CG tests, computed once."""
    Z, y = binning(n=800, P=8)
    rng = np.random.default_rng(1)
    Y = np.column_stack([y, rng.normal(size=len(y))])
    w = rng.uniform(0.3, 3.0, len(y)) if weighted else None
    alpha = 0.5
    coef, intercept, A = reference(Z, Y, alpha, fit_intercept, w)
    eig = np.linalg.eigvalsh(A)
    return Z, Y, w, alpha, coef, intercept, eig[-1] / eig[0]


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kind", ["minimal", "onehot", "csr", "dense"])
def test_cg_solves_with_every_operator(kind, fit_intercept, weighted):
    Z, Y, w, alpha, ref_coef, ref_intercept, cond = cg_problem(fit_intercept, weighted)
    ops = {
        "minimal": lambda: MinimalProducts(Z),
        "onehot": lambda: make_products(Z, 2),
        "csr": lambda: SparseProducts(Z, 2),
        "dense": lambda: make_products(Z.toarray(), 2),
    }[kind]()
    coef, intercept, n_iter, residual = cg_ridge(ops, Y, w, alpha, fit_intercept=fit_intercept, tol=1e-10,
                                                 max_iter=5000)
    assert np.all(residual <= 1e-10)
    # Error <= cond(A)·tol.
    atol = cond * 1e-10 * np.abs(ref_coef).max()
    np.testing.assert_allclose(coef, ref_coef, rtol=0, atol=atol)
    np.testing.assert_allclose(intercept, ref_intercept, rtol=0, atol=10 * atol + 1e-12)


def test_preconditioner_asks_the_capabilities():
    Z, _ = binning(n=3000, P=12)
    alpha = 0.05
    full = jacobi_block_preconditioner(NormalOperator(make_products(Z, 1), None, True), alpha)
    assert full.correction is not None  # crowded bins: the heavy block is used
    assert np.all(full.inv_diag[full.correction.columns] == 0)
    # No Gram block: Jacobi only, and the same diagonal.
    jacobi_only = jacobi_block_preconditioner(NormalOperator(make_products(Z.toarray(), 1), None, True), alpha)
    assert jacobi_only.correction is None
    light = np.setdiff1d(np.arange(Z.shape[1]), full.correction.columns)
    np.testing.assert_allclose(jacobi_only.inv_diag[light], full.inv_diag[light], rtol=1e-12)
    assert heavy_block_preconditioner(make_products(Z.toarray(), 1), 1.0 / jacobi_only.inv_diag, alpha,
                                      None, None, float(Z.shape[0])) is None
    # No column statistics: M = I.
    none = jacobi_block_preconditioner(NormalOperator(MinimalProducts(Z), None, True), alpha)
    assert none.correction is None and np.all(none.inv_diag == 1.0)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_normal_operator_applies_the_centred_weighted_gram(fit_intercept):
    Z, y = binning(n=500, P=5)
    w = np.random.default_rng(2).uniform(0.5, 2.0, Z.shape[0])
    normal = NormalOperator(make_products(Z, 1), w, fit_intercept)
    _, _, A = reference(Z, y[:, None], 0.3, fit_intercept, w)
    P = np.random.default_rng(3).normal(size=(Z.shape[1], 2))
    Q, pq = normal.apply(np.ascontiguousarray(P), 0.3)
    np.testing.assert_allclose(Q, A @ P, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(pq, np.einsum("ij,ij->j", P, A @ P), rtol=1e-10)
    np.testing.assert_allclose(normal.diagonal() + 0.3, np.diag(A), rtol=1e-10)


# ---------------------------------------------------------------- threads
def test_threads_for_trims_small_work():
    per = MIN_WORK_PER_THREAD["csr_entries"]
    assert threads_for("csr_entries", 0, 8) == 1
    assert threads_for("csr_entries", per - 1, 8) == 1
    assert threads_for("csr_entries", 2 * per, 8) == 2
    assert threads_for("csr_entries", 100 * per, 8) == 8
    with pytest.raises(KeyError):
        threads_for("no such work", 10, 2)
