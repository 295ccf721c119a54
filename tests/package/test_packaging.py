"""The package a user installs: stubs, typing marker, metadata, configuration report.

Some checks only mean something against an installed wheel; the wheel
builders say so through the environment:

* ``RANDFEAT_TEST_INSTALLED=1`` (tools/check_wheel.sh, cibuildwheel): randfeat
  must be imported from an installed distribution, not from a source tree.
* ``RANDFEAT_TEST_VENDORED_OPENMP=1`` (repaired wheels only): the OpenMP
  runtime randfeat calls must be the copy vendored inside the wheel.

Without them (an in-place build on PYTHONPATH) the installed-only checks are
skipped with that reason.
"""

import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

import randfeat
from randfeat._core.config import _VECTOR_PATH_MODULES
from randfeat._core.vector_isa import VECTOR_ISAS
from randfeat._ext._openmp import openmp_enabled
from _subprocess_env import subprocess_env

PKG_DIR = pathlib.Path(randfeat.__file__).resolve().parent
EXT_DIR = PKG_DIR / "_ext"  # the compiled layer
TESTS_DIR = pathlib.Path(__file__).resolve().parents[1]
EXPECT_INSTALLED = os.environ.get("RANDFEAT_TEST_INSTALLED") == "1"
EXPECT_VENDORED_OPENMP = os.environ.get("RANDFEAT_TEST_VENDORED_OPENMP") == "1"


def compiled_modules():
    """Names of the compiled extension modules in the imported randfeat package (all in ``_ext``)."""
    names = set()
    for path in EXT_DIR.iterdir():
        if any(path.name.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES):
            names.add(path.name.split(".")[0])
    return sorted(names)


COMPILED = compiled_modules()


def run_python(code, tmp_path, **env):
    """Run ``python -c code`` in a fresh interpreter from ``tmp_path``."""
    full_env = subprocess_env(**env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=300
    )


# --- stubs and typing ---------------------------------------------------------------


def test_compiled_modules_are_found():
    # Guards the parametrised tests below against silently checking nothing.
    assert "_openmp" in COMPILED, f"no compiled randfeat extension found in {PKG_DIR}"


@pytest.mark.parametrize("module", COMPILED)
def test_every_compiled_module_has_a_stub(module):
    stub = EXT_DIR / f"{module}.pyi"
    assert stub.is_file(), f"compiled module randfeat._ext.{module} has no type stub {stub.name}"


def test_py_typed_marker():
    assert (PKG_DIR / "py.typed").is_file()


