"""Where randfeat 0.1.0 defined RandomBinningFeatures: kept so that its pickles load (the class now lives in ``randfeat._maps.binning``)."""

from ._maps.binning import RandomBinningFeatures  # noqa: F401
