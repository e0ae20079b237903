"""The evidence of the ``'auto'`` rule's compute budget: accuracy and time of each candidate.

``python -m benchmarks.auto_compute [--quick]`` writes ``benchmarks/results/auto_compute.md`` (and
``.json``). For each (n, d) and two kinds of rows, and for ``DPLogisticRegression`` (candidates
``'newton'``, ``'noisy_gd'``, ``'phased_sgd'``) and ``DPHingeSVM`` (``'noisy_gd'``,
``'phased_sgd'``): the test AUC (mean and standard deviation over seeds) and fit time of each
candidate at the defaults otherwise (epsilon = 1, the private feature scaling), with the choice of
``'auto'`` (:func:`skdpsco.solvers.select_algorithm` under its compute budget,
:data:`skdpsco.solvers.AUTO_PASSES` and :data:`skdpsco.solvers.AUTO_FREE_WORK`). Rows:

* ``signal``: :func:`benchmarks.engine.make_rows` (Gaussian rows, a logistic model of margin scale
  3 on the standardised rows: test AUC about 0.9);
* ``weak``: :func:`benchmarks.speed.make_data` (unit rows, the speed benchmarks' rows: test AUC
  about 0.58, where the private noise matters most).

A candidate whose fit would take minutes is run only where the quick mode's sizes allow
(:data:`SKIP`); the table leaves its cell empty. Times are single fits on a shared machine:
compare them within a row.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from sklearn.metrics import roc_auc_score

from skdpsco import DPHingeSVM, DPLogisticRegression, PrivacyAccountant

from .engine import make_rows
from .machine import machine_info
from .speed import make_data
from .utility import RESULTS

SIZES = {"full": ((2 * 10**4, 20), (10**5, 20), (3 * 10**5, 20), (3 * 10**5, 50), (3 * 10**5, 100), (10**6, 100)),
         "quick": ((2 * 10**4, 20), (10**5, 20))}
MODELS = {"DPLogisticRegression": (DPLogisticRegression, ("newton", "noisy_gd", "phased_sgd")),
          "DPHingeSVM": (DPHingeSVM, ("noisy_gd", "phased_sgd"))}
TEST_ROWS = 50_000
SKIP = {"noisy_gd": 2 * 10**6}
"""Candidates left out above this ``n d`` (noisy GD's 2000 steps take minutes there)."""


def rows(kind: str, n: int, d: int):
    """``(X_train, y_train, X_test, y_test)`` of ``n`` training and :data:`TEST_ROWS` test rows."""
    if kind == "signal":
        X, y, _ = make_rows(n + TEST_ROWS, d, False, seed=7)
    else:
        X, y = make_data(n + TEST_ROWS, d, seed=7)
    return X[:n], y[:n], X[n:], y[n:]


def cell(kind: str, n: int, d: int, seeds: int) -> list[dict]:
    X, y, X_test, y_test = rows(kind, n, d)
    classes = sorted(np.unique(y).tolist())
    records = []
    for name, (estimator, candidates) in MODELS.items():
        chosen = estimator(classes=classes, accountant=PrivacyAccountant(), random_state=0).fit(X, y).algorithm_
        for algorithm in candidates:
            if n * d > SKIP.get(algorithm, np.inf):
                continue
            aucs, seconds = [], []
            for seed in range(seeds):
                start = time.perf_counter()
                model = estimator(classes=classes, algorithm=algorithm, accountant=PrivacyAccountant(),
                                  random_state=seed).fit(X, y)
                seconds.append(time.perf_counter() - start)
                aucs.append(roc_auc_score(y_test, model.decision_function(X_test)))
            records.append({"rows": kind, "n": n, "d": d, "model": name, "algorithm": algorithm,
                            "auto": algorithm == chosen, "auc": float(np.mean(aucs)), "auc_std": float(np.std(aucs)),
                            "seconds": float(np.median(seconds)), "seeds": seeds})
            print(records[-1], flush=True)
    return records


def table(records: list[dict]) -> str:
    lines = ["| rows | n | d | model | candidate | test AUC | fit (s) | AUC - best |",
             "|---|---|---|---|---|---|---|---|"]
    groups = {}
    for r in records:
        groups.setdefault((r["rows"], r["n"], r["d"], r["model"]), []).append(r)
    for (kind, n, d, model), group in groups.items():
        best = max(r["auc"] for r in group)
        for r in group:
            mark = " (auto)" if r["auto"] else ""
            lines.append(f"| {kind} | {n:.0e} | {d} | {model} | {r['algorithm']}{mark} | {r['auc']:.4f} ± "
                         f"{r['auc_std']:.4f} | {r['seconds']:.2f} | {r['auc'] - best:+.4f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    records = []
    name = "auto_compute" + ("_quick" if args.quick else "")
    for n, d in SIZES[mode]:
        for kind in ("signal", "weak"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                records += cell(kind, n, d, args.seeds)
            (RESULTS / f"{name}.json").write_text(json.dumps({"machine": machine_info(), "records": records}, indent=1))
            (RESULTS / f"{name}.md").write_text(
                f"# The 'auto' rule's compute budget: each candidate's accuracy and time\n\n"
                f"`python -m benchmarks.auto_compute{' --quick' if args.quick else ''}`, {args.seeds} seeds, "
                f"epsilon = 1, default delta, the private feature scaling; test AUC on {TEST_ROWS} held-out rows "
                f"(mean ± sd over seeds), median fit time on a shared 2-core machine. `(auto)` marks the "
                f"candidate `algorithm='auto'` runs.\n\n" + table(records) + "\n")


if __name__ == "__main__":
    main()
