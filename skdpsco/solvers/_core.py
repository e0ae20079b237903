"""The projected noisy SGD core shared by every solver.

One loop, used by all algorithms: consecutive disjoint batches read from an iterator of row
blocks, averaged gradient, optional Gaussian noise on the gradient, Euclidean projection onto
the ball of public radius, last iterate returned (``feldman.md`` §A1 pseudocode, pitfalls D1,
D4, D5). Solvers differ only in the schedule they feed it.

The loop has two implementations with one meaning. :func:`reference_projected_noisy_sgd` is the
numpy reference: any gradient function, any iterable of row blocks. The compiled kernel
(:mod:`skdpsco.solvers._kernel`, Cython) runs the common case at the speed of one pass over the
data: a :func:`margin_gradient` of a loss with a C derivative (:func:`kernel_loss`), row blocks
from :func:`iter_batches` over a C-contiguous float64 ``X`` or a float64 CSR matrix (whose steps
read only the stored entries of their rows), and a parameter vector (not a multiclass matrix).
:func:`projected_noisy_sgd` picks between them by that explicit rule (:func:`uses_kernel`). In both,
every noise draw comes from :func:`~skdpsco._noise.gaussian_noise` with the same
generator in the same order (the kernel receives the rows drawn for a chunk of steps), so the two
produce the same iterates for the same seed (``tests/test_kernel.py``) and the privacy audits,
which weaken :func:`~skdpsco._noise.gaussian_noise`, exercise the code path that production runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from scipy import sparse

from .. import _noise
from ..losses import HingeLoss, HuberLoss, LogisticLoss, PowerLoss, QHingeLoss, SquaredHingeLoss, WeightedLoss
from ..rows import balanced_block_rows, fused_layout, map_blocks
from ..smoothing import GaussianSmoothedLoss
from . import _kernel

GradientFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class SolverResult:
    """What every solver returns (``DESIGN.md``, "What a solver returns").

    Attributes
    ----------
    coef : ndarray
        Released parameters (augmented with the intercept column when the estimator fits one).
    dp_event : dp_accounting.DpEvent
        Describes the whole release, in the convention of :mod:`skdpsco.accounting`.
    n_gradients : int
        Per-example gradient evaluations (the papers' complexity measure).
    info : dict
        Public diagnostics only: functions of the schedule, never of the data.
    """

    coef: np.ndarray
    dp_event: object
    n_gradients: int
    info: dict = field(default_factory=dict)


def project_to_ball(w: np.ndarray, radius: float | None) -> np.ndarray:
    """Euclidean (Frobenius for matrices) projection onto ``{||w|| <= radius}``; 1-Lipschitz."""
    if radius is None:
        return w
    norm = np.linalg.norm(w)
    return w if norm <= radius else w * (radius / norm)


def clip_rows(X: np.ndarray, max_norm: float, out: np.ndarray | None = None) -> np.ndarray:
    """Scale every row to ``l2`` norm at most ``max_norm``: a per-row map, so it costs no privacy
    and enforces the public bound (``feldman.md`` pitfall D3).

    Written into ``out`` (same shape as ``X``, e.g. a column block of a larger array) when given,
    else into a new array; the norms are computed without a temporary of the size of ``X``. A row
    whose sum of squares overflows (or is subnormal) is clipped without forming its norm
    (:func:`scaled_row_norms`): a finite row is clipped like any other however long it is, and
    only a row with a NaN or an infinite entry is an error (:func:`_refuse_non_finite`).
    Otherwise a finite row longer than the float range would make ``fit`` raise on one dataset
    and not on its neighbour, a release no mechanism accounts for (``DESIGN.md``, "Privacy
    model"). The compiled :func:`skdpsco.solvers._kernel.gather_clipped_rows` is the same map.

    A CSR ``X`` keeps its sparsity pattern: its stored entries are scaled, in place when ``out``
    is ``X`` (the only ``out`` a sparse ``X`` takes), else on a copy.
    """
    if is_dask(X):  # composed with the rows' earlier maps (:func:`skdpsco._dask.map_rows`)
        return _dask().map_rows(X, clip_rows, max_norm)
    if sparse.issparse(X):
        return _clip_sparse_rows(X, max_norm, in_place=out is X)
    scale, scaled_rows, exponents, factors = _clip_factors(X, max_norm)
    out = np.multiply(X, scale[:, None], out=out)
    if scaled_rows.size:
        out[scaled_rows] = _clipped_from_scaled(out[scaled_rows], exponents[:, None], factors[:, None])
    return out


def _clip_factors(X, max_norm: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(scale, scaled_rows, exponents, factors)`` of :func:`clip_rows` for the rows of ``X`` (dense
    or CSR): every row times ``scale``, then the rows ``scaled_rows`` (whose sums of squares
    overflowed or lost their precision, ``scale`` 1 there) mapped by :func:`_clipped_from_scaled`
    with their ``exponents`` and ``factors``."""
    squares = _row_squares(X)
    # no warning (it would tell that some row is that long or short); inf / inf is a row measured
    # by its scaled norm below, max_norm / tiny an overflow to the factor inf of a zero row
    with np.errstate(over="ignore", invalid="ignore"):
        scale = np.minimum(1.0, max_norm / np.maximum(np.sqrt(squares), np.finfo(float).tiny))
    # rows measured by their scaled norms: left as they are by the product, then clipped
    scaled_rows = np.flatnonzero(~_plain_squares(squares))
    scale[scaled_rows] = 1.0
    exponents, norms = scaled_row_norms(X[scaled_rows])
    with np.errstate(over="ignore", under="ignore"):  # max_norm 2**-e: inf and 0 compare as they should
        long = norms > np.ldexp(max_norm, -exponents)
    return scale, scaled_rows[long], exponents[long], max_norm / norms[long]


def _clip_sparse_rows(X, max_norm: float, in_place: bool):
    """:func:`clip_rows` of a CSR ``X`` (in place, or on a copy), a block of
    :func:`_sparse_row_blocks` at a time: its temporaries are a few vectors of a block's rows and
    entries, not of ``X``'s (each row's clip depends on that row alone)."""
    out = X if in_place else X.copy()
    for rows, entries in _sparse_row_blocks(out):
        block = csr_row_block(out, rows)
        scale, scaled_rows, exponents, factors = _clip_factors(block, max_norm)
        out.data[entries] *= np.repeat(scale, np.diff(block.indptr))
        for row, exponent, factor in zip(scaled_rows + rows.start, exponents, factors):  # rare: not in a hot loop
            stored = slice(out.indptr[row], out.indptr[row + 1])
            out.data[stored] = _clipped_from_scaled(out.data[stored], exponent, factor)
    return out


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


def _clipped_from_scaled(rows: np.ndarray, exponents, factors) -> np.ndarray:
    """``(rows 2**-e) (max_norm / r)``, the clipped rows of :func:`clip_rows` from their scaled
    norms ``r`` (``factors = max_norm / r``): a factor in ``[-1, 1]`` times one near ``max_norm``,
    neither of which overflows, where ``rows * (max_norm / ||rows||)`` would divide by infinity."""
    with np.errstate(under="ignore"):
        return np.ldexp(rows, -exponents) * factors


def canonical_csr(X):
    """A scipy sparse matrix (CSR or CSC) as a CSR matrix in canonical format: duplicate entries
    summed, indices sorted; the caller's matrix is never modified. Checked to be finite here,
    before anything is charged (:func:`_refuse_non_finite`).

    The canonical format is a privacy requirement, not a convenience: the per-feature histograms
    of the feature scaling count one entry per stored value, and a row that stored one cell twice
    would add two counts to its feature's histogram, beyond the sensitivity they are calibrated
    to (:func:`skdpsco.linear_model._scaling.magnitude_sensitivity`)."""
    X = sparse.csr_matrix(X)  # CSC converted; a CSR input is not copied
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    if not np.isfinite(X.data).all():
        _refuse_non_finite()
    return X


def scale_sparse_rows(X, factors: np.ndarray, in_place: bool = False):
    """``diag(factors) @ X`` for a CSR ``X``, same sparsity pattern: in place (``in_place``) or
    on a copy. The sparse form of the per-row products of :func:`clip_rows`."""
    out = X if in_place else X.copy()
    for rows, entries in _sparse_row_blocks(out):
        out.data[entries] *= np.repeat(factors[rows], np.diff(out.indptr[rows.start:rows.stop + 1]))
    return out


def with_constant_column(X, value: float, in_place: bool = False):
    """The CSR matrix ``[X, value]``: one more column, ``value`` in every row (the intercept column
    of a sparse fit), built from ``X``'s arrays in one pass; for a Dask array, the lazy map of its
    blocks that appends the column.

    With ``in_place``, when ``X``'s ``data`` and ``indices`` are the first entries of arrays with
    room for one more entry per row (as :func:`clipped_rows_in_order` leaves them with
    ``spare_column``), the new matrix is written in that room (:func:`_kernel.append_column_in_place`:
    the same arrays, no second copy of the rows) and ``X`` is invalid afterwards; without the room
    it is built in new arrays as without ``in_place``."""
    if is_dask(X):
        return _dask().with_constant_column(X, value)
    n_rows, n_columns = X.shape
    if in_place and _has_room_for_column(X):
        data, indices, indptr = X.data.base, X.indices.base, X.indptr
        _kernel.append_column_in_place(data, indices, indptr, float(value), n_columns)
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
    compiled :func:`_kernel.gather_sparse_rows` (one pass, no temporary of the size of ``X``; rows
    with a NaN or an infinite entry are an error). With ``spare_column`` its ``data`` and
    ``indices`` are the first entries of arrays with one more entry per row, the room that
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
    if _kernel.gather_sparse_rows(np.ascontiguousarray(X.data, dtype=np.float64), X.indices.astype(source_type, copy=False),
                                  X.indptr.astype(source_type, copy=False),
                                  np.ascontiguousarray(order, dtype=np.intp), data, indices, indptr):
        _refuse_non_finite()
    return sparse.csr_matrix((data[:entries], indices[:entries], indptr), shape=(n_rows, X.shape[1]))


def row_norms(X: np.ndarray) -> np.ndarray:
    """The ``l2`` norm of every row, without a temporary of the size of ``X``. A row whose sum of
    squares overflows (or is subnormal) gets its norm as ``2**e r`` (:func:`scaled_row_norms`),
    ``inf`` only when the norm itself exceeds the float range (its binary order of magnitude is
    then above 1023: it lands in the top bin of any histogram of orders, :mod:`skdpsco.linear_model._bounds`);
    a row with a NaN or an infinite entry is an error (:func:`_refuse_non_finite`). ``X`` may be a
    CSR matrix."""
    if is_dask(X):
        return _dask().map_rows(X, row_norms, n_columns=0)
    squares = _row_squares(X)
    scaled_rows = np.flatnonzero(~_plain_squares(squares))
    norms = np.sqrt(squares, out=squares)  # in place: one vector of the rows, not two
    if scaled_rows.size:
        exponents, scaled = scaled_row_norms(X[scaled_rows])
        with np.errstate(over="ignore"):  # no warning: it would tell that some row is that long
            norms[scaled_rows] = np.ldexp(scaled, exponents)
    return norms


SQUARES_LOW = 2.0**-900
"""The smallest sum of squares from which a row's norm is read as its square root: the squares
that underflow (each below ``2**-1022``) then change it by a relative ``d 2**-122`` at most. The
compiled kernel's ``_SQUARES_LOW``."""


def _plain_squares(squares: np.ndarray) -> np.ndarray:
    """Which rows' sums of squares give their norms as square roots: those in ``[SQUARES_LOW,
    float max]`` (false for NaN). The others overflowed, or lost their precision among the
    subnormals (a zero row too, measured exactly by :func:`scaled_row_norms`)."""
    return (squares >= SQUARES_LOW) & (squares <= np.finfo(float).max)


def _row_squares(X) -> np.ndarray:
    """``sum_j x_ij**2`` of every row (an overflow gives ``inf``, silently: a warning would tell
    that some row is that long), of a dense ``X`` or, from its stored entries a block of
    :data:`SPARSE_ROW_BLOCK` rows at a time, of a CSR ``X``."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if not sparse.issparse(X):
            return np.einsum("ij,ij->i", X, X)
        squares = np.zeros(X.shape[0])
        for rows, entries in _sparse_row_blocks(X):
            values = X.data[entries]
            starts = X.indptr[rows.start:rows.stop] - entries.start
            stored = np.diff(X.indptr[rows.start:rows.stop + 1]) > 0
            if values.size:
                squares[rows][stored] = np.add.reduceat(values * values, starts[stored])
        return squares


def scaled_row_norms(X) -> tuple[np.ndarray, np.ndarray]:
    """``(e, r)``: for every row of ``X`` (dense or CSR), ``e`` the binary exponent of its largest
    ``|entry|`` (``np.frexp``; 0 for a zero row) and ``r = ||x 2**-e||`` in ``[1/2, sqrt(d))``
    (0 for a zero row), so that ``||x|| = 2**e r``, known even where it exceeds the float range.
    ``x 2**-e`` is exact (``np.ldexp``), no square overflows and none of a tiny row's is
    subnormal. The binary order of magnitude of the norm is ``e + log2 r``. A row with a NaN or an
    infinite entry is an error (:func:`_refuse_non_finite`). The reference of the compiled
    kernel's ``_scaled_norm``."""
    values = X.data if sparse.issparse(X) else X
    if not np.isfinite(values).all():
        _refuse_non_finite()
    if sparse.issparse(X):
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))  # the row of every stored entry
        largest = np.zeros(X.shape[0])
        np.maximum.at(largest, rows, np.abs(values))
        exponents = np.frexp(largest)[1]
        with np.errstate(under="ignore"):
            scaled = np.ldexp(values, -exponents[rows])
        return exponents, np.sqrt(np.bincount(rows, weights=scaled * scaled, minlength=X.shape[0]))
    exponents = np.frexp(np.abs(X).max(axis=1, initial=0.0))[1]
    with np.errstate(under="ignore"):
        scaled = np.ldexp(X, -exponents[:, None])
        return exponents, np.sqrt(np.einsum("ij,ij->i", scaled, scaled))


