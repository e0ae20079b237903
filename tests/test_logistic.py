import math
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_iris, make_classification
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer

from skdpsco import BudgetExceededError, DPHingeSVM, DPLogisticRegression, PrivacyAccountant, PrivacyWarning
from skdpsco.accounting import epsilon_of
from skdpsco.linear_model._base import _generator

# The tests that are about something else fit with classes=None; its PrivacyWarning is tested below.
pytestmark = pytest.mark.filterwarnings("ignore:classes=None:skdpsco.PrivacyWarning")

@pytest.fixture(scope="module")
def binary_data():
    X, y = make_classification(n_samples=3000, n_features=5, n_informative=3, random_state=0)
    return X / np.linalg.norm(X, axis=1).max(), y


def test_fit_sets_public_attributes_and_spends_at_most_the_target(binary_data):
    X, y = binary_data
    ledger = PrivacyAccountant()
    model = DPLogisticRegression(epsilon=0.7, delta=1e-6, random_state=0, accountant=ledger,
                                 data_norm=1.0, feature_scaling=None).fit(X, y)
    assert model.coef_.shape == (1, 5) and model.intercept_.shape == (1,)
    assert model.algorithm_ == "noisy_gd"  # the auto rule for a smooth loss at this size
    assert model.epsilon_ <= 0.7 and model.delta_ == 1e-6
    assert model.epsilon_ == pytest.approx(epsilon_of(model.dp_event_, 1e-6))
    steps = model.solver_info_["n_steps"]
    assert model.n_gradients_ == steps * X.shape[0]  # full batch: n gradients per step
    assert ledger.history[-1].event == model.dp_event_
    assert np.linalg.norm(np.r_[model.coef_.ravel(), model.intercept_ / model.data_norm]) <= model.radius_ + 1e-9


def test_fit_is_reproducible_with_a_seed_and_random_without(binary_data):
    X, y = binary_data
    a = DPLogisticRegression(random_state=3).fit(X, y).coef_
    b = DPLogisticRegression(random_state=3).fit(X, y).coef_
    c = DPLogisticRegression(random_state=4).fit(X, y).coef_
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_generator_from_a_random_state_has_full_entropy_and_advances_it():
    # Issue 18, bug 3: a RandomState was reduced to a 31-bit seed, so the noise was a function
    # of 31 bits. Now 256 bits are drawn from it into the Generator's SeedSequence.
    random_state = np.random.RandomState(0)
    first, second = _generator(random_state), _generator(random_state)
    entropy = first.bit_generator.seed_seq.entropy
    assert isinstance(entropy, int) and entropy.bit_length() > 64
    assert entropy != second.bit_generator.seed_seq.entropy  # the RandomState was advanced
    # ... reproducibly: the same RandomState seed gives the same generator
    assert _generator(np.random.RandomState(0)).bit_generator.seed_seq.entropy == entropy
    # None takes fresh OS entropy (128 bits), an int seed is kept as given
    assert _generator(None).bit_generator.seed_seq.entropy.bit_length() > 64
    assert _generator(7).bit_generator.seed_seq.entropy == 7


def test_fit_with_a_random_state_instance_is_reproducible_and_not_a_31_bit_seed(binary_data):
    X, y = binary_data
    a = DPLogisticRegression(random_state=np.random.RandomState(5)).fit(X, y).coef_
    b = DPLogisticRegression(random_state=np.random.RandomState(5)).fit(X, y).coef_
    np.testing.assert_array_equal(a, b)
    # The old reduction: a 31-bit int drawn from the RandomState
    seed31 = np.random.RandomState(5).randint(np.iinfo(np.int32).max)
    assert not np.allclose(a, DPLogisticRegression(random_state=seed31).fit(X, y).coef_)


