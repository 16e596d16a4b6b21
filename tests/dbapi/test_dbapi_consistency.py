"""The guarantees, at the data level, on a real topology with injected replica lag.

Every scenario checks what the application reads, not only where the read went, and the
``eventual`` control run shows the same workload does observe stale data when nothing waits —
so a zero here means something."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

import consistent.dbapi as db
from consistent.classify import classify
from consistent.errors import ConsistencyTimeout
from consistent.policy import PRIMARY, Reason

if TYPE_CHECKING:
    from .conftest import Backend

#: Write-then-read iterations per backend.  The emulated topology runs its servers and their
#: replication on one event loop inside the test process (one iteration takes a few ms).
ITERATIONS = {"mariadb": 1000, "emulator": 1000}


def write_then_read(conn: db.Connection, table: str, iterations: int) -> tuple[int, int]:
    """``iterations`` times: write a new value, read it back.  Returns (violations, reads
    served by replicas)."""
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (1, 0)")
    violations = on_replicas = 0
    for i in range(1, iterations + 1):
        cur.execute(f"UPDATE {table} SET v = %s WHERE k = 1", (i,))
        cur.execute(f"SELECT v FROM {table} WHERE k = 1")
        if cur.fetchone() != (i,):
            violations += 1
        decision = conn.last_decision
        assert decision is not None
        if decision.target != PRIMARY:
            on_replicas += 1
    return violations, on_replicas


def test_read_your_writes_holds_under_lag_and_eventual_does_not(
    backend: Backend, table: str
) -> None:
    iterations = ITERATIONS[backend.name]
    conn = backend.connect(wait_timeout=1.0)
    with backend.injected_lag(0.06):
        violations, on_replicas = write_then_read(conn, table, iterations)
        backend.primary_query(f"DELETE FROM {table}")
        eventual = backend.connect(level="eventual")
        stale, _ = write_then_read(eventual, table, iterations)
    assert violations == 0
    assert on_replicas > iterations // 2  # the guarantee did not come from avoiding replicas
    assert stale > 0  # the same workload, unguarded, reads stale data: the test can fail


def test_read_all_writes_sees_another_sessions_earlier_commit(backend: Backend, table: str) -> None:
    a = backend.connect()
    b = backend.connect(level="read_all_writes", wait_timeout=3.0)
    backend.pause(0)
    backend.pause(1)
    a.cursor().execute(f"INSERT INTO {table} VALUES (1, 1)")  # T1
    b.cursor().execute(f"INSERT INTO {table} VALUES (2, 2)")  # T2
    timer = backend.resume_all_later()
    try:
        cur = b.cursor()
        cur.execute(f"SELECT v FROM {table} WHERE k = 1")
        assert cur.fetchall() == ((1,),)
        assert b.last_decision is not None
        assert b.last_decision.target in backend.replicas
        assert b.last_decision.reason is Reason.WAITED
    finally:
        timer.join()


def test_read_latest_sees_a_commit_made_elsewhere_just_before(backend: Backend, table: str) -> None:
    latest = backend.connect(level="read_latest", wait_timeout=3.0)
    own = backend.connect(level="read_own_writes")
    backend.pause(0)
    backend.pause(1)
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 7)")  # not through the middleware
    cur = own.cursor()
    cur.execute(f"SELECT COUNT(*) FROM {table}")
    assert cur.fetchall() == ((0,),)  # read_own_writes owes nothing to that commit
    timer = backend.resume_all_later()
    try:
        cur = latest.cursor()
        cur.execute(f"SELECT v FROM {table} WHERE k = 1")
        assert cur.fetchall() == ((7,),)
        assert latest.last_decision is not None
        assert latest.last_decision.target in backend.replicas
        assert latest.last_decision.reason is Reason.WAITED
    finally:
        timer.join()


def test_a_timeout_falls_back_to_the_primary(backend: Backend, table: str) -> None:
    conn = backend.connect(wait_timeout=0.2)
    backend.pause(0)
    backend.pause(1)
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (1, 3)")
    started = time.monotonic()
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchall() == ((3,),)
    assert conn.last_decision is not None
    assert (conn.last_decision.target, conn.last_decision.reason) == (
        PRIMARY,
        Reason.TIMEOUT_FALLBACK,
    )
    assert time.monotonic() - started < 1.0  # one wait of 0.2 s, never a hang


def test_next_replica_tries_the_other_replica(backend: Backend, table: str) -> None:
    # No background monitor: it could learn that the resumed replica caught up before the read.
    conn = backend.connect(wait_timeout=0.2, on_timeout="next_replica", monitor_interval=0)
    cur = conn.cursor()
    backend.pause(0)
    backend.pause(1)
    cur.execute(f"INSERT INTO {table} VALUES (1, 4)")
    first = conn.policy.route(classify("SELECT 1"))
    behind = first.target
    ahead = backend.replicas[1 - backend.replicas.index(behind)]
    backend.resume(backend.replicas.index(ahead))
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchall() == ((4,),)
    decision = conn.last_decision
    assert decision is not None
    assert (decision.target, decision.reason, decision.tried) == (
        ahead,
        Reason.WAITED,
        (behind,),
    )


def test_on_timeout_error_raises_and_the_connection_stays_usable(
    backend: Backend, table: str
) -> None:
    conn = backend.connect(wait_timeout=0.2, on_timeout="error")
    backend.pause(0)
    backend.pause(1)
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (1, 5)")
    with pytest.raises(ConsistencyTimeout) as info:
        cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert isinstance(info.value, db.OperationalError)
    assert info.value.errno not in {1927, 2006, 2013, 2014, 2045, 2055, 4031}
    cur.execute("/* consistent: primary */ SELECT v FROM " + table)
    assert cur.fetchall() == ((5,),)


def test_a_dead_replica_mid_run_costs_no_read_and_no_duplicate_write(
    backend: Backend, table: str
) -> None:
    conn = backend.connect(wait_timeout=1.0)
    cur = conn.cursor()
    failed = wrong = 0
    killed: str | None = None
    for i in range(200):
        if i == 60:  # kill the replica that serves this session's reads
            assert conn.last_decision is not None
            killed = conn.last_decision.target
            backend.kill(backend.replicas.index(killed))
        cur.execute(f"INSERT INTO {table} VALUES (%s, %s)", (i, i))
        try:
            cur.execute(f"SELECT v FROM {table} WHERE k = %s", (i,))
        except db.Error:
            failed += 1
            continue
        if cur.fetchall() != ((i,),):
            wrong += 1
        if i > 60:
            assert conn.last_decision is not None
            assert conn.last_decision.target != killed
    assert (failed, wrong) == (0, 0)
    assert killed is not None
    assert conn.policy.knowledge.view(killed).failures >= 1
    assert backend.primary_query(f"SELECT COUNT(*), COUNT(DISTINCT k) FROM {table}") == [(200, 200)]


def test_a_lost_primary_is_a_clear_error_and_the_write_is_not_retried(
    backend: Backend, table: str
) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    backend.primary_query(f"KILL {conn.thread_id()}")
    with pytest.raises(db.OperationalError) as info:
        cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    assert info.value.errno in (2006, 2013)
    assert "lost the connection to the primary" in info.value.msg
    assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(0,)]
    with pytest.raises(db.OperationalError, match="lost the connection to the primary"):
        cur.execute("SELECT 1")
    assert not conn.open
