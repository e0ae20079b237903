"""The one-dimensional inverse-sensitivity mechanism (asi_growth.md §3.2, §3.3, P11): closed-form
score against brute force, its sensitivity, the corrected exponent, utility, and a privacy audit
with its power check."""


import numpy as np
import pytest

import skdpsco.location as location
from skdpsco.accounting import epsilon_of
from skdpsco.accounting import pure_dp_event
from skdpsco.location import inverse_sensitivity_location, inverse_sensitivity_scores
from _audits import audit_params, check_audit


def brute_force_scores(values, grid, lower, upper, p, rho, fine=4001):
    """``inf_{u in [t - rho, t + rho] ∩ [lower, upper]} dist(0, ∂f(u))`` on a dense sub-grid plus the data
    points (where the subdifferential of p = 1 is an interval)."""
    out = []
    for t in grid:
        a, b = max(lower, t - rho), min(upper, t + rho)
        us = np.concatenate([np.linspace(a, b, fine), values[(values >= a) & (values <= b)]])
        diff = us[:, None] - values[None, :]
        if p == 1.0:
            left = np.mean(np.where(diff > 0, 1.0, -1.0), axis=1)  # diff == 0 counts -1 from the left
            right = np.mean(np.where(diff >= 0, 1.0, -1.0), axis=1)
        else:
            left = right = np.mean(p * np.sign(diff) * np.abs(diff) ** (p - 1), axis=1)
        out.append(np.min(np.maximum(0.0, np.maximum(left, -right))))
    return np.array(out)


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0])
def test_closed_form_score_matches_brute_force(p):
    rng = np.random.default_rng(0)
    values = np.round(rng.uniform(0, 1, 15), 2)  # ties and grid-aligned values included
    grid = np.linspace(0, 1, 41)
    fast = inverse_sensitivity_scores(values, grid, 0.0, 1.0, p, 0.0125)
    slow = brute_force_scores(values, grid, 0.0, 1.0, p, 0.0125)
    np.testing.assert_allclose(fast, slow, atol=2e-3 if p > 1 else 1e-12)


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0])
def test_score_sensitivity_is_at_most_two_l_over_n(p):
    rng = np.random.default_rng(1)
    n, grid = 9, np.linspace(0, 1, 201)
    L = p * 1.0 ** (p - 1)
    worst = 0.0
    for _ in range(200):
        values = rng.choice([0.0, 1.0, rng.uniform()], size=n)
        other = values.copy()
        other[rng.integers(n)] = rng.choice([0.0, 1.0, rng.uniform()])
        gap = np.max(np.abs(inverse_sensitivity_scores(values, grid, 0, 1, p, 0.0025) - inverse_sensitivity_scores(other, grid, 0, 1, p, 0.0025)))
        worst = max(worst, gap)
    assert worst <= 2 * L / n + 1e-12
    assert worst >= 0.5 * 2 * L / n  # the bound is nearly attained (extreme replacements)


def test_exponent_is_the_corrected_epsilon_n_g_over_4l(monkeypatch):
    # §3.2 [erratum]: exp(-eps n G / (2 L)) is only 2 eps-DP by the exponential-mechanism argument.
    captured = []
    draw = location.sample_exponential
    monkeypatch.setattr(location, "sample_exponential", lambda rng, lw: captured.append(lw) or draw(rng, lw))
    values = np.array([0.1, 0.4, 0.45, 0.9, 0.95])
    inverse_sensitivity_location(values, 0.7, (0.0, 2.0), p=1.5, grid_size=101, random_state=0)
    L = 1.5 * 2.0**0.5
    scores = inverse_sensitivity_scores(values, np.linspace(0, 2, 101), 0.0, 2.0, 1.5, 0.01)
    np.testing.assert_allclose(captured[0], -0.7 * 5 * scores / (4 * L))


def test_default_rho_gives_a_zero_score_grid_point_at_the_minimiser():
    values = np.random.default_rng(2).uniform(0, 1, 50)
    grid = np.linspace(0, 1, 11)
    scores = inverse_sensitivity_scores(values, grid, 0.0, 1.0, 2.0, 0.05)
    assert grid[np.argmin(scores)] == pytest.approx(round(values.mean(), 1)) and scores.min() == 0.0


@pytest.mark.parametrize("p, target", [(1.0, np.median), (2.0, np.mean)])
def test_estimate_is_close_to_the_non_private_location(p, target):
    rng = np.random.default_rng(3)
    values = rng.normal(0.3, 1.0, 2000)
    errors = [
        abs(inverse_sensitivity_location(values, 1.0, (-5, 5), p=p, random_state=s).value - target(np.clip(values, -5, 5)))
        for s in range(20)
    ]
    print(f"\np={p}: median |error| {np.median(errors):.4f}")
    assert np.median(errors) < 0.05


def test_release_is_pure_epsilon_dp():
    est = inverse_sensitivity_location([0.2, 0.4], 1.3, (0, 1), random_state=0)
    assert est.dp_event == pure_dp_event(1.3) and 0 <= est.value <= 1
    for delta in (1e-3, 1e-5):
        assert epsilon_of(est.dp_event, delta) <= 1.3


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"bounds": (1.0, 0.0)}, "lower < upper"),
        ({"p": 0.5}, "p must be >= 1"),
        ({"grid_size": 1}, "grid_size"),
        ({"rho": -1.0}, "rho"),
        ({"values": [[1.0, 2.0]]}, "1-D"),
        ({"values": [np.nan]}, "finite"),
    ],
)
def test_bad_inputs_are_refused(kwargs, match):
    args = {"values": [0.5], "epsilon": 1.0, "bounds": (0.0, 1.0), **kwargs}
    values, epsilon, bounds = args.pop("values"), args.pop("epsilon"), args.pop("bounds")
    with pytest.raises(ValueError, match=match):
        inverse_sensitivity_location(values, epsilon, bounds, **args)


# -- privacy audit ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", audit_params("inverse_sensitivity"))
def test_audit_respects_the_claim_and_catches_a_doubled_exponent(name):
    # benchmarks/audits.py: four values, one moves from 0 to 1, the pair with the largest privacy
    # loss of an output (0.82 epsilon; the median of five jumping from 0 to 1 reaches 0.25 epsilon).
    # The weakening runs the exponential mechanism at twice its epsilon.
    check_audit(name)
