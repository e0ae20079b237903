"""Private feature scaling inside fit (issue 15): the release's sensitivity, the folding of the
scaling into coef_ / intercept_, the composed event, and prediction on clipped rows."""

import itertools
import math

import dp_accounting
import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.preprocessing import Normalizer

import skdpsco.rows as fused_rows
import skdpsco.linear_model._scaling as scaling
from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant
from skdpsco.accounting import epsilon_of, gaussian_noise_multiplier
from skdpsco.rows import DENSE, layout_of
from benchmarks.engine import moment_floor
from benchmarks.rare_column import rare_table


def _sums(rows, bound):
    return rows.sum(axis=0) / bound


def _centred_squares(rows, mean, clip):
    centred = rows - mean
    centred *= clip / np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), clip)
    return (centred**2).sum(axis=0) / clip**2


def _adversarial_rows(d, bound):
    """Corners of the clipped ball: +-B on each axis, the diagonals, a row concentrated on two
    coordinates, and zero."""
    rows = [np.zeros(d)]
    for j in range(d):
        for sign in (1.0, -1.0):
            rows.append(sign * bound * np.eye(d)[j])
    for signs in itertools.product((1.0, -1.0), repeat=min(d, 3)):
        row = np.zeros(d)
        row[: len(signs)] = signs
        rows.append(bound * row / np.linalg.norm(row))
    for beta in np.linspace(0, 1, 11):
        row = np.zeros(d)
        row[0], row[1 % d] = -beta, math.sqrt(max(0.0, 1 - beta**2))
        rows.append(bound * row / max(1.0, np.linalg.norm(row)))
    return rows


@pytest.mark.parametrize("d", [1, 2, 5])
def test_moments_sensitivity_bounds_every_adversarial_pair(d):
    """Replace-one shifts of the two releases over the corners of the ball, the sums of squares
    centred on any fixed mean (the released one) and clipped to ``C``: at most the sensitivities of
    ``moment_sensitivities`` (l2: 2 and sqrt 2; l1: 2 sqrt(d) and 2), and more than half of them
    (a halved constant is caught)."""
    bound, clip = 3.0, 3.0 * scaling.CENTRED_NORM_FACTOR
    rng = np.random.default_rng(0)
    background = rng.normal(size=(4, d))
    background *= bound / np.maximum(np.linalg.norm(background, axis=1, keepdims=True), bound)
    largest = np.zeros((2, 2))  # (sums, squares) x (l2, l1)
    for mean in (np.zeros(d), rng.normal(size=d)):
        for a, b in itertools.product(_adversarial_rows(d, bound), repeat=2):
            D, D_prime = np.vstack([background, a]), np.vstack([background, b])
            for k, shift in enumerate([_sums(D, bound) - _sums(D_prime, bound),
                                       _centred_squares(D, mean, clip) - _centred_squares(D_prime, mean, clip)]):
                largest[k] = np.maximum(largest[k], [np.linalg.norm(shift), np.abs(shift).sum()])
    l2, l1 = np.array(scaling.moment_sensitivities(d, False)), np.array(scaling.moment_sensitivities(d, True))
    assert np.all(largest[:, 0] <= l2 + 1e-12) and np.all(largest[:, 1] <= l1 + 1e-12)
    assert np.all(largest[:, 0] > l2 / 2)  # the check can fail
    assert math.hypot(*l2) == pytest.approx(scaling.GAUSSIAN_MOMENTS_SENSITIVITY)
    assert sum(l1) == pytest.approx(scaling.laplace_moments_sensitivity(d))


def test_release_draws_at_the_claimed_sensitivity(monkeypatch):
    """White-box: the noise each moment release draws, divided by its event's noise multiplier,
    is the sensitivity the event claims (2 for the sums, sqrt 2 for the centred squares); the
    realised shift on neighbouring datasets stays below it, the squares centred on ``D``'s
    released mean on both; the two events compose to the planned ``mu``."""
    seen = []

    def observe(value, scale, rng, draw=None):
        seen.append((np.array(value), scale))
        return np.zeros(np.shape(value))

    monkeypatch.setattr(scaling, "release_noise", observe)
    plan = scaling.plan_scaling(5, 2, 1.0, gaussian_mu=0.3)
    rows = np.array([[1.0, 0.0], [0.0, 0.5], [0.3, 0.3], [0.0, 0.0], [0.6, -0.8]])
    neighbour = rows.copy()
    neighbour[0] = [-1.0, 0.0]
    mean, _ = scaling.release_moments(rows, plan, np.random.default_rng(0))
    squares_on_mean = _centred_squares(neighbour, mean, plan.centred_norm)
    scaling.release_moments(neighbour, plan, np.random.default_rng(0))
    (sums, scale), (squares, _), (sums_prime, _), _ = seen
    mean_event, squares_event = plan.dp_event.events
    assert scale / mean_event.noise_multiplier == pytest.approx(2.0)
    assert scale / squares_event.noise_multiplier == pytest.approx(math.sqrt(2.0))
    assert np.linalg.norm(sums - sums_prime) <= 2.0 + 1e-12
    assert np.linalg.norm(squares - squares_on_mean) <= math.sqrt(2.0) + 1e-12
    assert math.hypot(*(1 / e.noise_multiplier for e in plan.dp_event.events)) == pytest.approx(0.3)


