"""Tests of the empirical privacy audit (``skdpsco.audit``).

The audit is validated on mechanisms whose privacy curve is known exactly:

* the Gaussian mechanism on a scalar query of sensitivity 1 with noise std
  ``sigma`` (analytic Gaussian mechanism, Balle & Wang 2018), and
* binary randomized response, which is exactly ``eps``-DP (``delta = 0``) and on
  which a threshold test is (nearly) tight, so an over-optimistic audit would be
  caught.

Every random draw comes from a fixed seed, so the tests are deterministic; the
assertions nevertheless allow the failure rate that a valid 95% bound may
have, so they would stay true under other seeds.
"""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import binom, norm

from skdpsco.audit import (
    MIN_TRIALS,
    AuditResult,
    audit_mechanism,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
)

# ---------------------------------------------------------------------------
# Known privacy curves
# ---------------------------------------------------------------------------


def gaussian_delta(eps, sigma):
    """delta(eps) of the Gaussian mechanism, sensitivity 1, noise std sigma."""
    mu = 1.0 / sigma
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def gaussian_epsilon(sigma, delta):
    """Exact epsilon at delta of the Gaussian mechanism (bisection on delta(eps))."""
    if gaussian_delta(0.0, sigma) <= delta:
        return 0.0
    return brentq(lambda e: gaussian_delta(e, sigma) - delta, 0.0, 500.0, xtol=1e-12)


def gaussian_sigma(eps, delta):
    """Smallest noise std whose Gaussian mechanism is (eps, delta)-DP."""
    return brentq(lambda s: gaussian_epsilon(s, delta) - eps, 0.1, 100.0, xtol=1e-12)


def gaussian_stats(rng, sigma, n):
    """n releases of the Gaussian mechanism on neighbouring datasets (query 0 vs 1)."""
    return rng.normal(0.0, sigma, size=n), rng.normal(1.0, sigma, size=n)


def max_lower_bound(n_eval, delta, confidence):
    """The largest bound any audit can show with n_eval held-out trials.

    Perfect separation: k = n_eval successes under the positive dataset and
    k = 0 under the other one, i.e. closed-form Clopper--Pearson bounds.
    """
    a = (1.0 - confidence) / 2.0
    return math.log((a ** (1.0 / n_eval) - delta) / (1.0 - a ** (1.0 / n_eval)))


def repetition_seeds(root, n):
    return np.random.SeedSequence(root).spawn(n)


def test_gaussian_curve_matches_dp_accounting():
    # The test oracle itself: the bisection on the analytic Gaussian curve must
    # agree with dp-accounting's PLD accountant (ADD_OR_REMOVE_ONE reads
    # GaussianDpEvent(sigma) as sensitivity 1, which is our scalar query).
    for sigma in (0.5, 1.0, 2.0):
        acc = pld_privacy_accountant.PLDAccountant(
            dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
        )
        acc.compose(dp_accounting.GaussianDpEvent(sigma))
        for delta in (1e-5, 0.1):
            assert gaussian_epsilon(sigma, delta) == pytest.approx(
                acc.get_epsilon(delta), rel=1e-3, abs=1e-4
            )


# ---------------------------------------------------------------------------
# Clopper--Pearson bounds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 7, 50])
@pytest.mark.parametrize("alpha", [0.025, 0.2])
def test_clopper_pearson_exact_coverage(n, alpha):
    # Exact (not simulated) coverage: for every true p on a grid,
    # P_{K ~ Bin(n, p)}[lower(K) <= p] >= 1 - alpha, and likewise for upper.
    k = np.arange(n + 1)
    lo = clopper_pearson_lower(k, n, alpha)
    hi = clopper_pearson_upper(k, n, alpha)
    assert np.all(np.diff(lo) > 0) and np.all(np.diff(hi) > 0)
    assert np.all(lo < hi)
    for p in np.linspace(0.0, 1.0, 201):
        pmf = binom.pmf(k, n, p)
        assert pmf[lo <= p].sum() >= 1 - alpha - 1e-9
        assert pmf[hi >= p].sum() >= 1 - alpha - 1e-9
    # ... and not conservative by accident: at p = lower(k) the bound is attained.
    for kk in range(1, n + 1):
        p = lo[kk]
        assert binom.sf(kk - 1, n, p) == pytest.approx(alpha, rel=1e-6)


