"""Private principal component analysis: the Gaussian second-moment matrix ("Analyze Gauss").

:class:`sklearn.decomposition.PCA` fitted on the training rows publishes their covariance's
eigenvectors and eigenvalues, and its ``mean_``: every model trained on its output inherits that
release. :class:`DPPCA` releases a noisy second-moment matrix of rows scaled and clipped by the
estimators' private feature scaling (:mod:`skdpsco.linear_model._scaling`), inside one event,
and computes the same attributes from it; everything after the release is post-processing.

The mechanism (Dwork, Talwar, Thakurta & Zhang 2014, "Analyze Gauss", Algorithm 1 and Thm 4):
release ``Z^T Z + E`` for the rows ``z_i`` of norm at most 1, ``E`` a symmetric matrix whose
upper triangle (diagonal included) holds i.i.d. ``N(0, sigma**2)`` entries, mirrored below.
:func:`second_moment_sensitivity` gives the replace-one sensitivity of the upper triangle.
"""

from __future__ import annotations

import math
import numbers

import dp_accounting
import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._delta import resolve_delta
from ._secure import is_secure, noisy_release, secure_event
from .accounting import PrivacyAccountant, calibrate_noise, epsilon_of, gaussian_event, gaussian_noise_multiplier
from .accounting._ledger import CarriesDefaultLedger, charge_fit
from .linear_model import _bounds, _scaling
from .linear_model._base import _generator
from .rows import DENSE

__all__ = ["DPPCA", "second_moment_sensitivity", "symmetric_from_upper", "upper_triangle"]


def second_moment_sensitivity(row_norm: float) -> float:
    """Replace-one ``l2``-sensitivity of the upper triangle (diagonal included) of ``Z^T Z`` for
    rows of norm at most ``C = row_norm``: ``sqrt(2) C**2``.

    Replacing ``x`` by ``y`` moves ``Z^T Z`` by ``M = x x^T - y y^T``, and
    ``||M||_F**2 = ||x||**4 + ||y||**4 - 2 (x . y)**2 <= 2 C**4``. The upper triangle holds each
    off-diagonal entry once: its squared norm is ``(||M||_F**2 + sum_j M_jj**2) / 2 <= ||M||_F**2``
    (``sum_j M_jj**2 <= ||M||_F**2``), so at most ``2 C**4``. Attained by two orthogonal rows of
    norm ``C`` on coordinate axes (``x = C e_1``, ``y = C e_2``: ``M = C**2 (e_1 e_1^T - e_2 e_2^T)``,
    upper triangle ``(C**2, -C**2)``). Under add/remove neighbours the sensitivity is ``C**2``
    (``||x x^T||_F = ||x||**2``; Dwork et al. 2014, Thm 4); the triangle inequality would give
    ``2 C**2`` for replace-one, which the orthogonality term improves to ``sqrt(2) C**2``.
    """
    return math.sqrt(2.0) * float(row_norm) ** 2


def upper_triangle(matrix: np.ndarray) -> np.ndarray:
    """The entries ``i <= j`` of a square ``matrix``, row by row (the released coordinates)."""
    return matrix[np.triu_indices(matrix.shape[0])]


def symmetric_from_upper(values: np.ndarray, size: int) -> np.ndarray:
    """The symmetric ``size x size`` matrix whose upper triangle is ``values`` (:func:`upper_triangle`)."""
    matrix = np.zeros((size, size))
    matrix[np.triu_indices(size)] = values
    return matrix + np.triu(matrix, 1).T


def _gauss_event(multiplier: float) -> dp_accounting.GaussianDpEvent:
    """The second-moment release with noise ``multiplier`` times its sensitivity (the event
    depends on the ratio only)."""
    return gaussian_event(multiplier, 1.0)


class DPPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, CarriesDefaultLedger, BaseEstimator):
    """Principal component analysis with an (epsilon, delta)-differentially private covariance.

    One fit is one event (replace-one neighbours, ``n`` public), recorded with the accountant
    before the rows are read:

    1. **scaling** (``feature_scaling='standard'``, the default): the estimators' private
       scaling. Without ``data_norm``, one power of two ``s`` above most row norms
       (:func:`skdpsco.linear_model._bounds.release_bound`, the estimators'
       ``data_norm='private'``; the rows become ``x / s`` clipped to
       :data:`~skdpsco.linear_model._bounds.SCALED_BOUND`); with it, the rows clipped to
       ``data_norm``. Then noisy per-feature means (``centering='private'``) and spreads
       ``v`` (:func:`skdpsco.linear_model._scaling.release_moments`), and every row becomes
       ``z = clip_C((x / s - m) / v) / C``, ``C = sqrt(d)``, of norm at most 1. One ``s`` for
       all features, not the per-feature orders of magnitude of the estimators' default: the
       covariance is mapped back to the units of ``X`` (step 3), and a mostly-zero feature
       given a large order from the noise of its histogram would multiply the matrix noise by
       that order squared (on digits the captured variance fell to 0.12 at epsilon 1 with the
       magnitudes, 0.84 with the row bound). With ``feature_scaling=None`` the rows are clipped
       to the public ``data_norm`` ``B``, centred on a noisy mean of the clipped rows (sums of
       ``x / B``, replace-one sensitivity 2) and clipped to ``B`` again, then divided by ``B``;
    2. **Analyze Gauss** (Dwork, Talwar, Thakurta & Zhang 2014, Algorithm 1): ``Z^T Z`` plus a
       symmetric Gaussian matrix, noise calibrated to :func:`second_moment_sensitivity` ``sqrt(2)``;
    3. post-processing: the released matrix, mapped back to the units of ``X``
       (``D (Z^T Z + E) D / (n - 1)``, ``D`` the per-feature factors of step 1), is the private
       covariance; its eigendecomposition gives ``components_`` and ``explained_variance_``, as
       :class:`sklearn.decomposition.PCA` computes them from the sample covariance.

    The budget is split by the estimators' public rule: the moments get
    :data:`~skdpsco.linear_model._scaling.SCALING_SHARE` and the row bound
    :func:`~skdpsco.linear_model._bounds.row_bound_share` of ``mu**2``, ``mu`` of the one
    Gaussian release meeting (epsilon, delta) (``mu``-GDP, Dong, Roth & Su 2022, Cor. 3.3:
    Gaussian releases compose as the root sum of squares of their ``mu``), the second-moment
    matrix the rest; the composed event is then checked with
    ``dp-accounting`` and the matrix noise raised by bisection if the conversion asks for it.
    With ``feature_scaling=None`` the mean release takes the scaling's share (none without
    centring).

    Parameters
    ----------
    n_components : int or None, default=None
        Number of components kept; ``None`` keeps ``n_features``.
    whiten : bool, default=False
        Divide the projections by the square root of the released explained variances (floored
        at a public fraction of the largest, ``1e-12``), as ``PCA(whiten=True)``.
    epsilon : float, default=1.0
        Privacy parameter epsilon > 0 of the fit.
    delta : float or 'auto', default='auto'
        Privacy parameter delta in (0, 1), below ``1 / n_samples``; ``'auto'``:
        :func:`skdpsco.default_delta` of ``n``. Analyze Gauss needs ``delta > 0``.
    data_norm : float or None, default=None
        Public bound on the norm of a row of ``X`` (rows are clipped to it). ``None``: the orders
        of magnitude are released (``feature_scaling='standard'`` only).
    feature_scaling : {'standard'} or None, default='standard'
        ``'standard'``: the private per-feature scaling above, so raw features of any scale need
        no bound; ``None``: one public ``data_norm`` for the rows as they are.
    centering : {'private', 'none'}, default='private'
        ``'private'``: the rows are centred on a noisy mean released in the same event
        (``mean_``); ``'none'``: the uncentred second moment (``mean_`` is zero), as
        :class:`sklearn.decomposition.TruncatedSVD` on uncentred rows.
    random_state : int, RandomState instance or None, default=None
        Source of the noise. A fixed seed is for reproducible experiments, not for releases.
    accountant : PrivacyAccountant or None, default=None
        Ledger charged with the fit; ``None`` uses the shared default.

    Attributes
    ----------
    components_ : ndarray of shape (``n_components_``, n_features)
        Unit eigenvectors of the private covariance, by decreasing eigenvalue, each signed so
        that its largest entry in absolute value is positive.
    explained_variance_ : ndarray of shape (``n_components_``,)
        Their eigenvalues, clipped at 0 (the noise can make an eigenvalue negative).
    explained_variance_ratio_ : ndarray of shape (``n_components_``,)
        ``explained_variance_`` over the sum of **all** ``n_features`` eigenvalues clipped at 0:
        the private total variance, at least the noisy trace (the clipped negative eigenvalues
        are the difference), so the ratios sum to at most 1.
    singular_values_ : ndarray of shape (``n_components_``,)
        ``sqrt((n - 1) explained_variance_)``, as ``PCA`` relates them.
    mean_ : ndarray of shape (n_features,)
        The private mean (zeros with ``centering='none'``).
    noise_variance_ : float
        Mean of the discarded eigenvalues (0 when every component is kept), as ``PCA``.
    n_components_, n_features_in_, n_samples_ : int
    epsilon_, delta_ : float
        The guarantee of the fit (``epsilon_ <= epsilon``).
    dp_event_ : dp_accounting.DpEvent
        The scaling releases and the second-moment release, composed.
    noise_std_ : float
        Standard deviation of each released upper-triangle entry of ``Z^T Z`` (rows of norm 1).

    Notes
    -----
    The clip of the scaled rows biases the covariance of rows far from the mean towards zero
    (heavy tails, a few very large rows): the directions of most variance are kept when the
    clipped rows are spread like the others, the eigenvalues shrink. The noise in the units of
    ``X`` is ``D E D``: a feature of small private spread gets little noise.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skdpsco import DPPCA, PrivacyAccountant
    >>> X, _ = load_digits(return_X_y=True)
    >>> pca = DPPCA(n_components=8, epsilon=1.0, random_state=0, accountant=PrivacyAccountant()).fit(X)
    >>> pca.transform(X).shape
    (1797, 8)
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "whiten": ["boolean"],
        "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
        "delta": [Interval(numbers.Real, 0, 1, closed="neither"), StrOptions({"auto"})],
        "data_norm": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "feature_scaling": [StrOptions({"standard"}), None],
        "centering": [StrOptions({"private", "none"})],
        "random_state": ["random_state"],
        "accountant": [PrivacyAccountant, None],
    }

    def __init__(self, n_components=None, *, whiten=False, epsilon=1.0, delta="auto", data_norm=None,
                 feature_scaling="standard", centering="private", random_state=None, accountant=None):
        self.n_components = n_components
        self.whiten = whiten
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.feature_scaling = feature_scaling
        self.centering = centering
        self.random_state = random_state
        self.accountant = accountant

    # -- public planning ----------------------------------------------------------------------
    def _checked_components(self, n_features: int) -> int:
        if self.n_components is None:
            return n_features
        if self.n_components > n_features:
            raise ValueError(
                f"n_components={self.n_components} exceeds n_features={n_features}; pass an "
                f"n_components between 1 and {n_features}, or None for all."
            )
        return int(self.n_components)

    def _plan(self, n_samples: int, n_features: int, delta: float, secure: bool) -> tuple:
        """``(plans, multiplier, event, epsilon)`` from public quantities: the plans of the
        releases before the matrix (private row bound, scaling, mean without scaling; each
        ``None`` when not made), the second-moment release's noise multiplier, the fit's event
        and its epsilon."""
        mu = 1.0 / gaussian_noise_multiplier(float(self.epsilon), delta)
        centred = self.centering == "private"
        row_bound, scaling, mean_noise, releases, share = None, None, None, [], 0.0
        if self.feature_scaling == "standard":
            bound = self.data_norm
            if bound is None:
                bound_share = _bounds.row_bound_share(n_samples, gaussian_mu=mu)
                row_bound = _bounds.plan_bound(gaussian_mu=math.sqrt(bound_share) * mu)
                releases.append(row_bound.dp_event)
                bound, share = _bounds.SCALED_BOUND, bound_share
            share += _scaling.SCALING_SHARE
            scaling = _scaling.plan_scaling(n_samples, n_features, bound,
                                            gaussian_mu=math.sqrt(_scaling.SCALING_SHARE) * mu, centred=centred)
            releases.append(scaling.dp_event)
        elif centred:
            share = _scaling.SCALING_SHARE
            sensitivity = _scaling.moment_sensitivities(n_features, False)[0]
            mean_noise = sensitivity / (math.sqrt(share) * mu)
            releases = [gaussian_event(mean_noise, sensitivity)]
        if secure:
            releases = [secure_event(release) for release in releases]

        def fit_event(multiplier: float):
            gauss = _gauss_event(multiplier)
            gauss = secure_event(gauss) if secure else gauss
            return dp_accounting.ComposedDpEvent([*releases, gauss]) if releases else gauss

        multiplier = 1.0 / (math.sqrt(1.0 - share) * mu)
        if epsilon_of(fit_event(multiplier), delta) > float(self.epsilon):
            multiplier = calibrate_noise(fit_event, float(self.epsilon), delta, initial=multiplier, rtol=1e-4)
        event = fit_event(multiplier)
        return (row_bound, scaling, mean_noise), multiplier, event, epsilon_of(event, delta)

    # -- fit ----------------------------------------------------------------------------------
    def fit(self, X, y=None):
        """Release the private covariance of ``X`` and its principal components.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self
        """
        self._validate_params()
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=2, copy=True)
        n_samples, n_features = X.shape
        n_components = self._checked_components(n_features)
        if self.feature_scaling is None and self.data_norm is None:
            raise ValueError(
                "feature_scaling=None needs data_norm, a public bound on the row norms of X. Pass "
                "data_norm=..., or feature_scaling='standard' (private per-feature scaling, no bound needed)."
            )
        delta = resolve_delta(self.delta, n_samples)  # refused before anything is charged if it voids the guarantee
        rng = _generator(self.random_state)
        secure = is_secure(rng)
        plans, multiplier, event, spent = self._plan(n_samples, n_features, delta, secure)
        charge_fit(self, event, epsilon=spent, delta=delta)
        scaling_rng, gauss_rng = rng.spawn(2)
        rows, mean, factors = self._scaled_rows(X, *plans, scaling_rng)
        sensitivity = second_moment_sensitivity(1.0)
        noise_std = multiplier * sensitivity
        released = noisy_release(upper_triangle(rows.T @ rows), noise_std, gauss_rng, sensitivity=sensitivity)
        covariance = symmetric_from_upper(released, n_features) * np.outer(factors, factors) / (n_samples - 1)
        self._store_components(covariance, n_components, n_samples)
        self.mean_ = mean
        self.n_samples_ = n_samples
        self.noise_std_ = noise_std
        self.dp_event_ = event
        self.epsilon_ = spent
        self.delta_ = delta
        return self

    def _scaled_rows(self, X: np.ndarray, row_bound, scaling, mean_noise, rng: np.random.Generator) -> tuple:
        """The rows ``z`` of norm at most 1 whose second moment is released, the private mean in
        the units of ``X`` and the per-feature factors ``D`` with ``x - mean = D z`` for a row
        no clip changes."""
        n_samples, n_features = X.shape
        if scaling is None:
            bound = float(self.data_norm)
            rows = DENSE.clip_rows(X, bound, out=X)
            mean = np.zeros(n_features)
            if mean_noise is not None:
                sensitivity = _scaling.moment_sensitivities(n_features, False)[0]
                sums = noisy_release(rows.sum(axis=0) / bound, mean_noise, rng, sensitivity=sensitivity)
                mean = sums * bound / n_samples
                rows = DENSE.clip_rows(np.subtract(rows, mean, out=rows), bound, out=rows)
            return np.divide(rows, bound, out=rows), mean, np.full(n_features, bound)  # rows is fit's copy of X
        divisor = 1.0
        if row_bound is None:
            passes = _scaling.feature_passes(DENSE.clip_rows(X, scaling.data_norm, out=X), n_features)
        else:  # the estimators' data_norm='private': one power of two above most row norms
            passes = _scaling.feature_passes(X, n_features)
            bound_rng, rng = rng.spawn(2)
            divisor = _bounds.release_bound(passes.row_norms(), row_bound, bound_rng)
            passes.divide_and_clip(np.full(n_features, divisor), _bounds.SCALED_BOUND)
        mean, scale = _scaling.release_moments(passes, scaling, rng)
        passes.standardise(mean, scale, scaling.clip_norm)
        return passes.rows[:, :n_features], mean * divisor, divisor * scale * scaling.clip_norm

    def _store_components(self, covariance: np.ndarray, n_components: int, n_samples: int) -> None:
        """PCA's attributes from the private covariance (post-processing)."""
        eigenvalues, eigenvectors = np.linalg.eigh(covariance)
        eigenvalues = np.maximum(eigenvalues[::-1], 0.0)
        eigenvectors = eigenvectors[:, ::-1].T
        largest = np.argmax(np.abs(eigenvectors), axis=1)
        eigenvectors *= np.sign(eigenvectors[np.arange(len(largest)), largest])[:, None]
        total = eigenvalues.sum()
        self.components_ = eigenvectors[:n_components]
        self.explained_variance_ = eigenvalues[:n_components]
        self.explained_variance_ratio_ = self.explained_variance_ / total if total > 0 else np.zeros(n_components)
        self.singular_values_ = np.sqrt(self.explained_variance_ * (n_samples - 1))
        rest = eigenvalues[n_components:]
        self.noise_variance_ = float(rest.mean()) if rest.size else 0.0
        self.n_components_ = n_components

    # -- transform ----------------------------------------------------------------------------
    def _whitening(self) -> np.ndarray:
        floor = WHITEN_FLOOR * max(float(self.explained_variance_[0]), np.finfo(float).tiny)
        return np.sqrt(np.maximum(self.explained_variance_, floor))

    def transform(self, X):
        """Project ``X`` on the private components: ``(X - mean_) @ components_.T`` (divided by
        the square root of ``explained_variance_`` when ``whiten``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, ``n_components_``)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        projected = (X - self.mean_) @ self.components_.T
        return projected / self._whitening() if self.whiten else projected

    def inverse_transform(self, X):
        """Map projections back to the units of ``X``: ``X @ components_ + mean_`` (the whitening
        undone first when ``whiten``).

        Parameters
        ----------
        X : array-like of shape (n_samples, ``n_components_``)

        Returns
        -------
        ndarray of shape (n_samples, n_features_in_)
        """
        check_is_fitted(self)
        X = np.asarray(X, dtype=np.float64)
        if self.whiten:
            X = X * self._whitening()
        return X @ self.components_ + self.mean_

    @property
    def _n_features_out(self):
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


WHITEN_FLOOR = 1e-12
"""With ``whiten=True`` the explained variances are floored at this fraction of the largest before
the projections are divided by their square roots: a released eigenvalue clipped at 0 would
otherwise divide by zero."""