def test_stubs_match_compiled_modules(tmp_path):
    # mypy's stubtest imports each compiled module and compares every name and
    # signature in its .pyi with the runtime object (missing functions, wrong
    # argument names or kinds, stubs for things that do not exist).
    allowlist = TESTS_DIR / "stubtest_allowlist.txt"
    modules = [f"randfeat._ext.{m}" for m in COMPILED]
    env = subprocess_env(MYPY_CACHE_DIR=str(tmp_path / "mypy_cache"))
    # The allowlist holds generic Cython artefacts; not every module has each.
    cmd = [sys.executable, "-m", "mypy.stubtest", *modules, "--allowlist", str(allowlist), "--ignore-unused-allowlist"]
    proc = subprocess.run(
        cmd,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"stubtest rejected the stubs:\n{proc.stdout}\n{proc.stderr}"


# --- installed metadata -------------------------------------------------------------


def installed_distribution():
    """The distribution that installed the randfeat being imported, or None."""
    try:
        dist = importlib.metadata.distribution("randfeat")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if str(f).replace("\\", "/") == "randfeat/__init__.py":
            if pathlib.Path(dist.locate_file(f)).resolve() == pathlib.Path(randfeat.__file__).resolve():
                return dist
    return None  # some other randfeat is installed; ours runs from a source tree


@pytest.fixture
def dist():
    d = installed_distribution()
    if d is None:
        if EXPECT_INSTALLED:
            pytest.fail(f"RANDFEAT_TEST_INSTALLED=1 but randfeat was imported from {randfeat.__file__}")
        pytest.skip("randfeat is imported from a source tree, not an installed distribution")
    return d


def test_imported_from_installation_not_source_tree():
    if not EXPECT_INSTALLED:
        pytest.skip("only meaningful when testing an installed wheel (RANDFEAT_TEST_INSTALLED=1)")
    source_root = TESTS_DIR.parent
    assert source_root not in PKG_DIR.parents, f"randfeat imported from the source tree: {PKG_DIR}"


def test_metadata_version_is_package_version(dist):
    assert dist.version == randfeat.__version__


def test_metadata_license_urls_classifiers(dist):
    meta = dist.metadata
    assert meta["License-Expression"] == "BSD-3-Clause AND CC-BY-4.0"  # code, and the shipped Adult data
    assert any(str(f).endswith("LICENSE") for f in dist.files), "LICENSE not shipped in the dist-info"
    assert meta["Requires-Python"] == ">=3.10"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Source", "Issues", "Documentation", "Changelog"} <= set(urls)
    classifiers = meta.get_all("Classifier")
    assert "Typing :: Typed" in classifiers
    for minor in (10, 11, 12, 13):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers


def test_installed_files_include_stubs_and_marker(dist):
    files = {str(f).replace("\\", "/") for f in dist.files}
    assert "randfeat/py.typed" in files
    for module in COMPILED:
        assert f"randfeat/_ext/{module}.pyi" in files


# --- show_config / runtime configuration -------------------------------------------


def test_config_reports_the_openmp_runtime_in_use():
    cfg = randfeat.get_config()
    if not openmp_enabled():
        pytest.skip("serial build: no OpenMP runtime to report")
    ours = [rt for rt in cfg["openmp_runtime"] if rt["used_by_randfeat"]]
    if not cfg["openmp_runtime"] or all(rt["used_by_randfeat"] is None for rt in cfg["openmp_runtime"]):
        pytest.skip("this platform's loader cannot tell which OpenMP runtime randfeat uses")
    assert len(ours) == 1, cfg["openmp_runtime"]
    assert ours[0]["num_threads"] >= 1
    if EXPECT_VENDORED_OPENMP:
        # auditwheel / delvewheel put it in randfeat.libs/, delocate in randfeat/.dylibs/.
        vendored_dirs = [PKG_DIR.parent / "randfeat.libs", PKG_DIR / ".dylibs"]
        path = pathlib.Path(ours[0]["filepath"]).resolve()
        assert any(d.resolve() in path.parents for d in vendored_dirs if d.exists()), (
            f"randfeat uses {path}, not an OpenMP runtime vendored in the wheel"
        )


@pytest.mark.parametrize("module", _VECTOR_PATH_MODULES)
def test_forcing_the_baseline_vector_path(module, tmp_path):
    # The portable code path must be reachable on any CPU: RANDFEAT_VECTOR_ISA
    # lowers the path each dispatching kernel module picks at import.
    if importlib.util.find_spec(f"randfeat._ext.{module}") is None:
        pytest.skip(f"randfeat._ext.{module} is not part of this build yet")
    code = "import json, randfeat; print(json.dumps(randfeat.get_config()['vector_paths']))"
    default = run_python(code, tmp_path, RANDFEAT_VECTOR_ISA="auto")
    assert default.returncode == 0, default.stderr
    assert json.loads(default.stdout)[module] in VECTOR_ISAS
    forced = run_python(code, tmp_path, RANDFEAT_VECTOR_ISA="baseline")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)[module] == "baseline"


def test_unknown_vector_isa_is_a_clear_error(tmp_path):
    proc = run_python("import randfeat", tmp_path, RANDFEAT_VECTOR_ISA="avx1024")
    assert proc.returncode != 0
    assert "RANDFEAT_VECTOR_ISA" in proc.stderr and "avx1024" in proc.stderr


def test_show_config_lists_every_section():
    import io

    buf = io.StringIO()
    randfeat.show_config(file=buf)
    text = buf.getvalue()
    for label in ("python:", "dependencies:", "OpenMP:", "threads:", "BLAS:", "vector path:"):
        assert label in text, f"show_config output lacks {label!r}:\n{text}"
    if openmp_enabled():
        assert "OpenMP runtime:" in text
