"""The tabular workflow: a DataFrame with categorical and numeric columns, one-hot encoded from
public category lists in a pipeline, inside ``DPSearchCV``, against the plain pipeline at the same ε.

    python -m benchmarks.categorical_search                  # 10 seeds, epsilon in {1, 3}
    python -m benchmarks.categorical_search --seeds 2 --epsilons 1

Run in the peers environment (statsmodels provides ``fair`` and ``anes96``):
``PYTHONPATH=. /work/venv-peers/bin/python -m benchmarks.categorical_search``.

Data: statsmodels' ``fair`` (target ``affairs > 0``) and ``anes96`` (target ``vote``), as the pandas
DataFrames of ``load_pandas().data``. The categorical columns and their category lists are the
documented codes of the statsmodels codebooks (``statsmodels.api.datasets.fair.NOTE`` and
``statsmodels.api.datasets.anes96.NOTE``), written out below, never read from the data; the other
columns pass through raw. 70/30 stratified splits with ``random_state = seed``,
``delta = min(1e-5, n_train ** -1.1)``.

Entries, each at the same total (epsilon, delta) on the training split:

* ``pipeline``: ``Pipeline([("encode", public_encoder(...)), ("model", DPLogisticRegression(classes=[0, 1]))])``.
* ``DPSearchCV(pipeline)``: ``DPSearchCV(pipeline, epsilon=...)`` as a user writes it: the default
  grid (reached into the pipeline's last step) under the rule of ``SEARCH_SIGNAL`` (``searched_``).
* ``DPSearchCV(pipeline, grid)``: the default grid given explicitly, ``{"model__alpha": [0, 1e-4,
  1e-3]}``, which is always searched.
* ``non-private``: the same one-hot encoding, ``StandardScaler`` and ``LogisticRegression()``
  (reference, no privacy).

Columns: test ROC AUC and accuracy, mean ± sd over seeds; ε spent is read from each fit's ledger.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skdpsco import DPLogisticRegression, DPSearchCV, PrivacyAccountant, PrivacyWarning
from skdpsco.model_selection import DEFAULT_PARAM_DISTRIBUTIONS, SEARCH_SIGNAL
from skdpsco.preprocessing import public_encoder

from .machine import machine_info
from .search import _paired_text
from .utility import RESULTS

FAIR_OCCUPATION = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
FAIR_CATEGORIES = {
    # statsmodels.api.datasets.fair.NOTE: rate_marriage 1 = very poor ... 5 = very good
    "rate_marriage": [1.0, 2.0, 3.0, 4.0, 5.0],
    # religious 1 = not, 2 = mildly, 3 = fairly, 4 = strongly
    "religious": [1.0, 2.0, 3.0, 4.0],
    # educ 9 = grade school, 12 = high school, 14 = some college, 16 = college graduate,
    # 17 = some graduate school, 20 = advanced degree
    "educ": [9.0, 12.0, 14.0, 16.0, 17.0, 20.0],
    # occupation and occupation_husb: 1 = student ... 6 = professional with advanced degree
    "occupation": FAIR_OCCUPATION,
    "occupation_husb": FAIR_OCCUPATION,
}
"""Codebook of ``fair`` (``statsmodels.api.datasets.fair.NOTE``); age, yrs_married and children
(counts, interval approximations) pass through raw."""

ANES96_SCALE = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
ANES96_CATEGORIES = {
    # statsmodels.api.datasets.anes96.NOTE: PID 0 = Strong Democrat ... 6 = Strong Republican
    "PID": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    # educ 1 = 1-8 grades ... 7 = PhD
    "educ": ANES96_SCALE,
    # income 1 = none or less than $2,999 ... 24 = $105,000 and over
    "income": [float(code) for code in range(1, 25)],
    # selfLR, ClinLR, DoleLR: 1 = extremely liberal ... 7 = extremely conservative
    "selfLR": ANES96_SCALE,
    "ClinLR": ANES96_SCALE,
    "DoleLR": ANES96_SCALE,
}
"""Codebook of ``anes96`` (``statsmodels.api.datasets.anes96.NOTE``); popul, TVnews and age pass
through raw."""

TABLES = {
    "fair": (FAIR_CATEGORIES, ["age", "yrs_married", "children"], lambda frame: (frame["affairs"] > 0).astype(int)),
    "anes96": (ANES96_CATEGORIES, ["popul", "TVnews", "age"], lambda frame: frame["vote"].astype(int)),
}
"""Table name -> (public categories, raw numeric columns, target of the frame)."""

ENTRIES = ("pipeline", "DPSearchCV(pipeline)", "DPSearchCV(pipeline, grid)", "non-private")

GRID = {"model__" + name: values for name, values in DEFAULT_PARAM_DISTRIBUTIONS.items()}


def load(name: str):
    """The DataFrame of features (categorical then numeric columns) and the target of a table."""
    import statsmodels.api as sm

    frame = getattr(sm.datasets, name).load_pandas().data
    categories, numeric, target = TABLES[name]
    return frame[list(categories) + numeric], target(frame).to_numpy()


def pipeline(categories: dict) -> Pipeline:
    return Pipeline([("encode", public_encoder(categories)), ("model", DPLogisticRegression(classes=[0, 1]))])


def fit(entry: str, categories: dict, X, y, epsilon: float, delta: float, seed: int):
    """The fitted entry and the epsilon its ledger spent (``nan`` for the non-private reference)."""
    if entry == "non-private":
        model = Pipeline([("encode", public_encoder(categories)), ("scale", StandardScaler()),
                          ("model", LogisticRegression(max_iter=1000))])
        return model.fit(X, y), float("nan")
    ledger = PrivacyAccountant()
    common = dict(epsilon=epsilon, delta=delta, random_state=seed, accountant=ledger)
    if entry == "pipeline":
        model = pipeline(categories).set_params(**{"model__" + key: value for key, value in common.items()})
    elif entry == "DPSearchCV(pipeline)":
        model = DPSearchCV(pipeline(categories), **common)
    else:
        model = DPSearchCV(pipeline(categories), GRID, **common)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        model.fit(X, y)
    return model, ledger.spent(delta)[0]


def cell(name: str, categories: dict, X, y, epsilon: float, seeds: int) -> dict:
    scores = {entry: {"auc": [], "accuracy": [], "epsilon": []} for entry in ENTRIES}
    searched, signals = [], []
    for seed in range(seeds):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
        delta = min(1e-5, len(y_train) ** -1.1)
        for entry in ENTRIES:
            model, spent = fit(entry, categories, X_train, y_train, epsilon, delta, seed)
            scores[entry]["accuracy"].append(float(model.score(X_test, y_test)))
            scores[entry]["auc"].append(float(roc_auc_score(y_test, model.decision_function(X_test))))
            scores[entry]["epsilon"].append(spent)
            if entry == "DPSearchCV(pipeline)":
                searched.append(bool(model.searched_))
                signals.append(float(model.search_signal_))
        spent = [scores[entry]["epsilon"][-1] for entry in ENTRIES[:3]]
        # the search's trial budget is calibrated to rtol 1e-4 (calibrate_trial_rho), from below
        assert np.all(np.asarray(spent) <= epsilon * (1 + 1e-9)), f"over budget {spent}"
        assert np.allclose(spent, epsilon, rtol=1e-4), f"unequal total epsilon {spent}"
    return {"dataset": name, "epsilon": epsilon, "n_train": len(y_train), "features": X.shape[1],
            "seeds": seeds, "searched": searched, "signal": float(np.mean(signals)), "scores": scores}


def _text(values) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}"


def verdict(values, reference) -> str:
    """``beats``/``loses to`` where the mean paired difference is beyond two standard errors, else ``matches``."""
    difference = np.asarray(values) - np.asarray(reference)
    if difference.size < 2:
        return "one seed"
    margin = 2 * difference.std(ddof=1) / np.sqrt(difference.size)
    return "beats" if difference.mean() > margin else "loses to" if difference.mean() < -margin else "matches"


def reading(cells: list) -> str:
    """One line per cell: how each DPSearchCV entry compares with the plain pipeline (test AUC)."""
    lines = []
    for c in cells:
        words = [f"{entry} {verdict(c['scores'][entry]['auc'], c['scores']['pipeline']['auc'])}"
                 for entry in ENTRIES[1:3]]
        lines.append(f"- {c['dataset']}, ε = {c['epsilon']:g}: " + "; ".join(words) + " the pipeline (test AUC, "
                     "paired over seeds, 2 SE).")
    return "\n".join(lines) + "\n"


def table(cells: list) -> str:
    lines = ["| data set | n_train | ε | entry | test AUC | AUC − pipeline (SE) | test accuracy | ε spent | searched_ |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        for entry in ENTRIES:
            scores = c["scores"][entry]
            searched = f"{sum(c['searched'])}/{len(c['searched'])} (signal {c['signal']:.0f})" if entry == "DPSearchCV(pipeline)" else \
                "yes" if entry == "DPSearchCV(pipeline, grid)" else ""
            paired = "—" if entry == "pipeline" or c["seeds"] < 2 else \
                _paired_text(scores["auc"], c["scores"]["pipeline"]["auc"])
            spent = "—" if entry == "non-private" else f"{np.mean(scores['epsilon']):.3f}"
            lines.append(f"| {c['dataset']} | {c['n_train']} | {c['epsilon']:g} | {entry} | {_text(scores['auc'])} "
                         f"| {paired} | {_text(scores['accuracy'])} | {spent} | {searched} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0])
    parser.add_argument("--datasets", nargs="+", default=list(TABLES))
    parser.add_argument("--output", default="categorical_search")
    args = parser.parse_args(argv)
    cells, started = [], time.perf_counter()
    for name in args.datasets:
        X, y = load(name)
        for epsilon in args.epsilons:
            cells.append(cell(name, TABLES[name][0], X, y, epsilon, args.seeds))
            print(f"{name} eps={epsilon:g} ({time.perf_counter() - started:.0f} s)", flush=True)
    command = " ".join(sys.argv[1:] if argv is None else argv)
    text = (f"# The tabular workflow inside DPSearchCV\n\nMachine: {machine_info()}\n\n"
            f"Run: `python -m benchmarks.categorical_search {command}`, {args.seeds} seeds per cell, "
            f"δ = min(1e-5, n_train^-1.1), {(time.perf_counter() - started) / 60:.1f} min. The default grid "
            f"{DEFAULT_PARAM_DISTRIBUTIONS} (explicit grid {GRID}), SEARCH_SIGNAL = {SEARCH_SIGNAL:g}. "
            "Entries and data: the docstring of `benchmarks/categorical_search.py`. ε spent: the ledger of "
            "each fit (the search's trial budget is calibrated from below to rtol 1e-4). "
            "`DPSearchCV(pipeline)` with `searched_ = False` fits the same pipeline once with the whole "
            "budget; it differs from `pipeline` only in its random draws (the search seeds its child "
            "from `random_state`).\n\n" + table(cells) + "\n### Reading\n\n" + reading(cells))
    (RESULTS / f"{args.output}.md").write_text(text)
    (RESULTS / f"{args.output}.json").write_text(json.dumps({"machine": machine_info(), "args": vars(args),
                                                             "cells": cells}, indent=1))


if __name__ == "__main__":
    main()
