"""Localization (asi_growth.md §2.1) and the epoch-based growth algorithm (§2.2): schedule and noise
formulas recomputed from the spec, errata regressions (P1), sensitivity, rates on the closed-form
instances of §5.2, privacy audits with their power check."""

import math

import numpy as np
import pytest

import skdpsco._noise as noise
import skdpsco.solvers.growth as growth
from skdpsco.accounting import epsilon_of, gaussian_noise_multiplier
from skdpsco.losses import HingeLoss, HuberLoss, LogisticLoss
from skdpsco.solvers import Problem
from skdpsco.solvers.growth import EpochGrowth, Localization, project_to_ball_intersection

from benchmarks.rates import GROWTH_TARGET as TARGET
from benchmarks.rates import ShiftedPowerLoss, growth_instance
from _audits import audit_params, check_audit

DELTA = 1e-5
RADIUS = 10.0


def logistic_problem(n, n_params=4, epsilon=1.0, delta=DELTA, l2_penalty=0.0):
    loss = LogisticLoss()
    return Problem(n, (n_params,), loss, loss.constants(1.0, RADIUS), RADIUS, epsilon, delta, l2_penalty)


# -- schedule (P13.4, §2.4) -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kappa_lower, T, m, k, b",
    [(2.0, 19, 526, 7, 75), (1.5, 37, 270, 6, 45), (1.1, 185, 54, 4, 13)],  # spec §2.4, n = 10**4
)
def test_epoch_schedule_matches_spec_table(kappa_lower, T, m, k, b):
    plan = EpochGrowth(kappa_lower=kappa_lower).plan(logistic_problem(10_000))
    assert len(plan.epochs) == T
    assert all(e.n_samples == m for e in plan.epochs[:-1]) and plan.n_samples == 10_000
    first = plan.epochs[0]
    assert first.sizes.size == k and first.sizes[0] == b


def test_epoch_plan_halves_radius_and_step_and_decays_phases_by_16():
    problem = logistic_problem(5000)
    plan = EpochGrowth().plan(problem)
    T = math.ceil(2 * math.log(5000) / (2.0 - 1.0))
    np.testing.assert_allclose(plan.radii, 2 * RADIUS * 2.0 ** -np.arange(T))  # D_i = 2^-i D_0, D_0 = 2R
    eta0 = plan.epochs[0].base_step
    for i, epoch in enumerate(plan.epochs):
        assert epoch.base_step == pytest.approx(eta0 * 2.0**-i)
        np.testing.assert_allclose(epoch.steps, epoch.base_step * 16.0 ** -np.arange(1, epoch.sizes.size + 1))


def test_eta0_follows_theorem_3_with_the_calibrated_noise_norm():
    n, p, eps = 5000, 4, 1.0
    problem = logistic_problem(n, p, eps)
    plan = EpochGrowth(step_scale=1.0).plan(problem)
    T = len(plan.epochs)
    m = n // T
    beta = 1.0 / (n + p) / T
    nu = math.sqrt(p) * gaussian_noise_multiplier(eps, DELTA)
    L = problem.constants.lipschitz
    expected = (2 * RADIUS) / (2 * L) * min(1 / math.sqrt(m * math.log(m) * math.log(1 / beta)), 1 / (nu * math.log(1 / beta)))
    assert plan.epochs[0].base_step == pytest.approx(expected)
    assert EpochGrowth(step_scale=7.0).plan(problem).epochs[0].base_step == pytest.approx(7 * expected)


def test_localization_step_follows_proposition_2():
    n, p = 3000, 4
    problem = logistic_problem(n, p)
    plan = Localization(step_scale=1.0).plan(problem)
    beta = 1.0 / (n + p)
    nu = math.sqrt(p) * gaussian_noise_multiplier(1.0, DELTA)
    expected = 2 * RADIUS / problem.constants.lipschitz * min(1 / math.sqrt(n * math.log(1 / beta)), 1 / (nu * math.log(1 / beta)))
    assert plan.base_step == pytest.approx(expected)
    assert plan.sizes.size == math.ceil(math.log(n)) and plan.sizes.sum() == n


