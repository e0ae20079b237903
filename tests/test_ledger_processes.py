"""A budget cannot be bypassed: whatever way it was set (a ``with`` block, ``set_accountant``,
skdpsco's default ledger, an explicit ``accountant=``), the fits of a parallel scikit-learn search
are recorded on that ledger and refused at the same fit as with ``n_jobs=1``, under every
``joblib`` backend; copies and pickles of an estimator charge the original ledger; a ledger
whose process cannot be reached refuses before the fit reads a row; a reset needs confirmation
and is recorded."""

import copy
import io
import os
import pickle
import secrets
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from contextlib import contextmanager

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.model_selection import GridSearchCV, cross_val_score

from skdpsco import BudgetExceededError, DPLogisticRegression, PrivacyAccountant, get_accountant, set_accountant
from skdpsco.accounting import LedgerProcessError, ResetRecord, gaussian_event

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGET = 2.0  # at delta=1e-5: four fits at epsilon=1 of a search's ten
GRID = {"alpha": [0.0, 1e-3, 1e-2]}


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2)) / 3
    return X, (X[:, 0] > 0).astype(int)


@contextmanager
def _budget(way):
    """The ledger a fit with ``accountant=None`` (``way`` other than "explicit") charges, and
    the ``accountant`` parameter that makes it so."""
    if way == "default":  # skdpsco's own default: no budget
        yield get_accountant(), None
    elif way == "with":
        with PrivacyAccountant(epsilon=BUDGET, delta=1e-5) as ledger:
            yield ledger, None
    elif way == "set_accountant":
        previous = set_accountant(PrivacyAccountant(epsilon=BUDGET, delta=1e-5))
        try:
            yield get_accountant(), None
        finally:
            set_accountant(previous)
    else:
        yield PrivacyAccountant(epsilon=BUDGET, delta=1e-5), "explicit"


def _only_refusals(report):
    """Whether sklearn's report of failed fits names the budget's refusal, and no other error."""
    return "BudgetExceededError" in report and "LedgerProcessError" not in report


def _search_then_scores(way, n_jobs, backend, error_score):
    """(records, refused) of a grid search (3 candidates x 3 folds and a refit) then a 3-fold
    cross-validation, at epsilon=1 each, on a ledger set up ``way``. A refused fit raises
    (``error_score="raise"``) or is scored ``error_score``; then every failure sklearn reports
    is a refusal, and a search whose fits were all refused raises.

    Only the records of this run count (its ``random_state``, drawn for it): skdpsco's default
    ledger is shared, and under the threading backend the fits a refused search had already
    started in other threads finish after it, charging the default in force when they charge."""
    X, y = _data()
    marker = secrets.randbelow(2**31)
    with _budget(way) as (ledger, explicit), joblib.parallel_config(backend=backend):
        model = DPLogisticRegression(epsilon=1.0, classes=[0, 1], random_state=marker,
                                     accountant=ledger if explicit else None)
        refused = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for run in (lambda: GridSearchCV(model, GRID, cv=3, n_jobs=n_jobs, error_score=error_score).fit(X, y),
                        lambda: cross_val_score(model, X, y, cv=3, n_jobs=n_jobs, error_score=error_score)):
                try:
                    run()
                    refused.append(False)
                except ValueError as error:  # refused, or (scored) every fit was: sklearn then raises
                    assert isinstance(error, BudgetExceededError) or _only_refusals(str(error))
                    refused.append(True)
        failures = [str(warning.message) for warning in caught if issubclass(warning.category, FitFailedWarning)]
        assert all(map(_only_refusals, failures))
        assert bool(failures) == (error_score != "raise" and ledger.epsilon is not None)
        if ledger.epsilon is not None:
            assert ledger.spent()[0] <= ledger.epsilon  # never recorded beyond the budget
        return sum(record.params.get("random_state") == marker for record in ledger.history), refused


# Under the multiprocessing backend the refused fits are scored (error_score=nan), not raised: a
# fit raising in a worker makes joblib terminate the multiprocessing.Pool at once, and
# Pool.terminate can then wait forever on its task handler, when it kills a worker while that
# worker is returning a result under the result queue's write lock (a race of the standard
# library that any exception raised in a task meets, skdpsco or not). Scored, every fit runs and
# the pool ends after all its results came back. loky and threading abort on the raised refusal.
@pytest.mark.parametrize("backend, error_score", [("loky", "raise"), ("multiprocessing", np.nan), ("threading", "raise")])
@pytest.mark.parametrize("way", ["with", "set_accountant", "default", "explicit"])
def test_parallel_search_records_and_refuses_exactly_as_sequential(way, backend, error_score):
    """The same refusals, and the same records up to the fits already running in the other worker
    when a raised refusal aborts the search (loky, threading): such a fit finishes within the
    budget and is recorded, as it spent it; scored refusals (every fit runs) record exactly the same."""
    sequential = _search_then_scores(way, 1, backend, error_score)
    parallel = _search_then_scores(way, 2, backend, error_score)
    assert parallel[1] == sequential[1]
    in_flight = 1 if error_score == "raise" else 0  # n_jobs - 1 fits may be running at the abort
    assert sequential[0] <= parallel[0] <= sequential[0] + in_flight
    if way == "default":
        assert sequential == (10 + 3, [False, False])
    else:  # refused in the search (at the refit when refusals are scored), and in the cross-validation
        assert sequential[1] == [True, True] and 1 <= sequential[0] < 10


