"""The direct ridge solution: a Cholesky factor of the centred Gram and everything that follows from it.

``RidgeSolution.from_statistics`` factorises A = Z_cᵀ W Z_c + αI (from the
sufficient statistics of ``_solvers/stats.py``), solves for the coefficients and
intercepts, and estimates the noise: σ² = Σ w r² / (N − dof) with
dof = tr(Z_c A⁻¹ Z_cᵀ W) (+1 for the intercept), both from the statistics
alone (no second pass over the data).  The solution is immutable and owns
its factor, which gives the posterior predictive variance of the Bayesian
reading of ridge (``predictive_variance``).

Precision: factor and solves in float64 whatever the features' dtype (the
Gram of float32 features with a small alpha is too ill-conditioned for a
float32 Cholesky).

Singular systems (alpha = 0, or an alpha below the Gram's rounding, on
rank-deficient features): the Cholesky factorisation fails, and the
solution is then the minimum-norm least-squares one, β = (G + αI)⁺ b from
a symmetric eigendecomposition with scikit-learn's cut-off for small
eigenvalues (as its Ridge, through lstsq, does); such a solution has no
factor, so it gives no predictive variance.

Scale: sums that overflow float64 (features or targets of magnitude ~1e154
and more) raise ``ValueError`` naming the problem, never NaN coefficients.  Factor, solves and trtri run on one BLAS thread:
threaded potrf/potrs give results that depend on the thread count.  They
cost O(D³) against the Gram's O(N·D²), small when N >> D.
"""

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from .._core.threads import single_threaded_blas

#: Rows of L⁻¹ squared and summed at a time for tr(A⁻¹) (bounds the temporary).
_TRACE_ROWS = 256


