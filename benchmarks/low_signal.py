"""Rows too few for the per-feature orders of magnitude: the default's switch to one row bound.

    python -m benchmarks.low_signal                 # the real sets (benchmarks.real.DATASETS)
    python -m benchmarks.low_signal --validation    # the tuning sets, where the rule was chosen
    python -m benchmarks.low_signal --seeds 5 --epsilons 1
    python -m benchmarks.low_signal --rows normalizer   # rows through Normalizer first (as real.py's second row set)

The feature scaling's first release (:func:`skdpsco.linear_model._scaling.release_magnitudes`) is a
noisy histogram of every feature's binary orders of magnitude; a window of orders sets a feature's
scale when its noisy count exceeds ``ScalingPlan.magnitude_threshold``. A window holds at most ``n``
counts, so below ``n / threshold = 1`` (a public function of ``n``, ``d`` and the budget) no
window is significant but by noise, and every feature's divisor is the release's fallback, read
from noise: a feature divided by a power far below its size then dominates every clipped row.
There ``fit`` releases one row bound instead (``data_norm='private'``,
``BaseDPLinearModel._magnitudes_resolvable``).

For each data set and epsilon (same loaders, splits, deltas and metrics as :mod:`benchmarks.real`,
raw rows or, with ``--rows normalizer``, rows through ``Normalizer``), the defaults with the per-feature magnitudes forced (``magnitudes``) against
``data_norm='private'`` (``row bound``), paired by seed: the mean difference (row bound minus
magnitudes; for RMSE the ratio) and its standard error. ``switch`` marks the cells where the
default takes the row bound. Results: ``benchmarks/results/low_signal[_validation].md``.
"""

from __future__ import annotations

import argparse
import math
import time
from unittest import mock

import numpy as np

from skdpsco import DPLogisticRegression, DPLpRegression, PrivacyAccountant
from skdpsco.linear_model._base import BaseDPLinearModel

from . import real
from .machine import machine_info
from .utility import RESULTS


def _estimator(dataset, epsilon, delta, seed, data_norm):
    common = dict(epsilon=epsilon, delta=delta, random_state=seed, accountant=PrivacyAccountant(), data_norm=data_norm)
    if dataset.task == "regression":
        return DPLpRegression(**common)
    return DPLogisticRegression(classes=list(dataset.classes), **common)


def _metric(dataset) -> str:
    return {"binary": "auc", "multiclass": "accuracy", "regression": "rmse"}[dataset.task]


def _signal_ratio(estimator, n_samples: int, n_features: int) -> float:
    """``n`` over the count a window of the magnitudes release must exceed (public)."""
    plan = estimator._plan_scaling(n_samples, n_features)
    return n_samples / plan.magnitude_threshold


def cell(dataset, X, y, epsilon: float, seeds: int) -> dict:
    """Both paths on ``seeds`` splits; the paired comparison."""
    metric = _metric(dataset)
    magnitudes, row_bound = [], []
    for seed in range(seeds):
        X_train, X_test, y_train, y_test = real.split(dataset, X, y, seed)
        delta = real.default_delta(len(X_train))
        with mock.patch.object(BaseDPLinearModel, "_magnitudes_resolvable", return_value=True):
            forced = _estimator(dataset, epsilon, delta, seed, None).fit(X_train, y_train)
        magnitudes.append(real.scores(forced, X_test, y_test, dataset.task)[metric])
        bounded = _estimator(dataset, epsilon, delta, seed, "private").fit(X_train, y_train)
        row_bound.append(real.scores(bounded, X_test, y_test, dataset.task)[metric])
    ratio = _signal_ratio(_estimator(dataset, epsilon, delta, 0, None), *X_train.shape)
    a, b = np.array(magnitudes), np.array(row_bound)
    paired = b / a if metric == "rmse" else b - a
    return {
        "dataset": dataset.name, "metric": metric, "epsilon": epsilon, "n": X_train.shape[0], "d": X_train.shape[1],
        "signal_ratio": ratio, "switch": ratio <= 1.0, "magnitudes": a, "row_bound": b,
        "paired": float(paired.mean()), "paired_se": float(paired.std(ddof=1) / math.sqrt(seeds)),
    }


def table(cells) -> str:
    lines = [
        "| data | metric | ε | n | d | n / threshold | default takes | magnitudes | row bound | row bound − magnitudes (SE) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        sign = "×" if c["metric"] == "rmse" else ""
        paired = f"{c['paired']:.3f}{sign}" if sign else f"{c['paired']:+.3f}"
        lines.append(
            f"| {c['dataset']} | {c['metric']} | {c['epsilon']:g} | {c['n']} | {c['d']} | {c['signal_ratio']:.2f} "
            f"| {'**row bound**' if c['switch'] else 'magnitudes'} "
            f"| {c['magnitudes'].mean():.3f} ± {c['magnitudes'].std():.3f} | {c['row_bound'].mean():.3f} ± "
            f"{c['row_bound'].std():.3f} | {paired} (± {c['paired_se']:.3f}) |"
        )
    return "\n".join(lines)


def verdict(cells) -> str:
    """How often the row bound is at least as good (within one paired SE) where the default switches."""
    switched = [c for c in cells if c["switch"]]

    def better(c):
        if c["metric"] == "rmse":
            return c["paired"] <= 1.0 + c["paired_se"]
        return c["paired"] >= -c["paired_se"]

    return (f"Cells where the default takes the row bound: {len(switched)}; the row bound at least as good "
            f"(within one paired standard error) in {sum(map(better, switched))} of them.")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--validation", action="store_true", help="the tuning sets (benchmarks.real.VALIDATION)")
    parser.add_argument("--seeds", type=int, default=20, help="splits per cell (default: 20)")
    parser.add_argument("--rows", choices=sorted(real.ROW_SETS), default="raw",
                        help="per-row map applied first (default: raw)")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.3, 1.0, 3.0, 10.0],
                        help="privacy budgets (default: 0.3 1 3 10)")
    args = parser.parse_args(argv)
    registry = real.VALIDATION if args.validation else real.DATASETS
    start = time.perf_counter()
    cells = []
    for dataset in registry.values():
        X, y = dataset.load()
        for step in real.ROW_SETS[args.rows]:
            X = step().fit_transform(X)  # a per-row map: each row's output depends on that row only
        for epsilon in args.epsilons:
            cells.append(cell(dataset, X, y, epsilon, args.seeds))
            print(table(cells[-1:]).splitlines()[-1], flush=True)
    minutes = (time.perf_counter() - start) / 60
    stem = ("low_signal_validation" if args.validation else "low_signal") + ("" if args.rows == "raw" else f"_{args.rows}")
    text = "\n\n".join([
        f"# The default's row bound below the magnitudes' signal threshold ({stem})",
        f"Machine: {machine_info()}",
        f"Run: {args.seeds} seeds per cell, {args.rows} rows, {minutes:.1f} min. `python -m benchmarks.low_signal"
        f"{' --validation' if args.validation else ''}{'' if args.rows == 'raw' else ' --rows ' + args.rows}`.",
        "Paired by seed; difference row bound minus magnitudes (AUC, accuracy: higher is better) or their "
        "RMSE ratio (below 1 is better). 'default takes' is the rule's choice, a function of n, d and the budget.",
        table(cells),
        verdict(cells),
    ])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.md").write_text(text + "\n")
    print(verdict(cells))


if __name__ == "__main__":
    main()
