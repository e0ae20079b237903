"""Loss catalogue for linear models, on margins.

A linear model scores a row ``x`` by the margin ``z = <w, x>`` (binary, regression; ``w`` of
shape ``(p,)``) or by the vector of margins ``z = W x`` (multiclass; ``W`` of shape ``(K, p)``).
Every loss here is a function ``phi(z, y)`` of the margin and the label only: the estimator
computes ``z``, and the gradient in the parameters is, by the chain rule,

* ``grad_w f(w, (x, y)) = phi'(z, y) x`` (binary, regression), and
* ``grad_W f(W, (x, y)) = phi'(z, y) x^T``, an outer product (multiclass; norms of ``W`` and of
  gradients are Frobenius norms),

i.e. ``derivative(z, y)[:, None] * X`` resp. ``derivative(z, y)[:, :, None] * X[:, None, :]``
row by row, and ``derivative(z, y).T @ X`` summed over the rows.

Constants
---------
:meth:`MarginLoss.constants` returns the constants the theory needs (:class:`LossConstants`) as
functions of the public bounds ``||x||_2 <= B`` (``data_norm``), ``|y| <= B_y`` (``y_bound``,
regression only) and ``||w||_2 <= R`` (``radius``; ``None`` for all of ``R^p``). They are
suprema over *every* possible row and parameter in that domain, never over the training data
(``spec/wang_holder.md`` §6 item 6). They all follow from two facts about the link:

* **Lipschitz** (``spec/feldman.md`` §0.1): ``||grad_w f|| = |phi'(z, y)| ||x||`` with
  ``|z| <= R ||x||`` (Cauchy-Schwarz), so ``L = sup |phi'(z, y)| ||x||`` over ``||x|| <= B``,
  ``|z| <= R ||x||`` and the admissible labels. For every loss here but the multinomial one
  with ``K > 2`` (an upper bound there) the supremum is attained on the sphere ``||x|| = B``
  with ``w`` (anti-)aligned with ``x``.
* **Hoelder / smoothness** (``spec/wang_holder.md`` §1.1, §1.3): if ``phi'`` is
  ``alpha``-Hoelder in ``z`` with constant ``H_phi`` then
  ``||grad f(w) - grad f(w')|| = |phi'(z) - phi'(z')| ||x||
  <= H_phi |<w - w', x>|^alpha ||x|| <= H_phi B^(1 + alpha) ||w - w'||^alpha``,
  so ``H = H_phi B^(1 + alpha)``; for ``alpha = 1`` this is the smoothness
  ``beta = sup |phi''| B^2``. The bound is attained by rows on the sphere with ``w - w'``
  parallel to ``x``. The multiclass versions replace ``|.|`` by the Euclidean norm in ``R^K``
  and use ``||(W - W') x|| <= ||W - W'||_F ||x||``.

The constants enter the privacy analysis (step sizes ``eta <= 2 / beta`` for contraction,
``spec/feldman.md`` §0.4; sensitivities through ``L`` and ``(alpha, H)``, ``spec/wang_holder.md``
§6 item 7): they are upper bounds, never estimates. Labels are assumed to be in the public label
set (``{-1, +1}`` for binary, ``0..K-1`` for multiclass, ``[-B_y, B_y]`` for regression); the
estimators clip and encode them before calling a loss.
"""

from __future__ import annotations

import abc
import math
import numbers
from dataclasses import dataclass, field, fields

import numpy as np
from scipy.special import expit, logsumexp, softmax

__all__ = [
    "HingeLoss",
    "HuberLoss",
    "LogisticLoss",
    "LossConstants",
    "MarginLoss",
    "MultinomialLogisticLoss",
    "PinballLoss",
    "PoissonLoss",
    "PowerLoss",
    "QHingeLoss",
    "SquaredHingeLoss",
    "WeightedLoss",
    "get_loss",
    "weighted_targets",
]


