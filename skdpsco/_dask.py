"""Dask collections in ``fit`` (issue 16 item 2): the data-dependent work as per-block sums.

Imported only when ``fit`` receives a Dask collection (:func:`skdpsco.solvers._core.is_dask`,
duck-typed, never imports Dask): Dask is an optional extra (``pip install skdpsco[dask]``) that
the core package never imports.

The data flow is the in-memory one, with the rows as :class:`Rows`: the source blocks (a Dask
array split in row blocks, in its own dtype: a zarr store, a file) and the per-row maps of ``fit``
(the clip, the division by the released powers of two, the standardisation, the intercept column)
recorded in order, nothing read until a statistic is needed:

* every statistic (a histogram of orders of magnitude, column sums, sums of squares, a full-batch
  gradient, a Hessian) is :func:`block_sum`: one task per source block, where the block lives,
  that runs the composed maps and the statistic together (:func:`_block_statistic`), a
  sub-block of :data:`SUB_BLOCK_ROWS` rows at a time: each sub-block is converted to float64
  once, into a buffer laid out as the in-memory rows (the intercept column last), mapped by the
  compiled :func:`skdpsco.solvers._kernel.map_block` (the numpy maps' arithmetic entry by entry,
  each row read once; the numpy maps themselves, in place, for what it does not compile), and
  summed while it is in cache. The partial
  results are summed into one array that reaches the client. One such sum is one pass over the
  data, recomputing the maps from the source: the data is never held in memory whole, by the
  workers or by the client, and no intermediate Dask array is built;
* the noise is drawn in the client, from the estimator's one generator, after the one charge
  of the accountant, exactly as in memory. Only these sums leave the workers.

A sum of per-block sums equals the in-memory sum up to the order of floating-point additions (and
the kernel's row norms the numpy ones up to the order of their sums), so
a Dask fit with the same seed and plan gives the in-memory model to rounding, with the same
``dp_event_`` (``tests/test_dask.py``). Only the full-batch solvers run here (:data:`ALGORITHMS`):
their iterates depend on the rows through full sums only. The one-pass solvers read the rows
in a random order, one row at a time, which a pass of per-block sums does not provide.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np

from .linear_model._scaling import _HALF_OCTAVE, MAGNITUDE_RANGE, divide_by_powers_of_two, standardised
from .solvers import _kernel
from .solvers._core import clip_rows

__all__ = [
    "ALGORITHMS",
    "Rows",
    "all_finite",
    "block_sum",
    "count_outside",
    "label_indices",
    "magnitude_counts",
    "map_rows",
    "validate",
    "with_constant_column",
]

ALGORITHMS = frozenset({"noisy_gd", "newton"})
"""The algorithms that run on Dask collections: full-batch gradient descent and the private
Newton method, whose every step is one :func:`block_sum` over the rows."""

SUB_BLOCK_ROWS = 2048
"""Rows of a sub-block of :func:`_block_statistic`: 2048 rows of 101 float64 columns are 1.6 MB,
so the maps and the statistic of a sub-block read it from the cache, not from memory."""


class Rows:
    """The rows of a Dask fit: the ``source`` blocks and the per-row maps applied to them, in order.

    ``source`` is the caller's Dask array (one block of columns, its own dtype); ``maps`` are
    ``(function, args)`` pairs, each called as ``function(block, *args, out=block)`` on a float64
    block, which it maps in place; ``constant`` (``None``: none) is the value of an intercept column
    appended after the maps. Nothing is computed here: :func:`block_sum` runs the maps and a
    statistic in one task per source block (:func:`_block_statistic`).
    """

    is_lazy_rows = True  # recognised by :func:`skdpsco.solvers._core.is_dask`, which never imports Dask
    ndim = 2

    def __init__(self, source, maps: tuple = (), constant: float | None = None):
        self.source, self.maps, self.constant = source, tuple(maps), constant

    @property
    def shape(self) -> tuple:
        return (self.source.shape[0], self.source.shape[1] + int(self.constant is not None))

    @property
    def chunks(self) -> tuple:
        return (self.source.chunks[0], (self.shape[1],))

    @property
    def spec(self) -> tuple:
        """``(maps, constant, n_columns, program)``: what :func:`_transformed` needs besides a source
        block (``program``: the maps for the compiled kernel, :func:`_program`)."""
        return self.maps, self.constant, self.shape[1], _program(self.maps)

    def then(self, function, *args) -> Rows:
        """These rows followed by the in-place map ``function(block, *args, out=block)``."""
        if self.constant is not None:
            raise ValueError("The per-row maps of a fit come before its intercept column.")
        return Rows(self.source, self.maps + ((function, args),))

    def with_constant_column(self, value: float) -> Rows:
        """These rows with one more column, ``value`` in every row."""
        if self.constant is not None:
            raise ValueError("The rows already have an intercept column.")
        return Rows(self.source, self.maps, float(value))


def _program(maps: tuple) -> tuple | None:
    """``(codes, scalars, vectors)``: ``maps`` as the arguments of the compiled
    :func:`skdpsco.solvers._kernel.map_block`, or ``None`` when one of them has no compiled form.
    The division's factors are those :func:`~skdpsco.linear_model._scaling.divide_by_powers_of_two`
    multiplies by (``2**-round(log2 s)``)."""
    codes, scalars, vectors = [], [], []
    for function, args in maps:
        if function is clip_rows:
            codes.append(_kernel.CLIP_ROWS)
            scalars.append(float(args[0]))
        elif function is divide_by_powers_of_two:
            codes.append(_kernel.DIVIDE_COLUMNS)
            scalars.append(0.0)
            vectors.append(np.ldexp(1.0, -np.rint(np.log2(args[0])).astype(np.int64)))
        elif function is standardised:
            mean, scale, clip_norm = args
            codes.append(_kernel.STANDARDISE_ROWS)
            scalars.append(float(clip_norm))
            vectors += [mean, scale]
        else:
            return None
    vectors = np.array(vectors, dtype=np.float64) if vectors else np.empty((0, 0))
    return np.array(codes, dtype=np.int64), np.array(scalars, dtype=np.float64), np.ascontiguousarray(vectors)


def _transformed(raw: np.ndarray, spec: tuple, out: np.ndarray) -> np.ndarray:
    """The rows of the source block ``raw`` mapped by the maps of ``spec`` (:attr:`Rows.spec`), in
    ``out`` (float64, ``raw``'s rows): by the compiled kernel when it has every map and ``raw``
    is float32 or float64 (each row read once, mapped in cache; the norms summed in another order
    than numpy's), else, or when the kernel hands a row back, by the numpy maps: ``raw`` converted
    once, each map applied in place to the features' columns, then the intercept column (the
    layout of the in-memory rows, whose features are the same strided view)."""
    maps, constant, _, program = spec
    if program is not None and raw.dtype in (np.float32, np.float64) and raw.ndim == 2:
        with_constant = constant is not None
        raw = np.ascontiguousarray(raw)
        if _kernel.map_block(raw, out, *program, 0.0 if constant is None else constant, with_constant) < 0:
            return out
    features = out if constant is None else out[:, : raw.shape[1]]
    np.copyto(features, raw)
    for function, args in maps:
        function(features, *args, out=features)
    if constant is not None:
        out[:, -1] = constant
    return out


def validate(X, y, n_features: int | None = None) -> tuple:
    """``(X, y)``: ``X`` as :class:`Rows` (no map yet; one block of columns, known block sizes, read
    as float64 by every statistic) and ``y`` as a Dask array with the same row blocks; checked
    before anything is charged.

    ``X``: a ``dask.array.Array`` or a ``dask.dataframe.DataFrame`` of numeric columns; ``y``: a
    Dask array or Series, or a numpy array (sent to the workers once, ``persist``). Refused with a
    ``ValueError`` naming the fix: unknown block sizes, a non-numeric column, a wrong shape, a
    length of ``y`` that is not the number of rows."""
    X = _as_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional (n_samples, n_features); got a Dask array of shape {X.shape}.")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but this model was fitted with {n_features}.")
    X = Rows(X.rechunk({1: -1}))
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


def map_rows(X: Rows, function, *args, n_columns: int | None = None):
    """The rows ``X`` followed by the per-row map ``function(block, *args, out=block)``, which maps
    a float64 block in place (:meth:`Rows.then`: composed with the earlier maps, nothing read).
    With ``n_columns=0``, the lazy 1-D Dask array of ``function(block, *args)`` (one value per
    row, e.g. the row norms) on the mapped blocks instead."""
    if n_columns == 0:
        return X.source.map_blocks(_mapped_values, X.spec, function, args, drop_axis=1, dtype=np.float64,
                                   meta=np.empty(0))
    return X.then(function, *args)


def _mapped_values(raw: np.ndarray, spec: tuple, function, args: tuple) -> np.ndarray:
    return function(_transformed(raw, spec, np.empty((raw.shape[0], spec[2]))), *args)


def with_constant_column(X: Rows, value: float) -> Rows:
    """The rows ``X`` with the intercept column: one more column, ``value`` in every row."""
    return X.with_constant_column(value)


def block_sum(function, *arrays, extra=()):
    """``sum_b function(block_b of each array, *extra)``, computed where the blocks are (one pass);
    ``function`` returns an array or a tuple of arrays (or ``None``s), summed element by element,
    and is a sum over the rows (its value on a block is the sum of its values on the block's
    sub-blocks). An array is a Dask array or :class:`Rows`, whose blocks are mapped in the same task
    (:func:`_block_statistic`)."""
    specs = tuple(array.spec if isinstance(array, Rows) else None for array in arrays)
    blocks = [(array.source if isinstance(array, Rows) else array).to_delayed().ravel() for array in arrays]
    if len({len(b) for b in blocks}) != 1:
        raise ValueError("The arrays of a block sum must have the same row blocks.")
    parts = [dask.delayed(_block_statistic)(function, specs, tuple(extra), *row) for row in zip(*blocks)]
    return dask.compute(_tree_sum(parts))[0]


def _block_statistic(function, specs: tuple, extra: tuple, *blocks: np.ndarray):
    """``function(*mapped blocks, *extra)`` for one row block, the blocks of :class:`Rows` (``specs``,
    :attr:`Rows.spec`; ``None`` for a plain array) mapped by :func:`_transformed` and summed a
    sub-block of :data:`SUB_BLOCK_ROWS` rows at a time, each mapped into the same buffer."""
    if all(spec is None for spec in specs):
        return function(*blocks, *extra)
    n_rows = blocks[0].shape[0]
    size = min(n_rows, SUB_BLOCK_ROWS)
    buffers = [None if spec is None else np.empty((size, spec[2])) for spec in specs]
    total = None
    for start in range(0, max(n_rows, 1), SUB_BLOCK_ROWS):
        rows = slice(start, min(start + SUB_BLOCK_ROWS, n_rows))
        parts = [
            block[rows] if spec is None else _transformed(block[rows], spec, buffer[: rows.stop - start])
            for block, spec, buffer in zip(blocks, specs, buffers)
        ]
        part = function(*parts, *extra)
        total = part if total is None else _add(total, part)
    return total


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


def magnitude_counts(X) -> np.ndarray:
    """:func:`skdpsco.linear_model._scaling.magnitude_counts` of the rows ``X`` (one pass), each
    sub-block counted by the compiled :func:`skdpsco.solvers._kernel.magnitude_histogram`: the
    same integers (``frexp`` is exact; ``tests/test_dask.py`` compares them)."""
    return block_sum(_magnitude_counts, X)


def _magnitude_counts(block: np.ndarray) -> np.ndarray:
    counts = np.zeros((block.shape[1], 2 * MAGNITUDE_RANGE + 1), dtype=np.int64)
    _kernel.magnitude_histogram(np.asarray(block, dtype=np.float64), counts, MAGNITUDE_RANGE, _HALF_OCTAVE)
    return counts.astype(float)


def all_finite(X, y=None) -> bool:
    """Whether every entry of ``X`` (and of ``y``, when given) is finite (one pass)."""
    source = X.source if isinstance(X, Rows) else X  # the caller's values, before any map
    arrays = (source,) if y is None else (source, y)
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
