"""Private SGD for losses with alpha-Hoelder gradients (Wang, Lei, Ying & Zhang).

Spec: ``shared/spec/wang_holder.md`` §1–§2, §4, §6. Both algorithms run projected SGD from
``w_1 = 0`` on the ball of public radius ``R`` with a constant step, **one row per step drawn
uniformly with replacement** (§2.1, pitfall §6.1: both proofs need it), and release the average
``(1/T) sum_{t=1..T} w_t`` (``w_1`` included, ``w_{T+1}`` not; §2.1, §6 item 11), which is what
the shared core (:func:`~skdpsco.solvers._core.noisy_sgd_steps`) accumulates. The indices are
drawn ``_CHUNK`` at a time, so memory is ``O(n + p + _CHUNK p)`` whatever ``T``.

* :class:`OutputPerturbationSGD` (Algorithm 1, §2.3): plain SGD, then Gaussian noise on the
  average, calibrated to the uniform-argument-stability bound of Thm 7(b)
  (:func:`~skdpsco.accounting.wang_uniform_stability_bound`). The bound holds unless some row is
  drawn more than ``k_T`` times (:func:`~skdpsco.accounting.wang_max_hits`), an event of
  probability ``<= delta / 2`` over the indices; the Gaussian is calibrated exactly at
  ``(epsilon, delta / 2)`` and the release is described by
  ``FailureProbabilityDpEvent(gaussian_event(sigma, Delta), delta / 2)``, which
  :func:`~skdpsco.accounting.epsilon_of` converts at ``delta`` as the Gaussian at ``delta / 2``
  (Thm 8). ``tight_sensitivity=True`` is the exact conditional variant of §6 item 3.
* :class:`GradientPerturbationSGD` (Algorithm 2, §2.4): Gaussian noise on every gradient, the
  average released with no further noise. Accounted exactly, not with the closed form of Thm 11:
  each step reads one row drawn uniformly from ``n``, a Gaussian mechanism on a sample of size 1
  drawn without replacement, i.e. ``SampledWithoutReplacementDpEvent(n, 1, GaussianDpEvent(z))``
  under replace-one neighbours (Wang, Balle & Kasiviswanathan 2019, Thm 27), composed ``T`` times
  (§6 item 5, "corrected in review"); the iterates are public to the adversary (adaptive
  composition) and the average is post-processing.

Choices, each from the spec or derived here:

* **Gradient bound.** ``G = problem.constants.lipschitz``, the supremum of the loss gradient on the
  ball: a valid bound wherever the proofs use ``M + L R**alpha`` and sharper (§2.2 [inferred], §6
  item 9; e.g. ``B`` instead of ``2B`` for the hinge loss).
* **Iterations** ``T = ceil(n**e)``, ``e = (2 - alpha) / (1 + alpha)`` for ``alpha < 1/2`` and 1
  otherwise (Thm 10 / Thm 12, §2.6; :func:`iteration_exponent`): one gradient per row for
  ``alpha >= 1/2``, **``n`` per row (``T = n**2``) for non-smooth losses** (``alpha = 0``: hinge,
  absolute loss), ``n**0.4`` per row at ``alpha = 0.25``. At about 30 microseconds per step,
  ``alpha = 0`` is practical up to ``n`` of a few thousand; ``max_steps`` caps ``T``.
* **Step size** ``eta = 1 / (T max(A1, A2))`` (Thm 10) and ``1 / (T max(B1, B2))`` (Thm 12 with
  its typo corrected, §2.6), at utility confidence :data:`UTILITY_CONFIDENCE`, capped below
  ``min(1, 1/L)`` (the hypothesis of Thm 7 and of the utility theorems).
* **Ridge term** ``lambda ||w||**2 / 2`` (``problem.l2_penalty``; the paper has none, §6 item 14):
  the update is ``Pi((1 - eta lambda) (w - eta' grad f(w)))`` with ``eta' = eta / (1 - eta lambda)``,
  a step of size ``eta'`` on the loss alone followed by a non-expansive map, so Thm 7 holds with
  the loss's own ``(alpha, L, G)`` at step ``eta'`` (the step cap applies to ``eta'``); in the
  gradient-perturbation sensitivity the ridge term cancels (both neighbours are at the same
  iterate), leaving ``2 G``.
* **Calibration.** Both events are calibrated by bisection with
  :func:`~skdpsco.accounting.calibrate_noise`, so unlike Thm 11's closed form (infeasible at small
  ``n epsilon``, §4.2) a calibration exists for every ``(n, epsilon, delta)``; the price of small
  ``n epsilon`` is noise, never an error.

Floating-point Gaussian sampling is not formally DP, and a fixed ``random_state`` reproduces the
indices and the noise: for experiments only (§6 item 13).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import dp_accounting
import numpy as np

from ..accounting import (
    FailureProbabilityDpEvent,
    calibrate_noise,
    gaussian_event,
    gaussian_noise_multiplier,
    wang_max_hits,
    wang_uniform_stability_bound,
)
from .._secure import noisy_release
from ..rows import iter_batches
from ._core import SolverResult, margin_gradient, noisy_sgd_steps, project_to_ball

if TYPE_CHECKING:
    from ._problem import Problem

__all__ = [
    "GradientPerturbationPlan",
    "GradientPerturbationSGD",
    "OutputPerturbationPlan",
    "OutputPerturbationSGD",
    "default_n_steps",
    "gradient_perturbation_step",
    "iteration_exponent",
    "output_perturbation_step",
    "run_gradient_perturbation",
    "run_output_perturbation",
    "sampled_gaussian_event",
]

UTILITY_CONFIDENCE = 0.1
"""``gamma`` in the step sizes of Thm 10 / Thm 12 (§2.6): it affects ``eta`` only, never privacy."""

_CHUNK = 4096
"""Indices drawn (and rows gathered) per block."""

_CALIBRATION_RTOL = 1e-3
"""Relative tolerance of the bisection for the gradient noise: the RDP bound of sampling without
replacement costs about 0.2 s per evaluation; the noise is at most 0.1 % above the smallest."""


# -- schedule (§2.6) ----------------------------------------------------------------------------


def iteration_exponent(holder_exponent: float) -> float:
    """``e`` in ``T = ceil(n**e)``: ``(2 - alpha) / (1 + alpha)`` for ``alpha < 1/2``, else 1
    (Thm 10 and Thm 12, bounded domain; §2.6 table)."""
    alpha = float(holder_exponent)
    return (2.0 - alpha) / (1.0 + alpha) if alpha < 0.5 else 1.0


def default_n_steps(n_samples: int, holder_exponent: float, max_steps: int | None = None) -> int:
    """``T = ceil(n**e)`` (:func:`iteration_exponent`), at most ``max_steps``."""
    n_steps = math.ceil(n_samples ** iteration_exponent(holder_exponent))
    return n_steps if max_steps is None else min(n_steps, max_steps)


def output_perturbation_step(
    n_samples: int, n_steps: int, n_params: int, epsilon: float, delta: float, gamma: float = UTILITY_CONFIDENCE
) -> float:
    """``eta = 1 / (T max(A1, A2))`` of Thm 10 (§2.6), before the cap ``min(1, 1/L)``.

    ``A1 = sqrt(ln(n/delta) ln(n) ln(1/gamma) / n)``,
    ``A2 = (d ln(1/delta))**(1/4) sqrt(ln(n/delta)) ln(1/gamma)**(1/8) / sqrt(n epsilon)``.
    """
    n, d = n_samples, n_params
    a1 = math.sqrt(math.log(n / delta) * math.log(n) * math.log(1 / gamma) / n)
    a2 = (d * math.log(1 / delta)) ** 0.25 * math.sqrt(math.log(n / delta)) * math.log(1 / gamma) ** 0.125
    return 1.0 / (n_steps * max(a1, a2 / math.sqrt(n * epsilon)))


def gradient_perturbation_step(
    n_samples: int, n_steps: int, n_params: int, epsilon: float, delta: float, gamma: float = UTILITY_CONFIDENCE
) -> float:
    """``eta = 1 / (T max(B1, B2))`` of Thm 12 with its typo corrected (§2.6), before the cap.

    ``B1 = sqrt(ln(n) ln(n/gamma) ln(1/gamma) / n)``,
    ``B2 = sqrt(d ln(1/delta)) ln(1/gamma)**(1/4) / (n epsilon)``.
    """
    n, d = n_samples, n_params
    b1 = math.sqrt(math.log(n) * math.log(n / gamma) * math.log(1 / gamma) / n)
    b2 = math.sqrt(d * math.log(1 / delta)) * math.log(1 / gamma) ** 0.25 / (n * epsilon)
    return 1.0 / (n_steps * max(b1, b2))


def _capped_step(step: float, holder_constant: float, l2_penalty: float) -> float:
    """``step``, lowered if needed so that the loss-only step ``eta' = eta / (1 - eta lambda)``
    stays below ``min(1, 1/L)`` (Thm 7, §2.1; module docstring, "Ridge term")."""
    cap = min(1.0, 1.0 / holder_constant)
    return min(step, (1.0 - 1e-9) * cap / (1.0 + cap * l2_penalty))


def _loss_step(step: float, l2_penalty: float) -> float:
    """``eta' = eta / (1 - eta lambda)``: the step on the loss alone (module docstring)."""
    return step / (1.0 - step * l2_penalty)


