"""The compiled per-example loop (``skdpsco/solvers/_kernel.pyx``) against its numpy reference, the
dispatch rule between them, and pooled noise (``_core.pool_noise``): its accounting and an audit."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import skdpsco._noise as noise
import skdpsco.solvers._core as core
from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.accounting import amplification_by_iteration_rho
from skdpsco.losses import (
    HingeLoss,
    HuberLoss,
    LogisticLoss,
    MultinomialLogisticLoss,
    PowerLoss,
    QHingeLoss,
    SquaredHingeLoss,
)
from skdpsco.smoothing import smooth
from skdpsco.solvers import ALGORITHMS, Problem, _kernel
from skdpsco.solvers.snowball import MIN_NOISY_STEPS, noise_every
from skdpsco.rows import DENSE, full_batches, iter_batches, layout_of, row_order, RowBatches
from _audits import audit_params, check_audit

BINARY = [LogisticLoss(), HingeLoss(), SquaredHingeLoss(), QHingeLoss(1.5), smooth(HingeLoss(), 0.3)]
REGRESSION = [PowerLoss(1.0), PowerLoss(1.5), PowerLoss(2.0), HuberLoss(0.5), smooth(PowerLoss(1.0), 0.2)]


def data(loss, n=300, d=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    if loss.task == "binary":
        y = np.where(rng.random(n) < 0.5, 1, -1)
    else:
        y = X @ rng.normal(size=d) + 0.3 * rng.standard_t(2, size=n)
    return X, y


def both(loss, X, y, order, sizes, steps, stds, radius, l2, average, seed=7):
    gradient = core.margin_gradient(loss, l2)
    batches = iter_batches(X, y, order, sizes)
    w0 = np.zeros(X.shape[1])
    args = (steps, stds, w0, radius, np.random.default_rng(seed))
    fast = core.projected_noisy_sgd(gradient, batches, *args, average=average)
    args = (steps, stds, w0, radius, np.random.default_rng(seed))
    return fast, core.reference_projected_noisy_sgd(gradient, batches, *args, average=average)


@pytest.mark.parametrize("loss", BINARY + REGRESSION, ids=lambda loss: repr(loss)[:40])
def test_kernel_derivative_is_the_loss_derivative(loss):
    code, parameter = core.kernel_loss(loss)
    rng = np.random.default_rng(1)
    z = np.concatenate([rng.normal(scale=3.0, size=200), [0.0, 1.0, -1.0, 40.0, -40.0]])
    y = np.where(rng.random(z.size) < 0.5, 1.0, -1.0) if loss.task == "binary" else rng.normal(size=z.size)
    y[-3] = z[-3]  # a zero residual (regression) / the hinge kink (binary, y z = 1 for y = 1)
    np.testing.assert_allclose(_kernel.derivative(code, parameter, z, y), loss.derivative(z, y), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("loss", BINARY + REGRESSION, ids=lambda loss: repr(loss)[:40])
@pytest.mark.parametrize("radius, l2, average", [(1.0, 0.0, False), (None, 0.1, True), (0.3, 0.05, False)])
def test_kernel_and_reference_give_the_same_iterates_for_the_same_noise(loss, radius, l2, average):
    X, y = data(loss)
    order = np.random.default_rng(2).permutation(X.shape[0])
    sizes = np.array([1] * 150 + [3] * 20 + [10] * 9)  # batches of one row, then growing (Snowball)
    steps = np.linspace(0.5, 0.05, sizes.size)
    stds = np.where(np.arange(sizes.size) % 3 == 0, 0.0, np.linspace(0.2, 0.6, sizes.size))
    fast, reference = both(loss, X, y, order, sizes, steps, stds, radius, l2, average)
    assert np.linalg.norm(reference) > 0.01  # a non-trivial run
    np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12)


def test_chunks_of_steps_draw_the_noise_of_one_draw_per_step(monkeypatch):
    # More steps than one kernel call takes: the noise is drawn per chunk, in the reference's order.
    monkeypatch.setattr(core, "KERNEL_CHUNK_STEPS", 64)
    X, y = data(LogisticLoss(), n=500)
    sizes = np.ones(500, dtype=np.int64)
    fast, reference = both(LogisticLoss(), X, y, np.arange(500), sizes, np.full(500, 0.1), np.full(500, 0.4), 2.0, 0.0, False)
    np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12)


def test_dispatch_rule_is_explicit():
    X, y = data(LogisticLoss(), n=20)
    batches = iter_batches(X, y, np.arange(20), np.ones(20, dtype=np.int64))
    gradient = core.margin_gradient(LogisticLoss())
    assert core.uses_kernel(gradient, batches, np.zeros(7))
    assert not core.uses_kernel(lambda w, X, y: w, batches, np.zeros(7))  # an arbitrary gradient
    assert not core.uses_kernel(gradient, list(batches), np.zeros(7))  # not rows of one X
    assert not core.uses_kernel(gradient, batches, np.zeros((2, 7)))  # a multiclass matrix
    assert not core.uses_kernel(core.margin_gradient(MultinomialLogisticLoss(3)), batches, np.zeros(7))
    fortran = iter_batches(np.asfortranarray(X), y, np.arange(20), np.ones(20, dtype=np.int64))
    assert not core.uses_kernel(gradient, fortran, np.zeros(7))
    assert core.kernel_loss(type("Custom", (LogisticLoss,), {})()) is None  # a subclass may differ


def test_estimator_snowball_path_runs_the_kernel(monkeypatch):
    calls = []
    real = _kernel.run_steps
    monkeypatch.setattr(_kernel, "run_steps", lambda *args: calls.append(1) or real(*args))
    X, y = data(LogisticLoss(), n=3000, d=3)
    DPLogisticRegression(algorithm="snowball", random_state=0, accountant=PrivacyAccountant()).fit(X, y)
    assert calls


def test_kernel_takes_its_noise_from_gaussian_noise(monkeypatch):
    # The audits' knob: patching the one noise function changes what the kernel adds.
    monkeypatch.setattr(noise, "gaussian_noise", lambda rng, std, shape: np.zeros(shape))
    X, y = data(LogisticLoss())
    sizes, steps = np.ones(300, dtype=np.int64), np.full(300, 0.2)
    noisy, _ = both(LogisticLoss(), X, y, np.arange(300), sizes, steps, np.full(300, 5.0), 1.0, 0.0, False)
    quiet, _ = both(LogisticLoss(), X, y, np.arange(300), sizes, steps, np.zeros(300), 1.0, 0.0, False)
    np.testing.assert_array_equal(noisy, quiet)


@pytest.mark.parametrize("std", [2.5, np.linspace(0.1, 3.0, 40)[:, None], np.linspace(0.0, 1.0, 7), 0.0])
def test_gaussian_noise_draws_numpys_normal_bit_for_bit(std):
    # Scaled standard normals: the numbers rng.normal(0, std) draws, whatever the shape of std.
    drawn = noise.gaussian_noise(np.random.default_rng(3), std, (40, 7))
    expected = np.random.default_rng(3).normal(0.0, std, size=(40, 7))
    np.testing.assert_array_equal(drawn.view(np.int64), expected.view(np.int64))  # zeros' signs too
    assert drawn.shape == (40, 7) and drawn.dtype == np.float64


@pytest.mark.parametrize("std", [-1.0, np.array([[1.0], [-0.5]]), np.nan, np.inf])
def test_gaussian_noise_refuses_a_standard_deviation_that_is_not_finite_and_non_negative(std):
    with pytest.raises(ValueError, match="standard deviation"):
        noise.gaussian_noise(np.random.default_rng(0), std, (2, 3))


@pytest.mark.parametrize("order, sizes", [(np.array([0, 1, 5]), [1, 1, 1]), (np.arange(3), [2, 2])])
def test_kernel_refuses_rows_it_cannot_read(order, sizes):
    X, y = data(LogisticLoss(), n=3)
    batches = iter_batches(X, y, order, sizes)
    with pytest.raises(ValueError):
        core.projected_noisy_sgd(core.margin_gradient(LogisticLoss()), batches, np.ones(len(sizes)),
                                 np.zeros(len(sizes)), np.zeros(7), 1.0, np.random.default_rng(0))


# -- pooled noise (every k steps, k times the variance) ---------------------------------------------
def cni_rho(lipschitz, steps, batch_sizes, tau):
    """FKT Cor 2.14 (feldman.md §0.4) with CNI noise std ``tau_s`` per step, zeros allowed:
    ``max_t s_t**2 / (2 sum_{s >= t} tau_s**2)``, ``s_t = 2 L eta_t / B_t``."""
    tail = np.cumsum((tau**2)[::-1])[::-1]
    shift = 2.0 * lipschitz * steps / batch_sizes
    return float(np.max(shift**2 / (2.0 * tail)))


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 60),
    every=st.integers(1, 12),
    seed=st.integers(0, 10_000),
)
def test_pooled_noise_is_no_less_private_and_injects_the_same_total_noise(T, every, seed):
    rng = np.random.default_rng(seed)
    steps = rng.uniform(0.01, 1.0, T)
    sizes = rng.integers(1, 20, T).astype(float)
    stds = rng.uniform(0.1, 2.0, T)
    pooled = core.pool_noise(steps, stds, every)
    assert pooled[-1] > 0  # the last step is noisy
    assert np.count_nonzero(pooled) == math.ceil(T / every)
    assert np.sum((steps * pooled) ** 2) == pytest.approx(np.sum((steps * stds) ** 2))
    per_step = amplification_by_iteration_rho(1.0, steps, sizes, stds)
    assert cni_rho(1.0, steps, sizes, steps * stds) == pytest.approx(per_step)  # the fixture is the accountant
    assert cni_rho(1.0, steps, sizes, steps * pooled) <= per_step * (1 + 1e-12)


def test_pooled_noise_is_exactly_as_private_at_the_start_of_a_block():
    steps, stds = np.ones(6), np.ones(6)
    pooled = core.pool_noise(steps, stds, 3)
    np.testing.assert_allclose(pooled, [0, 0, math.sqrt(3), 0, 0, math.sqrt(3)])
    first_row_only = np.array([1.0, np.inf, np.inf, np.inf, np.inf, np.inf])  # only batch 0 matters
    assert cni_rho(1.0, steps, first_row_only, pooled) == pytest.approx(
        amplification_by_iteration_rho(1.0, steps, first_row_only, stds)
    )
    np.testing.assert_array_equal(core.pool_noise(steps, stds, 1), stds)
    with pytest.raises(ValueError, match="every"):
        core.pool_noise(steps, stds, 0)


@pytest.mark.parametrize("name", audit_params("snowball_pooled"))
def test_pooled_snowball_audit_respects_the_claim_and_catches_halved_noise(name):
    # benchmarks/audits.py: Snowball's own run on the compiled kernel, 20 steps with the noise pooled
    # every 6 (noise_every), the differing row at the start of the first block.
    check_audit(name)


@pytest.mark.parametrize("n_steps, every", [(1, 1), (2, 1), (3, 1), (12, 4), (47, 15), (48, 16), (10**6, 16)])
def test_short_schedules_keep_at_least_three_noisy_steps(n_steps, every):
    assert noise_every(n_steps) == every
    assert np.count_nonzero(core.pool_noise(np.ones(n_steps), np.ones(n_steps), every)) >= min(n_steps, MIN_NOISY_STEPS)


@pytest.mark.parametrize("loss", [LogisticLoss(), PowerLoss(2.0), smooth(HingeLoss(), 0.3)], ids=repr)
@pytest.mark.parametrize("average", [False, True])
def test_full_batch_passes_give_the_reference_iterates(loss, average):
    # Noisy GD's batches: every step reads all the rows, in place, pass after pass.
    X, y = data(loss, n=200)
    batches = full_batches(X, y, 40)
    assert all(b[0] is X for b in batches)  # the reference reads X itself, no copy (nor a CSR matrix's slice)
    gradient = core.margin_gradient(loss, 0.01)
    assert core.uses_kernel(gradient, batches, np.zeros(7))
    steps, stds = np.full(40, 0.5), np.linspace(0.0, 0.3, 40)
    args = lambda: (steps, stds, np.zeros(7), 1.0, np.random.default_rng(3))  # noqa: E731
    fast = core.projected_noisy_sgd(gradient, batches, *args(), average=average)
    reference = core.reference_projected_noisy_sgd(gradient, batches, *args(), average=average)
    assert np.linalg.norm(reference) > 0.01
    np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12)


def test_full_batches_refuse_a_batch_larger_than_the_rows():
    X, y = data(LogisticLoss(), n=5)
    batches = RowBatches(X, y, np.arange(5), np.array([5, 6]), cycle=True)
    with pytest.raises(ValueError, match="each at most the 5 rows"):
        core.projected_noisy_sgd(core.margin_gradient(LogisticLoss()), batches, np.ones(2), np.zeros(2),
                                 np.zeros(7), 1.0, np.random.default_rng(0))


# -- CSR rows (``_kernel.run_sparse_steps``) -------------------------------------------------------


def sparse_rows(loss, n=240, d=12, density=0.3, seed=0):
    """CSR rows of norm <= 1 with about ``density * d`` stored entries, every fifth row empty."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    X[::5] = 0.0
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = np.where(rng.random(n) < 0.5, 1, -1) if loss.task == "binary" else X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    return sp.csr_matrix(X), y