def test_without_intercept_only_the_squares_are_released():
    plan = scaling.plan_scaling(100, 3, 2.0, gaussian_mu=0.5, centred=False)
    assert plan.centred_norm == 2.0 and plan.dp_event.noise_multiplier == pytest.approx(1 / 0.5)  # mu = 0.5, one release
    rows = np.ones((100, 3))
    mean, scale = scaling.release_moments(rows, plan, np.random.default_rng(0))
    assert np.all(mean == 0) and np.all(scale > 0.5)  # the root mean square, 1, up to noise


def test_standardised_rows_are_bounded_and_folding_is_exact_on_unclipped_rows():
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(50, 4)) * [1.0, 10.0, 0.1, 3.0] + [5.0, -2.0, 0.0, 1.0]
    mean, scale = rows.mean(axis=0), rows.std(axis=0)
    clip_norm = 3.0
    standardised = rows.copy()
    DENSE.standardised(standardised, mean, scale, clip_norm, out=standardised)
    assert np.linalg.norm(standardised, axis=1).max() <= 1 + 1e-12
    coef, intercept = rng.normal(size=(2, 4)), rng.normal(size=2)
    folded, shifted = scaling.fold_scaling(coef, intercept, mean, scale, clip_norm)
    unclipped = np.linalg.norm((rows - mean) / scale, axis=1) <= clip_norm
    assert unclipped.sum() > 10
    np.testing.assert_allclose((rows @ folded.T + shifted)[unclipped],
                               (standardised @ coef.T + intercept)[unclipped], rtol=1e-10, atol=1e-10)


@pytest.fixture
def wide_scales():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4)) * [1.0, 1e-3, 10.0, 1e-2]
    y = (X[:, 1] / 1e-3 + X[:, 3] / 1e-2 > 0).astype(int)  # the small features decide
    return Normalizer().fit_transform(X), y


def test_scaling_lifts_the_default_on_badly_scaled_rows(wide_scales):
    X, y = wide_scales
    scaled = DPLogisticRegression(epsilon=3.0, classes=[0, 1], random_state=0).fit(X, y)
    unscaled = DPLogisticRegression(epsilon=3.0, classes=[0, 1], random_state=0, feature_scaling=None).fit(X, y)
    assert scaled.score(X, y) > unscaled.score(X, y) + 0.1


@pytest.mark.parametrize("estimator, labels", [(DPLogisticRegression, 2), (DPLogisticRegression, 3),
                                                (DPHingeSVM, 3), (DPLpRegression, None)])
def test_one_event_composes_scaling_and_model_within_the_budget(estimator, labels):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = rng.normal(size=300) if labels is None else np.arange(300) % labels
    # a public target bound: the private one adds its own release (tests/test_bounds.py)
    kwargs = {"y_bound": 3.0} if labels is None else {"classes": list(range(labels))}
    ledger = PrivacyAccountant()
    model = estimator(epsilon=1.0, delta=1e-5, accountant=ledger, random_state=0, **kwargs).fit(X, y)
    (magnitudes, *moments), model_event = [e.events if isinstance(e, dp_accounting.ComposedDpEvent) else e
                                           for e in model.dp_event_.events]
    mu = 1 / gaussian_noise_multiplier(1.0, 1e-5)
    assert len(moments) == 2  # the sums, then the centred squares
    assert math.hypot(*(1 / e.noise_multiplier for e in moments)) == pytest.approx(math.sqrt(scaling.SCALING_SHARE) * mu)
    assert magnitudes.noise_multiplier == pytest.approx(1 / (math.sqrt(scaling.MAGNITUDE_SHARE) * mu))
    assert 0.995 <= model.epsilon_ <= 1.0
    assert model.epsilon_ == epsilon_of(model.dp_event_, 1e-5)
    assert len(ledger.history) == 1 and ledger.history[0].event == model.dp_event_


def test_pure_dp_scaling_is_laplace_and_composes_basically():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), np.arange(300) % 3
    model = DPHingeSVM(epsilon=2.0, delta=0.0, algorithm="localization", classes=[0, 1, 2], random_state=0).fit(X, y)
    scaling_events, tasks = model.dp_event_.events
    assert all(isinstance(e, dp_accounting.RandomizedResponseDpEvent) for e in scaling_events.events)
    assert model.epsilon_ == pytest.approx(2.0, rel=1e-9)
    assert tasks.count == 3


def test_without_intercept_the_model_goes_through_the_origin(wide_scales):
    X, y = wide_scales
    model = DPLogisticRegression(fit_intercept=False, classes=[0, 1], random_state=0).fit(X, y)
    assert np.all(model.intercept_ == 0)


def test_prediction_clips_rows_as_fit_does():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), np.arange(200) % 2
    for feature_scaling in ("standard", None):
        model = DPLogisticRegression(data_norm=2.0, classes=[0, 1], random_state=0,
                                     feature_scaling=feature_scaling).fit(X, y)
        row = np.array([[3.0, -4.0, 0.0]])  # norm 5: clipped to 2
        np.testing.assert_allclose(model.decision_function(row * 10), model.decision_function(row * 2 / 5))
        regression = DPLpRegression(data_norm=2.0, random_state=0, feature_scaling=feature_scaling).fit(X, X[:, 0] / 3)
        np.testing.assert_allclose(regression.predict(row * 10), regression.predict(row * 2 / 5))


