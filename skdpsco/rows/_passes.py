"""The passes the releases before the solver make over a fit's rows: the private row bound's
norms, the histograms of the features' orders of magnitude, the division and clip, the moments and
the standardisation (:mod:`skdpsco.linear_model._scaling` says what each release is).

A fit's in-memory copy is read by the fused kernels (:class:`FusedPasses`, one pass each, in
place, the rows not yet gathered gathered already scaled); any other rows through the methods of
their layout (:class:`LayoutPasses`). :func:`feature_passes` picks one.
"""

from __future__ import annotations

import numpy as np

from . import _fused
from ._dense import DENSE
from ._layout import layout_of

class FusedPasses:
    """The passes over a fit's in-memory rows (:func:`skdpsco.rows.fused_layout`: one C-contiguous
    float64 array, the ``n_features`` features first): the fused kernels of
    :mod:`skdpsco.rows._fused`, one pass each, the rows rewritten in place. ``magnitude_range``:
    the orders the histograms count, ``[-R, R]``."""

    def __init__(self, rows: np.ndarray, n_features: int, magnitude_range: int, magnitude_counts: np.ndarray | None = None,
                 pending=None):
        self.rows, self.n_features, self.magnitude_range = rows, int(n_features), int(magnitude_range)
        self.counted = magnitude_counts  # the histograms the gather counted as it copied the rows
        # (X, order, bound, fill): the last len(order) rows are still to be gathered from X[order]
        # (clipped to bound), scaled, by :meth:`standardise`; the histograms are of the others
        self.pending = pending
        self._in_progress, self._first_in_progress = None, 0  # the pending rows being gathered, from that row on

    def rows_written(self, stop: int | None = None) -> None:
        """Return once the rows before ``stop`` (default: all) are written: :meth:`standardise`
        leaves the pending rows to the threads of :func:`skdpsco.rows.shared_threads`, which a
        one-pass solver reading the rows in sequence overlaps with its pass
        (:class:`skdpsco.rows.RowsInProgress`)."""
        if self._in_progress is not None:
            self._in_progress.wait(None if stop is None else stop - self._first_in_progress)

    def row_norms(self) -> np.ndarray:
        return DENSE.row_norms(self.rows[:, :self.n_features])

    def head(self, n_rows: int) -> "FusedPasses":
        """The passes over the first ``n_rows`` rows (a view: in place on these rows); with rows
        pending, the rows gathered (the histograms the gather counted are theirs)."""
        if self.pending is not None:
            return FusedPasses(self.rows[:self._gathered_rows], self.n_features, self.magnitude_range, self.counted)
        return self if n_rows >= self.rows.shape[0] else FusedPasses(self.rows[:n_rows], self.n_features, self.magnitude_range)

    @property
    def _gathered_rows(self) -> int:
        return self.rows.shape[0] - (0 if self.pending is None else len(self.pending[1]))

    def magnitude_counts(self) -> np.ndarray:
        if self.counted is not None:
            return self.counted
        return _fused.magnitude_counts(self.rows, self.n_features, self.magnitude_range)

    def divide_and_clip(self, scales: np.ndarray, bound: float) -> np.ndarray:
        """Divide by the powers of two ``scales`` and clip to ``bound``, in place; returns the
        column sums of the result, computed in the same pass."""
        return _fused.divide_clip_and_sum(self.rows, self.n_features, scales, bound)

    def column_sums(self) -> np.ndarray:
        return self.rows[:, :self.n_features].sum(axis=0)

    def centred_square_sums(self, mean: np.ndarray, clip: float) -> np.ndarray:
        return _fused.centred_square_sums(self.rows, self.n_features, mean, clip)

    def standardise(self, mean: np.ndarray, scale: np.ndarray, clip_norm: float, undivided=None) -> None:
        """Standardise the rows in place; ``undivided = (start, scales, bound)``: the rows from
        ``start`` on are first divided and clipped (:meth:`divide_and_clip`), in the same pass.
        Pending rows are gathered so, divided by ``scales`` (by 1 without ``undivided``) and
        clipped to ``bound`` (their gather's bound without), in the background: read them after
        :meth:`rows_written`."""
        start = self._gathered_rows if undivided is None else undivided[0]
        _fused.standardise(self.rows[:start], self.n_features, mean, scale, clip_norm)
        if self.pending is not None:
            X, order, bound, fill = self.pending
            divisors = (np.ones(self.n_features), bound) if undivided is None else undivided[1:]
            self._in_progress = _fused.gather_standardised(X, order, self.rows[start:], *divisors, mean, scale,
                                                               clip_norm, fill, in_background=True)
            self._first_in_progress = start
            self.pending = None
        elif start < self.rows.shape[0]:
            _fused.divide_clip_and_standardise(self.rows[start:], self.n_features, *undivided[1:], mean, scale,
                                                   clip_norm)


