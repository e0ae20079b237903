"""Utility benchmark: private estimators against their non-private scikit-learn counterparts.

Three registries, meant to grow: ``DATASETS`` (bundled and synthetic problems), ``ENTRIES``
(a private estimator with one algorithm) and ``REFERENCES`` (non-private competitors and the
trivial predictor). Every entry sees the same splits and the same per-row preprocessing
(``Normalizer``, no privacy cost). Prints a markdown table and writes it with the raw numbers to
``benchmarks/results/``.

    python benchmarks/utility.py --task binary --epsilons 0.5 1 2 --seeds 10
    python benchmarks/utility.py --task regression --algorithms snowball --seeds 5

Metrics: accuracy (classification), mean absolute error and RMSE (regression), and the fraction
of the non-private gain kept, ``(score_dp - score_trivial) / (score_nonprivate - score_trivial)``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from sklearn import datasets
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression, QuantileRegressor
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer
from sklearn.svm import LinearSVC

from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant
from skdpsco.solvers import ALGORITHMS

RESULTS = Path(__file__).resolve().parent / "results"


# -- datasets ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dataset:
    name: str
    task: str  # "binary", "multiclass" or "regression"
    load: Callable[[int], tuple]  # seed -> (X, y); bundled sets ignore the seed
    y_bound: float = 1.0


def _synthetic_logistic(n: int, d: int = 10, norm_w: float = 5.0):
    def load(seed):
        rng = np.random.default_rng(1000 + seed)
        X = rng.normal(size=(n, d))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        w = rng.normal(size=d)
        w *= norm_w / np.linalg.norm(w)
        y = (rng.random(n) < 1 / (1 + np.exp(-X @ w))).astype(int)
        return X, y

    return load


def _synthetic_lad(n: int, d: int = 10):
    def load(seed):
        rng = np.random.default_rng(2000 + seed)
        X = rng.normal(size=(n, d))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        w = rng.normal(size=d)
        w *= 0.8 / np.linalg.norm(w)
        return X, X @ w + 0.1 * rng.standard_t(df=2, size=n)

    return load


def _bundled(loader, scale_target=None):
    def load(seed):
        X, y = loader(return_X_y=True)
        return X, (y if scale_target is None else scale_target(y))

    return load


DATASETS = {
    "breast_cancer": Dataset("breast_cancer", "binary", _bundled(datasets.load_breast_cancer)),
    "synthetic_logistic_1e4": Dataset("synthetic_logistic_1e4", "binary", _synthetic_logistic(10_000)),
    "synthetic_logistic_1e5": Dataset("synthetic_logistic_1e5", "binary", _synthetic_logistic(100_000)),
    "wine": Dataset("wine", "multiclass", _bundled(datasets.load_wine)),
    # diabetes targets are public-scale: divided by 100, bounded by 4 after the division
    "diabetes": Dataset("diabetes", "regression", _bundled(datasets.load_diabetes, lambda y: y / 100.0), 4.0),
    "synthetic_lad_1e4": Dataset("synthetic_lad_1e4", "regression", _synthetic_lad(10_000), 2.0),
    "synthetic_lad_1e5": Dataset("synthetic_lad_1e5", "regression", _synthetic_lad(100_000), 2.0),
}


# -- private entries and references ----------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    name: str
    tasks: tuple
    make: Callable  # (epsilon, delta, algorithm, seed, dataset) -> estimator


ENTRIES = [
    Entry("DPLogisticRegression", ("binary", "multiclass"),
          lambda e, d, a, s, ds: DPLogisticRegression(epsilon=e, delta=d, algorithm=a, random_state=s)),
    Entry("DPHingeSVM", ("binary", "multiclass"),
          lambda e, d, a, s, ds: DPHingeSVM(epsilon=e, delta=d, algorithm=a, random_state=s)),
    Entry("DPLpRegression(p=1)", ("regression",),
          lambda e, d, a, s, ds: DPLpRegression(p=1.0, y_bound=ds.y_bound, radius=ds.y_bound * 2,
                                                epsilon=e, delta=d, algorithm=a, random_state=s)),
    Entry("DPLpRegression(p=2)", ("regression",),
          lambda e, d, a, s, ds: DPLpRegression(p=2.0, y_bound=ds.y_bound, radius=ds.y_bound * 2,
                                                epsilon=e, delta=d, algorithm=a, random_state=s)),
]

REFERENCES = {
    "binary": {
        "trivial": lambda: DummyClassifier(strategy="most_frequent"),
        "LogisticRegression": lambda: LogisticRegression(max_iter=5000),
        "LinearSVC": lambda: LinearSVC(),
    },
    "multiclass": {
        "trivial": lambda: DummyClassifier(strategy="most_frequent"),
        "LogisticRegression": lambda: LogisticRegression(max_iter=5000),
        "LinearSVC": lambda: LinearSVC(),
    },
    "regression": {
        "trivial": lambda: DummyRegressor(strategy="median"),
        "LinearRegression": lambda: LinearRegression(),
        "QuantileRegressor(median)": lambda: QuantileRegressor(quantile=0.5, alpha=0.0),
    },
}


def _scores(model, X, y, task):
    prediction = model.predict(X)
    if task == "regression":
        return {"mae": float(np.mean(np.abs(prediction - y))), "rmse": float(np.sqrt(np.mean((prediction - y) ** 2)))}
    return {"accuracy": float(np.mean(prediction == y))}


def _fit(estimator, X_train, y_train, X_test, y_test, task):
    model = make_pipeline(Normalizer(), estimator)
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    return {**_scores(model, X_test, y_test, task), "seconds": seconds}


def run(dataset: Dataset, epsilons, algorithms, seeds, delta=None):
    """Raw results: one record per (model, epsilon, seed)."""
    records = []
    for seed in range(seeds):
        X, y = dataset.load(seed)
        stratify = None if dataset.task == "regression" else y
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=stratify)
        fit_delta = delta if delta is not None else min(1e-5, 1.0 / len(y_train) ** 1.1)
        if dataset.task == "regression":
            y_train = np.clip(y_train, -dataset.y_bound, dataset.y_bound)
        for name, make in REFERENCES[dataset.task].items():
            scores = _fit(make(), X_train, y_train, X_test, y_test, dataset.task)
            records.append({"model": name, "epsilon": None, "seed": seed, **scores})
        for entry in ENTRIES:
            if dataset.task not in entry.tasks:
                continue
            for algorithm in algorithms:
                for epsilon in epsilons:
                    estimator = entry.make(epsilon, fit_delta, algorithm, seed, dataset)
                    estimator.set_params(accountant=PrivacyAccountant())
                    try:
                        scores = _fit(estimator, X_train, y_train, X_test, y_test, dataset.task)
                    except ValueError as exc:  # infeasible at this size: reported, not hidden
                        scores = {"error": str(exc).split(";")[0][:80]}
                    records.append({"model": f"{entry.name} [{algorithm}]", "epsilon": epsilon, "seed": seed, **scores})
    return records


def summarise(records, task):
    metric = "mae" if task == "regression" else "accuracy"
    by_model = {}
    for r in records:
        by_model.setdefault((r["model"], r["epsilon"]), []).append(r)
    trivial = np.mean([r[metric] for r in by_model[("trivial", None)]])
    best_reference = max if metric == "accuracy" else min
    reference = best_reference(
        np.mean([r[metric] for r in rs]) for (m, e), rs in by_model.items() if e is None and m != "trivial"
    )
    header = f"| model | ε | {metric} (mean ± std) | gain kept | fit time (ms) |"
    lines = [header, "|---|---|---|---|---|"]
    for (model, eps), rs in by_model.items():
        values = [r[metric] for r in rs if metric in r]
        if not values:
            lines.append(f"| {model} | {eps:g} | infeasible: {rs[0]['error']} | — | — |")
            continue
        mean = float(np.mean(values))
        gain = (mean - trivial) / (reference - trivial) if reference != trivial else float("nan")
        millis = 1e3 * float(np.median([r["seconds"] for r in rs]))
        eps_text = "—" if eps is None else f"{eps:g}"
        lines.append(f"| {model} | {eps_text} | {mean:.3f} ± {np.std(values):.3f} | {gain:.2f} | {millis:.1f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=None, choices=sorted(DATASETS))
    parser.add_argument("--task", choices=["binary", "multiclass", "regression"], default=None)
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1.0, 2.0])
    parser.add_argument("--algorithms", nargs="+", default=["auto"], choices=["auto", *ALGORITHMS])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    names = args.datasets or [n for n, d in DATASETS.items() if args.task in (None, d.task)]
    RESULTS.mkdir(exist_ok=True)
    for name in names:
        dataset = DATASETS[name]
        records = run(dataset, args.epsilons, args.algorithms, args.seeds)
        table = summarise(records, dataset.task)
        print(f"\n### {name} ({dataset.task}, {args.seeds} seeds)\n\n{table}")
        stem = RESULTS / f"utility_{name}"
        stem.with_suffix(".md").write_text(table + "\n")
        stem.with_suffix(".json").write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