@pytest.mark.parametrize("delta", [DELTA, 0.0])
def test_default_step_scale_is_the_public_snr_rule(delta):
    # P3: step_scale = min(1000, max(1, c b_1 / nu)), c = 1/30 (localization) and 1 (epoch_growth).
    for n in [300, 20_000, 2_000_000]:
        problem = logistic_problem(n, 3, delta=delta)
        loc = Localization().plan(problem)
        expected = min(1000.0, max(1.0, loc.sizes[0] / (30.0 * loc.noise.norm_factor)))
        assert loc.step_scale == pytest.approx(expected)
        assert loc.base_step == pytest.approx(expected * Localization(step_scale=1.0).plan(problem).base_step)
        first = EpochGrowth().plan(problem).epochs[0]
        expected = min(1000.0, max(1.0, first.sizes[0] / first.noise.norm_factor))
        assert first.step_scale == pytest.approx(expected)
        assert first.base_step == pytest.approx(expected * EpochGrowth(step_scale=1.0).plan(problem).epochs[0].base_step)
    assert EpochGrowth().plan(logistic_problem(200_000, 3)).epochs[0].step_scale > 30  # moves at practical n


@pytest.mark.parametrize("solver_class", [Localization, EpochGrowth])
@pytest.mark.parametrize("delta", [DELTA, 0.0])
def test_step_scale_costs_no_privacy(solver_class, delta):
    # P3 / §2.1 "Privacy": the event does not depend on the step, and the noise scales with the
    # sensitivity, which scales with the step.
    problem = logistic_problem(5000, 3, delta=delta)
    plans = [solver_class(step_scale=s).plan(problem) for s in (1.0, 1000.0)]
    phases = [p.epochs if solver_class is EpochGrowth else (p,) for p in plans]
    assert plans[0].dp_event == plans[1].dp_event
    for small, large in zip(*phases, strict=True):
        np.testing.assert_allclose(large.sensitivities, 1000.0 * small.sensitivities)
        np.testing.assert_allclose(large.noise_scales / large.sensitivities, small.noise_scales / small.sensitivities)
        np.testing.assert_allclose(large.sensitivities, 2 * problem.constants.lipschitz * large.steps)


# -- noise (P13.1, P2) and errata (P1) ------------------------------------------------------------------


def test_gaussian_noise_is_calibrated_exactly_to_the_certified_sensitivity():
    # P1.5 / P2: not the paper's 4 L eta sqrt(log(1/delta)) / eps, but Delta = L eta + 2 tau, exact PLD.
    problem = logistic_problem(2000)
    plan = Localization().plan(problem)
    L = problem.constants.lipschitz
    np.testing.assert_allclose(plan.tolerances, L * plan.steps / 2)
    np.testing.assert_allclose(plan.sensitivities, L * plan.steps + 2 * plan.tolerances)
    np.testing.assert_allclose(plan.noise_scales, plan.sensitivities * gaussian_noise_multiplier(1.0, DELTA))
    assert 0.999 < epsilon_of(plan.dp_event, DELTA) <= 1.0


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_laplace_scale_uses_the_full_epsilon_in_every_phase(epsilon):
    # P1.1: the paper's undefined eps_i is eps; l1-sensitivity sqrt(p) Delta_j, pure DP at delta = 0.
    p = 4
    plan = EpochGrowth().plan(logistic_problem(3000, p, epsilon, delta=0.0))
    for epoch in plan.epochs:
        assert epoch.noise.kind == "laplace"
        np.testing.assert_allclose(epoch.noise_scales, math.sqrt(p) * epoch.sensitivities / epsilon)
    assert epsilon_of(plan.dp_event, 1e-5) <= epsilon


