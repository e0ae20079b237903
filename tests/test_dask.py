"""Dask collections in fit (issue 16 item 2): per-block sums reduced by Dask, the noise drawn in
the client after the one charge; the same model and event as the in-memory fit."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")

from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant  # noqa: E402
from skdpsco.rows import DENSE, is_lazy  # noqa: E402

from benchmarks.engine import moment_floor  # noqa: E402


def table(n=1200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)) * np.array([1.0, 10.0, 0.1, 1.0, 100.0])
    y = (X[:, 0] + X[:, 1] / 10 > 0).astype(int)
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    target = X[:, 0] - 10 * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y, y3, target


def pair(estimator, X, labels, chunks=250, **params):
    """The in-memory fit and the Dask fit of the same rows, seed and parameters."""
    params = dict(random_state=0, accountant=PrivacyAccountant(), epsilon=2.0, **params)
    if estimator is not DPLpRegression:
        params.setdefault("classes", np.unique(labels))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        memory = estimator(**params).fit(X, labels)
        lazy = estimator(**params).fit(da.from_array(X, chunks=(chunks, 2)), da.from_array(labels, chunks=chunks))
    return memory, lazy


CASES = [
    (DPLogisticRegression, "y", {}),
    (DPLogisticRegression, "y", {"algorithm": "newton"}),
    (DPLogisticRegression, "y3", {}),
    (DPLogisticRegression, "y", {"data_norm": "private"}),
    (DPLogisticRegression, "y", {"fit_intercept": False}),
    (DPLogisticRegression, "y", {"feature_scaling": None, "data_norm": 50.0}),
    (DPHingeSVM, "y3", {}),
    (DPLpRegression, "target", {}),
]


@pytest.mark.parametrize("estimator, labels, params", CASES)
def test_dask_fit_equals_the_in_memory_fit(estimator, labels, params):
    X, y, y3, target = table()
    memory, lazy = pair(estimator, X, {"y": y, "y3": y3, "target": target}[labels], **params)
    assert lazy.dp_event_ == memory.dp_event_ and lazy.epsilon_ == memory.epsilon_
    assert lazy.algorithm_ == memory.algorithm_
    np.testing.assert_allclose(lazy.coef_, memory.coef_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(lazy.intercept_, memory.intercept_, rtol=0, atol=1e-10)
    assert np.linalg.norm(memory.coef_) > 1e-3
    for name in ("feature_scales_", "row_norm_", "n_iter_"):
        np.testing.assert_array_equal(getattr(lazy, name), getattr(memory, name))


def test_a_dask_dataframe_and_series_fit_like_the_array():
    X, y, _, _ = table()
    frame = dd.from_array(X, chunksize=300, columns=[f"f{i}" for i in range(5)])
    labels = dd.from_array(y, chunksize=300)
    params = dict(random_state=0, accountant=PrivacyAccountant(), classes=[0, 1])
    from_frame = DPLogisticRegression(**params).fit(frame, labels)
    params["accountant"] = PrivacyAccountant()
    from_memory = DPLogisticRegression(**params).fit(X, y)
    np.testing.assert_allclose(from_frame.coef_, from_memory.coef_, rtol=0, atol=1e-10)


def test_numpy_labels_with_dask_rows():
    X, y, _, _ = table()
    params = dict(random_state=0, classes=[0, 1])
    lazy = DPLogisticRegression(accountant=PrivacyAccountant(), **params).fit(da.from_array(X, chunks=(400, 5)), y)
    memory = DPLogisticRegression(accountant=PrivacyAccountant(), **params).fit(X, y)
    np.testing.assert_allclose(lazy.coef_, memory.coef_, rtol=0, atol=1e-10)


def bad_inputs():
    X, y, _, _ = table(n=200)
    with_nan = X.copy()
    with_nan[17, 3] = np.nan
    masked = da.from_array(X, chunks=(50, 5))
    masked = masked[masked[:, 0] > -10]  # a boolean mask: unknown chunk sizes
    mixed = dd.from_array(X, chunksize=50, columns=list("abcde")).assign(e="text")
    lazy_y = da.from_array(y, chunks=50)
    return [
        (da.from_array(with_nan, chunks=(50, 5)), lazy_y, {}, "NaN or infinity"),
        (masked, lazy_y, {}, "unknown chunk sizes.*compute_chunk_sizes"),
        (mixed, lazy_y, {}, "non-numeric columns"),
        (da.from_array(X, chunks=(50, 5)), da.from_array(y[:100], chunks=50), {}, "one value per row"),
        (da.from_array(X, chunks=(50, 5)), lazy_y, {"classes": None}, "classes=None with a Dask y"),
        (da.from_array(X, chunks=(50, 5)), da.from_array(y + 5, chunks=50), {}, "not in classes="),
        (da.from_array(X, chunks=(50, 5)), lazy_y, {"algorithm": "phased_erm"}, "does not run on Dask.*held in the client"),
        (da.from_array(X, chunks=(50, 5)), lazy_y, {"algorithm": "stop_pnsgd"}, "does not run on Dask.*secret"),
        (da.from_array(X, chunks=(50, 5)), lazy_y, {"class_weight": {0: 0.5}}, "not supported with Dask"),
    ]


@pytest.mark.parametrize("X, y, params, match", bad_inputs())
def test_bad_dask_input_is_refused_before_anything_is_charged(X, y, params, match):
    ledger = PrivacyAccountant()
    params = {"classes": [0, 1], **params}
    with pytest.raises(ValueError, match=match):
        DPLogisticRegression(accountant=ledger, **params).fit(X, y)
    assert len(ledger.history) == 0


def test_prediction_on_a_dask_array_names_map_blocks():
    X, y, _, _ = table()
    model = DPLogisticRegression(classes=[0, 1], accountant=PrivacyAccountant(), random_state=0).fit(X, y)
    with pytest.raises(TypeError, match="map_blocks"):
        model.predict(da.from_array(X, chunks=(300, 5)))
    lazy = da.from_array(X, chunks=(300, 5)).map_blocks(model.predict, drop_axis=1, dtype=y.dtype)
    np.testing.assert_array_equal(lazy.compute(), model.predict(X))


def test_a_fit_reads_the_rows_a_planned_number_of_times():
    # Every statistic is one pass of block sums: count the passes through the block functions.
    X, y, _, _ = table()
    calls = []
    rows = da.from_array(X, chunks=(300, 5))
    counted = rows.map_blocks(lambda block: calls.append(block.size > 0) or block, dtype=float)
    model = DPLogisticRegression(classes=[0, 1], accountant=PrivacyAccountant(), random_state=0,
                                 algorithm="newton").fit(counted, da.from_array(y, chunks=300))
    blocks = len(rows.chunks[0])
    passes = sum(calls) / blocks
    # the finite check, the labels check (y only), the magnitudes, the sums, the squares, one per Newton step
    assert passes == 4 + model.solver_info_["n_steps"]


def test_the_core_package_never_imports_dask():
    code = (
        "import sys, numpy as np; import skdpsco; "
        "from skdpsco import DPLogisticRegression, PrivacyAccountant; "
        "X = np.random.default_rng(0).normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int); "
        "DPLogisticRegression(classes=[0, 1], accountant=PrivacyAccountant()).fit(X, y); "
        "print(any(name == 'dask' or name.startswith('dask.') for name in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
    assert not is_lazy(np.zeros(3))


def test_fit_on_a_distributed_local_cluster():
    distributed = pytest.importorskip("distributed")
    X, y, _, _ = table()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        lazy = DPLogisticRegression(classes=[0, 1], accountant=PrivacyAccountant(), random_state=0,
                                    algorithm="newton").fit(da.from_array(X, chunks=(300, 5)), da.from_array(y, chunks=300))
    memory = DPLogisticRegression(classes=[0, 1], accountant=PrivacyAccountant(), random_state=0,
                                  algorithm="newton").fit(X, y)
    np.testing.assert_allclose(lazy.coef_, memory.coef_, rtol=0, atol=1e-10)
    assert lazy.dp_event_ == memory.dp_event_


def test_out_of_core_memory_mapped_npy_and_zarr(tmp_path):
    # One machine, data on disk: a memory-mapped .npy file and a zarr store, read block by block.
    X, y, _, _ = table()
    np.save(tmp_path / "X.npy", X)
    mapped = da.from_array(np.load(tmp_path / "X.npy", mmap_mode="r"), chunks=(300, -1))
    params = dict(classes=[0, 1], random_state=0, algorithm="newton")
    memory = DPLogisticRegression(accountant=PrivacyAccountant(), **params).fit(X, y)
    from_disk = DPLogisticRegression(accountant=PrivacyAccountant(), **params).fit(mapped, y)
    np.testing.assert_allclose(from_disk.coef_, memory.coef_, rtol=0, atol=1e-10)
    pytest.importorskip("zarr")
    da.to_zarr(da.from_array(X, chunks=(300, 5)), str(tmp_path / "X.zarr"))
    from_zarr = DPLogisticRegression(accountant=PrivacyAccountant(), **params).fit(da.from_zarr(str(tmp_path / "X.zarr")), y)
    np.testing.assert_allclose(from_zarr.coef_, memory.coef_, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["svm_auto_intercept", "logistic_multinomial", "lad_regression"])
def test_the_dask_path_releases_what_the_audited_in_memory_path_releases(name):
    # The black-box audits (benchmarks/audits.py) run these estimators on their worst-case
    # neighbours in memory. The Dask path gives the same release for every seed on both
    # neighbours, so its output distribution is the audited one: the audit covers it. (A
    # black-box audit through Dask itself costs about 1 s of scheduling per fit: thousands of
    # trials are out of reach of the test suite.)
    from benchmarks import audits

    setup = getattr(audits, name)()
    for dataset in (setup.dataset_0, setup.dataset_1):
        X, y = dataset
        lazy = (da.from_array(np.asarray(X), chunks=(8, -1)), da.from_array(np.asarray(y), chunks=8))
        for seed in range(3):
            expected = setup.statistic(setup.run(dataset, seed))
            assert setup.statistic(setup.run(lazy, seed)) == pytest.approx(expected, abs=1e-10)


def test_secure_mode_on_dask_rows_draws_in_the_client():
    X, y, _, _ = table()
    lazy = (da.from_array(X, chunks=(300, 5)), da.from_array(y, chunks=300))
    secure = DPLogisticRegression(classes=[0, 1], accountant=PrivacyAccountant(), secure_noise=True).fit(*lazy)
    reference = DPLogisticRegression(classes=[0, 1], accountant=PrivacyAccountant(), secure_noise=True).fit(X, y)
    assert secure.dp_event_ == reference.dp_event_ and secure.epsilon_ <= 1.0
    assert secure.score(X, y) > 0.8


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_compiled_maps_equal_the_numpy_maps(dtype):
    # A Dask fit maps each block by the compiled kernel (skdpsco.rows._maps.map_block): the
    # numpy maps' arithmetic entry by entry, the norms summed in another order. Clipped rows,
    # standardised rows beyond the clip, and an intercept column.
    from skdpsco import _dask

    clip_rows, divide_by_powers_of_two, standardised = DENSE.clip_rows, DENSE.divide_by_powers_of_two, DENSE.standardised
    rng = np.random.default_rng(1)
    raw = (rng.standard_normal((3000, 7)) * np.array([1, 10, 0.1, 1, 100, 3, 0.5])).astype(dtype)
    scales = 2.0 ** np.array([0, 3, -4, 0, 7, 2, -1])
    maps = ((clip_rows, (np.inf,)), (divide_by_powers_of_two, (scales,)), (clip_rows, (1.5,)),
            (standardised, (rng.normal(size=7) * 0.1, rng.uniform(0.05, 1, size=7), 1.2)))
    rows = _dask.Rows(da.from_array(raw, chunks=(1000, -1)), maps).with_constant_column(0.75)
    numpy_spec = rows.spec[:3] + (None,)  # no program: the numpy maps
    compiled = _dask._transformed(raw, rows.spec, np.empty((3000, 8)))
    reference = _dask._transformed(raw, numpy_spec, np.empty((3000, 8)))
    assert rows.spec[3] is not None
    np.testing.assert_allclose(compiled, reference, rtol=1e-14, atol=1e-15)
    assert np.all(compiled[:, -1] == 0.75)
    first_clip = np.linalg.norm(raw.astype(float) / scales, axis=1) > 1.5
    assert 0.2 < first_clip.mean() < 0.95  # both branches of the clip are exercised
    exact = ~first_clip
    # unclipped rows differ only through the standardisation's norm (a factor within 1e-15)
    np.testing.assert_allclose(compiled[exact], reference[exact], rtol=1e-15, atol=0)


def test_a_row_the_kernel_hands_back_is_mapped_by_numpy_exactly():
    # An entry that reaches 2**1023 after the division by powers of two: divide_by_powers_of_two
    # rescales its row first (overflow rule); the kernel hands the block back to numpy.
    from skdpsco import _dask
    from skdpsco.rows import _maps

    divide_by_powers_of_two = DENSE.divide_by_powers_of_two
    raw = np.ones((5, 3))
    raw[2, 1] = 1e300
    scales = np.array([1.0, 2.0**-100, 1.0])
    maps = ((divide_by_powers_of_two, (scales,)),)
    rows = _dask.Rows(da.from_array(raw, chunks=(5, -1)), maps)
    assert _maps.map_block(raw, np.empty((5, 3)), *rows.spec[3], 0.0, False) == 2
    mapped = _dask._transformed(raw, rows.spec, np.empty((5, 3)))
    np.testing.assert_array_equal(mapped, divide_by_powers_of_two(raw, scales))
    assert np.all(np.isfinite(mapped))


def test_the_compiled_magnitude_histogram_counts_what_numpy_counts():
    # The feature scaling's histograms of orders of magnitude on Dask rows are counted by the
    # compiled kernel: the same integers as the numpy function, at the bins' edges too (powers of
    # two, sqrt(1/2) times them, subnormals, zeros, beyond the clamped range).
    from skdpsco import _dask
    from skdpsco.linear_model import _scaling

    rng = np.random.default_rng(2)
    X = rng.standard_normal((5000, 6)) * 10.0 ** rng.integers(-30, 30, size=(5000, 6))
    edges = np.ldexp(1.0, np.arange(-60, 60))
    X[:240, 0] = np.concatenate([edges, -edges * np.sqrt(0.5)])
    X[:240, 1] = np.nextafter(X[:240, 0], 0)
    X[:4, 2] = [0.0, -0.0, 5e-324, -1e-310]
    X[::7, 3] = 0.0
    rows = _dask.Rows(da.from_array(X, chunks=(1700, -1)))
    compiled = _dask.magnitude_counts(rows, _scaling.MAGNITUDE_RANGE)
    np.testing.assert_array_equal(compiled, _scaling.magnitude_counts(X))
    assert compiled[:, 0].sum() > 0 and compiled[:, -1].sum() > 0  # the clamped ends are reached


# -- the one-pass solvers, streamed -----------------------------------------------------------------


def stream_indices(chunks, order):
    """The rows of a Dask fit in the order a one-pass solver reads them (:class:`skdpsco._dask.StreamOrder`)."""
    starts = np.concatenate(([0], np.cumsum(chunks)))
    parts = []
    for block in order.blocks:
        size = chunks[block]
        seed = None if order.seeds is None else int(order.seeds[block])
        within = np.arange(size) if seed is None else np.random.default_rng(seed).permutation(size)
        parts.append(starts[block] + within)
    return np.concatenate(parts)


def streamed_pair(estimator, X, labels, chunks, seed=0, **params):
    """The Dask fit and the in-memory fit that reads the same rows in the same order: the in-memory
    fit permutes its rows by the permutation it draws (the first child of the seed's generator,
    ``_fit_steps``), so it is given the rows placed where that permutation takes them to the Dask
    fit's reading order (drawn from the same generator, :func:`skdpsco._dask.stream_order`)."""
    from skdpsco import _dask

    params = dict(random_state=seed, epsilon=2.0, **params)
    if estimator is not DPLpRegression:
        params.setdefault("classes", np.unique(labels))
    read = stream_indices(chunks, _dask.stream_order(chunks, np.random.default_rng(seed).spawn(2)[0]))
    permutation = np.random.default_rng(seed).spawn(2)[0].permutation(X.shape[0])
    X_memory, labels_memory = np.empty_like(X), np.empty_like(labels)
    X_memory[permutation], labels_memory[permutation] = X[read], labels[read]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        memory = estimator(accountant=PrivacyAccountant(), **params).fit(X_memory, labels_memory)
        lazy = estimator(accountant=PrivacyAccountant(), **params).fit(
            da.from_array(X, chunks=(chunks, 2)), da.from_array(labels, chunks=(chunks,)))
    return memory, lazy


