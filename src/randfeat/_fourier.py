"""Where randfeat 0.1.0 defined RandomFourierFeatures: kept so that its pickles load (the class now lives in ``randfeat._maps.fourier``)."""

from ._maps.fourier import RandomFourierFeatures  # noqa: F401
