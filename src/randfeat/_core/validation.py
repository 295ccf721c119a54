"""Input and parameter validation shared by the estimators and ``kernel_matrix``.

Compiled code trusts only what passes through here: finite values, a float
dtype it was compiled for, 2-D shape, at least one row, and for sparse input a
canonical CSR matrix (sorted indices, no duplicates, int32 or int64 indices)
whose index arrays were checked to describe a valid matrix *before* anything
read them (``check_sparse_structure``: scipy's constructor does not check the
values of hand-built index arrays, and a compiled kernel reading a column
index >= n_features writes or reads out of bounds).

Parameters are declared with scikit-learn's ``_parameter_constraints``; the
constraint types randfeat adds live here (``Interval`` that refuses bools,
``N_JOBS``).
"""

import inspect
import numbers
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval as _SklearnInterval
from sklearn.utils.validation import _check_sample_weight, validate_data

FLOAT_DTYPES = (np.float64, np.float32)


# ------------------------------------------------------------- parameters
class Interval(_SklearnInterval):
    """scikit-learn's ``Interval`` constraint, but a bool never satisfies it.

    ``True`` is an ``int`` to Python, yet never a count, a scale or a
    tolerance: ``n_components=True`` is a bug in the caller, so it is
    rejected with ``InvalidParameterError`` like any other wrong type.
    """

    def is_satisfied_by(self, val):
        """Return True when ``val`` is a number (not a bool) in the interval."""
        if isinstance(val, (bool, np.bool_)):
            return False
        return super().is_satisfied_by(val)


#: ``n_jobs``: None, a positive count, or a negative count as in joblib
#: (-1 = all cores, -2 = all but one); 0 is excluded.
N_JOBS = [
    Interval(Integral, None, -1, closed="right"),
    Interval(Integral, 1, None, closed="left"),
    None,
]

N_JOBS_ZERO = "n_jobs == 0 has no meaning; use None or -1 for all cores, or a positive count."


# ------------------------------------------------------- sparse structure
def _fail(what, problem):
    raise ValueError(
        f"{what} is not a valid sparse matrix: {problem}. Its index arrays were probably "
        f"built by hand or changed in place (scipy does not check them); rebuild it with "
        f"scipy.sparse.csr_matrix((data, indices, indptr), shape=...) from valid arrays, "
        f"and see X.check_format(full_check=True)."
    )


def _check_index_array(what, name, arr):
    if not isinstance(arr, np.ndarray) or arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        kind = getattr(arr, "dtype", type(arr).__name__)
        _fail(what, f"{name} must be a 1-D integer array, got {kind} with shape {np.shape(arr)}")


def _check_range(what, name, arr, upper, axis_name):
    """All of ``arr`` in [0, upper): one max pass, no temporary.

    Viewed as unsigned, a negative index is a huge one, so a single ``max``
    finds both faults; only then are they told apart.
    """
    if arr.size == 0:
        return
    unsigned = arr.view(np.dtype(f"u{arr.dtype.itemsize}")) if arr.dtype.kind == "i" else arr
    if unsigned.max() < upper:
        return
    if arr.min() < 0:
        pos = int(np.argmax(arr < 0))
        _fail(what, f"{name}[{pos}] = {int(arr[pos])} is negative")
    pos = int(np.argmax(arr >= upper))
    _fail(what, f"{name}[{pos}] = {int(arr[pos])} is >= {axis_name} = {upper}")


def _check_compressed(X, what):
    """CSR/CSC/BSR: indptr starts at 0, never decreases, ends within indices/data; indices in range."""
    fmt = X.format
    if fmt == "bsr":
        R, C = X.blocksize
        n_major, n_minor = X.shape[0] // R, X.shape[1] // C
        major, minor = "block rows", "the number of block columns"
    elif fmt == "csr":
        (n_major, n_minor), major, minor = X.shape, "rows", "n_features"
    else:
        (n_minor, n_major), major, minor = X.shape, "columns", "n_samples"
    indptr, indices = X.indptr, X.indices
    _check_index_array(what, "indptr", indptr)
    _check_index_array(what, "indices", indices)
    if indptr.shape[0] != n_major + 1:
        _fail(what, f"indptr has length {indptr.shape[0]}, expected {n_major + 1} ({major} + 1)")
    if indptr[0] != 0:
        _fail(what, f"indptr[0] = {int(indptr[0])}, expected 0")
    if n_major and (indptr[1:] < indptr[:-1]).any():
        pos = int(np.argmax(indptr[1:] < indptr[:-1]))
        _fail(what, f"indptr decreases at position {pos + 1} ({int(indptr[pos])} then {int(indptr[pos + 1])})")
    nnz = int(indptr[-1])
    n_data = X.data.shape[0] if X.data.ndim >= 1 else -1
    if nnz > indices.shape[0] or nnz > n_data:
        _fail(
            what,
            f"indptr[-1] = {nnz} stored entries, but indices has {indices.shape[0]} "
            f"and data has {n_data}",
        )
    _check_range(what, "indices", indices[:nnz], n_minor, minor)


