"""The random input of the binning and ridge benchmarks: Forest-Cover-shaped rows.

Standardised continuous columns and two one-hot blocks, so that binning
features share bins between rows as on the real covtype data; cheap to draw
at any size, in the benchmark process or in a child process.
"""

import numpy as np

#: Columns: 10 continuous, then one-hot(4) and one-hot(40), as covtype.
D = 54
#: The binning benchmarks' gamma: O(10^3–10^4) occupied bins per grid on this data at N=522000.
BINNING_GAMMA = 0.25


def covtype_like(n, seed=0, dtype=np.float64):
    """(n, 54) data shaped like Forest Cover: 10 continuous + one-hot(4) + one-hot(40)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, D), dtype=dtype)
    X[:, :10] = rng.normal(size=(n, 10))
    rows = np.arange(n)
    X[rows, 10 + rng.integers(0, 4, n)] = 1
    X[rows, 14 + rng.integers(0, 40, n)] = 1
    return X
