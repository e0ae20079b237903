# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Inline binary orders of magnitude shared by the compiled kernels (``cimport``-ed, no module of
its own): the per-row count of :func:`skdpsco.rows._blocks.magnitude_counts`, which the gather of
a fit's rows (:func:`skdpsco.solvers._kernel.gather_clipped_rows`) runs on each row it copies."""

from libc.math cimport fabs, frexp
from libc.stdint cimport int64_t, uint64_t
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


cdef inline void count_row_orders(const double *row, Py_ssize_t d, int64_t *table, Py_ssize_t width,
                                  int64_t high) noexcept nogil:
    """Add one to ``table[j * width + k + high]`` for each non-zero ``row[j]``, ``j < d``, ``k`` its
    binary order (:func:`binary_order`) clamped to ``[-high, high]``. A normal entry's order is read
    from its bits without a branch that depends on its value (biased exponent, one comparison of
    the mantissa, clamps as selects); zeros and subnormals, rare, take the slow path."""
    cdef const uint64_t *bits = <const uint64_t *> row
    cdef uint64_t b, mantissa_mask = (<uint64_t> 1 << 52) - 1, half_octave = <uint64_t> 0x6A09E667F3BCD
    cdef int64_t order, biased, low = -high
    cdef Py_ssize_t j
    cdef double u
    for j in range(d):
        b = bits[j]
        biased = <int64_t> ((b >> 52) & 0x7FF)
        if biased == 0:  # a zero (not counted) or a subnormal
            if (b << 1) == 0:
                continue
            memcpy(&u, &b, sizeof(double))
            order = binary_order(u)
        else:
            order = biased - 1022 - <int64_t> ((b & mantissa_mask) < half_octave)
        order = low if order < low else (high if order > high else order)
        table[j * width + order + high] += 1
