"""Exporters: OTLP-JSON lines files (the default), OpenTelemetry SDK exporters, memory.

The file format is the OpenTelemetry Collector file exporter's: one OTLP JSON
``ExportTraceServiceRequest`` per line (``resourceSpans`` → ``scopeSpans`` → ``spans``), with
trace and span ids as lower-case hex, times as decimal strings of Unix nanoseconds, span kind
and status code as integers, and attributes as ``{"key": …, "value": {"stringValue" |
"intValue" (a decimal string) | "doubleValue" | "boolValue": …}}``.  Each exported batch is one
line, so a reader never sees half a batch.

Files rotate by size: when the next line would take the active file beyond ``rotate_bytes``,
it is renamed ``<stem>.<n><suffix>`` (``n`` counting up from 1, never reused) and a new one is
started; ``keep`` bounds how many rotated files remain.  Readers take ``<stem>*<suffix>``.

Exporters run on a writer thread (see :mod:`consistent.telemetry.pipeline`), never on a
statement's thread.

https://opentelemetry.io/docs/specs/otel/protocol/file-exporter/
https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from opentelemetry.sdk.resources import Resource as SdkResource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags
from opentelemetry.trace import SpanKind as OtelKind
from opentelemetry.trace.status import Status
from opentelemetry.trace.status import StatusCode as OtelStatus

from consistent.telemetry.records import IDS_WIDTH, Resource, SpanRecord, id_block

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from consistent.telemetry.metrics import RoutingMetrics

__all__ = [
    "Batch",
    "Finished",
    "JsonLinesFileExporter",
    "MemoryExporter",
    "SdkSpanExporter",
    "SpanSink",
    "encode_request",
    "rotated_files",
]

logger = logging.getLogger(__name__)

#: Spans encoded between two looks at the clock.
YIELD_EVERY: Final = 16
#: Seconds of encoding after which the GIL is offered to the statement threads.  An offer is
#: a system call, which on a busy machine can cost as much as encoding several spans: offered
#: by time rather than by count, it bounds a statement's wait on any machine.
YIELD_INTERVAL: Final = 0.0002


class Finished(Protocol):
    """A finished span as the queue holds it: a statement span still in its raw form, or a
    ready :class:`SpanRecord` (a lag sample).  A raw span has no ids yet: it takes them from
    its batch's :func:`~consistent.telemetry.records.id_block` at offset ``at``, so that every
    exporter gets the same ids."""

    def export(self, ids: str, at: int) -> SpanRecord | None:
        """The span as a record; ``None`` when it is not to be exported (sampled out)."""

    def json_pieces(self, ids: str, at: int) -> tuple[str, ...]:
        """The OTLP JSON ``Span`` object in pieces to concatenate, the last one a lone comma
        (no piece when it is not to be exported): the writer joins a whole batch's pieces at
        once, so that a span's kilobyte of constant attributes is copied once, not per
        step."""

    def observe(self, metrics: RoutingMetrics) -> None:
        """Feed the metrics."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Finished spans handed to the exporters together, with the random ids of the raw ones
    (:data:`~consistent.telemetry.records.IDS_WIDTH` hex digits per span, by position)."""

    spans: Sequence[Finished]
    ids: str

    @classmethod
    def of(cls, spans: Sequence[Finished]) -> Batch:
        """A batch with fresh ids."""
        return cls(spans, id_block(len(spans)))

    def records(self) -> list[SpanRecord]:
        """The spans as records (sampled-out ones left out)."""
        ids = self.ids
        records: list[SpanRecord] = []
        for first, spans in _slices(self.spans):
            for at, span in enumerate(spans):
                record = span.export(ids, first + at * IDS_WIDTH)
                if record is not None:
                    records.append(record)
        return records


def _slices(spans: Sequence[Finished]) -> Iterator[tuple[int, Sequence[Finished]]]:
    """The spans in slices of :data:`YIELD_EVERY`, each with the offset of its first span's
    ids in the batch's id block.  The GIL is offered to the statement threads between slices
    every :data:`YIELD_INTERVAL`, so that a statement whose reply arrives waits for a fraction
    of a millisecond, not for the whole batch."""
    clock = time.perf_counter
    offered = clock()
    for start in range(0, len(spans), YIELD_EVERY):
        if start and clock() - offered >= YIELD_INTERVAL:
            time.sleep(0)  # release the GIL and take it back
            offered = clock()
        yield start * IDS_WIDTH, spans[start : start + YIELD_EVERY]


def _pieces(head: str, batch: Batch, tail: str) -> list[str]:
    """One request of the batch's spans as pieces to join (just ``head`` when none is to be
    exported)."""
    ids = batch.ids
    pieces = [head]
    extend = pieces.extend
    for first, spans in _slices(batch.spans):
        at = first
        for span in spans:
            extend(span.json_pieces(ids, at))
            at += IDS_WIDTH
    if len(pieces) > 1:
        pieces[-1] = tail  # instead of the comma after the last span
    return pieces


class SpanSink(Protocol):
    """Something finished spans are handed to, in batches, on its own writer thread."""

    def export(self, records: Sequence[SpanRecord]) -> None:
        """Deliver one batch (may block: only a writer thread calls it)."""

    def flush(self) -> None:
        """Make everything delivered so far durable or sent."""

    def close(self) -> None:
        """Release files and connections; no call follows."""


# --- OTLP JSON -----------------------------------------------------------------------------------


def encode_request(resource: Resource, records: Sequence[Finished] | Batch) -> str:
    """One ``ExportTraceServiceRequest`` as a single line of JSON (no newline)."""
    batch = records if isinstance(records, Batch) else Batch.of(records)
    head, tail = resource.request_parts()
    pieces = _pieces(head, batch, tail)
    return "".join(pieces) if len(pieces) > 1 else head + tail


# --- files ---------------------------------------------------------------------------------------


def _rotation_pattern(path: Path) -> re.Pattern[str]:
    return re.compile(re.escape(path.stem) + r"\.(\d+)" + re.escape(path.suffix) + r"\Z")


def rotated_files(path: Path) -> list[Path]:
    """The rotated files of active file ``path``, oldest first."""
    pattern = _rotation_pattern(path)
    found: list[tuple[int, Path]] = []
    if path.parent.is_dir():
        for entry in path.parent.iterdir():
            match = pattern.match(entry.name)
            if match is not None:
                found.append((int(match.group(1)), entry))
    return [entry for _, entry in sorted(found)]


class JsonLinesFileExporter:
    """Appends one OTLP JSON request per batch to a file, rotating it by size.  Each line is
    one ``write()`` on an ``O_APPEND`` descriptor, so lines from several writers never
    interleave."""

    def __init__(
        self,
        path: Path,
        resource: Resource,
        *,
        rotate_bytes: int = 64 * 1024 * 1024,
        keep: int = 0,
    ) -> None:
        self.path = path
        self._resource = resource
        self._rotate_bytes = rotate_bytes
        self._keep = keep
        self._fd: int | None = None
        self._size = 0
        self._next_index = 1
        self._lock = threading.Lock()
        #: Lines written and rotations done (for tests and diagnostics).
        self.lines_written = 0
        self.rotations = 0

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(fd).st_size
        existing = rotated_files(self.path)
        if existing:
            match = _rotation_pattern(self.path).match(existing[-1].name)
            assert match is not None
            self._next_index = int(match.group(1)) + 1
        self._fd = fd
        return fd

    def _rotate(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        target = self.path.with_name(f"{self.path.stem}.{self._next_index}{self.path.suffix}")
        os.replace(self.path, target)
        self._next_index += 1
        self.rotations += 1
        if self._keep:
            for old in rotated_files(self.path)[: -self._keep]:
                with contextlib.suppress(FileNotFoundError):
                    old.unlink()

    def export(self, records: Sequence[SpanRecord]) -> None:
        self.export_finished(Batch(records, ""))

    def export_finished(self, batch: Batch) -> None:
        """Write finished spans straight from their raw form (no intermediate records)."""
        head, tail = self._resource.request_parts()
        pieces = _pieces(head, batch, tail + "\n")
        if len(pieces) == 1:
            return
        # Lone surrogates (undecodable statement bytes) become JSON \\u escapes.
        data = "".join(pieces).encode("utf-8", "backslashreplace")
        with self._lock:
            fd = self._fd if self._fd is not None else self._open()
            if self._size and self._size + len(data) > self._rotate_bytes:
                self._rotate()
                fd = self._open()
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            self._size += len(data)
            self.lines_written += 1

    def flush(self) -> None:
        """Nothing to do: every line is written straight to the descriptor, so readers see
        it at once; durability against a machine crash comes at :meth:`close`."""

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.fsync(self._fd)
                os.close(self._fd)
                self._fd = None

    def after_fork(self, path: Path, resource: Resource | None = None) -> None:
        """In a forked child: forget the parent's descriptor and write to ``path`` (as
        ``resource``, which names the child's pid)."""
        if resource is not None:
            self._resource = resource
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = None
        self._lock = threading.Lock()
        self.path = path