SPARSE_ROW_BLOCK = 16384
"""Rows per block of the per-row operations on CSR matrices (bounds their temporaries)."""

SPARSE_BLOCK_ENTRIES = 16384
"""Stored entries per block of the per-row operations on CSR matrices, where fewer rows than
:data:`SPARSE_ROW_BLOCK` hold them (at least one row a block): their temporaries, a few arrays of
a block's entries, stay at 128 KiB each however many entries a row stores (a few hundredths of
``X`` at ``10^5`` rows of 6 entries; half a MiB each, at 65536, made 0.07 ``X.nbytes`` apiece)."""


def _sparse_row_blocks(X):
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


def _refuse_non_finite():
    """The input check's error. It says no more than scikit-learn's: not how many rows, nor which
    (an error message leaves ``fit`` like a release, and no mechanism accounts for it)."""
    raise ValueError(
        "Input X contains NaN or infinity. Remove those rows or impute the values (e.g. "
        "sklearn.impute.SimpleImputer) before fitting."
    )


ROW_BLOCK = 4096
"""Rows per block of the numpy reference of :func:`clipped_rows_in_order` (bounds its temporary)."""

def clipped_rows_in_order(X: np.ndarray, order: np.ndarray, max_norm: float, fill: float | None = None,
                          magnitude_range: int | None = None, spare_column: bool = False,
                          out: np.ndarray | None = None):
    """The rows ``X[order]`` clipped to ``l2`` norm at most ``max_norm`` (:func:`clip_rows`), with a
    last column of ``fill`` when given (the intercept column), in one new array.

    The estimators call it once per fit with a uniformly random ``order`` drawn before the rows
    are read: the copy that clipping needs anyway (peak memory one copy of ``X``) is made in the
    order the solvers read the rows, so they stream memory instead of jumping (``X[order]`` is a
    per-row map, it costs no privacy; a data-independent permutation leaves every guarantee as it
    is, pitfall D5). A C-contiguous float64 ``X`` is gathered by the compiled kernel, one pass, in
    blocks of :func:`skdpsco.rows.balanced_block_rows` rows over the threads of
    :func:`skdpsco.rows.map_blocks` (reading rows in a random order is bound by memory latency,
    which threads overlap); any other layout
    by :func:`clip_rows` block by block (the reference; same rows); a CSR ``X`` as a CSR matrix
    of the same sparsity pattern, the column of ``fill`` stored in every row
    (:func:`with_constant_column`), gathered by the compiled :func:`_sparse_rows_in_order` into
    arrays with a slot per row for that column, so that the copy of ``X`` is the only one; with
    ``spare_column`` (and no ``fill``) the slots are left as room for a column appended later in
    place (``with_constant_column(rows, value, in_place=True)``, after releases that read the
    features alone). Rows with a NaN or an infinite entry are an error: the estimators leave
    that check to this pass over ``X``.

    With ``magnitude_range`` ``R`` the result is ``(rows, counts)``: ``counts`` the ``(d, 2 R + 1)``
    histograms of the binary orders of magnitude of the copied rows' entries
    (:func:`skdpsco.rows.magnitude_counts`, as floats), counted by the compiled gather while each
    row is in cache, or ``None`` where the rows take another path (the caller counts them then).
    ``out``: a C-contiguous float64 array of the result's shape to write into (dense ``X`` only).
    """
    order = np.asarray(order)
    if order.ndim != 1 or (order.size and (order.min() < 0 or order.max() >= X.shape[0])):
        raise ValueError(f"order must be a vector of indices into the {X.shape[0]} rows of X.")
    if sparse.issparse(X):  # a CSR matrix: its rows in order, clipped, the same sparsity pattern
        rows = _sparse_rows_in_order(X, order, spare_column or fill is not None)
        if max_norm < np.inf:  # a clip to an infinite bound leaves every (finite) row as it is
            clip_rows(rows, max_norm, out=rows)
        rows = rows if fill is None else with_constant_column(rows, fill, in_place=True)
        return rows if magnitude_range is None else (rows, None)
    n_features = X.shape[1]
    if out is None:
        out = np.empty((order.size, n_features + (fill is not None)))
    elif out.shape != (order.size, n_features + (fill is not None)) or not fused_layout(out):
        raise ValueError(f"out must be a C-contiguous float64 array of shape {(order.size, n_features + (fill is not None))}.")
    if isinstance(X, np.ndarray) and X.dtype == np.float64 and X.flags.c_contiguous:
        order = np.ascontiguousarray(order, dtype=np.intp)  # the kernel reads it as a C array

        width = None if magnitude_range is None else 2 * int(magnitude_range) + 1
        block_rows = balanced_block_rows(order.size)  # the copy and the integer counts do not depend on them

        def gather(start: int) -> tuple:
            block = slice(start, start + block_rows)
            counts = None if width is None else np.zeros((n_features, width), dtype=np.int64)
            non_finite = _kernel.gather_clipped_rows(X, order[block], float(max_norm), out[block],
                                                     0.0 if fill is None else float(fill), counts)
            return non_finite, counts

        parts = map_blocks(gather, order.size, block_rows)
        if sum(non_finite for non_finite, _ in parts):
            _refuse_non_finite()
        if width is None:
            return out
        counts = np.zeros((n_features, width), dtype=np.int64)
        for _, part in parts:  # in the order of the blocks
            counts += part
        return out, counts.astype(float)
    for start in range(0, order.size, ROW_BLOCK):
        block = slice(start, start + ROW_BLOCK)
        clip_rows(X[order[block]], max_norm, out=out[block, :n_features])
    if fill is not None:
        out[:, -1] = fill
    return out if magnitude_range is None else (out, None)


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


