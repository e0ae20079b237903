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


cdef inline double axpy_squares(double c, const double *x, double *w, Py_ssize_t p) noexcept nogil:
    """w += c x, returning <w, w> of the result: one pass instead of an update and a :func:`dot` of
    ``w`` with itself, with their bits (the squares summed in :func:`dot`'s four partial sums,
    combined as ``(s0 + s1) + (s2 + s3)``)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, v0, v1, v2, v3
    cdef Py_ssize_t j, m = p - p % 4
    for j in range(0, m, 4):
        v0 = w[j] + c * x[j]
        v1 = w[j + 1] + c * x[j + 1]
        v2 = w[j + 2] + c * x[j + 2]
        v3 = w[j + 3] + c * x[j + 3]
        w[j] = v0
        w[j + 1] = v1
        w[j + 2] = v2
        w[j + 3] = v3
        s0 += v0 * v0
        s1 += v1 * v1
        s2 += v2 * v2
        s3 += v3 * v3
    for j in range(m, p):
        v0 = w[j] + c * x[j]
        w[j] = v0
        s0 += v0 * v0
    return (s0 + s1) + (s2 + s3)


cdef inline void scale(double c, double *w, Py_ssize_t p) noexcept nogil:
    """w *= c."""
    cdef Py_ssize_t j
    for j in range(p):
        w[j] *= c
