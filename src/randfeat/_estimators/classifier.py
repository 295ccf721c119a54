"""RidgeClassifier: the least-squares classifier on ±1 targets, one-vs-rest, on (random) features."""

from __future__ import annotations

from typing import Any, Optional, Union

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets

from .._backends import for_input
from .._core.params import fit_context
from .._core.types import ArrayLike, Float, MatrixLike, Predictions, Self, Transformer
from .._maps.contract import FeatureMap
from .._solvers.nystrom_preconditioner import DEFAULT_MEMORY_BUDGET
from .base import BaseRidge
from .partial import PartialFitMixin, available_with_reason, partial_fit_works
from .targets import SignTargets


class _LeastSquaresClassifier(ClassifierMixin, BaseRidge):
    """Fit and prediction of RidgeClassifier and RidgeClassifierCV: least squares on ±1 targets (not public).

    ``partial_fit`` is added by ``RidgeClassifier`` alone (``PartialFitMixin``): the CV classifier
    chooses alpha on all the rows at once, so it has none by construction.
    """

    #: Pickles of randfeat 0.1.0 (before class_weight) load with the default.
    class_weight = None

    _parameter_constraints: dict = {
        **BaseRidge._parameter_constraints,
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }

    def __init__(
        self,
        alpha: Float = 1.0,
        *,
        features: FeatureMap | Transformer | None = None,
        class_weight: Union[dict[Any, Float], str, None] = None,
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
        super().__init__(
            alpha, features=features, solver=solver, fit_intercept=fit_intercept, tol=tol, max_iter=max_iter,
            preconditioner=preconditioner, preconditioner_rank=preconditioner_rank,
            preconditioner_memory=preconditioner_memory, chunk_size=chunk_size, verbose=verbose, n_jobs=n_jobs,
        )
        self.class_weight = class_weight

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: Optional[ArrayLike] = None) -> Self:
        """Fit one-vs-rest ridge regressions on ±1 targets.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) (or a label indicator matrix)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self : RidgeClassifier
        """
        backend = for_input(X)  # in memory, or row blocks on Dask workers
        X, y, sample_weight = backend.validate_fit(self, X, y, sample_weight, y_numeric=False)
        targets = SignTargets(backend.labels(y), type(self).__name__)
        sample_weight = backend.class_weighted(self.class_weight, y, sample_weight)
        fit = backend.fit_ridge(self._settings(), self._feature_map(), X, y, sample_weight, targets)
        self._label_binarizer = targets.binarizer
        self.classes_ = targets.classes
        self._store_fit(fit, targets.shape)
        return self

    def decision_function(self, X: MatrixLike) -> Predictions:
        """Return the ±1-regression scores.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
            Positive for the class (binary: for ``classes_[1]``).
        """
        return self._on_rows(_LeastSquaresClassifier._decision_function, X)

    def _decision_function(self, X):
        """``decision_function`` of rows in memory."""
        _, out = self._decision(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X: MatrixLike) -> Predictions:
        """Return the class with the highest score (binary: score > 0).

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        return self._on_rows(_LeastSquaresClassifier._predict, X)

    def _predict(self, X):
        """``predict`` of rows in memory."""
        scores = self._decision_function(X)
        if self._label_binarizer.y_type_.startswith("multilabel"):
            return self._label_binarizer.inverse_transform(np.where(scores > 0, 1, -1))
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags


class RidgeClassifier(PartialFitMixin, _LeastSquaresClassifier):
    """A kernel classifier at the cost of a linear one: least squares on ±1 targets, on random features.

    ``RidgeClassifier(features=RandomFourierFeatures(2000))`` is the
    "Fourier+LS" classifier of Rahimi & Recht (2007) and
    ``RidgeClassifier(features=RandomBinningFeatures(50))`` their
    "Binning+LS".  Each class gets a target column of +1 (its samples) and
    −1 (the others), all solved together (one shared Cholesky factor, or
    one CG pass per iteration for every class); two classes use one column.

    There is no ``predict_proba``: least-squares scores are not
    probabilities.  For calibrated probabilities wrap it:
    ``sklearn.calibration.CalibratedClassifierCV(RidgeClassifier(features=...))``
    (user guide, "Classification and probabilities"; on the Adult set:
    0.849 accuracy, log-loss 0.334).  To choose alpha and gamma, use
    :class:`RidgeClassifierCV`.

    Parameters
    ----------
    alpha, features, solver, fit_intercept, tol, max_iter : see Ridge
        As in :class:`randfeat.Ridge`.
    class_weight : dict, "balanced" or None, default=None
        As scikit-learn's ``RidgeClassifier``: weights ``{class_label:
        weight}`` that multiply the sample weights of each class's rows;
        ``"balanced"`` weighs a class by n_samples / (n_classes ·
        its count); None: all 1.  Works with any ``features`` (it is only
        sample weights).  ``partial_fit`` takes a dict, not ``"balanced"``
        (the counts are those of all the blocks).
    preconditioner, preconditioner_rank, preconditioner_memory, chunk_size, verbose, n_jobs : see Ridge
        As in :class:`randfeat.Ridge`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (n_features_out,) or (n_classes, n_features_out)
        One row of weights, 1-D, for two classes (as scikit-learn >= 1.9).
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : ndarray or None
        CG iterations per target column (the same for each: they iterate
        together); None for Cholesky.
    relative_residual_ : ndarray or None
    solver_ : str
        As :class:`Ridge`'s: "cholesky", "cg", "cholesky-dual" or "cg-dual".
    preconditioner_ : str or None
    features_ : feature map (only when ``features`` is given)
    n_features_in_ : int

    See Also
    --------
    RidgeClassifierCV : alpha (and gamma) chosen by leave-one-out or k-fold.
    sklearn.calibration.CalibratedClassifierCV : probabilities from its decision values.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RandomFourierFeatures, RidgeClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 2)); y = (np.hypot(X[:, 0], X[:, 1]) > 1).astype(int)  # a circle
    >>> clf = RidgeClassifier(alpha=1e-2, features=RandomFourierFeatures(300, random_state=0)).fit(X, y)
    >>> clf.predict([[0.0, 0.0], [2.0, 2.0]])
    array([0, 1])
    """

    @available_with_reason(partial_fit_works)
    def partial_fit(self, X: MatrixLike, y: ArrayLike, classes: Optional[ArrayLike] = None,
                    sample_weight: Optional[ArrayLike] = None) -> Self:
        """Update the classifier with a block of rows (incremental learning on batches, as in scikit-learn).

        As :meth:`randfeat.Ridge.partial_fit` (merged statistics, Cholesky
        re-solve after every block, binning refused), with the ±1 target
        columns of ``classes``.  The feature map is fitted on the first
        block and kept: given it, the model equals the ridge solution on
        the concatenated blocks; it equals ``fit`` on them only for maps
        whose draw reads no rows (not ``Nystroem``, leverage sampling or
        ``gamma="scale"``, which are drawn from the first block).

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Labels, each one of ``classes``.
        classes : array-like of shape (n_classes,), default=None
            Every class of the whole data, required on the first call (as in
            scikit-learn) since a block need not hold them all; later calls
            may omit it or repeat it unchanged.  At least 2 classes.  After
            ``fit`` it defaults to the fitted ``classes_``, but the
            accumulation starts anew: ``fit`` keeps no statistics.
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self : RidgeClassifier
        """

        def update(est):
            if isinstance(est.class_weight, str):  # scikit-learn's SGDClassifier refuses it there too
                raise ValueError(
                    "class_weight 'balanced' is not supported for partial_fit: the class counts are those of "
                    "all the blocks. Compute the weights once with sklearn.utils.class_weight.compute_class_weight"
                    "('balanced', classes=classes, y=y) (y a large enough sample of the whole target) and pass "
                    "them as class_weight={label: weight}, or use fit."
                )
            first = vars(est).get("_statistics_") is None
            if first:
                fitted = vars(est).get("_label_binarizer")
                if classes is None and fitted is not None and fitted.y_type_ in ("binary", "multiclass"):
                    classes_given = est.classes_  # after fit: the fitted classes, as scikit-learn
                else:
                    classes_given = classes
                if classes_given is None:
                    raise ValueError("classes must be passed on the first call to partial_fit "
                                     "(every class of the whole data; a block need not hold them all)")
                binarizer = LabelBinarizer(pos_label=1, neg_label=-1).fit(np.asarray(classes_given))
                if len(binarizer.classes_) < 2:
                    raise ValueError(f"classes must hold at least 2 classes, got {binarizer.classes_.tolist()!r}")
                if binarizer.y_type_ not in ("binary", "multiclass"):
                    raise ValueError(f"partial_fit needs classes as a 1-D array of labels, got {binarizer.y_type_}")
            else:
                binarizer = est._label_binarizer
                if classes is not None and not np.array_equal(np.unique(np.asarray(classes)), est.classes_):
                    raise ValueError(f"classes={np.unique(classes).tolist()!r} differs from the first call's "
                                     f"{est.classes_.tolist()!r}")
            _, Xv, yv, w = est._partial_validate(X, y, sample_weight)
            check_classification_targets(yv)
            if yv.ndim != 1:
                raise ValueError("partial_fit needs y as a 1-D array of labels (multilabel targets: use fit)")
            unknown = np.setdiff1d(yv, binarizer.classes_)
            if unknown.size:
                raise ValueError(f"y has labels {unknown[:5].tolist()!r} not in classes={binarizer.classes_.tolist()!r}")
            Y = np.asarray(binarizer.transform(yv), dtype=np.float64)
            if est.class_weight:
                by_class = compute_class_weight(est.class_weight, classes=binarizer.classes_, y=binarizer.classes_)
                cw = by_class[np.searchsorted(binarizer.classes_, yv)]
                w = cw if w is None else w * cw
            fit = est._partial_update(first, Xv, Y, w)
            est._label_binarizer = binarizer
            est.classes_ = binarizer.classes_
            est._store_fit(fit, "binary" if len(binarizer.classes_) == 2 else "2d")

        return self._partial_fit_transaction(update)
