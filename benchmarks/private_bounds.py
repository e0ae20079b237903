"""Private bounds against the true bound (issue 19): ``data_norm='private'`` and ``y_bound='private'``.

    python -m benchmarks.private_bounds                  # the real sets, 10 seeds, epsilon in {1, 3}
    python -m benchmarks.private_bounds --validation     # the tuning sets (benchmarks.real.VALIDATION)
    python -m benchmarks.private_bounds --seeds 3 --epsilons 1

For each real data set of :mod:`benchmarks.real` (same loaders, splits, deltas and metrics):

* classification, ``DPLogisticRegression()`` defaults: ``data_norm='private'`` (with the default
  feature scaling, the private per-feature orders of magnitude bound the rows, as with ``None``)
  against ``data_norm`` = the largest row norm of the training rows (**the true bound**: an
  oracle, read from the data, not private; the feature scaling then clips the rows to it and
  standardises them), and against the fixed default of ``feature_scaling=None`` (rows clipped to
  norm 1, the fit that issues the fixed-bound ``PrivacyWarning``);
* regression, ``DPLpRegression()`` defaults: ``y_bound='private'`` against ``y_bound`` = the
  largest ``|y|`` of the training targets (the true bound, an oracle) and against the data set's
  public bound (1: :mod:`benchmarks.real` divides the targets by it).

Goal (issue 19): at epsilon = 1 the private bound within 0.01 AUC (binary; accuracy for
multi-class) or 5 % RMSE of the fit given the true bound. Results:
``benchmarks/results/private_bounds[_validation].md``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from skdpsco import DPLogisticRegression, DPLpRegression, PrivacyAccountant

from . import real
from .machine import machine_info
from .utility import RESULTS

PRIVATE = "private bound"
TRUE = "true bound (oracle)"
FIXED = "fixed default / public bound"

GOAL = {"binary": 0.01, "multiclass": 0.01, "regression": 1.05}
"""Largest AUC / accuracy loss, or RMSE ratio, of the private bound against the true bound at epsilon 1."""


class _TrueRowBound(DPLogisticRegression):
    """The oracle: ``data_norm`` set to the largest norm of the rows it is fitted on (not private)."""

    def fit(self, X, y):
        self.data_norm = float(np.linalg.norm(np.asarray(X, dtype=float), axis=1).max())
        return super().fit(X, y)


class _TrueTargetBound(DPLpRegression):
    """The oracle: ``y_bound`` set to the largest ``|y|`` it is fitted on (not private)."""

    def fit(self, X, y):
        self.y_bound = float(np.abs(np.asarray(y, dtype=float)).max())
        return super().fit(X, y)


def _classifier(kind, epsilon, delta, seed, classes):
    common = dict(epsilon=epsilon, delta=delta, random_state=seed, accountant=PrivacyAccountant(),
                  classes=list(classes))
    if kind == TRUE:
        return _TrueRowBound(**common)
    if kind == PRIVATE:
        return DPLogisticRegression(data_norm="private", **common)
    return DPLogisticRegression(feature_scaling=None, **common)


def _regressor(kind, epsilon, delta, seed):
    common = dict(epsilon=epsilon, delta=delta, random_state=seed, accountant=PrivacyAccountant())
    if kind == TRUE:
        return _TrueTargetBound(**common)
    return DPLpRegression(y_bound="private" if kind == PRIVATE else 1.0, **common)


def entries() -> list:
    def make(kind):
        def build(task, epsilon, delta, seed, classes):
            if task == "regression":
                return _regressor(kind, epsilon, delta, seed)
            return _classifier(kind, epsilon, delta, seed, classes)
        return build
    return [real.Entry(kind, True, make(kind)) for kind in (PRIVATE, TRUE, FIXED)]


def _paired_error(records, metric, dataset, epsilon, task) -> float:
    """Standard error of the private-vs-true comparison over the seeds, paired (both fits of a seed
    share its split): of the per-seed differences, or of the per-seed RMSE ratios."""
    def by_seed(kind):
        return {r["seed"]: r[metric] for r in real._select(records, dataset=dataset, model=kind, epsilon=epsilon)
                if metric in r}
    private, true = by_seed(PRIVATE), by_seed(TRUE)
    seeds = sorted(set(private) & set(true))
    if len(seeds) < 2:
        return float("nan")
    pairs = np.array([private[s] / true[s] if task == "regression" else private[s] - true[s] for s in seeds])
    return float(pairs.std(ddof=1) / np.sqrt(len(pairs)))


def table(datasets, records, epsilons) -> str:
    lines = ["| dataset | metric | ε | private bound | true bound (oracle) | fixed / public | private vs true (± paired standard error) | goal (ε = 1) |",
             "|---|---|---|---|---|---|---|---|"]
    for dataset in datasets:
        metric = real.METRICS[dataset.task][0]
        for epsilon in epsilons:
            means = {kind: real.summary(records, metric, dataset=dataset.name, model=kind, epsilon=epsilon)
                     for kind in (PRIVATE, TRUE, FIXED)}
            text = {kind: f"{m[0]:.3f} ± {m[1]:.3f}" for kind, m in means.items()}
            private, true = means[PRIVATE][0], means[TRUE][0]
            paired = _paired_error(records, metric, dataset.name, epsilon, dataset.task)
            if dataset.task == "regression":
                versus, ok = f"{private / true:.3f}× (± {paired:.3f})", private / true <= GOAL["regression"]
            else:
                versus, ok = f"{private - true:+.3f} (± {paired:.3f})", true - private <= GOAL[dataset.task]
            verdict = ("**yes**" if ok else "no") if epsilon == 1.0 else ""
            lines.append(f"| {dataset.name} | {metric} | {epsilon:g} | {text[PRIVATE]} | {text[TRUE]} | "
                         f"{text[FIXED]} | {versus} | {verdict} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--validation", action="store_true", help="the tuning sets instead of the benchmark's")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 3.0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    registry = real.VALIDATION if args.validation else real.DATASETS
    chosen = [registry[name] for name in (args.datasets or registry)]
    started = time.perf_counter()
    records = real.run(chosen, args.epsilons, args.seeds, ("raw",), entries())
    text = table(chosen, records, args.epsilons)
    minutes = (time.perf_counter() - started) / 60
    stem = "private_bounds" + ("_validation" if args.validation else "")
    (RESULTS / f"{stem}.md").write_text(
        f"# Private bounds against the true bound ({stem})\n\nMachine: {machine_info()}\n\n"
        f"Run: {args.seeds} seeds, epsilon {args.epsilons}, raw rows, {minutes:.1f} min "
        f"(`python -m benchmarks.private_bounds{' --validation' if args.validation else ''}`)\n\n{text}\n")
    print(text)


if __name__ == "__main__":
    main()
