"""Private feature scaling inside ``fit``: find each feature's order of magnitude,
standardise the clipped rows with noisy per-feature means and second moments, then train on the
standardised rows, bounded again.

The data flow of one scaled fit (``BaseDPLinearModel._fit_steps``):

0. without a public row bound (``data_norm=None``, the default): one noisy histogram of every
   feature's binary order of magnitude (:func:`release_magnitudes`) gives a power of two ``s_j``
   per feature; the rows become ``x / s`` and the bound is ``B = ROW_NORM_FACTOR sqrt(d)``, public. Raw tables whose
   features differ by orders of magnitude (areas in thousands next to ratios below one) are
   thereby brought to one scale before any clip; a row clip alone would keep the imbalance. On
   rows too few for the histogram at the budget (:attr:`ScalingPlan.resolves_magnitudes` false:
   no window can be significant but by noise) ``fit`` releases one row bound instead
   (:mod:`._bounds`, as ``data_norm='private'``), which cannot blow a feature up;
1. the rows are clipped to the norm ``B`` (``data_norm`` when the user gives one);
2. two noisy releases give a mean and a scale per feature (:func:`release_moments`): the sums
   ``sum_i x_i / B`` (l2-sensitivity 2), then the sums of squares ``sum_i u_i**2 / B_c**2`` of the
   rows centred on the released mean and clipped to ``B_c = CENTRED_NORM_FACTOR * B``
   (l2-sensitivity ``sqrt(2)``): a feature's spread is often far below its mean on raw data,
   and the centred, tighter clip resolves it where ``E[x**2] - mean**2`` drowns in the noise of
   both (the clip biases wide spreads down; step 3's clip and prediction absorb that);
3. each row becomes ``clip_C((x - mean) / scale) / C`` (:func:`skdpsco.rows._dense.standardise_rows`) with the public
   norm ``C = STANDARDISED_NORM_FACTOR * sqrt(d)``, so the solver sees rows of norm at most 1;
4. the solver's coefficients on those rows are folded back (:func:`fold_scaling`) into
   ``coef_`` and ``intercept_`` on the rows of step 1: for a row the second clip leaves alone the
   model is exactly the trained one, and prediction applies steps 1 and 3 to its rows
   (``standardisation_``), so the model is the trained one on every row.

Steps 0 and 2 read the first :func:`moment_rows` rows of the fit's uniformly random order (all
of them up to ``2**13`` rows, more at small budgets and many features: enough that the variances'
noise is below the relative floor and that the orders are resolved): beyond those, more rows
would buy little accuracy of the scale and cost reads of every row. The rest are read once, and
scaled as they are copied (:class:`skdpsco.rows.FusedPasses`).

The releases of steps 0 and 2 and the solver's event compose into the fit's one event; the
shares of the budget the releases get are :data:`MAGNITUDE_SHARE` and :data:`SCALING_SHARE`.
Everything here depends on the rows only through those releases: the noise, the floors and the norms are public functions of ``n``, ``d``,
``B`` and the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import dp_accounting
import numpy as np
from scipy import optimize, stats

from .. import rows as fused_rows
from .._secure import noisy_release
from ..accounting import gaussian_event, pure_dp_event
from .._noise import release_noise

__all__ = [
    "CENTRED_NORM_FACTOR",
    "GAUSSIAN_MOMENTS_SENSITIVITY",
    "MAGNITUDE_FALSE_ORDER_RATE",
    "MAGNITUDE_RANGE",
    "MAGNITUDE_SHARE",
    "MAGNITUDE_THRESHOLD",
    "MAGNITUDE_MARGIN",
    "MAGNITUDE_WINDOW",
    "MAGNITUDE_WINDOWS",
    "RELATIVE_SCALE_FLOOR",
    "ROW_NORM_FACTOR",
    "SCALING_SHARE",
    "STANDARDISED_NORM_FACTOR",
    "VARIANCE_THRESHOLD",
    "ScalingPlan",
    "feature_passes",
    "fold_scaling",
    "laplace_moments_sensitivity",
    "laplace_sum_survival",
    "magnitude_significance",
    "moment_sensitivities",
    "magnitude_bins",
    "magnitude_counts",
    "plan_scaling",
    "release_magnitudes",
    "release_moments",
]

def moment_sensitivities(n_features: int, laplace: bool) -> tuple[float, float]:
    """Replace-one sensitivities ``(mean, second)`` of the two moment releases: ``l2`` (Gaussian
    noise) or ``l1`` (Laplace noise, ``laplace=True``).

    * The sums ``sum_i x_i / B`` over rows of norm at most ``B``: replacing ``x`` by ``x'`` moves
      them by ``(x - x') / B``, of ``l2`` norm at most 2 and ``l1`` norm at most
      ``sqrt(d) ||x - x'||_2 / B <= 2 sqrt(d)``.
    * The sums of squares ``sum_i u_i**2 / C**2`` over rows ``u`` of norm at most ``C`` (the
      centred rows clipped to ``C``, whatever the released mean they are centred on): with
      ``a_j = u_j**2 / C**2 >= 0`` and ``b_j = u'_j**2 / C**2 >= 0``, ``sum_j (a_j - b_j)**2 <=
      sum_j a_j**2 + b_j**2 <= (sum_j a_j)**2 + (sum_j b_j)**2 <= 2``: ``sqrt(2)`` in ``l2``; and
      ``sum_j |a_j - b_j| <= sum_j a_j + b_j <= 2`` in ``l1``. Neither depends on ``d`` for ``l2``:
      the row clip bounds every feature, no per-feature bound is needed.
    """
    if laplace:
        return 2.0 * math.sqrt(n_features), 2.0
    return 2.0, math.sqrt(2.0)


GAUSSIAN_MOMENTS_SENSITIVITY = math.sqrt(6.0)
"""``l2`` norm of the two Gaussian releases' sensitivities (:func:`moment_sensitivities`),
``sqrt(2**2 + 2)``: both releases get the same noise per coordinate, ``sqrt(6) / mu_s`` in units of
``B`` and ``C**2``, and compose to ``mu_s``-GDP (Dong, Roth & Su 2022, Cor. 3.3)."""

CENTRED_NORM_FACTOR = 0.25
"""The rows centred on the released mean are clipped to ``C = CENTRED_NORM_FACTOR * B`` before
their squares are summed: ``C**2`` sets the noise of the variances, and a feature's spread is a
fraction of the bound on its magnitude (after the orders of magnitude, entries lie within a few
octaves below 1). Without an intercept the rows are not centred and ``C = B``. Public; chosen on
data that is not the benchmark's (``benchmarks/real.py --validation``: iris and modechoice, 10
seeds, epsilon in {0.3, 1, 3, 10}; factors 0.25 / 0.5 / 0.75 against the uncentred second moment:
iris accuracy at epsilon 1 / 3 0.56 / 0.73 against 0.43 / 0.64 uncentred and 0.50 / 0.71 at 0.5;
modechoice AUC +0.01 at epsilon 1-3)."""

SCALING_SHARE = 0.25
"""Share of the budget spent on the scaling statistics: of ``mu**2`` when the fit is
``mu``-GDP-calibrated (``delta > 0``: the release gets ``mu_s = sqrt(SCALING_SHARE) mu``, the
solver the rest of the composed event), of ``epsilon`` at ``delta = 0`` (basic composition, exact
for pure DP). Public; chosen on data that is not the benchmark's (``benchmarks/real.py
--validation``, ``benchmarks/results/real_validation_*.md``)."""

MAGNITUDE_SHARE = 0.1
"""Share of the fit's budget (of ``mu**2``, or of ``epsilon`` at ``delta = 0``) spent on the
per-feature orders of magnitude when no ``data_norm`` is given. Public; chosen with
:data:`SCALING_SHARE`."""

MAGNITUDE_RANGE = 40
"""The orders of magnitude told apart: ``|x| = 2**k`` for ``k`` in ``[-40, 40]`` (about
``1e-12`` to ``1e12``); smaller and larger magnitudes fall in the end bins, zeros in none."""

MAGNITUDE_WINDOW = 3
"""Adjacent binary orders of magnitude pooled by :func:`release_magnitudes`: the noisy count of
a window of 3 has ``sqrt(3)`` times the noise of one bin and holds most entries of a feature that
spans a few octaves."""

MAGNITUDE_THRESHOLD = 4.0
"""A window must hold more than 4 standard deviations of its noise to set a feature's scale: the
largest of 79 windows of pure noise exceeds it with probability up to ``79 * 3.2e-5``, and a fit
tests ``d`` features' windows. An order more than :data:`MAGNITUDE_MARGIN` octaves below the
median of the significant ones must pass :func:`magnitude_significance`, corrected for the
``79 d`` windows, instead."""

MAGNITUDE_MARGIN = 4
"""Octaves below the median order of the significant features within which a window significant at
:data:`MAGNITUDE_THRESHOLD` sets a feature's order (:func:`release_magnitudes`); further below it
must pass :func:`magnitude_significance`. A window of pure noise that passes sits at any of the 79
orders alike, and far below the feature's values it blows the feature up (its coefficient is
divided by that order); within the margin it shrinks the feature's divisor at most
``2**MAGNITUDE_MARGIN`` times below the median. Real features do sit that far below: after
``Normalizer`` the mode indicators of ``modechoice`` lie 5 octaves below the median, and a margin
of 2 moved them up to it in 6 of 10 splits at epsilon 3 (AUC -0.009 +- 0.006 against the former
rule, -0.004 +- 0.005 with 4; ``benchmarks/real.py --validation``, 10 splits). On the benchmark
sets neither margin lost anything at epsilon 0.5, 1 or 3 (``benchmarks/results/rare_column.md``).
Public."""

MAGNITUDE_FALSE_ORDER_RATE = 0.001
"""``alpha``: the probability per fit that a window of pure noise passes
:func:`magnitude_significance` in any feature. A one-hot level in 0.8 % of 6000 rows got
``feature_scales_`` ``2**-16`` and ``coef_`` ``-7.7e5`` on one seed of
``benchmarks/results/rare_column.md`` from a noise window 4.5 standard deviations high, with the
other features' orders at ``2**0`` to ``2**6``. Public."""

