"""What the two in-memory layouts of the rows share: the rule that measures and clips a row whose
sum of squares leaves the float range, the check of the order of a copy, and the row source.

A layout (:func:`skdpsco.rows.layout_of`) is an object whose methods read the rows of that layout:
:class:`skdpsco.rows._dense.DenseRows` (numpy arrays), :class:`skdpsco.rows._csr.CsrRows` (CSR
matrices), both subclasses of :class:`InMemoryRows`, and the Dask layout of :mod:`skdpsco._dask`.
"""

from __future__ import annotations

import numpy as np

from ._source import ArrayRows, row_order

SQUARES_LOW = 2.0**-900
"""The smallest sum of squares from which a row's norm is read as its square root: the squares
that underflow (each below ``2**-1022``) then change it by a relative ``d 2**-122`` at most. The
compiled kernel's ``_SQUARES_LOW`` (:mod:`skdpsco.rows._maps`)."""


def plain_squares(squares: np.ndarray) -> np.ndarray:
    """Which rows' sums of squares give their norms as square roots: those in ``[SQUARES_LOW,
    float max]`` (false for NaN). The others overflowed, or lost their precision among the
    subnormals (a zero row too, measured exactly by the layout's ``scaled_row_norms``)."""
    return (squares >= SQUARES_LOW) & (squares <= np.finfo(float).max)


def clipped_from_scaled(rows: np.ndarray, exponents, factors) -> np.ndarray:
    """``(rows 2**-e) (max_norm / r)``, the clipped rows of ``clip_rows`` from their scaled norms
    ``r`` (``factors = max_norm / r``): a factor in ``[-1, 1]`` times one near ``max_norm``,
    neither of which overflows, where ``rows * (max_norm / ||rows||)`` would divide by infinity."""
    with np.errstate(under="ignore"):
        return np.ldexp(rows, -exponents) * factors


def refuse_non_finite():
    """The input check's error. It says no more than scikit-learn's: not how many rows, nor which
    (an error message leaves ``fit`` like a release, and no mechanism accounts for it)."""
    raise ValueError(
        "Input X contains NaN or infinity. Remove those rows or impute the values (e.g. "
        "sklearn.impute.SimpleImputer) before fitting."
    )


