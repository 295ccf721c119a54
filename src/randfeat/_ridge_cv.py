"""RidgeCV and RidgeClassifierCV: the regularisation chosen by efficient leave-one-out, in closed form.

For ridge with an unpenalised intercept, weights w and hat matrix H_α
(of the √w-scaled problem), the leave-one-out residual of row i is

    e_i(α) = r_i(α) / (1 − h_ii(α)),

r_i the ordinary residual of the fit on all rows (Golub, Heath & Wahba
1979; the closed form scikit-learn's ``RidgeCV`` uses).  One
eigendecomposition gives r and h for every α:

* **Gram path** (N >= D, or any streamed ``features=``): G = Z_cᵀWZ_c = VΛVᵀ
  from the streamed sufficient statistics (``_stats.py``, no N × D matrix
  held), u = Vᵀb.  Per α: β = V diag(1/(λ+α)) u; a second streaming pass
  forms P = Z_cV chunk by chunk and gives the fitted values P diag(1/(λ+α)) u
  and leverages h_ii = w_i(Σ_j P_ij²/(λ_j+α) + 1/Σw) for all α at once.
* **Kernel path** (materialised dense X with N < D, all weights > 0):
  K = Z̃_cZ̃_cᵀ = QΛQᵀ with Z̃_c = √W Z_c, whose direction √w (the intercept)
  has eigenvalue 0 exactly by construction; fitted values Q diag(λ/(λ+α)) Qᵀỹ
  and leverages Σ_j Q_ij² λ_j/(λ_j+α) + w_i/Σw.
* ``cv="gcv"``: generalised cross-validation, (RSS(α)/N) / (1 − dof(α)/N)²,
  from the eigenvalues and the statistics alone (no second pass).

Scores follow scikit-learn's ``RidgeCV``: with ``scoring=None`` the mean of
w_i·e_i² (negated), otherwise the scorer applied to the leave-one-out
predictions.
"""

import time
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral, Real

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.base import is_classifier
from sklearn.metrics import check_scoring, get_scorer_names
from sklearn.model_selection import check_cv
from sklearn.utils._param_validation import InvalidParameterError, StrOptions

from . import _dask
from ._base import RandomFeatureMap, fit_context
from ._dask import is_dask_array
from ._ridge import (CHOLESKY_MAX_FEATURES, DEFAULT_CHUNK_BYTES, RidgeClassifier, _BaseRidge, _default_chunk_rows,
                     _pm1_targets, _validate_Xy)
from ._cg import cg_ridge_path
from ._linops import make_products, row_products
from ._memory import available_memory
from ._rowmerge import merged_problem
from ._stats import StatisticsAccumulator
from ._threads import effective_n_threads, single_threaded_blas
from ._validation import N_JOBS, Interval


#: ``gammas="auto"``: the median heuristic's gamma times these factors.
AUTO_GAMMA_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
#: Rows (a fixed-seed subsample) on which the median pairwise distance is taken.
AUTO_GAMMA_ROWS = 1000


#: ``gammas`` with dense features: the per-gamma Gram matrices are accumulated
#: in one pass over X when together they need at most this fraction of the
#: available memory (else one pass per gamma).
JOINT_PASS_MEMORY_FRACTION = 0.5
#: Rows of a chunk taken at a time for its leave-one-out residuals
#: (``_loo_block``): temporaries of LOO_SUB_ROWS × D doubles.
LOO_SUB_ROWS = 1024

#: Relative residual at which the k-fold path's CG fits stop (``Ridge``'s default tol).
CV_TOL = 1e-6


def _as_positive(name, values):
    """Return ``values`` as a 1-d float64 array, or raise InvalidParameterError naming the problem."""
    try:
        a = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be positive numbers, got {values!r}") from None
    if a.size == 0:
        raise InvalidParameterError(f"{name} must contain at least one value, got an empty sequence")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise InvalidParameterError(f"{name} must be finite and > 0, got {a.tolist()}")
    return a


def _as_alphas(alphas):
    return _as_positive("alphas", alphas)


def _fmt(alpha):
    """An alpha (a float, or one per target) for a progress message."""
    return np.array2string(alpha, precision=6) if np.ndim(alpha) else f"{alpha:.6g}"


def median_heuristic_gamma(X, kernel):
    """Return 1 / median pairwise distance of rows of X (squared Euclidean; L1 for the Laplacian kernel).

    Taken on at most ``AUTO_GAMMA_ROWS`` rows drawn with a fixed seed (0),
    so the result depends on X only.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), validated
    kernel : str
        The feature map's kernel name.

    Returns
    -------
    gamma : float
    """
    from sklearn.metrics import pairwise_distances

    n = X.shape[0]
    rows = np.sort(np.random.default_rng(0).choice(n, size=min(n, AUTO_GAMMA_ROWS), replace=False))
    S = X[rows]
    if kernel == "laplacian":
        dist = pairwise_distances(S, metric="manhattan")
    else:
        dist = pairwise_distances(S, metric="sqeuclidean")
    med = np.median(dist[np.triu_indices(len(rows), 1)]) if len(rows) > 1 else 0.0
    return 1.0 / med if med > 0 else 1.0


