"""The growth solvers (``'localization'``, ``'epoch_growth'``, asi_growth.md) from the estimators:
pure DP (``delta=0`` -> Laplace) where supported and a clear error elsewhere, the ``kappa_lower``
defaults (§1.5, §6), and ``step_scale`` pass-through with the public default rule."""

import numpy as np
import pytest

from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant
from skdpsco.accounting import pure_dp_event


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3)) / 2
    return X, (X[:, 0] > 0).astype(int), X @ [0.5, -0.3, 0.2], rng.integers(0, 3, 2000)


@pytest.mark.parametrize("algorithm", ["localization", "epoch_growth"])
def test_pure_dp_from_the_estimator_uses_laplace_and_reports_epsilon(data, algorithm):
    X, y, _, _ = data
    ledger = PrivacyAccountant(epsilon=2.0, delta=1e-6)
    model = DPLogisticRegression(epsilon=1.0, delta=0.0, algorithm=algorithm, accountant=ledger, random_state=0,
                                 feature_scaling=None)
    model.fit(X, y)
    assert model.solver_info_["noise"] == "laplace"
    assert model.delta_ == 0.0 and 0.999 < model.epsilon_ <= 1.0
    assert model.dp_event_ == pure_dp_event(1.0)
    assert ledger.spent()[0] <= 1.0
    assert model.score(X, y) > 0.5


def test_pure_dp_with_several_tasks_splits_epsilon_by_basic_composition(data):
    X, _, _, y3 = data
    model = DPHingeSVM(epsilon=1.5, delta=0.0, algorithm="localization", accountant=PrivacyAccountant(),
                       feature_scaling=None).fit(X, y3)
    assert model.dp_event_.count == 3 and model.dp_event_.event == pure_dp_event(0.5)
    assert 1.49 < model.epsilon_ <= 1.5


@pytest.mark.parametrize("algorithm", ["auto", "snowball", "objective_perturbation", "noisy_gd"])
def test_pure_dp_is_refused_by_algorithms_without_it(data, algorithm):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=r"delta=0 \(pure epsilon-DP\) is supported by algorithm in \['epoch_growth', 'localization'\]"):
        DPLogisticRegression(delta=0.0, algorithm=algorithm, accountant=PrivacyAccountant()).fit(X, y)


def test_negative_delta_is_still_refused(data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="delta"):
        DPLogisticRegression(delta=-1e-9, algorithm="localization").fit(X, y)


@pytest.mark.parametrize(
    "make, target, kappa_lower",
    [
        (lambda: DPLogisticRegression(alpha=0.1), "binary", 2.0),  # ridge: strongly convex, kappa = 2
        (lambda: DPLogisticRegression(), "binary", 2.0),
        (lambda: DPLpRegression(p=2.0, y_bound=2.0, radius=2.0), "regression", 2.0),  # p-power: kappa = p
        (lambda: DPLpRegression(p=1.0, y_bound=2.0, radius=2.0), "regression", 1.5),  # sharp: floored at 1.5
        (lambda: DPLpRegression(p=1.0, alpha=0.1, y_bound=2.0, radius=2.0), "regression", 1.5),
    ],
)
def test_estimators_pass_the_growth_of_their_loss_as_kappa_lower(data, make, target, kappa_lower):
    X, y, y_reg, _ = data
    model = make().set_params(algorithm="epoch_growth", epsilon=1.0, delta=1e-6, accountant=PrivacyAccountant())
    model.fit(X, y if target == "binary" else y_reg)
    assert model.solver_info_["kappa_lower"] == kappa_lower
    T = int(np.ceil(2 * np.log(X.shape[0]) / (kappa_lower - 1)))
    assert model.solver_info_["n_epochs"] == T
    assert model._kappa_lower() == kappa_lower


@pytest.mark.parametrize("algorithm", ["localization", "epoch_growth"])
def test_step_scale_reaches_the_growth_solvers_and_none_takes_the_rule(data, algorithm):
    X, y, _, _ = data

    def fitted(step_scale):
        model = DPLogisticRegression(algorithm=algorithm, step_scale=step_scale, accountant=PrivacyAccountant())
        return model.fit(X, y).solver_info_

    assert fitted(7.0)["step_scale"] == 7.0
    default = fitted(None)
    assert 1.0 <= default["step_scale"] <= 1000.0
    assert fitted(None)["step_scale"] == default["step_scale"]  # public: the same for every fit


def test_a_ledger_of_pure_fits_only_reports_their_summed_epsilon_at_delta_zero(data):
    X, y, _, _ = data
    ledger = PrivacyAccountant()
    for epsilon in (0.5, 0.25):
        DPLogisticRegression(epsilon=epsilon, delta=0.0, algorithm="localization", accountant=ledger,
                             random_state=0).fit(X, y)
    epsilon, delta = ledger.spent()
    assert delta == 0.0 and epsilon == pytest.approx(sum(r.epsilon for r in ledger.history)) and epsilon <= 0.75
    # one approximate-DP fit more: reported at the sum of deltas, through the PLD accountant
    DPLogisticRegression(epsilon=0.5, delta=1e-6, algorithm="phased_sgd", accountant=ledger, random_state=0).fit(X, y)
    epsilon, delta = ledger.spent()
    assert delta == pytest.approx(1e-6) and epsilon <= 1.25


def test_solver_options_reach_the_solver_and_bad_ones_are_refused(data):
    X, y, _, _ = data
    model = DPLogisticRegression(alpha=0.1, algorithm="epoch_growth", solver_options={"kappa_lower": 3.0},
                                 accountant=PrivacyAccountant(), random_state=0).fit(X, y)
    assert model.solver_info_["kappa_lower"] == 3.0
    default = DPLogisticRegression(alpha=0.1, algorithm="epoch_growth", accountant=PrivacyAccountant(),
                                   random_state=0).fit(X, y)
    assert default.solver_info_["kappa_lower"] == 2.0
    steps = DPLogisticRegression(algorithm="noisy_gd", solver_options={"n_steps": 7}, accountant=PrivacyAccountant(),
                                 random_state=0).fit(X, y)
    assert steps.solver_info_["n_steps"] == 7 and steps.n_gradients_ == 7 * X.shape[0] and steps.epsilon_ <= 1.0
    with pytest.raises(ValueError, match=r"not options of algorithm='noisy_gd'; its options are \['n_steps', 'step', 'tail_fraction'\]"):
        DPLogisticRegression(algorithm="noisy_gd", solver_options={"kappa_lower": 3.0}).fit(X, y)
    with pytest.raises(ValueError, match="set by the estimator parameters"):
        DPLogisticRegression(algorithm="phased_sgd", solver_options={"step_scale": 2.0}).fit(X, y)
    with pytest.raises(ValueError, match="solver_options"):
        DPLogisticRegression(solver_options=[("n_steps", 3)]).fit(X, y)
