"""Solvers: pure functions of public parameters and clipped data, no scikit-learn inside.

Every algorithm is planned from public quantities only (:class:`Problem`) before the data is
read, so that its privacy event can be checked against the budget first, and then run. The
registry :data:`ALGORITHMS` maps the public ``algorithm=`` names of the estimators to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..accounting import gaussian_noise_multiplier
from ..defaults import MAX_NOISY_GD_STEPS
from ..losses import LogisticLoss, MultinomialLogisticLoss
from ._core import SolverResult
from ._problem import Problem
from .ftrl import PrivateFTRL
from .growth import EpochGrowth, Localization
from .holder import GradientPerturbationSGD, OutputPerturbationSGD
from .newton import PrivateNewton, is_squared_loss
from .noisy_gd import NoisyGD, plan_noisy_gd
from .objective import ObjectivePerturbation
from .phased import PhasedERM, PhasedSGD, StronglyConvexPhasedSGD
from .pnsgd import PNSGD, MultiPassPNSGD, SkipPNSGD, StopPNSGD
from .snowball import plan_snowball, run_snowball

__all__ = ["ALGORITHMS", "Problem", "SolverResult", "WEIGHTED_ALGORITHMS", "select_algorithm"]


@dataclass(frozen=True)
class SnowballSGD:
    """Snowball-SGD (FKT20 Thm 3.5 / 3.6); see :mod:`skdpsco.solvers.snowball`."""

    schedule: str

    requires_smooth_loss = True
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws
    reads_rows_progressively = True  # run(..., rows_written=) reads rows still being written as they are

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

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator, order=None,
            rows_written=None) -> SolverResult:
        w0 = np.zeros(problem.coef_shape)
        return run_snowball(plan, X, y, problem.gradient(), w0, problem.radius, rng, order, rows_written)


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
    "newton": PrivateNewton(),
}
"""Public ``algorithm=`` names and the solver each selects."""

WEIGHTED_ALGORITHMS = frozenset({
    "snowball", "snowball_constant", "pnsgd", "skip_pnsgd", "stop_pnsgd", "multipass_pnsgd",
    "phased_sgd", "phased_erm", "strongly_convex", "output_perturbation", "gradient_perturbation",
    "ftrl", "localization", "epoch_growth", "noisy_gd", "objective_perturbation", "newton",
})
"""The ``algorithm=`` names whose privacy analysis is verified for weighted rows
(:class:`skdpsco.losses.WeightedLoss`: row ``i``'s loss times ``c_i`` in ``[0, 1]``, the estimators'
``sample_weight / max_weight``); the estimators refuse weighted fits with any other algorithm.

Each analysis below needs of a row's loss only properties that ``c f`` keeps for ``c`` in
``[0, 1]``: convexity, the gradient bound ``L`` (so the replace-one change of a row's gradient is at
most ``2 L``), the smoothness ``beta`` or Hoelder constant ``(alpha, H)`` (``c H <= H``), over every
row of the public domain (``skdpsco.losses.WeightedLoss``):

* amplification by iteration (``'snowball'``, ``'snowball_constant'``, the PNSGD family, the
  last-iterate analysis of ``'noisy_gd'``): a step ``w - eta (1/b) sum c_i grad f_i(w)`` of a
  convex ``beta``-smooth average is a contraction for ``eta <= 2 / beta`` (FMTT Prop. 18), and
  the differing row shifts it by at most ``2 L eta / b`` (``feldman.md`` §0.4); the random skip
  or stopping time is independent of the rows;
* Gaussian composition of noisy gradients (``'noisy_gd'``, ``'gradient_perturbation'``'s sampled
  Gaussian) and the clipped gradients of ``'ftrl'`` (clipped after weighting, norm ``<= C``):
  sensitivity ``2 L`` (``2 C``) per row;
* stability and localization (``'phased_sgd'``, ``'phased_erm'``, ``'strongly_convex'``,
  ``'localization'``, ``'epoch_growth'``, ``'output_perturbation'``): the ``2 L eta`` step bound,
  the ``2 L / (b mu)`` move of a ``mu``-strongly convex minimiser, the certified solvers' public
  iteration counts (from ``L`` and ``beta``), and Wang et al.'s Thm 7 (monotone in ``H``);
* ``'objective_perturbation'``: a row's Hessian ``c phi'' x x^T`` has its eigenvalue in
  ``[0, beta]`` and its gradient ``c phi' x`` norm ``<= L`` on all of ``R^p``, the two facts of the
  log-determinant and linear-term bounds (:mod:`skdpsco.solvers.objective`);
