"""Ridge leverage scores: Nyström landmarks and Fourier frequencies sampled by their leverage.

The ridge leverage score of row i of a kernel matrix K (n × n) at
regularisation λ is τᵢ(λ) = [K(K + λI)⁻¹]ᵢᵢ, with d_eff(λ) = Σᵢ τᵢ the
effective dimension.  With φ the kernel's feature map and C = Σⱼ φⱼφⱼᵀ,
τᵢ = φᵢᵀ(C + λ)⁻¹φᵢ.  Both samplers below estimate such scores in
O(n·m²) and never form an n × n matrix.

**Nyström landmarks** (``Nystroem(landmarks='leverage')``): recursive ridge
leverage score sampling (Musco & Musco, "Recursive Sampling for the Nyström
Method", NeurIPS 2017), written from the paper.  A chain of uniform halves
I₀ ⊃ I₁ ⊃ … of the rows ends in a set small enough to keep whole; going
back up, the weighted landmarks (S, v) of Iₜ₊₁ (Σⱼ vⱼφⱼφⱼᵀ ≈ C of Iₜ₊₁,
doubled to stand for Iₜ) give every row of Iₜ the estimate

    l̃ᵢ = (k(xᵢ, xᵢ) − kᵢₛ V^½ (V^½ Kₛₛ V^½ + λI)⁻¹ V^½ kₛᵢ) / λ = φᵢᵀ(Cₛ + λ)⁻¹φᵢ,

and Iₜ's own landmarks are drawn by independent coins with probabilities
pᵢ = min(1, c·l̃ᵢ) (c gives m of them in expectation), weights vᵢ = 1/pᵢ.
If Cₛ + λ is within a factor (1 ± ε) of C + λ, the estimates satisfy
τᵢ/(1 + ε) ≤ l̃ᵢ ≤ τᵢ/(1 − ε) (operator monotonicity of the inverse); for
unweighted landmarks, Cₛ ≼ C and l̃ᵢ ≥ τᵢ exactly.  At the top, the
pool's own weighted landmarks (drawn with the estimates from its half) give
the final estimates, and the m Nyström landmarks are drawn without
replacement with probabilities proportional to them (Efraimidis &
Spirakis's exponential keys), since Nyström features use K(L, L)⁻¹ᐟ² and
duplicates or weights would change nothing.  Every level costs O(|Iₜ|·m²)
(blocks of 2048 rows, on ``n_jobs`` threads, the same bits for any count),
O(n·m²) in all.

**Leverage-weighted Fourier features** (``RandomFourierFeatures(sampling=
'leverage')``): the empirical form (Li, Ton, Oglic & Sejdinovic, "Towards a
Unified Analysis of Random Fourier Features", ICML 2019) of sampling from the
ridge leverage function (Avron et al., ICML 2017).  A pool of M frequencies
is drawn i.i.d. from the spectral density; on a uniform sample of rows, each
pool frequency's leverage is the leverage of its feature columns (cos and
sin) in Φ (rows × 2M, Φ Φᵀ ≈ K): lⱼ = Σ_{cos, sin} φ_colᵀ(ΦΦᵀ + λI)⁻¹φ_col.
D' frequencies are then drawn with replacement with probabilities
qⱼ = lⱼ/Σl and weighted by 1/(M·qⱼ): z(x)ᵀz(y) = (1/D')Σₜ cos(ωₜᵀ(x−y))/(M·q_{jₜ})
has the pool's average as expectation, so E[z(x)ᵀz(y)] = k(x, y) still.

The regularisation λ is in the scale of the n × n kernel matrix of the
training rows, the scale of ``Ridge(alpha=...)`` fitted on the features (the
λ of the statistical guarantees: m ≳ d_eff(λ)·log d_eff(λ) landmarks or
features then suffice for the ridge fit at that alpha).  ``'auto'`` chooses
λ where the effective dimension equals the budget, d_eff(λ) = m (landmarks)
or D' (frequencies): for Nyström from the estimated scores of a uniform
sample of 2048 rows (Σ l̃ᵢ(λ) is cheap for every λ once the landmarks'
kernel is diagonalised), for Fourier features from the eigenvalues of the
sampled rows' kernel.  (A pilot run of the targets m, m/2, m/4 and m/8 on
the benchmark's data sets, bench/leverage.py, found m best or tied, the
differences within the seeds' spread.)
"""

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._core.memory_budget import check_memory
from .._core.threads import single_threaded_blas
from .fourier_transform import fourier_features
from .kernels import UnitFrequencies, scale_frequencies
from .nystroem_kernels import kernel_block, prepare_landmarks
from .sampling import draw_unit_frequencies

