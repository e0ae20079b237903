"""partial_fit over a stream: private FTRL with tree aggregation against one-call fits.

    python -m benchmarks.stream                 # 10^6 rows in 100 calls, epsilon = 1, 3 seeds
    python -m benchmarks.stream --seeds 10      # the issue's standard
    python -m benchmarks.stream --quick         # 10^5 rows in 100 calls, 2 seeds

Writes ``benchmarks/results/stream{,_quick}.md`` and ``.json`` (the machine, every cell).

The table is :func:`benchmarks.dask_stream.table`: ``d = 20`` standard normal features, labels
from a logistic model with ``||w*|| = 3``, 5 10^4 test rows. The public row bound is ``data_norm =
sqrt(d) + 2`` (the features' known distribution: it clips about 0.1 % of the rows), with
``feature_scaling=None`` (a stream needs its scaling fixed in advance) and ``delta = 1e-7`` (below
``1 / n``, fixed before the stream, as partial_fit requires). Cells, each with ``random_state`` =
the seed and its own ledger:

* ``stream (k steps/call)``: ``DPLogisticRegression(max_partial_fit_calls=100,
  solver_options={'steps_per_call': k})``, ``partial_fit`` on 100 consecutive blocks of ``n /
  100`` rows; test accuracy after calls 1, 2, 5, 10, 25, 50, 100 (every intermediate model is a
  released, usable model);
* ``one call, algorithm='ftrl'``: the same algorithm family fitted once on all the rows, the same
  public bound (the issue's reference for the 0.02 goal);
* ``one call, default``: ``DPLogisticRegression()`` with its defaults (private feature scaling,
  ``algorithm='auto'``) on all the rows;
* non-private ``LogisticRegression()`` on all the rows, for scale.

Per-call time: one stream per batch size ``b`` in :data:`TIMED_BATCHES` (100 calls, the first
call, which plans and charges, timed apart), the median seconds of a call and per 10^4 rows.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from . import machine
from .dask_stream import RESULTS, table

EPSILON = 1.0
DELTA = 1e-7
N_CALLS = 100
CHECKPOINTS = (1, 2, 5, 10, 25, 50, 100)
STEPS = (1, 10, 50)
TIMED_BATCHES = (1_000, 10_000, 100_000)


def _model(d: int, seed: int, **params):
    from skdpsco import DPLogisticRegression, PrivacyAccountant

    return DPLogisticRegression(epsilon=EPSILON, delta=DELTA, data_norm=float(np.sqrt(d) + 2.0), feature_scaling=None,
                                classes=[0, 1], random_state=seed, accountant=PrivacyAccountant(), **params)


def stream(X, y, X_test, y_test, steps: int, seed: int) -> dict:
    model = _model(X.shape[1], seed, max_partial_fit_calls=N_CALLS, solver_options={"steps_per_call": steps})
    blocks = np.array_split(np.arange(X.shape[0]), N_CALLS)
    accuracy, seconds = {}, []
    for call, rows in enumerate(blocks, start=1):
        start = time.perf_counter()
        model.partial_fit(X[rows], y[rows])
        seconds.append(time.perf_counter() - start)
        if call in CHECKPOINTS:
            accuracy[call] = float(model.score(X_test, y_test))
    return {"accuracy": accuracy, "seconds": seconds, "epsilon": float(model.epsilon_),
            "charges": len(model.accountant.history)}


def one_call(X, y, X_test, y_test, seed: int, default: bool) -> dict:
    from skdpsco import DPLogisticRegression, PrivacyAccountant

    start = time.perf_counter()
    if default:
        model = DPLogisticRegression(epsilon=EPSILON, classes=[0, 1], random_state=seed, accountant=PrivacyAccountant())
    else:
        model = _model(X.shape[1], seed, algorithm="ftrl")
    model.fit(X, y)
    return {"accuracy": float(model.score(X_test, y_test)), "seconds": time.perf_counter() - start,
            "epsilon": float(model.epsilon_)}


def call_times(X, y, batch: int) -> dict:
    """Seconds of each of :data:`N_CALLS` calls of ``batch`` rows (rows reused: timing only)."""
    model = _model(X.shape[1], 0, max_partial_fit_calls=N_CALLS)
    seconds = []
    for call in range(N_CALLS):
        rows = np.arange(call * batch, (call + 1) * batch) % X.shape[0]
        X_call, y_call = X[rows], y[rows]  # the caller's batch, gathered before the clock starts
        start = time.perf_counter()
        model.partial_fit(X_call, y_call)
        seconds.append(time.perf_counter() - start)
    return {"batch": batch, "first": seconds[0], "median": float(np.median(seconds[1:]))}


def run(n: int, d: int, seeds: int, steps=STEPS) -> dict:
    from sklearn.linear_model import LogisticRegression

    X, y, X_test, y_test = table(n, d)
    X_test, y_test = X_test, y_test
    nonprivate = float(LogisticRegression().fit(X, y).score(X_test, y_test))
    print(f"non-private LogisticRegression: {nonprivate:.4f}", flush=True)
    cells = {}
    for k in steps:
        cells[f"stream ({k} steps/call)"] = [stream(X, y, X_test, y_test, k, seed) for seed in range(seeds)]
        print(k, [c["accuracy"][N_CALLS] for c in cells[f"stream ({k} steps/call)"]], flush=True)
    for default in (False, True):
        name = "one call, default" if default else "one call, algorithm='ftrl'"
        cells[name] = [one_call(X, y, X_test, y_test, seed, default) for seed in range(seeds)]
        print(name, [c["accuracy"] for c in cells[name]], flush=True)
    timing = [call_times(X, y, b) for b in TIMED_BATCHES if b <= n]
    return {"n": n, "d": d, "seeds": seeds, "nonprivate": nonprivate, "cells": cells, "timing": timing}


def _mean_std(values) -> str:
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.4f} ± {values.std():.4f}"


def report(result: dict) -> str:
    n, d, seeds, cells = result["n"], result["d"], result["seeds"], result["cells"]
    reference = np.array([c["accuracy"] for c in cells["one call, algorithm='ftrl'"]])
    lines = [
        f"# partial_fit over a stream: {n} rows in {N_CALLS} calls (d = {d}, epsilon = {EPSILON:g}, "
        f"delta = {DELTA:g}, {seeds} seeds)",
        "",
        "`python -m benchmarks.stream` (module docstring: the table, the public bounds, the cells). "
        f"Non-private LogisticRegression on all rows: test accuracy {result['nonprivate']:.4f}.",
        "",
        "## Final model against one-call fits (test accuracy, mean ± std over seeds)",
        "",
        "| cell | test accuracy | minus one-call ftrl (paired mean) | epsilon_ | charges | seconds (total) |",
        "|---|---|---|---|---|---|",
    ]
    for name, runs in cells.items():
        if name.startswith("stream"):
            final = np.array([r["accuracy"][N_CALLS] for r in runs])
            seconds = np.mean([sum(r["seconds"]) for r in runs])
            charges = sorted({r["charges"] for r in runs})
        else:
            final = np.array([r["accuracy"] for r in runs])
            seconds = np.mean([r["seconds"] for r in runs])
            charges = [1]
        lines.append(f"| {name} | {_mean_std(final)} | {np.mean(final - reference):+.4f} | "
                     f"{np.mean([r['epsilon'] for r in runs]):.4f} | {charges} | {seconds:.1f} |")
    lines += ["", "## Accuracy after each call (intermediate models, mean over seeds)", "",
              "| cell | " + " | ".join(f"call {c}" for c in CHECKPOINTS) + " |",
              "|---|" + "---|" * len(CHECKPOINTS)]
    for name, runs in cells.items():
        if name.startswith("stream"):
            lines.append(f"| {name} | " + " | ".join(f"{np.mean([r['accuracy'][c] for r in runs]):.4f}"
                                                     for c in CHECKPOINTS) + " |")
    lines += ["", f"## Per-call time against the batch size ({N_CALLS} calls, default steps per call)", "",
              "| rows per call | first call (plans, charges) s | median later call s | per 10^4 rows s |",
              "|---|---|---|---|"]
    for t in result["timing"]:
        lines.append(f"| {t['batch']} | {t['first']:.4f} | {t['median']:.4f} | {t['median'] / t['batch'] * 1e4:.4f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--steps", type=int, nargs="+", default=list(STEPS))
    args = parser.parse_args(argv)
    n, seeds = (100_000, 2) if args.quick else (1_000_000, 3)
    seeds = args.seeds or seeds
    warnings.simplefilter("ignore")
    result = run(n, 20, seeds, args.steps)
    name = "stream_quick" if args.quick else "stream"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.md").write_text(report(result))
    (RESULTS / f"{name}.json").write_text(json.dumps({"machine": machine.machine_info(), **result}, indent=1))
    print(report(result))


if __name__ == "__main__":
    main()
