"""Every privacy event the library emits, converted by each accountant side by side.

``python -m benchmarks.events`` plans every estimator with every algorithm (and the other private
objects: :class:`~skdpsco.DPStandardScaler`, :class:`~skdpsco.DPPCA`, :class:`~skdpsco.DPSearchCV`, a ledger of several
fits, a ``partial_fit`` stream) on a small public problem, catches the event each would charge (planning stops at the
charge, before any solver reads the rows), and writes ``benchmarks/results/events.md``: the event,
and its epsilon at the fit's delta by

* ``epsilon_of``: what the library reports;
* its closed-form curve of Gaussians and randomized responses (the library's own,
  :func:`skdpsco.accounting._mixture_epsilon`) and the RDP accountant, where each applies;
* ``dp_accounting``'s ``PLDAccountant`` on the event as it is (Gaussian events rewritten to its
  doubled-sensitivity reading), which undercounts self-composed randomized responses (issue 18);
* an independent conversion (:func:`independent_epsilon`: closed forms and dp-accounting's PLD
  primitives, none of :mod:`skdpsco.accounting`'s conversion code), which
  ``tests/test_events.py`` checks ``epsilon_of`` against for every event listed here.
"""

from __future__ import annotations

import argparse
import math
import warnings
from dataclasses import dataclass

import dp_accounting
import numpy as np
from dp_accounting import pld, rdp
from scipy.stats import norm

from skdpsco import (
    DPHingeSVM,
    DPLogisticRegression,
    DPLpRegression,
    DPPCA,
    DPSearchCV,
    DPStandardScaler,
    PrivacyAccountant,
    PrivacyWarning,
)
from skdpsco import accounting
from skdpsco.accounting import (
    FailureProbabilityDpEvent,
    FixedOrderRdpDpEvent,
    ObjectivePerturbationDpEvent,
    DELTA_DIVISOR,
    epsilon_of,
)
from skdpsco.solvers import ALGORITHMS

from .utility import RESULTS

DELTA = 1e-5
N_ROWS = 400


@dataclass(frozen=True)
class EmittedEvent:
    """One event the library charges, with what emitted it and the delta it was planned at."""

    source: str
    event: dp_accounting.DpEvent
    delta: float


class _Caught(Exception):
    def __init__(self, event):
        super().__init__(event)
        self.event = event


class _CatchingAccountant(PrivacyAccountant):
    """Stops a fit at its charge (every private object charges before reading the rows)."""

    def charge(self, event, **kwargs):
        raise _Caught(event)


def _caught_event(model, X, y, method="fit", **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        try:
            getattr(model, method)(X, y, **kwargs)
        except _Caught as caught:
            return caught.event
    raise AssertionError(f"{model!r} did not charge its accountant")


def _data(n_classes: int | None):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, 3)) / 2
    y = rng.normal(size=N_ROWS) if n_classes is None else np.arange(N_ROWS) % n_classes
    return X, y


