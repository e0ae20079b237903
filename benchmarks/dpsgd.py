"""The standard DP-SGD baseline (Abadi et al. 2016) for linear models, a faithful numpy implementation.

Opacus is not used (no torch in the benchmark environment); this is the same algorithm:

* **Poisson sampling**: each step includes every row independently with probability
  ``q = batch_size / n``;
* **per-example clipping** of each row's gradient to l2 norm ``clip``;
* the **sum** of the clipped gradients plus ``N(0, (noise_multiplier clip)^2 I)``, divided by the
  expected batch size ``q n``;
* ``noise_multiplier`` calibrated to (epsilon, delta) with dp-accounting's **RDP accountant** for
  ``steps`` compositions of the Poisson-subsampled Gaussian (``dp_accounting.calibrate_dp_mechanism``).

Accounting note: the RDP analysis of the Poisson-subsampled Gaussian is for add-or-remove-one
neighbours, the relation DP-SGD is always reported under. skdpsco's guarantees are replace-one,
which is stronger (a replacement is a removal and an addition), so at equal (epsilon, delta) this
baseline is favoured, never handicapped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache

import dp_accounting
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from skdpsco.losses import LogisticLoss, MultinomialLogisticLoss, PowerLoss

logging.getLogger("absl").setLevel(logging.ERROR)  # RDP orders it skips are reported per call


@lru_cache(maxsize=None)
def noise_multiplier(epsilon: float, delta: float, sampling_rate: float, steps: int) -> float:
    """Smallest noise multiplier meeting (epsilon, delta) by the RDP accountant (add/remove)."""

    def event(sigma):
        step = dp_accounting.PoissonSampledDpEvent(sampling_rate, dp_accounting.GaussianDpEvent(sigma))
        return dp_accounting.SelfComposedDpEvent(step, steps)

    return float(dp_accounting.calibrate_dp_mechanism(
        lambda: dp_accounting.rdp.RdpAccountant(), event, epsilon, delta,
        dp_accounting.LowerEndpointAndGuess(1e-3, 1.0),
    ))


@dataclass
class _DPSGD(BaseEstimator):
    epsilon: float = 1.0
    delta: float = 1e-5
    epochs: int = 5
    batch_size: int = 256
    learning_rate: float = 0.5
    clip: float = 1.0
    random_state: int | None = None

    def _run(self, X, targets, loss, shape):
        rng = np.random.default_rng(self.random_state)
        n = X.shape[0]
        X = np.hstack([X, np.ones((n, 1))])
        q = min(0.1, self.batch_size / n)  # at most 10% of the rows per step
        steps = max(1, int(round(self.epochs / q)))
        sigma = noise_multiplier(self.epsilon, self.delta, q, steps)
        w = np.zeros(shape + (X.shape[1],)) if shape else np.zeros(X.shape[1])
        for _ in range(steps):
            # Poisson sampling: a Binomial(n, q) size, then a uniform subset of that size (the same
            # law as n independent coins, in O(batch) instead of O(n) work per step)
            rows = rng.choice(n, size=rng.binomial(n, q), replace=False, shuffle=False)
            g = np.zeros_like(w)
            if rows.size:
                Xb = X[rows]
                derivative = loss.derivative(Xb @ w.T, targets[rows])
                per_example = derivative[..., None] * (Xb[:, None, :] if shape else Xb)
                norms = np.sqrt(np.sum(per_example.reshape(rows.size, -1) ** 2, axis=1))
                factor = np.minimum(1.0, self.clip / np.maximum(norms, 1e-300))
                g = np.tensordot(factor, per_example, axes=1)
            g = g + rng.normal(0.0, sigma * self.clip, size=w.shape)
            w = w - self.learning_rate * g / (q * n)
        self.noise_multiplier_, self.n_steps_ = sigma, steps
        return w


class DPSGDClassifier(ClassifierMixin, _DPSGD):
    """DP-SGD logistic regression (binary) / softmax regression (multiclass)."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        encoded = np.searchsorted(self.classes_, y)
        if self.classes_.size == 2:
            self.w_ = self._run(X, 2.0 * encoded - 1.0, LogisticLoss(), ())
        else:
            self.w_ = self._run(X, encoded, MultinomialLogisticLoss(self.classes_.size), (self.classes_.size,))
        return self

    def predict(self, X):
        scores = np.hstack([X, np.ones((X.shape[0], 1))]) @ self.w_.T
        return self.classes_[(scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)]


class DPSGDRegressor(RegressorMixin, _DPSGD):
    """DP-SGD least squares."""

    def fit(self, X, y):
        self.w_ = self._run(X, np.asarray(y, dtype=float), PowerLoss(2.0), ())
        return self

    def predict(self, X):
        return np.hstack([X, np.ones((X.shape[0], 1))]) @ self.w_