UNEVEN = (250, 250, 13, 300, 187, 200)


def streamed_algorithms():
    from skdpsco import _dask

    return sorted(_dask.STREAMED_ALGORITHMS)


@pytest.mark.parametrize("algorithm", streamed_algorithms())
def test_a_streamed_fit_equals_the_in_memory_fit_in_the_same_order(algorithm):
    X, y, _, _ = table()
    memory, lazy = streamed_pair(DPLogisticRegression, X, y, UNEVEN, algorithm=algorithm, alpha=0.01)
    assert lazy.dp_event_ == memory.dp_event_ and lazy.epsilon_ == memory.epsilon_
    assert lazy.algorithm_ == memory.algorithm_ == algorithm
    assert np.linalg.norm(memory.coef_) > 1e-3
    np.testing.assert_allclose(lazy.coef_, memory.coef_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lazy.intercept_, memory.intercept_, rtol=1e-12, atol=1e-12)
    assert lazy.solver_info_ == memory.solver_info_
    np.testing.assert_array_equal(lazy.n_iter_, memory.n_iter_)


STREAMED_CASES = [
    (DPLogisticRegression, "y3", (1200,), {"algorithm": "phased_sgd"}),  # multiclass: the numpy loop
    (DPLogisticRegression, "y", (7,) * 171 + (3,), {"algorithm": "snowball"}),  # batches over many blocks
    (DPLogisticRegression, "y", UNEVEN, {"algorithm": "phased_sgd", "fit_intercept": False, "data_norm": "private"}),
    (DPLogisticRegression, "y", UNEVEN, {"algorithm": "phased_sgd", "solver_options": {"average": True}}),
    (DPHingeSVM, "y", UNEVEN, {"algorithm": "ftrl", "constraint": "l1"}),  # dual averaging
    (DPLpRegression, "target", UNEVEN, {"algorithm": "phased_sgd"}),
]


