"""Localization and the epoch-based algorithm that adapts to kappa-growth (Asi, Levy & Duchi 2021).

Spec: ``shared/spec/asi_growth.md`` §2.1 (Algorithm 1), §2.2 (Algorithm 2), §2.3, §2.5, §6 P1–P13.

**Algorithm 1, localization** (``'localization'``, §2.1). The rows, in an order fixed before the
data is read, are split into ``k = ceil(ln n)`` disjoint blocks of ``b = floor(n / k)`` rows
(leftover rows to the last block, so every row is read exactly once). Phase ``j = 1..k`` starts
from the previous phase's released point ``c_j`` and minimises, over the domain ball,

    F_j(w) = mean_{block j} (f(w, x) + lambda ||w||**2 / 2) + ||w - c_j||**2 / (eta_j b_j),
    eta_j = 16**-j eta,

with the certified deterministic V-FISTA solver of :mod:`.erm` (§2.5, P4), then releases
``Pi(w_j + zeta_j)``. The regulariser is ``mu_j = 2 / (eta_j b_j)``-strongly convex, so the exact
minimiser moves by at most ``2 L / (b_j mu_j) = L eta_j`` when a row is replaced (§2.1 sensitivity
facts, [inferred] in the spec: the paper's ``4 L eta_j`` has a factor-4 slack), and the solver is
certified within ``tau_j = L eta_j / 2`` of it on both datasets: the release has replace-one
``l2``-sensitivity ``Delta_j = L eta_j + 2 tau_j = 2 L eta_j`` (P4: the certificate's slack enters
the sensitivity). ``L`` is the loss's own constant: a ridge term is the same on both datasets and
cancels (as in :mod:`.phased`).

**Noise** (§2.0, P1 items 1–2, P2), calibrated exactly to the released sensitivity:

* ``delta > 0``: Gaussian ``N(0, (Delta_j sigma_unit)**2 I)`` with ``sigma_unit`` the PLD-exact
  multiplier of :func:`skdpsco.accounting.gaussian_noise_multiplier` (not the paper's
  ``4 L eta sqrt(log(1/delta)) / epsilon``, erratum P1.5 / P2); drawn by
  :func:`skdpsco._noise.gaussian_noise`.
* pure epsilon-DP (``delta == 0``, or ``noise='laplace'``): i.i.d. Laplace coordinates of scale
  ``sqrt(p) Delta_j / epsilon`` (the ``l1``-sensitivity is at most ``sqrt(p) Delta_j``; Lemma 2.2
  with ``epsilon_i = epsilon``, erratum P1.1); drawn by :func:`~skdpsco._noise.laplace_noise`, the
  one Laplace draw point. Its event is :func:`skdpsco.accounting.pure_dp_event`.

**Privacy** (§2.3, P6). Each row is read by exactly one phase (of one epoch); the phases before it
do not depend on it and those after it post-process that phase's release. So every row enters
exactly one release with the per-release guarantee, and the whole run has that guarantee
(parallel composition): ``gaussian_event(sigma_unit, 1.0)`` or ``pure_dp_event(epsilon)``.
``step_scale`` multiplies every step and hence every sensitivity and noise scale together: it costs
no privacy (§2.1 "Privacy", P3).

**Algorithm 2, epoch-based** (``'epoch_growth'``, §2.2). ``T = ceil(2 ln n / (kappa_lower - 1))``
epochs on disjoint row ranges of ``m = floor(n / T)`` rows (erratum P1.3: epoch ``i`` reads rows
``i m .. (i + 1) m - 1``); epoch ``i = 0..T-1`` runs Algorithm 1 from the previous output ``x_i``
with base step ``eta_i = 2**-i eta_0`` on the domain ``X_i = X ∩ B(x_i, D_i)``, ``D_i = 2**-i D_0``,
``D_0 = diam X = 2 R`` (erratum P1.4: ``D_i`` is a radius). It needs no ``lambda`` and no ``kappa``,
only ``kappa_lower > 1``; the default 2 covers strongly convex (ridge) objectives (§6 "Defaults").

Choices made here, each derived in the spec or below:

* **Steps.** Prop 1/2 and Thm 2/3 with the privacy term ``d / epsilon`` (pure) or
  ``sqrt(d log(1/delta)) / epsilon`` (approximate) replaced by the noise norm per unit sensitivity
  of the calibration actually used, ``nu`` (:class:`OutputNoise`): the same scaling in ``n``, ``d``,
  ``epsilon``, exact for the noise drawn. ``L`` in the steps is the per-row gradient bound
  ``L + lambda R`` (as :mod:`.phased`); ``beta = 1 / (n + p)`` by default (the largest the theorems
  allow, §6), and Algorithm 2 runs its epochs at ``beta / T`` (§2.2 "Failure probability",
  [inferred]). ``ln m`` is guarded to ``>= 1`` (P9).
* **step_scale** (P3). The paper's constants are vacuous at practical ``n`` (§5.1: the iterate
  barely moves), but no single multiplier fits all problems: a phase moves the iterate by at most
  ``L eta b / 2`` and adds noise of norm about ``2 L eta nu`` (``nu``: :class:`OutputNoise`), so a
  larger step helps only when the phase's signal-to-noise ratio ``b / nu`` is large, and at low
  ratio any larger step only adds noise. The default (``step_scale=None``) is the public rule
  ``min(1000, max(1, c b_1 / nu))`` of :func:`default_step_scale`, ``b_1`` the rows of the first
  phase (of the first epoch), ``c = 1/30`` for ``'localization'`` and ``c = 1`` for
  ``'epoch_growth'``; ``1000`` is the top of the validated grid. Chosen on synthetic public data
  only, never on a test or benchmark instance:

  - *fit family* (Gaussian noise, ``delta = 1e-6``): ridge (``lambda = 0.03``) logistic and Huber
    (threshold 1, ``t_3`` noise, ``|y| <= 2``) regression, rows uniform on the unit sphere,
    ``||w_true|| = 1.5``, ``R = 10`` (the estimators' default), ``(d, n, epsilon)`` in
    ``{3, 20} x {2000, 20000} x {0.5, 2}`` (4 seeds) and ``{3, 10} x {50000} x {1, 4}`` (3 seeds);
  - *hold-out family* (pure DP, Laplace, ``delta = 0``; ``lambda = 0.01``, ``d = 5``,
    ``n`` in ``{5000, 100000}``, ``epsilon`` in ``{0.5, 2}``, 3 seeds);
  - score: median excess regularised training risk over the risk at ``w = 0``, per problem divided
    by the best over the grid ``step_scale`` in ``{1, 3, 10, 30, 100, 300, 1000}`` ("regret"),
    geometric mean (max) over the problems.

  ``'epoch_growth'``: the rule's regret is 1.56 (max 4.2) on the hold-out family and 1.45 (6.3)
  on the fit family (grid value nearest the rule), against 6.0 (231) and 3.2 (981) for the former
  constant 3, and 2.95 (15.5) / 5.3 (47) for 30, the best constant on the hold-out family. The
  best constant per problem ranges from 1 (``b_1 / nu < 5``: nothing beats the start, relative
  excess ~1 at every scale) to 100–1000 (``b_1 / nu > 30``; e.g. Huber, ``d = 3``,
  ``n = 50000``, ``epsilon = 4``: relative excess 0.0007 at 100 against 0.66 at 3).
  ``'localization'``: regret 2.1 (max 4.4) hold-out and 1.38 (9.4) fit, against 6.3 (32) and
  2.1 (39) for 3; the best constant on the hold-out family, 10, has 1.6 (4.9) there.
  Tuning ``step_scale`` on private data is a release (use ``DPSearchCV``).
* **Domains.** The phase ball ``B(c_j, 2 L eta_j b)`` of §2.1 is never active for the exact
  minimiser (it lies within ``L eta_j b / 2`` of ``c_j``, spec §2.1), so it is dropped. Inside
  epoch ``i`` the phases are solved over the domain ball ``X`` (the certified solver of :mod:`.erm`
  projects onto balls centred at 0 only) and every released point — each phase's centre and each
  epoch's output — is projected onto ``X_i`` (P5 a–c; :func:`project_to_ball_intersection`, exact).
  This is post-processing, free in privacy; the paper solves each phase over ``X_i`` itself, which
  differs only when the phase minimiser over ``X`` leaves ``X_i``.
* **Negligible phases** (P10). ``eta_{i,j} = 2**-i 16**-j eta_0`` falls below the float64
  resolution of the iterate in late phases (``2**-59`` at ``n = 10**5``), where the gradient
  certificate cannot be met numerically. A phase with ``eta_{i,j} (L + lambda R) < 1e-12 R``
  (:data:`NEGLIGIBLE_STEP`) is skipped: its rows are not read and the point is unchanged. The
  paper's phase would move it by at most ``L eta b / 2`` plus noise of the same order. The rule is
  a public function of the schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._secure import noisy_release
from ..accounting import gaussian_event, gaussian_noise_multiplier, pure_dp_event
from ..rows import iter_batches
from ._core import SolverResult, margin_gradient, order_and_noise_rng, project_to_ball
from .erm import certified_iterations, certified_minimize
from .phased import check_step_scale, freeze_arrays, validated_constants

if TYPE_CHECKING:
    from ._problem import Problem

__all__ = [
    "DEFAULT_KAPPA_LOWER",
    "EPOCH_SNR_FACTOR",
    "LOCALIZATION_SNR_FACTOR",
    "MAX_DEFAULT_STEP_SCALE",
    "EpochGrowth",
    "EpochPlan",
    "Localization",
    "LocalizationPlan",
    "OutputNoise",
    "epoch_base_step",
    "default_step_scale",
    "equal_blocks",
    "localization_step",
    "n_epochs",
    "n_phases",
    "output_noise",
    "project_to_ball_intersection",
]

DEFAULT_KAPPA_LOWER = 2.0
"""``kappa_lower`` of ``'epoch_growth'``: strongly convex / ridge objectives (§6 "Defaults")."""

LOCALIZATION_SNR_FACTOR = 1.0 / 30.0
"""``c`` of the default ``step_scale = min(1000, max(1, c b_1 / nu))`` of ``'localization'`` (module docstring)."""

EPOCH_SNR_FACTOR = 1.0
"""``c`` of the default ``step_scale = min(1000, max(1, c b_1 / nu))`` of ``'epoch_growth'`` (module docstring)."""

MAX_DEFAULT_STEP_SCALE = 1000.0
"""Cap of the default ``step_scale``: the largest value of the validation grid (module docstring)."""

PHASE_DECAY = 16.0
"""``eta_j = 16**-j eta`` (Algorithm 1, §2.1)."""

NEGLIGIBLE_STEP = 1e-12
"""Phases with ``eta (L + lambda R) / R`` below this are skipped (P10, module docstring)."""

NOISE_KINDS = ("auto", "gaussian", "laplace")


# -- noise ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputNoise:
    """Output-perturbation noise per unit of replace-one ``l2``-sensitivity (§2.0, P2).

    Attributes
    ----------
    kind : {"gaussian", "laplace"}
    multiplier : float
        Gaussian: ``sigma_unit``, the standard deviation per unit sensitivity. Laplace:
        ``sqrt(p) / epsilon``, the coordinate scale per unit ``l2``-sensitivity.
    norm_factor : float
        ``nu``, the typical norm of the noise per unit sensitivity: ``sqrt(p) sigma_unit``
        (Gaussian) or ``sqrt(2) p / epsilon`` (Laplace, ``E ||Lap_p(s)||_2 ~ sqrt(2 p) s``). It
        replaces the paper's ``sqrt(d log(1/delta)) / epsilon`` and ``d / epsilon`` in the steps.
    dp_event : dp_accounting.DpEvent
        Of one release per row, in the convention of :mod:`skdpsco.accounting`.
    """

    kind: str
    multiplier: float
    norm_factor: float
    dp_event: object

    def release(self, rng: np.random.Generator, sensitivity: float, value: np.ndarray) -> np.ndarray:
        """``value`` plus its noise, for ``value`` of ``l2``-sensitivity ``sensitivity``, via
        :func:`skdpsco._secure.noisy_release` (:func:`skdpsco._noise.release_noise` and the
        one draw point of its kind; on a grid with discrete noise in secure mode, where the
        Laplace release is planned on the ``l1``-sensitivity ``sqrt(p) sensitivity``)."""
        laplace = self.kind != "gaussian"
        l1_or_l2 = sensitivity * math.sqrt(np.size(value)) if laplace else sensitivity
        return noisy_release(value, sensitivity * self.multiplier, rng, sensitivity=l1_or_l2, laplace=laplace)


def output_noise(epsilon: float, delta: float, n_params: int, kind: str = "auto") -> OutputNoise:
    """Exact calibration of one output release to ``(epsilon, delta)`` (``delta == 0``: pure DP).

    ``kind='auto'`` is Laplace for ``delta == 0`` and Gaussian otherwise. Laplace is pure
    ``epsilon``-DP for any ``delta`` (its event is then converted at the fit's ``delta``).
    """
    if kind not in NOISE_KINDS:
        raise ValueError(f"noise must be one of {NOISE_KINDS}; got {kind!r}.")
    if not (isinstance(epsilon, (int, float)) and 0 < epsilon < math.inf):
        raise ValueError(f"epsilon must be a finite number > 0; got {epsilon!r}.")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1); got {delta!r}.")
    if kind == "auto":
        kind = "laplace" if delta == 0 else "gaussian"
    if kind == "gaussian":
        if delta == 0:
            raise ValueError("Gaussian noise needs delta > 0; for pure DP (delta=0) use noise='laplace'.")
        sigma_unit = gaussian_noise_multiplier(float(epsilon), float(delta))
        return OutputNoise("gaussian", sigma_unit, math.sqrt(n_params) * sigma_unit, gaussian_event(sigma_unit, 1.0))
    scale = math.sqrt(n_params) / epsilon
    return OutputNoise("laplace", scale, math.sqrt(2.0) * n_params / epsilon, pure_dp_event(float(epsilon)))


# -- public schedule formulas ---------------------------------------------------------------------------


def n_phases(n_rows: int) -> int:
    """``k = ceil(ln n)`` phases of Algorithm 1 (§2.1, natural log, P9), at least 1."""
    return max(1, math.ceil(math.log(n_rows))) if n_rows > 1 else 1


def n_epochs(n_rows: int, kappa_lower: float) -> int:
    """``T = ceil(2 ln n / (kappa_lower - 1))`` epochs of Algorithm 2 (Thm 2/3, §2.2), at least 1."""
    if not (isinstance(kappa_lower, (int, float)) and 1 < kappa_lower < math.inf):
        raise ValueError(f"kappa_lower must be a finite number > 1 (a lower bound on kappa); got {kappa_lower!r}.")
    return max(1, math.ceil(2.0 * math.log(n_rows) / (kappa_lower - 1.0)))


def equal_blocks(n_rows: int, n_blocks: int, what: str = "phase") -> np.ndarray:
    """``n_blocks`` consecutive blocks of ``floor(n / n_blocks)`` rows, leftover rows to the last.

    Raises
    ------
    ValueError
        If a block would be empty (§2.4: ``b >= 1``).
    """
    size = n_rows // n_blocks
    if size < 1:
        raise ValueError(
            f"{n_rows} rows cannot fill {n_blocks} {what}s of at least one row each. Provide more rows, "
            "or use fewer epochs (a larger kappa_lower, or n_epochs)."
        )
    sizes = np.full(n_blocks, size, dtype=np.int64)
    sizes[-1] += n_rows - size * n_blocks
    return sizes


def _log_inverse(beta: float) -> float:
    if not 0 < beta < 1:
        raise ValueError(f"beta must be in (0, 1); got {beta!r}.")
    return math.log(1.0 / beta)


def localization_step(diameter: float, lipschitz: float, n_rows: int, beta: float, norm_factor: float) -> float:
    """``eta = (D / L) min(1 / sqrt(n ln(1/beta)), 1 / (nu ln(1/beta)))`` (Prop 1 / Prop 2, §2.1)."""
    log_b = _log_inverse(beta)
    return diameter / lipschitz * min(1.0 / math.sqrt(n_rows * log_b), 1.0 / (norm_factor * log_b))


def epoch_base_step(diameter: float, lipschitz: float, n_rows: int, beta: float, norm_factor: float) -> float:
    """``eta_0 = (D_0 / (2 L)) min(1 / sqrt(m max(1, ln m) ln(1/beta)), 1 / (nu ln(1/beta)))`` (§2.2, P9)."""
    log_b = _log_inverse(beta)
    log_m = max(1.0, math.log(n_rows))
    return diameter / (2.0 * lipschitz) * min(1.0 / math.sqrt(n_rows * log_m * log_b), 1.0 / (norm_factor * log_b))


def default_step_scale(first_phase_rows: int, norm_factor: float, factor: float) -> float:
    """``max(1, factor * b_1 / nu)``: the default ``step_scale`` (P3, module docstring "step_scale").

    ``b_1`` is the number of rows of the first phase (of the first epoch) and ``nu`` the noise
    norm per unit sensitivity (:class:`OutputNoise`): a phase moves the iterate by at most
    ``L eta b / 2`` and adds noise of norm about ``2 L eta nu``, so ``b / nu`` is the phase's
    signal-to-noise ratio, a public quantity. Never below the paper's constants (``1``), never
    above :data:`MAX_DEFAULT_STEP_SCALE`, the largest value validated.
    """
    return min(MAX_DEFAULT_STEP_SCALE, max(1.0, factor * float(first_phase_rows) / float(norm_factor)))


def _default_beta(problem: Problem, beta: float | None) -> float:
    """``beta = 1 / (n + p)`` unless given (§6); a larger one voids the theorems' hypothesis."""
    return 1.0 / (problem.n_samples + problem.n_params) if beta is None else float(beta)


# -- geometry -------------------------------------------------------------------------------------------


def project_to_ball_intersection(w: np.ndarray, radius: float, centre: np.ndarray, centre_radius: float) -> np.ndarray:
    """Euclidean projection onto ``B(0, radius) ∩ B(centre, centre_radius)``, exact, for ``centre`` in
    the first ball (the epoch centre ``x_i`` lies in ``X``, so the intersection is non-empty).

    If neither single-ball projection lies in the other ball, both constraints are active at the
    projection (KKT), which is then the point of the intersection of the two spheres — a sphere of
    radius ``r`` centred at ``h`` on the axis, in the hyperplane orthogonal to it — nearest to ``w``:
    ``h + r u`` with ``u`` the normalised component of ``w - h`` orthogonal to the axis.
    """
    w = np.asarray(w, dtype=float)
    centre = np.asarray(centre, dtype=float)
    slack = 1e-12 * radius

    def in_first(v):
        return np.linalg.norm(v) <= radius + slack

    def in_second(v):
        return np.linalg.norm(v - centre) <= centre_radius + slack

    first = project_to_ball(w, radius)
    if in_second(first):
        return first
    second = centre + project_to_ball(w - centre, centre_radius)
    if in_first(second):
        return second
    gap = float(np.linalg.norm(centre))
    axis = centre / gap
    along = (radius**2 - centre_radius**2 + gap**2) / (2.0 * gap)
    ring = math.sqrt(max(radius**2 - along**2, 0.0))
    h = along * axis
    side = (w - h) - np.vdot(w - h, axis) * axis
    norm = float(np.linalg.norm(side))
    if norm == 0.0:  # w on the axis: every point of the ring is nearest; take one orthogonal direction
        side = np.zeros_like(w).ravel()
        side[int(np.argmin(np.abs(axis.ravel())))] = 1.0
        side = side.reshape(w.shape) - np.vdot(side.reshape(w.shape), axis) * axis
        norm = float(np.linalg.norm(side))
    return h + ring * side / norm


# -- plans ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalizationPlan:
    """Algorithm 1 (§2.1) on consecutive row blocks: public quantities only.

    Attributes
    ----------
    sizes : ndarray of int
        Block sizes ``b_j`` (they sum to the rows of the call).
    steps : ndarray
        ``eta_j = 16**-j eta``.
    active : ndarray of bool
        Phases that are run (the others have a negligible step, P10, and read no row).
    tolerances, sensitivities : ndarray
        ``tau_j = L eta_j / 2`` and ``Delta_j = L eta_j + 2 tau_j`` (§2.5).
    smoothness, strong_convexity : ndarray
        ``beta + lambda + 2 / (eta_j b_j)`` and ``lambda + 2 / (eta_j b_j)``: constants of ``F_j``.
    n_iterations : ndarray of int
        Public iteration counts of the certified solver (0 for skipped phases).
    noise : OutputNoise
    base_step : float
        ``eta``.
    step_scale : float
        The multiplier of the paper's step that ``base_step`` includes (public).
    """

    sizes: np.ndarray
    steps: np.ndarray
    active: np.ndarray
    tolerances: np.ndarray
    sensitivities: np.ndarray
    smoothness: np.ndarray
    strong_convexity: np.ndarray
    n_iterations: np.ndarray
    noise: OutputNoise
    base_step: float
    step_scale: float = 1.0

    @property
    def dp_event(self):
        """One release per row (parallel composition, module docstring)."""
        return self.noise.dp_event

    @property
    def n_samples(self) -> int:
        return int(self.sizes.sum())

    @property
    def n_gradients(self) -> int:
        """``n_iterations + 1`` full-block gradients per phase that is run."""
        return int(np.sum((self.n_iterations + 1) * self.sizes * self.active))

    @property
    def noise_scales(self) -> np.ndarray:
        """Gaussian standard deviation or Laplace scale of each phase's release."""
        return self.sensitivities * self.noise.multiplier

    def info(self) -> dict:
        return {
            "n_phases": int(self.sizes.size),
            "n_active_phases": int(self.active.sum()),
            "phase_sizes": self.sizes.tolist(),
            "base_step": self.base_step,
            "step_scale": self.step_scale,
            "noise": self.noise.kind,
            "noise_scales": self.noise_scales.tolist(),
            "n_iterations": self.n_iterations.tolist(),
        }


def plan_localization_phases(
    problem: Problem, n_rows: int, base: float, noise: OutputNoise, algorithm: str, step_scale: float = 1.0
) -> LocalizationPlan:
    """Algorithm 1's phases on ``n_rows`` rows with base step ``base`` (§2.1, §2.5, P10)."""
    c = validated_constants(problem, algorithm)
    radius = float(problem.radius)
    sizes = equal_blocks(n_rows, n_phases(n_rows))
    steps = float(base) / PHASE_DECAY ** np.arange(1, sizes.size + 1)
    active = steps * c.gradient_bound >= NEGLIGIBLE_STEP * radius
    tolerances = c.lipschitz * steps / 2.0
    sensitivities = c.lipschitz * steps + 2.0 * tolerances
    regulariser = 2.0 / (steps * sizes)  # strong convexity of ||w - c_j||**2 / (eta_j b_j)
    strong_convexity = c.l2_penalty + regulariser
    smoothness = c.smoothness + regulariser
    # ||c_j - w_hat|| <= min(2R, 2 ||grad F_j(c_j)|| / mu_j), ||grad F_j(c_j)|| <= L + lambda R (as Phased-ERM).
    distances = np.minimum(2.0 * radius, 2.0 * c.gradient_bound / strong_convexity)
    n_iterations = np.array(
        [
            certified_iterations(b, m, t, r, c.gradient_bound) if run else 0
            for b, m, t, r, run in zip(smoothness, strong_convexity, tolerances, distances, active, strict=True)
        ],
        dtype=np.int64,
    )
    freeze_arrays(sizes, steps, active, tolerances, sensitivities, smoothness, strong_convexity, n_iterations)
    return LocalizationPlan(
        sizes, steps, active, tolerances, sensitivities, smoothness, strong_convexity, n_iterations, noise, float(base),
        float(step_scale),
    )


def plan_localization(
    problem: Problem, step_scale: float | None, beta: float | None, noise_kind: str
) -> LocalizationPlan:
    """Plan Algorithm 1 standalone: ``eta`` of Prop 1/2 with ``D = 2 R``, times ``step_scale``
    (``None``: :func:`default_step_scale` with :data:`LOCALIZATION_SNR_FACTOR`)."""
    n_rows = int(problem.n_samples)
    if n_rows < 1:
        raise ValueError(f"localization needs n_samples >= 1; got {n_rows}.")
    c = validated_constants(problem, "localization")
    noise = output_noise(float(problem.epsilon), float(problem.delta), problem.n_params, noise_kind)
    if step_scale is None:
        first = int(equal_blocks(n_rows, n_phases(n_rows))[0])
        step_scale = default_step_scale(first, noise.norm_factor, LOCALIZATION_SNR_FACTOR)
    step = step_scale * localization_step(
        2.0 * float(problem.radius), c.gradient_bound, n_rows, _default_beta(problem, beta), noise.norm_factor
    )
    return plan_localization_phases(problem, n_rows, step, noise, "localization", float(step_scale))


@dataclass(frozen=True)
class EpochPlan:
    """Algorithm 2 (§2.2): ``T`` epochs of Algorithm 1 on disjoint row ranges.

    Attributes
    ----------
    epochs : tuple of LocalizationPlan
        Epoch ``i`` has base step ``eta_i = 2**-i eta_0``.
    radii : ndarray
        ``D_i = 2**-i D_0``, ``D_0 = 2 R``: the radius of the epoch domain ``X ∩ B(x_i, D_i)``.
    kappa_lower : float
    """

    epochs: tuple
    radii: np.ndarray
    kappa_lower: float

    @property
    def dp_event(self):
        """Every epoch has the same per-row event; rows are disjoint (parallel composition)."""
        return self.epochs[0].dp_event

    @property
    def n_samples(self) -> int:
        return sum(epoch.n_samples for epoch in self.epochs)

    @property
    def n_gradients(self) -> int:
        return sum(epoch.n_gradients for epoch in self.epochs)


def plan_epoch_growth(
    problem: Problem,
    kappa_lower: float,
    epochs: int | None,
    step_scale: float | None,
    beta: float | None,
    noise_kind: str,
) -> EpochPlan:
    """Plan Algorithm 2 (§2.2): ``T`` from ``kappa_lower`` (or ``epochs``), ``eta_0`` of Thm 2/3 times
    ``step_scale`` (``None``: :func:`default_step_scale` with :data:`EPOCH_SNR_FACTOR`)."""
    n_rows = int(problem.n_samples)
    if epochs is not None and not (isinstance(epochs, (int, np.integer)) and epochs >= 1):
        raise ValueError(f"n_epochs must be an integer >= 1 or None; got {epochs!r}.")
    T = n_epochs(n_rows, kappa_lower) if epochs is None else int(epochs)
    sizes = equal_blocks(n_rows, T, "epoch")
    c = validated_constants(problem, "epoch_growth")
    noise = output_noise(float(problem.epsilon), float(problem.delta), problem.n_params, noise_kind)
    diameter = 2.0 * float(problem.radius)
    if step_scale is None:
        first = int(equal_blocks(int(sizes[0]), n_phases(int(sizes[0])))[0])
        step_scale = default_step_scale(first, noise.norm_factor, EPOCH_SNR_FACTOR)
    eta0 = step_scale * epoch_base_step(
        diameter, c.gradient_bound, int(sizes[0]), _default_beta(problem, beta) / T, noise.norm_factor
    )
    halving = 2.0 ** -np.arange(T)
    epoch_plans = tuple(
        plan_localization_phases(problem, int(m), eta0 * h, noise, "epoch_growth", float(step_scale))
        for m, h in zip(sizes, halving, strict=True)
    )
    radii = diameter * halving
    freeze_arrays(radii)
    return EpochPlan(epoch_plans, radii, float(kappa_lower))


# -- running --------------------------------------------------------------------------------------------

Projection = Callable[[np.ndarray], np.ndarray]


def _run_phases(
    plan: LocalizationPlan,
    X: np.ndarray,
    y: np.ndarray,
    rows: np.ndarray,
    start: np.ndarray,
    project: Projection,
    problem: Problem,
    noise_rng: np.random.Generator,
) -> np.ndarray:
    """Algorithm 1 from ``start``: ``c_{j+1} = project(certified argmin F_j + zeta_j)``; returns ``c_{k+1}``.

    ``project`` is the projection onto Algorithm 1's input domain (P5 a, b); the phases are solved
    over the domain ball of the problem (module docstring, "Domains").
    """
    radius = float(problem.radius)
    loss_gradient = margin_gradient(problem.loss, problem.l2_penalty)
    w = project(np.array(start, dtype=float))
    for j, (X_block, y_block) in enumerate(iter_batches(X, y, rows, plan.sizes)):
        if not plan.active[j]:
            continue
        centre = w
        pull = 2.0 / (plan.steps[j] * plan.sizes[j])  # gradient of ||w - c_j||**2 / (eta_j b_j)

        def gradient(v, X_block=X_block, y_block=y_block, centre=centre, pull=pull):
            return loss_gradient(v, X_block, y_block) + pull * (v - centre)

        minimiser = certified_minimize(
            gradient, centre, radius, plan.smoothness[j], plan.strong_convexity[j], plan.tolerances[j],
            int(plan.n_iterations[j]),
        )
        w = project(plan.noise.release(noise_rng, plan.sensitivities[j], minimiser))
    return w


def run_localization(
    plan: LocalizationPlan,
    X: np.ndarray,
    y: np.ndarray,
    problem: Problem,
    rng: np.random.Generator,
    order: np.ndarray | None = None,
) -> SolverResult:
    """Run planned Algorithm 1 from ``w_0 = 0`` on rows already clipped to the public bound."""
    rows, noise_rng = order_and_noise_rng(X, plan.n_samples, rng, order)
    radius = float(problem.radius)
    coef = _run_phases(
        plan, X, y, rows, np.zeros(problem.coef_shape), lambda w: project_to_ball(w, radius), problem, noise_rng
    )
    info = {"algorithm": "localization", **plan.info()}
    return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=plan.n_gradients, info=info)