MAGNITUDE_WINDOWS = 2 * MAGNITUDE_RANGE + 2 - MAGNITUDE_WINDOW
"""Windows of :data:`MAGNITUDE_WINDOW` adjacent orders per feature among the ``2 *
MAGNITUDE_RANGE + 1`` bins: 79."""


def laplace_sum_survival(t: float, terms: int) -> float:
    """``P(L_1 + ... + L_m > t)`` for ``m = terms`` i.i.d. standard Laplace variables and ``t >= 0``.

    The density of the sum is ``exp(-|x|) / (2**(2m - 1) (m - 1)!) sum_{j < m} (2m - 2 - j)! /
    (j! (m - 1 - j)!) (2 |x|)**j`` (the ``m``-fold convolution of ``exp(-|x|) / 2``; Kotz,
    Kozubowski & Podgorski 2001, *The Laplace Distribution and Generalizations*, eq. 2.3.25), and
    ``int_t^inf x**j exp(-x) dx = j! exp(-t) sum_{i <= j} t**i / i!``. For ``m = 3``:
    ``exp(-t) (t**2 + 5 t + 8) / 16``."""
    m = int(terms)
    total = sum(math.factorial(2 * m - 2 - j) / math.factorial(m - 1 - j) * 2.0**j
                * sum(t**i / math.factorial(i) for i in range(j + 1)) for j in range(m))
    return math.exp(-t) * total / (2.0 ** (2 * m - 1) * math.factorial(m - 1))