* ``'newton'``: a row's gradient ``c phi' x`` has norm ``<= L`` (for the squared loss's first
  gradient, at ``w_0 = 0``: ``<= L_0``) and its Hessian ``c h`` is positive semidefinite with
  ``||c h||_F <= b``, the facts of the gradient and Hessian sensitivities
  (:mod:`skdpsco.solvers.newton`), whose solver weights each row's Hessian as its gradient.
"""


AUTO_PASSES = 30.0
"""Public compute budget of the ``'auto'`` rule, in passes over the rows: a multi-pass candidate
(``'newton'`` for the logistic losses, ``'noisy_gd'``) is chosen only when its planned work
(:func:`_noisy_gd_work`, :func:`_newton_work`, in multiply-adds of a gradient pass) is at most
this many ``n p``, or at most :data:`AUTO_FREE_WORK`; above both the one-pass solvers run.
What the non-private defaults the estimators are compared with take on well-scaled rows:
``LogisticRegression()``'s L-BFGS stops after 7 iterations (about ten passes, a value and a
gradient each) and ``LinearSVC()``'s coordinate descent after 4-5 epochs at ``n = 10^5``-
``2 10^5``, ``d = 20``-``100`` (``benchmarks/engine.py``'s rows), so a default fit planning more
than thirty passes cannot match their time; ``benchmarks/results/engine.md`` measures it."""

AUTO_FREE_WORK = 2e9
"""Public work (multiply-adds of a gradient pass) below which the ``'auto'`` rule takes the most
accurate candidate whatever its passes: about two seconds of full-batch noisy GD steps on the
benchmark machine (2 cores; 2000 smoothed-hinge steps over ``n = 2 10^4``, ``p = 21``, 8.4e8,
took 0.85 s). Below it the multi-pass solvers' accuracy is worth their time: at ``n = 2 10^4``,
``d = 20``, ``epsilon = 1`` noisy GD's test AUC is 0.0137 (logistic) and 0.0050 (smoothed hinge)
above Phased-SGD's, at ``n = 10^5`` 0.0005-0.0012, for a hundred times the time
(``benchmarks/results/auto_compute.md``). It keeps noisy GD for the logistic loss up to the
``n`` where Newton takes over (``n = 5 10^4`` at ``d = 20``, ``epsilon = 1``)."""

HESSIAN_COST = 0.2
"""Cost of one multiply-add of a Hessian update (``numpy`` symmetric rank-``k`` products over a
block of rows) in units of one multiply-add of a gradient pass, which streams the rows from
memory for a dot product and an axpy each: 0.12-0.25 ns against about 1 ns on the benchmark
machine (Newton's six Hessians at ``n = 10^6``, ``p = 101`` in 7.5 s; 2000 noisy GD steps at
``n = 2 10^4``, ``p = 21`` in 0.85 s)."""


def _affordable(problem: Problem, work: float) -> bool:
    """Whether ``work`` multiply-adds fit the ``'auto'`` rule's compute budget:
    :data:`AUTO_PASSES` passes over the ``n p`` entries, or :data:`AUTO_FREE_WORK`."""
    return work <= max(AUTO_FREE_WORK, AUTO_PASSES * float(problem.n_samples) * problem.n_params)


def _noisy_gd_work(problem: Problem) -> float:
    """``n p T`` of the default noisy-GD plan; ``T`` = its cap when the loss is not yet smoothed
    (the smoothed loss's constants are fixed after the choice, so the cap is the safe bound)."""
    n_steps = MAX_NOISY_GD_STEPS
    if 0 < problem.smoothness < math.inf and problem.delta > 0:  # delta = 0 is refused by the solver
        n_steps = plan_noisy_gd(problem).n_steps
    return float(problem.n_samples) * problem.n_params * n_steps


AUTO_NEWTON_SIGNAL = 600.0
"""Public threshold of the ``'auto'`` rule for ``'newton'``: the private Newton method is chosen
only when ``n mu / p`` (:func:`_newton_signal`) is at least this. Chosen on the validation data of
``benchmarks/newton.py`` (numbers in ``benchmarks/results/newton.md`` and the user guide's
"Choosing an algorithm"): at or above it Newton matched noisy GD's test AUC and accuracy in
every cell, below it it lost accuracy in most."""

AUTO_NEWTON_WORK = 1e11
"""Public compute cap of the ``'auto'`` rule for the squared loss's one Newton step: its work
``n m**2 + EIGH_COST m**3`` (:func:`_least_squares_work`) is at most this, about 10 s of the
symmetric BLAS updates on one core of the benchmark machine (``benchmarks/results/newton.md``).
One pass of ``n m**2`` is what ``LinearRegression()``'s least-squares solve costs as well."""


def _newton_signal(problem: Problem) -> float:
    """``n mu / p``: how far the rows outweigh the privacy noise per parameter (the gradient noise of
    a Gaussian release of the mean is ``2 L / (n mu)`` per coordinate). Public."""
    mu = 1.0 / gaussian_noise_multiplier(float(problem.epsilon), float(problem.delta))
    return problem.n_samples * mu / problem.n_params


def _newton_work(problem: Problem) -> float:
    """Work of the default Newton plan (:class:`~.newton.PrivateNewton`) in multiply-adds of a
    gradient pass: ``n p (T + HESSIAN_COST p T_H)``, its ``T`` gradients and ``T_H`` Hessians."""
    newton = ALGORITHMS["newton"]
    passes = newton.planned_steps(problem) + HESSIAN_COST * problem.n_params * newton.planned_hessian_steps(problem)
    return float(problem.n_samples) * problem.n_params * passes


EIGH_COST = 10.0
"""Cost of one unit of ``m**3`` of a symmetric eigendecomposition (``numpy.linalg.eigh``) in units of
one unit of ``n m**2`` of the Hessian pass: measured about 0.2 ns against 0.023 ns on one core of
the benchmark machine (``m`` from 500 to 2000)."""


def _least_squares_work(problem: Problem, rows: str) -> float:
    """Work of the default Newton plan for the squared loss (one step, one Hessian): ``n m**2`` (the
    Hessian pass; not counted on Dask collections, whose one pass is the point) plus
    :data:`EIGH_COST` ``m**3`` (the eigendecomposition, whatever the rows)."""
    passes = 0.0 if rows == "dask" else float(problem.n_samples) * problem.n_params**2
    return passes + EIGH_COST * float(problem.n_params) ** 3


def select_algorithm(problem: Problem, constraint: str = "l2", rows: str = "dense") -> str:
    """The ``algorithm='auto'`` rule: one function, public quantities only.

    The rule below, each branch with its reason. The measurements behind them are in
    ``docs/user_guide/choosing.rst`` and ``benchmarks/results/`` (``goal.md``, ``holder_auto.md``,
    ``utility_*.md``, ``rates_full.md``, ``growth_rates_full.md``, ``newton.md``,
    ``least_squares.md``, ``auto_compute.md``, ``engine.md``), where a rerun updates them. Each
    candidate is weighed by its measured accuracy and its planned work (:func:`_affordable`):
    the most accurate one whose work fits the budget runs.

    * A non-Euclidean domain (``constraint='l1'`` or ``'lp'``): Private FTRL (``'ftrl'``), the
      only solver implemented for it (``ftrl_mirror.md`` §3.5).
    * A gradient that is Hölder- but not Lipschitz-continuous (q-hinge with q < 2, ``|r|^p`` with
      1 < p < 2; ``smoothness = inf``): DP-SGD-Gradient of Wang et al.
      (``'gradient_perturbation'``, ``wang_holder.md`` §2.4), which needs only the gradient bound
      for privacy and the Hölder exponent for its schedule; FTRL and output perturbation (whose
      stability-based noise dominates) measured worse on every Hölder problem.
    * The squared loss (``DPLpRegression(p=2)``) with ``delta > 0`` and work at most
      :data:`AUTO_NEWTON_WORK` (:func:`_least_squares_work`): the private Newton method
      (``'newton'``), whose default for this loss is one step from ``w_0 = 0``, i.e. sufficient
      statistics perturbation with the eigenvalue floor as adaptive ridge
      (:mod:`skdpsco.solvers.newton`). The Hessian of least squares is constant, so one released
      Hessian and one released gradient determine the step, in one pass over the rows; the
      gradient at the public start has a third of the sensitivity of noisy GD's gradients at the
      default radius. It had the lower error on every validation set and privacy level, by
      margins that grow with ``n`` (``benchmarks/results/least_squares.md``), so no signal
      threshold applies. Sparse rows take the same rule (the work cap excludes the wide
      vocabularies, whose dense Hessian would not fit).
    * The logistic and multinomial logistic losses with ``delta > 0``, ``n mu / p`` at least
      :data:`AUTO_NEWTON_SIGNAL` and work within the compute budget (:func:`_affordable`: at
      most :data:`AUTO_PASSES` passes of ``n p``, Hessians weighed by :data:`HESSIAN_COST`, or
      :data:`AUTO_FREE_WORK`; :func:`_newton_work`): the private
      Newton method (``'newton'``, :mod:`skdpsco.solvers.newton`). A standardised logistic
      problem is well conditioned for a second-order step: eight full-batch passes reach the
      accuracy of noisy GD's hundreds to thousands (its horizon grows with ``n`` until its
      flattest planned curvature has converged), and it converges where noisy GD stops short
      (large margins, a minimiser on the sphere). ``n mu / p`` measures how far the rows
      outweigh the noise per parameter: below the threshold the Hessian's noise and the last
      gradient's noise cost accuracy against noisy GD, which is fast at those ``n`` anyway. Its
      ``T_H`` Hessians cost ``n p**2`` each: where ``p`` makes them the bottleneck (``n = 10^6``,
      ``p = 101``: eight times ``LogisticRegression()``'s fit) the budget hands the fit to the
      one-pass solvers below, at a measured cost in test AUC of 0.0003-0.010 on the weak-signal
      rows of ``benchmarks/results/auto_compute.md`` (the larger at ``n = 3 10^5``). On Dask
      collections (``rows='dask'``) the compute budget does not apply: every step is a pass over data read from disk or across the network, and
      Newton's eight passes against noisy GD's planned hundreds to thousands (2000 at ``n = 2
      10^7``, ``p = 101``) decide the time.
    * Smooth losses, and kinked ones through their closed-form Gaussian smoothing, whose planned
      work ``n p T`` is within the compute budget (:func:`_affordable`): full-batch noisy gradient descent
      (``'noisy_gd'``, composition or last-iterate accounting, schedule of
      :func:`skdpsco.defaults.noisy_gd_schedule`), with or without an L2 penalty. It had the
      lowest excess risk at the defaults on every problem measured, synthetic and real.
      ``'objective_perturbation'`` is never chosen: it won only where both are within a few
      thousandths of the optimum on an ill-conditioned validation family, and on data whose
      geometry no public quantity reveals.
    * Sparse rows (``rows='sparse'``, a CSR input: its format is public) and Dask collections
      (``rows='dask'``: :data:`skdpsco._dask.ALGORITHMS`, the full-batch solvers and the one-pass
      solvers that stream):
      noisy GD whatever its planned work. The dense estimate ``n p T`` does not apply to sparse
      rows (a step costs the stored entries plus ``p`` noise draws), and on TF-IDF rows
      (``n = 2 10^4``, ``p = 2^18``, ``data_norm=1``, 2 seeds) noisy GD had the best accuracy, 0.88 /
      0.96 at epsilon 1 / 3 against Phased-SGD's 0.77 / 0.85 and Snowball's 0.76 / 0.89, every fit
      under 0.2 s on the compiled CSR loop (``benchmarks/results/scale.md`` for the defaults). On
      Dask collections ``'auto'`` never picks a one-pass solver: they read the partitions whole, and
      on a table stored class by class a partition-level shuffle leaves them far from the
      in-memory fit (``benchmarks/results/dask_stream.md``); the full-batch solvers do not
      depend on the order.
    * Above the compute budget, an L2 penalty (``l2_penalty > 0``) makes the objective strongly convex:
      the reduction of FKT20 §5 (``'strongly_convex'``, ``feldman.md`` §A8a), which is Phased-SGD
      itself when the penalty is too weak to need more than one epoch.
    * Otherwise Phased-SGD (FKT20 §4, last iterate of each phase), linear time; it matches or
      beats Snowball-SGD, the other linear-time optimal algorithm, on every problem measured.
    * Never the growth solvers of Asi, Levy & Duchi (``'localization'``, ``'epoch_growth'``), even
      under known growth: the strongly convex reduction had a lower excess risk on ridge
      logistic regression at every n measured. They remain the only solvers with a pure
      epsilon-DP (``delta = 0``) guarantee, which ``'auto'`` does not select.
    """
    if constraint != "l2":
        return "ftrl"
    if problem.constants.smoothness == math.inf:
        return "gradient_perturbation"
    if is_squared_loss(problem.loss) and problem.delta > 0 and _least_squares_work(problem, rows) <= AUTO_NEWTON_WORK:
        return "newton"
    if (
        type(problem.loss) in (LogisticLoss, MultinomialLogisticLoss)
        and problem.delta > 0
        and _newton_signal(problem) >= AUTO_NEWTON_SIGNAL
        and (rows == "dask" or _affordable(problem, _newton_work(problem)))
    ):
        return "newton"
    if rows in ("sparse", "dask") or _affordable(problem, _noisy_gd_work(problem)):
        return "noisy_gd"
    return "strongly_convex" if problem.l2_penalty > 0 else "phased_sgd"
