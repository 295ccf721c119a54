"""Exact kernels of scikit-learn's kernel approximations: the oracles of their tests and benches.

Slow and obviously correct (one n × m float64 slab per feature, never an
n × m × d array), with scikit-learn's conventions so that each can be
checked against ``sklearn.metrics.pairwise`` where it has the kernel:

=================  ==========================================  ===================================
kernel             k(x, y)                                     scikit-learn
=================  ==========================================  ===================================
``polynomial``     (γ⟨x, y⟩ + c₀)^p                            ``polynomial_kernel``
``chi2``           exp(−γ Σⱼ (xⱼ − yⱼ)² / (xⱼ + yⱼ))           ``chi2_kernel``
``additive_chi2``  −Σⱼ (xⱼ − yⱼ)² / (xⱼ + yⱼ)                  ``additive_chi2_kernel``
``skewed_chi2``    Πⱼ 2√((xⱼ + c)(yⱼ + c)) / (xⱼ + yⱼ + 2c)     (none; Li, Ionescu & Sminchisescu 2010)
=================  ==========================================  ===================================

A term with xⱼ + yⱼ = 0 counts as 0 in the χ² kernels, which take
non-negative data; the skewed χ² kernel takes data above −c (c, the
``skewedness``).  ``additive_chi2`` is scikit-learn's (a negative
distance, conditionally positive definite).  ``AdditiveChi2Sampler``
approximates a different, positive definite kernel, Vedaldi & Zisserman's
Σⱼ 2xⱼyⱼ / (xⱼ + yⱼ) = ½ Σⱼ (xⱼ + yⱼ) + ½ · additive_chi2(x, y):
``vedaldi_chi2`` below computes it that way.

``PolynomialCountSketch`` approximates ``polynomial``; ``SkewedChi2Sampler``
approximates ``skewed_chi2`` with c = ``skewedness``; ``Nystroem`` any of them.
"""

import numpy as np
import scipy.sparse as sp


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def _check_non_negative(X, Y):
    for name, A in (("X", X), ("Y", Y)):
        if (A < 0).any():
            raise ValueError(f"{name} contains negative values.")


def polynomial(X, Y, gamma=1.0, degree=2, coef0=0.0):
    """(γ⟨x, y⟩ + c₀)^degree for every pair of rows of X and Y.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
    Y : ndarray or sparse matrix of shape (m, d)
    gamma, degree, coef0 : float

    Returns
    -------
    K : ndarray of shape (n, m), float64
    """
    K = X @ Y.T
    K = _dense(K).astype(np.float64, copy=False)
    return np.power(K * gamma + coef0, degree)


def _chi2_sum(X, Y):
    """Σⱼ (xⱼ − yⱼ)² / (xⱼ + yⱼ), terms with xⱼ + yⱼ = 0 left out."""
    X, Y = _dense(X).astype(np.float64), _dense(Y).astype(np.float64)
    _check_non_negative(X, Y)
    S = np.zeros((X.shape[0], Y.shape[0]))
    for j in range(X.shape[1]):
        x, y = X[:, j, None], Y[None, :, j]
        den = x + y
        num = (x - y) ** 2
        S += np.divide(num, den, out=np.zeros_like(num), where=den != 0)
    return S


def chi2(X, Y, gamma=1.0):
    """exp(−γ Σⱼ (xⱼ − yⱼ)² / (xⱼ + yⱼ)); X and Y non-negative.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
    Y : ndarray or sparse matrix of shape (m, d)
    gamma : float

    Returns
    -------
    K : ndarray of shape (n, m), float64
    """
    return np.exp(-gamma * _chi2_sum(X, Y))


def additive_chi2(X, Y):
    """−Σⱼ (xⱼ − yⱼ)² / (xⱼ + yⱼ) (scikit-learn's ``additive_chi2_kernel``); X and Y non-negative.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
    Y : ndarray or sparse matrix of shape (m, d)

    Returns
    -------
    K : ndarray of shape (n, m), float64
    """
    return -_chi2_sum(X, Y)


def vedaldi_chi2(X, Y):
    """Σⱼ 2xⱼyⱼ / (xⱼ + yⱼ), the kernel ``AdditiveChi2Sampler`` approximates; X and Y non-negative.

    Computed from scikit-learn's additive χ² as ½ Σⱼ (xⱼ + yⱼ) + ½ · additive_chi2(x, y)
    (2xy/(x + y) = ((x + y)² − (x − y)²) / (2(x + y))).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
    Y : ndarray or sparse matrix of shape (m, d)

    Returns
    -------
    K : ndarray of shape (n, m), float64
    """
    Xd, Yd = _dense(X).astype(np.float64), _dense(Y).astype(np.float64)
    return 0.5 * (Xd.sum(axis=1)[:, None] + Yd.sum(axis=1)[None, :]) + 0.5 * additive_chi2(Xd, Yd)


def skewed_chi2(X, Y, skewedness=1.0):
    """Πⱼ 2√((xⱼ + c)(yⱼ + c)) / (xⱼ + yⱼ + 2c) with c = ``skewedness``; X and Y above −c.

    The kernel of ``SkewedChi2Sampler``: with u = log(x + c) it is
    Πⱼ sech((u_xⱼ − u_yⱼ)/2), whose Fourier transform is the hyperbolic
    secant density the sampler draws its frequencies from.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
    Y : ndarray or sparse matrix of shape (m, d)
    skewedness : float

    Returns
    -------
    K : ndarray of shape (n, m), float64
    """
    c = float(skewedness)
    X, Y = _dense(X).astype(np.float64), _dense(Y).astype(np.float64)
    for name, A in (("X", X), ("Y", Y)):
        if (A <= -c).any():
            raise ValueError(f"{name} may not contain entries smaller than -skewedness.")
    K = np.ones((X.shape[0], Y.shape[0]))
    for j in range(X.shape[1]):
        a, b = X[:, j, None] + c, Y[None, :, j] + c
        K *= 2.0 * np.sqrt(a) * np.sqrt(b) / (a + b)
    return K


#: name -> (function, the parameter names it takes besides X and Y).
EXACT_KERNELS = {
    "polynomial": (polynomial, ("gamma", "degree", "coef0")),
    "chi2": (chi2, ("gamma",)),
    "additive_chi2": (additive_chi2, ()),
    "skewed_chi2": (skewed_chi2, ("skewedness",)),
}
