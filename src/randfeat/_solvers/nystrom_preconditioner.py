"""Randomized Nyström preconditioner for CG on the ridge normal equations.

Frangella, Tropp & Udell, "Randomized Nyström Preconditioning", SIAM J.
Matrix Anal. Appl. 44(2), 2023 (Algorithms 2.1 and 5.1).  From a sketch
Y = AΩ of A = Z_cᵀ W Z_c (Ω a D × ℓ Gaussian test matrix) the Nyström
approximation Â = Y (ΩᵀY)⁺ Yᵀ = U Λ Uᵀ is computed once, and

    P⁻¹ = (λ_ℓ + α) U (Λ + αI)⁻¹ Uᵀ + (I − U Uᵀ)

preconditions A + αI: the preconditioned matrix has its spectrum in
[1, (λ_ℓ + α + ‖A − Â‖)/α]-ish, so once λ_ℓ (the smallest kept eigenvalue)
is a small multiple of α, CG needs a few dozen iterations whatever α is.

U and Λ depend on A only — not on α, not on the targets — so one
``NystromFactors`` serves every target and every alpha solved on one Z
(``cg_ridge_path`` builds it once, for the smallest alpha of the path).

Build cost.  The sketch takes products of the normal operator with all
columns of Ω in blocks of ``SKETCH_BLOCK`` columns (each block is one pass
over Z, so the build is ℓ / SKETCH_BLOCK normal products, not ℓ), plus
O(D ℓ²) dense work for ΩᵀY, the Gram YᵀY and U.  The rank grows by
doubling (the earlier columns are kept, so the final sketch is paid once
plus half) until λ_ℓ <= ``RANK_ALPHA_RATIO`` · α, the memory budget is
reached, or ℓ = D.

Memory budget.  The build holds four D × ℓ float64 arrays at its peak
(Ω, the sketch Y, B = Y C⁻¹ and U) and a few ℓ × ℓ ones, about 32·D·ℓ
bytes; the factors kept for the solve are U (8·D·ℓ bytes).
``memory_budget`` bounds 32·D·ℓ (default ``DEFAULT_MEMORY_BUDGET`` =
1 GiB, e.g. ℓ <= 908 at D = 36918); an explicit ``rank`` that does not fit raises ``MemoryError``
before anything is allocated.

Determinism.  Ω comes from a fixed seed; the normal products are
thread-count independent (``_solvers/normal.py``) and every dense factorisation
and product here runs with BLAS held to one thread, so the factors — and
the CG iterates — are bit-identical for any ``n_jobs``.
"""

import numbers

import numpy as np
import scipy.linalg
from sklearn.utils._param_validation import InvalidParameterError

from .._core.threads import single_threaded_blas

#: Stop growing the rank once the smallest kept eigenvalue is <= this · α.
RANK_ALPHA_RATIO = 10.0
#: First rank tried by the automatic choice (then doubled).
INITIAL_RANK = 64
#: Columns of Ω per normal-operator pass while sketching (bounds the N × block work array).
SKETCH_BLOCK = 128
#: Default bound on the build's memory, bytes (about 32·D·ℓ).
DEFAULT_MEMORY_BUDGET = 2**30
#: Seed of the Gaussian test matrix (results must not depend on any global state).
SKETCH_SEED = 0x5EED


def _bytes_for_rank(n_features, rank):
    """Build memory for a rank-``rank`` sketch of a D-column operator: Ω, Y, B and U in float64."""
    return 32 * int(n_features) * int(rank)


