"""DPSearchCV's default grid, its number of trials and the rule for when searching cannot pay;
the refusal of objective perturbation."""

import math

import dp_accounting
import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer

from skdpsco import DPLogisticRegression, DPSearchCV, PrivacyAccountant
from skdpsco import model_selection
from skdpsco.accounting import calibrate_zcdp_rho
from skdpsco.model_selection import (
    DEFAULT_PARAM_DISTRIBUTIONS,
    SEARCH_SIGNAL,
    RandomTrials,
    calibrate_trial_rho,
    search_signal,
)

DELTA = 1e-5


def logistic_rows(n, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X @ np.linspace(1.0, -1.0, d) + 0.5 + rng.logistic(size=n) > 0).astype(int)
    return X, y


def test_default_grid_offers_only_the_default_and_small_ridge_penalties():
    alphas = DEFAULT_PARAM_DISTRIBUTIONS["alpha"]
    assert set(DEFAULT_PARAM_DISTRIBUTIONS) == {"alpha"}
    assert DPLogisticRegression().alpha in alphas  # the plain default is a candidate
    assert max(alphas) <= 1e-3  # 1e-2 and above lost accuracy on fair (benchmarks/results/search.md)
    search = DPSearchCV(make_pipeline(Normalizer(), DPLogisticRegression()))
    assert search._distributions() == [{"dplogisticregression__alpha": alphas}]


def test_default_number_of_trials_and_the_per_trial_share_of_the_budget():
    search = DPSearchCV(DPLogisticRegression())
    assert search.n_iter == 3 and search.n_iter_shape == 1.0
    rho = calibrate_zcdp_rho(1.0, DELTA)
    share = calibrate_trial_rho(1.0, DELTA, RandomTrials(3.0, 1.0)) / rho
    assert 0.3 < share < 0.4  # DEFAULT_N_ITER's docstring: 0.34 of one release's rho
    assert calibrate_trial_rho(1.0, DELTA, RandomTrials(10.0, 1.0)) / rho < 0.25  # the former default
    assert 0.4 < calibrate_trial_rho(1.0, DELTA, RandomTrials(3.0, 0.0)) / rho < 0.5  # logarithmic


def test_search_signal_is_n_mu_over_p_of_one_trial():
    rho = 0.02
    assert search_signal(1000, 10, rho) == pytest.approx(1000 * math.sqrt(0.04) / 10)
    assert search_signal(2000, 10, rho) == pytest.approx(2 * search_signal(1000, 10, rho))


@pytest.mark.parametrize("classes, fit_intercept, expected", [
    ([0, 1], True, 5), ([0, 1, 2], True, 15), ([0, 1, 2], False, 12), (None, True, 5),
])
def test_the_rule_counts_one_margin_per_class_of_a_public_multiclass_label_set(classes, fit_intercept, expected):
    search = DPSearchCV(DPLogisticRegression(classes=classes, fit_intercept=fit_intercept))
    assert search._n_params(np.zeros((3, 4))) == expected


def test_below_the_signal_the_default_search_is_one_fit_with_the_whole_budget():
    X, y = logistic_rows(500)
    ledger = PrivacyAccountant()
    search = DPSearchCV(DPLogisticRegression(classes=[0, 1]), epsilon=1.0, delta=DELTA, random_state=0,
                        accountant=ledger).fit(X, y)
    rho = calibrate_trial_rho(1.0, DELTA, RandomTrials(3.0, 1.0))
    assert search.search_signal_ == pytest.approx(search_signal(400, 5, rho)) and search.search_signal_ < SEARCH_SIGNAL
    assert search.searched_ is False
    (record,) = ledger.history
    assert not isinstance(record.event, dp_accounting.dp_event.RepeatAndSelectDpEvent)
    assert record.event == search.dp_event_ == search.best_estimator_.dp_event_
    assert search.epsilon_ == search.best_estimator_.epsilon_ and 0.9 < search.epsilon_ <= 1.0
    assert search.delta_ == DELTA
    assert search.best_params_ == {} and math.isnan(search.best_score_) and math.isnan(search.trial_rho_)
    assert search.best_estimator_.random_state is None and search.best_estimator_.accountant is ledger
    np.testing.assert_array_equal(search.predict(X), search.best_estimator_.predict(X))


