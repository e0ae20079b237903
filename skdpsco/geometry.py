"""Norms, ball projections and the l_p potentials of mirror descent / FTRL.

Spec: ``shared/spec/ftrl_mirror.md`` §1.2, §1.4, §2.3, §6.3 item 7. Pure functions of arrays; an
array of any shape is one vector of its entries (entrywise norms: the Frobenius norm for ``p = 2``,
as for the multiclass coefficient matrices of :mod:`skdpsco.losses`).

Potentials (§1.4)
-----------------
For ``1 < p <= 2`` and ``q = p / (p - 1)`` the dual exponent:

* ``Psi_p(w) = ||w||_p**2 / (2 (p - 1))`` is 1-strongly convex w.r.t. ``||.||_p``
  (``Psi_2 = ||w||_2**2 / 2``, the Euclidean potential);
* its conjugate is ``Psi_p*(theta) = (p - 1) ||theta||_q**2 / 2``;
* mirror map ``grad Psi_p(w) = sign(w) |w|**(p-1) ||w||_p**(2-p) / (p - 1)`` and inverse map
  ``grad Psi_p*(theta) = (p - 1) sign(theta) |theta|**(q-1) ||theta||_q**(2-q)``. Both are
  ``power_map(., r) = sign(x) |x|**(r-1) ||x||_r**(2-r)`` up to a factor (``(p - 1)(q - 1) = 1``),
  positively homogeneous of degree 1: they are evaluated on ``x / ||x||_inf`` and rescaled, so that
  ``|x|**(q-1)`` neither overflows nor underflows harmfully when ``q`` is large (§2.3 "Numerics").

l1 geometry: ``p = 1 + 1 / ln d`` (Nemirovski & Yudin; :func:`l1_geometry_exponent`), for which
``||w||_1 <= e ||w||_p`` and ``q = 1 + ln d``.

FTRL steps (§2.3)
-----------------
The lazy update is ``w = argmin_{w in W} Psi(w) - <theta, w>`` with ``theta = -eta G`` (the scaled,
negated sum of the noisy gradients). :func:`ftrl_step` dispatches on ``W``:

* ``W = R^d``, Euclidean potential: ``w = theta``;
* ``W`` the l2 ball, Euclidean potential: the Euclidean projection of ``theta`` (:func:`project_l2_ball`);
* ``W`` the l1 ball, Euclidean potential: the Euclidean projection onto the l1 ball, exact and
  sort-based (Duchi, Shalev-Shwartz, Singer & Chandra 2008, Fig. 1; :func:`project_l1_ball`);
* ``W`` the l_p ball, l_p potential: ``Psi_p`` depends on ``||w||_p`` only, so the Bregman projection
  is radial: ``grad Psi_p*(theta)`` scaled down to norm ``R`` (§2.3; :func:`lp_ball_step`);
* ``W`` the l1 ball, l_p potential (the spec's "other W", §2.3): by the KKT conditions
  ``grad Psi_p(w) = theta - lam s`` with ``s`` in the subdifferential of ``||.||_1`` at ``w``, i.e.
  ``w = grad Psi_p*(soft_threshold(theta, lam))``; ``lam >= 0`` is the root of the non-increasing
  ``lam -> ||w(lam)||_1 = R`` (the penalty of a penalised strictly convex problem does not increase
  with its weight), found on the sorted magnitudes (:func:`lp_l1_ball_step`). At ``p = 2`` this is
  Duchi's projection.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

__all__ = [
    "CONSTRAINTS",
    "dual_exponent",
    "ftrl_step",
    "l1_geometry_exponent",
    "lp_ball_step",
    "lp_inverse_mirror_map",
    "lp_l1_ball_step",
    "lp_mirror_map",
    "lp_norm",
    "lp_potential",
    "lp_potential_conjugate",
    "power_map",
    "project_l1_ball",
    "project_l2_ball",
]

CONSTRAINTS = (None, "l2", "l1", "lp")
"""Domains of :func:`ftrl_step`: ``R^d``, and the l2, l1 and l_p balls of radius ``R``."""

def dual_exponent(p: float) -> float:
    """``q = p / (p - 1)``, so that ``1/p + 1/q = 1`` (§1.2)."""
    return p / (p - 1.0)


def l1_geometry_exponent(dimension: int) -> float:
    """``p = 1 + 1 / ln d``, capped at 2 for ``d <= e`` (where the l2 geometry is already best).

    With it ``||w||_1 <= d**(1 - 1/p) ||w||_p <= e ||w||_p`` and the dual exponent is
    ``q = 1 + ln d`` (§1.4, last item).
    """
    return 1.0 + 1.0 / max(1.0, math.log(dimension))


def lp_norm(x: np.ndarray, p: float) -> float:
    """``||x||_p`` of all entries, computed on ``x / ||x||_inf`` (no overflow for large ``p``)."""
    a = np.abs(np.ravel(x))
    scale = a.max(initial=0.0)
    if scale == 0.0:
        return 0.0
    return float(scale * np.sum((a / scale) ** p) ** (1.0 / p))


def lp_potential(w: np.ndarray, p: float) -> float:
    """``Psi_p(w) = ||w||_p**2 / (2 (p - 1))`` (§1.4)."""
    return lp_norm(w, p) ** 2 / (2.0 * (p - 1.0))


def lp_potential_conjugate(theta: np.ndarray, p: float) -> float:
    """``Psi_p*(theta) = (p - 1) ||theta||_q**2 / 2`` (§1.4)."""
    return (p - 1.0) * lp_norm(theta, dual_exponent(p)) ** 2 / 2.0


def power_map(x: np.ndarray, r: float) -> np.ndarray:
    """``sign(x) |x|**(r-1) ||x||_r**(2-r)``, the gradient of ``||x||_r**2 / 2``; 0 at 0."""
    x = np.asarray(x, dtype=float)
    scale = np.abs(x).max(initial=0.0)
    if scale == 0.0:
        return np.zeros_like(x)
    u = x / scale
    powers = np.abs(u) ** (r - 1.0)
    return scale * np.sign(u) * powers * np.sum(powers * np.abs(u)) ** ((2.0 - r) / r)


def lp_mirror_map(w: np.ndarray, p: float) -> np.ndarray:
    """``grad Psi_p(w)``, primal to dual (§1.4)."""
    return power_map(w, p) / (p - 1.0)


def lp_inverse_mirror_map(theta: np.ndarray, p: float) -> np.ndarray:
    """``grad Psi_p*(theta)``, dual to primal (§1.4); the inverse of :func:`lp_mirror_map`."""
    return (p - 1.0) * power_map(theta, dual_exponent(p))


def project_l2_ball(x: np.ndarray, radius: float | None) -> np.ndarray:
    """Euclidean projection onto ``{||w||_2 <= R}``: ``x min(1, R / ||x||_2)``; ``None``: ``R^d``."""
    if radius is None:
        return x
    length = np.linalg.norm(x)
    return x if length <= radius else x * (radius / length)


def lp_ball_step(theta: np.ndarray, p: float, radius: float | None) -> np.ndarray:
    """``argmin_{||w||_p <= R} Psi_p(w) - <theta, w>`` (§2.3): ``grad Psi_p*(theta)``, whose l_p norm
    is ``(p - 1) ||theta||_q``, scaled down to ``R`` if longer. ``radius=None``: no constraint."""
    w = lp_inverse_mirror_map(theta, p)
    if radius is None:
        return w
    length = lp_norm(w, p)
    return w if length <= radius else w * (radius / length)


def project_l1_ball(x: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto ``{||w||_1 <= R}``: exact, sort-based (Duchi et al. 2008, Fig. 1).

    Soft thresholding ``sign(x) (|x| - lam)_+`` with ``lam = (sum_{j <= k} a_j - R) / k``, ``a`` the
    magnitudes in decreasing order and ``k`` the largest index with ``a_k > (sum_{j <= k} a_j - R) / k``.
    """
    x = np.asarray(x, dtype=float)
    a = np.abs(x)
    if a.sum() <= radius:
        return x.copy()
    ordered = np.sort(np.ravel(a))[::-1]
    excess = np.cumsum(ordered) - radius
    k = np.flatnonzero(ordered * np.arange(1, ordered.size + 1) > excess)[-1]
    lam = excess[k] / (k + 1)
    return np.sign(x) * np.maximum(a - lam, 0.0)


