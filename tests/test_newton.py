"""Private Newton (skdpsco.solvers.newton): the plan's event against the composition it claims,
the sensitivities against neighbouring datasets (random and worst case), the metric projection,
convergence to the non-private optimum as epsilon grows, the black-box audit with its power
check, the estimator path, and clear errors."""

import math

import dp_accounting
import numpy as np
import pytest
from scipy.optimize import minimize

from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant
from skdpsco.accounting import epsilon_of, exact_gaussian_epsilon, gaussian_noise_multiplier
from skdpsco.losses import LogisticLoss, MultinomialLogisticLoss, WeightedLoss, weighted_targets
from skdpsco.solvers import ALGORITHMS, Problem
from skdpsco.solvers._core import margin_gradient
from skdpsco.solvers.newton import (
    LOGISTIC_STEPS,
    PrivateNewton,
    gradient_sensitivity,
    hessian_sensitivity,
    loss_derivatives,
    metric_projected_step,
    pack_symmetric,
    row_hessian_bound,
    unpack_symmetric,
)
from _audits import audit_params, check_audit
import _rows

DELTA = 1e-5
B = math.sqrt(2.0)  # the estimators' row bound with the intercept column


def make_problem(n, coef_shape=(3,), epsilon=1.0, radius=10.0, l2_penalty=0.0, data_norm=B):
    loss = LogisticLoss() if len(coef_shape) == 1 else MultinomialLogisticLoss(coef_shape[0])
    return Problem(n, coef_shape, loss, loss.constants(data_norm, radius), radius, epsilon, DELTA, l2_penalty)


def rows_in_ball(rng, n, p, norm=B):
    return _rows.rows_in_ball(rng, n, p, norm)


def point_in_ball(rng, size, radius):
    w = rng.standard_normal(size)
    return w * radius * rng.uniform() / np.linalg.norm(w)


# -- the event --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", [PrivateNewton(), PrivateNewton(n_steps=5, hessian_steps=2, hessian_share=0.6, final_share=0.2)])
def test_event_is_the_composition_of_the_planned_gaussians_and_meets_epsilon_exactly(solver):
    problem = make_problem(5000, epsilon=0.7)
    plan = solver.plan(problem)
    gradient_delta, hessian_delta = gradient_sensitivity(problem), hessian_sensitivity(problem)
    assert len(plan.gradient_noise) == plan.n_steps and len(plan.hessian_noise) == plan.hessian_steps
    # the event lists exactly those releases, in the library's sigma / Delta convention
    events = plan.dp_event.events
    expected = [s / gradient_delta for s in plan.gradient_noise] + [s / hessian_delta for s in plan.hessian_noise]
    assert all(isinstance(e, dp_accounting.GaussianDpEvent) for e in events)
    assert [e.noise_multiplier for e in events] == pytest.approx(expected, rel=1e-12)
    # mu-GDP composition: sqrt(sum (Delta_i / s_i)**2) is the mu of one Gaussian meeting epsilon
    mu = math.sqrt(sum(1.0 / z**2 for z in expected))
    assert mu == pytest.approx(1.0 / gaussian_noise_multiplier(0.7, DELTA), rel=1e-9)
    spent = epsilon_of(plan.dp_event, DELTA)
    assert spent <= 0.7
    assert spent == pytest.approx(exact_gaussian_epsilon(mu, DELTA), abs=2e-3)
    assert spent == pytest.approx(0.7, abs=2e-3)


def test_budget_rule_splits_mu_squared_as_documented():
    problem = make_problem(1000)
    plan = PrivateNewton(n_steps=4, hessian_steps=2, hessian_share=0.2, final_share=0.7).plan(problem)
    mu2 = gaussian_noise_multiplier(1.0, DELTA) ** -2
    gradient = [(gradient_sensitivity(problem) / s) ** 2 / mu2 for s in plan.gradient_noise]
    hessian = [(hessian_sensitivity(problem) / s) ** 2 / mu2 for s in plan.hessian_noise]
    assert gradient == pytest.approx([0.8 * 0.3 / 3] * 3 + [0.8 * 0.7])
    assert hessian == pytest.approx([0.1, 0.1])


