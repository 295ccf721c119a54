"""The Gram matrix ZᵀZ of a block of rows, by fixed column tiles: the same bits for any thread count."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

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


def _tiled_gram_add(Zs, S, n_threads):
    """Add the lower triangle of Zsᵀ Zs into ``S`` (D × D float64) by fixed column tiles.

    Tiles on or below the diagonal, ``gram_tile(D)`` columns wide, each a
    single-threaded BLAS product in Zs's dtype (NumPy takes syrk for the
    diagonal tiles) into a per-thread buffer, then added into S in float64;
    S's strictly upper triangle is left as it is.
    """
    D = Zs.shape[1]
    width = gram_tile(D)
    edges = list(range(0, D, width)) + [D]
    tiles = [(i, j) for i in range(len(edges) - 1) for j in range(i + 1)]
    local = threading.local()

    def product(tile):
        i, j = tile
        rows, cols = slice(edges[i], edges[i + 1]), slice(edges[j], edges[j + 1])
        buf = vars(local).get("buf")  # this thread's buffer, once it has one
        if buf is None:
            buf = local.buf = np.empty((width, width), dtype=Zs.dtype, order="F")
        block = buf[: edges[i + 1] - edges[i], : edges[j + 1] - edges[j]]
        np.matmul(Zs[:, rows].T, Zs[:, cols], out=block)
        # Each tile of S is written by one thread: no two threads add to the same entries.
        S[rows, cols] += np.tril(block) if i == j else block

    with single_threaded_blas():
        workers = min(max(1, n_threads), len(tiles))
        if workers == 1:
            for tile in tiles:
                product(tile)
        else:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(product, tiles))
    return S
