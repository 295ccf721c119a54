"""Identical feature rows merged into one weighted row: the same ridge problem on fewer rows.

Binning features of integer or categorical data repeat rows: two points
that share their bin in every grid have the same row of Z (Letter-like data
at 4× the median gamma: 10049 distinct rows of 20000; Adult's one-hot rows
likewise).  For ridge with weights w the rows of a group g enter only
through

    Σ_g w_g,   Σ_g w_g z,   Σ_g w_g z zᵀ,   Σ_g w_g z yᵀ,

so one row z with weight W = Σ_g w_i and target Σ_g w_i y_i / W gives the
same normal equations, means and intercept: the solution is the same (CG's
iterates are the same in exact arithmetic; its sums are grouped
differently, so the last bits differ).  Each CG product then reads fewer
rows.  Only the (weighted) sums of squares of the targets change, which
CG does not use.

Merging pays when many rows repeat; ``merge_identical_rows`` looks at a
sample first and returns None when it does not (the uniform-bin bench
matrix: no repeated row, and the hash pass would cost a fifth of a fit).
"""

import numpy as np
import scipy.sparse as sp

#: Merge only when at least this share of the rows repeat another.
MIN_REPEATED_SHARE = 0.2
#: Rows sampled (with a fixed seed) to estimate the share before hashing all.
SAMPLE_ROWS = 4000


def _row_keys(cols):
    """A 64-bit hash per row of an (n, G) int array (wrapping products with fixed odd multipliers)."""
    G = cols.shape[1]
    multipliers = np.random.default_rng(12345).integers(1, 2**63 - 1, size=G, dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        keys = np.zeros(cols.shape[0], dtype=np.uint64)
        for g in range(G):  # column by column: no (n, G) uint64 temporary
            keys += cols[:, g].astype(np.uint64) * multipliers[g]
            keys ^= keys >> np.uint64(29)
    return keys


def _repeated_share(cols):
    """Share of rows that repeat an earlier row, judged from their hash keys."""
    if cols.shape[0] == 0:
        return 0.0
    return 1.0 - len(np.unique(_row_keys(cols))) / cols.shape[0]


def merge_identical_rows(Z, Y, sample_weight, row_length=None):
    """Merge the identical rows of a CSR ``Z`` with a constant count of entries per row, or return None.

    Parameters
    ----------
    Z : scipy.sparse CSR matrix of shape (N, D), canonical, every row with the same number of entries
        (binning features, one-hot encodings).
    Y : ndarray of shape (N, K), float64
    sample_weight : ndarray of shape (N,) or None
    row_length : int or None
        The entries of every row when the caller has checked them already
        (the one-hot layout's block count): the check is not repeated.

    Returns
    -------
    None, or (Z_merged, Y_merged, weights)
        The distinct rows (in order of first appearance), their weighted
        mean targets and their total weights (float64).  None when fewer
        than ``MIN_REPEATED_SHARE`` of the rows repeat (judged first on a
        sample of ``SAMPLE_ROWS``), or when Z's rows are not all the same
        length.
    """
    N = Z.shape[0]
    if not sp.issparse(Z) or N < 2 or Z.nnz == 0 or Z.nnz % N:
        return None
    G = Z.nnz // N
    if row_length is None:
        if not np.array_equal(Z.indptr, np.arange(0, Z.nnz + 1, G)):
            return None
    elif row_length != G:
        raise ValueError(f"row_length={row_length} but Z has {Z.nnz} entries in {N} rows")
    cols = Z.indices.reshape(N, G)
    if N > SAMPLE_ROWS:
        sample = np.sort(np.random.default_rng(0).choice(N, SAMPLE_ROWS, replace=False))
        # A sample of n of N rows sees a repeated pair with probability ~ n/N:
        # scale its share up accordingly (an estimate, only to skip the full pass).
        if _repeated_share(cols[sample]) * N / SAMPLE_ROWS < MIN_REPEATED_SHARE:
            return None
    keys = _row_keys(cols)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if N - len(first) < MIN_REPEATED_SHARE * N:
        return None
    inverse = inverse.reshape(-1)
    # Exact check: every row equals its group's representative (a hash
    # collision, ~N²/2⁶⁴, or rows with equal indices but other values: no merge).
    if not (np.array_equal(cols, cols[first][inverse])
            and np.array_equal(Z.data.reshape(N, G), Z.data.reshape(N, G)[first][inverse])):
        return None
    # Representatives in order of first appearance.
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    group = rank[inverse]
    w = np.ones(N) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    weights = np.bincount(group, weights=w, minlength=len(order))
    Yw = np.column_stack([np.bincount(group, weights=Y[:, k] * w, minlength=len(order)) for k in range(Y.shape[1])])
    with np.errstate(invalid="ignore", divide="ignore"):
        Y_merged = np.where(weights[:, None] > 0, Yw / weights[:, None], 0.0)
    return Z[np.sort(first)], Y_merged, weights


def merged_problem(Z, Y, sample_weight, row_length=None):
    """Return (Z, Y, sample_weight) with identical rows merged when that pays, else as given.

    The CG fits' entry: ``merge_identical_rows`` or the inputs unchanged.

    Parameters
    ----------
    Z : ndarray or sparse matrix of shape (N, D)
    Y : ndarray of shape (N, K), float64
    sample_weight : ndarray of shape (N,) or None
    row_length : int or None
        As in ``merge_identical_rows``.

    Returns
    -------
    Z, Y, sample_weight
        Possibly fewer rows; the same ridge solution.
    entries : int or None
        The unmerged Z's nnz when rows were merged (for ``make_products``,
        so the preconditioner is the unmerged problem's), else None.
    """
    merged = merge_identical_rows(Z, Y, sample_weight, row_length) if sp.issparse(Z) else None
    return (Z, Y, sample_weight, None) if merged is None else (*merged, Z.nnz)
