"""One place for each shift-invariant kernel: its exact value, its spectral
density (for random Fourier features) and its binning pitch density.

The conventions follow ``sklearn.metrics.pairwise`` (parameter ``gamma``) so
users can check every approximation against scikit-learn (see DESIGN.md):

==============  ==========================  ====================================  ===============================
kernel          k(Δ)                        spectral density p(ω)                 binning pitch p(δ) = δ·k''(δ)
==============  ==========================  ====================================  ===============================
``rbf``         exp(-γ‖Δ‖₂²)                ω ~ N(0, 2γ I)                         not valid (δk'' < 0 near 0)
``laplacian``   exp(-γ‖Δ‖₁)                 ω_j ~ Cauchy(0, γ) i.i.d.              δ ~ Gamma(shape 2, scale 1/γ)
``cauchy``      Π_j 1/(1 + γΔ_j²)           ω_j ~ Laplace(0, √γ) i.i.d.            not valid
``matern``      Matérn ν in ‖Δ‖₂, ℓ=1/√(2γ)  ω = z·√(2ν/g)/ℓ, z~N(0,I), g~χ²(2ν)   not valid (not separable)
==============  ==========================  ====================================  ===============================

Adding a kernel means adding one ``KernelSpec`` to ``KERNELS``; the feature
maps look everything up here.  Frequencies are returned as a ``(d, n)``
matrix ``W`` so that features are ``cos(X @ W + b)``.
"""

import numbers
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import scipy.sparse as sp
from scipy import special, stats

MATERN_NUS = (0.5, 1.5, 2.5)


@dataclass(frozen=True)
class KernelSpec:
    """Everything randfeat knows about one shift-invariant kernel.

    Attributes
    ----------
    name : str
        The ``kernel=`` string.
    exact : callable
        ``exact(X, Y, gamma, nu) -> K`` with ``K[i, j] = k(X[i] - Y[j])``.
    frequency_ppf : callable
        ``frequency_ppf(U, d, gamma, nu) -> W`` maps points ``U`` in the unit
        cube, shape ``(n, d + qmc_extra_dims)``, to ``n`` frequencies (``W``
        of shape ``(d, n)``) by the inverse CDF of the spectral density.  With
        i.i.d. uniform ``U`` that is Monte Carlo sampling; with a scrambled
        low-discrepancy sequence it is quasi-Monte Carlo (Avron et al., 2016).
    qmc_extra_dims : int
        Extra unit-cube coordinates ``frequency_ppf`` needs per frequency.
    radial_norms : callable or None
        For spherically symmetric spectral densities only:
        ``radial_norms(rng, d, n, gamma, nu) -> r`` draws the norms ‖ω‖ of
        ``n`` frequencies, used by orthogonal random features (Yu et al.,
        2016).  None where the density is not radial.
    sample_pitch : callable or None
        ``sample_pitch(rng, size, gamma) -> δ``, the binning pitch density
        p(δ) = δ·k''(δ) of a separable kernel; None where binning cannot
        represent the kernel.
    no_binning_reason : str
        Why binning cannot represent the kernel (when ``sample_pitch`` is None).
    """

    name: str
    exact: Callable
    frequency_ppf: Callable
    qmc_extra_dims: int = 0
    radial_norms: Optional[Callable] = None
    sample_pitch: Optional[Callable] = None
    no_binning_reason: str = ""


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


# ----------------------------------------------------------------------- rbf
def _rbf_exact(X, Y, gamma, nu):
    from sklearn.metrics.pairwise import rbf_kernel

    return rbf_kernel(X, Y, gamma=gamma)


def _rbf_ppf(U, d, gamma, nu):
    return (special.ndtri(U[:, :d]) * np.sqrt(2.0 * gamma)).T


def _rbf_norms(rng, d, n, gamma, nu):
    return np.sqrt(rng.chisquare(d, size=n)) * np.sqrt(2.0 * gamma)


# ----------------------------------------------------------------- laplacian
def _laplacian_exact(X, Y, gamma, nu):
    from sklearn.metrics.pairwise import laplacian_kernel

    return laplacian_kernel(X, Y, gamma=gamma)


def _laplacian_ppf(U, d, gamma, nu):
    # Inverse CDF of Cauchy(0, gamma).
    return (np.tan(np.pi * (U[:, :d] - 0.5)) * gamma).T


def _laplacian_pitch(rng, size, gamma):
    # δ·k''(δ) for k(δ) = exp(-γδ) is γ²δ·exp(-γδ): the Gamma(2, 1/γ) density.
    return rng.gamma(shape=2.0, scale=1.0 / gamma, size=size)


# -------------------------------------------------------------------- cauchy
def _cauchy_exact(X, Y, gamma, nu):
    X, Y = _dense(X), _dense(Y)
    K = np.ones((X.shape[0], Y.shape[0]), dtype=np.float64)
    for j in range(X.shape[1]):  # one N×M slab at a time, never N×M×d
        diff = X[:, j, None] - Y[None, :, j]
        K /= 1.0 + gamma * diff * diff
    return K


def _cauchy_ppf(U, d, gamma, nu):
    # Inverse CDF of Laplace(0, √γ).
    u = U[:, :d] - 0.5
    return (-np.sqrt(gamma) * np.sign(u) * np.log1p(-2.0 * np.abs(u))).T


