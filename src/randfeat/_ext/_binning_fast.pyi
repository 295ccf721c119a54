"""Type stubs for the compiled random-binning kernels (randfeat._binning_fast)."""

import numpy as np
from typing import Any
from numpy.typing import NDArray
from typing_extensions import disjoint_base

LANES: int
GROUP_BUDGET_BYTES: int

# A dense float array or a scipy.sparse CSR matrix (scipy ships no stubs).
_Rows = NDArray[np.floating] | Any

@disjoint_base
class Grids:
    def __init__(self, U: NDArray[np.float64], INV: NDArray[np.float64], P: int) -> None: ...

@disjoint_base
class Vocabulary:
    def __init__(
        self,
        keys: NDArray[np.uint64],
        key_offsets: NDArray[np.int64],
        directory: NDArray[np.uint32],
        dir_offsets: NDArray[np.int64],
        dir_bits: NDArray[np.intc],
    ) -> None: ...

def vector_isa() -> str: ...
def hash_rows(
    X: _Rows,
    grids: Grids,
    indices: NDArray[np.integer],
    data: NDArray[np.generic],
    n_threads: int,
    grid_major: bool = ...,
) -> None: ...
def build_vocabularies(
    indices: NDArray[np.integer],
    data: NDArray[np.generic],
    P: int,
    n_threads: int,
    write_ranks: bool = ...,
    group_budget: int = ...,
    grid_major: bool = ...,
    strategy: str = ...,
) -> tuple[NDArray[np.uint64], NDArray[np.int64], NDArray[np.uint32], NDArray[np.int64], NDArray[np.intc]]: ...
def finish_training_csr(
    P: int,
    koff: NDArray[np.int64],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    value: float,
    n_threads: int,
) -> None: ...
def transform_rows(
    X: _Rows,
    grids: Grids,
    vocab: Vocabulary,
    indices: NDArray[np.integer],
    counts: NDArray[np.int64],
    n_threads: int,
) -> int: ...
def compact_rows(indices: NDArray[np.integer], counts: NDArray[np.int64], P: int) -> int: ...
def fill_value(data: NDArray[np.floating], value: float, n_threads: int) -> None: ...
def lsd_sort_grids(keys: NDArray[np.uint64], P: int, n_threads: int) -> None: ...
def hash_rows_for_test(
    X: NDArray[np.float64], U: NDArray[np.float64], INV: NDArray[np.float64], P: int
) -> NDArray[np.uint64]: ...
