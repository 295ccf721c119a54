"""Where randfeat 0.1.0 defined RidgeSolution: kept so that its pickles load (the class now lives in ``randfeat._solvers.cholesky``)."""

from ._solvers.cholesky import RidgeSolution  # noqa: F401