def order_and_noise_rng(X: np.ndarray, n_rows: int, rng: np.random.Generator, order: np.ndarray | None):
    """The start of every solver run that reads the rows in an order: refuse rows that are not the
    ``n_rows`` the plan was made for, split ``rng`` into independent children for the order and
    the noise (pitfall D16), and return ``(row_order(n_rows, order_rng, order), noise_rng)``."""
    if X.shape[0] != n_rows:
        raise ValueError(f"The plan is for {n_rows} rows; got {X.shape[0]}.")
    order_rng, noise_rng = rng.spawn(2)
    return row_order(n_rows, order_rng, order), noise_rng


class ArrayRows:
    """In-memory rows read in a fixed order: the row source of an in-memory run.

    A row source is what the one-pass solvers read their rows from: ``n_rows``, and
    :meth:`batches`, consecutive disjoint batches of the rows at positions ``first, first + 1,
    ...`` of the source's reading order, for :func:`projected_noisy_sgd` / :func:`noisy_sgd_steps`.
    Here the order is a permutation of the rows of ``X`` (:func:`row_order`) and the batches are
    one :class:`RowBatches` over ``X`` (read in place by the compiled loop). The other source is
    :class:`skdpsco._dask.RowStream`, the rows of a Dask collection read a block at a time; the
    solvers run the same code on both (:func:`rows_and_noise_rng`).

    ``rows_written``: for rows still being written (the tail of a fit's gather,
    :class:`skdpsco.rows.RowsInProgress`), ``rows_written(stop)`` returns once the rows of ``X``
    before ``stop`` are written; every read here waits for the rows it reads (``None``: all written).
    """

    def __init__(self, X, y: np.ndarray, order: np.ndarray, rows_written=None):
        self.X, self.y, self.order, self.rows_written = X, y, order, rows_written

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
                          rows_written=self.rows_written)


