"""The threads of the passes over the rows: blocks of rows mapped on a pool that a fit starts once,
the progress of rows still being written, and the BLAS limit the passes share.

A pass runs one task a block of rows on :data:`THREADS` threads (the compiled kernels release the
GIL); its results come back in the order of the blocks, so a sum over them does not depend on the
number of threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from threadpoolctl import ThreadpoolController

BLOCK_ROWS = 16384
"""Rows per block of a pass: the unit of work of its threads (about 13 MB at 100 features)."""

THREADS = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
"""Threads of a pass: the CPUs this process may run on (at most 8); the kernels release the GIL."""


_THIS_THREAD = threading.local()
"""The pool of :func:`shared_threads` the calling thread is inside of (attribute ``pool``), if any."""


@contextmanager
def shared_threads() -> Iterator[None]:
    """Within the ``with`` block, the passes the calling thread starts run on one pool of
    :data:`THREADS` threads, started once, instead of a pool started and joined per pass (a fit
    makes a dozen passes or more; starting the threads of one is a few tenths of a millisecond).
    The pool belongs to the calling thread (fits running in other threads have their own) and
    ends with the block, so no thread outlives a fit. Nested blocks share the outer pool."""
    if THREADS == 1 or current_pool() is not None:
        yield
        return
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        _THIS_THREAD.pool = pool
        try:
            yield
        finally:
            _THIS_THREAD.pool = None


def current_pool() -> ThreadPoolExecutor | None:
    """The pool of :func:`shared_threads` the calling thread is inside of, or ``None``."""
    return getattr(_THIS_THREAD, "pool", None)


def imap_blocks(run: Callable, n_rows: int, block_rows: int | None = None) -> Iterator:
    """``run(start)`` for ``start in range(0, n_rows, block_rows)`` (default :data:`BLOCK_ROWS`),
    over :data:`THREADS` threads (the pool of :func:`shared_threads` when the caller is inside
    one), yielded in the order of the starts as they finish."""
    starts = range(0, n_rows, BLOCK_ROWS if block_rows is None else block_rows)
    pool = current_pool()
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


def submit_blocks(run: Callable, n_rows: int, block_rows: int) -> RowsInProgress | None:
    """``run(start)`` for each block, submitted to the pool of :func:`shared_threads` without waiting
    (its progress returned), or run here, in order, outside one (``None`` returned: all done)."""
    pool = current_pool()
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
