"""The projected noisy SGD core shared by every solver.

One loop, used by all algorithms: consecutive disjoint batches read from an iterator of row
blocks, averaged gradient, optional Gaussian noise on the gradient, Euclidean projection onto
the ball of public radius, last iterate returned (``feldman.md`` §A1 pseudocode, pitfalls D1,
D4, D5). Solvers differ only in the schedule they feed it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

GradientFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class SolverResult:
    """What every solver returns (``DESIGN.md``, "What a solver returns").

    Attributes
    ----------
    coef : ndarray
        Released parameters (augmented with the intercept column when the estimator fits one).
    dp_event : dp_accounting.DpEvent
        Describes the whole release, in the convention of :mod:`skdpsco.accounting`.
    n_gradients : int
        Per-example gradient evaluations (the papers' complexity measure).
    info : dict
        Public diagnostics only: functions of the schedule, never of the data.
    """

    coef: np.ndarray
    dp_event: object
    n_gradients: int
    info: dict = field(default_factory=dict)


def project_to_ball(w: np.ndarray, radius: float | None) -> np.ndarray:
    """Euclidean (Frobenius for matrices) projection onto ``{||w|| <= radius}``; 1-Lipschitz."""
    if radius is None:
        return w
    norm = np.linalg.norm(w)
    return w if norm <= radius else w * (radius / norm)


def clip_rows(X: np.ndarray, max_norm: float) -> np.ndarray:
    """Scale every row to ``l2`` norm at most ``max_norm``: a per-row map, so it costs no privacy
    and enforces the public bound (``feldman.md`` pitfall D3)."""
    norms = np.linalg.norm(X, axis=1)
    scale = np.minimum(1.0, max_norm / np.maximum(norms, np.finfo(float).tiny))
    return X * scale[:, None]


def gaussian_noise(rng: np.random.Generator, std: float, shape: tuple) -> np.ndarray:
    """The one place privacy noise is drawn: ``N(0, std**2)`` in float64.

    Floating-point Gaussian sampling is not formally DP (Mironov 2012); a fixed ``random_state``
    reproduces the noise and is for experiments only.
    """
    return rng.normal(0.0, std, size=shape)


def iter_batches(
    X: np.ndarray, y: np.ndarray, order: np.ndarray, batch_sizes: Iterable[int]
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Consecutive disjoint row blocks ``X[order[start:start + B]]``, each row used once."""
    start = 0
    for size in batch_sizes:
        rows = order[start : start + size]
        start += size
        yield X[rows], y[rows]


def projected_noisy_sgd(
    gradient: GradientFn,
    batches: Iterable[tuple[np.ndarray, np.ndarray]],
    steps: np.ndarray,
    noise_stds: np.ndarray,
    w0: np.ndarray,
    radius: float | None,
    rng: np.random.Generator,
    average: bool = False,
) -> np.ndarray:
    """Run ``w <- Pi_K(w - eta_t (g_t + xi_t))`` over the batches and return the last iterate.

    With ``average=True`` return instead the mean of the points at which the gradients were
    taken (``w_0 .. w_{T-1}``, ``feldman.md`` §A6). Averaging is only for algorithms whose
    privacy comes from output perturbation: an amplification-by-iteration guarantee covers the
    last iterate alone (FKT20 §6, ``feldman.md`` §A9), and those solvers never ask for it.

    Parameters
    ----------
    gradient : callable
        ``gradient(w, X_batch, y_batch)``: the batch-averaged loss gradient at ``w``.
    batches : iterable of (X_batch, y_batch)
        Consumed in order, one per step; must yield exactly ``len(steps)`` blocks.
    steps, noise_stds : ndarray of shape (T,)
        Step size and standard deviation of the Gaussian noise added to the averaged gradient
        (0 for no noise) at each step.
    w0 : ndarray
        Starting point (inside the ball).
    radius : float or None
        Radius of the domain ball ``K``; ``None`` for ``R^p``.
    rng : numpy.random.Generator
        Source of the noise, independent of the batch order.
    """
    w = np.array(w0, dtype=float)
    total = np.zeros_like(w)
    for (X_batch, y_batch), eta, sigma in zip(batches, steps, noise_stds, strict=True):
        total += w
        g = gradient(w, X_batch, y_batch)
        if sigma > 0:
            g = g + gaussian_noise(rng, sigma, w.shape)
        w = project_to_ball(w - eta * g, radius)
    return total / len(steps) if average else w


def margin_gradient(loss, l2_penalty: float = 0.0) -> GradientFn:
    """Batch-averaged gradient in ``w`` of ``loss(<w, x>, y) + l2_penalty ||w||**2 / 2``.

    ``w`` has shape (p,) for binary and regression losses and (K, p) for multiclass losses; the
    gradient of a row is ``loss.derivative(z, y) x`` (outer product for multiclass).
    """

    def gradient(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        z = X @ w.T
        g = loss.derivative(z, y).T @ X / X.shape[0]
        return g + l2_penalty * w if l2_penalty else g

    return gradient
