"""What every randfeat estimator shares: parameter validation and the fit transaction.

* ``ValidatedParamsMixin``: scikit-learn's declarative ``_parameter_constraints``
  (checked by ``_validate_params``, raising ``InvalidParameterError``), with
  two randfeat additions: an explanation appended to the message where
  randfeat knows more than "must be one of" (``_explain_invalid``), and the
  checks that involve several parameters at once
  (``_check_param_combinations``).
* ``fit_context``: scikit-learn's ``_fit_context`` (validate the parameters,
  then fit) wrapped in a ``transaction``: the fit runs on a shadow and its
  result replaces the estimator's state at once, so fitted attributes of an
  earlier fit that the new one does not set are dropped, a fit that raises
  (bad parameter, bad input, Ctrl-C, MemoryError) leaves the estimator
  exactly as it was, and concurrent predictions never see a half-fitted
  model; updates of one estimator are serialised across threads.

The feature maps' base class is the feature-map contract,
``randfeat._maps.contract.FeatureMap``.
"""

from __future__ import annotations

import functools
import threading
import weakref
from numbers import Integral
from typing import Any, Callable, TypeVar

from sklearn.base import _fit_context
from sklearn.utils._param_validation import InvalidParameterError, validate_parameter_constraints

from .threads import effective_n_threads
from .validation import N_JOBS_ZERO

_F = TypeVar("_F", bound=Callable[..., Any])


def _fitted_attribute_names(estimator):
    # scikit-learn's convention: public fitted attributes end with "_".
    return [k for k in vars(estimator) if k.endswith("_") and not k.startswith("__")]


_LOCKS = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def estimator_lock(estimator):
    """The lock that serialises the updates of one estimator (``fit``, ``partial_fit``) across threads.

    Kept outside the estimator (a weak dictionary), so it is never pickled,
    cloned or compared, and goes with the estimator.
    """
    with _LOCKS_GUARD:
        lock = _LOCKS.get(estimator)
        if lock is None:
            lock = _LOCKS[estimator] = threading.RLock()
        return lock


def transaction(estimator, update, *, drop_fitted):
    """Run ``update(shadow)`` on a shadow of ``estimator``; on success swap the shadow's state in, at once.

    The shadow is a new instance holding the estimator's attributes (the
    fitted ones too unless ``drop_fitted``: a ``fit`` must leave none of an
    earlier fit that it does not set).  The estimator itself is not touched
    until ``update`` returns: its ``__dict__`` is then replaced by the
    shadow's in one assignment, so a thread that predicts meanwhile sees the
    old model or the new one, never a half-set state; and if ``update``
    raises anything (bad input, Ctrl-C, MemoryError) the estimator is exactly
    as it was.  Updates of one estimator are serialised (``estimator_lock``).

    Returns
    -------
    What ``update`` returned, with the shadow replaced by the estimator.
    """
    with estimator_lock(estimator):
        shadow = object.__new__(type(estimator))
        fitted = set(_fitted_attribute_names(estimator)) if drop_fitted else set()
        vars(shadow).update((k, v) for k, v in vars(estimator).items() if k not in fitted)
        result = update(shadow)
        estimator.__dict__ = vars(shadow)
    return estimator if result is shadow else result


def fit_context(*, prefer_skip_nested_validation: bool) -> Callable[[_F], _F]:
    """Decorate a ``fit``/``fit_transform``: validate parameters, fit, all or nothing, swapped in at once.

    scikit-learn's ``_fit_context`` runs ``_validate_params`` before the
    method (and skips the validation of nested estimators' parameters when
    ``prefer_skip_nested_validation`` is True).  The method runs on a shadow
    of the estimator without its fitted attributes (``transaction``), so no
    attribute of an earlier fit survives that the new one does not set, a
    failed fit leaves the estimator as it was, and concurrent predictions
    see the old model until the new one replaces it whole.

    Parameters
    ----------
    prefer_skip_nested_validation : bool
        As in scikit-learn: True unless the estimator fits estimators it was
        given as parameters (``Ridge(features=...)``), whose own parameters
        must then be validated by their own ``fit``.

    Returns
    -------
    decorator : callable
    """

    def decorator(fit_method: _F) -> _F:
        validated = _fit_context(prefer_skip_nested_validation=prefer_skip_nested_validation)(fit_method)

        @functools.wraps(fit_method)
        def fit_transaction(estimator, *args, **kwargs):
            return transaction(estimator, lambda shadow: validated(shadow, *args, **kwargs), drop_fitted=True)

        return fit_transaction  # type: ignore[return-value]  # functools.wraps keeps the signature

    return decorator


