import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skdpsco.accounting import amplification_by_iteration_rho, calibrate_zcdp_rho, epsilon_of
from skdpsco.solvers._core import project_to_ball, projected_noisy_sgd
from skdpsco.defaults import (
    _rows_needed_bounds,
    jnn_step_multipliers,
    max_steps,
    privacy_batch_sizes,
    snowball_noise_multiplier,
    snowball_rows_needed,
    snowball_utility_factor,
    step_multipliers,
)
from skdpsco.solvers.snowball import (
    NOISE_MULTIPLIERS,
    SCHEDULES,
    min_samples,
    plan_snowball,
)
from skdpsco.rows import DENSE, iter_batches, layout_of

LOGISTIC = dict(lipschitz=math.sqrt(2), smoothness=0.5, radius=10.0)


def test_jnn_multipliers_follow_spec_examples():
    # feldman.md §A2: T = 8 phases end at 4, 6, 7, 8 with multipliers 1, 1/2, 1/4, 1/8; T = 5: 0,2,3,4,5.
    np.testing.assert_array_equal(jnn_step_multipliers(8), [1, 1, 1, 1, 0.5, 0.5, 0.25, 0.125])
    np.testing.assert_array_equal(jnn_step_multipliers(5), [1, 1, 0.5, 0.25, 0.125])
    np.testing.assert_array_equal(jnn_step_multipliers(1), [1])


@pytest.mark.parametrize("T", [1, 2, 3, 7, 64, 1000, 12345])
def test_jnn_multipliers_satisfy_the_inequality_used_in_fkt_privacy_proof(T):
    # feldman.md §A2: eta_t >= c (T - t) / T^{3/2}, i.e. m_t >= (T - t) / T for t = 1..T.
    m = jnn_step_multipliers(T)
    t = np.arange(1, T + 1)
    assert np.all(m >= (T - t) / T - 1e-15)
    assert np.all(np.diff(m) <= 0)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("T", [1, 5, 50, 500])
def test_privacy_batch_sizes_are_the_smallest_meeting_the_target(schedule, T):
    rho = 0.03
    m = jnn_step_multipliers(T) if schedule == "jnn" else np.ones(T)
    p, kappa, L = 31, 1.4, 2.5
    B = privacy_batch_sizes(m, p, kappa, rho)
    sigma = kappa * L / math.sqrt(p)
    assert amplification_by_iteration_rho(L, 0.1 * m, B, sigma) <= rho
    for t in range(T):  # one row fewer in any batch breaks that batch's bound
        if B[t] > 1:
            smaller = B.copy()
            smaller[t] -= 1
            assert amplification_by_iteration_rho(L, 0.1 * m, smaller, sigma) > rho


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_privacy_batch_sizes_are_the_floats_of_their_one_array_formula(schedule):
    # computed by blocks of the tail sums (skdpsco.accounting._events.tail_sums): the same ceilings
    m = step_multipliers(schedule, 150_001)
    p, kappa, rho = 101, 0.7, 0.013
    formula = np.ceil(2.0 * math.sqrt(p) * m / (kappa * math.sqrt(2.0 * rho) * np.sqrt(np.cumsum(m[::-1] ** 2)[::-1]))
                      * (1.0 + 1e-12)).astype(np.int64)
    np.testing.assert_array_equal(privacy_batch_sizes(m, p, kappa, rho), formula)


def test_constant_schedule_batches_match_fkt_theorem_3_5_closed_form():
    # FKT Thm 3.5 with FKT rho = sqrt(2 rho_z): B_t = ceil(2 sqrt(d) / (rho sqrt(T - t + 1))).
    rho_z, d, T = 0.02, 30, 40
    B = privacy_batch_sizes(np.ones(T), d, 1.0, rho_z)
    closed = 2 * math.sqrt(d) / (math.sqrt(2 * rho_z) * np.sqrt(T - np.arange(T)))
    # the ceiling, except that an exact integer may be rounded up once more (pitfall D7 safety)
    assert np.all(B >= closed - 1e-9) and np.all(B < closed + 1 + 1e-9)
    assert np.sum(B > np.ceil(closed - 1e-9)) <= np.sum(np.isclose(closed, np.round(closed)))


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 300_000), p=st.integers(1, 400), kappa=st.sampled_from(NOISE_MULTIPLIERS),
    rho=st.floats(1e-4, 10.0), schedule=st.sampled_from(SCHEDULES),
)
def test_max_steps_is_the_largest_feasible(n, p, kappa, rho, schedule):
    T = max_steps(n, schedule, p, kappa, rho)
    need = lambda k: privacy_batch_sizes(  # noqa: E731
        jnn_step_multipliers(k) if schedule == "jnn" else np.ones(k), p, kappa, rho
    ).sum()
    assert 0 <= T <= n
    if T > 0:
        assert need(T) <= n
    assert T == n or need(T + 1) > n


