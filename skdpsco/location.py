"""Private one-dimensional location estimates by the inverse-sensitivity mechanism.

Spec: ``shared/spec/asi_growth.md`` §3.2, §3.3 (the ``d = 1`` case), P11. Asi, Levy & Duchi's
gradient-based smooth inverse-sensitivity mechanism samples ``t`` with density proportional to
``exp(-epsilon n G_rho(t) / (2 L))`` where ``G_rho(t) = inf_{|u - t| <= rho} |f_S'(u)|``. In general
dimension it cannot be sampled (§3.3); in one dimension ``f_S'`` is monotone, ``G_rho`` has a
closed form, and the exponential mechanism over a **public grid** is exactly implementable.

Estimand: the minimiser of ``f_S(t) = mean_i |t - s_i|**p`` over ``[lower, upper]`` — the median
for ``p = 1``, the mean for ``p = 2``, an ``l_p`` location in between. Values are clipped to the
public bounds (a per-row map, free in privacy), so the minimiser lies in ``[lower, upper]``.

Score (§3.3). With the one-sided derivatives ``g_-(u) <= g_+(u)`` of ``f_S`` (both non-decreasing),
``dist(0, ∂f_S(u)) = max(0, g_-(u), -g_+(u))`` and, by monotonicity, for ``t`` in the grid::

    G_rho(t) = inf_{u in [a, b]} dist(0, ∂f_S(u)) = max(0, g_-(a), -g_+(b)),
    a = max(lower, t - rho), b = min(upper, t + rho).

(If ``g_-(a) > 0`` every ``u >= a`` has ``g_-(u) > 0``, the infimum is at ``a``; symmetrically at
``b``; otherwise ``∂f_S`` meets 0 in ``[a, b]``.) Each row contributes to ``g_+-`` a term in
``[-L, L]``, ``L = p (upper - lower)**(p - 1)``, so replacing a row moves ``g_+-`` and hence
``G_rho`` by at most ``2 L / n``.

Privacy (§3.2 note, P11, [erratum]): the exponential mechanism with a score of sensitivity
``Delta`` is ``epsilon``-DP with weights ``exp(-epsilon score / (2 Delta))`` (McSherry & Talwar
2007); the normalising constant moves too, so the paper's ``exp(-epsilon n G / (2 L))`` would be
``2 epsilon``-DP under this argument. Here the weights are ``exp(-epsilon n G_rho / (4 L))``:
pure ``epsilon``-DP under replace-one neighbours, for every public grid and ``rho``.
Its event (:func:`skdpsco.accounting.pure_dp_event`) is binary randomized response with ratio ``e**epsilon``, which
dominates every ``epsilon``-DP mechanism (Kairouz, Oh & Viswanath 2015), so it converts to
``(epsilon', delta)`` soundly in :func:`skdpsco.accounting.epsilon_of`.

Utility (Thm 1 in one dimension): every grid point within ``rho`` of the minimiser has score 0,
and the default ``rho`` (half the grid spacing) puts at least one grid point there; with
probability ``1 - beta`` the output has ``G_rho <= 4 L (ln(grid_size / beta)) / (n epsilon)``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ._secure import check_random_state_unset, is_secure, secure_generator, secure_mode
from .accounting import pure_dp_event

__all__ = [
    "LocationEstimate",
    "inverse_sensitivity_location",
    "inverse_sensitivity_scores",
    "one_sided_derivatives",
    "sample_exponential",
]

_CHUNK = 1 << 22  # entries of the (rows x grid) block evaluated at once for p > 1


def _location_generator(random_state) -> np.random.Generator:
    """``np.random.default_rng(random_state)``; in secure mode the OS's CSPRNG
    (:func:`skdpsco._secure.secure_generator`), or ``random_state`` itself when it is already a
    secure generator, and any other ``random_state`` refused."""
    if secure_mode():
        if is_secure(random_state):
            return random_state
        check_random_state_unset(random_state)
        return secure_generator()
    return np.random.default_rng(random_state)


def sample_exponential(rng: np.random.Generator, log_weights: np.ndarray) -> int:
    """The one draw of the exponential mechanism: an index with probability ``∝ exp(log_weights)``."""
    weights = np.exp(log_weights - np.max(log_weights))
    return int(rng.choice(weights.size, p=weights / weights.sum()))


def one_sided_derivatives(values: np.ndarray, points: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Left and right derivatives of ``f_S(t) = mean_i |t - s_i|**p`` at ``points``.

    ``p = 1``: ``g_+(t) = (#{s <= t} - #{s > t}) / n`` and ``g_-(t) = (#{s < t} - #{s >= t}) / n``,
    by sorting. ``p > 1``: ``f_S`` is differentiable, ``g_- = g_+ = mean_i p sign(t - s_i) |t - s_i|**(p-1)``.
    """
    n = values.size
    if p == 1.0:
        ordered = np.sort(values)
        at_most = np.searchsorted(ordered, points, side="right")
        below = np.searchsorted(ordered, points, side="left")
        return (2.0 * below - n) / n, (2.0 * at_most - n) / n
    total = np.zeros(points.size)
    step = max(1, _CHUNK // max(points.size, 1))
    for start in range(0, n, step):
        diff = points[None, :] - values[start : start + step, None]
        total += np.sum(np.sign(diff) * np.abs(diff) ** (p - 1.0), axis=0)
    derivative = p * total / n
    return derivative, derivative


def inverse_sensitivity_scores(
    values: np.ndarray, grid: np.ndarray, lower: float, upper: float, p: float, rho: float
) -> np.ndarray:
    """``G_rho(t) = max(0, g_-(max(lower, t - rho)), -g_+(min(upper, t + rho)))`` on ``grid`` (module docstring)."""
    left_points = np.maximum(lower, grid - rho)
    right_points = np.minimum(upper, grid + rho)
    left, _ = one_sided_derivatives(values, left_points, p)
    _, right = one_sided_derivatives(values, right_points, p)
    return np.maximum(0.0, np.maximum(left, -right))


@dataclass(frozen=True)
class LocationEstimate:
    """A private location estimate and its guarantee.

    Attributes
    ----------
    value : float
        The released grid point.
    dp_event : dp_accounting.DpEvent
        :func:`pure_dp_event` of ``epsilon``.
    epsilon : float
    lipschitz : float
        ``L = p (upper - lower)**(p - 1)``, the public constant of the score's sensitivity ``2 L / n``.
    rho : float
        Smoothing radius of the score.
    grid_size : int
    """

    value: float
    dp_event: object
    epsilon: float
    lipschitz: float
    rho: float
    grid_size: int


def _real(value, name: str) -> float:
    if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite real number; got {value!r}.")
    return float(value)


def inverse_sensitivity_location(
    values,
    epsilon: float,
    bounds: tuple[float, float],
    *,
    p: float = 1.0,
    grid_size: int = 1001,
    rho: float | None = None,
    random_state=None,
) -> LocationEstimate:
    """Pure ``epsilon``-DP estimate of ``argmin_t mean_i |t - s_i|**p`` over ``[lower, upper]``.

    The 1-D smooth inverse-sensitivity mechanism of Asi, Levy & Duchi 2021 (§3.2, §3.3) with the
    corrected exponent ``epsilon n G_rho / (4 L)`` (P11), sampled exactly over the public grid
    ``linspace(lower, upper, grid_size)``. ``p = 1`` estimates the median, ``p = 2`` the mean.

    Parameters
    ----------
    values : array-like of shape (n,)
        The private values; clipped to ``bounds`` (public, never computed from the data).
    epsilon : float
        Privacy parameter, > 0. Neighbours: replace one value (``n`` public).
    bounds : (float, float)
        Public ``lower < upper``.
    p : float, default=1.0
        Exponent ``>= 1`` of the location loss.
    grid_size : int, default=1001
        Number of public grid points (>= 2). Its spacing bounds the resolution of the estimate.
    rho : float or None, default=None
        Smoothing radius ``>= 0``; ``None``: half the grid spacing, so that the grid point nearest
        the minimiser has score 0.
    random_state : None, int or numpy.random.Generator
        A fixed seed is for reproducible experiments, not for production releases. In secure mode
        (``skdpsco.set_config(secure_noise=True)``) the draw comes from the operating system's
        CSPRNG and only ``None`` (or a secure generator) is accepted.

    Returns
    -------
    LocationEstimate
    """
    epsilon = _real(epsilon, "epsilon")
    if epsilon <= 0:
        raise ValueError(f"epsilon must be > 0; got {epsilon!r}.")
    lower, upper = (_real(b, "bounds") for b in bounds)
    if not lower < upper:
        raise ValueError(f"bounds must be (lower, upper) with lower < upper; got {bounds!r}.")
    p = _real(p, "p")
    if p < 1:
        raise ValueError(f"p must be >= 1 (a convex location loss); got {p!r}.")
    if not (isinstance(grid_size, numbers.Integral) and grid_size >= 2):
        raise ValueError(f"grid_size must be an integer >= 2; got {grid_size!r}.")
    grid = np.linspace(lower, upper, int(grid_size))
    rho = 0.5 * (grid[1] - grid[0]) if rho is None else _real(rho, "rho")
    if rho < 0:
        raise ValueError(f"rho must be >= 0; got {rho!r}.")
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or values.size < 1 or not np.all(np.isfinite(values)):
        raise ValueError("values must be a non-empty 1-D array of finite numbers.")
    values = np.clip(values, lower, upper)
    lipschitz = p * (upper - lower) ** (p - 1.0)
    scores = inverse_sensitivity_scores(values, grid, lower, upper, p, rho)
    index = sample_exponential(_location_generator(random_state), -epsilon * values.size * scores / (4.0 * lipschitz))
    return LocationEstimate(float(grid[index]), pure_dp_event(epsilon), epsilon, lipschitz, rho, int(grid_size))
