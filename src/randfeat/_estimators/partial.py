"""Incremental fitting: ``partial_fit`` of Ridge and RidgeClassifier by merged sufficient statistics.

The feature map is cloned and fitted on the first block and then kept.
Each call merges the block's ``RidgeStatistics`` (``pipeline.block_statistics``,
the same accumulate loop as ``fit``) into the estimator's and re-solves, so
after any sequence of blocks the model is exactly the ridge solution on
their concatenation *with that map*.  That is ``fit`` on the concatenation
when the map's draw reads nothing but the input's width and dtype (a numeric
gamma and i.i.d., orthogonal, QMC or structured frequencies); a map whose
draw reads rows (Nystroem's landmarks, leverage sampling, ``gamma="scale"``)
is drawn from the first block only, so ``first_block_check`` refuses a first
block too small to draw it from and warns where it is smaller than what
``fit`` would read.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, TypeVar

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin, RegressorMixin, clone
from sklearn.utils._available_if import _AvailableIfDescriptor
from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d

from .._core.protocols import OutputKind
from .._core.threads import effective_n_threads
from .._core.params import transaction
from .._core.validation import check_sample_weight, validate_X, validate_X_y
from .._backends.in_memory import IN_MEMORY
from .._maps.contract import FeatureMap
from .._maps.leverage import FOURIER_ROWS, POOL_ROWS
from .._maps.transformer import as_feature_map

#: Rows below which a ``gamma="scale"`` first block warns: its variance then
#: varies by more than about sqrt(2 / 1000) = 4.5% relative on one column.
SCALE_ROWS = 1000

_BINNING_PARTIAL_FIT = (
    "partial_fit is unavailable with features={features}(...): binning's vocabulary of occupied bins "
    "is learned from all the rows (a bin first seen in a later block would be a new column), so blocks "
    "cannot be merged. Use {name}.fit on all the rows, or a Dask array for data larger than memory."
)


_F = TypeVar("_F", bound=Callable[..., Any])


class _AvailableWithReason(_AvailableIfDescriptor):
    """scikit-learn's ``available_if`` whose AttributeError says why the method is absent.

    scikit-learn's descriptor raises ``This 'Ridge' has no attribute
    'partial_fit'`` and keeps the check's reason only as the exception's
    cause, which a traceback prints below the message and ``str(error)``
    omits; here the reason is in the message.  ``hasattr`` is False as before.
    """

    def _check(self, obj, owner):
        try:
            available = self.check(obj)
        except Exception as exc:
            raise AttributeError(f"This {owner.__name__!r} has no attribute {self.attribute_name!r}: {exc}") from exc
        if not available:
            raise AttributeError(f"This {owner.__name__!r} has no attribute {self.attribute_name!r}")


def available_with_reason(check: Callable[[Any], bool]) -> Callable[[_F], _F]:
    """``sklearn.utils.metaestimators.available_if`` with the check's ValueError message in the AttributeError.

    Parameters
    ----------
    check : callable
        ``check(estimator)``: True where the method works; raises (with the
        reason) where it does not.

    Returns
    -------
    decorator : callable
    """
    return lambda fn: _AvailableWithReason(fn, check, attribute_name=fn.__name__)  # type: ignore[return-value]


def partial_fit_works(est):
    """True where ``partial_fit`` works (``available_if``); raises a ValueError that says why where it does not.

    It merges Gram statistics and solves by Cholesky: not for ``solver="cg"``,
    not for sparse feature maps (binning).  The CV estimators have no
    ``partial_fit`` at all (they choose alpha on all the rows at once).
    """
    name = type(est).__name__
    if est.solver == "cg":
        raise ValueError(
            f"{name}.partial_fit solves from merged Gram statistics (Cholesky); "
            f"solver='cg' cannot be updated incrementally. Use solver='auto' or 'cholesky'."
        )
    fmap = as_feature_map(est.features)
    if fmap is not None and fmap.output_kind is OutputKind.CSR:
        raise ValueError(_BINNING_PARTIAL_FIT.format(name=name, features=type(fmap).__name__))
    return True


def first_block_check(name, features, n_rows):
    """Refuse or warn when a map drawn from the rows would be drawn from too small a first block.

    ``partial_fit`` fits the map on the first block only.  Nystroem's
    landmarks are rows of that block: fewer rows than ``n_components`` would
    cut the map's width for good, so that is a ValueError.  Leverage scores
    and ``gamma="scale"`` are estimated from the block: a block smaller than
    what ``fit`` reads (or than ``SCALE_ROWS`` rows for the variance) gives a
    noisier map than ``fit`` on all the rows would, so a ``UserWarning``.

    Parameters
    ----------
    name : str
        The estimator's class name, for messages.
    features : FeatureMap or None
    n_rows : int
        Rows of the first block.
    """
    if not isinstance(features, FeatureMap):
        return
    params = features.get_params(deep=False)
    fmap = type(features).__name__
    landmarks = params.get("landmarks")
    if isinstance(landmarks, str):
        m = int(params["n_components"])
        if n_rows < m:
            raise ValueError(
                f"{name}.partial_fit fits its features on the first block, and {fmap}(n_components={m}) draws its "
                f"{m} landmarks from that block's rows: a first block of {n_rows} rows would leave {n_rows} "
                f"landmarks for every later block. Give a first block of at least {m} rows, landmarks as an "
                f"array of rows, or fit on all the rows with {name}.fit."
            )
    reads = []
    if landmarks == "leverage":
        reads.append((max(POOL_ROWS, 20 * int(params["n_components"])), "its leverage scores"))
    if params.get("sampling") == "leverage":
        D = int(params["n_components"])
        n_freq = D if params.get("feature_map") == "cos" else (D + 1) // 2
        reads.append((max(FOURIER_ROWS, 2 * n_freq), "its frequencies' leverage scores"))
    if isinstance(params.get("gamma"), str) and params["gamma"] == "scale":
        reads.append((SCALE_ROWS, "gamma='scale' (the variance of X)"))
    for rows, what in reads:
        if n_rows < rows:
            warnings.warn(
                f"{name}.partial_fit fits {fmap} on the first block only, and {what} would read up to {rows} rows "
                f"in fit but read the {n_rows} of the first block: the map is noisier than fit's, and stays so "
                f"for every later block. Give a larger first block, a numeric gamma, or fit on all the rows.",
                UserWarning, stacklevel=4)


class PartialFitMixin:
    """``partial_fit`` machinery shared by Ridge and RidgeClassifier (exact, by merged statistics).

    The running statistics live in ``_statistics_`` (a ``RidgeStatistics``);
    its trailing underscore makes ``fit`` (``fit_context``) drop it, so a
    ``fit`` ends any accumulation and the next ``partial_fit`` starts anew.
    ``partial_fit`` is offered (scikit-learn's ``available_if``) only where it
    works: ``partial_fit_works``.
    """

    def _partial_fit_transaction(self, update):
        """Validate the parameters, run ``update(est)`` on a shadow, swap its state in (``params.transaction``).

        Blocks given to one estimator from several threads are merged one
        after the other (none lost); a block that fails leaves the estimator
        as it was; concurrent predictions see the model before or after a
        block.
        """
        self._validate_params()
        t0 = time.perf_counter()

        def run(shadow):
            update(shadow)
            # Progress as fit's verbose gives it: a line per block (blocks, rows so far, time).
            shadow._partial_blocks_ = vars(shadow).get("_partial_blocks_", 0) + 1
            stats = shadow._statistics_
            shadow._log(f"partial_fit block {shadow._partial_blocks_}: {stats.n_samples} rows so far "
                        f"({stats.n_features} features), {time.perf_counter() - t0:.2f} s")
            return shadow

        return transaction(self, run, drop_fitted=False)

    def _partial_validate(self, X, y, sample_weight):
        """Validate a block; on the first call fix n_features_in_ and the feature map."""
        first = vars(self).get("_statistics_") is None
        if first:
            X, y = validate_X_y(self, X, y, y_numeric=isinstance(self, RegressorMixin))
        else:
            # Later blocks: X must match the first block's width (and names).
            X = validate_X(self, X, reset=False)
            if sp.issparse(y):
                raise TypeError("A sparse y was passed, but the targets must be dense; use y.toarray().")
            y = check_array(y, ensure_2d=False, dtype=np.float64 if isinstance(self, RegressorMixin) else None,
                            input_name="y")
            check_consistent_length(X, y)
        if isinstance(self, ClassifierMixin) and y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)
        return first, X, y, check_sample_weight(sample_weight, X)

    def _partial_update(self, first, X, Y, sample_weight):
        """Merge the statistics of block (X, Y) into the running ones and re-solve; return the ``FitResult``."""
        if first:
            first_block_check(type(self).__name__, self.features, X.shape[0])
            features = None if self.features is None else clone(self._feature_map())
            if features is not None:
                features._fit_validated(X)
        else:
            features = vars(self).get("features_")
        stats = IN_MEMORY.block_statistics(features, X, Y, sample_weight, self.fit_intercept,
                                           effective_n_threads(self.n_jobs), self.chunk_size)
        if not first:
            if stats.centred != self._statistics_.centred:
                raise ValueError(
                    f"fit_intercept was {self._statistics_.centred} for the earlier partial_fit blocks and is "
                    f"{stats.centred} now (set_params changed it since the first block): the accumulated "
                    f"statistics hold the other model. Keep fit_intercept for every block, or start anew with fit "
                    f"or a fresh {type(self).__name__}."
                )
            if stats.n_targets != self._statistics_.n_targets:
                raise ValueError(
                    f"y has {stats.n_targets} target(s) in this partial_fit block but "
                    f"{self._statistics_.n_targets} in the earlier ones"
                )
            stats = self._statistics_.merge(stats)
        result = IN_MEMORY.solved(stats, self.alpha, type(self).__name__, features)
        self._statistics_ = stats
        return result
