"""Tests of the closed-form Gaussian smoothing ``skdpsco.smoothing`` (``spec/feldman.md`` §B10).

References are independent of the closed forms: values and derivatives are checked against the
Gaussian convolution of the *base* loss computed by adaptive quadrature (split at the kink, to
relative accuracy, also in the far tails), derivatives against finite differences of the value,
and the constants against a random search over the bounded domain (the approach of
``tests/test_losses.py``: the observed suprema must not exceed the claimed constants and, as the
suprema are attained by rows on the sphere and sampled directly, must reach 99 % of them).
"""

import math
import zlib

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import linprog, minimize

from skdpsco.losses import (
    HingeLoss,
    HuberLoss,
    LogisticLoss,
    LossConstants,
    MarginLoss,
    MultinomialLogisticLoss,
    PowerLoss,
    QHingeLoss,
    SquaredHingeLoss,
)
from skdpsco.smoothing import GaussianSmoothedLoss, default_smoothing_width, smooth
from skdpsco.solvers._core import margin_gradient

BASES = [HingeLoss(), PowerLoss(1)]
BASE_IDS = ["hinge", "absolute"]
WIDTHS = [1e-3, 0.3, 5.0]
# (data_norm B, radius R, y_bound B_y); the last one keeps the hinge's kink out of reach (B R < 1)
DOMAINS = [(1.0, 3.0, 1.0), (0.5, 8.0, 2.0), (2.0, 2.0, 0.5), (1.0, 0.5, 1.0)]
N_FEATURES = 4
# Standardised distances t = u / s from the kink, down to the far tails (the value is
# representable down to t ~ -38; beyond it is 0 in float64).
T_GRID = [-1e6, -1e3, -37.0, -30.0, -12.0, -3.0, -1.0, -0.2, 0.0, 0.2, 1.0, 3.0, 12.0, 30.0, 1e3, 1e6]

# spec §B10: error sup |phi_s - phi| = J s varphi(0) and sup phi_s'' = J varphi(0) / s, with the
# jump J of the slope at the kink: 1 for the hinge, 2 for the absolute loss.
JUMP = {"hinge": 1.0, "absolute": 2.0}
PDF0 = 1.0 / math.sqrt(2.0 * math.pi)


def kind(base):
    return "hinge" if isinstance(base, HingeLoss) else "absolute"


def labels_for(base):
    return [-1.0, 1.0] if kind(base) == "hinge" else [-1.3, 0.0, 2.0]


def margin_at(base, t, s, y):
    """Margin whose distance from the kink, in the spec's variable u, is ``t s``.

    Hinge: ``u = 1 - y z``; absolute: ``u = z - y`` (spec §B10).
    """
    if kind(base) == "hinge":
        return y * (1.0 - t * s)
    return y + t * s


def gaussian_expectation(fn, z, y, s):
    """``E fn(z + s g, y)`` over ``g ~ N(0, 1)`` by quadrature, split at the kink and at 0.

    For both bases the kink (``y z = 1`` with ``y = +-1``, resp. residual 0) is the margin ``y``.
    A finite piece is cut to ``|g| <= 40``, outside of which the density is 0 in float64.
    """
    lo, hi = sorted([(y - z) / s, 0.0])

    def integrand(g):
        return fn(np.array([z + s * g]), np.array([y]))[0] * math.exp(-0.5 * g * g) * PDF0

    opts = dict(epsabs=0.0, epsrel=1e-12, limit=200)
    total = quad(integrand, -np.inf, lo, **opts)[0] + quad(integrand, hi, np.inf, **opts)[0]
    if max(lo, -40.0) < min(hi, 40.0):
        total += quad(integrand, max(lo, -40.0), min(hi, 40.0), **opts)[0]
    return total


# ----------------------------------------------------------------------------------------------
# value and derivative
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", WIDTHS)
@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_value_and_derivative_equal_the_gaussian_convolution(base, s):
    loss = smooth(base, s)
    for y in labels_for(base):
        z = np.array([margin_at(base, t, s, y) for t in T_GRID])
        yy = np.full_like(z, y)
        value, derivative = loss.value(z, yy), loss.derivative(z, yy)
        ref_value = [gaussian_expectation(base.value, zi, y, s) for zi in z]
        # E phi'(z + g) = phi_s'(z): phi is Lipschitz, so differentiation and expectation commute
        ref_derivative = [gaussian_expectation(base.derivative, zi, y, s) for zi in z]
        np.testing.assert_allclose(value, ref_value, rtol=1e-9, atol=1e-300)
        np.testing.assert_allclose(derivative, ref_derivative, rtol=1e-9, atol=1e-15)


