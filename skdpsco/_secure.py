"""Secure mode: a cryptographically secure noise source, and single noisy releases
immune to floating-point attacks.

``skdpsco.set_config(secure_noise=True)`` (or ``with skdpsco.config_context(secure_noise=True)``)
changes two things in every fit.

1. **The source of randomness** (:func:`secure_generator`): a ``numpy.random.Generator`` over
   :class:`skdpsco._osrandom.OSRandom`, the operating system's CSPRNG (``os.urandom``, the source
   of :mod:`secrets`), instead of numpy's PCG64 seeded from ``random_state``. Every draw a fit
   makes goes through it: the noise of every mechanism (the compiled SGD loop receives its noise
   rows from :func:`skdpsco._noise.gaussian_noise`, which draws from this generator), the
   row order, subsampled indices, secret stopping times, the number of trials of a search. A
   ``random_state`` other than ``None`` is refused (:func:`check_random_state_unset`): a seed
   would make the noise a function of the seed. Why not a seeded cipher (``randomgen``'s ChaCha
   or AES-counter bit generators): a new dependency, a key that ``state``, a pickle or a copy of
   the generator exposes or duplicates, and a forked child that continues its parent's stream;
   :class:`~skdpsco._osrandom.OSRandom` has no state to expose and discards its buffer in a
   forked child.

2. **Single noisy releases on a grid** (:func:`noisy_release`): a release ``value + noise`` of a
   data-dependent ``value`` with one noise draw (output perturbation, the feature scaling's
   histograms and moments, the private bounds, :class:`~skdpsco.DPStandardScaler`, the noisy
   score of a search trial, a phase's or an epoch's point, each gradient and Hessian of the
   private Newton method, :mod:`skdpsco.solvers.newton`) is made on the grid ``gamma Z^d``:
   ``gamma * (round(value / gamma) + Z)`` with ``Z`` exact discrete Gaussian (Canonne, Kamath &
   Steinke 2020, "CKS20", Algorithm 3) or discrete Laplace (CKS20 Algorithm 2) noise, sampled
   with integer arithmetic only from the generator's bits (:func:`discrete_gaussian_noise`,
   :func:`discrete_laplace_noise`). The released float is a deterministic function of the
   integer vector ``round(value / gamma) + Z``: its low-order bits carry nothing about
   ``value`` (the attack of Mironov 2012 reads the value off the floating-point sum
   ``value + noise``).

Privacy of the grid release (:func:`grid_release`). ``gamma`` is a power of two, a public
function of the planned ``l2``-sensitivity ``Delta`` (``l1`` for Laplace) and of the dimension
``d``: ``gamma <= 2**-(GRID_BITS + 1) Delta / sqrt(d)`` (Gaussian) or ``Delta / d`` (Laplace).
Rounding moves each coordinate by at most ``1/2`` grid step, so the integer query
``round(value / gamma)`` has sensitivity at most ``Delta / gamma + sqrt(d)`` in ``l2`` (``+ d``
in ``l1``), i.e. ``Delta (1 + 2**-(GRID_BITS + 1))`` in the units of ``value``; the noise scale is
multiplied by ``1 + 2**-GRID_BITS`` to absorb that (and float rounding of the scale). Then:

* Gaussian: the multivariate discrete Gaussian with per-coordinate ``sigma**2`` on an integer
  query of ``l2``-sensitivity ``Delta_Z`` is ``Delta_Z**2 / (2 sigma**2)``-zCDP (CKS20 Thm 4,
  and its multivariate form Thm 14, the Renyi divergences of independent coordinates adding), so
  the release is ``rho``-zCDP with ``rho = Delta**2 / (2 sigma**2)``, the ``rho`` of the planned
  continuous release. CKS20 do **not** show that the discrete Gaussian meets the continuous
  one's exact (epsilon, delta) curve (its Thm 7 gives the discrete one's own curve, and at small
  ``sigma / Delta`` the discrete one's delta can exceed the continuous one's; checked
  numerically here, e.g. ``Delta = 1, sigma = 0.9, epsilon = 8``). The event of a grid release is
  therefore the zCDP event of the same ``rho`` (:func:`secure_event`), converted by the RDP
  accountant, never the exact Gaussian (PLD) curve.
* Laplace: the discrete Laplace with scale ``t`` on an integer query of ``l1``-sensitivity
  ``Delta_Z`` is ``Delta_Z / t``-DP (the geometric mechanism, Ghosh, Roughgarden & Sundararajan
  2009; CKS20 §2 states its pmf), which is at most the planned ``Delta / b``: the planned
  ``pure_dp_event`` holds as it is.

What remains outside (user guide, "Secure mode"): iterative mechanisms whose noise is added at
every step inside the optimiser (noisy GD, DP-SGD, PNSGD, Snowball, FTRL, the compiled loop) draw
continuous floating-point Gaussians, from the secure source; objective perturbation (its proof
needs the density of a continuous linear term); the exponential mechanism of
:func:`skdpsco.inverse_sensitivity_location` (floating-point weights); and the sensitivity of the
floating-point computation of ``value`` itself (summation order, Casacuberta et al. 2022), which
the grid's margin does not claim to cover.
"""