@dataclass(frozen=True)
class LossConstants:
    """Constants of a loss on a public domain, as used by the DP-SCO theory.

    All suprema run over rows with ``||x||_2 <= data_norm``, labels in the public label set
    (``|y| <= y_bound`` for regression) and parameters ``w`` in the ball ``||w||_2 <= radius``
    (all of ``R^p`` when ``radius`` is None); for multiclass losses ``w`` is a ``(K, p)`` matrix
    and every norm of ``w`` or of a gradient is the Frobenius norm.

    Attributes
    ----------
    lipschitz : float
        ``L = sup ||grad_w f(w, (x, y))||_2`` (``spec/feldman.md`` §0.1); ``np.inf`` when the
        gradient is unbounded on the domain (non-Lipschitz losses on ``R^p``).
    smoothness : float or None
        ``beta``, a Lipschitz constant of ``grad_w f`` on the domain (``spec/feldman.md`` §0.1,
        needed for the contraction ``eta <= 2 / beta`` of §0.4). ``None`` for losses that are not
        differentiable (hinge, absolute loss); ``np.inf`` for losses that are differentiable but
        whose gradient is only ``alpha``-Hoelder with ``alpha < 1``.
    holder_exponent : float
        ``alpha`` in ``[0, 1]`` (``spec/wang_holder.md`` §1.1, §1.3).
    holder_constant : float
        ``H`` with ``||grad f(w) - grad f(w')|| <= H ||w - w'||^alpha`` for all ``w, w'`` in the
        domain and every row. For ``alpha = 0`` it is the largest difference of two subgradients
        at the same row (``spec/wang_holder.md`` §1.3); for ``alpha = 1`` it equals
        ``smoothness``.
    growth : float or None
        ``kappa`` of ``kappa``-growth (``spec/asi_growth.md`` §1.2) when the loss guarantees it
        for every data distribution, else ``None``. No loss of this catalogue does: growth of
        ``E f(w, (x, y))`` always depends on the distribution (a point mass at ``x = 0`` makes
        every loss constant in ``w``, so no ``kappa < inf`` holds); see each loss's notes.
    """

    lipschitz: float
    smoothness: float | None
    holder_exponent: float
    holder_constant: float
    growth: float | None


def _check_real(value, name: str, low: float, high: float, *, low_open: bool, high_open: bool):
    """Return ``value`` as a float after checking that it lies in the stated interval.

    Raises
    ------
    ValueError
        Naming ``name`` and the allowed interval, if ``value`` is not a real number in it.
    """
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    x = float(value) if real else math.nan
    if not ((low < x if low_open else low <= x) and (x < high if high_open else x <= high)):
        raise ValueError(f"{name} must be a real number in {interval}; got {value!r}.")
    return x


class MarginLoss(abc.ABC):
    """A convex loss of a linear model, evaluated on margins ``z``.

    Attributes
    ----------
    name : str
        Identifier used by :func:`get_loss`.
    task : {"binary", "multiclass", "regression"}
        ``"binary"``: ``y`` in ``{-1, +1}``, ``z`` of shape ``(n,)``. ``"multiclass"``: ``y``
        integer labels ``0..K-1``, ``z`` of shape ``(n, K)``. ``"regression"``: real ``y``,
        ``z`` of shape ``(n,)``.
    """

    name: str
    task: str

    @abc.abstractmethod
    def value(self, z, y) -> np.ndarray:
        """Per-row loss ``phi(z_i, y_i)``, an array of shape ``(n,)``."""

    @abc.abstractmethod
    def derivative(self, z, y) -> np.ndarray:
        """``d phi / d z`` row by row, of the shape of ``z``; a valid subgradient at kinks."""

    def constants(
        self, data_norm: float, radius: float | None, y_bound: float | None = None
    ) -> LossConstants:
        """Constants of the loss on the public domain (see :class:`LossConstants`).

        Parameters
        ----------
        data_norm : float
            ``B > 0``, the bound on ``||x||_2`` of a row (intercept column included).
        radius : float or None
            ``R > 0``, the radius of the parameter ball; ``None`` for all of ``R^p``.
        y_bound : float or None
            ``B_y >= 0``, the bound on ``|y|``. Required by regression losses (every
            regression estimator clips ``y`` to a public bound, DESIGN.md "Privacy model");
            ignored by classification losses.

        Returns
        -------
        LossConstants

        Raises
        ------
        ValueError
            If a bound is outside its range, or ``y_bound`` is None for a regression loss.
        """
        inf = math.inf
        B = _check_real(data_norm, "data_norm", 0.0, inf, low_open=True, high_open=True)
        R = (
            inf
            if radius is None
            else _check_real(radius, "radius", 0.0, inf, low_open=True, high_open=True)
        )
        B_y = None
        if self.task == "regression":
            if y_bound is None:
                raise ValueError(
                    f"y_bound is required for the regression loss {self.name!r}: pass the public "
                    "bound on |y|, a real number in [0, inf)."
                )
            B_y = _check_real(y_bound, "y_bound", 0.0, inf, low_open=False, high_open=True)
        return self._constants(B, R, B_y)

    @abc.abstractmethod
    def _constants(self, B: float, R: float, B_y: float | None) -> LossConstants:
        """Constants for validated bounds; ``R = inf`` stands for ``R^p``."""


