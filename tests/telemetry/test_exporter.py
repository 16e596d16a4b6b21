"""The OTLP-JSON lines file: read back with a plain JSON reader and checked against the contract
in ``consistent.trace``; rotation; a slow exporter never blocks statements; SDK exporters."""

from __future__ import annotations

import base64
import json
import math
import statistics
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind as OtelKind

from consistent import trace
from consistent.gtid import GtidSet
from consistent.policy import PRIMARY
from consistent.telemetry import (
    JsonLinesFileExporter,
    MemoryExporter,
    Resource,
    SdkSpanExporter,
    SpanRecord,
    StatusCode,
    Telemetry,
    TelemetryConfig,
)
from consistent.telemetry.exporter import encode_request, rotated_files

from .conftest import UUID, HarnessFactory

_VALUE_KEYS = {t.value: t for t in trace.AttrType}


def decode_value(value: dict[str, Any]) -> object:
    """An OTLP JSON ``AnyValue`` to Python, by the rules of the OTLP JSON encoding."""
    assert len(value) == 1, value
    ((key, raw),) = value.items()
    kind = _VALUE_KEYS[key]
    if kind is trace.AttrType.INT:
        assert isinstance(raw, str)
        assert raw.lstrip("-").isdigit()
        return int(raw)
    if kind is trace.AttrType.DOUBLE:
        assert isinstance(raw, float | int | str)
        return float(raw)
    if kind is trace.AttrType.BOOL:
        assert isinstance(raw, bool)
        return raw
    assert isinstance(raw, str)
    return raw


