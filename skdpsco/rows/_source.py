"""In-memory rows read in a public order: the row source of an in-memory run.

A row source is what the one-pass solvers read their rows from: ``n_rows``, :meth:`~ArrayRows.rows`
(a phase's rows, in memory) and :meth:`~ArrayRows.batches`, consecutive disjoint batches of the
rows at positions ``first, first + 1, ...`` of the source's reading order. In memory the order is
a permutation of the rows (:func:`row_order`) and the batches are one :class:`RowBatches`, which
the compiled loop reads in place. The rows of a Dask fit are the other source
(:class:`skdpsco._dask.RowStream`, a block at a time); :func:`skdpsco.rows.row_source` picks one
by the layout of the rows, and the solvers run the same code on both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

def row_order(n_rows: int, order_rng: np.random.Generator, order: np.ndarray | None) -> np.ndarray:
    """A uniformly random order of the rows, or the given fixed public ``order``, checked to be a
    permutation (every row used once per pass, pitfall D5). Never a function of the data: every
    guarantee holds for every data-independent order (audits use it to place the differing row)."""
    if order is None:
        return order_rng.permutation(n_rows)
    order = np.asarray(order)
    if order.shape != (n_rows,) or not _is_permutation(order):
        raise ValueError(f"order must be a permutation of the {n_rows} row indices.")
    return order


def _is_permutation(order: np.ndarray) -> bool:
    """Whether the integer vector ``order`` holds every index ``0 .. n - 1`` once: in range, and
    every index marked (linear time; a sort took a second at ``n = 10^7``)."""
    n = order.size
    if not np.issubdtype(order.dtype, np.integer):  # e.g. float indices: compared as values
        return bool(np.array_equal(np.sort(order), np.arange(n)))
    if n == 0:
        return True
    if order.min() < 0 or order.max() >= n:
        return False
    seen = np.zeros(n, dtype=bool)
    seen[order] = True
    return bool(seen.all())


class ArrayRows:
    """In-memory rows ``X`` (dense or CSR, of the layout ``layout``) read in the fixed ``order``, a
    permutation of their indices (:func:`row_order`): the row source of an in-memory run (module
    docstring). Its batches are one :class:`RowBatches` over ``X``, which the compiled loop of
    :func:`skdpsco.solvers._core.projected_noisy_sgd` reads in place.

    ``rows_written``: for rows still being written (the tail of a fit's gather,
    :class:`skdpsco.rows.RowsInProgress`), ``rows_written(stop)`` returns once the rows of ``X``
    before ``stop`` are written; every read here waits for the rows it reads (``None``: all written).
    """

    def __init__(self, X, y: np.ndarray, order: np.ndarray, rows_written=None, layout=None):
        self.X, self.y, self.order, self.rows_written, self.layout = X, y, order, rows_written, layout

    @property
    def n_rows(self) -> int:
        return int(self.order.size)

    def rows(self, first: int, stop: int) -> tuple:
        """``(X_rows, y_rows)``: the rows at positions ``first .. stop - 1`` of the order, in
        memory (for solvers that read a phase's rows many times, e.g. Phased-ERM)."""
        rows = self.order[first:stop]
        wait_for_rows(self.rows_written, rows)
        if rows.size and np.array_equal(rows, np.arange(rows[0], rows[0] + rows.size)):
            rows = slice(int(rows[0]), int(rows[0]) + rows.size)  # a run of rows: views, no copy
        return self.X[rows], self.y[rows]

    def batches(self, first: int, batch_sizes, passes: int = 1) -> RowBatches:
        """Consecutive disjoint batches of ``batch_sizes`` rows from position ``first`` of the order
        (``passes`` times over the same rows, for multi-pass algorithms)."""
        batch_sizes = np.asarray(batch_sizes, dtype=np.int64)
        rows = self.order[first:first + int(batch_sizes.sum()) // passes]
        return RowBatches(self.X, self.y, np.tile(rows, passes) if passes > 1 else rows, batch_sizes,
                          rows_written=self.rows_written, layout=self.layout)


def wait_for_rows(rows_written, rows: np.ndarray) -> None:
    """Return once the rows of index ``rows`` are written (:class:`ArrayRows`); at once when
    ``rows_written`` is ``None``."""
    if rows_written is not None and rows.size:
        rows_written(int(rows.max()) + 1)


@dataclass(frozen=True)
class RowBatches:
    """Consecutive disjoint row blocks ``X[order[start:start + B_t]]``, each row used once.

    Iterating yields ``(X_batch, y_batch)``, one per entry of ``batch_sizes``: views of ``X`` when
    ``order`` is a run of consecutive rows (the estimators' rows are already shuffled), copies
    otherwise; the compiled loop reads the same rows in place instead (no copy of ``X``).
    ``order=None``: the rows of ``X`` in sequence, with no index array of their number.
    ``intercept``: the rows are ``[X, intercept]``, a CSR ``X`` and a last column of that value it
    does not store (a sparse fit's intercept column), which the compiled loop reads as if stored;
    iterating yields the batches with the column (copies), which ``layout`` (the layout of ``X``,
    :func:`skdpsco.rows.layout_of`) appends. ``rows_written``: rows still being written
    (:class:`ArrayRows`), each batch's rows waited for before they are read.
    """

    X: np.ndarray
    y: np.ndarray
    order: np.ndarray | None
    batch_sizes: np.ndarray
    cycle: bool = False
    intercept: float | None = None
    rows_written: Callable[[int], None] | None = None
    layout: object = None

    @property
    def n_columns(self) -> int:
        """The columns of the rows, an unstored intercept column included."""
        return self.X.shape[1] + (self.intercept is not None)

    @property
    def n_order(self) -> int:
        """The number of positions in ``order`` (of ``X``'s rows when it is ``None``)."""
        return self.X.shape[0] if self.order is None else self.order.size

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        start = 0
        first = 0 if self.order is None or not self.order.size else int(self.order[0])
        in_sequence = self.order is None or np.array_equal(self.order, np.arange(first, first + self.order.size))
        for size in self.batch_sizes:
            if self.cycle and start + size > self.n_order:
                start = 0  # the next pass over the rows (see :func:`skdpsco.rows.full_batches`)
            if self.rows_written is not None:  # the rows of this batch written before they are read
                self.rows_written(first + start + size if in_sequence else int(self.order[start:start + size].max()) + 1)
            if in_sequence and first + start == 0 and size == self.X.shape[0]:
                batch = self.X, self.y  # every row: no slice (a CSR matrix's slice is a copy)
            else:
                rows = slice(first + start, first + start + size) if in_sequence else self.order[start : start + size]
                batch = self.X[rows], self.y[rows]
            yield batch if self.intercept is None else (self.layout.with_constant_column(batch[0], self.intercept), batch[1])
            start += size
