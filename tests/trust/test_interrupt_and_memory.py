"""Ctrl-C during long compiled calls, and memory that cannot fit (issue 14, rows 10 and 11).

Every case runs in a child Python, because it sends the child SIGINT or caps
its address space:

* a long call (Fourier transform of dense and CSR input, binning fit,
  fit_transform and transform) is interrupted after a short delay; the child
  must raise KeyboardInterrupt within 0.5 s, keep its memory (no growth over
  repeated interruptions), leave a fitted estimator as it was, and go on
  computing the same features afterwards;
* with ``RLIMIT_AS`` capped, a request that cannot fit raises MemoryError at
  once, naming the bytes and what to do instead, and the process stays usable;
* binning ``fit_transform`` peaks at no more than 1.5x its output plus its
  vocabulary (VmHWM of a fresh process).
"""

import json
import subprocess
import sys
import textwrap

import pytest

from _subprocess_env import subprocess_env

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")


def run_child(code, timeout=600):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=subprocess_env(),
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"child failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ Ctrl-C
INTERRUPT_CHILD = r"""
import ctypes, gc, json, os, signal, threading, time
import numpy as np, scipy.sparse as sp
from randfeat import RandomBinningFeatures, RandomFourierFeatures

CASE = {case!r}
DELAY = 0.25  # seconds between the start of the call and SIGINT
# A process started in the background of a shell without job control
# inherits SIGINT ignored, and Python then installs no KeyboardInterrupt
# handler: restore it, so the test measures randfeat, not how it was launched.
signal.signal(signal.SIGINT, signal.default_int_handler)


def rss():
    gc.collect()
    try:  # give freed heap memory back first (glibc), so only real growth counts
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024


def data(n):
    rng = np.random.default_rng(0)
    if CASE == "fourier_dense":
        return rng.normal(size=(n, 512))
    if CASE == "fourier_csr":
        return sp.random(n, 4000, density=0.05, format="csr", random_state=0)
    # 200 columns and 200 grids: a binning transform of 128000 rows of 100
    # columns into 100 grids took 0.21 s on an AVX-512 machine, less than
    # DELAY, so no call was left to interrupt.
    return rng.normal(size=(n, 200))


def make(n):
    # The estimator (fitted on a small sample) and the long call to interrupt.
    X = data(n)
    if CASE.startswith("fourier"):
        est = RandomFourierFeatures(4096, gamma=1e-3, random_state=0).fit(X[:10])
        return est, X, lambda: est.transform(X)
    est = RandomBinningFeatures(200, gamma=0.5, random_state=0).fit(data(50))
    call = {{"binning_fit": est.fit, "binning_fit_transform": est.fit_transform,
             "binning_transform": est.transform}}[CASE]
    return est, X, lambda: call(X)


# Calibrate: the call to interrupt must run well past the signal (>= 1.5 s).
n = 500
while True:
    est, X, call = make(n)
    t = time.perf_counter()
    call()
    if time.perf_counter() - t >= 0.75 or n >= 64000:
        break
    n *= 2
est, X, call = make(2 * n)
small = X[:20]
before = est.transform(small)
state = {{k: v.copy() for k, v in vars(est).items() if isinstance(v, np.ndarray)}}

latencies, rss_after = [], []
for attempt in range(6):
    sent = []
    timer = threading.Timer(DELAY, lambda: (sent.append(time.perf_counter()), os.kill(os.getpid(), signal.SIGINT)))
    t0 = time.perf_counter()
    timer.start()
    try:
        call()
        latencies.append(None)  # finished before the signal was handled
    except KeyboardInterrupt:
        latencies.append(time.perf_counter() - sent[0])
    timer.join()
    rss_after.append(rss())

after = est.transform(small)
same_state = all(np.array_equal(v, getattr(est, k)) for k, v in state.items())
same = (before != after).nnz == 0 if sp.issparse(before) else bool(np.array_equal(before, after))
print(json.dumps(dict(n=2 * n, latencies=latencies, rss=rss_after, same_features=same, same_state=same_state)))
"""


@linux_only
@pytest.mark.parametrize(
    "case", ["fourier_dense", "fourier_csr", "binning_fit", "binning_fit_transform", "binning_transform"]
)
def test_ctrl_c_interrupts_a_long_compiled_call(case):
    out = run_child(INTERRUPT_CHILD.format(case=case))
    lat = out["latencies"]
    assert all(t is not None for t in lat), f"a call finished before SIGINT was handled: {out}"
    assert max(lat) <= 0.5, f"KeyboardInterrupt came {max(lat):.3f} s after SIGINT: {out}"
    # Repeated interruptions keep no memory: what a leak of the kernels'
    # buffers would add (MBs per interruption) does not appear.
    growth = out["rss"][-1] - out["rss"][1]
    assert growth < 16 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over 4 interruptions: {out}"
    assert out["same_features"], "features changed after the interruptions"
    assert out["same_state"], "an interrupted call changed the fitted estimator"


