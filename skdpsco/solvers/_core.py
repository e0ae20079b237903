"""The projected noisy SGD core shared by every solver.

One loop, used by all algorithms: consecutive disjoint batches read from an iterator of row
blocks, averaged gradient, optional Gaussian noise on the gradient, Euclidean projection onto
the ball of public radius, last iterate returned (``feldman.md`` §A1 pseudocode, pitfalls D1,
D4, D5). Solvers differ only in the schedule they feed it.

The loop has two implementations with one meaning. :func:`reference_projected_noisy_sgd` is the
numpy reference: any gradient function, any iterable of row blocks. The compiled kernel
(:mod:`skdpsco.solvers._kernel`, Cython) runs the common case at the speed of one pass over the
data: a :func:`margin_gradient` of a loss with a C derivative (:func:`kernel_loss`), row blocks
from :func:`skdpsco.rows.iter_batches` over a C-contiguous float64 ``X`` or a float64 CSR matrix (whose steps
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

from .. import _noise
from ..losses import HingeLoss, HuberLoss, LogisticLoss, PowerLoss, QHingeLoss, SquaredHingeLoss, WeightedLoss
from ..rows import RowBatches, layout_of, row_order, row_source
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


def order_and_noise_rng(X: np.ndarray, n_rows: int, rng: np.random.Generator, order: np.ndarray | None):
    """The start of every solver run that reads the rows in an order: refuse rows that are not the
    ``n_rows`` the plan was made for, split ``rng`` into independent children for the order and
    the noise (pitfall D16), and return ``(row_order(n_rows, order_rng, order), noise_rng)``
    (:func:`skdpsco.rows.row_order`)."""
    if X.shape[0] != n_rows:
        raise ValueError(f"The plan is for {n_rows} rows; got {X.shape[0]}.")
    order_rng, noise_rng = rng.spawn(2)
    return row_order(n_rows, order_rng, order), noise_rng


def rows_and_noise_rng(X, y, n_rows: int, rng: np.random.Generator, order=None, rows_written=None) -> tuple:
    """The start of a one-pass solver run: split ``rng`` into independent children for the order
    and the noise (pitfall D16) and return ``(row_source(X, y, n_rows, order_rng, order,
    rows_written), noise_rng)`` (:func:`skdpsco.rows.row_source`), as :func:`order_and_noise_rng`
    does for an order."""
    order_rng, noise_rng = rng.spawn(2)
    return row_source(X, y, n_rows, order_rng, order, rows_written), noise_rng


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
(:class:`skdpsco.rows.RowBatches` ``rows_written``): as the blocks of their gather
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
    batches come from :func:`skdpsco.rows.iter_batches` over rows the kernel of their layout reads
    in place (``kernel_reads``: a 2-D C-contiguous float64 array, or a float64 CSR matrix; the
    layout's binding, :data:`_SGD_LOOPS`), and ``w0`` is a vector with one entry per column of ``X``."""
    if not (isinstance(gradient, MarginGradient) and isinstance(batches, RowBatches)):
        return False
    X = batches.X
    layout = layout_of(X)
    return (
        kernel_loss(gradient.loss) is not None
        and layout.name in _SGD_LOOPS
        and layout.kernel_reads(X)
        and np.ndim(w0) == 1
        and np.shape(w0)[0] == batches.n_columns
    )


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


def _dense_sgd_loop(arrays: tuple, w: np.ndarray, sizes: np.ndarray, intercept: float | None = None):
    """The compiled loop over a dense ``X`` (:func:`~skdpsco.solvers._kernel.run_steps`) and its work
    buffer, a gradient of the size of ``w``. Dense rows store their intercept column."""
    if intercept is not None:
        raise ValueError("intercept= is the unstored last column of CSR rows; dense rows store their own.")
    return partial(_kernel.run_steps, *arrays), np.empty_like(w)


def _csr_sgd_loop(arrays: tuple, w: np.ndarray, sizes: np.ndarray, intercept: float | None = None):
    """The compiled loop over CSR rows (:func:`~skdpsco.solvers._kernel.run_sparse_steps`) on their
    ``(data, indices, indptr)`` arrays, read in place, and its work buffer, a gradient and the
    derivatives of a block of rows (:func:`~skdpsco.solvers._kernel.sparse_work_size`);
    ``intercept``, the value of a last column that the rows do not store, read by the kernel as if
    stored (``fill``)."""
    fill = {} if intercept is None else {"fill": float(intercept), "with_fill": True}
    return (partial(_kernel.run_sparse_steps, *arrays, **fill),
            np.empty(_kernel.sparse_work_size(w.size, int(sizes.max(initial=0)))))


_SGD_LOOPS = {"dense": _dense_sgd_loop, "sparse": _csr_sgd_loop}
"""The binding of the compiled loop for each layout whose rows it reads in place, by the layout's
``name`` (:func:`skdpsco.rows.layout_of`; the rows' arrays are the layout's ``kernel_arrays``)."""


def _kernel_of_rows(X, w: np.ndarray, sizes: np.ndarray, intercept: float | None = None):
    """``(run, work)``: the compiled loop bound to the rows of ``X`` (:func:`uses_kernel`) and its
    work buffer (:data:`_SGD_LOOPS`)."""
    layout = layout_of(X)
    return _SGD_LOOPS[layout.name](layout.kernel_arrays(X), w, sizes, intercept)


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
        # one pass of per-block sums (the rows' layout: in memory, one call)
        g = layout_of(X).block_sum(summed_loss_gradient, X, y, extra=(self.loss, w)) / X.shape[0]
        return g + self.l2_penalty * w if self.l2_penalty else g


def summed_loss_gradient(X, y: np.ndarray, loss, w: np.ndarray) -> np.ndarray:
    """``sum_i loss.derivative(<w, x_i>, y_i) x_i`` over the rows of ``X`` (dense or CSR)."""
    return loss.derivative(X @ w.T, y).T @ X


def margin_gradient(loss, l2_penalty: float = 0.0) -> MarginGradient:
    """Batch-averaged gradient of a margin loss plus a ridge term (see :class:`MarginGradient`)."""
    return MarginGradient(loss, float(l2_penalty))