def _binary(z, y):
    """Float64 labels ``y`` in ``{-1, +1}`` and the signed margins ``y z``."""
    y = np.asarray(y, dtype=np.float64)
    return y, y * np.asarray(z, dtype=np.float64)


def _residual(z, y):
    """Float64 residual ``r = y - z`` of a regression loss."""
    return np.asarray(y, dtype=np.float64) - np.asarray(z, dtype=np.float64)


@dataclass(frozen=True)
class LogisticLoss(MarginLoss):
    """Logistic loss ``phi(z, y) = log(1 + exp(-y z))``, ``y`` in ``{-1, +1}``.

    Constants (``spec/wang_holder.md`` §1.3, last row; ``sigma`` is the logistic function):

    * ``phi'(z) = -y sigma(-y z)`` and ``|y z| <= R B``, so
      ``L = B sigma(B R)`` (``= B`` on ``R^p``; attained by ``x = B u``, ``w = -y R u``);
    * ``phi''(z) = sigma(z) sigma(-z) <= 1/4`` (at ``z = 0``), so ``beta = B^2 / 4``;
    * ``alpha = 1``, ``H = beta``.

    Growth: none guaranteed (the population risk can be flat, e.g. ``x = 0``, or have no
    minimiser in the interior on separable data), so ``growth = None``.
    """

    name = "logistic"
    task = "binary"

    def value(self, z, y):
        _, u = _binary(z, y)
        return np.logaddexp(0.0, -u)

    def derivative(self, z, y):
        y, u = _binary(z, y)
        return -y * expit(-u)

    def _constants(self, B, R, B_y):
        beta = B**2 / 4.0
        return LossConstants(float(B * expit(B * R)), beta, 1.0, beta, None)


@dataclass(frozen=True)
class MultinomialLogisticLoss(MarginLoss):
    """Multinomial logistic (softmax cross-entropy) loss ``logsumexp(z) - z_y``, ``z`` in ``R^K``.

    ``W`` has shape ``(K, p)``, ``z = W x`` and ``grad_W f = (s - e_y) x^T`` with
    ``s = softmax(z)`` and ``e_y`` the one-hot vector of ``y``. Constants [derived here; the
    seeds have no multiclass losses, ``spec/wang_holder.md`` §6 item 14]:

    * **Lipschitz.** ``||(s - e_y) x^T||_F = ||s - e_y||_2 ||x||`` and
      ``||s - e_y||^2 = (1 - s_y)^2 + sum_{k != y} s_k^2 <= 2 (1 - s_y)^2``. Further
      ``1 - s_y = S / (1 + S)`` with ``S = sum_{k != y} exp(z_k - z_y) <= (K - 1) exp(sqrt(2) R B)``
      because ``z_k - z_y <= sqrt(2) ||z|| <= sqrt(2) ||W||_F ||x||``. Hence
      ``L = sqrt(2) B sigma(sqrt(2) B R + log(K - 1))``; it is attained for ``K = 2`` (logits
      ``+-R B / sqrt(2)``) and tends to the global bound ``sqrt(2) B`` as ``R B -> inf``.
    * **Smoothness.** The Hessian in ``W`` is ``(diag(s) - s s^T) kron (x x^T)``, of operator
      norm ``||diag(s) - s s^T||_op ||x||^2``. By Gershgorin, row ``k`` of ``diag(s) - s s^T``
      has diagonal ``s_k (1 - s_k)`` and off-diagonal absolute sum ``s_k (1 - s_k)``, so every
      eigenvalue is ``<= 2 s_k (1 - s_k) <= 1/2``, with equality for ``s = (1/2, 1/2, 0, ...)``.
      Hence ``beta = B^2 / 2`` (attained for ``K = 2`` at ``W = 0``), ``alpha = 1``,
      ``H = beta``.
    * Growth: none guaranteed (as for :class:`LogisticLoss`; moreover adding a constant to every
      row of ``W`` leaves the loss unchanged, so minimisers are never unique on ``R^{K x p}``).

    Parameters
    ----------
    n_classes : int
        ``K >= 2``.
    """

    n_classes: int
    name = "multinomial_logistic"
    task = "multiclass"

    def __post_init__(self):
        K = self.n_classes
        if not isinstance(K, numbers.Integral) or isinstance(K, bool) or K < 2:
            raise ValueError(f"n_classes must be an integer >= 2; got {K!r}.")
        object.__setattr__(self, "n_classes", int(K))

    def _check(self, z, y):
        z = np.asarray(z, dtype=np.float64)
        y = np.asarray(y)
        if z.ndim != 2 or z.shape[1] != self.n_classes:
            raise ValueError(f"z must have shape (n, {self.n_classes}); got {z.shape}.")
        if y.size and not (
            np.issubdtype(y.dtype, np.integer) and y.min() >= 0 and y.max() < self.n_classes
        ):
            raise ValueError(f"y must be an integer array of labels in 0..{self.n_classes - 1}.")
        return z, y

    def value(self, z, y):
        z, y = self._check(z, y)
        return logsumexp(z, axis=1) - np.take_along_axis(z, y[:, None], axis=1)[:, 0]

    def derivative(self, z, y):
        z, y = self._check(z, y)
        grad = softmax(z, axis=1)
        grad[np.arange(z.shape[0]), y] -= 1.0
        return grad

    def _constants(self, B, R, B_y):
        L = math.sqrt(2.0) * B * expit(math.sqrt(2.0) * B * R + math.log(self.n_classes - 1))
        beta = B**2 / 2.0
        return LossConstants(float(L), beta, 1.0, beta, None)