def wait_for_rows(rows_written, rows: np.ndarray) -> None:
    """Return once the rows of index ``rows`` are written (:class:`ArrayRows`); at once when
    ``rows_written`` is ``None``."""
    if rows_written is not None and rows.size:
        rows_written(int(rows.max()) + 1)


def row_source(X, y, n_rows: int, order_rng: np.random.Generator, order=None, rows_written=None):
    """The row source a one-pass solver reads: in-memory rows (:class:`ArrayRows`) in
    ``row_order(n_rows, order_rng, order)``, or the rows of a Dask fit
    (:class:`skdpsco._dask.Rows`, with ``y`` a Dask array) streamed a block at a time
    (:class:`skdpsco._dask.RowStream`) in the block-level order ``order``
    (:class:`skdpsco._dask.StreamOrder`; ``None``: one drawn from ``order_rng``,
    :func:`skdpsco._dask.stream_order`). Refuses rows that are not the ``n_rows`` the plan was
    made for.

    Either order is fixed before any row is read and independent of the data: the guarantee of
    every solver that reads its rows here holds for every such order (``feldman.md`` pitfall D5;
    the solvers that stream Dask rows say why in their docstrings, :data:`skdpsco._dask.ALGORITHMS`).
    ``rows_written``: in-memory rows still being written (:class:`ArrayRows`)."""
    if X.shape[0] != n_rows:
        raise ValueError(f"The plan is for {n_rows} rows; got {X.shape[0]}.")
    if is_dask(X):
        return _dask().RowStream(X, y, order if order is not None else _dask().stream_order(X.chunks[0], order_rng))
    return ArrayRows(X, y, row_order(n_rows, order_rng, order), rows_written)


