"""The public API is annotated (PEP 484), and a type checker accepts it as a user would use it.

* Every public function, method and property (``randfeat.__all__``, the
  public functions of ``randfeat.datasets``, and the public members that
  randfeat's own classes define, as in ``test_docstrings.public_objects``)
  annotates every parameter and its return.
* mypy, strict, checks ``tests/package/typing/public_api_usage.py``: fit and predict
  with NumPy arrays, ``features=`` a randfeat map or a scikit-learn pipeline,
  a user's FeatureMap on the public protocol, RidgeCV's attributes.  Imports
  are followed silently: only the consumer's errors count (randfeat's own
  bodies are not checked).  A deliberately wrong call must be reported, so
  that the check can fail.
"""

import enum
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from sklearn.utils._available_if import _AvailableIfDescriptor

import randfeat
from _subprocess_env import subprocess_env

TYPING_DIR = Path(__file__).resolve().parent / "typing"
SKIPPED = {"self", "cls"}
#: The hooks a user's FeatureMap implements: part of the public protocol (checked where the protocol declares them).
PROTOCOL_HOOKS = {"_draw", "_transform_rows", "_draw_path", "_auto_gamma", "_fit_rows"}


def _members(cls, prefix):
    """(path, function) of the public methods, properties and __init__ that randfeat's classes define for ``cls``."""
    seen = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("randfeat"):
            continue
        for attr, member in vars(klass).items():
            hook = klass is randfeat.FeatureMap and attr in PROTOCOL_HOOKS
            if attr in seen or (attr.startswith("_") and attr != "__init__" and not hook):
                continue
            if isinstance(member, property):
                func = member.fget
            elif isinstance(member, _AvailableIfDescriptor):  # partial_fit
                func = member.fn
            elif inspect.isfunction(member):
                func = member
            else:
                continue
            seen.add(attr)
            yield f"{prefix}.{attr}", func


def public_callables():
    """(import path, function) of every public function, method and property getter of randfeat."""
    out = []
    for name in randfeat.__all__:
        obj = getattr(randfeat, name)
        path = f"randfeat.{name}"
        if isinstance(obj, type):
            if issubclass(obj, enum.Enum):
                continue  # members, no signatures of ours
            out.extend(_members(obj, path))
        elif inspect.ismodule(obj):
            out.extend((f"{path}.{n}", getattr(obj, n)) for n in obj.__all__)
        elif callable(obj):
            out.append((path, obj))
    return out


PUBLIC = dict(public_callables())


def missing_annotations(func):
    """Names of the parameters (and "return") of ``func`` that have no annotation."""
    sig = inspect.signature(func)  # follows __wrapped__ (fit_context, validate_params, set_output)
    missing = [p.name for p in sig.parameters.values()
               if p.name not in SKIPPED and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_public_callables_are_found():
    # Guards the parametrised test against checking nothing.
    for path in ("randfeat.Ridge.fit", "randfeat.Ridge.partial_fit", "randfeat.RidgeCV.__init__",
                 "randfeat.FeatureMap._draw", "randfeat.FeatureMap.transform", "randfeat.MapState.verify",
                 "randfeat.InputSummary.training_rows", "randfeat.kernel_matrix", "randfeat.datasets.load_adult",
                 "randfeat.RandomFourierFeatures.random_weights_"):
        assert path in PUBLIC, path


@pytest.mark.parametrize("path", sorted(PUBLIC))
def test_public_signature_is_annotated(path):
    missing = missing_annotations(PUBLIC[path])
    assert not missing, f"{path} lacks annotations for: {', '.join(missing)}"


def test_the_walk_catches_a_missing_annotation():
    def half_typed(x: int, y) -> int:
        return x

    assert missing_annotations(half_typed) == ["y"]


MYPY_OPTIONS = ["--strict", "--follow-imports=silent", "--no-incremental", "--show-error-codes",
                "--no-error-summary", "--hide-error-context"]


def run_mypy(path, tmp_path):
    env = subprocess_env(MYPY_CACHE_DIR=str(tmp_path / "mypy_cache"))
    return subprocess.run([sys.executable, "-m", "mypy", *MYPY_OPTIONS, str(path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def test_mypy_accepts_the_typed_consumer(tmp_path):
    pytest.importorskip("mypy")
    proc = run_mypy(TYPING_DIR / "public_api_usage.py", tmp_path)
    assert proc.returncode == 0, f"mypy rejected tests/package/typing/public_api_usage.py:\n{proc.stdout}\n{proc.stderr}"


def test_mypy_reports_a_wrong_call(tmp_path):
    # The check above must be able to fail: a str where an int is annotated, a
    # keyword the estimator does not have, and a map's width used as a str.
    pytest.importorskip("mypy")
    bad = tmp_path / "wrong_usage.py"
    bad.write_text("from randfeat import RandomFourierFeatures, Ridge\n"
                   "rff = RandomFourierFeatures(n_components='100')\n"
                   "Ridge(alpha=1.0, features=rff, n_iter=5)\n"
                   "width: str = rff.n_features_out_\n")
    proc = run_mypy(bad, tmp_path)
    assert proc.returncode != 0, f"mypy accepted a wrong call:\n{proc.stdout}"
    out = proc.stdout
    assert "wrong_usage.py:2: error" in out and '"n_components"' in out, out
    assert "wrong_usage.py:3: error" in out and "n_iter" in out, out
    assert "wrong_usage.py:4: error" in out, out