def test_fitted_attributes_do_not_depend_on_the_data_beyond_the_model(binary_data):
    # Two datasets with the same public shape: the same attribute names, and identical public
    # diagnostics (schedule), so nothing but coef_/intercept_ carries information about the rows.
    X, y = binary_data
    first = DPLogisticRegression(random_state=0).fit(X, y)
    second = DPLogisticRegression(random_state=0).fit(-X[::-1], 1 - y)
    assert set(vars(first)) == set(vars(second))
    assert first.solver_info_ == second.solver_info_
    for name in ("epsilon_", "delta_", "n_gradients_", "algorithm_", "dp_event_"):
        assert getattr(first, name) == getattr(second, name)


def test_learns_a_well_separated_problem_close_to_non_private():
    rng = np.random.default_rng(0)
    n, d = 40_000, 5
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = np.array([4.0, -3.0, 2.0, 0.0, 0.0])
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ w))).astype(int)
    X_test, y_test = X[:10_000], y[:10_000]
    X_train, y_train = X[10_000:], y[10_000:]
    reference = LogisticRegression().fit(X_train, y_train).score(X_test, y_test)
    private = DPLogisticRegression(epsilon=2.0, delta=1e-6, random_state=0).fit(X_train, y_train)
    assert private.score(X_test, y_test) >= reference - 0.03


def test_multiclass_is_one_multinomial_release():
    X, y = load_iris(return_X_y=True)
    ledger = PrivacyAccountant()
    model = make_pipeline(Normalizer(), DPLogisticRegression(epsilon=5.0, random_state=0, accountant=ledger)).fit(X, y)
    clf = model[-1]
    assert clf.coef_.shape == (3, 4) and clf.intercept_.shape == (3,)
    assert len(ledger.history) == 1
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(model.predict_log_proba(X), np.log(proba), atol=1e-12)
    np.testing.assert_array_equal(model.predict(X), clf.classes_[proba.argmax(axis=1)])


def test_binary_probabilities_match_decision_function(binary_data):
    X, y = binary_data
    model = DPLogisticRegression(random_state=0).fit(X, y)
    scores = model.decision_function(X)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-scores)))
    np.testing.assert_allclose(model.predict_log_proba(X), np.log(proba), atol=1e-12)
    np.testing.assert_array_equal(model.predict(X), np.where(scores > 0, model.classes_[1], model.classes_[0]))


def test_works_in_pipeline_grid_search_and_cross_validation_and_records_every_fit():
    X, y = load_breast_cancer(return_X_y=True)
    ledger = PrivacyAccountant()
    pipe = make_pipeline(Normalizer(), DPLogisticRegression(epsilon=1.0, random_state=0, accountant=ledger))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,) and len(ledger.history) == 3
    search = GridSearchCV(pipe, {"dplogisticregression__radius": [1.0, 10.0]}, cv=2).fit(X, y)
    # 2 candidates x 2 folds + the refit
    assert len(ledger.history) == 3 + 5
    assert search.best_estimator_[-1].accountant is ledger
    assert ledger.spent()[0] > 1.0  # the search cost more than one fit


def test_clone_and_pickle_round_trip(binary_data):
    X, y = binary_data
    model = DPLogisticRegression(epsilon=2.0, radius=3.0, random_state=1).fit(X, y)
    copy = clone(model)
    assert copy.get_params() == model.get_params() and not hasattr(copy, "coef_")
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict_proba(X), model.predict_proba(X))


def test_classes_parameter_declares_the_public_label_set(binary_data):
    X, y = binary_data
    only_ones = y == 1
    model = DPLogisticRegression(classes=[0, 1], random_state=0).fit(X[only_ones], y[only_ones])
    np.testing.assert_array_equal(model.classes_, [0, 1])
    with pytest.raises(ValueError, match=r"y contains labels that are not in classes="):
        DPLogisticRegression(classes=[0, 1]).fit(X, np.where(y == 1, 2, 0))
    with pytest.raises(ValueError, match=r"classes= must hold at least 2 distinct labels"):
        DPLogisticRegression(classes=[1]).fit(X[only_ones], y[only_ones])


