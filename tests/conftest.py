"""The suite's layout: one folder per component (maps, linalg, solvers, backends, estimators), trust and package.

Their shared helpers (``_subprocess_env``, ``_fourier_reference``,
``_binning_reference``, ``baseline_cases``, ``pipeline_cases``) live here, in
tests/, which is put on ``sys.path`` for every test file below it.
"""

import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