def test_clopper_pearson_edges_are_finite_and_closed_form():
    n, alpha = 1000, 0.025
    assert clopper_pearson_lower(0, n, alpha) == 0.0
    assert clopper_pearson_upper(n, n, alpha) == 1.0
    assert clopper_pearson_lower(n, n, alpha) == pytest.approx(alpha ** (1 / n), rel=1e-12)
    assert clopper_pearson_upper(0, n, alpha) == pytest.approx(1 - alpha ** (1 / n), rel=1e-9)
    # No cancellation at huge n.
    big = 10**12
    assert clopper_pearson_upper(0, big, alpha) == pytest.approx(-math.log(alpha) / big, rel=1e-6)


# ---------------------------------------------------------------------------
# Soundness: the lower bound does not exceed the true epsilon
# ---------------------------------------------------------------------------


def _bounds(sigma, delta, n, confidence, seeds):
    out = []
    for ss in seeds:
        rng = np.random.default_rng(ss)
        s0, s1 = gaussian_stats(rng, sigma, n)
        res = epsilon_lower_bound(s0, s1, delta, confidence=confidence, random_state=ss)
        out.append(res.epsilon_lower_bound)
    return np.array(out)


def test_soundness_gaussian_mechanism():
    # For several sigma and delta, R independent audits of 2000 trials each.
    # A valid 95% bound exceeds the true epsilon with probability <= 5%; we
    # allow the 99.9% binomial quantile of that count, pooled over all cells.
    # delta = 0.1 is the regime where the audit is nearly tight, so the
    # assertion has teeth (see the calibration check at confidence 0.5 below).
    n, R, confidence = 2000, 30, 0.95
    failures = total = 0
    sharp_means = []
    for i, sigma in enumerate((0.5, 1.0, 2.0)):
        for j, delta in enumerate((1e-5, 0.1)):
            true_eps = gaussian_epsilon(sigma, delta)
            b = _bounds(sigma, delta, n, confidence, repetition_seeds([11, i, j], R))
            assert np.all(b >= 0.0)
            failures += int(np.sum(b > true_eps))
            total += R
            if delta == 0.1:
                sharp_means.append(b.mean() / true_eps)
    assert failures <= binom.ppf(0.999, total, 1 - confidence)
    # Non-trivial: in the sharp regime the audit recovers much of the true epsilon.
    assert min(sharp_means) > 0.2
    assert np.mean(sharp_means) > 0.4


def test_soundness_is_calibrated_at_lower_confidence():
    # At confidence 0.5 the bound may fail up to half the time; in this nearly
    # tight setting it does fail sometimes (so an over-optimistic audit, e.g. one
    # reporting point estimates, would fail far more often than 1 - confidence)
    # but never more often than allowed.
    sigma, delta, n, R, confidence = 1.0, 0.1, 2000, 40, 0.5
    true_eps = gaussian_epsilon(sigma, delta)
    b = _bounds(sigma, delta, n, confidence, repetition_seeds(12, R))
    fails = int(np.sum(b > true_eps))
    assert 0 < fails <= binom.ppf(0.999, R, 1 - confidence)
    # A higher confidence gives a smaller bound on the same data (on average:
    # the selected threshold may differ).
    b95 = _bounds(sigma, delta, n, 0.95, repetition_seeds(12, R))
    assert b95.mean() < b.mean()
    assert np.sum(b95 > true_eps) < fails


