"""Private preprocessing: standardisation with accounted statistics.

A :class:`sklearn.preprocessing.StandardScaler` fitted on the training rows publishes their
per-feature means and variances (``mean_``, ``var_``, and through ``transform`` every model
trained after it): a pipeline that puts it in front of a private model is not private.
:class:`DPStandardScaler` releases the same statistics through the Gaussian mechanism, with the
features clipped to public bounds or to bounds released privately in the same fit (the estimators'
orders of magnitude), and records the release with the shared accountant like any private fit
(``DESIGN.md``, "Privacy model").

Per-row transforms need no budget
---------------------------------
A transform whose output for a row depends on that row alone and on public constants
(:class:`sklearn.preprocessing.Normalizer`, a fixed :class:`~sklearn.preprocessing.FunctionTransformer`
such as ``np.log1p``, clipping to public bounds, a fixed feature map) is applied independently
to every row: the private model trained after it sees a dataset in which replacing one input
row replaces one transformed row, so its (epsilon, delta) guarantee is unchanged and nothing is
charged. ``Normalizer()`` in front of an skdpsco estimator with ``data_norm=1`` is the budget-free
way to bound the rows. Any transformer *fitted* on the rows (``StandardScaler``, ``MinMaxScaler``,
``PCA``, ``SimpleImputer`` with a statistic, ...) is a release of the data and needs an accounted
private counterpart such as :class:`DPStandardScaler`.

Steps whose fit reads only public parameters
--------------------------------------------
Some scikit-learn transformers are *fitted*, yet learn nothing from the row values when their
parameters say everything: a :class:`~sklearn.preprocessing.OneHotEncoder` given its category
lists, a :class:`~sklearn.compose.ColumnTransformer` of such steps selecting columns by name.
:func:`row_dependence` is the rule :class:`~skdpsco.DPSearchCV` applies to the steps before its
estimator; :func:`public_encoder` builds a one-hot encoder it accepts; :class:`RowwiseTransformer`
is how a user declares a function that maps each row on its own.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

import dp_accounting
import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, OneHotEncoder, OrdinalEncoder
from sklearn.utils import get_tags
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._delta import resolve_delta
from ._secure import is_secure, noisy_release, secure_event
from .accounting import (
    PrivacyAccountant,
    calibrate_noise,
    calibrate_zcdp_rho,
    epsilon_of,
    gaussian_event,
    gaussian_noise_multiplier,
)
from .accounting._ledger import CarriesDefaultLedger, charge_fit
from .linear_model import _bounds, _scaling
from .linear_model._base import _generator, relative_weights
from .rows import DENSE

__all__ = [
    "DPStandardScaler",
    "RowwiseTransformer",
    "public_encoder",
    "row_dependence",
    "scaler_sensitivities",
]


def scaler_sensitivities(lower: np.ndarray, upper: np.ndarray, n_samples: int) -> tuple[float, float]:
    """Replace-one ``l2``-sensitivities of the two statistics of :class:`DPStandardScaler`.

    With every feature clipped to ``[l_j, u_j]``, midpoint ``m_j = (l_j + u_j) / 2`` and half-range
    ``h_j = (u_j - l_j) / 2``, the scaler releases

    * the centred mean ``(1/n) sum_i (x_ij - m_j)``: one row moves feature ``j`` by at most
      ``2 h_j / n``, so the ``l2`` sensitivity over the features is ``||u - l||_2 / n``;
    * the centred second moment ``(1/n) sum_i (x_ij - m_j)**2``, each term in ``[0, h_j**2]``:
      sensitivity ``||h**2||_2 / n``.

    Centring at the public midpoint (a public shift) halves the range of the squares compared
    with the raw second moment ``E[x**2]`` on a symmetric range.

    Returns
    -------
    (mean_sensitivity, second_moment_sensitivity) : tuple of float
    """
    half_range = (np.asarray(upper, dtype=float) - np.asarray(lower, dtype=float)) / 2.0
    # math.hypot scales before it squares: finite wherever the norm is (np.linalg.norm squares h**2)
    return (
        math.hypot(*np.ravel(2.0 * half_range)) / n_samples,
        math.hypot(*np.ravel(half_range**2)) / n_samples,
    )


def _scaler_event(noise_multiplier: float, n_releases: int, secure: bool = False) -> dp_accounting.DpEvent:
    """``n_releases`` Gaussian releases, each with noise ``noise_multiplier`` times its own
    sensitivity: the event of the whole fit (PLD composes them exactly). ``secure``: the
    releases are grid releases with discrete Gaussian noise, zCDP of the same ``rho``
    (:func:`skdpsco._secure.secure_event`)."""
    if n_releases == 0:
        return dp_accounting.NoOpDpEvent()
    event = gaussian_event(noise_multiplier, 1.0)
    event = event if n_releases == 1 else dp_accounting.SelfComposedDpEvent(event, n_releases)
    return secure_event(event) if secure else event


@lru_cache(maxsize=128)
def _calibrated(epsilon: float, delta: float, n_releases: int, secure: bool = False) -> tuple[float, float]:
    """Smallest noise multiplier ``z`` for which :func:`_scaler_event` meets (epsilon, delta)
    (:func:`~skdpsco.accounting.calibrate_noise`), and the epsilon it spends. Public inputs only,
    hence cached."""
    if n_releases == 0:
        return 0.0, 0.0
    multiplier = calibrate_noise(lambda z: _scaler_event(z, n_releases, secure), epsilon, delta, rtol=1e-4)
    return multiplier, epsilon_of(_scaler_event(multiplier, n_releases, secure), delta)


def _scales_plan(n_samples: int, n_features: int, mu: float) -> tuple:
    """The release of the features' orders of magnitude without ``feature_bounds``, for a whole
    ``mu``-GDP budget, and the ``mu`` left for the statistics: the estimators' per-feature
    magnitudes (:func:`~skdpsco.linear_model._scaling.plan_scaling`; their share of ``mu**2`` is
    :data:`~skdpsco.linear_model._scaling.MAGNITUDE_SHARE` against
    :data:`~skdpsco.linear_model._scaling.SCALING_SHARE` for the statistics, as in the
    estimators), or, on rows too few for them
    (:attr:`~skdpsco.linear_model._scaling.ScalingPlan.resolves_magnitudes` false), the
    estimators' one private row bound (:func:`~skdpsco.linear_model._bounds.plan_bound`, at
    :func:`~skdpsco.linear_model._bounds.row_bound_share` of the budget). Returns ``(plan,
    event, statistics_mu)``."""
    plan = _scaling.plan_scaling(n_samples, n_features, None, gaussian_mu=mu)
    if plan.resolves_magnitudes:
        share = _scaling.MAGNITUDE_SHARE / (_scaling.MAGNITUDE_SHARE + _scaling.SCALING_SHARE)
        # the plan's events are the magnitudes', then the moments' (ScalingPlan.dp_event): the first only
        return plan, plan.dp_event.events[0], math.sqrt(1.0 - share) * mu
    share = _bounds.row_bound_share(n_samples, gaussian_mu=mu)
    bound = _bounds.plan_bound(gaussian_mu=math.sqrt(share) * mu)
    return bound, bound.dp_event, math.sqrt(1.0 - share) * mu


def _release_scales(X: np.ndarray, plan, rng: np.random.Generator) -> np.ndarray:
    """The powers of two ``s_j`` that :func:`_scales_plan`'s release gives the features: each
    feature's order of magnitude (:func:`~skdpsco.linear_model._scaling.release_magnitudes`), or
    one released bound on the row norms for all (:func:`~skdpsco.linear_model._bounds.release_bound`:
    ``|x_j| <= ||x||``)."""
    n_features = X.shape[1]
    if isinstance(plan, _bounds.BoundPlan):
        return np.full(n_features, _bounds.release_bound(_scaling.feature_passes(X, n_features).row_norms(), plan, rng))
    return _scaling.release_magnitudes(X, plan, rng)


def _scales_fit_event(n_samples: int, n_features: int, n_releases: int, mu: float, secure: bool) -> tuple:
    """``(plan, multiplier, event)`` of a fit without ``feature_bounds`` at the budget ``mu``:
    the scales' release (:func:`_scales_plan`) and the ``n_releases`` statistics, each a
    Gaussian of noise ``multiplier`` times its sensitivity, ``multiplier = sqrt(n_releases) /
    mu_s`` so that they compose to the ``mu_s``-GDP left (Dong, Roth & Su 2022, Cor. 3.3)."""
    plan, scales_event, statistics_mu = _scales_plan(n_samples, n_features, mu)
    multiplier = math.sqrt(n_releases) / statistics_mu
    event = dp_accounting.ComposedDpEvent([scales_event, _scaler_event(multiplier, n_releases)])
    return plan, multiplier, secure_event(event) if secure else event


@lru_cache(maxsize=128)
def _calibrated_scales(n_samples: int, n_features: int, epsilon: float, delta: float, n_releases: int,
                       secure: bool = False) -> tuple:
    """:func:`_scales_fit_event` for the largest budget that meets (epsilon, delta), and the
    epsilon it spends: ``mu`` of the one Gaussian release meeting (epsilon, delta), or in
    secure mode ``sqrt(2 rho)`` of the largest ``rho``-zCDP meeting it, as the estimators'
    budget; lowered by bisection only if the numerical conversion of the composed event
    overspends. Public inputs only, hence cached. Returns ``(plan, multiplier, event, spent)``."""
    mu = math.sqrt(2.0 * calibrate_zcdp_rho(epsilon, delta)) if secure else 1.0 / gaussian_noise_multiplier(epsilon, delta)

    def event(inverse_mu: float) -> dp_accounting.DpEvent:
        return _scales_fit_event(n_samples, n_features, n_releases, 1.0 / inverse_mu, secure)[2]

    inverse_mu = 1.0 / mu
    if epsilon_of(event(inverse_mu), delta) > epsilon:
        inverse_mu = calibrate_noise(event, epsilon, delta, initial=inverse_mu, rtol=1e-4)
    plan, multiplier, final = _scales_fit_event(n_samples, n_features, n_releases, 1.0 / inverse_mu, secure)
    return plan, multiplier, final, epsilon_of(final, delta)


def _weighted_mean(values: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """``mean_i(c_i values_i)`` over the rows (over ``n``, public): the plain mean without weights."""
    if weights is None:
        return values.mean(axis=0)
    return weights @ values / values.shape[0]


class DPStandardScaler(OneToOneFeatureMixin, TransformerMixin, CarriesDefaultLedger, BaseEstimator):
    """Standardise features with (epsilon, delta)-differentially private means and variances.

    Each feature is clipped to bounds ``[l_j, u_j]`` (a per-row map: no privacy cost), public
    (``feature_bounds``) or released inside the fit, then its (weighted) mean and variance are
    estimated with the Gaussian mechanism. Replace-one neighbours, ``n`` public. The fit is
    recorded with the accountant, as one event, before the rows are read.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter epsilon > 0 of this fit.
    delta : float or 'auto', default='auto'
        Privacy parameter delta in (0, 1), below ``1 / n_samples`` (``fit`` refuses a larger
        one). ``'auto'``: :func:`skdpsco.default_delta` of the number of rows.
    feature_bounds : tuple (lower, upper) or None, default=None
        Public bounds of the features: each a scalar or an array of shape (n_features,), with
        ``lower < upper`` and ``((upper - lower) / 2)**2`` finite. They must not be computed from the training rows (that would leak
        their extremes). Values outside are clipped before the statistics are computed; the
        noise grows with ``upper - lower``. ``None``: the bounds are released inside the fit,
        by the estimators' private feature scaling (see Notes), ``+-sqrt(2) s_j`` for a power of
        two ``s_j`` per feature (``feature_scales_``).
    with_mean : bool, default=True
        Centre the data before scaling (as :class:`~sklearn.preprocessing.StandardScaler`).
    with_std : bool, default=True
        Scale the data to unit variance.
    random_state : int, RandomState instance or None, default=None
        Source of the privacy noise. ``None`` for releases; a fixed seed makes the noise
        predictable to whoever knows it.
    accountant : PrivacyAccountant or None, default=None
        Ledger charged with this fit; ``None`` uses the shared default.
    secure_noise : bool or None, default=None
        Secure mode for this fit: ``True`` draws all its randomness from the operating system's
        cryptographically secure generator, refuses a ``random_state`` other than ``None`` and
        releases its single noisy statistics on a grid with exact discrete noise (see
        :func:`skdpsco.set_config` and the user guide's "Secure mode"); ``False``: numpy's
        seeded generator; ``None``: the global ``skdpsco.get_config()['secure_noise']``.
    max_weight : float, default=1.0
        Public bound on every ``sample_weight`` (as the estimators' ``max_weight``); a larger
        weight is refused before anything is charged. Unused without weights.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,) or None
        Private mean (clipped to the bounds); ``None`` when ``with_mean=False`` and
        ``with_std=False``.
    var_ : ndarray of shape (n_features,) or None
        Private variance, in ``[floor, h_j**2]`` with ``h_j = (u_j - l_j) / 2`` the largest
        variance a feature in its bounds can have and ``floor = min(noise_std_[1], h_j**2)``,
        the noise level of the second moment (below it the estimate is noise); ``None``
        when ``with_std=False``.
    scale_ : ndarray of shape (n_features,) or None
        ``sqrt(var_)``; ``None`` when ``with_std=False``.
    feature_scales_ : ndarray of shape (n_features,) or None
        Without ``feature_bounds``: the released powers of two ``s_j``; the bounds were
        ``+-sqrt(2) s_j``, and ``mean_``, ``var_`` and ``noise_std_`` are of ``x / s`` times
        ``s`` (``s**2``). ``None`` with public bounds, or when nothing is estimated.
    n_samples_seen_ : int
    n_features_in_ : int
    epsilon_, delta_ : float
        The guarantee spent (``epsilon_ <= epsilon``; 0 when nothing is estimated).
    dp_event_ : dp_accounting.DpEvent
        The event recorded with the accountant.
    noise_std_ : tuple of float
        Standard deviation of the noise on the mean and on the second moment (public), in the
        units of ``x / feature_scales_`` without ``feature_bounds``; with ``sample_weight``, a
        last entry for the noise on the mean relative weight ``mean_i(w_i) / max_weight``.

    Notes
    -----
    Mechanism (the sensitivities are :func:`scaler_sensitivities`): with ``m``, ``h`` the
    midpoints and half-ranges of the bounds, ``x`` the clipped rows and ``c_i = w_i /
    max_weight`` in ``[0, 1]`` the relative weights (1 without ``sample_weight``),

    * ``t = mean_i(c_i) + N(0, (z / n)**2)``, floored at its noise ``z / n`` (only with
      ``sample_weight``; one relative weight moves ``mean_i(c_i)`` by at most ``1 / n``;
      ``t = 1`` without);
    * ``mu = m + (mean_i(c_i (x_i - m)) + N(0, (z D1)**2 I)) / t``, ``D1 = ||u - l||_2 / n``;
    * ``S = (mean_i(c_i (x_i - m)**2) + N(0, (z D2)**2 I)) / t``, ``D2 = ||h**2||_2 / n`` (only
      with ``with_std``);
    * ``var = S - (mu - m)**2``, clipped to ``[floor, h**2]``; ``mu`` clipped to ``[l, u]``
      (post-processing).

    A weight in ``[0, 1]`` leaves the sensitivities of the sums as they are without weights (a
    term ``c (x - m)`` stays within ``[-h, h]``, ``c (x - m)**2`` within ``[0, h**2]``), so
    ``mu`` and ``var`` are the weighted mean and variance ``StandardScaler`` computes with the
    same weights, up to the noise and the clip.

    The releases use the same noise multiplier ``z``, the smallest for which their composition,
    ``SelfComposedDpEvent(gaussian_event(z, 1), k)``, meets (epsilon, delta)
    (:func:`skdpsco.accounting.calibrate_noise`, exact PLD composition). ``transform`` does not
    clip: it is applied to rows of the user's choosing and releases nothing about the
    training rows beyond ``mean_`` and ``scale_``.

    Without ``feature_bounds`` the bounds are released first, in the same event, by the
    estimators' private feature scaling (:mod:`skdpsco.linear_model._scaling`, step 0): a noisy
    histogram of every feature's binary order of magnitude gives a power of two ``s_j``
    (:func:`~skdpsco.linear_model._scaling.release_magnitudes`; of the unweighted entries), or,
    on rows too few for the histogram at the budget, one private bound ``s`` on the row norms
    for every feature (:func:`~skdpsco.linear_model._bounds.release_bound`, ``|x_j| <= ||x||``).
    The statistics are then those of ``x / s`` within ``[-sqrt(2), sqrt(2)]``
    (:data:`~skdpsco.linear_model._bounds.SCALED_BOUND`: the top order of the window is kept
    whole), multiplied back by ``s``; the noise of each feature is proportional to its own
    ``s_j``. The histogram (or the row bound) gets the estimators' share of the budget against
    the statistics (:data:`~skdpsco.linear_model._scaling.MAGNITUDE_SHARE` to
    :data:`~skdpsco.linear_model._scaling.SCALING_SHARE` of ``mu**2``; the row bound
    :func:`~skdpsco.linear_model._bounds.row_bound_share`), and the statistics ``z = sqrt(k) /
    mu_s`` for the ``mu_s`` left. Values beyond ``sqrt(2) s_j`` are clipped: a feature with heavy
    tails or a spread far below its magnitude (a mean of 10, a standard deviation of 1) gets a
    biased or noisy variance; public ``feature_bounds`` fitted to it do better.
    """

    _parameter_constraints: dict = {
        "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
        "delta": [Interval(numbers.Real, 0, 1, closed="neither"), StrOptions({"auto"})],
        "feature_bounds": ["array-like", None],
        "with_mean": ["boolean"],
        "with_std": ["boolean"],
        "random_state": ["random_state"],
        "accountant": [PrivacyAccountant, None],
        "secure_noise": ["boolean", None],
        "max_weight": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta="auto",
        feature_bounds=None,
        with_mean=True,
        with_std=True,
        random_state=None,
        accountant=None,
        secure_noise=None,
        max_weight=1.0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.feature_bounds = feature_bounds
        self.with_mean = with_mean
        self.with_std = with_std
        self.random_state = random_state
        self.accountant = accountant
        self.secure_noise = secure_noise
        self.max_weight = max_weight

    def _bounds(self, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        """The public bounds as two arrays of shape (n_features,), validated."""
        try:
            lower, upper = self.feature_bounds
            lower = np.broadcast_to(np.asarray(lower, dtype=float), (n_features,))
            upper = np.broadcast_to(np.asarray(upper, dtype=float), (n_features,))
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"feature_bounds must be a pair (lower, upper) of scalars or arrays of shape "
                f"({n_features},); got {self.feature_bounds!r}."
            ) from exc
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(lower < upper)):
            raise ValueError(f"feature_bounds need finite lower < upper for every feature; got {self.feature_bounds!r}.")
        with np.errstate(over="ignore"):  # public bounds: the error below says it
            second_moment_range = ((upper - lower) / 2.0) ** 2
        if not np.all(np.isfinite(second_moment_range)):
            raise ValueError(
                f"feature_bounds are too wide: ((upper - lower) / 2)**2, the range of the second moment, "
                f"exceeds the float range; got {self.feature_bounds!r}. Rescale the features (a public "
                "per-row map costs no budget) or narrow the bounds."
            )
        return lower, upper

    def fit(self, X, y=None, sample_weight=None):
        """Estimate the private (weighted) mean and variance of every feature.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense training rows.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Non-negative weight of each row, at most ``max_weight`` (a larger one is refused with
            a ``ValueError`` before anything is charged). The statistics are then the weighted
            mean and variance, as ``StandardScaler``'s with the same weights, at the cost of one
            more release (the total weight).

        Returns
        -------
        self
        """
        self._validate_params()
        X = validate_data(self, X, dtype=np.float64, reset=True)
        n_samples, n_features = X.shape
        weights = self._relative_weights(sample_weight, X)
        delta = resolve_delta(self.delta, n_samples)  # refused before anything is charged if it voids the guarantee
        # Public planning: which statistics, their sensitivities, the noise, the event.
        n_statistics = 2 if self.with_std else int(self.with_mean)
        n_releases = n_statistics + int(weights is not None and n_statistics > 0)  # the total weight
        rng = _generator(self.random_state, self.secure_noise)  # secure mode: refuses a seed before anything is charged
        secure = is_secure(rng)
        private_scales = self.feature_bounds is None and n_statistics > 0
        if private_scales:  # bounds +-SCALED_BOUND on the rows divided by their released powers of two
            lower, upper = np.full(n_features, -_bounds.SCALED_BOUND), np.full(n_features, _bounds.SCALED_BOUND)
            plan, multiplier, event, spent = _calibrated_scales(n_samples, n_features, float(self.epsilon), delta,
                                                                n_releases, secure)
        else:
            lower, upper = self._bounds(n_features) if self.feature_bounds is not None else (-np.ones(n_features), np.ones(n_features))
            multiplier, spent = _calibrated(float(self.epsilon), delta, n_releases, secure)
            event = _scaler_event(multiplier, n_releases, secure)
        sensitivities = scaler_sensitivities(lower, upper, n_samples)[:n_statistics]
        charge_fit(self, event, epsilon=spent, delta=delta)
        # The rows are read from here on: without feature_bounds, each feature divided by its
        # released power of two (exactly, and without overflow); then clipped, centred and divided
        # by the half-range, each entry in [-1, 1], so that no sum overflows, whatever the rows (an
        # overflow on one dataset and not on its neighbour would be a release no mechanism accounts for)
        self.feature_scales_ = None
        if private_scales:
            scales_rng, rng = rng.spawn(2)
            self.feature_scales_ = _release_scales(X, plan, scales_rng)
            X = DENSE.divide_by_powers_of_two(X, self.feature_scales_)
        midpoint, half_range = (upper + lower) / 2.0, (upper - lower) / 2.0
        units = (np.clip(X, lower, upper) - midpoint) / half_range
        noise_std = tuple(multiplier * s for s in sensitivities)
        total = 1.0  # the relative weight of the rows over n: 1 without weights
        if weights is not None and n_statistics:
            noise_std += (multiplier / n_samples,)  # sensitivity 1 / n: one relative weight in [0, 1] changes
            total = noisy_release(np.array([weights.mean()]), noise_std[-1], rng, sensitivity=1.0 / n_samples)[0]
            total = max(total, noise_std[-1])  # public floor: never zero or negative
        self.mean_ = self.var_ = self.scale_ = None
        if n_statistics:
            mean = half_range * _weighted_mean(units, weights)
            shift = noisy_release(mean, noise_std[0], rng, sensitivity=sensitivities[0]) / total
            shift = np.clip(shift, -half_range, half_range)
            self.mean_ = midpoint + shift
        if self.with_std:
            second_moment = half_range**2 * _weighted_mean(units**2, weights)
            second = noisy_release(second_moment, noise_std[1], rng, sensitivity=sensitivities[1]) / total
            floor = np.minimum(noise_std[1] / total, half_range**2)
            self.var_ = np.clip(second - shift**2, floor, half_range**2)
        if private_scales:  # back to the units of X
            self.mean_ = self.mean_ * self.feature_scales_
            self.var_ = None if self.var_ is None else self.var_ * self.feature_scales_**2
        if self.with_std:
            self.scale_ = np.sqrt(self.var_)
        self.n_samples_seen_ = n_samples
        self.noise_std_ = noise_std
        self.dp_event_ = event
        self.epsilon_ = spent
        self.delta_ = delta
        return self

    def _relative_weights(self, sample_weight, X: np.ndarray) -> np.ndarray | None:
        """``sample_weight / max_weight`` (:func:`~skdpsco.linear_model._base.relative_weights`),
        each in ``[0, 1]``, checked before anything is charged; ``None`` without weights. All-zero
        weights are not refused: such a dataset is inside the public domain, and refusing it
        would tell it from a neighbour with one non-zero weight."""
        if sample_weight is None:
            return None
        weights = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True,
                                       allow_all_zero_weights=True)
        if not np.all(weights <= float(self.max_weight)):
            raise ValueError(
                f"Some row's sample_weight exceeds max_weight={float(self.max_weight):g}, the public bound "
                "on every weight that the privacy calibration relies on: pass one that bounds every "
                "weight the rows could carry, chosen without looking at them (this message says "
                "neither which row nor by how much)."
            )
        return relative_weights(weights, float(self.max_weight))

    def transform(self, X):
        """Standardise ``X`` with the private statistics (no clipping).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Not modified.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False, copy=True)
        if self.with_mean:
            X -= self.mean_
        if self.with_std:
            X /= self.scale_
        return X

    def inverse_transform(self, X):
        """Undo :meth:`transform`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Not modified.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False, copy=True)
        if self.with_std:
            X *= self.scale_
        if self.with_mean:
            X += self.mean_
        return X

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


# -- steps whose fit reads only public parameters ---------------------------------------------
class RowwiseTransformer(FunctionTransformer):
    """A :class:`~sklearn.preprocessing.FunctionTransformer` declared to map each row on its own.

    Same parameters and behaviour as ``FunctionTransformer``; the class is the declaration. By
    using it the **user vouches** that ``func`` (and ``inverse_func``) computes each output row
    from that input row and public constants only (``np.log1p``, a division by public ranges, a
    clip to public bounds), never from other rows (``X - X.mean(0)``, a rank, a quantile).
    Nothing checks the function: a function that reads across rows breaks the per-row
    sensitivities every private model after it relies on, and its guarantee with them.

    Why a declaration: a plain ``FunctionTransformer`` learns nothing in ``fit``, yet its
    function may read all the rows at once, and no inspection of a Python callable can tell.
    :class:`~skdpsco.DPSearchCV` refuses a plain ``FunctionTransformer`` in front of its
    estimator and accepts this class (with ``check_inverse=False`` when ``inverse_func`` is
    given: the check applies both functions to a sample of the rows and warns when they differ).

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco.preprocessing import RowwiseTransformer
    >>> RowwiseTransformer(np.log1p).fit_transform(np.array([[0.0, np.e - 1.0]]))
    array([[0., 1.]])
    """


def public_encoder(categories: dict, *, remainder="passthrough") -> ColumnTransformer:
    """One-hot encoder of categorical columns from their public category lists.

    Its fit reads no row value (the categories are given, unknown values are encoded as all
    zeros without an error or a warning, the output is always dense), so
    :class:`~skdpsco.DPSearchCV` accepts it in front of its estimator (:func:`row_dependence`).
    The category lists must be public: the valid values of each field, from a schema or a
    codebook, never ``np.unique`` of the training column (that releases every value present).

    Parameters
    ----------
    categories : dict
        Column (a DataFrame column name, or an integer index for an array) mapped to the list
        of its public categories (numeric categories sorted, as ``OneHotEncoder`` requires).
    remainder : {'passthrough', 'drop'} or transformer, default='passthrough'
        What happens to the other columns (``ColumnTransformer``'s ``remainder``); a
        transformer must satisfy :func:`row_dependence` as well.

    Returns
    -------
    sklearn.compose.ColumnTransformer
        One ``OneHotEncoder(categories=[...], handle_unknown='ignore', sparse_output=False)``
        over the listed columns, ``sparse_threshold=0``; its output puts the indicator columns
        first, in the order of ``categories``, then the remainder.

    Raises
    ------
    ValueError
        If ``categories`` is empty or a column's list is empty.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco.preprocessing import public_encoder
    >>> encoder = public_encoder({0: ["red", "green", "blue"]})
    >>> X = np.array([["green", 1.5], ["mauve", -2.0]], dtype=object)
    >>> encoder.fit_transform(X)
    array([[0.0, 1.0, 0.0, 1.5],
           [0.0, 0.0, 0.0, -2.0]], dtype=object)
    """
    columns = list(categories)
    if not columns:
        raise ValueError("categories must map at least one column to its list of public categories; got {}.")
    empty = [column for column in columns if len(categories[column]) == 0]
    if empty:
        raise ValueError(f"categories[{empty[0]!r}] is empty; list the public categories of every column.")
    encoder = OneHotEncoder(
        categories=[list(categories[column]) for column in columns], handle_unknown="ignore", sparse_output=False
    )
    return ColumnTransformer([("onehotencoder", encoder, columns)], remainder=remainder, sparse_threshold=0)


def row_dependence(step, name: str = "step") -> str | None:
    """Why ``step`` may learn from the rows it is fitted on, and the fix; ``None`` if it cannot.

    The rule :class:`~skdpsco.DPSearchCV` applies to the steps before its private estimator:
    every trial refits them on the training rows, outside the search's accounted event, so
    they must read nothing of the row values, only public parameters and the schema (column
    names, dtypes, ``n_features``). Accepted, by exact type (a subclass may override ``fit``):

    * ``None``, ``'passthrough'``, ``'drop'``;
    * :class:`~sklearn.preprocessing.Normalizer`, :class:`RowwiseTransformer`;
    * :class:`~sklearn.preprocessing.OneHotEncoder` / :class:`~sklearn.preprocessing.OrdinalEncoder`
      with explicit ``categories``, no ``min_frequency`` / ``max_categories`` (counts of the
      rows), unknown categories encoded without an error (``handle_unknown='ignore'`` or
      ``'infrequent_if_exist'``; the ordinal encoder's ``'use_encoded_value'``) and, for the
      one-hot encoder, ``drop=None``: with any ``drop``, ``transform`` warns naming the
      columns in which a row holds an unknown category;
    * :class:`~sklearn.compose.ColumnTransformer` with ``sparse_threshold=0`` (otherwise the
      density of the transformed rows picks a sparse or a dense output), columns listed or
      chosen by :func:`~sklearn.compose.make_column_selector` (names and dtypes only), and
      accepted transformers and ``remainder``;
    * :class:`~sklearn.pipeline.Pipeline` of accepted steps.

    Parameters
    ----------
    step : estimator, str or None
        A pipeline step.
    name : str, default='step'
        Its name, the start of the path of a nested step in the message (``outer__inner``, as
        in ``set_params``).

    Returns
    -------
    str or None
        ``"'path' (Type): reason. Fix."`` for the first refused step, depth first; ``None``
        when every step is accepted.
    """
    if step is None or (isinstance(step, str) and step in ("passthrough", "drop")):
        return None
    return _STEP_RULES.get(type(step), _unknown_step)(step, name)


def _refused(name: str, step, reason: str) -> str:
    return f"{name!r} ({type(step).__name__}): {reason}"


def _first(messages) -> str | None:
    return next((message for message in messages if message is not None), None)


def _leaf(reason):
    """The rule of a step without sub-steps, from ``reason(step) -> str | None``."""
    return lambda step, name: None if (why := reason(step)) is None else _refused(name, step, why)


def _encoder_reason(encoder) -> str | None:
    """The one-hot or ordinal encoder's options that read the rows, or ``None``."""
    if isinstance(encoder.categories, str):
        return (
            "categories='auto' reads the category lists from the rows (a rare category names a row). "
            "Pass categories=[...] (the public category lists), e.g. with "
            "skdpsco.preprocessing.public_encoder({column: [category, ...], ...})."
        )
    if encoder.min_frequency is not None or encoder.max_categories is not None:
        return (
            f"min_frequency={encoder.min_frequency!r} and max_categories={encoder.max_categories!r} group "
            "the categories by their counts in the rows. Pass min_frequency=None and max_categories=None."
        )
    one_hot = isinstance(encoder, OneHotEncoder)
    if encoder.handle_unknown not in (("ignore", "infrequent_if_exist") if one_hot else ("use_encoded_value",)):
        fix = "handle_unknown='ignore'" if one_hot else "handle_unknown='use_encoded_value', unknown_value=-1"
        return (
            f"handle_unknown={encoder.handle_unknown!r} raises or warns when a row holds a category "
            f"outside the lists: whether it does depends on one row. Pass {fix}."
        )
    if one_hot and encoder.drop is not None:
        return (
            f"drop={encoder.drop!r} makes transform warn, naming the column, when a row holds a category "
            "outside the lists: a message read from the rows. Pass drop=None (a regularised model "
            "needs no dropped column)."
        )
    return None


def _rowwise_reason(transformer) -> str | None:
    if transformer.check_inverse and transformer.func is not None and transformer.inverse_func is not None:
        return (
            "check_inverse=True applies func and inverse_func to a sample of the rows and warns when "
            "they differ: a message read from the rows. Pass check_inverse=False."
        )
    return None


def _pipeline_rule(pipeline, name: str) -> str | None:
    return _first(row_dependence(step, f"{name}__{child}") for child, step in pipeline.steps)


def _column_transformer_rule(transformer, name: str) -> str | None:
    if transformer.sparse_threshold != 0:
        return _refused(name, transformer, (
            f"sparse_threshold={transformer.sparse_threshold!r} chooses a sparse or a dense output by "
            "the density of the transformed rows, and the model fitted on them differs between the "
            "two. Pass sparse_threshold=0."
        ))
    for child, step, columns in transformer.transformers:
        if callable(columns) and type(columns) is not make_column_selector:
            return _refused(f"{name}__{child}", step, (
                f"its columns are chosen by {columns!r}, a callable that may read the row values. "
                "List the columns (names or indices), or select them with "
                "make_column_selector(pattern=..., dtype_include=...), which reads names and dtypes only."
            ))
    children = [(child, step) for child, step, _ in transformer.transformers]
    return _first(
        row_dependence(step, f"{name}__{child}") for child, step in children + [("remainder", transformer.remainder)]
    )


def _unknown_step(step, name: str) -> str:
    """The message of a step outside the table: a function that may read across rows, a step
    fitted on the rows, or a step whose transform is not known to be row-wise."""
    if isinstance(step, FunctionTransformer):
        reason = (
            "its function may compute across the rows (e.g. X - X.mean(0)), which breaks every "
            "per-row sensitivity of the model after it, and nothing can check a function. If func "
            "maps each row on its own, with public constants only, declare it: "
            "skdpsco.preprocessing.RowwiseTransformer(func) (FunctionTransformer's parameters)."
        )
    elif not isinstance(step, BaseEstimator) or get_tags(step).requires_fit:
        reason = (
            "it is fitted on the rows, so every trial would refit it outside the search's accounted "
            "event. Fit it once before the search, as its own release (e.g. DPStandardScaler("
            "epsilon=..., delta=..., accountant=ledger).fit_transform(X)), and "
            "search on the transformed rows; or let the estimator scale the features."
        )
    else:
        reason = (
            "it is not known to map each row on its own. If it does, with public constants only, "
            "declare it: skdpsco.preprocessing.RowwiseTransformer(step.transform); otherwise apply "
            "it before the search."
        )
    return _refused(name, step, reason)


_STEP_RULES = {
    Pipeline: _pipeline_rule,
    ColumnTransformer: _column_transformer_rule,
    OneHotEncoder: _leaf(_encoder_reason),
    OrdinalEncoder: _leaf(_encoder_reason),
    RowwiseTransformer: _leaf(_rowwise_reason),
    Normalizer: _leaf(lambda step: None),
}
"""Accepted step types (exact) and their rules: ``rule(step, name) -> message or None``."""