#: Nyström landmarks are chosen among a uniform pool of min(n, max(POOL_ROWS, POOL_ROWS_PER_LANDMARK·m)) rows,
#: the same for in-memory and Dask input (whose rows the pool brings to the client).
POOL_ROWS = 20000
POOL_ROWS_PER_LANDMARK = 20
#: Rows on which the Fourier pool's leverage is estimated: at most max(this, 2·n_freq).
FOURIER_ROWS = 2000
#: Pool frequencies per output frequency (Li et al. draw a pool larger than D).
FOURIER_POOL_FACTOR = 4
#: 'auto' chooses λ where the (estimated) effective dimension is m / AUTO_DEFF_DIVISOR.
AUTO_DEFF_DIVISOR = 1
_NOT_PSD = {"sigmoid": "the sigmoid kernel", "additive_chi2": "scikit-learn's additive_chi2 (−Σ(x−y)²/(x+y) ≤ 0)"}


def _coins(rng, scores, m):
    """Keep each row with probability min(1, c·score), c giving m rows in expectation; return (kept, 1/p)."""
    s = np.maximum(scores, 0.0)
    if s.size <= m or not s.any():
        return np.arange(s.size), np.ones(s.size)
    lo, hi = 0.0, m / s[s > 0].min()
    c = m / s.sum()
    for _ in range(60):  # bisection on c: Σ min(1, c·s) = m
        total = np.minimum(1.0, c * s).sum()
        if abs(total - m) < 1e-9 * m:
            break
        lo, hi = (c, hi) if total < m else (lo, c)
        c = 0.5 * (lo + hi)
    p = np.minimum(1.0, c * s)
    kept = np.flatnonzero(rng.random(s.size) < p)
    if kept.size == 0:  # possible for small m: the likeliest row stands for the set
        kept = np.array([int(np.argmax(p))])
    return kept, 1.0 / p[kept]


def weighted_choice(rng, weights, m):
    """m distinct indices, drawn one after another with probabilities ∝ weights (exponential keys).

    Parameters
    ----------
    rng : numpy.random.Generator
    weights : ndarray of shape (n,), non-negative
    m : int, at most n

    Returns
    -------
    ndarray of int64, shape (m,), in the order drawn
    """
    w = np.asarray(weights, dtype=np.float64)
    pos = w[w > 0]
    # Rows of score 0 (e.g. zero rows of a linear kernel) come last, in random order.
    w = np.where(w > 0, w, (pos.min() if pos.size else 1.0) * 1e-12)
    keys = rng.standard_exponential(w.size) / w  # the smallest m keys are the draw
    idx = np.argpartition(keys, m - 1)[:m] if m < w.size else np.arange(w.size)
    return idx[np.argsort(keys[idx], kind="stable")].astype(np.int64)


class _PoolKernel:
    """The kernel between rows of a pool (float64), as blocks, and its diagonal."""

    def __init__(self, kernel, rows, index, n_threads):
        self.kernel, self.n_threads = kernel, n_threads
        self.rows = rows.astype(np.float64) if sp.issparse(rows) else np.asarray(rows, dtype=np.float64)
        self.index = index  # the pool's rows in the training data (precomputed: its columns)

    def block(self, I, S, n_threads=None):
        """k(rows I, rows S), float64, on ``n_threads`` threads (default: the pool's)."""
        if self.kernel.name == "precomputed":
            B = self.rows[I][:, self.index[S]]
            return np.asarray(B.toarray() if sp.issparse(B) else B, dtype=np.float64)
        lm = prepare_landmarks(self.kernel, self.rows[S], np.float64)
        return kernel_block(self.kernel, self.rows[I], lm, self.n_threads if n_threads is None else n_threads)

    def diagonal(self):
        name, n = self.kernel.name, self.rows.shape[0]
        if name in ("rbf", "laplacian", "cauchy", "matern", "chi2", "skewed_chi2"):
            return np.ones(n)  # k(x, x) = 1 for these
        if name == "precomputed":
            return np.asarray(self.rows[np.arange(n), self.index]).ravel().astype(np.float64)
        out = np.empty(n)
        for s in range(0, n, 64):  # small diagonal blocks: n·64·d work
            J = np.arange(s, min(n, s + 64))
            out[J] = np.diagonal(self.block(J, J))
        return out


