"""The one dispatch on the layout of the rows: which object reads them.

:func:`layout_of` returns the layout of a fit's rows: :data:`~skdpsco.rows._dense.DENSE` for a
numpy array, :data:`~skdpsco.rows._csr.CSR` for a scipy sparse matrix, or the layout that
:mod:`skdpsco._dask` registers (:func:`register_lazy_layout`) for a Dask collection or the lazy
rows of a Dask fit. Every read of the rows in a fit goes through a layout's methods (the package's
design notes list them), so the branches on the layout live here and in the three layouts.

The Dask layout is duck-typed and registered, never imported: Dask is an optional extra that the
core never imports, and :mod:`skdpsco._dask` sits above this package (it imports it).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from ._csr import CSR
from ._dense import DENSE
from ._source import RowBatches

_LAZY = {}
"""``{"layout": the Dask layout}`` once :mod:`skdpsco._dask` is imported (:func:`register_lazy_layout`)."""


def register_lazy_layout(layout) -> None:
    """Record ``layout`` as the layout of lazy rows (:mod:`skdpsco._dask` calls this when imported)."""
    _LAZY["layout"] = layout


def is_lazy(X) -> bool:
    """Whether ``X`` is a Dask collection or the lazy rows of a Dask fit (:class:`skdpsco._dask.Rows`):
    duck-typed, so that the core never imports Dask."""
    return hasattr(X, "__dask_graph__") or getattr(X, "is_lazy_rows", False)


def layout_of(X):
    """The layout that reads ``X`` (module docstring)."""
    if is_lazy(X):
        if "layout" not in _LAZY:
            raise RuntimeError("Dask rows reach the solvers through fit: import skdpsco._dask before passing a "
                               "Dask collection to skdpsco.solvers directly.")
        return _LAZY["layout"]
    return CSR if sparse.issparse(X) else DENSE


def row_source(X, y, n_rows: int, order_rng: np.random.Generator, order=None, rows_written=None):
    """The row source a one-pass solver reads: in-memory rows (:class:`~skdpsco.rows._source.ArrayRows`)
    in ``row_order(n_rows, order_rng, order)``, or the rows of a Dask fit (with ``y`` a Dask
    array) streamed a block at a time (:class:`skdpsco._dask.RowStream`) in the block-level order
    ``order`` (:class:`skdpsco._dask.StreamOrder`; ``None``: one drawn from ``order_rng``). Refuses
    rows that are not the ``n_rows`` the plan was made for.

    Either order is fixed before any row is read and independent of the data: the guarantee of
    every solver that reads its rows here holds for every such order (``feldman.md`` pitfall D5;
    the solvers that stream Dask rows say why in their docstrings, :data:`skdpsco._dask.ALGORITHMS`).
    ``rows_written``: in-memory rows still being written (:class:`~skdpsco.rows._source.ArrayRows`)."""
    if X.shape[0] != n_rows:
        raise ValueError(f"The plan is for {n_rows} rows; got {X.shape[0]}.")
    return layout_of(X).row_source(X, y, n_rows, order_rng, order, rows_written)


def iter_batches(X, y: np.ndarray, order: np.ndarray, batch_sizes) -> RowBatches:
    """Consecutive disjoint row blocks ``X[order[start:start + B]]``, each row used once."""
    return RowBatches(X, y, np.asarray(order), np.asarray(batch_sizes, dtype=np.int64), layout=layout_of(X))


def full_batches(X, y: np.ndarray, n_steps: int, intercept: float | None = None) -> RowBatches:
    """``n_steps`` batches of all the rows (full-batch gradient descent): passes over ``X``, which
    the compiled kernel reads in place, one fused pass per step; ``intercept``: the value of a
    last column of CSR rows that they do not store (:class:`~skdpsco.rows._source.RowBatches`)."""
    layout = layout_of(X)
    if intercept is not None and not layout.unstored_columns:
        raise ValueError("intercept= is the unstored last column of CSR rows; dense rows store their own.")
    n = X.shape[0]
    return RowBatches(X, y, None, np.full(n_steps, n, dtype=np.int64), cycle=True, intercept=intercept, layout=layout)
