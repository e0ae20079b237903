"""Private hyperparameter selection: the whole search accounted as one event.

Picking the best of many private fits on the same rows is itself a mechanism. With the shared
accountant, :class:`sklearn.model_selection.GridSearchCV` over an skdpsco estimator records
*every* fit (``clone`` keeps the accountant), so a search over ``m`` candidates and ``k`` folds
costs the composition of ``m k`` fits, each at the estimator's own (epsilon, delta) — and its
``cv_results_`` publish non-private scores of the held-out folds on top of that.

:class:`DPSearchCV` runs *private selection with a random number of trials* instead (Liu &
Talwar 2019; Papernot & Steinke 2022, "Hyperparameter tuning with Renyi differential privacy",
Thm 2): draw ``K`` from a truncated negative binomial distribution, run ``K`` independent
trials, release only the best. Each trial draws a candidate from the public grid or
distributions, fits it on the training split and scores it privately on the held-out split. If
one trial is ``rho``-zCDP, the search is described by
``dp_accounting.RepeatAndSelectDpEvent(zcdp_event(rho), mean, shape)``, whose RDP bound
(PS22 Thm 2, implemented in ``dp_accounting``'s RDP accountant) depends on the mean of ``K``,
not on ``K``: the cost grows like ``log E[K]``, not like ``E[K]``.

The default grid, and when searching cannot pay
-----------------------------------------------
Each trial is fitted at ``trial_rho``, about a third of the ``rho`` of one release of the whole
(epsilon, delta) at the default ``n_iter = 3``, on the four fifths of the rows not held out for
scoring. ``DPSearchCV(estimator)`` searches :data:`DEFAULT_PARAM_DISTRIBUTIONS` only where that
price is small, :func:`search_signal` (``n_train mu / p`` of one trial) at least
:data:`SEARCH_SIGNAL`; below it, it fits ``estimator`` once with the whole budget. On the real
classification sets of ``benchmarks/results/search.md`` (signals 0-89) every searched grid lost
to the plain default at the same total epsilon, by up to 0.26 AUC, because one trial alone did;
the candidates' differences at one trial's budget were an order of magnitude smaller.

What is released, and what must not be
--------------------------------------
Only the selected trial: its parameters, its model and its noisy score. The number of trials
``K``, the candidates of the other trials and their scores are *not* released: the theorem
covers the best output alone, and it needs ``K`` hidden (knowing ``K = k``, the best of ``k``
runs of an epsilon-DP mechanism can cost ``k`` epsilon). Consequently ``cv_results_`` has one
row, the released trial; a fixed ``random_state`` (which determines ``K``) and the running time
(proportional to ``K``) reveal ``K``, so use ``random_state=None`` and do not publish timings
for a release.
"""

from __future__ import annotations

import math
import numbers
import re
import warnings
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Callable

import dp_accounting
import numpy as np
from scipy.optimize import brentq
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.utils import _safe_indexing, get_tags
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import _assert_all_finite, _num_features, _num_samples, check_is_fitted, indexable

from . import _noise
from .accounting import (
    PrivacyAccountant,
    calibrate_noise,
    calibrate_zcdp_rho,
    epsilon_of,
    zcdp_event,
)
from ._delta import resolve_delta
from .accounting._ledger import CarriesDefaultLedger, charge_fit, fit_accountant
from ._secure import is_secure, noisy_release
from .linear_model._base import (
    PrivacyWarning,
    _generator,
    label_wrapper,
    label_wrapper_warning,
    labels_from_data_warning,
)
from .decomposition import DPPCA
from .preprocessing import row_dependence
from .rows import layout_of, refuse_non_finite

__all__ = [
    "DEFAULT_N_ITER",
    "DEFAULT_PARAM_DISTRIBUTIONS",
    "SEARCH_SIGNAL",
    "WITHOUT_ZCDP",
    "DPSearchCV",
    "RandomTrials",
    "calibrate_trial_rho",
    "noisy_mean_score",
    "search_signal",
    "select_best",
    "zcdp_rho",
]


# -- the number of trials ---------------------------------------------------------------------
@dataclass(frozen=True)
class RandomTrials:
    """Distribution of the number of trials ``K``: truncated negative binomial ``TNB(shape, gamma)``.

    PS22 Def. 1: for ``shape > 0``, ``P(K = k)`` is proportional to
    ``(1 - gamma)**k prod_{l<k} (l + shape) / (l + 1)`` on ``k >= 1`` (a negative binomial
    conditioned on ``K >= 1``); ``shape = 0`` is the logarithmic distribution
    ``P(K = k) = (1 - gamma)**k / (k ln(1 / gamma))``; ``shape = 1`` the geometric distribution
    of Liu & Talwar 2019. Smaller shapes cost less privacy for the same mean but make a short
    search (``K = 1``) more likely. ``K >= 1`` always.

    Attributes
    ----------
    mean : float
        Target ``E[K] > 1``.
    shape : float
        ``eta >= 0`` (finite).
    """

    mean: float
    shape: float

    def __post_init__(self):
        if not (math.isfinite(self.mean) and self.mean > 1):
            raise ValueError(f"The mean number of trials must be a finite number > 1; got {self.mean!r}.")
        if not (math.isfinite(self.shape) and self.shape >= 0):
            raise ValueError(f"shape must be a finite number >= 0; got {self.shape!r}.")

    @staticmethod
    def mean_of(gamma: float, shape: float) -> float:
        """``E[K]`` of ``TNB(shape, gamma)`` (PS22 §2): ``shape (1 - gamma) / (gamma (1 - gamma**shape))``,
        and ``(1 - gamma) / (gamma ln(1 / gamma))`` at ``shape = 0``."""
        if shape == 0:
            return (1.0 - gamma) / (gamma * -math.log(gamma))
        return shape * (1.0 - gamma) / (gamma * -math.expm1(shape * math.log(gamma)))

    @cached_property
    def gamma(self) -> float:
        """The ``gamma`` in ``(0, 1)`` whose ``E[K]`` is ``mean`` (``E[K]`` decreases in ``gamma``)."""
        log_gamma = brentq(
            lambda t: math.log(self.mean_of(math.exp(t), self.shape)) - math.log(self.mean),
            math.log(1e-300), -1e-12, xtol=1e-14, rtol=1e-14,
        )
        return math.exp(log_gamma)

    def sample(self, rng: np.random.Generator) -> int:
        """Draw ``K`` (public randomness, independent of the data)."""
        if self.shape == 0:
            return int(rng.logseries(1.0 - self.gamma))
        while True:  # negative binomial conditioned on K >= 1
            k = int(rng.negative_binomial(self.shape, self.gamma))
            if k >= 1:
                return k

    def dp_event(self, trial_event: dp_accounting.DpEvent) -> dp_accounting.DpEvent:
        """Event of releasing the best of ``K`` independent runs of a mechanism with ``trial_event``.

        The event's mean is the exact mean of the distribution :meth:`sample` draws from;
        ``dp_accounting`` recovers ``gamma`` from it by bisection and keeps the smaller end,
        which only enlarges the bound's ``ln(1 / gamma)`` term (PS22 Thm 2).
        """
        return dp_accounting.dp_event.RepeatAndSelectDpEvent(
            trial_event, self.mean_of(self.gamma, self.shape), float(self.shape)
        )


