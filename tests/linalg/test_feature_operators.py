"""The declared feature-operator interface (``_linalg/``), the normal operator (``_solvers/normal.py``), and the thread policy."""

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
from randfeat._core.threads import MIN_WORK_PER_THREAD, single_threaded_blas, threads_for


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


# ------------------------------------------------- the fit's set-up (issue 27)
def uniform_onehot(n=3000, bins=40, G=8, seed=0):
    """Uniform random bins (no column heavier than another): each row one bin per grid, values 1/√G."""
    rng = np.random.default_rng(seed)
    cols = (rng.integers(0, bins, size=(n, G)) + bins * np.arange(G)).ravel()
    Z = sp.csr_matrix((np.full(n * G, 1 / np.sqrt(G)), cols, np.arange(0, n * G + 1, G)), shape=(n, G * bins))
    return Z, rng.normal(size=n)


def test_layout_is_the_structure_and_holds_for_a_subset_of_rows():
    from randfeat._linalg.onehot import block_major_bins, onehot_block_structure, onehot_layout

    Z, _ = binning()
    layout = onehot_layout(Z)
    bins, start, value = onehot_block_structure(Z)
    assert layout.n_blocks == bins.shape[0] and layout.value == value
    assert np.array_equal(layout.start, start)
    assert np.array_equal(block_major_bins(Z, layout), bins)
    assert onehot_layout(sp.random(50, 20, density=0.3, format="csr", random_state=0)) is None
    # Z's layout serves any subset of its rows (merged identical rows): the same products.
    rows = np.sort(np.random.default_rng(1).choice(Z.shape[0], 400, replace=False))
    sub = Z[rows]
    ops = OneHotBlockProducts(sub, (block_major_bins(sub, layout), layout.start, layout.value), 1)
    P = np.random.default_rng(2).normal(size=(Z.shape[1], 3))
    U = np.random.default_rng(3).normal(size=(len(rows), 3))
    np.testing.assert_allclose(ops.matmat(P), sub.toarray() @ P, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ops.rmatmat(U), sub.toarray().T @ U, rtol=1e-12, atol=1e-12)


def test_prepare_problem_finds_the_layout_once(monkeypatch):
    import randfeat._linalg.onehot as onehot_mod
    from randfeat._linalg.products import prepare_problem
    from randfeat._linalg.rowmerge import merged_problem

    Z, y = binning(n=800)
    Z = sp.vstack([Z, Z[:500], Z[:300]]).tocsr()  # rows that repeat: merged
    Y = np.column_stack([np.concatenate([y, y[:500], y[:300]]), np.arange(Z.shape[0]) % 3])
    passes = []
    block_ranges = onehot_mod.block_ranges
    monkeypatch.setattr(onehot_mod, "block_ranges", lambda *a: passes.append(1) or block_ranges(*a))
    ops, Ym, w = prepare_problem(Z, Y, None, 2)
    assert len(passes) == 1  # the one pass over the index array, before the merge
    Zm, Ym_ref, w_ref, entries = merged_problem(Z, Y, None)
    assert isinstance(ops, OneHotBlockProducts) and ops.shape[0] == Zm.shape[0] < 800 and ops.entries == Z.nnz
    assert np.array_equal(Ym, Ym_ref) and np.array_equal(w, w_ref) and ops.entries == entries
    fresh = make_products(Zm, 2, entries)
    assert np.array_equal(ops.start, fresh.start) and np.array_equal(ops.bins, fresh.bins)
    ours = cg_ridge(ops, Ym, w, 0.05, fit_intercept=True, tol=1e-10, max_iter=None)
    theirs = cg_ridge(fresh, Ym_ref, w_ref, 0.05, fit_intercept=True, tol=1e-10, max_iter=None)
    assert np.array_equal(ours.coef, theirs.coef) and np.array_equal(ours.n_iter, theirs.n_iter)
    # A matrix that is not one-hot: the general operator, rows merged all the same.
    generic = sp.csr_matrix(Z.multiply(np.arange(1, Z.shape[1] + 1)[None, :]))
    ops, Ym, _ = prepare_problem(generic, Y, None, 1)
    assert type(ops) is SparseProducts and ops.shape[0] == Zm.shape[0]


