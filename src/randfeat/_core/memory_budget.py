"""Pre-flight memory checks: refuse an allocation that cannot fit before making it.

Allocating an array larger than the machine can hold does not always fail
at once: with Linux's overcommit, ``np.empty`` may succeed and the process is
later killed by the OOM killer while the kernel writes the pages, and under
an address-space limit the failure arrives only after the inputs were
prepared.  So the estimators ask here first, with the bytes they are about to
allocate, and raise a ``MemoryError`` that names the bytes and what to do
instead.

Available memory is the smallest of what is known here:

* the address-space limit ``RLIMIT_AS`` (``ulimit -v``) minus this process's
  current virtual size;
* a cgroup v2 memory limit (containers) minus the cgroup's current usage;
* ``MemAvailable + SwapFree`` from ``/proc/meminfo`` (Linux);
* elsewhere, the OS's available physical memory (``sysconf``) or, on
  Windows, the remaining commit charge (``GlobalMemoryStatusEx``).

When none of them can be read, nothing is refused.
"""

import os
import sys

_PROC = "/proc"


def _read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _proc_kib(text, key):
    """Value of a ``Key:  123 kB`` line in bytes, or None."""
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith(key + ":"):
            parts = line.split()
            try:
                return int(parts[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


def _address_space_left():
    try:
        import resource
    except ImportError:  # Windows
        return None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (AttributeError, ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    used = _proc_kib(_read(f"{_PROC}/self/status"), "VmSize")
    if used is None:
        return None
    return max(0, soft - used)


def _cgroup_left():
    text = _read(f"{_PROC}/self/cgroup")
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("0::"):  # cgroup v2
            base = "/sys/fs/cgroup" + line[3:].strip()
            limit = _read(os.path.join(base, "memory.max"))
            usage = _read(os.path.join(base, "memory.current"))
            if limit is None or usage is None or limit.strip() == "max":
                return None
            try:
                return max(0, int(limit) - int(usage))
            except ValueError:
                return None
    return None


def _system_available():
    meminfo = _read(f"{_PROC}/meminfo")
    avail = _proc_kib(meminfo, "MemAvailable")
    if avail is not None:
        return avail + (_proc_kib(meminfo, "SwapFree") or 0), "MemAvailable + SwapFree"
    if sys.platform == "win32":
        return _windows_commit_left(), "remaining commit charge"
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "available physical memory"
    except (AttributeError, ValueError, OSError):
        return None, None


def _windows_commit_left():  # pragma: no cover - Windows only
    import ctypes

    class MemoryStatusEx(ctypes.Structure):
        _fields_ = [
            ("dwLength", ctypes.c_ulong),
            ("dwMemoryLoad", ctypes.c_ulong),
            ("ullTotalPhys", ctypes.c_ulonglong),
            ("ullAvailPhys", ctypes.c_ulonglong),
            ("ullTotalPageFile", ctypes.c_ulonglong),
            ("ullAvailPageFile", ctypes.c_ulonglong),
            ("ullTotalVirtual", ctypes.c_ulonglong),
            ("ullAvailVirtual", ctypes.c_ulonglong),
            ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
        ]

    status = MemoryStatusEx()
    status.dwLength = ctypes.sizeof(MemoryStatusEx)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
        return None
    return int(status.ullAvailPageFile)


def available_memory():
    """Return ``(bytes, source)``: memory this process can still allocate, and which limit says so.

    Returns
    -------
    available : int or None
        The smallest known limit, in bytes; None if no limit can be read.
    source : str or None
        What the limit is (e.g. ``'RLIMIT_AS (ulimit -v)'``).
    """
    known = []
    left = _address_space_left()
    if left is not None:
        known.append((left, "RLIMIT_AS (ulimit -v)"))
    left = _cgroup_left()
    if left is not None:
        known.append((left, "cgroup memory.max"))
    left, source = _system_available()
    if left is not None:
        known.append((left, source))
    if not known:
        return None, None
    return min(known)


def format_bytes(n):
    """``n`` bytes as a short human-readable string (powers of 1024).

    Parameters
    ----------
    n : int

    Returns
    -------
    str
    """
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - unreachable


def check_memory(nbytes, what, advice):
    """Raise MemoryError if ``nbytes`` more cannot be allocated now.

    Parameters
    ----------
    nbytes : int
        Bytes the caller is about to allocate (at least).
    what : str
        What needs them, e.g. ``'the output of transform (200000 x 5000 float64)'``.
    advice : str
        What the user can do instead (the streaming or chunked alternative).

    Raises
    ------
    MemoryError
        Naming ``what``, the bytes needed, the bytes available and which
        limit says so, and ``advice``.
    """
    available, source = available_memory()
    if available is not None and nbytes > available:
        raise MemoryError(
            f"{what} needs {format_bytes(nbytes)} ({nbytes} bytes), but only "
            f"{format_bytes(available)} can be allocated ({source}); {advice}"
        )
