"""The delta of a release: the user's, or a public function of the number of rows.

Under replace-one neighbours the number of rows ``n`` is public (``DESIGN.md``, "Privacy
model"), so a delta chosen from ``n`` leaks nothing. A delta of ``1 / n`` or more voids the
guarantee: the mechanism that publishes each row outright with probability ``delta`` is
``(0, delta)``-DP and publishes a row in expectation (Dwork & Roth 2014, §2.3, the "name and
shame" mechanism). The estimators refuse it; their default ``delta='auto'`` is
:func:`default_delta`, below ``1 / n`` at every size.
"""

from __future__ import annotations

import numbers

__all__ = ["DEFAULT_DELTA_CAP", "DELTA_ROWS_FACTOR", "default_delta", "resolve_delta"]

DEFAULT_DELTA_CAP = 1e-5
"""The default delta of tables of at most ``1 / (DELTA_ROWS_FACTOR * DEFAULT_DELTA_CAP)`` rows:
the value the literature reports most (and the library's default before ``'auto'``)."""

DELTA_ROWS_FACTOR = 10.0
"""Above ``10**4`` rows the default is ``1 / (10 n)``: a tenth of the ``1 / n`` that voids the
guarantee, and below ``1 / n**1.1`` for every ``n < 10**10``."""


def default_delta(n_samples: int) -> float:
    """The delta of ``delta='auto'``: ``min(1e-5, 1 / (10 n))``.

    A public function of the number of rows (public under replace-one neighbours), always below
    the ``1 / n`` at which a guarantee is void (module docstring); ``1e-5`` up to ``10**4`` rows.

    Parameters
    ----------
    n_samples : int
        The number of training rows, at least 1.

    Returns
    -------
    float

    Examples
    --------
    >>> from skdpsco import default_delta
    >>> default_delta(569), default_delta(10**6)
    (1e-05, 1e-07)
    """
    if not (isinstance(n_samples, numbers.Integral) and n_samples >= 1):
        raise ValueError(f"n_samples must be a positive integer; got {n_samples!r}.")
    return min(DEFAULT_DELTA_CAP, 1.0 / (DELTA_ROWS_FACTOR * int(n_samples)))


def resolve_delta(delta, n_samples: int) -> float:
    """The delta a fit on ``n_samples`` rows spends: :func:`default_delta` for ``'auto'``, else
    ``delta`` itself, refused when it is ``1 / n_samples`` or more (it voids the guarantee).

    Parameters
    ----------
    delta : float or 'auto'
        The estimator's parameter, already checked to be ``'auto'`` or in ``[0, 1)``.
    n_samples : int
        The number of training rows.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``delta >= 1 / n_samples``; the message names the parameter and the fix.
    """
    if isinstance(delta, str) and delta == "auto":
        return default_delta(n_samples)
    delta = float(delta)
    if delta >= 1.0 / n_samples:
        raise ValueError(
            f"delta={delta:g} is not smaller than 1/n_samples={1.0 / n_samples:.3g}: a mechanism that "
            "publishes one random row outright meets such a guarantee, so it promises nothing. Pass "
            f"delta='auto' (min(1e-5, 1/(10 n_samples)) = {default_delta(n_samples):.3g} here) or a "
            "delta well below 1/n_samples."
        )
    return delta
