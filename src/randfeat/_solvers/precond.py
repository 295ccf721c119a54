"""Preconditioners of the CG solver: Jacobi plus an exact block on the heaviest columns.

A ``Preconditioner`` applies M⁻¹ in two parts: a diagonal (``inv_diag``),
which the CG solver fuses into its vector update, and a correction
(``correct``) that overwrites M⁻¹R on the rows the diagonal leaves at zero.
A preconditioner that is not diagonal at all (a Nyström sketch, say) sets
``inv_diag`` to zero and does all its work in ``correct``.

The CG solver (``_solvers/cg.py``) solves A w = b with A = Z_cᵀ W Z_c + αI.  Jacobi
(dividing by diag(A)) equalises the columns, but on sparse features whose
columns have very uneven weight it leaves a wide spectrum.  Random binning
features are the case in point: a bin holding n points has diagonal
n/P + α (P grids), and in a dense region the P bins that cover the same
points form a nearly rank-one block (n/P)·11ᵀ + αI.  Jacobi maps its P − 1
"difference" directions to eigenvalues α/(n/P + α), tiny for heavy bins,
and CG pays for them: 255 iterations to 1e-6 on the 522000-row, 50-grid
bench matrix (bench/ridge.py).

This preconditioner inverts A exactly on the block of the h heaviest
columns (largest diagonal) and uses Jacobi on the rest:

    M⁻¹ = blockdiag((A_HH)⁻¹, diag(A_LL)⁻¹).

A_HH is a principal submatrix of A, so it is positive definite when A is,
and so is M.  Measured with SciPy's CG on the bench matrix (no intercept,
tol 1e-6): h = 2000 → 119 iterations, 4000 → 89, 8000 → 63 (Jacobi 255);
on its first 100000 rows h = 1729 → 66, 3394 → 51 (Jacobi 141).  The block
costs one dense h × h product per iteration (its inverse is kept, so one
pass over h² doubles), so h is capped where that stays well below the cost
of the sparse products (``max_block_size``).  It is the classical treatment
of dense columns in sparse least squares, in its simplest (block-Jacobi)
form.

``make_preconditioner`` chooses between this and the randomized Nyström
preconditioner (``_solvers/nystrom_preconditioner.py``), which also treats the kernel's own
spectrum and so keeps CG's iteration count low as α falls.

Only operators with ``Capability.GRAM_BLOCK`` (sparse Z) get the block: for
dense Z the block's Gram costs N·h² flops, as much as the Cholesky solver's
Gram would.  Without ``Capability.COLUMN_STATISTICS`` there is no diagonal
either and M = I.
"""

import time

import numpy as np
import scipy.linalg

from .._linalg.csr import mirror_triangle
from .._linalg.operator import Capability, MatrixKind
from .nystrom_preconditioner import DEFAULT_MEMORY_BUDGET, build_nystrom
from .._core.threads import single_threaded_blas

#: A column is "heavy" when Jacobi leaves its difference directions at an
#: eigenvalue below 1 / (1 + HEAVY_RATIO), i.e. diag(A)_j > (1 + HEAVY_RATIO)·α.
HEAVY_RATIO = 4.0
#: Upper bound on the block size: its inverse is h² doubles (32 MB at 2048).
MAX_BLOCK = 2048
#: ... and on one-hot block matrices (binning), whose Gram block costs the
#: same whatever h (``onehot_gram_block``: every pair of blocks, every row),
#: not one cache miss per update as the CSR kernel's: the inverse is 128 MB.
#: At 10⁷ rows × 50 grids (bench/scale.py) 3814 columns are heavy; with all
#: of them in the block CG took 14 iterations instead of 39 (2048 of them).
MAX_ONE_HOT_BLOCK = 4096
#: Below this many heavy columns the block is not worth its setup.
MIN_BLOCK = 32
#: ``preconditioner="auto"`` picks Nyström on sparse Z when α <= this · mean(diag A):
#: there Jacobi's iteration count grows like 1/√α (the kernel's spectrum), and
#: above it the Jacobi + block preconditioner already converges in tens of iterations.
NYSTROM_ALPHA_FRACTION = 0.1
#: ... and when Z has at least this many columns: below, Jacobi CG is cheap
#: whatever α is, and a small test problem keeps showing CG's own behaviour.
NYSTROM_MIN_FEATURES = 1000
#: "block": the heavy block is used only when its columns hold at least this
#: share of the diagonal's mass.  Measured (Letter-like binning, alpha=1e-2,
#: 26 classes): share 0.33 (4× gamma) block 418 iterations vs 484 without;
#: share 0.01 (16× gamma) 315 vs 52; Forest-like (share 0.45) 56 vs 155 at
#: alpha=1.  DESIGN.md, "Hard cases".
HEAVY_BLOCK_MIN_SHARE = 0.1
#: Values of the ``preconditioner`` option.
PRECONDITIONERS = ("auto", "jacobi", "block", "nystrom")


