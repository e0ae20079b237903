"""Rare columns: the orders of magnitude and the floor on the released variances of the feature scaling.

    python -m benchmarks.rare_column                    # synthetic table + benchmarks.real sets, 10 seeds
    python -m benchmarks.rare_column --seeds 3 --datasets fair --epsilons 1

The feature scaling (:mod:`skdpsco.linear_model._scaling`) divides every feature by a released
power of two (``release_magnitudes``), then by a released scale floored at ``VARIANCE_THRESHOLD``
standard deviations of its noise (``ScalingPlan.variance_floor``). A one-hot level present in a few
rows has a histogram of orders that is mostly noise and a variance near the noise of its release;
its coefficient is divided by both. This harness compares the rules of :data:`VARIANTS` with the
defaults, paired by seed:

* ``synthetic``: three numeric columns and the indicators of a four-level categorical (levels in
  60 / 30 / 9.2 / 0.8 % of the rows, the first the reference), a logistic model of all of them;
  the coefficient of the 0.8 % level against the non-private ``StandardScaler`` +
  ``LogisticRegression`` one, and the held-out AUC (20 000 rows);
* the sets of :mod:`benchmarks.real` (same loaders, splits, deltas and metric, raw rows): the
  held-out metric of the defaults. Results: ``benchmarks/results/rare_column.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from unittest import mock

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.linear_model import _scaling

from . import real
from .machine import machine_info
from .utility import RESULTS

LEVELS = (0.6, 0.3, 0.092, 0.008)
"""Shares of the categorical's levels; the first is the reference, the last the rare one."""


def rare_table(n: int, rng: np.random.Generator):
    """``(X, y)``: three numeric columns on different scales and the indicators of levels 1-3."""
    numeric = rng.normal(size=(n, 3)) * [1.0, 10.0, 0.1] + [0.0, 50.0, 1.0]
    indicators = np.eye(len(LEVELS))[rng.choice(len(LEVELS), size=n, p=LEVELS)][:, 1:]
    logit = (numeric[:, 0] + (numeric[:, 1] - 50.0) / 10.0 - 5.0 * (numeric[:, 2] - 1.0)
             + indicators @ [0.5, -0.5, -0.8])
    return np.hstack([numeric, indicators]), (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)


VARIANTS = {
    "default": {},
    "former rules": {"MAGNITUDE_MARGIN": 2 * _scaling.MAGNITUDE_RANGE, "RELATIVE_SCALE_FLOOR": 0.0},
    "no relative floor": {"RELATIVE_SCALE_FLOOR": 0.0},
    "floor 4": {"VARIANCE_THRESHOLD": 4.0},
}
"""The rules compared, as values of :mod:`skdpsco.linear_model._scaling`'s constants: the defaults;
``former rules``, every order significant at ``MAGNITUDE_THRESHOLD`` kept however far below the
median (the margin out of reach) and no ``RELATIVE_SCALE_FLOOR`` (the rules before both); ``no
relative floor``, the defaults without ``RELATIVE_SCALE_FLOOR``; ``floor 4``, the released
variances floored at four standard deviations of their noise instead of ``VARIANCE_THRESHOLD``."""


def _fits(variant: str):
    """The context in which the fits of ``variant`` run (the defaults: no patch)."""
    patches = VARIANTS[variant]
    return mock.patch.multiple(_scaling, **patches) if patches else contextlib.nullcontext()


def synthetic_cell(n: int, epsilon: float, seeds: int) -> dict:
    """The rare level's coefficient and the held-out AUC under every variant, seeds ``0..seeds-1``."""
    rng = np.random.default_rng(123)
    X, y = rare_table(n, rng)
    X_test, y_test = rare_table(20_000, rng)
    reference = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)).fit(X, y)
    target = reference[-1].coef_[0, -1] / reference[0].scale_[-1]
    out = {"n": n, "epsilon": epsilon, "reference": float(target),
           "reference_auc": float(roc_auc_score(y_test, reference.decision_function(X_test)))}
    for variant in VARIANTS:
        coefs, aucs = [], []
        with _fits(variant):
            for seed in range(seeds):
                model = DPLogisticRegression(epsilon=epsilon, classes=[0, 1], random_state=seed,
                                             accountant=PrivacyAccountant()).fit(X, y)
                coefs.append(model.coef_[0, -1])
                aucs.append(roc_auc_score(y_test, model.decision_function(X_test)))
        out[variant] = {"coef": np.array(coefs), "auc": np.array(aucs)}
    return out


