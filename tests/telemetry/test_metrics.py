"""Routing metrics through the OpenTelemetry SDK: counters and histograms from the statements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from consistent import trace
from consistent.gtid import GtidSet
from consistent.policy import PRIMARY, WaitOutcome
from consistent.telemetry import SpanRecord, Telemetry, TelemetryConfig

from .conftest import R1, R2, UUID, HarnessFactory

G = GtidSet.parse(f"{UUID}:1")


def collect(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """metric name -> its data points."""
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def by_attributes(points: list[Any], **wanted: str) -> list[Any]:
    def matches(attributes: Mapping[str, Any]) -> bool:
        return all(attributes.get(trace_name(k)) == v for k, v in wanted.items())

    return [p for p in points if matches(p.attributes)]


def trace_name(key: str) -> str:
    return {
        "target": trace.ROUTE_TARGET,
        "role": trace.ROUTE_ROLE,
        "reason": trace.ROUTE_REASON,
        "outcome": trace.WAIT_OUTCOME,
        "pin": trace.ROUTE_PINNED_REASON,
    }[key]


def test_counters_and_histograms(harness: HarnessFactory) -> None:
    reader = InMemoryMetricReader()
    h = harness(meter_provider=MeterProvider(metric_readers=[reader]))
    h.run("SELECT 1")  # a read on a replica
    h.run("UPDATE t SET v = 1", produced=G)
    h.run("SELECT 2", waits=WaitOutcome.REACHED, wait_seconds=0.03)
    h.run("UPDATE t SET v = 2", produced=GtidSet.parse(f"{UUID}:2"))
    h.run("SELECT 3", waits=WaitOutcome.TIMED_OUT, wait_seconds=0.5)  # fallback
    h.run("CREATE TEMPORARY TABLE x (a INT)")
    h.run("SELECT 4")  # pinned
    h.run("SELECT 5")  # pinned again: the same session counts once
    h.records()
    points = collect(reader)

    reads = points[trace.METRIC_READS]
    assert sum(p.value for p in reads) == 5
    assert sum(p.value for p in by_attributes(reads, target=PRIMARY)) == 3
    replica_reads = [p for p in reads if p.attributes[trace.ROUTE_TARGET] in (R1, R2)]
    assert sum(p.value for p in replica_reads) == 2
    assert all(p.attributes[trace.ROUTE_ROLE] == "replica" for p in replica_reads)

    waits = points[trace.METRIC_WAITS]
    assert {p.attributes[trace.WAIT_OUTCOME]: p.value for p in waits} == {
        "satisfied": 1,
        "timeout": 1,
    }
    (fallback,) = points[trace.METRIC_FALLBACKS]
    assert (fallback.attributes[trace.ROUTE_REASON], fallback.value) == ("timeout_fallback", 1)
    (pinned,) = points[trace.METRIC_PINNED_SESSIONS]
    assert (pinned.attributes[trace.ROUTE_PINNED_REASON], pinned.value) == ("temporary_table", 1)

    wait_hist = {p.attributes[trace.WAIT_OUTCOME]: p for p in points[trace.METRIC_WAIT_DURATION]}
    assert wait_hist["satisfied"].count == 1
    assert wait_hist["satisfied"].sum == 0.03
    assert wait_hist["timeout"].sum == 0.5
    durations = points[trace.METRIC_STATEMENT_DURATION]
    assert sum(p.count for p in durations) == 8
    pinned_route = by_attributes(durations, reason="pinned")
    assert sum(p.count for p in pinned_route) == 2


def test_metrics_without_traces_still_count(harness: HarnessFactory) -> None:
    reader = InMemoryMetricReader()
    telemetry = Telemetry(
        TelemetryConfig(), exporters=[], meter_provider=MeterProvider(metric_readers=[reader])
    )
    assert telemetry.active
    assert not telemetry.traces_on
    tracer = telemetry.session(system="mysql")
    for _ in range(3):
        with tracer.statement("SELECT 1") as span:
            span.route(PRIMARY, "no_replicas")
    assert telemetry.flush(10)
    durations = collect(reader)[trace.METRIC_STATEMENT_DURATION]
    assert sum(p.count for p in durations) == 3
    telemetry.shutdown()


def test_lag_records_set_the_lag_gauge() -> None:
    reader = InMemoryMetricReader()
    telemetry = Telemetry(
        TelemetryConfig(), exporters=[], meter_provider=MeterProvider(metric_readers=[reader])
    )
    for replica, attributes in (
        ("a:1", {trace.LAG_APPLY_LAG_US: 1_500_000}),
        ("b:2", {trace.LAG_SECONDS_BEHIND_MASTER: 3}),
        ("c:3", {}),
    ):
        telemetry.emit(
            SpanRecord(
                name=trace.LAG_SAMPLE_SPAN,
                kind=trace.SpanKind.INTERNAL,
                trace_id=1,
                span_id=1,
                start_ns=1,
                end_ns=2,
                attributes={
                    trace.RECORD_KIND: "lag_sample",
                    trace.LAG_REPLICA: replica,
                    trace.LAG_CHANNEL: "",
                    **attributes,
                },
            )
        )
    assert telemetry.flush(10)
    lag = {
        p.attributes[trace.LAG_REPLICA]: p.value for p in collect(reader)[trace.METRIC_REPLICA_LAG]
    }
    assert lag == {"a:1": 1.5, "b:2": 3.0}
    telemetry.shutdown()
