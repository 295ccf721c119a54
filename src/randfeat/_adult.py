"""The UCI Adult data set, shipped in ``randfeat/_data/adult/``: reading and encoding.

The copy is the UCI originals, byte for byte (gzip-compressed), so what is
shipped can be checked against UCI's published checksums; the a9a encoding
is computed at load time from fixed cut points.  Public entry point:
:func:`randfeat.datasets.load_adult`.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.resources
import re
from typing import Any, Union

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

#: Rows of the standard split (adult.names: train=32561, test=16281).
N_TRAIN, N_TEST = 32561, 16281

#: John Platt's quantisation of the six continuous attributes, as in LIBSVM's
#: a9a: the lower edge of every bin but the first (a value x falls in bin
#: ``searchsorted(edges, x, side="right")``).  Established by re-encoding
#: adult.data and adult.test and comparing with LIBSVM's a9a and a9a.t:
#: all 48,842 rows agree (tests/test_datasets.py holds the checksums).  Where
#: the data leave a gap between two bins (fnlwgt 106637 | 106648, capital-gain
#: 0 | 114, capital-loss 0 | 155), any edge inside it gives the same rows;
#: the edge is put at the smallest value of the upper bin, or at 1 for "> 0".
CUT_POINTS = {
    "age": (26, 33, 41, 50),
    "fnlwgt": (106648, 158662, 196338, 259873),
    "education-num": (9, 10, 11, 13),
    "capital-gain": (1,),
    "capital-loss": (1,),
    "hours-per-week": (35, 40, 41, 48),
}

_FILES = {"train": "adult.data.gz", "test": "adult.test.gz"}
_MISSING = "?"
#: SHA-256 of the shipped files: anything else is refused before it is parsed.
_SHA256 = {
    "adult.data.gz": "838cd81977c72d100c8d5e6939e7b3f7646e413209303752944017f7e893e2ef",
    "adult.test.gz": "dd0437d3e191ca74ffc84a57da11cadcda00664a09896984abed6d6c589c3d63",
    "adult.names": "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a",
}


def _data_dir():
    return importlib.resources.files("randfeat") / "_data" / "adult"


def _checked_bytes(name):
    """The bytes of a shipped file, refused (OSError naming it) unless they are the ones randfeat shipped."""
    path = _data_dir() / name
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != _SHA256[name]:
        raise OSError(
            f"randfeat's copy of the UCI Adult file {name} ({path}) is not the one randfeat shipped: its "
            f"SHA-256 is {digest}, expected {_SHA256[name]}. The file was altered or damaged; reinstall "
            f"randfeat (pip install --force-reinstall) to restore it."
        )
    return data


@functools.lru_cache(maxsize=1)
def attributes():
    """The 14 attributes in file order: a tuple of (name, categories or None for continuous).

    Read from the shipped ``adult.names``, so categorical columns follow its
    order exactly.
    """
    text = _checked_bytes("adult.names").decode("ascii")
    out = []
    for line in text.splitlines():
        m = re.match(r"^([a-z-]+): (.+)\.$", line)
        if m:
            values = tuple(v.strip() for v in m.group(2).split(","))
            out.append((m.group(1), None if values == ("continuous",) else values))
    if len(out) != 14:  # pragma: no cover - the shipped file is fixed
        raise RuntimeError(f"adult.names: expected 14 attribute lines, found {len(out)}")
    return tuple(out)


@functools.lru_cache(maxsize=2)
def _read_split(split):
    """(values, labels) of one split: values (n, 14) float64 with categories as
    codes (−1 where missing), labels int64 in {−1, +1}; read-only arrays."""
    attrs = attributes()
    lookup = [None if cats is None else {c: k for k, c in enumerate(cats)} for _, cats in attrs]
    text = gzip.decompress(_checked_bytes(_FILES[split])).decode("ascii")
    lines = [line for line in text.splitlines() if line and not line.startswith("|")]
    columns = list(zip(*(line.split(", ") for line in lines)))
    if len(columns) != len(attrs) + 1:  # pragma: no cover - the shipped file is fixed
        raise RuntimeError(f"{_FILES[split]}: expected {len(attrs) + 1} fields per row")
    values = np.empty((len(lines), len(attrs)), dtype=np.float64)
    for j, codes in enumerate(lookup):
        if codes is None:
            values[:, j] = np.array(columns[j], dtype=np.float64)
        else:
            values[:, j] = [-1 if field == _MISSING else codes[field] for field in columns[j]]
    # adult.test writes its labels with a final period: ">50K."
    labels = np.array([1 if field.rstrip(".") == ">50K" else -1 for field in columns[-1]], dtype=np.int64)
    expected = N_TRAIN if split == "train" else N_TEST
    if len(lines) != expected:  # pragma: no cover - the shipped file is fixed
        raise RuntimeError(f"{_FILES[split]}: expected {expected} rows, read {len(lines)}")
    values.flags.writeable = False
    labels.flags.writeable = False
    return values, labels


def _a9a_blocks():
    """Per attribute: (name, block labels) of its one-hot columns, in file order."""
    blocks = []
    for name, cats in attributes():
        if cats is not None:
            blocks.append((name, [f"{name}={c}" for c in cats]))
            continue
        edges = CUT_POINTS[name]
        labels = [f"{name}<{edges[0]}"]
        labels += [f"{name}={lo}..{hi - 1}" if hi - 1 > lo else f"{name}={lo}" for lo, hi in zip(edges, edges[1:])]
        labels.append(f"{name}>={edges[-1]}")
        blocks.append((name, labels))
    return blocks


def _bin_codes(values):
    """Replace each continuous attribute by its a9a bin; categories keep their codes."""
    codes = values.astype(np.int64)
    for j, (name, cats) in enumerate(attributes()):
        if cats is None:
            codes[:, j] = np.searchsorted(np.asarray(CUT_POINTS[name], dtype=np.float64), values[:, j], side="right")
    return codes


def encode_a9a(values):
    """CSR (n, 123) of 0/1 float64: one column per category or bin, sorted indices.

    A missing category (code −1) leaves its attribute's block empty.
    """
    codes = _bin_codes(values)
    widths = np.array([len(labels) for _, labels in _a9a_blocks()])
    offsets = np.concatenate([[0], np.cumsum(widths)[:-1]])
    present = codes >= 0
    # Row-major boolean indexing keeps each row's columns in block order, and
    # block offsets increase along a row: the indices come out sorted.
    indices = (codes + offsets)[present]
    indptr = np.concatenate([[0], np.cumsum(present.sum(axis=1))])
    X = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(codes.shape[0], int(widths.sum())))
    X.has_sorted_indices = True
    return X


def _frame(values, attrs):
    import pandas as pd

    columns = {}
    for j, (name, cats) in enumerate(attrs):
        if cats is None:
            columns[name] = values[:, j].astype(np.int64)
        else:
            columns[name] = pd.Categorical.from_codes(values[:, j].astype(np.int64), categories=list(cats))
    return pd.DataFrame(columns)


_DESCR_HEAD = """\
UCI Adult (Census Income), 1994 US census extract
=================================================