class InMemoryRows:
    """The methods the dense and the CSR layouts share; a subclass provides ``row_squares(X)``
    (each row's sum of squares, an overflow silently ``inf``), ``scaled_row_norms(X)`` (each row's
    norm as ``(e, r)``, ``||x|| = 2**e r``, known beyond the float range) and
    ``_rows_in_order(X, order, max_norm, fill, magnitude_range, spare_column, out)`` (the copy of
    :meth:`clipped_rows_in_order`, its order checked)."""

    lazy = False
    """Whether the rows are read lazily, block by block where they are stored (Dask)."""

    unstored_columns = False
    """Whether rows of this layout may carry a last column of one value that they do not store
    (the CSR layout's intercept column)."""

    def row_norms(self, X) -> np.ndarray:
        """The ``l2`` norm of every row, without a temporary of the size of ``X``. A row whose sum
        of squares overflows (or is subnormal) gets its norm as ``2**e r``
        (:meth:`scaled_row_norms`), ``inf`` only when the norm itself exceeds the float range (its
        binary order of magnitude is then above 1023: it lands in the top bin of any histogram of
        orders, :mod:`skdpsco.linear_model._bounds`); a row with a NaN or an infinite entry is an
        error (:func:`refuse_non_finite`)."""
        squares = self.row_squares(X)
        scaled_rows = np.flatnonzero(~plain_squares(squares))
        norms = np.sqrt(squares, out=squares)  # in place: one vector of the rows, not two
        if scaled_rows.size:
            exponents, scaled = self.scaled_row_norms(X[scaled_rows])
            with np.errstate(over="ignore"):  # no warning: it would tell that some row is that long
                norms[scaled_rows] = np.ldexp(scaled, exponents)
        return norms

    def clip_factors(self, X, max_norm: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(scale, scaled_rows, exponents, factors)`` of ``clip_rows`` for the rows of ``X``:
        every row times ``scale``, then the rows ``scaled_rows`` (whose sums of squares overflowed
        or lost their precision, ``scale`` 1 there) mapped by :func:`clipped_from_scaled` with
        their ``exponents`` and ``factors``.

        A finite row is clipped like any other however long it is, and only a row with a NaN or
        an infinite entry is an error: otherwise a finite row longer than the float range would
        make ``fit`` raise on one dataset and not on its neighbour, a release no mechanism
        accounts for (``DESIGN.md``, "Privacy model")."""
        squares = self.row_squares(X)
        # no warning (it would tell that some row is that long or short); inf / inf is a row measured
        # by its scaled norm below, max_norm / tiny an overflow to the factor inf of a zero row
        with np.errstate(over="ignore", invalid="ignore"):
            scale = np.minimum(1.0, max_norm / np.maximum(np.sqrt(squares), np.finfo(float).tiny))
        # rows measured by their scaled norms: left as they are by the product, then clipped
        scaled_rows = np.flatnonzero(~plain_squares(squares))
        scale[scaled_rows] = 1.0
        exponents, norms = self.scaled_row_norms(X[scaled_rows])
        with np.errstate(over="ignore", under="ignore"):  # max_norm 2**-e: inf and 0 compare as they should
            long = norms > np.ldexp(max_norm, -exponents)
        return scale, scaled_rows[long], exponents[long], max_norm / norms[long]

    def clipped_rows_in_order(self, X, order: np.ndarray, max_norm: float, fill: float | None = None,
                              magnitude_range: int | None = None, spare_column: bool = False,
                              out: np.ndarray | None = None):
        """The rows ``X[order]`` clipped to ``l2`` norm at most ``max_norm`` (``clip_rows``), with a
        last column of ``fill`` when given (the intercept column), in one new copy.

        The estimators call it once per fit with a uniformly random ``order`` drawn before the
        rows are read: the copy that clipping needs anyway (peak memory one copy of ``X``) is made
        in the order the solvers read the rows, so they stream memory instead of jumping
        (``X[order]`` is a per-row map, it costs no privacy; a data-independent permutation leaves
        every guarantee as it is, pitfall D5). Rows with a NaN or an infinite entry are an error:
        the estimators leave that check to this pass over ``X``.

        With ``magnitude_range`` ``R`` the result is ``(rows, counts)``: ``counts`` the ``(d, 2 R +
        1)`` histograms of the binary orders of magnitude of the copied rows' entries (as floats),
        counted while each row is in cache, or ``None`` where the layout does not count them (the
        caller counts them then). ``spare_column``: CSR rows keep room for an intercept column
        appended later in place. ``out``: a C-contiguous float64 array of the result's shape to
        write into (dense rows only). Each layout's ``_rows_in_order`` says how it copies."""
        order = np.asarray(order)
        if order.ndim != 1 or (order.size and (order.min() < 0 or order.max() >= X.shape[0])):
            raise ValueError(f"order must be a vector of indices into the {X.shape[0]} rows of X.")
        return self._rows_in_order(X, order, max_norm, fill, magnitude_range, spare_column, out)

    def block_sum(self, function, *arrays, extra=()):
        """``function(*arrays, *extra)``: a sum over the rows, of rows in memory in one call (the
        Dask layout sums it over the blocks where they are)."""
        return function(*arrays, *extra)

    def owns_blocks(self, X) -> bool:
        """Whether :meth:`block_sum` hands its function fresh copies of the rows, which it may
        overwrite: never in memory (they are the caller's)."""
        return False

    def row_source(self, X, y, n_rows: int, order_rng: np.random.Generator, order=None, rows_written=None):
        """The rows read in ``row_order(n_rows, order_rng, order)`` (:class:`~skdpsco.rows._source.ArrayRows`)."""
        return ArrayRows(X, y, row_order(n_rows, order_rng, order), rows_written, self)
