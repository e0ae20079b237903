"""Privacy accounting on ``dp_accounting`` events.

Every mechanism in skdpsco is described by an immutable :class:`dp_accounting.DpEvent`
under the **replace-one** neighbouring relation (``DESIGN.md``, "Privacy model"), and
converted to (epsilon, delta) here and only here.

Sensitivity convention
----------------------
``dp_accounting`` reads :class:`~dp_accounting.GaussianDpEvent` differently in its two
accountants under ``REPLACE_ONE`` (pinned by ``tests/test_accounting.py``):

* the RDP accountant charges ``alpha / (2 z**2)`` for ``GaussianDpEvent(z)``: ``z`` is the
  noise standard deviation over the full replace-one ``l2``-sensitivity ``Delta`` (the distance
  between the two means), which is the closed form ``alpha Delta**2 / (2 sigma**2)``;
* the PLD accountant reads ``z`` as ``sigma / C`` for a per-record contribution ``C`` and shifts
  the mean by ``2 C`` on replacement, i.e. ``mu = 2 / z``: twice the RDP sensitivity.

skdpsco stores the RDP reading, ``noise_multiplier = sigma / Delta`` with ``Delta`` the
replace-one sensitivity (:func:`gaussian_event`). Its privacy curve is computed here from that
reading (the pair ``N(0, z**2)``, ``N(1, z**2)``; :func:`_mixture_epsilon`), never by the PLD
accountant's own reading of the event.

Conversion
----------
:func:`epsilon_of` converts with every accountant that supports the event and returns the
smallest epsilon (each is a valid upper bound):

* compositions of Gaussian releases and pure-DP events (binary randomized responses,
  :func:`pure_dp_event`): their privacy curve in closed form, a mixture of Gaussian curves over
  the responses' summed privacy loss (:func:`_mixture_epsilon`, every multiplicity applied
  explicitly, within one lattice step per group of the exact epsilon, at a cost that does not
  grow with the number of events); no other accountant is consulted for them, as none can be
  lower than the exact curve (Gaussian releases alone and equal responses alone: their exact
  curves, :func:`exact_gaussian_epsilon`, :func:`exact_randomized_response_epsilon`);
* zCDP and amplification-by-iteration bounds, which are proven in RDP only: the RDP accountant on
  a dense order grid with the conversion of Canonne, Kamath & Steinke 2020, Prop. 12;
* an event that contains :class:`FixedOrderRdpDpEvent` (an RDP bound proven at one order only,
  e.g. Stop-PNSGD, ``feldman.md`` §B4, pitfall D12): at those orders only, never by a PLD.

Why not ``dp_accounting``'s PLD accountant: its version 0.6.0 composes
``SelfComposedDpEvent(RandomizedResponseDpEvent, K)`` once whatever ``K`` (it drops the count for
that event type), so ``epsilon_of(SelfComposedDpEvent(pure_dp_event(1), 10), 1e-6)`` came out 1.0
instead of 10 and, the smallest answer winning, one-vs-rest pure-DP fits reported one class's
epsilon. Two safeguards now: multiplicities are counted by this module, and no accountant's answer
is trusted below an exact value it cannot go under, the exact epsilon of the composition's
Gaussian part (closed-form Gaussian curve, :func:`exact_gaussian_epsilon`) and of each group of
equal randomized responses (exact composition, :func:`exact_randomized_response_epsilon`): an
answer below it raises :class:`AccountingError` instead of being released
(``tests/test_accounting.py`` checks every event type the library emits against independent
conversions).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import attr
import dp_accounting
import numpy as np
from dp_accounting import rdp
from scipy.optimize import brentq
from scipy.fft import next_fast_len
from scipy.special import gammaln, log_ndtr, ndtr

__all__ = [
    "NEIGHBORING_RELATION",
    "AccountingError",
    "exact_gaussian_epsilon",
    "exact_randomized_response_epsilon",
    "amplification_by_iteration_rho",
    "BudgetExceededError",
    "FitRecord",
    "LedgerProcessError",
    "FixedOrderRdpDpEvent",
    "FailureProbabilityDpEvent",
    "PrivacyAccountant",
    "calibrate_noise",
    "calibrate_zcdp_rho",
    "dp_event_from_json",
    "dp_event_to_json",
    "epsilon_of",
    "gaussian_event",
    "gaussian_noise_multiplier",
    "pure_dp_event",
    "DELTA_DIVISOR",
    "ObjectivePerturbationDpEvent",
    "objective_perturbation_epsilon",
    "get_accountant",
    "set_accountant",
    "wang_max_hits",
    "wang_uniform_stability_bound",
    "zcdp_event",
]

NEIGHBORING_RELATION = dp_accounting.NeighboringRelation.REPLACE_ONE
"""The one neighbouring relation of the library: datasets of equal, public size ``n`` that
differ in one row."""

# Dense grid of Renyi orders: zCDP bounds are optimised at alpha = 1 + sqrt(ln(1/delta) / rho),
# which ranges from ~1.1 to ~1e4 over the budgets users ask for.
_RDP_ORDERS = np.unique(
    np.concatenate([np.linspace(1.02, 2.0, 100), np.geomspace(2.0, 1e5, 2000)])
)


def gaussian_event(noise_std: float, sensitivity: float) -> dp_accounting.GaussianDpEvent:
    """Event of one Gaussian release ``f(D) + N(0, noise_std**2 I)``.

    Parameters
    ----------
    noise_std : float
        Standard deviation of the Gaussian noise per coordinate.
    sensitivity : float
        Replace-one ``l2``-sensitivity ``sup ||f(D) - f(D')||_2`` over neighbouring datasets.

    Returns
    -------
    dp_accounting.GaussianDpEvent
        With ``noise_multiplier = noise_std / sensitivity`` (the RDP accountant's reading
        under ``REPLACE_ONE``; see the module docstring).
    """
    if not (noise_std > 0 and sensitivity > 0):
        raise ValueError(
            f"noise_std and sensitivity must be positive; got {noise_std!r}, {sensitivity!r}."
        )
    return dp_accounting.GaussianDpEvent(noise_multiplier=float(noise_std) / float(sensitivity))


def pure_dp_event(epsilon: float) -> dp_accounting.RandomizedResponseDpEvent:
    """Event of a pure ``epsilon``-DP mechanism under replace-one neighbours.

    Binary randomized response that keeps its input with probability ``e**eps / (1 + e**eps)``
    (``noise_parameter = 2 / (1 + e**eps)``): its privacy region contains that of every
    ``epsilon``-DP mechanism (Kairouz, Oh & Viswanath 2015, Thm 2.1), so every divergence the
    accountants bound is at least as large for it. ``dp_accounting``'s RDP accountant supports it
    under ``REPLACE_ONE``; :func:`epsilon_of` returns ``epsilon`` itself for the bare event
    (pure epsilon-DP implies (epsilon, delta)-DP for every delta).
    """
    _check_epsilon(epsilon)
    if not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be finite; got {epsilon!r}.")
    noise = 2.0 / (1.0 + math.exp(epsilon))
    while math.log(2.0 / noise - 1.0) > epsilon:  # round towards more noise: never above epsilon
        noise = math.nextafter(noise, 1.0)
    return dp_accounting.RandomizedResponseDpEvent(noise_parameter=noise, num_buckets=2)


def zcdp_event(rho: float) -> dp_accounting.ZCDpEvent:
    """Event of a mechanism proven ``rho``-zCDP, i.e. ``(alpha, alpha rho)``-RDP for all alpha > 1.

    Amplification-by-iteration bounds (Feldman et al. 2018, Thm 22; ``feldman.md`` §0.4) are
    of this form. Note that FKT20's ``rho`` is ``sqrt(2 rho_zcdp)`` (``feldman.md`` §0.2).
    """
    if not rho >= 0:
        raise ValueError(f"rho must be >= 0; got {rho!r}.")
    return dp_accounting.ZCDpEvent(rho=float(rho))


@attr.s(frozen=True, slots=True, auto_attribs=True)
class FixedOrderRdpDpEvent(dp_accounting.DpEvent):
    """A mechanism proven ``(order, rdp)``-RDP at the single Renyi order ``order`` only.

    Some bounds hold at one order and say nothing about the others, e.g. Stop-PNSGD's
    ``(alpha, 4 alpha L**2 (1 + ln n) / (n sigma**2))``-RDP under ``sigma >= L sqrt(2 alpha
    (alpha - 1))`` (Feldman et al. 2018, Thm 26 corrected; ``feldman.md`` §B4, pitfall D12).
    ``dp_accounting``'s accountants do not know this event (they report it unsupported);
    :func:`epsilon_of` converts it at ``order`` only (``feldman.md`` §0.3: "a fixed-alpha bound
    must use C1/C3 at that alpha only").

    Attributes
    ----------
    order : float
        The Renyi order ``alpha > 1`` at which the bound holds.
    rdp : float
        The bound ``tau >= 0`` on the Renyi divergence of order ``alpha`` between the outputs on
        any two replace-one neighbours.
    """

    order: float
    rdp: float

    def __attrs_post_init__(self):
        if not (math.isfinite(self.order) and self.order > 1):
            raise ValueError(f"order must be a finite Renyi order > 1; got {self.order!r}.")
        if not self.rdp >= 0:
            raise ValueError(f"rdp must be >= 0; got {self.rdp!r}.")


@attr.s(frozen=True, slots=True, auto_attribs=True)
class FailureProbabilityDpEvent(dp_accounting.DpEvent):
    """A mechanism that is at least as private as ``event`` except on a failure event of
    probability at most ``probability`` over its data-independent internal randomness.

    Precisely: the mechanism draws internal randomness ``I`` independently of the data (and of
    the outputs of earlier mechanisms in a composition), and there is a set ``B`` with
    ``P(I in B) <= probability`` such that for every ``I`` outside ``B`` the mechanism run with
    ``I`` satisfies ``event`` on every pair of replace-one neighbours. Example: output
    perturbation calibrated to a sensitivity bound that holds with probability ``1 - gamma`` over
    the sampled indices (Wang et al., Thm 7 / Thm 8; ``wang_holder.md`` §2.3).

    Conversion (:func:`epsilon_of`): the output distribution is the mixture over ``I`` of the
    conditional ones, and the hockey-stick divergence is jointly convex, so for every epsilon
    ``delta(epsilon) <= delta_event(epsilon) + probability``; hence
    ``epsilon_of(FailureProbabilityDpEvent(e, p), delta) = epsilon_of(e, delta - p)``, and
    ``inf`` when ``delta <= p``. In a composition the inner events compose and the failure
    probabilities add (union bound over the failure events).

    Attributes
    ----------
    event : dp_accounting.DpEvent
        The guarantee outside the failure event, in the library convention.
    probability : float
        Bound in ``[0, 1)`` on the probability of the failure event.
    """

    event: dp_accounting.DpEvent
    probability: float

    def __attrs_post_init__(self):
        if not isinstance(self.event, dp_accounting.DpEvent):
            raise TypeError(f"event must be a DpEvent; got {self.event!r}.")
        if not 0 <= self.probability < 1:
            raise ValueError(f"probability must be in [0, 1); got {self.probability!r}.")


def amplification_by_iteration_rho(
    lipschitz: float, steps, batch_sizes, noise_stds
) -> float:
    """zCDP ``rho`` of one pass of projected noisy SGD on disjoint batches, last iterate released.

    Privacy amplification by iteration (Feldman, Mironov, Talwar & Thakurta 2018, Thm 22) in the
    single-difference form of Feldman, Koren & Talwar 2020 (Cor. 2.14, Thm 3.1; ``feldman.md``
    §0.4 ``pabi_rho_z`` and §A1): replacing a row of batch ``t`` shifts step ``t`` by at most
    ``s_t = 2 L eta_t / B_t`` and every later step is a contraction plus Gaussian noise of standard
    deviation ``eta_s sigma_s``, so

        rho = max_t s_t**2 / (2 sum_{s >= t} eta_s**2 sigma_s**2).

    Valid only when every update map is non-expansive: ``eta_t <= 2 / beta`` for a convex
    ``beta``-smooth loss (FMTT Prop. 18); the solvers enforce it.

    Parameters
    ----------
    lipschitz : float
        ``L``, bound on the norm of every per-row gradient on the domain.
    steps, batch_sizes, noise_stds : array-like of shape (T,)
        Step sizes ``eta_t``, batch sizes ``B_t`` (gradients are batch averages) and standard
        deviations ``sigma_t`` of the Gaussian noise added to each averaged gradient.

    Returns
    -------
    float
        ``rho`` of ``rho``-zCDP (FKT's ``rho`` is ``sqrt(2 rho)``).
    """
    steps = np.asarray(steps, dtype=float)
    batch_sizes = np.asarray(batch_sizes, dtype=float)
    noise_stds = np.broadcast_to(np.asarray(noise_stds, dtype=float), steps.shape)
    if not (steps.shape == batch_sizes.shape and steps.ndim == 1 and steps.size > 0):
        raise ValueError("steps and batch_sizes must be non-empty 1-D arrays of equal length.")
    if np.any(steps <= 0) or np.any(batch_sizes < 1) or np.any(noise_stds <= 0):
        raise ValueError("steps and noise_stds must be > 0 and batch sizes >= 1.")
    tail_variance = np.cumsum((steps * noise_stds)[::-1] ** 2)[::-1]
    shift = 2.0 * lipschitz * steps / batch_sizes
    return float(np.max(shift**2 / (2.0 * tail_variance)))


def wang_max_hits(n_samples: int, n_steps: int, failure_probability: float) -> float:
    """Bound ``k_T`` on how often any single row is drawn, except with probability ``gamma``.

    ``T`` indices drawn independently and uniformly from ``n`` rows (Wang, Lei, Ying & Zhang,
    Thm 7; ``wang_holder.md`` §2.2): a row's count is ``Binomial(T, 1/n)`` with mean
    ``mu = T / n``, and the Chernoff bound ``P(X >= (1 + c) mu) <= exp(-c**2 mu / (2 + c))``
    is at most ``gamma / n`` for ``c = c_{gamma,T}``, so by a union bound over the rows
    ``P(max_i count_i >= k_T) <= gamma`` with

        k_T = (T / n) (1 + c_{gamma,T}),
        c_{gamma,T} = max(sqrt(3 n ln(n / gamma) / T), 3 n ln(n / gamma) / T).

    (``c**2 mu / (2 + c) >= c**2 mu / 3`` for ``c <= 1`` and ``>= c mu / 3`` for ``c >= 1``;
    the larger of the two candidates is ``<= 1`` exactly when it is the square root.)
    """
    if not (n_samples >= 1 and n_steps >= 1 and 0 < failure_probability < 1):
        raise ValueError(
            "n_samples and n_steps must be >= 1 and failure_probability in (0, 1); got "
            f"{n_samples!r}, {n_steps!r}, {failure_probability!r}."
        )
    ratio = 3.0 * n_samples * math.log(n_samples / failure_probability) / n_steps
    return n_steps / n_samples * (1.0 + max(math.sqrt(ratio), ratio))


def wang_uniform_stability_bound(
    holder_exponent: float,
    holder_constant: float,
    gradient_bound: float,
    step_size: float,
    n_steps: int,
    max_hits: float,
) -> float:
    """Replace-one sensitivity of the averaged iterate of projected SGD with uniform sampling,
    given that no row is drawn more than ``max_hits`` times.

    Wang, Lei, Ying & Zhang, Thm 7(b) (``wang_holder.md`` §2.2, §6 items 3, 8, 9): SGD from
    ``w_1 = 0`` with one row per step, constant step ``eta < min(1, 1/L)`` on a convex loss whose
    (sub)gradient is ``alpha``-Hoelder with constant ``L``, projected onto a convex domain on
    which every gradient norm is at most ``G``. If the differing row is drawn ``K <= k`` times,
    the proof's recursion with ``p = 1/k`` gives, for every ``t`` and hence for the average
    ``(1/T) sum_{t<=T} w_t`` (convexity of the norm),

        Delta**2 = (1 + 1/k)**k [c_{alpha,2}**2 T eta**(2/(1-alpha)) + 4 G**2 eta**2 (1 + k) k],
        c_{alpha,2}**2 = ((1 - alpha)/(1 + alpha)) (2**-alpha L)**(2/(1-alpha)),

    where the second term bounds the hit steps (gradient difference ``<= 2G``) and the first the
    others (approximate non-expansiveness, Lemma 21; the projection is non-expansive). The
    paper bounds ``(1 + 1/k)**k <= e``; this keeps the exact factor. At ``alpha = 1`` the first
    term is 0 (non-expansiveness for ``eta <= 2/L``); for ``alpha < 1`` it is evaluated as
    ``exp((2/(1-alpha)) ln(2**-alpha L eta))``, which underflows harmlessly to 0 as ``alpha -> 1``
    because ``L eta < 1`` (§6 item 8). ``G`` may be any valid bound on the gradient norms on the
    domain, e.g. the Lipschitz constant (Remark 1, §6 item 9).

    Parameters
    ----------
    holder_exponent, holder_constant : float
        ``alpha`` in ``[0, 1]`` and ``L > 0`` of the loss (:class:`skdpsco.losses.LossConstants`).
    gradient_bound : float
        ``G > 0``.
    step_size : float
        ``eta`` in ``(0, min(1, 1/L))``, the hypothesis of Thm 7.
    n_steps : int
        ``T >= 1``.
    max_hits : float
        ``k > 0``: :func:`wang_max_hits` (Thm 7, holds with probability ``1 - gamma``) or the
        realised largest count of the drawn indices (``wang_holder.md`` §6 item 3).

    Returns
    -------
    float
        ``Delta``.
    """
    alpha, L, G, eta = (float(v) for v in (holder_exponent, holder_constant, gradient_bound, step_size))
    if not 0 <= alpha <= 1:
        raise ValueError(f"holder_exponent must be in [0, 1]; got {holder_exponent!r}.")
    if not (0 < L < math.inf and 0 < G < math.inf):
        raise ValueError(
            f"holder_constant and gradient_bound must be finite and > 0; got {holder_constant!r}, "
            f"{gradient_bound!r}."
        )
    if not 0 < eta < min(1.0, 1.0 / L):
        raise ValueError(f"step_size must be in (0, min(1, 1/L)) = (0, {min(1.0, 1.0 / L):g}); got {step_size!r}.")
    if not (n_steps >= 1 and max_hits > 0):
        raise ValueError(f"n_steps must be >= 1 and max_hits > 0; got {n_steps!r}, {max_hits!r}.")
    k = float(max_hits)
    if alpha == 1.0:
        lemma21 = 0.0
    else:
        exponent = 2.0 / (1.0 - alpha)
        lemma21 = n_steps * (1.0 - alpha) / (1.0 + alpha) * math.exp(exponent * math.log(2.0**-alpha * L * eta))
    hits = 4.0 * G**2 * eta**2 * (1.0 + k) * k
    return math.sqrt(math.exp(k * math.log1p(1.0 / k)) * (lemma21 + hits))


class AccountingError(RuntimeError):
    """Two conversions of one event disagree in a way no valid bound allows: nothing is released."""


def _gaussian_and_randomized_response_parts(event: dp_accounting.DpEvent, count: int = 1):
    """The leaves of a composition of Gaussian releases and binary randomized responses, with
    every multiplicity applied here: ``(sum of count / z**2 over the Gaussian events, {noise_parameter:
    count} of the randomized responses)``, or ``None`` if the event holds any other kind.

    Multiplicities are counted by this function rather than by ``dp_accounting``'s PLD accountant,
    which (version 0.6.0) composes ``SelfComposedDpEvent(RandomizedResponseDpEvent, K)`` once
    whatever ``K`` (its ``_maybe_compose`` ignores ``count`` for that event; reported upstream).
    """
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return 0.0, {}
    if isinstance(event, dp_accounting.GaussianDpEvent):
        z = float(event.noise_multiplier)
        return (math.inf if z == 0 else count / z**2), {}
    if _is_binary_randomized_response(event):
        return 0.0, {float(event.noise_parameter): count}
    if isinstance(event, (dp_accounting.ComposedDpEvent, dp_accounting.SelfComposedDpEvent)):
        inner, multiplier = (event.events, 1) if isinstance(event, dp_accounting.ComposedDpEvent) else ([event.event], event.count)
        precision, responses = 0.0, {}
        for part in inner:
            parts = _gaussian_and_randomized_response_parts(part, count * int(multiplier))
            if parts is None:
                return None
            precision += parts[0]
            for noise, k in parts[1].items():
                responses[noise] = responses.get(noise, 0) + k
        return precision, responses
    return None


def _randomized_response_losses(noise_parameter: float, count: int, negligible: float):
    """The privacy loss of ``count`` equal binary randomized responses under the first distribution
    of their dominating pair: its values ``(count - 2 j) eps_0`` (``j`` responses flipped) with
    their binomial probabilities (:func:`exact_randomized_response_epsilon`), the least probable
    values of total probability at most ``negligible`` left out, and that total.

    Returns
    -------
    (losses, probabilities, left_out)
    """
    losses, log_positive, _ = _response_loss_log_probabilities(math.log(2.0 / noise_parameter - 1.0), count)
    probabilities = np.exp(log_positive)
    least_first = np.argsort(probabilities)
    left_out = least_first[np.cumsum(probabilities[least_first]) <= negligible]
    kept = np.ones(count + 1, dtype=bool)
    kept[left_out] = False
    return losses[kept], probabilities[kept], float(probabilities[left_out].sum())


def _response_loss_log_probabilities(eps0: float, count: int):
    """The privacy loss of ``count`` binary randomized responses of pure epsilon ``eps0``, as
    ``(losses, log_positive, log_negative)``: the losses ``(count - 2 j) eps0`` (``j`` responses
    flipped, decreasing in ``j``) and the logs of their probabilities under the first and the
    second distribution of the dominating pair, ``C(count, j) p**(count - j) q**j`` and ``C(count,
    j) p**j q**(count - j)`` (``p = e**eps0 / (1 + e**eps0)``, ``q = 1 - p``)."""
    j = np.arange(count + 1)
    log_choose = gammaln(count + 1) - gammaln(j + 1) - gammaln(count - j + 1)
    log_p, log_q = -np.logaddexp(0.0, -eps0), -np.logaddexp(0.0, eps0)
    return (count - 2 * j) * eps0, log_choose + (count - j) * log_p + j * log_q, log_choose + j * log_p + (count - j) * log_q


_MIXTURE_BINS = 2**12
"""Lattice points over the range of the randomized responses' summed privacy loss
(:func:`_summed_response_losses`), used when the exact sums outnumber them: each group's losses
are then rounded up by less than one lattice step, so the epsilon of :func:`_mixture_epsilon`
exceeds the exact one by less than (the number of groups) x (their summed loss range) / 4096."""

_MIXTURE_NEGLIGIBLE = 1e-9
"""Probability of the randomized responses' least likely losses left out, as a fraction of
``delta``: added to ``delta(epsilon)`` in full (a left-out loss adds at most its probability)."""

_CONVOLUTION_ERROR = 1e-15
"""Allowance, per lattice point and group, for the floating-point error of an FFT convolution of
probability vectors (about machine epsilon times their norms), added to ``delta(epsilon)``."""


def _summed_response_losses(responses: dict, negligible: float):
    """The summed privacy loss of the groups ``responses`` (``{noise_parameter: count}``) of
    binary randomized responses, independent under the dominating pairs' first distributions:
    every sum exactly when there are at most :data:`_MIXTURE_BINS` of them, otherwise on a
    lattice, every group's loss values rounded *up* to the lattice, then the groups' distributions
    convolved.

    Rounding every loss up makes the lattice distribution stochastically larger than the exact
    sum, which only raises ``delta(epsilon) = E[(1 - e**(epsilon - L))_+]`` (nondecreasing in ``L``):
    a valid upper bound, by less than one lattice step per group in epsilon.

    Returns
    -------
    (losses, probabilities, slack)
        The lattice losses with positive probability, their probabilities, and the probability
        left out plus the convolution's error allowance, to be added to ``delta(epsilon)``.
    """
    if not responses:
        return np.zeros(1), np.ones(1), 0.0
    groups = [
        _randomized_response_losses(noise, count, negligible / len(responses))
        for noise, count in sorted(responses.items())
    ]
    if math.prod(losses.size for losses, _, _ in groups) <= _MIXTURE_BINS:  # few enough: every sum, exactly
        losses, probabilities = np.zeros(1), np.ones(1)
        for group_losses, group_probabilities, _ in groups:
            losses = np.add.outer(losses, group_losses).ravel()
            probabilities = np.multiply.outer(probabilities, group_probabilities).ravel()
        return losses, probabilities, sum(left_out for _, _, left_out in groups)
    span = sum(float(losses.max() - losses.min()) for losses, _, _ in groups)
    step = span / _MIXTURE_BINS if span > 0 else 1.0
    lattices, offset = [], 0
    for losses, group_probabilities, _ in groups:
        index = np.ceil(losses / step).astype(np.int64)
        lattices.append(np.bincount(index - index.min(), weights=group_probabilities))
        offset += int(index.min())
    size = sum(lattice.size for lattice in lattices) - len(lattices) + 1
    transform = np.prod([np.fft.rfft(lattice, next_fast_len(size)) for lattice in lattices], axis=0)
    probabilities = np.maximum(np.fft.irfft(transform, next_fast_len(size))[:size], 0.0)  # round-off below 0: raised
    slack = sum(left_out for _, _, left_out in groups)
    slack += _CONVOLUTION_ERROR * probabilities.size * len(groups)
    positive = np.flatnonzero(probabilities > 0)
    return step * (offset + positive), probabilities[positive], slack


def _mixture_epsilon(gaussian_precision: float, responses: dict, delta: float, lower: float = 0.0) -> float:
    """Epsilon at ``delta`` of ``responses`` (``{noise_parameter: count}`` of binary randomized
    responses) composed with one Gaussian of ``mu**2 = gaussian_precision``: an upper bound within
    one lattice step per group of the exact value (:data:`_MIXTURE_BINS`).

    The Gaussian releases compose exactly into one Gaussian (Gaussian DP, Dong, Roth & Su 2022,
    Cor. 3.3), whose dominating pair is ``N(mu, 1)`` against ``N(0, 1)``; a binary randomized
    response is the dominating pair of its pure epsilon (Kairouz, Oh & Viswanath 2015); and the
    product of dominating pairs dominates the adaptive composition (Zhu, Dong & Wang 2022,
    Thm 10). Every pair here is symmetric, so one direction is the whole curve. The composed privacy
    loss under the first distribution is ``L = G + D``, ``G ~ N(mu**2 / 2, mu**2)`` independent of
    the responses' summed loss ``D`` (:func:`_summed_response_losses`), and

        ``delta(epsilon) = E[(1 - e**(epsilon - L))_+] = sum_i P(D = d_i) delta_G(epsilon - d_i)``,

    ``delta_G(t) = Phi(-t / mu + mu / 2) - e**t Phi(-t / mu - mu / 2)`` the Gaussian's curve (Balle
    & Wang 2018, Thm 8), valid at every real ``t`` (``(1 - e**t)_+`` when ``mu = 0``): a mixture of
    Gaussian curves, evaluated in closed form and solved for ``epsilon``. Unlike a discretised PLD
    (whose pessimistic rounding grows with every composition), the rounding here is once per
    group, and the cost does not depend on ``mu`` or on the counts beyond the binomials' sizes.

    ``lower``, a value the answer cannot be below (:func:`_exact_lower_bound`), only narrows the
    search. Where ``e**t`` would overflow, ``t`` is capped at 700 in the second term: that term is
    subtracted, so the cap (and any underflow of ``Phi``) can only raise ``delta(epsilon)``.
    """
    if math.isinf(gaussian_precision) or any(noise == 0 for noise in responses):
        return math.inf
    losses, probabilities, slack = _summed_response_losses(responses, _MIXTURE_NEGLIGIBLE * delta)
    if slack >= 0.5 * delta:  # delta below the convolution's round-off: left to the other accountants
        return math.inf
    mu = math.sqrt(gaussian_precision)

    def excess(epsilon: float) -> float:
        t = epsilon - losses
        if mu > 0:
            z = t / mu
            curve = ndtr(mu / 2 - z) - np.exp(np.minimum(t, 700.0)) * ndtr(-z - mu / 2)
        else:
            curve = -np.expm1(np.minimum(t, 0.0))
        return float(probabilities @ np.maximum(curve, 0.0)) + slack - delta

    lower = max(float(lower), 0.0)
    if excess(lower) <= 0:
        return lower
    gap = 0.25 * lower + 1.0
    while excess(lower + gap) > 0:
        gap *= 2.0
    return _rounded_up(brentq(excess, lower, lower + gap, xtol=1e-12, rtol=1e-12))


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact epsilon at ``delta`` of one Gaussian release with ``mu = Delta / sigma`` (``mu``-GDP).

    The privacy curve of the Gaussian mechanism (Balle & Wang 2018, Thm 8; ``feldman.md`` §0.3 C4),
    ``delta(eps) = Phi(-eps / mu + mu / 2) - e**eps Phi(-eps / mu - mu / 2)``, decreasing in
    ``eps``, solved for ``eps``. A closed form independent of the accountants: the lower bound of
    :func:`_exact_lower_bound`.
    """
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return math.inf

    def curve(eps: float) -> float:
        return float(ndtr(-eps / mu + mu / 2) - np.exp(eps + log_ndtr(-eps / mu - mu / 2)))

    if curve(0.0) <= delta:
        return 0.0
    upper = 1.0
    while curve(upper) > delta:
        upper *= 2.0
    return _rounded_up(brentq(lambda eps: curve(eps) - delta, 0.0, upper, xtol=1e-12, rtol=1e-12))


def exact_randomized_response_epsilon(noise_parameter: float, count: int, delta: float) -> float:
    """Exact epsilon at ``delta`` of ``count`` binary randomized responses (each pure
    ``eps_0``-DP, ``eps_0 = ln((2 - q) / q)``), composed.

    Their privacy loss is ``(count - 2 j) eps_0`` with probability ``C(count, j) p**(count - j)
    q'**j`` (``p = e**eps_0 / (1 + e**eps_0)``, ``q' = 1 - p``, ``j`` the responses that flip), so
    ``delta(eps) = sum_j C(count, j) [p**(count - j) q'**j - e**eps p**j q'**(count - j)]_+``
    (Kairouz, Oh & Viswanath 2015, Thm 3.3: the exact composition of randomized responses, which
    dominates every ``count``-fold composition of ``eps_0``-DP mechanisms), solved for ``eps`` in
    closed form: between two consecutive losses ``l_(m+1) <= eps <= l_m`` the curve is ``A_m -
    e**eps B_m`` (``A_m``, ``B_m`` the sums of the two bracketed terms over ``j <= m``; a loss equal
    to ``eps`` contributes 0), continuous and decreasing, so the root is ``ln((A_m - delta) / B_m)``
    on the one segment that holds it.
    """
    eps0 = _randomized_response_epsilon(dp_accounting.RandomizedResponseDpEvent(noise_parameter, 2))
    if math.isinf(eps0):
        return math.inf
    loss, log_positive, log_negative = _response_loss_log_probabilities(eps0, count)  # loss decreasing
    positive = loss > 0
    if np.sum(np.exp(log_positive[positive]) - np.exp(log_negative[positive])) <= delta:  # the curve at 0
        return 0.0
    above = np.cumsum(np.exp(log_positive)) - delta  # A_m - delta
    log_below = np.logaddexp.accumulate(log_negative)  # ln B_m
    with np.errstate(divide="ignore", invalid="ignore"):
        roots = np.log(above) - log_below
    next_loss = np.append(loss[1:], -np.inf)
    tolerance = 1e-12 * max(1.0, count * eps0)
    on_segment = (above > 0) & (roots <= loss + tolerance) & (roots >= next_loss - tolerance)
    return _rounded_up(max(float(roots[on_segment].max()), 0.0))


def _rounded_up(root: float) -> float:
    """A root found to ``1e-12`` moved up by more than that: a reported epsilon never falls
    below the exact one by the root finder's tolerance."""
    return float(root) * (1.0 + 1e-10) + 1e-11


def _exact_lower_bound(gaussian_precision: float, responses: dict, delta: float) -> float:
    """A value every valid epsilon of the composition must reach: the exact epsilon of its
    Gaussian part, and of each group of equal randomized responses, whichever is larger. A
    sub-composition's output is a function of the whole composition's, so its exact epsilon
    bounds the whole one's from below (post-processing)."""
    bounds = [exact_gaussian_epsilon(math.sqrt(gaussian_precision), delta)]
    bounds += [exact_randomized_response_epsilon(noise, count, delta) for noise, count in responses.items()]
    return max(bounds)


def _rdp_accountant(orders=_RDP_ORDERS) -> rdp.RdpAccountant:
    return _RememberingRdpAccountant(orders=orders, neighboring_relation=NEIGHBORING_RELATION)


# Leaf events whose RDP dp_accounting evaluates numerically (a sum or a search per order): the
# randomized response's costs about 0.5 s on the dense grid, a sampled Gaussian's 0.1 s.
_REMEMBERED_LEAVES = (
    dp_accounting.RandomizedResponseDpEvent,
    dp_accounting.LaplaceDpEvent,
    dp_accounting.SampledWithoutReplacementDpEvent,
    dp_accounting.SampledWithReplacementDpEvent,
    dp_accounting.PoissonSampledDpEvent,
    dp_accounting.dp_event.RepeatAndSelectDpEvent,
)
_LEAF_RDP: OrderedDict = OrderedDict()  # (leaf, orders, relation) -> its RDP at count 1
_LEAF_RDP_SIZE = 256  # at most 256 vectors of the dense grid: 4.3 MB
_leaf_rdp_lock = threading.Lock()


class _RememberingRdpAccountant(rdp.RdpAccountant):
    """``dp_accounting``'s RDP accountant, which remembers the RDP of the numerically evaluated
    leaves (:data:`_REMEMBERED_LEAVES`) per order grid.

    ``dp_accounting`` composes such a leaf ``count`` times as ``rdp += count * f(leaf, orders)``
    (``rdp = count * f + rdp`` for private selection). This accountant has ``f(leaf, orders)``
    computed once by ``dp_accounting``'s own accountant composing the leaf once on a fresh ledger
    (``0 + 1 * f`` is ``f`` exactly) and adds ``count * f``: the same floating-point operations,
    hence the same RDP to the last bit (``tests/test_accounting.py`` compares both on every event
    the library emits). A ledger's repeated conversions of the same leaves
    (:class:`PrivacyAccountant`) then cost ``compute_epsilon`` only.

    A :class:`~dp_accounting.GaussianDpEvent` (whose ``z`` changes with every fit a ledger records)
    is composed in closed form over the whole grid at once: ``dp_accounting`` evaluates
    ``alpha / (2 * z**2)`` order by order in a Python loop; the same division of each order by the
    same ``2 * z**2``, vectorised, gives the same values to the last bit.
    """

    def __init__(self, orders, neighboring_relation):
        super().__init__(orders=orders, neighboring_relation=neighboring_relation)
        self._grid = (self._orders.tobytes(), neighboring_relation)

    def _maybe_compose(self, event, count, do_compose):
        if do_compose and isinstance(event, dp_accounting.GaussianDpEvent):
            z = float(event.noise_multiplier)
            self._rdp += count * (np.full(self._orders.shape, np.inf) if z == 0 else self._orders / (2 * z**2))
            return None
        if not (do_compose and isinstance(event, _REMEMBERED_LEAVES)):
            return super()._maybe_compose(event, count, do_compose)
        try:
            key = (event, self._grid)
            with _leaf_rdp_lock:
                leaf_rdp = _LEAF_RDP.get(key)
        except TypeError:  # a leaf holding a list (a composition inside a selection)
            return super()._maybe_compose(event, count, do_compose)
        if leaf_rdp is None:
            fresh = rdp.RdpAccountant(orders=self._orders, neighboring_relation=self._grid[1])
            error = fresh._maybe_compose(event, 1, True)
            if error is not None:
                return error
            leaf_rdp = fresh._rdp
            leaf_rdp.flags.writeable = False
            with _leaf_rdp_lock:
                _LEAF_RDP[key] = leaf_rdp
                while len(_LEAF_RDP) > _LEAF_RDP_SIZE:
                    _LEAF_RDP.popitem(last=False)
        self._rdp += count * leaf_rdp
        return None


def _checked_minimum(candidates: dict, lower_bound: float, event) -> float:
    """The smallest of the accountants' epsilons, after checking that none is below
    ``lower_bound`` (the exact epsilon of a sub-composition): one that is has lost part of the
    event, and its answer is not trusted."""
    tolerance = 1e-6 * max(1.0, lower_bound)
    for name, value in candidates.items():
        if value < lower_bound - tolerance:
            raise AccountingError(
                f"The {name} conversion of {event!r} gives epsilon={value:.6g}, below the exact "
                f"epsilon {lower_bound:.6g} of a part of it: an accountant dropped part of the "
                "composition. Nothing is released; please report this."
            )
    return float(min(candidates.values()))


def _check_delta(delta: float) -> None:
    if not (isinstance(delta, (int, float, np.floating)) and 0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1); got {delta!r}.")


# -- objective perturbation (proof in skdpsco.solvers.objective, "Conversion") ----------------------
DELTA_DIVISOR = 4.0
"""Each objective-perturbation release divides delta by 4 in the conversion
(:mod:`skdpsco.solvers.objective`, "Conversion": a factor 2 for the fold ``|Z|``, a factor 2 for
the maximum over the two directions ``d_k``)."""


@attr.s(frozen=True, slots=True, auto_attribs=True)
class ObjectivePerturbationDpEvent(dp_accounting.DpEvent):
    """Objective perturbation: a Gaussian part plus a deterministic epsilon offset.

    The mechanism's privacy-loss is bounded, for every pair of replace-one neighbours, so that
    ``delta(eps) <= DELTA_DIVISOR * delta_gaussian(eps - epsilon_offset)`` for every real ``eps``,
    also inside any adaptive composition (:mod:`skdpsco.solvers.objective`, "Conversion"). Converted by
    :func:`objective_perturbation_epsilon`; ``dp_accounting``'s accountants do not know it.

    Attributes
    ----------
    gaussian : dp_accounting.DpEvent
        Gaussian events in the library convention (:func:`gaussian_event`).
    epsilon_offset : float
        ``eps_0 = log(1 + beta / (n Lambda)) >= 0``, the log-determinant bound.
    """

    gaussian: dp_accounting.DpEvent
    epsilon_offset: float

    def __attrs_post_init__(self):
        if not isinstance(self.gaussian, dp_accounting.DpEvent):
            raise TypeError(f"gaussian must be a DpEvent; got {self.gaussian!r}.")
        if not (math.isfinite(self.epsilon_offset) and self.epsilon_offset >= 0):
            raise ValueError(f"epsilon_offset must be finite and >= 0; got {self.epsilon_offset!r}.")


def _split_objective_perturbation(event: dp_accounting.DpEvent, count: int = 1):
    """Total offset and number of :class:`ObjectivePerturbationDpEvent` s of a composition (with
    multiplicity), and the composition with each replaced by its Gaussian part. Events nested in
    any other wrapper are left in place, where no accountant supports them (fail closed)."""
    if isinstance(event, ObjectivePerturbationDpEvent):
        return count * event.epsilon_offset, count, event.gaussian
    if isinstance(event, dp_accounting.ComposedDpEvent):
        parts = [_split_objective_perturbation(e, count) for e in event.events]
        rest = dp_accounting.ComposedDpEvent([p[2] for p in parts])
        return sum(p[0] for p in parts), sum(p[1] for p in parts), rest
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        offset, k, inner = _split_objective_perturbation(event.event, count * event.count)
        return offset, k, dp_accounting.SelfComposedDpEvent(inner, event.count)
    return 0.0, 0, event


def objective_perturbation_epsilon(event: dp_accounting.DpEvent, delta: float) -> float:
    """Epsilon at ``delta`` of an event that is or composes :class:`ObjectivePerturbationDpEvent` s.

    ``sum eps_0 + epsilon_of(rest, delta / DELTA_DIVISOR**k)`` for ``k`` such events (:mod:`skdpsco.solvers.objective`, "Conversion"); the rest of the composition is converted by
    :func:`epsilon_of`, which calls this function for these events.
    """
    offset, k, rest = _split_objective_perturbation(event)
    return offset + epsilon_of(rest, delta / DELTA_DIVISOR**k)


def epsilon_of(event: dp_accounting.DpEvent, delta: float) -> float:
    """Epsilon spent by ``event`` at ``delta``, with the tightest valid accountant.

    Parameters
    ----------
    event : dp_accounting.DpEvent
        In the library convention (:func:`gaussian_event`, :func:`zcdp_event`, compositions).
    delta : float
        In (0, 1).

    Returns
    -------
    float
        The smallest epsilon among the accountants that support ``event`` (the closed-form
        curve of Gaussians and randomized responses, :func:`_mixture_epsilon`; RDP on a dense
        order grid). ``inf`` for a non-private
        event. If ``event`` is or composes (:class:`~dp_accounting.ComposedDpEvent`,
        :class:`~dp_accounting.SelfComposedDpEvent`) :class:`FixedOrderRdpDpEvent` s, the
        composition is converted at each of their orders only (RDP adds there; a fixed-order
        event of another order counts as ``inf``) and the smallest epsilon is returned.

    Raises
    ------
    ValueError
        If no accountant supports the event.

    Notes
    -----
    A hashable event (every event but a composition, which holds a list) is converted once per
    ``(event, delta)`` and remembered: a fit's event is a function of its public plan, and a
    dense-grid RDP conversion costs milliseconds, more than a small fit. Inside a composition,
    the RDP of each numerically evaluated leaf (randomized response, sampled Gaussians, private
    selection) is remembered per order grid, to the last bit dp-accounting's
    (:class:`_RememberingRdpAccountant`).
    """
    _check_delta(delta)
    try:
        hash(event)
    except TypeError:
        return _epsilon_of(event, float(delta))
    return _remembered_epsilon_of(event, float(delta))


def _epsilon_of(event: dp_accounting.DpEvent, delta: float) -> float:
    """:func:`epsilon_of` (same parameters), computed."""
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return 0.0
    if _is_binary_randomized_response(event):
        return _randomized_response_epsilon(event)
    if _contains(event, ObjectivePerturbationDpEvent):
        return objective_perturbation_epsilon(event, delta)
    failure, event = _split_failure_probability(event)
    if failure:
        return epsilon_of(event, delta - failure) if delta > failure else math.inf
    fixed, rest = _split_fixed_order(event)
    if fixed:
        return _fixed_order_epsilon(fixed, rest, delta)
    if _contains(event, dp_accounting.SampledWithoutReplacementDpEvent):
        return _rdp_only_epsilon(event, delta, _SAMPLED_RDP_ORDERS)
    if _contains(event, dp_accounting.dp_event.RepeatAndSelectDpEvent):
        return _rdp_only_epsilon(event, delta, _SELECTION_RDP_ORDERS)
    parts = _gaussian_and_randomized_response_parts(event)
    if parts is None:
        accountant = _rdp_accountant()
        if not accountant.supports(event):
            raise ValueError(f"No accountant supports the event {event!r} under REPLACE_ONE.")
        return float(accountant.compose(event).get_epsilon(delta))
    precision, responses = parts
    if not responses:  # Gaussians only: one Gaussian of mu**2 = precision, converted exactly
        return exact_gaussian_epsilon(math.sqrt(precision), delta)
    if precision == 0 and len(responses) == 1:  # equal randomized responses only: exact too
        ((noise, count),) = responses.items()
        return exact_randomized_response_epsilon(noise, count, delta)
    # The closed-form curve is exact, or above the exact curve by one lattice step per group of
    # responses: no accountant's answer can be lower by more, and the RDP conversion (a dense order
    # grid) would cost more than the curve itself.
    lower = _exact_lower_bound(precision, responses, delta)
    return _checked_minimum({"mixture": _mixture_epsilon(precision, responses, delta, lower)}, lower, event)


_remembered_epsilon_of = lru_cache(maxsize=1024)(_epsilon_of)
""":func:`_epsilon_of` of hashable events, remembered (:func:`epsilon_of`, Notes)."""


def _is_binary_randomized_response(event: dp_accounting.DpEvent) -> bool:
    return isinstance(event, dp_accounting.RandomizedResponseDpEvent) and event.num_buckets == 2


def _randomized_response_epsilon(event: dp_accounting.RandomizedResponseDpEvent) -> float:
    """Exact pure epsilon of binary randomized response with ``noise_parameter = q``: the
    reported bucket is the input's with probability ``1 - q / 2``, so ``eps = ln((2 - q) / q)``."""
    q = float(event.noise_parameter)
    return math.inf if q == 0 else math.log(2.0 / q - 1.0)


def _split_fixed_order(event: dp_accounting.DpEvent, count: int = 1):
    """The :class:`FixedOrderRdpDpEvent` s of a composition, each with its multiplicity, and the
    rest of the composition (the fixed-order events replaced by no-ops). Events nested in any
    other wrapper are left in place, where no accountant supports them."""
    if isinstance(event, FixedOrderRdpDpEvent):
        return [(event, count)], dp_accounting.NoOpDpEvent()
    if isinstance(event, dp_accounting.ComposedDpEvent):
        parts = [_split_fixed_order(e, count) for e in event.events]
        fixed = [item for part, _ in parts for item in part]
        return fixed, dp_accounting.ComposedDpEvent([rest for _, rest in parts])
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        fixed, rest = _split_fixed_order(event.event, count * event.count)
        return fixed, dp_accounting.SelfComposedDpEvent(rest, event.count)
    return [], event


def _fixed_order_epsilon(fixed, rest: dp_accounting.DpEvent, delta: float) -> float:
    """Epsilon of a composition holding fixed-order RDP events, at their orders only.

    At each distinct order ``alpha`` of ``fixed``, RDP composes additively: the fixed-order
    events of order ``alpha`` contribute their bound (times their multiplicity), those of any
    other order ``+inf`` (they say nothing at ``alpha``), and ``rest`` its RDP at ``alpha``
    (``dp_accounting``'s RDP accountant on the single order; Gaussian and zCDP events have RDP at
    every order). Each total is converted by Canonne, Kamath & Steinke 2020, Prop. 12
    (``dp_accounting.rdp.compute_epsilon``, ``feldman.md`` §0.3 C3) and the smallest epsilon is
    returned: each is a valid bound. The PLD accountant is never used for such events.
    """
    epsilons = []
    for order in sorted({event.order for event, _ in fixed}):
        accountant = _rdp_accountant(orders=[order])
        if not accountant.supports(rest):
            raise ValueError(f"No accountant supports the event {rest!r} under REPLACE_ONE.")
        total = float(accountant.compose(rest).rdp[0])
        for event, count in fixed:
            if count:
                total += count * event.rdp if event.order == order else math.inf
        epsilons.append(rdp.compute_epsilon([order], [total], delta)[0])
    return float(min(epsilons))


def _split_failure_probability(event: dp_accounting.DpEvent, count: int = 1):
    """Total failure probability of the :class:`FailureProbabilityDpEvent` s of a composition
    (each counted with its multiplicity) and the composition with every such wrapper replaced by
    its inner event. Wrappers nested in any other event are left in place, where no accountant
    supports them."""
    if isinstance(event, FailureProbabilityDpEvent):
        failure, inner = _split_failure_probability(event.event, count)
        return count * event.probability + failure, inner
    if isinstance(event, dp_accounting.ComposedDpEvent):
        parts = [_split_failure_probability(e, count) for e in event.events]
        return sum(p for p, _ in parts), dp_accounting.ComposedDpEvent([e for _, e in parts])
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        failure, inner = _split_failure_probability(event.event, count * event.count)
        return failure, dp_accounting.SelfComposedDpEvent(inner, event.count)
    return 0.0, event


# Renyi orders for events with sampling without replacement. dp_accounting evaluates the bound of
# Wang, Balle & Kasiviswanathan 2019 (Thm 27) with O(alpha**2) work per integer order up to 256
# and O(alpha) above (non-integer orders interpolate two integers): the dense grid takes minutes,
# this one a fraction of a second. Integer orders where the optimum lies for epsilon in about
# [0.05, 20]; 257 rather than 256 takes the O(alpha) branch.
_SAMPLED_RDP_ORDERS = np.concatenate(
    [[1.25, 1.5, 1.75], np.arange(2, 33), np.arange(36, 65, 4), [80, 96, 128, 257, 512, 1024, 2048, 4096]]
).astype(float)


def _contains(event: dp_accounting.DpEvent, kind: type) -> bool:
    """Whether ``event`` is, or composes, an event of type ``kind``."""
    if isinstance(event, kind):
        return True
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return any(_contains(e, kind) for e in event.events)
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return _contains(event.event, kind)
    return False


# Renyi orders for events with private selection (Papernot & Steinke 2022, Thm 2): dp_accounting
# evaluates it with a pass over the whole grid per order, O(m**2) on the dense grid (about 1 s);
# on this grid of 170 orders, measured for rho in [1e-4, 1], mean in [2, 100], shape in {0, 1, 3},
# the epsilon is at most 0.03 % above the dense one except 0.9 % at rho = 1, mean = 2 (never below:
# every order grid gives a valid bound; tests/test_model_selection.py), and a few milliseconds.
_SELECTION_RDP_ORDERS = np.unique(np.concatenate([np.linspace(1.05, 2.0, 20), np.geomspace(2.0, 1e4, 150)]))


def _rdp_only_epsilon(event: dp_accounting.DpEvent, delta: float, orders: np.ndarray) -> float:
    """Epsilon of an event only the RDP accountant supports (sampling without replacement,
    private selection), on ``orders``, CKS20 Prop. 12 conversion."""
    accountant = _rdp_accountant(orders)
    if not accountant.supports(event):
        raise ValueError(f"No accountant supports the event {event!r} under REPLACE_ONE.")
    return float(accountant.compose(event).get_epsilon(delta))


def _bisect_feasible(
    is_feasible: Callable[[float], bool], infeasible: float, feasible: float, rtol: float
) -> float:
    """Bisect in log-space between an infeasible and a feasible point; return a feasible one."""
    for _ in range(200):
        if abs(feasible - infeasible) <= rtol * abs(feasible):
            break
        mid = math.sqrt(feasible * infeasible)
        if is_feasible(mid):
            feasible = mid
        else:
            infeasible = mid
    return feasible


def calibrate_noise(
    make_event: Callable[[float], dp_accounting.DpEvent],
    epsilon: float,
    delta: float,
    *,
    initial: float = 1.0,
    rtol: float = 1e-6,
) -> float:
    """Smallest noise parameter whose event meets (epsilon, delta), by bisection.

    ``make_event(x)`` must be private for large ``x`` and its epsilon non-increasing in ``x``
    (more noise, less privacy loss). The returned ``x`` always satisfies
    ``epsilon_of(make_event(x), delta) <= epsilon`` and is within ``rtol`` (relative) of the
    smallest such value.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)

    def meets(x: float) -> bool:
        return epsilon_of(make_event(x), delta) <= epsilon

    hi = float(initial)
    while not meets(hi):
        hi *= 2.0
        if hi > 1e12:
            raise ValueError("No noise level meets the target privacy; the event is not private.")
    lo = hi / 2.0
    while meets(lo):
        hi, lo = lo, lo / 2.0
        if lo < 1e-12:
            return hi
    return _bisect_feasible(meets, lo, hi, rtol)


@lru_cache(maxsize=256)
def gaussian_noise_multiplier(epsilon: float, delta: float) -> float:
    """Smallest ``sigma / Delta`` of one Gaussian release that is (epsilon, delta)-DP.

    One Gaussian release with replace-one sensitivity ``Delta`` meets (epsilon, delta) exactly
    when its noise is ``sigma = gaussian_noise_multiplier(epsilon, delta) * Delta``: the event
    depends on ``sigma / Delta`` only, so every solver that releases Gaussians calibrates
    through this one cached bisection (:func:`calibrate_noise` on ``gaussian_event(z, 1)``,
    converted exactly by :func:`exact_gaussian_epsilon`). ``1 / z`` is the ``mu`` of ``mu``-GDP (``feldman.md``
    §0.3, C4).
    """
    return calibrate_noise(lambda z: gaussian_event(z, 1.0), epsilon, delta)


@lru_cache(maxsize=256)
def calibrate_zcdp_rho(epsilon: float, delta: float, *, rtol: float = 1e-9) -> float:
    """Largest ``rho`` such that ``rho``-zCDP implies (epsilon, delta)-DP.

    Conversion: RDP accountant, Canonne–Kamath–Steinke 2020 Prop. 12 (``feldman.md`` §0.3, C3),
    minimised over the order grid. Reference values are the fixtures of ``feldman.md`` §0.3.
    The conversion ``eps(rho) = min_a a rho + log(1 - 1/a) - log(delta a) / (a - 1)`` (the RDP
    accountant's formula, orders ``a > 1.01`` of its grid) is inverted in closed form: ``rho`` meets
    epsilon at some order ``a`` iff ``rho <= (eps - log(1 - 1/a) + log(delta a) / (a - 1)) / a``,
    so the largest ``rho`` is the maximum of that over the grid, checked against
    :func:`epsilon_of` (a bisection to ``rtol`` if rounding put it above). Remembered per
    ``(epsilon, delta, rtol)``: every plan of a zCDP solver starts here.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)
    orders = _RDP_ORDERS[_RDP_ORDERS > 1.01]
    per_order = (epsilon - np.log1p(-1.0 / orders) + np.log(delta * orders) / (orders - 1.0)) / orders
    rho = float(per_order.max()) * (1.0 - 1e-12)
    if rho > 0 and epsilon_of(zcdp_event(rho), delta) <= epsilon:
        return rho
    # Work on x = 1 / rho so that "larger x is more private", as in calibrate_noise.
    inverse_rho = calibrate_noise(lambda x: zcdp_event(1.0 / x), epsilon, delta, rtol=rtol)
    return 1.0 / inverse_rho


def _check_epsilon(epsilon: float) -> None:
    if not (isinstance(epsilon, (int, float, np.floating)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0; got {epsilon!r}.")


# -- a JSON form of events ---------------------------------------------------------------------------
def _event_types() -> dict:
    kinds = [
        kind for kind in vars(dp_accounting.dp_event).values()
        if isinstance(kind, type) and issubclass(kind, dp_accounting.DpEvent) and kind is not dp_accounting.DpEvent
    ]
    kinds += [FixedOrderRdpDpEvent, FailureProbabilityDpEvent, ObjectivePerturbationDpEvent]
    return {kind.__name__: kind for kind in kinds}


_EVENT_TYPES = _event_types()
"""The event classes :func:`dp_event_from_json` may build, by name: ``dp_accounting``'s and
skdpsco's, nothing else."""


def dp_event_to_json(event: dp_accounting.DpEvent) -> dict:
    """The JSON form of ``event``: ``{"type": class name, field: value, ...}``, nested.

    Fields are read with ``attrs`` (every ``dp_accounting`` event and every skdpsco event is an
    ``attrs`` class). Values keep their Python type through :func:`dp_event_from_json`: ints stay
    ints, floats are written with ``repr`` (which reads back to the same double), non-finite floats
    as ``{"float": "inf"}``, tuples as ``{"tuple": [...]}`` and lists as lists.

    Raises
    ------
    TypeError
        If ``event``, or an event or value inside it, is of a type this form does not cover.
    """
    kind = type(event)
    if _EVENT_TYPES.get(kind.__name__) is not kind:
        raise TypeError(f"No JSON form for events of type {kind.__module__}.{kind.__qualname__}.")
    form = {"type": kind.__name__}
    for field in attr.fields(kind):
        form[field.name] = _value_to_json(getattr(event, field.name))
    return form


def _value_to_json(value):
    if isinstance(value, dp_accounting.DpEvent):
        return dp_event_to_json(value)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, list):
        return [_value_to_json(item) for item in value]
    if isinstance(value, tuple):
        return {"tuple": [_value_to_json(item) for item in value]}
    raise TypeError(f"No JSON form for the value {value!r} of type {type(value).__name__}.")


def dp_event_from_json(form: dict) -> dp_accounting.DpEvent:
    """The event of a JSON form written by :func:`dp_event_to_json` (parsed, never evaluated:
    only the event classes of ``dp_accounting`` and skdpsco are built, by their constructors).

    Raises
    ------
    ValueError
        If ``form`` is not such a form.
    """
    if not (isinstance(form, dict) and isinstance(form.get("type"), str)):
        raise ValueError(f"Not the JSON form of an event: {form!r}.")
    kind = _EVENT_TYPES.get(form["type"])
    if kind is None:
        raise ValueError(f"Unknown event type {form['type']!r} in a JSON form.")
    fields = {field.name for field in attr.fields(kind)}
    values = {name: value for name, value in form.items() if name != "type"}
    if not set(values) <= fields:
        raise ValueError(f"Unknown fields {sorted(set(values) - fields)} for {form['type']}.")
    return kind(**{name: _value_from_json(value) for name, value in values.items()})


def _value_from_json(value):
    if isinstance(value, list):
        return [_value_from_json(item) for item in value]
    if isinstance(value, dict):
        if "type" in value:
            return dp_event_from_json(value)
        if set(value) == {"tuple"} and isinstance(value["tuple"], list):
            return tuple(_value_from_json(item) for item in value["tuple"])
        if set(value) == {"float"} and value["float"] in ("inf", "-inf", "nan"):
            return float(value["float"])
        raise ValueError(f"Not a JSON form of a value: {value!r}.")
    return value


class _Composition:
    """A composition of events kept in a form whose size does not grow with the number of events
    composed, with the same epsilon under :func:`epsilon_of` (up to floating-point rounding).

    :func:`epsilon_of` converts a composition (:class:`~dp_accounting.ComposedDpEvent`,
    :class:`~dp_accounting.SelfComposedDpEvent`) through its leaves with their multiplicities only:
    every accountant it uses adds a leaf's contribution (``mu**2`` of the Gaussian releases,
    Dong, Roth & Su 2022, Cor. 3.3; Renyi divergences, Mironov 2017, Prop. 1; the privacy loss
    distributions of equal randomized responses, ``self_compose``; failure probabilities, union
    bound; objective-perturbation offsets and ``delta`` divisors), never their order or grouping.
    So the composition of ``m`` events is held as

    * the total Gaussian precision ``sum count / z**2`` of its Gaussian leaves, released as one
      :class:`~dp_accounting.GaussianDpEvent` of ``z = 1 / sqrt(precision)`` (the Gaussian
      releases compose exactly into one);
    * the total ``rho`` and ``xi`` of its zCDP leaves, one :class:`~dp_accounting.ZCDpEvent`
      (RDP adds: ``sum (xi + rho alpha)`` at every order);
    * every other leaf (randomized responses, fixed-order RDP bounds, failure-probability and
      objective-perturbation wrappers, sampled or selected events), once per distinct leaf with
      its count, as ``SelfComposedDpEvent(leaf, count)``,

    and :meth:`event` is that bounded composition: adding an event costs its own size, and
    converting the whole costs one :func:`epsilon_of` of a composition of the distinct leaves,
    whatever ``m``. No-op leaves are dropped (they contribute nothing to any accountant).
    """

    __slots__ = ("precision", "rho", "xi", "leaves")

    def __init__(self):
        self.precision = 0.0
        self.rho = self.xi = 0.0
        self.leaves: dict = {}  # key -> [leaf, count], in the order first seen

    def add(self, event: dp_accounting.DpEvent, count: int = 1) -> None:
        """Compose ``event`` ``count`` times into this composition."""
        if isinstance(event, dp_accounting.ComposedDpEvent):
            for part in event.events:
                self.add(part, count)
        elif isinstance(event, dp_accounting.SelfComposedDpEvent):
            self.add(event.event, count * int(event.count))
        elif isinstance(event, dp_accounting.GaussianDpEvent):
            z = float(event.noise_multiplier)
            self.precision += math.inf if z == 0 else count / z**2
        elif isinstance(event, dp_accounting.ZCDpEvent):
            self.rho += count * float(event.rho)
            self.xi += count * float(event.xi)
        elif not isinstance(event, dp_accounting.NoOpDpEvent):
            key = _leaf_key(event)
            entry = self.leaves.get(key)
            if entry is None:
                self.leaves[key] = [event, count]
            else:
                entry[1] += count

    def copy(self) -> _Composition:
        other = _Composition()
        other.precision, other.rho, other.xi = self.precision, self.rho, self.xi
        other.leaves = {key: list(entry) for key, entry in self.leaves.items()}
        return other

    def event(self) -> dp_accounting.ComposedDpEvent:
        """The bounded composition, as one event for :func:`epsilon_of`."""
        events = []
        if self.precision > 0:
            events.append(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(self.precision)))
        if self.rho or self.xi:
            events.append(dp_accounting.ZCDpEvent(rho=self.rho, xi=self.xi))
        for leaf, count in self.leaves.values():
            events.append(leaf if count == 1 else dp_accounting.SelfComposedDpEvent(leaf, count))
        return dp_accounting.ComposedDpEvent(events)


def _leaf_key(event: dp_accounting.DpEvent):
    """A hashable key equal for equal leaves: the canonical JSON form (:func:`dp_event_to_json`),
    or the object's identity for an event that has none (it is then kept, never merged)."""
    try:
        return json.dumps(dp_event_to_json(event), sort_keys=True, allow_nan=False)
    except TypeError:
        return ("object", id(event))


class BudgetExceededError(ValueError):
    """A fit would exceed the privacy budget of its accountant; nothing was fitted or recorded."""


class LedgerProcessError(RuntimeError):
    """An in-memory ledger was charged in a process other than the one that created it (a copy,
    whose records the original would never see); nothing was fitted or recorded."""


@dataclass(frozen=True)
class FitRecord:
    """One accounted release: who made it, with which parameters, and its event.

    ``time`` is the Unix time of the record, ``dataset`` the label of the ledger that recorded it
    (``PrivacyAccountant(dataset=...)``). Records read from a ledger file carry ``params`` as
    JSON gave them back (values without a JSON form as their ``repr``).
    """

    estimator: str
    params: dict
    event: dp_accounting.DpEvent
    epsilon: float
    delta: float
    time: float | None = None
    dataset: str | None = None


# A ledger file (PrivacyAccountant(path=...)): SQLite, one row per fit.
_LEDGER_FORMAT = "1"
_LEDGER_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS fits (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
    "estimator TEXT NOT NULL, params TEXT NOT NULL, event TEXT NOT NULL, epsilon REAL NOT NULL, "
    "delta REAL NOT NULL, dataset TEXT, pid INTEGER NOT NULL)",
)
_LEDGER_BUSY_TIMEOUT = 600.0  # seconds a charge waits for another process's check and record
_inherited_connections: list = []  # connections of a parent process, never used nor closed after fork


def _ledger_meta(connection: sqlite3.Connection) -> dict:
    """The ``meta`` table of a ledger file as a dict (empty for a new file)."""
    if connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
        return {}
    return dict(connection.execute("SELECT key, value FROM meta"))


def _params_json(params: dict) -> str:
    """The estimator's parameters as JSON, values without a JSON form as their ``repr``."""
    try:
        return json.dumps(params, default=repr)
    except (TypeError, ValueError):  # e.g. a dict with tuple keys inside
        return json.dumps({name: repr(value) for name, value in params.items()})


class PrivacyAccountant:
    """Ledger of every accounted fit, with an optional total (epsilon, delta) budget.

    All skdpsco estimators record the event of each fit with an accountant: the one passed as
    their ``accountant`` parameter, else the shared default (:func:`get_accountant`). The
    composition of everything recorded is converted with :func:`epsilon_of`.

    Parameters
    ----------
    epsilon : float or None, default=None
        Total epsilon budget. ``None``: no budget (the ledger only records).
    delta : float or None, default=None
        The delta at which the budget is measured. Required when ``epsilon`` is given.
    path : str or os.PathLike or None, default=None
        A file holding the ledger (SQLite), shared by every process that opens it: the workers
        of a parallel search, other scripts, a later session. ``None``: the ledger lives in this
        process's memory. A new file stores the budget given here; an existing file keeps its
        own, which ``PrivacyAccountant(path=...)`` adopts and any other budget is refused for.
    dataset : str or None, default=None
        A label recorded with every fit (e.g. the name of the dataset the ledger accounts for).

    Notes
    -----
    * A fit is checked against the budget **before it reads the data**: if the composition of
      the recorded events and the new one would exceed ``epsilon`` at ``delta``, the fit raises
      :class:`BudgetExceededError`; nothing is fitted and nothing is recorded. A fit that has
      started training is charged even if it later fails.
    * Used as a context manager, the accountant is the shared default inside the block.
    * :func:`sklearn.base.clone` returns the same accountant (``__sklearn_clone__``), so the fits
      of ``GridSearchCV`` or ``cross_val_score`` on clones are recorded on one ledger.
    * **Processes.** With ``path``, each check and record is one ``BEGIN IMMEDIATE`` transaction
      of the file (write-ahead log, ``synchronous=FULL``): it reads the fits other processes
      recorded since, checks the budget against all of them and records the fit, so processes
      charging one file at once are serialised and never overrun its budget, and the record is
      on disk before the fit reads a row (a process killed during training leaves its charge).
      A pickled file ledger (e.g. sent to a ``joblib`` worker of ``GridSearchCV(n_jobs=2)``)
      reopens the file. An in-memory ledger can only record in the process that created it: a
      copy of it charged in another process (a worker of a process-based ``n_jobs`` backend, a
      pickle loaded by another script) raises :class:`LedgerProcessError` before the fit reads
      any data, since its record would never reach the original and its budget could not be
      enforced. The shared default that skdpsco creates (:func:`get_accountant`) is exempt: it
      records in whichever process fits, each process having its own, so fits in workers are
      not on the parent's default (:func:`set_accountant` and ``with ledger:`` set the default
      of their own process only).
    * Thread-safe: checking and recording are one atomic step.
    * The composition of the records is kept up to date as they arrive, in a form whose size
      does not grow with their number (:class:`_Composition`: one Gaussian, one zCDP event and
      the distinct other events with their counts), so a budget check or ``spent()`` costs one
      :func:`epsilon_of` of that form, the same after ten fits or ten thousand, and gives the
      epsilon of the whole history (``tests/test_ledger.py``). A file ledger reads only the rows
      recorded since it last read the file. Copies and pickles of an in-memory ledger hold the
      records and rebuild it.
    """

    def __init__(
        self,
        epsilon: float | None = None,
        delta: float | None = None,
        *,
        path: str | os.PathLike | None = None,
        dataset: str | None = None,
    ):
        if epsilon is not None:
            _check_epsilon(epsilon)
            if delta is None:
                raise ValueError("delta is required with an epsilon budget; e.g. delta=1e-5.")
        if delta is not None:
            _check_delta(delta)
        if not (dataset is None or isinstance(dataset, str)):
            raise TypeError(f"dataset must be a str or None; got {type(dataset).__name__}.")
        self.epsilon = epsilon
        self.delta = delta
        self.path = None if path is None else os.path.abspath(os.fspath(path))
        self.dataset = dataset
        self._owner: int | None = os.getpid()
        self._records: list[FitRecord] = []
        self._lock = threading.RLock()
        self._previous_defaults: list[PrivacyAccountant] = []
        self._forget_composition()
        self._connection, self._connection_pid = None, None
        if self.path is not None:
            self._open_file()

    def _forget_composition(self) -> None:
        """Rebuild the running composition of the records (after a reset or unpickling)."""
        self._composition = _Composition()
        self._deltas = 0.0
        for record in self._records:
            self._composition.add(record.event)
            self._deltas += record.delta
        self._epsilons: dict[float, float] = {}  # delta -> epsilon of the records, remembered
        self._read_id, self._generation = 0, None  # of a ledger file: the last row read, and its reset count

    # -- sklearn / copy protocol ---------------------------------------------------------
    def __sklearn_clone__(self):
        return self

    def __getstate__(self):
        state = {
            "epsilon": self.epsilon, "delta": self.delta, "path": self.path, "dataset": self.dataset,
            "_owner": self._owner, "_previous_defaults": [],
        }
        if self.path is None:  # the file is the ledger of a file ledger
            with self._lock:
                state["_records"] = list(self._records)  # a copy is a ledger of its own
        return state

    def __setstate__(self, state):
        state = {"path": None, "dataset": None, "_records": [], **state}
        state.setdefault("_owner", os.getpid())  # pickled before process checks: as before
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._connection, self._connection_pid = None, None
        self._forget_composition()

    def __repr__(self) -> str:
        budget = "no budget" if self.epsilon is None else f"budget=({self.epsilon}, {self.delta})"
        if self.path is not None:
            return f"PrivacyAccountant(path={self.path!r}, {budget})"
        return f"PrivacyAccountant({budget}, fits={len(self._records)})"

    # -- the ledger file ------------------------------------------------------------------
    def _file(self) -> sqlite3.Connection:
        """This process's connection to the ledger file (a forked child opens its own)."""
        if self._connection_pid != os.getpid():
            if self._connection is not None:
                _inherited_connections.append(self._connection)
            connection = sqlite3.connect(
                self.path, timeout=_LEDGER_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
            )
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            self._connection, self._connection_pid = connection, os.getpid()
        return self._connection

    def _transaction(self, kind: str = ""):
        """``with self._transaction("IMMEDIATE") as connection:``, committed at the end of the
        block, rolled back if it raises."""
        return _Transaction(self._file(), kind)

    def _open_file(self) -> None:
        """Create the ledger file, or check the budget it holds against this one's."""
        mine = {name: json.dumps(None if value is None else float(value))
                for name, value in (("epsilon", self.epsilon), ("delta", self.delta))}
        with self._transaction() as connection:  # a read: no wait for another process's charge
            meta = _ledger_meta(connection)
        if not meta:
            with self._transaction("IMMEDIATE") as connection:
                for statement in _LEDGER_SCHEMA:
                    connection.execute(statement)
                meta = _ledger_meta(connection)
                if not meta:
                    connection.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)",
                        [("format", _LEDGER_FORMAT), ("generation", "0"), *mine.items()],
                    )
                    return
        if meta.get("format") != _LEDGER_FORMAT:
            raise ValueError(f"{self.path} is not a ledger file of format {_LEDGER_FORMAT} (meta: {meta}).")
        theirs = (json.loads(meta["epsilon"]), json.loads(meta["delta"]))
        if (self.epsilon, self.delta) == (None, None):
            self.epsilon, self.delta = theirs
        elif (self.epsilon, self.delta) != theirs:
            raise ValueError(
                f"The ledger file {self.path} holds the budget epsilon={theirs[0]}, delta={theirs[1]}; "
                f"it was opened with epsilon={self.epsilon}, delta={self.delta}. Open it with "
                f"PrivacyAccountant(path={self.path!r}) to charge its own budget."
            )

    def _read_new_rows(self, connection: sqlite3.Connection) -> None:
        """Add the rows recorded in the file since the last read (all of them after a reset)."""
        (generation,) = connection.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        if generation != self._generation:
            self._records = []
            self._forget_composition()
            self._generation = generation
        rows = connection.execute(
            "SELECT id, time, estimator, params, event, epsilon, delta, dataset FROM fits WHERE id > ? ORDER BY id",
            (self._read_id,),
        ).fetchall()
        for row_id, when, estimator, params, event, epsilon, delta, dataset in rows:
            record = FitRecord(
                estimator, json.loads(params), dp_event_from_json(json.loads(event)), epsilon, delta, when, dataset
            )
            self._records.append(record)
            self._composition.add(record.event)
            self._deltas += record.delta
            self._read_id = row_id
        if rows:
            self._epsilons = {}

    def _refresh(self) -> None:
        """Read what other processes recorded in the ledger file (nothing to do in memory)."""
        if self.path is not None:
            with self._transaction() as connection:
                self._read_new_rows(connection)

    # -- ledger -----------------------------------------------------------------------------
    @property
    def history(self) -> tuple[FitRecord, ...]:
        """The recorded fits, oldest first (of every process, for a ledger file)."""
        with self._lock:
            self._refresh()
            return tuple(self._records)

    def _epsilon_at(self, delta: float) -> float:
        """:func:`epsilon_of` of the composition of the records at ``delta``, remembered until
        the next record."""
        epsilon = self._epsilons.get(delta)
        if epsilon is None:
            epsilon = self._epsilons[delta] = epsilon_of(self._composition.event(), delta)
        return epsilon

    def _reporting_delta(self) -> float:
        if self.delta is not None:
            return self.delta
        # No budget delta: report at the sum of the fits' deltas (any delta gives a valid
        # (epsilon, delta) pair of the composition; this one matches basic composition).
        return min(self._deltas, 1.0 - 1e-12)

    def spent(self, delta: float | None = None) -> tuple[float, float]:
        """(epsilon, delta) of the composition of every recorded fit.

        Parameters
        ----------
        delta : float or None, default=None
            The delta to report at. ``None``: the budget's ``delta``, or the sum of the fits'
            deltas when there is no budget.

        Returns
        -------
        (float, float)
            ``(0.0, 0.0)`` before any fit (``(0.0, delta)`` when ``delta`` is given). When every
            fit was pure epsilon-DP (``delta = 0``), ``delta`` is not given and there is no
            budget: the sum of their epsilons, ``delta = 0`` (basic composition, exact for pure
            DP: the epsilons of binary randomized responses add up at ``delta = 0``).

        Notes
        -----
        The composition is kept as the records arrive in a form of bounded size
        (:class:`_Composition`): the cost does not grow with the number of fits.
        """
        if delta is not None:
            _check_delta(delta)
        with self._lock:
            self._refresh()
            if not self._records:
                return 0.0, (0.0 if delta is None else float(delta))
            if delta is not None:
                return self._epsilon_at(float(delta)), float(delta)
            delta = self._reporting_delta()
            if delta == 0.0:
                return math.fsum(record.epsilon for record in self._records), 0.0
            return self._epsilon_at(delta), delta

    def remaining(self) -> float | None:
        """Epsilon left in the budget at its delta (``None`` without a budget)."""
        if self.epsilon is None:
            return None
        return max(self.epsilon - self.spent()[0], 0.0)

    def charge(
        self,
        event: dp_accounting.DpEvent,
        *,
        estimator: str,
        params: dict[str, Any],
        epsilon: float,
        delta: float,
    ) -> FitRecord:
        """Check ``event`` against the budget and record it, atomically.

        The check converts the composition of the records and ``event`` with :func:`epsilon_of`;
        the records' composition is kept up to date as they arrive (:class:`_Composition`), so
        the check costs the same after ten fits or after ten thousand. With a ledger file, the
        check and the record are one transaction of the file, which includes the fits every
        other process recorded.

        Raises
        ------
        BudgetExceededError
            If recording ``event`` would exceed the budget; nothing is recorded.
        LedgerProcessError
            If this is an in-memory ledger created in another process; nothing is recorded.
        TypeError
            If the ledger is a file and ``event`` has no JSON form (:func:`dp_event_to_json`).
        """
        with self._lock:
            if self.path is None:
                self._check_process(estimator)
                return self._check_and_record(event, estimator, params, epsilon, delta, None)
            with self._transaction("IMMEDIATE") as connection:
                self._read_new_rows(connection)
                return self._check_and_record(event, estimator, params, epsilon, delta, connection)

    def _check_process(self, estimator: str) -> None:
        if self._owner is not None and self._owner != os.getpid():
            raise LedgerProcessError(
                f"This fit of {estimator} was refused before reading any data: its accountant is an in-memory "
                f"PrivacyAccountant created in process {self._owner}, charged here in process {os.getpid()} (a "
                "worker of GridSearchCV / cross_val_score with n_jobs > 1 and a process backend, or a pickle "
                "loaded elsewhere), where its record would never reach the original ledger nor its budget be "
                "enforced. Use a ledger every process charges, PrivacyAccountant(path='ledger.sqlite', "
                "epsilon=..., delta=...), or n_jobs=1, or joblib's threading backend."
            )

    def _check_and_record(self, event, estimator, params, epsilon, delta, connection) -> FitRecord:
        params = dict(params)
        if connection is not None:  # recorded as every process reads it back from the file
            stored_event, stored_params = json.dumps(dp_event_to_json(event), allow_nan=False), _params_json(params)
            event, params = dp_event_from_json(json.loads(stored_event)), json.loads(stored_params)
        composition = self._composition.copy()
        composition.add(event)
        projected = None
        if self.epsilon is not None:
            projected = epsilon_of(composition.event(), self.delta)
            if projected > self.epsilon:
                spent = self._epsilon_at(self.delta) if self._records else 0.0
                raise BudgetExceededError(
                    f"This fit of {estimator} would raise the privacy spent from epsilon="
                    f"{spent:.4g} to {projected:.4g} at delta={self.delta:g}, above the "
                    f"accountant's budget epsilon={self.epsilon:g}. Nothing was fitted. Lower "
                    "the estimator's epsilon, or use a PrivacyAccountant with a larger budget."
                )
        record = FitRecord(estimator, params, event, float(epsilon), float(delta), time.time(), self.dataset)
        if connection is not None:
            cursor = connection.execute(
                "INSERT INTO fits (time, estimator, params, event, epsilon, delta, dataset, pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (record.time, estimator, stored_params, stored_event, record.epsilon, record.delta,
                 self.dataset, os.getpid()),
            )
            connection.execute("COMMIT")  # on disk before the fit reads a row
            self._read_id = cursor.lastrowid
        self._records.append(record)
        self._composition = composition
        self._deltas += record.delta
        self._epsilons = {} if projected is None else {self.delta: projected}
        return record

    def reset(self) -> None:
        """Forget every recorded fit (for a new, disjoint dataset); of a ledger file, for every
        process that uses it."""
        with self._lock:
            if self.path is not None:
                with self._transaction("IMMEDIATE") as connection:
                    connection.execute("DELETE FROM fits")
                    connection.execute(
                        "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'generation'"
                    )
            self._records = []
            self._forget_composition()

    # -- shared default ---------------------------------------------------------------------
    def __enter__(self) -> PrivacyAccountant:
        self._previous_defaults.append(set_accountant(self))
        return self

    def __exit__(self, *exc_info) -> None:
        set_accountant(self._previous_defaults.pop())