# -- sensitivities ---------------------------------------------------------------------------------------


def test_packing_is_an_isometry_and_unpacking_inverts_it():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((5, 5))
    A = A + A.T
    assert np.linalg.norm(pack_symmetric(A)) == pytest.approx(np.linalg.norm(A))
    np.testing.assert_allclose(unpack_symmetric(pack_symmetric(A), 5), A)
    # off-diagonal noise of a packed release has half the variance of the diagonal's
    noise = np.array([unpack_symmetric(rng.standard_normal(15), 5) for _ in range(4000)])
    assert noise[:, 0, 0].var() == pytest.approx(1.0, rel=0.1)
    assert noise[:, 0, 1].var() == pytest.approx(0.5, rel=0.1)


@pytest.mark.parametrize("coef_shape", [(4,), (3, 4)])
def test_secure_run_releases_on_the_grid_of_the_planned_sensitivities(monkeypatch, coef_shape):
    """With a secure generator the gradients and the packed Hessians ``u(H)`` go to the grid with
    the planned noise and ``l2`` sensitivities (``Delta_H`` of the packed vector: the isometry
    above), each released vector is on its grid, and the Hessian is unpacked from it."""
    from skdpsco import _secure
    from skdpsco.solvers import newton

    problem = make_problem(300, coef_shape, epsilon=2.0)
    solver = PrivateNewton(n_steps=3, hessian_steps=2)
    plan = solver.plan(problem)
    releases, grid_release = [], _secure.grid_release

    def observed(value, scale, sensitivity, rng, laplace=False):
        released = grid_release(value, scale, sensitivity, rng, laplace)
        releases.append((np.shape(value), scale, sensitivity, released))
        return released

    monkeypatch.setattr(_secure, "grid_release", observed)
    unpacked = []
    monkeypatch.setattr(newton, "unpack_symmetric",
                        lambda vector, size: unpacked.append(vector) or unpack_symmetric(vector, size))
    rng = np.random.default_rng(1)
    X = rows_in_ball(rng, 300, coef_shape[-1])
    y = rng.integers(0, coef_shape[0] if len(coef_shape) == 2 else 2, 300)
    solver.run(plan, X, y, problem, _secure.secure_generator())
    size = math.prod(coef_shape)
    hessians = [r for r in releases if r[0] == (size * (size + 1) // 2,)]
    gradients = [r for r in releases if r[0] == coef_shape]
    assert len(releases) == 5 and len(gradients) == 3 and len(hessians) == 2
    assert [r[2] for r in gradients] == list(plan.gradient_sensitivities) == [gradient_sensitivity(problem)] * 3
    assert [r[1] for r in gradients] == list(plan.gradient_noise)
    assert [r[2] for r in hessians] == [plan.hessian_sensitivity] * 2
    assert plan.hessian_sensitivity == hessian_sensitivity(problem)
    assert [r[1] for r in hessians] == list(plan.hessian_noise)
    for shape, _, sensitivity, released in releases:
        steps = released / _secure._grid_step(sensitivity, math.sqrt(math.prod(shape)))
        np.testing.assert_array_equal(steps, np.round(steps))
    assert all(u is r[3] for u, r in zip(unpacked, hessians))  # the matrix is u^{-1} of the released vector


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("coef_shape", [(4,), (3, 4)])
def test_random_replace_one_neighbours_stay_within_the_sensitivities(coef_shape, weighted):
    # For random datasets, points of the ball and replaced rows (labels, and weights in [0, 1] for
    # weighted rows, too), the averaged gradient and the packed averaged Hessian move by at most
    # the claimed sensitivities.
    rng = np.random.default_rng(1)
    n, radius = 7, 3.0
    problem = make_problem(n, coef_shape, radius=radius)
    loss = WeightedLoss(problem.loss) if weighted else problem.loss
    multiclass = len(coef_shape) == 2
    worst_gradient = worst_hessian = 0.0
    for _ in range(300):
        X = rows_in_ball(rng, n, coef_shape[-1])
        y = rng.integers(0, coef_shape[0], n) if multiclass else rng.choice([-1.0, 1.0], n)
        w = point_in_ball(rng, int(np.prod(coef_shape)), radius).reshape(coef_shape)
        X2, y2 = X.copy(), y.copy()
        X2[0] = rows_in_ball(rng, 1, coef_shape[-1])[0]
        y2[0] = rng.integers(0, coef_shape[0]) if multiclass else rng.choice([-1.0, 1.0])
        if weighted:
            c = rng.uniform(0.0, 1.0, n) ** 0.25
            c2 = c.copy()
            c2[0] = rng.uniform() ** 0.25
            y, y2 = weighted_targets(y, c), weighted_targets(y2, c2)
        g1, H1 = loss_derivatives(w, X, y, loss, True)
        g2, H2 = loss_derivatives(w, X2, y2, loss, True)
        worst_gradient = max(worst_gradient, np.linalg.norm(g1 - g2))
        worst_hessian = max(worst_hessian, np.linalg.norm(pack_symmetric(H1) - pack_symmetric(H2)))
    assert worst_gradient <= gradient_sensitivity(problem)
    assert worst_hessian <= hessian_sensitivity(problem)
    assert worst_hessian > 0.3 * hessian_sensitivity(problem)  # the search reaches the scale


@pytest.mark.parametrize("coef_shape", [(2,), (2, 2)])
def test_hessian_sensitivity_is_attained_by_orthogonal_rows_at_the_origin(coef_shape):
    # Rows B e_1 and B e_2 at w = 0: logistic phi'' = 1/4, multinomial (K = 2) ||diag(s) - s s^T||_F = 1/2,
    # so both per-row Hessians have the bound's norm and are orthogonal: the difference is sqrt(2) b / n.
    n = 3
    problem = make_problem(n, coef_shape)
    multiclass = len(coef_shape) == 2
    X = np.zeros((n, 2))
    X[0, 0] = B
    X2 = X.copy()
    X2[0] = [0.0, B]
    y = np.zeros(n, dtype=int) if multiclass else np.ones(n)
    w = np.zeros(coef_shape)
    H1, H2 = loss_derivatives(w, X, y, problem.loss, True)[1], loss_derivatives(w, X2, y, problem.loss, True)[1]
    assert np.linalg.norm(pack_symmetric(H1) - pack_symmetric(H2)) == pytest.approx(hessian_sensitivity(problem))
    assert row_hessian_bound(problem) == pytest.approx(B**2 / (2.0 if multiclass else 4.0))


def test_multinomial_curvature_matrix_frobenius_norm_is_at_most_one_half():
    # ||diag(s) - s s^T||_F <= 1/2 on the simplex (row_hessian_bound's proof), attained at (1/2, 1/2, 0).
    rng = np.random.default_rng(2)
    worst = 0.0
    for K in (2, 3, 5, 10):
        for concentration in (0.1, 1.0, 10.0):
            for s in rng.dirichlet(np.full(K, concentration), 2000):
                worst = max(worst, np.linalg.norm(np.diag(s) - np.outer(s, s)))
    assert worst <= 0.5
    s = np.array([0.5, 0.5, 0.0])
    assert np.linalg.norm(np.diag(s) - np.outer(s, s)) == pytest.approx(0.5)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("coef_shape", [(3,), (3, 3)])
def test_derivatives_are_the_core_gradient_and_the_exact_hessian(coef_shape, weighted):
    rng = np.random.default_rng(3)
    n = 10_000  # more than one block of rows
    problem = make_problem(n, coef_shape)
    X = rows_in_ball(rng, n, coef_shape[-1])
    y = rng.integers(0, 3, n) if len(coef_shape) == 2 else rng.choice([-1.0, 1.0], n)
    loss = problem.loss
    if weighted:  # the estimators' sample_weight: each row's loss times c in [0, 1]
        loss, y = WeightedLoss(loss), weighted_targets(y, rng.uniform(0.0, 1.0, n))
    w = point_in_ball(rng, int(np.prod(coef_shape)), 2.0).reshape(coef_shape)
    gradient, hessian = loss_derivatives(w, X, y, loss, True)
    np.testing.assert_allclose(gradient, margin_gradient(loss)(w, X, y), rtol=1e-10, atol=1e-14)
    # Hessian: central differences of the core gradient
    step = 1e-5
    columns = []
    for j in range(w.size):
        e = np.zeros(w.size)
        e[j] = step
        plus = margin_gradient(loss)(w + e.reshape(coef_shape), X, y)
        minus = margin_gradient(loss)(w - e.reshape(coef_shape), X, y)
        columns.append(((plus - minus) / (2 * step)).ravel())
    np.testing.assert_allclose(hessian, np.array(columns).T, atol=1e-7)
    np.testing.assert_allclose(hessian, hessian.T)


# -- the step ----------------------------------------------------------------------------------------------


def test_metric_projected_step_is_the_constrained_minimiser():
    rng = np.random.default_rng(4)
    for radius in (0.5, 5.0, 50.0):
        M = rng.standard_normal((4, 4))
        A = M @ M.T + 0.1 * np.eye(4)
        eigenvalues, eigenvectors = np.linalg.eigh(A)
        w = point_in_ball(rng, 4, radius)
        g = rng.standard_normal(4)
        v = metric_projected_step(w, g, eigenvalues, eigenvectors, radius)

        def model(u):
            return g @ (u - w) + 0.5 * (u - w) @ A @ (u - w)

        best = minimize(model, np.zeros(4), constraints=[{"type": "ineq", "fun": lambda u: radius**2 - u @ u}],
                        method="SLSQP", options={"ftol": 1e-14, "maxiter": 500}).x
        assert np.linalg.norm(v) <= radius * (1 + 1e-12)
        assert model(v) <= model(best) + 1e-9
        unconstrained = w - np.linalg.solve(A, g)
        if np.linalg.norm(unconstrained) <= radius:
            np.testing.assert_allclose(v, unconstrained)


# -- utility -----------------------------------------------------------------------------------------------


def logistic_data(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rows_in_ball(rng, n, p - 1, 1.0)
    X = np.column_stack([X, np.ones(n)])  # the intercept column, as the estimators lay it out
    truth = np.array([3.0, -2.0, 1.0][: p - 1] + [0.5])
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-X @ truth)), 1.0, -1.0)
    return X, y


