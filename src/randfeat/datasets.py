"""The data sets of Rahimi & Recht (2007), Table 1: the real Adult set, and look-alikes.

The paper measures random features on Census (regression, 18,000 × 119),
Adult (binary, 32,000 × 123, one-hot) and Forest Cover (classification,
522,000 × 54).  One of them ships with randfeat: :func:`load_adult` returns
the UCI Adult set (CC BY 4.0; Becker & Kohavi, 1996) offline, in LIBSVM's
a9a encoding or as its 14 raw attributes.  The other real files need a
download; the generators below need nothing and give data of the same shape
and the same *character*, so the benchmark harness (``bench/table1.py``)
runs anywhere, offline, in a known time:

================== ============ =========== ======= =========================================
generator          task         full shape  X       what matters about it
================== ============ =========== ======= =========================================
make_census_like   regression   18000 × 119 dense   smooth nonlinear target of a few latent
                                                    factors seen through noisy proportions
make_adult_like    binary (±)   32000 × 123 CSR     14 categorical attributes one-hot encoded
                                                    into 123 binary columns, as LIBSVM's a9a
make_forest_like   7 classes    522000 × 54 dense   10 continuous + 44 binary columns, as
                                                    covtype; labels from axis-aligned regions
make_letter_like   26 classes   20000 × 16  dense   integer glyph statistics with repeated
                                                    rows, as UCI Letter: the hard case for
                                                    CG on binning features (not in Table 1)
================== ============ =========== ======= =========================================

Every generator is deterministic for an integer ``random_state``.  The
random *structure* (loadings, effects, the region tree) is drawn first from
the seed; rows are then drawn in fixed-size blocks, each from its own stream
derived from the seed and the block number.  So ``n_samples`` subsamples the
full data set exactly: ``make_forest_like(1000, random_state=0)`` is the first
1000 rows of ``make_forest_like(random_state=0)``.

These are synthetic data.  Numbers measured on them say how methods compare on
data of this character; they are not the paper's numbers on the real sets
(``bench/table1.py`` runs the real Adult set too; ``--data`` takes the others).
"""

from __future__ import annotations

import numbers as _numbers
from typing import Optional as _Optional

import numpy as _np
import scipy.sparse as _sp

from ._adult import load_adult
from ._core.types import RandomState as _RandomState
from ._core.types import SparseMatrix as _SparseMatrix

__all__ = ["load_adult", "make_census_like", "make_adult_like", "make_forest_like", "make_letter_like"]

_BLOCK = 32768  # rows per independently seeded block (fixed: prefix property)