def magnitude_significance(n_features: int, laplace: bool) -> float:
    """Standard deviations of a window's noise its noisy count must exceed to set a feature's
    order more than :data:`MAGNITUDE_MARGIN` octaves below the median (:func:`release_magnitudes`):
    the upper ``alpha / (d W)`` quantile of that noise, for ``alpha`` =
    :data:`MAGNITUDE_FALSE_ORDER_RATE` and ``d W`` the windows tested over all features
    (:data:`MAGNITUDE_WINDOWS` each). By the union bound (Bonferroni), a window of pure noise passes
    it in some feature with probability at most ``alpha`` per fit. Gaussian noise: the normal
    quantile (4.6 standard deviations for 6 features, 5.1 for 64); Laplace noise: the quantile of a
    sum of :data:`MAGNITUDE_WINDOW` Laplace variables (:func:`laplace_sum_survival`; 6.6 for 6
    features). A public function of ``d``."""
    level = MAGNITUDE_FALSE_ORDER_RATE / (n_features * MAGNITUDE_WINDOWS)
    if not laplace:
        return float(stats.norm.isf(level))
    scale_units = optimize.brentq(lambda t: laplace_sum_survival(t, MAGNITUDE_WINDOW) - level, 0.0, 1e3)
    return scale_units / math.sqrt(2.0 * MAGNITUDE_WINDOW)  # a Laplace(b) sum of m terms has std b sqrt(2 m)


ROW_NORM_FACTOR = 0.5
"""After the orders of magnitude, the rows ``x / s`` are clipped to ``B = ROW_NORM_FACTOR *
sqrt(d)``: every feature is then about 1 or less in most rows, so ``sqrt(d)`` bounds a row whose
features are all at their typical size, and half of it clips only rows with most features large
(the moments' noise grows with ``B``). Public; chosen on the validation sets of
``benchmarks/real.py`` (iris, modechoice: 0.5 at least as good as 1 at epsilon 1 and 3)."""

STANDARDISED_NORM_FACTOR = 1.0
"""The standardised rows are clipped to ``C = STANDARDISED_NORM_FACTOR * sqrt(d)``: a standardised
row has ``E ||z||**2 = d``, so ``C`` is its typical norm, and dividing by ``C`` gives the solver rows
of norm at most 1, the scale its defaults assume. Public; chosen with :data:`SCALING_SHARE`."""


VARIANCE_THRESHOLD = 1.0
"""A feature's released variance is floored at this many standard deviations of its noise
(:attr:`ScalingPlan.variance_floor`). The coefficient of a feature is the trained one divided by
its scale (:func:`fold_scaling`), and the solver's noise on it with it; a scale read from a
variance the noise cannot resolve (a one-hot level in a few rows: about ``p (1 - p)``, near the
noise) multiplies that noise by up to ``1 / sqrt(floor)``: ``|coef_j| <= |w_j| / (s_j sqrt(floor)
C)`` for the trained ``w_j`` (``s_j`` its ``feature_scales_``). A higher floor shrinks such a
coefficient towards 0 and costs accuracy at small epsilon, where many features' variances sit near
their noise (``benchmarks/results/rare_column.md``, 6 seeds, floor 4 against this one: a 0.8 %
one-hot level of 6000 rows at epsilon 1, median distance to the non-private coefficient -0.84
from 2.1 to 1.3, its coefficients still from -10 to 3.4; held-out AUC of ``digits_binary`` at
epsilon 0.5 -0.02 and accuracy of ``digits`` -0.03, of ``breast_cancer`` -0.05 (30 splits); at
epsilon 1 and 3 within +0.008 of this one). No floor makes a rare level's coefficient meaningful
at these sizes, so the floor stays at one standard deviation. Where the orders of magnitude are
released, :data:`RELATIVE_SCALE_FLOOR` bounds the scale from below as well. Public."""


