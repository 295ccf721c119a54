"""The one place that picks a ``FeatureOperator`` for a matrix (``make_products``, ``prepare_problem``), and the row-independent product."""

from __future__ import annotations

from typing import Optional

import numpy as np
import scipy.sparse as sp

from .._core.threads import effective_n_threads
from .._core.types import ArrayLike, MatrixLike
from .._ext import _fourier_fast
from .csr import SparseProducts
from .dense import DenseProducts, gemm_ready
from .onehot import OneHotBlockProducts, block_major_bins, onehot_layout, release_values
from .rowmerge import merged_problem


def row_products(Z: MatrixLike, W: ArrayLike, n_threads: Optional[int] = None) -> np.ndarray:
    """Return Z @ W with each row's result independent of the other rows and of ``n_threads``.

    Public as ``randfeat.row_products``: the product a feature map that
    declares ``MapCapability.ROW_INDEPENDENT`` can compute its features with.
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
    n_threads : int or None, default=None
        OpenMP threads; None: all (``OMP_NUM_THREADS`` or the cores).

    Returns
    -------
    ndarray of shape (N, K), Z's dtype
    """
    if n_threads is None:
        n_threads = effective_n_threads(None)
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
    return _operator(Z, n_threads, entries, onehot_layout(Z, n_threads) if sp.issparse(Z) else None)


def prepare_problem(Z, Y, sample_weight, n_threads, owned=False):
    """Return the operator of a CG fit on ``Z``: its structure found once, identical rows merged first.

    The one-hot layout (``onehot_layout``: one pass, no copy) is found on Z
    once and serves both the row merge (``rowmerge.merged_problem``, which
    then skips its own row-length check) and the operator (whose block-major
    copy of the bins is made once, for the rows that remain).

    Parameters
    ----------
    Z : ndarray or canonical CSR matrix of shape (N, D)
    Y : ndarray of shape (N, K), float64
    sample_weight : ndarray of shape (N,) float64, or None
    n_threads : int
    owned : bool, default=False
        True when Z is the fit's own matrix (the features it made): a one-hot
        Z's value array is then released (``onehot.release_values``) before
        the bins are made, so that the operator's peak memory is Z's indices
        plus the bins, not all of Z plus the bins.  A merged Z (a copy) is
        always treated so.

    Returns
    -------
    ops : FeatureOperator
        Over the distinct rows (``ops.shape[0] < N`` when rows were merged).
    Y : ndarray of shape (ops.shape[0], K), float64
    sample_weight : ndarray of shape (ops.shape[0],) float64, or None
    """
    layout = onehot_layout(Z, n_threads) if sp.issparse(Z) else None
    Zm, Y, sample_weight, entries = merged_problem(Z, Y, sample_weight, None if layout is None else layout.n_blocks)
    if layout is not None and owned:
        release_values(Z, layout)
    if layout is not None and Zm is not Z:  # the merged rows: a copy made here
        release_values(Zm, layout)
    return _operator(Zm, n_threads, entries, layout), Y, sample_weight


def _operator(Z, n_threads, entries, layout):
    """The operator for Z given its one-hot ``layout`` (None: not one-hot; valid for a subset of the rows it was found on)."""
    if not sp.issparse(Z):
        return DenseProducts(Z, n_threads)
    if layout is not None:
        structure = (block_major_bins(Z, layout, n_threads), layout.start, layout.value)
        return OneHotBlockProducts(Z, structure, n_threads, entries)
    return SparseProducts(Z, n_threads, entries)
