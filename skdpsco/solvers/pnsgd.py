"""Projected noisy SGD with privacy amplification by iteration (Feldman, Mironov, Talwar & Thakurta 2018).

Spec: ``shared/spec/feldman.md`` Part B (intro, §B1–§B4, §B11), §0.2–§0.4, §A9 and pitfalls D1,
D2, D4, D5, D10–D13. Four public algorithms share one schedule: batch size 1, a constant step
``eta <= 2 / beta``, Gaussian noise of standard deviation ``sigma`` on every per-row gradient,
projection onto the public ball, **last iterate only**:

* :class:`PNSGD` (§B2, FMTT Thm 23): one pass over the rows;
* :class:`SkipPNSGD` (§B3, Thm 24): skip a public uniform ``t0`` in ``{0, ..., floor(n / 2)}``,
  then one pass over the remaining rows;
* :class:`StopPNSGD` (§B4, Lemma 25, Thm 26 corrected): stop after a **secret** uniform ``T`` in
  ``{1, ..., n}`` steps;
* :class:`MultiPassPNSGD` (§B11, Thm 35 generalised to ``E`` epochs): ``E`` passes in the same order.

Central guarantee, and what it is not
-------------------------------------
FMTT's bounds are *per index*: the row at position ``t`` of the pass is ``2 L**2 / (sigma**2
(n - t + 1))``-zCDP. Under replace-one neighbours the central guarantee is the worst index, the
last one, ``rho = 2 L**2 / sigma**2``: exactly the local guarantee of one noisy gradient, i.e. no
amplification at all for the last row (pitfall D13). PNSGD and Skip-PNSGD are offered for
completeness and for per-index analyses; Snowball-SGD (:mod:`skdpsco.solvers.snowball`) is the
one-pass algorithm whose *central* guarantee is amplified. Stop-PNSGD's random stopping does
amplify (``(1 + ln n) / n``), but its bound holds at one Renyi order under ``sigma >= L sqrt(2
alpha (alpha - 1))``, which forces ``sigma`` of order ``L sqrt(2) ln(1/delta) / epsilon``: more
noise than PNSGD's ``~ L sqrt(8 ln(1/delta)) / epsilon`` unless ``ln(1/delta)`` is small.

Last iterate only
-----------------
Every guarantee here is amplification by iteration, which covers the last iterate alone: an
average of iterates can be far less private (FKT20 §6, ``feldman.md`` §A9, pitfall D1). These
solvers therefore have no averaging option; they call the shared core with ``average=False``.

Row order and Dask rows
-----------------------
FMTT's per-index bounds (Thm 23, 24, 35) hold for a row at each position of a fixed order, and the
central guarantee is their maximum over positions (the last): no step of the proofs averages over
the order, so every order fixed before training and independent of the data gives the same
event (pitfall D5). PNSGD, Skip-PNSGD (``t0`` is drawn independently of the rows and is public)
and Multi-pass PNSGD (the same order every pass, as Thm 35 assumes) therefore stream the rows of a
Dask fit in the public order of their blocks (:class:`skdpsco._dask.RowStream`), the multi-pass
one reading every block once per pass. Stop-PNSGD is refused on Dask rows: its guarantee needs
the stopping time ``T`` secret, and the blocks a cluster computes (its task stream, its logs) would
show how far the pass went.

Randomness
----------
``rng`` is split into three independent children (pitfall D16): the row order (a uniformly random
permutation, or a fixed public ``order`` passed to ``run`` for audits; the guarantees hold for
every data-independent order, pitfall D5), the schedule randomness (Skip's ``t0``, Stop's ``T``)
and the privacy noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np

from ..accounting import (
    FixedOrderRdpDpEvent,
    amplification_by_iteration_rho,
    calibrate_noise,
    calibrate_zcdp_rho,
    epsilon_of,
    zcdp_event,
)
from ..rows import row_source
from ._core import SolverResult, margin_gradient, projected_noisy_sgd

__all__ = ["MultiPassPNSGD", "PNSGD", "PNSGDPlan", "SkipPNSGD", "StopPNSGD"]

STOP_RENYI_ORDERS = tuple(1.0 + np.geomspace(2e-2, 1e4, 241))
"""Public grid of Renyi orders ``alpha`` searched by Stop-PNSGD's calibration (§B4)."""

