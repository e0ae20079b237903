"""Dask collections in ``fit`` (issue 16 item 2): the data-dependent work as per-block sums.

Imported only when ``fit`` receives a Dask collection (:func:`skdpsco.solvers._core.is_dask`,
duck-typed, never imports Dask): Dask is an optional extra (``pip install skdpsco[dask]``) that
the core package never imports.

The data flow is the in-memory one, with the rows as a lazy Dask array split in row blocks:

* every per-row map of ``fit`` (the clip, the division by the released powers of two, the
  standardisation, the intercept column) is :func:`map_rows`, a lazy ``map_blocks`` of the same
  numpy function, so nothing is read until a statistic is needed;
* every statistic (a histogram of orders of magnitude, column sums, sums of squares, a full-batch
  gradient, a Hessian) is :func:`block_sum`: the same numpy function on each block where the
  block lives, the partial results summed into one array that reaches the client. One such sum
  is one pass over the data, recomputing the lazy maps from the source (a zarr store, a file):
  the data is never held in memory whole, by the workers or by the client;
* the noise is drawn in the client, from the estimator's one generator, after the one charge
  of the accountant, exactly as in memory. Only these sums leave the workers.

A sum of per-block sums equals the in-memory sum up to the order of floating-point additions, so
a Dask fit with the same seed and plan gives the in-memory model to rounding, with the same
``dp_event_`` (``tests/test_dask.py``). Only the full-batch solvers run here (:data:`ALGORITHMS`):
their iterates depend on the rows through full sums only. The one-pass solvers read the rows
in a random order, one row at a time, which a pass of per-block sums does not provide.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np

__all__ = [
    "ALGORITHMS",
    "all_finite",
    "block_sum",
    "count_outside",
    "label_indices",
    "map_rows",
    "validate",
    "with_constant_column",
]

ALGORITHMS = frozenset({"noisy_gd", "newton"})
"""The algorithms that run on Dask collections: full-batch gradient descent and the private
Newton method, whose every step is one :func:`block_sum` over the rows."""


def validate(X, y, n_features: int | None = None) -> tuple:
    """``(X, y)`` as Dask arrays of float64 with the same row blocks, one block of columns, known
    block sizes; checked before anything is charged.

    ``X``: a ``dask.array.Array`` or a ``dask.dataframe.DataFrame`` of numeric columns; ``y``: a
    Dask array or Series, or a numpy array (sent to the workers once, ``persist``). Refused with a
    ``ValueError`` naming the fix: unknown block sizes, a non-numeric column, a wrong shape, a
    length of ``y`` that is not the number of rows."""
    X = _as_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional (n_samples, n_features); got a Dask array of shape {X.shape}.")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but this model was fitted with {n_features}.")
    X = X.astype(np.float64).rechunk({1: -1})
    if y is None:
        return X, None
    y = _as_array(y, "y") if hasattr(y, "__dask_graph__") else np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must be 1-dimensional with one value per row of X ({X.shape[0]}); got shape {y.shape}.")
    if isinstance(y, np.ndarray):
        return X, da.from_array(y, chunks=(X.chunks[0],)).persist()
    return X, y.rechunk((X.chunks[0],))


def _as_array(collection, name: str):
    """A Dask array from a Dask array, DataFrame or Series, with known block sizes."""
    if hasattr(collection, "to_dask_array"):  # a DataFrame or a Series
        from pandas.api.types import is_bool_dtype, is_numeric_dtype  # Dask's DataFrames require pandas

        dtypes = collection.dtypes  # a Series of the columns' dtypes, or a Series' one dtype
        dtypes = list(dtypes) if hasattr(dtypes, "__iter__") else [dtypes]
        if not all(is_numeric_dtype(dtype) or is_bool_dtype(dtype) for dtype in dtypes):
            raise ValueError(
                f"{name} has non-numeric columns ({sorted({str(t) for t in dtypes})}): encode them first "
                "(e.g. dask_ml.preprocessing.Categorizer and DummyEncoder), or select the numeric columns."
            )
        collection = collection.to_dask_array(lengths=True)
    if not isinstance(collection, da.Array):
        raise ValueError(f"{name} must be a Dask array, DataFrame or Series; got {type(collection).__name__}.")
    if any(np.isnan(size) for sizes in collection.chunks for size in sizes):
        raise ValueError(
            f"{name} has unknown chunk sizes (e.g. after a boolean mask or from a DataFrame): call "
            f"{name}.compute_chunk_sizes() (or to_dask_array(lengths=True)) before fit."
        )
    if not np.issubdtype(collection.dtype, np.number) and collection.dtype != bool:
        raise ValueError(f"{name} must be numeric; got dtype {collection.dtype}.")
    return collection


def map_rows(X, function, *args, n_columns: int | None = None):
    """The lazy per-block map ``function(block, *args)`` of the rows of ``X`` (2-D in, 2-D out with
    ``n_columns`` columns, ``X``'s by default; 1-D out with ``n_columns=0``)."""
    meta = np.empty((0,) * (1 if n_columns == 0 else 2))  # the output's type: no call on an empty block
    if n_columns == 0:
        return X.map_blocks(function, *args, drop_axis=1, dtype=np.float64, meta=meta)
    columns = X.shape[1] if n_columns is None else n_columns
    return X.map_blocks(function, *args, chunks=(X.chunks[0], (columns,)), dtype=np.float64, meta=meta)


def with_constant_column(X, value: float):
    """The lazy ``[X, value]``: one more column, ``value`` in every row (the intercept column)."""
    return map_rows(X, _with_constant_column, value, n_columns=X.shape[1] + 1)


def _with_constant_column(block: np.ndarray, value: float) -> np.ndarray:
    return np.hstack([block, np.full((block.shape[0], 1), value)])


def block_sum(function, *arrays, extra=()):
    """``sum_b function(block_b of each array, *extra)``, computed where the blocks are (one pass);
    ``function`` returns an array or a tuple of arrays, summed element by element."""
    blocks = [array.to_delayed().ravel() for array in arrays]
    if len({len(b) for b in blocks}) != 1:
        raise ValueError("The arrays of a block sum must have the same row blocks.")
    parts = [dask.delayed(function)(*row, *extra) for row in zip(*blocks)]
    return dask.compute(_tree_sum(parts))[0]


def _tree_sum(parts: list):
    """A delayed pairwise sum of ``parts`` (depth ``log2`` of their number)."""
    while len(parts) > 1:
        parts = [dask.delayed(_add)(*parts[i:i + 2]) for i in range(0, len(parts), 2)]
    return parts[0]


def _add(first, second=None):
    if second is None:
        return first
    if isinstance(first, tuple):
        return tuple(_add(a, b) for a, b in zip(first, second))
    return None if first is None else first + second


def all_finite(X, y=None) -> bool:
    """Whether every entry of ``X`` (and of ``y``, when given) is finite (one pass)."""
    arrays = (X,) if y is None else (X, y)
    return bool(block_sum(_count_non_finite, *arrays) == 0)


def _count_non_finite(*blocks: np.ndarray) -> np.ndarray:
    return np.array(sum(np.size(block) - np.count_nonzero(np.isfinite(block)) for block in blocks))


def count_outside(y, labels: np.ndarray) -> int:
    """How many values of ``y`` are not in ``labels`` (one pass; the fit refuses any)."""
    return int(block_sum(_count_outside, y, extra=(labels,)))


def _count_outside(block: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.array(np.count_nonzero(~np.isin(block, labels)))


def label_indices(y, labels: np.ndarray):
    """The lazy ``np.searchsorted(labels, y)`` of the blocks of ``y`` (labels sorted)."""
    return y.map_blocks(_searchsorted, labels, dtype=np.int64)


def _searchsorted(block: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.searchsorted(labels, block)