def objective(problem, X, y):
    def value(w):
        return np.mean(problem.loss.value(X @ w, y)) + 0.5 * problem.l2_penalty * w @ w

    return value


@pytest.mark.parametrize("radius, l2_penalty", [(20.0, 0.0), (20.0, 0.05), (2.0, 0.0)])
def test_converges_to_the_non_private_optimum_as_epsilon_grows(radius, l2_penalty):
    # (radius 2: the minimiser lies on the sphere, where a Euclidean projection of the Newton step
    # would stall away from it)
    X, y = logistic_data(4000, 4)
    base = make_problem(4000, (4,), radius=radius, l2_penalty=l2_penalty)
    f = objective(base, X, y)
    constraint = [{"type": "ineq", "fun": lambda w: radius**2 - w @ w}]
    optimum = minimize(f, np.zeros(4), constraints=constraint, method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000}).x
    errors = []
    for epsilon in (1.0, 100.0, 1e5):
        problem = make_problem(4000, (4,), epsilon=epsilon, radius=radius, l2_penalty=l2_penalty)
        solver = PrivateNewton()
        plan = solver.plan(problem)
        fits = [solver.run(plan, X, y, problem, np.random.default_rng(seed)).coef for seed in range(5)]
        errors.append(np.mean([np.linalg.norm(w - optimum) for w in fits]))
        assert all(np.linalg.norm(w) <= radius * (1 + 1e-12) for w in fits)
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-3


