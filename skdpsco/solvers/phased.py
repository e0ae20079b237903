"""Phased-SGD, Phased-ERM and the strongly convex reduction (Feldman, Koren & Talwar 2020, §4–§5).

Spec: ``shared/spec/feldman.md`` §0.3 (C4), §A6, §A7, §A8a, §A9; pitfalls D2, D5–D9, D14.

Localization with output perturbation: the rows are split, in an order fixed before the data is
read, into ``k = floor(log2 n)`` disjoint blocks of sizes ``n_i = floor(n / 2**i)``; phase ``i``
starts from the previous phase's noisy output, solves a problem on its block with step
``eta_i = eta / 4**i`` (one pass of projected SGD, §A6; or a regularised ERM, §A7), and releases
its point plus Gaussian noise of standard deviation ``sigma_i = Delta_i sigma_unit``, where
``Delta_i`` is the replace-one sensitivity of the phase given its start.

Privacy (§A6 "Privacy", §0.3 C4): a row is read in exactly one phase; the phases before it do not
depend on it and the phases after it are post-processing of that phase's noisy output, so for
every row the release is one Gaussian mechanism with ``Delta_i / sigma_i = 1 / sigma_unit``. The
guarantee of the whole release is therefore exactly ``gaussian_event(sigma_unit, 1.0)``, i.e.
``mu``-GDP with ``mu = 1 / sigma_unit``, and ``sigma_unit`` is calibrated exactly to the user's
(epsilon, delta) by the PLD accountant (:func:`~skdpsco.accounting.gaussian_noise_multiplier`). Output perturbation
allows any function of the phase's path to be released, so averaging is allowed (§A9).

Row order: any order fixed before training, so Dask rows stream. The privacy argument above
never uses the order being random: for a row at any position, the phases before its phase do not
depend on it, its phase's output is one Gaussian mechanism of sensitivity ``Delta_i`` given its
start, and the later phases are post-processing, whichever rows the phases hold, provided the
split into phases does not depend on the data (pitfall D5). There is no amplification by
shuffling or sampling to lose. So the rows of a Dask fit are read in the public order of its
blocks (:class:`skdpsco._dask.RowStream`: the blocks, and the rows of each, in a seeded
data-independent order), a phase spanning as many blocks as it needs with its iterate and average
carried across them, and the event is the in-memory one. The same holds for the strongly convex
reduction (disjoint epochs of Phased-SGD, parallel composition). Phased-ERM is refused on Dask
rows: its certified solver reads a phase's rows many times (:data:`skdpsco._dask.ALGORITHMS`).
Utility does depend on the order (``benchmarks/results/dask_stream.md``).

Choices made here, each derived in the spec or below:

* **Leftover rows.** ``sum_i floor(n / 2**i) = n - popcount(n)``; the ``popcount(n) <= log2(n) + 1``
  remaining rows go to the last phase, so every row is read exactly once (pitfall D7: never reused).
  A larger last phase changes no sensitivity: one row still enters one step (SGD) or one term
  (ERM).
* **Sensitivity with a ridge term.** With ``problem.l2_penalty = lambda > 0`` the per-row loss is
  ``f(w, x) + lambda ||w||**2 / 2``: its gradients are bounded by ``L + lambda R`` and it is
  ``(beta + lambda)``-smooth (§A8 note), which is what the step sizes and the contraction condition
  use. The *sensitivity* uses the loss's own ``L``: the ridge term is the same on both
  neighbouring datasets and cancels in the difference of the two updates
  (``||eta (grad f(u, x) + lambda u) - eta (grad f(u, x') + lambda u)|| <= 2 L eta``), and likewise
  in the difference of the two ERM objectives.
* **Last iterate of each phase by default** (``average=False``). The sensitivity ``2 L eta_i`` holds for
  the last iterate and for any average of the iterates (§A6 sensitivity lemma, pitfall D6), and
  the last iterate measured better everywhere (``shared/notes/utility-prototype.md``, Analysis
  7(c): excess log-loss 0.017 vs 0.034 at n = 1e4, epsilon = 1; 0.0006 vs 0.0023 at n = 1e5;
  breast-cancer accuracy 0.85 vs 0.79 at epsilon = 10). ``average=True`` is the spec's variant.
* **Base step** ``eta*`` of §A6 ("Best eta [derived]") with ``D0 = R`` (the start ``w_0 = 0`` is at
  distance at most ``R`` from any ``w*`` in the ball) and the spec's ``c / rho`` replaced by the exact
  calibration: ``sigma_i = c L eta_i / rho`` there and ``sigma_i = 2 L eta_i sigma_unit`` here, so
  ``c / rho = 2 sigma_unit`` and the bound's ``4 c**2 d L**2 / (rho**2 n)`` is
  ``16 sigma_unit**2 p L**2 / n``. It is capped so that ``eta_1 = eta / 4 <= 2 / beta`` (D2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._secure import noisy_release
from ..accounting import gaussian_event, gaussian_noise_multiplier
from ._core import SolverResult, margin_gradient, project_to_ball, projected_noisy_sgd, rows_and_noise_rng
from .erm import certified_iterations, certified_minimize

if TYPE_CHECKING:
    from ._problem import Problem

__all__ = [
    "PhasedERM",
    "PhasedERMPlan",
    "PhasedPlan",
    "PhasedSGD",
    "StronglyConvexPhasedSGD",
    "StronglyConvexPlan",
    "base_step",
    "phase_sizes",
    "phase_steps",
    "strongly_convex_schedule",
]

SGD_GRADIENT_TERM = 1.0 / 6.0
"""``sum_i eta_i L**2 / 2 = eta L**2 / 6``: the gradient-variance term of the §A6 bound."""

ERM_GRADIENT_TERM = 1.0 / 4.0
"""The same term for §A7 (per phase ``L**2 eta_i + L tau_i = 3 L**2 eta_i / 2`` against SGD's
``L**2 eta_i / 2``, and ``||w_{i-1} - v||**2 / (eta_i n_i)``, twice SGD's): the §A7 bound is
``8 D0**2 / (eta n) + eta L**2 (1/2 + 32 sigma_unit**2 p / n)``, minimised at
``(2 D0 / (L sqrt(n))) / sqrt(1/4 + 16 sigma_unit**2 p / n)``."""


# -- public schedule formulas ----------------------------------------------------------------------


def _check_n_samples(n_rows: int) -> int:
    n_rows = int(n_rows)
    if n_rows < 2:
        raise ValueError(f"Phased algorithms need n_samples >= 2; got {n_rows}. Provide more rows.")
    return n_rows


def phase_sizes(n_rows: int) -> np.ndarray:
    """Block sizes ``n_i = floor(n / 2**i)``, ``i = 1..floor(log2 n)`` (§A6), leftover rows to the last.

    Raises
    ------
    ValueError
        If ``n_rows < 2`` (pitfall D8: the first phase needs a row).
    """
    n_rows = _check_n_samples(n_rows)
    n_phases = n_rows.bit_length() - 1  # floor(log2 n), exactly
    sizes = np.array([n_rows >> i for i in range(1, n_phases + 1)], dtype=np.int64)
    sizes[-1] += n_rows - int(sizes.sum())
    return sizes


def phase_steps(base: float, n_phases: int) -> np.ndarray:
    """``eta_i = eta / 4**i``, ``i = 1..k`` (§A6)."""
    return float(base) / 4.0 ** np.arange(1, n_phases + 1)


def base_step(
    radius: float, lipschitz: float, n_rows: int, n_params: int, noise_multiplier: float, gradient_term: float
) -> float:
    """``eta* = (2 D0 / (L sqrt(n))) / sqrt(g + 16 sigma_unit**2 p / n)`` with ``D0 = R`` (§A6 "Best eta").

    ``g`` is :data:`SGD_GRADIENT_TERM` (§A6) or :data:`ERM_GRADIENT_TERM` (§A7); ``L`` bounds the
    per-row gradient norm (``L + lambda R`` with a ridge term; in the privacy term too, where the
    loss's own ``L`` would do, as the spec's §A8a formulas do) and ``p`` is the number of parameters.
    """
    privacy_term = 16.0 * noise_multiplier**2 * n_params / n_rows
    return 2.0 * radius / (lipschitz * math.sqrt(n_rows)) / math.sqrt(gradient_term + privacy_term)


def _max_base_step(smoothness: float) -> float:
    """Largest ``eta`` with ``eta_1 = eta / 4 <= 2 / beta`` (§A6 sensitivity lemma, FMTT Prop. 18)."""
    return 8.0 / smoothness if smoothness > 0 else math.inf


def strongly_convex_schedule(
    n_rows: int, n_params: int, lipschitz: float, l2_penalty: float, radius: float, noise_multiplier: float
) -> tuple[int, float, np.ndarray]:
    """Epoch count ``J``, rate constant ``g`` and distance bounds ``R_0..R_J`` of §A8a.

    With ``A(m) = 4 / m`` and ``B(m) = L**2 (1/6 + 16 sigma_unit**2 p / m)`` (the §A6 bound
    ``A R**2 / eta + B eta`` in the exact calibration, ``c / rho = 2 sigma_unit``) and
    ``g(m) = 2 sqrt(A(m) B(m))``:

    * ``J = 1 + ceil(log2(max(1, log2(lambda R_0 / (2 g(n))))))``; then ``m = floor(n / J)`` and
      ``g = g(m)``. ``g`` grows as ``m`` shrinks, so ``J`` computed at ``g(n)`` is at least the ``J``
      that ``g(m)`` would give: no further pass is needed (the spec's "one more pass");
    * since ``L >= lambda R`` (the ridge gradient alone), ``g(n) >= 4 lambda R / sqrt(6 n)`` and
      ``J <= 1 + ceil(log2(log2(sqrt(6 n) / 8)))``, far below ``n / 2``: every epoch has at least
      two rows whenever ``n >= 2``;
    * ``R_0 = R`` (the start ``w_0 = 0`` is within ``R`` of any ``w*`` in the ball; the spec's ``D``
      is for an arbitrary start in ``K``) and ``R_j = sqrt(2 g R_{j-1} / lambda)``, a bound on
      ``sqrt(E ||w_j - w*||**2)`` from ``F(w) - F* >= lambda ||w - w*||**2 / 2``.

    Returns
    -------
    n_epochs : int
    rate : float
        ``g = g(floor(n / J))``.
    radii : ndarray of shape (J + 1,)
        ``R_0, ..., R_J``.
    """

    def rate(m: int) -> float:
        return 2.0 * math.sqrt(4.0 / m * lipschitz**2 * (1.0 / 6.0 + 16.0 * noise_multiplier**2 * n_params / m))

    ratio = l2_penalty * radius / (2.0 * rate(n_rows))
    n_epochs = 1 + math.ceil(math.log2(max(1.0, math.log2(ratio))))
    g = rate(max(1, n_rows // n_epochs))
    radii = [float(radius)]
    for _ in range(n_epochs):
        radii.append(math.sqrt(2.0 * g * radii[-1] / l2_penalty))
    return n_epochs, g, np.array(radii)


# -- plans -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhasedPlan:
    """A phase schedule of public quantities only, fixed before the data is read.

    Attributes
    ----------
    sizes : ndarray of int
        Block sizes ``n_i`` (they sum to the number of rows).
    steps : ndarray
        ``eta_i = eta / 4**i``.
    sensitivities : ndarray
        Replace-one sensitivity ``Delta_i`` of phase ``i``'s output given its start.
    noise_multiplier : float
        ``sigma_unit``; the phase noise is ``sigma_i = Delta_i sigma_unit``.
    base_step : float
        ``eta``.
    average : bool
        Release the average of the phase's iterates instead of its last iterate (SGD only).
    """

    sizes: np.ndarray
    steps: np.ndarray
    sensitivities: np.ndarray
    noise_multiplier: float
    base_step: float
    average: bool = False

    @property
    def noise_stds(self) -> np.ndarray:
        return self.sensitivities * self.noise_multiplier

    @property
    def dp_event(self):
        """One Gaussian release per row, ``Delta_i / sigma_i = 1 / sigma_unit`` in every phase."""
        return gaussian_event(self.noise_multiplier, 1.0)

    @property
    def n_samples(self) -> int:
        return int(self.sizes.sum())

    @property
    def n_phases(self) -> int:
        return int(self.sizes.size)

    def info(self) -> dict:
        return {
            "n_phases": self.n_phases,
            "phase_sizes": self.sizes.tolist(),
            "base_step": self.base_step,
            "noise_multiplier": self.noise_multiplier,
            "noise_stds": self.noise_stds.tolist(),
            "average": self.average,
        }


def freeze_arrays(*arrays: np.ndarray) -> None:
    """Make a plan's public arrays read-only, so a frozen plan is immutable."""
    for array in arrays:
        array.setflags(write=False)


def _sgd_phases(
    n_rows: int, step: float, lipschitz: float, noise_multiplier: float, average: bool
) -> PhasedPlan:
    """§A6 schedule with base step ``step``: ``Delta_i = 2 L eta_i`` (pitfall D6, needs ``eta_1 <= 2 / beta``)."""
    sizes = phase_sizes(n_rows)
    steps = phase_steps(step, sizes.size)
    sensitivities = 2.0 * lipschitz * steps
    freeze_arrays(sizes, steps, sensitivities)
    return PhasedPlan(sizes, steps, sensitivities, noise_multiplier, step, average)


@dataclass(frozen=True)
class _Constants:
    """Constants of the per-row loss ``f + lambda ||w||**2 / 2`` on the ball (module docstring)."""

    lipschitz: float  # L of f alone: the sensitivity constant (the ridge cancels)
    gradient_bound: float  # L + lambda R: bounds every per-row gradient (step sizes)
    smoothness: float  # beta + lambda
    l2_penalty: float  # lambda


def validated_constants(problem: Problem, algorithm: str) -> _Constants:
    """Validated constants of ``problem``; a clear error when ``algorithm`` cannot run on it."""
    c = problem.constants
    lam = float(problem.l2_penalty)
    if not lam >= 0:
        raise ValueError(f"l2_penalty must be >= 0; got {problem.l2_penalty!r}.")
    if not 0 < c.lipschitz < math.inf:
        raise ValueError(
            f"{algorithm} needs a Lipschitz loss on the domain (finite L); the loss {problem.loss.name!r} "
            "has none there. Bound the domain with a finite radius or choose a Lipschitz loss."
        )
    if c.smoothness is None or not math.isfinite(c.smoothness):
        raise ValueError(
            f"{algorithm} needs a smooth loss (Lipschitz gradient); the loss {problem.loss.name!r} is not. "
            "Use its Gaussian-smoothed version (feldman.md §B10)."
        )
    L, R = float(c.lipschitz), float(problem.radius)
    return _Constants(L, L + lam * R, float(c.smoothness) + lam, lam)


def plan_phased_sgd(problem: Problem, average: bool, step_scale: float) -> PhasedPlan:
    """Plan Phased-SGD (§A6) for ``problem``: (epsilon, delta)-DP exactly (module docstring)."""
    c = validated_constants(problem, "PhasedSGD")
    n_rows = _check_n_samples(problem.n_samples)  # before the (slower) calibration
    sigma_unit = gaussian_noise_multiplier(float(problem.epsilon), float(problem.delta))
    step = step_scale * base_step(
        float(problem.radius), c.gradient_bound, n_rows, problem.n_params, sigma_unit, SGD_GRADIENT_TERM
    )
    return _sgd_phases(n_rows, min(step, _max_base_step(c.smoothness)), c.lipschitz, sigma_unit, average)


@dataclass(frozen=True)
class PhasedERMPlan:
    """Phased-ERM (§A7): the phase schedule and each phase's certified solve.

    Attributes
    ----------
    phases : PhasedPlan
        With ``Delta_i = L eta_i + 2 tau_i``.
    tolerances : ndarray
        ``tau_i = L eta_i / 2`` (§A7 recommendation), the certified distance to the phase minimiser.
    smoothness, strong_convexity : ndarray
        ``beta + lambda + 2 / (eta_i n_i)`` and ``lambda + 2 / (eta_i n_i)``: constants of ``F_i``.
    n_iterations : ndarray of int
        Public iteration counts of the certified solver (:func:`~skdpsco.solvers.erm.certified_iterations`).
    """

    phases: PhasedPlan
    tolerances: np.ndarray
    smoothness: np.ndarray
    strong_convexity: np.ndarray
    n_iterations: np.ndarray

    @property
    def dp_event(self):
        return self.phases.dp_event

    @property
    def n_gradients(self) -> int:
        """Per-row gradient evaluations: ``n_iterations + 1`` full-block gradients per phase."""
        return int(np.sum((self.n_iterations + 1) * self.phases.sizes))


def plan_phased_erm(problem: Problem, step_scale: float) -> PhasedERMPlan:
    """Plan Phased-ERM (§A7) with the deterministic certificate; (epsilon, delta)-DP exactly.

    Phase ``i`` minimises ``F_i(w) = mean_{block i} (f(w, x) + lambda ||w||**2 / 2)
    + ||w - c_i||**2 / (eta_i n_i)`` over the ball, ``c_i = Pi_K(w_{i-1})``. The argmin moves by at
    most ``2 L / (lambda_i n_i) = L eta_i`` under replacement (``lambda_i = 2 / (eta_i n_i)``, the
    regulariser's exact strong convexity, pitfall D14), and the certified solver is within
    ``tau_i`` of it on both datasets: ``Delta_i = L eta_i + 2 tau_i``.
    """
    c = validated_constants(problem, "PhasedERM")
    sizes = phase_sizes(problem.n_samples)
    sigma_unit = gaussian_noise_multiplier(float(problem.epsilon), float(problem.delta))
    radius = float(problem.radius)
    # No contraction cap: the argmin's sensitivity needs no bound on eta (§A7).
    step = step_scale * base_step(
        radius, c.gradient_bound, problem.n_samples, problem.n_params, sigma_unit, ERM_GRADIENT_TERM
    )
    steps = phase_steps(step, sizes.size)
    tolerances = c.lipschitz * steps / 2.0
    sensitivities = c.lipschitz * steps + 2.0 * tolerances
    regulariser = 2.0 / (steps * sizes)  # strong convexity of ||w - c_i||**2 / (eta_i n_i)
    strong_convexity = c.l2_penalty + regulariser
    smoothness = c.smoothness + regulariser
    # ||c_i - w_hat|| <= min(2R, 2 ||grad F_i(c_i)|| / mu_i) with ||grad F_i(c_i)|| <= L + lambda R.
    distances = np.minimum(2.0 * radius, 2.0 * c.gradient_bound / strong_convexity)
    n_iterations = np.array(
        [
            certified_iterations(b, m, t, r, c.gradient_bound)
            for b, m, t, r in zip(smoothness, strong_convexity, tolerances, distances, strict=True)
        ],
        dtype=np.int64,
    )
    freeze_arrays(sizes, steps, tolerances, sensitivities, strong_convexity, smoothness, n_iterations)
    phases = PhasedPlan(sizes, steps, sensitivities, sigma_unit, step)
    return PhasedERMPlan(phases, tolerances, smoothness, strong_convexity, n_iterations)


@dataclass(frozen=True)
class StronglyConvexPlan:
    """§A8a: ``J`` Phased-SGD epochs on disjoint rows, each started from the previous output.

    Attributes
    ----------
    epochs : tuple of PhasedPlan
        Epoch ``j`` has base step ``eta_j = R_{j-1} sqrt(A / B)`` (capped for contraction).
    radii : ndarray
        ``R_0..R_J``: bounds on the root-mean-square distance to ``w*`` (they set the steps; the
        domain stays the ball of the problem, since ``R_j`` bounds a second moment only).
    rate : float
        ``g``; the excess-risk bound is ``g R_{J-1} <= 4 g**2 / lambda`` (§A8a "Guarantee").
    """

    epochs: tuple
    radii: np.ndarray
    rate: float

    @property
    def dp_event(self):
        """The worst epoch's event; all are ``gaussian_event(sigma_unit, 1.0)`` (parallel composition)."""
        return self.epochs[0].dp_event

    @property
    def n_samples(self) -> int:
        return sum(epoch.n_samples for epoch in self.epochs)


def plan_strongly_convex(problem: Problem, average: bool) -> StronglyConvexPlan:
    """Plan the §A8a reduction; requires ``problem.l2_penalty > 0`` (the strong convexity ``lambda``)."""
    lam = float(problem.l2_penalty)
    if not lam > 0:
        raise ValueError(
            "StronglyConvexPhasedSGD needs strong convexity from an explicit ridge term: set alpha > 0 "
            f"on the estimator (got alpha={problem.l2_penalty!r})."
        )
    c = validated_constants(problem, "StronglyConvexPhasedSGD")
    n_rows = _check_n_samples(problem.n_samples)  # then every epoch has >= 2 rows (strongly_convex_schedule)
    sigma_unit = gaussian_noise_multiplier(float(problem.epsilon), float(problem.delta))
    n_epochs, rate, radii = strongly_convex_schedule(
        n_rows, problem.n_params, c.gradient_bound, lam, float(problem.radius), sigma_unit
    )
    per_epoch = n_rows // n_epochs
    sizes = [per_epoch] * n_epochs
    sizes[-1] += n_rows - per_epoch * n_epochs
    # eta_j = R_{j-1} sqrt(A / B) = eta*(R_{j-1}) of §A6 at m rows (A = 4/m, B = L^2 (1/6 + ...)).
    steps = [
        base_step(r, c.gradient_bound, per_epoch, problem.n_params, sigma_unit, SGD_GRADIENT_TERM)
        for r in radii[:-1]
    ]
    cap = _max_base_step(c.smoothness)
    epochs = tuple(
        _sgd_phases(m, min(eta, cap), c.lipschitz, sigma_unit, average) for m, eta in zip(sizes, steps, strict=True)
    )
    freeze_arrays(radii)
    return StronglyConvexPlan(epochs, radii, rate)


# -- running --------------------------------------------------------------------------------------------

PhaseSolver = Callable[[int, np.ndarray, int], np.ndarray]


def _release_phases(
    plan: PhasedPlan,
    first: int,
    w0: np.ndarray,
    radius: float,
    noise_rng: np.random.Generator,
    solve: PhaseSolver,
) -> np.ndarray:
    """Run the phases: ``w_i = solve(i, Pi_K(w_{i-1}), first_i) + N(0, sigma_i**2 I)``, where phase
    ``i`` reads the ``plan.sizes[i]`` rows from position ``first_i`` of the row source (``first``
    for the first phase, then consecutive); return ``Pi_K(w_k)``.

    The noise is drawn by :func:`skdpsco._noise.release_noise` from
    :func:`~skdpsco._noise.gaussian_noise`, the one noise source (looked up on the module at
    call time, so tests can weaken and observe it), through :func:`skdpsco._secure.noisy_release`
    (on a grid with discrete noise in secure mode).
    """
    w = np.array(w0, dtype=float)
    for i, size in enumerate(plan.sizes):
        start = project_to_ball(w, radius)
        value = solve(i, start, first)
        w = noisy_release(value, plan.noise_stds[i], noise_rng, sensitivity=plan.sensitivities[i])
        first += int(size)
    return project_to_ball(w, radius)


def _sgd_solver(plan: PhasedPlan, source, gradient, radius: float, noise_rng: np.random.Generator) -> PhaseSolver:
    """One pass of plain projected SGD per phase, batch 1, no gradient noise (§A6), via the shared
    core, on the phase's rows of the row source ``source`` (in memory or streamed: a phase may
    span many blocks of a Dask collection, its iterate and average carried across them)."""

    def solve(i, start, first):
        n_i = int(plan.sizes[i])
        return projected_noisy_sgd(
            gradient,
            source.batches(first, np.broadcast_to(np.int64(1), n_i)),  # views: no array of n_i entries
            np.broadcast_to(plan.steps[i], n_i),
            np.broadcast_to(0.0, n_i),
            start,
            radius,
            noise_rng,
            average=plan.average,
        )

    return solve


def run_phased_sgd(
    plan: PhasedPlan,
    X: np.ndarray,
    y: np.ndarray,
    problem: Problem,
    rng: np.random.Generator,
    order=None,
    rows_written=None,
) -> SolverResult:
    """Run planned Phased-SGD on rows already clipped to the public bound; start at ``w_0 = 0``.

    ``X`` is in memory, or the rows of a Dask fit, streamed a block at a time in a data-independent
    block-level ``order`` (:func:`~skdpsco.solvers._core.rows_and_noise_rng`). ``rows_written``: rows
    of ``X`` still being written, read as they are (:class:`~skdpsco.rows.ArrayRows`)."""
    source, noise_rng = rows_and_noise_rng(X, y, plan.n_samples, rng, order, rows_written)
    radius = float(problem.radius)
    solve = _sgd_solver(plan, source, margin_gradient(problem.loss, problem.l2_penalty), radius, noise_rng)
    coef = _release_phases(plan, 0, np.zeros(problem.coef_shape), radius, noise_rng, solve)
    info = {"algorithm": "phased_sgd", **plan.info(), "max_step": float(plan.steps[0])}
    return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=plan.n_samples, info=info)


def run_phased_erm(
    plan: PhasedERMPlan,
    X: np.ndarray,
    y: np.ndarray,
    problem: Problem,
    rng: np.random.Generator,
    order: np.ndarray | None = None,
) -> SolverResult:
    """Run planned Phased-ERM (§A7) with the certified deterministic solver of :mod:`.erm`."""
    phases = plan.phases
    source, noise_rng = rows_and_noise_rng(X, y, phases.n_samples, rng, order)
    radius = float(problem.radius)
    loss_gradient = margin_gradient(problem.loss, problem.l2_penalty)

    def solve(i, start, first):
        X_block, y_block = source.rows(first, first + int(phases.sizes[i]))
        pull = 2.0 / (phases.steps[i] * phases.sizes[i])  # gradient of ||w - c_i||^2 / (eta_i n_i)

        def gradient(w):
            return loss_gradient(w, X_block, y_block) + pull * (w - start)

        return certified_minimize(
            gradient, start, radius, plan.smoothness[i], plan.strong_convexity[i], plan.tolerances[i],
            int(plan.n_iterations[i]),
        )

    coef = _release_phases(phases, 0, np.zeros(problem.coef_shape), radius, noise_rng, solve)
    info = {
        "algorithm": "phased_erm",
        **phases.info(),
        "tolerances": plan.tolerances.tolist(),
        "n_iterations": plan.n_iterations.tolist(),
    }
    return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=plan.n_gradients, info=info)