def decode_attributes(items: list[dict[str, Any]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items:
        assert set(item) == {"key", "value"}
        assert item["key"] not in out
        out[item["key"]] = decode_value(item["value"])
    return out


def read_spans(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Every span of every line, checked for the file format on the way."""
    spans: list[dict[str, Any]] = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            request = json.loads(line)
            assert set(request) == {"resourceSpans"}
            for resource_spans in request["resourceSpans"]:
                resource = decode_attributes(resource_spans["resource"]["attributes"])
                assert resource["service.name"] == "svc-test"
                for scope_spans in resource_spans["scopeSpans"]:
                    assert scope_spans["scope"]["name"] == trace.SCOPE_NAME
                    spans.extend(scope_spans["spans"])
    return spans


def check_span(span: dict[str, Any]) -> dict[str, object]:
    assert len(span["traceId"]) == 32
    int(span["traceId"], 16)
    assert len(span["spanId"]) == 16
    int(span["spanId"], 16)
    assert span["traceId"] == span["traceId"].lower()
    start, end = span["startTimeUnixNano"], span["endTimeUnixNano"]
    assert isinstance(start, str)
    assert isinstance(end, str)
    assert 0 < int(start) <= int(end)
    attributes = decode_attributes(span["attributes"])
    kind = attributes[trace.RECORD_KIND]
    assert isinstance(kind, str)
    spec = trace.span_spec(kind)
    assert spec is not None
    assert span["kind"] == int(spec.span_kind)
    assert trace.check_attributes(span["name"], attributes) == ()
    return attributes


@pytest.fixture
def file_config(tmp_path: Path) -> TelemetryConfig:
    return TelemetryConfig(
        service_name="svc-test",
        traces_exporters=("file",),
        trace_file=tmp_path / "traces.jsonl",
        capture_query_text=True,
    )


def test_the_trace_file_is_otlp_json_lines_that_match_the_contract(
    harness: HarnessFactory, file_config: TelemetryConfig, tmp_path: Path
) -> None:
    telemetry = Telemetry(file_config)
    try:
        tracer = telemetry.session(system="mysql", addresses={PRIMARY: ("127.0.0.1", 3306)})
        with tracer.statement("UPDATE t SET s = 'x\u00e9\"' WHERE k = 1") as span:
            span.produced(GtidSet.parse(f"{UUID}:7"))
        with tracer.statement("SELECT 1") as span:
            span.route("127.0.0.1:3307", "nothing_required")
        assert telemetry.flush(10)
    finally:
        telemetry.shutdown()
    spans = read_spans([tmp_path / "traces.jsonl"])
    assert [s["name"] for s in spans] == ["UPDATE t", "SELECT"]
    write, read = (check_span(s) for s in spans)
    assert write[trace.GTID_PRODUCED] == f"{UUID}:7"
    assert write[trace.DB_QUERY_TEXT] == "UPDATE t SET s = ? WHERE k = ?"
    assert write[trace.SERVER_PORT] == 3306
    assert read[trace.SERVER_PORT] == 3307
    assert read[trace.ROUTE_ROLE] == "replica"
    assert spans[0]["status"] == {}


def test_every_route_reason_survives_the_file(harness: HarnessFactory, tmp_path: Path) -> None:
    h = harness()
    for sql, kwargs in [
        ("UPDATE t SET v = 1", {"produced": GtidSet.parse(f"{UUID}:1-2")}),
        ("SELECT 1", {}),
        ("BEGIN", {}),
        ("COMMIT", {}),
        ("CREATE TEMPORARY TABLE x (a INT)", {}),
        ("SELECT 2", {}),
    ]:
        h.run(sql, **kwargs)  # type: ignore[arg-type]
    records = h.records()
    exporter = JsonLinesFileExporter(
        tmp_path / "t.jsonl", Resource.for_process("svc-test"), rotate_bytes=1 << 20
    )
    exporter.export(records)
    exporter.close()
    decoded = [check_span(s) for s in read_spans([tmp_path / "t.jsonl"])]
    assert decoded == [dict(r.attributes) for r in records]
    assert {d[trace.ROUTE_REASON] for d in decoded} >= {"write", "in_transaction", "pinned"}


def test_the_file_is_valid_for_the_official_otlp_protobuf_schema(
    file_config: TelemetryConfig, tmp_path: Path
) -> None:
    json_format = pytest.importorskip("google.protobuf.json_format")
    service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    record = SpanRecord(
        name=trace.STATEMENT_SPAN,
        kind=trace.SpanKind.CLIENT,
        trace_id=0x0123456789ABCDEF0123456789ABCDEF,
        span_id=0x1122334455667788,
        parent_span_id=0x99AABBCCDDEEFF00,
        start_ns=1_700_000_000_000_000_001,
        end_ns=1_700_000_000_000_500_000,
        attributes={"a.int": -5, "a.double": 1.5, "a.bool": True, "a.str": "x"},
        status=StatusCode.ERROR,
        status_message="boom",
    )
    line = encode_request(Resource.for_process("svc-test"), [record])
    document = json.loads(line)
    # OTLP JSON writes ids as hex; protobuf's own JSON mapping expects base64 for bytes.
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key in ("traceId", "spanId", "parentSpanId"):
        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    message = json_format.ParseDict(document, service.ExportTraceServiceRequest())
    parsed = message.resource_spans[0].scope_spans[0].spans[0]
    assert parsed.trace_id == record.trace_id.to_bytes(16, "big")
    assert parsed.parent_span_id == record.parent_span_id.to_bytes(8, "big")
    assert parsed.start_time_unix_nano == record.start_ns
    assert parsed.kind == parsed.SPAN_KIND_CLIENT
    assert parsed.status.code == parsed.status.STATUS_CODE_ERROR
    values = {kv.key: kv.value for kv in parsed.attributes}
    assert values["a.int"].int_value == -5
    assert values["a.double"].double_value == 1.5
    assert values["a.bool"].bool_value is True
    assert values["a.str"].string_value == "x"


def test_unusual_values_still_give_valid_json() -> None:
    record = SpanRecord(
        name='n\n"q"',
        kind=trace.SpanKind.INTERNAL,
        trace_id=1,
        span_id=2,
        start_ns=3,
        end_ns=4,
        attributes={"nan": math.nan, "inf": -math.inf, "s": "a\x00b\u2028\udcff", "big": 2**62},
    )
    document = json.loads(
        encode_request(Resource((("k", "v"),)), [record]).encode("utf-8", "backslashreplace")
    )
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["name"] == 'n\n"q"'
    values = {a["key"]: a["value"] for a in span["attributes"]}
    assert values["nan"] == {"doubleValue": "NaN"}
    assert values["inf"] == {"doubleValue": "-Infinity"}
    assert values["s"]["stringValue"].startswith("a\x00b\u2028")
    assert values["big"] == {"intValue": str(2**62)}
    assert span["traceId"] == "0" * 31 + "1"


def _record(i: int, size: int = 200) -> SpanRecord:
    return SpanRecord(
        name=trace.STATEMENT_SPAN,
        kind=trace.SpanKind.CLIENT,
        trace_id=i + 1,
        span_id=i + 1,
        start_ns=10,
        end_ns=20,
        attributes={"pad": "x" * size, "i": i},
    )


def test_rotation_by_size_keeps_whole_lines_and_every_record(tmp_path: Path) -> None:
    path = tmp_path / "rot.jsonl"
    exporter = JsonLinesFileExporter(path, Resource.for_process("svc-test"), rotate_bytes=2000)
    for start in range(0, 60, 3):
        exporter.export([_record(i) for i in range(start, start + 3)])
    exporter.close()
    rotated = rotated_files(path)
    assert len(rotated) >= 5
    assert [p.name for p in rotated] == [f"rot.{n}.jsonl" for n in range(1, len(rotated) + 1)]
    seen = []
    for file in [*rotated, path]:
        content = file.read_bytes()
        assert len(content) <= 2000
        assert content.endswith(b"\n")
        for line in content.decode().splitlines():
            document = json.loads(line)
            for s in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
                seen.append(decode_attributes(s["attributes"])["i"])
    assert seen == list(range(60))
    assert exporter.rotations == len(rotated)


def test_rotation_keeps_the_newest_files_and_continues_numbering(tmp_path: Path) -> None:
    path = tmp_path / "keep.jsonl"
    resource = Resource.for_process("svc-test")
    first = JsonLinesFileExporter(path, resource, rotate_bytes=1500, keep=2)
    for i in range(12):
        first.export([_record(i)])
    first.close()
    rotated = rotated_files(path)
    assert len(rotated) == 2
    last_index = int(rotated[-1].name.split(".")[1])
    again = JsonLinesFileExporter(path, resource, rotate_bytes=1500, keep=2)
    for i in range(12, 20):
        again.export([_record(i)])
    again.close()
    indexes = [int(p.name.split(".")[1]) for p in rotated_files(path)]
    assert min(indexes) > last_index
    assert len(indexes) == 2


def test_a_line_larger_than_the_limit_gets_a_file_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    exporter = JsonLinesFileExporter(path, Resource.for_process("svc-test"), rotate_bytes=500)
    exporter.export([_record(0, size=10)])
    exporter.export([_record(1, size=2000)])
    exporter.export([_record(2, size=10)])
    exporter.close()
    files = [*rotated_files(path), path]
    lines = [f.read_text().count("\n") for f in files]
    assert lines == [1, 1, 1]


class SlowExporter(MemoryExporter):
    """A disk that takes ``delay`` seconds per write."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.calls = 0

    def export(self, records: Sequence[SpanRecord]) -> None:
        self.calls += 1
        time.sleep(self.delay)
        super().export(records)


def test_a_slow_exporter_never_blocks_statements_and_drops_are_counted() -> None:
    slow = SlowExporter(delay=0.2)
    config = TelemetryConfig(
        max_queue_size=64, max_export_batch_size=16, writer_queue_batches=1, schedule_delay=0.01
    )
    telemetry = Telemetry(config, exporters=[slow])
    tracer = telemetry.session(system="mysql")
    durations = []
    started = time.perf_counter()
    statements = 3000
    for i in range(statements):
        t0 = time.perf_counter()
        with tracer.statement("SELECT 1") as span:
            span.route(PRIMARY, "no_replicas")
        durations.append(time.perf_counter() - t0)
        if i % 100 == 0:
            time.sleep(0.001)  # a statement's round trip: the exporter thread gets the GIL
    elapsed = time.perf_counter() - started
    # 3000 statements behind a 0.2 s-per-batch disk: blocking would take minutes.
    assert elapsed < 2.0
    assert statistics.median(durations) < 0.001
    assert telemetry.flush(10)
    exported = len(slow.records)
    assert telemetry.dropped > 0
    assert exported + telemetry.dropped == statements
    telemetry.shutdown()
    assert slow.closed


def test_a_failing_exporter_counts_its_batch_as_dropped_and_the_other_still_gets_it() -> None:
    class Broken(MemoryExporter):
        def export(self, records: Sequence[SpanRecord]) -> None:
            raise OSError("disk full")

    good = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(), exporters=[Broken(), good])
    tracer = telemetry.session(system="mariadb")
    for _ in range(5):
        with tracer.statement("SELECT 1"):
            pass
    assert telemetry.flush(10)
    assert len(good.records) == 5
    assert telemetry.dropped == 5
    telemetry.shutdown()


def test_records_reach_an_sdk_exporter_as_readable_spans(harness: HarnessFactory) -> None:
    memory = InMemorySpanExporter()
    telemetry = Telemetry(TelemetryConfig(service_name="svc-test"))
    sdk = SdkSpanExporter(memory, telemetry.resource)
    h = harness()
    h.run("UPDATE t SET v = 1", produced=GtidSet.parse(f"{UUID}:5"))
    record = h.last()
    sdk.export([record])
    (span,) = memory.get_finished_spans()
    assert span.name == record.name
    assert span.kind is OtelKind.CLIENT
    assert dict(span.attributes or {}) == dict(record.attributes)
    assert span.context is not None
    assert span.context.trace_id == record.trace_id
    assert span.start_time == record.start_ns
    assert span.resource.attributes["service.name"] == "svc-test"
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == trace.SCOPE_NAME
    telemetry.shutdown()


def test_flush_and_shutdown_from_several_threads(tmp_path: Path) -> None:
    config = TelemetryConfig(
        service_name="svc-test", traces_exporters=("file",), trace_dir=tmp_path / "dir"
    )
    telemetry = Telemetry(config)
    tracer = telemetry.session(system="mysql")

    def work() -> None:
        for _ in range(200):
            with tracer.statement("SELECT 1"):
                pass
        telemetry.flush(10)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    telemetry.shutdown()
    telemetry.shutdown()  # idempotent
    files = list((tmp_path / "dir").glob("consistent-*.jsonl"))
    assert len(files) == 1
    spans = read_spans(files)
    assert len(spans) + telemetry.dropped == 800
    for span in spans:
        check_span(span)


def test_the_file_and_the_records_say_the_same(harness: HarnessFactory, tmp_path: Path) -> None:
    """The file is written from the spans' raw form, other exporters get records: equal."""
    h = harness(config=TelemetryConfig(service_name="svc-test", capture_query_text=True))
    file_exporter = JsonLinesFileExporter(tmp_path / "same.jsonl", Resource.for_process("svc-test"))
    memory = MemoryExporter()
    telemetry = Telemetry(h.telemetry.config, exporters=[file_exporter, memory])
    h.tracer = telemetry.session(system="mysql", addresses={PRIMARY: ("db-primary.example", 3306)})
    h.run("UPDATE t SET v = 'a' WHERE k = 1", produced=GtidSet.parse(f"{UUID}:1-2"))
    h.run("SELECT v FROM t WHERE k = 1", wait_seconds=0.01)
    h.run("SELECT v FROM t WHERE k = 2")
    with h.tracer.statement("DELETE FROM t") as span:
        span.fail(OSError(5, "io"))
    assert telemetry.flush(10)
    telemetry.shutdown()
    spans = read_spans([tmp_path / "same.jsonl"])
    records = memory.records
    assert len(spans) == len(records) == 4
    for span, record in zip(spans, records, strict=True):
        assert check_span(span) == dict(record.attributes)
        assert int(span["traceId"], 16) == record.trace_id
        assert int(span["spanId"], 16) == record.span_id
        assert int(span["startTimeUnixNano"]) == record.start_ns
        assert int(span["endTimeUnixNano"]) == record.end_ns
        assert span["status"].get("code", 0) == int(record.status)
    assert records[-1].status is StatusCode.ERROR
    assert spans[-1]["status"] == {"message": "[Errno 5] io", "code": 2}