def _check_problem(problem: Problem) -> tuple[float, float, float]:
    """``(alpha, L, G)`` of the loss, after checking that the theory applies to ``problem``.

    Raises
    ------
    ValueError
        Without a finite ball, or if ``alpha``, ``L`` or ``G`` is unusable.
    """
    radius = problem.radius
    if radius is None or not 0 < radius < math.inf:
        raise ValueError(
            f"Wang et al.'s algorithms need a bounded domain: radius must be finite and > 0; got {radius!r}."
        )
    constants = problem.constants
    alpha = float(constants.holder_exponent)
    holder = float(constants.holder_constant)
    lipschitz = float(constants.lipschitz)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"The loss's holder_exponent must be in [0, 1]; got {alpha!r}.")
    if not 0.0 < holder < math.inf:
        raise ValueError(
            f"The loss's holder_constant must be finite and > 0; got {holder!r}. Pass the Hoelder "
            "constant of its gradient at the public bounds (skdpsco.losses)."
        )
    if not 0.0 < lipschitz < math.inf:
        raise ValueError(
            f"The loss's gradient bound (lipschitz) on the ball must be finite and > 0; got {lipschitz!r}."
        )
    if not 0.0 <= problem.l2_penalty < math.inf:
        raise ValueError(f"l2_penalty must be finite and >= 0; got {problem.l2_penalty!r}.")
    return alpha, holder, lipschitz


