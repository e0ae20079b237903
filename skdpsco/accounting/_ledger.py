"""The ledger: :class:`PrivacyAccountant`, its records, its budget, and the shared default.

Every estimator records the event of each fit with an accountant, which refuses a fit that would
exceed its budget before the fit reads a row: its ``accountant`` parameter, else the default it
carries from the process that pickled it, else the shared default of :func:`get_accountant`
(:func:`fit_accountant`, the one rule; :func:`charge_fit`, the one charge of a fit). A ledger
has one identity across copies, pickles and processes (:class:`PrivacyAccountant`, Notes), and
reads as a few lines a person can check (:meth:`PrivacyAccountant.summary`).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, fields
from typing import Any

import dp_accounting

from . import _remote
from ._conversion import epsilon_of
from ._events import _check_delta, _check_epsilon, dp_event_from_json, dp_event_to_json


class _Composition:
    """A composition of events kept in a form whose size does not grow with the number of events
    composed, with the same epsilon under :func:`epsilon_of` (up to floating-point rounding).

    :func:`epsilon_of` converts a composition (:class:`~dp_accounting.ComposedDpEvent`,
    :class:`~dp_accounting.SelfComposedDpEvent`) through its leaves with their multiplicities only:
    every accountant it uses adds a leaf's contribution (``mu**2`` of the Gaussian releases,
    Dong, Roth & Su 2022, Cor. 3.3; Renyi divergences, Mironov 2017, Prop. 1; the privacy loss
    distributions of equal randomized responses, ``self_compose``; failure probabilities, union
    bound; objective-perturbation offsets and ``delta`` divisors), never their order or grouping.
    So the composition of ``m`` events is held as

    * the total Gaussian precision ``sum count / z**2`` of its Gaussian leaves, released as one
      :class:`~dp_accounting.GaussianDpEvent` of ``z = 1 / sqrt(precision)`` (the Gaussian
      releases compose exactly into one);
    * the total ``rho`` and ``xi`` of its zCDP leaves, one :class:`~dp_accounting.ZCDpEvent`
      (RDP adds: ``sum (xi + rho alpha)`` at every order);
    * every other leaf (randomized responses, fixed-order RDP bounds, failure-probability and
      objective-perturbation wrappers, sampled or selected events), once per distinct leaf with
      its count, as ``SelfComposedDpEvent(leaf, count)``,

    and :meth:`event` is that bounded composition: adding an event costs its own size, and
    converting the whole costs one :func:`epsilon_of` of a composition of the distinct leaves,
    whatever ``m``. No-op leaves are dropped (they contribute nothing to any accountant).
    """

    __slots__ = ("precision", "rho", "xi", "leaves")

    def __init__(self):
        self.precision = 0.0
        self.rho = self.xi = 0.0
        self.leaves: dict = {}  # key -> [leaf, count], in the order first seen

    def add(self, event: dp_accounting.DpEvent, count: int = 1) -> None:
        """Compose ``event`` ``count`` times into this composition."""
        if isinstance(event, dp_accounting.ComposedDpEvent):
            for part in event.events:
                self.add(part, count)
        elif isinstance(event, dp_accounting.SelfComposedDpEvent):
            self.add(event.event, count * int(event.count))
        elif isinstance(event, dp_accounting.GaussianDpEvent):
            z = float(event.noise_multiplier)
            self.precision += math.inf if z == 0 else count / z**2
        elif isinstance(event, dp_accounting.ZCDpEvent):
            self.rho += count * float(event.rho)
            self.xi += count * float(event.xi)
        elif not isinstance(event, dp_accounting.NoOpDpEvent):
            key = _leaf_key(event)
            entry = self.leaves.get(key)
            if entry is None:
                self.leaves[key] = [event, count]
            else:
                entry[1] += count

    def copy(self) -> _Composition:
        other = _Composition()
        other.precision, other.rho, other.xi = self.precision, self.rho, self.xi
        other.leaves = {key: list(entry) for key, entry in self.leaves.items()}
        return other

    def event(self) -> dp_accounting.ComposedDpEvent:
        """The bounded composition, as one event for :func:`epsilon_of`."""
        events = []
        if self.precision > 0:
            events.append(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(self.precision)))
        if self.rho or self.xi:
            events.append(dp_accounting.ZCDpEvent(rho=self.rho, xi=self.xi))
        for leaf, count in self.leaves.values():
            events.append(leaf if count == 1 else dp_accounting.SelfComposedDpEvent(leaf, count))
        return dp_accounting.ComposedDpEvent(events)


def _leaf_key(event: dp_accounting.DpEvent):
    """A hashable key equal for equal leaves: the canonical JSON form (:func:`dp_event_to_json`),
    or the object's identity for an event that has none (it is then kept, never merged)."""
    try:
        return json.dumps(dp_event_to_json(event), sort_keys=True, allow_nan=False)
    except TypeError:
        return ("object", id(event))


