"""Objective perturbation for smooth GLM losses, with approximate minimisation and output noise.

References: Chaudhuri, Monteleoni & Sarwate 2011 (CMS11, Alg. 2, Thm 9); Kifer, Smith & Thakurta
2012 (KST12, Thm 2, Gaussian linear term); Iyengar et al. 2019 (approximate minima perturbation,
AMP, Alg. 1); Redberg, Koskela & Wang 2023 (the privacy loss of objective perturbation is that
of a Gaussian mechanism plus a bounded log-determinant term). The proof below is written out
for the replace-one relation used by the library (those papers use add/remove); every step is
derived here.

Mechanism
---------
Rows ``(x_i, y_i)``, ``||x_i|| <= B`` (intercept column included), loss ``phi(<w, x>, y)``
convex in the margin with ``|phi'| <= c1`` and ``0 <= phi'' <= c2`` (a.e.) on **all** of ``R``,
so that on all of ``R^p`` every per-row gradient has norm ``<= L = c1 B`` and every per-row
Hessian is ``phi'' x x^T`` with eigenvalue ``<= beta = c2 B**2`` (``skdpsco.losses``). Then

1. draw ``b ~ N(0, sigma_b**2 I_p)`` and let ``w_hat`` be the unique minimiser over ``R^p`` of
   ``F_D(w) = sum_i phi(<w, x_i>, y_i) + (n Lambda / 2) ||w||**2 + <b, w>``;
2. compute ``w_tilde`` with ``||w_tilde - w_hat|| <= tau`` (certified, below);
3. release ``Pi_R(w_tilde + xi)``, ``xi ~ N(0, sigma_o**2 I_p)``; the projection onto the ball of
   the problem's radius is post-processing.

``w`` contains the intercept coordinate (the estimators append a constant column), so **the
intercept is regularised** like every other coordinate: the strong convexity the proof needs
holds in every direction (CMS11 Thm 9 assumes it; the unregularised intercept of diffprivlib
violates it, ``shared/notes/utility-prototype.md`` Analysis 8).

Privacy of ``w_hat`` (exact minimiser)
--------------------------------------
``T_D(w) = -grad G_D(w)``, ``G_D = F_D - <b, .>``, is a bi-Lipschitz bijection of ``R^p`` (``G_D`` is
``n Lambda``-strongly convex with Lipschitz gradient), and ``w_hat = T_D^{-1}(b)``. By the area
formula the density of ``w_hat`` is ``p_D(w) = nu(T_D(w)) det H_D(w)`` (a.e.), ``nu`` the density of
``b`` and ``H_D = A + phi''(<w, x>, y) x x^T``, where ``A`` collects the ``n - 1`` common rows plus
``n Lambda I`` (``A >= n Lambda I``). For ``D'`` with the last row replaced by ``(x', y')``:

* **log-determinant.** By the matrix determinant lemma
  ``det H_D / det H_D' = (1 + a x^T A^{-1} x) / (1 + a' x'^T A^{-1} x')`` with both
  ``a x^T A^{-1} x`` and ``a' x'^T A^{-1} x'`` in ``[0, beta / (n Lambda)]``: the log-ratio lies in
  ``[-eps_0, eps_0]``, ``eps_0 = log(1 + beta / (n Lambda))``. (One term per side: the common
  ``A`` makes replace-one no worse than add/remove here; CMS11 bound the rank-2 difference by
  ``(1 + beta / (n Lambda))**2``.)
* **linear term.** ``T_D'(w) = T_D(w) + Delta(w)``, ``Delta(w) = s u - s' v`` with
  ``u = x / ||x||``, ``v = x' / ||x'||``, ``s = phi'(<w, x>, y) ||x||``, ``s' = phi'(<w, x'>, y') ||x'||``,
  ``|s|, |s'| <= L``. Under ``D``, ``b = T_D(w_hat) ~ N(0, sigma_b**2 I)``, and
  ``log nu(b) / nu(b + Delta) = (2 <b, Delta> + ||Delta||**2) / (2 sigma_b**2)``. This is convex in
  ``(s, s')``, so it is at most its maximum over the corners ``(+-L, +-L)``, where
  ``Delta = +-L d_k``, ``d_1 = u - v``, ``d_2 = u + v``: orthogonal, ``||d_1||**2 + ||d_2||**2 = 4``.
  With ``Z_k = <b, d_k> / (sigma_b ||d_k||)`` independent standard normals and
  ``mu_k = L ||d_k|| / sigma_b <= mu_b = 2 L / sigma_b``, the privacy loss is at most
  ``eps_0 + max_k (mu_k |Z_k| + mu_k**2 / 2)``.

The released point adds ``xi``: conditionally on ``w_hat = w`` the solver is run on
``(D, T_D(w))`` resp. ``(D', T_D'(w))``, both with exact minimiser ``w``, so the conditional means
of ``w_tilde + xi`` differ by at most ``2 tau``: a Gaussian mechanism with
``mu_o = 2 tau / sigma_o`` composed adaptively with the release of ``w_hat`` (Iyengar et al.
2019, Thm 1 argument); the released model is post-processing of ``(w_hat, w_tilde + xi)``.

Conversion (:class:`ObjectivePerturbationDpEvent`, :func:`objective_perturbation_epsilon`)
------------------------------------------------------------------------------------------
For every non-negative non-decreasing ``h``: ``h(max(a, c)) <= h(a) + h(c)`` and
``E h(mu |Z| + m) = 2 E[h(mu Z + m) 1{Z > 0}] <= 2 E h(mu Z + m)``; the Gaussian hockey-stick
divergence is non-decreasing in ``mu``. With ``h(l) = (1 - e^(eps - l))_+`` (the hockey-stick
divergence is ``E h(privacy loss)``) this gives, for every real ``eps``,

    ``delta(eps) <= 4 delta_G(eps - eps_0)``,

``delta_G`` the curve of the Gaussian event composed of ``gaussian_event(sigma_b, 2 L)`` and
``gaussian_event(sigma_o, 2 tau)``. The same two inequalities hold inside any adaptive
composition (each step only uses that ``h`` is non-negative and non-decreasing), so ``k``
objective-perturbation releases composed with anything else satisfy
``delta(eps) <= 4**k delta_rest(eps - sum eps_0)``: the conversion adds the offsets and divides
delta by ``4**k``. Symmetric in ``D, D'``.

Approximate minimisation (certified, fixed public work)
-------------------------------------------------------
Divided by ``n``, ``F_D`` is ``(beta + Lambda)``-smooth and ``Lambda``-strongly convex. Started at
``w_0 = -b / (n Lambda)`` (the minimiser of the quadratic part), ``||w_0 - w_hat|| <= L / Lambda``
(``w_hat = w_0 - mean grad phi(w_hat) / Lambda``) and ``||grad F_D(w_0) / n|| <= L``, both public,
whatever ``b``: :func:`~skdpsco.solvers.erm.certified_iterations` gives a public iteration count
after which V-FISTA is within ``tau`` of ``w_hat`` on every dataset and every ``b``; the certificate
is checked on the returned point and an uncertified point is never released
(:class:`~skdpsco.solvers.erm.CertificateError`).

Public choices
--------------
* ``Lambda = max(l2_penalty, Lambda_rule)`` (or a fixed ``regularization``): the problem's ridge
  coefficient is the user's regularisation; when it is too weak for the rule it is **raised**,
  and ``info['regularization_source']`` says which. ``Lambda_rule`` (:func:`default_regularization`)
  minimises the excess-risk bound ``Lambda R**2 / 2 + p sigma_b**2 / (2 n**2 Lambda)`` of the
  regularised objective (bias at ``||w*|| <= R`` plus the linear term's cost with no curvature
  from the data; cf. CMS11 Thm 18, KST12 Thm 4), with ``sigma_b`` calibrated after paying
  ``eps_0(Lambda)``.
* Output noise: a share :data:`OUTPUT_NOISE_SHARE` of ``mu**2`` (``mu_o**2 = s mu**2``,
  ``mu_b**2 = (1 - s) mu**2``) and ``sigma_o = OUTPUT_NOISE_RATIO sigma_b / (n (beta + Lambda))``,
  a tenth of the smallest displacement the linear term causes (``||H_D / n|| <= beta + Lambda``):
  the output noise adds at most 1% to the variance of the release; ``tau = sigma_o mu_o / 2``.

Scope (refused with a clear ``ValueError``): multiclass parameters (the multinomial Hessian
has rank up to ``K - 1`` per row: not proven here), losses without a Lipschitz gradient
(``smoothness`` ``None`` or ``inf``: pass the Gaussian-smoothed loss, which the estimators do for
hinge), losses whose derivative is unbounded on ``R`` (squared hinge: objective perturbation
minimises over all of ``R^p``), and regression losses (the public ``y_bound`` is not carried
by :class:`~skdpsco.solvers.Problem`; see :func:`row_norm_bound`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import dp_accounting
import numpy as np
from dp_accounting.pld import privacy_loss_mechanism
from dp_accounting.pld.common import DifferentialPrivacyParameters
from scipy.optimize import minimize_scalar

from .. import _noise
from ..accounting import (
    DELTA_DIVISOR,
    ObjectivePerturbationDpEvent,
    calibrate_noise,
    gaussian_event,
    objective_perturbation_epsilon,
)
from ._core import SolverResult, margin_gradient, project_to_ball
from .erm import certified_iterations, certified_minimize

if TYPE_CHECKING:
    from ._problem import Problem

__all__ = [
    "DELTA_DIVISOR",
    "ObjectivePerturbation",
    "ObjectivePerturbationDpEvent",
    "ObjectivePerturbationPlan",
    "default_regularization",
    "logdet_epsilon",
    "objective_perturbation_epsilon",
    "row_norm_bound",
]


OUTPUT_NOISE_SHARE = 0.01
"""``mu_o**2 / mu**2``: the share of the Gaussian budget spent on the output noise."""

OUTPUT_NOISE_RATIO = 0.1
"""``sigma_o`` over the smallest per-coordinate displacement ``sigma_b / (n (beta + Lambda))`` of the
exact minimiser caused by the linear term."""

_LOG_OFFSET_FRACTION_BOUNDS = (math.log(1e-3), math.log(0.9))
"""Range of ``log(eps_0 / epsilon)`` searched by the default rule."""


# -- accounting (the event and its conversion live in skdpsco.accounting) ---------------------------


def logdet_epsilon(smoothness: float, n_samples: int, regularization: float) -> float:
    """``eps_0 = log(1 + beta / (n Lambda))``: bound on the log-determinant ratio (module docstring)."""
    return math.log1p(smoothness / (n_samples * regularization))


def _gaussian_part(noise_multiplier: float) -> dp_accounting.DpEvent:
    """Gaussian part as a function of ``x = 1 / mu`` (``mu**2 = mu_b**2 + mu_o**2``), library convention."""
    return dp_accounting.ComposedDpEvent(
        [
            dp_accounting.GaussianDpEvent(noise_multiplier / math.sqrt(1.0 - OUTPUT_NOISE_SHARE)),
            dp_accounting.GaussianDpEvent(noise_multiplier / math.sqrt(OUTPUT_NOISE_SHARE)),
        ]
    )


# -- public constants --------------------------------------------------------------------------------


def row_norm_bound(problem: Problem) -> float:
    """The public row bound ``B`` for which ``problem.constants`` were computed.

    :class:`~skdpsco.solvers.Problem` carries the loss constants at the domain radius ``R``, but
    objective perturbation minimises over all of ``R^p`` and needs them on ``R^p``, hence ``B``.
    For the binary losses ``B -> loss.constants(B, R).lipschitz`` is continuous and strictly
    increasing, so ``B`` is found by bisection; the upper end of the final bracket is returned
    (it is ``>= B``, and every constant is non-decreasing in ``B``), after checking that the
    loss's constants there reproduce ``problem.constants``. (Replace by a ``data_norm`` field of
    ``Problem`` when it has one.)

    Raises
    ------
    ValueError
        If ``problem.constants`` are not the loss's constants at any row bound.
    """
    loss, radius, target = problem.loss, float(problem.radius), float(problem.constants.lipschitz)

    def lipschitz(B: float) -> float:
        return float(loss.constants(B, radius).lipschitz)

    lo, hi = 1e-300, 1.0
    while lipschitz(hi) < target:
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            raise ValueError(f"No row bound gives the Lipschitz constant {target!r} of the loss {loss!r}.")
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        lo, hi = (mid, hi) if lipschitz(mid) < target else (lo, mid)
    found = loss.constants(hi, radius)
    if not (
        math.isclose(found.lipschitz, target, rel_tol=1e-9)
        and math.isclose(found.smoothness, problem.constants.smoothness, rel_tol=1e-9)
    ):
        raise ValueError(
            f"problem.constants {problem.constants!r} are not those of the loss {loss!r} at any row "
            "bound; build them with loss.constants(data_norm, radius)."
        )
    return hi


@dataclass(frozen=True)
class _GlobalConstants:
    lipschitz: float  # L = sup |phi'| B on R^p
    smoothness: float  # beta = sup phi'' B**2 on R^p


def _global_constants(problem: Problem) -> _GlobalConstants:
    """``L`` and ``beta`` on all of ``R^p``; a clear error for every configuration the proof does not cover."""
    loss = problem.loss
    if len(problem.coef_shape) != 1:
        raise ValueError(
            f"objective_perturbation supports binary classification only; got the {loss.task} loss "
            f"{loss.name!r} with parameter shape {tuple(problem.coef_shape)}. The multinomial Hessian has "
            "rank up to K - 1 per row, which its privacy proof does not cover: use one-vs-rest binary "
            "models (DPHingeSVM) or another algorithm."
        )
    if loss.task != "binary":
        raise ValueError(
            f"objective_perturbation supports binary classification only; got the {loss.task} loss "
            f"{loss.name!r}. Its proof needs a derivative bounded on all of R, which a regression loss "
            "has only through the public y_bound that it does not receive here: choose another algorithm."
        )
    smoothness = problem.constants.smoothness
    if smoothness is None or not math.isfinite(smoothness):
        raise ValueError(
            f"objective_perturbation needs a smooth loss (Lipschitz gradient); {loss.name!r} is not. "
            "Use its Gaussian-smoothed version (skdpsco.smoothing.smooth), as the estimators do for hinge."
        )
    constants = loss.constants(row_norm_bound(problem), None)
    if not (0 < constants.lipschitz < math.inf and 0 < constants.smoothness < math.inf):
        raise ValueError(
            f"objective_perturbation minimises over all of R^p and needs a loss whose derivative is "
            f"bounded on R^p; {loss.name!r} has L={constants.lipschitz!r} there. Use a Lipschitz loss "
            "(logistic, smoothed hinge) or another algorithm."
        )
    return _GlobalConstants(float(constants.lipschitz), float(constants.smoothness))


# -- plan -------------------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _analytic_noise_multiplier(epsilon: float, delta: float) -> float:
    """``1 / mu`` of the Gaussian mechanism meeting (epsilon, delta), by ``dp_accounting``'s exact
    closed form (Balle & Wang 2018); used by the default rule only, the guarantee is calibrated
    on the released event itself."""
    loss = privacy_loss_mechanism.GaussianPrivacyLoss.from_privacy_guarantee(
        DifferentialPrivacyParameters(epsilon, delta), sensitivity=1.0
    )
    return float(loss.standard_deviation)


def default_regularization(
    n_samples: int, n_params: int, lipschitz: float, smoothness: float, radius: float, epsilon: float, delta: float
) -> float:
    """``Lambda_rule``: minimiser of the excess-risk bound over the split of epsilon (module docstring).

    For ``eps_0 = f epsilon``, ``Lambda = beta / (n (e**eps_0 - 1))`` (so that
    ``log(1 + beta / (n Lambda)) = eps_0``), ``sigma_b = 2 L x / sqrt(1 - s)`` with ``x = 1 / mu`` the
    Gaussian noise multiplier at ``(epsilon - eps_0, delta / 4)``, and the bound
    ``Lambda R**2 / 2 + p sigma_b**2 / (2 n**2 Lambda)``, minimised over ``log f`` in
    ``[log 1e-3, log 0.9]`` by bounded Brent search (deterministic: a public function of its arguments).
    """

    def split(log_fraction: float) -> tuple[float, float]:
        offset = math.exp(log_fraction) * epsilon
        lam = smoothness / (n_samples * math.expm1(offset))
        x = _analytic_noise_multiplier(epsilon - offset, delta / DELTA_DIVISOR)
        sigma_b = 2.0 * lipschitz * x / math.sqrt(1.0 - OUTPUT_NOISE_SHARE)
        return lam * radius**2 / 2.0 + n_params * sigma_b**2 / (2.0 * n_samples**2 * lam), lam

    best = minimize_scalar(
        lambda t: split(t)[0], bounds=_LOG_OFFSET_FRACTION_BOUNDS, method="bounded", options={"xatol": 0.02}
    )
    return split(float(best.x))[1]


@dataclass(frozen=True)
class ObjectivePerturbationPlan:
    """Public parameters of one objective-perturbation fit, fixed before the data is read.

    Attributes
    ----------
    n_samples : int
    regularization : float
        ``Lambda``, the ridge coefficient of the perturbed objective (mean form).
    regularization_source : {'rule', 'l2_penalty', 'fixed'}
        Where ``Lambda`` came from (``'rule'`` when the rule raised a weaker ``l2_penalty``).
    lipschitz, smoothness : float
        ``L`` and ``beta`` of the loss on ``R^p``.
    epsilon_offset : float
        ``eps_0 = log(1 + beta / (n Lambda))``.
    noise_multiplier : float
        ``x = 1 / mu`` of the Gaussian part.
    linear_noise_std : float
        ``sigma_b``: standard deviation of ``b`` in the sum form ``sum_i phi_i + <b, w>``.
    output_noise_std : float
        ``sigma_o``.
    tolerance : float
        ``tau``, the certified distance to the exact minimiser.
    n_iterations : int
        Public V-FISTA iteration count.
    """

    n_samples: int
    regularization: float
    regularization_source: str
    lipschitz: float
    smoothness: float
    epsilon_offset: float
    noise_multiplier: float
    linear_noise_std: float
    output_noise_std: float
    tolerance: float
    n_iterations: int

    @property
    def dp_event(self) -> ObjectivePerturbationDpEvent:
        """Offset ``eps_0`` plus the Gaussian events of ``b`` (sensitivity ``2 L``) and ``xi`` (``2 tau``)."""
        gaussian = dp_accounting.ComposedDpEvent(
            [
                gaussian_event(self.linear_noise_std, 2.0 * self.lipschitz),
                gaussian_event(self.output_noise_std, 2.0 * self.tolerance),
            ]
        )
        return ObjectivePerturbationDpEvent(gaussian, self.epsilon_offset)

    @property
    def n_gradients(self) -> int:
        """``n_iterations + 1`` full gradients (the last checks the certificate)."""
        return (self.n_iterations + 1) * self.n_samples

    def info(self) -> dict:
        return {
            "algorithm": "objective_perturbation",
            "regularization": self.regularization,
            "regularization_source": self.regularization_source,
            "epsilon_offset": self.epsilon_offset,
            "noise_multiplier": self.noise_multiplier,
            "linear_noise_std": self.linear_noise_std,
            "output_noise_std": self.output_noise_std,
            "tolerance": self.tolerance,
            "n_iterations": self.n_iterations,
        }


def _choose_regularization(problem: Problem, c: _GlobalConstants, fixed: float | None) -> tuple[float, str]:
    n, epsilon = int(problem.n_samples), float(problem.epsilon)
    if fixed is not None:
        lam, source = float(fixed), "fixed"
    else:
        rule = default_regularization(
            n, problem.n_params, c.lipschitz, c.smoothness, float(problem.radius), epsilon, float(problem.delta)
        )
        penalty = float(problem.l2_penalty)
        lam, source = (penalty, "l2_penalty") if penalty >= rule else (rule, "rule")
    if logdet_epsilon(c.smoothness, n, lam) >= epsilon:
        minimum = c.smoothness / (n * math.expm1(epsilon))
        raise ValueError(
            f"regularization Lambda={lam:.4g} is too weak for epsilon={epsilon:g}: the log-determinant "
            f"term log(1 + beta / (n Lambda)) alone exceeds epsilon. Objective perturbation needs "
            f"Lambda > beta / (n (e**epsilon - 1)) = {minimum:.4g}; raise it, use more rows or a larger epsilon."
        )
    return lam, source


@lru_cache(maxsize=256)
def _plan(problem: Problem, fixed: float | None) -> ObjectivePerturbationPlan:
    if not (problem.n_samples >= 1 and 0 < problem.epsilon < math.inf and 0 < problem.delta < 1):
        raise ValueError("objective_perturbation needs n_samples >= 1, epsilon > 0 and delta in (0, 1).")
    c = _global_constants(problem)
    n = int(problem.n_samples)
    lam, source = _choose_regularization(problem, c, fixed)
    offset = logdet_epsilon(c.smoothness, n, lam)
    x = calibrate_noise(
        _gaussian_part,
        float(problem.epsilon) - offset,
        float(problem.delta) / DELTA_DIVISOR,
    )
    linear_std = 2.0 * c.lipschitz * x / math.sqrt(1.0 - OUTPUT_NOISE_SHARE)
    output_std = OUTPUT_NOISE_RATIO * linear_std / (n * (c.smoothness + lam))
    tolerance = output_std * math.sqrt(OUTPUT_NOISE_SHARE) / (2.0 * x)  # mu_o = 2 tau / sigma_o
    n_iterations = certified_iterations(c.smoothness + lam, lam, tolerance, c.lipschitz / lam, c.lipschitz)
    plan = ObjectivePerturbationPlan(
        n, lam, source, c.lipschitz, c.smoothness, offset, x, linear_std, output_std, tolerance, n_iterations
    )
    spent = objective_perturbation_epsilon(plan.dp_event, float(problem.delta))
    if spent > float(problem.epsilon) * (1.0 + 1e-9):
        raise AssertionError(f"objective perturbation plan spends epsilon={spent} above {problem.epsilon}.")
    return plan


def run_objective_perturbation(
    plan: ObjectivePerturbationPlan, X: np.ndarray, y: np.ndarray, problem: Problem, rng: np.random.Generator
) -> SolverResult:
    """Draw ``b``, minimise the perturbed objective to the certified tolerance, add ``xi``, project."""
    if X.shape[0] != plan.n_samples:
        raise ValueError(f"The plan is for {plan.n_samples} rows; got {X.shape[0]}.")
    linear_rng, output_rng = rng.spawn(2)
    shape = tuple(problem.coef_shape)
    lam, n = plan.regularization, plan.n_samples
    shift = _noise.gaussian_noise(linear_rng, plan.linear_noise_std, shape) / n  # b / n, mean form
    loss_gradient = margin_gradient(problem.loss, lam)

    def gradient(w):
        return loss_gradient(w, X, y) + shift

    w = certified_minimize(
        gradient, -shift / lam, None, plan.smoothness + lam, lam, plan.tolerance, plan.n_iterations
    )
    released = w + _noise.release_noise(w, plan.output_noise_std, output_rng)
    coef = project_to_ball(released, float(problem.radius))
    return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=plan.n_gradients, info=plan.info())


@dataclass(frozen=True)
class ObjectivePerturbation:
    """Objective perturbation with approximate minimisation and output noise (module docstring).

    Parameters
    ----------
    regularization : float or None, default=None
        ``Lambda`` of the perturbed objective. ``None``: ``max(l2_penalty, Lambda_rule)``
        (:func:`default_regularization`). A fixed value too weak for the budget
        (``log(1 + beta / (n Lambda)) >= epsilon``) is refused.
    """

    requires_smooth_loss = True  # the density argument needs a Lipschitz gradient

    regularization: float | None = None

    def __post_init__(self):
        lam = self.regularization
        if lam is not None and not (isinstance(lam, (int, float)) and 0 < lam < math.inf):
            raise ValueError(f"regularization must be None or a finite number > 0; got {lam!r}.")

    def plan(self, problem: Problem) -> ObjectivePerturbationPlan:
        return _plan(problem, None if self.regularization is None else float(self.regularization))

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator) -> SolverResult:
        return run_objective_perturbation(plan, X, y, problem, rng)