def run_epoch_growth(
    plan: EpochPlan,
    X: np.ndarray,
    y: np.ndarray,
    problem: Problem,
    rng: np.random.Generator,
    order: np.ndarray | None = None,
) -> SolverResult:
    """Run planned Algorithm 2: epoch ``i`` is Algorithm 1 on ``X ∩ B(x_i, D_i)`` from ``x_i``."""
    rows, noise_rng = order_and_noise_rng(X, plan.n_samples, rng, order)
    radius = float(problem.radius)
    x = np.zeros(problem.coef_shape)
    start = 0
    for epoch, domain_radius in zip(plan.epochs, plan.radii, strict=True):
        centre = x

        def project(w, centre=centre, domain_radius=domain_radius):
            return project_to_ball_intersection(w, radius, centre, domain_radius)

        x = _run_phases(epoch, X, y, rows[start : start + epoch.n_samples], x, project, problem, noise_rng)
        start += epoch.n_samples
    info = {
        "algorithm": "epoch_growth",
        "kappa_lower": plan.kappa_lower,
        "n_epochs": len(plan.epochs),
        "epoch_sizes": [epoch.n_samples for epoch in plan.epochs],
        "n_phases": [int(epoch.sizes.size) for epoch in plan.epochs],
        "n_active_phases": [int(epoch.active.sum()) for epoch in plan.epochs],
        "epoch_steps": [epoch.base_step for epoch in plan.epochs],
        "step_scale": plan.epochs[0].step_scale,
        "radii": plan.radii.tolist(),
        "noise": plan.epochs[0].noise.kind,
    }
    return SolverResult(coef=x, dp_event=plan.dp_event, n_gradients=plan.n_gradients, info=info)


