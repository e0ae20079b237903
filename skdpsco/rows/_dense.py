"""The dense layout: rows in a numpy array, C or F order, of any float dtype.

A fit's own copy of its rows is C-contiguous float64 (:func:`skdpsco.rows.fused_layout`): the
fused kernels of :mod:`skdpsco.rows._fused` and the compiled copy of :mod:`skdpsco.rows._maps`
read it in place. Any other dense array (a caller's F-order or float32 rows, a view of some
columns) is read by the numpy reference of each pass, a block of :data:`ROW_BLOCK` rows at a time:
the same values, bit for bit where a test says so, to rounding otherwise.

The per-row maps :func:`clip_rows`, :func:`divide_by_powers_of_two` and :func:`standardised` are
module functions: the Dask layout applies them to each block of its rows and recognises them to run
its compiled form of them (``skdpsco._dask._program``).
"""

from __future__ import annotations

import numpy as np

from . import _blocks, _fused, _maps
from ._memory import InMemoryRows, clipped_from_scaled, refuse_non_finite
from ._threads import balanced_block_rows, map_blocks

ROW_BLOCK = 4096
"""Rows per block of the numpy references (bounds their temporaries)."""

OVERFLOW_SAFE_EXPONENT = 900
"""A row whose quotient ``x / s`` would overflow is first brought to largest entry ``2**900``: still
far above any row bound, so the clip that follows gives the same row as exact arithmetic would."""


def clip_rows(X: np.ndarray, max_norm: float, out: np.ndarray | None = None) -> np.ndarray:
    """Scale every row to ``l2`` norm at most ``max_norm``: a per-row map, so it costs no privacy
    and enforces the public bound (``feldman.md`` pitfall D3).

    Written into ``out`` (same shape as ``X``, e.g. a column block of a larger array) when given,
    else into a new array; the norms are computed without a temporary of the size of ``X``. A row
    whose sum of squares overflows (or is subnormal) is clipped without forming its norm
    (:meth:`~skdpsco.rows._memory.InMemoryRows.clip_factors`). The compiled
    :func:`skdpsco.rows._maps.gather_clipped_rows` is the same map."""
    scale, scaled_rows, exponents, factors = DENSE.clip_factors(X, max_norm)
    out = np.multiply(X, scale[:, None], out=out)
    if scaled_rows.size:
        out[scaled_rows] = clipped_from_scaled(out[scaled_rows], exponents[:, None], factors[:, None])
    return out


