"""Command line: ``python -m skdpsco compare`` fits private models next to non-private ones;
``python -m skdpsco ledger PATH`` prints what a ledger file holds."""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import sys

import numpy as np

from ._delta import default_delta, resolve_delta
from ._table import TASK_RULE, TASKS, parse_categories
from .accounting import PrivacyAccountant
from .compare import BUNDLED_DATASETS, TABLES, load_data, public_feature_bounds, run_comparison
from .solvers import ALGORITHMS


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where there is none to show (``None``)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


_COMMANDS = {
    "compare": (
        "fit DP models and their non-private counterparts, print a table",
        "Fit private models at several epsilons and their non-private scikit-learn "
        "counterparts on the same splits, and print test scores, privacy spent and fit time. "
        "Classification: DPLogisticRegression against LogisticRegression, test accuracy, "
        "stratified splits; the label set is taken as public. Regression (--csv only): "
        "DPLpRegression against LinearRegression, test RMSE and R², random splits. The "
        "private models take the raw features with the defaults: each feature's scale is "
        "learnt privately inside fit, within the fit's epsilon. With public feature bounds "
        "(documented ones for the bundled datasets, --feature-bounds for a CSV file) the "
        "classification table also has the hand-built private pipeline, DPStandardScaler -> "
        "Normalizer -> DPLogisticRegression, with each epsilon split 1:3 between scaler and model.",
    ),
    "ledger": (
        "print what a ledger file holds",
        "Print a summary of a ledger file written by PrivacyAccountant(path=PATH): its budget, "
        "what its fits spent together, each fit and each reset. Reading it does not change it.",
    ),
}
"""Each command's one-line summary and description."""


def _compare_options(compare: argparse.ArgumentParser) -> None:
    source = compare.add_mutually_exclusive_group()
    source.add_argument("--dataset", default="breast_cancer", choices=sorted(BUNDLED_DATASETS),
                        help="a classification dataset bundled with scikit-learn")
    source.add_argument("--csv", metavar="PATH",
                        help="CSV file with a header row; numeric feature columns, and categorical ones "
                        "declared with --categories; no missing cells")
    compare.add_argument("--target", metavar="COL", help="target column of --csv (only with --csv)")
    compare.add_argument("--task", choices=TASKS,
                         help=f"task of the --csv target (default: detected by a public rule: {TASK_RULE})")
    compare.add_argument("--categories", action="append", metavar="COL=CAT,CAT,...",
                         help="a categorical column of --csv and its categories, matched to the cells as "
                         "written, one-hot encoded (values outside them are encoded as all zeros); repeat "
                         "for each such column. Declare them from your schema: they are not read from the data")
    compare.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0],
                         help="target epsilon of each private model")
    compare.add_argument("--delta", type=float, default=1e-5, help="target delta of each private model")
    compare.add_argument("--repeats", type=int, default=10,
                         help="train/test splits (stratified for classification), one seed each")
    compare.add_argument("--test-size", type=float, default=0.3, help="fraction of the rows held out")
    compare.add_argument("--algorithm", default="auto", choices=["auto", *ALGORITHMS], metavar="ALGORITHM",
                         help="training algorithm of the private models: auto or one of " + ", ".join(ALGORITHMS))
    compare.add_argument("--radius", type=float, default=None,
                         help="public radius of the parameter ball (default: the estimator's rule)")
    compare.add_argument("--seed", type=int, default=0, help="seed of the first split and fit")
    compare.add_argument(
        "--feature-bounds",
        type=float,
        nargs=2,
        metavar=("LOW", "HIGH"),
        help="public range of every numeric feature (one-hot columns: 0 and 1), for the private-scaler "
        "pipeline of classification (default: the documented ranges of a bundled dataset; none for --csv). "
        "Never take it from the data.",
    )


def _ledger_options(ledger: argparse.ArgumentParser) -> None:
    ledger.add_argument("path", metavar="PATH", help="an existing ledger file")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m skdpsco", description="Differentially private linear models: command-line jobs."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, add_options in (("compare", _compare_options), ("ledger", _ledger_options)):
        summary, description = _COMMANDS[name]
        add_options(
            commands.add_parser(name, help=summary, description=description, formatter_class=_HelpFormatter)
        )
    return parser


def _check_compare_options(args) -> None:
    """Refuse the options that do not go together (before reading any data)."""
    if args.csv is None:
        for option, value in (("--target", args.target), ("--task", args.task), ("--categories", args.categories)):
            if value is not None:
                raise ValueError(f"{option} goes with --csv; a bundled --dataset has its own labels and schema.")
    if args.repeats < 1:
        raise ValueError("--repeats must be >= 1.")
    if args.feature_bounds is not None and not args.feature_bounds[0] < args.feature_bounds[1]:
        raise ValueError("--feature-bounds needs LOW < HIGH.")


def _check_delta(args, n_rows: int) -> None:
    """Refuse a ``--delta`` that voids the guarantee of a fit on the training rows (the estimators'
    rule, :func:`~skdpsco._delta.resolve_delta`), with the option's fix."""
    n_train = n_rows - math.ceil(args.test_size * n_rows)
    try:
        resolve_delta(args.delta, max(n_train, 1))
    except ValueError:
        raise ValueError(
            f"--delta {args.delta:g} is not below 1/n for the {n_train} training rows, so it promises "
            f"nothing; pass --delta {default_delta(max(n_train, 1)):.2g} (min(1e-5, 1/(10 n))) or smaller."
        ) from None


