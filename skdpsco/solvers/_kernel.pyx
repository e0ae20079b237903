# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled inner loop of :func:`skdpsco.solvers._core.projected_noisy_sgd` for margin losses.

One call runs a chunk of consecutive steps of

    g_t = (1 / B_t) sum_{i in batch t} phi'(<w, x_i>, y_i) x_i + lambda w
    w  <- Pi_R(w - eta_t (g_t + xi_t))

on a vector ``w`` of shape (p,), reading the rows ``X[order[start:start + B_t]]`` in place (no
copy of ``X``), with the loss derivative ``phi'`` in C (one code per loss of
:mod:`skdpsco.losses` / :mod:`skdpsco.smoothing`, :data:`LOSS_CODES`), times the row's relative
weight ``c_i`` for a weighted loss (:class:`skdpsco.losses.WeightedLoss`). The kernel draws no
randomness: the noise rows ``xi_t`` are drawn by :func:`skdpsco._noise.gaussian_noise`, the
one place privacy noise is drawn, and passed in, so the privacy audits that weaken that function
exercise this kernel. The numpy loop of ``_core.py`` is the reference; ``tests/test_kernel.py``
checks that both produce the same iterates for the same noise draws.

The vectors are short (``p`` is the number of features), so the arithmetic is plain C loops
(four partial sums for the dot products, which the compiler vectorises), not BLAS calls whose
overhead would dominate; the rows of the next steps are prefetched, hiding the latency of reading
rows in a random order.

:func:`run_sparse_steps` runs the same steps on the rows of a CSR matrix (its ``data``, ``indices``
and ``indptr`` arrays): a step reads only the stored entries of its rows, and costs ``O(nnz)``
instead of ``O(p)`` unless it is noisy (see its docstring for how, and how exactly).

