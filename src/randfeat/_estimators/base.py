"""What Ridge, RidgeClassifier and their CV estimators share: parameters, the settings they hand the pipeline,
storing its result, and predicting from the fitted coefficients."""

from __future__ import annotations

import functools
import sys
from numbers import Integral, Real
from typing import Optional

from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._backends import for_input
from .._backends.in_memory import IN_MEMORY
from .._core.params import ValidatedParamsMixin
from .._core.threads import effective_n_threads
from .._core.types import Float, Transformer
from .._core.validation import N_JOBS, Interval, validate_X
from .._maps.contract import FeatureMap
from .._maps.transformer import as_feature_map
from .._solvers.nystrom_preconditioner import DEFAULT_MEMORY_BUDGET
from .._solvers.pipeline import SOLVERS, RidgeSettings
from .._solvers.precond import PRECONDITIONERS


#: scikit-learn's kernel approximations that randfeat offers under the same name and parameters.
class FeaturesParamMixin:
    """What every estimator with a ``features=`` parameter shares: its message, its map, its progress log (not public)."""

    def _invalid_message(self, name, value, message):
        # scikit-learn's sentence names the private base class; say what to pass instead, once.
        if name != "features":
            return super()._invalid_message(name, value, message)
        return (f"The 'features' parameter of {type(self).__name__} must be a randfeat feature map (e.g. "
                f"RandomFourierFeatures), a scikit-learn transformer (an object with fit and transform) or None. "
                f"Got {value!r} instead.")

    def _feature_map(self):
        """The ``features`` parameter as a feature map: a transformer wrapped (``as_feature_map``), or None."""
        return as_feature_map(self.features)

    def _log(self, msg):
        if self.verbose:
            print(f"[{type(self).__name__}] {msg}", file=sys.stderr, flush=True)


class BaseRidge(FeaturesParamMixin, ValidatedParamsMixin, BaseEstimator):
    """Shared parameters, fit bookkeeping and prediction of Ridge and RidgeClassifier (not public)."""

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left")],  # finite: inf is excluded
        "features": [FeatureMap, HasMethods(["fit", "transform"]), None],
        "solver": [StrOptions(set(SOLVERS))],
        "fit_intercept": ["boolean"],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "preconditioner": [StrOptions(set(PRECONDITIONERS))],
        "preconditioner_rank": [Interval(Integral, 1, None, closed="left"), None],
        "preconditioner_memory": [Interval(Integral, 1, None, closed="left")],
        "chunk_size": [Interval(Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
        "n_jobs": N_JOBS,
    }

    def __init__(
        self,
        alpha: Float = 1.0,
        *,
        features: FeatureMap | Transformer | None = None,
        solver: str = "auto",
        fit_intercept: bool = True,
        tol: Float = 1e-6,
        max_iter: Optional[int] = None,
        preconditioner: str = "auto",
        preconditioner_rank: Optional[int] = None,
        preconditioner_memory: int = DEFAULT_MEMORY_BUDGET,
        chunk_size: Optional[int] = None,
        verbose: int = 0,
        n_jobs: Optional[int] = None,
    ) -> None:
        self.alpha = alpha
        self.features = features
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.preconditioner = preconditioner
        self.preconditioner_rank = preconditioner_rank
        self.preconditioner_memory = preconditioner_memory
        self.chunk_size = chunk_size
        self.verbose = verbose
        self.n_jobs = n_jobs

    def _settings(self):
        """The ``RidgeSettings`` of this estimator's (validated) parameters."""
        return RidgeSettings(
            owner=type(self).__name__, alpha=float(self.alpha), solver=self.solver, fit_intercept=self.fit_intercept,
            tol=float(self.tol), max_iter=self.max_iter, preconditioner=self.preconditioner,
            preconditioner_rank=self.preconditioner_rank, preconditioner_memory=int(self.preconditioner_memory),
            chunk_size=self.chunk_size, n_jobs=self.n_jobs, log=self._log if self.verbose else None,
        )

    # --------------------------------------------------------------- storing
    def _store_fit(self, fit, y_shape):
        """Set the fitted attributes from a ``FitResult``.

        ``y_shape`` is how the targets were given: ``"1d"`` (one target as
        y of shape (n,)), ``"column"`` (one target as (n, 1)), ``"binary"``
        (a two-class RidgeClassifier: one ±1 column) or ``"2d"``.  The
        attributes' shapes follow scikit-learn's Ridge (>= 1.6) and
        RidgeClassifier (>= 1.9: binary coef_ of shape (n_features,),
        intercept_ of shape (1,)) for each.
        """
        self.solver_ = fit.solver
        self.n_iter_ = fit.n_iter
        self.relative_residual_ = fit.residual
        self.preconditioner_ = fit.preconditioner
        self._solution = fit.solution
        if fit.features is not None:
            self.features_ = fit.features
        elif "features_" in vars(self):
            del self.features_  # a refit without features= must not keep the old map
        one = y_shape != "2d"  # "1d", "column" and "binary": one row of coefficients
        self.coef_ = fit.coef[0] if one else fit.coef
        if not self.fit_intercept:
            self.intercept_ = 0.0  # as scikit-learn's Ridge and RidgeClassifier, whatever y's shape
        elif y_shape == "1d":
            self.intercept_ = fit.intercept[0]
        else:
            self.intercept_ = fit.intercept
        if fit.solution is None:
            self.noise_variance_ = None
        elif y_shape == "1d":
            self.noise_variance_ = float(fit.solution.noise_variance[0])
        else:
            self.noise_variance_ = fit.solution.noise_variance.copy()

    # ------------------------------------------------------------ prediction
    def _on_rows(self, method, X, n_outputs=1, **kwargs):
        """``method(model, X, **kwargs)`` on a snapshot of the fitted model: here, or lazily on Dask blocks.

        The snapshot (``_snapshot``) is one model from start to end whatever
        other threads fit meanwhile; ``method`` is an in-memory prediction
        of rows (a function of the class, so the snapshot travels to the
        workers with it).
        """
        model = self._snapshot()
        check_is_fitted(model, "coef_")
        fn = functools.partial(method, model, **kwargs)
        return for_input(X).map_rows(fn, X, model.n_features_in_, type(self).__name__, n_outputs=n_outputs)

    def _decision(self, X):
        """(validated X, decision values of shape (n_rows, n_targets)): in memory, on rows held here."""
        check_is_fitted(self, "coef_")
        X = validate_X(self, X, reset=False)
        self._runtime_params("chunk_size")
        coef = self.coef_.reshape(-1, self.coef_.shape[-1])
        out = IN_MEMORY.decision(vars(self).get("features_"), coef, self.intercept_, X, self.chunk_size,
                                 effective_n_threads(self.n_jobs))
        return X, out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