class BudgetExceededError(ValueError):
    """A fit would exceed the privacy budget of its accountant; nothing was fitted or recorded."""


class LedgerProcessError(RuntimeError):
    """An in-memory ledger of another process could not be charged there (its process could not
    be reached, or no longer holds it), or was reset outside its process; nothing was fitted or
    recorded."""


@dataclass(frozen=True)
class FitRecord:
    """One accounted release: who made it, with which parameters, and its event.

    ``time`` is the Unix time of the record (shown in UTC by the ``repr``), ``dataset`` the label
    of the ledger that recorded it (``PrivacyAccountant(dataset=...)``). Records read from a
    ledger file carry ``params`` as JSON gave them back (values without a JSON form as their
    ``repr``).
    """

    estimator: str
    params: dict
    event: dp_accounting.DpEvent
    epsilon: float
    delta: float
    time: float | None = None
    dataset: str | None = None

    def __repr__(self) -> str:
        return _repr_with_readable_time(self)


@dataclass(frozen=True)
class ResetRecord:
    """One :meth:`PrivacyAccountant.reset`: when (Unix ``time``), by which process (``pid``), and
    what it forgot: ``fits`` fits whose composition was (``epsilon``, ``delta``)
    (:meth:`PrivacyAccountant.spent` just before the reset)."""

    time: float
    pid: int
    fits: int
    epsilon: float
    delta: float

    def __repr__(self) -> str:
        return _repr_with_readable_time(self)


def _readable_time(unix_time: float | None) -> str:
    """A Unix time as a person reads it, in UTC (the same for every reader of a ledger file)."""
    if unix_time is None:
        return "unknown time"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix_time))


def _repr_with_readable_time(record) -> str:
    """The dataclass ``repr`` of a record, its ``time`` readable (:func:`_readable_time`)."""
    shown = (
        f"{field.name}={_readable_time(record.time) if field.name == 'time' else getattr(record, field.name)!r}"
        for field in fields(record)
    )
    return f"{type(record).__name__}({', '.join(shown)})"


def _distinct_digits(value: float, other: float, least: int = 4) -> int:
    """The fewest significant digits, at least ``least``, that print ``value`` and ``other``
    differently (17 tell any two doubles apart): a refusal must show that the projected epsilon
    is above the budget, never "from 1 to 1, above the budget 1"."""
    digits = least
    while digits < 17 and f"{value:.{digits}g}" == f"{other:.{digits}g}":
        digits += 1
    return digits


# A ledger file (PrivacyAccountant(path=...)): SQLite, one row per fit, one per reset. The resets
# table came after format "1" without changing it: a file without it opens, and gets it at its
# first reset.
_LEDGER_FORMAT = "1"
_LEDGER_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS fits (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
    "estimator TEXT NOT NULL, params TEXT NOT NULL, event TEXT NOT NULL, epsilon REAL NOT NULL, "
    "delta REAL NOT NULL, dataset TEXT, pid INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS resets (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
    "pid INTEGER NOT NULL, fits INTEGER NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL)",
)
_LEDGER_BUSY_TIMEOUT = 600.0  # seconds a charge waits for another process's check and record
_inherited_connections: list = []  # connections of a parent process, never used nor closed after fork


def _has_table(connection: sqlite3.Connection, name: str) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return connection.execute(query, (name,)).fetchone() is not None


