"""Default hyper-parameters from public quantities only.

Every function here is a pure function of public quantities: the sizes ``n`` (rows) and ``p``
(parameters, intercept and classes included), the target ``(epsilon, delta)`` and the public
bounds (the loss constants ``L`` and ``beta`` at ``data_norm``, ``y_bound``, ``radius``). None
reads data, so a default chosen here costs no privacy (``DESIGN.md``, "Privacy model": the choice of
step size or iteration count is a release when it depends on the data). Each rule minimises the
algorithm's own utility bound, or a bound on a canonical public problem, and its constants were
chosen on synthetic data drawn from known models, never on the data being fitted (the numbers are
in the docstrings).

Rules
-----
* :func:`noisy_gd_schedule`: step and number of steps of full-batch noisy gradient descent
  (:mod:`skdpsco.solvers.noisy_gd`).
* :func:`regression_radius`: the radius of the parameter ball for regression losses, whose
  Lipschitz constant (hence the noise) grows with it (``DPLpRegression(radius=None)``, the default).
* :func:`classifier_radius`: the radius of the parameter ball of ``DPLogisticRegression``
  (``radius=None``, the default), which grows with ``sqrt(d)`` when ``fit`` standardises the
  features.
* :func:`snowball_noise_multiplier`: the noise multiplier ``kappa`` of Snowball-SGD, ``sigma =
  kappa L / sqrt(p)`` (``feldman.md`` §A3 generalisation), with the number of steps the exact
  batch calibration (§A1) allows for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .accounting import gaussian_noise_multiplier
from .accounting._events import tail_sums

__all__ = [
    "CURVATURE_FRACTION",
    "MAX_NOISY_GD_STEPS",
    "REGRESSION_RANGE_FACTOR",
    "SCALED_RADIUS_FACTOR",
    "UNSCALED_RADIUS",
    "NoisyGDSchedule",
    "SNOWBALL_NOISE_MULTIPLIERS",
    "SNOWBALL_SCHEDULES",
    "noisy_gd_risk_model",
    "noisy_gd_schedule",
    "regression_radius",
    "classifier_radius",
    "snowball_noise_multiplier",
    "snowball_utility_factor",
    "jnn_step_multipliers",
    "max_steps",
    "privacy_batch_sizes",
    "snowball_rows_needed",
    "step_multipliers",
]

# -- full-batch noisy gradient descent ---------------------------------------------------------------

CURVATURE_FRACTION = 0.0625
"""``c`` of the lowest curvature the noisy-GD rule plans for, ``h_lo = c beta / p``.

