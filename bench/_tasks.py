"""Table 1's data tasks: a data set split into training, validation and test rows.

Sources: the built-in sets (the real UCI Adult set shipped with randfeat, and
the synthetic look-alikes of ``randfeat.datasets``), a user's file
(``--data``) and public sets fetched through scikit-learn (``--dataset``).
Every task is split the same way and carries the median-heuristic gamma of
its training rows, from which the selection grid is built.
"""

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import scipy.sparse as sp

from _datafiles import load_train_test
from _harness import HarnessError, progress


@dataclass
class Task:
    """A data set split and ready for the table."""

    key: str
    name: str
    kind: str  # "regression" or "classification"
    X_train: object
    y_train: np.ndarray
    X_val: object
    y_val: np.ndarray
    X_test: object
    y_test: np.ndarray
    D: int  # Fourier / Nystroem dimension
    source: str
    paper_key: Optional[str] = None  # the paper's row this *is* (real data only), or None
    g0: dict = field(default_factory=dict)  # median-heuristic gamma per kernel

    @property
    def n_train(self):
        return self.X_train.shape[0]

    def describe(self):
        n_classes = len(np.unique(self.y_train)) if self.kind == "classification" else None
        return {"key": self.key, "name": self.name, "kind": self.kind, "n_train": self.n_train,
                "n_val": self.X_val.shape[0], "n_test": self.X_test.shape[0], "n_features": self.X_train.shape[1],
                "sparse": sp.issparse(self.X_train), "n_classes": n_classes, "D": self.D, "source": self.source,
                "paper_key": self.paper_key, "median_heuristic_gamma": self.g0}


def split_rows(X, y, kind, seed, test=None):
    """Seeded split: test 20% (unless ``test`` is given), then validation 10% of the rest."""
    from sklearn.model_selection import train_test_split

    strat = y if kind == "classification" else None
    if test is None:
        X, X_test, y, y_test = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=strat)
        strat = y if kind == "classification" else None
    else:
        X_test, y_test = test
    X_tr, X_val, y_tr, y_val = train_test_split(X, y, test_size=0.1, random_state=seed + 1, stratify=strat)
    return X_tr, y_tr, X_val, y_val, X_test, y_test


def median_gamma(X, metric, seed, n_pairs=3000):
    """1 / median distance of random row pairs: squared Euclidean ("l2") or Manhattan ("l1")."""
    rng = np.random.default_rng(seed)
    i = rng.integers(0, X.shape[0], n_pairs)
    j = rng.integers(0, X.shape[0], n_pairs)
    A, B = X[i], X[j]
    diff = (A - B).toarray() if sp.issparse(A) else A - B
    dist = (diff**2).sum(axis=1) if metric == "l2" else np.abs(diff).sum(axis=1)
    med = np.median(dist[dist > 0]) if np.any(dist > 0) else 1.0
    return float(1.0 / med)


def make_task(key, name, kind, X, y, D, source, seed, paper_key=None, test=None, scale=False):
    """Split, optionally MaxAbs-scale on the training rows, convert to float64, measure g0."""
    X_tr, y_tr, X_val, y_val, X_test, y_test = split_rows(X, y, kind, seed, test)
    if scale:
        from sklearn.preprocessing import MaxAbsScaler

        sc = MaxAbsScaler().fit(X_tr)
        X_tr, X_val, X_test = sc.transform(X_tr), sc.transform(X_val), sc.transform(X_test)
    if sp.issparse(X_tr):
        X_tr, X_val, X_test = (sp.csr_matrix(a, dtype=np.float64) for a in (X_tr, X_val, X_test))
    else:
        X_tr, X_val, X_test = (np.ascontiguousarray(a, dtype=np.float64) for a in (X_tr, X_val, X_test))
    task = Task(key, name, kind, X_tr, np.asarray(y_tr), X_val, np.asarray(y_val), X_test, np.asarray(y_test),
                D, source, paper_key)
    task.g0 = {"rbf": median_gamma(X_tr, "l2", seed), "laplacian": median_gamma(X_tr, "l1", seed)}
    return task


# ------------------------------------------------------------ built-in sets
#: The synthetic look-alikes: key -> (label, task kind, generator name, profile key of D).
LOOK_ALIKES = {
    "census": ("Census-like", "regression", "make_census_like", "d_small"),
    "adult": ("Adult-like", "classification", "make_adult_like", "d_small"),
    "forest": ("Forest-like", "classification", "make_forest_like", "d_large"),
}
REAL_ADULT = "adult-uci"
#: Every set the table runs without a file, in the table's order: the real row first.
BUILTIN_SETS = (REAL_ADULT, *LOOK_ALIKES)