@lru_cache(maxsize=64)
def calibrate_trial_rho(epsilon: float, delta: float, trials: RandomTrials, rtol: float = 1e-4) -> float:
    """Largest ``rho`` such that selecting the best of ``K ~ trials`` ``rho``-zCDP trials is
    (epsilon, delta)-DP, within ``rtol``.

    :func:`~skdpsco.accounting.calibrate_noise` on ``1 / rho``, started from the ``rho`` of a
    single (epsilon, delta) release (:func:`calibrate_zcdp_rho`): the selection costs at least
    one trial, so every larger ``rho`` fails.
    """
    inverse = calibrate_noise(
        lambda inverse_rho: trials.dp_event(zcdp_event(1.0 / inverse_rho)), epsilon, delta,
        initial=2.0 / calibrate_zcdp_rho(epsilon, delta), rtol=rtol,
    )
    return 1.0 / inverse


def zcdp_rho(event: dp_accounting.DpEvent) -> float:
    """Smallest ``rho`` such that every mechanism described by ``event`` is ``rho``-zCDP.

    Exact for the events of the library convention (``accounting`` module docstring): a
    Gaussian release ``gaussian_event(sigma, Delta)`` has RDP ``alpha Delta**2 / (2 sigma**2)``,
    i.e. ``rho = 1 / (2 z**2)`` with ``z = noise_multiplier``; ``(xi, rho)``-zCDP has RDP
    ``xi + rho alpha <= (xi + rho) alpha`` for ``alpha > 1``; compositions add.

    Raises
    ------
    ValueError
        For events without a zCDP bound (sampled Gaussians, bounds at one Renyi order, failure
        probabilities): the selection theorem needs an RDP bound of every trial at every order.
    """
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return 0.0
    if isinstance(event, dp_accounting.GaussianDpEvent):
        return 1.0 / (2.0 * event.noise_multiplier**2)
    if isinstance(event, dp_accounting.ZCDpEvent):
        return float(event.rho + event.xi)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return sum(zcdp_rho(e) for e in event.events)
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return event.count * zcdp_rho(event.event)
    raise ValueError(
        f"The privacy event {event!r} has no zCDP bound, which private selection needs for every "
        "trial (Papernot & Steinke 2022, Thm 2). Choose an algorithm whose guarantee is a Gaussian "
        "release or zCDP (e.g. 'phased_sgd', 'snowball', 'pnsgd')."
    )


WITHOUT_ZCDP = {
    "objective_perturbation": (
        "objective perturbation's proven guarantee (skdpsco.solvers.objective) is an (epsilon, "
        "delta) bound, the curve delta(eps) <= 4 delta_G(eps - eps_0) of its Gaussian part shifted "
        "by the log-determinant offset eps_0 = log(1 + beta / (n Lambda)); the same argument bounds "
        "its Renyi DP by "
        "eps_0 + ln(4) / (alpha - 1) + rho alpha, which is unbounded as alpha -> 1, so no zCDP "
        "bound xi + rho alpha follows, and the search calibrates every trial to one zCDP share"
    ),
    "output_perturbation": "output perturbation's guarantee holds except with a failure probability",
    "gradient_perturbation": (
        "gradient perturbation's subsampled Gaussian steps have a Renyi-DP curve but no zCDP bound"
    ),
    "stop_pnsgd": "Stop-PNSGD is proven at one Renyi order only",
}
"""``algorithm=`` names whose fits have no zCDP bound (:func:`zcdp_rho` fails on their events),
and why: :class:`DPSearchCV` refuses them before anything is charged.

Objective perturbation's Renyi bound, from the proof in :mod:`skdpsco.solvers.objective`: its
privacy loss is at most ``eps_0 + max_k (mu_k |Z_k| + mu_k**2 / 2)`` (``k = 1, 2``, ``Z_k``
standard normal, ``mu_k <= mu_b``), plus the output noise's Gaussian loss composed adaptively.
For ``h(l) = exp((alpha - 1) l)``, non-negative and non-decreasing, ``h(max(a, c)) <= h(a) + h(c)``
and ``E h(mu |Z| + m) <= 2 E h(mu Z + m)``, so ``E h(loss) <= 4 exp((alpha - 1) (eps_0 + alpha
rho))`` with ``rho = (mu_b**2 + mu_o**2) / 2``: Renyi DP ``eps_0 + ln(4) / (alpha - 1) + rho alpha``
at every order ``alpha > 1``. No ``xi + rho' alpha`` dominates it near ``alpha = 1``, and the
search calibrates every candidate to one zCDP share (:func:`calibrate_trial_rho`), so the
algorithm cannot be a candidate; composing it would need a search whose trials share an RDP
curve instead of a ``rho``."""