def test_soundness_randomized_response():
    # Randomized response is exactly eps-DP at delta = 0 and a threshold test
    # between its two output laws is optimal, so the audit is sharp here.
    n, R, confidence = 2000, 40, 0.95
    failures = total = 0
    for i, eps in enumerate((0.5, 2.0)):
        p = math.exp(eps) / (1 + math.exp(eps))
        b = []
        for ss in repetition_seeds([13, i], R):
            rng = np.random.default_rng(ss)
            s0 = (rng.random(n) < 1 - p).astype(float)
            s1 = (rng.random(n) < p).astype(float)
            b.append(epsilon_lower_bound(s0, s1, 0.0, random_state=ss).epsilon_lower_bound)
        b = np.array(b)
        failures += int(np.sum(b > eps))
        total += R
        assert b.mean() > 0.6 * eps
    assert failures <= binom.ppf(0.999, total, 1 - confidence)


# ---------------------------------------------------------------------------
# Power
# ---------------------------------------------------------------------------


def _gaussian_run(noise_scale):
    """A scalar Gaussian mechanism with a test-only noise knob (the dataset is
    the query value)."""

    def run(dataset, seed):
        return float(dataset) + np.random.default_rng(seed).normal(0.0, noise_scale)

    return run


@pytest.mark.parametrize(
    ("claimed_eps", "n_trials"), [(1.0, 4000), (2.0, 2000)]
)
def test_power_detects_reduced_noise(claimed_eps, n_trials):
    delta = 1e-5
    sigma = gaussian_sigma(claimed_eps, delta)  # noise that *would* meet the claim
    assert gaussian_epsilon(sigma, delta) == pytest.approx(claimed_eps, rel=1e-6)

    weak = audit_mechanism(
        _gaussian_run(sigma / 4), 0.0, 1.0, n_trials=n_trials, delta=delta, random_state=21
    )
    assert weak.violates(claimed_eps), (claimed_eps, weak)
    # ... but the true epsilon of the weakened mechanism is not exceeded.
    assert weak.epsilon_lower_bound <= gaussian_epsilon(sigma / 4, delta)

    honest = audit_mechanism(
        _gaussian_run(sigma), 0.0, 1.0, n_trials=n_trials, delta=delta, random_state=21
    )
    assert not honest.violates(claimed_eps)
    assert honest.epsilon_lower_bound < weak.epsilon_lower_bound


def test_non_private_mechanism_gives_the_maximal_bound():
    # No noise: the outputs separate the datasets perfectly, and the bound is the
    # largest any audit with this many held-out trials can show.
    n, delta = 2000, 1e-5
    res = audit_mechanism(lambda d, seed: d, 0.0, 1.0, n_trials=n, delta=delta, random_state=3)
    assert res.epsilon_lower_bound == pytest.approx(
        max_lower_bound(res.n_evaluation, delta, res.confidence), rel=1e-9
    )
    assert res.epsilon_lower_bound > 5.0
    assert res.violates(5.0)
    assert res.tpr_lower > 0.99 and res.fpr_upper < 0.01


def test_bound_grows_with_n_trials():
    sigma, delta, R = 1.0, 1e-5, 12
    means = [
        _bounds(sigma, delta, n, 0.95, repetition_seeds([31, n], R)).mean()
        for n in (200, 1000, 5000)
    ]
    assert means[0] < means[1] < means[2]
    assert means[2] <= gaussian_epsilon(sigma, delta)


# ---------------------------------------------------------------------------
# Identical distributions, and the held-out split
# ---------------------------------------------------------------------------


def test_identical_outputs_give_zero():
    s = np.full(500, 3.0)
    res = epsilon_lower_bound(s, s.copy(), 1e-5, random_state=0)
    assert res.epsilon_lower_bound == 0.0
    assert not res.violates(0.0)
    # Identical arrays, split with several seeds (the two samples are split by
    # different permutations, so the held-out parts differ only by chance).
    x = np.random.default_rng(0).normal(size=500)
    for seed in range(5):
        assert epsilon_lower_bound(x, x, 0.0, random_state=seed).epsilon_lower_bound == 0.0