def _check_schedule_options(max_steps, step_scale) -> None:
    if max_steps is not None and not (isinstance(max_steps, (int, np.integer)) and max_steps >= 1):
        raise ValueError(f"max_steps must be None or an integer >= 1; got {max_steps!r}.")
    if not (isinstance(step_scale, (int, float, np.floating)) and 0 < step_scale < math.inf):
        raise ValueError(f"step_scale must be a finite number > 0; got {step_scale!r}.")


# -- sampling (§2.1, §6 item 1) -----------------------------------------------------------------


def _uniform_indices(n_rows: int, n_steps: int, rng: np.random.Generator, indices=None):
    """One row index per step, drawn uniformly with replacement from ``rng``, ``_CHUNK`` at a
    time (or read from the given ``indices``): memory ``O(_CHUNK)`` whatever ``T``."""
    for start in range(0, n_steps, _CHUNK):
        size = min(_CHUNK, n_steps - start)
        yield rng.integers(0, n_rows, size=size) if indices is None else indices[start : start + size]


def _check_rows(X, n_samples: int) -> None:
    if X.shape[0] != n_samples:
        raise ValueError(f"The plan is for {n_samples} rows; got {X.shape[0]}.")


def _averaged_sgd(X, y, problem: Problem, n_steps, step, noise_std, rng, indices=None):
    """Average of ``w_1..w_T`` of projected SGD from 0 with one uniform row per step and Gaussian
    noise of standard deviation ``noise_std`` on each gradient (0 for none); also the draw counts.

    The shared core runs the steps chunk by chunk of drawn indices (the compiled kernel when the
    loss has one), so ``T = n**2`` steps at ``alpha = 0`` cost no ``O(T)`` memory."""
    index_rng, noise_rng = rng.spawn(2)
    counts = np.zeros(X.shape[0], dtype=np.int64)
    gradient = margin_gradient(problem.loss, problem.l2_penalty)
    w, total = np.zeros(problem.coef_shape), np.zeros(problem.coef_shape)
    for chunk in _uniform_indices(X.shape[0], n_steps, index_rng, indices):
        counts += np.bincount(chunk, minlength=counts.size)
        noisy_sgd_steps(
            gradient,
            iter_batches(X, y, chunk, np.ones(chunk.size, dtype=np.int64)),
            np.full(chunk.size, float(step)),
            np.full(chunk.size, float(noise_std)),
            w,
            total,
            problem.radius,
            noise_rng,
        )
    return total / n_steps, counts, noise_rng


