"""Type stubs for the collision kernel of one-hot block features."""

import numpy as np
import numpy.typing as npt

def collision_kernel(
    bins: npt.NDArray[np.uint16] | npt.NDArray[np.int32],
    out: npt.NDArray[np.floating],
    scale: float,
    n_threads: int,
) -> None: ...
