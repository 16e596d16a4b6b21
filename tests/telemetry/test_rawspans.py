"""Statement spans keep raw facts and are formatted on the exporter threads: the produced GTIDs
given as the tracker's text, the ids drawn per batch, the parent taken from the application's
context, the single exporter written by the batch thread itself."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

from consistent import trace
from consistent.errors import MalformedGtidSet
from consistent.gtid import GtidSet, GtidState, MariaPosition
from consistent.telemetry import (
    JsonLinesFileExporter,
    MemoryExporter,
    Resource,
    SpanRecord,
    StatementSpan,
    Telemetry,
    TelemetryConfig,
)
from consistent.telemetry.records import IDS_WIDTH, TRACE_HEX, id_block, ids_at

from .conftest import UUID

PRODUCED_COUNT = trace.GTID_PRODUCED + trace.COUNT_SUFFIX


class Both:
    """A pipeline writing the file and keeping records, for one session of ``system``."""

    def __init__(self, tmp_path: Path, system: str, config: TelemetryConfig | None = None):
        self.path = tmp_path / f"{system}.jsonl"
        self.memory = MemoryExporter()
        file_exporter = JsonLinesFileExporter(self.path, Resource.for_process("svc-test"))
        self.telemetry = Telemetry(
            config or TelemetryConfig(), exporters=[file_exporter, self.memory]
        )
        self.tracer = self.telemetry.session(system=system)

    def run(self, *calls: Callable[[StatementSpan], None]) -> None:
        for call in calls:
            with self.tracer.statement("UPDATE t SET v = 1") as span:
                call(span)

    def results(self) -> tuple[list[dict[str, Any]], list[SpanRecord]]:
        """The file's spans (attributes decoded) and the records, after a flush."""
        assert self.telemetry.flush(10)
        self.telemetry.shutdown()
        spans = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            for resource in json.loads(line)["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    spans.extend(scope["spans"])
        return spans, self.memory.records


def decoded(span: dict[str, Any]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in span["attributes"]:
        ((kind, value),) = item["value"].items()
        out[item["key"]] = int(value) if kind == "intValue" else value
    return out


def produced_of(attributes: Mapping[str, object]) -> tuple[object, object]:
    return attributes.get(trace.GTID_PRODUCED), attributes.get(PRODUCED_COUNT)


def expected(state: GtidState) -> tuple[str, int]:
    text = state.to_text(",") if isinstance(state, GtidSet) else str(state)
    return text, len(state)


@pytest.fixture
def both(tmp_path: Path) -> Iterator[Callable[..., Both]]:
    made: list[Both] = []

    def build(system: str, config: TelemetryConfig | None = None) -> Both:
        made.append(Both(tmp_path, system, config))
        return made[-1]

    yield build
    for pipeline in made:
        pipeline.telemetry.shutdown(5)


# --- produced GTIDs as raw text -------------------------------------------------------------


@pytest.mark.parametrize(
    ("system", "text", "parse"),
    [
        ("mariadb", "0-1-10", MariaPosition.parse),
        ("mariadb", "00-01-010", MariaPosition.parse),  # not canonical: parsed, then printed
        ("mariadb", "0-1-10,1-2-5", MariaPosition.parse),
        ("mariadb", "4294967295-4294967295-18446744073709551615", MariaPosition.parse),
        ("mysql", f"{UUID.upper()}:1-3", GtidSet.parse),
        ("mysql", f"{UUID}:7", GtidSet.parse),
    ],
)
def test_raw_text_is_recorded_as_its_parsed_state(
    both: Callable[..., Both], system: str, text: str, parse: Callable[[str], GtidState]
) -> None:
    pipeline = both(system)
    pipeline.run(lambda span: span.produced(text), lambda span: span.produced(parse(text)))
    spans, records = pipeline.results()
    want = expected(parse(text))
    for attributes in [decoded(s) for s in spans] + [dict(r.attributes) for r in records]:
        assert produced_of(attributes) == want


def test_texts_reported_twice_are_merged_like_states(both: Callable[..., Both]) -> None:
    pipeline = both("mariadb")

    def first(span: StatementSpan) -> None:
        span.produced("0-1-10")
        span.produced("0-1-11,1-2-5")

    def second(span: StatementSpan) -> None:
        span.produced(MariaPosition.parse("0-1-12"))
        span.produced("1-2-6")

    pipeline.run(first, second)
    spans, records = pipeline.results()
    merged = [
        MariaPosition.parse("0-1-10").merge(MariaPosition.parse("0-1-11,1-2-5")),
        MariaPosition.parse("0-1-12").merge(MariaPosition.parse("1-2-6")),
    ]
    assert [produced_of(decoded(s)) for s in spans] == [expected(m) for m in merged]
    assert [produced_of(r.attributes) for r in records] == [expected(m) for m in merged]


@pytest.mark.parametrize("text", ["0-1-x", "4294967296-1-1", "0-1-5,0-2-6"])
def test_text_that_does_not_parse_leaves_only_the_produced_attributes_out(
    both: Callable[..., Both], text: str
) -> None:
    with pytest.raises(MalformedGtidSet):
        MariaPosition.parse(text)
    pipeline = both("mariadb")
    pipeline.run(lambda span: span.produced(text))
    (span,), (record,) = pipeline.results()
    for attributes in (decoded(span), dict(record.attributes)):
        assert produced_of(attributes) == (None, None)
        assert trace.check_attributes(trace.STATEMENT_SPAN, attributes) == ()
        assert attributes[trace.ROUTE_TARGET] == "primary"


def test_a_long_text_becomes_a_digest(both: Callable[..., Both]) -> None:
    text = "0-1-1234567890"
    pipeline = both("mariadb", TelemetryConfig(max_gtid_chars=len(text) - 1))
    pipeline.run(lambda span: span.produced(text))
    (span,), (record,) = pipeline.results()
    for attributes in (decoded(span), dict(record.attributes)):
        assert trace.GTID_PRODUCED not in attributes
        assert str(attributes[trace.GTID_PRODUCED + trace.DIGEST_SUFFIX]).startswith("sha256:")
        assert attributes[PRODUCED_COUNT] == 1


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**33),
    st.integers(0, 2**33),
    st.integers(0, 2**65),
    st.integers(0, 2),
)
def test_any_mariadb_gtid_text_is_recorded_as_the_parser_reads_it(
    domain: int, server: int, seq: int, zeros: int
) -> None:
    text = f"{'0' * zeros}{domain}-{server}-{'0' * zeros}{seq}"
    try:
        want: tuple[object, object] = expected(MariaPosition.parse(text))
    except MalformedGtidSet:
        want = (None, None)
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(), exporters=[memory])
    try:
        with telemetry.session(system="mariadb").statement("UPDATE t SET v = 1") as span:
            span.produced(text)
        assert telemetry.flush(10)
    finally:
        telemetry.shutdown()
    (record,) = memory.records
    assert produced_of(dict(record.attributes)) == want