_NOISE_SAFETY = 1.0 + 1e-12
"""Relative round-up of a noise level computed in closed form, so that floating-point error in
``rho(sigma)`` never crosses the calibrated target (cf. pitfall D7)."""


# -- privacy bounds ---------------------------------------------------------------------------------


def pnsgd_rho(lipschitz: float, step: float, noise_std: float, n_steps: int) -> float:
    """zCDP ``rho`` of one PNSGD pass, worst index (``feldman.md`` §B2, FMTT Thm 23).

    Amplification by iteration (:func:`~skdpsco.accounting.amplification_by_iteration_rho`) with
    batch size 1 and a constant step: the row at step ``t`` gets ``2 L**2 / (sigma**2 (T - t +
    1))`` and the last row ``2 L**2 / sigma**2`` (no amplification, pitfall D13). The step cancels.
    """
    steps = np.full(n_steps, float(step))
    return amplification_by_iteration_rho(lipschitz, steps, np.ones(n_steps), noise_std)


def multipass_rho(lipschitz: float, noise_std: float, n_samples: int, epochs: int) -> float:
    """zCDP ``rho`` of ``E`` passes in the same order (``feldman.md`` §B11, derived).

    ``(2 L**2 / sigma**2) (1 + (E - 1) / n)``: spreading the shift ``2 eta L`` of each use of the
    worst row (the last) evenly over the ``n`` steps up to its next use, and the last use over the
    final step, in FMTT Thm 22. ``E = n`` gives at most Thm 35's ``4 L**2 / sigma**2``.
    """
    return 2.0 * lipschitz**2 / noise_std**2 * (1.0 + (epochs - 1) / n_samples)


def stop_rdp(order: float, lipschitz: float, noise_std: float, n_samples: int) -> float:
    """Stop-PNSGD's Renyi divergence bound at ``order`` (``feldman.md`` §B4, FMTT Thm 26).

    ``4 alpha L**2 (1 + ln n) / (n sigma**2)``, with the spec's correction of the printed
    ``ln n`` to ``1 + ln n >= H_n`` (the harmonic sum of the proof); valid at this one order only
    and only when ``noise_std >= stop_min_noise(order, lipschitz)``.
    """
    return 4.0 * order * lipschitz**2 * (1.0 + math.log(n_samples)) / (n_samples * noise_std**2)


def stop_min_noise(order: float, lipschitz: float) -> float:
    """Validity condition of Stop-PNSGD's bound at ``order``: ``sigma >= L sqrt(2 alpha (alpha - 1))``
    (``feldman.md`` §B4; FMTT Lemma 25 needs ``c = 2 alpha (alpha - 1) L**2 / sigma**2 <= 1``)."""
    return lipschitz * math.sqrt(2.0 * order * (order - 1.0))