def _refuse_foreign_database(path: str) -> None:
    """Refuse, before any connection that could write to it (even the switch to write-ahead
    logging rewrites the header), an existing SQLite database with tables but no ledger metadata:
    another program's file, which opening it as a ledger would alter."""
    if not (os.path.isfile(path) and os.path.getsize(path) > 0):
        return
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {name for (name,) in reader.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:
        raise ValueError(f"{path} is not a ledger file (not an SQLite database: {error}).") from None
    finally:
        reader.close()
    if tables and "meta" not in tables:
        raise ValueError(
            f"{path} is an SQLite database but not a ledger file (it has tables and no ledger metadata); "
            "pass the path of a ledger file, or a new path to create one."
        )


def _ledger_meta(connection: sqlite3.Connection) -> dict:
    """The ``meta`` table of a ledger file as a dict (empty for a new file)."""
    if not _has_table(connection, "meta"):
        return {}
    return dict(connection.execute("SELECT key, value FROM meta"))


def _params_json(params: dict) -> str:
    """The estimator's parameters as JSON, values without a JSON form as their ``repr``."""
    try:
        return json.dumps(params, default=repr)
    except (TypeError, ValueError):  # e.g. a dict with tuple keys inside
        return json.dumps({name: repr(value) for name, value in params.items()})


class PrivacyAccountant:
    """Ledger of every accounted fit, with an optional total (epsilon, delta) budget.

    All skdpsco estimators record the event of each fit with an accountant: the one passed as
    their ``accountant`` parameter, else the shared default (:func:`get_accountant`). The
    composition of everything recorded is converted with :func:`epsilon_of`.

    Parameters
    ----------
    epsilon : float or None, default=None
        Total epsilon budget. ``None``: no budget (the ledger only records).
    delta : float or None, default=None
        The delta at which the budget is measured. Required when ``epsilon`` is given.
    path : str or os.PathLike or None, default=None
        A file holding the ledger (SQLite), shared by every process that opens it: the workers
        of a parallel search, other scripts, a later session. ``None``: the ledger lives in this
        process's memory. A new file stores the budget given here; an existing file keeps its
        own, which ``PrivacyAccountant(path=...)`` adopts and any other budget is refused for.
    dataset : str or None, default=None
        A label recorded with every fit (e.g. the name of the dataset the ledger accounts for).

    Notes
    -----
    * A fit is checked against the budget **before it reads the data**: if the composition of
      the recorded events and the new one would exceed ``epsilon`` at ``delta``, the fit raises
      :class:`BudgetExceededError`; nothing is fitted and nothing is recorded. A fit that has
      started training is charged even if it later fails.
    * Used as a context manager, the accountant is the shared default inside the block.
    * :func:`sklearn.base.clone` returns the same accountant (``__sklearn_clone__``), so the fits
      of ``GridSearchCV`` or ``cross_val_score`` on clones are recorded on one ledger.
    * **Processes.** With ``path``, each check and record is one ``BEGIN IMMEDIATE`` transaction
      of the file (write-ahead log, ``synchronous=FULL``): it reads the fits other processes
      recorded since, checks the budget against all of them and records the fit, so processes
      charging one file at once are serialised and never overrun its budget, and the record is
      on disk before the fit reads a row (a process killed during training leaves its charge).
      A pickled file ledger (e.g. sent to a ``joblib`` worker of ``GridSearchCV(n_jobs=2)``)
      reopens the file.
    * **One ledger, one identity.** An in-memory ledger lives in the process that created it,
      its owner. ``copy.copy``, ``copy.deepcopy`` and :func:`sklearn.base.clone` return the
      ledger itself, and a pickle holds a reference to it, never its records: loaded in the
      owner it is the ledger itself; loaded in another process (a worker of a process-based
      ``joblib`` backend, ``loky`` or ``multiprocessing``) or inherited by a forked child, it
      charges and reads the owner's ledger, which checks and records each charge under its lock
      (:mod:`~skdpsco.accounting._remote`): the budget is enforced and every fit recorded
      exactly as with ``n_jobs=1``, and a refusal is the owner's :class:`BudgetExceededError`.
      If the owner cannot be reached (it ended, or the pickle was loaded on another machine) the
      charge raises :class:`LedgerProcessError` before the fit reads any data; a ledger file is
      the fix. An estimator without ``accountant`` pickles a reference to the default in force
      when it is pickled, ``with ledger:`` and :func:`set_accountant` included
      (:class:`CarriesDefaultLedger`).
    * :meth:`reset` forgets the fits only when asked with ``confirm=True``, and leaves a record
      of what it forgot (:attr:`resets`).
    * Thread-safe: checking and recording are one atomic step.
    * The composition of the records is kept up to date as they arrive, in a form whose size
      does not grow with their number (:class:`_Composition`: one Gaussian, one zCDP event and
      the distinct other events with their counts), so a budget check or ``spent()`` costs one
      :func:`epsilon_of` of that form, the same after ten fits or ten thousand, and gives the
      epsilon of the whole history (``tests/test_ledger.py``). A file ledger reads only the rows
      recorded since it last read the file.
    """

    def __init__(
        self,
        epsilon: float | None = None,
        delta: float | None = None,
        *,
        path: str | os.PathLike | None = None,
        dataset: str | None = None,
    ):
        if epsilon is not None:
            _check_epsilon(epsilon)
            if delta is None:
                raise ValueError("delta is required with an epsilon budget; e.g. delta=1e-5.")
        if delta is not None:
            _check_delta(delta)
        if not (dataset is None or isinstance(dataset, str)):
            raise TypeError(f"dataset must be a str or None; got {type(dataset).__name__}.")
        path = None if path is None else os.path.abspath(os.fspath(path))
        self._set_up(epsilon, delta, path, dataset, owner=os.getpid(), token=None, server=None)
        if path is None:
            self._token = _remote.register(self)
        else:
            self._open_file()

    def _set_up(self, epsilon, delta, path, dataset, *, owner, token, server) -> None:
        """The attributes of a new ledger, or of one unpickled (:func:`_unpickled_ledger`)."""
        self.epsilon, self.delta, self.path, self.dataset = epsilon, delta, path, dataset
        self._owner, self._token, self._server = owner, token, server
        self._records: list[FitRecord] = []
        self._resets: list[ResetRecord] = []
        self._lock = threading.RLock()
        self._previous_defaults: list[PrivacyAccountant] = []
        self._forget_composition()
        self._connection, self._connection_pid = None, None

    def _forget_composition(self) -> None:
        """Rebuild the running composition of the records (after a reset or unpickling)."""
        self._composition = _Composition()
        self._deltas = 0.0
        for record in self._records:
            self._composition.add(record.event)
            self._deltas += record.delta
        self._epsilons: dict[float, float] = {}  # delta -> epsilon of the records, remembered
        self._read_id, self._generation = 0, None  # of a ledger file: the last row read, and its reset count

    # -- sklearn / copy protocol ---------------------------------------------------------
    def __sklearn_clone__(self):
        return self

    def __copy__(self) -> PrivacyAccountant:
        return self

    def __deepcopy__(self, memo) -> PrivacyAccountant:
        return self

    def __reduce__(self):
        """Pickle the ledger's identity, never its records: a file ledger as its file, an
        in-memory one as a reference its owner serves (class Notes, "One ledger, one
        identity")."""
        server = None
        if self.path is None:
            server = self._server or _remote.server_of(self._owner)
            if server is None and self._owner == os.getpid():
                server = _remote.serving()
        return _unpickled_ledger, (
            type(self), self.epsilon, self.delta, self.path, self.dataset, self._owner, self._token, server,
        )

    def __setstate__(self, state: dict) -> None:
        """A ledger pickled by an earlier skdpsco, as its state rather than a reference: a file
        ledger charges its file; an in-memory one (a copy of its records) refuses to charge."""
        self._set_up(state["epsilon"], state["delta"], state.get("path"), state.get("dataset"),
                     owner=state.get("_owner"), token=None, server=None)

    def __repr__(self) -> str:
        budget = "no budget" if self.epsilon is None else f"budget=({self.epsilon}, {self.delta})"
        if self.path is not None:
            return f"PrivacyAccountant(path={self.path!r}, {budget})"
        if self._is_elsewhere():
            return f"PrivacyAccountant({budget}, of process {self._owner})"
        return f"PrivacyAccountant({budget}, fits={len(self._records)})"

    # -- an in-memory ledger of another process -------------------------------------------------
    def _is_elsewhere(self) -> bool:
        """Whether this is a reference to an in-memory ledger this object is not: one of another
        process (unpickled there, or inherited by fork), or one its process no longer holds."""
        return self.path is None and (self._owner != os.getpid() or _remote.live(self._token) is not self)

    def _owner_server(self) -> _remote.Server | None:
        return self._server or _remote.server_of(self._owner)

    def _owner_ended(self) -> bool:
        """Whether this is a reference to a ledger whose process has ended (its socket is gone)."""
        server = self._owner_server()
        return self._is_elsewhere() and server is not None and _remote.owner_ended(server)

    def _call_owner(self, method: str, *args, **kwargs):
        """``method`` run by the owner process on the ledger itself (:mod:`~skdpsco.accounting._remote`)."""
        server = self._owner_server()
        try:
            if server is None:
                raise _remote.Unreachable(f"process {self._owner} does not serve its ledgers to other processes")
            return _remote.call(server, self._token, method, *args, **kwargs)
        except _remote.Unreachable as error:
            refused = f"{method} refused"
            if method == "charge":
                refused = f"This fit of {kwargs['estimator']} was refused before the fit read any data"
            raise LedgerProcessError(
                f"{refused}: its accountant is a reference, in process {os.getpid()}, to the in-memory "
                f"PrivacyAccountant of process {self._owner}, and {error}, so nothing could be checked or recorded "
                "there. Use a ledger every process charges, a file: PrivacyAccountant(path='ledger.sqlite', "
                "epsilon=..., delta=...)."
            ) from error

    # -- the ledger file ------------------------------------------------------------------
    def _file(self) -> sqlite3.Connection:
        """This process's connection to the ledger file (a forked child opens its own)."""
        if self._connection_pid != os.getpid():
            if self._connection is not None:
                _inherited_connections.append(self._connection)
            connection = sqlite3.connect(
                self.path, timeout=_LEDGER_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
            )
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            self._connection, self._connection_pid = connection, os.getpid()
        return self._connection

    def _transaction(self, kind: str = ""):
        """``with self._transaction("IMMEDIATE") as connection:``, committed at the end of the
        block, rolled back if it raises."""
        return _Transaction(self._file(), kind)

    def _open_file(self) -> None:
        """Create the ledger file, or check the budget it holds against this one's."""
        mine = {name: json.dumps(None if value is None else float(value))
                for name, value in (("epsilon", self.epsilon), ("delta", self.delta))}
        _refuse_foreign_database(self.path)
        with self._transaction() as connection:  # a read: no wait for another process's charge
            meta = _ledger_meta(connection)
        if not meta:
            with self._transaction("IMMEDIATE") as connection:
                for statement in _LEDGER_SCHEMA:
                    connection.execute(statement)
                meta = _ledger_meta(connection)
                if not meta:
                    connection.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)",
                        [("format", _LEDGER_FORMAT), ("generation", "0"), *mine.items()],
                    )
                    return
        if meta.get("format") != _LEDGER_FORMAT:
            raise ValueError(f"{self.path} is not a ledger file of format {_LEDGER_FORMAT} (meta: {meta}).")
        theirs = (json.loads(meta["epsilon"]), json.loads(meta["delta"]))
        if (self.epsilon, self.delta) == (None, None):
            self.epsilon, self.delta = theirs
        elif (self.epsilon, self.delta) != theirs:
            raise ValueError(
                f"The ledger file {self.path} holds the budget epsilon={theirs[0]}, delta={theirs[1]}; "
                f"it was opened with epsilon={self.epsilon}, delta={self.delta}. Open it with "
                f"PrivacyAccountant(path={self.path!r}) to charge its own budget."
            )

    def _read_new_rows(self, connection: sqlite3.Connection) -> None:
        """Add the rows recorded in the file since the last read (all of them after a reset)."""
        (generation,) = connection.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        if generation != self._generation:
            self._records = []
            self._forget_composition()
            self._generation = generation
        rows = connection.execute(
            "SELECT id, time, estimator, params, event, epsilon, delta, dataset FROM fits WHERE id > ? ORDER BY id",
            (self._read_id,),
        ).fetchall()
        for row_id, when, estimator, params, event, epsilon, delta, dataset in rows:
            record = FitRecord(
                estimator, json.loads(params), dp_event_from_json(json.loads(event)), epsilon, delta, when, dataset
            )
            self._records.append(record)
            self._composition.add(record.event)
            self._deltas += record.delta
            self._read_id = row_id
        if rows:
            self._epsilons = {}

    def _refresh(self) -> None:
        """Read what other processes recorded in the ledger file (nothing to do in memory)."""
        if self.path is not None:
            with self._transaction() as connection:
                self._read_new_rows(connection)

    # -- ledger -----------------------------------------------------------------------------
    @property
    def history(self) -> tuple[FitRecord, ...]:
        """The recorded fits, oldest first (of every process, for a ledger file), since the last
        :meth:`reset`."""
        if self._is_elsewhere():
            return self._call_owner("history")
        with self._lock:
            self._refresh()
            return tuple(self._records)

    def _epsilon_at(self, delta: float) -> float:
        """:func:`epsilon_of` of the composition of the records at ``delta``, remembered until
        the next record."""
        epsilon = self._epsilons.get(delta)
        if epsilon is None:
            epsilon = self._epsilons[delta] = epsilon_of(self._composition.event(), delta)
        return epsilon

    def _reporting_delta(self) -> float:
        if self.delta is not None:
            return self.delta
        # No budget delta: report at the sum of the fits' deltas (any delta gives a valid
        # (epsilon, delta) pair of the composition; this one matches basic composition).
        return min(self._deltas, 1.0 - 1e-12)

    def spent(self, delta: float | None = None) -> tuple[float, float]:
        """(epsilon, delta) of the composition of every recorded fit.

        Parameters
        ----------
        delta : float or None, default=None
            The delta to report at. ``None``: the budget's ``delta``, or the sum of the fits'
            deltas when there is no budget.

        Returns
        -------
        (float, float)
            ``(0.0, 0.0)`` before any fit (``(0.0, delta)`` when ``delta`` is given). When every
            fit was pure epsilon-DP (``delta = 0``), ``delta`` is not given and there is no
            budget: the sum of their epsilons, ``delta = 0`` (basic composition, exact for pure
            DP: the epsilons of binary randomized responses add up at ``delta = 0``).

        Notes
        -----
        The epsilon is that of the composition **at the reporting delta**, not the sum of the
        fits' own ``epsilon_``: an (epsilon, delta)-DP guarantee is one point of a privacy
        curve, and the same releases measured at a larger delta have a smaller epsilon. One fit
        at ``epsilon_=0.8, delta_=2e-6`` on a ledger whose budget is at ``delta=1e-5`` is
        reported as ``(0.723, 1e-5)``; ``spent(delta=2e-6)`` gives back ``(0.8, 2e-6)``. The
        budget is checked at its own delta, the same way.

        The composition is kept as the records arrive in a form of bounded size
        (:class:`_Composition`): the cost does not grow with the number of fits.
        """
        if delta is not None:
            _check_delta(delta)
        if self._is_elsewhere():
            return self._call_owner("spent", delta)
        with self._lock:
            self._refresh()
            return self._spent(delta)

    def _spent(self, delta: float | None) -> tuple[float, float]:
        """:meth:`spent` of the records read so far."""
        if not self._records:
            return 0.0, (0.0 if delta is None else float(delta))
        if delta is not None:
            return self._epsilon_at(float(delta)), float(delta)
        delta = self._reporting_delta()
        if delta == 0.0:
            return math.fsum(record.epsilon for record in self._records), 0.0
        return self._epsilon_at(delta), delta

    def remaining(self) -> float | None:
        """Epsilon left in the budget at its delta (``None`` without a budget)."""
        if self.epsilon is None:
            return None
        if self._is_elsewhere():
            return self._call_owner("remaining")
        return max(self.epsilon - self.spent()[0], 0.0)

    def charge(
        self,
        event: dp_accounting.DpEvent,
        *,
        estimator: str,
        params: dict[str, Any],
        epsilon: float,
        delta: float,
    ) -> FitRecord:
        """Check ``event`` against the budget and record it, atomically.

        The check converts the composition of the records and ``event`` with :func:`epsilon_of`;
        the records' composition is kept up to date as they arrive (:class:`_Composition`), so
        the check costs the same after ten fits or after ten thousand. With a ledger file, the
        check and the record are one transaction of the file, which includes the fits every
        other process recorded.

        Raises
        ------
        BudgetExceededError
            If recording ``event`` would exceed the budget; nothing is recorded.
        LedgerProcessError
            If this is a reference to an in-memory ledger of another process that cannot be
            reached (class Notes); nothing is recorded.
        TypeError
            If the ledger is a file and ``event`` has no JSON form (:func:`dp_event_to_json`).
        """
        if self._is_elsewhere():
            return self._call_owner(
                "charge", event, estimator=estimator, params=params, epsilon=epsilon, delta=delta
            )
        with self._lock:
            if self.path is None:
                return self._check_and_record(event, estimator, params, epsilon, delta, None)
            with self._transaction("IMMEDIATE") as connection:
                self._read_new_rows(connection)
                return self._check_and_record(event, estimator, params, epsilon, delta, connection)

    def _check_and_record(self, event, estimator, params, epsilon, delta, connection) -> FitRecord:
        params = dict(params)
        if connection is not None:  # recorded as every process reads it back from the file
            stored_event, stored_params = json.dumps(dp_event_to_json(event), allow_nan=False), _params_json(params)
            event, params = dp_event_from_json(json.loads(stored_event)), json.loads(stored_params)
        composition = self._composition.copy()
        composition.add(event)
        projected = None
        if self.epsilon is not None:
            projected = epsilon_of(composition.event(), self.delta)
            if projected > self.epsilon:
                spent = self._epsilon_at(self.delta) if self._records else 0.0
                digits = _distinct_digits(projected, self.epsilon)
                raise BudgetExceededError(
                    f"This fit of {estimator} would raise the privacy spent from epsilon="
                    f"{spent:.{digits}g} to {projected:.{digits}g} at delta={self.delta:g}, above the "
                    f"accountant's budget epsilon={self.epsilon:.{digits}g}. Nothing was fitted. Lower "
                    "the estimator's epsilon, or use a PrivacyAccountant with a larger budget."
                )
        record = FitRecord(estimator, params, event, float(epsilon), float(delta), time.time(), self.dataset)
        if connection is not None:
            cursor = connection.execute(
                "INSERT INTO fits (time, estimator, params, event, epsilon, delta, dataset, pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (record.time, estimator, stored_params, stored_event, record.epsilon, record.delta,
                 self.dataset, os.getpid()),
            )
            connection.execute("COMMIT")  # on disk before the fit reads a row
            self._read_id = cursor.lastrowid
        self._records.append(record)
        self._composition = composition
        self._deltas += record.delta
        self._epsilons = {} if projected is None else {self.delta: projected}
        return record

    def reset(self, *, confirm: bool = False) -> ResetRecord:
        """Forget every recorded fit, for a new, disjoint dataset; of a ledger file, for every
        process that uses it.

        A reset lets the budget be spent again, so it is never implicit: it needs
        ``confirm=True``, happens only in the ledger's own process (a reference to the ledger
        of another process refuses), and leaves a record of what was forgotten (:attr:`resets`,
        kept in the file for a ledger file).

        Parameters
        ----------
        confirm : bool, default=False
            Must be ``True``: the fits are forgotten and the budget is spent again.

        Returns
        -------
        ResetRecord
            What was forgotten: the number of fits and their (epsilon, delta) (:meth:`spent`).

        Raises
        ------
        ValueError
            If ``confirm`` is not ``True``; nothing is forgotten.
        LedgerProcessError
            If this is a reference to an in-memory ledger of another process.
        """
        if confirm is not True:
            raise ValueError(
                "reset() forgets every recorded fit, and the budget can then be spent again on the same "
                "data; pass confirm=True if the ledger is to account for a new, disjoint dataset."
            )
        if self._is_elsewhere():
            raise LedgerProcessError(
                f"reset refused: this is a reference, in process {os.getpid()}, to the in-memory ledger of "
                f"process {self._owner}, which only that process may reset."
            )
        with self._lock:
            if self.path is None:
                return self._forget(None)
            with self._transaction("IMMEDIATE") as connection:
                self._read_new_rows(connection)
                return self._forget(connection)

    def _forget(self, connection: sqlite3.Connection | None) -> ResetRecord:
        """Record a reset of the fits read so far, and forget them (in the file, if
        ``connection``, inside its write transaction)."""
        record = ResetRecord(time.time(), os.getpid(), len(self._records), *self._spent(None))
        if connection is None:
            self._resets.append(record)
        else:
            for statement in _LEDGER_SCHEMA:  # the resets table, in a file written before it existed
                connection.execute(statement)
            connection.execute(
                "INSERT INTO resets (time, pid, fits, epsilon, delta) VALUES (?, ?, ?, ?, ?)",
                (record.time, record.pid, record.fits, record.epsilon, record.delta),
            )
            connection.execute("DELETE FROM fits")
            connection.execute(
                "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'generation'"
            )
        self._records = []
        self._forget_composition()
        return record

    @property
    def resets(self) -> tuple[ResetRecord, ...]:
        """Every :meth:`reset` of the ledger, oldest first, with what it forgot."""
        if self._is_elsewhere():
            return self._call_owner("resets")
        if self.path is None:
            return tuple(self._resets)
        with self._transaction() as connection:
            if not _has_table(connection, "resets"):
                return ()
            rows = connection.execute("SELECT time, pid, fits, epsilon, delta FROM resets ORDER BY id")
            return tuple(ResetRecord(*row) for row in rows)

    def summary(self) -> str:
        """A few lines a person reads: the budget, what the fits spent together, each fit
        (estimator, its own epsilon and delta, time in UTC) and each reset.

        What was spent is the composition of the fits at the budget's delta (:meth:`spent`,
        Notes), which the summary says, as it is not the sum of the fits' own epsilons.
        ``print(ledger)`` shows it; for a ledger file, :func:`ledger_summary`.
        """
        if self._is_elsewhere():
            return self._call_owner("summary")
        with self._lock:
            self._refresh()
            records, spent = tuple(self._records), self._spent(None)
        return _summary_text(self, records, spent, self.resets)

    def __str__(self) -> str:
        return self.summary()

    # -- shared default ---------------------------------------------------------------------
    def __enter__(self) -> PrivacyAccountant:
        self._previous_defaults.append(set_accountant(self))
        return self

    def __exit__(self, *exc_info) -> None:
        set_accountant(self._previous_defaults.pop())


