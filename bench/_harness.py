"""Shared plumbing of the benchmark scripts: progress lines, timing, peak
memory, child processes, results directory, machine description.

Not a library module: the scripts in bench/ import it from their own folder.
"""

import ctypes
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_RESULTS = BENCH_DIR / "results"
# The committed results (shown in the docs) and where a user's run writes by
# default (git-ignored, so a fresh clone stays clean after running the bench).
COMMITTED_RESULTS = DEFAULT_RESULTS
LOCAL_RESULTS = BENCH_DIR / "out"

_T0 = time.perf_counter()


def progress(msg):
    """One progress line on stderr, stamped with seconds since start."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


class HarnessError(Exception):
    """A user-facing problem (bad file, no network...): printed without a traceback."""


# ------------------------------------------------------------------- memory
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def current_rss():
    """Resident set size of this process in bytes (Linux /proc; else max RSS)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        import resource

        scale = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def proc_status_bytes(key):
    """This process's ``key`` line of /proc/self/status (e.g. "VmRSS"), in bytes.

    Raises OSError where there is no /proc (not Linux).
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"/proc/self/status has no {key} line")


def peak_rss():
    """Peak resident set size of this process in bytes.

    VmHWM is this process's own high-water mark.  ru_maxrss is not: on Linux
    a child starts from its parent's peak RSS at fork (a benchmark holding
    gigabytes), so it is the fallback only, where there is no /proc.
    """
    try:
        return proc_status_bytes("VmHWM")
    except OSError:
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return ru if sys.platform == "darwin" else ru * 1024


def run_child_json(code, *args):
    """Run ``python -c code *args`` in a fresh process; return the JSON object on its last stdout line.

    The child imports the same randfeat as this process (installed wheel or
    in-place build): the directory holding the imported package goes first
    on its PYTHONPATH (putting src/ first would shadow an installed wheel
    with uncompiled sources).  A failing child raises RuntimeError with the
    end of its stderr.
    """
    import subprocess

    import randfeat

    pkg_parent = str(Path(randfeat.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH", "")) if p)
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _trim_heap():
    # Give freed heap memory back to the OS so that the next measurement's
    # baseline is honest (glibc keeps freed small blocks otherwise).
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class PeakMemory:
    """Context manager: peak RSS increase over the RSS at entry, sampled.

    A background thread reads the RSS every ``interval`` seconds (it gets the
    GIL whenever NumPy, BLAS or a nogil kernel releases it, and at least every
    few ms otherwise), so short spikes between samples can be missed: the
    figure is a lower bound of the true peak, good to a few percent for the
    allocations of hundreds of MB that matter here.
    """

    def __init__(self, interval=0.005):
        self.interval = interval
        self.peak_bytes = 0

    def __enter__(self):
        import gc

        gc.collect()
        _trim_heap()
        self._base = current_rss()
        self._peak = self._base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, current_rss())

    def __exit__(self, *exc):
        self._peak = max(self._peak, current_rss())
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(0, self._peak - self._base)
        return False


def timed(fn, *args, **kwargs):
    """Run ``fn``; return (result, seconds, peak extra bytes)."""
    with PeakMemory() as mem:
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        seconds = time.perf_counter() - t
    return out, seconds, mem.peak_bytes


# ----------------------------------------------------------------- formatting
def fmt_seconds(s):
    if s is None or not np.isfinite(s):
        return "—"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def fmt_bytes(b):
    if b is None:
        return "—"
    if b < 1e6:
        return f"{b / 1e3:.0f} kB"
    if b < 1e9:
        return f"{b / 1e6:.0f} MB"
    return f"{b / 1e9:.2f} GB"


def machine_info():
    """What a reader needs to weigh the timings."""
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    try:
        import randfeat

        info["randfeat"] = randfeat.__version__
    except ImportError:  # pragma: no cover - the scripts need randfeat anyway
        info["randfeat"] = None
    import scipy
    import sklearn

    info["numpy"], info["scipy"], info["sklearn"] = np.__version__, scipy.__version__, sklearn.__version__
    try:
        with open("/proc/meminfo") as f:
            info["mem_total_gb"] = round(int(f.readline().split()[1]) / 1e6, 1)
    except OSError:
        pass
    return info


def results_dir(path=None):
    out = Path(path) if path else DEFAULT_RESULTS
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_json(path, obj):
    def default(o):
        if isinstance(o, (np.integer,)):
            return int(o)
        if isinstance(o, (np.floating,)):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
        return str(o)

    Path(path).write_text(json.dumps(obj, indent=2, default=default) + "\n")
