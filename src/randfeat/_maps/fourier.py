"""RandomFourierFeatures: random Fourier features, one map of the feature-map contract.

Python does validation, random draws and the thread count; the fused kernel
in ``_ext._fourier_fast`` computes the features (``fourier_transform.py``).
An odd ``n_components`` with the ``cossin`` map is computed by that kernel as
⌈D/2⌉ cos/sin pairs and folded into D columns here (``_fold_odd_cossin``).
"""

from __future__ import annotations

import dataclasses
from numbers import Integral, Real
from typing import Optional, Union

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError, StrOptions

from .._core.protocols import MapCapability, OutputKind
from .._core.types import Float, RandomState
from .._core.validation import N_JOBS, Interval, as_generator
from .contract import FeatureMap, MapState
from .fourier_transform import fourier_features
from .gamma import median_heuristic_gamma, resolve_gamma
from .kernels import GAMMA, KERNEL_NAMES, KERNELS, NU, scale_frequencies
from .leverage import draw_fourier_leverage, leverage_frequencies
from .sampling import SAMPLINGS, draw_unit_frequencies
from .structured import STRUCTURED_SAMPLINGS, StructuredState, check_kernel, draw_structured, multipliers

FEATURE_MAPS = ("cossin", "cos")

def _max_abs(X):
    """max |x| over X's (stored) entries, without an |X| temporary."""
    values = X.data if sp.issparse(X) else X
    if values.size == 0:
        return 0.0
    return max(float(values.max()), -float(values.min()))