def test_prediction_standardises_and_clips_as_fit_does(monkeypatch):
    """The model predicts through the same map as the rows it trained on: ``x / s`` clipped to
    ``row_norm_``, standardised with the released statistics and clipped to ``C``. A row far out
    along one feature is shrunk by the second clip in prediction as in ``fit``, so its score is
    the trained model's on the clipped standardised row (the folded linear model alone would
    extrapolate it)."""
    trained = {}
    original = fused_rows._fused.standardise  # the in-memory rows' standardisation pass

    def keep(rows, n_features, mean, scale, clip_norm):
        original(rows, n_features, mean, scale, clip_norm)
        trained["rows"] = rows[:, :n_features].copy()

    monkeypatch.setattr(fused_rows._fused, "standardise", keep)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)) * [1.0, 30.0, 0.01] + [0.0, 100.0, 0.0]
    y = (X[:, 0] > 0).astype(int)
    model = DPLogisticRegression(epsilon=5.0, classes=[0, 1], random_state=0).fit(X, y)
    mean, scale, clip_norm = model.standardisation_
    assert clip_norm == pytest.approx(math.sqrt(3)) and np.linalg.norm(trained["rows"], axis=1).max() <= 1 + 1e-12
    far = np.array([[50.0, 100.0, 0.0]])  # 50 sds out along feature 0
    divided = far / model.feature_scales_
    divided *= min(1.0, model.row_norm_ / np.linalg.norm(divided))  # the first clip
    z = (divided - mean) / scale
    assert np.linalg.norm(z) > clip_norm  # the second clip shrinks it
    shrunk_x = (z * clip_norm / np.linalg.norm(z) * scale + mean) * model.feature_scales_
    trained_score = shrunk_x @ model.coef_.T + model.intercept_  # the folded model on the clipped standardised row
    np.testing.assert_allclose(model.decision_function(far), trained_score.ravel(), rtol=1e-9)
    assert abs(model.decision_function(far)[0]) < abs((far @ model.coef_.T + model.intercept_)[0, 0])


def test_feature_scaling_is_a_validated_parameter():
    X, y = np.ones((10, 2)), np.arange(10) % 2
    with pytest.raises(ValueError, match="feature_scaling"):
        DPLogisticRegression(feature_scaling="whiten", classes=[0, 1]).fit(X, y)


def test_division_by_the_released_scales_never_overflows_and_keeps_directions():
    """A finite row must never become infinite after ``x / s`` (``fit`` would then raise on one
    dataset and not on its neighbour): overflowing rows are divided by a further power of two,
    which leaves their direction, hence their clipped value, unchanged."""
    X = np.array([[1e300, 1.0, -1e299], [3.0, 4.0, 5.0]])
    scales = np.array([2.0**-38, 2.0, 2.0**-30])
    divided = layout_of(X).divide_by_powers_of_two(X, scales)
    assert np.all(np.isfinite(divided))
    np.testing.assert_array_equal(divided[1], X[1] / scales)  # exact where nothing overflows
    exact_direction = np.array([1e300 * 2.0**(38 - 100), 2.0**(-1 - 100), -1e299 * 2.0**(30 - 100)])  # x / s, 2**-100 of it
    exact_direction /= np.abs(exact_direction).max()
    np.testing.assert_allclose(divided[0] / np.abs(divided[0]).max(), exact_direction, rtol=1e-12, atol=1e-300)
    in_place = X.copy()
    layout_of(in_place).divide_by_powers_of_two(in_place, scales, out=in_place)
    np.testing.assert_array_equal(in_place, divided)


