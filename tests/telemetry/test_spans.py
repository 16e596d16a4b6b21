"""One span per routed statement, with every attribute of the contract, for each route reason.

Statements are routed by the real ``consistent.policy`` and recorded through the facade with the
calls the DB-API wrapper makes (see ``conftest.Harness.run``)."""

from __future__ import annotations

import hashlib
import sys
import tracemalloc

import pytest
from opentelemetry.sdk.trace import TracerProvider

from consistent import trace
from consistent.classify import classify
from consistent.errors import ConsistencyTimeout, OperationalError
from consistent.gtid import GtidSet, MariaPosition
from consistent.policy import PRIMARY, WaitOutcome
from consistent.telemetry import NOOP_SPAN, NOOP_TRACER, SpanRecord, Telemetry, TelemetryConfig
from consistent.telemetry.records import StatusCode

from .conftest import R1, R2, UUID, HarnessFactory

G1 = GtidSet.parse(f"{UUID}:1-3")


def conforms(record: SpanRecord) -> None:
    assert trace.check_attributes(record.name, record.attributes) == ()


def test_a_write_records_where_it_ran_and_the_gtids_it_produced(harness: HarnessFactory) -> None:
    h = harness()
    h.run("UPDATE t SET v = 1 WHERE k = 7", produced=G1)
    record = h.last()
    a = record.attributes
    assert record.name == "UPDATE t"
    assert record.kind is trace.SpanKind.CLIENT
    assert a[trace.DB_COLLECTION_NAME] == "t"
    assert a[trace.DB_SYSTEM] == "mysql"
    assert a[trace.RECORD_KIND] == "statement"
    assert a[trace.DB_SYSTEM_NAME] == "mysql"
    assert (a[trace.SERVER_ADDRESS], a[trace.SERVER_PORT]) == ("db-primary.example", 3306)
    assert a[trace.DB_OPERATION_NAME] == "UPDATE"
    assert a[trace.SESSION_ID] == h.tracer.session_id
    assert len(h.tracer.session_id) == 16
    assert a[trace.LEVEL] == "read_own_writes"
    assert a[trace.STATEMENT_KIND] == "write"
    assert a[trace.ROUTE_ACTION] == "execute"
    assert (a[trace.ROUTE_TARGET], a[trace.ROUTE_ROLE]) == (PRIMARY, "primary")
    assert (a[trace.ROUTE_REASON], a[trace.ROUTE_DETAIL]) == ("write", "write")
    assert a[trace.GTID_PRODUCED] == f"{UUID}:1-3"
    assert a[trace.GTID_PRODUCED + trace.COUNT_SUFFIX] == 3
    assert a[trace.GTID_REQUIRED] == ""  # required before the write: nothing
    assert (a[trace.WAIT_OUTCOME], a[trace.WAIT_COUNT], a[trace.WAIT_DURATION_MS]) == (
        "none",
        0,
        0.0,
    )
    assert trace.DB_QUERY_TEXT not in a  # capture is off by default
    assert record.start_ns <= record.end_ns
    assert record.status is StatusCode.UNSET
    conforms(record)


def test_a_first_read_needs_nothing_and_names_the_replica_address(
    harness: HarnessFactory,
) -> None:
    h = harness()
    h.run("SELECT * FROM t WHERE k = 7")
    a = h.last().attributes
    assert a[trace.ROUTE_REASON] == "nothing_required"
    assert a[trace.ROUTE_ROLE] == "replica"
    target = a[trace.ROUTE_TARGET]
    assert target in (R1, R2)
    host, port = str(target).split(":")
    assert (a[trace.SERVER_ADDRESS], a[trace.SERVER_PORT]) == (host, int(port))
    assert a[trace.STATEMENT_KIND] == "read"
    conforms(h.last())