# ---------------------------------------------------------------- memory caps
CAPPED_CHILD = r"""
import json, resource, time
import numpy as np
from randfeat import RandomBinningFeatures, RandomFourierFeatures

X = np.random.default_rng(0).normal(size=(1000, 5))
rff = RandomFourierFeatures(200, random_state=0).fit(X)
rbf = RandomBinningFeatures(20, random_state=0).fit(X)
ref_f, ref_b = rff.transform(X), rbf.transform(X)

with open("/proc/self/status") as f:
    vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
headroom = 512 * 2**20
resource.setrlimit(resource.RLIMIT_AS, (vm + headroom, resource.getrlimit(resource.RLIMIT_AS)[1]))

cases = {
    "fourier_fit": lambda: RandomFourierFeatures(n_components=10**9).fit(X),
    "fourier_transform": lambda: rff.transform(np.zeros((2_000_000, 5))),
    "binning_fit_transform": lambda: RandomBinningFeatures(400, random_state=0).fit_transform(np.zeros((1_000_000, 2))),
    "binning_fit": lambda: RandomBinningFeatures(400, random_state=0).fit(np.zeros((1_000_000, 2))),
    "binning_transform": lambda: rbf.transform(np.zeros((4_000_000, 5))),
}
out = {}
for name, call in cases.items():
    t = time.perf_counter()
    try:
        call()
        out[name] = dict(raised=None)
    except MemoryError as e:
        out[name] = dict(raised="MemoryError", message=str(e), seconds=time.perf_counter() - t)
out["usable"] = bool(np.array_equal(rff.transform(X), ref_f) and (rbf.transform(X) != ref_b).nnz == 0)
print(json.dumps(out))
"""

ADVICE = {
    "fourier_fit": "n_components",
    "fourier_transform": "Ridge(features=",
    "binning_fit_transform": "n_grids",
    "binning_fit": "n_grids",
    "binning_transform": "chunks",
}


@linux_only
def test_requests_that_cannot_fit_raise_memoryerror_first():
    out = run_child(CAPPED_CHILD)
    assert out.pop("usable"), "the process computed different features after the MemoryErrors"
    for name, res in out.items():
        assert res["raised"] == "MemoryError", (name, res)
        msg = res["message"]
        assert "bytes" in msg and "RLIMIT_AS" in msg and ADVICE[name] in msg, (name, msg)
        # Raised before allocating or computing anything large.
        assert res["seconds"] < 1.0, (name, res)


def test_memory_check_reads_a_limit():
    from randfeat._core.memory_budget import available_memory, check_memory, format_bytes

    avail, source = available_memory()
    if sys.platform.startswith("linux"):
        assert avail is not None and avail > 0 and source
    check_memory(1, "one byte", "nothing")  # fits anywhere
    if avail is not None:
        with pytest.raises(MemoryError, match=r"needs 1\.0 TiB .*use less"):
            check_memory(max(2**40, avail + 1), "a test", "use less")
    assert format_bytes(1536) == "1.5 KiB" and format_bytes(12) == "12 bytes"


# ------------------------------------------------------ binning peak memory
PEAK_CHILD = r"""
import json, numpy as np
from randfeat import RandomBinningFeatures

def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))

rng = np.random.default_rng(0)
X = rng.normal(size=({n}, 20)).astype(np.{dtype})
est = RandomBinningFeatures({P}, gamma={gamma}, random_state=0, n_jobs=2)
est.fit(X[:10])
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset VmHWM
before = status("VmRSS")
Z = est.fit_transform(X)
peak = status("VmHWM") - before
csr = Z.data.nbytes + Z.indices.nbytes + Z.indptr.nbytes
vocab = sum(a.nbytes for a in est._state.vocabulary)
print(json.dumps(dict(peak=peak, csr=csr, vocab=vocab)))
"""


@linux_only
@pytest.mark.parametrize(
    "n, P, dtype, gamma",
    [
        (200_000, 30, "float64", 0.5),  # shared bins (grouped vocabulary)
        (100_000, 10, "float32", 50.0),  # nearly every row its own bin: large vocabularies
        (100_000, 40, "float64", 50.0),
    ],
)
def test_binning_fit_transform_peak_memory(n, P, dtype, gamma):
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pytest.skip("the peak-RSS counter cannot be reset here (/proc/self/clear_refs)")
    out = run_child(PEAK_CHILD.format(n=n, P=P, dtype=dtype, gamma=gamma))
    # Plus a fixed 8 MiB: the resident set grows in 2 MiB steps where huge
    # pages back a buffer, and glibc may keep a freed task buffer in a
    # thread's arena a little longer, depending on how the two threads'
    # tasks interleave.  Without it the 100000 x 10 float32 case (bar 24.6
    # MiB, usually 22-23.4) failed in 1 of the last ~10 full-suite runs; the same
    # case at 300000 rows peaked at 70.3-78.7 MiB against 78.9.  A change that
    # scales with the data still shows.
    bar = 1.5 * out["csr"] + out["vocab"] + (8 << 20)
    assert out["peak"] <= bar, (
        f"peak {out['peak'] / 2**20:.1f} MiB > 1.5 x output + vocabulary + 8 MiB ({bar / 2**20:.1f} MiB): {out}")
