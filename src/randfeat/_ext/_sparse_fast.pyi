import numpy as np
from numpy.typing import NDArray

def csr_matmat(
    indptr: NDArray[np.int32] | NDArray[np.int64],
    indices: NDArray[np.int32] | NDArray[np.int64],
    data: NDArray[np.float32] | NDArray[np.float64],
    B: NDArray[np.float32] | NDArray[np.float64],
    out: NDArray[np.float32] | NDArray[np.float64],
    n_threads: int,
) -> None: ...

def csr_row_weighted_sq_sums(
    indptr: NDArray[np.int32] | NDArray[np.int64],
    indices: NDArray[np.int32] | NDArray[np.int64],
    data: NDArray[np.float32] | NDArray[np.float64],
    w: NDArray[np.float64],
    out: NDArray[np.float64],
    n_threads: int,
) -> None: ...

def csr_normal_matmat(
    indptr: NDArray[np.int32] | NDArray[np.int64],
    indices: NDArray[np.int32] | NDArray[np.int64],
    data: NDArray[np.float32] | NDArray[np.float64],
    P: NDArray[np.float32] | NDArray[np.float64],
    mup: NDArray[np.float64],
    w: NDArray[np.float64],
    partial: NDArray[np.float64],
    usum: NDArray[np.float64],
    n_threads: int,
) -> None: ...
def sum_blocks(
    partial: NDArray[np.float64],
    out: NDArray[np.float32] | NDArray[np.float64],
    n_threads: int,
) -> None: ...
def compact_columns(
    indptr: NDArray[np.int32] | NDArray[np.int64],
    indices: NDArray[np.int32] | NDArray[np.int64],
    data: NDArray[np.float32] | NDArray[np.float64],
    position: NDArray[np.int32],
) -> tuple[NDArray[np.int64], NDArray[np.int32], NDArray[np.float32] | NDArray[np.float64]]: ...
def csr_gram_block(
    indptr: NDArray[np.int64],
    hidx: NDArray[np.int32],
    hval: NDArray[np.float32] | NDArray[np.float64],
    w: NDArray[np.float64],
    out: NDArray[np.float64],
    n_threads: int,
) -> None: ...
