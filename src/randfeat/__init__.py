"""randfeat: random features for large-scale kernel machines.

Random Fourier features and random binning features (Rahimi & Recht, 2007)
map data through a random map z with z(x)ᵀz(y) ≈ k(x, y), so that a linear
solver on the features stands in for a kernel machine.
"""

from ._core.openmp_env import apply_defaults

apply_defaults()  # before any compiled module loads the OpenMP runtime

from ._core.vector_isa import check_vector_isa_env  # noqa: E402

check_vector_isa_env()

from . import datasets  # noqa: E402
from ._core.config import get_config, show_config  # noqa: E402
from ._core.protocols import InputSummary, MapCapability, OutputKind  # noqa: E402
from ._estimators.classifier import RidgeClassifier  # noqa: E402
from ._estimators.classifier_cv import RidgeClassifierCV  # noqa: E402
from ._estimators.logistic import LogisticRegression  # noqa: E402
from ._estimators.logistic_cv import LogisticRegressionCV  # noqa: E402
from ._estimators.ridge import Ridge  # noqa: E402
from ._estimators.ridge_cv import RidgeCV  # noqa: E402
from ._linalg.products import row_products  # noqa: E402
from ._maps.additive_chi2 import AdditiveChi2Sampler  # noqa: E402
from ._maps.binning import RandomBinningFeatures  # noqa: E402
from ._maps.contract import FeatureMap, MapState  # noqa: E402
from ._maps.count_sketch import PolynomialCountSketch  # noqa: E402
from ._maps.fourier import RandomFourierFeatures  # noqa: E402
from ._maps.kernels import kernel_matrix  # noqa: E402
from ._maps.nystroem import Nystroem  # noqa: E402
from ._maps.rbf_sampler import RBFSampler  # noqa: E402
from ._maps.skewed_chi2 import SkewedChi2Sampler  # noqa: E402
from ._maps.transformer import TransformerMap, as_feature_map  # noqa: E402
from ._version import __version__  # noqa: E402

__all__ = [
    "AdditiveChi2Sampler",
    "FeatureMap",
    "InputSummary",
    "MapCapability",
    "MapState",
    "OutputKind",
    "TransformerMap",
    "as_feature_map",
    "Nystroem",
    "PolynomialCountSketch",
    "RandomBinningFeatures",
    "RandomFourierFeatures",
    "__version__",
    "datasets",
    "get_config",
    "kernel_matrix",
    "LogisticRegression",
    "LogisticRegressionCV",
    "Ridge",
    "RidgeClassifier",
    "RidgeClassifierCV",
    "RidgeCV",
    "row_products",
    "RBFSampler",
    "SkewedChi2Sampler",
    "show_config",
]
