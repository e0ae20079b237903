"""Every event the library emits, converted by ``epsilon_of`` and by an independent conversion
(issue 18: dp-accounting's ``PLDAccountant`` composed a self-composed randomized response once).

The independent conversion (:func:`benchmarks.events.independent_epsilon`) uses closed forms and
dp-accounting's PLD primitives only, none of :mod:`skdpsco.accounting`'s conversion code.
"""

import math

import dp_accounting
import pytest

from benchmarks.events import emitted_events, independent_epsilon
from skdpsco.accounting import epsilon_of, zcdp_event

EMITTED = emitted_events()


def test_every_estimator_and_algorithm_is_listed():
    sources = " ".join(e.source for e in EMITTED)
    for name in ("DPLogisticRegression, 2 classes", "multinomial", "one-vs-rest", "DPLpRegression", "unscaled",
                 "DPStandardScaler", "DPPCA", "partial_fit", "DPSearchCV", "ledger", "[auto]", "laplace", "delta=0"):
        assert name in sources


@pytest.mark.parametrize("emitted", EMITTED, ids=[e.source for e in EMITTED])
def test_reported_epsilon_is_sound_and_tight(emitted):
    """Never below a lower bound of the exact epsilon (soundness), within 1 % of it where the
    independent conversion is exact (no accountant's loose bound is reported where a tight one
    exists)."""
    lower, upper = independent_epsilon(emitted.event, emitted.delta)
    if math.isnan(lower):
        pytest.skip("no independent conversion of this composition (private selection: its RDP bound is tested in test_model_selection)")
    reported = epsilon_of(emitted.event, emitted.delta)
    assert reported >= lower * (1 - 1e-3)
    assert reported <= upper * 1.01 + 1e-9


@pytest.mark.parametrize(
    "leaf",
    [
        dp_accounting.RandomizedResponseDpEvent(noise_parameter=2 / (math.e + 1), num_buckets=2),
        dp_accounting.GaussianDpEvent(2.0),
        zcdp_event(0.05),
    ],
    ids=["randomized-response", "gaussian", "zcdp"],
)
@pytest.mark.parametrize("count", [2, 3, 10])
def test_self_composition_equals_the_explicit_list(leaf, count):
    """The regression of issue 18, bug 1: SelfComposed(e, k) and [e] * k are the same mechanism."""
    self_composed = epsilon_of(dp_accounting.SelfComposedDpEvent(leaf, count), 1e-6)
    explicit = epsilon_of(dp_accounting.ComposedDpEvent([leaf] * count), 1e-6)
    assert self_composed == pytest.approx(explicit, rel=1e-6)
    if isinstance(leaf, dp_accounting.RandomizedResponseDpEvent):  # pure 1-DP, k times: about k
        assert self_composed > count - 0.5
