"""Private preprocessing (issue 8, part 2): DPStandardScaler's sensitivities, calibration,
accounting, utility, scikit-learn API, and a statistical privacy audit."""

import itertools
import warnings

import dp_accounting
import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer, StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.accounting import BudgetExceededError, epsilon_of, gaussian_event, gaussian_noise_multiplier
from skdpsco.linear_model import _bounds, _scaling
from skdpsco.preprocessing import DPStandardScaler, scaler_sensitivities
from _audits import audit_params, check_audit
from test_estimator_checks import WEIGHT_ABOVE_BOUND

DELTA = 1e-5


def statistics(X, lower, upper):
    """The two exact statistics the scaler releases (before noise)."""
    centred = np.clip(X, lower, upper) - (lower + upper) / 2
    return centred.mean(axis=0), (centred**2).mean(axis=0)


def test_sensitivities_bound_every_replacement_and_are_attained():
    lower, upper = np.array([-1.0, 0.0]), np.array([3.0, 0.5])
    n = 5
    mean_sensitivity, second_sensitivity = scaler_sensitivities(lower, upper, n)
    rng = np.random.default_rng(0)
    base = rng.uniform(lower - 1, upper + 1, size=(n, 2))  # some rows outside the bounds: clipped
    corners = list(itertools.product(*zip(lower, upper))) + [tuple((lower + upper) / 2)]
    worst = [0.0, 0.0]
    for old, new in itertools.product(corners, corners):
        X0, X1 = base.copy(), base.copy()
        X0[0], X1[0] = old, new
        for k, (a, b) in enumerate(zip(statistics(X0, lower, upper), statistics(X1, lower, upper))):
            worst[k] = max(worst[k], np.linalg.norm(a - b))
    # Replacing a row by any other (the corners and the centre are the extreme points).
    assert worst[0] == pytest.approx(mean_sensitivity)  # lower corner -> upper corner
    assert worst[1] == pytest.approx(second_sensitivity)  # centre -> any corner
    assert mean_sensitivity == pytest.approx(np.linalg.norm(upper - lower) / n)
    assert second_sensitivity == pytest.approx(np.linalg.norm(((upper - lower) / 2) ** 2) / n)


def test_weighted_sums_keep_the_sensitivities_and_the_total_weight_moves_by_one_over_n():
    # The weighted releases (DPStandardScaler's Notes): mean_i(c_i), mean_i(c_i (x_i - m)) and
    # mean_i(c_i (x_i - m)**2) with c_i in [0, 1]; a replaced row changes its value and its weight.
    lower, upper = np.array([-1.0, 0.0]), np.array([3.0, 0.5])
    n = 5
    mean_sensitivity, second_sensitivity = scaler_sensitivities(lower, upper, n)
    rng = np.random.default_rng(0)
    base, weights = rng.uniform(lower - 1, upper + 1, size=(n, 2)), rng.uniform(size=n)
    corners = list(itertools.product(*zip(lower, upper))) + [tuple((lower + upper) / 2)]

    def weighted(X, c):
        centred = np.clip(X, lower, upper) - (lower + upper) / 2
        return c.mean(), (c[:, None] * centred).mean(axis=0), (c[:, None] * centred**2).mean(axis=0)

    worst = np.zeros(3)
    for (old, c_old), (new, c_new) in itertools.product(itertools.product(corners, (0.0, 0.5, 1.0)), repeat=2):
        X0, X1, w0, w1 = base.copy(), base.copy(), weights.copy(), weights.copy()
        X0[0], X1[0], w0[0], w1[0] = old, new, c_old, c_new
        worst = np.maximum(worst, [np.linalg.norm(np.subtract(a, b)) for a, b in zip(weighted(X0, w0), weighted(X1, w1))])
    assert worst[0] == pytest.approx(1.0 / n)
    assert worst[1] == pytest.approx(mean_sensitivity)  # weight 1 at the lower corner -> weight 1 at the upper
    assert worst[2] == pytest.approx(second_sensitivity)


