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

Private competitors (``COMPETITORS``) run at the same (epsilon, delta) on the same splits: the
DP-SGD baseline of :mod:`benchmarks.dpsgd` always, and diffprivlib's LogisticRegression /
LinearRegression when diffprivlib imports (it needs scikit-learn < 1.7: see ``benchmarks/README.md``
for its environment); otherwise a note is printed and its rows are absent.
"""

from __future__ import annotations

import argparse
import json
import math
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

from .dpsgd import DPSGDClassifier, DPSGDRegressor

try:
    import diffprivlib.models as diffprivlib_models
except ImportError:  # scikit-learn >= 1.7 in this environment: see benchmarks/README.md
    diffprivlib_models = None

RESULTS = Path(__file__).resolve().parent / "results"


NOTES_HEADING = "\n## "
"""Where the hand-written notes of a results file start: its first level-2 heading (a generated
header and its tables have none)."""


def write_with_notes(path: Path, generated: str) -> bool:
    """Write ``generated`` (a header and tables) to ``path``, followed by the notes of the file it
    replaces: everything from that file's first level-2 heading on, written by hand to read the
    tables, which a rerun must not delete (their figures are the previous run's: check them).
    Returns whether notes were kept."""
    if NOTES_HEADING in "\n" + generated:
        raise ValueError("generated text must not hold a level-2 heading: it would be read as the notes.")
    old = path.read_text() if path.exists() else ""
    start = old.find(NOTES_HEADING)
    notes = old[start:] if start >= 0 else ""
    path.write_text(generated.rstrip("\n") + "\n" + notes if notes else generated)
    if notes:
        print(f"{path.name}: the notes below its tables were kept from the previous run; check their figures.")
    return bool(notes)


# -- datasets ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dataset:
    name: str
    task: str  # "binary", "multiclass" or "regression"
    load: Callable[[int], tuple]  # seed -> (X, y); bundled sets ignore the seed
    y_bound: float = 1.0

    @property
    def classes(self) -> list | None:
        """The public label set (``classes=``): 0 / 1 for every binary set, the ten digits,
        wine's three cultivars; ``None`` for regression."""
        if self.task == "regression":
            return None
        return [0, 1] if self.task == "binary" else list(range(MULTICLASS_LABELS[self.name]))


MULTICLASS_LABELS = {"digits": 10, "wine": 3}
"""Number of documented labels ``0, ..., k - 1`` of each multiclass set."""


def _sphere(rng, n, d):
    X = rng.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _minimiser(rng, d, norm):
    w = rng.normal(size=d)
    return w * (norm / np.linalg.norm(w))


def _synthetic_logistic(n: int, d: int = 10, norm_w: float = 5.0, label_noise: float = 0.0):
    """Well-specified logistic model (population minimiser ``w*``), optionally with a fraction
    ``label_noise`` of labels flipped at random (heavy contamination)."""

    def load(seed):
        rng = np.random.default_rng(1000 + seed)
        X, w = _sphere(rng, n, d), _minimiser(rng, d, norm_w)
        y = (rng.random(n) < 1 / (1 + np.exp(-X @ w))).astype(int)
        flip = rng.random(n) < label_noise
        return X, np.where(flip, 1 - y, y)

    return load


def _synthetic_hinge(n: int, d: int = 10, margin: float = 0.05):
    """Linearly separable up to a margin band: labels ``sign(<w*, x>)``, rows within ``margin`` of
    the hyperplane relabelled at random (hinge-loss model)."""

    def load(seed):
        rng = np.random.default_rng(3000 + seed)
        X, w = _sphere(rng, n, d), _minimiser(rng, d, 1.0)
        z = X @ w
        y = np.where(np.abs(z) < margin, rng.random(n) < 0.5, z > 0).astype(int)
        return X, y

    return load


def _synthetic_lad(n: int, d: int = 10, df: float = 2.0):
    """``y = <w*, x> + noise`` with Student-t(df) noise (heavy-tailed for df <= 2; symmetric, so
    ``w*`` minimises every ``|r|^p`` risk)."""

    def load(seed):
        rng = np.random.default_rng(2000 + seed)
        X, w = _sphere(rng, n, d), _minimiser(rng, d, 0.8)
        return X, X @ w + 0.1 * rng.standard_t(df=df, size=n)

    return load


def _bundled(loader, scale_target=None):
    def load(seed):
        X, y = loader(return_X_y=True)
        return X, (y if scale_target is None else scale_target(y))

    return load


DATASETS = {
    "breast_cancer": Dataset("breast_cancer", "binary", _bundled(datasets.load_breast_cancer)),
    "digits_binary": Dataset("digits_binary", "binary", _bundled(datasets.load_digits, lambda y: (y >= 5).astype(int))),
    "digits": Dataset("digits", "multiclass", _bundled(datasets.load_digits)),
    "synthetic_logistic_flip_1e4": Dataset("synthetic_logistic_flip_1e4", "binary",
                                           _synthetic_logistic(10_000, label_noise=0.2)),
    "synthetic_hinge_1e4": Dataset("synthetic_hinge_1e4", "binary", _synthetic_hinge(10_000)),
    "synthetic_logistic_1e6_d100": Dataset("synthetic_logistic_1e6_d100", "binary", _synthetic_logistic(10**6, 100)),
    "synthetic_logistic_1e4": Dataset("synthetic_logistic_1e4", "binary", _synthetic_logistic(10_000)),
    "synthetic_logistic_1e5": Dataset("synthetic_logistic_1e5", "binary", _synthetic_logistic(100_000)),
    "wine": Dataset("wine", "multiclass", _bundled(datasets.load_wine)),
    # diabetes targets are public-scale: divided by 100, bounded by 4 after the division
    "diabetes": Dataset("diabetes", "regression", _bundled(datasets.load_diabetes, lambda y: y / 100.0), 4.0),
    "synthetic_lad_1e4": Dataset("synthetic_lad_1e4", "regression", _synthetic_lad(10_000), 2.0),
    "synthetic_lad_1e5": Dataset("synthetic_lad_1e5", "regression", _synthetic_lad(100_000), 2.0),
    "synthetic_lad_cauchy_1e4": Dataset("synthetic_lad_cauchy_1e4", "regression", _synthetic_lad(10_000, df=1.0), 2.0),
    "synthetic_lad_1e4_d1000": Dataset("synthetic_lad_1e4_d1000", "regression", _synthetic_lad(10_000, 1000), 2.0),
}


# -- private entries and references ----------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    name: str
    tasks: tuple
    make: Callable  # (epsilon, delta, algorithm, seed, dataset) -> estimator


ENTRIES = [
    Entry("DPLogisticRegression", ("binary", "multiclass"),
          lambda e, d, a, s, ds: DPLogisticRegression(epsilon=e, delta=d, algorithm=a, random_state=s,
                                                      classes=ds.classes)),
    Entry("DPHingeSVM", ("binary", "multiclass"),
          lambda e, d, a, s, ds: DPHingeSVM(epsilon=e, delta=d, algorithm=a, random_state=s, classes=ds.classes)),
    Entry("DPLpRegression(p=1)", ("regression",),
          lambda e, d, a, s, ds: DPLpRegression(p=1.0, y_bound=ds.y_bound, epsilon=e, delta=d, algorithm=a,
                                                random_state=s)),
    Entry("DPLpRegression(p=2)", ("regression",),
          lambda e, d, a, s, ds: DPLpRegression(p=2.0, y_bound=ds.y_bound, epsilon=e, delta=d, algorithm=a,
                                                random_state=s)),
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

REFERENCE_MAX_SIZE = {"QuantileRegressor(median)": 100_000}
"""References skipped when ``n_train * n_features`` exceeds this (absent from the table): the exact LP
of ``QuantileRegressor`` (HiGHS) took 1069 s for 3 seeds at 70 000 x 10, more than all private
entries of the full run together, and over 10 minutes for one seed at 7000 x 1000;
``LinearRegression`` stays as the non-private reference."""


def _dp_sgd(e, d, s, ds, n):
    batch = int(np.clip(n // 20, 16, 256))
    return (DPSGDRegressor if ds.task == "regression" else DPSGDClassifier)(
        epsilon=e, delta=d, batch_size=batch, random_state=s)


def _diffprivlib(e, d, s, ds, n):
    if ds.task == "regression":  # pure epsilon-DP; bounds are the public row and target bounds
        return diffprivlib_models.LinearRegression(
            epsilon=e, bounds_X=(-1.0, 1.0), bounds_y=(-ds.y_bound, ds.y_bound), random_state=s)
    return diffprivlib_models.LogisticRegression(epsilon=e, data_norm=1.0, random_state=s)


COMPETITORS = {"DP-SGD (numpy, RDP)": _dp_sgd}
"""Private peers: ``(epsilon, delta, seed, dataset, n_train) -> estimator``, fitted like the entries."""
if diffprivlib_models is not None:
    COMPETITORS["diffprivlib"] = _diffprivlib
else:
    print("note: diffprivlib is not importable here (it needs scikit-learn < 1.7); its columns are "
          "skipped. See benchmarks/README.md for the peers environment.")


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
            if X_train.size > REFERENCE_MAX_SIZE.get(name, math.inf):
                continue
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
        for name, make in COMPETITORS.items():
            for epsilon in epsilons:
                scores = _fit(make(epsilon, fit_delta, seed, dataset, len(y_train)), X_train, y_train, X_test, y_test,
                              dataset.task)
                records.append({"model": name, "epsilon": epsilon, "seed": seed, **scores})
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


EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)


def write(name, records, task, seeds, suffix=""):
    """Markdown table and raw JSON under ``benchmarks/results/`` (``utility_{name}{suffix}``);
    returns the table."""
    table = summarise(records, task)
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"utility_{name}{suffix}"
    stem.with_suffix(".md").write_text(f"### {name} ({task}, {seeds} seeds)\n\n{table}\n")
    stem.with_suffix(".json").write_text(json.dumps(records, indent=1))
    return table


def plot(name, records, task, suffix=""):
    """Privacy-utility curve (metric against epsilon, one line per private model) as PNG
    (``utility_{name}{suffix}.png``)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    metric = "mae" if task == "regression" else "accuracy"
    fig, ax = plt.subplots(figsize=(6, 4))
    for model in dict.fromkeys(r["model"] for r in records if r["epsilon"] is not None):
        eps = sorted({r["epsilon"] for r in records if r["model"] == model and metric in r})
        means = [np.mean([r[metric] for r in records if r["model"] == model and r["epsilon"] == e and metric in r])
                 for e in eps]
        ax.plot(eps, means, marker="o", label=model)
    for model in dict.fromkeys(r["model"] for r in records if r["epsilon"] is None):
        ax.axhline(np.mean([r[metric] for r in records if r["model"] == model]), ls="--", lw=0.8, label=model)
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel(metric)
    ax.set_title(name)
    ax.legend(fontsize=6)
    path = RESULTS / f"utility_{name}{suffix}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=None, choices=sorted(DATASETS))
    parser.add_argument("--task", choices=["binary", "multiclass", "regression"], default=None)
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--algorithms", nargs="+", default=["auto"], choices=["auto", *ALGORITHMS])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    names = args.datasets or [n for n, d in DATASETS.items() if args.task in (None, d.task)]
    RESULTS.mkdir(exist_ok=True)
    for name in names:
        dataset = DATASETS[name]
        records = run(dataset, args.epsilons, args.algorithms, args.seeds)
        table = write(name, records, dataset.task, args.seeds)
        plot(name, records, dataset.task)
        print(f"\n### {name} ({dataset.task}, {args.seeds} seeds)\n\n{table}")


if __name__ == "__main__":
    main()
