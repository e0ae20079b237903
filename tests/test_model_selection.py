"""Private model selection (issue 8, part 1): the random number of trials, the RepeatAndSelect
event and its calibration, the private score, the search as one accounted release, what
GridSearchCV costs on the shared ledger, and a statistical audit of the selection mechanism."""

import math
import warnings

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp
from scipy.stats import loguniform
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer, StandardScaler

from skdpsco import DPLogisticRegression, DPLpRegression, DPStandardScaler, PrivacyAccountant, PrivacyWarning
from skdpsco.accounting import (
    NEIGHBORING_RELATION,
    BudgetExceededError,
    FailureProbabilityDpEvent,
    FixedOrderRdpDpEvent,
    calibrate_zcdp_rho,
    epsilon_of,
    gaussian_event,
    zcdp_event,
)
from skdpsco.linear_model._base import _generator
from skdpsco.preprocessing import RowwiseTransformer
from skdpsco.model_selection import (
    DPSearchCV,
    _PlanningAccountant,
    RandomTrials,
    calibrate_trial_rho,
    noisy_mean_score,
    select_best,
    zcdp_rho,
)
from _audits import audit_params, check_audit

DELTA = 1e-5


# -- the number of trials ---------------------------------------------------------------------
@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 3.0])
def test_trial_counts_have_the_requested_mean_and_are_never_zero(shape):
    trials = RandomTrials(8.0, shape)
    assert RandomTrials.mean_of(trials.gamma, shape) == pytest.approx(8.0, rel=1e-9)
    rng = np.random.default_rng(0)
    counts = np.array([trials.sample(rng) for _ in range(20_000)])
    assert counts.min() >= 1
    standard_error = counts.std() / math.sqrt(counts.size)
    assert abs(counts.mean() - 8.0) < 5 * standard_error


def test_trial_count_distribution_matches_the_truncated_negative_binomial_pmf():
    # PS22 Def. 1: P(K = k) proportional to (1 - gamma)**k prod_{l<k} (l + eta) / (l + 1), k >= 1.
    shape, trials = 0.5, RandomTrials(4.0, 0.5)
    k = np.arange(1, 200)
    weights = (1 - trials.gamma) ** k * np.cumprod((k - 1 + shape) / k)
    pmf = weights / weights.sum()
    rng = np.random.default_rng(1)
    counts = np.bincount([trials.sample(rng) for _ in range(20_000)], minlength=200)[1:200] / 20_000
    assert np.max(np.abs(counts[:5] - pmf[:5])) < 0.015


def test_geometric_gamma_is_one_over_the_mean():
    assert RandomTrials(10.0, 1.0).gamma == pytest.approx(0.1, rel=1e-9)


@pytest.mark.parametrize("mean, shape", [(1.0, 1.0), (0.5, 1.0), (5.0, -1.0), (5.0, math.inf)])
def test_trial_distribution_rejects_invalid_parameters(mean, shape):
    with pytest.raises(ValueError):
        RandomTrials(mean, shape)


# -- the event --------------------------------------------------------------------------------
def test_repeat_and_select_rdp_is_papernot_steinke_theorem_2_for_the_geometric_distribution():
    # PS22 Thm 2 with eta = 1 (gamma = 1 / mean): a rho-zCDP trial gives, at order lambda,
    # rho lambda + ln(mean) / (lambda - 1) + 2 min_lhat [(1 - 1/lhat) rho lhat + ln(mean) / lhat]
    # (minimum over the accountant's orders), before the final monotonicity pass, which leaves
    # the orders where this is increasing unchanged.
    rho, mean = 0.01, 10.0
    orders = np.array([1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0])
    accountant = rdp.RdpAccountant(orders=orders, neighboring_relation=NEIGHBORING_RELATION)
    bound = accountant.compose(RandomTrials(mean, 1.0).dp_event(zcdp_event(rho)))._rdp
    c = 2 * np.min((1 - 1 / orders) * rho * orders + math.log(mean) / orders)
    formula = rho * orders + math.log(mean) / (orders - 1) + c
    increasing = orders > 1 + math.sqrt(math.log(mean) / rho)
    assert increasing.sum() >= 3
    np.testing.assert_allclose(bound[increasing], formula[increasing], rtol=1e-6)


