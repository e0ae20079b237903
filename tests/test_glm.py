"""The generalised regressors: DPHuberRegressor, DPQuantileRegressor, DPPoissonRegressor."""

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

from skdpsco import DPHuberRegressor, DPLpRegression, PrivacyAccountant
from skdpsco.losses import HuberLoss
from skdpsco.solvers import ALGORITHMS

# algorithms refused for a regression loss whatever its constants (their messages say why)
NOT_FOR_REGRESSION = {"objective_perturbation", "newton"}
NEEDS_RIDGE = {"strongly_convex"}


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return train_test_split(X, y, test_size=0.25, random_state=0)


def rmse(prediction, y):
    return float(np.sqrt(np.mean((prediction - y) ** 2)))


def test_huber_beats_the_median_on_raw_diabetes_rows_with_one_event(diabetes):
    X_train, X_test, y_train, y_test = diabetes
    accountant = PrivacyAccountant()
    errors = [
        rmse(DPHuberRegressor(random_state=seed, accountant=accountant).fit(X_train, y_train).predict(X_test), y_test)
        for seed in range(5)
    ]
    assert len(accountant.history) == 5  # one event per fit
    assert np.mean(errors) < rmse(np.median(y_train), y_test)


def test_huber_threshold_is_a_fraction_of_the_target_bound(diabetes):
    X_train, _, y_train, _ = diabetes
    private = DPHuberRegressor(huber_threshold=0.3, random_state=0, accountant=PrivacyAccountant()).fit(X_train, y_train)
    assert isinstance(private.loss_, HuberLoss)
    assert private.loss_.epsilon == pytest.approx(0.3 * np.sqrt(2.0))  # solver's units: y / (y_bound_ / sqrt 2)
    public = DPHuberRegressor(huber_threshold=0.3, y_bound=400.0, random_state=0,
                              accountant=PrivacyAccountant()).fit(X_train, y_train)
    assert public.loss_.epsilon == pytest.approx(120.0) and not hasattr(public, "y_bound_")
    assert public.epsilon_ <= 1.0


def test_huber_noise_shrinks_with_the_threshold():
    # L = B min(t, B_y + B R): the Lipschitz constant every solver calibrates on
    small = DPHuberRegressor(huber_threshold=0.1)._make_loss().constants(1.0, 10.0, 1.0).lipschitz
    large = DPHuberRegressor(huber_threshold=0.5)._make_loss().constants(1.0, 10.0, 1.0).lipschitz
    assert small == pytest.approx(large / 5)


@pytest.mark.parametrize("algorithm", sorted(set(ALGORITHMS) - NOT_FOR_REGRESSION - {"gradient_perturbation", "stop_pnsgd"}))
def test_huber_runs_every_algorithm_that_applies(diabetes, algorithm):
    X_train, X_test, y_train, _ = diabetes
    alpha = 0.1 if algorithm in NEEDS_RIDGE else 0.0
    reg = DPHuberRegressor(algorithm=algorithm, alpha=alpha, random_state=0, accountant=PrivacyAccountant())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X_train, y_train)
    assert reg.algorithm_ == algorithm and reg.epsilon_ <= 1.0
    assert np.all(np.isfinite(reg.predict(X_test)))


def test_huber_accepts_weights_and_sparse_rows(diabetes):
    X_train, X_test, y_train, _ = diabetes
    weights = np.linspace(0.1, 1.0, len(y_train))
    weighted = DPHuberRegressor(random_state=0, accountant=PrivacyAccountant()).fit(X_train, y_train, sample_weight=weights)
    assert weighted.predict(X_test).shape == (len(X_test),)
    reg = DPHuberRegressor(random_state=0, accountant=PrivacyAccountant()).fit(sparse.csr_matrix(X_train), y_train)
    assert reg.predict(sparse.csr_matrix(X_test)).shape == (len(X_test),)


def test_huber_with_a_tiny_threshold_is_half_scaled_least_absolute_deviations():
    # t |r| - t^2 / 2 -> t |r|: the gradient of the Huber loss is t times that of |r| beyond t
    z, y = np.array([-3.0, 0.5, 2.0]), np.array([1.0, -1.0, -2.0])
    t = 1e-3
    np.testing.assert_allclose(HuberLoss(t).derivative(z, y), t * DPLpRegression(p=1.0)._make_loss().derivative(z, y))
