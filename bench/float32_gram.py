"""Cost of holding float32 Gram accumulation (ssyrk) to one BLAS thread, for bit-identical fits.

Times ``StatisticsAccumulator.add`` on float32 blocks with ssyrk on one BLAS
thread (what randfeat does) against ssyrk on every core (what it did before,
thread-count dependent), alternating, and prints the median ratio.  A float64
row (dsyrk, threaded in both) is the control.

Usage: ``python bench/float32_gram.py [--quick]``.
"""

import argparse
import time

import numpy as np
from scipy.linalg.blas import get_blas_funcs

from randfeat._core.threads import limit_blas_threads, usable_cores


def _time_syrk(Z, n_threads):
    syrk = get_blas_funcs("syrk", dtype=Z.dtype)
    C = np.zeros((Z.shape[1], Z.shape[1]), dtype=Z.dtype, order="F")
    with limit_blas_threads(n_threads):
        t = time.perf_counter()
        syrk(1.0, Z.T, beta=0.0, c=C, trans=0, lower=1, overwrite_c=1)
        return time.perf_counter() - t


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small block, few repeats")
    args = parser.parse_args()
    n, D, reps = (8192, 1024, 5) if args.quick else (32768, 2048, 9)
    cores = usable_cores()
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        Z = rng.normal(size=(n, D)).astype(dtype)
        one, many = [], []
        for _ in range(reps):  # alternating, same run
            one.append(_time_syrk(Z, 1))
            many.append(_time_syrk(Z, cores))
        r = np.median(one) / np.median(many)
        print(f"{np.dtype(dtype).name} syrk {n}x{D}: 1 thread {np.median(one) * 1e3:.1f} ms, "
              f"{cores} threads {np.median(many) * 1e3:.1f} ms, ratio 1-thread/threaded {r:.2f}")


if __name__ == "__main__":
    main()
