"""``show_config``: what a user pastes into a bug report."""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import platform
import sys
from typing import Any, Optional, TextIO

import numpy as np

from .._ext._openmp import omp_max_threads, openmp_enabled
from .threads import blas_info, effective_n_threads
from .._version import __version__

# Compiled modules that report the vector code path they dispatched to, as a
# function ``vector_isa() -> str``.  A module listed here but not built yet is
# reported as missing rather than breaking show_config.
_VECTOR_PATH_MODULES = ("_fourier_fast", "_binning_fast", "_onehot_fast", "_structured_fast", "_kernel_approx_fast")

# Environment variables that change what randfeat does at run time.
_ENV_VARS = ("RANDFEAT_VECTOR_ISA", "OMP_NUM_THREADS", "OMP_PROC_BIND", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _vector_paths():
    paths = {}
    for name in _VECTOR_PATH_MODULES:
        if importlib.util.find_spec(f"randfeat._ext.{name}") is None:
            continue  # not part of this build
        # A module that exists but fails to import is a real error: let it raise.
        paths[name] = importlib.import_module(f"randfeat._ext.{name}").vector_isa()
    return paths


def _library_defining(symbol_address):
    """Path of the shared library containing ``symbol_address``, or None."""
    try:
        if sys.platform == "win32":
            from ctypes import wintypes

            kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
            handle = wintypes.HMODULE()
            from_address_unchanged = 0x4 | 0x2  # GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | _UNCHANGED_REFCOUNT
            if not kernel32.GetModuleHandleExW(from_address_unchanged, ctypes.c_void_p(symbol_address), ctypes.byref(handle)):
                return None
            buf = ctypes.create_unicode_buffer(32768)
            n = kernel32.GetModuleFileNameW(handle, buf, len(buf))
            return buf.value if n else None

        class DlInfo(ctypes.Structure):
            _fields_ = [
                ("dli_fname", ctypes.c_char_p),
                ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p),
                ("dli_saddr", ctypes.c_void_p),
            ]

        info = DlInfo()
        if not ctypes.CDLL(None).dladdr(ctypes.c_void_p(symbol_address), ctypes.byref(info)):
            return None
        return os.fsdecode(info.dli_fname) if info.dli_fname else None
    except (OSError, AttributeError, ValueError):  # no dladdr / odd platform: unknown
        return None


def _randfeat_openmp_library():
    """Path of the OpenMP runtime randfeat's extensions call, or None if unknown.

    Asks the dynamic loader which library defines the ``omp_get_max_threads``
    that ``randfeat._openmp`` resolves (its own dependency, e.g. a libgomp
    vendored by auditwheel), as several runtimes may be loaded at once.
    """
    from .._ext import _openmp

    try:
        func = ctypes.CDLL(_openmp.__file__).omp_get_max_threads
    except (OSError, AttributeError):  # serial build: no OpenMP symbol
        return None
    return _library_defining(ctypes.cast(func, ctypes.c_void_p).value)


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _openmp_runtime():
    # threadpoolctl lists every OpenMP runtime loaded in this process (ours,
    # and e.g. scikit-learn's own vendored libgomp); mark the one randfeat uses.
    from threadpoolctl import threadpool_info

    ours = _randfeat_openmp_library()
    keys = ("internal_api", "prefix", "version", "num_threads", "filepath")
    records = [
        {k: info.get(k) for k in keys} for info in threadpool_info() if info.get("user_api") == "openmp"
    ]
    if ours is None:
        # The loader cannot say (Windows: a .pyd does not re-export the OpenMP
        # symbols it imports).  A runtime vendored in randfeat's wheel
        # (randfeat.libs/ or randfeat/.dylibs/) can only be randfeat's.
        pkg = os.path.dirname(os.path.abspath(__file__))
        vendored_dirs = (os.path.join(os.path.dirname(pkg), "randfeat.libs"), os.path.join(pkg, ".dylibs"))
        vendored = [r for r in records if os.path.dirname(os.path.abspath(r["filepath"])) in vendored_dirs]
        if len(vendored) == 1:
            ours = vendored[0]["filepath"]
    for rec in records:
        rec["used_by_randfeat"] = None if ours is None else _same_file(ours, rec["filepath"])
    return records