def test_noise_is_isotropic_in_the_parameter_shape(monkeypatch):
    # P1.2: N(0, sigma^2 I_d), one independent coordinate per parameter.
    shapes = []
    draw = noise.gaussian_noise
    monkeypatch.setattr(noise, "gaussian_noise", lambda rng, std, shape: shapes.append(shape) or draw(rng, std, shape))
    problem = logistic_problem(500, 3)
    X = np.random.default_rng(0).normal(size=(500, 3)) / 3
    y = np.sign(X[:, 0] + 0.1)
    EpochGrowth().run(EpochGrowth().plan(problem), X, y, problem, np.random.default_rng(0))
    assert shapes and all(s == (3,) for s in shapes)


def test_each_row_is_read_once_in_consecutive_epoch_chunks(monkeypatch):
    # P1.3 / P6 / P13.3: epoch i reads rows i m .. (i + 1) m - 1 of the order, each row exactly once.
    n = 400
    seen = []
    original = growth.margin_gradient

    def recording(loss, l2_penalty=0.0):
        gradient = original(loss, l2_penalty)

        def g(w, X, y):
            seen.append(tuple(np.round(X[:, 1] * 10 * n).astype(int)))
            return gradient(w, X, y)

        return g

    monkeypatch.setattr(growth, "margin_gradient", recording)
    X = np.column_stack([np.full(n, 0.05), np.arange(n) / (10 * n)])
    y = np.ones(n)
    problem = logistic_problem(n, 2)
    solver = EpochGrowth(n_epochs=3)
    plan = solver.plan(problem)
    solver.run(plan, X, y, problem, np.random.default_rng(0), order=np.arange(n))
    blocks = list(dict.fromkeys(seen))  # each phase evaluates its block many times
    rows = [r for block in blocks for r in block]
    active = sum(int(e.active.sum()) for e in plan.epochs)
    assert len(blocks) == active and len(rows) == len(set(rows))
    assert rows == sorted(rows)  # consecutive ranges in epoch / phase order
    assert plan.epochs[0].n_samples == n // 3 and set(blocks[0]) <= set(range(n // 3))


def test_epoch_outputs_stay_in_the_radius_d_i_ball(monkeypatch):
    # P1.4 / P5: X_i = X ∩ B(x_i, D_i), D_i a radius; every released point is projected onto it.
    calls = []
    original = growth.project_to_ball_intersection

    def recording(w, radius, centre, centre_radius):
        out = original(w, radius, centre, centre_radius)
        calls.append((np.linalg.norm(out - centre), centre_radius, np.linalg.norm(out)))
        return out

    monkeypatch.setattr(growth, "project_to_ball_intersection", recording)
    problem = logistic_problem(3000, 3, epsilon=0.2)
    X = np.random.default_rng(1).normal(size=(3000, 3)) / 2
    y = np.sign(X @ np.ones(3))
    solver = EpochGrowth(step_scale=3000.0)  # large noise: the projections bind
    solver.run(solver.plan(problem), X, y, problem, np.random.default_rng(1))
    distances, radii, norms = map(np.array, zip(*calls))
    assert np.all(distances <= radii * (1 + 1e-9)) and np.all(norms <= RADIUS * (1 + 1e-9))
    assert np.any(distances >= radii * (1 - 1e-9))


@pytest.mark.parametrize("seed", range(5))
def test_two_ball_projection_is_the_nearest_point_of_the_intersection(seed):
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=3)
    centre *= rng.uniform(0.1, 1.0) / np.linalg.norm(centre)  # x_i lies in X (the algorithm's case)
    w = rng.normal(size=3) * 3
    point = project_to_ball_intersection(w, 1.0, centre, 0.6)
    assert np.linalg.norm(point) <= 1 + 1e-9 and np.linalg.norm(point - centre) <= 0.6 + 1e-9
    candidates = rng.normal(size=(20_000, 3))
    candidates = candidates[(np.linalg.norm(candidates, axis=1) <= 1) & (np.linalg.norm(candidates - centre, axis=1) <= 0.6)]
    assert np.linalg.norm(w - point) <= np.min(np.linalg.norm(candidates - w, axis=1)) + 1e-9