def test_magnitude_counts_in_blocks_equal_one_histogram_per_feature():
    """Counted in row blocks (bounded temporaries), the histograms are those of every column at
    once, zeros left out."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 4)) * [1.0, 1e-5, 1e5, 0.0]
    X[::3, 0] = 0.0
    bins = scaling.magnitude_bins(X)
    expected = np.array([np.bincount(bins[:, j][bins[:, j] >= 0], minlength=2 * scaling.MAGNITUDE_RANGE + 1)
                         for j in range(4)])
    np.testing.assert_array_equal(scaling.magnitude_counts(X, block=77), expected)
    assert expected[3].sum() == 0 and expected[0].sum() == 1000 - 334


def test_an_unresolved_magnitude_is_never_below_the_resolved_ones(monkeypatch):
    """A feature whose window is not significant keeps its own (noisy) order when that shrinks it
    more than the median order of the significant features, and gets the median otherwise: the
    fallback never blows a large feature up to dominate every clipped row (breast_cancer at
    epsilon = 1, where most windows miss the threshold), nor lets a few stray entries give a
    tiny scale."""
    monkeypatch.setattr(scaling, "release_noise", lambda value, scale, rng, draw=None: np.zeros_like(value))
    n = 1000
    X = np.zeros((n, 3))
    X[:, 0] = 8.0  # every entry at 2**3: significant
    X[:20, 1] = 1000.0  # 20 entries near 2**10: below the threshold, larger than the median order
    X[:20, 2] = 2.0**-5  # 20 entries at 2**-5: below the threshold, smaller
    share = scaling.SCALING_SHARE / (scaling.SCALING_SHARE + scaling.MAGNITUDE_SHARE)
    count_std = 200.0 / (scaling.MAGNITUDE_THRESHOLD * math.sqrt(scaling.MAGNITUDE_WINDOW))  # threshold 200
    mu = math.sqrt(2 * 3) / (math.sqrt(1 - share) * count_std)
    plan = scaling.plan_scaling(n, 3, None, gaussian_mu=mu)
    assert plan.magnitude_noise == pytest.approx(count_std)
    scales = scaling.release_magnitudes(X, plan, np.random.default_rng(0))
    np.testing.assert_array_equal(np.log2(scales), [3.0, 10.0, 3.0])


def _zero_noise(monkeypatch):
    monkeypatch.setattr(scaling, "release_noise", lambda value, scale, rng, draw=None: np.zeros_like(value))


@pytest.mark.parametrize("laplace", [False, True])
def test_magnitudes_resolve_exactly_when_one_window_can_hold_a_significant_count(monkeypatch, laplace):
    """``resolves_magnitudes`` is the release's own limit: with every entry of a feature in one window
    and no noise, the window is significant iff ``n`` exceeds ``magnitude_threshold``; at or below it
    every feature gets the fallback, ``max(own order, 0)`` with nothing significant: 0 for entries
    at ``2**-5``."""
    _zero_noise(monkeypatch)
    budget = {"pure_epsilon": 2.0} if laplace else {"gaussian_mu": 0.8}
    threshold = scaling.plan_scaling(1000, 2, None, **budget).magnitude_threshold
    for n in (math.floor(threshold), math.floor(threshold) + 1):
        plan = scaling.plan_scaling(n, 2, None, **budget)
        X = np.full((n, 2), 2.0**-5)
        scales = scaling.release_magnitudes(X, plan, np.random.default_rng(0))
        assert plan.resolves_magnitudes == (n > threshold)
        np.testing.assert_array_equal(np.log2(scales), [-5.0, -5.0] if n > threshold else [0.0, 0.0])


@pytest.mark.parametrize("t", [0.0, 0.7, 3.0, 12.0])
def test_laplace_sum_survival_is_the_tail_of_the_convolution(t):
    """The closed form against ``P(L_1 + L_2 > t) = exp(-t) (2 + t) / 4`` and, for three terms, the
    numerical convolution of that tail with one more Laplace density."""
    def two(u):
        return math.exp(-u) * (2 + u) / 4 if u >= 0 else 1 - math.exp(u) * (2 - u) / 4

    assert scaling.laplace_sum_survival(t, 1) == pytest.approx(math.exp(-t) / 2, rel=1e-12)
    assert scaling.laplace_sum_survival(t, 2) == pytest.approx(two(t), rel=1e-12)
    three = sum(integrate.quad(lambda x: 0.5 * math.exp(-abs(x)) * two(t - x), a, b, epsabs=1e-14)[0]
                for a, b in ((-np.inf, 0.0), (0.0, t), (t, np.inf)))
    assert scaling.laplace_sum_survival(t, 3) == pytest.approx(three, rel=1e-7)


@pytest.mark.parametrize("laplace", [False, True])
@pytest.mark.parametrize("n_features", [1, 6, 64])
def test_magnitude_significance_is_the_union_bound_at_the_false_order_rate(laplace, n_features):
    """The tail of a window's noise at the corrected threshold, summed over the ``d W`` windows of a
    fit, is ``alpha``: the Gaussian tail, or that of a sum of ``MAGNITUDE_WINDOW`` Laplace variables
    (standard deviation ``b sqrt(2 m)``). The threshold grows with ``d`` and exceeds the uncorrected one."""
    z = scaling.magnitude_significance(n_features, laplace)
    window = scaling.MAGNITUDE_WINDOW
    tail = scaling.laplace_sum_survival(z * math.sqrt(2 * window), window) if laplace else stats.norm.sf(z)
    assert n_features * scaling.MAGNITUDE_WINDOWS * tail == pytest.approx(scaling.MAGNITUDE_FALSE_ORDER_RATE, rel=1e-6)
    assert scaling.magnitude_significance(2 * n_features, laplace) > z > scaling.MAGNITUDE_THRESHOLD


def test_an_order_far_below_the_median_needs_the_corrected_threshold(monkeypatch):
    """Without noise: five features at ``2**3`` (the median), and three whose windows hold a count
    between the uncorrected and the corrected thresholds: at ``MAGNITUDE_MARGIN`` octaves below the
    median the order is kept, one octave further it is the median; with a count above the
    corrected threshold it is kept there too."""
    _zero_noise(monkeypatch)
    n, d, margin = 4000, 8, scaling.MAGNITUDE_MARGIN
    plan = scaling.plan_scaling(n, d, None, gaussian_mu=1.0)
    weak = int((plan.magnitude_threshold + plan.distant_magnitude_threshold) / 2)
    assert plan.magnitude_threshold < weak < plan.distant_magnitude_threshold < n
    X = np.zeros((n, d))
    X[:, :5] = 8.0
    X[:weak, 5] = 2.0 ** (3 - margin)
    X[:weak, 6] = 2.0 ** (2 - margin)
    X[:, 7] = 2.0 ** (2 - margin)
    scales = scaling.release_magnitudes(X, plan, np.random.default_rng(0))
    np.testing.assert_array_equal(np.log2(scales), [3.0] * 5 + [3 - margin, 3, 2 - margin])


def _noise_orders_far_below(plan, counts, seeds, margin):
    """Fits (seeds) in which an all-zero feature (features 2 on) gets an order more than ``margin``
    octaves below the two resolved ones': only a window of pure noise that passes a threshold
    does that."""
    passes = fused_rows.FusedPasses(np.zeros((1, plan.n_features)), plan.n_features, scaling.MAGNITUDE_RANGE, counts)
    orders = np.log2([scaling.release_magnitudes(passes, plan, np.random.default_rng(seed)) for seed in seeds])
    return int(np.sum(orders[:, 2:].min(axis=1) < orders[:, :2].min(axis=1) - margin))


def test_a_noise_window_sets_an_order_far_below_the_others_in_few_fits(monkeypatch):
    """Two features with every entry at ``2**0`` (resolved) and 18 features of zeros, whose
    histograms hold only noise: a zero feature falls back to at least the resolved order unless
    one of its noise windows passes, and far below it only past the threshold corrected for the
    ``20 * 79`` windows, in at most ``MAGNITUDE_FALSE_ORDER_RATE`` of the fits. Without the
    correction (the margin out of reach) a noise window passes the 4 standard deviations in
    about 3 % of the fits, below the others in most of them."""
    n, d, fits = 2000, 20, 2000
    plan = scaling.plan_scaling(n, d, None, gaussian_mu=1.0)
    counts = np.zeros((d, 2 * scaling.MAGNITUDE_RANGE + 1))
    counts[:2, scaling.MAGNITUDE_RANGE] = n
    allowed = 8  # P(Binomial(2000, 0.001) > 8) < 1e-4
    assert scaling.MAGNITUDE_FALSE_ORDER_RATE <= 0.001
    margin = scaling.MAGNITUDE_MARGIN
    assert _noise_orders_far_below(plan, counts, range(fits), margin) <= allowed
    monkeypatch.setattr(scaling, "MAGNITUDE_MARGIN", 2 * scaling.MAGNITUDE_RANGE)
    assert _noise_orders_far_below(plan, counts, range(fits), margin) > allowed


def test_rows_too_few_for_the_magnitudes_get_one_private_row_bound(wide_scales):
    """Below the magnitudes' limit the default fit is the ``data_norm='private'`` fit (one row bound,
    then the moments), the same model and event; above it, per-feature orders of magnitude. The
    switch reads ``n``, ``d`` and the budget only: rows a million times larger switch alike."""
    X, y = wide_scales[0][:150] * [1.0, 1e-3, 10.0, 1e-2], wide_scales[1][:150]
    common = dict(delta=1e-5, classes=[0, 1], random_state=0)
    for rows in (X, 1e6 * X):
        small = DPLogisticRegression(epsilon=1.0, **common).fit(rows, y)
        assert not small._plan_scaling(150, 4).resolves_magnitudes
        private = DPLogisticRegression(epsilon=1.0, data_norm="private", **common).fit(rows, y)
        np.testing.assert_array_equal(small.coef_, private.coef_)
        np.testing.assert_array_equal(small.intercept_, private.intercept_)
        assert small.dp_event_ == private.dp_event_ and small.data_norm_ == private.data_norm_
        assert np.unique(small.feature_scales_).size == 1
        large = DPLogisticRegression(epsilon=30.0, **common).fit(rows, y)
        assert large._plan_scaling(150, 4).resolves_magnitudes
        assert not hasattr(large, "data_norm_") and np.unique(large.feature_scales_).size > 1


def test_variance_floor_is_applied_to_the_released_second_moment(monkeypatch):
    # White box: the floor's input is the noisy sum of squares the mechanism released, its level a
    # public function of the plan (VARIANCE_THRESHOLD noise standard deviations of a second moment).
    plan = scaling.plan_scaling(1000, 3, 1.0, gaussian_mu=0.5)
    floor = plan.variance_floor
    assert scaling.VARIANCE_THRESHOLD == 1.0
    assert floor == pytest.approx(scaling.VARIANCE_THRESHOLD * plan.moment_noise_std * plan.centred_norm**2)
    units = plan.n_samples / plan.centred_norm**2  # a variance of v is a released sum of squares of v * units
    released = []

    def noise(value, scale, rng, draw=None):
        value = np.asarray(value, dtype=float)
        out = np.zeros_like(value)
        if released:  # the sums of squares: feature 0 released at 0, feature 1 just below the floor
            out[:2] = np.array([0.0, 0.9 * floor * units]) - value[:2]
        released.append(value + out)
        return out

    monkeypatch.setattr(scaling, "release_noise", noise)
    rows = np.random.default_rng(0).normal(size=(1000, 3)) * 0.1
    _, scale = scaling.release_moments(rows, plan, np.random.default_rng(0))
    second = released[1] / units
    assert second[2] > floor  # the third feature's released variance is above the floor: kept as released
    np.testing.assert_allclose(scale**2, np.maximum(second, floor), rtol=1e-12)
    assert scale[0] == scale[1] == math.sqrt(floor)


def test_with_released_orders_the_scale_is_at_least_a_sixteenth_of_the_order():
    """With the orders of magnitude released the floor on a variance in the units of ``x / s`` is
    at least ``RELATIVE_SCALE_FLOOR**2`` (the noise floor at 6000 rows and 6 features is far
    below it); with a public ``data_norm`` there is no order to be relative to."""
    released = scaling.plan_scaling(6000, 6, None, gaussian_mu=1.0)
    noise_floor = scaling.VARIANCE_THRESHOLD * released.moment_noise_std * released.centred_norm**2
    assert noise_floor < scaling.RELATIVE_SCALE_FLOOR**2 == released.variance_floor
    public = scaling.plan_scaling(6000, 6, 1.0, gaussian_mu=1.0)
    assert public.variance_floor == pytest.approx(
        scaling.VARIANCE_THRESHOLD * public.moment_noise_std * public.centred_norm**2, rel=1e-12)
    assert public.variance_floor < scaling.RELATIVE_SCALE_FLOOR**2


@pytest.mark.parametrize("seed", range(4))
def test_rare_indicator_coefficient_is_bounded_through_the_floor(seed):
    # The rare level's released variance is at the noise level; standardised by the floor's scale,
    # its coefficient is at most radius_ / (s_j sqrt(floor) C): the trained model lies in the ball of
    # radius radius_, and coef_ divides it by s_j scale_j C with scale_j >= sqrt(floor).
    X, y = rare_table(6000, np.random.default_rng(123))  # a level in 0.8 % of the rows, the last column
    model = DPLogisticRegression(classes=[0, 1], random_state=seed, accountant=PrivacyAccountant()).fit(X, y)
    mean, scale, clip_norm = model.standardisation_
    floor = model._plan_scaling(*X.shape).variance_floor
    assert np.all(np.isfinite(model.coef_))
    assert np.all(scale >= math.sqrt(floor))
    bound = model.radius_ / (model.feature_scales_ * math.sqrt(floor) * clip_norm)
    assert np.all(np.abs(model.coef_[0]) <= bound * (1 + 1e-9))


def test_without_released_orders_the_moment_rows_grow_with_the_noise_past_the_bound_rule_floor():
    """A public ``data_norm``: ``min(n, max(MOMENT_ROWS, noise_std / MOMENT_NOISE))``."""
    budgets = ((False, {"gaussian_mu": 0.3}), (True, {"pure_epsilon": 0.3}), (False, {"gaussian_mu": 1e-3}))
    for laplace, budget in budgets:
        plan = scaling.plan_scaling(10**9, 3, 1.0, subsample_moments=True, **budget)
        noise_std = plan.noise_scale * (math.sqrt(2.0) if laplace else 1.0)
        assert plan.moment_rows == max(scaling.MOMENT_ROWS, math.ceil(noise_std / scaling.MOMENT_NOISE))
    noisy = scaling.plan_scaling(10**9, 3, 1.0, gaussian_mu=1e-3, subsample_moments=True)
    assert noisy.moment_rows > scaling.MOMENT_ROWS
    assert scaling.plan_scaling(1000, 3, 1.0, gaussian_mu=0.3, subsample_moments=True).moment_rows == 1000
    plan = scaling.plan_scaling(10**7, 3, 1.0, gaussian_mu=0.3, subsample_moments=True)
    assert scaling.plan_scaling(10**7, 3, 1.0, gaussian_mu=0.3).moment_rows == 10**7 > plan.moment_rows
    # the noise per moment is that of its rows: the variance floor is planned on them
    assert plan.moment_noise_std == pytest.approx(plan.noise_scale / plan.moment_rows)


_RULE_PLANS = [(n, d, budget, centred) for n in (5000, 2 * 10**4, 10**5, 10**7) for d in (2, 20, 1000)
               for budget in ({"gaussian_mu": 0.05}, {"gaussian_mu": 0.4}, {"gaussian_mu": 3.0}, {"pure_epsilon": 0.5})
               for centred in (True, False)]


@pytest.mark.parametrize("n, d, budget, centred", _RULE_PLANS)
def test_with_released_orders_the_moment_rows_floor_the_variance_and_resolve_the_orders_as_all_rows(n, d, budget,
                                                                                                   centred):
    """``m = min(n, max(SCALED_MOMENT_ROWS, variance_rows, magnitude_rows))``; on ``m < n`` rows the
    variances' noise floor is below ``RELATIVE_SCALE_FLOOR**2`` (the floor is that one, as on all
    rows), a window of half the rows clears the distant threshold with ``MAGNITUDE_THRESHOLD``
    noise deviations to spare, and the orders resolve exactly when they do on all rows."""
    whole = scaling.plan_scaling(n, d, None, centred=centred, **budget)
    plan = scaling.plan_scaling(n, d, None, centred=centred, subsample_moments=True, **budget)
    unit_rows = (8 if centred else 128) * d * whole.noise_std  # C**2 / (RELATIVE_SCALE_FLOOR**2 / 2): 8 d or 128 d
    assert scaling.variance_rows(whole) == pytest.approx(unit_rows, abs=1.0)
    rows = max(scaling.SCALED_MOMENT_ROWS, scaling.variance_rows(whole), scaling.magnitude_rows(whole))
    assert plan.moment_rows == min(n, rows)
    assert plan.resolves_magnitudes == whole.resolves_magnitudes
    assert plan.dp_event == whole.dp_event and plan.noise_scale == whole.noise_scale
    if plan.moment_rows < n:
        noise = plan.moment_noise_std * plan.centred_norm**2
        assert noise <= scaling.VARIANCE_NOISE_SHARE * scaling.RELATIVE_SCALE_FLOOR**2
        assert scaling.VARIANCE_THRESHOLD * noise <= scaling.RELATIVE_SCALE_FLOOR**2
        assert plan.variance_floor == whole.variance_floor == scaling.RELATIVE_SCALE_FLOOR**2
        half = scaling.RESOLVED_WINDOW_SHARE * plan.moment_rows
        assert half - plan.magnitude_threshold >= plan.distant_magnitude_threshold


def test_without_a_relative_floor_the_releases_read_all_rows(monkeypatch):
    """The variance floor is then the noise's, which only all rows make what it is on all rows."""
    monkeypatch.setattr(scaling, "RELATIVE_SCALE_FLOOR", 0.0)
    assert scaling.plan_scaling(10**7, 20, None, gaussian_mu=3.0, subsample_moments=True).moment_rows == 10**7