# -- Algorithm 1: output perturbation -----------------------------------------------------------


@dataclass(frozen=True)
class OutputPerturbationPlan:
    """A DP-SGD-Output run (§2.3): public quantities only, fixed before the data is read.

    Attributes
    ----------
    n_samples, n_steps : int
        ``n`` and ``T``.
    step_size : float
        ``eta`` (of the objective, ridge included).
    holder_exponent, holder_constant, gradient_bound : float
        ``alpha``, ``L`` and ``G`` of the loss, used in Thm 7.
    l2_penalty : float
        ``lambda`` (Thm 7 is applied at ``eta / (1 - eta lambda)``).
    noise_multiplier : float
        ``sigma / Delta`` of the output noise.
    max_hits : float or None
        ``k_T`` at failure probability ``delta / 2``; ``None`` with ``tight_sensitivity``, where the
        realised largest draw count is used.
    sensitivity, noise_std : float or None
        ``Delta`` and ``sigma``; ``None`` with ``tight_sensitivity`` (they depend on the drawn
        indices, see :func:`run_output_perturbation`).
    failure_probability : float
        ``delta / 2`` (0 with ``tight_sensitivity``).
    project_output : bool
        Whether the noisy average is projected onto the ball (post-processing).
    """

    n_samples: int
    n_steps: int
    step_size: float
    holder_exponent: float
    holder_constant: float
    gradient_bound: float
    l2_penalty: float
    noise_multiplier: float
    max_hits: float | None
    sensitivity: float | None
    noise_std: float | None
    failure_probability: float
    project_output: bool

    @property
    def tight_sensitivity(self) -> bool:
        return self.max_hits is None

    @property
    def dp_event(self):
        """Thm 8: the Gaussian at ``(epsilon, delta/2)`` except with probability ``delta/2``; with
        ``tight_sensitivity`` a Gaussian release of noise multiplier ``noise_multiplier`` given
        every index sequence, hence for their mixture (§6 item 3)."""
        gaussian = gaussian_event(self.noise_multiplier, 1.0)  # = gaussian_event(sigma, Delta)
        if self.tight_sensitivity:
            return gaussian
        return FailureProbabilityDpEvent(gaussian, self.failure_probability)

    def sensitivity_given(self, max_row_draws: float) -> float:
        """Thm 7 sensitivity when no row is drawn more than ``max_row_draws`` times."""
        return _thm7_sensitivity(
            self.holder_exponent, self.holder_constant, self.gradient_bound, self.step_size,
            self.l2_penalty, self.n_steps, max_row_draws,
        )


