# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled per-row maps and copies of the rows, one row read once and mapped while it is in cache.

- :func:`gather_clipped_rows`: a fit's copy of dense rows, in its random order, each clipped to the
  public bound (and the histograms of its entries' binary orders of magnitude counted on the way);
- :func:`gather_sparse_rows` and :func:`append_column_in_place`: the same copy of CSR rows, and the
  intercept column written into the room it left;
- :func:`map_block` and :func:`magnitude_histogram`: the maps and the histograms of one block of a
  Dask fit's rows.

A row's clip never forms a norm that overflows: :func:`_clip_row` measures a row whose sum of
squares leaves the float range by its scaled norm (:func:`_scaled_norm`), the rule of the numpy
reference :func:`skdpsco.rows.clip_rows`. Like the rest of :mod:`skdpsco.rows`, this module imports
nothing of the package but the shared C helpers (``_vectors``, ``_orders``, ``_prefetch``).
"""

from libc.math cimport INFINITY, fabs, frexp, isfinite, ldexp, sqrt
from libc.float cimport DBL_MAX
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcpy, memmove

from .._orders cimport count_row_orders, order_bins
from .._prefetch cimport prefetch_row as _prefetch_row
from .._vectors cimport dot as _dot
from .._vectors cimport scale as _scale

import numpy as np

ctypedef fused index_t:
    int32_t
    int64_t


def gather_clipped_rows(
    const double[:, ::1] X,
    const Py_ssize_t[::1] order,
    double max_norm,
    double[:, ::1] out,
    double fill,
    counts=None,
):
    """``out[i, :d] = X[order[i]] * min(1, max_norm / ||X[order[i]]||)``, ``out[i, d:] = fill``;
    return the number of rows with a NaN or an infinite entry (their ``out`` row is unspecified).

    The rows of ``X`` (shape (n, d)) gathered in ``order`` and clipped to ``l2`` norm at most
    ``max_norm``, in one pass: each row is read once (prefetched, as the order is random), clipped
    while it is in cache (:func:`_clip_row`: a row whose length overflows, or whose squares are
    subnormal, is clipped like any other), and written; the columns of ``out`` after the first
    ``d`` (e.g. an intercept column) are set to ``fill``. With ``counts`` (an int64 ``(d, 2 R +
    1)`` array) the binary orders of magnitude of each written row's ``d`` entries are added to
    it as :func:`skdpsco.rows._blocks.magnitude_counts` counts them, while the row is in cache: the
    histogram of the private feature scaling without a pass of its own. The reference is
    :func:`skdpsco.rows._dense.clip_rows` of ``X[order]``. ``order`` must index rows of ``X``.
    """
    cdef Py_ssize_t n = order.shape[0], d = X.shape[1], p = out.shape[1]
    cdef Py_ssize_t i, j, non_finite = 0, width = 0
    cdef int64_t high = 0
    cdef int64_t *table = NULL
    cdef int64_t[:, ::1] table_view
    cdef const double *Xp = &X[0, 0]
    cdef const Py_ssize_t *op = &order[0]
    cdef double *target
    if out.shape[0] != n or p < d:
        raise ValueError(f"out must have {n} rows and at least {d} columns; got shape {tuple(out.shape)[:2]}.")
    if counts is not None:
        table_view = counts
        width = table_view.shape[1]
        if table_view.shape[0] != d or width % 2 != 1:
            raise ValueError(f"counts must have {d} rows and an odd number of columns.")
        high = (width - 1) // 2
        if d > 0:
            table = &table_view[0, 0]
    cdef int32_t bins[2049]
    cdef double *waiting = NULL  # a written row whose orders are counted with the next one
    if n == 0:
        return 0
    with nogil:
        order_bins(bins, high)
        for i in range(n):
            _prefetch_row(Xp, d, op, i, n)
            target = &out[i, 0]
            if not _clip_row(Xp + op[i] * d, target, d, max_norm):
                non_finite += 1
                continue
            if table != NULL:
                if waiting == NULL:
                    waiting = target
                else:
                    count_row_orders(waiting, target, d, table, width, high, bins)
                    waiting = NULL
            for j in range(d, p):
                target[j] = fill
        if waiting != NULL:
            count_row_orders(waiting, NULL, d, table, width, high, bins)
    return non_finite


cdef double _SQUARES_LOW = 2.0 ** -900
"""The smallest sum of squares from which a row's norm is read as ``sqrt`` of it: the squares that
underflow (each below ``2**-1022``) then change it by a relative ``d 2**-122`` at most."""


cdef inline bint _plain_squares(double squares) noexcept nogil:
    """Whether a row's sum of squares gives its norm as ``sqrt(squares)``: in ``[2**-900,
    DBL_MAX]`` (false for NaN). Outside, the squares overflowed or lost their precision among the
    subnormals, and the row is measured by :func:`_scaled_norm`."""
    return _SQUARES_LOW <= squares <= DBL_MAX


cdef double _scaled_norm(const double *row, Py_ssize_t d, int *exponent) noexcept nogil:
    """``||row|| 2**-e``, with ``e`` (stored in ``exponent``) the binary exponent of the row's largest
    ``|entry|`` (``frexp``): in ``[1/2, sqrt(d))``, so the norm ``2**e`` times it is known even where
    it exceeds the float range. The row is scaled by ``2**-e`` entry by entry (``ldexp``: exact,
    whatever the range of ``e``), so no square overflows and none of a tiny row's squares is
    subnormal. A zero row gives 0 (``e = 0``); the result is not finite iff an entry is not. The
    numpy reference is :func:`skdpsco.rows._dense.DenseRows.scaled_row_norms`."""
    cdef double largest = 0.0, total = 0.0, u
    cdef Py_ssize_t j
    exponent[0] = 0
    for j in range(d):
        u = fabs(row[j])
        if not isfinite(u):  # NaN or infinity
            return u
        if u > largest:
            largest = u
    if largest == 0.0:
        return 0.0
    frexp(largest, exponent)
    for j in range(d):
        u = ldexp(row[j], -exponent[0])
        total += u * u
    return sqrt(total)


cdef bint _clip_row(const double *row, double *target, Py_ssize_t d, double max_norm) noexcept nogil:
    """``target = row * min(1, max_norm / ||row||)`` (``target`` may be ``row``); false, with
    ``target`` unspecified, iff an entry is not finite.

    The norm is ``sqrt`` of the sum of squares where that is exact (:func:`_plain_squares`), else
    ``2**e r`` (:func:`_scaled_norm`), never formed: the row is longer than ``max_norm`` iff ``r >
    max_norm 2**-e``, and then ``target_j = (row_j 2**-e) (max_norm / r)``, a product of a factor
    in ``[-1, 1]`` and one in ``(max_norm / sqrt(d), 2 max_norm]``. A finite row is thereby clipped
    like any other however long it is; an error on a finite row of one dataset and not on its
    neighbour would be a release no mechanism accounts for (``DESIGN.md``, "Privacy model")."""
    cdef double squares = _dot(row, row, d), norm, scale
    cdef int exponent
    cdef Py_ssize_t j
    if _plain_squares(squares):
        norm = sqrt(squares)
        scale = max_norm / norm if norm > max_norm else 1.0
        for j in range(d):
            target[j] = scale * row[j]
        return True
    norm = _scaled_norm(row, d, &exponent)
    if not isfinite(norm):
        return False
    if norm > ldexp(max_norm, -exponent):
        scale = max_norm / norm
        for j in range(d):
            target[j] = ldexp(row[j], -exponent) * scale
    elif target != row:
        for j in range(d):
            target[j] = row[j]
    return True


def scaled_row_norms(const double[:, ::1] X):
    """``(exponents, scaled)``: :func:`_scaled_norm` of every row of ``X`` (for tests: the numpy
    :func:`skdpsco.rows._dense.DenseRows.scaled_row_norms` is its reference)."""
    cdef Py_ssize_t n = X.shape[0], i
    exponents = np.zeros(n, dtype=np.intc)
    scaled = np.zeros(n)
    cdef int[::1] e = exponents
    cdef double[::1] r = scaled
    for i in range(n):
        r[i] = _scaled_norm(&X[i, 0], X.shape[1], &e[i])
    return exponents, scaled



# -- a fit's copy of CSR rows ------------------------------------------------------------------------

ctypedef fused copy_index_t:
    int32_t
    int64_t


def gather_sparse_rows(
    const double[::1] data,
    const index_t[::1] indices,
    const index_t[::1] indptr,
    const Py_ssize_t[::1] order,
    double[::1] out_data,
    copy_index_t[::1] out_indices,
    copy_index_t[::1] out_indptr,
):
    """The rows ``order`` of the CSR matrix ``(data, indices, indptr)``, in that order, written as
    the CSR arrays ``(out_data, out_indices, out_indptr)``; return the number of entries copied
    that are NaN or infinite.

    ``out_indptr`` has ``len(order) + 1`` entries; ``out_data`` and ``out_indices`` hold at least
    the rows' entries, those after them are left as they are (room for a column appended later
    in place, :func:`append_column_in_place`). One pass, each row's entries copied as a run, no
    temporary: the compiled form of ``X[order]`` (:meth:`skdpsco.rows._memory.InMemoryRows.clipped_rows_in_order`
    checks it against scipy's indexing)."""
    cdef Py_ssize_t n = order.shape[0], n_rows = indptr.shape[0] - 1, i, k, lo, hi, at = 0, non_finite = 0
    cdef double value
    if out_indptr.shape[0] != n + 1:
        raise ValueError(f"out_indptr must have {n + 1} entries; got {out_indptr.shape[0]}.")
    for i in range(n):
        if order[i] < 0 or order[i] >= n_rows:
            raise ValueError(f"order must index the {n_rows} rows; got {order[i]}.")
        at += indptr[order[i] + 1] - indptr[order[i]]
    if out_data.shape[0] < at or out_indices.shape[0] < at:
        raise ValueError(f"out_data and out_indices must hold the {at} entries of the rows.")
    with nogil:
        out_indptr[0] = 0
        at = 0
        for i in range(n):
            lo, hi = indptr[order[i]], indptr[order[i] + 1]
            for k in range(lo, hi):
                value = data[k]
                if not isfinite(value):
                    non_finite += 1
                out_data[at] = value
                out_indices[at] = <copy_index_t> indices[k]
                at += 1
            out_indptr[i + 1] = <copy_index_t> at
    return non_finite


def append_column_in_place(double[::1] data, copy_index_t[::1] indices, copy_index_t[::1] indptr, double value,
                           Py_ssize_t column):
    """Rewrite the CSR arrays of ``X`` (``n`` rows, ``nnz = indptr[n]`` entries) as those of ``[X,
    value]``: every row's entries moved up by the row's index, and one more entry stored last in
    each row, ``value`` at column index ``column``; ``indptr`` becomes the new matrix's.

    ``data`` and ``indices`` must have room for ``nnz + n`` entries (those :func:`gather_sparse_rows`
    leaves after the rows). The rows are moved from the last to the first, so no entry is
    overwritten before it is moved: the same arrays as
    :func:`skdpsco.rows._csr.with_constant_column` builds in new ones, without a second copy."""
    cdef Py_ssize_t n = indptr.shape[0] - 1, i, lo, hi
    if n < 0:
        raise ValueError("indptr must have at least one entry.")
    hi = indptr[n]
    if data.shape[0] < hi + n or indices.shape[0] < hi + n:
        raise ValueError(f"data and indices must have room for {hi + n} entries; got {data.shape[0]} and {indices.shape[0]}.")
    with nogil:
        for i in range(n - 1, -1, -1):
            lo = indptr[i]
            memmove(&data[0] + lo + i, &data[0] + lo, (hi - lo) * sizeof(double))
            memmove(&indices[0] + lo + i, &indices[0] + lo, (hi - lo) * sizeof(copy_index_t))
            data[hi + i] = value
            indices[hi + i] = <copy_index_t> column
            indptr[i + 1] = <copy_index_t> (hi + i + 1)
            hi = lo


# -- the per-row maps of a Dask fit, on one block of rows --------------------------------------------

ctypedef fused source_t:
    float
    double

cdef enum MapCode:
    CLIP = 0         # x <- x min(1, b / ||x||)                                    (scalar b)
    DIVIDE = 1       # x <- x * f, f the powers of two 2**-e_j                      (vector f)
    STANDARDISE = 2  # u = (x - mean) / scale; x <- u / max(||u||, C)               (vectors mean, scale; scalar C)

CLIP_ROWS, DIVIDE_COLUMNS, STANDARDISE_ROWS = CLIP, DIVIDE, STANDARDISE
"""Map codes of :func:`map_block`, the in-place maps of :mod:`skdpsco._dask`'s rows:
:func:`~skdpsco.rows._dense.clip_rows`, :func:`~skdpsco.rows._dense.divide_by_powers_of_two`
and :func:`~skdpsco.rows._dense.standardise_rows`."""

cdef double _LARGE_ENTRY = 2.0 ** 1023  # from here divide_by_powers_of_two rescales the row first


def map_block(
    const source_t[:, ::1] raw,
    double[:, ::1] out,
    const int64_t[::1] codes,
    const double[::1] scalars,
    const double[:, ::1] vectors,
    double constant,
    bint with_constant,
):
    """``out[i, :d]`` = the row ``raw[i]`` as float64 mapped by the maps ``codes`` in order (one
    scalar per map in ``scalars``; :data:`DIVIDE_COLUMNS` reads the next row of ``vectors``,
    :data:`STANDARDISE_ROWS` the next two), and ``out[i, d] = constant`` with ``with_constant``.

    Each row is read once and mapped while it is in cache: the arithmetic of the numpy maps entry
    by entry (the same products, differences and quotients, in the same order), except that a
    row's norm sums its squares in another order (four partial sums, as :func:`_dot`; a row whose
    length overflows is clipped by :func:`_clip_row`, as :func:`~skdpsco.rows._dense.clip_rows`
    clips it). Returns -1, or the first row whose numpy map takes a path not compiled here (an
    entry of magnitude at least ``2**1023`` after a division by powers of two, or one that is not
    finite): the caller then maps the block with numpy. A clip of float32 rows to an infinite bound is
    skipped (their norms are finite: it multiplies by 1), and so is the check of a division whose
    entries cannot reach ``2**1023`` (float32 entries, or entries after a clip, times the largest
    factor).
    """
    cdef Py_ssize_t n = raw.shape[0], d = raw.shape[1]
    cdef Py_ssize_t n_maps = codes.shape[0]
    cdef Py_ssize_t k, used = 0, bad = -1
    cdef unsigned char[::1] checks
    cdef double entry_bound
    if out.shape[0] != n or out.shape[1] != d + int(with_constant):
        raise ValueError(f"out must have shape ({n}, {d + int(with_constant)}); got {tuple(out.shape)[:2]}.")
    if scalars.shape[0] != n_maps or (vectors.shape[0] > 0 and vectors.shape[1] != d):
        raise ValueError("scalars needs one value per map and vectors one column per feature.")
    for k in range(n_maps):
        if codes[k] not in (CLIP, DIVIDE, STANDARDISE):
            raise ValueError(f"Unknown map code {codes[k]}.")
        used += 1 if codes[k] == DIVIDE else 2 if codes[k] == STANDARDISE else 0
    if used > vectors.shape[0]:
        raise ValueError(f"The maps read {used} vectors; got {vectors.shape[0]}.")
    if n == 0:
        return -1
    checks = np.zeros(n_maps, dtype=np.uint8)
    # a bound on the entries before each map (2 b after a clip to b, rounding included): a division
    # that cannot reach 2**1023 from it needs no check of its entries
    entry_bound = float(np.finfo(np.float32).max) if source_t is float else np.inf
    used = 0
    for k in range(n_maps):
        if codes[k] == CLIP:
            entry_bound = min(entry_bound, 2.0 * scalars[k])
        elif codes[k] == DIVIDE:
            entry_bound *= float(np.max(vectors[used]))
            checks[k] = not entry_bound < _LARGE_ENTRY
            used += 1
        else:
            entry_bound = np.inf
            used += 2
    with nogil:
        bad = _map_rows(raw, out, codes, scalars, vectors, constant, with_constant, &checks[0] if n_maps else NULL)
    return bad


cdef Py_ssize_t _map_rows(const source_t[:, ::1] raw, double[:, ::1] out, const int64_t[::1] codes,
                          const double[::1] scalars, const double[:, ::1] vectors, double constant,
                          bint with_constant, const unsigned char *checks) noexcept nogil:
    """:func:`map_block` after its checks (plain loops over a row's entries, which the compiler
    vectorises: no branch inside them)."""
    cdef Py_ssize_t n = raw.shape[0], d = raw.shape[1], n_maps = codes.shape[0]
    cdef Py_ssize_t i, j, k, v
    cdef double norm, bound, largest
    cdef double *x
    cdef const source_t *row
    cdef const double *first
    cdef const double *second
    for i in range(n):
        x = &out[i, 0]
        row = &raw[i, 0]
        for j in range(d):
            x[j] = <double> row[j]
        v = 0
        for k in range(n_maps):
            if codes[k] == CLIP:
                bound = scalars[k]
                if source_t is float and bound == INFINITY:
                    continue
                if not _clip_row(x, x, d, bound):
                    return i
            elif codes[k] == DIVIDE:
                first = &vectors[v, 0]
                v += 1
                for j in range(d):
                    x[j] = x[j] * first[j]
                if checks[k]:
                    largest = 0.0
                    for j in range(d):
                        largest = fabs(x[j]) if fabs(x[j]) > largest else largest
                    if not (largest < _LARGE_ENTRY):
                        return i
            else:
                first = &vectors[v, 0]
                second = &vectors[v + 1, 0]
                v += 2
                for j in range(d):
                    x[j] = (x[j] - first[j]) / second[j]
                norm = sqrt(_dot(x, x, d))
                _scale(1.0 / (norm if norm > scalars[k] else scalars[k]), x, d)
        if with_constant:
            x[d] = constant
    return -1


cdef uint64_t _FRACTION_BITS = (<uint64_t> 1 << 52) - 1
cdef uint64_t _HALF_EXPONENT_BITS = <uint64_t> 1022 << 52  # the exponent field of 1/2


def magnitude_histogram(const double[:, :] X, int64_t[:, ::1] counts, int magnitude_range, double half_octave):
    """Add to ``counts[j, k + magnitude_range]`` the number of nonzero entries of column ``j`` of
    ``X`` whose binary order of magnitude ``round(log2 |x|)``, clamped to ``[-magnitude_range,
    magnitude_range]``, is ``k``: :func:`skdpsco.linear_model._scaling.magnitude_counts` (with its
    ``half_octave = sqrt(1/2)``), the same integers: ``frexp`` is exact, and the order is
    ``e - (m < half_octave)`` for ``|x| = m 2**e``, ``m`` in ``[1/2, 1)``, as there (``m`` and
    ``e`` read from the bits of a normal number: its exponent field, and its fraction under the
    exponent field of ``1/2``; ``frexp`` itself for a subnormal one)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i, j
    cdef int exponent, order
    cdef double x, mantissa
    cdef uint64_t bits
    if counts.shape[0] != d or counts.shape[1] != 2 * magnitude_range + 1:
        raise ValueError(f"counts must have shape ({d}, {2 * magnitude_range + 1}); got {tuple(counts.shape)[:2]}.")
    with nogil:
        for i in range(n):
            for j in range(d):
                x = X[i, j]
                if x == 0.0:
                    continue
                x = fabs(x)
                memcpy(&bits, &x, 8)
                if bits >> 52:  # a normal number: frexp's m and e read from its bits (exactly)
                    exponent = <int> (bits >> 52) - 1022
                    bits = (bits & _FRACTION_BITS) | _HALF_EXPONENT_BITS
                    memcpy(&mantissa, &bits, 8)
                else:
                    mantissa = frexp(x, &exponent)
                order = exponent - <int> (mantissa < half_octave)
                if order < -magnitude_range:
                    order = -magnitude_range
                elif order > magnitude_range:
                    order = magnitude_range
                counts[j, order + magnitude_range] += 1
