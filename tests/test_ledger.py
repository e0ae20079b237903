"""The ledger's running composition (:class:`skdpsco.accounting.PrivacyAccountant`): the same
epsilons and the same budget decisions as :func:`epsilon_of` of the whole history, at a cost that
does not grow with it; the remembered RDP of leaf events, bit for bit dp-accounting's; the JSON
form of events."""

import copy
import math
import pickle
import re
import statistics
import threading
import time

import attr
import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skdpsco import BudgetExceededError, PrivacyAccountant
from skdpsco import accounting
from skdpsco.accounting import (
    FailureProbabilityDpEvent,
    FixedOrderRdpDpEvent,
    ObjectivePerturbationDpEvent,
    dp_event_from_json,
    dp_event_to_json,
    epsilon_of,
    gaussian_event,
    gaussian_noise_multiplier,
    ledger_summary,
    pure_dp_event,
    zcdp_event,
)

REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE
G = dp_accounting.GaussianDpEvent
SELECT = dp_accounting.dp_event.RepeatAndSelectDpEvent
SAMPLED = dp_accounting.SampledWithoutReplacementDpEvent


def charge(ledger, event, eps=1.0, delta=1e-6):
    return ledger.charge(event, estimator="Est", params={"epsilon": eps}, epsilon=eps, delta=delta)


def from_scratch(events, delta):
    """What the ledger computed before it kept a running composition."""
    return epsilon_of(dp_accounting.ComposedDpEvent(list(events)), delta) if events else 0.0


def same_epsilon(a, b):
    return (math.isinf(a) and math.isinf(b)) or abs(a - b) <= 1e-9 * max(1.0, abs(b))


# -- random mixed histories: every kind of event the library emits, nested ----------------------------
# Parameters come from short lists, so that the numerically evaluated leaves repeat (their RDP is then
# remembered and the test stays fast) while their combinations vary.
LEAVES = st.one_of(
    st.sampled_from([0.5, 1.0, 2.0, 4.0, 8.0]).map(G),
    st.sampled_from([0.1, 0.5, 1.0]).map(pure_dp_event),
    st.sampled_from([1e-3, 1e-2]).map(zcdp_event),
    st.sampled_from([0.01, 0.05]).map(lambda r: FixedOrderRdpDpEvent(order=8.0, rdp=r)),
    st.just(FixedOrderRdpDpEvent(order=16.0, rdp=0.02)),  # another order: the composition is then inf
    st.sampled_from([1e-9, 1e-7]).map(lambda p: FailureProbabilityDpEvent(G(2.0), p)),
    st.sampled_from([0.05, 0.1]).map(lambda o: ObjectivePerturbationDpEvent(dp_accounting.ComposedDpEvent([G(3.0), G(4.0)]), o)),
    st.just(dp_accounting.SelfComposedDpEvent(SAMPLED(400, 1, G(1.0)), 50)),
    st.just(SELECT(zcdp_event(1e-2), 4.0, 1.0)),
    st.just(dp_accounting.NoOpDpEvent()),
)
EVENTS = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(dp_accounting.ComposedDpEvent),
        st.tuples(inner, st.integers(1, 3)).map(lambda pair: dp_accounting.SelfComposedDpEvent(*pair)),
    ),
    max_leaves=4,
)
SLOW_OK = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW_OK
@given(st.lists(EVENTS, min_size=1, max_size=8), st.sampled_from([1e-6, 1e-3]))
def test_running_composition_gives_the_epsilon_of_the_whole_history(history, delta):
    ledger = PrivacyAccountant()
    for event in history:
        charge(ledger, event)
    assert same_epsilon(ledger._epsilon_at(delta), from_scratch(history, delta))
    budgeted = PrivacyAccountant(epsilon=1e9, delta=delta)
    for event in history:
        try:
            charge(budgeted, event)
        except BudgetExceededError:  # only an infinite composition exceeds 1e9
            assert math.isinf(from_scratch([r.event for r in budgeted.history] + [event], delta))
    assert same_epsilon(budgeted.spent()[0], from_scratch([r.event for r in budgeted.history], delta))