RELATIVE_SCALE_FLOOR = 1.0 / 16.0
"""With the orders of magnitude released (``data_norm=None``), the least scale of a feature in the
units of the rows ``x / s``, where its order ``s`` puts most of its entries between ``1/8`` and
``1`` (the window of :data:`MAGNITUDE_WINDOW` octaves below its top): half the bottom of that
window (:attr:`ScalingPlan.variance_floor`). A public function of the released order, applied
after the release. It bounds what the noise floor leaves open at large ``n`` and small ``d``,
where that floor is far below ``1/16``: a one-hot level in ``p`` of the rows, with a spread of
about ``sqrt(p) / s``, is standardised to entries of up to ``1 / sqrt(p)``, far beyond the clip
of the standardised rows, and its coefficient ``coef_j = w_j / (s_j scale_j C)`` is then at most
``16 |w_j| / (s_j C)``. On the 0.8 % level of ``benchmarks/results/rare_column.md`` (6000 rows,
6 features, 10 seeds; the non-private coefficient -0.84) the largest ``|coef_|`` at epsilon 0.5 /
1 / 3 went from 12.5 / 15.3 / 27.9 without it to 4.8 / 5.7 / 12.9 and the median distance from
1.50 / 2.32 / 5.77 to 0.81 / 0.94 / 1.34 (held-out AUC -0.0002 / +0.0008 / +0.0012); on the
benchmark sets there no cell moved by more than 0.001, nor with ``Normalizer`` (``benchmarks/real.py``,
10 splits), and on its validation sets by at most 0.007 (iris at epsilon 10, +- 0.006); a floor of
``1/8`` cost 0.007 of the synthetic AUC at epsilon 0.5. Where the noise floor is larger
(``digits``: 64 features, 1257 rows) it changes nothing. Its cost: a predictive feature whose
spread is below ``1/16`` of its order (6-10 % of its magnitude) is standardised to a smaller
spread than its own; on synthetic rows of 5000 rows at epsilon 1 that cost about 0.01 of AUC
(-0.008 +- 0.004 at 10 %, 10 splits), nothing at 20 % or at 2e5 rows."""


MOMENT_ROWS = 2**16
"""The least number of rows the moments are computed over when the plan releases no orders of
magnitude (a public ``data_norm``, or the private row bound; :func:`moment_rows`)."""

MOMENT_NOISE = 1e-3
"""Without released orders of magnitude, the moments of a fit of many rows are computed over
enough of them that the noise on each released second moment has standard deviation at most
this, in units of ``C**2`` (:func:`moment_rows`)."""

SCALED_MOMENT_ROWS = 2**13
"""The least number of rows the moments and the orders of magnitude are computed over when the
plan releases the orders (:func:`moment_rows`): a floor under :func:`variance_rows` and
:func:`magnitude_rows` for the errors they leave out, the moments' sampling error (about ``sqrt(2 /
m)`` of a feature's variance, under 2 % here) and the choice among windows of nearly equal counts.
Public; ``benchmarks/results/moment_rows_small_exact.md``: fits over exactly this many rows lost
accuracy only where they read fewer than :func:`variance_rows`."""

VARIANCE_NOISE_SHARE = 0.5
"""The noise standard deviation on a released variance the rows of the moments must bring down to,
as a share of :data:`RELATIVE_SCALE_FLOOR` squared (:func:`variance_rows`); at most
``1 / VARIANCE_THRESHOLD``, so that the noise floor stays below the relative one. Public; chosen
in ``benchmarks/results/moment_rows_small.md`` (its notes): with the share at 1 (the noise floor
at the relative floor) fits of 100 features at small budgets and of 1000 features lost accuracy
against the releases over all rows, as the fits over fewer rows did in
``moment_rows_small_exact.md``; at one half no cell did."""

RESOLVED_WINDOW_SHARE = 0.5
"""The share of a feature's entries the plan assumes its window of :data:`MAGNITUDE_WINDOW`
orders holds: "most" of them, the reading of a released order that :data:`RELATIVE_SCALE_FLOOR`
rests on (most entries between ``1/8`` and ``1`` of the order). The rows the orders are released
from must resolve such a window (:func:`magnitude_rows`)."""


def moment_rows(plan: "ScalingPlan") -> int:
    """How many rows a fit computes the scaling's releases over: the first ``m`` of its uniformly
    random order, for ``plan`` over all ``n`` rows (public: ``n``, ``d`` and the budget).

    With the orders of magnitude released (``plan.magnitude_noise`` set, the default fit), ``m =
    min(n, max(SCALED_MOMENT_ROWS, variance_rows(plan), magnitude_rows(plan)))``: the fewest rows
    on which the noise on a variance is a fraction of :data:`RELATIVE_SCALE_FLOOR` squared, the
    floor that applies anyway, so the variances are floored as on all rows (:func:`variance_rows`),
    and on which the orders are as resolvable as the plan assumes (:func:`magnitude_rows`). The
    orders are released from the same rows as the moments, so
    :attr:`ScalingPlan.resolves_magnitudes` is read on ``m``; ``magnitude_rows`` exceeds the
    plan's :attr:`~ScalingPlan.magnitude_threshold`, so it is true on ``m`` rows exactly when it
    is on ``n``: reading fewer rows never turns a fit to the row bound.

    Without released orders (a public ``data_norm`` or the private row bound), ``m = min(n,
    max(MOMENT_ROWS, noise_std / MOMENT_NOISE))``: there is no order to measure a feature's
    variance against, only the bound, and the rule stays the one measured for it.

    The moments only set the standardisation, which the solver's own noise makes coarse anyway;
    beyond ``m`` rows their errors are small while every row more costs two more reads of a row.
    The sums over a subset drawn by public randomness, independently of the rows, have at most the
    sensitivities of the sums over all rows (:func:`moment_sensitivities`), so the releases' events
    are unchanged (no amplification by subsampling is claimed). Measured: accuracy in
    ``benchmarks/results/moment_rows_small.md`` (the rule against the releases over all rows in
    every cell of ``n`` 2e4-1e5, ``d`` 5-1000 and epsilon 0.1-3 where it reads fewer rows than
    ``n``; its notes hold the rule with the variances' noise at the relative floor, which lost
    accuracy), ``moment_rows_small_exact.md`` (exactly ``2**13``, ``2**12`` and ``2**10`` rows: the
    cells that lost accuracy read fewer than ``variance_rows`` or ``magnitude_rows``) and
    ``moment_rows.md`` (``n`` up to ``1e6``; its notes: the time at 1e5 x 20)."""
    if plan.magnitude_noise is None:
        least = max(MOMENT_ROWS, math.ceil(plan.noise_std / MOMENT_NOISE))
    else:
        least = max(SCALED_MOMENT_ROWS, variance_rows(plan), magnitude_rows(plan))
    return int(min(plan.n_samples, least))


