# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Inline binary orders of magnitude shared by the compiled kernels (``cimport``-ed, no module of
its own): the per-row count of :func:`skdpsco.rows._blocks.magnitude_counts`, which the gather of
a fit's rows (:func:`skdpsco.rows._maps.gather_clipped_rows`) runs on each row it copies."""

from libc.math cimport fabs, frexp
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcpy

# sqrt(1/2), the mask of a double's mantissa bits, and the mantissa bits of sqrt(1/2) (and of sqrt(2)):
# literals in the functions below (a .pxd holds no module-level values without a module of its own)


cdef inline int binary_order(double u) noexcept nogil:
    """``round(log2 |u|)`` of a finite non-zero ``u`` as ``frexp`` gives it: ``e - [m < sqrt(1/2)]``
    for ``|u| = m 2**e``, ``m`` in ``[1/2, 1)``; read from the float's bits for a normal ``u`` (its
    biased exponent ``b``: ``e = b - 1022``, and ``m < sqrt(1/2)`` exactly when its mantissa bits are
    below those of ``sqrt(1/2)``), from ``frexp`` for a subnormal one."""
    cdef uint64_t bits, mantissa_mask = (<uint64_t> 1 << 52) - 1, half_octave = <uint64_t> 0x6A09E667F3BCD
    cdef int exponent
    cdef double mantissa
    memcpy(&bits, &u, sizeof(double))
    exponent = <int> ((bits >> 52) & 0x7FF)
    if exponent == 0:
        mantissa = frexp(fabs(u), &exponent)
        return exponent - (1 if mantissa < 0.70710678118654752440 else 0)
    return exponent - 1022 - (1 if (bits & mantissa_mask) < half_octave else 0)


cdef inline void order_bins(int32_t *bins, int64_t high) noexcept nogil:
    """Fill ``bins`` (2049 entries) for :func:`count_row_orders`: ``bins[s]`` is the column ``k +
    high`` of the order ``k = s - 1023`` clamped to ``[-high, high]``, for ``s`` from 2 to 2048,
    and -1 for ``s`` 0 and 1 (a zero, a subnormal or the smallest normal numbers: read by
    :func:`binary_order` instead)."""
    cdef int64_t s, order
    bins[0] = bins[1] = -1
    for s in range(2, 2049):
        order = s - 1023
        order = -high if order < -high else (high if order > high else order)
        bins[s] = <int32_t> (order + high)


cdef inline int64_t _column(const uint64_t *bits, Py_ssize_t j, int64_t high, const int32_t *bins) noexcept nogil:
    """The column of :func:`count_row_orders` for the entry with bits ``bits[j]``; -1 for a zero."""
    cdef uint64_t magnitude_mask = ((<uint64_t> 1) << 63) - 1
    cdef uint64_t carry = ((<uint64_t> 1) << 52) - <uint64_t> 0x6A09E667F3BCD
    cdef int64_t order, column = bins[((bits[j] & magnitude_mask) + carry) >> 52]
    cdef double u
    if column < 0:
        if (bits[j] & magnitude_mask) == 0:  # a zero: not counted
            return -1
        memcpy(&u, &bits[j], sizeof(double))
        order = binary_order(u)
        column = (-high if order < -high else (high if order > high else order)) + high
    return column


cdef inline void count_row_orders(const double *row, const double *other, Py_ssize_t d, int64_t *table,
                                  Py_ssize_t width, int64_t high, const int32_t *bins) noexcept nogil:
    """Add one to ``table[j * width + k + high]`` for each non-zero ``row[j]``, ``j < d``, ``k`` its
    binary order (:func:`binary_order`) clamped to ``[-high, high]`` (``bins``: :func:`order_bins`);
    the same for ``other`` unless it is NULL, in the same loop (two rows a loop: the adds to a
    feature's counts, in one cache line, come in pairs; 26 -> 19 ms for 16384 rows of 1000 in a C
    model of the loop).

    A normal entry's order is read from its bits with no branch on its value: with ``a`` its bits
    without the sign (biased exponent ``b`` above mantissa ``m``), ``s = (a + 2**52 - h) >> 52``
    is ``b + [m >= h]``, ``h`` the mantissa bits of ``sqrt(1/2)`` (the add carries into the
    exponent field exactly when ``m >= h``), so the order ``b - 1022 - [m < h]`` is ``s - 1023``,
    and its clamped column is ``bins[s]``. ``s`` below 2 (zeros, subnormals and normal entries
    below ``2**-1022 sqrt(2)``; rare) takes the slow path."""
    cdef const uint64_t *first = <const uint64_t *> row
    cdef const uint64_t *second = <const uint64_t *> other
    cdef int64_t column
    cdef Py_ssize_t j
    for j in range(d):
        column = _column(first, j, high, bins)
        if column >= 0:
            table[j * width + column] += 1
        if second != NULL:
            column = _column(second, j, high, bins)
            if column >= 0:
                table[j * width + column] += 1