@lru_cache(maxsize=256)
def calibrate_stop(n_samples: int, lipschitz: float, epsilon: float, delta: float) -> tuple[float, float]:
    """Renyi order and smallest noise for which Stop-PNSGD's event meets (epsilon, delta).

    ``feldman.md`` §B4, "(epsilon, delta) calibration": minimise ``sigma`` over ``alpha``
    subject to the event ``(alpha, stop_rdp(alpha, ..., sigma))`` meeting the target (converted
    by :func:`~skdpsco.accounting.epsilon_of` at that order only) and ``sigma >=``
    :func:`stop_min_noise`. Search:

    1. for every order of :data:`STOP_RENYI_ORDERS` (increasing), the smallest ``sigma`` meeting
       the target by bisection (:func:`~skdpsco.accounting.calibrate_noise`), raised to the
       validity floor; stop once the floor, which grows with ``alpha``, exceeds the best
       ``sigma`` found;
    2. when the floor binds at the best order, the optimum lies where the two constraints meet,
       between the previous grid order and it: bisection on ``alpha`` with ``sigma`` at the floor.

    Every returned pair meets both constraints exactly (each candidate is checked by
    ``epsilon_of``); the search only affects how close ``sigma`` is to the optimum.

    Returns
    -------
    order, noise_std : float
    """

    def event(order: float, noise_std: float) -> FixedOrderRdpDpEvent:
        return FixedOrderRdpDpEvent(order, stop_rdp(order, lipschitz, noise_std, n_samples))

    def meets_at_floor(order: float) -> bool:
        return epsilon_of(event(order, stop_min_noise(order, lipschitz)), delta) <= epsilon

    best, best_noise = None, math.inf
    for index, order in enumerate(STOP_RENYI_ORDERS):
        floor = stop_min_noise(order, lipschitz)
        if floor >= best_noise:
            break
        try:
            noise = calibrate_noise(partial(event, order), epsilon, delta, initial=max(floor, lipschitz))
        except ValueError:  # no noise level below calibrate_noise's cap meets the target here
            continue
        if max(noise, floor) < best_noise:
            best, best_noise = index, max(noise, floor)
    if best is None:
        raise ValueError(
            f"No Renyi order meets epsilon={epsilon:g}, delta={delta:g} for Stop-PNSGD; increase epsilon or delta."
        )
    order = STOP_RENYI_ORDERS[best]
    if best > 0 and best_noise == stop_min_noise(order, lipschitz):
        infeasible = STOP_RENYI_ORDERS[best - 1]  # its best noise exceeds its floor
        while order - infeasible > 1e-9 * order:
            middle = 0.5 * (infeasible + order)
            infeasible, order = (infeasible, middle) if meets_at_floor(middle) else (middle, order)
        best_noise = stop_min_noise(order, lipschitz)
    return float(order), best_noise


# -- schedule ---------------------------------------------------------------------------------------


def constant_step(
    radius: float, lipschitz: float, smoothness: float, n_params: int, noise_std: float, n_steps: float
) -> float:
    """The constant step ``eta = min(2 R / sqrt(T (L**2 + p sigma**2)), 2 / beta)``.

    ``2 R / sqrt(T L_G**2)`` with the noisy gradient's second moment ``L_G**2 = L**2 + p
    sigma**2`` is FMTT Thm 28/29 (``feldman.md`` §B6) and FKT Thm 3.2 with diameter ``2 R``
    (§A2, last iterate); Skip-PNSGD's Thm 30 ``sqrt(8) R / sqrt(n L_G**2)`` is ``T = n / 2``
    (§B7). The cap ``2 / beta`` keeps every update non-expansive (FMTT Prop. 18, pitfall D2), on
    which all the privacy bounds rest.
    """
    step = 2.0 * radius / math.sqrt(n_steps * (lipschitz**2 + n_params * noise_std**2))
    return min(step, 2.0 / smoothness)


def _lipschitz_smoothness(problem) -> tuple[float, float]:
    """``L`` and ``beta`` of the per-row objective actually optimised, checked.

    With a ridge term ``lambda ||w||**2 / 2`` on the ball of radius ``R``: ``L + lambda R`` and
    ``beta + lambda`` (``Problem`` docstring, ``feldman.md`` §A8 note). Amplification by iteration
    needs a convex, Lipschitz, smooth loss (pitfall D2) and the step a bounded domain (D9).
    """
    c = problem.constants
    radius = float(problem.radius)
    if not (0 < radius < math.inf):
        raise ValueError(f"The PNSGD solvers need a bounded domain: radius must be finite and > 0; got {radius!r}.")
    if c.smoothness is None or not (0 < c.smoothness < math.inf) or not (0 < c.lipschitz < math.inf):
        raise ValueError(
            f"The PNSGD solvers need a Lipschitz, smooth loss (finite L and beta, feldman.md §B2); the "
            f"loss {problem.loss.name!r} has L={c.lipschitz!r}, beta={c.smoothness!r}. Use a smooth loss."
        )
    penalty = float(problem.l2_penalty)
    return float(c.lipschitz) + penalty * radius, float(c.smoothness) + penalty


def _check_rows(problem, minimum: int, algorithm: str) -> int:
    n = int(problem.n_samples)
    if n < minimum:
        raise ValueError(f"{algorithm} needs n_samples >= {minimum}; got n_samples={n}. Provide more rows.")
    return n


