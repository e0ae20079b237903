"""What computing the scaling's releases over the first rows of a fit costs in accuracy.

``python -m benchmarks.moment_rows [--quick]`` writes ``benchmarks/results/moment_rows.md`` (and
``.json``). A default fit of many rows releases the orders of magnitude and the moments of its
first :func:`skdpsco.linear_model._scaling.moment_rows` rows (of a uniformly random order) and
scales the rest as it copies them. This benchmark fits ``DPLogisticRegression()`` both ways on the
same rows, seeds and budget: with the rule, and with the releases over all rows (the rule's
:data:`~skdpsco.linear_model._scaling.MOMENT_ROWS` raised to ``n``), and prints the test AUC of
each and their paired difference (mean and standard error over seeds), and the fit time of each.

Rows: :func:`benchmarks.engine.make_rows`, badly scaled (six orders of magnitude across the
features), with every fifth feature moved to a large offset (``1000`` times its spread: a
feature whose spread is far below its magnitude, like a year, the case the centred moments
exist for). Real tables in ``benchmarks/real.py`` have fewer rows than the rule's least
(``2**16``): their models are the same both ways.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from sklearn.metrics import roc_auc_score

import skdpsco.linear_model._scaling as scaling
from skdpsco import DPLogisticRegression, PrivacyAccountant

from .engine import make_rows
from .utility import RESULTS

SIZES = {"full": ((3 * 10**5, 20), (3 * 10**5, 100), (10**6, 100)), "quick": ((2 * 10**5, 20),)}
EPSILONS = (0.3, 1.0, 3.0)
TEST_ROWS = 50_000


def offset_rows(n: int, d: int, seed: int = 11):
    """``(X, y)``: badly scaled Gaussian rows, every fifth feature offset by 1000 of its spreads."""
    X, y, _ = make_rows(n, d, True, seed=seed)
    X[:, ::5] += 1000.0 * np.abs(X[:, ::5]).mean(axis=0)
    return X, y


def fit_auc(X, y, X_test, y_test, epsilon: float, seed: int) -> tuple[float, float]:
    model = DPLogisticRegression(epsilon=epsilon, classes=[0, 1], random_state=seed, accountant=PrivacyAccountant())
    start = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - start
    return roc_auc_score(y_test, model.decision_function(X_test)), seconds


def cell(n: int, d: int, epsilon: float, seeds: int) -> dict:
    X, y = offset_rows(n + TEST_ROWS, d)
    X, y, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
    rule, whole, times = [], [], {"rule": [], "all": []}
    least = scaling.MOMENT_ROWS
    for seed in range(seeds):
        auc, seconds = fit_auc(X, y, X_test, y_test, epsilon, seed)
        rule.append(auc)
        times["rule"].append(seconds)
        scaling.MOMENT_ROWS = n
        try:
            auc, seconds = fit_auc(X, y, X_test, y_test, epsilon, seed)
        finally:
            scaling.MOMENT_ROWS = least
        whole.append(auc)
        times["all"].append(seconds)
    difference = np.array(rule) - np.array(whole)
    plan = DPLogisticRegression(epsilon=epsilon)._plan_scaling(n, d, subsample_moments=True)
    return {"n": n, "d": d, "epsilon": epsilon, "moment_rows": plan.moment_rows, "seeds": seeds,
            "auc_rule": float(np.mean(rule)), "auc_all": float(np.mean(whole)),
            "difference": float(difference.mean()), "difference_se": float(difference.std(ddof=1) / np.sqrt(seeds)),
            "seconds_rule": float(np.median(times["rule"])), "seconds_all": float(np.median(times["all"]))}


def table(records: list[dict]) -> str:
    lines = ["| n | d | epsilon | moment rows | AUC, first rows | AUC, all rows | difference (± se) "
             "| fit s, first rows | fit s, all rows |", "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['n']:.0e} | {r['d']} | {r['epsilon']} | {r['moment_rows']} | {r['auc_rule']:.4f} | "
                     f"{r['auc_all']:.4f} | {r['difference']:+.4f} ± {r['difference_se']:.4f} | "
                     f"{r['seconds_rule']:.2f} | {r['seconds_all']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small size")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    warnings.simplefilter("ignore")
    records = []
    for n, d in SIZES[mode]:
        for epsilon in EPSILONS:
            records.append(cell(n, d, epsilon, args.seeds))
            print(table(records[-1:]).splitlines()[-1], flush=True)
    name = "moment_rows" if mode == "full" else "moment_rows_quick"
    text = (f"# The scaling's releases over the first rows of a fit ({mode})\n\n"
            f"`python -m benchmarks.moment_rows{' --quick' if args.quick else ''}`, {args.seeds} seeds, "
            f"{TEST_ROWS} test rows; a difference is the rule's AUC minus that of the releases over all rows, "
            f"paired by seed.\n\n{table(records)}\n")
    (RESULTS / f"{name}.md").write_text(text)
    (RESULTS / f"{name}.json").write_text(json.dumps(records, indent=1))
    print(text)


if __name__ == "__main__":
    main()