def _in_sample_bound(s0, s1, delta, confidence):
    """What one would get by evaluating every threshold/tail/direction on the
    same data that selected it (no split, no correction) -- the mistake the
    held-out split exists to avoid."""
    n = len(s0)
    a = (1 - confidence) / 2
    t = np.unique(np.concatenate([s0, s1]))
    best = 0.0
    for neg, pos in ((s0, s1), (s1, s0)):
        for upper in (True, False):
            if upper:
                kp = len(pos) - np.searchsorted(np.sort(pos), t, side="left")
                kn = len(neg) - np.searchsorted(np.sort(neg), t, side="left")
            else:
                kp = np.searchsorted(np.sort(pos), t, side="right")
                kn = np.searchsorted(np.sort(neg), t, side="right")
            num = clopper_pearson_lower(kp, n, a) - delta
            ok = num > 0
            if np.any(ok):
                best = max(best, float(np.max(np.log(num[ok]) - np.log(clopper_pearson_upper(kn[ok], n, a)))))
    return best


def test_held_out_split_controls_selection_bias():
    # Same distribution for both datasets (true epsilon 0). Choosing the test on
    # the data it is evaluated on produces false positives far more often than
    # 1 - confidence; the audit's held-out evaluation does not.
    n, R, confidence = 400, 100, 0.8
    naive = audit = 0
    for ss in repetition_seeds(41, R):
        rng = np.random.default_rng(ss)
        s0, s1 = rng.normal(size=n), rng.normal(size=n)
        naive += _in_sample_bound(s0, s1, 0.0, confidence) > 0
        audit += epsilon_lower_bound(s0, s1, 0.0, confidence=confidence, random_state=ss).epsilon_lower_bound > 0
    assert naive > binom.ppf(0.999, R, 1 - confidence)  # the setting does bite
    assert audit <= binom.ppf(0.999, R, 1 - confidence)
    assert audit < naive / 4


def test_identical_distributions_rarely_positive_at_95():
    n, R = 1000, 100
    positive = 0
    for ss in repetition_seeds(42, R):
        rng = np.random.default_rng(ss)
        res = epsilon_lower_bound(rng.normal(size=n), rng.normal(size=n), 1e-5, random_state=ss)
        positive += res.epsilon_lower_bound > 0
    assert positive <= binom.ppf(0.999, R, 0.05)


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.8])
def test_bounds_come_from_held_out_counts(fraction):
    # tpr_lower and fpr_upper must be Clopper--Pearson bounds of *integer*
    # counts out of the n_evaluation held-out trials (the selection step scores
    # candidates with rescaled, generally non-integer, counts).
    n = 301
    rng = np.random.default_rng(7)
    s0, s1 = gaussian_stats(rng, 1.0, n)
    res = epsilon_lower_bound(s0, s1, 1e-5, selection_fraction=fraction, random_state=7)
    assert res.n_evaluation == n - math.floor(fraction * n)
    a = (1 - res.confidence) / 2
    k = np.arange(res.n_evaluation + 1)
    lo = clopper_pearson_lower(k, res.n_evaluation, a)
    hi = clopper_pearson_upper(k, res.n_evaluation, a)
    assert np.min(np.abs(lo - res.tpr_lower)) < 1e-12
    assert np.min(np.abs(hi - res.fpr_upper)) < 1e-12
    # And the counts are those of the reported set on a subset of the trials.
    pos, neg = (s1, s0) if res.positive_dataset == 1 else (s0, s1)
    in_s = (lambda s: s >= res.threshold) if res.tail == "upper" else (lambda s: s <= res.threshold)
    k_pos = int(np.argmin(np.abs(lo - res.tpr_lower)))
    k_neg = int(np.argmin(np.abs(hi - res.fpr_upper)))
    assert k_pos <= in_s(pos).sum() and res.n_evaluation - k_pos <= (~in_s(pos)).sum()
    assert k_neg <= in_s(neg).sum() and res.n_evaluation - k_neg <= (~in_s(neg)).sum()
    expected = math.log((res.tpr_lower - res.delta) / res.fpr_upper) if res.tpr_lower > res.delta else 0.0
    assert res.epsilon_lower_bound == pytest.approx(max(0.0, expected), rel=1e-12)


