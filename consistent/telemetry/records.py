"""A finished span as the exporters see it, and the resource it belongs to.

:class:`SpanRecord` is the one shape every exporter consumes: the OTLP-JSON file writer, the
OpenTelemetry SDK exporters (OTLP to a collector, console, in-memory), and tests.  Statement
spans become records on the exporter thread (the statement's thread only queues its raw
facts); lag samples are built as records directly.
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Final

from consistent import __version__
from consistent.telemetry import otlpjson
from consistent.trace import SCOPE_NAME, AttributeValue, SpanKind

if TYPE_CHECKING:
    from consistent.telemetry.metrics import RoutingMetrics

__all__ = ["Resource", "SpanRecord", "StatusCode", "new_span_id", "new_trace_id"]

_TRACE_ID_BITS: Final = 128
_SPAN_ID_BITS: Final = 64


class StatusCode(IntEnum):
    """OTLP ``Status.StatusCode`` (written as an integer in OTLP JSON).

    https://github.com/open-telemetry/opentelemetry-proto/blob/main/opentelemetry/proto/trace/v1/trace.proto
    """

    UNSET = 0
    OK = 1
    ERROR = 2


def new_trace_id() -> int:
    """A random, non-zero 128-bit trace id (W3C Trace Context)."""
    return random.getrandbits(_TRACE_ID_BITS) or 1


def new_span_id() -> int:
    """A random, non-zero 64-bit span id."""
    return random.getrandbits(_SPAN_ID_BITS) or 1


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One finished span."""

    name: str
    kind: SpanKind
    trace_id: int
    span_id: int
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttributeValue]
    #: 0 when the span has no parent.
    parent_span_id: int = 0
    status: StatusCode = StatusCode.UNSET
    status_message: str = ""

    def export(self) -> SpanRecord | None:
        """Itself: a record is already in exported form (the queue's common interface)."""
        return self

    def span_json(self) -> str | None:
        """The OTLP JSON ``Span`` object."""
        return otlpjson.span(
            name=self.name,
            kind=int(self.kind),
            trace_id=self.trace_id,
            span_id=self.span_id,
            parent_span_id=self.parent_span_id,
            start_ns=self.start_ns,
            end_ns=self.end_ns,
            attributes_text=otlpjson.attributes(self.attributes.items()),
            status_code=int(self.status),
            status_message=self.status_message,
        )

    def observe(self, metrics: RoutingMetrics) -> None:
        """Feed the metrics this record stands for."""
        metrics.record_span(self)


@dataclass(frozen=True, slots=True)
class Resource:
    """Who emitted the records: OTLP ``Resource`` attributes and the instrumentation scope."""

    attributes: tuple[tuple[str, AttributeValue], ...]
    scope_name: str = SCOPE_NAME
    scope_version: str = __version__

    def request_json(self, spans: Sequence[str]) -> str:
        """One OTLP JSON ``ExportTraceServiceRequest`` line holding ``spans`` (no newline)."""
        return otlpjson.request(
            otlpjson.attributes(self.attributes), self.scope_name, self.scope_version, spans
        )

    @classmethod
    def for_process(cls, service_name: str, extra: tuple[tuple[str, str], ...] = ()) -> Resource:
        """This process: ``service.name``, the SDK identity, host and pid, then ``extra``."""
        base: list[tuple[str, AttributeValue]] = [
            ("service.name", service_name),
            ("telemetry.sdk.name", SCOPE_NAME),
            ("telemetry.sdk.language", "python"),
            ("telemetry.sdk.version", __version__),
            ("host.name", socket.gethostname()),
            ("process.pid", os.getpid()),
        ]
        names = {name for name, _ in extra}
        return cls(tuple((k, v) for k, v in base if k not in names) + extra)
