"""The passes over a fit's in-memory rows that the releases before the solver make, fused and blocked.

A fit copies its rows once, clipped, in a random order, into one C-contiguous float64 array (the
features first, then an intercept column when there is one): the solvers read that copy. The
releases that set the scale of the features read it too, in the fewest passes their dependence
allows, each one compiled kernel over blocks of :data:`~skdpsco.rows._threads.BLOCK_ROWS`
consecutive rows (:mod:`skdpsco.rows._blocks`) run on the threads of :mod:`skdpsco.rows._threads`:

1. the histograms of the features' binary orders of magnitude (:func:`magnitude_counts`);
2. released divisors, then in place: the division, the clip to the public bound, and the column
   sums the mean is released from (:func:`divide_clip_and_sum`);
3. released mean, then the sums of the squares of the centred, clipped rows
   (:func:`centred_square_sums`), which the rows are only read for;
4. released scale, then in place: the standardisation and its clip (:func:`standardise`).

Steps 2 and 3 read only the first rows of the fit's random order, as many as the moments are
computed over (:attr:`skdpsco.linear_model._scaling.ScalingPlan.moment_rows`); the rest are divided,
clipped and standardised in step 4's one pass (:func:`divide_clip_and_standardise`), or as they are
gathered (:func:`gather_standardised`).

The Newton method's passes read the standardised rows through :func:`loss_derivatives`: each
row's margin, loss derivative and Hessian factor in one read of the row.

No pass allocates more than a block's worth of memory per thread; the sums of the blocks are
added in the order of the blocks, so a result does not depend on the number of threads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import _blocks, _threads
from ._threads import balanced_block_rows, imap_blocks, map_blocks, one_blas_thread_each

def fused_layout(rows) -> bool:
    """Whether ``rows`` is what the kernels read: a C-contiguous 2-D float64 numpy array."""
    return isinstance(rows, np.ndarray) and rows.ndim == 2 and rows.dtype == np.float64 and rows.flags.c_contiguous



def _over_blocks(kernel, rows: np.ndarray, *args, balanced: bool = False) -> list:
    """``[kernel(block, *args) for block in blocks of rows]``, in the order of the blocks, over
    :data:`~skdpsco.rows._threads.THREADS` threads; ``balanced``: blocks of :func:`balanced_block_rows` (for a pass whose
    result does not depend on them), else of :data:`~skdpsco.rows._threads.BLOCK_ROWS`."""
    block_rows = balanced_block_rows(rows.shape[0]) if balanced else _threads.BLOCK_ROWS
    return map_blocks(lambda start: kernel(rows[start:start + block_rows], *args), rows.shape[0], block_rows)


def _block_sum(results: list, shape) -> np.ndarray:
    total = np.zeros(shape)
    for part in results:
        total += part
    return total


def magnitude_counts(rows: np.ndarray, n_features: int, magnitude_range: int) -> np.ndarray:
    """The ``(n_features, 2 R + 1)`` histograms (as floats) of the binary orders of magnitude of
    the non-zero entries of the first ``n_features`` columns, orders clamped to ``[-R, R]``: the
    integers of :func:`skdpsco.linear_model._scaling.magnitude_counts`, in one pass."""
    parts = _over_blocks(_blocks.magnitude_counts, rows, int(n_features), int(magnitude_range), balanced=True)
    counts = np.zeros((n_features, 2 * magnitude_range + 1), dtype=np.int64)
    for part in parts:
        counts += part
    return counts.astype(float)


def divide_clip_and_sum(rows: np.ndarray, n_features: int, scales: np.ndarray, bound: float) -> np.ndarray:
    """In place: the first ``n_features`` columns divided by the powers of two ``scales`` (without
    overflow, :func:`skdpsco.rows._dense.divide_by_powers_of_two`), each row clipped to
    ``l2`` norm ``bound``; returns the column sums of the result. One pass."""
    parts = _over_blocks(_blocks.divide_clip_and_sum, rows, int(n_features), *powers_of_two(scales), float(bound))
    return _block_sum(parts, n_features)


def powers_of_two(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(e, 2.0**-e)`` for the powers of two ``scales = 2**e``: the divisors of every division by
    powers of two (the fused kernels, the dense and CSR references, the Dask blocks' compiled map),
    a product by ``2.0**-e`` being exact."""
    exponents = np.rint(np.log2(scales)).astype(np.int64)
    return exponents, np.ldexp(1.0, -exponents)