def divide_by_powers_of_two(X: np.ndarray, scales: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``X / scales`` for per-feature powers of two, without overflow: a row whose quotient would
    exceed the float range is divided by a further power of two first (the same for its every
    entry, so its direction is kept). The rows are clipped to a bound far below ``2**900``
    afterwards, which makes the two the same; without this a single finite row could make ``fit``
    raise on one dataset and not on its neighbour, an unaccounted release.

    Exact: a product by a power of two only changes the exponent (correctly rounded, as
    ``np.ldexp``, where the result is subnormal)."""
    exponents, factors = _fused.powers_of_two(scales)
    shrinking = exponents < 0  # only a division by a power below 1 can overflow
    limits = np.ldexp(1.0, 1023 + exponents[shrinking])
    overflowing = (np.abs(X[:, shrinking]) >= limits).any(axis=1)
    rows = np.array(X[overflowing], dtype=float)  # before an in-place division overwrites them
    with np.errstate(over="ignore"):  # no warning either: it would tell that some row overflowed
        out = np.multiply(X, factors, out=out)
    if rows.size:
        with np.errstate(divide="ignore"):
            top = np.max(np.log2(np.abs(rows)) - exponents, axis=1)
        extra = np.ceil(top).astype(np.int64) - OVERFLOW_SAFE_EXPONENT
        out[overflowing] = np.ldexp(rows, (-exponents)[None, :] - extra[:, None])
    return out


def standardised(rows, mean: np.ndarray, scale: np.ndarray, clip_norm: float, out: np.ndarray | None = None):
    """:func:`standardise_rows` on a float64 copy, or in place in ``out`` when it is ``rows``."""
    if out is not rows:
        rows = np.array(rows, dtype=np.float64)
    standardise_rows(rows, mean, scale, clip_norm)
    return rows


def standardise_rows(rows: np.ndarray, mean: np.ndarray, scale: np.ndarray, clip_norm: float) -> None:
    """In place: ``rows <- clip_C((rows - mean) / scale) / C`` (each row's norm at most 1)."""
    rows -= mean
    rows /= scale
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    rows *= (1.0 / np.maximum(norms, clip_norm))[:, None]


def centred_square_sums(rows, mean: np.ndarray, clip: float, overwrite_rows: bool = False) -> np.ndarray:
    """``sum_i u_i**2`` per feature, ``u_i = clip_C(x_i - mean)``, :data:`ROW_BLOCK` rows at a time.
    With ``overwrite_rows`` (a Dask fit's mapped sub-blocks) ``u_i`` is computed in ``rows``
    itself: the same values, no temporary of the size of a block (which a Dask worker's allocator
    returns to the system at every sub-block)."""
    squares = np.zeros(rows.shape[1])
    for start in range(0, rows.shape[0], ROW_BLOCK):
        if overwrite_rows:
            block = rows[start:start + ROW_BLOCK]
            DENSE.clip_rows(np.subtract(block, mean, out=block), clip, out=block)
        else:
            block = DENSE.clip_rows(rows[start:start + ROW_BLOCK] - mean, clip)
        squares += np.einsum("ij,ij->j", block, block)
    return squares


def column_sums(rows) -> np.ndarray:
    """``sum_i x_i``: the rows' column sums."""
    return rows.sum(axis=0)


class DenseRows(InMemoryRows):
    """The layout of rows in a numpy array (module docstring)."""

    name = "dense"

    clip_rows = staticmethod(clip_rows)
    divide_by_powers_of_two = staticmethod(divide_by_powers_of_two)
    standardised = staticmethod(standardised)
    centred_square_sums = staticmethod(centred_square_sums)
    column_sums = staticmethod(column_sums)

    @staticmethod
    def canonical(X):
        """``X`` as a fit reads it: a validated array is already."""
        return X

    @staticmethod
    def in_layout(X, dense: bool):
        """``X`` (already dense)."""
        return X

    @staticmethod
    def fused(X) -> bool:
        """Whether the fused kernels read ``X`` in place (:func:`skdpsco.rows.fused_layout`)."""
        return _fused.fused_layout(X)

    @staticmethod
    def row_squares(X) -> np.ndarray:
        """``sum_j x_ij**2`` of every row (an overflow gives ``inf``, silently: a warning would tell
        that some row is that long)."""
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            return np.einsum("ij,ij->i", X, X)

    @staticmethod
    def scaled_row_norms(X) -> tuple[np.ndarray, np.ndarray]:
        """``(e, r)``: for every row of ``X``, ``e`` the binary exponent of its largest ``|entry|``
        (``np.frexp``; 0 for a zero row) and ``r = ||x 2**-e||`` in ``[1/2, sqrt(d))`` (0 for a
        zero row), so that ``||x|| = 2**e r``, known even where it exceeds the float range.
        ``x 2**-e`` is exact (``np.ldexp``), no square overflows and none of a tiny row's is
        subnormal. A row with a NaN or an infinite entry is an error. The reference of the
        compiled ``_scaled_norm`` (:mod:`skdpsco.rows._maps`)."""
        if not np.isfinite(X).all():
            refuse_non_finite()
        exponents = np.frexp(np.abs(X).max(axis=1, initial=0.0))[1]
        with np.errstate(under="ignore"):
            scaled = np.ldexp(X, -exponents[:, None])
            return exponents, np.sqrt(np.einsum("ij,ij->i", scaled, scaled))

    @staticmethod
    def _rows_in_order(X, order, max_norm, fill, magnitude_range, spare_column, out):
        """A C-contiguous float64 ``X`` is gathered by the compiled
        :func:`skdpsco.rows._maps.gather_clipped_rows`, one pass, in blocks of
        :func:`skdpsco.rows.balanced_block_rows` rows over the threads of
        :func:`skdpsco.rows.map_blocks` (reading rows in a random order is bound by memory latency,
        which threads overlap), the histograms counted on the way; any other layout by
        :func:`clip_rows` block by block (the reference; same rows, no histograms)."""
        n_features = X.shape[1]
        shape = (order.size, n_features + (fill is not None))
        if out is None:
            out = np.empty(shape)
        elif out.shape != shape or not _fused.fused_layout(out):
            raise ValueError(f"out must be a C-contiguous float64 array of shape {shape}.")
        if not _fused.fused_layout(X):
            for start in range(0, order.size, ROW_BLOCK):
                block = slice(start, start + ROW_BLOCK)
                clip_rows(X[order[block]], max_norm, out=out[block, :n_features])
            if fill is not None:
                out[:, -1] = fill
            return out if magnitude_range is None else (out, None)
        order = np.ascontiguousarray(order, dtype=np.intp)  # the kernel reads it as a C array
        width = None if magnitude_range is None else 2 * int(magnitude_range) + 1
        block_rows = balanced_block_rows(order.size)  # the copy and the integer counts do not depend on them

        def gather(start: int) -> tuple:
            block = slice(start, start + block_rows)
            counts = None if width is None else np.zeros((n_features, width), dtype=np.int64)
            non_finite = _maps.gather_clipped_rows(X, order[block], float(max_norm), out[block],
                                                   0.0 if fill is None else float(fill), counts)
            return non_finite, counts

        parts = map_blocks(gather, order.size, block_rows)
        if sum(non_finite for non_finite, _ in parts):
            refuse_non_finite()
        if width is None:
            return out
        counts = np.zeros((n_features, width), dtype=np.int64)
        for _, part in parts:  # in the order of the blocks
            counts += part
        return out, counts.astype(float)

    @staticmethod
    def magnitude_counts(X, magnitude_range: int) -> np.ndarray:
        """The ``(d, 2 R + 1)`` histograms (as floats) of the binary orders of magnitude of the
        non-zero entries of every column, orders clamped to ``[-R, R]``
        (:func:`skdpsco.rows.magnitude_counts`); rows of another layout than the fused one are
        counted a C-contiguous float64 copy of :data:`ROW_BLOCK` rows at a time (the same integers)."""
        if _fused.fused_layout(X):
            return _fused.magnitude_counts(X, X.shape[1], magnitude_range)
        counts = np.zeros((X.shape[1], 2 * int(magnitude_range) + 1), dtype=np.int64)
        for start in range(0, X.shape[0], ROW_BLOCK):
            block = np.ascontiguousarray(X[start:start + ROW_BLOCK], dtype=np.float64)
            counts += _blocks.magnitude_counts(block, X.shape[1], int(magnitude_range))
        return counts.astype(float)

    @staticmethod
    def row_block(X, rows: slice):
        """The consecutive rows ``rows`` of ``X`` (a view)."""
        return X[rows]

    @staticmethod
    def leading_rows(X, order, n_rows: int):
        """The first ``n_rows`` rows of ``X`` (a view; in memory the rows are in their order already)."""
        return X[:n_rows]

    @staticmethod
    def features(rows, n_features: int):
        """The first ``n_features`` columns of a fit's rows (a view): the features, without the
        intercept column the copy may end with."""
        return rows[:, :n_features]

    @staticmethod
    def scaled_gram(X, factors: np.ndarray, overwrite_rows: bool = False, intercept: float | None = None) -> np.ndarray:
        """``S^T S`` for ``S = diag(factors) X``: one symmetric rank-``k`` update (numpy calls the
        symmetric BLAS product for ``A.T @ A``); with ``overwrite_rows``, ``S`` is written into ``X``.
        Dense rows store their intercept column: ``intercept`` is for the CSR layout's signature."""
        if intercept is not None:
            raise ValueError("intercept= is the unstored last column of CSR rows; dense rows store their own.")
        scaled = np.multiply(X, factors[:, None], out=X) if overwrite_rows else X * factors[:, None]
        return scaled.T @ scaled

    @staticmethod
    def weighted_gram(X, weights: np.ndarray) -> np.ndarray:
        """``X^T diag(weights) X`` (dense)."""
        return (X * weights[:, None]).T @ X

    @staticmethod
    def kernel_reads(X) -> bool:
        """Whether the compiled SGD loop reads ``X`` in place
        (:func:`skdpsco.solvers._kernel.run_steps`): a 2-D C-contiguous float64 array."""
        return _fused.fused_layout(X)

    @staticmethod
    def kernel_arrays(X) -> tuple:
        """``(X,)``: the array the compiled SGD loop reads (:meth:`kernel_reads`)."""
        return (X,)

    # -- vectors of the rows (the targets, the row norms) -------------------------------------------

    @staticmethod
    def stored_values(X) -> np.ndarray:
        """The values ``X`` stores, as an array (of any array-like)."""
        return np.asarray(X)

    @staticmethod
    def as_floats(values) -> np.ndarray:
        """``values`` as a float array."""
        return np.asarray(values, dtype=float)

    @staticmethod
    def any(mask) -> bool:
        """Whether some entry of ``mask`` is true."""
        return bool(np.any(mask))

    @staticmethod
    def positive_part(values, sign: float) -> np.ndarray:
        """``max(sign values, 0)``, in one new array."""
        part = np.multiply(values, sign)
        return np.maximum(part, 0.0, out=part)

    @staticmethod
    def vector_magnitude_counts(values, magnitude_range: int) -> np.ndarray:
        """The histogram of :meth:`magnitude_counts` of the non-negative ``values`` as one column of
        rows (compiled, one pass, no temporary); an infinite value (a finite row longer than the
        float range has an infinite norm) lands in the top bin, as the largest float does."""
        column = np.ascontiguousarray(values, dtype=np.float64).reshape(-1, 1)
        return _fused.magnitude_counts(column, 1, magnitude_range)[0]


DENSE = DenseRows()
"""The dense layout (:func:`skdpsco.rows.layout_of`)."""
