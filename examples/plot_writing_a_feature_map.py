"""
Writing a feature map: arc-cosine features
==========================================

randfeat's estimators take any :class:`randfeat.FeatureMap`.  This example
writes one in a few dozen lines, importing only public names: the random
features of the degree-1 arc-cosine kernel (Cho & Saul, "Kernel Methods
for Deep Learning", NIPS 2009), the kernel of an infinitely wide layer of
rectified linear units,

.. math::

   k(x, y) = 2\\,\\mathbb{E}_{w \\sim N(0, I)}\\big[\\max(0, w^\\top x')
   \\max(0, w^\\top y')\\big] = \\tfrac{1}{\\pi}\\|x'\\|\\|y'\\|
   \\big(\\sin\\theta + (\\pi - \\theta)\\cos\\theta\\big),

on inputs augmented with a bias, :math:`x' = (\\sqrt{\\gamma}\\,x, 1)`, and
:math:`\\theta` the angle between :math:`x'` and :math:`y'`.  Its random
features are :math:`z(x) = \\sqrt{2/D}\\,\\max(0, \\sqrt{\\gamma}\\,W^\\top x + b)`
with the columns of :math:`W` and :math:`b` standard normal.

The map then runs through :class:`randfeat.Ridge`,
:class:`randfeat.RidgeCV` (choosing ``gamma``), ``partial_fit`` and Dask
arrays with no other code: the user guide's page "Writing a feature map"
explains each part.
"""

# %%
# The map
# -------
# A frozen ``MapState`` holds the fitted parameters (checked when made and
# when a pickle is loaded); the ``FeatureMap`` subclass declares what it
# returns and what it can do, draws its state, and computes features.
import dataclasses

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.extmath import row_norms

from randfeat import FeatureMap, MapCapability, MapState, OutputKind, row_products


@dataclasses.dataclass(frozen=True, eq=False)
class ArcCosineState(MapState):
    """W (n_features × D, already scaled by √γ), b (D,) and the features' scale √(2/D)."""

    W: np.ndarray
    b: np.ndarray
    scale: float

    def check(self):
        super().check()
        if self.W.ndim != 2 or self.W.shape[1] != self.n_features_out or self.b.shape != (self.n_features_out,):
            raise ValueError("W must be n_features × n_features_out and b of length n_features_out")


class ArcCosineFeatures(FeatureMap):
    """Random features of the degree-1 arc-cosine kernel with a bias (Cho & Saul, 2009)."""

    output_kind = OutputKind.DENSE  # a C-ordered array in X's dtype, streamed chunk by chunk
    capabilities = frozenset({
        MapCapability.ROW_INDEPENDENT,  # row_products: a row's features never depend on the other rows
        MapCapability.KERNEL_WIDTH,  # RidgeCV(gammas=...) may choose gamma; _auto_gamma gives "auto"
        MapCapability.GAMMA_PATH,  # one draw rescaled per gamma
    })
    _parameter_constraints = {
        "n_components": [int],
        "gamma": [float, int],
        "random_state": ["random_state"],
        "n_jobs": [int, None],
    }

    def __init__(self, n_components=100, *, gamma=1.0, random_state=None, n_jobs=None):
        self.n_components = n_components
        self.gamma = gamma
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _draw_path(self, summary, gammas):
        rng = check_random_state(self.random_state)
        unit = rng.standard_normal((summary.n_features, self.n_components))
        b = rng.standard_normal(self.n_components).astype(summary.dtype)
        scale = float(np.sqrt(2.0 / self.n_components))
        return [ArcCosineState(n_features_out=self.n_components, W=(np.sqrt(g) * unit).astype(summary.dtype),
                               b=b, scale=scale) for g in gammas]

    def _draw(self, summary):
        return self._draw_path(summary, [self.gamma])[0]

    def _transform_rows(self, state, X, n_threads):
        Z = row_products(X, state.W, n_threads)
        Z += state.b
        np.maximum(Z, 0, out=Z)
        Z *= state.scale
        return Z

    def _auto_gamma(self, X):
        # √γ·x of unit mean square norm: comparable with the bias.
        return 1.0 / max(float(np.mean(row_norms(X[:1000], squared=True))), 1e-300)


# %%
# Its kernel
# ----------
# :math:`z(x)^\top z(y)` approaches the arc-cosine kernel as D grows.
import matplotlib.pyplot as plt  # noqa: E402


def arc_cosine_kernel(X, Y, gamma):
    Xa = np.hstack([np.sqrt(gamma) * X, np.ones((len(X), 1))])
    Ya = np.hstack([np.sqrt(gamma) * Y, np.ones((len(Y), 1))])
    nx, ny = np.linalg.norm(Xa, axis=1), np.linalg.norm(Ya, axis=1)
    cos = np.clip(Xa @ Ya.T / np.outer(nx, ny), -1.0, 1.0)
    theta = np.arccos(cos)
    return np.outer(nx, ny) / np.pi * (np.sin(theta) + (np.pi - theta) * cos)


rng = np.random.default_rng(0)
X = rng.normal(size=(300, 5))
y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=300)
K = arc_cosine_kernel(X[:50], X[:50], gamma=0.5)
sizes = [100, 300, 1000, 3000, 10000]
errors = []
for D in sizes:
    Z = ArcCosineFeatures(D, gamma=0.5, random_state=0).fit_transform(X[:50])
    errors.append(np.abs(Z @ Z.T - K).max() / np.abs(K).max())
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.loglog(sizes, errors, "o-", label="max |ZZᵀ − K| / max |K|")
ax.loglog(sizes, errors[0] * np.sqrt(sizes[0] / np.asarray(sizes)), "--", label="1/√D")
ax.set_xlabel("n_components D")
ax.legend()
fig.tight_layout()

# %%
# Through the estimators
# ----------------------
# Ridge streams the features chunk by chunk; RidgeCV draws W once and
# rescales it per gamma; partial_fit merges blocks exactly.
from randfeat import Ridge, RidgeCV  # noqa: E402

fm = ArcCosineFeatures(500, gamma=0.5, random_state=0)
ridge = Ridge(alpha=1e-2, features=fm).fit(X, y)
cv = RidgeCV(alphas=np.logspace(-4, 1, 6), gammas="auto", features=fm).fit(X, y)
blocks = Ridge(alpha=1e-2, features=fm)
for start in range(0, 300, 100):
    blocks.partial_fit(X[start:start + 100], y[start:start + 100])
same = np.abs(blocks.coef_ - ridge.coef_).max() <= 1e-10 * np.abs(ridge.coef_).max()
print(f"Ridge R² {ridge.score(X, y):.3f}; RidgeCV chose gamma={cv.gamma_:.3g}, alpha={cv.alpha_:.3g} "
      f"(leave-one-out mean squared error {-cv.best_score_:.3f}); partial_fit equals fit to 1e-10: {same}")
