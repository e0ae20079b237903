"""The generalised regressors against their non-private scikit-learn counterparts on real data.

    python -m benchmarks.glm                 # 10 seeds, epsilon = 1, delta = 'auto'
    python -m benchmarks.glm --seeds 2       # a quick look

Each private regressor is fitted with its defaults on the **raw** rows (its own private feature
scaling and target bound); its counterpart after ``StandardScaler``. Each seed draws a 75 / 25 split
and the private fit's noise; the metric of the private model over the counterpart's on the same
split is one ratio, and the table gives the mean ratio over the seeds with its standard error, and
the same ratio for the constant model (the training median, quantile or mean: what "learned
nothing" scores). The goal is a ratio within 1.3. Results: ``benchmarks/results/glm.{md,json}``.

Which real sets count for the goal (the rule, fixed before any result on a new set was seen): **every
data set bundled with scikit-learn or statsmodels** (no download) **with at least 900 rows, at least one
feature column, and a numeric non-binary target that is a quantity or an ordered scale** (not a
nominal class label). In scikit-learn 1.6 and statsmodels 0.15 that is ``randhie``, ``fair`` and
``anes96``; excluded are ``digits`` (1797 rows, its target a class label), ``co2`` (2284 rows, a
series with no feature) and every other bundled set (fewer than 900 rows). The target of each set
is its documented ``endog`` (statsmodels' ``endog_name``) in its own units, a count endog as
``log1p`` for the Huber and quantile regressors (their targets are not counts); for
``DPPoissonRegressor`` the documented endog when it is a non-negative count or quantity, else the
set's documented count column ("number of times ..."). The features are the ones the set's loader
documents (``benchmarks/real.py`` for randhie and fair; statsmodels' ``exog`` for anes96). The
smaller sets below stay in the table as the small-n rows; they do not count towards the goal.

Datasets: bundled with scikit-learn or statsmodels (``benchmarks/real.py`` has their loaders'
conventions: documented codes become indicators, nothing is fitted on the rows), targets in their
own units.

* ``diabetes`` (442 x 10): disease progression.
* ``randhie`` (20190 x 9): outpatient visits ``mdvis`` (counts; ``log1p(mdvis)`` for the Huber and
  quantile regressors, whose targets are not counts).
* ``fair`` (6366 x 16): ``affairs``, time spent in extramarital affairs (non-negative, 68 % zeros).
* ``engel`` (235 x 1): household food expenditure on income (Koenker's quantile-regression set).
* ``star98`` (303 x 12): ``NABOVE``, students above the national math median (counts; Poisson only).
* ``anes96`` (944 x 5): ``PID``, party identification on the documented 0-6 scale (strong
  Democrat to strong Republican), on statsmodels' documented exog: ``logpopul`` (``log(popul +
  0.1)``), ``selfLR`` (1-7), ``age``, ``educ`` (1-7), ``income`` (1-24); for the Poisson regressor
  (PID is a code of a scale, not a count) ``TVnews``, the number of times per week the respondent
  watches TV news (0-7), on the same features.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from sklearn.linear_model import HuberRegressor, PoissonRegressor, QuantileRegressor
from sklearn.metrics import mean_absolute_error, mean_pinball_loss, mean_poisson_deviance, mean_squared_error
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdpsco import DPHuberRegressor, DPPoissonRegressor, DPQuantileRegressor, PrivacyAccountant

from .machine import machine_info
from .real import RANDHIE_FEATURES, STAR98_FEATURES, _diabetes, _fair, _statsmodels_frame
from .utility import RESULTS, write_with_notes


def _raw_diabetes():
    X, y = _diabetes()
    return X, y * 346.0  # real.py divides by the public bound 346: back to the documented units


def _randhie_counts():
    frame = _statsmodels_frame("randhie")
    return frame[RANDHIE_FEATURES].to_numpy(float), frame["mdvis"].to_numpy(float)


def _randhie_log():
    X, y = _randhie_counts()
    return X, np.log1p(y)


def _fair_affairs():
    X, _ = _fair()
    return X, _statsmodels_frame("fair")["affairs"].to_numpy(float)


def _engel():
    frame = _statsmodels_frame("engel")
    return frame[["income"]].to_numpy(float), frame["foodexp"].to_numpy(float)


def _star98_counts():
    frame = _statsmodels_frame("star98")
    return frame[STAR98_FEATURES].to_numpy(float), frame["NABOVE"].to_numpy(float)


ANES96_EXOG = ["logpopul", "selfLR", "age", "educ", "income"]
"""statsmodels' documented exog of anes96 (``logpopul = log(popul + 0.1)``, a fixed per-row map)."""


def _anes96(target: str):
    def load():
        frame = _statsmodels_frame("anes96")
        return frame[ANES96_EXOG].to_numpy(float), frame[target].to_numpy(float)
    return load


def rmse(y, p):
    return float(np.sqrt(mean_squared_error(y, p)))


def _pinball(q):
    return lambda y, p: float(mean_pinball_loss(y, p, alpha=q))


