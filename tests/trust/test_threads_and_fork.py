"""Issue 14 rows 1, 2 and 9: fork after parallel work, huge ``n_jobs``, concurrent Python threads.

Forks and huge thread counts run in a child Python with a timeout, so a
regression hangs or kills the child, never the test run.
"""

import re
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge
from randfeat._ext._openmp import openmp_enabled
from randfeat._core.threads import effective_n_threads, limit_blas_threads, single_threaded_blas, usable_cores

from _subprocess_env import subprocess_env

needs_openmp = pytest.mark.skipif(not openmp_enabled(), reason="serial build: no OpenMP pool to lose")


def _run_child(code, timeout=180):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=subprocess_env(OMP_NUM_THREADS="2"),
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


# Each work item is computed in the parent (two threads), then again in a
# forked child; the child must finish and give the same bits.
FORK_SCRIPT = """
import multiprocessing as mp, warnings
import numpy as np
from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge

rng = np.random.default_rng(0)
X = rng.normal(size=(1000, 8)); y = rng.normal(size=1000)

def work():
    out = {{}}
    out["fourier"] = RandomFourierFeatures(1024, random_state=0, n_jobs=2).fit(X).transform(X)
    out["binning"] = RandomBinningFeatures(20, random_state=0, n_jobs=2).fit_transform(X).toarray()
    for solver in ("cg", "cholesky"):
        out[solver] = Ridge(alpha=1e-3, features=RandomFourierFeatures(200, random_state=0), solver=solver,
                            n_jobs=2).fit(X, y).coef_
    return out

def child(conn):
    # ``parent`` was computed before the fork: the child holds a copy.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = [work(), work()]
    same = all(np.array_equal(run[name], parent[name]) for run in runs for name in parent)
    conn.send((same, sum("forked" in str(w.message) for w in caught)))

parent = work()  # starts libgomp's pool in the parent
ctx = mp.get_context("fork")
a, b = ctx.Pipe()
p = ctx.Process(target=child, args=(b,))
p.start()
if not a.poll({timeout}):
    p.kill()
    raise SystemExit("child hung")
same, n_warn = a.recv()
p.join()
assert p.exitcode == 0, p.exitcode
assert same, "the child's results differ from the parent's"
print("warnings", n_warn)
# The parent keeps its threads.
from randfeat._core.threads import effective_n_threads, in_forked_child
assert not in_forked_child() and effective_n_threads(2) == min(2, __import__("joblib").cpu_count())
print("ok")
"""


@needs_openmp
def test_row1_fork_after_parallel_work_runs_single_threaded_in_the_child():
    out = _run_child(FORK_SCRIPT.format(timeout=120))
    assert "ok" in out
    # Said once per child process, not once per call.
    assert "warnings 1" in out


def test_row1_fork_before_any_parallel_work_keeps_threads():
    out = _run_child("""
        import multiprocessing as mp
        from randfeat._core.threads import effective_n_threads, in_forked_child, usable_cores
        def child(q):
            q.put((in_forked_child(), effective_n_threads(-1)))
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,)); p.start()
        print(q.get(timeout=60)); p.join()
    """)
    assert out.strip().startswith("(False,")


def test_row2_n_jobs_is_clipped_to_the_usable_cores():
    cores = usable_cores()
    for n_jobs in (1, 2, 3, 1000, 10**6):
        n = effective_n_threads(n_jobs)
        assert 1 <= n <= cores
        assert n == (min(n_jobs, cores) if openmp_enabled() else 1)


def test_row2_huge_n_jobs_never_ends_the_process():
    # Before clipping, n_jobs reached the kernels as is: 1000 threads ended
    # the process ("libgomp: Thread creation failed"), and a parallel region
    # asked for 10**6 threads crashed with SIGSEGV inside libgomp (its team
    # start puts per-thread data on the calling thread's stack: a prange with
    # num_threads=10**6 overflows it even with no work at all).
    out = _run_child("""
        import numpy as np
        from randfeat import RandomBinningFeatures, RandomFourierFeatures, Ridge, RidgeClassifier, kernel_matrix
        rng = np.random.default_rng(0)
        X = rng.normal(size=(800, 6)); y = rng.normal(size=800)
        ref = {}
        for n_jobs in (1, 1000, 10**6):
            got = dict(
                fourier=RandomFourierFeatures(300, random_state=0, n_jobs=n_jobs).fit_transform(X),
                binning=RandomBinningFeatures(20, random_state=0, n_jobs=n_jobs).fit_transform(X).toarray(),
                binning_t=RandomBinningFeatures(20, random_state=0, n_jobs=n_jobs).fit(X).transform(X).toarray(),
                cg=Ridge(features=RandomFourierFeatures(100, random_state=0), solver="cg", n_jobs=n_jobs).fit(X, y).coef_,
                chol=Ridge(features=RandomBinningFeatures(5, random_state=0), n_jobs=n_jobs).fit(X, y).coef_,
                clf=RidgeClassifier(features=RandomFourierFeatures(50, random_state=0), n_jobs=n_jobs).fit(X, y > 0).coef_,
            )
            for k, v in got.items():
                if n_jobs == 1:
                    ref[k] = v
                else:
                    np.testing.assert_array_equal(v, ref[k], err_msg=k)
        print("ok")
    """)
    assert "ok" in out


