"""Statistical privacy audits of the released models (DESIGN.md, "Tests that make a privacy claim
believable", item 2; issue 18): Snowball-SGD on its worst-case row order, and the estimators end to
end through their public API (a fresh ``PrivacyAccountant`` and ``random_state`` per fit), every
path that 'auto' takes at small n included, and the distinct code paths of secure mode (issue 17).
The audits are the catalogue of ``benchmarks/audits.py`` (neighbours, statistic and claim of each
documented there); each proves its power by catching the mechanism with its noise divided by 2, or
by the smallest factor its release can show, and ``tests/test_audit_power.py`` measures that power
over 20 seeds.
"""

import warnings

import numpy as np
import pytest

import skdpsco._secure as secure
import skdpsco._noise as noise
from _audits import audit_params, check_audit
from benchmarks.audits import AUDITS, weakened
from skdpsco.linear_model import PrivacyWarning


@pytest.mark.parametrize("name", audit_params("snowball"))
def test_snowball_audit_respects_the_claim_and_catches_halved_noise(name):
    # The first row of a 5-step pass flips its label inside the smoothed hinge's kink, every other
    # row has zero gradient: the release is the first step's shift plus all the noise of the pass.
    check_audit(name)


@pytest.mark.parametrize(
    "name",
    audit_params(
        "svm_auto_intercept", "logistic_multinomial", "svm_one_vs_rest", "svm_one_vs_rest_laplace",
        "lad_regression", "least_squares_regression", "ledger_composition", "estimator_snowball",
        "huber_regression", "quantile_regression", "poisson_regression",
    ),
)
def test_estimator_audit_respects_the_claim_and_catches_the_weakened_noise(name):
    # 'auto' -> noisy GD with the intercept column and the smoothed hinge; the multinomial and
    # one-vs-rest compositions; Laplace one-vs-rest at delta > 0 (three randomized-response
    # events composed by the accountant); smoothed LAD regression; least squares by one Newton step
    # (SSP), its first gradient charged at the public start; three fits on one ledger
    # against its spent(); Snowball behind the estimator's row shuffle; the Huber, pinball (feature
    # flip: gradients -+q) and Poisson (feature flip at target y_bound, default log-mean window)
    # regressors, each differing row moving the gradient by (nearly) the 2 L its loss charges.
    check_audit(name)


SECURE_AUDITS = {
    # name: the draw points its noise comes from (the knob of its Audit weakens each)
    "svm_auto_intercept_secure": {"gaussian_noise"},
    "svm_phased_secure": {"discrete_gaussian_noise"},
    "private_bound_secure": {"discrete_gaussian_noise"},
    "lad_private_bound_secure": {"gaussian_noise", "discrete_gaussian_noise"},
    "svm_laplace_pure_secure": {"discrete_laplace_noise"},
    "least_squares_regression_secure": {"discrete_gaussian_noise"},
}


@pytest.mark.parametrize("name", audit_params(*SECURE_AUDITS))
def test_secure_mode_audit_respects_the_claim_and_catches_the_weakened_noise(name):
    # Secure mode (skdpsco.config_context(secure_noise=True), no seed): noisy GD's continuous
    # Gaussian steps from the OS's CSPRNG; one Phased-SGD release on the grid (discrete Gaussian,
    # zCDP accounting); the private bound's grid histogram; the target bound composed with noisy
    # GD; the pure-DP discrete Laplace release at delta = 0; least squares' Newton step (gradient
    # and Hessian on the grid).
    check_audit(name)


def _statistics(setup, n_fits):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return np.array([(setup.statistic or float)(setup.run(setup.dataset_0, seed)) for seed in range(n_fits)])


@pytest.mark.parametrize("name", list(SECURE_AUDITS))
def test_secure_audit_draws_all_its_noise_from_the_os_through_its_knob(name):
    # The power of a secure audit means something only if its knob reaches every noise draw of
    # the path: each draw point is called with a generator over the OS's CSPRNG, and with the
    # noise divided by 10**6 the release no longer varies (no draw escapes the knob).
    audit = AUDITS[name]
    setup = audit.setup
    modules = {"gaussian_noise": noise, "discrete_gaussian_noise": secure, "discrete_laplace_noise": secure,
               "laplace_noise": noise}
    calls = []
    originals = {point: getattr(module, point) for point, module in modules.items()}
    try:
        for point, module in modules.items():
            setattr(module, point, lambda rng, scale, shape, p=point: calls.append((p, secure.is_secure(rng)))
                    or originals[p](rng, scale, shape))
        honest = _statistics(setup, 40)
    finally:
        for point, module in modules.items():
            setattr(module, point, originals[point])
    assert {point for point, _ in calls} == SECURE_AUDITS[name]
    assert all(is_secure for _, is_secure in calls)
    with weakened(audit.knob, 1e6):
        quiet = _statistics(setup, 10)
    assert np.std(honest) > 0
    assert np.std(quiet) <= 1e-4 * np.std(honest)
