"""Weighted fits (issue 17 item 3): ``sample_weight`` / ``class_weight`` bounded by the public
``max_weight``, the unweighted model reproduced by weights that change nothing, the
refusals (before anything is charged, naming no row), ``n_iter_``, and the audit that catches a
calibration ignoring the weight."""

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer
from sklearn.utils.estimator_checks import (
    check_class_weight_classifiers,
    check_sample_weights_list,
    check_sample_weights_not_overwritten,
)
from sklearn.utils.validation import has_fit_parameter

import skdpsco.linear_model._base as base
from _audits import audit_params, check_audit
from benchmarks.audits import AUDITS, run_audit
from skdpsco import (
    DPHingeSVM,
    DPHuberRegressor,
    DPLogisticRegression,
    DPLpRegression,
    DPPoissonRegressor,
    DPQuantileRegressor,
    DPSearchCV,
    DPStandardScaler,
    PrivacyAccountant,
    PrivacyWarning,
)
from skdpsco.losses import HingeLoss, LogisticLoss, MultinomialLogisticLoss, PowerLoss, WeightedLoss, weighted_targets
from skdpsco.smoothing import smooth
from skdpsco.solvers import ALGORITHMS, WEIGHTED_ALGORITHMS, Problem, select_algorithm
import skdpsco.solvers._core as core
from skdpsco.solvers._core import margin_gradient, projected_noisy_sgd, reference_projected_noisy_sgd, uses_kernel
from skdpsco.rows import iter_batches


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


def classification(n=300, n_classes=2, seed=0):
    return make_classification(n_samples=n, n_features=4, n_informative=3, n_redundant=0, n_classes=n_classes,
                               random_state=seed)