# -- sensitivity (P13.2) ----------------------------------------------------------------------------------


def worst_case_neighbours(n):
    """The differing row, first in the order, at the row bound with Huber labels on opposite sides
    beyond the threshold: at the centre its gradients are +-L x; every other row has x = 0."""
    X = np.zeros((n, 1))
    X[0, 0] = 1.0
    y0 = np.zeros(n)
    y0[0] = 2.0
    y1 = y0.copy()
    y1[0] = -2.0
    return (X, y0), (X, y1)


def huber_problem(n, epsilon=1.0, delta=DELTA):
    loss = HuberLoss(epsilon=1.0)
    problem = Problem(n, (1,), loss, loss.constants(1.0, RADIUS, 2.0), RADIUS, epsilon, delta, 0.0)
    assert problem.constants.lipschitz == 1.0
    return problem


def test_released_phase_moves_by_at_most_the_certified_sensitivity(monkeypatch):
    monkeypatch.setattr(noise, "gaussian_noise", lambda rng, std, shape: np.zeros(shape))
    problem = huber_problem(2)  # one phase of two rows
    solver = Localization()
    plan = solver.plan(problem)
    assert plan.sizes.tolist() == [2]
    (X, y0), (_, y1) = worst_case_neighbours(2)
    out = [solver.run(plan, X, y, problem, np.random.default_rng(0), order=np.arange(2)).coef[0] for y in (y0, y1)]
    gap = abs(out[0] - out[1])
    assert plan.steps[0] * 0.99 <= gap <= plan.sensitivities[0]  # exact argmin moves by L eta_1 <= Delta_1


# -- utility ----------------------------------------------------------------------------------------------


def test_localization_utility_against_the_non_private_optimum():
    rng = np.random.default_rng(3)
    n, p, lam = 20_000, 3, 0.1
    X = rng.normal(size=(n, p))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ np.array([2.0, -1.0, 0.5]))), 1.0, -1.0)
    problem = logistic_problem(n, p, epsilon=2.0, l2_penalty=lam)

    def objective(w):
        return np.mean(np.logaddexp(0, -y * (X @ w))) + lam / 2 * w @ w

    from scipy.optimize import minimize

    best = minimize(objective, np.zeros(p)).fun
    start = objective(np.zeros(p)) - best
    solver = Localization(step_scale=10.0)
    excess = np.mean([objective(solver.run(solver.plan(problem), X, y, problem, np.random.default_rng(s)).coef) - best for s in range(5)])
    print(f"\nlocalization excess {excess:.5f} (start {start:.5f})")
    assert excess < 0.2 * start


# -- rates on closed-form kappa-growth instances (P13.5) -------------------------------------------------


def instance_excess(kappa, n, seeds, step_scale=None, epsilon=1.0):
    """Median (Thm 2/3 are high-probability bounds) excess risk of ``'epoch_growth'`` on the
    kappa-power regression instance of ``benchmarks/rates.py`` (:func:`growth_instance`: point-mass
    data, ``f(w) = |w - b|^kappa / kappa``, exactly ``(1, kappa)``-growth around ``w* = b``).
    kappa is never passed: ``kappa_lower = 2`` (default)."""
    problem, X, y, excess = growth_instance(kappa, n, epsilon, DELTA)
    solver = EpochGrowth(step_scale=step_scale)
    plan = solver.plan(problem)
    return float(np.median([excess(solver.run(plan, X, y, problem, np.random.default_rng(s)).coef[0]) for s in seeds]))


