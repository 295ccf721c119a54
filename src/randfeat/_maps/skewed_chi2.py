"""SkewedChi2Sampler: random Fourier features of the skewed χ² kernel (Li, Ionescu & Sminchisescu 2010).

k(x, y) = Πⱼ 2√((xⱼ + c)(yⱼ + c)) / (xⱼ + yⱼ + 2c) is, in u = log(x + c),
the shift-invariant Πⱼ sech((u_xⱼ − u_yⱼ)/2), whose spectral density is
the hyperbolic secant density sech(πω).  So z(x) = √(2/D) · cos(log(x + c)·W + b)
with W drawn by that density's inverse CDF, ω = log(tan(πu/2))/π, exactly as
scikit-learn draws it (``sklearn_compat``); computed by the fused
cos(XW + b) kernel after one elementwise log.
"""

import numpy as np
import scipy.sparse as sp

from .fourier_transform import fourier_features
from .sklearn_compat import draw_rng

_BELOW = "X may not contain entries smaller than -skewedness."


def draw_skewed_chi2(random_state, n_features, n_components):
    """Draw scikit-learn's frequencies and phases.

    Parameters
    ----------
    random_state : None, int, RandomState or Generator
    n_features, n_components : int

    Returns
    -------
    W : ndarray of shape (n_features, n_components), float64
    offset : ndarray of shape (n_components,), float64
    """
    rng = draw_rng(random_state)
    uniform = rng.uniform(size=(n_features, n_components))
    W = 1.0 / np.pi * np.log(np.tan(np.pi / 2.0 * uniform))
    offset = rng.uniform(0, 2 * np.pi, size=n_components)
    return W, offset


def check_above_minus_skewedness(X, skewedness):
    """Raise scikit-learn's ValueError unless every entry of X (a CSR's implicit zeros too) exceeds −c.

    Parameters
    ----------
    X : ndarray or CSR matrix, validated
    skewedness : float
    """
    c = float(skewedness)
    if sp.issparse(X):
        implicit = X.data.shape[0] < X.shape[0] * X.shape[1]
        if (implicit and 0.0 <= -c) or (X.data <= -c).any():
            raise ValueError(_BELOW)
    elif (X <= -c).any():
        raise ValueError(_BELOW)


def skewed_chi2_features(X, W, offset, skewedness, n_threads):
    """√(2/D) · cos(log(X + c)·W + b) in X's dtype.

    A CSR X (then c > 0, else its implicit zeros are refused) stays sparse:
    log(x + c) = log c + (log(x + c) − log c), the first term folded into
    the phases (b + log c · Σₖ Wₖ), the second stored where x is.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), validated, above −c
    W : ndarray of shape (n_features, n_components)
    offset : ndarray of shape (n_components,)
    skewedness : float
    n_threads : int

    Returns
    -------
    Z : ndarray of shape (n_samples, n_components), X's dtype, C order
    """
    c = float(skewedness)
    if sp.issparse(X):
        log_c = np.log(c)
        data = (np.log(X.data.astype(np.float64) + c) - log_c).astype(X.dtype)
        shifted = sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)
        offset = np.asarray(offset, dtype=np.float64) + log_c * np.asarray(W, dtype=np.float64).sum(axis=0)
        return fourier_features(shifted, W, offset, False, n_threads)
    L = np.log(X + X.dtype.type(c))
    return fourier_features(L, W, offset, False, n_threads)