def centred_square_sums(rows: np.ndarray, n_features: int, mean: np.ndarray, clip: float) -> np.ndarray:
    """``sum_i clip_C(x_i - mean)**2`` per feature over the first ``n_features`` columns
    (:func:`skdpsco.rows._dense.centred_square_sums`). One pass, the rows only read."""
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    parts = _over_blocks(_blocks.centred_square_sums, rows, int(n_features), mean, float(clip))
    return _block_sum(parts, n_features)


def standardise(rows: np.ndarray, n_features: int, mean: np.ndarray, scale: np.ndarray, clip_norm: float) -> None:
    """In place: ``z = (x - mean) / scale`` over the first ``n_features`` columns, each row then
    divided by ``max(||z||, C)`` (:func:`skdpsco.rows._dense.standardise_rows`). One pass."""
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    _over_blocks(_blocks.standardise, rows, int(n_features), mean, scale, float(clip_norm), balanced=True)


def divide_clip_and_standardise(rows: np.ndarray, n_features: int, scales: np.ndarray, bound: float,
                                mean: np.ndarray, scale: np.ndarray, clip_norm: float) -> None:
    """In place: :func:`divide_clip_and_sum` then :func:`standardise`, in one pass (each row is
    divided, clipped and standardised while it is in cache; the same values as the two passes)."""
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    _over_blocks(_blocks.divide_clip_and_standardise, rows, int(n_features), *powers_of_two(scales), float(bound),
                 mean, scale, float(clip_norm), balanced=True)


def gather_standardised(X: np.ndarray, order: np.ndarray, out: np.ndarray, scales: np.ndarray, bound: float,
                        mean: np.ndarray, scale: np.ndarray, clip_norm: float, fill: float | None,
                        in_background: bool = False) -> _threads.RowsInProgress | None:
    """``out`` = the rows ``X[order]`` (C-contiguous float64, finite) divided by the powers of two
    ``scales``, clipped to ``bound`` and standardised, as :func:`divide_clip_and_standardise` leaves
    them, with a last column of ``fill`` when given: one read of each row of ``X`` in ``order``
    and one write of ``out``, in blocks of the order over :data:`~skdpsco.rows._threads.THREADS` threads.

    ``in_background`` (inside :func:`~skdpsco.rows._threads.shared_threads`): the blocks are left to the threads and
    their progress is returned (:class:`~skdpsco.rows._threads.RowsInProgress`; ``None`` when they were written here);
    ``out`` must not be read before :meth:`~skdpsco.rows._threads.RowsInProgress.wait` says its rows are written."""
    order = np.ascontiguousarray(order, dtype=np.intp)
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    exponents, factors = powers_of_two(scales)
    block_rows = balanced_block_rows(order.size)

    def run(start: int) -> None:
        block = slice(start, start + block_rows)
        _blocks.gather_standardised(X, order[block], out[block], exponents, factors, float(bound), mean, scale,
                                    float(clip_norm), 0.0 if fill is None else float(fill))

    if in_background:
        return _threads.submit_blocks(run, order.size, block_rows)
    map_blocks(run, order.size, block_rows)
    return None


def count_non_finite(X: np.ndarray) -> int:
    """The number of NaN or infinite entries of a C-contiguous float64 ``X``: one read, in blocks
    over :data:`~skdpsco.rows._threads.THREADS` threads."""
    return start_count_non_finite(X)()


def start_count_non_finite(X: np.ndarray) -> Callable[[], int]:
    """:func:`count_non_finite` started on the threads of :func:`~skdpsco.rows._threads.shared_threads` without waiting (run
    here outside one): the returned function waits for the count and returns it. A fit starts it
    before work that does not read ``X`` (drawing its order, copying the rows the scaling reads),
    so that the check overlaps that work, and reads it before anything is charged."""
    block_rows = balanced_block_rows(X.shape[0])

    def count(start: int) -> int:
        return _blocks.count_non_finite(X[start:start + block_rows])

    pool = _threads.current_pool()
    if pool is None:
        total = int(sum(map_blocks(count, X.shape[0], block_rows)))
        return lambda: total
    counts = [pool.submit(count, start) for start in range(0, X.shape[0], block_rows)]
    return lambda: int(sum(part.result() for part in counts))


