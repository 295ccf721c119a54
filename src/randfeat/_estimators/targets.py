"""Target encodings: how an estimator's y becomes the float64 target columns Y (N × K) the solvers fit.

An encoding is made by the estimator and handed to the backend, which
applies it where the rows are: ``encode`` to a validated in-memory y,
``encode_block`` to one raw row block of a Dask y (on a worker).  ``shape``
says how the fitted attributes are shaped (scikit-learn's conventions).

Also the checks of logistic regression's row weights (sample weights times
class weights), which unlike Ridge's may be negative (as scikit-learn's).
"""

import inspect

import numpy as np
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import _check_sample_weight, check_array

from .._core.validation import _ALLOW_ZERO_WEIGHTS


class RealTargets:
    """Regression targets: y's columns as float64.

    Parameters
    ----------
    y : ndarray or dask array of shape (n_samples,) or (n_samples, n_targets)

    Attributes
    ----------
    shape : {"1d", "column", "2d"}
        One target given as (n,), one target as (n, 1), or several.
    n_targets : int
    """

    def __init__(self, y):
        self.n_targets = 1 if y.ndim == 1 else int(y.shape[1])
        self.shape = "1d" if y.ndim == 1 else ("column" if self.n_targets == 1 else "2d")

    def encode(self, y):
        """Return validated y as float64 columns (N × K)."""
        Y = np.asarray(y, dtype=np.float64)
        return Y.reshape(Y.shape[0], -1)

    def scored(self, y, Y):
        """What a scorer compares predictions with: the target columns Y."""
        return Y

    def encode_block(self, yb):
        """Return one raw row block of y, validated, as float64 columns."""
        Yb = check_array(yb, ensure_2d=False, dtype=np.float64, ensure_min_samples=0, input_name="y")
        return Yb.reshape(Yb.shape[0], -1)


class SignTargets:
    """Classification targets: a ±1 column per class, one column (+1 for the second class) for two classes.

    Parameters
    ----------
    labels : ndarray
        The sorted classes of 1-D y, or a multilabel indicator y itself.
    owner : str
        The estimator's class name, for messages.

    Attributes
    ----------
    binarizer : LabelBinarizer
        Fitted with pos_label=1, neg_label=-1 (kept by the estimator for ``predict``).
    classes : ndarray
    shape : {"binary", "2d"}
    n_targets : int
    """

    def __init__(self, labels, owner):
        self.binarizer = LabelBinarizer(pos_label=1, neg_label=-1).fit(labels)
        self.classes = self.binarizer.classes_
        if len(self.classes) < 2:
            raise ValueError(
                f"{owner} needs samples of at least 2 classes in the data, "
                f"but the data contains only one class: {self.classes[0]!r}"
            )
        multilabel = self.binarizer.y_type_.startswith("multilabel")
        self.n_targets = 1 if len(self.classes) == 2 and not multilabel else len(self.classes)
        self.shape = "binary" if self.n_targets == 1 else "2d"

    def encode(self, y):
        """Return the ±1 columns of validated in-memory labels y."""
        if np.ndim(y) != 1:  # multilabel indicator: the binarizer's own transform
            return np.asarray(self.binarizer.transform(y), dtype=np.float64)
        # Each label's class from the sorted classes (a third of the
        # binarizer's transform's time on 522000 labels), in its columns and signs.
        inverse = np.searchsorted(self.classes, y)
        if len(self.classes) == 2:  # one column: +1 for the second class
            return np.where(inverse == 1, 1.0, -1.0)[:, None]
        Y = np.full((len(inverse), len(self.classes)), -1.0)
        Y[np.arange(len(inverse)), inverse] = 1.0
        return Y

    def scored(self, y, Y):
        """What a scorer compares predictions with: the labels y, as ``RidgeClassifier.predict`` gives labels.

        (A multilabel y given as ±1 columns becomes the binarizer's 0/1 indicator rows.)
        """
        if self.binarizer.y_type_.startswith("multilabel"):
            return self.binarizer.inverse_transform(np.where(Y > 0, 1, -1))
        return np.asarray(y)

    def encode_block(self, yb):
        """Return the ±1 columns of one raw row block of labels."""
        unknown = np.setdiff1d(yb, self.classes)
        if unknown.size:  # cannot happen: the classes came from y itself
            raise ValueError(f"labels {unknown.tolist()!r} not among the classes")
        return np.asarray(self.binarizer.transform(yb), dtype=np.float64)