def stored_per_batch(X, order, sizes, cycle=False):
    """The number of stored entries of each batch (``run_sparse_steps`` takes its dense route above ``p``)."""
    counts, start, per_row = [], 0, np.diff(X.indptr)
    for size in sizes:
        start = 0 if cycle and start + size > order.size else start
        counts.append(int(per_row[order[start:start + size]].sum()))
        start += size
    return np.array(counts)


@pytest.mark.parametrize("loss", BINARY + REGRESSION, ids=lambda loss: repr(loss)[:40])
@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("cycle", [False, True], ids=["batches", "full_batches"])
@pytest.mark.parametrize("radius, l2", [(0.3, 0.05), (None, 0.1), (1.0, 0.0)])
def test_csr_kernel_gives_the_reference_iterates(loss, average, cycle, radius, l2):
    X, y = sparse_rows(loss)
    assert np.any(np.diff(X.indptr) == 0)  # empty rows
    if cycle:  # passes over all the rows, every step dense (more stored entries than columns)
        batches = full_batches(X, y, 30)
    else:  # batches of one row, then of 3 (at most p stored entries) and 10 (more): both routes of the kernel
        order = np.random.default_rng(2).permutation(X.shape[0])
        sizes = np.array([1] * 120 + [3] * 20 + [10] * 6)
        batches = iter_batches(X, y, order, sizes)
        stored = stored_per_batch(X, order, sizes)
        assert np.any((sizes > 1) & (stored <= X.shape[1])) and np.any(stored > X.shape[1])
    T = batches.batch_sizes.size
    gradient = core.margin_gradient(loss, l2)
    assert core.uses_kernel(gradient, batches, np.zeros(X.shape[1]))
    steps = np.linspace(0.5, 0.05, T)
    stds = np.where(np.arange(T) % 3 == 0, 0.0, np.linspace(0.2, 0.6, T))
    args = lambda: (steps, stds, np.zeros(X.shape[1]), radius, np.random.default_rng(7))  # noqa: E731
    fast = core.projected_noisy_sgd(gradient, batches, *args(), average=average)
    reference = core.reference_projected_noisy_sgd(gradient, batches, *args(), average=average)
    assert np.linalg.norm(reference) > 0.01  # a non-trivial run
    np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12)


@pytest.mark.parametrize("rows", ["dense", "csr"])
def test_full_batches_read_the_rows_in_sequence_without_an_order_array(rows):
    # full_batches holds no index array of n entries: the kernels read an empty order as the rows
    # in sequence, the same iterates, bit for bit, as the explicit order arange(n)
    X, y = data(LogisticLoss(), n=200) if rows == "dense" else sparse_rows(LogisticLoss())
    batches = full_batches(X, y, 20)
    assert batches.order is None and batches.n_order == X.shape[0]
    explicit = RowBatches(X, y, np.arange(X.shape[0]), batches.batch_sizes, cycle=True)
    gradient = core.margin_gradient(LogisticLoss(), 0.01)
    steps, stds = np.full(20, 0.5), np.linspace(0.0, 0.3, 20)
    runs = [core.projected_noisy_sgd(gradient, b, steps, stds, np.zeros(X.shape[1]), 1.0, np.random.default_rng(3))
            for b in (batches, explicit)]
    assert np.linalg.norm(runs[0]) > 0.01
    np.testing.assert_array_equal(runs[0], runs[1])


def test_the_csr_kernels_sparse_route_holds_a_derivative_per_row_that_stores_an_entry():
    # batches of 120 rows storing at most p = 12 entries (most rows empty) take the sparse route
    # with a work buffer of p + 64 entries (a block of the dense route), not p + 120: the empty
    # rows update nothing
    X, y = sparse_rows(LogisticLoss(), n=480, d=12, density=0.2)
    keep = np.zeros(480, dtype=bool)
    keep[3::40] = True  # rows that store entries (every fifth row is empty)
    X = sp.csr_matrix(X.toarray() * keep[:, None])
    sizes = np.array([120, 120, 120, 120])
    order = np.arange(480)[::-1].copy()  # three rows that store entries in every batch
    assert np.all(stored_per_batch(X, order, sizes) <= 12) and np.all(stored_per_batch(X, order, sizes) > 0)
    assert _kernel.sparse_work_size(12, 120) == 12 + 64
    batches = iter_batches(X, y, order, sizes)
    gradient = core.margin_gradient(LogisticLoss(), 0.05)
    args = lambda: (np.full(4, 0.5), np.array([0.0, 0.2, 0.0, 0.3]), np.zeros(12), 0.5, np.random.default_rng(7))  # noqa: E731
    fast = core.projected_noisy_sgd(gradient, batches, *args())
    reference = core.reference_projected_noisy_sgd(gradient, batches, *args())
    assert np.linalg.norm(reference) > 0.01
    np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12)