@dataclass(frozen=True)
class PNSGDPlan:
    """A PNSGD-family schedule: public quantities only, fixed before the data is read.

    Attributes
    ----------
    algorithm : str
        The solver that made the plan and alone may run it: the event is that algorithm's (a
        Stop-PNSGD event does not cover a full pass).
    n_samples : int
        Rows the plan is for.
    epochs : int
        Passes over the rows (1 except for :class:`MultiPassPNSGD`).
    step : float
        Constant step ``eta <= 2 / beta``.
    noise_std : float
        Standard deviation ``sigma`` of the Gaussian noise added to every per-row gradient.
    dp_event : dp_accounting.DpEvent
        Guarantee of the release: a zCDP event, or for Stop-PNSGD a
        :class:`~skdpsco.accounting.FixedOrderRdpDpEvent`.
    """

    algorithm: str
    n_samples: int
    epochs: int
    step: float
    noise_std: float
    dp_event: object


def _plan_zcdp(algorithm: str, problem, epochs: int, utility_steps: float) -> PNSGDPlan:
    """Calibrate a zCDP member of the family exactly to (epsilon, delta).

    ``rho`` target from :func:`~skdpsco.accounting.calibrate_zcdp_rho` (C3, ``feldman.md`` §0.3);
    every bound here is ``rho(sigma) = rho(1) / sigma**2`` whatever the step, so ``sigma =
    sqrt(rho(1) / rho_target)``; the event is recomputed from the schedule actually run.
    """
    lipschitz, smoothness = _lipschitz_smoothness(problem)
    n = problem.n_samples

    def rho_of(step: float, noise_std: float) -> float:
        if epochs == 1:
            return pnsgd_rho(lipschitz, step, noise_std, n)
        return multipass_rho(lipschitz, noise_std, n, epochs)

    rho_target = calibrate_zcdp_rho(float(problem.epsilon), float(problem.delta))
    noise_std = math.sqrt(rho_of(1.0, 1.0) / rho_target) * _NOISE_SAFETY
    step = constant_step(problem.radius, lipschitz, smoothness, problem.n_params, noise_std, utility_steps)
    rho = rho_of(step, noise_std)
    if rho > rho_target:
        raise AssertionError(f"PNSGD schedule spends rho={rho} above its target {rho_target}.")
    return PNSGDPlan(algorithm, n, epochs, step, noise_std, zcdp_event(rho))


# -- running ----------------------------------------------------------------------------------------


def _generators(rng: np.random.Generator) -> tuple[np.random.Generator, ...]:
    """Independent children for the row order, the schedule (``t0``, ``T``) and the noise (D16)."""
    return tuple(rng.spawn(3))


def _check_plan(plan: PNSGDPlan, solver, X) -> None:
    """Refuse a plan of another algorithm (its event would not describe this run) or of another n."""
    if plan.algorithm != type(solver).__name__:
        raise ValueError(f"{type(solver).__name__} cannot run a plan made by {plan.algorithm}.")
    if X.shape[0] != plan.n_samples:
        raise ValueError(f"The plan is for {plan.n_samples} rows; got {X.shape[0]}.")


def _rows_and_generators(plan: PNSGDPlan, X, y, rng: np.random.Generator, order) -> tuple:
    """``(source, schedule_rng, noise_rng)``: the row source in the order (a uniformly random
    permutation, the given public ``order``, or for Dask rows a block-level order,
    :func:`~skdpsco.rows.row_source`) and independent children for the schedule
    (``t0``) and the noise (D16)."""
    order_rng, schedule_rng, noise_rng = _generators(rng)
    return row_source(X, y, plan.n_samples, order_rng, order), schedule_rng, noise_rng


def _last_iterate(plan: PNSGDPlan, problem, source, first: int, n_steps: int, noise_rng, passes: int = 1) -> np.ndarray:
    """One step per row from position ``first`` of the row source (``n_steps`` steps, ``passes``
    passes over the same rows), batch size 1, on the shared core; the last iterate."""
    n_steps *= passes
    return projected_noisy_sgd(
        margin_gradient(problem.loss, problem.l2_penalty),
        source.batches(first, np.broadcast_to(np.int64(1), n_steps), passes),  # views: no array of n entries
        np.broadcast_to(plan.step, n_steps),
        np.broadcast_to(plan.noise_std, n_steps),
        np.zeros(problem.coef_shape),
        problem.radius,
        noise_rng,
        average=False,  # amplification by iteration covers the last iterate only (§A9, D1)
    )