def run_strongly_convex(
    plan: StronglyConvexPlan,
    X: np.ndarray,
    y: np.ndarray,
    problem: Problem,
    rng: np.random.Generator,
    order=None,
) -> SolverResult:
    """Run the §A8a epochs: Phased-SGD on consecutive disjoint row ranges of the row source (in
    memory or streamed, as :func:`run_phased_sgd`), each from the last output."""
    source, noise_rng = rows_and_noise_rng(X, y, plan.n_samples, rng, order)
    radius = float(problem.radius)
    gradient = margin_gradient(problem.loss, problem.l2_penalty)
    w = np.zeros(problem.coef_shape)
    first = 0
    for epoch in plan.epochs:
        solve = _sgd_solver(epoch, source, gradient, radius, noise_rng)
        w = _release_phases(epoch, first, w, radius, noise_rng, solve)
        first += epoch.n_samples
    info = {
        "algorithm": "strongly_convex_phased_sgd",
        "n_epochs": len(plan.epochs),
        "epoch_sizes": [epoch.n_samples for epoch in plan.epochs],
        "epoch_steps": [float(epoch.base_step) for epoch in plan.epochs],
        "radii": plan.radii.tolist(),
        "rate": plan.rate,
        "noise_multiplier": plan.epochs[0].noise_multiplier,
    }
    return SolverResult(coef=w, dp_event=plan.dp_event, n_gradients=plan.n_samples, info=info)