@pytest.mark.parametrize("average", [False, True])
def test_csr_kernel_keeps_the_projection_exact_over_long_noiseless_runs(average):
    # Snowball's pooled noise and Phased-SGD's noiseless phases: thousands of O(nnz) steps between
    # two dense ones, with the projection active at most steps; ||w||**2 is carried incrementally
    # between them, the scale of w by products (run_sparse_steps' docstring).
    X, y = sparse_rows(LogisticLoss(), n=6000, d=40, density=0.1, seed=3)
    sizes = np.ones(6000, dtype=np.int64)
    steps = np.full(6000, 0.5)
    gradient = core.margin_gradient(LogisticLoss(), 0.01)
    for stds in (np.zeros(6000), core.pool_noise(steps, np.full(6000, 0.5), 16)):
        batches = iter_batches(X, y, np.random.default_rng(4).permutation(6000), sizes)
        args = lambda: (steps, stds, np.zeros(40), 0.2, np.random.default_rng(5))  # noqa: E731
        fast = core.projected_noisy_sgd(gradient, batches, *args(), average=average)
        reference = core.reference_projected_noisy_sgd(gradient, batches, *args(), average=average)
        np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12)
    unconstrained = core.reference_projected_noisy_sgd(gradient, batches, steps, np.zeros(6000), np.zeros(40), None,
                                                       np.random.default_rng(5))
    assert np.linalg.norm(unconstrained) > 1.0  # far outside the ball of radius 0.2: the projection is active


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("l2", [1.0, 1.9], ids=["w zeroed", "w flipped"])
def test_csr_kernel_folds_a_vanishing_scale(l2, average):
    # eta * l2 = 1 zeroes w (scale 0); 1.9 flips it and shrinks it by 0.9 a step, below 2**-100
    # after 660 steps (below 1/2 after 7 when the iterates are summed): the kernel folds the
    # scale into w instead of dividing by it.
    X, y = sparse_rows(LogisticLoss(), n=900)
    gradient = core.margin_gradient(LogisticLoss(), l2)
    batches = iter_batches(X, y, np.arange(900), np.ones(900, dtype=np.int64))
    args = lambda: (np.ones(900), np.zeros(900), np.zeros(12), None, np.random.default_rng(0))  # noqa: E731
    fast = core.projected_noisy_sgd(gradient, batches, *args(), average=average)
    reference = core.reference_projected_noisy_sgd(gradient, batches, *args(), average=average)
    assert np.all(np.isfinite(fast)) and np.linalg.norm(reference) > 1e-3  # (an average of flips is small)
    np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12)


