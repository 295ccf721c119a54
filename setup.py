"""Build randfeat's Cython extensions, with OpenMP when the compiler has it.

Every ``src/randfeat/_ext/*.pyx`` becomes the extension ``randfeat._ext.<name>``;
C helpers live as headers in ``src/randfeat/_ext/include`` so no extension needs
an entry here.  A module whose .pyx starts with ``# distutils: language = c++``
(``_sparse_fast``: C++ templates) is compiled as C++17.  OpenMP is detected by compiling, linking and running a tiny
program (the approach of scikit-learn and POT): if that fails the build goes
on serial and ``randfeat.show_config()`` says so.

Environment knobs (for packagers and for testing, not for users):

* ``RANDFEAT_DISABLE_OPENMP=1``: build serial even where OpenMP works.
* ``RANDFEAT_EXTRA_CFLAGS``: extra compiler flags, split on whitespace.
* ``RANDFEAT_BUILD_JOBS``: extensions compiled in parallel (default: CPU count).
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
EXT_DIR = os.path.join("src", "randfeat", "_ext")
INCLUDE_DIR = os.path.join(EXT_DIR, "include")

OPENMP_TEST_PROGRAM = textwrap.dedent(
    """
    #include <omp.h>
    #include <stdio.h>
    int main(void) {
        int n = 0;
        #pragma omp parallel reduction(+:n)
        n += 1;
        printf("%d\\n", n);
        return n == omp_get_max_threads() ? 0 : 1;
    }
    """
)


def openmp_flag_candidates(compiler_type):
    """(compile_args, link_args) pairs that may enable OpenMP, most likely first."""
    if compiler_type == "msvc":
        # OpenMP 2.0 runtime vcomp140.dll (vendored into Windows wheels by
        # delvewheel).  2.0 wants signed loop indices in every prange.
        return [(["/openmp"], [])]
    candidates = [(["-fopenmp"], ["-fopenmp"])]
    if sys.platform == "darwin":
        # Apple clang has no -fopenmp driver flag: it needs the preprocessor
        # flag and an explicit libomp (the pinned llvm-openmp of the wheel
        # build, or Homebrew's: CFLAGS=-I<prefix>/include LDFLAGS=-L<prefix>/lib).
        # A gcc or llvm clang on macOS takes plain -fopenmp, tried second.
        candidates.insert(0, (["-Xpreprocessor", "-fopenmp"], ["-lomp"]))
    return candidates


def _try_openmp(compiler, compile_args, link_args):
    """Compile, link and run a tiny OpenMP program; raise if any step fails."""
    # customize_compiler puts CFLAGS/CPPFLAGS in the compile command and
    # LDFLAGS in the shared-library link only; an executable link needs them
    # passed by hand (e.g. -L<libomp prefix> on macOS).
    extra_link = os.environ.get("LDFLAGS", "").split()
    tmp = tempfile.mkdtemp(prefix="randfeat-omp-")
    try:
        src = os.path.join(tmp, "test_openmp.c")
        with open(src, "w") as f:
            f.write(OPENMP_TEST_PROGRAM)
        objects = compiler.compile([src], output_dir=tmp, extra_postargs=compile_args)
        exe = os.path.join(tmp, "test_openmp")
        compiler.link_executable(objects, exe, extra_postargs=link_args + extra_link)
        if compiler.compiler_type == "msvc":
            exe += ".exe"
        subprocess.run([exe], check=True, capture_output=True, timeout=60)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def detect_openmp(compiler):
    """Return the (compile_args, link_args) that work here, or None: build serial."""
    errors = []
    for compile_args, link_args in openmp_flag_candidates(compiler.compiler_type):
        try:
            _try_openmp(compiler, compile_args, link_args)
            print(f"randfeat: building with OpenMP ({' '.join(compile_args)})")
            return compile_args, link_args
        except Exception as exc:  # any failure means: try the next, else serial
            errors.append(f"{' '.join(compile_args)}: {exc!r}")
    print("randfeat: no working OpenMP flags (" + "; ".join(errors) + "); building WITHOUT OpenMP")
    return None


class BuildExtWithOpenMP(build_ext):
    """build_ext that cythonizes, then adds optimisation and (if it works) OpenMP flags."""

    def finalize_options(self):
        # Cythonize here rather than at setup() time, so `sdist` and
        # `egg_info` neither run Cython nor write .c files into the tree.
        # Before the base class, which decorates the final Extension objects.
        from Cython.Build import cythonize

        if self.parallel is None:
            # Compile the extensions in parallel by default (pip and build pass
            # no -j): the fused-type kernel modules take most of a build.
            self.parallel = os.environ.get("RANDFEAT_BUILD_JOBS") or os.cpu_count() or 1
        try:
            nthreads = int(self.parallel)  # -j N, still a string here
        except (TypeError, ValueError):
            nthreads = 0
        self.distribution.ext_modules = cythonize(
            self.distribution.ext_modules, compiler_directives=CYTHON_DIRECTIVES, nthreads=nthreads
        )
        super().finalize_options()

    def build_extensions(self):
        ctype = self.compiler.compiler_type
        flags = None
        if os.environ.get("RANDFEAT_DISABLE_OPENMP", "0") in ("", "0"):
            flags = detect_openmp(self.compiler)
        else:
            print("randfeat: RANDFEAT_DISABLE_OPENMP is set; building WITHOUT OpenMP")
        use_openmp = flags is not None
        omp_compile, omp_link = flags if use_openmp else ([], [])
        if ctype == "msvc":
            # MSVC: /O2 only; it has no -fno-math-errno equivalent that is safe
            # to pass, and its default floating-point model is /fp:precise.
            opt = ["/O2"]
        else:
            # Portable optimisation: no -march=native (wheels must run on any
            # x86-64); wider vector code is reached by runtime dispatch in C.
            opt = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-Wno-unused-function"]
        opt += os.environ.get("RANDFEAT_EXTRA_CFLAGS", "").split()
        for ext in self.extensions:
            # C++ modules (`# distutils: language = c++` in the .pyx) use C++14
            # generic lambdas; Apple clang still defaults to C++98.  MSVC's
            # default is C++14.
            std = ["-std=c++17"] if ext.language == "c++" and ctype != "msvc" else []
            ext.extra_compile_args = opt + std + omp_compile + ext.extra_compile_args
            ext.extra_link_args = omp_link + ext.extra_link_args
            ext.define_macros.append(("RANDFEAT_BUILT_WITH_OPENMP", "1" if use_openmp else "0"))
        super().build_extensions()


CYTHON_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
    "nonecheck": False,
    "embedsignature": True,
}


def extensions():
    """One Extension per .pyx (Cython sources; build_ext cythonizes them)."""
    libraries = [] if sys.platform == "win32" else ["m"]  # libm for vector math
    exts = []
    for pyx in sorted(glob.glob(os.path.join(EXT_DIR, "*.pyx"))):
        name = "randfeat._ext." + os.path.splitext(os.path.basename(pyx))[0]
        exts.append(
            Extension(
                name,
                [pyx],
                include_dirs=[INCLUDE_DIR, numpy.get_include()],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
                libraries=libraries,
            )
        )
    return exts


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExtWithOpenMP})