# --- ids -----------------------------------------------------------------------------------


def test_an_id_block_holds_distinct_non_zero_ids_for_each_span() -> None:
    block = id_block(300)
    assert len(block) == 300 * IDS_WIDTH
    int(block, 16)
    assert block == block.lower()
    ids = [ids_at(block, at) for at in range(0, len(block), IDS_WIDTH)]
    assert len({trace_id for trace_id, _ in ids}) == 300
    assert len({span_id for _, span_id in ids}) == 300
    assert all(len(t) == TRACE_HEX and len(s) == IDS_WIDTH - TRACE_HEX for t, s in ids)
    assert id_block(0) == ""


def test_ids_that_come_out_all_zeros_are_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(random, "getrandbits", lambda bits: 0)
    block = id_block(3)
    assert len(block) == 3 * IDS_WIDTH
    for at in range(0, len(block), IDS_WIDTH):
        trace_id, span_id = ids_at(block, at)
        assert int(trace_id, 16) != 0
        assert int(span_id, 16) != 0


def test_a_statement_in_an_application_span_joins_its_trace_in_the_file(
    both: Callable[..., Both],
) -> None:
    pipeline = both("mysql")
    app = TracerProvider().get_tracer("app")
    with app.start_as_current_span("request") as parent:
        pipeline.run(lambda span: None)
    pipeline.run(lambda span: None)  # outside: a trace of its own
    (inside, outside), _ = pipeline.results()
    context = parent.get_span_context()
    assert inside["traceId"] == f"{context.trace_id:032x}"
    assert inside["parentSpanId"] == f"{context.span_id:016x}"
    assert inside["spanId"] != inside["parentSpanId"]
    assert "parentSpanId" not in outside
    assert outside["traceId"] != inside["traceId"]


# --- the single exporter --------------------------------------------------------------------


def test_a_single_exporter_is_written_by_the_batch_thread_and_its_failures_counted() -> None:
    class Broken(MemoryExporter):
        def export(self, records: Any) -> None:
            raise OSError("disk full")

    # Threads, not names: another pipeline of the process (an application provider's) may
    # already run a thread of the same name.
    before = set(threading.enumerate())
    broken = Broken()
    telemetry = Telemetry(TelemetryConfig(), exporters=[broken])
    started = {t.name for t in set(threading.enumerate()) - before}
    try:
        assert started == {"consistent-telemetry"}
        tracer = telemetry.session(system="mysql")
        for _ in range(7):
            with tracer.statement("SELECT 1"):
                pass
        assert telemetry.flush(10)
        assert telemetry.dropped == 7
    finally:
        telemetry.shutdown()
    assert broken.closed
