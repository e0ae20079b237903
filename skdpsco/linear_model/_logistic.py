"""Differentially private logistic regression."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logsumexp
from sklearn.utils.extmath import softmax
from sklearn.utils.validation import check_is_fitted

from ..losses import LogisticLoss, MultinomialLogisticLoss
from ._base import BaseDPLinearClassifier


class DPLogisticRegression(BaseDPLinearClassifier):
    """Logistic regression whose fitted model is (epsilon, delta)-differentially private.

    Binary problems minimise the logistic loss, multiclass problems the multinomial logistic
    loss (one parameter matrix, one private release, one privacy event). The guarantee is with
    respect to replacing one training row (features and label), for a public number of rows.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter epsilon > 0 of this fit.
    delta : float or 'auto', default='auto'
        Privacy parameter delta in [0, 1), below ``1 / n_samples`` (``fit`` refuses a larger
        one: it voids the guarantee). ``'auto'``: :func:`skdpsco.default_delta` of the number
        of rows, ``min(1e-5, 1 / (10 n_samples))``, reported in ``delta_``. ``delta=0`` asks for pure epsilon-DP,
        which only ``algorithm='localization'`` and ``'epoch_growth'`` provide (Laplace noise);
        every other algorithm, ``'auto'`` included, refuses it.
    data_norm : float, 'private' or None, default=None
        Public bound on the Euclidean norm of a feature row. Rows with a larger norm are scaled
        down to it inside ``fit`` (a per-row map: no privacy cost), and ``predict`` and
        ``decision_function`` scale their rows the same way. It must not be computed from the
        training data. With ``Normalizer()`` in front, ``data_norm=1`` clips nothing.
        ``'private'``: bought inside ``fit`` with a public share of the budget
        (``skdpsco.linear_model._bounds``): one noisy histogram of the rows' binary orders of
        magnitude gives a power of two ``s`` above most row norms, and the rows are divided by
        ``s`` and clipped to ``sqrt(2)`` (``data_norm_`` holds ``sqrt(2) s``), then standardised
        when ``feature_scaling`` is on. One histogram in place of the ``d`` of the per-feature
        orders of magnitude: cheaper, but one feature much larger than the others then
        dominates the bound (``benchmarks/results/private_bounds.md``). ``None``: with
        ``feature_scaling`` the private per-feature orders of magnitude (``row_norm_`` holds the
        bound used), or one private row bound as with ``'private'`` on sparse rows (see
        ``feature_scaling``) and on rows too few for the magnitudes at the budget (``n`` at or
        below the count a window of their histogram must exceed to be significant, a public
        function of ``n``, ``d`` and the budget: the orders would be read from noise,
        ``benchmarks/results/low_signal.md``); without it, the fixed norm 1, with a :class:`~skdpsco.PrivacyWarning`
        saying so (its text depends on the parameters only). TF-IDF rows
        (``TfidfVectorizer``'s default ``norm='l2'``) have the public bound ``data_norm=1``.
    radius : float or None, default=None
        Public radius of the parameter domain of the rows the solver reads (norm at most 1 with
        ``feature_scaling``, ``data_norm`` without): their ``(coef, intercept / c)``, ``c`` that
        norm bound, has Euclidean (Frobenius for multiclass) norm at most ``radius``. ``None``:
        :func:`skdpsco.defaults.classifier_radius`, ``5 sqrt(n_features)`` with feature scaling (a
        coefficient vector of norm up to 5 on the standardised features) and 10 without
        (``radius_`` holds the value used). A larger radius allows sharper models but takes more
        steps.
    alpha : float, default=0.0
        Strength of an L2 penalty ``alpha ||w||**2 / 2`` added to the loss (on the augmented
        parameter, intercept included). It makes the objective strongly convex; the penalty's
        gradient enters the Lipschitz and smoothness constants (``L + alpha R``, ``beta + alpha``).
    fit_intercept : bool, default=True
        Whether to fit an intercept (see ``data_norm``).
    algorithm : str, default='auto'
        Training algorithm, a key of :data:`skdpsco.solvers.ALGORITHMS` (the README's table
        gives each one's paper, theorem and guarantee), e.g. ``'noisy_gd'``, ``'phased_sgd'``,
        ``'snowball'``, ``'objective_perturbation'`` (binary only), ``'strongly_convex'`` (needs
        ``alpha > 0``), ``'ftrl'``, ``'localization'``, ``'epoch_growth'``. ``'auto'`` applies
        :func:`skdpsco.solvers.select_algorithm` to public quantities; the chosen name is
        stored in ``algorithm_``.
    constraint : {'l2', 'l1', 'lp'}, default='l2'
        Geometry of the parameter domain, a ball of radius ``radius`` in that norm. ``'l1'`` and
        ``'lp'`` are implemented by ``algorithm='ftrl'`` (the ``'auto'`` choice for them).
    constraint_p : float or None, default=None
        The exponent ``p`` in (1, 2] of ``constraint='lp'`` (and optionally of the ``l_p``
        potential used for ``'l1'``); ``None`` otherwise.
    step_scale : float or None, default=None
        Multiplier of the default step of the algorithms that have one (``'phased_sgd'``,
        ``'phased_erm'``, ``'output_perturbation'``, ``'gradient_perturbation'``,
        ``'localization'``, ``'epoch_growth'``). The noise scales with the step, so it costs no
        privacy; tuning it on the training rows does (:class:`~skdpsco.DPSearchCV`). ``None``:
        the algorithm's default.
    solver_options : dict or None, default=None
        Further public options of the chosen algorithm's solver, by field name (as
        ``QuantileRegressor(solver_options=...)``), e.g. ``{'kappa_lower': 3}`` for
        ``'epoch_growth'``, ``{'noise': 'laplace'}`` for the growth solvers, ``{'n_steps': 500}``
        for ``'noisy_gd'``, ``{'regularization': 0.01}`` for ``'objective_perturbation'``. Each
        solver calibrates its noise to the options it is given, so any value keeps the
        guarantee; an option the solver does not have is an error listing the ones it has.
    random_state : int, RandomState instance or None, default=None
        Source of the row order and of the privacy noise. ``None`` draws fresh entropy: use it
        for releases. A fixed seed makes experiments reproducible but makes the noise
        predictable to whoever knows the seed.
    accountant : PrivacyAccountant or None, default=None
        Ledger charged with this fit's privacy event; ``None`` uses the shared default
        (:func:`skdpsco.get_accountant`). A fit that would exceed its budget raises
        :class:`~skdpsco.BudgetExceededError` before reading the data.
    verbose : int, default=0
        Print the (public) schedule of the fit.
    classes : array-like or None, default=None
        The public label set. ``None`` takes ``np.unique(y)``, which reveals which labels occur
        in the training data without privacy accounting, and issues a
        :class:`~skdpsco.PrivacyWarning` naming ``classes=`` (once per fit); pass the known label
        set to avoid that. Labels of ``y`` outside ``classes`` are an error.
    feature_scaling : {'standard'} or None, default='standard'
        Learn the features' scales privately inside ``fit`` and train on standardised rows
        (``skdpsco.linear_model._scaling``): without a public ``data_norm``, a noisy histogram of
        each feature's binary order of magnitude first brings every feature to about 1; then
        noisy per-feature means of the clipped rows and noisy second moments of the rows centred
        on them (replace-one sensitivities ``2 B`` and ``sqrt(2) C**2``, whatever
        ``n_features``) standardise them, and the standardised rows are clipped to norm
        ``sqrt(d)`` and divided by it. The scaling is
        folded into ``coef_`` and ``intercept_``, so the model predicts raw rows. Its releases
        and the solver compose into the fit's one event, within ``epsilon``; they get a public
        share of the budget (``_scaling.SCALING_SHARE``, ``MAGNITUDE_SHARE``). ``None``: train on
        the clipped rows as they are (the models of earlier releases). The statistics are of the
        unweighted rows (``StandardScaler`` without ``sample_weight``): weights weigh the loss only.
        Sparse rows (CSR, or CSC and the other scipy formats, converted) are not standardised:
        centring would make them dense, and on a sparse vocabulary the per-feature statistics
        are noise for all but the most frequent columns (a feature's noise is a dense feature's,
        its signal its few non-zeros) while the clip norm ``sqrt(d)`` grows with the vocabulary;
        with ``data_norm=None`` ``fit`` releases one row bound instead, as ``'private'`` does.
        Measured on TF-IDF rows in ``benchmarks/results/scale.md``.
    max_weight : float, default=1.0
        Public bound on every row's weight (``sample_weight`` of ``fit`` times the row's
        ``class_weight``); a larger weight is an error. Row ``i``'s loss is multiplied by
        ``c_i = weight_i / max_weight`` in ``[0, 1]`` and ``alpha`` is divided by ``max_weight``:
        the minimiser of scikit-learn's weighted objective ``mean_i weight_i loss_i + alpha
        ||w||**2 / 2``, trained under the unchanged noise of the unweighted fit (the sensitivity
        of that objective scales by ``max_weight``; :class:`skdpsco.losses.WeightedLoss`). So a
        loose bound costs accuracy: weights all equal to ``max_weight`` give the unweighted model
        (with ``alpha / max_weight``) exactly, weights all 1 under ``max_weight=4`` the same
        objective with four times the noise relative to it. Unused without weights. Weighted fits
        run the algorithms of :data:`skdpsco.solvers.WEIGHTED_ALGORITHMS`, on the compiled kernel
        where unweighted ones do: the path depends on whether weights were passed, never on their
        values (which the fit's time would tell).
    class_weight : dict or None, default=None
        Public weight of each class's rows, ``{label: weight}`` (a label not in the dict gets 1),
        multiplied into ``sample_weight``; every value at most ``max_weight``. ``'balanced'`` is
        refused: its weights are computed from the label counts of ``y``, an unaccounted release.
    secure_noise : bool or None, default=None
        Secure mode for this fit: ``True`` draws all its randomness from the operating system's
        cryptographically secure generator, refuses a ``random_state`` other than ``None`` and
        releases its single noisy statistics on a grid with exact discrete noise (see
        :func:`skdpsco.set_config` and the user guide's "Secure mode"); ``False``: numpy's
        seeded generator; ``None``: the global ``skdpsco.get_config()['secure_noise']``.
    max_partial_fit_calls : int or None, default=None
        Public bound on the number of :meth:`partial_fit` calls of one stream (``fit`` ignores
        it). The stream's privacy event, tree aggregation over the calls, is planned from it and
        charged at the first call; a call beyond it is refused. ``None``: ``partial_fit`` refuses
        to start (user guide, "Streams: partial_fit").

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has string feature names.
    epsilon_, delta_ : float
        The guarantee actually spent by this fit (``epsilon_ <= epsilon``).
    dp_event_ : dp_accounting.DpEvent
        The privacy event of this fit, as recorded by the accountant.
    algorithm_ : str
        The algorithm that ran.
    n_gradients_ : int
        Per-example gradient evaluations (``n_samples`` for one-pass algorithms).
    n_iter_ : ndarray of shape (1,) or (n_models,), dtype int32
        Passes over the rows, ``ceil(gradients / n_samples)``, of each fitted model (one entry:
        binary and multinomial models are one model, as in ``LogisticRegression``): 1 for the
        one-pass algorithms, the number of full-batch steps for ``'noisy_gd'``. Planned from
        public quantities before the rows are read, never a convergence count.
    solver_info_ : dict
        Public diagnostics of the schedule (number of steps, batch sizes, noise scale).
    n_partial_fit_calls_ : int
        Calls of the current :meth:`partial_fit` stream (absent after ``fit``). After a call,
        ``epsilon_``, ``delta_`` and ``dp_event_`` are the whole stream's guarantee.
    feature_scales_ : ndarray of shape (n_features,)
        The per-feature divisors applied before the row clip: powers of two released by the
        private order-of-magnitude histogram (``feature_scaling`` without ``data_norm``), ones
        otherwise.
    row_norm_ : float
        The norm the rows ``X / feature_scales_`` are clipped to, in ``fit`` and in prediction.
    standardisation_ : tuple (mean, scale, C) or None
        The released per-feature mean and scale of those clipped rows and the norm ``C`` the
        standardised rows are clipped to, in ``fit`` and in prediction (``None`` without feature
        scaling). ``coef_`` and ``intercept_`` hold the model folded back to the units of ``X``,
        exact on the rows the second clip leaves alone. A scale is never below the public floor
        ``sqrt(sigma) C_c`` (``sigma`` the standard deviation of the noise on a second moment,
        ``C_c`` the clip of the centred rows), nor, with ``feature_scales_`` released, below
        ``1/16`` (``ScalingPlan.variance_floor``), so a coefficient is at most ``radius_ /
        (feature_scales_ * floor_scale * C)``; the coefficient of a feature
        whose variance the noise cannot resolve (a rare indicator) is noisy (user guide,
        "Feature scaling inside fit": rare columns).
    radius_ : float
        The radius of the domain actually used (``radius``, or the default rule's).
    data_norm_ : float
        The released row bound, in the units of ``X``: with ``data_norm='private'``, and with
        ``data_norm=None`` where ``fit`` releases one row bound (sparse rows, or rows too few for
        the per-feature magnitudes at the budget; see ``data_norm``).

    Notes
    -----
    Privacy model: replace-one neighbouring datasets; the bounds ``data_norm`` and ``radius``, the
    scaling rule's constants and the sizes ``n_samples`` and ``n_features`` are public; nothing else computed from the rows
    leaves ``fit`` except through the accounted mechanism. Snowball-SGD releases only its last
    iterate; its guarantee is privacy amplification by iteration (Feldman, Mironov, Talwar &
    Thakurta 2018), a zCDP bound converted to (epsilon, delta) with ``dp-accounting``.

    Wrappers that fit on the labels (``CalibratedClassifierCV``, ``StackingClassifier``,
    ``StackingRegressor``) fit their own map on the labels and this model's predictions, outside
    the accountant: their output is not covered by this guarantee. ``fit`` issues a
    :class:`~skdpsco.PrivacyWarning` when it finds one among its callers; best effort only (not
    with the wrapper's ``n_jobs`` > 1, nor around a prefit model): see the user guide, "What is
    not protected".

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import Normalizer
    >>> from skdpsco import DPLogisticRegression, PrivacyAccountant
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> with PrivacyAccountant() as ledger:
    ...     clf = DPLogisticRegression(epsilon=1.0, delta=1e-5, classes=[0, 1])
    ...     model = make_pipeline(Normalizer(), clf).fit(X, y)
    >>> round(ledger.spent()[0], 3) <= 1.0
    True
    """

    def _make_loss(self):
        """Logistic loss for two classes, multinomial logistic loss otherwise."""
        if self.classes_.size == 2:
            return LogisticLoss()
        return MultinomialLogisticLoss(n_classes=self.classes_.size)

    def _coef_shape(self, n_columns):
        return (n_columns,) if self.classes_.size == 2 else (self.classes_.size, n_columns)

    def predict_proba(self, X):
        """Class probabilities, columns in the order of ``classes_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        scores = self.decision_function(X)
        if scores.ndim == 1:
            positive = expit(scores)
            return np.column_stack([1.0 - positive, positive])
        return softmax(scores.copy())

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed stably.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([-np.logaddexp(0.0, scores), -np.logaddexp(0.0, -scores)])
        return scores - logsumexp(scores, axis=1, keepdims=True)
