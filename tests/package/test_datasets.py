"""The Table-1 data sets: the shipped UCI Adult set (against UCI's and LIBSVM's
files) and the synthetic look-alikes (shapes, determinism, class structure, sparsity)."""

import sys

import numpy as np
import pytest
import scipy.sparse as sp

from randfeat import datasets
from randfeat.datasets import load_adult, make_adult_like, make_census_like, make_forest_like, make_letter_like

GENERATORS = [make_census_like, make_adult_like, make_forest_like, make_letter_like]


def _same(a, b):
    if sp.issparse(a):
        return sp.issparse(b) and a.shape == b.shape and (a != b).nnz == 0
    return np.array_equal(a, b)


@pytest.mark.parametrize("make", GENERATORS)
def test_deterministic_for_a_seed_and_different_across_seeds(make):
    X1, y1 = make(3000, random_state=7)
    X2, y2 = make(3000, random_state=7)
    X3, _ = make(3000, random_state=8)
    assert _same(X1, X2) and np.array_equal(y1, y2)
    assert not _same(X1, X3)


@pytest.mark.parametrize("make", GENERATORS)
def test_n_samples_gives_a_prefix_of_the_larger_set(make):
    # Rows are drawn in fixed blocks, so a subsample is the first rows of a
    # larger set, across a block boundary too (block = 32768 rows).
    big, small = {make_census_like: (18000, 500), make_adult_like: (32000, 1000),
                  make_forest_like: (40000, 33000), make_letter_like: (20000, 700)}[make]
    Xa, ya = make(big, random_state=1)
    Xb, yb = make(small, random_state=1)
    n = Xb.shape[0]
    assert _same(Xa[:n], Xb) and np.array_equal(ya[:n], yb)


