"""The one-pass engine's goals: default fits against scikit-learn's, each ratio measured in one run.

``python -m benchmarks.engine [--quick]`` writes ``benchmarks/results/engine.md`` (and ``.json``);
``--sizes 1e5x20 5e4x1000`` and ``--only unscaled`` (any of :data:`PARTS`) measure just those
cells and ratios, into ``engine_cells.md`` (``engine_cells_unscaled.md`` with ``--only``: runs of
other parts keep their files; the full table is left as it is); ``--floor 8192``
times the fits with the least moment rows set to a candidate floor (:func:`moment_floor`; into
``engine_cells_floor8192.md``), ``--moment-rows 1024`` with the releases over exactly that
many rows (``engine_cells_rows1024.md``). For each size (n, d) and each kind of rows, in the same
process, right after one another:

* the default private fit of ``DPLogisticRegression()``, ``DPHingeSVM()`` and ``DPLpRegression()``
  (raw rows, no bound given: the private scaling of the defaults), against the default fit of
  their scikit-learn counterparts ``LogisticRegression()``, ``LinearSVC()`` and
  ``LinearRegression()`` (goal: at most 1.0x);
* the same algorithm (the one ``'auto'`` chose) with ``feature_scaling=None`` and a public
  ``data_norm`` (goal: the default at most 1.3x of it: the scaling costs at most 0.3x);
* ``DPLogisticRegression(algorithm='snowball')`` against one ``SGDClassifier`` epoch and the
  single-pass floor ``X.T @ (X @ w)`` (goals: 1.0x and 5x);
* the peak traced memory of each default fit over ``X.nbytes`` (goal: 1.25x), dense and CSR.

Rows are isotropic Gaussian, or "badly scaled": the same with feature ``j`` multiplied by
``10**(6 j / (d - 1) - 3)`` (six orders of magnitude across the features), the case the private
scaling exists for. Times are the best of ``repeats`` fits after a warm-up fit. A ratio is a
quotient of two times measured minutes apart in one process: compare ratios, not seconds,
across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import sys
import time
import warnings

import numpy as np
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression, SGDClassifier
from sklearn.svm import LinearSVC

import skdpsco.linear_model._scaling as scaling
from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant

from .speed import _best_time
from .speed import _peak_memory as peak_memory
from .utility import RESULTS

SIZES = {"full": ((10**5, 20), (10**6, 100), (5 * 10**4, 1000)), "quick": ((10**5, 20), (2 * 10**5, 100))}
"""(n, d) of each cell: the three sizes of the goal, or two small ones for a quick look."""

PAIRS = (
    ("DPLogisticRegression", DPLogisticRegression, LogisticRegression, "labels"),
    ("DPHingeSVM", DPHingeSVM, LinearSVC, "labels"),
    ("DPLpRegression", DPLpRegression, LinearRegression, "targets"),
)
"""(name, private estimator, its scikit-learn counterpart, what it fits)."""

PARTS = ("sklearn", "unscaled", "snowball", "memory")
"""The measurements of a cell that ``--only`` chooses from: the default fits against scikit-learn's,
against the unscaled fits, the Snowball fit against its baselines, the peak memory."""

GOALS = {"vs_sklearn": 1.0, "vs_unscaled": 1.3, "snowball_vs_sgd_epoch": 1.0, "snowball_vs_floor": 5.0,
         "peak_memory_over_X": 1.25}
"""The goals, as upper bounds on each ratio."""


@contextlib.contextmanager
def moment_floor(floor: int | None, exact: bool = False):
    """The least rows of :func:`~skdpsco.linear_model._scaling.moment_rows`
    (:data:`~skdpsco.linear_model._scaling.MOMENT_ROWS` and
    :data:`~skdpsco.linear_model._scaling.SCALED_MOMENT_ROWS`) set to ``floor`` (``None``: as they
    are) inside: a candidate floor measured before it is the library's. ``exact``: the rule's other
    terms left out, so that the releases read exactly ``min(n, floor)`` rows (what a given number
    of rows costs, whatever the budget)."""
    saved = scaling.MOMENT_ROWS, scaling.SCALED_MOMENT_ROWS, scaling.moment_rows
    if floor is not None:
        scaling.MOMENT_ROWS = scaling.SCALED_MOMENT_ROWS = floor
    if exact:
        scaling.moment_rows = lambda plan: min(plan.n_samples, scaling.MOMENT_ROWS)
    try:
        yield
    finally:
        scaling.MOMENT_ROWS, scaling.SCALED_MOMENT_ROWS, scaling.moment_rows = saved


def make_rows(n: int, d: int, badly_scaled: bool, seed: int = 0):
    """``(X, labels, targets)``: Gaussian rows (badly scaled: feature ``j`` times
    ``10**(6 j / (d - 1) - 3)``), labels of a logistic model and targets of a linear one, both on
    the standardised rows."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d) / np.sqrt(d)
    margin = X @ w
    labels = (rng.random(n) < 1.0 / (1.0 + np.exp(-3.0 * margin))).astype(int)
    targets = margin + 0.1 * rng.standard_normal(n)
    if badly_scaled:
        X *= 10.0 ** (6.0 * np.arange(d) / max(d - 1, 1) - 3.0)
    return X, labels, targets