def _info(plan: PNSGDPlan, **extra) -> dict:
    return {"step": plan.step, "noise_std": plan.noise_std, **extra}


# -- the four algorithms ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PNSGD:
    """Projected noisy SGD, one pass (FMTT Alg. 1, Thm 23; ``feldman.md`` §B2).

    Central guarantee: the worst index, ``rho = 2 L**2 / sigma**2``-zCDP, computed with
    :func:`~skdpsco.accounting.amplification_by_iteration_rho`. **There is no amplification for
    the last row** (pitfall D13): the guarantee equals that of one noisy gradient. Row ``t`` of
    the pass enjoys ``2 L**2 / (sigma**2 (n - t + 1))``; the algorithm is offered for
    completeness and per-index analyses. ``sigma`` is calibrated exactly to (epsilon, delta), the
    step is :func:`constant_step` with ``T = n``; the last iterate is released.
    """

    requires_smooth_loss = True  # contraction needs eta <= 2 / beta (FMTT Prop. 18)
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws

    def plan(self, problem) -> PNSGDPlan:
        _check_rows(problem, 1, "PNSGD")
        return _plan_zcdp("PNSGD", problem, epochs=1, utility_steps=problem.n_samples)

    def run(self, plan: PNSGDPlan, X, y, problem, rng: np.random.Generator, *, order=None) -> SolverResult:
        """Run a planned pass; ``order`` (a public permutation) replaces the random one in audits."""
        _check_plan(plan, self, X)
        source, _, noise_rng = _rows_and_generators(plan, X, y, rng, order)
        coef = _last_iterate(plan, problem, source, 0, plan.n_samples, noise_rng)
        info = _info(plan, n_steps=plan.n_samples, rho=plan.dp_event.rho)
        return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=plan.n_samples, info=info)


