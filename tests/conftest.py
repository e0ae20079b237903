import pytest

import skdpsco.solvers._core as core


@pytest.fixture
def weaken_noise(monkeypatch):
    """The test-only knob of the privacy audits: ``weaken_noise(factor)`` divides every privacy
    noise draw (all go through ``skdpsco.solvers._core.gaussian_noise``) by ``factor`` while the
    claimed event stays the same, so an audit that has power must then report a violation."""

    def weaken(factor):
        draw = core.gaussian_noise
        monkeypatch.setattr(core, "gaussian_noise", lambda rng, std, shape: draw(rng, std / factor, shape))

    return weaken
