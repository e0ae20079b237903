"""Private Newton method for the logistic and multinomial logistic losses.

Every iteration releases the full-batch gradient and the full-batch Hessian with Gaussian noise,
and the step is computed from the released values only: the noisy Newton step of Avella-Medina,
Bradshaw & Loh 2021 (the "private Newton" baseline of Ganesh, Haghifam, Steinke & Thakurta 2023,
"Faster differentially private convex optimization via second-order methods", whose experiments
report second-order methods 10-40 times faster than DP-GD on logistic regression), with a
Hessian floor at the noise level, an average of the latest Hessians, and steps constrained to
the public ball in the Hessian's metric. Ganesh et al.'s own "double noise" mechanism (exact
Hessian, noise on the Newton direction, with a sensitivity that grows with the released
gradient's norm over the square of the eigenvalue floor) is not implemented here.

Algorithm
---------
From ``w_0 = 0``, for ``t = 1 .. T``:

1. release ``g_t = grad F_S(w_{t-1}) + xi_t``, ``xi_t ~ N(0, s_t**2 I)``;
2. at the first ``T_H`` steps, release ``H_t = hess F_S(w_{t-1}) + E_t``, ``E_t`` a symmetric
   Gaussian matrix (below);
3. (post-processing) ``Hbar_t`` = the inverse-variance weighted average of the last
   :attr:`PrivateNewton.hessian_window` released Hessians (the same ones as at the previous step
   after step ``T_H``); its eigenvalues below the floor ``lambda_t = floor_factor sqrt(2 m)
   sbar_t`` are raised to ``lambda_t`` (``m`` the size of the matrix, ``sbar_t`` the noise level
   of the average: ``sqrt(2 m) sbar_t`` is the edge of the semicircle of its noise, so directions
   below it are noise), and the ridge ``alpha I`` of an explicit L2 penalty is added: ``A_t``;
4. (post-processing) ``w_t = argmin_{||v|| <= R} <g_t + alpha w_{t-1}, v - w_{t-1}> + (v -
   w_{t-1})^T A_t (v - w_{t-1}) / 2``: the Newton step projected onto the ball of radius ``R`` in
   the metric of ``A_t`` (exactly, by the secular equation of the eigen-decomposition), which
   converges to the minimiser on the ball also when it lies on the sphere (a Euclidean
   projection of the Newton step does not);

and ``w_T`` is released. ``F_S(w) = (1 / n) sum_i phi(<w, x_i>, y_i)`` is the average loss on the
clipped rows (the intercept column included); the penalty ``alpha ||w||**2 / 2`` is public given
``w`` and is added to the released values, never to the data's.

Multinomial: ``W`` has shape ``(K, p)`` and the Hessian is ``(Kp, Kp)``. The loss is invariant
under adding one vector to every row of ``W``, so the gradient and Hessian vanish along the
subspace ``N = {1_K v^T}``; the released gradient and Hessian are projected onto the orthogonal
complement of ``N`` (post-processing that removes pure noise), and the steps stay in it.

Privacy: composition of Gaussian mechanisms
-------------------------------------------
Neighbouring datasets differ in one row (replace-one, ``n`` public).

* **Gradient**, sensitivity ``Delta_g = 2 L / n``: the averaged gradients of two neighbours at
  the same ``w`` differ by ``(grad f(w, z_i) - grad f(w, z'_i)) / n``, of norm at most ``2 L / n``
  with ``L`` the loss's per-row gradient bound on the ball (``problem.constants.lipschitz``; the
  ridge term is the same on both datasets and cancels, as in :mod:`skdpsco.solvers.noisy_gd`).
* **Hessian**, Frobenius sensitivity ``Delta_H = sqrt(2) b / n``, ``b`` a bound on the Frobenius
  norm of one row's Hessian (:func:`row_hessian_bound`). The averaged Hessians differ by ``(h -
  h') / n`` with ``h = hess f(w, z_i)``, ``h' = hess f(w, z'_i)``; both are positive semidefinite
  (the losses are convex), so ``<h, h'>_F = tr(h h') >= 0`` and ``||h - h'||_F**2 = ||h||_F**2 +
  ||h'||_F**2 - 2 <h, h'>_F <= 2 b**2``. (The triangle inequality would give ``2 b``.)
* **Weighted rows** (:class:`~skdpsco.losses.WeightedLoss`, the estimators' ``sample_weight``):
  row ``i``'s loss times ``c_i`` in ``[0, 1]`` has gradient norm ``c_i ||grad f|| <= L`` and Hessian
  ``c_i h``, positive semidefinite with ``||c_i h||_F <= b``: both bounds, and the two
  sensitivities, hold unchanged.
* **Vectorisation of a symmetric matrix.** The release is ``u(H) + N(0, s**2 I)`` with ``u(H) =
  (H_ii, sqrt(2) H_ij for i < j)``, an isometry from the symmetric matrices with the Frobenius
  norm onto ``R^{m (m + 1) / 2}`` (an off-diagonal entry appears twice in ``||H||_F**2``, once in
  ``u``, with weight 2): the Euclidean sensitivity of ``u(H)`` is exactly ``Delta_H``. Mapped
  back, ``E_ii ~ N(0, s**2)`` and ``E_ij = E_ji ~ N(0, s**2 / 2)``. (Releasing the plain upper
  triangle with the same sensitivity would put variance ``s**2`` on every off-diagonal entry,
  twice as much.)
* **Composition.** Each release is a Gaussian mechanism, chosen adaptively from the earlier
  releases; a Gaussian mechanism of sensitivity ``Delta`` and noise ``s`` is ``Delta / s``-GDP,
  and ``mu_i``-GDP mechanisms compose adaptively to ``sqrt(sum mu_i**2)``-GDP exactly (Dong, Roth
  & Su 2022, Cor. 3.3). The event is the composition of the ``T + T_H`` events
  :func:`~skdpsco.accounting.gaussian_event` ``(s_i, Delta_i)``, which
  :func:`~skdpsco.accounting.epsilon_of` converts exactly.

Everything after the releases (averaging, floor, ridge, projection onto ``N``'s complement, the
metric projection) is post-processing of released values and public quantities.

Budget rule (public, fixed by the plan before the data is read): ``mu = 1 / z`` is the ``mu`` of
one Gaussian release meeting (epsilon, delta) (``z`` =
:func:`~skdpsco.accounting.gaussian_noise_multiplier`). A share ``hessian_share`` of ``mu**2`` is
split equally over the ``T_H`` Hessian releases; of the rest, ``final_share`` goes to the last
gradient, whose noise the release carries (the noise of the earlier ones is corrected by the
later steps), and the remainder is split equally over the ``T - 1`` others. Each release gets
``mu_i = sqrt(share_i) mu`` and noise ``s_i = Delta_i / mu_i``: ``sum mu_i**2 = mu**2``.

The defaults, and the rule of :func:`skdpsco.solvers.select_algorithm` that picks this solver,
were chosen on validation problems; the measurements are in ``benchmarks/results/newton.md``
(``python -m benchmarks.newton``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dp_accounting
import numpy as np
from scipy import sparse
from scipy.optimize import brentq
from scipy.special import expit, softmax

from ..accounting import epsilon_of, gaussian_event, gaussian_noise_multiplier
from ..losses import LogisticLoss, MultinomialLogisticLoss, WeightedLoss
from ._core import SolverResult, _dask, is_dask, project_to_ball, release_noise, scale_sparse_rows
from .noisy_gd import _NOISE_SAFETY  # the same round-up of a closed-form noise level

if TYPE_CHECKING:  # a run-time import would be circular: the registry imports this module
    from . import Problem

__all__ = [
    "NewtonPlan",
    "PrivateNewton",
    "gradient_sensitivity",
    "hessian_sensitivity",
    "pack_symmetric",
    "row_hessian_bound",
    "unpack_symmetric",
]

HESSIAN_BLOCK = 8192
"""Rows per block of the gradient and Hessian pass (bounds the temporary of the weighted rows)."""

SUPPORTED_LOSSES = (LogisticLoss, MultinomialLogisticLoss)


def row_hessian_bound(problem: Problem) -> float:
    """``b``: a bound on ``||hess_w f(w, (x, y))||_F`` over every row and every ``w`` of the ball.

    * :class:`~skdpsco.losses.LogisticLoss`: ``hess = phi''(z) x x^T`` with ``0 <= phi'' =
      sigma(z) sigma(-z) <= 1 / 4``, of Frobenius norm ``phi''(z) ||x||**2 <= B**2 / 4``, which is
      the loss's ``beta`` (``problem.constants.smoothness``).
    * :class:`~skdpsco.losses.MultinomialLogisticLoss`: ``hess = M kron (x x^T)`` with ``M =
      diag(s) - s s^T``, ``s`` = softmax of the margins, so ``||hess||_F = ||M||_F ||x||**2``.
      With ``q = sum s_k**2`` and ``c = sum s_k**3``: ``||M||_F**2 = q - 2 c + q**2``, and ``c >=
      q**2`` (Jensen: ``sum_k s_k s_k**2 >= (sum_k s_k s_k)**2``), so ``||M||_F**2 <= q (1 - q) <=
      1 / 4``: ``||hess||_F <= B**2 / 2``, the loss's ``beta`` (attained at ``s = (1/2, 1/2, 0,
      ...)``).

    A :class:`~skdpsco.losses.WeightedLoss` of one of them has the same bound (``c h`` with ``c`` in
    ``[0, 1]``).

    Raises
    ------
    ValueError
        For any other loss, naming the algorithms that train it.
    """
    loss = problem.loss.base if isinstance(problem.loss, WeightedLoss) else problem.loss
    if type(loss) not in SUPPORTED_LOSSES:
        raise ValueError(
            f"algorithm='newton' supports the logistic and multinomial logistic losses only (their "
            f"Hessian sensitivity is derived in skdpsco.solvers.newton); got the loss {loss.name!r}. "
            "Use algorithm='noisy_gd' or 'auto' for it."
        )
    return float(problem.constants.smoothness)


def gradient_sensitivity(problem: Problem) -> float:
    """``2 L / n``: replace-one ``l2`` sensitivity of the averaged loss gradient (module docstring)."""
    return 2.0 * float(problem.constants.lipschitz) / problem.n_samples


def hessian_sensitivity(problem: Problem) -> float:
    """``sqrt(2) b / n``: replace-one Frobenius sensitivity of the averaged loss Hessian, hence the
    ``l2`` sensitivity of its isometric vectorisation :func:`pack_symmetric` (module docstring)."""
    return math.sqrt(2.0) * row_hessian_bound(problem) / problem.n_samples


def _off_diagonal_weights(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, columns = np.triu_indices(size)
    return rows, columns, np.where(rows == columns, 1.0, math.sqrt(2.0))


def pack_symmetric(matrix: np.ndarray) -> np.ndarray:
    """``u(H) = (H_ii, sqrt(2) H_ij for i < j)`` (upper triangle, row by row): ``||u(H)||_2 =
    ||H||_F`` for every symmetric ``H``."""
    rows, columns, weights = _off_diagonal_weights(matrix.shape[0])
    return weights * matrix[rows, columns]


def unpack_symmetric(vector: np.ndarray, size: int) -> np.ndarray:
    """The symmetric matrix ``H`` with ``pack_symmetric(H) = vector``."""
    rows, columns, weights = _off_diagonal_weights(size)
    matrix = np.empty((size, size))
    matrix[rows, columns] = vector / weights
    matrix[columns, rows] = matrix[rows, columns]
    return matrix


@dataclass(frozen=True)
class NewtonPlan:
    """A private Newton schedule: public quantities only, fixed before the data is read.

    Attributes
    ----------
    n_samples, n_steps, hessian_steps : int
        ``n``, ``T`` and ``T_H`` (Hessians are released at the first ``T_H`` steps).
    gradient_noise : tuple of float
        ``s_t`` of the ``T`` gradient releases.
    hessian_noise : tuple of float
        Noise of the ``T_H`` Hessian releases (per coordinate of :func:`pack_symmetric`).
    dp_event : dp_accounting.DpEvent
        The composition of every release.
    """

    n_samples: int
    n_steps: int
    hessian_steps: int
    gradient_noise: tuple
    hessian_noise: tuple
    dp_event: object


def _shares(n_steps: int, hessian_steps: int, hessian_share: float, final_share: float):
    """Shares of ``mu**2`` of the gradient and Hessian releases (module docstring)."""
    gradient = np.full(n_steps, (1.0 - hessian_share) * (1.0 - final_share) / max(n_steps - 1, 1))
    gradient[-1] = (1.0 - hessian_share) * (final_share if n_steps > 1 else 1.0)
    return gradient, np.full(hessian_steps, hessian_share / hessian_steps)


def plan_newton(problem: Problem, n_steps: int, hessian_steps: int, hessian_share: float, final_share: float) -> NewtonPlan:
    """Plan the private Newton method, (epsilon, delta)-DP exactly for ``problem`` (module docstring)."""
    gradient_delta, hessian_delta = gradient_sensitivity(problem), hessian_sensitivity(problem)
    if not 0 < float(problem.radius) < math.inf:
        raise ValueError(f"algorithm='newton' needs a bounded domain: radius must be finite and > 0; got {problem.radius!r}.")
    if problem.n_samples < 1:
        raise ValueError(f"algorithm='newton' needs n_samples >= 1; got n_samples={problem.n_samples}.")
    epsilon, delta = float(problem.epsilon), float(problem.delta)
    mu = 1.0 / gaussian_noise_multiplier(epsilon, delta)
    gradient_shares, hessian_shares = _shares(n_steps, hessian_steps, hessian_share, final_share)
    gradient_noise = tuple(float(gradient_delta / (mu * math.sqrt(s)) * _NOISE_SAFETY) for s in gradient_shares)
    hessian_noise = tuple(float(hessian_delta / (mu * math.sqrt(s)) * _NOISE_SAFETY) for s in hessian_shares)
    event = dp_accounting.ComposedDpEvent(
        [gaussian_event(s, gradient_delta) for s in gradient_noise]
        + [gaussian_event(s, hessian_delta) for s in hessian_noise]
    )
    if epsilon_of(event, delta) > epsilon:
        raise AssertionError(f"The Newton plan spends more than epsilon={epsilon}.")
    return NewtonPlan(int(problem.n_samples), n_steps, hessian_steps, gradient_noise, hessian_noise, event)


def loss_derivatives(w: np.ndarray, X: np.ndarray, y: np.ndarray, loss, hessian: bool):
    """Averaged loss gradient at ``w`` (shape of ``w``) and, with ``hessian``, the averaged loss
    Hessian in the flattened parameter (``(w.size, w.size)``; ``None`` otherwise), in one pass over
    row blocks of :data:`HESSIAN_BLOCK`, each block's margins computed once. The gradient is
    :func:`~._core.margin_gradient`'s formula (``tests/test_newton.py`` checks they agree); with a
    :class:`~skdpsco.losses.WeightedLoss` (``y`` its :func:`~skdpsco.losses.weighted_targets`) each
    row's Hessian is multiplied by its weight, as its gradient is."""
    if is_dask(X):  # one pass of per-block sums (:mod:`skdpsco._dask`)
        gradient, total = _dask().block_sum(summed_loss_derivatives, X, y, extra=(w, loss, hessian))
    else:
        gradient, total = summed_loss_derivatives(X, y, w, loss, hessian)
    n = X.shape[0]
    return gradient / n, (total / n if hessian else None)


