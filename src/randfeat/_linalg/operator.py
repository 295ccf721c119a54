"""The interface of every product with a feature matrix Z: ``FeatureOperator`` and its declared ``Capability``.

The iterative solver touches Z (N × D) only through a ``FeatureOperator``:
``Z @ P`` and ``Zᵀ @ U`` are required, and a few optional capabilities
(``Capability``) are either implemented by a class — which declares them in
``capabilities`` — or absent.  Consumers ask ``ops.has(capability)``, never
probe attributes; ``FeatureOperator.__init_subclass__`` checks that a class
declares exactly the optional methods it overrides.

=================  =====================================  ==========================================
capability         method                                 when absent
=================  =====================================  ==========================================
FUSED_NORMAL       ``normal(P, mup, w)``                  composed: ``matmat`` then ``rmatmat``
COLUMN_STATISTICS  ``column_sums(w)``,                    sums composed from ``rmatmat_once`` (in
                   ``column_sq_sums(w)``                  Z's precision); sums of squares raise
GRAM_BLOCK         ``gram_block(columns, w)``             raises ``NotImplementedError``
=================  =====================================  ==========================================

Every operator also declares the ``MatrixKind`` of its Z (``kind``): what a
consumer may assume of the matrix's structure (CG's preconditioner choice).

One module per matrix kind implements it: ``dense`` (``DenseProducts``),
``csr`` (``SparseProducts``), ``onehot`` (``OneHotBlockProducts``);
``products.make_products`` picks one.  Every product is bit-identical for
any thread count.  Centring and sample weights are applied around these
products (``randfeat._solvers.normal``), never by modifying Z.
"""

import enum
from abc import ABC, abstractmethod

import numpy as np


class Capability(enum.Enum):
    """Optional capabilities of a ``FeatureOperator``, each naming the methods that provide it."""

    #: ``normal``: Zᵀ W (Z P − 1 mupᵀ) in one fused pass.
    FUSED_NORMAL = ("normal",)
    #: ``column_sums`` / ``column_sq_sums``: Σ_i w_i Z_ij and Σ_i w_i Z_ij², float64.
    COLUMN_STATISTICS = ("column_sums", "column_sq_sums")
    #: ``gram_block``: the dense Gram block Σ_i w_i z_i[H] z_i[H]ᵀ of chosen columns H.
    GRAM_BLOCK = ("gram_block",)

    @property
    def methods(self):
        """The names of the methods that provide this capability."""
        return self.value


class MatrixKind(enum.Enum):
    """The structure of an operator's Z, declared by every ``FeatureOperator`` as ``kind``."""

    #: A dense array.
    DENSE = "dense"
    #: A general sparse (CSR) matrix.
    CSR = "csr"
    #: A one-hot block matrix (binning features, one-hot encodings): every
    #: row has one entry, all of one value, in each of G disjoint blocks of
    #: columns.  CG's "auto" preconditioner is then the heavy block with a
    #: scaled identity, not Jacobi (``randfeat._solvers.precond.diagonal_kind``).
    ONE_HOT_BLOCKS = "one-hot blocks"