def emitted_events() -> list[EmittedEvent]:
    """The events of every estimator × algorithm that accepts it, at delta > 0 and, for the
    algorithms that support it, delta = 0 and Laplace noise at delta > 0; the scaler, the private
    search, a ledger holding several fits, DPPCA and a ``partial_fit`` stream."""
    events = []
    estimators = [
        ("DPLogisticRegression, 2 classes", DPLogisticRegression, 2),
        ("DPLogisticRegression, 3 classes (multinomial)", DPLogisticRegression, 3),
        ("DPHingeSVM, 3 classes (one-vs-rest)", DPHingeSVM, 3),
        ("DPLpRegression(p=2)", DPLpRegression, None),
    ]
    for label, estimator, n_classes in estimators:
        X, y = _data(n_classes)
        for algorithm, solver in [("auto", None), *ALGORITHMS.items()]:
            # the default (features scaled, and for regression the target bound released, inside
            # fit), then the solver's own event alone (a public target bound)
            unscaled = {"feature_scaling": None, **({"y_bound": 1.0} if n_classes is None else {})}
            variants = [({}, DELTA), (unscaled, DELTA)]
            if getattr(solver, "supports_pure_dp", False):
                variants += [({}, 0.0), (unscaled, 0.0), ({**unscaled, "solver_options": {"noise": "laplace"}}, DELTA)]
            for options, delta in variants:
                model = estimator(epsilon=1.0, delta=delta, algorithm=algorithm, random_state=0,
                                  accountant=_CatchingAccountant(), **options)
                try:
                    event = _caught_event(model, X, y)
                except (ValueError, TypeError):
                    continue  # a combination the estimator refuses (e.g. multiclass objective perturbation)
                name = (f"{label} [{algorithm}{', unscaled' if 'feature_scaling' in options else ''}"
                        f"{', ' + str(options['solver_options']) if 'solver_options' in options else ''}"
                        f"{', delta=0' if delta == 0 else ''}]")
                events.append(EmittedEvent(name, event, delta if delta > 0 else DELTA))
    X, y = _data(2)
    scaler = DPStandardScaler(epsilon=1.0, delta=DELTA, feature_bounds=(-2, 2), accountant=_CatchingAccountant())
    events.append(EmittedEvent("DPStandardScaler", _caught_event(scaler, X, None), DELTA))
    scaler = DPStandardScaler(epsilon=1.0, delta=DELTA, accountant=_CatchingAccountant())  # magnitudes, moments
    events.append(EmittedEvent("DPStandardScaler, private bounds", _caught_event(scaler, X, None), DELTA))
    scaler = DPStandardScaler(epsilon=1.0, delta=DELTA, feature_bounds=(-2, 2), accountant=_CatchingAccountant())
    events.append(EmittedEvent("DPStandardScaler, sample_weight",
                               _caught_event(scaler, X, None, sample_weight=np.ones(len(X))), DELTA))
    search = DPSearchCV(DPLogisticRegression(), {"alpha": [0.0, 0.01]}, epsilon=1.0, delta=DELTA, n_iter=10,
                        random_state=0, accountant=_CatchingAccountant())
    events.append(EmittedEvent("DPSearchCV", _caught_event(search, X, y), DELTA))
    ledger = [e.event for e in events if e.source.startswith("DPHingeSVM") and "laplace" in e.source][:1]
    ledger += [e.event for e in events if e.source.startswith("DPLogisticRegression, 2") and "[auto]" in e.source]
    ledger += [next(e.event for e in events if e.source == "DPStandardScaler")]
    events.append(EmittedEvent("ledger of three fits (one-vs-rest Laplace, auto, scaler)",
                               dp_accounting.ComposedDpEvent(ledger), DELTA))
    pca = DPPCA(epsilon=1.0, delta=DELTA, accountant=_CatchingAccountant())  # row bound, moments, matrix
    events.append(EmittedEvent("DPPCA", _caught_event(pca, X, None), DELTA))
    stream = DPLogisticRegression(epsilon=1.0, delta=DELTA, data_norm=1.0, feature_scaling=None, max_partial_fit_calls=10,
                                  accountant=_CatchingAccountant())  # the whole stream, charged at the first call
    events.append(EmittedEvent("DPLogisticRegression partial_fit stream (10 calls)",
                               _caught_event(stream, X, y, "partial_fit", classes=[0, 1]), DELTA))
    return events


# -- an independent conversion: closed forms and dp-accounting primitives only -------------------------

def _gaussian_curve(mu: float, eps):
    """delta(eps) of the mu-GDP pair N(0, 1), N(mu, 1), any real eps (Balle & Wang 2018, Thm 8)."""
    eps = np.asarray(eps, dtype=float)
    return norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def _leaves(event, count=1):
    """(kind, parameters, multiplicity) of the leaves of a composition."""
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return [leaf for e in event.events for leaf in _leaves(e, count)]
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return _leaves(event.event, count * event.count)
    return [(event, count)]


def _randomized_response_losses(leaves):
    """The privacy-loss distribution of the composed binary randomized responses, by explicit
    convolution of two-point distributions: (losses, probabilities under the first dataset)."""
    losses, probabilities = np.zeros(1), np.ones(1)
    for event, count in leaves:
        eps0 = math.log(2.0 / event.noise_parameter - 1.0)
        keep = math.exp(eps0) / (1.0 + math.exp(eps0))
        for _ in range(count):
            losses = np.concatenate([losses + eps0, losses - eps0])
            probabilities = np.concatenate([probabilities * keep, probabilities * (1 - keep)])
            losses, inverse = np.unique(np.round(losses, 9), return_inverse=True)
            probabilities = np.bincount(inverse, weights=probabilities)
    return losses, probabilities


def _solve_curve(curve, delta: float, upper: float = 200.0) -> float:
    """The smallest eps >= 0 with curve(eps) <= delta (curve decreasing), by bisection."""
    if curve(0.0) <= delta:
        return 0.0
    low, high = 0.0, upper
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if curve(middle) > delta else (low, middle)
    return high


def _cks_epsilon(rdp_of_order, delta: float, orders=None) -> float:
    """Canonne, Kamath & Steinke 2020, Prop. 12, minimised over ``orders`` (a fine grid by default)."""
    alphas = 1.0 + np.geomspace(1e-3, 1e5, 100_000) if orders is None else np.asarray(orders, dtype=float)
    values = rdp_of_order(alphas) + np.log1p(-1 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1)
    return float(np.min(values))


