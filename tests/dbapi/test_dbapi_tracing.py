"""Statement spans from the DB-API: one per routed statement, for every route reason, on the
emulator and on real MariaDB.

Each span is checked against what really happened, found another way: the GTID a write
produced against the primary's executed state read before and after on a separate connection,
a wait's duration against when the test let the replica catch up, the route against the
connection's own ``last_decision`` and against the data the read returned.  The file exporter
is read back with nothing but :mod:`json` and checked against the documented contract
(:func:`consistent.trace.check_attributes`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import consistent.dbapi as db
from consistent import trace
from consistent.dbapi import Connection
from consistent.gtid import GtidSet, GtidState, MariaPosition
from consistent.policy import PRIMARY
from consistent.telemetry import (
    NOOP_SPAN,
    NOOP_TRACER,
    MemoryExporter,
    SpanRecord,
    StatusCode,
    Telemetry,
    TelemetryConfig,
)

if TYPE_CHECKING:
    from .conftest import Backend


@dataclass
class Traced:
    """A telemetry pipeline recording into memory."""

    telemetry: Telemetry
    memory: MemoryExporter

    def records(self, conn: Connection) -> list[SpanRecord]:
        """Every span of ``conn``'s session so far, in order."""
        assert self.telemetry.flush(10)
        session = conn.tracer.session_id
        assert session
        found = [r for r in self.memory.records if r.attributes.get(trace.SESSION_ID) == session]
        for record in found:
            assert record.attributes[trace.RECORD_KIND] == trace.RecordKind.STATEMENT
            assert trace.check_attributes(record.name, record.attributes) == ()
        return found

    def spans(self, conn: Connection) -> list[Mapping[str, Any]]:
        """The attributes of every span of ``conn``'s session so far."""
        return [record.attributes for record in self.records(conn)]

    def last(self, conn: Connection) -> Mapping[str, Any]:
        return self.spans(conn)[-1]


@pytest.fixture
def traced() -> Iterator[Traced]:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(), exporters=[memory])
    try:
        yield Traced(telemetry, memory)
    finally:
        telemetry.shutdown()


# --- what the servers say, independently of the wrapper -----------------------------------------


def primary_executed(backend: Backend, flavor: str) -> GtidState:
    """The primary's executed GTIDs, read on a connection of its own."""
    if flavor == "mysql":
        [(text,)] = backend.primary_query("SELECT @@GLOBAL.gtid_executed")
        return GtidSet.parse(text)
    [(text,)] = backend.primary_query("SELECT @@GLOBAL.gtid_binlog_pos")
    return MariaPosition.parse(text)


def new_gtids(before: GtidState, after: GtidState) -> GtidState:
    """The GTIDs the primary executed between two readings of its state."""
    if isinstance(before, GtidSet) and isinstance(after, GtidSet):
        return after - before
    assert isinstance(before, MariaPosition)
    assert isinstance(after, MariaPosition)
    changed = [g for g in after.gtids() if g not in before.gtids()]
    return MariaPosition.parse(",".join(str(g) for g in changed))


def parse_state(text: str, flavor: str) -> GtidState:
    return GtidSet.parse(text) if flavor == "mysql" else MariaPosition.parse(text)


def covers(state: GtidState, required: GtidState) -> bool:
    """``state`` includes every GTID of ``required`` (set inclusion; per domain on MariaDB)."""
    if isinstance(state, MariaPosition) and isinstance(required, MariaPosition):
        return state.covers(required)
    assert isinstance(state, GtidSet)
    assert isinstance(required, GtidSet)
    return required <= state


def address(name: str) -> tuple[str, int]:
    host, _, port = name.rpartition(":")
    return host, int(port)


def route(span: Mapping[str, Any]) -> tuple[str, str, str | None]:
    return (
        span[trace.ROUTE_TARGET],
        span[trace.ROUTE_REASON],
        span.get(trace.ROUTE_DETAIL),
    )


