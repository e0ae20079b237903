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

from skdpsco import DPHuberRegressor, DPLpRegression, DPQuantileRegressor, PrivacyAccountant
from skdpsco.losses import HuberLoss, PinballLoss, PowerLoss, get_loss
from skdpsco.smoothing import GaussianSmoothedLoss, smooth
from skdpsco.solvers import ALGORITHMS
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