def _thm7_sensitivity(alpha, holder, gradient_bound, step, l2_penalty, n_steps, max_hits) -> float:
    """:func:`~skdpsco.accounting.wang_uniform_stability_bound` at the loss-only step
    ``eta / (1 - eta lambda)`` (module docstring, "Ridge term")."""
    return wang_uniform_stability_bound(
        alpha, holder, gradient_bound, _loss_step(step, l2_penalty), n_steps, max_hits
    )


@lru_cache(maxsize=256)
def plan_output_perturbation(
    problem: Problem, tight_sensitivity: bool, max_steps: int | None, step_scale: float, project_output: bool
) -> OutputPerturbationPlan:
    """Plan DP-SGD-Output (Algorithm 1, §2.3) to be (epsilon, delta)-DP under replace-one neighbours.

    Default: ``k_T = wang_max_hits(n, T, delta/2)``, ``Delta`` of Thm 7(b) at ``k_T`` and ``sigma``
    the smallest standard deviation for which ``gaussian_event(sigma, Delta)`` is
    ``(epsilon, delta/2)``-DP, i.e. ``sigma = z Delta`` with ``z`` of :func:`gaussian_noise_multiplier`.
    ``tight_sensitivity``: the noise multiplier ``z`` for which ``gaussian_event(z, 1)`` is
    ``(epsilon, delta)``-DP; the run uses ``sigma = z Delta(K)`` with ``K`` the realised largest
    draw count (§6 item 3).

    Raises
    ------
    ValueError
        If the problem has no finite ball, or unusable Hoelder constants (:func:`_check_problem`).
    """
    alpha, holder, lipschitz = _check_problem(problem)
    n, epsilon, delta = problem.n_samples, float(problem.epsilon), float(problem.delta)
    n_steps = default_n_steps(n, alpha, max_steps)
    step = step_scale * output_perturbation_step(n, n_steps, problem.n_params, epsilon, delta)
    step = _capped_step(step, holder, problem.l2_penalty)
    common = dict(
        n_samples=n,
        n_steps=n_steps,
        step_size=step,
        holder_exponent=alpha,
        holder_constant=holder,
        gradient_bound=lipschitz,
        l2_penalty=float(problem.l2_penalty),
        project_output=project_output,
    )
    if tight_sensitivity:
        return OutputPerturbationPlan(
            **common, noise_multiplier=gaussian_noise_multiplier(epsilon, delta), max_hits=None,
            sensitivity=None, noise_std=None, failure_probability=0.0,
        )
    failure = delta / 2.0
    max_hits = wang_max_hits(n, n_steps, failure)
    sensitivity = _thm7_sensitivity(alpha, holder, lipschitz, step, problem.l2_penalty, n_steps, max_hits)
    multiplier = gaussian_noise_multiplier(epsilon, failure)
    return OutputPerturbationPlan(
        **common, noise_multiplier=multiplier, max_hits=max_hits, sensitivity=sensitivity,
        noise_std=multiplier * sensitivity, failure_probability=failure,
    )


