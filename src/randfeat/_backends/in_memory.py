"""The in-memory backend: the pipeline run on arrays held by this process (NumPy arrays, SciPy sparse matrices).

``MemorySummary`` (the ``InputSummary`` of an in-memory array) lives in
``randfeat._core.input_stats``, below the maps that read it.
"""

from typing import NamedTuple

import numpy as np
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, column_or_1d

from .._core.input_stats import MemorySummary
from .._core.validation import _ALLOW_ZERO_WEIGHTS, check_sample_weight, validate_X, validate_X_y
from .._linalg.products import row_products
from .._solvers import logistic, logistic_path, pipeline, selection


class WeightTotals(NamedTuple):
    """What a backend counted of a classifier's row weights (sample weights times class weights).

    ``total`` is Σ w (the row count without weights), ``any_nonzero``
    whether some w is not 0, ``n_negative`` how many are below 0; the
    estimators check them (``targets.check_weight_scale``) on any backend.
    """

    total: float
    any_nonzero: bool
    n_negative: int


class InMemoryBackend:
    """Runs every step where the data are: in this process."""

    # ---------------------------------------------------------------- input
    def summary(self, X):
        """Return the ``InputSummary`` of validated X."""
        return MemorySummary(X)

    def validate_fit(self, est, X, y, sample_weight, *, y_numeric, negative_weights=False):
        """Validate (X, y, sample_weight) for ``est.fit``; records ``n_features_in_`` as scikit-learn does.

        ``negative_weights``: accept negative sample weights (logistic
        regression, as scikit-learn's; their total is checked by the
        estimator), else refuse them (ridge).

        Returns
        -------
        X, y, sample_weight : validated (sample_weight float64 or None)
        """
        X, y = validate_X_y(est, X, y, y_numeric=y_numeric)
        if not y_numeric and y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)  # a column vector is not a multilabel target
        if negative_weights:
            if sample_weight is None:
                return X, y, None
            return X, y, _check_sample_weight(sample_weight, X, dtype=np.float64, **_ALLOW_ZERO_WEIGHTS)
        return X, y, check_sample_weight(sample_weight, X)

    def class_targets(self, make, y, sample_weight, owner, class_weight):
        """A probabilistic classifier's encoding of validated y, its rows' weights and their ``WeightTotals``.

        Parameters
        ----------
        make : callable
            The estimator's encoding, ``make(y, owner, class_weight)`` (``ClassTargets``), whose
            ``class_table`` gives the class weights from each class's total sample weight.
        y, sample_weight : validated (sample_weight may be None)
        owner : str
        class_weight : dict, "balanced" or None

        Returns
        -------
        targets, weights (ndarray or None), WeightTotals
        """
        targets = make(y, owner, class_weight)
        labels = targets.encode(y)
        counts = np.bincount(labels, minlength=targets.n_classes)
        sums = counts if sample_weight is None else np.bincount(labels, weights=sample_weight,
                                                                minlength=targets.n_classes)
        table = targets.class_table(class_weight, sums, counts, sample_weight is not None, owner)
        weights = sample_weight
        if table is not None:
            weights = table[labels] if sample_weight is None else sample_weight * table[labels]
        if weights is None:
            return targets, None, WeightTotals(float(len(labels)), len(labels) > 0, 0)
        return targets, weights, WeightTotals(float(np.sum(weights)), bool(np.any(weights)), int(np.sum(weights < 0)))

    def on_client(self, v):
        """Return v (an in-memory array, or None) as it is: it is already here."""
        return v

    def class_weighted(self, class_weight, y, sample_weight):
        """Return ``sample_weight`` times the weights of y's classes (scikit-learn's ``compute_sample_weight``)."""
        if not class_weight:  # None or {}: as scikit-learn's RidgeClassifier
            return sample_weight
        weights = compute_sample_weight(class_weight, y)
        return weights if sample_weight is None else sample_weight * weights

    def labels(self, y):
        """Return what a classifier's targets are made from: the sorted classes of 1-D y, or y itself (multilabel)."""
        check_classification_targets(y)
        return y if np.ndim(y) != 1 else np.unique(y)

    # --------------------------------------------------------- feature maps
    def fit_map(self, fmap, X, *, return_features):
        """Fit ``fmap`` on X: (state, features of X or None)."""
        X = validate_X(fmap, X, reset=True)
        state = fmap._draw(MemorySummary(X))
        return fmap._fit_rows(state, X, fmap._threads(), return_features)

    def transform_map(self, fmap, state, X):
        """Return the features of X under ``state``."""
        X = validate_X(fmap, X, reset=False)
        return fmap._transform_rows(state, X, fmap._threads())

    # ------------------------------------------------------------------ ridge
    def fit_ridge(self, settings, template, X, y, w, targets):
        """Fit ridge: ``pipeline.fit`` on the encoded targets; return a ``FitResult``."""
        return pipeline.fit(settings, template, X, targets.encode(y), w)

    # --------------------------------------------------------------- logistic
    def check_logistic(self, owner):
        """Logistic fits run in memory: nothing to refuse."""

    def fit_logistic(self, settings, template, X, y, w, targets):
        """Fit logistic regression: ``logistic.fit`` on y's class indices; return a ``LogisticResult``."""
        return logistic.fit(settings, template, X, targets.encode(y), targets.n_classes, w)

    def select_logistic(self, settings, template, X, y, w, targets):
        """Choose (gamma,) C for logistic regression: ``logistic_path.select``; return a ``PathSelection``."""
        return logistic_path.select(settings, template, X, targets.encode(y), targets.n_classes, w, y)

    def check_selection(self, owner):
        """Selection runs in memory: nothing to refuse."""

    def select(self, settings, template, X, y, w, targets):
        """Choose (gamma,) alpha and fit there: ``selection.select``; return a ``Selection``."""
        Y = targets.encode(y)
        return selection.select(settings, template, X, Y, w, targets.scored(y, Y))

    # ----------------------------------------------------- partial_fit, predict
    def block_statistics(self, features, X, Y, w, fit_intercept, n_threads, chunk_size):
        """The ``RidgeStatistics`` of one block of validated rows (``partial_fit``): ``pipeline.block_statistics``."""
        return pipeline.block_statistics(features, X, Y, w, fit_intercept, n_threads, chunk_size)

    def solved(self, statistics, alpha, owner, features):
        """Solve merged statistics by Cholesky; return the ``FitResult`` (``partial_fit``)."""
        return pipeline.cholesky_result(statistics.solve(float(alpha), owner=owner), features)

    def decision(self, features, coef, intercept, X, chunk_size, n_threads):
        """Return ``Z @ coef.T + intercept`` for validated rows X, Z made a chunk at a time.

        ``row_products`` is row-independent: a row's value has the same bits
        in any chunk, on any worker.
        """
        K = coef.shape[0]
        out = np.empty((X.shape[0], K), dtype=coef.dtype)
        for s, e, Zb in pipeline.feature_chunks(features, X, chunk_size):
            out[s:e] = row_products(Zb, coef.T, n_threads)
        out += np.asarray(intercept, dtype=out.dtype)  # scalar, (1,) or (K,): broadcasts
        return out

    def predictive_variance(self, solution, features, X, chunk_size, n_targets):
        """Return the predictive variance (n_rows, n_targets) of a Cholesky ``solution`` at validated rows X."""
        var = np.empty((X.shape[0], n_targets))
        for s, e, Zb in pipeline.feature_chunks(features, X, chunk_size):
            var[s:e] = solution.predictive_variance(Zb)
        return var

    def map_rows(self, fn, X, n_features, owner, *, n_outputs=1):
        """Return ``fn(X)``: a prediction computed here."""
        return fn(X)


IN_MEMORY = InMemoryBackend()
