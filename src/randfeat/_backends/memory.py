"""The in-memory backend: the pipeline run on arrays held by this process (NumPy arrays, SciPy sparse matrices)."""

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

from .._core.memory import check_memory
from .._core.input_stats import entry_mean_abs_deviation, entry_variance
from .._core.protocols import InputSummary
from .._core.validation import check_sample_weight, validate_X, validate_X_y
from .._solvers import plan, selection


class MemorySummary(InputSummary):
    """The ``InputSummary`` of a validated in-memory array (statistics computed on demand).

    Parameters
    ----------
    X : validated ndarray or CSR matrix
    """

    def __init__(self, X):
        self._X = X
        self.n_samples, self.n_features = X.shape

    @property
    def dtype(self):
        """X's float dtype."""
        return self._X.dtype

    def entry_variance(self):
        """Return ``(s, v)`` with the variance of X's entries s²·v (``entry_variance``)."""
        return entry_variance(self._X)

    def entry_mean_abs_deviation(self):
        """Return ``(s, m)`` with the mean absolute deviation of X's entries s·m."""
        return entry_mean_abs_deviation(self._X)

    def rows(self, index):
        """Return the rows ``index`` of X."""
        return self._X[np.asarray(index)]

    def min_value(self):
        """Return X's smallest entry (a CSR's implicit zeros included), with no per-column array."""
        X = self._X
        if not sp.issparse(X):
            return float(X.min()) if X.size else 0.0
        low = float(X.data.min()) if X.data.size else 0.0
        return min(low, 0.0) if X.data.size < X.shape[0] * X.shape[1] else low

    def column_range(self):
        """Return each column's (minimum, maximum), a CSR's implicit zeros included."""
        X = self._X
        check_memory(2 * X.shape[1] * X.dtype.itemsize, f"the range of each of {X.shape[1]} columns",
                     "use fewer columns")
        if sp.issparse(X):
            return X.min(axis=0).toarray().ravel(), X.max(axis=0).toarray().ravel()
        return X.min(axis=0), X.max(axis=0)


class InMemoryBackend:
    """Runs every step where the data are: in this process."""

    # ---------------------------------------------------------------- input
    def summary(self, X):
        """Return the ``InputSummary`` of validated X."""
        return MemorySummary(X)

    def validate_fit(self, est, X, y, sample_weight, *, y_numeric):
        """Validate (X, y, sample_weight) for ``est.fit``; records ``n_features_in_`` as scikit-learn does.

        Returns
        -------
        X, y, sample_weight : validated (sample_weight float64 or None)
        """
        X, y = validate_X_y(est, X, y, y_numeric=y_numeric)
        if not y_numeric and y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)  # a column vector is not a multilabel target
        return X, y, check_sample_weight(sample_weight, X)

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
        """Fit ridge: ``plan.fit`` on the encoded targets; return a ``FitResult``."""
        return plan.fit(settings, template, X, targets.encode(y), w)

    def check_selection(self, owner):
        """Selection runs in memory: nothing to refuse."""

    def select(self, settings, template, X, y, w, targets):
        """Choose (gamma,) alpha and fit there: ``selection.select``; return a ``Selection``."""
        Y = targets.encode(y)
        return selection.select(settings, template, X, Y, w, targets.scored(y, Y))

    def map_rows(self, fn, X, n_features, owner, *, n_outputs=1):
        """Return ``fn(X)``: a prediction computed here."""
        return fn(X)


IN_MEMORY = InMemoryBackend()
