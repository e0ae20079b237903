"""Privacy accounting on ``dp_accounting`` events.

Every mechanism in skdpsco is described by an immutable :class:`dp_accounting.DpEvent`
under the **replace-one** neighbouring relation (``DESIGN.md``, "Privacy model"), and
converted to (epsilon, delta) here and only here.

Sensitivity convention
----------------------
``dp_accounting`` reads :class:`~dp_accounting.GaussianDpEvent` differently in its two
accountants under ``REPLACE_ONE`` (pinned by ``tests/test_accounting.py``):

* the RDP accountant charges ``alpha / (2 z**2)`` for ``GaussianDpEvent(z)``: ``z`` is the
  noise standard deviation over the full replace-one ``l2``-sensitivity ``Delta`` (the distance
  between the two means), which is the closed form ``alpha Delta**2 / (2 sigma**2)``;
* the PLD accountant reads ``z`` as ``sigma / C`` for a per-record contribution ``C`` and shifts
  the mean by ``2 C`` on replacement, i.e. ``mu = 2 / z``: twice the RDP sensitivity.

skdpsco stores the RDP reading, ``noise_multiplier = sigma / Delta`` with ``Delta`` the
replace-one sensitivity (:func:`gaussian_event`), and rewrites Gaussian events to
``2 sigma / Delta`` before handing them to the PLD accountant (:func:`_as_pld_event`), so
both accountants see the same mechanism.

Conversion
----------
:func:`epsilon_of` uses every accountant that supports the event (PLD, exact for Gaussian
releases; RDP with a dense order grid and the conversion of Canonne, Kamath & Steinke 2020,
Prop. 12, for zCDP and amplification-by-iteration bounds, which are proven in RDP only) and
returns the smallest epsilon: each is a valid upper bound.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Callable

import dp_accounting
import numpy as np
from dp_accounting import pld, rdp

__all__ = [
    "NEIGHBORING_RELATION",
    "amplification_by_iteration_rho",
    "BudgetExceededError",
    "FitRecord",
    "PrivacyAccountant",
    "calibrate_noise",
    "calibrate_zcdp_rho",
    "epsilon_of",
    "gaussian_event",
    "get_accountant",
    "set_accountant",
    "zcdp_event",
]

NEIGHBORING_RELATION = dp_accounting.NeighboringRelation.REPLACE_ONE
"""The one neighbouring relation of the library: datasets of equal, public size ``n`` that
differ in one row."""

# Dense grid of Renyi orders: zCDP bounds are optimised at alpha = 1 + sqrt(ln(1/delta) / rho),
# which ranges from ~1.1 to ~1e4 over the budgets users ask for.
_RDP_ORDERS = np.unique(
    np.concatenate([np.linspace(1.02, 2.0, 100), np.geomspace(2.0, 1e5, 2000)])
)
# Pessimistic PLD discretisation: a valid upper bound at any interval; 1e-3 costs < 1e-6 in
# epsilon against 1e-4 on a Gaussian at epsilon ~ 1 and is ten times faster.
_PLD_DISCRETIZATION = 1e-3


def gaussian_event(noise_std: float, sensitivity: float) -> dp_accounting.GaussianDpEvent:
    """Event of one Gaussian release ``f(D) + N(0, noise_std**2 I)``.

    Parameters
    ----------
    noise_std : float
        Standard deviation of the Gaussian noise per coordinate.
    sensitivity : float
        Replace-one ``l2``-sensitivity ``sup ||f(D) - f(D')||_2`` over neighbouring datasets.

    Returns
    -------
    dp_accounting.GaussianDpEvent
        With ``noise_multiplier = noise_std / sensitivity`` (the RDP accountant's reading
        under ``REPLACE_ONE``; see the module docstring).
    """
    if not (noise_std > 0 and sensitivity > 0):
        raise ValueError(
            f"noise_std and sensitivity must be positive; got {noise_std!r}, {sensitivity!r}."
        )
    return dp_accounting.GaussianDpEvent(noise_multiplier=float(noise_std) / float(sensitivity))


def zcdp_event(rho: float) -> dp_accounting.ZCDpEvent:
    """Event of a mechanism proven ``rho``-zCDP, i.e. ``(alpha, alpha rho)``-RDP for all alpha > 1.

    Amplification-by-iteration bounds (Feldman et al. 2018, Thm 22; ``feldman.md`` §0.4) are
    of this form. Note that FKT20's ``rho`` is ``sqrt(2 rho_zcdp)`` (``feldman.md`` §0.2).
    """
    if not rho >= 0:
        raise ValueError(f"rho must be >= 0; got {rho!r}.")
    return dp_accounting.ZCDpEvent(rho=float(rho))


def amplification_by_iteration_rho(
    lipschitz: float, steps, batch_sizes, noise_stds
) -> float:
    """zCDP ``rho`` of one pass of projected noisy SGD on disjoint batches, last iterate released.

    Privacy amplification by iteration (Feldman, Mironov, Talwar & Thakurta 2018, Thm 22) in the
    single-difference form of Feldman, Koren & Talwar 2020 (Cor. 2.14, Thm 3.1; ``feldman.md``
    §0.4 ``pabi_rho_z`` and §A1): replacing a row of batch ``t`` shifts step ``t`` by at most
    ``s_t = 2 L eta_t / B_t`` and every later step is a contraction plus Gaussian noise of standard
    deviation ``eta_s sigma_s``, so

        rho = max_t s_t**2 / (2 sum_{s >= t} eta_s**2 sigma_s**2).

    Valid only when every update map is non-expansive: ``eta_t <= 2 / beta`` for a convex
    ``beta``-smooth loss (FMTT Prop. 18); the solvers enforce it.

    Parameters
    ----------
    lipschitz : float
        ``L``, bound on the norm of every per-row gradient on the domain.
    steps, batch_sizes, noise_stds : array-like of shape (T,)
        Step sizes ``eta_t``, batch sizes ``B_t`` (gradients are batch averages) and standard
        deviations ``sigma_t`` of the Gaussian noise added to each averaged gradient.

    Returns
    -------
    float
        ``rho`` of ``rho``-zCDP (FKT's ``rho`` is ``sqrt(2 rho)``).
    """
    steps = np.asarray(steps, dtype=float)
    batch_sizes = np.asarray(batch_sizes, dtype=float)
    noise_stds = np.broadcast_to(np.asarray(noise_stds, dtype=float), steps.shape)
    if not (steps.shape == batch_sizes.shape and steps.ndim == 1 and steps.size > 0):
        raise ValueError("steps and batch_sizes must be non-empty 1-D arrays of equal length.")
    if np.any(steps <= 0) or np.any(batch_sizes < 1) or np.any(noise_stds <= 0):
        raise ValueError("steps and noise_stds must be > 0 and batch sizes >= 1.")
    tail_variance = np.cumsum((steps * noise_stds)[::-1] ** 2)[::-1]
    shift = 2.0 * lipschitz * steps / batch_sizes
    return float(np.max(shift**2 / (2.0 * tail_variance)))


def _as_pld_event(event: dp_accounting.DpEvent) -> dp_accounting.DpEvent:
    """Rewrite Gaussian events from the library convention to the PLD accountant's."""
    if isinstance(event, dp_accounting.GaussianDpEvent):
        return dp_accounting.GaussianDpEvent(noise_multiplier=2.0 * event.noise_multiplier)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return dp_accounting.ComposedDpEvent([_as_pld_event(e) for e in event.events])
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return dp_accounting.SelfComposedDpEvent(_as_pld_event(event.event), event.count)
    return event


def _pld_accountant() -> pld.PLDAccountant:
    return pld.PLDAccountant(NEIGHBORING_RELATION, value_discretization_interval=_PLD_DISCRETIZATION)


def _rdp_accountant() -> rdp.RdpAccountant:
    return rdp.RdpAccountant(orders=_RDP_ORDERS, neighboring_relation=NEIGHBORING_RELATION)


def _check_delta(delta: float) -> None:
    if not (isinstance(delta, (int, float, np.floating)) and 0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1); got {delta!r}.")


def epsilon_of(event: dp_accounting.DpEvent, delta: float) -> float:
    """Epsilon spent by ``event`` at ``delta``, with the tightest valid accountant.

    Parameters
    ----------
    event : dp_accounting.DpEvent
        In the library convention (:func:`gaussian_event`, :func:`zcdp_event`, compositions).
    delta : float
        In (0, 1).

    Returns
    -------
    float
        The smallest epsilon among the accountants that support ``event`` (PLD with
        pessimistic discretisation; RDP on a dense order grid). ``inf`` for a non-private
        event.

    Raises
    ------
    ValueError
        If no accountant supports the event.
    """
    _check_delta(delta)
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return 0.0
    candidates = []
    pld_event = _as_pld_event(event)
    accountant = _pld_accountant()
    if accountant.supports(pld_event):
        candidates.append(accountant.compose(pld_event).get_epsilon(delta))
    accountant = _rdp_accountant()
    if accountant.supports(event):
        candidates.append(accountant.compose(event).get_epsilon(delta))
    if not candidates:
        raise ValueError(f"No accountant supports the event {event!r} under REPLACE_ONE.")
    return float(min(candidates))


def _bisect_feasible(
    is_feasible: Callable[[float], bool], infeasible: float, feasible: float, rtol: float
) -> float:
    """Bisect in log-space between an infeasible and a feasible point; return a feasible one."""
    for _ in range(200):
        if abs(feasible - infeasible) <= rtol * abs(feasible):
            break
        mid = math.sqrt(feasible * infeasible)
        if is_feasible(mid):
            feasible = mid
        else:
            infeasible = mid
    return feasible


def calibrate_noise(
    make_event: Callable[[float], dp_accounting.DpEvent],
    epsilon: float,
    delta: float,
    *,
    initial: float = 1.0,
    rtol: float = 1e-6,
) -> float:
    """Smallest noise parameter whose event meets (epsilon, delta), by bisection.

    ``make_event(x)`` must be private for large ``x`` and its epsilon non-increasing in ``x``
    (more noise, less privacy loss). The returned ``x`` always satisfies
    ``epsilon_of(make_event(x), delta) <= epsilon`` and is within ``rtol`` (relative) of the
    smallest such value.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)

    def meets(x: float) -> bool:
        return epsilon_of(make_event(x), delta) <= epsilon

    hi = float(initial)
    while not meets(hi):
        hi *= 2.0
        if hi > 1e12:
            raise ValueError("No noise level meets the target privacy; the event is not private.")
    lo = hi / 2.0
    while meets(lo):
        hi, lo = lo, lo / 2.0
        if lo < 1e-12:
            return hi
    return _bisect_feasible(meets, lo, hi, rtol)


def calibrate_zcdp_rho(epsilon: float, delta: float, *, rtol: float = 1e-9) -> float:
    """Largest ``rho`` such that ``rho``-zCDP implies (epsilon, delta)-DP.

    Conversion: RDP accountant, Canonne–Kamath–Steinke 2020 Prop. 12 (``feldman.md`` §0.3, C3),
    minimised over the order grid. Reference values are the fixtures of ``feldman.md`` §0.3.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)
    # Work on x = 1 / rho so that "larger x is more private", as in calibrate_noise.
    inverse_rho = calibrate_noise(lambda x: zcdp_event(1.0 / x), epsilon, delta, rtol=rtol)
    return 1.0 / inverse_rho


def _check_epsilon(epsilon: float) -> None:
    if not (isinstance(epsilon, (int, float, np.floating)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0; got {epsilon!r}.")


class BudgetExceededError(ValueError):
    """A fit would exceed the privacy budget of its accountant; nothing was fitted or recorded."""


@dataclass(frozen=True)
class FitRecord:
    """One accounted release: who made it, with which parameters, and its event."""

    estimator: str
    params: dict
    event: dp_accounting.DpEvent
    epsilon: float
    delta: float


class PrivacyAccountant:
    """Ledger of every accounted fit, with an optional total (epsilon, delta) budget.

    All skdpsco estimators record the event of each fit with an accountant: the one passed as
    their ``accountant`` parameter, else the shared default (:func:`get_accountant`). The
    composition of everything recorded is converted with :func:`epsilon_of`.

    Parameters
    ----------
    epsilon : float or None, default=None
        Total epsilon budget. ``None``: no budget (the ledger only records).
    delta : float or None, default=None
        The delta at which the budget is measured. Required when ``epsilon`` is given.

    Notes
    -----
    * A fit is checked against the budget **before it reads the data**: if the composition of
      the recorded events and the new one would exceed ``epsilon`` at ``delta``, the fit raises
      :class:`BudgetExceededError`; nothing is fitted and nothing is recorded. A fit that has
      started training is charged even if it later fails.
    * Used as a context manager, the accountant is the shared default inside the block.
    * :func:`sklearn.base.clone` returns the same accountant (``__sklearn_clone__``), so the fits
      of ``GridSearchCV`` or ``cross_val_score`` on clones are recorded on one ledger. Fits in
      other processes (``n_jobs > 1`` with process-based backends) are recorded on a copy in that
      process and are lost to this ledger; use ``n_jobs=1`` or a thread backend when accounting.
    * Thread-safe: checking and recording are one atomic step.
    """

    def __init__(self, epsilon: float | None = None, delta: float | None = None):
        if epsilon is not None:
            _check_epsilon(epsilon)
            if delta is None:
                raise ValueError("delta is required with an epsilon budget; e.g. delta=1e-5.")
        if delta is not None:
            _check_delta(delta)
        self.epsilon = epsilon
        self.delta = delta
        self._records: list[FitRecord] = []
        self._lock = threading.RLock()
        self._previous_defaults: list[PrivacyAccountant] = []

    # -- sklearn / copy protocol ---------------------------------------------------------
    def __sklearn_clone__(self):
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"]
        state["_previous_defaults"] = []
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        budget = "no budget" if self.epsilon is None else f"budget=({self.epsilon}, {self.delta})"
        return f"PrivacyAccountant({budget}, fits={len(self._records)})"

    # -- ledger -----------------------------------------------------------------------------
    @property
    def history(self) -> tuple[FitRecord, ...]:
        """The recorded fits, oldest first."""
        with self._lock:
            return tuple(self._records)

    def _composed(self, extra: dp_accounting.DpEvent | None = None) -> dp_accounting.DpEvent:
        events = [record.event for record in self._records]
        if extra is not None:
            events.append(extra)
        if not events:
            return dp_accounting.NoOpDpEvent()
        return dp_accounting.ComposedDpEvent(events)

    def _reporting_delta(self, extra_delta: float = 0.0) -> float:
        if self.delta is not None:
            return self.delta
        # No budget delta: report at the sum of the fits' deltas (any delta gives a valid
        # (epsilon, delta) pair of the composition; this one matches basic composition).
        total = sum(record.delta for record in self._records) + extra_delta
        return min(total, 1.0 - 1e-12)

    def spent(self) -> tuple[float, float]:
        """(epsilon, delta) of the composition of every recorded fit.

        Measured at the budget's ``delta``, or at the sum of the fits' deltas when there is no
        budget. ``(0.0, 0.0)`` before any fit.
        """
        with self._lock:
            if not self._records:
                return 0.0, 0.0
            delta = self._reporting_delta()
            return epsilon_of(self._composed(), delta), delta

    def remaining(self) -> float | None:
        """Epsilon left in the budget at its delta (``None`` without a budget)."""
        if self.epsilon is None:
            return None
        return max(self.epsilon - self.spent()[0], 0.0)

    def charge(
        self,
        event: dp_accounting.DpEvent,
        *,
        estimator: str,
        params: dict[str, Any],
        epsilon: float,
        delta: float,
    ) -> FitRecord:
        """Check ``event`` against the budget and record it, atomically.

        Raises
        ------
        BudgetExceededError
            If recording ``event`` would exceed the budget; nothing is recorded.
        """
        with self._lock:
            if self.epsilon is not None:
                projected = epsilon_of(self._composed(event), self.delta)
                if projected > self.epsilon:
                    spent = epsilon_of(self._composed(), self.delta) if self._records else 0.0
                    raise BudgetExceededError(
                        f"This fit of {estimator} would raise the privacy spent from epsilon="
                        f"{spent:.4g} to {projected:.4g} at delta={self.delta:g}, above the "
                        f"accountant's budget epsilon={self.epsilon:g}. Nothing was fitted. Lower "
                        "the estimator's epsilon, or use a PrivacyAccountant with a larger budget."
                    )
            record = FitRecord(estimator, dict(params), event, float(epsilon), float(delta))
            self._records.append(record)
            return record

    def reset(self) -> None:
        """Forget every recorded fit (for a new, disjoint dataset)."""
        with self._lock:
            self._records.clear()

    # -- shared default ---------------------------------------------------------------------
    def __enter__(self) -> PrivacyAccountant:
        self._previous_defaults.append(set_accountant(self))
        return self

    def __exit__(self, *exc_info) -> None:
        set_accountant(self._previous_defaults.pop())


_default_lock = threading.Lock()
_default_accountant = PrivacyAccountant()


def get_accountant() -> PrivacyAccountant:
    """The shared default accountant (no budget unless replaced)."""
    return _default_accountant


def set_accountant(accountant: PrivacyAccountant) -> PrivacyAccountant:
    """Replace the shared default accountant; return the previous one."""
    global _default_accountant
    if not isinstance(accountant, PrivacyAccountant):
        raise TypeError(f"accountant must be a PrivacyAccountant; got {type(accountant).__name__}.")
    with _default_lock:
        previous, _default_accountant = _default_accountant, accountant
    return previous
