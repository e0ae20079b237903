"""The rows of a fit: the one row source, in three layouts, and the passes that read it.

Every read of a fit's rows goes through this package. :func:`layout_of` gives the layout that
reads them: the dense layout (numpy arrays, :mod:`skdpsco.rows._dense`), the CSR layout (scipy
sparse matrices, :mod:`skdpsco.rows._csr`) or the Dask layout that :mod:`skdpsco._dask` registers;
each has the same methods (the clip, the norms, the copy in a random order, the division by
powers of two, the histograms of orders of magnitude, the moments, the standardisation, the block
sums of gradients and Hessians, the row source of the one-pass solvers), so that the code above
calls methods. The solvers and the releases never test the layout (the compiled SGD loop is bound
by its name, one binding per in-memory layout); the estimators read only its name, for their
public plan, and whether the input is lazy, to validate it.

A fit copies its in-memory rows once, clipped, in a random order, into one C-contiguous float64
array (:meth:`~skdpsco.rows._memory.InMemoryRows.clipped_rows_in_order`); the releases before
the solver read that copy through the fused, compiled passes of :mod:`skdpsco.rows._fused`
(:func:`feature_passes`), on the threads of :mod:`skdpsco.rows._threads`; the solvers read it in
place (:func:`row_source`). This package imports nothing of the package above it: the constants
of the releases are arguments.
"""

from ._csr import CSR, canonical_csr, csr_row_block
from ._dense import DENSE
from ._fused import (
    LOGISTIC_LOSS,
    SQUARED_LOSS,
    centred_square_sums,
    count_non_finite,
    divide_clip_and_standardise,
    divide_clip_and_sum,
    fused_layout,
    gather_standardised,
    loss_derivatives,
    magnitude_counts,
    powers_of_two,
    sparse_scaled_gram,
    standardise,
    start_count_non_finite,
)
from ._layout import full_batches, is_lazy, iter_batches, layout_of, register_lazy_layout, row_source
from ._memory import refuse_non_finite
from ._passes import FusedPasses, LayoutPasses, feature_passes
from ._source import ArrayRows, RowBatches, row_order, wait_for_rows
from ._threads import (
    BLOCK_ROWS,
    THREADS,
    RowsInProgress,
    balanced_block_rows,
    imap_blocks,
    map_blocks,
    one_blas_thread_each,
    shared_threads,
)

__all__ = [
    "ArrayRows",
    "BLOCK_ROWS",
    "CSR",
    "DENSE",
    "FusedPasses",
    "LOGISTIC_LOSS",
    "LayoutPasses",
    "RowBatches",
    "RowsInProgress",
    "SQUARED_LOSS",
    "THREADS",
    "balanced_block_rows",
    "canonical_csr",
    "centred_square_sums",
    "count_non_finite",
    "csr_row_block",
    "divide_clip_and_standardise",
    "divide_clip_and_sum",
    "feature_passes",
    "full_batches",
    "fused_layout",
    "gather_standardised",
    "imap_blocks",
    "is_lazy",
    "iter_batches",
    "layout_of",
    "loss_derivatives",
    "magnitude_counts",
    "map_blocks",
    "one_blas_thread_each",
    "powers_of_two",
    "refuse_non_finite",
    "register_lazy_layout",
    "row_order",
    "row_source",
    "shared_threads",
    "sparse_scaled_gram",
    "standardise",
    "start_count_non_finite",
    "wait_for_rows",
]