@SLOW_OK
@given(st.lists(EVENTS, min_size=2, max_size=7), st.floats(0.05, 0.95))
def test_budget_decisions_are_those_of_the_whole_history(history, fraction):
    """Each fit is refused exactly when the composition of the fits recorded so far and it exceeds
    the budget (here a fraction of the whole history's epsilon, so that some fits pass and some
    are refused)."""
    delta = 1e-5
    total = from_scratch(history, delta)
    budget = fraction * total if math.isfinite(total) and total > 0 else 1.0
    ledger = PrivacyAccountant(epsilon=budget, delta=delta)
    accepted = []
    for event in history:
        projected = from_scratch(accepted + [event], delta)
        if abs(projected - budget) < 1e-8 * budget:
            return  # a tie within rounding: either decision is right
        if projected <= budget:
            charge(ledger, event)
            accepted.append(event)
        else:
            before = ledger.history
            with pytest.raises(BudgetExceededError):
                charge(ledger, event)
            assert ledger.history == before
    assert [r.event for r in ledger.history] == accepted
    assert same_epsilon(ledger.spent()[0], from_scratch(accepted, delta))


def test_refusal_message_reports_the_spent_and_projected_epsilons():
    ledger = PrivacyAccountant(epsilon=2.0, delta=1e-5)
    for _ in range(3):
        charge(ledger, gaussian_event(8.0, 1.0))
    spent = from_scratch([r.event for r in ledger.history], 1e-5)
    projected = from_scratch([r.event for r in ledger.history] + [gaussian_event(1.0, 1.0)], 1e-5)
    with pytest.raises(BudgetExceededError, match=f"from epsilon={spent:.4g} to {projected:.4g}"):
        charge(ledger, gaussian_event(1.0, 1.0))


def test_reset_forgets_the_running_composition():
    ledger = PrivacyAccountant(epsilon=5.0, delta=1e-5)
    charge(ledger, gaussian_event(1.0, 1.0))
    ledger.reset(confirm=True)
    assert ledger.spent() == (0.0, 0.0)
    charge(ledger, gaussian_event(2.0, 1.0))
    assert ledger.spent()[0] == pytest.approx(epsilon_of(gaussian_event(2.0, 1.0), 1e-5), rel=1e-9)


def test_without_budget_reports_at_the_running_sum_of_deltas():
    ledger = PrivacyAccountant()
    deltas = [1e-6, 2e-6, 3e-7, 5e-6]
    for delta in deltas:
        charge(ledger, gaussian_event(4.0, 1.0), delta=delta)
    eps, delta = ledger.spent()
    assert delta == pytest.approx(sum(deltas), rel=1e-15)
    assert same_epsilon(eps, from_scratch([r.event for r in ledger.history], delta))


# -- bounded cost -------------------------------------------------------------------------------------
def default_fit_event():
    """What DPLogisticRegression() charges by default: a composition of Gaussians."""
    return dp_accounting.ComposedDpEvent([
        dp_accounting.ComposedDpEvent([G(11.3), G(9.7), G(12.1)]), G(3.7),
    ])


def test_running_composition_stays_bounded_over_a_thousand_mixed_fits():
    fits = [default_fit_event(), zcdp_event(1e-3), pure_dp_event(0.5),
            dp_accounting.SelfComposedDpEvent(SAMPLED(400, 1, G(1.0)), 400)]
    ledger = PrivacyAccountant()
    for i in range(1000):
        charge(ledger, fits[i % len(fits)])
    event = ledger._composition.event()
    # one Gaussian, one zCDP, the randomized response and the sampled Gaussians with their counts
    assert len(event.events) == 4
    assert {e.count for e in event.events if isinstance(e, dp_accounting.SelfComposedDpEvent)} == {250, 250 * 400}
    assert len(ledger.history) == 1000


def test_budget_check_after_a_thousand_default_fits_takes_milliseconds():
    ledger = PrivacyAccountant(epsilon=1e6, delta=1e-5)
    seconds = []
    for i in range(1000):
        started = time.perf_counter()
        charge(ledger, default_fit_event())
        seconds.append(time.perf_counter() - started)
    # the 0.6 s of a recomposed history of 100 fits would fail this by two orders of magnitude
    assert statistics.median(seconds[-20:]) < 0.02
    started = time.perf_counter()
    ledger.spent()
    assert time.perf_counter() - started < 0.02