class _Transaction:
    """A transaction of a ledger file's connection (``BEGIN [kind]``; committed at the end of a
    ``with`` block unless committed inside it, rolled back if the block raises)."""

    def __init__(self, connection: sqlite3.Connection, kind: str):
        self.connection, self.kind = connection, kind

    def __enter__(self) -> sqlite3.Connection:
        self.connection.execute(f"BEGIN {self.kind}")
        return self.connection

    def __exit__(self, kind, value, traceback) -> None:
        if self.connection.in_transaction:
            self.connection.execute("ROLLBACK" if kind is not None else "COMMIT")


_default_lock = threading.Lock()
_default_accountant = PrivacyAccountant()


def get_accountant() -> PrivacyAccountant:
    """The shared default accountant (no budget unless replaced)."""
    return _default_accountant


def set_accountant(accountant: PrivacyAccountant) -> PrivacyAccountant:
    """Replace the shared default accountant; return the previous one."""
    global _default_accountant
    if not isinstance(accountant, PrivacyAccountant):
        raise TypeError(f"accountant must be a PrivacyAccountant; got {type(accountant).__name__}.")
    with _default_lock:
        previous, _default_accountant = _default_accountant, accountant
    return previous


def _unpickled_ledger(kind, epsilon, delta, path, dataset, owner, token, server) -> PrivacyAccountant:
    """The ledger a pickle refers to (:meth:`PrivacyAccountant.__reduce__`): in its owner
    process the ledger itself; elsewhere a reference that charges the owner's ledger; a file
    ledger on its file (opened at its first use)."""
    if token is not None and owner == os.getpid():
        ledger = _remote.live(token)
        if ledger is not None:
            return ledger
    ledger = kind.__new__(kind)
    ledger._set_up(epsilon, delta, path, dataset, owner=owner, token=token, server=server)
    return ledger