def test_selection_epsilon_is_a_tight_valid_bound_on_the_dense_conversion():
    event = RandomTrials(10.0, 1.0).dp_event(zcdp_event(0.01))
    dense_orders = np.unique(np.concatenate([np.linspace(1.02, 2.0, 100), np.geomspace(2.0, 1e5, 2000)]))
    dense = rdp.RdpAccountant(orders=dense_orders, neighboring_relation=NEIGHBORING_RELATION)
    dense_epsilon = dense.compose(event).get_epsilon(DELTA)
    assert dense_epsilon <= epsilon_of(event, DELTA) <= dense_epsilon * (1 + 1e-3)


@pytest.mark.parametrize("epsilon, mean, shape", [(1.0, 10.0, 1.0), (0.5, 4.0, 0.0), (3.0, 30.0, 2.0)])
def test_trial_rho_calibration_meets_the_target_and_wastes_little(epsilon, mean, shape):
    trials = RandomTrials(mean, shape)
    rho = calibrate_trial_rho(epsilon, DELTA, trials)
    assert epsilon_of(trials.dp_event(zcdp_event(rho)), DELTA) <= epsilon
    assert epsilon_of(trials.dp_event(zcdp_event(rho * 1.001)), DELTA) > epsilon
    # Cheaper than composing E[K] trials, dearer than one (Liu-Talwar / PS22: ~log E[K]).
    single = calibrate_zcdp_rho(epsilon, DELTA)
    assert single / mean < rho < single


def test_zcdp_rho_of_the_library_events_matches_the_rdp_accountant():
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    events = [
        gaussian_event(2.0, 0.5),
        zcdp_event(0.3),
        dp_accounting.ComposedDpEvent([gaussian_event(1.0, 1.0), zcdp_event(0.1)]),
        dp_accounting.SelfComposedDpEvent(gaussian_event(3.0, 1.0), 4),
    ]
    for event in events:
        accountant = rdp.RdpAccountant(orders=orders, neighboring_relation=NEIGHBORING_RELATION)
        np.testing.assert_allclose(accountant.compose(event)._rdp, zcdp_rho(event) * orders, rtol=1e-12)


@pytest.mark.parametrize(
    "event",
    [
        FixedOrderRdpDpEvent(2.0, 0.1),
        FailureProbabilityDpEvent(gaussian_event(1.0, 1.0), 1e-6),
        dp_accounting.PoissonSampledDpEvent(0.01, gaussian_event(1.0, 1.0)),
    ],
)
def test_zcdp_rho_refuses_events_without_a_zcdp_bound(event):
    with pytest.raises(ValueError, match="zCDP"):
        zcdp_rho(event)


# -- the private score and the selection ------------------------------------------------------
def test_noisy_mean_score_is_exactly_rho_zcdp_and_has_the_stated_noise():
    per_row, rho = np.linspace(0, 1, 50), 0.02
    rng = np.random.default_rng(2)
    draws = np.array([noisy_mean_score(per_row, 1.0, rho, rng)[0] for _ in range(20_000)])
    sigma = noisy_mean_score(per_row, 1.0, rho, rng)[1]
    assert sigma == pytest.approx((1.0 / 50) / math.sqrt(2 * rho))
    assert zcdp_rho(gaussian_event(sigma, 1.0 / 50)) == pytest.approx(rho)
    assert draws.mean() == pytest.approx(per_row.mean(), abs=4 * sigma / math.sqrt(draws.size))
    assert draws.std() == pytest.approx(sigma, rel=0.03)


def test_select_best_returns_the_highest_score_and_runs_every_trial():
    scores = [0.3, 0.9, 0.1, 0.9]
    ran = []

    def trial(index):
        ran.append(index)
        return f"model {index}", scores[index]

    assert select_best(trial, 4) == ("model 1", 0.9)
    assert ran == [0, 1, 2, 3]