SECRET = np.array(["secret-label-A", "secret-label-B", "secret-label-C"])


def _privacy_warnings(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [str(w.message) for w in caught if issubclass(w.category, PrivacyWarning)]


@pytest.mark.parametrize("n_classes", [2, 3])
def test_label_set_read_from_y_warns_once_without_label_values(binary_data, n_classes):
    # Issue 18, bug 4: with classes=None the label set leaves fit unaccounted (classes_, the
    # model's shape); a PrivacyWarning naming classes= says so once per fit, and its text depends
    # on the parameters only.
    X, y = binary_data
    labels = SECRET[np.arange(len(y)) % n_classes]
    messages = _privacy_warnings(lambda: DPLogisticRegression(random_state=0).fit(X, labels))
    assert len(messages) == 1
    assert messages[0].startswith("classes=None: the label set is read from y")
    assert "Pass classes= with the public label set" in messages[0]
    assert "secret" not in messages[0] and str(n_classes) not in messages[0]
    assert _privacy_warnings(lambda: DPLogisticRegression(classes=SECRET[:n_classes], random_state=0).fit(X, labels)) == []


@pytest.mark.parametrize(
    "classes, labels, match",
    [
        (SECRET[:2], SECRET[[0, 1, 2, 0]], "y contains labels that are not in classes="),
        (None, SECRET[[2, 2, 2, 2]], "y has fewer than 2 distinct labels"),
    ],
)
def test_label_errors_do_not_repeat_label_values(classes, labels, match):
    X = np.random.default_rng(0).normal(size=(4, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        with pytest.raises(ValueError, match=match) as error:
            DPLogisticRegression(classes=classes).fit(X, labels)
    assert "secret" not in str(error.value) and "classes=" in str(error.value)


def test_budget_exceeded_refuses_before_fitting_and_leaves_no_model(binary_data):
    X, y = binary_data
    ledger = PrivacyAccountant(epsilon=1.2, delta=1e-5)
    model = DPLogisticRegression(epsilon=1.0, delta=1e-5, accountant=ledger, random_state=0).fit(X, y)
    with pytest.raises(BudgetExceededError, match="budget epsilon=1.2"):
        model.fit(X, y)
    assert len(ledger.history) == 1
    with pytest.raises(NotFittedError):
        model.predict(X)


def test_shared_default_accountant_records_fits(binary_data):
    X, y = binary_data
    with PrivacyAccountant(epsilon=10.0, delta=1e-5) as ledger:
        DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
        DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert len(ledger.history) == 2 and 1.0 < ledger.spent()[0] < 2.0


@pytest.mark.parametrize(
    "params,match",
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"data_norm": 0.0}, "data_norm"),
        ({"radius": -2.0}, "radius"),
        ({"algorithm": "sgd"}, "algorithm"),
        ({"accountant": "ledger"}, "accountant"),
    ],
)
def test_bad_parameters_are_named(binary_data, params, match):
    X, y = binary_data
    with pytest.raises(ValueError, match=match):
        DPLogisticRegression(**params).fit(X, y)


@pytest.mark.parametrize(
    "X,y,match",
    [
        (np.array([[np.nan, 1.0], [0.0, 1.0]]), [0, 1], "NaN"),
        (np.array([[np.inf, 1.0], [0.0, 1.0]]), [0, 1], "infinity"),
        (np.ones((3, 2)), [0, 1], "inconsistent numbers of samples"),
        (np.ones((1, 2)), [0], "1 sample"),
        (np.ones((0, 2)), [], "0 sample"),
        (np.ones((4, 2)), [1, 1, 1, 1], "fewer than 2 distinct labels"),
        (np.ones((4, 2)), [0.5, 1.5, 2.5, 3.5], "Unknown label type"),
        (sp.csr_matrix(np.array([[np.nan, 1.0], [0.0, 1.0]])), [0, 1], "NaN"),  # in a CSR matrix's data
    ],
)
def test_bad_input_gets_a_clear_error(X, y, match):
    with pytest.raises(ValueError, match=match):
        DPLogisticRegression().fit(X, np.asarray(y))


