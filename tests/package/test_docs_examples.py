"""The documentation's sources, checked without building them.

The docs build itself (Sphinx with warnings as errors, the examples run by
sphinx-gallery) is tools/check_wheel.sh's docs stage; these tests keep the
cheap promises in the test suite: README stays a front page with its two
commands, every example imports randfeat only through public names and is
a gallery script, and the Performance page's generator renders every
committed bench result.  They skip when the tests run from an installed
copy without the repository around them.
"""

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))

pytestmark = pytest.mark.skipif(not (ROOT / "docs" / "conf.py").exists(), reason="no docs/ next to tests/")


def test_readme_is_a_front_page_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    # The exact lines: .ci/run runs the second one.
    assert 'pip install ".[bench,test]" && python bench/table1.py --quick' in text
    assert "\npython -m pytest\n" in text  # the second: tests what the first installed, no rebuild
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'python -m pip install --quiet ".[bench,test]"' in ci and "\npython -m pytest\n" in ci


def _randfeat_imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names if a.name.split(".")[0] == "randfeat")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "randfeat":
            yield from ((node.module, a.name) for a in node.names)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_a_gallery_script_using_public_names_only(path):
    import randfeat
    import randfeat.datasets

    tree = ast.parse(path.read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree)
    assert doc and doc.splitlines()[1].startswith("==="), "a sphinx-gallery title (text, then ===) comes first"
    found = list(_randfeat_imports(path))
    assert found, "an example shows randfeat"
    public = {"randfeat": set(randfeat.__all__), "randfeat.datasets": set(randfeat.datasets.__all__)}
    for module, name in found:
        assert module in public, f"{path.name} imports the private module {module}"
        assert name is None or name in public[module], f"{path.name} imports {module}.{name}, not public"


def test_the_gallery_has_the_examples_the_docs_promise():
    names = {p.stem for p in EXAMPLES}
    assert len(names) >= 6
    assert {"plot_kernel_approximation", "plot_adult_table1", "plot_choosing_gamma_alpha",
            "plot_binning_vs_fourier", "plot_partial_fit_stream", "plot_dask_local_cluster",
            "plot_predictive_std", "plot_calibrated_probabilities"} <= names
    assert (ROOT / "examples" / "GALLERY_HEADER.rst").exists()


def test_performance_tables_are_generated_from_every_bench_result(tmp_path):
    spec = importlib.util.spec_from_file_location("_perfgen", ROOT / "docs" / "_perfgen.py")
    perfgen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(perfgen)
    results = ROOT / "bench" / "results"
    written = perfgen.write_tables(str(results), str(tmp_path))
    expected = {str(p.relative_to(results)).replace("/", "__") for p in results.rglob("*.md")}
    assert expected <= set(written)
    if (results / "scale_out.json").exists():
        assert "scale_out.md" in written
        assert "| LocalCluster 2 worker(s) |" in (tmp_path / "scale_out.md").read_text(encoding="utf-8")
    for name in written:
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert not any(line.startswith("#") for line in text.splitlines()), name  # headings flattened
    # Every table the Performance page includes exists: a renamed result must not vanish silently.
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    included = [line.split("_generated/perf/")[1].strip() for line in page.splitlines() if "_generated/perf/" in line]
    assert included and set(included) <= set(written), set(included) - set(written)
    # A stale table (its result deleted) is removed at the next build.
    (tmp_path / "gone.md").write_text("old")
    perfgen.write_tables(str(results), str(tmp_path))
    assert not (tmp_path / "gone.md").exists()