def test_waited_records_the_wait_set_its_outcome_and_duration(harness: HarnessFactory) -> None:
    h = harness()
    h.run("UPDATE t SET v = 2", produced=G1)
    decision = h.run("SELECT v FROM t", wait_seconds=0.025)
    a = h.last().attributes
    assert a[trace.ROUTE_REASON] == "waited"
    assert a[trace.ROUTE_TARGET] == decision.target != PRIMARY
    assert a[trace.GTID_REQUIRED] == f"{UUID}:1-3"
    assert a[trace.WAIT_SET] == f"{UUID}:1-3"
    assert a[trace.WAIT_SET + trace.COUNT_SUFFIX] == 3
    assert a[trace.WAIT_TARGET] == decision.target
    assert a[trace.WAIT_OUTCOME] == "satisfied"
    assert a[trace.WAIT_COUNT] == 1
    assert a[trace.WAIT_DURATION_MS] == pytest.approx(25.0)
    conforms(h.last())


def test_known_covered_records_the_replicas_known_state(harness: HarnessFactory) -> None:
    h = harness()
    h.run("INSERT INTO t VALUES (1)", produced=G1)
    wider = G1 | GtidSet.parse(f"{UUID}:4-9")
    h.knowledge.record_executed(R1, wider)
    h.knowledge.record_executed(R2, wider)
    h.run("SELECT * FROM t")
    a = h.last().attributes
    assert a[trace.ROUTE_REASON] == "known_covered"
    assert a[trace.REPLICA_KNOWN_EXECUTED] == f"{UUID}:1-9"
    assert a[trace.REPLICA_KNOWN_EXECUTED + trace.COUNT_SUFFIX] == 9
    assert a[trace.WAIT_OUTCOME] == "none"
    # Learnt from the replicas' OK packets, before the read began (on the spans' clock).
    assert a[trace.REPLICA_KNOWN_SOURCE] == "tracked"
    learnt = a[trace.REPLICA_KNOWN_AT_NS]
    assert isinstance(learnt, int)
    assert 0 < learnt <= h.last().start_ns
    conforms(h.last())


def test_a_read_after_a_wait_records_that_the_wait_taught_the_known_state(
    harness: HarnessFactory,
) -> None:
    h = harness()
    h.run("UPDATE t SET v = 2", produced=G1)
    waited = h.run("SELECT v FROM t")
    first = h.last()
    assert trace.REPLICA_KNOWN_AT_NS not in first.attributes  # nothing was known before it
    h.run("SELECT v FROM t WHERE k = 1")
    second = h.last()
    a = second.attributes
    assert (a[trace.ROUTE_REASON], a[trace.ROUTE_TARGET]) == ("known_covered", waited.target)
    assert a[trace.REPLICA_KNOWN_EXECUTED] == f"{UUID}:1-3"
    assert a[trace.REPLICA_KNOWN_SOURCE] == "wait"
    learnt = a[trace.REPLICA_KNOWN_AT_NS]
    assert isinstance(learnt, int)
    assert first.start_ns <= learnt <= second.start_ns
    conforms(second)


def test_timeout_fallback_goes_to_the_primary_and_keeps_the_wait(harness: HarnessFactory) -> None:
    h = harness()
    h.run("UPDATE t SET v = 3", produced=G1)
    h.run("SELECT v FROM t", waits=WaitOutcome.TIMED_OUT)
    a = h.last().attributes
    assert (a[trace.ROUTE_REASON], a[trace.ROUTE_TARGET]) == ("timeout_fallback", PRIMARY)
    assert a[trace.WAIT_OUTCOME] == "timeout"
    assert a[trace.WAIT_TARGET] in (R1, R2)
    assert a[trace.WAIT_SET] == f"{UUID}:1-3"
    assert a[trace.ROUTE_TRIED] == a[trace.WAIT_TARGET]
    conforms(h.last())


def test_a_refused_wait_is_an_error_outcome(harness: HarnessFactory) -> None:
    h = harness()
    h.run("UPDATE t SET v = 3", produced=G1)
    h.run("SELECT v FROM t", waits=WaitOutcome.ERROR)
    a = h.last().attributes
    assert a[trace.ROUTE_REASON] == "timeout_fallback"
    assert a[trace.ROUTE_DETAIL] == "wait_error"
    assert a[trace.WAIT_OUTCOME] == "error"
    conforms(h.last())


