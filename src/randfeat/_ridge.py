"""Where randfeat 0.1.0 defined Ridge, RidgeClassifier: kept so that its pickles load (the class now lives in ``randfeat._estimators.ridge``)."""

from ._estimators.classifier import RidgeClassifier  # noqa: F401
from ._estimators.ridge import Ridge  # noqa: F401
