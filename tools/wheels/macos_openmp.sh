#!/usr/bin/env bash
# Point a macOS wheel build at a pinned libomp (run by .github/workflows/wheels.yml
# before cibuildwheel, on the runner whose architecture the wheels are for).
#
# Apple clang has no OpenMP runtime.  The workflow installs conda-forge's
# llvm-openmp at a pinned version into OPENMP_PREFIX (argument 1); this script
#   * picks MACOSX_DEPLOYMENT_TARGET for the architecture: 10.13 on x86_64
#     (NumPy 2's floor), 12.0 on arm64 (SciPy's floor for its arm64 wheels);
#   * checks that this libomp.dylib does not need a newer macOS than that
#     (its LC_BUILD_VERSION / LC_VERSION_MIN_MACOSX "minos"), because
#     delocate-wheel copies it into every wheel (randfeat/.dylibs/);
#   * exports OPENMP_PREFIX and MACOSX_DEPLOYMENT_TARGET to later steps
#     ($GITHUB_ENV); pyproject.toml's [tool.cibuildwheel.macos] turns the
#     prefix into CFLAGS/LDFLAGS, and setup.py adds -Xpreprocessor -fopenmp -lomp.
set -euo pipefail

PREFIX="${1:?usage: macos_openmp.sh OPENMP_PREFIX}"
case "$(uname -m)" in
    arm64) TARGET=12.0 ;;
    x86_64) TARGET=10.13 ;;
    *) echo "unsupported macOS architecture $(uname -m)" >&2; exit 1 ;;
esac

LIB="$PREFIX/lib/libomp.dylib"
test -f "$PREFIX/include/omp.h" || { echo "no omp.h under $PREFIX/include" >&2; exit 1; }
test -f "$LIB" || { echo "no $LIB" >&2; exit 1; }

# minos of the dylib: LC_BUILD_VERSION (newer toolchains) or LC_VERSION_MIN_MACOSX.
MINOS=$(otool -l "$LIB" | awk '
    /LC_BUILD_VERSION/ { b = 1 } b && $1 == "minos" { print $2; exit }
    /LC_VERSION_MIN_MACOSX/ { v = 1 } v && $1 == "version" { print $2; exit }')
echo "libomp: $LIB (minos $MINOS), MACOSX_DEPLOYMENT_TARGET=$TARGET"
if [ -z "$MINOS" ]; then
    echo "cannot read the minimum macOS version of $LIB" >&2
    exit 1
fi
# version compare: MINOS <= TARGET
if [ "$(printf '%s\n%s\n' "$MINOS" "$TARGET" | sort -t. -k1,1n -k2,2n -k3,3n | head -n1)" != "$MINOS" ]; then
    echo "libomp needs macOS $MINOS, newer than the wheels' target $TARGET: pin an older llvm-openmp" >&2
    exit 1
fi

{
    echo "OPENMP_PREFIX=$PREFIX"
    echo "MACOSX_DEPLOYMENT_TARGET=$TARGET"
} >> "${GITHUB_ENV:-/dev/stdout}"