def _thresholded_l1(magnitudes: np.ndarray, lam: float, q: float, p: float) -> float:
    """``||grad Psi_p*(a - lam)||_1`` for the decreasing magnitudes ``a`` above ``lam`` (all > lam)."""
    s = magnitudes - lam
    if s.size == 0 or s[0] <= 0.0:
        return 0.0
    powers = (s / s[0]) ** (q - 1.0)
    return float((p - 1.0) * s[0] * np.sum(powers) * np.sum(powers * (s / s[0])) ** ((2.0 - q) / q))


def _largest(a: np.ndarray, k: int) -> np.ndarray:
    """The ``k + 1`` largest entries of ``a`` in decreasing order, padded with one 0 if ``k = a.size``."""
    if k >= a.size:
        return np.append(np.sort(a)[::-1], 0.0)
    return np.sort(np.partition(a, a.size - k - 1)[a.size - k - 1 :])[::-1]


def lp_l1_ball_step(theta: np.ndarray, p: float, radius: float) -> np.ndarray:
    """``argmin_{||w||_1 <= R} Psi_p(w) - <theta, w>``: the Bregman projection onto the l1 ball.

    ``w = grad Psi_p*(soft_threshold(theta, lam))`` with the smallest ``lam >= 0`` giving
    ``||w||_1 <= R`` (module docstring). With ``a`` the magnitudes in decreasing order, only the top
    ``k`` entries are active for ``lam`` in ``[a_{k+1}, a_k]``. If the ball binds, the candidates are
    the ``K`` largest magnitudes, ``K`` grown fourfold from 64 until the active set is known to lie
    among them (a step costs ``O(d + K log K)``, not a full sort); ``k`` is found by bisection over
    the breakpoints and ``lam`` by Brent's method on its segment. The result is rescaled onto the
    ball against the root finder's last-digit error.
    """
    theta = np.asarray(theta, dtype=float)
    w = lp_inverse_mirror_map(theta, p)
    if np.abs(w).sum() <= radius:
        return w
    magnitudes = np.abs(np.ravel(theta))
    q = dual_exponent(p)
    n_candidates = min(magnitudes.size, 64)
    a = _largest(magnitudes, n_candidates)
    while _thresholded_l1(a[:-1], a[-1], q, p) < radius:
        if n_candidates == magnitudes.size:  # ||w(0)||_1 = R up to rounding
            return w * (radius / np.abs(w).sum())
        n_candidates = min(magnitudes.size, 4 * n_candidates)
        a = _largest(magnitudes, n_candidates)
    lo, hi = 1, n_candidates  # smallest k with ||w(a_{k+1})||_1 >= R
    while lo < hi:
        mid = (lo + hi) // 2
        if _thresholded_l1(a[:mid], a[mid], q, p) >= radius:
            hi = mid
        else:
            lo = mid + 1
    k = lo
    if a[k - 1] == a[k]:
        lam = a[k]
    else:
        lam = brentq(lambda t: _thresholded_l1(a[:k], t, q, p) - radius, a[k], a[k - 1], xtol=1e-15 * a[0])
    w = np.zeros_like(theta)
    active = np.abs(theta) > lam
    w[active] = lp_inverse_mirror_map(np.sign(theta[active]) * (np.abs(theta[active]) - lam), p)
    length = np.abs(w).sum()
    return w if length <= radius else w * (radius / length)


