"""Ridge by block CG, as the pipelines call it: one alpha (``cg_ridge``), a path of alphas, and the dual.

``cg_ridge_path`` solves a list of alphas on one Z, largest first, each
warm-started from the previous solution, with one Nyström build for all:
the entry point for model selection.  ``solve_normal_path`` is the same
once the normal operator exists (the Dask backend's operator reduces its
right-hand sides on the workers).  When N <= D / ``DUAL_RATIO`` and the
"auto" preconditioner is a scaled identity, CG iterates in the dual
(ẐẐᵀ + αI, N × K iterates; ``_dual_solve``).  The iteration itself is
``randfeat._solvers.cg.block_cg``.
"""

import warnings
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .cg import _colwise_dot, block_cg, default_max_iter
from .normal import DualNormalOperator, NormalOperator
from .nystrom_preconditioner import DEFAULT_MEMORY_BUDGET
from .precond import Preconditioner, make_preconditioner, wants_nystrom


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
        Bytes the Nyström build may use (``_solvers/nystrom_preconditioner.py`` module docstring).

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
                             preconditioner=preconditioner, nystrom_rank=nystrom_rank, memory_budget=memory_budget,
                             Y=Y)


def solve_normal_path(normal, B, ybar, alphas, *, tol, max_iter, log=None, preconditioner="auto", nystrom_rank=None,
                      memory_budget=DEFAULT_MEMORY_BUDGET, Y=None):
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
    Y : ndarray (N, K), float64, or None
        The targets, when the rows are in memory: then, with the "auto"
        preconditioner, where it is a scaled identity and N <= D /
        ``DUAL_RATIO``, CG iterates in the dual (``_dual_solve``).

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
    X = A = None  # the last primal solution, the last dual one (warm starts)
    # The dual only for "auto": an explicit preconditioner is a primal one.
    dual = DualNormalOperator(normal) if Y is not None and preconditioner == "auto" and _dual_pays(normal) else None
    for i in order:
        alpha = alphas[i]
        if factors is not None and alpha > 0:
            M, _ = make_preconditioner(normal, alpha, factors=factors)
        else:
            M, _ = make_preconditioner(normal, alpha, "auto" if preconditioner == "nystrom" else preconditioner)
        if log is not None and M.correction is not None:
            log(f"CG preconditioner (alpha={alpha:g}): {M.description}")
        if dual is not None and alpha > 0 and _is_scaled_identity(M):
            X, A, n_iter, residual = _dual_solve(normal, dual, B, dual.rhs(Y, ybar), alpha, tol=tol,
                                                 max_iter=max_iter, log=log, A0=A)
            description = DUAL_DESCRIPTION
        else:
            X, n_iter, residual = block_cg(normal, B, alpha, M, tol=tol, max_iter=max_iter, log=log, X0=X)
            description = M.description
        rank = factors.rank if (factors is not None and alpha > 0) else None
        results[i] = CGResult(np.ascontiguousarray(X.T), normal.intercept(X, ybar), n_iter, residual,
                              description, rank)
    return results


#: The dual is used when N <= D / DUAL_RATIO (and the preconditioner is a
#: scaled identity, which the dual's plain CG matches).  Letter-like at 16×
#: gamma (20000 rows, 314338 columns, 26 classes): 20 / 44 / 45 iterations
#: at alpha 1 / 1e-2 / 1e-4 against 19 / 40 / 41 in the primal, each ~10×
#: cheaper (the D × K algebra dominated).  At 4× gamma (N = 0.63 D) the
#: dual took 1.6× the primal's iterations.  DESIGN.md, "Hard cases".
DUAL_RATIO = 2
DUAL_DESCRIPTION = "none: CG on the dual (ZZᵀ + αI, N <= D/2)"


def _dual_pays(normal):
    """True if CG on ``normal`` may iterate in the dual: rows in memory, N <= D / ``DUAL_RATIO``."""
    N, D = normal.shape
    return normal.supports_dual and N * DUAL_RATIO <= D


def _is_scaled_identity(M):
    """True if the preconditioner M is a multiple of the identity (no block, one scale)."""
    return M.correction is None and M.inv_diag.size > 0 and bool(np.all(M.inv_diag == M.inv_diag[0]))


def _dual_solve(normal, dual, B, Yhat, alpha, *, tol, max_iter, log, A0):
    """Ridge through the dual: block CG on (ẐẐᵀ + αI) A = Ŷ, then X = ẐᵀA.

    The dual residual is stopped at ``tol``, then the primal one
    ‖Bₖ − (A + αI)Xₖ‖ / ‖Bₖ‖ (what every CG fit reports) is measured; if a
    target misses ``tol`` there, the dual iterations resume (warm) at a
    tighter dual tolerance.  If the primal residual still misses ``tol``
    when ``max_iter`` is spent, one ``ConvergenceWarning`` names it (the
    dual's own warnings, about its residual, are not the user's).  Returns
    (X (D × K) in Z's dtype, A (N × K) float64, n_iter, primal residual).
    """
    max_iter = default_max_iter(normal.shape[1]) if max_iter is None else max_iter
    identity = Preconditioner(np.ones(dual.shape[0]), description="none")
    b_norm = np.sqrt(_colwise_dot(B, B))
    dual_tol, used = tol, np.zeros(B.shape[1], dtype=np.intp)
    A = A0
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            A, n_iter, _ = block_cg(dual, Yhat, alpha, identity, tol=dual_tol, max_iter=max_iter - int(used.max()),
                                    log=log, X0=A, out_dtype=np.float64)
        used += n_iter
        X = dual.to_primal(A)
        R = np.asarray(B, dtype=np.float64) - normal.apply(np.ascontiguousarray(X), alpha)[0]
        residual = np.sqrt(_colwise_dot(R, R)) / np.where(b_norm > 0, b_norm, 1.0)
        if np.all(residual <= tol) or used.max() >= max_iter or dual_tol <= np.finfo(np.float64).eps:
            if np.any(residual > tol):
                bad = np.flatnonzero(residual > tol)
                warnings.warn(
                    f"CG (in the dual) did not converge within max_iter={max_iter} iterations: relative residual "
                    f"reached {residual[bad].max():.3e} (tol={tol:g}) for target(s) {bad.tolist()}. "
                    "Increase max_iter or tol, or alpha.",
                    ConvergenceWarning,
                    stacklevel=5,
                )
            return X, A, used, residual
        # The primal residual is Ẑᵀ r_dual: tighten the dual target by the measured gap.
        dual_tol = max(dual_tol * min(0.5, 0.5 * tol / float(residual.max())), np.finfo(np.float64).eps)
        if log is not None:
            log(f"dual CG: primal residual {residual.max():.3e} > tol; dual tolerance now {dual_tol:.3e}")


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