def real_cell(dataset, X, y, epsilon: float, seeds: int) -> dict:
    """The held-out metric of the defaults under every variant, paired by split with the default:
    the difference (the RMSE ratio for regression), its standard error and the splits where the
    two agree exactly."""
    metric = real.METRICS[dataset.task][0]
    values = {}
    for variant in VARIANTS:
        scores = []
        with _fits(variant):
            for seed in range(seeds):
                X_train, X_test, y_train, y_test = real.split(dataset, X, y, seed)
                model = real._skdpsco_defaults(dataset.task, epsilon, real.default_delta(len(X_train)), seed,
                                               dataset.classes).fit(X_train, y_train)
                scores.append(real.scores(model, X_test, y_test, dataset.task)[metric])
        values[variant] = np.array(scores)
    default = values["default"]
    paired = {}
    for variant, other in values.items():
        change = other / default if metric == "rmse" else other - default
        paired[variant] = (float(change.mean()), float(change.std(ddof=1) / math.sqrt(seeds)),
                           int(np.sum(other == default)))
    return {"dataset": dataset.name, "metric": metric, "epsilon": epsilon, "values": values, "paired": paired}


def synthetic_table(cells) -> str:
    lines = ["| n | ε | non-private coef | rule | rare coef per seed | median abs. error | largest abs. coef "
             "| AUC (non-private) |", "|---|---|---|---|---|---|---|---|"]
    for c in cells:
        for variant in VARIANTS:
            coef, auc = c[variant]["coef"], c[variant]["auc"]
            lines.append(
                f"| {c['n']} | {c['epsilon']:g} | {c['reference']:.2f} | {variant} | "
                f"{' '.join(f'{v:.3g}' for v in coef)} | {np.median(np.abs(coef - c['reference'])):.2f} | "
                f"{np.abs(coef).max():.3g} | {auc.mean():.4f} ± {auc.std():.4f} ({c['reference_auc']:.4f}) |"
            )
    return "\n".join(lines)


def real_table(cells) -> str:
    others = [variant for variant in VARIANTS if variant != "default"]
    header = ["data", "metric", "ε", "default"] + [f"{v} vs default (SE; identical splits)" for v in others]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for c in cells:
        row = [c["dataset"], c["metric"], f"{c['epsilon']:g}", f"{c['values']['default'].mean():.4f}"]
        for variant in others:
            mean, se, identical = c["paired"][variant]
            change = f"{mean:.3f}×" if c["metric"] == "rmse" else f"{mean:+.4f}"
            row.append(f"{change} (± {se:.4f}; {identical})")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--datasets", nargs="+", default=list(real.DATASETS))
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 3.0])
    args = parser.parse_args(argv)
    start = time.perf_counter()
    synthetic = [synthetic_cell(6000, epsilon, args.seeds) for epsilon in args.epsilons]
    print(synthetic_table(synthetic), flush=True)
    cells = []
    for name in args.datasets:
        dataset = real.DATASETS[name]
        try:
            X, y = dataset.load()
        except ImportError as exc:  # statsmodels sets outside the peers environment
            print(f"{name}: skipped ({exc})")
            continue
        for epsilon in args.epsilons:
            cells.append(real_cell(dataset, X, y, epsilon, args.seeds))
            print(real_table(cells[-1:]).splitlines()[-1], flush=True)
    minutes = (time.perf_counter() - start) / 60
    text = "\n\n".join([
        "# Rare columns: the orders of magnitude and the floor on the released variances (rare_column)",
        f"Machine: {machine_info()}",
        f"Run: {args.seeds} seeds, ε in {args.epsilons}, {minutes:.1f} min. `python -m benchmarks.rare_column`.",
        "Rules (`VARIANTS`): " + "; ".join(f"{name}: {patch or 'the package defaults'}" for name, patch in VARIANTS.items()) + ".",
        "Synthetic table (6000 training rows, the rare level in 0.8 % of them): the rare level's `coef_` "
        "against the non-private `StandardScaler` + `LogisticRegression` one.",
        synthetic_table(synthetic),
        "Real sets (benchmarks.real, raw rows, held-out metric of the defaults), paired by split: each rule "
        "minus the default (AUC, accuracy: higher is better) or their RMSE ratio (below 1 is better); "
        "'identical splits': the two rules gave the same model's metric.",
        real_table(cells),
    ])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "rare_column.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