def _fold_odd_cossin(Z, phase):
    """Fold the 2D' columns of the cossin kernel into the D = 2D' - 1 columns of an odd width, in place.

    ``Z = sqrt(1/D') [cos a_1 .. cos a_D', sin a_1 .. sin a_D']`` becomes
    ``sqrt(1/D') [cos a_1 .. cos a_{D'-1}, sqrt(2) cos(a_D' + b), sin a_1 .. sin a_{D'-1}]``:
    cos(a + b) = cos a cos b - sin a sin b turns the last pair into the
    random-phase column of the ``cos`` map, and the spare last column is
    dropped by moving the rows left inside the same buffer, which is then
    shrunk: no second output-sized array, one extra pass over the output.
    """
    n, width = Z.shape
    n_freq, D = width // 2, width - 1
    root2 = np.sqrt(2.0)
    cos_b, sin_b = Z.dtype.type(root2 * np.cos(phase)), Z.dtype.type(root2 * np.sin(phase))
    Z[:, n_freq - 1] = cos_b * Z[:, n_freq - 1] - sin_b * Z[:, width - 1]
    flat = Z.reshape(-1)
    # Row r moves left by r elements.  Rows [r, r + k) can move in one copy
    # without their source and destination overlapping when k <= r / D, so
    # NumPy copies them directly (an overlapping 2-D copy would go through a
    # temporary); a single row is a 1-D move, which NumPy does in place.
    r = 1  # row 0 is already in place
    while r < n:
        k = min(max(1, r // D), n - r)
        if k == 1:
            flat[r * D : (r + 1) * D] = flat[r * width : r * width + D]
        else:
            flat[r * D : (r + k) * D].reshape(k, D)[...] = Z[r : r + k, :D]
        r += k
    del flat
    try:
        Z.resize((n, D), refcheck=False)  # realloc keeps the first n*D elements
        return Z
    except ValueError:  # pragma: no cover - Z does not own its buffer
        return Z.reshape(-1)[: n * D].reshape(n, D)


@dataclasses.dataclass(frozen=True, eq=False)
class FourierState(MapState):
    """The fitted parameters of a ``RandomFourierFeatures``.

    Attributes
    ----------
    n_features_out : int
        D.
    W : ndarray of shape (n_features_in, n_freq)
        The frequencies as columns, in the training data's dtype
        (``n_freq = ⌈D/2⌉`` for ``cossin``, D for ``cos``).
    b : ndarray of shape (n_freq,) or (1,), or None
        The phases (``cos``), the odd ``cossin`` width's single phase, or None.
    gamma : float
    cossin : bool
    weights : ndarray of shape (n_freq,) or None
        Importance weights of the frequencies (``sampling='leverage'``): each
        frequency's feature columns are multiplied by their square roots.
    """

    W: np.ndarray
    b: np.ndarray | None
    gamma: float
    cossin: bool
    weights: np.ndarray | None = None

    def check(self):
        """Raise ValueError unless W, b and the width agree (what the kernel will read)."""
        super().check()
        W, b, D = self.W, self.b, self.n_features_out
        if not (isinstance(W, np.ndarray) and W.ndim == 2 and W.dtype in (np.float32, np.float64)):
            raise ValueError("random_weights_ must be a 2-D float32 or float64 array")
        n_freq = (D + 1) // 2 if self.cossin else D
        if W.shape[1] != n_freq:
            raise ValueError(f"random_weights_ has {W.shape[1]} frequencies, but n_features_out_={D} "
                             f"needs {n_freq}")
        n_phases = n_freq if not self.cossin else (1 if D % 2 else 0)
        if n_phases == 0 and b is not None:
            raise ValueError("random_offset_ must be None for an even cossin map")
        if n_phases and not (isinstance(b, np.ndarray) and b.shape == (n_phases,) and b.dtype == W.dtype):
            raise ValueError(f"random_offset_ must be an array of {n_phases} phases in {W.dtype}")
        w = self.weights
        if w is not None and not (isinstance(w, np.ndarray) and w.shape == (n_freq,) and w.dtype == np.float64
                                  and np.isfinite(w).all() and (w > 0).all()):
            raise ValueError(f"importance_weights_ must be None or {n_freq} positive finite float64 weights")

    @property
    def n_features_in(self):
        """int: the frequencies' number of input features."""
        return int(self.W.shape[0])


class RandomFourierFeatures(FeatureMap):
    """Random Fourier features of a shift-invariant kernel (Rahimi & Recht, 2007).

    Maps X to Z with ``Z @ Z.T ≈ kernel_matrix(X, kernel=..., gamma=..., nu=...)``,
    so a linear model on Z approximates a kernel machine.  The features are
    computed by a fused, multithreaded kernel: one pass over the output, no
    N × D temporaries, float32 kept as float32.

    Parameters
    ----------
    n_components : int, default=100
        Output width D, any positive integer (see ``feature_map`` for an odd
        D with ``'cossin'``).
    kernel : {'rbf', 'laplacian', 'cauchy', 'matern'}, default='rbf'
        Kernel approximated; see ``randfeat.kernel_matrix`` for the formulas.
    gamma : float or 'scale', default='scale'
        Kernel parameter as in ``sklearn.metrics.pairwise``.  ``'scale'``
        (the default after 0.1.0) means ``1 / (n_features * X.var())``, as
        scikit-learn's RBFSampler: of the order of one over typical squared
        distances, whatever the scale of X (a fixed ``gamma=1.0`` predicted
        the majority class on the Adult set).  The value used is ``gamma_``.
    nu : {0.5, 1.5, 2.5}, default=1.5
        Smoothness of the Matérn kernel; ignored by the other kernels.
    feature_map : {'cossin', 'cos'}, default='cossin'
        ``'cossin'``: ``z(x) = sqrt(1/D') [cos(Wᵀx), sin(Wᵀx)]`` with
        ``D' = D/2`` frequencies.  ``'cos'``: ``z(x) = sqrt(2/D) cos(Wᵀx + b)``
        with D frequencies and ``b ~ U[0, 2π)``.  An odd D with ``'cossin'``
        uses ``D' = (D + 1)/2`` frequencies: the first ``D' - 1`` give cos/sin
        pairs, the last one the single column ``sqrt(2) cos(w_{D'}ᵀx + b)``
        with a random phase b, all scaled by ``sqrt(1/D')``, in the order
        ``[cos(w_1ᵀx) .. cos(w_{D'-1}ᵀx), sqrt(2) cos(w_{D'}ᵀx + b),
        sin(w_1ᵀx) .. sin(w_{D'-1}ᵀx)]``.  Each of the D' frequencies then
        contributes a term of expectation k(x, y) to ``z(x)ᵀz(y)``
        (``cos a cos c + sin a sin c = cos(a - c)`` for a pair,
        ``E_b[2 cos(a + b) cos(c + b)] = cos(a - c)`` for the single column),
        so ``E[z(x)ᵀz(y)] = k(x, y)`` holds exactly for every D.  (Dropping
        the last sin column without a phase would not do: ``E[cos(wᵀx)
        cos(wᵀy)] = (k(x - y) + k(x + y))/2``.)  An even D gives the same
        features as always.  ``'cossin'`` is the default
        because at equal output width it approximates the kernel with lower
        variance (Sutherland & Schneider, 2015): the random phase b of the
        ``cos`` map adds noise that the sin/cos pair cancels exactly.
    sampling : {'iid', 'orthogonal', 'qmc', 'sorf', 'fastfood', 'leverage'}, default='iid'
        How the frequencies are drawn: i.i.d. from the spectral density;
        ``'orthogonal'``: Orthogonal Random Features (Yu et al., 2016), rows
        of stacked random orthogonal blocks rescaled to the density's radial
        norms (``rbf`` and ``matern`` only); ``'qmc'``: a scrambled Sobol
        sequence pushed through the inverse CDF of the density (Avron et al.,
        2016).  Both usually give a lower kernel error than ``'iid'`` at
        equal D.  ``'sorf'`` (Structured Orthogonal Random Features, Yu et
        al., 2016) and ``'fastfood'`` (Le, Sarlós & Smola, 2013) replace W
        by blocks of Walsh–Hadamard and diagonal matrices (H D₁ H D₂ H D₃;
        H G Π H B) on X zero-padded to a power of two, each row rescaled to
        a radius of the density (``rbf`` and ``matern`` only): O(max(D, n)
        log n) time per row, n the padded power of two (at least 64 for
        ``'sorf'``), and O(D) parameters instead of O(dD), so much faster
        than the dense map for large dense d (see ``bench/structured.py``).
        A sparse row costs the same as a dense one (it is expanded to n),
        whatever its non-zeros: on wide sparse input with few non-zeros per
        row, ``'iid'`` (O(nnz·D) per row) is faster.  ``'sorf'``'s
        blocks are at least 64 wide, because smaller Walsh–Hadamard blocks
        leave a bias that no D removes; with them its kernel error is within
        about 1.1× of ``'orthogonal'``'s at every d (measured at d = 2, 5, 12,
        24, 40), and shrinks with D;
        ``'fastfood'`` is unbiased but its rows within a block are
        correlated, so its error is somewhat above ``'iid'``'s
        (``bench/results/approx_error_dims.md``).  They store no
        ``random_weights_``.
        ``'leverage'``: from the kernel's ridge leverage function
        (Avron et al., 2017) in the empirical form of Li et al. (2019): a
        pool of 4·D' frequencies drawn i.i.d., each one's leverage estimated
        on a uniform sample of max(2000, 2·D') training rows (all rows of
        smaller data, read through the input summary, also for Dask), D'
        frequencies drawn from the pool with probabilities q ∝ leverage and
        weighted by 1/(4D'·q) so that ``E[z(x)ᵀz(y)] = k(x, y)`` still
        (``importance_weights_``).  Data-dependent: fit reads X.  Costs
        O(n_s²·D' + n_s³) at fit (n_s the sampled rows, itself growing
        like 2·D', so cubic in D' past 1000 frequencies; one BLAS thread,
        for results independent of ``n_jobs``: D = 4000 on 3000 rows about
        15 s) and one more pass over the output at transform.  A fit whose
        predicted cost exceeds 1e13 floating-point operations (a few
        minutes) is refused up front with a ValueError naming the cost.
    leverage_regularization : 'auto' or float, default='auto'
        λ of the ridge leverage function with ``sampling='leverage'``
        (ignored otherwise), on the scale of the n × n training kernel
        matrix: the scale of ``alpha`` of a ridge regression on the features.
        ``'auto'``: the λ at which the effective dimension Σᵢ σᵢ/(σᵢ + λ)
        of the sampled rows' kernel (eigenvalues σᵢ)
        equals D', the number of frequencies.
    random_state : int, RandomState, Generator or None, default=None
        Seeds the draw of W and b.
    n_jobs : int or None, default=None
        Threads for ``transform``.  None or -1: all available cores.  The
        output is bit-identical whatever ``n_jobs`` is.

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features_in_, D') or (n_features_in_, D)
        Frequencies W, as columns (``D' = ⌈D/2⌉`` for ``cossin``), in the
        dtype of the training data.  Not stored for ``'sorf'`` and
        ``'fastfood'`` (an AttributeError says so).
    random_offset_ : ndarray of shape (D,) or (1,), or None
        Phases b in the training data's dtype: one per frequency for ``cos``;
        for ``cossin``, None (no phase) when D is even and the phase of the
        last frequency's single column when D is odd.
    gamma_ : float
        The numeric gamma used (resolves ``gamma='scale'``).
    n_features_in_ : int
        Number of input features seen in ``fit``.
    feature_names_in_ : ndarray of str
        Input feature names, when X had string column names.
    n_features_out_ : int
        Output width D.

    See Also
    --------
    sklearn.kernel_approximation.RBFSampler : the ``cos`` map, rbf only.
    randfeat.kernel_matrix : the exact kernel the features approximate.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RandomFourierFeatures, kernel_matrix
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> rff = RandomFourierFeatures(n_components=20000, gamma=0.5, random_state=0)
    >>> Z = rff.fit_transform(X)
    >>> Z.shape
    (5, 20000)
    >>> bool(np.abs(Z @ Z.T - kernel_matrix(X, gamma=0.5)).max() < 0.05)
    True
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "kernel": [KERNEL_NAMES],
        "gamma": [*GAMMA, StrOptions({"scale"})],
        "nu": NU,
        "feature_map": [StrOptions(set(FEATURE_MAPS))],
        "sampling": [StrOptions(set(SAMPLINGS) | set(STRUCTURED_SAMPLINGS) | {"leverage"})],
        "leverage_regularization": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": N_JOBS,
    }

    def __init__(
        self,
        n_components: int = 100,
        *,
        kernel: str = "rbf",
        gamma: Union[Float, str] = "scale",
        nu: Float = 1.5,
        feature_map: str = "cossin",
        sampling: str = "iid",
        leverage_regularization: Union[Float, str] = "auto",
        random_state: RandomState = None,
        n_jobs: Optional[int] = None,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.nu = nu
        self.feature_map = feature_map
        self.sampling = sampling
        self.leverage_regularization = leverage_regularization
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_param_combinations(self):
        if self.sampling in STRUCTURED_SAMPLINGS:
            try:
                check_kernel(KERNELS[self.kernel], self.sampling)
            except ValueError as exc:
                raise InvalidParameterError(str(exc)) from None
        if self.sampling == "orthogonal" and KERNELS[self.kernel].radial_norms is None:
            radial = sorted(k for k, s in KERNELS.items() if s.radial_norms is not None)
            raise InvalidParameterError(
                f"sampling='orthogonal' does not apply to kernel={self.kernel!r}: its spectral "
                f"density is not spherically symmetric (frequencies are independent per "
                f"coordinate); use it with {radial}, or sampling='iid' or 'qmc'"
            )

    output_kind = OutputKind.DENSE
    capabilities = frozenset({MapCapability.ROW_INDEPENDENT, MapCapability.KERNEL_WIDTH, MapCapability.GAMMA_PATH})

    # ------------------------------------------------------- fitted attributes
    @property
    def random_weights_(self) -> np.ndarray:
        """ndarray: the frequencies W, as columns, in the training data's dtype."""
        state = self._fitted_state()
        if isinstance(state, StructuredState):
            raise AttributeError(
                f"random_weights_ is not stored for sampling={state.draw.sampling!r}: its frequencies are "
                f"products of Walsh-Hadamard and diagonal matrices kept in O(D) memory, never as a d x D matrix"
            )
        return state.W

    @property
    def random_offset_(self) -> np.ndarray:
        """ndarray or None: the phases b."""
        return self._fitted_state().b

    @property
    def importance_weights_(self) -> Optional[np.ndarray]:
        """ndarray of shape (n_freq,) or None: the frequencies' importance weights (``sampling='leverage'``)."""
        state = self._fitted_state()
        return state.weights if isinstance(state, FourierState) else None

    @property
    def gamma_(self) -> float:
        """float: the numeric gamma used (resolves ``gamma='scale'``)."""
        return self._fitted_state().gamma

    # --------------------------------------------------------- the contract
    def _auto_gamma(self, X):
        """The median heuristic's gamma for validated X (L1 distance for the Laplacian kernel)."""
        return median_heuristic_gamma(X, "manhattan" if self.kernel == "laplacian" else "sqeuclidean")

    def _draw(self, summary):
        """Draw the frequencies for inputs like the training data (its width; its variance for 'scale')."""
        if self.sampling == "leverage":
            return self._leverage_states(summary, [resolve_gamma(self.gamma, summary)])[0]
        unit, b = self._draw_unit_frequencies(summary.n_features)
        return self._state_at(unit, b, resolve_gamma(self.gamma, summary), summary.dtype)

    def _draw_path(self, summary, gammas):
        """One state per gamma, all from one draw of the unit frequencies (each as a fit at that gamma)."""
        if self.sampling == "leverage":
            return self._leverage_states(summary, gammas)
        unit, b = self._draw_unit_frequencies(summary.n_features)
        return [self._state_at(unit, b, float(g), summary.dtype) for g in gammas]

    def _draw_unit_frequencies(self, d):
        """Draw the unit frequencies (a ``StructuredDraw`` for sorf/fastfood) and offsets from ``random_state``."""
        cossin = self.feature_map == "cossin"
        n_freq = (self.n_components + 1) // 2 if cossin else self.n_components
        rng = as_generator(self.random_state)
        if self.sampling in STRUCTURED_SAMPLINGS:
            unit = draw_structured(KERNELS[self.kernel], self.sampling, d, n_freq, self.nu, rng)
            b = None if cossin else rng.uniform(0.0, 2.0 * np.pi, size=n_freq)
        else:
            unit, b = draw_unit_frequencies(
                KERNELS[self.kernel], self.sampling, d, n_freq, self.nu, rng, with_offset=not cossin
            )
        if cossin and self.n_components % 2:
            b = rng.uniform(0.0, 2.0 * np.pi, size=1)  # phase of the single column
        return unit, b

    def _leverage_states(self, summary, gammas):
        """One state per gamma: the pool, rows and uniforms drawn once, the leverage and resampling per gamma."""
        cossin = self.feature_map == "cossin"
        n_freq = (self.n_components + 1) // 2 if cossin else self.n_components
        rng, spec = as_generator(self.random_state), KERNELS[self.kernel]
        draw = draw_fourier_leverage(spec, summary.n_features, n_freq, self.nu, summary.n_samples, rng,
                                     with_offset=not cossin)
        b = rng.uniform(0.0, 2.0 * np.pi, size=1) if cossin and self.n_components % 2 else draw.b
        rows = summary.rows(draw.rows)
        states = []
        for g in gammas:
            unit, weights = leverage_frequencies(spec, draw, rows, float(g), self.leverage_regularization,
                                                 summary.n_samples, self._threads())
            states.append(self._state_at(unit, b, float(g), summary.dtype, weights))
        return states

    def _state_at(self, unit, b, gamma, dtype, weights=None):
        """The frequencies at ``gamma`` (``kernels.scale_frequencies``), checked, as a ``FourierState``."""
        if self.sampling in STRUCTURED_SAMPLINGS:
            with np.errstate(over="ignore", invalid="ignore"):
                mult = multipliers(KERNELS[self.kernel], unit, gamma)
                self._check_frequencies(mult.astype(dtype), gamma)
            return StructuredState(n_features_out=int(self.n_components), draw=unit, mult=mult,
                                   b=None if b is None else b.astype(dtype, copy=False), gamma=gamma,
                                   cossin=self.feature_map == "cossin")
        # Overflowing frequencies (a huge gamma) are reported by _check_frequencies.
        with np.errstate(over="ignore", invalid="ignore"):
            W = np.ascontiguousarray(scale_frequencies(KERNELS[self.kernel], unit, gamma)).astype(dtype, copy=False)
        self._check_frequencies(W, gamma)
        return FourierState(n_features_out=int(self.n_components), W=W,
                            b=None if b is None else b.astype(dtype, copy=False), gamma=gamma,
                            cossin=self.feature_map == "cossin", weights=weights)

    def _check_frequencies(self, W, gamma):
        """Raise unless every frequency is finite in the features' dtype (else the features are NaN)."""
        if np.isfinite(W).all():
            return
        why = (
            f"gamma={self.gamma!r} is too large"
            if not isinstance(self.gamma, str)
            else f"gamma='scale' resolved to {gamma:.3g} (X's variance is tiny)"
        )
        fix = "a smaller gamma" if not isinstance(self.gamma, str) else "rescaled X"
        msg = (
            f"{why} for kernel={self.kernel!r} in {W.dtype}: some random frequencies "
            f"overflow to infinity (they scale like {'gamma' if self.kernel == 'laplacian' else 'sqrt(gamma)'}), "
            f"so the features would be NaN. Use {fix}, e.g. after "
            f"sklearn.preprocessing.StandardScaler a gamma of order 1/n_features."
        )
        raise (ValueError if isinstance(self.gamma, str) else InvalidParameterError)(msg)

    def _transform_rows(self, state, X, n_threads):
        """The features of validated X: the fused kernel, the odd-width fold, the overflow check."""
        if isinstance(state, StructuredState):
            return state.features(X, n_threads)  # odd widths and overflow handled there
        Z = fourier_features(X, state.W, None if state.cossin else state.b, state.cossin, n_threads)
        if state.cossin and state.n_features_out % 2:
            Z = _fold_odd_cossin(Z, float(state.b[0]))
        if state.weights is not None:
            # Each frequency's columns (cossin: [cos.., sin..] with an odd width's last sin dropped).
            root = np.sqrt(state.weights)
            Z *= np.concatenate([root, root[: Z.shape[1] - root.size]]).astype(Z.dtype)
        self._check_no_overflow(X, Z, state.W)
        return Z

    def _check_no_overflow(self, X, Z, W):
        """Raise if ``X @ W`` overflowed (cos(±inf) is NaN); O(n·d) unless X is near the float range."""
        limit = float(np.finfo(Z.dtype).max) / 4
        # |x·w| <= d·max|x|·max|w|: below the limit nothing can overflow.
        bound = X.shape[1] * _max_abs(X) * _max_abs(W)
        if bound < limit or np.isfinite(Z).all():
            return
        raise ValueError(
            f"X @ random_weights_ overflows {Z.dtype} (X has values up to {_max_abs(X):.3g}, the "
            f"frequencies up to {_max_abs(W):.3g}), so the features would be NaN. Rescale X "
            f"(e.g. sklearn.preprocessing.StandardScaler) or use a smaller gamma."
        )

    def _legacy_state(self, attributes):
        """The state of a map pickled by randfeat 0.1.0 (its fitted attributes, popped).

        Parameters added since 0.1.0 get their defaults in ``attributes``.
        """
        attributes.setdefault("leverage_regularization", "auto")
        return FourierState(n_features_out=int(attributes.pop("n_features_out_")),
                            W=attributes.pop("random_weights_"), b=attributes.pop("random_offset_"),
                            gamma=attributes.pop("gamma_"), cossin=bool(attributes.pop("_cossin")))
