"""Where randfeat 0.1.0 defined RidgeCV, RidgeClassifierCV: kept so that its pickles load (the class now lives in ``randfeat._estimators.ridge_cv``)."""

from ._estimators.classifier_cv import RidgeClassifierCV  # noqa: F401
from ._estimators.ridge_cv import RidgeCV  # noqa: F401
