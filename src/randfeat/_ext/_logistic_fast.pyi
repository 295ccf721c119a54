import numpy as np
from numpy.typing import NDArray

def n_chunks(n_rows: int) -> int: ...
def binary_logistic_pass(
    Z: NDArray[np.float64],
    coef: NDArray[np.float64],
    intercept: float,
    y: NDArray[np.float64],
    w: NDArray[np.float64],
    F: NDArray[np.float64],
    part_loss: NDArray[np.float64],
    part_grad: NDArray[np.float64],
    part_resid: NDArray[np.float64],
    n_threads: int,
) -> None: ...