# -- the public algorithms ------------------------------------------------------------------------------


def _check_options(step_scale: float | None, noise: str, beta: float | None) -> None:
    if step_scale is not None:
        check_step_scale(step_scale)
    if noise not in NOISE_KINDS:
        raise ValueError(f"noise must be one of {NOISE_KINDS}; got {noise!r}.")
    if beta is not None:
        _log_inverse(beta)


@dataclass(frozen=True)
class Localization:
    """Algorithm 1 of Asi, Levy & Duchi 2021 (``asi_growth.md`` §2.1): localization with a certified
    regularised ERM per phase and output perturbation; high-probability DP-SCO bounds.

    Parameters
    ----------
    step_scale : float or None, default=None
        Multiplies the step of Prop 1/2 (P3); costs no privacy. ``None``: the public rule
        ``max(1, b_1 / (30 nu))`` of :func:`default_step_scale` (module docstring "step_scale").
    noise : {"auto", "gaussian", "laplace"}, default="auto"
        ``"auto"``: Laplace (pure epsilon-DP) when ``delta == 0``, else Gaussian.
    beta : float or None, default=None
        Confidence parameter of the step (``1 / (n + p)`` when None).
    """

    requires_smooth_loss = True  # the certified V-FISTA solver (§2.5) needs a Lipschitz gradient
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws
    supports_pure_dp = True  # delta == 0: Laplace output perturbation, pure epsilon-DP (§2.0)
    grid_releases = True  # every noise draw is one release of a point: a grid release in secure mode (skdpsco._secure)

    step_scale: float | None = None
    noise: str = "auto"
    beta: float | None = None

    def __post_init__(self):
        _check_options(self.step_scale, self.noise, self.beta)

    def plan(self, problem: Problem) -> LocalizationPlan:
        scale = None if self.step_scale is None else float(self.step_scale)
        return plan_localization(problem, scale, self.beta, self.noise)

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator, order=None) -> SolverResult:
        return run_localization(plan, X, y, problem, rng, order)


