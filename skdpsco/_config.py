"""Global configuration of skdpsco, in the style of :func:`sklearn.set_config`.

One setting today, ``secure_noise`` (secure mode, :mod:`skdpsco._secure`). Unlike scikit-learn's
configuration the setting is process-wide, not per thread: a secure mode switched on in one thread
holds in every thread of the process (a fit in a worker thread of a parallel search never falls
back silently to the seeded generator). It is not inherited by other processes (joblib's loky
workers): set it in each process that fits.

Secure mode can be switched on from two places, and is on while either holds it:

* :func:`set_config` ``(secure_noise=True)``, which holds it until ``set_config(secure_noise=False)``;
* every open ``config_context(secure_noise=True)`` block, in any thread: the blocks are counted,
  and one block's exit releases its own hold only.

A block therefore cannot lose secure mode to another thread's block that exits first (with a
saved-and-restored value, thread A entering, thread B entering and A exiting would restore A's
"off" under B's block). Switching secure mode off is refused, with a ``RuntimeError``, whenever the
request could take it from someone who holds it: ``set_config(secure_noise=False)`` while a block
is open, and ``config_context(secure_noise=False)`` while secure mode is on at all (a block cannot
switch a process-wide setting off for its own thread only). A reproducible experiment next to
secure fits passes ``secure_noise=False`` to its own estimator instead, which affects that
estimator alone.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

__all__ = ["config_context", "get_config", "set_config"]

_lock = threading.Lock()
_secure_setting = False  # set_config's value
_secure_blocks = 0  # open config_context(secure_noise=True) blocks, in every thread


def _check_bool(secure_noise) -> None:
    if secure_noise is not None and not isinstance(secure_noise, bool):
        raise ValueError(f"secure_noise must be True, False or None; got {secure_noise!r}.")


def _refuse_switching_off(request: str, holders: str) -> None:
    """Raise the ``RuntimeError`` of a request to switch secure mode off while ``holders`` hold it
    on: the request names itself, the holder, why it is refused and the ways to get what it asked."""
    raise RuntimeError(
        f"{request} is refused: secure mode is held on by {holders}. Switching it off now would "
        "take it from every fit of the process, in every thread, including those that rely on "
        "it. For a reproducible experiment, pass secure_noise=False to that estimator only; to "
        "switch secure mode off for the process, call skdpsco.set_config(secure_noise=False) "
        "once no config_context(secure_noise=True) block is open."
    )


def _holders() -> str:
    """Who holds secure mode on (call with the lock held), for the refusals' messages."""
    parts = ["skdpsco.set_config(secure_noise=True)"] if _secure_setting else []
    if _secure_blocks:
        parts.append(f"{_secure_blocks} open config_context(secure_noise=True) block(s) (any thread)")
    return " and ".join(parts)


def get_config() -> dict:
    """The current values of the global configuration (a copy).

    Returns
    -------
    dict
        ``{'secure_noise': bool}``: the effective setting, ``True`` while
        ``set_config(secure_noise=True)`` or any open ``config_context(secure_noise=True)`` block
        (in any thread) holds secure mode on.
    """
    with _lock:
        return {"secure_noise": _secure_setting or _secure_blocks > 0}


def set_config(secure_noise: bool | None = None) -> None:
    """Set the global configuration of skdpsco.

    Parameters
    ----------
    secure_noise : bool or None, default=None
        Secure mode. ``True``: every fit draws all its randomness (privacy noise, row orders,
        subsampling, stopping times) from the operating system's cryptographically secure
        generator (:class:`skdpsco._osrandom.OSRandom`) instead of numpy's seeded PCG64, refuses a
        ``random_state`` other than ``None``, and releases the single noisy statistics (output
        perturbation, the feature scaling's moments and histograms, the private bounds, the
        Newton solver's gradients and Hessians, :class:`~skdpsco.DPStandardScaler`, the search's
        noisy scores) on a grid with exact discrete noise (Canonne, Kamath & Steinke 2020),
        immune to the floating-point attacks of Mironov (2012). ``False``: numpy's generator
        (reproducible with a seed, for experiments), unless a ``config_context(secure_noise=True)``
        block holds secure mode on (below). ``None``: unchanged. See the user guide's "Secure
        mode".

    Raises
    ------
    RuntimeError
        ``secure_noise=False`` while a ``config_context(secure_noise=True)`` block is open in any
        thread: the fits of that block rely on secure mode, and the setting is process-wide
        (module docstring). Nothing is changed.
    """
    global _secure_setting
    _check_bool(secure_noise)
    if secure_noise is None:
        return
    with _lock:
        if not secure_noise and _secure_blocks:
            _refuse_switching_off("skdpsco.set_config(secure_noise=False)", _holders())
        _secure_setting = secure_noise


@contextmanager
def config_context(*, secure_noise: bool | None = None):
    """Context manager for the global configuration.

    ``secure_noise=True`` holds secure mode on, in every thread, from the entry of the block to its
    exit (also on an exception). The holds of the open blocks are counted, process-wide: the mode
    is on while any block is open or :func:`set_config` holds it, so a block in one thread never
    ends another thread's secure mode by exiting first, and nested blocks release their own hold
    only.

    Parameters
    ----------
    secure_noise : bool or None, default=None
        ``True``: hold secure mode on inside the block (:func:`set_config` describes it).
        ``False``: a block that requires secure mode off; refused if it is on (it cannot be
        switched off for one thread only, and switching it off process-wide would take it from
        the fits that rely on it), otherwise nothing is changed (another thread may still switch
        it on meanwhile: the process-wide setting wins, and a seeded fit is then refused).
        ``None``: unchanged.

    Raises
    ------
    RuntimeError
        ``secure_noise=False`` while secure mode is on (by :func:`set_config` or an open block of
        any thread), on entering the block. For a reproducible experiment pass
        ``secure_noise=False`` to the estimator itself.

    Examples
    --------
    >>> import skdpsco
    >>> with skdpsco.config_context(secure_noise=True):
    ...     skdpsco.get_config()["secure_noise"]
    True
    >>> skdpsco.get_config()["secure_noise"]
    False
    >>> with skdpsco.config_context(secure_noise=True):
    ...     with skdpsco.config_context(secure_noise=True):
    ...         pass
    ...     skdpsco.get_config()["secure_noise"]  # the outer block still holds it
    True
    """
    global _secure_blocks
    _check_bool(secure_noise)
    if secure_noise is False:
        with _lock:
            if _secure_setting or _secure_blocks:
                _refuse_switching_off("config_context(secure_noise=False)", _holders())
    if not secure_noise:  # nothing to hold
        yield
        return
    with _lock:
        _secure_blocks += 1
    try:
        yield
    finally:
        with _lock:
            _secure_blocks -= 1
