"""One eigendecomposition per set of rows, and what every alpha needs from it (``RidgeCV``'s engine).

* **Gram path**: G = Z_cᵀWZ_c = VΛVᵀ from streamed sufficient statistics
  (``randfeat._solvers.stats``, no N × D matrix held), u = Vᵀb.  Per α:
  β = V diag(1/(λ+α)) u.
* **Kernel path** (a materialised dense Z with N < D, all weights > 0):
  K = Z̃_cZ̃_cᵀ = QΛQᵀ with Z̃_c = √W Z_c, whose direction √w (the intercept)
  has eigenvalue 0 exactly by construction.
* GCV from the eigenvalues and the statistics alone (``Decomposition.gcv_errors``).

Leave-one-out residuals from a decomposition: ``loo.py``.
"""

import numpy as np
import scipy.linalg

from .._core.threads import single_threaded_blas
from .plan import accumulate


class Decomposition:
    """One eigendecomposition and what every α needs from it (see the module docstring)."""

    def __init__(self, *, kind, eigvals, basis, u, mean, y_mean, weight_sum, n_samples, yss, centred):
        self.kind = kind  # "gram" (basis V, D × D) or "kernel" (basis Q, N × N)
        self.eigvals = eigvals
        self.basis = basis
        self.u = u  # gram: Vᵀb (D × K); kernel: Qᵀỹ (N × K)
        self.mean = mean
        self.y_mean = y_mean
        self.weight_sum = weight_sum
        self.n_samples = n_samples
        self.yss = yss
        self.centred = centred
        self.Zt = None  # kernel path: √W Z_c, for the coefficients

    def coef(self, alpha_per_column):
        """Return β (K × D) with column k solved at ``alpha_per_column[k]``."""
        a = np.asarray(alpha_per_column)[None, :]
        lam = self.eigvals[:, None]
        if self.kind == "gram":
            return (self.basis @ (self.u / (lam + a))).T
        # Dual: β = Z̃ᵀ Q diag(1/(λ+α)) Qᵀỹ; the intercept direction (λ = 0) is not part of β.
        scale = np.where(lam > 0, 1.0 / (lam + a), 0.0)
        return (self.Zt.T @ (self.basis @ (self.u * scale))).T

    def gcv_errors(self, alphas):
        """Return the GCV mean squared error, shape (K, A)."""
        lam = self.eigvals[:, None]
        # RSS(α) = Σw(y−ȳ)² − Σ_j u_j² (λ_j + 2α)/(λ_j + α)²  (gram path, u = Vᵀb).
        f = (lam + 2 * alphas[None, :]) / (lam + alphas[None, :]) ** 2  # (D, A)
        rss = np.maximum(self.yss[:, None] - (self.u**2).T @ f, 0.0)
        dof = (lam / (lam + alphas[None, :])).sum(axis=0) + (1.0 if self.centred else 0.0)
        n = self.n_samples
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(dof < n, (rss / n) / (1.0 - dof / n) ** 2, np.inf)



def gram_decomposition(blocks, Y, w, n_features, fit_intercept, n_threads):
    """The gram-path decomposition of the rows ``blocks`` gives (``plan.FeatureSource.dense_blocks``)."""
    return eigen_of(accumulate(blocks, Y, w, n_features, fit_intercept, n_threads)[0][0])


def eigen_of(stats):
    """The gram-path decomposition of accumulated statistics."""
    with single_threaded_blas():  # eigh's result must not depend on the thread count
        lam, V = scipy.linalg.eigh(stats.gram(), check_finite=False)
    lam = np.maximum(lam, 0.0)
    # C order: every leave-one-out block multiplies by V (row_products would copy it each time).
    V = np.ascontiguousarray(V)
    return Decomposition(kind="gram", eigvals=lam, basis=V, u=V.T @ stats.cross, mean=stats.mean,
                         y_mean=stats.y_mean, weight_sum=stats.weight_sum, n_samples=stats.n_samples,
                         yss=stats.y_sum_squares, centred=stats.centred)


def kernel_decomposition(Z, Y, w, fit_intercept):
    """The kernel-path decomposition of a materialised dense Z (N < D, all weights > 0)."""
    Z = np.asarray(Z, dtype=np.float64)
    sw = w.sum()
    mean = (w @ Z) / sw if fit_intercept else np.zeros(Z.shape[1])
    y_mean = (w @ Y) / sw if fit_intercept else np.zeros(Y.shape[1])
    sqw = np.sqrt(w)
    Zt = sqw[:, None] * (Z - mean)
    yt = sqw[:, None] * (Y - y_mean)
    with single_threaded_blas():
        Kmat = Zt @ Zt.T
        lam, Q = scipy.linalg.eigh(Kmat, check_finite=False)
    lam = np.maximum(lam, 0.0)
    if fit_intercept:
        # √w is in the null space of Z̃_cZ̃_cᵀ; zero its eigenvalue exactly (rounding left ~1e-15·‖K‖).
        lam[np.argmax(np.abs(Q.T @ (sqw / np.linalg.norm(sqw))))] = 0.0
    dec = Decomposition(kind="kernel", eigvals=lam, basis=Q, u=Q.T @ yt, mean=mean, y_mean=y_mean,
                        weight_sum=sw, n_samples=Z.shape[0], yss=(yt**2).sum(axis=0),
                        centred=fit_intercept)
    dec.Zt = Zt
    return dec
