"""RidgeCV: ridge regression with alpha (and gamma) chosen without refitting, on features.

The estimator holds the parameters, encodes the targets, makes one call
into the selection engine (``randfeat._solvers.selection``, run by the
backend ``randfeat._backends.for_input(X)`` picks) and stores the result.
``RidgeClassifierCV`` (``classifier_cv.py``) shares ``RidgeCVMixin``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from numbers import Integral, Real
from typing import Any, Optional, Union

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, is_classifier
from sklearn.metrics import check_scoring, get_scorer_names
from sklearn.utils._param_validation import HasMethods, InvalidParameterError, StrOptions
from sklearn.utils import check_scalar

from .._backends import for_input
from .._core.params import fit_context
from .._core.types import ArrayLike, MatrixLike, Predictions, Self, Transformer
from .._core.validation import N_JOBS, Interval
from .._core.protocols import MapCapability
from .._maps.contract import FeatureMap
from .._maps.transformer import as_feature_map
from .._solvers.selection import SelectionSettings, as_positive
from .base import BaseRidge
from .targets import RealTargets


class RidgeCVMixin:
    """Shared parameters and closed-form selection of RidgeCV and RidgeClassifierCV."""

    _parameter_constraints: dict = {
        "alphas": ["array-like", Interval(Real, 0, None, closed="left")],  # 0: k-fold only (_checked_alphas)
        "features": [FeatureMap, HasMethods(["fit", "transform"]), None],
        "gammas": ["array-like", StrOptions({"auto"}), None],
        "cv": [None, StrOptions({"gcv"}), Interval(Integral, 2, None, closed="left"), "cv_object"],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "fit_intercept": ["boolean"],
        "alpha_per_target": ["boolean"],
        "store_cv_results": ["boolean"],
        "chunk_size": [Interval(Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
        "n_jobs": N_JOBS,
    }

    def __init__(
        self,
        alphas: ArrayLike = (0.1, 1.0, 10.0),
        *,
        features: FeatureMap | Transformer | None = None,
        gammas: Union[ArrayLike, str, None] = None,
        cv: Union[int, str, Iterable[Any], Any, None] = None,
        scoring: Union[str, Callable[..., Any], None] = None,
        fit_intercept: bool = True,
        alpha_per_target: bool = False,
        store_cv_results: bool = False,
        chunk_size: Optional[int] = None,
        verbose: int = 0,
        n_jobs: Optional[int] = None,
    ) -> None:
        self.alphas = alphas
        self.features = features
        self.gammas = gammas
        self.cv = cv
        self.scoring = scoring
        self.fit_intercept = fit_intercept
        self.alpha_per_target = alpha_per_target
        self.store_cv_results = store_cv_results
        self.chunk_size = chunk_size
        self.verbose = verbose
        self.n_jobs = n_jobs

    def _explain_invalid(self, name, value):
        if name == "cv":
            return (f"cv must be None (leave-one-out), 'gcv', a number of folds >= 2 or a scikit-learn "
                    f"splitter; got {value!r}.")
        return super()._explain_invalid(name, value)

    def _checked_alphas(self):
        """The alphas as a float64 array, checked as scikit-learn's RidgeCV checks them.

        Each must be a real number, > 0 for leave-one-out and GCV (their
        closed forms divide by alpha where an eigenvalue is 0) and >= 0 for
        k-fold; randfeat also requires them finite and at least one.
        """
        loo = self.cv is None or (isinstance(self.cv, str) and self.cv == "gcv")
        check = functools.partial(check_scalar, target_type=Real, min_val=0.0,
                                  include_boundaries="neither" if loo else "left")
        alphas = self.alphas
        try:  # scikit-learn's messages, as an InvalidParameterError (a ValueError and a TypeError)
            if isinstance(alphas, (np.ndarray, list, tuple)) and np.ndim(alphas) > 0:
                if len(alphas) == 1:
                    check(alphas[0], "alphas")
                for index, alpha in enumerate(alphas if len(alphas) > 1 else ()):
                    check(alpha, f"alphas[{index}]")
            elif isinstance(alphas, Real):
                check(alphas, "alphas")
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(str(exc)) from None
        a = np.asarray(alphas, dtype=np.float64).ravel()
        if a.size == 0:
            raise InvalidParameterError("alphas must contain at least one value, got an empty sequence")
        if not np.all(np.isfinite(a)):
            raise InvalidParameterError(f"alphas must be finite{' and > 0' if loo else ''}, got {a.tolist()}")
        return a

    def _check_param_combinations(self):
        self._checked_alphas()
        if self.gammas is not None:
            fmap = as_feature_map(self.features)
            if fmap is None or not fmap.has(MapCapability.KERNEL_WIDTH):
                raise InvalidParameterError(
                    f"{type(self).__name__}(gammas=...) needs a feature map with a kernel width gamma "
                    f"(MapCapability.KERNEL_WIDTH), but features={self.features!r} has no kernel width (every "
                    f"gamma would score the same, and the chosen one would mean nothing): leave gammas=None, or "
                    f"use a map whose kernel has a width, e.g. RandomFourierFeatures(...) or Nystroem('rbf')."
                )
            if not (isinstance(self.gammas, str) and self.gammas == "auto"):
                as_positive("gammas", self.gammas)
        if self.cv is not None and not (isinstance(self.cv, str) and self.cv == "gcv"):
            # k-fold fits a model per fold (scikit-learn's GridSearchCV): no leave-one-out values to
            # store, one alpha for all targets.  scikit-learn's messages and condition.
            if self.store_cv_results:
                raise InvalidParameterError(
                    "cv!=None and store_cv_results=True are incompatible: cv_results_ holds leave-one-out "
                    "(or GCV) values; use cv=None or cv='gcv' to store them.")
            if self.alpha_per_target:
                raise InvalidParameterError(
                    "cv!=None and alpha_per_target=True are incompatible: k-fold chooses one alpha for all "
                    "targets; use cv=None or cv='gcv' for an alpha per target.")
        if self.cv == "gcv" and self.scoring is not None:
            raise InvalidParameterError(
                f"{type(self).__name__}(cv='gcv') scores by generalised cross-validation, a squared-error "
                f"criterion; it cannot use scoring={self.scoring!r}. Use cv=None (leave-one-out) with a scorer."
            )

    def _selection_settings(self, score):
        """The ``SelectionSettings`` of this estimator's (validated) parameters; ``score`` scores predictions."""
        return SelectionSettings(
            owner=type(self).__name__, alphas=self._checked_alphas(), gammas=self.gammas, cv=self.cv,
            scoring=self.scoring, score=score, classifier=is_classifier(self),
            fit_intercept=self.fit_intercept, alpha_per_target=self.alpha_per_target,
            store_cv_results=self.store_cv_results, chunk_size=self.chunk_size, n_jobs=self.n_jobs,
            log=self._log if self.verbose else None,
        )

    def _store(self, sel, y_shape):
        """Set the fitted attributes from a ``Selection`` (shapes as scikit-learn's RidgeCV)."""
        dtype = np.float32 if sel.dtype == np.float32 else np.float64
        coef = sel.coef.astype(dtype)
        one = y_shape in ("1d", "column")
        self.alpha_ = sel.alpha
        self.best_score_ = sel.best_score
        self.coef_ = coef[0] if one else coef
        if not self.fit_intercept:
            self.intercept_ = 0.0
        elif y_shape == "1d":
            self.intercept_ = sel.intercept.astype(dtype)[0]  # a NumPy float, as scikit-learn's
        else:
            self.intercept_ = sel.intercept.astype(dtype)
        self._solution = None
        if sel.gamma is not None:
            self.gamma_, self.gammas_, self.gamma_scores_ = sel.gamma, sel.gammas, sel.gamma_scores
        if sel.features is not None:
            self.features_ = sel.features
        if self.store_cv_results:
            res = sel.results
            if self.cv == "gcv":
                self.cv_results_ = res[0] if y_shape == "1d" else res
            else:
                self.cv_results_ = res[:, 0, :] if y_shape == "1d" else res