class _Transaction:
    """A transaction of a ledger file's connection (``BEGIN [kind]``; committed at the end of a
    ``with`` block unless committed inside it, rolled back if the block raises)."""

    def __init__(self, connection: sqlite3.Connection, kind: str):
        self.connection, self.kind = connection, kind

    def __enter__(self) -> sqlite3.Connection:
        self.connection.execute(f"BEGIN {self.kind}")
        return self.connection

    def __exit__(self, kind, value, traceback) -> None:
        if self.connection.in_transaction:
            self.connection.execute("ROLLBACK" if kind is not None else "COMMIT")


_default_lock = threading.Lock()
_default_accountant = PrivacyAccountant()
_default_accountant._owner = None  # skdpsco's own default records in every process (class Notes)


def get_accountant() -> PrivacyAccountant:
    """The shared default accountant (no budget unless replaced)."""
    return _default_accountant


def set_accountant(accountant: PrivacyAccountant) -> PrivacyAccountant:
    """Replace the shared default accountant; return the previous one."""
    global _default_accountant
    if not isinstance(accountant, PrivacyAccountant):
        raise TypeError(f"accountant must be a PrivacyAccountant; got {type(accountant).__name__}.")
    with _default_lock:
        previous, _default_accountant = _default_accountant, accountant
    return previous
