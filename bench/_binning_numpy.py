"""Random binning features in plain NumPy, as fast as it goes: bench/binning.py's baseline.

It computes exactly the definition of ``randfeat/_csrc/randfeat_binning.h``,
bit for bit (bench/binning.py checks that randfeat agrees with it on every
run), as fast as plain NumPy allows: rows in chunks, the floor of one
dimension for all grids of a chunk at once (a chunk x P slab, never
N x d x P), the running 64-bit hash updated in place, then per grid
``np.unique`` (sorted distinct hashes = the vocabulary, column = rank) and
``np.searchsorted`` for the lookup.  For the training rows themselves
(``fit_transform``) there is a second way, ``np.unique(...,
return_inverse=True)``, whose inverse *is* the column: one argsort per grid
instead of a sort and N binary searches.  Which is faster depends on the
data (the binary searches are cheap in a small vocabulary and a cache miss
each in a large one: 350 vs 40 ms a grid at N = 522000 distinct bins), so
bench/binning.py times both and compares randfeat with the faster.

Parameters are passed explicitly (``pitches``, ``offsets`` of shape
(P, d)) so the caller can take them from a fitted ``RandomBinningFeatures``.

Not the tests' reference: tests/_binning_reference.py states the same
definition step by step, unoptimised, so it can be checked by eye; this file
is what a user would write to make NumPy do the job quickly.
"""

import numpy as np
import scipy.sparse as sp

SEED = np.uint64(0x9E3779B97F4A7C15)
MUL = np.uint64(0xBF58476D1CE4E5B9)
SHIFT = np.uint64(29)
FMIX_M1 = np.uint64(0xFF51AFD7ED558CCD)
FMIX_M2 = np.uint64(0xC4CEB9FE1A85EC53)
S33 = np.uint64(33)
CHUNK_ROWS = 512  # measured fastest of 128..8192: the (chunk, P) temporaries stay in L2


def _fmix64(h):
    h ^= h >> S33
    h *= FMIX_M1
    h ^= h >> S33
    h *= FMIX_M2
    h ^= h >> S33
    return h


def _rows(X, start, stop):
    block = X[start:stop]
    if sp.issparse(block):
        block = block.toarray()  # one chunk at a time, never the whole matrix
    return np.asarray(block, dtype=np.float64)


def hash_bins(X, pitches, offsets, chunk_rows=CHUNK_ROWS):
    """Return the (N, P) uint64 hash of every row's bin tuple in every grid.

    ``X`` is dense or CSR (N, d); ``pitches``/``offsets`` are (P, d).
    """
    U = np.ascontiguousarray(np.asarray(offsets, dtype=np.float64).T)  # (d, P)
    INV = np.ascontiguousarray(1.0 / np.asarray(pitches, dtype=np.float64).T)
    n, d = X.shape
    P = U.shape[1]
    out = np.empty((n, P), dtype=np.uint64)
    t = np.empty((min(chunk_rows, n), P))
    b = np.empty((min(chunk_rows, n), P), dtype=np.int64)
    with np.errstate(over="ignore"):
        for start in range(0, n, chunk_rows):
            stop = min(start + chunk_rows, n)
            xs = _rows(X, start, stop)
            k = stop - start
            h = out[start:stop]
            h[...] = SEED
            tk, bk = t[:k], b[:k]
            for m in range(d):
                np.subtract(xs[:, m, None], U[m], out=tk)  # float64 x - u
                np.multiply(tk, INV[m], out=tk)  # then * (1/delta)
                np.floor(tk, out=tk)
                bk[...] = tk  # exact: |bin| <= 2**62
                h += bk.view(np.uint64)
                h *= MUL
                h ^= h >> SHIFT
            _fmix64(h)
    return out


def fit_vocabulary(H):
    """Per-grid sorted distinct hashes: (keys, offsets) with grid p's in keys[offsets[p]:offsets[p+1]]."""
    per_grid = [np.unique(H[:, p]) for p in range(H.shape[1])]
    offsets = np.zeros(len(per_grid) + 1, dtype=np.int64)
    np.cumsum([len(k) for k in per_grid], out=offsets[1:])
    return np.concatenate(per_grid), offsets


def features_from_hashes(H, keys, offsets, dtype=np.float64):
    """CSR features of rows with hashes H (N, P) given a fitted vocabulary.

    A hash absent from its grid's keys contributes no entry.
    """
    n, P = H.shape
    cols = np.empty((n, P), dtype=np.int64)
    found = np.empty((n, P), dtype=bool)
    for p in range(P):
        kp = keys[offsets[p] : offsets[p + 1]]
        pos = np.searchsorted(kp, H[:, p])
        np.minimum(pos, len(kp) - 1, out=pos)
        found[:, p] = kp[pos] == H[:, p]
        cols[:, p] = pos + offsets[p]
    index_dtype = np.int32 if max(n * P, offsets[-1]) < 2**31 else np.int64
    indptr = np.zeros(n + 1, dtype=index_dtype)
    np.cumsum(found.sum(axis=1), out=indptr[1:])
    indices = cols[found].astype(index_dtype)  # boolean mask is row-major: sorted columns
    data = np.full(indices.shape[0], 1.0 / np.sqrt(P), dtype=dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(n, int(offsets[-1])))


def training_features(H, dtype=np.float64, method="searchsorted"):
    """Vocabulary and features of the training rows from their hashes H (N, P): (Z, keys, offsets).

    ``method``: 'searchsorted' (``fit_vocabulary`` then ``features_from_hashes``)
    or 'inverse' (per grid ``np.unique(return_inverse=True)``: its inverse is the column).
    """
    if method == "searchsorted":
        keys, koff = fit_vocabulary(H)
        return features_from_hashes(H, keys, koff, dtype=dtype), keys, koff
    if method != "inverse":
        raise ValueError(f"unknown method {method!r}")
    n, P = H.shape
    index_dtype = np.int32 if n * P < 2**31 else np.int64
    indices = np.empty((n, P), dtype=index_dtype)
    per_grid = []
    start = 0
    for p in range(P):
        k, inv = np.unique(H[:, p], return_inverse=True)
        indices[:, p] = inv + start
        start += len(k)
        per_grid.append(k)
    offsets = np.zeros(P + 1, dtype=np.int64)
    np.cumsum([len(k) for k in per_grid], out=offsets[1:])
    if start >= 2**31 and index_dtype == np.int32:  # pragma: no cover - columns only fit int64
        indices = indices.astype(np.int64)
    indptr = np.arange(0, n * P + 1, P, dtype=indices.dtype)
    data = np.full(n * P, 1.0 / np.sqrt(P), dtype=dtype)
    Z = sp.csr_matrix((data, indices.ravel(), indptr), shape=(n, start))
    return Z, np.concatenate(per_grid), offsets


def binning_fit_transform(X, pitches, offsets, method="searchsorted"):
    """Vocabulary and training features: returns (Z, keys, offsets)."""
    return training_features(hash_bins(X, pitches, offsets), X.dtype, method)


def binning_transform(X, pitches, offsets, keys, koff):
    """Features of new rows against a fitted vocabulary."""
    return features_from_hashes(hash_bins(X, pitches, offsets), keys, koff, dtype=X.dtype)