@dataclass(frozen=True)
class HingeLoss(MarginLoss):
    """Hinge loss ``(1 - y z)_+``, ``y`` in ``{-1, +1}`` (``spec/wang_holder.md`` §1.3).

    Subgradient ``-y 1[y z < 1]`` (``0`` at the kink ``y z = 1``, a valid choice). Constants:

    * ``L = B`` on every domain (``|phi'| <= 1``, attained at ``w = 0``);
    * not differentiable: ``smoothness = None``;
    * ``alpha = 0``, ``H = B``: subgradients at one row lie on the segment ``[0, -y x]``
      (``spec/wang_holder.md`` §1.3). ``H`` is attained once the kink is reachable, i.e.
      ``B R >= 1``; for ``B R < 1`` the loss is linear on the domain and ``H = B`` is loose.

    Growth: none guaranteed (the paper's sharp example is the *l1-regularised* hinge loss,
    ``spec/asi_growth.md`` §1.5, not the loss itself), so ``growth = None``.
    """

    name = "hinge"
    task = "binary"

    def value(self, z, y):
        _, u = _binary(z, y)
        return np.maximum(0.0, 1.0 - u)

    def derivative(self, z, y):
        y, u = _binary(z, y)
        return np.where(u < 1.0, -y, 0.0)

    def _constants(self, B, R, B_y):
        return LossConstants(B, None, 0.0, B, None)


@dataclass(frozen=True)
class QHingeLoss(MarginLoss):
    """q-norm hinge loss ``(1 - y z)_+^q``, ``1 < q <= 2``, ``y`` in ``{-1, +1}``.

    ``spec/wang_holder.md`` §1.3 (q-hinge row). ``phi'(z) = -q y (1 - y z)_+^(q - 1)``.

    * ``L = q B (1 + B R)^(q - 1)``: ``1 - y z <= 1 + R ||x||``, attained by ``x = B u``,
      ``w = -y R u``. Unbounded on ``R^p`` (``L = inf``).
    * ``alpha = q - 1`` and ``H = q B^q``: ``t -> t_+^a`` is ``a``-Hoelder with constant 1 for
      ``a`` in ``(0, 1]`` (subadditivity of ``t^a``), so ``H_phi = q`` and
      ``H = q B^(1 + alpha)``. Attained (for ``B R >= 1``) with one margin at the kink.
    * ``beta = H = 2 B^2`` for ``q = 2``; for ``q < 2``, ``phi''`` is unbounded at the kink, so
      ``beta = inf`` (a finite value exists only when the kink is out of reach, ``B R < 1``;
      ``inf`` is reported there too, a valid bound).

    Growth: none guaranteed, ``growth = None``.

    Parameters
    ----------
    q : float
        Exponent in ``(1, 2]``; ``q = 2`` is :class:`SquaredHingeLoss`, ``q -> 1`` the hinge.
    """

    q: float
    name = "q_hinge"
    task = "binary"

    def __post_init__(self):
        q = _check_real(self.q, "q", 1.0, 2.0, low_open=True, high_open=False)
        object.__setattr__(self, "q", q)

    def value(self, z, y):
        _, u = _binary(z, y)
        return np.maximum(0.0, 1.0 - u) ** self.q

    def derivative(self, z, y):
        y, u = _binary(z, y)
        return -self.q * y * np.maximum(0.0, 1.0 - u) ** (self.q - 1.0)

    def _constants(self, B, R, B_y):
        q = self.q
        holder = q * B**q
        return LossConstants(
            q * B * (1.0 + B * R) ** (q - 1.0),
            holder if q == 2.0 else math.inf,
            q - 1.0,
            holder,
            None,
        )