# --- one route reason per test -------------------------------------------------------------------


def test_a_write_records_the_gtid_the_server_assigned(
    backend: Backend, table: str, traced: Traced
) -> None:
    conn = backend.connect(telemetry=traced.telemetry)
    cur = conn.cursor()
    before = primary_executed(backend, conn.flavor)
    cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    after = primary_executed(backend, conn.flavor)
    span = traced.last(conn)
    assigned = new_gtids(before, after)
    assert len(assigned) == 1
    assert parse_state(span[trace.GTID_PRODUCED], conn.flavor) == assigned
    assert span[trace.GTID_PRODUCED + trace.COUNT_SUFFIX] == 1
    assert route(span) == (PRIMARY, "write", "write")
    assert span[trace.ROUTE_ROLE] == "primary"
    assert (span[trace.SERVER_ADDRESS], span[trace.SERVER_PORT]) == address(backend.primary)
    assert span[trace.DB_SYSTEM_NAME] == conn.flavor
    assert span[trace.DB_OPERATION_NAME] == "INSERT"
    assert span[trace.STATEMENT_KIND] == "write"
    assert span[trace.ROUTE_ACTION] == "execute"
    assert span[trace.LEVEL] == "read_own_writes"
    assert (span[trace.WAIT_OUTCOME], span[trace.WAIT_COUNT]) == ("none", 0)
    assert trace.DB_QUERY_TEXT not in span  # opt-in only
    # The session's required set afterwards is what the server assigned.
    assert parse_state(conn.token.partition(":")[2], conn.flavor) == assigned


def test_commit_produces_the_gtid_and_every_transaction_statement_has_a_span(
    backend: Backend, table: str, traced: Traced
) -> None:
    conn = backend.connect(telemetry=traced.telemetry)
    cur = conn.cursor()
    before = primary_executed(backend, conn.flavor)
    conn.begin()
    cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchall() == ((1,),)  # uncommitted: only the primary session sees it
    conn.commit()
    after = primary_executed(backend, conn.flavor)
    conn.begin()
    cur.execute(f"INSERT INTO {table} VALUES (2, 2)")
    conn.rollback()
    spans = traced.spans(conn)
    kinds = [(s[trace.STATEMENT_KIND], s[trace.DB_OPERATION_NAME]) for s in spans]
    assert kinds == [
        ("transaction_begin", "BEGIN"),
        ("write", "INSERT"),
        ("read", "SELECT"),
        ("commit", "COMMIT"),
        ("transaction_begin", "BEGIN"),
        ("write", "INSERT"),
        ("rollback", "ROLLBACK"),
    ]
    assert {(s[trace.ROUTE_TARGET], s[trace.ROUTE_REASON]) for s in spans} == {
        (PRIMARY, "in_transaction")
    }
    produced = [s.get(trace.GTID_PRODUCED) for s in spans]
    assert produced[3] is not None
    assert parse_state(produced[3], conn.flavor) == new_gtids(before, after)
    assert produced[:3] + produced[4:] == [None] * 6
    assert backend.primary_query(f"SELECT k FROM {table}") == [(1,)]