``beta / p`` is a public bound on the *average* eigenvalue of the population Hessian (its trace is
at most ``beta``, the per-row smoothness at the public row bound). Directions flatter than
``h_lo`` are not worth converging on at the rule's horizon. Chosen on a validation family that is
not the benchmark's (synthetic logistic data, ``d`` in {10, 40}, ``||w*||`` in {2, 8}, feature
scales decaying geometrically from 1 to 0.2 before row normalisation; ``(n, epsilon)`` in
{(1e3, 2), (1e4, 0.5), (1e4, 2), (3e4, 1)}; 3 seeds; ``eta = 1 / beta``). Mean excess test
log-loss over the 16 cells, last iterate: 0.0135 / 0.0137 / 0.0143 / 0.0157 / 0.0188 for ``c`` =
1/16, 1/8, 1/4, 1/2, 1 (and 0.0156-0.0174 at ``eta = 1.5 / beta``); with the tail average of
:data:`skdpsco.solvers.noisy_gd.TAIL_FRACTION`: 0.0129 / 0.0135 / 0.0146 for 1/16, 1/8, 1/4."""

START_DISTANCE_FRACTION = 0.5
"""The rule assumes ``||w* - w_0|| = R / 2`` (``w_0 = 0``, ``w*`` anywhere in the ball of radius
``R``): a prior, not a bound; the worst case ``R`` plans horizons twice as long, which measured
worse on every validation problem whose optimum lies strictly inside the ball."""

MAX_NOISY_GD_STEPS = 2000
"""Public cap on the number of full-batch steps (compute: ``T n`` gradients). It does not bind on
the validation grid nor on the benchmark grid of ``benchmarks/goal.py`` (largest ``T`` chosen there: 1475, at
``n = 1e5``, ``epsilon = 3``, ``p = 21``; the uncapped optimum of the risk model is within 0.02%)."""

_HORIZON_GRID = 400
"""Points of the log-spaced grid on which the risk model is minimised."""


@dataclass(frozen=True)
class NoisyGDSchedule:
    """Default schedule of full-batch noisy GD.

    Attributes
    ----------
    step : float
        ``eta = 1 / beta``: the largest step of the descent lemma, and half the contraction limit
        ``2 / beta`` (FMTT Prop. 18) on which the last-iterate bound rests.
    n_steps : int
        ``T = ceil(tau / eta)`` for the horizon ``tau`` of :func:`noisy_gd_risk_model`'s minimiser,
        at least 1 and at most :data:`MAX_NOISY_GD_STEPS`.
    horizon : float
        ``tau = eta T`` actually run.
    """

    step: float
    n_steps: int
    horizon: float


def noisy_gd_risk_model(
    horizon, n_samples: int, n_params: int, noise_multiplier: float, lipschitz: float,
    smoothness: float, radius: float,
):
    """Excess risk bound of noisy GD after time ``tau = eta T`` on the canonical public problem.

    Full-batch noisy GD accounted by composition (:mod:`skdpsco.solvers.noisy_gd`) adds gradient
    noise of variance ``s**2 = (2 L z / n)**2 T`` per coordinate (``z``: the Gaussian noise
    multiplier of (epsilon, delta)), so the noise entering the iterate per unit time is
    ``v = eta s**2 / tau = (2 L z / n)**2`` whatever the split of ``tau`` into steps. On a quadratic
    with Hessian ``h I`` started at distance ``R0`` from its minimiser (gradient flow with
    additive noise, ``eta h << 1``):

    * optimisation error ``(h / 2) R0**2 exp(-2 h tau)``, at most ``R0**2 / (4 e tau)`` over all
      ``h`` (attained at ``h = 1 / (2 tau)``) and ``(h_lo / 2) R0**2 exp(-2 h_lo tau)`` over
      ``h >= h_lo`` when ``1 / (2 tau) < h_lo``;
    * noise error ``p h Var / 2`` with ``Var = v tau (1 - exp(-2 h tau)) / (2 h)`` per
      coordinate, at most ``p v tau / 4`` for every ``h``.

    With ``R0 = R / 2`` (:data:`START_DISTANCE_FRACTION`) and ``h_lo = c beta / p``
    (:data:`CURVATURE_FRACTION`) the bound is

        E(tau) = opt(tau) + p v tau / 4.

    Its flat-curvature part, ``R0**2 / (4 e tau) + p v tau / 4``, is the convex noisy-GD bound
    ``R0**2 / (2 tau) + eta p s**2 / 2`` up to constants (minimised at ``tau ~ R0 n / (L z
    sqrt(p))``, the ``sqrt(p) / (n mu)`` rate); ``h_lo`` stops the horizon from growing with ``n``
    once every direction of curvature ``>= h_lo`` has converged.

    Parameters
    ----------
    horizon : float or ndarray
        ``tau > 0``.
    n_samples, n_params : int
    noise_multiplier : float
        ``z = sigma / Delta`` of one Gaussian release meeting (epsilon, delta).
    lipschitz, smoothness, radius : float
        ``L`` (per-row gradient bound, the sensitivity constant), ``beta`` and ``R``.
    """
    tau = np.asarray(horizon, dtype=float)
    r0 = START_DISTANCE_FRACTION * radius
    h_lo = CURVATURE_FRACTION * smoothness / n_params
    flat = r0**2 / (4.0 * math.e * tau)
    curved = 0.5 * h_lo * r0**2 * np.exp(-2.0 * h_lo * tau)
    optimisation = np.where(tau <= 1.0 / (2.0 * h_lo), flat, curved)
    diffusion = (2.0 * lipschitz * noise_multiplier / n_samples) ** 2
    return optimisation + n_params * diffusion * tau / 4.0


@lru_cache(maxsize=256)
def noisy_gd_schedule(
    n_samples: int, n_params: int, epsilon: float, delta: float, lipschitz: float,
    smoothness: float, radius: float,
) -> NoisyGDSchedule:
    """Default step and number of steps of full-batch noisy GD (public quantities only).

    ``eta = 1 / beta``; the horizon ``tau`` minimises :func:`noisy_gd_risk_model` on a log grid
    from one step to :data:`MAX_NOISY_GD_STEPS` steps; ``T = ceil(tau / eta)``.

    Parameters
    ----------
    n_samples, n_params : int
        ``n`` and ``p`` (all classes, intercept column included).
    epsilon, delta : float
        Target guarantee.
    lipschitz : float
        ``L``: bound on every per-row loss gradient on the ball (the sensitivity constant).
    smoothness : float
        ``beta`` of the per-row objective (ridge included), finite and > 0.
    radius : float
        ``R`` of the domain ball.
    """
    if not (0 < smoothness < math.inf and 0 < lipschitz < math.inf and 0 < radius < math.inf):
        raise ValueError(
            "The noisy-GD default schedule needs finite, positive L, beta and radius; got "
            f"L={lipschitz!r}, beta={smoothness!r}, radius={radius!r}."
        )
    step = 1.0 / smoothness
    z = gaussian_noise_multiplier(float(epsilon), float(delta))
    grid = step * np.geomspace(1.0, MAX_NOISY_GD_STEPS, _HORIZON_GRID)
    risk = noisy_gd_risk_model(grid, n_samples, n_params, z, lipschitz, smoothness, radius)
    n_steps = int(min(MAX_NOISY_GD_STEPS, math.ceil(grid[int(np.argmin(risk))] / step - 1e-9)))
    return NoisyGDSchedule(step, max(n_steps, 1), step * max(n_steps, 1))


# -- radius --------------------------------------------------------------------------------------------

UNSCALED_RADIUS = 10.0
"""Radius of the logistic parameter ball without feature scaling (and ``DPHingeSVM``'s default): rows of norm at most
``data_norm`` (1 by default), a margin of up to 10 at the row bound."""

SCALED_RADIUS_FACTOR = 5.0
"""``c`` of :func:`classifier_radius` with feature scaling: a coefficient vector of norm up to ``c``
on the standardised features. Chosen on data that is not the benchmark's
(``DPLogisticRegression`` defaults, ``c`` in {2, 5, 10} against the former fixed radius 10, i.e.
``c = 10 / sqrt(d)``): iris and modechoice (``benchmarks/real.py --validation``, 10 seeds, epsilon
in {0.3, 1, 3, 10}) and the synthetic family of raw features with scales and offsets spread over
``10**-3 .. 10**3`` (AR(0.5)-correlated Gaussian, logistic labels, ``d`` in {10, 40}, standardised
``||w*||`` in {2, 8}, ``n`` in {1e3, 1e4}, epsilon in {0.5, 2}, 2 seeds). ``c = 5`` was at least as
good as the former radius in 20 of the 24 synthetic and modechoice cells (AUC up to +0.03 at ``n =
1e3``, ``d = 40``; test log-loss up to 0.05 lower), and the same on iris (``d = 4``: ``5 sqrt(4) =
10``); ``c = 10`` gained a little more AUC at ``n = 1e3`` but lost log-loss at epsilon 0.5 and
AUC on modechoice. On the benchmark's digits at epsilon 3 a radius of 30 instead of 10 raised the
accuracy from 0.76 to 0.82 (measured after the choice). The cost is time: noisy GD's horizon grows
with the radius (:func:`noisy_gd_risk_model`)."""


def classifier_radius(n_features: int, scaled: bool) -> float:
    """Radius of ``DPLogisticRegression``'s parameter ball, from public quantities only.

    With feature scaling the solver reads rows ``z / sqrt(d)`` of standardised features ``z``
    (:mod:`skdpsco.linear_model._scaling`), so a coefficient ``v`` on ``z`` is ``sqrt(d) v`` for
    the solver: the radius ``SCALED_RADIUS_FACTOR sqrt(d)`` allows ``||v|| <= 5`` whatever ``d``
    (the former fixed radius allowed ``10 / sqrt(d)``, 1.3 at ``d = 64``). Without it,
    :data:`UNSCALED_RADIUS`.

    Parameters
    ----------
    n_features : int
        ``d``, the number of features (intercept column excluded).
    scaled : bool
        Whether ``fit`` standardises the features (``feature_scaling='standard'``).
    """
    return SCALED_RADIUS_FACTOR * math.sqrt(n_features) if scaled else UNSCALED_RADIUS



REGRESSION_RANGE_FACTOR = 2.0
"""``c`` of :func:`regression_radius`: the ball lets a model predict up to ``c`` times the target
bound. Chosen on a validation family that is not the benchmark's (least squares; ``d`` in {5, 50},
``||w*||`` in {0.5, 2}, Gaussian features with scales decaying geometrically from 1 to 0.2 before
row normalisation, Student-t(3) noise of scale 0.2, targets clipped to 1; ``n`` in {2000, 20000},
``epsilon`` in {0.5, 2}, ``delta = 1e-6``; 2 seeds; 32 fits per value). Mean excess test MSE over
the 32 fits, ``c`` = 0.5 / 1 / 2 / 4: 0.077 / 0.042 / 0.023 / 0.029 for ``'noisy_gd'`` and 0.079 /
0.049 / 0.034 / 0.046 for ``'phased_sgd'``; the estimators' former fixed ``radius = 10`` (``c`` = 14)
was worse than predicting zero on the benchmark's synthetic least-squares problem."""


