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


def run_on_vector_path(code, isa):
    """Run ``code`` in a child Python with RANDFEAT_VECTOR_ISA=isa; check the path it reports.

    ``code`` must print the module's ``vector_isa()`` last.  The child may
    run a lower path than asked (never a higher one than the CPU has), so
    the report must be ``isa`` or ``"baseline"``.
    """
    proc = subprocess.run([sys.executable, "-c", code], env=subprocess_env(RANDFEAT_VECTOR_ISA=isa),
                          capture_output=True, text=True, check=True)
    reported = proc.stdout.strip().splitlines()[-1]
    assert reported in (isa, "baseline"), reported
    return reported


def run_bench(script, *args, timeout=600):
    """Run ``bench/<script> *args`` as a user would (a child Python); return the CompletedProcess.

    Output is captured as text; plots use the non-interactive Agg backend.
    """
    env = subprocess_env()
    env.setdefault("MPLBACKEND", "Agg")
    return subprocess.run([sys.executable, str(BENCH / script), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)
