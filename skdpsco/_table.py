"""A CSV file as ``python -m skdpsco compare --csv`` reads it: features, target and task.

The file is the private data, so no message from here holds a cell of it: an error names the
column and the option or edit that fixes it, never a value found in the column (its distinct
values would be a release no accountant charges). The schema is public and comes from the
user: which feature columns are categorical and their categories (``--categories``), and the
task (``--task``), else the documented rule of :func:`detect_task`. That rule reads the target
column, so the task it picks (which the output prints) tells whether the target looks like
labels; ``--task`` decides without reading it.

* Numeric feature columns are used as they are; a feature column with any other text must be
  declared categorical, and is one-hot encoded by its declared categories (a value outside
  them is encoded as all zeros: ``OneHotEncoder(handle_unknown='ignore')``).
* A missing cell (:data:`MISSING_CELLS`; in a categorical column only an empty one, the others
  being possible categories) or an infinite number is refused: impute or drop before.
* Classification labels are the target's cells as text, the label set taken as public (the
  models' ``classes_`` release it); regression targets are numbers.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder

MISSING_CELLS = frozenset({"", "NA", "N/A", "NaN", "nan", "null", "NULL"})
"""Cells (stripped of white space) read as missing values."""

MAX_DETECTED_CLASSES = 10
"""The task rule (:func:`detect_task`): a numeric target of integers with at most this many
distinct values is classification."""

TASKS = ("classification", "regression")

TASK_RULE = (
    f"a target with text, or with at most {MAX_DETECTED_CLASSES} distinct integer values, is "
    "classification; any other numeric target is regression"
)
"""The rule of :func:`detect_task` in words, as the command line prints it."""


@dataclass(frozen=True)
class Table:
    """The features and target of a dataset, with their public schema.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features)
        The feature columns in file order: floats, or an object array whose categorical columns
        hold the cells as text.
    y : ndarray of shape (n_samples,)
        The target: labels (of a CSV file, its cells as text) or floats (regression).
    task : {'classification', 'regression'}
    numeric : list of int
        Indices of the numeric columns of ``X``.
    categories : dict of int to list of str
        Index of each categorical column of ``X`` and its declared categories.
    """

    X: np.ndarray
    y: np.ndarray
    task: str
    numeric: list
    categories: dict

    def encoder(self) -> ColumnTransformer | None:
        """The public map from the rows to the models' features: numeric columns as floats,
        then each categorical one one-hot encoded by its declared categories; ``None`` without
        categorical columns (the rows are the features)."""
        if not self.categories:
            return None
        one_hot = OneHotEncoder(
            categories=list(self.categories.values()), handle_unknown="ignore", sparse_output=False
        )
        return ColumnTransformer(
            [("numeric", FunctionTransformer(_as_float), self.numeric),
             ("categorical", one_hot, list(self.categories))]
        )

    @property
    def n_encoded(self) -> int:
        """The number of features the models see (after one-hot encoding)."""
        return len(self.numeric) + sum(map(len, self.categories.values()))

    def encoded_bounds(self, low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
        """Public bounds of the encoded features: ``(low, high)`` for every numeric one, ``(0, 1)``
        for every one-hot one."""
        n_numeric, n_one_hot = len(self.numeric), self.n_encoded - len(self.numeric)
        lower = np.r_[np.full(n_numeric, low), np.zeros(n_one_hot)]
        upper = np.r_[np.full(n_numeric, high), np.ones(n_one_hot)]
        return lower, upper


def _as_float(X):
    return np.asarray(X, dtype=float)


def parse_categories(declarations: list[str] | None) -> dict[str, list[str]]:
    """``--categories COL=CAT1,CAT2,...`` declarations as ``{column: [categories]}``."""
    categories = {}
    for declaration in declarations or []:
        column, equals, values = declaration.partition("=")
        names = [value.strip() for value in values.split(",")]
        if not equals or not column.strip() or "" in names:
            raise ValueError(f"--categories takes COLUMN=CATEGORY,CATEGORY,...; got {declaration!r}.")
        if len(set(names)) != len(names):
            raise ValueError(f"--categories {declaration!r} names a category twice.")
        if column.strip() in categories:
            raise ValueError(f"--categories declares column {column.strip()!r} twice; declare it once.")
        categories[column.strip()] = names
    return categories


def read_columns(path: str) -> dict[str, list[str]]:
    """The cells of a CSV file with a header row, column by column, stripped of white space.

    UTF-8 text (with or without a byte-order mark); a file that is not is refused without
    quoting it.
    """
    try:
        return _read_columns(path)
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text: save it as UTF-8 (CSV UTF-8).") from None
    except csv.Error as exc:
        raise ValueError(f"{path} is not a CSV file that can be read ({exc}).") from None


def _read_columns(path: str) -> dict[str, list[str]]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = [name.strip() for name in next(reader, [])]
        if not header:
            raise ValueError(f"{path} has no header row naming its columns.")
        repeated = [name for name in header if header.count(name) > 1]
        if repeated:
            raise ValueError(f"{path}: the header names column {repeated[0]!r} twice; rename one.")
        columns = [[] for _ in header]
        for record in reader:
            if not record:
                continue
            if len(record) != len(header):
                raise ValueError(
                    f"{path}, line {reader.line_num}: {len(record)} fields where the header has {len(header)}."
                )
            for column, cell in zip(columns, record):
                column.append(cell.strip())
    if not columns[0]:
        raise ValueError(f"{path} has no data rows.")
    return dict(zip(header, columns))


def _missing(column: str, what: str) -> ValueError:
    return ValueError(
        f"{what} {column!r} has missing values (empty, NA or NaN cells) or infinite ones: impute "
        "them (e.g. with a constant chosen without looking at the data) or drop those rows before "
        "running compare."
    )


def _numbers(column: str, cells: list[str], what: str) -> np.ndarray | None:
    """The cells as finite floats; ``None`` if one is text. A missing cell is refused."""
    if MISSING_CELLS.intersection(cells):
        raise _missing(column, what)
    try:
        values = np.array([float(cell) for cell in cells])
    except ValueError:
        return None
    if not np.all(np.isfinite(values)):
        raise _missing(column, what)
    return values


def _integers_only(values: np.ndarray) -> bool:
    return bool(np.all(values == np.round(values)))


def detect_task(column: str, cells: list[str]) -> str:
    """The task of a target column by the public rule :data:`TASK_RULE`."""
    values = _numbers(column, cells, "the --target column")
    if values is None or (_integers_only(values) and np.unique(values).size <= MAX_DETECTED_CLASSES):
        return "classification"
    return "regression"


def _target(column: str, cells: list[str], task: str) -> np.ndarray:
    """The target of ``task``, refused when it cannot be one (messages name no value)."""
    values = _numbers(column, cells, "the --target column")
    if task == "regression" and values is None:
        raise ValueError(
            f"--task regression needs a numeric target; column {column!r} holds text (use --task classification)."
        )
    if task == "classification" and values is not None and not _integers_only(values):
        raise ValueError(
            f"--task classification needs labels; column {column!r} holds non-integer numbers, a "
            "continuous quantity (use --task regression)."
        )
    y = values if task == "regression" else np.asarray(cells)
    counts = np.unique(y, return_counts=True)[1]
    if counts.size < 2:
        raise ValueError(f"the --target column {column!r} holds a single value: nothing to learn.")
    if task == "classification" and counts.min() < 2:
        raise ValueError(
            f"--task classification: a label of column {column!r} has a single row, too few for "
            "stratified splits (drop its row, or use --task regression for a quantity)."
        )
    return y


def _features(columns: dict[str, list[str]], categories: dict[str, list[str]]):
    """``(X, numeric indices, {index: categories})`` of the feature columns."""
    X = np.empty((len(next(iter(columns.values()))), len(columns)), dtype=object)
    numeric, categorical = [], {}
    for index, (column, cells) in enumerate(columns.items()):
        if column in categories:
            if "" in cells:
                raise _missing(column, "column")
            X[:, index], categorical[index] = cells, categories[column]
            continue
        values = _numbers(column, cells, "column")
        if values is None:
            raise ValueError(
                f"column {column!r} holds text: declare its categories with --categories "
                f"{column}=CATEGORY,CATEGORY,... (one-hot encoded), or leave the column out of the file."
            )
        X[:, index] = values
        numeric.append(index)
    return (X if categorical else X.astype(float)), numeric, categorical


def load_table(path: str, target: str, task: str | None = None, categories: dict | None = None) -> Table:
    """Read a CSV file for ``compare``.

    Parameters
    ----------
    path : str
        CSV file with a header row.
    target : str
        The target column.
    task : {'classification', 'regression'} or None, default=None
        ``None``: :func:`detect_task`.
    categories : dict of str to list of str or None, default=None
        The categorical feature columns and their declared categories (public).

    Returns
    -------
    Table

    Raises
    ------
    ValueError
        With a one-line message naming the column or option at fault and no cell of the file.
    """
    categories = categories or {}
    columns = read_columns(path)
    if target not in columns:
        raise ValueError(f"--target {target!r} is not a column of {path}; columns: {list(columns)}.")
    for column in categories:
        if column == target or column not in columns:
            raise ValueError(
                f"--categories {column!r} is {'the target' if column == target else 'not a column'}; "
                f"it takes feature columns of {path}: {[name for name in columns if name != target]}."
            )
    target_cells = columns.pop(target)
    if not columns:
        raise ValueError(f"{path} has no feature column besides --target {target!r}.")
    task = task or detect_task(target, target_cells)
    y = _target(target, target_cells, task)
    X, numeric, categorical = _features(columns, categories)
    return Table(X, y, task, numeric, categorical)