def regression_radius(row_norm: float, y_bound: float) -> float:
    """Radius ``R = c y_bound / row_norm`` of the ball for a regression loss (``c``: :data:`REGRESSION_RANGE_FACTOR`).

    The noise of every solver scales with ``L``, and for ``|y - <w, x>|^p`` (``p > 1``) ``L = p B
    (B_y + B R)^(p - 1)`` grows with ``R`` (:class:`skdpsco.losses.PowerLoss`): the radius should
    be the smallest that holds the models worth fitting. A model in the ball predicts at most ``B
    R`` in absolute value on a row of norm ``B``, and targets are clipped to ``B_y``: ``R = c B_y /
    B`` lets predictions reach ``c`` times the largest target, so ``L <= p B ((1 + c) B_y)^(p -
    1)`` whatever the data. A public prior, not a bound on the best model.

    Parameters
    ----------
    row_norm : float
        ``B``: the norm bound of the rows the solver sees (``sqrt(2)`` times the estimator's
        ``data_norm`` with the intercept column).
    y_bound : float
        ``B_y``: the public bound on ``|y|``.
    """
    if not (0 < row_norm < math.inf and 0 < y_bound < math.inf):
        raise ValueError(f"row_norm and y_bound must be finite and > 0; got {row_norm!r}, {y_bound!r}.")
    return REGRESSION_RANGE_FACTOR * y_bound / row_norm


