"""LogisticRegression: L2-penalised logistic regression (binary and multinomial) on (random) features.

The estimator holds the parameters, encodes the labels as class indices
(``targets.ClassTargets``), makes one call into the backend
(``fit_logistic``: ``randfeat._solvers.logistic`` in memory) and stores the
``LogisticResult`` it gets back.
"""

from __future__ import annotations

import functools
from numbers import Integral, Real
from typing import Any, Optional, Union

import numpy as np
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._backends import for_input
from .._backends.in_memory import IN_MEMORY
from .._core.params import ValidatedParamsMixin, fit_context
from .._core.threads import effective_n_threads
from .._core.types import ArrayLike, Float, MatrixLike, Predictions, Self, Transformer
from .._core.validation import N_JOBS, Interval, validate_X
from .._maps.contract import FeatureMap
from .._solvers.logistic import LOGISTIC_SOLVERS, LogisticSettings
from .base import FeaturesParamMixin
from .targets import logistic_fit_input


class LogisticRegression(ClassifierMixin, FeaturesParamMixin, ValidatedParamsMixin, BaseEstimator):
    """Kernel logistic regression at the cost of a linear one: probabilities from random features.

    ``LogisticRegression(features=RandomFourierFeatures(2000))`` fits
    scikit-learn's L2-penalised ``LogisticRegression`` on the features of X
    without ``make_pipeline``: it minimises

        C · Σ_i w_i · loss_i + ½ ‖coef‖²

    (the intercept is not penalised), with the logistic loss for two classes
    (one row of coefficients) and the multinomial (softmax) loss for more
    (one row per class), exactly scikit-learn's objective: fitted on the
    same features, both find the same model.  Dense features are made a
    chunk of rows at a time, held when they fit 256 MB in float64; beyond,
    the first rows that fit 448 MB are held rounded to float32 and the
    others made again at each pass over the rows; binning's CSR features
    stay sparse (never copied nor densified).  Unlike :class:`RidgeClassifier` it gives probabilities
    (``predict_proba``) without a calibration step.

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularisation strength, > 0 (scikit-learn's C).
    features : randfeat feature map, scikit-learn transformer or None, default=None
        E.g. ``RandomFourierFeatures(2000)`` or ``RandomBinningFeatures(50)``:
        cloned and fitted on X (``features_``); a scikit-learn transformer
        is wrapped as :func:`randfeat.as_feature_map` does.  None: X (dense
        or CSR) is the feature matrix.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept per coefficient row.
    class_weight : dict, "balanced" or None, default=None
        As scikit-learn's: ``{class_label: weight}`` multiplies the sample
        weights of each class's rows (every key must be a class of y);
        ``"balanced"`` weighs a class by n_samples / (n_classes · its count).
    solver : {"auto", "newton-cholesky", "newton-cg", "lbfgs"}, default="auto"
        ``"newton-cholesky"``: Newton's method, the Hessian Zᵀ diag(s) Z
        (the full (K·P)² matrix for K coefficient rows of P =
        n_features_out + 1 entries: memory 8·(K·P)² bytes) summed over a
        systematic sample of the rows (all up to 8192, at least 4 per
        parameter; held once, float32 tiles for two classes) and factored;
        about one pass over the rows per iteration.
        ``"newton-cg"``: Newton's method whose step is solved by conjugate
        gradients with Hessian-vector products on a held sample of the
        same kind (all rows up to 16384), preconditioned by one P × P
        weighted Gram shared by the classes (memory 8·P² bytes whatever
        K); one pass per iteration.
        ``"lbfgs"``: scipy's L-BFGS-B, one pass over the rows per evaluation
        of the loss and its gradient (often a hundred), no matrix.
        ``"auto"``: for two classes ``"newton-cholesky"`` when its Hessian
        takes at most 256 MB (P <= 5792); for more classes ``"newton-cg"``
        when its P × P preconditioner does (the full multinomial Hessian
        would cost K³ times as much to sum); ``"lbfgs"`` otherwise.  The
        loss, gradient and stopping test always read every row in float64:
        every solver reaches the same optimum.  The solver used is in
        ``solver_``.
    max_iter : int, default=100
        Iteration limit of the solver (Newton steps or L-BFGS iterations).
    tol : float, default=1e-4
        As scikit-learn's: the solvers stop when the largest entry of the
        gradient of the objective divided by C·Σw is at most ``tol`` (and,
        for Newton, half the squared Newton decrement).
    warm_start : bool, default=False
        Start from the previous fit's coefficients when they have this
        fit's shape (same classes and number of features).
    chunk_size : int or None, default=None
        Rows per chunk of features; None: 64 MiB of features.
    verbose : int, default=0
        If > 0, print the solver's choice and progress on stderr.
    n_jobs : int or None, default=None
        Threads (None or -1: all cores).  Results do not depend on it.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features_out) or (n_classes, n_features_out)
        One row for two classes (the logit of ``classes_[1]``), one per
        class for more.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Zeros when ``fit_intercept`` is False.
    n_iter_ : ndarray of shape (1,)
        Iterations of the solver (as scikit-learn).
    solver_ : str
        The solver used ("newton-cholesky", "newton-cg" or "lbfgs").
    objective_ : float
        C · Σ w·loss + ½‖coef‖² at the solution.
    features_ : feature map
        The fitted clone of ``features`` (only when ``features`` is given).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has string column names.

    See Also
    --------
    RidgeClassifier : least squares on ±1 targets: faster, no probabilities.
    sklearn.linear_model.LogisticRegression : the same model on X itself.

    Notes
    -----
    Dask arrays (dense or CSR blocks) are fitted where their blocks are
    (the loss summed block by block on the workers, the solver on the
    client); predictions on them are lazy.  There, ``solver="auto"`` is
    newton-cholesky while its Hessian fits 256 MB (for several classes too),
    else lbfgs; ``"newton-cg"`` and negative sample weights are refused.
    Not supported: penalties other than L2.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import LogisticRegression, RandomFourierFeatures
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 2)); y = (np.hypot(X[:, 0], X[:, 1]) > 1).astype(int)  # a circle
    >>> clf = LogisticRegression(C=10, features=RandomFourierFeatures(300, random_state=0)).fit(X, y)
    >>> clf.predict([[0.0, 0.0], [2.0, 2.0]])
    array([0, 1])
    >>> clf.predict_proba([[0.0, 0.0]]).round(2).sum()
    np.float64(1.0)
    """

    _parameter_constraints: dict = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "features": [FeatureMap, HasMethods(["fit", "transform"]), None],
        "fit_intercept": ["boolean"],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "solver": [StrOptions(set(LOGISTIC_SOLVERS))],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "warm_start": ["boolean"],
        "chunk_size": [Interval(Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
        "n_jobs": N_JOBS,
    }

    def __init__(
        self,
        C: Float = 1.0,
        *,
        features: FeatureMap | Transformer | None = None,
        fit_intercept: bool = True,
        class_weight: Union[dict[Any, Float], str, None] = None,
        solver: str = "auto",
        max_iter: int = 100,
        tol: Float = 1e-4,
        warm_start: bool = False,
        chunk_size: Optional[int] = None,
        verbose: int = 0,
        n_jobs: Optional[int] = None,
    ) -> None:
        self.C = C
        self.features = features
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.chunk_size = chunk_size
        self.verbose = verbose
        self.n_jobs = n_jobs

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: Optional[ArrayLike] = None) -> Self:
        """Fit the model.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels (at least two classes).
        sample_weight : array-like of shape (n_samples,), optional
            Finite weights (w_i in the objective), multiplied by the class
            weights, summing to a positive total.  Negative weights are
            accepted as scikit-learn accepts them (the objective may then
            not be convex) and fitted by L-BFGS: ``solver="auto"`` picks
            it, ``"newton-cholesky"`` refuses them.

        Returns
        -------
        self : LogisticRegression
        """
        owner = type(self).__name__
        backend = for_input(X)
        backend.check_logistic(owner)
        X, y, _, targets, sample_weight, solver = logistic_fit_input(self, backend, X, y, sample_weight, [self.C])
        warm = vars(self).get("_warm")
        init = None
        if self.warm_start and warm is not None and np.array_equal(warm[0], targets.classes):
            init = warm[1:]
        settings = LogisticSettings(
            owner=owner, C=float(self.C), solver=solver, fit_intercept=self.fit_intercept, tol=float(self.tol),
            max_iter=int(self.max_iter), chunk_size=self.chunk_size, n_jobs=self.n_jobs,
            log=self._log if self.verbose else None, init=init,
        )
        fit = backend.fit_logistic(settings, self._feature_map(), X, y, sample_weight, targets)
        dtype = X.dtype
        self.classes_ = targets.classes
        self.coef_ = fit.coef.astype(dtype)
        self.intercept_ = fit.intercept.astype(dtype)
        self.n_iter_ = fit.n_iter
        self.solver_ = fit.solver
        self.objective_ = fit.objective
        if fit.features is not None:
            self.features_ = fit.features
        self._warm = (targets.classes, fit.coef, fit.intercept)
        return self

    # ------------------------------------------------------------ prediction
    def _on_rows(self, method, X):
        model = self._snapshot()
        check_is_fitted(model, "coef_")
        fn = functools.partial(method, model)
        return for_input(X).map_rows(fn, X, model.n_features_in_, type(self).__name__)

    def _decision(self, X):
        X = validate_X(self, X, reset=False)
        (chunk_size,) = self._runtime_params("chunk_size")
        return IN_MEMORY.decision(vars(self).get("features_"), self.coef_, self.intercept_, X, chunk_size,
                                  effective_n_threads(self.n_jobs))

    def _decision_function(self, X):
        out = self._decision(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def _log_proba(self, X):
        F = self._decision(X)
        if F.shape[1] == 1:  # log σ(−f), log σ(f): stable in float32 and float64
            return np.hstack([log_expit(-F), log_expit(F)])
        top = F.max(axis=1, keepdims=True)
        shifted = F - top
        return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

    def _proba(self, X):
        F = self._decision(X)
        if F.shape[1] == 1:
            p = expit(F)
            return np.hstack([1 - p, p])
        E = np.exp(F - F.max(axis=1, keepdims=True))
        return E / E.sum(axis=1, keepdims=True)

    def _predict(self, X):
        F = self._decision(X)
        index = (F[:, 0] > 0).astype(int) if F.shape[1] == 1 else np.argmax(F, axis=1)
        return self.classes_[index]

    def decision_function(self, X: MatrixLike) -> Predictions:
        """Return the logits (binary: of ``classes_[1]``).

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
        """
        return self._on_rows(LogisticRegression._decision_function, X)

    def predict(self, X: MatrixLike) -> Predictions:
        """Return the most probable class of each row.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        return self._on_rows(LogisticRegression._predict, X)

    def predict_proba(self, X: MatrixLike) -> Predictions:
        """Return the probability of each class (columns in the order of ``classes_``).

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            The sigmoid of the logit for two classes, the softmax for more.
        """
        return self._on_rows(LogisticRegression._proba, X)

    def predict_log_proba(self, X: MatrixLike) -> Predictions:
        """Return the log of each class's probability, computed without forming the probabilities.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        return self._on_rows(LogisticRegression._log_proba, X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


# ------------------------------------------------------------ validation
