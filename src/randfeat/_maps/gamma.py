"""The gamma rules: ``gamma="scale"`` (1 / (n_features · X.var()), RBFSampler's, and its L1 counterpart) and the median heuristic of ``RidgeCV(gammas="auto")``.

They read the input through an ``InputSummary`` (``randfeat._core.protocols``),
so one rule serves an in-memory array and a Dask array alike.
"""

import numpy as np
import scipy.sparse as sp


def resolve_gamma(gamma, summary):
    """Return the numeric gamma; ``'scale'`` means 1 / (n_features · X.var()), as RBFSampler.

    X.var() is the variance of all entries, computed stably for dense and
    sparse X alike (``entry_variance``); a constant X gives 1.0, as in
    scikit-learn.  A variance too large or too small for 1/(n_features·var)
    to be a positive float64 raises a ValueError naming X's scale.

    Parameters
    ----------
    gamma : float or 'scale'
    summary : InputSummary
        The training input (``randfeat._core.protocols``).

    Returns
    -------
    gamma : float
    """
    if not (isinstance(gamma, str) and gamma == "scale"):
        return float(gamma)
    s, v = summary.entry_variance()
    if v == 0.0:
        return 1.0
    s, v = np.float64(s), np.float64(v)  # IEEE semantics (inf, 0), not Python's ZeroDivisionError
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        var = s * s * v
        resolved = 1.0 / (summary.n_features * v * s * s)
    if not (np.isfinite(var) and np.isfinite(resolved) and resolved >= np.finfo(np.float64).tiny):
        raise ValueError(
            f"gamma='scale' needs 1 / (n_features * X.var()), but X's variance, about "
            f"{v:.3g} * {s:.3g}**2 (entries up to ~{s:.3g} in magnitude), makes it "
            f"{'overflow' if not np.isfinite(resolved) else 'underflow'} float64. Rescale X "
            f"(e.g. sklearn.preprocessing.StandardScaler) or give a numeric gamma."
        )
    return float(resolved)


def resolve_l1_gamma(gamma, summary):
    """Return the numeric gamma of an L1 kernel; ``'scale'`` means 1 / (n_features · mean|X − X.mean()|).

    The L1 counterpart of RBFSampler's ``1 / (n_features · X.var())`` for
    the Laplacian kernel exp(−γ‖x − y‖₁): it makes γ‖x − y‖₁ of order one
    for typical pairs (for i.i.d. Gaussian entries E|x − y| is √2 times the
    mean absolute deviation, so γ·E‖x − y‖₁ = √2), as the RBF rule makes
    γ·E‖x − y‖₂² = 2.  A constant X gives 1.0; a deviation too large or too
    small for a positive float64 gamma raises a ValueError naming X's scale.

    Parameters
    ----------
    gamma : float or 'scale'
    summary : InputSummary
        The training input (``randfeat._core.protocols``).

    Returns
    -------
    gamma : float
    """
    if not (isinstance(gamma, str) and gamma == "scale"):
        return float(gamma)
    s, m = summary.entry_mean_abs_deviation()
    return _reciprocal_scale(summary.n_features, s, m, "mean|X - X.mean()|")


def _reciprocal_scale(n_features, s, m, what):
    """1 / (n_features · s · m) as a positive float64, or a ValueError naming X's scale."""
    if m == 0.0:
        return 1.0
    s, m = np.float64(s), np.float64(m)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        resolved = 1.0 / (n_features * m * s)
    if not (np.isfinite(resolved) and resolved >= np.finfo(np.float64).tiny):
        raise ValueError(
            f"gamma='scale' needs 1 / (n_features * {what}), but X's entries (up to ~{s:.3g} in "
            f"magnitude) make it {'overflow' if not np.isfinite(resolved) else 'underflow'} float64. "
            f"Rescale X (e.g. sklearn.preprocessing.StandardScaler) or give a numeric gamma."
        )
    return float(resolved)


#: The median heuristic reads at most this many rows (drawn with a fixed seed).
AUTO_GAMMA_ROWS = 1000


def median_heuristic_gamma(X, metric):
    """Return 1 / the median pairwise distance between rows of X: ``RidgeCV(gammas="auto")``'s base gamma.

    Taken on at most ``AUTO_GAMMA_ROWS`` rows drawn with a fixed seed (0),
    so the result depends on X only.  Each map's ``_auto_gamma`` picks the
    distance its kernel's gamma scales.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), validated
    metric : {"sqeuclidean", "manhattan"}
        Squared Euclidean distance (Gaussian-like kernels) or L1 distance
        (the Laplacian kernel).

    Returns
    -------
    gamma : float
    """
    from sklearn.metrics import pairwise_distances
    from sklearn.metrics.pairwise import euclidean_distances

    n = X.shape[0]
    rows = np.sort(np.random.default_rng(0).choice(n, size=min(n, AUTO_GAMMA_ROWS), replace=False))
    S = X[rows]
    if metric == "manhattan":
        dist = pairwise_distances(S, metric="manhattan")
    elif sp.issparse(S):
        # SciPy's exact squared distances take dense rows only; the sample may be very wide.
        dist = np.maximum(euclidean_distances(S, squared=True), 0.0)
    else:
        dist = pairwise_distances(S, metric="sqeuclidean")
    med = np.median(dist[np.triu_indices(len(rows), 1)]) if len(rows) > 1 else 0.0
    return 1.0 / med if med > 0 else 1.0
