import io
import os

import pytest

import randfeat
from randfeat._ext._openmp import openmp_enabled
from randfeat._core.threads import check_n_jobs, effective_n_threads, usable_cores


def test_built_with_openmp():
    # This machine's compiler has OpenMP: a serial build here is a build bug,
    # unless the serial build was asked for on purpose.
    if os.environ.get("RANDFEAT_DISABLE_OPENMP", "0") not in ("", "0"):
        pytest.skip("serial build requested with RANDFEAT_DISABLE_OPENMP")
    assert openmp_enabled()


def test_show_config_reports_essentials():
    buf = io.StringIO()
    randfeat.show_config(file=buf)
    text = buf.getvalue()
    assert randfeat.__version__ in text
    assert "OpenMP" in text and "threads" in text and "BLAS" in text
    cfg = randfeat.get_config()
    assert cfg["default_n_threads"] >= 1


@pytest.mark.parametrize("n_jobs", [None, -1, 1, 2, -2])
def test_effective_n_threads_is_positive(n_jobs):
    assert effective_n_threads(n_jobs) >= 1


def test_n_jobs_positive_taken_up_to_the_usable_cores():
    if openmp_enabled():
        assert effective_n_threads(1) == 1
        assert effective_n_threads(3) == min(3, usable_cores())


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (1.5, TypeError), ("2", TypeError), (True, TypeError)])
def test_bad_n_jobs(bad, exc):
    with pytest.raises(exc, match="n_jobs"):
        check_n_jobs(bad)