# name -> (private model, non-private counterpart, constant model of the training targets, metrics, datasets)
ROBUST_SETS = {"diabetes": _raw_diabetes, "randhie": _randhie_log, "fair": _fair_affairs, "anes96": _anes96("PID"),
               "engel": _engel}
COUNT_SETS = {"randhie": _randhie_counts, "fair": _fair_affairs, "anes96": _anes96("TVnews"), "diabetes": _raw_diabetes,
              "star98": _star98_counts}


def _quantile_entry(q):
    return (
        lambda seed: DPQuantileRegressor(quantile=q, random_state=seed, accountant=PrivacyAccountant()),
        lambda: QuantileRegressor(quantile=q, alpha=0.0, solver="highs"),
        lambda y: np.quantile(y, q),
        {"pinball": _pinball(q)},
        ROBUST_SETS,
    )


ENTRIES = {
    "DPHuberRegressor": (
        lambda seed: DPHuberRegressor(random_state=seed, accountant=PrivacyAccountant()),
        lambda: HuberRegressor(max_iter=1000),
        np.median,
        {"RMSE": rmse, "MAE": lambda y, p: float(mean_absolute_error(y, p))},
        ROBUST_SETS,
    ),
    "DPQuantileRegressor(q=0.5)": _quantile_entry(0.5),
    "DPQuantileRegressor(q=0.9)": _quantile_entry(0.9),
    "DPPoissonRegressor": (
        lambda seed: DPPoissonRegressor(random_state=seed, accountant=PrivacyAccountant()),
        lambda: PoissonRegressor(alpha=0.0, max_iter=1000),
        np.mean,
        {"deviance": lambda y, p: float(mean_poisson_deviance(y, p))},
        COUNT_SETS,
    ),
}


def run_cell(entry: str, dataset: str, seeds: int) -> dict:
    """Per-seed metrics of the private model, the counterpart and the constant model."""
    private, public, constant, metrics, sets = ENTRIES[entry]
    X, y = sets[dataset]()
    records = []
    for seed in range(seeds):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=seed)
        start = time.perf_counter()
        model = private(seed).fit(X_train, y_train)
        seconds = time.perf_counter() - start
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence notes of the non-private solvers
            reference = make_pipeline(StandardScaler(), public()).fit(X_train, y_train)
        trivial = np.full(len(y_test), constant(y_train))
        predictions = {"private": model.predict(X_test), "sklearn": reference.predict(X_test), "constant": trivial}
        records.append({
            "seed": seed, "seconds": seconds, "algorithm": model.algorithm_, "epsilon_spent": model.epsilon_,
            **{f"{m}_{k}": f(y_test, p) for m, f in metrics.items() for k, p in predictions.items()},
        })
    return {"entry": entry, "dataset": dataset, "n": int(len(y)), "d": int(X.shape[1]),
            "metrics": list(metrics), "records": records}


def _ratio(cell: dict, metric: str, model: str) -> tuple[float, float]:
    ratios = np.array([r[f"{metric}_{model}"] / r[f"{metric}_sklearn"] for r in cell["records"]])
    se = ratios.std(ddof=1) / np.sqrt(len(ratios)) if len(ratios) > 1 else float("nan")
    return float(ratios.mean()), float(se)


def table(cells: list[dict]) -> str:
    lines = [
        "| estimator | dataset | n x d | metric | private / sklearn | constant / sklearn | within 1.3 | fit s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cell in cells:
        seconds = np.mean([r["seconds"] for r in cell["records"]])
        for metric in cell["metrics"]:
            mean, se = _ratio(cell, metric, "private")
            trivial, trivial_se = _ratio(cell, metric, "constant")
            lines.append(
                f"| {cell['entry']} | {cell['dataset']} | {cell['n']} x {cell['d']} | {metric} | "
                f"{mean:.3f} ± {se:.3f} | {trivial:.3f} ± {trivial_se:.3f} | {'yes' if mean <= 1.3 else 'no'} | "
                f"{seconds:.2f} |"
            )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--entries", nargs="*", default=list(ENTRIES))
    args = parser.parse_args(argv)
    cells = [run_cell(entry, dataset, args.seeds) for entry in args.entries for dataset in ENTRIES[entry][4]]
    text = table(cells)
    print(text)
    if args.seeds >= 10 and args.entries == list(ENTRIES):
        (RESULTS / "glm.json").write_text(json.dumps({"machine": machine_info(), "cells": cells}, indent=1))
        header = (
            "# Generalised regressors against scikit-learn (`python -m benchmarks.glm`)\n\n"
            f"{args.seeds} seeds (75 / 25 split and noise per seed), epsilon = 1, delta = 'auto', every private "
            "model with its defaults on the raw rows, its counterpart after `StandardScaler`. Ratios of the "
            "test metric to the counterpart's on the same split (mean ± standard error over the seeds); "
            "'constant' is the training median (Huber), quantile, or mean (Poisson).\n\n"
        )
        write_with_notes(RESULTS / "glm.md", header + text + "\n")


if __name__ == "__main__":
    main()
