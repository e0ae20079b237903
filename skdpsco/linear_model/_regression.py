"""Differentially private linear regression with ``|y - <w, x>|^p`` losses."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions

from ..defaults import regression_radius
from ..losses import PowerLoss
from ..rows import layout_of
from . import _bounds
from ._base import BaseDPLinearModel, SmoothingMixin


class BaseDPRegressor(RegressorMixin, BaseDPLinearModel):
    """Base of the private linear regressors: the target bound and the linear prediction.

    Targets are clipped to ``[-y_bound, y_bound]`` inside ``fit`` (a per-row map: no privacy
    cost), with a bound released privately by default (``y_bound='private'``, :mod:`._bounds`).
    The default radius (:func:`skdpsco.defaults.regression_radius`) lets predictions reach
    twice the target bound. Subclasses define the loss (:meth:`_make_loss`); those whose
    targets or predictions are not ``<w, x>`` on the real line override
    :meth:`_encode_targets`, :meth:`_fold_scaling` and :meth:`predict`.
    """

    _parameter_constraints: dict = {
        **BaseDPLinearModel._parameter_constraints,
        "y_bound": [Interval(numbers.Real, 0, None, closed="neither"), StrOptions({"private"})],
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
        y_bound="private",
        feature_scaling="standard",
        max_weight=1.0,
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
        self.y_bound = y_bound

    def fit(self, X, y, sample_weight=None):
        """Fit the private model.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask.array.Array, dask.dataframe.DataFrame} of shape (n_samples, n_features)
            Training rows, dense, scipy sparse or a Dask collection, as in
            :meth:`DPLogisticRegression.fit <skdpsco.DPLogisticRegression.fit>` (which algorithms
            run on each, and what the order of a Dask collection's partitions does).
        y : array-like of shape (n_samples,)
            Targets; clipped to the target bound.
        sample_weight : array-like of shape (n_samples,), float or None, default=None
            Non-negative weight of each row's loss (scikit-learn's semantics), each at most
            ``max_weight``; a larger one is an error. ``None``: the unweighted fit.

        Returns
        -------
        self : object
        """
        self._fit_private(X, y, sample_weight)
        return self

    def partial_fit(self, X, y, sample_weight=None):
        """Update the model with one batch of new rows of a stream (private FTRL with tree
        aggregation), as :meth:`DPLogisticRegression.partial_fit
        <skdpsco.DPLogisticRegression.partial_fit>` (what is public, the one charge at the first
        call, rows passed in several calls); needs a numeric ``y_bound`` too.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The new rows.
        y : array-like of shape (n_samples,)
            Their targets; clipped to ``y_bound``.
        sample_weight : None
            Not supported (``None`` only).

        Returns
        -------
        self
        """
        return self._partial_fit_private(X, y, None, sample_weight)

    def _check_stream_bounds(self) -> None:
        if not isinstance(self.y_bound, numbers.Real):
            raise ValueError(
                f"partial_fit needs a public numeric y_bound (the bound on |y|, fixed before the stream); "
                f"got y_bound={self.y_bound!r}."
            )

    @property
    def _domain_radius(self) -> float:
        if self.radius is None:
            return regression_radius(self._row_norm_bound, self._target_bound)
        return float(self.radius)

    @property
    def _private_target_bound(self) -> bool:
        return self.y_bound == "private"

    @property
    def _target_bound(self) -> float:
        """Bound on the targets the solver reads: ``y_bound``, or with ``'private'``
        :data:`~._bounds.SCALED_BOUND` (the targets are divided by a released power of two)."""
        return _bounds.SCALED_BOUND if self._private_target_bound else float(self.y_bound)

    def _encode_targets(self, y):
        y = layout_of(y).as_floats(y)
        if self._private_target_bound:  # clipped to the released bound inside fit
            return y
        return np.clip(y, -float(self.y_bound), float(self.y_bound))

    def _loss_bounds(self):
        return {"y_bound": self._target_bound}

    def _store_coef(self, coef):
        super()._store_coef(coef)
        self.coef_ = self.coef_.ravel()
        self.intercept_ = float(self.intercept_[0])

    def _margins(self, X):
        """``clip(X) @ coef_ + intercept_``, each row mapped as in ``fit`` (``_clipped``)."""
        return self._clipped(X) @ self.coef_ + self.intercept_

    def predict(self, X):
        """Predicted targets ``clip(X) @ coef_ + intercept_``, each row mapped as in ``fit``
        (clipped to ``row_norm_`` after ``feature_scales_``, then standardised and clipped with
        ``standardisation_``; see ``_clipped``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._margins(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # Privacy noise limits the fit on the small datasets of the common checks.
        tags.regressor_tags.poor_score = True
        return tags


class DPLpRegression(SmoothingMixin, BaseDPRegressor):
    """Linear regression minimising ``|y - <w, x>|^p`` under (epsilon, delta)-differential privacy.

    ``p=2`` is least squares, ``p=1`` least absolute deviations (a private median regression,
    the conditional-median counterpart of ``QuantileRegressor(quantile=0.5)``). Targets are
    clipped to ``[-y_bound, y_bound]`` inside ``fit`` (a per-row map: no privacy cost), with a
    bound released privately by default (``y_bound='private'``).

    For ``p=1`` the algorithms that need a Lipschitz gradient optimise the Gaussian smoothing of
    the absolute loss in closed form (:mod:`skdpsco.smoothing`), within
    ``smoothing_width * sqrt(2 / pi)`` of it. For ``1 < p < 2`` the loss is Hölder-smooth with
    exponent ``p - 1`` (its gradient is not Lipschitz): ``'auto'`` trains it with DP-SGD-Gradient
    of Wang et al. (``'gradient_perturbation'``, which needs only the gradient bound for privacy);
    ``'ftrl'`` and ``'output_perturbation'`` accept it too, the solvers that need a Lipschitz
    gradient refuse it.

    Parameters
    ----------
    epsilon, delta, data_norm, alpha, fit_intercept, algorithm, constraint, constraint_p, \
step_scale, solver_options, random_state, accountant, verbose, feature_scaling, max_weight, secure_noise, \
max_partial_fit_calls
        As in :class:`~skdpsco.DPLogisticRegression`. The private target bound
        (``y_bound='private'``) is released from the unweighted targets.
    radius : float or None, default=None
        Public radius of the parameter domain, as in :class:`~skdpsco.DPLogisticRegression`.
        ``None``: :func:`skdpsco.defaults.regression_radius`, ``2 y_bound / B`` with ``B`` the
        row bound of the rows the solver reads (``sqrt(2) c`` with the intercept column, ``c`` = 1
        with ``feature_scaling``, ``data_norm`` without): models whose predictions
        reach twice the target bound. The Lipschitz constant, hence the noise, grows with the
        radius for ``p > 1``, so a radius much larger than the models worth fitting costs
        accuracy (the former default ``radius=10`` did worse than predicting zero on synthetic
        least squares at ``n = 1000``).
    p : float, default=2.0
        Exponent of the loss, in [1, 2].
    y_bound : float or 'private', default='private'
        Bound on ``|y|``; targets beyond it are clipped. A number is a public bound: it must not
        be computed from the training data. It sets the Lipschitz constant ``p B (y_bound + B
        R)^(p - 1)`` for ``p > 1``. ``'private'``: bought inside ``fit`` with a public share of
        the budget (``skdpsco.linear_model._bounds``): one noisy histogram of the binary orders
        of magnitude of ``|y|`` gives a power of two ``s`` above most targets (the top order
        holding significantly many), the targets are clipped to ``sqrt(2) s`` and divided by
        ``s``, and the model is folded back to the units of ``y`` (``y_bound_`` holds ``sqrt(2)
        s``). The default: on the validation sets it was as accurate as the true largest
        ``|y|`` and far better than a loose public bound
        (``benchmarks/results/private_bounds_validation.md``). For least squares (``p=2``)
        with an intercept the histogram is of the *signed* orders (one release, the same
        cost): the range ``[L, U]`` from the top significant order of each sign (``0`` always
        inside) is released as its centre ``y_centre_`` and half-width ``y_bound_``; the
        targets are clipped to it, the centre is subtracted and added back to the intercept.
        One-signed targets (counts, prices, shares) then get half the bound and an intercept
        near zero; on few rows the release gets a larger share (up to 25 %,
        :func:`skdpsco.linear_model._bounds.target_range_share`). Together they lowered the
        RMSE on every validation set (star98 1.87 -> 1.70, grunfeld 7.35 -> 5.23, engel 3.92 ->
        2.40 times the non-private RMSE at epsilon 1; ``benchmarks/results/regression_peers.md``).
    smoothing_width : float or None, default=None
        Standard deviation of the Gaussian smoothing of the absolute loss (``p=1``), in units of
        the target. ``None``: the rate-balancing default of
        :func:`skdpsco.smoothing.default_smoothing_width`.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has string feature names.
    epsilon_, delta_ : float
        The guarantee spent by this fit.
    dp_event_ : dp_accounting.DpEvent
    algorithm_ : str
    loss_ : MarginLoss
        The loss actually optimised (the smoothed one where smoothing applied).
    n_gradients_ : int
    n_iter_ : ndarray of shape (1,), dtype int32
        Passes over the rows; see :class:`~skdpsco.DPLogisticRegression`.
    solver_info_ : dict
    radius_ : float
        The radius of the domain actually used (``radius``, or the default rule's).
    y_bound_ : float
        The released target bound, in the units of ``y`` (``y_bound='private'`` only): the
        half-width of the targets' range around ``y_centre_`` when that is set.
    y_centre_ : float
        The released centre of the targets' range (``y_bound='private'``, ``p=2`` and
        ``fit_intercept`` only): targets are clipped to ``y_centre_ +- y_bound_``.
    data_norm_ : float
        As in :class:`~skdpsco.DPLogisticRegression`.
    feature_scales_, row_norm_, standardisation_
        As in :class:`~skdpsco.DPLogisticRegression`.

    Notes
    -----
    Inside a wrapper that fits on the labels (``CalibratedClassifierCV``, ``StackingClassifier``,
    ``StackingRegressor``) the wrapper's output is not covered by this guarantee; ``fit`` warns,
    on a best-effort basis: see :class:`~skdpsco.DPLogisticRegression`, Notes.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco import DPLpRegression, PrivacyAccountant
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 3)) / 2
    >>> y = X @ [0.5, -0.3, 0.2] + 0.1 * rng.normal(size=5000)
    >>> reg = DPLpRegression(epsilon=2.0, data_norm=2.0, y_bound=2.0, radius=2.0,
    ...                      accountant=PrivacyAccountant()).fit(X, y)
    >>> reg.epsilon_ <= 2.0
    True
    """

    _parameter_constraints: dict = {
        **BaseDPRegressor._parameter_constraints,
        "p": [Interval(numbers.Real, 1, 2, closed="both")],
        "smoothing_width": [Interval(numbers.Real, 0, None, closed="neither"), None],
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
        p=2.0,
        y_bound="private",
        smoothing_width=None,
        feature_scaling="standard",
        max_weight=1.0,
        secure_noise=None,
        max_partial_fit_calls=None,
    ):
        super().__init__(
            epsilon=epsilon, delta=delta, data_norm=data_norm, radius=radius, alpha=alpha,
            fit_intercept=fit_intercept, algorithm=algorithm, constraint=constraint,
            constraint_p=constraint_p, step_scale=step_scale, solver_options=solver_options,
            random_state=random_state, accountant=accountant, verbose=verbose, y_bound=y_bound,
            feature_scaling=feature_scaling, max_weight=max_weight, secure_noise=secure_noise,
            max_partial_fit_calls=max_partial_fit_calls,
        )
        self.p = p
        self.smoothing_width = smoothing_width

    @property
    def _centres_targets(self) -> bool:
        """Least squares with an intercept and the private target bound: the bound's release
        also gives a centre of the targets (:func:`~._bounds.release_centred_bound`), which the
        intercept takes back. Squared loss only: measured for it (``benchmarks/results/regression_peers.md``)."""
        return self._private_target_bound and self.fit_intercept and float(self.p) == 2.0

    def _make_loss(self):
        return PowerLoss(p=float(self.p))