# -- copies, pickles, threads ------------------------------------------------------------------------
def test_copies_and_pickles_in_the_process_are_the_ledger_itself():
    ledger = PrivacyAccountant(epsilon=50.0, delta=1e-5)
    for event in (default_fit_event(), pure_dp_event(0.5), zcdp_event(1e-2)):
        charge(ledger, event)
    for other in (pickle.loads(pickle.dumps(ledger)), copy.copy(ledger), copy.deepcopy(ledger)):
        assert other is ledger
    assert len(ledger.history) == 3


def test_a_pickle_holds_a_reference_never_the_records():
    ledger = PrivacyAccountant(epsilon=5.0, delta=1e-5)
    ledger.charge(gaussian_event(2.0, 1.0), estimator="InTheRecords", params={}, epsilon=1.0, delta=1e-6)
    data = pickle.dumps(ledger)
    assert b"InTheRecords" not in data and b"GaussianDpEvent" not in data


def test_concurrent_mixed_charges_never_exceed_the_budget():
    delta = 1e-5
    events = [gaussian_event(6.0, 1.0), pure_dp_event(0.3), zcdp_event(5e-3)] * 6
    budget = 0.6 * from_scratch(events, delta)
    ledger = PrivacyAccountant(epsilon=budget, delta=delta)
    barrier = threading.Barrier(len(events))
    refused = []

    def worker(event):
        barrier.wait()
        try:
            charge(ledger, event)
        except BudgetExceededError:
            refused.append(event)

    threads = [threading.Thread(target=worker, args=(event,)) for event in events]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recorded = [r.event for r in ledger.history]
    assert 0 < len(recorded) < len(events) and len(recorded) + len(refused) == len(events)
    assert ledger.spent()[0] <= budget
    assert same_epsilon(ledger.spent()[0], from_scratch(recorded, delta))
    # refusals were right: no refused fit would fit after all the recorded ones (they only grew)
    for event in refused:
        assert from_scratch(recorded + [event], delta) > budget


# -- remembered leaf RDP: dp-accounting's, bit for bit --------------------------------------------------
RDP_EVENTS = [
    pure_dp_event(0.7),
    dp_accounting.SelfComposedDpEvent(pure_dp_event(0.2), 7),
    dp_accounting.LaplaceDpEvent(2.0),
    dp_accounting.ComposedDpEvent([G(2.0), dp_accounting.SelfComposedDpEvent(SAMPLED(400, 1, G(1.0)), 40)]),
    SELECT(zcdp_event(1e-2), 4.0, 1.0),
    dp_accounting.SelfComposedDpEvent(SELECT(dp_accounting.ComposedDpEvent([G(3.0), zcdp_event(1e-3)]), 2.0, 0.0), 3),
    dp_accounting.ComposedDpEvent([zcdp_event(0.01), SELECT(pure_dp_event(0.3), 3.0, 1.0), pure_dp_event(0.7)]),
]


GRIDS = {"sampled": accounting._SAMPLED_RDP_ORDERS, "selection": accounting._SELECTION_RDP_ORDERS,
         "one": [8.0], "one_int": [3]}


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("event", RDP_EVENTS, ids=lambda e: type(e).__name__)
def test_remembered_leaf_rdp_is_dp_accountings_to_the_last_bit(event, grid):
    if accounting._contains(event, SAMPLED) and grid == "selection":
        pytest.skip("sampled Gaussians are converted on the sampled grid (seconds on this one)")
    orders = GRIDS[grid]
    plain = rdp.RdpAccountant(orders=orders, neighboring_relation=REPLACE_ONE)
    expected = plain.compose(event).rdp
    for _ in range(2):  # computed, then remembered
        remembering = accounting._rdp_accountant(orders)
        assert np.array_equal(remembering.compose(event).rdp, expected)


def test_remembered_leaf_rdp_on_the_dense_grid_and_unsupported_events():
    for event in (
        dp_accounting.SelfComposedDpEvent(pure_dp_event(0.9), 3),
        dp_accounting.ComposedDpEvent([G(0.37), dp_accounting.SelfComposedDpEvent(G(1.9), 5), zcdp_event(0.01)]),
        dp_accounting.ComposedDpEvent([G(0.0), G(2.0)]),  # no noise: infinite at every order
    ):
        expected = rdp.RdpAccountant(orders=accounting._RDP_ORDERS, neighboring_relation=REPLACE_ONE).compose(event).rdp
        for _ in range(2):
            assert np.array_equal(accounting._rdp_accountant().compose(event).rdp, expected)
    poisson = dp_accounting.PoissonSampledDpEvent(0.1, G(1.0))  # add-or-remove only
    assert not accounting._rdp_accountant().supports(poisson)
    with pytest.raises(ValueError, match="No accountant supports"):
        epsilon_of(dp_accounting.ComposedDpEvent([poisson]), 1e-5)