def test_the_default_fits_moment_rows_as_a_function_of_n_d_and_the_budget():
    """The library's fits: all rows below ``SCALED_MOMENT_ROWS``; at ``d = 20`` the least rows, more
    at small epsilon; with few features and a small budget the orders' guard; at ``d = 1000`` the
    variance's, above the former least of ``2**16``; fewer rows at a larger budget, more with more
    features, never above ``n``; a public bound keeps its rule."""
    def rows(n, d, epsilon, **params):
        return DPLogisticRegression(epsilon=epsilon, **params)._plan_scaling(n, d, subsample_moments=True).moment_rows

    def plan(n, d, epsilon):
        return DPLogisticRegression(epsilon=epsilon)._plan_scaling(n, d)

    assert rows(scaling.SCALED_MOMENT_ROWS - 1, 20, 1.0) == scaling.SCALED_MOMENT_ROWS - 1
    assert rows(10**5, 20, 1.0) == rows(10**5, 20, 3.0) == scaling.SCALED_MOMENT_ROWS
    small = plan(10**5, 20, 0.1)
    assert rows(10**5, 20, 0.1) == scaling.variance_rows(small) > scaling.magnitude_rows(small)
    few = plan(10**5, 5, 0.1)
    assert rows(10**5, 5, 0.1) == scaling.magnitude_rows(few) > scaling.variance_rows(few)
    assert rows(10**5, 5, 0.1) > scaling.SCALED_MOMENT_ROWS
    assert rows(10**6, 1000, 1.0) == scaling.variance_rows(plan(10**6, 1000, 1.0)) > 2**16
    assert rows(10**5, 1000, 1.0) == 10**5
    for n in (10**4, 10**5, 10**6):
        by_epsilon = [rows(n, 100, epsilon) for epsilon in (0.1, 0.3, 1.0, 3.0)]
        assert by_epsilon == sorted(by_epsilon, reverse=True) and max(by_epsilon) <= n
        by_features = [rows(n, d, 0.3) for d in (2, 20, 100, 1000)]
        assert by_features == sorted(by_features) and max(by_features) <= n
    assert rows(10**5, 20, 1.0, data_norm=5.0) == 2**16


