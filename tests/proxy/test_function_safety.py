"""Nothing that may write reaches a replica through the proxy: a stored function that writes
runs on the primary, one declared read-only in the configuration is offloaded, a replica hint on
a write, DDL, a locking read or ``GET_LOCK()`` is refused and the span says so.

Which server answered is read from the answer (``@@port``) and from the data; the replicas are
read-only, so a write that reached one would fail with 1290."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from consistent import trace
from consistent.telemetry import MemoryExporter, Telemetry, TelemetryConfig
from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import connect, topology_config

REPLICA = "/* consistent: replica */ "


def rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


@pytest.fixture
def functions(mariadb_database: CleanDatabase, mariadb_topology: MariaDBTopology) -> str:
    """``audit``, ``log_k(k)`` (inserts ``k`` into it) and ``twice(x)`` (reads nothing) in the
    test's database, created by root (1419 for the application account, with the binary log
    on) and run with the caller's rights; returns the database's name."""
    schema = mariadb_database.name
    primary = mariadb_topology.primary
    primary.query(f"CREATE TABLE `{schema}`.audit (k INT PRIMARY KEY)")
    primary.query(
        f"CREATE FUNCTION `{schema}`.log_k(k INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
        "SQL SECURITY INVOKER BEGIN INSERT INTO audit VALUES (k); RETURN k; END"
    )
    primary.query(
        f"CREATE FUNCTION `{schema}`.twice(x INT) RETURNS INT DETERMINISTIC NO SQL "
        "SQL SECURITY INVOKER RETURN 2 * x"
    )
    mariadb_topology.wait_for_all()
    return schema


def replicas_applied_everything(topology: MariaDBTopology, schema: str) -> list[list[int]]:
    """Each replica's ``audit`` keys, once it caught up; its SQL thread must still run."""
    topology.wait_for_all()
    seen = []
    for replica in topology.replicas:
        status = topology.replica_status(replica)
        assert (status["Slave_SQL_Running"], status["Last_SQL_Errno"]) == ("Yes", 0)
        keys = replica.query(f"SELECT k FROM `{schema}`.audit ORDER BY k")
        seen.append([row["k"] for row in keys])
    return seen


def test_a_function_that_writes_runs_on_the_primary(
    proxy: ProxyThread, mariadb_topology: MariaDBTopology, functions: str
) -> None:
    conn = connect(proxy, functions)
    try:
        primary = mariadb_topology.primary.port
        assert rows(conn, "SELECT log_k(7), @@port") == [(7, primary)]
        assert rows(conn, f"{REPLICA}SELECT log_k(8), @@port") == [(8, primary)]
        rows(conn, "INSERT INTO audit VALUES (9)")
    finally:
        conn.close()
    keys = mariadb_topology.primary.query(f"SELECT k FROM `{functions}`.audit ORDER BY k")
    assert [row["k"] for row in keys] == [7, 8, 9]
    assert replicas_applied_everything(mariadb_topology, functions) == [[7, 8, 9]] * 2


def test_a_function_declared_read_only_in_the_configuration_is_offloaded(
    make_proxy: Callable[..., ProxyThread], mariadb_topology: MariaDBTopology, functions: str
) -> None:
    replicas = {r.port for r in mariadb_topology.replicas}
    plain = connect(make_proxy(), functions)
    declared = connect(make_proxy(read_only_functions=["twice"]), functions)
    try:
        assert rows(plain, "SELECT twice(21), @@port") == [(42, mariadb_topology.primary.port)]
        [(value, port)] = rows(declared, "SELECT twice(21), @@port")
        assert (value, port in replicas) == (42, True)
        # Declaring one function offloads no other.
        primary = mariadb_topology.primary.port
        assert rows(declared, "SELECT twice(1), log_k(10), @@port") == [(2, 10, primary)]
    finally:
        plain.close()
        declared.close()
    assert replicas_applied_everything(mariadb_topology, functions) == [[10]] * 2


@pytest.fixture
def traced(mariadb_topology: MariaDBTopology) -> Iterator[tuple[ProxyThread, MemoryExporter]]:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(schedule_delay=0.05), exporters=[memory])
    with ProxyThread(parse(topology_config(mariadb_topology)), telemetry=telemetry) as proxy:
        yield proxy, memory
    telemetry.shutdown(5)


def test_replica_hints_on_what_may_write_are_refused(
    traced: tuple[ProxyThread, MemoryExporter],
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
    functions: str,
) -> None:
    proxy, memory = traced
    primary = mariadb_topology.primary.port
    conn = connect(proxy, mariadb_database)
    try:
        rows(conn, "CREATE TABLE kv (k INT PRIMARY KEY, v INT)")
        rows(conn, f"{REPLICA}INSERT INTO kv VALUES (1, 10)")
        rows(conn, f"{REPLICA}CREATE TABLE kv2 (a INT)")
        assert rows(conn, f"{REPLICA}SELECT v, @@port FROM kv FOR UPDATE") == [(10, primary)]
        assert rows(conn, f"{REPLICA}SELECT GET_LOCK('fnsafety', 0), @@port") == [(1, primary)]
        assert rows(conn, "SELECT RELEASE_LOCK('fnsafety')") == [(1,)]
        assert rows(conn, f"{REPLICA}SELECT log_k(3), @@port") == [(3, primary)]
        [(_one, port)] = rows(conn, f"{REPLICA}SELECT 1, @@port")
        assert port != primary  # a read still follows its hint
    finally:
        conn.close()
    assert mariadb_topology.primary.query(f"SELECT v FROM `{functions}`.kv") == [{"v": 10}]
    proxy.server.telemetry.flush(5)
    reasons = [
        (span.attributes[trace.ROUTE_REASON], span.attributes.get(trace.ROUTE_DETAIL))
        for span in memory.records
        if span.attributes.get(trace.RECORD_KIND) == "statement"
        and span.attributes.get(trace.ROUTE_REASON) == "hint_refused"
    ]
    assert [detail for _reason, detail in reasons] == [
        "write",
        "ddl",
        "for_update",
        "get_lock",
        "function_call:LOG_K",
    ]
