"""Defaults rules (skdpsco.defaults): pure functions of public quantities, minimising the bounds
they document; formulas rewritten here from the docstrings' derivations."""

import inspect
import math

import numpy as np
import pytest

import skdpsco.defaults as defaults
from skdpsco.accounting import calibrate_zcdp_rho, gaussian_noise_multiplier
from skdpsco.defaults import (
    MAX_NOISY_GD_STEPS,
    SNOWBALL_NOISE_MULTIPLIERS,
    max_steps,
    noisy_gd_risk_model,
    noisy_gd_schedule,
    snowball_noise_multiplier,
    snowball_utility_factor,
)
from skdpsco.solvers.snowball import plan_snowball

DELTA = 1e-5
L, BETA, R = math.sqrt(2.0) / (1 + math.exp(-math.sqrt(2.0) * 10)), 0.5, 10.0  # logistic, data_norm sqrt(2)


def public_arguments(function):
    return list(inspect.signature(function).parameters)


def test_rules_take_public_quantities_only():
    assert public_arguments(noisy_gd_schedule) == [
        "n_samples", "n_params", "epsilon", "delta", "lipschitz", "smoothness", "radius",
    ]
    assert public_arguments(snowball_noise_multiplier) == ["n_samples", "n_params", "rho", "schedule"]


def test_noisy_gd_schedule_is_deterministic():
    first = noisy_gd_schedule(5000, 11, 1.0, DELTA, L, BETA, R)
    noisy_gd_schedule.cache_clear()
    assert noisy_gd_schedule(5000, 11, 1.0, DELTA, L, BETA, R) == first


def risk_model(tau, n, p, z, lipschitz, beta, radius):
    """The docstring's bound, rewritten: worst-case optimisation error over curvatures h >= h_lo
    of (h/2) R0^2 exp(-2 h tau), plus the noise term p (2 L z / n)^2 tau / 4."""
    r0 = defaults.START_DISTANCE_FRACTION * radius
    h_lo = defaults.CURVATURE_FRACTION * beta / p
    h = max(h_lo, 1 / (2 * tau))
    return h / 2 * r0**2 * math.exp(-2 * h * tau) + p * (2 * lipschitz * z / n) ** 2 * tau / 4


@pytest.mark.parametrize("tau", [0.5, 3.0, 40.0, 900.0, 1e5])
def test_risk_model_matches_its_derivation(tau):
    z = gaussian_noise_multiplier(1.0, DELTA)
    assert noisy_gd_risk_model(tau, 3000, 11, z, L, BETA, R) == pytest.approx(risk_model(tau, 3000, 11, z, L, BETA, R))


@pytest.mark.parametrize("n, p, epsilon", [(400, 31, 0.3), (1000, 21, 3.0), (10_000, 21, 1.0), (100_000, 5, 3.0)])
def test_noisy_gd_schedule_minimises_the_risk_model(n, p, epsilon):
    schedule = noisy_gd_schedule(n, p, epsilon, DELTA, L, BETA, R)
    z = gaussian_noise_multiplier(epsilon, DELTA)
    assert schedule.step == pytest.approx(1 / BETA)
    assert 1 <= schedule.n_steps <= MAX_NOISY_GD_STEPS
    assert schedule.horizon == pytest.approx(schedule.step * schedule.n_steps)
    dense = [risk_model(schedule.step * T, n, p, z, L, BETA, R) for T in range(1, MAX_NOISY_GD_STEPS + 1)]
    assert risk_model(schedule.horizon, n, p, z, L, BETA, R) <= min(dense) * 1.01


def test_noisy_gd_horizon_grows_with_the_privacy_budget_and_the_sample_size():
    steps = [noisy_gd_schedule(n, 21, eps, DELTA, L, BETA, R).n_steps for n in (1000, 10_000) for eps in (0.3, 1.0, 3.0)]
    assert steps[:3] == sorted(steps[:3]) and steps[3:] == sorted(steps[3:])
    assert all(a < b for a, b in zip(steps[:3], steps[3:]))


def test_noisy_gd_schedule_refuses_unbounded_constants():
    with pytest.raises(ValueError, match="beta"):
        noisy_gd_schedule(100, 3, 1.0, DELTA, L, math.inf, R)
    with pytest.raises(ValueError, match="radius"):
        noisy_gd_schedule(100, 3, 1.0, DELTA, L, BETA, math.inf)


# -- Snowball ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("schedule, kappa, T", [("jnn", 1.0, 100), ("constant", 0.5, 50), ("jnn", 2.0, 0)])
def test_snowball_utility_factor_is_the_bound_of_fkt_thm_3_4_and_3_2(schedule, kappa, T):
    if T == 0:
        assert snowball_utility_factor(schedule, kappa, T) == math.inf
        return
    log = 1.0 if schedule == "jnn" else (2 + math.log(T)) ** 2
    assert snowball_utility_factor(schedule, kappa, T) == pytest.approx((1 + kappa**2) * log / T)


@pytest.mark.parametrize("schedule", ["jnn", "constant"])
@pytest.mark.parametrize("n, epsilon", [(30, 1.0), (400, 1.0), (10_000, 1.0), (100_000, 3.0), (300_000, 0.3)])
def test_snowball_noise_multiplier_is_the_first_argmin_over_the_public_grid(n, epsilon, schedule):
    # the rule skips the kappas that cannot win; the answer is the argmin over the whole grid
    rho = calibrate_zcdp_rho(epsilon, DELTA)
    factors = [snowball_utility_factor(schedule, k, max_steps(n, schedule, 21, k, rho)) for k in SNOWBALL_NOISE_MULTIPLIERS]
    kappa, n_steps = snowball_noise_multiplier(n, 21, rho, schedule)
    assert kappa == SNOWBALL_NOISE_MULTIPLIERS[factors.index(min(factors))]
    assert n_steps == max_steps(n, schedule, 21, kappa, rho)