# -- the JSON form of events ----------------------------------------------------------------------------
def every_event_type():
    """One event of every class dp-accounting and skdpsco define, with the field types they take."""
    return [
        dp_accounting.NoOpDpEvent(),
        dp_accounting.NonPrivateDpEvent(),
        dp_accounting.UnsupportedDpEvent(),
        dp_accounting.RandomizedResponseDpEvent(noise_parameter=0.3, num_buckets=2),
        G(np.float64(1.2345678901234567)),
        dp_accounting.LaplaceDpEvent(0.5),
        dp_accounting.dp_event.DiscreteLaplaceDpEvent(0.5, 1),
        dp_accounting.SelfComposedDpEvent(G(2.0), 7),
        dp_accounting.ComposedDpEvent([G(2.0), zcdp_event(0.1)]),
        dp_accounting.PoissonSampledDpEvent(0.01, G(1.0)),
        dp_accounting.SampledWithReplacementDpEvent(1000, 10, G(1.0)),
        SAMPLED(1000, 10, G(1.0)),
        dp_accounting.SingleEpochTreeAggregationDpEvent(1.5, [3, 4]),
        dp_accounting.SingleEpochTreeAggregationDpEvent(1.5, 4),
        SELECT(zcdp_event(0.01), 4.0, 1.0),
        dp_accounting.dp_event.MixtureOfGaussiansDpEvent(1.0, (0.0, 1.0), (0.3, 0.7)),
        dp_accounting.ZCDpEvent(rho=0.1, xi=0.2),
        dp_accounting.dp_event.TruncatedSubsampledGaussianDpEvent(1000, 0.01, 20, 1.0),
        FixedOrderRdpDpEvent(order=8.5, rdp=0.1 + 0.2),
        FailureProbabilityDpEvent(dp_accounting.ComposedDpEvent([G(2.0)]), 1e-7),
        ObjectivePerturbationDpEvent(dp_accounting.ComposedDpEvent([G(3.0), G(4.0)]), 0.15),
        G(math.inf),
    ]


def test_every_event_class_has_a_json_form():
    built = {type(e) for e in every_event_type()}
    assert set(accounting._EVENT_TYPES.values()) == built


@pytest.mark.parametrize("event", every_event_type(), ids=lambda e: type(e).__name__)
def test_json_form_reads_back_to_the_same_event(event):
    import json

    text = json.dumps(dp_event_to_json(event), allow_nan=False)
    back = dp_event_from_json(json.loads(text))
    assert back == event and type(back) is type(event)
    assert repr(back) == repr(event).replace("np.float64(1.2345678901234567)", "1.2345678901234567")
    for name in (f.name for f in attr.fields(type(event))):
        assert type(getattr(back, name)) in (type(getattr(event, name)), float)


def test_json_form_refuses_unknown_types_and_fields():
    class Mine(dp_accounting.GaussianDpEvent):
        pass

    with pytest.raises(TypeError, match="No JSON form"):
        dp_event_to_json(Mine(1.0))
    with pytest.raises(ValueError, match="Unknown event type 'os.system'"):
        dp_event_from_json({"type": "os.system", "command": "true"})
    with pytest.raises(ValueError, match="Unknown fields"):
        dp_event_from_json({"type": "GaussianDpEvent", "noise_multiplier": 1.0, "__class__": "x"})
    with pytest.raises(ValueError, match="rdp must be >= 0"):  # the constructors' checks run
        dp_event_from_json({"type": "FixedOrderRdpDpEvent", "order": 2.0, "rdp": -1.0})


# -- the catalogue of events the library emits (benchmarks/events.py; minutes to plan) -----------------
@pytest.fixture(scope="module")
def catalogue():
    from benchmarks.events import emitted_events

    return emitted_events()


@pytest.mark.slow
def test_every_emitted_event_reads_back_from_its_json_form(catalogue):
    import json

    for emitted in catalogue:
        back = dp_event_from_json(json.loads(json.dumps(dp_event_to_json(emitted.event), allow_nan=False)))
        assert back == emitted.event and repr(back) == repr(emitted.event), emitted.source