POISSON_LOG_RANGE = 6.0
"""``W`` of :func:`poisson_window`: the default ball lets the fitted mean range over ``W`` natural
orders of magnitude below the target bound (``exp(-6) = 1 / 403``). The Poisson loss's constants do
not depend on it (:class:`skdpsco.losses.PoissonLoss`: ``L = B B_y``, ``beta = B**2 B_y`` with the
window's top at ``log B_y``); the radius, hence the solvers' ``R L`` rates, grows with it. Measured
on randhie, fair and star98 (``benchmarks/glm.py``; ``benchmarks/results/glm.md``)."""


def poisson_window(row_norm: float, y_bound: float) -> tuple[float, float]:
    """``(offset, radius)`` of the default domain of the Poisson loss: margins ``z + o`` in
    ``[log B_y - W, log B_y]`` (``W``: :data:`POISSON_LOG_RANGE`), i.e. ``R = W / (2 B)`` and
    ``o = log B_y - W / 2``.

    The loss's constants grow as ``exp(o + R B)`` (:class:`skdpsco.losses.PoissonLoss`), so the
    linear rule of :func:`regression_radius` (predictions up to twice the target bound around 0)
    would cost ``exp(2 B_y)``. A log-linear model needs its log-means only below ``log B_y``: the
    targets are clipped to ``B_y``, so the minimiser's mean ``E[y | x]`` never exceeds it. With the
    window's top there, ``L = B max(B_y, B_y - B_y exp(-W)) = B B_y`` and ``beta = B**2 B_y``.
    A public prior, not a bound on the best model.

    Parameters
    ----------
    row_norm : float
        ``B``: the norm bound of the rows the solver sees.
    y_bound : float
        ``B_y``: the bound on the targets the solver sees.
    """
    if not (0 < row_norm < math.inf and 0 < y_bound < math.inf):
        raise ValueError(f"row_norm and y_bound must be finite and > 0; got {row_norm!r}, {y_bound!r}.")
    return math.log(y_bound) - POISSON_LOG_RANGE / 2.0, POISSON_LOG_RANGE / (2.0 * row_norm)


