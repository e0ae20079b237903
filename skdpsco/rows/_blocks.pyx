# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Fused per-block kernels of the releases that read the rows before the solver.

Each function reads (and, where it says so, rewrites in place) one block of consecutive rows of
a C-contiguous float64 array, of which the first ``d`` columns are the features (a last
intercept column, when there is one, is left alone), in one pass: every row is read once while
it is in cache. Sums over rows are returned per block, so that the caller can add the blocks'
sums in a fixed order whatever the threads that computed them (the kernels release the GIL).

The kernels are bound by the arithmetic on the row in cache more than by reading it, so each
row is mapped in as few passes as the maps' dependence allows: the pass that writes an entry
also adds its square to the row's norm (:func:`_map_row`, the four partial sums of
:func:`skdpsco._vectors.dot` in its order, so the same norms bit for bit). The histogram pass
of short rows prefetches the next row (:data:`PREFETCHED_ROW_LENGTH`).

The numpy functions of :mod:`skdpsco.linear_model._scaling` are the reference
(``tests/test_row_kernels.py``): the same integers for the histograms; the same values up to the
rounding of a sum's order for the rest.

Rows are finite here: the pass that copied them into the fit's array refused a NaN or an
infinite entry. A finite row whose squared norm overflows gets its norm from the row divided by
its largest entry, and a row whose quotient by its divisors would overflow is first brought to
largest entry ``2**OVERFLOW_SAFE_EXPONENT`` (the clip that follows gives the same row as exact
arithmetic would), so no finite row can make a pass raise or produce a non-finite value.
"""

from libc.math cimport ceil, exp, fabs, frexp, isfinite, ldexp, log2, sqrt
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcpy

from .._orders cimport count_row_orders, order_bins
from .._prefetch cimport prefetch_next_row, prefetch_row
from .._vectors cimport dot

import numpy as np

cdef int OVERFLOW_SAFE_EXPONENT = 900  # as skdpsco.linear_model._scaling.OVERFLOW_SAFE_EXPONENT

cdef Py_ssize_t PREFETCHED_ROW_LENGTH = 128
"""The longest rows (in doubles, 1 KB) whose histogram pass prefetches the next row: measured at
65536 x 100, one thread, 17 -> 7.5 ms a block; at 16384 x 1000 it cost 22 -> 27 ms (a long row is
streamed by the hardware prefetcher, and the software one only adds traffic). The other
sequential passes ran slower with it at both lengths."""


cdef inline double _shrink_factor(const double *row, Py_ssize_t d, double bound, double squares) noexcept nogil:
    """``min(1, bound / ||row||)`` of a finite row, given ``squares = dot(row, row, d)``; also when
    that overflows: then from the row divided by its largest entry ``m``, ``(bound / m) / ||row /
    m||`` (a second pass, for such rows only)."""
    cdef double norm = sqrt(squares), largest = 0.0, u, scaled = 0.0
    cdef Py_ssize_t j
    if isfinite(norm):
        return bound / norm if norm > bound else 1.0
    for j in range(d):
        u = fabs(row[j])
        if u > largest:
            largest = u
    for j in range(d):
        u = row[j] / largest
        scaled += u * u
    return (bound / largest) / sqrt(scaled)


cdef enum EntryMap:
    _QUOTIENT = 0     # x * a          (a = 2**-e: the division by a power of two, exact)
    _CENTRED = 1      # x - a
    _STANDARDISED = 2 # (c x - a) / b  (c: the row's clip factor, 1.0 where it has none)


cdef inline double _mapped_entry(int kind, const double *row, const double *a, const double *b, double c,
                                 Py_ssize_t j) noexcept nogil:
    if kind == _QUOTIENT:
        return row[j] * a[j]
    if kind == _CENTRED:
        return row[j] - a[j]
    return (c * row[j] - a[j]) / b[j]


cdef inline double _map_row(int kind, const double *row, double *out, Py_ssize_t d, const double *a,
                            const double *b, double c) noexcept nogil:
    """``out[j]`` = the entry map ``kind`` of ``row[j]`` (:class:`EntryMap`, ``kind`` a constant at
    every call, so the branch is compiled away), ``j < d``; returns ``dot(out, out, d)`` summed as
    :func:`skdpsco._vectors.dot` sums it (four partial sums over ``j mod 4``, the last ``d mod 4``
    squares into the first, ``(s0 + s1) + (s2 + s3)``): the same value bit for bit, in the pass
    that writes ``out`` instead of a second one. ``out`` may be ``row``."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, u0, u1, u2, u3
    cdef Py_ssize_t j, m = d - d % 4
    for j in range(0, m, 4):
        u0 = _mapped_entry(kind, row, a, b, c, j)
        u1 = _mapped_entry(kind, row, a, b, c, j + 1)
        u2 = _mapped_entry(kind, row, a, b, c, j + 2)
        u3 = _mapped_entry(kind, row, a, b, c, j + 3)
        out[j] = u0
        out[j + 1] = u1
        out[j + 2] = u2
        out[j + 3] = u3
        s0 += u0 * u0
        s1 += u1 * u1
        s2 += u2 * u2
        s3 += u3 * u3
    for j in range(m, d):
        u0 = _mapped_entry(kind, row, a, b, c, j)
        out[j] = u0
        s0 += u0 * u0
    return (s0 + s1) + (s2 + s3)


