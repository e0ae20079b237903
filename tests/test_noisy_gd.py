"""Full-batch noisy GD (skdpsco.solvers.noisy_gd): both privacy analyses against formulas written
here from the derivation, exact calibration, audits of each analysis on its worst case with the
power check, utility against the non-private optimum, and clear errors."""

import math

import dp_accounting
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdpsco.accounting import (
    calibrate_zcdp_rho,
    epsilon_of,
    gaussian_event,
    gaussian_noise_multiplier,
)
from skdpsco.losses import HingeLoss, LogisticLoss
from skdpsco.smoothing import smooth
from skdpsco.solvers import Problem
from skdpsco.solvers.noisy_gd import NoisyGD, composition_sensitivity, last_iterate_rho_coefficient
from skdpsco.rows import DENSE
from _audits import audit_params, check_audit

DELTA = 1e-5


def make_problem(loss, n, p, epsilon=1.0, radius=10.0, data_norm=math.sqrt(2.0), l2_penalty=0.0):
    return Problem(
        n_samples=n, coef_shape=(p,), loss=loss, constants=loss.constants(data_norm, radius), radius=radius,
        epsilon=epsilon, delta=DELTA, l2_penalty=l2_penalty,
    )


# -- the two analyses, from the derivation ------------------------------------------------------------


def test_composition_of_full_batch_steps_is_one_gaussian_of_sensitivity_sqrt_T_delta():
    # T adaptive Gaussian steps of sensitivity 2L/n and noise s: the PLD accountant composing them
    # one by one gives the epsilon of the single Gaussian the solver releases.
    L, n, T, s = 1.3, 50, 6, 0.2
    per_step = gaussian_event(s, 2 * L / n)
    composed = epsilon_of(dp_accounting.SelfComposedDpEvent(per_step, T), DELTA)
    single = epsilon_of(gaussian_event(s, composition_sensitivity(L, n, T)), DELTA)
    assert composition_sensitivity(L, n, T) == pytest.approx(math.sqrt(T) * 2 * L / n)
    assert single == pytest.approx(composed, rel=2e-3)


@pytest.mark.parametrize("n, T, eta, R, L", [(20, 500, 0.5, 1.0, 1.0), (100, 7, 2.0, 10.0, 1.4), (398, 5000, 2.0, 10.0, 1.4)])
def test_last_iterate_coefficient_is_the_minimum_over_every_burn_in(n, T, eta, R, L):
    # rho_k s^2 = (D/eta + k 2L/n)^2 / (2k), D = 2R, minimised over k = 1..T-1 by brute force.
    values = [((2 * R / eta + k * 2 * L / n) ** 2 / (2 * k), k) for k in range(1, T)]
    coefficient, k = last_iterate_rho_coefficient(L, n, T, eta, R)
    assert (coefficient, k) == pytest.approx(min(values))


def test_last_iterate_bound_stops_growing_with_the_number_of_steps():
    L, n, eta, R = 1.0, 20, 0.5, 1.0
    k_star = R * n / (eta * L)
    plateau = 4 * k_star * (2 * L / n) ** 2 / 2  # 4 k* steps' worth of composition
    for T in (int(4 * k_star), 10 * int(k_star), 1000 * int(k_star)):
        assert last_iterate_rho_coefficient(L, n, T, eta, R)[0] == pytest.approx(plateau)
    assert last_iterate_rho_coefficient(L, n, 1, eta, R) == (math.inf, 0)


# -- calibration ----------------------------------------------------------------------------------------


def epsilons_at(plan, problem, noise_std):
    L = problem.constants.lipschitz
    composition = epsilon_of(gaussian_event(noise_std, composition_sensitivity(L, plan.n_samples, plan.n_steps)), DELTA)
    coefficient, _ = last_iterate_rho_coefficient(L, plan.n_samples, plan.n_steps, plan.step, problem.radius)
    if plan.step > 2 / problem.smoothness:
        return composition, math.inf
    return composition, epsilon_of(dp_accounting.ZCDpEvent(coefficient / noise_std**2), DELTA)