# -- Snowball-SGD ------------------------------------------------------------------------------------
# The batch arithmetic of :mod:`skdpsco.solvers.snowball` (pure functions of public sizes), which the
# rule :func:`snowball_noise_multiplier` searches over and the solver plans with.

SNOWBALL_SCHEDULES = ("jnn", "constant")
"""The step schedules of Snowball-SGD: JNN steps (FKT Thm 3.4) and constant steps (Thm 3.2)."""

_CEIL_SAFETY = 1.0 + 1e-12  # feldman.md pitfall D7: round batch sizes up, robustly.


def jnn_step_multipliers(n_steps: int) -> np.ndarray:
    """Relative step sizes of the Jain–Nagaraj–Netrapalli schedule (FKT Def. 3.3, ``feldman.md`` §A2).

    With ``k = ceil(log2 T)`` and ``T_i = T - ceil(T 2**-i)``, steps ``T_i < t <= T_{i+1}`` get
    ``2**-i``: the first half of the steps use 1, each following block is about half as long
    with half the step, and the last step alone uses ``2**-k``.
    """
    boundaries = _jnn_boundaries(n_steps)
    multipliers = np.empty(n_steps)
    for i in range(len(boundaries) - 1):
        multipliers[boundaries[i] : boundaries[i + 1]] = 2.0**-i
    return multipliers


def _jnn_boundaries(n_steps: int) -> list[int]:
    """``[T_0, ..., T_k, T]`` of :func:`jnn_step_multipliers`: steps ``T_i <= t < T_{i+1}`` (from 0)
    get ``2**-i``."""
    if n_steps < 1:
        raise ValueError("n_steps must be >= 1.")
    k = math.ceil(math.log2(n_steps)) if n_steps > 1 else 0
    return [n_steps - math.ceil(n_steps * 2.0**-i) for i in range(k + 1)] + [n_steps]


def step_multipliers(schedule: str, n_steps: int) -> np.ndarray:
    """Relative step sizes ``m_t`` (the steps are ``eta_t = c m_t / sqrt(T)``)."""
    if schedule == "jnn":
        return jnn_step_multipliers(n_steps)
    if schedule == "constant":
        return np.ones(n_steps)
    raise ValueError(f"schedule must be one of {SNOWBALL_SCHEDULES}; got {schedule!r}.")


