"""
Fitting on a Dask cluster
=========================

When the rows do not fit on one machine, give randfeat Dask arrays.  Each
worker makes the features of its own row blocks and reduces them to
sufficient statistics (a D × D Gram matrix and a D × K right-hand side);
the statistics are merged by a binary tree in block order and the small
D × D system is solved on the client.  Neither the rows nor the features
travel to the client, and the coefficients equal the in-memory fit's.

A real cluster would be ``Client("scheduler-address:8786")``; here a
``LocalCluster`` of two workers.  ``processes=False`` keeps the workers as
threads of this process, which starts in a fraction of a second (worker
processes work the same way and suit a real run: see
:doc:`/user_guide/dask`).  Dask is an optional dependency: ``pip install
".[dask]"`` in a clone; importing randfeat never imports it.
"""

# %%
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster
from sklearn.pipeline import make_pipeline

from randfeat import RandomFourierFeatures, Ridge

cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
client = Client(cluster)

# %%
# Data made on the workers
# ------------------------
# 100,000 rows in 4 blocks, generated and kept (``persist``) on the workers.
rng = da.random.default_rng(0)
X = rng.standard_normal((100_000, 20), chunks=(25_000, 20)).persist()
y = (da.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(100_000, chunks=25_000)).persist()

# %%
# Fit and predict
# ---------------
# The same code as for NumPy arrays.  ``predict`` returns a lazy Dask array
# with X's row blocks; ``score`` brings back one float.
model = make_pipeline(RandomFourierFeatures(500, gamma=0.05, random_state=0), Ridge(alpha=1.0))
t0 = time.perf_counter()
model.fit(X, y)
print(f"Dask fit: {time.perf_counter() - t0:.2f} s")
y_pred = model.predict(X)
print(type(y_pred).__name__, y_pred.chunks[0], "- first values:", y_pred[:3].compute().round(3))
print(f"R² on the training rows: {model.score(X, y):.4f}")

# %%
# The same model in memory
# ------------------------
# Bring the data to the client (only to check the claim) and fit there.
X_np, y_np = X.compute(), y.compute()
local = make_pipeline(RandomFourierFeatures(500, gamma=0.05, random_state=0), Ridge(alpha=1.0))
t0 = time.perf_counter()
local.fit(X_np, y_np)
print(f"in-memory fit: {time.perf_counter() - t0:.2f} s")
coef_dask, coef_local = model[-1].coef_, local[-1].coef_
print(f"coefficients, largest relative difference: "
      f"{np.max(np.abs(coef_dask - coef_local)) / np.max(np.abs(coef_local)):.1e}")

# %%
client.close()
cluster.close()

# %%
# At this size the in-memory fit is faster: the cluster's scheduling
# costs more than the work saved.  Dask pays when the rows do not fit in one
# machine's memory, or are already on the workers.  The bench script ``bench/scale_out.py`` measures
# a larger fit on worker processes: on two cores the 2-process cluster takes
# about the in-memory fit's wall time, with 1.1× its total CPU time (see the
# :doc:`/performance` page).
