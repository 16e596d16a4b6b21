"""``read_all_writes`` through the DB-API wrapper, on real MariaDB and on the emulator, under
injected replica lag: a session that only reads sees every write another session of the same
process had had acknowledged, and its reads never go backwards.  Each scenario also runs at
``eventual``, which must show the stale or backward reads the guarantee prevents, so that a
zero means something."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import consistent.dbapi as db
from consistent.policy import PRIMARY

if TYPE_CHECKING:
    from .conftest import Backend

#: Write-then-read rounds (a few ms each on either backend).
ROUNDS = 400
#: Reads of the monotonic-reads scenario.
READS = 400
#: How long one replica's applier stays stopped before the other's is (``injected_lag``).
LAG_PERIOD = 0.05
#: Runs of the monotonic-reads control, until one reads from every replica.
CONTROL_TRIES = 3


def reads_of_anothers_writes(
    writer: db.Connection, reader: db.Connection, table: str
) -> tuple[int, int]:
    """``ROUNDS`` times: ``writer`` sets a new value and has it acknowledged, then ``reader``
    (another session of this process, which never writes) reads it.  Returns (misses, reads
    served by replicas)."""
    wcur, rcur = writer.cursor(), reader.cursor()
    misses = on_replicas = 0
    for i in range(1, ROUNDS + 1):
        wcur.execute(f"UPDATE {table} SET v = %s WHERE k = 1", (i,))
        rcur.execute(f"SELECT v FROM {table} WHERE k = 1")
        if rcur.fetchone() != (i,):
            misses += 1
        decision = reader.last_decision
        assert decision is not None
        on_replicas += decision.target != PRIMARY
    return misses, on_replicas


def test_a_reader_sees_what_another_session_of_the_process_had_acknowledged(
    backend: Backend, table: str
) -> None:
    writer = backend.connect()
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 0)")
    backend.catch_up()
    reader = backend.connect(level="read_all_writes", wait_timeout=2.0)
    control = backend.connect(level="eventual")
    with backend.injected_lag(LAG_PERIOD):
        misses, on_replicas = reads_of_anothers_writes(writer, reader, table)
        stale, _ = reads_of_anothers_writes(writer, control, table)
    assert misses == 0
    assert on_replicas > ROUNDS // 2  # the guarantee did not come from avoiding replicas
    assert stale > 0  # the same workload at eventual reads stale data: the test can fail


@dataclass
class Counting:
    """What a reader observed of a counter that another session keeps incrementing."""

    backwards: int = 0  # a read saw less than the session's previous read
    below_acknowledged: int = 0  # a read missed an increment acknowledged before it began
    on_replicas: int = 0
    replicas: frozenset[str] = frozenset()


def count_while_incrementing(writer: db.Connection, reader: db.Connection, table: str) -> Counting:
    """A writer thread increments the counter as fast as it can and publishes each value once
    its UPDATE returned; the reader reads ``READS`` times and compares each value with its
    previous read and with the last value published before the read began."""
    acknowledged = -1
    started, stop = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def increment() -> None:
        nonlocal acknowledged
        cur = writer.cursor()
        try:
            cur.execute(f"SELECT v FROM {table} WHERE k = 1 FOR UPDATE")  # on the primary
            [(acknowledged,)] = cur.fetchall()
            started.set()
            while not stop.is_set():
                cur.execute(f"UPDATE {table} SET v = v + 1 WHERE k = 1")
                acknowledged += 1  # only this thread writes the counter
        except BaseException as exc:  # reported by the reader's thread
            failure.append(exc)
        finally:
            started.set()

    thread = threading.Thread(target=increment, name="incrementer", daemon=True)
    thread.start()
    started.wait(30)
    seen = Counting()
    targets: set[str] = set()
    previous = -1
    cur = reader.cursor()
    try:
        for _ in range(READS):
            floor = acknowledged
            cur.execute(f"SELECT v FROM {table} WHERE k = 1")
            [(value,)] = cur.fetchall()
            seen.backwards += value < previous
            seen.below_acknowledged += value < floor
            previous = value
            decision = reader.last_decision
            assert decision is not None
            if decision.target != PRIMARY:
                seen.on_replicas += 1
                targets.add(decision.target)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failure, failure
    seen.replicas = frozenset(targets)
    return seen


def test_a_sessions_reads_never_go_backwards(backend: Backend, table: str) -> None:
    writer = backend.connect()
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 0)")
    backend.catch_up()
    reader = backend.connect(level="read_all_writes", wait_timeout=2.0)
    control = backend.connect(level="eventual")
    with backend.injected_lag(LAG_PERIOD):
        guarded = count_while_incrementing(writer, reader, table)
        # Only reads spread over both replicas can go backwards.  On a loaded machine one
        # replica can rank behind the other for a whole run (the policy prefers the one that
        # lags less, and skips one its monitor cannot reach), so the control gets a few tries
        # at reading from both.
        for _ in range(CONTROL_TRIES):
            unguarded = count_while_incrementing(writer, control, table)
            if unguarded.replicas == set(backend.replicas):
                break
    assert (guarded.backwards, guarded.below_acknowledged) == (0, 0)
    assert guarded.on_replicas > READS // 2
    assert unguarded.replicas == set(backend.replicas)  # the control read from both
    assert unguarded.backwards > 0  # unguarded, the same reads do go backwards
    assert unguarded.below_acknowledged > 0  # and miss acknowledged increments
