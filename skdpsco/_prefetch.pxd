# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Prefetching the rows a gather reads in a random order, shared by the compiled kernels
(``cimport``-ed, no module of its own)."""

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define SKDPSCO_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
    #else
    #define SKDPSCO_PREFETCH(p) ((void)(p))
    #endif
    """
    void SKDPSCO_PREFETCH(const void *p) nogil


cdef inline void prefetch_row(const double *X, Py_ssize_t p, const Py_ssize_t *order,
                              Py_ssize_t position, Py_ssize_t n_order) noexcept nogil:
    """Ask the cache for the row read 8 rows from now (about 1 us: hides the memory latency of a
    random row)."""
    cdef Py_ssize_t line
    cdef const double *row
    if position + 8 < n_order:
        row = X + order[position + 8] * p
        for line in range(0, p, 8):
            SKDPSCO_PREFETCH(row + line)