# -- the default search and when it cannot pay ------------------------------------------------
DEFAULT_PARAM_DISTRIBUTIONS = {"alpha": [0.0, 1e-4, 1e-3]}
"""The grid :class:`DPSearchCV` searches when ``param_distributions=None``: the default
(``alpha = 0``) and ridge penalties small enough to stay competitive with it.

Chosen on ``benchmarks/results/search.md`` (``python -m benchmarks.search``, its last table: each
candidate at one trial's budget): ``alpha`` in ``{0, 1e-4, 1e-3}`` scored within 0.001 AUC /
accuracy of each other in every cell; ``alpha = 1e-2`` (in the user guide's former example grid)
lost up to 0.003 AUC (fair, epsilon = 3) and ``alpha = 0.1`` up to 0.06 (digits, epsilon = 3:
accuracy 0.617 against 0.675). Every candidate must be one you would accept: with noisy
held-out scores any candidate can win."""

DEFAULT_N_ITER = 3.0
"""Default mean number of trials: one per candidate of :data:`DEFAULT_PARAM_DISTRIBUTIONS` on
average. Each trial's share of the budget falls with ``n_iter`` and with the shape of ``K``'s
distribution: at epsilon = 1, delta = 1e-5, ``trial_rho`` is 0.34 of a single release's ``rho``
at ``n_iter = 3`` with the default geometric distribution (0.23 at the former default of 10) and
0.45 with the logarithmic one (``n_iter_shape = 0``). The logarithmic distribution stays an
option, not the default: it runs a single trial more often (0.45 against 1/3), and
``benchmarks/results/search.md`` (column ``logarithmic K``, 20 seeds) measured both sides: the
default grid's search lost less with it on digits_binary, digits and the synthetic set (e.g.
0.006 against 0.009 AUC at epsilon = 1 there) and more on breast_cancer at epsilon = 1 (0.075
against 0.019 AUC: a trial that failed is released when it is the only one) and wine at
epsilon = 3. With a grid holding a clearly worse candidate (``fit_intercept=False`` on
off-centre data, ``n_iter = 5``) it also released that candidate at the seed where the geometric
search did not (the selection test of ``tests/test_model_selection.py``)."""


SEARCH_SIGNAL = 200.0
"""Public threshold of the rule :class:`DPSearchCV` applies to its default grid: search only when
:func:`search_signal` (``n_train mu_trial / p``) is at least this; below it, fit the estimator
once with the whole budget on all the rows.

A trial is fitted at ``trial_rho`` (a third of the budget's ``rho`` at the default ``n_iter``) on
four fifths of the rows. ``benchmarks/results/search.md`` (20 seeds, paired by split): searching
the default grid lost to the plain default at the same total epsilon by 0.004-0.26 AUC on the
real binary sets (signals 1-89; fair at signal 89: 0.005) and 0.05-0.27 accuracy on the
multi-class ones (signals 0-1); on a synthetic set of 20000 rows it lost 0.009 AUC at signal 77,
0.004 / 0.003 at 114 / 152 (``search_threshold.md``) and 0.002 at 227. At or above this
threshold the search costs at most about 0.002 AUC, a tenth of the spread over splits."""


def search_signal(n_train: int, n_params: int, trial_rho: float) -> float:
    """``n_train mu / p`` of one trial, with ``mu = sqrt(2 trial_rho)``: the Gaussian-DP ``mu`` of
    a release that is exactly ``trial_rho``-zCDP (a Gaussian of multiplier ``z`` is
    ``1 / (2 z**2)``-zCDP and ``1 / z``-GDP), as in the ``'auto'`` rule's ``n mu / p``
    (:data:`skdpsco.solvers.AUTO_NEWTON_SIGNAL`): how far the trial's rows outweigh its privacy
    noise per parameter. Public: ``n_train``, ``n_params`` and ``trial_rho`` are."""
    return n_train * math.sqrt(2.0 * trial_rho) / n_params


# -- one trial's score and the selection ------------------------------------------------------
def noisy_mean_score(per_row: np.ndarray, value_range: float, rho: float, rng: np.random.Generator) -> tuple[float, float]:
    """``rho``-zCDP mean of per-row scores that each lie in an interval of length ``value_range``.

    Replacing one of the ``n`` rows moves the mean by at most ``value_range / n``; Gaussian
    noise of standard deviation ``sigma = (value_range / n) / sqrt(2 rho)`` makes the release
    ``gaussian_event(sigma, value_range / n)``, i.e. exactly ``rho``-zCDP (:func:`zcdp_rho`). In
    secure mode the mean is released on a grid with discrete Gaussian noise
    (:func:`skdpsco._secure.noisy_release`): ``rho``-zCDP as well (Canonne, Kamath & Steinke 2020,
    Thm 4).

    Returns
    -------
    (score, sigma) : tuple of float
    """
    sensitivity = value_range / per_row.shape[0]
    sigma = sensitivity / math.sqrt(2.0 * rho)
    return float(noisy_release(np.mean(per_row), sigma, rng, sensitivity=sensitivity, release=_score_noise)), sigma


def _score_noise(value, scale, rng, draw=None):
    """The noise of a trial's score: one :func:`~skdpsco._noise.gaussian_noise` draw
    (looked up at call time, so the audits weaken it), as before the grid release existed."""
    return _noise.gaussian_noise(rng, scale, ())


def select_best(run_trial: Callable[[int], tuple[object, float]], n_trials: int) -> tuple[object, float]:
    """Run ``run_trial(0), ..., run_trial(n_trials - 1)`` and return the ``(output, score)`` with
    the highest score (the first on ties, which have probability 0 under Gaussian score noise).

    Only this pair may be released (PS22 Thm 2); ``n_trials`` must be drawn by
    :meth:`RandomTrials.sample` and kept hidden.
    """
    best = None
    for index in range(n_trials):
        output, score = run_trial(index)
        if best is None or score > best[1]:
            best = (output, score)
    return best


# -- candidates -------------------------------------------------------------------------------
class _Planned(Exception):
    """Carries the event an estimator was about to charge."""

    def __init__(self, event):
        super().__init__(event)
        self.event = event


