"""Black-box audit of the scaled default fit (issue 15: private feature scaling inside ``fit``).

The white-box checks of every release of a scaled fit (the magnitude histogram, the moments, the
noisy GD steps on the standardised rows, the neighbour replayed on the released statistics) are
in ``tests/test_whitebox.py``. Here the whole fit is audited end to end through the public API
(:func:`skdpsco.audit.audit_mechanism`; the audits ``scaled_svm_*`` are in the catalogue of
``benchmarks/audits.py``, so that ``benchmarks/audit_power.py --only`` measures them, with its conventions:
tiny ``n``, worst-case neighbours, a projection of the release, ``AUDIT_DELTA = 1e-2``), against
the fit's own ``epsilon_``: the composition of the magnitudes (0.1 of ``mu**2``), the moments
(0.25) and the solver (the rest).

What a replace-one neighbour can show of a scaled fit. The released model is ``coef_``,
``intercept_`` folded from the solver's ``(w, b)`` on the standardised rows with the noisy mean and
scale, and ``feature_scales_``. The magnitude histogram is seen only through ``feature_scales_``,
a thresholded mode that a single row almost never moves at small ``n``: its share is invisible.
The solver's share is seen in full when the differing row's hinge gradient flips: a label flip of
a row the standardisation clips to ``z = 1`` (every other row at ``+-B`` too, in groups of four
whose gradients cancel inside the hinge's kink, so that the rest of the run adds noise only; the
scale then stays near ``B`` and the differing row's standardised value near 1 whatever the noise).
A label flip leaves the moments unchanged, and a feature flip halves the solver's shift: the best
single statistic sees about 0.73 of the claimed ``mu`` (``sqrt(0.65)`` times the 0.9 of the
released tail average). The statistic is the released decision value at the differing row,
``w z + b`` in the standardised units whatever the released scales (the shift is along ``(1,
1)``). With the whole fit's noise halved (every Gaussian draw: scaling and solver) it sees about
1.46 ``mu``: the ideal audit of that shift at ``epsilon = 2`` catches it in 97 % of seeds at
10 000 trials per dataset, 75 % at 5 000. Measured on the magnitudes path (``n = 21``, before rows
that few switched to the row bound): at 10 000 trials 16 of 20 seeds (0.80, the release showing a
little less than the ideal's 0.73 of the claimed ``mu``); at 20 000 trials (the power sweep's, slow:
52 minutes on a loaded core, after the moments became two releases, 0b8805e) 19 of 20 (0.95, bounds
1.64-3.41 against the claim 2.000; honest 1.019), the 95 % goal of issue 18.

Rows too few for the magnitudes at the budget (``ScalingPlan.resolves_magnitudes``) get one private
row bound instead (5 % of ``mu**2``, so the solver keeps 0.70 of it: about 0.75 of the claimed ``mu``
is seen). Both paths are audited: ``scaled_svm_default`` at ``n = 21`` (row bound) and
``scaled_svm_magnitudes`` at ``n = 37`` (magnitudes). Measured on the row-bound path (the power
sweep, 20 000 trials, 42 minutes on a loaded core): honest 1.087 within the claim 2.000; the whole
fit's noise halved caught by 19 of 20 seeds (0.95, bounds 1.75-3.58). On the magnitudes path at
``n = 37`` (40 minutes): honest 0.926; noise halved caught by 19 of 20 seeds (0.95, bounds 1.73-3.17).
"""

import math
import warnings

import numpy as np
import pytest

from benchmarks.audits import (
    LATE_MOMENT_ROWS,
    LATE_ROWS,
    SCALED_LATE_ROWS,
    SCALED_MAGNITUDES,
    SCALED_ROW_BOUND,
    run_audit,
)
from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco import rows as fused_rows
from skdpsco.linear_model import _bounds, _scaling

EPSILON = 2.0
POWER_SEEDS = 20


AUDIT, AUDIT_MAGNITUDES, AUDIT_LATE_ROWS = SCALED_ROW_BOUND, SCALED_MAGNITUDES, SCALED_LATE_ROWS
AUDITS = {audit.name: audit for audit in (AUDIT, AUDIT_MAGNITUDES, AUDIT_LATE_ROWS)}


def _mu(events) -> list:
    return [1.0 / e.noise_multiplier for e in events]


