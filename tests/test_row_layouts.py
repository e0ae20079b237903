"""The row source's three layouts (:mod:`skdpsco.rows`): the dispatch, the methods they share, and the
same rows read alike by each."""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsco import rows
from skdpsco.rows import _layout

SHARED = ("name", "lazy", "unstored_columns", "fused", "canonical", "features", "leading_rows", "clip_rows",
          "row_norms", "divide_by_powers_of_two", "block_sum", "owns_blocks", "row_source")
"""What every layout provides: the code above the rows calls these on any input."""

IN_MEMORY = ("clipped_rows_in_order", "row_block", "scaled_gram", "weighted_gram", "kernel_reads", "kernel_arrays",
             "in_layout", "stored_values", "row_squares", "scaled_row_norms", "clip_factors")
"""What the dense and the CSR layouts add: the fit's copy, Newton's blocks, the compiled SGD loop's arrays."""

SCALING = ("magnitude_counts", "column_sums", "centred_square_sums", "standardised")
"""The feature scaling's passes, on the layouts whose rows are standardised (dense and Dask)."""

TARGETS = ("as_floats", "any", "positive_part", "vector_magnitude_counts")
"""The targets' vectors, in memory or lazy."""


def _dask_layout():
    pytest.importorskip("dask.array")
    from skdpsco import _dask

    return _dask.LAYOUT


def test_every_layout_has_the_methods_the_code_above_calls():
    dask_layout = _dask_layout()
    for layout, names in ((rows.DENSE, SHARED + IN_MEMORY + SCALING + TARGETS), (rows.CSR, SHARED + IN_MEMORY),
                          (dask_layout, SHARED + SCALING + TARGETS + ("with_constant_column",))):
        missing = [name for name in names if not hasattr(layout, name)]
        assert not missing, f"{layout.name} lacks {missing}"
    assert [layout.name for layout in (rows.DENSE, rows.CSR, dask_layout)] == ["dense", "sparse", "dask"]
    assert [layout.lazy for layout in (rows.DENSE, rows.CSR, dask_layout)] == [False, False, True]


def test_layout_of_dispatches_on_the_kind_of_the_rows():
    X = np.ones((4, 3))
    assert rows.layout_of(X) is rows.layout_of(np.asfortranarray(X)) is rows.layout_of(X.tolist()) is rows.DENSE
    assert rows.layout_of(sp.csr_matrix(X)) is rows.layout_of(sp.csc_matrix(X)) is rows.CSR
    da = pytest.importorskip("dask.array")
    assert rows.layout_of(da.from_array(X, chunks=2)) is _dask_layout()


def test_lazy_rows_without_the_dask_layout_registered_are_refused(monkeypatch):
    class Lazy:
        is_lazy_rows = True

    monkeypatch.setattr(_layout, "_LAZY", {})
    assert rows.is_lazy(Lazy())
    with pytest.raises(RuntimeError, match="import skdpsco._dask"):
        rows.layout_of(Lazy())


def test_the_three_layouts_read_the_same_rows_alike():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5)) * [1.0, 30.0, 0.01, 4.0, 1e3]
    X[rng.random(X.shape) < 0.4] = 0.0  # zeros, which CSR does not store
    scales = 2.0 ** np.array([0, 5, -7, 2, 10])
    dense = rows.DENSE.clip_rows(rows.DENSE.divide_by_powers_of_two(X, scales), 1.5)
    csr = rows.CSR.clip_rows(rows.CSR.divide_by_powers_of_two(sp.csr_matrix(X), scales), 1.5)
    np.testing.assert_allclose(csr.toarray(), dense, rtol=1e-15, atol=0)
    np.testing.assert_allclose(rows.CSR.row_norms(sp.csr_matrix(X)), rows.DENSE.row_norms(X), rtol=1e-15)
    da = pytest.importorskip("dask.array")
    from skdpsco import _dask

    lazy, _ = _dask.validate(da.from_array(X, chunks=(250, -1)), None)
    layout = rows.layout_of(lazy)
    mapped = layout.clip_rows(layout.divide_by_powers_of_two(lazy, scales), 1.5)
    norms = layout.row_norms(mapped).compute()
    np.testing.assert_allclose(norms, np.linalg.norm(dense, axis=1), rtol=1e-14)
    np.testing.assert_allclose(layout.column_sums(mapped), dense.sum(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(layout.magnitude_counts(lazy, 40), rows.DENSE.magnitude_counts(X, 40))