def test_letter_like_shape_values_and_repeated_rows():
    X, y = make_letter_like()
    assert X.shape == (20000, 16) and y.shape == (20000,) and y.dtype == np.int64
    assert np.array_equal(X, np.rint(X)) and X.min() == 0.0 and X.max() <= 15.0
    assert not np.any(np.signbit(X))  # no -0.0
    assert np.array_equal(np.unique(y), np.arange(26))
    # Rows repeat (glyph variants): the ill-conditioning the generator is for.
    assert len(np.unique(X, axis=0)) < 0.85 * len(X)
    # The classes are learnable: nearest class mean beats chance (1/26) by far.
    means = np.stack([X[y == c].mean(axis=0) for c in range(26)])
    nearest = np.argmin(((X[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert np.mean(nearest == y) > 0.3


def test_census_like_shape_and_values():
    X, y = make_census_like()
    assert X.shape == (18000, 119) and y.shape == (18000,)
    assert X.dtype == np.float64 and np.isfinite(X).all() and np.isfinite(y).all()
    assert X.min() >= 0.0 and X.max() <= 1.0
    assert y.std() > 0.5  # a real regression target, not a constant


def test_census_like_is_nonlinear():
    # A linear model must leave clearly more error than a kernel model, or the
    # data set would not test kernel approximation at all.
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge

    X, y = make_census_like(3000, random_state=0)
    Xtr, ytr, Xte, yte = X[:2000], y[:2000], X[2000:], y[2000:]
    lin = np.mean((Ridge(alpha=1.0).fit(Xtr, ytr).predict(Xte) - yte) ** 2)
    krr = np.mean((KernelRidge(alpha=0.1, kernel="rbf", gamma=0.05).fit(Xtr, ytr).predict(Xte) - yte) ** 2)
    assert krr < 0.8 * lin


def test_adult_like_is_a9a_shaped_csr_one_hot():
    X, y = make_adult_like()
    assert sp.issparse(X) and X.format == "csr"
    assert X.shape == (32000, 123) and y.shape == (32000,)
    assert X.has_sorted_indices
    assert set(np.unique(X.data)) == {1.0}
    nnz = np.diff(X.indptr)
    assert nnz.max() == 14 and nnz.min() >= 11  # 14 attributes, a few missing
    # Exactly one column per present attribute: column blocks of the 14 attributes.
    bounds = np.concatenate([[0], np.cumsum(datasets._ADULT_CARDINALITIES)])
    assert bounds[-1] == 123
    Xd = X[:2000].toarray()
    for j in range(14):
        assert Xd[:, bounds[j]:bounds[j + 1]].sum(axis=1).max() == 1
    assert set(np.unique(y)) == {-1, 1}
    assert 0.20 < np.mean(y == 1) < 0.28  # about a quarter positive, as adult


def test_forest_like_is_covtype_shaped():
    X, y = make_forest_like(60000, random_state=0)
    assert X.shape == (60000, 54) and y.shape == (60000,)
    assert X.min() >= 0.0 and X.max() <= 1.0
    assert set(np.unique(y)) == set(range(1, 8))
    binary = X[:, 10:]
    assert set(np.unique(binary)) == {0.0, 1.0}
    assert np.all(binary[:, :4].sum(axis=1) == 1)  # one wilderness area
    assert np.all(binary[:, 4:].sum(axis=1) == 1)  # one soil type
    counts = np.bincount(y, minlength=8)[1:]
    assert counts.max() < 0.75 * y.size  # no single class swamps the set


def test_forest_like_full_size():
    X, y = make_forest_like()
    assert X.shape == (522000, 54) and y.shape == (522000,)


def test_forest_like_boundary_is_axis_aligned_and_label_noise_is_as_asked():
    # Without label noise the label is a function of 4 continuous columns
    # through axis-aligned boxes: a deep decision tree fits it almost exactly,
    # far better than a smooth model of the same inputs.
    from sklearn.tree import DecisionTreeClassifier

    X, y = make_forest_like(20000, random_state=0, label_noise=0.0)
    Xtr, ytr, Xte, yte = X[:15000], y[:15000], X[15000:], y[15000:]
    tree_err = np.mean(DecisionTreeClassifier(random_state=0).fit(Xtr[:, [0, 3, 5, 9]], ytr).predict(Xte[:, [0, 3, 5, 9]]) != yte)
    assert tree_err < 0.03
    _, y_noisy = make_forest_like(20000, random_state=0, label_noise=0.3)
    changed = np.mean(y_noisy != y)
    assert 0.3 * 6 / 7 - 0.03 < changed < 0.3 * 6 / 7 + 0.03


@pytest.mark.parametrize("make", GENERATORS)
@pytest.mark.parametrize("bad", [0, -1, 10**7])
def test_bad_n_samples(make, bad):
    with pytest.raises(ValueError, match="n_samples"):
        make(bad)


@pytest.mark.parametrize("make", GENERATORS)
def test_bad_random_state(make):
    with pytest.raises(TypeError, match="random_state"):
        make(10, random_state="seed")
    with pytest.raises(ValueError, match="random_state"):
        make(10, random_state=-3)


def test_forest_bad_parameters():
    with pytest.raises(ValueError, match="label_noise"):
        make_forest_like(10, label_noise=1.0)
    with pytest.raises(ValueError, match="tree_depth"):
        make_forest_like(10, tree_depth=0)


def test_generators_accept_generator_and_randomstate():
    X1, _ = make_census_like(50, random_state=np.random.default_rng(0))
    X2, _ = make_census_like(50, random_state=np.random.RandomState(0))
    assert X1.shape == X2.shape == (50, 119)


# ------------------------------------------------------------ the real Adult set
# Facts about the shipped data that do not come from randfeat's code:
# * adult.names: 32561 training / 16281 test rows; the label counts below
#   are the ">50K" rows of adult.data and adult.test.
# * UCI's files: md5 of the uncompressed adult.data and adult.test.
# * LIBSVM's a9a and a9a.t (rows "<label> <col>:1 ... \n", as LIBSVM
#   distributes them; checksums taken from a public copy of the two files):
#   Platt's encoding, which load_adult(encoding="a9a") must reproduce row for row.
UCI_MD5 = {"adult.data.gz": "5d7c39d7b8804f071cdd1f2a7c460872", "adult.test.gz": "35238206dfdf7f1fe215bbb874adecdc"}
LIBSVM_MD5 = {"a9a": "fb3596510d780aaf76a06dc721d49662", "a9a.t": "f0bb16cf1ee3e80ff560e9d132ee647e"}
LIBSVM_FIRST_ROWS = {
    "a9a": ["-1 3:1 11:1 14:1 19:1 39:1 42:1 55:1 64:1 67:1 73:1 75:1 76:1 80:1 83:1 ",
            "-1 5:1 7:1 14:1 19:1 39:1 40:1 51:1 63:1 67:1 73:1 74:1 76:1 78:1 83:1 ",
            "-1 3:1 6:1 17:1 22:1 36:1 41:1 53:1 64:1 67:1 73:1 74:1 76:1 80:1 83:1 "],
    "a9a.t": ["-1 1:1 6:1 17:1 21:1 35:1 42:1 54:1 62:1 71:1 73:1 74:1 76:1 80:1 83:1 ",
              "-1 3:1 6:1 14:1 22:1 36:1 40:1 56:1 63:1 67:1 73:1 74:1 76:1 82:1 83:1 ",
              "+1 2:1 10:1 18:1 24:1 38:1 40:1 59:1 63:1 67:1 73:1 74:1 76:1 80:1 83:1 "],
}


@pytest.fixture(scope="module")
def adult():
    """(train, test): the two a9a Bunches."""
    return load_adult(), load_adult(subset="test")


@pytest.fixture(scope="module")
def adult_raw():
    return load_adult(encoding="raw"), load_adult(subset="test", encoding="raw")


def _libsvm_lines(X, y):
    """Rows in LIBSVM's text format, 1-based columns, as a9a is written."""
    return [("+1 " if label == 1 else "-1 ") + "".join(f"{c + 1}:1 " for c in X.indices[X.indptr[i]:X.indptr[i + 1]])
            for i, label in enumerate(y)]


def test_adult_shipped_files_are_the_uci_originals():
    import gzip
    import hashlib
    import importlib.resources

    folder = importlib.resources.files("randfeat") / "_data" / "adult"
    total = 0
    for name, md5 in UCI_MD5.items():
        raw = (folder / name).read_bytes()
        total += len(raw)
        assert hashlib.md5(gzip.decompress(raw)).hexdigest() == md5, name
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in text and "10.24432/C5XW20" in text and "Becker" in text  # attribution beside the copy
    assert total + len((folder / "adult.names").read_bytes()) < 700_000  # compressed, well under 1 MB


def test_adult_a9a_shapes_labels_and_csr(adult):
    (X, y), (Xt, yt) = ((b.data, b.target) for b in adult)
    adult = adult[0]
    assert X.shape == (32561, 123) and Xt.shape == (16281, 123)
    for A in (X, Xt):
        assert sp.issparse(A) and A.format == "csr" and A.dtype == np.float64 and A.has_sorted_indices
    assert y.dtype == np.int64 and set(np.unique(y)) == {-1, 1} and set(np.unique(yt)) == {-1, 1}
    assert (y == 1).sum() == 7841 and (yt == 1).sum() == 3846
    assert len(adult.feature_names) == 123 and len(set(adult.feature_names)) == 123
    assert list(adult.target_names) == ["<=50K", ">50K"]


def test_adult_a9a_rows_are_one_hot_blocks_with_missing_blocks_empty(adult, adult_raw):
    from randfeat._adult import attributes

    for X, V in ((adult[0].data, adult_raw[0].data), (adult[1].data, adult_raw[1].data)):
        assert np.all(X.data == 1.0) and not np.isnan(X.data).any()
        for i in range(X.shape[0]):  # indices strictly increasing within every row
            row = X.indices[X.indptr[i]:X.indptr[i + 1]]
            assert np.all(np.diff(row) > 0)
        missing = (V == -1).sum(axis=1)
        np.testing.assert_array_equal(np.diff(X.indptr), 14 - missing)
        assert missing.max() == 3  # workclass, occupation and native-country can be "?"
    # Block layout: attribute by attribute in file order, categories in adult.names order.
    names = list(adult[0].feature_names)
    assert names == list(adult[1].feature_names)
    assert names[:6] == ["age<26", "age=26..32", "age=33..40", "age=41..49", "age>=50", "workclass=Private"]
    assert names[-1] == "native-country=Holand-Netherlands"
    start = 0
    for name, cats in attributes():
        width = 5 if name in ("age", "fnlwgt", "education-num", "hours-per-week") else 2 if cats is None else len(cats)
        block = names[start:start + width]
        assert all(b.startswith(name) for b in block)
        if cats is not None:
            assert block == [f"{name}={c}" for c in cats]
        start += width
    assert start == 123


def test_adult_a9a_equals_libsvm_a9a_row_for_row(adult):
    import hashlib

    for key, b in (("a9a", adult[0]), ("a9a.t", adult[1])):
        X, y = b.data, b.target
        lines = _libsvm_lines(X, y)
        assert lines[:3] == LIBSVM_FIRST_ROWS[key]
        assert hashlib.md5("".join(line + "\n" for line in lines).encode()).hexdigest() == LIBSVM_MD5[key], key


def test_adult_raw_attributes(adult_raw):
    from randfeat._adult import attributes

    V, Vt = adult_raw[0].data, adult_raw[1].data
    assert V.shape == (32561, 14) and Vt.shape == (16281, 14) and V.dtype == np.float64
    assert not np.isnan(V).any() and not np.isnan(Vt).any()
    assert list(adult_raw[0].feature_names) == [name for name, _ in attributes()]
    # First row of adult.data: 39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical,
    # Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K.
    np.testing.assert_array_equal(V[0], [39, 5, 77516, 0, 13, 2, 8, 3, 0, 1, 2174, 0, 40, 0])
    assert adult_raw[0].target[0] == -1
    for j, (name, cats) in enumerate(attributes()):
        if cats is None:
            assert V[:, j].min() >= 0
        else:
            assert set(np.unique(V[:, j])) <= set(range(-1, len(cats)))
    assert (V == -1).sum() == 4262 and (Vt == -1).sum() == 2203  # the "?" fields of adult.data / adult.test


def test_adult_as_frame(adult_raw):
    pd = pytest.importorskip("pandas")
    from randfeat._adult import attributes

    b = load_adult(encoding="raw", as_frame=True)
    bt = load_adult(subset="test", encoding="raw", as_frame=True)
    for df, V in ((b.data, adult_raw[0].data), (bt.data, adult_raw[1].data)):
        assert isinstance(df, pd.DataFrame) and list(df.columns) == list(adult_raw[0].feature_names)
        for j, (name, cats) in enumerate(attributes()):
            col = df[name]
            if cats is None:
                assert col.dtype == np.int64
                np.testing.assert_array_equal(col.to_numpy(), V[:, j])
            else:
                assert isinstance(col.dtype, pd.CategoricalDtype) and list(col.cat.categories) == list(cats)
                np.testing.assert_array_equal(col.cat.codes.to_numpy(), V[:, j])  # NaN <-> code -1
    assert isinstance(b.target, pd.Series) and (b.target == 1).sum() == 7841
    assert (bt.target == 1).sum() == 3846
    assert b.frame.shape == (32561, 15) and bt.frame.shape == (16281, 15)
    X, y = load_adult(encoding="raw", as_frame=True, return_X_y=True)
    assert isinstance(X, pd.DataFrame) and isinstance(y, pd.Series) and X.shape == (32561, 14)


def test_adult_return_x_y_is_a_pair_as_in_scikit_learn(adult):
    # scikit-learn's loaders: return_X_y=True gives (data, target), nothing more.
    for subset, b in zip(("train", "test"), adult):
        out = load_adult(subset=subset, return_X_y=True)
        assert isinstance(out, tuple) and len(out) == 2
        X, y = out
        assert (X != b.data).nnz == 0
        np.testing.assert_array_equal(y, b.target)
    X, y = load_adult(encoding="raw", return_X_y=True)
    assert X.shape == (32561, 14) and y.shape == (32561,)


def test_adult_subsets(adult, adult_raw):
    train, test = adult
    assert set(train) == set(test) == {"data", "target", "feature_names", "target_names", "DESCR"}
    assert "train (adult.data, 32,561 rows)" in train.DESCR and "test (adult.test, 16,281 rows)" in test.DESCR
    both = load_adult(subset="all")
    assert both.data.shape == (48842, 123) and (both.target == 1).sum() == 7841 + 3846
    assert (both.data[:32561] != train.data).nnz == 0 and (both.data[32561:] != test.data).nnz == 0
    np.testing.assert_array_equal(both.target, np.concatenate([train.target, test.target]))
    raw = load_adult(subset="all", encoding="raw", return_X_y=True)[0]
    np.testing.assert_array_equal(raw, np.vstack([adult_raw[0].data, adult_raw[1].data]))


def test_adult_loads_are_independent_copies():
    # Each call returns its own arrays: changing one leaves the next load intact.
    X, y = load_adult(return_X_y=True)
    y[:] = 0
    X.data[:] = 5
    again = load_adult(encoding="a9a")
    assert (again.target == 1).sum() == 7841 and np.all(again.data.data == 1.0)
    for subset in ("train", "all"):
        raw, y = load_adult(subset=subset, encoding="raw", return_X_y=True)
        assert raw.flags.writeable and y.flags.writeable
        raw[:] = -7
        y[:] = 0
    assert load_adult(encoding="raw").data[0, 0] == 39 and (load_adult(encoding="raw").target == 1).sum() == 7841


def test_datasets_module_exposes_only_its_public_names():
    import __future__

    public = {name for name in dir(datasets)
              if not name.startswith("_") and not isinstance(getattr(datasets, name), __future__._Feature)}
    assert public == set(datasets.__all__), sorted(public - set(datasets.__all__))
    for stray in ("np", "sp", "numbers"):
        assert not hasattr(datasets, stray)


def test_adult_loads_offline(tmp_path):
    import subprocess
    import sys

    from _subprocess_env import subprocess_env

    code = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('network used')\n"
        "socket.socket.connect = socket.socket.connect_ex = refuse\n"
        "socket.create_connection = socket.getaddrinfo = refuse\n"
        "from randfeat.datasets import load_adult\n"
        "b = load_adult(subset='all')\n"
        "print(b.data.shape[0])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=subprocess_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == "48842"


def test_adult_descr_docstring_and_attribution(adult, adult_raw):
    adult, adult_raw = adult[0], adult_raw[0]
    from numpydoc.validate import validate

    from randfeat._adult import CUT_POINTS

    errors = [e for e in validate("randfeat.datasets.load_adult")["errors"]
              if e[0] in {"GL08", "SS01", "PR01", "PR02", "RT01"}]
    assert not errors, errors
    doc = load_adult.__doc__
    for text in (doc, adult.DESCR, adult_raw.DESCR):
        assert "CC BY 4.0" in text and "10.24432/C5XW20" in text
    for name, edges in CUT_POINTS.items():
        stated = f"{name} {', '.join(str(e) for e in edges)}"
        assert stated in " ".join(doc.split()), stated  # the cut points are stated in the docstring
        assert f"{name}: {', '.join(str(e) for e in edges)}" in adult.DESCR


def test_adult_bad_input(monkeypatch):
    for subset in ("validation", "Train", None, 0):
        with pytest.raises(ValueError, match="subset must be 'train', 'test' or 'all'"):
            load_adult(subset=subset)
    with pytest.raises(ValueError, match="encoding must be 'a9a' or 'raw'"):
        load_adult(encoding="onehot")
    with pytest.raises(TypeError, match="return_X_y must be a bool"):
        load_adult(return_X_y="yes")
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    with pytest.raises(ImportError, match=r"needs pandas.*pip install pandas"):
        load_adult(encoding="raw", as_frame=True)


# ------------------------------------------------------------- issue 25: damaged data files
def _damaged_copy(tmp_path, name, damage):
    """A copy of the shipped files with one of them damaged as ``damage`` says."""
    import gzip
    import shutil

    from randfeat import _adult

    for f in ("adult.data.gz", "adult.test.gz", "adult.names"):
        shutil.copy(_adult._data_dir() / f, tmp_path / f)
    path = tmp_path / name
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:5000])
    elif damage == "not ascii":
        path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()).replace(b"Private", b"Priv\xe9te", 1)))
    elif name.endswith(".gz"):
        text = gzip.decompress(path.read_bytes()).decode("ascii")
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if line and not line.startswith("|"))
        if damage == "label":
            lines[first] = lines[first].replace("<=50K", "<=5OK")
        elif damage == "nan age":
            lines[first] = "nan" + lines[first][lines[first].index(","):]
        elif damage == "huge age":
            lines[first] = "1e400" + lines[first][lines[first].index(","):]
        elif damage == "duplicated row":
            lines.insert(first, lines[first])
        elif damage == "unknown category":
            lines[first] = lines[first].replace("State-gov", "Pirate", 1)
        path.write_bytes(gzip.compress("\n".join(lines).encode("ascii")))
    else:  # adult.names: swap two categories
        path.write_bytes(path.read_bytes().replace(b"Private, Self-emp-not-inc", b"Self-emp-not-inc, Private", 1))


@pytest.mark.parametrize("name, damage", [
    ("adult.data.gz", "label"), ("adult.data.gz", "nan age"), ("adult.data.gz", "huge age"),
    ("adult.data.gz", "duplicated row"), ("adult.data.gz", "unknown category"), ("adult.test.gz", "truncated"),
    ("adult.test.gz", "not ascii"), ("adult.names", "swapped categories"),
])
def test_damaged_adult_files_give_one_clear_error_naming_the_file(tmp_path, monkeypatch, name, damage):
    from randfeat import _adult

    _damaged_copy(tmp_path, name, damage)
    monkeypatch.setattr(_adult, "_data_dir", lambda: tmp_path)
    _adult._read_split.cache_clear()
    _adult.attributes.cache_clear()
    try:
        with pytest.raises(OSError, match=f"Adult file {name} .*not the one randfeat shipped.*reinstall"):
            load_adult(subset="all")
    finally:
        _adult._read_split.cache_clear()
        _adult.attributes.cache_clear()
