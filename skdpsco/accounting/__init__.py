"""Privacy accounting on ``dp_accounting`` events.

Every mechanism in skdpsco is described by an immutable :class:`dp_accounting.DpEvent` under the
**replace-one** neighbouring relation (``DESIGN.md``, "Privacy model"), and converted to
(epsilon, delta) here and only here. One responsibility a module, imports going one way
(events <- conversion <- calibration, ledger):

* :mod:`skdpsco.accounting._events`: the event constructors and skdpsco's own events, the
  sensitivity convention of a Gaussian event (the RDP accountant's reading, pinned by
  ``tests/test_accounting.py``), and the JSON form of events;
* :mod:`skdpsco.accounting._conversion`: :func:`epsilon_of`, the tightest valid conversion of an
  event, and the exact privacy curves it checks every accountant against;
* :mod:`skdpsco.accounting._calibration`: the smallest noise (or largest zCDP ``rho``) meeting a
  target (epsilon, delta);
* :mod:`skdpsco.accounting._ledger`: :class:`PrivacyAccountant`, the ledger of fits with its
  budget, and the shared default (:func:`get_accountant`, :func:`set_accountant`);
* :mod:`skdpsco.accounting._remote`: the calls by which a copy of an in-memory ledger in another
  process charges the ledger itself, in the process that owns it.

Every name below is importable from ``skdpsco.accounting``; the modules' docstrings hold the
details (the sensitivity convention in ``_events``, the choice of accountant in ``_conversion``).
"""

# The private names below are read by tests and benchmarks through ``skdpsco.accounting``.
from ._calibration import UnreachableBudgetError, calibrate_noise, calibrate_zcdp_rho, gaussian_noise_multiplier
from ._conversion import (
    _MIXTURE_BINS,
    _RDP_ORDERS,
    _SAMPLED_RDP_ORDERS,
    _SELECTION_RDP_ORDERS,
    DELTA_DIVISOR,
    AccountingError,
    _contains,
    _exact_lower_bound,
    _gaussian_and_randomized_response_parts,
    _mixture_epsilon,
    _rdp_accountant,
    epsilon_of,
    exact_gaussian_epsilon,
    exact_randomized_response_epsilon,
    objective_perturbation_epsilon,
)
from ._events import (
    _EVENT_TYPES,
    NEIGHBORING_RELATION,
    FailureProbabilityDpEvent,
    FixedOrderRdpDpEvent,
    ObjectivePerturbationDpEvent,
    amplification_by_iteration_rho,
    dp_event_from_json,
    dp_event_to_json,
    gaussian_event,
    pure_dp_event,
    wang_max_hits,
    wang_uniform_stability_bound,
    zcdp_event,
)
from ._ledger import (
    BudgetExceededError,
    FitRecord,
    LedgerProcessError,
    PrivacyAccountant,
    ResetRecord,
    _Composition,
    get_accountant,
    ledger_summary,
    set_accountant,
)

__all__ = [
    "NEIGHBORING_RELATION",
    "UnreachableBudgetError",
    "AccountingError",
    "exact_gaussian_epsilon",
    "exact_randomized_response_epsilon",
    "amplification_by_iteration_rho",
    "BudgetExceededError",
    "FitRecord",
    "LedgerProcessError",
    "FixedOrderRdpDpEvent",
    "FailureProbabilityDpEvent",
    "PrivacyAccountant",
    "ResetRecord",
    "calibrate_noise",
    "calibrate_zcdp_rho",
    "dp_event_from_json",
    "dp_event_to_json",
    "epsilon_of",
    "gaussian_event",
    "gaussian_noise_multiplier",
    "pure_dp_event",
    "DELTA_DIVISOR",
    "ObjectivePerturbationDpEvent",
    "objective_perturbation_epsilon",
    "get_accountant",
    "ledger_summary",
    "set_accountant",
    "wang_max_hits",
    "wang_uniform_stability_bound",
    "zcdp_event",
]