def variance_rows(plan: "ScalingPlan") -> int:
    """The fewest rows on whose moments the noise on a released variance, ``noise_std C**2 / m``
    in the units of the rows ``x / s`` (a feature's released order is 1 there), is at most
    :data:`VARIANCE_NOISE_SHARE` of :data:`RELATIVE_SCALE_FLOOR` squared. On so many rows the noise
    floor (:data:`VARIANCE_THRESHOLD` deviations, :attr:`ScalingPlan.variance_floor`) is below the
    relative one, so the variances are floored at ``RELATIVE_SCALE_FLOOR**2`` as on all rows, and
    a feature at that floor has its variance within half of it. With the default bounds (``C =
    CENTRED_NORM_FACTOR ROW_NORM_FACTOR sqrt(d)``) this is ``8 d noise_std`` rows centred, ``128 d
    noise_std`` uncentred. Without a relative floor (``RELATIVE_SCALE_FLOOR = 0``, a variant of
    ``benchmarks/rare_column.py``) the floor is the noise's, which only all rows make what it is
    on all rows: ``n``."""
    largest_noise = VARIANCE_NOISE_SHARE * RELATIVE_SCALE_FLOOR**2
    if largest_noise <= 0.0:
        return plan.n_samples
    return math.ceil(plan.noise_std * plan.centred_norm**2 / largest_noise)


def magnitude_rows(plan: "ScalingPlan") -> int:
    """The fewest rows on which a feature with :data:`RESOLVED_WINDOW_SHARE` of its entries in one
    window of :data:`MAGNITUDE_WINDOW` orders (the plan's assumption, "most") sets its order
    wherever it lies: its count clears :attr:`ScalingPlan.distant_magnitude_threshold` (corrected
    for the windows of all ``d`` features) even with the noise :data:`MAGNITUDE_THRESHOLD` standard
    deviations against it, ``(distant_magnitude_threshold + magnitude_threshold) /
    RESOLVED_WINDOW_SHARE``. The orders are released from the rows the moments read
    (:func:`release_magnitudes`), so fewer rows would leave features unresolved that the plan
    counts on (their order then the fallback); a window's count grows with the rows read, its
    noise does not."""
    return math.ceil((plan.distant_magnitude_threshold + plan.magnitude_threshold) / RESOLVED_WINDOW_SHARE)


def covered_rows(block_sizes, n_rows: int) -> int:
    """The rows of the fewest leading blocks of sizes ``block_sizes`` (in their reading order) that
    hold at least ``n_rows`` rows: the moments of a fit whose rows are read in whole blocks (a
    Dask fit, :func:`skdpsco._dask.stream_order`) are computed over those blocks. Public: the
    block sizes and their order are drawn before the data is read."""
    ends = np.cumsum(np.asarray(block_sizes, dtype=np.int64))
    return int(ends[min(int(np.searchsorted(ends, n_rows)), ends.size - 1)])


def laplace_moments_sensitivity(n_features: int) -> float:
    """Sum of the two Laplace releases' ``l1``-sensitivities (:func:`moment_sensitivities`),
    ``2 sqrt(d) + 2``: both get Laplace noise of scale ``(2 sqrt(d) + 2) / epsilon_s`` per
    coordinate (Dwork et al. 2006, the Laplace mechanism), and their epsilons add to ``epsilon_s``."""
    return sum(moment_sensitivities(n_features, True))


