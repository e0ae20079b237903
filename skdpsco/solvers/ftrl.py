"""Private FTRL (noisy lazy mirror descent, dual averaging) with l2, l1 and l_p geometry.

Spec: ``shared/spec/ftrl_mirror.md`` §0, §1.4, §2.1–§2.5, §3.5, §4.5, §6.3. Algorithm 1 of Arora,
Marinov & Ullah (2020, arXiv:2002.09609 v1, seed 004): one pass, each row used in exactly one step,
in an order drawn from ``rng``; the state is the running sum of the noisy gradients and every
iterate is the FTRL minimiser (§2.1)

    G_t = sum_{j <= t} (g_j + xi_j),    w_{t+1} = argmin_{w in W} <G_t, w> + Psi(w) / eta_{t+1},

with ``w_1 = argmin_W Psi = 0``, computed in closed form by :func:`skdpsco.geometry.ftrl_step` from
``theta = -eta_{t+1} G_t`` (the lazy projection of §6.3 item 4: never mirror-descend from ``w_t``).
The last iterate ``w_{n+1}`` is released (§2.2), or the mean of ``w_1..w_n`` with ``average=True``
(§6.3 item 6).

Privacy: the sound calibration of §3.5, never the paper's
-----------------------------------------------------------------------------
The paper's amplified calibrations (Thm 4.1 / 5.4, Cor 4.2, Thm 4.3 / 5.5, Thm 4.4) are false
(§0 item 2, §3.4: the shift of the differing gradient is a function of the very noise assumed to
hide it; Lemma C.1 is wrong; noise only at step 1 is not DP at all). None is offered here under any
name. What holds (§3.5): row ``z_t`` enters step ``t`` only, and that step adds fresh noise
``xi_t ~ N(0, sigma**2 I)`` independent of the past. Conditioned on the past (which fixes ``w_t``),
step ``t`` releases ``clip(grad f(w_t, z_t)) + xi_t`` (with batches, the sum over its rows; see
"Batches" below), a Gaussian mechanism; every other step has
the same conditional law under both neighbours, and the iterates are post-processing. By adaptive
composition the whole trajectory (every iterate, their mean) is exactly as private as **one**
Gaussian release per row:

* the per-row loss gradient is clipped in l2 to a public ``C``: ``g <- g min(1, C / ||g||_2)``
  (Frobenius norm for multiclass). The default ``C`` is the loss's l2 Lipschitz bound on the domain,
  so clipping is a no-op for a Lipschitz loss; it is what makes the bound hold for any input;
* replace-one sensitivity of a clipped gradient: ``||g - g'||_2 <= 2 C``, attained by ``g' = -g`` on
  the sphere (§1.1, §3.5 "s = 2L for replace-one"). A ridge term ``lambda w_t`` is added after
  clipping; it is the same under both neighbours given the past, so it cancels;
* event ``gaussian_event(sigma, 2 C)``, with ``sigma`` the smallest noise meeting the user's
  (epsilon, delta) exactly, ``calibrate_noise(lambda s: gaussian_event(s, 2 C), epsilon, delta)``
  (the PLD accountant is exact for one Gaussian release: §3.5, preference 1). It depends on neither
  ``n`` nor ``d`` nor the schedule, and holds at every prefix of the stream (anytime, §2.5).

The argument never uses the order of the rows: whichever step reads a row, that step is one
Gaussian mechanism given the past and the others are the same under both neighbours, so every
order fixed before training and independent of the data gives the same event (pitfall D5 of
``feldman.md``; ``ftrl_mirror.md`` §6.3 item 9: "Privacy does not depend on order under
single-use accounting"). The rows of a Dask fit are therefore streamed in the public order of
their blocks (:class:`skdpsco._dask.RowStream`), with the in-memory event.

Geometry is post-processing (§3.5, "l_p/l_q geometry (sound)"): the potential, the mirror map and
``W`` do not change the guarantee. For the l_p and l1 geometries the noise is still isotropic
Gaussian calibrated to the **l2** sensitivity (the spec's recommended route); the dual norm
``||.||_q`` (``q >= 2``) enters only the step size, through ``||g||_q <= ||g||_2 <= C`` and
``E ||xi||_q**2 <= (d m_q)**(2/q) sigma**2`` with ``m_q = E |N(0, 1)|**q`` (§2.4, §4.5).
``epochs > 1`` would break the single-use argument and is not offered (§6.3 item 2).

Geometries (``constraint`` and ``p``; ``W`` has the public radius ``R = problem.radius``)
------------------------------------------------------------------------------------------
* ``'l2'``: Euclidean potential ``||w||_2**2 / 2`` on the l2 ball (lazy projected noisy SGD);
* ``'lp'``: ``Psi_p = ||w||_p**2 / (2 (p - 1))``, ``1 < p <= 2``, on the l_p ball (radial step);
* ``'l1'``: the l1 ball, by default with the Euclidean potential (``p = 2``: the Euclidean projection
  of the dual average onto the l1 ball, a soft thresholding; Duchi et al. 2008), or with ``Psi_p`` at
  a given ``p``; ``p = 1 + 1 / ln d`` (:func:`~skdpsco.geometry.l1_geometry_exponent`) is the l1
  geometry of §1.4, whose bound has ``log d`` where the Euclidean potential's has ``sqrt(d)``;
* ``None``: ``W = R^d`` with the Euclidean potential; ``R`` is then only the comparator scale of the
  step size (``||w*||_2 <= R``).

Why the Euclidean potential is the default on the l1 ball (measured, on the same tuning data as
``kappa`` below, never on ``benchmarks/sparse.py``'s): with ``p = 1 + 1 / ln d`` the inverse mirror
map raises the dual average to the power ``q - 1 = ln d``, so the weight of ``w`` goes to the
coordinates with the largest noise unless the informative ones stand clearly above the maximum of
``d`` noise draws; soft thresholding keeps every coordinate above the threshold linearly. On the 10
settings of the accuracy criterion below (signed-sparse rows of ``tests/test_ftrl.py`` at d = 10^3
and 10^4, unit-sphere logistic at d = 10; epsilon in {1, 3}; ``R = ||w*||_1``; default batch; 3 seeds)
the Euclidean potential had the higher test accuracy in 9 (mean 0.815 against 0.717; the exception
0.713 against 0.719) and the lower test logistic loss in all 10 (mean 0.531 against 0.616). The
worst-case bound still favours ``p = 1 + 1 / ln d`` (by about 2x at d = 10^4); it is one argument away.

Every ball here lies in the l2 ball of radius ``R`` (``||w||_2 <= ||w||_p`` for ``p <= 2``), the
domain the loss constants were computed for, so the default ``C`` remains a valid gradient bound.

Batches (§6.3 item 2): one Gaussian release per row, ``b`` rows per step
-----------------------------------------------------------------------------
Step ``t`` reads a batch ``B_t`` of ``b`` (or ``b + 1``) rows never read before and releases
``sum_{i in B_t} clip(grad f(w_t, z_i)) + xi_t`` with ``xi_t ~ N(0, sigma**2 I)``; the state
accumulates its mean (the sum and the noise divided by ``|B_t|``). Replacing one row changes one
step's sum by at most ``2 C`` and nothing else given the past, so the argument above holds word for
word: the event is ``gaussian_event(sigma, 2 C)`` whatever ``b`` (``tests/test_ftrl.py`` audits a
batched step on its worst-case neighbours). ``b = 1`` is the paper's Algorithm 1.

Why batches (measured; this is why the l1 geometry lost before): with ``b = 1`` the dual state after
the pass is ``n`` times the mean gradient plus noise of norm ``sigma sqrt(n)`` per coordinate, a
signal-to-noise ratio ``sqrt(n) |grad_j F| / sigma`` per coordinate, ``sqrt(n)`` short of what one
Gaussian release per row allows; with ``b`` rows per step the noise of the state is
``sigma sqrt(n / b)`` and the ratio grows by ``sqrt(b)``. In Thm 5.1's bound, ``T = n / b`` steps
of noise ``sigma / b`` on the mean gradient give ``G_b / sqrt(T) = (B sqrt(b) + N / sqrt(b)) /
sqrt(n)`` (``p < 2``; ``sqrt(B**2 b + N**2 / b) / sqrt(n)`` for ``p = 2``), with ``N`` the dual-norm
bound of one step's noise (``sqrt(d) sigma`` or ``(d m_q)**(1/q) sigma``), smallest at
``b = N / B``. The default (:func:`default_batch_size`) is ``b = kappa N / B`` with ``kappa = 4``
(:data:`BATCH_SCALE`); ``kappa`` only multiplies the bound by ``(sqrt(kappa) + 1 / sqrt(kappa)) / 2``
(1.25), so the rate in ``n`` is unchanged (``T = n / b`` grows linearly with ``n``).
``kappa`` was chosen on data **other than** ``benchmarks/sparse.py``'s, on two criteria that pull
apart (larger batches get the direction right sooner, fewer steps leave the fit short):

* test accuracy, on the signed-sparse rows of ``tests/test_ftrl.py`` (``sparse_logistic_data``,
  seeds 500-502, test seed 999; d = 10^3 with n = 2000 and 10^4, d = 10^4 with n = 2000) and the
  unit-sphere logistic model of the utility benchmark (d = 10, ``||w*|| = 5``, n = 2000 and 10^4),
  epsilon in {1, 3}, delta = 1e-6, ``DPLogisticRegression(algorithm='ftrl')`` with constraint 'l2'
  (R = ``||w*||_2``) and 'l1' (R = ``||w*||_1``), 3 seeds. Mean over the 20 settings for
  kappa = 1/4, 1, 4, 16, 64: 0.661, 0.727, 0.765, 0.791, 0.801 (l1 alone: 0.601, 0.671, 0.717,
  0.758, 0.776);
* excess population risk, on the d = 3 logistic problem of ``tests/test_ftrl.py``
  (``test_utility_against_the_non_private_optimum``: n = 4000, R = 3, 6 seeds), l2 ball / l_1.5
  ball, for b = 1 and kappa = 1, 4, 16, 64: at epsilon = 4, 0.029 / 0.025, 0.014 / 0.012,
  **0.003 / 0.020**, 0.014 / 0.040, 0.042 / 0.072; at epsilon = 1, 0.101 / 0.091, 0.024 / 0.050,
  **0.017 / 0.046**, 0.039 / 0.073, 0.077 / 0.105.

kappa = 4 is the largest value that improves on b = 1 in every one of these settings on both
criteria; kappa = 64 gains 0.036 of accuracy on average but loses to b = 1 on risk at epsilon = 4.

Step sizes (§2.4, Thm 5.1 / A.3 and A.4): ``D = R / sqrt(2 (p - 1))`` (``Psi_p(w*) <= D**2`` on the
ball) and ``G`` the bound on the noisy mean gradient's dual-norm second moment,
``G = sqrt(B**2 + d (sigma / b)**2)`` for ``p = 2`` and ``G = B + (d m_q)**(1/q) sigma / b``
otherwise, with ``B = C + lambda R`` the gradient bound (ridge included) and ``b`` the smallest
batch. ``'fixed'``: ``eta = D / (G sqrt(T))``; ``'anytime'``: ``eta_t = D / (G sqrt(t))``, over the
``T = n // b`` steps. All public.

FTRL and the shared noisy-SGD core; amplification by iteration
--------------------------------------------------------------
With the Euclidean potential on ``W = R^d`` and a constant step ``eta``, lazy FTRL **is** noisy SGD:
``w_{t+1} = -eta G_t = w_t - eta (g_t + xi_t)`` exactly, the gradients taken at the same points and
the noise drawn in the same order; so that case runs on
:func:`~skdpsco.solvers._core.projected_noisy_sgd` with ``radius=None`` (``tests/test_ftrl.py``
checks the lazy loop against it on the same noise). It is the only such case: with a constraint the
lazy iterate ``Pi(-eta G_t)`` differs from the greedy ``Pi(w_t - eta g_t)`` as soon as the boundary
is reached, which Gaussian noise does with positive probability for every finite ``R``; with the
anytime schedule ``w_{t+1} = (eta_{t+1} / eta_t) w_t - eta_{t+1} (g_t + xi_t)``, not an SGD step;
with ``p < 2`` the update is in the dual space. The other cases use :func:`dual_averaging`.

Where FTRL is noisy SGD and the loss is smooth, amplification by iteration applies, but it gains
nothing for this algorithm: with batch size 1 the last row of the pass is followed by no further
noise, and :func:`~skdpsco.accounting.amplification_by_iteration_rho` returns ``(2 C)**2 / (2
sigma**2)``, the zCDP ``rho`` of the very same single Gaussian release (FMTT's per-index bound at the
last index, ``feldman.md`` pitfall D13), which the PLD conversion of the Gaussian event beats. It is
therefore not offered; ``tests/test_ftrl.py`` pins this.

A stream of calls (``partial_fit``): tree aggregation
-----------------------------------------------------------------------------
The single-use argument above releases one fresh draw per step, so the noise of the dual state
after ``t`` steps is the sum of ``t`` draws. A stream of calls, whose every intermediate model is
released, runs the same lazy loop (:func:`lazy_ftrl`) on the prefix sums of the binary tree
mechanism instead (:mod:`skdpsco.solvers.tree`; Kairouz et al. 2021): each call's rows are
``steps_per_call`` leaves (:func:`stream_batch_sizes`), each row one clipped gradient in one leaf,
and a leaf's sum (not its mean) enters the tree, whose prefix noise is the sum of at most
``log2(T + 1)`` draws. A row lies in ``floor(log2 T) + 1`` released nodes of sensitivity ``2 C``:
the stream's event (:attr:`StreamPlan.dp_event`), planned from the public bound on the calls
before the first call (:func:`plan_stream`), with the steps of :meth:`StreamPlan.steps`.

Randomness: ``rng`` is split into the row order (a uniformly random permutation, or a fixed public
``order`` for audits) and the noise, drawn by :func:`skdpsco._noise.gaussian_noise`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import gammaln

from .. import _noise
from ..accounting import gaussian_event, gaussian_noise_multiplier
from ..geometry import CONSTRAINTS, dual_exponent, ftrl_step
from ..rows import BLOCK_ROWS, iter_batches, layout_of
from . import _core, tree
from ._core import SolverResult, projected_noisy_sgd, rows_and_noise_rng

if TYPE_CHECKING:
    from ._problem import Problem

__all__ = [
    "FTRLPlan",
    "IndependentNoisePrefix",
    "PrivateFTRL",
    "StreamFTRL",
    "StreamPlan",
    "StreamState",
    "SCHEDULES",
    "calibrated_noise_std",
    "batch_sizes",
    "clipped_gradient",
    "default_batch_size",
    "dual_averaging",
    "ftrl_steps",
    "gaussian_absolute_moment",
    "noisy_gradient_bound",
    "lazy_ftrl",
    "plan_ftrl",
    "plan_stream",
    "run_ftrl",
    "stream_batch_sizes",
    "stream_steps",
    "summed_gradient",
]

SCHEDULES = ("fixed", "anytime")
"""``'fixed'``: ``eta = D / (G sqrt(n))`` (Thm 5.1 / A.3); ``'anytime'``: ``eta_t = D / (G sqrt(t))``
(Thm A.4, §2.5)."""


# -- public formulas ----------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def calibrated_noise_std(clip_norm: float, epsilon: float, delta: float) -> float:
    """Smallest ``sigma`` with ``gaussian_event(sigma, 2 C)`` (epsilon, delta)-DP (§3.5, exact PLD)."""
    return 2.0 * clip_norm * gaussian_noise_multiplier(epsilon, delta)


def gaussian_absolute_moment(q: float) -> float:
    """``m_q = E |N(0, 1)|**q = 2**(q/2) Gamma((q + 1) / 2) / sqrt(pi)`` (§2.4)."""
    return math.exp(q / 2.0 * math.log(2.0) + gammaln((q + 1.0) / 2.0) - 0.5 * math.log(math.pi))


def noisy_gradient_bound(gradient_bound: float, noise_std: float, n_params: int, p: float) -> float:
    """``G`` with ``E ||g + xi||_q**2 <= G**2`` for ``||g||_2 <= B`` and ``xi ~ N(0, sigma**2 I_d)`` (§2.4).

    ``p = 2``: ``sqrt(B**2 + d sigma**2)`` (``E <g, xi> = 0``). ``p < 2``: Minkowski in ``L2``,
    ``B + (d m_q)**(1/q) sigma``, from ``||g||_q <= ||g||_2`` and Jensen ``E ||xi||_q**2 <=
    (E ||xi||_q**q)**(2/q)`` (§2.4 last items, §4.5).
    """
    if p == 2.0:
        return math.sqrt(gradient_bound**2 + n_params * noise_std**2)
    q = dual_exponent(p)
    return gradient_bound + (n_params * gaussian_absolute_moment(q)) ** (1.0 / q) * noise_std


def ftrl_steps(schedule: str, n_steps: int, diameter: float, noisy_bound: float) -> np.ndarray:
    """``eta_{t+1}``, ``t = 1..n``: the step that maps ``G_t`` to ``w_{t+1}`` (§2.4).

    ``'fixed'``: ``D / (G sqrt(n))`` throughout; ``'anytime'``: ``D / (G sqrt(t + 1))``.
    """
    if schedule == "fixed":
        return np.full(n_steps, diameter / (noisy_bound * math.sqrt(n_steps)))
    if schedule == "anytime":
        return diameter / (noisy_bound * np.sqrt(np.arange(2, n_steps + 2)))
    raise ValueError(f"schedule must be one of {SCHEDULES}; got {schedule!r}.")


BATCH_SCALE = 4.0
"""``kappa`` of :func:`default_batch_size` (module docstring, "Batches")."""


def default_batch_size(n_samples: int, gradient_bound: float, noise_std: float, n_params: int, p: float) -> int:
    """``b = kappa N / B`` rounded, in ``[1, n]``: the batch that minimises Thm 5.1's bound (§2.4).

    ``N = noisy_gradient_bound(0, sigma, d, p)`` bounds the dual norm of the noise of one step
    (``sqrt(d) sigma`` for ``p = 2``, ``(d m_q)**(1/q) sigma`` otherwise) and ``B`` the gradient
    bound; with ``T = n / b`` steps of noise ``sigma / b`` on the mean gradient, ``G_b / sqrt(T)``
    is ``sqrt((B**2 b + N**2 / b) / n)`` (``p = 2``) or ``(B sqrt(b) + N / sqrt(b)) / sqrt(n)``,
    both smallest at ``b = N / B``. ``kappa`` is :data:`BATCH_SCALE` (module docstring, "Batches").
    Public quantities only.
    """
    noise_norm = noisy_gradient_bound(0.0, noise_std, n_params, p)
    return int(min(n_samples, max(1, round(BATCH_SCALE * noise_norm / gradient_bound))))


def batch_sizes(n_samples: int, batch_size: int) -> np.ndarray:
    """``T = max(1, n // b)`` steps of ``n // T`` or ``n // T + 1`` rows (the larger ones first), summing to ``n``."""
    if not (isinstance(batch_size, numbers.Integral) and batch_size >= 1):
        raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}.")
    n_steps = max(1, n_samples // int(batch_size))
    sizes = np.full(n_steps, n_samples // n_steps, dtype=np.int64)
    sizes[: n_samples - int(sizes.sum())] += 1
    return sizes


def clipped_gradient(loss, clip_norm: float, l2_penalty: float = 0.0) -> _core.GradientFn:
    """Mean over a batch of the rows' loss gradients, each clipped in l2 (Frobenius) to ``clip_norm``,
    plus ``l2_penalty w``.

    For a margin loss the gradient of row ``i`` is ``phi'(z_i) x_i`` (an outer product for
    multiclass), whose norm is ``||phi'(z_i)|| ||x_i||``: each row's derivative is scaled by
    ``min(1, C / (||phi'(z_i)|| ||x_i||))`` before the product, so the sum over a batch changes by at
    most ``2 C`` when one row is replaced. The ridge term is added after clipping: it is the same
    under both neighbours given the past, so the sensitivity stays ``2 C`` (module docstring).

    A batch of more than :data:`skdpsco.rows.BLOCK_ROWS` rows is summed block by block, each
    block's margins, norms and product read while it is in cache, so that a call's time grows in
    proportion to its rows (``benchmarks/results/stream.md``); a batch of at most ``BLOCK_ROWS``
    rows is one block.
    """

    def clipped_sum(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        z = X @ w.T
        derivative = np.asarray(loss.derivative(z, y), dtype=float)
        size = np.abs(derivative) if derivative.ndim == 1 else np.linalg.norm(derivative, axis=1)
        size = size * layout_of(X).row_norms(X)
        scale = np.minimum(1.0, clip_norm / np.maximum(size, np.finfo(float).tiny))
        derivative = derivative * (scale if derivative.ndim == 1 else scale[:, None])
        return derivative.T @ X

    def gradient(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        total = clipped_sum(w, X[:BLOCK_ROWS], y[:BLOCK_ROWS])
        for start in range(BLOCK_ROWS, X.shape[0], BLOCK_ROWS):
            total += clipped_sum(w, X[start:start + BLOCK_ROWS], y[start:start + BLOCK_ROWS])
        g = (total / X.shape[0]).reshape(w.shape)
        return g + l2_penalty * w if l2_penalty else g

    return gradient


# -- the lazy update loop -----------------------------------------------------------------------------


class IndependentNoisePrefix:
    """The noisy prefix sums of :func:`dual_averaging`: fresh noise ``N(0, std_t**2 I)`` on every
    step's gradient (§2.1), so the noise of the prefix of ``t`` steps is the sum of ``t`` draws.

    :meth:`add` is the state update ``G <- G + g_t + xi_t`` of §2.1 and returns ``G``; the
    alternative with fewer noise terms per prefix is
    :class:`~skdpsco.solvers.tree.TreeNoisePrefix`, which :func:`lazy_ftrl` runs the same way.
    """

    def __init__(self, shape: tuple, noise_stds, rng: np.random.Generator):
        self.total = np.zeros(shape)
        self.stds = iter(noise_stds)
        self.rng = rng

    def add(self, g: np.ndarray) -> np.ndarray:
        self.total += g
        self.total += _noise.release_noise(g, next(self.stds), self.rng)
        return self.total


def lazy_ftrl(
    gradient: _core.GradientFn,
    batches: Iterable[tuple[np.ndarray, np.ndarray]],
    steps: np.ndarray,
    prefix,
    mirror_step: Callable[[np.ndarray], np.ndarray],
    w: np.ndarray,
    iterate_sum: np.ndarray | None = None,
) -> np.ndarray:
    """The lazy FTRL loop (§2.1): from ``w_t = w``, for each batch ``g_t = gradient(w_t, batch)``,
    the released noisy prefix sum ``G_t = prefix.add(g_t)`` and ``w_{t+1} = mirror_step(-eta_{t+1}
    G_t)``; returns the last iterate and adds ``w_1..w_T`` into ``iterate_sum`` when given.

    ``prefix`` releases the noisy prefix sums: :class:`IndependentNoisePrefix` (one fresh draw per
    step, :func:`dual_averaging`) or :class:`~skdpsco.solvers.tree.TreeNoisePrefix` (tree
    aggregation, :func:`stream_steps`).
    """
    for (X_batch, y_batch), eta in zip(batches, steps, strict=True):
        if iterate_sum is not None:
            iterate_sum += w
        w = mirror_step(-eta * prefix.add(gradient(w, X_batch, y_batch)))
    return w


def dual_averaging(
    gradient: _core.GradientFn,
    batches: Iterable[tuple[np.ndarray, np.ndarray]],
    steps: np.ndarray,
    noise_std,
    shape: tuple,
    mirror_step: Callable[[np.ndarray], np.ndarray],
    rng: np.random.Generator,
    average: bool = False,
) -> np.ndarray:
    """FTRL / dual averaging (§2.1, §2.2): ``G <- G + g_t + xi_t``, ``w_{t+1} = mirror_step(-eta_{t+1} G)``.

    Starts at ``w_1 = 0`` (``argmin_W Psi`` for the potentials and balls here), reads one batch per
    step (``g_t`` is the batch-averaged gradient), draws ``xi_t ~ N(0, noise_std_t**2 I)`` fresh at
    every step (``noise_std`` a float, or one value per step) with
    :func:`skdpsco._noise.gaussian_noise` (looked up at call time, so tests can weaken it), and
    returns ``w_{n+1}``, or with ``average=True`` the mean of ``w_1..w_n`` (the points where the
    gradients were taken). ``G`` is accumulated in float64 (§2.3 "Numerics").
    """
    stds = np.broadcast_to(np.asarray(noise_std, dtype=float), (len(steps),))
    iterate_sum = np.zeros(shape) if average else None
    prefix = IndependentNoisePrefix(shape, stds, rng)
    w = lazy_ftrl(gradient, batches, steps, prefix, mirror_step, np.zeros(shape), iterate_sum)
    return iterate_sum / len(steps) if average else w


# -- planning -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FTRLPlan:
    """A Private-FTRL run of public quantities only, fixed before the data is read.

    Attributes
    ----------
    constraint : {None, 'l2', 'l1', 'lp'}
    p : float
        Exponent of the potential (2: Euclidean).
    radius : float
        ``R`` of the ball (the comparator scale when ``constraint`` is None).
    schedule : {'fixed', 'anytime'}
    clip_norm : float
        ``C``; the replace-one sensitivity of a step is ``2 C``.
    noise_std : float
        ``sigma`` of the fresh Gaussian noise added to the **sum** of a step's clipped gradients
        (``sigma / |B_t|`` on their mean).
    steps : ndarray of shape (T,)
        ``eta_{t+1}``, ``t = 1..T``.
    diameter, noisy_bound : float
        ``D`` and ``G`` of §2.4 (``G`` for the mean gradient of the smallest batch).
    batch_sizes : ndarray of shape (T,)
        Rows read at each step (``b`` or ``b + 1``), summing to ``n``; each row is read once.
    average : bool
        Release the mean of ``w_1..w_T`` instead of ``w_{T+1}``.
    """

    constraint: str | None
    p: float
    radius: float
    schedule: str
    clip_norm: float
    noise_std: float
    steps: np.ndarray
    diameter: float
    noisy_bound: float
    batch_sizes: np.ndarray
    average: bool = False

    @property
    def dp_event(self):
        """One Gaussian release per row with sensitivity ``2 C`` (module docstring, §3.5)."""
        return gaussian_event(self.noise_std, 2.0 * self.clip_norm)

    @property
    def n_samples(self) -> int:
        return int(self.batch_sizes.sum())

    @property
    def n_steps(self) -> int:
        return int(self.steps.size)

    @property
    def noise_stds(self) -> np.ndarray:
        """Standard deviation of the noise on each step's **mean** gradient, ``sigma / |B_t|``."""
        return self.noise_std / self.batch_sizes

    @property
    def is_noisy_sgd(self) -> bool:
        """Whether this FTRL run is exactly noisy SGD (Euclidean, ``R^d``, constant step)."""
        return self.constraint is None and self.schedule == "fixed"

    def mirror_step(self, theta: np.ndarray) -> np.ndarray:
        return ftrl_step(theta, self.p, self.constraint, self.radius)

    def info(self) -> dict:
        return {
            "algorithm": "ftrl",
            "constraint": self.constraint,
            "p": self.p,
            "schedule": self.schedule,
            "n_steps": self.n_steps,
            "batch_size": int(self.batch_sizes.min()),
            "clip_norm": self.clip_norm,
            "noise_std": self.noise_std,
            "noise_multiplier": self.noise_std / (2.0 * self.clip_norm),
            "diameter": self.diameter,
            "noisy_gradient_bound": self.noisy_bound,
            "first_step": float(self.steps[0]),
            "last_step": float(self.steps[-1]),
            "average": self.average,
        }


def _potential_exponent(constraint: str | None, p: float | None, n_params: int) -> float:
    """``p`` of the potential for ``constraint``, validated (module docstring, "Geometries")."""
    if constraint not in CONSTRAINTS:
        raise ValueError(f"constraint must be one of {CONSTRAINTS}; got {constraint!r}.")
    if constraint in (None, "l2"):
        if p not in (None, 2, 2.0):
            raise ValueError(f"constraint={constraint!r} uses the Euclidean potential: pass p=None; got p={p!r}.")
        return 2.0
    if p is None:
        if constraint == "lp":
            raise ValueError("constraint='lp' needs the exponent p, a number in (1, 2].")
        return 2.0  # 'l1': the Euclidean potential (module docstring, "Geometries")
    if not (isinstance(p, numbers.Real) and 1.0 < p <= 2.0):
        raise ValueError(f"p must be a number in (1, 2] (spec §1.2); got {p!r}.")
    return float(p)


def plan_ftrl(
    problem: Problem,
    constraint: str | None,
    p: float | None,
    schedule: str,
    clip_norm: float | None,
    average: bool,
    batch_size: int | None = None,
) -> FTRLPlan:
    """Plan Private FTRL for ``problem``: (epsilon, delta)-DP exactly (module docstring, §3.5).

    ``batch_size=None`` takes :func:`default_batch_size`; the ``T = n // b`` steps read ``b`` or
    ``b + 1`` rows each (:func:`batch_sizes`).
    """
    exponent = _potential_exponent(constraint, p, problem.n_params)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}; got {schedule!r}.")
    if problem.n_samples < 1:
        raise ValueError(f"Private FTRL needs n_samples >= 1; got {problem.n_samples}.")
    radius = problem.radius
    if not (isinstance(radius, numbers.Real) and 0.0 < radius < math.inf):
        raise ValueError(
            f"Private FTRL needs a finite public radius > 0 (the ball, or with constraint=None the comparator "
            f"scale of the step size); got radius={problem.radius!r}."
        )
    radius = float(radius)
    lam = float(problem.l2_penalty)
    if not lam >= 0.0:
        raise ValueError(f"l2_penalty must be >= 0; got {problem.l2_penalty!r}.")
    clip = float(problem.constants.lipschitz if clip_norm is None else clip_norm)
    if not 0.0 < clip < math.inf:
        raise ValueError(
            f"Private FTRL clips per-row gradients to a public norm C, and the loss {problem.loss.name!r} has no "
            f"finite Lipschitz bound on this domain to default to (got C={clip!r}); pass clip_norm > 0."
        )
    sigma = calibrated_noise_std(clip, float(problem.epsilon), float(problem.delta))
    diameter = radius / math.sqrt(2.0 * (exponent - 1.0))
    gradient_bound = clip + lam * radius
    n = int(problem.n_samples)
    if batch_size is None:
        batch_size = default_batch_size(n, gradient_bound, sigma, problem.n_params, exponent)
    sizes = batch_sizes(n, batch_size)
    # G of the mean gradient of a step: noise sigma / |B_t| on it, largest for the smallest batch
    noisy_bound = noisy_gradient_bound(gradient_bound, sigma / sizes.min(), problem.n_params, exponent)
    steps = ftrl_steps(schedule, sizes.size, diameter, noisy_bound)
    steps.setflags(write=False)
    sizes.setflags(write=False)
    return FTRLPlan(
        constraint, exponent, radius, schedule, clip, sigma, steps, diameter, noisy_bound, sizes, bool(average)
    )


# -- running ------------------------------------------------------------------------------------------


def run_ftrl(
    plan: FTRLPlan,
    X,
    y: np.ndarray,
    problem: Problem,
    rng: np.random.Generator,
    order: np.ndarray | None = None,
) -> SolverResult:
    """Run planned Private FTRL over rows already clipped to the public bound, ``plan.batch_sizes[t]``
    rows at step ``t``, each row read once.

    ``X`` is anything with ``shape`` whose ``X[rows]`` (``rows`` an index array, or a slice when
    the order is a run of consecutive rows) is a dense row block (an ndarray, or a lazy
    row reader for data that does not fit in memory), or the rows of a Dask fit, streamed a block
    at a time in a data-independent block-level ``order``
    (:func:`~skdpsco.solvers._core.rows_and_noise_rng`; the guarantee holds for every fixed
    order: module docstring, "Privacy").
    """
    n = plan.n_samples
    source, noise_rng = rows_and_noise_rng(X, y, n, rng, order)
    gradient = clipped_gradient(problem.loss, plan.clip_norm, float(problem.l2_penalty))
    batches = source.batches(0, plan.batch_sizes)
    shape = tuple(problem.coef_shape)
    if plan.is_noisy_sgd:
        coef = projected_noisy_sgd(
            gradient, batches, plan.steps, plan.noise_stds, np.zeros(shape), None, noise_rng, plan.average
        )
    else:
        coef = dual_averaging(
            gradient, batches, plan.steps, plan.noise_stds, shape, plan.mirror_step, noise_rng, plan.average
        )
    return SolverResult(coef=coef, dp_event=plan.dp_event, n_gradients=n, info=plan.info())


# -- a stream of calls: tree aggregation --------------------------------------------------------------

STEPS_PER_CALL = 1
"""Default number of leaves (FTRL steps, each over its own share of the call's rows) of one call
of a stream (:class:`StreamFTRL`): each call's rows are one leaf. ``benchmarks/results/stream.md``
measured 1, 10 and 50 (synthetic logistic, d = 20, 100 calls, epsilon = 1): at 10^4 rows a call
(10 seeds) all three end within 0.0005 of each other and 1 is ahead from the second call (0.802
against 0.789 and 0.744); at 10^3 rows a call (2 seeds) 1 ends 0.013 ahead of both (more leaves:
a deeper tree, more noise on fewer rows each)."""


@dataclass(frozen=True)
class StreamPlan:
    """Private FTRL over a stream of at most ``n_calls`` calls, with tree-aggregated noise.

    Fixed from public quantities before the first call reads a row: each call's rows are split
    into ``steps_per_call`` disjoint leaves (:func:`stream_batch_sizes`), each row one clipped
    gradient in exactly one leaf, and the ``n_leaves = n_calls * steps_per_call`` leaves are the
    leaves of one tree (:mod:`skdpsco.solvers.tree`). Replace-one sensitivity of a leaf ``2 C``;
    a row is in :func:`~skdpsco.solvers.tree.tree_depth` released nodes, so the stream, every
    model released after every call, is :attr:`dp_event`.

    Attributes
    ----------
    constraint, p, radius, clip_norm
        As in :class:`FTRLPlan`.
    noise_std : float
        ``sigma`` of each node of the tree, on sums of clipped gradients.
    n_calls, steps_per_call : int
        The public bound on the calls and the leaves of each call.
    diameter : float
        ``D`` of §2.4.
    gradient_bound : float
        ``B = C + lambda R``, the bound on one row's gradient, ridge included.
    noise_norm : float
        ``N``, the bound on the root mean square dual norm of the noise of any released prefix
        sum: ``sqrt(d max_prefix_terms) sigma`` for the Euclidean potential, ``(d m_q)**(1/q)
        sqrt(max_prefix_terms) sigma`` for ``p < 2`` (§2.4).
    smoothness : float
        ``beta`` of the per-row objective (``inf`` for a loss without a Lipschitz gradient).
    """

    constraint: str | None
    p: float
    radius: float
    clip_norm: float
    noise_std: float
    n_calls: int
    steps_per_call: int
    diameter: float
    gradient_bound: float
    noise_norm: float
    smoothness: float = math.inf

    @property
    def n_leaves(self) -> int:
        return self.n_calls * self.steps_per_call

    @property
    def dp_event(self):
        """The stream's event: the whole tree, each row one leaf (:func:`~skdpsco.solvers.tree.tree_event`)."""
        return tree.tree_event(self.noise_std, 2.0 * self.clip_norm, self.n_leaves)

    def mirror_step(self, theta: np.ndarray) -> np.ndarray:
        return ftrl_step(theta, self.p, self.constraint, self.radius)

    def steps(self, sizes: np.ndarray, rows: int, squares: int, previous: float = math.inf) -> np.ndarray:
        """``eta_{t+1}`` on the sum of gradients for the leaves of ``sizes`` rows, after ``rows``
        rows (``sum b_s``) and ``squares`` (``sum b_s**2``) in earlier leaves and the last step
        ``previous`` (all public): the smallest of ``previous``, ``D / sqrt(B**2 sum b_s**2 + B N
        sum b_s + N**2)`` (sums up to leaf ``t``) and ``1 / (beta b_t)``, so the steps never grow.

        FTRL on leaves of ``b_s`` rows has regret ``D**2 / eta + eta B**2 sum b_s**2`` (Thm A.4,
        a leaf's gradient sum bounded by ``B b_s``); a noisy prefix moves the iterate by at most
        ``eta ||n_t||`` (the FTRL minimiser is ``eta``-Lipschitz in the dual), which costs ``eta B
        b_s E||n_t|| <= eta B N b_s`` at leaf ``s`` (Kairouz et al. 2021, §4, their FTRL regret
        with tree noise). The step balances the three; ``N**2`` keeps the move of a prefix made of
        noise only (no row yet) at about ``D``. With one fresh draw per step instead, ``N**2 t``
        in place of ``B N sum b_s``, it is the fixed step of §2.4 (``D / (G sqrt(T))`` on the
        mean gradient). The Euclidean lazy step is ``w_{t+1} = (eta_{t+1} / eta_t) w_t - eta_{t+1}
        g_t``, a gradient step of ``eta_{t+1} b_t`` on the leaf's mean gradient: ``1 / (beta b_t)``
        keeps it below ``1 / beta`` for a ``beta``-smooth loss (a larger one oscillates on the
        first calls of a stream of large leaves; ``benchmarks/results/stream.md``). Non-increasing
        steps keep the anytime bound of Thm A.4.
        """
        B, N = self.gradient_bound, self.noise_norm
        sizes = np.asarray(sizes, dtype=float)
        regret = self.diameter / np.sqrt(B**2 * (squares + np.cumsum(sizes**2)) + B * N * (rows + np.cumsum(sizes)) + N**2)
        smooth = np.full(sizes.shape, math.inf)  # no bound for an empty leaf or a non-smooth loss
        if math.isfinite(self.smoothness):
            np.divide(1.0, self.smoothness * sizes, out=smooth, where=sizes > 0)
        return np.minimum.accumulate(np.minimum(np.minimum(regret, smooth), previous))

    def info(self) -> dict:
        return {
            "algorithm": "ftrl",
            "aggregation": "tree",
            "constraint": self.constraint,
            "p": self.p,
            "n_calls": self.n_calls,
            "steps_per_call": self.steps_per_call,
            "n_leaves": self.n_leaves,
            "tree_depth": tree.tree_depth(self.n_leaves),
            "clip_norm": self.clip_norm,
            "noise_std": self.noise_std,
            "noise_multiplier": self.noise_std / (2.0 * self.clip_norm),
            "diameter": self.diameter,
            "smoothness": self.smoothness,
        }


def plan_stream(
    problem: Problem,
    n_calls: int,
    steps_per_call: int,
    constraint: str | None,
    p: float | None,
    clip_norm: float | None,
    n_tasks: int = 1,
) -> StreamPlan:
    """Plan a stream of at most ``n_calls`` calls for ``problem`` (whose ``n_samples`` is unused):
    ``n_tasks`` models on the same rows, each its own tree, together (epsilon, delta)-DP exactly.

    The tree of one task is ``mu_1``-GDP with ``mu_1 = 2 C sqrt(depth) / sigma``
    (:mod:`skdpsco.solvers.tree`); ``n_tasks`` of them compose to ``sqrt(n_tasks) mu_1``, so
    ``sigma = 2 C sqrt(depth n_tasks) z`` with ``z`` the noise multiplier of one Gaussian release
    meeting (epsilon, delta) (:func:`calibrated_noise_std`).
    """
    for name, value in (("n_calls", n_calls), ("steps_per_call", steps_per_call), ("n_tasks", n_tasks)):
        if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1):
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}.")
    exponent = _potential_exponent(constraint, p, problem.n_params)
    radius = float(problem.radius)
    clip = float(problem.constants.lipschitz if clip_norm is None else clip_norm)
    if not 0.0 < clip < math.inf:
        raise ValueError(
            f"Private FTRL clips per-row gradients to a public norm C, and the loss {problem.loss.name!r} has no "
            f"finite Lipschitz bound on this domain to default to (got C={clip!r}); pass clip_norm > 0."
        )
    n_leaves = int(n_calls) * int(steps_per_call)
    smoothness = problem.smoothness
    scale = math.sqrt(tree.tree_depth(n_leaves) * n_tasks)
    sigma = calibrated_noise_std(clip * scale, float(problem.epsilon), float(problem.delta))
    # the dual norm of a prefix's noise: sqrt(d terms) sigma, or (d m_q)**(1/q) sqrt(terms) sigma (§2.4)
    noise_norm = noisy_gradient_bound(0.0, sigma * math.sqrt(tree.max_prefix_terms(n_leaves)), problem.n_params, exponent)
    return StreamPlan(
        constraint, exponent, radius, clip, sigma, int(n_calls), int(steps_per_call),
        radius / math.sqrt(2.0 * (exponent - 1.0)), clip + float(problem.l2_penalty) * radius, noise_norm,
        smoothness if smoothness > 0.0 else math.inf,
    )


def stream_batch_sizes(n_rows: int, steps_per_call: int) -> np.ndarray:
    """The leaves of a call of ``n_rows`` rows: ``steps_per_call`` consecutive blocks of ``n_rows //
    k`` or ``n_rows // k + 1`` rows (larger first; empty when ``n_rows < k``), each row in one."""
    sizes = np.full(steps_per_call, n_rows // steps_per_call, dtype=np.int64)
    sizes[: n_rows - int(sizes.sum())] += 1
    return sizes


@dataclass
class StreamState:
    """What one task of a stream carries from call to call: the iterate, the tree's state, and
    the public counts the steps are computed from."""

    w: np.ndarray
    prefix: tree.TreeNoisePrefix
    rows: int = 0
    squares: int = 0
    step: float = math.inf

    @classmethod
    def start(cls, plan: StreamPlan, shape: tuple) -> StreamState:
        """``w_1 = 0`` and an empty tree of ``plan.n_leaves`` leaves."""
        return cls(np.zeros(shape), tree.TreeNoisePrefix(shape, plan.noise_std, plan.n_leaves))


def summed_gradient(gradient: _core.GradientFn) -> _core.GradientFn:
    """A leaf's value: ``b`` times the batch mean of :func:`clipped_gradient` (the sum of its rows'
    clipped gradients plus ``lambda b w``), zero for an empty leaf."""

    def leaf(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        return X.shape[0] * gradient(w, X, y) if X.shape[0] else np.zeros_like(w)

    return leaf


def stream_steps(
    plan: StreamPlan, state: StreamState, X: np.ndarray, y: np.ndarray, problem: Problem, rng: np.random.Generator
) -> np.ndarray:
    """One call: ``plan.steps_per_call`` lazy FTRL steps (:func:`lazy_ftrl`) over consecutive
    blocks of the clipped rows ``X`` (:func:`stream_batch_sizes`), on the tree's noisy prefix sums
    (the nodes this call completes drawn from ``rng``); updates ``state`` and returns the new
    iterate."""
    state.prefix.rng = rng
    sizes = stream_batch_sizes(X.shape[0], plan.steps_per_call)
    steps = plan.steps(sizes, state.rows, state.squares, state.step)
    gradient = summed_gradient(clipped_gradient(problem.loss, plan.clip_norm, float(problem.l2_penalty)))
    batches = iter_batches(X, y, np.arange(X.shape[0]), sizes)
    state.w = lazy_ftrl(gradient, batches, steps, state.prefix, plan.mirror_step, state.w)
    state.rows += int(sizes.sum())
    state.squares += int((sizes**2).sum())
    state.step = float(steps[-1])
    return state.w


@dataclass(frozen=True)
class StreamFTRL:
    """Private FTRL over a stream of calls with tree aggregation (``partial_fit``).

    Parameters
    ----------
    constraint, p, clip_norm
        As in :class:`PrivateFTRL`.
    steps_per_call : int, default=:data:`STEPS_PER_CALL`
        Leaves of each call: its rows are split into this many disjoint blocks, one FTRL step
        each. Public; the tree has ``n_calls * steps_per_call`` leaves.
    """

    constraint: str | None = "l2"
    p: float | None = None
    clip_norm: float | None = None
    steps_per_call: int = STEPS_PER_CALL

    requires_smooth_loss = False

    def plan(self, problem: Problem, n_calls: int, n_tasks: int = 1) -> StreamPlan:
        return plan_stream(problem, n_calls, self.steps_per_call, self.constraint, self.p, self.clip_norm, n_tasks)


# -- the public algorithm -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PrivateFTRL:
    """Private FTRL / noisy lazy mirror descent (``ftrl_mirror.md``), public name ``'ftrl'``.

    One pass, one row per step, fresh Gaussian noise per step, accounted as one Gaussian release per
    row with sensitivity ``2 C`` (§3.5; the paper's amplified calibration is unsound and not offered).
    Works for non-smooth losses (hinge, absolute): no smoothness is used.

    Parameters
    ----------
    constraint : {'l2', 'l1', 'lp', None}, default='l2'
        The domain: the ball of that norm with radius ``problem.radius``, or ``R^d`` (None,
        Euclidean; exactly noisy SGD with the fixed schedule).
    p : float or None, default=None
        Exponent of the potential ``||w||_p**2 / (2 (p - 1))``, in ``(1, 2]``. Required for ``'lp'``;
        for ``'l1'``, None means ``2``, the Euclidean potential (module docstring, "Geometries"), and
        ``1 + 1 / ln d`` is the l1 geometry of §1.4; must be None for ``'l2'`` and None.
    schedule : {'fixed', 'anytime'}, default='fixed'
        ``eta = D / (G sqrt(n))`` or ``eta_t = D / (G sqrt(t))`` (§2.4).
    clip_norm : float or None, default=None
        ``C``, the public l2 bound per-row loss gradients are clipped to. None: the loss's Lipschitz
        bound on the domain (clipping is then a no-op).
    average : bool, default=False
        Release the mean of the iterates ``w_1..w_T`` instead of the last iterate ``w_{T+1}``.
    batch_size : int or None, default=None
        Rows per step ``b`` (each row is still read once; the privacy event does not depend on it).
        None: :func:`default_batch_size`, the batch that minimises the bound of Thm 5.1. ``1`` is
        the paper's Algorithm 1.
    """

    constraint: str | None = "l2"
    p: float | None = None
    schedule: str = "fixed"
    clip_norm: float | None = None
    average: bool = False
    batch_size: int | None = None

    requires_smooth_loss = False  # subgradients suffice (Thm 5.1 / A.3); privacy needs only the clip
    shuffles_rows = True  # run(..., order=None) reads the rows in a uniformly random order it draws

    def __post_init__(self):
        if self.constraint not in CONSTRAINTS:
            raise ValueError(f"constraint must be one of {CONSTRAINTS}; got {self.constraint!r}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}; got {self.schedule!r}.")
        clip = self.clip_norm
        if clip is not None and not (isinstance(clip, numbers.Real) and 0 < clip < math.inf):
            raise ValueError(f"clip_norm must be None or a finite number > 0; got {self.clip_norm!r}.")
        b = self.batch_size
        if b is not None and not (isinstance(b, numbers.Integral) and not isinstance(b, bool) and b >= 1):
            raise ValueError(f"batch_size must be None or an integer >= 1; got {self.batch_size!r}.")

    def plan(self, problem: Problem) -> FTRLPlan:
        return plan_ftrl(
            problem, self.constraint, self.p, self.schedule, self.clip_norm, self.average, self.batch_size
        )

    def run(self, plan, X, y, problem: Problem, rng: np.random.Generator, order=None) -> SolverResult:
        return run_ftrl(plan, X, y, problem, rng, order)
