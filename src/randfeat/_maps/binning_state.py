"""The fitted state of ``RandomBinningFeatures`` and the checks that make it safe for the compiled lookups."""

import dataclasses

import numpy as np

from .._ext import _binning_fast
from .contract import MapState

#: The binning kernel's vector width in grids: the grids' arrays are padded to whole lanes.
LANES = _binning_fast.LANES


@dataclasses.dataclass(frozen=True, eq=False)
class BinningState(MapState):
    """The fitted grids and vocabulary of a ``RandomBinningFeatures``.

    Attributes
    ----------
    n_features_out : int
        Occupied bins, the output width.
    pitches, offsets : ndarray of shape (n_grids, n_features_in), float64
    U, INV : ndarray of shape (n_features_in, P padded to whole vector lanes), float64
        The kernel's layout of the offsets and inverse pitches (padding 0).
    n_grids : int
    gamma : float
    value : float
        The entries' value, 1/√n_grids.
    vocabulary : tuple of 5 ndarrays, or None
        (bin_hashes, grid_offsets, dir, dir_offsets, dir_bits): each grid's
        sorted bin hashes and the lookup directory on their top bits
        (``_binning_fast.Vocabulary``); None while the grids are drawn but
        no row has been read.
    """

    pitches: np.ndarray
    offsets: np.ndarray
    U: np.ndarray
    INV: np.ndarray
    n_grids: int
    gamma: float
    value: float
    vocabulary: tuple | None = None

    def check(self):
        """Raise ValueError unless the grids and the vocabulary are what the kernels can read safely.

        Shapes and dtypes of every array; the vocabulary's offsets increasing
        from 0 to ``n_features_out``; each grid's lookup directory as long as
        its ``dir_bits`` say, increasing from 0 to the grid's number of bins
        (so a lookup reads only that grid's keys); each grid's keys sorted.
        O(number of bins), no pass over data.
        """
        super().check()
        P = self.n_grids
        d = self.pitches.shape[1] if self.pitches.ndim == 2 else -1
        if self.pitches.shape != (P, d) or self.offsets.shape != (P, d):
            raise ValueError("pitches_ and offsets_ must both have shape (n_grids_, n_features_in_)")
        for name, a in (("U", self.U), ("INV", self.INV)):
            if not (a.dtype == np.float64 and a.ndim == 2 and a.shape[0] == d and a.shape[1] >= P
                    and a.shape[1] % LANES == 0 and a.flags.c_contiguous):
                raise ValueError(f"the grids' {name} array does not match n_grids_ and n_features_in_")
        if not (np.isfinite(self.value) and self.value > 0):
            raise ValueError("the entries' value must be positive and finite")
        if self.vocabulary is not None:
            _check_vocabulary(self.vocabulary, P, self.n_features_out)

    def index_bounds(self):
        """The vocabulary's integer arrays and their ranges (the bin hashes are keys: any value)."""
        if self.vocabulary is None:
            return ()
        keys, koff, dirs, doff, bits = self.vocabulary
        D = self.n_features_out
        return (("bin_hashes_", keys, None, None), ("grid_offsets_", koff, 0, D + 1),
                ("the lookup directory", dirs, 0, D + 1), ("its offsets", doff, 0, dirs.shape[0] + 1),
                ("its bit counts", bits, 0, 63))

    @property
    def n_features_in(self):
        """int: the grids' number of input features."""
        return int(self.pitches.shape[1])


def _check_vocabulary(vocabulary, P, D):
    """ValueError unless (keys, key_offsets, directory, dir_offsets, dir_bits) can be looked up safely."""
    if len(vocabulary) != 5:
        raise ValueError("the vocabulary must have 5 arrays")
    keys, koff, dirs, doff, bits = vocabulary
    expected = ((keys, np.uint64, D, "bin_hashes_"), (koff, np.int64, P + 1, "grid_offsets_"),
                (dirs, np.uint32, None, "the lookup directory"), (doff, np.int64, P + 1, "its offsets"),
                (bits, np.intc, P, "its bit counts"))
    for a, dtype, size, name in expected:
        if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == 1 and a.flags.c_contiguous
                and (size is None or a.shape[0] == size)):
            raise ValueError(f"{name} must be a 1-D contiguous {np.dtype(dtype).name} array"
                             + ("" if size is None else f" of {size} entries"))
    counts = np.diff(koff)
    if koff[0] != 0 or koff[-1] != D or np.any(counts < 0) or D == 0:
        raise ValueError(f"grid_offsets_ must increase from 0 to n_features_out_={D}")
    if np.any(bits < 0) or np.any(bits > 62):
        raise ValueError("the lookup directory's bit counts must be in [0, 62]")
    if doff[0] != 0 or doff[-1] != dirs.shape[0] or np.any(np.diff(doff) != (np.int64(1) << bits) + 1):
        raise ValueError("the lookup directory's offsets do not match its bit counts")
    starts, ends = doff[:-1], doff[1:] - 1
    if np.any(dirs[starts] != 0) or np.any(dirs[ends].astype(np.int64) != counts):
        raise ValueError("each grid's lookup directory must run from 0 to its number of bins")
    # Grid by grid: temporaries of one grid's size, not of the whole vocabulary's.
    for p in range(P):
        d = dirs[doff[p]:doff[p + 1]]
        if np.any(d[1:] < d[:-1]):
            raise ValueError("each grid's lookup directory must be non-decreasing")
        k = keys[koff[p]:koff[p + 1]]
        if np.any(k[1:] <= k[:-1]):
            raise ValueError("each grid's bin_hashes_ must be sorted and distinct")
