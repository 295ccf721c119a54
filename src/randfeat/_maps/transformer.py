"""Any scikit-learn transformer as a feature map: ``as_feature_map`` and ``TransformerMap``.

``Ridge(features=make_pipeline(StandardScaler(), RBFSampler(...)))`` wraps
the pipeline in a ``TransformerMap``: it is fitted once, as scikit-learn
would fit it, on the training input (a Dask array: on a uniform sample of at
most ``max_fit_rows`` rows, brought to the client), and its ``transform`` is
then called on one chunk of rows at a time, so the N × D feature matrix is
never held for dense output.  The output is made C-ordered in X's float
dtype (float32 stays float32) or a canonical CSR matrix.

Streaming is exact when the transformer's ``transform`` of a chunk equals
the same rows of its ``transform`` of all rows: ``row_independent=True``,
the default, true of scikit-learn's scalers, kernel approximations,
polynomial features and encoders.  A transformer for which it is not true
is declared with ``row_independent=False``: its features are then made in
one call on all the rows (N × D memory) and it cannot transform a Dask array.
"""

from __future__ import annotations

import dataclasses
from numbers import Integral
from typing import Any, Optional

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils._param_validation import HasMethods

from .._core.protocols import InputSummary, MapCapability, OutputKind
from .._core.types import RandomState, Rows
from .._core.validation import Interval, as_generator, validate_rows
from .contract import FeatureMap, MapState

#: A Dask input's wrapped transformer is fitted on at most this many rows by default.
DEFAULT_MAX_FIT_ROWS = 100_000


@dataclasses.dataclass(frozen=True, eq=False)
class TransformerState(MapState):
    """The fitted state of a ``TransformerMap``.

    Attributes
    ----------
    n_features_out : int
    transformer : object
        The fitted clone of the wrapped transformer.
    sparse : bool
        True when its ``transform`` returns a sparse matrix.
    """

    transformer: object
    sparse: bool

    def check(self) -> None:
        """Raise ValueError unless the state is consistent."""
        super().check()
        if not isinstance(self.sparse, bool):
            raise ValueError(f"sparse must be a bool, got {self.sparse!r}")


def _as_features(Z, dtype, sparse, n_features_out, name):
    """The transformer's output as the solvers read it: C-ordered ``dtype`` ndarray or canonical CSR.

    A third party's output reaches compiled code, so it goes through the
    same gateway as any input rows (``validate_rows``: 2-D, finite, CSR
    structure, canonical), in X's dtype.
    """
    if sp.issparse(Z) != sparse:
        raise ValueError(f"the transformer wrapped by {name} returned a {'sparse' if sp.issparse(Z) else 'dense'} "
                         f"matrix here and a {'sparse' if sparse else 'dense'} one at fit: its output kind must not "
                         f"depend on the rows")
    try:
        Z = validate_rows(Z.astype(dtype) if sparse else np.asarray(Z, dtype=dtype), owner=name)
    except ValueError as exc:
        raise ValueError(f"the transformer wrapped by {name} returned features randfeat cannot use: {exc}") from None
    if Z.shape[1] != n_features_out:
        raise ValueError(f"the transformer wrapped by {name} returned {Z.shape[1]} features here and "
                         f"{n_features_out} at fit: its width must not depend on the rows")
    return Z if sparse else np.ascontiguousarray(Z)