def _check_coo(X, what):
    row, col = X.row, X.col
    _check_index_array(what, "row", row)
    _check_index_array(what, "col", col)
    n = X.data.shape[0]
    if row.shape[0] != n or col.shape[0] != n:
        _fail(what, f"row, col and data have lengths {row.shape[0]}, {col.shape[0]}, {n}")
    _check_range(what, "row", row, X.shape[0], "n_samples")
    _check_range(what, "col", col, X.shape[1], "n_features")


def check_sparse_structure(X, input_name="X"):
    """Check that sparse ``X``'s index arrays describe a valid matrix; return X in a checked format.

    O(nnz) and read-only: a few vectorised passes (``min``, ``max``, one
    comparison of ``indptr`` with itself), no copy of X.  CSR, CSC and BSR
    (index pointer and indices), COO (coordinates) are checked as given;
    LIL, DOK and DIA are first converted to COO by scipy (those conversions
    never use an index as a memory address) and the result is checked.

    Parameters
    ----------
    X : scipy sparse matrix or array
    input_name : str, default="X"
        Name used in the error message.

    Returns
    -------
    X : scipy sparse matrix or array
        X itself, or its COO conversion for LIL, DOK and DIA input.

    Raises
    ------
    ValueError
        Naming the first fault found (an index out of range or negative, a
        decreasing or short ``indptr``, arrays of inconsistent lengths) and
        how to rebuild a valid matrix.
    """
    what = f"{input_name} ({type(X).__name__}, format {X.format!r})"
    if len(X.shape) != 2:
        raise ValueError(f"Expected a 2-D sparse matrix for {input_name}, got shape {X.shape}.")
    if X.format in ("lil", "dok", "dia"):
        X = X.tocoo()
    if X.format in ("csr", "csc", "bsr"):
        _check_compressed(X, what)
    elif X.format == "coo":
        _check_coo(X, what)
    else:  # pragma: no cover - scipy has no other format today
        raise ValueError(f"Unsupported sparse format {X.format!r} for {input_name}; convert it to CSR.")
    return X


def check_index_bounds(name, arr, low=None, high=None):
    """ValueError unless every entry of the integer array ``arr`` lies in [low, high).

    For the integer arrays of a fitted state that compiled code (or scipy's
    unchecked sparse routines) uses as indices: one ``min`` and one ``max``
    pass, no temporary the size of ``arr``.

    Parameters
    ----------
    name : str
        What ``arr`` is, for the message.
    arr : ndarray of integers
    low, high : int or None
        The half-open range of allowed values; None leaves that side open.
    """
    if not (isinstance(arr, np.ndarray) and arr.dtype.kind in "iu"):
        raise ValueError(f"{name} must be an integer array, got {getattr(arr, 'dtype', type(arr).__name__)}")
    if arr.size == 0 or (low is None and high is None):
        return
    lo, hi = int(arr.min()), int(arr.max())
    if (low is not None and lo < low) or (high is not None and hi >= high):
        bad = lo if low is not None and lo < low else hi
        span = f"[{'-inf' if low is None else low}, {'inf' if high is None else high})"
        raise ValueError(f"{name} holds {bad}, outside {span}")