def solve_lambda(d_eff, target, lo, hi):
    """The λ in [lo, hi] where the decreasing function d_eff(λ) equals target (bisection in log λ)."""
    if d_eff(lo) <= target:
        return lo
    if d_eff(hi) >= target:
        return hi
    for _ in range(100):
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if d_eff(mid) > target else (lo, mid)
        if hi < lo * (1.0 + 1e-6):
            break
    return float(np.sqrt(lo * hi))


def auto_target(m):
    """The effective dimension ``'auto'`` aims at with m landmarks or frequencies."""
    return max(1.0, m / AUTO_DEFF_DIVISOR)


#: Rows whose kernel block with the landmarks is held at a time (fixed: results do not depend on threads).
_BLOCK_ROWS = 2048


def _scores(pk, I, diag_I, S, v, lam, rng=None, target=None):
    """(l̃ for the rows I from landmarks S with squared weights v, λ).

    λ is ``lam``, or with ``target`` the λ where the estimated effective
    dimension Σ_{i∈I} l̃ᵢ(λ) (from a uniform sample of ``_BLOCK_ROWS`` rows
    of I, scaled) equals ``target``.  With V^½ Kₛₛ V^½ = Q diag(σ) Qᵀ and
    u = Qᵀ V^½ kₛ(x): l̃(x) = (k(x, x) − Σⱼ uⱼ²/(σⱼ + λ))/λ.
    """
    root = np.sqrt(v)
    with single_threaded_blas():
        A = pk.block(S, S) * root[:, None] * root[None, :]
        sigma, Q = np.linalg.eigh(0.5 * (A + A.T))
    sigma = np.clip(sigma, 0.0, None)

    def scores(pos, lam_):
        with single_threaded_blas():
            u = (pk.block(I[pos], S, 1) * root[None, :]) @ Q
            return np.maximum(diag_I[pos] - (u * u) @ (1.0 / (sigma + lam_)), 0.0) / lam_

    if target is not None:
        pos = np.sort(rng.permutation(I.size)[:_BLOCK_ROWS]) if I.size > _BLOCK_ROWS else np.arange(I.size)
        with single_threaded_blas():
            u2 = ((pk.block(I[pos], S, 1) * root[None, :]) @ Q) ** 2
        d_pos, factor = diag_I[pos], I.size / pos.size

        def d_eff(lam_):
            return factor * float(np.maximum(d_pos - u2 @ (1.0 / (sigma + lam_)), 0.0).sum()) / lam_

        scale = max(float(diag_I.mean()), 1e-300)
        lam = solve_lambda(d_eff, target, 1e-6 * scale, 1e6 * scale * I.size)
    blocks = [np.arange(s, min(I.size, s + _BLOCK_ROWS)) for s in range(0, I.size, _BLOCK_ROWS)]
    if pk.n_threads > 1 and len(blocks) > 1:
        with ThreadPoolExecutor(min(pk.n_threads, len(blocks))) as pool:
            parts = list(pool.map(lambda pos: scores(pos, lam), blocks))
    else:
        parts = [scores(pos, lam) for pos in blocks]
    return np.concatenate(parts), lam


