"""The protocols the layers declare to each other, so that no layer probes another's attributes.

* ``OutputKind`` — what a feature map's ``transform`` returns: a dense array
  (streamed chunk by chunk by the solvers) or a CSR matrix (materialised).
* ``MapCapability`` — what a feature map can do beyond the contract's
  required methods, asked as ``feature_map.has(MapCapability.X)`` (the way
  solvers ask an operator ``ops.has(Capability.X)``).
* ``InputSummary`` — what a map's parameter draw may read of its training
  input: its shape and dtype, and statistics that an in-memory array and a
  Dask array compute each in their own way (``randfeat._backends``).

The feature-map contract itself (``FeatureMap``) is in
``randfeat._maps.contract``; these are here, below every layer that uses
them, because the solvers and the backends ask maps through them without
importing the maps.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod

import numpy as np

from .types import NDArray, Rows


class OutputKind(enum.Enum):
    """The kind of array a feature map's ``transform`` returns."""

    #: A C-ordered ndarray in X's float dtype: solvers stream it chunk by chunk.
    DENSE = "dense"
    #: A ``scipy.sparse.csr_matrix`` in X's float dtype: solvers materialise it
    #: (it is cheap to hold) and solve by conjugate gradient.
    CSR = "csr"
    #: CSR for CSR input, a dense array for dense input (``AdditiveChi2Sampler``,
    #: as scikit-learn's): resolved per input by ``FeatureMap.output_kind_for``.
    SAME_AS_INPUT = "same as input"


class MapCapability(enum.Enum):
    """Optional capabilities of a feature map (declared in its class's ``capabilities``)."""

    #: A row's features never depend on the other rows transformed with it,
    #: nor on the thread count: a Dask array is transformed block by block
    #: and gives the in-memory features bit for bit.
    ROW_INDEPENDENT = "row independent"
    #: The map has a kernel width ``gamma`` that ``RidgeCV(gammas=...)`` may
    #: choose, and ``_auto_gamma(X)``: the width heuristic for ``gammas="auto"``
    #: (the map knows its kernel's distance).
    KERNEL_WIDTH = "kernel width gamma"
    #: ``_draw_path(summary, gammas)``: the parameters for several gammas
    #: from one draw, each rescaled by the kernel's own scaling, bit-identical
    #: to fitting the map at each gamma (``RidgeCV(gammas=...)``).
    GAMMA_PATH = "gamma path by rescaling one draw"
    #: The fit reads every row (a vocabulary of occupied bins) through
    #: ``_fit_rows``, and that vocabulary can be built per block of rows and
    #: merged exactly (``_block_vocabulary``, ``_merge_vocabularies``,
    #: ``_state_with_vocabulary``): a Dask fit never brings rows to the client.
    MERGEABLE_VOCABULARY = "mergeable vocabulary"


class InputSummary(ABC):
    """What a feature map's draw may read of the training input (shape, dtype, a few statistics).

    Backends implement it: in memory on the validated array, on a Dask array
    by Dask's reductions (each statistic one or two passes over the blocks,
    computed only when asked for).

    Attributes
    ----------
    n_samples : int
    n_features : int
    dtype : numpy dtype
        The float dtype features will have (float32 stays float32).
    """

    n_samples: int
    n_features: int

    @property
    @abstractmethod
    def dtype(self) -> np.dtype[np.floating]:
        """The float dtype of the validated input."""

    @abstractmethod
    def entry_variance(self) -> tuple[float, float]:
        """Return ``(s, v)``: the variance of all n·d entries is s²·v (``randfeat._maps.gamma.entry_variance``)."""

    @abstractmethod
    def entry_mean_abs_deviation(self) -> tuple[float, float]:
        """Return ``(s, m)``: the mean absolute deviation of all entries is s·m."""

    @abstractmethod
    def rows(self, index: NDArray[np.integer]) -> Rows:
        """Return the validated rows ``index`` (an int array, any order) as an in-memory ndarray or CSR matrix.

        Parameters
        ----------
        index : ndarray of int

        Returns
        -------
        ndarray or CSR matrix
        """

    @abstractmethod
    def training_rows(self, max_rows: int, random_state: np.random.Generator) -> Rows:
        """Return the rows a map that fits on data reads (a wrapped scikit-learn transformer).

        In memory: every row (the map is fitted as scikit-learn would fit it).
        A Dask array: every row if there are at most ``max_rows``, else a
        uniform sample of ``max_rows`` rows without replacement drawn with
        ``random_state``, in row order, brought to the client.

        Parameters
        ----------
        max_rows : int
        random_state : numpy.random.Generator

        Returns
        -------
        ndarray or CSR matrix
        """

    @abstractmethod
    def column_range(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(lo, hi)``: each column's minimum and maximum, in the input's dtype (a CSR's zeros included)."""

    def min_value(self) -> float:
        """Return the smallest entry of the input as a float (a CSR's implicit zeros included), O(1) memory.

        The default reads ``column_range`` (two arrays of n_features);
        backends override it with one pass that holds no per-column array.

        Returns
        -------
        float
        """
        lo, _ = self.column_range()
        return float(np.min(lo)) if np.size(lo) else 0.0
