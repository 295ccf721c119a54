"""Ridge in the dual by Cholesky: N unknowns instead of D, for fits with more features than rows.

With Ẑ = W^½ Z_c (Z_c = Z − 1μᵀ, Z centred by its weighted column means μ
when fitting an intercept; W = diag(sample weights)), ridge's coefficients
are w = Ẑᵀa with (ẐẐᵀ + αI) a = Ŷ, Ŷ = W^½ (Y − ȳ) (``normal.DualNormalOperator``).
The centred, weighted kernel matrix is made from K = Z Zᵀ without forming Z_c:

    ẐẐᵀ = W^½ (K − 1kᵀ − k1ᵀ + c 11ᵀ) W^½,   k = K w / S,  c = wᵀ K w / S²,  S = Σ w

(Z μ = K w / S and μᵀμ = wᵀKw / S²; without an intercept k = 0, c = 0).
Then one Cholesky factor of ẐẐᵀ + αI (``scipy.linalg.cho_factor``) solves
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

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from .._core.memory_budget import available_memory, check_memory
from .._ext._collision_fast import collision_kernel
from .._linalg.operator import MatrixKind
from .normal import DualNormalOperator, NormalOperator

#: The dual is considered when N <= D / DUAL_RATIO (as CG's dual, ``cg_path.DUAL_RATIO``).
DUAL_RATIO = 2

#: Rows (after identical rows are merged) up to which "auto" factors the
#: dual at alpha = the kernel's mean diagonal (relative alpha 1); the cap
#: grows as alpha falls, ``DUAL_MIN_ROWS · alpha_rel^(-1/4)``, up to
#: ``DUAL_MAX_ROWS``.  Why: the factor costs N³/3 flops whatever alpha,
#: CG's iterations grow as alpha falls.  Measured (bench/dual.py, letter-like
#: data, 50 grids, D ≈ 190000, 26 targets): at alpha 1e-4 CG takes ~450
#: iterations and the dual factor of ~13700 rows is the faster; at alpha 1
#: CG takes ~20 iterations and beats any factor above a few thousand rows.
DUAL_MIN_ROWS = 3000
DUAL_MAX_ROWS = 25000

SOLVER_NAME = "cholesky-dual"


def kernel_matrix(ops, n_threads):
    """Return K = Z Zᵀ (N × N, float64, both triangles) for the operator's Z.

    Parameters
    ----------
    ops : FeatureOperator
        One-hot block (collision counts), CSR (SciPy's product) or dense (BLAS).
    n_threads : int

    Returns
    -------
    ndarray of shape (N, N), float64
    """
    N = ops.shape[0]
    if ops.kind is MatrixKind.ONE_HOT_BLOCKS:
        K = np.empty((N, N), dtype=np.float64)
        collision_kernel(ops.bins, K, float(ops.value) ** 2, max(1, int(n_threads)))
        return K
    Z = ops.Z
    if sp.issparse(Z):
        Z64 = Z.astype(np.float64)
        return np.ascontiguousarray((Z64 @ Z64.T).toarray())
    Z64 = np.asarray(Z, dtype=np.float64)
    return Z64 @ Z64.T


def centre_kernel(K, normal):
    """Turn K = Z Zᵀ into ẐẐᵀ = W^½ Z_c Z_cᵀ W^½ in place (module docstring); return it.

    Parameters
    ----------
    K : ndarray of shape (N, N), float64
    normal : NormalOperator
        Its weights and intercept choice.

    Returns
    -------
    ndarray
        K, overwritten.
    """
    w = normal._w_or_ones
    if normal.mean is not None:
        k = K @ (w / normal.weight_sum)
        c = float(k @ w) / normal.weight_sum
        K -= k[None, :]
        K -= k[:, None]
        K += c
    if normal.weights is not None:
        s = np.sqrt(normal.weights)
        K *= s[:, None]
        K *= s[None, :]
    return K


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
    if N > row_cap(ops, alpha):
        return False
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
    return int(min(DUAL_MAX_ROWS, DUAL_MIN_ROWS * max(rel, 1e-12) ** -0.25))


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
    dual = DualNormalOperator(normal)
    ybar = normal.target_means(Y)
    Yhat = dual.rhs(Y, ybar)
    N = ops.shape[0]
    check_memory(8 * N * N, f"the dual kernel matrix ({N} x {N} float64)",
                 "use solver='cg' (it never forms the kernel matrix).")
    K = centre_kernel(kernel_matrix(ops, n_threads), normal)
    K[np.diag_indices_from(K)] += alpha
    if log is not None:
        log(f"dual: kernel matrix {K.shape[0]}x{K.shape[0]} made; Cholesky factor")
    factor = scipy.linalg.cho_factor(K, lower=True, overwrite_a=True, check_finite=False)
    A = scipy.linalg.cho_solve(factor, Yhat, check_finite=False)
    del factor, K
    X = dual.to_primal(A)
    return np.ascontiguousarray(X.T), normal.intercept(X, ybar)
