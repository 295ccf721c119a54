"""Executors of randfeat's one fit pipeline: in memory, or on the row blocks of a Dask array.

``for_input(X)`` picks the backend for an input (and is registered with
``randfeat._core.execution``, through which the feature maps below reach
it); estimators and feature maps make one call into it (``fit_map``, ``transform_map``, ``fit_ridge``,
``ridge_statistics``, ``select``, ``map_rows``) and get result objects back
(fitted-map states, ``RidgeStatistics``, ``FitResult``).  A backend imports
no estimator and sets no estimator attribute: it reaches a feature map only
through the feature-map contract (``randfeat._maps.contract``) and an
estimator only through what it is given (its parameters as a settings
object, its target encoding).  The one exception is scikit-learn's input
validation (``validate_data``), which records ``n_features_in_`` on the
estimator it validates for.

This package is the only place in randfeat that names Dask.  Importing
randfeat never imports dask: ``for_input`` looks for ``dask.array`` in
``sys.modules`` (an object cannot be a Dask array unless dask was imported
by its owner), and the Dask backend is imported only when one is seen.
"""

from .._core.execution import register_backend_chooser
from .dask_input import is_dask_array
from .in_memory import IN_MEMORY


def for_input(X):
    """Return the backend that executes the pipeline for input ``X``.

    Parameters
    ----------
    X : object
        The user's input (an array, a sparse matrix, a Dask array, ...).

    Returns
    -------
    backend : InMemoryBackend or DaskBackend
    """
    if is_dask_array(X):
        from .dask import DASK

        return DASK
    return IN_MEMORY


# Feature maps sit below the backends: their public fit/transform reach
# for_input through the registry in randfeat._core.execution.
register_backend_chooser(for_input)
