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
from sklearn.utils.validation import check_array


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

    def class_table(self, class_weight, class_sums, class_counts, weighted, owner):
        """Each class's weight (float64, in the order of ``classes``), or None without class weights.

        One rule for every backend, from each class's total sample weight
        (in memory a ``bincount`` of y, on Dask a pass over y's blocks).  As
        scikit-learn's ``LogisticRegression`` (>= 1.8), ``"balanced"`` counts
        each class by its rows' sample weights: ``compute_class_weight`` on
        the totals gives the same bits as on y itself (it bincounts the same
        totals).  ValueError when ``"balanced"`` would divide by a class
        whose rows weigh nothing in all.

        Parameters
        ----------
        class_weight : dict, "balanced" or None
        class_sums : ndarray (n_classes,)
            Each class's total sample weight (its row count without sample weights).
        class_counts : ndarray (n_classes,) of int
            Each class's row count.
        weighted : bool
            Whether sample weights were given.
        owner : str
        """
        if not class_weight:
            return None
        class_sums = np.asarray(class_sums, dtype=np.float64)
        if class_weight == "balanced" and weighted:
            empty = self.classes[~(class_sums > 0)]
            if empty.size:
                raise ValueError(f"{owner}: class_weight='balanced' divides by each class's total sample_weight, "
                                 f"but the rows of class(es) {empty.tolist()!r} have a total sample_weight <= 0; "
                                 f"drop those rows or give them positive weights")
        if _CLASS_WEIGHT_TAKES_SAMPLE_WEIGHT:
            table = compute_class_weight(class_weight, classes=self.classes, y=self.classes, sample_weight=class_sums)
        elif isinstance(class_weight, str):  # an older scikit-learn: "balanced" by unweighted class counts
            counts = np.asarray(class_counts, dtype=np.float64)
            table = counts.sum() / (self.classes.size * counts)
        else:
            table = compute_class_weight(class_weight, classes=self.classes, y=self.classes)
        return np.asarray(table, dtype=np.float64)


_CLASS_WEIGHT_TAKES_SAMPLE_WEIGHT = "sample_weight" in inspect.signature(compute_class_weight).parameters


# ------------------------------------------------ logistic regression's weights
def logistic_fit_input(est, backend, X, y, sample_weight, Cs):
    """Validate a logistic fit's input on any backend: one path for LogisticRegression and LogisticRegressionCV.

    The backend validates X, y and ``sample_weight`` (negative weights
    accepted where it can fit them, as scikit-learn's) and makes the target
    encoding and the rows' weights (``class_targets``: classes found, class
    weights by ``ClassTargets.class_table``, totals counted); here the
    totals are checked against every C of the fit(s) and the solver chosen
    for them.

    Parameters
    ----------
    est : LogisticRegression or LogisticRegressionCV
        Its ``class_weight`` and ``solver`` are read; ``n_features_in_`` is recorded.
    backend : InMemoryBackend or DaskBackend
    X, y, sample_weight : the user's input
    Cs : sequence of float
        The C of every fit (one for LogisticRegression, the grid for the CV).

    Returns
    -------
    X, y, sample_weight : validated (sample_weight as given, or None)
    targets : ClassTargets
    weights : the rows' weights (sample weights times class weights), or None
    solver : str
        ``est.solver``, or ``"lbfgs"`` for ``"auto"`` with negative weights.
    """
    owner = type(est).__name__
    X, y, sample_weight = backend.validate_fit(est, X, y, sample_weight, y_numeric=False, negative_weights=True)
    targets, weights, totals = backend.class_targets(ClassTargets, y, sample_weight, owner, est.class_weight)
    for C in sorted({float(np.min(Cs)), float(np.max(Cs))}):
        check_weight_scale(totals, C, owner)
    return X, y, sample_weight, targets, weights, solver_for_weights(est.solver, totals.n_negative, owner)


def solver_for_weights(solver, n_negative, owner):
    """The solver to run: L-BFGS for negative weights (Newton's Hessian takes the weights' square roots)."""
    if not n_negative:
        return solver
    if solver == "newton-cholesky":
        raise ValueError(f"{owner}: solver='newton-cholesky' needs non-negative sample weights (its Hessian is "
                         f"built from their square roots), and sample_weight times the class weights has "
                         f"{n_negative} negative entries; use solver='lbfgs' or 'auto'")
    return "lbfgs"


def check_weight_scale(totals, C, owner):
    """ValueError unless the class-weighted sample weights leave a positive total whose product with C is usable.

    The solvers scale the loss by 1 / (C · Σw): a zero total (every class
    weight 0) or a product outside float64's range would divide by zero or
    give an infinite or zero penalty.

    Parameters
    ----------
    totals : WeightTotals
        The backend's count of the rows' weights (``total``, ``any_nonzero``).
    C : float
    owner : str
    """
    total = totals.total
    if total == 0 and not totals.any_nonzero:
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
