"""The pure transforms, each on a small hand-built frame whose expected result was worked out
by hand (GTID text against ``consistent.gtid``, an independent parser)."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import ArrayType, LongType, StringType
from pyspark.testing import assertDataFrameEqual

from analytics import schema, transforms
from consistent.gtid import GtidSet

from .conftest import frame, struct

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"
TEXT = struct(("id", LongType()), ("text", StringType()))


def _gtid_frame(spark: SparkSession, texts: list[str | None]) -> object:
    return frame(spark, TEXT, [{"id": i, "text": t} for i, t in enumerate(texts)])


# --- GTID text --------------------------------------------------------------------------------


def test_gtid_high_per_source(spark: SparkSession) -> None:
    texts = [
        f"{U1}:1-5:7",  # one UUID: the last number of its run
        f"  {U1.upper()}:12  ",  # case and blanks
        f"{U1}:1-5,\n{U2}:3-40",  # two UUIDs, over two lines as mysqld prints them
        f"{U1}:1-5:tg:3-4:9,{U2}:7",  # tagged: untagged intervals first, then each tag
        f"{U2}:tg:2-6",  # only tagged intervals: the plain UUID has none
        "0-1-10,2-3-4",  # MariaDB: per domain, the sequence number
        None,
        "",
        "ANONYMOUS",
    ]
    columns = [("u1", U1), ("u2", U2), ("tg", f"{U1}:tg"), ("u2tg", f"{U2}:tg"), ("d0", "0"),
               ("d2", "2")]  # fmt: skip
    clean = transforms.clean_gtid_text(F.col("text"))
    df = _gtid_frame(spark, texts).select(  # type: ignore[attr-defined]
        "id", *[transforms.gtid_high(clean, source).alias(name) for name, source in columns]
    )
    out = struct(("id", LongType()), *[(name, LongType()) for name, _s in columns])
    expected = frame(
        spark,
        out,
        [
            {"id": 0, "u1": 7},
            {"id": 1, "u1": 12},
            {"id": 2, "u1": 5, "u2": 40},
            {"id": 3, "u1": 5, "tg": 9, "u2": 7},
            {"id": 4, "u2tg": 6},
            {"id": 5, "d0": 10, "d2": 4},
            {"id": 6},
            {"id": 7},
            {"id": 8},
        ],
    )
    assertDataFrameEqual(df, expected)


def test_gtid_high_raw_plain_groups_and_the_rest(spark: SparkSession) -> None:
    """Plain groups take the shortcut; everything else must give what the expressions give."""
    texts = [
        f"{U1}:1-5:7",  # plain: the last number
        f"{U1}:12",
        f"{U2}:3-40",  # plain, another UUID: none of U1
        f"  {U1.upper()}:12  ",  # case and blanks: the expressions
        f"{U1}:1-5,{U2}:3-40",  # two groups
        f"{U1}:1-5:tg:3-4:9",  # tagged
        f"{U1}:0",  # GNO 0 is no transaction
        "0-1-10",  # MariaDB
        None,
        "",
    ]
    columns = [("u1", U1), ("u2", U2), ("tg", f"{U1}:tg"), ("d0", "0")]
    df = _gtid_frame(spark, texts).select(  # type: ignore[attr-defined]
        "id", *[transforms.gtid_high_raw(F.col("text"), s).alias(name) for name, s in columns]
    )
    out = struct(("id", LongType()), *[(name, LongType()) for name, _s in columns])
    expected = frame(
        spark,
        out,
        [
            {"id": 0, "u1": 7},
            {"id": 1, "u1": 12},
            {"id": 2, "u2": 40},
            {"id": 3, "u1": 12},
            {"id": 4, "u1": 5, "u2": 40},
            {"id": 5, "u1": 5, "tg": 9},
            {"id": 6},
            {"id": 7, "d0": 10},
            {"id": 8},
            {"id": 9},
        ],
    )
    assertDataFrameEqual(df, expected)


def test_gtid_source_representative(spark: SparkSession) -> None:
    """One group becomes ``head:1``; the numbers of any other set become 1, so that sets of
    the same sources share one representative whatever they hold."""
    texts = [
        f"{U1}:1-5:7",
        f"{U1}:1-5,{U2}:7",
        f"{U1}:2-9:11-12,{U2}:3-4",
        f"{U1}:tg:3-8",
        "0-1-4,2-7-9",
        "0-3-12,2-1-1",
        None,
    ]
    df = _gtid_frame(spark, texts).select(  # type: ignore[attr-defined]
        "id", transforms.gtid_source_representative(F.col("text")).alias("text")
    )
    expected = frame(
        spark,
        struct(("id", LongType()), ("text", StringType())),
        [
            {"id": 0, "text": f"{U1}:1"},
            {"id": 1, "text": f"{U1}:1,{U2}:1"},
            {"id": 2, "text": f"{U1}:1:1,{U2}:1"},
            {"id": 3, "text": f"{U1}:tg:1"},
            {"id": 4, "text": "0-1-1,2-1-1"},
            {"id": 5, "text": "0-1-1,2-1-1"},
            {"id": 6, "text": None},
        ],
    )
    assertDataFrameEqual(df, expected)


def test_a_representative_names_the_sources_of_its_text(spark: SparkSession) -> None:
    """Whatever the text, its representative names the same sources (and is short for one
    untagged group whose intervals are digits, ``:`` and ``-``, well-formed or not)."""
    texts = [
        f"{U1}:1-5:7",
        f"{U1.upper()}:3",
        f"{U1}:5 ",
        f"{U1}:5.3",
        f"{U1}:",
        f"{U1}:5:",
        f"{U1}:TG:3",
        f"{U1}:_9:3",
        f"{U1}:1-5,\n{U2}:7",
        f" {U1}:5",
        "0-1-10",
        "0" * 36 + ":5",
        "x",
        f"{U1}:1-5:7,{U2}:3-9",
        "0-1-4,2-7-9",
        f"{U1}:1-5:tg:3-4,{U2}:8",
        "0-1-4,x",
        f"{U1}:5-6-7,0-1-2",
        f"{U1}:1-5 ,{U2}:3",
        "12345678-1234-1234-1234-123456789012:1-2,0-1-5",
    ]
    df = _gtid_frame(spark, texts).select(  # type: ignore[attr-defined]
        "id",
        transforms.gtid_source_representative(F.col("text")).alias("rep"),
        F.col("text"),
    )
    rows = df.select(
        "id",
        "rep",
        transforms.gtid_sources_of(transforms.clean_gtid_text(F.col("rep"))).alias("of_rep"),
        transforms.gtid_sources_of(transforms.clean_gtid_text(F.col("text"))).alias("of_text"),
    ).collect()
    assert {r["id"]: sorted(r["of_rep"]) for r in rows} == {
        r["id"]: sorted(r["of_text"]) for r in rows
    }
    short = {r["id"] for r in rows if r["rep"] == f"{r['rep'][:36]}:1"}
    assert short == {0, 1, 5, 11}


def test_gtid_sources_of(spark: SparkSession) -> None:
    texts = [f"{U1}:1-5:tg:3-4:9,\n{U2.upper()}:7", f"{U2}:tg:2-6", "0-1-10,2-3-4", None, "x"]
    clean = transforms.clean_gtid_text(F.col("text"))
    df = _gtid_frame(spark, texts).select(  # type: ignore[attr-defined]
        "id", transforms.gtid_sources_of(clean).alias("sources")
    )
    expected = frame(
        spark,
        struct(("id", LongType()), ("sources", ArrayType(StringType()))),
        [
            {"id": 0, "sources": [U1, U2, f"{U1}:tg"]},
            {"id": 1, "sources": [f"{U2}:tg"]},
            {"id": 2, "sources": ["0", "2"]},
            {"id": 3, "sources": []},
            {"id": 4, "sources": []},
        ],
    )
    assertDataFrameEqual(df, expected)


def test_gtid_high_agrees_with_the_gtid_module(spark: SparkSession) -> None:
    """Random canonical sets, written by ``consistent.gtid``: the highest GNO per UUID that
    module computes is what the Spark expressions find, on clean and on raw text."""
    rng = random.Random(7)
    uuids = [f"{i:08x}-71ca-11e1-9e33-c80aa9429562" for i in range(3)]
    sets = []
    for _ in range(60):
        gtids = GtidSet()
        for uuid in rng.sample(uuids, rng.randint(1, 3)):
            for _ in range(rng.randint(1, 4)):
                start = rng.randint(1, 10_000)
                gtids = gtids.add_interval(uuid, start, start + rng.randint(0, 50))
        sets.append(gtids)
    clean = transforms.clean_gtid_text(F.col("text"))
    df = _gtid_frame(spark, [str(s) for s in sets]).select(  # type: ignore[attr-defined]
        "id",
        *[transforms.gtid_high(clean, u).alias(f"u{i}") for i, u in enumerate(uuids)],
        *[transforms.gtid_high_raw(F.col("text"), u).alias(f"r{i}") for i, u in enumerate(uuids)],
    )
    expected_rows: list[dict[str, int | None]] = []
    for index, gtids in enumerate(sets):
        highs: dict[str, int] = {}
        for uuid, _tag, _start, end in gtids.intervals():
            highs[uuid] = max(highs.get(uuid, 0), end)
        row: dict[str, int | None] = {"id": index}
        row |= {f"u{i}": highs.get(u) for i, u in enumerate(uuids)}
        row |= {f"r{i}": highs.get(u) for i, u in enumerate(uuids)}
        expected_rows.append(row)
    names = [f"{kind}{i}" for kind in ("u", "r") for i in range(len(uuids))]
    out = struct(("id", LongType()), *[(name, LongType()) for name in names])
    assertDataFrameEqual(df, frame(spark, out, expected_rows))


# --- OTLP requests to typed records --------------------------------------------------------------


def _kv(key: str, **value: object) -> dict[str, object]:
    return {"key": key, "value": value}


def _request(spans: list[dict[str, object]], service: str = "svc") -> dict[str, object]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_kv("service.name", stringValue=service)]},
                "scopeSpans": [{"scope": {"name": "consistent", "version": "1"}, "spans": spans}],
            }
        ]
    }


def _span(name: str, span_id: str, attributes: list[dict[str, object]]) -> dict[str, object]:
    return {
        "traceId": "0AF7651916CD43DD8448EB211C80319C",
        "spanId": span_id,
        "parentSpanId": "",
        "name": name,
        "kind": 3,
        "startTimeUnixNano": "1700000000000000123",
        "endTimeUnixNano": "1700000000002000123",
        "attributes": attributes,
        "status": {},
    }


@pytest.fixture
def requests(spark: SparkSession) -> object:
    # Records are told apart by consistent.record.kind, never by name: the statement span is
    # named as the database conventions say, and a span named like a record kind without the
    # attribute is not one.
    statement = _span(
        "SELECT orders",
        "B7AD6B7169203331",
        [
            _kv("consistent.record.kind", stringValue="statement"),
            _kv("server.port", intValue="3307"),
            _kv("consistent.session.id", stringValue="s1"),
            _kv("consistent.route.target", stringValue="10.0.0.2:3306"),
            _kv("consistent.wait.duration_ms", intValue="3"),  # an int where a double goes
            _kv("consistent.wait.count", stringValue="two"),  # wrong type: null
            _kv("consistent.level", stringValue="eventual"),
            _kv("consistent.level", stringValue="read_own_writes"),  # repeated: last wins
        ],
    )
    sample = _span(
        "consistent.lag_sample",
        "00f067aa0ba902b7",
        [
            _kv("consistent.record.kind", stringValue="lag_sample"),
            _kv("consistent.lag.replica", stringValue="10.0.0.2:3306"),
            _kv("consistent.lag.reachable", boolValue=True),
            _kv("consistent.lag.apply_lag_us", intValue="1500"),
        ],
    )
    other = _span("consistent.statement", "0000000000000001", [])
    rows = [_request([statement, other]), _request([sample], service="sampler"), {}]
    return spark.createDataFrame(rows, schema.OTLP_REQUEST)


def test_explode_requests(spark: SparkSession, requests: object) -> None:
    spans = transforms.explode_requests(requests).drop("attributes")  # type: ignore[arg-type]
    common = {
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "kind": 3,
        "start_ns": 1700000000000000123,
        "end_ns": 1700000000002000123,
        "status_code": 0,
    }
    expected = frame(
        spark,
        schema.SPAN,
        [
            {
                **common,
                "service_name": "svc",
                "span_id": "b7ad6b7169203331",
                "name": "SELECT orders",
            },
            {
                **common,
                "service_name": "svc",
                "span_id": "0000000000000001",
                "name": "consistent.statement",
            },
            {
                **common,
                "service_name": "sampler",
                "span_id": "00f067aa0ba902b7",
                "name": "consistent.lag_sample",
            },
        ],
    ).drop("attributes")
    assertDataFrameEqual(spans, expected)


def test_statements_and_lag_samples_are_typed(spark: SparkSession, requests: object) -> None:
    spans = transforms.explode_requests(requests)  # type: ignore[arg-type]
    base = {
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "start_ns": 1700000000000000123,
        "end_ns": 1700000000002000123,
        "status_code": 0,
    }
    statement = frame(
        spark,
        schema.STATEMENT,
        [
            {
                **base,
                "service_name": "svc",
                "span_id": "b7ad6b7169203331",
                "record_kind": "statement",
                "server_port": 3307,
                "session_id": "s1",
                "route_target": "10.0.0.2:3306",
                "wait_duration_ms": 3.0,
                "level": "read_own_writes",
            }
        ],
    )
    sample = frame(
        spark,
        schema.LAG_SAMPLE,
        [
            {
                **base,
                "service_name": "sampler",
                "span_id": "00f067aa0ba902b7",
                "record_kind": "lag_sample",
                "lag_replica": "10.0.0.2:3306",
                "lag_reachable": True,
                "lag_apply_lag_us": 1500,
            }
        ],
    )
    assertDataFrameEqual(transforms.statements(spans), statement)
    assertDataFrameEqual(transforms.lag_samples(spans), sample)
    both = transforms.records(spans)
    assert sorted(r["record"] for r in both.collect()) == ["lag_sample", "statement"]
    columns = [f.name for f in schema.STATEMENT.fields]
    assertDataFrameEqual(both.where("record = 'statement'").select(*columns), statement)


# --- sessions -----------------------------------------------------------------------------------


def test_sequence_sessions_and_sessionize(spark: SparkSession) -> None:
    rows = [
        # s1: write, read on a replica, pinned read on the primary (started in this order)
        {"session_id": "s1", "span_id": "c", "start_ns": 30, "end_ns": 31,
         "statement_kind": "read", "route_role": "primary", "route_reason": "pinned",
         "route_pinned_reason": "temporary_table", "level": "read_own_writes"},
        {"session_id": "s1", "span_id": "a", "start_ns": 10, "end_ns": 12,
         "statement_kind": "write", "route_role": "primary", "gtid_produced_count": 1,
         "level": "read_own_writes", "service_name": "app"},
        {"session_id": "s1", "span_id": "b", "start_ns": 20, "end_ns": 25,
         "statement_kind": "read", "route_role": "replica", "level": "read_own_writes"},
        # s2: one read; the same start as another would be ordered by end, then span id
        {"session_id": "s2", "span_id": "y", "start_ns": 5, "end_ns": 9,
         "statement_kind": "read", "route_role": "replica"},
        {"session_id": "s2", "span_id": "x", "start_ns": 5, "end_ns": 9,
         "statement_kind": "read", "route_role": "replica", "level": "eventual"},
    ]  # fmt: skip
    statements = frame(spark, schema.STATEMENT, rows)
    ordered = transforms.sequence_sessions(statements).select("span_id", "session_seq")
    expected_order = [("a", 1), ("b", 2), ("c", 3), ("x", 1), ("y", 2)]
    assertDataFrameEqual(ordered, [Row(span_id=s, session_seq=n) for s, n in expected_order])
    sessions = transforms.sessionize(statements)
    expected = frame(
        spark,
        transforms.SESSION,
        [
            {"session_id": "s1", "service_name": "app", "level": "read_own_writes",
             "first_ns": 10, "last_ns": 31, "statements": 3, "reads": 2, "replica_reads": 1,
             "writes": 1, "pin_reason": "temporary_table"},
            {"session_id": "s2", "service_name": None, "level": "eventual", "first_ns": 5,
             "last_ns": 9, "statements": 2, "reads": 2, "replica_reads": 2, "writes": 0},
        ],
    )  # fmt: skip
    assertDataFrameEqual(sessions, expected)


def test_sessionize_takes_each_first_in_session_order(spark: SparkSession) -> None:
    """The first statement, the first with a level and the first pinned one are each found
    in session order (start, end, span id, nulls first), in the null session too."""
    read = {"statement_kind": "read", "route_role": "primary"}
    rows = [
        # s3: two statements without a start come first, C (ends at 40) before A (at 50).
        {"session_id": "s3", "span_id": "m", "start_ns": None, "end_ns": 50,
         "service_name": "svc-a", "route_reason": "pinned", "route_pinned_reason": "p-a", **read},
        {"session_id": "s3", "span_id": "a", "start_ns": 1, "end_ns": 2,
         "service_name": "svc-b", "level": "eventual", **read},
        {"session_id": "s3", "span_id": "z", "start_ns": None, "end_ns": 40,
         "service_name": "svc-c", "level": "read_latest", **read},
        # The null session: all start at 10; by end then span id: a, c, then b.
        {"span_id": "b", "start_ns": 10, "end_ns": 20, "service_name": "x", "level": "eventual",
         **read},
        {"span_id": "c", "start_ns": 10, "end_ns": 15, "service_name": "y",
         "route_reason": "pinned", "route_pinned_reason": "r2", **read},
        {"span_id": "a", "start_ns": 10, "end_ns": 15, "service_name": "z",
         "route_reason": "pinned", "route_pinned_reason": "r1", **read},
    ]  # fmt: skip
    sessions = transforms.sessionize(frame(spark, schema.STATEMENT, rows))
    expected = frame(
        spark,
        transforms.SESSION,
        [
            {"session_id": "s3", "service_name": "svc-c", "level": "read_latest",
             "first_ns": 1, "last_ns": 50, "statements": 3, "reads": 3, "replica_reads": 0,
             "writes": 0, "pin_reason": "p-a"},
            {"session_id": None, "service_name": "z", "level": "eventual", "first_ns": 10,
             "last_ns": 20, "statements": 3, "reads": 3, "replica_reads": 0, "writes": 0,
             "pin_reason": "r1"},
        ],
    )  # fmt: skip
    assertDataFrameEqual(sessions, expected)