def test_both_tails_and_directions_are_searched():
    rng = np.random.default_rng(5)
    s0, s1 = gaussian_stats(rng, 0.5, 2000)
    ref = epsilon_lower_bound(s0, s1, 1e-5, random_state=1)
    assert ref.epsilon_lower_bound > 1.0
    # Negating the statistic turns upper into lower tails; the audit must find
    # the same evidence.
    neg = epsilon_lower_bound(-s0, -s1, 1e-5, random_state=1)
    assert {ref.tail, neg.tail} == {"upper", "lower"}
    assert neg.epsilon_lower_bound == pytest.approx(ref.epsilon_lower_bound)
    # Swapping the datasets: the other direction is used.
    sw = epsilon_lower_bound(s1, s0, 1e-5, random_state=1)
    assert sw.positive_dataset != ref.positive_dataset
    assert sw.epsilon_lower_bound > 1.0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(-5, 5), min_size=MIN_TRIALS, max_size=60).flatmap(
        lambda a: st.tuples(
            st.just(a), st.lists(st.integers(-5, 5), min_size=len(a), max_size=len(a))
        )
    ),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.0, 1e-3, 0.2]),
)
def test_invariant_under_increasing_transforms(pair, seed, delta):
    # Threshold tests only see ranks: a strictly increasing map of the
    # statistic leaves the whole result unchanged (threshold mapped along).
    s0 = np.array(pair[0], dtype=float)
    s1 = np.array(pair[1], dtype=float)
    ref = epsilon_lower_bound(s0, s1, delta, random_state=seed)
    inc = epsilon_lower_bound(2 * s0 + 7, 2 * s1 + 7, delta, random_state=seed)
    assert 0.0 <= ref.epsilon_lower_bound <= max(0.0, max_lower_bound(ref.n_evaluation, delta, 0.95)) + 1e-12
    assert inc.epsilon_lower_bound == ref.epsilon_lower_bound
    assert inc.threshold == 2 * ref.threshold + 7
    assert (inc.tail, inc.positive_dataset) == (ref.tail, ref.positive_dataset)
    assert 0.0 <= ref.tpr_lower <= 1.0 and 0.0 < ref.fpr_upper <= 1.0
    assert ref.tail in ("upper", "lower")


# ---------------------------------------------------------------------------
# audit_mechanism end to end
# ---------------------------------------------------------------------------


def test_audit_mechanism_end_to_end_and_seeds():
    calls = []
    X0 = np.zeros((3, 2))
    X1 = X0.copy()
    X1[-1] = 1.0
    d0, d1 = (X0, np.zeros(3)), (X1, np.zeros(3))

    def run(dataset, seed):
        calls.append((dataset, seed))
        X, _ = dataset
        return X.sum(axis=0) + np.random.default_rng(seed).normal(0.0, 0.5, size=2)

    res = audit_mechanism(
        run, d0, d1, n_trials=300, delta=1e-5, statistic=lambda out: out[0], random_state=9
    )
    assert isinstance(res, AuditResult)
    assert res.n_trials == 300 and res.delta == 1e-5 and res.confidence == 0.95
    assert len(calls) == 600
    assert sum(d is d0 for d, _ in calls) == 300 and sum(d is d1 for d, _ in calls) == 300
    seeds = [s for _, s in calls]
    assert all(isinstance(s, int) and 0 <= s < 2**32 for s in seeds)
    assert len(set(seeds)) == 600
    # Sigma 0.5, sensitivity 1: something is found, and never above the truth.
    assert 0.0 < res.epsilon_lower_bound <= gaussian_epsilon(0.5, 1e-5)

    # Reproducible for a fixed random_state, different for another one.
    calls.clear()
    again = audit_mechanism(
        run, d0, d1, n_trials=300, delta=1e-5, statistic=lambda out: out[0], random_state=9
    )
    assert again == res
    assert [s for _, s in calls] == seeds
    calls.clear()
    other = audit_mechanism(
        run, d0, d1, n_trials=300, delta=1e-5, statistic=lambda out: out[0], random_state=10
    )
    assert other != res


