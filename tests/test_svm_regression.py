import warnings

import dp_accounting
import numpy as np
import pytest
from sklearn.datasets import load_wine, make_classification
from sklearn.linear_model import LinearRegression, QuantileRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer
from sklearn.svm import LinearSVC

from skdpsco import DPHingeSVM, DPLpRegression, PrivacyAccountant, PrivacyWarning
from skdpsco.accounting import epsilon_of
from skdpsco.losses import PowerLoss, SquaredHingeLoss
from skdpsco.smoothing import GaussianSmoothedLoss


# The tests that are about something else fit with classes=None; its PrivacyWarning is tested below.
pytestmark = pytest.mark.filterwarnings("ignore:classes=None:skdpsco.PrivacyWarning")


def test_one_vs_rest_warns_once_about_the_label_set_and_not_with_classes():
    # Issue 18, bug 4: one warning per fit, not one per one-vs-rest task.
    X, y = load_wine(return_X_y=True)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    labels = np.array(["secret-label-A", "secret-label-B", "secret-label-C"])[y]
    for classes, expected in [(None, 1), (np.unique(labels), 0)]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            DPHingeSVM(delta=1e-6, classes=classes, accountant=PrivacyAccountant(), random_state=0).fit(X, labels)
        messages = [str(w.message) for w in caught if issubclass(w.category, PrivacyWarning)]
        assert len(messages) == expected
        assert all(m.startswith("classes=None") and "secret" not in m for m in messages)


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=20_000, n_features=5, n_informative=3, class_sep=1.5, random_state=0)
    return X / np.linalg.norm(X, axis=1, keepdims=True), y


def test_hinge_svm_optimises_the_smoothed_hinge_and_learns(binary):
    X, y = binary
    X_train, y_train, X_test, y_test = X[:15_000], y[:15_000], X[15_000:], y[15_000:]
    svm = DPHingeSVM(epsilon=1.0, accountant=PrivacyAccountant(), random_state=0).fit(X_train, y_train)
    assert isinstance(svm.loss_, GaussianSmoothedLoss) and svm.loss_.width > 0
    assert svm.epsilon_ <= 1.0 and svm.algorithm_ == "noisy_gd"
    assert svm.n_gradients_ == svm.solver_info_["n_steps"] * 15_000  # full batch
    reference = LinearSVC().fit(X_train, y_train).score(X_test, y_test)
    assert svm.score(X_test, y_test) >= reference - 0.05
    scores = svm.decision_function(X_test)
    np.testing.assert_array_equal(svm.predict(X_test), np.where(scores > 0, svm.classes_[1], svm.classes_[0]))


def test_hinge_svm_uses_the_given_smoothing_width(binary):
    X, y = binary
    svm = DPHingeSVM(smoothing_width=0.3, accountant=PrivacyAccountant(), random_state=0).fit(X, y)
    assert svm.loss_.width == 0.3


def test_squared_hinge_needs_no_smoothing_and_q_hinge_is_refused_by_smooth_solvers(binary):
    X, y = binary
    svm = DPHingeSVM(loss="squared_hinge", accountant=PrivacyAccountant(), random_state=0).fit(X, y)
    assert isinstance(svm.loss_, SquaredHingeLoss)
    # q < 2: Hölder but not Lipschitz gradient. Solvers whose guarantee needs a smooth loss refuse it
    # before charging; 'auto' picks a Hölder solver instead (tests/test_algorithms.py).
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match="Use a Hoelder-aware solver"):
        DPHingeSVM(loss="q_hinge", q=1.5, algorithm="phased_sgd", accountant=ledger).fit(X, y)
    assert not ledger.history