Binary classification: does a person earn more than $50,000 a year?
32,561 training and 16,281 test rows (the standard split of the UCI files),
14 attributes (6 continuous, 8 categorical), 24.1% positive in training.

Source: UCI Machine Learning Repository, "Adult", Barry Becker and Ronny
Kohavi (1996), doi:10.24432/C5XW20.  Licence: CC BY 4.0.  randfeat ships the
UCI files adult.data, adult.test and adult.names unmodified (gzip-compressed)
in randfeat/_data/adult/, with this attribution beside them.

Labels: target = +1 for ">50K", -1 for "<=50K" (as LIBSVM's a9a).
"""


def _descr(encoding, subset):
    rows = {"train": "adult.data, 32,561 rows", "test": "adult.test, 16,281 rows",
            "all": "adult.data then adult.test, 48,842 rows"}[subset]
    lines = [_DESCR_HEAD, f"This subset: {subset} ({rows}).\n"]
    if encoding == "a9a":
        lines.append(
            "Encoding a9a (John Platt, 1998, as LIBSVM's a9a / a9a.t): 123 binary columns, the\n"
            "categorical attributes one-hot in adult.names order, a missing value (\"?\") an\n"
            "all-zero block, and the continuous attributes in bins with these lower edges:\n"
        )
        for name, edges in CUT_POINTS.items():
            lines.append(f"    {name}: {', '.join(str(e) for e in edges)}")
    else:
        lines.append(
            "Encoding raw: the 14 attributes in file order; continuous values as given,\n"
            "categorical attributes as their position in adult.names (-1 where missing),\n"
            "or with as_frame=True pandas categorical columns (missing = NaN)."
        )
    return "\n".join(lines) + "\n"


_SUBSETS = ("train", "test", "all")


def load_adult(*, subset: str = "train", encoding: str = "a9a", return_X_y: bool = False,
               as_frame: bool = False) -> Union[Bunch, tuple[Any, Any]]:
    """Load the UCI Adult data set (shipped with randfeat; no download).

    Income above $50,000 from the 1994 US census: 32,561 training and
    16,281 test rows (the standard split), 14 attributes.  The data of the
    Adult row of Rahimi & Recht (2007), Table 1, who used its a9a encoding.
    As scikit-learn's loaders, it returns one split at a time: ``subset``
    chooses it.

    Source: UCI Machine Learning Repository, "Adult", Barry Becker and Ronny
    Kohavi (1996), doi:10.24432/C5XW20, licensed CC BY 4.0; randfeat ships
    the UCI files unmodified (gzip-compressed) with this attribution beside
    them in ``randfeat/_data/adult/``.

    Parameters
    ----------
    subset : {"train", "test", "all"}, default="train"
        ``"train"``: the 32,561 rows of ``adult.data``; ``"test"``: the
        16,281 rows of ``adult.test``; ``"all"``: both, training rows first
        (48,842 rows).
    encoding : {"a9a", "raw"}, default="a9a"
        ``"a9a"``: 123 binary columns, as LIBSVM's a9a / a9a.t (John Platt's
        encoding, 1998): the 8 categorical attributes one-hot, in the order
        of ``adult.names`` (a missing value, ``?``, gives an all-zero block),
        and the 6 continuous attributes in bins, one column per bin, with
        these lower edges (values below the first edge form the first bin):
        age 26, 33, 41, 50; fnlwgt 106648, 158662, 196338, 259873;
        education-num 9, 10, 11, 13; capital-gain 1; capital-loss 1;
        hours-per-week 35, 40, 41, 48.  With these edges every one of the
        48,842 rows equals its row of LIBSVM's files.  Each row has 14
        non-zeros less one per missing attribute.
        ``"raw"``: the 14 attributes in file order.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.
    as_frame : bool, default=False
        ``data`` is a pandas DataFrame with the ``feature_names`` as columns
        and ``target`` a pandas Series (as scikit-learn's loaders).  a9a:
        the 123 columns sparse (``pd.SparseDtype("float64", 0.0)``, from
        the CSR matrix, no densifying); raw: continuous columns int64,
        categorical columns of ``category`` dtype in ``adult.names`` order,
        missing = NaN.  Needs pandas (``pip install pandas``).

    Returns
    -------
    adult : Bunch
        ``data``: the features of the subset — a9a:
        ``scipy.sparse.csr_matrix`` of shape (n, 123), float64 values 0/1,
        sorted indices; raw: ndarray of shape (n, 14), float64, the
        continuous values as given and each category as its position in
        ``adult.names`` (−1 where missing), or a DataFrame with
        ``as_frame=True`` (sparse columns for a9a).  ``target``: int64 labels, +1 for ">50K" and −1
        for "<=50K" (7,841 positives in "train", 3,846 in "test").
        ``feature_names``: ndarray of str, the column names (a9a:
        ``"workclass=Private"``, ``"age<26"``, ``"age=26..32"``, ...).
        ``target_names``: ``["<=50K", ">50K"]`` for −1 and +1.
        ``frame`` (``as_frame=True``): the DataFrame with a ``target``
        column.  ``DESCR``: this description, attribution and encoding.
    (data, target) : tuple
        With ``return_X_y=True``.

    Raises
    ------
    ValueError
        If ``subset`` is not "train", "test" or "all", or ``encoding`` is
        not "a9a" or "raw".
    ImportError
        If ``as_frame=True`` and pandas is not installed.

    See Also
    --------
    make_adult_like : Synthetic data of the same a9a shape, any size.

    Examples
    --------
    >>> from randfeat.datasets import load_adult
    >>> X, y = load_adult(return_X_y=True)
    >>> X_test, y_test = load_adult(subset="test", return_X_y=True)
    >>> X.shape, X_test.shape
    ((32561, 123), (16281, 123))
    """
    if not isinstance(subset, str) or subset not in _SUBSETS:
        raise ValueError(f"load_adult: subset must be 'train', 'test' or 'all', got {subset!r}")
    if encoding not in ("a9a", "raw"):
        raise ValueError(f"load_adult: encoding must be 'a9a' or 'raw', got {encoding!r}")
    for name, value in (("return_X_y", return_X_y), ("as_frame", as_frame)):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"load_adult: {name} must be a bool, got {value!r}")
    if as_frame:
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError("load_adult(as_frame=True) needs pandas, which is not installed: "
                              "pip install pandas (randfeat's 'pandas' extra)") from None
    splits = ("train", "test") if subset == "all" else (subset,)
    parts = [_read_split(split) for split in splits]
    V = parts[0][0] if len(parts) == 1 else np.vstack([v for v, _ in parts])
    y = np.concatenate([t for _, t in parts])  # always a fresh, writeable copy
    attrs = attributes()
    if encoding == "a9a":
        X = encode_a9a(V)
        names = [label for _, labels in _a9a_blocks() for label in labels]
        if as_frame:
            import pandas as pd

            X = pd.DataFrame.sparse.from_spmatrix(X, columns=names)
    elif as_frame:
        X = _frame(V, attrs)
        names = [name for name, _ in attrs]
    else:
        X = np.array(V)  # a writeable copy of the cached, read-only values
        names = [name for name, _ in attrs]
    bunch = Bunch(feature_names=np.array(names, dtype=object), target_names=np.array(["<=50K", ">50K"], dtype=object),
                  DESCR=_descr(encoding, subset))
    if as_frame:
        import pandas as pd

        y = pd.Series(y, name="target")
        bunch.frame = X.assign(target=y)
    if return_X_y:
        return X, y
    bunch.update(data=X, target=y)
    return bunch
