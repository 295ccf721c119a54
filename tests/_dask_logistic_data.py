"""Data and comparisons shared by the Dask logistic test files (``tests/backends/test_dask_logistic*.py``).

Imported after those files' ``pytest.importorskip("dask.array")``: Dask is
installed whenever a function here runs.
"""

import numpy as np
from sklearn.datasets import make_classification

#: Uneven row blocks, one of a single row.
CHUNKS = (250, 1, 300, 149)


def classification_data(n_classes=2, n=700, seed=0):
    """(X, y, sample_weight): a small classification set with positive, uneven weights."""
    X, y = make_classification(n, 5, n_informative=4, n_redundant=0, n_classes=n_classes, n_clusters_per_class=1,
                               random_state=seed)
    return X, y, np.random.default_rng(seed + 1).uniform(0.2, 2.0, n)


def as_dask(X, *vs, chunks=CHUNKS):
    """X and the vectors ``vs`` (None kept) as Dask arrays of the same row blocks."""
    import dask.array as da

    Xd = da.from_array(X, chunks=(chunks, (X.shape[1],)))
    return (Xd,) + tuple(None if v is None else da.from_array(v, chunks=(chunks,)) for v in vs)


def assert_close(a, b, rtol=1e-8):
    """Same shape, and max |a − b| <= rtol · max(max |b|, 1)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    assert np.abs(a - b).max() <= rtol * max(np.abs(b).max(), 1.0)
