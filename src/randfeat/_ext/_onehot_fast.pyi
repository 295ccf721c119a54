import numpy as np
from numpy.typing import NDArray

def vector_isa() -> str: ...
def n_row_blocks(n_rows: int) -> int: ...
def onehot_matmat(
    bins: NDArray[np.int32] | NDArray[np.uint16],
    start: NDArray[np.int64],
    value: float,
    B: NDArray[np.float32] | NDArray[np.float64],
    out: NDArray[np.float32] | NDArray[np.float64],
    shift: NDArray[np.float64],
    w: NDArray[np.float64],
    row_block_sums: NDArray[np.float64],
    n_threads: int,
    cols: NDArray[np.int32] | NDArray[np.uint16] | None = ...,
    group_bytes: int = ...,
) -> None: ...
def onehot_tmatmat(
    bins: NDArray[np.int32] | NDArray[np.uint16],
    start: NDArray[np.int64],
    value: float,
    U: NDArray[np.float32] | NDArray[np.float64],
    out: NDArray[np.float32] | NDArray[np.float64],
    n_threads: int,
) -> None: ...
def set_group_budgets(rows_bytes: int, gather_bytes: int, scatter_bytes: int) -> tuple[int, int, int]: ...
def local_rows(cols: NDArray[np.int32], start: NDArray[np.int64], out: NDArray[np.uint16], n_threads: int) -> None: ...
def local_bins(
    cols: NDArray[np.int32], start: NDArray[np.int64], bins: NDArray[np.int32] | NDArray[np.uint16], n_threads: int
) -> None: ...
def bins_dtype(max_block_width: int) -> np.dtype: ...
def padded_width(K: int, itemsize: int) -> int: ...
def pad_rows(
    src: NDArray[np.float32] | NDArray[np.float64], dst: NDArray[np.float32] | NDArray[np.float64], n_threads: int
) -> None: ...
def block_ranges(
    cols: NDArray[np.int32], data: NDArray[np.float32] | NDArray[np.float64], value: float, n_threads: int
) -> tuple[NDArray[np.int32], NDArray[np.int32], bool]: ...
NARROW_BLOCK_WIDTH: int
def uses_row_path(K: int) -> bool: ...
def row_group_budgets() -> tuple[int, int]: ...
GRAM_TILE_BYTES: int
def onehot_gram_block(
    bins: NDArray[np.int32] | NDArray[np.uint16],
    start: NDArray[np.int64],
    position: NDArray[np.int32],
    h: int,
    value: float,
    w: NDArray[np.float64],
    n_threads: int,
) -> NDArray[np.float64]: ...
