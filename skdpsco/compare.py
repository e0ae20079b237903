"""Compare private models with their non-private scikit-learn counterparts.

Used by ``python -m skdpsco compare``. Every model sees the same train/test split; the private
models and the matched non-private baseline see the same per-row preprocessing
(``Normalizer``), which uses no statistic of the data and therefore costs no privacy. The
everyday baseline (``StandardScaler`` + ``LogisticRegression``) is shown for reference only: its
scaler reads the data's means and variances.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass

import numpy as np
from sklearn import datasets
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer, StandardScaler

from .accounting import PrivacyAccountant
from .linear_model import DPLogisticRegression

BUNDLED_DATASETS = {
    "breast_cancer": datasets.load_breast_cancer,
    "digits": datasets.load_digits,
    "iris": datasets.load_iris,
    "wine": datasets.load_wine,
}


def load_csv(path: str, target: str) -> tuple[np.ndarray, np.ndarray]:
    """Numeric feature columns and the ``target`` column of a CSV file with a header row."""
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or target not in reader.fieldnames:
            raise ValueError(f"--target {target!r} is not a column of {path}; columns: {reader.fieldnames}.")
        features = [name for name in reader.fieldnames if name != target]
        rows, labels = [], []
        for line_number, record in enumerate(reader, start=2):
            try:
                rows.append([float(record[name]) for name in features])
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"{path}, line {line_number}: every column but the target must be numeric ({exc})."
                ) from None
            labels.append(record[target])
    if not rows:
        raise ValueError(f"{path} has no data rows.")
    return np.asarray(rows), np.asarray(labels)


def load_data(dataset: str | None, csv_path: str | None, target: str | None):
    """``(X, y, name)`` of a bundled dataset or of a CSV file."""
    if csv_path is not None:
        if target is None:
            raise ValueError("--csv needs --target COLUMN naming the label column.")
        X, y = load_csv(csv_path, target)
        return X, y, csv_path
    if dataset not in BUNDLED_DATASETS:
        raise ValueError(f"--dataset must be one of {sorted(BUNDLED_DATASETS)}; got {dataset!r}.")
    X, y = BUNDLED_DATASETS[dataset](return_X_y=True)
    return X, y, dataset


@dataclass
class Row:
    model: str
    epsilon: float | None
    accuracies: list
    epsilons_spent: list
    delta_spent: float | None
    fit_seconds: list


def _fit_and_score(model, X_train, y_train, X_test, y_test):
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    return model.score(X_test, y_test), seconds


def run_comparison(
    X, y, *, epsilons, delta, repeats, test_size=0.3, algorithm="auto", radius=10.0, seed=0
) -> tuple[list[Row], PrivacyAccountant]:
    """Fit every model on ``repeats`` stratified splits; return the table rows and the ledger.

    The ledger records every private fit; since the repeats reuse the same rows, its total is the
    price of the whole experiment, not of one model.
    """
    ledger = PrivacyAccountant()
    baselines = {
        "majority class (trivial)": lambda: DummyClassifier(strategy="most_frequent"),
        "LogisticRegression, Normalizer (same input, non-private)": lambda: make_pipeline(
            Normalizer(), LogisticRegression(max_iter=5000)
        ),
        "LogisticRegression, StandardScaler (everyday, non-private)": lambda: make_pipeline(
            StandardScaler(), LogisticRegression(max_iter=5000)
        ),
    }
    rows = {name: Row(name, None, [], [], None, []) for name in baselines}
    for eps in epsilons:
        rows[eps] = Row(f"DPLogisticRegression ({algorithm})", eps, [], [], delta, [])
    for repeat in range(repeats):
        split_seed = seed + repeat
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=test_size, stratify=y, random_state=split_seed
        )
        for name, make in baselines.items():
            accuracy, seconds = _fit_and_score(make(), X_train, y_train, X_test, y_test)
            rows[name].accuracies.append(accuracy)
            rows[name].fit_seconds.append(seconds)
        for eps in epsilons:
            model = make_pipeline(
                Normalizer(),
                DPLogisticRegression(
                    epsilon=eps,
                    delta=delta,
                    data_norm=1.0,
                    radius=radius,
                    algorithm=algorithm,
                    random_state=split_seed,
                    accountant=ledger,
                    classes=np.unique(y),
                ),
            )
            accuracy, seconds = _fit_and_score(model, X_train, y_train, X_test, y_test)
            rows[eps].accuracies.append(accuracy)
            rows[eps].fit_seconds.append(seconds)
            rows[eps].epsilons_spent.append(model[-1].epsilon_)
    return list(rows.values()), ledger


def format_table(rows: list[Row]) -> str:
    """A markdown table: accuracy mean ± std over the repeats, privacy spent per fit, fit time."""
    lines = [
        "| model | target ε | test accuracy (mean ± std) | ε spent per fit | δ | fit time (ms, median) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        acc = np.asarray(row.accuracies)
        target = "—" if row.epsilon is None else f"{row.epsilon:g}"
        spent = "non-private" if row.epsilon is None else f"{max(row.epsilons_spent):.4f}"
        delta = "—" if row.delta_spent is None else f"{row.delta_spent:g}"
        if row.model.startswith("majority"):
            spent = "—"
        lines.append(
            f"| {row.model} | {target} | {acc.mean():.3f} ± {acc.std():.3f} | {spent} | {delta} "
            f"| {1e3 * np.median(row.fit_seconds):.1f} |"
        )
    return "\n".join(lines)
