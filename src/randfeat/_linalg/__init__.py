"""Products with a feature matrix Z: the ``FeatureOperator`` interface (``operator``), one module per matrix kind
(``dense``, ``csr``, ``onehot``), the factory that picks one (``products``) and row merging (``rowmerge``)."""