@pytest.mark.parametrize("estimator, labels, chunks, params", STREAMED_CASES)
def test_streamed_fits_of_other_models_and_layouts(estimator, labels, chunks, params):
    X, y, y3, target = table()
    memory, lazy = streamed_pair(estimator, X, {"y": y, "y3": y3, "target": target}[labels], chunks, **params)
    assert lazy.dp_event_ == memory.dp_event_
    assert np.linalg.norm(memory.coef_) > 1e-3
    np.testing.assert_allclose(lazy.coef_, memory.coef_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lazy.intercept_, memory.intercept_, rtol=1e-12, atol=1e-12)


def test_the_stored_order_at_the_solver_level():
    # A Dask fit reads the blocks in a shuffled order; the row source also reads them as stored:
    # solver.run on the streamed rows equals solver.run on the in-memory rows in the same order.
    from skdpsco import _dask
    from skdpsco.solvers import ALGORITHMS, Problem
    from skdpsco.losses import LogisticLoss

    X, y, _, _ = table()
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    labels = np.where(y == 1, 1.0, -1.0)
    loss = LogisticLoss()
    problem = Problem(n_samples=1200, coef_shape=(5,), loss=loss, constants=loss.constants(1.0, 5.0), radius=5.0,
                      epsilon=1.0, delta=1e-5)
    rows = _dask.validate(da.from_array(X, chunks=(UNEVEN, 5)), labels)
    for name in ("phased_sgd", "snowball", "pnsgd"):
        solver = ALGORITHMS[name]
        plan = solver.plan(problem)
        lazy = solver.run(plan, *rows, problem, np.random.default_rng(4), order=_dask.stream_order(UNEVEN))
        memory = solver.run(plan, X, labels, problem, np.random.default_rng(4), order=np.arange(1200))
        np.testing.assert_allclose(lazy.coef, memory.coef, rtol=1e-12, atol=1e-14)
        assert np.linalg.norm(memory.coef) > 1e-2