def test_the_far_tails_are_the_base_loss_and_the_kink_value_is_exact():
    """Closed-form limits: t -> +-inf gives the base loss; at the kink the value is J s varphi(0)."""
    s = 0.7
    for base in BASES:
        loss = smooth(base, s)
        y = labels_for(base)[-1]
        z = np.array([margin_at(base, t, s, y) for t in (-1e6, 1e6, 0.0)])
        yy = np.full(3, y)
        np.testing.assert_allclose(loss.value(z[:2], yy[:2]), base.value(z[:2], yy[:2]), rtol=1e-15)
        np.testing.assert_array_equal(loss.derivative(z[:2], yy[:2]), base.derivative(z[:2], yy[:2]))
        assert loss.value(z[2:], yy[2:])[0] == pytest.approx(JUMP[kind(base)] * s * PDF0, rel=1e-14)


@pytest.mark.parametrize("s", WIDTHS)
@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_derivative_matches_central_differences(base, s):
    loss = smooth(base, s)
    h = 1e-4 * s
    ts = np.concatenate([np.linspace(-40.0, 40.0, 161), [-1e3, 1e3]])
    for y in labels_for(base):
        z = margin_at(base, ts, s, y)
        yy = np.full_like(z, y)
        fd = (loss.value(z + h, yy) - loss.value(z - h, yy)) / (2 * h)
        np.testing.assert_allclose(loss.derivative(z, yy), fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("s", WIDTHS)
@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_convex_with_curvature_bounded_by_the_claimed_supremum(base, s):
    """phi_s'' >= 0 (monotone derivative, convex value) and max phi_s'' = J varphi(0) / s."""
    loss = smooth(base, s)
    for y in labels_for(base):
        z = np.sort(margin_at(base, np.linspace(-12.0, 12.0, 2001), s, y))
        yy = np.full_like(z, y)
        d = loss.derivative(z, yy)
        assert np.all(np.diff(d) >= -1e-15)
        v = loss.value(z, yy)
        assert np.all(v[:-2] + v[2:] - 2 * v[1:-1] >= -1e-12 * (1 + np.abs(v[1:-1])))
        curvature = np.diff(d) / np.diff(z)  # a mean value of phi_s'' on each cell
        peak = JUMP[kind(base)] * PDF0 / s
        assert curvature.max() <= peak * (1 + 1e-6)
        assert curvature.max() >= peak * (1 - 1e-3)  # the grid crosses the kink


@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_stable_for_extreme_standardised_margins(base):
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for s in (1e-8, 1.0, 1e4):
            loss = smooth(base, s)
            for y in labels_for(base):
                t = np.array([-1e6, -1e5, -50.0, -38.5, 38.5, 50.0, 1e5, 1e6])
                z = margin_at(base, t, s, y)
                yy = np.full_like(z, y)
                v, d = loss.value(z, yy), loss.derivative(z, yy)
                assert np.all(np.isfinite(v)) and np.all(np.isfinite(d))
                assert np.all(v >= base.value(z, yy)) and np.all(np.abs(d) <= 1.0)


@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_a_margin_loss_of_the_base_task(base):
    loss = GaussianSmoothedLoss(base, 0.5)
    assert isinstance(loss, MarginLoss)
    assert loss.task == base.task
    assert loss.name == f"gaussian_smoothed_{base.name}"
    assert loss == smooth(base, 0.5) and hash(loss) == hash(smooth(base, 0.5))
    assert loss != smooth(base, 0.25)
    z = np.arange(-3, 4)  # integer input
    y = np.ones(7, dtype=int)
    assert loss.value(z, y).shape == (7,) and loss.value(z, y).dtype == np.float64
    assert loss.derivative(z, y).shape == (7,) and loss.derivative(z, y).dtype == np.float64


# ----------------------------------------------------------------------------------------------
# approximation error
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", WIDTHS)
@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_base_below_smoothed_below_base_plus_error(base, s):
    """spec §B10: f <= f_hat <= f + error, the bound attained at the kink."""
    loss = smooth(base, s)
    error = loss.approximation_error()
    assert error == pytest.approx(JUMP[kind(base)] * s * PDF0, rel=1e-15)
    rng = np.random.default_rng(0)
    for y in labels_for(base):
        t = np.concatenate([rng.normal(scale=3.0, size=2000), rng.uniform(-50, 50, 500), [0.0]])
        z = margin_at(base, t, s, y)
        yy = np.full_like(z, y)
        gap = loss.value(z, yy) - base.value(z, yy)
        assert np.all(gap >= 0.0)
        assert np.all(gap <= error * (1 + 1e-12))
        assert gap.max() == pytest.approx(error, rel=1e-12)


def test_approximation_error_does_not_depend_on_y_bound_but_validates_it():
    loss = smooth(PowerLoss(1), 0.4)
    assert loss.approximation_error(3.0) == loss.approximation_error()
    with pytest.raises(ValueError, match="y_bound"):
        loss.approximation_error(-1.0)


@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_minimiser_of_the_smoothed_risk_is_within_the_error_of_the_true_optimum(base):
    """Utility of smoothing: F(argmin F_s) - min F <= F_s(argmin F_s) - min F_s + error = error.

    The non-smooth optimum min F is computed exactly by linear programming (SVM resp. least
    absolute deviations), the smoothed minimiser by L-BFGS on the closed form.
    """
    rng = np.random.default_rng(3)
    n, d = 300, 3
    X = rng.normal(size=(n, d))
    w_true = np.array([1.0, -2.0, 0.5])
    if kind(base) == "hinge":
        y = np.where(X @ w_true + rng.normal(scale=1.0, size=n) > 0, 1.0, -1.0)
        A = -y[:, None] * X  # slack_i >= 1 - y_i <w, x_i>
    else:
        y = X @ w_true + rng.standard_t(2, size=n)
    # variables (w, slack); minimise mean slack s.t. slack >= each affine piece of the loss
    c = np.concatenate([np.zeros(d), np.full(n, 1.0 / n)])
    eye = -np.eye(n)
    if kind(base) == "hinge":
        A_ub = np.block([[A, eye]])
        b_ub = -np.ones(n)
    else:
        A_ub = np.block([[X, eye], [-X, eye]])  # |y - <w, x>| <= slack
        b_ub = np.concatenate([y, -y])
    bounds = [(None, None)] * d + [(0, None)] * n
    lp = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    assert lp.status == 0
    f_star = lp.fun

    for s in (0.05, 0.5):
        loss = smooth(base, s)
        res = minimize(
            lambda w: loss.value(X @ w, y).mean(),
            np.zeros(d),
            jac=lambda w: loss.derivative(X @ w, y) @ X / n,
            method="L-BFGS-B",
            options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000},
        )
        excess = base.value(X @ res.x, y).mean() - f_star
        assert -1e-9 <= excess <= loss.approximation_error() + 1e-8
        # and smoothing does change the problem: the smoothed optimum lies above min F
        assert res.fun > f_star


