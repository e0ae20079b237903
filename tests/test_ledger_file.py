"""The ledger file (``PrivacyAccountant(path=...)``, issue 17 item 1): one budget charged
atomically by every process, records that survive the process, events read back exactly; and the
in-memory ledger refusing to record in a process that is not its own."""

import json
import math
import multiprocessing
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import dp_accounting
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, cross_val_score

from skdpsco import BudgetExceededError, DPLogisticRegression, PrivacyAccountant, get_accountant
from skdpsco.accounting import LedgerProcessError, dp_event_to_json, epsilon_of, gaussian_event, pure_dp_event, zcdp_event
from test_ledger import every_event_type, from_scratch, same_epsilon

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def charge(ledger, event, eps=1.0, delta=1e-6, name="Est", params=None):
    return ledger.charge(event, estimator=name, params={"epsilon": eps} if params is None else params,
                         epsilon=eps, delta=delta)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "ledger.sqlite"


# -- one process -----------------------------------------------------------------------------------
def test_file_ledger_records_what_a_new_ledger_on_the_file_reads_back(path):
    ledger = PrivacyAccountant(epsilon=10.0, delta=1e-5, path=path, dataset="adult")
    events = [gaussian_event(3.0, 1.0), pure_dp_event(0.5), zcdp_event(1e-2)]
    before = time.time()
    for event in events:
        charge(ledger, event, params={"epsilon": 1.0, "classes": np.array([0, 1]), "feature_bounds": (-1, 1)})
    reopened = PrivacyAccountant(path=str(path))
    assert (reopened.epsilon, reopened.delta) == (10.0, 1e-5)  # the file's budget
    records = reopened.history
    assert [r.event for r in records] == events
    assert all(r.dataset == "adult" and before <= r.time <= time.time() for r in records)
    assert all((r.epsilon, r.delta, r.estimator) == (1.0, 1e-6, "Est") for r in records)
    assert records[0].params == {"epsilon": 1.0, "classes": "array([0, 1])", "feature_bounds": [-1, 1]}
    assert ledger.history == records  # the writer holds what every reader reads back
    assert reopened.spent() == ledger.spent()
    assert same_epsilon(reopened.spent()[0], from_scratch(events, 1e-5))
    assert reopened.spent(delta=1e-3) == (ledger.spent(delta=1e-3)[0], 1e-3)
    assert same_epsilon(reopened.spent(delta=1e-3)[0], from_scratch(events, 1e-3))
    assert reopened.remaining() == pytest.approx(10.0 - reopened.spent()[0])


def test_file_keeps_its_budget(path):
    PrivacyAccountant(epsilon=2.0, delta=1e-5, path=path)
    assert PrivacyAccountant(epsilon=2, delta=1e-5, path=path).epsilon == 2  # the same budget
    with pytest.raises(ValueError, match=r"holds the budget epsilon=2.0, delta=1e-05.*PrivacyAccountant\(path="):
        PrivacyAccountant(epsilon=3.0, delta=1e-5, path=path)
    with pytest.raises(ValueError, match="holds the budget"):
        PrivacyAccountant(delta=1e-5, path=path)
    unbudgeted = path.with_name("free.sqlite")
    PrivacyAccountant(path=unbudgeted)
    with pytest.raises(ValueError, match="holds the budget epsilon=None"):
        PrivacyAccountant(epsilon=1.0, delta=1e-5, path=unbudgeted)


def test_a_file_that_is_not_a_ledger_is_refused(path):
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        connection.execute("INSERT INTO meta VALUES ('format', 'something else')")
    with pytest.raises(ValueError, match="not a ledger file"):
        PrivacyAccountant(path=path)


def test_another_programs_database_is_refused_and_left_unchanged(path):
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
    before = path.read_bytes()
    with pytest.raises(ValueError, match="not a ledger file"):
        PrivacyAccountant(path=path)
    assert path.read_bytes() == before
    with sqlite3.connect(path) as connection:
        assert [name for (name,) in connection.execute("SELECT name FROM sqlite_master")] == ["orders"]


