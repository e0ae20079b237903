"""The passes over in-memory rows that the releases before the solver make, fused and blocked.

A fit copies its rows once, clipped, in a random order, into one C-contiguous float64 array (the
features first, then an intercept column when there is one): the solvers read that copy. The
releases that set the scale of the features read it too, in the fewest passes their dependence
allows, each one compiled kernel over blocks of :data:`BLOCK_ROWS` consecutive rows
(:mod:`skdpsco.rows._blocks`) run on :data:`THREADS` threads:

1. the histograms of the features' binary orders of magnitude (:func:`magnitude_counts`);
2. released divisors, then in place: the division, the clip to the public bound, and the column
   sums the mean is released from (:func:`divide_clip_and_sum`);
3. released mean, then the sums of the squares of the centred, clipped rows
   (:func:`centred_square_sums`), which the rows are only read for;
4. released scale, then in place: the standardisation and its clip (:func:`standardise`).

Steps 2 and 3 read only the first rows of the fit's random order, as many as the moments are
computed over (:attr:`skdpsco.linear_model._scaling.ScalingPlan.moment_rows`); the rest are divided,
clipped and standardised in step 4's one pass (:func:`divide_clip_and_standardise`).

The Newton method's passes read the standardised rows through :func:`loss_derivatives`: each
row's margin, loss derivative and Hessian factor in one read of the row.

No pass allocates more than a block's worth of memory per thread; the sums of the blocks are
added in the order of the blocks, so a result does not depend on the number of threads. This
module imports nothing of the package: the constants of the releases are arguments.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
from threadpoolctl import ThreadpoolController

from . import _blocks

__all__ = [
    "BLOCK_ROWS",
    "RowsInProgress",
    "balanced_block_rows",
    "THREADS",
    "centred_square_sums",
    "count_non_finite",
    "start_count_non_finite",
    "divide_clip_and_standardise",
    "divide_clip_and_sum",
    "fused_layout",
    "gather_standardised",
    "loss_derivatives",
    "magnitude_counts",
    "map_blocks",
    "one_blas_thread_each",
    "shared_threads",
    "sparse_scaled_gram",
    "standardise",
]

BLOCK_ROWS = 16384
"""Rows per block of a pass: the unit of work of its threads (about 13 MB at 100 features)."""

THREADS = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
"""Threads of a pass: the CPUs this process may run on (at most 8); the kernels release the GIL."""


def fused_layout(rows) -> bool:
    """Whether ``rows`` is what the kernels read: a C-contiguous 2-D float64 numpy array."""
    return isinstance(rows, np.ndarray) and rows.ndim == 2 and rows.dtype == np.float64 and rows.flags.c_contiguous


_THIS_THREAD = threading.local()
"""The pool of :func:`shared_threads` the calling thread is inside of (attribute ``pool``), if any."""


@contextmanager
def shared_threads() -> Iterator[None]:
    """Within the ``with`` block, the passes the calling thread starts run on one pool of
    :data:`THREADS` threads, started once, instead of a pool started and joined per pass (a fit
    makes a dozen passes or more; starting the threads of one is a few tenths of a millisecond).
    The pool belongs to the calling thread (fits running in other threads have their own) and
    ends with the block, so no thread outlives a fit. Nested blocks share the outer pool."""
    if THREADS == 1 or getattr(_THIS_THREAD, "pool", None) is not None:
        yield
        return
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        _THIS_THREAD.pool = pool
        try:
            yield
        finally:
            _THIS_THREAD.pool = None


def imap_blocks(run: Callable, n_rows: int, block_rows: int | None = None) -> Iterator:
    """``run(start)`` for ``start in range(0, n_rows, block_rows)`` (default :data:`BLOCK_ROWS`),
    over :data:`THREADS` threads (the pool of :func:`shared_threads` when the caller is inside
    one), yielded in the order of the starts as they finish."""
    starts = range(0, n_rows, BLOCK_ROWS if block_rows is None else block_rows)
    pool = getattr(_THIS_THREAD, "pool", None)
    if len(starts) <= 1 or THREADS == 1:
        yield from map(run, starts)
    elif pool is not None:
        yield from pool.map(run, starts)
    else:
        with ThreadPoolExecutor(max_workers=min(THREADS, len(starts))) as pool:
            yield from pool.map(run, starts)


def map_blocks(run: Callable, n_rows: int, block_rows: int | None = None) -> list:
    """``list(imap_blocks(run, n_rows, block_rows))``: the results of every block, in order."""
    return list(imap_blocks(run, n_rows, block_rows))


class RowsInProgress:
    """Rows of an array that the threads of :func:`shared_threads` are still writing, a block of
    ``block_rows`` rows per task, in the order of the blocks: :meth:`wait` returns once the rows
    before ``stop`` are written (and raises what a task raised). The one-pass solvers read the
    rows of a fit in sequence: waiting for each chunk's rows just before reading them overlaps
    the writing of the rest with the solver's own pass (:func:`gather_standardised`)."""

    def __init__(self, futures: list, block_rows: int, n_rows: int):
        self._futures, self.block_rows, self.n_rows = futures, int(block_rows), int(n_rows)
        self._written = 0  # blocks known to be written

    def wait(self, stop: int | None = None) -> None:
        """Return once the rows before ``stop`` (default: all) are written."""
        stop = self.n_rows if stop is None else min(int(stop), self.n_rows)
        needed = -(-stop // self.block_rows)
        while self._written < needed:
            self._futures[self._written].result()
            self._written += 1


def _submit_blocks(run: Callable, n_rows: int, block_rows: int) -> RowsInProgress | None:
    """``run(start)`` for each block, submitted to the pool of :func:`shared_threads` without waiting
    (its progress returned), or run here, in order, outside one (``None`` returned: all done)."""
    pool = getattr(_THIS_THREAD, "pool", None)
    starts = range(0, n_rows, block_rows)
    if pool is None or len(starts) <= 1:
        for start in starts:
            run(start)
        return None
    return RowsInProgress([pool.submit(run, start) for start in starts], block_rows, n_rows)


def balanced_block_rows(n_rows: int) -> int:
    """Rows per block of a pass whose result does not depend on its blocks (a copy, a rewrite in
    place, integer counts): at most :data:`BLOCK_ROWS`, in a multiple of :data:`THREADS` blocks of
    equal size, so that no thread is left with a block more than the others at the end of the pass
    (blocks of :data:`BLOCK_ROWS` may leave one thread two full blocks while another has one and a
    short one). A pass that sums floats keeps the blocks of :data:`BLOCK_ROWS`, whose order of
    summation its value depends on."""
    rounds = max(1, -(-n_rows // (BLOCK_ROWS * THREADS)))
    return max(1, -(-n_rows // (rounds * THREADS)))


def _over_blocks(kernel, rows: np.ndarray, *args, balanced: bool = False) -> list:
    """``[kernel(block, *args) for block in blocks of rows]``, in the order of the blocks, over
    :data:`THREADS` threads; ``balanced``: blocks of :func:`balanced_block_rows` (for a pass whose
    result does not depend on them), else of :data:`BLOCK_ROWS`."""
    block_rows = balanced_block_rows(rows.shape[0]) if balanced else BLOCK_ROWS
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
    overflow, :func:`skdpsco.linear_model._scaling.divide_by_powers_of_two`), each row clipped to
    ``l2`` norm ``bound``; returns the column sums of the result. One pass."""
    parts = _over_blocks(_blocks.divide_clip_and_sum, rows, int(n_features), *_powers_of_two(scales), float(bound))
    return _block_sum(parts, n_features)


def _powers_of_two(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(e, 2.0**-e)`` for the powers of two ``scales = 2**e``: the kernels' divisors."""
    exponents = np.rint(np.log2(scales)).astype(np.int64)
    return exponents, np.ldexp(1.0, -exponents)


def centred_square_sums(rows: np.ndarray, n_features: int, mean: np.ndarray, clip: float) -> np.ndarray:
    """``sum_i clip_C(x_i - mean)**2`` per feature over the first ``n_features`` columns
    (:func:`skdpsco.linear_model._scaling.centred_square_sums`). One pass, the rows only read."""
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    parts = _over_blocks(_blocks.centred_square_sums, rows, int(n_features), mean, float(clip))
    return _block_sum(parts, n_features)


def standardise(rows: np.ndarray, n_features: int, mean: np.ndarray, scale: np.ndarray, clip_norm: float) -> None:
    """In place: ``z = (x - mean) / scale`` over the first ``n_features`` columns, each row then
    divided by ``max(||z||, C)`` (:func:`skdpsco.linear_model._scaling.standardise_rows`). One pass."""
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    _over_blocks(_blocks.standardise, rows, int(n_features), mean, scale, float(clip_norm), balanced=True)


def divide_clip_and_standardise(rows: np.ndarray, n_features: int, scales: np.ndarray, bound: float,
                                mean: np.ndarray, scale: np.ndarray, clip_norm: float) -> None:
    """In place: :func:`divide_clip_and_sum` then :func:`standardise`, in one pass (each row is
    divided, clipped and standardised while it is in cache; the same values as the two passes)."""
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    _over_blocks(_blocks.divide_clip_and_standardise, rows, int(n_features), *_powers_of_two(scales), float(bound),
                 mean, scale, float(clip_norm), balanced=True)


def gather_standardised(X: np.ndarray, order: np.ndarray, out: np.ndarray, scales: np.ndarray, bound: float,
                        mean: np.ndarray, scale: np.ndarray, clip_norm: float, fill: float | None,
                        in_background: bool = False) -> RowsInProgress | None:
    """``out`` = the rows ``X[order]`` (C-contiguous float64, finite) divided by the powers of two
    ``scales``, clipped to ``bound`` and standardised, as :func:`divide_clip_and_standardise` leaves
    them, with a last column of ``fill`` when given: one read of each row of ``X`` in ``order``
    and one write of ``out``, in blocks of the order over :data:`THREADS` threads.

    ``in_background`` (inside :func:`shared_threads`): the blocks are left to the threads and
    their progress is returned (:class:`RowsInProgress`; ``None`` when they were written here);
    ``out`` must not be read before :meth:`RowsInProgress.wait` says its rows are written."""
    order = np.ascontiguousarray(order, dtype=np.intp)
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    exponents, factors = _powers_of_two(scales)
    block_rows = balanced_block_rows(order.size)

    def run(start: int) -> None:
        block = slice(start, start + block_rows)
        _blocks.gather_standardised(X, order[block], out[block], exponents, factors, float(bound), mean, scale,
                                    float(clip_norm), 0.0 if fill is None else float(fill))

    if in_background:
        return _submit_blocks(run, order.size, block_rows)
    map_blocks(run, order.size, block_rows)
    return None


def count_non_finite(X: np.ndarray) -> int:
    """The number of NaN or infinite entries of a C-contiguous float64 ``X``: one read, in blocks
    over :data:`THREADS` threads."""
    return start_count_non_finite(X)()


def start_count_non_finite(X: np.ndarray) -> Callable[[], int]:
    """:func:`count_non_finite` started on the threads of :func:`shared_threads` without waiting (run
    here outside one): the returned function waits for the count and returns it. A fit starts it
    before work that does not read ``X`` (drawing its order, copying the rows the scaling reads),
    so that the check overlaps that work, and reads it before anything is charged."""
    block_rows = balanced_block_rows(X.shape[0])

    def count(start: int) -> int:
        return _blocks.count_non_finite(X[start:start + block_rows])

    pool = getattr(_THIS_THREAD, "pool", None)
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


_BLAS = {"holders": 0}
"""The state of :func:`one_blas_thread_each`: ``"controller"``, a ``threadpoolctl.ThreadpoolController()``
made at first use (it inspects the libraries the process has loaded, about 15 ms); ``"holders"``,
the blocks open in any thread; ``"limiter"``, the limit they share while one is open."""

_BLAS_LOCK = threading.Lock()
"""Guards :data:`_BLAS`: blocks of fits in several threads open and close in any order."""


@contextmanager
def one_blas_thread_each() -> Iterator[None]:
    """Within the block, BLAS runs each call on the thread that makes it (threadpoolctl), when the
    passes run on more than one thread of their own (:data:`THREADS`): those threads already
    occupy every CPU, and a BLAS that starts its own threads in each of them oversubscribes the
    CPUs. OpenBLAS's threads wait for work by spinning, so each of the thousands of small
    products of a Hessian pass (:func:`loss_derivatives`) then waited on the others (the Newton
    rows of ``benchmarks/results/engine.md`` and the Hessian passes of ``scale_dask.md`` measure
    the pass).

    The limit is the process's, so blocks open in several threads at once (fits run in threads)
    share one: the first to open sets it and the last to close restores the setting the first
    found. Each block restoring what it found on entry would let the first to close give BLAS its
    threads back under the others, and the last restore the limit itself. OpenBLAS may not apply
    a limit set from a thread other than the main one once the main thread has set one (its
    thread count then reads as before), so a fit run in another thread may keep BLAS's own
    threads: a matter of speed, never of the values."""
    if THREADS == 1:
        yield
        return
    with _BLAS_LOCK:
        if _BLAS["holders"] == 0:
            if "controller" not in _BLAS:
                _BLAS["controller"] = ThreadpoolController()
            _BLAS["limiter"] = _BLAS["controller"].limit(limits=1, user_api="blas")
        _BLAS["holders"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS["holders"] -= 1
            if _BLAS["holders"] == 0:
                _BLAS.pop("limiter").restore_original_limits()


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
    Blocks of :data:`BLOCK_ROWS` rows on :data:`THREADS` threads, each with its own sums; the sums
    of the blocks are added in their order as they arrive, so at most a few ``p x p`` partial
    Hessians are held at a time, and the result does not depend on the number of threads."""
    targets = np.ascontiguousarray(targets, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    weights = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    n_rows, n_columns = rows.shape
    # a rank-k update of a p x p sum costs its p**2 entries' memory traffic: k at least p amortises it
    buffer_rows = max(64, n_columns, SCALED_BLOCK_BYTES // (8 * max(n_columns, 1)))

    def block(start: int):
        gradient = np.zeros(n_columns)
        total = np.zeros((n_columns, n_columns)) if hessian else None
        scaled = np.empty((min(buffer_rows, BLOCK_ROWS), n_columns)) if hessian else None
        for first in range(start, min(start + BLOCK_ROWS, n_rows), buffer_rows if hessian else BLOCK_ROWS):
            stop = min(first + (buffer_rows if hessian else BLOCK_ROWS), start + BLOCK_ROWS, n_rows)
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
        add(imap_blocks(block, n_rows))
    return gradient, total