def test_known_covered_and_waited(backend: Backend, table: str, traced: Traced) -> None:
    # No background monitor: it would learn that the other replica caught up too.
    conn = backend.connect(telemetry=traced.telemetry, wait_timeout=10.0, monitor_interval=0)
    cur = conn.cursor()
    backend.pause_all()
    cur.execute(f"INSERT INTO {table} VALUES (1, 42)")
    produced = traced.last(conn)[trace.GTID_PRODUCED]
    delay = 0.3
    timer = backend.resume_all_later(delay)
    try:
        cur.execute(f"SELECT v FROM {table} WHERE k = 1")
        assert cur.fetchall() == ((42,),)
    finally:
        timer.join()
    waited = traced.last(conn)
    assert waited[trace.ROUTE_REASON] == "waited"
    assert waited[trace.ROUTE_ROLE] == "replica"
    assert waited[trace.ROUTE_TARGET] in backend.replicas
    assert (waited[trace.SERVER_ADDRESS], waited[trace.SERVER_PORT]) == address(
        waited[trace.ROUTE_TARGET]
    )
    assert waited[trace.WAIT_TARGET] == waited[trace.ROUTE_TARGET]
    assert (waited[trace.WAIT_OUTCOME], waited[trace.WAIT_COUNT]) == ("satisfied", 1)
    # The replica caught up only when the test resumed it.
    assert delay * 1000 * 0.7 <= waited[trace.WAIT_DURATION_MS] < 10_000
    # The session's first write is all it requires, and nothing was known about the replica.
    assert waited[trace.WAIT_SET] == produced == waited[trace.GTID_REQUIRED]
    assert waited[trace.WAIT_SET + trace.COUNT_SUFFIX] == 1
    assert trace.GTID_PRODUCED not in waited

    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchall() == ((42,),)
    covered = traced.last(conn)
    assert covered[trace.ROUTE_REASON] == "known_covered"
    assert covered[trace.ROUTE_TARGET] == waited[trace.ROUTE_TARGET]
    assert (covered[trace.WAIT_OUTCOME], covered[trace.WAIT_COUNT]) == ("none", 0)
    assert covered[trace.WAIT_DURATION_MS] == 0.0
    assert trace.WAIT_SET not in covered
    known = parse_state(covered[trace.REPLICA_KNOWN_EXECUTED], conn.flavor)
    required = parse_state(covered[trace.GTID_REQUIRED], conn.flavor)
    assert required == parse_state(produced, conn.flavor)
    assert covers(known, required)


def test_a_timeout_falls_back_to_the_primary(backend: Backend, table: str, traced: Traced) -> None:
    conn = backend.connect(telemetry=traced.telemetry, wait_timeout=0.2)
    cur = conn.cursor()
    backend.pause_all()
    cur.execute(f"INSERT INTO {table} VALUES (1, 7)")
    produced = traced.last(conn)[trace.GTID_PRODUCED]
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchall() == ((7,),)
    span = traced.last(conn)
    assert route(span) == (PRIMARY, "timeout_fallback", None)
    assert span[trace.ROUTE_ROLE] == "primary"
    assert (span[trace.SERVER_ADDRESS], span[trace.SERVER_PORT]) == address(backend.primary)
    assert span[trace.WAIT_OUTCOME] == "timeout"
    assert span[trace.WAIT_TARGET] in backend.replicas
    assert span[trace.WAIT_SET] == produced
    assert span[trace.WAIT_COUNT] >= 1
    # Every wait lasted its whole timeout.
    assert span[trace.WAIT_DURATION_MS] >= span[trace.WAIT_COUNT] * 200 * 0.9


def test_dead_replicas_send_reads_to_the_primary(
    backend: Backend, table: str, traced: Traced
) -> None:
    # No background monitor: the read itself finds the replicas dead, and says so.
    conn = backend.connect(telemetry=traced.telemetry, monitor_interval=0)
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (1, 3)")
    for index in range(len(backend.replicas)):
        backend.kill(index)
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchall() == ((3,),)
    span = traced.last(conn)
    assert route(span)[:2] == (PRIMARY, "no_healthy_replica")
    assert conn.last_decision is not None
    assert conn.last_decision.reason == "no_healthy_replica"
    # The replicas it gave up on, in the order it tried them.
    tried = span[trace.ROUTE_TRIED].split(",")
    assert sorted(tried) == sorted(backend.replicas)
    assert tried == list(conn.last_decision.tried)
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")  # the replicas are cooling down now
    assert route(traced.last(conn))[:2] == (PRIMARY, "no_healthy_replica")