@pytest.mark.slow
def test_running_composition_of_emitted_events_is_the_whole_historys(catalogue):
    rng = np.random.default_rng(0)
    for _ in range(6):
        history = [catalogue[i].event for i in rng.choice(len(catalogue), size=6)]
        ledger = PrivacyAccountant()
        for event in history:
            charge(ledger, event)
        for delta in (1e-5, 1e-2):
            assert same_epsilon(ledger._epsilon_at(delta), from_scratch(history, delta))


# -- what a person reads ----------------------------------------------------------------------------
def test_spent_is_the_composition_at_the_budgets_delta_and_the_summary_says_so():
    ledger = PrivacyAccountant(epsilon=3.0, delta=1e-5, dataset="adult")
    z = gaussian_noise_multiplier(0.8, 2e-6)
    ledger.charge(gaussian_event(z, 1.0), estimator="DPLogisticRegression", params={}, epsilon=0.8, delta=2e-6)
    spent = ledger.spent()
    assert spent[1] == 1e-5 and 0.7 < spent[0] < 0.75  # less than the fit's own 0.8, at a larger delta
    assert ledger.spent(delta=2e-6)[0] == pytest.approx(0.8, rel=1e-5)
    text = ledger.summary()
    assert str(ledger) == text and repr(ledger) == "PrivacyAccountant(budget=(3.0, 1e-05), fits=1)"
    assert f"epsilon={spent[0]:.4g} at delta=1e-05, 1 fit below composed at the budget's delta" in text
    assert "less than a fit's own epsilon" in text and "dataset 'adult'" in text
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ledger.history[0].time))
    assert f"1. {when}  DPLogisticRegression  epsilon=0.8, delta=2e-06" in text
    assert f"time='{when}'" in repr(ledger.history[0])
    record = ledger.reset(confirm=True)
    assert f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(record.time))} by process" in ledger.summary()
    assert "forgot 1 fit, epsilon=" in ledger.summary() and "no fit recorded" in ledger.summary()


def test_a_ledger_files_summary_needs_the_file(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with pytest.raises(FileNotFoundError, match="ledger.sqlite"):
        ledger_summary(path)
    assert not path.exists()
    charge(PrivacyAccountant(epsilon=3.0, delta=1e-5, path=path), gaussian_event(4.0, 1.0))
    assert ledger_summary(path) == PrivacyAccountant(path=path).summary()
    assert f"ledger file {path}" in ledger_summary(path) and "1 fit below" in ledger_summary(path)


def test_a_refusal_prints_enough_digits_to_show_the_excess():
    budget = epsilon_of(gaussian_event(4.0, 1.0), 1e-5)
    ledger = PrivacyAccountant(epsilon=budget, delta=1e-5)
    with pytest.raises(BudgetExceededError) as refusal:
        charge(ledger, gaussian_event(4.0 * (1 - 1e-9), 1.0))
    projected, shown_budget = re.search(r"to (\S+) at delta.*budget epsilon=(\S+)\.", str(refusal.value)).groups()
    assert float(projected) > float(shown_budget) and projected != shown_budget


# -- remembered conversions of compositions ----------------------------------------------------------

def test_a_composition_is_converted_once_per_value_and_delta(monkeypatch):
    """Equal compositions (new objects, the same values) are converted once; a composition that
    differs in one value, or another delta, is converted anew; an unhashable leaf is never
    remembered."""
    from skdpsco.accounting import _conversion

    calls = []
    original = _conversion._epsilon_of
    monkeypatch.setattr(_conversion, "_epsilon_of", lambda event, delta: calls.append(event) or original(event, delta))

    def composed(noise):
        inner = dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(noise), dp_accounting.GaussianDpEvent(3.0)])
        return dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(inner, 4),
                                              dp_accounting.GaussianDpEvent(2.0)])

    first = epsilon_of(composed(1.2345678), 1e-6)
    assert epsilon_of(composed(1.2345678), 1e-6) == first and len(calls) == 1
    assert epsilon_of(composed(1.2345679), 1e-6) < first and len(calls) == 2
    epsilon_of(composed(1.2345678), 1e-7)
    assert len(calls) == 3
    assert _conversion._event_key(dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(1.0), []])) is None