# ----------------------------------------------------------------------------------------------
# constants
# ----------------------------------------------------------------------------------------------


def unit_rows(rng, n, d):
    u = rng.standard_normal((n, d))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def project(W, R):
    norms = np.linalg.norm(W, axis=1)
    return W * np.minimum(1.0, R / np.maximum(norms, 1e-300))[:, None]


def sample_domain(base, B, R, B_y, rng, n=20_000):
    """Rows, labels and parameter pairs (W, W2) in the ball, with adversarial structure.

    Rows on the sphere ``||x|| = B`` (3/4) or inside; parameters mostly aligned with the row, at
    margins at the kink, at the extremes ``+-R ||x||`` or uniform, and perturbed along the row
    at step sizes from ``1e-7 R`` to ``2 R``; the rest uniform in the ball.
    """
    u = unit_rows(rng, n, N_FEATURES)
    xnorm = np.where(rng.random(n) < 0.75, B, B * rng.random(n))
    X = xnorm[:, None] * u
    if base.task == "binary":
        y = rng.choice([-1.0, 1.0], n)
    else:
        y = rng.uniform(-B_y, B_y, n)
        extreme = rng.random(n) < 0.4
        y[extreme] = rng.choice([-B_y, 0.0, B_y], extreme.sum())
    zmax = R * xnorm
    choice = rng.integers(0, 3, n)
    target = np.where(choice == 1, rng.choice([-1.0, 1.0], n) * zmax, rng.uniform(-zmax, zmax))
    target = np.clip(np.where(choice == 0, y, target), -zmax, zmax)  # the kink is at z = y
    W = (target / xnorm)[:, None] * u
    W = np.where((rng.random(n) < 0.2)[:, None], unit_rows(rng, n, N_FEATURES) * (R * rng.random(n))[:, None], W)
    D = np.where((rng.random(n) < 0.75)[:, None], u, unit_rows(rng, n, N_FEATURES))
    steps = R * 10.0 ** rng.uniform(-7.0, 0.3, n) * rng.choice([-1.0, 1.0], n)
    return X, y, project(W, R), project(W + steps[:, None] * D, R)


