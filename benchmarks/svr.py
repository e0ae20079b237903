"""Would a ``DPLinearSVR`` (the epsilon-insensitive loss) be useful next to ``DPHuberRegressor``?

    python -m benchmarks.svr                # 10 seeds, epsilon = 1, delta = 'auto'
    python -m benchmarks.svr --seeds 2      # a quick look

The measurement with as little code as possible: no new public estimator, a benchmark-only loss
passed to ``DPHuberRegressor``. The loss is the Huber loss of the soft-thresholded residual,
``huber_t(sign(r) max(|r| - e, 0))``: zero inside the insensitive tube ``|r| <= e``, then Huber
(quadratic up to ``t`` beyond the tube, linear after). As ``t -> 0`` it is ``t`` times the
epsilon-insensitive loss ``max(|r| - e, 0)`` of ``LinearSVR``; with ``e = 0`` it is the Huber loss.
Its privacy constants are the Huber loss's (:class:`skdpsco.losses.HuberLoss`: ``|phi'| <=
min(t, |r|)``, and ``phi'`` is ``1``-Lipschitz in the margin as the composition of two
``1``-Lipschitz maps, the clip and the soft threshold), so the fit is private with the same event
as ``DPHuberRegressor``'s. ``t`` is ``DPHuberRegressor``'s default threshold and ``e`` a fraction
(:data:`TUBES`) of the same target bound: the only difference from ``DPHuberRegressor`` is the tube.

Counterparts, each after ``StandardScaler``: ``HuberRegressor`` and ``LinearSVR`` (its default
``epsilon = 0``, scikit-learn's advice "if unsure"). Datasets and splits: ``benchmarks/glm.py``'s
robust sets (75 / 25, ``random_state = seed``). Results: ``benchmarks/results/svr.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import HuberRegressor
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVR

from skdpsco import DPHuberRegressor, PrivacyAccountant
from skdpsco.losses import HuberLoss

from .glm import ROBUST_SETS, rmse
from .machine import machine_info
from .utility import RESULTS, write_with_notes

TUBES = (0.05, 0.1, 0.2)
"""Widths ``e`` of the insensitive tube, as fractions of the target bound (``DPHuberRegressor``'s
default threshold ``t`` is 0.2 of it)."""


@dataclass(frozen=True)
class InsensitiveHuberLoss(HuberLoss):
    """The Huber loss (threshold ``epsilon``) of the residual soft-thresholded at ``tube``."""

    tube: float = 0.0

    def _soft(self, z, y):
        r = np.asarray(y, dtype=np.float64) - np.asarray(z, dtype=np.float64)
        return np.sign(r) * np.maximum(np.abs(r) - self.tube, 0.0)

    def value(self, z, y):
        s = self._soft(z, y)
        return super().value(np.zeros_like(s), s)

    def derivative(self, z, y):
        s = self._soft(z, y)
        return super().derivative(np.zeros_like(s), s)


def insensitive_regressor(tube: float):
    """``DPHuberRegressor`` with the tube ``tube * target bound`` (a benchmark-only class)."""

    class DPInsensitiveHuber(DPHuberRegressor):
        def _make_loss(self):
            huber = super()._make_loss()
            return InsensitiveHuberLoss(epsilon=huber.epsilon, tube=tube * self._target_bound)

    return DPInsensitiveHuber


def _models(seed: int) -> dict:
    private = {"DPHuberRegressor": DPHuberRegressor}
    private.update({f"tube {tube:g}": insensitive_regressor(tube) for tube in TUBES})
    models = {k: make(random_state=seed, accountant=PrivacyAccountant()) for k, make in private.items()}
    models["HuberRegressor"] = make_pipeline(StandardScaler(), HuberRegressor(max_iter=1000))
    models["LinearSVR"] = make_pipeline(StandardScaler(), LinearSVR(max_iter=100000, dual="auto"))
    return models


def run_set(name: str, seeds: int) -> dict:
    """Per-seed test RMSE and MAE of every model of :func:`_models` on one set."""
    X, y = ROBUST_SETS[name]()
    records = []
    for seed in range(seeds):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=seed)
        record = {"seed": seed}
        for label, model in _models(seed).items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # convergence notes of the non-private solvers
                prediction = model.fit(X_train, y_train).predict(X_test)
            record[f"RMSE_{label}"] = rmse(y_test, prediction)
            record[f"MAE_{label}"] = float(mean_absolute_error(y_test, prediction))
        records.append(record)
    return {"dataset": name, "n": int(len(y)), "d": int(X.shape[1]), "records": records}


def table(cells: list[dict]) -> str:
    """Mean ratio (± standard error over the seeds) of each private model to each counterpart."""
    private = ["DPHuberRegressor", *(f"tube {tube:g}" for tube in TUBES)]
    lines = ["| dataset | n x d | metric | reference | " + " | ".join(private) + " |",
             "|---|---|---|---|" + "---|" * len(private)]
    for cell in cells:
        for metric in ("RMSE", "MAE"):
            for reference in ("HuberRegressor", "LinearSVR"):
                values = []
                for label in private:
                    ratios = np.array([r[f"{metric}_{label}"] / r[f"{metric}_{reference}"] for r in cell["records"]])
                    se = ratios.std(ddof=1) / np.sqrt(len(ratios)) if len(ratios) > 1 else float("nan")
                    values.append(f"{ratios.mean():.3f} ± {se:.3f}")
                lines.append(f"| {cell['dataset']} | {cell['n']} x {cell['d']} | {metric} | {reference} | "
                             + " | ".join(values) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    cells = [run_set(name, args.seeds) for name in ROBUST_SETS]
    text = table(cells)
    print(text)
    if args.seeds >= 10:
        (RESULTS / "svr.json").write_text(json.dumps({"machine": machine_info(), "cells": cells}, indent=1))
        write_with_notes(
            RESULTS / "svr.md",
            "# An epsilon-insensitive tube on DPHuberRegressor (`python -m benchmarks.svr`)\n\n"
            f"{args.seeds} seeds, epsilon = 1, delta = 'auto', private models with their defaults on the raw rows, "
            "counterparts after `StandardScaler`. Test metric over the reference's on the same split (mean ± "
            "standard error over the seeds); `tube e`: the Huber loss of the residual soft-thresholded at `e` "
            "times the target bound (the module docstring).\n\n" + text + "\n")


if __name__ == "__main__":
    main()