The copies and maps of the rows that a fit makes before this loop reads them (the clipped gather,
the CSR gather, the Dask blocks' maps) are the row source's, in :mod:`skdpsco.rows._maps`.
"""

from libc.math cimport exp, erfc, fabs, pow, sqrt
from libc.stdint cimport int32_t, int64_t

from .._prefetch cimport prefetch_row as _prefetch_row
from .._vectors cimport axpy_squares as _axpy_squares
from .._vectors cimport dot as _dot
from .._vectors cimport scale as _scale

import numpy as np

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



cdef inline void _axpy(double c, const double *x, double *w, Py_ssize_t p) noexcept nogil:
    """w += c x."""
    cdef Py_ssize_t j
    for j in range(p):
        w[j] += c * x[j]


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


cdef inline double _row_derivative(int code, double z, const double *y, const double *weights, Py_ssize_t row,
                                   double a) noexcept nogil:
    """``c_row phi'(z, y[row])``: the derivative of row ``row``'s loss times its relative weight
    ``weights[row]`` (:class:`skdpsco.losses.WeightedLoss`), or ``phi'`` itself when ``weights`` is
    NULL (an unweighted fit: no product, its arithmetic as before)."""
    cdef double value = _derivative(code, z, y[row], a)
    return value * weights[row] if weights != NULL else value


def derivative(int code, double a, const double[::1] z, const double[::1] y):
    """``phi'(z_i, y_i)`` of loss ``code`` with parameter ``a``, elementwise (for tests)."""
    out = np.empty(z.shape[0])
    cdef double[::1] view = out
    cdef Py_ssize_t i
    for i in range(z.shape[0]):
        view[i] = _derivative(code, z[i], y[i], a)
    return out


cdef const double *_weights_of(const double[::1] weights, Py_ssize_t n_rows) except? NULL:
    """The weights of a weighted loss as a C array, NULL for an unweighted one (no weights)."""
    if weights.shape[0] == 0:
        return NULL
    if weights.shape[0] != n_rows:
        raise ValueError(f"weights must have one entry per row of X ({n_rows}) or none; got {weights.shape[0]}.")
    return &weights[0]


cdef inline Py_ssize_t _row_at(const Py_ssize_t *order, Py_ssize_t position) noexcept nogil:
    """The row read at ``position``: ``order[position]``, or ``position`` itself when ``order`` is
    NULL (an empty ``order``: the rows in sequence, with no index array of their number)."""
    return order[position] if order != NULL else position


def run_steps(
    const double[:, ::1] X,
    const double[::1] y,
    const double[::1] weights,
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
        beginning (passes over the data: the rows in sequence and batches of ``n`` rows are
        full-batch steps). An empty ``order`` reads the rows in sequence, as ``arange(n)``
        would, without that array.
    weights : the relative weight ``c_i`` in ``[0, 1]`` of every row of ``X`` (a weighted loss,
        :class:`skdpsco.losses.WeightedLoss`: row ``i``'s derivative times ``c_i``), or an empty
        array for an unweighted one. Weighted rows run this same loop, whatever their values.
    batch_sizes, steps : int and float arrays of shape (T,), one entry per step.
    noise : array of shape (number of noisy steps, p)
        The noise rows, consumed in order by the steps with ``noisy[t] != 0``.
    w : the iterate, updated in place. ``total`` accumulates ``w`` before each step when
        ``average``. ``gradient`` is a work buffer of shape (p,).
    code, a : loss code and its parameter (:data:`LOSS_CODES`).
    l2_penalty : ridge coefficient ``lambda``. ``radius`` : the ball; ``<= 0`` for ``R^p``.
    """
    cdef Py_ssize_t p = w.shape[0]
    cdef Py_ssize_t T = steps.shape[0], n_order = order.shape[0] if order.shape[0] else X.shape[0]
    cdef Py_ssize_t t, i, row, noise_row = 0, B, end
    cdef double eta, c, z, norm2
    cdef const double *last  # the last vector the step adds to w, c times
    cdef double *wp = &w[0]
    cdef double *gp = &gradient[0]
    cdef double *tp = &total[0]
    cdef const double *Xp = &X[0, 0]
    cdef const Py_ssize_t *op = &order[0] if order.shape[0] else NULL
    cdef const double *yp = &y[0] if y.shape[0] else NULL
    cdef const double *cp = _weights_of(weights, X.shape[0])
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
                if op != NULL:
                    _prefetch_row(Xp, p, op, start, n_order)
                row = _row_at(op, start)
                z = _dot(Xp + row * p, wp, p)
                c = -eta * _row_derivative(code, z, yp, cp, row, a)
                if l2_penalty != 0.0:
                    _scale(1.0 - eta * l2_penalty, wp, p)
                last = Xp + row * p
            else:
                for i in range(p):
                    gp[i] = 0.0
                for i in range(start, end):
                    if op != NULL:
                        _prefetch_row(Xp, p, op, i, n_order)
                    row = _row_at(op, i)
                    z = _dot(Xp + row * p, wp, p)
                    _axpy(_row_derivative(code, z, yp, cp, row, a) / B, Xp + row * p, gp, p)
                if l2_penalty != 0.0:
                    _axpy(l2_penalty, wp, gp, p)
                c = -eta
                last = gp
            if noisy[t]:
                _axpy(c, last, wp, p)
                c = -eta
                last = &noise[noise_row, 0]
                noise_row += 1
            if radius > 0.0:  # the projection reads the norm of the step's last update
                norm2 = _axpy_squares(c, last, wp, p)
                if norm2 > radius * radius:
                    _scale(radius / sqrt(norm2), wp, p)
            else:
                _axpy(c, last, wp, p)
            start = end
    return start


# -- the same steps on CSR rows ----------------------------------------------------------------------

ctypedef fused index_t:
    int32_t
    int64_t

cdef double _SCALE_LOW = 2.0 ** -100  # the scale of the iterate is folded into it outside this range ...
cdef double _SCALE_HIGH = 2.0 ** 100
cdef double _AVERAGE_SCALE_LOW = 0.5  # ... or outside this one when the iterates are summed
cdef double _AVERAGE_SCALE_HIGH = 2.0
cdef Py_ssize_t _SPARSE_BLOCK_ROWS = 64


cdef inline double _sparse_dot(const double *data, const index_t *indices, Py_ssize_t lo, Py_ssize_t hi,
                               const double *v) noexcept nogil:
    """``sum_k data[k] v[indices[k]]`` over the stored entries ``lo:hi`` of a row (four partial sums)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t k, m = hi - (hi - lo) % 4
    for k in range(lo, m, 4):
        s0 += data[k] * v[indices[k]]
        s1 += data[k + 1] * v[indices[k + 1]]
        s2 += data[k + 2] * v[indices[k + 2]]
        s3 += data[k + 3] * v[indices[k + 3]]
    for k in range(m, hi):
        s0 += data[k] * v[indices[k]]
    return (s0 + s1) + (s2 + s3)


cdef inline double _sparse_dot_fill(const double *data, const index_t *indices, Py_ssize_t lo, Py_ssize_t hi,
                                    const double *v, double fill, Py_ssize_t column) noexcept nogil:
    """:func:`_sparse_dot` of the row's stored entries ``lo:hi`` followed by an entry ``fill`` in
    ``column`` that is not stored (the intercept column): each product added to the partial sum
    it would be added to were that entry stored last (its position modulo four within the
    groups of four, the first sum after them), in the same order, so the same value bit for bit."""
    cdef double s[4]
    cdef Py_ssize_t k, count = hi - lo + 1, grouped = count - count % 4
    s[0] = s[1] = s[2] = s[3] = 0.0
    for k in range(count - 1):
        s[k % 4 if k < grouped else 0] += data[lo + k] * v[indices[lo + k]]
    s[(count - 1) % 4 if count - 1 < grouped else 0] += fill * v[column]
    return (s[0] + s[1]) + (s[2] + s[3])


cdef inline double _row_dot(const double *data, const index_t *indices, Py_ssize_t lo, Py_ssize_t hi,
                            const double *v, double fill, Py_ssize_t column) noexcept nogil:
    """``<x, v>`` of a stored row, with a last entry ``fill`` in ``column`` when ``column >= 0``."""
    if column < 0:
        return _sparse_dot(data, indices, lo, hi, v)
    return _sparse_dot_fill(data, indices, lo, hi, v, fill, column)


cdef inline void _sparse_add(double c, const double *data, const index_t *indices, Py_ssize_t lo, Py_ssize_t hi,
                             double *g) noexcept nogil:
    """``g += c x`` over the stored entries ``lo:hi`` of a row ``x``."""
    cdef Py_ssize_t k
    for k in range(lo, hi):
        g[indices[k]] += c * data[k]


cdef inline void _row_add(double c, const double *data, const index_t *indices, Py_ssize_t lo, Py_ssize_t hi,
                          double *g, double fill, Py_ssize_t column) noexcept nogil:
    """:func:`_sparse_add`, then ``g[column] += c fill`` when ``column >= 0`` (an unstored last entry)."""
    _sparse_add(c, data, indices, lo, hi, g)
    if column >= 0:
        g[column] += c * fill


cdef inline double _update_entry(double c, double x, Py_ssize_t j, double *v, double *u, double A) noexcept nogil:
    cdef double old = v[j]
    cdef double new = old + c * x
    v[j] = new
    if u != NULL:
        u[j] -= A * (new - old)
    return (new - old) * (new + old)


cdef inline double _sparse_update(double c, const double *data, const index_t *indices, Py_ssize_t lo,
                                  Py_ssize_t hi, double *v, double *u, double A) noexcept nogil:
    """``v += c x`` over the stored entries ``lo:hi`` of a row ``x``, in their order; when ``u`` is
    not NULL, ``u[j] -= A * (change of v[j])``. Returns the change of ``||v||**2``, each entry's as
    ``(new - old) (new + old)`` (four partial sums)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t k, m = hi - (hi - lo) % 4
    for k in range(lo, m, 4):
        s0 += _update_entry(c, data[k], indices[k], v, u, A)
        s1 += _update_entry(c, data[k + 1], indices[k + 1], v, u, A)
        s2 += _update_entry(c, data[k + 2], indices[k + 2], v, u, A)
        s3 += _update_entry(c, data[k + 3], indices[k + 3], v, u, A)
    for k in range(m, hi):
        s0 += _update_entry(c, data[k], indices[k], v, u, A)
    return (s0 + s1) + (s2 + s3)


cdef inline double _row_update(double c, const double *data, const index_t *indices, Py_ssize_t lo,
                               Py_ssize_t hi, double *v, double *u, double A, double fill, Py_ssize_t column) noexcept nogil:
    """:func:`_sparse_update`, with a last entry ``fill`` in ``column`` that is not stored when
    ``column >= 0``: each change added to the partial sum it would be added to were that entry
    stored last (as :func:`_sparse_dot_fill`), so the same value bit for bit."""
    cdef double s[4]
    cdef Py_ssize_t k, count = hi - lo + 1, grouped = count - count % 4
    if column < 0:
        return _sparse_update(c, data, indices, lo, hi, v, u, A)
    s[0] = s[1] = s[2] = s[3] = 0.0
    for k in range(count - 1):
        s[k % 4 if k < grouped else 0] += _update_entry(c, data[lo + k], indices[lo + k], v, u, A)
    s[(count - 1) % 4 if count - 1 < grouped else 0] += _update_entry(c, fill, column, v, u, A)
    return (s[0] + s[1]) + (s[2] + s[3])


cdef inline double _fold_entry(Py_ssize_t j, double *v, double *u, double s, double A, double *g, double l2,
                               const double *noise, double eta) noexcept nogil:
    cdef double x = v[j]
    if u != NULL:
        u[j] += A * x
    x *= s
    if g != NULL:
        x -= eta * (g[j] + l2 * x)
        g[j] = 0.0
    if noise != NULL:
        x -= eta * noise[j]
    v[j] = x
    return x * x


cdef double _fold(double *v, double *u, double s, double A, double *g, double l2, const double *noise, double eta,
                  Py_ssize_t p) noexcept nogil:
    """The dense pass of the sparse loop: ``u += A v`` (when ``u`` is not NULL), then ``w = s v``
    updated by the dense gradient ``g + l2 w`` (when ``g`` is not NULL; ``g`` is zeroed) and by
    the noise (when not NULL), with step ``eta``, as in :func:`run_steps`, and stored in ``v``.
    Returns the new ``||v||**2`` (four partial sums); the caller sets ``s = 1``, ``A = 0``."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t j, m = p - p % 4
    for j in range(0, m, 4):
        s0 += _fold_entry(j, v, u, s, A, g, l2, noise, eta)
        s1 += _fold_entry(j + 1, v, u, s, A, g, l2, noise, eta)
        s2 += _fold_entry(j + 2, v, u, s, A, g, l2, noise, eta)
        s3 += _fold_entry(j + 3, v, u, s, A, g, l2, noise, eta)
    for j in range(m, p):
        s0 += _fold_entry(j, v, u, s, A, g, l2, noise, eta)
    return (s0 + s1) + (s2 + s3)


def sparse_work_size(Py_ssize_t p, Py_ssize_t largest_batch):
    """Entries of :func:`run_sparse_steps`' ``work`` buffer for ``p`` parameters and batches of at
    most ``largest_batch`` rows: ``p + min(largest_batch, max(p, block))``, ``block`` the rows of a
    block of its dense route."""
    return p + min(largest_batch, max(p, _SPARSE_BLOCK_ROWS))


def run_sparse_steps(
    const double[::1] data,
    const index_t[::1] indices,
    const index_t[::1] indptr,
    const double[::1] y,
    const double[::1] weights,
    const Py_ssize_t[::1] order,
    Py_ssize_t start,
    const Py_ssize_t[::1] batch_sizes,
    const double[::1] steps,
    const double[:, ::1] noise,
    const unsigned char[::1] noisy,
    double[::1] w,
    double[::1] total,
    double[::1] work,
    int code,
    double a,
    double l2_penalty,
    double radius,
    bint average,
    bint cycle=False,
    double fill=0.0,
    bint with_fill=False,
):
    """:func:`run_steps` on the rows of a CSR matrix ``X`` given by its arrays ``data``,
    ``indices`` and ``indptr`` (int32 or int64, the same for both), the ``weights`` of its rows as
    there: same parameters, same steps,
    the same noise rows consumed in the same order; return the index in ``order`` after the last
    row (an empty ``order``: the rows in sequence). With ``with_fill`` every row has a last entry
    ``fill`` in column ``p - 1`` that it does not store (a sparse fit's intercept column): the
    steps, bit for bit, of the rows with that entry stored last. ``work`` is a buffer of
    :func:`sparse_work_size` entries: ``p`` for a gradient, and one derivative per row of a block
    of the dense route or per row that stores an entry on the sparse route (at most ``p``: the
    batch stores at most ``p`` entries there), not one per row of the batch.

    A noiseless step whose batch stores at most ``p`` entries costs ``O(nnz)``, not ``O(p)``. The
    iterate is held as ``w = s v`` with a scalar ``s``: the ridge shrinkage and the projection onto
    the ball multiply ``s``; the gradient updates ``v`` at the stored entries of the batch's rows
    (``v += c x / s``, all margins taken first at the step's starting point); the projection reads
    ``||w||**2 = s**2 ||v||**2`` from ``||v||**2`` updated by the change of each updated entry; with
    ``average``, the sum of the iterates is held as ``u + A v`` (``A`` the sum of the scales since
    the last fold; an update of ``v[j]`` by ``delta`` subtracts ``A delta`` from ``u[j]``).

    The dense steps fold that state back in one pass over ``p`` (``u += A v``, ``v <- s v``,
    ``||v||**2`` recomputed, ``s = 1``, ``A = 0``), fused with their dense work: a noisy step adds
    its noise in that pass; a step whose batch stores more than ``p`` entries (full batches)
    reads each row once, its margin and its gradient term ``g += phi' x / B`` while the row is in
    cache, as :func:`run_steps` does, and applies ``g + lambda w`` in that pass. The end of the call
    folds too (``w`` and ``total`` hold the iterate and the sum on return), and so does a scale
    ``|s|`` leaving ``[2**-100, 2**100]``, or ``[1/2, 2]`` with ``average``: ``u`` and ``A v`` then
    stay within a few times the sum ``u + A v`` of the steps since the fold (``|A| <= 2 k``,
    ``|v| <= 2 |w|`` after ``k`` steps), whereas a scale that fell by a factor ``f`` would make
    them ``f`` times larger than the sum they cancel to, and their rounding with them (a ball
    that projects every step, a ridge that shrinks every step: ``1e10`` off in 500 steps).

    The arithmetic is that of :func:`run_steps` up to the order of floating-point operations:
    ``||v||**2`` carries the rounding of the sparse steps since the last fold (at most
    ``len(steps)`` of them, ``KERNEL_CHUNK_STEPS`` in :mod:`~skdpsco.solvers._core`), so a
    projection's factor is the dense loop's to a relative ``~len(steps) * 1e-16``
    (``tests/test_kernel.py`` checks the reference's iterates to 1e-12).
    """
    cdef Py_ssize_t p = w.shape[0]
    cdef Py_ssize_t T = steps.shape[0], n_order = order.shape[0] if order.shape[0] else indptr.shape[0] - 1
    cdef Py_ssize_t t, i, k, row, noise_row = 0, B, end, stored, first, last, largest = 0
    cdef double eta, z, norm2
    cdef double s = 1.0, A = 0.0, vv = 0.0  # w = s v; the sum of the iterates is u + A v; vv = ||v||**2
    cdef double low = _AVERAGE_SCALE_LOW if average else _SCALE_LOW
    cdef double high = _AVERAGE_SCALE_HIGH if average else _SCALE_HIGH
    cdef double *vp = &w[0]
    cdef double *up = &total[0] if average else NULL
    cdef double *gp = &work[0]
    cdef double *dp = &work[p]
    cdef const double *xp = &data[0] if data.shape[0] else NULL
    cdef const index_t *ip = &indices[0] if indices.shape[0] else NULL
    cdef const index_t *rp = &indptr[0]
    cdef const Py_ssize_t *op = &order[0] if order.shape[0] else NULL
    cdef const double *yp = &y[0] if y.shape[0] else NULL
    cdef const double *cp = _weights_of(weights, indptr.shape[0] - 1)
    cdef const double *xi
    cdef Py_ssize_t column = p - 1 if with_fill else -1  # the unstored intercept column, or none
    for t in range(T):
        largest = max(largest, batch_sizes[t])
    if with_fill and p < 1:
        raise ValueError("w needs an entry for the intercept column.")
    if work.shape[0] < sparse_work_size(p, largest):
        raise ValueError(f"work must have at least {sparse_work_size(p, largest)} entries; got {work.shape[0]}.")
    with nogil:
        for i in range(p):
            gp[i] = 0.0
        vv = _dot(vp, vp, p)
        for t in range(T):
            B = batch_sizes[t]
            eta = steps[t]
            if cycle and start + B > n_order:
                start = 0
            end = start + B
            xi = &noise[noise_row, 0] if noisy[t] else NULL
            noise_row += noisy[t] != 0
            if average:
                A += s
            stored = 0
            for i in range(start, end):
                row = _row_at(op, i)
                stored += rp[row + 1] - rp[row] + with_fill
            if stored > p:  # the dense route: one pass over the rows, one over p
                first = start
                while first < end:  # blocks of rows: margins, then gradient terms (the rows in cache)
                    last = min(first + _SPARSE_BLOCK_ROWS, end)
                    for i in range(first, last):
                        row = _row_at(op, i)
                        z = s * _row_dot(xp, ip, rp[row], rp[row + 1], vp, fill, column)
                        dp[i - first] = _row_derivative(code, z, yp, cp, row, a) / B
                    for i in range(first, last):
                        row = _row_at(op, i)
                        _row_add(dp[i - first], xp, ip, rp[row], rp[row + 1], gp, fill, column)
                    first = last
                vv = _fold(vp, up, s, A, gp, l2_penalty, xi, eta, p)
                s, A = 1.0, 0.0
            else:  # the sparse route: margins, then updates at the stored entries
                k = 0  # the rows that store an entry (at most stored <= p): an empty row updates nothing
                for i in range(start, end):
                    row = _row_at(op, i)
                    if rp[row + 1] > rp[row] or with_fill:
                        z = s * _row_dot(xp, ip, rp[row], rp[row + 1], vp, fill, column)
                        dp[k] = _row_derivative(code, z, yp, cp, row, a) / B
                        k += 1
                if l2_penalty != 0.0:
                    s *= 1.0 - eta * l2_penalty
                    if not (low <= fabs(s) <= high):
                        vv = _fold(vp, up, s, A, NULL, 0.0, NULL, 0.0, p)
                        s, A = 1.0, 0.0
                k = 0
                for i in range(start, end):
                    row = _row_at(op, i)
                    if rp[row + 1] > rp[row] or with_fill:
                        vv += _row_update(-eta * dp[k] / s, xp, ip, rp[row], rp[row + 1], vp, up, A, fill, column)
                        k += 1
                if xi != NULL:
                    vv = _fold(vp, up, s, A, NULL, 0.0, xi, eta, p)
                    s, A = 1.0, 0.0
            if radius > 0.0:
                norm2 = s * s * vv
                if norm2 > radius * radius:
                    s *= radius / sqrt(norm2)
                    if s < low:
                        vv = _fold(vp, up, s, A, NULL, 0.0, NULL, 0.0, p)
                        s, A = 1.0, 0.0
            start = end
        _fold(vp, up, s, A, NULL, 0.0, NULL, 0.0, p)
    return start