@dataclass(frozen=True)
class SquaredHingeLoss(QHingeLoss):
    """Squared hinge loss ``(1 - y z)_+^2``: :class:`QHingeLoss` with ``q = 2``.

    ``L = 2 B (1 + B R)`` (``inf`` on ``R^p``), ``beta = H = 2 B^2``, ``alpha = 1``,
    ``growth = None``.
    """

    q: float = field(default=2.0, init=False, repr=False)
    name = "squared_hinge"


@dataclass(frozen=True)
class PowerLoss(MarginLoss):
    """p-th power regression loss ``|y - z|^p``, ``1 <= p <= 2``.

    ``p = 1`` is the absolute loss, ``p = 2`` the squared loss (``spec/wang_holder.md`` §1.3,
    q-norm regression row). With ``r = y - z``: ``phi'(z) = -p sign(r) |r|^(p - 1)`` (``0`` at
    ``r = 0`` for ``p = 1``, a valid subgradient).

    * ``L = p B (B_y + B R)^(p - 1)``: ``|r| <= B_y + R ||x||``, attained by ``y = B_y``,
      ``x = B u``, ``w = -R u``. For ``p = 1`` this is ``B`` on every domain; for ``p > 1`` it
      is unbounded on ``R^p`` (``L = inf``).
    * ``alpha = p - 1``, ``H = p 2^(2 - p) B^p``: ``u -> sign(u) |u|^a`` is ``a``-Hoelder with
      constant ``2^(1 - a)`` (subadditivity of ``t^a`` on one side of 0, concavity of ``t^a``
      across it; equality at ``u' = -u``), so ``H_phi = p 2^(1 - (p - 1))``. For ``p = 1`` this
      is ``2 B``, the largest difference of two subgradients; attained on every domain
      (``y = 0``, margins ``+-t``).
    * ``beta``: ``None`` for ``p = 1`` (not differentiable), ``2 B^2`` for ``p = 2``, ``inf``
      for ``1 < p < 2`` (``phi''`` is unbounded at ``r = 0``, which every domain reaches).

    Growth: ``growth = None``. ``spec/asi_growth.md`` §1.5 cites ``kappa``-growth for
    ``kappa``-power regression, but for integer ``kappa > 2``, over l1/l-inf-constrained domains,
    and as a property of the pair (loss, distribution). For ``1 < p <= 2`` on a ball,
    ``|r|^p`` is strongly convex in ``r`` on ``|r| <= B_y + B R`` (``phi'' >=
    p (p - 1) (B_y + B R)^(p - 2)``), so the population risk has 2-growth **if**
    ``E[x x^T]`` is positive definite: ``f(w) - f(w*) >= (m / 2) E[<x, w - w*>^2]`` by strong
    convexity and the optimality of ``w*``, i.e. ``(lambda, 2)``-growth with
    ``lambda = m lambda_min(E[x x^T])``, ``m = p (p - 1) (B_y + B R)^(p - 2)`` [derived]. That is
    a data assumption (``lambda_min`` is neither guaranteed positive nor public), so it is not
    reported here.

    Parameters
    ----------
    p : float
        Exponent in ``[1, 2]``.
    """

    p: float
    name = "power"
    task = "regression"

    def __post_init__(self):
        p = _check_real(self.p, "p", 1.0, 2.0, low_open=False, high_open=False)
        object.__setattr__(self, "p", p)

    def value(self, z, y):
        return np.abs(_residual(z, y)) ** self.p

    def derivative(self, z, y):
        r = _residual(z, y)
        return -self.p * np.sign(r) * np.abs(r) ** (self.p - 1.0)

    def _constants(self, B, R, B_y):
        p = self.p
        holder = p * 2.0 ** (2.0 - p) * B**p
        if p == 1.0:
            smoothness = None
        elif p == 2.0:
            smoothness = holder
        else:
            smoothness = math.inf
        return LossConstants(p * B * (B_y + B * R) ** (p - 1.0), smoothness, p - 1.0, holder, None)


