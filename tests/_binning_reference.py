"""Random binning features in plain, unoptimised NumPy: the tests' reference.

It spells out the definition of ``randfeat/_csrc/randfeat_binning.h`` one
step at a time, for the small inputs of the tests (the whole (N, P, d) bin
array at once; no chunks, no in-place tricks):

* bin of row x in grid p, coordinate m: floor((x_m − u_pm) · (1/δ_pm)), in float64;
* the grid's hash of a row: h = SEED, then for each coordinate in order
  h = (h + bin) · MUL mod 2⁶⁴, h ^= h >> 29, and finally MurmurHash3's fmix64;
* vocabulary: per grid, the sorted distinct hashes of the training rows;
  column = the grid's offset + the rank of the hash in it;
* features: one entry 1/√P per grid whose hash is in its vocabulary.

The benchmark's NumPy baseline (bench/_binning_numpy.py) computes the same
thing as fast as NumPy allows; this file is kept simple so that it can be
checked by eye.
"""

import numpy as np
import scipy.sparse as sp

SEED = np.uint64(0x9E3779B97F4A7C15)
MUL = np.uint64(0xBF58476D1CE4E5B9)
FMIX_MULTIPLIERS = (np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53))


def bins(X, pitches, offsets):
    """(N, P, d) int64 bin indices of every row in every grid."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    X = X.astype(np.float64)
    inv = 1.0 / np.asarray(pitches, dtype=np.float64)
    return np.floor((X[:, None, :] - np.asarray(offsets, dtype=np.float64)[None]) * inv[None]).astype(np.int64)


def hash_bins(X, pitches, offsets):
    """(N, P) uint64 hash of every row's bin tuple in every grid."""
    B = bins(X, pitches, offsets).view(np.uint64)  # two's complement, as the C code adds it
    h = np.full(B.shape[:2], SEED, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for m in range(B.shape[2]):
            h = (h + B[:, :, m]) * MUL
            h = h ^ (h >> np.uint64(29))
        for mult in FMIX_MULTIPLIERS:
            h = h ^ (h >> np.uint64(33))
            h = h * mult
        h = h ^ (h >> np.uint64(33))
    return h


def vocabulary(H):
    """(keys, offsets): grid p's sorted distinct hashes are keys[offsets[p]:offsets[p + 1]]."""
    per_grid = [np.unique(H[:, p]) for p in range(H.shape[1])]
    offsets = np.concatenate([[0], np.cumsum([k.size for k in per_grid])]).astype(np.int64)
    return np.concatenate(per_grid), offsets


def features(H, keys, offsets, dtype):
    """CSR features of rows with hashes H given a vocabulary (absent hashes give no entry)."""
    n, P = H.shape
    rows = []
    for i in range(n):
        cols = []
        for p in range(P):
            grid_keys = keys[offsets[p] : offsets[p + 1]]
            rank = np.searchsorted(grid_keys, H[i, p])
            if rank < grid_keys.size and grid_keys[rank] == H[i, p]:
                cols.append(offsets[p] + rank)
        rows.append(cols)
    indptr = np.concatenate([[0], np.cumsum([len(c) for c in rows])]).astype(np.int32)
    indices = np.array([c for cols in rows for c in cols], dtype=np.int32)
    data = np.full(indices.size, 1.0 / np.sqrt(P), dtype=dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(n, int(offsets[-1])))


def binning_fit_transform(X, pitches, offsets):
    """Vocabulary and training features: returns (Z, keys, offsets)."""
    H = hash_bins(X, pitches, offsets)
    keys, koff = vocabulary(H)
    return features(H, keys, koff, X.dtype), keys, koff


def binning_transform(X, pitches, offsets, keys, koff):
    """Features of new rows against a fitted vocabulary."""
    return features(hash_bins(X, pitches, offsets), keys, koff, X.dtype)
