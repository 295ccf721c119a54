"""List the type of every OpenMP worksharing loop index in Cython's C output.

MSVC implements OpenMP 2.0, whose ``#pragma omp for`` requires a *signed*
integer loop index (error C3016 otherwise); gcc and clang accept unsigned
ones, so the problem shows only in the Windows wheel build.  Cython declares
the C loop index of a ``prange`` with the type of the Cython loop variable.

Usage: python tools/check_openmp_loops.py src/randfeat/_ext/*.c
(generate the .c files first: python setup.py build_ext --inplace).
Exits 1 if a loop index is unsigned (or of a type it cannot classify).
"""

import re
import sys

SIGNED = {"Py_ssize_t", "int", "long", "long long", "npy_intp", "ptrdiff_t", "int64_t", "int32_t", "intptr_t",
          "__pyx_t_5numpy_intp_t", "__pyx_t_5numpy_int64_t", "__pyx_t_5numpy_int32_t"}
UNSIGNED = re.compile(r"\b(unsigned|size_t|uint\d+_t|npy_uintp|uintptr_t|__pyx_t_5numpy_uint\w*)\b")


def loop_index_types(text):
    """Yield (line number, index variable, declared type) for each omp for loop."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if "#pragma omp for" not in line:
            continue
        for k in range(n + 1, min(n + 6, len(lines))):
            m = re.search(r"for \((\w+) = ", lines[k])
            if m:
                var = m.group(1)
                # nearest preceding declaration "TYPE var;" in this function
                decl = None
                for j in range(n, -1, -1):
                    d = re.match(r"\s*((?:const\s+)?[\w\s]+?)\s+" + re.escape(var) + r";", lines[j])
                    if d:
                        decl = d.group(1).strip()
                        break
                    if lines[j].startswith("static ") and "(" in lines[j]:  # function start
                        break
                yield k + 1, var, decl
                break


def main(paths):
    bad = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for lineno, var, decl in loop_index_types(text):
            ok = decl is not None and not UNSIGNED.search(decl) and (decl in SIGNED or decl.startswith("__pyx_t_"))
            status = "ok" if ok else "NOT SIGNED (MSVC OpenMP 2.0 rejects it)"
            print(f"{path}:{lineno}: index {var} : {decl}  {status}")
            bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
