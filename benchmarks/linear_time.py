"""Fit time against n: the default private fits next to scikit-learn's, from 10^4 to 10^7 rows.

``python -m benchmarks.linear_time [--quick]`` writes ``benchmarks/results/linear_time.md`` (and
``.json``, and ``linear_time.png`` with matplotlib): for each ``n``, in one process, the fit time
of ``DPLogisticRegression()`` (its ``'auto'`` choice recorded) and of ``LogisticRegression()`` on
the same rows (:func:`benchmarks.engine.make_rows`, ``d = 20``, badly scaled: the case the
private scaling exists for), the best of ``repeats`` fits after a warm-up, and the log-log slope
of time against ``n`` over the sizes from 10^5 up (a slope of 1 is linear time; below 10^5 the
fixed costs dominate). ``'auto'`` switches from Newton to Phased-SGD where Newton's work leaves
its compute budget (:func:`skdpsco.solvers.select_algorithm`): the curve has a step there, and
is linear on either side.
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from skdpsco import DPLogisticRegression, PrivacyAccountant

from .engine import best_time, bounded_time, make_rows
from .machine import machine_info
from .utility import RESULTS

SIZES = {"full": (10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6, 3 * 10**6, 10**7), "quick": (10**4, 10**5, 10**6)}
N_FEATURES = 20


def slope(ns, seconds) -> float:
    """The least-squares slope of ``log(seconds)`` against ``log(n)`` over the sizes from 10^5 up."""
    ns, seconds = np.asarray(ns, dtype=float), np.asarray(seconds, dtype=float)
    keep = ns >= 10**5
    return float(np.polyfit(np.log(ns[keep]), np.log(seconds[keep]), 1)[0]) if keep.sum() >= 2 else float("nan")


def measure(n: int, repeats: int) -> dict:
    X, labels, _ = make_rows(n, N_FEATURES, True)
    private = lambda: DPLogisticRegression(classes=[0, 1], random_state=0, accountant=PrivacyAccountant()).fit(X, labels)
    algorithm = private().algorithm_
    # the private fits first: scikit-learn's large temporaries leave the process's memory fragmented,
    # and a fresh 10^7-row copy then waits on the kernel's huge-page compaction (2-4x the fit)
    private_s = best_time(private, repeats)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sklearn_s, finished = bounded_time(lambda: LogisticRegression().fit(X, labels), repeats)
    return {"n": n, "d": N_FEATURES, "algorithm": algorithm, "private_s": private_s,
            "sklearn_s": sklearn_s, "sklearn_finished": finished}


def plot(records: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in records]
    figure, axes = plt.subplots(figsize=(5.5, 3.8))
    axes.loglog(ns, [r["private_s"] for r in records], "o-", label="DPLogisticRegression() (private)")
    axes.loglog(ns, [r["sklearn_s"] for r in records], "s--", label="LogisticRegression()")
    reference = np.array(ns, dtype=float)
    axes.loglog(reference, records[-1]["private_s"] * reference / reference[-1], ":", color="grey", label="linear in n")
    axes.set_xlabel("rows n (d = 20, badly scaled)")
    axes.set_ylabel("fit time (s)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    name = "linear_time" + ("_quick" if args.quick else "")
    records = []
    for n in SIZES["quick" if args.quick else "full"]:
        records.append(measure(n, args.repeats))
        print(records[-1], flush=True)
    private_slope = slope([r["n"] for r in records], [r["private_s"] for r in records])
    sklearn_slope = slope([r["n"] for r in records], [r["sklearn_s"] for r in records])
    lines = ["| n | auto's choice | DPLogisticRegression() (s) | LogisticRegression() (s) | ratio |", "|---|---|---|---|---|"]
    for r in records:
        bound = "" if r["sklearn_finished"] else "> "
        lines.append(f"| {r['n']:.0e} | {r['algorithm']} | {r['private_s']:.3f} | {bound}{r['sklearn_s']:.3f} | "
                     f"{r['private_s'] / r['sklearn_s']:.2f} |")
    text = (f"# Fit time against n\n\n`python -m benchmarks.linear_time{' --quick' if args.quick else ''}`: d = "
            f"{N_FEATURES}, badly scaled rows, epsilon = 1, best of {args.repeats} fits after a warm-up.\n\n"
            + "\n".join(lines) + f"\n\nLog-log slope of time against n from 10^5 rows: private {private_slope:.2f}, "
            f"scikit-learn {sklearn_slope:.2f} (1 is linear).\n")
    (RESULTS / f"{name}.md").write_text(text)
    (RESULTS / f"{name}.json").write_text(json.dumps({"machine": machine_info(), "records": records,
                                                      "slopes": {"private": private_slope, "sklearn": sklearn_slope}}, indent=1))
    try:
        plot(records, RESULTS / f"{name}.png")
    except ImportError:
        print("matplotlib is not installed: no plot")
    print(text)


if __name__ == "__main__":
    main()
