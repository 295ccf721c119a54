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

Every density above is a *unit* density scaled by a function of gamma: ω =
s(γ)·ω₁ with s = √(2γ) (rbf, matern), γ (laplacian), √γ (cauchy), and δ =
δ₁/γ for the Laplacian pitch.  The samplers draw the unit variables; the
scaling is applied in one place, ``scale_frequencies`` / ``scale_pitches``,
so one draw serves every gamma of a path (``RidgeCV(gammas=...)``) with
features bit-identical to a map fitted at that gamma alone.  (The product
X·W cannot be rescaled afterwards instead: (X·W₁)·s and X·(W₁·s) round
differently.)
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Callable, Optional

import numpy as np
import scipy.sparse as sp
from scipy import special, stats
from sklearn.utils._param_validation import InvalidParameterError, Options, StrOptions, validate_params

from .._core.types import Float, MatrixLike, preserves_signature
from .._core.validation import Interval, check_array_for_kernel
from .exact import EXACT_KERNELS, _dense

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
    frequency_scale : callable
        ``frequency_scale(gamma) -> s``: frequencies at ``gamma`` are ``s``
        times the unit frequencies the three callables below draw.
    frequency_ppf : callable
        ``frequency_ppf(U, d, nu) -> UnitFrequencies`` maps points ``U`` in
        the unit cube, shape ``(n, d + qmc_extra_dims)``, to ``n`` unit
        frequencies by the inverse CDF of the unit spectral density.  With
        i.i.d. uniform ``U`` that is Monte Carlo sampling; with a scrambled
        low-discrepancy sequence it is quasi-Monte Carlo (Avron et al., 2016).
    qmc_extra_dims : int
        Extra unit-cube coordinates ``frequency_ppf`` needs per frequency.
    radial_norms : callable or None
        For spherically symmetric spectral densities only:
        ``radial_norms(rng, d, n, nu) -> r`` draws the unit norms ‖ω₁‖ of
        ``n`` frequencies, used by orthogonal random features (Yu et al.,
        2016).  None where the density is not radial.
    sample_pitch : callable or None
        ``sample_pitch(rng, size) -> δ₁``, unit pitches of the binning pitch
        density p(δ) = δ·k''(δ) of a separable kernel (pitches at gamma are
        δ₁/γ, ``scale_pitches``); None where binning cannot represent the
        kernel.
    no_binning_reason : str
        Why binning cannot represent the kernel (when ``sample_pitch`` is None).
    """

    name: str
    exact: Callable
    frequency_scale: Callable
    frequency_ppf: Callable
    qmc_extra_dims: int = 0
    radial_norms: Optional[Callable] = None
    sample_pitch: Optional[Callable] = None
    no_binning_reason: str = ""


@dataclass(frozen=True)
class UnitFrequencies:
    """Frequencies of the unit spectral density, before ``scale_frequencies``.

    Attributes
    ----------
    directions : ndarray of shape (d, n)
        The frequencies themselves when ``radial`` is None; else their
        directional part.
    radial : ndarray of shape (n,) or None
        A per-frequency factor (the radial part of a radial density, e.g.
        Matérn's √(2ν/g)), applied after the gamma scale: ω = directions ·
        (radial · s(γ)).
    """

    directions: np.ndarray
    radial: Optional[np.ndarray] = None


def scale_frequencies(spec, unit, gamma):
    """Return the frequencies ``W`` (d, n) at ``gamma`` from unit frequencies: the one place gamma enters.

    Parameters
    ----------
    spec : KernelSpec
    unit : UnitFrequencies
    gamma : float

    Returns
    -------
    W : ndarray of shape (d, n), float64
    """
    s = spec.frequency_scale(float(gamma))
    if unit.radial is None:
        return unit.directions * s
    return unit.directions * (unit.radial * s)


def scale_pitches(unit_pitches, gamma):
    """Return binning pitches at ``gamma`` from unit pitches (δ = δ₁ · (1/γ)).

    Parameters
    ----------
    unit_pitches : ndarray
        Draws of ``KernelSpec.sample_pitch``.
    gamma : float

    Returns
    -------
    pitches : ndarray, float64
    """
    return unit_pitches * (1.0 / float(gamma))


# ----------------------------------------------------------------------- rbf
def _rbf_exact(X, Y, gamma, nu):
    from sklearn.metrics.pairwise import rbf_kernel

    return rbf_kernel(X, Y, gamma=gamma)


def _sqrt_2gamma(gamma):
    return np.sqrt(2.0 * gamma)


def _rbf_ppf(U, d, nu):
    return UnitFrequencies(special.ndtri(U[:, :d]).T)


def _rbf_norms(rng, d, n, nu):
    return np.sqrt(rng.chisquare(d, size=n))


# ----------------------------------------------------------------- laplacian
def _laplacian_exact(X, Y, gamma, nu):
    from sklearn.metrics.pairwise import laplacian_kernel

    return laplacian_kernel(X, Y, gamma=gamma)


def _identity(gamma):
    return gamma


def _laplacian_ppf(U, d, nu):
    # Inverse CDF of Cauchy(0, 1).
    return UnitFrequencies(np.tan(np.pi * (U[:, :d] - 0.5)).T)


def _laplacian_pitch(rng, size):
    # δ·k''(δ) for k(δ) = exp(-γδ) is γ²δ·exp(-γδ): the Gamma(2, 1/γ) density,
    # 1/γ times a Gamma(2, 1) variable.
    return rng.standard_gamma(2.0, size=size)


# -------------------------------------------------------------------- cauchy
def _cauchy_exact(X, Y, gamma, nu):
    X, Y = _dense(X), _dense(Y)
    K = np.ones((X.shape[0], Y.shape[0]), dtype=np.float64)
    for j in range(X.shape[1]):  # one N×M slab at a time, never N×M×d
        diff = X[:, j, None] - Y[None, :, j]
        K /= 1.0 + gamma * diff * diff
    return K


def _cauchy_ppf(U, d, nu):
    # Inverse CDF of Laplace(0, 1).
    u = U[:, :d] - 0.5
    return UnitFrequencies((-np.sign(u) * np.log1p(-2.0 * np.abs(u))).T)


# -------------------------------------------------------------------- matern
def matern_length_scale(gamma):
    """Length scale ℓ = 1/√(2γ) of the Matérn kernel with parameter ``gamma``."""
    return 1.0 / np.sqrt(2.0 * gamma)


def _matern_exact(X, Y, gamma, nu):
    from sklearn.gaussian_process.kernels import Matern

    return Matern(length_scale=matern_length_scale(gamma), nu=nu)(_dense(X), _dense(Y))


def _matern_ppf(U, d, nu):
    # ω₁ = z·√(2ν/g): a multivariate Student-t; ω = ω₁/ℓ = √(2γ)·ω₁.
    z = special.ndtri(U[:, :d])
    g = stats.chi2.ppf(U[:, d], df=2.0 * nu)
    return UnitFrequencies(z.T, np.sqrt(2.0 * nu / g))


def _matern_norms(rng, d, n, nu):
    g = rng.chisquare(2.0 * nu, size=n)
    return np.sqrt(rng.chisquare(d, size=n)) * np.sqrt(2.0 * nu / g)


_NOT_SEPARABLE = (
    "it is not a product of one-dimensional kernels, and random binning "
    "features represent only separable kernels"
)

KERNELS = {
    "rbf": KernelSpec(
        "rbf",
        _rbf_exact,
        _sqrt_2gamma,
        _rbf_ppf,
        radial_norms=_rbf_norms,
        no_binning_reason=(
            "its pitch density δ·k''(δ) is negative near 0 (k''(δ) = (4γ²δ² - 2γ)exp(-γδ²)), "
            "so no mixture of binning grids has the Gaussian as its expected kernel; "
            "use RandomFourierFeatures for rbf, or kernel='laplacian' for binning"
        ),
    ),
    "laplacian": KernelSpec(
        "laplacian", _laplacian_exact, _identity, _laplacian_ppf, sample_pitch=_laplacian_pitch
    ),
    "cauchy": KernelSpec(
        "cauchy",
        _cauchy_exact,
        np.sqrt,
        _cauchy_ppf,
        no_binning_reason=(
            "its pitch density δ·k''(δ) is negative near 0 "
            "(k''(δ) = (6γ²δ² - 2γ)/(1 + γδ²)³)"
        ),
    ),
    "matern": KernelSpec(
        "matern",
        _matern_exact,
        _sqrt_2gamma,
        _matern_ppf,
        qmc_extra_dims=1,
        radial_norms=_matern_norms,
        no_binning_reason=_NOT_SEPARABLE,
    ),
}


#: Constraints shared by every place that takes these parameters.
KERNEL_NAMES = StrOptions(set(KERNELS))
GAMMA = [Interval(Real, 0, None, closed="neither")]  # positive and finite
NU = [Options(Real, set(MATERN_NUS))]


# -------------------------------------------------------------- kernel_matrix
def _int32_indices(X):
    """X with int32 indices, as scikit-learn's sparse Manhattan distance requires."""
    if X.indices.dtype == np.int32 and X.indptr.dtype == np.int32:
        return X
    if max(X.indptr[-1], X.shape[1]) > np.iinfo(np.int32).max:
        raise ValueError(
            "kernel='laplacian' on sparse input needs fewer than 2**31 stored entries and "
            "columns (scikit-learn's sparse Manhattan distance takes 32-bit indices); "
            "split X into blocks of rows and call kernel_matrix on each"
        )
    return sp.csr_matrix(
        (X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape, copy=False
    )


#: kernel_matrix's kernels: the shift-invariant ones above and the exact kernels of ``exact``.
KERNEL_MATRIX_NAMES = StrOptions(set(KERNELS) | set(EXACT_KERNELS))


@preserves_signature(validate_params(
    {
        "X": ["array-like", "sparse matrix"],
        "Y": ["array-like", "sparse matrix", None],
        "kernel": [KERNEL_MATRIX_NAMES],
        "gamma": GAMMA,
        "nu": NU,
        "degree": [Interval(Real, 1, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "skewedness": [Interval(Real, None, None, closed="neither")],
    },
    prefer_skip_nested_validation=True,
))
def kernel_matrix(X: MatrixLike, Y: Optional[MatrixLike] = None, *, kernel: str = "rbf", gamma: Float = 1.0,
                  nu: Float = 1.5, degree: Float = 2, coef0: Float = 0.0, skewedness: Float = 1.0) -> np.ndarray:
    """Exact kernel matrix that randfeat's features approximate.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples_X, n_features)
        Sparse input of any scipy format is checked (index arrays in range)
        and used as a canonical CSR matrix (duplicates summed), whatever its
        index dtype.
    Y : array-like or sparse matrix of shape (n_samples_Y, n_features), default=None
        None means ``Y = X``.
    kernel : {'rbf', 'laplacian', 'cauchy', 'matern', 'polynomial', 'chi2', 'additive_chi2', 'skewed_chi2'}, \
            default='rbf'
        The shift-invariant kernels of ``RandomFourierFeatures`` and
        ``RandomBinningFeatures``, and the kernels of the scikit-learn-compatible
        maps: ``polynomial`` (γ⟨x, y⟩ + coef0)^degree (``PolynomialCountSketch``),
        ``chi2`` exp(−γ Σⱼ (xⱼ − yⱼ)²/(xⱼ + yⱼ)) and scikit-learn's
        ``additive_chi2`` −Σⱼ (xⱼ − yⱼ)²/(xⱼ + yⱼ) (non-negative data; a term
        with xⱼ + yⱼ = 0 counts 0), ``skewed_chi2``
        Πⱼ 2√((xⱼ + c)(yⱼ + c))/(xⱼ + yⱼ + 2c) with c = ``skewedness``
        (``SkewedChi2Sampler``; data above −c).  ``AdditiveChi2Sampler``
        approximates Σⱼ 2xⱼyⱼ/(xⱼ + yⱼ) = ½Σⱼ(xⱼ + yⱼ) + ½·``additive_chi2``.
    gamma : float, default=1.0
        Kernel parameter as in ``sklearn.metrics.pairwise`` (for ``matern``,
        the length scale is ``1/sqrt(2*gamma)``); ignored by ``additive_chi2``
        and ``skewed_chi2``.
    nu : {0.5, 1.5, 2.5}, default=1.5
        Matérn smoothness; ignored by the other kernels.
    degree : float, default=2
        Degree of ``polynomial`` (``PolynomialCountSketch``'s default;
        ``sklearn.metrics.pairwise.polynomial_kernel`` defaults to 3).
    coef0 : float, default=0.0
        Constant term of ``polynomial`` (``PolynomialCountSketch``'s default;
        scikit-learn's ``polynomial_kernel`` defaults to 1).
    skewedness : float, default=1.0
        c of ``skewed_chi2``.

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
    X = check_array_for_kernel(X, "X")
    Y = X if Y is None else check_array_for_kernel(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features but Y has {Y.shape[1]}")
    if kernel in EXACT_KERNELS:
        func, names = EXACT_KERNELS[kernel]
        values = {"gamma": float(gamma), "degree": degree, "coef0": float(coef0), "skewedness": float(skewedness)}
        return np.asarray(func(X, Y, **{name: values[name] for name in names}), dtype=np.float64)
    spec = KERNELS[kernel]
    if kernel == "laplacian":
        X = _int32_indices(X) if sp.issparse(X) else X
        Y = _int32_indices(Y) if sp.issparse(Y) else Y
    if kernel == "matern" and not np.isfinite(np.sqrt(2.0 * float(gamma))):
        raise InvalidParameterError(
            f"gamma={gamma!r} is too large for the Matérn kernel: its length scale "
            f"1/sqrt(2*gamma) underflows to 0. Rescale X so that a smaller gamma applies."
        )
    return np.asarray(spec.exact(X, Y, float(gamma), nu), dtype=np.float64)
