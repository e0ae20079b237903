"""Shared machinery of the private linear estimators.

Data flows one way (``DESIGN.md``, "Layout"): validate and clip (one copy of the rows, in a
uniformly random order, which also refuses NaN and infinity) -> loss constants from the public
bounds -> pick and plan a solver from public quantities -> charge the accountant (before any
solver reads the rows) -> run the solver -> store the released model. Estimators never compute
noise.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import warnings
from abc import abstractmethod

import dp_accounting
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .._delta import resolve_delta
from .._secure import check_random_state_unset, is_secure, secure_event, secure_generator, secure_mode
from ..defaults import classifier_radius
from ..smoothing import default_smoothing_width, smooth
from ..accounting import (
    PrivacyAccountant,
    UnreachableBudgetError,
    calibrate_noise,
    calibrate_zcdp_rho,
    epsilon_of,
    exact_gaussian_epsilon,
    gaussian_noise_multiplier,
)
from ..accounting._ledger import CarriesDefaultLedger, charge_fit
from ..losses import PinballLoss, PowerLoss, WeightedLoss, weighted_targets
from ..solvers import ALGORITHMS, WEIGHTED_ALGORITHMS, Problem, ftrl, select_algorithm
from ..rows import DENSE, is_lazy, layout_of, refuse_non_finite
from .. import rows as fused_rows
from . import _bounds, _scaling


def _copies_head_only(X, moment_rows: int, row_bound: bool) -> bool:
    """Whether a fit copies only the first ``moment_rows`` rows of its order before anything is
    charged (the rows the feature scaling's releases read) and gathers the others already scaled
    after the releases: in-memory rows the compiled kernels read (:func:`skdpsco.rows.fused_layout`),
    releases over fewer rows than ``n`` and no released row bound. Public: the layout, ``n`` and
    the plan."""
    return moment_rows < X.shape[0] and not row_bound and layout_of(X).fused(X)


def _label_indices(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """The index of each label of ``y`` in the sorted ``classes``: one binary search a label and
    one comparison with the label found (no sort of ``y``). A label outside ``classes``, or of a
    type that cannot be compared with them, is refused without repeating it."""
    try:
        indices = np.searchsorted(classes, y)
        found = np.all(classes.take(indices, mode="clip") == y)
    except TypeError:  # labels that do not order against classes= (e.g. strings against numbers)
        found = False
    if not found:
        raise ValueError(
            "y contains labels that are not in classes=; pass the complete public label set "
            "(this message does not repeat the labels of y)."
        )
    return indices


class PrivacyWarning(UserWarning):
    """A public setting that weakens the meaning of the guarantee (e.g. ``delta >= 1/n``)."""


def fixed_row_bound_warning() -> str:
    """Text of the :class:`PrivacyWarning` of a fit that clips rows to the fixed default norm
    (``data_norm=None``, ``feature_scaling=None``). It depends on the parameters only: how many
    rows the clip changed is itself a release."""
    return (
        "data_norm=None with feature_scaling=None: every row is clipped to the fixed default norm 1, "
        "whatever the scale of X. Rows of larger norm lose their length (a model near the trivial "
        "one on unscaled features). Pass data_norm= a public bound on the row norms, "
        "data_norm='private' to buy one from a small share of epsilon, or keep the default "
        "feature_scaling='standard'."
    )


def labels_from_data_warning(parameter: str = "classes") -> str:
    """Text of the :class:`PrivacyWarning` of a fit with ``classes=None``: names the parameter,
    and nothing computed from the data (no label value, no count)."""
    return (
        f"{parameter}=None: the label set is read from y and released in classes_ (and in the "
        f"model's shape) without privacy accounting. Pass {parameter}= with the public label set."
    )


def label_wrapper() -> str | None:
    """Name of the scikit-learn wrapper whose ``fit`` is running this fit, if it fits a map of
    its own on the labels outside the accountant; else ``None``.

    ``CalibratedClassifierCV`` fits its calibration map, ``StackingClassifier`` /
    ``StackingRegressor`` their final estimator, on the labels and the private model's
    predictions, with no accounted mechanism. Found by walking the caller frames
    (:func:`inspect.currentframe`) for a ``self`` that is an instance of one: scikit-learn
    offers no public way for an estimator to know who fits it. Best effort, parameters only
    (nothing read from the rows): a wrapper run with ``n_jobs`` other than ``None`` or 1 fits
    its clones in other workers, and one given a prefit model does not fit it at all; neither
    is seen (the estimators' Notes and the user guide say so).
    """
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import StackingClassifier, StackingRegressor

    frame = inspect.currentframe()
    while frame is not None:
        if isinstance(frame.f_locals.get("self"), (CalibratedClassifierCV, StackingClassifier, StackingRegressor)):
            return type(frame.f_locals["self"]).__name__
        frame = frame.f_back
    return None


def label_wrapper_warning(wrapper: str) -> str:
    """Text of the :class:`PrivacyWarning` of a private fit inside ``wrapper`` (:func:`label_wrapper`)."""
    return (
        f"{wrapper} fits a map of its own (a calibration map, a final estimator) on the labels and on "
        "this private model's predictions, without privacy accounting: what it releases is not "
        f"covered by the private model's guarantee. Fit the private model alone, then fit {wrapper} "
        "around it (e.g. CalibratedClassifierCV(FrozenEstimator(model))) on public rows, or on held-out "
        "rows with a budget of their own."
    )


def _generator(random_state, secure_noise: bool | None = None) -> np.random.Generator:
    """A numpy Generator from scikit-learn's ``random_state`` conventions, with full entropy.

    In secure mode (an estimator's ``secure_noise=True``, or with ``secure_noise=None`` the global
    ``skdpsco.set_config(secure_noise=True)``): a generator over the operating system's CSPRNG
    (:func:`skdpsco._secure.secure_generator`), and any ``random_state`` other than ``None`` is
    refused (:func:`skdpsco._secure.check_random_state_unset`). Otherwise:

    ``None``: fresh entropy from the operating system (numpy's ``SeedSequence``, 128 bits).
    An int: that seed (reproducible experiments; a release needs ``None``). A ``RandomState``:
    256 bits drawn from it (``bytes(32)``, which advances it as scikit-learn's
    ``check_random_state`` users expect) into a ``SeedSequence``. Never a 31- or 32-bit seed:
    noise that is a function of 32 bits can be found by brute force by whoever knows the other
    rows.
    """
    if secure_mode(secure_noise):
        check_random_state_unset(random_state)
        return secure_generator()
    if isinstance(random_state, np.random.RandomState):
        entropy = int.from_bytes(random_state.bytes(32), "little")
        return np.random.default_rng(np.random.SeedSequence(entropy))
    return np.random.default_rng(random_state)


def relative_weights(weights: np.ndarray, max_weight: float) -> np.ndarray:
    """Each row's weight over the public bound ``max_weight``: the ``c_i`` in ``[0, 1]`` by which
    :class:`~skdpsco.losses.WeightedLoss` multiplies row ``i``'s loss. Dividing by ``max_weight``
    is what keeps every solver's calibration valid (``c_i <= 1``); the weighted audit
    (``benchmarks/audits.py``, ``weighted_svm``) replaces this function by one that skips it and
    catches the result."""
    return weights / max_weight


def _same_param(a, b) -> bool:
    """Whether two values of a parameter are equal (arrays by value)."""
    try:
        return bool(np.all(a == b)) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else bool(a == b)
    except (TypeError, ValueError):
        return a is b


def unreachable_budget_message(epsilon: float, delta: float) -> str:
    """Text of the error of a fit whose budget no noise level meets (:class:`UnreachableBudgetError`
    from one of its calibrations): each release is calibrated to a share of ``epsilon`` at the
    whole ``delta``, and the composition cannot get below ``epsilon`` where it is tiny beside
    ``delta``, or needs noise beyond the calibration's range where ``epsilon`` is tiny itself."""
    return (
        f"epsilon={epsilon!r} with delta={delta!r} is too small for this fit: no noise level of its releases "
        "meets that budget (each is calibrated to a share of epsilon at the whole delta). Pass a larger "
        "epsilon; where epsilon is below delta, a smaller delta may also do."
    )


def _composed(event, count: int):
    return event if count == 1 else dp_accounting.SelfComposedDpEvent(event, count)


def _pure_epsilon(event) -> float:
    """Pure epsilon of a pure-DP event, or of several composed (basic composition, exact for pure
    DP: ``count`` binary randomized responses are ``count * epsilon``-DP and no better at
    ``delta = 0``). ``epsilon_of`` converts at ``delta > 0`` only; its answer for a bare binary
    randomized response does not depend on ``delta`` (it is the exact pure epsilon)."""
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return sum(_pure_epsilon(part) for part in event.events)
    count = 1
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        event, count = event.event, int(event.count)
    if not (isinstance(event, dp_accounting.RandomizedResponseDpEvent) and event.num_buckets == 2):
        raise ValueError(f"delta=0 needs a pure-DP release; the solver's event is {event!r}.")
    return count * epsilon_of(event, 0.5)


KAPPA_LOWER_FLOOR = 1.5
"""Smallest default ``kappa_lower`` (``asi_growth.md`` §6 "Defaults": 1.5 for sharp problems)."""


_STREAM = "_stream_"  # the estimator attribute holding a partial_fit stream (removed by fit)


@dataclasses.dataclass
class _Stream:
    """A partial_fit stream: its public plan, problem and row bound (fixed at the first call),
    the state of each task, and the public counts (calls, rows)."""

    plan: object
    problem: Problem
    states: list
    root: np.random.Generator | None
    data_norm: float
    fit_intercept: bool
    params: dict
    n_calls: int = 0
    n_rows: int = 0


class BaseDPLinearModel(CarriesDefaultLedger, BaseEstimator):
    """Base of the private linear models: parameters, validation, planning, accounting.

    Subclasses define the loss (:meth:`_make_loss`), the target encoding, the tasks (one model,
    or one binary model per class) and the prediction methods.
    """

    _numeric_targets = True
    _sparse_input = False  # set by each fit from the format of X (public): see _scales_features
    _resolves_magnitudes = True  # set by each fit from n, d and the budget (public): see _magnitudes_resolvable

    _parameter_constraints: dict = {
        "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
        # delta = 0 (pure DP) only for the solvers that support it (``supports_pure_dp``);
        # 'auto': :func:`skdpsco.default_delta` of n; below 1/n in any case (:func:`resolve_delta`)
        "delta": [Interval(numbers.Real, 0, 1, closed="left"), StrOptions({"auto"})],
        "data_norm": [Interval(numbers.Real, 0, None, closed="neither"), StrOptions({"private"}), None],
        "radius": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "alpha": [Interval(numbers.Real, 0, None, closed="left")],
        "fit_intercept": ["boolean"],
        "algorithm": [StrOptions({"auto", *ALGORITHMS})],
        "constraint": [StrOptions({"l2", "l1", "lp"})],
        "constraint_p": [Interval(numbers.Real, 1, 2, closed="right"), None],
        "step_scale": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "solver_options": [dict, None],
        "random_state": ["random_state"],
        "accountant": [PrivacyAccountant, None],
        "verbose": ["verbose"],
        "feature_scaling": [StrOptions({"standard"}), None],
        "max_weight": [Interval(numbers.Real, 0, None, closed="neither")],
        "secure_noise": ["boolean", None],
        "max_partial_fit_calls": [Interval(numbers.Integral, 1, None, closed="left"), None],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta="auto",
        data_norm=None,
        radius=None,
        alpha=0.0,
        fit_intercept=True,
        algorithm="auto",
        constraint="l2",
        constraint_p=None,
        step_scale=None,
        solver_options=None,
        random_state=None,
        accountant=None,
        verbose=0,
        feature_scaling="standard",
        max_weight=1.0,
        secure_noise=None,
        max_partial_fit_calls=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.radius = radius
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.algorithm = algorithm
        self.constraint = constraint
        self.constraint_p = constraint_p
        self.step_scale = step_scale
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant
        self.verbose = verbose
        self.feature_scaling = feature_scaling
        self.max_weight = max_weight
        self.secure_noise = secure_noise
        self.max_partial_fit_calls = max_partial_fit_calls

    # -- hooks ----------------------------------------------------------------------------
    @abstractmethod
    def _make_loss(self):
        """The :class:`~skdpsco.losses.MarginLoss` of one task."""

    @abstractmethod
    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        """Targets for the loss; sets label attributes such as ``classes_``."""

    def _tasks(self, targets: np.ndarray) -> list[np.ndarray]:
        """Targets of the independent models fitted on the same rows (one by default)."""
        return [targets]

    def _coef_shape(self, n_columns: int) -> tuple:
        """Shape of one task's parameter for ``n_columns`` (intercept column included)."""
        return (n_columns,)

    def _class_weight_factors(self, y: np.ndarray) -> np.ndarray | None:
        """Each row's factor from ``class_weight`` (classifiers), or ``None`` without one."""
        return None

    def _loss_bounds(self) -> dict:
        """Public bounds other than the row norm that the loss constants need (e.g. ``y_bound``)."""
        return {}

    def _smoothed(self, loss, problem: Problem):
        """The loss a solver that needs a Lipschitz gradient optimises instead of ``loss``."""
        raise ValueError(
            f"The algorithm {self.algorithm!r} needs a loss with a Lipschitz gradient; "
            f"{loss.name!r} has none."
        )

    # -- fitting --------------------------------------------------------------------------
    def _fit_private(self, X, y, sample_weight=None):
        """Validate, plan, charge and fit; leaves no fitted state behind on failure."""
        self._validate_params()
        wrapper = label_wrapper()
        if wrapper is not None:
            warnings.warn(label_wrapper_warning(wrapper), PrivacyWarning, stacklevel=4)
        for name in (_STREAM, "n_partial_fit_calls_"):  # fit ends a partial_fit stream: the next call starts a new one
            self.__dict__.pop(name, None)
        try:
            with fused_rows.shared_threads():  # one pool of threads for every pass of the fit
                self._fit_steps(X, y, sample_weight)
        except UnreachableBudgetError as error:  # planned from public quantities, before any charge
            self._discard_fitted_state()
            raise ValueError(unreachable_budget_message(self.epsilon, error.delta)) from None
        except BaseException:
            self._discard_fitted_state()
            raise
        return self

    def _discard_fitted_state(self) -> None:
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)

    @property
    def _data_norm(self) -> float | None:
        """The public row bound: a numeric ``data_norm``; 1, the fixed default, for ``None``
        without feature scaling; ``None`` when ``fit`` releases the bound (``'private'``: one row
        bound; ``None`` with feature scaling: the per-feature orders of magnitude)."""
        if self.data_norm == "private":
            return None
        if self.data_norm is not None:
            return float(self.data_norm)
        return None if self.feature_scaling is not None else 1.0

    @property
    def _scales_features(self) -> bool:
        """Whether ``fit`` standardises the features (:mod:`._scaling`): ``feature_scaling`` on,
        and dense rows. Sparse rows are not standardised (:attr:`_releases_row_bound`)."""
        return self.feature_scaling is not None and not self._sparse_input

    @property
    def _releases_row_bound(self) -> bool:
        """Whether ``fit`` releases one bound on the row norms (:mod:`._bounds`): with
        ``data_norm='private'`` (with feature scaling, in place of the per-feature orders of
        magnitude of :mod:`._scaling` step 0), and on sparse rows with ``data_norm=None`` and
        ``feature_scaling`` on, where it replaces the per-feature scaling. Per-feature statistics
        of a sparse vocabulary are noise for all but its most frequent columns at any practical
        ``n`` (each feature's noise is that of a dense one, its signal its few non-zeros), and
        the scaling's public clip norm grows with ``sqrt(d)`` where a sparse row's norm grows
        with its non-zeros: on TF-IDF rows the scaled default stayed at the majority class
        (``benchmarks/results/scale.md``). Likewise on dense rows too few for the budget
        (:attr:`_resolves_magnitudes` false)."""
        if self.data_norm == "private":
            return True
        if self.data_norm is not None or self.feature_scaling is None:
            return False
        return self._sparse_input or not self._resolves_magnitudes

    @property
    def _private_target_bound(self) -> bool:
        """Whether ``fit`` releases a bound on ``|y|`` (:mod:`._bounds`); regression only."""
        return False

    @property
    def _centres_targets(self) -> bool:
        """Whether the private target bound's release also gives a centre subtracted from the
        targets and added back to the intercept (:func:`~._bounds.release_centred_bound`)."""
        return False

    @property
    def _solver_data_norm(self) -> float:
        """Norm bound of the rows the solver reads: ``data_norm``, 1 when the rows are
        standardised first (:mod:`._scaling` bounds them by 1), or :data:`~._bounds.SCALED_BOUND`
        when they are divided by a private row bound."""
        if self._scales_features:
            return 1.0
        return _bounds.SCALED_BOUND if self._releases_row_bound else self._data_norm

    @property
    def _row_norm_bound(self) -> float:
        """Norm bound of an augmented row ``(x, c)`` the solver reads: the intercept column has
        the value ``c`` of the rows' bound (:attr:`_solver_data_norm`), so that rescaling ``X``
        and ``data_norm`` together leaves the model's margins unchanged."""
        return self._solver_data_norm * (np.sqrt(2.0) if self.fit_intercept else 1.0)

    def _clipped(self, X) -> np.ndarray:
        """Validated rows for prediction, mapped as ``fit`` mapped the rows it trained on, back in
        the units of ``x``: ``x / feature_scales_`` clipped to norm ``row_norm_``, then (with
        feature scaling) standardised with the released ``standardisation_`` and clipped to its
        norm ``C``. The folded ``coef_`` / ``intercept_`` give on these rows exactly the trained
        model on the standardised, clipped rows: the model is a function of the rows ``fit`` could
        have seen, and a row ``fit`` would have shrunk is shrunk here too."""
        check_is_fitted(self)
        if is_lazy(X):
            raise TypeError(
                "predict, decision_function and score take in-memory rows (numpy or scipy.sparse); for a "
                "Dask array use X.map_blocks(model.predict, drop_axis=1, dtype=...) (each block is in-memory rows)."
            )
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64, reset=False)
        # a model fitted on sparse rows predicts on sparse rows; one fitted on dense rows
        # (standardised) on the same rows made dense, whose width it was fitted on
        X = layout_of(X).in_layout(X, dense=self.standardisation_ is not None)
        layout = layout_of(X)
        shrunk = layout.divide_by_powers_of_two(X, self.feature_scales_)
        shrunk = layout.clip_rows(shrunk, self.row_norm_, out=shrunk)
        if self.standardisation_ is not None:
            mean, scale, clip_norm = self.standardisation_
            standardised = (shrunk - mean) / scale
            DENSE.clip_rows(standardised, clip_norm, out=standardised)
            shrunk = standardised * scale + mean
        return layout.divide_by_powers_of_two(shrunk, 1.0 / self.feature_scales_, out=shrunk)

    @property
    def _domain_radius(self) -> float:
        """Radius of the parameter ball: the public ``radius``, or with ``None``
        :func:`skdpsco.defaults.classifier_radius` of the number of features (subclasses may
        derive their own default from public quantities)."""
        if self.radius is None:
            return classifier_radius(self.n_features_in_, self._scales_features)
        return float(self.radius)

    def _row_weights(self, sample_weight, X: np.ndarray, y: np.ndarray) -> np.ndarray | None:
        """Each row's weight: ``sample_weight`` times its class's ``class_weight`` (classifiers),
        checked against the public bound ``max_weight``; ``None`` when neither is given.

        Called before anything is charged. Shape, NaN, infinity and negative weights are refused
        by scikit-learn's ``_check_sample_weight``; a weight above ``max_weight`` by the message
        below. No message names a row or a weight read from the data. All-zero weights are not
        refused: a dataset with them is inside the public domain (the fit is then the model of
        the penalty alone, plus noise), and refusing it would make the refusal distinguish
        neighbours."""
        factors = self._class_weight_factors(y)
        if sample_weight is None and factors is None:
            return None
        weights = np.ones(X.shape[0])
        if sample_weight is not None:
            weights = _check_sample_weight(
                sample_weight, X, dtype=np.float64, ensure_non_negative=True, copy=True,
                allow_all_zero_weights=True,
            )
        if factors is not None:
            weights = weights * factors
        if not np.all(weights <= float(self.max_weight)):
            raise ValueError(
                f"Some row's weight (sample_weight, times its class's class_weight) exceeds "
                f"max_weight={float(self.max_weight):g}. max_weight is the public bound on every "
                "weight that the privacy calibration relies on: pass one that bounds every weight "
                "the rows could carry, chosen without looking at them (this message says neither "
                "which row nor by how much)."
            )
        return weights

    def _problem(self, n_samples: int, n_columns: int, loss, epsilon: float, l2_penalty: float) -> Problem:
        return Problem(
            n_samples=n_samples,
            coef_shape=self._coef_shape(n_columns),
            loss=loss,
            constants=loss.constants(self._row_norm_bound, self._domain_radius, **self._loss_bounds()),
            radius=self._domain_radius,
            epsilon=float(epsilon),
            delta=self._delta_for(n_samples),
            l2_penalty=float(l2_penalty),
        )

    def _fit_steps(self, X, y, sample_weight=None) -> None:
        dask_input = is_lazy(X)  # public, as the format below: the kind of the input, not its values
        if dask_input:
            X, y = self._validated_dask(X, y, sample_weight)
        else:
            # X's NaN / infinity check is left to the pass that clips it (one read of X fewer)
            X, y = validate_data(
                self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64, ensure_min_samples=2,
                y_numeric=self._numeric_targets, ensure_all_finite=False,
            )
        # public: the layout of the input, not its values; read by the properties that plan the fit
        layout = layout_of(X)
        self._sparse_input = is_sparse = layout.name == "sparse"
        X = layout.canonical(X)
        # sparse and Dask rows get their intercept column after the releases that read the features
        late_intercept = is_sparse or dask_input
        targets = self._encode_targets(y)
        # Weighted rows (``WeightedLoss``): the loss of row i times c_i = w_i / max_weight and the
        # ridge term divided by max_weight, the minimiser of scikit-learn's weighted objective
        # under every solver's unchanged calibration. Validated before anything is charged.
        weights = self._row_weights(sample_weight, X, y)
        del y  # encoded in the targets: a copy validate_data made is not held through the fit
        weighted = weights is not None  # public: whether weights were passed, not their values
        l2_penalty = float(self.alpha) / float(self.max_weight) if weighted else float(self.alpha)
        n_samples, n_features = X.shape
        delta = self._delta_for(n_samples)  # refused here, before any budget is charged, if it voids the guarantee
        n_columns = n_features + int(self.fit_intercept)
        rng = _generator(self.random_state, self.secure_noise)
        secure = is_secure(rng)  # secure mode: grid releases, their events as zCDP (:mod:`skdpsco._secure`)
        # One array for the clipped rows and the intercept column (peak memory one copy of X),
        # filled in a uniformly random order drawn here, before any budget is charged: the
        # solvers that read the rows in a random order (``shuffles_rows``) are given that order
        # and stream the copy in sequence.
        order_rng, task_rng = rng.spawn(2)
        block_sizes = None
        if dask_input:
            # the one-pass solvers read the blocks in a uniformly random order, the rows of each in
            # their own: drawn here too, from the same generator (the full-batch solvers need none);
            # the scaling's releases read its leading blocks (public: the block sizes and the order)
            from .. import _dask

            order = _dask.stream_order(X.chunks[0], order_rng)
            block_sizes = np.asarray(X.chunks[0])[order.blocks]
        # public: a function of n, d, the budget and the blocks' sizes (read by :attr:`_releases_row_bound`)
        self._resolves_magnitudes = self._magnitudes_resolvable(n_samples, n_features, secure, block_sizes)
        # the algorithm, from public quantities only, before the rows are copied: the copy of CSR rows
        # leaves no slot for the intercept column when the solver reads it without one
        base_loss = self._make_loss()
        problem = self._problem(n_samples, n_columns, base_loss, self.epsilon, l2_penalty)
        pure = delta == 0.0
        if pure and (self.algorithm == "auto" or not getattr(ALGORITHMS[self.algorithm], "supports_pure_dp", False)):
            # 'auto' is not asked: its rule is for delta > 0 and never selects these algorithms
            with_pure = sorted(name for name, s in ALGORITHMS.items() if getattr(s, "supports_pure_dp", False))
            raise ValueError(
                f"delta=0 (pure epsilon-DP) is supported by algorithm in {with_pure} only (Laplace "
                f"output perturbation); got algorithm={self.algorithm!r}. Choose one of those "
                "algorithms, or a delta > 0."
            )
        algorithm = select_algorithm(problem, self.constraint, rows=layout.name) if self.algorithm == "auto" else self.algorithm
        if dask_input:
            self._check_dask_algorithm(algorithm)
        solver = self._configured_solver(algorithm)

        def solver_loss(task_problem: Problem):
            """The loss the solver optimises on ``task_problem``: a smoothing of a loss without a
            Lipschitz gradient where the solver needs one, else the base loss."""
            if solver.requires_smooth_loss and not np.isfinite(task_problem.smoothness):
                return self._smoothed(base_loss, task_problem)
            return base_loss

        if weighted and algorithm not in WEIGHTED_ALGORITHMS:
            chosen = f"algorithm='auto' chose {algorithm!r}, which" if self.algorithm == "auto" else f"algorithm={algorithm!r}"
            raise ValueError(
                f"{chosen} does not accept weighted rows (sample_weight or class_weight): its "
                f"privacy analysis is not verified for them. Pass algorithm= one of "
                f"{sorted(WEIGHTED_ALGORITHMS)}."
            )
        # None: clipped once the orders of magnitude or the private row bound are released
        data_norm = self._data_norm
        row_bound = self._releases_row_bound
        fill = self._solver_data_norm if self.fit_intercept else None
        # CSR rows whose solver reads their intercept column without it stored (``reads_unstored_intercept``)
        reads_unstored = getattr(solver, "reads_unstored_intercept", None)
        implicit_intercept = (is_sparse and fill is not None and reads_unstored is not None
                              and reads_unstored(solver_loss(problem)))
        bound = np.inf if data_norm is None else data_norm
        counted = pending = None  # the histograms of the orders of magnitude, when the copy counted them
        if dask_input:  # a lazy map of the row blocks, read in the order of its blocks
            rows = layout.clip_rows(X, bound)
        else:
            moment_rows = n_samples
            if self._scales_features:
                scaling = self._plan_scaling(n_samples, n_features, row_bound, secure, subsample_moments=True)
                moment_rows = scaling.moment_rows
            # the check of the rows a copy of the head does not read runs while the order is drawn
            non_finite = (fused_rows.start_count_non_finite(X) if _copies_head_only(X, moment_rows, row_bound)
                          else None)
            order = order_rng.permutation(n_samples)
            # the targets and weights put in that order before the copy of the rows is made (a
            # fit's peak memory is the copy and one vector of n, not two)
            targets = targets[order]
            weights = None if weights is None else weights[order]
            rows, counted, pending = self._gathered(X, order, bound, None if late_intercept else fill, row_bound,
                                                    moment_rows, non_finite, spare_column=late_intercept
                                                    and fill is not None and not implicit_intercept)
            order = None  # the rows, targets and weights are in their order: not held through the fit
        del X
        tasks = self._tasks(targets)
        del targets  # held by the tasks: dropped with them when they are replaced
        if weights is not None:  # in-memory rows only (:meth:`_validated_dask`)
            # weighted rows run the weighted loss whatever the weights' values: a path chosen on
            # them (e.g. the unweighted one when every weight is max_weight) would show in fit's time
            weights = relative_weights(weights, float(self.max_weight))
        if self.data_norm is None and self.feature_scaling is None:
            warnings.warn(fixed_row_bound_warning(), PrivacyWarning, stacklevel=4)

        def plan_for(epsilon: float):
            task_problem = self._problem(n_samples, n_columns, base_loss, epsilon, l2_penalty)
            loss = solver_loss(task_problem)
            if loss is not base_loss:
                task_problem = self._problem(n_samples, n_columns, loss, epsilon, l2_penalty)
            return task_problem, solver.plan(task_problem)

        # Public quantities only, before the rows are read. The scaling release and several
        # tasks on the same rows compose: the per-task target is the largest whose composition
        # meets (epsilon, delta).
        # In secure mode the bounds, the scaling and the single-release solvers release on a grid
        # with discrete Gaussian noise: zCDP of the planned rho (CKS20 Thm 4 / 14), not the
        # continuous Gaussian's exact curve (:func:`skdpsco._secure.secure_event`). The whole fit
        # is then converted by RDP, where a continuous Gaussian and the zCDP event of its rho have
        # the same curve: every Gaussian of the fit becomes that event (the calibration's RDP
        # conversions are then closed forms instead of dp-accounting's per-order Gaussian sums),
        # and the shares are shares of the zCDP budget (:meth:`_budget_mu`).
        with_releases = self._scales_features or row_bound or self._private_target_bound
        as_zcdp = secure and (with_releases or getattr(solver, "grid_releases", False))
        bounds = self._plan_bounds(n_samples, row_bound, as_zcdp)
        # the moments read the first rows of the fit's random order (of a Dask fit, its leading blocks)
        scaling = self._plan_scaling(n_samples, n_features, row_bound, as_zcdp, subsample_moments=True,
                                     block_sizes=block_sizes)
        if pending is not None and scaling.moment_rows != n_samples - len(pending[1]):  # one plan, both places
            raise RuntimeError("The rows gathered for the scaling's releases are not the plan's moment_rows.")
        releases = [plan.dp_event for plan in bounds.values()] + ([] if scaling is None else [scaling.dp_event])
        if as_zcdp:
            releases = [secure_event(release) for release in releases]

        def fit_event(task_epsilon: float):
            solver_event = plan_for(task_epsilon)[1].dp_event
            event = _composed(secure_event(solver_event) if as_zcdp else solver_event, len(tasks))
            return dp_accounting.ComposedDpEvent([*releases, event]) if releases else event

        if pure:  # basic composition is exact for pure DP (:func:`_pure_epsilon`)
            releases_epsilon = sum(_pure_epsilon(release) for release in releases)
            task_epsilon = (float(self.epsilon) - releases_epsilon) / len(tasks)
        elif len(tasks) == 1 and not releases and not as_zcdp:
            task_epsilon = float(self.epsilon)
        else:
            releases_share = self._releases_share(n_samples, row_bound, as_zcdp)
            task_epsilon = self._task_epsilon_guess(n_samples, len(tasks), releases_share, as_zcdp)
            spent = epsilon_of(fit_event(task_epsilon), delta)
            if not (1 - 1e-3) * float(self.epsilon) <= spent <= float(self.epsilon):
                task_epsilon = 1.0 / calibrate_noise(
                    lambda inverse: fit_event(1.0 / inverse),
                    float(self.epsilon), delta, initial=1.0 / task_epsilon,
                    rtol=1e-3,  # gives up at most 0.1% of the budget, ten bisection steps fewer
                )
        task_problem, plan = plan_for(task_epsilon)
        event = fit_event(task_epsilon)
        spent_epsilon = _pure_epsilon(event) if pure else epsilon_of(event, delta)
        charge_fit(self, event, epsilon=spent_epsilon, delta=delta)
        feature_scales, row_norm, standardisation = np.ones(n_features), data_norm, None
        target_scale, target_centre = 1.0, 0.0
        if bounds:
            target_rng, row_rng = order_rng.spawn(1)[0].spawn(2)
        if "target" in bounds:
            if self._centres_targets:
                target_scale, target_centre = _bounds.release_centred_bound(
                    tasks[0], bounds["target"], target_rng, fallback_cap=_bounds.FALLBACK_CAP)
            else:
                target_scale = _bounds.release_bound(np.abs(tasks[0]), bounds["target"], target_rng,
                                                     fallback_cap=_bounds.FALLBACK_CAP)
            tasks = [_bounds.scale_targets(task, target_scale, target_centre) for task in tasks]
        # every read of the rows before the solver goes through their passes (fused in memory)
        passes, sums = _scaling.feature_passes(rows, n_features, counted, pending, order if dask_input else None), None
        pending = None  # held by the passes until they gather it
        if "rows" in bounds:
            feature_scales, sums = self._divide_by_row_bound(passes, bounds["rows"], row_rng)
            row_norm = _bounds.SCALED_BOUND
        if scaling is not None:
            magnitudes, *standardisation = self._standardise(passes, scaling, order_rng.spawn(1)[0], sums)
            feature_scales, row_norm = feature_scales * magnitudes, scaling.data_norm
        rows = passes.rows
        # rows the passes may still be writing: a solver that reads them in sequence waits for each
        # chunk of them as it comes to it, overlapping their gather with its pass; any other, for all
        progressive = getattr(solver, "reads_rows_progressively", False)
        rows_written = passes.rows_written
        if not progressive:
            rows_written()
        del passes  # the rows with their intercept column below replace these: one copy held, not two
        # the rows [X, fill] without the column stored (one entry a row fewer), or with it
        columns = {"intercept": fill} if implicit_intercept else {}
        if late_intercept and fill is not None and not implicit_intercept:
            rows = layout.with_constant_column(rows, fill, in_place=True)  # in the slots the gather left
        task_rngs = task_rng.spawn(len(tasks))
        # in memory the rows are already in their random order; Dask rows are read in ``order``
        in_sequence = {"order": order if dask_input else np.arange(n_samples)} if getattr(solver, "shuffles_rows", False) else {}
        run_problem = task_problem  # planned on the loss of one row: its constants hold for weighted rows too
        if weights is not None:
            tasks = [weighted_targets(task, weights) for task in tasks]
            run_problem = dataclasses.replace(task_problem, loss=WeightedLoss(task_problem.loss))
        in_progress = {"rows_written": rows_written} if progressive else {}
        results = [solver.run(plan, rows, t, run_problem, r, **in_sequence, **columns, **in_progress)
                   for t, r in zip(tasks, task_rngs)]
        rows_written()  # every row written (a solver may read fewer) before the fit ends
        if self.verbose:
            print(f"[{type(self).__name__}] algorithm={algorithm} tasks={len(tasks)} "
                  + " ".join(f"{k}={v}" for k, v in results[0].info.items()))
        self._store_coef(np.vstack([np.atleast_2d(r.coef) for r in results]))
        self._fold_scaling(feature_scales, standardisation, target_scale, target_centre)
        self.feature_scales_ = feature_scales
        self.row_norm_ = float(row_norm)
        self.standardisation_ = None if standardisation is None else tuple(standardisation)
        self.radius_ = float(task_problem.radius)
        self._store_released_bounds(bounds, feature_scales, target_scale, target_centre)
        self.algorithm_ = algorithm
        self.loss_ = task_problem.loss
        self.dp_event_ = event
        self.epsilon_ = spent_epsilon
        self.delta_ = delta
        self.n_gradients_ = sum(r.n_gradients for r in results)
        # passes over the rows, rounded up, per model (scikit-learn's LogisticRegression has one
        # entry per fitted model): planned before the rows are read, never a convergence count
        self.n_iter_ = np.array([-(-r.n_gradients // n_samples) for r in results], dtype=np.int32)
        self.solver_info_ = dict(results[0].info)

    # -- a stream of partial_fit calls ----------------------------------------------------
    def _partial_fit_private(self, X, y, classes=None, sample_weight=None):
        """One call of a stream (the estimators' ``partial_fit``): the first call checks the
        public setting, plans the whole stream and charges its event, once; every call then runs
        :func:`~skdpsco.solvers.ftrl.stream_steps` on its rows and stores the model. A call that
        fails before its rows are read leaves the stream as it was."""
        first = _STREAM not in self.__dict__
        if first:
            self._validate_params()
            self._check_stream_setting(sample_weight)
        else:
            stream = self.__dict__[_STREAM]
            changed = sorted(name for name, value in self._stream_params().items()
                             if not _same_param(value, stream.params[name]))
            if changed:
                raise ValueError(
                    f"The parameters {changed} changed since the first call of this partial_fit stream, "
                    "whose plan and charge they fixed. Set them back, or start a new stream (fit, or a clone)."
                )
            if stream.n_calls == stream.plan.n_calls:
                raise ValueError(
                    f"partial_fit was called max_partial_fit_calls={stream.plan.n_calls} times: the stream's "
                    "tree and its privacy charge cover no more calls. Start a new stream (on a clone of the "
                    "estimator, or after fit), with a larger max_partial_fit_calls if needed: it is charged "
                    "anew, and rows read again in it spend their privacy again."
                )
            if sample_weight is not None:
                self._check_stream_setting(sample_weight)
        if is_lazy(X):
            raise TypeError("partial_fit takes in-memory rows (numpy or scipy.sparse); pass each block of a Dask collection in its own call.")
        X, y = validate_data(
            self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64, reset=first,
            y_numeric=self._numeric_targets,
        )
        targets = self._stream_targets(y, classes, first)
        if first:
            stream = self._start_stream(X.shape, targets)
        order_rng, noise_rng = self._call_generator(stream).spawn(2)
        order = order_rng.permutation(X.shape[0])  # the leaves of a call are random shares of it
        fill = stream.data_norm if stream.fit_intercept else None
        rows = DENSE.clipped_rows_in_order(layout_of(X).in_layout(X, dense=True), order, stream.data_norm, fill=fill)
        targets = targets[order]
        coefs = [ftrl.stream_steps(stream.plan, state, rows, task, stream.problem, rng)
                 for state, task, rng in zip(stream.states, self._tasks(targets), noise_rng.spawn(len(stream.states)),
                                             strict=True)]
        stream.n_calls += 1
        stream.n_rows += rows.shape[0]
        self._store_stream_model(stream, coefs)
        return self

    def _stream_params(self) -> dict:
        """The parameters a stream is planned with (``accountant`` aside: charged once already)."""
        return {name: value for name, value in self.get_params(deep=False).items() if name != "accountant"}

    def _check_stream_setting(self, sample_weight) -> None:
        """Refuse, before anything is charged, a setting ``partial_fit`` cannot make private:
        each refusal names the parameter and the fix."""
        if self.max_partial_fit_calls is None:
            raise ValueError(
                "partial_fit needs max_partial_fit_calls, the public bound on the number of calls of the "
                "stream: its privacy event (tree aggregation over the calls) is planned and charged at the "
                "first call. Pass e.g. max_partial_fit_calls=100."
            )
        if self.algorithm not in ("auto", "ftrl"):
            raise ValueError(
                f"partial_fit runs private FTRL with tree aggregation; got algorithm={self.algorithm!r}. "
                "Use algorithm='auto' or 'ftrl' (fit runs the other algorithms)."
            )
        if self.feature_scaling is not None or not isinstance(self.data_norm, numbers.Real):
            raise ValueError(
                "partial_fit needs public bounds fixed before the stream: a numeric data_norm (the public "
                "bound on a row's norm) and feature_scaling=None (scale the features with public "
                f"statistics, e.g. a scaler fitted on public rows); got data_norm={self.data_norm!r}, "
                f"feature_scaling={self.feature_scaling!r}."
            )
        self._check_stream_bounds()
        if isinstance(self.delta, str):
            raise ValueError(
                "partial_fit needs a numeric delta: delta='auto' is a function of the number of rows, "
                "which a stream does not know in advance. Pass delta= below 1 / (the rows of the "
                "whole stream)."
            )
        if float(self.delta) == 0.0:
            raise ValueError("partial_fit adds Gaussian noise: it needs delta > 0 (delta=0, pure DP, is for fit's Laplace algorithms).")
        if sample_weight is not None or getattr(self, "class_weight", None) is not None:
            raise ValueError("partial_fit does not take weights: pass sample_weight=None and class_weight=None, or use fit.")

    def _check_stream_bounds(self) -> None:
        """Refuse a bound other than ``data_norm`` that a stream cannot release (regressors: the
        target bound)."""

    def _stream_targets(self, y: np.ndarray, classes, first: bool) -> np.ndarray:
        """The targets of a call (classifiers: encoded in the label set fixed at the first call)."""
        if classes is not None:
            raise ValueError(f"{type(self).__name__}.partial_fit takes no classes.")
        return self._encode_targets(y)

    def _start_stream(self, shape: tuple, targets: np.ndarray) -> _Stream:
        """Plan the stream from public quantities (the bound on the calls, the first batch's size
        and the parameters), charge its event once, and keep its state."""
        n_rows, n_features = shape
        delta = self._delta_for(n_rows)  # at least refused when it voids the guarantee of this batch alone
        # a seed's root, drawn (and a seed refused in secure mode) before the charge
        root = None if self.random_state is None else _generator(self.random_state, self.secure_noise)
        n_columns = n_features + int(self.fit_intercept)
        n_tasks = len(self._tasks(targets))
        problem = self._problem(n_rows, n_columns, self._make_loss(), self.epsilon, float(self.alpha))
        solver = self._configured_solver("ftrl", ftrl.StreamFTRL())
        plan = solver.plan(problem, int(self.max_partial_fit_calls), n_tasks)
        event = _composed(plan.dp_event, n_tasks)
        spent_epsilon = epsilon_of(event, delta)
        charge_fit(self, event, epsilon=spent_epsilon, delta=delta)
        states = [ftrl.StreamState.start(plan, problem.coef_shape) for _ in range(n_tasks)]
        stream = _Stream(plan, problem, states, root, self._data_norm, bool(self.fit_intercept),
                         self._stream_params())
        self.__dict__[_STREAM] = stream
        self.dp_event_ = event
        self.epsilon_ = spent_epsilon
        self.delta_ = delta
        return stream

    def _call_generator(self, stream: _Stream) -> np.random.Generator:
        """The generator of one call (its order and its nodes' noise): with ``random_state=None``
        fresh entropy (or the secure generator) at every call, so that two copies of a stream (a
        ``deepcopy``, a pickle) continued on different rows never draw the same noise; with a
        seed, the next child of the seed's root (reproducible, for experiments only: the copies
        of a seeded stream do repeat their noise)."""
        return _generator(None, self.secure_noise) if stream.root is None else stream.root.spawn(1)[0]

    def _store_stream_model(self, stream: _Stream, coefs: list) -> None:
        """The model released after a call, with the attributes ``fit`` sets (the stream's guarantee)."""
        n_features = self.n_features_in_
        self._store_coef(np.vstack([np.atleast_2d(c) for c in coefs]))
        self._fold_scaling(np.ones(n_features), None, 1.0)
        self.feature_scales_ = np.ones(n_features)
        self.row_norm_ = float(stream.data_norm)
        self.standardisation_ = None
        self.radius_ = float(stream.problem.radius)
        self.algorithm_ = "ftrl"
        self.loss_ = stream.problem.loss
        self.n_gradients_ = stream.n_rows * len(coefs)
        self.n_iter_ = np.ones(len(coefs), dtype=np.int32)
        self.n_partial_fit_calls_ = stream.n_calls
        self.solver_info_ = {**stream.plan.info(), "calls": stream.n_calls}

    def _validated_dask(self, X, y, sample_weight) -> tuple:
        """``(X, y)`` of a Dask collection as lazy Dask arrays (:func:`skdpsco._dask.validate`),
        checked before anything is charged: one pass for non-finite values (and, for classifiers,
        labels outside ``classes``, :meth:`_encode_targets`). Weighted fits are in-memory only."""
        from .. import _dask

        if sample_weight is not None or getattr(self, "class_weight", None) is not None:
            raise ValueError(
                "sample_weight and class_weight are not supported with Dask input yet: fit in-memory "
                "rows (numpy or scipy.sparse) to weigh them, or drop the weights."
            )
        X, y = _dask.validate(X, y)
        if X.shape[0] < 2:
            raise ValueError(f"Found array with {X.shape[0]} sample(s) while a minimum of 2 is required.")
        self.n_features_in_ = X.shape[1]
        if not _dask.all_finite(X, y if self._numeric_targets else None):  # labels: :meth:`_encode_targets`
            refuse_non_finite()
        return X, y

    def _check_dask_algorithm(self, algorithm: str) -> None:
        """Refuse, before anything is charged, an algorithm that does not run on Dask rows
        (:data:`skdpsco._dask.ALGORITHMS` names those that do), with the reason."""
        from .. import _dask

        if algorithm not in _dask.ALGORITHMS:
            chosen = f"algorithm='auto' chose {algorithm!r}" if self.algorithm == "auto" else f"algorithm={algorithm!r}"
            raise ValueError(
                f"{chosen}, which does not run on Dask collections: {_dask.refusal_reason(algorithm)} "
                f"Pass algorithm= one of {sorted(_dask.ALGORITHMS)}, or fit in-memory rows."
            )

    def _delta_for(self, n_samples: int) -> float:
        """The delta of a fit on ``n_samples`` rows (:func:`skdpsco._delta.resolve_delta`: the
        parameter, or :func:`~skdpsco.default_delta` of ``n`` for ``'auto'``; refused at ``1 / n``
        or more)."""
        return resolve_delta(self.delta, n_samples)

    def _budget_mu(self, n_samples: int, as_zcdp: bool = False) -> float:
        """``mu`` of the fit's budget, whose square the releases and the solver share: of the one
        Gaussian release that meets (epsilon, delta) (``mu``-GDP, converted exactly), or with
        ``as_zcdp`` (secure mode's grid releases, converted as zCDP) ``sqrt(2 rho)`` for the
        largest ``rho``-zCDP meeting it (:func:`~skdpsco.accounting.calibrate_zcdp_rho`): a
        Gaussian of multiplier ``z`` is ``1 / (2 z**2)``-zCDP, so shares of ``mu**2`` are shares of
        ``rho``, and the composed fit meets (epsilon, delta) without a bisection."""
        delta = self._delta_for(n_samples)
        if as_zcdp:
            return math.sqrt(2.0 * calibrate_zcdp_rho(float(self.epsilon), delta))
        return 1.0 / gaussian_noise_multiplier(float(self.epsilon), delta)

    def _plan_bounds(self, n_samples: int, row_bound: bool, as_zcdp: bool = False) -> dict:
        """The plans of the private bounds (:mod:`._bounds`), by name (``'target'``, ``'rows'``
        when ``row_bound``), in the order they are drawn; each gets its share
        (:meth:`_bound_shares`) of the fit's ``mu**2`` (``delta > 0``) or ``epsilon`` (``delta = 0``)."""
        shares = self._bound_shares(n_samples, row_bound, as_zcdp)
        if self._delta_for(n_samples) == 0.0:
            return {name: _bounds.plan_bound(pure_epsilon=share * float(self.epsilon)) for name, share in shares.items()}
        mu = self._budget_mu(n_samples, as_zcdp)
        return {name: _bounds.plan_bound(gaussian_mu=math.sqrt(share) * mu) for name, share in shares.items()}

    def _bound_shares(self, n_samples: int, row_bound: bool, as_zcdp: bool = False) -> dict:
        """Share of the budget of each private bound, by name: :data:`~._bounds.BOUND_SHARE` for
        the target bound (:func:`~._bounds.target_range_share` of ``n`` for the centred range,
        :attr:`_centres_targets`), :func:`~._bounds.row_bound_share` of ``n`` for the row bound."""
        shares = {"target": _bounds.BOUND_SHARE} if self._private_target_bound else {}
        if not (row_bound or self._centres_targets):
            return shares
        budget = ({"pure_epsilon": float(self.epsilon)} if self._delta_for(n_samples) == 0.0
                  else {"gaussian_mu": self._budget_mu(n_samples, as_zcdp)})
        if self._centres_targets:
            shares["target"] = _bounds.target_range_share(n_samples, **budget)
        if row_bound:
            shares["rows"] = _bounds.row_bound_share(n_samples, **budget)
        return shares

    def _releases_share(self, n_samples: int, row_bound: bool, as_zcdp: bool = False) -> float:
        """Share of the fit's budget spent before the solver: the private bounds and the feature
        scaling (:meth:`_plan_bounds`, :meth:`_plan_scaling`)."""
        share = sum(self._bound_shares(n_samples, row_bound, as_zcdp).values())
        if self._scales_features:
            magnitudes = self._data_norm is None and not row_bound
            share += _scaling.SCALING_SHARE + (_scaling.MAGNITUDE_SHARE if magnitudes else 0.0)
        return share

    def _gathered(self, X, order: np.ndarray, bound: float, fill: float | None, row_bound: bool, moment_rows: int,
                  non_finite=None, spare_column: bool = False) -> tuple:
        """``(rows, counts, pending)``: the fit's copy of the in-memory rows ``X[order]`` clipped to
        ``bound`` (:meth:`~skdpsco.rows._memory.InMemoryRows.clipped_rows_in_order`), with the histograms of
        the orders of magnitude the scaling releases (``None`` when it does not, or when the
        gather did not count them), before anything is charged. Every row is checked finite.

        With the feature scaling, the releases read only the first
        :attr:`~._scaling.ScalingPlan.moment_rows` ``m`` rows of the order (``moment_rows``; ``n``
        without the scaling). When only those are copied now (:func:`_copies_head_only`), the
        others are read once ``X`` is checked finite (``non_finite``, the count of
        :func:`skdpsco.rows.start_count_non_finite` started while the order was drawn, or started
        here), and ``pending = (X, order[m:], bound, fill)`` says so: they are gathered already
        scaled once the releases are known (:meth:`skdpsco.rows.FusedPasses.standardise`), one pass
        over them instead of a copy and a rewrite. Else ``pending`` is ``None``. ``spare_column``:
        a CSR copy keeps a slot per row for the intercept column
        (:meth:`~skdpsco.rows._memory.InMemoryRows.clipped_rows_in_order`)."""
        n_samples, n_features = X.shape
        counting = self._scales_features and self._data_norm is None and not row_bound
        magnitude_range = _scaling.MAGNITUDE_RANGE if counting else None
        m = moment_rows
        if not _copies_head_only(X, m, row_bound):
            gathered = layout_of(X).clipped_rows_in_order(X, order, bound, fill=fill,
                                             magnitude_range=magnitude_range if m == n_samples else None,
                                             spare_column=spare_column)
            rows, counts = gathered if counting and m == n_samples else (gathered, None)
            return rows, counts, None
        rows = np.empty((n_samples, n_features + (fill is not None)))
        gathered = DENSE.clipped_rows_in_order(X, order[:m], bound, fill=fill, magnitude_range=magnitude_range,
                                         out=rows[:m])
        counts = gathered[1] if counting else None
        if (non_finite or fused_rows.start_count_non_finite(X))():
            refuse_non_finite()
        return rows, counts, (X, order[m:].copy(), bound, fill)  # a copy: the whole order is not held

    def _divide_by_row_bound(self, passes, plan, rng: np.random.Generator) -> tuple:
        """Release a power of two ``s`` above most row norms (:func:`~._bounds.release_bound`),
        divide the features by it and clip the rows to :data:`~._bounds.SCALED_BOUND`, through
        their ``passes`` (:func:`~._scaling.feature_passes`). Returns ``(feature_scales, sums)``:
        the divisors in the form prediction reads them, and the clipped rows' column sums when
        the pass computed them (else ``None``)."""
        scales = np.full(passes.n_features, _bounds.release_bound(passes.row_norms(), plan, rng))
        return scales, passes.divide_and_clip(scales, _bounds.SCALED_BOUND)

    def _store_released_bounds(self, bounds: dict, feature_scales: np.ndarray, target_scale: float,
                               target_centre: float = 0.0) -> None:
        """``data_norm_`` (with ``data_norm='private'`` and no feature scaling), ``y_bound_``
        (with ``y_bound='private'``) and ``y_centre_`` (when the targets are centred,
        :attr:`_centres_targets`): the released bounds, in the units of the data."""
        if "rows" in bounds:
            self.data_norm_ = float(_bounds.SCALED_BOUND * feature_scales[0])
        if "target" in bounds:
            self.y_bound_ = float(_bounds.SCALED_BOUND * target_scale)
            if self._centres_targets:
                self.y_centre_ = float(target_centre)

    def _magnitudes_resolvable(self, n_samples: int, n_features: int, secure: bool, block_sizes=None) -> bool:
        """Whether the per-feature orders of magnitude can be released at this size and budget
        (:attr:`~._scaling.ScalingPlan.resolves_magnitudes`: ``n`` above the count a window needs
        to be significant). Below it every feature's order would be read from noise, and a
        feature blown up by a small one dominates every clipped row; ``fit`` then releases one
        row bound instead, as ``data_norm='private'`` does (:attr:`_releases_row_bound`), which
        cannot blow a feature up. A public function of ``n``, ``d``, the budget and, for a Dask fit,
        the ``block_sizes`` in their reading order (:meth:`_plan_scaling`). The switch
        is at the release's own limit, not tuned: on the validation sets of
        ``benchmarks/real.py`` the row bound was at least as good in every cell below it (9 of
        9, within one paired standard error; ``benchmarks/results/low_signal_validation.md``)."""
        if not (self._scales_features and self.data_norm is None):
            return True
        plan = self._plan_scaling(n_samples, n_features, False, as_zcdp=secure, subsample_moments=True,
                                  block_sizes=block_sizes)
        return plan.resolves_magnitudes

    def _plan_scaling(self, n_samples: int, n_features: int, row_bound: bool = False, as_zcdp: bool = False,
                      subsample_moments: bool = False, block_sizes=None):
        """The plan of the scaling release (:mod:`._scaling`), or ``None`` without scaling: a
        share :data:`~._scaling.SCALING_SHARE` of the fit's ``mu**2`` (``delta > 0``; ``mu`` of
        the one Gaussian release that meets (epsilon, delta)) or of its ``epsilon`` (``delta =
        0``), plus :data:`~._scaling.MAGNITUDE_SHARE` for the orders of magnitude when there is
        no public ``data_norm`` and no private row bound (``row_bound``: the rows are then
        bounded by :data:`~._bounds.SCALED_BOUND`). ``subsample_moments``: the moments are computed
        over the first :func:`~._scaling.moment_rows` rows of the fit's random order; with
        ``block_sizes`` (a Dask fit's blocks in their reading order), over the whole leading blocks
        that cover them (:func:`~._scaling.covered_rows`)."""
        if not self._scales_features:
            return None
        bound = _bounds.SCALED_BOUND if row_bound else self._data_norm
        share = _scaling.SCALING_SHARE + (_scaling.MAGNITUDE_SHARE if bound is None else 0.0)
        centred = bool(self.fit_intercept)
        if self._delta_for(n_samples) == 0.0:
            budget = {"pure_epsilon": share * float(self.epsilon)}
        else:
            budget = {"gaussian_mu": math.sqrt(share) * self._budget_mu(n_samples, as_zcdp)}
        return _scaling.plan_scaling(n_samples, n_features, bound, centred=centred, subsample_moments=subsample_moments,
                                     block_sizes=block_sizes, **budget)

    def _task_epsilon_guess(self, n_samples: int, n_tasks: int, releases_share: float, as_zcdp: bool = False) -> float:
        """The per-task epsilon if every release is Gaussian: the epsilon of one task's share of
        ``mu**2`` (:meth:`_budget_mu`; exact then, and used as it is; where the calibration
        starts otherwise). A share whose Gaussian is ``(0, delta)``-DP by itself (a budget whose
        ``epsilon`` is tiny beside its ``delta``) has no epsilon to start from: the calibration
        then starts from an even split of ``epsilon`` over the tasks."""
        mu = self._budget_mu(n_samples, as_zcdp)
        guess = exact_gaussian_epsilon(mu * math.sqrt((1.0 - releases_share) / n_tasks), self._delta_for(n_samples))
        return guess if guess > 0 else float(self.epsilon) / n_tasks

    def _standardise(self, passes, scaling, rng: np.random.Generator, sums: np.ndarray | None = None) -> tuple:
        """Release the rows' orders of magnitude when there is no public ``data_norm``, divide
        and clip the rows, release their noisy moments and standardise them
        (:func:`~._scaling.release_magnitudes`, :func:`~._scaling.release_moments`), through
        their ``passes`` (:func:`~._scaling.feature_passes`: in place in memory, lazy maps for
        Dask rows); ``sums``, the column sums of the clipped rows when an earlier pass computed
        them. Without an intercept the rows are scaled by their root mean square but not centred
        (the model stays a linear map through the origin), as ``StandardScaler(with_mean=False)``
        does. Returns ``(feature_scales, mean, scale, C)``, the last three for
        :meth:`_fold_scaling`."""
        feature_scales, undivided = np.ones(scaling.n_features), None
        head = passes.head(scaling.moment_rows)  # the rows the moments are computed over
        if scaling.magnitude_noise is not None:
            magnitude_rng, rng = rng.spawn(2)
            feature_scales = _scaling.release_magnitudes(head, scaling, magnitude_rng)
            sums = head.divide_and_clip(feature_scales, scaling.data_norm)
            # the other rows are divided and clipped as they are standardised, in one pass
            undivided = (scaling.moment_rows, feature_scales, scaling.data_norm)
        elif scaling.moment_rows < scaling.n_samples:
            sums = None  # an earlier pass summed all rows
        mean, scale = _scaling.release_moments(head, scaling, rng, sums)
        passes.standardise(mean, scale, scaling.clip_norm, undivided)
        return feature_scales, mean, scale, scaling.clip_norm

    def _fold_scaling(self, feature_scales: np.ndarray, standardisation, target_scale: float,
                      target_centre: float = 0.0) -> None:
        """``coef_`` / ``intercept_`` on the clipped rows in the units of ``X`` and ``y``: the
        standardisation (:func:`~._scaling.fold_scaling`, when ``standardisation`` is ``(mean,
        scale, C)``), then the per-feature divisors ``feature_scales`` (orders of magnitude, or
        the private row bound), then the private target bound's ``target_scale`` and the
        released ``target_centre`` (:func:`~._bounds.release_centred_bound`) added back."""
        coef = np.atleast_2d(self.coef_)
        intercept = np.atleast_1d(self.intercept_)
        if standardisation is not None:
            coef, intercept = _scaling.fold_scaling(coef, intercept, *standardisation)
        coef = coef / feature_scales * target_scale
        intercept = intercept * target_scale + target_centre
        self.coef_ = coef.reshape(np.shape(self.coef_))
        self.intercept_ = intercept if np.ndim(self.intercept_) else float(intercept[0])

    def _configured_solver(self, algorithm: str, solver=None):
        """The registered solver of ``algorithm`` with this estimator's solver options.

        ``constraint`` / ``constraint_p`` configure the domain of the solvers that have one
        (``'ftrl'``); ``step_scale`` multiplies the default step of the solvers that have that
        public hyper-parameter; ``kappa_lower`` of ``'epoch_growth'`` is
        :meth:`_kappa_lower`. An option the chosen solver does not have is an error, never
        silently ignored. ``solver``: a solver of ``algorithm`` other than the registered one
        (``partial_fit``'s :class:`~skdpsco.solvers.ftrl.StreamFTRL`).
        """
        solver = ALGORITHMS[algorithm] if solver is None else solver
        fields = {field.name for field in dataclasses.fields(solver)}
        options = {}
        if self.constraint_p is not None and self.constraint == "l2":
            raise ValueError(
                "constraint_p sets the exponent of the l_p potential of constraint='l1' or 'lp'; "
                "with constraint='l2' leave it None."
            )
        if self.constraint != "l2":
            if "constraint" not in fields:
                raise ValueError(
                    f"constraint={self.constraint!r} is implemented by algorithm='ftrl' only; "
                    f"got algorithm={algorithm!r}. Use algorithm='ftrl' or 'auto'."
                )
            if self.constraint == "lp" and self.constraint_p is None:
                raise ValueError("constraint='lp' needs constraint_p, the exponent p in (1, 2].")
            options.update(constraint=self.constraint, p=self.constraint_p)
        if self.step_scale is not None:
            if "step_scale" not in fields:
                with_scale = sorted(
                    name for name, s in ALGORITHMS.items()
                    if "step_scale" in {f.name for f in dataclasses.fields(s)}
                )
                raise ValueError(
                    f"step_scale is a hyper-parameter of the algorithms {with_scale}; "
                    f"algorithm={algorithm!r} has none. Leave step_scale=None."
                )
            options["step_scale"] = float(self.step_scale)
        if "kappa_lower" in fields:
            options["kappa_lower"] = self._kappa_lower()
        options.update(self._checked_solver_options(algorithm, fields))
        return dataclasses.replace(solver, **options) if options else solver

    def _checked_solver_options(self, algorithm: str, fields: set) -> dict:
        """``solver_options``, checked against the fields of ``algorithm``'s solver: an unknown
        name, or one an estimator parameter sets, is an error naming the valid ones."""
        if not self.solver_options:
            return {}
        names = set(self.solver_options)
        reserved = names & {"constraint", "p", "step_scale"}
        if reserved:
            raise ValueError(
                f"solver_options {sorted(reserved)} are set by the estimator parameters constraint, "
                "constraint_p and step_scale; pass them there."
            )
        unknown = names - fields
        if unknown:
            settable = sorted(fields - {"constraint", "p", "step_scale"})
            raise ValueError(
                f"solver_options {sorted(unknown)} are not options of algorithm={algorithm!r}; "
                f"its options are {settable}."
            )
        return dict(self.solver_options)

    def _kappa_lower(self) -> float:
        """Default ``kappa_lower`` of ``'epoch_growth'`` (``asi_growth.md`` §1.5, §6), public.

        * ``|y - <w, x>|^p`` (:class:`~skdpsco.losses.PowerLoss`, ``DPLpRegression``): ``p``, the
          growth of ``p``-power regression (§1.5; noiseless data attain it, noise only makes the
          growth exponent larger, towards 2), floored at :data:`KAPPA_LOWER_FLOOR` = 1.5: ``p = 1``
          is sharp (``kappa = 1``, but ``kappa_lower`` must exceed 1), and ``kappa_lower -> 1``
          multiplies the epochs by ``1 / (kappa_lower - 1)``; a function with growth ``p < 1.5``
          also has 1.5-growth on the bounded domain (nesting, §1.4). With ``alpha > 0`` the ridge
          term adds 2-growth, which ``max(p, 1.5) <= 2`` still lower-bounds.
        * the pinball loss (:class:`~skdpsco.losses.PinballLoss`, ``DPQuantileRegressor``):
          :data:`KAPPA_LOWER_FLOOR`, as ``p = 1`` (it is sharp for the same reason: piecewise
          linear, with one kink at the conditional quantile).
        * every other loss: 2, the growth of the ridge-penalised (``alpha > 0``) strongly convex
          objective (§1.5, §6 "Defaults"); without a penalty no growth is guaranteed and 2 is the
          spec's default.
        """
        loss = self._make_loss()
        if isinstance(loss, PowerLoss):
            return max(float(loss.p), KAPPA_LOWER_FLOOR)
        if isinstance(loss, PinballLoss):
            return KAPPA_LOWER_FLOOR
        return 2.0

    def _store_coef(self, coef: np.ndarray) -> None:
        """Split the augmented parameter into ``coef_`` and ``intercept_``."""
        if self.fit_intercept:
            self.coef_ = coef[:, :-1].copy()
            self.intercept_ = coef[:, -1] * self._solver_data_norm
        else:
            self.coef_ = coef.copy()
            self.intercept_ = np.zeros(coef.shape[0])


class SmoothingMixin:
    """Gaussian smoothing of a non-smooth loss for solvers that need a Lipschitz gradient.

    Adds the ``smoothing_width`` parameter: ``None`` takes the rate-balancing default of
    :func:`skdpsco.smoothing.default_smoothing_width` (public quantities only; for ``delta = 0``
    with ``ln(1 / delta)`` replaced by the number of parameters, the pure-DP privacy term).
    """

    def _smoothed(self, loss, problem: Problem):
        width = self.smoothing_width
        if width is None:
            # Pure DP (delta = 0): the default's privacy term sqrt(p ln(1/delta)) / (epsilon n)
            # becomes p / (epsilon n) (``asi_growth.md`` §4.4), i.e. ln(1/delta) -> p.
            delta = problem.delta if problem.delta > 0 else math.exp(-min(problem.n_params, 700))
            width = default_smoothing_width(
                problem.n_samples, problem.n_params, problem.epsilon, delta,
                self._row_norm_bound, problem.radius, loss,
            )
        return smooth(loss, width)


class BaseDPLinearClassifier(LinearClassifierMixin, ClassifierMixin, BaseDPLinearModel):
    """Base of the private linear classifiers: the public label set and its encoding."""

    _parameter_constraints: dict = {
        **BaseDPLinearModel._parameter_constraints,
        "classes": ["array-like", None],
        # 'balanced' passes validation to be refused in fit with the reason (_class_weight_factors)
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }

    _numeric_targets = False

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta="auto",
        data_norm=None,
        radius=None,
        alpha=0.0,
        fit_intercept=True,
        algorithm="auto",
        constraint="l2",
        constraint_p=None,
        step_scale=None,
        solver_options=None,
        random_state=None,
        accountant=None,
        verbose=0,
        classes=None,
        feature_scaling="standard",
        max_weight=1.0,
        class_weight=None,
        secure_noise=None,
        max_partial_fit_calls=None,
    ):
        super().__init__(
            epsilon=epsilon, delta=delta, data_norm=data_norm, radius=radius, alpha=alpha,
            fit_intercept=fit_intercept, algorithm=algorithm, constraint=constraint,
            constraint_p=constraint_p, step_scale=step_scale, solver_options=solver_options,
            random_state=random_state, accountant=accountant, verbose=verbose,
            feature_scaling=feature_scaling, max_weight=max_weight, secure_noise=secure_noise,
            max_partial_fit_calls=max_partial_fit_calls,
        )
        self.classes = classes
        self.class_weight = class_weight

    def fit(self, X, y, sample_weight=None):
        """Fit the private model.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask.array.Array, dask.dataframe.DataFrame} of shape (n_samples, n_features)
            Training rows: dense, or a scipy sparse matrix (CSR, CSC and the other formats are
            converted to canonical CSR, never densified; every algorithm runs on it, see
            ``feature_scaling`` for what changes), or a Dask collection (the ``dask`` extra), read
            block by block where the blocks live: the full-batch algorithms and the one-pass ones
            of ``skdpsco._dask.ALGORITHMS`` run on it, the others are refused. The one-pass ones
            read whole partitions, in a shuffled order, each partition's rows shuffled: the same
            guarantee, but on a table stored sorted by label their model is far from the
            in-memory one (user guide, "Data larger than memory: Dask").
        y : array-like of shape (n_samples,)
            Labels, all in ``classes`` when it is given.
        sample_weight : array-like of shape (n_samples,), float or None, default=None
            Non-negative weight of each row's loss (scikit-learn's semantics), each at most
            ``max_weight`` after multiplication by its class's ``class_weight``; a larger one is
            an error. ``None``: the unweighted fit.

        Returns
        -------
        self
            The fitted estimator.
        """
        return self._fit_private(X, y, sample_weight)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Update the model with one batch of new rows of a stream (private FTRL with tree aggregation).

        Every model released after every call is covered by one guarantee, ``(epsilon_,
        delta_)``, charged to the accountant once, at the first call, before any row is read:
        the stream's event ``dp_event_`` (tree aggregation over ``max_partial_fit_calls *
        steps_per_call`` leaves, each row one clipped gradient in one leaf; user guide,
        "Streams: partial_fit"). Public: ``max_partial_fit_calls``, the number of calls and each
        call's number of rows. Each row must be passed in one call only: the library cannot see
        a row's identity, and a row passed in ``k`` calls is protected only as a group of ``k``
        rows (its privacy loss is that of ``k``-fold composition, ``sqrt(k)`` times the ``mu`` of
        the Gaussian guarantee). ``fit`` ends the stream; a call after ``fit`` starts a new one,
        from the zero model, with a new charge. Needs a numeric ``data_norm`` and ``delta``,
        ``feature_scaling=None``, ``algorithm`` ``'auto'`` or ``'ftrl'``, and no weights; the
        ``solver_options`` are those of :class:`~skdpsco.solvers.ftrl.StreamFTRL`
        (``steps_per_call``, ``clip_norm``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The new rows (sparse rows are made dense, one call at a time).
        y : array-like of shape (n_samples,)
            Their labels, all in the label set.
        classes : array-like of shape (n_classes,) or None, default=None
            The public label set; required at the first call unless the ``classes`` parameter
            is set (scikit-learn's convention). Later calls may repeat it.
        sample_weight : None
            Not supported (``None`` only).

        Returns
        -------
        self
            The estimator, with the model after this call.
        """
        return self._partial_fit_private(X, y, classes, sample_weight)

    def _stream_targets(self, y, classes, first):
        """Labels of a call encoded in the label set fixed at the first call: ``classes`` of the
        call or the ``classes`` parameter (they must agree), refused when missing."""
        check_classification_targets(y)
        if first:
            if classes is None and self.classes is None:
                raise ValueError(
                    "classes must be passed at the first call of partial_fit (the public label set; "
                    "a batch may lack some labels), or set with the classes parameter."
                )
            label_set = self._public_label_set(self.classes if classes is None else classes)
            if self.classes is not None and not np.array_equal(label_set, self._public_label_set()):
                raise ValueError("partial_fit's classes= differs from the classes parameter; pass one label set.")
        else:
            label_set = self.classes_
            if classes is not None and not np.array_equal(self._public_label_set(classes), label_set):
                raise ValueError("classes= differs from the label set of the first call of partial_fit (classes_).")
        return self._encoded_labels(y, label_set)

    def _class_weight_factors(self, y):
        """Each row's ``class_weight`` (1 for a label missing from the dict), or ``None``.

        The dict is public, checked before anything is charged: its values finite, non-negative
        and at most ``max_weight`` (named in the message), its keys labels of ``classes_`` (the
        message lists them only when ``classes`` is given: with ``classes=None`` the missing ones
        would tell which labels ``y`` lacks). ``'balanced'`` is refused: its weights are
        functions of the label counts."""
        class_weight = self.class_weight
        if class_weight is None:
            return None
        if isinstance(class_weight, str):
            raise ValueError(
                "class_weight='balanced' is refused: it weighs each class by n_samples / (n_classes "
                "* its count in y), so the weights, and the model through them, would release the "
                "label counts without privacy accounting. Pass a dict of public class weights (e.g. "
                "from known population frequencies), each at most max_weight."
            )
        for label, value in class_weight.items():
            if not (isinstance(value, numbers.Real) and 0.0 <= float(value) <= float(self.max_weight)):
                raise ValueError(
                    f"class_weight values must be real numbers in [0, max_weight={float(self.max_weight):g}]; "
                    f"got {value!r} for the label {label!r}. Raise max_weight, the public bound on "
                    "every row's weight, or lower the class weight."
                )
        known = sum(label in class_weight for label in self.classes_)
        if known < len(class_weight):
            unknown = "" if self.classes is None else f" {sorted(map(repr, set(class_weight) - set(self.classes_.tolist())))}"
            raise ValueError(
                f"class_weight has keys{unknown} that are not labels of the label set (classes=); "
                "its keys must be class labels."
            )
        per_class = np.array([float(class_weight.get(label, 1.0)) for label in self.classes_])
        return per_class[np.searchsorted(self.classes_, y)]

    def _public_label_set(self, listed=None) -> np.ndarray:
        """``classes`` (or ``listed``) sorted, refused unless it holds at least 2 labels, each
        once: a label listed twice is a mistake in the public label set (which of the two would a
        coefficient be for?), and a public parameter, so the check reads nothing of the data."""
        listed = np.asarray(self.classes if listed is None else listed)
        classes = np.unique(listed)
        if classes.size != listed.size:
            raise ValueError(
                f"classes= lists a label more than once ({listed.size} entries, {classes.size} distinct "
                "labels); pass each label of the public label set once."
            )
        if classes.size < 2:
            raise ValueError(
                f"classes= must hold at least 2 distinct labels (the public label set); got {classes.size}."
            )
        return classes

    def _encode_targets(self, y):
        """``+-1`` for two classes, class indices otherwise; sets ``classes_``.

        With ``classes=None`` the label set ``np.unique(y)`` leaves ``fit`` unaccounted: a
        :class:`PrivacyWarning` naming ``classes=`` says so, once per fit. No message repeats a
        label value or a count read from ``y``. A Dask ``y`` needs ``classes`` (its label set
        would be one more pass and an unaccounted release) and is encoded lazily.
        """
        if layout_of(y).lazy:
            return self._encode_dask_targets(y)
        if not (y.ndim == 1 and y.dtype.kind in "biu"):  # integer labels: always binary or multiclass
            check_classification_targets(y)  # (it finds the distinct labels to tell which: a pass and a sort)
        if self.classes is None:
            warnings.warn(labels_from_data_warning(), PrivacyWarning, stacklevel=5)
            classes = np.unique(y)
            if classes.size < 2:
                raise ValueError(
                    "y has fewer than 2 distinct labels; a classifier needs at least 2 classes. "
                    "Pass classes= with the public label set if the other labels exist but do not "
                    "occur in y."
                )
        else:
            classes = self._public_label_set()
        return self._encoded_labels(y, classes)

    def _encoded_labels(self, y, classes: np.ndarray) -> np.ndarray:
        """``+-1`` for two classes, indices in ``classes`` otherwise; sets ``classes_``. A label
        outside ``classes`` is refused, without repeating it."""
        indices = _label_indices(y, classes)
        self.classes_ = classes
        if classes.size == 2:
            return 2.0 * indices - 1.0  # +-1, in one pass
        return indices

    def _encode_dask_targets(self, y):
        """:meth:`_encode_targets` of a Dask ``y``: one pass checks that every label is in
        ``classes``; the encoding is a lazy map of the blocks."""
        from .. import _dask

        if self.classes is None:
            raise ValueError(
                "classes=None with a Dask y: pass classes= with the public label set (reading it from "
                "y would be one more pass over the data and a release without privacy accounting)."
            )
        classes = self._public_label_set()
        if _dask.count_outside(y, classes):
            raise ValueError(
                "y contains labels that are not in classes=; pass the complete public label set "
                "(this message does not repeat the labels of y)."
            )
        self.classes_ = classes
        indices = _dask.label_indices(y, classes)
        return np.where(indices == 1, 1.0, -1.0) if classes.size == 2 else indices

    def decision_function(self, X):
        """Confidence scores ``clip(X) @ coef_.T + intercept_``, each row mapped as in ``fit``
        (clipped to ``row_norm_`` after ``feature_scales_``, then standardised and clipped with
        ``standardisation_``; see ``_clipped``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for two classes, (n_samples, n_classes) otherwise
        """
        scores = self._clipped(X) @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # A differentially private model trades accuracy for privacy by design: on the small
        # datasets of the common checks its accuracy is limited by the noise.
        tags.classifier_tags.poor_score = True
        return tags
