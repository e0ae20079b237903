"""Private bounds inside ``fit``: ``data_norm='private'`` and ``y_bound='private'`` (issue 19)."""

import math
import warnings

import dp_accounting
import numpy as np
import pytest

from skdpsco import DPHuberRegressor, DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant, PrivacyWarning
from skdpsco.accounting import epsilon_of, gaussian_noise_multiplier
from skdpsco.linear_model import _bounds, _scaling
from skdpsco.linear_model._base import _pure_epsilon, fixed_row_bound_warning
from skdpsco.linear_model._scaling import magnitude_counts

from _audits import check_audit


def _regression(n=2000, d=4, seed=0, target_scale=300.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = target_scale * (0.5 + 0.2 * (X @ np.linspace(1.0, -1.0, d)) + 0.05 * rng.normal(size=n))
    return X, y


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return model.fit(X, y)


# -- the release -------------------------------------------------------------------------------------


def test_histogram_of_neighbours_moves_by_at_most_the_claimed_sensitivity():
    rng = np.random.default_rng(0)
    for _ in range(200):
        values = np.exp(rng.normal(scale=8.0, size=30)) * rng.choice([0.0, 1.0], size=30, p=[0.1, 0.9])
        neighbour = values.copy()
        neighbour[rng.integers(30)] = rng.choice([0.0, math.exp(rng.normal(scale=30.0))])
        difference = magnitude_counts(values[:, None]) - magnitude_counts(neighbour[:, None])
        assert np.linalg.norm(difference) <= _bounds.HISTOGRAM_SENSITIVITY["l2"] + 1e-12
        assert np.abs(difference).sum() <= _bounds.HISTOGRAM_SENSITIVITY["l1"] + 1e-12


def test_signed_histograms_of_neighbours_move_by_at_most_the_claimed_sensitivity():
    rng = np.random.default_rng(1)
    for _ in range(200):
        y = np.exp(rng.normal(scale=8.0, size=30)) * rng.choice([-1.0, 0.0, 1.0], size=30, p=[0.4, 0.1, 0.5])
        neighbour = y.copy()
        neighbour[rng.integers(30)] = rng.choice([-1.0, 0.0, 1.0]) * math.exp(rng.normal(scale=30.0))
        counts = [_bounds.order_counts([np.maximum(v, 0.0), np.maximum(-v, 0.0)]) for v in (y, neighbour)]
        assert counts[0].sum() == np.count_nonzero(y)  # each non-zero target in exactly one bin
        difference = counts[0] - counts[1]
        assert np.linalg.norm(difference) <= _bounds.HISTOGRAM_SENSITIVITY["l2"] + 1e-12
        assert np.abs(difference).sum() <= _bounds.HISTOGRAM_SENSITIVITY["l1"] + 1e-12


def test_release_is_the_top_significant_order_and_keeps_its_values_whole():
    values = np.concatenate([np.full(500, 3.0), np.full(300, 200.0), [1e9]])  # one outlier
    plan = _bounds.plan_bound(gaussian_mu=1.0)  # noise sd sqrt 2 per count, threshold about 5.7
    scale = _bounds.release_bound(values, plan, np.random.default_rng(0))
    assert scale == 2.0 ** round(math.log2(200.0))  # the outlier's order is not significant
    assert 200.0 <= _bounds.SCALED_BOUND * scale


def test_release_falls_back_to_the_mode_capped_for_targets_when_no_order_is_significant():
    # a noise mode could be 2**40: capped at s = 1 whatever the values; a small mode is kept
    values = np.concatenate([np.full(3, 2.0**-5), np.full(2, 2.0**20)])
    plan = _bounds.plan_bound(gaussian_mu=1e-3)  # noise sd about 1400 counts: nothing passes
    def released(cap, seeds=range(40)):
        return [_bounds.release_bound(values * 2.0**k, plan, np.random.default_rng(seed), cap) for k in (0, 9)
                for seed in seeds]

    assert max(released(_bounds.FALLBACK_CAP)) == 2.0**_bounds.FALLBACK_CAP and min(released(0)) < 1.0
    assert max(released(None)) > 2.0**_bounds.FALLBACK_CAP  # the rows' fallback: the mode, uncapped
    plan = _bounds.plan_bound(gaussian_mu=0.05)  # sd about 28 counts, threshold 113
    small = np.full(100, 2.0**-4)  # not significant, but the mode
    modes = [_bounds.release_bound(small, plan, np.random.default_rng(seed), _bounds.FALLBACK_CAP) for seed in range(40)]
    assert modes.count(2.0**-4) >= 30 and max(modes) <= 1.0


@pytest.mark.parametrize("budget", [{"gaussian_mu": 0.27}, {"gaussian_mu": 2.0}, {"pure_epsilon": 1.0}])
def test_row_bound_share_resolves_an_eighth_of_the_rows_and_no_more_up_to_its_cap(budget):
    (kind, total), = budget.items()
    shares = [_bounds.row_bound_share(n, **budget) for n in (10, 100, 1_000, 10_000, 100_000)]
    assert all(0.0 < s <= _bounds.BOUND_SHARE for s in shares)
    assert shares == sorted(shares, reverse=True) and shares[-1] < shares[0]  # more rows need less
    for n, share in zip((10, 100, 1_000, 10_000, 100_000), shares):
        if share < _bounds.BOUND_SHARE:  # below the cap: exactly at the significance threshold
            plan = _bounds.plan_bound(**{kind: (math.sqrt(share) if kind == "gaussian_mu" else share) * total})
            resolved = _bounds.RESOLVED_FRACTION * n
            assert resolved == pytest.approx(_scaling.MAGNITUDE_THRESHOLD * plan.count_std)
    with pytest.raises(ValueError, match="exactly one"):
        _bounds.row_bound_share(100)


@pytest.mark.parametrize("budget", [{"gaussian_mu": 0.27}, {"gaussian_mu": 2.0}, {"pure_epsilon": 1.0}])
def test_target_range_share_resolves_a_quarter_of_the_targets_between_the_share_and_its_cap(budget):
    (kind, total), = budget.items()
    sizes = (10, 100, 1_000, 10_000, 100_000)
    shares = [_bounds.target_range_share(n, **budget) for n in sizes]
    assert all(_bounds.BOUND_SHARE <= s <= _bounds.TARGET_SHARE_CAP for s in shares)
    assert shares == sorted(shares, reverse=True) and shares[-1] == _bounds.BOUND_SHARE  # the former share on many rows
    for n, share in zip(sizes, shares):
        if _bounds.BOUND_SHARE < share < _bounds.TARGET_SHARE_CAP:  # exactly at the significance threshold
            plan = _bounds.plan_bound(**{kind: (math.sqrt(share) if kind == "gaussian_mu" else share) * total})
            resolved = _bounds.TARGET_RESOLVED_FRACTION * n
            assert resolved == pytest.approx(_scaling.MAGNITUDE_THRESHOLD * plan.count_std)
    assert _bounds.target_range_share(10, **budget) == _bounds.TARGET_SHARE_CAP
    with pytest.raises(ValueError, match="exactly one"):
        _bounds.target_range_share(100)


def test_small_least_squares_fit_spends_the_target_range_share_and_meets_its_budget():
    X, y = _regression(n=200)
    model = DPLpRegression(epsilon=1.0, random_state=0, accountant=PrivacyAccountant()).fit(X, y)
    assert model.epsilon_ <= 1.0 and model.epsilon_ == pytest.approx(1.0, rel=2e-3)
    mu = 1.0 / gaussian_noise_multiplier(1.0, 1e-5)
    share = _bounds.target_range_share(200, gaussian_mu=mu)
    assert share > _bounds.BOUND_SHARE
    assert model.dp_event_.events[0].noise_multiplier == pytest.approx(1.0 / (math.sqrt(share) * mu))
    huber = DPHuberRegressor(epsilon=1.0, random_state=0, accountant=PrivacyAccountant()).fit(X, y)
    assert huber.dp_event_.events[0].noise_multiplier == pytest.approx(1.0 / (math.sqrt(_bounds.BOUND_SHARE) * mu))


def test_plan_events_are_the_histogram_mechanisms():
    gaussian = _bounds.plan_bound(gaussian_mu=0.5)
    assert isinstance(gaussian.dp_event, dp_accounting.GaussianDpEvent)
    assert gaussian.dp_event.noise_multiplier == pytest.approx(gaussian.noise / math.sqrt(2.0))
    assert epsilon_of(gaussian.dp_event, 1e-5) == pytest.approx(
        epsilon_of(dp_accounting.GaussianDpEvent(1.0 / 0.5), 1e-5))
    pure = _bounds.plan_bound(pure_epsilon=0.2)
    assert pure.laplace and pure.noise == pytest.approx(2.0 / 0.2)
    with pytest.raises(ValueError, match="exactly one"):
        _bounds.plan_bound()


def test_scaled_targets_never_overflow_and_stay_within_the_scaled_bound():
    y = np.array([-1e308, -3.0, 0.0, 5.0, 1e308])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled = _bounds.scale_targets(y, 2.0**-40)
    assert np.all(np.abs(scaled) <= _bounds.SCALED_BOUND)


# -- the estimators ----------------------------------------------------------------------------------


def test_private_target_bound_composes_into_the_fits_one_event():
    X, y = _regression()
    model = DPLpRegression(epsilon=1.0, y_bound="private", random_state=0, accountant=PrivacyAccountant()).fit(X, y)
    assert model.epsilon_ <= 1.0 and model.epsilon_ == pytest.approx(1.0, rel=2e-3)
    histogram = model.dp_event_.events[0]
    mu = 1.0 / gaussian_noise_multiplier(1.0, 1e-5)
    # the target bound gets the whole cap whatever n: a clipped target is a wrong target
    assert histogram.noise_multiplier == pytest.approx(1.0 / (math.sqrt(_bounds.BOUND_SHARE) * mu))
    # 5 % of the targets are negative, in no significant order: the range is [0, SCALED_BOUND 2**k]
    # with k the top significant order of the positive ones, released as its centre and half-width
    assert 0.03 < np.mean(y < 0) < 0.07
    assert math.log2(2.0 * model.y_bound_ / _bounds.SCALED_BOUND).is_integer()
    assert model.y_centre_ == model.y_bound_
    assert np.mean(y <= model.y_centre_ + model.y_bound_) >= 0.99  # the top significant order: a high quantile


def test_centred_bound_keeps_each_sign_with_a_significant_order():
    rng = np.random.default_rng(0)
    plan = _bounds.plan_bound(gaussian_mu=1.0)
    y = np.concatenate([rng.uniform(100.0, 150.0, 500), -rng.uniform(5.0, 7.0, 500)])  # orders 7 and 2-3
    scale, centre = _bounds.release_centred_bound(y, plan, rng)
    lower, upper = centre - _bounds.SCALED_BOUND * scale, centre + _bounds.SCALED_BOUND * scale
    assert lower == pytest.approx(-_bounds.SCALED_BOUND * 8.0) and upper == pytest.approx(_bounds.SCALED_BOUND * 128.0)
    positive = np.abs(y)
    assert _bounds.release_centred_bound(positive, plan, rng) == (64.0, _bounds.SCALED_BOUND * 64.0)
    assert _bounds.release_centred_bound(-positive, plan, rng) == (64.0, -_bounds.SCALED_BOUND * 64.0)
    # no significant order (a handful of rows): the mode, capped, and no centre (release_bound's fallback)
    few = _bounds.release_centred_bound(positive[:3], _bounds.plan_bound(gaussian_mu=0.01), rng, fallback_cap=0)
    assert few[1] == 0.0 and few[0] <= 1.0


@pytest.mark.parametrize("power", [-7, 0, 9])
def test_private_target_bound_is_equivariant_to_powers_of_two(power):
    # the same fit on y * 2**k is the fit on y times 2**k, bit for bit: the bound, and with it the
    # whole model, follows the targets' scale (the noise draws are the same)
    X, y = _regression()
    fits = [DPLpRegression(y_bound="private", random_state=3, accountant=PrivacyAccountant()).fit(X, y * 2.0**k)
            for k in (0, power)]
    np.testing.assert_array_equal(fits[1].coef_, fits[0].coef_ * 2.0**power)
    assert fits[1].intercept_ == fits[0].intercept_ * 2.0**power
    assert fits[1].y_bound_ == fits[0].y_bound_ * 2.0**power


def test_private_target_bound_fits_raw_targets_that_the_fixed_bound_cannot():
    X, y = _regression(n=5000, seed=1)
    X_test, y_test = _regression(n=2000, seed=2)
    private = DPLpRegression(epsilon=3.0, y_bound="private", random_state=0, accountant=PrivacyAccountant()).fit(X, y)
    fixed = DPLpRegression(epsilon=3.0, y_bound=1.0, random_state=0, accountant=PrivacyAccountant()).fit(X, y)

    def rmse(m):
        return float(np.sqrt(np.mean((m.predict(X_test) - y_test) ** 2)))

    assert rmse(private) < 0.5 * np.std(y_test) < rmse(fixed)


@pytest.mark.parametrize("power", [-5, 12])
def test_private_row_bound_is_equivariant_to_powers_of_two(power):
    X, y = _regression()
    labels = (y > np.median(y)).astype(int)
    kwargs = dict(data_norm="private", feature_scaling=None, classes=[0, 1], random_state=2)
    fits = [DPLogisticRegression(accountant=PrivacyAccountant(), **kwargs).fit(X * 2.0**k, labels) for k in (0, power)]
    np.testing.assert_array_equal(fits[1].coef_, fits[0].coef_ / 2.0**power)
    np.testing.assert_array_equal(fits[1].intercept_, fits[0].intercept_)
    assert fits[1].data_norm_ == fits[0].data_norm_ * 2.0**power
    np.testing.assert_array_equal(fits[1].decision_function(X * 2.0**power), fits[0].decision_function(X))


@pytest.mark.parametrize("n, capped", [(300, True), (20_000, False)])
def test_private_row_bound_gets_the_share_that_resolves_an_eighth_of_the_rows(n, capped):
    X, y = _regression(n=n)
    labels = (y > np.median(y)).astype(int)
    for delta, algorithm in ((1e-6, "output_perturbation"), (0.0, "localization")):
        model = _fit(DPLogisticRegression(data_norm="private", feature_scaling=None, classes=[0, 1], delta=delta,
                                          algorithm=algorithm, random_state=0, accountant=PrivacyAccountant()),
                     X, labels)
        histogram = model.dp_event_.events[0]
        if delta:
            mu = 1.0 / gaussian_noise_multiplier(1.0, delta)
            share = _bounds.row_bound_share(n, gaussian_mu=mu)
            assert histogram.noise_multiplier == pytest.approx(1.0 / (math.sqrt(share) * mu))
        else:
            share = _bounds.row_bound_share(n, pure_epsilon=1.0)
            assert _pure_epsilon(histogram) == pytest.approx(share)
        assert (share == _bounds.BOUND_SHARE) == capped
        assert model.epsilon_ <= 1.0 and model.epsilon_ == pytest.approx(1.0, rel=2e-3)


def test_private_row_bound_predicts_on_the_rows_as_fit_mapped_them():
    X, y = _regression()
    labels = (y > np.median(y)).astype(int)
    model = DPLogisticRegression(data_norm="private", feature_scaling=None, classes=[0, 1], random_state=0,
                                 accountant=PrivacyAccountant()).fit(X * 1000.0, labels)
    rows = X[:5] * 1000.0
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    clipped = rows * np.minimum(1.0, model.data_norm_ / norms)
    np.testing.assert_allclose(model.decision_function(rows), clipped @ model.coef_[0] + model.intercept_[0])
    assert model.row_norm_ == _bounds.SCALED_BOUND and np.all(model.feature_scales_ == model.data_norm_ / model.row_norm_)


def test_with_feature_scaling_private_data_norm_replaces_the_orders_of_magnitude():
    # one histogram of the row norms instead of d histograms of the features' magnitudes, then the
    # moments of the divided rows (bound sqrt 2), then the solver; equivariant like the rest
    X, y = _regression()
    labels = (y > np.median(y)).astype(int)
    fits = [DPLogisticRegression(data_norm="private", classes=[0, 1], random_state=4, accountant=PrivacyAccountant())
            .fit(X * 2.0**k, labels) for k in (0, 7)]
    histogram, moments, solver = fits[0].dp_event_.events
    assert isinstance(histogram, dp_accounting.GaussianDpEvent) and len(moments.events) == 2
    assert fits[0].epsilon_ <= 1.0 and fits[0].epsilon_ == pytest.approx(1.0, rel=2e-3)
    assert fits[0].row_norm_ == _bounds.SCALED_BOUND
    np.testing.assert_array_equal(fits[1].coef_, fits[0].coef_ / 2.0**7)
    np.testing.assert_array_equal(fits[1].decision_function(X * 2.0**7), fits[0].decision_function(X))
    default = DPLogisticRegression(classes=[0, 1], random_state=4, accountant=PrivacyAccountant()).fit(X, labels)
    assert len(default.dp_event_.events[0].events) == 3  # magnitudes, sums, squares


def test_pure_dp_fit_with_private_bounds_spends_exactly_epsilon():
    X, y = _regression(n=500)
    model = _fit(DPLpRegression(epsilon=2.0, delta=0.0, y_bound="private", algorithm="localization", random_state=0,
                                accountant=PrivacyAccountant()), X, y)
    assert model.epsilon_ == pytest.approx(2.0) and model.epsilon_ <= 2.0 + 1e-12
    assert isinstance(model.dp_event_.events[0], dp_accounting.RandomizedResponseDpEvent)


def test_fixed_default_row_bound_warns_with_parameters_only():
    X, y = _regression()
    labels = (y > np.median(y)).astype(int)
    messages = []
    for scale in (1.0, 1e6):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            DPHingeSVM(feature_scaling=None, classes=[0, 1], random_state=0,
                       accountant=PrivacyAccountant()).fit(X * scale, labels)
        messages.append([str(w.message) for w in caught if issubclass(w.category, PrivacyWarning)])
    assert messages[0] == messages[1] == [fixed_row_bound_warning()]
    assert "data_norm='private'" in messages[0][0]
    for data_norm in (1.0, "private"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            DPHingeSVM(feature_scaling=None, data_norm=data_norm, classes=[0, 1], random_state=0,
                       accountant=PrivacyAccountant()).fit(X, labels)
        assert not [w for w in caught if issubclass(w.category, PrivacyWarning)]


@pytest.mark.parametrize("bad", ["privat", -1.0, 0.0])
def test_bad_bound_values_are_refused_naming_the_parameter(bad):
    X, y = _regression(n=50)
    with pytest.raises(ValueError, match="y_bound"):
        DPLpRegression(y_bound=bad, accountant=PrivacyAccountant()).fit(X, y)
    with pytest.raises(ValueError, match="data_norm"):
        DPLogisticRegression(data_norm=bad, classes=[0, 1], accountant=PrivacyAccountant()).fit(X, y > 0)


def test_private_bound_release_passes_its_audit():
    check_audit("private_bound")


def test_order_counts_of_an_iterator_hold_one_column_at_a_time():
    import tracemalloc

    y = np.random.default_rng(0).standard_normal(100_000) * 1e3
    y[::1000] = np.inf  # a row norm beyond the float range: the top bin
    reference = np.concatenate([magnitude_counts(np.minimum(c, np.finfo(float).max)[:, None])[0]
                                for c in (np.maximum(y, 0.0), np.maximum(-y, 0.0))])
    tracemalloc.start()
    try:
        counts = _bounds.order_counts(_bounds._signed_part(y, sign) for sign in (1.0, -1.0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(counts, reference)
    assert peak < 1.5 * y.nbytes  # both columns held, and each one's clipped copy: 3


def test_a_default_regression_fit_holds_the_rows_and_one_target_vector(monkeypatch):
    import tracemalloc

    from skdpsco import rows

    monkeypatch.setattr(rows._threads, "THREADS", 1)  # the Newton pass's buffers: one thread's (a few hundredths of X)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100_000, 20))
    y = X @ rng.standard_normal(20) + rng.standard_normal(100_000)
    DPLpRegression(accountant=PrivacyAccountant(), random_state=0).fit(X, y)  # imports outside the measurement
    tracemalloc.start()
    try:
        DPLpRegression(accountant=PrivacyAccountant(), random_state=0).fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the copy with its intercept column, 1.05 X, and the targets, 0.05 X; with the order, the
    # unpermuted targets and both signed parts of the targets held as well: 1.31
    assert peak < 1.2 * X.nbytes