def rows_and_noise_rng(X, y, n_rows: int, rng: np.random.Generator, order=None, rows_written=None) -> tuple:
    """The start of a one-pass solver run: split ``rng`` into independent children for the order
    and the noise (pitfall D16) and return ``(row_source(X, y, n_rows, order_rng, order,
    rows_written), noise_rng)`` (:func:`row_source`), as :func:`order_and_noise_rng` does for an order."""
    order_rng, noise_rng = rng.spawn(2)
    return row_source(X, y, n_rows, order_rng, order, rows_written), noise_rng


@dataclass(frozen=True)
class RowBatches:
    """Consecutive disjoint row blocks ``X[order[start:start + B_t]]``, each row used once.

    Iterating yields ``(X_batch, y_batch)``, one per entry of ``batch_sizes``: views of ``X`` when
    ``order`` is a run of consecutive rows (the estimators' rows are already shuffled), copies
    otherwise; the compiled loop reads the same rows in place instead (no copy of ``X``).
    ``order=None``: the rows of ``X`` in sequence, with no index array of their number.
    ``intercept``: the rows are ``[X, intercept]``, a CSR ``X`` and a last column of that value it
    does not store (a sparse fit's intercept column), which the compiled loop reads as if stored;
    iterating yields the batches with the column (copies). ``rows_written``: rows still being
    written (:class:`ArrayRows`), each batch's rows waited for before they are read.
    """

    X: np.ndarray
    y: np.ndarray
    order: np.ndarray | None
    batch_sizes: np.ndarray
    cycle: bool = False
    intercept: float | None = None
    rows_written: Callable[[int], None] | None = None

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
                start = 0  # the next pass over the rows (see :func:`full_batches`)
            if self.rows_written is not None:  # the rows of this batch written before they are read
                self.rows_written(first + start + size if in_sequence else int(self.order[start:start + size].max()) + 1)
            if in_sequence and first + start == 0 and size == self.X.shape[0]:
                batch = self.X, self.y  # every row: no slice (a CSR matrix's slice is a copy)
            else:
                rows = slice(first + start, first + start + size) if in_sequence else self.order[start : start + size]
                batch = self.X[rows], self.y[rows]
            yield batch if self.intercept is None else (with_constant_column(batch[0], self.intercept), batch[1])
            start += size


def iter_batches(X: np.ndarray, y: np.ndarray, order: np.ndarray, batch_sizes: Iterable[int]) -> RowBatches:
    """Consecutive disjoint row blocks ``X[order[start:start + B]]``, each row used once."""
    return RowBatches(X, y, np.asarray(order), np.asarray(batch_sizes, dtype=np.int64))


def full_batches(X: np.ndarray, y: np.ndarray, n_steps: int, intercept: float | None = None) -> RowBatches:
    """``n_steps`` batches of all the rows (full-batch gradient descent): passes over ``X``, which
    the compiled kernel reads in place, one fused pass per step; ``intercept``: the value of a
    last column of CSR rows that they do not store (:class:`RowBatches`)."""
    if intercept is not None and not sparse.issparse(X):
        raise ValueError("intercept= is the unstored last column of CSR rows; dense rows store their own.")
    n = X.shape[0]
    return RowBatches(X, y, None, np.full(n_steps, n, dtype=np.int64), cycle=True, intercept=intercept)


def pool_noise(steps: np.ndarray, noise_stds: np.ndarray, every: int) -> np.ndarray:
    """Noise every ``every`` steps carrying the variance of the steps it replaces (last step noisy).

    Returns ``sigma'`` with ``sigma'_b = sqrt(sum_{s in block} eta_s**2 sigma_s**2) / eta_b`` at the
    last step ``b`` of each block of ``every`` consecutive steps, counted back from the last step
    ``T`` (so step ``T`` is noisy and the first block may be shorter), and ``0`` elsewhere. For a
    constant step this is noise every ``k`` steps with ``k`` times the variance. The total noise
    injected, ``sum_t eta_t**2 sigma_t**2``, is unchanged, and so is every SGD utility bound that
    depends on the noise through it (FKT Thm 3.2 / 3.4, ``feldman.md`` §A2).

    Privacy, for algorithms whose guarantee is amplification by iteration (Snowball, PNSGD;
    ``feldman.md`` §0.4) and only for them: the pooled run is a contractive noisy iteration
    (FMTT Def 19) whose noise at step ``s`` has standard deviation ``tau_s = eta_s sigma'_s``,
    ``0`` between block ends. FMTT Thm 22 allows ``tau_s = 0``: take ``a_s = 0`` there, since
    ``R_alpha(point mass, 0) = 0``; the single-difference corollary (FKT Cor 2.14, ``feldman.md``
    §0.4, optimal ``a_s`` proportional to ``tau_s**2``) then gives, for a row of batch ``t``
    shifting step ``t`` by ``s_t = 2 L eta_t / B_t``,

        D_alpha <= alpha s_t**2 / (2 sum_{s >= t} tau_s**2),

    finite because the last step is noisy (the shift is carried forward to the next noisy step,
    ``z_s > 0`` in between, and absorbed by step ``T`` at the latest). Every ``t`` lies in a block
    whose end ``b >= t`` carries the variance of the whole block, so
    ``sum_{s >= t} tau_s**2 >= sum_{s >= t} eta_s**2 sigma_s**2``: the pooled schedule's ``rho``
    is at most that of the per-step schedule, with equality for rows at the start of a block.
    The per-step event (:func:`skdpsco.accounting.amplification_by_iteration_rho`) therefore
    covers the pooled run (``tests/test_kernel.py`` checks it, and audits it).

    Not valid for guarantees that compose per-step Gaussian releases (gradient perturbation with
    averaging, private FTRL): those need every step's noise.
    """
    if not (isinstance(every, (int, np.integer)) and every >= 1):
        raise ValueError(f"every must be an integer >= 1; got {every!r}.")
    steps = np.asarray(steps, dtype=float)
    noise_stds = np.broadcast_to(np.asarray(noise_stds, dtype=float), steps.shape)
    variance = (steps * noise_stds) ** 2
    ends = np.arange(steps.size - 1, -1, -every)[::-1]  # last step of each block, T - 1 included
    block_variance = np.add.reduceat(variance, np.concatenate(([0], ends[:-1] + 1)))
    pooled = np.zeros(steps.size)
    pooled[ends] = np.sqrt(block_variance) / steps[ends]
    return pooled