def max_block_size(nnz, one_hot=False):
    """Largest block for a sparse Z with ``nnz`` nonzeros: h² <= nnz / 4, capped at MAX_BLOCK.

    One application of the block reads h² doubles; the two sparse products
    of an iteration read ~nnz indices and as many vector entries, so with
    h² <= nnz / 4 the block adds well under half an iteration's work.
    ``one_hot``: Z is a one-hot block matrix, capped at ``MAX_ONE_HOT_BLOCK``.
    """
    return int(min(MAX_ONE_HOT_BLOCK if one_hot else MAX_BLOCK, np.sqrt(max(nnz, 0) / 4.0)))


class HeavyBlockPreconditioner:
    """Exact inverse of A on the heaviest columns (the Jacobi part is the solver's).

    Parameters
    ----------
    columns : ndarray of int, increasing
        The h heavy columns.
    inverse : ndarray (h, h) float64
        (A_HH)⁻¹.
    """

    def __init__(self, columns, inverse):
        self.columns = columns
        self.inverse = inverse

    def apply(self, R, Zr):
        """Set Zr[columns] = (A_HH)⁻¹ R[columns]; return the float64 Σ R∘Zr over those rows.

        Single-threaded BLAS: a threaded product can split its sum by thread
        count, and the solver's results must not depend on it.
        """
        RH = R[self.columns].astype(np.float64)
        with single_threaded_blas():
            ZH = self.inverse @ RH
        Zr[self.columns] = ZH
        return np.einsum("ij,ij->j", RH, ZH)


def _heavy_candidates(ops, diag, alpha):
    """(columns above the ratio, increasing; the block's largest size), or None when no block can be built."""
    if not ops.has(Capability.GRAM_BLOCK) or alpha <= 0:
        return None
    h_max = max_block_size(ops.entries, ops.kind is MatrixKind.ONE_HOT_BLOCKS)
    heavy = np.flatnonzero(diag > (1.0 + HEAVY_RATIO) * alpha)
    if len(heavy) < MIN_BLOCK or h_max < MIN_BLOCK:
        return None
    return heavy, h_max


def _chosen(diag, heavy, h_max):
    """The h_max largest diagonals among ``heavy`` (all of them if fewer), increasing."""
    if len(heavy) > h_max:
        # Stable sort so ties break by column.
        heavy = heavy[np.argsort(-diag[heavy], kind="stable")[:h_max]]
    return np.sort(heavy)


def _top_mass_below(diag, heavy, h_max, bound):
    """True if Σ of the h_max largest diagonals among ``heavy`` is below ``bound``, found without sorting them.

    First h·max(diag) (an upper bound on that sum: no pass at all), then the
    sum of a partition (the same values as the sorted choice, summed in
    another order).
    """
    if min(len(heavy), h_max) * float(diag.max()) < bound:
        return True
    values = diag[heavy]
    if len(values) > h_max:
        values = np.partition(values, len(values) - h_max)[len(values) - h_max :]
    return float(values.sum()) < bound


