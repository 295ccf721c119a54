"""
Kernel approximation error against the number of features
==========================================================

Random features replace a kernel :math:`k(x, y)` by an inner product of
random maps, :math:`z(x)^\\top z(y)`.  How close that is depends on the
number of features and on how the random variables are drawn.  Here every
map and sampling randfeat has is measured against the exact kernel
(:func:`randfeat.kernel_matrix`) on the same 300 points:

* random Fourier features of the Gaussian (``rbf``) kernel, with the two
  maps (``feature_map="cossin"``, the default, and ``"cos"``, as
  scikit-learn's ``RBFSampler``) and the samplings (``"iid"``,
  ``"orthogonal"``, ``"qmc"``; the structured ``"sorf"`` and
  ``"fastfood"``; the data-dependent ``"leverage"``);
* random binning features of the Laplacian kernel, against the number of
  grids ``P`` (each grid adds one non-zero per row);
* scikit-learn's kernel approximations as randfeat has them:
  ``Nystroem`` (uniform and leverage-score landmarks), ``PolynomialCountSketch``
  and ``SkewedChi2Sampler``, each against its own exact kernel.

The error shrinks like :math:`1/\\sqrt{D}` for i.i.d. draws (the dashed
line); orthogonal and quasi-Monte Carlo draws do better at the same width.
"""

# %%
# Data and exact kernels
# ----------------------
# 300 points in 10 dimensions; gamma makes typical kernel values mid-range.
import matplotlib.pyplot as plt
import numpy as np

from randfeat import (
    Nystroem,
    PolynomialCountSketch,
    RandomBinningFeatures,
    RandomFourierFeatures,
    SkewedChi2Sampler,
    kernel_matrix,
)

rng = np.random.default_rng(0)
X = rng.standard_normal((300, 10))
gamma = 0.05
K_rbf = kernel_matrix(X, kernel="rbf", gamma=gamma)
K_lap = kernel_matrix(X, kernel="laplacian", gamma=gamma)
upper = np.triu_indices(X.shape[0], k=1)  # each pair once, no diagonal


def mean_abs_error(Z, K):
    """Mean |z(x)·z(y) - k(x, y)| over the pairs."""
    Z = Z.toarray() if hasattr(Z, "toarray") else Z
    return np.abs((Z @ Z.T - K)[upper]).mean()


widths = [16, 32, 64, 128, 256, 512, 1024, 2048]
seeds = range(3)

# %%
# Fourier features: both maps, every sampling
# -------------------------------------------
# ``n_components`` is the output width D.  For ``cossin`` that is D/2
# frequencies, each giving a cosine and a sine; for ``cos`` D frequencies
# with random phases.  The structured and leverage samplings are shown with
# ``cossin`` only.
def fourier_widths(sampling):
    """The widths measured: leverage sampling's fit grows like D², so it stops at 1024."""
    return [D for D in widths if sampling != "leverage" or D <= 1024]


fourier = {}
for feature_map, samplings in (("cossin", ("iid", "orthogonal", "qmc", "sorf", "fastfood", "leverage")),
                               ("cos", ("iid", "orthogonal", "qmc"))):
    for sampling in samplings:
        errors = []
        for D in fourier_widths(sampling):
            errs = [
                mean_abs_error(
                    RandomFourierFeatures(D, kernel="rbf", gamma=gamma, feature_map=feature_map,
                                          sampling=sampling, random_state=seed).fit_transform(X),
                    K_rbf,
                )
                for seed in seeds
            ]
            errors.append(np.mean(errs))
        fourier[feature_map, sampling] = errors
        print(f"{feature_map:6s} {sampling:10s} D={fourier_widths(sampling)[-1]}: mean error {errors[-1]:.2e}")

# %%
# Binning features
# ----------------
# Binning represents kernels whose pitch density exists, the Laplacian one
# here (asking for ``rbf`` raises an error that explains why).  Its output
# is sparse: P non-zeros per row, whatever the number of columns.
grids = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
binning = [
    np.mean([mean_abs_error(RandomBinningFeatures(P, kernel="laplacian", gamma=gamma, random_state=seed)
                            .fit_transform(X), K_lap) for seed in seeds])
    for P in grids
]
print(f"binning P=1024: mean error {binning[-1]:.2e}")

