"""Block preconditioned conjugate gradient for ridge on features Z.

Solves (Z_cᵀ W Z_c + αI) w_k = Z_cᵀ W (y_k − ȳ_k) for all K targets at
once (the operator, its centring and weights: ``_normal.py``; the products
with Z: ``_linops.py``).  Each iteration costs one application of the
normal operator over the K columns still iterating; each target stops at
its own relative residual ‖r_k‖ / ‖b_k‖ <= tol.

Preconditioner (``_precond.py``): Jacobi, diag(Z_cᵀ W Z_c) + α, except on
the block of the heaviest columns of a sparse Z, which is inverted exactly
(for binning features each grid's block of ZᵀZ is diagonal, but the blocks
*between* grids couple strongly where bins are crowded, and Jacobi alone
leaves CG 2-3× more iterations); or, at small α on sparse Z, a randomized
Nyström preconditioner (``_nystrom.py``) built once per Z.

``cg_ridge_path`` solves a list of alphas on one Z, largest first, each
warm-started from the previous solution, with one Nyström build for all:
the entry point for model selection.

Precision: the iterates live in Z's dtype (float32 stays float32, halving
memory traffic); the kernels accumulate every product in float64, and the
CG scalars (inner products, norms) are float64.

The vector updates run in ``_cg_fast`` (fused passes over the D × K block);
profiling with K = 7 showed the NumPy version costing as much as the sparse
products.
"""

import time
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ._cg_fast import n_blocks, update_p, update_xr
from ._normal import NormalOperator
from ._nystrom import DEFAULT_MEMORY_BUDGET
from ._precond import make_preconditioner, wants_nystrom


def _colwise_dot(A, B):
    """Return the float64 inner product of matching columns of A and B."""
    return np.einsum("ij,ij->j", A, B, dtype=np.float64)


def default_max_iter(n_features):
    """max_iter=None: 10 × D iterations, at least 100 and at most 10000."""
    return int(min(max(10 * n_features, 100), 10_000))


class _CGSolution(NamedTuple):
    coef: np.ndarray
    intercept: np.ndarray
    n_iter: np.ndarray
    residual: np.ndarray


class CGResult(_CGSolution):
    """What ``cg_ridge`` returns (``cg_ridge_path`` returns one per alpha).

    Unpacks as the 4-tuple ``coef, intercept, n_iter, residual``; the
    preconditioner used is in the attributes ``preconditioner`` and
    ``nystrom_rank``.

    Parameters
    ----------
    coef : ndarray (K, D), Z's dtype
    intercept : ndarray (K,), float64
    n_iter : ndarray (K,), int
    residual : ndarray (K,), float64
        Relative residual ‖r_k‖ / ‖b_k‖ reached.
    preconditioner : str
        What M was ("Jacobi", "randomized Nyström, rank r (sketch ℓ)", ...).
    nystrom_rank : int or None
        Rank of the Nyström preconditioner, None when another was used.
    """

    def __new__(cls, coef, intercept, n_iter, residual, preconditioner, nystrom_rank):
        self = super().__new__(cls, coef, intercept, n_iter, residual)
        self.preconditioner = preconditioner
        self.nystrom_rank = nystrom_rank
        return self


def cg_ridge(ops, Y, sample_weight, alpha, *, fit_intercept, tol, max_iter, log=None, preconditioner="auto",
             nystrom_rank=None, memory_budget=DEFAULT_MEMORY_BUDGET):
    """Solve ridge for all columns of Y by preconditioned block CG.

    Parameters
    ----------
    ops : FeatureOperator
        Products with the feature matrix Z (N × D).
    Y : ndarray (N, K), float64
    sample_weight : ndarray (N,) float64, or None for unit weights
    alpha : float >= 0
    fit_intercept : bool
    tol : float > 0
        Relative residual at which a target stops.
    max_iter : int or None
        None → ``default_max_iter(D)``.
    log : callable or None
        Called with a progress message (verbose mode).
    preconditioner : {"auto", "jacobi", "block", "nystrom"}
        "jacobi": the exact heavy-column block plus Jacobi; "block": the
        block plus a scaled identity; "nystrom": randomized Nyström (needs
        alpha > 0, else as "auto"); "auto": "block" on one-hot block
        matrices, "jacobi" elsewhere (``_precond.diagonal_kind``; Nyström
        only if ``_precond.wants_nystrom`` says so).
    nystrom_rank : int or None
        Nyström sketch size; None chooses it automatically.
    memory_budget : int
        Bytes the Nyström build may use (``_nystrom`` module docstring).

    Returns
    -------
    CGResult
    """
    return cg_ridge_path(ops, Y, sample_weight, [alpha], fit_intercept=fit_intercept, tol=tol, max_iter=max_iter,
                         log=log, preconditioner=preconditioner, nystrom_rank=nystrom_rank,
                         memory_budget=memory_budget)[0]


