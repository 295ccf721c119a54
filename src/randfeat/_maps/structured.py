"""Structured random Fourier features: SORF and Fastfood, in O(D) memory and O(max(D, n) log n) time per row.

n is the block size, the padded power of two >= d (at least 64 for SORF).  A
sparse row is scattered into the padded block and costs what a dense row
costs, whatever its number of non-zeros.

Both replace the d × D' frequency matrix W of ``sampling='iid'`` or
``'orthogonal'`` by products of Walsh–Hadamard matrices H (entries ±1, size
n = 2^⌈log₂ d⌉, the input zero-padded to n) and diagonal matrices, in blocks
of n frequencies, as many blocks as the D' frequencies need:

* ``sorf`` (Yu et al., 2016, "Orthogonal Random Features"): block rows
  H D₁ H D₂ H D₃ with Rademacher diagonals Dᵢ.  The rows of one block are
  orthogonal, like those of ``'orthogonal'``, and nearly uniform in
  direction.
* ``fastfood`` (Le, Sarlós & Smola, 2013): block rows H G Π H B, B Rademacher,
  Π a uniform permutation, G a diagonal of standard normals.  Row j of
  H G Π H B is Σₖ H_jk gₖ uₖ over the orthogonal rows uₖ (norm √n) of
  Π H B: given Π and B, an isotropic Gaussian vector N(0, n I), so its
  direction is uniform on the sphere (its norm is √n‖g‖ for every row).

Every row is then rescaled to a radius drawn from the kernel's radial
distribution (``KernelSpec.radial_norms`` in n dimensions), as
``sampling='orthogonal'`` does: the row's direction times an independent
radius is distributed as the spectral density in n dimensions, whose
restriction to the first d coordinates (the zero padding) is the density in
d dimensions.  So every radial kernel (rbf, matern) works; for Fastfood each
frequency is then exactly distributed as p(ω) (the features are unbiased),
for SORF nearly (its bias shrinks like 1/√n; Yu et al., 2016, so SORF's
blocks are at least 64 wide: ``SORF_MIN_LOG2``).  Kernels whose
spectral density is not radial (laplacian, cauchy) cannot be represented.

Fastfood's error is above i.i.d. features' at equal D, by construction:
given c = Π H B Δ (Δ = x − y), the arguments of rows j, j' of a block are
jointly Gaussian with correlation ρ = (H c²)_{j⊕j'} / Σₖ cₖ², and
Σ_{j≠j'} ρ² = n (n Σc⁴ / (Σc²)² − 1) ≈ 2n when c is close to Gaussian.
With Cov(cos a, cos a') ≈ e^{−σ²} ρ² σ⁴ / 2 (σ² the arguments' variance)
each block adds a variance of the order of the i.i.d. one, n (1 − e^{−σ²})² / 2,
whatever n: measured 1.2–1.5× the i.i.d. mean error
(bench/results/approx_error_dims.md).  SORF's rows are orthogonal within a
block, which lowers the variance as ``'orthogonal'`` does.

The draw (``StructuredDraw``) holds only the diagonals (int8 signs, float64
G), the permutations (int32) and one unit multiplier per frequency,
``radius_j / ‖row_j‖`` (the rows' norms are known: n^{3/2} for SORF,
√n·‖g‖ for Fastfood).  Gamma enters in one place, ``multipliers``: the unit
multipliers times the kernel's ``frequency_scale(gamma)``, so one draw serves
a whole gamma path with features bit-identical to a fit at each gamma.

The features are computed by the compiled kernel ``_ext._structured_fast``
(a fused, vectorised Walsh–Hadamard transform with the sin/cos epilogue,
straight into the output; see ``_ext/include/randfeat_fwht.h``), with the
scaling conventions of ``RandomFourierFeatures``: ``cossin`` is
sqrt(1/D') [cos a, sin a] (an odd D: the last frequency gives the single
column sqrt(2) cos(a + b)), ``cos`` is sqrt(2/D) cos(a + b).
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.sparse as sp

from .._core.memory_budget import check_memory
from .._core.threads import threads_for
from .._ext import _structured_fast
from .contract import MapState

STRUCTURED_SAMPLINGS = ("sorf", "fastfood")

_INT32_MAX = np.iinfo(np.int32).max


#: log₂ of SORF's smallest block: 64.  A SORF row's direction is only close
#: to uniform on the sphere when the block is large (Yu et al., 2016, bound the
#: bias by O(1/√n)); in blocks of 2–8 it is far from uniform and the kernel
#: error stays at 0.3–0.5 whatever D (measured on d = 2, 5: blocks of 16 leave
#: 0.16 / 0.07 at D = 32000, blocks of 32 0.021 / 0.023, blocks of 64 0.014 /
#: 0.020 against ``'orthogonal'``'s 0.016 / 0.021; d = 12 in blocks of 16:
#: 0.029, of 64: 0.023).  Zero padding to 64 leaves the kernel unchanged (the
#: radius is drawn in 64 dimensions, whose density restricted to the first d
#: coordinates is the d-dimensional one) and costs log₂ 64 = 6 steps per value.
SORF_MIN_LOG2 = 6


def block_log2(d, sampling="fastfood"):
    """Return log₂ of the block size n: the smallest power of two >= d (n = 1 for d = 1).

    Parameters
    ----------
    d : int
        Input dimension.
    sampling : {'sorf', 'fastfood'}, default='fastfood'
        ``'sorf'`` blocks are at least ``2**SORF_MIN_LOG2`` (its bias at small blocks).

    Returns
    -------
    int
    """
    log_n = max(0, int(d - 1).bit_length())
    return max(log_n, SORF_MIN_LOG2) if sampling == "sorf" else log_n


@dataclass(frozen=True, eq=False)
class StructuredDraw:
    """The unit draw of a structured map: O(D) numbers, no d × D matrix.

    Attributes
    ----------
    sampling : {'sorf', 'fastfood'}
    n_features : int
        Input dimension d.
    log_n : int
        Block size n = 2**log_n >= d.
    n_freq : int
        Frequencies D' (n_blocks = ⌈D'/n⌉ blocks of n are computed).
    signs : ndarray of int8, shape (3, n_blocks * n) or (1, n_blocks * n)
        Rademacher diagonals, in the order applied to x: SORF D₃, D₂, D₁;
        Fastfood B.
    perm : ndarray of int32, shape (n_blocks, n), or None
        Fastfood: Π of each block, (Π v)_k = v[perm[b, k]].
    gauss : ndarray of float64, shape (n_blocks * n,), or None
        Fastfood: the diagonal G.
    radial : ndarray of float64, shape (n_freq,)
        Unit multipliers: the radius of frequency j (unit density) divided
        by the norm of its structured row; ``multipliers`` applies gamma.
    """

    sampling: str
    n_features: int
    log_n: int
    n_freq: int
    signs: np.ndarray
    perm: Optional[np.ndarray]
    gauss: Optional[np.ndarray]
    radial: np.ndarray

    @property
    def block_size(self):
        """n, the size of one Walsh–Hadamard block."""
        return 1 << self.log_n

    @property
    def n_blocks(self):
        """Blocks of n frequencies computed per row."""
        return self.signs.shape[1] >> self.log_n

    @property
    def nbytes(self):
        """Bytes held by the draw's arrays (O(D))."""
        return sum(a.nbytes for a in (self.signs, self.perm, self.gauss, self.radial) if a is not None)


