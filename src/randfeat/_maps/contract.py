"""The feature-map contract: what every randfeat feature map declares and implements.

A map is one module in ``randfeat._maps`` with a class that subclasses
``FeatureMap`` and, usually, a frozen ``MapState`` dataclass for its fitted
parameters.  The class declares:

* ``output_kind`` — ``OutputKind.DENSE`` (a C-ordered ndarray in X's float
  dtype, streamed by the solvers) or ``OutputKind.CSR``;
* ``capabilities`` — the ``MapCapability`` members it implements, asked as
  ``feature_map.has(capability)`` (never probed);
* its parameters (``__init__`` and ``_parameter_constraints``, as
  scikit-learn), and its public fitted attributes as properties reading
  the state.

and implements:

* ``_draw(summary) -> state`` — the parameters, drawn from ``random_state``,
  reading of the training input only what ``summary`` (an ``InputSummary``)
  offers: shape, dtype, entry variance, column ranges;
* ``_transform_rows(state, X, n_threads) -> Z`` — the features of validated
  rows (dense C-ordered float32/float64 ndarray or CSR), written straight
  into the array it returns;
* with ``MapCapability.GAMMA_PATH``: ``_draw_path(summary, gammas)``, one
  state per gamma from a single draw, each bit-identical to a fit at that
  gamma;
* with ``MapCapability.MERGEABLE_VOCABULARY`` (a fit that reads every row):
  ``_fit_rows(state, X, n_threads, return_features)`` in memory, and
  ``_block_vocabulary(state, Xb)``, ``_merge_vocabularies(a, b)``,
  ``_state_with_vocabulary(state, vocabulary, n_threads)`` for a fit from
  row blocks held elsewhere (Dask);

Its state class overrides ``check`` (shapes, dtypes), ``index_bounds``
(the range of each integer array: all of them must be declared) and
``n_features_in``; ``MapState.verify`` runs them at construction and on
unpickling.

``FeatureMap`` gives the rest: ``fit``, ``transform`` and ``fit_transform``
for in-memory and Dask input alike (the backend chosen by
backend registered in ``randfeat._core.execution``), ``n_features_out_``,
``get_feature_names_out``, the fitted state kept as one object (replaced
whole by a fit, so a failed fit leaves the old one), and pickling that
checks the state before compiled code trusts it.  A map module imports
nothing from the estimators or the backends' Dask code; the solvers and
backends reach a map only through this contract.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Optional

import numpy as np
import scipy.sparse as sp
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from .._core.execution import backend_for
from .._core.input_stats import MemorySummary
from .._core.params import ValidatedParamsMixin, fit_context
from .._core.protocols import InputSummary, MapCapability, OutputKind
from .._core.threads import effective_n_threads
from .._core.types import Features, MatrixLike, NDArray, Rows, Self, SparseMatrix
from .._core.validation import check_csr_part, check_index_bounds


@dataclasses.dataclass(frozen=True, eq=False)
class MapState:
    """The fitted parameters of a feature map, one immutable object (subclass it as a frozen dataclass).

    ``verify`` runs at construction and when a pickled map is loaded, and
    raises ``ValueError`` for any state the map's compiled code (or scipy's
    unchecked sparse routines) could not read safely, cheaply (O(size of the
    state), vectorised; no pass over anything of the size of the data):

    * ``check`` — shapes, dtypes and consistency, written per state class;
    * every integer array anywhere in the state (fields, tuples, nested
      dataclasses) must be declared by ``index_bounds`` with the range its
      entries must lie in, and is checked against it: a state class that
      adds an integer array without declaring it fails at construction;
    * every sparse part must be a canonical CSR matrix with valid index
      arrays (``check_csr_part``).

    The state's arrays (a sparse part's data and index arrays too) are then
    made read-only, so what was checked is what the kernels read.

    Parameters
    ----------
    n_features_out : int
        The width of the features (subclasses add their fields after it).
    """

    n_features_out: int

    def __post_init__(self) -> None:
        self.verify()
        self.freeze()

    def check(self) -> None:
        """Raise ValueError unless the state is consistent (subclasses extend it)."""
        if not (isinstance(self.n_features_out, int) and self.n_features_out >= 0):
            raise ValueError(f"n_features_out must be a non-negative int, got {self.n_features_out!r}")

    def index_bounds(self) -> Iterable[tuple[str, NDArray[np.integer], Optional[int], Optional[int]]]:
        """The integer arrays of the state and their ranges (subclasses with integer arrays override it).

        Returns
        -------
        bounds : iterable of (name, array, low, high)
            Every integer ndarray of the state (``state_arrays``) with the
            half-open range [low, high) of its entries, None for an open side
            (e.g. hash keys, which any value may take).  Called after
            ``check``, so shapes and dtypes may be relied on.
        """
        return ()

    @property
    def n_features_in(self) -> Optional[int]:
        """int or None: the input width the state was fitted for (None: the state does not fix it)."""
        return None

    def verify(self) -> None:
        """Raise ValueError unless the whole state is safe to hand to the kernels (see the class docstring)."""
        self.check()
        bounds = list(self.index_bounds())
        declared = {id(arr) for _, arr, _, _ in bounds}
        for name, value in state_arrays(self):
            if sp.issparse(value):
                check_csr_part(name, value)
            elif value.dtype.kind in "iu" and id(value) not in declared:
                raise TypeError(f"{type(self).__name__}.{name} is an integer array its index_bounds does not "
                                f"declare: every integer array of a fitted state needs its bounds checked")
        for name, arr, low, high in bounds:
            check_index_bounds(name, arr, low, high)

    def freeze(self) -> None:
        """Make every array of the state read-only (a sparse part's data and index arrays included)."""
        for _, value in state_arrays(self):
            for a in (value.data, value.indices, value.indptr) if sp.issparse(value) else (value,):
                a.setflags(write=False)


def state_arrays(obj: object, prefix: str = "") -> Iterator[tuple[str, np.ndarray | SparseMatrix]]:
    """Yield (name, array) for every ndarray and sparse matrix of a state, however deeply held.

    Walks a dataclass's fields, the elements of tuples and lists, and nested
    dataclasses (a structured map's draw); dicts and other objects (a
    callable kernel's parameters) are not entered.

    Parameters
    ----------
    obj : MapState or any field value
    prefix : str
        The name of ``obj`` (empty for the state itself).

    Yields
    ------
    name : str
    array : ndarray or scipy sparse matrix
    """
    if isinstance(obj, np.ndarray) or sp.issparse(obj):
        yield prefix, obj
    elif isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            yield from state_arrays(item, f"{prefix}[{i}]")
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            yield from state_arrays(vars(obj)[field.name], f"{prefix}.{field.name}" if prefix else field.name)


class FeatureMap(ClassNamePrefixFeaturesOutMixin, ValidatedParamsMixin, TransformerMixin, BaseEstimator):
    """Base class of randfeat's feature maps: the declared contract (see the module docstring).

    ``randfeat.Ridge(features=...)`` and the other estimators accept
    instances of this class only.
    """

    # Every map declares, in its class, ``output_kind`` (an ``OutputKind``) and
    # ``capabilities`` (a frozenset of ``MapCapability``): nothing is assumed.
    # A property may stand for either where it depends on the parameters.

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = {name for klass in cls.__mro__ if klass is not FeatureMap for name in vars(klass)}
        missing = [name for name in ("output_kind", "capabilities") if name not in declared]
        if missing:
            raise TypeError(f"{cls.__name__} must declare {' and '.join(missing)} (randfeat.FeatureMap assumes "
                            f"nothing: see the guide's 'Writing a feature map')")
        capabilities = cls.capabilities
        if not isinstance(capabilities, frozenset):
            return  # a property: declared per instance, checked by has()'s callers
        # A fit that reads the rows must also be possible from row blocks
        # (Dask): a map that overrides _fit_rows declares the vocabulary protocol.
        reads_rows = cls._fit_rows is not FeatureMap._fit_rows
        if reads_rows and MapCapability.MERGEABLE_VOCABULARY not in capabilities:
            raise TypeError(f"{cls.__name__} implements _fit_rows without declaring MERGEABLE_VOCABULARY")
        if MapCapability.GAMMA_PATH in capabilities and MapCapability.KERNEL_WIDTH not in capabilities:
            raise TypeError(f"{cls.__name__} declares GAMMA_PATH without KERNEL_WIDTH")
        if MapCapability.GAMMA_PATH in capabilities and cls._draw_path is FeatureMap._draw_path:
            raise TypeError(f"{cls.__name__} declares GAMMA_PATH but does not implement _draw_path")
        if MapCapability.KERNEL_WIDTH in capabilities and cls._auto_gamma is FeatureMap._auto_gamma:
            raise TypeError(f"{cls.__name__} declares KERNEL_WIDTH but does not implement _auto_gamma")

    def has(self, capability: MapCapability) -> bool:
        """Return True if this map declares ``capability``.

        Parameters
        ----------
        capability : MapCapability

        Returns
        -------
        bool
        """
        return capability in self.capabilities

    def output_kind_for(self, sparse_input: bool, state: Optional[MapState] = None) -> Optional[OutputKind]:
        """Return the ``OutputKind`` of the features of a dense or a sparse input.

        Resolves ``OutputKind.SAME_AS_INPUT``; every other kind is the
        declared ``output_kind``.

        Parameters
        ----------
        sparse_input : bool
            True for a sparse (CSR) input.
        state : MapState or None, default=None
            The fitted state the features will be made with, where it is not
            (yet) the map's own; read only by maps whose output kind is
            found at fit (``TransformerMap``).

        Returns
        -------
        OutputKind
            ``DENSE`` or ``CSR``.
        """
        kind = self.output_kind
        if kind is OutputKind.SAME_AS_INPUT:
            return OutputKind.CSR if sparse_input else OutputKind.DENSE
        return kind

    # ------------------------------------------------------- what a map implements
    def _draw(self, summary: InputSummary) -> MapState:
        """Return the fitted state drawn for the input ``summary`` describes (an ``InputSummary``)."""
        raise NotImplementedError

    def _transform_rows(self, state: Any, X: Rows, n_threads: int) -> Rows:
        """Return the features of validated rows ``X`` under ``state``."""
        raise NotImplementedError

    def _draw_path(self, summary: InputSummary, gammas: Sequence[float]) -> Sequence[MapState]:
        """Return one state per gamma from a single draw (``MapCapability.GAMMA_PATH``)."""
        raise NotImplementedError

    def _auto_gamma(self, X: Rows) -> float:
        """Return the width heuristic's gamma for validated rows X (``MapCapability.KERNEL_WIDTH``)."""
        raise NotImplementedError

    def _fit_rows(self, state: Any, X: Rows, n_threads: int, return_features: bool) -> tuple[Any, Optional[Rows]]:
        """Return (state, features or None) after reading the rows of X (maps without a vocabulary: nothing to read)."""
        return state, (self._transform_rows(state, X, n_threads) if return_features else None)

    def _legacy_state(self, attributes):
        """Return the state of a map pickled by randfeat 0.1.0 from its attributes (a dict it pops them from)."""
        raise ValueError(f"cannot read this pickle of {type(self).__name__}: it has no fitted state")

    # ------------------------------------------------------------------ the API
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: MatrixLike, y: object = None) -> Self:
        """Fit the map on X: draw its random parameters (and read what it needs of X).

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        self._state, _ = backend_for(X).fit_map(self, X, return_features=False)
        return self

    @fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X: MatrixLike, y: object = None) -> Features:
        """Fit to X and return its features (all or nothing: a failure leaves the map as it was).

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        Z : ndarray, sparse matrix or dask array of shape (n_samples, n_features_out_)
        """
        self._state, Z = backend_for(X).fit_map(self, X, return_features=True)
        return Z

    def transform(self, X: MatrixLike) -> Features:
        """Compute the features of X.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features_in_)

        Returns
        -------
        Z : ndarray, sparse matrix or dask array of shape (n_samples, n_features_out_)
            X's float dtype (float32 stays float32).  For a Dask array X, a
            lazy Dask array with X's row chunks, computed block by block on
            the workers.
        """
        fmap = self._snapshot()  # one fitted map from start to end, whatever other threads fit meanwhile
        return backend_for(X).transform_map(fmap, fmap._fitted_state(), X)

    # ---------------------------------------------- entry points for the layers above
    def _fit_validated(self, X, *, return_features=False):
        """Fit on rows a public call has already validated; return their features or None.

        The solvers' and backends' entry: no second validation of X and no
        backend choice (the public call made both, once).  The map's own
        parameters are validated, as its ``fit`` would (``_check_params``).
        Records ``n_features_in_`` as ``fit`` does.

        Parameters
        ----------
        X : validated C-ordered ndarray or canonical CSR matrix, float32 or float64
        return_features : bool, default=False

        Returns
        -------
        Z : ndarray, CSR matrix or None
        """
        self._check_params()
        self._state, Z = self._fit_rows(self._draw(MemorySummary(X)), X, self._threads(), return_features)
        self.n_features_in_ = X.shape[1]
        return Z

    def _check_params(self):
        """Validate this map's parameters as its ``fit`` does, unless scikit-learn's config skips validation.

        An estimator given the map as ``features=`` fits a clone through the
        validated entry points, not through ``fit``: this is where the
        clone's ``_parameter_constraints`` are still enforced.
        """
        if not get_config()["skip_parameter_validation"]:
            self._validate_params()

    def _transform_validated(self, X):
        """Return the features of rows a public call has already validated (the solvers' per-chunk call).

        Parameters
        ----------
        X : validated C-ordered ndarray or canonical CSR matrix with ``n_features_in_`` columns

        Returns
        -------
        Z : ndarray or CSR matrix of shape (n_rows, n_features_out_)
        """
        return self._transform_rows(self._fitted_state(), X, self._threads())

    def _fit_gamma_path(self, X, gammas):
        """Return one fitted clone of this map per gamma (``RidgeCV(gammas=...)``).

        With ``MapCapability.GAMMA_PATH`` the parameters are drawn once and
        rescaled per gamma (``_draw_path``); otherwise each clone is fitted
        at its gamma.  Either way each clone equals
        ``clone(self).set_params(gamma=g).fit(X)`` (same ``random_state``).

        Parameters
        ----------
        X : validated ndarray or CSR matrix
        gammas : sequence of float

        Returns
        -------
        maps : list of FeatureMap
        """
        if not self.has(MapCapability.KERNEL_WIDTH):
            raise ValueError(f"{type(self).__name__} declares no kernel width (MapCapability.KERNEL_WIDTH): "
                             f"there is no gamma to choose")
        maps = [clone(self).set_params(gamma=float(g)) for g in gammas]
        if not self.has(MapCapability.GAMMA_PATH):
            for m in maps:
                m._fit_validated(X)
            return maps
        states = maps[0]._draw_path(MemorySummary(X), [m.gamma for m in maps])
        for m, state in zip(maps, states):
            m._state, m.n_features_in_ = state, X.shape[1]
        return maps

    # ------------------------------------------------------------- the state
    def _fitted_state(self):
        """The fitted state; scikit-learn's NotFittedError (an AttributeError too) before ``fit``."""
        check_is_fitted(self)
        return self._state

    def __sklearn_is_fitted__(self):
        """Return True once ``fit`` has succeeded (scikit-learn's fitted check)."""
        return vars(self).get("_state") is not None

    @property
    def n_features_out_(self) -> int:
        """int: the width of the features."""
        return self._fitted_state().n_features_out

    @property
    def _n_features_out(self):
        # Read by ClassNamePrefixFeaturesOutMixin.get_feature_names_out.
        return self.n_features_out_

    def _threads(self):
        """Threads for a kernel call: the current (validated) ``n_jobs``, or all cores for maps without one."""
        if "n_jobs" in self._parameter_constraints:
            return self._n_threads()
        return effective_n_threads(None)

    def __setstate__(self, state):
        state = dict(state)
        # A map pickled by an earlier version lacks the parameters added since:
        # they take their defaults (what that version did).
        for name, param in inspect.signature(type(self).__init__).parameters.items():
            if param.default is not inspect.Parameter.empty and name not in state:
                state[name] = param.default
        if "_state" not in state and "n_features_out_" in state:
            # A map pickled by randfeat 0.1.0 kept its parameters as separate attributes.
            state["_state"] = self._legacy_state(state)
        super().__setstate__(state)
        fitted = vars(self).get("_state")
        if fitted is not None:
            try:
                if not isinstance(fitted, MapState):
                    raise TypeError(f"the fitted state is a {type(fitted).__name__}, not a MapState")
                fitted.verify()  # the unpickled arrays are what compiled code will read
                n_in, expected = vars(self).get("n_features_in_"), fitted.n_features_in
                if expected is not None and n_in != expected:
                    raise ValueError(f"n_features_in_={n_in!r}, but the fitted parameters are for {expected} "
                                     f"input features")
            except (ValueError, TypeError, IndexError) as exc:
                raise ValueError(f"this pickled {type(self).__name__} holds an inconsistent fitted state ({exc}); "
                                 f"it was altered or damaged: fit the map again") from None
            fitted.freeze()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