# -- the statistical audits of the selection mechanism and of the search ----------------------


@pytest.mark.parametrize(
    "name", audit_params("selection", "selection_logarithmic", "search_cv", "search_cv_pipeline")
)
def test_audit_respects_the_claim_and_catches_the_weakened_noise(name):
    # benchmarks/audits.py. The selection: every trial scores the same held-out rows, one row's
    # score flipped; Papernot-Steinke's bound for a hidden K costs 2-3.5 times one trial's mu, so
    # noise / 2 stays within the claim and the audits catch noise / 8 (geometric K, mean 10) and
    # noise / 5 (logarithmic K, mean 5). DPSearchCV end to end, with and without a per-row
    # transform in front: one feature-flipped training row, noise / 4 (slow).
    check_audit(name)


# -- DPSearchCV -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def classification():
    """Logistic data whose decision boundary is off the origin: without an intercept a linear
    model is clearly worse (the candidate a search must not select)."""
    rng = np.random.default_rng(0)
    n = 6000
    X = rng.normal(size=(n + 3000, 4))
    y = (X @ np.array([3.0, -2.0, 1.0, 0.0]) + 2.0 + rng.logistic(size=n + 3000) > 0).astype(int)
    X /= 4.0
    return X[:n], y[:n], X[n:], y[n:]


def base_model(**params):
    return DPLogisticRegression(algorithm="phased_sgd", classes=[0, 1], **params)


def test_search_is_recorded_once_as_repeat_and_select_within_budget(classification):
    X, y, _, _ = classification
    ledger = PrivacyAccountant()
    search = DPSearchCV(
        base_model(), {"radius": [0.5, 5.0]}, epsilon=1.0, delta=DELTA, n_iter=5, random_state=0,
        accountant=ledger,
    ).fit(X, y)
    (record,) = ledger.history
    assert record.estimator == "DPSearchCV"
    assert isinstance(record.event, dp_accounting.dp_event.RepeatAndSelectDpEvent)
    assert record.event == search.dp_event_
    assert record.event.event == zcdp_event(search.trial_rho_)
    assert record.event.mean == pytest.approx(5.0)
    assert 0.99 <= search.epsilon_ <= 1.0
    spent, delta = ledger.spent()
    assert spent <= 1.0 and delta == DELTA


def test_each_trial_is_fitted_at_the_largest_epsilon_within_the_trial_rho(classification):
    X, y, _, _ = classification
    search = DPSearchCV(base_model(), {"alpha": [0.0]}, n_iter=5, random_state=1, accountant=PrivacyAccountant()).fit(X, y)
    best = search.best_estimator_
    assert zcdp_rho(best.dp_event_) <= search.trial_rho_
    assert zcdp_rho(best.dp_event_) >= search.trial_rho_ * 0.97  # bisection to 1% in epsilon
    n_validation = round(0.2 * len(y))
    assert search.score_noise_std_ == pytest.approx((1.0 / n_validation) / math.sqrt(2 * search.trial_rho_))


def test_search_releases_only_the_selected_trial(classification):
    X, y, _, _ = classification
    ledger = PrivacyAccountant()
    search = DPSearchCV(
        base_model(random_state=123), {"radius": [1.0, 5.0]}, n_iter=5, random_state=2, accountant=ledger
    ).fit(X, y)
    assert search.cv_results_["params"] == [search.best_params_]
    np.testing.assert_array_equal(search.cv_results_["mean_test_score"], [search.best_score_])
    # The trial's seed would reveal its noise; the released model points at the search's ledger.
    assert search.best_estimator_.random_state is None
    assert search.best_estimator_.accountant is ledger
    assert not [name for name in vars(search) if "trial" in name and name not in ("trial_rho_",)]