def test_ledgers_on_one_file_read_each_others_fits_incrementally(path):
    first, second = PrivacyAccountant(epsilon=20.0, delta=1e-5, path=path), PrivacyAccountant(path=path)
    charge(first, gaussian_event(2.0, 1.0))
    charge(second, pure_dp_event(0.3))
    assert len(first.history) == 2 and first._read_id == 2
    charge(second, zcdp_event(1e-2))
    first.spent()
    assert first._read_id == 3 and len(first._records) == 3  # the one new row was added, none read twice
    assert same_epsilon(first.spent()[0], from_scratch([r.event for r in second.history], 1e-5))
    second.reset(confirm=True)  # forgotten for every ledger on the file
    assert first.history == () and first.spent() == (0.0, 0.0)
    charge(first, gaussian_event(4.0, 1.0))
    assert [r.event for r in second.history] == [gaussian_event(4.0, 1.0)]


def test_budget_counts_the_fits_other_ledgers_recorded(path):
    delta = 1e-5
    budget = from_scratch([gaussian_event(2.0, 1.0)] * 3, delta) * (1 + 1e-9)
    ledgers = [PrivacyAccountant(epsilon=budget, delta=delta, path=path) for _ in range(3)]
    for ledger in ledgers:
        charge(ledger, gaussian_event(2.0, 1.0))
    for ledger in ledgers:
        with pytest.raises(BudgetExceededError):
            charge(ledger, gaussian_event(2.0, 1.0))
    assert len(ledgers[0].history) == 3


def test_pickled_file_ledger_charges_the_file(path):
    ledger = PrivacyAccountant(epsilon=10.0, delta=1e-5, path=path, dataset="d")
    charge(ledger, gaussian_event(2.0, 1.0))
    data = pickle.dumps(ledger)
    assert b"GaussianDpEvent" not in data  # the file is the ledger
    copy = pickle.loads(data)
    assert (copy.path, copy.dataset, copy.epsilon) == (ledger.path, "d", 10.0)
    charge(copy, gaussian_event(3.0, 1.0))
    assert len(ledger.history) == 2 and ledger.spent() == copy.spent()


@pytest.mark.parametrize("event", every_event_type(), ids=lambda e: type(e).__name__)
def test_every_event_type_reads_back_from_the_file(event, path):
    charge(PrivacyAccountant(path=path), event)
    (record,) = PrivacyAccountant(path=path).history
    assert record.event == event and type(record.event) is type(event)


def test_an_event_without_json_form_is_refused_by_the_file_and_nothing_is_recorded(path):
    class Mine(dp_accounting.GaussianDpEvent):
        pass

    ledger = PrivacyAccountant(path=path)
    with pytest.raises(TypeError, match="No JSON form"):
        charge(ledger, Mine(1.0))
    assert ledger.history == () and PrivacyAccountant(path=path).history == ()
    charge(ledger, gaussian_event(1.0, 1.0))  # the failed transaction was rolled back
    assert len(PrivacyAccountant(path=path).history) == 1


def test_threads_on_two_ledgers_of_one_file_share_one_budget(path):
    delta = 1e-5
    budget = from_scratch([zcdp_event(0.01)] * 4, delta) * (1 + 1e-9)  # room for four
    ledgers = [PrivacyAccountant(epsilon=budget, delta=delta, path=path) for _ in range(2)]
    refused = []

    def worker(ledger):
        try:
            charge(ledger, zcdp_event(0.01))
        except BudgetExceededError:
            refused.append(1)

    threads = [threading.Thread(target=worker, args=(ledgers[i % 2],)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ledgers[0].history) == 4 and len(refused) == 6


# -- processes ---------------------------------------------------------------------------------------
def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 4)) / 3
    return X, (X[:, 0] > 0).astype(int)


def _search_and_cross_validate(ledger, n_jobs, scores=True):
    X, y = _data()
    model = DPLogisticRegression(classes=[0, 1], random_state=0, accountant=ledger)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        GridSearchCV(model, {"alpha": [0.0, 0.01, 0.1]}, cv=3, n_jobs=n_jobs, error_score="raise").fit(X, y)
        if scores:
            cross_val_score(model, X, y, cv=3, n_jobs=n_jobs, error_score="raise")


