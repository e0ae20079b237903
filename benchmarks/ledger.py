"""The ledger's cost per fit against the length of its history (issue 19, item 3).

``python -m benchmarks.ledger`` writes ``benchmarks/results/ledger.md``: for a ledger holding
``k - 1`` recorded fits (``k`` in 10, 100, 1000), the time of the ``k``-th fit's budget check and
record (:meth:`skdpsco.PrivacyAccountant.charge`, median of 5), of ``spent()`` on a ledger
without budget (reported at the summed delta, which changes with every fit, so never
remembered), and of :func:`skdpsco.accounting.epsilon_of` on the whole history, which is what the
ledger computed for every check before it kept a running composition; and the largest difference
between the two epsilons. Histories:

* **default**: ``DPLogisticRegression()``'s event (a composition of Gaussian releases) every time;
* **Gaussian + randomized response**: that event and the pure-DP ``'localization'`` fit's
  (``delta=0``: four binary randomized responses), alternating;
* **mixed catalogue**: the events of ``benchmarks/results/events.md`` (every estimator with every
  algorithm; :func:`benchmarks.events.emitted_events`) in a seeded random order, without the
  objective-perturbation events (each divides the delta left by 4: a few tens of them with output
  perturbation's failure probabilities make any composition infinite) and with Stop-PNSGD's
  fixed-order bounds at one order only (bounds at two orders compose to infinity), so that the
  composition stays finite over 1000 fits; its conversion is then RDP at that one order;
* **mixed catalogue without Stop-PNSGD**: the same without the fixed-order bounds, converted by
  RDP on the order grid of sampled events.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from functools import lru_cache, partial
from pathlib import Path

import dp_accounting
import numpy as np

from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.accounting import FixedOrderRdpDpEvent, ObjectivePerturbationDpEvent, _contains, epsilon_of

from .events import _caught_event, _CatchingAccountant, _data
from .machine import machine_info
from .utility import RESULTS

SIZES = (10, 100, 1000)
DELTA = 1e-2  # large enough for the catalogue's failure probabilities over 1000 fits
REPEATS = 5


def _fit_event(**params) -> dp_accounting.DpEvent:
    X, y = _data(2)
    return _caught_event(DPLogisticRegression(random_state=0, accountant=_CatchingAccountant(), **params), X, y)


def default_history(size: int) -> list:
    return [_fit_event()] * size


def gaussian_and_randomized_response_history(size: int) -> list:
    events = [_fit_event(), _fit_event(algorithm="localization", delta=0.0)]
    return [events[i % 2] for i in range(size)]


@lru_cache(maxsize=1)
def _catalogue() -> tuple:
    from .events import emitted_events

    return tuple(emitted.event for emitted in emitted_events())


def mixed_catalogue_history(size: int, seed: int = 0, fixed_order: bool = True) -> list:
    events, fixed_orders = [], set()
    for event in _catalogue():
        if _contains(event, ObjectivePerturbationDpEvent):
            continue
        orders = _fixed_orders(event)
        if orders:
            if not fixed_order or (fixed_orders and orders != fixed_orders):
                continue
            fixed_orders = orders
        events.append(event)
    rng = np.random.default_rng(seed)
    return [events[i] for i in rng.integers(len(events), size=size)]


def _fixed_orders(event) -> set:
    if isinstance(event, FixedOrderRdpDpEvent):
        return {event.order}
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return set().union(*(_fixed_orders(e) for e in event.events))
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return _fixed_orders(event.event)
    return set()


HISTORIES = {
    "default DPLogisticRegression()": default_history,
    "Gaussian + randomized response": gaussian_and_randomized_response_history,
    "mixed catalogue": mixed_catalogue_history,
    "mixed catalogue without Stop-PNSGD": partial(mixed_catalogue_history, fixed_order=False),
}


def _charge(ledger: PrivacyAccountant, event) -> None:
    ledger.charge(event, estimator="benchmark", params={}, epsilon=1.0, delta=1e-6)


def _replica(ledger: PrivacyAccountant) -> PrivacyAccountant:
    """A new in-memory ledger holding ``ledger``'s records (a copy of a ledger is the ledger
    itself), recorded without a budget."""
    replica = PrivacyAccountant()
    for record in ledger.history:
        replica.charge(record.event, estimator=record.estimator, params=record.params,
                       epsilon=record.epsilon, delta=record.delta)
    return replica


def _time_charges(ledger: PrivacyAccountant, event) -> float:
    """Median seconds of ``REPEATS`` budget checks and records of ``event`` on replicas of
    ``ledger`` (in memory), or on ``ledger`` itself (a file: consecutive fits ``k`` to
    ``k + REPEATS - 1``)."""
    seconds = []
    for _ in range(REPEATS):
        budgeted = _replica(ledger) if ledger.path is None else ledger
        budgeted.epsilon, budgeted.delta = 1e9, DELTA  # the budget check of the k-th fit
        started = time.perf_counter()
        _charge(budgeted, event)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def _file_copy(path: Path, to: Path) -> Path:
    with sqlite3.connect(path) as source, sqlite3.connect(to) as copy_:
        source.backup(copy_)
    return to


def measure(history: list, sizes=SIZES) -> list[dict]:
    """One row per size ``k``: the ``k``-th fit's charge against ``k - 1`` recorded fits, in memory
    and in a ledger file."""
    rows = []
    ledger = PrivacyAccountant()  # no budget: recording costs no conversion
    with tempfile.TemporaryDirectory() as directory:
        file_ledger = PrivacyAccountant(path=Path(directory) / "ledger.sqlite")
        for k in sizes:
            for event in history[len(ledger.history):k - 1]:
                _charge(ledger, event)
                _charge(file_ledger, event)
            charge_seconds = _time_charges(ledger, history[k - 1])
            budgeted = _replica(ledger)
            _charge(budgeted, history[k - 1])
            unbudgeted_spent = time.perf_counter()
            budgeted.spent()  # no budget: at the summed delta, computed
            spent_seconds = time.perf_counter() - unbudgeted_spent
            incremental = budgeted.spent(DELTA)[0]
            reading = time.perf_counter()
            reader = PrivacyAccountant(path=_file_copy(file_ledger.path, Path(directory) / f"copy{k}.sqlite"))
            assert len(reader.history) == k - 1
            read_seconds = time.perf_counter() - reading
            file_seconds = _time_charges(reader, history[k - 1])
            started = time.perf_counter()
            scratch = epsilon_of(dp_accounting.ComposedDpEvent(list(history[:k])), DELTA)
            scratch_seconds = time.perf_counter() - started
            difference = 0.0 if incremental == scratch else abs(incremental - scratch)
            rows.append({
                "fits": k, "charge_ms": 1e3 * charge_seconds, "spent_ms": 1e3 * spent_seconds,
                "file_charge_ms": 1e3 * file_seconds, "file_read_ms": 1e3 * read_seconds,
                "scratch_ms": 1e3 * scratch_seconds, "epsilon": incremental, "difference": difference,
                "held": len(budgeted._composition.event().events),
            })
            print(f"  {k} fits: charge {rows[-1]['charge_ms']:.2f} ms (file {rows[-1]['file_charge_ms']:.2f} ms), "
                  f"spent {rows[-1]['spent_ms']:.2f} ms, from scratch {rows[-1]['scratch_ms']:.0f} ms, "
                  f"epsilon {incremental:.6g} (diff {difference:.1e})", flush=True)
    return rows


def table(results: dict) -> str:
    lines = [
        "| history | fits | charge (ms) | `spent()` (ms) | charge, ledger file (ms) | open and read the file (ms) "
        f"| `epsilon_of` of the whole history (ms) | ε at δ = {DELTA:g} | \\|Δε\\| | events held |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in results.items():
        for row in rows:
            lines.append(
                f"| {name} | {row['fits']} | {row['charge_ms']:.2f} | {row['spent_ms']:.2f} | {row['file_charge_ms']:.2f} "
                f"| {row['file_read_ms']:.0f} | {row['scratch_ms']:.0f} | {row['epsilon']:.6g} | {row['difference']:.1e} "
                f"| {row['held']} |"
            )
    return "\n".join(lines)


def run(names, sizes=SIZES) -> str:
    """The markdown page of the histories ``names`` at ``sizes``."""
    results = {}
    for name in names:
        print(name, flush=True)
        results[name] = measure(HISTORIES[name](max(sizes)), sorted(sizes))
    return (
        "# The ledger's cost per fit against its history\n\n"
        "Written by `python -m benchmarks.ledger`. For a ledger holding k − 1 fits: the k-th fit's budget check "
        f"and record (`charge`, median of {REPEATS}), in memory and in a ledger file (`PrivacyAccountant(path=...)`: "
        "one SQLite transaction, synchronous=FULL, committed to disk); `spent()` of a ledger without budget (at the "
        "summed δ, never remembered); a new ledger on the file reading its k − 1 rows; "
        "and `epsilon_of` of the whole history (what every check cost before the ledger kept "
        "a running composition; today's `epsilon_of`, which remembers the RDP of numerically evaluated leaves); "
        "\\|Δε\\| between the two epsilons; events held: the size of the running composition.\n\n"
        "Machine: " + json.dumps(machine_info()) + "\n\n" + table(results) + "\n"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", nargs="+", choices=sorted(HISTORIES), default=list(HISTORIES))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    text = run(args.histories, args.sizes)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "ledger.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