def check_rank(rank, n_features, memory_budget):
    """Validate a rank override against the width and the memory budget.

    Parameters
    ----------
    rank : int or None
        None for the automatic choice.
    n_features : int
        D, the width of Z.
    memory_budget : int
        Bytes the build may use.

    Returns
    -------
    int or None
        The rank (or None).

    Raises
    ------
    InvalidParameterError
        ``rank`` is not an integer, is < 1, or is larger than D.
    MemoryError
        The requested rank's build would exceed ``memory_budget``.
    """
    if rank is None:
        return None
    if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, numbers.Integral):
        raise InvalidParameterError(f"Nyström rank must be an integer or None, got {rank!r}.")
    rank = int(rank)
    if rank < 1 or rank > n_features:
        raise InvalidParameterError(
            f"Nyström rank must be in [1, n_features={n_features}], got {rank}."
        )
    need = _bytes_for_rank(n_features, rank)
    if need > memory_budget:
        raise MemoryError(
            f"A rank-{rank} Nyström preconditioner on {n_features} features needs about {need / 2**20:.0f} MiB "
            f"to build, over the memory budget of {memory_budget / 2**20:.0f} MiB; lower the rank or raise the budget."
        )
    return rank


def _sketch(normal, omega):
    """Return A Ω (float64) by normal products over blocks of ``SKETCH_BLOCK`` columns."""
    D, ell = omega.shape
    Y = np.empty((D, ell))
    for start in range(0, ell, SKETCH_BLOCK):
        stop = min(start + SKETCH_BLOCK, ell)
        block = np.ascontiguousarray(omega[:, start:stop], dtype=normal.dtype)
        Q, _ = normal.apply(block, 0.0)
        Y[:, start:stop] = Q
    return Y


def _factor(omega, Y, eps):
    """Return (U, λ) of the Nyström approximation Y (ΩᵀY)⁺ Yᵀ, eigenvalues decreasing.

    FTU Algorithm 2.1 with a shift ν for stability, but U from the ℓ × ℓ
    eigenproblem of BᵀB (B = Y_ν C⁻ᵀ) rather than an SVD of the D × ℓ B:
    it avoids a D × ℓ SVD workspace.  Squaring loses accuracy only
    on eigenvalues below ~eps·λ_max, far under any α that CG can use.
    """
    D, ell = omega.shape
    # The shift must cover the sketch's rounding: FTU's √D·eps·‖Y‖ with the
    # eps of the precision the products ran in (float32 Z → float32 sketch),
    # raised until the core is numerically positive definite.
    with single_threaded_blas():
        nu = np.sqrt(D) * eps * np.linalg.norm(Y)
        core0 = omega.T @ Y
        gram = omega.T @ omega
        for _ in range(8):
            core = core0 + nu * gram
            core = 0.5 * (core + core.T)
            try:
                C = scipy.linalg.cholesky(core, lower=False, check_finite=False)  # core = CᵀC
                break
            except np.linalg.LinAlgError:
                nu *= 100.0
        else:
            raise np.linalg.LinAlgError("the Nyström sketch's core matrix is not positive definite")
        del core0, gram, core
        Y += nu * omega  # Y_ν in place (undone below: the caller keeps Y to grow the sketch)
        # B = Y_ν C⁻¹ (so B Bᵀ = Y_ν core⁻¹ Y_νᵀ), solved row-wise: Bᵀ = C⁻ᵀ Y_νᵀ.
        B = scipy.linalg.solve_triangular(C, Y.T, trans="T", lower=False, check_finite=False).T
        G = B.T @ B
        G = 0.5 * (G + G.T)
        sigma2, V = scipy.linalg.eigh(G, check_finite=False)
        order = np.argsort(-sigma2, kind="stable")
        sigma2, V = sigma2[order], V[:, order]
        keep = sigma2 > np.finfo(np.float64).eps * max(sigma2[0] if len(sigma2) else 0.0, np.finfo(np.float64).tiny)
        sigma2, V = sigma2[keep], V[:, keep]
        U = B @ (V / np.sqrt(sigma2))
        del B
        Y -= nu * omega
    lam = np.maximum(sigma2 - nu, 0.0)
    return U, lam