class ValidatedParamsMixin:
    """Declarative parameter validation with randfeat's explanations (not public API).

    Subclasses declare ``_parameter_constraints`` as scikit-learn estimators
    do; they may override ``_explain_invalid(name, value)`` to add a sentence
    to the message of an invalid parameter, and
    ``_check_param_combinations()`` to reject combinations of individually
    valid parameters.  Every failure is an ``InvalidParameterError`` (a
    ValueError and a TypeError), whose message starts as scikit-learn's:
    "The 'name' parameter of Class must be ... Got ... instead."
    """

    _parameter_constraints: dict = {}

    # The HTML repr's "?" link (scikit-learn's _HTMLDocumentationLinkMixin): the
    # API page of the class under its public name, randfeat.<Name>.
    _doc_link_module = "randfeat"
    _doc_link_template = "https://randfeat.readthedocs.io/en/latest/generated/{estimator_module}.{estimator_name}.html"

    def _validate_params(self):
        params = self.get_params(deep=False)
        caller = type(self).__name__
        # One parameter at a time, so that the explanation belongs to it.
        for name, constraints in self._parameter_constraints.items():
            try:
                validate_parameter_constraints({name: constraints}, {name: params[name]}, caller_name=caller)
            except InvalidParameterError as exc:
                message = self._invalid_message(name, params[name], str(exc))
                if message == str(exc):
                    raise
                raise InvalidParameterError(message) from None
        self._check_param_combinations()

    def _invalid_message(self, name, value, message):
        """Return the message for an invalid ``value`` of ``name``: scikit-learn's ``message`` and the explanation.

        Subclasses override it where scikit-learn's sentence itself would
        mislead (e.g. a private class path) and say it all in their own words.
        """
        explanation = self._explain_invalid(name, value)
        return f"{message} {explanation}" if explanation else message

    def _explain_invalid(self, name, value):
        """Return a sentence explaining why ``value`` is invalid for ``name`` ("" for none)."""
        if name == "n_jobs" and isinstance(value, Integral) and not isinstance(value, bool) and value == 0:
            return N_JOBS_ZERO
        return ""

    def _check_param_combinations(self):
        """Raise InvalidParameterError for combinations of valid parameters that do not fit together."""

    def _runtime_params(self, *names):
        """Validate parameters read outside ``fit`` (``n_jobs``, ``chunk_size``): they may be set after it.

        Returns
        -------
        values : tuple
            The parameters' values, in the order of ``names``.
        """
        params = self.get_params(deep=False)
        for name in names:
            try:
                validate_parameter_constraints(
                    {name: self._parameter_constraints[name]}, {name: params[name]}, caller_name=type(self).__name__
                )
            except InvalidParameterError as exc:
                explanation = self._explain_invalid(name, params[name])
                raise InvalidParameterError(f"{exc} {explanation}".strip()) from None
        return tuple(params[name] for name in names)

    def _snapshot(self):
        """The estimator as it is now, whole: what a prediction reads while another thread may refit it.

        A fit swaps a new ``__dict__`` in (``transaction``) and never writes
        into the old one, so an object sharing the current one sees one model
        from start to end.
        """
        snapshot = object.__new__(type(self))
        snapshot.__dict__ = self.__dict__
        return snapshot

    def _n_threads(self):
        """OpenMP threads for a call outside ``fit``, from the current (validated) ``n_jobs``."""
        (n_jobs,) = self._runtime_params("n_jobs")
        return effective_n_threads(n_jobs)
