import pytest

import skdpsco._noise as noise


@pytest.fixture
def weaken_noise(monkeypatch):
    """The test-only knob of the privacy audits: ``weaken_noise(factor)`` divides every privacy
    noise draw (all go through ``skdpsco._noise.gaussian_noise``) by ``factor`` while the
    claimed event stays the same, so an audit that has power must then report a violation."""

    def weaken(factor):
        draw = noise.gaussian_noise
        monkeypatch.setattr(noise, "gaussian_noise", lambda rng, std, shape: draw(rng, std / factor, shape))

    return weaken
