"""SkewedChi2Sampler: random Fourier features of the skewed χ² kernel (Li, Ionescu & Sminchisescu 2010).

k(x, y) = Πⱼ 2√((xⱼ + c)(yⱼ + c)) / (xⱼ + yⱼ + 2c) is, in u = log(x + c),
the shift-invariant Πⱼ sech((u_xⱼ − u_yⱼ)/2), whose spectral density is
the hyperbolic secant density sech(πω).  So z(x) = √(2/D) · cos(log(x + c)·W + b)
with W drawn by that density's inverse CDF, ω = log(tan(πu/2))/π, exactly as
scikit-learn draws it (``sklearn_compat``); computed by the fused
cos(XW + b) kernel after one elementwise log.
"""

import dataclasses
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from .._core.memory_budget import check_memory
from .._core.protocols import MapCapability, OutputKind
from .._core.validation import N_JOBS, Interval
from .contract import FeatureMap, MapState
from .fourier_transform import fourier_features
from .rbf_sampler import check_no_overflow
from .sklearn_compat import draw_rng

_BELOW = "X may not contain entries smaller than -skewedness."


def draw_skewed_chi2(random_state, n_features, n_components):
    """Draw scikit-learn's frequencies and phases.

    Parameters
    ----------
    random_state : None, int, RandomState or Generator
    n_features, n_components : int

    Returns
    -------
    W : ndarray of shape (n_features, n_components), float64
    offset : ndarray of shape (n_components,), float64
    """
    check_memory(3 * 8 * n_features * n_components, f"the {n_features} x {n_components} random weights (float64)",
                 "use a smaller n_components")
    rng = draw_rng(random_state)
    uniform = rng.uniform(size=(n_features, n_components))
    W = 1.0 / np.pi * np.log(np.tan(np.pi / 2.0 * uniform))
    offset = rng.uniform(0, 2 * np.pi, size=n_components)
    return W, offset


def check_above_minus_skewedness(X, skewedness):
    """Raise scikit-learn's ValueError unless every entry of X (a CSR's implicit zeros too) exceeds −c.

    Parameters
    ----------
    X : ndarray or CSR matrix, validated
    skewedness : float
    """
    c = float(skewedness)
    if sp.issparse(X):
        implicit = X.data.shape[0] < X.shape[0] * X.shape[1]
        if (implicit and 0.0 <= -c) or (X.data <= -c).any():
            raise ValueError(_BELOW)
    elif (X <= -c).any():
        raise ValueError(_BELOW)


def skewed_chi2_features(X, W, offset, skewedness, n_threads):
    """√(2/D) · cos(log(X + c)·W + b) in X's dtype.

    A CSR X stays sparse when c > 0: log(x + c) = log c + (log(x + c) − log c),
    the first term folded into the phases (b + log c · Σₖ Wₖ), the second
    stored where x is.  With c ≤ 0 a CSR (accepted only when it stores every
    entry: its implicit zeros are refused) takes the dense path.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), validated, above −c
    W : ndarray of shape (n_features, n_components)
    offset : ndarray of shape (n_components,)
    skewedness : float
    n_threads : int

    Returns
    -------
    Z : ndarray of shape (n_samples, n_components), X's dtype, C order
    """
    c = float(skewedness)
    if sp.issparse(X) and c <= 0:
        # log c is undefined: the shift cannot be folded into the phases.  A CSR is accepted with c <= 0 only
        # when it stores every entry (its implicit zeros would be <= -c), so the dense copy costs what it holds.
        X = X.toarray()
    if sp.issparse(X):
        log_c = np.log(c)
        data = (np.log(X.data.astype(np.float64) + c) - log_c).astype(X.dtype)
        shifted = sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)
        offset = np.asarray(offset, dtype=np.float64) + log_c * np.asarray(W, dtype=np.float64).sum(axis=0)
        return fourier_features(shifted, W, offset, False, n_threads)
    L = np.log(X + X.dtype.type(c))
    return fourier_features(L, W, offset, False, n_threads)


@dataclasses.dataclass(frozen=True, eq=False)
class SkewedChi2State(MapState):
    """The fitted parameters of a ``SkewedChi2Sampler``.

    Attributes
    ----------
    n_features_out : int
        D.
    W : ndarray of shape (n_features_in, D)
        Frequencies, in the training data's dtype.
    b : ndarray of shape (D,)
        Phases, in the training data's dtype.
    skewedness : float
    """

    W: np.ndarray
    b: np.ndarray
    skewedness: float

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


