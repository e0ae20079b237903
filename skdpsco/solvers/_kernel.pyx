# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled inner loop of :func:`skdpsco.solvers._core.projected_noisy_sgd` for margin losses.

One call runs a chunk of consecutive steps of

    g_t = (1 / B_t) sum_{i in batch t} phi'(<w, x_i>, y_i) x_i + lambda w
    w  <- Pi_R(w - eta_t (g_t + xi_t))

on a vector ``w`` of shape (p,), reading the rows ``X[order[start:start + B_t]]`` in place (no
copy of ``X``), with the loss derivative ``phi'`` in C (one code per loss of
:mod:`skdpsco.losses` / :mod:`skdpsco.smoothing`, :data:`LOSS_CODES`). The kernel draws no
randomness: the noise rows ``xi_t`` are drawn by :func:`skdpsco.solvers._core.gaussian_noise`, the
one place privacy noise is drawn, and passed in, so the privacy audits that weaken that function
exercise this kernel. The numpy loop of ``_core.py`` is the reference; ``tests/test_kernel.py``
checks that both produce the same iterates for the same noise draws.

The vectors are short (``p`` is the number of features), so the arithmetic is plain C loops
(four partial sums for the dot products, which the compiler vectorises), not BLAS calls whose
overhead would dominate; the rows of the next steps are prefetched, hiding the latency of reading
rows in a random order.
"""

from libc.math cimport exp, erfc, fabs, isfinite, pow, sqrt

import numpy as np

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define SKDPSCO_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
    #else
    #define SKDPSCO_PREFETCH(p) ((void)(p))
    #endif
    """
    void SKDPSCO_PREFETCH(const double *p) nogil

# Loss codes: the derivative phi'(z, y) of each loss, the same formula as its ``derivative``.
cdef enum LossCode:
    LOGISTIC = 0         # -y sigma(-y z)
    Q_HINGE = 1          # -q y (1 - y z)_+^(q - 1)               (a = q)
    HINGE = 2            # -y 1[y z < 1]
    POWER = 3            # -p sign(r) |r|^(p - 1), r = y - z      (a = p)
    HUBER = 4            # -clip(y - z, -eps, eps)                (a = eps)
    SMOOTH_HINGE = 5     # -y Phi((1 - y z) / s)                   (a = s)
    SMOOTH_ABSOLUTE = 6  # 2 Phi((z - y) / s) - 1                  (a = s)

LOSS_CODES = {
    "logistic": LOGISTIC,
    "q_hinge": Q_HINGE,
    "hinge": HINGE,
    "power": POWER,
    "huber": HUBER,
    "smooth_hinge": SMOOTH_HINGE,
    "smooth_absolute": SMOOTH_ABSOLUTE,
}
"""Loss name -> code understood by :func:`run_steps`."""

cdef double _SQRT_HALF = 0.70710678118654752440
cdef Py_ssize_t PREFETCH_ROWS = 8  # rows ahead, about 1 us: hides the memory latency of a random row


cdef inline double _dot(const double *a, const double *b, Py_ssize_t p) noexcept nogil:
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


cdef inline void _axpy(double c, const double *x, double *w, Py_ssize_t p) noexcept nogil:
    """w += c x."""
    cdef Py_ssize_t j
    for j in range(p):
        w[j] += c * x[j]


cdef inline void _scale(double c, double *w, Py_ssize_t p) noexcept nogil:
    """w *= c."""
    cdef Py_ssize_t j
    for j in range(p):
        w[j] *= c


cdef inline void _prefetch_row(const double *X, Py_ssize_t p, const Py_ssize_t *order,
                               Py_ssize_t position, Py_ssize_t n_order) noexcept nogil:
    """Ask the cache for the row read ``PREFETCH_ROWS`` rows from now."""
    cdef Py_ssize_t line
    cdef const double *row
    if position + PREFETCH_ROWS < n_order:
        row = X + order[position + PREFETCH_ROWS] * p
        for line in range(0, p, 8):
            SKDPSCO_PREFETCH(row + line)


cdef inline double _ndtr(double t) noexcept nogil:
    """Standard normal cdf."""
    return 0.5 * erfc(-t * _SQRT_HALF)


cdef inline double _derivative(int code, double z, double y, double a) noexcept nogil:
    cdef double u, r
    if code == LOGISTIC:
        return -y / (1.0 + exp(y * z))
    if code == Q_HINGE:
        u = 1.0 - y * z
        return -a * y * pow(u, a - 1.0) if u > 0.0 else 0.0
    if code == HINGE:
        return -y if y * z < 1.0 else 0.0
    if code == POWER:
        r = y - z
        if r == 0.0:
            return 0.0
        u = a * pow(fabs(r), a - 1.0)
        return -u if r > 0.0 else u
    if code == HUBER:
        r = y - z
        return -(a if r > a else (-a if r < -a else r))
    if code == SMOOTH_HINGE:
        return -y * _ndtr((1.0 - y * z) / a)
    # SMOOTH_ABSOLUTE
    return 2.0 * _ndtr((z - y) / a) - 1.0


def derivative(int code, double a, const double[::1] z, const double[::1] y):
    """``phi'(z_i, y_i)`` of loss ``code`` with parameter ``a``, elementwise (for tests)."""
    out = np.empty(z.shape[0])
    cdef double[::1] view = out
    cdef Py_ssize_t i
    for i in range(z.shape[0]):
        view[i] = _derivative(code, z[i], y[i], a)
    return out