@settings(max_examples=150, deadline=None)
@given(
    T=st.integers(1, 200_000), p=st.integers(1, 2000), kappa=st.sampled_from(NOISE_MULTIPLIERS),
    rho=st.floats(1e-5, 20.0), schedule=st.sampled_from(SCHEDULES),
)
def test_rows_needed_bounds_contain_the_exact_sum(T, p, kappa, rho, schedule):
    low, high = _rows_needed_bounds(schedule, T, p, kappa, rho)
    assert low <= snowball_rows_needed(schedule, T, p, kappa, rho) <= high


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("T", [100, 4096, 10_000, 65_537])
@pytest.mark.parametrize("p, kappa, rho", [(4, 1.0, 2.0), (16, 1.0, 2.0), (100, 1.0, 0.5), (1, 4.0, 0.125)])
def test_rows_needed_bounds_hold_where_batch_sizes_are_integers_before_the_safety_factor(schedule, T, p, kappa, rho):
    # 2 sqrt(p) / (kappa sqrt(2 rho)) is an integer: batches within rounding of an integer, where
    # the ends may part (the search then sums exactly); the exact sum stays between them
    low, high = _rows_needed_bounds(schedule, T, p, kappa, rho)
    assert low <= snowball_rows_needed(schedule, T, p, kappa, rho) <= high


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_rows_needed_bounds_meet_at_generic_sizes(schedule):
    rho = calibrate_zcdp_rho(1.0, 1e-6)
    for T in (1000, 123_457, 800_000):
        low, high = _rows_needed_bounds(schedule, T, 101, 0.7, rho)
        assert low == high == snowball_rows_needed(schedule, T, 101, 0.7, rho)


def _bisected_max_steps(n, schedule, p, kappa, rho):
    """The reference: bisection on the exact rows needed, over the bracket [1, n + 1]."""
    def rows(T):
        return int(privacy_batch_sizes(step_multipliers(schedule, T), p, kappa, rho).sum())

    if rows(1) > n:
        return 0
    feasible, infeasible = 1, n + 1
    while infeasible - feasible > 1:
        mid = (feasible + infeasible) // 2
        feasible, infeasible = (mid, infeasible) if rows(mid) <= n else (feasible, mid)
    return feasible


_SEARCH_GRID = [
    (n, schedule, p, kappa, epsilon)
    for n in (100, 2_000, 50_000)
    for schedule in SCHEDULES
    for p, epsilon in ((3, 3.0), (101, 0.3), (101, 1.0))
    for kappa in NOISE_MULTIPLIERS
] + [
    (n, schedule, 101, kappa, epsilon)
    for n, epsilons in ((10**6, (0.3, 1.0)), (3 * 10**6, (1.0,)))
    for schedule in SCHEDULES
    for kappa in (NOISE_MULTIPLIERS[0], NOISE_MULTIPLIERS[-1])
    for epsilon in epsilons
]


@pytest.mark.parametrize("n, schedule, p, kappa, epsilon", _SEARCH_GRID)
def test_max_steps_equals_a_bisection_over_the_exact_rows(n, schedule, p, kappa, epsilon):
    rho = calibrate_zcdp_rho(epsilon, 1e-6)
    assert max_steps(n, schedule, p, kappa, rho) == _bisected_max_steps(n, schedule, p, kappa, rho)


