"""Every public name has a numpydoc docstring with the essential sections.

"Public" is ``randfeat.__all__`` (so new estimators are covered as soon as they
are exported) plus the public methods and properties that randfeat's own
classes define (not those inherited from scikit-learn, whose docstrings are
scikit-learn's business).  numpydoc's validator checks the essentials only:

* GL08  the object has a docstring
* SS01  it has a one-line summary
* PR01  every parameter is documented
* PR02  no documented parameter is unknown
* RT01  a function that returns something has a Returns section
* YD01  a generator has a Yields section
"""

import inspect

import pytest
from numpydoc.validate import validate

import randfeat

ESSENTIAL_CHECKS = {"GL08", "SS01", "PR01", "PR02", "RT01", "YD01"}


def essential_errors(import_path):
    """numpydoc's essential complaints about the object at ``import_path``."""
    import enum

    report = validate(import_path)
    checks = set(ESSENTIAL_CHECKS)
    obj = randfeat if import_path.startswith("randfeat.") else None
    for part in import_path.split(".")[1:] if obj is not None else ():
        obj = getattr(obj, part)
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        checks.discard("PR01")  # an Enum's "parameters" are the enum module's functional API, not ours
    return [f"{code}: {msg}" for code, msg in report["errors"] if code in checks]


def public_objects():
    """Import paths of every public randfeat object whose docstring we own."""
    paths = []
    for name in randfeat.__all__:
        obj = getattr(randfeat, name)
        if isinstance(obj, str):  # __version__
            continue
        paths.append(f"randfeat.{name}")
        if isinstance(obj, type):
            seen = set()
            for klass in obj.__mro__:
                if not klass.__module__.startswith("randfeat"):
                    continue
                for attr, member in vars(klass).items():
                    if attr.startswith("_") or attr in seen:
                        continue
                    if inspect.isfunction(member) or isinstance(member, property):
                        seen.add(attr)
                        paths.append(f"randfeat.{name}.{attr}")
    return paths


PUBLIC = public_objects()


def test_public_objects_are_found():
    # Guards the parametrised test against checking nothing.
    assert "randfeat.kernel_matrix" in PUBLIC and "randfeat.show_config" in PUBLIC


@pytest.mark.parametrize("import_path", PUBLIC)
def test_numpydoc_essentials(import_path):
    errors = essential_errors(import_path)
    assert not errors, f"{import_path} docstring:\n  " + "\n  ".join(errors)


def _undocumented_parameter(x, y):
    """Add two numbers.

    Parameters
    ----------
    x : float
        First.

    Returns
    -------
    float
        The sum.
    """
    return x + y


def _no_returns_section(x):
    """Double a number.

    Parameters
    ----------
    x : float
        The number.
    """
    return 2 * x


def _no_docstring(x):
    return x


@pytest.mark.parametrize(
    "func, code",
    [(_undocumented_parameter, "PR01"), (_no_returns_section, "RT01"), (_no_docstring, "GL08")],
)
def test_the_check_catches_bad_docstrings(func, code):
    # The check above must be able to fail: it flags known-bad docstrings.
    errors = essential_errors(f"{__name__}.{func.__name__}")
    assert any(e.startswith(code) for e in errors), errors