def independent_epsilon(event, delta: float) -> tuple[float, float]:
    """``(lower, upper)`` bracketing the exact epsilon of ``event`` at ``delta``, computed without
    :mod:`skdpsco.accounting`'s conversions; equal when the conversion is exact.

    * Gaussian releases and binary randomized responses, composed: exact, ``delta(eps) =
      sum_j P(L_rr = l_j) delta_G(eps - l_j)`` (the Gaussian part composes to one Gaussian,
      mu**2 adding; the randomized responses' loss distribution by explicit convolution).
    * zCDP (with Gaussians, rho = 1 / (2 z**2) each): the CKS20 conversion on a fine order grid.
    * a bound at one Renyi order (with Gaussians): the CKS20 conversion at that order.
    * failure probability ``p``: the inner event at ``delta - p``.
    * objective perturbation: ``sum eps_0 +`` the Gaussian part at ``delta / 4**k``.
    * sampled Gaussians without replacement (batch 1 of n): below, the exact PLD of the dominating
      pair of Zhu, Dong & Wang 2022 (Thm 10: ``(q P + (1 - q) Q, Q)``, q = 1/n), composed; above,
      the same steps without amplification (exact Gaussian composition).
    * private selection (RepeatAndSelect): only the RDP bound of PS22 exists (``(nan, nan)``;
      ``tests/test_model_selection.py`` checks that bound at its closed form).
    """
    if isinstance(event, FailureProbabilityDpEvent):
        return independent_epsilon(event.event, delta - event.probability)
    if isinstance(event, ObjectivePerturbationDpEvent):
        lower, upper = independent_epsilon(event.gaussian, delta / DELTA_DIVISOR)
        return lower + event.epsilon_offset, upper + event.epsilon_offset
    leaves = _leaves(event)
    kinds = {type(leaf) for leaf, _ in leaves}
    if kinds <= {dp_accounting.GaussianDpEvent, dp_accounting.RandomizedResponseDpEvent, dp_accounting.NoOpDpEvent}:
        mu = math.sqrt(sum(k / leaf.noise_multiplier**2 for leaf, k in leaves if isinstance(leaf, dp_accounting.GaussianDpEvent)))
        losses, probabilities = _randomized_response_losses(
            [(leaf, k) for leaf, k in leaves if isinstance(leaf, dp_accounting.RandomizedResponseDpEvent)]
        )
        if mu == 0:
            def curve(eps):
                return float(np.sum(probabilities * np.maximum(0.0, 1.0 - np.exp(eps - losses))))
        else:
            def curve(eps):
                return float(np.sum(probabilities * _gaussian_curve(mu, eps - losses)))
        exact = _solve_curve(curve, delta)
        return exact, exact
    if kinds <= {dp_accounting.GaussianDpEvent, dp_accounting.ZCDpEvent}:
        rho = sum(k * (leaf.rho if isinstance(leaf, dp_accounting.ZCDpEvent) else 1 / (2 * leaf.noise_multiplier**2))
                  for leaf, k in leaves)
        value = _cks_epsilon(lambda a: rho * a, delta)
        return value, value
    if FixedOrderRdpDpEvent in kinds and kinds <= {FixedOrderRdpDpEvent, dp_accounting.GaussianDpEvent}:
        orders = {leaf.order for leaf, _ in leaves if isinstance(leaf, FixedOrderRdpDpEvent)}
        assert len(orders) == 1, "one order"
        (order,) = orders
        # a Gaussian's Renyi divergence at order a is a / (2 z**2) (Mironov 2017, Prop. 7)
        total = sum(k * (leaf.rdp if isinstance(leaf, FixedOrderRdpDpEvent) else order / (2 * leaf.noise_multiplier**2))
                    for leaf, k in leaves)
        value = _cks_epsilon(lambda a: total * np.ones_like(a), delta, [order])
        return value, value
    if kinds == {dp_accounting.SampledWithoutReplacementDpEvent}:
        ((step, count),) = leaves
        z = step.event.noise_multiplier
        q = step.sample_size / step.source_dataset_size
        pair = pld.privacy_loss_distribution.from_gaussian_mechanism(
            standard_deviation=z, sensitivity=1.0, sampling_prob=q, value_discretization_interval=1e-3,
            neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        )
        lower = pair.self_compose(count).get_epsilon_for_delta(delta)
        upper = _solve_curve(lambda eps: float(_gaussian_curve(math.sqrt(count) / z, eps)), delta)
        # a realisable pair (the replaced row's gradient zero on one side), so its epsilon is a
        # lower bound; less the discretisation's slack
        return max(0.0, float(lower) - 2e-3 * count ** 0.5), upper
    return math.nan, math.nan