def observed_suprema(loss, B, R, B_y, seed):
    rng = np.random.default_rng(seed)
    X, y, W, W2 = sample_domain(loss.base, B, R, B_y, rng)
    g1 = loss.derivative(np.einsum("np,np->n", W, X), y)[:, None] * X
    g2 = loss.derivative(np.einsum("np,np->n", W2, X), y)[:, None] * X
    dist = np.linalg.norm(W - W2, axis=1)
    keep = dist > 1e-8 * R
    ratio = np.linalg.norm(g1 - g2, axis=1)[keep] / dist[keep]
    return max(np.linalg.norm(g1, axis=1).max(), np.linalg.norm(g2, axis=1).max()), ratio.max()


@pytest.mark.parametrize("s", [0.05, 0.5, 4.0])
@pytest.mark.parametrize("domain", DOMAINS, ids=[f"B={b},R={r},By={by}" for b, r, by in DOMAINS])
@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_constants_match_random_search(base, domain, s):
    B, R, B_y = domain
    loss = smooth(base, s)
    c = loss.constants(B, R, B_y)
    assert isinstance(c, LossConstants)
    assert c.holder_exponent == 1.0 and c.holder_constant == c.smoothness and c.growth is None
    lipschitz, smoothness = observed_suprema(loss, B, R, B_y, zlib.crc32(f"{base!r}{domain}{s}".encode()))
    tol = 1 + 1e-5
    assert lipschitz <= c.lipschitz * tol
    assert lipschitz >= 0.999 * c.lipschitz
    assert smoothness <= c.smoothness * tol
    if c.smoothness > 1e-6 * B**2 / s:
        assert smoothness >= 0.99 * c.smoothness
    else:  # kink far out of reach: the gradient varies below float resolution, |phi_s'| ~ 1
        assert smoothness <= 1e-6 / R
    # no larger than the base's Lipschitz constant, and the base's is approached as s -> 0
    assert c.lipschitz <= base.constants(B, R, B_y).lipschitz
    assert smooth(base, 1e-6 * s).constants(B, R, B_y).lipschitz == pytest.approx(B, rel=1e-12)


@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_constants_on_the_whole_space_bound_every_ball(base):
    s, B, B_y = 0.3, 1.5, 1.0
    loss = smooth(base, s)
    whole = loss.constants(B, None, B_y)
    assert whole.lipschitz == base.constants(B, None, B_y).lipschitz == B
    assert whole.smoothness == pytest.approx(B**2 * JUMP[kind(base)] * PDF0 / s, rel=1e-15)
    for R in (0.1, 0.5, 1.0, 10.0, 1e6):
        ball = loss.constants(B, R, B_y)
        assert ball.lipschitz <= whole.lipschitz and ball.smoothness <= whole.smoothness


