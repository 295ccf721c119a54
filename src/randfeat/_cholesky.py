"""The direct ridge solution: a Cholesky factor of the centred Gram and everything that follows from it.

``RidgeSolution.from_statistics`` factorises A = Z_cᵀ W Z_c + αI (from the
sufficient statistics of ``_stats.py``), solves for the coefficients and
intercepts, and estimates the noise: σ² = Σ w r² / (N − dof) with
dof = tr(Z_c A⁻¹ Z_cᵀ W) (+1 for the intercept), both from the statistics
alone (no second pass over the data).  The solution is immutable and owns
its factor, which gives the posterior predictive variance of the Bayesian
reading of ridge (``predictive_variance``).

Precision: factor and solves in float64 whatever the features' dtype (the
Gram of float32 features with a small alpha is too ill-conditioned for a
float32 Cholesky).  Factor, solves and trtri run on one BLAS thread:
threaded potrf/potrs give results that depend on the thread count.  They
cost O(D³) against the Gram's O(N·D²), small when N >> D.
"""

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ._threads import single_threaded_blas

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
    factor : ndarray of shape (D, D), float64
        Lower Cholesky factor L of A = Z_cᵀ W Z_c + αI (upper triangle undefined).
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
            _readonly(getattr(self, name))

    def __setstate__(self, state):
        # Unpickling restores the fields directly: make the arrays read-only again.
        self.__dict__.update(state)
        self.__post_init__()

    @classmethod
    def from_statistics(cls, stats, alpha, *, overwrite=False):
        """Factor Z_cᵀWZ_c + αI from ``stats`` and solve for every target.

        Parameters
        ----------
        stats : RidgeStatistics
        alpha : float >= 0
        overwrite : bool, default=False
            Factor in the statistics' own Gram buffer (saves D² memory); the
            statistics cannot be used afterwards.

        Returns
        -------
        RidgeSolution

        Raises
        ------
        numpy.linalg.LinAlgError
            If Z_cᵀWZ_c + αI is not positive definite (alpha = 0 on
            collinear features).
        """
        A = stats.release_gram() if overwrite else stats.gram_lower.copy(order="F")
        b = stats.cross
        D = A.shape[0]
        A[np.diag_indices(D)] += alpha
        with single_threaded_blas():
            try:
                L, _ = scipy.linalg.cho_factor(A, lower=True, overwrite_a=True, check_finite=False)
            except np.linalg.LinAlgError as exc:
                raise np.linalg.LinAlgError(
                    "The regularised Gram matrix ZᵀZ + alpha·I is not positive definite "
                    f"({exc}); use alpha > 0."
                ) from exc
            W = scipy.linalg.cho_solve((L, True), b, check_finite=False)  # (D, K)
            tr_inv = _trace_of_inverse(L)
        mean = stats.mean if stats.centred else None
        # Residual sum of squares from the sums (no second pass over the data):
        # Σw r² = yᵀWy − 2wᵀb + wᵀGw and G w = b − αw  ⇒  yᵀWy − wᵀb − α‖w‖².
        rss = stats.y_sum_squares - np.einsum("ij,ij->j", W, b) - alpha * np.einsum("ij,ij->j", W, W)
        rss = np.maximum(rss, 0.0)
        dof = D - alpha * tr_inv + (1.0 if mean is not None else 0.0)
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
