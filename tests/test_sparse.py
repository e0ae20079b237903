"""Sparse input (issue 16 item 1): CSR and CSC rows run every algorithm natively, to the dense
path's model and event where the two paths are the same computation, without densifying."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant
from skdpsco.linear_model import _scaling
from skdpsco.losses import LogisticLoss
from skdpsco.smoothing import smooth
from skdpsco.solvers import ALGORITHMS, Problem, select_algorithm
from skdpsco.solvers import _core as core
from skdpsco.rows import CSR, DENSE, RowBatches, _csr, csr_row_block, full_batches, layout_of


def sparse_data(n=240, d=16, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.25) * 3.0
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    y3 = np.digitize(X[:, 0] + X[:, 1], [-0.5, 0.5])
    target = X[:, 0] - X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y, y3, target


def fit(estimator, X, y, sample_weight=None, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = estimator(random_state=0, accountant=PrivacyAccountant(), epsilon=2.0, **params)
        return model.fit(X, y, sample_weight=sample_weight)


def needs(algorithm, estimator):
    """Parameters an algorithm needs beyond the defaults, or None when it does not run this estimator."""
    if algorithm == "newton" and estimator is not DPLogisticRegression:
        return None
    if algorithm == "objective_perturbation" and estimator is DPLpRegression:
        return None
    return {"alpha": 0.1} if algorithm == "strongly_convex" else {}


CASES = [(estimator, algorithm) for estimator in (DPLogisticRegression, DPHingeSVM, DPLpRegression)
         for algorithm in ["auto", *sorted(ALGORITHMS)] if needs(algorithm, estimator) is not None]


@pytest.mark.parametrize("estimator, algorithm", CASES)
def test_every_algorithm_fits_csr_rows_to_the_dense_model_and_event(estimator, algorithm):
    # Same seed, same rows: the dense and CSR paths are the same computation (no feature scaling,
    # a public row bound), up to the order of floating-point sums.
    X, y, _, target = sparse_data()
    labels = target if estimator is DPLpRegression else y
    params = dict(algorithm=algorithm, feature_scaling=None, data_norm=4.0, **needs(algorithm, estimator))
    if estimator is DPLpRegression:
        params["y_bound"] = 3.0
    dense = fit(estimator, X, labels, **params)
    csr = fit(estimator, sp.csr_matrix(X), labels, **params)
    assert csr.dp_event_ == dense.dp_event_ and csr.epsilon_ == dense.epsilon_
    assert csr.algorithm_ == dense.algorithm_
    np.testing.assert_allclose(csr.coef_, dense.coef_, rtol=0, atol=1e-9)
    np.testing.assert_allclose(csr.intercept_, dense.intercept_, rtol=0, atol=1e-9)
    assert np.linalg.norm(dense.coef_) > 1e-3  # a model, not zeros


@pytest.mark.parametrize("estimator", [DPLogisticRegression, DPHingeSVM, DPLpRegression])
def test_private_row_bound_and_weights_and_classes_on_csr_rows(estimator):
    X, y, y3, target = sparse_data(seed=1)
    labels = {DPLogisticRegression: y3, DPHingeSVM: y3, DPLpRegression: target}[estimator]
    weights = np.random.default_rng(2).random(X.shape[0])
    params = dict(data_norm="private", feature_scaling=None)
    dense = fit(estimator, X, labels, **params)
    csr = fit(estimator, sp.csr_matrix(X), labels, **params)
    np.testing.assert_allclose(csr.coef_, dense.coef_, rtol=0, atol=1e-9)
    assert csr.data_norm_ == dense.data_norm_ and csr.dp_event_ == dense.dp_event_
    dense = fit(estimator, X, labels, sample_weight=weights, feature_scaling=None)
    csr = fit(estimator, sp.csr_matrix(X), labels, sample_weight=weights, feature_scaling=None)
    np.testing.assert_allclose(csr.coef_, dense.coef_, rtol=0, atol=1e-9)


def test_the_default_on_sparse_rows_releases_one_row_bound_instead_of_per_feature_scaling():
    X, y, _, _ = sparse_data()
    model = fit(DPLogisticRegression, sp.csr_matrix(X), y)
    assert model.standardisation_ is None and hasattr(model, "data_norm_")
    # the same event as asking the dense path for the private row bound without scaling
    dense = fit(DPLogisticRegression, X, y, data_norm="private", feature_scaling=None)
    assert model.dp_event_ == dense.dp_event_ and model.data_norm_ == dense.data_norm_
    np.testing.assert_allclose(model.coef_, dense.coef_, rtol=0, atol=1e-9)
    assert model.algorithm_ == "noisy_gd"


def test_auto_picks_noisy_gd_for_sparse_rows_above_the_dense_compute_budget():
    loss = LogisticLoss()
    problem = Problem(10**6, (2**18 + 1,), loss, loss.constants(np.sqrt(2.0), 10.0), 10.0, 1.0, 1e-6)
    assert select_algorithm(problem) == "phased_sgd"  # dense: 247 planned passes, above the budget
    assert select_algorithm(problem, rows="sparse") == "noisy_gd"


def test_sparse_fit_never_densifies(monkeypatch):
    X, y, _, _ = sparse_data()
    Xs = sp.csr_matrix(X)

    def refuse(*args, **kwargs):
        raise AssertionError("densified")

    for kind in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix):
        monkeypatch.setattr(kind, "toarray", refuse)
        monkeypatch.setattr(kind, "todense", refuse)
    model = fit(DPLogisticRegression, Xs, y)
    model.predict(Xs)
    fit(DPHingeSVM, Xs, y, algorithm="phased_sgd")


def test_predictions_on_sparse_and_dense_rows_agree():
    X, y, _, target = sparse_data()
    for estimator, labels in ((DPLogisticRegression, y), (DPLpRegression, target)):
        for rows in (X, sp.csr_matrix(X)):  # a model fitted either way
            model = fit(estimator, rows, labels)
            for other in (X, sp.csr_matrix(X), sp.csc_matrix(X)):
                np.testing.assert_allclose(model.predict(other), model.predict(X), rtol=0, atol=1e-12)
    model = fit(DPLogisticRegression, sp.csr_matrix(X), y)
    np.testing.assert_allclose(model.predict_proba(sp.csr_matrix(X)), model.predict_proba(X), atol=1e-12)


def test_csc_and_non_canonical_csr_give_the_canonical_csr_model_and_are_not_modified():
    X, y, _, _ = sparse_data()
    canonical = sp.csr_matrix(X)
    reference = fit(DPLogisticRegression, canonical, y)
    assert np.array_equal(fit(DPLogisticRegression, sp.csc_matrix(X), y).coef_, reference.coef_)
    # every stored entry split in two halves stored side by side: duplicates (not canonical), which
    # the scaling's histograms would count twice
    rows = np.repeat(np.arange(X.shape[0]), np.diff(canonical.indptr))
    order = np.argsort(np.concatenate([rows, rows]), kind="stable")
    manual = sp.csr_matrix(
        (np.concatenate([canonical.data / 2] * 2)[order], np.concatenate([canonical.indices] * 2)[order],
         np.concatenate([[0], np.cumsum(2 * np.diff(canonical.indptr))])), shape=X.shape)
    manual.has_canonical_format = False
    before = manual.data.copy()
    model = fit(DPLogisticRegression, manual, y)
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=0, atol=1e-12)
    assert np.array_equal(manual.data, before) and manual.nnz == 2 * canonical.nnz


def test_bad_sparse_input_is_refused_before_anything_is_charged():
    X, y, _, _ = sparse_data()
    bad = sp.csr_matrix(X)
    bad.data[3] = np.nan
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match="NaN or infinity"):
        DPLogisticRegression(accountant=ledger).fit(bad, y)
    with pytest.raises(ValueError, match="NaN or infinity"):
        DPLogisticRegression(accountant=ledger).fit(bad.tocsc(), y)
    assert len(ledger.history) == 0


def test_other_sparse_formats_are_converted_to_csr():
    X, y, _, _ = sparse_data()
    reference = fit(DPLogisticRegression, sp.csr_matrix(X), y)
    for kind in (sp.coo_matrix, sp.dia_matrix, sp.csr_array):
        np.testing.assert_array_equal(fit(DPLogisticRegression, kind(X), y).coef_, reference.coef_)


def test_sparse_helpers_match_their_dense_forms():
    X, _, _, _ = sparse_data(n=300, d=9, seed=3)
    X[7] = 0.0  # an empty row
    X[11, :3] = [1e300, -1e300, 5.0]  # a row whose squared norm overflows
    csr = sp.csr_matrix(X)
    np.testing.assert_allclose(layout_of(csr).row_norms(csr), layout_of(X).row_norms(X), rtol=1e-15)
    clipped = CSR.clip_rows(csr.copy(), 2.0)
    np.testing.assert_allclose(clipped.toarray(), layout_of(X).clip_rows(X, 2.0), rtol=1e-15)
    ordered = layout_of(csr).clipped_rows_in_order(csr, np.arange(300)[::-1], 2.0, fill=0.5)
    np.testing.assert_allclose(ordered.toarray(), layout_of(X).clipped_rows_in_order(X, np.arange(300)[::-1], 2.0, fill=0.5))
    scales = 2.0 ** np.array([-60, 3, 0, -2, 1, 0, 0, 5, -1])  # the first overflows row 11
    np.testing.assert_array_equal(layout_of(csr).divide_by_powers_of_two(csr, scales).toarray(),
                                  layout_of(X).divide_by_powers_of_two(X, scales))


def _overflowing_csr(n=300, d=9, seed=3, index_type=np.int32):
    X, _, _, _ = sparse_data(n=n, d=d, seed=seed)
    X[7] = 0.0  # an empty row
    X[11, :3] = [1e300, -1e300, 5.0]  # a row whose squared norm overflows
    X[12, :2] = [1e-200, 3e-201]  # one whose squares underflow
    csr = sp.csr_matrix(X)
    csr.indices, csr.indptr = csr.indices.astype(index_type), csr.indptr.astype(index_type)
    return csr


def _same_csr(a, b) -> None:
    assert a.shape == b.shape
    for part in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(a, part), getattr(b, part))


@pytest.mark.parametrize("index_type", [np.int32, np.int64])
@pytest.mark.parametrize("bound", [np.inf, 2.0])
@pytest.mark.parametrize("fill", [None, 0.5])
def test_sparse_rows_in_order_are_scipys_rows_in_that_order_clipped(index_type, bound, fill):
    csr = _overflowing_csr(index_type=index_type)
    rng = np.random.default_rng(0)
    for order in (rng.permutation(300), rng.integers(0, 300, 500), np.arange(0)):
        reference = csr[order]
        layout_of(reference).clip_rows(reference, bound, out=reference)
        if fill is not None:
            reference = layout_of(reference).with_constant_column(reference, fill)
        _same_csr(layout_of(csr).clipped_rows_in_order(csr, order, bound, fill=fill), reference)


def test_the_intercept_column_is_written_into_the_slots_the_gather_left():
    csr = _overflowing_csr()
    order = np.random.default_rng(1).permutation(300)
    rows = layout_of(csr).clipped_rows_in_order(csr, order, np.inf, spare_column=True)
    _same_csr(rows, csr[order])  # the releases read the features alone
    data, indices = rows.data.base, rows.indices.base
    assert data.size == indices.size == csr.nnz + 300  # one slot per row, after the rows' entries
    appended = layout_of(rows).with_constant_column(rows, 0.75, in_place=True)
    for part, room in ((appended.data, data), (appended.indices, indices)):  # no second copy: the same arrays
        assert part.size == room.size and np.shares_memory(part, room)
    _same_csr(appended, layout_of(csr[order]).with_constant_column(csr[order], 0.75))
    ends = appended.indptr[1:] - 1  # the slot: the last entry of every row
    np.testing.assert_array_equal(appended.indices[ends], 9)
    np.testing.assert_array_equal(appended.data[ends], 0.75)


def test_a_constant_column_without_room_is_built_in_new_arrays():
    csr = _overflowing_csr()
    before = csr.copy()
    appended = layout_of(csr).with_constant_column(csr, 0.75, in_place=True)  # no slots: a copy
    _same_csr(csr, before)
    _same_csr(appended, layout_of(before).with_constant_column(before, 0.75))
    assert not np.shares_memory(appended.data, csr.data)


def test_the_sparse_gather_refuses_non_finite_entries():
    csr = _overflowing_csr()
    csr.data[5] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        layout_of(csr).clipped_rows_in_order(csr, np.arange(300), np.inf, spare_column=True)


def test_sparse_row_blocks_and_the_in_place_division_do_not_depend_on_the_blocks(monkeypatch):
    csr = _overflowing_csr()
    scales = 2.0 ** np.array([-60, 3, 0, -2, 1, 0, 0, 5, -1])  # the first overflows row 11
    reference = DENSE.divide_by_powers_of_two(csr.toarray(), scales)
    norms, clipped = layout_of(csr).row_norms(csr), layout_of(csr).clip_rows(csr, 2.0)  # in blocks of all the rows
    monkeypatch.setattr(_csr, "SPARSE_BLOCK_ENTRIES", 7)  # blocks of a few rows, one row where it stores more
    blocks = list(_csr.sparse_row_blocks(csr))
    assert len(blocks) > 50 and blocks[-1][0].stop == 300
    assert all(b.stop - b.start == 1 or e.stop - e.start <= 7 for b, e in blocks)
    data = csr.data
    divided = layout_of(csr).divide_by_powers_of_two(csr, scales, out=csr)
    assert divided is csr and csr.data is data  # in place: the rows' own arrays
    np.testing.assert_array_equal(divided.toarray(), reference)
    np.testing.assert_array_equal(CSR.row_norms(_overflowing_csr()), norms)
    _same_csr(CSR.clip_rows(_overflowing_csr(), 2.0), clipped)


def traced_peak_over_X(estimator, X, y) -> float:
    """The peak traced memory of ``fit(estimator, X, y)`` over the bytes of the CSR ``X``'s arrays,
    after a first fit (imports and caches outside the measurement)."""
    import tracemalloc

    fit(estimator, X, y)
    tracemalloc.start()
    try:
        fit(estimator, X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)


def test_a_sparse_fit_holds_one_copy_of_the_rows():
    rng = np.random.default_rng(0)
    X = sp.random(2000, 500, density=0.3, format="csr", random_state=0, data_rvs=rng.standard_normal)
    y = (X[:, 0].toarray().ravel() + rng.standard_normal(2000) > 0).astype(int)
    assert traced_peak_over_X(DPLogisticRegression, X, y) < 1.5  # two copies (rows, then rows with their intercept column): 2.2


@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_the_sparse_scaled_gram_is_scipys_product_bit_for_bit(index_type):
    from skdpsco import rows as fused_rows

    rng = np.random.default_rng(3)
    csr = sp.random(400, 12, density=0.3, format="csr", random_state=3, data_rvs=rng.standard_normal)
    csr.data *= 10.0 ** rng.integers(-8, 8, csr.nnz)  # magnitudes whose sums round differently in another order
    csr.indices, csr.indptr = csr.indices.astype(index_type), csr.indptr.astype(index_type)
    factors = rng.random(400) * (rng.random(400) < 0.9)  # some rows weigh nothing
    scaled = _csr.scale_sparse_rows(csr, factors)
    expected = (scaled.T @ scaled).toarray()
    np.testing.assert_array_equal(fused_rows.sparse_scaled_gram(csr, factors), expected)
    np.testing.assert_allclose(expected, (csr.toarray() * factors[:, None]).T @ (csr.toarray() * factors[:, None]),
                               rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    with pytest.raises(ValueError, match="one entry per row"):
        fused_rows.sparse_scaled_gram(csr, factors[:-1])


def test_a_csr_row_block_is_a_view_of_the_rows():
    csr = _overflowing_csr()
    block = csr_row_block(csr, slice(40, 90))
    _same_csr(block, csr[40:90])
    assert np.shares_memory(block.data, csr.data) and np.shares_memory(block.indices, csr.indices)
    block.data[:] = 0.0  # the rows' own entries
    assert not csr[40:90].data.any()


def test_newtons_sparse_pass_is_the_numpy_blocks_bit_for_bit():
    """The CSR Newton pass (row blocks viewed in place, the Hessian from the compiled sums)
    gives the values of scipy's products on copied blocks, the computation it replaces."""
    from scipy.special import expit

    from skdpsco.solvers import newton

    X, y, _, _ = sparse_data(n=20000, d=9)
    csr = sp.csr_matrix(X)
    labels = np.where(y == 1, 1.0, -1.0)
    w = np.random.default_rng(1).standard_normal(9)
    loss = LogisticLoss()
    gradient, hessian = newton.summed_loss_derivatives(csr, labels, w, loss, True)
    expected_gradient, expected_hessian = np.zeros(9), np.zeros((9, 9))
    for start in range(0, 20000, newton.HESSIAN_BLOCK):
        block, block_labels = csr[start:start + newton.HESSIAN_BLOCK], labels[start:start + newton.HESSIAN_BLOCK]
        margins = block @ w
        expected_gradient += loss.derivative(margins, block_labels) @ block
        scaled = _csr.scale_sparse_rows(block, np.sqrt(expit(margins) * expit(-margins)))
        expected_hessian += (scaled.T @ scaled).toarray()
    assert newton.HESSIAN_BLOCK < 20000
    np.testing.assert_array_equal(gradient, expected_gradient)
    np.testing.assert_array_equal(hessian, expected_hessian)


