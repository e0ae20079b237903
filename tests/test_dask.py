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
from skdpsco.solvers import _core  # noqa: E402


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
        (da.from_array(X, chunks=(50, 5)), lazy_y, {"algorithm": "phased_sgd"}, "does not run on Dask"),
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
    assert not _core.is_dask(np.zeros(3))


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
    # A Dask fit maps each block by the compiled kernel (skdpsco.solvers._kernel.map_block): the
    # numpy maps' arithmetic entry by entry, the norms summed in another order. Clipped rows,
    # standardised rows beyond the clip, and an intercept column.
    from skdpsco import _dask
    from skdpsco.linear_model._scaling import divide_by_powers_of_two, standardised
    from skdpsco.solvers._core import clip_rows

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
    from skdpsco.linear_model._scaling import divide_by_powers_of_two
    from skdpsco.solvers import _kernel

    raw = np.ones((5, 3))
    raw[2, 1] = 1e300
    scales = np.array([1.0, 2.0**-100, 1.0])
    maps = ((divide_by_powers_of_two, (scales,)),)
    rows = _dask.Rows(da.from_array(raw, chunks=(5, -1)), maps)
    assert _kernel.map_block(raw, np.empty((5, 3)), *rows.spec[3], 0.0, False) == 2
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
    compiled = _dask.magnitude_counts(rows)
    np.testing.assert_array_equal(compiled, _scaling.magnitude_counts(X))
    assert compiled[:, 0].sum() > 0 and compiled[:, -1].sum() > 0  # the clamped ends are reached