def test_a_streamed_fit_computes_every_block_once_per_pass():
    X, y, _, _ = table()
    calls = []
    rows = da.from_array(X, chunks=(300, 5))
    counted = rows.map_blocks(lambda block: calls.append(block.size > 0) or block, dtype=float)
    params = dict(classes=[0, 1], accountant=PrivacyAccountant(), random_state=0)
    for algorithm, streamed_passes in (("phased_sgd", 1), ("multipass_pnsgd", 5)):
        calls.clear()
        DPLogisticRegression(algorithm=algorithm, **params).fit(counted, da.from_array(y, chunks=300))
        # the finite check, the labels check (y only), the magnitudes, the sums, the squares, the passes
        assert sum(calls) / len(rows.chunks[0]) == 4 + streamed_passes


def test_a_streamed_fit_holds_one_block_in_the_client(monkeypatch):
    # 400 000 x 20 float64 rows (64 MB), generated block by block where they are computed (the
    # threaded scheduler: in this process, traced too). The peak of traced allocations from the
    # start of the stream to the end of the fit, above what was held at its start, is the
    # computation of one block (its raw rows,
    # their permutation, the mapped rows: 1.6 MB each), far below the data. (The input checks'
    # block sums before it are Dask's reductions, whose peak depends on its scheduling.)
    import tracemalloc

    from skdpsco import _dask

    n, d, block = 400_000, 20, 10_000
    X = da.random.default_rng(0).standard_normal((n, d), chunks=(block, d))
    y = (X[:, 0] > 0).astype(int)
    start_stream, at_start = _dask.RowStream.__init__, []

    def measured(self, *args):
        tracemalloc.reset_peak()
        at_start.append(tracemalloc.get_traced_memory()[0])  # held before the stream (imports, the model)
        start_stream(self, *args)

    monkeypatch.setattr(_dask.RowStream, "__init__", measured)
    model = DPLogisticRegression(classes=[0, 1], accountant=PrivacyAccountant(), random_state=0, delta=1e-7,
                                 algorithm="phased_sgd")
    tracemalloc.start()
    try:
        model.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1] - at_start[0]
    finally:
        tracemalloc.stop()
    block_bytes = block * (d + 1) * 8
    assert peak < 4 * block_bytes, (peak, block_bytes)  # measured 5.4 MB, 3.2 blocks; the data is 40 blocks
    assert model.score(X[:20_000].compute(), y[:20_000].compute()) > 0.9


