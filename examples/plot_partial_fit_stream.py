"""
Learning from a stream with partial_fit
=======================================

When rows arrive in blocks — read from disk a file at a time, or from a
queue — :meth:`randfeat.Ridge.partial_fit` updates the model one block at a
time.  It is *exact*: each block adds its sufficient statistics (the
features' Gram matrix and their products with the targets, a D × D and a
D × K array), and the model after any sequence of blocks equals
:meth:`~randfeat.Ridge.fit` on their concatenation.  Memory does not grow
with the number of rows seen.

Here 16,000 rows of the Census-like regression set
(:func:`randfeat.datasets.make_census_like`) arrive in 16 blocks.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from randfeat import RandomFourierFeatures, Ridge
from randfeat.datasets import make_census_like

X_all, y_all = make_census_like(18000, random_state=0)
X_stream, y_stream = X_all[:16000], y_all[:16000]
X_test, y_test = X_all[16000:], y_all[16000:]
blocks = [(X_stream[i:i + 1000], y_stream[i:i + 1000]) for i in range(0, 16000, 1000)]

# %%
# One model, updated block by block
# ---------------------------------
# The feature map is drawn at the first call (it needs only the number of
# columns and, for ``gamma="scale"``, the first block's variance) and then
# kept: every block goes through the same map.
model = Ridge(alpha=1.0, features=RandomFourierFeatures(1000, gamma="scale", random_state=0))
rows_seen, scores, seconds = [], [], []
for X_block, y_block in blocks:
    t0 = time.perf_counter()
    model.partial_fit(X_block, y_block)
    seconds.append(time.perf_counter() - t0)
    rows_seen.append((rows_seen[-1] if rows_seen else 0) + X_block.shape[0])
    scores.append(model.score(X_test, y_test))
print(f"R² on the test rows after {rows_seen[-1]} rows: {scores[-1]:.4f}; "
      f"median time per block of 1000 rows: {1000 * np.median(seconds):.0f} ms")

# %%
# The same model as one fit on all the rows
# -----------------------------------------
# ``gamma="scale"`` is resolved from the first block; fitting on everything
# with that same value gives the same coefficients, to rounding.
batch = Ridge(alpha=1.0, features=RandomFourierFeatures(1000, gamma=model.features_.gamma_, random_state=0))
batch.fit(X_stream, y_stream)
difference = np.max(np.abs(batch.coef_ - model.coef_)) / np.max(np.abs(batch.coef_))
print(f"largest coefficient difference, relative: {difference:.1e}")

# %%
fig, ax = plt.subplots(figsize=(6.4, 3.6))
ax.plot(rows_seen, scores, "o-")
ax.axhline(batch.score(X_test, y_test), color="k", ls="--", lw=1, label="fit on all 16,000 rows")
ax.set(xlabel="rows seen", ylabel="R² on 2,000 test rows", title="Ridge.partial_fit, blocks of 1,000 rows")
ax.legend()
fig.tight_layout()
plt.show()

# %%
# Classification works the same way with
# :meth:`randfeat.RidgeClassifier.partial_fit`, which needs ``classes=`` at
# the first call (a block may not hold every class).  Binning features
# cannot be fitted this way: their columns are the bins seen so far, so a
# new block would change the meaning of earlier rows' columns; fit them on
# all rows, or on a Dask array (:doc:`/user_guide/dask`).