# -------------------------------------------------------------------- matern
def matern_length_scale(gamma):
    """Length scale ℓ = 1/√(2γ) of the Matérn kernel with parameter ``gamma``."""
    return 1.0 / np.sqrt(2.0 * gamma)


def _matern_exact(X, Y, gamma, nu):
    from sklearn.gaussian_process.kernels import Matern

    return Matern(length_scale=matern_length_scale(gamma), nu=nu)(_dense(X), _dense(Y))


def _matern_ppf(U, d, gamma, nu):
    z = special.ndtri(U[:, :d])
    g = stats.chi2.ppf(U[:, d], df=2.0 * nu)
    scale = np.sqrt(2.0 * nu / g) / matern_length_scale(gamma)
    return (z * scale[:, None]).T


def _matern_norms(rng, d, n, gamma, nu):
    g = rng.chisquare(2.0 * nu, size=n)
    return np.sqrt(rng.chisquare(d, size=n)) * np.sqrt(2.0 * nu / g) / matern_length_scale(gamma)


_NOT_SEPARABLE = (
    "it is not a product of one-dimensional kernels, and random binning "
    "features represent only separable kernels"
)

KERNELS = {
    "rbf": KernelSpec(
        "rbf",
        _rbf_exact,
        _rbf_ppf,
        radial_norms=_rbf_norms,
        no_binning_reason=(
            "its pitch density δ·k''(δ) is negative near 0 (k''(δ) = (4γ²δ² - 2γ)exp(-γδ²)), "
            "so no mixture of binning grids has the Gaussian as its expected kernel; "
            "use RandomFourierFeatures for rbf, or kernel='laplacian' for binning"
        ),
    ),
    "laplacian": KernelSpec(
        "laplacian", _laplacian_exact, _laplacian_ppf, sample_pitch=_laplacian_pitch
    ),
    "cauchy": KernelSpec(
        "cauchy",
        _cauchy_exact,
        _cauchy_ppf,
        no_binning_reason=(
            "its pitch density δ·k''(δ) is negative near 0 "
            "(k''(δ) = (6γ²δ² - 2γ)/(1 + γδ²)³)"
        ),
    ),
    "matern": KernelSpec(
        "matern",
        _matern_exact,
        _matern_ppf,
        qmc_extra_dims=1,
        radial_norms=_matern_norms,
        no_binning_reason=_NOT_SEPARABLE,
    ),
}


def get_kernel(kernel):
    """Return the ``KernelSpec`` named ``kernel`` or raise a clear ValueError."""
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(f"Unknown kernel {kernel!r}; expected one of {sorted(KERNELS)}")
    return KERNELS[kernel]


def check_gamma(gamma, allow_scale=True):
    """Raise a clear error unless ``gamma`` is a positive finite number (or 'scale')."""
    if allow_scale and isinstance(gamma, str) and gamma == "scale":
        return
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not np.isfinite(gamma) or gamma <= 0:
        allowed = "a positive finite number or 'scale'" if allow_scale else "a positive finite number"
        raise ValueError(f"gamma must be {allowed}, got {gamma!r}")


def check_nu(kernel, nu):
    """Raise a clear error unless ``nu`` is a supported Matérn smoothness."""
    if kernel == "matern" and nu not in MATERN_NUS:
        raise ValueError(f"nu must be one of {MATERN_NUS} for the Matérn kernel, got {nu!r}")


def resolve_gamma(gamma, X):
    """Return the numeric gamma; ``'scale'`` means 1 / (n_features · X.var()), as RBFSampler."""
    if not (isinstance(gamma, str) and gamma == "scale"):
        return float(gamma)
    if sp.issparse(X):
        mean = X.mean()
        var = X.multiply(X).mean() - mean * mean
    else:
        var = np.asarray(X).var()
    return 1.0 / (X.shape[1] * var) if var > 0 else 1.0


def kernel_matrix(X, Y=None, *, kernel="rbf", gamma=1.0, nu=1.5):
    """Exact kernel matrix that randfeat's features approximate.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples_X, n_features)
    Y : array-like or sparse matrix of shape (n_samples_Y, n_features), default=None
        None means ``Y = X``.
    kernel : {'rbf', 'laplacian', 'cauchy', 'matern'}, default='rbf'
    gamma : float, default=1.0
        Kernel parameter as in ``sklearn.metrics.pairwise`` (for ``matern``,
        the length scale is ``1/sqrt(2*gamma)``).
    nu : {0.5, 1.5, 2.5}, default=1.5
        Matérn smoothness; ignored by the other kernels.

    Returns
    -------
    K : ndarray of shape (n_samples_X, n_samples_Y), float64
        ``K[i, j] = k(X[i] - Y[j])``.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import kernel_matrix
    >>> kernel_matrix(np.zeros((1, 2)), np.ones((1, 2)), kernel="laplacian", gamma=0.5)
    array([[0.36787944]])
    """
    from sklearn.utils import check_array

    spec = get_kernel(kernel)
    check_gamma(gamma, allow_scale=False)
    check_nu(kernel, nu)
    X = check_array(X, accept_sparse="csr", dtype=np.float64)
    Y = X if Y is None else check_array(Y, accept_sparse="csr", dtype=np.float64)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features but Y has {Y.shape[1]}")
    return np.asarray(spec.exact(X, Y, float(gamma), nu), dtype=np.float64)
