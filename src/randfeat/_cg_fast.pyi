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
def update_xr(
    X: NDArray[np.floating],
    R: NDArray[np.floating],
    Zr: NDArray[np.floating],
    P: NDArray[np.floating],
    Q: NDArray[np.floating],
    step: NDArray[np.float64],
    inv_diag: NDArray[np.float64],
    partial_rr: NDArray[np.float64],
    partial_rz: NDArray[np.float64],
    n_threads: int,
) -> None: ...
def update_p(
    P: NDArray[np.floating],
    Zr: NDArray[np.floating],
    beta: NDArray[np.float64],
    keep: NDArray[np.float64],
    n_threads: int,
) -> None: ...