@dataclass(frozen=True)
class EpochGrowth:
    """Algorithm 2 of Asi, Levy & Duchi 2021 (``asi_growth.md`` §2.2): epochs with halving radius and
    step around the previous output, Algorithm 1 inside; adapts to any unknown ``kappa >= kappa_lower``.

    Parameters
    ----------
    kappa_lower : float, default=2.0
        ``kappa_lower > 1``, a lower bound on the growth exponent; sets ``T = ceil(2 ln n /
        (kappa_lower - 1))``. 2 covers ridge-penalised and strongly convex objectives; smaller
        values help sharp problems at the cost of fewer rows per epoch.
    n_epochs : int or None, default=None
        Overrides ``T`` (§6).
    step_scale : float or None, default=None
        Multiplies the step ``eta_0`` of Thm 2/3 (P3); costs no privacy. ``None``: the public
        rule ``max(1, b_1 / nu)`` of :func:`default_step_scale`, ``b_1`` the rows of the first
        phase of the first epoch (module docstring "step_scale").
    noise, beta
        As in :class:`Localization`.
    """

    requires_smooth_loss = True  # the certified V-FISTA solver (§2.5) needs a Lipschitz gradient
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws
    supports_pure_dp = True  # delta == 0: Laplace output perturbation, pure epsilon-DP (§2.0)
    grid_releases = True  # every noise draw is one release of a point: a grid release in secure mode (skdpsco._secure)

    kappa_lower: float = DEFAULT_KAPPA_LOWER
    n_epochs: int | None = None
    step_scale: float | None = None
    noise: str = "auto"
    beta: float | None = None

    def __post_init__(self):
        _check_options(self.step_scale, self.noise, self.beta)
        n_epochs(2, self.kappa_lower)  # validates kappa_lower

    def plan(self, problem: Problem) -> EpochPlan:
        scale = None if self.step_scale is None else float(self.step_scale)
        return plan_epoch_growth(problem, float(self.kappa_lower), self.n_epochs, scale, self.beta, self.noise)

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator, order=None) -> SolverResult:
        return run_epoch_growth(plan, X, y, problem, rng, order)