@dataclass(frozen=True)
class HuberLoss(MarginLoss):
    """Huber loss of the residual ``r = y - z`` with threshold ``epsilon``.

    ``phi = r^2 / 2`` for ``|r| <= epsilon`` and ``epsilon |r| - epsilon^2 / 2`` otherwise;
    ``phi'(z) = -clip(r, -epsilon, epsilon)``. (``epsilon`` is an absolute threshold on the
    residual, not scikit-learn's ``HuberRegressor`` ratio to a fitted scale.)

    * ``L = B min(epsilon, B_y + B R)`` (``= epsilon B`` on ``R^p``): ``|phi'| <=
      min(epsilon, |r|)`` with ``|r| <= B_y + R ||x||``; Lipschitz on all of ``R^p``
      (``spec/feldman.md`` §B10).
    * ``phi'`` is 1-Lipschitz, so ``beta = B^2``, ``alpha = 1``, ``H = B^2`` (attained at
      ``r = 0``).

    Growth: none guaranteed (linear tails), ``growth = None``.

    Parameters
    ----------
    epsilon : float
        Threshold ``> 0``.
    """

    epsilon: float
    name = "huber"
    task = "regression"

    def __post_init__(self):
        eps = _check_real(self.epsilon, "epsilon", 0.0, math.inf, low_open=True, high_open=True)
        object.__setattr__(self, "epsilon", eps)

    def value(self, z, y):
        r = np.abs(_residual(z, y))
        eps = self.epsilon
        return np.where(r <= eps, 0.5 * r**2, eps * (r - 0.5 * eps))

    def derivative(self, z, y):
        return -np.clip(_residual(z, y), -self.epsilon, self.epsilon)

    def _constants(self, B, R, B_y):
        beta = B**2
        return LossConstants(B * min(self.epsilon, B_y + B * R), beta, 1.0, beta, None)


@dataclass(frozen=True)
class PinballLoss(MarginLoss):
    """Pinball (check) loss of quantile regression, ``r = y - z``, quantile ``q`` in ``(0, 1)``.

    ``phi = q r_+ + (1 - q) (-r)_+ = max(q r, (q - 1) r)`` (Koenker & Bassett 1978, "Regression
    quantiles", Econometrica 46(1), eq. 1.3): its minimiser over a constant is the ``q``-th
    quantile of ``y``. In ``u = z - y``, ``phi = u_+ - q u``: a convex piecewise-linear link with
    one kink (slope ``-q`` left of it, ``1 - q`` right), the form
    :mod:`skdpsco.smoothing` smooths in closed form. ``phi'(z) = 1[u > 0] - q``, and
    ``(1 - q) - q`` halfway, ``1/2 - q``, at the kink (``(sign(u) + 1) / 2 - q``: a valid
    subgradient, in ``[-q, 1 - q]``). For ``q = 1/2`` it is half the absolute loss, derivative
    included (:class:`PowerLoss` with ``p = 1``).

    Constants [derived; the chain rule of the module docstring]:

    * ``L = B max(q, 1 - q)`` on every domain: ``|phi'| <= max(q, 1 - q)``, and both slopes are
      reached by rows of norm ``B`` (a residual of either sign, ``|z| <= R B`` with ``R > 0``).
    * not differentiable: ``smoothness = None``; ``alpha = 0`` and ``H = B``: two subgradients at
      one row differ by at most the jump ``(1 - q) - (-q) = 1`` times ``||x||``
      (``spec/wang_holder.md`` §1.3, as for the hinge loss; the absolute loss's jump is 2).

    Growth: none guaranteed (``growth = None``); like the absolute loss it is sharp on
    noiseless data.

    Parameters
    ----------
    quantile : float
        ``q`` in ``(0, 1)``.
    """

    quantile: float
    name = "pinball"
    task = "regression"

    def __post_init__(self):
        q = _check_real(self.quantile, "quantile", 0.0, 1.0, low_open=True, high_open=True)
        object.__setattr__(self, "quantile", q)

    def value(self, z, y):
        # u_+ - q u, u = z - y: the arithmetic of the smoothed link's value, so that
        # phi <= phi_s holds exactly in floating point (skdpsco.smoothing)
        u = -_residual(z, y)
        return np.maximum(u, 0.0) - self.quantile * u

    def derivative(self, z, y):
        return 0.5 * (np.sign(-_residual(z, y)) + 1.0) - self.quantile

    def _constants(self, B, R, B_y):
        return LossConstants(B * max(self.quantile, 1.0 - self.quantile), None, 0.0, B, None)


