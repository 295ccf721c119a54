"""RidgeClassifierCV: the ridge classifier with alpha (and gamma) chosen without refitting."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Optional, Union

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import check_scoring
from sklearn.utils._param_validation import InvalidParameterError, StrOptions

from .._backends import for_input
from .._core.params import fit_context
from .._core.types import ArrayLike, Float, MatrixLike, Self, Transformer
from .._maps.contract import FeatureMap
from .classifier import _LeastSquaresClassifier
from .ridge_cv import RidgeCVMixin
from .targets import SignTargets


class RidgeClassifierCV(RidgeCVMixin, _LeastSquaresClassifier):
    """A kernel classifier with alpha and gamma chosen for you: RidgeClassifier with RidgeCV's selection.

    ``RidgeClassifierCV(alphas=np.logspace(-4, 2, 7), gammas="auto",
    features=RandomFourierFeatures(2000))``: the least-squares classifier of
    :class:`RidgeClassifier` on ±1 target columns, with alpha (one for all
    columns) and gamma chosen as in :class:`RidgeCV`: leave-one-out by
    default, or k-fold as scikit-learn's ``RidgeClassifierCV`` (stratified
    folds, accuracy by default, the mean over folds).  No ``predict_proba``:
    see :class:`RidgeClassifier` for calibrated probabilities.

    Parameters
    ----------
    alphas, features, gammas, cv, fit_intercept, store_cv_results, chunk_size, verbose, n_jobs
        As in :class:`RidgeCV`.
    scoring : str, callable or None, default=None
        Leave-one-out: None is the negated mean squared leave-one-out error
        on the ±1 target columns (scikit-learn's convention), a scorer (e.g.
        ``"accuracy"``) is applied to the labels predicted from the
        leave-one-out decision values.  k-fold: None is accuracy, as
        scikit-learn.  Scorers of probabilities (``"neg_log_loss"``) are
        refused with a clear error: there are none.
    alpha_per_target : bool, default=False
        Must be False (a classifier's columns share one alpha); present so
        the signature matches :class:`RidgeCV`.
    class_weight : dict, "balanced" or None, default=None
        As in :class:`RidgeClassifier` (and scikit-learn's
        ``RidgeClassifierCV``): the class weights multiply the sample
        weights of the fit, and of the leave-one-out or k-fold scores.

    Attributes
    ----------
    alpha_ : float
    best_score_ : float
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (n_features_out,) or (n_classes, n_features_out)
        One row of weights, 1-D, for two classes (as scikit-learn's
        ``RidgeClassifierCV`` and, since scikit-learn 1.9, ``RidgeClassifier``).
    intercept_ : ndarray of shape (1,) or (n_classes,)
    cv_results_ : ndarray of shape (n_samples, n_targets, n_alphas)
        With ``store_cv_results`` (see :class:`RidgeCV`).
    features_ : feature map (only when ``features`` is given)
    gamma_, gammas_, gamma_scores_
        As in :class:`RidgeCV` (only with ``gammas``).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RandomFourierFeatures, RidgeClassifierCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 2)); y = (np.hypot(X[:, 0], X[:, 1]) > 1).astype(int)
    >>> clf = RidgeClassifierCV(alphas=[1e-3, 1e-1, 10.0], gammas="auto", cv=5,
    ...                         features=RandomFourierFeatures(300, random_state=0)).fit(X, y)
    >>> clf.coef_.shape, bool(clf.best_score_ > 0.9)
    ((300,), True)
    """

    #: Pickles of randfeat 0.1.0 (before class_weight) load with the default.
    class_weight = None

    _parameter_constraints: dict = {
        **RidgeCVMixin._parameter_constraints,
        "class_weight": [dict, StrOptions({"balanced"}), None],
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
        class_weight: Union[dict[Any, Float], str, None] = None,
        chunk_size: Optional[int] = None,
        verbose: int = 0,
        n_jobs: Optional[int] = None,
    ) -> None:
        super().__init__(
            alphas, features=features, gammas=gammas, cv=cv, scoring=scoring, fit_intercept=fit_intercept,
            alpha_per_target=alpha_per_target, store_cv_results=store_cv_results, chunk_size=chunk_size,
            verbose=verbose, n_jobs=n_jobs,
        )
        self.class_weight = class_weight

    def _check_param_combinations(self):
        super()._check_param_combinations()
        if self.alpha_per_target:
            raise InvalidParameterError(
                "RidgeClassifierCV chooses one alpha for all its target columns: alpha_per_target must be False."
            )

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: Optional[ArrayLike] = None) -> Self:
        """Choose alpha and fit one-vs-rest ridge regressions on ±1 targets at it.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self : RidgeClassifierCV
        """
        backend = for_input(X)
        backend.check_selection(type(self).__name__)  # Dask: a clear error before anything is read
        X, y, sample_weight = backend.validate_fit(self, X, y, sample_weight, y_numeric=False)
        targets = SignTargets(backend.labels(y), type(self).__name__)
        sample_weight = backend.class_weighted(self.class_weight, y, sample_weight)

        scorer = check_scoring(self, scoring=self.scoring)
        identity = _IdentityClassifier(targets.binarizer)

        def score(pred, y_true, per_target, params):
            try:
                return np.array([scorer(identity, pred[:, :, i], y_true, **params) for i in range(pred.shape[2])])
            except AttributeError as exc:  # a scorer of probabilities (neg_log_loss, brier, ...)
                raise ValueError(
                    f"RidgeClassifierCV(scoring={self.scoring!r}) needs class probabilities (predict_proba), "
                    f"which a least-squares classifier does not give: score labels or decision values "
                    f"instead (e.g. 'accuracy', 'balanced_accuracy', 'f1_macro', 'roc_auc'), or choose alpha "
                    f"on labels and wrap RidgeClassifier in sklearn.calibration.CalibratedClassifierCV for "
                    f"probabilities."
                ) from exc

        sel = backend.select(self._selection_settings(score), self._feature_map(), X, y, sample_weight, targets)
        self._label_binarizer = targets.binarizer
        self.classes_ = targets.classes
        # Shapes as scikit-learn's RidgeClassifierCV: a binary problem's one column is ravelled.
        self._store(sel, "column" if targets.n_targets == 1 else "2d")
        return self


class _IdentityClassifier(ClassifierMixin, BaseEstimator):
    """A classifier whose decision values are its input: held-out decision values scored as RidgeClassifier's.

    ``predict`` turns decision values into labels exactly as
    ``RidgeClassifier.predict`` does (multilabel targets included), so a
    scorer compares labels with labels.
    """

    def __init__(self, binarizer):
        self.binarizer = binarizer
        self.classes_ = binarizer.classes_

    def decision_function(self, X):
        return X[:, 0] if X.shape[1] == 1 else X

    def predict(self, X):
        if self.binarizer.y_type_.startswith("multilabel"):
            return self.binarizer.inverse_transform(np.where(X > 0, 1, -1))
        if X.shape[1] == 1:
            return self.classes_[(X[:, 0] > 0).astype(int)]
        return self.classes_[np.argmax(X, axis=1)]