def _readonly(a):
    if a is not None:
        a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class RidgeSolution:
    """Ridge solved by Cholesky: coefficients, intercepts, noise estimate and the factor (immutable).

    Build with ``RidgeSolution.from_statistics`` (or
    ``RidgeStatistics.solve``).  Arrays are read-only.

    Attributes
    ----------
    coef : ndarray of shape (K, D), float64
    intercept : ndarray of shape (K,), float64
    noise_variance : ndarray of shape (K,), float64
        σ² per target, Σ w r² / (N − dof); NaN when N <= dof.
    dof : float
        Effective degrees of freedom tr(Z_c A⁻¹ Z_cᵀ W) (+1 for the intercept).
    alpha : float
    dtype : numpy dtype
        The features' dtype (coefficients are returned in it by estimators).
    factor : ndarray of shape (D, D), float64, or None
        Lower Cholesky factor L of A = Z_cᵀ W Z_c + αI (upper triangle
        undefined); None when A is singular (minimum-norm solution).
    mean : ndarray of shape (D,) or None
        Weighted feature means μ (None without intercept).
    weight_sum : float
        Σ w.
    """

    coef: np.ndarray
    intercept: np.ndarray
    noise_variance: np.ndarray
    dof: float
    alpha: float
    dtype: np.dtype
    factor: np.ndarray
    mean: np.ndarray | None
    weight_sum: float

    def __post_init__(self):
        for name in ("coef", "intercept", "noise_variance", "factor", "mean"):
            _readonly(vars(self)[name])

    def __setstate__(self, state):
        # Unpickling restores the fields directly: make the arrays read-only again.
        self.__dict__.update(state)
        self.__post_init__()

    @classmethod
    def from_statistics(cls, stats, alpha, *, overwrite=False, singular="min_norm", owner="Ridge"):
        """Factor Z_cᵀWZ_c + αI from ``stats`` and solve for every target.

        Parameters
        ----------
        stats : RidgeStatistics
        alpha : float >= 0
        overwrite : bool, default=False
            Factor in the statistics' own Gram buffer (saves D² memory); the
            statistics cannot be used afterwards.
        singular : {"min_norm", "raise"}, default="min_norm"
            When Z_cᵀWZ_c + αI is not positive definite: return the
            minimum-norm least-squares solution (as scikit-learn), or raise
            ``LinAlgError`` (a caller that can rebuild the statistics more
            accurately first).
        owner : str, default="Ridge"
            The estimator's name, for the messages.

        Returns
        -------
        RidgeSolution

        Raises
        ------
        numpy.linalg.LinAlgError
            If Z_cᵀWZ_c + αI is not positive definite and ``singular="raise"``.
        ValueError
            If the statistics or the solution overflow float64 (features or
            targets too large in magnitude).
        """
        check_statistics(stats, owner)
        A = stats.release_gram() if overwrite else stats.gram_lower.copy(order="F")
        b = stats.cross
        D = A.shape[0]
        A[np.diag_indices(D)] += alpha
        L = None
        if singular == "min_norm":
            # potrf overwrites only the lower triangle: keep A's off-diagonal
            # in the (unused) upper one and its diagonal aside, so a failed
            # factorisation can rebuild A without a second D × D buffer.
            diag = A.diagonal().copy()
            _mirror(A, to_upper=True)
        with single_threaded_blas():
            try:
                L, _ = scipy.linalg.cho_factor(A, lower=True, overwrite_a=True, check_finite=False)
            except np.linalg.LinAlgError as exc:
                if singular == "raise":
                    raise np.linalg.LinAlgError(
                        "The regularised Gram matrix ZᵀZ + alpha·I is not positive definite "
                        f"({exc}); use alpha > 0."
                    ) from exc
            if L is not None:
                W = scipy.linalg.cho_solve((L, True), b, check_finite=False)  # (D, K)
                tr_inv = _trace_of_inverse(L)
            else:
                _mirror(A, to_upper=False)
                A[np.diag_indices(D)] = diag
                W, tr_inv = _min_norm_solve(A, b)
        _check_scale("the coefficients", W, owner)
        mean = stats.mean if stats.centred else None
        # Residual sum of squares from the sums (no second pass over the data):
        # Σw r² = yᵀWy − 2wᵀb + wᵀGw and G w = b − αw  ⇒  yᵀWy − wᵀb − α‖w‖².
        with np.errstate(over="ignore", invalid="ignore"):
            rss = stats.y_sum_squares - np.einsum("ij,ij->j", W, b) - alpha * np.einsum("ij,ij->j", W, W)
        _check_scale("the residual sum of squares", rss, owner)
        rss = np.maximum(rss, 0.0)
        if L is not None:
            dof = D - alpha * tr_inv + (1.0 if mean is not None else 0.0)
        else:
            dof = tr_inv + (1.0 if mean is not None else 0.0)  # tr(G (G+αI)⁺)
        denom = stats.n_samples - dof
        return cls(
            coef=np.ascontiguousarray(W.T),
            intercept=np.asarray(stats.y_mean - (mean @ W if mean is not None else 0.0), dtype=np.float64),
            noise_variance=rss / denom if denom > 0 else np.full_like(rss, np.nan),
            dof=float(dof),
            alpha=float(alpha),
            dtype=np.dtype(stats.dtype),
            factor=L,
            mean=None if mean is None else mean.copy(),
            weight_sum=float(stats.weight_sum),
        )

    def latent_variance_factor(self, Z):
        """Return q(z) = (z−μ)ᵀA⁻¹(z−μ) (+ 1/Σw with an intercept) for each row z of ``Z``.

        The posterior variance of f(z) = zᵀβ + b is q(z)·σ² (prior β ~
        N(0, σ²/α·I), flat prior on b).

        Parameters
        ----------
        Z : ndarray or sparse matrix of shape (n, D)
            Feature rows (any float dtype).

        Returns
        -------
        ndarray of shape (n,), float64
        """
        if self.factor is None:
            raise ValueError(
                "The predictive variance is undefined: the regularised Gram matrix ZᵀZ + alpha·I is "
                "singular (alpha = 0 or tiny on rank-deficient features). Fit with alpha > 0."
            )
        V = (Z.toarray() if sp.issparse(Z) else np.asarray(Z)).astype(np.float64)
        if self.mean is not None:
            V = V - self.mean
        # (z−μ)ᵀ A⁻¹ (z−μ) = ‖L⁻¹(z−μ)‖²
        with single_threaded_blas():
            L_inv_v = scipy.linalg.solve_triangular(self.factor, V.T, lower=True, check_finite=False)
        q = np.einsum("ij,ij->j", L_inv_v, L_inv_v)
        if self.mean is not None:
            q += 1.0 / self.weight_sum
        return q

    def predictive_variance(self, Z):
        """Return the posterior variance of the latent f(z) = zᵀβ + b for each row and target (no noise term).

        Parameters
        ----------
        Z : ndarray or sparse matrix of shape (n, D)

        Returns
        -------
        ndarray of shape (n, K), float64
            q(z)·σ²_k (see ``latent_variance_factor``).
        """
        return self.latent_variance_factor(Z)[:, None] * np.asarray(self.noise_variance, dtype=np.float64)[None, :]


