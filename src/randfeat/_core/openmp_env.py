"""OpenMP settings randfeat needs before its OpenMP runtime starts.

GNU OpenMP reads its environment once, when the library is loaded (at the
first import of a compiled randfeat module), so this runs first in
``randfeat/__init__.py``.
"""

import os

# Threads that finish a parallel region early spin (busy-wait) for the next
# one by default.  On a machine shared with other processes the spinning
# threads take the cores the working ones need: beside two CPU-bound
# processes on two cores a CG fit on binning features (hundreds of short
# regions) took 3.2x its idle one-thread time with spinning and 0.9x with
# passive waiting, while idle fits and transforms measured the same either
# way (bench/contention.py; DESIGN.md, "Amendments from issue 27").
DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


def apply_defaults(environ=os.environ):
    """Set randfeat's OpenMP defaults in ``environ`` where the user has set nothing.

    Parameters
    ----------
    environ : mapping, default os.environ
        The environment to complete; a variable already present (even
        empty) is left as the user set it.

    Returns
    -------
    dict
        The variables this call set.
    """
    added = {name: value for name, value in DEFAULTS.items() if name not in environ}
    environ.update(added)
    return added
