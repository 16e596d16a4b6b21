"""One event reported once reaches every subscriber: the statement's span and the proxy's
metrics, through the fan-out a traced proxy session reports to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from consistent.classify import classify
from consistent.gtid import GtidSet
from consistent.observe import NOOP_OBSERVER, Fanout, Observer
from consistent.policy import (
    PRIMARY,
    Action,
    Level,
    PolicyConfig,
    ReplicaKnowledge,
    SessionPolicy,
    WaitOutcome,
)
from consistent.telemetry import NOOP_SPAN, MemoryExporter, Telemetry, TelemetryConfig
from consistent.trace import GTID_PRODUCED, POOL_PIN_REASON, WAIT_COUNT, WAIT_OUTCOME
from proxy.metrics import ProxyMetrics

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
R1 = "10.0.0.2:3306"


@pytest.fixture
def telemetry() -> Iterator[tuple[Telemetry, MemoryExporter]]:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(), exporters=[memory])
    yield telemetry, memory
    telemetry.shutdown(5)


def test_one_wait_reaches_the_span_and_the_metrics(
    telemetry: tuple[Telemetry, MemoryExporter],
) -> None:
    pipeline, memory = telemetry
    metrics = ProxyMetrics(process=False)
    events = Fanout(NOOP_SPAN, metrics)
    policy = SessionPolicy(
        replicas=(R1,),
        knowledge=ReplicaKnowledge(),
        flavor="mysql",
        config=PolicyConfig(level=Level.READ_OWN_WRITES),
    )
    policy.observe_gtids(PRIMARY, GtidSet.parse(f"{UUID}:1-5"))
    tracer = pipeline.session(system="mysql", addresses={PRIMARY: ("db.example", 3306)})
    span = tracer.statement("SELECT 1 FROM t")
    with span:
        events.first = span
        d = policy.route(classify("SELECT 1 FROM t"), "SELECT 1 FROM t")
        assert d.action is Action.WAIT
        events.decision(d)
        events.wait(d, WaitOutcome.REACHED, 0.25, pipelined=True)
        events.decision(policy.on_wait(d, WaitOutcome.REACHED, duration=0.25))
        events.produced(f"{UUID}:6")
        events.pin("prepared")
    events.first = NOOP_SPAN
    events.wait(d, WaitOutcome.TIMED_OUT, 0.5)  # between statements: the metrics alone

    assert metrics.waits == {"reached": 1, "timed_out": 1}
    assert metrics.pipelined_waits == 1
    assert sum(metrics.wait_duration.counts) == 2
    assert pipeline.flush(10)
    [record] = memory.records
    assert record.attributes[WAIT_OUTCOME] == "satisfied"
    assert record.attributes[WAIT_COUNT] == 1
    assert record.attributes[GTID_PRODUCED] == f"{UUID}:6"
    assert record.attributes[POOL_PIN_REASON] == "prepared"


def test_the_base_observer_ignores_every_event() -> None:
    assert type(NOOP_OBSERVER) is Observer
    both = Fanout(NOOP_OBSERVER, NOOP_OBSERVER)
    both.lost(f"{UUID}:9")
    both.fail(RuntimeError("ignored"))
    assert both.first is both.second is NOOP_OBSERVER
