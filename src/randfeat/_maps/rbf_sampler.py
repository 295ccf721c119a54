"""RBFSampler: scikit-learn's random Fourier features of the RBF kernel on randfeat's fused kernel.

z(x) = √(2/D) · cos(xW + b), W = √(2γ) · ω₁ with ω₁ ~ N(0, I), b ~ U[0, 2π):
scikit-learn's ``RBFSampler`` (the ``cos`` map of ``RandomFourierFeatures``),
drawn exactly as scikit-learn draws it (``sklearn_compat``), computed by the
fused cos(XW + b) kernel of ``_fourier_fast`` (X·W row-independent, the
cosine in place while the tile is in cache).
"""

import dataclasses
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError, StrOptions

from .._core.memory_budget import check_memory
from .._core.protocols import MapCapability, OutputKind
from .._core.validation import N_JOBS, Interval
from .contract import FeatureMap, MapState
from .fourier_transform import fourier_features
from .gamma import median_heuristic_gamma, resolve_gamma
from .sklearn_compat import draw_rng


def draw_rbf_sampler(random_state, n_features, n_components):
    """Draw scikit-learn's unit frequencies and phases (gamma enters in ``rbf_weights``).

    Parameters
    ----------
    random_state : None, int, RandomState or Generator
    n_features, n_components : int

    Returns
    -------
    unit : ndarray of shape (n_features, n_components), float64
        Standard normal draws ω₁.
    offset : ndarray of shape (n_components,), float64
        Phases b in [0, 2π).
    """
    check_memory(3 * 8 * n_features * n_components, f"the {n_features} x {n_components} random weights (float64)",
                 "use a smaller n_components")
    rng = draw_rng(random_state)
    unit = rng.normal(size=(n_features, n_components))
    offset = rng.uniform(0, 2 * np.pi, size=n_components)
    return unit, offset


def rbf_weights(unit, gamma):
    """Frequencies W = √(2γ) · ω₁, the expression scikit-learn evaluates (the same bits).

    Parameters
    ----------
    unit : ndarray of shape (n_features, n_components)
    gamma : float

    Returns
    -------
    W : ndarray of shape (n_features, n_components), float64
    """
    return (2.0 * float(gamma)) ** 0.5 * unit


def rbf_sampler_features(X, W, offset, n_threads):
    """√(2/D) · cos(XW + b) in X's dtype, by the fused kernel.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), float32 or float64, validated
    W : ndarray of shape (n_features, n_components)
    offset : ndarray of shape (n_components,)
    n_threads : int

    Returns
    -------
    Z : ndarray of shape (n_samples, n_components), X's dtype, C order
    """
    return fourier_features(X, W, offset, False, n_threads)


def check_no_overflow(X, Z, W):
    """Raise if ``X @ W`` overflowed (cos(±inf) is NaN); O(n·d) only when X is near the float range.

    Parameters
    ----------
    X : ndarray or CSR matrix (the rows the features were made from)
    Z : ndarray (the features)
    W : ndarray (the frequencies)
    """
    def max_abs(A):
        values = A.data if sp.issparse(A) else A
        return 0.0 if values.size == 0 else max(float(values.max()), -float(values.min()))

    limit = float(np.finfo(Z.dtype).max) / 4
    if X.shape[1] * max_abs(X) * max_abs(W) < limit or np.isfinite(Z).all():
        return
    raise ValueError(
        f"X @ random_weights_ overflows {Z.dtype} (X has values up to {max_abs(X):.3g}, the frequencies "
        f"up to {max_abs(W):.3g}), so the features would be NaN. Rescale X (e.g. "
        f"sklearn.preprocessing.StandardScaler) or use a smaller gamma."
    )


@dataclasses.dataclass(frozen=True, eq=False)
class RBFSamplerState(MapState):
    """The fitted parameters of an ``RBFSampler``.

    Attributes
    ----------
    n_features_out : int
        D.
    W : ndarray of shape (n_features_in, D)
        Frequencies, in the training data's dtype.
    b : ndarray of shape (D,)
        Phases, in the training data's dtype.
    gamma : float
        The numeric gamma.
    """

    W: np.ndarray
    b: np.ndarray
    gamma: float

    def check(self):
        """Raise ValueError unless W and b are float arrays of one dtype with D columns / entries."""
        super().check()
        W, b, D = self.W, self.b, self.n_features_out
        if not (isinstance(W, np.ndarray) and W.ndim == 2 and W.dtype in (np.float32, np.float64)):
            raise ValueError("random_weights_ must be a 2-D float32 or float64 array")
        if W.shape[1] != D or not (isinstance(b, np.ndarray) and b.shape == (D,) and b.dtype == W.dtype):
            raise ValueError(f"random_weights_ and random_offset_ must have {D} columns / phases in {W.dtype}")

    @property
    def n_features_in(self):
        """int: the frequencies' number of input features."""
        return int(self.W.shape[0])