def test_a_temporary_table_pins_the_session(backend: Backend, traced: Traced) -> None:
    conn = backend.connect(telemetry=traced.telemetry)
    cur = conn.cursor()
    cur.execute("CREATE TEMPORARY TABLE tmp (a INT)")
    cur.execute("INSERT INTO tmp VALUES (7)")
    cur.execute("SELECT a FROM tmp")
    assert cur.fetchall() == ((7,),)
    span = traced.last(conn)
    assert route(span) == (PRIMARY, "pinned", "temporary_table")
    assert span[trace.ROUTE_PINNED_REASON] == "temporary_table"
    assert span[trace.STATEMENT_KIND] == "read"


def test_a_read_in_a_transaction_stays_on_the_primary(backend: Backend, traced: Traced) -> None:
    conn = backend.connect(telemetry=traced.telemetry)
    cur = conn.cursor()
    conn.begin()
    cur.execute("SELECT @@server_id")
    primary_id = cur.fetchall()
    conn.commit()
    assert backend.primary_query("SELECT @@server_id") == list(primary_id)
    begin, read, commit = traced.spans(conn)
    assert route(read)[:2] == (PRIMARY, "in_transaction")
    assert read[trace.STATEMENT_KIND] == "read"
    assert (begin[trace.STATEMENT_KIND], commit[trace.STATEMENT_KIND]) == (
        "transaction_begin",
        "commit",
    )


def test_a_hint_routes_one_statement(backend: Backend, traced: Traced) -> None:
    conn = backend.connect(telemetry=traced.telemetry)
    cur = conn.cursor()
    cur.execute("/* consistent: primary */ SELECT 1")
    assert route(traced.last(conn)) == (PRIMARY, "hint", "primary")
    cur.execute("/* consistent: level=eventual */ SELECT 1")
    span = traced.last(conn)
    assert span[trace.ROUTE_REASON] == "eventual"
    assert span[trace.LEVEL] == "eventual"  # the hint's level, not the session's
    assert span[trace.ROUTE_TARGET] in backend.replicas


def test_eventual_reads_go_to_a_replica_without_waiting(
    backend: Backend, table: str, traced: Traced
) -> None:
    conn = backend.connect(telemetry=traced.telemetry, level="eventual")
    cur = conn.cursor()
    backend.pause_all()
    cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    cur.execute(f"SELECT COUNT(*) FROM {table}")
    assert cur.fetchall() == ((0,),)  # stale, as eventual allows: the appliers are stopped
    span = traced.last(conn)
    assert span[trace.ROUTE_REASON] == "eventual"
    assert span[trace.ROUTE_ROLE] == "replica"
    assert span[trace.LEVEL] == "eventual"
    assert (span[trace.WAIT_OUTCOME], span[trace.WAIT_COUNT]) == ("none", 0)


def test_a_failed_statement_records_the_error(backend: Backend, traced: Traced) -> None:
    conn = backend.connect(telemetry=traced.telemetry)
    cur = conn.cursor()
    with pytest.raises(db.ProgrammingError):
        cur.execute("SELECT * FROM no_such_table")
    [record] = traced.records(conn)
    assert record.status is StatusCode.ERROR
    assert record.attributes[trace.ERROR_TYPE] == "consistent.errors.ProgrammingError"
    assert record.attributes[trace.DB_RESPONSE_STATUS_CODE] == "1146"
    assert record.attributes[trace.ROUTE_TARGET] in backend.replicas


