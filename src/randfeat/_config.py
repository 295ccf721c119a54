"""``show_config``: what a user pastes into a bug report."""

import importlib
import platform
import sys

import numpy as np

from ._openmp import omp_max_threads, openmp_enabled
from ._threads import blas_info, effective_n_threads
from ._version import __version__

# Compiled modules that report the vector code path they dispatched to, as a
# function ``vector_isa() -> str``.  A module listed here but not built yet is
# reported as missing rather than breaking show_config.
_VECTOR_PATH_MODULES = ("_fourier_fast", "_binning_fast")


def _vector_paths():
    paths = {}
    for name in _VECTOR_PATH_MODULES:
        try:
            mod = importlib.import_module(f"randfeat.{name}")
        except ImportError:
            continue
        if hasattr(mod, "vector_isa"):
            paths[name] = mod.vector_isa()
    return paths


def get_config():
    """Return randfeat's build and runtime configuration as a dict.

    Returns
    -------
    config : dict
        Keys ``version``, ``python``, ``platform``, ``numpy``, ``scipy``,
        ``scikit-learn``, ``openmp`` (bool), ``omp_max_threads``,
        ``default_n_threads`` (what ``n_jobs=None`` gives), ``blas`` (list of
        threadpoolctl records) and ``vector_paths`` (the SIMD code path each
        kernel module dispatched to on this CPU).
    """
    import scipy
    import sklearn

    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "openmp": openmp_enabled(),
        "omp_max_threads": omp_max_threads(),
        "default_n_threads": effective_n_threads(None),
        "blas": blas_info(),
        "vector_paths": _vector_paths(),
    }


def show_config(file=None):
    """Print randfeat's version, OpenMP status, thread count, BLAS and SIMD paths.

    Parameters
    ----------
    file : file-like, default=None
        Where to print; ``sys.stdout`` when None.
    """
    cfg = get_config()
    out = file if file is not None else sys.stdout
    print(f"randfeat {cfg['version']}", file=out)
    print(f"  python:          {cfg['python']} on {cfg['platform']}", file=out)
    print(f"  numpy / scipy / scikit-learn: {cfg['numpy']} / {cfg['scipy']} / {cfg['scikit-learn']}", file=out)
    print(f"  OpenMP:          {'enabled' if cfg['openmp'] else 'DISABLED (serial build)'}", file=out)
    print(f"  threads:         {cfg['default_n_threads']} by default (omp_get_max_threads = {cfg['omp_max_threads']})", file=out)
    for lib in cfg["blas"] or [{}]:
        if lib:
            print(
                f"  BLAS:            {lib.get('internal_api')} {lib.get('version')} "
                f"({lib.get('threading_layer')}, {lib.get('num_threads')} threads, "
                f"{lib.get('architecture')}) {lib.get('filepath')}",
                file=out,
            )
        else:
            print("  BLAS:            none loaded", file=out)
    for name, isa in cfg["vector_paths"].items():
        print(f"  vector path:     {name}: {isa}", file=out)