class _Decomposition:
    """One eigendecomposition and what every α needs from it (see the module docstring)."""

    def __init__(self, *, kind, eigvals, basis, u, mean, y_mean, weight_sum, n_samples, yss, centred):
        self.kind = kind  # "gram" (basis V, D × D) or "kernel" (basis Q, N × N)
        self.eigvals = eigvals
        self.basis = basis
        self.u = u  # gram: Vᵀb (D × K); kernel: Qᵀỹ (N × K)
        self.mean = mean
        self.y_mean = y_mean
        self.weight_sum = weight_sum
        self.n_samples = n_samples
        self.yss = yss
        self.centred = centred
        self.Zt = None  # kernel path: √W Z_c, for the coefficients

    def coef(self, alpha_per_column):
        """Return β (K × D) with column k solved at ``alpha_per_column[k]``."""
        a = np.asarray(alpha_per_column)[None, :]
        lam = self.eigvals[:, None]
        if self.kind == "gram":
            return (self.basis @ (self.u / (lam + a))).T
        # Dual: β = Z̃ᵀ Q diag(1/(λ+α)) Qᵀỹ; the intercept direction (λ = 0) is not part of β.
        scale = np.where(lam > 0, 1.0 / (lam + a), 0.0)
        return (self.Zt.T @ (self.basis @ (self.u * scale))).T

    def gcv_errors(self, alphas):
        """Return the GCV mean squared error, shape (K, A)."""
        lam = self.eigvals[:, None]
        # RSS(α) = Σw(y−ȳ)² − Σ_j u_j² (λ_j + 2α)/(λ_j + α)²  (gram path, u = Vᵀb).
        f = (lam + 2 * alphas[None, :]) / (lam + alphas[None, :]) ** 2  # (D, A)
        rss = np.maximum(self.yss[:, None] - (self.u**2).T @ f, 0.0)
        dof = (lam / (lam + alphas[None, :])).sum(axis=0) + (1.0 if self.centred else 0.0)
        n = self.n_samples
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(dof < n, (rss / n) / (1.0 - dof / n) ** 2, np.inf)


class _LooScores:
    """Scores per alpha from leave-one-out residuals given block by block (rows in any order).

    ``scoring=None``: minus the mean of w_i·e_i² (scikit-learn's RidgeCV);
    a scorer: applied to the leave-one-out predictions once all rows are in;
    ``gcv``: the (K, A) GCV errors, no residuals needed.  ``finish`` returns
    (scores — (A,), or (K, A) per target —, what ``cv_results_`` stores).
    """

    def __init__(self, estimator, alphas, Y, w, sample_weight, y_true, per_target, gcv=None):
        self.estimator, self.Y, self.w = estimator, Y, w
        self.sample_weight, self.y_true, self.per_target = sample_weight, y_true, per_target
        self.gcv = gcv
        N, K = Y.shape
        A = alphas.size
        self.total = np.zeros((K, A))
        self.stored = None
        if gcv is None and estimator.scoring is not None:
            self.stored = np.empty((N, K, A))  # predictions, for the scorer
        elif gcv is None and estimator.store_cv_results:
            self.stored = np.empty((N, K, A))  # weighted squared errors

    def add(self, s, e, loo):
        """Take the residuals ``loo`` (e − s, K, A) of rows s..e."""
        if self.estimator.scoring is not None:
            self.stored[s:e] = self.Y[s:e, :, None] - loo
            return
        se = self.w[s:e, None, None] * loo**2
        self.total += se.sum(axis=0)
        if self.stored is not None:
            self.stored[s:e] = se

    def finish(self):
        """Return (scores, results)."""
        if self.gcv is not None:
            return (-self.gcv if self.per_target else -self.gcv.mean(axis=0)), self.gcv
        N, K = self.Y.shape
        if self.estimator.scoring is None:
            scores = -self.total / N if self.per_target else -self.total.sum(axis=0) / (N * K)
            return scores, self.stored
        # Weighted fits score with the weights, as scikit-learn's RidgeCV does.
        params = {} if self.sample_weight is None else {"sample_weight": self.w}
        return self.estimator._scores_with_scorer(self.stored, self.y_true, self.per_target, params), self.stored


