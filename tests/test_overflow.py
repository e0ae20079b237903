"""A finite row whose length overflows is clipped like any other row.

Replace-one neighbours ``D`` and ``D'``, where ``D'`` holds one row whose entries are all finite but
whose norm (or sum of squares) exceeds the float range, or whose squares are subnormal: ``fit``
must treat both alike (both succeed, the same event, the same warnings, a finite model). An error
on ``D'`` alone would be a release no mechanism accounts for, before the charge (free probing) or
after it (``DESIGN.md``, "Privacy model"). Only a NaN or an infinite *entry* is an error.
"""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import sparse

from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.linear_model import DPHingeSVM, DPLpRegression
from skdpsco.model_selection import DPSearchCV
from skdpsco.preprocessing import DPStandardScaler
from skdpsco.solvers import _core as core
from skdpsco.solvers import _kernel
from skdpsco.rows import CSR, DENSE, _maps, layout_of

N_ROWS, N_FEATURES = 40, 3

EXTREME_ROWS = {
    "norm-overflows": [1.5e308, 1.5e308, 0.0],  # every entry finite, the norm beyond the float range
    "squares-overflow": [1e200, -1e200, 3.0],  # the norm finite, its square not
    "all-huge": [1e308, -1e308, 1e308],
    "subnormal": [5e-324, -1e-320, 0.0],  # squares below the subnormals
}


def neighbours(extreme_row):
    """``(D, D', y)``: ``D'`` is ``D`` with its row 5 replaced by ``extreme_row``."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_ROWS, N_FEATURES))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(N_ROWS) > 0, 1, 0)
    X_prime = X.copy()
    X_prime[5] = extreme_row
    return X, X_prime, y


def fit_record(make, X, y):
    """``(event, warning categories and texts, coef, intercept)`` of one fit, with its own ledger;
    raises whatever the fit raises."""
    ledger = PrivacyAccountant()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = make(ledger).fit(X, y)
    assert len(ledger.history) == 1
    coef = np.asarray(getattr(model, "coef_", getattr(model, "best_estimator_", model).coef_))
    intercept = np.asarray(getattr(getattr(model, "best_estimator_", model), "intercept_"))
    return model.dp_event_, sorted((w.category.__name__, str(w.message)) for w in caught), coef, intercept


def assert_fit_alike(make, X, X_prime, y, y_prime=None):
    event, caught, _, _ = fit_record(make, X, y)
    event_prime, caught_prime, coef, intercept = fit_record(make, X_prime, y if y_prime is None else y_prime)
    assert event_prime == event
    assert caught_prime == caught
    assert np.isfinite(coef).all() and np.isfinite(intercept).all()


def dask_rows(X):
    da = pytest.importorskip("dask.array")
    return da.from_array(X, chunks=(N_ROWS // 2, N_FEATURES))


ESTIMATORS = {
    "default": lambda ledger: DPLogisticRegression(random_state=0, accountant=ledger, classes=[0, 1]),
    "data_norm": lambda ledger: DPLogisticRegression(data_norm=2.0, random_state=0, accountant=ledger, classes=[0, 1]),
    "private-row-bound": lambda ledger: DPLogisticRegression(
        data_norm="private", random_state=0, accountant=ledger, classes=[0, 1]),
    "unscaled": lambda ledger: DPLogisticRegression(
        data_norm=2.0, feature_scaling=None, random_state=0, accountant=ledger, classes=[0, 1]),
    "svm": lambda ledger: DPHingeSVM(random_state=0, accountant=ledger, classes=[0, 1]),
    "secure": lambda ledger: DPLogisticRegression(secure_noise=True, accountant=ledger, classes=[0, 1]),
    "newton": lambda ledger: DPLogisticRegression(algorithm="newton", random_state=0, accountant=ledger, classes=[0, 1]),
}
LAYOUTS = {
    "C": np.ascontiguousarray,
    "F": np.asfortranarray,
    "CSR": sparse.csr_matrix,
    "dask": dask_rows,
}


@pytest.mark.parametrize("extreme", sorted(EXTREME_ROWS))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
def test_a_row_whose_length_overflows_fits_like_any_other(estimator, layout, extreme):
    if layout == "dask" and estimator == "secure":
        pytest.skip("secure mode's grid releases are in-memory only")
    X, X_prime, y = neighbours(EXTREME_ROWS[extreme])
    make = ESTIMATORS[estimator]
    if layout == "dask" and estimator != "newton":  # a one-pass algorithm that streams Dask rows
        make = lambda ledger, make=make: make(ledger).set_params(algorithm="phased_sgd")  # noqa: E731
    assert_fit_alike(make, LAYOUTS[layout](X), LAYOUTS[layout](X_prime), y)


@pytest.mark.parametrize("extreme", sorted(EXTREME_ROWS))
@pytest.mark.parametrize("params", [{}, {"data_norm": 2.0, "y_bound": 2.0}], ids=["private-bounds", "public-bounds"])
def test_regression_with_a_row_or_a_target_that_overflows(params, extreme):
    X, X_prime, _ = neighbours(EXTREME_ROWS[extreme])
    y = X[:, 0] - 0.5 * X[:, 1]
    y_prime = y.copy()
    y_prime[5] = 1.5e308  # a finite target whose square overflows
    make = lambda ledger: DPLpRegression(random_state=0, accountant=ledger, **params)  # noqa: E731
    assert_fit_alike(make, X, X_prime, y)
    assert_fit_alike(make, X, X, y, y_prime)
    assert_fit_alike(make, X, X_prime, y, y_prime)


def test_search_plans_and_fits_alike_with_a_row_that_overflows():
    X, X_prime, y = neighbours(EXTREME_ROWS["norm-overflows"])
    X, X_prime, y = (np.tile(a, (2,) + (1,) * (a.ndim - 1)) for a in (X, X_prime, y))  # the trials' splits need rows
    X_prime[N_ROWS + 7] = EXTREME_ROWS["all-huge"]  # one in each split, whatever the order
    make = lambda ledger: DPSearchCV(  # noqa: E731
        DPLogisticRegression(classes=[0, 1]), {"alpha": [0.0, 1e-3]}, n_iter=3, random_state=0, accountant=ledger)
    for X_second in (X_prime, np.asfortranarray(X_prime)):
        assert_fit_alike(make, X, X_second, y)


@pytest.mark.parametrize("scoring", ["neg_mean_squared_error", "neg_mean_absolute_error"])
def test_search_of_a_regression_scores_a_target_that_overflows_alike(scoring):
    X, X_prime, _ = neighbours(EXTREME_ROWS["norm-overflows"])
    X, X_prime = np.tile(X, (2, 1)), np.tile(X_prime, (2, 1))
    y = X[:, 0] - 0.5 * X[:, 1]
    y_prime = y.copy()
    y_prime[::7] = 1.5e308  # in both splits: their squares overflow
    make = lambda ledger: DPSearchCV(  # noqa: E731
        DPLpRegression(), {"alpha": [0.0, 1e-3]}, n_iter=3, scoring=scoring, random_state=0, accountant=ledger)
    assert_fit_alike(make, X, X_prime, y, y_prime)


@pytest.mark.parametrize("row", [0, 13, 29, 41, 55, 63, 77])
def test_search_refuses_a_non_finite_entry_of_any_row_before_any_charge(row):
    """Held-out rows included: they are read only after the charge, by the trials' predict."""
    X, _, y = neighbours(EXTREME_ROWS["norm-overflows"])
    X, y = np.tile(X, (2, 1)), np.tile(y, 2)
    X[row, 1] = np.nan
    ledger = PrivacyAccountant()
    search = DPSearchCV(DPLogisticRegression(classes=[0, 1]), {"alpha": [0.0, 1e-3]}, n_iter=3, random_state=0,
                        accountant=ledger)
    with pytest.raises(ValueError, match=r"^Input X contains NaN or infinity\. Remove"):
        search.fit(X, y)
    regression = DPSearchCV(DPLpRegression(), {"alpha": [0.0]}, n_iter=3, random_state=0, accountant=ledger)
    with pytest.raises(ValueError, match="^Input y contains infinity"):
        regression.fit(np.nan_to_num(X), np.where(np.arange(len(y)) == row, np.inf, X[:, 0]))
    assert ledger.history == ()


def test_standard_scaler_with_a_row_that_overflows():
    X, X_prime, _ = neighbours(EXTREME_ROWS["norm-overflows"])
    for bounds, secure in [((-3.0, 3.0), False), ((-1e150, 1e150), False), ((-1e150, 1e150), True)]:
        fits = []
        for rows in (X, X_prime):
            ledger = PrivacyAccountant()
            options = {"secure_noise": True} if secure else {"random_state": 0}
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                scaler = DPStandardScaler(feature_bounds=bounds, accountant=ledger, **options).fit(rows)
            assert np.isfinite(scaler.mean_).all() and np.isfinite(scaler.scale_).all()
            fits.append(scaler.dp_event_)
        assert fits[0] == fits[1]


def test_standard_scaler_refuses_bounds_whose_second_moment_overflows_before_any_charge():
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match="feature_bounds are too wide"):
        DPStandardScaler(feature_bounds=(-1e200, 1e200), accountant=ledger).fit(np.zeros((10, 2)))
    assert ledger.history == ()


@pytest.mark.parametrize("layout", sorted(set(LAYOUTS) - {"dask"}))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_entry_is_still_refused_before_any_charge(layout, bad):
    X, _, y = neighbours(EXTREME_ROWS["norm-overflows"])
    X[5] = [1.5e308, bad, 0.0]
    for make in (ESTIMATORS["default"], ESTIMATORS["data_norm"], ESTIMATORS["private-row-bound"]):
        ledger = PrivacyAccountant()
        with pytest.raises(ValueError, match=r"^Input X contains NaN or infinity\. Remove"):
            make(ledger).fit(LAYOUTS[layout](X), y)
        assert ledger.history == ()


def test_a_non_finite_entry_of_dask_rows_is_refused_before_any_charge():
    X, _, y = neighbours(EXTREME_ROWS["norm-overflows"])
    X[5, 1] = np.nan
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match=r"^Input X contains NaN or infinity\. Remove"):
        ESTIMATORS["default"](ledger).fit(dask_rows(X), y)
    assert ledger.history == ()


# -- the norms and the clip against an exact reference ------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
rows_strategy = st.integers(1, 6).flatmap(lambda d: st.lists(finite, min_size=d, max_size=d))
max_norms = st.sampled_from([1e-3, 1.0, 1e3, math.inf])


def exact_squares(row) -> Fraction:
    return sum((Fraction(x) ** 2 for x in row), Fraction(0))


def assert_scaled_norm(row, exponent, scaled):
    """``||row|| = 2**exponent scaled`` to a relative ``d`` ulps, from the exact sum of squares."""
    exact = exact_squares(row) / Fraction(4) ** int(exponent)
    if exact == 0:
        assert scaled == 0
        return
    assert 0.5 <= scaled < math.sqrt(len(row)) * (1 + 1e-15)
    assert abs(Fraction(scaled) ** 2 / exact - 1) <= 4 * len(row) * 2.0**-52


def assert_clipped(row, clipped, max_norm):
    """``clipped`` is ``row`` (floats, or Fractions possibly beyond the float range) times ``min(1,
    max_norm / ||row||)``: ``row`` itself, rounded, when it is not longer than ``max_norm``, else
    of norm ``max_norm`` in ``row``'s direction (its entries that are not negligibly small, relative
    to the largest, in the same ratio)."""
    assert np.isfinite(clipped).all()
    exact = [Fraction(x) for x in row]
    squares = exact_squares(exact)
    if math.isinf(max_norm) or squares <= Fraction(max_norm) ** 2 * (1 - 1e-14):
        for x, c in zip(exact, clipped):  # rounded to the nearest float (subnormals absolutely)
            assert abs(Fraction(c) - x) <= abs(x) * Fraction(1, 2**53) + Fraction(1, 2**1075)
        return
    if squares < Fraction(max_norm) ** 2 * (1 + 1e-14):
        return  # at the bound: either side of the rounding
    assert abs(exact_squares(clipped) / Fraction(max_norm) ** 2 - 1) <= 1e-14
    ratio = Fraction(max_norm) ** 2 / squares  # the factor, squared
    largest = max(abs(x) for x in exact)
    for x, c in zip(exact, clipped):
        if abs(x) >= largest * Fraction(2.0**-40):
            assert abs(Fraction(c) ** 2 / (x * x) / ratio - 1) <= 1e-13
            assert (c > 0) == (x > 0)


@settings(max_examples=300, deadline=None)
@given(row=rows_strategy)
@example(row=[1.5e308, 1.5e308, 0.0])
@example(row=[1e308] * 6)
@example(row=[5e-324, -5e-324])
@example(row=[0.0, 0.0])
@example(row=[1e-200, 3e-201, 1e-320])
def test_scaled_row_norms_numpy_and_compiled_are_exact(row):
    X = np.array([row])
    for exponents, scaled in (layout_of(X).scaled_row_norms(X), _maps.scaled_row_norms(X),
                              CSR.scaled_row_norms(sparse.csr_matrix(X))):
        assert_scaled_norm(row, exponents[0], scaled[0])
    norm = layout_of(X).row_norms(X)[0]
    if not any(row):
        assert norm == 0.0
    else:
        exponent = math.frexp(max(map(abs, row)))[1]
        scaled_exact = math.sqrt(exact_squares(row) / Fraction(4) ** exponent)
        if scaled_exact * 2.0 ** (exponent - 1024) < 0.5:  # within the float range
            assert norm == pytest.approx(math.ldexp(scaled_exact, exponent), rel=1e-14, abs=0)
        else:
            assert norm >= np.finfo(float).max / 4  # inf beyond the float range
    assert CSR.row_norms(sparse.csr_matrix(X))[0] == pytest.approx(norm, rel=1e-15, abs=0)


@settings(max_examples=300, deadline=None)
@given(row=rows_strategy, max_norm=max_norms)
@example(row=[1.5e308, 1.5e308, 0.0], max_norm=1.0)
@example(row=[1.5e308, 1.5e308, 0.0], max_norm=math.inf)
@example(row=[1e308] * 6, max_norm=1e3)
@example(row=[5e-324, -5e-324], max_norm=1e-3)
@example(row=[1e200, -1e200, 3.0], max_norm=1.0)
def test_clip_numpy_and_compiled_clip_long_rows_like_any_other(row, max_norm):
    X = np.array([row, [0.3, *[0.4] * (len(row) - 1)]])
    compiled = np.empty((2, len(row) + 1))
    assert _maps.gather_clipped_rows(X, np.array([0, 1], dtype=np.intp), max_norm, compiled, 7.0) == 0
    np.testing.assert_array_equal(compiled[:, -1], 7.0)
    outputs = [compiled[:, :-1], layout_of(X).clip_rows(X, max_norm), DENSE.clip_rows(np.asfortranarray(X), max_norm),
               CSR.clip_rows(sparse.csr_matrix(X), max_norm).toarray()]
    for clipped in outputs:
        assert_clipped(row, clipped[0], max_norm)
        assert_clipped(list(X[1]), clipped[1], max_norm)
    for clipped in outputs[1:]:  # the reference and the kernel: the same rows, to rounding
        np.testing.assert_allclose(clipped, outputs[0], rtol=1e-14, atol=0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_the_norms_still_refuse_a_non_finite_entry(bad):
    X = np.array([[1.5e308, bad, 0.0], [1.0, 2.0, 3.0]])
    for rows in (X, sparse.csr_matrix(X)):
        layout = layout_of(rows)
        for function in (layout.row_norms, lambda rows: layout.clip_rows(rows, 1.0), layout.scaled_row_norms):
            with pytest.raises(ValueError, match=r"^Input X contains NaN or infinity\. Remove"):
                function(rows)
    out = np.empty((2, 3))
    assert _maps.gather_clipped_rows(X, np.array([0, 1], dtype=np.intp), 1.0, out, 0.0) == 1


@settings(max_examples=200, deadline=None)
@given(row=st.integers(1, 5).flatmap(lambda d: st.tuples(st.lists(finite, min_size=d, max_size=d),
                                                        st.lists(st.integers(-40, 42), min_size=d, max_size=d))),
       bound=st.sampled_from([0.5, 1.5, 1e3]))
@example(row=([1.5e308, 1.5e308, 0.0], [-40, -40, 0]), bound=1.5)
@example(row=([1e308] * 5, [-40, 3, -1, 42, 0]), bound=0.5)
@example(row=([5e-324, -1e-310], [42, 42]), bound=1.5)
def test_the_scaling_maps_of_a_long_row_are_its_exact_clip(row, bound):
    """The rows of a default fit: ``x / s`` (per-feature powers of two) clipped to ``B``, by numpy
    and by the compiled maps of a Dask block: the exact ``x / s`` clipped, however far ``x / s``
    lies beyond the float range (it is divided by a further power of two first, which keeps its
    direction, and the clip then gives the same row)."""
    _dask = pytest.importorskip("skdpsco._dask")
    divide_by_powers_of_two = DENSE.divide_by_powers_of_two

    values, exponents = row
    scales = np.ldexp(1.0, exponents)
    exact = [Fraction(x) / Fraction(2) ** k for x, k in zip(values, exponents)]
    raw = np.array([values, np.ones(len(values))])
    numpy_rows = DENSE.clip_rows(DENSE.divide_by_powers_of_two(raw, scales), bound)
    maps = ((divide_by_powers_of_two, (scales,)), (DENSE.clip_rows, (bound,)))
    spec = _dask.Rows(dask_rows(raw), maps).spec
    compiled_rows = _dask._transformed(raw, spec, np.empty(raw.shape))
    for mapped in (numpy_rows, compiled_rows):
        assert np.isfinite(mapped).all()
        assert_clipped(exact, mapped[0], bound)
    np.testing.assert_allclose(compiled_rows, numpy_rows, rtol=1e-14, atol=0)

