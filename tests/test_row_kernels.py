"""The fused per-block kernels of :mod:`skdpsco.rows` against the numpy references of
:mod:`skdpsco.linear_model._scaling`: the same integers for the histograms, the same values up to
the rounding of a sum's order for the rest, on any number of blocks and threads."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

from skdpsco import rows as fused
from skdpsco.linear_model import _scaling
from skdpsco.solvers import _kernel
from skdpsco.rows import DENSE, _maps, layout_of

RANGE = _scaling.MAGNITUDE_RANGE


def _table(seed: int, n: int, d: int, intercept: bool) -> np.ndarray:
    """Rows over many orders of magnitude with zeros, subnormals, exact half octaves and values
    beyond the histogram's range, plus an intercept column of ones when asked."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 10.0 ** rng.uniform(-15, 15, size=d)
    X[rng.random((n, d)) < 0.2] = 0.0
    X[rng.random((n, d)) < 0.05] = 5e-310
    X[rng.random((n, d)) < 0.05] = -np.sqrt(0.5) * 2.0 ** rng.integers(-60, 60)
    return np.hstack([X, np.ones((n, 1))]) if intercept else X


@pytest.fixture(params=[1, 7], ids=["one block", "many blocks"])
def small_blocks(request, monkeypatch):
    """Blocks of 1 row (every row its own block, over the threads) or 7 rows."""
    monkeypatch.setattr(fused._threads, "BLOCK_ROWS", request.param)
    return request.param


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), d=st.integers(1, 9), intercept=st.booleans())
def test_magnitude_counts_are_the_references_integers(seed, n, d, intercept):
    rows = _table(seed, n, d, intercept)
    np.testing.assert_array_equal(fused.magnitude_counts(rows, d, RANGE), _scaling.magnitude_counts(rows[:, :d]))


def test_magnitude_counts_over_blocks_and_threads(small_blocks):
    rows = _table(1, 200, 5, True)
    np.testing.assert_array_equal(fused.magnitude_counts(rows, 5, RANGE), _scaling.magnitude_counts(rows[:, :5]))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), d=st.integers(1, 9), intercept=st.booleans(),
       bound=st.sampled_from([1e-3, 1.0, 3.0, 1e6]))
def test_divide_clip_and_sum_matches_the_reference(seed, n, d, intercept, bound):
    rows = _table(seed, n, d, intercept)
    rng = np.random.default_rng(seed)
    scales = 2.0 ** rng.integers(-40, 40, size=d)
    expected = DENSE.clip_rows(DENSE.divide_by_powers_of_two(rows[:, :d], scales), bound)
    sums = fused.divide_clip_and_sum(rows, d, scales, bound)
    np.testing.assert_allclose(rows[:, :d], expected, rtol=1e-13, atol=1e-15 * bound)
    np.testing.assert_allclose(sums, expected.sum(axis=0), rtol=1e-12, atol=1e-13 * bound * n)
    if intercept:
        np.testing.assert_array_equal(rows[:, d], 1.0)  # the intercept column is left alone


def test_divide_clip_and_sum_clips_rows_whose_length_or_quotient_overflows():
    rows = np.array([[1.5e308, 1.5e308, 0.0], [1e300, -1e300, 2.0], [1.0, 2.0, 2.0]])
    original = rows.copy()
    sums = fused.divide_clip_and_sum(rows, 3, np.array([1.0, 2.0**-20, 1.0]), 3.0)
    assert np.isfinite(rows).all() and np.isfinite(sums).all()
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 3.0, rtol=1e-15)
    for row, x in zip(rows, original):  # each row keeps the direction of x / s (computed from x / max|x|)
        quotient = x / np.abs(x).max() * np.array([1.0, 2.0**20, 1.0])
        np.testing.assert_allclose(row, 3.0 * quotient / np.linalg.norm(quotient), rtol=1e-14)
    np.testing.assert_allclose(sums, rows.sum(axis=0), rtol=1e-15)


