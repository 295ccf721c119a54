"""The kernels ``Nystroem`` takes, and the compiled kernel block between rows and landmarks.

A kernel is resolved once, at fit, into a ``NystroemKernel`` (a canonical
name and every numeric parameter), with scikit-learn's semantics
(``Nystroem._get_kernel_params`` and the defaults of
``sklearn.metrics.pairwise``): explicit ``gamma``/``coef0``/``degree`` override
``kernel_params``; parameters the kernel does not take are ignored for a
string kernel and passed on to a callable; ``gamma=None`` means
1/n_features (1.0 for ``chi2``), ``poly``'s ``degree=None`` 3 and
``coef0=None`` 1, ``sigmoid``'s ``coef0=None`` 1.

Kernels of scikit-learn (``rbf``, ``laplacian``, ``polynomial``/``poly``,
``linear``, ``sigmoid``, ``cosine``, ``chi2``, ``additive_chi2``) and of
randfeat (``cauchy``, ``matern`` with ``kernel_params={'nu': ...}``,
``skewed_chi2`` with ``kernel_params={'skewedness': ...}``) are computed by
the compiled block of ``_kernel_approx_fast``; ``precomputed`` reads columns
of the given kernel; a callable goes through
``sklearn.metrics.pairwise.pairwise_kernels``.
"""

from dataclasses import dataclass, field
from numbers import Real
from typing import Callable, Optional

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.extmath import row_norms

from .._core.memory_budget import check_memory
from .._core.threads import threads_for
from .._ext import _kernel_approx_fast as _fast
from .kernels import MATERN_NUS

#: Parameters each string kernel takes (scikit-learn's KERNEL_PARAMS, plus randfeat's kernels).
KERNEL_PARAMS = {
    "additive_chi2": (),
    "chi2": ("gamma",),
    "cosine": (),
    "linear": (),
    "poly": ("gamma", "degree", "coef0"),
    "polynomial": ("gamma", "degree", "coef0"),
    "rbf": ("gamma",),
    "laplacian": ("gamma",),
    "sigmoid": ("gamma", "coef0"),
    "cauchy": ("gamma",),
    "matern": ("gamma", "nu"),
    "skewed_chi2": ("skewedness",),
}
#: Every ``kernel=`` string.
KERNEL_NAMES = frozenset(KERNEL_PARAMS) | {"precomputed"}
_NON_NEGATIVE = frozenset({"chi2", "additive_chi2"})


@dataclass(frozen=True)
class NystroemKernel:
    """A resolved kernel: what the compiled block (or a callable) needs.

    Attributes
    ----------
    name : str
        Canonical name (``poly`` becomes ``polynomial``), ``'precomputed'`` or ``'callable'``.
    gamma, coef0, degree, nu, skewedness : float
        Numeric parameters (those the kernel does not use are left at neutral values).
    func : callable or None
        The user's kernel function.
    func_params : dict
        Keyword arguments for ``func`` (``kernel_params``).
    """

    name: str
    gamma: float = 1.0
    coef0: float = 0.0
    degree: float = 1.0
    nu: float = 1.5
    skewedness: float = 1.0
    func: Optional[Callable] = None
    func_params: dict = field(default_factory=dict)


