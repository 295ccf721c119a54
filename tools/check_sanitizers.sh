#!/usr/bin/env bash
# Build randfeat's extensions with AddressSanitizer + UndefinedBehaviorSanitizer
# and run the kernel tests under them; fail on any report.
#
#   1. venv     a separate virtualenv with the build and test dependencies
#               (or RANDFEAT_SANITIZE_PYTHON's environment)
#   2. build    a copy of the source tree (tracked and untracked, not ignored
#               files: no stale extension modules), compiled in place with
#                 RANDFEAT_EXTRA_CFLAGS="-fsanitize=address,undefined
#                   -fno-sanitize-recover=undefined -fsanitize-recover=address
#                   -fno-omit-frame-pointer -O1 -g"
#                 LDFLAGS="-fsanitize=address,undefined"
#                 ASAN_OPTIONS=detect_leaks=0
#               The OpenMP probe of setup.py must still succeed (checked).
#   3. test     the tests marked `kernel` (pytest -m kernel), with gcc's
#               libasan and libubsan preloaded into the (uninstrumented)
#               Python.  Undefined behaviour aborts the process at once;
#               AddressSanitizer reports are written to log files and the
#               run continues (to report them all); any log fails the stage.
#
# Linux with gcc only (the runtimes are located with `gcc -print-file-name`).
#
# Usage: bash tools/check_sanitizers.sh
# Environment:
#   PYTHON                       interpreter for the venv, >= 3.11 (default: python3)
#   RANDFEAT_SANITIZE_PYTHON     use this environment's python instead of a new
#                                venv (the requirements are installed into it)
#   RANDFEAT_SANITIZE_DIR        work directory (default: a new temp dir)
#   RANDFEAT_SANITIZE_PYTEST_ARGS  what to test, relative to the copy's root
#                                (default: -m kernel tests)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="${RANDFEAT_SANITIZE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/randfeat-sanitize.XXXXXX")}"
mkdir -p "$WORK"
PIP_OPTS=(--quiet --disable-pip-version-check)
# The environment that builds and tests: a new venv, or one the caller owns
# (e.g. .ci/run's throwaway venv).
VPY="${RANDFEAT_SANITIZE_PYTHON:-$WORK/venv/bin/python}"

STAGES_TITLE="tools/check_sanitizers.sh stage times (work dir: $WORK)"
STAGES_OK="no sanitizer report"
# shellcheck source=tools/_stages.sh
source "$ROOT/tools/_stages.sh"

LIBASAN=$(gcc -print-file-name=libasan.so)
LIBUBSAN=$(gcc -print-file-name=libubsan.so)
for lib in "$LIBASAN" "$LIBUBSAN"; do
    if [ ! -e "$lib" ]; then
        echo "error: $lib not found (gcc's sanitizer runtimes are needed)" >&2
        exit 1
    fi
done

make_venv() {
    if [ -z "${RANDFEAT_SANITIZE_PYTHON:-}" ]; then
        rm -rf "$WORK/venv"
        "$PY" -m venv "$WORK/venv"
        "$VPY" -m pip install "${PIP_OPTS[@]}" --upgrade pip
    fi
    # pyproject.toml's build requirements, dependencies and test extra (pytest
    # collects every test module, so all of their imports must be there).
    local reqs
    mapfile -t reqs < <("$VPY" - "$ROOT/pyproject.toml" <<'PYEOF'
import sys, tomllib
meta = tomllib.load(open(sys.argv[1], "rb"))
for req in meta["build-system"]["requires"] + meta["project"]["dependencies"] + meta["project"]["optional-dependencies"]["test"]:
    print(req)
PYEOF
)
    "$VPY" -m pip install "${PIP_OPTS[@]}" "${reqs[@]}"
}

build() {
    rm -rf "$WORK/src"
    mkdir -p "$WORK/src"
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar cf -) | tar xf - -C "$WORK/src"
    local log="$WORK/build.log"
    (cd "$WORK/src" && env \
        RANDFEAT_EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize-recover=address -fno-omit-frame-pointer -O1 -g" \
        LDFLAGS="-fsanitize=address,undefined" \
        ASAN_OPTIONS=detect_leaks=0 \
        "$VPY" setup.py build_ext --inplace -j "$(nproc)" >"$log" 2>&1) || {
        tail -50 "$log"
        return 1
    }
    grep -q "randfeat: building with OpenMP" "$log" || {
        grep "randfeat:" "$log" || true
        echo "error: the OpenMP probe failed under the sanitizer flags (see $log)" >&2
        return 1
    }
    grep "randfeat: building with OpenMP" "$log"
    # Every extension really is instrumented.
    local so n=0
    for so in "$WORK"/src/src/randfeat/_ext/*.so; do
        grep -q __asan_init "$so" && grep -q __ubsan_handle "$so" || {
            echo "error: $so is not instrumented by both sanitizers" >&2
            return 1
        }
        n=$((n + 1))
    done
    echo "$n extension modules built with ASan + UBSan"
}

run_tests() {
    rm -rf "$WORK/reports"
    mkdir -p "$WORK/reports"
    local args=() a option=""
    for a in ${RANDFEAT_SANITIZE_PYTEST_ARGS:--m kernel tests}; do
        # options and their values as given, paths into the instrumented copy
        if [ -n "$option" ] || [[ "$a" == -* ]]; then
            args+=("$a")
            option=""
            case "$a" in -m|-k) option=1 ;; esac
        else
            args+=("$WORK/src/$a")
        fi
    done
    # The instrumented copy is the randfeat the tests import (not an installed
    # one).  Its extensions need the sanitizer runtimes loaded first, here too.
    (cd "$WORK/src" && LD_PRELOAD="$LIBASAN $LIBUBSAN" ASAN_OPTIONS=detect_leaks=0 \
        PYTHONPATH="$WORK/src/src" "$VPY" -c "
import randfeat, sys
sys.exit(0 if randfeat.__file__.startswith('$WORK/src/src/') else f'tests would import {randfeat.__file__}')")
    local rc=0
    (cd "$WORK/src" && env \
        LD_PRELOAD="$LIBASAN $LIBUBSAN" \
        ASAN_OPTIONS="detect_leaks=0:halt_on_error=0:log_path=$WORK/reports/asan:abort_on_error=0" \
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$WORK/reports/ubsan" \
        PYTHONPATH="$WORK/src/src" PYTHONDONTWRITEBYTECODE=1 \
        "$VPY" -m pytest -p no:cacheprovider -q "${args[@]}") || rc=$?
    shopt -s nullglob
    local reports=("$WORK"/reports/*)
    shopt -u nullglob
    if [ "${#reports[@]}" -gt 0 ]; then
        echo "== ${#reports[@]} sanitizer report file(s):"
        local f
        for f in "${reports[@]}"; do
            echo "--- $f"
            head -60 "$f"
        done
        return 1
    fi
    if [ "$rc" -ne 0 ]; then
        echo "error: the tests failed under the sanitizers (exit $rc)" >&2
        return "$rc"
    fi
}

echo "== randfeat check_sanitizers: source $ROOT, work dir $WORK"
stage venv make_venv
stage build build
stage test run_tests
CURRENT_STAGE=done
