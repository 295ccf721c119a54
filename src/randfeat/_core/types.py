"""Type aliases of randfeat's public annotations (PEP 484); nothing here runs in a fit.

randfeat's modules write ``from __future__ import annotations``, so these
names are only read by type checkers and by ``typing.get_type_hints``.
scikit-learn and SciPy ship no type information: to a checker their classes
are ``Any`` (a sparse matrix is accepted, not checked).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, TypeVar, Union

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

if sys.version_info >= (3, 11):
    from typing import Self
elif TYPE_CHECKING:  # pragma: no cover - type checkers know typing_extensions without it being installed
    from typing_extensions import Self
else:  # pragma: no cover - annotations are strings at run time
    Self = Any

__all__ = ["ArrayLike", "NDArray", "Features", "Float", "Int", "MatrixLike", "Predictions", "RandomState", "Rows",
           "Self", "SparseMatrix", "Transformer", "preserves_signature"]

#: A scipy sparse matrix or array (CSR, CSC, COO, ...).
SparseMatrix = Union[sp.spmatrix, sp.sparray]
#: What randfeat reads as X: an array-like (a Dask array too) or a sparse matrix.
MatrixLike = Union[ArrayLike, SparseMatrix]
#: Validated rows, as a feature map's hooks receive them: a C-ordered float ndarray or a canonical CSR matrix.
Rows = Union[NDArray[Any], SparseMatrix]
#: Features or predictions: an ndarray (or a sparse matrix, for features) for in-memory input, a lazy Dask
#: array for a Dask array.  Dask is optional and untyped, so these are ``Any`` to a type checker.
Features = Any
Predictions = Any
#: A scikit-learn transformer (an object with ``fit`` and ``transform``); scikit-learn is untyped.
Transformer = Any
#: A real scalar parameter (a Python or NumPy number).
Float = Union[float, np.floating]
#: An integer parameter (a Python or NumPy integer).
Int = Union[int, np.integer]
#: scikit-learn's ``random_state``: a seed, a RandomState, a Generator or None.
RandomState = Union[int, np.integer, np.random.RandomState, np.random.Generator, None]

_F = TypeVar("_F", bound=Callable[..., Any])


def preserves_signature(decorator: Any) -> Callable[[_F], _F]:
    """Return ``decorator`` itself, typed as keeping the signature of what it decorates.

    For scikit-learn's decorators (``validate_params``), which carry no
    types: without this a type checker would see the decorated function as
    ``Any``.

    Parameters
    ----------
    decorator : callable
        A decorator that returns a function with the decorated one's signature.

    Returns
    -------
    callable
        ``decorator``, unchanged.
    """
    return decorator
