"""LogisticRegressionCV: logistic regression with C (and gamma) chosen by cross-validation, on features.

The estimator holds the parameters, encodes the labels, builds the
held-out scorer (scikit-learn's, applied to each fold's decision values),
makes one call into the backend (``select_logistic``:
``randfeat._solvers.logistic_path`` in memory, ``_backends.dask_logistic_cv``
on Dask) and stores the result with
scikit-learn's ``LogisticRegressionCV`` attribute shapes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from numbers import Integral, Real
from typing import Any, Optional, Union

import numpy as np
from sklearn.metrics import get_scorer, get_scorer_names, make_scorer
from sklearn.metrics._scorer import _BaseScorer
from sklearn.utils._param_validation import HasMethods, InvalidParameterError, StrOptions

from .._backends import for_input
from .._core.params import fit_context
from .._core.protocols import MapCapability
from .._core.types import ArrayLike, Float, MatrixLike, RandomState, Self, Transformer
from .._core.validation import N_JOBS, Interval
from .._maps.contract import FeatureMap
from .._maps.transformer import as_feature_map
from .._solvers.logistic import LOGISTIC_SOLVERS, LogisticSettings
from .._solvers.logistic_path import PathSettings
from .._solvers.selection import as_positive
from .logistic import LogisticRegression
from .targets import logistic_fit_input


class LogisticRegressionCV(LogisticRegression):
    """Kernel logistic regression with C (and the kernel width) chosen by cross-validation.

    ``LogisticRegressionCV(Cs=10, gammas="auto", features=RandomFourierFeatures(1000))``
    is scikit-learn's ``LogisticRegressionCV`` (L2 penalty) on the features
    of X, without ``make_pipeline``: for every fold of ``cv`` the model of
    :class:`LogisticRegression` is fitted on the training rows at each C of
    ``Cs`` (in the given order, each fit starting from the previous C's
    solution), the held-out rows are scored at each C by ``scoring``, and
    the C with the best sum of the folds' scores is refitted on all the
    rows (``refit=True``) or the folds' best models are averaged
    (``refit=False``).  Every name it shares with scikit-learn's means what
    it means there; the fitted attributes have scikit-learn's shapes (its
    ``use_legacy_attributes=True`` ones).  The map is fitted once on all of
    X (as in ``make_pipeline(map, LogisticRegressionCV())``), its features
    made once (per gamma) and held, so no fold and no C makes them again.

    Parameters
    ----------
    Cs : int or array-like of float, default=10
        The inverse regularisation strengths to try: an int n is
        ``np.logspace(-4, 4, n)`` (scikit-learn's grid), an array-like its
        values (finite, > 0), in its order.
    features : randfeat feature map, scikit-learn transformer or None, default=None
        As in :class:`LogisticRegression`: cloned and fitted on all of X
        (``features_``); None: X (dense or CSR) is the feature matrix.
    gammas : array-like of float, "auto" or None, default=None
        randfeat's extension: kernel widths to choose from as well (needs a
        map with a ``gamma``, ``MapCapability.KERNEL_WIDTH``).  Each gamma's
        map is the ``features`` map at that gamma (drawn once and rescaled
        when the map declares the gamma path, as in :class:`RidgeCV`); the
        gamma whose best mean score over the Cs is highest wins, and the
        fitted attributes are those of that gamma.  ``"auto"``: γ_med ·
        (0.1, 0.3, 1, 3, 10), γ_med from the median heuristic (as
        :class:`RidgeCV`).  None: the map's own gamma.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept per coefficient row.
    cv : int, cross-validation generator, iterable or None, default=None
        As scikit-learn's: None is 5 stratified folds, an int that many
        stratified folds (``StratifiedKFold``; more folds than the rows of
        every class is scikit-learn's ValueError), or a splitter or an
        iterable of (train, test) index pairs.
    scoring : str, callable or None, default=None
        How the held-out rows are scored: None is accuracy (weighted by the
        sample weights when ``fit`` has them), a scorer name (e.g.
        ``"neg_log_loss"``, called with ``labels=classes_`` where its metric
        takes them, as scikit-learn does), or a callable
        ``scorer(estimator, X, y)``.  randfeat's scorers receive a model of
        the fold at one C whose ``predict``, ``predict_proba``,
        ``predict_log_proba`` and ``decision_function`` give its values on
        the held-out rows, and as X those rows' decision values (the
        features are not made again per C).  ``score`` uses it too.
    solver : {"auto", "newton-cholesky", "lbfgs"}, default="auto"
        The solver of every fit, as in :class:`LogisticRegression`.
    tol : float, default=1e-4
        As in :class:`LogisticRegression` (scikit-learn's meaning).
    max_iter : int, default=100
        Iteration limit of each fit.
    class_weight : dict, "balanced" or None, default=None
        As scikit-learn's: multiplies the sample weights of the fits (not of
        the scores); ``"balanced"`` is computed once on all of y, with its
        sample weights.
    n_jobs : int or None, default=None
        Threads (None or -1: all cores): several folds at once when there are
        more threads than one fit uses.  Results do not depend on it.
    verbose : int, default=0
        If > 0, print each fold's time and the choice on stderr.
    refit : bool, default=True
        True: refit on all the rows at the C (and gamma) of the best sum of
        the folds' scores, starting from the mean of the folds' models there.
        False: ``coef_`` and ``intercept_`` are the mean of each fold's
        model at that fold's best C, and ``C_`` the mean of those Cs.
    random_state : int, RandomState instance or None, default=None
        Accepted for scikit-learn's signature; as there for its "lbfgs" and
        "newton-cholesky" solvers, it has no effect (the solvers are
        deterministic; ``cv``'s splitter has its own ``random_state``).
    chunk_size : int or None, default=None
        Rows per chunk of features while they are made; None: 64 MiB.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    Cs_ : ndarray of shape (n_Cs,)
        The Cs tried.
    C_ : ndarray of shape (1,) or (n_classes,)
        The chosen C (refit=False: the mean of the folds' best Cs), repeated
        n_classes times for more than two classes, as scikit-learn's.
    scores_ : dict
        ``{class: ndarray (n_folds, n_Cs)}``: the held-out score of each
        fold at each C; the key is ``classes_[1]`` for two classes, every
        class for more (the same scores for each).
    coefs_paths_ : dict
        ``{class: ndarray (n_folds, n_Cs, n_features_out + fit_intercept)}``:
        each fold's coefficients (the intercept last) at each C, as
        scikit-learn's.
    n_iter_ : ndarray of shape (1, n_folds, n_Cs)
        Iterations of each fold's fit at each C.
    coef_ : ndarray of shape (1, n_features_out) or (n_classes, n_features_out)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    features_ : feature map
        The fitted clone of ``features`` (at the chosen gamma).
    gamma_ : float
        The chosen gamma (only with ``gammas``).
    gammas_ : ndarray of shape (n_gammas,)
        The gammas tried (``"auto"`` resolved; only with ``gammas``).
    gamma_scores_ : ndarray of shape (n_gammas,)
        Each gamma's best mean score over the Cs (only with ``gammas``).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has string column names.

    See Also
    --------
    LogisticRegression : the model at a given C.
    RidgeClassifierCV : least squares, alpha chosen without refitting.

    Notes
    -----
    The held features take N × n_features_out values of X's float dtype
    (a MemoryError says so beforehand when they do not fit), plus a copy of
    one fold's rows per fold fitted at once.  Dask arrays are fitted where
    their blocks are: each block's features made once (per gamma) and held
    on its worker, a fold's training rows being the blocks with the
    held-out rows' weights set to 0, the C paths on the client, the
    held-out decision values brought back for scoring (the labels and
    sample weights are brought to the client for the folds and the
    scores); the same folds, scores and choice as in memory, the models
    to the solvers' tolerance; ``solver="newton-cg"`` and negative weights
    are refused there.  Not supported: penalties other than L2
    (``penalty``, ``l1_ratios``, ``dual``, ``intercept_scaling``), metadata
    routing of ``fit`` parameters to the splitter and the scorer.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import LogisticRegressionCV, RandomFourierFeatures
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 2)); y = (np.hypot(X[:, 0], X[:, 1]) > 1).astype(int)
    >>> clf = LogisticRegressionCV(Cs=5, features=RandomFourierFeatures(200, random_state=0)).fit(X, y)
    >>> clf.C_.shape, clf.scores_[1].shape, clf.coef_.shape
    ((1,), (5, 5), (1, 200))
    """

    _parameter_constraints: dict = {
        **{k: v for k, v in LogisticRegression._parameter_constraints.items() if k not in ("C", "warm_start")},
        "Cs": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "gammas": ["array-like", StrOptions({"auto"}), None],
        "cv": ["cv_object"],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "refit": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        Cs: Union[int, ArrayLike] = 10,
        features: FeatureMap | Transformer | None = None,
        gammas: Union[ArrayLike, str, None] = None,
        fit_intercept: bool = True,
        cv: Union[int, Iterable[Any], Any, None] = None,
        scoring: Union[str, Callable[..., Any], None] = None,
        solver: str = "auto",
        tol: Float = 1e-4,
        max_iter: int = 100,
        class_weight: Union[dict[Any, Float], str, None] = None,
        n_jobs: Optional[int] = None,
        verbose: int = 0,
        refit: bool = True,
        random_state: RandomState = None,
        chunk_size: Optional[int] = None,
    ) -> None:
        self.Cs = Cs
        self.features = features
        self.gammas = gammas
        self.fit_intercept = fit_intercept
        self.cv = cv
        self.scoring = scoring
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.class_weight = class_weight
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.refit = refit
        self.random_state = random_state
        self.chunk_size = chunk_size

    def _checked_Cs(self):
        """The grid as a float64 array: scikit-learn's logspace for an int, else finite values > 0."""
        if isinstance(self.Cs, Integral) and not isinstance(self.Cs, bool):
            return np.logspace(-4, 4, int(self.Cs))
        return as_positive("Cs", self.Cs)

    def _check_param_combinations(self):
        self._checked_Cs()
        if self.gammas is not None:
            fmap = as_feature_map(self.features)
            if fmap is None or not fmap.has(MapCapability.KERNEL_WIDTH):
                raise InvalidParameterError(
                    f"{type(self).__name__}(gammas=...) needs a feature map with a kernel width gamma "
                    f"(MapCapability.KERNEL_WIDTH), but features={self.features!r} has none: leave gammas=None, "
                    f"or use a map whose kernel has a width, e.g. RandomFourierFeatures(...) or Nystroem('rbf')."
                )
            if not (isinstance(self.gammas, str) and self.gammas == "auto"):
                as_positive("gammas", self.gammas)

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: Optional[ArrayLike] = None) -> Self:
        """Choose C (and gamma) by cross-validation and fit the model there.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels (at least two classes).
        sample_weight : array-like of shape (n_samples,), optional
            Finite weights: of the fits (times the class weights) and of
            the held-out scores, as scikit-learn's.  Negative weights are
            accepted as in :class:`LogisticRegression` (fitted by L-BFGS;
            refused on Dask arrays).

        Returns
        -------
        self : LogisticRegressionCV
        """
        owner = type(self).__name__
        backend = for_input(X)
        backend.check_logistic(owner)
        Cs = self._checked_Cs()
        X, y, sample_weight, targets, fit_weight, solver = logistic_fit_input(self, backend, X, y, sample_weight, Cs)
        classes = targets.classes
        scorer, held_out = _fold_scorer(self.scoring, classes), _HeldOut._of(classes)
        # The scores read the held-out rows' labels and sample weights here (one value per row; on Dask
        # brought from the workers once), beside their decision values.
        y_true, sample_weight = np.asarray(backend.on_client(y)), backend.on_client(sample_weight)
        if y_true.ndim == 2:  # a column vector (its warning given by the validation)
            y_true = y_true[:, 0]

        def score(F, test):
            params = {} if sample_weight is None else {"sample_weight": sample_weight[test]}
            if scorer is None:  # scikit-learn's default: the estimator's score, accuracy
                return held_out.score(F, y_true[test], **params)
            return scorer(held_out, F, y_true[test], **params)

        settings = PathSettings(
            fit=LogisticSettings(owner=owner, solver=solver, fit_intercept=self.fit_intercept,
                                 tol=float(self.tol), max_iter=int(self.max_iter), chunk_size=self.chunk_size,
                                 n_jobs=self.n_jobs, log=self._log if self.verbose else None),
            Cs=Cs, gammas=self.gammas, cv=self.cv, score=score, refit=self.refit)
        sel = backend.select_logistic(settings, self._feature_map(), X, y, fit_weight, targets)
        self._store(sel, settings.Cs, classes, X.dtype)
        return self

    def _store(self, sel, Cs, classes, dtype):
        """The fitted attributes, shaped as scikit-learn's LogisticRegressionCV's."""
        K = sel.coef.shape[0]
        keys = classes[1:] if len(classes) == 2 else classes
        self.classes_ = classes
        self.Cs_ = Cs
        self.C_ = np.full(len(keys), sel.C)
        self.scores_ = {c: sel.scores.copy() for c in keys}
        self.coefs_paths_ = {c: sel.coefs_paths[:, :, k if K > 1 else 0, :] for k, c in enumerate(keys)}
        self.n_iter_ = sel.n_iter[None]
        self.coef_ = sel.coef.astype(dtype)
        self.intercept_ = sel.intercept.astype(dtype)
        if sel.features is not None:
            self.features_ = sel.features
        if sel.gamma is not None:
            self.gamma_, self.gammas_, self.gamma_scores_ = sel.gamma, sel.gammas, sel.gamma_scores

    def score(self, X: MatrixLike, y: ArrayLike, sample_weight: Optional[ArrayLike] = None) -> float:
        """Score the model on (X, y) with ``scoring`` (None: accuracy), as scikit-learn's LogisticRegressionCV.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        score : float
        """
        scorer = get_scorer(self.scoring or "accuracy")
        params = {} if sample_weight is None else {"sample_weight": sample_weight}
        return float(scorer(self, X, y, **params))


