"""Type stubs for the compiled random-binning kernels (randfeat._binning_fast)."""

import numpy as np
from numpy.typing import NDArray

LANES: int

def vector_isa() -> str: ...
def hash_rows(
    is_csr: bool,
    X: NDArray[np.floating],
    Xd: NDArray[np.floating],
    Xi: NDArray[np.int64],
    Xp: NDArray[np.int64],
    n: int,
    d: int,
    U: NDArray[np.float64],
    INV: NDArray[np.float64],
    P: int,
    h64: NDArray[np.uint64],
    lo: NDArray[np.uint32],
    hi: NDArray[np.uint32],
    rowbuf: NDArray[np.float64],
    hashbuf: NDArray[np.uint64],
    n_threads: int,
) -> None: ...
def build_vocabularies(
    h64: NDArray[np.uint64],
    lo: NDArray[np.uint32],
    hi: NDArray[np.uint32],
    n: int,
    P: int,
    n_threads: int,
    ranks32: NDArray[np.int32] | None = ...,
    ranks64: NDArray[np.int64] | None = ...,
    group_budget: int = ...,
) -> tuple[NDArray[np.uint64], NDArray[np.int64], NDArray[np.uint32], NDArray[np.int64], NDArray[np.intc]]: ...
def finish_training_csr(
    n: int,
    P: int,
    koff: NDArray[np.int64],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    value: float,
    n_threads: int,
) -> None: ...
def transform_rows(
    is_csr: bool,
    X: NDArray[np.floating],
    Xd: NDArray[np.floating],
    Xi: NDArray[np.int64],
    Xp: NDArray[np.int64],
    n: int,
    d: int,
    U: NDArray[np.float64],
    INV: NDArray[np.float64],
    P: int,
    keys: NDArray[np.uint64],
    koff: NDArray[np.int64],
    directory: NDArray[np.uint32],
    doff: NDArray[np.int64],
    bits: NDArray[np.intc],
    indices: NDArray[np.integer],
    counts: NDArray[np.int64],
    rowbuf: NDArray[np.float64],
    hashbuf: NDArray[np.uint64],
    colbuf: NDArray[np.int64],
    n_threads: int,
) -> int: ...
def compact_rows(indices: NDArray[np.integer], counts: NDArray[np.int64], P: int) -> int: ...
def fill_value(data: NDArray[np.floating], value: float, n_threads: int) -> None: ...
def hash_rows_for_test(
    X: NDArray[np.float64], U: NDArray[np.float64], INV: NDArray[np.float64], P: int
) -> NDArray[np.uint64]: ...
