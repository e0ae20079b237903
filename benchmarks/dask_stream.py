"""The one-pass solvers on Dask rows: what the reading order does to their utility (issue 16 item 2).

    python -m benchmarks.dask_stream             # n = 10^5, d = 20, 20 partitions, 10 seeds (~10 min)
    python -m benchmarks.dask_stream --quick     # n = 2 10^4, 3 seeds

Writes ``benchmarks/results/dask_stream{,_quick}.md`` and ``.json`` (the machine, every cell).

A one-pass solver reads each row once, in an order fixed before training; its privacy holds for
every such order (``feldman.md`` pitfall D5, ``skdpsco._dask.STREAMED_ALGORITHMS``), its utility
does not: SGD on rows sorted by label follows one class, then the other. In memory a fit reads
its rows in a uniformly random permutation. A Dask fit keeps every partition whole (a block is
computed where it lives) and reads, by default, the partitions in a uniformly random order and
the rows of each in a uniformly random order of their own (the partition-level shuffle,
``skdpsco._dask.stream_order``). Measured here, on one synthetic logistic table (``d`` standard
normal features, labels from a logistic model with ``||w*|| = 3``; :data:`TEST_ROWS` test rows):

* (a) ``memory``: the in-memory fit (uniform shuffle of all rows);
* (b) ``dask, stored order``: the Dask fit reading the partitions and their rows as stored
  (``stream_order`` without a generator, patched in for this measurement: the estimators
  always shuffle);
* (c) ``dask, partition shuffle``: the Dask fit as it runs (the default).

Layouts of the stored rows: ``shuffled`` (rows in random order), ``sorted by label`` (the whole
table sorted by label: partitions of one class, negatives first: the adversarial case, e.g. a
table exported class by class), ``sorted by feature`` (sorted by the first feature, the most
informative: a table ordered by a key correlated with the label, e.g. time or a score), all in
``--partitions`` equal partitions. 10 seeds (``random_state``: the noise and the orders; the
table is fixed), mean ± std of the test log-loss and accuracy, and the median fit time of the
Dask fit (c) against the in-memory fit, on the threaded scheduler (one process).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from unittest import mock

import numpy as np

from . import machine

RESULTS = Path(__file__).resolve().parent / "results"
ALGORITHMS = ("phased_sgd", "snowball", "pnsgd", "ftrl")
LAYOUTS = ("shuffled", "sorted by label", "sorted by feature")
ORDERS = ("memory", "dask, stored order", "dask, partition shuffle")
EPSILON = 1.0


TEST_ROWS = 50_000


def table(n: int, d: int, seed: int = 0) -> tuple:
    """``(X, y, X_test, y_test)``: ``n`` training and :data:`TEST_ROWS` test rows of the same model."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w *= 3.0 / np.linalg.norm(w)
    X = rng.standard_normal((n + TEST_ROWS, d))
    y = (rng.random(n + TEST_ROWS) < 1.0 / (1.0 + np.exp(-X @ w))).astype(int)
    return X[:n], y[:n], X[n:], y[n:]


def laid_out(X: np.ndarray, y: np.ndarray, layout: str) -> tuple:
    if layout == "shuffled":
        return X, y
    key = y if layout == "sorted by label" else X[:, 0]
    rows = np.argsort(key, kind="stable")
    return X[rows], y[rows]


def fit(X, y, n_partitions: int, order: str, algorithm: str, seed: int):
    import dask.array as da

    from skdpsco import DPLogisticRegression, PrivacyAccountant, _dask

    model = DPLogisticRegression(algorithm=algorithm, epsilon=EPSILON, delta=X.shape[0] ** -1.1, classes=[0, 1],
                                 random_state=seed, accountant=PrivacyAccountant())
    if order == "memory":
        return model.fit(X, y)
    chunks = -(-X.shape[0] // n_partitions)
    lazy = (da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=chunks))
    if order == "dask, partition shuffle":
        return model.fit(*lazy)
    stored = _dask.stream_order
    with mock.patch.object(_dask, "stream_order", lambda chunks, rng=None: stored(chunks)):
        return model.fit(*lazy)


def scores(model, X_test, y_test) -> tuple:
    from sklearn.metrics import log_loss

    return float(log_loss(y_test, model.predict_proba(X_test))), float(model.score(X_test, y_test))


def run(n: int, d: int, n_partitions: int, seeds: int, algorithms=ALGORITHMS) -> list:
    X, y, X_test, y_test = table(n, d)
    cells = []
    for algorithm in algorithms:
        for layout in LAYOUTS:
            X_laid, y_laid = laid_out(X, y, layout)
            for order in ORDERS:
                losses, accuracies, times = [], [], []
                for seed in range(seeds):
                    start = time.perf_counter()
                    model = fit(X_laid, y_laid, n_partitions, order, algorithm, seed)
                    times.append(time.perf_counter() - start)
                    loss, accuracy = scores(model, X_test, y_test)
                    losses.append(loss)
                    accuracies.append(accuracy)
                cells.append({"algorithm": algorithm, "layout": layout, "order": order, "log_loss": losses,
                              "accuracy": accuracies, "seconds": times})
                print(algorithm, layout, order, f"{np.mean(losses):.4f} {np.mean(accuracies):.4f} {np.median(times):.2f}s",
                      flush=True)
    return cells


def report(cells: list, n: int, d: int, n_partitions: int, seeds: int, baseline: tuple) -> str:
    lines = [
        f"# One-pass solvers on Dask rows: the reading order (n = {n}, d = {d}, {n_partitions} partitions, "
        f"epsilon = {EPSILON:g}, delta = n^-1.1, {seeds} seeds)",
        "",
        "`python -m benchmarks.dask_stream` (module docstring: the table, the layouts, the orders).",
        f"Non-private LogisticRegression on the same rows: test log-loss {baseline[0]:.4f}, accuracy {baseline[1]:.4f}.",
        "",
        "| algorithm | stored layout | order | test log-loss | test accuracy | median fit (s) |",
        "|---|---|---|---|---|---|",
    ]
    for cell in cells:
        loss, accuracy = np.array(cell["log_loss"]), np.array(cell["accuracy"])
        lines.append(
            f"| {cell['algorithm']} | {cell['layout']} | {cell['order']} | {loss.mean():.4f} ± {loss.std():.4f} | "
            f"{accuracy.mean():.4f} ± {accuracy.std():.4f} | {np.median(cell['seconds']):.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS))
    args = parser.parse_args(argv)
    n, d, n_partitions, seeds = (20_000, 20, 20, 3) if args.quick else (100_000, 20, 20, 10)
    warnings.simplefilter("ignore")
    from sklearn.linear_model import LogisticRegression

    X, y, X_test, y_test = table(n, d)
    baseline = scores(LogisticRegression().fit(X, y), X_test, y_test)
    cells = run(n, d, n_partitions, seeds, args.algorithms)
    name = "dask_stream_quick" if args.quick else "dask_stream"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.md").write_text(report(cells, n, d, n_partitions, seeds, baseline))
    (RESULTS / f"{name}.json").write_text(json.dumps({"machine": machine.machine_info(), "cells": cells}, indent=1))


if __name__ == "__main__":
    main()