def _number(name, value, kernel, low=None, low_open=False):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real) or not np.isfinite(value):
        raise InvalidParameterError(f"{name} of the {kernel!r} kernel must be a finite number, got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        bound = f"> {low}" if low_open else f">= {low}"
        raise InvalidParameterError(f"{name} of the {kernel!r} kernel must be {bound}, got {value!r}")
    return float(value)


def resolve_kernel(kernel, gamma, coef0, degree, kernel_params, n_features):
    """Resolve Nystroem's kernel parameters with scikit-learn's rules.

    Parameters
    ----------
    kernel : str or callable
    gamma, coef0, degree : float or None
    kernel_params : dict or None
    n_features : int

    Returns
    -------
    NystroemKernel
    """
    params = dict(kernel_params or {})
    if callable(kernel) or kernel == "precomputed":
        if gamma is not None or coef0 is not None or degree is not None:
            raise ValueError(
                "Don't pass gamma, coef0 or degree to Nystroem if using a callable or precomputed kernel"
            )
        if callable(kernel):
            return NystroemKernel("callable", func=kernel, func_params=params)
        return NystroemKernel("precomputed")
    for name, value in (("gamma", gamma), ("coef0", coef0), ("degree", degree)):
        if name in KERNEL_PARAMS[kernel] and value is not None:
            params[name] = value
    # filter_params: a string kernel ignores parameters it does not take.
    params = {k: v for k, v in params.items() if k in KERNEL_PARAMS[kernel] and v is not None}
    name = "polynomial" if kernel == "poly" else kernel
    out = {}
    if "gamma" in KERNEL_PARAMS[kernel]:
        default = 1.0 if kernel == "chi2" else 1.0 / n_features
        out["gamma"] = _number("gamma", params.get("gamma", default), kernel, low=0.0)
    if kernel in ("poly", "polynomial", "sigmoid"):
        out["coef0"] = _number("coef0", params.get("coef0", 1), kernel)
    if kernel in ("poly", "polynomial"):
        out["degree"] = _number("degree", params.get("degree", 3), kernel, low=1.0)
    if kernel == "matern":
        nu = params.get("nu", 1.5)
        if isinstance(nu, (bool, np.bool_)) or nu not in MATERN_NUS:
            raise InvalidParameterError(f"nu of the 'matern' kernel must be one of {MATERN_NUS}, got {nu!r}")
        out["nu"] = float(nu)
    if kernel == "skewed_chi2":
        out["skewedness"] = _number("skewedness", params.get("skewedness", 1.0), kernel)
    return NystroemKernel(name, **out)


def check_kernel_input(kernel, X, what="X"):
    """Raise for values the kernel is not defined on: negative (χ² kernels), ≤ −c (skewed χ²).

    Parameters
    ----------
    kernel : NystroemKernel
    X : ndarray or CSR matrix, validated
    what : str
    """
    values = X.data if sp.issparse(X) else X
    if kernel.name in _NON_NEGATIVE and (values < 0).any():
        raise ValueError(f"Negative values in data passed to Nystroem (input {what}): the {kernel.name!r} kernel "
                         f"is defined on non-negative data.")
    if kernel.name == "skewed_chi2":
        c = kernel.skewedness
        implicit = sp.issparse(X) and X.data.shape[0] < X.shape[0] * X.shape[1]
        if (values <= -c).any() or (implicit and 0.0 <= -c):
            raise ValueError(f"{what} may not contain entries smaller than -skewedness (the skewed_chi2 kernel).")


class Landmarks:
    """Landmarks prepared for the compiled block, in one dtype; dense forms built only when used.

    Sparse landmarks stay sparse: the dot-product kernels read them through
    sparse products (sparse rows) and only a dense row block, or a
    coordinatewise kernel, builds the packed dense copy (memory checked
    first).  For ``rbf`` the dense copy is centred on the landmarks' mean
    (``shift``, float64) and rows are centred the same way before the
    compiled block, so ‖x − l‖² = ‖x'‖² − 2x'·l' + ‖l'‖² is formed from
    small numbers: float32 keeps its accuracy on offset data.

    Attributes
    ----------
    kernel : NystroemKernel
    L : ndarray or CSR matrix of shape (m, d)
        The landmarks as given (a callable kernel reads these).
    dtype : dtype
        float32 or float64.
    shift : ndarray of shape (d,), float64, or None
        The mean subtracted from landmarks and rows (rbf only).
    """

    def __init__(self, kernel, L, dtype):
        self.kernel, self.L, self.dtype = kernel, L, np.dtype(dtype)
        self.m = L.shape[0]
        self.shift = None
        if kernel.name == "rbf":
            mean = L.mean(axis=0) if self.m else np.zeros((1, L.shape[1]))
            self.shift = np.asarray(mean, dtype=np.float64).ravel()
        self._cache = {}

    def _cached(self, key, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def dense64(self):
        """The landmarks as a dense float64 array, centred for rbf (memory checked)."""
        def build():
            check_memory(self.m * self.L.shape[1] * 16, f"the {self.m} landmarks as a dense array",
                         "use a dot-product kernel (rbf, polynomial, linear, sigmoid, cosine) on sparse "
                         "input, or fewer landmarks")
            Ld = self.L.toarray() if sp.issparse(self.L) else np.asarray(self.L)
            Ld = Ld.astype(np.float64)
            if self.shift is not None:
                Ld -= self.shift
            return Ld
        return self._cached("dense64", build)

    @property
    def Lp(self):
        """Lᵀ packed (``pack_panels``) in the dtype; for skewed_chi2, (L + c)ᵀ."""
        def build():
            if self.kernel.name in ("callable", "precomputed"):
                return np.zeros((0, 0, 0), dtype=self.dtype)
            Ld = self.dense64()
            if self.kernel.name == "skewed_chi2":
                Ld = Ld + self.kernel.skewedness
            return _fast.pack_panels(np.ascontiguousarray(Ld.T.astype(self.dtype)))
        return self._cached("Lp", build)

    @property
    def Lp2(self):
        """sqrt(L + c)ᵀ packed for skewed_chi2, else empty."""
        def build():
            if self.kernel.name != "skewed_chi2":
                return np.zeros((0, 0, 0), dtype=self.dtype)
            a = np.sqrt(self.dense64() + self.kernel.skewedness)
            return _fast.pack_panels(np.ascontiguousarray(a.T.astype(self.dtype)))
        return self._cached("Lp2", build)

    @property
    def lvec(self):
        """Squared norms of the centred landmarks (rbf), inverse norms (cosine), else empty."""
        def build():
            if self.kernel.name == "rbf":
                Ld = self.dense64()
                return np.einsum("ij,ij->i", Ld, Ld).astype(self.dtype)
            if self.kernel.name == "cosine":
                norms = np.sqrt(self.sq_norms64())
                return np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0).astype(self.dtype)
            return np.zeros(0, dtype=self.dtype)
        return self._cached("lvec", build)

    def sq_norms64(self):
        """Squared norms of the landmarks as given, float64."""
        def build():
            L = sp.csr_matrix(self.L, dtype=np.float64) if sp.issparse(self.L) else np.asarray(self.L, np.float64)
            return row_norms(L, squared=True)
        return self._cached("sq64", build)

    def transposed(self, dtype):
        """Lᵀ (d × m) as given, in ``dtype``: sparse (CSR) for sparse landmarks, else dense."""
        dtype = np.dtype(dtype)
        def build():
            if sp.issparse(self.L):
                return sp.csr_matrix(self.L.T, dtype=dtype)
            return np.ascontiguousarray(np.asarray(self.L).T, dtype=dtype)
        return self._cached(("T", dtype.str), build)


def prepare_landmarks(kernel, L, dtype):
    """Prepare the landmarks (rows of the training data) for ``kernel_block`` / ``nystroem_features``.

    Parameters
    ----------
    kernel : NystroemKernel
    L : ndarray or CSR matrix of shape (m, d)
    dtype : float32 or float64

    Returns
    -------
    Landmarks
    """
    return Landmarks(kernel, L, dtype)


# Rows of a sparse X densified (or multiplied) at a time, and of a dense X centred at a time: a few MB.
_SPARSE_CHUNK_BYTES = 8 << 20


def _sparse_dots(lm, Xc, dtype):
    """(dots, xvec, lvec) of sparse rows for the compiled map, scipy's products.

    rbf: ‖x − l‖² accumulated in float64 (dots = −‖x − l‖²/2, xvec = lvec = 0,
    so the compiled (xv − 2·dot) + lv is the float64 distance rounded once).
    """
    if lm.kernel.name == "rbf":
        X64 = Xc.astype(np.float64)
        dots = X64 @ lm.transposed(np.float64)
        dots = dots.toarray() if sp.issparse(dots) else np.asarray(dots)
        d2 = (row_norms(X64, squared=True)[:, None] - 2.0 * dots) + lm.sq_norms64()[None, :]
        np.maximum(d2, 0.0, out=d2)
        d2 *= -0.5
        return (np.ascontiguousarray(d2, dtype=dtype), np.zeros(Xc.shape[0], dtype=dtype),
                np.zeros(lm.m, dtype=dtype))
    dots = Xc @ lm.transposed(dtype)
    dots = np.ascontiguousarray(dots.toarray() if sp.issparse(dots) else dots, dtype=dtype)
    xvec = np.zeros(0, dtype=dtype)
    if lm.kernel.name == "cosine":
        norms = np.sqrt(row_norms(Xc.astype(np.float64), squared=True))
        xvec = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0).astype(dtype)
    return dots, xvec, lm.lvec