def cg_ridge_path(ops, Y, sample_weight, alphas, *, fit_intercept, tol, max_iter, log=None, preconditioner="auto",
                  nystrom_rank=None, memory_budget=DEFAULT_MEMORY_BUDGET):
    """Solve ridge on one Z for every alpha of a list: the entry point for model selection.

    The normal operator (centring, weights) is set up once; the alphas are
    solved from the largest to the smallest, each warm-started from the
    previous solution; a Nyström preconditioner, when chosen, is built once
    (for the smallest alpha, whose rank serves all larger ones) and reused.
    Results come back in the order of ``alphas``.  Each result is what a
    separate ``cg_ridge`` call with that alpha would reach to ``tol`` (the
    iterates differ: warm start, shared preconditioner).

    Parameters
    ----------
    ops : FeatureOperator
        Products with the feature matrix Z (N × D).
    Y : ndarray (N, K), float64
    sample_weight : ndarray (N,) float64, or None for unit weights
    alphas : sequence of float >= 0
    fit_intercept : bool
    tol : float > 0
        Relative residual at which a target stops, for every alpha.
    max_iter : int or None
        Per alpha; None → ``default_max_iter(D)``.
    log : callable or None
        Called with progress messages (verbose mode).
    preconditioner : {"auto", "jacobi", "block", "nystrom"}
        As in ``cg_ridge``; "auto" decides on the smallest positive alpha
        and then uses Nyström for every positive alpha of the path.
    nystrom_rank : int or None
        Nyström sketch size; None chooses it automatically.
    memory_budget : int
        Bytes the Nyström build may use.

    Returns
    -------
    list of CGResult
        One per alpha, in the order given.
    """
    normal = NormalOperator(ops, sample_weight, fit_intercept)
    B, ybar = normal.rhs(Y)
    return solve_normal_path(normal, B, ybar, alphas, tol=tol, max_iter=max_iter, log=log,
                             preconditioner=preconditioner, nystrom_rank=nystrom_rank, memory_budget=memory_budget)


def solve_normal_path(normal, B, ybar, alphas, *, tol, max_iter, log=None, preconditioner="auto", nystrom_rank=None,
                      memory_budget=DEFAULT_MEMORY_BUDGET):
    """Solve (A + αI) X = B for every alpha of a list, on a normal operator already set up.

    ``cg_ridge_path`` once the operator and right-hand sides exist: the
    entry point for an operator whose data lives elsewhere (the Dask
    operator, whose right-hand sides are reduced on the workers).

    Parameters
    ----------
    normal : NormalOperator
        A = Z_cᵀ W Z_c (or an object with its interface).
    B : ndarray (D, K), Z's dtype
        Right-hand sides Z_cᵀ W (Y − ȳ).
    ybar : ndarray (K,), float64
        Target means (for the intercepts).
    alphas : sequence of float >= 0
    tol, max_iter, log, preconditioner, nystrom_rank, memory_budget
        As in ``cg_ridge_path``.

    Returns
    -------
    list of CGResult
        One per alpha, in the order given.
    """
    alphas = [float(a) for a in alphas]
    if alphas:
        _warn_if_alpha_below_tolerance(normal, min(alphas), tol)
    order = sorted(range(len(alphas)), key=lambda i: -alphas[i])
    positive = [a for a in alphas if a > 0]
    factors = None
    if positive and wants_nystrom(normal, min(positive), preconditioner):
        # Decided and built once, on the smallest positive alpha; the Jacobi
        # preconditioners (alpha-dependent, cheap to decide) are made per alpha below.
        _, factors = make_preconditioner(normal, min(positive), "nystrom", rank=nystrom_rank,
                                         memory_budget=memory_budget, log=log)
    results = [None] * len(alphas)
    X = None
    for i in order:
        alpha = alphas[i]
        if factors is not None and alpha > 0:
            M, _ = make_preconditioner(normal, alpha, factors=factors)
        else:
            M, _ = make_preconditioner(normal, alpha, "auto" if preconditioner == "nystrom" else preconditioner)
        if log is not None and M.correction is not None:
            log(f"CG preconditioner (alpha={alpha:g}): {M.description}")
        X, n_iter, residual = block_cg(normal, B, alpha, M, tol=tol, max_iter=max_iter, log=log, X0=X)
        rank = factors.rank if (factors is not None and alpha > 0) else None
        results[i] = CGResult(np.ascontiguousarray(X.T), normal.intercept(X, ybar), n_iter, residual,
                              M.description, rank)
    return results


def _warn_if_alpha_below_tolerance(normal, alpha, tol):
    """Warn when alpha < tol · max diag(ZᵀWZ): CG's answer is then set by the tolerance, not alpha.

    Stopped at ‖r‖ <= tol·‖b‖, CG leaves the directions of eigenvalues
    below ~tol·‖A‖ unresolved, so with a smaller alpha the solution depends
    on the iteration (and, for rank-deficient Z at alpha ≈ 0, it is not the
    minimum-norm least-squares one scikit-learn returns).
    """
    # One O(nnz) pass over Z, like one CG product (the preconditioner's
    # inverse diagonal hides the heavy block's columns).
    diag = normal.diagonal()
    if diag is None or diag.size == 0:
        return
    scale = float(diag.max())
    if scale > 0 and alpha < tol * scale:
        warnings.warn(
            f"alpha={alpha:g} is below tol·max(diag ZᵀZ) = {tol * scale:.3g}: CG's solution is then "
            "determined by the tolerance, not by alpha (with alpha≈0 on rank-deficient features it is "
            "not the minimum-norm least-squares solution). Use a larger alpha, or solver='cholesky', "
            "which returns the minimum-norm solution.",
            UserWarning,
            stacklevel=5,
        )