def recursive_leverage_scores(pk, m, regularization, rng):
    """Ridge leverage score estimates of every pool row (Musco & Musco's recursion), and the λ used.

    Parameters
    ----------
    pk : _PoolKernel
        The pool of n_pool rows.
    m : int
        Landmarks per level (in expectation); the last level keeps up to m rows whole.
    regularization : float or 'auto'
        λ in the scale of the pool's n_pool × n_pool kernel matrix.
    rng : numpy.random.Generator

    Returns
    -------
    scores : ndarray of shape (n_pool,)
    lam : float
    """
    n = pk.rows.shape[0]
    diag = pk.diagonal()
    chain = [np.arange(n)]
    while chain[-1].size > m:
        half = chain[-1][rng.random(chain[-1].size) < 0.5]
        if half.size == 0:  # (a few rows and bad luck) keep the last set whole
            break
        chain.append(half)
    S, v = chain[-1], np.ones(chain[-1].size)  # the smallest set, kept whole: exact
    auto = isinstance(regularization, str)
    target = auto_target(m) if auto else None
    for I in reversed(chain[:-1]):
        lam = None if auto else float(regularization) * I.size / n
        # (S, 2v) stands for I: S was drawn from a uniform half of I.
        scores, lam = _scores(pk, I, diag[I], S, 2.0 * v, lam, rng, target)
        kept, inv_p = _coins(rng, scores, m)
        S, v = I[kept], inv_p
    # The last landmarks were drawn from the whole pool with (over-)estimates of
    # its scores: the scores they give are within (1 ± ε) (the pool small enough
    # to be its own landmarks: exact).
    return _scores(pk, chain[0], diag, S, v, None if auto else float(regularization), rng, target)


def pool_size(n_samples, m):
    """Rows a leverage fit reads: all up to ``POOL_ROWS``, else max(POOL_ROWS, POOL_ROWS_PER_LANDMARK·m)."""
    return int(min(n_samples, max(POOL_ROWS, POOL_ROWS_PER_LANDMARK * m)))


def leverage_landmarks(summary, n_components, rng, kernel, *, regularization="auto", n_threads=1):
    """Nyström landmarks drawn by approximate ridge leverage scores (``Nystroem(landmarks='leverage')``).

    Parameters
    ----------
    summary : InputSummary
        Of the training input; reads ``pool_size(n_samples, n_components)``
        rows, chosen uniformly, through ``summary.rows`` (in memory and on Dask alike).
    n_components : int
        m, at most n_samples.
    rng : RandomState or Generator
        From ``random_state`` (a RandomState seeds a Generator from its stream).
    kernel : NystroemKernel
    regularization : float or 'auto'
        λ on the scale of the n × n training kernel matrix (Ridge's alpha on the features).
    n_threads : int

    Returns
    -------
    ndarray of int64, shape (n_components,)
        Rows of the training data, distinct.
    """
    if kernel.name in _NOT_PSD:
        raise ValueError(f"landmarks='leverage' needs a positive semi-definite kernel, and {_NOT_PSD[kernel.name]} "
                         f"is not; use landmarks='uniform'")
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng.randint(0, 2**31 - 1, size=4))
    n, m = summary.n_samples, int(n_components)
    n_pool = pool_size(n, m)
    check_memory(8 * n_pool * (summary.n_features + 3 * m), f"the leverage scores of {n_pool} rows with {m} "
                 f"landmarks (float64)", "use fewer landmarks or landmarks='uniform'")
    index = np.sort(rng.permutation(n)[:n_pool]) if n_pool < n else np.arange(n)
    pk = _PoolKernel(kernel, summary.rows(index), index, n_threads)
    lam = regularization if isinstance(regularization, str) else float(regularization) * n_pool / n
    scores, _ = recursive_leverage_scores(pk, m, lam, rng)
    return index[weighted_choice(rng, scores, m)]


# ------------------------------------------------------------------ Fourier
@dataclass(frozen=True)
class FourierLeverageDraw:
    """The random part of a leverage-weighted Fourier draw (shared by every gamma of a path).

    Attributes
    ----------
    pool : UnitFrequencies
        M unit frequencies from the spectral density.
    rows : ndarray of int64
        The training rows the leverage is estimated on.
    uniforms : ndarray of shape (n_freq,)
        For the inverse-CDF resampling of the pool.
    b : ndarray of shape (n_freq,) or None
        Phases of the ``cos`` map.
    """

    pool: object
    rows: np.ndarray
    uniforms: np.ndarray
    b: np.ndarray | None


