"""Certified minimisation of a smooth, strongly convex function over a ball (deterministic).

Phased-ERM (``feldman.md`` §A7, "Deterministic alternative [derived, recommended]") releases a
noisy approximate minimiser ``w`` of a regularised empirical risk ``F``. Its sensitivity counts
the optimisation error ``||w - w_hat|| <= tau`` on both neighbouring datasets, so that error must
be *guaranteed*, not merely likely (pitfall D14: a solver that fails with some probability adds
that probability to delta). This module guarantees it with the gradient-mapping certificate:

for ``F`` ``beta``-smooth and ``mu``-strongly convex on a closed convex ``K`` with minimiser
``w_hat``, the gradient mapping ``G(w) = beta (w - Pi_K(w - grad F(w) / beta))`` satisfies
``<G(w), w - w_hat> >= ||G(w)||**2 / (2 beta) + mu ||w - w_hat||**2 / 2`` (Nesterov 2004,
*Introductory Lectures on Convex Optimization*, Thm 2.2.7 with ``x = w_hat``, using
``F(w_hat) <= F(Pi_K(w - grad F(w) / beta))``), hence

    ||w - w_hat|| <= 2 ||G(w)|| / mu,

and ``||G(w)|| <= mu tau / 2`` certifies ``||w - w_hat|| <= tau``. The certificate is checked on
the point actually returned; an uncertified point is never returned (:class:`CertificateError`).

The solver is V-FISTA (Beck 2017, *First-Order Methods in Optimization*, §10.7, Thm 10.42: FISTA with constant momentum
``(sqrt(kappa) - 1) / (sqrt(kappa) + 1)``), whose guaranteed rate gives a number of iterations that
is a public function of the constants (:func:`certified_iterations`). The solver runs exactly that
many iterations, with no data-dependent early stop, so the work done (and ``n_gradients``) reveals
nothing about the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ._core import project_to_ball

__all__ = ["CertificateError", "certified_iterations", "certified_minimize", "gradient_mapping"]

_CEIL_SAFETY = 1.0 + 1e-12  # feldman.md pitfall D7: round iteration counts up, robustly.


class CertificateError(RuntimeError):
    """The optimisation certificate was not reached: no point is released."""


def gradient_mapping(w: np.ndarray, grad: np.ndarray, radius: float | None, smoothness: float) -> np.ndarray:
    """``G(w) = beta (w - Pi_K(w - grad / beta))`` for ``K`` the ball of ``radius`` (``R^p`` if None)."""
    return smoothness * (w - project_to_ball(w - grad / smoothness, radius))


def certified_iterations(
    smoothness: float,
    strong_convexity: float,
    tolerance: float,
    initial_distance: float,
    initial_gradient_norm: float,
) -> int:
    """Number of V-FISTA iterations after which ``||G(w_T)|| <= mu tau / 2`` is guaranteed.

    From public bounds only. With ``kappa = beta / mu`` and ``r0 >= ||w_0 - w_hat||``,
    ``g0 >= ||grad F(w_0)||``:

    * ``F(w_0) - F* <= g0 r0`` (convexity);
    * ``F(w_T) - F* <= (1 - 1/sqrt(kappa))**T (F(w_0) - F* + mu r0**2 / 2)`` (Beck 2017, Thm 10.42);
    * ``||w_T - w_hat||**2 <= 2 (F(w_T) - F*) / mu`` (strong convexity at the constrained minimiser);
    * ``||G(w_T)|| <= 2 beta ||w_T - w_hat||`` (``w_hat`` is a fixed point of the non-expansive map
      ``w -> Pi_K(w - grad F(w) / beta)``).

    So ``T`` is the smallest integer with
    ``(1 - 1/sqrt(kappa))**T (2 / mu) (g0 r0 + mu r0**2 / 2) <= (mu tau / (4 beta))**2``.

    Parameters
    ----------
    smoothness, strong_convexity : float
        ``beta >= mu > 0`` of ``F`` on ``K``.
    tolerance : float
        ``tau > 0``, the certified distance to the minimiser.
    initial_distance : float
        ``r0``, a public bound on ``||w_0 - w_hat||``.
    initial_gradient_norm : float
        ``g0``, a public bound on ``||grad F(w_0)||``.
    """
    beta, mu = float(smoothness), float(strong_convexity)
    if not (0 < mu <= beta < math.inf and tolerance > 0 and initial_distance >= 0 and initial_gradient_norm >= 0):
        raise ValueError(
            "certified_iterations needs 0 < strong_convexity <= smoothness < inf, tolerance > 0 and "
            "non-negative initial bounds."
        )
    start = (2.0 / mu) * (initial_gradient_norm * initial_distance + 0.5 * mu * initial_distance**2)
    target = (mu * tolerance / (4.0 * beta)) ** 2
    if start <= target:
        return 0
    if beta == mu:  # rate 0: the first step lands on the minimiser
        return 1
    decay = -math.log1p(-1.0 / math.sqrt(beta / mu))  # -log(1 - 1/sqrt(kappa))
    return math.ceil(math.log(start / target) / decay * _CEIL_SAFETY)


def certified_minimize(
    gradient: Callable[[np.ndarray], np.ndarray],
    w0: np.ndarray,
    radius: float | None,
    smoothness: float,
    strong_convexity: float,
    tolerance: float,
    n_iterations: int,
) -> np.ndarray:
    """Minimise ``F`` over the ball by V-FISTA and return a point certified ``tau``-close to ``argmin``.

    Runs exactly ``n_iterations`` iterations (use :func:`certified_iterations`), then checks the
    gradient-mapping certificate ``||G(w)|| <= mu tau / 2`` at the returned point ``w``, which
    guarantees ``||w - argmin_K F|| <= tau`` (module docstring). Evaluates ``gradient``
    ``n_iterations + 1`` times.

    Parameters
    ----------
    gradient : callable
        ``gradient(w)``: the exact gradient of ``F`` at ``w``.
    w0 : ndarray
        Starting point, inside the ball.
    radius : float or None
        Radius of the ball ``K`` centred at 0 (``None``: ``R^p``).
    smoothness, strong_convexity : float
        ``beta`` and ``mu`` of ``F`` (valid upper / lower bounds).
    tolerance : float
        ``tau``.
    n_iterations : int
        Number of iterations, a public quantity.

    Raises
    ------
    CertificateError
        If the certificate does not hold after ``n_iterations`` (nothing is returned).
    """
    beta, mu = float(smoothness), float(strong_convexity)
    root_kappa = math.sqrt(beta / mu)
    momentum = (root_kappa - 1.0) / (root_kappa + 1.0)
    x = np.array(w0, dtype=float)
    y = x
    for _ in range(n_iterations):
        x_next = project_to_ball(y - gradient(y) / beta, radius)
        y = x_next + momentum * (x_next - x)
        x = x_next
    certificate = float(np.linalg.norm(gradient_mapping(x, gradient(x), radius, beta)))
    if not certificate <= 0.5 * mu * tolerance:
        # The message names public quantities only: the certificate's value depends on the data.
        raise CertificateError(
            f"The optimisation certificate ||G(w)|| <= mu tau / 2 was not reached after {n_iterations} "
            "iterations; no model is released. The smoothness or strong-convexity constant passed "
            "is not valid for this objective."
        )
    return x
