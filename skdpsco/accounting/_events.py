"""Events: every mechanism of skdpsco as an immutable :class:`dp_accounting.DpEvent`.

Every mechanism in skdpsco is described by an immutable :class:`dp_accounting.DpEvent` under the
**replace-one** neighbouring relation (``DESIGN.md``, "Privacy model"): the event constructors
(:func:`gaussian_event`, :func:`pure_dp_event`, :func:`zcdp_event`), the events skdpsco adds to
``dp_accounting``'s (:class:`FixedOrderRdpDpEvent`, :class:`FailureProbabilityDpEvent`,
:class:`ObjectivePerturbationDpEvent`), the bounds the solvers build them from
(:func:`amplification_by_iteration_rho`, :func:`wang_max_hits`,
:func:`wang_uniform_stability_bound`), and their JSON form (:func:`dp_event_to_json`,
:func:`dp_event_from_json`). Converted to (epsilon, delta) in :mod:`skdpsco.accounting._conversion`
only.

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
replace-one sensitivity (:func:`gaussian_event`). Its privacy curve is computed by the
conversion from that reading (the pair ``N(0, z**2)``, ``N(1, z**2)``;
:func:`~skdpsco.accounting._conversion._mixture_epsilon`), never by the PLD accountant's own
reading of the event.
"""

from __future__ import annotations

import math

import attr
import dp_accounting
import numpy as np

NEIGHBORING_RELATION = dp_accounting.NeighboringRelation.REPLACE_ONE
"""The one neighbouring relation of the library: datasets of equal, public size ``n`` that
differ in one row."""


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
    batch_sizes = np.asarray(batch_sizes)  # integers or floats: divided below as float64 either way
    if batch_sizes.dtype.kind not in "iuf":
        batch_sizes = batch_sizes.astype(float)
    noise_stds = np.broadcast_to(np.asarray(noise_stds, dtype=float), steps.shape)
    if not (steps.shape == batch_sizes.shape and steps.ndim == 1 and steps.size > 0):
        raise ValueError("steps and batch_sizes must be non-empty 1-D arrays of equal length.")
    if not (steps.min() > 0 and batch_sizes.min() >= 1 and noise_stds.min() > 0):
        raise ValueError("steps and noise_stds must be > 0 and batch sizes >= 1.")
    # max((2 L eta / B)**2 / (2 cumsum((eta sigma)[::-1]**2)[::-1])), the same floats, by blocks
    largest = []
    for start, stop, tail_variance in tail_sums(steps.size, lambda i, j: np.square(steps[i:j] * noise_stds[i:j])):
        tail_variance *= 2.0
        shift = np.multiply(2.0 * lipschitz, steps[start:stop])
        shift /= batch_sizes[start:stop]
        np.square(shift, out=shift)
        shift /= tail_variance
        largest.append(shift.max())
    return float(np.max(largest))


TAIL_BLOCK = 1 << 16
"""Steps per block of :func:`tail_sums` (512 KiB of floats: temporaries that stay in cache and
are reused, where arrays of ``T`` floats are fresh memory for every plan)."""


def tail_sums(size: int, terms):
    """Yield ``(start, stop, tails)`` over blocks of ``range(size)`` from the last one, with
    ``tails[i] = sum(terms[start + i:])`` as the float ``np.cumsum(terms[::-1])[::-1]`` computes it.

    ``terms(start, stop)`` returns a new array of the terms of that block. The blocks continue
    one sequential sum from the end: each block's last term is added to the sum of the later
    blocks first (``0.0 + x == x`` for the last block), so every partial sum is the same float as
    in one ``np.cumsum`` over all ``size`` terms, in ``O(TAIL_BLOCK)`` memory.
    """
    later = 0.0
    for stop in range(size, 0, -TAIL_BLOCK):
        start = max(0, stop - TAIL_BLOCK)
        tails = terms(start, stop)[::-1]
        tails[0] += later
        np.cumsum(tails, out=tails)
        later = tails[-1]
        yield start, stop, tails[::-1]


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


def _check_delta(delta: float) -> None:
    if not (isinstance(delta, (int, float, np.floating)) and 0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1); got {delta!r}.")


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