def test_snowball_rule_adds_noise_at_small_n_rho_and_removes_it_at_large():
    small, _ = snowball_noise_multiplier(400, 31, calibrate_zcdp_rho(1.0, DELTA), "jnn")
    large, _ = snowball_noise_multiplier(100_000, 21, calibrate_zcdp_rho(3.0, DELTA), "jnn")
    assert small > 1.0 > large


def test_snowball_plans_with_the_rule():
    plan = plan_snowball(10_000, 21, L, BETA, R, 1.0, DELTA, "jnn")
    kappa, n_steps = snowball_noise_multiplier(10_000, 21, calibrate_zcdp_rho(1.0, DELTA), "jnn")
    assert (plan.noise_multiplier, plan.n_steps) == (kappa, n_steps)
    assert plan.noise_std == pytest.approx(kappa * L / math.sqrt(21))


# -- regression radius --------------------------------------------------------------------------


def test_regression_radius_lets_predictions_reach_twice_the_target_bound():
    assert public_arguments(defaults.regression_radius) == ["row_norm", "y_bound"]
    radius = defaults.regression_radius(math.sqrt(2.0), 3.0)
    assert math.sqrt(2.0) * radius == pytest.approx(defaults.REGRESSION_RANGE_FACTOR * 3.0)
    for bad in [(0.0, 1.0), (1.0, -1.0), (math.inf, 1.0)]:
        with pytest.raises(ValueError, match="row_norm and y_bound"):
            defaults.regression_radius(*bad)


def test_dplpregression_default_radius_follows_the_rule_and_bounds_lipschitz():
    from skdpsco import DPLpRegression, PrivacyAccountant

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)) / 4
    y = X @ [0.5, -0.3, 0.2]
    for data_norm, y_bound, fit_intercept in [(1.0, 1.0, True), (2.0, 0.5, False)]:
        model = DPLpRegression(
            data_norm=data_norm, y_bound=y_bound, fit_intercept=fit_intercept, algorithm="phased_sgd",
            random_state=0, accountant=PrivacyAccountant(), feature_scaling=None,
        ).fit(X, y)
        row_norm = data_norm * (math.sqrt(2.0) if fit_intercept else 1.0)
        assert model.radius_ == pytest.approx(defaults.REGRESSION_RANGE_FACTOR * y_bound / row_norm)
        assert model.solver_info_ is not None
        coef = np.r_[model.coef_, model.intercept_ / data_norm] if fit_intercept else model.coef_
        assert np.linalg.norm(coef) <= model.radius_ + 1e-9
    fixed = DPLpRegression(radius=0.3, random_state=0, accountant=PrivacyAccountant()).fit(X, y)
    assert fixed.radius_ == 0.3


# -- the 'auto' rule ----------------------------------------------------------------------------


def _logistic_problem(n, d, l2_penalty=0.0, epsilon=1.0):
    from skdpsco.losses import LogisticLoss
    from skdpsco.solvers import Problem

    loss = LogisticLoss()
    return Problem(n, (d,), loss, loss.constants(math.sqrt(2.0), R), R, epsilon, 1e-7, l2_penalty)


def test_auto_rule_takes_noisy_gd_within_the_compute_budget_and_one_pass_solvers_above():
    from skdpsco.solvers import AUTO_FREE_WORK, AUTO_PASSES, _affordable, _noisy_gd_work, select_algorithm

    small, large = _logistic_problem(10**4, 21), _logistic_problem(10**7, 101)
    assert _noisy_gd_work(small) <= AUTO_FREE_WORK and _affordable(small, _noisy_gd_work(small))
    assert _noisy_gd_work(large) > AUTO_PASSES * 10**7 * 101 and not _affordable(large, _noisy_gd_work(large))
    assert select_algorithm(small) == "noisy_gd"
    assert select_algorithm(_logistic_problem(10**4, 21, l2_penalty=0.1)) == "noisy_gd"
    assert select_algorithm(large) == "phased_sgd"
    assert select_algorithm(_logistic_problem(10**7, 101, l2_penalty=0.1)) == "strongly_convex"
    assert select_algorithm(small, constraint="l1") == "ftrl"
    # sparse rows keep noisy GD whatever its work; on Dask rows the passes decide
    assert select_algorithm(large, rows="sparse") == "noisy_gd"
    assert select_algorithm(large, rows="dask") == "newton"  # its eight passes against thousands


def test_auto_compute_budget_is_passes_over_the_rows_or_the_free_work():
    from skdpsco.solvers import AUTO_FREE_WORK, AUTO_PASSES, _affordable

    few = _logistic_problem(100, 11)  # n p = 1100: any work up to AUTO_FREE_WORK is affordable
    assert _affordable(few, AUTO_FREE_WORK) and not _affordable(few, AUTO_FREE_WORK * 1.001)
    many = _logistic_problem(10**7, 101)  # AUTO_PASSES n p is above AUTO_FREE_WORK
    assert _affordable(many, AUTO_PASSES * 10**7 * 101) and not _affordable(many, AUTO_PASSES * 10**7 * 101 * 1.001)


def test_auto_rule_work_is_n_p_T_of_the_plan_that_runs():
    from skdpsco.solvers import _noisy_gd_work
    from skdpsco.solvers.noisy_gd import plan_noisy_gd

    problem = _logistic_problem(5000, 11)
    assert _noisy_gd_work(problem) == 5000 * 11 * plan_noisy_gd(problem).n_steps