def draw_fourier_leverage(spec, d, n_freq, nu, n_samples, rng, *, with_offset):
    """Draw the pool, the row sample, the resampling uniforms and the phases (in this order)."""
    M = FOURIER_POOL_FACTOR * n_freq
    n_rows = min(n_samples, max(FOURIER_ROWS, 2 * n_freq))
    check_leverage_cost(n_rows, M, d)  # before drawing anything
    pool, _ = draw_unit_frequencies(spec, "iid", d, M, nu, rng, with_offset=False)
    rows = np.sort(rng.permutation(n_samples)[:n_rows]) if n_rows < n_samples else np.arange(n_samples)
    uniforms = rng.random(n_freq)
    b = rng.uniform(0.0, 2.0 * np.pi, size=n_freq) if with_offset else None
    return FourierLeverageDraw(pool, rows.astype(np.int64), uniforms, b)


#: Floating-point operations above which a Fourier leverage estimate is refused: about 3 minutes on
#: one core (it runs on one BLAS thread, for results independent of n_jobs).  Measured by this
#: count: 5.1e10 in 0.75 s (D = 400, 3000 rows), 8.5e11 in 14.5 s (D = 4000), ~6e10 per second.
FOURIER_LEVERAGE_MAX_FLOPS = 1e13


def frequency_leverage_flops(n, M, d):
    """Predicted floating-point operations of ``frequency_leverage`` on n rows, M frequencies, d features.

    Parameters
    ----------
    n, M, d : int

    Returns
    -------
    float
    """
    n, M, d = float(n), float(M), float(d)
    if 2 * M <= n:  # features' space: Φ, ΦᵀΦ, its eigendecomposition
        return 2 * n * M * d + 2 * n * (2 * M) ** 2 + 10 * (2 * M) ** 3
    # rows' space: Φ twice, ΦΦᵀ, its eigendecomposition, the projections
    return 4 * n * M * d + 2 * n * n * (2 * M) + 10 * n ** 3 + 2 * n * n * (2 * M)


def check_leverage_cost(n, M, d):
    """ValueError, before any work, when the leverage of M frequencies on n rows would take too long.

    Parameters
    ----------
    n, M, d : int
        Rows, pool frequencies, input features.
    """
    flops = frequency_leverage_flops(n, M, d)
    if flops > FOURIER_LEVERAGE_MAX_FLOPS:
        raise ValueError(
            f"sampling='leverage' would estimate the leverage of {M} pool frequencies ({M // FOURIER_POOL_FACTOR} "
            f"drawn) on {n} rows: about {flops:.1e} floating-point operations, roughly "
            f"{flops / 6e10 / 60:.0f} minutes on one core (the cost grows like the rows sampled squared times the "
            f"pool). Use a smaller n_components (the rows sampled are max({FOURIER_ROWS}, 2 x frequencies)), or "
            f"sampling='orthogonal' or 'iid', which cost nothing at fit."
        )


