"""Gaussian smoothing of non-smooth linear-model losses, in closed form.

The contraction-based solvers (amplification by iteration: PNSGD, Snowball-SGD; the ``2 L eta``
sensitivity of Phased-SGD) need every per-row loss to be ``beta``-smooth, with steps
``eta <= 2 / beta`` (``spec/feldman.md`` §0.4, pitfall D2). The hinge and the absolute loss are
not differentiable; this module replaces them by their Gaussian convolutions (FMTT18 Thm 33 /
Cor. 34, ``spec/feldman.md`` §B10, "GLM smoothing"):

    ``phi_s(z, y) = E_{g ~ N(0, s**2)} phi(z + g, y)``,

smoothing the 1-D link rather than the loss in ``w``, so that the error carries no ``sqrt(d)``.

Closed forms
------------
Both supported links are convex and piecewise linear with one kink. In the variable ``u``, an
affine function of the margin with ``du/dz = +-1`` and the kink at ``u = 0``, they read
``phi = J u_+ + a u`` (jump ``J`` of the slope at the kink, slope ``a`` left of it):

=============================  =========================  =====  =====
base loss                      ``u``                      ``J``  ``a``
=============================  =========================  =====  =====
hinge ``(1 - y z)_+``          ``1 - y z``                1      0
absolute ``|y - z|`` (p = 1)   ``z - y``                  2      -1
pinball, quantile ``q``        ``z - y``                  1      -q
=============================  =========================  =====  =====

With ``t = u / s``, ``Phi`` and ``varphi`` the standard normal cdf and pdf,
``E (u + g)_+ = u Phi(t) + s varphi(t)`` (integrate ``(u + g) varphi(g / s) / s`` over
``g > -u``), hence [``spec/feldman.md`` §B10, read]

* value ``phi_s = J (u Phi(t) + s varphi(t)) + a u`` (hinge: ``u Phi(t) + s varphi(t)``;
  absolute: ``u (2 Phi(t) - 1) + 2 s varphi(t)``);
* ``d phi_s / du = J Phi(t) + a`` (hinge ``Phi(t)``, absolute ``2 Phi(t) - 1``, pinball
  ``Phi(t) - q``; in the residual ``r = y - z``, ``d phi_s / dr = Phi(r / s) - (1 - q)``), and
  ``d phi_s / dz = (du/dz) d phi_s / du``;
* ``d^2 phi_s / dz^2 = J varphi(t) / s`` ``> 0`` (convex), at most ``J varphi(0) / s``
  (hinge and pinball ``1 / (s sqrt(2 pi))``, absolute ``sqrt(2 / pi) / s``) [derived];
* ``phi_s - phi = J s G(-|t|)`` with ``G(t) = t Phi(t) + varphi(t)`` [derived, from
  ``G(t) - G(-t) = t``]: positive, decreasing in ``|u|``, so
  ``phi <= phi_s <= phi + J s varphi(0)`` (hinge and pinball ``s / sqrt(2 pi)``, absolute
  ``s sqrt(2 / pi)``), the equality at the kink (§B10: ``f <= f_hat <= f + error``, one error
  term in the excess risk).

Numerics: the value is computed as ``phi + J s G(-|t|)``, the base loss (same arithmetic as
the base) plus a gap that is never negative in floating point, so ``phi <= phi_s`` holds exactly;
``G(-|t|)`` uses Mills' ratio (:func:`scipy.special.erfcx`), relative error about
``1e-16 t**2`` while representable and ``0`` beyond ``|t| ~ 38``. ``Phi`` is
:func:`scipy.special.ndtr`, accurate in both tails; ``varphi`` never overflows (it is exactly 0
in float64 beyond ``|t| = 40``). No warnings for any ``|u| / s`` up to ``1e300``.

Losses this module refuses (``ValueError``)
-------------------------------------------
* Already smooth losses (logistic, multinomial logistic, Huber, squared loss ``p = 2``, squared
  hinge ``q = 2``): they can be used directly. Smoothing cannot help them: for the squared
  hinge, ``E (u + g)_+**2 = (u**2 + s**2) Phi(t) + u s varphi(t)`` [derived; checked
  numerically] has second derivative ``2 Phi(t)``, so ``beta`` shrinks by at most the factor
  ``Phi((1 + B R) / s)`` while ``L`` and the value grow (by up to ``s**2``).
* Hoelder-smooth losses (q-hinge, ``|y - z|**p`` with ``1 < p < 2``): their Gaussian convolution
  has no elementary closed form, and exact gradients are required (caveat below); they have
  their own Hoelder-aware solvers (``spec/wang_holder.md``).

Privacy caveat (``spec/feldman.md`` §B10 "critical", pitfall D15)
------------------------------------------------------------------
Every contraction-based guarantee needs the *exact* map ``w -> w - eta grad f_s(w)`` to be
non-expansive. The unbiased "sampled smoothing" oracle ``d phi(z + g)`` (``g`` drawn, any number
of draws) is a subgradient of a non-smooth function and is **not** non-expansive (1-D
counterexample ``|w|`` at ``w = +-e``, ``eta > 2 e``), so a solver using it would void its
privacy proof. This module therefore provides exact closed-form gradients only and deliberately
no sampled oracle; nothing in the library may use one inside a contraction-based solver.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import erfcx, ndtr

from .losses import (
    HingeLoss,
    LossConstants,
    MarginLoss,
    PinballLoss,
    PowerLoss,
    _binary,
    _check_real,
    _residual,
)

__all__ = ["GaussianSmoothedLoss", "default_smoothing_width", "smooth"]

_PDF_AT_0 = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2 = math.sqrt(2.0)
_SQRT_HALF_PI = math.sqrt(math.pi / 2.0)
_PDF_ZERO_BEYOND = 40.0  # exp(-40**2 / 2) = exp(-800) underflows to 0.0 in float64


def _normal_pdf(t):
    """Standard normal density, without overflow in ``t**2`` for huge ``|t|``."""
    t = np.minimum(np.abs(t), _PDF_ZERO_BEYOND)
    return _PDF_AT_0 * np.exp(-0.5 * t * t)


def _gap(x):
    """``G(-x) = varphi(x) - x Phi(-x) = E (g - x)_+`` for ``x >= 0``, ``g ~ N(0, 1)``.

    Written as ``varphi(x) (1 - x M(x))`` with Mills' ratio ``M(x) = Phi(-x) / varphi(x) =
    sqrt(pi / 2) erfcx(x / sqrt(2))``: no subnormal intermediate, a relative error of about
    ``1e-16 x**2``, and never negative (``1 - x M(x) > 1 / (x**2 + 3)`` exceeds the rounding
    error wherever ``varphi(x)`` is not 0).
    """
    x = np.minimum(x, _PDF_ZERO_BEYOND)  # G(-x) is 0.0 beyond; avoids inf * 0 for x = inf
    return _normal_pdf(x) * (1.0 - x * _SQRT_HALF_PI * erfcx(x / _SQRT_2))


@dataclass(frozen=True)
class _KinkedLink:
    """A convex piecewise-linear link ``J u_+ + a u`` with one kink at ``u = 0``.

    Attributes
    ----------
    jump : float
        ``J > 0``, the jump of the slope at the kink.
    left_slope : float
        ``a``, the slope for ``u < 0``.
    to_u : callable
        ``(z, y) -> (u, du/dz)`` with ``du/dz = +-1``.
    u_range : callable
        ``(t, R, B_y) -> (lo, hi)``: the values of ``u`` reachable with a row of norm ``t``,
        ``|z| <= R t`` and the admissible labels. The interval grows with ``t``.
    """

    jump: float
    left_slope: float
    to_u: Callable
    u_range: Callable

    @property
    def lipschitz(self) -> float:
        """``sup |d phi / dz|`` over all margins, ``max(|a|, |a + J|)``."""
        return max(abs(self.left_slope), abs(self.left_slope + self.jump))

    def value(self, u, s):
        """``phi(u) + J s G(-|u| / s)``: the base loss plus the non-negative smoothing gap."""
        return self.jump * (np.maximum(u, 0.0) + s * _gap(np.abs(u) / s)) + self.left_slope * u

    def slope(self, u, s):
        """``d phi_s / du = J Phi(u / s) + a``, monotone in ``u``."""
        return self.jump * ndtr(u / s) + self.left_slope

    def curvature(self, u, s):
        """``d^2 phi_s / du^2 = J varphi(u / s) / s``, largest at the kink."""
        return self.jump * _normal_pdf(u / s) / s


def _hinge_u(z, y):
    y, yz = _binary(z, y)
    return 1.0 - yz, -y


def _hinge_range(t, R, B_y):
    return 1.0 - R * t, 1.0 + R * t  # |y z| <= R t


def _absolute_u(z, y):
    return -_residual(z, y), 1.0


def _absolute_range(t, R, B_y):
    return -(B_y + R * t), B_y + R * t  # u = z - y, |z| <= R t, |y| <= B_y


_HINGE = _KinkedLink(1.0, 0.0, _hinge_u, _hinge_range)
_ABSOLUTE = _KinkedLink(2.0, -1.0, _absolute_u, _absolute_range)


def _link_of(base) -> _KinkedLink:
    """The closed form of ``base``, or a ValueError saying why there is none."""
    if type(base) is HingeLoss:
        return _HINGE
    if type(base) is PowerLoss and base.p == 1.0:
        return _ABSOLUTE
    if type(base) is PinballLoss:
        return _KinkedLink(1.0, -base.quantile, _absolute_u, _absolute_range)
    if not isinstance(base, MarginLoss):
        raise ValueError(f"base must be a skdpsco.losses.MarginLoss; got {base!r}.")
    # smoothness is None / finite / inf on every domain; the bounds only fix the numbers
    smoothness = base.constants(1.0, 1.0, 1.0).smoothness
    if smoothness is not None and math.isfinite(smoothness):
        raise ValueError(
            f"{base!r} is already smooth (finite smoothness constant beta): use it directly; "
            "Gaussian smoothing would only add approximation error."
        )
    if smoothness is not None:
        raise ValueError(
            f"{base!r} is Hoelder-smooth with exponent < 1: its Gaussian convolution has no "
            "elementary closed form, and contraction-based solvers need exact smoothed "
            "gradients (spec feldman.md §B10). Use a Hoelder-aware solver for it instead."
        )
    raise ValueError(
        f"No closed-form Gaussian smoothing is implemented for {base!r}; supported bases are "
        "HingeLoss(), PowerLoss(1) (absolute loss) and PinballLoss(q)."
    )


@dataclass(frozen=True)
class GaussianSmoothedLoss(MarginLoss):
    """Gaussian convolution of a hinge, absolute or pinball loss, with exact value and derivative.

    ``phi_s(z, y) = E_{g ~ N(0, width**2)} phi(z + g, y)`` in closed form (module docstring,
    ``spec/feldman.md`` §B10). A :class:`~skdpsco.losses.MarginLoss` of the same ``task`` as
    its base, usable wherever a smooth loss is required.

    Constants on the public domain ``||x|| <= B``, ``||w|| <= R``, ``|y| <= B_y`` [derived;
    the chain rule of :mod:`skdpsco.losses`, with ``t = ||x||`` and the reachable interval
    ``U(t)`` of ``u`` growing with ``t``, so every supremum is attained at ``t = B``]:

    * ``L = B sup_{u in U(B)} |J Phi(u / s) + a|`` (monotone in ``u``: the larger endpoint
      value): hinge ``B Phi((1 + B R) / s)``, absolute ``B (2 Phi((B_y + B R) / s) - 1)``,
      pinball ``B max(Phi(m / s) - q, q - Phi(-m / s))`` with ``m = B_y + B R``; the base's
      ``L`` on ``R^p`` and never above it.
    * ``beta = B**2 sup_{u in U(B)} J varphi(u / s) / s = B**2 J varphi(dist(0, U(B)) / s) / s``:
      ``B**2 J varphi(0) / s`` once the kink is reachable (always for the absolute and pinball
      losses, ``B R >= 1`` for the hinge), ``B**2 varphi((1 - B R) / s) / s`` for the hinge with
      ``B R < 1``. It is the Lipschitz constant of ``grad_w f_s`` on the ball, and a gradient
      step acts on the 1-D margin direction only, so ``eta <= 2 / beta`` makes it
      non-expansive on the ball (FMTT Prop. 18 applied along ``x``). ``beta`` scales as
      ``1 / width``.
    * ``holder_exponent = 1``, ``holder_constant = beta``; ``growth = None`` (as the base).

    Parameters
    ----------
    base : MarginLoss
        :class:`~skdpsco.losses.HingeLoss`, :class:`~skdpsco.losses.PowerLoss` with ``p = 1``
        or :class:`~skdpsco.losses.PinballLoss`.
    width : float
        Standard deviation ``s > 0`` of the Gaussian, in margin units; see
        :func:`default_smoothing_width`.

    Raises
    ------
    ValueError
        For a width that is not a positive finite real, or a base without a closed form
        (already smooth, or Hoelder-smooth, see the module docstring).
    """

    base: MarginLoss
    width: float

    def __post_init__(self):
        _link_of(self.base)
        width = _check_real(self.width, "width", 0.0, math.inf, low_open=True, high_open=True)
        object.__setattr__(self, "width", width)

    @property
    def name(self) -> str:
        return f"gaussian_smoothed_{self.base.name}"

    @property
    def task(self) -> str:
        return self.base.task

    @property
    def _link(self) -> _KinkedLink:
        return _link_of(self.base)

    def value(self, z, y):
        u, _ = self._link.to_u(z, y)
        return self._link.value(u, self.width)

    def derivative(self, z, y):
        u, du_dz = self._link.to_u(z, y)
        return du_dz * self._link.slope(u, self.width)

    def approximation_error(self, y_bound: float | None = None) -> float:
        """``sup |phi_s - phi|`` per row: ``J width varphi(0)``, attained at the kink.

        Hinge and pinball ``width / sqrt(2 pi)``, absolute ``width sqrt(2 / pi)`` (``spec/feldman.md`` §B10,
        "GLM smoothing"). Since ``phi <= phi_s <= phi + error`` row by row, a minimiser of the
        smoothed risk has excess (unsmoothed) risk at most its smoothed excess risk plus this
        error: ``F(w) - F* <= [F_s(w) - F_s*] + error``.

        Parameters
        ----------
        y_bound : float or None
            Accepted for a call with the same public bounds as :meth:`constants`; the error of
            the supported links does not depend on it.
        """
        if y_bound is not None:
            _check_real(y_bound, "y_bound", 0.0, math.inf, low_open=False, high_open=True)
        return self._link.jump * self.width * _PDF_AT_0

    def _constants(self, B, R, B_y):
        link, s = self._link, self.width
        lo, hi = link.u_range(B, R, B_y or 0.0)
        L = B * max(abs(link.slope(lo, s)), abs(link.slope(hi, s)))
        beta = B**2 * link.curvature(max(0.0, lo, -hi), s)
        return LossConstants(float(L), float(beta), 1.0, float(beta), None)


def smooth(loss: MarginLoss, width: float) -> GaussianSmoothedLoss:
    """Gaussian smoothing of ``loss`` with standard deviation ``width`` (closed form).

    Parameters
    ----------
    loss : MarginLoss
        Hinge loss, absolute loss (``PowerLoss(1)``) or pinball loss.
    width : float
        ``s > 0``; :func:`default_smoothing_width` gives a rate-balancing default.

    Returns
    -------
    GaussianSmoothedLoss

    Raises
    ------
    ValueError
        If ``loss`` is already smooth, Hoelder-smooth (no elementary closed form), or
        otherwise unsupported, or if ``width`` is not a positive finite real.
    """
    return GaussianSmoothedLoss(loss, width)


def default_smoothing_width(
    n_samples: int,
    n_params: int,
    epsilon: float,
    delta: float,
    data_norm: float,
    radius: float,
    base_loss: MarginLoss,
) -> float:
    """Width balancing the smoothing error against the optimal DP-SCO rate.

    Public quantities only. The contraction-based solvers reach the excess risk
    ``R L r`` with ``r = 1 / sqrt(n) + sqrt(p ln(1 / delta)) / (epsilon n)`` (FKT20 Thm 1.1 in
    (epsilon, delta) form, ``spec/feldman.md`` §A5, up to a constant factor), ``L = B L_phi``
    the base loss's Lipschitz constant (``L_phi = sup |phi'| = 1`` for hinge and absolute
    loss, ``max(q, 1 - q)`` for the pinball loss). Optimising the smoothed loss adds the error ``e s`` with ``e = J varphi(0)``
    (:meth:`GaussianSmoothedLoss.approximation_error`; ``§B10``). Setting ``e s = R L r`` and
    solving for ``s``:

        ``s = R B L_phi r / e``  (hinge: ``sqrt(2 pi) R B r``; absolute: ``sqrt(pi / 2) R B r``),

    so the total excess risk is at most the solver's bound plus ``R L r``: the rate is kept.
    It is in margin units (``|z| <= R B``) and decreases in ``n`` and in ``epsilon``.

    Step constraint: ``beta_hat <= B**2 e / s`` (the bound of :class:`GaussianSmoothedLoss`),
    which at this width is ``B e**2 / (R L_phi r)``, i.e.

        ``beta_hat <= c0 (L / D) min{sqrt(n), epsilon n / sqrt(p ln(1 / delta))}``,
        ``c0 = 2 e**2 / L_phi**2`` (hinge ``1 / pi``, absolute ``4 / pi``), ``D = 2 R``,

    the form of the smoothness condition of FKT Thm 1.1. Equivalently, every step
    ``eta <= 2 / beta_hat = (L_phi**2 / e**2) (D / L) r`` is contractive, in particular every
    ``eta <= (L_phi**2 / e**2) D / (L sqrt(n))`` (``2 pi`` resp. ``pi / 2`` times
    ``D / (L sqrt(n))``), which covers Phased-SGD's first step ``(D / L) min{4 / sqrt(n),
    ...} / 4``; a solver with a larger step must shrink it (pitfall D2), as Snowball-SGD does.

    Parameters
    ----------
    n_samples, n_params : int
        ``n >= 1`` rows and ``p >= 1`` parameters (all classes, intercept included).
    epsilon, delta : float
        Target guarantee, ``epsilon > 0`` and ``0 < delta < 1``.
    data_norm, radius : float
        Public bounds ``B`` on ``||x||`` and ``R`` on ``||w||`` (a bounded domain is needed).
    base_loss : MarginLoss
        The loss to be smoothed (hinge, absolute or pinball loss).

    Returns
    -------
    float
        The width ``s > 0``.

    Raises
    ------
    ValueError
        For an argument out of range (named in the message) or an unsupported ``base_loss``.
    """
    link = _link_of(base_loss)
    for name, value in (("n_samples", n_samples), ("n_params", n_params)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}.")
    inf = math.inf
    eps = _check_real(epsilon, "epsilon", 0.0, inf, low_open=True, high_open=True)
    dlt = _check_real(delta, "delta", 0.0, 1.0, low_open=True, high_open=True)
    B = _check_real(data_norm, "data_norm", 0.0, inf, low_open=True, high_open=True)
    R = _check_real(radius, "radius", 0.0, inf, low_open=True, high_open=True)
    n = int(n_samples)
    rate = 1.0 / math.sqrt(n) + math.sqrt(n_params * math.log(1.0 / dlt)) / (eps * n)
    return R * B * link.lipschitz * rate / (link.jump * _PDF_AT_0)
