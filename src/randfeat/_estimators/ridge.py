"""Ridge: ridge regression on (random) features, solved by Cholesky or conjugate gradient.

The estimator holds the parameters, encodes the targets (``targets.py``),
makes one call into the fit pipeline (``randfeat._solvers.pipeline``, run by
the backend ``randfeat._backends.for_input(X)`` picks: in memory or on
Dask workers) and stores the result (``base.py``).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._backends import for_input
from .._backends.in_memory import IN_MEMORY
from .._core.params import fit_context
from .._core.types import ArrayLike, MatrixLike, Predictions, Self
from .base import BaseRidge
from .partial import PartialFitMixin, available_with_reason, partial_fit_works
from .targets import RealTargets


class Ridge(RegressorMixin, PartialFitMixin, BaseRidge):
    """Kernel ridge regression at the cost of a linear model: ridge regression on random features.

    ``Ridge(features=RandomFourierFeatures(2000))`` approximates kernel ridge
    regression (with the RBF kernel) in O(N·D²) time and O(D²) memory,
    without ever holding the N × D features: they are made and added up a
    chunk of rows at a time.  It minimises ``Σ_i w_i (z_iᵀβ + b − y_i)² +
    alpha·‖β‖²`` with z_i the i-th row of ``features.transform(X)`` (of X
    itself without ``features``); the intercept b is not penalised.  To
    choose alpha and gamma, use :class:`RidgeCV`; the user guide's pages
    "Choosing a map" and "Solvers" say which map and solver for which data.

    Parameters
    ----------
    alpha : float, default=1.0
        Regularisation strength, >= 0.
    features : randfeat feature map or None, default=None
        E.g. ``RandomFourierFeatures(5000)`` or ``RandomBinningFeatures(50)``:
        cloned and fitted on X (``features_``).  Dense features are streamed
        (only their D × D Gram matrix is held); sparse ones (binning) are
        materialised as CSR and solved by CG.  None: X is the feature matrix.
    solver : {"auto", "cholesky", "cg"}, default="auto"
        ``"cholesky"``: the Gram matrix and its Cholesky factor (which
        ``predict(return_std=True)`` needs); ``"cg"``: preconditioned block
        conjugate gradient, never forming ZᵀZ, all targets in one Krylov
        space; ``"auto"``: Cholesky for dense features up to 10000 wide, CG
        otherwise.  The choice made is in ``solver_``.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept (the features are centred implicitly:
        sparse features stay sparse).
    tol : float, default=1e-6
        CG stops when every target's residual of the normal equations is at
        most ``tol`` times its right-hand side.  0 asks for an exact
        solution: CG stops at rounding level and, as scikit-learn's
        ``sparse_cg``, warns (``ConvergenceWarning``) that tol was not reached.
    max_iter : int or None, default=None
        CG's iteration limit; None: 10·D within [100, 10000].  Reaching it
        warns (``ConvergenceWarning``, with the residual reached).
    preconditioner : {"auto", "jacobi", "block", "nystrom"}, default="auto"
        CG's preconditioner; ``"auto"`` chooses from the features'
        structure (user guide, "Solvers"; also when CG runs in the dual).
    preconditioner_rank : int or None, default=None
        Rank of the ``"nystrom"`` preconditioner (at most the number of
        features); None: grown until its smallest eigenvalue is <= 10·alpha.
    preconditioner_memory : int, default=2**30
        Bytes the ``"nystrom"`` preconditioner may hold.
    chunk_size : int or None, default=None
        Rows per chunk of features; None: 64 MiB of features.
    verbose : int, default=0
        If > 0, print progress (chunks, CG iterations, time) on stderr.
    n_jobs : int or None, default=None
        Threads (None or -1: all cores).  Results do not depend on it.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_out,) or (n_targets, n_features_out)
        Weights on the features (on X's columns when ``features`` is None).
    intercept_ : float or ndarray of shape (n_targets,)
    n_iter_ : ndarray of shape (n_targets,) or None
        CG iterations (the targets iterate together); None for Cholesky (a
        direct solve, as scikit-learn's Ridge).
    relative_residual_ : ndarray of shape (n_targets,) or None
        CG's relative residual reached per target; None for Cholesky.
    solver_ : str
        Solver used: "cholesky" or "cg", or "cholesky-dual" / "cg-dual" when the
        system in N unknowns was solved (more features than rows; user guide, "Solvers").
    preconditioner_ : str or None
        CG's preconditioner; None for Cholesky.
    noise_variance_ : float, ndarray of shape (n_targets,), or None
        Estimated noise variance σ² = Σ w r² / (N − dof), dof the effective
        degrees of freedom (+1 for the intercept); Cholesky only.
    features_ : feature map
        The fitted clone of ``features`` (only when ``features`` is given).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has string column names.

    See Also
    --------
    RidgeCV : alpha (and gamma) chosen by leave-one-out, GCV or k-fold.
    RidgeClassifier : the same on ±1 targets, for classification.

    Notes
    -----
    The coefficients are the posterior mean of Bayesian linear regression in
    feature space with prior β ~ N(0, σ²/α·I) and noise variance σ², so
    ``predict(X, return_std=True)`` gives a Gaussian process's predictive
    standard deviation for the kernel (σ²/α)·k.  float32 data gives float32
    features, coefficients and predictions (sums, factor and solve in float64).

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RandomFourierFeatures, Ridge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, (500, 1)); y = np.sin(X[:, 0])
    >>> model = Ridge(alpha=1e-3, features=RandomFourierFeatures(200, random_state=0)).fit(X, y)
    >>> float(np.abs(model.predict([[1.0]]) - np.sin(1.0))[0]) < 0.01
    True
    >>> mean, std = model.predict([[1.0], [10.0]], return_std=True)  # far from the data: uncertain
    >>> bool(std[1] > 10 * std[0])
    True
    """

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: Optional[ArrayLike] = None) -> Self:
        """Fit the model.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights (w_i in the objective).

        Returns
        -------
        self : Ridge
        """
        backend = for_input(X)  # in memory, or row blocks on Dask workers
        X, y, sample_weight = backend.validate_fit(self, X, y, sample_weight, y_numeric=True)
        targets = RealTargets(y)
        self._store_fit(backend.fit_ridge(self._settings(), self._feature_map(), X, y, sample_weight, targets),
                        targets.shape)
        return self

    @available_with_reason(partial_fit_works)
    def partial_fit(self, X: MatrixLike, y: ArrayLike, sample_weight: Optional[ArrayLike] = None) -> Self:
        """Update the model with a block of rows (incremental learning on batches, as in scikit-learn).

        The first call fixes ``n_features_in_``, the number of targets, and,
        when ``features`` is given, the feature map: ``features`` is cloned
        and fitted on the first block, then kept for every later block.
        Each call adds the block's sufficient statistics (centred Gram
        matrix, cross-products, means; merged exactly, see ``_solvers/stats.py``) to
        those of the earlier blocks and solves again by Cholesky, so the
        model predicts after every call.

        What is exact: given that feature map, the model after any sequence
        of blocks equals the ridge solution on their concatenation (to
        rounding, ~1e-12 relative).  It equals ``fit`` on the concatenation
        when the map's draw reads only the input's width and dtype
        (``RandomFourierFeatures`` with a numeric gamma and ``'iid'``,
        ``'orthogonal'``, ``'qmc'``, ``'sorf'`` or ``'fastfood'`` sampling,
        ``RBFSampler``, ``SkewedChi2Sampler``, ``PolynomialCountSketch``,
        ``AdditiveChi2Sampler``, or no map).  A map whose draw reads rows is
        drawn from the first block alone and differs from ``fit``'s:
        ``Nystroem``'s landmarks are rows of the first block (a first block
        with fewer rows than ``n_components`` raises a ValueError rather
        than cut the map's width), leverage sampling scores the first
        block's rows, and ``gamma="scale"`` is the first block's; these warn
        when the first block is smaller than what ``fit`` would read.

        Sparse feature maps (binning) are refused: their vocabulary of
        occupied bins grows with the blocks and their CG solve needs every
        row, so use ``fit``.  ``alpha`` may change between calls (the
        statistics do not depend on it).  ``fit`` discards the accumulated
        statistics: a ``partial_fit`` after a ``fit`` starts anew.  With
        ``solver="cg"`` or a sparse feature map the method is absent
        (``hasattr(est, "partial_fit")`` is False), as scikit-learn offers
        ``partial_fit`` only where it works.  Memory: the D × D Gram matrix
        of the features, whatever the number of rows.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            The same number of targets in every block.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights; each block must have some positive weight.

        Returns
        -------
        self : Ridge
        """

        def update(est):
            first, Xv, yv, w = est._partial_validate(X, y, sample_weight)
            Y = np.asarray(yv, dtype=np.float64)
            y_shape = "1d" if Y.ndim == 1 else ("column" if Y.shape[1] == 1 else "2d")
            if not first and y_shape != est._partial_y_shape:
                raise ValueError(f"y is {y_shape} in this partial_fit block but {est._partial_y_shape} "
                                 f"in the first one; give y the same shape in every block")
            fit = est._partial_update(first, Xv, Y.reshape(Y.shape[0], -1), w)
            est._partial_y_shape = y_shape
            est._store_fit(fit, y_shape)

        return self._partial_fit_transaction(update)

    def predict(self, X: MatrixLike, return_std: bool = False) -> Predictions:
        """Predict with the fitted model.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the posterior predictive standard deviation of the
            latent function f(x) = z(x)ᵀβ + b (Bayesian reading in the class
            notes), **without** the noise term: like
            ``GaussianProcessRegressor`` with the noise given as its
            ``alpha``.  Add ``noise_variance_`` to its square for the
            predictive std of a new observation.  With an intercept, b has
            a flat prior, which adds σ²/Σw to the variance.  Needs the
            Cholesky factor (``solver_ == "cholesky"``); with several
            targets the factor is shared and the std has one column per
            target (σ² is estimated per target).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        y_std : ndarray, same shape as y_pred
            Only when ``return_std`` is True.
        """
        return self._on_rows(Ridge._predict, X, n_outputs=2 if return_std else 1, return_std=return_std)

    def _predict(self, X, return_std):
        """``predict`` of rows in memory."""
        if return_std:
            check_is_fitted(self, "coef_")
            if self._solution is None:
                raise ValueError(
                    f"return_std=True needs the Cholesky factor, but this model was fitted with "
                    f"solver_={self.solver_!r}. Fit with solver='cholesky' (dense features) to get "
                    f"predictive standard deviations."
                )
        X, out = self._decision(X)
        if self.coef_.ndim == 1:
            out = out[:, 0]
        if not return_std:
            return out
        return out, self._predictive_std(X, out.shape)

    def _predictive_std(self, X, shape):
        var = IN_MEMORY.predictive_variance(self._solution, vars(self).get("features_"), X, self.chunk_size,
                                            shape[1] if len(shape) == 2 else 1)
        std = np.sqrt(np.maximum(var, 0.0)).astype(self.coef_.dtype)
        return std[:, 0] if len(shape) == 1 else std.reshape(shape)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