def test_next_replica_counts_every_wait(harness: HarnessFactory) -> None:
    h = harness(on_timeout="next_replica")
    h.run("UPDATE t SET v = 3", produced=G1)
    h.run("SELECT v FROM t", waits={R1: WaitOutcome.TIMED_OUT, R2: WaitOutcome.TIMED_OUT})
    a = h.last().attributes
    assert a[trace.WAIT_COUNT] == 2
    assert a[trace.WAIT_DURATION_MS] == pytest.approx(40.0)
    assert sorted(str(a[trace.ROUTE_TRIED]).split(",")) == sorted([R1, R2])
    assert a[trace.ROUTE_TARGET] == PRIMARY
    conforms(h.last())


def test_timeout_error_fails_the_span_with_the_exception(harness: HarnessFactory) -> None:
    h = harness(on_timeout="error")
    h.run("UPDATE t SET v = 4", produced=G1)
    with pytest.raises(ConsistencyTimeout):
        h.run("SELECT v FROM t", waits=WaitOutcome.TIMED_OUT)
    record = h.last()
    a = record.attributes
    assert a[trace.ROUTE_REASON] == "timeout_error"
    assert a[trace.ROUTE_ACTION] == "fail"
    assert a[trace.ERROR_TYPE] == "consistent.errors.ConsistencyTimeout"
    assert a[trace.DB_RESPONSE_STATUS_CODE] == str(ConsistencyTimeout("x").errno)
    assert record.status is StatusCode.ERROR
    assert "did not reach" in record.status_message
    conforms(record)


def test_pinned_names_the_pin_reason(harness: HarnessFactory) -> None:
    h = harness()
    h.run("CREATE TEMPORARY TABLE scratch (a INT)")
    h.run("SELECT * FROM t")
    a = h.last().attributes
    assert a[trace.ROUTE_REASON] == "pinned"
    assert a[trace.ROUTE_PINNED_REASON] == "temporary_table"
    assert a[trace.ROUTE_TARGET] == PRIMARY
    conforms(h.last())


def test_in_transaction(harness: HarnessFactory) -> None:
    h = harness()
    h.run("BEGIN")
    h.run("SELECT * FROM t")
    begin, read = h.records()[-2:]
    assert begin.attributes[trace.ROUTE_REASON] == "in_transaction"
    assert begin.attributes[trace.STATEMENT_KIND] == "transaction_begin"
    assert read.attributes[trace.ROUTE_REASON] == "in_transaction"
    assert read.attributes[trace.ROUTE_TARGET] == PRIMARY
    conforms(read)


def test_no_healthy_replica(harness: HarnessFactory) -> None:
    h = harness()
    for replica in (R1, R2):
        h.knowledge.record_failure(replica)
    h.run("SELECT 1")
    a = h.last().attributes
    assert (a[trace.ROUTE_REASON], a[trace.ROUTE_TARGET]) == ("no_healthy_replica", PRIMARY)
    conforms(h.last())


@pytest.mark.parametrize(
    ("sql", "level", "reason", "detail"),
    [
        ("/* consistent: primary */ SELECT 1", "read_own_writes", "hint", "primary"),
        ("SELECT 1", "eventual", "eventual", None),
        ("SET NAMES utf8mb4", "read_own_writes", "session_state", None),
        ("SELECT * FROM t FOR UPDATE", "read_own_writes", "write", "for_update"),
    ],
)
def test_other_reasons(
    harness: HarnessFactory, sql: str, level: str, reason: str, detail: str | None
) -> None:
    h = harness(level=level)
    h.run(sql)
    a = h.last().attributes
    assert a[trace.ROUTE_REASON] == reason
    assert a.get(trace.ROUTE_DETAIL) == detail
    assert a[trace.LEVEL] == level
    conforms(h.last())


def test_a_statement_without_a_decision_is_a_no_replicas_primary_route(
    harness: HarnessFactory,
) -> None:
    h = harness()
    with h.tracer.statement("  /* c */ select 1"):
        pass
    a = h.last().attributes
    assert (a[trace.ROUTE_TARGET], a[trace.ROUTE_REASON]) == (PRIMARY, "no_replicas")
    assert a[trace.DB_OPERATION_NAME] == "SELECT"
    assert trace.LEVEL not in a
    conforms(h.last())


def test_an_exception_leaving_the_block_fails_the_span(harness: HarnessFactory) -> None:
    h = harness()

    def run() -> None:
        with h.tracer.statement("SELECT 1") as span:
            span.route(R1, "nothing_required")
            raise OperationalError(2013, "Lost connection")

    with pytest.raises(OperationalError):
        run()
    record = h.last()
    assert record.status is StatusCode.ERROR
    assert record.attributes[trace.DB_RESPONSE_STATUS_CODE] == "2013"
    assert record.attributes[trace.ERROR_TYPE] == "consistent.errors.OperationalError"
    assert record.attributes[trace.ROUTE_TARGET] == R1


def test_mariadb_positions_and_produced_merge(harness: HarnessFactory) -> None:
    h = harness(flavor="mariadb")
    with h.tracer.statement("INSERT INTO t VALUES (1); INSERT INTO u VALUES (2)") as span:
        span.produced(MariaPosition.parse("0-1-10"))
        span.produced(MariaPosition.parse("0-1-11,1-2-5"))
    a = h.last().attributes
    assert a[trace.DB_SYSTEM_NAME] == "mariadb"
    assert a[trace.GTID_PRODUCED] == "0-1-11,1-2-5"
    assert a[trace.GTID_PRODUCED + trace.COUNT_SUFFIX] == 2


def test_query_text_is_masked_and_only_when_enabled(harness: HarnessFactory) -> None:
    h = harness(config=TelemetryConfig(capture_query_text=True))
    h.run("UPDATE t SET name = 'alice' WHERE id IN (1, 2, 3)")
    assert h.last().attributes[trace.DB_QUERY_TEXT] == "UPDATE t SET name = ? WHERE id IN (?)"