def projected_noisy_sgd(
    gradient: GradientFn,
    batches: Iterable[tuple[np.ndarray, np.ndarray]],
    steps: np.ndarray,
    noise_stds: np.ndarray,
    w0: np.ndarray,
    radius: float | None,
    rng: np.random.Generator,
    average: bool = False,
) -> np.ndarray:
    """Run ``w <- Pi_K(w - eta_t (g_t + xi_t))`` over the batches and return the last iterate.

    With ``average=True`` return instead the mean of the points at which the gradients were
    taken (``w_0 .. w_{T-1}``, ``feldman.md`` §A6). Averaging is only for algorithms whose
    privacy comes from output perturbation: an amplification-by-iteration guarantee covers the
    last iterate alone (FKT20 §6, ``feldman.md`` §A9), and those solvers never ask for it.

    Runs the compiled kernel when :func:`uses_kernel` says so, else the numpy reference
    :func:`reference_projected_noisy_sgd`; both give the same iterates for the same ``rng``.

    Parameters
    ----------
    gradient : callable
        ``gradient(w, X_batch, y_batch)``: the batch-averaged loss gradient at ``w``.
    batches : iterable of (X_batch, y_batch)
        Consumed in order, one per step; must yield exactly ``len(steps)`` blocks.
    steps, noise_stds : ndarray of shape (T,)
        Step size and standard deviation of the Gaussian noise added to the averaged gradient
        (0 for no noise) at each step.
    w0 : ndarray
        Starting point (inside the ball).
    radius : float or None
        Radius of the domain ball ``K``; ``None`` for ``R^p``.
    rng : numpy.random.Generator
        Source of the noise, independent of the batch order.
    """
    w = np.array(w0, dtype=float)
    total = np.zeros_like(w) if average else None
    noisy_sgd_steps(gradient, batches, steps, noise_stds, w, total, radius, rng)
    return total / len(steps) if average else w


def noisy_sgd_steps(gradient, batches, steps, noise_stds, w, total, radius, rng) -> None:
    """The steps of :func:`projected_noisy_sgd` (same parameters) from the current iterate ``w``,
    updated in place, adding every point at which a gradient is taken to ``total`` (in place;
    ``None`` when no average is wanted).

    For solvers that run a long schedule chunk by chunk in bounded memory (a chunk's rows drawn
    just before it runs, :mod:`skdpsco.solvers.holder`): consecutive calls on consecutive chunks
    give the iterates of one call on the whole schedule. Streamed batches
    (:class:`skdpsco._dask.StreamedBatches`, the rows of a Dask fit) are run that way, one call per
    piece of rows in memory.
    """
    if getattr(batches, "is_streamed", False):  # rows streamed in pieces (:class:`skdpsco._dask.StreamedBatches`)
        for piece, steps_of_piece in batches.pieces():
            noisy_sgd_steps(gradient, piece, steps[steps_of_piece], noise_stds[steps_of_piece], w, total, radius, rng)
            del piece  # its rows are released before the next piece is read
    elif uses_kernel(gradient, batches, w):
        _kernel_noisy_sgd_steps(gradient, batches, steps, noise_stds, w, total, radius, rng)
    else:
        _reference_noisy_sgd_steps(gradient, batches, steps, noise_stds, w, total, radius, rng)


def reference_projected_noisy_sgd(gradient, batches, steps, noise_stds, w0, radius, rng, average=False):
    """The numpy reference of :func:`projected_noisy_sgd` (same parameters): one step at a time."""
    w = np.array(w0, dtype=float)
    total = np.zeros_like(w)
    _reference_noisy_sgd_steps(gradient, batches, steps, noise_stds, w, total, radius, rng)
    return total / len(steps) if average else w


def _reference_noisy_sgd_steps(gradient, batches, steps, noise_stds, w, total, radius, rng) -> None:
    for (X_batch, y_batch), eta, sigma in zip(batches, steps, noise_stds, strict=True):
        if total is not None:
            total += w
        g = gradient(w, X_batch, y_batch)
        if sigma > 0:
            g = g + _noise.release_noise(g, sigma, rng)
        w[...] = project_to_ball(w - eta * g, radius)


KERNEL_CHUNK_STEPS = 4096
"""Steps per call of the compiled kernel: the noise of a chunk is drawn in one
:func:`~skdpsco._noise.gaussian_noise` call (at most ``4096 p`` floats), amortising Python overhead."""

PROGRESS_CHUNK_ROWS = 16384
"""Rows per call of the compiled kernel, at most, on rows still being written
(:class:`RowBatches` ``rows_written``): as the blocks of their gather
(:data:`skdpsco.rows.BLOCK_ROWS`), so that the kernel starts once the first block is written and
each call waits only for the block it reads next."""


def kernel_chunks(sizes: np.ndarray, max_steps: int, max_rows: int | None = None) -> list[slice]:
    """Consecutive slices of the steps of batch sizes ``sizes``, each at most ``max_steps`` steps
    and, with ``max_rows``, at most ``max_rows`` rows (or one step, where a batch alone has more).
    The iterates do not depend on the chunks: each chunk's noise is what its steps would draw one
    by one (:func:`_chunk_noise`)."""
    if max_rows is None:
        return [slice(first, first + max_steps) for first in range(0, sizes.size, max_steps)]
    chunks, first = [], 0
    while first < sizes.size:  # the running sums of one chunk's steps at a time: no array of T entries
        ends = np.cumsum(sizes[first:first + max_steps])
        stop = first + max(1, int(np.searchsorted(ends, max_rows, side="right")))
        chunks.append(slice(first, stop))
        first = stop
    return chunks