def _fold_scorer(scoring, classes):
    """The scorer of held-out rows (None: accuracy), told every class as scikit-learn's LogisticRegressionCV does.

    A fold's held-out rows may lack a class: a metric that takes ``labels``
    gets ``labels=classes`` (and, for two classes, ``pos_label=classes[-1]``
    if it takes one), so that it scores against every class.
    """
    scorer = get_scorer(scoring)
    if not isinstance(scorer, _BaseScorer):  # None, or a plain callable: called as it is
        return scorer
    func = scorer._score_func
    parameters = inspect.signature(func).parameters
    if "labels" not in parameters:
        return scorer
    extra = {"labels": classes}
    if len(classes) == 2 and "pos_label" in parameters:
        extra["pos_label"] = classes[-1]
    return make_scorer(func, greater_is_better=scorer._sign == 1, response_method=scorer._response_method,
                       **extra, **scorer._kwargs)


class _HeldOut(LogisticRegression):
    """A fold's model at one C seen through its held-out decision values: its "X" is those values (n × K).

    Its probabilities and labels are :class:`LogisticRegression`'s, computed
    from the given decision values, so a scorer sees what the fold's model
    would predict on the held-out rows.
    """

    @classmethod
    def _of(cls, classes):
        model = cls()
        model.classes_ = classes
        K = 1 if len(classes) == 2 else len(classes)
        model.coef_, model.intercept_, model.n_features_in_ = np.zeros((K, 0)), np.zeros(K), K
        return model

    def _decision(self, X):
        return np.asarray(X, dtype=np.float64).reshape(X.shape[0], -1)