@dataclass(frozen=True)
class PoissonLoss(MarginLoss):
    """Poisson regression loss with the log link and a public offset, counts ``y >= 0``.

    ``phi(z, y) = exp(z + o) - y (z + o)``: the negative log-likelihood of
    ``y ~ Poisson(exp(z + o))`` up to ``log(y!)`` (McCullagh & Nelder 1989, *Generalized Linear
    Models*, §6.2; scikit-learn's ``PoissonRegressor`` minimises half the deviance, which differs
    from it by a function of ``y`` alone), with ``o`` a public offset of the log-mean (the GLM
    offset of McCullagh & Nelder §6.2.3). Convex, ``phi'(z) = exp(z + o) - y``,
    ``phi''(z) = exp(z + o)``. Neither is bounded on the real line, so the loss is Lipschitz and
    smooth **only on a bounded domain**: on the ball ``||w|| <= R`` with rows ``||x|| <= B``,
    ``|z| <= R B`` (Cauchy-Schwarz), and [derived; the chain rule of the module docstring]

    * ``L = B max(exp(o + R B), B_y - exp(o - R B))``: ``phi'`` increases in ``z`` and decreases
      in ``y``, so over ``|z| <= R B``, ``0 <= y <= B_y`` it lies in
      ``[exp(o - R B) - B_y, exp(o + R B)]``; attained at ``||x|| = B``. For ``o = 0`` it is at
      most ``B (exp(R B) + B_y)``.
    * ``beta = B**2 exp(o + R B)`` (``sup phi''`` on the reachable margins), ``alpha = 1``,
      ``H = beta``.
    * ``L = beta = inf`` on ``R^p`` (``radius=None``): the solvers need the public ball and
      project onto it, so that their iterates stay where the constants hold.

    With ``o = 0`` both grow as ``exp(R B)``. The offset moves the window of log-means
    ``[o - R B, o + R B]`` the ball can express; :class:`~skdpsco.DPPoissonRegressor` puts its top
    at ``log B_y`` (a mean above the largest target is never the best fit), where ``L = B B_y``
    and ``beta = B**2 B_y`` whatever the width of the window.

    Growth: none guaranteed (``growth = None``).

    Parameters
    ----------
    offset : float, default=0.0
        The public offset ``o`` added to every margin.
    """

    offset: float = 0.0
    name = "poisson"
    task = "regression"

    def __post_init__(self):
        offset = _check_real(self.offset, "offset", -math.inf, math.inf, low_open=True, high_open=True)
        object.__setattr__(self, "offset", offset)

    def value(self, z, y):
        z = np.asarray(z, dtype=np.float64) + self.offset
        return np.exp(z) - np.asarray(y, dtype=np.float64) * z

    def derivative(self, z, y):
        return np.exp(np.asarray(z, dtype=np.float64) + self.offset) - np.asarray(y, dtype=np.float64)

    def _constants(self, B, R, B_y):
        if math.isinf(R):
            return LossConstants(math.inf, math.inf, 1.0, math.inf, None)
        top, bottom = math.exp(self.offset + R * B), math.exp(self.offset - R * B)
        beta = B**2 * top
        return LossConstants(B * max(top, B_y - bottom), beta, 1.0, beta, None)