def test_multinomial_converges_to_the_non_private_optimum():
    rng = np.random.default_rng(5)
    n, K = 3000, 3
    X = np.column_stack([rows_in_ball(rng, n, 2, 1.0), np.ones(n)])
    y = np.argmax(X[:, :2] @ np.array([[3.0, 0.0, -3.0], [0.0, 3.0, -1.0]]) + rng.gumbel(size=(n, K)), axis=1)
    problem = make_problem(n, (K, 3), epsilon=1e4, radius=20.0)

    def f(flat):
        return np.mean(problem.loss.value(X @ flat.reshape(K, 3).T, y))

    optimum = minimize(f, np.zeros(K * 3), method="BFGS", options={"gtol": 1e-10}).x.reshape(K, 3)
    optimum -= optimum.mean(axis=0)  # the minimiser in the complement of the null space
    solver = PrivateNewton()
    w = solver.run(solver.plan(problem), X, y, problem, np.random.default_rng(0)).coef
    np.testing.assert_allclose(w.mean(axis=0), 0.0, atol=1e-12)  # the steps stay in the complement
    np.testing.assert_allclose(w, optimum, atol=2e-3)


# -- the estimator, and errors -----------------------------------------------------------------------------


def test_estimator_fits_binary_and_multiclass_within_the_budget():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(3000, 4)) * [1.0, 10.0, 0.1, 1.0]
    for y in ((X[:, 0] + X[:, 1] / 10 > 0).astype(int), np.argmax(X[:, :3] * [1.0, 0.1, 10.0], axis=1)):
        ledger = PrivacyAccountant()
        model = DPLogisticRegression(epsilon=3.0, algorithm="newton", classes=np.unique(y), accountant=ledger,
                                     random_state=0).fit(X, y)
        assert model.algorithm_ == "newton" and model.epsilon_ <= 3.0
        assert ledger.history[0].event == model.dp_event_
        assert model.solver_info_["n_steps"] == LOGISTIC_STEPS == 8
        assert model.score(X, y) > 0.8


