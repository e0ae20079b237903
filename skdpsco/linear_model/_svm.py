"""Differentially private linear support vector machines."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..losses import HingeLoss, QHingeLoss, SquaredHingeLoss
from ._base import BaseDPLinearClassifier, SmoothingMixin

_LOSSES = {"hinge": HingeLoss, "squared_hinge": SquaredHingeLoss, "q_hinge": QHingeLoss}


class DPHingeSVM(SmoothingMixin, BaseDPLinearClassifier):
    """Linear SVM whose fitted model is (epsilon, delta)-differentially private.

    Minimises a hinge-type loss over the ball of radius ``radius``. Two classes give one model;
    more classes are handled one-vs-rest, as ``LinearSVC`` does: one binary model per class,
    all trained on the same rows, so their privacy events compose. The per-class budget is the
    largest whose ``n_classes``-fold composition meets (``epsilon``, ``delta``), found by
    bisection with the accountant, and ``dp_event_`` is that composition.

    The hinge loss is not differentiable; the amplification-by-iteration and Phased-SGD
    algorithms need a Lipschitz gradient, so they optimise its Gaussian smoothing in closed form
    (Feldman, Mironov, Talwar & Thakurta 2018, Thm 33; :mod:`skdpsco.smoothing`), whose value is
    within ``smoothing_width / sqrt(2 pi)`` of the hinge loss.

    Parameters
    ----------
    epsilon, delta, data_norm, alpha, fit_intercept, algorithm, constraint, \
constraint_p, step_scale, solver_options, random_state, accountant, verbose, classes, feature_scaling, \
max_weight, class_weight, secure_noise, \
max_partial_fit_calls
        As in :class:`~skdpsco.DPLogisticRegression`. With one-vs-rest, a row's weight (its
        ``sample_weight`` times its own class's ``class_weight``) weighs its loss in every
        class's model, as in ``SGDClassifier``.
    radius : float or None, default=10.0
        As in :class:`~skdpsco.DPLogisticRegression`, but 10 by default with or without feature
        scaling: the hinge loss's schedule does not grow with the radius, and the logistic rule
        (:func:`skdpsco.defaults.classifier_radius`) measured no better for it on the same
        validation data (AUC within 0.01 either way at ``n = 1e4``, up to 0.01 lower at ``n = 1e3``).
    loss : {'hinge', 'squared_hinge', 'q_hinge'}, default='hinge'
        ``(1 - y z)_+``, its square, or ``(1 - y z)_+ ** q``.
    q : float, default=1.5
        Exponent of ``'q_hinge'``, in (1, 2] (ignored otherwise). For ``1 < q < 2`` the loss is
        Hölder-smooth but its gradient is not Lipschitz: ``'auto'`` trains it with
        ``'gradient_perturbation'`` (Wang et al.); the solvers that need a Lipschitz gradient refuse it.
    smoothing_width : float or None, default=None
        Standard deviation of the Gaussian smoothing of the hinge loss (margin units). ``None``:
        the width that balances the smoothing error against the algorithms' excess-risk rate
        (:func:`skdpsco.smoothing.default_smoothing_width`), a function of public quantities.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has string feature names.
    epsilon_, delta_ : float
        The guarantee spent by the whole fit (all classes).
    dp_event_ : dp_accounting.DpEvent
    algorithm_ : str
    loss_ : MarginLoss
        The loss actually optimised (the smoothed one where smoothing applied).
    n_gradients_ : int
        Per-example gradient evaluations, all classes together.
    n_iter_ : ndarray of shape (1,) or (n_classes,), dtype int32
        Passes over the rows of each binary model (one per class with one-vs-rest); see
        :class:`~skdpsco.DPLogisticRegression`.
    solver_info_ : dict
        Public diagnostics of the schedule of one class's model.
    feature_scales_, row_norm_, standardisation_, radius_
        As in :class:`~skdpsco.DPLogisticRegression`.

    Notes
    -----
    Inside a wrapper that fits on the labels (``CalibratedClassifierCV``, ``StackingClassifier``,
    ``StackingRegressor``) the wrapper's output is not covered by this guarantee; ``fit`` warns,
    on a best-effort basis: see :class:`~skdpsco.DPLogisticRegression`, Notes.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skdpsco import DPHingeSVM, PrivacyAccountant
    >>> X, y = make_classification(n_samples=2000, n_features=4, random_state=0)
    >>> svm = DPHingeSVM(epsilon=1.0, data_norm=5.0, classes=[0, 1], accountant=PrivacyAccountant()).fit(X, y)
    >>> svm.epsilon_ <= 1.0
    True
    """

    _parameter_constraints: dict = {
        **BaseDPLinearClassifier._parameter_constraints,
        "loss": [StrOptions(set(_LOSSES))],
        "q": [Interval(numbers.Real, 1, 2, closed="right")],
        "smoothing_width": [Interval(numbers.Real, 0, None, closed="neither"), None],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta="auto",
        data_norm=None,
        radius=10.0,
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
        loss="hinge",
        q=1.5,
        smoothing_width=None,
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
            random_state=random_state,
            accountant=accountant, verbose=verbose, classes=classes, feature_scaling=feature_scaling,
            max_weight=max_weight, class_weight=class_weight, secure_noise=secure_noise,
            max_partial_fit_calls=max_partial_fit_calls,
        )
        self.loss = loss
        self.q = q
        self.smoothing_width = smoothing_width

    def _make_loss(self):
        """The binary hinge-type loss of one (one-vs-rest) model."""
        if self.loss == "q_hinge":
            return QHingeLoss(q=float(self.q))
        return _LOSSES[self.loss]()

    def _tasks(self, targets):
        """One ``+-1`` target vector for two classes; one per class (one-vs-rest) otherwise."""
        if self.classes_.size == 2:
            return [targets]
        return [np.where(targets == k, 1.0, -1.0) for k in range(self.classes_.size)]