# -- the public algorithms ------------------------------------------------------------------------------


def check_step_scale(step_scale: float) -> None:
    """Refuse a ``step_scale`` that is not a finite positive number."""
    if not (isinstance(step_scale, (int, float)) and 0 < step_scale < math.inf):
        raise ValueError(f"step_scale must be a finite number > 0; got {step_scale!r}.")


@dataclass(frozen=True)
class PhasedSGD:
    """Phased-SGD (FKT20 §4, ``feldman.md`` §A6): localization with Gaussian output perturbation.

    Parameters
    ----------
    average : bool, default=False
        Release each phase's average iterate (the spec's variant) instead of its last iterate
        (same sensitivity ``2 L eta_i``; the last iterate measured better, module docstring).
    step_scale : float, default=1.0
        Multiplies the base step ``eta*`` of §A6 (public hyper-parameter; the prototype notes
        measured 0.3 as a robust practical value, ``utility-prototype.md`` Analysis 7(a)).
    """

    requires_smooth_loss = True  # 2 L eta sensitivity / certified ERM need a smooth loss
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws
    reads_rows_progressively = True  # run(..., rows_written=) reads rows still being written as they are
    grid_releases = True  # every noise draw is one release of a point: a grid release in secure mode (skdpsco._secure)

    average: bool = False
    step_scale: float = 1.0

    def __post_init__(self):
        check_step_scale(self.step_scale)

    def plan(self, problem: Problem) -> PhasedPlan:
        return plan_phased_sgd(problem, bool(self.average), float(self.step_scale))

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator, order=None,
            rows_written=None) -> SolverResult:
        return run_phased_sgd(plan, X, y, problem, rng, order, rows_written)