def test_a_streamed_fit_on_a_distributed_local_cluster():
    distributed = pytest.importorskip("distributed")
    X, y, _, _ = table()
    lazy = (da.from_array(X, chunks=(300, 5)), da.from_array(y, chunks=300))
    params = dict(classes=[0, 1], random_state=0, algorithm="phased_sgd")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        on_cluster = DPLogisticRegression(accountant=PrivacyAccountant(), **params).fit(*lazy)
    threaded = DPLogisticRegression(accountant=PrivacyAccountant(), **params).fit(*lazy)
    np.testing.assert_allclose(on_cluster.coef_, threaded.coef_, rtol=0, atol=1e-12)
    assert on_cluster.dp_event_ == threaded.dp_event_


def test_the_refusal_names_exactly_the_algorithms_that_run_on_dask():
    from skdpsco import _dask
    from skdpsco.solvers import ALGORITHMS

    X, y, _, _ = table(n=200)
    lazy = (da.from_array(X, chunks=(50, 5)), da.from_array(y, chunks=50))
    assert _dask.ALGORITHMS < set(ALGORITHMS)
    for algorithm in sorted(set(ALGORITHMS) - _dask.ALGORITHMS):
        ledger = PrivacyAccountant()
        with pytest.raises(ValueError, match="does not run on Dask") as error:
            DPLogisticRegression(classes=[0, 1], accountant=ledger, algorithm=algorithm).fit(*lazy)
        assert str(sorted(_dask.ALGORITHMS)) in str(error.value)
        assert len(ledger.history) == 0