def _short_rows(n=3000, d=10, seed=5):
    """CSR rows of 0 to 9 stored entries (every count modulo 4, empty rows too), norms below 1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < rng.random((n, 1)))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0) * 1.5
    return sp.csr_matrix(X), rng


@pytest.mark.parametrize("loss_name", ["logistic", "squared", "weighted", "multinomial"])
def test_newton_reads_an_unstored_intercept_column_as_if_stored(loss_name):
    from skdpsco.losses import MultinomialLogisticLoss, PowerLoss, WeightedLoss, weighted_targets
    from skdpsco.solvers import newton

    X, rng = _short_rows()
    fill = 0.6180339887
    stored = layout_of(X).with_constant_column(X, fill)
    y = np.where(rng.random(X.shape[0]) < 0.5, 1.0, -1.0)
    w = rng.standard_normal(X.shape[1] + 1)
    loss = {"logistic": LogisticLoss(), "squared": PowerLoss(2.0), "weighted": WeightedLoss(LogisticLoss()),
            "multinomial": MultinomialLogisticLoss(n_classes=3)}[loss_name]
    if loss_name == "weighted":
        y = weighted_targets(y, rng.random(X.shape[0]))
    if loss_name == "multinomial":
        y, w = rng.integers(0, 3, X.shape[0]), rng.standard_normal((3, X.shape[1] + 1))
    unstored = newton.summed_loss_derivatives(X, y, w, loss, True, intercept=fill)
    expected = newton.summed_loss_derivatives(stored, y, w, loss, True)
    np.testing.assert_array_equal(unstored[0], expected[0])
    np.testing.assert_array_equal(unstored[1], expected[1])
    with pytest.raises(ValueError, match="CSR rows"):
        newton.summed_loss_derivatives(X.toarray(), y, w, loss, True, intercept=fill)


@pytest.mark.parametrize("route", ["full_batches", "small_batches", "reference"])
def test_the_csr_kernel_reads_an_unstored_intercept_column_as_if_stored(route):
    from skdpsco.losses import HingeLoss, PinballLoss

    X, rng = _short_rows()
    fill = 0.6180339887
    stored = layout_of(X).with_constant_column(X, fill)
    y = np.where(rng.random(X.shape[0]) < 0.5, 1.0, -1.0)
    if route == "full_batches":
        sizes, order, loss = np.full(25, X.shape[0]), None, smooth(HingeLoss(), 0.3)
    else:  # batches of 1 to 3 rows: the sparse route at most steps (a batch storing at most p entries)
        sizes = rng.integers(1, 4, 1200)
        order, loss = rng.permutation(X.shape[0]), LogisticLoss()
    if route == "reference":  # a loss without a compiled derivative: batches copied with their column
        loss, y = smooth(PinballLoss(0.3), 0.2), rng.standard_normal(X.shape[0])
    cycle = order is None
    unstored = RowBatches(X, y, order, sizes, cycle=cycle, intercept=fill, layout=CSR)
    expected = RowBatches(stored, y, order, sizes, cycle=cycle)
    gradient = core.margin_gradient(loss, 0.01)
    w0 = np.zeros(X.shape[1] + 1)
    assert core.uses_kernel(gradient, unstored, w0) == (route != "reference") == core.uses_kernel(gradient, expected, w0)
    steps, stds = np.full(sizes.size, 0.4), np.where(np.arange(sizes.size) % 5 == 0, 0.3, 0.0)
    runs = [core.projected_noisy_sgd(gradient, batches, steps, stds, w0, 0.8, np.random.default_rng(9), average=True)
            for batches in (unstored, expected)]
    assert np.abs(runs[1][-1]) > 1e-3  # the intercept moved
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("estimator", [DPLogisticRegression, DPHingeSVM, DPLpRegression])
def test_a_sparse_fit_without_the_intercept_column_stored_is_the_fit_with_it(estimator, monkeypatch):
    from skdpsco.solvers import newton, noisy_gd

    X, y, _, target = sparse_data(n=3000, d=12)
    csr, labels = sp.csr_matrix(X), target if estimator is DPLpRegression else y
    model = fit(estimator, csr, labels)
    assert model.algorithm_ in ("newton", "noisy_gd")
    for solver in (newton.PrivateNewton, noisy_gd.NoisyGD):  # the column stored, in the slots the gather left
        monkeypatch.setattr(solver, "reads_unstored_intercept", lambda self, loss: False)
    stored = fit(estimator, csr, labels)
    np.testing.assert_array_equal(model.coef_, stored.coef_)
    np.testing.assert_array_equal(model.intercept_, stored.intercept_)
    assert model.epsilon_ == stored.epsilon_


def test_a_sparse_fit_of_short_rows_holds_its_copy_and_little_more():
    """10^5 rows of about 6 stored entries: the copy (its intercept column not stored), the
    targets and block-sized temporaries; 1.55 to 1.57 X before the column was left unstored and
    the row-sized temporaries removed."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10**5, 20))
    y = (X[:, 0] + rng.standard_normal(10**5) > 0).astype(int)
    csr = sp.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))
    for estimator, labels in ((DPLogisticRegression, y), (DPHingeSVM, y), (DPLpRegression, X[:, 0])):
        assert traced_peak_over_X(estimator, csr, labels) < 1.3, estimator.__name__


def test_dense_rows_refuse_an_unstored_intercept_column_on_every_path():
    # only CSR rows carry an intercept column they do not store: full batches, Newton's passes and
    # the compiled loop over dense rows each refuse one instead of reading rows without it
    from skdpsco.solvers.newton import summed_loss_derivatives

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 3)), rng.choice([-1.0, 1.0], size=30)
    with pytest.raises(ValueError, match="dense rows store their own"):
        full_batches(X, y, 2, intercept=1.0)
    with pytest.raises(ValueError, match="dense rows store their own"):
        summed_loss_derivatives(X, y, np.zeros(4), LogisticLoss(), True, intercept=1.0)
    batches = RowBatches(X, y, None, np.full(2, 30), cycle=True, intercept=1.0, layout=DENSE)
    assert core.uses_kernel(core.margin_gradient(LogisticLoss()), batches, np.zeros(4))
    with pytest.raises(ValueError, match="dense rows store their own"):
        core.projected_noisy_sgd(core.margin_gradient(LogisticLoss()), batches, np.full(2, 0.1), np.zeros(2),
                                 np.zeros(4), None, np.random.default_rng(0))