def test_fit_is_calibrated_exactly_and_recorded_once():
    X = np.random.default_rng(1).normal(size=(1000, 3))
    ledger = PrivacyAccountant()
    scaler = DPStandardScaler(epsilon=0.7, feature_bounds=(-3, 3), random_state=0, accountant=ledger).fit(X)
    (record,) = ledger.history
    assert record.event == scaler.dp_event_
    assert record.estimator == "DPStandardScaler"
    assert 0.7 * 0.999 <= scaler.epsilon_ <= 0.7
    z = scaler.dp_event_.event.noise_multiplier
    assert scaler.dp_event_ == dp_accounting.SelfComposedDpEvent(gaussian_event(z, 1.0), 2)
    sensitivities = scaler_sensitivities(np.full(3, -3.0), np.full(3, 3.0), 1000)
    np.testing.assert_allclose(scaler.noise_std_, [z * s for s in sensitivities])
    # Less noise would overspend: the multiplier is the smallest meeting the target.
    assert epsilon_of(dp_accounting.SelfComposedDpEvent(gaussian_event(z * 0.999, 1.0), 2), DELTA) > 0.7


def test_mean_only_spends_one_release_and_nothing_spends_nothing():
    X = np.random.default_rng(2).normal(size=(500, 2))
    mean_only = DPStandardScaler(feature_bounds=(-3, 3), with_std=False, accountant=PrivacyAccountant()).fit(X)
    assert isinstance(mean_only.dp_event_, dp_accounting.GaussianDpEvent)
    assert mean_only.var_ is None and mean_only.scale_ is None
    np.testing.assert_allclose(mean_only.transform(X), X - mean_only.mean_)
    nothing = DPStandardScaler(feature_bounds=(-3, 3), with_mean=False, with_std=False, accountant=PrivacyAccountant()).fit(X)
    assert nothing.epsilon_ == 0.0 and nothing.mean_ is None
    np.testing.assert_array_equal(nothing.transform(X), X)


def test_private_statistics_approach_the_exact_ones():
    rng = np.random.default_rng(3)
    X = rng.normal(loc=[0.5, -1.0, 2.0], scale=[1.0, 0.5, 2.0], size=(50_000, 3))
    scaler = DPStandardScaler(epsilon=1.0, feature_bounds=([-4, -4, -6], [5, 2, 10]), random_state=0, accountant=PrivacyAccountant()).fit(X)
    exact = StandardScaler().fit(X)
    print(f"\nmean error {np.abs(scaler.mean_ - exact.mean_).max():.4f}, relative std error "
          f"{np.abs(scaler.scale_ / exact.scale_ - 1).max():.4f}")
    np.testing.assert_allclose(scaler.mean_, exact.mean_, atol=0.01)
    np.testing.assert_allclose(scaler.scale_, exact.scale_, rtol=0.02)


def test_transform_and_inverse_transform():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 3))
    scaler = DPStandardScaler(feature_bounds=(-3, 3), random_state=0, accountant=PrivacyAccountant()).fit(X)
    Z = scaler.transform(X)
    np.testing.assert_allclose(Z, (X - scaler.mean_) / scaler.scale_)
    np.testing.assert_allclose(scaler.inverse_transform(Z), X)
    assert list(scaler.get_feature_names_out()) == ["x0", "x1", "x2"]


