"""Does ``DPSearchCV`` earn its price? The search against the plain default at the same total epsilon.

    python -m benchmarks.search                          # 10 seeds, epsilon in {1, 3}
    python -m benchmarks.search --seeds 3 --datasets fair anes96

Run in the peers environment (statsmodels provides ``fair`` and ``anes96``; header of
``benchmarks/requirements-peers.txt``): ``PYTHONPATH=. /work/venv-peers/bin/python -m benchmarks.search``.

Data: the classification sets of :mod:`benchmarks.real` (same loaders, 70/30 stratified splits with
``random_state = seed``, ``delta = min(1e-5, n_train ** -1.1)``, raw rows), and one synthetic set
with more rows than any of them (``synthetic_20k``: :func:`benchmarks.speed.make_data`, n = 20000,
d = 20, unit-norm rows, logistic labels), the regime where the per-trial price is small.

Entries, each at the same total (epsilon, delta) on the training split, ``random_state = seed``:

* ``default``: ``DPLogisticRegression(classes=...)`` with only epsilon, delta and the seed set.
* ``search, guide grid``: ``DPSearchCV`` over the user guide's example grid ``{'alpha': [0, 1e-3,
  1e-2]}`` with ``n_iter = 3``.
* ``search, default grid``: ``DPSearchCV`` over :data:`skdpsco.model_selection.DEFAULT_PARAM_DISTRIBUTIONS`
  given explicitly (so it always searches), the default ``n_iter``; ``..., logarithmic K`` the
  same with ``n_iter_shape = 0`` (a cheaper distribution of the number of trials).
* ``DPSearchCV default``: ``DPSearchCV(estimator)`` with every search parameter at its default: the
  default grid and the rule (:data:`~skdpsco.model_selection.SEARCH_SIGNAL`), which fits the
  estimator once, with the whole budget, where searching cannot pay.
* ``one trial`` (a diagnostic, not a release): the default estimator at one trial's budget of the
  default search (the epsilon whose fit is ``trial_rho``-zCDP) on the search's training rows (the
  training split minus the held-out fifth): what every trial of the search starts from. The
  last table adds the candidates ``alpha`` in :data:`CANDIDATE_ALPHAS` at the same budget.

Columns: test ROC AUC (binary sets) and accuracy, mean +- sd over seeds; ``signal`` is the rule's
public ``n_train mu_trial / p`` (:func:`skdpsco.model_selection.search_signal`) and ``rule`` its
decision. Results: ``benchmarks/results/search.md`` and ``search.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

from skdpsco import DPLogisticRegression, DPSearchCV, PrivacyAccountant, PrivacyWarning
from skdpsco.model_selection import (
    DEFAULT_PARAM_DISTRIBUTIONS,
    SEARCH_SIGNAL,
    RandomTrials,
    calibrate_trial_rho,
)

from .machine import machine_info
from .real import DATASETS, RealDataset
from .speed import make_data
from .utility import RESULTS

GUIDE_GRID = {"alpha": [0.0, 1e-3, 1e-2]}
"""The user guide's example grid (``docs/user_guide/selection.rst``), searched with ``n_iter = 3``."""


def _synthetic():
    X, y = make_data(20000, d=20, seed=0)
    return X, (y > 0).astype(int)


SETS = {name: DATASETS[name] for name in ("breast_cancer", "anes96", "digits_binary", "fair", "wine", "digits")}
SETS["synthetic_20k"] = RealDataset("synthetic_20k", "binary", _synthetic, (0, 1), "benchmarks.speed.make_data",
                                    "logistic labels")

ENTRIES = ("default", "search, guide grid", "search, default grid", "search, default grid, logarithmic K",
           "DPSearchCV default", "one trial")

CANDIDATE_ALPHAS = (1e-4, 1e-3, 1e-2, 1e-1)
"""Further candidates measured at one trial's budget (``one trial`` is ``alpha = 0``): the default
grid's, the guide grid's ``1e-2`` and a large penalty."""

TRIALS = ("one trial",) + tuple(f"one trial, alpha={alpha:g}" for alpha in CANDIDATE_ALPHAS)


def _model(dataset, **params):
    return DPLogisticRegression(classes=list(dataset.classes), **params)


def _one_trial(dataset, X, y, epsilon, delta, seed, alpha=0.0):
    """The default (with ``alpha``) at one trial's budget of the default search, on the search's
    training rows."""
    search = DPSearchCV(_model(dataset), epsilon=epsilon, delta=delta, random_state=seed)
    rho = calibrate_trial_rho(epsilon, delta, RandomTrials(float(search.n_iter), float(search.n_iter_shape)))
    n_validation = int(round(search.validation_fraction * len(y)))
    rows = np.random.default_rng(seed).permutation(len(y))[n_validation:]
    trial_epsilon = search._candidate_epsilon({"alpha": alpha}, rho, delta, X[rows], y[rows])
    return _model(dataset, alpha=alpha, epsilon=trial_epsilon, delta=delta, random_state=seed,
                  accountant=PrivacyAccountant()).fit(X[rows], y[rows])


