"""Private Newton method for the logistic, multinomial logistic and squared losses.

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

Least squares: sufficient statistics perturbation
-------------------------------------------------
For the squared loss ``phi(z, y) = (y - z)**2`` (:class:`~skdpsco.losses.PowerLoss` with ``p = 2``:
``phi' = -2 (y - z)``, ``phi'' = 2``) the Hessian ``hess F_S = (2 / n) sum_i c_i x_i x_i^T`` does
not depend on ``w``, and the gradient at ``0`` is ``-(2 / n) sum_i c_i y_i x_i`` (``c_i`` the row
weights, 1 without). The default for this loss is one step, ``T = T_H = 1``: the release is the
minimiser over the ball of ``<g_1, v> + v^T A_1 v / 2``, i.e. (inside the ball) ``A_1^{-1} (-g_1)``
with ``A_1`` the released ``(2 / n) X^T X`` floored and ``-g_1`` the released ``(2 / n) X^T y``:
sufficient statistics perturbation (SSP; Vu & Slavkovic 2009; Wang 2018, "Revisiting differentially
private linear regression: optimal and adaptive prediction & estimation in unbounded domain",
UAI). The eigenvalue floor plays the part of the adaptive ridge of Wang's AdaSSP, which adds
``lambda I`` with ``lambda = max(0, (a bound on the noise's operator norm) - (a noisy lambda_min of
X^T X))``, a third release with its own share of the budget; the floor costs nothing (post-processing)
and raises only the directions the noise dominates. On the validation sets of
``benchmarks/least_squares.py`` it measured better than both a ridge of the floor and AdaSSP's shift
``max(0, floor - lambda_min)`` with the released matrix's smallest eigenvalue in place of a
released one (``benchmarks/results/least_squares.md``), and further Newton steps (``T = 2``) measured
worse: their gradients, at a ``w`` that depends on the data, have the full sensitivity ``2 L / n``,
three times the first one's at the estimators' default radius (below).

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
* **First gradient of the squared loss**, sensitivity ``Delta_1 = 2 L_0 / n``
  (:func:`first_gradient_sensitivity`). It is taken at ``w_0 = 0``, which is public (fixed before
  the data is read), so only the rows' gradients at ``0`` matter: ``c phi'(0, y) x = -2 c y x``, of
  norm at most ``L_0 = 2 B_y B`` (``|y| <= B_y``, ``||x|| <= B``, ``c <= 1``), and two of them differ
  by at most ``2 L_0``, attained by ``(x, B_y)`` and ``(x, -B_y)`` with ``||x|| = B``. PowerLoss's
  constants are ``L = 2 B (B_y + B R)`` and ``beta = 2 B**2``, so ``L_0 = L - beta R``, computed from
  the problem's constants (those of the loss on the problem's ball, as every solver's calibration
  assumes) and rounded up by ``1e-12 L`` against the cancellation. At the estimators' default
  radius ``R = 2 B_y / B`` (:func:`skdpsco.defaults.regression_radius`), ``L = 3 L_0``. The logistic
  losses keep ``2 L / n`` for their first gradient (their ``|phi'(0, y)| = 1 / 2`` would halve it;
  not done, so that their released models stay those measured and pinned by the tests).
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
  :func:`~skdpsco.accounting.gaussian_event` ``(s_i, Delta_i)`` (``Delta_i`` the sensitivity of
  release ``i``: ``Delta_1`` or ``Delta_g`` for a gradient, ``Delta_H`` for a Hessian), which
  :func:`~skdpsco.accounting.epsilon_of` converts exactly.

Everything after the releases (averaging, floor, ridge, projection onto ``N``'s complement, the
metric projection) is post-processing of released values and public quantities.

Secure mode
-----------
With a secure generator (``skdpsco.set_config(secure_noise=True)``, :mod:`skdpsco._secure`) every
release above is a grid release with exact discrete Gaussian noise
(:func:`skdpsco._secure.noisy_release`, :func:`~skdpsco._secure.grid_release`), so that no
floating-point sum ``value + noise`` of Mironov (2012) is ever released: the gradient with its
planned ``(s_t, Delta_t)``, the Hessian as the vector ``u(H)`` with ``(s, Delta_H)``. The grid's
rounding margin is computed from the ``l2`` sensitivity of the vector released, and ``Delta_H``
is exactly that for ``u(H)`` (the isometry above: ``||u(H) - u(H')||_2 = ||H - H'||_F``); the
matrix is then ``u^{-1}`` of the released vector, post-processing. Each grid release is
``Delta**2 / (2 s**2)``-zCDP, the ``rho`` of the planned Gaussian release (Canonne, Kamath &
Steinke 2020, Thm 4 and 14), and zCDP composes adaptively by adding the ``rho`` (Bun & Steinke
2016): the fit's event is the planned composition with every Gaussian event read as the zCDP
event of its ``rho`` (:func:`skdpsco._secure.secure_event`; :attr:`PrivateNewton.grid_releases`
tells the estimators to convert and calibrate it so). The exact draws are made in Python, one
integer per coordinate: ``p`` per gradient and ``p (p + 1) / 2`` per Hessian (5050 at ``p =
100``), whatever ``n``.

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
from scipy.optimize import brentq
from scipy.special import expit, softmax

from .. import rows as fused_rows
from ..rows import layout_of
from .._secure import noisy_release
from ..accounting import epsilon_of, gaussian_event, gaussian_noise_multiplier
from ..losses import LogisticLoss, MultinomialLogisticLoss, PowerLoss, WeightedLoss
from .._noise import release_noise
from ._core import SolverResult, project_to_ball
from .noisy_gd import _NOISE_SAFETY  # the same round-up of a closed-form noise level

if TYPE_CHECKING:
    from ._problem import Problem

__all__ = [
    "LOGISTIC_STEPS",
    "NewtonPlan",
    "PrivateNewton",
    "first_gradient_sensitivity",
    "gradient_sensitivity",
    "hessian_sensitivity",
    "is_squared_loss",
    "pack_symmetric",
    "row_hessian_bound",
    "supports_loss",
    "unpack_symmetric",
]

LOGISTIC_STEPS = 8
"""``T`` of :class:`PrivateNewton` with ``n_steps=None`` for the logistic losses."""

HESSIAN_BLOCK = 8192
"""Rows per block of the gradient and Hessian pass (bounds the temporary of the weighted rows)."""

def _unweighted(loss):
    return loss.base if isinstance(loss, WeightedLoss) else loss


def is_squared_loss(loss) -> bool:
    """Whether ``loss`` (or the base of a :class:`~skdpsco.losses.WeightedLoss`) is the squared loss
    ``(y - z)**2``, :class:`~skdpsco.losses.PowerLoss` with ``p = 2``."""
    base = _unweighted(loss)
    return type(base) is PowerLoss and base.p == 2.0


def supports_loss(loss) -> bool:
    """Whether this solver's sensitivities are derived for ``loss`` (unweighted or weighted): the
    logistic, multinomial logistic and squared losses."""
    return type(_unweighted(loss)) in (LogisticLoss, MultinomialLogisticLoss) or is_squared_loss(loss)


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
    * The squared loss (:class:`~skdpsco.losses.PowerLoss`, ``p = 2``): ``hess = 2 x x^T``, of
      Frobenius norm ``2 ||x||**2 <= 2 B**2``, the loss's ``beta`` (attained by every row of norm
      ``B``, at every ``w``).

    A :class:`~skdpsco.losses.WeightedLoss` of one of them has the same bound (``c h`` with ``c`` in
    ``[0, 1]``).

    Raises
    ------
    ValueError
        For any other loss, naming the algorithms that train it.
    """
    if not supports_loss(problem.loss):
        loss = _unweighted(problem.loss)
        detail = f" with p={loss.p:g}" if isinstance(loss, PowerLoss) else ""
        raise ValueError(
            f"algorithm='newton' supports the logistic, multinomial logistic and squared (p=2) losses "
            f"only (their Hessian sensitivity is derived in skdpsco.solvers.newton); got the loss "
            f"{loss.name!r}{detail}. Use algorithm='noisy_gd' or 'auto' for it."
        )
    return float(problem.constants.smoothness)