def _rows_call(kernel, lm, X, Np, out, n_threads, index=None):
    """out <- block (· Nᵀ) for the rows of X (dense, or CSR handled in chunks)."""
    dtype = out.dtype
    empty1 = np.zeros(0, dtype=dtype)
    # Multiply-adds: the block (d per entry) and the product with N (m per output).
    work = X.shape[0] * out.shape[1] * (X.shape[1] + (Np.shape[1] if Np.shape[0] else 0))
    n_threads = threads_for("thin_product_flops", work, n_threads)
    kw = dict(gamma=kernel.gamma, coef0=kernel.coef0, degree=kernel.degree, nu=kernel.nu, c=kernel.skewedness)
    if kernel.name in ("callable", "precomputed"):
        if kernel.name == "precomputed":
            block = X[:, index]
            block = block.toarray() if sp.issparse(block) else block
        else:
            block = pairwise_kernels(X, lm.L, metric=kernel.func, filter_params=True, **kernel.func_params)
        block = np.ascontiguousarray(block, dtype=dtype)
        m = block.shape[1]
        _fast.nystroem_rows(block, lm.Lp, lm.Lp2, empty1, empty1, Np, out, "given", m, n_threads=n_threads)
        return
    m = lm.m
    if not sp.issparse(X):
        if lm.shift is None:
            _fast.nystroem_rows(X, lm.Lp, lm.Lp2, lm.lvec, empty1, Np, out, kernel.name, m,
                                n_threads=n_threads, **kw)
            return
        # rbf: rows centred on the landmarks' mean (in float64, rounded once), a chunk at a time.
        step = max(1, _SPARSE_CHUNK_BYTES // (max(1, X.shape[1]) * 8))
        for s in range(0, X.shape[0], step):
            Xc = (np.asarray(X[s : s + step], dtype=np.float64) - lm.shift).astype(dtype)
            _fast.nystroem_rows(Xc, lm.Lp, lm.Lp2, lm.lvec, empty1, Np, out[s : s + step], kernel.name, m,
                                n_threads=n_threads, **kw)
        return
    step = max(1, _SPARSE_CHUNK_BYTES // (max(m, X.shape[1]) * dtype.itemsize))
    for s in range(0, X.shape[0], step):
        Xc = X[s : s + step]
        if kernel.name in _fast.FROM_DOTS:
            # Dot products by scipy (each row from its own entries), then the compiled map and product.
            dots, xvec, lvec = _sparse_dots(lm, Xc, dtype)
            _fast.nystroem_rows(dots, np.zeros((0, 0, 0), dtype=dtype),
                                np.zeros((0, 0, 0), dtype=dtype), lvec, xvec, Np, out[s : s + step],
                                kernel.name, m, have_dots=True, n_threads=n_threads, **kw)
        else:
            _fast.nystroem_rows(Xc.toarray(), lm.Lp, lm.Lp2, lm.lvec, empty1, Np, out[s : s + step], kernel.name,
                                m, n_threads=n_threads, **kw)


def _dense_rows(X):
    """A dense X the compiled block can read (one unit stride), else a C copy."""
    if sp.issparse(X):
        return X
    if X.strides[1] == X.itemsize or X.strides[0] == X.itemsize:
        return X
    return np.ascontiguousarray(X)


def kernel_block(kernel, X, lm, n_threads, index=None):
    """K[i, j] = k(X[i], L[j]) in X's dtype (no normalisation).

    Parameters
    ----------
    kernel : NystroemKernel
    X : ndarray or CSR matrix of shape (n, d), validated
    lm : Landmarks
    n_threads : int
    index : ndarray of int or None
        ``precomputed``: the landmarks' columns of X.

    Returns
    -------
    K : ndarray of shape (n, m), X's dtype
    """
    m = len(index) if kernel.name == "precomputed" else lm.m
    out = np.empty((X.shape[0], m), dtype=X.dtype)
    _rows_call(kernel, lm, _dense_rows(X), np.zeros((0, 0, 0), dtype=X.dtype), out, n_threads, index)
    return out


def nystroem_features(kernel, X, lm, normalization_packed, n_out, n_threads, index=None):
    """Z = K(X, L) · Nᵀ in X's dtype, the block never held whole.

    Parameters
    ----------
    kernel : NystroemKernel
    X : ndarray or CSR matrix of shape (n, d), validated
    lm : Landmarks
    normalization_packed : ndarray
        ``pack_panels(N.T, product_panel_width(dtype))`` in X's dtype.
    n_out : int
        Number of landmarks (output width).
    n_threads : int
    index : ndarray of int or None
        ``precomputed``: the landmarks' columns of X.

    Returns
    -------
    Z : ndarray of shape (n, n_out), X's dtype, C order
    """
    out = np.empty((X.shape[0], n_out), dtype=X.dtype)
    _rows_call(kernel, lm, _dense_rows(X), normalization_packed, out, n_threads, index)
    return out