class SkewedChi2Sampler(FeatureMap):
    """Approximate feature map for the "skewed chi-squared" kernel (scikit-learn's SkewedChi2Sampler).

    A drop-in for ``sklearn.kernel_approximation.SkewedChi2Sampler``: the
    same parameters, defaults and fitted attributes, and for the same
    ``random_state`` the same random draws, so the features equal
    scikit-learn's to rounding.  z(x) = √(2/D) cos(log(x + c) W + b), with W
    drawn from the hyperbolic secant density, approximates
    k(x, y) = Πⱼ 2√((xⱼ + c)(yⱼ + c)) / (xⱼ + yⱼ + 2c), c = ``skewedness``
    (Li, Ionescu & Sminchisescu, 2010; ``randfeat.kernel_matrix(...,
    kernel='skewed_chi2')``).  Computed by randfeat's fused, threaded
    cos(XW + b) kernel after one elementwise log; float32 stays float32,
    bit-identical for any ``n_jobs``.  Sparse X is accepted when c > 0 (its
    implicit zeros are then above −c) and is not densified (log c is folded
    into the phases); scikit-learn refuses sparse input.

    Parameters
    ----------
    skewedness : float, default=1.0
        "skewedness" parameter c of the kernel; every value of X must exceed −c.
    n_components : int, default=100
        Number of Monte Carlo samples: the output width D.
    random_state : int, RandomState instance, Generator or None, default=None
        Seeds the draw of the weights and offsets (as in scikit-learn).
    n_jobs : int or None, default=None
        Threads for ``transform`` (randfeat's addition).  None or -1: all
        available cores.  The output is bit-identical whatever ``n_jobs`` is.

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features, n_components)
        Frequencies, drawn from the hyperbolic secant density, in the training data's dtype.
    random_offset_ : ndarray of shape (n_components,)
        Phases, uniform in [0, 2π), in the training data's dtype.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Names of features seen during fit, when X had string column names.

    See Also
    --------
    sklearn.kernel_approximation.SkewedChi2Sampler : the scikit-learn class this replaces.
    randfeat.kernel_matrix : the exact kernel (``kernel='skewed_chi2'``).

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import SkewedChi2Sampler
    >>> X = np.random.default_rng(0).uniform(size=(4, 3))
    >>> SkewedChi2Sampler(n_components=10, random_state=0).fit_transform(X).shape
    (4, 10)
    """

    output_kind = OutputKind.DENSE
    capabilities = frozenset({MapCapability.ROW_INDEPENDENT})
    _parameter_constraints: dict = {
        "skewedness": [Interval(Real, None, None, closed="neither")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": N_JOBS,
    }

    def __init__(self, *, skewedness: float | np.floating = 1.0, n_components: int = 100,
                 random_state: int | np.integer | np.random.RandomState | np.random.Generator | None = None,
                 n_jobs: int | None = None) -> None:
        self.skewedness = skewedness
        self.n_components = n_components
        self.random_state = random_state
        self.n_jobs = n_jobs

    @property
    def random_weights_(self) -> np.ndarray:
        """ndarray of shape (n_features, n_components): the frequencies."""
        return self._fitted_state().W

    @property
    def random_offset_(self) -> np.ndarray:
        """ndarray of shape (n_components,): the phases."""
        return self._fitted_state().b

    def _draw(self, summary):
        """scikit-learn's draw, in the training data's dtype."""
        W, b = draw_skewed_chi2(self.random_state, summary.n_features, self.n_components)
        dtype = summary.dtype
        return SkewedChi2State(n_features_out=int(self.n_components), W=W.astype(dtype), b=b.astype(dtype),
                               skewedness=float(self.skewedness))

    def _transform_rows(self, state, X, n_threads):
        """√(2/D) cos(log(X + c) W + b); values at or below −c are refused with scikit-learn's message."""
        check_above_minus_skewedness(X, state.skewedness)
        Z = skewed_chi2_features(X, state.W, state.b, state.skewedness, n_threads)
        check_no_overflow(X, Z, state.W)
        return Z
