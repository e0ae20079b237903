# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Inline vector arithmetic shared by the compiled kernels (``cimport``-ed, no module of its own)."""


cdef inline double dot(const double *a, const double *b, Py_ssize_t p) noexcept nogil:
    """<a, b> with four partial sums (independent chains: pipelined and vectorised)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t j, m = p - p % 4
    for j in range(0, m, 4):
        s0 += a[j] * b[j]
        s1 += a[j + 1] * b[j + 1]
        s2 += a[j + 2] * b[j + 2]
        s3 += a[j + 3] * b[j + 3]
    for j in range(m, p):
        s0 += a[j] * b[j]
    return (s0 + s1) + (s2 + s3)