def check_statistics(stats, owner="Ridge"):
    """Raise ValueError if sufficient statistics overflowed float64 (features or targets too large)."""
    _check_scale("the Gram matrix ZᵀZ", stats.gram_lower, owner)
    _check_scale("the products Zᵀy", stats.cross, owner)
    _check_scale("the sum of squares of y", stats.y_sum_squares, owner)


def _check_scale(what, values, owner="Ridge"):
    """Raise ValueError if ``values`` overflowed (inf or NaN): the data's scale, never a NaN fit."""
    if not np.all(np.isfinite(values)):
        raise ValueError(
            f"{owner}: {what} overflowed float64: the features or the targets are too large in "
            "magnitude (values of about 1e154 or more square to infinity). Rescale X and y, "
            "e.g. with sklearn.preprocessing.StandardScaler, before fitting."
        )


def _mirror(A, *, to_upper):
    """Copy A's strict lower triangle onto its upper one (or back), a column at a time (no index arrays)."""
    for j in range(1, A.shape[0]):
        if to_upper:
            A[:j, j] = A[j, :j]
        else:
            A[j, :j] = A[:j, j]


def _min_norm_solve(A, b):
    """Return (A⁺b, tr(G A⁺)) for a symmetric PSD A = G + αI given by its lower triangle.

    Eigenvalues below ``max(D) · eps · λ_max`` count as zero (the rank
    cut-off of LAPACK's gelsd used by scikit-learn's lstsq), which gives the
    minimum-norm least-squares solution.  tr(G A⁺) is the degrees of freedom.
    """
    lam, V = scipy.linalg.eigh(A, lower=True, check_finite=False)
    cutoff = max(A.shape) * np.finfo(np.float64).eps * max(float(lam.max(initial=0.0)), 0.0)
    keep = lam > cutoff
    inv = np.where(keep, 1.0 / np.where(keep, lam, 1.0), 0.0)
    W = V @ (inv[:, None] * (V.T @ b))
    # A = G + αI shares G's eigenvectors: tr(G A⁺) = Σ_kept (λ − α)/λ; α is
    # not known here, but the kept eigenvalues of a singular A are those of G
    # shifted by a tiny α, so count them (the rank) — exact for α = 0.
    return W, float(np.count_nonzero(keep))


def _trace_of_inverse(L):
    """Return tr(A⁻¹) = ‖L⁻¹‖_F² for the lower Cholesky factor L of A (D³/3 flops, like potrf)."""
    D = L.shape[0]
    # Lower triangle of trtri's output; the upper part holds a copy of the
    # input's, ignored.
    L_inv, info = scipy.linalg.lapack.get_lapack_funcs("trtri", (L,))(L, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"trtri failed with info={info}")
    tr_inv = 0.0
    for s in range(0, D, _TRACE_ROWS):
        e = min(s + _TRACE_ROWS, D)
        tr_inv += float(np.sum(np.tril(L_inv[s:e, :e], k=s) ** 2))
    return tr_inv