class RidgeCV(RidgeCVMixin, RegressorMixin, BaseRidge):
    """Kernel ridge regression with alpha and gamma chosen for you, without refitting: RidgeCV on features.

    ``RidgeCV(alphas=np.logspace(-4, 2, 7), gammas="auto",
    features=RandomFourierFeatures(2000))`` chooses the regularisation and
    the kernel width and returns the model there.  With leave-one-out (the
    default) or GCV every alpha is scored from one eigendecomposition (of
    the features' D × D Gram matrix, streamed; of the N × N kernel matrix
    when there are fewer rows than features), by the closed forms of
    scikit-learn's ``RidgeCV``; the gammas share one draw of the map,
    rescaled.  With ``cv`` a number of folds or a splitter it means what
    scikit-learn's does (a fit per fold, the mean of the folds' scores).

    Parameters
    ----------
    alphas : array-like of float, default=(0.1, 1.0, 10.0)
        Regularisation strengths to try: > 0 for leave-one-out and GCV,
        >= 0 for k-fold (as scikit-learn), finite.
    features : randfeat feature map or None, default=None
        E.g. ``RandomFourierFeatures(2000)``: cloned and fitted on X
        (``features_``).  Dense features are streamed (never held whole);
        sparse ones (binning) are materialised, and past 10000 columns are
        selected by 5-fold CG fits (see ``cv``).  None: X is the feature matrix.
    gammas : array-like of float, "auto" or None, default=None
        Kernel widths to choose from (needs ``features`` with a ``gamma``).
        The map's random variables are drawn once and rescaled per gamma, so
        each gamma's features are bit-identical to a map fitted at that
        gamma alone; dense features make one pass over X for every gamma
        when their Gram matrices fit half the memory.  ``"auto"``:
        γ_med · (0.1, 0.3, 1, 3, 10), γ_med = 1 / the median pairwise squared
        Euclidean distance (L1 for the Laplacian kernel) among at most 1000
        rows drawn with seed 0.
    cv : None, "gcv", int >= 2 or a scikit-learn splitter, default=None
        None: exact leave-one-out for every alpha (for sparse features wider
        than 10000 columns: 5-fold scored like leave-one-out).  ``"gcv"``:
        generalised cross-validation from the eigenvalues alone.  An int or
        a splitter (stratified for the classifier): k-fold as scikit-learn's
        ``RidgeCV`` (its ``GridSearchCV``): a fit per fold for all alphas,
        each fold's held-out rows scored by ``scoring`` (weighted by their
        sample weights when the fit is), the mean over folds;
        ``best_score_`` is that mean.
    scoring : str, callable or None, default=None
        Leave-one-out: None is the negated mean of w_i·e_i² over the
        leave-one-out residuals (scikit-learn's convention), a scorer is
        applied to the leave-one-out predictions.  k-fold: None is the
        estimator's ``score`` (R²), as scikit-learn.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    alpha_per_target : bool, default=False
        With several targets, choose an alpha for each (leave-one-out and
        GCV only: with ``cv`` a number of folds or a splitter it raises a
        ``ValueError``, as scikit-learn's).
    store_cv_results : bool, default=False
        Keep ``cv_results_`` (leave-one-out and GCV only: with ``cv`` a
        number of folds or a splitter it raises a ``ValueError``, as
        scikit-learn's).
    chunk_size : int or None, default=None
        Rows per chunk of features (None: as many as fit in 64 MiB).
    verbose : int, default=0
        Print progress to stderr: each gamma's best alpha and score, each
        fold's fit time (k-fold), the selection time.
    n_jobs : int or None, default=None
        Threads.  Results do not depend on it.

    Attributes
    ----------
    alpha_ : float or ndarray of shape (n_targets,)
        The chosen alpha (per target with ``alpha_per_target``).
    best_score_ : float or ndarray of shape (n_targets,)
        Score of the chosen alpha (higher is better); with k-fold the mean
        of the folds' scores, as scikit-learn's.
    coef_ : ndarray of shape (n_features_out,) or (n_targets, n_features_out)
    intercept_ : float or ndarray of shape (n_targets,)
    cv_results_ : ndarray
        With ``store_cv_results``: shape (n_samples, n_alphas) for 1-d y,
        (n_samples, n_targets, n_alphas) otherwise, holding the weighted
        squared leave-one-out errors (``scoring=None``) or the leave-one-out
        predictions (a scorer); with ``cv="gcv"``, the GCV errors, shape
        (n_alphas,) or (n_targets, n_alphas).
    features_ : feature map
        The fitted clone of ``features`` (only when ``features`` is given),
        with the chosen gamma when ``gammas`` is given.
    gamma_ : float
        The chosen gamma (only with ``gammas``).
    gammas_ : ndarray of shape (n_gammas,)
        The gammas tried (resolves ``"auto"``; only with ``gammas``).
    gamma_scores_ : ndarray of shape (n_gammas,)
        Best score over the alphas at each gamma (mean over targets); the
        ``cv_results_`` kept are those of the chosen gamma.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has string column names.

    See Also
    --------
    Ridge : the model at a given alpha (and ``partial_fit``, Dask fits).

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RandomFourierFeatures, RidgeCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, (400, 2)); y = np.sin(X[:, 0]) * X[:, 1] + 0.1 * rng.standard_normal(400)
    >>> model = RidgeCV(alphas=np.logspace(-4, 1, 6), gammas="auto",
    ...                 features=RandomFourierFeatures(300, random_state=0)).fit(X, y)
    >>> bool(model.best_score_ > -0.05), model.gamma_ in model.gammas_
    (True, True)
    """

    _parameter_constraints = RidgeCVMixin._parameter_constraints

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: Optional[ArrayLike] = None) -> Self:
        """Choose alpha and fit the model at it.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights.

        Returns
        -------
        self : RidgeCV
        """
        backend = for_input(X)
        backend.check_selection(type(self).__name__)  # Dask: a clear error before anything is read
        X, y, sample_weight = backend.validate_fit(self, X, y, sample_weight, y_numeric=True)
        targets = RealTargets(y)
        settings = self._selection_settings(self._score_predictions)
        self._store(backend.select(settings, self._feature_map(), X, y, sample_weight, targets), targets.shape)
        return self

    def _score_predictions(self, pred, y_true, per_target, params):
        """Scores (A,) — (K, A) per target — of held-out predictions (N, K, A) by the scorer."""
        scorer = check_scoring(self, scoring=self.scoring)
        A = pred.shape[2]
        if per_target:
            return np.array([[scorer(_IdentityRegressor(), pred[:, k, i], y_true[:, k], **params) for i in range(A)]
                             for k in range(pred.shape[1])])
        squeeze = y_true.shape[1] == 1
        return np.array([scorer(_IdentityRegressor(), pred[:, 0, i] if squeeze else pred[:, :, i],
                                y_true[:, 0] if squeeze else y_true, **params) for i in range(A)])

    def predict(self, X: MatrixLike) -> Predictions:
        """Predict with the model fitted at the chosen alpha.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        return self._on_rows(RidgeCV._predict, X)

    def _predict(self, X):
        """``predict`` of rows in memory."""
        _, out = self._decision(X)
        return out[:, 0] if self.coef_.ndim == 1 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class _IdentityRegressor(RegressorMixin, BaseEstimator):
    """An already-"fitted" regressor whose predictions are its input (to score held-out predictions)."""

    def predict(self, X):
        return X
