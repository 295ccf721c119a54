"""
Predictive standard deviation: GP-style bands
=============================================

Ridge regression on random features is Bayesian linear regression on those
features: with a prior :math:`w \\sim N(0, \\sigma^2/\\alpha \\, I)` the
posterior mean is the ridge solution, and the posterior covariance gives
each prediction a standard deviation.  With Fourier features of an RBF
kernel this approximates a Gaussian process with that kernel, at a cost
linear in the number of rows.

:meth:`randfeat.Ridge.predict` returns it with ``return_std=True`` (the
Cholesky solver keeps the factor it needs).  Here a 1-d toy problem with a
gap in the data, beside scikit-learn's exact Gaussian process with the same
kernel and noise level.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF

from randfeat import RandomFourierFeatures, Ridge

rng = np.random.default_rng(0)
x = np.concatenate([rng.uniform(-4, -0.5, 60), rng.uniform(1.5, 4, 40)])[:, None]
noise = 0.2
y = np.sin(2 * x[:, 0]) + 0.3 * x[:, 0] + noise * rng.standard_normal(x.shape[0])
x_plot = np.linspace(-6, 6, 400)[:, None]

# %%
# The random-feature model
# ------------------------
# ``gamma`` is the RBF kernel's exp(-gamma ‖x − y‖²).  ``alpha`` is the noise
# variance over the prior variance of the function; ``fit_intercept=False``
# keeps the prior mean at 0, as a GP's.
gamma = 1.0
model = Ridge(alpha=noise**2, fit_intercept=False,
              features=RandomFourierFeatures(2000, gamma=gamma, random_state=0)).fit(x, y)
mean, std = model.predict(x_plot, return_std=True)

# %%
# The exact Gaussian process
# --------------------------
# The same kernel (length scale 1/√(2·gamma)) and noise, not re-optimised.
gp = GaussianProcessRegressor(kernel=RBF(length_scale=1 / np.sqrt(2 * gamma)), alpha=noise**2, optimizer=None)
gp_mean, gp_std = gp.fit(x, y).predict(x_plot, return_std=True)
inside = np.abs(x_plot[:, 0]) <= 4
for where, rows in (("within the data's range", inside), ("beyond it", ~inside)):
    print(f"{where}: largest difference from the exact GP, mean {np.max(np.abs(mean - gp_mean)[rows]):.3f}, "
          f"std {np.max(np.abs(std - gp_std)[rows]):.3f} (exact GP's std up to {gp_std[rows].max():.2f})")
print(f"noise variance estimated from the residuals: {model.noise_variance_:.4f} (true: {noise**2:.4f})")

# %%
fig, ax = plt.subplots(figsize=(8, 4))
ax.fill_between(x_plot[:, 0], mean - 2 * std, mean + 2 * std, alpha=0.25, color="C0",
                label="randfeat: mean ± 2 std")
ax.plot(x_plot[:, 0], mean, color="C0")
ax.plot(x_plot[:, 0], gp_mean - 2 * gp_std, "k--", lw=1, label="exact GP: mean ± 2 std")
ax.plot(x_plot[:, 0], gp_mean + 2 * gp_std, "k--", lw=1)
ax.scatter(x[:, 0], y, s=10, color="C3", label="data")
ax.set(xlabel="x", ylabel="y", title="Ridge(features=RandomFourierFeatures(2000)).predict(return_std=True)")
ax.legend(fontsize=8, loc="upper left")
fig.tight_layout()
plt.show()

# %%
# The band widens in the gap and beyond the data, as the exact GP's does.
# ``std`` is the uncertainty of the function f(x) (the posterior of the
# weights), not of a new observation: add ``noise_variance_`` to its square
# for that.  The model estimates the noise variance from its residuals, and
# the band scales with its square root; the GP here is *given* the true
# noise, which is why the randfeat band is a little narrower far from the
# data.  The means differ most where there are no data, where 2000 random
# features are a coarser stand-in for the kernel; the difference shrinks
# with more features, like the kernel's error (see
# :ref:`sphx_glr_auto_examples_plot_kernel_approximation.py`).