def test_csr_kernel_reads_either_index_type_csr_arrays_and_duplicate_entries():
    X, y = sparse_rows(HingeLoss(), n=60)
    same = [sp.csr_array(X)]  # the same arrays: the same arithmetic
    for indices, indptr in [(np.int64, np.int64), (np.int32, np.int64)]:
        Z = X.copy()
        Z.indices, Z.indptr = X.indices.astype(indices), X.indptr.astype(indptr)
        same.append(Z)
    # not canonical: every stored entry as two halves, in decreasing column order
    pieces = [slice(X.indptr[i], X.indptr[i + 1]) for i in range(60)]
    split = sp.csr_matrix((np.concatenate([np.tile(X.data[r][::-1] / 2, 2) for r in pieces]),
                           np.concatenate([np.tile(X.indices[r][::-1], 2) for r in pieces]),
                           2 * X.indptr), shape=X.shape)
    assert not split.has_canonical_format
    np.testing.assert_array_equal(split.toarray(), X.toarray())
    gradient = core.margin_gradient(HingeLoss(), 0.1)
    sizes = np.array([1] * 40 + [4] * 5)

    def run(Z):
        batches = iter_batches(Z, y, np.arange(60), sizes)
        assert core.uses_kernel(gradient, batches, np.zeros(12))
        return core.projected_noisy_sgd(gradient, batches, np.full(45, 0.3), np.full(45, 0.2), np.zeros(12), 0.5,
                                        np.random.default_rng(1))

    expected = run(X)
    assert np.linalg.norm(expected) > 0.01
    for Z in same:
        np.testing.assert_array_equal(run(Z), expected)
    np.testing.assert_allclose(run(split), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("breach", ["column", "negative", "indptr"])
def test_csr_kernel_refuses_arrays_that_point_outside_x(breach):
    # The kernel writes where the indices point: a malformed matrix is refused before it runs.
    X, y = sparse_rows(LogisticLoss(), n=20)
    X = X.copy()
    if breach == "indptr":
        X.indptr[5] = X.indptr[6] + 1  # decreasing
    else:
        X.indices[3] = 12 if breach == "column" else -1
    batches = iter_batches(X, y, np.arange(20), np.ones(20, dtype=np.int64))
    with pytest.raises(ValueError, match=r"not a valid CSR matrix of shape \(20, 12\)"):
        core.projected_noisy_sgd(core.margin_gradient(LogisticLoss()), batches, np.ones(20), np.zeros(20),
                                 np.zeros(12), 1.0, np.random.default_rng(0))


def test_dispatch_rule_takes_csr_rows_of_float64_only():
    X, y = sparse_rows(LogisticLoss(), n=20)
    gradient = core.margin_gradient(LogisticLoss())
    sizes = np.ones(20, dtype=np.int64)
    assert core.uses_kernel(gradient, iter_batches(X, y, np.arange(20), sizes), np.zeros(12))
    assert core.uses_kernel(gradient, full_batches(sp.csr_array(X), y, 3), np.zeros(12))
    for other in (X.tocsc(), X.tocoo(), X.astype(np.float32)):
        assert not core.uses_kernel(gradient, iter_batches(other, y, np.arange(20), sizes), np.zeros(12))
    assert not core.uses_kernel(gradient, iter_batches(X, y, np.arange(20), sizes), np.zeros(11))


@pytest.mark.parametrize("algorithm", ["snowball", "phased_sgd"])
def test_estimator_fits_csr_rows_on_the_csr_kernel_to_the_dense_fit(monkeypatch, algorithm):
    calls = {"run_steps": 0, "run_sparse_steps": 0}

    def spy(name):
        real = getattr(_kernel, name)

        def counted(*args):
            calls[name] += 1
            return real(*args)

        monkeypatch.setattr(_kernel, name, counted)

    spy("run_steps")
    spy("run_sparse_steps")
    X, _ = sparse_rows(LogisticLoss(), n=3000, d=20, seed=6)
    y = np.where(X @ np.linspace(-1.0, 1.0, 20) > 0, 1, 0)
    params = dict(algorithm=algorithm, feature_scaling=None, data_norm=1.0, classes=[0, 1], random_state=0)
    dense = DPLogisticRegression(**params, accountant=PrivacyAccountant()).fit(X.toarray(), y)
    on_dense = dict(calls)
    assert on_dense["run_steps"] >= 1 and on_dense["run_sparse_steps"] == 0
    csr = DPLogisticRegression(**params, accountant=PrivacyAccountant()).fit(X, y)
    assert calls == {"run_steps": on_dense["run_steps"], "run_sparse_steps": on_dense["run_steps"]}
    np.testing.assert_allclose(csr.coef_, dense.coef_, rtol=0, atol=1e-9)
    np.testing.assert_allclose(csr.intercept_, dense.intercept_, rtol=0, atol=1e-9)
    assert np.linalg.norm(dense.coef_) > 1e-3 and csr.dp_event_ == dense.dp_event_


# -- the estimators' clipped copy, gathered in a random order -----------------------------------------


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), d=st.integers(1, 9), bound=st.floats(0.1, 3.0), fill=st.sampled_from([None, 0.7]),
       seed=st.integers(0, 1000))
