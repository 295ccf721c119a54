"""What every randfeat estimator shares: parameter validation and the fit transaction.

* ``ValidatedParamsMixin``: scikit-learn's declarative ``_parameter_constraints``
  (checked by ``_validate_params``, raising ``InvalidParameterError``), with
  two randfeat additions: an explanation appended to the message where
  randfeat knows more than "must be one of" (``_explain_invalid``), and the
  checks that involve several parameters at once
  (``_check_param_combinations``).
* ``fit_context``: scikit-learn's ``_fit_context`` (validate the parameters,
  then fit) wrapped in a transaction: fitted attributes of an earlier fit
  that the new one does not set are dropped, and a fit that raises (bad
  parameter, bad input, Ctrl-C, MemoryError) leaves the estimator exactly as
  it was before the call.

The feature maps' base class is the feature-map contract,
``randfeat._maps.contract.FeatureMap``.
"""

import functools
from numbers import Integral

from sklearn.base import _fit_context
from sklearn.utils._param_validation import InvalidParameterError, validate_parameter_constraints

from .threads import effective_n_threads
from .validation import N_JOBS_ZERO


def _fitted_attribute_names(estimator):
    # scikit-learn's convention: public fitted attributes end with "_".
    return [k for k in vars(estimator) if k.endswith("_") and not k.startswith("__")]


def fit_context(*, prefer_skip_nested_validation):
    """Decorate a ``fit``/``fit_transform``: validate parameters, fit, all or nothing.

    scikit-learn's ``_fit_context`` runs ``_validate_params`` before the
    method (and skips the validation of nested estimators' parameters when
    ``prefer_skip_nested_validation`` is True).  Around it, the state of the
    estimator (its ``__dict__``, shallow: fits assign new arrays, they never
    write into fitted ones) is saved; fitted attributes of the previous fit
    are dropped before fitting, so none survives that the new fit does not
    set; and if the method raises anything — including KeyboardInterrupt —
    the saved state is put back, so a fitted estimator still predicts as
    before.

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

    def decorator(fit_method):
        validated = _fit_context(prefer_skip_nested_validation=prefer_skip_nested_validation)(fit_method)

        @functools.wraps(fit_method)
        def transaction(estimator, *args, **kwargs):
            saved = dict(vars(estimator))
            try:
                for name in _fitted_attribute_names(estimator):
                    delattr(estimator, name)
                return validated(estimator, *args, **kwargs)
            except BaseException:
                vars(estimator).clear()
                vars(estimator).update(saved)
                raise

        return transaction

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

    def _validate_params(self):
        params = self.get_params(deep=False)
        caller = type(self).__name__
        # One parameter at a time, so that the explanation belongs to it.
        for name, constraints in self._parameter_constraints.items():
            try:
                validate_parameter_constraints({name: constraints}, {name: params[name]}, caller_name=caller)
            except InvalidParameterError as exc:
                explanation = self._explain_invalid(name, params[name])
                if not explanation:
                    raise
                raise InvalidParameterError(f"{exc} {explanation}") from None
        self._check_param_combinations()

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

    def _n_threads(self):
        """OpenMP threads for a call outside ``fit``, from the current (validated) ``n_jobs``."""
        (n_jobs,) = self._runtime_params("n_jobs")
        return effective_n_threads(n_jobs)