class ClassTargets:
    """Classification targets for a probabilistic classifier: each label's index among the sorted classes.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Validated labels (1-D: binary or multiclass; multilabel is refused).
    owner : str
        The estimator's class name, for messages.
    class_weight : dict, "balanced" or None
        Checked here: a dict must name only classes of y, with finite non-negative weights.

    Attributes
    ----------
    classes : ndarray
        The sorted classes (at least 2).
    n_classes : int
    """

    def __init__(self, y, owner, class_weight=None):
        if np.asarray(y).dtype == object:
            kinds = {"str" if isinstance(v, str) else "number" for v in np.asarray(y).ravel()}
            if len(kinds) > 1:
                raise ValueError(f"{owner}: y mixes labels of different types (strings and numbers); "
                                 f"give every label the same type, e.g. y.astype(str)")
        check_classification_targets(y)
        kind = type_of_target(y, input_name="y")
        if kind not in ("binary", "multiclass"):
            raise ValueError(f"{owner} needs y as a 1-D array of class labels (binary or multiclass); got {kind} y")
        self.classes = np.unique(y)
        self.n_classes = len(self.classes)
        if self.n_classes < 2:
            raise ValueError(
                f"{owner} needs samples of at least 2 classes in the data, "
                f"but the data contains only one class: {self.classes[0]!r}"
            )
        if isinstance(class_weight, dict):
            absent = [c for c in class_weight if not np.isin(c, self.classes).any()]
            if absent:
                raise ValueError(f"class_weight names {absent!r}, which are not classes of y "
                                 f"(classes: {self.classes.tolist()!r})")
            values = np.array([class_weight[c] for c in class_weight], dtype=np.float64)
            if not np.all(np.isfinite(values)) or np.any(values < 0):
                raise ValueError(f"class_weight must map classes to finite non-negative weights; got {class_weight!r}")

    def encode(self, y):
        """Return each label's class index (int) among ``classes``."""
        return np.searchsorted(self.classes, y)

    def weighted(self, y, sample_weight, class_weight):
        """Return ``sample_weight`` times the class weights of y's rows (None when both are absent).

        As scikit-learn's ``LogisticRegression`` (>= 1.8): ``"balanced"``
        counts each class by its rows' sample weights.
        """
        if not class_weight:
            return sample_weight
        extra = {"sample_weight": sample_weight} if _CLASS_WEIGHT_TAKES_SAMPLE_WEIGHT else {}
        by_class = compute_class_weight(class_weight, classes=self.classes, y=y, **extra)
        weights = np.asarray(by_class, dtype=np.float64)[self.encode(y)]
        return weights if sample_weight is None else sample_weight * weights


_CLASS_WEIGHT_TAKES_SAMPLE_WEIGHT = "sample_weight" in inspect.signature(compute_class_weight).parameters


# ------------------------------------------------ logistic regression's weights
def logistic_sample_weight(sample_weight, X):
    """scikit-learn's conversion of ``sample_weight`` (finite, one per row of X, float64), negative entries kept.

    scikit-learn's ``LogisticRegression`` fits negative weights; randfeat's
    shared check (``check_sample_weight``, Ridge's) refuses them, so the
    logistic fit converts its weights here.  Zero and negative totals are
    refused by ``check_weight_scale``.
    """
    if sample_weight is None:
        return None
    return _check_sample_weight(sample_weight, X, dtype=np.float64, **_ALLOW_ZERO_WEIGHTS)


def solver_for_weights(solver, sample_weight, owner):
    """The solver to run: L-BFGS for negative weights (Newton's Hessian takes the weights' square roots)."""
    if sample_weight is None or not np.any(sample_weight < 0):
        return solver
    if solver == "newton-cholesky":
        raise ValueError(f"{owner}: solver='newton-cholesky' needs non-negative sample weights (its Hessian is "
                         f"built from their square roots), and sample_weight times the class weights has "
                         f"{int(np.sum(sample_weight < 0))} negative entries; use solver='lbfgs' or 'auto'")
    return "lbfgs"


def check_class_totals(targets, y, sample_weight, class_weight, owner):
    """ValueError when ``"balanced"`` would divide by a class whose rows all weigh zero (infinite weights)."""
    if class_weight != "balanced" or sample_weight is None:
        return
    totals = np.bincount(targets.encode(y), weights=sample_weight, minlength=targets.n_classes)
    empty = targets.classes[totals <= 0]
    if empty.size:
        raise ValueError(f"{owner}: class_weight='balanced' divides by each class's total sample_weight, but the "
                         f"rows of class(es) {empty.tolist()!r} have a total sample_weight <= 0; drop those rows or "
                         f"give them positive weights")


def check_weight_scale(sample_weight, n_samples, C, owner):
    """ValueError unless the class-weighted sample weights leave a positive total whose product with C is usable.

    The solvers scale the loss by 1 / (C · Σw): a zero total (every class
    weight 0) or a product outside float64's range would divide by zero or
    give an infinite or zero penalty.
    """
    total = float(n_samples) if sample_weight is None else float(np.sum(sample_weight))
    if total == 0 and not np.any(sample_weight):
        raise ValueError(f"{owner}: sample_weight (times the class weights) is zero for every sample, so no "
                         f"sample counts in the fit; give at least one class and one row a positive weight")
    if not total > 0:
        raise ValueError(f"{owner}: sample_weight (times the class weights) sums to {total:.3g}; the loss is "
                         f"scaled by the total weight, which must be positive (negative weights are accepted "
                         f"only when the positive ones outweigh them)")
    scale = C * total
    if not (np.isfinite(scale) and scale >= np.finfo(np.float64).tiny):
        raise ValueError(f"{owner}: C times the total sample weight is {scale:.3g} (C={C:.3g}, total weight "
                         f"{total:.3g}), outside the range float64 can scale the loss by; use a C or sample "
                         f"weights nearer 1 (multiplying every weight by c is the same model as C·c)")