def test_divide_clip_and_sum_over_blocks_and_threads(small_blocks):
    rows = _table(2, 100, 6, True)
    expected_rows = rows.copy()
    scales = 2.0 ** np.arange(-3, 3)
    expected = DENSE.clip_rows(DENSE.divide_by_powers_of_two(expected_rows[:, :6], scales), 2.0)
    sums = fused.divide_clip_and_sum(rows, 6, scales, 2.0)
    np.testing.assert_allclose(rows[:, :6], expected, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(sums, expected.sum(axis=0), rtol=1e-12, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), d=st.integers(1, 9), intercept=st.booleans(),
       clip=st.sampled_from([0.1, 1.0, 10.0]))
def test_centred_square_sums_match_the_reference(seed, n, d, intercept, clip):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(n, d + intercept)) * rng.uniform(0.01, 3.0, size=d + intercept)
    mean = rng.normal(size=d)
    before = rows.copy()
    squares = fused.centred_square_sums(rows, d, mean, clip)
    np.testing.assert_allclose(squares, DENSE.centred_square_sums(rows[:, :d], mean, clip), rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(rows, before)  # only read


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), d=st.integers(1, 9), intercept=st.booleans())
def test_standardise_matches_the_reference(seed, n, d, intercept):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(n, d + intercept)) * 3.0
    expected = rows[:, :d].copy()
    mean, scale, clip_norm = rng.normal(size=d), rng.uniform(0.1, 5.0, size=d), np.sqrt(d)
    DENSE.standardised(expected, mean, scale, clip_norm, out=expected)
    fused.standardise(rows, d, mean, scale, clip_norm)
    np.testing.assert_allclose(rows[:, :d], expected, rtol=1e-14, atol=1e-16)
    assert (np.linalg.norm(rows[:, :d], axis=1) <= 1.0 + 1e-15).all()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), d=st.integers(1, 9), intercept=st.booleans(),
       bound=st.sampled_from([1e-3, 1.0, 1e6]))
def test_divide_clip_and_standardise_is_the_two_passes_bit_for_bit(seed, n, d, intercept, bound):
    rows = _table(seed, n, d, intercept)
    rng = np.random.default_rng(seed)
    scales = 2.0 ** rng.integers(-40, 40, size=d)
    mean, scale = rng.normal(size=d) * bound, rng.uniform(0.1, 5.0, size=d) * bound
    expected = rows.copy()
    fused.divide_clip_and_sum(expected, d, scales, bound)
    fused.standardise(expected, d, mean, scale, np.sqrt(d))
    fused.divide_clip_and_standardise(rows, d, scales, bound, mean, scale, np.sqrt(d))
    np.testing.assert_array_equal(rows, expected)  # the intercept column too: left alone by both


def test_kernels_refuse_rows_with_too_few_columns():
    rows = np.zeros((3, 2))
    with pytest.raises(ValueError, match="d=3"):
        fused.divide_clip_and_sum(rows, 3, np.ones(3), 1.0)
    with pytest.raises(ValueError, match="d=3"):
        fused.magnitude_counts(rows, 3, RANGE)
    with pytest.raises(ValueError, match="d=3"):
        fused.divide_clip_and_standardise(rows, 3, np.ones(3), 1.0, np.zeros(3), np.ones(3), 1.0)


def test_fused_layout_is_c_contiguous_float64():
    assert fused.fused_layout(np.zeros((3, 2)))
    assert not fused.fused_layout(np.zeros((3, 2), order="F"))
    assert not fused.fused_layout(np.zeros((3, 2), dtype=np.float32))
    assert not fused.fused_layout(np.zeros((3, 2))[:, :1])


