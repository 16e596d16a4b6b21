"""Routing metrics through the OpenTelemetry metrics API.

Counters: reads by target, waits by outcome, fallbacks, pinned sessions by reason.
Histograms: wait duration, statement latency per route.  A gauge: each replica's lag at its
last sample.  Names, units and attributes are the contract's (:data:`consistent.trace.METRICS`).

The instruments are fed on the telemetry exporter thread from the same facts the statement
spans carry, never on the statement's own thread: recording a histogram point costs
microseconds, which the statement must not pay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from consistent import __version__
from consistent.telemetry.buckets import FINE_DURATION_BOUNDS
from consistent.trace import (
    LAG_APPLY_LAG_US,
    LAG_CHANNEL,
    LAG_REPLICA,
    LAG_SECONDS_BEHIND_MASTER,
    METRIC_FALLBACKS,
    METRIC_LOST_GTID_STATEMENTS,
    METRIC_PINNED_SESSIONS,
    METRIC_READS,
    METRIC_REPLICA_LAG,
    METRIC_STATEMENT_DURATION,
    METRIC_WAIT_DURATION,
    METRIC_WAITS,
    METRICS,
    RECORD_KIND,
    ROUTE_DETAIL,
    ROUTE_PINNED_REASON,
    ROUTE_REASON,
    ROUTE_ROLE,
    ROUTE_TARGET,
    SCOPE_NAME,
    WAIT_OUTCOME,
    MetricSpec,
    RecordKind,
)

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider

    from consistent.telemetry.records import SpanRecord

__all__ = ["DURATION_BUCKETS", "FALLBACK_REASONS", "RoutingMetrics", "StatementFacts"]

#: Histogram bucket bounds in seconds: 100 µs to 10 s (the SDK's defaults suit milliseconds).
DURATION_BUCKETS: Final = FINE_DURATION_BOUNDS
#: Route reasons that count as a fallback: the read wanted a replica and ran on the primary.
FALLBACK_REASONS: Final = frozenset({"timeout_fallback", "no_healthy_replica"})
_US_PER_S: Final = 1_000_000


class StatementFacts(NamedTuple):
    """What one finished statement contributes to the metrics."""

    target: str
    role: str
    reason: str
    detail: str | None
    is_read: bool
    wait_count: int
    wait_outcome: str
    wait_seconds: float
    duration_seconds: float
    #: Set when the statement was routed because the session is pinned, and this session had
    #: not been seen pinned for this reason before.
    new_pin: str | None
    #: The session required GTIDs a failover lost.
    lost: bool = False


def _spec(name: str) -> MetricSpec:
    for spec in METRICS:
        if spec.name == name:
            return spec
    raise KeyError(name)


class RoutingMetrics:
    """The instruments, created once per meter provider."""

    def __init__(self, meter_provider: MeterProvider) -> None:
        meter = meter_provider.get_meter(SCOPE_NAME, __version__)

        def describe(name: str) -> dict[str, str]:
            spec = _spec(name)
            return {"name": spec.name, "unit": spec.unit, "description": spec.description}

        self._reads = meter.create_counter(**describe(METRIC_READS))
        self._waits = meter.create_counter(**describe(METRIC_WAITS))
        self._fallbacks = meter.create_counter(**describe(METRIC_FALLBACKS))
        self._pinned = meter.create_counter(**describe(METRIC_PINNED_SESSIONS))
        self._lost = meter.create_counter(**describe(METRIC_LOST_GTID_STATEMENTS))
        self._wait_duration = meter.create_histogram(
            **describe(METRIC_WAIT_DURATION), explicit_bucket_boundaries_advisory=DURATION_BUCKETS
        )
        self._statement_duration = meter.create_histogram(
            **describe(METRIC_STATEMENT_DURATION),
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self._lag = meter.create_gauge(**describe(METRIC_REPLICA_LAG))

    def record_statement(self, facts: StatementFacts) -> None:
        """One routed statement."""
        route = {ROUTE_ROLE: facts.role, ROUTE_TARGET: facts.target, ROUTE_REASON: facts.reason}
        self._statement_duration.record(facts.duration_seconds, route)
        if facts.is_read:
            self._reads.add(1, {ROUTE_TARGET: facts.target, ROUTE_ROLE: facts.role})
        if facts.wait_count:
            outcome = {WAIT_OUTCOME: facts.wait_outcome}
            self._waits.add(facts.wait_count, outcome)
            self._wait_duration.record(facts.wait_seconds, outcome)
        if facts.reason in FALLBACK_REASONS:
            self._fallbacks.add(1, {ROUTE_REASON: facts.reason, ROUTE_DETAIL: facts.detail or ""})
        if facts.new_pin is not None:
            self._pinned.add(1, {ROUTE_PINNED_REASON: facts.new_pin})
        if facts.lost:
            self._lost.add(1, {ROUTE_ROLE: facts.role})

    def record_span(self, record: SpanRecord) -> None:
        """A record emitted as such: a lag sample sets its replica's lag gauge."""
        attributes = record.attributes
        if attributes.get(RECORD_KIND) != RecordKind.LAG_SAMPLE:
            return
        lag_us = attributes.get(LAG_APPLY_LAG_US)
        if isinstance(lag_us, int):
            seconds = lag_us / _US_PER_S
        else:
            behind = attributes.get(LAG_SECONDS_BEHIND_MASTER)
            if not isinstance(behind, int):
                return
            seconds = float(behind)
        where = {
            LAG_REPLICA: str(attributes.get(LAG_REPLICA, "")),
            LAG_CHANNEL: str(attributes.get(LAG_CHANNEL, "")),
        }
        self._lag.set(seconds, where)
