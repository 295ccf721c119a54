"""Check a repaired Linux wheel of randfeat, independently of auditwheel's verdict.

Usage: python tools/inspect_wheel.py dist/randfeat-...-manylinux_....whl

Run with auditwheel installed (it provides the manylinux policy data and
pyelftools).  Checks, exiting non-zero on the first failed one:

* the platform tag is a manylinux tag;
* every ELF file in the wheel needs (DT_NEEDED) only libraries that the
  manylinux policy of that tag allows, or libraries vendored in
  ``randfeat.libs/``;
* libgomp is vendored (the extensions are built with OpenMP) and no extension
  still asks for the system's ``libgomp.so.1``;
* the wheel ships ``py.typed``, a ``.pyi`` stub for every compiled module and
  the LICENSE, and no C sources.
"""

import io
import json
import pathlib
import re
import sys
import zipfile

import auditwheel
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection


def fail(msg):
    sys.exit(f"inspect_wheel: FAIL: {msg}")


def manylinux_policies():
    path = pathlib.Path(auditwheel.__file__).parent / "policy" / "manylinux-policy.json"
    return {p["name"]: p for p in json.loads(path.read_text())}


def needed_libraries(data):
    """(DT_NEEDED names, newest GLIBC_x.y symbol version required or None)."""
    elf = ELFFile(io.BytesIO(data))
    needed, glibc = [], []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            needed += [tag.needed for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]
        if isinstance(section, GNUVerNeedSection):
            for _, auxes in section.iter_versions():
                for aux in auxes:
                    m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", aux.name)
                    if m:
                        glibc.append((int(m.group(1)), int(m.group(2))))
    return needed, max(glibc, default=None)


def main(wheel_path):
    wheel = pathlib.Path(wheel_path)
    # e.g. randfeat-0.1.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
    platform_tags = wheel.stem.split("-")[-1].split(".")
    tags = [re.fullmatch(r"(manylinux_\d+_\d+)_(\w+)", t) for t in platform_tags]
    tags = [m for m in tags if m]
    if not tags:
        fail(f"{wheel.name}: no manylinux platform tag")
    policies = manylinux_policies()
    # The lowest tag is the strictest promise the wheel makes.
    policy_name, arch = min(((m.group(1), m.group(2)) for m in tags), key=lambda t: tuple(map(int, t[0].split("_")[1:])))
    allowed = set(policies[policy_name]["lib_whitelist"])
    print(f"inspect_wheel: {wheel.name}: tag {policy_name}_{arch}")

    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        vendored = {pathlib.PurePosixPath(n).name for n in names if n.startswith("randfeat.libs/") and not n.endswith("/")}
        extensions = []
        glibc_floor = {}  # "own" (randfeat's extensions) / "vendored" -> newest GLIBC needed
        for name in names:
            data = zf.read(name)
            if not data.startswith(b"\x7fELF"):
                continue
            needed, glibc = needed_libraries(data)
            bad = [lib for lib in needed if lib not in allowed and lib not in vendored]
            glibc_text = f"; glibc >= {glibc[0]}.{glibc[1]}" if glibc else ""
            print(f"  {name}: needs {', '.join(needed) or 'nothing'}{glibc_text}")
            if bad:
                fail(f"{name} needs {bad}: neither allowed by {policy_name} nor vendored")
            if name.startswith("randfeat/"):
                extensions.append((name, needed))
            kind = "own" if name.startswith("randfeat/") else "vendored"
            if glibc:
                glibc_floor[kind] = max(glibc_floor.get(kind, glibc), glibc)

    if not extensions:
        fail("no compiled extension in the wheel")
    gomp = sorted(v for v in vendored if v.startswith("libgomp"))
    if not gomp:
        fail("libgomp is not vendored in randfeat.libs/")
    for name, needed in extensions:
        if "libgomp.so.1" in needed:
            fail(f"{name} still needs the system libgomp.so.1")
    print(f"  vendored: {', '.join(sorted(vendored))}")
    for kind, (major, minor) in sorted(glibc_floor.items()):
        print(f"  {kind} libraries need glibc >= {major}.{minor}")

    # Each compiled module's stub sits beside it (randfeat/_ext/<name>.pyi).
    modules = {str(pathlib.PurePosixPath(n).parent / pathlib.PurePosixPath(n).name.split(".")[0]) for n, _ in extensions}
    expected = {"randfeat/py.typed"} | {f"{m}.pyi" for m in modules}
    missing = sorted(expected - set(names))
    if missing:
        fail(f"missing from the wheel: {missing}")
    if not any(re.fullmatch(r"randfeat-[^/]+\.dist-info/licenses/LICENSE", n) for n in names):
        fail("LICENSE is not in the wheel's dist-info/licenses/")
    sources = [n for n in names if n.endswith((".c", ".cpp", ".pyx"))]
    if sources:
        fail(f"C/Cython sources in the wheel: {sources}")
    print(f"inspect_wheel: OK ({len(modules)} compiled modules, each with a .pyi; py.typed; LICENSE; libgomp vendored)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
