"""Differentially private Poisson regression (log link)."""

from __future__ import annotations

import math

import numpy as np
from sklearn.metrics import d2_tweedie_score

from ..defaults import poisson_window
from ..losses import PoissonLoss
from ..rows import layout_of
from ._regression import BaseDPRegressor


class DPPoissonRegressor(BaseDPRegressor):
    """Poisson regression with the log link under (epsilon, delta)-differential privacy.

    The private counterpart of :class:`sklearn.linear_model.PoissonRegressor`: the model
    ``E[y | x] = exp(<w, x> + b)`` for counts (or other non-negative targets), fitted by
    minimising ``exp(z + o) - y (z + o)`` (:class:`skdpsco.losses.PoissonLoss`). That loss is
    Lipschitz and smooth only on a bounded domain: on the public ball ``||w|| <= R`` with rows of
    norm ``<= B``, ``L = B max(exp(o + R B), B_y - exp(o - R B))`` and
    ``beta = B**2 exp(o + R B)``. Every solver projects onto that ball, so the radius is public.
    Centred (``o = 0``) the constants grow as ``exp(R B)``: with the default radius of the linear
    regressors (predictions up to twice the target bound) ``L`` reached ``17 B`` on standardised
    rows, and the fits were worse than the constant mean on randhie. So the ball is a window of
    log-means ``[log B_y - W, log B_y]`` (:func:`skdpsco.defaults.poisson_window`): the public
    offset ``o`` puts its top at the log of the target bound, above every mean worth fitting
    (targets are clipped to ``B_y``, so no fitted mean exceeds it), and there ``L = B B_y`` and
    ``beta = B**2 B_y`` whatever the window's width ``W``.

    Targets must be non-negative (as for scikit-learn's ``PoissonRegressor``) and are clipped to
    ``[0, y_bound]``. With ``y_bound='private'`` they are divided by a released power of two
    ``s`` above most of them (:class:`~skdpsco.DPLpRegression`); the model fitted to ``y / s``
    has the same coefficients and its intercept shifted by ``-log(s)``, which ``fit`` adds back
    (``exp(z + log s) = s exp(z)``).

    Differences from scikit-learn's ``PoissonRegressor``: ``alpha`` multiplies ``||w||**2 / 2``
    on the mean loss (scikit-learn's default is ``alpha=1``; here 0); there is no ``solver``,
    ``max_iter`` or ``tol``.

    Parameters
    ----------
    epsilon, delta, data_norm, alpha, fit_intercept, algorithm, constraint, constraint_p, \
step_scale, solver_options, random_state, accountant, verbose, feature_scaling, max_weight, secure_noise, \
max_partial_fit_calls
        As in :class:`~skdpsco.DPLogisticRegression`.
    radius : float or None, default=None
        Public radius of the parameter ball, on the rows the solver reads (norm bound ``B``,
        intercept column included); the window of log-means is ``[log B_y - 2 R B, log B_y]``.
        ``None``: :func:`skdpsco.defaults.poisson_window`, ``R = W / (2 B)`` with
        ``W`` = :data:`skdpsco.defaults.POISSON_LOG_RANGE`.
    y_bound : float or 'private', default='private'
        Bound on the targets, as in :class:`~skdpsco.DPLpRegression` (targets are in
        ``[0, y_bound]``).

    Attributes
    ----------
    intercept_ : float
        ``log E[y | x] = X @ coef_ + intercept_`` (on the clipped rows). It includes the public
        offset and ``log`` of the released target scale, also with ``fit_intercept=False``
        (where it is that fixed offset and nothing is fitted).
    loss_ : PoissonLoss
    coef_, n_features_in_, feature_names_in_, epsilon_, delta_, dp_event_, \
algorithm_, n_gradients_, n_iter_, solver_info_, radius_, y_bound_, data_norm_, feature_scales_, \
row_norm_, standardisation_
        As in :class:`~skdpsco.DPLpRegression`.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco import DPPoissonRegressor, PrivacyAccountant
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 2))
    >>> y = rng.poisson(np.exp(1.0 + X @ [0.3, -0.2]))
    >>> reg = DPPoissonRegressor(random_state=0, accountant=PrivacyAccountant()).fit(X, y)
    >>> bool(np.all(reg.predict(X) > 0))
    True
    """

    @property
    def _window(self) -> tuple[float, float]:
        """``(offset, radius)``: the log-mean window of :func:`skdpsco.defaults.poisson_window`,
        its top at the log of the target bound; a public ``radius`` keeps that top."""
        offset, radius = poisson_window(self._row_norm_bound, self._target_bound)
        if self.radius is None:
            return offset, radius
        return math.log(self._target_bound) - float(self.radius) * self._row_norm_bound, float(self.radius)

    def _make_loss(self):
        return PoissonLoss(offset=self._window[0])

    @property
    def _domain_radius(self) -> float:
        return self._window[1]

    def _encode_targets(self, y):
        """Float targets in ``[0, y_bound]``; a negative target is refused (outside the loss's
        domain, as in scikit-learn; like NaN, it is no dataset of the public domain)."""
        y = super()._encode_targets(y)
        negative = layout_of(y).any(y < 0)
        if negative:
            raise ValueError("DPPoissonRegressor needs non-negative targets y (counts).")
        return y

    def _fold_scaling(self, feature_scales, standardisation, target_scale, target_centre=0.0):
        """Fold the feature scaling as the linear models do; the offset ``o`` and the target
        scale ``s`` enter the log link as ``o + log(s)`` on the intercept, not as a factor."""
        super()._fold_scaling(feature_scales, standardisation, 1.0)
        self.intercept_ = float(self.intercept_ + self._window[0] + math.log(target_scale))

    def predict(self, X):
        """Predicted means ``exp(clip(X) @ coef_ + intercept_)``, each row mapped as in ``fit``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return np.exp(self._margins(X))

    def score(self, X, y, sample_weight=None):
        """``D**2``, the fraction of Poisson deviance explained (scikit-learn's
        ``PoissonRegressor.score``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        float
        """
        return d2_tweedie_score(y, self.predict(X), sample_weight=sample_weight, power=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags
