"""delta: 'auto' is a public function of n below 1/n; a delta that voids the guarantee is refused
before anything is charged; the public label set lists each label once."""

import numpy as np
import pytest

from skdpsco import (
    DPHingeSVM,
    DPLogisticRegression,
    DPLpRegression,
    DPSearchCV,
    DPStandardScaler,
    PrivacyAccountant,
    default_delta,
)
from skdpsco._delta import resolve_delta


@pytest.mark.parametrize("n", [1, 2, 569, 10**4, 10**4 + 1, 10**5, 10**6, 10**9])
def test_default_delta_is_below_one_over_n(n):
    delta = default_delta(n)
    assert 0 < delta < 1.0 / n
    assert delta == pytest.approx(min(1e-5, 0.1 / n), rel=1e-15)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "10"])
def test_default_delta_refuses_a_non_count(bad):
    with pytest.raises(ValueError, match="n_samples must be a positive integer"):
        default_delta(bad)


def test_resolve_delta_keeps_a_valid_delta_and_refuses_a_void_one():
    assert resolve_delta(1e-6, 1000) == 1e-6
    assert resolve_delta(0.0, 1000) == 0.0  # pure DP
    assert resolve_delta("auto", 2 * 10**5) == 5e-7
    with pytest.raises(ValueError, match=r"delta=0\.001 is not smaller than 1/n_samples=0\.001.*delta='auto'"):
        resolve_delta(1e-3, 1000)


def _rows(n, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] > 0).astype(int)


def test_auto_delta_is_reported_and_charged_at_large_n():
    X, y = _rows(30_000)
    ledger = PrivacyAccountant()
    model = DPLogisticRegression(classes=[0, 1], random_state=0, accountant=ledger).fit(X, y)
    assert model.delta == "auto"
    assert model.delta_ == pytest.approx(1.0 / 300_000)
    assert ledger.history[-1].delta == model.delta_


def test_auto_delta_keeps_1e_5_on_small_tables_and_the_same_model():
    X, y = _rows(500)
    auto = DPLogisticRegression(classes=[0, 1], random_state=0, accountant=PrivacyAccountant()).fit(X, y)
    explicit = DPLogisticRegression(classes=[0, 1], random_state=0, delta=1e-5, accountant=PrivacyAccountant()).fit(X, y)
    assert auto.delta_ == 1e-5
    np.testing.assert_array_equal(auto.coef_, explicit.coef_)
    assert auto.dp_event_ == explicit.dp_event_


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: DPLogisticRegression(classes=[0, 1], **kw),
        lambda **kw: DPHingeSVM(classes=[0, 1], **kw),
        lambda **kw: DPLpRegression(**kw),
        lambda **kw: DPStandardScaler(feature_bounds=(-5.0, 5.0), **kw),
        lambda **kw: DPSearchCV(DPLogisticRegression(classes=[0, 1]), {"alpha": [0.0, 0.01]}, **kw),
    ],
    ids=["logistic", "hinge", "lp", "scaler", "search"],
)
@pytest.mark.parametrize("delta", [0.5, 0.01])
def test_a_delta_that_voids_the_guarantee_is_refused_before_any_charge(make, delta):
    X, y = _rows(100)
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match="not smaller than 1/n_samples"):
        make(delta=delta, accountant=ledger).fit(X, y)
    assert ledger.history == ()
    assert make(delta=0.009, accountant=ledger, random_state=0).fit(X, y).delta_ == 0.009


@pytest.mark.parametrize("classes", [[0, 0, 1], [0, 1, 1, 2], ["a", "b", "a"]])
@pytest.mark.parametrize("estimator", [DPLogisticRegression, DPHingeSVM])
def test_duplicate_labels_in_classes_are_refused(estimator, classes):
    X, _ = _rows(60)
    y = np.resize(np.unique(classes), 60)
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match="classes= lists a label more than once"):
        estimator(classes=classes, accountant=ledger).fit(X, y)
    assert ledger.history == ()