@pytest.mark.parametrize("n", [100, 2_000, 50_000])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("p, epsilon", [(3, 3.0), (101, 0.3), (101, 1.0)])
def test_snowball_rule_is_the_argmin_over_bisected_steps(n, schedule, p, epsilon):
    rho = calibrate_zcdp_rho(epsilon, 1e-6)
    steps = [_bisected_max_steps(n, schedule, p, kappa, rho) for kappa in NOISE_MULTIPLIERS]
    factors = [snowball_utility_factor(schedule, kappa, T) for kappa, T in zip(NOISE_MULTIPLIERS, steps)]
    best = factors.index(min(factors))
    assert snowball_noise_multiplier(n, p, rho, schedule) == (NOISE_MULTIPLIERS[best], steps[best])


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("n", [10_000, 200_000])
def test_max_steps_equals_a_bisection_where_batch_sizes_are_near_integers(schedule, n):
    low, high = _rows_needed_bounds("constant", 10_000, 4, 1.0, 2.0)
    assert low < high  # batches of exactly 2 (1 + 1e-12): the search sums these exactly
    assert max_steps(n, schedule, 4, 1.0, 2.0) == _bisected_max_steps(n, schedule, 4, 1.0, 2.0)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("n,p,epsilon", [(398, 31, 0.5), (398, 31, 5.0), (5000, 11, 1.0), (20000, 101, 2.0)])
def test_plan_uses_every_row_once_and_meets_the_target(schedule, n, p, epsilon):
    delta = 1e-5
    plan = plan_snowball(n, p, epsilon=epsilon, delta=delta, schedule=schedule, **LOGISTIC)
    assert plan.batch_sizes.sum() == n and plan.batch_sizes.min() >= 1
    assert plan.noise_multiplier in NOISE_MULTIPLIERS
    # the reported event is recomputed from the schedule actually run
    rho = amplification_by_iteration_rho(LOGISTIC["lipschitz"], plan.steps, plan.batch_sizes, plan.noise_std)
    assert rho == pytest.approx(plan.rho) and rho <= plan.rho_target
    assert epsilon_of(plan.dp_event, delta) <= epsilon
    # contraction: every step at most 2 / beta
    assert plan.steps.max() <= 2.0 / LOGISTIC["smoothness"] * (1 + 1e-12)


def test_plan_scales_steps_down_to_keep_updates_contractive():
    loose = plan_snowball(398, 31, math.sqrt(2), 0.5, 10.0, 0.3, 1e-5, "jnn")
    assert loose.steps.max() == pytest.approx(2.0 / 0.5)  # the theory step (> 4) was capped
    stiff = plan_snowball(398, 31, math.sqrt(2), 50.0, 10.0, 0.3, 1e-5, "jnn")
    assert stiff.steps.max() == pytest.approx(2.0 / 50.0)
    np.testing.assert_array_equal(loose.batch_sizes, stiff.batch_sizes)  # privacy unchanged


def test_plan_rejects_too_few_rows_with_the_minimum():
    need = min_samples(31, 0.1, 1e-6)
    with pytest.raises(ValueError, match=rf"at least {need} rows.*n_samples={need - 1}"):
        plan_snowball(need - 1, 31, epsilon=0.1, delta=1e-6, schedule="jnn", **LOGISTIC)
    assert plan_snowball(need, 31, epsilon=0.1, delta=1e-6, schedule="constant", **LOGISTIC).n_steps >= 1



def test_more_privacy_budget_gives_more_steps():
    steps = [plan_snowball(5000, 21, epsilon=e, delta=1e-6, schedule="jnn", **LOGISTIC).n_steps for e in (0.3, 1, 3)]
    assert steps[0] < steps[1] < steps[2]


# -- the shared core ---------------------------------------------------------------------------------


def test_clip_rows_enforces_the_bound_and_keeps_short_rows():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    clipped = DENSE.clip_rows(X, 1.0)
    np.testing.assert_allclose(clipped, [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]])


def test_project_to_ball_is_the_euclidean_projection():
    w = np.array([[3.0, 0.0], [0.0, 4.0]])
    np.testing.assert_allclose(project_to_ball(w, 1.0), w / 5.0)
    np.testing.assert_array_equal(project_to_ball(w, 10.0), w)
    np.testing.assert_array_equal(project_to_ball(w, None), w)