@pytest.mark.parametrize("loss_name", ["logistic", "squared"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("hessian", [False, True])
def test_loss_derivatives_match_the_losses_formulas(loss_name, weighted, hessian, monkeypatch):
    from skdpsco.losses import LogisticLoss, PowerLoss

    rows = fused
    monkeypatch.setattr(rows._threads, "BLOCK_ROWS", 64)  # several blocks, over threads
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 7)) * 3.0
    w = rng.normal(size=7)
    if loss_name == "logistic":
        loss, code, y = LogisticLoss(), rows.LOGISTIC_LOSS, rng.choice([-1.0, 1.0], size=300)
    else:
        loss, code, y = PowerLoss(2.0), rows.SQUARED_LOSS, rng.normal(size=300) * 5.0
    c = rng.uniform(0.0, 1.0, size=300) if weighted else np.ones(300)
    margins = X @ w
    expected_gradient = (c * loss.derivative(margins, y)) @ X
    curvature = expit(margins) * expit(-margins) if loss_name == "logistic" else np.full(300, 2.0)
    expected_hessian = (X * (c * curvature)[:, None]).T @ X
    gradient, total = rows.loss_derivatives(X, y, w, code, c if weighted else None, hessian)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-12, atol=1e-12)
    if hessian:
        np.testing.assert_allclose(total, expected_hessian, rtol=1e-12, atol=1e-12)
        assert np.array_equal(total, total.T)
    else:
        assert total is None
    # the result does not depend on the number of threads
    monkeypatch.setattr(rows._threads, "THREADS", 1)
    again = rows.loss_derivatives(X, y, w, code, c if weighted else None, hessian)
    assert np.array_equal(again[0], gradient) and (not hessian or np.array_equal(again[1], total))


def test_shared_threads_run_every_pass_on_one_pool_that_ends_with_the_block(monkeypatch):
    monkeypatch.setattr(fused._threads, "THREADS", 2)
    monkeypatch.setattr(fused._threads, "BLOCK_ROWS", 5)
    alone = fused.map_blocks(lambda start: start, 23)
    before = threading.active_count()
    assert alone == [0, 5, 10, 15, 20] and threading.active_count() == before  # a pass alone joins its threads
    with fused.shared_threads():
        for _ in range(3):
            assert fused.map_blocks(lambda start: start, 23) == alone
            assert threading.active_count() == before + 2  # the pool's threads stay for the next pass
        with fused.shared_threads():  # a nested block shares the outer pool
            assert fused.map_blocks(lambda start: start, 23) == alone
            assert threading.active_count() == before + 2
    assert threading.active_count() == before  # no thread outlives the block


@pytest.mark.parametrize("special", [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-310,
                                     np.finfo(float).max, -np.finfo(float).max, np.finfo(float).tiny])
def test_count_non_finite_counts_exactly_the_nans_and_infinities(special, small_blocks):
    """The bit count of :func:`skdpsco.rows.count_non_finite` against ``np.isfinite``: each special
    value (NaN of either sign, infinities; zeros, subnormals, the largest and least normal floats
    are finite) placed at scattered entries of rows over every order of magnitude."""
    X = _table(3, 40, 9, intercept=False)
    rng = np.random.default_rng(4)
    X.flat[rng.choice(X.size, size=17, replace=False)] = special
    assert fused.count_non_finite(X) == np.count_nonzero(~np.isfinite(X))
    assert fused.count_non_finite(np.empty((0, 3))) == 0


def _blas_threads() -> list:
    from threadpoolctl import threadpool_info

    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


