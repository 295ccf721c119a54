"""Nystroem: the Nyström kernel map (Williams & Seeger 2001) with scikit-learn's conventions.

fit: m landmarks L (``landmarks='uniform'``: m rows of the training data
drawn without replacement, as scikit-learn draws them; or the user's own
array), K_mm = k(L, L) and the normalisation N = K_mm^{-1/2} (from the
eigendecomposition of the symmetrised K_mm, eigenvalues clipped at 1e-12 in
absolute value, the sign kept: what scikit-learn's U S^{-1/2} V from the SVD
is for a symmetric matrix).  transform: Z = k(X, L) · Nᵀ, the block computed
and multiplied sub-tile by sub-tile in one compiled pass
(``nystroem_kernels``).

Landmark methods are looked up in ``LANDMARK_METHODS`` (name → function
``(summary, n_components, rng, kernel, **options) -> row indices``,
``summary`` the training input's ``InputSummary``, which also gives rows):
``'uniform'`` here, ``'leverage'`` (approximate ridge leverage scores) in
``leverage.py``.
"""

import dataclasses
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.utils import check_array
from sklearn.utils._param_validation import InvalidParameterError, StrOptions

from .._core.memory_budget import check_memory
from .._core.protocols import MapCapability, OutputKind
from .._core.threads import single_threaded_blas
from .._core.validation import N_JOBS, Interval, canonical_csr, check_sparse_structure
from .._ext._kernel_approx_fast import pack_panels, product_panel_width
from .contract import FeatureMap, MapState
from .gamma import median_heuristic_gamma
from .leverage import leverage_landmarks
from .nystroem_kernels import (KERNEL_NAMES, KERNEL_PARAMS, NystroemKernel, check_kernel_input, kernel_block,
                               nystroem_features, prepare_landmarks, resolve_kernel)
from .sklearn_compat import draw_rng


def uniform_landmarks(summary, n_components, rng, kernel, **options):
    """scikit-learn's landmarks: the first n_components of a random permutation of the rows.

    Parameters
    ----------
    summary : InputSummary
        Of the training input (only its number of rows is read).
    n_components : int
        At most n_samples.
    rng : RandomState or Generator
    kernel : NystroemKernel
        Unused (a data-dependent method would need it).
    **options
        Unused (the options of other methods).

    Returns
    -------
    ndarray of int64, shape (n_components,)
    """
    return np.asarray(rng.permutation(summary.n_samples)[:n_components], dtype=np.int64)


#: ``landmarks=`` strings and the functions that choose the rows.
LANDMARK_METHODS = {"uniform": uniform_landmarks, "leverage": leverage_landmarks}


def choose_landmarks(summary, n_components, random_state, kernel, method="uniform", **options):
    """Row indices of the landmarks, with scikit-learn's warning when n_components > n_samples.

    Parameters
    ----------
    summary : InputSummary
    n_components : int
    random_state : None, int, RandomState or Generator
    kernel : NystroemKernel
    method : str
        A key of ``LANDMARK_METHODS``.
    **options
        Passed on to the method (``'leverage'``: ``regularization``, ``n_threads``).

    Returns
    -------
    ndarray of int64
    """
    n_samples = summary.n_samples
    if n_components > n_samples:
        warnings.warn(
            "n_components > n_samples. This is not possible.\n"
            "n_components was set to n_samples, which results"
            " in inefficient evaluation of the full kernel."
        )
        n_components = n_samples
    return LANDMARK_METHODS[method](summary, n_components, draw_rng(random_state), kernel, **options)