def summed_loss_derivatives(X, y, w: np.ndarray, loss, hessian: bool) -> tuple:
    """The sums over the rows of :func:`loss_derivatives`' gradient and Hessian (``None`` without
    ``hessian``), over row blocks of :data:`HESSIAN_BLOCK`, each block's margins computed once."""
    gradient = np.zeros(w.shape)
    total = np.zeros((w.size, w.size)) if hessian else None
    weighted = isinstance(loss, WeightedLoss)
    for start in range(0, X.shape[0], HESSIAN_BLOCK):
        X_block, y_block = X[start : start + HESSIAN_BLOCK], y[start : start + HESSIAN_BLOCK]
        margins = X_block @ w.T
        gradient += loss.derivative(margins, y_block).T @ X_block
        if hessian:
            _add_hessian(total, margins, X_block, y_block["weight"] if weighted else None)
    return gradient, total


def _add_hessian(total: np.ndarray, margins: np.ndarray, X: np.ndarray, row_weights: np.ndarray | None) -> None:
    """Add the summed loss Hessians of the rows ``X`` with ``margins`` to ``total`` (logistic: ``X^T
    diag(c phi'') X``, one symmetric rank-``k`` update; multinomial: the blocks ``(k, l)`` of ``X^T
    diag(c s_k (delta_kl - s_l)) X``, parameter flattened row by row), ``c`` the rows' weights
    (``None``: all 1)."""
    c = 1.0 if row_weights is None else np.asarray(row_weights, dtype=np.float64)
    if margins.ndim == 1:
        scaled = _rows_times(X, np.sqrt(c * expit(margins) * expit(-margins)))
        total += _dense(scaled.T @ scaled)  # A.T @ A: numpy calls the symmetric BLAS update
        return
    n_classes, p = margins.shape[1], X.shape[1]
    probabilities = softmax(margins, axis=1)
    for k in range(n_classes):
        for l in range(k, n_classes):
            weights = c * probabilities[:, k] * (float(k == l) - probabilities[:, l])
            block = _dense(_rows_times(X, weights).T @ X)
            total[k * p : (k + 1) * p, l * p : (l + 1) * p] += block
            if l != k:
                total[l * p : (l + 1) * p, k * p : (k + 1) * p] += block.T