@dataclass(frozen=True)
class PhasedERM:
    """Phased-ERM (FKT20 §4, ``feldman.md`` §A7) with the deterministic certificate (pitfall D14).

    Needs a smooth per-row loss for the certified solver (privacy itself needs only ``L``); for
    hinge or absolute losses pass their exactly Gaussian-smoothed versions (§B10).
    ``n_gradients`` is ``O(n kappa_1**0.5 log(1 / tau))``: far more than one pass.

    Parameters
    ----------
    step_scale : float, default=1.0
        Multiplies the base step (:data:`ERM_GRADIENT_TERM`).
    """

    requires_smooth_loss = True  # 2 L eta sensitivity / certified ERM need a smooth loss
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws
    grid_releases = True  # every noise draw is one release of a point: a grid release in secure mode (skdpsco._secure)

    step_scale: float = 1.0

    def __post_init__(self):
        check_step_scale(self.step_scale)

    def plan(self, problem: Problem) -> PhasedERMPlan:
        return plan_phased_erm(problem, float(self.step_scale))

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator, order=None) -> SolverResult:
        return run_phased_erm(plan, X, y, problem, rng, order)


@dataclass(frozen=True)
class StronglyConvexPhasedSGD:
    """Strongly convex reduction (FKT20 §5, ``feldman.md`` §A8a) over :class:`PhasedSGD` epochs.

    Requires the strong convexity of an explicit ridge term (``problem.l2_penalty > 0``).

    Parameters
    ----------
    average : bool, default=False
        As in :class:`PhasedSGD`, inside every epoch.
    """

    requires_smooth_loss = True  # 2 L eta sensitivity / certified ERM need a smooth loss
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws
    grid_releases = True  # every noise draw is one release of a point: a grid release in secure mode (skdpsco._secure)

    average: bool = False

    def plan(self, problem: Problem) -> StronglyConvexPlan:
        return plan_strongly_convex(problem, bool(self.average))

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator, order=None) -> SolverResult:
        return run_strongly_convex(plan, X, y, problem, rng, order)
