"""The sizes of a Table 1 run (bench/table1.py): full, --quick and --tiny.

Each profile sets the data sizes, the feature counts, the selection grid and
the budgets.  ``sizes`` maps a set's key to the rows it keeps (absent: all
rows); for the real Adult set (``adult-uci``) that many rows of each of its
training and test files.
"""

PROFILES = {
    "full": dict(sizes={}, d_small=500, d_large=5000, grids=(30, 50), sel_rows=8000, val_rows=4000,
                 gamma_mults=(0.5, 2.0, 8.0), lambdas=(1e-5, 1e-4, 1e-3), exact_budget_s=600.0, threads=None),
    "quick": dict(sizes={"census": 6000, "adult": 8000, "forest": 30000}, d_small=500, d_large=2000,
                  grids=(30, 50), sel_rows=1000, val_rows=1000,
                  gamma_mults=(0.5, 2.0, 8.0), lambdas=(1e-5, 1e-3), exact_budget_s=20.0, threads=1),
    "tiny": dict(sizes={"adult-uci": 2000, "census": 500, "adult": 600, "forest": 1500}, d_small=48, d_large=96,
                 grids=(4, 8), sel_rows=300, val_rows=200,
                 gamma_mults=(1.0, 4.0), lambdas=(1e-4, 1e-2), exact_budget_s=2.0, threads=1),
}
