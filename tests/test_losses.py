"""Tests of the loss catalogue ``skdpsco.losses``.

The constants are checked by random search over the public domain (rows with ``||x|| <= B``,
labels in range, parameters in the ball of radius ``R``): the observed suprema of the gradient
norm and of the gradient-difference ratios must never exceed the claimed constant and must reach
80 % of it (so that a loose constant fails too). Gradients in ``w`` are built from
``derivative`` and ``x`` only, and ``derivative`` is itself checked against finite differences
of ``value``.
"""

import math
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    get_loss,
)

LOSSES = [
    LogisticLoss(),
    MultinomialLogisticLoss(2),
    MultinomialLogisticLoss(3),
    MultinomialLogisticLoss(5),
    HingeLoss(),
    SquaredHingeLoss(),
    QHingeLoss(1.3),
    QHingeLoss(1.7),
    PowerLoss(1),
    PowerLoss(1.3),
    PowerLoss(1.5),
    PowerLoss(2),
    HuberLoss(0.5),
    HuberLoss(2.0),
]
IDS = [repr(loss) for loss in LOSSES]
# (data_norm B, radius R, y_bound B_y); B R >= 3 so that every kink is reachable.
DOMAINS = [(1.0, 3.0, 1.0), (0.5, 8.0, 2.0), (2.0, 2.0, 0.5)]
N_FEATURES = 4
HYPOTHESIS = settings(max_examples=25, deadline=None)


def is_non_differentiable(loss):
    return isinstance(loss, HingeLoss) or (isinstance(loss, PowerLoss) and loss.p == 1)


def kink_margins(loss, y):
    """Margins at which ``phi'(., y)`` is not differentiable (shape (m, n)), independent of code."""
    if isinstance(loss, (HingeLoss, QHingeLoss)):
        return np.array([y])  # y z = 1  <=>  z = y for y in {-1, +1}
    if isinstance(loss, PowerLoss):
        return np.array([y])  # residual 0
    if isinstance(loss, HuberLoss):
        return np.array([y - loss.epsilon, y + loss.epsilon])
    return np.empty((0, len(y)))


# ----------------------------------------------------------------------------------------------
# sampling helpers
# ----------------------------------------------------------------------------------------------


def random_labels(loss, rng, n, y_bound):
    if loss.task == "binary":
        return rng.choice([-1.0, 1.0], n)
    if loss.task == "multiclass":
        return rng.integers(0, loss.n_classes, n)
    y = rng.uniform(-y_bound, y_bound, n)
    extreme = rng.random(n) < 0.4
    y[extreme] = rng.choice([-y_bound, 0.0, y_bound], extreme.sum())
    return y


def unit_rows(rng, n, d):
    u = rng.standard_normal((n, d))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def project(W, R):
    """Project each row's parameter (flattened over trailing axes) onto the ball of radius R."""
    norms = np.sqrt((W**2).reshape(len(W), -1).sum(axis=1))
    scale = np.minimum(1.0, R / np.maximum(norms, 1e-300))
    return W * scale.reshape((-1,) + (1,) * (W.ndim - 1))