def gradient_sensitivity(problem: Problem) -> float:
    """``2 L / n``: replace-one ``l2`` sensitivity of the averaged loss gradient (module docstring)."""
    return 2.0 * float(problem.constants.lipschitz) / problem.n_samples


def first_gradient_sensitivity(problem: Problem) -> float:
    """Replace-one ``l2`` sensitivity of the averaged loss gradient at the public ``w_0 = 0``: ``2 L_0
    / n`` with ``L_0 = L - beta R`` for the squared loss, ``2 L / n`` for the others (module
    docstring)."""
    if not is_squared_loss(problem.loss):
        return gradient_sensitivity(problem)
    lipschitz = float(problem.constants.lipschitz)
    origin = lipschitz - float(problem.constants.smoothness) * float(problem.radius)
    return 2.0 * (origin + _ROUNDING * lipschitz) / problem.n_samples


_ROUNDING = 1e-12
"""Relative slack of ``L_0 = L - beta R`` (:func:`first_gradient_sensitivity`): the difference of two
rounded products is an upper bound on the exact one only up to a few ulps of ``L``."""


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
    gradient_sensitivities : tuple of float
        ``Delta_t`` of the ``T`` gradient releases (the first at the public ``w_0 = 0``).
    gradient_noise : tuple of float
        ``s_t`` of the ``T`` gradient releases.
    hessian_sensitivity : float
        ``Delta_H``, the Frobenius sensitivity of the averaged Hessian, hence the ``l2``
        sensitivity of its isometric vectorisation :func:`pack_symmetric`, the released vector.
    hessian_noise : tuple of float
        Noise of the ``T_H`` Hessian releases (per coordinate of :func:`pack_symmetric`).
    dp_event : dp_accounting.DpEvent
        The composition of every release.
    """

    n_samples: int
    n_steps: int
    hessian_steps: int
    gradient_sensitivities: tuple
    gradient_noise: tuple
    hessian_sensitivity: float
    hessian_noise: tuple
    dp_event: object


def _shares(n_steps: int, hessian_steps: int, hessian_share: float, final_share: float):
    """Shares of ``mu**2`` of the gradient and Hessian releases (module docstring)."""
    gradient = np.full(n_steps, (1.0 - hessian_share) * (1.0 - final_share) / max(n_steps - 1, 1))
    gradient[-1] = (1.0 - hessian_share) * (final_share if n_steps > 1 else 1.0)
    return gradient, np.full(hessian_steps, hessian_share / hessian_steps)


def plan_newton(problem: Problem, n_steps: int, hessian_steps: int, hessian_share: float, final_share: float) -> NewtonPlan:
    """Plan the private Newton method, (epsilon, delta)-DP exactly for ``problem`` (module docstring)."""
    hessian_delta = hessian_sensitivity(problem)
    gradient_deltas = (first_gradient_sensitivity(problem),) + (gradient_sensitivity(problem),) * (n_steps - 1)
    if not 0 < float(problem.radius) < math.inf:
        raise ValueError(f"algorithm='newton' needs a bounded domain: radius must be finite and > 0; got {problem.radius!r}.")
    if problem.n_samples < 1:
        raise ValueError(f"algorithm='newton' needs n_samples >= 1; got n_samples={problem.n_samples}.")
    epsilon, delta = float(problem.epsilon), float(problem.delta)
    mu = 1.0 / gaussian_noise_multiplier(epsilon, delta)
    gradient_shares, hessian_shares = _shares(n_steps, hessian_steps, hessian_share, final_share)
    gradient_noise = tuple(
        float(d / (mu * math.sqrt(s)) * _NOISE_SAFETY) for d, s in zip(gradient_deltas, gradient_shares)
    )
    hessian_noise = tuple(float(hessian_delta / (mu * math.sqrt(s)) * _NOISE_SAFETY) for s in hessian_shares)
    event = dp_accounting.ComposedDpEvent(
        [gaussian_event(s, d) for s, d in zip(gradient_noise, gradient_deltas)]
        + [gaussian_event(s, hessian_delta) for s in hessian_noise]
    )
    if epsilon_of(event, delta) > epsilon:
        raise AssertionError(f"The Newton plan spends more than epsilon={epsilon}.")
    return NewtonPlan(
        int(problem.n_samples), n_steps, hessian_steps, gradient_deltas, gradient_noise, hessian_delta, hessian_noise, event
    )


def loss_derivatives(w: np.ndarray, X: np.ndarray, y: np.ndarray, loss, hessian: bool, intercept: float | None = None):
    """Averaged loss gradient at ``w`` (shape of ``w``) and, with ``hessian``, the averaged loss
    Hessian in the flattened parameter (``(w.size, w.size)``; ``None`` otherwise), in one pass over
    row blocks of :data:`HESSIAN_BLOCK`, each block's margins computed once. The gradient is
    :func:`~._core.margin_gradient`'s formula (``tests/test_newton.py`` checks they agree); with a
    :class:`~skdpsco.losses.WeightedLoss` (``y`` its :func:`~skdpsco.losses.weighted_targets`) each
    row's Hessian is multiplied by its weight, as its gradient is. ``intercept``: the value of a
    last column of the CSR rows ``X`` that they do not store (:func:`summed_loss_derivatives`)."""
    # one pass of per-block sums (the rows' layout: in memory, one call), on blocks it may overwrite
    # where they are its own copies (a Dask fit's rows: each sub-block is mapped anew)
    layout = layout_of(X)
    gradient, total = layout.block_sum(summed_loss_derivatives, X, y,
                                       extra=(w, loss, hessian, layout.owns_blocks(X), intercept))
    n = X.shape[0]
    return gradient / n, (total / n if hessian else None)


def summed_loss_derivatives(X, y, w: np.ndarray, loss, hessian: bool, overwrite_rows: bool = False,
                            intercept: float | None = None) -> tuple:
    """The sums over the rows of :func:`loss_derivatives`' gradient and Hessian (``None`` without
    ``hessian``). A C-contiguous float64 ``X`` with a binary logistic or squared loss takes the
    compiled pass (:func:`skdpsco.rows.loss_derivatives`, one read of every row); any other input
    the numpy blocks of :data:`HESSIAN_BLOCK` rows, each block's margins computed once.
    With ``overwrite_rows`` (a Dask fit's mapped sub-blocks, dense) a binary loss's Hessian
    scales the rows of ``X`` in place instead of a copy: the same values, no temporary of the
    size of a block (which a Dask worker's allocator returns to the system, and pays for in page
    faults, at every sub-block).

    ``intercept`` (CSR ``X`` only): the rows are ``[X, intercept]``, a last column of that value
    that ``X`` does not store (a sparse fit's intercept column, one entry a row fewer in memory);
    the same values, bit for bit, as with the column stored: each margin is ``X``'s partial sum
    plus ``intercept w_p`` (scipy adds the row's last entry last), the gradient's last entry the
    running sum of ``intercept phi'`` over the rows in order (scipy's order), the Hessian
    :func:`skdpsco.rows.sparse_scaled_gram`'s with the column."""
    layout = layout_of(X)
    if intercept is not None and not layout.unstored_columns:
        raise ValueError("intercept= is the unstored last column of CSR rows; dense rows store their own.")
    weighted = isinstance(loss, WeightedLoss)
    code = _compiled_loss(loss, w)
    if code is not None and layout.fused(X):
        labels, weights = (y["y"], y["weight"]) if weighted else (y, None)
        return fused_rows.loss_derivatives(X, labels, w, code, weights, hessian)
    gradient = np.zeros(w.shape)
    total = np.zeros((w.size, w.size)) if hessian else None
    features = w if intercept is None else w[..., :-1]
    for start in range(0, X.shape[0], HESSIAN_BLOCK):
        rows = slice(start, min(start + HESSIAN_BLOCK, X.shape[0]))
        X_block, y_block = layout.row_block(X, rows), y[rows]
        margins = X_block @ features.T
        if intercept is not None:
            margins += intercept * w[..., -1]
        derivatives = loss.derivative(margins, y_block)
        if intercept is None:
            gradient += derivatives.T @ X_block
        else:
            gradient[..., :-1] += derivatives.T @ X_block
            gradient[..., -1] += np.cumsum(intercept * derivatives, axis=0)[-1]  # in the rows' order, as scipy's
        if hessian:
            _add_hessian(total, margins, X_block, y_block["weight"] if weighted else None, loss, overwrite_rows,
                         intercept, layout)
    return gradient, total


def _compiled_loss(loss, w: np.ndarray) -> int | None:
    """The code of ``loss`` (or of the base of a weighted loss) for the compiled pass
    (:func:`skdpsco.rows.loss_derivatives`): the binary logistic and the squared loss, a vector
    ``w``; ``None`` for the others (multinomial), which the numpy blocks compute."""
    base = _unweighted(loss)
    if w.ndim != 1:
        return None
    if type(base) is LogisticLoss:
        return fused_rows.LOGISTIC_LOSS
    return fused_rows.SQUARED_LOSS if is_squared_loss(base) else None


def _add_hessian(total: np.ndarray, margins: np.ndarray, X: np.ndarray, row_weights: np.ndarray | None, loss,
                 overwrite_rows: bool = False, intercept: float | None = None, layout=None) -> None:
    """Add the summed loss Hessians of the rows ``X`` with ``margins`` to ``total`` (logistic and
    squared loss: ``X^T diag(c phi'') X``, one symmetric rank-``k`` update, ``phi'' = sigma(z)
    sigma(-z)`` or 2; multinomial: the blocks ``(k, l)`` of ``X^T diag(c s_k (delta_kl - s_l)) X``,
    parameter flattened row by row), ``c`` the rows' weights (``None``: all 1). With
    ``overwrite_rows`` (dense ``X``) the binary losses scale ``X`` in place; of a CSR ``X`` they
    sum the scaled rows' outer products in place of a scaled copy (:func:`skdpsco.rows.sparse_scaled_gram`),
    with ``intercept`` the value of a last column the CSR rows do not store (the multinomial
    Hessian's blocks read a copy of the rows with that column, a block's worth). ``layout``: that of
    ``X`` (:func:`skdpsco.rows.layout_of`; ``None``: found here)."""
    layout = layout_of(X) if layout is None else layout
    c = 1.0 if row_weights is None else np.asarray(row_weights, dtype=np.float64)
    if margins.ndim == 1:
        curvature = np.full(X.shape[0], 2.0) if is_squared_loss(loss) else expit(margins) * expit(-margins)
        factors = np.sqrt(c * curvature)
        total += layout.scaled_gram(X, factors, overwrite_rows, intercept)
        return
    if intercept is not None:
        X = layout.with_constant_column(X, intercept)
    n_classes, p = margins.shape[1], X.shape[1]
    probabilities = softmax(margins, axis=1)
    for k in range(n_classes):
        for l in range(k, n_classes):
            weights = c * probabilities[:, k] * (float(k == l) - probabilities[:, l])
            block = layout.weighted_gram(X, weights)
            total[k * p : (k + 1) * p, l * p : (l + 1) * p] += block
            if l != k:
                total[l * p : (l + 1) * p, k * p : (k + 1) * p] += block.T


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
    n_steps : int or None
        ``T``, the number of Newton steps (gradient releases). ``None``: :data:`LOGISTIC_STEPS` for
        the logistic losses, 1 for the squared loss (module docstring, "Least squares": its Hessian
        is constant, so the one step from ``w_0 = 0`` is sufficient statistics perturbation; later
        steps would release gradients of sensitivity ``2 L / n``, three times the first one's at the
        default radius, and measured worse).
    hessian_steps : int or None
        ``T_H <= T``: Hessians are released at the first ``T_H`` steps and the last average is
        reused after. ``None``: ``ceil(3 T / 4)`` (6 of the default 8 steps, 1 of 1; near the end
        of the path the Hessian changes little, and each release saved is a pass over the rows).
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

    n_steps: int | None = None
    hessian_steps: int | None = None
    hessian_share: float = 0.3
    final_share: float = 0.5
    hessian_window: int = 3
    floor_factor: float = 1.0

    requires_smooth_loss = True
    grid_releases = True  # each gradient and Hessian release is a grid release in secure mode (module docstring)

    def __post_init__(self):
        def integer(value, low):
            return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= low

        if self.n_steps is not None and not integer(self.n_steps, 1):
            raise ValueError(f"n_steps must be an integer >= 1 or None; got {self.n_steps!r}.")
        if self.hessian_steps is not None and not (
            integer(self.hessian_steps, 1) and (self.n_steps is None or self.hessian_steps <= self.n_steps)
        ):
            raise ValueError(f"hessian_steps must be an integer in [1, n_steps] or None; got {self.hessian_steps!r}.")
        if not integer(self.hessian_window, 1):
            raise ValueError(f"hessian_window must be an integer >= 1; got {self.hessian_window!r}.")
        for name, low, high in (("hessian_share", 0.0, 1.0), ("final_share", 0.0, 1.0 + 1e-15)):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and low < value < high):
                raise ValueError(f"{name} must be a number in ({low:g}, {min(high, 1.0):g}{']' if high > 1 else ')'}; got {value!r}.")
        if not (isinstance(self.floor_factor, (int, float)) and 0 < self.floor_factor < math.inf):
            raise ValueError(f"floor_factor must be a finite number > 0; got {self.floor_factor!r}.")

    def planned_steps(self, problem: Problem) -> int:
        """``T``: ``n_steps``, or its default for ``problem``'s loss (1 for the squared loss,
        :data:`LOGISTIC_STEPS` for the others)."""
        if self.n_steps is not None:
            return self.n_steps
        return 1 if is_squared_loss(problem.loss) else LOGISTIC_STEPS

    def planned_hessian_steps(self, problem: Problem) -> int:
        """``T_H``: ``hessian_steps``, or its default ``ceil(3 T / 4)``.

        Raises
        ------
        ValueError
            If ``hessian_steps`` exceeds the default ``T`` of ``problem``'s loss.
        """
        n_steps = self.planned_steps(problem)
        if self.hessian_steps is None:
            return math.ceil(0.75 * n_steps)
        if self.hessian_steps > n_steps:
            raise ValueError(
                f"hessian_steps={self.hessian_steps} exceeds n_steps={n_steps} (the default for the loss "
                f"{problem.loss.name!r}); pass n_steps as well, at least hessian_steps."
            )
        return self.hessian_steps

    def plan(self, problem: Problem) -> NewtonPlan:
        return plan_newton(
            problem, self.planned_steps(problem), self.planned_hessian_steps(problem), self.hessian_share, self.final_share
        )

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

    def reads_unstored_intercept(self, loss) -> bool:
        """Whether :meth:`run` reads CSR rows' intercept column without it stored (``intercept=``):
        for every loss (:func:`summed_loss_derivatives`)."""
        return True

    def run(self, plan: NewtonPlan, X, y, problem: Problem, rng: np.random.Generator,
            intercept: float | None = None) -> SolverResult:
        """Run a planned Newton method on all rows (already clipped); ``intercept``: the value of
        a last (intercept) column of CSR rows ``X`` that they do not store
        (:func:`summed_loss_derivatives`), the same model as with the column stored.

        Every gradient and every Hessian is released by :func:`skdpsco._secure.noisy_release`
        with the planned noise and sensitivity (module docstring, "Secure mode"): ``value +``
        :func:`~skdpsco._noise.release_noise` (this module's name, looked up at each call so that the
        tests can replace it), or on a grid with discrete Gaussian noise when ``rng`` is a secure
        generator."""
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
            gradient, hessian = loss_derivatives(w, X, y, problem.loss, new_hessian, intercept)
            gradient = noisy_release(gradient, plan.gradient_noise[t], noise_rng,
                                     sensitivity=plan.gradient_sensitivities[t], release=release_noise).ravel()
            if new_hessian:
                packed = noisy_release(pack_symmetric(hessian), plan.hessian_noise[t], noise_rng,
                                       sensitivity=plan.hessian_sensitivity, release=release_noise)
                noisy = unpack_symmetric(packed, size)
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