def kernel_loss(loss) -> tuple[int, float] | None:
    """``(code, parameter)`` of the C derivative of ``loss`` in :mod:`._kernel`, or None.

    Exact types only: a subclass may change ``derivative``. Multiclass losses have none (the
    reference runs them). A :class:`~skdpsco.losses.WeightedLoss` has its base's: the kernel
    multiplies each row's derivative by its weight (:func:`kernel_targets`), so a weighted fit
    takes the same path whatever the weights' values (a path chosen on their values would make
    the fit's time tell, e.g., whether every weight equals ``max_weight``).
    """
    if type(loss) is WeightedLoss:
        return kernel_loss(loss.base)
    codes = _kernel.LOSS_CODES
    kind = type(loss)
    if kind is LogisticLoss:
        return codes["logistic"], 0.0
    if kind is HingeLoss:
        return codes["hinge"], 0.0
    if kind in (QHingeLoss, SquaredHingeLoss):
        return codes["q_hinge"], loss.q
    if kind is PowerLoss:
        return codes["power"], loss.p
    if kind is HuberLoss:
        return codes["huber"], loss.epsilon
    if kind is GaussianSmoothedLoss:
        base = type(loss.base)
        if base is HingeLoss:
            return codes["smooth_hinge"], loss.width
        if base is PowerLoss:  # p = 1, the only power GaussianSmoothedLoss accepts
            return codes["smooth_absolute"], loss.width
    return None  # e.g. the smoothed pinball loss (two parameters): the numpy reference runs it


def uses_kernel(gradient, batches, w0) -> bool:
    """The dispatch rule of :func:`projected_noisy_sgd`: the compiled kernel runs the loop iff the
    gradient is a :func:`margin_gradient` of a loss with a C derivative (:func:`kernel_loss`), the
    batches come from :func:`iter_batches` over a 2-D C-contiguous float64 ``X`` or a float64 CSR
    matrix ``X`` (:func:`_kernel_reads`), and ``w0`` is a vector with one entry per column of ``X``."""
    if not (isinstance(gradient, MarginGradient) and isinstance(batches, RowBatches)):
        return False
    X = batches.X
    return (
        kernel_loss(gradient.loss) is not None
        and _kernel_reads(X)
        and np.ndim(w0) == 1
        and np.shape(w0)[0] == batches.n_columns
    )


def _kernel_reads(X) -> bool:
    """Whether the compiled kernel reads the rows of ``X`` in place: a 2-D C-contiguous float64
    ndarray (:func:`skdpsco.solvers._kernel.run_steps`) or a float64 CSR matrix or array
    (:func:`skdpsco.solvers._kernel.run_sparse_steps`)."""
    if sparse.issparse(X):
        return X.format == "csr" and X.dtype == np.float64
    return isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64 and X.flags.c_contiguous


def _chunk_noise(rng, stds: np.ndarray, n_params: int) -> np.ndarray:
    """Noise rows for the noisy steps of one chunk: one :func:`~skdpsco._noise.gaussian_noise` call, drawing what
    one call per step would draw, in the same order."""
    if stds.size == 0:
        return np.empty((0, n_params))
    std = stds[0] if np.all(stds == stds[0]) else stds[:, None]
    return np.ascontiguousarray(_noise.gaussian_noise(rng, std, (stds.size, n_params)), dtype=np.float64)


def _kernel_noisy_sgd_steps(gradient, batches, steps, noise_stds, w, total, radius, rng) -> None:
    """:func:`noisy_sgd_steps` on the compiled kernel, chunk by chunk of steps."""
    code, parameter = kernel_loss(gradient.loss)
    # as given (Phased-SGD's are broadcast views of one value): each chunk's made contiguous below,
    # none copied whole (three vectors of T entries, a few hundredths of X at T = n / 2)
    steps, noise_stds = np.asarray(steps, dtype=np.float64), np.asarray(noise_stds, dtype=np.float64)
    sizes = np.asarray(batches.batch_sizes)
    # the kernels read an empty order as the rows in sequence
    order = np.empty(0, dtype=np.intp) if batches.order is None else np.ascontiguousarray(batches.order, dtype=np.intp)
    if not (sizes.ndim == 1 and sizes.shape == steps.shape == noise_stds.shape):
        raise ValueError(f"Got {sizes.size} batches for {steps.size} steps and {noise_stds.size} noise levels.")
    if np.any(sizes < 1) or (sizes.max(initial=0) if batches.cycle else sizes.sum()) > batches.n_order:
        raise ValueError(
            f"Batch sizes must be >= 1 and {'each' if batches.cycle else 'sum to'} at most the "
            f"{batches.n_order} rows in order."
        )
    if order.size and (order.min() < 0 or order.max() >= batches.X.shape[0]):
        raise ValueError(f"order must index the {batches.X.shape[0]} rows of X.")
    average = total is not None
    total = total if average else np.empty_like(w)
    if not (w.dtype == total.dtype == np.float64 and w.flags.c_contiguous and total.flags.c_contiguous):
        raise ValueError("w and total must be C-contiguous float64 vectors.")
    y, weights = kernel_targets(batches.y)
    run, work = _kernel_of_rows(batches.X, w, sizes, batches.intercept)
    start = 0
    in_progress = batches.rows_written is not None and not batches.cycle
    chunks = kernel_chunks(sizes, KERNEL_CHUNK_STEPS, PROGRESS_CHUNK_ROWS if in_progress else None)
    for chunk, noise in zip(chunks, _noise_of_chunks(rng, noise_stds, chunks, w.size)):
        if in_progress:  # the chunk's rows written before the kernel reads them
            stop = start + int(sizes[chunk].sum())
            batches.rows_written(int(order[start:stop].max()) + 1 if order.size else stop)
        elif batches.rows_written is not None:
            batches.rows_written(batches.X.shape[0])
        start = run(
            y, weights, order, start, np.ascontiguousarray(sizes[chunk], dtype=np.intp),
            np.ascontiguousarray(steps[chunk]), noise, (noise_stds[chunk] > 0).view(np.uint8),
            w, total, work, code, parameter, gradient.l2_penalty, 0.0 if radius is None else float(radius),
            average, batches.cycle,
        )