def block_cg(normal, B, alpha, preconditioner, *, tol, max_iter, log=None, X0=None):
    """Solve (A + αI) X = B column by column, all columns in one block iteration.

    Parameters
    ----------
    normal : NormalOperator
        A = Z_cᵀ W Z_c.
    B : ndarray (D, K), Z's dtype
        Right-hand sides.
    alpha : float >= 0
    preconditioner : Preconditioner
    tol : float > 0
        Relative residual ‖r_k‖ / ‖b_k‖ at which column k stops.
    max_iter : int or None
        None → ``default_max_iter(D)``.
    log : callable or None
    X0 : ndarray (D, K) or None
        Starting point (a warm start); None starts from zero.

    Returns
    -------
    X : ndarray (D, K), Z's dtype
    n_iter : ndarray (K,), int
    residual : ndarray (K,), float64, relative residual reached
    """
    D, K = B.shape
    dtype = normal.dtype
    max_iter = default_max_iter(D) if max_iter is None else max_iter
    t0 = time.perf_counter()
    vec_threads = normal.vector_threads(K)
    nb = n_blocks(D)
    part_rr = np.zeros((nb, K))
    part_rz = np.zeros((nb, K))
    inv_diag = preconditioner.inv_diag

    b_norm = np.sqrt(_colwise_dot(B, B))
    if X0 is None:
        X = np.zeros((D, K), dtype=dtype)
        R = np.array(B, order="C")  # a copy: B is reused across the alphas of a path
    else:
        X = np.array(X0, dtype=dtype, order="C")
        AX, _ = normal.apply(X, alpha)
        R = np.ascontiguousarray(B - AX)
    Zr = (R * inv_diag[:, None]).astype(dtype)
    rz = _colwise_dot(R, Zr) + preconditioner.correct(R, Zr)
    residual = np.sqrt(_colwise_dot(R, R)) / np.where(b_norm > 0, b_norm, 1.0)
    # A warm start may already be there; a cold start always takes a step.
    active = (b_norm > 0) & ((X0 is None) | (residual > tol))
    P = Zr * active.astype(dtype)  # finished targets get a zero direction
    n_iter = np.zeros(K, dtype=np.intp)
    breakdown = np.zeros(K, dtype=bool)

    # Every iteration works on the whole D × K block: a finished target has
    # P = 0, so its products are zero and its X, R stay fixed (step 0).  The
    # products cost little more for a few extra columns, and the block stays
    # contiguous (no fancy indexing).
    for it in range(1, max_iter + 1):
        if not active.any():
            break
        Q, pq = normal.apply(P, alpha)
        ok = pq > 0
        step = np.where(active & ok, rz / np.where(ok, pq, 1.0), 0.0)
        update_xr(X, R, Zr, P, Q, step, inv_diag, part_rr, part_rz, vec_threads)
        rr = part_rr.sum(axis=0)
        rz_new = part_rz.sum(axis=0) + preconditioner.correct(R, Zr)
        was_active = active.copy()
        residual[was_active] = np.sqrt(rr[was_active]) / b_norm[was_active]
        n_iter[was_active] = it
        # pq <= 0 once the residual is below rounding (tol=0 gets there) is
        # convergence, not a breakdown: p underflows, the matrix is fine.
        breakdown |= was_active & ~ok & (residual > np.finfo(dtype).eps)
        active = was_active & ok & (residual > tol)
        if log is not None and (it % 10 == 0 or not active.any() or it == max_iter):
            log(
                f"CG iteration {it}: max relative residual {residual.max():.3e}, "
                f"{int(active.sum())}/{K} targets active, elapsed {time.perf_counter() - t0:.1f} s"
            )
        beta = np.where(active, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        rz = np.where(active, rz_new, rz)
        update_p(P, Zr, beta, active.astype(np.float64), vec_threads)

    not_converged = active | breakdown
    if not_converged.any():
        bad = np.flatnonzero(not_converged)
        why = "CG broke down (matrix not positive definite; is alpha > 0?)" if breakdown.any() else (
            f"CG did not converge within max_iter={max_iter} iterations"
        )
        warnings.warn(
            f"{why}: relative residual reached {residual[bad].max():.3e} "
            f"(tol={tol:g}) for target(s) {bad.tolist()}. Increase max_iter or tol, or alpha."
            + (" (tol=0 asks for an exact solution, which rounding prevents.)" if tol == 0 else ""),
            ConvergenceWarning,
            stacklevel=5,
        )

    return X, n_iter, residual