def run_output_perturbation(
    plan: OutputPerturbationPlan, X, y, problem: Problem, rng: np.random.Generator, indices=None
) -> SolverResult:
    """Run a planned DP-SGD-Output (rows already clipped to the public bound).

    The indices are drawn from a child of ``rng``, or are the given ``indices``: a sequence of
    ``T`` row numbers that must not depend on the data. The guarantee holds given every index
    sequence in which no row is drawn more than ``k_T`` times (Thm 7's good event; enforced here
    for given ``indices``) and, with ``tight_sensitivity``, given every index sequence; audits use
    this to draw the differing row as often as allowed. The output noise comes from an independent
    child generator, through :func:`skdpsco._noise.gaussian_noise` (on a grid with discrete
    noise in secure mode, :func:`skdpsco._secure.noisy_release`).

    Raises
    ------
    ValueError
        If ``X`` does not have the planned number of rows, or ``indices`` are not ``T`` row
        numbers allowed by the plan.
    """
    _check_rows(X, plan.n_samples)
    if indices is not None:
        indices = _check_indices(indices, plan)
    average, counts, noise_rng = _averaged_sgd(X, y, problem, plan.n_steps, plan.step_size, 0.0, rng, indices)
    max_draws = int(counts.max())
    if plan.tight_sensitivity:
        sensitivity = plan.sensitivity_given(max_draws)
        noise_std = plan.noise_multiplier * sensitivity
    else:
        sensitivity, noise_std = plan.sensitivity, plan.noise_std
    coef = noisy_release(average, noise_std, noise_rng, sensitivity=sensitivity)
    if plan.project_output:
        coef = project_to_ball(coef, problem.radius)
    info = {
        "n_steps": plan.n_steps,
        "gradients_per_row": plan.n_steps / plan.n_samples,
        "step_size": plan.step_size,
        "max_hits_bound": plan.max_hits,
        "max_row_draws": max_draws,
        "sensitivity": sensitivity,
        "noise_std": noise_std,
        "noise_multiplier": noise_std / sensitivity,
        "tight_sensitivity": plan.tight_sensitivity,
    }
    return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=plan.n_steps, info=info)


def _check_indices(indices, plan: OutputPerturbationPlan) -> np.ndarray:
    indices = np.asarray(indices)
    if not (
        indices.shape == (plan.n_steps,)
        and np.issubdtype(indices.dtype, np.integer)
        and indices.min() >= 0
        and indices.max() < plan.n_samples
    ):
        raise ValueError(f"indices must be {plan.n_steps} integers in [0, {plan.n_samples}).")
    most = int(np.bincount(indices).max())
    if not plan.tight_sensitivity and most > plan.max_hits:
        raise ValueError(
            f"indices draw a row {most} times, more than the k_T = {plan.max_hits:.4g} that the "
            "guarantee allows (Thm 7's good event); use tight_sensitivity=True for arbitrary indices."
        )
    return indices