def get_config() -> dict[str, Any]:
    """Return randfeat's build and runtime configuration as a dict.

    Returns
    -------
    config : dict
        Keys ``version``, ``python``, ``platform``, ``numpy``, ``scipy``,
        ``scikit-learn``, ``threadpoolctl``, ``openmp`` (bool: built with
        OpenMP), ``openmp_runtime`` (list of threadpoolctl records of the
        OpenMP libraries loaded in the process: prefix, version,
        num_threads, filepath, and ``used_by_randfeat``: True for the one
        randfeat's extensions call, None where that cannot be told),
        ``omp_max_threads``, ``default_n_threads`` (what ``n_jobs=None``
        gives), ``blas`` (list of threadpoolctl records), ``vector_paths``
        (the SIMD code path each kernel module dispatched to on this CPU) and
        ``environment`` (the set environment variables among
        ``RANDFEAT_VECTOR_ISA``, ``OMP_NUM_THREADS``, ``OMP_PROC_BIND``,
        ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS``).
    """
    import scipy
    import sklearn
    import threadpoolctl

    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "threadpoolctl": threadpoolctl.__version__,
        "openmp": openmp_enabled(),
        "openmp_runtime": _openmp_runtime(),
        "omp_max_threads": omp_max_threads(),
        "default_n_threads": effective_n_threads(None),
        "blas": blas_info(),
        "vector_paths": _vector_paths(),
        "environment": {k: os.environ[k] for k in _ENV_VARS if k in os.environ},
    }


def _owner(filepath):
    """The package a shared library ships with, from its path (``scikit_learn.libs/…`` → ``scikit-learn``)."""
    parts = str(filepath or "").replace("\\", "/").split("/")
    for part in parts:
        if part.endswith(".libs"):  # a wheel's vendored libraries (auditwheel)
            return part[: -len(".libs")].replace("_", "-")
    for i, part in enumerate(parts):
        if part in ("site-packages", "dist-packages") and i + 2 < len(parts):
            return parts[i + 1]
    return "the system"


def show_config(file: Optional[TextIO] = None) -> None:
    """Print randfeat's version, OpenMP status, thread count, BLAS and SIMD paths.

    This is what to paste into a bug report.

    Parameters
    ----------
    file : file-like, default=None
        Where to print; ``sys.stdout`` when None.

    See Also
    --------
    get_config : The same information as a dict.
    """
    cfg = get_config()
    out = file if file is not None else sys.stdout

    def line(label, text):
        print(f"  {label + ':':<16} {text}", file=out)

    print(f"randfeat {cfg['version']}", file=out)
    line("python", f"{cfg['python']} on {cfg['platform']}")
    line(
        "dependencies",
        f"numpy {cfg['numpy']}, scipy {cfg['scipy']}, scikit-learn {cfg['scikit-learn']}, "
        f"threadpoolctl {cfg['threadpoolctl']}",
    )
    line("OpenMP", "enabled" if cfg["openmp"] else "DISABLED (serial build)")
    runtimes = cfg["openmp_runtime"]
    for rt in runtimes:
        version = f" {rt['version']}" if rt["version"] else ""
        whose = {True: " [randfeat's kernels]", None: ""}.get(rt["used_by_randfeat"], f" [{_owner(rt['filepath'])}]")
        line("OpenMP runtime", f"{rt['prefix']}{version}{whose} ({rt['num_threads']} threads) {rt['filepath']}")
    if len(runtimes) > 1:
        others = sorted({_owner(rt["filepath"]) for rt in runtimes if rt["used_by_randfeat"] is False})
        print(f"  {'':<16} ({len(runtimes)} runtimes: {', '.join(others) or 'another package'} ships its own "
              "copy in its wheel; each package uses its own: harmless)", file=out)
    line("threads", f"{cfg['default_n_threads']} by default (omp_get_max_threads = {cfg['omp_max_threads']})")
    for lib in cfg["blas"] or [None]:
        if lib is None:
            line("BLAS", "none loaded")
            continue
        line(
            "BLAS",
            f"{lib.get('internal_api')} {lib.get('version')} [{_owner(lib.get('filepath'))}] "
            f"({lib.get('threading_layer')}, {lib.get('num_threads')} threads, {lib.get('architecture')}) "
            f"{lib.get('filepath')}",
        )
    paths = cfg["vector_paths"]
    if not paths:
        line("vector path", "no dispatching kernel module in this build")
    elif len(set(paths.values())) == 1:
        # Every kernel module reads the same CPU detection (and RANDFEAT_VECTOR_ISA): one path.
        line("vector path", f"{next(iter(paths.values()))} (all {len(paths)} kernel modules)")
    else:
        for isa in sorted(set(paths.values())):
            line("vector path", f"{isa}: {', '.join(n for n, i in paths.items() if i == isa)}")
    for key, value in cfg["environment"].items():
        line("environment", f"{key}={value}")