@pytest.mark.parametrize("domain", [(1.0, None, 1.0), (1.0, 3.0, 1.0), (2.0, 0.3, 0.5)])
@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_smoothness_scales_as_one_over_width_at_the_kink(base, domain):
    B, R, B_y = domain
    widths = np.array([1e-3, 0.01, 0.1, 1.0, 10.0])
    beta = np.array([smooth(base, s).constants(B, R, B_y).smoothness for s in widths])
    reachable = kind(base) == "absolute" or R is None or B * R >= 1
    if reachable:
        np.testing.assert_allclose(beta * widths, B**2 * JUMP[kind(base)] * PDF0, rtol=1e-14)
    else:  # hinge kink out of reach: curvature at distance 1 - B R, never above the 1/s law
        assert np.all(beta * widths <= B**2 * PDF0)
        assert beta[0] < 1e-100  # tiny width: the loss is linear on the domain


@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_a_step_of_two_over_beta_is_non_expansive_and_the_base_subgradient_step_is_not(base):
    """spec §0.4 (FMTT Prop. 18) and the §B10 caveat: contraction needs the exact smooth gradient."""
    B, R, B_y, s = 1.0, 2.0, 1.0, 0.2
    loss = smooth(base, s)
    eta = 2.0 / loss.constants(B, R, B_y).smoothness
    rng = np.random.default_rng(4)
    X, y, W, W2 = sample_domain(base, B, R, B_y, rng, n=4000)
    worst = {}
    for name, candidate in (("smoothed", loss), ("base", base)):
        grad = margin_gradient(candidate)
        ratios = []
        for i in range(0, 4000, 4):  # batches of 4 rows, pairs from the adversarial sampler
            Xb, yb = X[i : i + 4], y[i : i + 4]
            w, w2 = W[i], W2[i]
            dist = np.linalg.norm(w - w2)
            if dist > 1e-8 * R:  # projection can collapse a pair to rounding level
                step = (w - eta * grad(w, Xb, yb)) - (w2 - eta * grad(w2, Xb, yb))
                ratios.append(np.linalg.norm(step) / dist)
        worst[name] = max(ratios)
    assert worst["smoothed"] <= 1 + 1e-9
    assert worst["base"] > 2.0


# ----------------------------------------------------------------------------------------------
# refusals and validation
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "base",
    [
        LogisticLoss(),
        MultinomialLogisticLoss(3),
        HuberLoss(1.0),
        PowerLoss(2),
        SquaredHingeLoss(),
        QHingeLoss(2.0),
        GaussianSmoothedLoss(HingeLoss(), 0.5),
    ],
    ids=repr,
)
def test_already_smooth_losses_are_refused(base):
    with pytest.raises(ValueError, match="already smooth"):
        smooth(base, 0.5)


@pytest.mark.parametrize("base", [QHingeLoss(1.5), QHingeLoss(1.01), PowerLoss(1.5), PowerLoss(1.99)], ids=repr)
def test_hoelder_smooth_losses_are_refused(base):
    with pytest.raises(ValueError, match="no elementary closed form"):
        GaussianSmoothedLoss(base, 0.5)
    with pytest.raises(ValueError, match="no elementary closed form"):
        default_smoothing_width(1000, 5, 1.0, 1e-5, 1.0, 1.0, base)


def test_non_losses_are_refused():
    with pytest.raises(ValueError, match="MarginLoss"):
        smooth("hinge", 0.5)


@pytest.mark.parametrize("width", [0.0, -1.0, math.inf, math.nan, "1", True, None])
def test_width_must_be_positive_and_finite(width):
    with pytest.raises(ValueError, match=r"width must be a real number in \(0, inf\)"):
        smooth(HingeLoss(), width)


def test_constants_validate_the_bounds_as_every_loss_does():
    with pytest.raises(ValueError, match="y_bound is required"):
        smooth(PowerLoss(1), 0.5).constants(1.0, 1.0)
    with pytest.raises(ValueError, match="data_norm"):
        smooth(HingeLoss(), 0.5).constants(0.0, 1.0)
    assert smooth(HingeLoss(), 0.5).constants(1.0, 1.0).lipschitz > 0  # no y_bound for the hinge


# ----------------------------------------------------------------------------------------------
# default width
# ----------------------------------------------------------------------------------------------


def spec_rate(n, p, epsilon, delta):
    """FKT Thm 1.1 in (epsilon, delta) form (spec §A5), without its constant."""
    return 1.0 / math.sqrt(n) + math.sqrt(p * math.log(1.0 / delta)) / (epsilon * n)