def test_search_selects_a_good_candidate_and_matches_the_non_private_model(classification):
    X, y, X_test, y_test = classification
    # The default algorithm ('auto': noisy GD at this size); with 'phased_sgd' the search's model
    # is within 0.05 of the non-private one for only about 2 seeds in 3 (12 seeds measured).
    search = DPSearchCV(
        DPLogisticRegression(classes=[0, 1]),
        {"fit_intercept": [False, True], "alpha": loguniform(1e-5, 1e-3)},
        n_iter=5, random_state=3, accountant=PrivacyAccountant(),
    ).fit(X, y)
    reference = LogisticRegression().fit(X, y).score(X_test, y_test)
    without_intercept = LogisticRegression(fit_intercept=False).fit(X, y).score(X_test, y_test)
    accuracy = search.score(X_test, y_test)
    print(f"\nDPSearchCV accuracy {accuracy:.3f} (noisy held-out {search.best_score_:.3f}), non-private "
          f"{reference:.3f} ({without_intercept:.3f} without intercept)")
    assert without_intercept < reference - 0.05
    assert search.best_params_["fit_intercept"] is True
    assert accuracy >= reference - 0.05
    assert abs(search.best_score_ - accuracy) < 0.04
    np.testing.assert_array_equal(search.predict(X_test), search.best_estimator_.predict(X_test))
    np.testing.assert_array_equal(search.classes_, [0, 1])


def test_search_over_a_pipeline_with_a_per_row_transform(classification):
    X, y, X_test, y_test = classification
    ledger = PrivacyAccountant()
    pipeline = make_pipeline(Normalizer(), base_model())
    search = DPSearchCV(
        pipeline, {"dplogisticregression__radius": [2.0, 8.0]}, n_iter=5, random_state=4, accountant=ledger
    ).fit(X, y)
    assert len(ledger.history) == 1
    assert search.best_estimator_[-1].random_state is None
    assert search.score(X_test, y_test) > 0.6


class _RowReadingSpy:
    """An ``X`` whose every read is counted: the search must refuse before touching it."""

    def __init__(self, X):
        self.X, self.reads = X, 0

    def __len__(self):
        return len(self.X)

    @property
    def shape(self):
        return self.X.shape

    def __array__(self, dtype=None, copy=None):
        self.reads += 1
        return np.asarray(self.X, dtype=dtype)

    def __getitem__(self, index):
        self.reads += 1
        return self.X[index]


@pytest.mark.parametrize("fitted_step", ["dp_scaler", "scaler", "nested"])
def test_search_refuses_a_pipeline_step_fitted_on_the_rows_before_reading_or_charging(classification, fitted_step):
    # Issue 18, bug 2: every trial would refit the step on the training rows, the scaler charging
    # its own ledger outside the search's event (measured: 1 -> 22 records while the search
    # reported epsilon_ = 1), and the released model would carry a score-selected scaler.
    X, y, _, _ = classification
    ledger, scaler_ledger = PrivacyAccountant(), PrivacyAccountant()
    step = {
        "dp_scaler": DPStandardScaler(accountant=scaler_ledger),
        "scaler": StandardScaler(),
        "nested": make_pipeline(Normalizer(), StandardScaler()),  # a fitted step inside a step
    }[fitted_step]
    search = DPSearchCV(
        make_pipeline(step, base_model()), {"dplogisticregression__alpha": [0.0, 1e-3]},
        n_iter=5, random_state=0, accountant=ledger,
    )
    rows = _RowReadingSpy(X)
    with pytest.raises(ValueError, match=r"refuses the pipeline step '(dpstandardscaler|standardscaler|pipeline__standardscaler)'.*"
                       r"[Ff]it it once before the search.*DPStandardScaler"):
        search.fit(rows, y)
    assert rows.reads == 0
    assert ledger.history == () and scaler_ledger.history == ()
    assert not hasattr(step, "dp_event_") and not hasattr(step, "mean_")
    assert not [name for name in vars(search) if name.endswith("_")]  # no half-fitted search


def test_search_accepts_steps_that_learn_nothing_from_the_rows(classification):
    # Normalizer and a declared row-wise function learn nothing from the rows; 'passthrough' is no step.
    X, y, _, _ = classification
    ledger = PrivacyAccountant()
    pipeline = make_pipeline(RowwiseTransformer(np.tanh), "passthrough", Normalizer(), base_model())
    search = DPSearchCV(
        pipeline, {"dplogisticregression__alpha": [0.0]}, n_iter=2, random_state=0, accountant=ledger
    ).fit(X, y)
    assert len(ledger.history) == 1 and search.epsilon_ <= 1.0


