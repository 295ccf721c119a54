"""Ridge: ridge regression on (random) features, solved by Cholesky or conjugate gradient.

The estimator holds the parameters, encodes the targets (``targets.py``),
makes one call into the fit pipeline (``randfeat._solvers.plan``, run by
the backend ``randfeat._backends.for_input(X)`` picks: in memory or on
Dask workers) and stores the result (``base.py``).
"""

import functools

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._backends import for_input
from .._core.params import fit_context
from .base import BaseRidge
from .partial import PartialFitMixin, partial_fit_works
from .targets import RealTargets


class Ridge(RegressorMixin, PartialFitMixin, BaseRidge):
    """Ridge regression on features, solved by Cholesky or conjugate gradient.

    Minimises ``Σ_i w_i (z_iᵀβ + b − y_i)² + alpha·‖β‖²`` where z_i is the
    i-th row of X, or of ``features.transform(X)`` when ``features`` is
    given.  The intercept b is not penalised.

    Parameters
    ----------
    alpha : float, default=1.0
        Regularisation strength, >= 0.
    features : randfeat feature map or None, default=None
        E.g. ``RandomFourierFeatures(5000)``.  It is cloned and fitted on X
        in ``fit`` (attribute ``features_``); X is then transformed a chunk
        of rows at a time, so the full feature matrix is never held when the
        features are dense (their Gram matrix is accumulated chunk by
        chunk).  Sparse features (binning) are materialised as CSR and
        solved by CG.  None: X itself is the feature matrix.
    solver : {"auto", "cholesky", "cg"}, default="auto"
        ``"cholesky"``: Gram matrix by syrk + Cholesky (dense Z; sparse Z is
        densified a chunk at a time).  ``"cg"``: preconditioned conjugate
        gradient, never forming ZᵀZ, the targets sharing one Krylov space
        (block CG: with many classes, several times fewer iterations than
        one CG per class); see ``preconditioner``.  On sparse Z whose rows
        repeat (at least a fifth of them: binning of integer or categorical
        data) CG solves the same problem on the distinct rows, each weighted
        by its total sample weight.  ``"auto"``: Cholesky for dense Z with at
        most 10000 columns, CG otherwise and for all sparse Z.  The choice
        made is in ``solver_``.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept (Z is centred implicitly: a sparse Z
        stays sparse).
    tol : float, default=1e-6
        CG stops when every target has ‖r‖ <= tol·‖Zᵀy‖ on the normal
        equations (0 means rounding level).  For float32 data, a tol below
        ~1e-6 may not be reachable.
    max_iter : int or None, default=None
        CG iteration limit; None means 10·D, clipped to [100, 10000].
        A ``ConvergenceWarning`` names the residual reached if it is hit.
    preconditioner : {"auto", "jacobi", "block", "nystrom"}, default="auto"
        CG's preconditioner.  "jacobi": the exact inverse of the block of
        the heaviest columns of ZᵀZ + alpha·I, its diagonal elsewhere;
        "block": the same block, one scale (1 / the largest remaining
        diagonal entry) elsewhere — on binning features up to 1.9× fewer
        iterations than "jacobi"; "nystrom": a randomized Nyström
        approximation of ZᵀZ (Frangella, Tropp & Udell, 2023), built once
        per fit for all targets, whose iteration count stays low as alpha
        falls (needs alpha > 0), but whose build and rank-r products cost
        more than they save on the problems measured (DESIGN.md, "Hard
        cases"); "auto": "block" on one-hot block features (binning),
        "jacobi" otherwise — and where that is a scaled identity (no block)
        and there are at most half as many rows as feature columns, CG on
        the dual (ZZᵀ + alpha·I, N × K iterates instead of D × K; reported
        in ``preconditioner_``).
    preconditioner_rank : int or None, default=None
        Rank of the Nyström preconditioner, at most the number of feature
        columns.  None: grown by doubling from 64 until its smallest kept
        eigenvalue is at most 10·alpha, within ``preconditioner_memory``.
    preconditioner_memory : int, default=2**30
        Bytes the Nyström build may hold (about 32·D·rank at its peak); an
        explicit rank that does not fit raises ``MemoryError`` before
        anything is allocated.
    chunk_size : int or None, default=None
        Rows per chunk for the Gram accumulation and for transforming with
        ``features``.  None: as many rows as fit in 64 MiB of features.
    verbose : int, default=0
        If > 0, print progress (chunks, CG iterations and residuals,
        elapsed time) on stderr.
    n_jobs : int or None, default=None
        Threads for the sparse kernels and BLAS (None or -1: all cores).
        Results do not depend on it.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_out,) or (n_targets, n_features_out)
        Weights on the features (on X's columns when ``features`` is None).
    intercept_ : float or ndarray of shape (n_targets,)
    n_iter_ : ndarray of shape (n_targets,) or None
        CG iterations (the targets iterate together, so the same number for
        each); None for Cholesky (a direct solve, as scikit-learn's Ridge).
    relative_residual_ : ndarray of shape (n_targets,) or None
        CG relative residual reached per target; None for Cholesky.
    solver_ : str
        Solver used ("cholesky" or "cg").
    preconditioner_ : str or None
        CG's preconditioner, e.g. "Jacobi" or "randomized Nyström, rank r
        (sketch ℓ)"; None for Cholesky.
    noise_variance_ : float, ndarray of shape (n_targets,), or None
        Estimated noise variance σ² = Σ w r² / (N − dof) with effective
        degrees of freedom dof = tr(Z_c (Z_cᵀWZ_c + αI)⁻¹ Z_cᵀ W) (+1 for
        the intercept).  Cholesky only (None for CG).
    features_ : feature map
        The fitted clone of ``features`` (only when ``features`` is given).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has string column names.

    Notes
    -----
    Bayesian reading: the coefficients are the posterior mean of Bayesian
    linear regression in feature space with prior β ~ N(0, σ²/α·I) and noise
    variance σ²; ``predict(X, return_std=True)`` returns its posterior
    predictive standard deviation.  With random Fourier features this is the
    Gaussian process with kernel (σ²/α)·k.

    Precision: float32 data gives float32 features, coefficients and
    predictions.  CG iterates are float32 with products and inner products
    accumulated in float64; the Cholesky path multiplies float32 chunks in
    float32 but sums them, factorises and solves in float64.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import Ridge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 3)); y = X @ [1.0, 2.0, 3.0]
    >>> Ridge(alpha=1e-3).fit(X, y).coef_.round(2)
    array([1., 2., 3.])
    """

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X, y, sample_weight=None):
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
        self._store_fit(backend.fit_ridge(self._settings(), self.features, X, y, sample_weight, targets),
                        targets.shape)
        return self

    @available_if(partial_fit_works)
    def partial_fit(self, X, y, sample_weight=None):
        """Update the model with a block of rows: exactly ``fit`` on all the blocks seen so far.

        Each call adds the block's sufficient statistics (centred Gram
        matrix, cross-products, means; merged exactly, see ``_stats.py``) to
        those of the earlier blocks and solves again by Cholesky, so the
        model predicts after every call and, after any sequence of blocks,
        equals ``fit`` on their concatenation (to rounding, ~1e-12
        relative).  Memory: the D × D Gram matrix of the features, whatever
        the number of rows.

        The first call fixes ``n_features_in_``, the number of targets, and,
        when ``features`` is given, the feature map: ``features`` is cloned
        and fitted on the first block (a Fourier map reads only its width
        and dtype; with ``gamma="scale"`` also its variance, so that gamma is
        the first block's).  Sparse feature maps (binning) are refused: their
        vocabulary of occupied bins grows with the blocks and their CG
        solve needs every row, so use ``fit``.  ``alpha`` may change between
        calls (the statistics do not depend on it).  ``fit`` discards the
        accumulated statistics: a ``partial_fit`` after a ``fit`` starts
        anew.  With ``solver="cg"`` or a sparse feature map the method is
        absent (``hasattr(est, "partial_fit")`` is False), as scikit-learn
        offers ``partial_fit`` only where it works.

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

    def predict(self, X, return_std=False):
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
        model = self._snapshot()  # one model from start to end, whatever other threads fit meanwhile
        check_is_fitted(model, "coef_")
        predict = functools.partial(model._predict, return_std=return_std)
        return for_input(X).map_rows(predict, X, model.n_features_in_, type(self).__name__,
                                     n_outputs=2 if return_std else 1)

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
        var = np.empty((X.shape[0], shape[1] if len(shape) == 2 else 1))
        for s, e, Zb in self._features_chunks(X):
            var[s:e] = self._solution.predictive_variance(Zb)
        std = np.sqrt(np.maximum(var, 0.0)).astype(self.coef_.dtype)
        return std[:, 0] if len(shape) == 1 else std.reshape(shape)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