def test_hessian_passes_run_blas_on_one_thread_each_and_restore_it(monkeypatch):
    """Inside :func:`skdpsco.rows.loss_derivatives`, run on the passes' own threads, BLAS runs on
    the calling thread (one BLAS thread each: no oversubscription of the CPUs), and the process's
    BLAS setting is what it was afterwards; with one thread of passes BLAS keeps its own."""
    before = _blas_threads()
    seen = []
    original = fused._blocks.loss_derivatives

    def observe(*args):
        seen.append(_blas_threads())
        return original(*args)

    monkeypatch.setattr(fused._blocks, "loss_derivatives", observe)
    rng = np.random.default_rng(0)
    X, y, w = rng.normal(size=(300, 4)), np.where(rng.random(300) < 0.5, -1.0, 1.0), np.zeros(4)
    monkeypatch.setattr(fused._threads, "THREADS", 2)
    fused.loss_derivatives(X, y, w, fused.LOGISTIC_LOSS, None, True)
    assert seen and all(threads == [1] * len(before) for threads in seen)
    assert _blas_threads() == before
    seen.clear()
    monkeypatch.setattr(fused._threads, "THREADS", 1)
    fused.loss_derivatives(X, y, w, fused.LOGISTIC_LOSS, None, True)
    assert seen and all(threads == before for threads in seen)


class _RecordingBlas:
    """A stand-in for threadpoolctl's controller: the BLAS thread count as its limits set it
    (OpenBLAS's own count, read back from a thread other than the one that set it, is not
    reliable enough to test the sharing of the limit on)."""

    def __init__(self, threads: int):
        self.threads = threads

    def limit(self, limits: int, user_api: str):
        blas, found = self, self.threads

        class Limiter:
            def restore_original_limits(self) -> None:
                blas.threads = found

            def __enter__(self):
                return self

            def __exit__(self, *exc) -> None:
                self.restore_original_limits()

        self.threads = limits
        return Limiter()


def test_blas_limit_of_overlapping_blocks_in_threads_lasts_until_the_last_closes(monkeypatch):
    """Two fits' Hessian passes in two threads: the first block to close leaves BLAS on one thread
    for the other, still open, and the last to close restores the setting from before the first
    opened (not the limit it found on entry)."""
    monkeypatch.setattr(fused._threads, "THREADS", 2)
    blas = _RecordingBlas(threads=2)
    monkeypatch.setitem(fused._threads._BLAS, "controller", blas)
    opened = [threading.Event(), threading.Event()]
    close = [threading.Event(), threading.Event()]
    closed = [threading.Event(), threading.Event()]

    def hold(k: int) -> None:
        with fused.one_blas_thread_each():
            opened[k].set()
            close[k].wait(10)
        closed[k].set()

    threads = [threading.Thread(target=hold, args=(k,)) for k in (0, 1)]
    threads[0].start()
    assert opened[0].wait(10)
    threads[1].start()
    assert opened[1].wait(10)
    assert blas.threads == 1
    close[0].set()
    assert closed[0].wait(10)
    assert blas.threads == 1  # the second block is still open
    close[1].set()
    for thread in threads:
        thread.join(10)
    assert blas.threads == 2 and fused._threads._BLAS["holders"] == 0
    with fused.one_blas_thread_each():  # and the next block limits it again
        assert blas.threads == 1
    assert blas.threads == 2


@pytest.mark.parametrize("n", [0, 1, 6, 7])
def test_gathers_counts_are_the_histograms_of_the_finite_rows_it_writes(n):
    """The gather counts its rows two at a time: the same integers for an odd or even number of
    rows, rows with a NaN or an infinite entry (refused, not counted) between them."""
    X = _table(n, max(n, 1) + 3, 5, False)
    X[2, 1], X[n + 1, 0] = np.nan, -np.inf
    order = np.random.default_rng(n).permutation(X.shape[0])[: n + 2]
    order = np.concatenate([order, [2]])  # a refused row last
    out = np.empty((order.size, 5))
    counts = np.zeros((5, 2 * RANGE + 1), dtype=np.int64)
    refused = _maps.gather_clipped_rows(X, order.astype(np.intp), 1e6, out, 0.0, counts)
    written = np.isfinite(X[order]).all(axis=1)
    assert refused == int((~written).sum()) >= 1
    np.testing.assert_array_equal(counts, _scaling.magnitude_counts(out[written]))