def builtin_tasks(profile, names, seed):
    """Yield the tasks of the named built-in sets (keys of BUILTIN_SETS), sized by ``profile``."""
    from randfeat import datasets

    for key in names:
        n = profile["sizes"].get(key)
        if key == REAL_ADULT:
            yield adult_uci_task(profile["d_small"], seed, n_rows=n)
            continue
        label, kind, generator, d_key = LOOK_ALIKES[key]
        make = getattr(datasets, generator)
        progress(f"{label}: generating{'' if n is None else f' {n} rows'}")
        X, y = make(n, random_state=seed)
        src = f"randfeat.datasets.{generator}(n_samples={n}, random_state={seed})"
        yield make_task(key, label, kind, X, y, profile[d_key], src, seed)


def _subsample(X, y, n_rows, rng):
    if n_rows is None or n_rows >= X.shape[0]:
        return X, y
    keep = np.sort(rng.choice(X.shape[0], n_rows, replace=False))
    return X[keep], y[keep]


def adult_uci_task(D, seed, n_rows=None):
    """The real Adult set shipped with randfeat (a9a encoding), on its standard train/test split.

    ``n_rows``: keep that many seeded random rows of each of the training
    and test files (None: all 32,561 and 16,281).  The validation rows are
    10% of the training file, as for every set.
    """
    from randfeat.datasets import load_adult

    progress("Adult (UCI): loading the copy shipped with randfeat")
    X, y = load_adult(subset="train", encoding="a9a", return_X_y=True)
    X_test, y_test = load_adult(subset="test", encoding="a9a", return_X_y=True)
    rng = np.random.default_rng(seed)
    X, y = _subsample(X, y, n_rows, rng)
    X_test, y_test = _subsample(X_test, y_test, n_rows, rng)
    sub = "" if n_rows is None else f", {n_rows:,} random rows of each split"
    src = f"randfeat.datasets.load_adult(subset='train' / 'test', encoding='a9a'): UCI adult.data / adult.test{sub}"
    return make_task(REAL_ADULT, "Adult (UCI)", "classification", X, y, D, src, seed, paper_key="adult",
                     test=(X_test, y_test))


# ------------------------------------------------------------ other sources
def infer_kind(y, kind="auto"):
    """``kind``, or for "auto": classification when y holds at most 100 distinct integers."""
    if kind != "auto":
        return kind
    y = np.asarray(y)
    is_int = np.all(np.isfinite(y)) and np.allclose(y, np.round(y))
    return "classification" if is_int and len(np.unique(y)) <= 100 else "regression"


def file_task(path, test_path, profile, *, target_column=-1, kind="auto", D=None, max_rows=None, seed=0,
              scale=True):
    """A task from a user's file (``--data``), with its test file or a seeded 20% test split."""
    X, y, test = load_train_test(path, test_path, target_column=target_column)
    kind = infer_kind(y, kind)
    D = D or (profile["d_large"] if X.shape[0] > 100000 else profile["d_small"])
    if max_rows and X.shape[0] > max_rows:
        X, y = X[:max_rows], y[:max_rows]
    return make_task("file", Path(path).name, kind, X, y, D, str(path), seed, test=test, scale=scale)


def _fetch(name):
    """Fetch a public data set through scikit-learn; clear error without network."""
    import urllib.error

    from sklearn import datasets as skd

    socket.setdefaulttimeout(30)
    try:
        if name == "covtype":
            X, y = skd.fetch_covtype(return_X_y=True)
            return X, y, "classification", "forest"
        if name in ("california", "cadata"):
            X, y = skd.fetch_california_housing(return_X_y=True)
            return X, y, "regression", None
    except (urllib.error.URLError, ConnectionError, TimeoutError, socket.error, OSError) as exc:
        raise HarnessError(
            f"--dataset {name}: could not download it ({type(exc).__name__}: {exc}). This machine may have no "
            "network. Use --data FILE with a local copy (svmlight/libsvm, .npz or .csv), e.g. the LIBSVM "
            f"copy of {name}, or run without --dataset for the built-in sets."
        ) from None
    raise HarnessError(f"--dataset {name}: unknown; choose from adult, covtype, california")


def fetched_task(name, profile, *, D=None, max_rows=None, seed=0, scale=True):
    """A task from ``--dataset``: adult is the copy shipped with randfeat, the others are downloaded."""
    if name == "adult":
        return adult_uci_task(D or profile["d_small"], seed, n_rows=max_rows)
    X, y, kind, paper_key = _fetch(name)
    X, y = _subsample(X, y, max_rows or None, np.random.default_rng(seed))
    D = D or (profile["d_large"] if X.shape[0] > 100000 else profile["d_small"])
    return make_task(name, name, kind, X, y, D, f"--dataset {name}", seed, paper_key=paper_key, scale=scale)