def test_gathered_clipped_rows_are_the_reference_rows_in_that_order(n, d, bound, fill, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.uniform(0.0, 2.0, (n, 1))
    order = rng.permutation(n)
    fast = layout_of(X).clipped_rows_in_order(X, order, bound, fill)  # C-contiguous: the compiled gather
    by_blocks = DENSE.clipped_rows_in_order(np.asfortranarray(X), order, bound, fill)  # numpy blocks
    reference = layout_of(X[order]).clip_rows(X[order], bound)
    if fill is not None:
        reference = np.column_stack([reference, np.full(n, fill)])
    np.testing.assert_allclose(fast, reference, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(by_blocks, reference, rtol=1e-14, atol=1e-15)
    assert np.all(np.linalg.norm(fast[:, :d], axis=1) <= bound * (1 + 1e-12))


def test_gathered_rows_refuse_indices_outside_x():
    X = np.ones((4, 2))
    for order in (np.array([0, 1, 4]), np.array([-1, 0]), np.zeros((2, 2), dtype=int)):
        with pytest.raises(ValueError, match="order must be a vector of indices"):
            layout_of(X).clipped_rows_in_order(X, order, 1.0)


@pytest.mark.parametrize("algorithm, in_sequence", [("snowball", True), ("phased_sgd", True), ("noisy_gd", False)])
def test_estimators_shuffle_the_clipped_copy_and_solvers_that_shuffle_read_it_in_sequence(
    monkeypatch, algorithm, in_sequence
):
    # The rows handed to the solver are the clipped rows in a uniformly random order (a
    # permutation of them, labels moved with them); solvers that would draw an order are given
    # the identity instead, the others are not asked for one.
    from skdpsco.solvers import ALGORITHMS

    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    solver = ALGORITHMS[algorithm]
    seen = {}

    def spy(self, plan, rows, targets, problem, generator, **kwargs):
        seen.update(rows=rows.copy(), targets=targets.copy(), kwargs=kwargs)
        return original(self, plan, rows, targets, problem, generator, **kwargs)

    original = type(solver).run
    monkeypatch.setattr(type(solver), "run", spy)
    DPLogisticRegression(algorithm=algorithm, epsilon=5.0, random_state=0, accountant=PrivacyAccountant(),
                         feature_scaling=None).fit(X, y)
    assert getattr(solver, "shuffles_rows", False) is in_sequence
    if in_sequence:
        np.testing.assert_array_equal(seen["kwargs"]["order"], np.arange(400))
    else:
        assert seen["kwargs"] == {}
    clipped = np.column_stack([layout_of(X).clip_rows(X, 1.0), np.ones(400)])
    match = {tuple(row): label for row, label in zip(np.round(clipped, 12), y)}
    assert not np.array_equal(seen["rows"], clipped)  # shuffled ...
    assert sorted(map(tuple, np.round(seen["rows"], 12))) == sorted(match)  # ... the same rows
    assert [match[tuple(row)] for row in np.round(seen["rows"], 12)] == list(seen["targets"])  # labels follow


@pytest.mark.parametrize("layout", [np.ascontiguousarray, np.asfortranarray], ids=["kernel", "reference"])
def test_rows_whose_squared_norm_overflows_are_clipped_not_zeroed(layout):
    X = layout(np.array([[3e200, 4e200], [0.3, 0.4], [1e300, -1e300]]))
    rows = layout_of(X).clipped_rows_in_order(X, np.arange(3), 1.0, fill=2.0)
    np.testing.assert_allclose(rows, [[0.6, 0.8, 2.0], [0.3, 0.4, 2.0], [2**-0.5, -(2**-0.5), 2.0]], rtol=1e-15)


@pytest.mark.parametrize("layout", [np.ascontiguousarray, np.asfortranarray], ids=["kernel", "reference"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rows_are_refused_and_nothing_is_charged(layout, bad):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    X[[7, 150], 2] = bad
    with pytest.raises(ValueError, match=r"^Input X contains NaN or infinity\. Remove"):
        layout_of(layout(X)).clipped_rows_in_order(layout(X), rng.permutation(300), 1.0, fill=1.0)
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match="NaN or infinity"):
        DPLogisticRegression(accountant=ledger).fit(layout(X), np.where(X[:, 0] > 0, 1, 0))
    assert ledger.history == ()


def test_row_order_accepts_permutations_only():

    rng = np.random.default_rng(0)
    assert np.array_equal(row_order(4, rng, np.array([2, 0, 3, 1])), [2, 0, 3, 1])
    assert np.array_equal(row_order(3, rng, [0.0, 2.0, 1.0]), [0.0, 2.0, 1.0])
    for bad in ([0, 0, 2], [0, 1, 3], [-1, 0, 1], [0, 1], [0.0, 0.0, 1.0]):
        with pytest.raises(ValueError, match="permutation"):
            row_order(3, rng, np.array(bad))


class _WrittenOnDemand:
    """Rows of which only those asked for are written: ``rows`` starts as NaN, and each call
    ``written(stop)`` copies the true rows before ``stop`` in (a reader that reads a row before it
    asks for it reads NaN)."""

    def __init__(self, rows: np.ndarray):
        self.true, self.rows, self.stops = rows, np.full_like(rows, np.nan), []

    def __call__(self, stop: int) -> None:
        self.stops.append(stop)
        self.rows[:stop] = self.true[:stop]


@pytest.mark.parametrize("algorithm", ["phased_sgd", "snowball"])
@pytest.mark.parametrize("in_order", [True, False], ids=["in sequence", "fixed permutation"])
def test_one_pass_solvers_read_rows_still_being_written_only_once_written(algorithm, in_order, monkeypatch):
    """A solver that reads rows as they are written (``reads_rows_progressively``) asks for every
    row before reading it: on rows that are NaN until asked for, it returns the model of the rows
    written in advance, bit for bit, having asked for them chunk by chunk (more than one call,
    so the pass overlaps the writing), never beyond the rows."""
    monkeypatch.setattr(core, "PROGRESS_CHUNK_ROWS", 64)
    rng = np.random.default_rng(3)
    rows = DENSE.clip_rows(rng.normal(size=(1500, 6)), 1.0)
    y = np.where(rng.random(1500) < 0.5, -1.0, 1.0)
    loss = LogisticLoss()
    problem = Problem(n_samples=1500, coef_shape=(6,), loss=loss, constants=loss.constants(1.0, 5.0), radius=5.0,
                      epsilon=1.0, delta=1e-6)
    solver = ALGORITHMS[algorithm]
    assert solver.reads_rows_progressively
    plan = solver.plan(problem)
    order = np.arange(1500) if in_order else np.random.default_rng(4).permutation(1500)
    expected = solver.run(plan, rows, y, problem, np.random.default_rng(5), order=order).coef
    written = _WrittenOnDemand(rows)
    got = solver.run(plan, written.rows, y, problem, np.random.default_rng(5), order=order, rows_written=written).coef
    np.testing.assert_array_equal(got, expected)
    assert len(written.stops) > 2 and max(written.stops) <= 1500


def test_kernel_chunks_cover_the_steps_in_order_within_their_limits():
    """:func:`~skdpsco.solvers._core.kernel_chunks`: consecutive slices covering every step once,
    each at most ``max_steps`` steps and ``max_rows`` rows unless one batch alone exceeds it."""
    sizes = np.array([1, 1, 5, 40, 3, 3, 100, 2, 2, 2, 2])
    chunks = core.kernel_chunks(sizes, 4, 10)
    assert [c.start for c in chunks] == [0, *[c.stop for c in chunks[:-1]]] and chunks[-1].stop == sizes.size
    for chunk in chunks:
        assert chunk.stop - chunk.start <= 4
        assert sizes[chunk].sum() <= 10 or chunk.stop - chunk.start == 1
    assert core.kernel_chunks(sizes, 4) == [slice(0, 4), slice(4, 8), slice(8, 12)]


def test_rows_in_progress_waits_for_the_blocks_before_a_row_in_order():
    """:class:`skdpsco.rows.RowsInProgress`: ``wait(stop)`` waits for exactly the blocks holding
    the rows before ``stop`` (each once), raises what a block's task raised, and ``wait()`` for all."""
    from concurrent.futures import Future

    from skdpsco.rows import RowsInProgress

    futures = [Future() for _ in range(4)]
    for future in futures[:2]:
        future.set_result(None)
    futures[3].set_exception(RuntimeError("block 3"))
    progress = RowsInProgress(futures, block_rows=10, n_rows=35)
    progress.wait(20)  # blocks 0 and 1 only: block 2 is unfinished and would block
    futures[2].set_result(None)
    progress.wait(30)
    with pytest.raises(RuntimeError, match="block 3"):
        progress.wait()