def test_a_given_grid_is_searched_whatever_the_signal():
    X, y = logistic_rows(500)
    ledger = PrivacyAccountant()
    search = DPSearchCV(DPLogisticRegression(classes=[0, 1]), dict(DEFAULT_PARAM_DISTRIBUTIONS), epsilon=1.0,
                        delta=DELTA, random_state=0, accountant=ledger).fit(X, y)
    assert search.searched_ is True and search.search_signal_ < SEARCH_SIGNAL
    (record,) = ledger.history
    assert isinstance(record.event, dp_accounting.dp_event.RepeatAndSelectDpEvent)
    assert search.best_params_["alpha"] in DEFAULT_PARAM_DISTRIBUTIONS["alpha"]


def test_at_or_above_the_signal_the_default_grid_is_searched(monkeypatch):
    X, y = logistic_rows(500)
    signal = DPSearchCV(DPLogisticRegression(classes=[0, 1]), delta=DELTA, random_state=0,
                        accountant=PrivacyAccountant()).fit(X, y).search_signal_
    monkeypatch.setattr(model_selection, "SEARCH_SIGNAL", signal)  # the decision is ">= threshold"
    ledger = PrivacyAccountant()
    search = DPSearchCV(DPLogisticRegression(classes=[0, 1]), delta=DELTA, random_state=0, accountant=ledger).fit(X, y)
    assert search.searched_ is True
    assert isinstance(ledger.history[0].event, dp_accounting.dp_event.RepeatAndSelectDpEvent)
    assert search.best_params_["alpha"] in DEFAULT_PARAM_DISTRIBUTIONS["alpha"]


def test_the_rule_depends_on_public_quantities_only():
    # Neighbouring label vectors (and any labels) leave the decision and the signal unchanged.
    X, y = logistic_rows(500)
    decisions = set()
    for labels in (y, 1 - y, np.zeros_like(y)):
        labels = labels.copy()
        labels[0] = 1  # both classes present
        search = DPSearchCV(DPLogisticRegression(classes=[0, 1]), delta=DELTA, random_state=0,
                            accountant=PrivacyAccountant()).fit(X, labels)
        decisions.add((search.searched_, round(search.search_signal_, 9)))
    assert len(decisions) == 1


def test_objective_perturbation_refusal_explains_the_missing_zcdp_bound_and_the_way_out():
    X, y = logistic_rows(300)
    ledger = PrivacyAccountant()
    for search in (
        DPSearchCV(DPLogisticRegression(algorithm="objective_perturbation", classes=[0, 1]), accountant=ledger),
        DPSearchCV(DPLogisticRegression(classes=[0, 1]), {"algorithm": ["auto", "objective_perturbation"]},
                   accountant=ledger),
    ):
        with pytest.raises(ValueError) as error:
            search.fit(X, y)
        message = str(error.value)
        assert "4 delta_G(eps - eps_0)" in message and "ln(4) / (alpha - 1)" in message
        assert "algorithm='auto'" in message and "own budget" in message
    assert ledger.history == ()


def test_the_rule_fits_a_pipeline_once_and_releases_it_whole():
    X, y = logistic_rows(500)
    ledger = PrivacyAccountant()
    search = DPSearchCV(make_pipeline(Normalizer(), DPLogisticRegression(classes=[0, 1])), delta=DELTA,
                        random_state=0, accountant=ledger).fit(X, y)
    assert search.searched_ is False
    (record,) = ledger.history
    assert record.event == search.dp_event_ == search.best_estimator_[-1].dp_event_
    assert search.best_estimator_[-1].random_state is None and search.best_estimator_[-1].accountant is ledger
    np.testing.assert_array_equal(search.predict(X), search.best_estimator_.predict(X))


def test_the_default_grid_names_a_missing_parameter_before_charging():
    from sklearn.base import BaseEstimator, ClassifierMixin

    class NoPenalty(ClassifierMixin, BaseEstimator):
        def __init__(self, epsilon=1.0, delta="auto", random_state=None, accountant=None):
            self.epsilon, self.delta, self.random_state, self.accountant = epsilon, delta, random_state, accountant

        def fit(self, X, y):
            raise AssertionError("must not be reached")

        def predict(self, X):
            return np.zeros(len(X))

    X, y = logistic_rows(300)
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match=r"needs the parameters \['alpha'\].*NoPenalty.*pass param_distributions"):
        DPSearchCV(NoPenalty(), accountant=ledger).fit(X, y)
    assert ledger.history == ()