def check_csr_part(name, M):
    """ValueError unless ``M`` is a canonical ``csr_matrix`` whose index arrays describe a valid matrix.

    For the sparse parts of a fitted state (landmarks of a sparse fit): the
    structure check of any sparse input (``check_sparse_structure``), then
    int32/int64 index arrays of one dtype, exactly ``indptr[-1]`` entries,
    and sorted, distinct indices in every row (what scipy's canonical flag
    promises to its own routines).  O(nnz), vectorised.

    Parameters
    ----------
    name : str
    M : object
    """
    if not isinstance(M, sp.csr_matrix):
        raise ValueError(f"{name} must be a scipy.sparse.csr_matrix, got {type(M).__name__}")
    check_sparse_structure(M, name)
    nnz = int(M.indptr[-1])
    if not (M.indices.dtype == M.indptr.dtype and M.indices.dtype in (np.int32, np.int64)):
        raise ValueError(f"{name}'s indices and indptr must both be int32 or both int64")
    if not (M.indices.shape == (nnz,) and M.data.shape == (nnz,)):
        raise ValueError(f"{name} must hold exactly indptr[-1] = {nnz} indices and values")
    if nnz > 1:
        steps = np.diff(M.indices) > 0
        row_starts = M.indptr[1:-1]
        steps[row_starts[(row_starts > 0) & (row_starts < nnz)] - 1] = True
        if not steps.all():
            raise ValueError(f"{name}'s column indices must be sorted and distinct within each row")


def canonical_csr(X):
    """Return a CSR ``X`` (checked, any index dtype) as a canonical ``csr_matrix``.

    Sorted indices without duplicates (summed, on a copy: the caller's matrix
    is never changed), entries past ``indptr[-1]`` dropped, contiguous
    arrays, indices and indptr of one dtype, int32 or int64.  Shares X's
    arrays when nothing needs to change.
    """
    nnz = int(X.indptr[-1])
    index_dtype = np.result_type(X.indices.dtype, X.indptr.dtype)
    if index_dtype not in (np.int32, np.int64):
        fits = max(nnz, X.shape[1]) <= np.iinfo(np.int32).max
        index_dtype = np.int32 if fits else np.int64
    # Kernels take contiguous arrays of one index dtype (no copy when they are).
    data = np.ascontiguousarray(X.data if X.data.shape[0] == nnz else X.data[:nnz])
    indices = np.ascontiguousarray(X.indices if X.indices.shape[0] == nnz else X.indices[:nnz], dtype=index_dtype)
    indptr = np.ascontiguousarray(X.indptr, dtype=index_dtype)
    if not (
        isinstance(X, sp.csr_matrix)
        and data is X.data
        and indices is X.indices
        and indptr is X.indptr
    ):
        X = sp.csr_matrix((data, indices, indptr), shape=X.shape, copy=False)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()  # also sorts the indices
    return X


# ------------------------------------------------------------------ inputs
def _checked_structure(X, input_name="X"):
    return check_sparse_structure(X, input_name) if sp.issparse(X) else X


def _finish(X):
    return canonical_csr(X) if sp.issparse(X) else X


# What validate_data must ensure of X in every entry point (finite by default).
_X_CHECKS = dict(accept_sparse="csr", dtype=list(FLOAT_DTYPES), ensure_min_samples=1, ensure_min_features=1)


def validate_X(estimator, X, *, reset):
    """Validate X for any randfeat estimator: 2-D, finite, float32/float64, dense or CSR.

    Float32 stays float32; every other dtype (ints, bools) becomes float64.
    Sparse input of any scipy format (CSR, CSC, COO, ``csr_array``, ...) has
    its structure checked first, then comes back as a canonical
    ``csr_matrix`` (see ``canonical_csr``) so kernels may rely on it.
    ``reset=True`` (in fit) records ``n_features_in_`` and the feature names;
    ``reset=False`` (in transform, predict) checks X's width against them.

    Parameters
    ----------
    estimator : estimator instance
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    reset : bool

    Returns
    -------
    X : ndarray or csr_matrix
    """
    return _finish(validate_data(estimator, _checked_structure(X), reset=reset, **_X_CHECKS))