def heavy_columns(ops, diag, alpha):
    """Return the columns the heavy block would hold (increasing), or None when there is no block to build.

    Parameters
    ----------
    ops : FeatureOperator
        Only one with ``Capability.GRAM_BLOCK`` gets a block.
    diag : ndarray (D,) float64
        diag(A) = weighted, centred column sums of squares + α.
    alpha : float

    Returns
    -------
    ndarray of int or None
        The (at most ``max_block_size``) columns of largest diagonal above
        (1 + ``HEAVY_RATIO``)·α; None when ``ops`` has no Gram block (dense
        Z), alpha is 0 (no scale to call a column heavy against), or fewer
        than ``MIN_BLOCK`` columns are heavy.
    """
    candidates = _heavy_candidates(ops, diag, alpha)
    return None if candidates is None else _chosen(diag, *candidates)


#: Rows of the h × h block updated per step of ``_subtract_outer``:
#: temporaries of ROW_STEP × h doubles, never h × h.
ROW_STEP = 256


def _subtract_outer(A, m, scale):
    """A −= scale · m mᵀ in place, a band of rows at a time (each entry rounded as ``scale * np.outer(m, m)``)."""
    for r0 in range(0, len(m), ROW_STEP):
        band = np.outer(m[r0 : r0 + ROW_STEP], m)
        band *= scale
        A[r0 : r0 + ROW_STEP] -= band


def heavy_block_preconditioner(ops, diag, alpha, mu, w, sw, columns=None):
    """Build the heavy-column block for sparse ``ops``, or return None.

    Parameters
    ----------
    ops : FeatureOperator
        Only one with ``Capability.GRAM_BLOCK`` gets a block.
    diag : ndarray (D,) float64
        diag(A) = weighted, centred column sums of squares + α.
    alpha : float
    mu : ndarray (D,) or None
        Weighted column means (centring), None without intercept.
    w : ndarray (N,) or None
        Sample weights.
    sw : float
        Sum of the weights.
    columns : ndarray of int or None
        The block's columns when already chosen (``heavy_columns``); None:
        chosen here.

    Returns
    -------
    HeavyBlockPreconditioner or None
        None when there is no block to build (see ``heavy_columns``) or the
        block is numerically singular.

    Notes
    -----
    Set-up memory: the h × h block and its factor in one array (Cholesky
    and inverse overwrite it), plus bands of ``ROW_STEP`` rows; no other
    h × h temporary.
    """
    if columns is None:
        columns = heavy_columns(ops, diag, alpha)
    if columns is None:
        return None
    A = ops.gram_block(columns, w)
    if mu is not None:
        _subtract_outer(A, mu[columns], sw)
    A[np.diag_indices_from(A)] += alpha
    with single_threaded_blas():
        try:
            L, _ = scipy.linalg.cho_factor(A, lower=True, overwrite_a=True, check_finite=False)
        except np.linalg.LinAlgError:
            return None
        potri = scipy.linalg.get_lapack_funcs("potri", (L,))
        inverse, info = potri(L, lower=1, overwrite_c=1)
    if info != 0:
        return None
    # potri fills the lower triangle; mirror it (CG needs M exactly symmetric).
    mirror_triangle(inverse, lower=True)
    # LAPACK worked in Fortran order; the transpose of the symmetric result
    # is the same matrix, C-ordered, so the products in ``apply`` take the
    # same BLAS path (and bits) as with a C-ordered copy.
    if not inverse.flags.c_contiguous:
        inverse = inverse.T
    return HeavyBlockPreconditioner(columns, inverse)


class Preconditioner:
    """M⁻¹ for block CG: a diagonal part plus an optional correction on some rows.

    Parameters
    ----------
    inv_diag : ndarray of shape (D,), float64
        Diagonal part, applied by the CG solver inside its fused vector
        update (Zr = R·inv_diag); zero on the rows ``correction`` owns.
    correction : object with ``apply(R, Zr)``, or None
        Sets Zr on its rows and returns their Σ R∘Zr per column (float64),
        e.g. a ``HeavyBlockPreconditioner``.
    description : str
        What M is, for progress messages.
    """

    def __init__(self, inv_diag, correction=None, description="Jacobi"):
        self.inv_diag = inv_diag
        self.correction = correction
        self.description = description

    def correct(self, R, Zr):
        """Complete Zr = M⁻¹R on the correction's rows; return their Σ R∘Zr per column (or 0.0).

        Parameters
        ----------
        R : ndarray of shape (D, K)
            Residuals.
        Zr : ndarray of shape (D, K)
            Preconditioned residuals, already set on the diagonal's rows.

        Returns
        -------
        ndarray of shape (K,) float64, or 0.0 without a correction
        """
        if self.correction is None:
            return 0.0
        return self.correction.apply(R, Zr)