def privacy_batch_sizes(
    multipliers: np.ndarray, n_params: int, noise_multiplier: float, rho: float
) -> np.ndarray:
    """Smallest batch sizes with ``rho_t <= rho`` for every step (``feldman.md`` §A1).

    From :func:`~skdpsco.accounting.amplification_by_iteration_rho` with ``sigma = kappa L /
    sqrt(p)``: ``B_t >= 2 sqrt(p) eta_t / (kappa sqrt(2 rho) sqrt(sum_{s>=t} eta_s**2))``, which
    depends on the steps only through their ratios and not on ``L``.
    """
    # ceil(2 sqrt(p) m / (kappa sqrt(2 rho) sqrt(cumsum(m[::-1]**2)[::-1])) * _CEIL_SAFETY), the
    # same floats, by blocks: no temporary of T floats
    multipliers = np.asarray(multipliers, dtype=float)
    batch_sizes = np.empty(multipliers.size, dtype=np.int64)
    for start, stop, tail in tail_sums(multipliers.size, lambda i, j: np.square(multipliers[i:j])):
        np.sqrt(tail, out=tail)
        tail *= noise_multiplier * math.sqrt(2.0 * rho)
        exact = 2.0 * math.sqrt(n_params) * multipliers[start:stop]
        exact /= tail
        exact *= _CEIL_SAFETY
        batch_sizes[start:stop] = np.ceil(exact, out=exact)
    return batch_sizes


def snowball_rows_needed(schedule: str, n_steps: int, n_params: int, kappa: float, rho: float) -> int:
    """Rows read by ``n_steps`` Snowball steps of ``schedule`` at noise multiplier ``kappa``: the sum
    of the :func:`privacy_batch_sizes` (``feldman.md`` §A1, §A3)."""
    return int(privacy_batch_sizes(step_multipliers(schedule, n_steps), n_params, kappa, rho).sum())


_UNIT_ROUNDOFF = 2.0**-53
"""``u``: the relative error of one correctly rounded float64 operation."""