def _fit(entry, dataset, X, y, epsilon, delta, seed):
    common = dict(epsilon=epsilon, delta=delta, random_state=seed, accountant=PrivacyAccountant())
    if entry == "default":
        return _model(dataset, **common).fit(X, y)
    if entry == "search, guide grid":
        return DPSearchCV(_model(dataset), GUIDE_GRID, n_iter=3, **common).fit(X, y)
    if entry.startswith("search, default grid"):
        shape = 0.0 if entry.endswith("logarithmic K") else 1.0
        return DPSearchCV(_model(dataset), DEFAULT_PARAM_DISTRIBUTIONS, n_iter_shape=shape, **common).fit(X, y)
    if entry == "DPSearchCV default":
        return DPSearchCV(_model(dataset), **common).fit(X, y)
    alpha = float(entry.split("=")[1]) if "=" in entry else 0.0
    return _one_trial(dataset, X, y, epsilon, delta, seed, alpha)


def cell(dataset, X, y, epsilon: float, seeds: int) -> dict:
    scores = {entry: {"auc": [], "accuracy": []} for entry in ENTRIES + TRIALS[1:]}
    signals, searched = [], []
    for seed in range(seeds):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
        delta = min(1e-5, len(y_train) ** -1.1)
        for entry in ENTRIES + TRIALS[1:]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyWarning)
                model = _fit(entry, dataset, X_train, y_train, epsilon, delta, seed)
            scores[entry]["accuracy"].append(float(model.score(X_test, y_test)))
            if dataset.task == "binary":
                scores[entry]["auc"].append(float(roc_auc_score(y_test, model.decision_function(X_test))))
            if entry == "DPSearchCV default":
                signals.append(model.search_signal_)
                searched.append(bool(model.searched_))
    return {
        "dataset": dataset.name, "epsilon": epsilon, "n_train": int(round(0.7 * len(y))), "seeds": seeds,
        "signal": float(np.mean(signals)), "searched": searched, "scores": scores,
    }


def _cell_text(values) -> str:
    return "—" if not values else f"{np.mean(values):.3f} ± {np.std(values):.3f}"


def _paired_text(values, reference) -> str:
    """Mean paired difference (same split and seed) and its standard error."""
    difference = np.asarray(values) - np.asarray(reference)
    return f"{difference.mean():+.3f} (± {difference.std(ddof=1) / np.sqrt(difference.size):.3f})"


PAIRED = ("search, default grid", "search, default grid, logarithmic K", "DPSearchCV default")
"""Entries also shown as paired differences from ``default``."""


def table(cells: list) -> str:
    lines = []
    for metric in ("auc", "accuracy"):
        header = list(ENTRIES) + [f"{entry} − default (SE)" for entry in PAIRED]
        lines += [f"### Test {'ROC AUC' if metric == 'auc' else 'accuracy'}", "",
                  "| data set | n_train | ε | signal | rule | " + " | ".join(header) + " |",
                  "|---|---|---|---|---|" + "---|" * len(header)]
        for c in cells:
            scores = c["scores"]
            if metric == "auc" and not scores["default"]["auc"]:
                continue
            rule = "search" if all(c["searched"]) else "default" if not any(c["searched"]) else "mixed"
            row = [c["dataset"], str(c["n_train"]), f"{c['epsilon']:g}", f"{c['signal']:.0f}", rule]
            row += [_cell_text(scores[entry][metric]) for entry in ENTRIES]
            row += [_paired_text(scores[entry][metric], scores["default"][metric]) for entry in PAIRED]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines += ["### Candidates at one trial's budget (test AUC, binary; accuracy, multi-class)", "",
              "| data set | ε | " + " | ".join(TRIALS) + " |", "|---|---|" + "---|" * len(TRIALS)]
    for c in cells:
        metric = "auc" if c["scores"]["default"]["auc"] else "accuracy"
        row = [c["dataset"], f"{c['epsilon']:g}"] + [_cell_text(c["scores"][entry][metric]) for entry in TRIALS]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0])
    parser.add_argument("--datasets", nargs="+", default=list(SETS))
    parser.add_argument("--output", default="search")
    args = parser.parse_args(argv)
    cells = []
    started = time.perf_counter()
    for name in args.datasets:
        dataset = SETS[name]
        X, y = dataset.load()
        for epsilon in args.epsilons:
            cells.append(cell(dataset, X, y, epsilon, args.seeds))
            print(f"{name} eps={epsilon:g} signal={cells[-1]['signal']:.0f} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
            command = " ".join(sys.argv[1:] if argv is None else argv)
            text = (f"# DPSearchCV against the plain default at the same total ε\n\n"
                    f"Machine: {machine_info()}\n\n"
                    f"Run: `python -m benchmarks.search {command}`, {args.seeds} seeds per cell, raw rows, "
                    f"δ = min(1e-5, n_train^-1.1), {(time.perf_counter() - started) / 60:.1f} min. The default "
                    f"grid {DEFAULT_PARAM_DISTRIBUTIONS}, SEARCH_SIGNAL = {SEARCH_SIGNAL:g}. Entries, columns "
                    "and the reading: the docstring of `benchmarks/search.py`; 'signal' is the rule's public "
                    "n_train μ_trial / p, 'rule' its decision for `DPSearchCV(estimator)`.\n\n" + table(cells))
            (RESULTS / f"{args.output}.md").write_text(text)
            (RESULTS / f"{args.output}.json").write_text(json.dumps(
                {"machine": machine_info(), "args": vars(args), "cells": cells}, indent=1))


if __name__ == "__main__":
    main()