def test_iter_batches_reads_disjoint_consecutive_blocks_in_order():
    X = np.arange(10.0)[:, None]
    y = np.arange(10)
    order = np.array([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
    blocks = [b for _, b in iter_batches(X, y, order, [2, 3, 5])]
    assert [b.tolist() for b in blocks] == [[9, 8], [7, 6, 5], [4, 3, 2, 1, 0]]
    assert not any(np.shares_memory(b, y) for b in blocks)  # gathered: copies
    in_sequence = list(iter_batches(X, y, np.arange(10), [2, 3, 5]))
    assert [b.tolist() for _, b in in_sequence] == [[0, 1], [2, 3, 4], [5, 6, 7, 8, 9]]
    assert all(np.shares_memory(a, X) and np.shares_memory(b, y) for a, b in in_sequence)  # views
    run = [b.tolist() for _, b in iter_batches(X, y, np.arange(3, 8), [2, 3])]  # a run of rows: views too
    assert run == [[3, 4], [5, 6, 7]]


def test_projected_noisy_sgd_without_noise_is_projected_gradient_descent():
    # f(w) = ||w - a||^2 / 2 per row: the gradient is w - a; steps of 1 jump to a then project.
    a = np.array([3.0, 4.0])
    rows = np.tile(a, (4, 1))
    gradient = lambda w, X, y: w - X.mean(axis=0)  # noqa: E731
    w = projected_noisy_sgd(
        gradient, iter_batches(rows, np.zeros(4), np.arange(4), [2, 2]), np.array([1.0, 1.0]),
        np.zeros(2), np.zeros(2), 1.0, np.random.default_rng(0)
    )
    np.testing.assert_allclose(w, a / 5.0)


def test_projected_noisy_sgd_refuses_a_schedule_that_does_not_match_the_batches():
    with pytest.raises(ValueError):
        projected_noisy_sgd(
            lambda w, X, y: w, iter_batches(np.ones((3, 1)), np.ones(3), np.arange(3), [1, 1, 1]),
            np.ones(2), np.zeros(2), np.zeros(1), None, np.random.default_rng(0)
        )


@pytest.mark.parametrize("smoothness", [0.0, math.inf])
def test_plan_rejects_non_smooth_or_unbounded_curvature(smoothness):
    with pytest.raises(ValueError, match="smooth"):
        plan_snowball(1000, 3, 1.0, smoothness, 1.0, 1.0, 1e-5, "jnn")


def test_projected_noisy_sgd_can_average_the_points_where_gradients_were_taken():
    # Gradient w - 1 with step 0.5: iterates 0, 0.5, 0.75 (gradients taken there), last 0.875.
    gradient = lambda w, X, y: w - 1.0  # noqa: E731
    batches = iter_batches(np.zeros((3, 1)), np.zeros(3), np.arange(3), [1, 1, 1])
    args = (np.full(3, 0.5), np.zeros(3), np.zeros(1), None, np.random.default_rng(0))
    mean = projected_noisy_sgd(gradient, batches, *args, average=True)
    np.testing.assert_allclose(mean, [(0 + 0.5 + 0.75) / 3])
    batches = iter_batches(np.zeros((3, 1)), np.zeros(3), np.arange(3), [1, 1, 1])
    np.testing.assert_allclose(projected_noisy_sgd(gradient, batches, *args), [0.875])


def test_snowball_releases_the_last_iterate_never_an_average(monkeypatch):
    # FKT20 §6 (feldman.md §A9): amplification by iteration covers the last iterate only.
    import skdpsco.solvers.snowball as snowball_module

    calls = []
    real = snowball_module.projected_noisy_sgd

    def spy(*args, **kwargs):
        calls.append(kwargs.get("average", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(snowball_module, "projected_noisy_sgd", spy)
    plan = plan_snowball(500, 3, epsilon=1.0, delta=1e-5, schedule="jnn", **LOGISTIC)
    X = np.random.default_rng(0).normal(size=(500, 3)) / 2
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    from skdpsco.losses import LogisticLoss
    from skdpsco.solvers._core import margin_gradient

    snowball_module.run_snowball(plan, X, y, margin_gradient(LogisticLoss()), np.zeros(3), 10.0, np.random.default_rng(0))
    assert calls == [False]
    assert "average" not in snowball_module.run_snowball.__code__.co_varnames