def sample_domain(loss, B, R, B_y, rng, n=20_000):
    """Rows, labels and pairs (W, W2) in the ball, with adversarial structure.

    Rows lie on the sphere ``||x|| = B`` (3/4) or inside it; parameters are mostly aligned with
    the row (margins at kinks, at the extremes ``+-R ||x||`` or uniform) and perturbed along the
    row, at step sizes from ``1e-7 R`` to ``2 R``; the rest are uniform random in the ball.
    """
    p = N_FEATURES
    u = unit_rows(rng, n, p)
    xnorm = np.where(rng.random(n) < 0.75, B, B * rng.random(n))
    X = xnorm[:, None] * u
    y = random_labels(loss, rng, n, B_y)
    steps = R * 10.0 ** rng.uniform(-7.0, 0.3, n)
    aligned = rng.random(n) < 0.75
    if loss.task == "multiclass":
        K = loss.n_classes
        a = rng.integers(0, K, n)
        b = (a + rng.integers(1, K, n)) % K
        y = np.where(rng.random(n) < 0.5, b, y)  # y = b makes the (e_a - e_b) logit gap adverse
        gap = np.zeros((n, K))
        gap[np.arange(n), a] = 1.0
        gap[np.arange(n), b] = -1.0
        gap /= math.sqrt(2.0)
        two_top = -np.ones((n, K))  # push all classes but a, b down: s ~ (1/2, 1/2, 0, ...)
        two_top[np.arange(n), a] = 0.0
        two_top[np.arange(n), b] = 0.0
        two_top /= np.maximum(np.linalg.norm(two_top, axis=1, keepdims=True), 1e-300)
        choice = rng.integers(0, 3, n)[:, None]
        v = np.where(choice == 0, gap, np.where(choice == 1, two_top, unit_rows(rng, n, K)))
        c = np.where(rng.random(n) < 0.3, 1.0, rng.uniform(-1.0, 1.0, n))
        W = R * c[:, None, None] * v[:, :, None] * u[:, None, :]
        D = np.where(
            aligned[:, None, None],
            gap[:, :, None] * u[:, None, :],
            unit_rows(rng, n, K * p).reshape(n, K, p),
        )
        W_random = unit_rows(rng, n, K * p).reshape(n, K, p) * (R * rng.random(n))[:, None, None]
    else:
        zmax = R * xnorm
        kinks = kink_margins(loss, y)
        kind = rng.integers(0, 3, n)
        target = np.where(kind == 1, rng.choice([-1.0, 1.0], n) * zmax, rng.uniform(-zmax, zmax))
        if len(kinks):
            at_kink = kinks[rng.integers(0, len(kinks), n), np.arange(n)]
            target = np.where(kind == 0, at_kink, target)
        target = np.clip(target, -zmax, zmax)
        W = (target / np.maximum(xnorm, 1e-300))[:, None] * u
        D = np.where(aligned[:, None], u, unit_rows(rng, n, p))
        W_random = unit_rows(rng, n, p) * (R * rng.random(n))[:, None]
    D = D * rng.choice([-1.0, 1.0], n).reshape((-1,) + (1,) * (D.ndim - 1))
    random_rows = (rng.random(n) < 0.2).reshape((-1,) + (1,) * (W.ndim - 1))
    W = np.where(random_rows, W_random, W)
    W2 = project(W + steps.reshape((-1,) + (1,) * (W.ndim - 1)) * D, R)
    return X, y, project(W, R), W2


def row_gradients(loss, W, X, y):
    """Per-row gradient in w, built from ``derivative`` and ``x`` (outer product if multiclass)."""
    if loss.task == "multiclass":
        d = loss.derivative(np.einsum("nkp,np->nk", W, X), y)
        return d[:, :, None] * X[:, None, :]
    return loss.derivative(np.einsum("np,np->n", W, X), y)[:, None] * X


def flat_norm(A):
    return np.sqrt((A**2).reshape(len(A), -1).sum(axis=1))


def observed_suprema(loss, B, R, B_y, alpha, seed):
    rng = np.random.default_rng(seed)
    X, y, W, W2 = sample_domain(loss, B, R, B_y, rng)
    g1, g2 = row_gradients(loss, W, X, y), row_gradients(loss, W2, X, y)
    dist = flat_norm(W - W2)
    diff = flat_norm(g1 - g2)
    keep = dist > 1e-8 * R  # projection onto the sphere can collapse a pair to rounding level
    return {
        "lipschitz": max(flat_norm(g1).max(), flat_norm(g2).max()),
        "smoothness": (diff[keep] / dist[keep]).max(),
        "holder": (diff[keep] / dist[keep] ** alpha).max(),
    }


# ----------------------------------------------------------------------------------------------
# derivative
# ----------------------------------------------------------------------------------------------


