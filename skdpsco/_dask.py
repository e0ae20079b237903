"""Dask collections in ``fit``: the data-dependent work as per-block sums.

Imported only when ``fit`` receives a Dask collection (:func:`skdpsco.rows.is_lazy`, duck-typed,
never imports Dask): Dask is an optional extra (``pip install skdpsco[dask]``) that the core
package never imports. Imported, it registers :data:`LAYOUT`, the Dask layout of the rows
(:func:`skdpsco.rows.layout_of`): the third implementation of the row source, beside the dense and
the CSR layouts of :mod:`skdpsco.rows`, with the same methods.

The data flow is the in-memory one, with the rows as :class:`Rows`: the source blocks (a Dask
array split in row blocks, in its own dtype: a zarr store, a file) and the per-row maps of ``fit``
(the clip, the division by the released powers of two, the standardisation, the intercept column)
recorded in order, nothing read until a statistic is needed:

* every statistic (a histogram of orders of magnitude, column sums, sums of squares, a full-batch
  gradient, a Hessian) is :func:`block_sum`: one task per source block, where the block lives,
  that runs the composed maps and the statistic together (:func:`_block_statistic`), a
  sub-block of :data:`SUB_BLOCK_ROWS` rows at a time: each sub-block is converted to float64
  once, into a buffer laid out as the in-memory rows (the intercept column last), mapped by the
  compiled :func:`skdpsco.rows._maps.map_block` (the numpy maps' arithmetic entry by entry,
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
``dp_event_`` (``tests/test_dask.py``).

The full-batch solvers (:data:`FULL_BATCH_ALGORITHMS`) depend on the rows through full sums only.
The one-pass solvers (:data:`STREAMED_ALGORITHMS`) read each row once, in an order: they read a
:class:`RowStream`, the rows mapped block by block where the blocks live and sent to the client one
block at a time, in a :class:`StreamOrder` drawn before anything is read (the blocks in a uniformly
random order, the rows of each block in one of their own: the partition-level shuffle,
:func:`stream_order`). The solvers run the loop they run in memory, on the rows of one block at a
time (:class:`StreamedBatches`), their state carried across blocks. Their guarantees hold for
every data-independent order fixed before training (``feldman.md`` pitfall D5; each solver's
docstring says why), not only for a uniformly random permutation of all rows, which a stream of
whole blocks does not give; the same order in memory gives the same model, to rounding, and the
same event (``tests/test_dask.py``). Their utility does depend on the order: on a table stored
sorted by label (partitions of one class) the partition-level shuffle leaves them far from the
in-memory fit, while rows sorted within partitions, or by a feature, cost little
(``benchmarks/results/dask_stream.md``). The other solvers are refused, each with its reason
(:func:`refusal_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np

from .linear_model._scaling import _HALF_OCTAVE
from .rows import DENSE, RowBatches, powers_of_two, register_lazy_layout
from .rows import _maps

_COMPILED_MAPS = {"clip": DENSE.clip_rows, "divide": DENSE.divide_by_powers_of_two, "standardise": DENSE.standardised}
"""The dense layout's per-row maps that :func:`skdpsco.rows._maps.map_block` runs compiled, as they
are at import (a map replaced since, e.g. by a test's mutation, runs as numpy, :func:`_program`)."""

__all__ = [
    "ALGORITHMS",
    "FULL_BATCH_ALGORITHMS",
    "STREAMED_ALGORITHMS",
    "RowStream",
    "Rows",
    "StreamOrder",
    "StreamedBatches",
    "all_finite",
    "block_sum",
    "count_outside",
    "label_indices",
    "leading_blocks",
    "magnitude_counts",
    "map_rows",
    "refusal_reason",
    "stream_order",
    "validate",
    "with_constant_column",
]

FULL_BATCH_ALGORITHMS = frozenset({"noisy_gd", "newton"})
"""Full-batch gradient descent and the private Newton method: every step is one :func:`block_sum`
over the rows."""

STREAMED_ALGORITHMS = frozenset({
    "phased_sgd", "strongly_convex", "snowball", "snowball_constant", "pnsgd", "skip_pnsgd",
    "multipass_pnsgd", "ftrl",
})
"""The one-pass solvers, which read the rows in a :class:`RowStream` (block by block in a
:class:`StreamOrder`). Each one's guarantee holds for every order of the rows fixed before
training and independent of the data (``feldman.md`` pitfall D5), not only for a uniformly random
one: none amplifies by shuffling or sampling over the order. Why, for each (their docstrings
say it too): Phased-SGD and its strongly convex reduction, one Gaussian output release per row
whatever its phase and position (parallel composition over disjoint phases); Snowball and the
PNSGD passes, amplification by iteration bounded for every position of the row (the worst
position is taken: FKT Cor 2.14 / FMTT Thm 22 per batch, Thm 23 / 24 / 35); FTRL, one Gaussian
release per row by adaptive composition whatever step reads it (``ftrl_mirror.md`` §3.5)."""

ALGORITHMS = FULL_BATCH_ALGORITHMS | STREAMED_ALGORITHMS
"""The ``algorithm=`` names that run on Dask collections; ``fit`` refuses the others before
anything is charged, with :func:`refusal_reason`."""

_REFUSALS = {
    ("phased_erm", "localization", "epoch_growth"): (
        "each phase solves a problem on its rows to a certified accuracy, reading them many times, so "
        "a phase's rows (half of them in the first phase) would have to be held in the client."
    ),
    ("stop_pnsgd",): (
        "its stopping time is secret, and the blocks a cluster computes would show how far the pass went."
    ),
    ("output_perturbation", "gradient_perturbation"): (
        "every step reads one row drawn uniformly at random from all of them (its privacy analysis "
        "needs it), which a pass over blocks does not provide."
    ),
    ("objective_perturbation",): (
        "its certified minimisation of the perturbed objective runs on in-memory rows (on Dask rows it "
        "would be one pass per iteration, and it is not built)."
    ),
}


def refusal_reason(algorithm: str) -> str:
    """Why ``algorithm`` (not in :data:`ALGORITHMS`) does not run on Dask collections."""
    for names, reason in _REFUSALS.items():
        if algorithm in names:
            return reason
    raise ValueError(f"algorithm={algorithm!r} runs on Dask collections or is unknown.")

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

    is_lazy_rows = True  # recognised by :func:`skdpsco.rows.is_lazy`, which never imports Dask
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
    :func:`skdpsco.rows._maps.map_block`, or ``None`` when one of them has no compiled form
    (:data:`_COMPILED_MAPS`). The division's factors are those
    :func:`~skdpsco.rows._dense.divide_by_powers_of_two` multiplies by (``2**-round(log2 s)``)."""
    codes, scalars, vectors = [], [], []
    for function, args in maps:
        if function is _COMPILED_MAPS["clip"]:
            codes.append(_maps.CLIP_ROWS)
            scalars.append(float(args[0]))
        elif function is _COMPILED_MAPS["divide"]:
            codes.append(_maps.DIVIDE_COLUMNS)
            scalars.append(0.0)
            vectors.append(powers_of_two(args[0])[1])
        elif function is _COMPILED_MAPS["standardise"]:
            mean, scale, clip_norm = args
            codes.append(_maps.STANDARDISE_ROWS)
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
        if _maps.map_block(raw, out, *program, 0.0 if constant is None else constant, with_constant) < 0:
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


@dataclass(frozen=True)
class StreamOrder:
    """The public order in which a one-pass solver reads the rows of a Dask fit (:class:`RowStream`).

    ``blocks``: the source's row blocks in reading order (a permutation of their indices);
    ``seeds``: one seed per source block (by block index) of the permutation of the block's rows
    (``numpy.random.default_rng(seed).permutation``, drawn where the block is computed), or
    ``None`` to read every block's rows as stored. Drawn before anything is read, never from the
    data (:func:`stream_order`); it lives in the client as ``O(number of blocks)`` integers.
    """

    blocks: np.ndarray
    seeds: np.ndarray | None = None


def stream_order(chunks: tuple, rng: np.random.Generator | None = None) -> StreamOrder:
    """The reading order of row blocks of sizes ``chunks``: with ``rng``, the partition-level shuffle
    (the blocks in a uniformly random order, the rows of each block in a uniformly random order of
    their own); without, the rows as stored, block after block.

    The estimators draw it from the fit's order generator, as in memory they draw the permutation
    of the rows: neither is a uniformly random order of all rows here (a row's block stays whole),
    and no solver that streams Dask rows needs one (:data:`ALGORITHMS`). The seeds are drawn as
    integers (bits of the generator), not spawned children: the fit's later ``spawn`` calls on the
    same generator are those of an in-memory fit."""
    n_blocks = len(chunks)
    if rng is None:
        return StreamOrder(np.arange(n_blocks))
    blocks = rng.permutation(n_blocks)
    return StreamOrder(blocks, rng.integers(0, 2**63, size=n_blocks))


def leading_blocks(X: Rows, order: StreamOrder, n_rows: int) -> Rows:
    """The rows ``X`` of the leading blocks of ``order`` that hold exactly ``n_rows`` rows
    (:func:`~skdpsco.linear_model._scaling.covered_rows`), with ``X``'s maps: a statistic of them
    reads those blocks only. Refuses an ``n_rows`` that does not end a block of the order."""
    sizes = np.asarray(X.chunks[0], dtype=np.int64)[np.asarray(order.blocks)]
    count = int(np.searchsorted(np.cumsum(sizes), n_rows)) + 1
    if sizes[:count].sum() != n_rows:
        raise ValueError(f"n_rows={n_rows} does not end a block of the reading order.")
    return Rows(X.source.blocks[np.sort(order.blocks[:count]).tolist()], X.maps, X.constant)


class RowStream:
    """The rows of a Dask fit as a one-pass solver's row source (:class:`skdpsco.rows.ArrayRows`
    is the in-memory one): read in the :class:`StreamOrder` ``order``, one block at a time.

    A block is computed where it lives, with the rows' maps of :class:`Rows` (the clip, the
    scaling's maps, the intercept column) and its rows permuted as ``order`` says
    (:func:`_stream_block`), and reaches the client as the in-memory rows would be: C-contiguous
    float64, its labels alongside. The client keeps the last block it read, and copies the rows
    of a batch that straddles two blocks: it holds one block (plus one batch) and the model. Each
    pass over the rows computes every block once; nothing is persisted.
    """

    def __init__(self, X: Rows, y, order: StreamOrder):
        sizes = np.asarray(X.chunks[0], dtype=np.int64)
        blocks = np.asarray(order.blocks)
        if sorted(blocks.tolist()) != list(range(sizes.size)):
            raise ValueError(f"order must list each of the {sizes.size} row blocks once.")
        self._order = order
        self._spec = X.spec
        self._X_blocks = X.source.to_delayed().ravel()
        self._y_blocks = y.rechunk((X.chunks[0],)).to_delayed().ravel()
        self._sizes = sizes
        self.offsets = np.concatenate(([0], np.cumsum(sizes[blocks])))  # stream position of each block
        self._cached = (None, None, None)  # (position in the reading order, rows, labels)

    @property
    def n_rows(self) -> int:
        return int(self.offsets[-1])

    def _block(self, position: int) -> tuple:
        """The rows and labels of the block at ``position`` of the reading order (the last one read
        is kept)."""
        if self._cached[0] != position:
            index = int(self._order.blocks[position])
            seed = None if self._order.seeds is None else int(self._order.seeds[index])
            task = dask.delayed(_stream_block)(self._X_blocks[index], self._y_blocks[index], self._spec, seed)
            self._cached = (None, None, None)  # release the previous block before computing the next
            self._cached = (position, *dask.compute(task)[0])
        return self._cached[1:]

    def rows(self, first: int, stop: int) -> tuple:
        """``(X_rows, y_rows)``: the rows at positions ``first .. stop - 1`` of the reading order, in
        memory (a view of one block, or the parts of consecutive blocks copied together)."""
        parts = []
        position = int(np.searchsorted(self.offsets, first, side="right")) - 1
        while first < stop:
            start = int(self.offsets[position])
            end = min(stop, int(self.offsets[position + 1]))
            if end > first:
                # rows of earlier blocks (at most a batch) are copied before the next block replaces them
                parts = [(X.copy(), y.copy()) for X, y in parts]
                X_block, y_block = self._block(position)
                parts.append((X_block[first - start:end - start], y_block[first - start:end - start]))
                first = end
            position += 1
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([X for X, _ in parts]), np.concatenate([y for _, y in parts])

    def batches(self, first: int, batch_sizes, passes: int = 1) -> StreamedBatches:
        """Consecutive disjoint batches of ``batch_sizes`` rows from position ``first`` of the reading
        order (``passes`` times over the same rows), read a block at a time (:class:`StreamedBatches`)."""
        return StreamedBatches(self, int(first), np.asarray(batch_sizes, dtype=np.int64), int(passes))


class StreamedBatches:
    """Batches of a :class:`RowStream`: for the SGD loop of :func:`skdpsco.solvers._core.noisy_sgd_steps`,
    :meth:`pieces`, each a :class:`~skdpsco.rows.RowBatches` over rows in memory and the
    slice of the steps it holds; iterating yields the batches one by one, as a ``RowBatches`` does.

    A piece is the batches that end inside one block (a view of it), or one batch that crosses the
    end of a block (its rows copied together), and the loop over the pieces gives the iterates of
    one loop over all the batches (consecutive calls of
    :func:`~skdpsco.solvers._core.noisy_sgd_steps` on consecutive steps; the noise is drawn in the
    same order)."""

    is_streamed = True

    def __init__(self, stream: RowStream, first: int, batch_sizes: np.ndarray, passes: int):
        self.stream, self.first, self.batch_sizes, self.passes = stream, first, batch_sizes, passes

    def pieces(self):
        per_pass = self.batch_sizes.size // self.passes
        for repeat in range(self.passes):
            sizes = self.batch_sizes[repeat * per_pass:(repeat + 1) * per_pass]
            i, start = 0, self.first
            while i < sizes.size:
                block_end = int(self.stream.offsets[np.searchsorted(self.stream.offsets, start, side="right")])
                count, end = _batches_to(sizes, i, start, block_end)
                X, y = self.stream.rows(start, end)
                yield (RowBatches(X, y, np.arange(X.shape[0]), sizes[i:i + count], layout=DENSE),
                       slice(repeat * per_pass + i, repeat * per_pass + i + count))
                del X, y  # the caller has run the piece: the block can go before the next is computed
                i, start = i + count, end

    def __iter__(self):
        """The batches ``(X_batch, y_batch)`` one by one, read a piece at a time (for loops other than
        :func:`~skdpsco.solvers._core.noisy_sgd_steps`, e.g. FTRL's dual averaging)."""
        for piece, _ in self.pieces():
            yield from piece


def _batches_to(sizes: np.ndarray, first: int, start: int, target: int) -> tuple:
    """``(count, end)``: the batches from ``sizes[first]`` on whose rows, from position ``start``,
    end at or before ``target`` (at least one: a batch that crosses ``target`` alone), and the
    position after them. Sums a window of the sizes that doubles until it passes ``target``: the
    work and the memory are those of the batches counted (a schedule may be a broadcast view of
    one size)."""
    window = 1024
    while True:
        ends = start + np.cumsum(sizes[first:first + window])
        count = int(np.searchsorted(ends, target, side="right"))
        if count < ends.size or first + window >= sizes.size:
            count = max(count, 1)
            return count, int(ends[count - 1])
        window *= 2


def _stream_block(raw: np.ndarray, y: np.ndarray, spec: tuple, seed: int | None) -> tuple:
    """One block of a :class:`RowStream`: its rows (permuted by ``default_rng(seed)`` when ``seed``
    is given) mapped by :func:`_transformed` into a new C-contiguous float64 array, and its labels
    in the same order."""
    if seed is not None:
        permutation = np.random.default_rng(seed).permutation(raw.shape[0])
        raw, y = raw[permutation], y[permutation]
    return _transformed(np.asarray(raw), spec, np.empty((raw.shape[0], spec[2]))), np.asarray(y)


def magnitude_counts(X, magnitude_range: int) -> np.ndarray:
    """:func:`skdpsco.linear_model._scaling.magnitude_counts` of the rows ``X`` (one pass), orders in
    ``[-magnitude_range, magnitude_range]``, each sub-block counted by the compiled
    :func:`skdpsco.rows._maps.magnitude_histogram`: the same integers (``frexp`` is exact;
    ``tests/test_dask.py`` compares them)."""
    return block_sum(_magnitude_counts, X, extra=(int(magnitude_range),))


def _magnitude_counts(block: np.ndarray, magnitude_range: int) -> np.ndarray:
    counts = np.zeros((block.shape[1], 2 * magnitude_range + 1), dtype=np.int64)
    _maps.magnitude_histogram(np.asarray(block, dtype=np.float64), counts, magnitude_range, _HALF_OCTAVE)
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


class DaskRows:
    """The Dask layout of the rows (:func:`skdpsco.rows.layout_of`): the methods of the in-memory
    layouts on :class:`Rows` and Dask arrays, each a lazy per-row map (:func:`map_rows`, composed
    with the rows' earlier maps, nothing read) or one pass of block sums (:func:`block_sum`), the
    maps and the statistics those of the dense layout on each block. The maps take the in-memory
    layouts' ``out`` and ``in_place`` and have no use for them: a lazy map writes nothing."""

    name = "dask"
    lazy = True
    unstored_columns = False

    @staticmethod
    def clip_rows(X, max_norm: float, out=None):
        return map_rows(X, DENSE.clip_rows, max_norm)

    @staticmethod
    def row_norms(X):
        """The lazy 1-D array of the rows' norms (:meth:`skdpsco.rows.DENSE.row_norms` of each block)."""
        return map_rows(X, DENSE.row_norms, n_columns=0)

    @staticmethod
    def divide_by_powers_of_two(X, scales: np.ndarray, out=None):
        return map_rows(X, DENSE.divide_by_powers_of_two, scales)

    @staticmethod
    def standardised(X, mean: np.ndarray, scale: np.ndarray, clip_norm: float, out=None):
        """The rows standardised, composed with their earlier maps (applied to the map's own
        float64 copy of each source block, never to the caller's array)."""
        return map_rows(X, DENSE.standardised, mean, scale, clip_norm)

    @staticmethod
    def with_constant_column(X, value: float, in_place: bool = False):
        """The rows with their intercept column (a lazy map: ``in_place`` has nothing to save)."""
        return with_constant_column(X, value)

    magnitude_counts = staticmethod(magnitude_counts)
    leading_rows = staticmethod(leading_blocks)

    @staticmethod
    def column_sums(X) -> np.ndarray:
        return block_sum(DENSE.column_sums, X)

    @staticmethod
    def centred_square_sums(X, mean: np.ndarray, clip: float) -> np.ndarray:
        """One pass of block sums; the rows of a fit are their mapped sub-blocks, centred and
        clipped in place (:func:`skdpsco.rows._dense.centred_square_sums`, ``overwrite_rows``)."""
        return block_sum(DENSE.centred_square_sums, X, extra=(mean, clip, DaskRows.owns_blocks(X)))

    @staticmethod
    def block_sum(function, *arrays, extra=()):
        return block_sum(function, *arrays, extra=extra)

    @staticmethod
    def owns_blocks(X) -> bool:
        """Whether :func:`block_sum` hands its function sub-blocks it may overwrite: those of the
        rows of a fit (:class:`Rows`), each mapped anew into a buffer."""
        return getattr(X, "is_lazy_rows", False)

    @staticmethod
    def features(rows, n_features: int):
        """The rows themselves: a Dask fit's rows get their intercept column after the releases."""
        return rows

    @staticmethod
    def canonical(X):
        """The rows as a fit reads them: :func:`validate` made them so."""
        return X

    @staticmethod
    def fused(X) -> bool:
        return False

    @staticmethod
    def row_source(X, y, n_rows: int, order_rng, order=None, rows_written=None) -> RowStream:
        """The rows read a block at a time in ``order`` (:class:`StreamOrder`; ``None``: one drawn
        from ``order_rng``, :func:`stream_order`)."""
        return RowStream(X, y, order if order is not None else stream_order(X.chunks[0], order_rng))


    @staticmethod
    def as_floats(values):
        return values.astype(float)

    @staticmethod
    def any(mask) -> bool:
        """Whether some entry of ``mask`` is true (one pass)."""
        return bool(mask.any().compute())

    @staticmethod
    def positive_part(values, sign: float):
        return np.maximum(sign * values, 0.0)

    @staticmethod
    def vector_magnitude_counts(values, magnitude_range: int) -> np.ndarray:
        """The histogram of :func:`magnitude_counts` of the non-negative ``values`` as one column
        (one pass), an infinite value counted as the largest float."""
        return magnitude_counts(np.minimum(values, np.finfo(float).max)[:, None], magnitude_range)[0]


LAYOUT = DaskRows()
"""The layout of Dask rows, registered with :mod:`skdpsco.rows` at import."""

register_lazy_layout(LAYOUT)
