"""The public description of one private fit, which every solver plans from
(:class:`Problem`; re-exported by :mod:`skdpsco.solvers`, whose registry imports the solvers,
so the solvers import it from here)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._core import margin_gradient

__all__ = ["Problem"]


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