class NystromFactors:
    """U, Λ of a randomized Nyström approximation of A = Z_cᵀ W Z_c (independent of α and targets).

    Parameters
    ----------
    U : ndarray of shape (D, r), float64
        Orthonormal eigenvectors of the approximation.
    eigenvalues : ndarray of shape (r,), float64, decreasing
        Its eigenvalues Λ.
    sketch_size : int
        Columns of the sketch (ℓ); r <= ℓ after dropping null directions.
    n_products : int
        Normal-operator passes the build took.
    """

    def __init__(self, U, eigenvalues, sketch_size, n_products):
        self.U = U
        self.eigenvalues = eigenvalues
        self.sketch_size = sketch_size
        self.n_products = n_products

    @property
    def rank(self):
        """Number of kept eigenpairs r."""
        return self.U.shape[1]

    def correction(self, alpha):
        """Return the ``Preconditioner`` correction applying P⁻¹ for A + αI.

        Parameters
        ----------
        alpha : float > 0

        Returns
        -------
        NystromCorrection
        """
        return NystromCorrection(self, alpha)


class NystromCorrection:
    """Applies P⁻¹ = (λ_r + α) U (Λ + αI)⁻¹ Uᵀ + (I − UUᵀ) on every row.

    Parameters
    ----------
    factors : NystromFactors
    alpha : float > 0
    """

    def __init__(self, factors, alpha):
        self.factors = factors
        lam = factors.eigenvalues
        lam_min = lam[-1] if len(lam) else 0.0
        # P⁻¹R = R + U diag(scale) UᵀR; scale <= 0, so P⁻¹ is SPD with eigenvalues in (0, 1].
        self.scale = (lam_min + alpha) / (lam + alpha) - 1.0

    def apply(self, R, Zr):
        """Set Zr = P⁻¹R (all rows); return the float64 Σ R∘Zr per column.

        Parameters
        ----------
        R : ndarray of shape (D, K)
        Zr : ndarray of shape (D, K)

        Returns
        -------
        ndarray of shape (K,), float64
        """
        U = self.factors.U
        R64 = R.astype(np.float64)
        with single_threaded_blas():
            out = R64 + U @ (self.scale[:, None] * (U.T @ R64))
        Zr[...] = out
        return np.einsum("ij,ij->j", R64, Zr.astype(np.float64, copy=False))


def build_nystrom(normal, alpha, *, rank=None, memory_budget=DEFAULT_MEMORY_BUDGET, log=None):
    """Sketch the normal operator and return its ``NystromFactors``.

    Parameters
    ----------
    normal : NormalOperator
        A = Z_cᵀ W Z_c.
    alpha : float > 0
        The smallest regularisation the factors will serve (sets the
        automatic rank: grow until λ_ℓ <= ``RANK_ALPHA_RATIO``·α).
    rank : int or None
        Sketch size ℓ; None chooses it automatically (start at
        ``INITIAL_RANK``, double, within ``memory_budget`` and D).
    memory_budget : int
        Bytes the build may use (about 32·D·ℓ, see the module docstring).
    log : callable or None
        Called with a progress message.

    Returns
    -------
    NystromFactors
    """
    D = normal.shape[1]
    rank = check_rank(rank, D, memory_budget)
    max_rank = max(1, min(D, memory_budget // _bytes_for_rank(D, 1)))
    rng = np.random.default_rng(SKETCH_SEED)
    target = rank if rank is not None else min(INITIAL_RANK, max_rank)
    omega = np.empty((D, 0))
    Y = np.empty((D, 0))
    n_products = 0
    while True:
        # Drawn row-major as (new, D): a grown sketch has the same Ω as one drawn at its final size.
        new = rng.standard_normal((target - omega.shape[1], D)).T
        Y_new = _sketch(normal, new)
        n_products += -(-new.shape[1] // SKETCH_BLOCK)
        omega = np.hstack([omega, new])
        Y = np.hstack([Y, Y_new])
        del new, Y_new
        U, lam = _factor(omega, Y, np.finfo(normal.dtype).eps)
        if log is not None:
            log(f"Nyström sketch of size {target}: smallest kept eigenvalue {lam[-1] if len(lam) else 0.0:.3e}")
        if rank is not None or target >= max_rank or (len(lam) and lam[-1] <= RANK_ALPHA_RATIO * alpha):
            break
        target = min(2 * target, max_rank)
    return NystromFactors(U, lam, target, n_products)
