"""Solvers: pure functions of public parameters and clipped data, no scikit-learn inside.

Every algorithm is planned from public quantities only (:class:`Problem`) before the data is
read, so that its privacy event can be checked against the budget first, and then run. The
registry :data:`ALGORITHMS` maps the public ``algorithm=`` names of the estimators to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..defaults import MAX_NOISY_GD_STEPS
from ._core import SolverResult, margin_gradient
from .ftrl import PrivateFTRL
from .growth import EpochGrowth, Localization
from .holder import GradientPerturbationSGD, OutputPerturbationSGD
from .noisy_gd import NoisyGD, plan_noisy_gd
from .objective import ObjectivePerturbation
from .phased import PhasedERM, PhasedSGD, StronglyConvexPhasedSGD
from .pnsgd import PNSGD, MultiPassPNSGD, SkipPNSGD, StopPNSGD
from .snowball import plan_snowball, run_snowball

__all__ = ["ALGORITHMS", "Problem", "SolverResult", "select_algorithm"]


@dataclass(frozen=True)
class Problem:
    """Public description of one private fit: nothing in it is computed from the rows.

    Attributes
    ----------
    n_samples : int
        Number of rows ``n`` (public under replace-one neighbours).
    coef_shape : tuple of int
        Shape of the parameter: ``(p,)`` or ``(K, p)``, intercept column included.
    loss : skdpsco.losses.MarginLoss
    constants : skdpsco.losses.LossConstants
        Of ``loss`` at the public bounds.
    radius : float
        Radius of the domain ball.
    epsilon, delta : float
        Target guarantee of this fit.
    l2_penalty : float
        Coefficient ``lambda`` of an explicit ridge term ``lambda ||w||**2 / 2`` added to the
        per-row loss (0 for none). ``constants`` describe the loss without it: a solver that
        uses the penalty adds ``lambda R`` to ``L`` and ``lambda`` to ``beta`` (``feldman.md`` §A8).
    """

    n_samples: int
    coef_shape: tuple
    loss: object
    constants: object
    radius: float
    epsilon: float
    delta: float
    l2_penalty: float = 0.0

    @property
    def n_params(self) -> int:
        return int(np.prod(self.coef_shape))

    @property
    def lipschitz(self) -> float:
        """``L`` of the per-row objective, ridge included: ``L + lambda R`` (``feldman.md`` §A8)."""
        return float(self.constants.lipschitz) + self.l2_penalty * self.radius

    @property
    def smoothness(self) -> float:
        """``beta`` of the per-row objective, ridge included (``inf`` when the gradient of the loss
        is not Lipschitz, e.g. hinge before smoothing)."""
        beta = self.constants.smoothness
        return math.inf if beta is None else float(beta) + self.l2_penalty

    def gradient(self):
        """Batch-averaged gradient of the per-row objective (loss plus ridge term)."""
        return margin_gradient(self.loss, self.l2_penalty)


@dataclass(frozen=True)
class SnowballSGD:
    """Snowball-SGD (FKT20 Thm 3.5 / 3.6); see :mod:`skdpsco.solvers.snowball`."""

    schedule: str

    requires_smooth_loss = True
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws

    def plan(self, problem: Problem):
        return plan_snowball(
            problem.n_samples,
            problem.n_params,
            problem.lipschitz,
            problem.smoothness,
            float(problem.radius),
            float(problem.epsilon),
            float(problem.delta),
            self.schedule,
        )

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator, order=None) -> SolverResult:
        w0 = np.zeros(problem.coef_shape)
        return run_snowball(plan, X, y, problem.gradient(), w0, problem.radius, rng, order)


MULTIPASS_EPOCHS = 5
"""Passes of ``'multipass_pnsgd'``: each pass costs ``(E - 1) / n`` in zCDP (``feldman.md`` §B11),
nearly nothing, and ``n`` gradients."""

ALGORITHMS = {
    "snowball": SnowballSGD("jnn"),
    "snowball_constant": SnowballSGD("constant"),
    "pnsgd": PNSGD(),
    "skip_pnsgd": SkipPNSGD(),
    "stop_pnsgd": StopPNSGD(),
    "multipass_pnsgd": MultiPassPNSGD(epochs=MULTIPASS_EPOCHS),
    "phased_sgd": PhasedSGD(),
    "phased_erm": PhasedERM(),
    "strongly_convex": StronglyConvexPhasedSGD(),
    "output_perturbation": OutputPerturbationSGD(),
    "gradient_perturbation": GradientPerturbationSGD(),
    "ftrl": PrivateFTRL(),
    "localization": Localization(),
    "epoch_growth": EpochGrowth(),
    "noisy_gd": NoisyGD(),
    "objective_perturbation": ObjectivePerturbation(),
}
"""Public ``algorithm=`` names and the solver each selects."""


AUTO_NOISY_GD_WORK = 5e9
"""Public compute cap of the ``'auto'`` rule: ``'noisy_gd'`` is chosen only when its planned
number of multiply-adds, ``n p T`` (``T`` full-batch steps of ``n`` rows and ``p`` parameters), is
at most this; above it the one-pass solvers run. Measured on the benchmark machine (2 cores, the
other one busy): ``n = 10^5``, ``p = 21``, ``T = 1067`` (2.2e9) fits in 4.4 s on the compiled
full-batch passes (11.4 s on numpy matrix products) against 0.17 s for ``'phased_sgd'``: the
cap allows fits of about 10 s."""


def _noisy_gd_work(problem: Problem) -> float:
    """``n p T`` of the default noisy-GD plan; ``T`` = its cap when the loss is not yet smoothed
    (the smoothed loss's constants are fixed after the choice, so the cap is the safe bound)."""
    n_steps = MAX_NOISY_GD_STEPS
    if 0 < problem.smoothness < math.inf and problem.delta > 0:  # delta = 0 is refused by the solver
        n_steps = plan_noisy_gd(problem).n_steps
    return float(problem.n_samples) * problem.n_params * n_steps


def select_algorithm(problem: Problem, constraint: str = "l2") -> str:
    """The ``algorithm='auto'`` rule: one function, public quantities only.

    * A non-Euclidean domain (``constraint='l1'`` or ``'lp'``) is implemented by Private FTRL
      only (``'ftrl'``, ``ftrl_mirror.md`` §3.5).
    * Losses whose gradient is Hölder- but not Lipschitz-continuous (q-hinge with q < 2,
      ``|r|^p`` with 1 < p < 2; ``smoothness = inf``): DP-SGD-Gradient of Wang et al.
      (``'gradient_perturbation'``, ``wang_holder.md`` §2.4), which needs only the gradient bound
      for privacy and the Hölder exponent for its schedule. Measured (5 seeds, n = 10^4, d = 10,
      ε ∈ {0.5, 1, 2}, δ = 1e-6; ``benchmarks/results/holder_auto.md``; ``'ftrl'`` measured with
      one row per step, before its batches): q-hinge (q = 1.5)
      accuracy 0.598 / 0.621 / 0.644 against 0.543 / 0.557 / 0.579 for ``'ftrl'`` and 0.472 /
      0.474 / 0.479 for ``'output_perturbation'`` (whose stability-based noise dominates); at
      n = 10^5, 0.709 / 0.725 / 0.735 against FTRL's 0.532 / 0.564 / 0.614. ``|r|^1.5``
      regression, MAE 0.336 / 0.273 / 0.234 against 0.781 / 0.711 / 0.632 (FTRL) and 6.0 / 3.8 /
      2.0 (output perturbation).
    * Smooth losses, and kinked ones through their closed-form Gaussian smoothing, whose planned
      work ``n p T`` is at most :data:`AUTO_NOISY_GD_WORK`: full-batch noisy gradient descent
      (``'noisy_gd'``: composition or last-iterate accounting, schedule of
      :func:`skdpsco.defaults.noisy_gd_schedule`), with or without an L2 penalty. It beats every
      other solver at its defaults wherever it was measured (``benchmarks/goal.py``,
      ``benchmarks/results/goal.md``; 3 seeds, ε = 0.3 / 1 / 3, δ = 1e-6): synthetic logistic
      d = 20, excess test log-loss at n = 10^4 0.0158 / 0.0033 / 0.0016 against 0.0229 / 0.0048 /
      0.0021 (``'objective_perturbation'``) and 0.043 / 0.016 / 0.0069 (``'phased_sgd'``), at
      n = 10^5 0.00031 / 0.00010 / 0.000096 against 0.00057 / 0.00017 / 0.00011 and 0.0033 /
      0.00056 / 0.00025; ridge logistic (alpha = 1e-3, n = 10^4) 0.017 / 0.0049 / 0.0030 against
      0.044 / 0.017 / 0.0076 for ``'strongly_convex'``; accuracy at ε = 0.5 / 1 / 2 on
      digits_binary 0.573 / 0.713 / 0.800 (logistic) and 0.590 / 0.754 / 0.820 (smoothed hinge)
      against 0.501 / 0.574 / 0.695 and 0.520 / 0.617 / 0.745 (``'phased_sgd'``), 10-class digits
      0.207 / 0.269 / 0.591 against 0.148 / 0.220 / 0.316. ``'objective_perturbation'`` is never
      chosen: on an ill-conditioned validation family (logistic, d ∈ {10, 30}, ``‖w*‖`` ∈ {3, 10},
      feature scales decaying from 1 to 0.01 before row normalisation, 3 seeds, δ = 1e-6) noisy GD
      has the lower excess log-loss in 14 of 16 (n, ε) cells, n ∈ {300, 1000, 3000, 10^4} × ε ∈
      {0.3, 1, 3, 10} (n = 300, ε = 1: 0.099 against 0.157; n = 1000, ε = 1: 0.032 against
      0.051), and objective perturbation only at n = 10^4, ε ≥ 3 (0.0021 / 0.0009 against
      0.0025 / 0.0018), where both are within 0.003 of the optimum; accuracy differs by at most
      0.04 either way. On breast_cancer (``Normalizer``, ε ≥ 3) objective perturbation's exact
      minimiser is more accurate (``benchmarks/results/goal.md``), a property of that data that
      no public quantity reveals.
    * Above the work cap, an L2 penalty (``l2_penalty > 0``) makes the objective strongly convex:
      the reduction of FKT20 §5 (``'strongly_convex'``, ``feldman.md`` §A8a), which is Phased-SGD
      itself when the penalty is too weak to need more than one epoch.
    * Otherwise Phased-SGD (FKT20 §4, last iterate of each phase), linear time. Measured with
      ``benchmarks/utility.py`` (10 seeds, ε ∈ {0.5, 1, 2}, ``benchmarks/results/``), it
      matches or beats Snowball-SGD, the other linear-time optimal algorithm, on every problem:
      synthetic logistic data, n = 10^4, accuracy 0.725 / 0.737 / 0.743 against 0.700 / 0.728 /
      0.736 (logistic loss) and 0.734 / 0.741 / 0.743 against 0.715 / 0.736 / 0.742 (smoothed
      hinge); LAD regression with heavy-tailed noise, n = 10^4, MAE 0.149 / 0.144 / 0.142
      against 0.161 / 0.147 / 0.143; a tie at n = 10^5.
    * Never the growth solvers of Asi, Levy & Duchi (``'localization'``, ``'epoch_growth'``), even
      under known growth: on ridge logistic regression (``alpha = 0.1``, kappa = 2, d = 5,
      epsilon = 1, delta = 1e-6, 5 seeds) the strongly convex reduction reaches a median excess
      regularised risk of 0.0061 / 0.0002 at n = 5000 / 50000, against 0.0374 / 0.0071 for
      ``'epoch_growth'`` and 0.0199 / 0.0035 for ``'localization'`` at their default
      ``step_scale`` rule (:func:`skdpsco.solvers.growth.default_step_scale`; 0.0313 / 0.0209 and
      0.0192 / 0.0060 at the former constant 3). They remain the only solvers with a pure
      epsilon-DP (``delta = 0``) guarantee, which ``'auto'`` does not select.
    """
    if constraint != "l2":
        return "ftrl"
    if problem.constants.smoothness == math.inf:
        return "gradient_perturbation"
    if _noisy_gd_work(problem) <= AUTO_NOISY_GD_WORK:
        return "noisy_gd"
    return "strongly_convex" if problem.l2_penalty > 0 else "phased_sgd"