@dataclass(frozen=True)
class OutputPerturbationSGD:
    """DP-SGD-Output (Wang et al., Algorithm 1, Thm 8); see :mod:`skdpsco.solvers.holder`.

    Projected SGD on the ball with ``T = ceil(n**e)`` uniform single-row steps
    (``T = n**2``, i.e. ``n`` gradients per row, for ``alpha = 0``; ``T = n`` for
    ``alpha >= 1/2``), then Gaussian noise on the average calibrated to Thm 7.

    Parameters
    ----------
    tight_sensitivity : bool, default=False
        Calibrate the noise to the sensitivity given the drawn indices (their largest draw count
        ``K`` instead of Thm 7's high-probability bound ``k_T``; §6 item 3): a Gaussian at
        ``(epsilon, delta)`` for every index sequence, hence for the algorithm, with no
        ``delta / 2`` failure term. At ``T = n`` (``alpha >= 1/2``) ``K`` is about 4–9 against
        ``k_T`` about 65–107 (§4.1), so the noise is about ten times smaller; at ``T = n**2`` the
        counts concentrate and the gain is small (``K = 236`` against ``k_T = 302`` at ``n = 200``).
        The noise scale is then random (a function of the indices only). ``False`` is the paper's
        calibration.
    max_steps : int or None, default=None
        Cap on ``T``. Privacy holds for every ``T``: the noise is computed for the ``T`` and the
        step actually run (§6 item 2), and the step keeps ``T eta`` at Thm 10's value. The utility
        theorem no longer applies below its ``T``, and since ``k_T >= 3 ln(2n/delta)`` whatever
        ``T``, fewer steps of larger size raise the sensitivity.
    step_scale : float, default=1.0
        Multiplies the step of Thm 10 (a public hyper-parameter; the cap below ``min(1, 1/L)``
        still applies). The paper's step is conservative at moderate ``n`` (``T eta`` about 1.7 at
        ``n = 1000``); the sensitivity grows in proportion to the step.
    project_output : bool, default=True
        Project the noisy average onto the ball (free post-processing), so that the release lies
        in the public domain like every other solver's. The projection onto a convex set holding
        the minimiser ``w*`` never moves a point away from it, so the bound ``L ||w - w*||`` on the
        excess risk of a Lipschitz loss can only drop (measured at n = 3000, epsilon = 3, least squares with radius 2: MAE 4.37 -> 1.04).
        ``False`` is the paper's unprojected release (§6 item 10).
    """

    tight_sensitivity: bool = False
    max_steps: int | None = None
    step_scale: float = 1.0
    project_output: bool = True

    requires_smooth_loss = False  # Thm 7 needs alpha-Hoelder gradients only (alpha = 0: Lipschitz loss)
    grid_releases = True  # every noise draw is one release of a point: a grid release in secure mode (skdpsco._secure)

    def __post_init__(self):
        _check_schedule_options(self.max_steps, self.step_scale)

    def plan(self, problem: Problem) -> OutputPerturbationPlan:
        return plan_output_perturbation(
            problem, bool(self.tight_sensitivity), self.max_steps, float(self.step_scale),
            bool(self.project_output),
        )

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator, indices=None) -> SolverResult:
        return run_output_perturbation(plan, X, y, problem, rng, indices)


# -- Algorithm 2: gradient perturbation ---------------------------------------------------------


def sampled_gaussian_event(n_samples: int, n_steps: int, noise_multiplier: float) -> dp_accounting.DpEvent:
    """``T`` steps, each a Gaussian mechanism of noise multiplier ``z = sigma / (2G)`` on one row
    drawn uniformly from ``n`` (§6 item 5; the library's RDP reading of ``GaussianDpEvent``)."""
    step = dp_accounting.SampledWithoutReplacementDpEvent(
        n_samples, 1, dp_accounting.GaussianDpEvent(noise_multiplier)
    )
    return dp_accounting.SelfComposedDpEvent(step, n_steps)


@dataclass(frozen=True)
class GradientPerturbationPlan:
    """A DP-SGD-Gradient run (§2.4): public quantities only.

    Attributes
    ----------
    n_samples, n_steps : int
        ``n`` and ``T``.
    step_size : float
        ``eta``.
    sensitivity : float
        ``2G``: replace-one sensitivity of one row's gradient at a given iterate.
    noise_multiplier : float
        ``z = sigma / (2G)``.
    noise_std : float
        ``sigma``, per coordinate of each gradient.
    """

    n_samples: int
    n_steps: int
    step_size: float
    sensitivity: float
    noise_multiplier: float
    noise_std: float

    @property
    def dp_event(self):
        return sampled_gaussian_event(self.n_samples, self.n_steps, self.noise_multiplier)