class FeatureOperator(ABC):
    """Products with a feature matrix Z of shape (N, D), float32 or float64.

    Subclasses implement ``matmat`` and ``rmatmat`` and list in
    ``capabilities`` the optional ``Capability`` members they implement
    (see the module docstring for what happens when one is absent).

    Parameters
    ----------
    shape : (int, int)
        (N, D).
    dtype : numpy dtype
        Z's dtype; products take and return arrays of it.
    n_threads : int
        Threads the products may use (results do not depend on it).
    """

    #: The optional capabilities this class implements.
    capabilities = frozenset()
    #: The structure of Z (``MatrixKind``); every concrete operator sets it.
    kind = MatrixKind.DENSE

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for cap in Capability:
            overridden = {name for name in cap.methods if _overrides(cls, name)}
            if cap in cls.capabilities and len(overridden) < len(cap.methods):
                missing = sorted(set(cap.methods) - overridden)
                raise TypeError(f"{cls.__name__} declares {cap.name} but does not implement {missing}")
            if cap not in cls.capabilities and overridden:
                raise TypeError(f"{cls.__name__} implements {sorted(overridden)} without declaring {cap.name}")

    def __init__(self, shape, dtype, n_threads):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.n_threads = n_threads

    def has(self, capability):
        """Return True if this operator implements ``capability``.

        Parameters
        ----------
        capability : Capability

        Returns
        -------
        bool
        """
        return capability in self.capabilities

    @property
    def entries(self):
        """Stored entries of Z (N·D when dense, nnz when sparse): the work of one product per target."""
        return self.shape[0] * self.shape[1]

    # ------------------------------------------------------------ required
    @abstractmethod
    def matmat(self, P):
        """Return Z @ P.

        Parameters
        ----------
        P : ndarray of shape (D, K)

        Returns
        -------
        ndarray of shape (N, K), Z's dtype
        """

    @abstractmethod
    def rmatmat(self, U):
        """Return Zᵀ @ U.

        Parameters
        ----------
        U : ndarray of shape (N, K)

        Returns
        -------
        ndarray of shape (D, K), Z's dtype
        """

    def rmatmat_once(self, U):
        """Return Zᵀ @ U for a one-off product (may skip set-up that only repeated products repay).

        Parameters
        ----------
        U : ndarray of shape (N, K)

        Returns
        -------
        ndarray of shape (D, K), Z's dtype
        """
        return self.rmatmat(U)

    def rmatmat_into(self, U, out):
        """Write Zᵀ @ U into ``out`` (D × K, Z's dtype, C-contiguous): for a buffer kept across iterations.

        Parameters
        ----------
        U : ndarray of shape (N, K)
        out : ndarray of shape (D, K)

        Returns
        -------
        out
        """
        np.copyto(out, self.rmatmat(U))
        return out

    def close(self):
        """Release work buffers and threads (the operator stays usable)."""

    # -------------------------------------------------- optional capabilities
    def normal(self, P, mup, w, out=None):
        """Return (Zᵀ W (Z P − 1 mupᵀ), Σ_i w_i (z_iᵀP − mup)).

        Without ``Capability.FUSED_NORMAL``: ``matmat``, then centring and
        weights, then ``rmatmat``.

        Parameters
        ----------
        P : ndarray of shape (D, K), Z's dtype
        mup : ndarray of shape (K,), float64
            Subtracted from every row of Z P (μᵀP when centring, else 0).
        w : ndarray of shape (N,) float64, or None for unit weights
        out : ndarray of shape (D, K), Z's dtype, C-contiguous, or None
            Where to write Q (an iterative solver's buffer: a fresh array of
            tens of MB per call costs its page faults every time).

        Returns
        -------
        Q : ndarray of shape (D, K), Z's dtype (``out`` when given)
        s : ndarray of shape (K,), float64
        """
        U = self.matmat(P)
        if np.any(mup):
            U -= mup.astype(self.dtype)
        if w is not None:
            U *= w[:, None].astype(self.dtype)
        return into(out, self.rmatmat(U)), U.sum(axis=0, dtype=np.float64)

    def column_sums(self, w):
        """Return Σ_i w_i Z_ij for each column j, float64.

        Without ``Capability.COLUMN_STATISTICS``: ``rmatmat_once`` of w, in
        Z's precision.

        Parameters
        ----------
        w : ndarray of shape (N,), float64

        Returns
        -------
        ndarray of shape (D,), float64
        """
        return self.rmatmat_once(np.asarray(w, dtype=self.dtype)[:, None])[:, 0].astype(np.float64)

    def column_sq_sums(self, w):
        """Return Σ_i w_i Z_ij² for each column j, float64 (``Capability.COLUMN_STATISTICS``).

        Parameters
        ----------
        w : ndarray of shape (N,), float64

        Returns
        -------
        ndarray of shape (D,), float64
        """
        raise NotImplementedError(f"{type(self).__name__} has no column sums of squares")

    def gram_block(self, columns, w):
        """Return the dense Gram block Σ_i w_i z_i[columns] z_i[columns]ᵀ (``Capability.GRAM_BLOCK``).

        Parameters
        ----------
        columns : ndarray of int, increasing
            The chosen columns (h of them).
        w : ndarray of shape (N,) float64, or None for unit weights

        Returns
        -------
        ndarray of shape (h, h), float64, symmetric
        """
        raise NotImplementedError(f"{type(self).__name__} has no Gram block")


def _overrides(cls, name):
    """True if a class between ``cls`` and ``FeatureOperator`` in the MRO defines the method ``name``."""
    for klass in cls.__mro__:
        if klass is FeatureOperator:
            return False
        if name in vars(klass):
            return True
    return False


def into(out, Q):
    """Return Q, copied into ``out`` when one is given."""
    if out is None:
        return Q
    np.copyto(out, Q)
    return out
