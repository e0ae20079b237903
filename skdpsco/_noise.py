"""The draw points of privacy noise: every noisy release of a fit draws its noise here.

:func:`gaussian_noise` and :func:`laplace_noise` are the only places floating-point privacy
noise is drawn, and :func:`release_noise` the noise of one release ``value + noise``. Each is
looked up on this module at call time by its callers, so that tests and the audits
(``tests/conftest.py``, ``benchmarks/whitebox.py``) can weaken or observe the noise by replacing the
one name here. The module imports nothing of the package: it is the bottom layer of the solvers,
the scaling and :mod:`skdpsco._secure`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gaussian_noise", "laplace_noise", "release_noise"]


def gaussian_noise(rng: np.random.Generator, std, shape: tuple) -> np.ndarray:
    """The one place privacy noise is drawn: ``N(0, std**2)`` in float64.

    ``std`` is a float, or an array broadcastable to ``shape`` (one standard deviation per row of
    noise, as the compiled loop asks for a chunk of steps at once); the draws are the same, in the
    same order, as one call per row.

    Drawn as standard normals scaled in place: the same numbers, bit for bit, as
    ``rng.normal(0.0, std, size=shape)`` (numpy draws each as ``0.0 + std * z`` from the same
    standard normal ``z``), without that call's slower path for an array of ``std``.

    Floating-point Gaussian sampling is not formally DP (Mironov 2012); a fixed ``random_state``
    reproduces the noise and is for experiments only.
    """
    std = np.asarray(std, dtype=np.float64)
    if np.any(std < 0) or not np.all(np.isfinite(std)):
        raise ValueError(f"The noise's standard deviation must be finite and >= 0; got {std!r}.")
    noise = rng.standard_normal(shape)
    noise *= std
    if not np.all(std):
        noise += 0.0  # numpy's 0.0 + 0.0 * z is +0.0, where 0.0 * z alone is -0.0 for a negative z
    return noise


def release_noise(value, scale, rng: np.random.Generator, draw=None) -> np.ndarray:
    """The noise of one noisy release ``value + noise``: ``draw(rng, scale, np.shape(value))``.

    Every mechanism that releases a data-dependent ``value`` plus noise calibrated to the
    sensitivity of ``value`` (an output, a phase's point, a noisy gradient, a noisy statistic)
    draws that noise here and adds it itself, as it did before, so results are unchanged.
    ``draw`` is :func:`gaussian_noise` by default (looked up at call time, so tests can weaken
    it), or another draw point of the same signature (:func:`laplace_noise`), and ``scale`` its
    standard deviation or scale.

    Naming the released value is the point: the white-box sensitivity audits
    (``benchmarks/whitebox.py``, ``tests/test_whitebox.py``) replace this function to observe
    ``(value, scale, noise)`` of every release on neighbouring datasets with the same noise, and
    to replay a neighbour's run on the released history of the other. The compiled SGD loop
    draws its noise in chunks instead; the audits run its numpy reference, which releases each
    noisy gradient here with the same iterates.
    """
    return (gaussian_noise if draw is None else draw)(rng, scale, np.shape(value))


def laplace_noise(rng: np.random.Generator, scale: float, shape: tuple) -> np.ndarray:
    """The one place Laplace privacy noise is drawn: i.i.d. ``Lap(scale)`` coordinates in float64.

    Like :func:`gaussian_noise`, floating-point sampling is not formally DP
    (Mironov 2012), and a fixed ``random_state`` is for experiments only. Looked up on this module
    at call time, so tests can weaken it.
    """
    return rng.laplace(0.0, scale, size=shape)
