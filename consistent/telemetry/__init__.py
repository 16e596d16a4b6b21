"""Telemetry: statement spans, routing metrics, OTLP-JSON files, the lag sampler.

The contract (names, types, record kinds) is :mod:`consistent.trace`; this package records it.

* :class:`Telemetry` — the process's pipeline (exporters, metrics, queue, threads);
  :func:`default_telemetry` builds it from ``OTEL_*`` / ``CONSISTENT_TRACE_*``.
* :class:`StatementTracer` — one per session, from :meth:`Telemetry.session`;
  ``tracer.statement(sql)`` is the span of one statement (a no-op when tracing is off), the
  :class:`~consistent.observe.Observer` the front ends report the statement's events to.
* :class:`LagSampler` — polls replicas and emits lag records into the same stream.
"""

from __future__ import annotations

from consistent.telemetry.config import TelemetryConfig
from consistent.telemetry.exporter import (
    JsonLinesFileExporter,
    MemoryExporter,
    SdkSpanExporter,
    SpanSink,
)
from consistent.telemetry.masking import mask_query
from consistent.telemetry.pipeline import Telemetry, default_telemetry
from consistent.telemetry.records import Resource, SpanRecord, StatusCode
from consistent.telemetry.sampler import Endpoint, LagSampler
from consistent.telemetry.spans import (
    NOOP_SPAN,
    NOOP_TRACER,
    StatementSpan,
    StatementTracer,
)

__all__ = [
    "NOOP_SPAN",
    "NOOP_TRACER",
    "Endpoint",
    "JsonLinesFileExporter",
    "LagSampler",
    "MemoryExporter",
    "Resource",
    "SdkSpanExporter",
    "SpanRecord",
    "SpanSink",
    "StatementSpan",
    "StatementTracer",
    "StatusCode",
    "Telemetry",
    "TelemetryConfig",
    "default_telemetry",
    "mask_query",
]