def test_audit_mechanism_n_jobs_matches_sequential():
    run = _gaussian_run(0.5)
    seq = audit_mechanism(run, 0.0, 1.0, n_trials=100, delta=1e-5, random_state=17)
    par = audit_mechanism(run, 0.0, 1.0, n_trials=100, delta=1e-5, random_state=17, n_jobs=2)
    assert seq == par
    assert seq.epsilon_lower_bound > 0.0


def test_audit_mechanism_seed_sequence_and_generator_random_state():
    run = _gaussian_run(0.5)
    a = audit_mechanism(run, 0.0, 1.0, n_trials=100, delta=1e-5, random_state=np.random.SeedSequence(4))
    b = audit_mechanism(run, 0.0, 1.0, n_trials=100, delta=1e-5, random_state=4)
    assert a == b
    c = audit_mechanism(run, 0.0, 1.0, n_trials=100, delta=1e-5, random_state=np.random.default_rng(4))
    d = audit_mechanism(run, 0.0, 1.0, n_trials=100, delta=1e-5, random_state=np.random.default_rng(4))
    assert c == d


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_result_is_frozen_and_violates():
    res = AuditResult(1.5, 1e-5, 0.95, 100, 0.3, "upper", 0.9, 0.1)
    assert res.violates(1.0) and not res.violates(1.5) and not res.violates(2.0)
    with pytest.raises(AttributeError):
        res.epsilon_lower_bound = 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"delta": -0.1}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"delta": float("nan")}, "delta"),
        ({"confidence": 0.0}, "confidence"),
        ({"confidence": 1.0}, "confidence"),
        ({"selection_fraction": 0.0}, "selection_fraction"),
        ({"selection_fraction": 1.0}, "selection_fraction"),
    ],
)
def test_epsilon_lower_bound_parameter_errors(kwargs, match):
    s = np.arange(20.0)
    params = {"delta": 1e-5, **kwargs}
    with pytest.raises(ValueError, match=match):
        epsilon_lower_bound(s, s, **params)


def test_epsilon_lower_bound_array_errors():
    s = np.arange(20.0)
    with pytest.raises(ValueError, match="same length"):
        epsilon_lower_bound(s, s[:-1], 1e-5)
    bad = s.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        epsilon_lower_bound(s, bad, 1e-5)
    bad[3] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        epsilon_lower_bound(bad, s, 1e-5)
    with pytest.raises(ValueError, match="1-D"):
        epsilon_lower_bound(s.reshape(4, 5), s.reshape(4, 5), 1e-5)
    short = np.arange(MIN_TRIALS - 1.0)
    with pytest.raises(ValueError, match="at least"):
        epsilon_lower_bound(short, short, 1e-5)
    # The minimum itself is accepted.
    ok = np.arange(float(MIN_TRIALS))
    assert epsilon_lower_bound(ok, ok, 1e-5).n_trials == MIN_TRIALS


def test_audit_mechanism_errors():
    run = _gaussian_run(1.0)
    with pytest.raises(ValueError, match="n_trials"):
        audit_mechanism(run, 0.0, 1.0, n_trials=MIN_TRIALS - 1, delta=1e-5)
    with pytest.raises(TypeError, match="n_trials"):
        audit_mechanism(run, 0.0, 1.0, n_trials=100.0, delta=1e-5)
    with pytest.raises(ValueError, match="delta"):
        audit_mechanism(run, 0.0, 1.0, n_trials=100, delta=1.5)
    with pytest.raises(ValueError, match="confidence"):
        audit_mechanism(run, 0.0, 1.0, n_trials=100, delta=1e-5, confidence=1.0)
    with pytest.raises(ValueError, match="NaN"):
        audit_mechanism(run, 0.0, 1.0, n_trials=20, delta=1e-5, statistic=lambda out: float("nan"))
    with pytest.raises(ValueError, match="statistic"):
        audit_mechanism(lambda d, s: np.zeros(3), 0.0, 1.0, n_trials=20, delta=1e-5)
    with pytest.raises(TypeError, match="run"):
        audit_mechanism("not callable", 0.0, 1.0, n_trials=20, delta=1e-5)
