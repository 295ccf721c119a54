"""The one place that picks a ``FeatureOperator`` for a matrix, and the row-independent product."""

import numpy as np
import scipy.sparse as sp

from .._ext import _fourier_fast
from .csr import SparseProducts
from .dense import DenseProducts, gemm_ready
from .onehot import OneHotBlockProducts, onehot_block_structure


def row_products(Z, W, n_threads):
    """Return Z @ W with each row's result independent of the other rows and of ``n_threads``.

    For predictions: BLAS gemm's result for a row depends, in the last bits,
    on the rows multiplied with it (and on its thread count), so the same
    row predicted in two chunks, or on a Dask worker and on the client,
    could differ.  Dense Z goes through the Fourier kernel's row-independent
    product; sparse Z through SciPy's CSR product (one row at a time).

    Parameters
    ----------
    Z : ndarray or sparse matrix of shape (N, D), float32 or float64
    W : ndarray of shape (D, K)
        Cast to Z's dtype.
    n_threads : int

    Returns
    -------
    ndarray of shape (N, K), Z's dtype
    """
    W = np.ascontiguousarray(W, dtype=Z.dtype)
    if sp.issparse(Z):
        return np.asarray(Z @ W)
    Z = gemm_ready(Z)  # one positive unit stride, else a C copy
    out = np.empty((Z.shape[0], W.shape[1]), dtype=Z.dtype)
    _fourier_fast.row_products(Z, W, out, n_threads)
    return out


def make_products(Z, n_threads, entries=None):
    """Return the ``FeatureOperator`` for ``Z``.

    Parameters
    ----------
    Z : ndarray or canonical CSR matrix of shape (N, D)
    n_threads : int
    entries : int or None
        For a sparse Z whose identical rows were merged (``rowmerge``): the
        nnz of the rows it stands for, which the operator reports as its
        ``entries`` so that the preconditioner (whose block size is ruled by
        them) is the one the unmerged problem gets.  None: Z's own nnz.

    Returns
    -------
    FeatureOperator
        One-hot block CSR → OneHotBlockProducts, other CSR → SparseProducts,
        dense → DenseProducts.
    """
    if sp.issparse(Z):
        structure = onehot_block_structure(Z, n_threads)
        if structure is not None:
            return OneHotBlockProducts(Z, structure, n_threads, entries)
        return SparseProducts(Z, n_threads, entries)
    return DenseProducts(Z, n_threads)
