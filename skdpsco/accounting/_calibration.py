"""Calibration: the smallest noise, or the largest ``rho``, whose event meets a target (epsilon, delta).

Each solver asks for (epsilon, delta) and finds the smallest noise whose event meets it by
bisection on the event's epsilon (``DESIGN.md``, "Calibration"), converted by
:func:`~skdpsco.accounting.epsilon_of`.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable

import dp_accounting
import numpy as np

from ._conversion import _RDP_ORDERS, epsilon_of
from ._events import _check_delta, _check_epsilon, gaussian_event, zcdp_event


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


class UnreachableBudgetError(ValueError):
    """No noise parameter up to the calibration's largest (``1e12``) meets the target: the event is
    not private at ``(epsilon, delta)``, or only with noise beyond that (a budget whose epsilon is
    tiny beside its delta). ``epsilon`` and ``delta``: the target."""

    def __init__(self, epsilon: float, delta: float):
        super().__init__(f"No noise level meets the target privacy (epsilon={epsilon!r}, delta={delta!r}); "
                         "the event is not private.")
        self.epsilon, self.delta = epsilon, delta


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
    smallest such value; :class:`UnreachableBudgetError` when no ``x`` up to ``1e12`` does.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)

    def meets(x: float) -> bool:
        return epsilon_of(make_event(x), delta) <= epsilon

    hi = float(initial)
    while not meets(hi):
        hi *= 2.0
        if hi > 1e12:
            raise UnreachableBudgetError(epsilon, delta)
    lo = hi / 2.0
    while meets(lo):
        hi, lo = lo, lo / 2.0
        if lo < 1e-12:
            return hi
    return _bisect_feasible(meets, lo, hi, rtol)


@lru_cache(maxsize=256)
def gaussian_noise_multiplier(epsilon: float, delta: float) -> float:
    """Smallest ``sigma / Delta`` of one Gaussian release that is (epsilon, delta)-DP.

    One Gaussian release with replace-one sensitivity ``Delta`` meets (epsilon, delta) exactly
    when its noise is ``sigma = gaussian_noise_multiplier(epsilon, delta) * Delta``: the event
    depends on ``sigma / Delta`` only, so every solver that releases Gaussians calibrates
    through this one cached bisection (:func:`calibrate_noise` on ``gaussian_event(z, 1)``,
    converted exactly by :func:`exact_gaussian_epsilon`). ``1 / z`` is the ``mu`` of ``mu``-GDP (``feldman.md``
    §0.3, C4).
    """
    return calibrate_noise(lambda z: gaussian_event(z, 1.0), epsilon, delta)


@lru_cache(maxsize=256)
def calibrate_zcdp_rho(epsilon: float, delta: float, *, rtol: float = 1e-9) -> float:
    """Largest ``rho`` such that ``rho``-zCDP implies (epsilon, delta)-DP.

    Conversion: RDP accountant, Canonne–Kamath–Steinke 2020 Prop. 12 (``feldman.md`` §0.3, C3),
    minimised over the order grid. Reference values are the fixtures of ``feldman.md`` §0.3.
    The conversion ``eps(rho) = min_a a rho + log(1 - 1/a) - log(delta a) / (a - 1)`` (the RDP
    accountant's formula, orders ``a > 1.01`` of its grid) is inverted in closed form: ``rho`` meets
    epsilon at some order ``a`` iff ``rho <= (eps - log(1 - 1/a) + log(delta a) / (a - 1)) / a``,
    so the largest ``rho`` is the maximum of that over the grid, checked against
    :func:`epsilon_of` (a bisection to ``rtol`` if rounding put it above). Remembered per
    ``(epsilon, delta, rtol)``: every plan of a zCDP solver starts here.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)
    orders = _RDP_ORDERS[_RDP_ORDERS > 1.01]
    per_order = (epsilon - np.log1p(-1.0 / orders) + np.log(delta * orders) / (orders - 1.0)) / orders
    rho = float(per_order.max()) * (1.0 - 1e-12)
    if rho > 0 and epsilon_of(zcdp_event(rho), delta) <= epsilon:
        return rho
    # Work on x = 1 / rho so that "larger x is more private", as in calibrate_noise.
    inverse_rho = calibrate_noise(lambda x: zcdp_event(1.0 / x), epsilon, delta, rtol=rtol)
    return 1.0 / inverse_rho
