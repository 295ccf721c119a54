"""Draw the random frequencies W (and offsets b) of random Fourier features.

Three samplers, all drawing frequencies of the kernel's *unit* density
(``_kernels.UnitFrequencies``), which ``_kernels.scale_frequencies`` turns
into ``W`` of shape ``(d, n)`` in float64 at a given gamma, so that
features are ``cos(X @ W + b)``:

* ``iid``: Monte Carlo (Rahimi & Recht, 2007).  Drawn directly with NumPy's
  exact samplers (normal, Cauchy, Laplace, chi-square) rather than through the
  inverse CDF of uniforms: same distribution, and no uniform can land on 0 and
  send ``ndtri`` to infinity.
* ``orthogonal``: Orthogonal Random Features (Yu et al., 2016).  Stacked
  ``d × d`` blocks of Haar-random orthogonal matrices (the last one only the
  rows needed, from the QR of a d × k matrix: ⌈n/d⌉ blocks of min(d, n)
  rows) whose rows are rescaled
  by independent norms from the radial part of the spectral density, so each
  row is still distributed as p(ω) but rows within a block are orthogonal.
  Only for spherically symmetric densities (``KernelSpec.radial_norms``).
* ``qmc``: randomised quasi-Monte Carlo (Avron et al., 2016).  A scrambled
  Sobol sequence (beyond Sobol's 21201 dimensions, a randomly shifted Halton
  sequence) pushed through the inverse CDF of the spectral density
  (``KernelSpec.frequency_ppf``).
"""

import warnings

import numpy as np
from scipy.stats import qmc

from .kernels import UnitFrequencies, scale_frequencies
from .._core.memory_budget import check_memory

SAMPLINGS = ("iid", "orthogonal", "qmc")

# Uniforms are kept this far from 0 and 1 so inverse CDFs stay finite.
_U_EPS = np.finfo(np.float64).eps


def _iid_frequencies(spec, d, n, nu, rng):
    name = spec.name
    if name == "rbf":
        return UnitFrequencies(rng.standard_normal((d, n)))
    if name == "laplacian":
        return UnitFrequencies(rng.standard_cauchy((d, n)))
    if name == "cauchy":
        return UnitFrequencies(rng.laplace(0.0, 1.0, size=(d, n)))
    if name == "matern":
        z = rng.standard_normal((d, n))
        g = rng.chisquare(2.0 * nu, size=n)
        # ω₁ = z·√(2ν/g): a multivariate Student-t.
        return UnitFrequencies(z, np.sqrt(2.0 * nu / g))
    # A kernel added to the registry later: fall back on its inverse CDF.
    U = rng.random((n, d + spec.qmc_extra_dims))
    return spec.frequency_ppf(np.clip(U, _U_EPS, 1.0 - _U_EPS), d, nu)


#: Widest d whose partial orthogonal block still draws the full d × d Gaussian (128 MiB), keeping the
#: random stream of earlier releases; past it only the d × k numbers the block needs are drawn.
STREAM_KEEPING_MAX_D = 4096


def _orthogonal_frequencies(spec, d, n, nu, rng):
    if spec.radial_norms is None:
        raise ValueError(
            f"sampling='orthogonal' needs a spherically symmetric spectral density, "
            f"and kernel={spec.name!r} has none (its frequencies are independent per "
            f"coordinate); use sampling='iid' or 'qmc', or kernel='rbf' or 'matern'"
        )
    # Only the rows needed: full blocks of d, then one of k = n mod d rows,
    # the orthonormal columns of the QR of a d × k Gaussian (the first k
    # columns of a Haar matrix: the same distribution, O(d·k²) time).  Up to
    # d = STREAM_KEEPING_MAX_D the partial block's d × d Gaussian is still
    # drawn and its first k columns factorised, which keeps the random
    # stream, so the features are those of earlier releases (to rounding);
    # wider, only the d × k Gaussian is drawn (a d × d one would need d²
    # numbers: 39 GB at d = 70,000).
    k_max = min(d, n)
    check_memory(3 * 8 * d * k_max + (8 * d * d if d <= STREAM_KEEPING_MAX_D else 0),
                 f"the QR of a {d} x {k_max} Gaussian block (float64)",
                 "use a smaller n_components, or sampling='iid' for wide X")
    W = np.empty((d, n))
    for start in range(0, n, d):
        k = min(d, n - start)
        if k < d and d <= STREAM_KEEPING_MAX_D:
            G = rng.standard_normal((d, d))[:, :k]
        else:
            G = rng.standard_normal((d, k))
        Q, R = np.linalg.qr(G)
        # Sign fix: makes Q Haar-distributed (QR alone is not unique in sign).
        Q *= np.where(np.diag(R) < 0, -1.0, 1.0)
        W[:, start : start + k] = Q  # columns: orthonormal directions
    return UnitFrequencies(W, spec.radial_norms(rng, d, n, nu))


def _qmc_points(dim, n, rng):
    seed = rng.integers(0, 2**63 - 1)
    if dim <= qmc.Sobol.MAXDIM:
        sampler = qmc.Sobol(dim, scramble=True, rng=seed)
        with warnings.catch_warnings():
            # Sobol's balance properties need n a power of 2; any n is still a
            # valid (scrambled, hence unbiased) QMC design, so we accept the
            # loss and do not bother users with the warning.
            warnings.filterwarnings("ignore", message=".*balance properties of Sobol.*")
            U = sampler.random(n)
    else:
        # Beyond Sobol's dimensions scipy's scrambled Halton needs memory
        # growing like dim² (tens of GB here), so: plain Halton randomised by
        # a uniform shift modulo 1 (Cranley-Patterson rotation), still an
        # unbiased randomised QMC design.
        U = qmc.Halton(dim, scramble=False).random(n)
        U = (U + rng.random(dim)) % 1.0
    return np.clip(U, _U_EPS, 1.0 - _U_EPS)


def draw_unit_frequencies(spec, sampling, d, n, nu, rng, *, with_offset):
    """Draw unit frequencies (n of them, in d dimensions) and, for the ``cos`` map, offsets ``b`` (n,).

    Parameters
    ----------
    spec : KernelSpec
    sampling : {'iid', 'orthogonal', 'qmc'}
    d, n : int
        Input dimension and number of frequencies.
    nu : float
        Matérn smoothness (ignored by other kernels).
    rng : numpy.random.Generator
    with_offset : bool
        Draw ``b ~ U[0, 2π)`` too (for QMC, from one more QMC coordinate).

    Returns
    -------
    unit : UnitFrequencies
        Scale with ``_kernels.scale_frequencies(spec, unit, gamma)``.
    b : ndarray of shape (n,), float64, or None
    """
    check_memory(
        8 * d * n + (8 * n if with_offset else 0),
        f"drawing {n} random frequencies in {d} dimensions (float64)",
        "use a smaller n_components",
    )
    if sampling == "qmc":
        dim = d + spec.qmc_extra_dims
        U = _qmc_points(dim + int(with_offset), n, rng)
        unit = spec.frequency_ppf(U[:, :dim], d, nu)
        b = 2.0 * np.pi * U[:, dim] if with_offset else None
        return unit, b
    if sampling == "orthogonal":
        unit = _orthogonal_frequencies(spec, d, n, nu, rng)
    else:
        unit = _iid_frequencies(spec, d, n, nu, rng)
    b = rng.uniform(0.0, 2.0 * np.pi, size=n) if with_offset else None
    return unit, b