class LayoutPasses:
    """The same passes over rows the fused kernels do not read, through the methods of their layout
    (:func:`skdpsco.rows.layout_of`): the rows of a Dask fit (lazy maps and block sums,
    :mod:`skdpsco._dask`), CSR rows, or an array of another layout (the numpy references, a block
    of rows at a time). ``rows`` holds the rows the solver will read: rewritten in place in
    memory, the new lazy map of Dask rows. ``order``: the reading order of the blocks of Dask rows
    (:func:`skdpsco._dask.stream_order`)."""

    def __init__(self, rows, n_features: int, magnitude_range: int, order=None):
        self.layout = layout_of(rows)
        self.rows, self.n_features, self.magnitude_range = rows, int(n_features), int(magnitude_range)
        self.features = self.layout.features(rows, self.n_features)
        self.order = order

    def rows_written(self, stop: int | None = None) -> None:
        """Every row is written when a pass returns (:meth:`FusedPasses.rows_written`)."""

    def _replace(self, features) -> None:
        """Take the rows a map returned: the same array when it mapped them in place, else (a lazy
        map) the rows the solver will read."""
        if features is not self.features:
            self.rows = features
        self.features = features

    def row_norms(self) -> np.ndarray:
        return self.layout.row_norms(self.features)

    def head(self, n_rows: int) -> "LayoutPasses":
        """The passes over the first ``n_rows`` rows (in memory: a view, in place; of Dask rows, the
        leading blocks of their :attr:`order` that hold exactly ``n_rows`` rows: a new lazy map,
        these passes' rows unchanged)."""
        if n_rows >= self.rows.shape[0]:
            return self
        return LayoutPasses(self.layout.leading_rows(self.rows, self.order, n_rows), self.n_features,
                            self.magnitude_range)

    def magnitude_counts(self) -> np.ndarray:
        return self.layout.magnitude_counts(self.features, self.magnitude_range)

    def divide_and_clip(self, scales: np.ndarray, bound: float) -> None:
        """Divide by the powers of two ``scales`` and clip to ``bound``; no sums (``None``): they
        take a pass of their own where they are needed."""
        divided = self.layout.divide_by_powers_of_two(self.features, scales, out=self.features)
        self._replace(self.layout.clip_rows(divided, bound, out=divided))

    def column_sums(self) -> np.ndarray:
        return self.layout.column_sums(self.features)

    def centred_square_sums(self, mean: np.ndarray, clip: float) -> np.ndarray:
        return self.layout.centred_square_sums(self.features, mean, clip)

    def standardise(self, mean: np.ndarray, scale: np.ndarray, clip_norm: float, undivided=None) -> None:
        """As :meth:`FusedPasses.standardise`. Lazy rows: the :meth:`head` divided was a map of its
        own, so all the rows are divided and clipped here (lazily, before the standardisation)."""
        start = None if undivided is None else undivided[0]
        if start is not None and start < self.rows.shape[0]:
            rest = self if self.layout.lazy else LayoutPasses(
                self.layout.row_block(self.rows, slice(start, self.rows.shape[0])), self.n_features,
                self.magnitude_range)
            rest.divide_and_clip(*undivided[1:])
        self._replace(self.layout.standardised(self.features, mean, scale, clip_norm, out=self.features))


def feature_passes(rows, n_features: int, magnitude_range: int, magnitude_counts: np.ndarray | None = None,
                   pending=None, order=None):
    """The passes of the feature scaling and of the private row bound over ``rows``, whose first
    ``n_features`` columns are the features: the fused kernels for a fit's in-memory array
    (:class:`FusedPasses`), the methods of the rows' layout for any other (:class:`LayoutPasses`).
    ``magnitude_range``: the orders of magnitude the histograms count, ``[-R, R]``.
    ``magnitude_counts``: the histograms of the rows' orders of magnitude when the pass that copied
    them counted them (:meth:`~skdpsco.rows._memory.InMemoryRows.clipped_rows_in_order`).
    ``pending``: rows still to be gathered (:class:`FusedPasses`). ``order``: the reading order of
    the blocks of Dask rows (:class:`LayoutPasses`). Passes given are returned as they are."""
    if isinstance(rows, (FusedPasses, LayoutPasses)):
        return rows
    if layout_of(rows).fused(rows):
        return FusedPasses(rows, n_features, magnitude_range, magnitude_counts, pending)
    return LayoutPasses(rows, n_features, magnitude_range, order)