@dataclass(frozen=True)
class ScalingPlan:
    """The public plan of the scaling release.

    Attributes
    ----------
    n_samples, n_features : int
    data_norm : float
        ``B``, the norm the rows (divided by the magnitudes of step 0, if any) are clipped to.
    noise_scale : float
        Standard deviation (Gaussian) or scale (Laplace) of the noise on each coordinate of both
        moment releases (in units of ``B`` for the sums, of ``C**2`` for the sums of squares).
    laplace : bool
        ``True`` for the pure-DP release.
    dp_event : dp_accounting.DpEvent
        The releases' events composed in the order they are drawn: the magnitudes' (when
        ``data_norm`` is ``None``), the sums' (when centred) and the sums of squares', each
        ``gaussian_event(noise_scale, sensitivity)`` or ``pure_dp_event(sensitivity /
        noise_scale)`` (:func:`moment_sensitivities`).
    centred : bool
        Whether the rows are centred on a released mean (``fit_intercept``); without, only the
        sums of squares are released, of the rows clipped to ``B``.
    magnitude_noise : float or None
        Standard deviation (Gaussian) or scale (Laplace) of the noise on each count of the
        magnitude histogram (step 0), ``None`` when ``data_norm`` is public.
    moment_rows : int or None
        The moments are computed over the first ``moment_rows`` rows of the fit's random order
        (:func:`moment_rows`); ``None``: over all ``n_samples``.
    """

    n_samples: int
    n_features: int
    data_norm: float
    noise_scale: float
    laplace: bool
    dp_event: dp_accounting.DpEvent
    magnitude_noise: float | None = None
    centred: bool = True
    moment_rows: int | None = None

    def __post_init__(self):
        if self.moment_rows is None:
            object.__setattr__(self, "moment_rows", self.n_samples)

    @property
    def centred_norm(self) -> float:
        """``C``, the norm the rows are clipped to before their squares are summed
        (:data:`CENTRED_NORM_FACTOR` times ``B`` when centred, ``B`` otherwise)."""
        return (CENTRED_NORM_FACTOR if self.centred else 1.0) * self.data_norm

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise on each coordinate of the moment releases (of a Laplace
        variable of scale ``b``: ``sqrt(2) b``)."""
        return self.noise_scale * (math.sqrt(2.0) if self.laplace else 1.0)

    @property
    def moment_noise_std(self) -> float:
        """Standard deviation of the noise on one second moment, in units of ``C**2``."""
        return self.noise_std / self.moment_rows

    @property
    def variance_floor(self) -> float:
        """The least released variance, in the units of the rows ``x / s``: :data:`VARIANCE_THRESHOLD`
        standard deviations of the noise on a second moment (``moment_noise_std * C**2``), and
        with the orders of magnitude released at least :data:`RELATIVE_SCALE_FLOOR` squared;
        public."""
        noise_floor = VARIANCE_THRESHOLD * self.moment_noise_std * self.centred_norm**2
        return noise_floor if self.magnitude_noise is None else max(noise_floor, RELATIVE_SCALE_FLOOR**2)

    @property
    def window_noise_std(self) -> float | None:
        """Standard deviation of the noise on a window's count (the sum of :data:`MAGNITUDE_WINDOW`
        noisy counts). ``None`` without the magnitudes release."""
        if self.magnitude_noise is None:
            return None
        count_std = self.magnitude_noise * (math.sqrt(2.0) if self.laplace else 1.0)
        return count_std * math.sqrt(MAGNITUDE_WINDOW)

    @property
    def magnitude_threshold(self) -> float | None:
        """The noisy count a window of :data:`MAGNITUDE_WINDOW` orders must exceed to set a
        feature's order (:func:`release_magnitudes`): :data:`MAGNITUDE_THRESHOLD` standard
        deviations of the window's noise. ``None`` without the magnitudes release."""
        if self.magnitude_noise is None:
            return None
        return MAGNITUDE_THRESHOLD * self.window_noise_std

    @property
    def distant_magnitude_threshold(self) -> float | None:
        """The noisy count a window must exceed to set an order more than :data:`MAGNITUDE_MARGIN`
        octaves below the median of the significant ones (:func:`release_magnitudes`):
        :func:`magnitude_significance` standard deviations of the window's noise, corrected for
        the windows of all ``d`` features. ``None`` without the magnitudes release."""
        if self.magnitude_noise is None:
            return None
        return magnitude_significance(self.n_features, self.laplace) * self.window_noise_std

    @property
    def resolves_magnitudes(self) -> bool:
        """Whether the magnitudes release can resolve any feature's order at all: the histograms
        count the rows the moments are computed over, so a window holds at most
        :attr:`moment_rows` counts (one entry per row), and with that at or below
        :attr:`magnitude_threshold` no window is significant but by its noise, and every
        feature's order is the fallback of :func:`release_magnitudes`, read from noise. A public
        function of ``n``, ``d`` and the budget; :func:`moment_rows` keeps it what it is on all
        ``n`` rows."""
        return self.magnitude_noise is not None and self.moment_rows > self.magnitude_threshold

    @property
    def clip_norm(self) -> float:
        """``C``, the norm the standardised rows are clipped to (:data:`STANDARDISED_NORM_FACTOR`)."""
        return STANDARDISED_NORM_FACTOR * math.sqrt(self.n_features)


def magnitude_bins(X: np.ndarray) -> np.ndarray:
    """Index ``k + MAGNITUDE_RANGE`` of the binary order of magnitude ``k = round(log2 |x|)`` of
    every entry (clamped to the range), ``-1`` for zeros.

    From the float's own exponent, without a logarithm (three times faster): ``|x| = m 2**e``
    with ``m`` in ``[1/2, 1)`` (``np.frexp``), so ``log2 |x| = e + log2 m`` with ``log2 m`` in
    ``[-1, 0)``, which rounds to ``-1`` exactly when ``m < sqrt(1/2)``. A per-entry map of public
    constants, as before."""
    mantissas, exponents = np.frexp(np.abs(X))
    orders = exponents - (mantissas < _HALF_OCTAVE)
    bins = np.clip(orders, -MAGNITUDE_RANGE, MAGNITUDE_RANGE) + MAGNITUDE_RANGE
    return np.where(X == 0, -1, bins).astype(np.int64)


_HALF_OCTAVE = math.sqrt(0.5)


