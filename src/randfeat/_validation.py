"""Input validation shared by the estimators.

Compiled code trusts only what passes through here: finite values, a float
dtype it was compiled for, 2-D shape, at least one row, CSR for sparse input.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

FLOAT_DTYPES = (np.float64, np.float32)


def validate_features_input(estimator, X, *, reset):
    """Validate X for a feature map: 2-D, finite, float32/float64, dense or CSR.

    Float32 stays float32; every other dtype (ints, bools) becomes float64.
    CSR input comes back with canonical format (sorted, no duplicates) so
    kernels may rely on it.  ``reset=True`` (in fit) records
    ``n_features_in_``; ``reset=False`` (in transform) checks X's width
    against it.
    """
    X = validate_data(
        estimator,
        X,
        reset=reset,
        accept_sparse="csr",
        dtype=list(FLOAT_DTYPES),
        ensure_all_finite=True,
        ensure_min_samples=1,
        ensure_min_features=1,
    )
    if sp.issparse(X) and not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


def check_positive_int(value, name, *, minimum=1):
    """Raise a clear error unless ``value`` is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def check_choice(value, name, choices):
    """Raise a clear error unless ``value`` is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"Unknown {name} {value!r}; expected one of {list(choices)}")
    return value


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