def test_parallel_search_records_every_fit_on_the_file(tmp_path):
    ledgers = {}
    for n_jobs in (1, 2):
        ledgers[n_jobs] = PrivacyAccountant(epsilon=100.0, delta=1e-5, path=tmp_path / f"{n_jobs}.sqlite")
        _search_and_cross_validate(ledgers[n_jobs], n_jobs)
    sequential, parallel = ledgers[1].history, ledgers[2].history
    assert len(sequential) == len(parallel) == 9 + 1 + 3  # the search's fits, its refit, the scores
    assert set(_pids(ledgers[2].path)) - {os.getpid()}  # some were recorded by workers
    key = lambda r: json.dumps(dp_event_to_json(r.event), sort_keys=True)  # noqa: E731
    assert sorted(map(key, sequential)) == sorted(map(key, parallel))
    assert abs(ledgers[1].spent()[0] - ledgers[2].spent()[0]) <= 1e-9
    assert ledgers[1].spent()[0] > 1.0


def _pids(path):
    """The process that recorded each row of a ledger file."""
    with sqlite3.connect(path) as connection:
        return [pid for (pid,) in connection.execute("SELECT pid FROM fits ORDER BY id")]


def _charge_in_child(ledger, results):
    try:
        charge(ledger, gaussian_event(2.0, 1.0))
        results.put(("recorded", len(ledger.history)))
    except LedgerProcessError as error:
        results.put(("refused", str(error)))


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_forked_children_charge_the_parents_ledgers_never_their_copies(path):
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    mine, shared, file = PrivacyAccountant(), get_accountant(), PrivacyAccountant(path=path)
    file.history  # its connection is open in the parent when the child is forked
    before = len(shared.history)
    outcomes = []
    for ledger in (mine, shared, file):
        child = context.Process(target=_charge_in_child, args=(ledger, results))
        child.start()
        child.join(60)
        outcomes.append(results.get(timeout=10))
    assert outcomes == [("recorded", 1), ("recorded", before + 1), ("recorded", 1)]
    assert len(mine.history) == 1 and len(shared.history) == before + 1 and len(file.history) == 1


def test_an_unpickled_in_memory_ledger_charges_its_owner():
    ledger = PrivacyAccountant(epsilon=1.0, delta=1e-5)
    charge(ledger, gaussian_event(8.0, 1.0))
    code = textwrap.dedent(f"""
        import pickle
        from skdpsco.accounting import BudgetExceededError, gaussian_event
        ledger = pickle.loads({pickle.dumps(ledger)!r})
        assert len(ledger.history) == 1 and repr(ledger).endswith("of process {os.getpid()})")
        ledger.charge(gaussian_event(8.0, 1.0), estimator="E", params={{}}, epsilon=0.2, delta=1e-6)
        try:
            ledger.charge(gaussian_event(1.0, 1.0), estimator="E", params={{}}, epsilon=5.0, delta=1e-6)
        except BudgetExceededError as error:
            print("refused:", error)
        print(len(ledger.history), ledger.spent()[0], ledger.remaining())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    refusal, counts = out.stdout.splitlines()
    assert refusal.startswith("refused: This fit of E would raise the privacy spent"), out.stderr
    assert len(ledger.history) == 2 and counts == f"2 {ledger.spent()[0]} {ledger.remaining()}"


BLOCKED_FIT = """
import sys, time, warnings
import numpy as np
from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco import accounting
from skdpsco.solvers import ALGORITHMS

path, flag, where = sys.argv[1:4]

def block(*args, **kwargs):
    open(flag, "w").close()
    time.sleep(600)

if where == "training":  # the fit blocks once it trains on the rows
    type(ALGORITHMS["phased_sgd"]).run = block
else:  # the fit blocks inside the ledger's budget check, holding the file's write lock
    accounting._Composition.event = block
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 3)) / 3
warnings.simplefilter("ignore")
DPLogisticRegression(algorithm="phased_sgd", feature_scaling=None, classes=[0, 1], random_state=0,
                     accountant=PrivacyAccountant(path=path)).fit(X, (X[:, 0] > 0).astype(int))