# --- OpenTelemetry SDK exporters -------------------------------------------------------------


class SdkSpanExporter:
    """Hands records to an OpenTelemetry SDK ``SpanExporter`` (OTLP, console, in-memory) as
    ``ReadableSpan`` objects."""

    def __init__(self, exporter: SpanExporter, resource: Resource) -> None:
        self.exporter = exporter
        self._resource = SdkResource(dict(resource.attributes))
        self._scope = InstrumentationScope(resource.scope_name, resource.scope_version)

    def _readable(self, record: SpanRecord) -> ReadableSpan:
        flags = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(record.trace_id, record.span_id, is_remote=False, trace_flags=flags)
        parent = None
        if record.parent_span_id:
            parent = SpanContext(
                record.trace_id, record.parent_span_id, is_remote=True, trace_flags=flags
            )
        status = Status(OtelStatus(int(record.status)), record.status_message or None)
        return ReadableSpan(
            name=record.name,
            context=context,
            parent=parent,
            resource=self._resource,
            attributes=dict(record.attributes),
            kind=OtelKind(int(record.kind) - 1),  # the API's enum counts from INTERNAL = 0
            instrumentation_scope=self._scope,
            status=status,
            start_time=record.start_ns,
            end_time=record.end_ns,
        )

    def export(self, records: Sequence[SpanRecord]) -> None:
        result = self.exporter.export([self._readable(record) for record in records])
        if result.name != "SUCCESS":
            logger.warning(
                "%s failed to export %d spans", type(self.exporter).__name__, len(records)
            )

    def flush(self) -> None:
        self.exporter.force_flush()

    def close(self) -> None:
        self.exporter.shutdown()


class MemoryExporter:
    """Keeps every record (tests, diagnostics)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[SpanRecord] = []
        self.closed = False

    @property
    def records(self) -> list[SpanRecord]:
        """Every record so far, in export order."""
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def export(self, records: Sequence[SpanRecord]) -> None:
        with self._lock:
            self._records.extend(records)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True
