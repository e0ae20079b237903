"""Issue 9's goal table: skdpsco's defaults against diffprivlib at the sample sizes users have.

Cells (defaults only, nothing tuned on test data):

* **Logistic, synthetic** (``shared/notes/utility-prototype.md`` "Setup"): ``d = 20``, ``x`` uniform
  on the unit sphere, ``||w*|| = 5`` in a random direction per seed, ``y ~ Bernoulli(sigmoid(<w*,
  x>))``; ``n_train`` in {10^3, 10^4, 10^5}, ``n_test = 3/7 n_train``; metric: excess test
  log-loss, ``logloss(model) - logloss(w*)`` on the same test points.
* **Logistic, breast_cancer**: 70/30 stratified split per seed; metric: test accuracy. A second
  cell, ``breast_cancer_public_range``, first maps every feature onto [0, 1] by the documented
  ranges of the dataset's description (:func:`skdpsco.compare.public_feature_bounds`; a fixed per-row
  map, no privacy cost, applied to every model alike): after ``Normalizer`` alone the rows are
  dominated by two area features and the classes differ in norm-2 directions of size ~0.01.
* **Least squares, synthetic**: the same rows, ``y = <w*, x> + 0.1 N(0, 1)`` with ``||w*|| = 1``,
  targets clipped to the public bound 1; metric: excess test mean squared error over ``w*``.
* **Least squares, diabetes**: target divided by its public range bound 346 (the documented
  maximum of the bundled set's target), 70/30 split; metric: test RMSE.

Rows pass through ``Normalizer`` (per row, no privacy cost) for every model. Ours:
``DPLogisticRegression(epsilon, delta)`` / ``DPLpRegression(epsilon, delta)`` at their defaults
(``algorithm='auto'``), plus each candidate algorithm at its defaults to justify the ``'auto'``
rule. diffprivlib: ``LogisticRegression(epsilon, data_norm=1)`` (``C = 1``) and
``LinearRegression(epsilon, bounds_X=(-1, 1), bounds_y=(-1, 1))``, pure epsilon-DP (delta = 0), which
is stronger than our (epsilon, delta); their known proof gaps are in the notes (Analysis 8). The
non-private references are ``LogisticRegression()`` and ``LinearRegression()``.

diffprivlib needs scikit-learn < 1.7: run this in the peers environment of ``benchmarks/README.md``
(``PYTHONPATH=. /path/to/peers/bin/python -m benchmarks.goal``); without it the diffprivlib
columns are absent.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from sklearn import datasets
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer

from skdpsco import DPLogisticRegression, DPLpRegression, PrivacyAccountant
from skdpsco.compare import public_feature_bounds

from .machine import machine_info
from .utility import RESULTS

try:
    import diffprivlib.models as diffprivlib_models
except ImportError:
    diffprivlib_models = None

DIABETES_TARGET_BOUND = 346.0
"""Public bound on the diabetes target (its documented range is 25-346)."""


@dataclass(frozen=True)
class Cell:
    name: str
    task: str  # "logistic" or "regression"
    n: int | None
    epsilons: tuple
    delta: float
    metric: str
    split: Callable[[int], tuple]  # seed -> X_train, X_test, y_train, y_test, reference


def _sphere(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _synthetic(n, task, d=20):
    def split(seed):
        rng = np.random.default_rng(seed)
        w = rng.standard_normal(d)
        w *= (5.0 if task == "logistic" else 1.0) / np.linalg.norm(w)
        n_test = int(round(3 * n / 7))
        X = _sphere(rng, n + n_test, d)
        margin = X @ w
        if task == "logistic":
            y = (rng.random(n + n_test) < 1.0 / (1.0 + np.exp(-margin))).astype(int)
        else:
            y = np.clip(margin + 0.1 * rng.standard_normal(n + n_test), -1.0, 1.0)
        return X[:n], X[n:], y[:n], y[n:], margin[n:]
    return split


def _bundled(loader, task, public_range=None):
    X, y = loader(return_X_y=True)
    if task == "regression":
        y = y / DIABETES_TARGET_BOUND
    if public_range is not None:
        lower, upper = public_feature_bounds(public_range)
        X = (X - lower) / (upper - lower)

    def split(seed):
        stratify = y if task == "logistic" else None
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=stratify)
        return X_train, X_test, y_train, y_test, None
    return split


CELLS = [
    *(Cell(f"synthetic_logistic_n{n:.0e}", "logistic", n, (0.3, 1.0, 3.0), 1e-6, "excess log-loss",
           _synthetic(n, "logistic")) for n in (10**3, 10**4, 10**5)),
    Cell("breast_cancer", "logistic", None, (0.3, 1.0, 3.0, 10.0), 1e-5, "accuracy",
         _bundled(datasets.load_breast_cancer, "logistic")),
    Cell("breast_cancer_public_range", "logistic", None, (0.3, 1.0, 3.0, 10.0), 1e-5, "accuracy",
         _bundled(datasets.load_breast_cancer, "logistic", public_range="breast_cancer")),
    *(Cell(f"synthetic_regression_n{n:.0e}", "regression", n, (0.3, 1.0, 3.0), 1e-6, "excess MSE",
           _synthetic(n, "regression")) for n in (10**3, 10**4, 10**5)),
    Cell("diabetes", "regression", None, (0.3, 1.0, 3.0, 10.0), 1e-5, "RMSE",
         _bundled(datasets.load_diabetes, "regression")),
]

CANDIDATES = {
    "logistic": ("auto", "objective_perturbation", "phased_sgd"),
    "regression": ("auto", "phased_sgd"),
}


def _log_loss(p1, y):
    p1 = np.clip(p1, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p1) + (1 - y) * np.log1p(-p1)))


def _score(cell, model, X_test, y_test, reference):
    if cell.metric == "accuracy":
        return float(np.mean(model.predict(X_test) == y_test))
    if cell.metric == "excess log-loss":
        return _log_loss(model.predict_proba(X_test)[:, 1], y_test) - _log_loss(1 / (1 + np.exp(-reference)), y_test)
    residual = model.predict(X_test) - y_test
    if cell.metric == "RMSE":
        return float(np.sqrt(np.mean(residual**2)))
    return float(np.mean(residual**2) - np.mean((reference - y_test) ** 2))  # excess MSE


def _models(cell, epsilon, seed):
    """name -> estimator for one (cell, epsilon, seed)."""
    ours = DPLogisticRegression if cell.task == "logistic" else DPLpRegression
    labels = {"classes": [0, 1]} if cell.task == "logistic" else {}  # the public label set of every cell
    models = {f"skdpsco [{a}]": ours(epsilon=epsilon, delta=cell.delta, algorithm=a, random_state=seed,
                                      accountant=PrivacyAccountant(), **labels) for a in CANDIDATES[cell.task]}
    if diffprivlib_models is not None:
        if cell.task == "logistic":
            models["diffprivlib (C=1)"] = diffprivlib_models.LogisticRegression(
                epsilon=epsilon, data_norm=1.0, random_state=seed)
        else:
            models["diffprivlib"] = diffprivlib_models.LinearRegression(
                epsilon=epsilon, bounds_X=(-1.0, 1.0), bounds_y=(-1.0, 1.0), random_state=seed)
    return models


def run(cells, seeds):
    records = []
    for cell in cells:
        for seed in range(seeds):
            X_train, X_test, y_train, y_test, reference = cell.split(seed)
            nonprivate = LogisticRegression() if cell.task == "logistic" else LinearRegression()
            fitted = make_pipeline(Normalizer(), nonprivate).fit(X_train, y_train)
            records.append(dict(cell=cell.name, model="non-private", epsilon=None, seed=seed,
                                score=_score(cell, fitted, X_test, y_test, reference)))
            for epsilon in cell.epsilons:
                for name, estimator in _models(cell, epsilon, seed).items():
                    start = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            fitted = make_pipeline(Normalizer(), estimator).fit(X_train, y_train)
                            score = _score(cell, fitted, X_test, y_test, reference)
                        except ValueError as exc:  # infeasible at this size: reported, not hidden
                            score = math.nan
                            print(f"{cell.name} {name} eps={epsilon}: {exc}")
                    chosen = getattr(estimator, "algorithm_", None)
                    records.append(dict(cell=cell.name, model=name, epsilon=epsilon, seed=seed, score=score,
                                        algorithm=chosen, seconds=time.perf_counter() - start))
            print(f"{cell.name} seed {seed} done", flush=True)
    return records


def _stats(values):
    values = np.asarray(values, dtype=float)
    return float(np.nanmean(values)), float(np.nanstd(values))


def table(cells, records):
    """Markdown: one row per (cell, epsilon); columns mean +- std per model; the verdict of the goal."""
    higher_is_better = {"accuracy"}
    lines = []
    for cell in cells:
        rows = [r for r in records if r["cell"] == cell.name]
        if not rows:
            continue
        names = list(dict.fromkeys(r["model"] for r in rows if r["epsilon"] is not None))
        peer = next((m for m in names if m.startswith("diffprivlib")), None)
        lines += [f"### {cell.name} ({cell.metric}, delta = {cell.delta:g} for ours; diffprivlib is pure epsilon)", "",
                  "| ε | " + " | ".join(names) + " | non-private | defaults beat diffprivlib? |",
                  "|---" * (len(names) + 3) + "|"]
        nonprivate = _stats([r["score"] for r in rows if r["model"] == "non-private"])
        for epsilon in cell.epsilons:
            means = {}
            cells_text = []
            for name in names:
                mean, std = _stats([r["score"] for r in rows if r["model"] == name and r["epsilon"] == epsilon])
                means[name] = mean
                chosen = sorted({r["algorithm"] for r in rows if r["model"] == name and r["epsilon"] == epsilon
                                 and r.get("algorithm")} - {None})
                suffix = f" ({chosen[0]})" if name.endswith("[auto]") and len(chosen) == 1 else ""
                cells_text.append(f"{mean:.4g} ± {std:.2g}{suffix}")
            verdict = "—"
            if peer is not None:
                ours = means["skdpsco [auto]"]
                better = ours > means[peer] if cell.metric in higher_is_better else ours < means[peer]
                verdict = "yes" if better else "**no**"
            lines.append(f"| {epsilon:g} | " + " | ".join(cells_text) + f" | {nonprivate[0]:.4g} | {verdict} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--cells", nargs="*", default=[c.name for c in CELLS], choices=[c.name for c in CELLS])
    parser.add_argument("--out", default="goal")
    args = parser.parse_args(argv)
    cells = [c for c in CELLS if c.name in args.cells]
    started = time.perf_counter()
    records = run(cells, args.seeds)
    text = table(cells, records)
    info = machine_info()
    header = (f"# Issue 9 goal: skdpsco defaults against diffprivlib ({args.seeds} seeds, mean ± std)\n\n"
              f"Machine: {json.dumps(info)}\n\nRun time: {(time.perf_counter() - started) / 60:.1f} min.\n\n")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.md").write_text(header + text + "\n")
    (RESULTS / f"{args.out}.json").write_text(json.dumps({"machine": info, "records": records}, indent=1))
    print(text)


if __name__ == "__main__":
    main()