class _RidgeCVMixin:
    """Shared parameters and closed-form selection of RidgeCV and RidgeClassifierCV."""

    _parameter_constraints: dict = {
        "alphas": ["array-like", Interval(Real, 0, None, closed="neither")],
        "features": [RandomFeatureMap, None],
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
        alphas=(0.1, 1.0, 10.0),
        *,
        features=None,
        gammas=None,
        cv=None,
        scoring=None,
        fit_intercept=True,
        alpha_per_target=False,
        store_cv_results=False,
        chunk_size=None,
        verbose=0,
        n_jobs=None,
    ):
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

    def _check_param_combinations(self):
        _as_alphas(self.alphas)
        if self.gammas is not None:
            if self.features is None or "gamma" not in self.features.get_params():
                raise InvalidParameterError(
                    f"{type(self).__name__}(gammas=...) needs a feature map with a gamma, e.g. "
                    f"features=RandomFourierFeatures(...); got features={self.features!r}."
                )
            if not (isinstance(self.gammas, str) and self.gammas == "auto"):
                _as_positive("gammas", self.gammas)
        if self.cv == "gcv" and self.scoring is not None:
            raise InvalidParameterError(
                f"{type(self).__name__}(cv='gcv') scores by generalised cross-validation, a squared-error "
                f"criterion; it cannot use scoring={self.scoring!r}. Use cv=None (leave-one-out) with a scorer."
            )

    # ------------------------------------------------------------ the data
    def _feature_source(self, X, template, fitted=None):
        """Fit a clone of ``template`` (or take ``fitted``); return (fitted map or None, materialised Z or None, D)."""
        if template is None and fitted is None:
            return None, X, X.shape[1]
        if fitted is not None:
            features = fitted
            if getattr(features, "_sparse_output", False):
                Z = features.transform(X)
                return features, sp.csr_matrix(Z), Z.shape[1]
            return features, None, int(features.n_features_out_)
        features = clone(template)
        if getattr(features, "_sparse_output", False):
            Z = features.fit_transform(X)
            return features, sp.csr_matrix(Z), Z.shape[1]
        features.fit(X)
        return features, None, int(features.n_features_out_)

    def _row_blocks(self, X, D):
        """Yield (start, stop, rows of X): chunks of ``chunk_size`` rows, or of 64 MiB of D features."""
        itemsize = 4 if X.dtype == np.float32 else 8
        step = self.chunk_size or _default_chunk_rows(D, itemsize)
        for s in range(0, X.shape[0], step):
            yield s, min(s + step, X.shape[0]), X[s : s + step]

    def _blocks(self, X, Z, features, D):
        """Yield (start, stop, dense Z block) over the rows (Z None: transform X chunk by chunk)."""
        for s, e, part in self._row_blocks(X if Z is None else Z, D):
            Zb = features.transform(part) if Z is None else part
            if sp.issparse(Zb):
                Zb = Zb.toarray()
            yield s, e, Zb

    # ---------------------------------------------------- decompositions
    def _gram_decomposition(self, blocks, Y, w, D, n_threads):
        acc = None
        for s, e, Zb in blocks:
            if acc is None:
                acc = StatisticsAccumulator(D, Y.shape[1], Zb.dtype, self.fit_intercept, n_threads)
            acc.add(Zb, Y[s:e], w[s:e])
        return self._eigen_of(acc.statistics())

    @staticmethod
    def _eigen_of(stats):
        """The gram-path decomposition of accumulated statistics."""
        with single_threaded_blas():  # eigh's result must not depend on the thread count
            lam, V = scipy.linalg.eigh(stats.gram(), check_finite=False)
        lam = np.maximum(lam, 0.0)
        # C order: every leave-one-out block multiplies by V (row_products would copy it each time).
        V = np.ascontiguousarray(V)
        return _Decomposition(kind="gram", eigvals=lam, basis=V, u=V.T @ stats.cross, mean=stats.mean,
                              y_mean=stats.y_mean, weight_sum=stats.weight_sum, n_samples=stats.n_samples,
                              yss=stats.y_sum_squares, centred=stats.centred)

    def _kernel_decomposition(self, Z, Y, w):
        Z = np.asarray(Z, dtype=np.float64)
        sw = w.sum()
        mean = (w @ Z) / sw if self.fit_intercept else np.zeros(Z.shape[1])
        y_mean = (w @ Y) / sw if self.fit_intercept else np.zeros(Y.shape[1])
        sqw = np.sqrt(w)
        Zt = sqw[:, None] * (Z - mean)
        yt = sqw[:, None] * (Y - y_mean)
        with single_threaded_blas():
            Kmat = Zt @ Zt.T
            lam, Q = scipy.linalg.eigh(Kmat, check_finite=False)
        lam = np.maximum(lam, 0.0)
        if self.fit_intercept:
            # √w is in the null space of Z̃_cZ̃_cᵀ; zero its eigenvalue exactly (rounding left ~1e-15·‖K‖).
            lam[np.argmax(np.abs(Q.T @ (sqw / np.linalg.norm(sqw))))] = 0.0
        dec = _Decomposition(kind="kernel", eigvals=lam, basis=Q, u=Q.T @ yt, mean=mean, y_mean=y_mean,
                             weight_sum=sw, n_samples=Z.shape[0], yss=(yt**2).sum(axis=0),
                             centred=self.fit_intercept)
        dec.Zt = Zt
        return dec

    def _loo_chunks(self, dec, alphas, blocks, Y, w):
        """Yield (start, stop, e) with e the leave-one-out residuals, shape (n, K, A), original scale."""
        lam = dec.eigvals[:, None]
        A = alphas.size
        base = 1.0 / dec.weight_sum if dec.centred else 0.0
        if dec.kind == "kernel":
            shrink = lam / (lam + alphas[None, :])  # (N, A)
            Q = dec.basis
            lev = (Q * Q) @ shrink + base * w[:, None]
            fitted = (Q @ (dec.u[:, :, None] * shrink[:, None, :]).reshape(Q.shape[1], -1)).reshape(len(w), -1, A)
            sqw = np.sqrt(w)[:, None, None]
            r = (Y - dec.y_mean)[:, :, None] - fitted / sqw
            yield 0, len(w), r / (1.0 - lev)[:, None, :]
            return
        n_threads = effective_n_threads(self.n_jobs)
        for s, e, Zb in blocks:
            yield s, e, self._loo_block(dec, alphas, Zb, Y[s:e], w[s:e], n_threads)

    @staticmethod
    def _loo_block(dec, alphas, Zb, Yb, wb, n_threads):
        """Gram path: the leave-one-out residuals (n, K, A) of one block of rows.

        The rows are taken ``LOO_SUB_ROWS`` at a time, so the N × D
        temporaries (Z_c, Z_c V, its squares) are a few MB, reused from
        malloc's heap, instead of fresh arrays of the chunk's size (whose
        first-touch page faults cost as much as the arithmetic here).  Every
        product is the row-independent one: a row's residuals do not depend
        on the rows around it or on the thread count.
        """
        lam = dec.eigvals[:, None]
        base = 1.0 / dec.weight_sum if dec.centred else 0.0
        inv = np.ascontiguousarray(1.0 / (lam + alphas[None, :]))  # (D, A)
        coef_by_alpha = np.ascontiguousarray((dec.u[:, :, None] * inv[:, None, :]).reshape(dec.u.shape[0], -1))
        n, K, A = Zb.shape[0], Yb.shape[1], alphas.size
        out = np.empty((n, K, A))
        for s in range(0, n, LOO_SUB_ROWS):
            e = min(n, s + LOO_SUB_ROWS)
            Zc = np.asarray(Zb[s:e], dtype=np.float64)
            Zc = Zc - dec.mean if dec.centred else Zc
            # Z_c V (the rows in the eigenbasis): the row-independent product,
            # threaded, the same bits for any thread count.
            P = row_products(Zc, dec.basis, n_threads)
            lev = wb[s:e, None] * (row_products(np.square(P), inv, n_threads) + base)
            fitted = row_products(P, coef_by_alpha, n_threads).reshape(e - s, K, A)
            np.subtract((Yb[s:e] - dec.y_mean)[:, :, None], fitted, out=out[s:e])
            out[s:e] /= (1.0 - lev)[:, None, :]
        return out

    # ------------------------------------------------------------ selection
    def _select(self, X, Y, sample_weight, y_true):
        """Choose (gamma,) alpha for targets Y (N × K); return the attributes to set (sets nothing on self).

        ``y_true`` is what a scorer compares predictions with (y as given;
        class labels for the classifier).  With ``gammas``, each gamma's map
        is the template with that gamma and the same ``random_state``; the
        gamma whose best score (mean over targets) is highest wins.
        """
        t0 = time.perf_counter()
        if self.gammas is None:
            sel = self._select_alpha(X, Y, sample_weight, y_true, self.features)
            sel["gamma"], sel["gamma_scores"], sel["gammas"] = None, None, None
            self._log(f"alpha={_fmt(sel['alpha'])} (score {np.mean(sel['best_score']):.6g}), "
                      f"selected in {time.perf_counter() - t0:.2f} s")
            return sel
        if isinstance(self.gammas, str):
            base = median_heuristic_gamma(X, self.features.get_params().get("kernel", "rbf"))
            gammas = base * np.asarray(AUTO_GAMMA_FACTORS)
        else:
            gammas = _as_positive("gammas", self.gammas)
        maps = self._maps_for_gammas(X, gammas)
        if self._joint_pass_fits(maps, X):
            sels = self._select_alpha_joint(X, Y, sample_weight, y_true, maps)
        else:
            sels = [self._select_alpha(X, Y, sample_weight, y_true, None, fitted=m) for m in maps]
        gamma_scores = np.array([float(np.mean(sel["best_score"])) for sel in sels])
        best = int(np.argmax(gamma_scores))  # first best
        sel = sels[best]
        for g, one, score in zip(gammas, sels, gamma_scores):
            self._log(f"gamma={g:.6g}: best alpha={_fmt(one['alpha'])}, score {score:.6g}")
        self._log(f"gamma={gammas[best]:.6g}, alpha={_fmt(sel['alpha'])} selected in "
                  f"{time.perf_counter() - t0:.2f} s")
        sel["gamma"], sel["gamma_scores"], sel["gammas"] = float(gammas[best]), gamma_scores, gammas
        return sel

    def _maps_for_gammas(self, X, gammas):
        """The template fitted at each gamma from one draw (a map with ``_fit_gamma_path``; else one fit each).

        A fit with the same ``random_state`` redraws the same unit variables,
        so either way each map equals a separate fit at its gamma.
        """
        template = clone(self.features)
        if hasattr(template, "_fit_gamma_path"):
            return template._fit_gamma_path(X, gammas)
        return [clone(template).set_params(gamma=float(g)).fit(X) for g in gammas]

    def _kernel_path_pays(self, N, D, dtype):
        """True if streamed leave-one-out should materialise Z for the kernel path: N < D, Z within one chunk."""
        itemsize = 4 if dtype == np.float32 else 8
        return self.cv is None and N < D and N * D * itemsize <= DEFAULT_CHUNK_BYTES

    def _joint_pass_fits(self, maps, X):
        """True if the gammas' Gram matrices are accumulated in one pass over X (see ``RidgeCV``).

        Needs dense (streamed) features, leave-one-out or GCV (not k-fold),
        not the kernel path (``_kernel_path_pays``: then each gamma's small
        N × N kernel is cheaper), and the n_gammas Gram accumulators within
        half the available memory.
        """
        if self.cv not in (None, "gcv") or any(getattr(m, "_sparse_output", False) for m in maps):
            return False
        D = int(maps[0].n_features_out_)
        if self._kernel_path_pays(X.shape[0], D, X.dtype):
            return False
        per_gram = D * D * (8 + (4 if X.dtype == np.float32 else 0))
        available, _ = available_memory()
        return available is None or len(maps) * per_gram <= JOINT_PASS_MEMORY_FRACTION * available

    def _select_alpha_joint(self, X, Y, sample_weight, y_true, maps):
        """``_select_alpha`` for every map at once: one pass over X for all Grams, one for all residuals."""
        alphas = _as_alphas(self.alphas)
        N, K = Y.shape
        n_threads = effective_n_threads(self.n_jobs)
        w = self._weights(N, sample_weight)
        D = int(maps[0].n_features_out_)
        accs = [None] * len(maps)
        for s, e, Xb in self._row_blocks(X, D):
            for g, m in enumerate(maps):
                Zb = m.transform(Xb)
                if accs[g] is None:
                    accs[g] = StatisticsAccumulator(D, K, Zb.dtype, self.fit_intercept, n_threads)
                accs[g].add(Zb, Y[s:e], w[s:e], owned=True)
        # One eigendecomposition per gamma, each on one BLAS thread (its bits
        # must not depend on the thread count), up to n_threads at once.
        stats = [acc.statistics() for acc in accs]
        del accs
        with ThreadPoolExecutor(max(1, min(n_threads, len(stats)))) as pool:
            decs = list(pool.map(self._eigen_of, stats))
        del stats
        scorers = [self._loo_scorer(dec, alphas, Y, w, sample_weight, y_true) for dec in decs]
        if self.cv != "gcv":
            for s, e, Xb in self._row_blocks(X, D):
                for m, dec, scorer in zip(maps, decs, scorers):
                    scorer.add(s, e, self._loo_block(dec, alphas, m.transform(Xb), Y[s:e], w[s:e], n_threads))
        return [self._alpha_choice(dec, alphas, *scorer.finish(), m, X.dtype)
                for m, dec, scorer in zip(maps, decs, scorers)]

    def _weights(self, N, sample_weight):
        w = np.ones(N) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if not w.sum() > 0:
            raise ValueError(f"{type(self).__name__} needs a positive total sample weight")
        return w

    def _select_alpha(self, X, Y, sample_weight, y_true, template, fitted=None):
        """Choose alpha for the features of ``template`` or the fitted map ``fitted`` (both None: X itself)."""
        alphas = _as_alphas(self.alphas)
        N, K = Y.shape
        n_threads = effective_n_threads(self.n_jobs)
        features, Z, D = self._feature_source(X, template, fitted)
        w = self._weights(N, sample_weight)
        wide_sparse = Z is not None and sp.issparse(Z) and D > CHOLESKY_MAX_FEATURES
        if self.cv not in (None, "gcv") or (wide_sparse and self.cv is None):
            pred = self._kfold_predictions(X, Z, features, D, Y, w, y_true, alphas, n_threads)
            return self._choose_from_predictions(
                pred, Y, w, sample_weight, y_true, alphas,
                lambda col_alpha: self._kfold_refit(X, Z, features, D, Y, w, col_alpha, n_threads),
                features, X.dtype if Z is None else Z.dtype)
        if wide_sparse:
            raise ValueError(
                f"{type(self).__name__}(cv='gcv') needs the D × D eigendecomposition; the sparse features "
                f"give D={D} > {CHOLESKY_MAX_FEATURES}. Use cv=None or a number of folds (conjugate-gradient "
                f"fits per fold), or fewer bins/grids."
            )
        if Z is None and self._kernel_path_pays(N, D, X.dtype) and np.all(w > 0):
            # Streamed features, but fewer rows than features and small: the
            # N × N kernel's eigendecomposition (N³) beats the D × D Gram's (D³).
            Z = features.transform(X)
        kernel = (Z is not None and not sp.issparse(Z) and N < D and self.cv is None and np.all(w > 0))
        if kernel:
            dec = self._kernel_decomposition(Z, Y, w)
        else:
            dec = self._gram_decomposition(self._blocks(X, Z, features, D), Y, w, D, n_threads)

        scorer = self._loo_scorer(dec, alphas, Y, w, sample_weight, y_true)
        if self.cv != "gcv":
            for s, e, loo in self._loo_chunks(dec, alphas, self._blocks(X, Z, features, D), Y, w):
                scorer.add(s, e, loo)
        return self._alpha_choice(dec, alphas, *scorer.finish(), features,
                                  X.dtype if Z is None or not hasattr(Z, "dtype") else Z.dtype)

    def _loo_scorer(self, dec, alphas, Y, w, sample_weight, y_true):
        """A ``_LooScores`` for this estimator's criterion (``cv='gcv'``: scores from ``dec`` alone)."""
        per_target = bool(self.alpha_per_target) and Y.shape[1] > 1
        if self.cv == "gcv":
            return _LooScores(self, alphas, Y, w, sample_weight, y_true, per_target, gcv=dec.gcv_errors(alphas))
        return _LooScores(self, alphas, Y, w, sample_weight, y_true, per_target)

    def _alpha_choice(self, dec, alphas, scores, results, features, dtype):
        """The best alpha (per target with ``alpha_per_target``) and the model there, as ``_select`` returns it."""
        K = dec.u.shape[1]
        if scores.ndim == 2:
            best = np.argmax(scores, axis=1)  # first best, like scikit-learn
            alpha = alphas[best]
            best_score = scores[np.arange(K), best]
        else:
            best = int(np.argmax(scores))
            alpha = float(alphas[best])
            best_score = float(scores[best])
        col_alpha = alpha if scores.ndim == 2 else np.full(K, alpha)
        coef = dec.coef(col_alpha)
        intercept = dec.y_mean - coef @ dec.mean if dec.centred else np.zeros(K)
        return dict(alpha=alpha, best_score=best_score, coef=coef, intercept=intercept, results=results,
                    features=features, dtype=dtype)

    # ------------------------------------------------------------ k-fold
    def _folds(self, N, y_true):
        """Return the (train, test) index pairs of ``cv`` (default 5 folds); every row tested once."""
        cv = check_cv(5 if self.cv is None else self.cv, y_true, classifier=is_classifier(self))
        folds = list(cv.split(np.zeros((N, 1)), y_true))
        tested = np.zeros(N, dtype=np.intp)
        for _, test in folds:
            tested[test] += 1
        if np.any(tested != 1):
            raise ValueError(
                f"{type(self).__name__}: cv={self.cv!r} must hold out every row exactly once (a K-fold "
                f"splitter such as KFold, StratifiedKFold or GroupKFold): the scores are computed on the "
                f"pooled held-out predictions."
            )
        return folds

    def _fold_fit(self, X, Z, features, D, Y, w, alphas, n_threads):
        """Fit on some rows for every alpha; return (coef (A, K, D), intercept (A, K))."""
        K = Y.shape[1]
        if Z is not None and sp.issparse(Z):
            Z, Y, w_cg, entries = merged_problem(Z, Y, None if np.all(w == 1) else w)
            ops = make_products(Z, n_threads, entries)
            try:
                results = cg_ridge_path(ops, Y, w_cg, alphas,
                                        fit_intercept=self.fit_intercept, tol=CV_TOL, max_iter=None)
            finally:
                ops.close()
            return (np.stack([r.coef.astype(np.float64) for r in results]),
                    np.stack([np.asarray(r.intercept, dtype=np.float64).reshape(K) for r in results]))
        dec = self._gram_decomposition(self._blocks(X, Z, features, D), Y, w, D, n_threads)
        coef = np.stack([dec.coef(np.full(K, a)) for a in alphas])
        intercept = (dec.y_mean - coef @ dec.mean) if dec.centred else np.zeros((len(alphas), K))
        return coef, intercept

    def _fold_predict(self, X, Z, features, D, coef, intercept):
        """Return the predictions (n, K, A) of the per-alpha models on some rows."""
        A, K, _ = coef.shape
        W = coef.reshape(A * K, -1).T  # (D, A·K)
        out = [np.asarray(Zb @ W, dtype=np.float64) for _, _, Zb in self._blocks(X, Z, features, D)]
        pred = np.concatenate(out, axis=0).reshape(-1, A, K) + intercept[None, :, :]
        return pred.transpose(0, 2, 1)

    def _kfold_predictions(self, X, Z, features, D, Y, w, y_true, alphas, n_threads):
        """Pooled held-out predictions (N, K, A): one fit per fold for all alphas (the warm-started
        CG path on sparse features, one eigendecomposition per fold on dense ones)."""
        N, K = Y.shape
        folds = self._folds(N, y_true)
        dense = not (Z is not None and sp.issparse(Z))
        if dense and self._fold_statistics_fit(D, len(folds), X if Z is None else Z):
            return self._kfold_predictions_merged(X, Z, features, D, Y, w, alphas, n_threads, folds)
        pred = np.empty((N, K, alphas.size))
        for k, (train, test) in enumerate(folds):
            t0 = time.perf_counter()
            Ztr = None if Z is None else Z[train]
            Zte = None if Z is None else Z[test]
            Xtr, Xte = (X[train], X[test]) if Z is None else (None, None)  # rows of X only when streamed
            coef, intercept = self._fold_fit(Xtr, Ztr, features, D, Y[train], w[train], alphas, n_threads)
            pred[test] = self._fold_predict(Xte, Zte, features, D, coef, intercept)
            self._log(f"fold {k + 1}/{len(folds)}: {alphas.size} alphas fitted in {time.perf_counter() - t0:.2f} s")
        return pred

    @staticmethod
    def _fold_statistics_fit(D, n_folds, source):
        """True if one D × D accumulator per fold fits half the available memory."""
        per_gram = D * D * (8 + (4 if source.dtype == np.float32 else 0))
        available, _ = available_memory()
        return available is None or n_folds * per_gram <= JOINT_PASS_MEMORY_FRACTION * available

    def _kfold_predictions_merged(self, X, Z, features, D, Y, w, alphas, n_threads, folds):
        """Dense features: ``_kfold_predictions`` from mergeable per-fold statistics.

        One pass over the rows adds each row to its test fold's statistics
        (features computed once, not once per fold); fold k's training
        statistics are the merge of the others' (``RidgeStatistics.merge``,
        exact, in fold order); a second pass predicts each row with its
        fold's models.  Equal to a fit per fold up to rounding.
        """
        N, K = Y.shape
        fold_of = np.empty(N, dtype=np.intp)
        for k, (_, test) in enumerate(folds):
            fold_of[test] = k
        accs = [None] * len(folds)
        for s, e, Zb in self._blocks(X, Z, features, D):
            for k in range(len(folds)):
                rows = np.flatnonzero(fold_of[s:e] == k)
                if rows.size == 0:
                    continue
                if accs[k] is None:
                    accs[k] = StatisticsAccumulator(D, K, Zb.dtype, self.fit_intercept, n_threads)
                accs[k].add(Zb[rows], Y[s + rows], w[s + rows], owned=True)
        stats = [acc.statistics() for acc in accs]
        models = []
        for k in range(len(folds)):
            train = None
            for j in range(len(folds)):
                if j != k:
                    train = stats[j] if train is None else train.merge(stats[j])
            dec = self._eigen_of(train)
            coef = np.stack([dec.coef(np.full(K, a)) for a in alphas])  # (A, K, D)
            intercept = (dec.y_mean - coef @ dec.mean) if dec.centred else np.zeros((len(alphas), K))
            models.append((coef.reshape(len(alphas) * K, D).T, intercept))
        pred = np.empty((N, K, alphas.size))
        for s, e, Zb in self._blocks(X, Z, features, D):
            for k, (W, intercept) in enumerate(models):
                rows = np.flatnonzero(fold_of[s:e] == k)
                if rows.size:
                    p = np.asarray(Zb[rows] @ W, dtype=np.float64).reshape(rows.size, alphas.size, K)
                    pred[s + rows] = (p + intercept[None, :, :]).transpose(0, 2, 1)
        return pred

    def _kfold_refit(self, X, Z, features, D, Y, w, col_alpha, n_threads):
        """The model on all rows at the chosen alpha(s): (coef (K, D), intercept (K,))."""
        K = Y.shape[1]
        col_alpha = np.asarray(col_alpha, dtype=np.float64)
        coef, intercept = np.empty((K, D)), np.empty(K)
        for a in np.unique(col_alpha):
            cols = np.flatnonzero(col_alpha == a)
            c, i = self._fold_fit(X, Z, features, D, Y[:, cols], w, np.array([a]), n_threads)
            coef[cols], intercept[cols] = c[0], i[0]
        return coef, intercept

    def _choose_from_predictions(self, pred, Y, w, sample_weight, y_true, alphas, refit, features, dtype):
        """Score pooled held-out predictions (N, K, A) as the leave-one-out path does; refit at the best."""
        N, K, A = pred.shape
        per_target = bool(self.alpha_per_target) and K > 1
        if self.scoring is None:
            se = w[:, None, None] * (Y[:, :, None] - pred) ** 2
            total = se.sum(axis=0)
            scores = -total / N if per_target else -total.sum(axis=0) / (N * K)
            results = se
        else:
            params = {} if sample_weight is None else {"sample_weight": w}
            scores = self._scores_with_scorer(pred, y_true, per_target, params)
            results = pred
        if per_target:
            best = np.argmax(scores, axis=1)
            alpha, best_score = alphas[best], scores[np.arange(K), best]
        else:
            best = int(np.argmax(scores))
            alpha, best_score = float(alphas[best]), float(scores[best])
        coef, intercept = refit(alpha if per_target else np.full(K, alpha))
        return dict(alpha=alpha, best_score=best_score, coef=coef, intercept=intercept if self.fit_intercept
                    else np.zeros(K), results=results, features=features, dtype=dtype)

    def _store(self, sel, y_shape):
        """Set the fitted attributes from ``_select``'s result (shapes as scikit-learn's RidgeCV)."""
        dtype = np.float32 if sel["dtype"] == np.float32 else np.float64
        coef = sel["coef"].astype(dtype)
        one = y_shape in ("1d", "column")
        self.alpha_ = sel["alpha"]
        self.best_score_ = sel["best_score"]
        self.coef_ = coef[0] if one else coef
        if not self.fit_intercept:
            self.intercept_ = 0.0
        elif y_shape == "1d":
            self.intercept_ = float(sel["intercept"][0])
        else:
            self.intercept_ = sel["intercept"].astype(dtype)
        self._solution = None
        for name in ("gamma_", "gammas_", "gamma_scores_"):
            if hasattr(self, name):
                delattr(self, name)
        if sel["gamma"] is not None:
            self.gamma_, self.gammas_, self.gamma_scores_ = sel["gamma"], sel["gammas"], sel["gamma_scores"]
        if sel["features"] is not None:
            self.features_ = sel["features"]
        elif hasattr(self, "features_"):
            del self.features_
        if hasattr(self, "cv_results_"):
            del self.cv_results_
        if self.store_cv_results:
            res = sel["results"]
            if self.cv == "gcv":
                self.cv_results_ = res[0] if y_shape == "1d" else res
            else:
                self.cv_results_ = res[:, 0, :] if y_shape == "1d" else res


