"""Type stubs for the compiled fused Fourier-feature kernel."""

import numpy as np
import numpy.typing as npt

def vector_isa() -> str: ...
def trig_limits() -> tuple[float, float]: ...
def tile_shape(n_freq: int, itemsize: int, cossin: bool) -> tuple[int, int]: ...
def fourier_dense(
    X: npt.NDArray[np.floating],
    W: npt.NDArray[np.floating],
    b: npt.NDArray[np.floating],
    out: npt.NDArray[np.floating],
    cossin: bool,
    scale: float,
    n_threads: int,
    tile_rows: int = ...,
    col_block: int = ...,
) -> None: ...
def fourier_csr(
    data: npt.NDArray[np.floating],
    indices: npt.NDArray[np.integer],
    indptr: npt.NDArray[np.integer],
    W: npt.NDArray[np.floating],
    b: npt.NDArray[np.floating],
    out: npt.NDArray[np.floating],
    cossin: bool,
    scale: float,
    n_threads: int,
) -> None: ...
def sincos(x: npt.NDArray[np.floating], s: npt.NDArray[np.floating], scale: float = ...) -> None: ...
def cos_shifted(x: npt.NDArray[np.floating], b: npt.NDArray[np.floating], scale: float = ...) -> None: ...
def row_products(
    X: npt.NDArray[np.floating],
    W: npt.NDArray[np.floating],
    out: npt.NDArray[np.floating],
    n_threads: int,
) -> None: ...