def ftrl_step(theta: np.ndarray, p: float, constraint: str | None, radius: float | None) -> np.ndarray:
    """``argmin_{w in W} Psi_p(w) - <theta, w>`` for the domains of :data:`CONSTRAINTS` (§2.3).

    Parameters
    ----------
    theta : ndarray
        ``-eta G``, the scaled negated sum of the gradients (dual space).
    p : float
        Exponent of the potential, ``1 < p <= 2`` (``2``: Euclidean).
    constraint : {None, 'l2', 'l1', 'lp'}
        ``None``: ``R^d``; otherwise the ball of that norm (``'lp'``: the l_p ball of this ``p``).
    radius : float or None
        ``R`` of the ball (ignored for ``None``).
    """
    theta = np.asarray(theta, dtype=float)
    if constraint is None:
        radius = None
    if p == 2.0 and constraint in (None, "l2", "lp"):
        return project_l2_ball(theta, radius)
    if constraint in (None, "lp"):
        return lp_ball_step(theta, p, radius)
    if constraint == "l1":
        return project_l1_ball(theta, radius) if p == 2.0 else lp_l1_ball_step(theta, p, radius)
    raise ValueError(f"constraint must be one of {CONSTRAINTS} ('l2' only with p = 2); got {constraint!r}, p={p!r}.")