def nystroem_normalization(K_mm):
    """N = K_mm^{-1/2} as scikit-learn computes it, from the eigendecomposition (float64).

    Parameters
    ----------
    K_mm : ndarray of shape (m, m)
        The kernel between the landmarks.

    Returns
    -------
    N : ndarray of shape (m, m), float64
        Σᵢ sign(λᵢ) qᵢqᵢᵀ / √max(|λᵢ|, 1e-12) over the eigenpairs (λᵢ, qᵢ) of
        (K_mm + K_mmᵀ)/2: scikit-learn's ``U / sqrt(clip(S, 1e-12)) @ V``
        for a symmetric matrix, and the same bits for any ``n_jobs`` (LAPACK
        on one thread).
    """
    K = np.asarray(K_mm, dtype=np.float64)
    K = 0.5 * (K + K.T)
    with single_threaded_blas():
        lam, Q = scipy.linalg.eigh(K)
        scale = np.where(lam < 0, -1.0, 1.0) / np.sqrt(np.maximum(np.abs(lam), 1e-12))
        return (Q * scale) @ Q.T


@dataclasses.dataclass(frozen=True, eq=False)
class NystroemState(MapState):
    """The fitted parameters of a ``Nystroem`` map.

    Attributes
    ----------
    n_features_out : int
        The number of landmarks m.
    kernel : NystroemKernel
        The resolved kernel.
    components : ndarray or CSR matrix of shape (m, n_features_in)
        The landmarks, in the training data's dtype.
    component_indices : ndarray of int64 or None
        Their rows in the training data (None for user-given landmarks).
    normalization : ndarray of shape (m, m)
        K_mm^{-1/2}, in the training data's dtype.
    """

    kernel: NystroemKernel
    components: object
    component_indices: np.ndarray | None
    normalization: np.ndarray

    def check(self):
        """Raise ValueError unless the landmarks and the normalisation agree in size and dtype."""
        super().check()
        N, L, m = self.normalization, self.components, self.n_features_out
        if not (isinstance(N, np.ndarray) and N.shape == (m, m) and N.dtype in (np.float32, np.float64)):
            raise ValueError(f"normalization_ must be a float32 or float64 array of shape ({m}, {m})")
        if not ((isinstance(L, np.ndarray) or sp.issparse(L)) and L.ndim == 2 and L.shape[0] == m
                and L.dtype == N.dtype):
            raise ValueError(f"components_ must be a 2-D array of {m} rows in {N.dtype}")
        if not isinstance(self.kernel, NystroemKernel):
            raise ValueError("the fitted kernel is not a NystroemKernel")
        idx = self.component_indices
        if idx is not None and not (isinstance(idx, np.ndarray) and idx.shape == (m,) and idx.dtype == np.int64):
            raise ValueError(f"component_indices_ must be an int64 array of {m} indices")
        if self.kernel.name == "precomputed" and idx is None:
            raise ValueError("a precomputed kernel needs the landmarks' indices")

    def index_bounds(self):
        """component_indices_: rows of the training set, for a precomputed kernel columns of its transform input."""
        if self.component_indices is None:
            return ()
        high = self.components.shape[1] if self.kernel.name == "precomputed" else None
        return (("component_indices_", self.component_indices, 0, high),)

    @property
    def n_features_in(self):
        """int: the landmarks' width (a precomputed kernel's: the training samples)."""
        return int(self.components.shape[1])