def test_without_replicas_every_statement_is_traced_on_the_direct_path(
    backend: Backend, table: str, traced: Traced
) -> None:
    conn = backend.connect(telemetry=traced.telemetry, replicas=[])
    cur = conn.cursor()
    before = primary_executed(backend, conn.flavor)
    cur.execute(f"INSERT INTO {table} VALUES (%s, %s)", (1, 1))
    after = primary_executed(backend, conn.flavor)
    assert conn._direct is not None  # the statement took the path without routing
    cur.execute(f"SELECT v FROM {table} WHERE k = %s", (1,))
    assert cur.fetchall() == ((1,),)
    cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", [(2, 2), (3, 3)])
    with pytest.raises(db.IntegrityError):
        cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    cur.execute(b"SELECT 2")
    assert cur.fetchall() == ((2,),)
    spans = traced.spans(conn)
    operations = [s[trace.DB_OPERATION_NAME] for s in spans]
    assert operations == ["INSERT", "SELECT", "INSERT", "INSERT", "SELECT"]
    assert {route(s) for s in spans} == {(PRIMARY, "no_replicas", None)}
    assert {(s[trace.SERVER_ADDRESS], s[trace.SERVER_PORT]) for s in spans} == {
        address(backend.primary)
    }
    assert parse_state(spans[0][trace.GTID_PRODUCED], conn.flavor) == new_gtids(before, after)
    assert trace.GTID_PRODUCED not in spans[1]
    assert spans[2][trace.GTID_PRODUCED + trace.COUNT_SUFFIX] >= 1
    assert spans[3][trace.DB_RESPONSE_STATUS_CODE] == "1062"
    assert trace.GTID_PRODUCED not in spans[3]


def test_with_tracing_off_nothing_is_recorded(backend: Backend, table: str) -> None:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(enabled=False), exporters=[memory])
    try:
        replica_lists: list[list[str]] = [backend.replicas, []]
        for replicas in replica_lists:
            conn = backend.connect(telemetry=telemetry, replicas=replicas)
            assert conn.tracer is NOOP_TRACER
            assert conn.tracer.session_id == ""
            cur = conn.cursor()
            cur.execute(f"REPLACE INTO {table} VALUES (1, 1)")
            cur.execute(f"SELECT v FROM {table} WHERE k = 1")
            assert cur.fetchall() == ((1,),)
            cur.execute(b"SELECT 2")
            conn.commit()
            assert conn._span is NOOP_SPAN
        assert telemetry.flush(5)
        assert memory.records == []
    finally:
        telemetry.shutdown()


# --- the file, read back as plain JSON ------------------------------------------------------------


def any_value(value: Mapping[str, Any]) -> tuple[str, object]:
    """An OTLP JSON ``AnyValue``: its key and the Python value."""
    [(key, raw)] = value.items()
    decode = {"stringValue": str, "intValue": int, "doubleValue": float, "boolValue": bool}
    assert key in decode, key
    if key == "intValue":
        assert isinstance(raw, str)  # OTLP JSON writes 64-bit integers as strings
    return key, decode[key](raw)


def read_trace_file(path: Path) -> list[dict[str, Any]]:
    """Every span in the file: name, kind, status, ids and decoded attributes, checking each
    attribute's JSON type against the contract."""
    spans: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        request = json.loads(line)
        for resource_spans in request["resourceSpans"]:
            resource = {
                a["key"]: any_value(a["value"])[1] for a in resource_spans["resource"]["attributes"]
            }
            assert resource["service.name"]
            for scope_spans in resource_spans["scopeSpans"]:
                assert scope_spans["scope"]["name"] == trace.SCOPE_NAME
                for span in scope_spans["spans"]:
                    kinds = [
                        any_value(a["value"])[1]
                        for a in span["attributes"]
                        if a["key"] == trace.RECORD_KIND
                    ]
                    spec = trace.span_spec(kinds[0]) if kinds else None
                    assert spec is not None, span["name"]
                    attributes: dict[str, object] = {}
                    for item in span["attributes"]:
                        key, value = any_value(item["value"])
                        attr = spec.attribute(item["key"])
                        assert attr is not None, item["key"]
                        assert attr.type.value == key, (item["key"], key)
                        attributes[item["key"]] = value
                    spans.append({**span, "attributes": attributes})
    return spans