def diagonal_kind(normal, kind):
    """Resolve ``kind`` (not Nyström) to "jacobi" or "block" for this operator.

    "auto" means "block" on operators of ``MatrixKind.ONE_HOT_BLOCKS``
    (one-hot block matrices: binning features), "jacobi" elsewhere.
    """
    if kind == "block" or (kind in ("auto", "nystrom") and normal.ops.kind is MatrixKind.ONE_HOT_BLOCKS):
        return "block"
    return "jacobi"


def jacobi_block_preconditioner(normal, alpha, scaled_identity=False):
    """Return the exact heavy-column block for ``normal`` + αI with Jacobi (or a scaled identity) elsewhere.

    ``scaled_identity``: the columns outside the block get the one scale
    1 / max(their diagonal) instead of 1 / (their diagonal).  On binning
    features Jacobi shrinks the regularisation of crowded columns (α/d_j
    after scaling) where ZᵀZ's small eigenvalues live, and CG needed up to
    twice the iterations of no diagonal scaling at all; the heavy block
    with a scaled identity beat both (DESIGN.md, "Hard cases") — when the
    block holds at least ``HEAVY_BLOCK_MIN_SHARE`` of the diagonal's mass;
    below that the block is left out (a scaled identity alone).  Without a
    diagonal (no column statistics) M = I.

    Cost: the choice reads only the diagonal (O(D), no sort of it unless
    the block's mass is within rounding of the bound); the block itself
    (its Gram, Cholesky factor and inverse, O(h³) with h up to
    ``MAX_BLOCK``) is built only when it is kept.

    Parameters
    ----------
    normal : NormalOperator
    alpha : float
    scaled_identity : bool, default=False

    Returns
    -------
    Preconditioner
    """
    diag = normal.diagonal()
    if diag is None:
        return Preconditioner(np.ones(normal.shape[1]), description="none (the operator has no column statistics)")
    diag = np.maximum(diag, 0.0) + alpha
    # A zero diagonal entry (an all-zero column with alpha == 0) would make
    # the preconditioner singular; the column has no effect, leave it at 1.
    diag[diag <= 0] = 1.0
    inv_diag = 1.0 / diag
    rest = "a scaled identity" if scaled_identity else "Jacobi"
    # Light "heavy" columns (with a scaled identity): the block's exact
    # inverse amplifies their coupling to the rest (its small eigenvalues
    # are ~alpha) and cost 6× the iterations of no block on the measured
    # case.  Decided from the diagonal before the block is built: on a
    # matrix with no column heavier than the rest (uniform bins at alpha =
    # 0.1: every column above the ratio, the 2048 chosen ones 0.4% of the
    # mass) building it to throw it away was a quarter of the fit.  The
    # chosen columns' mass is first bounded by h·max(diag), then summed
    # unsorted (a partition, not a sort of all D diagonals): only a mass
    # within rounding of the bound needs the columns themselves to decide.
    candidates = _heavy_candidates(normal.ops, diag, alpha)
    bound = HEAVY_BLOCK_MIN_SHARE * diag.sum()
    columns = None
    if candidates is not None and not (scaled_identity and _top_mass_below(diag, *candidates, (1.0 - 1e-9) * bound)):
        columns = _chosen(diag, *candidates)
        if scaled_identity and diag[columns].sum() < bound:
            columns = None
    block = None if columns is None else heavy_block_preconditioner(
        normal.ops, diag, alpha, normal.mean, normal.weights, normal.weight_sum, columns)
    if block is None:
        if scaled_identity:
            return Preconditioner(np.full_like(inv_diag, 1.0 / diag.max()), description=rest)
        return Preconditioner(inv_diag)
    if scaled_identity:
        outside = np.ones(len(diag), dtype=bool)
        outside[block.columns] = False
        inv_diag[:] = 1.0 / diag[outside].max() if outside.any() else 1.0
    # The block's rows get their Zr from block.apply; zero here so the
    # fused update's Σ R∘Zr leaves them out (block.apply returns theirs).
    inv_diag[block.columns] = 0.0
    return Preconditioner(inv_diag, block, f"exact block on the {len(block.columns)} heaviest columns + {rest}")