def test_merge_takes_the_checked_row_length():
    from randfeat._linalg.rowmerge import merge_identical_rows

    Z, y = binning(n=600)
    Z = sp.vstack([Z, Z]).tocsr()
    Y = np.concatenate([y, y])[:, None]
    G = Z.nnz // Z.shape[0]
    given, checked = merge_identical_rows(Z, Y, None, row_length=G), merge_identical_rows(Z, Y, None)
    assert all(np.array_equal(a.toarray() if sp.issparse(a) else a, b.toarray() if sp.issparse(b) else b)
               for a, b in zip(given, checked))
    with pytest.raises(ValueError, match="row_length"):
        merge_identical_rows(Z, Y, None, row_length=G + 1)


@pytest.mark.parametrize("h", [1, 2, 255, 256, 257, 600])
def test_mirror_triangle_is_numpys_tril_and_triu(h):
    from randfeat._linalg.csr import mirror_triangle

    A = np.random.default_rng(h).normal(size=(h, h))
    assert np.array_equal(mirror_triangle(A.copy(), lower=True), np.tril(A) + np.tril(A, -1).T)
    assert np.array_equal(mirror_triangle(A.copy(), lower=False), np.triu(A) + np.triu(A, 1).T)


def test_heavy_block_is_todays_to_the_bit():
    # The block built in place equals the one built with full-size temporaries.
    Z, _ = binning(n=3000, P=12)
    alpha, N = 0.05, Z.shape[0]
    ops = make_products(Z, 1)
    normal = NormalOperator(ops, None, True)
    diag = normal.diagonal() + alpha
    block = heavy_block_preconditioner(ops, diag, alpha, normal.mean, None, float(N))
    A = ops.gram_block(block.columns, None)
    mh = normal.mean[block.columns]
    A -= float(N) * np.outer(mh, mh)
    A[np.diag_indices_from(A)] += alpha
    with single_threaded_blas():  # as the preconditioner factors it
        L, _ = scipy.linalg.cho_factor(A, lower=True, check_finite=False)
        inverse, info = scipy.linalg.get_lapack_funcs("potri", (L,))(L, lower=1)
    assert info == 0
    assert np.array_equal(block.inverse, np.tril(inverse) + np.tril(inverse, -1).T)
    # C-ordered, as that sum was: a Fortran-ordered inverse sends the
    # products to another BLAS path (other bits, other iteration counts).
    assert block.inverse.flags.c_contiguous


def test_block_not_built_where_no_column_is_heavier(monkeypatch):
    # Uniform bins at a small alpha: every column passes the heavy ratio, but
    # the block would hold a sliver of the diagonal's mass, so it is left
    # out — decided before any Gram entry is computed.
    import randfeat._solvers.precond as precond_mod
    from randfeat._solvers.precond import heavy_columns, make_preconditioner

    Z, _ = uniform_onehot(n=3000, bins=400, G=8)
    alpha = 1e-3
    normal = NormalOperator(make_products(Z, 1), None, True)
    diag = normal.diagonal() + alpha
    columns = heavy_columns(normal.ops, diag, alpha)
    assert columns is not None and len(columns) < 0.1 * Z.shape[1]
    assert diag[columns].sum() < precond_mod.HEAVY_BLOCK_MIN_SHARE * diag.sum()  # the rule says: no block
    built = []
    gram_block = OneHotBlockProducts.gram_block
    monkeypatch.setattr(OneHotBlockProducts, "gram_block", lambda self, *a: built.append(1) or gram_block(self, *a))
    M, _ = make_preconditioner(normal, alpha, "auto")
    assert not built and M.correction is None and M.description == "a scaled identity"
    assert np.all(M.inv_diag == 1.0 / diag.max())
    jacobi, _ = make_preconditioner(normal, alpha, "jacobi")  # Jacobi keeps its block whatever the share
    assert built and jacobi.correction is not None


@pytest.mark.parametrize("factor", [0.5, 1 - 1e-12, 1 + 1e-12, 2.0])
def test_share_decided_without_the_block_is_the_exact_rule(factor, monkeypatch):
    # At the bound and far from it, the block is kept exactly when its
    # columns' mass (summed in column order, as the rule states) reaches it.
    import randfeat._solvers.precond as precond_mod
    from randfeat._solvers.precond import heavy_columns, make_preconditioner

    Z, _ = binning(n=3000, P=12)
    alpha = 0.05
    normal = NormalOperator(make_products(Z, 1), None, True)
    diag = np.maximum(normal.diagonal(), 0.0) + alpha
    columns = heavy_columns(normal.ops, diag, alpha)
    share = diag[columns].sum() / diag.sum()
    monkeypatch.setattr(precond_mod, "HEAVY_BLOCK_MIN_SHARE", share * factor)
    M, _ = make_preconditioner(normal, alpha, "block")
    kept = not diag[columns].sum() < share * factor * diag.sum()
    assert (M.correction is not None) == kept