def fit_accountant(estimator) -> PrivacyAccountant:
    """The ledger a fit of ``estimator`` charges: its ``accountant``, else the default it
    carries from the process that pickled it (:class:`CarriesDefaultLedger`), else this
    process's default (:func:`get_accountant`).

    The carried default gives way to this process's only when its owner has ended (its socket
    is gone, :func:`skdpsco.accounting._remote.owner_ended`): that ledger no longer exists, as
    for an unfitted estimator persisted with ``joblib.dump`` and loaded later. Any other failure
    to reach it refuses the fit (:class:`LedgerProcessError`).
    """
    if estimator.accountant is not None:
        return estimator.accountant
    carried = estimator.__dict__.get(_CARRIED)
    if carried is None or carried._owner_ended():
        return get_accountant()
    return carried


def charge_fit(estimator, event: dp_accounting.DpEvent, *, epsilon: float, delta: float) -> FitRecord:
    """Charge the fit of ``estimator`` (its class name and parameters, ``accountant`` aside) to
    its ledger (:func:`fit_accountant`), before it reads a row."""
    params = {name: value for name, value in estimator.get_params(deep=False).items() if name != "accountant"}
    return fit_accountant(estimator).charge(
        event, estimator=type(estimator).__name__, params=params, epsilon=epsilon, delta=delta
    )