def frequency_leverage(X, W, regularization, n_threads, chunk=512):
    """Leverage of each column frequency of W on the rows X, and the λ used.

    Computed in the smaller of the two spaces: the rows' (eigenvalues of
    ΦΦᵀ, n_rows × n_rows, accumulated over chunks of frequencies) or the
    features' (ΦᵀΦ, 2M × 2M); both give the same scores.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_rows, d), float64
    W : ndarray of shape (d, M), float64
    regularization : float or 'auto'
        λ in the scale of the n_rows × n_rows kernel matrix.
    n_threads : int
    chunk : int
        Frequencies whose features are held at a time (rows' space).

    Returns
    -------
    scores : ndarray of shape (M,)
        lⱼ = Σ over ωⱼ's cos and sin columns of φᵀ(ΦΦᵀ + λI)⁻¹φ, Φ = [cos XW, sin XW]/√M.
    lam : float
    """
    n, M = X.shape[0], W.shape[1]
    check_leverage_cost(n, M, X.shape[1])
    side = min(n, 2 * M)
    check_memory(8 * (2 * side * side + 2 * n * min(2 * chunk, 2 * M)), f"the leverage of {M} frequencies on {n} "
                 f"rows (float64)", "use a smaller n_components or sampling='iid'")

    def features(s, width):
        Wc = np.ascontiguousarray(W[:, s : s + width])
        # fourier_features scales by 1/√(its width); Φ's columns need 1/√M.
        return fourier_features(X, Wc, None, True, n_threads) * np.sqrt(Wc.shape[1] / M)

    def regularize(sigma, trace):
        if not isinstance(regularization, str):
            return float(regularization)
        # σ are the eigenvalues of ΦΦᵀ ≈ K on the rows (those of ΦᵀΦ: the same nonzero ones).
        scale = max(trace / n, 1e-300)
        return solve_lambda(lambda lam: float((sigma / (sigma + lam)).sum()), auto_target(M / FOURIER_POOL_FACTOR),
                            1e-6 * scale, 1e6 * scale * n)

    with single_threaded_blas():
        if 2 * M <= n:  # features' space: diag(G(G + λ)⁻¹), G = ΦᵀΦ
            F = features(0, M)
            sigma, V = np.linalg.eigh(F.T @ F)
            sigma = np.clip(sigma, 0.0, None)
            lam = regularize(sigma, float(np.einsum("ij,ij->", F, F)))
            col = (V * V) @ (sigma / (sigma + lam))
            return col[:M] + col[M:], lam
        K = np.zeros((n, n))
        for s in range(0, M, chunk):
            F = features(s, chunk)
            K += F @ F.T
        sigma, Q = np.linalg.eigh(0.5 * (K + K.T))
        sigma = np.clip(sigma, 0.0, None)
        lam = regularize(sigma, float(np.trace(K)))
        P = Q / np.sqrt(sigma + lam)[None, :]
        scores = np.empty(M)
        for s in range(0, M, chunk):
            B = P.T @ features(s, chunk)
            col = np.einsum("ij,ij->j", B, B)
            c = col.size // 2
            scores[s : s + c] = col[:c] + col[c:]
    return scores, lam


def leverage_frequencies(spec, draw, rows, gamma, regularization, n_samples, n_threads):
    """The pool frequencies resampled by their leverage at ``gamma``, and their importance weights.

    Parameters
    ----------
    spec : KernelSpec
    draw : FourierLeverageDraw
    rows : ndarray or CSR matrix
        The training rows ``draw.rows``.
    gamma : float
    regularization : float or 'auto'
        λ on the scale of the n × n training kernel matrix.
    n_samples : int
        n (to rescale λ to the row sample).
    n_threads : int

    Returns
    -------
    unit : UnitFrequencies
        The n_freq chosen unit frequencies (``scale_frequencies(spec, unit, gamma)`` gives W).
    weights : ndarray of shape (n_freq,), float64
        1/(M·qⱼ) for each chosen frequency j.
    """
    pool, n_freq = draw.pool, draw.uniforms.size
    with np.errstate(over="ignore", invalid="ignore"):
        W_pool = scale_frequencies(spec, pool, gamma)
    if not np.isfinite(W_pool).all():  # the caller reports the overflow on the frequencies
        return _pick(pool, np.arange(n_freq)), np.ones(n_freq)
    X = rows.astype(np.float64) if sp.issparse(rows) else np.ascontiguousarray(rows, dtype=np.float64)
    lam = regularization if isinstance(regularization, str) else float(regularization) * X.shape[0] / n_samples
    scores, _ = frequency_leverage(X, W_pool, lam, n_threads)
    M = scores.size
    q = np.maximum(scores, 0.0)
    q = q / q.sum() if q.sum() > 0 else np.full(M, 1.0 / M)
    cdf = np.cumsum(q)
    # Inverse CDF at the pre-drawn uniforms; side='right' never lands on a frequency of q = 0.
    j = np.minimum(np.searchsorted(cdf, draw.uniforms * cdf[-1], side="right"), M - 1)
    return _pick(pool, j), 1.0 / (M * q[j])


def _pick(pool, j):
    """The unit frequencies ``j`` of the pool."""
    return UnitFrequencies(np.ascontiguousarray(pool.directions[:, j]), None if pool.radial is None else pool.radial[j])
