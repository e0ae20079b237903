"""The CSR layout: rows in a scipy sparse matrix, read through their stored entries.

A fit makes its CSR input canonical first (:func:`canonical_csr`: duplicates summed, indices
sorted, checked finite). Every per-row operation here keeps the sparsity pattern and runs a block
of rows at a time (:func:`sparse_row_blocks`), its temporaries a few arrays of a block's entries:
each row's result depends on that row alone, so it does not depend on the blocks. A sparse fit
stores its intercept column in a slot its copy leaves per row (:func:`with_constant_column`), or
not at all where the solver reads it as if stored (:attr:`CsrRows.unstored_columns`).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from . import _fused, _maps
from ._dense import OVERFLOW_SAFE_EXPONENT
from ._memory import InMemoryRows, clipped_from_scaled, refuse_non_finite

SPARSE_ROW_BLOCK = 16384
"""Rows per block of the per-row operations on CSR matrices (bounds their temporaries)."""

SPARSE_BLOCK_ENTRIES = 16384
"""Stored entries per block of the per-row operations on CSR matrices, where fewer rows than
:data:`SPARSE_ROW_BLOCK` hold them (at least one row a block): their temporaries, a few arrays of
a block's entries, stay at 128 KiB each however many entries a row stores (a few hundredths of
``X`` at ``10^5`` rows of 6 entries; half a MiB each, at 65536, made 0.07 ``X.nbytes`` apiece)."""


def sparse_row_blocks(X):
    """``(rows, entries)`` slices of consecutive blocks of rows of a CSR matrix and of their stored
    entries: :data:`SPARSE_ROW_BLOCK` rows, or fewer where they store more than
    :data:`SPARSE_BLOCK_ENTRIES` entries. Each operation is per row, so its result does not
    depend on the blocks."""
    n_rows, start = X.shape[0], 0
    while start < n_rows:
        stop = min(start + SPARSE_ROW_BLOCK, n_rows)
        within = int(np.searchsorted(X.indptr, X.indptr[start] + SPARSE_BLOCK_ENTRIES, side="right")) - 1
        stop = max(start + 1, min(stop, within))
        yield slice(start, stop), slice(int(X.indptr[start]), int(X.indptr[stop]))
        start = stop


def csr_row_block(X, rows: slice):
    """The consecutive rows ``rows`` of a CSR ``X`` as a CSR matrix whose ``data`` and ``indices``
    are views of ``X``'s (only its ``indptr``, shifted to start at 0, is new): ``X[rows]`` without
    the copy of the block's entries that scipy's slicing makes."""
    start, stop = int(X.indptr[rows.start]), int(X.indptr[rows.stop])
    block = sparse.csr_matrix((rows.stop - rows.start, X.shape[1]), dtype=X.dtype)
    # set, not passed to the constructor: it copies a view of less than half its base's entries
    block.data, block.indices, block.indptr = (X.data[start:stop], X.indices[start:stop],
                                               X.indptr[rows.start:rows.stop + 1] - start)
    block.has_sorted_indices = X.has_sorted_indices  # X's flags, not the empty matrix's
    block.has_canonical_format = X.has_canonical_format
    return block


def canonical_csr(X):
    """A scipy sparse matrix (CSR or CSC) as a CSR matrix in canonical format: duplicate entries
    summed, indices sorted; the caller's matrix is never modified. Checked to be finite here,
    before anything is charged (:func:`~skdpsco.rows._memory.refuse_non_finite`).

    The canonical format is a privacy requirement, not a convenience: the per-feature histograms
    of the feature scaling count one entry per stored value, and a row that stored one cell twice
    would add two counts to its feature's histogram, beyond the sensitivity they are calibrated
    to (:func:`skdpsco.linear_model._scaling.magnitude_sensitivity`)."""
    X = sparse.csr_matrix(X)  # CSC converted; a CSR input is not copied
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    if not np.isfinite(X.data).all():
        refuse_non_finite()
    return X


def scale_sparse_rows(X, factors: np.ndarray, in_place: bool = False):
    """``diag(factors) @ X`` for a CSR ``X``, same sparsity pattern: in place (``in_place``) or
    on a copy. The sparse form of the per-row products of ``clip_rows``."""
    out = X if in_place else X.copy()
    for rows, entries in sparse_row_blocks(out):
        out.data[entries] *= np.repeat(factors[rows], np.diff(out.indptr[rows.start:rows.stop + 1]))
    return out


def with_constant_column(X, value: float, in_place: bool = False):
    """The CSR matrix ``[X, value]``: one more column, ``value`` in every row (the intercept column
    of a sparse fit), built from ``X``'s arrays in one pass.

    With ``in_place``, when ``X``'s ``data`` and ``indices`` are the first entries of arrays with
    room for one more entry per row (as :meth:`CsrRows.clipped_rows_in_order` leaves them with
    ``spare_column``), the new matrix is written in that room
    (:func:`skdpsco.rows._maps.append_column_in_place`: the same arrays, no second copy of the
    rows) and ``X`` is invalid afterwards; without the room it is built in new arrays as without
    ``in_place``."""
    n_rows, n_columns = X.shape
    if in_place and _has_room_for_column(X):
        data, indices, indptr = X.data.base, X.indices.base, X.indptr
        _maps.append_column_in_place(data, indices, indptr, float(value), n_columns)
        return sparse.csr_matrix((data, indices, indptr), shape=(n_rows, n_columns + 1))
    indptr = X.indptr + np.arange(n_rows + 1, dtype=X.indptr.dtype)
    ends = indptr[1:] - 1  # the last entry of every row
    is_last = np.zeros(X.nnz + n_rows, dtype=bool)
    is_last[ends] = True
    data = np.empty(X.nnz + n_rows)
    index_type = np.int32 if X.indices.dtype == np.int32 and n_columns < np.iinfo(np.int32).max else np.int64
    indices = np.empty(X.nnz + n_rows, dtype=index_type)
    data[~is_last], indices[~is_last] = X.data, X.indices
    data[ends], indices[ends] = value, n_columns
    return sparse.csr_matrix((data, indices, indptr), shape=(n_rows, n_columns + 1))


def _has_room_for_column(X) -> bool:
    """Whether the CSR ``X``'s ``data`` and ``indices`` start arrays of ``nnz + n_rows`` entries
    that the column of :func:`with_constant_column` can be written into (its index fitting their
    integer type), the arrays writable and ``indptr`` of their integer type."""
    size = X.nnz + X.shape[0]

    def room(part: np.ndarray) -> bool:
        base = part.base
        return (isinstance(base, np.ndarray) and base.ndim == 1 and base.size == size and base.dtype == part.dtype
                and base.flags.c_contiguous and base.flags.writeable and part.size == X.nnz
                and part.__array_interface__["data"][0] == base.__array_interface__["data"][0])

    return (room(X.data) and room(X.indices) and X.indptr.dtype == X.indices.dtype and X.indptr.flags.writeable
            and X.indptr.flags.c_contiguous and X.shape[1] <= np.iinfo(X.indices.dtype).max)


def _sparse_rows_in_order(X, order: np.ndarray, spare_column: bool):
    """``X[order]`` for a CSR ``X``: a new CSR matrix of the rows in that order, copied by the
    compiled :func:`skdpsco.rows._maps.gather_sparse_rows` (one pass, no temporary of the size of
    ``X``; rows with a NaN or an infinite entry are an error). With ``spare_column`` its ``data``
    and ``indices`` are the first entries of arrays with one more entry per row, the room that
    :func:`with_constant_column` (``in_place``) appends the intercept column in."""
    n_rows = order.size
    entries = int(np.add.reduce(np.diff(X.indptr)[order], dtype=np.int64))
    size = entries + (n_rows if spare_column else 0)
    # scipy's own choice for the matrix (int32 where every index and count fits): kept, not converted
    largest = max(size, n_rows, X.shape[1] + int(spare_column))
    index_type = np.int32 if largest <= np.iinfo(np.int32).max else np.int64
    data, indices = np.empty(size), np.empty(size, dtype=index_type)
    indptr = np.empty(n_rows + 1, dtype=index_type)
    source_type = np.result_type(X.indices.dtype, X.indptr.dtype)
    if _maps.gather_sparse_rows(np.ascontiguousarray(X.data, dtype=np.float64), X.indices.astype(source_type, copy=False),
                                X.indptr.astype(source_type, copy=False),
                                np.ascontiguousarray(order, dtype=np.intp), data, indices, indptr):
        refuse_non_finite()
    return sparse.csr_matrix((data[:entries], indices[:entries], indptr), shape=(n_rows, X.shape[1]))


def clip_rows(X, max_norm: float, out=None):
    """``clip_rows`` of a CSR ``X`` (in place when ``out`` is ``X``, the only ``out`` it takes; else
    on a copy), a block of :func:`sparse_row_blocks` at a time: its temporaries are a few vectors
    of a block's rows and entries, not of ``X``'s (each row's clip depends on that row alone)."""
    out = X if out is X else X.copy()
    for rows, entries in sparse_row_blocks(out):
        block = csr_row_block(out, rows)
        scale, scaled_rows, exponents, factors = CSR.clip_factors(block, max_norm)
        out.data[entries] *= np.repeat(scale, np.diff(block.indptr))
        for row, exponent, factor in zip(scaled_rows + rows.start, exponents, factors):  # rare: not in a hot loop
            stored = slice(out.indptr[row], out.indptr[row + 1])
            out.data[stored] = clipped_from_scaled(out.data[stored], exponent, factor)
    return out


def divide_by_powers_of_two(X, scales: np.ndarray, out=None):
    """``divide_by_powers_of_two`` (:func:`skdpsco.rows._dense.divide_by_powers_of_two`) of a CSR
    ``X`` on its stored entries, with the same rule for a row that would overflow: in place when
    ``out`` is ``X``, else on a copy; a block of rows at a time, each block's quotients computed
    before any of its entries is overwritten (in place: ``X``'s own arrays, temporaries of a
    block's size)."""
    exponents, factors = _fused.powers_of_two(scales)
    out = X if out is X else X.copy()
    for rows, entries in sparse_row_blocks(X):
        columns = X.indices[entries]
        with np.errstate(over="ignore"):  # no warning: it would tell that some row overflowed
            data = X.data[entries] * factors[columns]
        starts = X.indptr[rows.start:rows.stop + 1] - entries.start
        for row in np.unique(np.searchsorted(starts, np.flatnonzero(~np.isfinite(data)), side="right") - 1):
            block = slice(starts[row], starts[row + 1])
            values = X.data[entries][block]
            with np.errstate(divide="ignore"):
                top = np.max(np.log2(np.abs(values)) - exponents[columns[block]])
            extra = int(np.ceil(top)) - OVERFLOW_SAFE_EXPONENT
            data[block] = np.ldexp(values, -exponents[columns[block]] - extra)
        out.data[entries] = data
    return out


class CsrRows(InMemoryRows):
    """The layout of rows in a scipy sparse matrix (module docstring)."""

    name = "sparse"

    unstored_columns = True
    """Rows of this layout may carry a last column of one value that they do not store (a sparse
    fit's intercept column): the solvers' ``intercept=``."""

    clip_rows = staticmethod(clip_rows)
    divide_by_powers_of_two = staticmethod(divide_by_powers_of_two)
    with_constant_column = staticmethod(with_constant_column)
    row_block = staticmethod(csr_row_block)

    canonical = staticmethod(canonical_csr)

    @staticmethod
    def stored_values(X) -> np.ndarray:
        """The values ``X`` stores (its ``data``)."""
        return X.data

    @staticmethod
    def in_layout(X, dense: bool):
        """``X`` as a dense array (``dense``: e.g. for a model fitted on dense rows, or a stream of
        dense calls), else as a canonical CSR matrix (:func:`canonical_csr`)."""
        return X.toarray() if dense else canonical_csr(X)

    @staticmethod
    def leading_rows(X, order, n_rows: int):
        """The first ``n_rows`` rows of ``X`` (:func:`csr_row_block`: views of its entries)."""
        return csr_row_block(X, slice(0, n_rows))

    @staticmethod
    def features(rows, n_features: int):
        """The rows themselves: a sparse fit's copy gets its intercept column after the passes
        that read the features (:meth:`~CsrRows.clipped_rows_in_order`, ``spare_column``)."""
        if rows.shape[1] != n_features:
            raise ValueError(f"CSR rows of a fit's passes hold the {n_features} features alone; got {rows.shape[1]} columns.")
        return rows

    @staticmethod
    def fused(X) -> bool:
        """The fused kernels of dense rows never read CSR rows."""
        return False

    @staticmethod
    def row_squares(X) -> np.ndarray:
        """``sum_j x_ij**2`` of every row from its stored entries, a block of
        :data:`SPARSE_ROW_BLOCK` rows at a time (an overflow gives ``inf``, silently)."""
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            squares = np.zeros(X.shape[0])
            for rows, entries in sparse_row_blocks(X):
                values = X.data[entries]
                starts = X.indptr[rows.start:rows.stop] - entries.start
                stored = np.diff(X.indptr[rows.start:rows.stop + 1]) > 0
                if values.size:
                    squares[rows][stored] = np.add.reduceat(values * values, starts[stored])
            return squares

    @staticmethod
    def scaled_row_norms(X) -> tuple[np.ndarray, np.ndarray]:
        """The dense layout's :meth:`~skdpsco.rows._dense.DenseRows.scaled_row_norms`, from the
        stored entries."""
        values = X.data
        if not np.isfinite(values).all():
            refuse_non_finite()
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))  # the row of every stored entry
        largest = np.zeros(X.shape[0])
        np.maximum.at(largest, rows, np.abs(values))
        exponents = np.frexp(largest)[1]
        with np.errstate(under="ignore"):
            scaled = np.ldexp(values, -exponents[rows])
        return exponents, np.sqrt(np.bincount(rows, weights=scaled * scaled, minlength=X.shape[0]))

    @staticmethod
    def _rows_in_order(X, order, max_norm, fill, magnitude_range, spare_column, out):
        """A CSR matrix of the same sparsity pattern, gathered by the compiled
        :func:`_sparse_rows_in_order` into arrays with a slot per row for the intercept column,
        so that the copy of ``X`` is the only one: the column of ``fill`` is stored in every row
        (:func:`with_constant_column`), or with ``spare_column`` (and no ``fill``) the slots are
        left as room for a column appended later in place (after releases that read the features
        alone). No histograms (``None``); no ``out``."""
        if out is not None:
            raise ValueError("out= is for dense rows; a CSR copy makes its own arrays.")
        rows = _sparse_rows_in_order(X, order, spare_column or fill is not None)
        if max_norm < np.inf:  # a clip to an infinite bound leaves every (finite) row as it is
            clip_rows(rows, max_norm, out=rows)
        rows = rows if fill is None else with_constant_column(rows, fill, in_place=True)
        return rows if magnitude_range is None else (rows, None)

    @staticmethod
    def scaled_gram(X, factors: np.ndarray, overwrite_rows: bool = False, intercept: float | None = None) -> np.ndarray:
        """``S^T S`` for ``S = diag(factors) X`` (dense), without scipy's copies of the rows
        (:func:`skdpsco.rows.sparse_scaled_gram`); with ``intercept``, of the rows ``[X, intercept]``."""
        return _fused.sparse_scaled_gram(X, factors, intercept)

    @staticmethod
    def weighted_gram(X, weights: np.ndarray) -> np.ndarray:
        """``X^T diag(weights) X`` (dense)."""
        return (scale_sparse_rows(X, weights).T @ X).toarray()

    @staticmethod
    def kernel_reads(X) -> bool:
        """Whether the compiled SGD loop reads ``X`` in place
        (:func:`skdpsco.solvers._kernel.run_sparse_steps`): a float64 CSR matrix or array."""
        return X.format == "csr" and X.dtype == np.float64

    @staticmethod
    def kernel_arrays(X) -> tuple:
        """``(data, indices, indptr)`` of ``X`` for the compiled SGD loop, read in place (its index
        arrays as they are when they share one integer type, int32 or int64, else both as int64),
        once checked to describe ``X.shape`` (the kernel writes where they point)."""
        data, indices, indptr = (np.ascontiguousarray(array) for array in (X.data, X.indices, X.indptr))
        if not (indices.dtype == indptr.dtype and indices.dtype in (np.int32, np.int64)):
            indices, indptr = indices.astype(np.int64), indptr.astype(np.int64)
        stored = int(indptr[-1]) if indptr.size else 0
        if not (
            indptr.shape == (X.shape[0] + 1,)
            and indptr[0] == 0
            and stored <= min(indices.size, data.size)
            and np.all(np.diff(indptr) >= 0)
            and (stored == 0 or 0 <= indices[:stored].min() <= indices[:stored].max() < X.shape[1])
        ):
            raise ValueError(
                f"X is not a valid CSR matrix of shape {X.shape}: its indptr and indices arrays disagree with it."
            )
        return data, indices, indptr


CSR = CsrRows()
"""The CSR layout (:func:`skdpsco.rows.layout_of`)."""