@st.composite
def margins_and_labels(draw, loss, n_max=8):
    n = draw(st.integers(1, n_max))
    coord = st.floats(-4.0, 4.0, allow_nan=False)
    if loss.task == "multiclass":
        K = loss.n_classes
        z = np.array(draw(st.lists(coord, min_size=n * K, max_size=n * K))).reshape(n, K)
        y = np.array(draw(st.lists(st.integers(0, K - 1), min_size=n, max_size=n)))
        return z, y
    z = np.array(draw(st.lists(coord, min_size=n, max_size=n)))
    if loss.task == "binary":
        y = np.array(draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=n, max_size=n)))
    else:
        y = np.array(draw(st.lists(st.floats(-3.0, 3.0), min_size=n, max_size=n)))
    return z, y


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@HYPOTHESIS
@given(data=st.data())
def test_derivative_matches_central_differences(loss, data):
    z, y = data.draw(margins_and_labels(loss))
    h = 1e-6
    d = loss.derivative(z, y)
    assert d.shape == z.shape and d.dtype == np.float64
    if loss.task == "multiclass":
        fd = np.empty_like(z)
        for k in range(z.shape[1]):
            e = np.zeros_like(z)
            e[:, k] = h
            fd[:, k] = (loss.value(z + e, y) - loss.value(z - e, y)) / (2 * h)
        np.testing.assert_allclose(d, fd, rtol=1e-5, atol=1e-6)
        return
    kinks = kink_margins(loss, y)
    smooth = np.all(np.abs(z[None, :] - kinks) > 1e-3, axis=0)
    fd = (loss.value(z + h, y) - loss.value(z - h, y)) / (2 * h)
    np.testing.assert_allclose(d[smooth], fd[smooth], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@HYPOTHESIS
@given(data=st.data())
def test_derivative_is_a_subgradient_including_kinks(loss, data):
    """Convexity in z: phi(z') >= phi(z) + <phi'(z), z' - z>, with z drawn at kinks too."""
    z, y = data.draw(margins_and_labels(loss))
    z_other, _ = data.draw(margins_and_labels(loss, n_max=1))
    if loss.task != "multiclass":
        kinks = kink_margins(loss, y)
        if len(kinks) and data.draw(st.booleans()):
            z = kinks[0]  # exactly at the (first) kink of every row
    z_other = np.broadcast_to(z_other[0], z.shape) * 1.5
    lhs = loss.value(z_other, y)
    step = (loss.derivative(z, y) * (z_other - z)).reshape(len(y), -1).sum(axis=1)
    rhs = loss.value(z, y) + step
    assert np.all(lhs >= rhs - 1e-9 * (1 + np.abs(rhs)))


def test_subgradients_at_the_kinks_are_in_the_subdifferential():
    y = np.array([-1.0, 1.0])
    g = HingeLoss().derivative(y, y)  # y z = 1
    assert np.all((g * y >= -1.0) & (g * y <= 0.0))
    g = PowerLoss(1).derivative(np.array([0.3, -2.0]), np.array([0.3, -2.0]))  # r = 0
    assert np.all(np.abs(g) <= 1.0)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_value_and_derivative_shapes_and_dtype(loss):
    rng = np.random.default_rng(0)
    n = 7
    if loss.task == "multiclass":
        z = rng.integers(-3, 3, (n, loss.n_classes))
    else:
        z = rng.integers(-3, 3, n)
    y = random_labels(loss, rng, n, 1.0)
    if loss.task == "binary":
        y = y.astype(int)
    assert loss.value(z, y).shape == (n,)
    assert loss.value(z, y).dtype == np.float64
    assert loss.derivative(z, y).shape == z.shape
    assert loss.derivative(z, y).dtype == np.float64


def test_logistic_losses_are_stable_at_extreme_margins():
    big = 1e4
    with np.errstate(over="raise", divide="raise", invalid="raise"):  # underflow is benign
        log = LogisticLoss()
        z = np.array([-big, big, 0.0])
        y = np.ones(3)
        np.testing.assert_allclose(log.value(z, y), [big, 0.0, math.log(2.0)])
        np.testing.assert_allclose(log.derivative(z, y), [-1.0, 0.0, -0.5])
        multi = MultinomialLogisticLoss(3)
        z = np.array([[big, 0.0, -big], [big, 0.0, -big]])
        y = np.array([2, 0])
        np.testing.assert_allclose(multi.value(z, y), [2 * big, 0.0])
        np.testing.assert_allclose(multi.derivative(z, y), [[1.0, 0.0, -1.0], [0.0, 0.0, 0.0]])


def test_multinomial_with_two_classes_is_logistic_on_the_logit_difference():
    rng = np.random.default_rng(1)
    z = rng.normal(scale=3.0, size=(50, 2))
    y = rng.integers(0, 2, 50)
    margin, sign = z[:, 1] - z[:, 0], 2.0 * y - 1.0
    multi, log = MultinomialLogisticLoss(2), LogisticLoss()
    np.testing.assert_allclose(multi.value(z, y), log.value(margin, sign))
    d = multi.derivative(z, y)
    np.testing.assert_allclose(d[:, 1], log.derivative(margin, sign))
    np.testing.assert_allclose(d[:, 0], -log.derivative(margin, sign))


def test_special_cases_of_the_parametric_losses():
    rng = np.random.default_rng(2)
    z, y = rng.normal(size=40), rng.normal(size=40)
    sign = rng.choice([-1.0, 1.0], 40)
    np.testing.assert_allclose(SquaredHingeLoss().value(z, sign), np.maximum(0, 1 - sign * z) ** 2)
    np.testing.assert_allclose(
        QHingeLoss(2).derivative(z, sign), SquaredHingeLoss().derivative(z, sign)
    )
    np.testing.assert_allclose(PowerLoss(1).value(z, y), np.abs(y - z))
    np.testing.assert_allclose(PowerLoss(2).value(z, y), (y - z) ** 2)
    # Huber: quadratic for a threshold beyond every residual, ~ eps |r| for a tiny threshold
    np.testing.assert_allclose(HuberLoss(100.0).value(z, y), 0.5 * (y - z) ** 2)
    np.testing.assert_allclose(HuberLoss(1e-9).value(z, y) / 1e-9, np.abs(y - z), rtol=1e-6)


def test_multinomial_rejects_labels_and_shapes_out_of_range():
    loss = MultinomialLogisticLoss(3)
    with pytest.raises(ValueError, match="0..2"):
        loss.value(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(ValueError, match="0..2"):
        loss.derivative(np.zeros((2, 3)), np.array([-1, 0]))
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        loss.value(np.zeros((2, 4)), np.array([0, 1]))


# ----------------------------------------------------------------------------------------------
# constants
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("domain", DOMAINS, ids=[f"B={b},R={r},By={by}" for b, r, by in DOMAINS])
@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_constants_match_random_search(loss, domain):
    B, R, B_y = domain
    c = loss.constants(B, R, B_y)
    assert isinstance(c, LossConstants)
    assert 0.0 <= c.holder_exponent <= 1.0
    seed = zlib.crc32(f"{loss!r} {domain}".encode())
    obs = observed_suprema(loss, B, R, B_y, c.holder_exponent, seed)
    tol = 1 + 1e-5  # rounding in differences of gradients at distances >= 1e-8 R

    assert math.isfinite(c.lipschitz)  # every loss is Lipschitz on a bounded ball
    assert obs["lipschitz"] <= c.lipschitz * tol
    assert obs["lipschitz"] >= 0.8 * c.lipschitz

    assert obs["holder"] <= c.holder_constant * tol
    assert obs["holder"] >= 0.8 * c.holder_constant

    if c.smoothness is None:
        assert is_non_differentiable(loss)
    elif math.isfinite(c.smoothness):
        assert obs["smoothness"] <= c.smoothness * tol
        assert obs["smoothness"] >= 0.8 * c.smoothness
    else:
        # gradient not Lipschitz: ratios near the kink blow up (well beyond the 2 B^2 of q = 2)
        assert obs["smoothness"] > 10 * 2 * B**2


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_smoothness_is_none_exactly_for_non_differentiable_losses(loss):
    c = loss.constants(1.0, 2.0, 1.0)
    assert (c.smoothness is None) == is_non_differentiable(loss)
    if c.holder_exponent == 1.0:
        assert c.smoothness == c.holder_constant
    else:
        assert c.smoothness is None or c.smoothness == math.inf


@pytest.mark.parametrize(
    "loss, alpha",
    [
        (LogisticLoss(), 1.0),
        (MultinomialLogisticLoss(4), 1.0),
        (HingeLoss(), 0.0),
        (SquaredHingeLoss(), 1.0),
        (QHingeLoss(1.25), 0.25),
        (PowerLoss(1), 0.0),
        (PowerLoss(1.75), 0.75),
        (PowerLoss(2), 1.0),
        (HuberLoss(1.0), 1.0),
    ],
    ids=repr,
)
def test_holder_exponents_follow_the_spec_table(loss, alpha):
    """spec/wang_holder.md §1.3: hinge/absolute 0, q-norm losses q - 1, smooth losses 1."""
    assert loss.constants(1.0, 1.0, 1.0).holder_exponent == pytest.approx(alpha)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_no_growth_is_claimed(loss):
    # a point mass at x = 0 makes every loss constant in w: no kappa-growth for all distributions
    assert loss.constants(1.0, 2.0, 1.0).growth is None
    assert loss.constants(1.0, None, 1.0).growth is None


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_lipschitz_on_the_whole_space(loss):
    """radius=None: finite L exactly for the Lipschitz losses, and it bounds any ball."""
    B, B_y = 1.0, 1.0
    global_L = loss.constants(B, None, B_y).lipschitz
    big = observed_suprema(loss, B, 1e6, B_y, 1.0, seed=3)["lipschitz"]
    lipschitz_loss = not isinstance(loss, QHingeLoss) and not (
        isinstance(loss, PowerLoss) and loss.p > 1
    )
    if lipschitz_loss:
        assert math.isfinite(global_L)
        assert big <= global_L * (1 + 1e-9)
        assert big >= 0.5 * global_L
        for R in (0.1, 1.0, 10.0):
            assert loss.constants(B, R, B_y).lipschitz <= global_L * (1 + 1e-12)
    else:
        assert global_L == math.inf
        assert big > 20 * loss.constants(B, 1.0, B_y).lipschitz


def test_lipschitz_of_the_ball_is_needed_for_non_lipschitz_losses():
    assert PowerLoss(2).constants(1.0, 1.0, 1.0).lipschitz < PowerLoss(2).constants(
        1.0, 2.0, 1.0
    ).lipschitz


@st.composite
def ball_points(draw, dim, radius):
    """A point of the closed ball of the given radius, on its sphere half of the time."""
    v = np.array(draw(st.lists(st.floats(-1.0, 1.0), min_size=dim, max_size=dim)))
    norm = np.linalg.norm(v)
    if norm == 0.0:
        return v
    if draw(st.booleans()):
        return radius * v / norm
    return v * (radius / max(norm, math.sqrt(dim)))


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@HYPOTHESIS
@given(data=st.data())
def test_constants_are_never_exceeded(loss, data):
    B, R, B_y = data.draw(st.sampled_from(DOMAINS))
    c = loss.constants(B, R, B_y)
    p = 3
    shape = (loss.n_classes, p) if loss.task == "multiclass" else (p,)
    size = int(np.prod(shape))
    x = data.draw(ball_points(p, B))[None, :]
    W = data.draw(ball_points(size, R)).reshape((1,) + shape)
    W2 = data.draw(ball_points(size, R)).reshape((1,) + shape)
    if loss.task == "multiclass":
        y = np.array([data.draw(st.integers(0, loss.n_classes - 1))])
    elif loss.task == "binary":
        y = np.array([data.draw(st.sampled_from([-1.0, 1.0]))])
    else:
        y = np.array([data.draw(st.floats(-B_y, B_y))])
    g1, g2 = row_gradients(loss, W, x, y), row_gradients(loss, W2, x, y)
    tol = 1 + 1e-7
    assert flat_norm(g1)[0] <= c.lipschitz * tol + 1e-12
    dist, diff = flat_norm(W - W2)[0], flat_norm(g1 - g2)[0]
    if dist > 0:
        assert diff <= c.holder_constant * dist**c.holder_exponent * tol + 1e-12
        if c.smoothness is not None:
            assert diff <= c.smoothness * dist * tol + 1e-12


# ----------------------------------------------------------------------------------------------
# validation and factory
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: QHingeLoss(1.0), r"q must be a real number in \(1, 2\]"),
        (lambda: QHingeLoss(2.5), r"q must be a real number in \(1, 2\]"),
        (lambda: QHingeLoss(float("nan")), r"q must"),
        (lambda: PowerLoss(0.99), r"p must be a real number in \[1, 2\]"),
        (lambda: PowerLoss(2.01), r"p must be a real number in \[1, 2\]"),
        (lambda: PowerLoss("2"), r"p must"),
        (lambda: MultinomialLogisticLoss(1), r"n_classes must be an integer >= 2"),
        (lambda: MultinomialLogisticLoss(2.5), r"n_classes must be an integer >= 2"),
        (lambda: HuberLoss(0.0), r"epsilon must be a real number in \(0, inf\)"),
        (lambda: HuberLoss(-1.0), r"epsilon must"),
        (lambda: get_loss("q_hinge", q=0.5), r"q must be a real number in \(1, 2\]"),
        (lambda: get_loss("power", p=3), r"p must be a real number in \[1, 2\]"),
        (lambda: get_loss("huber", epsilon=0), r"epsilon must"),
        (lambda: get_loss("multinomial_logistic", n_classes=1), r"n_classes must"),
    ],
)
def test_parameters_out_of_range_raise(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("loss", [PowerLoss(1), PowerLoss(1.5), HuberLoss(1.0)], ids=repr)
def test_regression_losses_require_y_bound(loss):
    with pytest.raises(ValueError, match="y_bound"):
        loss.constants(1.0, 1.0)
    with pytest.raises(ValueError, match=r"y_bound must be a real number in \[0, inf\)"):
        loss.constants(1.0, 1.0, -1.0)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_domain_bounds_are_validated(loss):
    with pytest.raises(ValueError, match=r"data_norm must be a real number in \(0, inf\)"):
        loss.constants(0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"radius must be a real number in \(0, inf\)"):
        loss.constants(1.0, -1.0, 1.0)


def test_classification_losses_do_not_need_y_bound():
    assert LogisticLoss().constants(1.0, 1.0).lipschitz > 0
    assert HingeLoss().constants(1.0, None).lipschitz > 0


@pytest.mark.parametrize(
    "name, params, cls",
    [
        ("logistic", {}, LogisticLoss),
        ("multinomial_logistic", {"n_classes": 3}, MultinomialLogisticLoss),
        ("hinge", {}, HingeLoss),
        ("squared_hinge", {}, SquaredHingeLoss),
        ("q_hinge", {"q": 1.5}, QHingeLoss),
        ("power", {"p": 1.5}, PowerLoss),
        ("huber", {"epsilon": 1.35}, HuberLoss),
    ],
)
def test_get_loss_builds_the_named_loss(name, params, cls):
    loss = get_loss(name, **params)
    assert type(loss) is cls and isinstance(loss, MarginLoss)
    assert loss.name == name
    assert loss.task in {"binary", "multiclass", "regression"}
    for key, value in params.items():
        assert getattr(loss, key) == value
    assert get_loss(name, **params) == loss


@pytest.mark.parametrize(
    "name, params, match",
    [
        ("ridge", {}, "name must be one of"),
        (None, {}, "name must be one of"),
        ("q_hinge", {}, r"requires the parameter\(s\) \['q'\]"),
        ("power", {"q": 1.5}, "unexpected"),
        ("hinge", {"q": 1.5}, "unexpected"),
        ("squared_hinge", {"q": 2}, "unexpected"),
    ],
)
def test_get_loss_rejects_bad_arguments(name, params, match):
    with pytest.raises(ValueError, match=match):
        get_loss(name, **params)
