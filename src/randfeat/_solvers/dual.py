"""Ridge in the dual by Cholesky: N unknowns instead of D, for fits with more features than rows.

With Ẑ = W^½ Z_c (Z_c = Z − 1μᵀ, Z centred by its weighted column means μ
when fitting an intercept; W = diag(sample weights)), ridge's coefficients
are β = Ẑᵀa with (ẐẐᵀ + αI) a = Ŷ, Ŷ = W^½ (Y − ȳ) (``normal.DualNormalOperator``).
The centred, weighted kernel matrix is made from K = Z Zᵀ without forming Z_c:

    ẐẐᵀ = W^½ (K − 1kᵀ − k1ᵀ + c 11ᵀ) W^½,   k = K w / S,  c = wᵀ K w / S²,  S = Σ w

(Z μ = K w / S and μᵀμ = wᵀKw / S²; without an intercept k = 0, c = 0).
Then one Cholesky factor of ẐẐᵀ + αI (``cholesky_solve``: blocked, its
updates on the fit's threads, its bits independent of their number) solves
every target at once, and the coefficients are materialised, coef =
Ẑᵀ a = Zᵀ(v − w·Σv/S) with v = W^½ a, and the intercepts ȳ − μᵀcoef as the
primal fit's: ``predict``, pickles and ``coef_`` are those of the primal
model (coef_ is D × K either way, so the dual never holds more than the
primal result).

K = Z Zᵀ is, for one-hot block features (random binning), the exact binning
kernel on the training rows: c² times the number of grids where two rows
share a bin, counted from the bins (``_ext._collision_fast``, N²·G/2
comparisons); for other CSR features it is SciPy's sparse product, for
dense ones a BLAS product.  Cost N³/3 flops and 8·N² bytes, against CG's
unknown number of iterations over D-long vectors: ``dual_cholesky_pays``.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from .._core.memory_budget import available_memory, check_memory
from .._core.threads import single_threaded_blas
from .._ext._collision_fast import collision_kernel
from .._linalg.operator import MatrixKind
from .._linalg.rowmerge import MIN_REPEATED_SHARE
from .normal import NormalOperator

#: The dual is considered when N <= D / DUAL_RATIO (as CG's dual, ``cg_path.DUAL_RATIO``).
DUAL_RATIO = 2

#: Rows (after identical rows are merged) up to which "auto" factors the
#: dual at alpha = the kernel's mean diagonal (relative alpha 1); the cap
#: grows slowly as alpha falls, ``DUAL_MIN_ROWS · alpha_rel^(-1/10)``, up to
#: ``DUAL_MAX_ROWS``.  Why: the factor costs N³/3 flops whatever alpha,
#: CG ~N per iteration, its iterations growing as alpha falls, so the
#: crossover grows as the square root of CG's iterations.  Measured
#: (bench/results/dual.md, letter-like data, 50 grids, 185869 columns, 26
#: targets, alpha 1e-4, a loaded machine): the factor of 13651 rows took
#: 206 s, CG in the dual 81 s (113 iterations): the crossover is near
#: 13651/√2.5 ≈ 8600 rows there; at alpha 1 (~20 iterations) near 3600.
DUAL_MIN_ROWS = 3500
DUAL_MAX_ROWS = 10000

#: The largest kernel matrix factored, even when forced (``solver="cholesky"``):
#: 1.8 GB at 15000 rows, the largest size tested.  (SciPy 1.17's bundled
#: OpenBLAS 0.3.30 potrf crashed, a segmentation fault, on a 16000 × 16000
#: matrix here; ``cholesky_solve`` never hands it more than ``FACTOR_BLOCK`` rows.)
FACTOR_MAX_ROWS = 15000

SOLVER_NAME = "cholesky-dual"


def kernel_matrix(ops, n_threads, *, check=False, rows=None):
    """Return K = Z Zᵀ (N × N, float64, both triangles) for the operator's Z.

    Parameters
    ----------
    ops : FeatureOperator
        One-hot block (collision counts), CSR (SciPy's product) or dense (BLAS).
    n_threads : int
    check : bool, default=False
        Raise ``MemoryError`` first if the 8·N² bytes cannot be allocated.
    rows : ndarray of int or None
        One-hot only: K of these rows (N = len(rows)).

    Returns
    -------
    ndarray of shape (N, N), float64
    """
    N = ops.shape[0] if rows is None else len(rows)
    if check:
        check_memory(8 * N * N, f"the dual kernel matrix ({N} x {N} float64)",
                     "use solver='cg' (it never forms the kernel matrix).")
    if ops.kind is MatrixKind.ONE_HOT_BLOCKS:
        K = np.empty((N, N), dtype=np.float64)
        bins = ops.bins if rows is None else np.ascontiguousarray(ops.bins[:, rows])
        collision_kernel(bins, K, float(ops.value) ** 2, max(1, int(n_threads)))
        return K
    Z = ops.Z
    if sp.issparse(Z):
        Z64 = Z.astype(np.float64)
        return np.ascontiguousarray((Z64 @ Z64.T).toarray())
    Z64 = np.asarray(Z, dtype=np.float64)
    return Z64 @ Z64.T


def centre_kernel(K, weights, fit_intercept):
    """Turn K = Z Zᵀ into ẐẐᵀ = W^½ Z_c Z_cᵀ W^½ in place (module docstring); return it.

    Parameters
    ----------
    K : ndarray of shape (N, N), float64
    weights : ndarray of shape (N,), float64
        The rows' weights (ones for unit weights).
    fit_intercept : bool
        Centre by the weighted column means.

    Returns
    -------
    ndarray
        K, overwritten.
    """
    S = float(weights.sum())
    if fit_intercept and S > 0:
        k = K @ (weights / S)
        c = float(k @ weights) / S
        K -= k[None, :]
        K -= k[:, None]
        K += c
    if np.any(weights != 1.0):
        s = np.sqrt(weights)
        K *= s[:, None]
        K *= s[None, :]
    return K


def dual_rows(ops):
    """The unknowns of the dual: distinct rows for one-hot block features, else N."""
    first, _ = distinct_rows(ops)
    return ops.shape[0] if first is None else first.size


def dual_cholesky_pays(ops, alpha, n_targets):
    """True if "auto" should solve ``ops``'s ridge in the dual by Cholesky (after merging identical rows).

    Needs alpha > 0, N <= D / ``DUAL_RATIO``, N within the row cap for
    this alpha (``DUAL_MIN_ROWS``) and the kernel matrix, 8·N² bytes, plus
    the factor's workspace within half the memory available now.

    Parameters
    ----------
    ops : FeatureOperator
    alpha : float
    n_targets : int

    Returns
    -------
    bool
    """
    N, D = ops.shape
    if alpha <= 0 or N * DUAL_RATIO > D or N == 0:
        return False
    cap = min(row_cap(ops, alpha), FACTOR_MAX_ROWS)
    # The CG row merge (``rowmerge``) already merged Z when >= 20% of its rows
    # repeat, so at most 20% more can go: skip the distinct-row pass when even that cannot reach the cap.
    if N * (1 - MIN_REPEATED_SHARE) > cap or (N > cap and dual_rows(ops) > cap):
        return False
    N = min(N, cap)
    available, _ = available_memory()
    need = 8 * N * N + 8 * N * n_targets * 4
    return available is None or need <= available // 2


def row_cap(ops, alpha):
    """Rows up to which the dual factor is chosen at this alpha (``DUAL_MIN_ROWS`` doc).

    alpha is taken relative to K's mean diagonal (the mean squared row
    norm of Z: 1 for random binning, c²·G for other one-hot blocks).
    """
    N = max(1, ops.shape[0])
    if ops.kind is MatrixKind.ONE_HOT_BLOCKS:
        scale = ops.bins.shape[0] * float(ops.value) ** 2
    elif ops.kind is MatrixKind.CSR:
        scale = float(np.dot(ops.Z.data, ops.Z.data.astype(np.float64))) / N
    else:
        Z = ops.Z
        scale = float(np.einsum("ij,ij->", Z, Z, dtype=np.float64)) / N
    rel = alpha / scale if scale > 0 else 1.0
    return int(min(DUAL_MAX_ROWS, DUAL_MIN_ROWS * max(rel, 1e-12) ** -0.1))


def dual_cholesky(ops, Y, sample_weight, alpha, *, fit_intercept, n_threads, log=None):
    """Solve ridge for every column of Y in the dual: one Cholesky factor of ẐẐᵀ + αI.

    Parameters
    ----------
    ops : FeatureOperator
        Products with Z (N × D); its matrix (``ops.Z``, or the bins of a one-hot one) makes K.
    Y : ndarray (N, K), float64
    sample_weight : ndarray (N,) float64, or None
    alpha : float > 0
    fit_intercept : bool
    n_threads : int
    log : callable or None

    Returns
    -------
    coef : ndarray (K, D), Z's dtype
    intercept : ndarray (K,), float64

    Raises
    ------
    numpy.linalg.LinAlgError
        If ẐẐᵀ + αI is not numerically positive definite (the caller falls back to CG).
    """
    normal = NormalOperator(ops, sample_weight, fit_intercept)
    ybar = normal.target_means(Y)
    Yc = Y - ybar if fit_intercept else Y
    w = normal._w_or_ones
    first, group = distinct_rows(ops)
    if first is None:  # every row distinct (or not one-hot): K over all rows
        Wg, Yg = w, Yc
        K = kernel_matrix(ops, n_threads, check=True)
    else:
        # Identical rows (the row merge before CG merges only when >= 20% repeat):
        # one weighted row each, W_g = Σ w, target the weighted mean.  The dual
        # of the merged problem has the same solution in fewer unknowns.
        Wg = np.bincount(group, weights=w, minlength=first.size)
        Yg = np.stack([np.bincount(group, weights=w * Yc[:, k], minlength=first.size) for k in range(Y.shape[1])],
                      axis=1) / np.where(Wg > 0, Wg, 1.0)[:, None]
        K = kernel_matrix(ops, n_threads, check=True, rows=first)
    if log is not None:
        log(f"dual: kernel matrix {K.shape[0]}x{K.shape[0]} made; Cholesky factor")
    sqrt_w = np.sqrt(Wg)
    K = centre_kernel(K, Wg, fit_intercept)
    K[np.diag_indices_from(K)] += alpha
    A = cholesky_solve(K, sqrt_w[:, None] * Yg, n_threads)
    del K
    # coef = Z_cᵀ W^½ A over the merged rows = Zᵀ u − μ Σu, u spread back over each group's rows ∝ w_i.
    Ug = sqrt_w[:, None] * A
    if first is None:
        U = Ug
    else:
        U = Ug[group] * (w / np.where(Wg > 0, Wg, 1.0)[group])[:, None]
    coef = np.asarray(ops.rmatmat_once(np.ascontiguousarray(U)), dtype=np.float64)
    if normal.mean is not None:
        coef -= np.outer(normal.mean, U.sum(axis=0))
    return np.ascontiguousarray(coef.T).astype(ops.dtype, copy=False), normal.intercept(coef, ybar)


def distinct_rows(ops):
    """For one-hot block features with repeated rows: (first row of each distinct row, each row's group); else (None, None)."""
    if ops.kind is not MatrixKind.ONE_HOT_BLOCKS or ops.shape[0] < 2:
        return None, None
    _, first, group = np.unique(ops.bins.T, axis=0, return_index=True, return_inverse=True)
    if first.size == ops.shape[0]:
        return None, None
    return first, group.reshape(-1)


#: Columns per step of the blocked factor, and rows per tile of its updates.
FACTOR_BLOCK = 384


def cholesky_solve(K, B, n_threads=1):
    """Solve K X = B (K symmetric positive definite, C order; its lower triangle overwritten by the factor).

    A blocked right-looking Cholesky factorisation: per step of
    ``FACTOR_BLOCK`` columns, the diagonal block's factor, then the panel
    below it (row tiles, triangular solves) and the trailing lower triangle
    (row tiles, each one ``Lᵢ L_panelᵀ`` product) updated on ``n_threads``
    threads, every BLAS call on one thread.  Each tile's operands and shape
    do not depend on the thread count, so neither do the bits (threaded
    potrf's do); the solves are then two triangular ones.

    Raises ``numpy.linalg.LinAlgError`` when K is not numerically positive definite.
    """
    N = K.shape[0]
    b = FACTOR_BLOCK
    with single_threaded_blas(), ThreadPoolExecutor(max(1, int(n_threads))) as pool:
        for k0 in range(0, N, b):
            k1 = min(k0 + b, N)
            L11 = np.linalg.cholesky(K[k0:k1, k0:k1])  # raises LinAlgError if not positive definite
            K[k0:k1, k0:k1] = L11
            if k1 == N:
                break
            tiles = [(i0, min(i0 + b, N)) for i0 in range(k1, N, b)]

            def panel(t):
                i0, i1 = t
                K[i0:i1, k0:k1] = scipy.linalg.solve_triangular(L11, K[i0:i1, k0:k1].T, lower=True,
                                                                check_finite=False).T

            list(pool.map(panel, tiles))
            P = K[k1:, k0:k1]

            def update(t):
                i0, i1 = t
                K[i0:i1, k1:i1] -= P[i0 - k1:i1 - k1] @ P[:i1 - k1].T

            list(pool.map(update, tiles))
        X = scipy.linalg.solve_triangular(K, np.asarray(B, dtype=np.float64), lower=True, check_finite=False)
        return scipy.linalg.solve_triangular(K, X, lower=True, trans="T", check_finite=False)
