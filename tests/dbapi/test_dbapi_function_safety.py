"""Nothing that may write reaches a replica through the DB-API: a function that may write sends
its read to the primary, a function declared read-only does not, and a replica hint on a write,
DDL, a locking read or ``GET_LOCK()`` is refused (and the span says so).

Where each statement ran is checked on the data (the row a function inserted is on the primary
and replicated, the servers' answers name the server) and on ``last_decision`` and the span.
The emulator has no stored functions: there, the function tests check only where the call is
sent (it fails there, as an unknown function, on the primary)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pymysql
import pytest

import consistent.dbapi as db
from consistent import trace
from consistent.dbapi import Connection
from consistent.policy import PRIMARY
from consistent.telemetry import MemoryExporter, Telemetry, TelemetryConfig

if TYPE_CHECKING:
    from .conftest import Backend

REPLICA = "/* consistent: replica */ "


def decision(conn: Connection) -> tuple[str, str]:
    assert conn.last_decision is not None
    return conn.last_decision.target, conn.last_decision.reason_text


def on_each_replica(backend: Backend, sql: str) -> list[list[dict[str, Any]]]:
    """``sql``'s rows on every replica, read directly (outside the middleware)."""
    answers = []
    for port in backend.replica_ports:
        with (
            contextlib.closing(
                pymysql.connect(
                    host=backend.host,
                    port=port,
                    autocommit=True,
                    cursorclass=pymysql.cursors.DictCursor,
                    **backend.options,
                )
            ) as conn,
            conn.cursor() as cur,
        ):
            cur.execute(sql)
            answers.append(list(cur.fetchall()))
    return answers


@pytest.fixture
def spans() -> Iterator[tuple[Telemetry, MemoryExporter]]:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(), exporters=[memory])
    try:
        yield telemetry, memory
    finally:
        telemetry.shutdown()


def last_span(telemetry: Telemetry, memory: MemoryExporter, conn: Connection) -> dict[str, Any]:
    assert telemetry.flush(10)
    session = conn.tracer.session_id
    mine = [r.attributes for r in memory.records if r.attributes.get(trace.SESSION_ID) == session]
    assert mine
    return dict(mine[-1])


# --- hints never override safety -----------------------------------------------------------------


def test_a_replica_hint_on_a_write_or_ddl_is_refused(
    backend: Backend, table: str, spans: tuple[Telemetry, MemoryExporter]
) -> None:
    telemetry, memory = spans
    conn = backend.connect(telemetry=telemetry)
    cur = conn.cursor()
    cur.execute(f"{REPLICA}INSERT INTO {table} VALUES (1, 10)")
    assert decision(conn) == (PRIMARY, "hint_refused(write)")
    span = last_span(telemetry, memory, conn)
    assert (span[trace.ROUTE_REASON], span[trace.ROUTE_DETAIL]) == ("hint_refused", "write")
    assert span[trace.ROUTE_TARGET] == PRIMARY
    assert backend.primary_query(f"SELECT v FROM {table} WHERE k = 1") == [(10,)]
    cur.execute(f"{REPLICA}CREATE TABLE {table}_ddl (a INT)")
    assert decision(conn) == (PRIMARY, "hint_refused(ddl)")
    assert backend.primary_query(f"SHOW TABLES LIKE '{table}_ddl'") == [(f"{table}_ddl",)]
    # The write and the DDL replicated as they should: nothing ran on a replica first.
    backend.catch_up()
    assert on_each_replica(backend, f"SELECT v FROM {table} WHERE k = 1") == [[{"v": 10}]] * 2


def test_a_replica_hint_on_a_locking_read_or_a_named_lock_is_refused(
    backend: Backend, table: str
) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute(f"{REPLICA}SELECT k FROM {table} FOR UPDATE")
    assert decision(conn) == (PRIMARY, "hint_refused(for_update)")
    cur.execute(f"{REPLICA}SELECT k FROM {table} LOCK IN SHARE MODE")
    assert decision(conn) == (PRIMARY, "hint_refused(lock_in_share_mode)")
    if backend.name == "mariadb":  # the emulator has no named locks
        cur.execute(f"{REPLICA}SELECT GET_LOCK('fnsafety', 0)")
        assert decision(conn) == (PRIMARY, "hint_refused(get_lock)")
        assert list(cur.fetchall()) == [(1,)]
        assert "get_lock" in conn.policy.pins
        held = backend.primary_query("SELECT IS_USED_LOCK('fnsafety') IS NOT NULL")
        assert held == [(1,)]  # the lock is the primary's
        cur.execute("SELECT RELEASE_LOCK('fnsafety')")
    # A plain read still follows its hint.
    cur.execute(f"{REPLICA}SELECT k FROM {table}")
    assert conn.last_decision is not None
    assert conn.last_decision.target != PRIMARY


# --- functions that may write ------------------------------------------------------------------


def test_an_unknown_function_is_called_on_the_primary(backend: Backend) -> None:
    """Routing only (on the emulator the call fails: no such function, on the primary)."""
    conn = backend.connect()
    cur = conn.cursor()
    with pytest.raises(db.DatabaseError):
        cur.execute("SELECT no_such_function_anywhere(1)")
    assert decision(conn) == (PRIMARY, "write(function_call:NO_SUCH_FUNCTION_ANYWHERE)")
    cur.execute(f"{REPLICA}SELECT 1")
    with pytest.raises(db.DatabaseError):
        cur.execute(f"{REPLICA}SELECT no_such_function_anywhere(1)")
    assert decision(conn) == (PRIMARY, "hint_refused(function_call:NO_SUCH_FUNCTION_ANYWHERE)")