def magnitude_counts(const double[:, ::1] rows, Py_ssize_t d, int magnitude_range):
    """The ``(d, 2 R + 1)`` int64 histograms of the binary orders of magnitude ``k = round(log2
    |x|)`` (from the float's exponent, :func:`skdpsco.linear_model._scaling.magnitude_bins`)
    of the non-zero entries of the block's first ``d`` columns, ``k`` clamped to ``[-R, R]``
    (``skdpsco._orders.count_row_orders``, two rows at a time)."""
    cdef Py_ssize_t n = rows.shape[0], i, width = 2 * magnitude_range + 1
    counts_array = np.zeros((d, width), dtype=np.int64)
    cdef int64_t[:, ::1] counts = counts_array
    if rows.shape[1] < d:
        raise ValueError(f"rows have {rows.shape[1]} columns, fewer than d={d}.")
    if n == 0 or d == 0:
        return counts_array
    cdef int32_t bins[2049]
    cdef bint short_rows = rows.shape[1] <= PREFETCHED_ROW_LENGTH
    with nogil:
        order_bins(bins, magnitude_range)
        for i in range(0, n, 2):
            if short_rows:
                prefetch_next_row(&rows[i, 0], 2 * rows.shape[1], (n - 1 - i) // 2)
            count_row_orders(&rows[i, 0], &rows[i + 1, 0] if i + 1 < n else NULL, d, &counts[0, 0], width,
                             magnitude_range, bins)
    return counts_array


cdef inline double _divided_row(const double *row, double *quotient, Py_ssize_t d, const int64_t *exponents,
                                const double *factors, double bound) noexcept nogil:
    """``quotient``: the row's first ``d`` entries ``x_j / 2**e_j`` (``factors = 2.0**-exponents``);
    returns the factor ``min(1, bound / ||quotient||)`` that clips it to ``l2`` norm at most
    ``bound`` (the caller multiplies, in the pass that writes the row).

    A row whose quotient would overflow is divided by a further power of two first, the same for
    all its entries (its direction is kept), so that its largest entry is about
    ``2**OVERFLOW_SAFE_EXPONENT``: :func:`skdpsco.rows._dense.divide_by_powers_of_two`.
    Such a row, or one whose squares overflow, is the only one whose sum of squares is not finite,
    so only then are its entries checked, in a second pass."""
    cdef Py_ssize_t j
    cdef double top, t, squares = _map_row(_QUOTIENT, row, quotient, d, factors, NULL, 1.0)
    cdef int64_t extra
    cdef bint overflow = False
    if not isfinite(squares):
        for j in range(d):
            if not isfinite(quotient[j]):
                overflow = True
    if overflow:
        top = -1e308
        for j in range(d):
            if row[j] != 0.0:
                t = log2(fabs(row[j])) - exponents[j]
                if t > top:
                    top = t
        extra = <int64_t> ceil(top) - OVERFLOW_SAFE_EXPONENT
        for j in range(d):
            quotient[j] = ldexp(row[j], <int> (-exponents[j] - extra))
        squares = dot(quotient, quotient, d)
    return _shrink_factor(quotient, d, bound, squares)


cdef inline void _scale_to_unit_ball(const double *z, double *target, Py_ssize_t d, double squares,
                                     double clip_norm) noexcept nogil:
    """``target = z / max(||z||, C)``, given ``squares = dot(z, z, d)`` (``target`` may be ``z``)."""
    cdef Py_ssize_t j
    cdef double norm = sqrt(squares)
    norm = 1.0 / (norm if norm > clip_norm else clip_norm)
    for j in range(d):
        target[j] = z[j] * norm


cdef inline void _standardise_row(const double *row, double *z, double *target, Py_ssize_t d, const double *mean,
                                  const double *scale, double clip_norm, double factor) noexcept nogil:
    """``target``: ``z = (c x - mean) / scale`` over the row's first ``d`` entries, then ``z /
    max(||z||, C)``; ``c = factor``, the row's clip (1.0: the row as it is, the product exact), so
    that a clipped row is standardised in the pass that clips it. ``z``: where the first pass
    writes (``d`` doubles, which may be ``row`` or ``target``): an in-place pass over the fit's
    rows is faster with ``z`` a buffer and one write of the row, a gather with ``z = target``."""
    _scale_to_unit_ball(z, target, d, _map_row(_STANDARDISED, row, z, d, mean, scale, factor), clip_norm)


cdef _check_division(double[:, ::1] rows, Py_ssize_t d, const int64_t[::1] exponents, const double[::1] factors):
    if rows.shape[1] < d or exponents.shape[0] != d or factors.shape[0] != d:
        raise ValueError(f"rows need at least d={d} columns, exponents and factors d entries.")


cdef _check_standardisation(double[:, ::1] rows, Py_ssize_t d, const double[::1] mean, const double[::1] scale):
    if rows.shape[1] < d or mean.shape[0] != d or scale.shape[0] != d:
        raise ValueError(f"rows need at least d={d} columns, mean and scale d entries.")


def divide_clip_and_sum(double[:, ::1] rows, Py_ssize_t d, const int64_t[::1] exponents, const double[::1] factors,
                        double bound):
    """In place, each row's first ``d`` entries divided by ``2**exponents`` and the row clipped to
    ``l2`` norm at most ``bound`` (:func:`_divided_row`); returns the block's column sums of
    the result (shape ``(d,)``)."""
    cdef Py_ssize_t n = rows.shape[0], i, j
    cdef double *row
    _check_division(rows, d, exponents, factors)
    sums_array = np.zeros(d)
    cdef double[::1] sums = sums_array
    cdef double[::1] buffer = np.empty(max(d, 1))  # the row's quotient, before its clip
    if n == 0 or d == 0:
        return sums_array
    cdef double *total = &sums[0]
    cdef double *quotient = &buffer[0]
    cdef double factor
    with nogil:
        for i in range(n):
            row = &rows[i, 0]
            factor = _divided_row(row, quotient, d, &exponents[0], &factors[0], bound)
            for j in range(d):
                row[j] = factor * quotient[j]
                total[j] += row[j]
    return sums_array


def divide_clip_and_standardise(double[:, ::1] rows, Py_ssize_t d, const int64_t[::1] exponents,
                                const double[::1] factors, double bound, const double[::1] mean,
                                const double[::1] scale, double clip_norm):
    """In place, each row as :func:`divide_clip_and_sum` leaves it, then as :func:`standardise`
    leaves that: the two maps in one read of the row, the same arithmetic (the clip's product
    taken in the standardisation's pass)."""
    cdef Py_ssize_t n = rows.shape[0], i
    cdef double *row
    _check_division(rows, d, exponents, factors)
    _check_standardisation(rows, d, mean, scale)
    cdef double[::1] buffer = np.empty(max(d, 1))
    if n == 0 or d == 0:
        return
    cdef double factor
    with nogil:
        for i in range(n):
            row = &rows[i, 0]
            factor = _divided_row(row, &buffer[0], d, &exponents[0], &factors[0], bound)
            _standardise_row(&buffer[0], &buffer[0], row, d, &mean[0], &scale[0], clip_norm, factor)


def centred_square_sums(const double[:, ::1] rows, Py_ssize_t d, const double[::1] mean, double clip):
    """``sum_i u_i**2`` per feature of the block, ``u_i = clip_C(x_i - mean)`` over the first ``d``
    columns (:func:`skdpsco.rows._dense.centred_square_sums`); the rows are only read."""
    cdef Py_ssize_t n = rows.shape[0], i, j
    cdef double factor, u
    if rows.shape[1] < d or mean.shape[0] != d:
        raise ValueError(f"rows need at least d={d} columns and mean d entries.")
    squares_array = np.zeros(d)
    cdef double[::1] squares = squares_array
    cdef double[::1] buffer = np.empty(max(d, 1))  # the centred row, before its clip
    if n == 0 or d == 0:
        return squares_array
    cdef double *total = &squares[0]
    cdef double *centred = &buffer[0]
    with nogil:
        for i in range(n):
            factor = _shrink_factor(centred, d, clip, _map_row(_CENTRED, &rows[i, 0], centred, d, &mean[0], NULL, 1.0))
            for j in range(d):
                u = factor * centred[j]
                total[j] += u * u
    return squares_array


def gather_standardised(const double[:, ::1] X, const Py_ssize_t[::1] order, double[:, ::1] out,
                        const int64_t[::1] exponents, const double[::1] factors, double bound,
                        const double[::1] mean, const double[::1] scale, double clip_norm, double fill):
    """``out[i, :d]`` = the row ``X[order[i]]`` divided by ``2**exponents``, clipped to ``bound`` and
    standardised (:func:`divide_clip_and_standardise`: the same arithmetic), ``out[i, d:] = fill``
    (an intercept column): the gather of a fit's rows once the releases that set their scale are
    known, each row read once (prefetched, as the order is random) and written once. ``X``'s rows
    are finite (:func:`count_non_finite` refused the others before); ``order`` indexes them."""
    cdef Py_ssize_t n = order.shape[0], d = X.shape[1], p = out.shape[1], i, j
    cdef const double *Xp = &X[0, 0] if X.shape[0] > 0 else NULL
    cdef double *target
    cdef double factor
    if out.shape[0] != n or p < d or exponents.shape[0] != d or factors.shape[0] != d:
        raise ValueError(f"out must have {n} rows and at least d={d} columns, exponents and factors d entries.")
    _check_standardisation(out, d, mean, scale)
    cdef double[::1] buffer = np.empty(max(d, 1))
    if n == 0 or d == 0:
        return
    with nogil:
        for i in range(n):
            prefetch_row(Xp, d, &order[0], i, n)
            target = &out[i, 0]
            factor = _divided_row(Xp + order[i] * d, &buffer[0], d, &exponents[0], &factors[0], bound)
            _standardise_row(&buffer[0], target, target, d, &mean[0], &scale[0], clip_norm, factor)
            for j in range(d, p):
                target[j] = fill


def count_non_finite(const double[:, ::1] rows):
    """The number of NaN or infinite entries of the block (one read): the entries whose biased
    exponent has all eleven bits set, which is when adding one to it carries into the sign bit.
    Counted on the floats' bits with a mask, an add and a shift, which the compiler vectorises
    on any x86-64 (``isfinite`` per entry, or a 64-bit comparison, ran at a third of the speed of
    reading the block)."""
    cdef Py_ssize_t n = rows.shape[0], d = rows.shape[1], i, j
    cdef uint64_t count = 0, exponent_mask = (<uint64_t> 0x7FF) << 52, exponent_one = (<uint64_t> 1) << 52
    cdef const uint64_t *bits
    if n == 0 or d == 0:
        return 0
    with nogil:
        for i in range(n):
            bits = <const uint64_t *> &rows[i, 0]
            for j in range(d):
                count += ((bits[j] & exponent_mask) + exponent_one) >> 63
    return <Py_ssize_t> count


def standardise(double[:, ::1] rows, Py_ssize_t d, const double[::1] mean, const double[::1] scale, double clip_norm):
    """In place, each row's first ``d`` entries ``z = (x - mean) / scale`` then ``z / max(||z||,
    C)`` (:func:`skdpsco.rows._dense.standardise_rows`: every row's norm at most 1)."""
    cdef Py_ssize_t n = rows.shape[0], i, j
    cdef double *row
    _check_standardisation(rows, d, mean, scale)
    if n == 0 or d == 0:
        return
    with nogil:
        for i in range(n):
            row = &rows[i, 0]
            for j in range(d):
                row[j] = _mapped_entry(_STANDARDISED, row, &mean[0], &scale[0], 1.0, j)
            _scale_to_unit_ball(row, row, d, dot(row, row, d), clip_norm)


cdef enum:
    _LOGISTIC = 0
    _SQUARED = 1

LOGISTIC_LOSS = _LOGISTIC
SQUARED_LOSS = _SQUARED
"""Codes of the binary losses whose derivatives :func:`loss_derivatives` computes in C: the
logistic loss ``log(1 + exp(-y z))`` (``y`` in ``{-1, +1}``) and the squared loss ``(y - z)**2``."""


def loss_derivatives(const double[:, ::1] rows, const double[::1] targets, const double[::1] w, int loss,
                     weights, double[::1] gradient, scaled):
    """One pass over a block of rows for the Newton method's releases: each row's margin
    ``z = <x, w>``, its loss derivative ``c phi'(z, y)`` added times ``x`` to ``gradient`` (in place),
    and, when ``scaled`` (a ``(n, p)`` buffer) is given, the row ``sqrt(c phi''(z, y)) x`` written
    into it, whose ``scaled^T scaled`` is the block's summed Hessian. ``c`` is the row's relative
    weight (``weights``, or 1 when ``None``).

    ``phi'`` and ``phi''`` as :class:`skdpsco.losses.LogisticLoss` and
    :class:`~skdpsco.losses.PowerLoss` (``p = 2``) compute them: ``-y expit(-y z)`` and
    ``expit(z) expit(-z)`` with ``expit(u) = 1 / (1 + exp(-u))``; ``-2 (y - z)`` and 2."""
    cdef Py_ssize_t n = rows.shape[0], p = rows.shape[1], i, j
    cdef const double[::1] c
    cdef double[:, ::1] out
    cdef bint weighted = weights is not None, hessian = scaled is not None
    cdef double z, u, derivative, curvature, factor, weight = 1.0
    cdef const double *x
    if weighted:
        c = weights
        if c.shape[0] != n:
            raise ValueError(f"weights must have {n} entries; got {c.shape[0]}.")
    if hessian:
        out = scaled
        if out.shape[0] < n or out.shape[1] != p:
            raise ValueError(f"scaled must have at least {n} rows and {p} columns.")
    if targets.shape[0] != n or w.shape[0] != p or gradient.shape[0] != p:
        raise ValueError(f"targets need {n} entries, w and gradient {p}.")
    if loss != _LOGISTIC and loss != _SQUARED:
        raise ValueError(f"loss must be LOGISTIC_LOSS or SQUARED_LOSS; got {loss}.")
    if n == 0:
        return
    with nogil:
        for i in range(n):
            x = &rows[i, 0]
            z = dot(x, &w[0], p)
            if weighted:
                weight = c[i]
            if loss == _LOGISTIC:
                u = targets[i] * z
                derivative = -targets[i] * (1.0 / (1.0 + exp(u)))
                curvature = (1.0 / (1.0 + exp(-z))) * (1.0 / (1.0 + exp(z)))
            else:
                derivative = -2.0 * (targets[i] - z)
                curvature = 2.0
            derivative = weight * derivative if weighted else derivative
            for j in range(p):
                gradient[j] += derivative * x[j]
            if hessian:
                factor = sqrt(weight * curvature)
                for j in range(p):
                    out[i, j] = factor * x[j]


ctypedef fused index_t:
    int32_t
    int64_t


def sparse_scaled_gram(const double[::1] data, const index_t[::1] indices, const index_t[::1] indptr,
                       const double[::1] factors, Py_ssize_t p, double fill=0.0, bint with_fill=False):
    """``S^T S`` as a new dense ``(p, p)`` array, ``S = diag(factors) X`` for the CSR rows ``X``
    (``data``, ``indices``, ``indptr`` of its ``n`` rows, ``p`` columns): each entry ``(a, b)``
    the sum over the rows, in their order, of ``(factors_i x_ia) (factors_i x_ib)`` over the
    rows storing both. The products and their order of scipy's sparse product ``S.T @ S`` (a
    sum for every pair of stored entries of a row, the rows in order, from 0), without its
    temporaries: the scaled copy of the rows, their transpose and the sparse result. With
    ``with_fill``, every row has a last entry ``fill`` in column ``p - 1`` that is not stored
    (the intercept column): the sums of the rows with that entry stored."""
    cdef Py_ssize_t n = indptr.shape[0] - 1, i, a, b, lo, hi, last = p - 1
    cdef double factor, scaled, scaled_fill
    if n < 0 or factors.shape[0] != n:
        raise ValueError(f"factors must have one entry per row ({max(n, 0)}); got {factors.shape[0]}.")
    if n > 0 and (indptr[0] < 0 or indptr[n] > min(data.shape[0], indices.shape[0])):
        raise ValueError("indptr does not index data and indices.")
    if with_fill and p < 1:
        raise ValueError("p must be at least 1 with an intercept column.")
    gram_array = np.zeros((p, p))
    cdef double[:, ::1] gram = gram_array
    for i in range(n):
        if indptr[i + 1] < indptr[i]:
            raise ValueError("indptr must be non-decreasing.")
    for a in range(indptr[0] if n > 0 else 0, indptr[n] if n > 0 else 0):
        if indices[a] < 0 or indices[a] >= (last if with_fill else p):
            raise ValueError(f"indices must be in [0, {last if with_fill else p}).")
    with nogil:
        for i in range(n):
            factor = factors[i]
            lo, hi = indptr[i], indptr[i + 1]
            scaled_fill = factor * fill
            for a in range(lo, hi):
                scaled = factor * data[a]
                for b in range(lo, hi):
                    gram[indices[a], indices[b]] += scaled * (factor * data[b])
                if with_fill:
                    gram[indices[a], last] += scaled * scaled_fill
            if with_fill:
                for b in range(lo, hi):
                    gram[last, indices[b]] += scaled_fill * (factor * data[b])
                gram[last, last] += scaled_fill * scaled_fill
    return gram_array