CASES = [(1000, 10, 1.0, 1e-5, 1.0, 1.0), (50, 1, 0.1, 0.01, 3.0, 0.2), (10**7, 500, 8.0, 1e-9, 0.5, 20.0)]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_default_width_balances_error_and_rate(base, case):
    n, p, eps, delta, B, R = case
    s = default_smoothing_width(n, p, eps, delta, B, R, base)
    assert 0.0 < s < math.inf
    L = base.constants(B, None, 1.0).lipschitz
    assert smooth(base, s).approximation_error() == pytest.approx(R * L * spec_rate(n, p, eps, delta), rel=1e-12)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_default_width_keeps_the_step_constraint_of_the_docstring(base, case):
    """At the default width: eta <= (L_phi / e)^2 D / (L sqrt(n)) satisfies eta <= 2 / beta_hat,
    and beta_hat <= c0 (L / D) min(sqrt(n), eps n / sqrt(p ln(1 / delta))) with c0 = 2 e^2 / L_phi^2."""
    n, p, eps, delta, B, R = case
    s = default_smoothing_width(n, p, eps, delta, B, R, base)
    beta = smooth(base, s).constants(B, None, 1.0).smoothness  # the whole space: largest beta
    L, D, e = B, 2.0 * R, JUMP[kind(base)] * PDF0  # L_phi = 1 for both links
    assert 2.0 / beta >= D / (e**2 * L * math.sqrt(n)) * (1 - 1e-12)
    c0 = 2.0 * e**2
    assert beta <= c0 * (L / D) * min(math.sqrt(n), eps * n / math.sqrt(p * math.log(1 / delta))) * (1 + 1e-12)
    # the constant is the one stated: 1/pi for the hinge, 4/pi for the absolute loss
    assert c0 == pytest.approx(1 / math.pi if kind(base) == "hinge" else 4 / math.pi)


@pytest.mark.parametrize("base", BASES, ids=BASE_IDS)
def test_default_width_is_monotone_in_the_public_parameters(base):
    def width(n=1000, p=10, eps=1.0, delta=1e-5, B=1.0, R=1.0):
        return default_smoothing_width(n, p, eps, delta, B, R, base)

    ns = [1, 10, 100, 10**4, 10**6, 10**9]
    assert np.all(np.diff([width(n=n) for n in ns]) < 0)
    epsilons = [1e-3, 0.1, 1.0, 10.0, 1e3]
    assert np.all(np.diff([width(eps=e) for e in epsilons]) < 0)
    assert np.all(np.diff([width(p=p) for p in (1, 10, 1000)]) > 0)
    assert np.all(np.diff([width(delta=d) for d in (1e-300, 1e-10, 1e-2, 0.5)]) < 0)
    assert width(B=2.0) == pytest.approx(2 * width()) and width(R=3.0) == pytest.approx(3 * width())
    # tends to the non-private balance R B L_phi / (e sqrt(n)) as epsilon grows
    e = JUMP[kind(base)] * PDF0
    assert width(eps=1e12) == pytest.approx(1.0 / (e * math.sqrt(1000)), rel=1e-6)
    assert math.isfinite(width(n=1, eps=1e-6, delta=1e-300, p=10**6))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_samples": 0}, "n_samples must be an integer >= 1"),
        ({"n_samples": 10.5}, "n_samples must be an integer >= 1"),
        ({"n_params": 0}, "n_params must be an integer >= 1"),
        ({"epsilon": 0.0}, r"epsilon must be a real number in \(0, inf\)"),
        ({"delta": 0.0}, r"delta must be a real number in \(0, 1\)"),
        ({"delta": 1.0}, r"delta must be a real number in \(0, 1\)"),
        ({"data_norm": -1.0}, "data_norm must"),
        ({"radius": None}, "radius must"),
        ({"radius": math.inf}, "radius must"),
        ({"base_loss": LogisticLoss()}, "already smooth"),
    ],
)
def test_default_width_rejects_bad_arguments(kwargs, match):
    args = dict(n_samples=1000, n_params=5, epsilon=1.0, delta=1e-5, data_norm=1.0, radius=1.0, base_loss=HingeLoss())
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        default_smoothing_width(**args)
