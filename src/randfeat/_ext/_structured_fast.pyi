"""Type stubs for the compiled structured-feature kernel (SORF, Fastfood)."""

import numpy as np
import numpy.typing as npt

LANES: int
ALIGN: int

def vector_isa() -> str: ...
def aligned_zeros(n: int, dtype: npt.DTypeLike) -> npt.NDArray[np.floating]: ...
def structured_dense(
    X: npt.NDArray[np.floating],
    log_n: int,
    diag0: npt.NDArray[np.floating],
    diag1: npt.NDArray[np.floating],
    diag2: npt.NDArray[np.floating],
    perm: npt.NDArray[np.int32],
    mult: npt.NDArray[np.floating],
    b: npt.NDArray[np.floating],
    out: npt.NDArray[np.floating],
    kind: str,
    epilogue: str,
    odd: bool,
    phase: float,
    scale: float,
    n_threads: int,
) -> None: ...
def structured_csr(
    data: npt.NDArray[np.floating],
    indices: npt.NDArray[np.integer],
    indptr: npt.NDArray[np.integer],
    n_features: int,
    log_n: int,
    diag0: npt.NDArray[np.floating],
    diag1: npt.NDArray[np.floating],
    diag2: npt.NDArray[np.floating],
    perm: npt.NDArray[np.int32],
    mult: npt.NDArray[np.floating],
    b: npt.NDArray[np.floating],
    out: npt.NDArray[np.floating],
    kind: str,
    epilogue: str,
    odd: bool,
    phase: float,
    scale: float,
    n_threads: int,
) -> None: ...
def fwht_blocks(buf: npt.NDArray[np.floating], log_n: int) -> None: ...
def trig_floor(a: npt.NDArray[np.floating], out: npt.NDArray[np.floating], scale: float, n_threads: int) -> None: ...