def test_at_the_guarded_rows_a_window_of_half_of_them_sets_a_distant_order_against_the_noise(monkeypatch):
    """The release over ``m = magnitude_rows`` rows with every window's noise at
    ``-MAGNITUDE_THRESHOLD`` deviations: a feature with half its entries in one window far below
    the others' orders gets that order; with one entry fewer than the thresholds' sum it gets the
    fallback (the median order of the others)."""
    plan = scaling.plan_scaling(10**6, 3, None, gaussian_mu=0.01, subsample_moments=True)
    assert plan.moment_rows == scaling.magnitude_rows(plan)
    assert plan.moment_rows > max(scaling.SCALED_MOMENT_ROWS, scaling.variance_rows(plan))
    low = -scaling.MAGNITUDE_THRESHOLD * plan.window_noise_std / scaling.MAGNITUDE_WINDOW
    monkeypatch.setattr(scaling, "release_noise", lambda value, scale, rng, draw=None: np.full_like(value, low))

    def orders(entries):
        X = np.full((plan.moment_rows, 3), 8.0)
        X[:, 0] = 0.0
        X[:entries, 0] = 2.0**-12  # 15 octaves below the others' 2**3: a distant order
        return np.log2(scaling.release_magnitudes(X, plan, np.random.default_rng(0)))

    np.testing.assert_array_equal(orders(math.ceil(scaling.RESOLVED_WINDOW_SHARE * plan.moment_rows)), [-12, 3, 3])
    too_few = math.ceil(plan.distant_magnitude_threshold + plan.magnitude_threshold) - 1
    np.testing.assert_array_equal(orders(too_few), [3, 3, 3])