class Nystroem(FeatureMap):
    """Approximate a kernel map using a subset of the training data (scikit-learn's Nystroem).

    A drop-in for ``sklearn.kernel_approximation.Nystroem``: the same
    parameters, defaults and fitted attributes, the same landmarks for the
    same ``random_state``, and features equal to scikit-learn's to rounding
    where the landmarks' kernel matrix is well conditioned.  fit draws m
    landmarks L and computes N = K(L, L)^{-1/2}; transform returns
    Z = K(X, L) Nᵀ, so ZZᵀ = K(X, L) K(L, L)^{-1} K(L, X) approximates the
    kernel (Williams & Seeger, 2001).  The kernel block and the product with
    N are computed together by one compiled, threaded kernel, a few hundred
    rows at a time while they are in cache: no n × m temporary, float32
    stays float32 (scikit-learn computes float32 kernels partly in float64),
    bit-identical for any ``n_jobs``.  For ``rbf`` the rows and landmarks are
    centred on the landmarks' mean before ‖x‖² − 2x·l + ‖l‖² (sparse rows:
    the distances are formed in float64), so float32 keeps its accuracy on
    data far from the origin; sparse landmarks stay sparse.  N comes from an eigendecomposition of
    K(L, L) in float64 (scikit-learn: an SVD in the data's dtype), eigenvalues
    clipped at 1e-12 in absolute value as scikit-learn's singular values.

    Parameters
    ----------
    kernel : str or callable, default='rbf'
        Kernel map to be approximated: scikit-learn's ``'rbf'``,
        ``'laplacian'``, ``'polynomial'``/``'poly'``, ``'linear'``,
        ``'sigmoid'``, ``'cosine'``, ``'chi2'``, ``'additive_chi2'``, randfeat's
        ``'cauchy'``, ``'matern'`` (``kernel_params={'nu': 0.5 | 1.5 | 2.5}``),
        ``'skewed_chi2'`` (``kernel_params={'skewedness': c}``), ``'precomputed'``
        (fit takes the training kernel matrix, transform the kernel between new
        and training samples), or a callable of two rows and the keyword
        arguments ``kernel_params`` returning a float.
    gamma : float, default=None
        Parameter of the rbf, laplacian, polynomial, chi2, sigmoid, cauchy and
        matern kernels; None means 1/n_features (1.0 for chi2).  Ignored by
        other kernels.
    coef0 : float, default=None
        Zero coefficient of the polynomial and sigmoid kernels (None: 1).
    degree : float, default=None
        Degree of the polynomial kernel (None: 3).
    kernel_params : dict, default=None
        Additional parameters of the kernel (explicit ``gamma``, ``coef0``,
        ``degree`` take precedence), or keyword arguments of a callable.
    n_components : int, default=100
        Number of landmarks, the output width (at most n_samples: a larger
        value warns and uses n_samples, as scikit-learn).
    random_state : int, RandomState instance, Generator or None, default=None
        Seeds the choice of landmarks (as in scikit-learn).
    n_jobs : int or None, default=None
        Threads for the kernel block and transform.  None or -1: all
        available cores (scikit-learn: one job).  The output is bit-identical
        whatever ``n_jobs`` is.
    landmarks : {'uniform', 'leverage'} or array-like of shape (n_landmarks, n_features), default='uniform'
        randfeat's addition.  ``'uniform'``: ``n_components`` training rows
        drawn uniformly without replacement (scikit-learn's choice).
        ``'leverage'``: ``n_components`` distinct training rows drawn with
        probabilities proportional to approximate ridge leverage scores
        (recursive sampling, Musco & Musco 2017), O(n·m²) time, never the
        n × n kernel; it reads a uniform sample of max(20000, 20·m) rows
        (all rows of smaller data; the same rows for in-memory and Dask
        input), and needs a positive semi-definite kernel (not ``sigmoid``
        or ``additive_chi2``).  An array: the user's own landmarks
        (``n_components`` is then ignored and ``component_indices_`` is
        None); not with ``kernel='precomputed'``.
    leverage_regularization : 'auto' or float, default='auto'
        λ of the ridge leverage scores τᵢ = [K(K + λI)⁻¹]ᵢᵢ with
        ``landmarks='leverage'`` (ignored otherwise), on the scale of the
        n × n training kernel matrix K: the scale of ``alpha`` of a ridge
        regression on the features (``Ridge(alpha=a)`` → ``a`` targets that
        fit, as in the statistical guarantees of leverage sampling).
        ``'auto'``: the λ at which the effective dimension Σᵢ τᵢ equals
        ``n_components`` (estimated during the recursion), the budget of
        landmarks; it needs no knowledge of the later fit's alpha.  Small λ
        make all scores near 1 and large λ make them proportional to
        k(x, x): both are uniform sampling for rbf.

    Attributes
    ----------
    components_ : ndarray or sparse matrix of shape (n_components, n_features)
        The landmarks, in the training data's dtype (sparse for sparse X).
    component_indices_ : ndarray of shape (n_components,), dtype=int64, or None
        Indices of ``components_`` in the training set.
    normalization_ : ndarray of shape (n_components, n_components)
        K(L, L)^{-1/2}, in the training data's dtype.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Names of features seen during fit, when X had string column names.

    See Also
    --------
    sklearn.kernel_approximation.Nystroem : the scikit-learn class this replaces.
    randfeat.kernel_matrix : exact kernels.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import Nystroem
    >>> X = np.random.default_rng(0).normal(size=(200, 4))
    >>> ny = Nystroem(gamma=0.2, n_components=50, random_state=0).fit(X)
    >>> ny.transform(X).shape
    (200, 50)
    """

    output_kind = OutputKind.DENSE
    _parameter_constraints: dict = {
        "kernel": [StrOptions(set(KERNEL_NAMES)), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "coef0": [Interval(Real, None, None, closed="neither"), None],
        "degree": [Interval(Real, 1, None, closed="left"), None],
        "kernel_params": [dict, None],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": N_JOBS,
        "landmarks": [StrOptions(set(LANDMARK_METHODS)), "array-like", "sparse matrix"],
        "leverage_regularization": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, kernel: str | object = "rbf", *, gamma: float | np.floating | None = None,
                 coef0: float | np.floating | None = None, degree: float | np.floating | None = None,
                 kernel_params: dict | None = None, n_components: int = 100,
                 random_state: int | np.integer | np.random.RandomState | np.random.Generator | None = None,
                 n_jobs: int | None = None,
                 landmarks: "str | np.typing.ArrayLike | sp.spmatrix | sp.sparray" = "uniform",
                 leverage_regularization: float | np.floating | str = "auto") -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.landmarks = landmarks
        self.leverage_regularization = leverage_regularization

    def _explain_invalid(self, name, value):
        if name == "landmarks" and isinstance(value, str):
            return "Give 'uniform', 'leverage' or an array of landmark rows of shape (n_landmarks, n_features)."
        return super()._explain_invalid(name, value)

    def _check_param_combinations(self):
        if not isinstance(self.landmarks, str) and self.kernel == "precomputed":
            raise InvalidParameterError("landmarks given as an array need a kernel of the rows, not "
                                        "kernel='precomputed' (whose landmarks are training samples)")

    @property
    def components_(self) -> "np.ndarray | sp.spmatrix":
        """ndarray or sparse matrix of shape (n_components, n_features): the landmarks."""
        return self._fitted_state().components

    @property
    def component_indices_(self) -> np.ndarray | None:
        """ndarray of int64 or None: the landmarks' indices in the training set."""
        return self._fitted_state().component_indices

    @property
    def normalization_(self) -> np.ndarray:
        """ndarray of shape (n_components, n_components): K(L, L)^{-1/2}."""
        return self._fitted_state().normalization

    # ------------------------------------------------------------ the contract
    def _landmarks(self, summary, kernel):
        """(rows, indices): the landmark rows in the training dtype, and their indices (None if given)."""
        if isinstance(self.landmarks, str):
            idx = choose_landmarks(summary, self.n_components, self.random_state, kernel, self.landmarks,
                                   regularization=self.leverage_regularization, n_threads=self._threads())
            return summary.rows(idx), idx
        L = self.landmarks
        if sp.issparse(L):  # as any sparse input: its index arrays checked before anything reads them
            L = check_sparse_structure(L, "landmarks")
        # A copy: the state's arrays are made read-only, and the user's array must stay as it was.
        L = check_array(L, accept_sparse="csr", dtype=summary.dtype, input_name="landmarks", copy=True)
        if L.shape[1] != summary.n_features:
            raise ValueError(f"landmarks has {L.shape[1]} features, but X has {summary.n_features}")
        return (canonical_csr(L) if sp.issparse(L) else L), None

    def _draw(self, summary):
        """Landmarks, then K(L, L) and its inverse square root."""
        return self._draw_path(summary, [self.gamma])[0]

    @property
    def capabilities(self) -> frozenset[MapCapability]:
        """frozenset of MapCapability: a kernel width (and its path) only for a named kernel that has a gamma."""
        caps = {MapCapability.ROW_INDEPENDENT}
        if isinstance(self.kernel, str) and "gamma" in KERNEL_PARAMS.get(self.kernel, ()):
            caps |= {MapCapability.KERNEL_WIDTH, MapCapability.GAMMA_PATH}
        return frozenset(caps)

    def _auto_gamma(self, X):
        """The median heuristic's gamma for validated X (L1 distance for the Laplacian kernel)."""
        return median_heuristic_gamma(X, "manhattan" if self.kernel == "laplacian" else "sqeuclidean")

    def _draw_path(self, summary, gammas):
        """One choice of landmarks, one normalisation per gamma (each as a fit at that gamma).

        Leverage scores depend on the kernel, so ``'leverage'`` chooses the
        landmarks again at each gamma (from the same ``random_state``).
        """
        kernel = resolve_kernel(self.kernel, self.gamma, self.coef0, self.degree, self.kernel_params,
                                summary.n_features)
        if kernel.name == "precomputed" and summary.n_samples != summary.n_features:
            raise ValueError(f"kernel='precomputed' needs the square kernel matrix of the training samples, got "
                             f"shape ({summary.n_samples}, {summary.n_features}); transform then takes the "
                             f"kernel between new and training samples, of shape (n_new, {summary.n_samples})")
        per_gamma = isinstance(self.landmarks, str) and self.landmarks == "leverage"
        if not per_gamma:
            L, idx = self._landmarks(summary, kernel)
        states = []
        for g in gammas:
            k = resolve_kernel(self.kernel, g, self.coef0, self.degree, self.kernel_params, summary.n_features)
            if per_gamma:
                L, idx = self._landmarks(summary, k)
            states.append(self._make_state(k, L, idx, summary.dtype))
        return states

    def _make_state(self, kernel, L, idx, dtype):
        if sp.issparse(L):
            L = canonical_csr(L)  # one index dtype, sorted rows: the form the state check accepts
        m = int(L.shape[0])
        # K(L, L), its float64 copy, eigenvectors and N (float64): about 5 m × m.
        check_memory(5 * 8 * m * m, f"the {m} x {m} kernel between the landmarks and its inverse square root",
                     "use a smaller n_components")
        if kernel.name == "precomputed":
            K_mm = L[:, idx]
            K_mm = K_mm.toarray() if sp.issparse(K_mm) else np.asarray(K_mm)
        else:
            check_kernel_input(kernel, L, "X")
            K_mm = kernel_block(kernel, L, prepare_landmarks(kernel, L, dtype), self._threads())
        N = nystroem_normalization(K_mm).astype(dtype)
        return NystroemState(n_features_out=int(L.shape[0]), kernel=kernel, components=L,
                             component_indices=None if idx is None else np.asarray(idx, dtype=np.int64),
                             normalization=N)

    def _transform_rows(self, state, X, n_threads):
        """K(X, L) Nᵀ by the fused kernel."""
        kernel, m = state.kernel, state.n_features_out
        if kernel.name != "precomputed":
            check_kernel_input(kernel, X, "X")
        check_memory(X.shape[0] * m * X.dtype.itemsize, f"the features of {X.shape[0]} rows ({X.shape[0]} x {m})",
                     "transform X in chunks of rows, or fit a model with Ridge(features=Nystroem(...))")
        lm = prepare_landmarks(kernel, state.components, X.dtype)
        Np = pack_panels(np.ascontiguousarray(state.normalization.T, dtype=X.dtype), product_panel_width(X.dtype))
        return nystroem_features(kernel, X, lm, Np, m, n_threads, index=state.component_indices)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The χ² kernels are defined on non-negative data (skewed χ²: above -c).
        tags.input_tags.positive_only = self.kernel in ("chi2", "additive_chi2")
        return tags