def kernel_targets(targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(y, weights)`` for the compiled loop: the labels as float64, and the relative weights of
    :func:`~skdpsco.losses.weighted_targets` (a structured array with fields ``'y'`` and
    ``'weight'``), or an empty array for plain targets (an unweighted loss)."""
    if targets.dtype.names is None:
        return np.ascontiguousarray(targets, dtype=np.float64), np.empty(0)
    return (np.ascontiguousarray(targets["y"], dtype=np.float64),
            np.ascontiguousarray(targets["weight"], dtype=np.float64))


def _kernel_of_rows(X, w: np.ndarray, sizes: np.ndarray, intercept: float | None = None):
    """``(run, work)``: the compiled loop bound to the rows of ``X`` (:func:`_kernel_reads`) and its
    work buffer. A dense ``X``: :func:`~skdpsco.solvers._kernel.run_steps`, a gradient buffer of
    the size of ``w``. A CSR ``X``: :func:`~skdpsco.solvers._kernel.run_sparse_steps` on its
    arrays, read in place (its index arrays as they are when they share one integer type, int32
    or int64, else both as int64) once checked to describe ``X.shape`` (the kernel writes where
    they point), a buffer for a gradient and the derivatives of a block of rows
    (:func:`~skdpsco.solvers._kernel.sparse_work_size`); ``intercept``, the value of a last column
    of ``X`` that it does not store, read by the kernel as if stored (``fill``)."""
    if not sparse.issparse(X):
        return partial(_kernel.run_steps, X), np.empty_like(w)
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
    fill = {} if intercept is None else {"fill": float(intercept), "with_fill": True}
    return (partial(_kernel.run_sparse_steps, data, indices, indptr, **fill),
            np.empty(_kernel.sparse_work_size(w.size, int(sizes.max(initial=0)))))


def _noise_of_chunks(rng, noise_stds: np.ndarray, chunks: list, n_params: int) -> Iterator[np.ndarray]:
    """The noise rows of each chunk of steps (:func:`_chunk_noise`), in order. With several chunks,
    a second thread draws the next chunk's noise while the caller runs this one (numpy's generator
    and the kernel release the GIL); the draws, and their order, are those of one thread. A
    schedule without noise (Phased-SGD's steps) draws nothing, and starts no thread."""

    def draw(chunk: slice) -> np.ndarray:
        stds = noise_stds[chunk]
        return _chunk_noise(rng, stds[stds > 0], n_params)

    if len(chunks) <= 1 or not np.any(noise_stds > 0):
        yield from map(draw, chunks)
        return
    with ThreadPoolExecutor(max_workers=1) as drawer:
        pending = drawer.submit(draw, chunks[0])
        for following in [*chunks[1:], None]:
            noise = pending.result()
            if following is not None:
                pending = drawer.submit(draw, following)
            yield noise


@dataclass(frozen=True)
class MarginGradient:
    """Batch-averaged gradient in ``w`` of ``loss(<w, x>, y) + l2_penalty ||w||**2 / 2``.

    ``w`` has shape (p,) for binary and regression losses and (K, p) for multiclass losses; the
    gradient of a row is ``loss.derivative(z, y) x`` (outer product for multiclass). A callable
    ``gradient(w, X, y)``; its fields tell :func:`projected_noisy_sgd` which compiled derivative
    computes the same thing.
    """

    loss: object
    l2_penalty: float = 0.0

    def __call__(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        if is_dask(X):  # one pass of per-block sums (:mod:`skdpsco._dask`)
            g = _dask().block_sum(summed_loss_gradient, X, y, extra=(self.loss, w)) / X.shape[0]
        else:
            g = summed_loss_gradient(X, y, self.loss, w) / X.shape[0]
        return g + self.l2_penalty * w if self.l2_penalty else g


def summed_loss_gradient(X, y: np.ndarray, loss, w: np.ndarray) -> np.ndarray:
    """``sum_i loss.derivative(<w, x_i>, y_i) x_i`` over the rows of ``X`` (dense or CSR)."""
    return loss.derivative(X @ w.T, y).T @ X


def is_dask(X) -> bool:
    """Whether ``X`` is a Dask collection or the lazy rows of a Dask fit (:class:`skdpsco._dask.Rows`):
    duck-typed, so that the core never imports Dask."""
    return hasattr(X, "__dask_graph__") or getattr(X, "is_lazy_rows", False)


_DASK = {}
"""``{"module": skdpsco._dask}`` once that module is imported: it registers itself
(:func:`register_dask`), since it imports this module and is imported only with Dask input."""


def register_dask(module) -> None:
    """Record ``module`` (:mod:`skdpsco._dask`, which calls this when imported) as :func:`_dask`."""
    _DASK["module"] = module


def _dask():
    """:mod:`skdpsco._dask`, for a function with a Dask branch that received a Dask collection.

    The core does not import it (it imports the core): it registered itself on import
    (:func:`register_dask`), which ``fit`` does when it receives a Dask collection, before any
    row reaches the core (``_validated_dask`` of :mod:`skdpsco.linear_model._base`).
    """
    if "module" not in _DASK:
        raise RuntimeError("Dask rows reach the solvers through fit: import skdpsco._dask before passing a "
                           "Dask collection to skdpsco.solvers directly.")
    return _DASK["module"]


def margin_gradient(loss, l2_penalty: float = 0.0) -> MarginGradient:
    """Batch-averaged gradient of a margin loss plus a ridge term (see :class:`MarginGradient`)."""
    return MarginGradient(loss, float(l2_penalty))
