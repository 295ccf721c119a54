"""What the scikit-learn-compatible maps share: scikit-learn's random draws.

The five drop-in maps (``RBFSampler``, ``Nystroem``, ``PolynomialCountSketch``,
``SkewedChi2Sampler``; ``AdditiveChi2Sampler`` draws nothing) make the same
calls on the same random source as ``sklearn.kernel_approximation``, in the
same order, so that for one ``random_state`` (None, an int or a
``RandomState``) they draw exactly scikit-learn's frequencies, phases, hashes
and landmarks and their features equal scikit-learn's to rounding: changing
the import changes no result.  That source is the legacy ``RandomState``
scikit-learn's ``check_random_state`` returns; a ``numpy.random.Generator``
is also accepted and drawn from directly (no scikit-learn counterpart).
"""

import numpy as np
from sklearn.utils import check_random_state


def draw_rng(random_state):
    """Return the random source scikit-learn's kernel approximations would draw from.

    Parameters
    ----------
    random_state : None, int, RandomState or Generator

    Returns
    -------
    RandomState or Generator
        A Generator as given; otherwise ``sklearn.utils.check_random_state``
        (None: NumPy's global RandomState, as in scikit-learn).
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    return check_random_state(random_state)


def draw_integers(rng, high, size):
    """Integers in [0, high): ``RandomState.randint`` (scikit-learn's call) or ``Generator.integers``.

    Parameters
    ----------
    rng : RandomState or Generator
    high : int
    size : tuple of int

    Returns
    -------
    ndarray of int64
    """
    if isinstance(rng, np.random.Generator):
        return rng.integers(0, high, size=size, dtype=np.int64)
    return rng.randint(0, high=high, size=size).astype(np.int64, copy=False)