_CARRIED = "_default_ledger"  # the estimator attribute holding the default it carries
_PICKLED_DEFAULT = "_default_ledger_when_pickled"  # its pickled form: (pid of the pickling process, ledger)


class CarriesDefaultLedger:
    """Mixin of the skdpsco estimators whose ``accountant`` may be ``None``: a pickle of one
    carries the default ledger in force when it was pickled (a ``with ledger:`` block,
    :func:`set_accountant`, or skdpsco's own default), as a reference its owner serves.

    A fit in a worker of a process-based ``joblib`` backend then charges the ledger the same fit
    would have charged in the parent (:func:`fit_accountant`), not the worker's own default,
    which the parent never reads. Loaded in the process that pickled it, the estimator carries
    nothing and follows the default at its fit, as the original does. :func:`sklearn.base.clone`
    keeps what it carries (meta-estimators clone their estimator inside a worker's fit).
    Place it before :class:`sklearn.base.BaseEstimator` among the bases: it extends its
    ``__getstate__``, ``__setstate__`` and ``__sklearn_clone__``.
    """

    def __getstate__(self):
        state = dict(super().__getstate__())  # object's may be the instance's own __dict__
        state.pop(_CARRIED, None)
        if self.accountant is None:
            state[_PICKLED_DEFAULT] = (os.getpid(), fit_accountant(self))
        return state

    def __setstate__(self, state):
        pid, ledger = state.pop(_PICKLED_DEFAULT, (os.getpid(), None))
        super().__setstate__(state)
        if pid != os.getpid():
            setattr(self, _CARRIED, ledger)

    def __sklearn_clone__(self):
        clone = super().__sklearn_clone__()
        if _CARRIED in self.__dict__:
            setattr(clone, _CARRIED, self.__dict__[_CARRIED])
        return clone


