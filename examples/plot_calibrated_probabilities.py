"""
Probabilities from a ridge classifier: calibration
==================================================

:class:`randfeat.RidgeClassifier` fits least squares to ±1 targets (the
paper's "Fourier+LS"); its ``decision_function`` is a score, not a
probability, and it has no ``predict_proba``.  When you need probabilities
— to rank by risk, to set a threshold by cost, to report a log-loss —
there are two routes: fit :class:`randfeat.LogisticRegression` on the same
features instead (one fit of the logistic likelihood; compared with this
route in :ref:`sphx_glr_auto_examples_plot_logistic_probabilities.py`), or
keep the ridge classifier and wrap it in scikit-learn's
``CalibratedClassifierCV``, shown here: it fits the classifier on folds of
the training rows and learns a map from the held-out scores to
probabilities (a sigmoid, Platt 1999, or an isotonic step function).

On the real Adult data (income above $50,000: 24% positives).
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.calibration import CalibratedClassifierCV, calibration_curve
from sklearn.metrics import brier_score_loss, log_loss

from randfeat import RandomFourierFeatures, RidgeClassifier
from randfeat.datasets import load_adult

X, y = load_adult(return_X_y=True)
X_test, y_test = load_adult(subset="test", return_X_y=True)
positive = y_test == 1


def classifier():
    return RidgeClassifier(alpha=1.0, features=RandomFourierFeatures(500, gamma="scale", random_state=0))


# %%
# Calibrated classifiers
# ----------------------
# ``cv=3``: three fits on two thirds of the rows each, each calibrated on
# the third it did not see; ``predict_proba`` averages the three.
models = {
    "sigmoid": CalibratedClassifierCV(classifier(), method="sigmoid", cv=3).fit(X, y),
    "isotonic": CalibratedClassifierCV(classifier(), method="isotonic", cv=3).fit(X, y),
}

# %%
# A naive alternative, for comparison: squash the uncalibrated score
# (which sits near ±1) into [0, 1] linearly.
raw = classifier().fit(X, y)
naive = np.clip((raw.decision_function(X_test) + 1) / 2, 1e-6, 1 - 1e-6)

print(f"{'':10s} {'accuracy':>9s} {'log-loss':>9s} {'Brier':>7s}")
print(f"{'naive':10s} {raw.score(X_test, y_test):9.4f} {log_loss(positive, naive):9.4f} "
      f"{brier_score_loss(positive, naive):7.4f}")
probabilities = {"naive": naive}
for name, model in models.items():
    p = model.predict_proba(X_test)[:, list(model.classes_).index(1)]
    probabilities[name] = p
    print(f"{name:10s} {model.score(X_test, y_test):9.4f} {log_loss(positive, p):9.4f} "
          f"{brier_score_loss(positive, p):7.4f}")

# %%
# Reliability diagram
# -------------------
# Among the test rows given a probability near p, the fraction that are
# positive should be p: the diagonal.
fig, ax = plt.subplots(figsize=(5.5, 5))
ax.plot([0, 1], [0, 1], "k:", lw=1, label="perfectly calibrated")
for (name, p), marker in zip(probabilities.items(), "o^s"):
    frac, mean_p = calibration_curve(positive, p, n_bins=10, strategy="quantile")
    ax.plot(mean_p, frac, marker + "-", label=name, markersize=4)
ax.set(xlabel="predicted probability of >50K", ylabel="fraction of test rows with >50K",
       title="Adult, 16,281 test rows")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# Calibration leaves the accuracy about where it was (the scores are only
# remapped; the three fold models are averaged, so it is not exactly the
# single model's) and brings the log-loss and the Brier score down against
# the naive mapping.  Sigmoid
# calibration needs fewer rows; isotonic calibration is more flexible and
# wants a few thousand calibration rows, which Adult has.  The same wrapper
# works with :class:`randfeat.RidgeClassifierCV` as the classifier, which
# then chooses alpha inside each fold.  When the ridge classifier itself is
# not needed, :class:`randfeat.LogisticRegression` gives probabilities from
# one fit, with a lower log-loss on this data
# (:ref:`sphx_glr_auto_examples_plot_logistic_probabilities.py`).
