"""Statement spans: the proxy records one per routed statement through the telemetry facade,
with where it went, why (pins included), what it waited for and the GTIDs it produced."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from consistent import trace
from consistent.telemetry import MemoryExporter, Telemetry, TelemetryConfig
from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import connect, topology_config


@pytest.fixture
def traced(mariadb_topology: MariaDBTopology) -> Iterator[tuple[ProxyThread, MemoryExporter]]:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(schedule_delay=0.05), exporters=[memory])
    with ProxyThread(parse(topology_config(mariadb_topology)), telemetry=telemetry) as proxy:
        yield proxy, memory
    telemetry.shutdown(5)


def _spans_by_operation(
    traced: tuple[ProxyThread, MemoryExporter], database: CleanDatabase, *statements: str
) -> dict[object, list[Any]]:
    """Run ``statements`` in one session through the proxy; its statement spans' attributes,
    by ``db.operation.name``, in order."""
    proxy, memory = traced
    conn = connect(proxy, database)
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()
    proxy.server.telemetry.flush(5)
    by_op: dict[object, list[Any]] = {}
    for span in memory.records:
        if span.attributes.get(trace.RECORD_KIND) == "statement":
            by_op.setdefault(span.attributes.get(trace.DB_OPERATION_NAME), []).append(
                span.attributes
            )
    return by_op


def test_spans_say_where_and_why(
    traced: tuple[ProxyThread, MemoryExporter],
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
) -> None:
    by_op = _spans_by_operation(
        traced,
        mariadb_database,
        "CREATE TABLE t (a INT)",
        "INSERT INTO t VALUES (1)",
        "SELECT COUNT(*) FROM t",
        "CREATE TEMPORARY TABLE tmp (a INT)",
        "SELECT 1",
    )
    insert = by_op["INSERT"][-1]
    assert insert[trace.ROUTE_TARGET] == "primary"
    assert insert[trace.ROUTE_REASON] == "write"
    assert str(insert[trace.GTID_PRODUCED]).startswith("0-")
    read, pinned = by_op["SELECT"][-2], by_op["SELECT"][-1]
    assert read[trace.ROUTE_ROLE] == "replica"
    assert read[trace.SERVER_PORT] in {r.port for r in mariadb_topology.replicas}
    assert read[trace.ROUTE_REASON] in ("waited", "known_covered")
    assert pinned[trace.ROUTE_TARGET] == "primary"
    assert pinned[trace.ROUTE_REASON] == "pinned"
    assert pinned[trace.ROUTE_PINNED_REASON] == "temporary_table"
    assert {s[trace.SESSION_ID] for s in (insert, read, pinned)} == {insert[trace.SESSION_ID]}


def test_a_read_latest_read_reports_the_route_it_took_after_fetching_the_primary_state(
    traced: tuple[ProxyThread, MemoryExporter],
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
) -> None:
    by_op = _spans_by_operation(
        traced,
        mariadb_database,
        "CREATE TABLE latest (a INT)",
        "INSERT INTO latest VALUES (1)",
        "SET @@consistent_level = 'read_latest'",
        "SELECT a FROM latest",
    )
    read = by_op["SELECT"][-1]
    assert read[trace.LEVEL] == "read_latest"
    assert read[trace.ROUTE_ACTION] == "execute"
    assert read[trace.ROUTE_ROLE] == "replica"
    assert read[trace.SERVER_PORT] in {r.port for r in mariadb_topology.replicas}


def test_spans_say_why_the_session_keeps_its_pooled_connection(
    traced: tuple[ProxyThread, MemoryExporter], mariadb_database: CleanDatabase
) -> None:
    by_op = _spans_by_operation(
        traced,
        mariadb_database,
        "CREATE TABLE t (a INT)",
        "INSERT INTO t VALUES (1)",
        "START TRANSACTION",
        "UPDATE t SET a = 2",
        "COMMIT",
        "CREATE TEMPORARY TABLE tmp (a INT)",
        "DELETE FROM t",
    )
    assert trace.POOL_PIN_REASON not in by_op["INSERT"][-1]  # given back after it
    assert by_op["UPDATE"][-1][trace.POOL_PIN_REASON] == "transaction"
    assert trace.POOL_PIN_REASON not in by_op["COMMIT"][-1]
    assert by_op["DELETE"][-1][trace.POOL_PIN_REASON] == "temporary_table"
