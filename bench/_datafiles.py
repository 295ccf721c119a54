"""Reading a user's data file for ``bench/table1.py --data``: svmlight/libsvm, .npz or CSV.

Every failure is a HarnessError naming the file and what was wrong with it
(the CLI prints it without a traceback).
"""

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from _harness import HarnessError


def load_data_file(path, *, target_column=-1):
    """Load (X, y) from an svmlight/libsvm, .npz or .csv file, with clear errors.

    Parameters
    ----------
    path : str or Path
        ``.npz``: arrays ``X`` and ``y`` (optionally ``X_test``/``y_test``,
        returned under ``"test"``).  ``.csv``/``.tsv``: numeric table, one
        header line allowed, target in ``target_column``.  Anything else is
        read as svmlight/libsvm (``sklearn.datasets.load_svmlight_file``),
        the format of LIBSVM's copies of a9a, cadata and covtype.

    Returns
    -------
    dict with ``X``, ``y`` and optionally ``test`` = (X_test, y_test).
    """
    path = Path(path)
    if not path.exists():
        raise HarnessError(f"--data {path}: no such file")
    if path.is_dir():
        raise HarnessError(f"--data {path}: is a directory, expected a data file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            return _load_npz(path)
        if suffix in (".csv", ".tsv"):
            return _load_csv(path, target_column, "\t" if suffix == ".tsv" else ",")
        return _load_svmlight(path)
    except HarnessError:
        raise
    except (ValueError, OSError, KeyError, EOFError) as exc:
        kind = {".npz": "an .npz file", ".csv": "a CSV file", ".tsv": "a TSV file"}.get(suffix, "an svmlight/libsvm file")
        raise HarnessError(f"--data {path}: could not read it as {kind}: {exc}") from None


def _load_svmlight(path):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(path))
    if X.shape[0] == 0:
        raise HarnessError(f"--data {path}: the file holds no samples")
    return {"X": X.tocsr(), "y": y}


def _load_npz(path):
    with np.load(path, allow_pickle=False) as z:
        missing = [k for k in ("X", "y") if k not in z.files]
        if missing:
            raise HarnessError(f"--data {path}: the .npz file has no array {' or '.join(missing)} (it has {z.files})")
        out = {"X": z["X"], "y": z["y"]}
        if "X_test" in z.files and "y_test" in z.files:
            out["test"] = (z["X_test"], z["y_test"])
    _check_xy(path, out["X"], out["y"])
    return out


def _load_csv(path, target_column, delimiter):
    with open(path) as f:
        first = f.readline()
    skip = 0
    try:
        [float(v) for v in first.strip().split(delimiter) if v.strip()]
    except ValueError:
        skip = 1  # a header line
    data = np.loadtxt(path, delimiter=delimiter, skiprows=skip, ndmin=2)
    if data.shape[1] < 2:
        raise HarnessError(f"--data {path}: need at least two columns (features and a target), got {data.shape[1]}")
    y = data[:, target_column]
    X = np.delete(data, target_column % data.shape[1], axis=1)
    _check_xy(path, X, y)
    return {"X": X, "y": y}


def _check_xy(path, X, y):
    X = np.asarray(X) if not hasattr(X, "tocsr") else X
    if getattr(X, "ndim", 2) != 2:
        raise HarnessError(f"--data {path}: X must be 2-D, got shape {X.shape}")
    if np.ndim(y) != 1 or X.shape[0] != np.shape(y)[0]:
        raise HarnessError(f"--data {path}: X has {X.shape[0]} rows but y has shape {np.shape(y)}")
    if X.shape[0] == 0:
        raise HarnessError(f"--data {path}: the file holds no samples")


def load_train_test(path, test_path=None, *, target_column=-1):
    """(X, y, test) from a data file and an optional test file; ``test`` is (X_test, y_test) or None.

    An .npz file may hold its own test split.  Two svmlight files of one set
    can differ in width (the last columns may be all zero in one of them, as
    in LIBSVM's a9a and a9a.t): both are padded to the wider.
    """
    data = load_data_file(path, target_column=target_column)
    test = data.get("test")
    if test_path:
        t = load_data_file(test_path, target_column=target_column)
        test = (t["X"], t["y"])
    X, y = data["X"], data["y"]
    if test is not None and test[0].shape[1] != X.shape[1]:
        width = max(X.shape[1], test[0].shape[1])
        X, Xt = (sp.csr_matrix(a) for a in (X, test[0]))
        X.resize((X.shape[0], width))
        Xt.resize((Xt.shape[0], width))
        test = (Xt, test[1])
    return X, y, test