def magnitude_counts(X: np.ndarray, block: int = 4096) -> np.ndarray:
    """The ``(n_features, 2 * MAGNITUDE_RANGE + 1)`` histograms of :func:`magnitude_bins`, zeros
    left out, counted ``block`` rows at a time (the temporaries stay a block's size, not ``X``'s):
    the numpy reference of the compiled histograms every layout counts
    (:func:`skdpsco.rows.magnitude_counts`, the layouts' ``magnitude_counts``)."""
    n_features = X.shape[1]
    width = 2 * MAGNITUDE_RANGE + 1
    offsets = np.arange(n_features) * width
    counts = np.zeros(n_features * width, dtype=np.int64)
    for start in range(0, X.shape[0], block):
        bins = magnitude_bins(X[start:start + block])
        flat = (bins + offsets)[bins >= 0]
        counts += np.bincount(flat, minlength=counts.size)
    return counts.reshape(n_features, width).astype(float)


def magnitude_sensitivity(n_features: int, laplace: bool) -> float:
    """Replace-one sensitivity of the ``d`` histograms of :func:`magnitude_bins`: a row adds one
    count to at most one bin of each feature, so replacing it moves each feature's histogram by
    at most ``2`` in ``l1`` and ``sqrt(2)`` in ``l2``: ``sqrt(2 d)`` in ``l2``, ``2 d`` in ``l1``
    over all features."""
    return 2.0 * n_features if laplace else math.sqrt(2.0 * n_features)


def plan_scaling(n_samples: int, n_features: int, data_norm: float | None, *, gaussian_mu: float | None = None,
                 pure_epsilon: float | None = None, centred: bool = True,
                 subsample_moments: bool = False, block_sizes=None) -> ScalingPlan:
    """Plan the releases for their share of the budget: ``gaussian_mu`` (``mu``-GDP, ``delta >
    0``) or ``pure_epsilon`` (``delta = 0``); exactly one of them. With ``data_norm=None`` the
    share is split between the magnitudes (:data:`MAGNITUDE_SHARE`) and the moments
    (:data:`SCALING_SHARE`) in proportion, and the moments' bound is ``B = ROW_NORM_FACTOR
    sqrt(d)``. The moment releases (the sums when ``centred``, then the squares) get the same
    noise per coordinate; the sensitivities of :func:`moment_sensitivities` set their events.
    ``subsample_moments``: the moments are computed over the first :func:`moment_rows` rows of the
    fit's random order; with ``block_sizes`` (the sizes of the row blocks in their reading order),
    over the whole leading blocks that cover them (:func:`covered_rows`)."""
    if (gaussian_mu is None) == (pure_epsilon is None):
        raise ValueError("plan_scaling needs exactly one of gaussian_mu and pure_epsilon.")
    laplace = gaussian_mu is None
    magnitudes = data_norm is None
    share = SCALING_SHARE / (SCALING_SHARE + MAGNITUDE_SHARE) if magnitudes else 1.0
    bound = ROW_NORM_FACTOR * math.sqrt(n_features) if magnitudes else float(data_norm)
    sensitivities = moment_sensitivities(n_features, laplace)[0 if centred else 1:]
    events, magnitude_noise = [], None
    if laplace:
        moments_epsilon = share * float(pure_epsilon)
        noise = sum(sensitivities) / moments_epsilon
        if magnitudes:
            rest = (1.0 - share) * float(pure_epsilon)
            magnitude_noise = magnitude_sensitivity(n_features, True) / rest
            events.append(pure_dp_event(rest))
        events += [pure_dp_event(moments_epsilon * s / sum(sensitivities)) for s in sensitivities]
    else:
        mu = float(gaussian_mu)
        noise = math.hypot(*sensitivities) / (math.sqrt(share) * mu)
        if magnitudes:
            magnitude_noise = magnitude_sensitivity(n_features, False) / (math.sqrt(1.0 - share) * mu)
            events.append(gaussian_event(magnitude_noise, magnitude_sensitivity(n_features, False)))
        events += [gaussian_event(noise, s) for s in sensitivities]
    event = events[0] if len(events) == 1 else dp_accounting.ComposedDpEvent(events)
    plan = ScalingPlan(int(n_samples), int(n_features), bound, noise, laplace, event, magnitude_noise, centred)
    if not subsample_moments:
        return plan
    rows = moment_rows(plan)
    if block_sizes is not None:
        rows = covered_rows(block_sizes, rows)
    return replace(plan, moment_rows=rows)