"""


def _killed_mid_fit(path, tmp_path, where):
    flag = tmp_path / "blocked"
    child = subprocess.Popen([sys.executable, "-c", BLOCKED_FIT, str(path), str(flag), where], cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert child.poll() is None and time.monotonic() < deadline, "the child did not reach the block"
            time.sleep(0.05)
        recorded_while_blocked = len(PrivacyAccountant(path=path).history)
        with sqlite3.connect(path, timeout=0.2, isolation_level=None) as connection:
            if where == "check":  # the child holds the write lock of its check and record
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    connection.execute("BEGIN IMMEDIATE")
            else:  # the child's charge is committed: the lock is free
                connection.execute("BEGIN IMMEDIATE")
                connection.execute("ROLLBACK")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    return recorded_while_blocked


def test_a_fit_killed_during_training_leaves_its_charge_on_the_file(path, tmp_path):
    ledger = PrivacyAccountant(epsilon=10.0, delta=1e-5, path=path)
    charge(ledger, gaussian_event(4.0, 1.0))
    assert _killed_mid_fit(path, tmp_path, "training") == 2  # committed before the rows were read
    history = PrivacyAccountant(path=path).history
    assert len(history) == 2 and history[1].estimator == "DPLogisticRegression"
    charge(ledger, gaussian_event(4.0, 1.0))  # the file is usable
    assert len(ledger.history) == 3


def test_a_fit_killed_inside_the_budget_check_leaves_no_record_and_no_lock(path, tmp_path):
    ledger = PrivacyAccountant(epsilon=10.0, delta=1e-5, path=path)
    charge(ledger, gaussian_event(4.0, 1.0))
    assert _killed_mid_fit(path, tmp_path, "check") == 1
    started = time.monotonic()
    charge(ledger, gaussian_event(4.0, 1.0))  # the dead process's write lock went with it
    assert time.monotonic() - started < 5
    assert [r.estimator for r in PrivacyAccountant(path=path).history] == ["Est", "Est"]


def _racer(start, ready, results):
    while True:
        path = start.get()
        if path is None:
            return
        ledger = PrivacyAccountant(path=path)
        ready.wait()
        try:
            charge(ledger, gaussian_event(2.0, 1.0))
            results.put("recorded")
        except BudgetExceededError:
            results.put("refused")


@pytest.mark.slow
def test_two_processes_racing_for_the_last_fit_one_wins_every_time(tmp_path):
    """100 races: two processes charge at the same moment (a barrier) a file with room for one
    more fit; exactly one records it."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    queues = [context.Queue() for _ in range(2)]
    racers = [context.Process(target=_racer, args=(queue, barrier, results)) for queue in queues]
    for racer in racers:
        racer.start()
    delta, prefilled = 1e-5, 3
    budget = from_scratch([gaussian_event(2.0, 1.0)] * (prefilled + 1), delta) * (1 + 1e-9)
    wins = {racer.pid: 0 for racer in racers}
    try:
        for race in range(100):
            path = tmp_path / f"race{race}.sqlite"
            ledger = PrivacyAccountant(epsilon=budget, delta=delta, path=path)
            for _ in range(prefilled):
                charge(ledger, gaussian_event(2.0, 1.0))
            for queue in queues:
                queue.put(str(path))
            outcome = sorted(results.get(timeout=120) for _ in racers)
            assert outcome == ["recorded", "refused"], f"race {race}: {outcome}"
            assert len(ledger.history) == prefilled + 1 and ledger.spent()[0] <= budget
            (winner,) = _pids(path)[prefilled:]
            wins[winner] += 1
        print("races won by each process:", list(wins.values()))
    finally:
        for queue in queues:
            queue.put(None)
        for racer in racers:
            racer.join(60)


def test_a_ledger_pickled_as_its_state_by_an_earlier_version_still_loads(path):
    """Earlier versions pickled a ledger's state (a file ledger's budget and path, an in-memory
    one's records): a file ledger charges its file, an in-memory one refuses to charge."""
    PrivacyAccountant(epsilon=10.0, delta=1e-5, path=path)
    file, memory = (PrivacyAccountant.__new__(PrivacyAccountant) for _ in range(2))
    file.__setstate__({"epsilon": 10.0, "delta": 1e-5, "path": str(path), "dataset": "d", "_owner": 1,
                       "_previous_defaults": []})
    charge(file, gaussian_event(2.0, 1.0))
    assert len(PrivacyAccountant(path=path).history) == 1
    memory.__setstate__({"epsilon": None, "delta": None, "_owner": 1, "_previous_defaults": [], "_records": []})
    with pytest.raises(LedgerProcessError, match=r"refused before the fit read any data.*path="):
        charge(memory, gaussian_event(2.0, 1.0))