def validate_rows(X, owner=None):
    """Validate one block of rows exactly as ``validate_X`` validates a whole X, without an estimator to record on.

    The same checks and messages (CSR structure first, then 2-D, finite,
    float32/float64, a canonical CSR back), but a block may have zero rows.
    For row blocks validated where they are held (a Dask worker) before
    compiled code reads them.

    Parameters
    ----------
    X : {array-like, sparse matrix}
    owner : str or None
        The estimator's class name, as ``validate_X``'s messages name it.

    Returns
    -------
    X : ndarray or csr_matrix
    """
    checks = dict(_X_CHECKS, ensure_min_samples=0)
    return _finish(check_array(_checked_structure(X), input_name="X", estimator=owner, **checks))


def validate_X_y(estimator, X, y, *, y_numeric):
    """Validate X as ``validate_X(reset=True)`` and y as a (multi-output) target of X's length.

    Parameters
    ----------
    estimator : estimator instance
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
    y_numeric : bool
        Convert an object-dtype y to float64 (regressors).

    Returns
    -------
    X : ndarray or csr_matrix
    y : ndarray
    """
    if sp.issparse(y):
        raise TypeError("A sparse y was passed, but the targets must be dense; use y.toarray().")
    if y_numeric:
        _refuse_labels(estimator, y)
    X, y = validate_data(
        estimator, _checked_structure(X), y, reset=True, multi_output=True, y_numeric=y_numeric, **_X_CHECKS
    )
    return _finish(X), y


def _refuse_labels(estimator, y):
    """A regressor given class labels (strings): say so, and which estimator takes them."""
    values = np.asarray(y)
    if values.dtype.kind not in "USO" or values.size == 0:
        return
    for v in values.ravel()[:1000]:
        if isinstance(v, str):
            try:
                float(v)
            except ValueError:
                name = type(estimator).__name__
                raise ValueError(
                    f"{name} is a regressor and y holds labels such as {str(v)!r}, which are not numbers. For "
                    f"classification use randfeat.RidgeClassifier (or RidgeClassifierCV) with the same "
                    f"parameters; for regression give numeric targets."
                ) from None


# scikit-learn >= 1.7 refuses all-zero weights itself, with its own message;
# let them through so ours (the same for every version) is the one raised.
_ALLOW_ZERO_WEIGHTS = (
    {"allow_all_zero_weights": True}
    if "allow_all_zero_weights" in inspect.signature(_check_sample_weight).parameters
    else {}
)


def check_sample_weight(sample_weight, X):
    """Validate sample weights: finite, non-negative, one per row of X, summing to a usable positive number.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,), float or None
    X : validated input

    Returns
    -------
    sample_weight : ndarray of shape (n_samples,), float64, or None
    """
    if sample_weight is None:
        return None
    sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64, **_ALLOW_ZERO_WEIGHTS)
    if np.any(sample_weight < 0):
        raise ValueError("sample_weight must be non-negative")
    check_weight_total(float(np.sum(sample_weight)))
    return sample_weight


def check_weight_total(total):
    """ValueError unless non-negative weights summing to ``total`` are usable (``check_sample_weight``'s test).

    Parameters
    ----------
    total : float
    """
    if not total > 0:
        raise ValueError(
            "sample_weight is zero for every sample, so no sample counts in the fit; "
            "give at least one sample a positive weight"
        )
    if not np.isfinite(total) or total < np.finfo(np.float64).tiny:
        raise ValueError(
            f"sample_weight sums to {total:.3g}, outside the range float64 can normalise by; "
            f"multiply sample_weight by a constant c (and alpha by the same c: the solution is unchanged)"
        )


def check_array_for_kernel(X, input_name):
    """Validate an input of ``kernel_matrix``: float64, finite, dense or canonical CSR.

    Parameters
    ----------
    X : {array-like, sparse matrix}
    input_name : str

    Returns
    -------
    X : ndarray or csr_matrix, float64
    """
    X = check_array(_checked_structure(X, input_name), accept_sparse="csr", dtype=np.float64, input_name=input_name)
    return _finish(X)


def as_generator(random_state):
    """Turn a scikit-learn ``random_state`` into a ``numpy.random.Generator``.

    None, an int or a Generator are used directly; a legacy ``RandomState``
    (as scikit-learn's ``check_random_state`` returns) seeds a new Generator
    from its stream, so repeated fits with one RandomState differ, as usual.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, numbers.Integral):
        return np.random.default_rng(random_state)
    rs = check_random_state(random_state)
    return np.random.default_rng(rs.randint(0, 2**31 - 1, size=4))