@dataclass(frozen=True)
class SkipPNSGD:
    """Skip-PNSGD (FMTT Thm 24, 30; ``feldman.md`` §B3, §B7).

    Draws ``t0`` uniformly from ``{0, ..., floor(n / 2)}``, skips the first ``t0`` rows of the
    order and runs PNSGD on the rest. The bound holds for every fixed ``t0``, so ``t0`` is public
    (reported in ``info``); the central guarantee is PNSGD's, ``2 L**2 / sigma**2``-zCDP (no
    amplification for the last row, pitfall D13). Step: Thm 30's ``sqrt(8) R / sqrt(n L_G**2)``.
    """

    requires_smooth_loss = True  # contraction needs eta <= 2 / beta (FMTT Prop. 18)
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws

    def plan(self, problem) -> PNSGDPlan:
        n = _check_rows(problem, 2, "SkipPNSGD")
        # The worst row is the last, at 2 L^2 / sigma^2 whatever t0: one schedule covers all t0.
        return _plan_zcdp("SkipPNSGD", problem, epochs=1, utility_steps=n / 2.0)

    def run(self, plan: PNSGDPlan, X, y, problem, rng: np.random.Generator, *, order=None) -> SolverResult:
        _check_plan(plan, self, X)
        source, schedule_rng, noise_rng = _rows_and_generators(plan, X, y, rng, order)
        skipped = int(schedule_rng.integers(0, plan.n_samples // 2 + 1))
        coef = _last_iterate(plan, problem, source, skipped, plan.n_samples - skipped, noise_rng)
        n_steps = plan.n_samples - skipped
        info = _info(plan, skipped=skipped, n_steps=n_steps, rho=plan.dp_event.rho)
        return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=n_steps, info=info)


@dataclass(frozen=True)
class StopPNSGD:
    """Stop-PNSGD (FMTT Lemma 25, Thm 26 with the ``1 + ln n`` correction; ``feldman.md`` §B4).

    Runs ``T`` steps of PNSGD for a uniform ``T`` in ``{1, ..., n}`` and releases ``w_T``. The
    guarantee is for the mixture over ``T``, so **T is secret**: it appears in no attribute,
    ``info`` entry or count (``n_gradients`` reports the public maximum ``n``). The running time
    still grows with ``T``; callers that expose timing should account for it.

    Guarantee: ``(alpha, 4 alpha L**2 (1 + ln n) / (n sigma**2))``-RDP at one order ``alpha``
    only, valid when ``sigma >= L sqrt(2 alpha (alpha - 1))`` (pitfall D12), as a
    :class:`~skdpsco.accounting.FixedOrderRdpDpEvent`. ``alpha`` and ``sigma`` come from
    :func:`calibrate_stop` (smallest ``sigma`` over a grid of orders, bisection at each). Step:
    Thm 29's ``2 R / sqrt(n L_G**2)``.
    """

    requires_smooth_loss = True  # contraction needs eta <= 2 / beta (FMTT Prop. 18)
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws

    def plan(self, problem) -> PNSGDPlan:
        n = _check_rows(problem, 2, "StopPNSGD")
        lipschitz, smoothness = _lipschitz_smoothness(problem)
        order, noise_std = calibrate_stop(n, lipschitz, float(problem.epsilon), float(problem.delta))
        if noise_std < stop_min_noise(order, lipschitz):
            raise AssertionError("Stop-PNSGD noise below the validity condition of its bound.")
        step = constant_step(problem.radius, lipschitz, smoothness, problem.n_params, noise_std, n)
        event = FixedOrderRdpDpEvent(order, stop_rdp(order, lipschitz, noise_std, n))
        return PNSGDPlan("StopPNSGD", n, 1, step, noise_std, event)

    def run(self, plan: PNSGDPlan, X, y, problem, rng: np.random.Generator, *, order=None) -> SolverResult:
        _check_plan(plan, self, X)
        source, schedule_rng, noise_rng = _rows_and_generators(plan, X, y, rng, order)
        stop = int(schedule_rng.integers(1, plan.n_samples + 1))  # secret: used here only
        coef = _last_iterate(plan, problem, source, 0, stop, noise_rng)
        info = _info(plan, max_steps=plan.n_samples, renyi_order=plan.dp_event.order, rdp=plan.dp_event.rdp)
        return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=plan.n_samples, info=info)


@dataclass(frozen=True)
class MultiPassPNSGD:
    """Multi-epoch PNSGD, the same order every epoch (FMTT Alg. 2, Thm 35; ``feldman.md`` §B11).

    ``rho = (2 L**2 / sigma**2) (1 + (E - 1) / n)``-zCDP (:func:`multipass_rho`), calibrated
    exactly to (epsilon, delta); step :func:`constant_step` with ``T = E n`` (the paper gives no
    utility theorem); last iterate released.

    Parameters
    ----------
    epochs : int
        Number of passes ``E >= 1`` (public). ``E = 1`` is :class:`PNSGD`.
    """

    requires_smooth_loss = True  # contraction needs eta <= 2 / beta (FMTT Prop. 18)
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws

    epochs: int

    def __post_init__(self):
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, (int, np.integer)) or self.epochs < 1:
            raise ValueError(f"epochs must be an integer >= 1; got {self.epochs!r}.")

    def plan(self, problem) -> PNSGDPlan:
        n = _check_rows(problem, 1, "MultiPassPNSGD")
        return _plan_zcdp("MultiPassPNSGD", problem, epochs=int(self.epochs), utility_steps=self.epochs * n)

    def run(self, plan: PNSGDPlan, X, y, problem, rng: np.random.Generator, *, order=None) -> SolverResult:
        _check_plan(plan, self, X)
        source, _, noise_rng = _rows_and_generators(plan, X, y, rng, order)
        coef = _last_iterate(plan, problem, source, 0, plan.n_samples, noise_rng, passes=plan.epochs)
        n_steps = plan.epochs * plan.n_samples
        info = _info(plan, epochs=plan.epochs, n_steps=n_steps, rho=plan.dp_event.rho)
        return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=n_steps, info=info)
