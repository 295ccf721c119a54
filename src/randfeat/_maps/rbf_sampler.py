"""RBFSampler: scikit-learn's random Fourier features of the RBF kernel on randfeat's fused kernel.

z(x) = √(2/D) · cos(xW + b), W = √(2γ) · ω₁ with ω₁ ~ N(0, I), b ~ U[0, 2π):
scikit-learn's ``RBFSampler`` (the ``cos`` map of ``RandomFourierFeatures``),
drawn exactly as scikit-learn draws it (``sklearn_compat``), computed by the
fused cos(XW + b) kernel of ``_fourier_fast`` (X·W row-independent, the
cosine in place while the tile is in cache).
"""

import numpy as np

from .fourier_transform import fourier_features
from .sklearn_compat import draw_rng


def draw_rbf_sampler(random_state, n_features, n_components):
    """Draw scikit-learn's unit frequencies and phases (gamma enters in ``rbf_weights``).

    Parameters
    ----------
    random_state : None, int, RandomState or Generator
    n_features, n_components : int

    Returns
    -------
    unit : ndarray of shape (n_features, n_components), float64
        Standard normal draws ω₁.
    offset : ndarray of shape (n_components,), float64
        Phases b in [0, 2π).
    """
    rng = draw_rng(random_state)
    unit = rng.normal(size=(n_features, n_components))
    offset = rng.uniform(0, 2 * np.pi, size=n_components)
    return unit, offset


def rbf_weights(unit, gamma):
    """Frequencies W = √(2γ) · ω₁, the expression scikit-learn evaluates (the same bits).

    Parameters
    ----------
    unit : ndarray of shape (n_features, n_components)
    gamma : float

    Returns
    -------
    W : ndarray of shape (n_features, n_components), float64
    """
    return (2.0 * float(gamma)) ** 0.5 * unit


def rbf_sampler_features(X, W, offset, n_threads):
    """√(2/D) · cos(XW + b) in X's dtype, by the fused kernel.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), float32 or float64, validated
    W : ndarray of shape (n_features, n_components)
    offset : ndarray of shape (n_components,)
    n_threads : int

    Returns
    -------
    Z : ndarray of shape (n_samples, n_components), X's dtype, C order
    """
    return fourier_features(X, W, offset, False, n_threads)
