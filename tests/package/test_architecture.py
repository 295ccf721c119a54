"""The import contract of src/randfeat: layers that import only downwards, no cycles, Dask in the backends only.

Read from the source with ``ast`` (imports inside functions count: a lazy
import is still a dependency), so these hold for every code path, not only
the ones a test happens to run.  ``python ../shared/tools/layering.py
--strict`` (run from the project root) checks the cycles, the Dask rule and
the module sizes the same way.
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "randfeat"

#: The layers, lowest first: a module may import its own layer and the ones before it.
LAYERS = ["_version", "_ext", "_core", "_linalg", "_maps", "_solvers", "_backends", "_estimators"]
#: What stands above every layer: the public package, the data loaders, and the
#: thin modules where pickles written by randfeat 0.1.0 point.
TOP = {"randfeat", "datasets", "_adult", "_fourier", "_binning", "_ridge", "_ridge_cv", "_cholesky", "_stats"}
MAX_LINES = 800
#: getattr/hasattr calls that do not probe a map, an estimator or an operator
#: (those declare what they can do: ``has(...)``, ``output_kind``, ``kind``).
ALLOWED_PROBES = {
    ("_core/threads.py", "os"): "whether the platform can fork (os.register_at_fork)",
    ("_core/validation.py", "arr"): "the dtype of a user's index array, for the error message",
    ("_backends/tree.py", "get_scheduler()"): "which Dask Client will run a graph",
}


def _modules():
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(module, is_package, node):
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module):
    """Every randfeat module ``module`` imports (module level and inside functions)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path.name == "__init__.py", node)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("randfeat") and name != module:
                found.add(name)
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def _layer(module):
    """The layer's index, or len(LAYERS) for the top."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in TOP:
        return len(LAYERS)
    return LAYERS.index(parts[1])


def test_every_module_has_a_layer():
    for module in MODULES:
        parts = module.split(".")
        assert len(parts) == 1 or parts[1] in TOP or parts[1] in LAYERS, f"{module} is in no declared layer"


def test_no_import_cycle():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_downwards(module):
    upward = sorted(m for m in GRAPH[module] if _layer(m) > _layer(module))
    assert not upward, f"{module} (layer {_layer(module)}) imports higher layers: {upward}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_dask_only_in_the_backends(module):
    if module.split(".")[1:2] == ["_backends"]:
        return
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not any(a.name.split(".")[0] in ("dask", "distributed") for a in node.names), module
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            assert (node.module or "").split(".")[0] not in ("dask", "distributed"), module
        elif isinstance(node, ast.Name):
            assert "dask" not in node.id.lower(), f"{module} names {node.id}"
        elif isinstance(node, ast.Attribute):
            assert "dask" not in node.attr.lower(), f"{module} names {node.attr}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_over_500_lines(module):
    n = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{module} has {n} lines"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[1:2] == ["_estimators"]))
def test_estimator_modules_stay_small(module):
    n = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert n < 400, f"{module} has {n} lines: an estimator holds parameters and one call into the pipeline"


def test_no_attribute_probing():
    found = set()
    for module, path in MODULES.items():
        rel = str(path.relative_to(SRC))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr",
                                                                                                   "hasattr"):
                found.add((rel, ast.unparse(node.args[0])))
    unexplained = sorted(found - set(ALLOWED_PROBES))
    assert not unexplained, f"getattr/hasattr probes (declare a capability instead): {unexplained}"


def test_the_dask_backend_is_imported_only_for_dask_input():
    top_level = set()
    for node in ast.parse(MODULES["randfeat._backends"].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            top_level.add(_resolve("randfeat._backends", True, node))
    assert "randfeat._backends.dask" not in top_level, "the Dask backend must be imported only when Dask input is seen"


def test_design_md_maps_every_module():
    design = SRC.parent.parent / "DESIGN.md"
    if not design.exists():
        pytest.skip("no DESIGN.md next to src/")
    text = design.read_text(encoding="utf-8")
    block = text.split("<!-- package map: begin -->")[1].split("<!-- package map: end -->")[0]
    listed, folder = set(), ""
    for line in block.splitlines():
        words = line.split()
        if not words or line.startswith("```"):
            continue
        indent = len(line) - len(line.lstrip())
        if words[0].endswith("/") and indent <= 2:
            folder = "" if words[0] == "src/randfeat/" else words[0]
            continue
        # A line names files (ending .py/.pyx) until its description starts.
        for word in words:
            if not word.endswith((".py", ".pyx", ".py:")):
                break
            listed.add(folder + word.rstrip(":"))
    sources = {str(p.relative_to(SRC)) for p in [*SRC.rglob("*.py"), *SRC.rglob("*.pyx")]}
    # A subpackage's __init__ needs a line only where it holds code (_backends' for_input).
    sources -= {s for s in sources if s.endswith("/__init__.py") and s not in listed}
    missing = sorted(sources - listed)
    assert not missing, f"DESIGN.md's package map does not list {missing}"
    stale = sorted(listed - sources)
    assert not stale, f"DESIGN.md's package map lists modules that do not exist: {stale}"