def sparse_scaled_gram(rows, factors: np.ndarray, intercept: float | None = None) -> np.ndarray:
    """``S^T S`` (dense, ``(p, p)``) for ``S = diag(factors) rows``, ``rows`` a CSR matrix (its
    ``data``, ``indices`` and ``indptr`` read in place): the value, bit for bit, of scipy's
    ``(S.T @ S).toarray()`` (:func:`skdpsco.rows._blocks.sparse_scaled_gram`), with no temporary
    beyond the result (scipy's product copies, transposes and converts the rows). With
    ``intercept``, the rows ``[rows, intercept]``: a last column of that value, not stored."""
    indices = rows.indices
    indptr = rows.indptr if rows.indptr.dtype == indices.dtype else rows.indptr.astype(indices.dtype)
    return _blocks.sparse_scaled_gram(np.ascontiguousarray(rows.data, dtype=np.float64), indices, indptr,
                                      np.ascontiguousarray(factors, dtype=np.float64),
                                      int(rows.shape[1]) + (intercept is not None),
                                      0.0 if intercept is None else float(intercept), intercept is not None)


LOGISTIC_LOSS = _blocks.LOGISTIC_LOSS
SQUARED_LOSS = _blocks.SQUARED_LOSS

SCALED_BLOCK_BYTES = 2**18
"""Bytes of the buffer of scaled rows each thread of :func:`loss_derivatives` fills before its
symmetric rank-``k`` product: 256 KiB, or ``p`` rows where that is more (a rank-``k`` update of
the ``p x p`` sum moves its ``p**2`` entries: ``k >= p`` keeps it compute-bound). The buffers of
the threads add a few hundredths of ``X`` to a fit's peak memory (``n = 10^5``, ``p = 21``: 1.20
``X.nbytes`` in all; ``n = 5 10^4``, ``p = 1001``: 1.19)."""


def loss_derivatives(rows: np.ndarray, targets: np.ndarray, w: np.ndarray, loss: int, weights: np.ndarray | None,
                     hessian: bool) -> tuple:
    """``(gradient, hessian)``: the sums over the rows of ``c_i phi'(<x_i, w>, y_i) x_i`` and, with
    ``hessian``, of ``c_i phi''(<x_i, w>, y_i) x_i x_i^T`` (else ``None``), for the binary loss
    ``loss`` (:data:`LOGISTIC_LOSS` or :data:`SQUARED_LOSS`) and the rows' relative weights
    ``weights`` (``None``: 1). One read of every row (:func:`skdpsco.rows._blocks.loss_derivatives`:
    the margin, the gradient term and the row scaled by ``sqrt(c phi'')`` while it is in cache),
    then one symmetric rank-``k`` product per buffer of :data:`SCALED_BLOCK_BYTES` of scaled rows.
    Blocks of :data:`~skdpsco.rows._threads.BLOCK_ROWS` rows on :data:`~skdpsco.rows._threads.THREADS` threads, each with its own sums; the sums
    of the blocks are added in their order as they arrive, so at most a few ``p x p`` partial
    Hessians are held at a time, and the result does not depend on the number of threads."""
    targets = np.ascontiguousarray(targets, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    weights = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    n_rows, n_columns = rows.shape
    block_rows = _threads.BLOCK_ROWS
    # a rank-k update of a p x p sum costs its p**2 entries' memory traffic: k at least p amortises it
    buffer_rows = max(64, n_columns, SCALED_BLOCK_BYTES // (8 * max(n_columns, 1)))

    def block(start: int):
        gradient = np.zeros(n_columns)
        total = np.zeros((n_columns, n_columns)) if hessian else None
        scaled = np.empty((min(buffer_rows, block_rows), n_columns)) if hessian else None
        for first in range(start, min(start + block_rows, n_rows), buffer_rows if hessian else block_rows):
            stop = min(first + (buffer_rows if hessian else block_rows), start + block_rows, n_rows)
            part = None if scaled is None else scaled[:stop - first]
            _blocks.loss_derivatives(rows[first:stop], targets[first:stop], w, loss,
                                     None if weights is None else weights[first:stop], gradient, part)
            if hessian:
                total += part.T @ part  # A.T @ A: the symmetric BLAS update
        return gradient, total

    gradient = np.zeros(n_columns)
    total = np.zeros((n_columns, n_columns)) if hessian else None

    def add(parts) -> None:
        for part_gradient, part_total in parts:  # in the order of the blocks
            np.add(gradient, part_gradient, out=gradient)
            if hessian:
                np.add(total, part_total, out=total)

    with one_blas_thread_each():
        add(imap_blocks(block, n_rows, block_rows))
    return gradient, total