def test_large_sets_become_a_digest_and_a_count(harness: HarnessFactory) -> None:
    h = harness(config=TelemetryConfig(max_gtid_chars=40))
    big = GtidSet.parse(f"{UUID}:1:3:5:7:9:11:13")
    h.run("UPDATE t SET v = 1", produced=big)
    a = h.last().attributes
    text = f"{UUID}:1:3:5:7:9:11:13"
    assert trace.GTID_PRODUCED not in a
    assert a[trace.GTID_PRODUCED + trace.DIGEST_SUFFIX] == (
        "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    )
    assert a[trace.GTID_PRODUCED + trace.COUNT_SUFFIX] == 7
    conforms(h.last())


def test_a_statement_inside_an_application_span_joins_its_trace(harness: HarnessFactory) -> None:
    h = harness()
    tracer = TracerProvider().get_tracer("app")
    with tracer.start_as_current_span("request") as parent:
        h.run("SELECT 1")
    context = parent.get_span_context()
    record = h.last()
    assert record.trace_id == context.trace_id
    assert record.parent_span_id == context.span_id
    assert record.span_id not in (0, context.span_id)


def test_statements_outside_any_span_get_their_own_traces(harness: HarnessFactory) -> None:
    h = harness()
    h.run("SELECT 1")
    h.run("SELECT 2")
    first, second = h.records()
    assert first.parent_span_id == second.parent_span_id == 0
    assert first.trace_id != second.trace_id
    assert first.trace_id > 0
    assert first.span_id > 0


# --- the disabled path -------------------------------------------------------------------------


def test_disabled_telemetry_hands_out_the_shared_no_op_objects() -> None:
    for telemetry in (
        Telemetry(TelemetryConfig(enabled=False)),
        Telemetry(TelemetryConfig()),  # no exporter named: nothing to record
        Telemetry(TelemetryConfig(sampler="always_off"), exporters=[]),
    ):
        tracer = telemetry.session(system="mysql")
        assert tracer is NOOP_TRACER
        assert tracer.statement("SELECT 1") is NOOP_SPAN
        assert not telemetry.active
        assert telemetry.flush(1)
        telemetry.shutdown()


def test_a_ratio_sampler_of_zero_records_nothing(harness: HarnessFactory) -> None:
    h = harness(config=TelemetryConfig(sampler="traceidratio", sampler_ratio=0.0))
    assert h.tracer.statement("SELECT 1") is NOOP_SPAN
    h.run("SELECT 1")
    assert h.records() == []


def test_the_no_op_path_allocates_nothing_per_statement() -> None:
    tracer = NOOP_TRACER
    decision = object()

    def loop(n: int) -> None:
        for _ in range(n):
            with tracer.statement("SELECT 1") as span:
                span.decision(decision)  # type: ignore[arg-type]
                span.wait(decision, "reached", 0.1)  # type: ignore[arg-type]

    loop(10)
    tracemalloc.start()
    try:
        loop(10)
        _, small = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        loop(20_000)
        current, large = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert large - small < 512  # constant, not growing with the number of statements
    assert current < 512
    assert sys.getrefcount(NOOP_SPAN) > 1


def test_read_all_writes_says_where_the_required_set_came_from(harness: HarnessFactory) -> None:
    h = harness(level="read_all_writes", flavor="mariadb")
    h.run("INSERT INTO t VALUES (1)", produced=MariaPosition.parse("0-1-4"))
    for replica in (R1, R2):
        h.knowledge.record_executed(replica, MariaPosition.parse("1-2-9"))
    h.run("SELECT v FROM t")  # waits for 0-1-4 where 1-2-9 was known: the read saw both
    h.policy.acknowledged.add(MariaPosition.parse("0-1-6"))  # another session's write
    h.run("SELECT v FROM t")
    a = h.last().attributes
    assert a[trace.GTID_REQUIRED_OWN] == "0-1-4"
    assert a[trace.GTID_REQUIRED_SEEN] == "0-1-4,1-2-9"
    assert a[trace.GTID_REQUIRED_ACKNOWLEDGED] == "0-1-6"
    assert a[trace.GTID_REQUIRED_ACKNOWLEDGED + trace.COUNT_SUFFIX] == 1
    assert a[trace.GTID_REQUIRED] == "0-1-6,1-2-9"
    conforms(h.last())
    h.policy.level = "read_own_writes"  # type: ignore[assignment]
    h.run("SELECT v FROM t")
    assert trace.GTID_REQUIRED_ACKNOWLEDGED not in h.last().attributes


def test_sessions_with_another_primary_name_their_own(harness: HarnessFactory) -> None:
    # After a switchover, new sessions map "primary" to the promoted server: their spans must
    # not take the route parts cached for the old one.
    h = harness()
    h.run("UPDATE t SET v = 1 WHERE k = 7", produced=G1)
    other = h.telemetry.session(system="mysql", addresses={PRIMARY: ("db-new.example", 3307)})
    with other.statement("UPDATE t SET v = 2 WHERE k = 7") as span:
        span.decision(h.policy.route(classify("UPDATE t SET v = 2 WHERE k = 7"), ""))
    h.run("UPDATE t SET v = 3 WHERE k = 7", produced=G1)
    where = {
        (
            r.attributes[trace.SESSION_ID],
            r.attributes[trace.SERVER_ADDRESS],
            r.attributes[trace.SERVER_PORT],
        )
        for r in h.records()
    }
    assert where == {
        (h.tracer.session_id, "db-primary.example", 3306),
        (other.session_id, "db-new.example", 3307),
    }


def test_a_session_names_the_new_primary_once_it_moves_and_earlier_spans_keep_the_old(
    harness: HarnessFactory,
) -> None:
    h = harness()
    h.run("UPDATE t SET v = 1 WHERE k = 7", produced=G1)  # not exported yet
    with h.tracer.statement("SELECT 1") as plain:  # routed without a decision
        plain.route(PRIMARY, "primary_only")
    h.tracer.set_address(PRIMARY, ("db-promoted.example", 3308))
    h.run("UPDATE t SET v = 3 WHERE k = 7", produced=G1)
    with h.tracer.statement("SELECT 1") as plain:
        plain.route(PRIMARY, "primary_only")
    where = [
        (r.attributes[trace.SERVER_ADDRESS], r.attributes[trace.SERVER_PORT]) for r in h.records()
    ]
    assert where == [
        ("db-primary.example", 3306),
        ("db-primary.example", 3306),
        ("db-promoted.example", 3308),
        ("db-promoted.example", 3308),
    ]
