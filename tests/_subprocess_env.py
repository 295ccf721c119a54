"""Environment for tests that run Python in a subprocess.

The child must import the same randfeat as the test process: the installed
wheel when testing an installation, the in-place build when PYTHONPATH points
at src/.  Prepending the directory that holds the imported package does both;
prepending the repository's src/ would shadow an installed wheel with an
uncompiled source tree.
"""

import os
import subprocess
import sys
from pathlib import Path

import randfeat

PKG_PARENT = Path(randfeat.__file__).resolve().parents[1]
#: The repository's bench/ folder (beside tests/).
BENCH = Path(__file__).resolve().parent.parent / "bench"


def subprocess_env(**extra):
    """``os.environ`` with randfeat's own parent directory first on PYTHONPATH."""
    path = [str(PKG_PARENT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), **extra}


#: The vector code paths of the compiled kernels, lowest first.
VECTOR_PATHS = ("baseline", "avx2", "avx512")


def best_vector_path():
    """The best path this test run may use: the CPU's, lowered by a run-wide ``RANDFEAT_VECTOR_ISA``.

    A whole run under ``RANDFEAT_VECTOR_ISA=avx2`` (as ``.ci/run`` does) is
    treated as a run on a CPU whose best path is AVX2: children asked for a
    higher path get this one, exactly as on such a CPU.
    """
    from randfeat._ext import _fourier_fast

    return _fourier_fast.vector_isa()


def expected_vector_path(isa):
    """The path a child asked for ``isa`` runs here: ``isa``, or this machine's best if that is lower."""
    best = best_vector_path()
    return VECTOR_PATHS[min(VECTOR_PATHS.index(isa), VECTOR_PATHS.index(best))]


def run_on_vector_path(code, isa):
    """Run ``code`` in a child Python on vector path ``isa``; check and return the path it reports.

    ``code`` must print the module's ``vector_isa()`` last.  On a CPU (or a
    run, see `best_vector_path`) without ``isa`` the child runs the best lower
    path, so the report must be `expected_vector_path`; callers that need
    ``isa`` itself skip when the report differs.
    """
    expected = expected_vector_path(isa)
    proc = subprocess.run([sys.executable, "-c", code], env=subprocess_env(RANDFEAT_VECTOR_ISA=expected),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    reported = proc.stdout.strip().splitlines()[-1].split()[0]
    assert reported == expected, (isa, expected, reported)
    return reported


def run_bench(script, *args, timeout=600):
    """Run ``bench/<script> *args`` as a user would (a child Python); return the CompletedProcess.

    Output is captured as text; plots use the non-interactive Agg backend.
    """
    env = subprocess_env()
    env.setdefault("MPLBACKEND", "Agg")
    return subprocess.run([sys.executable, str(BENCH / script), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)