@pytest.fixture
def functions(backend: Backend, request: pytest.FixtureRequest) -> None:
    """``audit`` (a table), ``log_k(k)`` (inserts ``k`` into it) and ``twice(x)`` (reads
    nothing): stored functions on MariaDB, replicated to every replica."""
    if backend.name != "mariadb":
        pytest.skip("the emulator has no stored functions")
    backend.primary_query("CREATE TABLE audit (k INT PRIMARY KEY)")
    create_functions(request.getfixturevalue("mariadb_topology"), backend.database)
    backend.catch_up()


def create_functions(topology: Any, schema: str) -> None:
    """``log_k`` and ``twice`` in ``schema``, created by root (with the binary log on, an
    account without SUPER may not create functions: 1419) and run with the caller's rights, as
    an application's own functions would be.  ``log_k`` says DETERMINISTIC only because the
    binary log refuses a function that says none of DETERMINISTIC, NO SQL, READS SQL DATA
    (1418)."""
    topology.primary.query(
        f"CREATE FUNCTION `{schema}`.log_k(k INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
        "SQL SECURITY INVOKER BEGIN INSERT INTO audit VALUES (k); RETURN k; END"
    )
    topology.primary.query(
        f"CREATE FUNCTION `{schema}`.twice(x INT) RETURNS INT DETERMINISTIC NO SQL "
        "SQL SECURITY INVOKER RETURN 2 * x"
    )


def replication_runs(backend: Backend) -> None:
    for [status] in on_each_replica(backend, "SHOW SLAVE STATUS"):
        assert (status["Slave_SQL_Running"], status["Last_SQL_Errno"]) == ("Yes", 0)


def test_a_function_that_writes_runs_on_the_primary(backend: Backend, functions: None) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute("SELECT log_k(7)")
    assert list(cur.fetchall()) == [(7,)]
    assert decision(conn) == (PRIMARY, "write(function_call:LOG_K)")
    cur.execute(f"{REPLICA}SELECT log_k(8)")
    assert decision(conn) == (PRIMARY, "hint_refused(function_call:LOG_K)")
    assert backend.primary_query("SELECT k FROM audit ORDER BY k") == [(7,), (8,)]
    # A later write of a neighbouring key on the primary: the replicas apply everything, in
    # order, and their SQL threads keep running (a row written on a replica first would stop
    # them with 1062; a read-only replica would have refused the call with 1290).
    backend.primary_query("INSERT INTO audit VALUES (9)")
    backend.catch_up()
    assert (
        on_each_replica(backend, "SELECT k FROM audit ORDER BY k")
        == [[{"k": 7}, {"k": 8}, {"k": 9}]] * 2
    )
    replication_runs(backend)


def test_a_function_declared_read_only_is_offloaded(backend: Backend, functions: None) -> None:
    undeclared = backend.connect()
    cur = undeclared.cursor()
    cur.execute("SELECT twice(21)")
    assert list(cur.fetchall()) == [(42,)]
    assert decision(undeclared) == (PRIMARY, "write(function_call:TWICE)")
    declared = backend.connect(read_only_functions=["twice"])
    cur = declared.cursor()
    cur.execute("SELECT twice(21), @@port")
    [(value, port)] = cur.fetchall()
    assert value == 42
    assert port in backend.replica_ports
    assert declared.last_decision is not None
    assert declared.last_decision.target != PRIMARY
    # Declaring one function does not offload another.
    cur.execute("SELECT twice(1), log_k(10)")
    assert decision(declared) == (PRIMARY, "write(function_call:LOG_K)")
    replication_runs(backend)


def test_read_only_functions_in_the_url(backend: Backend, functions: None) -> None:
    replicas = "&".join(f"replica={r}" for r in backend.replicas)
    url = (
        f"mysql://{backend.user}:{backend.password}@{backend.primary}/{backend.database}"
        f"?{replicas}&read_only_functions={backend.database}.twice"
    )
    conn = db.connect(url)
    try:
        assert conn.function_rules.read_only == {f"{backend.database.upper()}.TWICE"}
        cur = conn.cursor()
        cur.execute(f"SELECT {backend.database}.twice(2), @@port")
        [(value, port)] = cur.fetchall()
        assert (value, port in backend.replica_ports) == (4, True)
        cur.execute("SELECT twice(2)")  # unqualified: the default schema is not known
        assert decision(conn)[0] == PRIMARY
    finally:
        conn.close()


def test_call_runs_on_the_primary(backend: Backend, functions: None) -> None:
    backend.primary_query("CREATE PROCEDURE add_k(k INT) INSERT INTO audit VALUES (k)")
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute(f"{REPLICA}CALL add_k(11)")
    assert decision(conn) == (PRIMARY, "hint_refused(call)")
    cur.callproc("add_k", (12,))
    assert decision(conn)[0] == PRIMARY
    assert backend.primary_query("SELECT k FROM audit WHERE k > 10 ORDER BY k") == [(11,), (12,)]
    backend.catch_up()
    replication_runs(backend)
