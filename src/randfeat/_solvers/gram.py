"""The Gram matrix ZᵀZ of a block of rows, by fixed column tiles: the same bits for any thread count.

Also the weighted Gram Z̃ᵀ diag(v²) Z̃ of the logistic Hessians, by fixed row
chunks of those tiles (``weighted_gram_add``).
"""

import collections
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from .._core.threads import single_threaded_blas

#: Column tiles of the Gram.  Threaded OpenBLAS syrk/gemm give results that
#: depend on their thread count (float32 up to 8e-8 relative; float64 ~1e-16
#: with the SkylakeX kernels, for some widths), so a block's Gram is computed
#: as fixed tiles, each by single-threaded BLAS, the tiles spread over up to
#: n_threads Python threads: the same bits for any n_jobs.  The tile width
#: depends on D alone (never on the thread count): about D/8, between
#: ``GRAM_TILE_MIN`` and ``GRAM_TILE_MAX`` columns.  Cost against threaded
#: dsyrk, 2 threads: +0–6% for D <= 2000, +6–9% at D = 5000–10000
#: (DESIGN.md, "Deterministic Gram").
GRAM_TILE_MIN = 512
GRAM_TILE_MAX = 1024


def gram_tile(D):
    """Column width of the Gram's tiles for D features (a function of D only)."""
    eighth = -(-D // 8)
    return int(min(GRAM_TILE_MAX, max(GRAM_TILE_MIN, -(-eighth // 128) * 128)))


def gram_tiles(D):
    """The Gram's tiles on or below the diagonal for D features: (rows, cols) slice pairs, ``gram_tile(D)`` wide."""
    width = gram_tile(D)
    edges = list(range(0, D, width)) + [D]
    return [(slice(edges[i], edges[i + 1]), slice(edges[j], edges[j + 1]))
            for i in range(len(edges) - 1) for j in range(i + 1)]


def tile_product(Zs, rows, cols, buf):
    """The Gram tile Zs[:, rows]ᵀ Zs[:, cols] in Zs's dtype, lower triangle only on the diagonal (rows == cols).

    Made in ``buf`` (F-ordered, at least the tile's size) by one single-threaded
    BLAS call; a diagonal tile's triangle is a new array, any other tile a view of ``buf``.
    """
    block = buf[: rows.stop - rows.start, : cols.stop - cols.start]
    np.matmul(Zs[:, rows].T, Zs[:, cols], out=block)
    return np.tril(block) if rows == cols else block


def _tiled_gram_add(Zs, S, n_threads):
    """Add the lower triangle of Zsᵀ Zs into ``S`` (D × D float64) by fixed column tiles.

    Tiles on or below the diagonal, ``gram_tile(D)`` columns wide, each a
    single-threaded BLAS product in Zs's dtype (NumPy takes syrk for the
    diagonal tiles) into a per-thread buffer, then added into S in float64;
    S's strictly upper triangle is left as it is.
    """
    D = Zs.shape[1]
    width = gram_tile(D)
    tiles = gram_tiles(D)
    local = threading.local()

    def product(tile):
        rows, cols = tile
        buf = vars(local).get("buf")  # this thread's buffer, once it has one
        if buf is None:
            buf = local.buf = np.empty((width, width), dtype=Zs.dtype, order="F")
        # Each tile of S is written by one thread: no two threads add to the same entries.
        S[rows, cols] += tile_product(Zs, rows, cols, buf)

    with single_threaded_blas():
        workers = min(max(1, n_threads), len(tiles))
        if workers == 1:
            for tile in tiles:
                product(tile)
        else:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(product, tiles))
    return S


#: Bytes of the chunk Grams a narrow Hessian (one Gram tile) holds at once when its row chunks run in parallel.
PARTIAL_GRAMS_BYTES = 16 * 2**20

#: Row chunks a weighted Gram is cut into at least (``weighted_gram_add``): a multiple of 2 and 4 threads,
#: so that a sampled Hessian's few chunks share out evenly (DESIGN.md, "The binary logistic pass").
GRAM_CHUNKS = 4


def gram_add(Zs, H, n_threads):
    """Add the lower triangle of Zsᵀ Zs into H (a float64 view)."""
    if sp.issparse(Zs):
        H += np.tril((Zs.T @ Zs).toarray())
    else:
        _tiled_gram_add(np.ascontiguousarray(Zs), H, n_threads)


def scaled_rows(Zt, v, dtype=np.float64):
    """diag(v) Z̃ (a new matrix; dense: of ``dtype``)."""
    if sp.issparse(Zt):
        return sp.diags(v) @ Zt
    return np.multiply(Zt, v[:, None], out=np.empty(Zt.shape, dtype=dtype), casting="same_kind")


def weighted_gram_add(Zt, v, H, n_threads, dtype, chunk_bytes):
    """Add the lower triangle of Z̃ᵀ diag(v²) Z̃ into H, the weighted rows (of ``dtype``) made ``chunk_bytes`` at a time."""
    if sp.issparse(Zt):
        gram_add(scaled_rows(Zt, v), H, n_threads)
        return
    D, n = Zt.shape[1], Zt.shape[0]
    # At least GRAM_CHUNKS chunks (of 64 rows or more): run in parallel below, 3 chunks left a thread of 2
    # idle a third of the time.  A function of the shape only (the bits must not depend on the threads).
    step = max(64, min(chunk_bytes // (8 * D), -(-n // GRAM_CHUNKS)))
    starts = list(range(0, n, step))
    tiles = gram_tiles(D)
    at_once = min(n_threads, len(starts), max(1, PARTIAL_GRAMS_BYTES // (8 * D * D)))
    if len(tiles) >= n_threads or at_once < 2:
        for s in starts:
            gram_add(scaled_rows(Zt[s:s + step], v[s:s + step], dtype), H, n_threads)
        return

    # Fewer Gram tiles than threads (D <= 512: one tile): the chunks' Grams are made at once instead, each
    # by one thread, and their tiles added to H in chunk order by this one -- the loop's bits exactly.
    width = gram_tile(D)

    def chunk_gram(s):
        Zs = scaled_rows(Zt[s:s + step], v[s:s + step], dtype)
        return [(rows, cols, tile_product(Zs, rows, cols, np.empty((width, width), dtype=Zs.dtype, order="F")))
                for rows, cols in tiles]

    with single_threaded_blas(), ThreadPoolExecutor(at_once) as pool:
        pending = collections.deque()  # at most at_once + 1 chunks' tiles held
        for s in starts:
            pending.append(pool.submit(chunk_gram, s))
            if len(pending) > at_once:
                for rows, cols, block in pending.popleft().result():
                    H[rows, cols] += block
        while pending:
            for rows, cols, block in pending.popleft().result():
                H[rows, cols] += block