class _PlanningAccountant(PrivacyAccountant):
    """Stops a fit at its charge, which every skdpsco estimator makes from public quantities
    before a solver reads the rows (only validation and the per-row clipping come first), and
    reports the event instead of recording it."""

    def charge(self, event, **kwargs):
        raise _Planned(event)


def _largest_feasible(excess: Callable[[float], float], start: float, tolerance: float = 0.02) -> float:
    """Largest ``t`` with ``excess(t) <= 0``, for an increasing ``excess``: a ``t`` with
    ``-tolerance <= excess(t) <= 0``, or the feasible end of a bracket narrower than ``tolerance / 2``.

    ``excess(t) = ln(rho(e**t) / rho_trial)``, the log-ratio of a candidate's planned zCDP
    ``rho`` at ``epsilon = e**t`` to the trial's: each evaluation plans a fit, so the search
    steps like Newton's method with slope 2 (``rho`` grows like ``epsilon**2`` for a Gaussian
    release) until it brackets, then by safeguarded secant steps. Typically two evaluations.
    """
    feasible = infeasible = None
    t = start
    for _ in range(60):
        value = excess(t)
        if value <= 0:
            if value >= -tolerance:
                return t
            feasible = (t, value)
        else:
            infeasible = (t, value)
        if feasible is None or infeasible is None:
            t -= value / 2 + math.copysign(tolerance / 4, value)
            continue
        (a, excess_a), (b, excess_b) = feasible, infeasible
        if b - a <= tolerance / 2:
            return a
        secant = a - excess_a * (b - a) / (excess_b - excess_a) - tolerance / 4
        t = min(max(secant, a + (b - a) / 10), b - (b - a) / 10)
    raise ValueError("the candidate's privacy cost does not decrease with its epsilon.")


def _draw_candidate(distributions, rng: np.random.Generator) -> dict:
    """One candidate, independently of the others (the trials must be i.i.d.): a uniformly chosen
    dict of the list, then for each parameter a draw of its distribution (``rvs``) or a
    uniformly chosen element of its list."""
    grid = distributions[int(rng.integers(len(distributions)))]
    candidate = {}
    for name in sorted(grid):
        values = grid[name]
        candidate[name] = values.rvs(random_state=rng) if hasattr(values, "rvs") else values[int(rng.integers(len(values)))]
    return candidate


def _child_random_state(rng: np.random.Generator) -> np.random.RandomState:
    """An independent child of ``rng`` with full entropy, in a form every ``random_state``
    parameter accepts: a ``RandomState`` on an MT19937 seeded by a ``SeedSequence`` spawned from
    ``rng``'s (the estimator's :func:`~skdpsco.linear_model._base._generator` draws 256 bits
    from it). An int seed drawn from ``rng`` would make the trial's noise a function of 32 bits.
    """
    (child,) = rng.bit_generator.seed_seq.spawn(1)
    return np.random.RandomState(np.random.MT19937(child))


def _per_row_scores(scoring: str, clip: float, estimator, X, y) -> tuple[np.ndarray, float]:
    """Per-row scores of ``estimator`` on held-out rows and the length of their public range."""
    prediction = estimator.predict(X)
    if scoring == "accuracy":
        return (np.asarray(prediction) == np.asarray(y)).astype(float), 1.0
    with np.errstate(over="ignore"):  # a huge finite target: an error of inf, clipped below, no warning
        error = np.abs(np.asarray(prediction, dtype=float) - np.asarray(y, dtype=float))
    if scoring == "neg_mean_squared_error":  # clipped before it is squared: no square overflows
        error = np.minimum(np.minimum(error, math.sqrt(clip)) ** 2, clip)
    return -np.minimum(error, clip), float(clip)


def _last_step(estimator):
    """The private estimator: the last step of a pipeline, else ``estimator`` itself."""
    steps = getattr(estimator, "steps", None)
    return steps[-1][1] if steps else estimator


def _best_has(name: str):
    def check(search):
        estimator = getattr(search, "best_estimator_", search.estimator)
        return hasattr(estimator, name)

    return check


ACCOUNTED_STEPS = (DPPCA,)
"""Pipeline steps before the private estimator that :class:`DPSearchCV` fits in every trial, at
the trial's (epsilon, delta) like the estimator: their fit is private and charges the trial's
ledger, so the trial's event is the composition of theirs and the estimator's (its planned ``rho``
the sum, :meth:`DPSearchCV._planned_rho`). Exact types."""


