"""Issue 33 part 2, rows 1-3 and 14 (pickle): fitted states checked whole, sparse parts and vocabularies included.

Every fitted state (``MapState``) is checked at construction and when a
pickled map is loaded; every integer array in it has declared bounds.  The
tampered-pickle test alters every integer array (and every integer field)
of every map's state and loads and uses the result in a child process, so
that a segfault fails the test instead of killing pytest.  Each test failed
on 955cd76 (a segfault, a silent load, or an in-place write that succeeded).
"""

import dataclasses
import json
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import randfeat
from randfeat import AdditiveChi2Sampler, Nystroem, RandomBinningFeatures
from randfeat._maps.contract import FeatureMap, MapState

from _subprocess_env import subprocess_env

# ---------------------------------------------------------------- the child
#: The maps fitted and tampered with, by name: (constructor, input kind).  Every
#: public FeatureMap must appear (test_every_public_map_is_tampered_with).
CASES = {
    "rbf_sampler": ("RBFSampler(n_components=16, random_state=0)", "dense"),
    "skewed_chi2": ("SkewedChi2Sampler(n_components=16, random_state=0)", "positive"),
    "additive_chi2": ("AdditiveChi2Sampler()", "positive"),
    "additive_chi2_csr": ("AdditiveChi2Sampler()", "positive_csr"),
    "count_sketch": ("PolynomialCountSketch(n_components=16, coef0=1, random_state=0)", "dense"),
    "count_sketch_csr": ("PolynomialCountSketch(n_components=16, random_state=0)", "csr"),
    "fourier_iid": ("RandomFourierFeatures(16, gamma=0.5, random_state=0)", "dense"),
    "fourier_sorf": ("RandomFourierFeatures(16, gamma=0.5, sampling='sorf', random_state=0)", "dense"),
    "fourier_fastfood": ("RandomFourierFeatures(15, gamma=0.5, sampling='fastfood', random_state=0)", "dense"),
    "binning": ("RandomBinningFeatures(6, gamma=0.8, random_state=0)", "dense"),
    "nystroem": ("Nystroem(n_components=12, random_state=0)", "dense"),
    "nystroem_csr": ("Nystroem(n_components=12, random_state=0)", "csr"),
    "nystroem_landmarks_csr": ("Nystroem(landmarks=sp.random(7, 6, density=0.5, format='csr', random_state=2))",
                               "csr"),
    "nystroem_precomputed": ("Nystroem(kernel='precomputed', n_components=12, random_state=0)", "kernel"),
    "transformer": ("TransformerMap(__import__('sklearn.preprocessing').preprocessing.OneHotEncoder("
                    "handle_unknown='ignore'))", "dense"),
}

CHILD = r'''
import json, pickle, sys, dataclasses
import numpy as np, scipy.sparse as sp
from randfeat import *

ctor, kind = CASE
rng = np.random.default_rng(0)
X = rng.standard_normal((60, 6))
if kind.startswith("positive"):
    X = np.abs(X)
if kind.endswith("csr"):
    X[rng.random(X.shape) < 0.5] = 0.0
    X = sp.csr_matrix(X)
if kind == "kernel":
    X = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 6)
est = eval(ctor).fit(X)
blob = pickle.dumps(est)
Z0 = est.transform(X)
Z0 = Z0.toarray() if sp.issparse(Z0) else Z0

def walk(obj, path):
    """(path, value) of every integer array and integer field of the state, sparse parts' index arrays included."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "iu":
            yield path, obj
    elif sp.issparse(obj):
        for attr in ("indices", "indptr"):
            yield path + [("attr", attr)], getattr(obj, attr)
    elif isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            yield from walk(item, path + [("item", i)])
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            value = vars(obj)[f.name]
            if isinstance(value, int) and not isinstance(value, bool):
                yield path + [("field", f.name)], value
            else:
                yield from walk(value, path + [("field", f.name)])

def replace(obj, path, new):
    (kind, key), rest = path[0], path[1:]
    child = vars(obj)[key] if kind == "field" else obj[key] if kind == "item" else getattr(obj, key)
    child = new if not rest else replace(child, rest, new)
    if kind == "item":
        items = list(obj)
        items[key] = child
        return type(obj)(items)
    if kind == "field":
        object.__setattr__(obj, key, child)
    else:
        setattr(obj, key, child)
    return obj

def tamperings(value):
    if isinstance(value, int):
        yield "negative", -1 - value
        yield "huge", 2**40
        return
    info = np.iinfo(value.dtype)
    flat = value.ravel()
    def changed(how, f):
        a = flat.astype(np.int64 if info.min < 0 else np.uint64).copy()
        f(a)
        return how, (a.astype(value.dtype) if a.size else a).reshape(value.shape)
    if flat.size:
        yield changed("negate", lambda a: np.negative(a, out=a, casting="unsafe"))
        yield changed("first_negative", lambda a: a.__setitem__(0, info.max if info.min == 0 else -1))
        yield changed("last_huge", lambda a: a.__setitem__(-1, min(info.max, 2**40)))
        yield changed("middle_past_end", lambda a: a.__setitem__(a.size // 2, min(info.max, int(a.max()) + a.size + 7)))
    yield "empty", np.zeros(0, dtype=value.dtype)

state = vars(pickle.loads(blob))["_state"]
targets = list(walk(state, []))
print(json.dumps({"targets": [json.dumps(p) for p, _ in targets]}), flush=True)
for path, value in targets:
    for how, new in tamperings(value):
        if not isinstance(new, int) and new.shape == value.shape and np.array_equal(new, value):
            continue
        name = json.dumps(path) + " " + how
        # Values the fitted array already holds, rearranged (negated signs): another valid state.
        valid = not isinstance(new, int) and new.size and new.min() >= value.min() and new.max() <= value.max()
        print(json.dumps({"start": name}), flush=True)
        est2 = pickle.loads(blob)
        vars(est2)["_state"] = replace(vars(est2)["_state"], path, new)
        forged = pickle.dumps(est2)
        try:
            loaded = pickle.loads(forged)
        except (ValueError, MemoryError) as exc:
            print(json.dumps({"case": name, "outcome": "refused on load", "why": str(exc)[:200]}), flush=True)
            continue
        except Exception as exc:
            print(json.dumps({"case": name, "outcome": f"{type(exc).__name__} on load: {exc}"[:300]}), flush=True)
            continue
        try:
            Z = loaded.transform(X)
        except (ValueError, MemoryError) as exc:
            print(json.dumps({"case": name, "outcome": "refused on transform", "why": str(exc)[:200]}), flush=True)
            continue
        except Exception as exc:
            print(json.dumps({"case": name, "outcome": f"{type(exc).__name__} on transform: {exc}"[:300]}), flush=True)
            continue
        Z = Z.toarray() if sp.issparse(Z) else np.asarray(Z)
        same = Z.shape == Z0.shape and np.array_equal(Z, Z0, equal_nan=True)
        outcome = "same features" if same else "other features of valid values" if valid else "other features"
        print(json.dumps({"case": name, "outcome": outcome}), flush=True)
print(json.dumps({"done": True}), flush=True)
'''


def _run_child(case):
    code = f"CASE = {CASES[case]!r}\n" + CHILD
    proc = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True,
                          timeout=600)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    started = [d["start"] for d in lines if "start" in d]
    assert proc.returncode == 0, (f"the child crashed (exit {proc.returncode}) on {started[-1:] or 'the fit'}:\n"
                                  f"{proc.stderr[-2000:]}")
    assert lines and lines[-1] == {"done": True}, proc.stderr[-2000:]
    return lines[0]["targets"], [d for d in lines if "outcome" in d]


#: Integer arrays any value of which the kernels read safely, and which no check can tell from the fitted
#: values: the bin hashes (keys looked up, never addresses).  Altered, they may only change the features.
FREE_VALUES = ('[["field", "vocabulary"], ["item", 0]]',)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_integer_of_every_fitted_state_tampered_in_a_pickle(case):
    """Each altered integer array or field: a clear exception on load or transform, or valid features; no crash.

    Set out of range (negative, past the end, huge, emptied), an integer
    must give ValueError (MemoryError from the memory check for a huge
    width), or the same features (an array the kernels do not read).  Only
    a rearrangement of the values the fitted array held (negated signs)
    may give other features: that is another valid state.
    """
    targets, results = _run_child(case)
    assert results or not targets
    bad = []
    for r in results:
        path = r["case"].rsplit(" ", 1)[0]
        allowed = {"refused on load", "refused on transform", "same features", "other features of valid values"}
        if path in FREE_VALUES:
            allowed.add("other features")
        if r["outcome"] not in allowed:
            bad.append(f"{r['case']}: {r['outcome']}")
    assert not bad, "\n".join(bad)


def test_every_public_map_is_tampered_with():
    maps = {name for name in randfeat.__all__
            if isinstance(getattr(randfeat, name), type) and issubclass(getattr(randfeat, name), FeatureMap)
            and getattr(randfeat, name) is not FeatureMap}  # the protocol's base class is no map
    covered = {ctor.split("(")[0] for ctor, _ in CASES.values()}
    assert maps <= covered, f"add a CASES entry for {sorted(maps - covered)}"


# ------------------------------------------------------------- the mechanism
def test_a_state_with_an_undeclared_integer_array_is_refused():
    """The check is structural: an integer array without declared bounds fails at construction."""

    @dataclasses.dataclass(frozen=True, eq=False)
    class Careless(MapState):
        columns: np.ndarray

    with pytest.raises(TypeError, match="index_bounds does not declare"):
        Careless(n_features_out=3, columns=np.arange(3))

    @dataclasses.dataclass(frozen=True, eq=False)
    class Careful(Careless):
        def index_bounds(self):
            return (("columns", self.columns, 0, self.n_features_out),)

    Careful(n_features_out=3, columns=np.arange(3))
    with pytest.raises(ValueError, match="columns holds 3, outside"):
        Careful(n_features_out=3, columns=np.arange(4))
    with pytest.raises(ValueError, match="columns holds -1"):
        Careful(n_features_out=3, columns=np.array([0, -1]))


# ------------------------------------------------------------ rows 1 and 2
def _sparse_X(seed=0):
    return sp.random(80, 6, density=0.5, format="csr", random_state=seed, dtype=np.float64)


def _run(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=subprocess_env(), capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("index", [10**6, -3])
def test_row1_nystroem_landmarks_csr_with_a_bad_column_index(index):
    """An out-of-range index segfaulted fit; a negative one was accepted while scipy wrote outside the array."""
    proc = _run(f"""
        import scipy.sparse as sp
        from randfeat import Nystroem
        X = sp.random(80, 6, density=0.5, format="csr", random_state=0)
        L = sp.random(5, 6, density=0.5, format="csr", random_state=1)
        L.indices[0] = {index}
        try:
            Nystroem(landmarks=L).fit(X)
        except ValueError as exc:
            print("ValueError:", exc)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ValueError: landmarks (csr_matrix" in proc.stdout
    assert ("negative" if index < 0 else ">= n_features = 6") in proc.stdout


def test_row1_user_landmarks_are_copied_not_frozen():
    """The state's arrays are read-only copies: the user's landmarks stay writable and unchanged."""
    X = _sparse_X()
    L = sp.random(5, 6, density=0.5, format="csr", random_state=1)
    Ld = L.toarray()
    ny = Nystroem(landmarks=L).fit(X)
    ny2 = Nystroem(landmarks=Ld).fit(X.toarray())
    L.indices[0] = L.indices[0]
    Ld[0, 0] = Ld[0, 0]
    assert not np.shares_memory(ny.components_.indices, L.indices)
    assert not np.shares_memory(ny2.components_, Ld)
    np.testing.assert_allclose(ny.transform(X), ny2.transform(X.toarray()), rtol=1e-10, atol=1e-12)


def test_row2_sparse_components_are_read_only():
    X = _sparse_X()
    ny = Nystroem(n_components=10, random_state=0).fit(X)
    C = ny.components_
    for a in (C.data, C.indices, C.indptr):
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 10**7
    loaded = pickle.loads(pickle.dumps(ny))
    assert not loaded.components_.indices.flags.writeable
    np.testing.assert_array_equal(loaded.transform(X), ny.transform(X))


@pytest.mark.parametrize("damage", ["indices_out", "indices_negative", "indptr_decreasing", "unsorted"])
def test_row2_altered_sparse_components_refused_on_load(damage):
    X = _sparse_X()
    ny = Nystroem(n_components=10, random_state=0).fit(X)
    loaded = pickle.loads(pickle.dumps(ny))
    C = loaded.components_
    indices, indptr = C.indices.copy(), C.indptr.copy()
    if damage == "indices_out":
        indices[3] = 10**7
    elif damage == "indices_negative":
        indices[3] = -1
    elif damage == "indptr_decreasing":
        indptr[2] = indptr[3] + 1
    else:
        row = np.argmax(np.diff(indptr) >= 2)
        indices[[indptr[row], indptr[row] + 1]] = indices[[indptr[row] + 1, indptr[row]]]
    C.indices, C.indptr = indices, indptr
    with pytest.raises(ValueError, match="inconsistent fitted state"):
        pickle.loads(pickle.dumps(loaded))


# ------------------------------------------------------------------- row 3
@pytest.mark.parametrize("which", [1, 2])
def test_row3_binning_vocabulary_negated_is_refused(which):
    X = np.random.default_rng(0).standard_normal((300, 4))
    est = pickle.loads(pickle.dumps(RandomBinningFeatures(8, gamma=0.8, random_state=0).fit(X)))
    vocabulary = [a.copy() for a in est._state.vocabulary]
    vocabulary[which] = (-vocabulary[which].astype(np.int64)).astype(vocabulary[which].dtype)
    object.__setattr__(vars(est)["_state"], "vocabulary", tuple(vocabulary))
    with pytest.raises(ValueError, match="inconsistent fitted state"):
        pickle.loads(pickle.dumps(est))


# ------------------------------------------------------------- row 14 (pickle)
def test_row14_additive_chi2_pickle_whose_width_disagrees_is_refused():
    X = np.abs(np.random.default_rng(0).standard_normal((5, 3)))
    est = AdditiveChi2Sampler().fit(X)
    vars(est)["_state"] = dataclasses.replace(est._state, n_features_out=30)
    with pytest.raises(ValueError, match="n_features_in_=3, but the fitted parameters are for 10"):
        pickle.loads(pickle.dumps(est))


def test_a_pickled_map_whose_n_features_in_disagrees_with_its_state_is_refused():
    """Fourier frequencies for 6 inputs but n_features_in_=7 would let the kernel read past W."""
    X = np.random.default_rng(0).standard_normal((20, 6))
    est = randfeat.RBFSampler(n_components=8, random_state=0).fit(X)
    est.n_features_in_ = 7
    with pytest.raises(ValueError, match="n_features_in_=7"):
        pickle.loads(pickle.dumps(est))