def _summary_text(ledger: PrivacyAccountant, records, spent: tuple[float, float], resets) -> str:
    """The text of :meth:`PrivacyAccountant.summary` (the ledger's budget and label, what its
    records spent together, each record, each reset)."""
    where = f"ledger file {ledger.path}" if ledger.path is not None else "in-memory ledger"
    lines = [f"PrivacyAccountant, {where}" + ("" if ledger.dataset is None else f", dataset {ledger.dataset!r}")]
    epsilon, delta = spent
    if ledger.epsilon is None:
        lines.append("budget: none")
    else:
        lines.append(f"budget: epsilon={ledger.epsilon:g} at delta={ledger.delta:g}; "
                     f"remaining epsilon={max(ledger.epsilon - epsilon, 0.0):.4g}")
    if not records:
        lines.append("spent:  nothing, no fit recorded")
    else:
        at = "the budget's delta" if ledger.delta is not None else "the sum of their deltas"
        lines += [f"spent:  epsilon={epsilon:.4g} at delta={delta:g}, {_fits(len(records))} below composed at {at}",
                  "        (less than a fit's own epsilon where its delta is smaller)", "fits:"]
        lines += [
            f"  {number:>4}. {_readable_time(record.time)}  {record.estimator}  "
            f"epsilon={record.epsilon:.4g}, delta={record.delta:g}"
            for number, record in enumerate(records, 1)
        ]
    if resets:
        lines.append("resets:")
        lines += [
            f"        {_readable_time(reset.time)} by process {reset.pid}: forgot {_fits(reset.fits)}, "
            f"epsilon={reset.epsilon:.4g} at delta={reset.delta:g}"
            for reset in resets
        ]
    return "\n".join(lines)


def _fits(count: int) -> str:
    return f"{count} fit" if count == 1 else f"{count} fits"


def ledger_summary(path: str | os.PathLike) -> str:
    """:meth:`PrivacyAccountant.summary` of the ledger file ``path``, which must exist (a new
    ``PrivacyAccountant(path=...)`` would create an empty one)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No ledger file at {os.fspath(path)!r}; path must name an existing ledger file.")
    return PrivacyAccountant(path=path).summary()
