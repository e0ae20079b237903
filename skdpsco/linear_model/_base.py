"""Shared machinery of the private linear estimators.

Data flows one way (``DESIGN.md``, "Layout"): validate and clip -> loss constants from the public
bounds -> pick and plan a solver from public quantities -> charge the accountant (before the
rows are read) -> run the solver -> store the released model. Estimators never compute noise.
"""

from __future__ import annotations

import numbers
import warnings
from abc import abstractmethod

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

from ..accounting import PrivacyAccountant, epsilon_of, get_accountant
from ..solvers import ALGORITHMS, Problem, select_algorithm
from ..solvers._core import clip_rows


class PrivacyWarning(UserWarning):
    """A public setting that weakens the meaning of the guarantee (e.g. ``delta >= 1/n``)."""


def _generator(random_state) -> np.random.Generator:
    """A numpy Generator from scikit-learn's ``random_state`` conventions."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


class BaseDPLinearModel(BaseEstimator):
    """Base of the private linear models: parameters, validation, planning, accounting.

    Subclasses define the loss (:meth:`_make_loss`), the label encoding and the prediction
    methods.
    """

    _parameter_constraints: dict = {
        "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
        "delta": [Interval(numbers.Real, 0, 1, closed="neither")],
        "data_norm": [Interval(numbers.Real, 0, None, closed="neither")],
        "radius": [Interval(numbers.Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "algorithm": [StrOptions({"auto", *ALGORITHMS})],
        "random_state": ["random_state"],
        "accountant": [PrivacyAccountant, None],
        "verbose": ["verbose"],
    }

    @abstractmethod
    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        data_norm=1.0,
        radius=10.0,
        fit_intercept=True,
        algorithm="auto",
        random_state=None,
        accountant=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.algorithm = algorithm
        self.random_state = random_state
        self.accountant = accountant
        self.verbose = verbose

    # -- hooks ----------------------------------------------------------------------------
    @abstractmethod
    def _make_loss(self):
        """The :class:`~skdpsco.losses.MarginLoss` to minimise, from the fitted label set."""

    @abstractmethod
    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        """Targets in the loss's encoding; sets label attributes such as ``classes_``."""

    @abstractmethod
    def _coef_shape(self, n_columns: int) -> tuple:
        """Shape of the parameter for ``n_columns`` (intercept column included)."""

    def _loss_bounds(self) -> dict:
        """Public bounds other than the row norm that the loss constants need (e.g. ``y_bound``)."""
        return {}

    # -- fitting --------------------------------------------------------------------------
    def _fit_private(self, X, y):
        """Validate, plan, charge and fit; leaves no fitted state behind on failure."""
        try:
            self._fit_steps(X, y)
        except BaseException:
            self._discard_fitted_state()
            raise
        return self

    def _discard_fitted_state(self) -> None:
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)

    @property
    def _row_norm_bound(self) -> float:
        """Norm bound of an augmented row ``(x, data_norm)``: the intercept column has value
        ``data_norm`` so that rescaling ``X`` and ``data_norm`` together leaves the model's
        margins unchanged."""
        return float(self.data_norm) * (np.sqrt(2.0) if self.fit_intercept else 1.0)

    def _fit_steps(self, X, y) -> None:
        X, y = validate_data(
            self, X, y, accept_sparse=False, dtype=np.float64, ensure_min_samples=2, y_numeric=False
        )
        targets = self._encode_targets(y)
        n_samples, n_features = X.shape
        loss = self._make_loss()
        problem = Problem(
            n_samples=n_samples,
            coef_shape=self._coef_shape(n_features + int(self.fit_intercept)),
            loss=loss,
            constants=loss.constants(self._row_norm_bound, float(self.radius), **self._loss_bounds()),
            radius=float(self.radius),
            epsilon=float(self.epsilon),
            delta=float(self.delta),
        )
        if problem.delta >= 1.0 / n_samples:
            warnings.warn(
                f"delta={problem.delta:g} is not smaller than 1/n_samples={1.0 / n_samples:.3g}: "
                "a mechanism that publishes one random row outright meets such a guarantee. "
                "Choose delta much smaller than 1/n_samples (e.g. 1/n_samples**1.1).",
                PrivacyWarning,
                stacklevel=4,
            )
        algorithm = select_algorithm(problem) if self.algorithm == "auto" else self.algorithm
        solver = ALGORITHMS[algorithm]
        plan = solver.plan(problem)  # public quantities only: before the rows are read
        accountant = self.accountant if self.accountant is not None else get_accountant()
        spent_epsilon = epsilon_of(plan.dp_event, problem.delta)
        accountant.charge(
            plan.dp_event,
            estimator=type(self).__name__,
            params={k: v for k, v in self.get_params(deep=False).items() if k != "accountant"},
            epsilon=spent_epsilon,
            delta=problem.delta,
        )
        rows = clip_rows(X, float(self.data_norm))
        if self.fit_intercept:
            rows = np.hstack([rows, np.full((n_samples, 1), float(self.data_norm))])
        result = solver.run(plan, rows, targets, problem, _generator(self.random_state))
        if self.verbose:
            print(f"[{type(self).__name__}] algorithm={algorithm} " + " ".join(f"{k}={v}" for k, v in result.info.items()))
        self._store_coef(np.atleast_2d(result.coef))
        self.algorithm_ = algorithm
        self.dp_event_ = result.dp_event
        self.epsilon_ = spent_epsilon
        self.delta_ = problem.delta
        self.n_gradients_ = result.n_gradients
        self.solver_info_ = dict(result.info)

    def _store_coef(self, coef: np.ndarray) -> None:
        """Split the augmented parameter into ``coef_`` and ``intercept_``."""
        if self.fit_intercept:
            self.coef_ = coef[:, :-1].copy()
            self.intercept_ = coef[:, -1] * float(self.data_norm)
        else:
            self.coef_ = coef.copy()
            self.intercept_ = np.zeros(coef.shape[0])