class RidgeCV(_RidgeCVMixin, RegressorMixin, _BaseRidge):
    """Ridge regression with alpha chosen by efficient leave-one-out (or GCV), on features.

    Every alpha is scored from one eigendecomposition — of the D × D
    centred weighted Gram matrix of the features, or of the N × N kernel
    matrix when X is a materialised dense matrix with fewer rows than
    columns — by the closed forms of scikit-learn's ``RidgeCV``; the model
    is then the ridge solution at the chosen alpha.

    Parameters
    ----------
    alphas : array-like of float, default=(0.1, 1.0, 10.0)
        Regularisation strengths to try, each finite and > 0.
    features : randfeat feature map or None, default=None
        E.g. ``RandomFourierFeatures(2000)``: cloned and fitted on X
        (``features_``).  Dense features are streamed: the Gram matrix is
        accumulated chunk by chunk and the leverages come from a second
        streaming pass, so the N × D matrix is never held.  Sparse features
        (binning) are materialised: up to 10000 columns they are densified
        a chunk at a time for leave-one-out; wider ones are selected by
        k-fold CG fits (see ``cv``).  None: X is the feature matrix.
    gammas : array-like of float, "auto" or None, default=None
        Kernel widths to choose from (needs ``features`` with a ``gamma``).
        The map's random variables are drawn once (its ``random_state``) and
        rescaled per gamma by the kernel's own scaling, so each gamma's
        features are bit-identical to a map fitted on its own at that gamma;
        alpha is chosen for each as above and the gamma with the best score
        wins (``gamma_``, ``features_``).  Dense (Fourier) features with
        leave-one-out or GCV: the n_gammas Gram matrices are accumulated in
        a single pass over X (and the leverages in a second, none for GCV)
        when together they fit half the available memory (n_gammas · D² ·
        8 bytes, 12 for float32 X); otherwise each gamma makes its own
        passes.  Either way each block of X is transformed once per gamma.
        ``"auto"``: γ_med · (0.1, 0.3, 1, 3, 10), γ_med = 1 / the median
        pairwise squared Euclidean distance (L1 distance for the Laplacian
        kernel) among at most 1000 rows drawn with seed 0.
    cv : None, "gcv", int >= 2 or a scikit-learn splitter, default=None
        None: exact leave-one-out for every alpha — except for sparse
        features wider than 10000 columns (binning), where it means 5-fold.
        ``"gcv"``: generalised cross-validation (RSS/N)/(1 − dof/N)², from
        the eigenvalues and the sufficient statistics alone (no second pass
        over the data).  An int or a splitter (``KFold``; stratified for
        the classifier, as ``check_cv``): k-fold, one fit per fold for all
        alphas — on sparse features the alpha path from large to small
        with warm starts and one preconditioner build (``cg_ridge_path``,
        tol 1e-6), on dense features one eigendecomposition per fold (a
        pass over the fold's rows each).  Every row must be held out exactly
        once; the scores are those of the pooled held-out predictions (as
        for leave-one-out), and the model is refitted on all rows.
    scoring : str, callable or None, default=None
        None: negated mean of w_i·e_i² over the leave-one-out residuals e
        (scikit-learn's convention).  Otherwise a scikit-learn scorer name
        or callable, applied to the leave-one-out predictions.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    alpha_per_target : bool, default=False
        With several targets, choose an alpha for each.
    store_cv_results : bool, default=False
        Keep ``cv_results_``.
    chunk_size : int or None, default=None
        Rows per chunk of features (None: as many as fit in 64 MiB).
    verbose : int, default=0
        Print progress to stderr: each gamma's best alpha and score, each
        fold's fit time (k-fold), the selection time.
    n_jobs : int or None, default=None
        Threads for the Gram accumulation.  Results do not depend on it.

    Attributes
    ----------
    alpha_ : float or ndarray of shape (n_targets,)
        The chosen alpha (per target with ``alpha_per_target``).
    best_score_ : float or ndarray of shape (n_targets,)
        Score of the chosen alpha (higher is better).
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

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RidgeCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 3)); y = X @ [1.0, 2.0, 3.0] + 0.1 * rng.standard_normal(100)
    >>> model = RidgeCV(alphas=[1e-3, 1e-1, 10.0]).fit(X, y)
    >>> model.alpha_, model.coef_.round(1)
    (0.001, array([1., 2., 3.]))
    """

    _parameter_constraints = _RidgeCVMixin._parameter_constraints

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X, y, sample_weight=None):
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
        _refuse_dask(self, X)
        X, y, sample_weight = _validate_Xy(self, X, y, sample_weight)
        Y = np.asarray(y, dtype=np.float64)
        y_shape = "1d" if Y.ndim == 1 else ("column" if Y.shape[1] == 1 else "2d")
        Y = Y.reshape(Y.shape[0], -1)
        self._store(self._select(X, Y, sample_weight, Y), y_shape)
        return self

    def _scores_with_scorer(self, pred, y_true, per_target, params):
        scorer = check_scoring(self, scoring=self.scoring)
        A = pred.shape[2]
        if per_target:
            return np.array([[scorer(_IdentityRegressor(), pred[:, k, i], y_true[:, k], **params) for i in range(A)]
                             for k in range(pred.shape[1])])
        squeeze = y_true.shape[1] == 1
        return np.array([scorer(_IdentityRegressor(), pred[:, 0, i] if squeeze else pred[:, :, i],
                                y_true[:, 0] if squeeze else y_true, **params) for i in range(A)])

    def predict(self, X):
        """Predict with the model fitted at the chosen alpha.

        Parameters
        ----------
        X : {array-like, CSR matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        if is_dask_array(X):  # lazy, block by block on the workers
            return _dask.predict_blocks(self, X, "predict")
        _, out = self._decision(X)
        return out[:, 0] if self.coef_.ndim == 1 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class RidgeClassifierCV(_RidgeCVMixin, RidgeClassifier):
    """Ridge classifier (±1 targets, one-vs-rest) with alpha chosen by efficient leave-one-out.

    The regression on the ±1 target columns of :class:`RidgeClassifier`,
    with alpha chosen as in :class:`RidgeCV` (all columns share one alpha).

    Parameters
    ----------
    alphas, features, gammas, cv, fit_intercept, store_cv_results, chunk_size, verbose, n_jobs
        As in :class:`RidgeCV`.
    scoring : str, callable or None, default=None
        None: negated mean squared leave-one-out error on the ±1 target
        columns (scikit-learn's convention).  Otherwise a scorer (e.g.
        ``"accuracy"``) applied to the classes predicted from the
        leave-one-out decision values.
    alpha_per_target : bool, default=False
        Must be False (a classifier's columns share one alpha); present so
        the signature matches :class:`RidgeCV`.

    Attributes
    ----------
    alpha_ : float
    best_score_ : float
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (n_features_out,) (two classes) or (n_classes, n_features_out)
        As scikit-learn's ``RidgeClassifierCV`` (``RidgeClassifier`` keeps
        (1, n_features_out) for two classes).
    intercept_ : float or ndarray of shape (1,) or (n_classes,)
    cv_results_ : ndarray of shape (n_samples, n_targets, n_alphas)
        With ``store_cv_results`` (see :class:`RidgeCV`).
    features_ : feature map (only when ``features`` is given)
    gamma_, gammas_, gamma_scores_
        As in :class:`RidgeCV` (only with ``gammas``).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RidgeClassifierCV
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0], [0.5], [2.5]]); y = [0, 0, 1, 1, 0, 1]
    >>> RidgeClassifierCV(alphas=[1e-3, 1.0]).fit(X, y).predict([[0.2], [2.8]])
    array([0, 1])
    """

    _supports_partial_fit = False  # alpha (and gamma) are chosen on all the rows at once

    _parameter_constraints = _RidgeCVMixin._parameter_constraints

    def _check_param_combinations(self):
        super()._check_param_combinations()
        if self.alpha_per_target:
            raise InvalidParameterError(
                "RidgeClassifierCV chooses one alpha for all its target columns: alpha_per_target must be False."
            )

    @fit_context(prefer_skip_nested_validation=False)  # features= is fitted inside: let it validate itself
    def fit(self, X, y, sample_weight=None):
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
        _refuse_dask(self, X)
        X, y, sample_weight = _validate_Xy(self, X, y, sample_weight)
        binarizer, Y = _pm1_targets(y, type(self).__name__)
        self._pending_classes = binarizer.classes_
        sel = self._select(X, Y, sample_weight, np.asarray(y))
        del self._pending_classes
        self._label_binarizer = binarizer
        self.classes_ = binarizer.classes_
        # Shapes as scikit-learn's RidgeClassifierCV: a binary problem's one column is ravelled.
        self._store(sel, "column" if Y.shape[1] == 1 else "2d")
        return self

    def _scores_with_scorer(self, pred, y_true, per_target, params):
        scorer = check_scoring(self, scoring=self.scoring)
        est = _IdentityClassifier(self._pending_classes)
        return np.array([scorer(est, pred[:, :, i], y_true, **params) for i in range(pred.shape[2])])


def _refuse_dask(est, X):
    """Raise a clear error for a Dask X (fit would otherwise pull it to the client)."""
    if is_dask_array(X):
        name = type(est).__name__
        raise TypeError(
            f"{name}.fit does not accept Dask arrays yet (its leave-one-out passes over the rows run in "
            f"memory, and it would pull X to the client). Choose alpha (and gamma) with {name} on a sample that fits in memory "
            f"(e.g. X[:100_000].compute()), then fit randfeat.{name.replace('CV', '')}(alpha=...) on the "
            f"Dask array; the fitted {name}'s predict and decision_function accept Dask arrays."
        )


class _IdentityRegressor(RegressorMixin, BaseEstimator):
    """An already-"fitted" regressor whose predictions are its input (to score LOO predictions)."""

    def predict(self, X):
        return X


class _IdentityClassifier(ClassifierMixin, BaseEstimator):
    """A classifier whose decision values are its input (to score LOO decision values)."""

    def __init__(self, classes):
        self.classes = classes
        self.classes_ = classes

    def decision_function(self, X):
        return X[:, 0] if X.shape[1] == 1 else X

    def predict(self, X):
        if X.shape[1] == 1:
            return self.classes_[(X[:, 0] > 0).astype(int)]
        return self.classes_[np.argmax(X, axis=1)]
