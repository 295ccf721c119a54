"""randfeat: random features for large-scale kernel machines.

Random Fourier features and random binning features (Rahimi & Recht, 2007)
map data through a random map z with z(x)ᵀz(y) ≈ k(x, y), so that a linear
solver on the features stands in for a kernel machine.
"""

from ._dispatch import check_vector_isa_env

check_vector_isa_env()

from . import datasets  # noqa: E402
from ._binning import RandomBinningFeatures  # noqa: E402
from ._config import get_config, show_config  # noqa: E402
from ._fourier import RandomFourierFeatures  # noqa: E402
from ._kernels import kernel_matrix  # noqa: E402
from ._ridge import Ridge, RidgeClassifier  # noqa: E402
from ._ridge_cv import RidgeClassifierCV, RidgeCV  # noqa: E402
from ._version import __version__  # noqa: E402

__all__ = [
    "RandomBinningFeatures",
    "RandomFourierFeatures",
    "__version__",
    "datasets",
    "get_config",
    "kernel_matrix",
    "Ridge",
    "RidgeClassifier",
    "RidgeClassifierCV",
    "RidgeCV",
    "show_config",
]
