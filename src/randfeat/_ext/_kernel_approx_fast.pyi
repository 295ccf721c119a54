"""Type stubs for the compiled kernels of the scikit-learn-compatible kernel approximations."""

import numpy as np
import numpy.typing as npt

KINDS: dict[str, int]
FROM_DOTS: frozenset[str]
MAX_DIRECT_DEGREE: int

def vector_isa() -> str: ...
def panel_width(dtype: npt.DTypeLike) -> int: ...
def product_panel_width(dtype: npt.DTypeLike) -> int: ...
def pack_panels(W: npt.NDArray[np.floating], jb: int | None = ...) -> npt.NDArray[np.floating]: ...
def product_rows(m: int, itemsize: int) -> tuple[int, int]: ...
def subtile_rows(m: int, itemsize: int) -> int: ...
def nystroem_rows(
    X: npt.NDArray[np.floating],
    Lp: npt.NDArray[np.floating],
    Lp2: npt.NDArray[np.floating],
    lvec: npt.NDArray[np.floating],
    xvec: npt.NDArray[np.floating],
    Np: npt.NDArray[np.floating],
    out: npt.NDArray[np.floating],
    kernel: str,
    m: int,
    gamma: float = ...,
    coef0: float = ...,
    degree: float = ...,
    nu: float = ...,
    c: float = ...,
    have_dots: bool = ...,
    n_threads: int = ...,
    chunk_rows: int = ...,
    pass_rows: int = ...,
) -> None: ...
def additive_chi2_dense(
    X: npt.NDArray[np.floating],
    out: npt.NDArray[np.floating],
    sample_steps: int,
    sample_interval: float,
    n_threads: int,
) -> None: ...
def additive_chi2_csr(
    data: npt.NDArray[np.floating],
    indptr: npt.NDArray[np.int64],
    out_data: npt.NDArray[np.floating],
    sample_steps: int,
    sample_interval: float,
    max_row_nnz: int,
    n_threads: int,
) -> None: ...
def tensor_sketch_dense(
    X: npt.NDArray[np.floating],
    hashes: npt.NDArray[np.int64],
    signs: npt.NDArray[np.float64],
    sqrt_gamma: float,
    sqrt_coef0: float,
    out: npt.NDArray[np.floating],
    buf: npt.NDArray[np.floating],
    slots: npt.NDArray[np.int64],
    n_threads: int,
) -> None: ...
def tensor_sketch_csr(
    data: npt.NDArray[np.floating],
    indices: npt.NDArray[np.integer],
    indptr: npt.NDArray[np.integer],
    n_features: int,
    hashes: npt.NDArray[np.int64],
    signs: npt.NDArray[np.float64],
    sqrt_gamma: float,
    sqrt_coef0: float,
    out: npt.NDArray[np.floating],
    buf: npt.NDArray[np.floating],
    slots: npt.NDArray[np.int64],
    max_row_nnz: int,
    n_threads: int,
) -> None: ...