def release_magnitudes(X, plan: ScalingPlan, rng: np.random.Generator) -> np.ndarray:
    """Per-feature power of two ``2**k_j``, the top of the window of :data:`MAGNITUDE_WINDOW`
    adjacent binary orders of magnitude that holds the most entries of feature ``j`` in the noisy
    histograms (:func:`magnitude_bins`, :func:`magnitude_sensitivity`), released through
    :func:`skdpsco._secure.noisy_release` (on a grid with discrete noise in secure mode).

    A window's noisy count must exceed :data:`MAGNITUDE_THRESHOLD` standard deviations of its
    noise to set a feature's order outright, and :func:`magnitude_significance` (corrected for the
    ``d`` times :data:`MAGNITUDE_WINDOWS` windows tested, :attr:`ScalingPlan.distant_magnitude_threshold`)
    to set it more than :data:`MAGNITUDE_MARGIN` octaves below the median order of the significant
    features: a window of pure noise that passes lands at any order alike, and far below the
    feature's values it blows the feature up (a one-hot level in 0.8 % of the rows divided by
    ``2**-16``, ``coef_`` ``-7.7e5``; ``benchmarks/results/rare_column.md``). Requiring the corrected
    threshold of every order instead moved ``anes96``'s ratings (orders one below the median) up to
    the median at epsilon 0.5 and cost 0.01-0.04 of AUC. A feature whose order is not set gets the
    larger of its own noisy order and the median order of the significant features (0 if none): the
    fallback errs towards shrinking, never towards blowing a feature up. With only noise in a
    histogram (a feature that is mostly zero) the noisiest window is an arbitrary power of two,
    and a tiny one would make the feature dominate every clipped row; a median alone
    did that to large features whose window just missed the threshold, the usual case
    at small ``n``: breast_cancer's areas (about 654) divided by ``2**-2`` at ``epsilon = 1``,
    every other feature erased by the clip to ``B``. The median keeps a mostly-zero feature on the
    scale of the others (pixels, counts and ratings share one); a feature's own order, when
    larger, is most often its true one (the window of all its entries is the largest even when not
    significant) and at worst shrinks it. The top of the window, not its middle, errs towards
    shrinking too. Measured in ``benchmarks/results/real_full.md``.

    ``X``: the rows, or their :func:`feature_passes`."""
    counts = feature_passes(X, plan.n_features).magnitude_counts()
    width = counts.shape[1]
    noisy = noisy_release(counts, plan.magnitude_noise, rng, sensitivity=magnitude_sensitivity(plan.n_features, plan.laplace),
                          laplace=plan.laplace, release=release_noise)
    windows = sum(noisy[:, k: width - MAGNITUDE_WINDOW + 1 + k] for k in range(MAGNITUDE_WINDOW))
    top = np.argmax(windows, axis=1)
    largest = windows[np.arange(plan.n_features), top]
    significant = largest > plan.magnitude_threshold
    exponents = top + MAGNITUDE_WINDOW - 1 - MAGNITUDE_RANGE
    fallback = np.floor(np.median(exponents[significant])) if significant.any() else 0.0
    distant = exponents < fallback - MAGNITUDE_MARGIN
    trusted = significant & (~distant | (largest > plan.distant_magnitude_threshold))
    return 2.0 ** np.where(trusted, exponents, np.maximum(exponents, fallback))


def release_moments(rows, plan: ScalingPlan, rng: np.random.Generator,
                    sums: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Noisy per-feature mean and scale of the first ``plan.moment_rows`` of ``rows`` (clipped to
    ``plan.data_norm``; the rows or their :func:`feature_passes`), from their column ``sums`` when
    the pass that clipped them computed those.

    Two releases through :func:`skdpsco._secure.noisy_release` (when ``plan.centred``; the
    second alone otherwise, with a zero mean), on a grid with discrete noise in secure mode:

    1. the sums ``sum_i x_i / B``, giving ``mean = noisy sums B / n``;
    2. the sums of squares ``sum_i u_i**2 / C**2`` of ``u_i = clip_C(x_i - mean)``
       (``C = plan.centred_norm``), giving ``var = noisy sums C**2 / n`` floored at
       ``plan.variance_floor`` (:data:`VARIANCE_THRESHOLD` standard deviations of its noise,
       public), ``scale = sqrt(var)``.

    The floor keeps a feature whose spread the noise cannot resolve from being blown up by a tiny
    or negative estimate: the floor's input is the released (noisy) sum, its level public. The clip to ``C`` biases the spread of features with heavy tails down
    (public rule; :data:`CENTRED_NORM_FACTOR`).

    Returns
    -------
    mean, scale : ndarray of shape (n_features,)
    """
    d, n = plan.n_features, plan.moment_rows
    passes = feature_passes(rows, d).head(n)
    mean_sensitivity, second_sensitivity = moment_sensitivities(d, plan.laplace)
    mean = np.zeros(d)
    if plan.centred:
        sums = (passes.column_sums() if sums is None else sums) / plan.data_norm
        noisy_sums = noisy_release(sums, plan.noise_scale, rng, sensitivity=mean_sensitivity, laplace=plan.laplace,
                                   release=release_noise)
        mean = noisy_sums * plan.data_norm / n
    clip = plan.centred_norm
    squares = passes.centred_square_sums(mean, clip) / clip**2
    noisy_squares = noisy_release(squares, plan.noise_scale, rng, sensitivity=second_sensitivity, laplace=plan.laplace,
                                  release=release_noise)
    second = noisy_squares * clip**2 / n
    variance = np.maximum(second, plan.variance_floor)
    return mean, np.sqrt(variance)


def feature_passes(rows, n_features: int, magnitude_counts: np.ndarray | None = None, pending=None, order=None):
    """The passes of the scaling and of the private row bound over ``rows``
    (:func:`skdpsco.rows.feature_passes`), their histograms over this module's orders of magnitude
    ``[-MAGNITUDE_RANGE, MAGNITUDE_RANGE]``."""
    return fused_rows.feature_passes(rows, n_features, MAGNITUDE_RANGE, magnitude_counts, pending, order)


def fold_scaling(coef: np.ndarray, intercept: np.ndarray, mean: np.ndarray, scale: np.ndarray,
                 clip_norm: float) -> tuple[np.ndarray, np.ndarray]:
    """``coef_``, ``intercept_`` on the clipped rows of a model ``coef @ z + intercept`` trained on
    ``z = (x - mean) / (scale C)``: ``coef / (scale C)`` and ``intercept - coef_ @ mean``.

    Parameters
    ----------
    coef : ndarray of shape (n_outputs, n_features)
    intercept : ndarray of shape (n_outputs,)
    """
    folded = coef / (scale * clip_norm)
    return folded, intercept - folded @ mean