def test_statistics_stay_within_their_public_ranges_whatever_the_noise():
    # Tiny data, huge noise: the mean stays in the bounds, the variance in [floor, h**2].
    X = np.zeros((3, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaler = DPStandardScaler(epsilon=0.1, feature_bounds=(-1, 1), random_state=0, accountant=PrivacyAccountant()).fit(X)
    assert np.all((-1 <= scaler.mean_) & (scaler.mean_ <= 1))
    assert np.all((0 < scaler.var_) & (scaler.var_ <= 1))


def test_budget_is_checked_before_the_rows_are_read():
    X = np.random.default_rng(5).normal(size=(100, 2))
    ledger = PrivacyAccountant(epsilon=0.5, delta=DELTA)
    scaler = DPStandardScaler(epsilon=1.0, feature_bounds=(-3, 3), accountant=ledger)
    with pytest.raises(BudgetExceededError):
        scaler.fit(X)
    assert ledger.history == () and not hasattr(scaler, "mean_")


def test_pipeline_records_the_scaler_and_the_model_on_one_ledger():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(2000, 3)) * 5
    y = (X[:, 0] > 0).astype(int)
    ledger = PrivacyAccountant()
    pipeline = make_pipeline(
        DPStandardScaler(epsilon=0.5, feature_bounds=(-20, 20), accountant=ledger, random_state=0),
        Normalizer(),  # per-row: costs nothing
        DPLogisticRegression(epsilon=0.5, algorithm="phased_sgd", accountant=ledger, random_state=0),
    ).fit(X, y)
    assert [record.estimator for record in ledger.history] == ["DPStandardScaler", "DPLogisticRegression"]
    # seeded: unseeded, 1 in ~30 fits scores below 0.8 (min 0.81 over 30 seeds, mean 0.90; majority 0.5)
    assert pipeline.score(X, y) > 0.75


@pytest.mark.parametrize(
    "bounds, message",
    [((1, 1), "lower < upper"), (([0, 0, 0], [1, 1]), "pair"), ((0, np.inf), "finite")],
)
def test_clear_errors_for_bad_bounds(bounds, message):
    X = np.zeros((10, 2))
    with pytest.raises(ValueError, match=message):
        DPStandardScaler(feature_bounds=bounds, accountant=PrivacyAccountant()).fit(X)


SCALER_EXPECTED_FAILED_CHECKS = {
    "check_sample_weights_list": WEIGHT_ABOVE_BOUND,
    "check_sample_weights_not_overwritten": WEIGHT_ABOVE_BOUND,
    "check_all_zero_sample_weights_error": (
        "all-zero weights are a dataset inside the public domain (every weight in [0, max_weight]): "
        "refusing them would make the error itself tell a neighbour with one non-zero weight apart, "
        "so the fit runs (the total weight is floored at its noise)"
    ),
    "check_sample_weight_equivalence_on_dense_data": (
        "integer weights are not repeated rows for a private fit: n_samples is public and sets the "
        "noise, which is random (the weights 0-4 also exceed the default max_weight=1); the weighted "
        "statistics approach StandardScaler's with the same weights "
        "(test_weighted_statistics_approach_the_weighted_exact_ones)"
    ),
}
"""The checks the scaler fails by design, with the reason (as the estimators', tests/test_estimator_checks.py)."""


@parametrize_with_checks(
    [DPStandardScaler(feature_bounds=(-10.0, 10.0)), DPStandardScaler()],  # records on the shared ledger
    expected_failed_checks=lambda estimator: SCALER_EXPECTED_FAILED_CHECKS,
    xfail_strict=True,
)
def test_scikit_learn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*SkipTest.*")
        check(estimator)


@pytest.mark.parametrize("name", audit_params("scaler", "scaler_private_bounds", "scaler_weighted"))
def test_scaler_audit_respects_the_claim_and_catches_the_weakened_noise(name):
    # benchmarks/audits.py: one row moves, shifting both releases (the mean and the second moment),
    # the others away from the variance's clipping; the statistic is the likelihood ratio of the two
    # releases. Without feature_bounds the released scale is the same on both datasets; with
    # sample_weight both releases are divided by the noisy mean weight.
    check_audit(name)


@pytest.mark.parametrize("name", ["scaler", "scaler_private_bounds", "scaler_weighted"])
def test_scaler_audit_statistic_moves_by_the_designed_shift_without_noise(name):
    # The audits' neighbours and statistic (benchmarks/audits.py), the noise divided by 1e9: the
    # statistic moves by the squared mu of the designed shift, sum_j shift_j**2 / sigma_j**2, over the
    # released mean weight t with sample_weight (public here: 3/4 of max_weight on both datasets,
    # the row's weight unchanged), and the released scale is 1 on both.
    from benchmarks.audits import AUDITS, weakened

    setup = AUDITS[name].setup
    with weakened("gaussian", 1e9), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = [setup.run(dataset, 0) for dataset in (setup.dataset_0, setup.dataset_1)]
    X0, X1 = setup.dataset_0[0][:, 0], setup.dataset_1[0][:, 0]
    n = X0.size
    bound = 1.0 if fits[0].feature_bounds is not None else _bounds.SCALED_BOUND
    a0, a1 = np.clip([X0[0], X1[0]], -bound, bound)
    sigma = fits[0].noise_std_[:2]
    shift = np.array([(a1 - a0) / n, (a1**2 - a0**2) / n])
    t = 1.0 if name != "scaler_weighted" else 0.75 + 0.25 / n
    expected = np.sum(shift**2 / np.square(sigma)) / t
    assert setup.statistic(fits[1]) - setup.statistic(fits[0]) == pytest.approx(expected, rel=1e-6)
    for fit in fits:
        assert fit.feature_scales_ is None or fit.feature_scales_[0] == 1.0


# -- without feature_bounds: the estimators' private orders of magnitude -----------------------
def _raw_table(n, seed=7):
    """Features whose scales differ by orders of magnitude, centred far from and at zero."""
    rng = np.random.default_rng(seed)
    return rng.normal(loc=[0.0, 0.0, 3e3, -0.02], scale=[1e-3, 1.0, 1e3, 0.01], size=(n, 4))


def test_without_bounds_the_fit_is_one_event_of_the_magnitudes_and_the_statistics():
    X = _raw_table(20_000)
    ledger = PrivacyAccountant()
    scaler = DPStandardScaler(epsilon=0.8, random_state=0, accountant=ledger).fit(X)
    (record,) = ledger.history
    assert record.event == scaler.dp_event_ and 0.8 * 0.999 <= scaler.epsilon_ <= 0.8
    magnitudes, statistics = scaler.dp_event_.events
    assert statistics == dp_accounting.SelfComposedDpEvent(statistics.event, 2)
    z = statistics.event.noise_multiplier
    bounds = np.full(4, np.sqrt(2.0))
    np.testing.assert_allclose(scaler.noise_std_, [z * s for s in scaler_sensitivities(-bounds, bounds, 20_000)])
    # the budget is shared as in the estimators: magnitudes : statistics = MAGNITUDE_SHARE : SCALING_SHARE of mu**2
    mu_magnitudes = magnitudes.noise_multiplier ** -1
    mu_statistics = np.sqrt(2.0) / z
    assert mu_magnitudes**2 / mu_statistics**2 == pytest.approx(_scaling.MAGNITUDE_SHARE / _scaling.SCALING_SHARE)
    # the bounds are released powers of two, the statistics within them
    exponents = np.log2(scaler.feature_scales_)
    np.testing.assert_array_equal(exponents, np.round(exponents))
    assert np.all(np.abs(scaler.mean_) <= np.sqrt(2) * scaler.feature_scales_)
    assert np.all(scaler.scale_ <= np.sqrt(2) * scaler.feature_scales_)


def test_without_bounds_the_statistics_approach_the_exact_ones():
    X = _raw_table(200_000)
    scaler = DPStandardScaler(epsilon=1.0, random_state=0, accountant=PrivacyAccountant()).fit(X)
    exact = StandardScaler().fit(X)
    print(f"\nrelative std {np.round(scaler.scale_ / exact.scale_, 3)}, mean error / std "
          f"{np.round((scaler.mean_ - exact.mean_) / exact.scale_, 3)}")
    # the features span 1e-3 to 1e3: one public bound for all would drown the small ones
    assert np.all(np.abs(scaler.mean_ - exact.mean_) < 0.1 * exact.scale_)
    # clipped at sqrt(2) times the top of the modal window of orders: the spread is biased down, not up
    assert np.all((scaler.scale_ / exact.scale_ > 0.75) & (scaler.scale_ / exact.scale_ < 1.1))
    Z = scaler.transform(X)
    assert np.all((Z.std(axis=0) > 0.9) & (Z.std(axis=0) < 1.35))


def test_without_bounds_few_rows_release_one_row_bound():
    # too few rows for the histogram at the budget (as in the estimators): one power of two for all
    X = _raw_table(40)
    scaler = DPStandardScaler(random_state=0, accountant=PrivacyAccountant()).fit(X)
    bound, statistics = scaler.dp_event_.events
    assert np.unique(scaler.feature_scales_).size == 1
    mu = 1.0 / gaussian_noise_multiplier(1.0, scaler.delta_)  # the fit's budget, as the estimators'
    share = _bounds.row_bound_share(40, gaussian_mu=mu)
    assert bound == _bounds.plan_bound(gaussian_mu=np.sqrt(share) * mu).dp_event
    assert statistics.event.noise_multiplier == pytest.approx(np.sqrt(2.0) / (np.sqrt(1.0 - share) * mu))
    assert np.all(np.isfinite(scaler.transform(X)))


def test_mean_only_and_nothing_without_bounds():
    X = _raw_table(5000)
    mean_only = DPStandardScaler(with_std=False, random_state=0, accountant=PrivacyAccountant()).fit(X)
    assert mean_only.var_ is None and mean_only.scale_ is None and mean_only.dp_event_.events[1].noise_multiplier > 0
    np.testing.assert_allclose(mean_only.transform(X), X - mean_only.mean_)
    nothing = DPStandardScaler(with_mean=False, with_std=False, accountant=PrivacyAccountant()).fit(X)
    assert nothing.epsilon_ == 0.0 and nothing.mean_ is None and nothing.feature_scales_ is None


# -- sample_weight ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bounds", [(-5.0, 5.0), None])
def test_weighted_statistics_approach_the_weighted_exact_ones(bounds):
    rng = np.random.default_rng(8)
    n = 200_000
    X = rng.normal(loc=[1.0, -0.5], scale=[1.0, 0.5], size=(n, 2))
    weights = np.where(X[:, 0] > 1.0, 2.0, 0.5)  # moves the mean of the first feature by about 0.5
    ledger = PrivacyAccountant()
    scaler = DPStandardScaler(feature_bounds=bounds, max_weight=2.0, random_state=0, accountant=ledger).fit(X, sample_weight=weights)
    exact = StandardScaler().fit(X, sample_weight=weights)
    unweighted = StandardScaler().fit(X)
    assert abs(exact.mean_[0] - unweighted.mean_[0]) > 0.4
    # released bounds: +-sqrt(2) s clips the upper tail of the first feature (N(1, 1), s = 2 or 4)
    np.testing.assert_allclose(scaler.mean_, exact.mean_, atol=0.02 if bounds else 0.05)
    np.testing.assert_allclose(scaler.scale_, exact.scale_, rtol=0.15)
    # three releases: the total weight, the mean and the second moment, one multiplier
    statistics = scaler.dp_event_ if bounds is not None else scaler.dp_event_.events[1]
    assert statistics == dp_accounting.SelfComposedDpEvent(statistics.event, 3)
    assert scaler.noise_std_[-1] == pytest.approx(statistics.event.noise_multiplier / n)
    assert len(ledger.history) == 1 and scaler.epsilon_ <= 1.0


def test_weights_of_one_give_the_unweighted_statistics_up_to_the_noise_of_the_total():
    X = np.random.default_rng(9).normal(size=(100_000, 2))
    plain = DPStandardScaler(feature_bounds=(-4.0, 4.0), random_state=0, accountant=PrivacyAccountant()).fit(X)
    ones = DPStandardScaler(feature_bounds=(-4.0, 4.0), random_state=0, accountant=PrivacyAccountant()).fit(X, sample_weight=np.ones(len(X)))
    np.testing.assert_allclose(ones.mean_, plain.mean_, atol=0.01)
    np.testing.assert_allclose(ones.scale_, plain.scale_, rtol=0.02)


def test_a_weight_above_max_weight_is_refused_before_anything_is_charged():
    X = np.random.default_rng(10).normal(size=(100, 2))
    ledger = PrivacyAccountant()
    scaler = DPStandardScaler(accountant=ledger)
    with pytest.raises(ValueError, match="exceeds max_weight=1"):
        scaler.fit(X, sample_weight=np.r_[np.ones(99), 1.5])
    with pytest.raises(ValueError, match="[Nn]egative"):
        scaler.fit(X, sample_weight=np.r_[np.ones(99), -1.0])
    assert ledger.history == () and not hasattr(scaler, "mean_")
    # all-zero weights are a dataset in the public domain: fitted, the total weight floored at its noise
    zero = DPStandardScaler(feature_bounds=(-3.0, 3.0), random_state=0, accountant=ledger).fit(X, sample_weight=np.zeros(100))
    assert np.all(np.isfinite(zero.mean_)) and np.all(zero.var_ > 0)
