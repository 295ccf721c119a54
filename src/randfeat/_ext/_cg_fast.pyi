import numpy as np
from numpy.typing import NDArray

def n_blocks(n_rows: int) -> int: ...
def finish_apply(
    Q: NDArray[np.floating],
    P: NDArray[np.floating],
    mu: NDArray[np.float64],
    s: NDArray[np.float64],
    alpha: float,
    partial_pq: NDArray[np.float64],
    n_threads: int,
) -> None: ...
def scale_rows(
    R: NDArray[np.float64],
    inv_diag: NDArray[np.float64],
    live: NDArray[np.float64],
    Zr: NDArray[np.float64],
    partial_rr: NDArray[np.float64],
    n_threads: int,
) -> None: ...
def add_products(
    out: NDArray[np.float64],
    A: NDArray[np.float64],
    C: NDArray[np.float64],
    sign: float,
    n_threads: int,
) -> None: ...
def cross_products(A: NDArray[np.float64], B: NDArray[np.float64], n_threads: int) -> NDArray[np.float64]: ...
def cross_products_pair(
    A: NDArray[np.float64], B: NDArray[np.float64], C: NDArray[np.float64], n_threads: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]: ...
def cg_step(
    X: NDArray[np.float64],
    R: NDArray[np.float64],
    P: NDArray[np.float64],
    Q: NDArray[np.float64],
    step: NDArray[np.float64],
    inv_diag: NDArray[np.float64],
    live: NDArray[np.float64],
    Zr: NDArray[np.float64],
    partial_rr: NDArray[np.float64],
    n_threads: int,
) -> None: ...