@lru_cache(maxsize=256)
def plan_gradient_perturbation(
    problem: Problem, max_steps: int | None, step_scale: float
) -> GradientPerturbationPlan:
    """Plan DP-SGD-Gradient (Algorithm 2, §2.4) to be (epsilon, delta)-DP under replace-one neighbours.

    ``T`` and ``eta`` of Thm 12 (§2.6); ``z`` the smallest noise multiplier (to within
    :data:`_CALIBRATION_RTOL`) for which :func:`sampled_gaussian_event` meets (epsilon, delta),
    by :func:`~skdpsco.accounting.calibrate_noise`. Never looser than Thm 11's closed form, and
    feasible where it is not (§4.2; ``tests/test_holder.py``).

    Raises
    ------
    ValueError
        If the problem has no finite ball, or unusable constants (:func:`_check_problem`).
    """
    alpha, holder, lipschitz = _check_problem(problem)
    n, epsilon, delta = problem.n_samples, float(problem.epsilon), float(problem.delta)
    n_steps = default_n_steps(n, alpha, max_steps)
    step = step_scale * gradient_perturbation_step(n, n_steps, problem.n_params, epsilon, delta)
    step = _capped_step(step, holder, problem.l2_penalty)
    multiplier = _sampled_multiplier(n, n_steps, epsilon, delta)
    sensitivity = 2.0 * lipschitz
    return GradientPerturbationPlan(n, n_steps, step, sensitivity, multiplier, multiplier * sensitivity)


@lru_cache(maxsize=256)
def _sampled_multiplier(n_samples: int, n_steps: int, epsilon: float, delta: float) -> float:
    """Smallest ``z`` (to within :data:`_CALIBRATION_RTOL`) for which :func:`sampled_gaussian_event`
    meets (epsilon, delta); it depends on nothing else, so it is shared across losses and steps."""
    return calibrate_noise(
        lambda z: sampled_gaussian_event(n_samples, n_steps, z), epsilon, delta, rtol=_CALIBRATION_RTOL
    )


def run_gradient_perturbation(
    plan: GradientPerturbationPlan, X, y, problem: Problem, rng: np.random.Generator
) -> SolverResult:
    """Run a planned DP-SGD-Gradient (rows already clipped to the public bound).

    The indices are always drawn from ``rng`` (the guarantee comes from their randomness), the
    gradient noise from an independent child generator.
    """
    _check_rows(X, plan.n_samples)
    coef, counts, _ = _averaged_sgd(X, y, problem, plan.n_steps, plan.step_size, plan.noise_std, rng)
    info = {
        "n_steps": plan.n_steps,
        "gradients_per_row": plan.n_steps / plan.n_samples,
        "step_size": plan.step_size,
        "max_row_draws": int(counts.max()),
        "sensitivity": plan.sensitivity,
        "noise_std": plan.noise_std,
        "noise_multiplier": plan.noise_multiplier,
    }
    return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=plan.n_steps, info=info)


@dataclass(frozen=True)
class GradientPerturbationSGD:
    """DP-SGD-Gradient (Wang et al., Algorithm 2) with exact accounting; see :mod:`skdpsco.solvers.holder`.

    Projected SGD on the ball with ``T = ceil(n**e)`` uniform single-row steps (``T = n**2`` for
    ``alpha = 0``, ``T = n`` for ``alpha >= 1/2``) and Gaussian noise on every gradient; the
    average of the iterates is released. Privacy needs only the gradient bound ``G``, so it does
    not rest on the Hoelder constants (§6 item 7); the schedule does.

    Parameters
    ----------
    max_steps : int or None, default=None
        Cap on ``T``. Privacy holds for every ``T`` (the noise is calibrated to the ``T`` run; fewer
        steps need less noise); the step keeps ``T eta`` at Thm 12's value, whose utility bound
        no longer applies below its ``T``.
    step_scale : float, default=1.0
        Multiplies the step of Thm 12 (a public hyper-parameter; privacy does not depend on it).
        The paper's step is conservative at moderate ``n`` (``T eta`` about 2.6 at ``n = 1000``).
    """

    max_steps: int | None = None
    step_scale: float = 1.0

    requires_smooth_loss = False  # privacy needs the gradient bound only; utility Hoelder gradients

    def __post_init__(self):
        _check_schedule_options(self.max_steps, self.step_scale)

    def plan(self, problem: Problem) -> GradientPerturbationPlan:
        return plan_gradient_perturbation(problem, self.max_steps, float(self.step_scale))

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator) -> SolverResult:
        return run_gradient_perturbation(plan, X, y, problem, rng)