class TransformerMap(FeatureMap):
    """A scikit-learn transformer (or Pipeline) as a randfeat feature map, streamed chunk by chunk.

    ``Ridge(features=t)`` and the other estimators wrap any transformer
    ``t`` that is not a randfeat map in ``TransformerMap(t)``; wrap it
    yourself to declare ``row_independent=False`` or to bound the rows a
    Dask fit reads.

    Parameters
    ----------
    transformer : estimator with ``fit`` and ``transform``
        Unsupervised (its ``fit`` is called with X only) and numeric: it
        receives randfeat's validated float array or CSR matrix, not a
        DataFrame.  Cloned at fit; never modified.
    row_independent : bool, default=True
        Whether ``transform`` of some rows equals those rows of ``transform``
        of all rows.  True: features are computed one chunk of rows at a time
        (never N × D at once) and a Dask array block by block.  False: all
        rows in one call (N × D memory); a Dask array is refused.
    max_fit_rows : int, default=100000
        A Dask input with more rows is fitted on a uniform sample of this
        many rows (drawn with ``random_state``); in memory every row is used.
    random_state : int, RandomState instance or None, default=None
        The sample of a Dask input's rows.

    Attributes
    ----------
    transformer_ : object
        The fitted clone of ``transformer``.
    n_features_in_ : int
    n_features_out_ : int

    See Also
    --------
    as_feature_map : A randfeat map as it is, anything else wrapped in this class.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklearn.kernel_approximation import RBFSampler
    >>> from randfeat import Ridge, TransformerMap
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> y = np.sin(X[:, 0])
    >>> pipe = make_pipeline(StandardScaler(), RBFSampler(n_components=100, random_state=0))
    >>> model = Ridge(alpha=1e-2, features=TransformerMap(pipe)).fit(X, y)
    >>> model.predict(X[:2]).shape
    (2,)
    """

    _parameter_constraints: dict = {
        "transformer": [HasMethods(["fit", "transform"])],
        "row_independent": ["boolean"],
        "max_fit_rows": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state", np.random.Generator],
    }

    def __init__(self, transformer: Any, *, row_independent: bool = True, max_fit_rows: int = DEFAULT_MAX_FIT_ROWS,
                 random_state: RandomState = None) -> None:
        self.transformer = transformer
        self.row_independent = row_independent
        self.max_fit_rows = max_fit_rows
        self.random_state = random_state

    @property
    def output_kind(self) -> Optional[OutputKind]:
        """OutputKind or None: CSR or DENSE as the fitted transformer returns; None before ``fit``."""
        return self.output_kind_for(False)

    def output_kind_for(self, sparse_input: bool, state: Optional[MapState] = None) -> Optional[OutputKind]:
        """Return CSR or DENSE as the fitted transformer (of ``state``, else this map's) returns; None before fit.

        Parameters
        ----------
        sparse_input : bool
            Ignored: the fitted transformer decides.
        state : TransformerState or None, default=None

        Returns
        -------
        OutputKind or None
        """
        state = vars(self).get("_state") if state is None else state
        if state is None:
            return None
        return OutputKind.CSR if state.sparse else OutputKind.DENSE

    @property
    def capabilities(self) -> frozenset[MapCapability]:
        """frozenset of MapCapability: ``ROW_INDEPENDENT`` as declared by ``row_independent``; no kernel width."""
        return frozenset({MapCapability.ROW_INDEPENDENT}) if self.row_independent else frozenset()

    @property
    def transformer_(self) -> Any:
        """object: the fitted clone of ``transformer``."""
        return self._fitted_state().transformer

    def _draw(self, summary: InputSummary) -> TransformerState:
        rows = summary.training_rows(self.max_fit_rows, as_generator(self.random_state))
        fitted = clone(self.transformer).fit(rows)
        probe = fitted.transform(rows[:1])
        sparse = bool(sp.issparse(probe))
        n_out = int(probe.shape[1]) if np.ndim(probe) == 2 else -1
        if n_out < 0:
            raise ValueError(f"the transformer wrapped by {type(self).__name__} returned an array of shape "
                             f"{np.shape(probe)}, not 2-D")
        return TransformerState(n_features_out=n_out, transformer=fitted, sparse=sparse)

    def _transform_rows(self, state: TransformerState, X: Rows, n_threads: int) -> Rows:
        Z = state.transformer.transform(X)
        return _as_features(Z, X.dtype, state.sparse, state.n_features_out, type(self).__name__)


def as_feature_map(features: object) -> Optional[FeatureMap]:
    """Return ``features`` as a randfeat feature map: a map as it is, a transformer wrapped in ``TransformerMap``.

    Parameters
    ----------
    features : FeatureMap, estimator with ``fit`` and ``transform``, or None

    Returns
    -------
    FeatureMap or None
        ``None`` for ``None`` (the estimator fits on X itself).
    """
    if features is None or isinstance(features, FeatureMap):
        return features
    return TransformerMap(features)