@pytest.mark.parametrize("kappa", [2.0, 3.0, 4.0])
def test_rate_instance_has_growth_exactly_kappa_near_its_minimiser(kappa):
    # The former §5.2(a) instance sigma |w|^kappa / kappa + w / 2 (sigma = 2^(kappa - 2)) has its
    # minimiser at w* = -(1 / (2 sigma))^(1 / (kappa - 1)) != 0, where f''(w*) > 0: 2-growth locally.
    loss = ShiftedPowerLoss(kappa)
    for r in [1e-4, 1e-2, 0.3]:
        for w in [TARGET - r, TARGET + r]:
            assert loss.value(w, TARGET) - loss.value(TARGET, TARGET) == pytest.approx(r**kappa / kappa, rel=1e-9)
    sigma = 2.0 ** (kappa - 2)
    w_old = -((0.5 / sigma) ** (1 / (kappa - 1)))
    curvature_old = sigma * (kappa - 1) * abs(w_old) ** (kappa - 2)
    assert curvature_old > 0.5  # locally quadratic: the old instance measured the kappa = 2 rate


@pytest.mark.parametrize("kappa", [2.0, 3.0])
def test_epoch_growth_rate_is_faster_than_the_general_convex_rate(kappa):
    ns = [32000, 128000]
    excess = [instance_excess(kappa, n, range(20)) for n in ns]
    slope = float(np.diff(np.log(excess))[0] / np.diff(np.log(ns))[0])
    print(f"\nkappa={kappa}: excess {excess}, slope {slope:.2f}, theory {-kappa / (kappa - 1):.2f}")
    assert slope < -1.0  # faster than the kappa = inf private rate d / (n eps), slope -1


@pytest.mark.slow
@pytest.mark.parametrize("kappa", [2.0, 3.0, 4.0])
def test_epoch_growth_rate_sweep(kappa):
    # Measured (30 seeds, default step_scale, benchmarks/rates.py growth_rates): fitted slopes over
    # n = 3.2e4 .. 2e6 of -2.30 / -1.91 / -1.19 for kappa = 2 / 3 / 4, theory -2 / -1.5 / -1.33
    # (steeper for kappa = 2, 3: the default step grows with the public SNR b_1 / nu, i.e. with n).
    ns = [32000, 128000, 512000, 2048000]
    excess = [instance_excess(kappa, n, range(30)) for n in ns]
    slope = float(np.polyfit(np.log(ns), np.log(excess), 1)[0])
    theory = -kappa / (kappa - 1)
    print(f"\nkappa={kappa}: excess {np.round(excess, 8)}, fitted slope {slope:.2f}, theory {theory:.2f}")
    assert slope < theory + 0.3


# -- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kappa_lower", [1.0, 0.5, math.inf])
def test_kappa_lower_must_exceed_one(kappa_lower):
    with pytest.raises(ValueError, match="kappa_lower"):
        EpochGrowth(kappa_lower=kappa_lower)


def test_too_few_rows_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="more rows"):
        EpochGrowth(n_epochs=50).plan(logistic_problem(20))


@pytest.mark.parametrize(
    "kwargs, match",
    [({"step_scale": 0.0}, "step_scale"), ({"noise": "cauchy"}, "noise"), ({"beta": 1.5}, "beta")],
)
def test_bad_options_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Localization(**kwargs)


def test_gaussian_noise_needs_delta():
    with pytest.raises(ValueError, match="delta > 0"):
        Localization(noise="gaussian").plan(logistic_problem(100, delta=0.0))


def test_non_smooth_losses_are_refused():
    loss = HingeLoss()
    problem = Problem(100, (2,), loss, loss.constants(1.0, RADIUS), RADIUS, 1.0, DELTA, 0.0)
    with pytest.raises(ValueError, match="smooth"):
        EpochGrowth().plan(problem)


# -- privacy audits -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", audit_params("localization", "localization_laplace", "epoch_growth", "epoch_growth_laplace")
)
def test_audit_respects_the_claim_and_catches_the_weakened_noise(name):
    # benchmarks/audits.py: the differing row first, Huber labels +-2 at the row bound. The exact
    # minimiser moves by L eta_1, half the charged Delta_1 = 2 L eta_1 (tau is slack), so noise / 2
    # stays within the claim against every pair: the audits catch noise / 4 (localization) and
    # noise / 5 (epoch_growth, whose later epochs add noise), Gaussian and Laplace (pure DP).
    check_audit(name)