@pytest.mark.parametrize("K", [1, 4])
def test_uniform_bins_fit_bitwise_equal_for_any_n_jobs(K, monkeypatch):
    import randfeat._core.threads as threads_mod
    from randfeat import Ridge

    monkeypatch.setitem(threads_mod.MIN_WORK_PER_THREAD, "csr_entries", 1000)
    monkeypatch.setitem(threads_mod.MIN_WORK_PER_THREAD, "thin_product_flops", 1000)
    Z, y = uniform_onehot(n=9000, bins=1000, G=10)
    Y = y[:, None] + np.arange(K) if K > 1 else y
    fits = [Ridge(0.01, solver="cg", tol=1e-9, n_jobs=j).fit(Z, Y) for j in (1, 2, 3)]
    assert fits[0].preconditioner_ == "a scaled identity"
    for f in fits[1:]:
        assert np.array_equal(fits[0].n_iter_, f.n_iter_) and np.array_equal(fits[0].coef_, f.coef_)
        assert np.array_equal(fits[0].intercept_, f.intercept_)


def test_one_pass_gives_the_column_means_and_the_diagonal(monkeypatch):
    import randfeat._linalg.onehot as onehot_mod

    Z, _ = binning()
    w = np.random.default_rng(4).uniform(0.5, 2.0, Z.shape[0])
    fresh = {name: NormalOperator(make_products(Z, 1), weights, True) for name, weights in (("unit", None), ("w", w))}
    passes = []
    tmatmat = onehot_mod.onehot_tmatmat
    monkeypatch.setattr(onehot_mod, "onehot_tmatmat", lambda *a: passes.append(1) or tmatmat(*a))
    for weights in (None, w):
        normal = NormalOperator(make_products(Z, 1), weights, True)
        diag = normal.diagonal()
        # Unit weights: the means' pass serves the diagonal; weights: a pass each.
        assert len(passes) == (1 if weights is None else 2)
        passes.clear()
        ref = fresh["unit" if weights is None else "w"]
        assert np.array_equal(normal.mean, ref.mean) and np.array_equal(diag, ref.diagonal())
        ww = np.ones(Z.shape[0]) if weights is None else weights
        Zc = Z.toarray() - ww @ Z.toarray() / ww.sum()
        np.testing.assert_allclose(diag, ww @ Zc**2, rtol=1e-10, atol=1e-12)
    ops = make_products(Z, 1)
    sums = ops.column_sums(np.ones(Z.shape[0]))
    sums[:] = -1.0  # the caller's copy: the kept sums stay as they were
    assert np.array_equal(ops.column_sums(np.ones(Z.shape[0])), make_products(Z, 1).column_sums(np.ones(Z.shape[0])))
    np.testing.assert_allclose(ops.column_sums(np.ones(Z.shape[0])), np.asarray(Z.sum(axis=0)).ravel(), rtol=1e-13)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gram_block_in_slabs_is_one_pass_to_the_bit(weighted, index_dtype, monkeypatch):
    import randfeat._linalg.csr as csr_mod

    Z, _ = binning(n=2000, P=12)
    indptr, indices = Z.indptr.astype(index_dtype), Z.indices.astype(index_dtype)
    w = np.random.default_rng(5).uniform(0.5, 2.0, Z.shape[0]) if weighted else None
    columns = np.sort(np.random.default_rng(6).choice(Z.shape[1], 60, replace=False))
    one = csr_mod.csr_gram_block_of((indptr, indices, Z.data), Z.shape[1], columns, w, 2)
    monkeypatch.setattr(csr_mod, "GRAM_SLAB_ENTRIES", 37)  # slabs of a few rows
    slabs = csr_mod.csr_gram_block_of((indptr, indices, Z.data), Z.shape[1], columns, w, 2)
    assert np.array_equal(one, slabs)
    Zh = Z.toarray()[:, columns]
    ww = np.ones(Z.shape[0]) if w is None else w
    np.testing.assert_allclose(one, Zh.T @ (ww[:, None] * Zh), rtol=1e-12, atol=1e-12)
