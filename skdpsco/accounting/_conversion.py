"""Conversion of events to (epsilon, delta): :func:`epsilon_of` and the exact privacy curves.

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

import math
import threading
from collections import OrderedDict
from functools import lru_cache

import dp_accounting
import numpy as np
from dp_accounting import rdp
from scipy.optimize import brentq
from scipy.fft import next_fast_len
from scipy.special import gammaln, log_ndtr, ndtr

from ._events import (
    NEIGHBORING_RELATION,
    FailureProbabilityDpEvent,
    FixedOrderRdpDpEvent,
    ObjectivePerturbationDpEvent,
    _check_delta,
)

# Dense grid of Renyi orders: zCDP bounds are optimised at alpha = 1 + sqrt(ln(1/delta) / rho),
# which ranges from ~1.1 to ~1e4 over the budgets users ask for.
_RDP_ORDERS = np.unique(
    np.concatenate([np.linspace(1.02, 2.0, 100), np.geomspace(2.0, 1e5, 2000)])
)


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


# -- objective perturbation (proof in skdpsco.solvers.objective, "Conversion") ----------------------
DELTA_DIVISOR = 4.0
"""Each objective-perturbation release divides delta by 4 in the conversion
(:mod:`skdpsco.solvers.objective`, "Conversion": a factor 2 for the fold ``|Z|``, a factor 2 for
the maximum over the two directions ``d_k``)."""


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
    An event is converted once per ``(event, delta)`` and remembered (a composition by the
    values of its events, :func:`_event_key`): a fit's event is a function of its public plan, a
    dense-grid RDP conversion costs milliseconds, more than a small fit, and a fit calibrates its
    noise by a dozen conversions of compositions, the same ones at every fit of the same plan. Inside a composition,
    the RDP of each numerically evaluated leaf (randomized response, sampled Gaussians, private
    selection) is remembered per order grid, to the last bit dp-accounting's
    (:class:`_RememberingRdpAccountant`).
    """
    _check_delta(delta)
    key = _event_key(event)
    if key is None:
        return _epsilon_of(event, float(delta))
    return _remembered_epsilon_of(_KeyedEvent(event, key), float(delta))


def _event_key(event: dp_accounting.DpEvent):
    """A hashable value equal for two events exactly when their values are (compositions by the
    keys of their events, in order; any other event by itself, as its class compares it), or
    ``None`` for an event that is not hashable."""
    if isinstance(event, dp_accounting.ComposedDpEvent):
        keys = tuple(_event_key(part) for part in event.events)
        return None if any(key is None for key in keys) else ("composed", keys)
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        inner = _event_key(event.event)
        return None if inner is None else ("self-composed", inner, event.count)
    try:
        hash(event)
    except TypeError:
        return None
    return event


class _KeyedEvent:
    """An event with its :func:`_event_key`, hashed and compared by the key (the key of
    :func:`_remembered_epsilon_of`)."""

    __slots__ = ("event", "key")

    def __init__(self, event: dp_accounting.DpEvent, key) -> None:
        self.event, self.key = event, key

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other) -> bool:
        return isinstance(other, _KeyedEvent) and self.key == other.key


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


@lru_cache(maxsize=4096)
def _remembered_epsilon_of(keyed: _KeyedEvent, delta: float) -> float:
    """:func:`_epsilon_of` of an event with a key, remembered (:func:`epsilon_of`, Notes)."""
    return _epsilon_of(keyed.event, delta)


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
