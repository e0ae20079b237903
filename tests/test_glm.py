"""The generalised regressors: DPHuberRegressor, DPQuantileRegressor, DPPoissonRegressor."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from scipy.integrate import quad
from sklearn.datasets import load_diabetes
from sklearn.metrics import mean_pinball_loss
from sklearn.model_selection import train_test_split

from skdpsco import DPHuberRegressor, DPLpRegression, DPPoissonRegressor, DPQuantileRegressor, PrivacyAccountant
from skdpsco.defaults import POISSON_LOG_RANGE
from skdpsco.losses import HuberLoss, PinballLoss, PoissonLoss, PowerLoss, get_loss
from skdpsco.smoothing import GaussianSmoothedLoss, smooth
from skdpsco.solvers import ALGORITHMS, Problem
from skdpsco.solvers._core import kernel_loss

# algorithms refused for a regression loss whatever its constants (their messages say why)
NOT_FOR_REGRESSION = {"objective_perturbation", "newton"}
NEEDS_RIDGE = {"strongly_convex"}


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return train_test_split(X, y, test_size=0.25, random_state=0)


def rmse(prediction, y):
    return float(np.sqrt(np.mean((prediction - y) ** 2)))


def test_huber_beats_the_median_on_raw_diabetes_rows_with_one_event(diabetes):
    X_train, X_test, y_train, y_test = diabetes
    accountant = PrivacyAccountant()
    errors = [
        rmse(DPHuberRegressor(random_state=seed, accountant=accountant).fit(X_train, y_train).predict(X_test), y_test)
        for seed in range(5)
    ]
    assert len(accountant.history) == 5  # one event per fit
    assert np.mean(errors) < rmse(np.median(y_train), y_test)


def test_huber_threshold_is_a_fraction_of_the_target_bound(diabetes):
    X_train, _, y_train, _ = diabetes
    private = DPHuberRegressor(huber_threshold=0.3, random_state=0, accountant=PrivacyAccountant()).fit(X_train, y_train)
    assert isinstance(private.loss_, HuberLoss)
    assert private.loss_.epsilon == pytest.approx(0.3 * np.sqrt(2.0))  # solver's units: y / (y_bound_ / sqrt 2)
    public = DPHuberRegressor(huber_threshold=0.3, y_bound=400.0, random_state=0,
                              accountant=PrivacyAccountant()).fit(X_train, y_train)
    assert public.loss_.epsilon == pytest.approx(120.0) and not hasattr(public, "y_bound_")
    assert public.epsilon_ <= 1.0


def test_huber_noise_shrinks_with_the_threshold():
    # L = B min(t, B_y + B R): the Lipschitz constant every solver calibrates on
    small = DPHuberRegressor(huber_threshold=0.1)._make_loss().constants(1.0, 10.0, 1.0).lipschitz
    large = DPHuberRegressor(huber_threshold=0.5)._make_loss().constants(1.0, 10.0, 1.0).lipschitz
    assert small == pytest.approx(large / 5)


@pytest.mark.parametrize("algorithm", sorted(set(ALGORITHMS) - NOT_FOR_REGRESSION - {"gradient_perturbation", "stop_pnsgd"}))
def test_huber_runs_every_algorithm_that_applies(diabetes, algorithm):
    X_train, X_test, y_train, _ = diabetes
    alpha = 0.1 if algorithm in NEEDS_RIDGE else 0.0
    reg = DPHuberRegressor(algorithm=algorithm, alpha=alpha, random_state=0, accountant=PrivacyAccountant())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X_train, y_train)
    assert reg.algorithm_ == algorithm and reg.epsilon_ <= 1.0
    assert np.all(np.isfinite(reg.predict(X_test)))


def test_huber_accepts_weights_and_sparse_rows(diabetes):
    X_train, X_test, y_train, _ = diabetes
    weights = np.linspace(0.1, 1.0, len(y_train))
    weighted = DPHuberRegressor(random_state=0, accountant=PrivacyAccountant()).fit(X_train, y_train, sample_weight=weights)
    assert weighted.predict(X_test).shape == (len(X_test),)
    reg = DPHuberRegressor(random_state=0, accountant=PrivacyAccountant()).fit(sparse.csr_matrix(X_train), y_train)
    assert reg.predict(sparse.csr_matrix(X_test)).shape == (len(X_test),)


def test_huber_with_a_tiny_threshold_is_half_scaled_least_absolute_deviations():
    # t |r| - t^2 / 2 -> t |r|: the gradient of the Huber loss is t times that of |r| beyond t
    z, y = np.array([-3.0, 0.5, 2.0]), np.array([1.0, -1.0, -2.0])
    t = 1e-3
    np.testing.assert_allclose(HuberLoss(t).derivative(z, y), t * DPLpRegression(p=1.0)._make_loss().derivative(z, y))


# -- the pinball loss and its smoothing ----------------------------------------------------------------
quantiles = st.floats(0.01, 0.99)
reals = st.floats(-50.0, 50.0)


@settings(max_examples=200, deadline=None)
@given(quantiles, reals, reals)
def test_pinball_derivative_matches_finite_differences_off_the_kink(q, z, y):
    loss, h = PinballLoss(q), 1e-6
    if abs(z - y) < 10 * h:
        return
    numeric = (loss.value([z + h], [y]) - loss.value([z - h], [y])) / (2 * h)
    np.testing.assert_allclose(loss.derivative([z], [y]), numeric, atol=1e-6)


@settings(max_examples=200, deadline=None)
@given(quantiles, st.floats(0.1, 10.0), st.floats(0.1, 10.0), st.floats(0.0, 10.0), st.integers(0, 2**32 - 1))
def test_pinball_gradient_bound_holds_on_the_domain_and_is_attained(q, B, R, B_y, seed):
    rng = np.random.default_rng(seed)
    L = PinballLoss(q).constants(B, R, B_y).lipschitz
    assert L == pytest.approx(B * max(q, 1 - q))
    x = rng.normal(size=(50, 3))
    x *= B * rng.uniform(size=(50, 1)) / np.linalg.norm(x, axis=1, keepdims=True)
    w = rng.normal(size=3)
    w *= R / np.linalg.norm(w)
    y = rng.uniform(-B_y, B_y, size=50)
    norms = np.abs(PinballLoss(q).derivative(x @ w, y)) * np.linalg.norm(x, axis=1)
    assert np.all(norms <= L * (1 + 1e-12))
    # attained: a row of norm B with its residual of the sign of the larger slope
    extreme = abs(PinballLoss(q).derivative([0.0], [1.0 if q >= 0.5 else -1.0])[0]) * B
    assert extreme == pytest.approx(L)


def test_pinball_constants_and_catalogue():
    c = PinballLoss(0.25).constants(2.0, 3.0, 1.0)
    assert (c.lipschitz, c.smoothness, c.holder_exponent, c.holder_constant, c.growth) == (1.5, None, 0.0, 2.0, None)
    assert get_loss("pinball", quantile=0.3) == PinballLoss(0.3)
    for bad in (0.0, 1.0, -0.1, True):
        with pytest.raises(ValueError, match="quantile must be"):
            PinballLoss(bad)


@settings(max_examples=100, deadline=None)
@given(reals, reals)
def test_median_pinball_is_half_the_absolute_loss_with_its_derivative(z, y):
    np.testing.assert_allclose(PinballLoss(0.5).value([z], [y]), 0.5 * PowerLoss(1.0).value([z], [y]))
    np.testing.assert_allclose(PinballLoss(0.5).derivative([z], [y]), 0.5 * PowerLoss(1.0).derivative([z], [y]))


def _convolved(function, z, y, width):
    """``E f(z + g, y)``, ``g ~ N(0, width**2)``, by numerical integration (split at the kink)."""
    integrand = lambda g: function(z + g, y) * math.exp(-0.5 * (g / width) ** 2) / (width * math.sqrt(2 * math.pi))
    lo, hi = -40 * width, 40 * width
    kink = min(max(y - z, lo), hi)
    return quad(integrand, lo, kink, epsabs=1e-13)[0] + quad(integrand, kink, hi, epsabs=1e-13)[0]


@settings(max_examples=60, deadline=None)
@given(quantiles, st.floats(-3.0, 3.0), st.floats(-3.0, 3.0), st.floats(0.05, 2.0))
def test_smoothed_pinball_value_and_derivative_match_numerical_integration(q, z, y, width):
    base, smoothed = PinballLoss(q), smooth(PinballLoss(q), width)
    value = _convolved(lambda zz, yy: base.value([zz], [yy])[0], z, y, width)
    slope = _convolved(lambda zz, yy: base.derivative([zz], [yy])[0], z, y, width)
    np.testing.assert_allclose(smoothed.value([z], [y]), value, atol=1e-9)
    np.testing.assert_allclose(smoothed.derivative([z], [y]), slope, atol=1e-9)
    # closed form in the residual r = y - z: d phi_s / dr = Phi(r / s) - (1 - q)
    from scipy.stats import norm
    np.testing.assert_allclose(-smoothed.derivative([z], [y]), norm.cdf((y - z) / width) - (1 - q), atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(quantiles, st.floats(0.1, 5.0), st.floats(0.1, 5.0), st.floats(0.0, 5.0), st.floats(0.05, 2.0))
def test_smoothed_pinball_constants_bound_the_gradient_and_its_variation(q, B, R, B_y, width):
    smoothed = smooth(PinballLoss(q), width)
    c = smoothed.constants(B, R, B_y)
    assert c.lipschitz <= B * max(q, 1 - q) + 1e-12
    assert c.smoothness == pytest.approx(B**2 / (width * math.sqrt(2 * math.pi)))  # J varphi(0) B^2 / s, J = 1
    m = B_y + B * R  # the reachable margins-minus-targets: u in [-m, m] at ||x|| = B
    u = np.linspace(-m, m, 2001)
    slopes = smoothed.derivative(u, np.zeros_like(u))
    assert np.max(np.abs(slopes)) * B <= c.lipschitz * (1 + 1e-12)
    assert np.max(np.abs(np.diff(slopes) / np.diff(u))) * B**2 <= c.smoothness * (1 + 1e-9)
    assert smoothed.approximation_error() == pytest.approx(width / math.sqrt(2 * math.pi))
    gap = smoothed.value(u, np.zeros_like(u)) - PinballLoss(q).value(u, np.zeros_like(u))
    assert np.all(gap >= 0) and np.max(gap) <= smoothed.approximation_error() * (1 + 1e-12)


def test_the_smoothed_pinball_loss_is_not_run_as_the_compiled_smoothed_absolute_loss():
    assert kernel_loss(smooth(PinballLoss(0.3), 0.2)) is None
    assert kernel_loss(smooth(PowerLoss(1.0), 0.2)) is not None


# -- DPQuantileRegressor -------------------------------------------------------------------------------
def test_quantile_median_beats_the_constant_median_with_one_event_each(diabetes):
    X_train, X_test, y_train, y_test = diabetes
    accountant = PrivacyAccountant()
    losses = [
        mean_pinball_loss(y_test, DPQuantileRegressor(random_state=seed, accountant=accountant)
                          .fit(X_train, y_train).predict(X_test), alpha=0.5)
        for seed in range(5)
    ]
    assert len(accountant.history) == 5
    assert np.mean(losses) < mean_pinball_loss(y_test, np.full_like(y_test, np.median(y_train)), alpha=0.5)


def test_quantile_median_is_least_absolute_deviations_up_to_the_factor_two(diabetes):
    X_train, X_test, y_train, _ = diabetes
    common = dict(random_state=0, smoothing_width=0.1, accountant=PrivacyAccountant())
    median = DPQuantileRegressor(quantile=0.5, **common).fit(X_train, y_train)
    lad = DPLpRegression(p=1.0, **common).fit(X_train, y_train)
    assert isinstance(median.loss_, GaussianSmoothedLoss) and median.loss_.base == PinballLoss(0.5)
    z, y = np.linspace(-2, 2, 9), np.linspace(1, -1, 9)
    # the smoothed losses the two optimise: width s for the absolute loss is width s for the pinball
    np.testing.assert_allclose(median.loss_.derivative(z, y), 0.5 * lad.loss_.derivative(z, y))
    np.testing.assert_allclose(median.loss_.value(z, y), 0.5 * lad.loss_.value(z, y))
    # half the gradient bound: both noises are calibrated to their own L, so the models agree in law;
    # with the same seed the noise is the same relative to the gradient, and the fits coincide
    assert median.loss_.constants(1.0, 1.0, 1.0).lipschitz == pytest.approx(
        0.5 * lad.loss_.constants(1.0, 1.0, 1.0).lipschitz)
    np.testing.assert_allclose(median.predict(X_test), lad.predict(X_test), rtol=1e-6, atol=1e-6)


def test_quantile_orders_its_quantiles_on_average(diabetes):
    X_train, X_test, y_train, _ = diabetes
    means = [
        np.mean([DPQuantileRegressor(quantile=q, random_state=s, accountant=PrivacyAccountant())
                 .fit(X_train, y_train).predict(X_test).mean() for s in range(3)])
        for q in (0.1, 0.5, 0.9)
    ]
    assert means[0] < means[1] < means[2]


@pytest.mark.parametrize("algorithm", ["snowball", "phased_sgd", "ftrl", "gradient_perturbation", "noisy_gd"])
def test_quantile_runs_smoothed_and_unsmoothed_algorithms(diabetes, algorithm):
    X_train, X_test, y_train, _ = diabetes
    reg = DPQuantileRegressor(quantile=0.8, algorithm=algorithm, random_state=0, accountant=PrivacyAccountant())
    reg.fit(X_train, y_train)
    smoothed = ALGORITHMS[algorithm].requires_smooth_loss
    assert isinstance(reg.loss_, GaussianSmoothedLoss) == smoothed
    assert np.all(np.isfinite(reg.predict(X_test)))


# -- the Poisson loss and DPPoissonRegressor -------------------------------------------------------
offsets = st.floats(-5.0, 2.0)


@settings(max_examples=200, deadline=None)
@given(offsets, st.floats(-5.0, 5.0), st.floats(0.0, 50.0))
def test_poisson_derivative_matches_finite_differences(offset, z, y):
    loss, h = PoissonLoss(offset), 1e-5
    numeric = (loss.value([z + h], [y]) - loss.value([z - h], [y])) / (2 * h)
    np.testing.assert_allclose(loss.derivative([z], [y]), numeric, rtol=1e-6, atol=1e-6)


@settings(max_examples=200, deadline=None)
@given(offsets, st.floats(0.1, 3.0), st.floats(0.1, 3.0), st.floats(0.0, 20.0), st.integers(0, 2**32 - 1))
def test_poisson_constants_hold_on_the_ball_and_are_attained(offset, B, R, B_y, seed):
    rng = np.random.default_rng(seed)
    loss = PoissonLoss(offset)
    c = loss.constants(B, R, B_y)
    assert c.lipschitz <= B * (math.exp(offset + R * B) + B_y)  # the centred bound, shifted
    assert c.smoothness == pytest.approx(B**2 * math.exp(offset + R * B)) and c.holder_exponent == 1.0
    x = rng.normal(size=(200, 3))
    x *= B * rng.uniform(size=(200, 1)) ** 0.2 / np.linalg.norm(x, axis=1, keepdims=True)
    w = rng.normal(size=3)
    w *= R * rng.uniform() ** 0.2 / np.linalg.norm(w)
    y = rng.uniform(0.0, B_y, size=200)
    z = x @ w
    assert np.all(np.abs(loss.derivative(z, y)) * np.linalg.norm(x, axis=1) <= c.lipschitz * (1 + 1e-12))
    assert np.all(np.exp(z + offset) * np.linalg.norm(x, axis=1) ** 2 <= c.smoothness * (1 + 1e-12))
    # attained at the two ends of the margins on a row of norm B
    ends = np.abs(loss.derivative([R * B, -R * B], [0.0, B_y])) * B
    assert np.max(ends) == pytest.approx(c.lipschitz)


def test_poisson_is_unbounded_on_all_of_r_p():
    c = PoissonLoss().constants(1.0, None, 1.0)
    assert c.lipschitz == math.inf and c.smoothness == math.inf
    assert get_loss("poisson", offset=0.5) == PoissonLoss(0.5)


def test_poisson_default_window_tops_at_the_target_bound_where_l_is_b_times_b_y():
    for y_bound in (50.0, "private"):
        reg = DPPoissonRegressor(y_bound=y_bound, data_norm=2.0, feature_scaling=None)
        B, B_y = reg._row_norm_bound, reg._target_bound
        c = reg._make_loss().constants(B, reg._domain_radius, B_y)
        assert reg._domain_radius * B == pytest.approx(POISSON_LOG_RANGE / 2)
        assert c.lipschitz == pytest.approx(B * B_y) and c.smoothness == pytest.approx(B**2 * B_y)
    # the private bound's scaled targets (B_y = sqrt 2): centred, the same ball costs exp(R B) / B_y more
    centred = PoissonLoss().constants(B, reg._domain_radius, B_y)
    assert centred.smoothness == pytest.approx(c.smoothness * math.exp(POISSON_LOG_RANGE / 2) / B_y)


REGRESSION_ALGORITHMS = sorted(set(ALGORITHMS) - NOT_FOR_REGRESSION)


@pytest.mark.parametrize("algorithm", REGRESSION_ALGORITHMS)
def test_every_solver_keeps_the_poisson_model_in_the_public_ball(algorithm):
    # the constants hold on the ball only: each solver's released parameter must lie in it
    rng = np.random.default_rng(1)
    n, B, R = 400, 1.0, 1.5
    X = rng.normal(size=(n, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.poisson(np.exp(X @ [2.0, -1.0, 0.5])).astype(float).clip(0, 10)
    loss = PoissonLoss(offset=0.0)
    problem = Problem(n_samples=n, coef_shape=(3,), loss=loss, constants=loss.constants(B, R, 10.0), radius=R,
                      epsilon=50.0, delta=1e-5, l2_penalty=0.1 if algorithm in NEEDS_RIDGE else 0.0)
    solver = ALGORITHMS[algorithm]
    result = solver.run(solver.plan(problem), np.ascontiguousarray(X), y, problem, np.random.default_rng(0))
    assert np.linalg.norm(result.coef) <= R * (1 + 1e-9)


@pytest.fixture(scope="module")
def randhie():
    statsmodels = pytest.importorskip("statsmodels.datasets")
    frame = statsmodels.randhie.load_pandas().data
    X = frame[["lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp"]].to_numpy(float)
    return train_test_split(X, frame["mdvis"].to_numpy(float), test_size=0.25, random_state=0)


def test_poisson_beats_the_mean_on_raw_randhie_counts_with_one_event(randhie):
    from sklearn.metrics import mean_poisson_deviance

    X_train, X_test, y_train, y_test = randhie
    accountant = PrivacyAccountant()
    deviances = []
    for seed in range(3):
        reg = DPPoissonRegressor(random_state=seed, accountant=accountant).fit(X_train, y_train)
        prediction = reg.predict(X_test)
        assert np.all(prediction > 0)
        deviances.append(mean_poisson_deviance(y_test, prediction))
    assert len(accountant.history) == 3
    assert np.mean(deviances) < mean_poisson_deviance(y_test, np.full_like(y_test, y_train.mean()))
    assert reg.score(X_test, y_test) > 0  # D^2 of the last fit


def test_poisson_target_scale_enters_the_intercept_as_its_log(randhie):
    X_train, X_test, y_train, _ = randhie
    fit = lambda y: DPPoissonRegressor(random_state=0, accountant=PrivacyAccountant()).fit(X_train, y)
    base, scaled = fit(y_train), fit(8.0 * y_train)  # the released power of two is 8 times larger
    assert scaled.y_bound_ == pytest.approx(8.0 * base.y_bound_)
    np.testing.assert_allclose(scaled.coef_, base.coef_)
    assert scaled.intercept_ == pytest.approx(base.intercept_ + math.log(8.0))
    np.testing.assert_allclose(scaled.predict(X_test), 8.0 * base.predict(X_test), rtol=1e-9)


def test_poisson_refuses_negative_targets_and_takes_a_public_bound(randhie):
    X_train, _, y_train, _ = randhie
    with pytest.raises(ValueError, match="non-negative"):
        DPPoissonRegressor(accountant=PrivacyAccountant()).fit(X_train, y_train - 1.0)
    public = DPPoissonRegressor(y_bound=30.0, random_state=0, accountant=PrivacyAccountant()).fit(X_train, y_train)
    assert not hasattr(public, "y_bound_") and public.loss_.offset == pytest.approx(math.log(30.0) - POISSON_LOG_RANGE / 2)


def test_poisson_accepts_weights_and_sparse_rows(randhie):
    X_train, X_test, y_train, _ = randhie
    weights = np.linspace(0.0, 1.0, len(y_train))
    reg = DPPoissonRegressor(random_state=0, accountant=PrivacyAccountant()).fit(X_train, y_train, sample_weight=weights)
    assert np.all(reg.predict(X_test) > 0)
    reg = DPPoissonRegressor(random_state=0, accountant=PrivacyAccountant()).fit(sparse.csr_matrix(X_train), y_train)
    assert np.all(np.isfinite(reg.predict(sparse.csr_matrix(X_test))))


@pytest.mark.parametrize("estimator", [DPHuberRegressor, DPQuantileRegressor, DPPoissonRegressor])
def test_every_new_regressor_fits_dask_rows(estimator):
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 3))
    y = rng.poisson(np.exp(0.5 + X @ [0.3, -0.2, 0.1])).astype(float)
    accountant = PrivacyAccountant()
    reg = estimator(random_state=0, accountant=accountant).fit(da.from_array(X, chunks=1000), da.from_array(y, chunks=1000))
    assert len(accountant.history) == 1 and np.all(np.isfinite(reg.predict(X[:10])))