def _seed_root(random_state):
    """Turn ``random_state`` into a SeedSequence entropy value."""
    if random_state is None:
        return int(_np.random.SeedSequence().entropy)
    if isinstance(random_state, _np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, _np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if isinstance(random_state, _numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}")
        return int(random_state)
    raise TypeError(f"random_state must be None, an int, a RandomState or a Generator, got {random_state!r}")


def _check_n_samples(n_samples, full):
    if n_samples is None:
        return full
    if isinstance(n_samples, bool) or not isinstance(n_samples, _numbers.Integral):
        raise TypeError(f"n_samples must be an int or None, got {n_samples!r}")
    if not 1 <= n_samples <= full:
        raise ValueError(f"n_samples must be in [1, {full}], got {n_samples}")
    return int(n_samples)


def _structure_rng(root, tag):
    return _np.random.default_rng([root, tag, 0xC0FFEE])


def _blocks(root, tag, n_samples, draw):
    """Call ``draw(rng, n)`` block by block; concatenate the row blocks."""
    parts = []
    for k, start in enumerate(range(0, n_samples, _BLOCK)):
        n = min(_BLOCK, n_samples - start)
        # Always draw a whole block, then cut: row i does not depend on n_samples.
        block = draw(_np.random.default_rng([root, tag, k + 1]), _BLOCK)
        parts.append(tuple(part[:n] for part in block))
    return parts


def _sigmoid(t):
    return 1.0 / (1.0 + _np.exp(-t))


# --------------------------------------------------------------------- census
def make_census_like(n_samples: _Optional[int] = None, *,
                     random_state: _RandomState = 0) -> tuple[_np.ndarray, _np.ndarray]:
    """Census-like regression data: 18,000 rows × 119 dense features.

    The paper's Census set (Delve census-house) describes small areas by
    proportions of their population (age bands, household types, tenure...)
    and asks for a housing-price figure.  Here six latent area factors
    ``u ~ N(0, I)`` generate 100 proportion features ``sigmoid(a_j·u + b_j +
    noise)`` in (0, 1) and 19 scaled log-count features; the target is a
    smooth nonlinear function of the factors (tanh, sine, a product and a
    square) plus Gaussian noise.  Why: a kernel machine must undo the noisy,
    redundant view of the factors and fit a smooth nonlinearity, so an RBF
    kernel model clearly beats a linear one while every method sees the same
    irreducible noise, as on the real set.

    Parameters
    ----------
    n_samples : int or None, default=None
        Number of rows, at most 18,000 (None: all 18,000).  Smaller values
        give the first ``n_samples`` rows of the full set.
    random_state : int, RandomState, Generator or None, default=0
        Seed; the same integer always gives the same data.

    Returns
    -------
    X : ndarray of shape (n_samples, 119), float64
        Features, all in [0, 1].
    y : ndarray of shape (n_samples,), float64
        Target (positive, price-like, in units of 100k).
    """
    n = _check_n_samples(n_samples, 18000)
    root = _seed_root(random_state)
    srng = _structure_rng(root, 1)
    k, n_prop, n_count = 6, 100, 19
    A = srng.normal(0.0, 1.0, size=(k, n_prop)) * (srng.random((k, n_prop)) < 0.5)
    b = srng.normal(0.0, 1.0, size=n_prop)
    C = srng.normal(0.0, 0.4, size=(k, n_count))
    c0 = srng.uniform(3.0, 7.0, size=n_count)

    def draw(rng, m):
        u = rng.standard_normal((m, k))
        props = _sigmoid(u @ A + b + 0.15 * rng.standard_normal((m, n_prop)))
        counts = rng.poisson(_np.exp(_np.minimum(u @ C + c0, 9.0)))
        logc = _np.log1p(counts) / 10.0  # fixed scale keeps values in [0, 1]
        f = (1.5 * _np.tanh(u[:, 0]) + _np.sin(1.5 * u[:, 1]) + 0.6 * u[:, 0] * u[:, 2]
             - 0.4 * u[:, 3] ** 2 + 0.5 * _np.abs(u[:, 4]))
        y = 2.0 * _np.exp(0.35 * f) + 0.25 * rng.standard_normal(m)
        return _np.hstack([props, logc]), y

    parts = _blocks(root, 1, n, draw)
    X = _np.vstack([p[0] for p in parts])
    y = _np.concatenate([p[1] for p in parts])
    return X, y


# ---------------------------------------------------------------------- adult
# a9a's 14 attributes and how many one-hot columns each takes (sum 123):
# age, workclass, fnlwgt, education, education-num, marital-status,
# occupation, relationship, race, sex, capital-gain, capital-loss,
# hours-per-week, native-country.
_ADULT_CARDINALITIES = (5, 8, 5, 16, 5, 7, 14, 6, 5, 2, 2, 2, 5, 41)
_ADULT_MISSABLE = (1, 6, 13)  # workclass, occupation, country have "?" in adult


def make_adult_like(n_samples: _Optional[int] = None, *,
                     random_state: _RandomState = 0) -> tuple[_SparseMatrix, _np.ndarray]:
    """Adult-like binary classification: 32,000 rows × 123 sparse binary columns.

    Like LIBSVM's a9a: each row has 14 categorical attributes (age band,
    workclass, education, marital status, occupation, ..., native country),
    one-hot encoded into 123 columns, so X is a CSR matrix of 0/1 with at most
    14 non-zeros per row (fewer where workclass, occupation or country is
    "missing", as in the census source).  Three latent person factors drive
    the attributes through a per-attribute softmax, so the attributes are
    correlated; the label ("income > 50k") is Bernoulli with a logit that is
    a sum of per-category effects plus pairwise interactions of a few
    attributes (marital × sex, education × age, occupation × hours), with the
    intercept calibrated so that about 24% of labels are positive.  Why: the
    real task is mostly additive in one-hot columns with some interactions
    and substantial label noise, so linear models do nearly as well as kernel
    machines (the paper's methods all sit near 15% error).

    Parameters
    ----------
    n_samples : int or None, default=None
        Number of rows, at most 32,000 (None: all); the first rows of the full set.
    random_state : int, RandomState, Generator or None, default=0
        Seed; the same integer always gives the same data.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, 123), float64
        One-hot features (values 0 or 1), sorted indices.
    y : ndarray of shape (n_samples,), int64
        Labels in {-1, +1}, as in a9a.
    """
    n = _check_n_samples(n_samples, 32000)
    root = _seed_root(random_state)
    srng = _structure_rng(root, 2)
    card = _np.array(_ADULT_CARDINALITIES)
    offsets = _np.concatenate([[0], _np.cumsum(card)[:-1]])
    k = 3
    loadings = [srng.normal(0.0, 1.2, size=(k, c)) for c in card]
    # Skewed base rates: country and race dominated by one value, as in adult.
    base = [srng.normal(0.0, 1.0, size=c) for c in card]
    base[13][0] += 5.0
    base[8][0] += 2.5
    effects = [srng.normal(0.0, 0.7, size=c) for c in card]
    pairs = [(5, 9), (3, 0), (6, 12)]
    inter = [srng.normal(0.0, 0.9, size=(card[a], card[b])) for a, b in pairs]

    def attributes(rng, m):
        u = rng.standard_normal((m, k))
        cats = _np.empty((m, len(card)), dtype=_np.int64)
        for j, c in enumerate(card):
            logits = u @ loadings[j] + base[j] + rng.gumbel(size=(m, c))
            cats[:, j] = _np.argmax(logits, axis=1)
        return cats

    def logit(cats):
        t = _np.zeros(cats.shape[0])
        for j in range(len(card)):
            t += effects[j][cats[:, j]]
        for (a, b), M in zip(pairs, inter):
            t += M[cats[:, a], cats[:, b]]
        return t

    # Intercept: bisection so that the mean probability is 0.24 on a fixed
    # calibration draw (structure stream), keeping rows prefix-deterministic.
    t_cal = 1.6 * logit(attributes(srng, 20000))
    lo, hi = -20.0, 20.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if _sigmoid(t_cal + mid).mean() > 0.24 else (mid, hi)
    intercept = 0.5 * (lo + hi)

    def draw(rng, m):
        cats = attributes(rng, m)
        p = _sigmoid(1.6 * logit(cats) + intercept)
        y = _np.where(rng.random(m) < p, 1, -1).astype(_np.int64)
        cols = cats + offsets
        keep = _np.ones_like(cols, dtype=bool)
        for j in _ADULT_MISSABLE:
            keep[:, j] = rng.random(m) >= 0.04
        return cols, keep, y

    parts = _blocks(root, 2, n, draw)
    cols = _np.vstack([p[0] for p in parts])
    keep = _np.vstack([p[1] for p in parts])
    y = _np.concatenate([p[2] for p in parts])
    indptr = _np.concatenate([[0], _np.cumsum(keep.sum(axis=1))])
    indices = cols[keep]  # row-major, and offsets increase along a row: sorted
    X = _sp.csr_matrix((_np.ones(indices.size), indices, indptr), shape=(n, int(card.sum())))
    X.has_sorted_indices = True
    return X, y


# --------------------------------------------------------------------- forest
_N_FOREST_CONTINUOUS = 10
_N_FOREST_WILDERNESS = 4
_N_FOREST_SOIL = 40
_FOREST_PRIOR = _np.array([0.365, 0.488, 0.062, 0.005, 0.016, 0.030, 0.035])  # covtype's class shares


def _grow_region_tree(rng, depth, split_dims, dim_weights):
    """Random axis-aligned tree, heap-ordered: node i has children 2i+1, 2i+2.

    Returns (feature, threshold, elevation_centre) arrays over the
    2**depth - 1 inner nodes; leaves are numbered 0 .. 2**depth - 1 after them.
    """
    n_inner = 2**depth - 1
    feat = _np.empty(n_inner, dtype=_np.int64)
    thr = _np.empty(n_inner)
    boxes = [{j: (0.0, 1.0) for j in split_dims}]
    for i in range(n_inner):
        box = boxes[i]
        j = int(rng.choice(split_dims, p=dim_weights))
        lo, hi = box[j]
        t = lo + (hi - lo) * rng.uniform(0.3, 0.7)
        feat[i], thr[i] = j, t
        lbox, rbox = dict(box), dict(box)
        lbox[j], rbox[j] = (lo, t), (t, hi)
        boxes += [lbox, rbox]
    elev = _np.array([0.5 * sum(b[split_dims[0]]) for b in boxes])
    return feat, thr, elev


def _tree_paths(X, feat, thr, depth):
    """Heap index of the node each row reaches at every level 0..depth."""
    path = _np.zeros((X.shape[0], depth + 1), dtype=_np.int64)
    node = _np.zeros(X.shape[0], dtype=_np.int64)
    rows = _np.arange(X.shape[0])
    for level in range(depth):
        right = X[rows, feat[node]] > thr[node]
        node = 2 * node + 1 + right
        path[:, level + 1] = node
    return path


def make_forest_like(n_samples: _Optional[int] = None, *, random_state: _RandomState = 0, label_noise: float = 0.02,
                     tree_depth: int = 7) -> tuple[_np.ndarray, _np.ndarray]:
    """Forest-Cover-like 7-class data: 522,000 rows × 54 features.

    Columns as in covtype (LIBSVM's scaled copy): 10 continuous features in
    [0, 1] (elevation, aspect, slope, distances to water, road and fire
    points, three hill-shade indices; the hill shades depend on aspect and
    slope as on real terrain), then 4 one-hot wilderness-area columns and 40
    one-hot soil-type columns.  The label comes from a random axis-aligned
    tree of depth ``tree_depth`` (128 leaf boxes by default) that splits
    elevation most often, and the horizontal distances to water, road and
    fire points otherwise.  Classes are assigned down the tree: the root
    takes a class, and each child keeps its parent's class with probability
    0.7 or else draws a class from (flattened) covtype class shares tilted by the
    child's elevation band, so there are large regions with finer exceptions
    inside them.  Wilderness area follows the depth-2 region (90% of rows)
    and soil type the depth-5 region (80%), so the binary columns carry
    coarse location as in covtype.  A ``label_noise`` fraction of labels is
    then replaced by a uniformly drawn class (error floor about
    ``label_noise * 6/7``).

    Why this shape: the decision boundary is a fine patchwork of
    axis-aligned boxes, non-smooth and memorised by region, which is what
    made the paper's Laplacian random binning (2.2% error) beat Gaussian
    Fourier features (11.6%) on Forest Cover: binning features are indicator
    functions of axis-aligned cells, while Fourier features of a smooth kernel
    blur sharp boundaries unless D is very large.

    Parameters
    ----------
    n_samples : int or None, default=None
        Number of rows, at most 522,000 (None: all); the first rows of the full set.
    random_state : int, RandomState, Generator or None, default=0
        Seed; the same integer always gives the same data.
    label_noise : float in [0, 1), default=0.02
        Fraction of labels replaced by a uniformly random class.
    tree_depth : int, default=7
        Depth of the region tree (2**depth leaf boxes); deeper is harder.
        At depth 7 and 40,000 rows a Laplacian binning model already beats
        Gaussian Fourier features (about 10% against 13% error).

    Returns
    -------
    X : ndarray of shape (n_samples, 54), float64
        Continuous features in [0, 1], then 44 binary columns.
    y : ndarray of shape (n_samples,), int64
        Class labels 1..7, as in covtype.
    """
    n = _check_n_samples(n_samples, 522000)
    if not 0.0 <= label_noise < 1.0:
        raise ValueError(f"label_noise must be in [0, 1), got {label_noise}")
    if isinstance(tree_depth, bool) or not isinstance(tree_depth, _numbers.Integral) or not 1 <= tree_depth <= 16:
        raise ValueError(f"tree_depth must be an int in [1, 16], got {tree_depth!r}")
    root = _seed_root(random_state)
    srng = _structure_rng(root, 3)
    depth = int(tree_depth)
    # Splits: elevation (0) most, then horizontal distances to water (3), road (5), fire (9).
    split_dims = _np.array([0, 3, 5, 9])
    feat, thr, elev = _grow_region_tree(srng, depth, split_dims, _np.array([0.4, 0.2, 0.2, 0.2]))
    # Classes down the tree: a child keeps its parent's class with
    # probability 0.7, else draws one from covtype's shares tilted by the
    # child's elevation band.  Coarse regions, finer exceptions inside them.
    n_nodes = 2 ** (depth + 1) - 1
    band_pref = srng.normal(0.0, 1.0, size=(8, 7))
    band = _np.minimum((elev * 8).astype(_np.int64), 7)
    fresh = _np.argmax(0.5 * _np.log(_FOREST_PRIOR) + 1.5 * band_pref[band] + srng.gumbel(size=(n_nodes, 7)), axis=1) + 1
    keep = srng.random(n_nodes) < 0.7
    keep[:7] = False  # the top three levels always draw: no single class dominates
    node_class = fresh.copy()
    for i in range(1, n_nodes):
        if keep[i]:
            node_class[i] = node_class[(i - 1) // 2]
    # Wilderness area follows the depth-2 region and soil type the depth-5
    # region (mostly), so the binary columns carry coarse location, as in covtype.
    wild_of = srng.integers(0, _N_FOREST_WILDERNESS, size=n_nodes)
    soil_of = srng.integers(0, _N_FOREST_SOIL, size=n_nodes)
    d_wild, d_soil = min(2, depth), min(5, depth)

    def draw(rng, m):
        Xc = _np.empty((m, _N_FOREST_CONTINUOUS))
        Xc[:, 0] = _np.where(rng.random(m) < 0.6, rng.beta(5, 3, m), rng.beta(2, 4, m))  # elevation
        Xc[:, 1] = rng.random(m)  # aspect / 360
        Xc[:, 2] = rng.beta(2.0, 5.0, m)  # slope
        Xc[:, 3] = rng.beta(1.3, 4.0, m)  # horizontal distance to hydrology
        Xc[:, 4] = _np.clip(0.25 + 0.5 * Xc[:, 3] * rng.random(m) + 0.05 * rng.standard_normal(m), 0, 1)
        Xc[:, 5] = rng.beta(1.5, 3.0, m)  # horizontal distance to roadways
        a, s = 2 * _np.pi * Xc[:, 1], Xc[:, 2]
        for col, phase in ((6, 0.8), (7, 0.0), (8, -0.8)):  # hill shade 9am, noon, 3pm
            Xc[:, col] = _np.clip(0.7 + 0.3 * s * _np.cos(a - phase) + 0.04 * rng.standard_normal(m), 0, 1)
        Xc[:, 9] = rng.beta(1.5, 3.5, m)  # horizontal distance to fire points
        path = _tree_paths(Xc, feat, thr, depth)
        wild = _np.where(rng.random(m) < 0.9, wild_of[path[:, d_wild]], rng.integers(0, _N_FOREST_WILDERNESS, m))
        soil = _np.where(rng.random(m) < 0.8, soil_of[path[:, d_soil]], rng.integers(0, _N_FOREST_SOIL, m))
        B = _np.zeros((m, _N_FOREST_WILDERNESS + _N_FOREST_SOIL))
        B[_np.arange(m), wild] = 1.0
        B[_np.arange(m), _N_FOREST_WILDERNESS + soil] = 1.0
        y = node_class[path[:, depth]]
        flip = rng.random(m) < label_noise
        y = _np.where(flip, rng.integers(1, 8, m), y)
        return _np.hstack([Xc, B]), y

    parts = _blocks(root, 3, n, draw)
    X = _np.vstack([p[0] for p in parts])
    y = _np.concatenate([p[1] for p in parts]).astype(_np.int64)
    return X, y


# --------------------------------------------------------------------- letter
#: make_letter_like's shape: rows, features, classes, fonts per class, variants per font.
_LETTER_ROWS, _LETTER_FEATURES, _LETTER_CLASSES, _LETTER_FONTS, _LETTER_VARIANTS = 20000, 16, 26, 20, 5


def make_letter_like(n_samples: _Optional[int] = None, *,
                     random_state: _RandomState = 0) -> tuple[_np.ndarray, _np.ndarray]:
    """Letter-recognition-like 26-class data: 20,000 rows × 16 integer features in [0, 15].

    The shape of UCI Letter (Slate 1991): 26 capital letters drawn in 20
    fonts, each glyph summarised by 16 integer statistics.  Here every
    (letter, font) has a prototype (half the letter's, half the font's own),
    each prototype 5 distorted variants (Gaussian, scale 1.5), and each row
    is a variant plus small noise (scale 0.3), spread around 7.5 with the
    features' scales falling from 1 to 0.15 (a few wide features, many
    narrow ones), rounded and clipped to 0..15.  So many rows repeat
    exactly (16,570 distinct rows of 20,000), as glyph statistics do.

    Why this shape: it is the hard case for CG on random binning features
    (``bench/ridge.py``, "hard cases").  Laplacian binning with P = 50
    grids at 4 × the median-heuristic gamma gives 39,125 columns for 20,000
    rows (36,918 on the real set), and the repeated and crowded rows make
    ZᵀZ ill-conditioned, so the iterations of one-vs-rest least squares grow
    fast as alpha falls: one CG per class with a Jacobi preconditioner (the
    solver before block CG), tol 1e-6, takes 78 / 623 / 3144 iterations at
    alpha = 1 / 1e-2 / 1e-4, against 106 / 678 / 4339 measured on the real
    UCI Letter set with the same recipe.  At 16 × the median gamma (503,492
    columns; 484,497 on the real set) 23 / 306 / 341 against 35 / 543 /
    983: within 2× of the real set except at alpha = 1e-4 and 16 × gamma,
    where the real set keeps getting harder (its spectrum reaches lower)
    and this one does not.

    Parameters
    ----------
    n_samples : int or None, default=None
        Number of rows, at most 20,000 (None: all); the first rows of the full set.
    random_state : int, RandomState, Generator or None, default=0
        Seed; the same integer always gives the same data.

    Returns
    -------
    X : ndarray of shape (n_samples, 16), float64
        Integer values 0..15.
    y : ndarray of shape (n_samples,), int64
        Class labels 0..25.
    """
    n = _check_n_samples(n_samples, _LETTER_ROWS)
    root = _seed_root(random_state)
    srng = _structure_rng(root, 4)
    C, F, V, d = _LETTER_CLASSES, _LETTER_FONTS, _LETTER_VARIANTS, _LETTER_FEATURES
    prototypes = 0.5 * srng.uniform(1.0, 14.0, size=(C, F, d)) + 0.5 * srng.uniform(2.0, 13.0, size=(C, 1, d))
    variants = prototypes[:, :, None, :] + 1.5 * srng.standard_normal((C, F, V, d))
    spread = _np.geomspace(1.0, 0.15, d)

    def draw(rng, m):
        y = rng.integers(0, C, m)
        X = variants[y, rng.integers(0, F, m), rng.integers(0, V, m)] + 0.3 * rng.standard_normal((m, d))
        return _np.clip(_np.rint(7.5 + (X - 7.5) * spread), 0.0, 15.0) + 0.0, y  # + 0.0: no -0.0

    parts = _blocks(root, 4, n, draw)
    X = _np.vstack([p[0] for p in parts])
    y = _np.concatenate([p[1] for p in parts]).astype(_np.int64)
    return X, y