def _heading(args, table, name) -> str:
    """The first line of the output: the data, its size, the splits and delta."""
    size = f"n={table.X.shape[0]}, d={table.n_encoded}"
    if table.task == "classification":
        size, splits = f"{size}, classes={np.unique(table.y).size}", "stratified"
    else:
        splits = "random"
    return (
        f"dataset: {name} ({size}), {args.repeats} {splits} splits (test size {args.test_size}), "
        f"delta={args.delta:g}"
    )


def _csv_notes(args, table) -> list[str]:
    """What the output says of a CSV file's schema: the task and how it was chosen, the encoding,
    the label set taken as public."""
    how = "given by --task" if args.task else f"detected by the public rule ({TASK_RULE}); --task chooses it"
    notes = [f"task: {table.task}, {how}."]
    if table.categories:
        notes.append(
            f"features: {len(table.numeric)} numeric (raw), {len(table.categories)} categorical one-hot "
            f"encoded by the categories of --categories into {table.n_encoded - len(table.numeric)} "
            "columns (a value outside them: all zeros)."
        )
    if table.task == "classification":
        notes.append(
            f"labels: the {np.unique(table.y).size} labels of column {args.target!r} are taken as public "
            "(a classifier's classes_ releases its label set)."
        )
    return notes


def _pipeline_note(args, feature_bounds) -> str:
    """What the output of classification says of the private-scaler pipeline, or of its absence."""
    if feature_bounds is None:
        return (
            "\n(No public feature bounds: the DPStandardScaler pipeline is left out; give --feature-bounds "
            "LOW HIGH.)"
        )
    source = "--feature-bounds" if args.feature_bounds is not None else "the dataset's documented ranges"
    return (
        f"\nDPStandardScaler → DPLogisticRegression: features mapped onto [0, 1] by public bounds "
        f"({source}; never computed from the rows), DPStandardScaler at 1/4 of (ε, δ), Normalizer, "
        "DPLogisticRegression at 3/4; its 'ε spent per fit' is the composition of both fits."
    )


def _compare(args) -> int:
    """``compare``: fit the models of the task on the data, print the table and the notes."""
    _check_compare_options(args)
    dataset = args.dataset if args.csv is None else None
    try:
        table, name = load_data(dataset, args.csv, args.target, args.task, parse_categories(args.categories))
    except OSError as exc:
        raise ValueError(f"--csv: cannot read {args.csv!r} ({exc.strerror or exc}).") from None
    _check_delta(args, table.X.shape[0])
    if args.feature_bounds is not None:
        if table.task == "regression":
            raise ValueError(
                "--feature-bounds builds the private pipeline of classification; leave it out for regression."
            )
        feature_bounds = table.encoded_bounds(*args.feature_bounds)
    else:
        feature_bounds = public_feature_bounds(dataset)
    rows, ledger = run_comparison(
        table.X, table.y, epsilons=args.epsilons, delta=args.delta, repeats=args.repeats,
        test_size=args.test_size, algorithm=args.algorithm, radius=args.radius, seed=args.seed,
        feature_bounds=feature_bounds, task=table.task, encoder=table.encoder(),
    )
    print(_heading(args, table, name))
    if args.csv:
        print("\n".join(_csv_notes(args, table)))
    print()
    print(TABLES[table.task](rows))
    if table.task == "classification":
        print(_pipeline_note(args, feature_bounds))
    total_eps, total_delta = ledger.spent()
    print(
        f"\n'ε spent per fit' is the price of one model. All {len(ledger.history)} private fits above "
        f"reused the same rows, so together they spent epsilon={total_eps:.3g} at "
        f"delta={total_delta:.3g} (composed by the accountant)."
    )
    return 0


def _is_ledger_file(path: str) -> bool:
    """Whether ``path`` is a ledger file, read without writing to it: an SQLite file with the
    ledger's ``meta`` table (``PrivacyAccountant(path=...)`` would create a missing file, or add
    its tables to another SQLite file)."""
    with open(path, "rb") as handle:
        if handle.read(16) != b"SQLite format 3\x00":
            return False
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() is not None
    except sqlite3.DatabaseError:
        return False
    finally:
        connection.close()


def _read_ledger(path: str) -> PrivacyAccountant:
    """The ledger file at ``path``; refused, and left as it is, unless it is one."""
    if not os.path.isfile(path):
        raise ValueError(f"ledger: no file at {path!r}; PATH must be an existing ledger file.")
    try:
        is_ledger = _is_ledger_file(path)
    except OSError as exc:
        raise ValueError(f"ledger: cannot read {path!r} ({exc.strerror or exc}).") from None
    if not is_ledger:
        raise ValueError(f"ledger: {path!r} is not a ledger file (one written by PrivacyAccountant(path=...)).")
    return PrivacyAccountant(path=path)


def _ledger(args) -> int:
    """``ledger PATH``: print the summary of the ledger file."""
    try:
        print(_read_ledger(args.path).summary())
    except sqlite3.Error as exc:  # e.g. a damaged file, or one this process may not open
        raise ValueError(f"ledger: cannot read {args.path!r} ({exc}).") from None
    return 0


def main(argv=None) -> int:
    """Run ``python -m skdpsco COMMAND ...``.

    Parameters
    ----------
    argv : list of str or None, default=None
        The arguments after ``python -m skdpsco``; ``None``: ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: 0, or 2 after a one-line ``error: ...`` on the standard error (a
        refused option or input, named with its fix).
    """
    args = _parser().parse_args(argv)
    try:
        return {"compare": _compare, "ledger": _ledger}[args.command](args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