def test_weighted_fits_run_and_ones_give_the_unweighted_model():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(2000, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=2000) > 0).astype(int)

    def fit(sample_weight):
        return DPLogisticRegression(epsilon=5.0, algorithm="newton", classes=[0, 1], max_weight=2.0, random_state=0,
                                    accountant=PrivacyAccountant()).fit(X, y, sample_weight=sample_weight)

    plain = DPLogisticRegression(epsilon=5.0, algorithm="newton", classes=[0, 1], random_state=0,
                                 accountant=PrivacyAccountant(), alpha=0.0).fit(X, y)
    np.testing.assert_array_equal(fit(np.full(2000, 2.0)).coef_, plain.coef_)
    weighted = fit(rng.uniform(0.0, 2.0, 2000))
    assert weighted.epsilon_ <= 5.0 and weighted.score(X, y) > 0.75


@pytest.mark.parametrize("make", [lambda: DPHingeSVM(algorithm="newton"), lambda: DPLpRegression(p=1.0, algorithm="newton")])
def test_other_losses_are_refused_before_anything_is_charged(make):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    ledger = PrivacyAccountant()
    model = make().set_params(accountant=ledger)
    with pytest.raises(ValueError, match=r"logistic, multinomial logistic and squared \(p=2\) losses only.*'noisy_gd'"):
        model.fit(X, y)
    assert not ledger.history and not hasattr(model, "coef_")


@pytest.mark.parametrize(
    "options, match",
    [
        ({"n_steps": 0}, "n_steps must be an integer >= 1 or None"),
        ({"n_steps": 2.0}, "n_steps must be an integer >= 1 or None"),
        ({"n_steps": 3, "hessian_steps": 4}, r"hessian_steps must be an integer in \[1, n_steps\]"),
        ({"hessian_share": 1.0}, r"hessian_share must be a number in \(0, 1\)"),
        ({"final_share": 0.0}, r"final_share must be a number in \(0, 1\]"),
        ({"hessian_window": 0}, "hessian_window must be an integer >= 1"),
        ({"floor_factor": -1.0}, "floor_factor must be a finite number > 0"),
    ],
)
def test_bad_options_are_refused_with_the_parameter_named(options, match):
    with pytest.raises(ValueError, match=match):
        PrivateNewton(**options)


