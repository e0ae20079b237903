"""The fixed-seed black-box audits of the test files, from the catalogue of ``benchmarks/audits.py``.

Each test module audits its own mechanisms with :func:`check_audit`: at seed 0 and the
catalogue's number of trials, the honest mechanism's lower bound must stay within its claim and
the mechanism with its noise divided by the audit's ``factor`` (2, or the smallest weakening the
release can show, ``Audit.note``) must exceed it. The power of the very same audit, the fraction
of 20 seeds that catch the weakened noise, is measured by ``tests/test_audit_power.py`` (slow)
and tabulated by ``python -m benchmarks.audit_power``: a passing seed here is typical, not lucky.
"""

import pytest

from benchmarks.audits import AUDITS, run_audit


def audit_params(*names):
    """``names`` for ``pytest.mark.parametrize``, the audits too slow for the default suite marked slow."""
    return [pytest.param(name, marks=pytest.mark.slow) if AUDITS[name].slow else name for name in names]


def check_audit(name: str, seed: int = 0) -> None:
    """The audit ``name`` at ``seed``: sound (honest bound within the claim) and powerful (the
    weakened mechanism's bound above it)."""
    audit = AUDITS[name]
    claimed = audit.setup.claimed_epsilon
    honest = run_audit(audit, seed)
    weakened = run_audit(audit, seed, audit.factor)
    print(f"\n{name}: claimed epsilon {claimed:.3f} at delta {audit.setup.delta:g}; lower bound "
          f"{honest.epsilon_lower_bound:.3f}, with the noise / {audit.factor:g}: {weakened.epsilon_lower_bound:.3f}")
    assert honest.epsilon_lower_bound <= claimed, (name, honest)
    assert weakened.violates(claimed), (name, weakened)
