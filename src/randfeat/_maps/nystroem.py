"""Nystroem: the Nyström kernel map (Williams & Seeger 2001) with scikit-learn's conventions.

fit: m landmarks L (``landmarks='uniform'``: m rows of the training data
drawn without replacement, as scikit-learn draws them; or the user's own
array), K_mm = k(L, L) and the normalisation N = K_mm^{-1/2} (from the
eigendecomposition of the symmetrised K_mm, eigenvalues clipped at 1e-12 in
absolute value, the sign kept: what scikit-learn's U S^{-1/2} V from the SVD
is for a symmetric matrix).  transform: Z = k(X, L) · Nᵀ, the block computed
and multiplied sub-tile by sub-tile in one compiled pass
(``nystroem_kernels``).

Landmark methods are looked up in ``LANDMARK_METHODS`` (name → function
``(X, n_components, rng) -> row indices``); a new method (e.g. ridge
leverage scores) is one more entry.
"""

import warnings

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError

from .._core.threads import single_threaded_blas
from .sklearn_compat import draw_rng


def uniform_landmarks(X, n_components, rng):
    """scikit-learn's landmarks: the first n_components of a random permutation of the rows.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    n_components : int
        At most n_samples.
    rng : RandomState or Generator

    Returns
    -------
    ndarray of int64, shape (n_components,)
    """
    return np.asarray(rng.permutation(X.shape[0])[:n_components], dtype=np.int64)


#: ``landmarks=`` strings and the functions that choose the rows.
LANDMARK_METHODS = {"uniform": uniform_landmarks}


def check_landmarks_param(landmarks):
    """Raise InvalidParameterError unless ``landmarks`` is a known method or an array-like.

    Parameters
    ----------
    landmarks : str or array-like
    """
    if isinstance(landmarks, str):
        if landmarks not in LANDMARK_METHODS:
            known = ", ".join(repr(k) for k in sorted(LANDMARK_METHODS))
            later = " ('leverage' is not available yet)" if landmarks == "leverage" else ""
            raise InvalidParameterError(
                f"The 'landmarks' parameter of Nystroem must be one of {known} or an array of "
                f"landmark rows of shape (n_landmarks, n_features); got {landmarks!r}{later}."
            )
        return
    if landmarks is None or np.ndim(landmarks) != 2 and not sp.issparse(landmarks):
        raise InvalidParameterError(
            f"The 'landmarks' parameter of Nystroem must be one of {sorted(LANDMARK_METHODS)} or a 2-D "
            f"array of landmark rows; got {type(landmarks).__name__}"
        )


def choose_landmarks(X, n_components, random_state, method="uniform"):
    """Row indices of the landmarks, with scikit-learn's warning when n_components > n_samples.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), validated
    n_components : int
    random_state : None, int, RandomState or Generator
    method : str
        A key of ``LANDMARK_METHODS``.

    Returns
    -------
    ndarray of int64
    """
    n_samples = X.shape[0]
    if n_components > n_samples:
        warnings.warn(
            "n_components > n_samples. This is not possible.\n"
            "n_components was set to n_samples, which results"
            " in inefficient evaluation of the full kernel."
        )
        n_components = n_samples
    return LANDMARK_METHODS[method](X, n_components, draw_rng(random_state))


def nystroem_normalization(K_mm):
    """N = K_mm^{-1/2} as scikit-learn computes it, from the eigendecomposition (float64).

    Parameters
    ----------
    K_mm : ndarray of shape (m, m)
        The kernel between the landmarks.

    Returns
    -------
    N : ndarray of shape (m, m), float64
        Σᵢ sign(λᵢ) qᵢqᵢᵀ / √max(|λᵢ|, 1e-12) over the eigenpairs (λᵢ, qᵢ) of
        (K_mm + K_mmᵀ)/2: scikit-learn's ``U / sqrt(clip(S, 1e-12)) @ V``
        for a symmetric matrix, and the same bits for any ``n_jobs`` (LAPACK
        on one thread).
    """
    K = np.asarray(K_mm, dtype=np.float64)
    K = 0.5 * (K + K.T)
    with single_threaded_blas():
        lam, Q = scipy.linalg.eigh(K)
        scale = np.where(lam < 0, -1.0, 1.0) / np.sqrt(np.maximum(np.abs(lam), 1e-12))
        return (Q * scale) @ Q.T