@pytest.mark.parametrize(
    "n, T, radius, expected",
    [(200, 30, 10.0, "composition"), (20, 3000, 0.5, "last_iterate")],
)
def test_noise_is_the_smallest_that_either_analysis_certifies(n, T, radius, expected):
    problem = make_problem(LogisticLoss(), n, 3, radius=radius)
    plan = NoisyGD(n_steps=T).plan(problem)
    assert plan.analysis == expected
    assert epsilon_of(plan.dp_event, DELTA) <= 1.0
    assert epsilon_of(plan.dp_event, DELTA) == pytest.approx(1.0, rel=1e-3)
    assert min(epsilons_at(plan, problem, plan.noise_std)) <= 1.0
    assert min(epsilons_at(plan, problem, 0.99 * plan.noise_std)) > 1.0


def test_composition_noise_matches_the_closed_form():
    problem = make_problem(LogisticLoss(), 500, 4, epsilon=2.0)
    plan = NoisyGD(n_steps=40).plan(problem)
    L = problem.constants.lipschitz
    expected = gaussian_noise_multiplier(2.0, DELTA) * math.sqrt(40) * 2 * L / 500
    assert plan.analysis == "composition"
    assert plan.noise_std == pytest.approx(expected, rel=1e-9)


def test_last_iterate_noise_matches_the_closed_form():
    problem = make_problem(LogisticLoss(), 20, 3, radius=0.5)
    plan = NoisyGD(n_steps=3000).plan(problem)
    L, beta = problem.constants.lipschitz, problem.smoothness
    coefficient = min((2 * 0.5 / plan.step + k * 2 * L / 20) ** 2 / (2 * k) for k in range(1, 3000))
    assert plan.analysis == "last_iterate"
    assert plan.step == pytest.approx(1 / beta)
    assert plan.noise_std == pytest.approx(math.sqrt(coefficient / calibrate_zcdp_rho(1.0, DELTA)), rel=1e-6)


def test_a_step_beyond_the_contraction_limit_is_accounted_by_composition_only():
    problem = make_problem(LogisticLoss(), 20, 3, radius=0.5)
    plan = NoisyGD(n_steps=3000, step=2.5 / problem.smoothness).plan(problem)
    assert plan.analysis == "composition" and plan.burn_in == 0


def test_default_schedule_comes_from_the_defaults_rule():
    from skdpsco.defaults import noisy_gd_schedule

    problem = make_problem(LogisticLoss(), 3000, 6, epsilon=1.0)
    plan = NoisyGD().plan(problem)
    rule = noisy_gd_schedule(3000, 6, 1.0, DELTA, problem.constants.lipschitz, problem.smoothness, 10.0)
    assert (plan.n_steps, plan.step) == (rule.n_steps, rule.step)


# -- audits: each analysis on its worst case, with the power check -------------------------------------


@pytest.mark.parametrize("name", audit_params("noisy_gd_composition", "noisy_gd_last_iterate"))
def test_audit_respects_the_claim_and_catches_the_weakened_noise(name):
    # benchmarks/audits.py: two rows, the differing one's smoothed-hinge gradient constant on the
    # ball. Few small steps keep the runs inside the ball (composition: the release is the Gaussian
    # of the claim, noise / 2 is caught); twenty steps of 1 need the last-iterate analysis, whose
    # worst case pushes the runs to opposite ends of the ball (noise / 4 is caught).
    check_audit(name)


# -- utility --------------------------------------------------------------------------------------------


def augmented(X, data_norm=1.0):
    """Rows as the estimators hand them to a solver: clipped, with the intercept column."""
    rows = DENSE.clip_rows(X, data_norm)
    return np.hstack([rows, np.full((rows.shape[0], 1), data_norm)])