def gather_clipped_rows(
    const double[:, ::1] X,
    const Py_ssize_t[::1] order,
    double max_norm,
    double[:, ::1] out,
    double fill,
):
    """``out[i, :d] = X[order[i]] * min(1, max_norm / ||X[order[i]]||)``, ``out[i, d:] = fill``;
    return the number of rows with a NaN or an infinite entry (their ``out`` row is unspecified).

    The rows of ``X`` (shape (n, d)) gathered in ``order`` and clipped to ``l2`` norm at most
    ``max_norm``, in one pass: each row is read once (prefetched, as the order is random), its
    norm taken while it is in cache (from the row divided by its largest entry when the squared
    norm overflows), and written scaled; the columns of ``out`` after the first ``d`` (e.g. an
    intercept column) are set to ``fill``. The reference is
    :func:`skdpsco.solvers._core.clip_rows` of ``X[order]``. ``order`` must index rows of ``X``.
    """
    cdef Py_ssize_t n = order.shape[0], d = X.shape[1], p = out.shape[1]
    cdef Py_ssize_t i, j, non_finite = 0
    cdef double norm, scale
    cdef const double *Xp = &X[0, 0]
    cdef const Py_ssize_t *op = &order[0]
    cdef const double *row
    cdef double *target
    if out.shape[0] != n or p < d:
        raise ValueError(f"out must have {n} rows and at least {d} columns; got shape {tuple(out.shape)[:2]}.")
    if n == 0:
        return 0
    with nogil:
        for i in range(n):
            _prefetch_row(Xp, d, op, i, n)
            row = Xp + op[i] * d
            norm = sqrt(_dot(row, row, d))
            if not isfinite(norm):
                norm = _norm_without_overflow(row, d)
                if not isfinite(norm):
                    non_finite += 1
                    continue
            scale = max_norm / norm if norm > max_norm else 1.0
            target = &out[i, 0]
            for j in range(d):
                target[j] = scale * row[j]
            for j in range(d, p):
                target[j] = fill
    return non_finite


cdef double _norm_without_overflow(const double *row, Py_ssize_t d) noexcept nogil:
    """``||row||`` as ``m ||row / m||`` with ``m`` the largest ``|entry|``; not finite iff an entry is not."""
    cdef double largest = 0.0, total = 0.0, u
    cdef Py_ssize_t j
    for j in range(d):
        u = fabs(row[j])
        if not (u <= largest):  # also true for NaN
            largest = u
    if not isfinite(largest):
        return largest
    for j in range(d):
        u = row[j] / largest
        total += u * u
    return largest * sqrt(total)


def run_steps(
    const double[:, ::1] X,
    const double[::1] y,
    const Py_ssize_t[::1] order,
    Py_ssize_t start,
    const Py_ssize_t[::1] batch_sizes,
    const double[::1] steps,
    const double[:, ::1] noise,
    const unsigned char[::1] noisy,
    double[::1] w,
    double[::1] total,
    double[::1] gradient,
    int code,
    double a,
    double l2_penalty,
    double radius,
    bint average,
    bint cycle=False,
):
    """Run ``len(steps)`` steps in place on ``w``; return the index in ``order`` after the last row.

    Parameters
    ----------
    X, y : rows (C-contiguous float64) and encoded labels, read at ``order[start:]``; with
        ``cycle``, a batch that would run past the end of ``order`` starts again at its
        beginning (passes over the data: ``order = arange(n)`` and batches of ``n`` rows are
        full-batch steps).
    batch_sizes, steps : int and float arrays of shape (T,), one entry per step.
    noise : array of shape (number of noisy steps, p)
        The noise rows, consumed in order by the steps with ``noisy[t] != 0``.
    w : the iterate, updated in place. ``total`` accumulates ``w`` before each step when
        ``average``. ``gradient`` is a work buffer of shape (p,).
    code, a : loss code and its parameter (:data:`LOSS_CODES`).
    l2_penalty : ridge coefficient ``lambda``. ``radius`` : the ball; ``<= 0`` for ``R^p``.
    """
    cdef Py_ssize_t p = w.shape[0]
    cdef Py_ssize_t T = steps.shape[0], n_order = order.shape[0]
    cdef Py_ssize_t t, i, row, noise_row = 0, B, end
    cdef double eta, c, z, norm2
    cdef double *wp = &w[0]
    cdef double *gp = &gradient[0]
    cdef double *tp = &total[0]
    cdef const double *Xp = &X[0, 0]
    cdef const Py_ssize_t *op = &order[0]
    with nogil:
        for t in range(T):
            B = batch_sizes[t]
            eta = steps[t]
            if cycle and start + B > n_order:
                start = 0
            end = start + B
            if average:
                _axpy(1.0, wp, tp, p)
            if B == 1:
                _prefetch_row(Xp, p, op, start, n_order)
                row = op[start]
                z = _dot(Xp + row * p, wp, p)
                c = -eta * _derivative(code, z, y[row], a)
                if l2_penalty != 0.0:
                    _scale(1.0 - eta * l2_penalty, wp, p)
                _axpy(c, Xp + row * p, wp, p)
            else:
                for i in range(p):
                    gp[i] = 0.0
                for i in range(start, end):
                    _prefetch_row(Xp, p, op, i, n_order)
                    row = op[i]
                    z = _dot(Xp + row * p, wp, p)
                    _axpy(_derivative(code, z, y[row], a) / B, Xp + row * p, gp, p)
                if l2_penalty != 0.0:
                    _axpy(l2_penalty, wp, gp, p)
                _axpy(-eta, gp, wp, p)
            if noisy[t]:
                _axpy(-eta, &noise[noise_row, 0], wp, p)
                noise_row += 1
            if radius > 0.0:
                norm2 = _dot(wp, wp, p)
                if norm2 > radius * radius:
                    _scale(radius / sqrt(norm2), wp, p)
            start = end
    return start

