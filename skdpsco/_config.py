"""Global configuration of skdpsco, in the style of :func:`sklearn.set_config`.

One setting today, ``secure_noise`` (secure mode, :mod:`skdpsco._secure`). Unlike scikit-learn's
configuration the setting is process-wide, not per thread: a secure mode switched on in one thread
holds in every thread of the process (a fit in a worker thread never falls back silently to the
seeded generator). It is not inherited by other processes (joblib's loky workers): set it in each
process that fits.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

__all__ = ["config_context", "get_config", "set_config"]

_DEFAULTS = {"secure_noise": False}
_config = dict(_DEFAULTS)
_lock = threading.Lock()


def get_config() -> dict:
    """The current values of the global configuration (a copy).

    Returns
    -------
    dict
        ``{'secure_noise': bool}``.
    """
    with _lock:
        return dict(_config)


def set_config(secure_noise: bool | None = None) -> None:
    """Set the global configuration of skdpsco.

    Parameters
    ----------
    secure_noise : bool or None, default=None
        Secure mode. ``True``: every fit draws all its randomness (privacy noise, row orders,
        subsampling, stopping times) from the operating system's cryptographically secure
        generator (:class:`skdpsco._osrandom.OSRandom`) instead of numpy's seeded PCG64, refuses a
        ``random_state`` other than ``None``, and releases the single noisy statistics (output
        perturbation, the feature scaling's moments and histograms, the private bounds,
        :class:`~skdpsco.DPStandardScaler`, the search's noisy scores) on a grid with exact
        discrete noise (Canonne, Kamath & Steinke 2020), immune to the floating-point attacks of
        Mironov (2012). ``False``: numpy's generator (reproducible with a seed, for experiments).
        ``None``: unchanged. See the user guide's "Secure mode".
    """
    if secure_noise is not None:
        if not isinstance(secure_noise, bool):
            raise ValueError(f"secure_noise must be True, False or None; got {secure_noise!r}.")
        with _lock:
            _config["secure_noise"] = secure_noise


@contextmanager
def config_context(*, secure_noise: bool | None = None):
    """Context manager for the global configuration: the settings given hold inside the ``with``
    block and the previous configuration is restored on exit (also on an exception).

    Parameters
    ----------
    secure_noise : bool or None, default=None
        As in :func:`set_config`; ``None`` leaves it unchanged.

    Examples
    --------
    >>> import skdpsco
    >>> with skdpsco.config_context(secure_noise=True):
    ...     skdpsco.get_config()["secure_noise"]
    True
    >>> skdpsco.get_config()["secure_noise"]
    False
    """
    old = get_config()
    set_config(secure_noise=secure_noise)
    try:
        yield
    finally:
        set_config(**old)
