"""Speed and memory: fit time of each (estimator, algorithm) against the non-private floor.

For each n (d = 100, dense float64) and in the same process, right after one another: one epoch of
``SGDClassifier(max_iter=1, tol=None)``, ``LogisticRegression()`` (lbfgs), the single-pass floor
``X.T @ (X @ w)``, and each private entry. Times are the best of ``repeats`` fits after one warm-up
fit (which also fills the planners' caches; its time is reported as ``first_fit_s``). Peak memory is
measured in a separate fit under ``tracemalloc`` (numpy reports its buffers to it) and reported
over ``X.nbytes``. The log-log slope of time against n is fitted per entry.
"""

from __future__ import annotations

import time
import tracemalloc
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, SGDClassifier

from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant
from skdpsco.solvers import ALGORITHMS

ESTIMATORS = {cls.__name__: cls for cls in (DPLogisticRegression, DPHingeSVM, DPLpRegression)}
"""Estimators a speed entry may name (``estimator=`` key, default ``DPLogisticRegression``)."""

SPEED_ENTRIES = {
    "DPLogisticRegression [snowball]": dict(algorithm="snowball"),
    "DPLogisticRegression [auto]": dict(algorithm="auto"),
    "DPLogisticRegression [pnsgd]": dict(algorithm="pnsgd"),
    "DPLogisticRegression [phased_sgd]": dict(algorithm="phased_sgd"),
}
"""Private entries timed (DPLogisticRegression with each algorithm); grows with the registry."""

GOAL = {"entry": "DPLogisticRegression [snowball]", "n": 10**6, "max_vs_sgd_epoch": 1.5,
        "max_vs_floor": 5.0, "slope": (0.9, 1.1), "max_peak_memory_ratio": 1.5}
"""The performance goal of issue 3."""


def make_data(n: int, d: int = 100, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.standard_normal(d)
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-3.0 * X @ w / np.linalg.norm(w))), 1, -1)
    return X, y