SLOW_FIT_S = 5.0
"""A fit whose warm-up call takes longer than this is timed by that call alone (``LinearSVC()``
on badly scaled rows runs liblinear to its iteration cap: minutes a fit at these sizes)."""


SKLEARN_TIMEOUT_S = 60.0
"""A scikit-learn fit that has not finished after this long is stopped: its time is then known to
exceed it, and the private fit's ratio to it is an upper bound (``LinearSVC()`` on badly scaled
rows runs liblinear to its iteration cap, ten minutes and more at these sizes)."""


def bounded_time(fit, repeats: int) -> tuple[float, bool]:
    """``(seconds, finished)``: :func:`best_time` of ``fit`` in a forked child process, or
    ``(SKLEARN_TIMEOUT_S, False)`` when its warm-up call has not finished after
    :data:`SKLEARN_TIMEOUT_S` (the child is then killed)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child():
        send.send(_best_time(fit, 1))  # the warm-up, reported as soon as it ends
        send.send(best_time(fit, repeats))

    process = context.Process(target=child)
    process.start()
    if not receive.poll(SKLEARN_TIMEOUT_S):
        process.kill()
        process.join()
        return SKLEARN_TIMEOUT_S, False
    receive.recv()
    seconds = receive.recv()
    process.join()
    return seconds, True


def best_time(fit, repeats: int) -> float:
    """The least wall time of ``repeats`` calls of ``fit`` after one warm-up call, or the warm-up's
    own time when it exceeds :data:`SLOW_FIT_S`."""
    warm_up = _best_time(fit, 1)
    return warm_up if warm_up > SLOW_FIT_S else _best_time(fit, repeats)


def _private(estimator, n: int, **params):
    params.setdefault("random_state", 0)
    if estimator is not DPLpRegression:
        params.setdefault("classes", [0, 1])
    return estimator(accountant=PrivacyAccountant(), **params)


def cell(n: int, d: int, badly_scaled: bool, repeats: int, only=PARTS) -> list[dict]:
    """The records of one (n, d, rows) cell: the measurements of :data:`PARTS` in ``only``."""
    X, labels, targets = make_rows(n, d, badly_scaled)
    data = {"labels": labels, "targets": targets}
    kind = "badly scaled" if badly_scaled else "isotropic"
    records = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name, private, public, target in PAIRS:
            if not {"sklearn", "unscaled", "memory"} & set(only):
                break
            y = data[target]
            default = _private(private, n).fit(X, y)
            algorithm = default.algorithm_
            record = {"n": n, "d": d, "rows": kind, "model": name, "algorithm": algorithm}
            if {"sklearn", "unscaled"} & set(only):
                record["default_s"] = best_time(lambda: _private(private, n).fit(X, y), repeats)
            if "unscaled" in only:
                unscaled_norm = float(np.sqrt(np.einsum("ij,ij->i", X, X)).max())  # a public bound, as a user states it
                record["unscaled_s"] = best_time(lambda: _private(private, n, algorithm=algorithm, feature_scaling=None,
                                                                 data_norm=unscaled_norm).fit(X, y), repeats)
                record["vs_unscaled"] = record["default_s"] / record["unscaled_s"]
            if "sklearn" in only:
                record["sklearn_s"], record["sklearn_finished"] = bounded_time(lambda: public().fit(X, y), repeats)
                record["vs_sklearn"] = record["default_s"] / record["sklearn_s"]
            if "memory" in only:
                record["peak_memory_over_X"] = peak_memory(lambda: _private(private, n).fit(X, y)) / X.nbytes
            records.append(record)
        if "snowball" in only:
            w = np.ones(d)
            baselines = {
                "sgd_epoch": best_time(lambda: SGDClassifier(max_iter=1, tol=None, random_state=0).fit(X, labels),
                                       repeats),
                "floor": best_time(lambda: X.T @ (X @ w), repeats),
            }
            snowball = best_time(lambda: _private(DPLogisticRegression, n, algorithm="snowball").fit(X, labels), repeats)
            records.append({
                "n": n, "d": d, "rows": kind, "model": "DPLogisticRegression [snowball]", "algorithm": "snowball",
                "default_s": snowball, **{f"{k}_s": v for k, v in baselines.items()},
                "snowball_vs_sgd_epoch": snowball / baselines["sgd_epoch"],
                "snowball_vs_floor": snowball / baselines["floor"],
            })
        if not badly_scaled and "memory" in only:
            records.extend(csr_memory(n, X, data))
    return records


CSR_ROWS = "CSR (|x| > 1 kept)"


def csr_memory(n: int, X: np.ndarray, data: dict) -> list[dict]:
    """The peak traced memory of each default fit on the CSR rows of ``X``'s entries above 1 in
    magnitude (about a third of them stored), over the bytes of their three arrays."""
    csr = sparse.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))
    stored = csr.data.nbytes + csr.indices.nbytes + csr.indptr.nbytes
    records = []
    for name, private, _, target in PAIRS:
        model = _private(private, n).fit(csr, data[target])  # the warm-up: imports and caches outside the measurement
        records.append({
            "n": n, "d": X.shape[1], "rows": CSR_ROWS, "model": name, "algorithm": model.algorithm_,
            "peak_memory_over_X": peak_memory(lambda: _private(private, n).fit(csr, data[target])) / stored,
        })
    return records


def _ratio(record: dict, key: str) -> str:
    if key not in record:
        return ""
    mark = "" if record[key] <= GOALS[key] else " ✗"
    bound = "≤ " if key == "vs_sklearn" and not record.get("sklearn_finished", True) else ""
    return f"{bound}{record[key]:.2f}{mark}"


def table(records: list[dict]) -> str:
    """The markdown table; a ratio above its goal is marked ✗."""
    lines = [
        "| n | d | rows | model (auto's choice) | default fit (s) | / scikit-learn (≤ 1.0) | / unscaled (≤ 1.3) "
        "| snowball / SGD epoch (≤ 1.0) | snowball / floor (≤ 5) | peak memory / X (≤ 1.25) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        seconds = f"{r['default_s']:.3f}" if "default_s" in r else ""
        lines.append(
            f"| {r['n']:.0e} | {r['d']} | {r['rows']} | {r['model']} ({r['algorithm']}) | {seconds} | "
            f"{_ratio(r, 'vs_sklearn')} | {_ratio(r, 'vs_unscaled')} | {_ratio(r, 'snowball_vs_sgd_epoch')} | "
            f"{_ratio(r, 'snowball_vs_floor')} | {_ratio(r, 'peak_memory_over_X')} |"
        )
    return "\n".join(lines)


def size(text: str) -> tuple[int, int]:
    """``'1e5x20'`` -> ``(100000, 20)``."""
    n, d = text.lower().split("x")
    return int(float(n)), int(float(d))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two small sizes instead of the goal's three")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sizes", nargs="+", type=size, metavar="NxD", help="just these sizes, e.g. 1e5x20 5e4x1000")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=PARTS, help="just these measurements")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--floor", type=int, help="a candidate least of the scaling's moment rows")
    chosen.add_argument("--moment-rows", type=int, help="the scaling's releases over exactly this many rows")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    floor = args.floor if args.moment_rows is None else args.moment_rows
    suffix = "" if floor is None else f"_floor{floor}" if args.moment_rows is None else f"_rows{floor}"
    cells = args.sizes is not None or set(args.only) != set(PARTS) or floor is not None
    parts = "" if set(args.only) == set(PARTS) else "_" + "_".join(sorted(args.only))
    name = f"engine_cells{suffix}{parts}" if cells else _name(mode)  # runs of other parts keep their files
    command = " ".join(["python -m benchmarks.engine", *(argv if argv is not None else sys.argv[1:])])
    started = time.perf_counter()
    records = []
    for n, d in args.sizes or SIZES[mode]:
        for badly_scaled in (False, True):
            with moment_floor(floor, exact=args.moment_rows is not None):
                rows = cell(n, d, badly_scaled, args.repeats, args.only)
            records.extend(rows)
            print("\n".join(table(rows).splitlines()[2:]), flush=True)
            write(records, mode, args.repeats, time.perf_counter() - started, name, command)  # a cut-short run keeps its cells
    print((RESULTS / f"{name}.md").read_text())


def _name(mode: str) -> str:
    return "engine" if mode == "full" else "engine_quick"


def write(records: list[dict], mode: str, repeats: int, seconds: float, name: str | None = None,
          command: str | None = None) -> None:
    """The table and the records of the cells measured so far, under ``benchmarks/results/``."""
    name = name or _name(mode)
    command = command or f"python -m benchmarks.engine{' --quick' if mode == 'quick' else ''}"
    text = (f"# The one-pass engine's goals ({mode if name == _name(mode) else 'chosen cells'})\n\n`{command}`"
            f", {seconds:.0f} s (load average {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} CPUs); "
            f"best of {repeats} fits after a warm-up. A ratio above its goal is marked ✗; "
            f"'≤' marks a scikit-learn fit stopped after {SKLEARN_TIMEOUT_S:.0f} s (the ratio is an upper bound).\n\n"
            + table(records) + "\n")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.md").write_text(text)
    (RESULTS / f"{name}.json").write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
