"""What every randfeat feature map shares."""

from sklearn.base import BaseEstimator, TransformerMixin


class RandomFeatureMap(TransformerMixin, BaseEstimator):
    """Base class of randfeat's feature-map transformers (not public API).

    ``randfeat.Ridge(features=...)`` accepts instances of this class only.
    Subclasses set ``_sparse_output`` to say whether ``transform`` returns a
    sparse matrix (binning) or a dense array (Fourier): dense features are
    streamed chunk by chunk, sparse ones are materialised.
    """

    _sparse_output = False