@dataclass(frozen=True)
class WeightedLoss(MarginLoss):
    """A loss whose rows carry relative weights: ``c phi(z, y)`` with ``c`` in ``[0, 1]``.

    The estimators' ``sample_weight`` / ``class_weight`` (scikit-learn's semantics: a weight
    multiplies its row's loss, the penalty is not reweighted) enter as ``c_i = w_i / M``, ``M``
    the public ``max_weight`` that bounds every weight. The targets of a weighted loss are
    :func:`weighted_targets`: each row's label and its ``c``, so that a solver that slices the
    targets of a batch slices the weights of the same rows.

    Why every solver's calibration for ``phi`` holds unchanged [derived]. For ``c`` in
    ``[0, 1]``, ``c phi`` is convex, ``|c phi'| <= |phi'|`` and ``c phi'`` is ``alpha``-Hoelder
    with constant ``c H_phi <= H_phi`` (smoothness ``c phi'' <= phi''``): the constants of
    :meth:`constants` are suprema over rows ``(x, y)``, and a weighted row ``(x, y, c)`` is a row
    of a larger domain on which the same suprema hold. In particular (lemma) the replace-one
    sensitivity of the batch gradient ``(1/b) sum_i c_i grad f_i(w)`` is at most
    ``(c ||grad f|| + c' ||grad f'||) / b <= 2 L / b``, as without weights. The objective
    ``(1/n) sum_i c_i f_i + (lambda / M) ||w||**2 / 2`` is ``1 / M`` times scikit-learn's
    ``(1/n) sum_i w_i f_i + lambda ||w||**2 / 2``: the same minimiser. The estimators solve the
    former, so "the sensitivity scales by ``max_weight``" appears as a loss and a ridge term
    divided by ``M`` under the unchanged noise. Analyses that use more than ``L`` (contraction of
    a gradient step for ``eta <= 2 / beta``, stability under Hoelder gradients, the rank-one
    Hessian ``c phi'' x x^T`` of objective perturbation with ``c phi''`` in ``[0, beta / B**2]``)
    use only these properties of each row's loss; which solvers are verified is listed in
    :data:`skdpsco.solvers.WEIGHTED_ALGORITHMS`.

    The compiled SGD kernel runs a weighted loss of a base it compiles
    (:func:`skdpsco.solvers._core.kernel_loss`), each row's derivative times its ``c``: the path
    of a weighted fit does not depend on the weights' values.

    Parameters
    ----------
    base : MarginLoss
        The loss ``phi`` of one row (already smoothed where a solver needs it).
    """

    base: MarginLoss

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def task(self) -> str:
        return self.base.task

    def value(self, z, targets):
        """``c_i phi(z_i, y_i)``, of shape ``(n,)``."""
        return np.asarray(targets["weight"], dtype=np.float64) * self.base.value(z, targets["y"])

    def derivative(self, z, targets):
        """``c_i phi'(z_i, y_i)``, of the shape of ``z`` (each row of a multiclass ``z`` times its ``c``)."""
        weights = np.asarray(targets["weight"], dtype=np.float64)
        return (weights[:, None] if np.ndim(z) == 2 else weights) * self.base.derivative(z, targets["y"])

    def constants(self, data_norm, radius, y_bound=None):
        """The base loss's constants: valid for every weight in ``[0, 1]`` (class docstring)."""
        return self.base.constants(data_norm, radius, y_bound)

    def _constants(self, B, R, B_y):
        return self.base._constants(B, R, B_y)


def weighted_targets(y, weights) -> np.ndarray:
    """The targets of a :class:`WeightedLoss`: a structured array with fields ``'y'`` (the labels,
    their dtype kept) and ``'weight'`` (float64 ``c``), one record per row. The caller keeps ``c``
    in ``[0, 1]`` (the estimators divide weights bounded by ``max_weight`` by it).

    Raises
    ------
    ValueError
        If ``y`` is not a vector or ``weights`` does not have its shape.
    """
    y = np.asarray(y)
    weights = np.asarray(weights, dtype=np.float64)
    if y.ndim != 1 or weights.shape != y.shape:
        raise ValueError(f"weights must have the shape {y.shape} of y; got {weights.shape}.")
    targets = np.empty(y.shape, dtype=[("y", y.dtype), ("weight", np.float64)])
    targets["y"] = y
    targets["weight"] = weights
    return targets


_LOSSES = {
    cls.name: cls
    for cls in (
        LogisticLoss,
        MultinomialLogisticLoss,
        HingeLoss,
        SquaredHingeLoss,
        QHingeLoss,
        PowerLoss,
        HuberLoss,
        PinballLoss,
        PoissonLoss,
    )
}


def get_loss(name: str, **params) -> MarginLoss:
    """Build a loss of the catalogue by name.

    Parameters
    ----------
    name : str
        One of ``"logistic"``, ``"multinomial_logistic"`` (``n_classes``), ``"hinge"``,
        ``"squared_hinge"``, ``"q_hinge"`` (``q``), ``"power"`` (``p``), ``"huber"``
        (``epsilon``), ``"pinball"`` (``quantile``),
        ``"poisson"`` (``offset``).
    **params
        The constructor arguments of that loss, all required.

    Returns
    -------
    MarginLoss

    Raises
    ------
    ValueError
        For an unknown name, a missing or unexpected parameter, or a parameter out of range
        (the message names the parameter and its allowed range).
    """
    if not isinstance(name, str) or name not in _LOSSES:
        raise ValueError(f"name must be one of {sorted(_LOSSES)}; got {name!r}.")
    cls = _LOSSES[name]
    allowed = sorted(f.name for f in fields(cls) if f.init)
    unexpected = sorted(set(params) - set(allowed))
    if unexpected:
        raise ValueError(f"loss {name!r} takes parameters {allowed}; got unexpected {unexpected}.")
    missing = sorted(set(allowed) - set(params))
    if missing:
        raise ValueError(f"loss {name!r} requires the parameter(s) {missing}.")
    return cls(**params)
