"""Where randfeat 0.1.0 defined RidgeStatistics: kept so that its pickles load (the class now lives in ``randfeat._solvers.stats``)."""

from ._solvers.stats import RidgeStatistics  # noqa: F401
