"""Full-batch projected noisy gradient descent, last iterate released.

``T`` steps ``w <- Pi_R(w - eta (grad F_S(w) + xi))`` from ``w_0 = 0``, with ``F_S`` the average
per-row objective over all ``n`` rows, ``xi ~ N(0, s**2 I)`` and ``Pi_R`` the projection onto the
public ball of radius ``R``; ``w_T`` or the average of the last iterates is released (below). The loop is the shared core
(:func:`~skdpsco.solvers._core.projected_noisy_sgd`) fed the whole dataset as every batch (two
calls when the tail of the iterates is averaged).

Privacy: two valid analyses, the smaller epsilon released
------------------------------------------------------------
Replacing one row moves the averaged gradient by at most ``Delta = 2 L / n`` at every point of the
ball (``L``: bound on a per-row loss gradient there; a ridge term is the same on both datasets and
cancels, as in :mod:`skdpsco.solvers.phased`).

1. **Composition (every iterate released).** Each step is a Gaussian mechanism of sensitivity
   ``Delta`` and noise ``s``, adaptively chosen; ``T`` of them compose *exactly* to one Gaussian
   mechanism of sensitivity ``sqrt(T) Delta`` (Gaussian differential privacy, Dong, Roth & Su 2022,
   Cor. 3.3: ``mu``-GDP composes to ``sqrt(sum mu_t**2)``-GDP, and ``mu``-GDP is exactly the
   Gaussian mechanism's privacy curve). Event ``gaussian_event(s, sqrt(T) Delta)``, converted by
   the PLD accountant (exact). Needs neither convexity nor smoothness.

2. **Last iterate, bounded domain (Altschuler & Talwar 2022, full-batch case).** Derived here from
   the shifted-Renyi lemmas of amplification by iteration (``feldman.md`` §0.4; FMTT18 Lemmas 20–21,
   Thm 22). Write ``v_t = w_{t-1} - eta (grad F_S(w_{t-1}) + xi_t)``, ``w_t = Pi_R(v_t)``. For
   any ``1 <= k < T`` take as starting point ``X_0 = w_{T-k}`` and the contractive noisy iteration
   ``X_j = psi_j(X_{j-1}) + Z_j``, ``Z_j ~ N(0, eta**2 s**2 I)``, with ``psi_1 = G_S`` and
   ``psi_j = G_S o Pi_R`` (``G_S(w) = w - eta grad F_S(w)``), so that ``X_k = v_T`` and ``w_T =
   Pi_R(X_k)`` is post-processing. Every ``psi_j`` is non-expansive when ``eta <= 2 / beta``
   (FMTT Prop. 17, 18) and ``sup ||psi_j - psi'_j|| <= eta Delta``. Both ``w_{T-k}`` and
   ``w'_{T-k}`` lie in the ball, so ``W_inf(X_0, X'_0) <= D = 2 R`` and the shifted divergence
   ``D_alpha^{(D)}(X_0 || X'_0) = 0``. Lemma 21 (contraction) and Lemma 20 (shift reduction) with
   shifts ``a_j``, ``sum_j a_j = D + k eta Delta`` and ``z_j = D + j eta Delta - sum_{i<=j} a_i
   >= 0``, give ``D_alpha(w_T || w'_T) <= sum_j alpha a_j**2 / (2 eta**2 s**2)``; the equal split
   ``a_j = (D + k eta Delta) / k`` (optimal by Cauchy–Schwarz; ``z_j = D (1 - j / k) >= 0``) gives

       rho_k = (D / eta + k Delta)**2 / (2 k s**2)      (rho_k-zCDP),

   minimised near ``k* = D / (eta Delta) = R n / (eta L)``, where ``rho = 4 k* Delta**2 / (2
   s**2)``: the same as composing ``4 k*`` steps, **independent of T**. (``k = T`` with the common
   start ``w_0 = 0``, i.e. shift 0, is analysis 1 in RDP form.) Event ``zcdp_event(min_k
   rho_k)``. Used only when ``eta <= 2 / beta`` for the per-row objective.

Calibration is exact for each: analysis 1 meets (epsilon, delta) from ``s_1 = z sqrt(T) Delta``
(``z`` = :func:`~skdpsco.accounting.gaussian_noise_multiplier`), analysis 2 from ``s_2 = sqrt(C /
rho)`` with ``rho_k = C / s**2`` and ``rho`` = :func:`~skdpsco.accounting.calibrate_zcdp_rho`.
The release is private as soon as either analysis holds, so the smallest noise meeting the target
is ``min(s_1, s_2)`` exactly, and the event released is the one of the analysis that meets it
(the smaller epsilon at ``delta``). Analysis 2 wins when ``T > 4 k*`` roughly, i.e. for long runs
on small ``n``; the default schedule (:func:`skdpsco.defaults.noisy_gd_schedule`) rarely gets there.

Release: under analysis 1 every iterate is private, so the release may be any function of them:
the average of the last ``floor(tail_fraction T)`` iterates (tail averaging, :data:`TAIL_FRACTION`),
which damps the noise the last iterate carries. Under analysis 2 only ``w_T`` is covered and
``w_T`` is released (``feldman.md`` §A9). Which one applies is fixed by the plan, before the data.

Utility: the default step is ``eta = 1 / beta`` and ``T`` minimises the public risk model of
:func:`skdpsco.defaults.noisy_gd_risk_model`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..accounting import (
    calibrate_zcdp_rho,
    epsilon_of,
    gaussian_event,
    gaussian_noise_multiplier,
    zcdp_event,
)
from ..defaults import noisy_gd_schedule
from ..rows import full_batches
from ._core import SolverResult, kernel_loss, projected_noisy_sgd

if TYPE_CHECKING:
    from ._problem import Problem

__all__ = ["NoisyGD", "NoisyGDPlan", "composition_sensitivity", "last_iterate_rho_coefficient"]

_NOISE_SAFETY = 1.0 + 1e-12
"""Relative round-up of a noise level computed in closed form, so that floating-point error never
crosses the calibrated target (``feldman.md`` pitfall D7)."""

TAIL_FRACTION = 0.5
"""Fraction of the final iterates averaged into the release when the composition analysis is
released (tail averaging; Polyak–Juditsky, Jain et al. 2018): it damps the privacy noise the
last iterate carries. Validated with the rule of :mod:`skdpsco.defaults` on its validation family
(:data:`skdpsco.defaults.CURVATURE_FRACTION`): mean excess test log-loss 0.0129 against 0.0135
for the last iterate."""


def composition_sensitivity(lipschitz: float, n_samples: int, n_steps: int) -> float:
    """``sqrt(T) 2 L / n``: the one Gaussian that ``T`` full-batch steps compose to (analysis 1)."""
    return math.sqrt(n_steps) * 2.0 * lipschitz / n_samples


def last_iterate_rho_coefficient(
    lipschitz: float, n_samples: int, n_steps: int, step: float, radius: float
) -> tuple[float, int]:
    """``C`` and ``k`` with ``rho = C / s**2`` the last-iterate zCDP bound (analysis 2).

    ``C = min_{1 <= k < T} (2 R / eta + k 2 L / n)**2 / (2 k)``: the function of ``k`` is convex,
    so the minimum over integers is at ``floor`` or ``ceil`` of ``k* = R n / (eta L)``, clipped to
    ``[1, T - 1]``. Returns ``(inf, 0)`` when ``T < 2`` (no ``k`` to choose).
    """
    if n_steps < 2:
        return math.inf, 0
    delta = 2.0 * lipschitz / n_samples
    diameter_over_step = 2.0 * radius / step
    k_star = diameter_over_step / delta
    candidates = {int(min(max(k, 1), n_steps - 1)) for k in (math.floor(k_star), math.ceil(k_star))}
    return min(((diameter_over_step + k * delta) ** 2 / (2.0 * k), k) for k in candidates)


@dataclass(frozen=True)
class NoisyGDPlan:
    """A full-batch noisy-GD schedule: public quantities only, fixed before the data is read.

    Attributes
    ----------
    n_samples, n_steps : int
    step : float
        Constant step ``eta``.
    noise_std : float
        ``s``, standard deviation of the Gaussian noise on every averaged gradient.
    analysis : {'composition', 'last_iterate'}
        The analysis whose event is released (module docstring).
    burn_in : int
        ``k`` of the last-iterate analysis (0 when it is not valid for this schedule).
    dp_event : dp_accounting.DpEvent
    """

    n_samples: int
    n_steps: int
    step: float
    noise_std: float
    analysis: str
    burn_in: int
    dp_event: object


def _objective_constants(problem: Problem) -> tuple[float, float]:
    """``L`` of the loss (the sensitivity constant; the ridge cancels) and ``beta`` of the per-row
    objective (ridge included), checked."""
    c = problem.constants
    radius = float(problem.radius)
    if not 0 < radius < math.inf:
        raise ValueError(f"NoisyGD needs a bounded domain: radius must be finite and > 0; got {radius!r}.")
    if not 0 < c.lipschitz < math.inf:
        raise ValueError(
            f"NoisyGD needs a Lipschitz loss on the ball (finite L); the loss {problem.loss.name!r} has "
            f"L={c.lipschitz!r}. Use a finite radius or a Lipschitz loss."
        )
    if not 0 < problem.smoothness < math.inf:
        raise ValueError(
            f"NoisyGD needs a smooth loss (Lipschitz gradient); the loss {problem.loss.name!r} is not. "
            "Use its Gaussian-smoothed version (feldman.md §B10)."
        )
    return float(c.lipschitz), float(problem.smoothness)


def plan_noisy_gd(problem: Problem, n_steps: int | None = None, step: float | None = None) -> NoisyGDPlan:
    """Plan full-batch noisy GD, (epsilon, delta)-DP exactly for ``problem`` (module docstring).

    ``n_steps`` and ``step`` default to :func:`skdpsco.defaults.noisy_gd_schedule`.
    """
    lipschitz, smoothness = _objective_constants(problem)
    n, radius = int(problem.n_samples), float(problem.radius)
    epsilon, delta = float(problem.epsilon), float(problem.delta)
    if n < 1:
        raise ValueError(f"NoisyGD needs n_samples >= 1; got n_samples={n}.")
    if n_steps is None or step is None:
        default = noisy_gd_schedule(n, problem.n_params, epsilon, delta, lipschitz, smoothness, radius)
        n_steps = default.n_steps if n_steps is None else n_steps
        step = default.step if step is None else step
    composition_noise = gaussian_noise_multiplier(epsilon, delta) * composition_sensitivity(lipschitz, n, n_steps)
    coefficient, burn_in = last_iterate_rho_coefficient(lipschitz, n, n_steps, step, radius)
    if step > 2.0 / smoothness:  # no contraction: the last-iterate analysis does not apply
        coefficient, burn_in = math.inf, 0
    last_iterate_noise = math.sqrt(coefficient / calibrate_zcdp_rho(epsilon, delta))
    noise_std = min(composition_noise, last_iterate_noise) * _NOISE_SAFETY
    events = {"composition": gaussian_event(noise_std, composition_sensitivity(lipschitz, n, n_steps))}
    if burn_in:
        events["last_iterate"] = zcdp_event(coefficient / noise_std**2)
    analysis = min(events, key=lambda name: epsilon_of(events[name], delta))
    if epsilon_of(events[analysis], delta) > epsilon:
        raise AssertionError(f"NoisyGD schedule spends more than epsilon={epsilon}.")
    return NoisyGDPlan(n, int(n_steps), float(step), noise_std, analysis, burn_in, events[analysis])


def averaged_steps(plan: NoisyGDPlan, tail_fraction: float) -> int:
    """Number of final iterates averaged into the release: ``floor(tail_fraction T)`` under the
    composition analysis, which covers every iterate (so any function of them is post-processing),
    and 0 under the last-iterate analysis, which covers ``w_T`` alone (``feldman.md`` §A9)."""
    return int(tail_fraction * plan.n_steps) if plan.analysis == "composition" else 0


def plan_descent(plan: NoisyGDPlan, X, y, problem: Problem, n_steps: int, w0, noise_rng, average: bool,
                 intercept: float | None = None):
    """``n_steps`` full-batch steps of ``plan`` from ``w0`` on the shared core: the last iterate, or
    with ``average`` the mean of the points at which the gradients were taken. ``intercept``: the
    value of a last column of CSR rows ``X`` that they do not store (:func:`skdpsco.rows.full_batches`)."""
    return projected_noisy_sgd(
        problem.gradient(),
        full_batches(X, y, n_steps, intercept),
        np.full(n_steps, plan.step),
        np.full(n_steps, plan.noise_std),
        w0,
        problem.radius,
        noise_rng,
        average=average,
    )


@dataclass(frozen=True)
class NoisyGD:
    """Full-batch projected noisy gradient descent, last iterate (module docstring).

    Parameters
    ----------
    n_steps : int or None, default=None
        ``T`` (public). ``None``: :func:`skdpsco.defaults.noisy_gd_schedule`.
    step : float or None, default=None
        ``eta``. ``None``: ``1 / beta``. Above ``2 / beta`` only the composition analysis applies.
    """

    n_steps: int | None = None
    step: float | None = None
    tail_fraction: float = TAIL_FRACTION

    requires_smooth_loss = True  # eta = 1 / beta, and the contraction of the last-iterate bound

    def __post_init__(self):
        if self.n_steps is not None and (
            isinstance(self.n_steps, bool) or not isinstance(self.n_steps, (int, np.integer)) or self.n_steps < 1
        ):
            raise ValueError(f"n_steps must be an integer >= 1 or None; got {self.n_steps!r}.")
        if self.step is not None and not (isinstance(self.step, (int, float)) and 0 < self.step < math.inf):
            raise ValueError(f"step must be a finite number > 0 or None; got {self.step!r}.")
        if not (isinstance(self.tail_fraction, (int, float)) and 0 <= self.tail_fraction < 1):
            raise ValueError(f"tail_fraction must be a number in [0, 1); got {self.tail_fraction!r}.")

    def plan(self, problem: Problem) -> NoisyGDPlan:
        return plan_noisy_gd(problem, self.n_steps, self.step)

    def reads_unstored_intercept(self, loss) -> bool:
        """Whether :meth:`run` reads CSR rows' intercept column without it stored (``intercept=``)
        in place: for a loss (or the base of its smoothing) with a compiled derivative
        (:func:`~._core.kernel_loss`); the others' batches are copies with the column."""
        return kernel_loss(loss) is not None

    def run(self, plan: NoisyGDPlan, X, y, problem: Problem, rng: np.random.Generator,
            intercept: float | None = None) -> SolverResult:
        """Run a planned descent on all rows (already clipped); every step reads every row.
        ``intercept``: the value of a last (intercept) column of CSR rows ``X`` that they do not
        store, the same model as with the column stored."""
        if X.shape[0] != plan.n_samples:
            raise ValueError(f"The plan is for {plan.n_samples} rows; got {X.shape[0]}.")
        (noise_rng,) = rng.spawn(1)
        averaged = averaged_steps(plan, self.tail_fraction)
        w = plan_descent(plan, X, y, problem, plan.n_steps - averaged, np.zeros(problem.coef_shape), noise_rng, False,
                         intercept)
        coef = plan_descent(plan, X, y, problem, averaged, w, noise_rng, True, intercept) if averaged else w
        info = {
            "n_steps": plan.n_steps,
            "step": plan.step,
            "noise_std": plan.noise_std,
            "analysis": plan.analysis,
            "burn_in": plan.burn_in,
            "averaged_steps": averaged,
        }
        return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=plan.n_steps * plan.n_samples, info=info)