def _best_time(fit, repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fit()
        best = min(best, time.perf_counter() - start)
    return best


def _peak_memory(fit) -> int:
    tracemalloc.start()
    try:
        fit()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


CATALOGUE_RIDGE = 1e-3
"""``alpha`` of the catalogue entries whose algorithm needs a ridge term (``'strongly_convex'``)."""

CATALOGUE_BUDGET_S = 10.0
"""The catalogue fits an entry at the next, 10x larger n only if 10 times its fit time is at most
this: no catalogue fit is expected to take much longer (more for a superlinear algorithm)."""


def catalogue_entries() -> dict:
    """Every (estimator, algorithm) of the registry, at default parameters except a small ridge
    term where the algorithm needs one: ``python -m benchmarks.speed --catalogue``."""
    entries = {}
    for estimator in ESTIMATORS:
        for algorithm in ALGORITHMS:
            params = {"estimator": estimator, "algorithm": algorithm}
            if algorithm == "strongly_convex":
                params["alpha"] = CATALOGUE_RIDGE
            entries[f"{estimator} [{algorithm}]"] = params
    return entries


def private_fit(params: dict, X, y, n):
    """A fit of the entry's estimator (``DPLogisticRegression`` unless ``params['estimator']``) at
    epsilon = 1, delta = min(1e-5, n**-1.1); a regression estimator gets the labels as targets,
    a classifier the public label set ``classes=[-1, 1]`` of :func:`make_data`."""
    params = dict(params)
    estimator = ESTIMATORS[params.pop("estimator", "DPLogisticRegression")]
    target = y.astype(float) if estimator is DPLpRegression else y
    if estimator is not DPLpRegression:
        params.setdefault("classes", [-1, 1])
    return lambda: estimator(
        epsilon=1.0, delta=min(1e-5, n**-1.1), random_state=0, accountant=PrivacyAccountant(), **params
    ).fit(X, target)


def run(sizes, entries, repeats: int = 3, registry=None, budget_s: float | None = None, progress: bool = False):
    """One record per (n, entry) with seconds, ratios to the three baselines and peak memory.

    ``entries`` are names in ``registry`` (default :data:`SPEED_ENTRIES`). Each entry is fitted once
    cold (``first_fit_s``), then timed as the best of ``repeats`` fits, and its peak memory taken in
    one more fit under tracemalloc (which slows Python code: never timed). With ``budget_s`` (the
    catalogue) the cold fit is the time, and an entry is no longer fitted at the next, 10x larger
    n once 10 times that time exceeds ``budget_s`` (recorded as skipped). ``progress`` prints each
    record."""
    registry = SPEED_ENTRIES if registry is None else registry
    too_slow = {}
    records = []

    def record(entry: dict) -> None:
        records.append(entry)
        if progress:
            print(entry, flush=True)

    for n in sizes:
        X, y = make_data(n)
        w = np.ones(X.shape[1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            baselines = {
                "sgd_epoch": _best_time(lambda: SGDClassifier(max_iter=1, tol=None, random_state=0).fit(X, y), repeats),
                "lbfgs": _best_time(lambda: LogisticRegression().fit(X, y), repeats),
                "floor": _best_time(lambda: X.T @ (X @ w), repeats),
            }
        record({"n": n, "model": "baselines", **{f"{k}_s": v for k, v in baselines.items()}})
        for name in entries:
            if name in too_slow:
                record({"n": n, "model": name, "error": f"skipped: {too_slow[name]:.1f} s at a 10x smaller n"})
                continue
            fit = private_fit(registry[name], X, y, n)
            try:
                first = _best_time(fit, 1)
            except ValueError as exc:  # infeasible at this n: reported
                record({"n": n, "model": name, "error": str(exc)[:100]})
                continue
            seconds = _best_time(fit, repeats) if budget_s is None else first
            if budget_s is not None and 10 * seconds > budget_s:
                too_slow[name] = seconds
            peak = _peak_memory(fit)
            record({
                "n": n, "model": name, "first_fit_s": first, "seconds": seconds,
                "vs_sgd_epoch": seconds / baselines["sgd_epoch"], "vs_lbfgs": seconds / baselines["lbfgs"],
                "vs_floor": seconds / baselines["floor"], "peak_memory_over_X": peak / X.nbytes,
            })
        del X, y
    return records


def slopes(records) -> dict:
    """Least-squares slope of log(seconds) against log(n), per model."""
    out = {}
    for name in {r["model"] for r in records if "seconds" in r}:
        points = [(r["n"], r["seconds"]) for r in records if r["model"] == name and "seconds" in r]
        if len(points) >= 2:
            n, t = np.log(np.array(points)).T
            out[name] = float(np.polyfit(n, t, 1)[0])
    return out


def goal_check(records, slope_by_model) -> dict:
    """Whether the issue-3 performance goal holds in these records."""
    row = next((r for r in records if r["model"] == GOAL["entry"] and r["n"] == GOAL["n"] and "seconds" in r), None)
    if row is None:
        return {"measured": False}
    slope = slope_by_model.get(GOAL["entry"], float("nan"))
    checks = {
        "vs_sgd_epoch": row["vs_sgd_epoch"] <= GOAL["max_vs_sgd_epoch"],
        "vs_floor": row["vs_floor"] <= GOAL["max_vs_floor"],
        "slope": GOAL["slope"][0] <= slope <= GOAL["slope"][1],
        "peak_memory": row["peak_memory_over_X"] <= GOAL["max_peak_memory_ratio"],
    }
    return {"measured": True, "holds": all(checks.values()), **checks}


def table(records, slope_by_model) -> str:
    lines = ["| n | model | fit (s) | first fit (s) | / SGD epoch | / lbfgs | / floor | peak mem / X.nbytes | slope |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if r["model"] == "baselines":
            lines.append(f"| {r['n']:.0e} | baselines: SGD epoch {r['sgd_epoch_s']:.3f} s, lbfgs {r['lbfgs_s']:.3f} s, "
                         f"floor {r['floor_s']:.4f} s | | | | | | | |")
        elif "error" in r:
            status = r["error"] if r["error"].startswith("skipped") else f"infeasible: {r['error']}"
            lines.append(f"| {r['n']:.0e} | {r['model']} | {status} | | | | | | |")
        else:
            slope = slope_by_model.get(r["model"], float("nan"))
            lines.append(f"| {r['n']:.0e} | {r['model']} | {r['seconds']:.3f} | {r['first_fit_s']:.3f} | "
                         f"{r['vs_sgd_epoch']:.2f} | {r['vs_lbfgs']:.2f} | {r['vs_floor']:.1f} | "
                         f"{r['peak_memory_over_X']:.2f} | {slope:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    """``python -m benchmarks.speed --catalogue``: every (estimator, algorithm) of the registry at
    n in {10^4, 10^5, 10^6}, d = 100, one cold fit each (n stops growing for an entry at
    :data:`CATALOGUE_BUDGET_S`) and one for its memory; writes ``results/speed_catalogue.{md,json}``."""
    import argparse
    import json

    from .machine import machine_info
    from .utility import RESULTS

    parser = argparse.ArgumentParser(description=main.__doc__.split("\n\n")[0])
    parser.add_argument("--catalogue", action="store_true", required=True)
    parser.parse_args(argv)
    registry = catalogue_entries()
    started = time.perf_counter()
    # one fit on other data first: the process's one-time costs (lazy imports, thread pools) are
    # not any entry's; each entry's own planning at each n still counts (cold fits)
    private_fit({}, *make_data(1000, seed=1), 1000)()
    records = run((10**4, 10**5, 10**6), tuple(registry), 1, registry, CATALOGUE_BUDGET_S, progress=True)
    slope_by_model = slopes(records)
    text = table(records, slope_by_model)
    minutes = (time.perf_counter() - started) / 60
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "speed_catalogue.md").write_text(f"{text}\n\nWall time: {minutes:.1f} min.\n")
    (RESULTS / "speed_catalogue.json").write_text(json.dumps(
        {"machine": machine_info(), "records": records, "slopes": slope_by_model, "minutes": minutes}, indent=1))
    print(text, f"\nwall time {minutes:.1f} min")


if __name__ == "__main__":
    main()