def _rows_needed_bounds(schedule: str, n_steps: int, n_params: int, kappa: float, rho: float) -> tuple[int, int]:
    """``(low, high)`` with ``low <= snowball_rows_needed(...) <= high``, in ``O(levels)``, not ``O(T)``.

    Counts the batches of :func:`privacy_batch_sizes` (``feldman.md`` §A1, §A3) per integer level
    instead of per step. With ``a = 2 sqrt(p)``, ``b = kappa sqrt(2 rho)`` and ``s`` =
    ``_CEIL_SAFETY`` (the floats that function computes), step ``t`` of multiplier ``m_t`` and tail
    ``Q_t = sum_{s >= t} m_s**2`` gets ``ceil(z_t)`` rows, ``z_t`` the float of ``X_t = a m_t s / (b
    sqrt(Q_t))`` (``a m_t`` is exact: ``m_t`` is a power of 2). Its error: the float ``Q_t`` sums at
    most ``T`` positive terms (relative error at most ``(T - 1) u / (1 - (T - 1) u)`` in any order,
    Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2), and the square root, the
    product, the quotient and the safety factor add ``u`` each, so ``|z_t / X_t - 1| <= delta_0 <
    (T / 2 + 6) u``. Since ``ceil(z) = 1 + #{L >= 1 : z > L}`` for ``z > 0``,

        T + sum_L #{t : X_t (1 - delta_0) > L} <= rows <= T + sum_L #{t : X_t (1 + delta_0) > L}.

    The multipliers are constant on blocks (one block of ones for the constant schedule, the
    ``2**-i`` of :func:`jnn_step_multipliers`), within which ``Q_t = Q_0 + r 4**-i`` at the ``r``-th
    step from the block's end, so ``X_t f > L`` exactly for ``r < ((a m_t s f / (b L))**2 - Q_0) /
    4**-i``: one count per (block, level), computed with ``delta = 2 (T + 16) u`` for ``delta_0``
    (at least ``delta_0 + 5 u``, which covers the rounding of the threshold) and a margin in ``r``
    covering the rounding of the subtraction. The ends differ only where some ``X_t`` is within
    ``delta`` of an integer. Where the levels would outnumber a quarter of the steps, the exact
    sum is both ends.
    """
    if schedule == "jnn":
        lengths = np.diff(_jnn_boundaries(n_steps))
    elif schedule == "constant":
        lengths = np.array([n_steps])
    else:
        raise ValueError(f"schedule must be one of {SNOWBALL_SCHEDULES}; got {schedule!r}.")
    last = lengths.size - 1
    # Q_0 of each block: the tail sum of the later blocks, exact in units of 4**-last, rounded once
    later = [0] * lengths.size
    for i in range(last - 1, -1, -1):
        later[i] = later[i + 1] + int(lengths[i + 1]) * 4 ** (last - i - 1)
    start = np.array([q / 4**last for q in later])
    blocks = np.arange(lengths.size)
    numerator = 2.0 * math.sqrt(n_params) * 2.0**-blocks * _CEIL_SAFETY
    denominator = kappa * math.sqrt(2.0 * rho)
    step = 4.0**-blocks
    delta = 2.0 * (n_steps + 16) * _UNIT_ROUNDOFF
    top = numerator * (1.0 + delta) / (denominator * np.sqrt(start + step))  # the largest X f of a block
    levels = (top * (1.0 + 1e-6)).astype(np.int64) + 1
    if levels.sum() > max(n_steps // 4, 64):
        rows = snowball_rows_needed(schedule, n_steps, n_params, kappa, rho)
        return rows, rows
    block = np.repeat(blocks, levels)
    level = (np.arange(block.size) - np.repeat(np.cumsum(levels) - levels, levels) + 1).astype(float)
    counts = []
    for factor, side in ((1.0 - delta, -1.0), (1.0 + delta, 1.0)):
        threshold = (numerator[block] * factor / (denominator * level)) ** 2
        reach = (threshold - start[block]) / step[block]
        margin = 8.0 * _UNIT_ROUNDOFF * (threshold + start[block]) / step[block]
        within = np.clip(np.ceil(reach + side * margin) - 1.0, 0, lengths[block])  # steps r >= 1, r < reach
        counts.append(int(within.astype(np.int64).sum()))
    return n_steps + counts[0], n_steps + counts[1]


def max_steps(n_samples: int, schedule: str, n_params: int, kappa: float, rho: float) -> int:
    """Largest ``T`` whose privacy-calibrated batches fit in ``n_samples`` rows (0 if none).

    The rows needed grow with ``T`` and are at least ``T`` (one per step), so the answer lies in
    the bracket ``rows(feasible) <= n < rows(infeasible)`` that starts as ``[1, n + 1]`` (the
    upper end needs no evaluation). It is shrunk by interpolation on the rows needed, nearly
    linear in ``T``, with the Illinois correction (an end kept twice in a row counts half as far
    from the target) and a bisection after any step that did not halve the bracket, which bounds
    the count of evaluations, each ``O(T)``, by twice that of bisection; it takes about 8 at
    ``n = 10^6``. Each is first bracketed in ``O(sqrt(p) / (kappa sqrt(rho)))`` by
    :func:`_rows_needed_bounds`, whose ends meet except where a batch size is within rounding of
    an integer; only there is the ``O(T)`` sum computed. Every value the search uses is therefore
    the exact :func:`snowball_rows_needed`, and so are its steps and its answer.
    """
    def rows(n_steps: int) -> int:
        low, high = _rows_needed_bounds(schedule, n_steps, n_params, kappa, rho)
        return low if low == high else snowball_rows_needed(schedule, n_steps, n_params, kappa, rho)

    if rows(1) > n_samples:
        return 0
    target = n_samples + 0.5  # rows are integers: the answer is where they cross n + 1/2
    feasible, rows_feasible = 1, float(rows(1))
    infeasible, rows_infeasible = n_samples + 1, float(n_samples + 1)
    kept, bisect = 0, False  # kept: -1 / +1 when the last step moved the feasible / infeasible end
    while infeasible - feasible > 1:
        width = infeasible - feasible
        if bisect:
            mid = (feasible + infeasible) // 2
        else:
            guess = feasible + int((target - rows_feasible) * width / (rows_infeasible - rows_feasible))
            mid = min(max(guess, feasible + 1), infeasible - 1)
        rows_mid = rows(mid)
        if rows_mid <= n_samples:
            feasible, rows_feasible = mid, float(rows_mid)
            if kept == -1:
                rows_infeasible = target + (rows_infeasible - target) / 2
            kept = -1
        else:
            infeasible, rows_infeasible = mid, float(rows_mid)
            if kept == 1:
                rows_feasible = target - (target - rows_feasible) / 2
            kept = 1
        bisect = not bisect and infeasible - feasible > width / 2
    return feasible


SNOWBALL_NOISE_MULTIPLIERS = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0)
"""Public grid of ``kappa`` values the Snowball rule chooses from (``kappa = 1`` is FKT's)."""