from __future__ import annotations

import math
from fractions import Fraction

import dp_accounting
import numpy as np

from . import _noise
from ._config import get_config
from ._osrandom import OSRandom

__all__ = [
    "GRID_BITS",
    "VARIANCE_BITS",
    "check_random_state_unset",
    "discrete_gaussian_noise",
    "discrete_laplace_noise",
    "grid_release",
    "is_secure",
    "noisy_release",
    "secure_event",
    "secure_generator",
    "secure_mode",
]

GRID_BITS = 20
"""The grid step is ``2**-(GRID_BITS + 1)`` of the sensitivity per coordinate (module docstring):
the noise is ``1 + 2**-20`` times the planned noise (a millionth), and the rounding to the grid
is a millionth of the noise, far below any statistical use of the release."""


VARIANCE_BITS = 10
"""The discrete Gaussian's variance is rounded up to a multiple of ``2**-10``
(:func:`discrete_gaussian_noise`)."""


def secure_mode(secure_noise: bool | None = None) -> bool:
    """Whether secure mode is on: ``secure_noise`` when it is a bool (an estimator's parameter),
    else the global ``get_config()['secure_noise']``."""
    if secure_noise is None:
        return bool(get_config()["secure_noise"])
    if not isinstance(secure_noise, (bool, np.bool_)):
        raise ValueError(f"secure_noise must be True, False or None; got {secure_noise!r}.")
    return bool(secure_noise)


def secure_generator() -> np.random.Generator:
    """A ``numpy.random.Generator`` over the operating system's CSPRNG
    (:class:`~skdpsco._osrandom.OSRandom`): no seed, no state, fresh children on ``spawn``."""
    return np.random.Generator(OSRandom())


def is_secure(rng) -> bool:
    """Whether ``rng`` is a generator over :class:`~skdpsco._osrandom.OSRandom` (secure mode)."""
    return isinstance(getattr(rng, "bit_generator", None), OSRandom)


def check_random_state_unset(random_state, owner: str = "random_state") -> None:
    """Refuse a seed in secure mode: a ``random_state`` other than ``None`` would make the noise a
    function of that seed (anyone who knows or guesses it removes the noise)."""
    if random_state is not None:
        raise ValueError(
            f"{owner}={random_state!r} is refused in secure mode (skdpsco.set_config("
            "secure_noise=True)): all privacy noise comes from the operating system's "
            f"cryptographically secure generator, which takes no seed. Pass {owner}=None, or "
            "switch secure mode off (secure_noise=False) for reproducible experiments."
        )


# -- exact samplers (CKS20 §5), integer arithmetic on the generator's bits -------------------
class _Bits:
    """Uniform integers from the bits of a numpy Generator (``rng.bytes``), read in blocks of
    64-bit words: a draw of ``k`` bits takes ``ceil(k / 64)`` fresh words and keeps their low ``k``
    bits (uniform and independent of every other draw)."""

    def __init__(self, rng: np.random.Generator, block: int = 512):
        self._rng, self._block = rng, block
        self._words, self._next = [], 0

    def _word(self) -> int:
        if self._next == len(self._words):
            self._words = np.frombuffer(self._rng.bytes(8 * self._block), dtype=np.uint64).tolist()
            self._next = 0
        self._next += 1
        return self._words[self._next - 1]

    def bits(self, k: int) -> int:
        value, have = 0, 0
        while have < k:
            value |= self._word() << have
            have += 64
        return value & ((1 << k) - 1)

    def below(self, m: int) -> int:
        """Uniform on ``{0, ..., m - 1}``: rejection sampling on ``bit_length(m - 1)`` bits (exact)."""
        if m == 1:
            return 0
        k = (m - 1).bit_length()
        while True:
            value = self.bits(k)
            if value < m:
                return value