# ------------------------------------------------------------------- row 9
def _blas_limits():
    return sorted((i["internal_api"], i["filepath"], i["num_threads"]) for i in threadpool_info()
                  if i["user_api"] == "blas")


def test_row9_nested_limits_restore_exactly():
    before = _blas_limits()
    with single_threaded_blas():
        with limit_blas_threads(2):
            pass
        assert all(n == 1 for _, _, n in _blas_limits())
    assert _blas_limits() == before


def test_row9_concurrent_threads_restore_the_blas_limit():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 10))
    y = rng.normal(size=200)
    rff = RandomFourierFeatures(256, random_state=0).fit(X)
    model = Ridge(alpha=1e-2, features=RandomFourierFeatures(128, random_state=0)).fit(X, y)
    Z_ref, p_ref = rff.transform(X), model.predict(X)
    before = _blas_limits()
    errors = []
    barrier = threading.Barrier(4)

    def worker(k):
        try:
            barrier.wait()
            for _ in range(4):
                if k % 3 == 0:
                    np.testing.assert_array_equal(rff.transform(X), Z_ref)
                elif k % 3 == 1:
                    np.testing.assert_array_equal(model.predict(X), p_ref)
                else:  # syrk under a limit of n_jobs threads, the rest under one
                    Ridge(alpha=1e-2, solver="cholesky", chunk_size=50).fit(X, y)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert _blas_limits() == before


def test_row9_interleaved_limits_from_many_threads_restore_exactly():
    # The race itself: limits of 1 and 2 threads entered and left by several
    # threads in every interleaving (sleep(0) yields the GIL inside each).
    before = _blas_limits()
    barrier = threading.Barrier(4)

    def worker(k):
        barrier.wait()
        for i in range(1000):
            with limit_blas_threads(1 + (i + k) % 2):
                time.sleep(0)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _blas_limits() == before


def test_blas_limit_from_a_worker_thread_is_applied_and_released():
    # threadpoolctl lets only one thread change a pthreads OpenBLAS's limit; randfeat's
    # reference-counted limit must still hold BLAS to one thread in a pool's worker (the
    # gammas' eigendecompositions) after the main thread once limited it, and give the
    # count back when released (issue 27: eigh ran on every BLAS thread in the pool).
    from concurrent.futures import ThreadPoolExecutor

    from randfeat._core.threads import _get_controller, single_threaded_blas

    libs = _get_controller().select(user_api="blas").lib_controllers
    if not libs:
        pytest.skip("no BLAS library found by threadpoolctl")
    before = [lib.num_threads for lib in libs]
    with single_threaded_blas():
        pass  # the main thread limits once

    def inside(_):
        with single_threaded_blas():
            return [lib.num_threads for lib in libs]

    with ThreadPoolExecutor(2) as pool:
        seen = list(pool.map(inside, range(4)))
    assert all(counts == [1] * len(libs) for counts in seen), seen
    assert [lib.num_threads for lib in libs] == before


_SHOW_WAIT_POLICY = """
import numpy as np
import randfeat
randfeat.RandomFourierFeatures(8, gamma=1.0, random_state=0).fit_transform(np.ones((4, 3)))
"""


@pytest.mark.parametrize("user, spins", [(None, False), ("PASSIVE", False), ("ACTIVE", True), ("", True)])
def test_openmp_runtime_waits_passively_unless_the_user_says_otherwise(user, spins):
    # randfeat sets OMP_WAIT_POLICY=PASSIVE before its OpenMP runtime starts
    # (spinning threads starve a busy machine: DESIGN.md, issue 27), and a
    # user's own setting wins.  GNU OpenMP prints OMP_WAIT_POLICY='PASSIVE'
    # for its default too, which still spins: its spin count tells them
    # apart (0 when passive; 300000 by default, more when active).
    env = subprocess_env(OMP_DISPLAY_ENV="VERBOSE")
    env.pop("OMP_WAIT_POLICY", None)  # this process imported randfeat, which set it
    if user is not None:
        env["OMP_WAIT_POLICY"] = user
    out = subprocess.run([sys.executable, "-c", _SHOW_WAIT_POLICY], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    counts = [int(c) for c in re.findall(r"GOMP_SPINCOUNT = '(\d+)'", out.stderr)]
    assert counts, out.stderr  # the runtime printed its settings
    assert all((c > 0) == spins for c in counts), counts


def test_apply_defaults_fills_only_what_is_missing():
    from randfeat._core.openmp_env import apply_defaults

    env = {}
    assert apply_defaults(env) == {"OMP_WAIT_POLICY": "PASSIVE"} and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    env = {"OMP_WAIT_POLICY": "active"}
    assert apply_defaults(env) == {} and env == {"OMP_WAIT_POLICY": "active"}