def _dp_accounting_pld_epsilon(event, delta: float) -> float:
    """dp_accounting's PLDAccountant on the event as it is (Gaussians in its doubled reading)."""
    def rewrite(e):
        if isinstance(e, dp_accounting.GaussianDpEvent):
            return dp_accounting.GaussianDpEvent(2.0 * e.noise_multiplier)
        if isinstance(e, dp_accounting.ComposedDpEvent):
            return dp_accounting.ComposedDpEvent([rewrite(x) for x in e.events])
        if isinstance(e, dp_accounting.SelfComposedDpEvent):
            return dp_accounting.SelfComposedDpEvent(rewrite(e.event), e.count)
        return e

    accountant = pld.PLDAccountant(accounting.NEIGHBORING_RELATION, value_discretization_interval=1e-3)
    event = rewrite(event)
    if not accountant.supports(event):
        return math.nan
    return float(accountant.compose(event).get_epsilon(delta))


def conversions(emitted: EmittedEvent) -> dict:
    """The row of the table for one event."""
    event, delta = emitted.event, emitted.delta
    parts = accounting._gaussian_and_randomized_response_parts(event)
    own_curve = accounting._mixture_epsilon(*parts, delta) if parts is not None else math.nan
    rdp_only = (dp_accounting.SampledWithoutReplacementDpEvent, dp_accounting.dp_event.RepeatAndSelectDpEvent)
    if any(accounting._contains(event, kind) for kind in rdp_only):
        rdp_epsilon = epsilon_of(event, delta)  # RDP is the only conversion, on epsilon_of's own order grid
    else:
        accountant = rdp.RdpAccountant(orders=accounting._RDP_ORDERS, neighboring_relation=accounting.NEIGHBORING_RELATION)
        rdp_epsilon = float(accountant.compose(event).get_epsilon(delta)) if accountant.supports(event) else math.nan
    lower, upper = independent_epsilon(event, delta)
    return {
        "source": emitted.source,
        "event": _describe(event),
        "delta": delta,
        "epsilon_of": epsilon_of(event, delta),
        "curve": own_curve,
        "rdp": rdp_epsilon,
        "dp_accounting_pld": _dp_accounting_pld_epsilon(event, delta),
        "independent": (lower, upper),
    }


def _describe(event) -> str:
    """A short name of the event's structure."""
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return f"{event.count} × {_describe(event.event)}"
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return "(" + " + ".join(_describe(e) for e in event.events) + ")"
    if isinstance(event, FailureProbabilityDpEvent):
        return f"Failure[{_describe(event.event)}, p={event.probability:.2g}]"
    if isinstance(event, ObjectivePerturbationDpEvent):
        return f"ObjPert[{_describe(event.gaussian)}, eps0={event.epsilon_offset:.3g}]"
    if isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent):
        return f"SampledWOR(1/{event.source_dataset_size}, {_describe(event.event)})"
    if isinstance(event, dp_accounting.dp_event.RepeatAndSelectDpEvent):
        return f"RepeatAndSelect({_describe(event.event)}, mean={event.mean:.3g}, shape={event.shape:g})"
    name = type(event).__name__.replace("DpEvent", "")
    if isinstance(event, dp_accounting.RandomizedResponseDpEvent):
        return f"RR(eps={math.log(2 / event.noise_parameter - 1):.3g})"
    fields = {k: v for k, v in vars(event).items()} if hasattr(event, "__dict__") else {
        k: getattr(event, k) for k in getattr(event, "__slots__", ())
    }
    return name + "(" + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items()) + ")"


def _format(value) -> str:
    if isinstance(value, tuple):
        lower, upper = value
        if math.isnan(lower):
            return "—"
        return f"{lower:.4f}" if math.isclose(lower, upper, rel_tol=1e-9) else f"[{lower:.4f}, {upper:.4f}]"
    return "—" if math.isnan(value) else f"{value:.4f}"


def table(rows: list[dict]) -> str:
    lines = [
        "| emitted by | event | δ | `epsilon_of` (reported) | Gaussian + RR curve (skdpsco's) | RDP | dp-accounting `PLDAccountant` | independent |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['source']} | {row['event']} | {row['delta']:g} | {_format(row['epsilon_of'])} | {_format(row['curve'])} "
            f"| {_format(row['rdp'])} | {_format(row['dp_accounting_pld'])} | {_format(row['independent'])} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    rows = [conversions(e) for e in emitted_events()]
    text = (
        "# Every event the library emits, converted side by side\n\n"
        f"Written by `python -m benchmarks.events` (problem: {N_ROWS} rows × 3 features, ε = 1). "
        "'independent': closed forms and dp-accounting PLD primitives only (an interval where only bounds "
        "exist); dp-accounting's `PLDAccountant` column shows its undercount of self-composed randomized "
        "responses (issue 18), which `epsilon_of` no longer uses.\n\n" + table(rows) + "\n"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "events.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
