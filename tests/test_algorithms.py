"""Every registered algorithm is selectable from every estimator and keeps its promise."""

import numpy as np
import pytest

from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, PrivacyAccountant
from skdpsco.accounting import epsilon_of
from skdpsco.solvers import ALGORITHMS

ESTIMATORS = {
    "logistic": lambda **kw: DPLogisticRegression(**kw),
    "logistic_multiclass": lambda **kw: DPLogisticRegression(**kw),
    "hinge": lambda **kw: DPHingeSVM(**kw),
    "lad": lambda **kw: DPLpRegression(p=1.0, y_bound=2.0, radius=2.0, **kw),
    "least_squares": lambda **kw: DPLpRegression(p=2.0, y_bound=2.0, radius=2.0, **kw),
}


def data(kind, n=3000, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = np.array([3.0, -2.0, 1.0, 0.0])
    if kind in ("lad", "least_squares"):
        return X, X @ w / 4 + 0.1 * rng.normal(size=n)
    if kind == "logistic_multiclass":
        return X, np.argmax(X[:, :3], axis=1)
    return X, (X @ w + 0.3 * rng.normal(size=n) > 0).astype(int)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_every_algorithm_fits_every_estimator_within_its_budget(algorithm, kind):
    X, y = data(kind)
    ledger = PrivacyAccountant()
    alpha = 0.01 if algorithm == "strongly_convex" else 0.0
    model = ESTIMATORS[kind](epsilon=3.0, delta=1e-6, algorithm=algorithm, alpha=alpha,
                             accountant=ledger, random_state=0).fit(X, y)
    assert model.algorithm_ == algorithm
    assert model.epsilon_ <= 3.0 and model.epsilon_ == pytest.approx(epsilon_of(model.dp_event_, 1e-6))
    assert len(ledger.history) == 1 and ledger.history[0].event == model.dp_event_
    assert np.isfinite(model.coef_).all() and model.n_gradients_ >= 1
    assert model.predict(X).shape == (X.shape[0],)
    # Better than the trivial model on this easy problem. Not asked of the PNSGD family: its
    # central guarantee has no amplification for the last row (FMTT Thm 23, feldman.md D13), so
    # at n = 3000 its last steps' noise can dominate.
    if "pnsgd" in algorithm:
        return
    if kind in ("lad", "least_squares"):
        assert np.mean(np.abs(model.predict(X) - y)) < np.mean(np.abs(y - np.median(y)))
    else:
        assert model.score(X, y) > np.max(np.bincount(y)) / len(y)


def test_strongly_convex_reduction_needs_an_l2_penalty():
    X, y = data("logistic")
    with pytest.raises(ValueError, match="alpha > 0"):
        DPLogisticRegression(algorithm="strongly_convex", accountant=PrivacyAccountant()).fit(X, y)