def test_secure_mode_streams_with_the_operating_systems_generator():
    # The partition-level shuffle is drawn from the fit's order generator: in secure mode, the
    # operating system's; the event is the in-memory secure fit's. Unseeded, so the budget is
    # large enough that the score bound holds on every draw (epsilon 1 scored 0.8 or less in 7 to
    # 14 % of draws; epsilon 5: at least 0.897 in 200 draws)
    X, y, _, _ = table()
    lazy = (da.from_array(X, chunks=(300, 5)), da.from_array(y, chunks=300))
    params = dict(classes=[0, 1], secure_noise=True, algorithm="phased_sgd", epsilon=5.0)
    secure = DPLogisticRegression(accountant=PrivacyAccountant(), **params).fit(*lazy)
    reference = DPLogisticRegression(accountant=PrivacyAccountant(), **params).fit(X, y)
    assert secure.dp_event_ == reference.dp_event_ and secure.epsilon_ <= 5.0
    assert secure.score(X, y) > 0.8


# -- the scaling's releases read the leading blocks of the order ----------------------------------


@pytest.fixture
def moment_rows_600():
    """Moments of the first 600 rows whatever the budget: three blocks of 200 of the 1200 rows."""
    with moment_floor(600, exact=True):
        yield


@pytest.mark.parametrize("data_norm", [None, 300.0])
def test_the_releases_read_the_leading_blocks_of_the_order_only(moment_rows_600, data_norm):
    from skdpsco import _dask

    X, y, _, _ = table()
    reads = np.zeros(6, dtype=int)

    def count(block, block_id=None):
        reads[block_id[0]] += block.size > 0
        return block

    counted = da.from_array(X, chunks=(200, 5)).map_blocks(count, dtype=float)
    model = DPLogisticRegression(classes=[0, 1], accountant=PrivacyAccountant(), random_state=0, data_norm=data_norm,
                                 algorithm="phased_sgd").fit(counted, da.from_array(y, chunks=200))
    leading = _dask.stream_order((200,) * 6, np.random.default_rng(0).spawn(2)[0]).blocks[:3]
    # every block: the finite check and the solver's pass; the leading three: the releases too
    releases = 2 if data_norm else 3  # (the magnitudes), the sums, the squares
    expected = np.full(6, 2)
    expected[leading] += releases
    np.testing.assert_array_equal(reads, expected)
    full = DPLogisticRegression(classes=[0, 1], random_state=0, data_norm=data_norm,
                                algorithm="phased_sgd").fit(X, y)  # 600 of 1200 rows: the same events
    assert model.dp_event_ == full.dp_event_


@pytest.mark.parametrize("algorithm", ["phased_sgd", "newton"])
def test_a_dask_fit_of_leading_blocks_equals_the_in_memory_fit_of_the_same_leading_rows(moment_rows_600, algorithm):
    # the in-memory fit in the Dask fit's reading order computes its moments over the same 600 rows
    X, y, _, _ = table()
    memory, lazy = streamed_pair(DPLogisticRegression, X, y, (200,) * 6, algorithm=algorithm)
    assert lazy.dp_event_ == memory.dp_event_
    np.testing.assert_allclose(lazy.feature_scales_, memory.feature_scales_, rtol=0)
    np.testing.assert_allclose(lazy.standardisation_[1], memory.standardisation_[1], rtol=1e-12)
    np.testing.assert_allclose(lazy.coef_, memory.coef_, rtol=1e-9, atol=1e-10)


def test_the_moments_cover_whole_blocks():
    from skdpsco.linear_model._scaling import covered_rows

    assert covered_rows([200, 13, 300], 100) == 200
    assert covered_rows([200, 13, 300], 200) == 200
    assert covered_rows([200, 13, 300], 201) == 213
    assert covered_rows([200, 13, 300], 10**6) == 513