class RBFSampler(FeatureMap):
    """Approximate an RBF kernel feature map using random Fourier features (scikit-learn's RBFSampler).

    A drop-in for ``sklearn.kernel_approximation.RBFSampler``: the same
    parameters, defaults and fitted attributes, and for the same
    ``random_state`` the same random draws, so the features equal
    scikit-learn's to rounding.  z(x) = √(2/D) cos(xW + b) with
    W = √(2γ) ω, ω ~ N(0, I), b ~ U[0, 2π) approximates
    exp(−γ‖x − y‖²) (Rahimi & Recht, 2007).  The features are computed by
    randfeat's fused, threaded kernel (``RandomFourierFeatures``'s ``cos``
    map): one pass over the output, float32 stays float32, bit-identical for
    any ``n_jobs``.

    Parameters
    ----------
    gamma : 'scale' or float, default=1.0
        Parameter of the RBF kernel exp(−γ‖x − y‖²); ``'scale'`` means
        1 / (n_features · X.var()) (1.0 for a constant X).
    n_components : int, default=100
        Number of Monte Carlo samples: the output width D.
    random_state : int, RandomState instance, Generator or None, default=None
        Seeds the draw of the weights and offsets (as in scikit-learn; a
        Generator is drawn from directly).
    n_jobs : int or None, default=None
        Threads for ``transform`` (randfeat's addition).  None or -1: all
        available cores.  The output is bit-identical whatever ``n_jobs`` is.

    Attributes
    ----------
    random_offset_ : ndarray of shape (n_components,)
        The phases b, in the training data's dtype.
    random_weights_ : ndarray of shape (n_features, n_components)
        The frequencies W, in the training data's dtype.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Names of features seen during fit, when X had string column names.

    See Also
    --------
    randfeat.RandomFourierFeatures : more kernels, the lower-variance ``cossin`` map, structured samplings.
    sklearn.kernel_approximation.RBFSampler : the scikit-learn class this replaces.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RBFSampler, kernel_matrix
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> Z = RBFSampler(gamma=0.5, n_components=20000, random_state=0).fit_transform(X)
    >>> bool(np.abs(Z @ Z.T - kernel_matrix(X, gamma=0.5)).max() < 0.05)
    True
    """

    output_kind = OutputKind.DENSE
    capabilities = frozenset({MapCapability.ROW_INDEPENDENT, MapCapability.KERNEL_WIDTH, MapCapability.GAMMA_PATH})
    _parameter_constraints: dict = {
        "gamma": [StrOptions({"scale"}), Interval(Real, 0.0, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": N_JOBS,
    }

    def __init__(self, *, gamma: float | np.floating | str = 1.0, n_components: int = 100,
                 random_state: int | np.integer | np.random.RandomState | np.random.Generator | None = None,
                 n_jobs: int | None = None) -> None:
        self.gamma = gamma
        self.n_components = n_components
        self.random_state = random_state
        self.n_jobs = n_jobs

    @property
    def random_weights_(self) -> np.ndarray:
        """ndarray of shape (n_features, n_components): the frequencies W."""
        return self._fitted_state().W

    @property
    def random_offset_(self) -> np.ndarray:
        """ndarray of shape (n_components,): the phases b."""
        return self._fitted_state().b

    def _draw(self, summary):
        """scikit-learn's draw, scaled at the resolved gamma."""
        unit, b = draw_rbf_sampler(self.random_state, summary.n_features, self.n_components)
        return self._state_at(unit, b, resolve_gamma(self.gamma, summary), summary.dtype)

    def _auto_gamma(self, X):
        """The median heuristic's gamma for validated X in the distance this map's kernel scales."""
        return median_heuristic_gamma(X, "sqeuclidean")

    def _draw_path(self, summary, gammas):
        """One draw, one state per gamma (each as a fit at that gamma)."""
        unit, b = draw_rbf_sampler(self.random_state, summary.n_features, self.n_components)
        return [self._state_at(unit, b, float(g), summary.dtype) for g in gammas]

    def _state_at(self, unit, b, gamma, dtype):
        with np.errstate(over="ignore", invalid="ignore"):
            W = rbf_weights(unit, gamma).astype(dtype)
        if not np.isfinite(W).all():
            raise InvalidParameterError(
                f"gamma={gamma!r} is too large: some frequencies sqrt(2 * gamma) * w overflow {np.dtype(dtype).name}, "
                f"so the features would be NaN. Use a smaller gamma (after StandardScaler, of order 1/n_features)."
            )
        return RBFSamplerState(n_features_out=int(self.n_components), W=W, b=b.astype(dtype), gamma=float(gamma))

    def _transform_rows(self, state, X, n_threads):
        """√(2/D) cos(XW + b) by the fused kernel."""
        Z = rbf_sampler_features(X, state.W, state.b, n_threads)
        check_no_overflow(X, Z, state.W)
        return Z