def check_kernel(spec, sampling):
    """Raise ValueError unless ``spec``'s spectral density is radial (what SORF and Fastfood represent).

    Parameters
    ----------
    spec : KernelSpec
    sampling : {'sorf', 'fastfood'}
    """
    if spec.radial_norms is None:
        raise ValueError(
            f"sampling={sampling!r} does not apply to kernel={spec.name!r}: structured "
            f"frequencies are Walsh-Hadamard rows rescaled to a random radius, which represents "
            f"only spherically symmetric spectral densities, and this kernel's has independent "
            f"coordinates; use kernel='rbf' or 'matern', or sampling='iid' or 'qmc'"
        )


def draw_structured(spec, sampling, d, n_freq, nu, rng):
    """Draw the parameters of ``n_freq`` structured frequencies in ``d`` dimensions (O(n_freq + d) memory).

    Parameters
    ----------
    spec : KernelSpec
        A kernel with ``radial_norms`` (rbf, matern).
    sampling : {'sorf', 'fastfood'}
    d, n_freq : int
    nu : float
        Matérn smoothness (ignored by rbf).
    rng : numpy.random.Generator

    Returns
    -------
    draw : StructuredDraw
    """
    if sampling not in STRUCTURED_SAMPLINGS:
        raise ValueError(f"sampling must be one of {STRUCTURED_SAMPLINGS}, got {sampling!r}")
    check_kernel(spec, sampling)
    log_n = block_log2(d, sampling)
    n = 1 << log_n
    n_blocks = -(-n_freq // n)
    size = n_blocks * n
    if log_n > 30 or size > _INT32_MAX:
        raise ValueError(f"{n_freq} structured frequencies in blocks of {n} exceed 2**31 values per row")
    check_memory(
        size * (3 + 4 + 8) + 8 * n_freq,
        f"drawing {n_freq} structured frequencies in {d} dimensions",
        "use a smaller n_components",
    )
    if sampling == "sorf":
        signs = _rademacher(rng, (3, size))
        # Each row of H D1 H D2 H D3 (H unnormalised) has norm n^(3/2).
        radial = spec.radial_norms(rng, n, n_freq, nu) * float(n) ** -1.5
        return StructuredDraw(sampling, d, log_n, n_freq, signs, None, None, radial)
    signs = _rademacher(rng, (1, size))
    perm = rng.permuted(np.broadcast_to(np.arange(n, dtype=np.int32), (n_blocks, n)), axis=1)
    gauss = rng.standard_normal(size)
    # Every row of block b of H G P H B has norm sqrt(n) * ||g_b||.
    g = gauss.reshape(n_blocks, n)
    row_norms = np.sqrt(float(n)) * np.sqrt(np.einsum("ij,ij->i", g, g))
    radial = spec.radial_norms(rng, n, n_freq, nu) / np.repeat(row_norms, n)[:n_freq]
    return StructuredDraw(sampling, d, log_n, n_freq, signs, perm.astype(np.int32), gauss, radial)


def _rademacher(rng, shape):
    return (rng.integers(0, 2, size=shape, dtype=np.int8) * np.int8(2) - np.int8(1)).astype(np.int8)


def multipliers(spec, draw, gamma):
    """Return the per-frequency multipliers at ``gamma`` (float64, n_freq): the one place gamma enters.

    Parameters
    ----------
    spec : KernelSpec
    draw : StructuredDraw
    gamma : float

    Returns
    -------
    mult : ndarray of shape (n_freq,), float64
    """
    return draw.radial * spec.frequency_scale(float(gamma))


def structured_layout(log_n, n_freq):
    """Return ``(n_blocks, length)``: blocks of 2**log_n for n_freq frequencies, and the kernel's buffer length.

    ``length`` is n_blocks · n rounded up to a multiple of max(n, LANES), the
    widest vector of the kernel (padding blocks are zero).
    """
    n = 1 << log_n
    n_blocks = -(-n_freq // n)
    per = max(n, _structured_fast.LANES)
    return n_blocks, -(-(n_blocks * n) // per) * per


@dataclass(frozen=True, eq=False)
class _KernelParams:
    """The draw laid out for the kernel in one dtype (aligned, zero-padded diagonals)."""

    diag0: np.ndarray
    diag1: np.ndarray
    diag2: np.ndarray
    perm: np.ndarray
    mult: np.ndarray


def kernel_params(draw, mult, dtype):
    """Lay a draw out for ``_structured_fast`` in ``dtype`` (O(D) copies).

    Parameters
    ----------
    draw : StructuredDraw
    mult : ndarray of shape (n_freq,)
        From ``multipliers``.
    dtype : numpy dtype (float32 or float64)

    Returns
    -------
    params : _KernelParams
    """
    dtype = np.dtype(dtype)
    n_blocks, length = structured_layout(draw.log_n, draw.n_freq)
    size = n_blocks << draw.log_n

    def diag(values):
        out = _structured_fast.aligned_zeros(length, dtype)
        out[:size] = values
        return out

    empty = np.zeros(0, dtype=dtype)
    mult = np.ascontiguousarray(mult, dtype=dtype)
    if draw.sampling == "sorf":
        d0, d1, d2 = (diag(s) for s in draw.signs)
        return _KernelParams(d0, d1, d2, np.zeros(0, dtype=np.int32), mult)
    # Fastfood's gather as indices into the whole buffer; the padding gathers itself.
    perm = np.arange(length, dtype=np.int32)
    offsets = np.arange(0, size, draw.block_size, dtype=np.int32)
    perm[:size] = (draw.perm + offsets[:, None]).ravel()
    return _KernelParams(diag(draw.signs[0]), diag(draw.gauss), empty, perm, mult)


def _overflow_bound(X, draw, params):
    """An upper bound of |a_j| and every intermediate value, from max|x| (no pass over the output)."""
    values = X.data if sp.issparse(X) else X
    max_x = float(np.abs(values).max()) if values.size else 0.0
    n = float(draw.block_size)
    mult = float(np.abs(params.mult).max())
    if draw.sampling == "sorf":
        grow = n * n * draw.n_features  # |H D H D H D x| <= n² ‖x‖₁
    else:
        grow = n * float(np.abs(draw.gauss).max()) * draw.n_features
    return max_x * grow * max(1.0, mult)


def structured_features(X, draw, mult, feature_map, n_components, b, n_threads, *, epilogue=None, params=None):
    """Return the structured random Fourier features of X (validated: float32/float64, dense or CSR).

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, d)
    draw : StructuredDraw
    mult : ndarray of shape (n_freq,)
        ``multipliers(spec, draw, gamma)``.
    feature_map : {'cossin', 'cos'}
    n_components : int
        Output width D: ``cossin`` needs n_freq = ⌈D/2⌉, ``cos`` n_freq = D.
    b : ndarray or None
        ``cos``: the n_freq phases; ``cossin`` with an odd D: one phase (the
        last frequency's single column); else None.
    n_threads : int
    epilogue : {'args'} or None
        ``'args'``: return the arguments a = Wᵀx themselves (n_freq columns;
        tests and benchmarks).
    params : _KernelParams or None
        ``kernel_params(draw, mult, X.dtype)``, if already laid out.

    Returns
    -------
    Z : ndarray of shape (n_samples, n_components), X's dtype, C order
    """
    dtype = X.dtype
    n_freq = draw.n_freq
    if X.shape[1] != draw.n_features:
        raise ValueError(f"X has {X.shape[1]} features, the draw {draw.n_features}")
    odd, phase = False, 0.0
    if epilogue == "args":
        width, scale, b = n_freq, 1.0, None
    elif feature_map == "cossin":
        if n_freq != (n_components + 1) // 2:
            raise ValueError(f"cossin with {n_components} columns needs {(n_components + 1) // 2} frequencies")
        epilogue, width, scale = "cossin", n_components, np.sqrt(1.0 / n_freq)
        odd = n_components % 2 == 1
        phase = float(b[0]) if odd else 0.0
        b = None
    elif feature_map == "cos":
        if n_freq != n_components:
            raise ValueError(f"cos with {n_components} columns needs {n_components} frequencies")
        epilogue, width, scale = "cos", n_components, np.sqrt(2.0 / n_freq)
    else:
        raise ValueError(f"feature_map must be 'cossin' or 'cos', got {feature_map!r}")
    check_memory(
        X.shape[0] * width * dtype.itemsize,
        f"the features of {X.shape[0]} rows ({X.shape[0]} x {width} {dtype.name})",
        "fit a model on them without holding them with Ridge(features=...), or transform X in chunks of rows",
    )
    if params is None or params.mult.dtype != dtype:
        params = kernel_params(draw, mult, dtype)
    b = np.zeros(0, dtype=dtype) if b is None else np.ascontiguousarray(b, dtype=dtype)
    out = np.empty((X.shape[0], width), dtype=dtype)  # pages first touched by the writing threads
    n_threads = threads_for("fourier_output", out.size, n_threads)
    args = (draw.log_n, params.diag0, params.diag1, params.diag2, params.perm, params.mult, b, out,
            draw.sampling, epilogue, odd, phase, float(scale), n_threads)
    if sp.issparse(X):
        index_dtype = np.result_type(X.indices.dtype, X.indptr.dtype)
        if index_dtype not in (np.int32, np.int64):
            index_dtype = np.int64
        _structured_fast.structured_csr(X.data, X.indices.astype(index_dtype, copy=False),
                                        X.indptr.astype(index_dtype, copy=False), X.shape[1], *args)
    else:
        _structured_fast.structured_dense(X, *args)
    limit = float(np.finfo(dtype).max) / 4
    if _overflow_bound(X, draw, params) >= limit and not np.isfinite(out).all():
        raise ValueError(
            f"the structured transform of X overflows {dtype} (X has values up to "
            f"{float(np.abs(X.data if sp.issparse(X) else X).max()):.3g}), so the features would be NaN. "
            f"Rescale X (e.g. sklearn.preprocessing.StandardScaler) or use a smaller gamma."
        )
    return out


@dataclass(frozen=True, eq=False)
class StructuredState(MapState):
    """The fitted state of ``RandomFourierFeatures(sampling='sorf' or 'fastfood')``: O(D) numbers.

    Attributes
    ----------
    n_features_out : int
        D.
    draw : StructuredDraw
        The unit draw (diagonals, permutations, unit multipliers), shared by
        every gamma of a path.
    mult : ndarray of shape (n_freq,), float64
        ``multipliers(spec, draw, gamma)``.
    b : ndarray of shape (n_freq,) or (1,), or None
        Phases as in ``FourierState``, in the training data's dtype.
    gamma : float
    cossin : bool
    """

    draw: StructuredDraw
    mult: np.ndarray
    b: Optional[np.ndarray]
    gamma: float
    cossin: bool

    def check(self):
        """Raise ValueError unless the draw, multipliers and phases agree (what the kernel will read); O(D)."""
        super().check()
        draw, D = self.draw, self.n_features_out
        if not isinstance(draw, StructuredDraw) or draw.sampling not in STRUCTURED_SAMPLINGS:
            raise ValueError("the structured state needs a StructuredDraw of 'sorf' or 'fastfood'")
        n_freq = (D + 1) // 2 if self.cossin else D
        if not (isinstance(draw.log_n, int) and 0 <= draw.log_n <= 30 and draw.n_freq == n_freq
                and isinstance(draw.n_features, int) and 1 <= draw.n_features <= draw.block_size):
            raise ValueError(f"the structured draw does not fit n_features_out={D}")
        n = draw.block_size
        size = -(-n_freq // n) * n
        rows = 3 if draw.sampling == "sorf" else 1
        _check_array(draw.signs, np.int8, (rows, size), "signs")
        _check_array(draw.radial, np.float64, (n_freq,), "radial")
        _check_array(self.mult, np.float64, (n_freq,), "mult")
        if draw.sampling == "fastfood":
            _check_array(draw.perm, np.int32, (size // n, n), "perm")
            _check_array(draw.gauss, np.float64, (size,), "gauss")
        n_phases = n_freq if not self.cossin else (1 if D % 2 else 0)
        if n_phases == 0 and self.b is not None:
            raise ValueError("random_offset_ must be None for an even cossin map")
        if n_phases and not (isinstance(self.b, np.ndarray) and self.b.shape == (n_phases,)
                             and self.b.dtype in (np.float32, np.float64)):
            raise ValueError(f"random_offset_ must be an array of {n_phases} phases")

    def index_bounds(self):
        """The draw's signs in [-1, 1] (a diagonal of ±1; 0 would only zero a row), permutations within their blocks."""
        bounds = [("the structured draw's signs", self.draw.signs, -1, 2)]
        if self.draw.perm is not None:
            bounds.append(("the structured draw's permutations", self.draw.perm, 0, self.draw.block_size))
        return bounds

    @property
    def n_features_in(self):
        """int: the draw's number of input features."""
        return int(self.draw.n_features)

    def features(self, X, n_threads):
        """The features of validated X (the kernel's layout of the draw kept per dtype, not pickled)."""
        cache = self.__dict__.setdefault("_params", {})
        params = cache.get(X.dtype.str)
        if params is None:
            params = cache[X.dtype.str] = kernel_params(self.draw, self.mult, X.dtype)
        return structured_features(X, self.draw, self.mult, "cossin" if self.cossin else "cos",
                                   self.n_features_out, self.b, n_threads, params=params)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_params", None)
        return state


def _check_array(a, dtype, shape, name):
    if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.shape == shape):
        raise ValueError(f"the structured draw's {name} must be a {np.dtype(dtype).name} array of shape {shape}")