def test_multiclass_one_vs_rest_splits_the_budget_and_composes():
    X, y = load_wine(return_X_y=True)
    ledger = PrivacyAccountant()
    model = make_pipeline(Normalizer(), DPHingeSVM(epsilon=3.0, accountant=ledger, random_state=0)).fit(X, y)
    svm = model[-1]
    assert svm.coef_.shape == (3, 13) and svm.intercept_.shape == (3,)
    # the scaling release, then the three one-vs-rest models on the same rows
    scaling_event, tasks_event = svm.dp_event_.events
    assert all(isinstance(e, dp_accounting.GaussianDpEvent) for e in scaling_event.events)  # magnitudes, moments
    assert isinstance(tasks_event, dp_accounting.SelfComposedDpEvent) and tasks_event.count == 3
    assert len(ledger.history) == 1 and ledger.history[0].event == svm.dp_event_
    unscaled = DPHingeSVM(epsilon=3.0, accountant=ledger, random_state=0, feature_scaling=None)
    unscaled.fit(Normalizer().fit_transform(X), y)
    assert isinstance(unscaled.dp_event_, dp_accounting.SelfComposedDpEvent) and unscaled.dp_event_.count == 3
    # the split uses the budget: at most 0.1% (the bisection tolerance) plus rounding is left
    assert 0.97 * 3.0 <= svm.epsilon_ <= 3.0
    assert svm.epsilon_ == pytest.approx(epsilon_of(svm.dp_event_, svm.delta_))
    assert svm.algorithm_ == "noisy_gd"  # full batch: n gradients per step and task
    assert svm.n_gradients_ == 3 * svm.solver_info_["n_steps"] * X.shape[0]
    assert set(model.predict(X)) <= set(svm.classes_)


@pytest.mark.parametrize(
    "params,match",
    [({"loss": "log"}, "loss"), ({"q": 2.5}, "q"), ({"q": 1.0}, "q"), ({"smoothing_width": 0.0}, "smoothing_width")],
)
def test_hinge_svm_bad_parameters(binary, params, match):
    X, y = binary
    with pytest.raises(ValueError, match=match):
        DPHingeSVM(**params).fit(X[:100], y[:100])


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    n = 40_000
    X = rng.normal(size=(n, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = X @ np.array([0.6, -0.4, 0.2]) + 0.1 + 0.1 * rng.standard_t(df=2, size=n)  # heavy tails
    return X, y


def test_least_absolute_deviation_is_close_to_quantile_regression(regression):
    X, y = regression
    X_train, y_train, X_test, y_test = X[:30_000], y[:30_000], X[30_000:], y[30_000:]
    lad = DPLpRegression(p=1.0, epsilon=1.0, y_bound=2.0, radius=2.0, accountant=PrivacyAccountant(),
                         random_state=0).fit(X_train, y_train)
    assert isinstance(lad.loss_, GaussianSmoothedLoss)
    assert lad.coef_.shape == (3,) and isinstance(lad.intercept_, float)
    reference = QuantileRegressor(quantile=0.5, alpha=0.0).fit(X_train[:5000], y_train[:5000])
    mae = lambda model: np.mean(np.abs(model.predict(X_test) - y_test))  # noqa: E731
    assert mae(lad) <= mae(reference) + 0.05


def test_least_squares_is_close_to_linear_regression(regression):
    X, y = regression
    X_train, y_train, X_test, y_test = X[:30_000], y[:30_000], X[30_000:], y[30_000:]
    ls = DPLpRegression(p=2.0, epsilon=2.0, y_bound=2.0, radius=2.0, accountant=PrivacyAccountant(),
                        random_state=0).fit(X_train, y_train)
    assert isinstance(ls.loss_, PowerLoss) and ls.epsilon_ <= 2.0
    reference = LinearRegression().fit(X_train, np.clip(y_train, -2, 2)).score(X_test, y_test)
    assert ls.score(X_test, y_test) >= reference - 0.1


def test_targets_are_clipped_to_y_bound(regression):
    X, y = regression
    y_clipped = np.clip(y, -1.0, 1.0)
    a = DPLpRegression(y_bound=1.0, accountant=PrivacyAccountant(), random_state=0).fit(X, y_clipped)
    b = DPLpRegression(y_bound=1.0, accountant=PrivacyAccountant(), random_state=0).fit(X, y * 100)
    c = DPLpRegression(y_bound=1.0, accountant=PrivacyAccountant(), random_state=0).fit(X, np.clip(y * 100, -1, 1))
    np.testing.assert_array_equal(b.coef_, c.coef_)
    assert not np.array_equal(a.coef_, b.coef_)


@pytest.mark.parametrize(
    "params,match",
    [
        ({"p": 3.0}, "p"),
        ({"p": 0.5}, "p"),
        ({"y_bound": 0.0}, "y_bound"),
        ({"p": 1.5, "algorithm": "phased_sgd"}, "Use a Hoelder-aware solver"),
    ],
)
def test_lp_regression_bad_parameters(regression, params, match):
    X, y = regression
    with pytest.raises(ValueError, match=match):
        DPLpRegression(**params).fit(X[:200], y[:200])