def test_a_default_fit_over_the_rules_rows_has_the_event_of_all_rows():
    """``dp_event_`` and ``epsilon_`` do not depend on the rows the releases read."""
    X = np.random.default_rng(0).normal(size=(9000, 3)) * [1.0, 1e3, 1e-3]
    y = (X[:, 0] > 0).astype(int)
    params = dict(epsilon=3.0, classes=[0, 1], random_state=0)
    assert DPLogisticRegression(**params)._plan_scaling(*X.shape, subsample_moments=True).moment_rows < 9000
    rule = DPLogisticRegression(**params, accountant=PrivacyAccountant()).fit(X, y)
    with moment_floor(9000, exact=True):
        whole = DPLogisticRegression(**params, accountant=PrivacyAccountant()).fit(X, y)
    assert str(rule.dp_event_) == str(whole.dp_event_) and rule.epsilon_ == whole.epsilon_
    assert not np.array_equal(rule.coef_, whole.coef_)  # the moments of fewer rows: another model


def test_a_fit_of_many_rows_releases_the_moments_of_its_first_rows_with_the_same_event(monkeypatch):
    """White-box: with ``m`` moment rows of ``n``, the released sums are those of ``m`` rows (two
    kinds of rows: a whole number of each, about half of ``m``), the solver reads every row
    standardised (the first ``m`` by the standardisation pass, the rest gathered divided, clipped
    and standardised), and the fit's event is the one without subsampling."""
    X = np.tile([3.0, -200.0, 0.01], (3000, 1))
    X[::2] = [0.5, -150.0, 0.03]  # two kinds of rows, alternating: a prefix of the random order holds both
    y = np.arange(3000) % 2
    seen, calls = [], []

    def observe(value, scale, rng, draw=None):
        seen.append(np.array(value))
        return np.zeros(np.shape(value))

    def counting(name):
        original = getattr(fused_rows._fused, name)

        def run(rows, *args, **options):  # the rows a pass reads: the block, or the order of the gather
            calls.append((name, len(args[0]) if name == "gather_standardised" else rows.shape[0]))
            return original(rows, *args, **options)
        return run

    model = DPLogisticRegression(epsilon=3.0, classes=[0, 1], random_state=0)
    whole = model.fit(X, y)
    whole_event, whole_rows = whole.dp_event_, whole.n_iter_
    monkeypatch.setattr(scaling, "release_noise", observe)
    for name in ("standardise", "divide_clip_and_standardise", "divide_clip_and_sum", "gather_standardised",
                 "magnitude_counts"):
        monkeypatch.setattr(fused_rows._fused, name, counting(name))
    with moment_floor(1000, exact=True):
        subsampled = DPLogisticRegression(epsilon=3.0, classes=[0, 1], random_state=0).fit(X, y)
    # the gather counted the first rows' magnitudes, copied the others once the scale was known
    assert sorted(calls) == [("divide_clip_and_sum", 1000), ("gather_standardised", 2000), ("standardise", 1000)]
    assert str(subsampled.dp_event_) == str(whole_event) and subsampled.n_iter_ == whole_rows
    _, sums, squares = seen  # magnitudes, then the moments
    divided = X[:2] / subsampled.feature_scales_
    divided *= np.minimum(1.0, subsampled.row_norm_ / np.linalg.norm(divided, axis=1, keepdims=True))
    kinds = (sums * subsampled.row_norm_ - 1000 * divided[1]) / (divided[0] - divided[1])
    np.testing.assert_allclose(kinds, np.round(kinds[0]), atol=1e-6)  # a whole number of rows of the first kind ...
    assert 400 < kinds[0] < 600  # ... of the 1000, about half