# %%
# scikit-learn's kernel approximations
# ------------------------------------
# The same names and parameters as ``sklearn.kernel_approximation`` (and
# for one ``random_state`` the same features).  Nyström's error falls much
# faster than 1/sqrt(m) here: 300 points in 10 dimensions have a kernel
# matrix of low effective rank.  ``landmarks="leverage"`` picks the
# landmarks by ridge leverage scores instead of uniformly.  The χ² family
# needs non-negative data.
Xpos = np.abs(X)
K_poly = kernel_matrix(X, kernel="polynomial", gamma=0.1, degree=2, coef0=1.0)
K_skew = kernel_matrix(Xpos, kernel="skewed_chi2", skewedness=1.0)
others = {}
for name, make, data, K in (
    ("Nystroem, uniform", lambda D, s: Nystroem(gamma=gamma, n_components=D, random_state=s), X, K_rbf),
    ("Nystroem, leverage", lambda D, s: Nystroem(gamma=gamma, n_components=D, landmarks="leverage",
                                                 random_state=s), X, K_rbf),
    ("PolynomialCountSketch", lambda D, s: PolynomialCountSketch(gamma=0.1, degree=2, coef0=1.0, n_components=D,
                                                                 random_state=s), X, K_poly),
    ("SkewedChi2Sampler", lambda D, s: SkewedChi2Sampler(n_components=D, random_state=s), Xpos, K_skew),
):
    sizes = [D for D in widths if D <= (256 if name.startswith("Nystroem") else widths[-1])]
    # relative error: the kernels have different scales
    scale = np.abs(K[upper]).mean()
    others[name] = (sizes, [np.mean([mean_abs_error(make(D, s).fit_transform(data), K) / scale for s in seeds])
                            for D in sizes])
    print(f"{name:22s} D={sizes[-1]}: mean relative error {others[name][1][-1]:.2e}")

# %%
# The plot
# --------
fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.4))
styles = {"iid": "o-", "orthogonal": "s-", "qmc": "^-", "sorf": "v-", "fastfood": "D-", "leverage": "x-"}
for (feature_map, sampling), errors in fourier.items():
    color = "C1" if feature_map == "cos" else f"C{[0, 0, 0, 3, 4, 5][list(styles).index(sampling)]}"
    ax1.loglog(fourier_widths(sampling), errors, styles[sampling], color=color,
               label=f"{feature_map}, {sampling}", alpha=0.9, markersize=4)
ref = fourier["cossin", "iid"][0] * np.sqrt(widths[0] / np.array(widths))
ax1.loglog(widths, ref, "k--", lw=1, label=r"$\propto 1/\sqrt{D}$")
ax1.set(xlabel="output width D", ylabel="mean |z(x)·z(y) − k(x, y)|",
        title="Fourier features, rbf kernel")
ax1.legend(fontsize=8)
ax2.loglog(grids, binning, "o-", color="C2", label="binning, laplacian")
ref = binning[0] * np.sqrt(grids[0] / np.array(grids))
ax2.loglog(grids, ref, "k--", lw=1, label=r"$\propto 1/\sqrt{P}$")
ax2.set(xlabel="number of grids P", title="Binning features, laplacian kernel")
ax2.legend(fontsize=8)
for name, (sizes, errors) in others.items():
    ax3.loglog(sizes, errors, "o-", label=name, markersize=4)
ax3.set(xlabel="output width D (landmarks m for Nyström)", ylabel="mean error / mean |k(x, y)|",
        title="scikit-learn's kernel approximations")
ax3.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# What to take from it: at the same width and sampling, ``cossin``'s error
# is at or below ``cos``'s (it has no random phase to average out), and
# ``orthogonal`` and ``qmc`` draws lower it further for the Gaussian kernel,
# ``qmc`` the most at large D; ``sorf`` is about as good as ``orthogonal``
# at a fraction of the cost for wide inputs, ``fastfood`` a little worse
# than ``iid`` (its rows within a block are correlated), and ``leverage``
# sampling, which aims at the ridge model rather than at the kernel,
# approximates the kernel worse than ``iid``.  These errors are on the
# kernel itself; the effect on a model's test error is usually smaller (see
# :ref:`sphx_glr_auto_examples_plot_binning_vs_fourier.py`).
