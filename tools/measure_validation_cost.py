"""Cost of the sparse-input checks against the transforms they guard.

Times, alternating and as the median of repeats, on one large CSR matrix:
the structure check (``check_sparse_structure``: indptr monotone, indices in
range), the canonical-format step (``canonical_csr``: a no-op for a scipy-built
canonical CSR) and the whole ``validate_X`` (which adds scikit-learn's
finiteness check of the data), against ``RandomFourierFeatures.transform``
and ``RandomBinningFeatures.transform`` of the same matrix, and against
``Ridge.predict`` without features (one sparse mat-vec: the cheapest
consumer, where the check costs most in proportion).

Usage: python tools/measure_validation_cost.py [--rows 200000] [--cols 1000]
       [--nnz-per-row 50] [--components 1000] [--grids 50] [--repeats 5]
"""

import argparse
import os
import statistics
import time

import numpy as np
import scipy.sparse as sp

from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge
from randfeat._core.validation import canonical_csr, check_sparse_structure, validate_X


def _random_csr(n, d, per_row, seed=0):
    rng = np.random.default_rng(seed)
    indptr = np.arange(0, n * per_row + 1, per_row, dtype=np.int32)
    # sorted, distinct columns per row: a canonical CSR as scipy builds it
    cols = np.sort(rng.choice(d, size=(n, per_row), replace=True), axis=1)
    cols[:, 1:] += np.arange(1, per_row)  # strictly increasing, then fold into range
    cols = np.sort(cols % d, axis=1)
    X = sp.csr_matrix((rng.standard_normal(n * per_row), cols.ravel().astype(np.int32), indptr), shape=(n, d))
    X.sum_duplicates()
    return X


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--cols", type=int, default=1000)
    parser.add_argument("--nnz-per-row", type=int, default=50)
    parser.add_argument("--components", type=int, default=1000)
    parser.add_argument("--grids", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    X = _random_csr(args.rows, args.cols, args.nnz_per_row)
    rff = RandomFourierFeatures(args.components, gamma=1.0 / args.cols, random_state=0).fit(X[:100])
    binning = RandomBinningFeatures(args.grids, gamma=1.0 / args.cols, random_state=0).fit(X)
    ridge = Ridge(solver="cg", tol=1e-3).fit(X[:2000], np.ones(2000))  # predict: one sparse mat-vec
    steps = {
        "check_sparse_structure": lambda: check_sparse_structure(X),
        "canonical_csr": lambda: canonical_csr(X),
        "validate_X (whole)": lambda: validate_X(rff, X, reset=False),
        "RandomFourierFeatures.transform": lambda: rff.transform(X),
        "RandomBinningFeatures.transform": lambda: binning.transform(X),
        "Ridge.predict (X @ coef)": lambda: ridge.predict(X),
    }
    times = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():  # alternating, so load changes hit all alike
            t0 = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - t0)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"CSR {args.rows} x {args.cols}, nnz {X.nnz}, {X.indices.dtype} indices; "
          f"load average {os.getloadavg()[0]:.1f}; median of {args.repeats}")
    for name, t in med.items():
        print(f"  {name:34s} {t * 1e3:9.2f} ms")
    for guarded in ("RandomFourierFeatures.transform", "RandomBinningFeatures.transform", "Ridge.predict (X @ coef)"):
        print(f"  structure check / {guarded}: {med['check_sparse_structure'] / med[guarded]:.2%}; "
              f"validate_X / it: {med['validate_X (whole)'] / med[guarded]:.2%}")


if __name__ == "__main__":
    main()