@pytest.mark.parametrize("bounds", [(-2.0, 2.0), None])
def test_scaler_fitted_before_the_search_is_charged_once(classification, bounds):
    # The supported pattern: the private scaler is its own release, the search runs on its output
    # (with public bounds, or with the bounds released in the scaler's fit).
    X, y, _, _ = classification
    ledger = PrivacyAccountant()
    Z = DPStandardScaler(epsilon=0.25, feature_bounds=bounds, random_state=0, accountant=ledger).fit_transform(X)
    DPSearchCV(
        make_pipeline(Normalizer(), base_model()), {"dplogisticregression__alpha": [0.0, 1e-3]},
        n_iter=5, random_state=0, accountant=ledger,
    ).fit(Z, y)
    assert [record.estimator for record in ledger.history] == ["DPStandardScaler", "DPSearchCV"]


class _SeedSpy(DPLogisticRegression):
    """Records the ``random_state`` each trial fit receives (the planning fits are skipped)."""

    seen = []

    def fit(self, X, y):
        if not isinstance(self.accountant, _PlanningAccountant):
            _SeedSpy.seen.append(self.random_state)
        return super().fit(X, y)


def test_each_trial_gets_a_full_entropy_child_not_a_32_bit_seed(classification):
    # Issue 18, bug 3: each trial was seeded with int(trial_rng.integers(2**32)), even with
    # random_state=None, so its noise was a function of 32 bits.
    X, y, _, _ = classification
    _SeedSpy.seen.clear()
    DPSearchCV(
        _SeedSpy(algorithm="phased_sgd", classes=[0, 1]), {"alpha": [0.0]}, n_iter=4, n_iter_shape=0.0,
        random_state=11, accountant=PrivacyAccountant(),
    ).fit(X, y)
    seeds = list(_SeedSpy.seen)
    assert seeds and all(isinstance(seed, np.random.RandomState) for seed in seeds)
    entropies = [_generator(seed).bit_generator.seed_seq.entropy for seed in seeds]
    assert all(entropy.bit_length() > 64 for entropy in entropies)
    assert len(set(entropies)) == len(entropies)  # independent trials


def test_search_is_reproducible_with_a_seed_and_random_without(classification):
    X, y, _, _ = classification

    def search(random_state):
        return DPSearchCV(
            base_model(), {"alpha": [0.0, 1e-3]}, n_iter=3, random_state=random_state,
            accountant=PrivacyAccountant(),
        ).fit(X, y)

    a, b = search(7), search(7)
    np.testing.assert_array_equal(a.best_estimator_.coef_, b.best_estimator_.coef_)
    assert a.best_score_ == b.best_score_ and a.best_params_ == b.best_params_
    c, d = search(None), search(None)
    assert not np.array_equal(c.best_estimator_.coef_, d.best_estimator_.coef_)
    assert c.best_score_ != d.best_score_


@pytest.mark.parametrize("in_pipeline", [False, True])
def test_search_warns_once_about_a_label_set_read_from_y(classification, in_pipeline):
    # Issue 18, bug 4: one PrivacyWarning for the search (naming its parameter), not one per
    # trial; none when classes= is given, in the estimator or in every candidate.
    X, y, _, _ = classification
    labels = np.array(["secret-label-A", "secret-label-B"])[y]

    def privacy_warnings(estimator, grid):
        prefix = "dplogisticregression__" if in_pipeline else ""
        estimator = make_pipeline(Normalizer(), estimator) if in_pipeline else estimator
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            DPSearchCV(
                estimator, {prefix + k: v for k, v in grid.items()}, n_iter=6, n_iter_shape=1.0,
                random_state=0, accountant=PrivacyAccountant(),
            ).fit(X, labels)
        return [str(w.message) for w in caught if issubclass(w.category, PrivacyWarning)]

    name = "dplogisticregression__classes" if in_pipeline else "classes"
    messages = privacy_warnings(DPLogisticRegression(algorithm="phased_sgd"), {"alpha": [0.0, 1e-3]})
    assert messages == [f"{name}=None: the label set is read from y and released in classes_ (and in the "
                        f"model's shape) without privacy accounting. Pass {name}= with the public label set."]
    public = ["secret-label-A", "secret-label-B"]
    assert privacy_warnings(DPLogisticRegression(algorithm="phased_sgd", classes=public), {"alpha": [0.0, 1e-3]}) == []
    assert privacy_warnings(DPLogisticRegression(algorithm="phased_sgd"), {"alpha": [0.0], "classes": [public]}) == []


