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

__all__ = [
    "IDS_WIDTH",
    "TRACE_HEX",
    "Resource",
    "SpanRecord",
    "StatusCode",
    "id_block",
    "ids_at",
    "new_span_id",
    "new_trace_id",
]

_TRACE_ID_BITS: Final = 128
_SPAN_ID_BITS: Final = 64
#: Hex digits of one span's ids in an :func:`id_block`: its trace id, then its span id.
IDS_WIDTH: Final = (_TRACE_ID_BITS + _SPAN_ID_BITS) // 4
#: Hex digits of a trace id.
TRACE_HEX: Final = _TRACE_ID_BITS // 4
_ZERO_TRACE: Final = "0" * TRACE_HEX
_ZERO_SPAN: Final = "0" * (IDS_WIDTH - TRACE_HEX)
_ONE_TRACE: Final = _ZERO_TRACE[:-1] + "1"
_ONE_SPAN: Final = _ZERO_SPAN[:-1] + "1"


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


def id_block(count: int) -> str:
    """Random trace and span ids for ``count`` spans as one hex string, :data:`IDS_WIDTH`
    digits per span (its trace id, then its span id), none of them all zeros (W3C Trace
    Context forbids that): one draw per batch instead of two per span."""
    width = IDS_WIDTH // 2 * count
    block = random.getrandbits(8 * width).to_bytes(width, "big").hex() if count else ""
    if _ZERO_SPAN in block:  # one chance in 2**64 per id: repair the ids that are all zeros
        block = "".join(_nonzero(block, at) for at in range(0, len(block), IDS_WIDTH))
    return block


def _nonzero(block: str, at: int) -> str:
    trace_id, span_id = ids_at(block, at)
    return (_ONE_TRACE if trace_id == _ZERO_TRACE else trace_id) + (
        _ONE_SPAN if span_id == _ZERO_SPAN else span_id
    )


def ids_at(block: str, at: int) -> tuple[str, str]:
    """The trace and span id (lower-case hex) at offset ``at`` of an :func:`id_block`."""
    middle = at + TRACE_HEX
    return block[at:middle], block[middle : at + IDS_WIDTH]


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

    def export(self, ids: str = "", at: int = 0) -> SpanRecord | None:
        """Itself: a record is already in exported form and has its own ids (the queue's
        common interface, see :class:`~consistent.telemetry.exporter.Finished`)."""
        return self

    def json_pieces(self, ids: str = "", at: int = 0) -> tuple[str, ...]:
        """:meth:`span_json` and the comma that separates it from the next span."""
        return self.span_json(), ","

    def span_json(self, ids: str = "", at: int = 0) -> str:
        """The OTLP JSON ``Span`` object (a record has its own ids: ``ids`` is ignored)."""
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

    def request_parts(self) -> tuple[str, str]:
        """What goes before and after the comma-separated spans of a request line."""
        return otlpjson.request_parts(
            otlpjson.attributes(self.attributes), self.scope_name, self.scope_version
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