@pytest.mark.parametrize("configured", ["env", "explicit"])
def test_the_trace_file_follows_the_contract(
    backend: Backend,
    table: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    configured: str,
) -> None:
    path = tmp_path / "traces" / "consistent.jsonl"
    if configured == "env":
        monkeypatch.setenv("CONSISTENT_TRACE_FILE", str(path))
        telemetry = Telemetry.from_env()
    else:
        telemetry = Telemetry(TelemetryConfig(traces_exporters=("file",), trace_file=path))
    expected: list[tuple[str, str]] = []
    try:
        conn = backend.connect(telemetry=telemetry, wait_timeout=5.0)
        cur = conn.cursor()

        def run(sql: str, args: Any = None) -> None:
            with contextlib.suppress(db.Error):
                cur.execute(sql, args)
            assert conn.last_decision is not None
            expected.append((conn.last_decision.target, str(conn.last_decision.reason)))

        run(f"INSERT INTO {table} VALUES (%s, %s)", (1, 1))
        run(f"SELECT v FROM {table} WHERE k = 1")
        run(f"SELECT v FROM {table} WHERE k = 1")
        run("/* consistent: primary */ SELECT 1")
        run("SELECT * FROM no_such_table")
        conn.begin()
        expected.append((PRIMARY, "in_transaction"))
        run(f"UPDATE {table} SET v = 2 WHERE k = 1")
        conn.commit()
        expected.append((PRIMARY, "in_transaction"))
        run("CREATE TEMPORARY TABLE tmp (a INT)")
        run("SELECT * FROM tmp")
        session = conn.tracer.session_id
        conn.close()
    finally:
        telemetry.shutdown()
    spans = read_trace_file(path)
    assert len(spans) == len(expected)
    for span in spans:
        assert trace.check_attributes(span["name"], span["attributes"]) == ()
        assert span["attributes"][trace.RECORD_KIND] == trace.RecordKind.STATEMENT
        assert span["name"] == trace.statement_span_name(
            span["attributes"].get(trace.DB_OPERATION_NAME, ""),
            span["attributes"].get(trace.DB_COLLECTION_NAME),
            span["attributes"][trace.DB_SYSTEM_NAME],
        )
        assert span["kind"] == int(trace.SpanKind.CLIENT)
        assert span["attributes"][trace.SESSION_ID] == session
        assert len(span["traceId"]) == 32
        assert len(span["spanId"]) == 16
        assert int(span["startTimeUnixNano"]) <= int(span["endTimeUnixNano"])
    routes = [
        (s["attributes"][trace.ROUTE_TARGET], s["attributes"][trace.ROUTE_REASON]) for s in spans
    ]
    assert routes == expected
    reasons = {reason for _, reason in expected}
    assert {"write", "hint", "in_transaction", "pinned"} <= reasons
    failed = [s for s in spans if s["attributes"].get(trace.ERROR_TYPE)]
    assert [s["attributes"][trace.DB_RESPONSE_STATUS_CODE] for s in failed] == ["1146"]
    assert failed[0]["status"]["code"] == int(StatusCode.ERROR)
    assert sum(trace.GTID_PRODUCED in s["attributes"] for s in spans) == 2  # INSERT, COMMIT


def test_read_all_writes_records_produced_gtids_only_where_the_ok_packet_has_them_alone(
    backend: Backend, table: str, traced: Traced
) -> None:
    conn = backend.connect(telemetry=traced.telemetry, level="read_all_writes")
    cur = conn.cursor()
    before = primary_executed(backend, conn.flavor)
    cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    after = primary_executed(backend, conn.flavor)
    span = traced.last(conn)
    assert route(span) == (PRIMARY, "write", "write")
    if conn.flavor == "mysql":
        # ALL_GTIDS: the OK packet carries the primary's whole executed set, which this
        # statement did not produce alone; the span leaves the attribute out.
        assert trace.GTID_PRODUCED not in span
        assert parse_state(conn.token.partition(":")[2], conn.flavor) == after
    else:
        # MariaDB tracks last_gtid whatever the level.
        assert parse_state(span[trace.GTID_PRODUCED], conn.flavor) == new_gtids(before, after)