def test_bad_problems_and_rows_are_refused():
    unbounded = Problem(100, (3,), LogisticLoss(), LogisticLoss().constants(B, None), math.inf, 1.0, DELTA)
    with pytest.raises(ValueError, match="radius must be finite"):
        PrivateNewton().plan(unbounded)
    problem = make_problem(100)
    plan = PrivateNewton().plan(problem)
    with pytest.raises(ValueError, match="The plan is for 100 rows; got 99"):
        PrivateNewton().run(plan, np.zeros((99, 3)), np.ones(99), problem, np.random.default_rng(0))


def test_registered_under_its_public_name():
    assert isinstance(ALGORITHMS["newton"], PrivateNewton)


# -- the 'auto' rule ---------------------------------------------------------------------------------------


def test_auto_picks_newton_for_the_logistic_losses_from_the_signal_threshold_on():
    from skdpsco.solvers import (
        AUTO_NEWTON_SIGNAL, HESSIAN_COST, _affordable, _newton_signal, _newton_work, select_algorithm,
    )

    goal = make_problem(10**5, (21,))  # the speed goal: n = 1e5, d = 20, epsilon = 1
    assert _newton_signal(goal) >= AUTO_NEWTON_SIGNAL and select_algorithm(goal) == "newton"
    assert select_algorithm(make_problem(3 * 10**5, (3, 21))) == "newton"  # multinomial, p = 63
    multinomial = make_problem(10**6, (3, 21))  # its 63**2 Hessians the bottleneck at this n
    assert _newton_signal(multinomial) >= AUTO_NEWTON_SIGNAL and select_algorithm(multinomial) == "phased_sgd"
    assert select_algorithm(multinomial, rows="dask") == "newton"
    assert select_algorithm(make_problem(5 * 10**4, (21,), epsilon=0.3)) == "noisy_gd"  # n mu / p = 195
    # the threshold itself: n mu / p, mu of the fit's (epsilon, delta)
    mu = 1.0 / gaussian_noise_multiplier(1.0, DELTA)
    first = math.ceil(AUTO_NEWTON_SIGNAL * 21 / mu)
    assert _newton_signal(make_problem(first, (21,))) == pytest.approx(first * mu / 21)
    assert select_algorithm(make_problem(first, (21,))) == "newton"
    assert select_algorithm(make_problem(first - 1, (21,))) == "noisy_gd"
    # the compute budget: n p (T + HESSIAN_COST p T_H) with the default T = 8, T_H = 6, against
    # AUTO_PASSES passes of n p or AUTO_FREE_WORK
    wide = make_problem(10**6, (101,))
    assert _newton_work(wide) == pytest.approx(10**6 * 101 * (8 + HESSIAN_COST * 101 * 6))
    assert not _affordable(wide, _newton_work(wide)) and select_algorithm(wide) == "phased_sgd"
    assert select_algorithm(wide, rows="dask") == "newton"  # on Dask the passes decide, not the Hessians
    assert _affordable(goal, _newton_work(goal))  # d = 20: the Hessians are cheap
    # other losses never: the smoothed hinge keeps noisy GD within the budget, the one-pass solvers above
    from skdpsco.losses import HingeLoss
    from skdpsco.smoothing import smooth

    hinge = smooth(HingeLoss(), 0.1)
    large_hinge = Problem(10**5, (21,), hinge, hinge.constants(B, 10.0), 10.0, 1.0, DELTA)
    assert select_algorithm(large_hinge) == "phased_sgd"
    small_hinge = Problem(2 * 10**4, (21,), hinge, hinge.constants(B, 10.0), 10.0, 1.0, DELTA)
    assert select_algorithm(small_hinge) == "noisy_gd"


# -- the black-box audit --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", audit_params("newton"))
def test_audit_respects_the_claim_and_catches_halved_noise(name):
    # One Newton step from 0 on one row, label flip: the release is the noisy gradient over a
    # public curvature floor, the Gaussian mechanism itself (benchmarks/audits.py).
    check_audit(name)
