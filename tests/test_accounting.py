import math
import pickle
import threading

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld, rdp
from scipy.optimize import brentq
from scipy.stats import norm
from sklearn.base import clone

from skdpsco import BudgetExceededError, PrivacyAccountant, get_accountant, set_accountant
from skdpsco import accounting
from skdpsco.accounting import (
    amplification_by_iteration_rho,
    calibrate_noise,
    calibrate_zcdp_rho,
    epsilon_of,
    gaussian_event,
    zcdp_event,
)
from skdpsco.accounting._events import TAIL_BLOCK, tail_sums

REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE


def analytic_gaussian_epsilon(mu, delta):
    """Exact epsilon of a mu-GDP mechanism (Balle & Wang 2018; feldman.md §0.3 C4)."""

    def gap(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta

    return brentq(gap, 0.0, 200.0)


def cks_zcdp_epsilon(rho, delta):
    """Canonne–Kamath–Steinke Prop. 12, minimised over a continuous order (feldman.md §0.3 C3)."""
    alphas = 1.0 + np.geomspace(1e-3, 1e5, 200_000)
    eps = rho * alphas + np.log1p(-1 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1)
    return float(eps.min())


# -- dp-accounting's Gaussian sensitivity convention under REPLACE_ONE, pinned ---------------------


@pytest.mark.parametrize("z", [0.5, 1.0, 4.0])
def test_rdp_accountant_reads_gaussian_multiplier_as_sigma_over_full_replace_sensitivity(z):
    accountant = rdp.RdpAccountant(orders=[1.5, 2.0, 8.0, 32.0], neighboring_relation=REPLACE_ONE)
    accountant.compose(dp_accounting.GaussianDpEvent(z))
    orders = np.array([1.5, 2.0, 8.0, 32.0])
    # closed form eps(alpha) = alpha Delta^2 / (2 sigma^2) with Delta = 1, sigma = z
    np.testing.assert_allclose(accountant.rdp, orders / (2 * z**2), rtol=1e-12)


@pytest.mark.parametrize("z", [1.0, 4.0])
def test_pld_accountant_reads_gaussian_multiplier_with_doubled_sensitivity(z):
    accountant = pld.PLDAccountant(REPLACE_ONE, value_discretization_interval=1e-4)
    accountant.compose(dp_accounting.GaussianDpEvent(z))
    eps = accountant.get_epsilon(1e-5)
    assert eps == pytest.approx(analytic_gaussian_epsilon(2.0 / z, 1e-5), rel=1e-3)
    assert eps > 1.5 * analytic_gaussian_epsilon(1.0 / z, 1e-5)


@pytest.mark.parametrize("sigma,sensitivity", [(4.0, 1.0), (3.0, 2.0), (0.8, 0.5)])
def test_epsilon_of_gaussian_event_is_the_exact_gaussian_curve(sigma, sensitivity):
    eps = epsilon_of(gaussian_event(sigma, sensitivity), 1e-5)
    exact = analytic_gaussian_epsilon(sensitivity / sigma, 1e-5)
    assert exact <= eps <= exact * (1 + 1e-3) + 1e-6


def test_epsilon_of_matches_closed_form_rdp_for_composed_gaussian_and_zcdp():
    # sigma/Delta = 2 is (alpha/8)-RDP, i.e. 1/8-zCDP; composed with 0.1-zCDP gives 0.225-zCDP.
    event = dp_accounting.ComposedDpEvent([gaussian_event(2.0, 1.0), zcdp_event(0.1)])
    eps = epsilon_of(event, 1e-6)
    assert eps == pytest.approx(cks_zcdp_epsilon(0.225, 1e-6), rel=2e-3)
    assert eps >= cks_zcdp_epsilon(0.225, 1e-6) - 1e-9


def test_epsilon_of_rejects_bad_delta_and_unsupported_events():
    with pytest.raises(ValueError, match="delta"):
        epsilon_of(zcdp_event(0.1), 0.0)
    with pytest.raises(ValueError, match="No accountant supports"):
        epsilon_of(dp_accounting.UnsupportedDpEvent(), 1e-5)
    assert epsilon_of(dp_accounting.NonPrivateDpEvent(), 1e-5) == math.inf


# -- calibration ----------------------------------------------------------------------------------

# feldman.md §0.3 reference values: (epsilon, delta, rho_z by C3, mu by C4)
SPEC_FIXTURES = [
    (0.5, 1e-5, 0.008506, 0.14221),
    (1.0, 1e-5, 0.030557, 0.26805),
    (2.0, 1e-6, 0.088153, 0.44833),
    (8.0, 1e-5, 1.229715, 1.66603),
]


@pytest.mark.parametrize("epsilon,delta,rho_ref,mu_ref", SPEC_FIXTURES)
def test_calibrate_zcdp_rho_reproduces_spec_table(epsilon, delta, rho_ref, mu_ref):
    rho = calibrate_zcdp_rho(epsilon, delta)
    assert rho == pytest.approx(rho_ref, rel=5e-4)
    assert epsilon_of(zcdp_event(rho), delta) <= epsilon
    assert epsilon_of(zcdp_event(rho * 1.01), delta) > epsilon  # the largest, not just a valid one


@pytest.mark.parametrize("epsilon,delta,rho_ref,mu_ref", SPEC_FIXTURES)
def test_calibrate_noise_gaussian_reproduces_spec_table(epsilon, delta, rho_ref, mu_ref):
    sigma = calibrate_noise(lambda s: gaussian_event(s, 1.0), epsilon, delta)
    assert 1.0 / sigma == pytest.approx(mu_ref, rel=1e-3)
    assert epsilon_of(gaussian_event(sigma, 1.0), delta) <= epsilon
    assert epsilon_of(gaussian_event(sigma * 0.99, 1.0), delta) > epsilon  # the smallest noise


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_calibration_rejects_bad_epsilon(bad):
    with pytest.raises(ValueError, match="epsilon"):
        calibrate_zcdp_rho(bad, 1e-5)


def test_calibration_that_no_noise_level_meets_raises_unreachable_budget_with_its_target():
    # A release spending epsilon=1 whatever the noise: never private at epsilon=0.5.
    never = lambda x: dp_accounting.ComposedDpEvent([gaussian_event(x, 1.0), gaussian_event(1.0, 1.0)])  # noqa: E731
    with pytest.raises(accounting.UnreachableBudgetError, match="epsilon=0.5") as caught:
        calibrate_noise(never, 0.5, 1e-5)
    assert isinstance(caught.value, ValueError) and (caught.value.epsilon, caught.value.delta) == (0.5, 1e-5)


# -- amplification by iteration ---------------------------------------------------------------------


def test_pabi_rho_single_step_is_the_gaussian_mechanism():
    # One step, batch 1: shift 2 L eta, noise eta sigma => rho = (2L)^2 / (2 sigma^2).
    assert amplification_by_iteration_rho(1.5, [0.3], [1], 2.0) == pytest.approx(4 * 1.5**2 / (2 * 4.0))


def test_pabi_rho_constant_schedule_matches_fmtt_theorem_23_worst_index():
    # Batch 1, constant step: the last record has no amplification: rho = 2 L^2 / sigma^2 (§B2),
    # and the first record gets 2 L^2 / (sigma^2 T).
    T, L, sigma = 50, 1.0, 3.0
    rho = amplification_by_iteration_rho(L, np.full(T, 0.1), np.ones(T), sigma)
    assert rho == pytest.approx(2 * L**2 / sigma**2)
    first_only = amplification_by_iteration_rho(L, np.full(T, 0.1), np.r_[1, np.full(T - 1, 1e12)], sigma)
    assert first_only == pytest.approx(2 * L**2 / (sigma**2 * T), rel=1e-6)


def test_pabi_rho_rejects_inconsistent_schedules():
    with pytest.raises(ValueError):
        amplification_by_iteration_rho(1.0, [0.1, 0.1], [1], 1.0)
    with pytest.raises(ValueError):
        amplification_by_iteration_rho(1.0, [0.1], [0], 1.0)


@pytest.mark.parametrize("size", [1, TAIL_BLOCK - 1, TAIL_BLOCK, TAIL_BLOCK + 1, 3 * TAIL_BLOCK + 5])
def test_tail_sums_are_the_floats_of_one_reverse_cumsum(size):
    terms = np.random.default_rng(size).lognormal(0.0, 3.0, size)  # magnitudes over decades: sums round
    tails = np.empty(size)
    blocks = []
    for start, stop, block in tail_sums(size, lambda i, j: terms[i:j].copy()):
        tails[start:stop] = block
        blocks.append((start, stop))
    np.testing.assert_array_equal(tails, np.cumsum(terms[::-1])[::-1])  # bit for bit
    assert blocks[0][1] == size and blocks[-1][0] == 0 and all(b[0] == a[1] for a, b in zip(blocks[1:], blocks))


@pytest.mark.parametrize("size", [7, 2 * TAIL_BLOCK + 3])
def test_pabi_rho_is_the_float_of_its_one_array_formula(size):
    rng = np.random.default_rng(size)
    steps, sizes, stds = rng.uniform(0.01, 2.0, size), rng.integers(1, 500, size), rng.uniform(0.1, 3.0, size)
    formula = np.max((2.0 * 1.7 * steps / sizes) ** 2 / (2.0 * np.cumsum((steps * stds)[::-1] ** 2)[::-1]))
    assert amplification_by_iteration_rho(1.7, steps, sizes, stds) == formula  # bit for bit
    assert amplification_by_iteration_rho(1.7, steps, sizes.astype(float), stds) == formula


# -- PrivacyAccountant ------------------------------------------------------------------------------


def charge(accountant, event, eps=1.0, delta=1e-6, name="Est"):
    return accountant.charge(event, estimator=name, params={"epsilon": eps}, epsilon=eps, delta=delta)


def test_accountant_composes_and_reports_spent():
    accountant = PrivacyAccountant(epsilon=3.0, delta=1e-5)
    assert accountant.spent() == (0.0, 0.0)
    rho = calibrate_zcdp_rho(1.0, 1e-5)
    charge(accountant, zcdp_event(rho))
    charge(accountant, zcdp_event(rho))
    eps, delta = accountant.spent()
    assert delta == 1e-5
    # zCDP composes additively, so two fits cost less than 2 x 1.0 but more than one.
    assert eps == pytest.approx(epsilon_of(zcdp_event(2 * rho), 1e-5))
    assert 1.0 < eps < 2.0
    assert [r.estimator for r in accountant.history] == ["Est", "Est"]
    assert accountant.remaining() == pytest.approx(3.0 - eps)


def test_accountant_refuses_fit_beyond_budget_and_records_nothing():
    accountant = PrivacyAccountant(epsilon=1.0, delta=1e-5)
    rho = calibrate_zcdp_rho(1.0, 1e-5)
    charge(accountant, zcdp_event(rho))
    before = accountant.history
    with pytest.raises(BudgetExceededError, match="budget epsilon=1"):
        charge(accountant, zcdp_event(rho / 100))
    assert accountant.history == before


def test_accountant_without_budget_reports_at_summed_delta():
    accountant = PrivacyAccountant()
    charge(accountant, gaussian_event(4.0, 1.0), delta=1e-6)
    charge(accountant, gaussian_event(4.0, 1.0), delta=2e-6)
    eps, delta = accountant.spent()
    assert delta == pytest.approx(3e-6)
    assert eps == pytest.approx(epsilon_of(gaussian_event(4.0 / math.sqrt(2), 1.0), 3e-6), rel=1e-3)
    assert accountant.remaining() is None


def test_accountant_budget_needs_delta():
    with pytest.raises(ValueError, match="delta is required"):
        PrivacyAccountant(epsilon=1.0)
    with pytest.raises(ValueError, match="delta"):
        PrivacyAccountant(epsilon=1.0, delta=1.5)


def test_accountant_context_manager_sets_and_restores_default():
    outer = get_accountant()
    with PrivacyAccountant() as first:
        assert get_accountant() is first
        with PrivacyAccountant() as second:
            assert get_accountant() is second
        assert get_accountant() is first
    assert get_accountant() is outer


def test_set_accountant_returns_previous_and_type_checks():
    mine = PrivacyAccountant()
    previous = set_accountant(mine)
    try:
        assert get_accountant() is mine
    finally:
        set_accountant(previous)
    with pytest.raises(TypeError):
        set_accountant("ledger")


def test_accountant_is_shared_by_clone_and_survives_pickling():
    accountant = PrivacyAccountant(epsilon=2.0, delta=1e-5)
    assert clone(accountant) is accountant
    charge(accountant, zcdp_event(0.01))
    copy = pickle.loads(pickle.dumps(accountant))
    assert len(copy.history) == 1 and copy.spent() == accountant.spent()


def test_accountant_charges_atomically_across_threads():
    accountant = PrivacyAccountant(epsilon=1.0, delta=1e-5)
    rho = calibrate_zcdp_rho(1.0, 1e-5) / 4.0  # room for exactly four such fits
    errors = []

    def worker():
        try:
            charge(accountant, zcdp_event(rho))
        except BudgetExceededError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(accountant.history) == 4 and len(errors) == 4
    assert accountant.spent()[0] <= 1.0


# -- the closed-form curve of Gaussians composed with randomized responses -------------------------


def _response_epsilon0(noise):
    return math.log(2.0 / noise - 1.0)


def _brute_force_mixture_epsilon(precision, responses, delta):
    """Exact epsilon of one mu-GDP Gaussian (mu**2 = precision) composed with the groups of binary
    randomized responses, every combination of flips enumerated: delta(eps) = sum over the flips of
    P(flips) * (Gaussian curve at eps - summed loss), written independently of the library."""
    losses, probabilities = np.zeros(1), np.ones(1)
    for noise, count in responses.items():
        eps0 = _response_epsilon0(noise)
        p = math.exp(eps0) / (1.0 + math.exp(eps0))
        j = np.arange(count + 1)
        group_p = np.array([math.comb(count, int(k)) * p ** (count - k) * (1 - p) ** k for k in j])
        losses = (losses[:, None] + (count - 2 * j)[None, :] * eps0).ravel()
        probabilities = (probabilities[:, None] * group_p[None, :]).ravel()
    mu = math.sqrt(precision)

    def gap(eps):
        t = eps - losses
        if mu == 0:
            curve = np.maximum(1.0 - np.exp(np.minimum(t, 0.0)), 0.0)
        else:
            curve = norm.cdf(-t / mu + mu / 2) - np.exp(t) * norm.cdf(-t / mu - mu / 2)
        return float(probabilities @ curve) - delta

    return 0.0 if gap(0.0) <= 0 else brentq(gap, 0.0, 500.0, xtol=1e-13, rtol=1e-13)


def _lattice_step(responses):
    span = sum(2 * count * _response_epsilon0(noise) for noise, count in responses.items())
    return span / accounting._MIXTURE_BINS


MIXTURES = [
    (0.0, {0.6: 2, 0.9: 3}),
    (0.3, {0.6: 1}),
    (0.3, {0.2: 2, 0.95: 4, 0.7: 3}),
    (2.0, {0.5: 4, 0.8: 2}),
    (9.0, {0.05: 3, 0.99: 4}),
    (0.0, {0.9: 40, 0.7: 30, 0.5: 5}),  # 7626 sums: on the lattice
    (1.5, {0.9: 40, 0.7: 30, 0.5: 5}),
]


@pytest.mark.parametrize("precision, responses", MIXTURES)
@pytest.mark.parametrize("delta", [1e-6, 1e-3, 0.1])
def test_mixture_curve_bounds_the_exact_epsilon_from_above_within_one_step_per_group(precision, responses, delta):
    """Exact when the sums are few; on the lattice above the exact epsilon by less than one step
    per group."""
    exact = _brute_force_mixture_epsilon(precision, responses, delta)
    reported = accounting._mixture_epsilon(precision, responses, delta)
    sums = math.prod(count + 1 for count in responses.values())
    slack = 0.0 if sums <= accounting._MIXTURE_BINS else len(responses) * _lattice_step(responses)
    assert exact - 1e-9 <= reported <= exact + slack + 1e-9 * max(1.0, exact)  # + the root's rounding up


@pytest.mark.parametrize("delta", [1e-6, 1e-2])
def test_mixture_curve_is_exact_for_gaussians_alone_and_for_equal_responses(delta):
    assert accounting._mixture_epsilon(1.7, {}, delta) == pytest.approx(analytic_gaussian_epsilon(1.7**0.5, delta), rel=1e-9)
    assert accounting._mixture_epsilon(0.0, {0.4: 7}, delta) == pytest.approx(
        accounting.exact_randomized_response_epsilon(0.4, 7, delta), rel=1e-9)
    assert accounting._mixture_epsilon(0.0, {}, delta) == 0.0
    assert accounting._mixture_epsilon(math.inf, {0.4: 1}, delta) == math.inf
    assert accounting._mixture_epsilon(1.0, {0.0: 1}, delta) == math.inf


def test_mixture_curve_is_tighter_than_a_discretised_pld_of_a_long_ledger():
    """Five hundred of each of a pure-DP fit's four responses and Gaussians of mu**2 = 13 (a
    ledger's running composition): the closed form lies below dp-accounting's pessimistic PLD
    (interval 1e-3, whose rounding grows with every self-composition) and above the exact lower
    bounds of the parts."""
    responses = {0.9500416250421202: 500, 0.9209186513891466: 500, 0.9542787236667964: 500, 0.6859790746530022: 500}
    total = pld.privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=1.0 / math.sqrt(13.0), sensitivity=1.0, value_discretization_interval=1e-3,
        neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    for noise, count in responses.items():
        total = total.compose(pld.privacy_loss_distribution.from_randomized_response(
            noise, 2, value_discretization_interval=1e-3, neighboring_relation=REPLACE_ONE).self_compose(count))
    reported = accounting._mixture_epsilon(13.0, responses, 1e-2)
    assert accounting._exact_lower_bound(13.0, responses, 1e-2) < reported < float(total.get_epsilon_for_delta(1e-2))
    composed = dp_accounting.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(gaussian_event(1.0, 1.0), 13)]
        + [dp_accounting.SelfComposedDpEvent(dp_accounting.RandomizedResponseDpEvent(q, 2), k) for q, k in responses.items()])
    assert epsilon_of(composed, 1e-2) <= reported


@pytest.mark.parametrize("precision, responses", [(0.0, {0.9: 40, 0.7: 30}), (0.3, {0.9: 40, 0.7: 30})])
def test_mixture_curve_adds_back_every_probability_it_leaves_out(precision, responses, monkeypatch):
    """With up to 40 % of delta's worth of the least likely losses left out, the answer must stay an
    upper bound: what is left out is added to delta(epsilon) in full."""
    monkeypatch.setattr(accounting._conversion, "_MIXTURE_NEGLIGIBLE", 0.4)
    delta = 1e-3
    assert accounting._mixture_epsilon(precision, responses, delta) >= _brute_force_mixture_epsilon(precision, responses, delta) - 1e-9
