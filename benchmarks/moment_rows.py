"""What computing the scaling's releases over the first rows of a fit costs in accuracy.

``python -m benchmarks.moment_rows [--quick | --small]`` writes ``benchmarks/results/moment_rows.md``
(and ``.json``; ``moment_rows_small.md`` with ``--small``). A default fit of many rows releases the orders of magnitude and the moments of its
first :func:`skdpsco.linear_model._scaling.moment_rows` rows (of a uniformly random order) and
scales the rest as it copies them. This benchmark fits ``DPLogisticRegression()`` both ways on the
same rows, seeds and budget: with the rule, and with the releases over all rows, and prints the
test AUC of each and their paired difference (mean and standard error over seeds), and the fit
time of each. ``--small`` runs at smaller ``n`` and up to 1000 features; ``--floors 8192 16384``
compares candidate floors instead (the rule with its least rows set to each,
:func:`benchmarks.engine.moment_floor`), each against the releases over all rows; a candidate
whose rule reads the same rows as another (or all of them) is the same fit, fitted once;
``--exact`` reads exactly ``min(n, floor)`` rows (the rule's other terms left out: what fewer
rows cost), into ``moment_rows_small_exact.md``. ``--changed`` leaves out the cells where every
rule reads all rows (the same fit both ways), listing them.

Rows: :func:`benchmarks.engine.make_rows`, badly scaled (six orders of magnitude across the
features), with every fifth feature moved to a large offset (``1000`` times its spread: a
feature whose spread is far below its magnitude, like a year, the case the centred moments
exist for). The validation tables of ``benchmarks/real.py`` have fewer rows than the rule's least
(``2**13``): their models are the same both ways.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np
from sklearn.metrics import roc_auc_score

from skdpsco import DPLogisticRegression, PrivacyAccountant

from .engine import make_rows, moment_floor, size
from .utility import RESULTS, write_with_notes

SIZES = {"full": ((3 * 10**5, 20), (3 * 10**5, 100), (10**6, 100)), "quick": ((2 * 10**5, 20),),
         "small": tuple((n, d) for d in (20, 100, 1000) for n in (2 * 10**4, 5 * 10**4, 10**5))}
EPSILONS = (0.3, 1.0, 3.0)
TEST_ROWS = 50_000


def offset_rows(n: int, d: int, seed: int = 11):
    """``(X, y)``: badly scaled Gaussian rows, every fifth feature offset by 1000 of its spreads."""
    X, y, _ = make_rows(n, d, True, seed=seed)
    X[:, ::5] += 1000.0 * np.abs(X[:, ::5]).mean(axis=0)
    return X, y


def fit_auc(X, y, X_test, y_test, epsilon: float, seed: int, floor: int | None = None) -> tuple[float, float]:
    """Test AUC and fit seconds of the default ``DPLogisticRegression`` with the releases over
    exactly the first ``min(n, floor)`` rows (``None``: the library's rule)."""
    with moment_floor(floor, exact=floor is not None):
        model = DPLogisticRegression(epsilon=epsilon, classes=[0, 1], random_state=seed, accountant=PrivacyAccountant())
        start = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - start
    return roc_auc_score(y_test, model.decision_function(X_test)), seconds


def rows_read(n: int, d: int, epsilon: float, floor: int | None = None, exact: bool = False) -> int:
    """The rows the releases read at this size and budget under :func:`moment_floor`."""
    with moment_floor(floor, exact):
        return DPLogisticRegression(epsilon=epsilon)._plan_scaling(n, d, subsample_moments=True).moment_rows


def cell(n: int, d: int, epsilon: float, seeds: int, floors=(None,), test_rows: int = TEST_ROWS,
         exact: bool = False) -> dict:
    """The AUC of the rule with each floor of ``floors`` (``None``: the library's; ``exact``: the
    releases over exactly ``min(n, floor)`` rows) and of the releases over all rows, paired by
    seed; a floor whose rule reads the same rows as another is fitted once (the same fit)."""
    X, y = offset_rows(n + test_rows, d)
    X, y, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
    read = {floor: rows_read(n, d, epsilon, floor, exact) for floor in floors}
    fits = {m: ([], []) for m in {n, *read.values()}}  # rows read -> (AUCs, seconds) by seed
    for seed in range(seeds):
        for m, (aucs, times) in fits.items():
            auc, seconds = fit_auc(X, y, X_test, y_test, epsilon, seed, floor=m)
            aucs.append(auc)
            times.append(seconds)
    whole = np.array(fits[n][0])
    record = {"n": n, "d": d, "epsilon": epsilon, "seeds": seeds, "auc_all": float(whole.mean()),
              "seconds_all": float(np.median(fits[n][1])), "rules": []}
    for floor, m in read.items():
        difference = np.array(fits[m][0]) - whole
        record["rules"].append({
            "floor": "rule" if floor is None else floor, "moment_rows": m,
            "auc_rule": float(np.mean(fits[m][0])), "difference": float(difference.mean()),
            "difference_se": float(difference.std(ddof=1) / np.sqrt(seeds)),
            "seconds_rule": float(np.median(fits[m][1]))})
    return record


def table(records: list[dict]) -> str:
    lines = ["| n | d | epsilon | floor | moment rows | AUC, first rows | AUC, all rows | difference (± se) "
             "| fit s, first rows | fit s, all rows |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        for rule in r["rules"]:
            lines.append(f"| {r['n']:.0e} | {r['d']} | {r['epsilon']} | {rule['floor']} | {rule['moment_rows']} | "
                         f"{rule['auc_rule']:.4f} | {r['auc_all']:.4f} | {rule['difference']:+.4f} ± "
                         f"{rule['difference_se']:.4f} | {rule['seconds_rule']:.2f} | {r['seconds_all']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small size")
    parser.add_argument("--small", action="store_true", help="n from 2e4 to 1e5, d from 20 to 1000")
    parser.add_argument("--floors", nargs="+", type=int, help="candidate floors (default: the library's)")
    parser.add_argument("--exact", action="store_true", help="the releases over exactly each floor's rows")
    parser.add_argument("--sizes", nargs="+", type=size, metavar="NxD", help="just these sizes, e.g. 5e4x20")
    parser.add_argument("--epsilons", nargs="+", type=float, default=EPSILONS)
    parser.add_argument("--changed", action="store_true", help="leave out the cells where every rule reads all rows")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--test-rows", type=int, default=TEST_ROWS)
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "small" if args.small else "full"
    floors = tuple(args.floors) if args.floors else (None,)
    warnings.simplefilter("ignore")
    records, unchanged = [], []
    for n, d in args.sizes or SIZES[mode]:
        for epsilon in args.epsilons:
            if args.changed and all(rows_read(n, d, epsilon, floor, args.exact) == n for floor in floors):
                unchanged.append(f"{n:.0e} x {d} at epsilon {epsilon:g}")
                continue
            records.append(cell(n, d, epsilon, args.seeds, floors, args.test_rows, args.exact))
            print("\n".join(table(records[-1:]).splitlines()[2:]), flush=True)
    name = "moment_rows" if mode == "full" else f"moment_rows_{mode}"
    name += "_exact" if args.exact else ""
    options = " ".join(["python -m benchmarks.moment_rows", *(argv if argv is not None else sys.argv[1:])])
    text = (f"# The scaling's releases over the first rows of a fit ({mode})\n\n"
            f"`{options}`, {args.seeds} seeds, {args.test_rows} test rows; a difference is the AUC of the rule "
            f"with that floor ('rule': the library's) minus that of the releases over all rows, paired by seed."
            f"{' Left out, every rule reading all rows: ' + '; '.join(unchanged) + '.' if unchanged else ''}"
            f"\n\n{table(records)}\n")
    write_with_notes(RESULTS / f"{name}.md", text)
    (RESULTS / f"{name}.json").write_text(json.dumps(records, indent=1))
    print(text)


if __name__ == "__main__":
    main()
