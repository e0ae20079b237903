"""Calls from other processes to the in-memory ledgers of this one.

An in-memory ledger (:class:`~skdpsco.accounting.PrivacyAccountant` without ``path``) lives in
the process that created it, its *owner*. A copy of it in another process (a worker of a
process-based ``joblib`` backend, a pickle loaded elsewhere, a forked child) must charge the
owner's ledger, or its records would never reach it and its budget could not be enforced. So
each ledger is registered here under a random token, and the owner serves calls to it:

* one listener per process (:func:`serve`), started on first use: a
  :class:`multiprocessing.connection.Listener` on a Unix socket in a private directory (mode
  ``0700``, :func:`tempfile.mkdtemp`) with a random 32-byte ``authkey``, so only a process that
  holds a pickled reference (or inherited one by ``fork``) can call; one daemon thread accepts
  connections and one handler thread serves each; the socket and its directory are removed at
  exit, so a socket that no longer exists means its owner ended (:func:`owner_ended`);
* the owner runs the allowlisted methods (:data:`ALLOWED`) on the live ledger, under the
  ledger's own lock, so a charge from a worker is checked and recorded atomically with every
  other; ``reset`` is never served;
* :func:`call` is the other end: one connection per process and owner, exceptions raised by the
  owner re-raised in the caller (a refused budget check reads as it would in the owner).

Processes forked from the owner call the same listener: it is started before every ``fork``
(:func:`os.register_at_fork`), as a forked child inherits the ledger objects but not the
threads that would serve them.

A pickle of a ledger, or of an estimator (which carries the default ledger,
:class:`~skdpsco.accounting._ledger.CarriesDefaultLedger`), holds the owner's ``authkey``: while
the owner runs, whoever can read the pickle and reach the socket (this user, by the directory's
mode) can charge and read its ledgers, as the process itself can.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener

ALLOWED = frozenset({"charge", "spent", "remaining", "history", "resets", "summary"})
"""The ledger methods another process may call on its owner's ledger."""


class Unreachable(ConnectionError):
    """The owner of a ledger could not be reached, or no longer holds the ledger."""


@dataclass(frozen=True)
class Server:
    """Where the owner process ``pid`` serves its ledgers: its socket and the key a caller must
    hold."""

    pid: int
    address: str
    authkey: bytes


_ledgers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # token -> ledger
_servers: dict = {}  # pid -> Server: this process's, and its ancestors' inherited by fork
_server_lock = threading.Lock()
_connections: dict = {}  # (pid, address) -> this process's connection to an owner
_connection_lock = threading.Lock()


def register(ledger) -> str:
    """Register ``ledger`` under a new random token (the ledger's identity across processes)."""
    token = secrets.token_hex(16)
    _ledgers[token] = ledger
    return token


def live(token: str):
    """The ledger registered under ``token`` in this process, or ``None``."""
    return _ledgers.get(token)


def server_of(pid: int) -> Server | None:
    """The listener of process ``pid`` if this process knows it (its own, or a parent's
    inherited by ``fork``)."""
    return _servers.get(pid)


def serve() -> Server:
    """This process's listener, started on first use."""
    pid = os.getpid()
    with _server_lock:
        if pid not in _servers:
            directory = tempfile.mkdtemp(prefix="skdpsco-ledger-")  # mode 0700: this user only
            address, authkey = os.path.join(directory, "socket"), secrets.token_bytes(32)
            listener = Listener(address, family="AF_UNIX", backlog=64, authkey=authkey)
            threading.Thread(target=_accept, args=(listener,), name="skdpsco-ledger", daemon=True).start()
            atexit.register(_stop, pid, listener, directory)
            _servers[pid] = Server(pid, address, authkey)
        return _servers[pid]


def serving() -> Server | None:
    """:func:`serve`, or ``None`` where this system has no Unix sockets (copies of the ledgers in
    other processes then refuse to charge)."""
    try:
        return serve()
    except (OSError, ValueError):  # ValueError: multiprocessing knows no AF_UNIX here (Windows)
        return None


def _new_locks_after_fork() -> None:
    """A forked child's locks start free (another thread of the parent may have held them)."""
    global _server_lock, _connection_lock
    _server_lock, _connection_lock = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(before=serving, after_in_child=_new_locks_after_fork)


def _stop(pid: int, listener: Listener, directory: str) -> None:
    if os.getpid() == pid:  # never a parent's socket, from a forked child that exits normally
        listener.close()
        shutil.rmtree(directory, ignore_errors=True)


def owner_ended(server: Server) -> bool:
    """Whether the owner of ``server`` has ended: its socket, removed at its exit, is gone. A
    socket that exists but refuses connections (an owner killed without its exit handlers) is
    not taken as ended."""
    return not os.path.exists(server.address)


def _accept(listener: Listener) -> None:
    while True:
        try:
            connection = listener.accept()  # authenticates the caller with the authkey
        except (AuthenticationError, EOFError, ConnectionError):
            continue
        except OSError:  # the listener was closed at exit
            return
        threading.Thread(target=_handle, args=(connection,), name="skdpsco-ledger-call", daemon=True).start()


def _handle(connection) -> None:
    """Serve one caller's requests, ``(token, method, args, kwargs)``, until it disconnects."""
    with connection:
        while True:
            try:
                token, method, args, kwargs = connection.recv()
            except (EOFError, OSError):
                return
            connection.send(_answer(token, method, args, kwargs))


def _answer(token: str, method: str, args: tuple, kwargs: dict) -> tuple:
    ledger = _ledgers.get(token)
    if ledger is None:
        return "gone", f"process {os.getpid()} no longer holds the ledger (it was garbage collected)"
    if method not in ALLOWED:
        return "gone", f"{method} is not a ledger method another process may call"
    try:
        value = getattr(ledger, method)
        return "ok", value(*args, **kwargs) if callable(value) else value
    except Exception as error:  # re-raised in the caller, as it would be here
        return "raise", error


def call(server: Server, token: str, method: str, *args, **kwargs):
    """``method(*args, **kwargs)`` on the ledger ``token`` of the owner ``server``, run there.

    Raises
    ------
    Unreachable
        If the owner cannot be reached or no longer holds the ledger (whether a charge whose
        answer was lost was recorded is then unknown: it may have been, never the reverse).
    """
    key = (os.getpid(), server.address)
    with _connection_lock:
        try:
            connection = _connections.get(key)
            if connection is None:
                connection = _connections[key] = Client(server.address, family="AF_UNIX", authkey=server.authkey)
            connection.send((token, method, args, kwargs))
            status, value = connection.recv()
        except (OSError, EOFError, AuthenticationError) as error:
            _connections.pop(key, None)
            raise Unreachable(f"process {server.pid} could not be reached ({type(error).__name__}: {error})") from error
    if status == "raise":
        raise value
    if status == "gone":
        raise Unreachable(value)
    return value