def test_defaults_come_close_to_the_non_private_optimum_on_synthetic_data():
    rng = np.random.default_rng(0)
    n, d = 20_000, 5
    w_star = np.array([2.0, -1.5, 1.0, 0.5, 0.0])

    def draw(m):
        X = rng.normal(size=(m, d))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        y = np.where(rng.random(m) < 1 / (1 + np.exp(-X @ w_star)), 1.0, -1.0)
        return X, y

    X, y = draw(n)
    X_test, y_test = draw(20_000)
    loss = LogisticLoss()
    problem = make_problem(loss, n, d + 1, epsilon=1.0)
    solver = NoisyGD()
    coef = solver.run(solver.plan(problem), augmented(X), y, problem, np.random.default_rng(1)).coef

    def test_loss(w):
        return loss.value(augmented(X_test) @ w, y_test).mean()

    sk = LogisticRegression(C=1e6).fit(X, y)
    optimum = test_loss(np.append(sk.coef_[0], sk.intercept_[0]))
    baseline = test_loss(np.zeros(d + 1))
    assert test_loss(coef) - optimum < 0.05 * (baseline - optimum)


def test_run_reports_public_diagnostics_and_the_gradient_count():
    problem = make_problem(LogisticLoss(), 30, 2)
    solver = NoisyGD(n_steps=5)
    plan = solver.plan(problem)
    X = augmented(np.random.default_rng(0).normal(size=(30, 1)))
    result = solver.run(plan, X, np.ones(30), problem, np.random.default_rng(0))
    assert result.n_gradients == 5 * 30
    assert result.dp_event == plan.dp_event
    assert set(result.info) == {"n_steps", "step", "noise_std", "analysis", "burn_in", "averaged_steps"}
    assert np.linalg.norm(result.coef) <= problem.radius + 1e-12


def test_tail_average_only_when_every_iterate_is_covered(weaken_noise):
    # With the noise switched off the runs are deterministic: under composition the release is the
    # mean of the last iterates (recomputed here), under the last-iterate analysis w_T itself.
    weaken_noise(math.inf)
    rng = np.random.default_rng(3)
    X = augmented(rng.normal(size=(20, 2)))
    y = np.where(rng.random(20) < 0.5, 1.0, -1.0)
    for radius, T, expected in [(10.0, 8, "composition"), (0.5, 3000, "last_iterate")]:
        problem = make_problem(LogisticLoss(), 20, 3, radius=radius)
        solver = NoisyGD(n_steps=T)
        plan = solver.plan(problem)
        assert plan.analysis == expected
        path = [np.zeros(3)]
        for _ in range(T):
            w = path[-1] - plan.step * problem.gradient()(path[-1], X, y)
            path.append(w * min(1.0, radius / np.linalg.norm(w)))
        result = solver.run(plan, X, y, problem, np.random.default_rng(0))
        if expected == "composition":
            assert result.info["averaged_steps"] == T // 2
            np.testing.assert_allclose(result.coef, np.mean(path[T - T // 2 : T], axis=0))
        else:
            assert result.info["averaged_steps"] == 0
            np.testing.assert_allclose(result.coef, path[T])


# -- errors ---------------------------------------------------------------------------------------------


def test_clear_errors():
    with pytest.raises(ValueError, match="smooth"):
        NoisyGD().plan(make_problem(HingeLoss(), 30, 2))
    with pytest.raises(ValueError, match="radius"):
        NoisyGD().plan(make_problem(LogisticLoss(), 30, 2, radius=math.inf))
    with pytest.raises(ValueError, match="n_steps"):
        NoisyGD(n_steps=0)
    with pytest.raises(ValueError, match="step"):
        NoisyGD(step=-1.0)
    with pytest.raises(ValueError, match="tail_fraction"):
        NoisyGD(tail_fraction=1.0)
    problem = make_problem(LogisticLoss(), 30, 2)
    plan = NoisyGD(n_steps=3).plan(problem)
    with pytest.raises(ValueError, match="30 rows"):
        NoisyGD(n_steps=3).run(plan, np.zeros((29, 2)), np.ones(29), problem, np.random.default_rng(0))