def _bernoulli(bits: _Bits, numerator: int, denominator: int) -> bool:
    """Bernoulli(``numerator / denominator``), exactly."""
    return bits.below(denominator) < numerator


def _bernoulli_exp(bits: _Bits, numerator: int, denominator: int) -> bool:
    """Bernoulli(``exp(-gamma)``) for rational ``gamma = numerator / denominator >= 0``, exactly
    (CKS20 Algorithm 1: for ``gamma <= 1`` the parity of the first ``K`` with
    ``A_K ~ Bernoulli(gamma / K) = 0``; for ``gamma > 1``, ``floor(gamma)`` draws of
    ``Bernoulli(exp(-1))`` and one of ``Bernoulli(exp(-(gamma - floor(gamma))))``)."""
    if numerator > denominator:
        whole, numerator = divmod(numerator, denominator)
        for _ in range(whole):
            if not _bernoulli_exp(bits, 1, 1):
                return False
    k = 1
    while _bernoulli(bits, numerator, denominator * k):
        k += 1
    return k % 2 == 1


def _discrete_laplace(bits: _Bits, s: int, t: int) -> int:
    """One draw of the discrete Laplace with scale ``t / s`` (pmf proportional to
    ``exp(-|x| s / t)`` on the integers), exactly (CKS20 Algorithm 2)."""
    while True:
        u = bits.below(t)
        if not _bernoulli_exp(bits, u, t):
            continue
        v = 0
        while _bernoulli_exp(bits, 1, 1):
            v += 1
        y = (u + t * v) // s
        negative = _bernoulli(bits, 1, 2)
        if negative and y == 0:
            continue
        return -y if negative else y


def _discrete_gaussian(bits: _Bits, a: int, b: int) -> int:
    """One draw of the discrete Gaussian ``N_Z(0, sigma**2)``, ``sigma**2 = a / b`` (pmf
    proportional to ``exp(-x**2 / (2 sigma**2))`` on the integers), exactly (CKS20 Algorithm 3:
    a discrete Laplace of scale ``t = floor(sigma) + 1`` accepted with probability
    ``exp(-(|Y| - sigma**2 / t)**2 / (2 sigma**2))``)."""
    t = math.isqrt(a // b) + 1
    while True:
        y = _discrete_laplace(bits, 1, t)
        # (|y| - a / (b t))**2 / (2 a / b) = (|y| b t - a)**2 / (2 a b t**2)
        if _bernoulli_exp(bits, (abs(y) * b * t - a) ** 2, 2 * a * b * t * t):
            return y


def discrete_gaussian_noise(rng: np.random.Generator, std: float, shape: tuple) -> np.ndarray:
    """The draw point of discrete Gaussian noise: ``shape`` independent exact draws of
    ``N_Z(0, s**2)``, ``s**2`` the float ``std**2`` rounded up to a multiple of
    ``2**-VARIANCE_BITS`` (``s >= std``), as an integer array (``object`` dtype: Python ints, exact
    whatever their size).

    The privacy audits weaken it like :func:`skdpsco._noise.gaussian_noise` (the
    ``'gaussian'`` kind of ``benchmarks/audits.py``'s ``weakened``).
    """
    if not float(std) > 0:
        raise ValueError(f"std must be positive; got {std!r}.")
    # std**2 rounded up to a multiple of 2**-VARIANCE_BITS: more noise, never less, and integers
    # of a few words in the sampler's exact arithmetic
    scaled = math.ceil(Fraction(float(std)) ** 2 * 2**VARIANCE_BITS)
    return _exact_draws(rng, shape, _discrete_gaussian, scaled, 2**VARIANCE_BITS)


def discrete_laplace_noise(rng: np.random.Generator, scale: float, shape: tuple) -> np.ndarray:
    """The draw point of discrete Laplace noise: ``shape`` independent exact draws with pmf
    proportional to ``exp(-|x| / scale)`` (``scale`` taken as the exact rational value of the
    float), as an integer array (``object`` dtype)."""
    scale = Fraction(float(scale))
    if scale <= 0:
        raise ValueError(f"scale must be positive; got {scale!r}.")
    return _exact_draws(rng, shape, _discrete_laplace, scale.denominator, scale.numerator)


def _exact_draws(rng: np.random.Generator, shape: tuple, sample, *parameters) -> np.ndarray:
    """``shape`` independent ``sample(bits, *parameters)`` on one bit source over ``rng``, as an
    ``object`` array of Python ints."""
    bits = _Bits(rng)
    return np.array([sample(bits, *parameters) for _ in range(math.prod(shape))], dtype=object).reshape(shape)


# -- the grid release -------------------------------------------------------------------------
def _grid_step(sensitivity: float, spread: float) -> float:
    """The power of two ``gamma <= 2**-(GRID_BITS + 1) sensitivity / spread``."""
    return 2.0 ** (math.floor(math.log2(sensitivity / spread)) - GRID_BITS - 1)


def grid_release(value, scale: float, sensitivity: float, rng: np.random.Generator, laplace: bool = False) -> np.ndarray:
    """``gamma * (round(value / gamma) + Z)`` (module docstring): the release of ``value`` on the
    grid ``gamma Z^d`` with exact discrete noise.

    Parameters
    ----------
    value : float or ndarray
        The data-dependent value, of replace-one sensitivity ``sensitivity`` (``l2`` for the
        Gaussian, ``l1`` for Laplace) in its own units.
    scale : float
        The planned continuous noise: Gaussian standard deviation, or Laplace scale.
    sensitivity : float
        As planned; with ``scale`` it fixes the planned guarantee (``rho = sensitivity**2 /
        (2 scale**2)``, or ``epsilon = sensitivity / scale``), which the grid release meets.
    rng : numpy.random.Generator
        Source of the bits (the secure generator in secure mode).
    laplace : bool
        Discrete Laplace (pure DP) instead of the discrete Gaussian.

    Returns
    -------
    ndarray (a float for a scalar ``value``)
    """
    value = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(value)):
        raise ValueError("A grid release needs a finite value.")
    d = max(value.size, 1)
    gamma = _grid_step(float(sensitivity), d if laplace else math.sqrt(d))
    noise_scale = float(scale) * (1.0 + 2.0**-GRID_BITS) / gamma
    centre = np.rint(value / gamma)  # exact: gamma is a power of two, rint of a float is exact
    # the draw points, looked up at call time (the audits weaken them)
    noise = (discrete_laplace_noise if laplace else discrete_gaussian_noise)(rng, noise_scale, value.shape)
    released = np.array([float(int(c) + int(z)) for c, z in zip(centre.ravel(), noise.ravel())]).reshape(value.shape)
    released *= gamma  # a deterministic function of the integers round(value / gamma) + Z
    return float(released) if released.ndim == 0 else released