class DPSearchCV(MetaEstimatorMixin, CarriesDefaultLedger, BaseEstimator):
    """Differentially private hyperparameter search: private selection with a random number of trials.

    ``K`` is drawn from :class:`RandomTrials` (``E[K] = n_iter``). Each of the ``K`` trials draws
    a candidate from ``param_distributions``, fits ``estimator`` with it on the training split,
    scores it privately on the held-out split, and the best trial is released. The whole search
    is (epsilon, delta)-DP (replace-one) and is recorded with the accountant as one event,
    ``RepeatAndSelectDpEvent(zcdp_event(rho), n_iter, n_iter_shape)`` (Papernot & Steinke
    2022, Thm 2), before any row is read.

    Parameters
    ----------
    estimator : skdpsco estimator
        With parameters ``epsilon``, ``delta``, ``random_state`` and ``accountant``, charging its
        accountant before reading the rows (every skdpsco estimator does), and a guarantee with
        a zCDP bound (Gaussian releases or zCDP: all the default algorithms; those of
        :data:`WITHOUT_ZCDP` are refused before anything is charged, whether set in the
        estimator or listed in ``param_distributions``). A
        :class:`~sklearn.pipeline.Pipeline` whose last step is such an estimator and whose other
        steps read nothing of the row values works too (:func:`~skdpsco.preprocessing.row_dependence`:
        ``Normalizer``, encoders given their public categories as
        :func:`~skdpsco.preprocessing.public_encoder` builds them, a ``ColumnTransformer`` of such
        steps, a :class:`~skdpsco.preprocessing.RowwiseTransformer`). A :class:`~skdpsco.DPPCA`
        step is fitted in every trial at the trial's (epsilon, delta), like the estimator, and its
        event composes into the trial's (:data:`ACCOUNTED_STEPS`). Any other step
        (``StandardScaler``, :class:`~skdpsco.preprocessing.DPStandardScaler`, an encoder with
        ``categories='auto'``, a plain ``FunctionTransformer``, ...) is refused with a
        ``ValueError`` naming the step, the reason and the fix, before any row is read or
        anything is charged: every trial would refit it outside the search's event. Fit private
        preprocessing once, before the search, as its own release, and search on the transformed
        rows. A classifier with ``classes=None`` (in the estimator or in a candidate) reads its
        label set from the training split, unaccounted: the search issues one
        :class:`~skdpsco.PrivacyWarning` naming the parameter, not one per trial. Pass
        ``classes=`` with the public label set. Inside a wrapper that fits on the labels
        (``CalibratedClassifierCV``, stacking) it issues one ``PrivacyWarning`` as well
        (best effort: :class:`~skdpsco.DPLogisticRegression`, Notes).
    param_distributions : dict, list of dicts or None, default=None
        Parameter names (as for ``estimator.set_params``) mapped to lists (uniform choice) or to
        distributions with ``rvs`` (``scipy.stats``). Public: never derived from the data. Every
        trial draws independently, with replacement, even from a grid of lists. ``None``: the
        default grid :data:`DEFAULT_PARAM_DISTRIBUTIONS` (of the private step of a pipeline),
        under the rule of :data:`SEARCH_SIGNAL`: where :func:`search_signal` is below it, the
        search cannot pay and ``fit`` fits the estimator once, with the whole (epsilon, delta),
        on all the rows (``searched_ = False``). A pipeline with an accounted step before the
        private one (:class:`~skdpsco.DPPCA`) is always searched: the search composes its steps'
        budgets. A grid you give is always searched; the same rule tells when it can pay (user
        guide, "Private hyper-parameter selection").
    epsilon : float, default=1.0
        Privacy parameter epsilon > 0 of the whole search.
    delta : float or 'auto', default='auto'
        Privacy parameter delta in (0, 1) of the whole search, below ``1 / n_samples`` (``fit``
        refuses a larger one). ``'auto'``: :func:`skdpsco.default_delta` of the number of rows.
    n_iter : float, default=3.0
        Mean number of trials ``E[K] > 1`` (:data:`DEFAULT_N_ITER`); the privacy cost grows like
        ``log(n_iter)``, and each trial's share of the budget falls with it.
    n_iter_shape : float, default=1.0
        Shape ``eta >= 0`` of the truncated negative binomial distribution of ``K``: 1 is
        geometric (Liu & Talwar 2019), 0 logarithmic (cheapest, but ``K = 1`` more often:
        probability 0.45 at ``n_iter = 3`` against 1/3). :data:`DEFAULT_N_ITER` compares them.
    scoring : {'accuracy', 'neg_mean_absolute_error', 'neg_mean_squared_error'} or None, default=None
        Per-row score averaged over the held-out rows. ``None``: accuracy for classifiers, negative
        mean absolute error for regressors. Regression errors are clipped to ``score_clip``.
    score_clip : float, default=1.0
        Public bound of a row's error (absolute or squared) in the regression scores; it sets
        the score's sensitivity ``score_clip / n_validation``. Ignored for accuracy (range 1).
    validation_fraction : float, default=0.2
        Fraction of the rows held out for scoring. The split is drawn from ``random_state`` (public
        randomness) and shared by all trials.
    random_state : int, RandomState instance or None, default=None
        Source of the split, of ``K``, of the candidates and of every trial's noise. Use ``None``
        for releases: a known seed reveals ``K`` and the noise. Each trial's fit gets its own
        child of this generator (``SeedSequence.spawn``), never a 32-bit seed.
    accountant : PrivacyAccountant or None, default=None
        Ledger charged once with the whole search; ``None`` uses the shared default.

    Attributes
    ----------
    best_estimator_ : estimator
        The model of the selected trial, trained on the training split only (no refit: training
        again on all rows would be a further release). Its ``random_state`` is reset to ``None``
        (the trial's seed would reveal its noise) and its ``accountant`` is the search's. Its
        ``epsilon_`` / ``dp_event_`` describe that trial's fit alone.
    best_params_ : dict
        The selected candidate.
    best_score_ : float
        Its private (noisy) held-out score.
    cv_results_ : dict
        One row, the released trial (``params``, ``mean_test_score``, ``rank_test_score``): the
        other trials, and their number, are part of the mechanism and are not released.
    epsilon_, delta_ : float
        The guarantee of the search (``epsilon_ <= epsilon``).
    dp_event_ : dp_accounting.DpEvent
        The one event recorded with the accountant.
    trial_rho_ : float
        Each trial is ``trial_rho_``-zCDP: the fit (training rows) and the score (held-out rows)
        are each ``trial_rho_``-zCDP and touch disjoint rows (parallel composition).
    score_noise_std_ : float
        Standard deviation of the Gaussian noise on every trial's score.
    search_signal_ : float
        The rule's public :func:`search_signal` of this search's trials.
    searched_ : bool
        Whether the trials ran: ``False`` when the default grid's rule fitted the estimator once
        instead; then ``best_params_`` is ``{}``, ``best_score_``, ``trial_rho_`` and
        ``score_noise_std_`` are NaN, and ``dp_event_`` / ``epsilon_`` are the one fit's.
    n_features_in_ : int

    Notes
    -----
    Calibration, from public quantities only: ``rho = calibrate_trial_rho(epsilon, delta,
    RandomTrials(n_iter, n_iter_shape))``; each candidate is fitted at the largest epsilon for
    which its own event is ``rho``-zCDP, up to 2% of ``rho`` (:func:`zcdp_rho` of the event the
    estimator plans, found by a root search before the rows are read); the score noise is
    :func:`noisy_mean_score` at ``rho``. A trial is a mixture, over public randomness (split,
    candidate, seeds), of mechanisms that are each ``rho``-zCDP, hence ``rho``-zCDP.

    The cost of :class:`sklearn.model_selection.GridSearchCV` over an skdpsco estimator, for
    comparison: every fit is recorded on the estimator's accountant (``m`` candidates times
    ``k`` folds, plus the refit), and the ledger's :meth:`~skdpsco.PrivacyAccountant.spent` is
    their composition; its scores are not private.
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"])],
        "param_distributions": [dict, list, None],
        "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
        "delta": [Interval(numbers.Real, 0, 1, closed="neither"), StrOptions({"auto"})],
        "n_iter": [Interval(numbers.Real, 1, None, closed="neither")],
        "n_iter_shape": [Interval(numbers.Real, 0, None, closed="left")],
        "scoring": [StrOptions({"accuracy", "neg_mean_absolute_error", "neg_mean_squared_error"}), None],
        "score_clip": [Interval(numbers.Real, 0, None, closed="neither")],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "accountant": [PrivacyAccountant, None],
    }

    def __init__(
        self,
        estimator,
        param_distributions=None,
        *,
        epsilon=1.0,
        delta="auto",
        n_iter=DEFAULT_N_ITER,
        n_iter_shape=1.0,
        scoring=None,
        score_clip=1.0,
        validation_fraction=0.2,
        random_state=None,
        accountant=None,
    ):
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.epsilon = epsilon
        self.delta = delta
        self.n_iter = n_iter
        self.n_iter_shape = n_iter_shape
        self.scoring = scoring
        self.score_clip = score_clip
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.accountant = accountant

    # -- helpers ------------------------------------------------------------------------------
    def _refuse_non_finite_rows(self, X, y) -> None:
        """Refuse, before anything is charged, rows with a NaN or an infinite entry (and, for a
        regressor, such a target), with the fit's message, when the estimator is not a pipeline.

        The planning fits read the training split only; a held-out row that ``predict`` refuses
        would raise after the charge, on one dataset and not on its neighbour, a release no
        mechanism accounts for (``DESIGN.md``, "Privacy model"). A pipeline's stateless steps may
        map such values to finite ones (an imputing ``RowwiseTransformer``): its rows are left to
        its steps."""
        if getattr(self.estimator, "steps", None) is not None:
            return
        values = layout_of(X).stored_values(X)
        if np.issubdtype(values.dtype, np.number) and not np.isfinite(values).all():
            refuse_non_finite()
        if not is_classifier(self.estimator):
            _assert_all_finite(np.asarray(y, dtype=float), input_name="y")

    def _check_stateless_steps(self) -> None:
        """Refuse a pipeline with a step, other than the last, that may learn from the rows
        (:func:`~skdpsco.preprocessing.row_dependence`, which names the step, the reason and the fix).

        Every trial (and every planning call) refits a clone of ``estimator``: a step fitted on
        the rows (``StandardScaler``, a :class:`~skdpsco.preprocessing.DPStandardScaler` with its
        own accountant, an encoder reading its categories, ...) would read the training rows
        outside the trial's accounted fit, once per call, and the released model would carry a
        step selected by score, which Papernot & Steinke 2022, Thm 2 does not cover (it bounds the
        selected trial's accounted release only). A function that maps across rows breaks the
        per-row sensitivities of the estimator's guarantee.
        """
        for name, step in getattr(self.estimator, "steps", [])[:-1]:
            if type(step) in ACCOUNTED_STEPS:  # fitted in every trial, its event in the trial's
                continue
            reason = row_dependence(step, name)
            if reason is not None:
                raise ValueError(f"DPSearchCV refuses the pipeline step {reason}")

    def _check_algorithms(self, distributions: list) -> None:
        """Refuse, before anything is charged, an algorithm of :data:`WITHOUT_ZCDP` in the
        estimator or anywhere in ``param_distributions``, drawn or not.

        Checking every listed value, not the drawn candidates, keeps the refusal independent of
        the number of trials, which must stay hidden.
        """
        name = self._prefix + "algorithm"
        listed = [self.estimator.get_params().get(name)]
        listed += [value for grid in distributions if not hasattr(grid.get(name), "rvs") for value in grid.get(name, [])]
        refused = next((value for value in listed if isinstance(value, str) and value in WITHOUT_ZCDP), None)
        if refused is not None:
            raise ValueError(
                f"DPSearchCV cannot search {name}={refused!r}: private selection (Papernot & Steinke "
                "2022, Thm 2) needs every trial's guarantee as zCDP (a Renyi-DP bound rho * alpha at "
                f"every order alpha), and {WITHOUT_ZCDP[refused]}. Search with the default "
                "algorithm='auto' (its fits are Gaussian releases), or list explicit candidates of "
                "algorithms whose guarantee is a Gaussian release or zCDP ('noisy_gd', 'newton', "
                f"'phased_sgd', 'snowball', 'pnsgd'), or choose {refused!r} on public or synthetic "
                "data of the same size and fit it once, outside the search, with its own budget."
            )

    @property
    def _prefix(self) -> str:
        """Parameter prefix of the private step: the last step of a pipeline, else none."""
        steps = getattr(self.estimator, "steps", None)
        return f"{steps[-1][0]}__" if steps else ""

    def _private_params(self, **values) -> dict:
        return {self._prefix + name: value for name, value in values.items()}

    def _accounted_steps(self) -> list:
        """The names of the accounted steps before the private step (:data:`ACCOUNTED_STEPS`)."""
        return [name for name, step in getattr(self.estimator, "steps", [])[:-1] if type(step) in ACCOUNTED_STEPS]

    def _accounted_params(self, **values) -> dict:
        """``values`` for the private step and for every accounted step before it
        (:data:`ACCOUNTED_STEPS`): each trial fits them all at the same (epsilon, delta)."""
        prefixes = [f"{name}__" for name in self._accounted_steps()] + [self._prefix]
        return {prefix + name: value for prefix in prefixes for name, value in values.items()}

    def _scoring(self) -> str:
        if self.scoring is not None:
            return self.scoring
        return "accuracy" if is_classifier(self.estimator) else "neg_mean_absolute_error"

    def _distributions(self) -> list:
        distributions = self.param_distributions
        if distributions is None:
            missing = sorted(set(DEFAULT_PARAM_DISTRIBUTIONS) - set(_last_step(self.estimator).get_params()))
            if missing:
                raise ValueError(
                    f"The default grid {DEFAULT_PARAM_DISTRIBUTIONS} needs the parameters {missing}, which "
                    f"{type(_last_step(self.estimator)).__name__} does not have: pass param_distributions."
                )
            return [{self._prefix + name: values for name, values in DEFAULT_PARAM_DISTRIBUTIONS.items()}]
        distributions = [distributions] if isinstance(distributions, dict) else list(distributions)
        if not distributions or not all(isinstance(d, dict) and d for d in distributions):
            raise ValueError("param_distributions must be a non-empty dict or a list of non-empty dicts.")
        for grid in distributions:
            for name, values in grid.items():
                if not (hasattr(values, "rvs") or (isinstance(values, (list, tuple, np.ndarray)) and len(values))):
                    raise ValueError(
                        f"param_distributions[{name!r}] must be a non-empty list or a distribution with "
                        f"rvs; got {values!r}."
                    )
        return distributions

    def _n_params(self, X) -> int:
        """``p`` of :func:`search_signal`, from public quantities: the columns of ``X`` (before
        any step of a pipeline), plus the intercept, times the classes of a multi-class ``classes=``
        parameter (one margin each); 1 output otherwise."""
        params = self.estimator.get_params()
        n_params = _num_features(X) + bool(params.get(self._prefix + "fit_intercept", True))
        classes = params.get(self._prefix + "classes")
        return n_params * (len(classes) if classes is not None and len(classes) > 2 else 1)

    def _fit_once(self, X, y, sample_weight, delta: float, rng: np.random.Generator):
        """The rule's fallback: the estimator fitted once with the whole (epsilon, delta) on all the
        rows, charging the search's ledger with its own event."""
        model = clone(self.estimator).set_params(**self._private_params(
            epsilon=float(self.epsilon), delta=delta, accountant=fit_accountant(self),
            random_state=None if is_secure(rng) else _child_random_state(rng),
        ))
        model.fit(X, y, **self._fit_params(sample_weight))
        return model, _last_step(model).dp_event_, _last_step(model).epsilon_

    def _release(self, model, candidate: dict, score: float, event, spent: float, delta: float, **attributes):
        """Store the released model and the search's public attributes."""
        self.best_estimator_ = model.set_params(**self._accounted_params(random_state=None, accountant=self.accountant))
        self.best_params_ = candidate
        self.best_score_ = score
        self.cv_results_ = {
            "params": [candidate],
            "mean_test_score": np.array([score]),
            "rank_test_score": np.array([1]),
        }
        for name, value in attributes.items():
            setattr(self, name, value)
        self.dp_event_ = event
        self.epsilon_ = spent
        self.delta_ = delta
        self.n_features_in_ = self.best_estimator_.n_features_in_
        if hasattr(self.best_estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.best_estimator_.feature_names_in_
        return self

    def _labels_from_data(self, candidates: list) -> str | None:
        """The private step's ``classes`` parameter name if some trial fits with ``classes=None``
        (its label set is then read from the training split), else ``None``."""
        name = self._prefix + "classes"
        params = self.estimator.get_params()
        if name in params and any(candidate.get(name, params[name]) is None for candidate in candidates):
            return name
        return None

    def _fit_params(self, sample_weight) -> dict:
        """``sample_weight`` as the private step's fit parameter (``step__sample_weight`` in a
        pipeline), or nothing."""
        return {} if sample_weight is None else self._private_params(sample_weight=sample_weight)

    def _planned_rho(self, candidate: dict, epsilon: float, delta: float, X, y, sample_weight=None) -> float:
        """:func:`zcdp_rho` of the event ``estimator`` plans with ``candidate`` at ``(epsilon, delta)``:
        with accounted steps (:data:`ACCOUNTED_STEPS`) in a pipeline, the sum of the ``rho`` each of
        them and the private step plan (zCDP composes additively), each planned on rows of the
        public shape its input has."""
        planner = _PlanningAccountant()
        model = clone(self.estimator).set_params(
            **candidate, **self._accounted_params(epsilon=epsilon, delta=delta, accountant=planner)
        )
        steps = getattr(model, "steps", [])
        if not any(type(step) in ACCOUNTED_STEPS for _, step in steps[:-1]):
            return zcdp_rho(self._planned_event(model, X, y, self._fit_params(sample_weight)))
        rho, rows = 0.0, X
        for _, step in steps[:-1]:
            if type(step) in ACCOUNTED_STEPS:
                rho += zcdp_rho(self._planned_event(step, rows, y, {}))
                # its output's shape is public; the steps after it are planned on zeros of that shape
                rows = np.zeros((_num_samples(rows), step.n_components or np.shape(rows)[1]))
            elif step is not None and not isinstance(step, str):
                rows = step.fit_transform(rows, y)  # accepted by row_dependence: reads no row value
        fit_params = {} if sample_weight is None else {"sample_weight": sample_weight}
        return rho + zcdp_rho(self._planned_event(steps[-1][1], rows, y, fit_params))

    def _planned_event(self, model, X, y, fit_params: dict) -> dp_accounting.DpEvent:
        """The event ``model`` (its accountant a :class:`_PlanningAccountant`) charges first."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # issued by the search or its trials instead
            try:
                model.fit(X, y, **fit_params)
            except _Planned as planned:
                return planned.event
        raise TypeError(
            f"{type(self.estimator).__name__} did not charge its accountant before fitting: only "
            "estimators that record their privacy event can be searched privately."
        )

    def _candidate_epsilon(self, candidate: dict, rho: float, delta: float, X, y, sample_weight=None) -> float:
        """Largest epsilon at which the candidate's fit at ``delta`` is ``rho``-zCDP, with its
        ``rho`` within 2% of the trial's (:func:`_largest_feasible`, from the epsilon of a
        ``rho``-zCDP release)."""
        start = epsilon_of(zcdp_event(rho), delta)
        try:
            log_epsilon = _largest_feasible(
                lambda t: math.log(self._planned_rho(candidate, math.exp(t), delta, X, y, sample_weight) / rho),
                math.log(start),
            )
        except ValueError as exc:
            raise ValueError(
                f"The candidate {candidate} cannot be fitted within the per-trial budget "
                f"rho={rho:.4g} of this search: {exc} Raise epsilon, lower n_iter, or remove the "
                "candidate."
            ) from exc
        return math.exp(log_epsilon)

    # -- fit ----------------------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Run the private search and release the selected trial (with ``param_distributions=None``
        and :func:`search_signal` below :data:`SEARCH_SIGNAL`: fit the estimator once instead).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Row weights, passed to every trial's fit on the training split (the private step's
            ``sample_weight``, each at most its ``max_weight``). The held-out score stays the
            unweighted mean of the rows' scores: a weighted mean divides by the held-out rows'
            total weight, a quantity the score's noise is not calibrated to.

        Returns
        -------
        self
        """
        self._validate_params()
        self._check_stateless_steps()
        distributions = self._distributions()
        self._check_algorithms(distributions)
        X, y, sample_weight = indexable(X, y, sample_weight)
        self._refuse_non_finite_rows(X, y)
        n_samples = _num_samples(X)
        n_validation = int(round(self.validation_fraction * n_samples))
        if not 1 <= n_validation <= n_samples - 2:
            raise ValueError(
                f"validation_fraction={self.validation_fraction} of n_samples={n_samples} leaves "
                f"{n_validation} held-out and {n_samples - n_validation} training rows; both splits "
                "need rows (at least 2 for training)."
            )
        delta = resolve_delta(self.delta, n_samples)  # refused before anything is charged if it voids the guarantee
        scoring = self._scoring()

        # Public randomness and planning, before any row is read.
        rng = _generator(self.random_state)
        order = rng.permutation(n_samples)
        X_train, y_train = _safe_indexing(X, order[n_validation:]), _safe_indexing(y, order[n_validation:])
        X_val, y_val = _safe_indexing(X, order[:n_validation]), _safe_indexing(y, order[:n_validation])
        weights = None if sample_weight is None else _safe_indexing(sample_weight, order[n_validation:])
        trials = RandomTrials(float(self.n_iter), float(self.n_iter_shape))
        rho = calibrate_trial_rho(float(self.epsilon), delta, trials)
        signal = search_signal(n_samples - n_validation, self._n_params(X), rho)
        if self.param_distributions is None and signal < SEARCH_SIGNAL and not self._accounted_steps():
            model, event, spent = self._fit_once(X, y, sample_weight, delta, rng)
            return self._release(model, {}, math.nan, event, spent, delta, trial_rho_=math.nan,
                                 score_noise_std_=math.nan, search_signal_=signal, searched_=False)
        n_trials = trials.sample(rng)
        trial_rngs = rng.spawn(n_trials)
        candidates = [_draw_candidate(distributions, trial_rng) for trial_rng in trial_rngs]
        labels_parameter = self._labels_from_data(candidates)
        # once for the search; the trials' warnings are muted (their number would reveal K)
        muted = [labels_from_data_warning()]
        if labels_parameter is not None:
            warnings.warn(labels_from_data_warning(labels_parameter), PrivacyWarning, stacklevel=2)
        wrapper = label_wrapper()
        if wrapper is not None:
            warnings.warn(label_wrapper_warning(wrapper), PrivacyWarning, stacklevel=2)
            muted.append(label_wrapper_warning(wrapper))
        epsilons = {}
        for candidate in candidates:
            key = repr(sorted(candidate.items()))
            if key not in epsilons:
                epsilons[key] = self._candidate_epsilon(candidate, rho, delta, X_train, y_train, weights)

        event = trials.dp_event(zcdp_event(rho))
        spent = epsilon_of(event, delta)
        charge_fit(self, event, epsilon=spent, delta=delta)

        # The rows are read from here on; only the selected trial leaves this method.
        def run_trial(index: int):
            candidate, trial_rng = candidates[index], trial_rngs[index]
            ledger = PrivacyAccountant()
            model = clone(self.estimator).set_params(
                **candidate,
                **self._accounted_params(
                    epsilon=epsilons[repr(sorted(candidate.items()))], delta=delta,
                    # secure mode: the trial's fit draws from the OS's CSPRNG itself (no seed)
                    random_state=None if is_secure(trial_rng) else _child_random_state(trial_rng),
                    accountant=ledger,
                ),
            )
            with warnings.catch_warnings():
                for message in muted:
                    warnings.filterwarnings("ignore", message=re.escape(message), category=PrivacyWarning)
                model.fit(X_train, y_train, **self._fit_params(weights))
            fit_rho = sum(zcdp_rho(record.event) for record in ledger.history)
            if fit_rho > rho * (1.0 + 1e-9):  # the plan is public, so is this check
                raise RuntimeError(
                    f"The fit of {candidate} recorded rho={fit_rho:.6g} > the planned {rho:.6g}."
                )
            per_row, value_range = _per_row_scores(scoring, float(self.score_clip), model, X_val, y_val)
            score, sigma = noisy_mean_score(per_row, value_range, rho, trial_rng)
            return (model, candidate, sigma), score

        (model, candidate, sigma), score = select_best(run_trial, n_trials)
        return self._release(model, candidate, score, event, spent, delta, trial_rho_=rho,
                             score_noise_std_=sigma, search_signal_=signal, searched_=True)

    # -- delegation to the released model -----------------------------------------------------
    @property
    def classes_(self):
        check_is_fitted(self)
        return self.best_estimator_.classes_

    @available_if(_best_has("predict"))
    def predict(self, X):
        """Predict with ``best_estimator_``."""
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    @available_if(_best_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of ``best_estimator_``."""
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_best_has("decision_function"))
    def decision_function(self, X):
        """Decision function of ``best_estimator_``."""
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    @available_if(_best_has("score"))
    def score(self, X, y):
        """``best_estimator_.score(X, y)`` (not private: for public test data)."""
        check_is_fitted(self)
        return self.best_estimator_.score(X, y)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags
