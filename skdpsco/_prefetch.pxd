# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Prefetching the rows a gather reads in a random order, shared by the compiled kernels
(``cimport``-ed, no module of its own).

On x86 the prefetch is an ``asm volatile`` instruction: GCC 12 at ``-O3`` deleted the loops of
``__builtin_prefetch`` over a row's cache lines as loops without effect (the kernels' binaries
held no prefetch instruction), which an ``asm volatile`` statement cannot be. ``prefetcht0`` and
``prefetcht1`` are SSE instructions, in every x86-64."""

cdef extern from *:
    """
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    #define SKDPSCO_PREFETCH(p) __asm__ __volatile__("prefetcht0 %0" : : "m"(*(const char *)(p)))
    #define SKDPSCO_PREFETCH_L2(p) __asm__ __volatile__("prefetcht1 %0" : : "m"(*(const char *)(p)))
    #elif defined(__GNUC__) || defined(__clang__)
    #define SKDPSCO_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
    #define SKDPSCO_PREFETCH_L2(p) __builtin_prefetch((const void *)(p), 0, 2)
    #else
    #define SKDPSCO_PREFETCH(p) ((void)(p))
    #define SKDPSCO_PREFETCH_L2(p) ((void)(p))
    #endif
    """
    void SKDPSCO_PREFETCH(const void *p) nogil
    void SKDPSCO_PREFETCH_L2(const void *p) nogil


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


cdef inline void prefetch_next_row(const double *row, Py_ssize_t stride, Py_ssize_t rows_after) noexcept nogil:
    """Ask the second-level cache for the ``stride`` doubles after ``row`` (the next row), if ``rows_after >
    0``: a pass over consecutive rows reads the next row from memory while it computes on this one
    (into the second level, where a row of a thousand features does not evict the first level's
    working set: the row, its scratch and the per-feature vectors)."""
    cdef Py_ssize_t line
    cdef const double *following
    if rows_after > 0:
        following = row + stride
        for line in range(0, stride, 8):
            SKDPSCO_PREFETCH_L2(following + line)