def test_regression_search_uses_the_clipped_error_score():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(20_000, 3)) / 3
    y = np.clip(X @ np.array([1.0, -1.0, 0.5]) + 0.1 * rng.normal(size=20_000), -1, 1)
    search = DPSearchCV(
        DPLpRegression(algorithm="phased_sgd", y_bound=1.0), {"radius": [0.01, 2.0]},
        n_iter=5, score_clip=1.0, random_state=6, accountant=PrivacyAccountant(),
    ).fit(X, y)
    assert search.best_params_ == {"radius": 2.0}  # radius 0.01 predicts about 0: error ~0.4
    error = np.mean(np.abs(search.predict(X) - y))
    assert error < 0.3
    assert search.best_score_ == pytest.approx(-error, abs=0.02)  # a negative clipped error, plus noise


def test_budget_is_checked_before_any_trial_and_nothing_is_recorded(classification):
    X, y, _, _ = classification
    ledger = PrivacyAccountant(epsilon=0.5, delta=DELTA)
    search = DPSearchCV(base_model(), {"alpha": [0.0]}, epsilon=1.0, n_iter=5, accountant=ledger)
    with pytest.raises(BudgetExceededError):
        search.fit(X, y)
    assert ledger.history == ()
    assert not hasattr(search, "best_estimator_")


def test_candidates_without_a_zcdp_guarantee_are_refused_before_charging(classification):
    X, y, _, _ = classification
    ledger = PrivacyAccountant()
    search = DPSearchCV(
        base_model(), {"algorithm": ["gradient_perturbation"]}, n_iter=5, random_state=0, accountant=ledger
    )
    with pytest.raises(ValueError, match="zCDP"):
        search.fit(X, y)
    assert ledger.history == ()


@pytest.mark.parametrize(
    "params, message",
    [
        ({"validation_fraction": 0.9999}, "training rows"),
        ({"param_distributions": {"alpha": []}}, "non-empty"),
        ({"param_distributions": []}, "non-empty"),
    ],
)
def test_clear_errors(classification, params, message):
    X, y, _, _ = classification
    search = DPSearchCV(base_model(), {"alpha": [0.0]}, accountant=PrivacyAccountant()).set_params(**params)
    with pytest.raises(ValueError, match=message):
        search.fit(X, y)


# -- what a plain GridSearchCV costs -----------------------------------------------------------
def test_grid_search_records_every_fit_and_spends_their_composition(classification):
    X, y, _, _ = classification
    ledger = PrivacyAccountant()
    grid = GridSearchCV(base_model(epsilon=1.0, accountant=ledger), {"radius": [1.0, 5.0]}, cv=3).fit(X, y)
    history = ledger.history
    assert len(history) == 2 * 3 + 1  # every candidate on every fold, and the refit
    assert all(record.estimator == "DPLogisticRegression" for record in history)
    spent, delta = ledger.spent()
    assert delta == pytest.approx(7 * DELTA)
    assert spent == pytest.approx(epsilon_of(dp_accounting.ComposedDpEvent([r.event for r in history]), delta))
    # Far above the epsilon=1 each fit claims, and above a private search of the same grid.
    print(f"\nGridSearchCV, 2 candidates x 3 folds + refit at epsilon=1 each: ({spent:.3f}, {delta:g})")
    assert spent > 2.0
    assert grid.best_estimator_.epsilon_ <= 1.0