def _rows_times(X, factors: np.ndarray):
    """``diag(factors) @ X`` for a dense or a CSR ``X`` (a new matrix of ``X``'s kind)."""
    return scale_sparse_rows(X, factors) if sparse.issparse(X) else X * factors[:, None]


def _dense(matrix) -> np.ndarray:
    """A Hessian block as a dense array (the product of CSR rows is a sparse matrix)."""
    return matrix.toarray() if sparse.issparse(matrix) else matrix


def _without_class_mean(gradient: np.ndarray, n_classes: int) -> np.ndarray:
    """The flattened ``(K, p)`` gradient projected onto the complement of ``N = {1_K v^T}``
    (multinomial; module docstring): its mean over the classes removed."""
    rows = gradient.reshape(n_classes, -1)
    return (rows - rows.mean(axis=0)).ravel()


def _hessian_without_class_mean(hessian: np.ndarray, n_classes: int) -> np.ndarray:
    """``P H P`` for the projection ``P`` of :func:`_without_class_mean`."""
    size = hessian.shape[0]
    blocks = hessian.reshape(n_classes, size // n_classes, n_classes, size // n_classes)
    blocks = blocks - blocks.mean(axis=0, keepdims=True)
    return (blocks - blocks.mean(axis=2, keepdims=True)).reshape(size, size)


def metric_projected_step(w: np.ndarray, gradient: np.ndarray, eigenvalues: np.ndarray, eigenvectors: np.ndarray, radius: float) -> np.ndarray:
    """``argmin_{||v|| <= R} <g, v - w> + (v - w)^T A (v - w) / 2`` with ``A = V diag(a) V^T``, ``a > 0``.

    The minimiser is ``v(nu) = (A + nu I)^{-1} (A w - g)`` with ``nu = 0`` if that is in the ball,
    else the root of ``||v(nu)|| = R`` (KKT; ``||v(nu)||`` decreases from ``||v(0)|| > R`` to 0, and
    is at most ``R`` at ``nu = ||A w - g|| / R``), found by Brent's method on that bracket.
    """
    coordinates = eigenvalues * (eigenvectors.T @ w) - eigenvectors.T @ gradient

    def norm(nu: float) -> float:
        return float(np.linalg.norm(coordinates / (eigenvalues + nu)))

    if norm(0.0) <= radius:
        return eigenvectors @ (coordinates / eigenvalues)
    upper = float(np.linalg.norm(coordinates)) / radius
    nu = brentq(lambda nu: norm(nu) - radius, 0.0, upper, xtol=1e-15 * upper, rtol=1e-15)
    return project_to_ball(eigenvectors @ (coordinates / (eigenvalues + nu)), radius)  # rounding only


@dataclass(frozen=True)
class PrivateNewton:
    """Private Newton method with noisy gradients and Hessians (module docstring).

    Parameters
    ----------
    n_steps : int
        ``T``, the number of Newton steps (gradient releases).
    hessian_steps : int or None
        ``T_H <= T``: Hessians are released at the first ``T_H`` steps and the last average is
        reused after. ``None``: ``ceil(3 T / 4)`` (6 of the default 8 steps; near the end of the
        path the Hessian changes little, and each release saved is a pass over the rows).
    hessian_share : float
        Share of the budget's ``mu**2`` spent on the Hessian releases, in (0, 1).
    final_share : float
        Share of the gradients' ``mu**2`` spent on the last gradient, in (0, 1].
    hessian_window : int
        Number of the latest released Hessians averaged (inverse-variance weights) into the
        curvature of a step.
    floor_factor : float
        Eigenvalues of the averaged Hessian below ``floor_factor`` times the edge of its noise's
        semicircle are raised to it.
    """

    n_steps: int = 8
    hessian_steps: int | None = None
    hessian_share: float = 0.3
    final_share: float = 0.5
    hessian_window: int = 3
    floor_factor: float = 1.0

    requires_smooth_loss = True

    def __post_init__(self):
        def integer(value, low):
            return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= low

        if not integer(self.n_steps, 1):
            raise ValueError(f"n_steps must be an integer >= 1; got {self.n_steps!r}.")
        if self.hessian_steps is not None and not (integer(self.hessian_steps, 1) and self.hessian_steps <= self.n_steps):
            raise ValueError(f"hessian_steps must be an integer in [1, n_steps] or None; got {self.hessian_steps!r}.")
        if not integer(self.hessian_window, 1):
            raise ValueError(f"hessian_window must be an integer >= 1; got {self.hessian_window!r}.")
        for name, low, high in (("hessian_share", 0.0, 1.0), ("final_share", 0.0, 1.0 + 1e-15)):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and low < value < high):
                raise ValueError(f"{name} must be a number in ({low:g}, {min(high, 1.0):g}{']' if high > 1 else ')'}; got {value!r}.")
        if not (isinstance(self.floor_factor, (int, float)) and 0 < self.floor_factor < math.inf):
            raise ValueError(f"floor_factor must be a finite number > 0; got {self.floor_factor!r}.")

    @property
    def planned_hessian_steps(self) -> int:
        """``T_H``: ``hessian_steps``, or its default ``ceil(3 T / 4)``."""
        return math.ceil(0.75 * self.n_steps) if self.hessian_steps is None else self.hessian_steps

    def plan(self, problem: Problem) -> NewtonPlan:
        return plan_newton(problem, self.n_steps, self.planned_hessian_steps, self.hessian_share, self.final_share)

    def _curvature(self, released: list, n_classes: int):
        """Eigen-decomposition of the inverse-variance weighted average of the ``released`` noisy
        Hessians (projected for the multinomial loss), eigenvalues raised to the floor
        ``floor_factor sqrt(2 m) sbar`` (``sbar``: the noise level of the average, per coordinate of
        :func:`pack_symmetric`), and the floor."""
        weights = np.array([noise**-2.0 for _, noise in released])
        average = sum(weight * hessian for weight, (hessian, _) in zip(weights, released)) / weights.sum()
        if n_classes > 1:
            average = _hessian_without_class_mean(average, n_classes)
        floor = self.floor_factor * math.sqrt(2.0 * average.shape[0] / weights.sum())
        eigenvalues, eigenvectors = np.linalg.eigh(average)
        return np.maximum(eigenvalues, floor), eigenvectors, floor

    def run(self, plan: NewtonPlan, X, y, problem: Problem, rng: np.random.Generator) -> SolverResult:
        """Run a planned Newton method on all rows (already clipped)."""
        if X.shape[0] != plan.n_samples:
            raise ValueError(f"The plan is for {plan.n_samples} rows; got {X.shape[0]}.")
        (noise_rng,) = rng.spawn(1)
        w = np.zeros(problem.coef_shape)
        n_classes = w.shape[0] if w.ndim == 2 else 1
        size, alpha = w.size, float(problem.l2_penalty)
        released = []  # (noisy Hessian, its noise level), latest last
        floors = []
        for t in range(plan.n_steps):
            new_hessian = t < plan.hessian_steps
            gradient, hessian = loss_derivatives(w, X, y, problem.loss, new_hessian)
            gradient = (gradient + release_noise(gradient, plan.gradient_noise[t], noise_rng)).ravel()
            if new_hessian:
                packed = pack_symmetric(hessian)
                noisy = unpack_symmetric(packed + release_noise(packed, plan.hessian_noise[t], noise_rng), size)
                released.append((noisy, plan.hessian_noise[t]))
                eigenvalues, eigenvectors, floor = self._curvature(released[-self.hessian_window :], n_classes)
            if n_classes > 1:
                gradient = _without_class_mean(gradient, n_classes)
            floors.append(floor)
            step = metric_projected_step(
                w.ravel(), gradient + alpha * w.ravel(), eigenvalues + alpha, eigenvectors, float(problem.radius)
            )
            w = step.reshape(w.shape)
        info = {
            "n_steps": plan.n_steps,
            "hessian_steps": plan.hessian_steps,
            "gradient_noise": plan.gradient_noise,
            "hessian_noise": plan.hessian_noise,
            "floors": tuple(floors),
        }
        return SolverResult(coef=w, dp_event=plan.dp_event, n_gradients=plan.n_steps * plan.n_samples, info=info)