def snowball_utility_factor(schedule: str, noise_multiplier: float, n_steps: int) -> float:
    """Square of Snowball's excess-risk bound up to ``(D L)**2`` (``inf`` for ``T = 0``).

    FKT Thm 3.4 (JNN steps) / Thm 3.2 (constant step) with the gradient second moment ``(1 +
    kappa**2) L**2`` of the §A3 generalisation: ``(1 + kappa**2) / T``, times ``(2 + ln T)**2``
    for constant steps.
    """
    if n_steps == 0:
        return math.inf
    log_factor = 1.0 if schedule == "jnn" else (2.0 + math.log(n_steps)) ** 2
    return (1.0 + noise_multiplier**2) * log_factor / n_steps


def snowball_noise_multiplier(
    n_samples: int, n_params: int, rho: float, schedule: str
) -> tuple[float, int]:
    """``kappa`` of :data:`SNOWBALL_NOISE_MULTIPLIERS` minimising :func:`snowball_utility_factor`.

    More noise per step (larger ``kappa``) buys smaller privacy-calibrated batches (``B_t``
    scales as ``1 / kappa``, ``feldman.md`` §A1) and so more steps ``T(kappa)`` in ``n`` rows; the
    rule weighs the two through the utility bound. It picks ``kappa ~ 2-3`` at small ``n rho``
    (up to 5x more steps than ``kappa = 1``) and ``kappa ~ 0.25-0.5`` at large ``n rho``, the
    directions the tuned runs of ``shared/notes/utility-prototype.md`` §8(b) found best.

    Parameters
    ----------
    n_samples, n_params : int
    rho : float
        zCDP budget (``calibrate_zcdp_rho(epsilon, delta)``).
    schedule : {'jnn', 'constant'}

    Returns
    -------
    kappa : float
    n_steps : int
        ``T(kappa)``, the largest number of steps whose exact batches fit in ``n`` rows (0 when
        even one step does not fit for any ``kappa``).
    """
    best = None  # (factor, kappa, n_steps): the first minimiser in grid order
    for kappa in SNOWBALL_NOISE_MULTIPLIERS:
        # T(kappa) <= n_samples and the factor decreases in T: a kappa whose factor at
        # T = n_samples is no better than the best so far cannot win (its O(T) search is skipped)
        if best is not None and snowball_utility_factor(schedule, kappa, n_samples) >= best[0]:
            continue
        n_steps = max_steps(n_samples, schedule, n_params, kappa, rho)
        factor = snowball_utility_factor(schedule, kappa, n_steps)
        if best is None or factor < best[0]:
            best = (factor, kappa, n_steps)
    return best[1], best[2]
