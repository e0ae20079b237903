"""Command line: ``python -m skdpsco compare`` fits private models next to non-private ones."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from .compare import BUNDLED_DATASETS, format_table, load_data, run_comparison
from .solvers import ALGORITHMS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m skdpsco", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    compare = commands.add_parser(
        "compare",
        help="fit DP models and their non-private counterparts, print a table",
        description=(
            "Fit DPLogisticRegression at several epsilons and non-private scikit-learn models on "
            "the same stratified splits, and print test accuracy, privacy spent and fit time. "
            "Features are scaled per row (Normalizer), which reads no statistic of the data; the "
            "label set is taken as public."
        ),
    )
    source = compare.add_mutually_exclusive_group()
    source.add_argument("--dataset", default="breast_cancer", choices=sorted(BUNDLED_DATASETS))
    source.add_argument("--csv", metavar="PATH", help="CSV file with a header row; numeric features")
    compare.add_argument("--target", metavar="COL", help="label column of --csv")
    compare.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0])
    compare.add_argument("--delta", type=float, default=1e-5)
    compare.add_argument("--repeats", type=int, default=10, help="splits and seeds (default 10)")
    compare.add_argument("--test-size", type=float, default=0.3)
    compare.add_argument("--algorithm", default="auto", choices=["auto", *ALGORITHMS])
    compare.add_argument("--radius", type=float, default=10.0)
    compare.add_argument("--seed", type=int, default=0)
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        X, y, name = load_data(args.dataset if args.csv is None else None, args.csv, args.target)
        if args.repeats < 1:
            raise ValueError("--repeats must be >= 1.")
        rows, ledger = run_comparison(
            X,
            y,
            epsilons=args.epsilons,
            delta=args.delta,
            repeats=args.repeats,
            test_size=args.test_size,
            algorithm=args.algorithm,
            radius=args.radius,
            seed=args.seed,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"dataset: {name} (n={X.shape[0]}, d={X.shape[1]}, classes={np.unique(y).size}), "
        f"{args.repeats} stratified splits (test size {args.test_size}), delta={args.delta:g}\n"
    )
    print(format_table(rows))
    total_eps, total_delta = ledger.spent()
    print(
        f"\n'ε spent per fit' is the price of one model. All {len(ledger.history)} private fits above "
        f"reused the same rows, so together they spent epsilon={total_eps:.3g} at "
        f"delta={total_delta:.3g} (composed by the accountant)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
