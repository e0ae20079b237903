"""Statistical privacy audits of the released models (DESIGN.md, "Tests that make a privacy claim
believable", item 2; issue 18): Snowball-SGD on its worst-case row order, and the estimators end to
end through their public API (a fresh ``PrivacyAccountant`` and ``random_state`` per fit), every
path that 'auto' takes at small n included. The audits are the catalogue of
``benchmarks/audits.py`` (neighbours, statistic and claim of each documented there); each proves
its power by catching the mechanism with its noise divided by 2, or by the smallest factor its
release can show, and ``tests/test_audit_power.py`` measures that power over 20 seeds.
"""

import pytest

from _audits import audit_params, check_audit


@pytest.mark.parametrize("name", audit_params("snowball"))
def test_snowball_audit_respects_the_claim_and_catches_halved_noise(name):
    # The first row of a 5-step pass flips its label inside the smoothed hinge's kink, every other
    # row has zero gradient: the release is the first step's shift plus all the noise of the pass.
    check_audit(name)


@pytest.mark.parametrize(
    "name",
    audit_params(
        "svm_auto_intercept", "logistic_multinomial", "svm_one_vs_rest", "svm_one_vs_rest_laplace",
        "lad_regression", "ledger_composition", "estimator_snowball",
    ),
)
def test_estimator_audit_respects_the_claim_and_catches_the_weakened_noise(name):
    # 'auto' -> noisy GD with the intercept column and the smoothed hinge; the multinomial and
    # one-vs-rest compositions; Laplace one-vs-rest at delta > 0 (three randomized-response
    # events composed by the accountant); smoothed LAD regression; three fits on one ledger
    # against its spent(); Snowball behind the estimator's row shuffle.
    check_audit(name)