def noisy_release(value, scale: float, rng: np.random.Generator, *, sensitivity: float, laplace: bool = False,
                  release=None):
    """The release ``value + noise`` of a single noisy statistic.

    Outside secure mode: ``value + release(value, scale, rng, draw)`` exactly as before, with
    ``release`` :func:`skdpsco._noise.release_noise` by default (the white-box audits'
    hook; a module that binds it at import passes its own name, looked up at its call) and
    ``draw`` the Laplace draw point :func:`skdpsco._noise.laplace_noise` when
    ``laplace``. In secure mode (``rng`` a secure generator, :func:`is_secure`):
    :func:`grid_release`, whose guarantee is the planned one (zCDP of the same ``rho`` for the
    Gaussian, :func:`secure_event`; the same pure epsilon for Laplace).
    """
    if is_secure(rng):
        return grid_release(value, scale, sensitivity, rng, laplace)
    release = _noise.release_noise if release is None else release
    return value + release(value, scale, rng, _noise.laplace_noise if laplace else None)


def secure_event(event):
    """The event of a mechanism whose Gaussian releases are grid releases (:func:`grid_release`):
    every :class:`~dp_accounting.GaussianDpEvent` ``z`` (``sigma / Delta``) becomes the
    :class:`~dp_accounting.ZCDpEvent` of the same ``rho = 1 / (2 z**2)`` (CKS20 Thm 4 / 14),
    through compositions and failure-probability wrappers; every other event is kept (pure-DP
    events hold as planned for the discrete Laplace). Also valid for a continuous Gaussian (its
    Renyi curve is that ``rho``'s): a fit with grid releases converts all its Gaussians, which
    costs nothing under the RDP conversion such a fit gets anyway."""
    from .accounting import FailureProbabilityDpEvent, zcdp_event

    if isinstance(event, dp_accounting.GaussianDpEvent):
        z = float(event.noise_multiplier)
        return zcdp_event(0.5 / z**2) if z > 0 else event
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return dp_accounting.ComposedDpEvent([secure_event(part) for part in event.events])
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return dp_accounting.SelfComposedDpEvent(secure_event(event.event), event.count)
    if isinstance(event, FailureProbabilityDpEvent):
        return FailureProbabilityDpEvent(secure_event(event.event), event.probability)
    return event
