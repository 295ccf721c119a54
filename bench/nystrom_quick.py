"""Jacobi(+block) vs randomized Nyström CG on a 26-class binning problem (issue 11's look-alike, scaled down).

A 26-cluster Gaussian mixture in 16 dimensions, P=50 binning grids with the
Laplacian gamma = 4 / median L1 distance, ±1 one-vs-rest targets; for each
alpha, ``cg_ridge`` with each preconditioner, alternating, on one operator.
Prints CG iterations (max over classes), time including the Nyström build,
the rank and the relative residual reached.

Usage::

    python bench/nystrom_quick.py                 # n=5000 (minutes on a shared 2-core machine)
    python bench/nystrom_quick.py --n 20000 --alphas 1 1e-2 1e-4
"""

import argparse
import time

import numpy as np

from randfeat import RandomBinningFeatures
from randfeat._solvers.cg_path import cg_ridge
from randfeat._linalg.products import make_products


def mixture_26(n, d=16, n_classes=26, seed=0):
    """Return (X, labels): a Gaussian mixture, one unit-variance cluster per class."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, d)) * 2
    labels = rng.integers(0, n_classes, n)
    return centres[labels] + rng.normal(size=(n, d)), labels


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--alphas", type=float, nargs="+", default=[1.0, 1e-2, 1e-4])
    parser.add_argument("--gamma-factor", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    X, labels = mixture_26(args.n)
    rng = np.random.default_rng(1)
    pairs = rng.integers(0, args.n, (2000, 2))
    median_l1 = np.median(np.abs(X[pairs[:, 0]] - X[pairs[:, 1]]).sum(axis=1))
    Z = RandomBinningFeatures(50, gamma=args.gamma_factor / median_l1, random_state=0).fit_transform(X).tocsr()
    K = labels.max() + 1
    Y = -np.ones((args.n, K))
    Y[np.arange(args.n), labels] = 1.0
    print(f"Z {Z.shape}, nnz={Z.nnz}, {K} targets", flush=True)
    ops = make_products(Z, args.threads)
    for alpha in args.alphas:
        for kind in ("jacobi", "nystrom"):
            t = time.perf_counter()
            r = cg_ridge(ops, Y, None, alpha, fit_intercept=True, tol=1e-6, max_iter=10000, preconditioner=kind)
            print(f"alpha={alpha:g} {kind:8s} iterations {int(r.n_iter.max()):5d}  {time.perf_counter() - t:7.2f} s  "
                  f"rank {r.nystrom_rank}  residual {r.residual.max():.1e}", flush=True)


if __name__ == "__main__":
    main()