# -- copies and pickles of an estimator ---------------------------------------------------------------
def _round_trips(model):
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    buffer.seek(0)
    return [copy.deepcopy(model), copy.copy(model), pickle.loads(pickle.dumps(model)), joblib.load(buffer),
            clone(model)]


def test_copies_and_pickles_of_an_estimator_charge_its_ledger():
    X, y = _data()
    ledger = PrivacyAccountant(epsilon=1.2, delta=1e-5)  # one fit at epsilon=1, not two
    model = DPLogisticRegression(epsilon=1.0, classes=[0, 1], accountant=ledger)
    copies = _round_trips(model)
    assert all(other.accountant is ledger for other in copies)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        copies[0].fit(X, y)
        for other in copies[1:]:
            with pytest.raises(BudgetExceededError):
                other.fit(X, y)
    assert len(ledger.history) == 1


def test_a_pickled_estimator_follows_the_default_in_its_own_process():
    X, y = _data()
    model = DPLogisticRegression(epsilon=1.0, classes=[0, 1])
    with PrivacyAccountant() as first:
        copies = _round_trips(model)
    with PrivacyAccountant() as second, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for other in copies:
            assert other.accountant is None
            other.fit(X, y)
    assert first.history == () and len(second.history) == len(copies)


# -- a ledger whose process cannot be reached -----------------------------------------------------------
OWNER = """
import pickle, sys, time
from skdpsco import DPLogisticRegression, PrivacyAccountant
ledger = PrivacyAccountant(epsilon=5.0, delta=1e-5)
with ledger:
    pickled = pickle.dumps([DPLogisticRegression(classes=[0, 1]),
                            DPLogisticRegression(classes=[0, 1], accountant=ledger)])
sys.stdout.write(pickled.hex() + "\\n")
sys.stdout.flush()
if sys.argv[1] == "killed":
    time.sleep(600)
"""


def _estimators_of_an_owner(how):
    """A default-carrying and an explicit-ledger estimator pickled by a process that then
    ``exited`` (its socket removed) or was ``killed`` (its socket left behind)."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER, how], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    if not select.select([owner.stdout], [], [], 120)[0]:
        owner.kill()
        pytest.fail(f"the owner process wrote nothing in 120 s (exit code {owner.wait(10)})")
    pickled = bytes.fromhex(owner.stdout.readline())
    if how == "killed":
        os.kill(owner.pid, signal.SIGKILL)
    owner.wait(60)
    return pickle.loads(pickled)


@pytest.mark.parametrize("how", ["exited", "killed"])
def test_an_unreachable_owner_refuses_before_the_fit_reads_a_row(how):
    X, y = _data()
    carried, explicit = _estimators_of_an_owner(how)
    models = [explicit] if how == "exited" else [carried, explicit]
    for model in models:
        with pytest.raises(LedgerProcessError, match=r"before the fit read any data.*PrivacyAccountant\(path="):
            model.fit(X, y)
        assert not hasattr(model, "coef_")
    with pytest.raises(LedgerProcessError, match="reset refused"):
        explicit.accountant.reset(confirm=True)


def test_a_default_whose_process_ended_gives_way_to_this_processs():
    X, y = _data()
    carried, _ = _estimators_of_an_owner("exited")
    with PrivacyAccountant() as here, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        carried.fit(X, y)
    assert len(here.history) == 1


# -- reset ---------------------------------------------------------------------------------------------
def _charge(ledger, epsilon=1.0):
    return ledger.charge(gaussian_event(4.0, 1.0), estimator="Est", params={}, epsilon=epsilon, delta=1e-6)


@pytest.mark.parametrize("on_file", [False, True])
def test_a_reset_needs_confirmation_and_is_recorded(on_file, tmp_path):
    ledger = PrivacyAccountant(epsilon=5.0, delta=1e-5, path=tmp_path / "l.sqlite" if on_file else None)
    _charge(ledger)
    _charge(ledger)
    spent = ledger.spent()
    for call in (lambda: ledger.reset(), lambda: ledger.reset(confirm=1)):
        with pytest.raises(ValueError, match="confirm=True"):
            call()
    assert len(ledger.history) == 2 and ledger.resets == ()
    record = ledger.reset(confirm=True)
    assert (record.pid, record.fits, (record.epsilon, record.delta)) == (os.getpid(), 2, spent)
    assert ledger.history == () and ledger.resets == (record,)
    if on_file:
        assert PrivacyAccountant(path=ledger.path).resets == (record,)


def test_a_ledger_file_of_format_1_opens_and_records_its_resets(tmp_path):
    path = tmp_path / "old.sqlite"
    ledger = PrivacyAccountant(epsilon=5.0, delta=1e-5, path=path)
    _charge(ledger)
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TABLE resets")  # as written before resets were recorded
    reopened = PrivacyAccountant(path=path)
    assert len(reopened.history) == 1 and reopened.resets == ()
    spent = reopened.spent()
    record = reopened.reset(confirm=True)
    assert isinstance(record, ResetRecord) and (record.fits, record.epsilon, record.delta) == (1, *spent)
    assert ledger.resets == (record,) and ledger.history == ()