def nystrom_preconditioner(factors, alpha):
    """Return the ``Preconditioner`` applying the Nyström factors for A + αI.

    Parameters
    ----------
    factors : NystromFactors
        Built once per normal operator (``_nystrom.build_nystrom``).
    alpha : float > 0

    Returns
    -------
    Preconditioner
        ``inv_diag`` is zero: the correction sets every row.
    """
    D = factors.U.shape[0]
    return Preconditioner(
        np.zeros(D),
        factors.correction(alpha),
        f"randomized Nyström, rank {factors.rank} (sketch {factors.sketch_size})",
    )


#: Whether ``"auto"`` may choose Nyström.  Off: measured on a 5000-row,
#: 26-class binning problem (D = 25508) at alpha = 1e-2, Nyström cut CG's
#: iterations 12× (407 → 33) but its build (rank 1315, at the memory cap)
#: made the fit 2.7× slower (71.7 s vs 27.0 s).  Until the build is cheaper,
#: Nyström is opt-in (``preconditioner="nystrom"`` in ``cg_ridge`` /
#: ``cg_ridge_path``) and "auto" means the Jacobi + heavy-block preconditioner.
AUTO_PICKS_NYSTROM = False


def wants_nystrom(normal, alpha, kind):
    """Decide whether ``kind`` ("auto", "jacobi", "block" or "nystrom") means Nyström for this operator and α.

    Parameters
    ----------
    normal : NormalOperator
    alpha : float
    kind : str

    Returns
    -------
    bool
        Nyström needs α > 0 (its P⁻¹ divides by λ_ℓ + α); "auto" takes it
        only when ``AUTO_PICKS_NYSTROM`` (off, see there), and then on
        sparse Z (``Capability.GRAM_BLOCK``) with at least ``NYSTROM_MIN_FEATURES``
        columns when α <= ``NYSTROM_ALPHA_FRACTION`` · mean(diag A).
    """
    if kind not in PRECONDITIONERS:
        raise ValueError(f"preconditioner must be one of {PRECONDITIONERS}, got {kind!r}")
    if alpha <= 0 or kind in ("jacobi", "block"):
        return False
    if kind == "nystrom":
        return True
    if not AUTO_PICKS_NYSTROM:
        return False
    if not normal.ops.has(Capability.GRAM_BLOCK) or normal.shape[1] < NYSTROM_MIN_FEATURES:
        return False
    diag = normal.diagonal()
    return diag is not None and alpha <= NYSTROM_ALPHA_FRACTION * float(np.mean(np.maximum(diag, 0.0)))


def make_preconditioner(normal, alpha, kind="auto", *, rank=None, memory_budget=DEFAULT_MEMORY_BUDGET,
                        factors=None, log=None):
    """Return (Preconditioner, NystromFactors or None) for ``normal`` + αI.

    Parameters
    ----------
    normal : NormalOperator
    alpha : float
    kind : {"auto", "jacobi", "block", "nystrom"}
        See ``wants_nystrom``.
    rank : int or None
        Nyström sketch size; None chooses it (``_nystrom.build_nystrom``).
    memory_budget : int
        Bytes the Nyström build may use.
    factors : NystromFactors or None
        Factors already built on ``normal`` (reused, not rebuilt).
    log : callable or None

    Returns
    -------
    preconditioner : Preconditioner
    factors : NystromFactors or None
    """
    if factors is None and not wants_nystrom(normal, alpha, kind):
        return jacobi_block_preconditioner(normal, alpha, diagonal_kind(normal, kind) == "block"), None
    if factors is None:
        t0 = time.perf_counter()
        factors = build_nystrom(normal, alpha, rank=rank, memory_budget=memory_budget, log=log)
        if log is not None:
            log(f"Nyström preconditioner: rank {factors.rank} from {factors.n_products} sketch passes, "
                f"built in {time.perf_counter() - t0:.2f} s")
    return nystrom_preconditioner(factors, alpha), factors