def test_too_few_rows_for_the_schedule_names_the_minimum():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 30)), np.tile([0, 1], 10)
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match=r"at least \d+ rows.*n_samples=20"):
        DPLogisticRegression(epsilon=0.1, algorithm="snowball", accountant=ledger).fit(X, y)
    assert ledger.history == ()  # refused before anything was charged




def test_failed_refit_discards_the_previous_model(binary_data):
    X, y = binary_data
    model = DPLogisticRegression(random_state=0).fit(X, y)
    with pytest.raises(ValueError):
        model.fit(np.full_like(X, np.nan), y)
    with pytest.raises(NotFittedError):
        model.predict(X)


def test_rows_are_clipped_to_data_norm(binary_data):
    # Scaling rows beyond the bound changes nothing: they are clipped to the same sphere.
    X, y = binary_data
    X_unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    a = DPLogisticRegression(random_state=0, data_norm=1.0, feature_scaling=None).fit(X_unit, y)
    b = DPLogisticRegression(random_state=0, data_norm=1.0, feature_scaling=None).fit(X_unit * 50.0, y)
    np.testing.assert_allclose(a.coef_, b.coef_)
    assert math.isclose(a.intercept_[0], b.intercept_[0])


def test_l2_penalty_enters_the_constants_and_shrinks_the_model(binary_data):
    X, y = binary_data
    plain = DPLogisticRegression(epsilon=5.0, algorithm="snowball", random_state=0).fit(X, y)
    ridge = DPLogisticRegression(epsilon=5.0, algorithm="snowball", alpha=1.0, random_state=0).fit(X, y)
    assert DPLogisticRegression(alpha=1.0, random_state=0).fit(X, y).algorithm_ == "noisy_gd"
    # L grows by alpha * R, so the (public) steps of the same schedule shrink
    assert ridge.solver_info_["max_step"] < plain.solver_info_["max_step"]
    assert ridge.epsilon_ <= 5.0
    assert np.linalg.norm(ridge.coef_) < np.linalg.norm(plain.coef_)


def test_default_radius_grows_with_the_standardised_features(binary_data):
    """``radius=None``: ``5 sqrt(d)`` when fit standardises the features (a coefficient of norm 5
    on them), 10 without; an explicit radius is used as given, and the model stays in its ball."""
    X, y = binary_data
    common = dict(epsilon=1.0, delta=1e-6, classes=[0, 1], random_state=0)
    scaled = DPLogisticRegression(**common).fit(X, y)
    assert scaled.radius_ == pytest.approx(5.0 * np.sqrt(X.shape[1]))
    assert DPLogisticRegression(feature_scaling=None, **common).fit(X, y).radius_ == 10.0
    assert DPLogisticRegression(radius=3.0, **common).fit(X, y).radius_ == 3.0
    assert DPHingeSVM(**common).fit(X, y).radius_ == 10.0


@pytest.mark.parametrize("estimator", [DPLogisticRegression, DPHingeSVM])
@pytest.mark.parametrize("epsilon", [1e-6, 1e-12])
def test_a_budget_no_noise_level_meets_is_refused_by_name_before_the_charge(estimator, epsilon):
    """A valid but tiny epsilon beside delta: every release is calibrated to a share of epsilon at
    the whole delta, and their composition cannot get below epsilon. The error names epsilon and
    delta and the fix; nothing is charged and nothing fitted."""
    X, y = load_breast_cancer(return_X_y=True)
    accountant = PrivacyAccountant()
    model = estimator(epsilon=epsilon, delta=1e-5, classes=[0, 1], random_state=0, accountant=accountant)
    with pytest.raises(ValueError, match=rf"epsilon={epsilon!r} with delta=1e-05 is too small.*larger epsilon"):
        model.fit(X, y)
    assert not accountant.history
    with pytest.raises(NotFittedError):
        model.predict(X)