@pytest.fixture
def few_moment_rows():
    """Moments of the first 500 rows whatever the budget."""
    with moment_floor(500, exact=True):
        yield


@pytest.mark.parametrize("data_norm", [None, 3e3])
def test_rows_gathered_after_the_releases_give_the_model_of_rows_gathered_before(few_moment_rows, data_norm):
    """A C-contiguous ``X`` copies its other rows scaled once the releases are known; any other
    layout copies every row first and scales them in place: the same mechanism, the same model
    (bit for bit with the orders of magnitude; with a public bound, the two copies' clips may
    round the last bit differently)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 4)) * [1.0, 1e3, 1e-3, 10.0]
    y = (X[:, 0] + X[:, 1] / 1e3 > 0).astype(int)
    fits = [DPLogisticRegression(epsilon=2.0, classes=[0, 1], random_state=3, data_norm=data_norm).fit(rows, y)
            for rows in (X, np.asfortranarray(X))]
    if data_norm is None:
        np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
        np.testing.assert_array_equal(fits[0].intercept_, fits[1].intercept_)
    else:
        np.testing.assert_allclose(fits[0].coef_, fits[1].coef_, rtol=1e-12)
    np.testing.assert_array_equal(fits[0].feature_scales_, fits[1].feature_scales_)
    assert str(fits[0].dp_event_) == str(fits[1].dp_event_)


def test_a_non_finite_row_among_those_gathered_late_is_refused_before_the_charge(few_moment_rows, monkeypatch):
    X = np.random.default_rng(0).normal(size=(2000, 3))
    X[1234, 2] = np.nan  # not among the first 500 rows of this seed's order: the check of X finds it
    counted = []
    original = fused_rows.start_count_non_finite

    def start_count(rows):
        count = original(rows)
        return lambda: counted.append(count()) or counted[-1]

    monkeypatch.setattr(fused_rows, "start_count_non_finite", start_count)
    accountant = PrivacyAccountant()
    with pytest.raises(ValueError, match="NaN"):
        DPLogisticRegression(classes=[0, 1], accountant=accountant, random_state=0).fit(X, np.arange(2000) % 2)
    assert counted == [1] and not accountant.history


@pytest.mark.parametrize("algorithm", ["phased_sgd", "snowball"])
def test_a_one_pass_solver_reading_rows_as_they_are_gathered_fits_the_model_of_rows_gathered_first(
        few_moment_rows, algorithm, monkeypatch):
    """The rows gathered after the releases are written in the background while a one-pass solver
    reads them (``reads_rows_progressively``): the same model, bit for bit, as when the fit waits
    for every row before the solver starts; small blocks, so the pass overlaps many of them."""
    import skdpsco.solvers._core as core
    from skdpsco.solvers import ALGORITHMS

    monkeypatch.setattr(fused_rows._threads, "BLOCK_ROWS", 97)
    monkeypatch.setattr(core, "PROGRESS_CHUNK_ROWS", 97)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(3000, 5)) * [1.0, 1e3, 1e-3, 10.0, 1.0]
    y = (X[:, 0] + X[:, 1] / 1e3 > 0).astype(int)

    def fit():
        return DPLogisticRegression(epsilon=2.0, classes=[0, 1], random_state=3, algorithm=algorithm).fit(X, y)

    progressive = fit()
    monkeypatch.setattr(type(ALGORITHMS[algorithm]), "reads_rows_progressively", False)
    waiting = fit()
    np.testing.assert_array_equal(progressive.coef_, waiting.coef_)
    np.testing.assert_array_equal(progressive.intercept_, waiting.intercept_)