def regression(n=300, seed=0, kink=0.0):
    """Targets linear in the rows, plus ``kink |x_0|`` (a model the linear fit misses)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 3)) / 2.0
    y = X @ [0.8, -0.5, 0.3] + 0.2 + kink * np.abs(X[:, 0]) + 0.1 * rng.normal(size=n)
    return X, y


def counts(n=300, seed=0):
    """Poisson counts of a log-linear model in the rows of :func:`regression`."""
    X, _ = regression(n, seed)
    return X, np.random.default_rng(seed).poisson(np.exp(1.0 + X @ [0.8, -0.5, 0.3])).astype(float)


def fitted(make, X, y, sample_weight=None, **params):
    model = make(accountant=PrivacyAccountant(), **params)
    return model.fit(X, y) if sample_weight is None else model.fit(X, y, sample_weight=sample_weight)


def logistic(n_classes=2, **params):
    return lambda **more: DPLogisticRegression(classes=np.arange(n_classes), random_state=3, **params, **more)


ESTIMATORS = {
    "logistic_auto": (logistic(), classification),
    "logistic_phased_sgd": (logistic(algorithm="phased_sgd"), classification),
    "logistic_snowball": (logistic(algorithm="snowball"), classification),
    "logistic_objective_perturbation": (logistic(algorithm="objective_perturbation"), classification),
    "logistic_ftrl": (logistic(algorithm="ftrl"), classification),
    "logistic_localization": (logistic(algorithm="localization"), classification),
    "logistic_multinomial": (logistic(n_classes=3), lambda: classification(n_classes=3)),
    "svm_one_vs_rest": (lambda **more: DPHingeSVM(classes=[0, 1, 2], random_state=3, **more),
                        lambda: classification(n_classes=3)),
    "lad_smoothed": (lambda **more: DPLpRegression(p=1.0, random_state=3, **more), regression),
    "least_squares_private_y_bound": (lambda **more: DPLpRegression(random_state=3, **more), regression),
    "huber": (lambda **more: DPHuberRegressor(random_state=3, **more), regression),
    "quantile_smoothed": (lambda **more: DPQuantileRegressor(quantile=0.7, random_state=3, **more), regression),
    "poisson": (lambda **more: DPPoissonRegressor(random_state=3, **more), lambda: counts()),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_unit_weights_reproduce_the_unweighted_model_bit_for_bit(name):
    # every weight at max_weight: the weighted loss (its own path, whatever the values) is the
    # unweighted function, each row's derivative times 1.0: the same numbers
    make, data = ESTIMATORS[name]
    X, y = data()
    unweighted = fitted(make, X, y)
    forms = (np.ones(len(y)), [1] * len(y), 1.0) if name == "logistic_auto" else (np.ones(len(y)),)
    for weights in forms:
        weighted = fitted(make, X, y, sample_weight=weights)
        assert np.array_equal(weighted.coef_, unweighted.coef_), name
        assert np.array_equal(weighted.intercept_, unweighted.intercept_), name
        assert weighted.epsilon_ == unweighted.epsilon_ and weighted.algorithm_ == unweighted.algorithm_
    # and weights that are not all max_weight do change the model
    half = np.where(np.arange(len(y)) % 2 == 0, 1.0, 0.25)
    assert not np.allclose(fitted(make, X, y, sample_weight=half).coef_, unweighted.coef_), name


def test_weights_all_at_max_weight_are_the_unweighted_fit_with_alpha_over_max_weight():
    # scikit-learn's objective mean_i w_i f_i + alpha ||w||^2 / 2 with every w_i = M is M times the
    # unweighted one with alpha / M: the same function
    X, y = classification()
    with pytest.raises(ValueError, match="exceeds max_weight=1"):
        fitted(logistic(algorithm="noisy_gd"), X, y, sample_weight=np.full(len(y), 4.0))
    weighted = fitted(logistic(algorithm="noisy_gd", alpha=0.4, max_weight=4.0), X, y,
                      sample_weight=np.full(len(y), 4.0))
    plain = fitted(logistic(algorithm="noisy_gd", alpha=0.1), X, y)
    np.testing.assert_allclose(weighted.coef_, plain.coef_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weighted.intercept_, plain.intercept_, rtol=0, atol=1e-12)


def test_sample_weight_none_ignores_max_weight():
    X, y = classification()
    assert np.array_equal(fitted(logistic(max_weight=10.0), X, y).coef_, fitted(logistic(), X, y).coef_)


def test_class_weight_is_the_sample_weight_of_each_class_and_multiplies_it():
    X, y = classification()
    factors = np.where(y == 0, 2.0, 0.5)
    by_class = fitted(logistic(max_weight=2.0, class_weight={0: 2.0, 1: 0.5}), X, y)
    by_row = fitted(logistic(max_weight=2.0), X, y, sample_weight=factors)
    assert np.array_equal(by_class.coef_, by_row.coef_)
    # a label missing from the dict gets 1; the product with sample_weight must stay within max_weight
    rows = np.linspace(0.1, 1.0, len(y))
    missing = fitted(logistic(max_weight=2.0, class_weight={0: 2.0}), X, y, sample_weight=rows)
    assert np.array_equal(missing.coef_, fitted(logistic(max_weight=2.0), X, y,
                                                sample_weight=rows * np.where(y == 0, 2.0, 1.0)).coef_)
    with pytest.raises(ValueError, match="exceeds max_weight=2"):
        fitted(logistic(max_weight=2.0, class_weight={0: 2.0}), X, y, sample_weight=np.full(len(y), 1.5))


@pytest.mark.parametrize("estimator, data", [
    (DPLogisticRegression(fit_intercept=False, data_norm=4.0), lambda: classification(n=400)),
    (DPLpRegression(y_bound=2.0, fit_intercept=False, data_norm=1.0), lambda: regression(n=400, kink=0.6)),
])
def test_integer_weights_approach_repeated_rows_in_the_non_private_limit(estimator, data):
    # alpha = 0: the minimiser of sum_i w_i f_i is that of the rows repeated w_i times (zero weights
    # drop their rows); near-infinite epsilon, many full-batch steps, unscaled rows. The weights
    # favour x_0 > 0, where the linear model fits the data differently.
    X, y = data()
    weights = np.where(X[:, 0] > 0, 3, np.random.default_rng(1).integers(0, 2, size=len(y)))
    params = dict(epsilon=1e6, delta=1e-6, radius=20.0, feature_scaling=None, algorithm="noisy_gd",
                  solver_options={"n_steps": 4000}, random_state=0)

    def make(**more):
        return clone(estimator).set_params(**params, **more)

    weighted = fitted(make, X, y, sample_weight=weights, max_weight=3.0)
    repeated = fitted(make, np.repeat(X, weights, axis=0), np.repeat(y, weights))
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, atol=0.02)
    ignored = fitted(make, X, y)
    assert np.abs(ignored.coef_ - repeated.coef_).max() > 0.1  # the weights matter at this tolerance


@pytest.mark.parametrize("layout", [np.ascontiguousarray, sparse.csr_matrix], ids=["dense", "csr"])
@pytest.mark.parametrize("base_loss", [LogisticLoss(), HingeLoss(), PowerLoss(1.5), smooth(HingeLoss(), 0.3)],
                         ids=lambda loss: repr(loss)[:30])
def test_the_compiled_kernel_weighs_each_row_as_the_reference_does(base_loss, layout):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5)) / 3.0
    y = np.where(rng.random(200) < 0.5, 1.0, -1.0) if base_loss.task == "binary" else rng.normal(size=200)
    targets = weighted_targets(y, rng.uniform(size=200))
    gradient = margin_gradient(WeightedLoss(base_loss), 0.05)
    sizes = np.array([1] * 100 + [4] * 10 + [20] * 3)
    batches = iter_batches(layout(X), targets, rng.permutation(200), sizes)
    assert uses_kernel(gradient, batches, np.zeros(5))
    args = (np.linspace(0.5, 0.05, sizes.size), np.where(np.arange(sizes.size) % 2, 0.3, 0.0), np.zeros(5), 1.0)
    fast = projected_noisy_sgd(gradient, batches, *args, np.random.default_rng(7))
    reference = reference_projected_noisy_sgd(gradient, batches, *args, np.random.default_rng(7))
    assert np.linalg.norm(reference) > 0.01
    np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12)


def test_the_reference_gradient_weighs_each_row():
    rng = np.random.default_rng(0)
    X, w = rng.normal(size=(6, 3)), rng.normal(size=3)
    y, c = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0]), rng.uniform(size=6)
    targets = weighted_targets(y, c)
    gradient = margin_gradient(WeightedLoss(LogisticLoss()))
    expected = (c * LogisticLoss().derivative(X @ w, y)) @ X / 6
    np.testing.assert_allclose(gradient(w, X, targets), expected)
    # multiclass: each row's derivative times its weight; labels keep their integer dtype
    labels, W = np.array([0, 2, 1, 1, 0, 2]), rng.normal(size=(3, 3))
    loss = MultinomialLogisticLoss(n_classes=3)
    expected = (c[:, None] * loss.derivative(X @ W.T, labels)).T @ X / 6
    np.testing.assert_allclose(margin_gradient(WeightedLoss(loss))(W, X, weighted_targets(labels, c)), expected)
    assert WeightedLoss(loss).constants(1.0, 2.0) == loss.constants(1.0, 2.0)


@pytest.mark.parametrize("algorithm", ["phased_sgd", "snowball", "noisy_gd", "objective_perturbation"])
def test_the_path_of_a_weighted_fit_does_not_depend_on_the_weights_values(algorithm, monkeypatch):
    """The same functions run, as often, whether every weight equals max_weight or not: the path
    is chosen on whether weights were passed (public), never on their values, which fit's time
    would otherwise tell (with every weight at max_weight the unweighted loop once ran, 12x faster)."""
    calls = []
    for name in ("_kernel_noisy_sgd_steps", "_reference_noisy_sgd_steps"):
        real = getattr(core, name)
        monkeypatch.setattr(core, name, lambda *args, name=name, real=real: calls.append(name) or real(*args))
    X, y = classification()
    paths = []
    for weights in (np.ones(len(y)), np.where(np.arange(len(y)) % 2 == 0, 1.0, 0.25), np.zeros(len(y))):
        calls.clear()
        fitted(logistic(algorithm=algorithm), X, y, sample_weight=weights)
        paths.append(list(calls))
    assert paths[0] == paths[1] == paths[2]
    if algorithm in ("phased_sgd", "snowball"):
        assert set(paths[0]) == {"_kernel_noisy_sgd_steps"}  # the compiled loop, weighted or not


@pytest.mark.parametrize("weights, message", [
    (lambda n: -np.ones(n), "Negative values"),
    (lambda n: np.r_[np.nan, np.ones(n - 1)], "NaN"),
    (lambda n: np.r_[np.inf, np.ones(n - 1)], "infinity"),
    (lambda n: np.ones(n + 1), "shape"),
    (lambda n: np.ones((n, 2)), "1D"),
    (lambda n: np.r_[np.ones(n - 1), 7.123456], "exceeds max_weight=1"),
])
def test_invalid_weights_are_refused_before_anything_is_charged(weights, message):
    X, y = classification()
    ledger = PrivacyAccountant()
    model = DPLogisticRegression(classes=[0, 1], accountant=ledger)
    with pytest.raises(ValueError, match=message) as error:
        model.fit(X, y, sample_weight=weights(len(y)))
    assert not ledger.history and not hasattr(model, "coef_")
    # the message names neither the row nor the weight read from the data
    assert "7.12" not in str(error.value) and str(len(y) - 1) not in str(error.value)


def test_all_zero_weights_are_a_valid_dataset():
    X, y = classification()
    model = fitted(logistic(), X, y, sample_weight=np.zeros(len(y)))
    assert np.all(np.isfinite(model.coef_))


def test_class_weight_refusals_name_the_parameter_and_no_label_of_y():
    X, y = classification()
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match="'balanced' is refused.*label counts"):
        DPLogisticRegression(classes=[0, 1], class_weight="balanced", accountant=ledger).fit(X, y)
    with pytest.raises(ValueError, match=r"class_weight values .*max_weight=1"):
        DPHingeSVM(classes=[0, 1], class_weight={0: 3.0}, accountant=ledger).fit(X, y)
    with pytest.raises(ValueError, match="'secret-key'"):
        DPLogisticRegression(classes=[0, 1], class_weight={"secret-key": 1.0}, accountant=ledger).fit(X, y)
    with pytest.raises(ValueError, match="keys that are not labels") as error:  # classes read from y
        DPLogisticRegression(class_weight={5: 1.0}, accountant=ledger).fit(X, y)
    assert "5" not in str(error.value)
    assert not ledger.history


def test_algorithms_not_verified_for_weights_refuse_them_before_any_charge(monkeypatch):
    assert WEIGHTED_ALGORITHMS <= set(ALGORITHMS)
    monkeypatch.setattr(base, "WEIGHTED_ALGORITHMS", WEIGHTED_ALGORITHMS - {"phased_sgd"})
    X, y = classification()
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match="'phased_sgd' does not accept weighted rows.*'noisy_gd'"):
        DPLogisticRegression(classes=[0, 1], algorithm="phased_sgd", accountant=ledger).fit(
            X, y, sample_weight=np.ones(len(y)))
    with pytest.raises(ValueError, match="does not accept weighted rows"):
        DPLogisticRegression(classes=[0, 1], algorithm="phased_sgd", class_weight={0: 1.0},
                             accountant=ledger).fit(X, y)
    assert not ledger.history
    DPLogisticRegression(classes=[0, 1], algorithm="phased_sgd", accountant=ledger).fit(X, y)  # unweighted: fine


@pytest.mark.parametrize("n, d", [(300, 4), (10**5, 20), (10**6, 100)])
def test_auto_chooses_an_algorithm_that_accepts_weights(n, d):
    # otherwise a weighted fit with the default algorithm='auto' would be refused at this size
    radius = 5.0 * np.sqrt(d)
    for loss, shape in ((LogisticLoss(), (d + 1,)), (MultinomialLogisticLoss(n_classes=3), (3, d + 1)),
                        (smooth(HingeLoss(), 0.1), (d + 1,)), (PowerLoss(p=2.0), (d + 1,))):
        constants = loss.constants(np.sqrt(2.0), radius, **({"y_bound": 1.0} if loss.task == "regression" else {}))
        for l2_penalty in (0.0, 0.1):
            problem = Problem(n, shape, loss, constants, radius, 1.0, 1e-6, l2_penalty)
            assert select_algorithm(problem) in WEIGHTED_ALGORITHMS, (loss, n, d, l2_penalty)


def test_n_iter_counts_the_planned_passes_per_model():
    X, y = classification()
    X3, y3 = classification(n_classes=3)
    n = len(y)
    gd = fitted(logistic(algorithm="noisy_gd"), X, y)
    assert gd.n_iter_.shape == (1,) and gd.n_iter_.dtype == np.int32
    assert gd.n_iter_[0] == gd.solver_info_["n_steps"] == gd.n_gradients_ // n
    assert list(fitted(logistic(algorithm="phased_sgd"), X, y).n_iter_) == [1]
    assert fitted(logistic(n_classes=3), X3, y3).n_iter_.shape == (1,)  # multinomial: one model
    svm = fitted(lambda **more: DPHingeSVM(classes=[0, 1, 2], algorithm="phased_sgd", **more), X3, y3)
    assert list(svm.n_iter_) == [1, 1, 1]
    assert fitted(lambda **more: DPLpRegression(**more), *regression()).n_iter_.shape == (1,)
    objective = fitted(logistic(algorithm="objective_perturbation"), X, y)
    assert objective.n_iter_[0] == -(-objective.n_gradients_ // n) == objective.solver_info_["n_iterations"] + 1


@pytest.mark.parametrize("estimator", [DPLogisticRegression(max_weight=10.0), DPHingeSVM(max_weight=10.0),
                                       DPLpRegression(max_weight=10.0), DPHuberRegressor(max_weight=10.0),
                                       DPQuantileRegressor(max_weight=10.0), DPPoissonRegressor(max_weight=10.0),
                                       DPStandardScaler(max_weight=10.0),
                                       DPStandardScaler(feature_bounds=(-10.0, 10.0), max_weight=10.0)])
def test_scikit_learn_weight_checks_pass_when_max_weight_bounds_their_weights(estimator):
    check_sample_weights_list(type(estimator).__name__, estimator)
    check_sample_weights_not_overwritten(type(estimator).__name__, estimator)


@pytest.mark.parametrize("estimator", [DPLogisticRegression(max_weight=1000.0), DPHingeSVM(max_weight=1000.0)])
def test_scikit_learn_class_weight_check_passes_when_max_weight_bounds_the_class_weights(estimator):
    check_class_weight_classifiers(type(estimator).__name__, estimator)


@pytest.mark.parametrize("pipeline", [False, True])
def test_search_passes_the_weights_to_every_trial(pipeline):
    X, y = classification(n=200)
    model = DPLogisticRegression(classes=[0, 1], max_weight=2.0, feature_scaling=None, data_norm=5.0)
    estimator = make_pipeline(Normalizer(), model) if pipeline else model
    grid = {("dplogisticregression__" if pipeline else "") + "alpha": [0.0, 1e-3]}

    def search(weights):
        return DPSearchCV(estimator, grid, epsilon=2.0, delta=1e-4, n_iter=2, random_state=0,
                          accountant=PrivacyAccountant()).fit(X, y, sample_weight=weights)

    unweighted = search(None).best_estimator_
    weighted = search(np.where(np.arange(len(y)) % 2 == 0, 2.0, 0.1)).best_estimator_
    coef = (lambda m: (m[-1] if pipeline else m).coef_)
    assert not np.allclose(coef(weighted), coef(unweighted))
    with pytest.raises(ValueError, match="exceeds max_weight=2"):
        search(np.full(len(y), 3.0))


def test_the_scaler_takes_sample_weight():
    # tests/test_preprocessing.py checks the weighted statistics
    assert has_fit_parameter(DPStandardScaler(), "sample_weight")


@pytest.mark.parametrize("name", audit_params("weighted_svm"))
def test_weighted_audit_respects_the_claim_and_catches_halved_noise(name):
    check_audit(name)


def _broken_calibration(monkeypatch):
    """The weights no longer divided by max_weight: the canary's loss enters max_weight times."""
    monkeypatch.setattr(base, "relative_weights", lambda weights, max_weight: weights)


def test_weighted_audit_catches_a_calibration_that_ignores_the_weight_quick(monkeypatch):
    audit = AUDITS["weighted_svm"]
    claimed = audit.setup.claimed_epsilon  # planned honestly: the plan does not read the weights
    assert run_audit(audit, 0, n_trials=150).epsilon_lower_bound <= claimed
    _broken_calibration(monkeypatch)
    assert run_audit(audit, 0, n_trials=150).violates(claimed)


@pytest.mark.slow
def test_weighted_audit_catches_a_calibration_that_ignores_the_weight(monkeypatch):
    audit = AUDITS["weighted_svm"]
    claimed = audit.setup.claimed_epsilon
    honest = run_audit(audit, 0)
    _broken_calibration(monkeypatch)
    broken = run_audit(audit, 0)
    print(f"\nweighted_svm: claimed {claimed:.3f}; honest {honest.epsilon_lower_bound:.3f}, "
          f"weights not normalised by max_weight {broken.epsilon_lower_bound:.3f}")
    assert honest.epsilon_lower_bound <= claimed < broken.epsilon_lower_bound