def test_the_audited_fits_compose_the_scaling_and_the_solver():
    """The audited fits are the scaled default on either side of the magnitudes' limit: four Gaussian
    releases composed (the row bound or the magnitudes, sums, squares, noisy GD) whose epsilon is the
    claim, every row clipped onto the ball and standardised to 1."""
    for audit in AUDITS.values():
        setup = audit.setup
        model = setup.run(setup.dataset_0, 0)
        assert setup.claimed_epsilon == model.epsilon_ and 0.998 * EPSILON <= model.epsilon_ <= EPSILON
        assert model.algorithm_ == "noisy_gd"
        if audit is AUDIT:
            bound_event, moments_event, solver_event = model.dp_event_.events
            first, moments = bound_event, _mu(moments_event.events)
            share = _bounds.BOUND_SHARE
            assert hasattr(model, "data_norm_") and np.unique(model.feature_scales_).size == 1
        else:
            moments_event, solver_event = model.dp_event_.events
            first, *moments = moments_event.events
            moments, share = _mu(moments), _scaling.MAGNITUDE_SHARE
            assert not hasattr(model, "data_norm_")
        assert len(moments) == 2  # sums, squares
        if audit is AUDIT_LATE_ROWS:  # the late rows are gathered after the releases, scaled
            assert _late_rows(setup) == LATE_ROWS - LATE_MOMENT_ROWS
        # the bound's histogram has l2-sensitivity sqrt(2) (noise_multiplier sigma / sqrt(2))
        assert _mu([first])[0] ** 2 / (moments[0] ** 2 + moments[1] ** 2) == pytest.approx(share / _scaling.SCALING_SHARE)


def _late_rows(setup) -> int:
    """The rows the fit of ``setup`` gathers after its releases (:func:`skdpsco.rows.gather_standardised`)."""
    gathered = []
    original = fused_rows._fused.gather_standardised

    def spy(X, order, *args, **options):
        gathered.append(len(order))
        return original(X, order, *args, **options)

    fused_rows._fused.gather_standardised = spy
    try:
        setup.run(setup.dataset_0, 0)
    finally:
        fused_rows._fused.gather_standardised = original
    return sum(gathered)


@pytest.mark.parametrize("name", AUDITS)
def test_scaled_fit_audit_within_its_claim_and_noise_over_4_caught(name):
    """Fast: the honest fit within ``epsilon_`` at 1500 trials per dataset, every Gaussian draw of
    the fit (scaling and solver) / 4 above it at 600 trials."""
    audit = AUDITS[name]
    claimed = audit.setup.claimed_epsilon
    honest = run_audit(audit, 0, n_trials=1500)
    weakened = run_audit(audit, 0, 4.0, n_trials=600)
    print(f"\n{name}: claim {claimed:.3f}; honest {honest.epsilon_lower_bound:.3f}, "
          f"noise / 4 {weakened.epsilon_lower_bound:.3f}")
    assert honest.epsilon_lower_bound <= claimed, honest
    assert weakened.violates(claimed), weakened


@pytest.mark.slow
@pytest.mark.parametrize("name", AUDITS)
def test_scaled_fit_audit_power_against_halved_noise(name):
    """The honest fit within its claim at 20 000 trials, and the whole fit's noise halved caught by
    at least 19 of 20 seeds (about 50 minutes on one core each; see the module docstring)."""
    audit = AUDITS[name]
    claimed = audit.setup.claimed_epsilon
    honest = run_audit(audit, 0)
    bounds = [run_audit(audit, seed, 2.0).epsilon_lower_bound for seed in range(POWER_SEEDS)]
    power = np.mean([b > claimed for b in bounds])
    print(f"\n{name}: claim {claimed:.3f}; honest {honest.epsilon_lower_bound:.3f}; noise / 2 bounds "
          f"{np.round(bounds, 3).tolist()}; power {power:.2f}")
    assert honest.epsilon_lower_bound <= claimed, honest
    assert power >= 0.95


# -- a data-dependent error (issue 15, found reading the scaled fit's clips) -----------------------------


def test_a_finite_row_never_makes_the_scaled_fit_raise():
    """``D``: a feature whose entries are about ``1e-12`` (its released scale ``2**-38``); ``D'``:
    one of them replaced by the finite ``1e300``. ``x / s`` used to overflow to infinity, and the clip
    after the magnitudes raised the NaN / infinity input error: an outcome with probability 1 on ``D'``
    and 0 on ``D``, infinite privacy loss (an error leaves ``fit`` like a release). Now divided
    without overflow (``_scaling.divide_by_powers_of_two``), with no warning either, and the model
    predicts the huge row."""
    rng = np.random.default_rng(0)
    n = 2000
    X = np.column_stack([rng.uniform(1.0, 2.0, n) * 1e-12, rng.normal(size=n)])
    y = np.arange(n) % 2
    neighbour = X.copy()
    neighbour[0, 0] = 1e300
    for rows in (X, neighbour):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a data-dependent warning would be a release too
            model = DPLogisticRegression(epsilon=1.0, delta=1e-6, classes=[0, 1], random_state=0,
                                         accountant=PrivacyAccountant()).fit(rows, y)
            assert np.all(np.isfinite(model.decision_function(neighbour[:3])))
        assert np.all(np.isfinite(model.coef_)) and math.isfinite(float(model.intercept_[0]))
