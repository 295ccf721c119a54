"""Sphinx configuration for randfeat's documentation.

The site documents the *installed* randfeat (build it first: ``pip install
".[docs]"``, or ``python setup.py build_ext --inplace`` and
``PYTHONPATH=src``).  Three things are generated at build time, so they are
always current and never committed:

* ``api.rst`` from ``randfeat.__all__`` (a new public estimator appears
  without editing the docs);
* the examples gallery (``auto_examples/``): sphinx-gallery *runs* every
  ``examples/plot_*.py`` and keeps its output and figures;
* the Performance page's tables (``_generated/perf/``) from the committed
  ``bench/results`` files (``_perfgen.py``): refreshing a bench result
  refreshes the page.

Build with warnings as errors::

    sphinx-build -W --keep-going -b html docs docs/_build/html

``SPHINX_GALLERY_PLOT=0`` in the environment skips running the examples
(a quick build of the text; the gallery pages then have no output).
"""

import os
import re
import sys

try:
    import randfeat
    import randfeat.datasets
except ImportError as exc:  # pragma: no cover - a message for the person building
    sys.exit(f"docs/conf.py: cannot import randfeat ({exc}); install it (pip install '.[docs]') first")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _perfgen  # noqa: E402  (docs/_perfgen.py: the Performance page's tables)

project = "randfeat"
author = "The randfeat developers"
copyright = "2026, The randfeat developers"
version = release = randfeat.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # MathJax 3 copied into _static/mathjax and used from there, not from a CDN:
    # the pages' math renders offline (a local build, a downloaded copy).
    "sphinx-mathjax-offline",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
templates_path = ["_templates"]
# _generated: pieces included by other pages (never pages of their own).
exclude_patterns = ["_build", "_generated", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip"]
myst_heading_anchors = 3

html_theme = "pydata_sphinx_theme"
html_title = f"randfeat {release}"
html_static_path = []
html_theme_options = {
    "github_url": "https://github.com/randfeat/randfeat",
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
}
html_sidebars = {"index": [], "quickstart": [], "install": [], "performance": [], "changelog": [], "bad_input": []}

autosummary_generate = True
autodoc_typehints = "none"  # the numpydoc sections carry the types
# numpydoc's own member tables would point at pages autosummary does not
# generate (inherited scikit-learn methods); the class template lists members.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# ------------------------------------------------------------------ gallery
# Each example runs in the build, on the installed randfeat; a failing
# example fails the build.  Their run times are written to
# sg_execution_times.rst (the docs CI stage prints them).
sphinx_gallery_conf = {
    "examples_dirs": os.path.join(ROOT, "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "plot_gallery": os.environ.get("SPHINX_GALLERY_PLOT", "True"),
    "abort_on_example_error": True,
    "doc_module": ("randfeat",),
    "backreferences_dir": "gen_modules/backreferences",
    "reference_url": {"randfeat": None},  # code in the examples links to the API pages
    "min_reported_time": 0,
    "remove_config_comments": True,
    "download_all_examples": False,
    "matplotlib_animations": False,
    "show_memory": False,
}

_PARAM_LINE = re.compile(r"^(\s*[\w*][\w*, ]* : )(.+)$")
_TRAILING_UNDERSCORE = re.compile(r"(?<![`\w])([A-Za-z]\w*)_(?![\w`])")


def escape_attribute_names_in_types(app, what, name, obj, options, lines):
    """Escape ``n_features_in_``-style names in numpydoc ``name : type`` lines.

    scikit-learn style writes shapes like ``ndarray of shape (n_samples,
    n_features_in_)``; in reStructuredText a word ending in ``_`` is a link
    reference, which fails the build.  Only the type part of parameter /
    attribute header lines is touched (never prose or examples).  Runs before
    numpydoc (lower priority number).
    """
    for i, line in enumerate(lines):
        m = _PARAM_LINE.match(line)
        if m:
            lines[i] = m.group(1) + _TRAILING_UNDERSCORE.sub(r"\1\\_", m.group(2))


def skip_foreign_members(app, what, name, obj, skip, options):
    """Skip class members written by other packages (scikit-learn's generated
    ``set_*_request`` metadata-routing methods): their docstrings refer to
    scikit-learn's own glossary and labels, which this build does not have."""
    module = getattr(obj, "__module__", None) or ""
    if what == "class" and module and not module.startswith("randfeat"):
        return True
    return None  # let autodoc decide


def setup(app):
    app.connect("autodoc-process-docstring", escape_attribute_names_in_types, priority=100)
    app.connect("autodoc-skip-member", skip_foreign_members)


def public_api():
    """(functions, classes): the documented names of randfeat.__all__, in order."""
    functions, classes = [], []
    for name in randfeat.__all__:
        obj = getattr(randfeat, name)
        if isinstance(obj, type):
            classes.append(name)
        elif callable(obj):
            functions.append(name)
        # plain data such as __version__ is described in the text, not here
    return functions, classes


def write_api_page():
    functions, classes = public_api()
    lines = [
        ".. This file is generated by docs/conf.py from randfeat.__all__; do not edit.",
        "",
        "API reference",
        "=============",
        "",
        "Everything importable from ``randfeat`` (``randfeat.__all__``).",
        "``randfeat.__version__`` is the version string.",
        "",
        ".. currentmodule:: randfeat",
        "",
    ]
    for title, names, template in (("Estimators", classes, "class.rst"), ("Functions", functions, None)):
        if not names:
            continue
        lines += [title, "-" * len(title), "", ".. autosummary::", "   :toctree: generated/"]
        if template:
            lines.append(f"   :template: {template}")
        lines.append("")
        lines += [f"   {name}" for name in names]
        lines.append("")
    # randfeat.datasets is a submodule (not re-exported): its loaders and
    # generators get their own section.
    lines += ["Data sets", "-" * len("Data sets"), "", ".. currentmodule:: randfeat.datasets", ""]
    lines += [".. autosummary::", "   :toctree: generated/", ""]
    lines += [f"   {name}" for name in randfeat.datasets.__all__]
    lines.append("")
    text = "\n".join(lines)
    path = os.path.join(HERE, "api.rst")
    # Rewrite only on change so incremental builds stay incremental.
    if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


write_api_page()
_perfgen.write_tables(os.path.join(ROOT, "bench", "results"), os.path.join(HERE, "_generated", "perf"))
